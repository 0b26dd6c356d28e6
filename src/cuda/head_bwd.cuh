/*
 * head_bwd.cuh — the fused D-side head backward on CUDA, closed form over
 * the forward's argmax (lik_experimental.h); half / bf16 / fp32 inputs,
 * fp32 accumulation (the two products on mma.sync: half types exact, fp32
 * as 3xTF32; the rest on CUDA cores).  A slot is one (i, c, s) of the
 * argmax, x = (i * ncand + c) * Lq + s; a live slot (valid query token,
 * argmax in range and on a valid document token) names its winning token.
 *
 *   slot_kernel  64 slots per CTA: gathers their H_d rows and projects them
 *                again on mma.sync (W streamed alongside), y^ and ||y||,
 *                then gy = J(y) (g * Q[i, s]); writes y^, gy and the token
 *                id.
 *   q_kernel     a CTA per (i, s): grad_Q[i, s, o] = sum_c g[i, c] *
 *                y^[slot(i, c, s), o], 8 ranges of c, added in order.
 *   w_kernel     grad_W | grad_b partials over fixed slot ranges (one
 *                [d_out, d_model + 1] fp32 slab per range; column d_model
 *                is b's) on mma.sync, a CTA per (128 columns, range);
 *                w_sum_kernel adds the ranges in order.
 *   h_kernel     a CTA per (document, range of up to HR tokens): buckets
 *                the document's live slots by the token they won (counts,
 *                offsets, each bucket sorted by slot), sums each won token's
 *                gy in slot order, multiplies the sums by W (32 rows at a
 *                time, 16 for d_out > 128; o ascending) and writes zero
 *                rows for every token nothing won: each row of grad_H_d is
 *                written once.
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
  lik_head_wb g;        /* grad_W, grad_b (NULL: skipped) */
  /* scratch */
  float *yhat, *gy;     /* [nslot][d_out] */
  int64_t *tok;         /* [nslot]: document n * Ld + token, or -1 */
  int32_t *lst;         /* h_kernel's buckets: per CTA the document's slots (S of them) */
  float *wpart;         /* [nsplit][d_out][d_model + 1]: grad_W | grad_b partials */
  int vec_gh;           /* 16-byte stores into grad_H_d rows are legal */
  int64_t nslot, nsplit, split_len;
};

constexpr int BTH = 256; /* threads of the backward kernels' CTAs (8 warps) */
constexpr int SB = 64;   /* slots per slot_kernel CTA */
constexpr int WC = 128;  /* grad_W columns per w_kernel CTA (8 warps of 16) */
constexpr int HR = 1024; /* tokens per h_kernel CTA */

__device__ __forceinline__ float gs_at(const BParams &B, int64_t i, int64_t c) {
  const int64_t at = i * B.gsi + c * B.gsj;
  return B.gs64 ? (float)reinterpret_cast<const double *>(B.gs)[at]
                : reinterpret_cast<const float *>(B.gs)[at];
}

template <typename T> __device__ __forceinline__ void store_t(void *base, int64_t i, float v) {
  reinterpret_cast<T *>(base)[i] = from_f<T>(v);
}

/* Rows of 64 bytes of features (32 half / bf16, 16 fp32) staged per chunk,
 * at a stride of 80 bytes (the 8 rows of an ldmatrix in 8 different bank
 * groups); a k-step of mma16816 is 32 of those bytes (k16 half, k8 tf32:
 * ptx.cuh's mma16816<float> is 3xTF32, fp32 accuracy). */
constexpr int CB = 64, CROW = 80;

/* cp.async copies of 16 bytes where vec (rows of whole 16-byte chunks, the
 * chunk inside the row: ok), else element loads; a chunk past the row, or
 * of a row that is not there, reads as zeros. */
template <typename T>
__device__ __forceinline__ void stage16(uint32_t dst, const T *row, int64_t k, int64_t sk, int64_t dim,
                                        bool ok, bool vec) {
  constexpr int EV = 16 / (int)sizeof(T);
  if (vec) {
    const bool in = ok && k < dim;
    cp_async16(dst, in ? (const void *)(row + k) : (const void *)row, in ? 16 : 0);
    return;
  }
  T e[EV];
#pragma unroll
  for (int v = 0; v < EV; ++v) e[v] = ok && k + v < dim ? row[(k + v) * sk] : from_f<T>(0.f);
  sts128(dst, *reinterpret_cast<const uint32_t(*)[4]>(e));
}

