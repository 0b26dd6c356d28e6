/*
 * wgmma.cuh — the sm_90a warpgroup MMA primitives of the Hopper path of the
 * tensor-core kernel (forward/kernel.cuh, WgCfg in forward/tiles.cuh).
 *
 *   wgmma_rs<T, N>  (N = 64, 104, 128)
 *                   wgmma.mma_async m64nNk16 (bf16 / fp16) or m64nNk8.tf32
 *                   (fp32 bits; B's low 13 mantissa bits ignored, so A
 *                   comes rounded), A (64 query rows x 32 bytes) from
 *                   registers in the mma.sync A-fragment layout (warp w of
 *                   the warpgroup holds rows 16w..16w+15), B (N document
 *                   tokens x 32 bytes) from shared memory through a
 *                   descriptor, fp32 accumulators in the m16n8 C layout
 *                   repeated over N/8 column blocks; acc = 0 overwrites.
 *   wgmma_ss<T, N>  (N = 64, 128; bf16 / fp16) m64nNk16 with A (64 rows x
 *                   32 bytes) and B (N rows x 32 bytes) both from shared
 *                   memory through descriptors (wg_desc: K-major, 128-byte
 *                   swizzle); fp32 accumulators as wgmma_rs's (the fused
 *                   head's projection and MaxSim, head_wg.cuh).
 *   wgmma_8bit_64<T> m64n64k32 s8 -> s32, e4m3 / e5m2 -> f32, A from
 *                   registers (the mma.sync m16n8k32 layout), B through a
 *                   descriptor (quant.cu's tile kernels).
 *   wgmma_8bit_128<T> m64n128k32, the same operands over 128 tokens
 *                   (quant.cu's tile_ws_kernel with two m-tiles).
 *   wgmma_s8_32     m64n32k32 s8 -> s32, the same operands (quant.cu's
 *                   signs_doc_kernel).
 *   wgmma_8bit_ss32<T> m64n32k32 of wgmma_8bit_64's types, A (64 document
 *                   tokens) and B (32 query rows) both through descriptors
 *                   (quant.cu's doc_ws_kernel).
 *   wg_desc         descriptor of a K-major tile in the 128-byte swizzle:
 *                   row r (token) at r * 128 bytes, 16-byte chunk c of the
 *                   row at chunk c ^ (r % 8), tile 1024-byte aligned;
 *                   stride between 8-row groups 1024 bytes; a k-step
 *                   inside the 128-byte atom advances the start by 32 B
 *                   (wg_desc_add).
 *
 * Compiled for sm_90a only (wgmma does not exist elsewhere); on other
 * targets the functions trap, and the launcher never selects this path
 * there (launch.cu: wgmma_ok()).
 */
#ifndef LIK_CUDA_WGMMA_CUH
#define LIK_CUDA_WGMMA_CUH

#include "common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LIK_WGMMA_DEVICE 1
#endif

namespace lik_cuda {

__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr) {
  return (uint64_t)((saddr & 0x3FFFF) >> 4) | (1ull << 16) /* LBO: unused */
         | (64ull << 32) /* SBO: 1024 B */ | (1ull << 62) /* 128B swizzle */;
}
/* desc's tile start advanced by bytes (a multiple of 16): the start field
 * holds address / 16 of a shared memory below 256 KB, so the sum stays in
 * it -- one add instead of a new descriptor per k-step */
__device__ __forceinline__ uint64_t wg_desc_add(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

#ifdef LIK_WGMMA_DEVICE
__device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/* waits until at most N committed wgmma groups are still in flight */
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* cp.async / st.shared writes -> visible to the async proxy (wgmma reads) */
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* This warpgroup's registers per thread set to N (a multiple of 8 in [24,
 * 256]; every warp of the warpgroup executes it): inc waits until the
 * registers are free, dec releases them to the CTA's other warpgroups. */
template <int N> __device__ __forceinline__ void wg_regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void wg_regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
#else
template <int N> __device__ __forceinline__ void wg_regs_inc() { __trap(); }
template <int N> __device__ __forceinline__ void wg_regs_dec() { __trap(); }
__device__ __forceinline__ void wg_fence() { __trap(); }
__device__ __forceinline__ void wg_commit() { __trap(); }
template <int N> __device__ __forceinline__ void wg_wait() { __trap(); }
__device__ __forceinline__ void fence_proxy_async() { __trap(); }
#endif

