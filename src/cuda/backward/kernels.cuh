/*
 * backward/kernels.cuh — the kernels of the CUDA backward (launched by
 * backward.cu; design there and in docs/training.md, "The CUDA backward"):
 * the launch parameters (bw::Params), gradq_kernel (a warp per query
 * token), gradd_kernel (destination-owned tiles of document rows),
 * gradd_sparse_kernel (a CTA per document), grad_D by buckets (bucket_kernel,
 * gather_kernel, gather_rows_kernel) and by row ranges (range_kernel),
 * norms_kernel (token norms under normalize) and the pair lists' CSR
 * (pair_keys_kernel, csr_start_kernel).
 */
#ifndef LIK_CUDA_BACKWARD_KERNELS_CUH
#define LIK_CUDA_BACKWARD_KERNELS_CUH

#include <stdint.h>

#include <cub/block/block_scan.cuh>

#include "../common.cuh"
#include "../ptx.cuh"

namespace lik_cuda {
namespace bw {

constexpr int NT = 256;           /* threads per CTA */
constexpr int NW = NT / 32;       /* warps per CTA: warp w owns tile rows w, w+8, ... */
constexpr int EPT = 4;            /* candidates per thread per chunk */
constexpr int CH = NT * EPT;      /* candidates per chunk */

struct Params {
  KSeq q, d;        /* inputs (lik_seqs; packed: off set) */
  KMask qm, dm;
  KSeq gq, gd;      /* gradient outputs, same geometry; data NULL: skipped */
  int pairing;      /* 0 cross, 1 KD, 2 list */
  int normalize;
  int64_t ncand;    /* cross: Nd; KD: K; list: P */
  KIndex pq, pd;    /* list pairing */
  const int32_t *argmax;
  int64_t asi, asj, ass;
  const void *gs;
  int gs64;
  int64_t gsi, gsj;
  int64_t q_total, d_total; /* packed: rows of Q / D */
  const void *qnorm, *dnorm; /* R per token index (normalize) */
  /* list pairing: pairs grouped by query / by document, ascending */
  const int32_t *q_start, *q_pairs, *d_start, *d_pairs;
  /* tiling of the target side of one launch */
  int tt;           /* grad_D: rows per tile (<= 64) */
  int64_t tps;      /* grad_D padded: tiles per document; packed: 0 (global row tiles) */
  int nch;          /* column chunks of 32 * CPL */
  int vec_src, vec_tgt, vec_out; /* CPL-element vector accesses are legal */
};

/* ---- small helpers ---------------------------------------------------------- */

__device__ __forceinline__ int64_t tok_index(const KSeq &s, int64_t n, int64_t l) {
  return s.off.data ? kidx(s.off, n) + l : n * s.len + l;
}

/* Token (n, l) is valid: inside its length (lik_options' lengths) and mask. */
__device__ __forceinline__ bool mask_ok(const KMask &m, const KSeq &s, int64_t n, int64_t l) {
  if (s.lens && l >= seq_len(s, n)) return false;
  return !m.data || m.data[mask_base(m, s, n) + l * m.sl] != 0;
}

/* The forward's argmax entry of output (oi, oj), query token s. */
__device__ __forceinline__ int32_t argmax_at(const Params &P, int64_t oi, int64_t oj, int64_t s) {
  return __ldg(P.argmax + oi * P.asi + oj * P.asj + s * P.ass);
}

template <typename R> __device__ __forceinline__ R inv_norm(R nrm) {
  return (R)1 / (nrm > (R)LIK_NORM_EPS ? nrm : (R)LIK_NORM_EPS);
}

template <typename R> __device__ __forceinline__ R grad_at(const Params &P, int64_t oi, int64_t oj) {
  const int64_t o = oi * P.gsi + oj * P.gsj;
  return P.gs64 ? (R)((const double *)P.gs)[o] : (R)((const float *)P.gs)[o];
}

template <typename T, typename R> __device__ __forceinline__ R widen(T x);
template <> __device__ __forceinline__ float widen<__nv_bfloat16, float>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <> __device__ __forceinline__ float widen<__half, float>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float widen<float, float>(float x) { return x; }
template <> __device__ __forceinline__ double widen<double, double>(double x) { return x; }


/* Bits <-> 16-bit floats. */
template <typename T> __device__ __forceinline__ float from_bits(unsigned short b);
template <> __device__ __forceinline__ float from_bits<__nv_bfloat16>(unsigned short b) {
  return __uint_as_float((unsigned)b << 16);
}
template <> __device__ __forceinline__ float from_bits<__half>(unsigned short b) {
  return __half2float(__ushort_as_half(b));
}
template <typename T> __device__ __forceinline__ unsigned short to_bits(float x);
template <> __device__ __forceinline__ unsigned short to_bits<__nv_bfloat16>(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
template <> __device__ __forceinline__ unsigned short to_bits<__half>(float x) {
  return __half_as_ushort(__float2half_rn(x));
}

/* One vector of CPL elements at p (aligned, sk == 1): 4 x 16-bit = 8 bytes,
 * 4 x fp32 or 2 x fp64 = 16 bytes. */
template <typename T, typename R, int CPL> struct Vec;
template <typename T> struct Vec<T, float, 4> { /* 16-bit types */
  static __device__ __forceinline__ void load(const T *p, float (&v)[4]) {
    const uint2 u = __ldg(reinterpret_cast<const uint2 *>(p));
    v[0] = from_bits<T>((unsigned short)(u.x & 0xffffu));
    v[1] = from_bits<T>((unsigned short)(u.x >> 16));
    v[2] = from_bits<T>((unsigned short)(u.y & 0xffffu));
    v[3] = from_bits<T>((unsigned short)(u.y >> 16));
  }
  static __device__ __forceinline__ void store(T *p, const float (&v)[4]) {
    uint2 u;
    u.x = (unsigned)to_bits<T>(v[0]) | ((unsigned)to_bits<T>(v[1]) << 16);
    u.y = (unsigned)to_bits<T>(v[2]) | ((unsigned)to_bits<T>(v[3]) << 16);
    *reinterpret_cast<uint2 *>(p) = u;
  }
};
template <> struct Vec<float, float, 4> {
  static __device__ __forceinline__ void load(const float *p, float (&v)[4]) {
    const float4 u = __ldg(reinterpret_cast<const float4 *>(p));
    v[0] = u.x; v[1] = u.y; v[2] = u.z; v[3] = u.w;
  }
  static __device__ __forceinline__ void store(float *p, const float (&v)[4]) {
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
};
template <> struct Vec<double, double, 2> {
  static __device__ __forceinline__ void load(const double *p, double (&v)[2]) {
    const double2 u = __ldg(reinterpret_cast<const double2 *>(p));
    v[0] = u.x; v[1] = u.y;
  }
  static __device__ __forceinline__ void store(double *p, const double (&v)[2]) {
    *reinterpret_cast<double2 *>(p) = make_double2(v[0], v[1]);
  }
};

template <typename T, typename R> __device__ __forceinline__ T narrow_to(R x);
template <> __device__ __forceinline__ __nv_bfloat16 narrow_to<__nv_bfloat16, float>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half narrow_to<__half, float>(float x) {
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ float narrow_to<float, float>(float x) { return x; }
template <> __device__ __forceinline__ double narrow_to<double, double>(double x) { return x; }

/* CPL elements from p (feature stride sk) into v, features >= lim read as 0.
 * vec: p is aligned to CPL elements and sk == 1 (one wide load). */
template <typename T, typename R, int CPL>
__device__ __forceinline__ void load_cols(const T *p, int64_t sk, int lim, bool vec, R (&v)[CPL]) {
  if (vec && lim >= CPL) {
    Vec<T, R, CPL>::load(p, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < CPL; ++k) v[k] = k < lim ? widen<T, R>(p[(int64_t)k * sk]) : (R)0;
}

template <typename T, typename R, int CPL>
__device__ __forceinline__ void store_cols(T *p, int64_t sk, int lim, bool vec, const R (&v)[CPL]) {
  if (vec && lim >= CPL) {
    Vec<T, R, CPL>::store(p, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < CPL; ++k)
    if (k < lim) p[(int64_t)k * sk] = narrow_to<T, R>(v[k]);
}

/* Sequence n of a packed side holding row r: the last n with off[n] <= r
 * (-1 if none; count if r is past every sequence). */
__device__ __forceinline__ int64_t seq_of_row(const KSeq &s, int64_t r) {
  int64_t lo = 0, hi = s.count; /* answer in [lo-1, hi) */
  if (s.count <= 0 || kidx(s.off, 0) > r) return -1;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) >> 1;
    if (kidx(s.off, mid) <= r) lo = mid;
    else hi = mid;
  }
  return lo;
}

/* Final value of a gradient row held in a[] (lane-owned columns, CPL per
 * chunk): zero if the token is invalid; under normalize the L2-normalisation
 * Jacobian (the dot product reduced over the warp in a fixed tree); then
 * converted and stored once. */
template <typename T, typename R, int CPL, typename Acc>
__device__ __forceinline__ void finish_row(const Params &P, const KSeq &TS, const KSeq &GS,
                                           const void *norms, bool vec_tgt, bool vec_out,
                                           int nch, int lane, int64_t n, int64_t t, bool valid,
                                           int64_t obase, Acc &&a) {
  const int CW = 32 * CPL;
  const int64_t dim = TS.dim;
  const T *tin = reinterpret_cast<const T *>(TS.data);
  T *out = reinterpret_cast<T *>(const_cast<void *>(GS.data));
  if (!P.normalize && vec_out && nch == 1 && GS.dim == CW) {
    /* a row of exactly 32 CPL columns without normalize: the row (times 1
     * below: the same bits) or zeros, one vector store a lane */
    R v[CPL];
#pragma unroll
    for (int k = 0; k < CPL; ++k) v[k] = valid ? a(0, k) : (R)0;
    Vec<T, R, CPL>::store(out + obase + lane * CPL, v);
    return;
  }
  R inv = (R)1, dot = (R)0;
  bool jac = false;
  int64_t ibase = 0;
  if (valid && P.normalize) {
    const R nrm = reinterpret_cast<const R *>(norms)[tok_index(TS, n, t)];
    inv = inv_norm<R>(nrm);
    jac = nrm > (R)LIK_NORM_EPS;
    if (jac) {
      ibase = seq_base(TS, n) + t * TS.sl;
      for (int ch = 0; ch < nch; ++ch) {
        const int col = ch * CW + lane * CPL;
        const int lim = (int)min((int64_t)CPL, dim - col);
        if (lim <= 0) continue;
        R y[CPL];
        load_cols<T, R, CPL>(tin + ibase + (int64_t)col * TS.sk, TS.sk, lim, vec_tgt, y);
#pragma unroll
        for (int k = 0; k < CPL; ++k) dot = fma(a(ch, k), y[k] * inv, dot);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    }
  }
  for (int ch = 0; ch < nch; ++ch) {
    const int col = ch * CW + lane * CPL;
    const int lim = (int)min((int64_t)CPL, dim - col);
    if (lim <= 0) continue;
    R v[CPL];
    if (!valid) {
#pragma unroll
      for (int k = 0; k < CPL; ++k) v[k] = (R)0;
    } else if (jac) {
      R y[CPL];
      load_cols<T, R, CPL>(tin + ibase + (int64_t)col * TS.sk, TS.sk, lim, vec_tgt, y);
#pragma unroll
      for (int k = 0; k < CPL; ++k) v[k] = (a(ch, k) - y[k] * inv * dot) * inv;
    } else {
#pragma unroll
      for (int k = 0; k < CPL; ++k) v[k] = a(ch, k) * inv;
    }
    store_cols<T, R, CPL>(out + obase + (int64_t)col * GS.sk, GS.sk, lim, vec_out, v);
  }
}

/* The warp adds its lanes' terms (lane l: ok, weight gg, source row at
 * element offset off of SS), in lane order, into a row accumulator whose
 * columns the lanes own (CPL per chunk of 32 * CPL): registers racc (REG:
 * d <= 32 * CPL) or the warp's shared-memory row sacc; 8 source rows in
 * flight.  ROWS (with REG): lane l's term belongs to row rl of the warp's
 * shared-memory rows sacc + rl * rstride, racc holds row *cur, and a term of
 * another row first swaps racc with that row (the terms of one row being
 * consecutive, the adds stay in registers).  WIDE (P.vec_src: d a multiple
 * of CPL, aligned rows): a lane's CPL columns are all inside d or all past
 * it and one wide load reads them, so the 8 loads issue without the
 * per-element fallback between them (add_terms picks once per call). */
template <typename T, typename R, int CPL, bool REG, bool WIDE, bool ROWS>
__device__ __forceinline__ void add_terms_as(const Params &P, const KSeq &SS, bool ok, R gg,
                                             int64_t off, R (&racc)[CPL], R *sacc, int rl,
                                             int rstride, int *cur) {
  static_assert(REG || !ROWS, "ROWS keeps the current row in registers");
  const int lane = threadIdx.x & 31;
  const int CW = 32 * CPL;
  const int nch = P.nch;
  const int64_t dim = SS.dim;
  const T *src = reinterpret_cast<const T *>(SS.data);
  unsigned m = __ballot_sync(0xffffffffu, ok);
  while (m) {
    constexpr int U = 8;
    int64_t o[U];
    R gv[U];
    int ro[U]; /* ROWS: the terms' rows, as element offsets into sacc */
    int cnt = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int b = m ? __ffs(m) - 1 : 0;
      if (m) { m &= m - 1; cnt = u + 1; }
      o[u] = __shfl_sync(0xffffffffu, off, b);
      gv[u] = __shfl_sync(0xffffffffu, gg, b);
      ro[u] = ROWS ? __shfl_sync(0xffffffffu, rl, b) * rstride : 0;
    }
    for (int ch = 0; ch < nch; ++ch) {
      const int col = ch * CW + lane * CPL;
      const int lim = (int)min((int64_t)CPL, dim - col);
      R v[U][CPL];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (u < cnt && lim > 0) {
          if (WIDE) Vec<T, R, CPL>::load(src + o[u] + col, v[u]);
          else load_cols<T, R, CPL>(src + o[u] + (int64_t)col * SS.sk, SS.sk, lim, P.vec_src != 0, v[u]);
        }
      if (lim > 0) {
        if (REG) {
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (u < cnt) {
              if (ROWS && ro[u] != *cur) { /* warp-uniform */
#pragma unroll
                for (int k = 0; k < CPL; ++k) {
                  sacc[*cur + col + k] = racc[k];
                  racc[k] = sacc[ro[u] + col + k];
                }
                *cur = ro[u];
              }
#pragma unroll
              for (int k = 0; k < CPL; ++k) racc[k] = fma(gv[u], v[u][k], racc[k]);
            }
        } else {
          R *a = sacc + col;
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (u < cnt) {
#pragma unroll
              for (int k = 0; k < CPL; ++k) a[k] = fma(gv[u], v[u][k], a[k]);
            }
        }
      }
    }
  }
}

template <typename T, typename R, int CPL, bool REG, bool ROWS = false>
__device__ __forceinline__ void add_terms(const Params &P, const KSeq &SS, bool ok, R gg, int64_t off,
                                          R (&racc)[CPL], R *sacc, int rl = 0, int rstride = 0,
                                          int *cur = nullptr) {
  if (P.vec_src)
    add_terms_as<T, R, CPL, REG, true, ROWS>(P, SS, ok, gg, off, racc, sacc, rl, rstride, cur);
  else
    add_terms_as<T, R, CPL, REG, false, ROWS>(P, SS, ok, gg, off, racc, sacc, rl, rstride, cur);
}

/* ---- grad_Q: a warp per query token ---------------------------------------------
 * Warp w of CTA b owns target row b * 8 + w (padded: query n = row / Lq, token
 * s = row % Lq; packed: Q row).  It walks the query's outputs in ascending
 * order (documents / candidates / its pairs), 32 at a time: lane e reads
 * output e's argmax entry, grad_score, document mask and norm, then the warp
 * adds the valid terms in order, 8 source rows in flight, into registers
 * (REG: d <= 32 * CPL) or a warp-private shared-memory row. */
template <typename T, typename R, int CPL, bool REG>
__global__ void __launch_bounds__(NT, 3) gradq_kernel(const Params P) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = (int64_t)blockIdx.x * NW + warp;
  const KSeq &TS = P.q, &SS = P.d;
  const bool packed = TS.off.data != nullptr;
  const int64_t total = packed ? P.q_total : TS.count * TS.len;
  if (row >= total) return;
  int64_t n, s;
  bool valid;
  if (!packed) {
    n = row / TS.len;
    s = row - n * TS.len;
    valid = true;
  } else {
    n = seq_of_row(TS, row);
    valid = n >= 0 && n < TS.count && row < kidx(TS.off, n + 1);
    s = valid ? row - kidx(TS.off, n) : 0;
    /* the argmax holds TS.len (its extent) tokens per query: a longer
     * query (an extent the caller sized too short, lik.h) reads none past it */
    valid = valid && s < TS.len;
  }
  valid = valid && mask_ok(P.qm, TS, n, s);
  const int CW = 32 * CPL;
  const int nch = P.nch;
  R racc[CPL];
#pragma unroll
  for (int k = 0; k < CPL; ++k) racc[k] = (R)0;
  R *sacc = reinterpret_cast<R *>(smem_raw) + (int64_t)warp * nch * CW;
  if (!REG)
    for (int i = lane; i < nch * CW; i += 32) sacc[i] = (R)0;
  if (valid) {
    int64_t nout, out0 = 0;
    if (P.pairing == 2) {
      out0 = P.q_start[n];
      nout = P.q_start[n + 1] - out0;
    } else {
      nout = P.ncand;
    }
    for (int64_t e0 = 0; e0 < nout; e0 += 32) {
      /* lane l: the term of output e0 + l */
      const int64_t e = e0 + lane;
      bool ok = false;
      R gg = 0;
      int64_t off = 0;
      if (e < nout) {
        int64_t oi, oj, dj;
        if (P.pairing == 0) { oi = n; oj = e; dj = e; }
        else if (P.pairing == 1) { oi = n; oj = e; dj = n * P.ncand + e; }
        else { const int64_t p = P.q_pairs[out0 + e]; oi = 0; oj = p; dj = kidx(P.pd, p); }
        const int32_t t = argmax_at(P, oi, oj, s);
        ok = t >= 0 && (int64_t)t < seq_len(SS, dj) && mask_ok(P.dm, SS, dj, t);
        if (ok) {
          gg = grad_at<R>(P, oi, oj);
          if (P.normalize)
            gg *= inv_norm<R>(reinterpret_cast<const R *>(P.dnorm)[tok_index(SS, dj, t)]);
          off = seq_base(SS, dj) + (int64_t)t * SS.sl;
        }
      }
      add_terms<T, R, CPL, REG>(P, SS, ok, gg, off, racc, sacc);
    }
  }
  __syncwarp();
  const int64_t obase = packed ? row * P.gq.sl : seq_base(P.gq, n) + s * P.gq.sl;
  if (REG)
    finish_row<T, R, CPL>(P, TS, P.gq, P.qnorm, P.vec_tgt != 0, P.vec_out != 0, 1, lane, n, s, valid,
                          obase, [&](int, int k) -> R & { return racc[k]; });
  else
    finish_row<T, R, CPL>(P, TS, P.gq, P.qnorm, P.vec_tgt != 0, P.vec_out != 0, nch, lane, n, s,
                          valid, obase,
                          [&](int ch, int k) -> R & { return sacc[ch * CW + lane * CPL + k]; });
  /* launched as the programmatic dependent of range_kernel: the grid ends
   * after it (every CTA has a warp reaching this; at once otherwise) */
  griddep_wait();
}

/* ---- grad_D: destination-owned tiles ------------------------------------------------
 * One CTA per tile of P.tt document rows (padded: tokens [tile * tt, ...) of
 * document n; packed: rows [b * tt, ...)) (the sparse mode: gradd_sparse_kernel).
 * The candidates (output, query token) of each document of the tile are
 * walked in ascending order in chunks of 1024; a stable compaction keeps the
 * terms landing in the CTA's rows; warp w adds the terms of its rows
 * (row % 8 == w) into the shared-memory accumulator, lanes owning columns. */

struct Seg {
  int64_t n;          /* document */
  int64_t t_lo, t_hi; /* its tokens inside the CTA's rows */
  int64_t lbase;      /* local row of token t: t + lbase */
  int64_t out0, nout; /* outputs (pairs CSR start / count) */
  int64_t width;      /* candidates per output: Lmax */
};

__device__ __forceinline__ void seg_outputs(const Params &P, Seg &g) {
  if (P.pairing == 0) {
    g.out0 = 0;
    g.nout = P.q.count;
  } else if (P.pairing == 1) {
    g.out0 = 0;
    g.nout = 1;
  } else {
    g.out0 = P.d_start[g.n];
    g.nout = P.d_start[g.n + 1] - g.out0;
  }
  g.width = P.q.len;
}

/* Candidate (output e, query token s) of segment g: its output (oi, oj) and
 * query qi. */
__device__ __forceinline__ void cand_index(const Params &P, const Seg &g, int64_t e, int64_t &oi,
                                           int64_t &oj, int64_t &qi) {
  const int64_t n = g.n;
  if (P.pairing == 0) { oi = e; oj = n; qi = e; }
  else if (P.pairing == 1) { oi = n / P.ncand; oj = n - oi * P.ncand; qi = oi; }
  else { const int64_t p = P.d_pairs[g.out0 + e]; oi = 0; oj = p; qi = kidx(P.pq, p); }
}

/* A term's weight gg (g[oi,oj] / ||Q[qi,s]|| under normalize) and the element
 * offset off of its source Q row. */
template <typename R>
__device__ __forceinline__ void cand_term(const Params &P, int64_t oi, int64_t oj, int64_t qi,
                                          int64_t s, R &gg, int64_t &off) {
  R scale = grad_at<R>(P, oi, oj);
  if (P.normalize) scale *= inv_norm<R>(reinterpret_cast<const R *>(P.qnorm)[tok_index(P.q, qi, s)]);
  gg = scale;
  off = seq_base(P.q, qi) + s * P.q.sl;
}

/* The argmax entry t of candidate (query qi, token s) of segment g is a term
 * of a row of the CTA: inside [t_lo, t_hi) (-1 never is), qi's length and
 * mask (a masked target row is zeroed when written: no need to look). */
__device__ __forceinline__ bool cand_keeps(const Params &P, const Seg &g, int64_t qi, int64_t s,
                                           int32_t t) {
  if (t < g.t_lo || t >= g.t_hi) return false;
  if (P.q.off.data && s >= seq_len(P.q, qi)) return false;
  if (!mask_ok(P.qm, P.q, qi, s)) return false;
  return true;
}

/* Candidate (output e, query token s) of segment g: whether it is a term of a
 * row of the CTA; then tl (local row), gg and off (cand_term). */
template <typename R>
__device__ __forceinline__ bool candidate(const Params &P, const Seg &g, int64_t e, int64_t s,
                                          int &tl, R &gg, int64_t &off) {
  int64_t oi, oj, qi;
  cand_index(P, g, e, oi, oj, qi);
  const int32_t t = argmax_at(P, oi, oj, s);
  if (!cand_keeps(P, g, qi, s, t)) return false;
  cand_term<R>(P, oi, oj, qi, s, gg, off);
  tl = (int)(t + g.lbase);
  return true;
}

template <typename R> struct Smem {
  int tl[CH];
  R g[CH];
  long long off[CH];
  int cnt[EPT * NW + 1];
};

/* Evaluates candidates [base, base + CH) of segment g into the list (stable,
 * candidate order).  Returns the list length.  Block-wide (barriers). */
template <typename R>
__device__ __forceinline__ int eval_chunk(const Params &P, const Seg &g, int64_t ncands, int64_t base,
                                          Smem<R> &sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int tl[EPT];
  R gg[EPT];
  int64_t off[EPT];
  bool ok[EPT];
  {
    int64_t c = base + tid, e, w;
    if (c <= 0xffffffffll && g.width <= 0xffffffffll) { /* 32-bit division: the common case */
      const unsigned cu = (unsigned)c, wu = (unsigned)g.width, eu = cu / wu;
      e = eu;
      w = cu - eu * wu;
    } else {
      e = c / g.width;
      w = c - e * g.width;
    }
    const int64_t se = g.width > NT ? 0 : NT / (int)g.width, sw = NT - se * g.width;
#pragma unroll
    for (int k = 0; k < EPT; ++k) {
      ok[k] = c < ncands && candidate<R>(P, g, e, w, tl[k], gg[k], off[k]);
      c += NT;
      e += se;
      w += sw;
      if (w >= g.width) { w -= g.width; ++e; }
    }
  }
  unsigned bal[EPT];
#pragma unroll
  for (int k = 0; k < EPT; ++k) {
    bal[k] = __ballot_sync(0xffffffffu, ok[k]);
    if (lane == 0) sm.cnt[k * NW + warp] = __popc(bal[k]);
  }
  __syncthreads();
  if (warp == 0) { /* exclusive scan of the EPT * NW counts, k-major */
    const int v = lane < EPT * NW ? sm.cnt[lane] : 0;
    int x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane < EPT * NW) sm.cnt[lane] = x - v;
    if (lane == 31) sm.cnt[EPT * NW] = x;
  }
  __syncthreads();
  const unsigned lt_mask = (1u << lane) - 1u;
#pragma unroll
  for (int k = 0; k < EPT; ++k)
    if (ok[k]) {
      const int pos = sm.cnt[k * NW + warp] + __popc(bal[k] & lt_mask);
      sm.tl[pos] = tl[k];
      sm.g[pos] = gg[k];
      sm.off[pos] = off[k];
    }
  __syncthreads();
  return sm.cnt[EPT * NW];
}

/* Warp `warp` adds the list's terms whose local row r (tl - row0) is in
 * [0, rows) and r % 8 == warp, in list order, into acc (rows of dpad). */
template <typename T, typename R, int CPL>
__device__ __forceinline__ void accumulate(const Params &P, const Smem<R> &sm, int L, int row0,
                                           int rows, R *acc, int dpad) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int CW = 32 * CPL;
  const int64_t dim = P.d.dim;
  const T *src = reinterpret_cast<const T *>(P.q.data);
  for (int b0 = 0; b0 < L; b0 += 32) {
    const int idx = b0 + lane;
    int r = idx < L ? sm.tl[idx] - row0 : -1;
    const bool mine = r >= 0 && r < rows && (r % NW) == warp;
    unsigned m = __ballot_sync(0xffffffffu, mine);
    while (m) {
      constexpr int U = 8;
      int pos[U], cnt = 0;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        pos[u] = m ? b0 + __ffs(m) - 1 : b0;
        if (m) { m &= m - 1; cnt = u + 1; }
      }
      for (int ch = 0; ch < P.nch; ++ch) {
        const int col = ch * CW + lane * CPL;
        const int lim = (int)min((int64_t)CPL, dim - col);
        if (lim <= 0) continue;
        R v[U][CPL];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (u < cnt)
            load_cols<T, R, CPL>(src + sm.off[pos[u]] + (int64_t)col * P.q.sk, P.q.sk, lim,
                                 P.vec_src != 0, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (u < cnt) {
            const R gv = sm.g[pos[u]];
            R *a = acc + (int64_t)(sm.tl[pos[u]] - row0) * dpad + col;
#pragma unroll
            for (int k = 0; k < CPL; ++k) a[k] = fma(gv, v[u][k], a[k]);
          }
      }
    }
  }
}

/* Finishes rows [0, rows) of the accumulator: local row l is token t0 + l of
 * document n (padded), or packed row r0 + l. */
template <typename T, typename R, int CPL>
__device__ __forceinline__ void finish_tile(const Params &P, bool packed, int64_t n, int64_t t0,
                                            int64_t r0, int rows, R *acc, int dpad) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const KSeq &TS = P.d;
  for (int l = warp; l < rows; l += NW) {
    int64_t nn = n, t;
    bool valid;
    if (!packed) {
      t = t0 + l;
      valid = true;
    } else {
      const int64_t r = r0 + l;
      nn = seq_of_row(TS, r);
      valid = nn >= 0 && nn < TS.count && r < kidx(TS.off, nn + 1);
      t = valid ? r - kidx(TS.off, nn) : 0;
    }
    valid = valid && mask_ok(P.dm, TS, nn, t);
    const int64_t obase = packed ? (r0 + l) * P.gd.sl : seq_base(P.gd, nn) + t * P.gd.sl;
    R *a = acc + (int64_t)l * dpad + lane * CPL;
    finish_row<T, R, CPL>(P, TS, P.gd, P.dnorm, P.vec_tgt != 0, P.vec_out != 0, P.nch, lane, nn, t,
                          valid, obase, [&](int ch, int k) -> R & { return a[ch * 32 * CPL + k]; });
  }
}

template <typename T, typename R, int CPL>
__global__ void __launch_bounds__(NT, 2) gradd_kernel(const Params P) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem<R> &sm = *reinterpret_cast<Smem<R> *>(smem_raw);
  R *acc = reinterpret_cast<R *>(smem_raw + (sizeof(Smem<R>) + 15) / 16 * 16);
  const KSeq &TS = P.d;
  const int tid = threadIdx.x;
  const int dpad = P.nch * 32 * CPL;
  const int tt = P.tt;
  const bool packed = TS.off.data != nullptr;