/* 64 slots per CTA, 4 warps of 16 slots x DO outputs on mma.sync: the
 * slots' H_d rows gathered and W streamed in chunks of CB bytes (two
 * buffers, the next chunk's copies in flight during the current one's
 * MMAs), fp32 accumulators (C rows g, g + 8 of the warp, columns 8 nt + 2 tg
 * + e). */
template <typename T, int NF>
__global__ void __launch_bounds__(128) slot_kernel(const BParams B) {
  /* NBUF buffers (one for d_out > 128: 48 KB of static shared memory) */
  constexpr int DO = NF * 16, NT = DO / 8, EC = CB / (int)sizeof(T), NBUF = DO > 128 ? 1 : 2;
  const HParams &P = B.f;
  __shared__ __align__(16) uint8_t hs[NBUF][SB * CROW];
  __shared__ __align__(16) uint8_t ws[NBUF][DO * CROW];
  __shared__ int64_t srow[SB]; /* element offset of the winning H_d row, -1 dead */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  const int64_t lq = P.q.len, ld = P.h.len, d_out = P.q.dim, d_model = P.h.dim;
  const int64_t x0 = (int64_t)blockIdx.x * SB;
  const T *H = reinterpret_cast<const T *>(P.h.data);
  const T *W = reinterpret_cast<const T *>(P.wb.w);
  if (tid < SB) {
    const int64_t x = x0 + tid;
    int64_t row = -1, tk = -1;
    if (x < B.nslot) {
      const int64_t s = x % lq, cc = (x / lq) % P.ncand, i = x / lq / P.ncand;
      const int64_t n = P.kd ? i * P.ncand + cc : cc;
      const int a = P.argmax[i * P.asi + cc * P.asj + s * P.ass];
      if (a >= 0 && a < ld && tok_valid(P.qm, P.q, i, s) && tok_valid(P.hm, P.h, n, a)) {
        row = seq_base(P.h, n) + a * P.h.sl;
        tk = n * ld + a;
      }
      B.tok[x] = tk;
    }
    srow[tid] = row;
  }
  __syncthreads();
  const uint32_t hs_u = smem_u32(hs), ws_u = smem_u32(ws);
  constexpr int EV = 16 / (int)sizeof(T);
  auto issue = [&](int64_t k0, int buf) { /* 16-byte chunk u % 4 of row u / 4 */
    for (int u = tid; u < SB * 4; u += 128) {
      const int r = u / 4;
      stage16<T>(hs_u + buf * (SB * CROW) + r * CROW + 16 * (u % 4), H + (srow[r] >= 0 ? srow[r] : 0),
                 k0 + u % 4 * EV, P.h.sk, d_model, srow[r] >= 0, P.vec_h);
    }
    for (int u = tid; u < DO * 4; u += 128) {
      const int o = u / 4;
      stage16<T>(ws_u + buf * (DO * CROW) + o * CROW + 16 * (u % 4), W + (o < d_out ? o * P.wb.w_so : 0),
                 k0 + u % 4 * EV, P.wb.w_sk, d_model, o < d_out, P.vec_w);
    }
  };
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
  const int64_t nch = (d_model + EC - 1) / EC;
  issue(0, 0);
  cp_async_commit();
  for (int64_t c = 0; c < nch; ++c) {
    const int buf = NBUF == 2 ? (int)(c & 1) : 0;
    if (NBUF == 2 && c + 1 < nch) issue((c + 1) * EC, buf ^ 1);
    cp_async_commit();
    if (NBUF == 2) cp_async_wait<1>(); /* chunk c landed, c + 1 may be in flight */
    else cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t a[4];
      ldsm_x4(hs_u + buf * (SB * CROW) + (warp * 16 + (lane & 15)) * CROW + 16 * (ks * 2 + (lane >> 4)),
              a[0], a[1], a[2], a[3]);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t b[2][2];
        const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldsm_x4(ws_u + buf * (DO * CROW) + r * CROW + 16 * (ks * 2 + ((lane >> 3) & 1)), b[0][0], b[0][1],
                b[1][0], b[1][1]);
        mma16816<T>(acc[2 * np], a, b[0]);
        mma16816<T>(acc[2 * np + 1], a, b[1]);
      }
    }
    __syncthreads(); /* the buffer is refilled next */
    if (NBUF == 1 && c + 1 < nch) issue((c + 1) * EC, 0);
  }
  /* per slot row: + b, ||y||, y^, e = g Q[i, s], gy; row sums over the quad */
  auto sum4 = [](float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
  };
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + g + 8 * h;
    const int64_t x = x0 + r;
    const bool live = srow[r] >= 0;
    float ss = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int o = nt * 8 + 2 * tg + e;
        float v = acc[nt][2 * h + e];
        if (o < d_out && P.wb.b) v += to_f<T>(reinterpret_cast<const T *>(P.wb.b)[o * P.wb.b_s]);
        acc[nt][2 * h + e] = v;
        ss = fmaf(v, v, ss);
      }
    const float nrm = fmaxf(sqrtf(sum4(ss)), (float)LIK_NORM_EPS);
    int64_t i = 0, cc = 0, s = 0;
    if (x < B.nslot) {
      s = x % lq;
      cc = (x / lq) % P.ncand;
      i = x / lq / P.ncand;
    }
    const float gv = live ? gs_at(B, i, cc) : 0.f;
    const T *qrow = reinterpret_cast<const T *>(P.q.data) + (live ? seq_base(P.q, i) + s * P.q.sl : 0);
    float dot = 0.f, ev[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int o = nt * 8 + 2 * tg + e;
        if (P.normalize) acc[nt][2 * h + e] /= nrm;
        ev[nt][e] = live && o < d_out ? gv * to_f<T>(qrow[o * P.q.sk]) : 0.f;
        dot = fmaf(ev[nt][e], acc[nt][2 * h + e], dot);
      }
    dot = sum4(dot);
    if (x >= B.nslot) continue;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int o = nt * 8 + 2 * tg + e;
        if (o >= d_out) continue;
        const float yv = acc[nt][2 * h + e];
        B.yhat[x * d_out + o] = live ? yv : 0.f;
        B.gy[x * d_out + o] = live ? (P.normalize ? (ev[nt][e] - yv * dot) / nrm : ev[nt][e]) : 0.f;
      }
  }
}