/* Keeps the compiler from moving accumulator accesses across an async
 * wgmma (the registers belong to the tensor core until wg_wait). */
__device__ __forceinline__ void reg_fence(float &x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void reg_fence(int &x) { asm volatile("" : "+r"(x)::"memory"); }
template <int N, class T>
__device__ __forceinline__ void wg_fence_regs(T *d) {
#pragma unroll
  for (int i = 0; i < N; ++i) reg_fence(d[i]);
}

#ifdef LIK_WGMMA_DEVICE
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs(float *d, const uint32_t *a,
                                         uint64_t desc, int acc);

/* Per N: the predicate's operand, the registers (N/2 accumulators, 4 A
 * registers, the descriptor) and the accumulator constraints. */
#define LIK_WG_ACC8(i)                                                                      \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define LIK_WG_PRED_64 "%37"
#define LIK_WG_REGS_64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},\n"  \
  "{%32, %33, %34, %35}, %36, p"
#define LIK_WG_ACC_64 LIK_WG_ACC8(0), LIK_WG_ACC8(8), LIK_WG_ACC8(16), LIK_WG_ACC8(24)
#define LIK_WG_PRED_104 "%57"
#define LIK_WG_REGS_104 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51},\n"  \
  "{%52, %53, %54, %55}, %56, p"
#define LIK_WG_ACC_104 \
  LIK_WG_ACC_64, LIK_WG_ACC8(32), LIK_WG_ACC8(40), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51])
#define LIK_WG_PRED_128 "%69"
#define LIK_WG_REGS_128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},\n"  \
  "{%64, %65, %66, %67}, %68, p"
#define LIK_WG_ACC_128 \
  LIK_WG_ACC_64, LIK_WG_ACC8(32), LIK_WG_ACC8(40), LIK_WG_ACC8(48), LIK_WG_ACC8(56)

/* One specialisation per (dtype, N): the shape and PTX types (k16 of a half
 * type, k8 of tf32: 32 bytes of a row either way) and the immediates
 * (scale-a, scale-b, and for half types B not transposed). */
#define LIK_WGMMA_RS(T, N, SHAPE_TYPES, IMM)                                                  \
  template <>                                                                                 \
  __device__ __forceinline__ void wgmma_rs<T, N>(float *d, const uint32_t *a, uint64_t desc,  \
                                                 int acc) {                                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " LIK_WG_PRED_##N ", 0;\n"                 \
                 "wgmma.mma_async.sync.aligned." SHAPE_TYPES "\n" LIK_WG_REGS_##N IMM ";\n}\n" \
                 : LIK_WG_ACC_##N                                                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));          \
  }

LIK_WGMMA_RS(__nv_bfloat16, 64, "m64n64k16.f32.bf16.bf16", ", 1, 1, 0")
LIK_WGMMA_RS(__half, 64, "m64n64k16.f32.f16.f16", ", 1, 1, 0")
LIK_WGMMA_RS(float, 64, "m64n64k8.f32.tf32.tf32", ", 1, 1")
LIK_WGMMA_RS(__nv_bfloat16, 104, "m64n104k16.f32.bf16.bf16", ", 1, 1, 0")
LIK_WGMMA_RS(__half, 104, "m64n104k16.f32.f16.f16", ", 1, 1, 0")
LIK_WGMMA_RS(float, 104, "m64n104k8.f32.tf32.tf32", ", 1, 1")
LIK_WGMMA_RS(__nv_bfloat16, 128, "m64n128k16.f32.bf16.bf16", ", 1, 1, 0")
LIK_WGMMA_RS(__half, 128, "m64n128k16.f32.f16.f16", ", 1, 1, 0")
LIK_WGMMA_RS(float, 128, "m64n128k8.f32.tf32.tf32", ", 1, 1")
#undef LIK_WGMMA_RS

/* m64n128k32 of 8-bit inputs (T as wgmma_8bit_64's below), the same
 * operands over 16 column blocks (quant.cu's tile_ws_kernel: a whole
 * 128-token tile per m-tile). */
template <int T, class A>
__device__ __forceinline__ void wgmma_8bit_128(A *d, const uint32_t *a, uint64_t desc, int acc);

#define LIK_WG_ACC8C(C, i) \
  C(d[i]), C(d[i + 1]), C(d[i + 2]), C(d[i + 3]), C(d[i + 4]), C(d[i + 5]), C(d[i + 6]), C(d[i + 7])