  int64_t n_first, n_last, r0 = 0, t0 = 0;
  int rows;
  if (!packed) {
    n_first = n_last = (int64_t)blockIdx.x / P.tps;
    t0 = ((int64_t)blockIdx.x % P.tps) * tt;
    rows = (int)min((int64_t)tt, TS.len - t0);
  } else {
    r0 = (int64_t)blockIdx.x * tt;
    rows = (int)min((int64_t)tt, P.d_total - r0);
    n_first = seq_of_row(TS, r0);
    n_last = seq_of_row(TS, r0 + rows - 1);
    if (n_first < 0) n_first = 0;
    if (n_last >= TS.count) n_last = TS.count - 1;
  }
  for (int i = tid; i < rows * dpad; i += NT) acc[i] = (R)0;
  __syncthreads();
  for (int64_t n = n_first; n <= n_last; ++n) {
    Seg g;
    g.n = n;
    if (!packed) {
      g.t_lo = t0;
      g.t_hi = t0 + rows;
      g.lbase = -t0;
    } else {
      const int64_t o0 = kidx(TS.off, n), o1 = kidx(TS.off, n + 1);
      g.t_lo = max(r0, o0) - o0;
      g.t_hi = min(r0 + rows, o1) - o0;
      g.lbase = o0 - r0;
      if (g.t_hi <= g.t_lo) continue;
    }
    seg_outputs(P, g);
    if (g.nout <= 0 || g.width <= 0) continue;
    const int64_t ncands = g.nout * g.width;
    for (int64_t base = 0; base < ncands; base += CH) {
      const int L = eval_chunk<R>(P, g, ncands, base, sm);
      accumulate<T, R, CPL>(P, sm, L, 0, rows, acc, dpad);
      __syncthreads();
    }
  }
  finish_tile<T, R, CPL>(P, packed, n_first, t0, r0, rows, acc, dpad);
}

