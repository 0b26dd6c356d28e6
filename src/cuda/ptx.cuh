/*
 * ptx.cuh — inline-PTX wrappers of the tensor-core kernels (forward/, residual.cuh, quant.cu,
 * head_fwd.cuh's fp32 split; sm_80+ unless marked): thread-block clusters, cp.async,
 * shared stores, transaction barriers with bulk copies and TMA loads (sm_90+), named barriers, ldmatrix,
 * mma.sync (bf16 / fp16, 3xTF32 for fp32, int8 and fp8).  The sm_90a wgmma wrappers are
 * wgmma.cuh.
 */
#ifndef LIK_CUDA_PTX_CUH
#define LIK_CUDA_PTX_CUH

#include <cooperative_groups.h>

#include "common.cuh"

namespace lik_cuda {

/* Thread-block clusters (sm_90+; the launcher splits only with code built
 * for compute capability 9.0 or newer, and traps below otherwise). */
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __trap();
#endif
}
template <typename X>
__device__ __forceinline__ X *cluster_map(X *p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(p, rank);
#else
  (void)rank;
  __trap();
  return p;
#endif
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* Stores of 4 and 16 bytes at a shared-memory address (smem_u32). */
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void sts128(uint32_t addr, const uint32_t (&v)[4]) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src,
                                           int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(bytes));
}
/* N = 4 or 8 bytes through L1 (bytes = 0: zeros, nothing read) */
template <int N> __device__ __forceinline__ void cp_async_ca(uint32_t dst, const void *src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(N), "r"(bytes));
}
/* volatile, so they stay after a cp_async_wait (which has no memory clobber) */
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint2 lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Transaction barriers, 1-D bulk copies and TMA tensor loads (sm_90+; the
 * dense tiles, BULK, and the wgmma kernels' TMA variant): one thread issues
 * a document tile's copies, which complete on the stage's barrier; every
 * thread waits on it with its phase parity. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void bar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* arrives, expecting `bytes` of bulk copies (0: a plain arrive) */
__device__ __forceinline__ void bar_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void bar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n .reg .pred p;\n LIK_WAIT:\n"
               " mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n"
               " @!p bra LIK_WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
/* box (x, y, z) of a 3-D tensor map (out-of-range elements read as zero) */
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *map, int x, int y, int z,
                                            uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];\n"
               ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar) : "memory");
}
/* box (x, y) of a 2-D and box (x, y, z, w) of a 4-D tensor map (the fused
 * head's W and H_d, head_wg.cuh) */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int x, int y,
                                            uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap *map, int x, int y, int z,
                                            int w, uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
               ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(w), "r"(bar) : "memory");
}
#else
__device__ __forceinline__ void bar_init(uint32_t, int) { __trap(); }
__device__ __forceinline__ void bar_init_fence() { __trap(); }
__device__ __forceinline__ void bar_expect(uint32_t, uint32_t) { __trap(); }
__device__ __forceinline__ void bar_arrive(uint32_t) { __trap(); }
__device__ __forceinline__ void bar_wait(uint32_t, uint32_t) { __trap(); }
__device__ __forceinline__ void bulk_copy(uint32_t, const void *, uint32_t, uint32_t) { __trap(); }
__device__ __forceinline__ void tma_load_3d(uint32_t, const CUtensorMap *, int, int, int, uint32_t) {
  __trap();
}
__device__ __forceinline__ void tma_load_2d(uint32_t, const CUtensorMap *, int, int, uint32_t) {
  __trap();
}
__device__ __forceinline__ void tma_load_4d(uint32_t, const CUtensorMap *, int, int, int, int,
                                            uint32_t) {
  __trap();
}
#endif

/* Programmatic dependent launch (sm_90+; no-ops before): griddep_launch lets
 * the stream's next kernel, when launched with the programmatic stream
 * serialization attribute, start before this grid ends; griddep_wait, in
 * that kernel, returns once the grid before it has completed and its writes
 * are visible (at once in a kernel launched without the attribute). */
__device__ __forceinline__ void griddep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* Named CTA barrier `id` (1..15; 0 is __syncthreads) over `n` threads:
 * sync waits for n arrivals including its own warp's, arrive does not wait. */