#define LIK_WGMMA_8BIT_128(T, A, TYPES, C, SCALES)                                               \
  template <>                                                                                    \
  __device__ __forceinline__ void wgmma_8bit_128<T, A>(A * d, const uint32_t *a, uint64_t desc,  \
                                                       int acc) {                                \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " LIK_WG_PRED_128 ", 0;\n"                   \
                 "wgmma.mma_async.sync.aligned.m64n128k32." TYPES "\n" LIK_WG_REGS_128 SCALES    \
                 ";\n}\n"                                                                       \
                 : LIK_WG_ACC8C(C, 0), LIK_WG_ACC8C(C, 8), LIK_WG_ACC8C(C, 16), LIK_WG_ACC8C(C, 24), \
                   LIK_WG_ACC8C(C, 32), LIK_WG_ACC8C(C, 40), LIK_WG_ACC8C(C, 48), LIK_WG_ACC8C(C, 56) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));             \
  }

LIK_WGMMA_8BIT_128(0, int, "s32.s8.s8", "+r", "")
LIK_WGMMA_8BIT_128(1, float, "f32.e4m3.e4m3", "+f", ", 1, 1")
LIK_WGMMA_8BIT_128(2, float, "f32.e5m2.e5m2", "+f", ", 1, 1")
#undef LIK_WGMMA_8BIT_128
#undef LIK_WG_ACC8C

template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float *d, uint64_t da, uint64_t db, int acc);

/* Per N of the shared-memory form: the predicate's operand and the
 * registers (N/2 accumulators, the two descriptors). */
#define LIK_WG_SSPRED_64 "%34"
#define LIK_WG_SSREGS_64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},\n"  \
  "%32, %33, p"
#define LIK_WG_SSPRED_128 "%66"
#define LIK_WG_SSREGS_128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},\n"  \
  "%64, %65, p"
/* scale-a, scale-b 1; A and B K-major (not transposed) */
#define LIK_WGMMA_SS(T, N, SHAPE_TYPES)                                                        \
  template <>                                                                                  \
  __device__ __forceinline__ void wgmma_ss<T, N>(float *d, uint64_t da, uint64_t db, int acc) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " LIK_WG_SSPRED_##N ", 0;\n"                \
                 "wgmma.mma_async.sync.aligned." SHAPE_TYPES "\n" LIK_WG_SSREGS_##N            \
                 ", 1, 1, 0, 0;\n}\n"                                                           \
                 : LIK_WG_ACC_##N                                                              \
                 : "l"(da), "l"(db), "r"(acc));                                                \
  }

LIK_WGMMA_SS(__nv_bfloat16, 64, "m64n64k16.f32.bf16.bf16")
LIK_WGMMA_SS(__half, 64, "m64n64k16.f32.f16.f16")
LIK_WGMMA_SS(__nv_bfloat16, 128, "m64n128k16.f32.bf16.bf16")
LIK_WGMMA_SS(__half, 128, "m64n128k16.f32.f16.f16")
#undef LIK_WGMMA_SS
#undef LIK_WG_SSPRED_64
#undef LIK_WG_SSREGS_64
#undef LIK_WG_SSPRED_128
#undef LIK_WG_SSREGS_128
#undef LIK_WG_ACC8
#undef LIK_WG_PRED_64
#undef LIK_WG_REGS_64
#undef LIK_WG_ACC_64
#undef LIK_WG_PRED_104
#undef LIK_WG_REGS_104
#undef LIK_WG_ACC_104
#undef LIK_WG_PRED_128
#undef LIK_WG_REGS_128
#undef LIK_WG_ACC_128
#else
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs(float *, const uint32_t *, uint64_t, int) {
  __trap();
}
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float *, uint64_t, uint64_t, int) {
  __trap();
}
template <int T, class A>
__device__ __forceinline__ void wgmma_8bit_128(A *, const uint32_t *, uint64_t, int) { __trap(); }
#endif

/* wgmma.mma_async m64n64k32 of 8-bit inputs (quant.cu's tile kernel),
 * T = 0: s8 x s8 -> s32; 1: e4m3 x e4m3 -> f32; 2: e5m2 x e5m2 -> f32.  A
 * (64 query rows x 32 bytes) from registers in the mma.sync m16n8k32
 * A-fragment layout (warp w of the warpgroup holds rows 16w..16w+15), B (64
 * document tokens x 32 bytes) through a descriptor (wg_desc), accumulators
 * in the m16n8 C layout over 8 column blocks; acc = 0 overwrites. */