/* grad_D, sparse mode (padded; a document's candidates fit one chunk: KD,
 * pairs, few queries): one CTA per document.  It first writes the document's
 * gradient rows as zeros (streaming stores), evaluates its candidates once
 * (stable compaction), then warp w builds every hit row r with r % 8 == w at
 * its first occurrence in the list: the row's terms in list order into a
 * warp-private shared-memory row, finished and stored over the zeros (the
 * barrier in between orders the two writes). */
template <typename T, typename R, int CPL>
__global__ void __launch_bounds__(NT, 2) gradd_sparse_kernel(const Params P, size_t fixed) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem<R> &sm = *reinterpret_cast<Smem<R> *>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int CW = 32 * CPL;
  const int dpad = P.nch * CW;
  R *wrow = reinterpret_cast<R *>(smem_raw + fixed) + (int64_t)warp * dpad;
  const KSeq &TS = P.d;
  const int64_t n = blockIdx.x, len = TS.len, dim = TS.dim;
  /* rows already built: one bitmap per warp over its own rows (bit row / 8),
   * so no word is shared between warps */
  const int64_t wwords = ((len + NW - 1) / NW + 31) / 32;
  unsigned *done = reinterpret_cast<unsigned *>(smem_raw + fixed + (size_t)NW * dpad * sizeof(R)) +
                   warp * wwords;
  T *out = reinterpret_cast<T *>(const_cast<void *>(P.gd.data));
  const int64_t gbase = seq_base(P.gd, n);
  /* the zeros: one 16-byte streaming store per thread and step over the
   * document's span where its rows are one aligned block, else row by row */
  const int64_t span = len * dim * (int64_t)sizeof(T);
  uint4 *flat = reinterpret_cast<uint4 *>(out + gbase);
  if (P.gd.sk == 1 && P.gd.sl == dim && span % 16 == 0 && ((uintptr_t)flat & 15) == 0) {
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    for (int64_t i = tid; i < span / 16; i += NT) __stcs(flat + i, z);
  } else {
    for (int64_t t = warp; t < len; t += NW) {
      R z[CPL];
#pragma unroll
      for (int k = 0; k < CPL; ++k) z[k] = (R)0;
      for (int ch = 0; ch < P.nch; ++ch) {
        const int col = ch * CW + lane * CPL;
        const int lim = (int)min((int64_t)CPL, dim - col);
        if (lim > 0)
          store_cols<T, R, CPL>(out + gbase + t * P.gd.sl + (int64_t)col * P.gd.sk, P.gd.sk, lim,
                                P.vec_out != 0, z);
      }
    }
  }
  for (int64_t i = lane; i < wwords; i += 32) done[i] = 0u;
  Seg g;
  g.n = n;
  g.t_lo = 0;
  g.t_hi = len;
  g.lbase = 0;
  seg_outputs(P, g);
  const int64_t ncands = g.nout * g.width; /* <= CH */
  const int L = ncands > 0 ? eval_chunk<R>(P, g, ncands, 0, sm) : 0; /* ends with a barrier */
  if (ncands <= 0) __syncthreads();
  const T *src = reinterpret_cast<const T *>(P.q.data);
  for (int k0 = 0; k0 < L; k0 += 32) {
    const int idx = k0 + lane;
    const int r = idx < L ? sm.tl[idx] : -1;
    unsigned m = __ballot_sync(0xffffffffu, r >= 0 && (r % NW) == warp);
    while (m) {
      const int b = __ffs(m) - 1;
      m &= m - 1;
      const int row = __shfl_sync(0xffffffffu, r, b);
      const int q = row / NW; /* row % NW == warp */
      if (done[q >> 5] & (1u << (q & 31))) continue;
      __syncwarp();
      if (lane == 0) done[q >> 5] |= 1u << (q & 31);
      for (int i = lane; i < dpad; i += 32) wrow[i] = (R)0;
      __syncwarp();
      for (int j0 = k0 + b; j0 < L; j0 += 32) {
        const int jj = j0 + lane;
        unsigned mm = __ballot_sync(0xffffffffu, jj < L && sm.tl[jj] == row);
        while (mm) {
          constexpr int U = 8;
          int pos[U], cnt = 0;
#pragma unroll
          for (int u = 0; u < U; ++u) {
            pos[u] = mm ? j0 + __ffs(mm) - 1 : j0;
            if (mm) { mm &= mm - 1; cnt = u + 1; }
          }
          for (int ch = 0; ch < P.nch; ++ch) {
            const int col = ch * CW + lane * CPL;
            const int lim = (int)min((int64_t)CPL, dim - col);
            if (lim <= 0) continue;
            R v[U][CPL];
#pragma unroll
            for (int u = 0; u < U; ++u)
              if (u < cnt)
                load_cols<T, R, CPL>(src + sm.off[pos[u]] + (int64_t)col * P.q.sk, P.q.sk, lim,
                                     P.vec_src != 0, v[u]);
            R *a = wrow + col;
#pragma unroll
            for (int u = 0; u < U; ++u)
              if (u < cnt) {
                const R gv = sm.g[pos[u]];
#pragma unroll
                for (int k = 0; k < CPL; ++k) a[k] = fma(gv, v[u][k], a[k]);
              }
          }
        }
      }
      __syncwarp();
      const bool valid = mask_ok(P.dm, TS, n, row);
      finish_row<T, R, CPL>(P, TS, P.gd, P.dnorm, P.vec_tgt != 0, P.vec_out != 0, P.nch, lane, n,
                            (int64_t)row, valid, gbase + (int64_t)row * P.gd.sl,
                            [&](int ch, int k) -> R & { return wrow[ch * CW + lane * CPL + k]; });
      __syncwarp();
    }
  }
}

