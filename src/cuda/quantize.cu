/*
 * quantize.cu — the quantisers on CUDA tensors (lik_quantize_int8 /
 * lik_quantize_binary, lik_experimental.h): one thread per token, its
 * features in ascending order, each fp32 operation of src/cpu/quant.c's
 * quant_task rounded on its own (__fmul_rn / __fadd_rn / __fdiv_rn /
 * __fsqrt_rn: no contraction), so that values, bits and scales are bitwise
 * the CPU's (the x86-64 build, whose portable C has no FMA).  Queries and
 * corpora are quantised where they are, without a copy to the host.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "host.cuh"

extern "C" {
#include "../core/quant.h"
}

namespace {

/* The leading dims of a call: token t's offsets in X, the output and the
 * scales (lik_quantize_problem's, the lead dims innermost last). */
struct QuantP {
  const void *x;
  void *out;
  float *scale; /* NULL: bits */
  int64_t ntok, d, sxk, sok;
  int nlead;
  int64_t lead[LIK_MAX_DIMS - 1], sx[LIK_MAX_DIMS - 1], so[LIK_MAX_DIMS - 1], ss[LIK_MAX_DIMS - 1];
  int normalize;
};

template <typename T> __device__ __forceinline__ float load_x(const T *x, int64_t i) {
  if constexpr (std::is_same<T, double>::value) return (float)x[i]; /* to nearest, as the host */
  else return lik_cuda::to_f(x[i]);
}

/* Token t of X: int8 values q = rint(x / scale) clamped to [-127, 127]
 * (NaN -> -127), scale = max|x| / 127 (0: all zeros), / max(||x||, eps)
 * where normalize; or (scale NULL) bit 7 - k % 8 of byte k / 8 set where x_k
 * > 0. */
template <typename T>
__global__ void __launch_bounds__(256) quantize_kernel(QuantP P) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= P.ntok) return;
  int64_t xo = 0, oo = 0, so = 0, rest = t;
  for (int i = P.nlead - 1; i >= 0; i--) {
    const int64_t ix = rest % P.lead[i];
    rest /= P.lead[i];
    xo += ix * P.sx[i];
    oo += ix * P.so[i];
    so += ix * P.ss[i];
  }
  const T *x = static_cast<const T *>(P.x) + xo;
  uint8_t *out = static_cast<uint8_t *>(P.out) + oo;
  if (!P.scale) {
    const int64_t nbytes = (P.d + 7) / 8;
    for (int64_t b = 0; b < nbytes; b++) {
      uint32_t v = 0;
      for (int64_t k = 8 * b; k < 8 * b + 8 && k < P.d; k++)
        if (load_x(x, k * P.sxk) > 0.0f) v |= 0x80u >> (k % 8);
      out[b * P.sok] = (uint8_t)v;
    }
    return;
  }
  float amax = 0.0f, ss = 0.0f;
  for (int64_t k = 0; k < P.d; k++) {
    const float v = load_x(x, k * P.sxk), a = fabsf(v);
    amax = a > amax ? a : amax;
    ss = __fadd_rn(ss, __fmul_rn(v, v));
  }
  const float scale = __fdiv_rn(amax, 127.0f);
  for (int64_t k = 0; k < P.d; k++) {
    float r = scale > 0.0f ? rintf(__fdiv_rn(load_x(x, k * P.sxk), scale)) : 0.0f;
    if (!(r > -127.0f)) r = -127.0f;
    if (r > 127.0f) r = 127.0f;
    out[k * P.sok] = (uint8_t)(int8_t)r;
  }
  P.scale[so] = P.normalize ? __fdiv_rn(scale, fmaxf(__fsqrt_rn(ss), (float)LIK_NORM_EPS)) : scale;
}

} // namespace

extern "C" lik_status lik_cuda_quantize(const lik_quantize_problem *p) {
  using namespace lik_cuda;
  QuantP P;
  P.x = p->x;
  P.out = p->out;
  P.scale = p->scale;
  P.d = p->d;
  P.sxk = p->sxk;
  P.sok = p->sok;
  P.nlead = p->nlead;
  P.ntok = 1;
  for (int i = 0; i < p->nlead; i++) {
    P.lead[i] = p->lead[i];
    P.sx[i] = p->sx[i];
    P.so[i] = p->so[i];
    P.ss[i] = p->ss[i];
    P.ntok *= p->lead[i];
  }
  P.normalize = p->call.normalize;
  if (P.ntok == 0) return LIK_OK;
  const int64_t blocks = (P.ntok + 255) / 256;
  if (blocks > INT32_MAX)
    return lik_fail(LIK_ERR_UNSUPPORTED, "X: %lld tokens exceed the CUDA grid", (long long)P.ntok);
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  cudaStream_t st = (cudaStream_t)p->call.stream;
  const unsigned grid = (unsigned)blocks;
  switch (p->dtype) {
    case LIK_F16: quantize_kernel<__half><<<grid, 256, 0, st>>>(P); break;
    case LIK_BF16: quantize_kernel<__nv_bfloat16><<<grid, 256, 0, st>>>(P); break;
    case LIK_F64: quantize_kernel<double><<<grid, 256, 0, st>>>(P); break;
    default: quantize_kernel<float><<<grid, 256, 0, st>>>(P); break;
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? LIK_OK : cuda_fail(e, "lik_quantize (CUDA) launch");
}
