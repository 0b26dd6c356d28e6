/*
 * codec.cuh — CUDA kernels of the codec's compress (lik_codec_compress on
 * CUDA tensors, and the PLAID index's build on a device: src/cuda/codec.cu):
 * the nearest centroid of every token, then its residual bytes.
 *
 * The CPU's arithmetic, bit for bit (src/cpu/codec.c through the MaxSim tile
 * kernels, cpu_internal.h): the score of (token t, centroid c) is one fp32
 * FMA chain over k ascending from +0, acc = fma(x[t][k], c[c][k], acc), the
 * operands the inputs' values widened to fp32 (fp16 / bf16 exactly, fp64
 * rounded to nearest); the code is the lowest c of the highest score, NaN
 * scores never win, and a token whose scores are all NaN or -inf gets none
 * (-1 here; the host-staged call turns it into the CPU's error).
 *
 * argmax_kernel (256 threads, 128 tokens x 128 centroids a tile): a
 * register-tiled SIMT GEMM.  Thread (ty, tx) = (tid / 16, tid % 16) holds the
 * 8 x 8 scores of tokens {4ty .. 4ty+3, 64+4ty .. 64+4ty+3} and centroids
 * {4tx .. 4tx+3, 64+4tx .. 64+4tx+3} of the tile in registers; tiles of 8
 * dimensions of both operands are staged in shared memory ([k][row], rows
 * padded to 132 floats: conflict-free stores, 16-byte reads), double
 * buffered, the next step's global loads issued into registers before the
 * current step's 512 FMAs (4 dimensions of a row per load: one 16- / 8-byte
 * load for contiguous fp32 / fp16 / bf16 rows, LD_*; element by element
 * otherwise).  Dimensions past d are zero on both sides
 * (fma(0, 0, acc) == acc up to the sign of a zero, which no comparison
 * sees).  After each centroid tile every thread folds its 64 scores into a
 * running (max, argmax) per token in ascending centroid order (strict >);
 * at the end the 16 threads of a token row merge by shuffles (common.cuh's
 * argmax_lanes: higher score, then lower index), and lane tx = 0 writes the
 * CTA's partial result.  The
 * grid is (token tiles, splits of the centroids): with few tokens the
 * centroids are split so that the GPU fills; pick_kernel merges the splits
 * in ascending order with the same rule.  Everything is 64-bit addressed.
 *
 * res_kernel: one thread per (token, residual byte), grid-stride: the
 * bucket of x_k - c_k for the byte's 8/nbits dimensions (lik_res_bucket),
 * packed as lik_res_byte packs them, and the byte (lik_res_byte_of):
 * src/core/residual.h's definitions, shared with the CPU.
 */
#ifndef LIK_CUDA_CODEC_CUH
#define LIK_CUDA_CODEC_CUH

#include "residual_call.cuh"