/* ---- grad_D by buckets (padded cross / KD): the argmax transposed ---------------
 * Document n's candidates c = e * Lq + s (output e, query token s; nc of
 * them) fall into segments of B.seg (<= SEG_MAX) candidates.  bucket_kernel,
 * a CTA per (document, segment), sorts the segment's terms by target row,
 * stable: warp w counts the rows its slice of the segment hits (a shared-memory
 * count per warp and row, one add per run of equal rows: __match_any_sync);
 * then, per row, the warps' counts become cursors (earlier warps first, the
 * rows' starts by a block scan), and the warps walk their slices again
 * writing c - c0 at each term's cursor.  So row t's terms of a segment are
 * list[start[t] .. start[t + 1]) in candidate order, and the segments in
 * ascending order give the canonical order.  gather_kernel then builds each
 * row like grad_Q builds its rows: a warp per document row (gather_rows_kernel:
 * per 8 rows, where they have few terms), reading only its own terms (no
 * rescan of the candidates per tile of rows). */

constexpr int64_t SEG_MAX = 65280; /* candidates per segment: offsets and counts fit 16 bits */

struct Buckets {
  int64_t n0;      /* documents [n0, n0 + count) of this launch */
  int nseg;        /* segments per document */
  int seg;         /* candidates per segment: a multiple of NT */
  uint16_t *list;  /* [count * nseg][seg]: a segment's terms (c - c0) by row */
  uint16_t *start; /* [count * nseg][Ld + 1]: row t's terms list[start[t] .. start[t + 1]) */
  int gr;          /* gather_rows_kernel: rows per warp */
};

