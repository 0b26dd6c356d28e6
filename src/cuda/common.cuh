/*
 * common.cuh — device-side view of a validated lik_problem (src/core/problem.h)
 * shared by the CUDA kernels of lik.  Everything here is 64-bit indexed.
 */
#ifndef LIK_CUDA_COMMON_CUH
#define LIK_CUDA_COMMON_CUH

#include <cuda.h> /* CUtensorMap (a type only: the driver is reached through the runtime) */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h> /* CUDART_NAN_F */
#include <stdint.h>

#include <type_traits>

extern "C" {
#include "../core/problem.h"
}

namespace lik_cuda {

/* An integer vector (cu_seqlens, pair indices). */
struct KIndex {
  const void *data;
  int64_t stride;
  int is64;
};

/* A batch of sequences (see lik_seqs; lens: per-sequence lengths, clamped). */
struct KSeq {
  const void *data;
  int64_t count, len, dim, sn, sl, sk, group, sg;
  KIndex off;
  const int32_t *lens;
  int64_t lens_sn, lens_sg;
};

/* A token mask: the host's lik_mask as it is (no field to resolve for the
 * device).  A typedef, not a derived struct: nvcc compiles a mask read
 * through a base class differently (head_fwd_kernel's SASS). */
typedef lik_mask KMask;

/* Everything a forward kernel needs, passed by value. */
struct KParams {
  KSeq q, d;
  KMask qm, dm;
  int pairing; /* 0 cross, 1 KD, 2 list */
  int normalize;
  int64_t nrows;  /* output rows: q.count (cross/KD) or 1 (list) */
  int64_t ncand;  /* output columns */
  KIndex pq, pd;  /* list pairing */
  float *scores;
  double *scores64; /* F64 scores (F64 inputs, the simt kernel): set instead of scores */
  int64_t ssi, ssj;
  int32_t *argmax;
  int64_t asi, asj, ass;
  /* work decomposition (set by the launcher) */
  int64_t upr;    /* units (CTAs) per output row */
  int64_t dpc;    /* items (output columns) per unit */
  int64_t nq;     /* queries (q.count) */
  int qpc;        /* queries stacked in one CTA's rows (cross pairing), else 1 */
  int qrows;      /* rows per query slot: BQ, or 32 / 64 when qpc > 1 (a power of two) */
  int qshift;     /* log2(qrows) */
  int nqb;        /* query blocks */
  int64_t s0;     /* first query row of this launch (0, or the last block of a
                     long query launched on its own: launch.cu, run_forward);
                     with s0 > 0 the scores are added to the stored ones */
  int nkc;        /* k-chunks */
  int split;      /* CTAs of a thread-block cluster sharing each item's document
                     tiles (tile t to rank t % split; sm_90+), 1: none */
  int fast_q, fast_d; /* 16-byte vector loads are legal */
  int tf32;           /* fp32 inputs: one TF32 product per term, not 3xTF32 */
  /* NULL, or per document (launch.cu: prefix_kernel): v >= 0 means its
   * d_mask is the prefix [0, v) of its tokens (the tiles then run as
   * unmasked, v tokens long), -1 an arbitrary mask */
  const int32_t *dpre;
  /* with dpre (padded D): each document's valid tokens as bits, dwords
   * 32-bit words per document (token t: bit t % 32 of word t / 32) */
  const uint32_t *dbits;
  int64_t dwords;
  /* D's tokens as a (feature, token, document) tensor for TMA tile loads
   * (the wgmma kernels' TMA variant; launch.cu: make_tmap_d) */
  CUtensorMap tmap_d;
};

__device__ __forceinline__ int64_t kidx(const KIndex &x, int64_t i) {
  return x.is64 ? __ldg((const long long *)x.data + i * x.stride)
                : (int64_t)__ldg((const int *)x.data + i * x.stride);
}

/* Element offset of feature 0 of token 0 of sequence n. */
__device__ __forceinline__ int64_t seq_base(const KSeq &s, int64_t n) {
  if (s.off.data) return kidx(s.off, n) * s.sl;
  if (s.group > 0) return (n / s.group) * s.sg + (n % s.group) * s.sn;
  return n * s.sn;
}

__device__ __forceinline__ int64_t seq_len(const KSeq &s, int64_t n) {
  if (s.off.data) return kidx(s.off, n + 1) - kidx(s.off, n);
  if (!s.lens) return s.len;
  const int64_t v = __ldg(s.lens + (s.group > 0 ? (n / s.group) * s.lens_sg + (n % s.group) * s.lens_sn
                                                : n * s.lens_sn));
  return v < 0 ? 0 : v > s.len ? s.len : v;
}

/* Offset of token 0 of sequence n in a mask (add l * m.sl for token l). */
__device__ __forceinline__ int64_t mask_base(const KMask &m, const KSeq &s,
                                             int64_t n) {
  if (s.off.data) return kidx(s.off, n) * m.sl;
  if (s.group > 0) return (n / s.group) * m.sg + (n % s.group) * m.sn;
  return n * m.sn;
}

/* (row, column j) of the output -> (first) query index and document index. */
__device__ __forceinline__ void item_of(const KParams &P, int64_t row,
                                        int64_t j, int64_t &qi, int64_t &dj) {
  if (P.pairing == 0) {
    qi = row * P.qpc;
    dj = j;
  } else if (P.pairing == 1) {
    qi = row;
    dj = row * P.ncand + j;
  } else {
    qi = kidx(P.pq, j);
    dj = kidx(P.pd, j);
  }
}

/* T (bf16, fp16 or float) -> float, and back (bf16 / fp16: rounded to
 * nearest even). */
template <typename T> __device__ __forceinline__ float to_f(T x) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) return __bfloat162float(x);
  else if constexpr (std::is_same<T, __half>::value) return __half2float(x);
  else return x;
}
template <typename T> __device__ __forceinline__ T from_f(float x) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16_rn(x);
  else if constexpr (std::is_same<T, __half>::value) return __float2half_rn(x);
  else return x;
}