__device__ __forceinline__ void named_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0,
                                        uint32_t &r1, uint32_t &r2,
                                        uint32_t &r3) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
      : "r"(addr));
}

__device__ __forceinline__ void ldsm_x2(uint32_t addr, uint32_t &r0, uint32_t &r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(addr));
}

/* One warp-wide mma.sync with accumulators c[4] (ACC: "+f" fp32, "+r"
 * s32), A fragment a[4], B fragment b[2] (the m16n8 register layouts);
 * SHAPE names shape and types. */
#define LIK_MMA_SYNC(SHAPE, ACC)                                               \
  asm volatile("mma.sync.aligned." SHAPE " {%0,%1,%2,%3}, {%4,%5,%6,%7}, "     \
               "{%8,%9}, {%0,%1,%2,%3};\n"                                    \
               : ACC(c[0]), ACC(c[1]), ACC(c[2]), ACC(c[3])                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),        \
                 "r"(b[1]))

template <typename T>
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a,
                                         const uint32_t *b);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float *c,
                                                        const uint32_t *a,
                                                        const uint32_t *b) {
  LIK_MMA_SYNC("m16n8k16.row.col.f32.bf16.bf16.f32", "+f");
}
template <>
__device__ __forceinline__ void mma16816<__half>(float *c, const uint32_t *a,
                                                 const uint32_t *b) {
  LIK_MMA_SYNC("m16n8k16.row.col.f32.f16.f16.f32", "+f");
}

/* fp32 inputs: one 32-byte k-step is k8 of mma.m16n8k8.tf32, three times
 * (3xTF32): x = big + small with big = x truncated to tf32 (never rounds up
 * to Inf), small = tf32(x - big) (an exact difference), and small*big +
 * big*small + big*big accumulate in fp32 (small*small, below 2^-20
 * relative, dropped) -- fp32 accuracy on the tensor cores.  An Inf in an
 * unmasked token makes its products NaN (Inf - Inf, Inf * 0), which the max
 * skips, where the CUDA-core kernel and the CPU give +-Inf.  The A / B
 * fragments hold the fp32 bits in the registers ldmatrix fills for k16 of
 * half types (same byte layout). */
__device__ __forceinline__ uint32_t tf32_rna(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void tf32_split(uint32_t x, uint32_t &big, uint32_t &small) {
  big = x & 0xffffe000u;
  small = tf32_rna(__uint_as_float(x) - __uint_as_float(big));
}
__device__ __forceinline__ void mma_tf32(float *c, const uint32_t *a, const uint32_t *b) {
  LIK_MMA_SYNC("m16n8k8.row.col.f32.tf32.tf32.f32", "+f");
}
template <>
__device__ __forceinline__ void mma16816<float>(float *c, const uint32_t *a,
                                                const uint32_t *b) {
  uint32_t ab[4], as[4], bb[2], bs[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) tf32_split(a[i], ab[i], as[i]);
#pragma unroll
  for (int i = 0; i < 2; ++i) tf32_split(b[i], bb[i], bs[i]);
  mma_tf32(c, as, bb);
  mma_tf32(c, ab, bs);
  mma_tf32(c, ab, bb);
}

/* 8-bit inputs, k32 (quant.cu): s8 x s8 -> s32 (sm_80+); e4m3 x e4m3 and
 * e5m2 x e5m2 -> f32 (sm_89+; empty below, where the launcher refuses fp8). */
__device__ __forceinline__ void mma_s8(int *c, const uint32_t *a, const uint32_t *b) {
  LIK_MMA_SYNC("m16n8k32.row.col.s32.s8.s8.s32", "+r");
}
__device__ __forceinline__ void mma_e4m3(float *c, const uint32_t *a, const uint32_t *b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  LIK_MMA_SYNC("m16n8k32.row.col.f32.e4m3.e4m3.f32", "+f");
#endif
}
__device__ __forceinline__ void mma_e5m2(float *c, const uint32_t *a, const uint32_t *b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  LIK_MMA_SYNC("m16n8k32.row.col.f32.e5m2.e5m2.f32", "+f");
#endif
}

} // namespace lik_cuda

#endif