namespace lik_cuda {
namespace codec {

constexpr int CB_M = 128;  /* tokens per tile */
constexpr int CB_N = 128;  /* centroids per tile */
constexpr int CB_K = 8;    /* dimensions per shared-memory step */
constexpr int CB_LD = 132; /* shared row stride (floats) */

struct KComp {
  res::KCodec c; /* centroids (any dtype and strides), nbits, layout, width */
  res::KTok t;   /* the outputs: codes, and residual bytes (res NULL: codes only) */
  const void *x; /* tokens: element (t, k) at t * x_sl + k * x_sk */
  int x_dt;
  int64_t x_sl, x_sk, T;
  int64_t cper; /* centroids per split (a multiple of CB_N) */
  int nsplit;
  float *part_m;   /* [nsplit][T] best score of each split */
  int32_t *part_i; /* [nsplit][T] its centroid, -1: none */
  int32_t *best;   /* [T] the code, -1: none */
  const void *cut; /* the 2^nbits - 1 cutoffs, element i at i * cut_s */
  int cut_dt;
  int64_t cut_s;
  int ncut;
};

/* How an operand's rows are read: LD_GEN any dtype and strides (element by
 * element); the others contiguous rows of that dtype with d and the row
 * stride multiples of 4 and the base aligned, 4 dimensions in one load
 * (16 bytes fp32, 8 bytes fp16 / bf16; widened exactly). */
enum { LD_GEN = 0, LD_F32 = 1, LD_F16 = 2, LD_BF16 = 3 };

/* Dimensions k0 .. k0+3 (k0 a multiple of 4) of the row at row_off; 0 past d
 * or for a row out of range. */
template <int L>
__device__ __forceinline__ void load4(const void *p, int dt, int64_t row_off, int64_t sk,
                                      int64_t k0, int64_t dim, bool in, float v[4]) {
  if constexpr (L == LD_GEN) {
#pragma unroll
    for (int e = 0; e < 4; e++)
      v[e] = in && k0 + e < dim ? res::load_f(p, dt, row_off + (k0 + e) * sk) : 0.f;
  } else {
    v[0] = v[1] = v[2] = v[3] = 0.f;
    if (in && k0 < dim) { /* then k0 + 3 < dim: d is a multiple of 4 */
      if constexpr (L == LD_F32) {
        const float4 f = __ldg((const float4 *)((const float *)p + row_off + k0));
        v[0] = f.x;
        v[1] = f.y;
        v[2] = f.z;
        v[3] = f.w;
      } else {
        const uint2 u = __ldg((const uint2 *)((const uint16_t *)p + row_off + k0));
        float2 a, b;
        if constexpr (L == LD_F16) {
          a = __half22float2(*(const __half2 *)&u.x);
          b = __half22float2(*(const __half2 *)&u.y);
        } else {
          a = __bfloat1622float2(*(const __nv_bfloat162 *)&u.x);
          b = __bfloat1622float2(*(const __nv_bfloat162 *)&u.y);
        }
        v[0] = a.x;
        v[1] = a.y;
        v[2] = b.x;
        v[3] = b.y;
      }
    }
  }
}

template <int XL, int CL>
__global__ void __launch_bounds__(256, 2) argmax_kernel(KComp P) {
  __shared__ __align__(16) float xs[2][CB_K][CB_LD];
  __shared__ __align__(16) float cs[2][CB_K][CB_LD];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int64_t t0 = (int64_t)blockIdx.x * CB_M;
  const int64_t cbeg = (int64_t)blockIdx.y * P.cper;
  const int64_t cend = cbeg + P.cper < P.c.ncent ? cbeg + P.cper : P.c.ncent;
  /* global -> shared: row lr of each operand tile, dimensions lk .. lk+3 of a step */
  const int lr = tid >> 1, lk = (tid & 1) * 4;
  const int64_t xt = t0 + lr;
  const bool xin = xt < P.T;
  const int64_t xoff = xt * P.x_sl;
  float m[8];
  int ix[8];
#pragma unroll
  for (int i = 0; i < 8; i++) {
    m[i] = -INFINITY;
    ix[i] = -1;
  }
  const int64_t nk = (P.c.dim + CB_K - 1) / CB_K;
  for (int64_t c0 = cbeg; c0 < cend; c0 += CB_N) {
    const bool cin = c0 + lr < cend;
    const int64_t coff = (c0 + lr) * P.c.cent_sc;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < 8; j++) acc[i][j] = 0.f;
    float rx[4], rc[4];
    load4<XL>(P.x, P.x_dt, xoff, P.x_sk, lk, P.c.dim, xin, rx);
    load4<CL>(P.c.cent, P.c.cent_dt, coff, P.c.cent_sk, lk, P.c.dim, cin, rc);
#pragma unroll
    for (int e = 0; e < 4; e++) {
      xs[0][lk + e][lr] = rx[e];
      cs[0][lk + e][lr] = rc[e];
    }
    __syncthreads();
    for (int64_t kb = 0; kb < nk; kb++) {
      const int buf = (int)(kb & 1);
      if (kb + 1 < nk) {
        load4<XL>(P.x, P.x_dt, xoff, P.x_sk, (kb + 1) * CB_K + lk, P.c.dim, xin, rx);
        load4<CL>(P.c.cent, P.c.cent_dt, coff, P.c.cent_sk, (kb + 1) * CB_K + lk, P.c.dim, cin, rc);
      }
#pragma unroll
      for (int kk = 0; kk < CB_K; kk++) {
        const float4 a0 = *(const float4 *)&xs[buf][kk][4 * ty];
        const float4 a1 = *(const float4 *)&xs[buf][kk][64 + 4 * ty];
        const float4 b0 = *(const float4 *)&cs[buf][kk][4 * tx];
        const float4 b1 = *(const float4 *)&cs[buf][kk][64 + 4 * tx];
        const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
          for (int j = 0; j < 8; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
      }
      if (kb + 1 < nk) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          xs[buf ^ 1][lk + e][lr] = rx[e];
          cs[buf ^ 1][lk + e][lr] = rc[e];
        }
      }
      __syncthreads();
    }
    /* fold the tile's scores in ascending centroid order (strict >) */
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int64_t c = c0 + (j < 4 ? 4 * tx + j : 64 + 4 * tx + j - 4);
      if (c < cend)
#pragma unroll
        for (int i = 0; i < 8; i++)
          if (acc[i][j] > m[i]) {
            m[i] = acc[i][j];
            ix[i] = (int)c;
          }
    }
  }
  /* the 16 threads of a token row: lanes of one half-warp.  common.cuh's
   * order (higher score, then lower index); a running max here is -inf or a
   * number, never NaN, so that order is the codec's: -inf (index -1) never
   * wins */