/* Document n's segment (outputs, query tokens) over all of its rows. */
__device__ __forceinline__ Seg doc_seg(const Params &P, int64_t n) {
  Seg g;
  g.n = n;
  g.t_lo = 0;
  g.t_hi = P.d.len;
  g.lbase = 0;
  seg_outputs(P, g);
  return g;
}

/* Candidate c = e * width + s of segment g: (e, s). */
__device__ __forceinline__ void cand_split(const Seg &g, int64_t c, int64_t &e, int64_t &s) {
  if (c <= 0xffffffffll && g.width <= 0xffffffffll) { /* 32-bit division: the common case */
    const unsigned eu = (unsigned)c / (unsigned)g.width;
    e = eu;
    s = c - (int64_t)eu * g.width;
  } else {
    e = c / g.width;
    s = c - e * g.width;
  }
}

/* Candidate c of segment g: its target row, -1 where it is no term. */
template <typename R>
__device__ __forceinline__ int row_of(const Params &P, const Seg &g, int64_t c) {
  int64_t e, s, off;
  R gg;
  int tl;
  cand_split(g, c, e, s);
  return candidate<R>(P, g, e, s, tl, gg, off) ? tl : -1;
}

typedef cub::BlockScan<int, NT> BucketScan;

/* Dynamic shared memory: the scan's storage, then the counts [NW][Ld]
 * (all of it dynamic: a kernel with static shared memory could not be
 * allowed the device's whole opt-in maximum). */
