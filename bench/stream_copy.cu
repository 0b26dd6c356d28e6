// stream_copy.cu — the copy test behind lik's sm_90 loaders (bench/RESULTS.md,
// "Copy test"; docs/cuda.md, v11): N documents of L rows x RB bytes streamed
// through a shared-memory ring, one CTA per document, no arithmetic, by
//   cp.async   16-byte cp.async per thread into padded rows (lik's loader up to v10),
//   tma        a 3-D tensor map, boxes of 64 half features x 64 rows, 128-byte swizzle,
//   bulk       one 1-D cp.async.bulk per tile into unpadded rows,
//   rowbulk    one 1-D cp.async.bulk per row into padded rows;
// TB/s from the median of 20 launches alternating two buffers (CUDA events).
// sm_90 only.  Build and run (no library needed):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o stream_copy bench/stream_copy.cu
//   ./stream_copy
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

__device__ __forceinline__ uint32_t su(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(uint64_t *b, int n) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(su(b)), "r"(n));
}
__device__ __forceinline__ void bar_expect(uint64_t *b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(su(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t *b, uint32_t par) {
  asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n@!p bra W;\n}\n" ::"r"(su(b)), "r"(par) : "memory");
}

template <int STAGES, int BD, int NT, int RB>
__global__ void __launch_bounds__(NT) k_cp(const char *D, int L, unsigned *out) {
  extern __shared__ __align__(128) char sm[];
  constexpr int RBP = RB + 16, CPR = RB / 16;
  const char *doc = D + (size_t)blockIdx.x * L * RB;
  const int ntiles = (L + BD - 1) / BD;
  auto issue = [&](int t, int st) {
    const int rows = min(BD, L - t * BD);
    for (int u = threadIdx.x; u < rows * CPR; u += NT) {
      const int r = u / CPR, ch = u % CPR;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(su(sm + st * BD * RBP + r * RBP + ch * 16)),
                   "l"(doc + ((size_t)t * BD + r) * RB + ch * 16));
    }
  };
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ntiles) issue(s, s);
    asm volatile("cp.async.commit_group;\n");
  }
  unsigned acc = 0;
  for (int t = 0; t < ntiles; ++t) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
    __syncthreads();
    const int nt = t + STAGES - 1;
    if (nt < ntiles) issue(nt, nt % STAGES);
    asm volatile("cp.async.commit_group;\n");
    const char *b = sm + (t % STAGES) * BD * RBP;
    for (int r = threadIdx.x; r < BD; r += NT) acc ^= *(const unsigned *)(b + r * RBP);
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// MODE 0: TMA, NATOM boxes of {64 elements, BD rows}; 1: one bulk copy of rows * RB bytes; 2: one per row
template <int STAGES, int BD, int NT, int RB, int MODE>
__global__ void __launch_bounds__(NT) k_tma(const __grid_constant__ CUtensorMap tm, const char *D, int L, unsigned *out) {
  extern __shared__ __align__(1024) char sm0[];
  __shared__ uint64_t bar[STAGES];
  char *sm = sm0 + ((1024 - (su(sm0) & 1023)) & 1023);
  constexpr int NATOM = (RB + 127) / 128;
  constexpr int SB = MODE == 0 ? BD * 128 * NATOM : MODE == 2 ? BD * (RB + 16) : BD * RB;
  const int ntiles = (L + BD - 1) / BD;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) bar_init(&bar[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int t, int st) {
    const uint32_t dst = su(sm + st * SB);
    if (MODE == 0) {
      bar_expect(&bar[st], SB);
      for (int a = 0; a < NATOM; ++a)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                     ::"r"(dst + a * BD * 128), "l"(&tm), "r"(a * 64), "r"(t * BD), "r"((int)blockIdx.x), "r"(su(&bar[st]))
                     : "memory");
    } else if (MODE == 2) {
      const int rows = min(BD, L - t * BD);
      if ((threadIdx.x & 31) == 0) bar_expect(&bar[st], rows * RB);
      __syncwarp();
      for (int r = threadIdx.x & 31; r < rows; r += 32)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                     ::"r"(su(sm + st * SB + r * (RB + 16))), "l"(D + ((size_t)blockIdx.x * L + (size_t)t * BD + r) * RB), "r"(RB), "r"(su(&bar[st]))
                     : "memory");
    } else {
      const int rows = min(BD, L - t * BD);
      bar_expect(&bar[st], rows * RB);
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                   ::"r"(dst), "l"(D + ((size_t)blockIdx.x * L + (size_t)t * BD) * RB), "r"(rows * RB), "r"(su(&bar[st]))
                   : "memory");
    }
  };
  const bool prod = MODE == 2 ? threadIdx.x < 32 : threadIdx.x == 0;
  if (prod)
    for (int s = 0; s < STAGES - 1 && s < ntiles; ++s) issue(s, s);
  unsigned acc = 0;
  for (int t = 0; t < ntiles; ++t) {
    const int st = t % STAGES;
    bar_wait(&bar[st], (t / STAGES) & 1);
    __syncthreads();
    const int nt = t + STAGES - 1;
    if (prod && nt < ntiles) issue(nt, nt % STAGES);
    const char *b = sm + st * SB;
    for (int r = threadIdx.x; r < BD; r += NT) acc ^= *(const unsigned *)(b + r * (MODE == 0 ? 128 : MODE == 2 ? RB + 16 : RB));
  }
  if (acc == 0x12345678u) out[0] = acc;
}

