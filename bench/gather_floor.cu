// gather_floor.cu — the loads of the full residual scan alone, against the dense
// bf16 read (bench/RESULTS.md, "The full scan's floor"; issue 29 item 2): T tokens
// of a compressed corpus (int32 codes, 32 residual bytes a token: d 128 at nbits 2)
// against C fp16 centroid rows of 256 bytes, no decode and no arithmetic but an XOR
// of everything loaded, by
//   dense      the dense bf16 corpus [T, 128] read in 16-byte loads, 512 contiguous
//              bytes per warp instruction (what lik's dense MaxSim must read);
//   scan       the residual scan's loads (src/cuda/residual_scan.cuh): a warp's 16
//              tokens, thread (g, t) loading token g's code, its 4 centroid chunks
//              8 (t / 2) + 2m + t % 2 and 8 residual bytes at 8t;
//   lines      the centroid gather at its best: 16 lanes per 256-byte row, so that
//              each 16-byte load instruction reads 4 whole 128-byte lines, the
//              codes and residual bytes as in scan;
//   codes+res  the codes and residual bytes alone (what the scan reads from HBM).
// Codes uniform in [0, C) (fast-plaid's C for T: 2^floor(log2(16 sqrt(T))));
// microseconds from the median of 20 launches (CUDA events).  sm_90; no library.
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o gather_floor bench/gather_floor.cu
//   ./gather_floor [T]
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                     \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

__device__ __forceinline__ unsigned fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

__global__ void __launch_bounds__(256) k_dense(const uint4 *x, int64_t n16, unsigned *out) {
  unsigned acc = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; u++) v[u] = i + u * stride < n16 ? __ldg(x + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; u++) acc ^= fold(v[u]);
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads
}

// 16 tokens a warp per step, U steps in flight
template <bool LINES, bool CENT>
__global__ void __launch_bounds__(128) k_scan(const int *codes, const uint4 *cent, const uint8_t *res, int64_t T,
                                              unsigned *out) {
  constexpr int U = 2;
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
  const int64_t nw = (int64_t)gridDim.x * 4, gw = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
  unsigned acc = 0;
  for (int64_t b0 = gw * 16; b0 < T; b0 += nw * 16 * U) {
    int code[U][2];
    uint2 r[U][2];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int n = 0; n < 2; n++) {
        const int64_t tok = b0 + u * nw * 16 + 8 * n + g;
        code[u][n] = tok < T ? __ldg(codes + tok) : -1;
        r[u][n] = tok < T ? __ldg((const uint2 *)(res + tok * 32) + t) : make_uint2(0, 0);
      }
    if (CENT) {
      uint4 c[U][2][4];
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
          for (int m = 0; m < 4; m++) {
            if (LINES) {  // lanes 16h .. 16h+15 read token 8n + 2m + h's row, 16 bytes each
              const int src = 4 * (2 * m + (lane >> 4));  // a lane holding that token's code
              const int cc = __shfl_sync(0xffffffffu, code[u][n], src);
              c[u][n][m] = cc >= 0 ? __ldg(cent + (int64_t)cc * 16 + (lane & 15)) : make_uint4(0, 0, 0, 0);
            } else {
              c[u][n][m] = code[u][n] >= 0 ? __ldg(cent + (int64_t)code[u][n] * 16 + 8 * (t >> 1) + (t & 1) + 2 * m)
                                           : make_uint4(0, 0, 0, 0);
            }
          }
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
          for (int m = 0; m < 4; m++) acc ^= fold(c[u][n][m]);
    }
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int n = 0; n < 2; n++) acc ^= r[u][n].x ^ r[u][n].y ^ (unsigned)code[u][n];
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

template <typename F>
static float time_us(F launch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; i++) launch();
  std::vector<float> ts;
  for (int i = 0; i < 20; i++) {
    cudaEventRecord(a);
    launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    ts.push_back(ms * 1000.f);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int main(int argc, char **argv) {
  const int64_t T = argc > 1 ? atoll(argv[1]) : 3000000;
  const int64_t C = (int64_t)1 << (int)std::floor(std::log2(16.0 * std::sqrt((double)T)));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::vector<int> hc(T);
  uint64_t s = 88172645463325252ull;
  for (auto &c : hc) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    c = (int)(s % (uint64_t)C);
  }
  int *codes;
  uint4 *cent, *dense;
  uint8_t *res;
  unsigned *out;
  CK(cudaMalloc(&codes, T * 4));
  CK(cudaMalloc(&cent, C * 256));
  CK(cudaMalloc(&res, T * 32));
  CK(cudaMalloc(&dense, T * 256));
  CK(cudaMalloc(&out, 4));
  CK(cudaMemcpy(codes, hc.data(), T * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(cent, 1, C * 256));
  CK(cudaMemset(res, 2, T * 32));
  CK(cudaMemset(dense, 3, T * 256));
  const int sms = prop.multiProcessorCount;
  const float td = time_us([&] { k_dense<<<sms * 8, 256>>>(dense, T * 16, out); });
  const float ts = time_us([&] { k_scan<false, true><<<sms * 12, 128>>>(codes, cent, res, T, out); });
  const float tl = time_us([&] { k_scan<true, true><<<sms * 12, 128>>>(codes, cent, res, T, out); });
  const float tr = time_us([&] { k_scan<false, false><<<sms * 12, 128>>>(codes, cent, res, T, out); });
  CK(cudaDeviceSynchronize());
  printf("# gather_floor  %s  T %lld  C %lld (%.1f MB of fp16 centroids)\n", prop.name, (long long)T,
         (long long)C, C * 256 / 1e6);
  printf("| loads | us | tokens/s | GB/s of what they read |\n|---|---|---|---|\n");
  printf("| dense bf16 rows (256 B a token) | %.1f | %.3g | %.0f |\n", td, T / td * 1e6, T * 256.0 / td / 1e3);
  printf("| scan: codes + residual + centroid chunks (292 B a token) | %.1f | %.3g | %.0f |\n", ts, T / ts * 1e6,
         T * 292.0 / ts / 1e3);
  printf("| lines: the same, centroid rows as whole lines | %.1f | %.3g | %.0f |\n", tl, T / tl * 1e6,
         T * 292.0 / tl / 1e3);
  printf("| codes + residual only (36 B a token) | %.1f | %.3g | %.0f |\n", tr, T / tr * 1e6, T * 36.0 / tr / 1e3);
  return 0;
}