constexpr size_t BUCKET_SMEM0 = (sizeof(BucketScan::TempStorage) + 15) / 16 * 16;

/* A warp's walk of its slice [w0, w1) of the segment, U x 32 candidates in
 * flight: f(c, t, peers) per candidate c, in order, t = row(c) its target
 * row (-1: no term; -1 from w1 on) and peers the lanes with the same t. */
template <int U, typename Row, typename F>
__device__ __forceinline__ void walk_slice(int64_t w0, int64_t w1, int lane, Row row, F f) {
  for (int64_t base = w0; base < w1; base += 32 * U) {
    int t[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + 32 * u + lane;
      t[u] = c < w1 ? row(c) : -1;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      f(base + 32 * u + lane, t[u], __match_any_sync(0xffffffffu, t[u]));
  }
}

/* The stable sort of candidates [c0, c1) by target row row(c) (local, in
 * [0, rows), or -1: no term; block-wide): warp w walks its slice [c0 + w sw,
 * ...) twice, counting into cnt ([NW][rows], shared memory) and then writing
 * c - c0 at each term's cursor into list; start[t] is row t's first entry,
 * start[rows] their count. */
template <int U, typename Row>
__device__ __forceinline__ void bucket_sort(Row row, int64_t c0, int64_t c1, int sw, int64_t rows,
                                            uint16_t *cnt, BucketScan::TempStorage &scan_tmp,
                                            uint16_t *start, uint16_t *list) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t w0 = c0 + (int64_t)warp * sw, w1 = min(w0 + sw, c1);
  uint16_t *mine = cnt + warp * rows;
  for (int64_t i = tid; i < NW * rows; i += NT) cnt[i] = 0;
  __syncthreads();
  walk_slice<U>(w0, w1, lane, row, [&](int64_t, int t, unsigned peers) {
    if (t >= 0 && lane == __ffs(peers) - 1) mine[t] += (uint16_t)__popc(peers);
    __syncwarp();
  });
  __syncthreads();
  /* cursors: row t's start in the segment plus the counts of earlier warps */
  int carry = 0;
  for (int64_t t0 = 0; t0 < rows; t0 += NT) {
    const int64_t t = t0 + tid;
    int tot = 0, excl, sum;
    if (t < rows)
      for (int w = 0; w < NW; ++w) {
        const int v = cnt[w * rows + t];
        cnt[w * rows + t] = (uint16_t)tot;
        tot += v;
      }
    BucketScan(scan_tmp).ExclusiveSum(tot, excl, sum);
    excl += carry;
    if (t < rows) {
      start[t] = (uint16_t)excl;
      for (int w = 0; w < NW; ++w) cnt[w * rows + t] += (uint16_t)excl;
    }
    carry += sum;
    __syncthreads(); /* scan_tmp is reused */
  }
  if (tid == 0) start[rows] = (uint16_t)carry;
  const unsigned lt = (1u << lane) - 1u;
  walk_slice<U>(w0, w1, lane, row, [&](int64_t c, int t, unsigned peers) {
    if (t >= 0) list[mine[t] + __popc(peers & lt)] = (uint16_t)(c - c0);
    __syncwarp();
    if (t >= 0 && lane == __ffs(peers) - 1) mine[t] += (uint16_t)__popc(peers);
    __syncwarp();
  });
}