/* A CTA per (i, s): warp w sums c in its eighth of [0, ncand) ascending, lane
 * l outputs l, l + 32, ...; the eight partials are added in order. */
template <typename T, int NF>
__global__ void __launch_bounds__(BTH) q_kernel(const BParams B) {
  constexpr int DO = NF * 16, NV = DO > 32 ? DO / 32 : 1;
  const HParams &P = B.f;
  __shared__ float part[BTH / 32][NV * 32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int64_t d_out = P.q.dim, lq = P.q.len;
  const int64_t i = blockIdx.x / lq, s = blockIdx.x % lq;
  const int64_t per = (P.ncand + BTH / 32 - 1) / (BTH / 32);
  const int64_t c0 = w * per, c1 = min(P.ncand, c0 + per);
  float acc[NV];
#pragma unroll
  for (int m = 0; m < NV; ++m) acc[m] = 0.f;
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t x = (i * P.ncand + c) * lq + s;
    if (B.tok[x] < 0) continue;
    const float g = gs_at(B, i, c);
#pragma unroll
    for (int m = 0; m < NV; ++m)
      if (lane + 32 * m < d_out) acc[m] = fmaf(g, B.yhat[x * d_out + lane + 32 * m], acc[m]);
  }
#pragma unroll
  for (int m = 0; m < NV; ++m) part[w][lane + 32 * m] = acc[m];
  __syncthreads();
  for (int o = threadIdx.x; o < d_out; o += BTH) {
    float v = part[0][o];
    for (int k = 1; k < BTH / 32; ++k) v += part[k][o];
    store_t<T>((void *)B.gq.data, seq_base(B.gq, i) + s * B.gq.sl + o * B.gq.sk, v);
  }
}

