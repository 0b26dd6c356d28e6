/*
 * head_bwd.cuh — the fused D-side head backward on CUDA, closed form over
 * the forward's argmax (lik_experimental.h); half / bf16 / fp32 inputs, all
 * arithmetic on CUDA cores in fp32.  A slot is one (i, c, s) of the
 * argmax, x = (i * ncand + c) * Lq + s; a live slot (valid query token,
 * argmax in range and on a valid document token) names its winning token.
 *
 *   slot_kernel  32 slots per CTA: gather their H_d rows, project them again
 *                (W staged in shared memory, fp32), y^ and ||y||, then
 *                gy = J(y) (g * Q[i, s]); writes y^, gy and the token id.
 *   q_kernel     grad_Q[i, s, o] = sum_c g[i, c] * y^[slot(i, c, s), o].
 *   w_kernel     grad_W partials over fixed slot ranges (one [d_out, d_model]
 *                fp32 slab per range), w_sum_kernel adds them in range order;
 *                grad_b likewise from the gy rows.
 *   h_kernel     a warp per document token: sums gy of the slots that token
 *                won (slots ascending), then grad_H_d = that sum @ W (zero
 *                where nothing won).
 * Every output element has one owner and a fixed order: deterministic.
 */
#ifndef LIK_CUDA_HEAD_BWD_CUH
#define LIK_CUDA_HEAD_BWD_CUH

#include "head_fwd.cuh"