template <typename R>
__global__ void __launch_bounds__(NT) bucket_kernel(const Params P, const Buckets B) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  BucketScan::TempStorage &scan_tmp = *reinterpret_cast<BucketScan::TempStorage *>(smem_raw);
  const int64_t len = P.d.len, b = blockIdx.x;
  const Seg g = doc_seg(P, B.n0 + b / B.nseg);
  const int64_t nc = g.nout * g.width, c0 = (b % B.nseg) * (int64_t)B.seg;
  uint16_t *cnt = reinterpret_cast<uint16_t *>(smem_raw + BUCKET_SMEM0); /* [NW][len] */
  bucket_sort<4>([&](int64_t c) { return row_of<R>(P, g, c); }, c0, nc, B.seg / NW, len, cnt,
                 scan_tmp, B.start + b * (len + 1), B.list + b * B.seg);
}

/* A warp per row t of document n (rows of documents [n0, n0 + count)): its
 * terms segment by segment, then the row finished and written once. */
template <typename T, typename R, int CPL, bool REG>
__global__ void __launch_bounds__(NT, 3) gather_kernel(const Params P, const Buckets B, int64_t count) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t len = P.d.len, row = (int64_t)blockIdx.x * NW + warp;
  if (row >= count * len) return;
  const int64_t nb = row / len, t = row - nb * len;
  const Seg g = doc_seg(P, B.n0 + nb);
  const int CW = 32 * CPL;
  R racc[CPL];
#pragma unroll
  for (int k = 0; k < CPL; ++k) racc[k] = (R)0;
  R *sacc = reinterpret_cast<R *>(smem_raw) + (int64_t)warp * P.nch * CW;
  if (!REG)
    for (int i = lane; i < P.nch * CW; i += 32) sacc[i] = (R)0;
  for (int k = 0; k < B.nseg; ++k) {
    const int64_t b = nb * B.nseg + k, c0 = (int64_t)k * B.seg;
    const uint16_t *list = B.list + b * B.seg;
    const int i0 = B.start[b * (len + 1) + t], i1 = B.start[b * (len + 1) + t + 1];
    for (int i = i0; i < i1; i += 32) {
      /* an entry is a term by construction: its weight and source row only */
      R gg = 0;
      int64_t off = 0;
      const bool ok = i + lane < i1;
      if (ok) {
        int64_t e, s, oi, oj, qi;
        cand_split(g, c0 + list[i + lane], e, s);
        cand_index(P, g, e, oi, oj, qi);
        cand_term<R>(P, oi, oj, qi, s, gg, off);
      }
      add_terms<T, R, CPL, REG>(P, P.q, ok, gg, off, racc, sacc);
    }
  }
  __syncwarp();
  const bool valid = mask_ok(P.dm, P.d, g.n, t);
  const int64_t obase = seq_base(P.gd, g.n) + t * P.gd.sl;
  if (REG)
    finish_row<T, R, CPL>(P, P.d, P.gd, P.dnorm, P.vec_tgt != 0, P.vec_out != 0, 1, lane, g.n, t,
                          valid, obase, [&](int, int k) -> R & { return racc[k]; });
  else
    finish_row<T, R, CPL>(P, P.d, P.gd, P.dnorm, P.vec_tgt != 0, P.vec_out != 0, P.nch, lane, g.n,
                          t, valid, obase,
                          [&](int ch, int k) -> R & { return sacc[ch * CW + lane * CPL + k]; });
}

/* Rows with few terms (d <= 32 CPL): the calling warp builds rows t0 ..
 * t0 + nr - 1 (nr <= 31) of g's document.  Segment by segment (seg(k, list,
 * st, c0): segment k's list, the starts of rows t0 .. t0 + nr at st[0 .. nr],
 * its first candidate), the rows' terms are one contiguous run of the list
 * (rows ascending, each row's terms in candidate order), read 32 at a time,
 * each added into its row (add_terms' ROWS: the row being added to in
 * registers, the rows in the warp's shared memory sacc, rstride apart), so a
 * row's terms are added in the canonical order and the rows share the
 * latency of their start, list and weight loads; then each row is finished
 * and written once. */
template <typename T, typename R, int CPL, typename SegList>
__device__ __forceinline__ void gather_group(const Params &P, const Seg &g, int64_t t0, int nr,
                                             int nseg, R *sacc, SegList seg) {
  const int lane = threadIdx.x & 31;
  const int CW = 32 * CPL, rstride = P.nch * CW; /* nch == 1 */
  for (int i = lane; i < nr * rstride; i += 32) sacc[i] = (R)0;
  R racc[CPL];
#pragma unroll
  for (int k = 0; k < CPL; ++k) racc[k] = (R)0;
  int cur = 0; /* racc is row cur / rstride */
  for (int k = 0; k < nseg; ++k) {
    const uint16_t *list, *st;
    int64_t c0;
    seg(k, list, st, c0);
    /* lane r <= nr: the start of row t0 + r's terms (r = nr: the run's end) */
    const int sv = lane <= nr ? (int)st[lane] : 0;
    const int i0 = __shfl_sync(0xffffffffu, sv, 0), i1 = __shfl_sync(0xffffffffu, sv, nr);
    for (int i = i0; i < i1; i += 32) {
      /* an entry is a term by construction: its weight, source row and row */
      R gg = 0;
      int64_t off = 0;
      const int at = i + lane;
      const bool ok = at < i1;
      if (ok) {
        int64_t e, s, oi, oj, qi;
        cand_split(g, c0 + list[at], e, s);
        cand_index(P, g, e, oi, oj, qi);
        cand_term<R>(P, oi, oj, qi, s, gg, off);
      }
      int rl = 0;
      for (int r = 1; r < nr; ++r) rl += __shfl_sync(0xffffffffu, sv, r) <= at;
      add_terms<T, R, CPL, true, true>(P, P.q, ok, gg, off, racc, sacc, rl, rstride, &cur);
    }
  }
#pragma unroll
  for (int k = 0; k < CPL; ++k) sacc[cur + lane * CPL + k] = racc[k];
  __syncwarp();
  const int64_t gbase = seq_base(P.gd, g.n);
  for (int r = 0; r < nr; ++r) {
    const int64_t t = t0 + r;
    const bool valid = mask_ok(P.dm, P.d, g.n, t);
    const int64_t obase = gbase + t * P.gd.sl;
    R *a = sacc + r * rstride + lane * CPL;
    finish_row<T, R, CPL>(P, P.d, P.gd, P.dnorm, P.vec_tgt != 0, P.vec_out != 0, P.nch, lane, g.n,
                          t, valid, obase, [&](int ch, int k) -> R & { return a[ch * CW + k]; });
  }
}