/* grad_W / grad_b partials of slot range blockIdx.y as grad_W^T = sum_x
 * H_d[x]^T gy[x] on mma.sync: M = 128 columns k of H_d (8 warps of 16; the
 * column d_model stands for b: a 1 per live slot), N = DO outputs, K = the
 * range's slots in chunks of CB bytes of T (32 half / bf16 or 16 fp32
 * slots), both operands staged transposed (columns, outputs as rows of
 * slots).  gy is fp32: half types take it as hi = T(gy) and lo = T(gy - hi),
 * two products (fp32 to ~2^-16); fp32 takes it whole (3xTF32). */
template <typename T, int NF>
__global__ void __launch_bounds__(BTH) w_kernel(const BParams B) {
  /* DO outputs o0 = blockIdx.z * DO .. (d_out > 128: two CTAs of 128) */
  constexpr int DO = NF > 8 ? 128 : NF * 16, NT = DO / 8, EC = CB / (int)sizeof(T);
  constexpr bool HALF = sizeof(T) == 2;
  const HParams &P = B.f;
  __shared__ __align__(16) uint8_t as[WC * CROW];
  __shared__ __align__(16) uint8_t bs[HALF ? 2 : 1][DO * CROW];
  __shared__ int64_t srow[EC];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  const int64_t d_out = P.q.dim, d_model = P.h.dim, ld = P.h.len;
  const int64_t kb = (int64_t)blockIdx.x * WC, o0 = (int64_t)blockIdx.z * DO;
  const int64_t x0 = (int64_t)blockIdx.y * B.split_len;
  const int64_t x1 = x0 + B.split_len < B.nslot ? x0 + B.split_len : B.nslot;
  const T *H = reinterpret_cast<const T *>(P.h.data);
  T *at = reinterpret_cast<T *>(as);
  const uint32_t as_u = smem_u32(as), bs_u = smem_u32(bs);
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
  for (int64_t xs = x0; xs < x1; xs += EC) {
    __syncthreads();
    if (tid < EC) {
      const int64_t x = xs + tid, tk = x < x1 ? B.tok[x] : -1;
      srow[tid] = tk < 0 ? -1 : seq_base(P.h, tk / ld) + (tk % ld) * P.h.sl;
    }
    __syncthreads();
    /* as[k][x] = H_d[x][kb + k] (1 for the bias column), bs[o][x] = gy[x][o] */
    for (int u = tid; u < WC * EC; u += BTH) {
      const int x = u / WC, kc = u % WC;
      const int64_t k = kb + kc;
      float v = 0.f;
      if (srow[x] >= 0) v = k < d_model ? to_f<T>(H[srow[x] + k * P.h.sk]) : k == d_model ? 1.f : 0.f;
      at[kc * (CROW / sizeof(T)) + x] = from_f<T>(v);
    }
    for (int u = tid; u < DO * EC; u += BTH) {
      const int x = u / DO, o = u % DO;
      const float v = xs + x < x1 && o0 + o < d_out ? B.gy[(xs + x) * d_out + o0 + o] : 0.f;
      const T hi = from_f<T>(v);
      reinterpret_cast<T *>(bs[0])[o * (CROW / sizeof(T)) + x] = hi;
      if constexpr (HALF) reinterpret_cast<T *>(bs[HALF ? 1 : 0])[o * (CROW / sizeof(T)) + x] = from_f<T>(v - to_f<T>(hi));
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t a[4];
      ldsm_x4(as_u + (warp * 16 + (lane & 15)) * CROW + 16 * (ks * 2 + (lane >> 4)), a[0], a[1], a[2], a[3]);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);
        const uint32_t off = r * CROW + 16 * (ks * 2 + ((lane >> 3) & 1));
#pragma unroll
        for (int part = 0; part < (HALF ? 2 : 1); ++part) {
          uint32_t b[2][2];
          ldsm_x4(bs_u + part * (DO * CROW) + off, b[0][0], b[0][1], b[1][0], b[1][1]);
          mma16816<T>(acc[2 * np], a, b[0]);
          mma16816<T>(acc[2 * np + 1], a, b[1]);
        }
      }
    }
  }
  float *part = B.wpart + blockIdx.y * d_out * (d_model + 1);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t k = kb + warp * 16 + g + 8 * (e >> 1), o = o0 + nt * 8 + 2 * tg + (e & 1);
      if (o < d_out && k <= d_model) part[o * (d_model + 1) + k] = acc[nt][e];
    }
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
    if (B.g.w) store_t<T>(B.g.w, o * B.g.w_so + k * B.g.w_sk, acc);
  } else if (B.g.b) {
    store_t<T>(B.g.b, o * B.g.b_s, acc);
  }
}