#ifdef LIK_WGMMA_DEVICE
template <int T, class A>
__device__ __forceinline__ void wgmma_8bit_64(A *d, const uint32_t *a, uint64_t desc, int acc);

/* one specialisation per input type: PTX types, accumulator constraint C,
 * the fp8 forms' imm-scale-a / imm-scale-b */
#define LIK_WGMMA_8BIT_64(T, A, TYPES, C, SCALES)                                                 \
  template <>                                                                                     \
  __device__ __forceinline__ void wgmma_8bit_64<T, A>(A * d, const uint32_t *a, uint64_t desc,    \
                                                      int acc) {                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                    \
                 "wgmma.mma_async.sync.aligned.m64n64k32." TYPES "\n"                            \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},\n"  \
                 "{%32, %33, %34, %35}, %36, p" SCALES ";\n}\n"                                 \
                 : C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]), C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15]), C(d[16]), C(d[17]), C(d[18]), C(d[19]), C(d[20]), C(d[21]), C(d[22]), C(d[23]), C(d[24]), C(d[25]), C(d[26]), C(d[27]), C(d[28]), C(d[29]), C(d[30]), C(d[31]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));              \
  }

LIK_WGMMA_8BIT_64(0, int, "s32.s8.s8", "+r", "")
LIK_WGMMA_8BIT_64(1, float, "f32.e4m3.e4m3", "+f", ", 1, 1")
LIK_WGMMA_8BIT_64(2, float, "f32.e5m2.e5m2", "+f", ", 1, 1")
#undef LIK_WGMMA_8BIT_64

/* m64n32k32 s8 x s8 -> s32, A from registers, B (32 rows x 32 bytes)
 * through a descriptor, accumulators in the m16n8 C layout over 4 column
 * blocks (quant.cu's signs_doc_kernel: document tokens as the rows). */
__device__ __forceinline__ void wgmma_s8_32(int *d, const uint32_t *a, uint64_t desc, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8\n"
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15},\n"
               "{%16, %17, %18, %19}, %20, p;\n}\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]),
                 "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]),
                 "+r"(d[14]), "+r"(d[15])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc));
}

/* m64n32k32 of 8-bit inputs (T as wgmma_8bit_64's), A (64 document tokens
 * x 32 bytes) and B (32 query rows x 32 bytes) both through descriptors
 * (wg_desc), accumulators in the m16n8 C layout over 4 column blocks
 * (quant.cu's doc_ws_kernel). */
template <int T, class A>
__device__ __forceinline__ void wgmma_8bit_ss32(A *d, uint64_t da, uint64_t db, int acc);

#define LIK_WGMMA_8BIT_SS32(T, A, TYPES, C, SCALES)                                               \
  template <>                                                                                     \
  __device__ __forceinline__ void wgmma_8bit_ss32<T, A>(A * d, uint64_t da, uint64_t db,          \
                                                        int acc) {                                \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                    \
                 "wgmma.mma_async.sync.aligned.m64n32k32." TYPES "\n"                            \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15},\n"     \
                 "%16, %17, p" SCALES ";\n}\n"                                                  \
                 : C(d[0]), C(d[1]), C(d[2]), C(d[3]), C(d[4]), C(d[5]), C(d[6]), C(d[7]),        \
                   C(d[8]), C(d[9]), C(d[10]), C(d[11]), C(d[12]), C(d[13]), C(d[14]), C(d[15])   \
                 : "l"(da), "l"(db), "r"(acc));                                                   \
  }

LIK_WGMMA_8BIT_SS32(0, int, "s32.s8.s8", "+r", "")
LIK_WGMMA_8BIT_SS32(1, float, "f32.e4m3.e4m3", "+f", ", 1, 1")
LIK_WGMMA_8BIT_SS32(2, float, "f32.e5m2.e5m2", "+f", ", 1, 1")
#undef LIK_WGMMA_8BIT_SS32
#else
template <int T, class A>
__device__ __forceinline__ void wgmma_8bit_64(A *, const uint32_t *, uint64_t, int) { __trap(); }
__device__ __forceinline__ void wgmma_s8_32(int *, const uint32_t *, uint64_t, int) { __trap(); }
template <int T, class A>
__device__ __forceinline__ void wgmma_8bit_ss32(A *, uint64_t, uint64_t, int) { __trap(); }
#endif

} // namespace lik_cuda

#endif