__global__ void fill(uint32_t *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = x & 0x3bff3bffu; // finite halves
  }
}

static PFN_cuTensorMapEncodeTiled_v12000 enc;

template <class K>
static void timeit(const char *name, K launch, double bytes, int smem, const void *kfn, int nt) {
  int occ = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kfn, nt, smem);
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> v;
  for (int i = 0; i < 24; ++i) {
    cudaEventRecord(a);
    launch(i & 1);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    if (i >= 4) v.push_back(ms * 1000);
  }
  std::sort(v.begin(), v.end());
  cudaError_t e = cudaGetLastError();
  printf("%-34s occ %2d  %8.1f us  %5.2f TB/s %s\n", name, occ, v[v.size() / 2], bytes / v[v.size() / 2] / 1e6,
         e ? cudaGetErrorString(e) : "");
}

template <int STAGES, int BD, int NT, int RB>
static void run_cp(char **buf, int N, int L, unsigned *out) {
  const int smem = STAGES * BD * (RB + 16);
  auto k = k_cp<STAGES, BD, NT, RB>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  char name[64];
  snprintf(name, 64, "cp.async S%d BD%d NT%d", STAGES, BD, NT);
  timeit(name, [&](int i) { k<<<N, NT, smem>>>(buf[i], L, out); }, (double)N * L * RB, smem, (const void *)k, NT);
}

template <int STAGES, int BD, int NT, int RB, int MODE>
static void run_tma(char **buf, CUtensorMap *tm, int N, int L, unsigned *out) {
  constexpr int NATOM = (RB + 127) / 128;
  const int smem = STAGES * (MODE == 0 ? BD * 128 * NATOM : MODE == 2 ? BD * (RB + 16) : BD * RB) + 1024;
  auto k = k_tma<STAGES, BD, NT, RB, MODE>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  char name[64];
  snprintf(name, 64, "%s S%d BD%d NT%d", MODE == 0 ? "tma" : MODE == 2 ? "rowbulk" : "bulk", STAGES, BD, NT);
  timeit(name, [&](int i) { k<<<N, NT, smem>>>(tm[i], buf[i], L, out); }, (double)N * L * RB, smem, (const void *)k, NT);
}

template <int RB>
static void suite(int N, int L) {
  const size_t bytes = (size_t)N * L * RB;
  char *buf[2];
  unsigned *out;
  cudaMalloc(&out, 4);
  CUtensorMap tm[2];
  for (int i = 0; i < 2; ++i) {
    cudaMalloc(&buf[i], bytes);
    fill<<<1024, 256>>>((uint32_t *)buf[i], bytes / 4, 77u + i);
    cuuint64_t dims[3] = {(cuuint64_t)(RB / 2), (cuuint64_t)L, (cuuint64_t)N};
    cuuint64_t strides[2] = {(cuuint64_t)RB, (cuuint64_t)L * RB};
    cuuint32_t box[3] = {64, 64, 1}, es[3] = {1, 1, 1};
    CUresult r = enc(&tm[i], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, buf[i], dims, strides, box, es,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r) printf("encode failed %d\n", (int)r);
  }
  cudaDeviceSynchronize();
  printf("== N %d L %d RB %d: %.1f MB\n", N, L, RB, bytes / 1e6);
  if constexpr (RB <= 128) {
    run_cp<3, 64, 64, RB>(buf, N, L, out);
    run_cp<4, 64, 64, RB>(buf, N, L, out);
    run_cp<4, 128, 128, RB>(buf, N, L, out);
  } else {
    run_cp<3, 64, 128, RB>(buf, N, L, out);
    run_cp<4, 64, 128, RB>(buf, N, L, out);
  }
  run_tma<3, 64, 64, RB, 0>(buf, tm, N, L, out);


  run_tma<4, 64, 128, RB, 0>(buf, tm, N, L, out);
  run_tma<3, 64, 64, RB, 1>(buf, tm, N, L, out);
  run_tma<4, 64, 64, RB, 1>(buf, tm, N, L, out);
  run_tma<6, 64, 64, RB, 1>(buf, tm, N, L, out);
  run_tma<3, 64, 64, RB, 2>(buf, tm, N, L, out);
  run_tma<4, 64, 64, RB, 2>(buf, tm, N, L, out);
  run_tma<4, 64, 128, RB, 2>(buf, tm, N, L, out);
  run_tma<3, 128, 128, RB, 1>(buf, tm, N, L, out);
  run_tma<3, 128, 128, RB, 2>(buf, tm, N, L, out);
  for (int i = 0; i < 2; ++i) cudaFree(buf[i]);
  cudaFree(out);
}

int main() {
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&enc, 12000, cudaEnableDefault, &q) || !enc) {
    printf("no cuTensorMapEncodeTiled\n");
    return 1;
  }
  suite<96>(1000, 2048);
  suite<96>(4000, 2048);
  suite<256>(1000, 300);
  suite<256>(10000, 300);
  suite<128>(10000, 300);
  return 0;
}