/* Exclusive prefix sum of one int per thread over the CTA (BTH threads);
 * *total gets the sum.  Uses scan[BTH / 32 + 1]; ends with a barrier. */
__device__ __forceinline__ int cta_scan(int v, int *scan, int *total) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) scan[w] = x;
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int k = 0; k < BTH / 32; ++k) {
      const int t = scan[k];
      scan[k] = run;
      run += t;
    }
    scan[BTH / 32] = run;
  }
  __syncthreads();
  *total = scan[BTH / 32];
  const int r = scan[w] + x - v;
  __syncthreads();
  return r;
}

/* A CTA per (document n, tokens r0 .. r0 + HR - 1). */
template <typename T, int NF>
__global__ void __launch_bounds__(BTH) h_kernel(const BParams B) {
  /* HB won tokens per batch */
  /* HB won tokens per batch; W staged in chunks of HO rows x BTH columns (8 KB) */
  constexpr int DO = NF * 16, NV = DO > 32 ? DO / 32 : 1, TPT = HR / BTH, HB = DO > 128 ? 16 : 32;
  constexpr int HO = 32 / (int)sizeof(T);
  const HParams &P = B.f;
  __shared__ int cnt[HR], cur[HR], wt[HR], scan[BTH / 32 + 1];
  __shared__ __align__(16) float gsum[DO][HB];
  __shared__ T ws[HO][BTH];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t ld = P.h.len, lq = P.q.len, d_out = P.q.dim, d_model = P.h.dim;
  const int64_t nr = (ld + HR - 1) / HR, n = blockIdx.x / nr, r0 = blockIdx.x % nr * HR;
  const int rlen = (int)min((int64_t)HR, ld - r0);
  const int64_t S = P.kd ? lq : P.q.count * lq; /* the document's slots, j = i * Lq + s */
  auto slot = [&](int64_t j) { return P.kd ? n * lq + j : (j / lq * P.ncand + n) * lq + j % lq; };
  auto token = [&](int64_t j) { /* the token of this range slot j won, or -1 */
    const int64_t tk = B.tok[slot(j)], t = tk - n * ld - r0;
    return tk >= 0 && t >= 0 && t < rlen ? (int)t : -1;
  };
  int32_t *lst = B.lst + (int64_t)blockIdx.x * S;
  for (int u = tid; u < HR; u += BTH) cnt[u] = 0;
  __syncthreads();
  for (int64_t j = tid; j < S; j += BTH) {
    const int t = token(j);
    if (t >= 0) atomicAdd(&cnt[t], 1);
  }
  __syncthreads();
  /* zero rows, a warp per token nothing won (first: their stores drain
   * while the won rows are computed) */
  T *gh = reinterpret_cast<T *>(const_cast<void *>(B.gh.data));
  const int64_t hbase = seq_base(B.gh, n);
  for (int t = warp; t < rlen; t += BTH / 32) {
    if (cnt[t]) continue;
    T *row = gh + hbase + (r0 + t) * B.gh.sl;
    if (B.vec_gh) {
      constexpr int EV = Stage<T>::EV;
      for (int64_t k = lane * EV; k < d_model; k += 32 * EV)
        *reinterpret_cast<uint4 *>(row + k) = make_uint4(0, 0, 0, 0);
    } else {
      for (int64_t k = lane; k < d_model; k += 32) row[k * B.gh.sk] = from_f<T>(0.f);
    }
  }
  /* bucket offsets, and the won tokens in ascending order */
  int c4[TPT], sum = 0, won = 0, total, nw;
#pragma unroll
  for (int q = 0; q < TPT; ++q) {
    c4[q] = cnt[TPT * tid + q];
    sum += c4[q];
    won += c4[q] > 0;
  }
  int at = cta_scan(sum, scan, &total), wat = cta_scan(won, scan, &nw);
#pragma unroll
  for (int q = 0; q < TPT; ++q) {
    cur[TPT * tid + q] = at;
    at += c4[q];
    if (c4[q] > 0) wt[wat++] = TPT * tid + q;
  }
  __syncthreads();
  for (int64_t j = tid; j < S; j += BTH) {
    const int t = token(j);
    if (t >= 0) lst[atomicAdd(&cur[t], 1)] = (int32_t)j;
  }
  __syncthreads(); /* bucket t: lst[cur[t] - cnt[t] .. cur[t]) */
  const T *W = reinterpret_cast<const T *>(P.wb.w);
  for (int b0 = 0; b0 < nw; b0 += HB) {
    const int nb = min(HB, nw - b0);
    /* warp w: rows 4 w .. 4 w + 3 of the batch, its bucket sorted by slot,
     * then the gy rows summed in that order */
    for (int rr = 0; rr < HB / (BTH / 32); ++rr) {
      const int r = warp * (HB / (BTH / 32)) + rr;
      float a[NV];
#pragma unroll
      for (int m = 0; m < NV; ++m) a[m] = 0.f;
      if (r < nb) {
        const int t = wt[b0 + r], end = cur[t], beg = end - cnt[t];
        if (lane == 0)
          for (int e = beg + 1; e < end; ++e) {
            const int32_t v = lst[e];
            int f = e;
            for (; f > beg && lst[f - 1] > v; --f) lst[f] = lst[f - 1];
            lst[f] = v;
          }
        __syncwarp();
        for (int e = beg; e < end; ++e) {
          const int64_t x = slot(lst[e]);
#pragma unroll
          for (int m = 0; m < NV; ++m)
            if (lane + 32 * m < d_out) a[m] += B.gy[x * d_out + lane + 32 * m];
        }
      }
#pragma unroll
      for (int m = 0; m < NV; ++m)
        if (lane + 32 * m < DO) gsum[lane + 32 * m][r] = a[m];
    }
    __syncthreads();
    /* the batch's rows @ W: thread tid owns column k0 + tid */
    for (int64_t k0 = 0; k0 < d_model; k0 += BTH) {
      const int64_t k = k0 + tid;
      float acc[HB];
#pragma unroll
      for (int r = 0; r < HB; ++r) acc[r] = 0.f;
      for (int64_t o0 = 0; o0 < d_out; o0 += HO) {
        __syncthreads();
#pragma unroll
        for (int oo = 0; oo < HO; ++oo)
          ws[oo][tid] = o0 + oo < d_out && k < d_model ? W[(o0 + oo) * P.wb.w_so + k * P.wb.w_sk] : from_f<T>(0.f);
        __syncthreads();
#pragma unroll
        for (int oo = 0; oo < HO; ++oo) {
          const float w = to_f<T>(ws[oo][tid]);
          const float *gr = gsum[min(o0 + oo, (int64_t)DO - 1)];
#pragma unroll
          for (int r4 = 0; r4 < HB / 4; ++r4) {
            const float4 g = *reinterpret_cast<const float4 *>(gr + 4 * r4);
            acc[4 * r4] = fmaf(g.x, w, acc[4 * r4]);
            acc[4 * r4 + 1] = fmaf(g.y, w, acc[4 * r4 + 1]);
            acc[4 * r4 + 2] = fmaf(g.z, w, acc[4 * r4 + 2]);
            acc[4 * r4 + 3] = fmaf(g.w, w, acc[4 * r4 + 3]);
          }
        }
      }
      if (k < d_model)
#pragma unroll
        for (int r = 0; r < HB; ++r)
          if (r < nb) gh[hbase + (r0 + wt[b0 + r]) * B.gh.sl + k * B.gh.sk] = from_f<T>(acc[r]);
    }
    __syncthreads();
  }
}

} // namespace head
} // namespace lik_cuda

#endif