namespace lik_cuda {
namespace head {

struct BParams {
  HParams f;            /* the forward's description (argmax set) */
  const void *gs;       /* grad_scores, F32 or F64 */
  int gs64;
  int64_t gsi, gsj;
  KSeq gq, gh;          /* gradient views (data NULL: skipped) */
  void *gw, *gb;
  int64_t gw_so, gw_sk, gb_s;
  /* scratch */
  float *yhat, *gy;     /* [nslot][d_out] */
  int64_t *tok;         /* [nslot]: document n * Ld + token, or -1 */
  float *wpart;         /* [nsplit][d_out][d_model + 1]: grad_W | grad_b partials */
  int vec_gh;           /* 16-byte stores into grad_H_d rows are legal */
  int64_t nslot, nsplit, split_len;
};

constexpr int SB = 32;   /* slots per slot_kernel CTA */
constexpr int KC = 32;   /* d_model features per staged chunk of slot_kernel */
constexpr int BTH = 128; /* threads of the backward kernels' CTAs (4 warps) */

__device__ __forceinline__ float gs_at(const BParams &B, int64_t i, int64_t c) {
  const int64_t at = i * B.gsi + c * B.gsj;
  return B.gs64 ? (float)reinterpret_cast<const double *>(B.gs)[at]
                : reinterpret_cast<const float *>(B.gs)[at];
}

template <typename T> __device__ __forceinline__ void store_t(void *base, int64_t i, float v) {
  reinterpret_cast<T *>(base)[i] = from_f<T>(v);
}

/* 128 threads: thread u owns slot u % 32 and outputs o = u / 32 + 4 m. */
template <typename T, int NF>
__global__ void __launch_bounds__(BTH) slot_kernel(const BParams B) {
  constexpr int DO = NF * 16, OPT = DO / 4;
  const HParams &P = B.f;
  __shared__ float hs[KC][SB + 1];
  __shared__ float ws[DO][KC + 1];
  __shared__ float red[4][SB];
  __shared__ int64_t srow[SB]; /* element offset of the winning H_d row, -1 dead */
  const int tid = threadIdx.x, sl = tid & 31, og = tid >> 5;
  const int64_t lq = P.q.len, ld = P.h.len, d_out = P.q.dim, d_model = P.h.dim;
  const int64_t x = (int64_t)blockIdx.x * SB + sl;
  const T *H = reinterpret_cast<const T *>(P.h.data);
  const T *W = reinterpret_cast<const T *>(P.w);
  int64_t i = 0, cc = 0, s = 0, n = 0;
  if (x < B.nslot) {
    s = x % lq;
    cc = (x / lq) % P.ncand;
    i = x / lq / P.ncand;
    n = P.kd ? i * P.ncand + cc : cc;
  }
  if (tid < SB) {
    int64_t row = -1, tk = -1;
    if (x < B.nslot) {
      const int a = P.argmax[i * P.asi + cc * P.asj + s * P.ass];
      if (a >= 0 && a < ld && tok_valid(P.qm, P.q, i, s) && tok_valid(P.hm, P.h, n, a)) {
        row = seq_base(P.h, n) + a * P.h.sl;
        tk = n * ld + a;
      }
      B.tok[x] = tk;
    }
    srow[tid] = row;
  }
  float y[OPT];
#pragma unroll
  for (int m = 0; m < OPT; ++m) y[m] = 0.f;
  for (int64_t k0 = 0; k0 < d_model; k0 += KC) {
    __syncthreads();
    for (int u = tid; u < SB * KC; u += BTH) {
      const int r = u / KC, kk = u % KC;
      const int64_t k = k0 + kk;
      hs[kk][r] = srow[r] >= 0 && k < d_model ? to_f<T>(H[srow[r] + k * P.h.sk]) : 0.f;
    }
    for (int u = tid; u < DO * KC; u += BTH) {
      const int o = u / KC, kk = u % KC;
      const int64_t k = k0 + kk;
      ws[o][kk] = o < d_out && k < d_model ? to_f<T>(W[o * P.w_so + k * P.w_sk]) : 0.f;
    }
    __syncthreads();
    for (int kk = 0; kk < KC; ++kk) {
      const float h = hs[kk][sl];
#pragma unroll
      for (int m = 0; m < OPT; ++m) y[m] = fmaf(h, ws[og + 4 * m][kk], y[m]);
    }
  }
  const bool live = srow[sl] >= 0;
  float ss = 0.f;
#pragma unroll
  for (int m = 0; m < OPT; ++m) {
    const int o = og + 4 * m;
    if (o < d_out && P.b) y[m] += to_f<T>(reinterpret_cast<const T *>(P.b)[o * P.b_s]);
    ss = fmaf(y[m], y[m], ss);
  }
  red[og][sl] = ss;
  __syncthreads();
  const float nrm = fmaxf(sqrtf(red[0][sl] + red[1][sl] + red[2][sl] + red[3][sl]),
                          (float)LIK_NORM_EPS);
  const float g = live ? gs_at(B, i, cc) : 0.f;
  const T *qrow = reinterpret_cast<const T *>(P.q.data) + (live ? seq_base(P.q, i) + s * P.q.sl : 0);
  float dot = 0.f, e[OPT];
#pragma unroll
  for (int m = 0; m < OPT; ++m) {
    const int o = og + 4 * m;
    if (P.normalize) y[m] /= nrm;
    e[m] = live && o < d_out ? g * to_f<T>(qrow[o * P.q.sk]) : 0.f;
    dot = fmaf(e[m], y[m], dot);
  }
  __syncthreads();
  red[og][sl] = dot;
  __syncthreads();
  dot = red[0][sl] + red[1][sl] + red[2][sl] + red[3][sl];
  if (x >= B.nslot) return;
#pragma unroll
  for (int m = 0; m < OPT; ++m) {
    const int o = og + 4 * m;
    if (o >= d_out) continue;
    B.yhat[x * d_out + o] = live ? y[m] : 0.f;
    B.gy[x * d_out + o] = live ? (P.normalize ? (e[m] - y[m] * dot) / nrm : e[m]) : 0.f;
  }
}

/* One thread per (i, s, o). */
template <typename T>
__global__ void q_kernel(const BParams B) {
  const HParams &P = B.f;
  const int64_t d_out = P.q.dim, lq = P.q.len;
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= P.q.count * lq * d_out) return;
  const int64_t o = e % d_out, s = (e / d_out) % lq, i = e / d_out / lq;
  float acc = 0.f;
  for (int64_t c = 0; c < P.ncand; ++c) {
    const int64_t x = (i * P.ncand + c) * lq + s;
    if (B.tok[x] >= 0) acc = fmaf(gs_at(B, i, c), B.yhat[x * d_out + o], acc);
  }
  store_t<T>((void *)B.gq.data, seq_base(B.gq, i) + s * B.gq.sl + o * B.gq.sk, acc);
}

/* grad_W / grad_b partials of slot range blockIdx.z: thread per column k
 * (k = d_model stands for b), 16 outputs o per thread. */
template <typename T>
__global__ void __launch_bounds__(BTH) w_kernel(const BParams B) {
  const HParams &P = B.f;
  const int64_t d_out = P.q.dim, d_model = P.h.dim;
  const int64_t k = (int64_t)blockIdx.x * BTH + threadIdx.x, o0 = (int64_t)blockIdx.y * 16;
  const int64_t x0 = (int64_t)blockIdx.z * B.split_len;
  const int64_t x1 = x0 + B.split_len < B.nslot ? x0 + B.split_len : B.nslot;
  if (k > d_model) return;
  const T *H = reinterpret_cast<const T *>(P.h.data);
  float acc[16];
#pragma unroll
  for (int m = 0; m < 16; ++m) acc[m] = 0.f;
  for (int64_t x = x0; x < x1; ++x) {
    const int64_t tk = B.tok[x];
    if (tk < 0) continue;
    float h = 1.f; /* the bias column */
    if (k < d_model) {
      const int64_t nn = tk / P.h.len, t = tk % P.h.len;
      h = to_f<T>(H[seq_base(P.h, nn) + t * P.h.sl + k * P.h.sk]);
    }
    const float *gy = B.gy + x * d_out + o0;
#pragma unroll
    for (int m = 0; m < 16; ++m)
      if (o0 + m < d_out) acc[m] = fmaf(gy[m], h, acc[m]);
  }
  float *part = B.wpart + blockIdx.z * d_out * (d_model + 1);
#pragma unroll
  for (int m = 0; m < 16; ++m)
    if (o0 + m < d_out) part[(o0 + m) * (d_model + 1) + k] = acc[m];
}

/* Sums the partials in range order and writes grad_W / grad_b. */
template <typename T>
__global__ void w_sum_kernel(const BParams B) {
  const int64_t d_out = B.f.q.dim, d_model = B.f.h.dim;
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= d_out * (d_model + 1)) return;
  const int64_t o = e / (d_model + 1), k = e % (d_model + 1);
  float acc = 0.f;
  for (int64_t z = 0; z < B.nsplit; ++z) acc += B.wpart[z * d_out * (d_model + 1) + e];
  if (k < d_model) {
    if (B.gw) store_t<T>(B.gw, o * B.gw_so + k * B.gw_sk, acc);
  } else if (B.gb) {
    store_t<T>(B.gb, o * B.gb_s, acc);
  }
}