/* A running max starts as NaN ("no value yet"; masked columns are NaN too,
 * and fmaxf ignores NaN).  v takes the max m if it is larger, or if m has no
 * value and v is a number: a valid similarity of -inf wins a max nothing
 * else won (lik.h), a NaN similarity never does. */
__device__ __forceinline__ bool takes_max(float v, float m) {
  return v > m || (m != m && v == v);
}
__device__ __forceinline__ bool takes_max(double v, double m) {
  return v > m || (m != m && v == v);
}

/* Lexicographic (value desc, index asc) merge for the argmax; -1 loses ties. */
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  return takes_max(v, bv) || (v == bv && (unsigned)i < (unsigned)bi);
}
__device__ __forceinline__ bool better(double v, int i, double bv, int bi) {
  return takes_max(v, bv) || (v == bv && (unsigned)i < (unsigned)bi);
}

/* Butterfly argmax within each group of W consecutive lanes (W a power of
 * two <= 32): every lane of a group ends with the group's better (v, i). */
template <int W, typename A> __device__ __forceinline__ void argmax_lanes(A &v, int &i) {
#pragma unroll
  for (int o = 1; o < W; o <<= 1) {
    const A ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (better(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
}

/* The order of lik.h's top-k (src/core/topk.h's lik_topk_better): score
 * descending, NaN after every number, ties (NaN among NaN too) by the lower
 * index.  fkey, the one definition of the score order in device code
 * (retrieve.cuh's radix select and merges, plaid.cuh's sort keys): an order-preserving key of a
 * score; -0 and +0 share a key (they compare equal, so the index decides
 * between them), every NaN gets 0, below every number's (-inf's is
 * 0x007fffff). */
__device__ __forceinline__ uint32_t fkey(float f) {
  if (f != f) return 0;
  uint32_t u = __float_as_uint(f);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* (a, ia) comes before (b, ib): the larger key, then the lower index. */
__device__ __forceinline__ bool rbetter(float a, int64_t ia, float b, int64_t ib) {
  const uint32_t ka = fkey(a), kb = fkey(b);
  return ka > kb || (ka == kb && ia < ib);
}

} // namespace lik_cuda

#endif