/* A warp per B.gr consecutive rows t0 .. of document n (rows of documents
 * [n0, n0 + count); a group never spans two documents): gather_group over
 * the document's segments. */
template <typename T, typename R, int CPL>
__global__ void __launch_bounds__(NT, 3) gather_rows_kernel(const Params P, const Buckets B,
                                                            int64_t count) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5;
  const int64_t len = P.d.len, gpd = (len + B.gr - 1) / B.gr; /* groups per document */
  const int64_t grp = (int64_t)blockIdx.x * NW + warp;
  if (grp >= count * gpd) return;
  const int64_t nb = grp / gpd, t0 = (grp - nb * gpd) * B.gr;
  const int nr = (int)min((int64_t)B.gr, len - t0); /* the group's rows */
  const Seg g = doc_seg(P, B.n0 + nb);
  R *sacc = reinterpret_cast<R *>(smem_raw) + (int64_t)warp * B.gr * P.nch * 32 * CPL;
  gather_group<T, R, CPL>(P, g, t0, nr, B.nseg, sacc,
                          [&](int k, const uint16_t *&list, const uint16_t *&st, int64_t &c0) {
                            const int64_t b = nb * B.nseg + k;
                            c0 = (int64_t)k * B.seg;
                            list = B.list + b * B.seg;
                            st = B.start + b * (len + 1) + t0;
                          });
}

/* ---- grad_D by row ranges ---------------------------------------------------
 * Padded cross / KD with few terms a row (Nq Lq <= 2 Ld, d <= 32 CPL) and a
 * document's candidates within a CTA's shared memory: a CTA per (document n,
 * range of G.rr rows), one launch.  The CTA reads its document's argmax
 * entries once (RU loads a thread in flight, consecutive threads on
 * consecutive candidates) into tv, each candidate's local row in the range
 * or none; bucket_sort orders the range's terms by row from tv (its list and
 * starts in shared memory), then warp w builds the range's groups of 8 rows
 * w, w + 8, ... (gather_group, one segment).  The terms and their order are
 * the buckets', so the bits are theirs (and the tiles'). */
struct Ranges {
  int rr;       /* rows per range: a multiple of 8 */
  int nrange;   /* ranges per document */
};

constexpr int RU = 8;            /* argmax entries a thread has in flight */
constexpr uint16_t NO_ROW = 0xffff; /* tv: the candidate is no term of the range */

template <typename T, typename R, int CPL>
__global__ void __launch_bounds__(NT, 2) range_kernel(const Params P, const Ranges G) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  griddep_launch(); /* grad_Q (launch_gradq) may take the SMs this grid leaves */
  BucketScan::TempStorage &scan_tmp = *reinterpret_cast<BucketScan::TempStorage *>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, rstride = 32 * CPL;
  const int64_t n = blockIdx.x / G.nrange, t0 = (int64_t)(blockIdx.x % G.nrange) * G.rr;
  const int rows = (int)min((int64_t)G.rr, P.d.len - t0);
  Seg g;
  g.n = n;
  g.t_lo = t0;
  g.t_hi = t0 + rows;
  g.lbase = -t0;
  seg_outputs(P, g);
  const int64_t nc = g.nout * g.width;
  R *sacc = reinterpret_cast<R *>(smem_raw + BUCKET_SMEM0) + warp * 8 * rstride; /* [NW][8] rows */
  uint16_t *cnt = reinterpret_cast<uint16_t *>(reinterpret_cast<R *>(smem_raw + BUCKET_SMEM0) +
                                               NW * 8 * rstride);  /* [NW][rr] */
  uint16_t *start = cnt + NW * G.rr;                                 /* [rr + 1] */
  uint16_t *list = start + G.rr + 1;                                 /* [nc] */
  uint16_t *tv = list + nc;                                          /* [nc] */
  for (int64_t b = 0; b < nc; b += (int64_t)NT * RU) {
    int32_t a[RU];
    int64_t qi[RU], s[RU];
#pragma unroll
    for (int u = 0; u < RU; ++u) {
      const int64_t c = b + (int64_t)u * NT + tid;
      a[u] = -1;
      if (c < nc) {
        int64_t e, oi, oj;
        cand_split(g, c, e, s[u]);
        cand_index(P, g, e, oi, oj, qi[u]);
        a[u] = argmax_at(P, oi, oj, s[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < RU; ++u) {
      const int64_t c = b + (int64_t)u * NT + tid;
      if (c < nc) tv[c] = cand_keeps(P, g, qi[u], s[u], a[u]) ? (uint16_t)(a[u] - t0) : NO_ROW;
    }
  }
  __syncthreads();
  const int sw = (int)((nc + 32 * NW - 1) / (32 * NW)) * 32;
  bucket_sort<8>([&](int64_t c) { const int v = tv[c]; return v == NO_ROW ? -1 : v; }, 0, nc, sw,
                 rows, cnt, scan_tmp, start, list);
  __syncthreads();
  for (int r0 = warp * 8; r0 < rows; r0 += NW * 8) {
    __syncwarp(); /* the previous group's rows are written */
    gather_group<T, R, CPL>(P, g, t0 + r0, min(8, rows - r0), 1, sacc,
                            [&](int, const uint16_t *&l, const uint16_t *&st, int64_t &c0) {
                              l = list;
                              st = start + r0;
                              c0 = 0;
                            });
  }
}

/* ---- token norms ------------------------------------------------------------ */

/* ||x|| of every token index of side s (padded: n * len + l over count * len;
 * packed: rows 0 .. total-1), warp per token, in R. */
template <typename T, typename R>
__global__ void __launch_bounds__(NT) norms_kernel(const KSeq s, int64_t ntok, R *out) {
  const int lane = threadIdx.x & 31;
  const int64_t tok = (int64_t)blockIdx.x * NW + (threadIdx.x >> 5);
  if (tok >= ntok) return;
  const T *x = reinterpret_cast<const T *>(s.data);
  int64_t base;
  if (s.off.data) base = tok * s.sl;
  else base = seq_base(s, tok / s.len) + (tok % s.len) * s.sl;
  R ss = 0;
  for (int64_t k = lane; k < s.dim; k += 32) {
    const R v = widen<T, R>(x[base + k * s.sk]);
    ss = fma(v, v, ss);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) out[tok] = sqrt(ss);
}

/* ---- pair lists: CSR by key ------------------------------------------------- */

__global__ void pair_keys_kernel(KIndex key, int64_t np, uint32_t *keys, int32_t *vals) {
  const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= np) return;
  keys[p] = (uint32_t)kidx(key, p);
  vals[p] = (int32_t)p;
}

/* start[n] = first position of key >= n in the sorted keys, n = 0 .. nkeys. */
__global__ void csr_start_kernel(const uint32_t *keys, int64_t np, int64_t nkeys, int32_t *start) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (n > nkeys) return;
  int64_t lo = 0, hi = np;
  while (lo < hi) {
    const int64_t mid = (lo + hi) >> 1;
    if ((int64_t)keys[mid] < n) lo = mid + 1;
    else hi = mid;
  }
  start[n] = (int32_t)lo;
}

} // namespace bw
} // namespace lik_cuda

#endif