/* A warp per document token (n, t); 4 warps per CTA. */
template <typename T, int NF>
__global__ void __launch_bounds__(BTH) h_kernel(const BParams B) {
  constexpr int DO = NF * 16;
  const HParams &P = B.f;
  __shared__ float vs[4][DO];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t ld = P.h.len, lq = P.q.len, d_out = P.q.dim, d_model = P.h.dim;
  const int64_t tk = (int64_t)blockIdx.x * 4 + warp;
  if (tk >= P.h.count * ld) return;
  const int64_t n = tk / ld, t = tk % ld;
  int64_t i0 = 0, i1 = P.q.count, c = n;
  if (P.kd) { i0 = n / P.ncand; i1 = i0 + 1; c = n % P.ncand; }
  constexpr int NV = DO / 32 > 0 ? DO / 32 : 1;
  float v[NV];
#pragma unroll
  for (int m = 0; m < NV; ++m) v[m] = 0.f;
  bool any = false;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t s0 = 0; s0 < lq; s0 += 32) {
      const int64_t x = (i * P.ncand + c) * lq + s0 + lane;
      const unsigned hit = __ballot_sync(0xffffffffu, s0 + lane < lq && B.tok[x] == tk);
      for (unsigned b = hit; b; b &= b - 1) {
        const int64_t xs = (i * P.ncand + c) * lq + s0 + __ffs(b) - 1;
        any = true;
#pragma unroll
        for (int m = 0; m < NV; ++m) {
          const int o = lane + 32 * m;
          if (o < d_out) v[m] += B.gy[xs * d_out + o];
        }
      }
    }
  const int64_t off = seq_base(B.gh, n) + t * B.gh.sl;
  if (!any) { /* most tokens: a row of zeros */
    T *gh = reinterpret_cast<T *>(const_cast<void *>(B.gh.data));
    constexpr int EV = Stage<T>::EV;
    if (B.vec_gh)
      for (int64_t k = lane * EV; k < d_model; k += 32 * EV)
        *reinterpret_cast<uint4 *>(gh + off + k) = make_uint4(0, 0, 0, 0);
    else
      for (int64_t k = lane; k < d_model; k += 32) gh[off + k * B.gh.sk] = from_f<T>(0.f);
    return;
  }
#pragma unroll
  for (int m = 0; m < NV; ++m)
    if (lane + 32 * m < DO) vs[warp][lane + 32 * m] = v[m];
  __syncwarp();
  const T *W = reinterpret_cast<const T *>(P.w);
  for (int64_t k = lane; k < d_model; k += 32) {
    float acc = 0.f;
    for (int64_t o = 0; o < d_out; ++o) acc = fmaf(vs[warp][o], to_f<T>(W[o * P.w_so + k * P.w_sk]), acc);
    store_t<T>((void *)B.gh.data, off + k * B.gh.sk, acc);
  }
}

} // namespace head
} // namespace lik_cuda

#endif