#pragma unroll
  for (int i = 0; i < 8; i++) argmax_lanes<16>(m[i], ix[i]);
  if (tx == 0)
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int64_t t = t0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
      if (t < P.T) {
        P.part_m[(int64_t)blockIdx.y * P.T + t] = m[i];
        P.part_i[(int64_t)blockIdx.y * P.T + t] = ix[i];
      }
    }
}

/* One thread per token: the splits merged in ascending order; the code. */
__global__ void pick_kernel(KComp P) {
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < P.T;
       t += (int64_t)gridDim.x * blockDim.x) {
    float m = P.part_m[t];
    int ix = P.part_i[t];
    for (int s = 1; s < P.nsplit; s++) {
      const float mo = P.part_m[(int64_t)s * P.T + t];
      const int io = P.part_i[(int64_t)s * P.T + t];
      if (better(mo, io, m, ix)) { /* common.cuh's order, as in argmax_kernel */
        m = mo;
        ix = io;
      }
    }
    P.best[t] = ix;
    if (P.t.codes64) ((long long *)P.t.codes)[t * P.t.code_s] = ix;
    else ((int *)P.t.codes)[t * P.t.code_s] = ix;
  }
}

/* One thread per (token, residual byte), grid-stride; a token without a
 * code is left as it is. */
__global__ void res_kernel(KComp P) {
  __shared__ float cut[255];
  for (int i = threadIdx.x; i < P.ncut; i += blockDim.x)
    cut[i] = res::load_f(P.cut, P.cut_dt, i * P.cut_s);
  __syncthreads();
  const int cpb = 8 / P.c.nbits;
  const lik_residual_layout layout = P.c.colbert ? LIK_RESIDUAL_COLBERT : LIK_RESIDUAL_LIK;
  const int64_t n = P.T * P.c.width;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = e / P.c.width, p = e - t * P.c.width;
    const int c = P.best[t];
    if (c < 0) continue;
    unsigned v = 0; /* lik_res_byte's packing, fields in registers */
#pragma unroll
    for (int i = 0; i < 8; i++)
      if (i < cpb) {
        const int64_t k = p * cpb + i;
        const float x = res::load_f(P.x, P.x_dt, t * P.x_sl + k * P.x_sk);
        const float cv = res::load_f(P.c.cent, P.c.cent_dt, (int64_t)c * P.c.cent_sc + k * P.c.cent_sk);
        v |= (unsigned)lik_res_bucket(cut, P.ncut, x - cv) << (i * P.c.nbits);
      }
    ((uint8_t *)P.t.res)[t * P.t.res_st + p * P.t.res_sp] = lik_res_byte_of(v, layout);
  }
}

} // namespace codec
} // namespace lik_cuda

#endif
