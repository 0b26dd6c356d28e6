/*
 * quant.cu — the CUDA low-bit MaxSim (lik_maxsim_scaled, lik_maxsim_binary;
 * lik_experimental.h).
 *
 * The tensor-core kernels.  Where wgmma and TMA run (the context's
 * DevInfo.wg and .bulk, so LIK_CUDA_NO_WGMMA turns every wgmma path here
 * off), int8 or fp8 with 64 < d <= 128 and documents in 16-byte aligned
 * rows, a producer warp streams the document tiles by TMA (ws_produce):
 * one query (Nq * Lq <= 32 rows), doc_ws_kernel, a consumer warpgroup with
 * the documents as wgmma's M rows and the query rows as its N columns;
 * several queries (Lq <= 256), tile_ws_kernel, two consumer warpgroups
 * scoring each tile against 128 or 256 stacked query rows.  Other several
 * int8 queries (d <= 256, Lq up to a block's rows): tile_kernel, each
 * document tile staged in shared memory once and scored against every
 * query of a block on mma.sync.  Sign-bit documents where wgmma runs (64 < d <= 128,
 * Lq <= 128; int8 or sign-bit queries): up to 32 query rows (one query),
 * signs_doc_kernel, the documents' bits unpacked straight into wgmma's A
 * fragments (documents as M, queries as N); more, signs_tile_kernel, the bits
 * unpacked to 0 / 1 rows in shared memory, scored against 64 or 128 query
 * rows.
 * Otherwise (one int8 / fp8 query off doc_ws_kernel; fp8 off tile_ws_kernel;
 * sign-bit documents elsewhere; longer queries; larger d): one warp per
 * (query, document), mma_kernel.
 * There int8, fp8 and int8 x sign bits run on the tensor cores with mma.sync
 * m16n8k32 (fp8 is unpacked to f16 by ptxas on sm_90: Hopper's fp8 units
 * are wgmma's): the document's tokens are M (16 per
 * tile), 32 query tokens N (four n-blocks of 8), features K (32 per step);
 * s8 x s8 -> s32 (sm_80+), e4m3 / e5m2 -> f32 (sm_89+), and sign bits
 * unpacked to +-1 int8 straight into the A fragment.  Both fragments are
 * 4-byte rows of row-major [tokens, d] data (PTX ISA, "mma.m16n8k32"), so no
 * shared memory is needed; the query's fragments stay in registers for d <=
 * 128.  Each thread keeps the running max of its C columns across tiles
 * (v = (float)dot * scale_D, NaN never wins); the warp reduces over rows
 * once, the max is multiplied by |scale_Q| (the query's values negated
 * where its scale is negative, so that max_t scale_Q (scale_D dot) = |scale_Q|
 * max_t (scale_D (sign dot)): one multiply per element, not two), and lane 0
 * sums the valid query tokens in ascending order.  Every kernel here does
 * the same.
 * int8 results are therefore bitwise those of the CPU backend (the same
 * integers and fp32 operations); fp8 sums in the tensor core's order.
 * bits x bits elsewhere: bits_kernel, popcount, lanes = query tokens.
 */
#include <stdint.h>

#include <algorithm>
#include <type_traits>

#include "device.cuh"
#include "host.cuh"
#include "ptx.cuh"
#include "wgmma.cuh"

extern "C" {
#include "../core/quant.h"
}

namespace {

struct KQ {
  const uint8_t *q, *d;
  int64_t q_sn, q_sl, q_sk, d_sn, d_sl, d_sk; /* element (= byte) strides */
  int64_t nq, lq, nd, ld, dim;                 /* dim: d */
  const uint8_t *qm, *dm;
  int64_t qm_sn, qm_sl, dm_sn, dm_sl;
  const float *sq, *sd; /* NULL: 1 */
  int64_t sq_sn, sq_sl, sd_sn, sd_sl;
  float *scores;
  int64_t s_si, s_sj;
  int qvec, dvec; /* 4-byte loads allowed (contiguous, aligned, d % 4 == 0) */
};

enum { K_INT8 = 0, K_E4M3 = 1, K_E5M2 = 2, K_I8_BITS = 3 };

/* Bytes k .. k+3 of a token row (0 past dim). */
__device__ __forceinline__ uint32_t load4(const uint8_t *row, int64_t sk, int64_t k, int64_t dim,
                                          int vec) {
  if (k >= dim) return 0u;
  if (vec) return __ldg((const unsigned int *)(row + k));
  uint32_t v = 0;
#pragma unroll
  for (int i = 0; i < 4; i++)
    if (k + i < dim) v |= (uint32_t)__ldg(row + (k + i) * sk) << (8 * i);
  return v;
}

/* Query values negated (neg: the token's scale is negative), exactly: int8
 * in [-127, 127] (after the -128 clamp), fp8 by its sign bit (a zero byte
 * past d becomes -0, which adds nothing to a dot product). */
template <int KIND>
__device__ __forceinline__ uint32_t negate_q(uint32_t v, bool neg) {
  if (!neg) return v;
  if constexpr (KIND == K_INT8 || KIND == K_I8_BITS) return __vneg4(v);
  else return v ^ 0x80808080u;
}

/* Features k .. k+3 (k % 4 == 0) of a sign-bit row as +-1 int8 (0 past dim). */
__device__ __forceinline__ uint32_t load_signs(const uint8_t *row, int64_t sk, int64_t k,
                                               int64_t dim) {
  if (k >= dim) return 0u;
  const uint32_t byte = __ldg(row + (k / 8) * sk);
  const uint32_t nib = (k % 8) ? byte & 0xfu : byte >> 4;
  uint32_t v = 0;
#pragma unroll
  for (int i = 0; i < 4; i++)
    if (k + i < dim) v |= ((nib >> (3 - i)) & 1u ? 0x01u : 0xffu) << (8 * i);
  return v;
}

template <int KIND>
struct Acc {
  using T = int;
};
template <>
struct Acc<K_E4M3> {
  using T = float;
};
template <>
struct Acc<K_E5M2> {
  using T = float;
};

template <int KIND>
__device__ __forceinline__ void mma(typename Acc<KIND>::T (&c)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  const uint32_t b[2] = {b0, b1};
  if constexpr (KIND == K_INT8 || KIND == K_I8_BITS) lik_cuda::mma_s8(c, a, b);
  else if constexpr (KIND == K_E4M3) lik_cuda::mma_e4m3(c, a, b);
  else lik_cuda::mma_e5m2(c, a, b);
}

/* Word w (features 4w .. 4w+3) of sign bits in bytes (little-endian: byte b
 * holds features 8b .. 8b+7, most significant bit first) as 0 / 1 bytes. */
__device__ __forceinline__ uint32_t bits01(uint64_t bytes, int w) {
  const uint32_t byte = (uint32_t)(bytes >> (8 * (w / 2))) & 0xffu;
  const uint32_t nib = w % 2 ? byte & 0xfu : byte >> 4;
  /* byte i = bit i of nib, then reversed: byte i = bit 3 - i (feature 4w + i) */
  return __byte_perm((nib * 0x00204081u) & 0x01010101u, 0, 0x0123);
}

/* KS > 0: d <= 32 * KS, the query fragments held in registers; 0: any d.
 * VEC (d == 32 * KS, 16-byte aligned rows): the K order is permuted so that
 * thread tg of a fragment row holds the 8 * KS contiguous features
 * tg * 8KS .. of that row (word w = features tg * 8KS + 4w ..; step ks uses
 * words 2ks and 2ks + 1), one or two 16-byte loads per row instead of 2 KS
 * 4-byte ones (the sum over k does not depend on its order, and A and B use
 * the same permutation). */
template <int KIND, int KS, bool VEC>
__global__ void __launch_bounds__(128, 4) mma_kernel(KQ P) { /* <= 128 registers: 16 warps / SM */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t pair = (int64_t)blockIdx.x * 4 + warp;
  __shared__ float colmax[4][32];
  if (pair >= P.nq * P.nd) return;
  /* the queries of one document run in neighbouring warps: it is read from
   * DRAM about once and from L1 / L2 by the others */
  const int64_t j = pair / P.nq, i = pair % P.nq;
  const int g = lane >> 2, tg = lane & 3;
  const uint8_t *qb = P.q + i * P.q_sn, *db = P.d + j * P.d_sn;
  const int64_t ksteps = KS > 0 ? KS : (P.dim + 31) / 32;
  constexpr int BR = KS > 0 ? KS : 1;
  float total = 0.0f;
  for (int64_t s0 = 0; s0 < P.lq; s0 += 32) {
    /* this thread's query columns n = s0 + nb*8 + 2*tg + c (sqv: |scale_Q|,
     * which multiplies the column's max); B rows n = s0 + nb*8 + g, negated
     * where their scale is negative (negb), as query_row */
    float sqv[4][2], m[4][2];
    bool negb[4];
#pragma unroll
    for (int nb = 0; nb < 4; nb++) {
#pragma unroll
      for (int c = 0; c < 2; c++) {
        const int64_t n = s0 + nb * 8 + 2 * tg + c;
        sqv[nb][c] = n >= P.lq ? 0.0f : P.sq ? fabsf(P.sq[i * P.sq_sn + n * P.sq_sl]) : 1.0f;
        m[nb][c] = -CUDART_INF_F;
      }
      const int64_t n = s0 + nb * 8 + g;
      negb[nb] = n < P.lq && P.sq && signbit(P.sq[i * P.sq_sn + n * P.sq_sl]);
    }
    /* lik's quantisers write scales >= 0: the negation is skipped unless a
     * row of this warp's 32 has a negative one */
    const bool anyneg = __any_sync(0xffffffffu, negb[0] || negb[1] || negb[2] || negb[3]);
    uint32_t breg[BR][4][2];
    auto load_b = [&](int64_t ks, int nb, int h) -> uint32_t {
      const int64_t n = s0 + nb * 8 + g;
      if (n >= P.lq) return 0u;
      const int64_t k = VEC ? tg * 8 * KS + (2 * ks + h) * 4 : ks * 32 + tg * 4 + 16 * h;
      uint32_t v = load4(qb + n * P.q_sl, P.q_sk, k, P.dim, P.qvec);
      if (KIND == K_INT8 || KIND == K_I8_BITS) v = __vmaxs4(v, 0x81818181u); /* -128 -> -127 */
      return anyneg ? negate_q<KIND>(v, negb[nb]) : v;
    };
    if (KS > 0) {
#pragma unroll
      for (int ks = 0; ks < BR; ks++)
#pragma unroll
        for (int nb = 0; nb < 4; nb++) {
          breg[ks][nb][0] = load_b(ks, nb, 0);
          breg[ks][nb][1] = load_b(ks, nb, 1);
        }
    }
    /* bits (VEC): the A fragments hold 0 / 1 bytes; sum_k q_k (+-1)_k =
     * 2 * dot01 - sum_k q_k, the query sums from the B fragments (group g
     * holds token nb*8 + g; this thread's C columns are 2tg, 2tg + 1) */
    int qs[4][2] = {};
    if constexpr (VEC && KIND == K_I8_BITS) {
#pragma unroll
      for (int nb = 0; nb < 4; nb++) {
        int part = 0;
#pragma unroll
        for (int ks = 0; ks < BR; ks++) part = __dp4a((int)breg[ks][nb][0], 0x01010101, __dp4a((int)breg[ks][nb][1], 0x01010101, part));
        part += __shfl_xor_sync(0xffffffffu, part, 1);
        part += __shfl_xor_sync(0xffffffffu, part, 2);
        qs[nb][0] = __shfl_sync(0xffffffffu, part, (2 * tg) * 4);
        qs[nb][1] = __shfl_sync(0xffffffffu, part, (2 * tg + 1) * 4);
      }
    }
    /* the next tile's rows, masks, scales and (VEC) words are loaded while the
     * current one computes */
    constexpr int NW = VEC ? 2 * KS : 1;
    bool nv0, nv1;
    float nsd0, nsd1;
    uint32_t nw0[NW], nw1[NW];
    uint64_t nb0 = 0, nb1 = 0;
    auto fetch = [&](int64_t t0) {
      const int64_t r0 = t0 + g, r1 = t0 + g + 8;
      nv0 = r0 < P.ld && (!P.dm || P.dm[j * P.dm_sn + r0 * P.dm_sl]);
      nv1 = r1 < P.ld && (!P.dm || P.dm[j * P.dm_sn + r1 * P.dm_sl]);
      nsd0 = nv0 && P.sd ? P.sd[j * P.sd_sn + r0 * P.sd_sl] : 1.0f;
      nsd1 = nv1 && P.sd ? P.sd[j * P.sd_sn + r1 * P.sd_sl] : 1.0f;
      if constexpr (VEC) {
        const uint8_t *row0 = db + r0 * P.d_sl, *row1 = db + r1 * P.d_sl;
        if constexpr (KIND == K_I8_BITS) {
          nb0 = nb1 = 0;
#pragma unroll
          for (int b = 0; b < KS; b++) {
            if (nv0) nb0 |= (uint64_t)__ldg(row0 + (tg * KS + b) * P.d_sk) << (8 * b);
            if (nv1) nb1 |= (uint64_t)__ldg(row1 + (tg * KS + b) * P.d_sk) << (8 * b);
          }
        } else {
#pragma unroll
          for (int w = 0; w < NW; w += 4) {
            const uint4 x0 = nv0 ? __ldg((const uint4 *)(row0 + tg * 8 * KS) + w / 4) : make_uint4(0, 0, 0, 0);
            const uint4 x1 = nv1 ? __ldg((const uint4 *)(row1 + tg * 8 * KS) + w / 4) : make_uint4(0, 0, 0, 0);
            nw0[w] = x0.x; nw0[w + 1] = x0.y; nw0[w + 2] = x0.z; nw0[w + 3] = x0.w;
            nw1[w] = x1.x; nw1[w + 1] = x1.y; nw1[w + 2] = x1.z; nw1[w + 3] = x1.w;
          }
        }
      }
    };
    fetch(0);
    for (int64_t t0 = 0; t0 < P.ld; t0 += 16) {
      const int64_t r0 = t0 + g, r1 = t0 + g + 8;
      const bool v0 = nv0, v1 = nv1;
      const float sd0 = nsd0, sd1 = nsd1;
      uint32_t w0[NW], w1[NW]; /* VEC: this thread's words of r0, r1 */
      if constexpr (VEC && KIND == K_I8_BITS) {
#pragma unroll
        for (int w = 0; w < NW; w++) {
          w0[w] = bits01(nb0, w);
          w1[w] = bits01(nb1, w);
        }
      } else if constexpr (VEC) {
#pragma unroll
        for (int w = 0; w < NW; w++) {
          w0[w] = nw0[w];
          w1[w] = nw1[w];
        }
      }
      if (t0 + 16 < P.ld) fetch(t0 + 16);
      const uint8_t *row0 = db + r0 * P.d_sl, *row1 = db + r1 * P.d_sl;
      typename Acc<KIND>::T acc[4][4] = {};
#pragma unroll(KS > 0 ? KS : 1)
      for (int64_t ks = 0; ks < ksteps; ks++) {
        const int64_t k = ks * 32 + tg * 4;
        uint32_t a[4];
        if constexpr (VEC) {
          a[0] = w0[2 * ks];
          a[1] = w1[2 * ks];
          a[2] = w0[2 * ks + 1];
          a[3] = w1[2 * ks + 1];
        } else if (KIND == K_I8_BITS) {
          a[0] = v0 ? load_signs(row0, P.d_sk, k, P.dim) : 0u;
          a[1] = v1 ? load_signs(row1, P.d_sk, k, P.dim) : 0u;
          a[2] = v0 ? load_signs(row0, P.d_sk, k + 16, P.dim) : 0u;
          a[3] = v1 ? load_signs(row1, P.d_sk, k + 16, P.dim) : 0u;
        } else {
          a[0] = v0 ? load4(row0, P.d_sk, k, P.dim, P.dvec) : 0u;
          a[1] = v1 ? load4(row1, P.d_sk, k, P.dim, P.dvec) : 0u;
          a[2] = v0 ? load4(row0, P.d_sk, k + 16, P.dim, P.dvec) : 0u;
          a[3] = v1 ? load4(row1, P.d_sk, k + 16, P.dim, P.dvec) : 0u;
        }
#pragma unroll
        for (int nb = 0; nb < 4; nb++) {
          if (KS > 0)
            mma<KIND>(acc[nb], a, breg[ks][nb][0], breg[ks][nb][1]);
          else
            mma<KIND>(acc[nb], a, load_b(ks, nb, 0), load_b(ks, nb, 1));
        }
      }
#pragma unroll
      for (int nb = 0; nb < 4; nb++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
          typename Acc<KIND>::T d0 = acc[nb][c], d1 = acc[nb][2 + c];
          if constexpr (VEC && KIND == K_I8_BITS) {
            d0 = 2 * d0 - qs[nb][c];
            d1 = 2 * d1 - qs[nb][c];
          }
          const float x0 = (float)d0 * sd0;
          const float x1 = (float)d1 * sd1;
          if (v0 && x0 > m[nb][c]) m[nb][c] = x0;
          if (v1 && x1 > m[nb][c]) m[nb][c] = x1;
        }
    }
#pragma unroll
    for (int nb = 0; nb < 4; nb++)
#pragma unroll
      for (int c = 0; c < 2; c++) {
        float x = m[nb][c];
        for (int o = 4; o < 32; o <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
        if (g == 0) colmax[warp][nb * 8 + 2 * tg + c] = sqv[nb][c] * x;
      }
    __syncwarp();
    if (lane == 0)
      for (int s = 0; s < 32 && s0 + s < P.lq; s++) {
        const bool valid = !P.qm || P.qm[i * P.qm_sn + (s0 + s) * P.qm_sl];
        if (valid && colmax[warp][s] > -CUDART_INF_F) total += colmax[warp][s];
      }
    __syncwarp();
  }
  if (lane == 0) P.scores[i * P.s_si + j * P.s_sj] = total;
}

/* An int32 dot product as fp32 (exact: |x| < 2^24 for d <= 256; I2FP, a
 * full-rate instruction on sm_90, timed against 1.5 * 2^23 + x in the
 * mantissa: equal). */
__device__ __forceinline__ float to_f32(int x) { return (float)x; }
__device__ __forceinline__ float to_f32(float x) { return x; }

/* Row r of a block's stacked query rows (rows valid ones, whole queries of
 * Lq tokens from query q0; Lq <= the block's rows): its bytes as the h-th
 * rows of KS m16n8k32 A fragments (zero past d and for absent rows; int8
 * -128 read as -127, as the CPU; negated for a negative scale), and the
 * scale's magnitude, returned: NaN for a masked or absent row, so that its
 * max is never summed.  max_t scale_Q (scale_D dot) = |scale_Q| max_t
 * (scale_D (sign dot)): the query scale leaves the max, as on the CPU. */
template <int KIND, int KS>
__device__ __forceinline__ float query_row(const KQ &P, int64_t q0, int rows, int r, int h, int tg,
                                           uint32_t (&a)[KS][4]) {
  const int lq = (int)P.lq;
  const bool ok = r < rows;
  const int64_t i = q0 + (ok ? r / lq : 0), s = ok ? r % lq : 0;
  const uint8_t *row = P.q + i * P.q_sn + s * P.q_sl;
  const bool valid = ok && (!P.qm || P.qm[i * P.qm_sn + s * P.qm_sl]);
  const float sq = !valid ? CUDART_NAN_F : P.sq ? P.sq[i * P.sq_sn + s * P.sq_sl] : 1.0f;
#pragma unroll
  for (int ks = 0; ks < KS; ks++)
#pragma unroll
    for (int c = 0; c < 2; c++) {
      const uint32_t v = ok ? load4(row, P.q_sk, ks * 32 + tg * 4 + 16 * c, P.dim, P.qvec) : 0u;
      a[ks][h + 2 * c] = negate_q<KIND>(KIND == K_INT8 ? __vmaxs4(v, 0x81818181u) : v, signbit(sq));
    }
  return fabsf(sq);
}

/* A stacked row's term at a document's end: the max of the running maxima
 * x of the quad holding the row (its 4 threads hold its columns) times the
 * row's |scale_Q| sq, written to *dst by the quad's first thread (tg 0). */
__device__ __forceinline__ void store_row_term(float x, float sq, int tg, float *dst) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  if (tg == 0) *dst = sq * x;
}

/* The max of a C-fragment column's running maxima x (float or int) over the
 * warp's rows (the 8 lanes g holding the column: documents as the M rows). */
template <class T> __device__ __forceinline__ T column_max(T x) {
#pragma unroll
  for (int o = 4; o <= 16; o *= 2) x = max(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

/* A query's score from its Lq tokens' terms rm: those > -inf (not NaN, not
 * -inf: no valid token, a masked row) summed in ascending order, as the
 * CPU. */
__device__ __forceinline__ float query_total(const float *rm, int64_t lq) {
  float total = 0.0f;
#pragma unroll 8
  for (int64_t s = 0; s < lq; s++)
    if (rm[s] > -CUDART_INF_F) total += rm[s];
  return total;
}

/* The shared-tile kernel's shape for d <= 32 KS: MW query m-tiles per warp
 * (their A fragments held in registers), TN document tokens per tile, rows
 * of DB bytes staged at a stride of SROW (16 bytes of padding: the 8 rows of
 * an ldmatrix fall in 8 different bank groups). */
template <int KS>
struct TileShape {
  static constexpr int MW = KS >= 8 ? 1 : KS == 4 ? 2 : 4;
  static constexpr int NH = MW >= 4 ? 1 : 2; /* n-blocks of 8 tokens per step */
  static constexpr int TN = KS >= 8 ? 32 : 64;
  static constexpr int DB = 32 * KS, SROW = DB + 16;
  static constexpr int ROWS = 4 * MW * 16;        /* query rows per block */
  static constexpr int WORDS = TN * DB / 4 / 128; /* words staged per thread per tile */
  static constexpr int CHUNKS = TN * DB / 16 / 128; /* 16-byte chunks per thread per tile */
};

/* Several int8 queries, d <= 256, off the warp-specialised kernel below
 * (no wgmma or TMA, d outside (64, 128], rows not 16-byte aligned): a block
 * holds a group of QB = ROWS / Lq whole queries (their tokens stacked as the
 * rows of M, A fragments in registers) and walks documents j = jb, jb +
 * nblk, .. (a persistent grid: the queries are loaded once per block).  Each
 * document streams through shared memory in tiles of TN tokens, loaded while
 * earlier ones compute: by cp.async two tiles ahead (ASYNC: rows of whole
 * 16-byte chunks) or through registers one tile ahead (any strides).  The
 * tile is scored on mma.sync m16n8k32 (ldmatrix fragments).  A masked or
 * absent document token gets scale NaN and a masked or absent query row
 * scale NaN: their values never win (fmaxf), and a row whose max stays -inf
 * is not summed.  Each thread keeps the running max of its two rows per
 * m-tile; a quad reduces them at the end of a document (times |scale_Q|),
 * and one thread per query sums its tokens' maxima in ascending order.  Per
 * element v = (float)dot * scale_D, as the one-warp kernel and the CPU:
 * results bitwise theirs. */
template <int KS, bool ASYNC>
__global__ void __launch_bounds__(128, 4) tile_kernel(KQ P, int qb, int groups, int nblk) {
  using S = TileShape<KS>;
  constexpr int SROW = S::SROW;
  constexpr int CPR = S::DB / 16, WPR = S::DB / 4; /* 16-byte chunks, words per row */
  constexpr int NS = ASYNC ? 3 : 2; /* tiles in flight: cp.async two ahead, registers one */
  __shared__ __align__(1024) uint8_t tile[NS][S::TN * SROW];
  __shared__ __align__(8) float tsd[NS][S::TN];
  __shared__ float rowmax[S::ROWS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
  const int64_t q0 = (int64_t)(blockIdx.x % groups) * qb;
  const int rows = (int)min((int64_t)qb, P.nq - q0) * (int)P.lq; /* valid stacked rows */

  /* block row of this thread's C row h of m-tile mt: warp w holds m-tiles
   * w MW .. */
  auto row_of = [&](int mt, int h) { return (warp * S::MW + mt) * 16 + g + 8 * h; };
  uint32_t a[S::MW][KS][4];
  float sqr[S::MW][2];
#pragma unroll
  for (int mt = 0; mt < S::MW; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) sqr[mt][h] = query_row<K_INT8, KS>(P, q0, rows, row_of(mt, h), h, tg, a[mt]);

  /* staging: ASYNC, thread x copies chunk x % CPR of tokens x / CPR + v
   * (128 / CPR); otherwise word x % WPR of tokens x / WPR + v (128 / WPR) */
  const int tx = threadIdx.x / (ASYNC ? CPR : WPR), cx = threadIdx.x % (ASYNC ? CPR : WPR);
  constexpr int TSTEP = 128 / (ASYNC ? CPR : WPR);
  const bool cx_in = (ASYNC ? 16 : 4) * cx < P.dim;
  uint32_t w[ASYNC ? 1 : S::WORDS];
  float nsd = 0.0f;
  const uint8_t *db = P.d;
  int64_t j = 0;
  const int64_t vstep = TSTEP * P.d_sl; /* bytes between a thread's tokens */
  const uint32_t dst0 = lik_cuda::smem_u32(&tile[0][tx * SROW + 16 * cx]);
  auto fetch = [&](int64_t t0, int b) {
    const uint8_t *src = db + (t0 + tx) * P.d_sl + (ASYNC ? 16 : 0) * cx;
    const int64_t left = P.ld - t0 - tx; /* this thread's tokens v with v TSTEP < left */
    if constexpr (ASYNC) {
      const uint32_t dst = dst0 + b * (S::TN * SROW);
#pragma unroll
      for (int v = 0; v < S::CHUNKS; v++) {
        const bool ok = cx_in && v * TSTEP < left;
        lik_cuda::cp_async16(dst + v * TSTEP * SROW, ok ? src + v * vstep : db, ok ? 16 : 0);
      }
    } else {
#pragma unroll
      for (int v = 0; v < S::WORDS; v++)
        w[v] = v * TSTEP < left ? load4(src + v * vstep, P.d_sk, 4 * cx, P.dim, P.dvec) : 0u;
    }
    if (threadIdx.x < S::TN) {
      const int64_t t = t0 + threadIdx.x;
      float v = CUDART_NAN_F;
      if (t < P.ld) {
        const bool keep = !P.dm || P.dm[j * P.dm_sn + t * P.dm_sl];
        const float s = P.sd ? P.sd[j * P.sd_sn + t * P.sd_sl] : 1.0f;
        v = keep ? s : CUDART_NAN_F;
      }
      nsd = v;
    }
  };
  auto store = [&](int b) {
    if constexpr (!ASYNC) {
#pragma unroll
      for (int v = 0; v < S::WORDS; v++) *(uint32_t *)&tile[b][(tx + v * TSTEP) * SROW + 4 * cx] = w[v];
    }
    if (threadIdx.x < S::TN) tsd[b][threadIdx.x] = nsd;
  };
  /* the tile computed next has landed (cp.async: one group per tile, empty
   * past the end, so all but the newest NS - 2 are complete) */
  auto landed = [&]() {
    if constexpr (ASYNC) lik_cuda::cp_async_wait<NS - 2>();
    __syncthreads();
  };

  const int64_t ntiles = (P.ld + S::TN - 1) / S::TN;
  for (j = blockIdx.x / groups; j < P.nd; j += nblk) {
    db = P.d + j * P.d_sn;
    float m[S::MW][2];
#pragma unroll
    for (int mt = 0; mt < S::MW; mt++) m[mt][0] = m[mt][1] = -CUDART_INF_F;
#pragma unroll
    for (int s = 0; s < NS - 1; s++) {
      if (s < ntiles) {
        fetch(s * S::TN, s);
        store(s);
      }
      if constexpr (ASYNC) lik_cuda::cp_async_commit();
    }
    landed();
    for (int64_t it = 0; it < ntiles; it++) {
      const int b = (int)(it % NS), bn = (int)((it + NS - 1) % NS);
      const bool more = it + NS - 1 < ntiles;
      if (more) fetch((it + NS - 1) * S::TN, bn);
      if constexpr (ASYNC) lik_cuda::cp_async_commit();
      const uint32_t base = lik_cuda::smem_u32(tile[b]);
#pragma unroll 1
      for (int nb = 0; nb < S::TN / 8; nb += S::NH) {
        uint32_t bf[S::NH][KS][2];
        float sdc[S::NH][2];
#pragma unroll
        for (int h = 0; h < S::NH; h++) {
          const uint32_t rb = base + ((nb + h) * 8 + (lane & 7)) * SROW + 16 * (lane >> 3);
          if constexpr (KS == 1) {
            lik_cuda::ldsm_x2(rb, bf[h][0][0], bf[h][0][1]); /* lanes 0-15's addresses */
          } else {
#pragma unroll
            for (int ks = 0; ks < KS; ks += 2)
              lik_cuda::ldsm_x4(rb + 32 * ks, bf[h][ks][0], bf[h][ks][1], bf[h][ks + 1][0],
                                bf[h][ks + 1][1]);
          }
          const float2 sv = *(const float2 *)&tsd[b][(nb + h) * 8 + 2 * tg];
          sdc[h][0] = sv.x;
          sdc[h][1] = sv.y;
        }
        int acc[S::NH][S::MW][4] = {};
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
          for (int h = 0; h < S::NH; h++)
#pragma unroll
            for (int mt = 0; mt < S::MW; mt++) lik_cuda::mma_s8(acc[h][mt], a[mt][ks], bf[h][ks]);
#pragma unroll
        for (int h = 0; h < S::NH; h++)
#pragma unroll
          for (int mt = 0; mt < S::MW; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++) { /* row g + 8 (e / 2), column 2 tg + e % 2 */
              m[mt][e >> 1] = fmaxf(m[mt][e >> 1], to_f32(acc[h][mt][e]) * sdc[h][e & 1]);
            }
      }
      if (more) store(bn);
      landed();
    }
#pragma unroll
    for (int mt = 0; mt < S::MW; mt++)
#pragma unroll
      for (int h = 0; h < 2; h++) store_row_term(m[mt][h], sqr[mt][h], tg, &rowmax[row_of(mt, h)]);
    __syncthreads();
    if (threadIdx.x < qb && q0 + threadIdx.x < P.nq)
      P.scores[(q0 + threadIdx.x) * P.s_si + j * P.s_sj] = query_total(rowmax + threadIdx.x * P.lq, P.lq);
    /* rowmax is rewritten only after the next document's first barrier */
  }
}

/* Several int8 / fp8 queries on sm_90a, 64 < d <= 128, the documents' rows
 * read by TMA (launch_ws): warp-specialised, the tile_kernel's arithmetic.
 *   CTA        WS_THREADS = 384: consumer warpgroups 0 and 1 (224
 *              registers a thread by setmaxnreg), producer warp 8 (its
 *              warpgroup at 56); one CTA per SM.  A CTA holds one group of 128 MT stacked
 *              query rows (qb whole queries; warpgroup c the rows 64 MT c ..
 *              64 MT (c + 1) - 1, their A fragments in registers, loaded
 *              once) and walks the documents j = blockIdx / groups, + nblk,
 *              ... (a persistent grid of groups x nblk CTAs).
 *   producer   lane 0 streams each document's 128-token tiles by TMA (tmap:
 *              boxes of 128 bytes x 128 tokens in the 128-byte swizzle;
 *              features past d and tokens past Ld read as zero) into WS_NST
 *              stages; the 32 lanes write the tile's 128 document scales
 *              beside it (NaN for masked tokens and tokens past Ld), loaded
 *              WS_NST tiles ahead.  A stage's "full" barrier completes with
 *              the lanes' 32 arrivals and the bytes, its "empty" barrier
 *              with one arrival per consumer warp.
 *   consumers  per tile, each m-tile (fp8, two m-tiles a warpgroup:
 *              m64n128k32) or each (m-tile, 64-token half) (m64n64k32) is one
 *              commit group of KS = 4 wgmma (A from registers, B the stage
 *              through a descriptor); a group is issued before the epilogue
 *              of the one before it (per element v = (float)dot *
 *              scale_D, then the running max of its row), which so runs
 *              while the group computes and the other warpgroup's MMAs keep
 *              the tensor cores busy; a tile's last epilogue runs after the
 *              next tile's first group is issued.  A document's last tile
 *              with no token past its 64th below Ld computes its first half
 *              only (Ld = 300: 44 of 128).  At a document's end a quad
 *              reduces each row's max, times |scale_Q|, into shared memory
 *              (two buffers, by document parity), the consumers meet at
 *              named barrier 1, and one thread per query sums its tokens'
 *              maxima in ascending order.
 * Masked and absent rows and tokens: NaN scales, as tile_kernel; int8
 * results bitwise the CPU's, fp8 in wgmma's sums. */
constexpr int WS_THREADS = 384, WS_TN = 128, WS_NST = 4, WS_STAGE = WS_TN * 128;

/* The producer warp of the TMA kernels (tile_ws_kernel, doc_ws_kernel):
 * documents j, j + nblk, .. < Nd as one stream of 128-token tiles
 * (WS_STAGE bytes: 128 bytes x 128 tokens in the 128-byte swizzle, tmap;
 * features past d and tokens past Ld read as zero) into NST stages from
 * base; the lanes write each tile's 128 document scales beside it in tsd
 * (NaN for masked tokens and tokens past Ld), loaded NST tiles ahead.  A
 * stage's "full" barrier (fulls + 8 s) completes with the 32 lanes'
 * arrivals and the bytes; its "empty" barrier (empties + 8 s) is waited
 * for before it is written again. */
template <int NST>
__device__ __forceinline__ void ws_produce(const KQ &P, const CUtensorMap *tmap, int j, int nblk,
                                           uint32_t base, uint32_t fulls, uint32_t empties,
                                           float *tsd, int lane) {
  using namespace lik_cuda;
  const int nd = (int)P.nd, ld = (int)P.ld;
  /* item (j, t0) is issued into stage s = its index % NST; the scales
   * of the item NST later are loaded into the same registers v[s] right
   * after, so their latency hides behind the waits for the stages */
  int t0 = 0, lj = j, lt = 0;
  auto load = [&](float(&v)[WS_TN / 32]) {
#pragma unroll
    for (int u = 0; u < WS_TN / 32; ++u) {
      const int t = lt + 32 * u + lane;
      float x = CUDART_NAN_F;
      if (lj < nd && t < ld && (!P.dm || P.dm[lj * P.dm_sn + t * P.dm_sl]))
        x = P.sd ? P.sd[lj * P.sd_sn + t * P.sd_sl] : 1.0f;
      v[u] = x;
    }
    if ((lt += WS_TN) >= ld) {
      lt = 0;
      lj += nblk;
    }
  };
  float v[NST][WS_TN / 32];
#pragma unroll
  for (int s = 0; s < NST; ++s) load(v[s]);
  for (uint32_t ph = 0; j < nd; ph ^= 1u)
#pragma unroll
    for (int s = 0; s < NST; ++s) {
      if (j >= nd) break;
      bar_wait(empties + 8 * s, ph ^ 1u);
#pragma unroll
      for (int u = 0; u < WS_TN / 32; ++u) tsd[s * WS_TN + 32 * u + lane] = v[s][u];
      if (lane == 0) {
        bar_expect(fulls + 8 * s, WS_STAGE);
        tma_load_3d(base + s * WS_STAGE, tmap, 0, t0, j, fulls + 8 * s);
      } else {
        bar_arrive(fulls + 8 * s);
      }
      if ((t0 += WS_TN) >= ld) {
        t0 = 0;
        j += nblk;
      }
      load(v[s]);
    }
}

/* Byte offsets of the shared memory from a 1024-byte aligned base: WS_NST
 * stages of 128 tokens x 128 bytes, their document scales, the rows' maxima
 * of two documents, the barriers (full, empty); BYTES with the alignment's
 * slack. */
template <int MT> struct WsSmem {
  static constexpr int ROWS = 128 * MT;
  static constexpr int STAGE = WS_STAGE;
  static constexpr int SCALES = WS_NST * STAGE;
  static constexpr int ROWMAX = SCALES + WS_NST * WS_TN * 4;
  static constexpr int BARS = ROWMAX + 2 * ROWS * 4;
  static constexpr int BYTES = BARS + 2 * WS_NST * 8 + 1024;
};

template <int KIND, int MT>
__global__ void __launch_bounds__(WS_THREADS, 1)
    tile_ws_kernel(const __grid_constant__ KQ P, const __grid_constant__ CUtensorMap tmap, int qb,
                   int groups, int nblk) {
  using namespace lik_cuda;
  using L = WsSmem<MT>;
  using Acc_t = typename Acc<KIND>::T;
  /* k-steps of 32 bytes; a group's tokens (fp8 on two m-tiles: the whole
   * tile, one m64n128k32 per k-step; else 64-token halves: int8's two
   * m-tiles measured 11-21 % slower on m64n128k32, docs/cuda.md); groups per
   * tile */
  constexpr int KS = 4, GW = MT == 2 && KIND != K_INT8 ? 128 : 64, NG = MT * (WS_TN / GW);
  extern __shared__ unsigned char smem_raw[];
  unsigned char *sm = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t base = smem_u32(sm), fulls = base + L::BARS, empties = fulls + 8 * WS_NST;
  float *tsd = reinterpret_cast<float *>(sm + L::SCALES);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  /* Nd and Ld below 2^30 (launch_ws): int counters */
  const int64_t q0 = (int64_t)(blockIdx.x % groups) * qb;
  const int nd = (int)P.nd, ld = (int)P.ld, ntiles = (ld + WS_TN - 1) / WS_TN;
  if (tid == 0) {
    for (int s = 0; s < WS_NST; ++s) {
      bar_init(fulls + 8 * s, 32);
      bar_init(empties + 8 * s, 8);
    }
    bar_init_fence();
  }
  __syncthreads();

  /* warpgroup 2 gives its registers to the consumers (per SMSP: one of its
   * warps at 56 and two consumer warps at 224, 504 of 512 a lane); its warp
   * 8 is the producer */
  if (warp >= 8) {
    wg_regs_dec<56>();
    if (warp == 8) ws_produce<WS_NST>(P, &tmap, blockIdx.x / groups, nblk, base, fulls, empties, tsd, lane);
    return;
  }
  wg_regs_inc<224>();

  /* the consumers: warp w of warpgroup c holds rows 16 w + g and + 8 of each
   * of its m-tiles */
  const int c = warp >> 2, w = warp & 3, g = lane >> 2, tg = lane & 3;
  const int rows = (int)min((int64_t)qb, P.nq - q0) * (int)P.lq; /* valid stacked rows */
  auto row_of = [&](int mt, int h) { return (c * MT + mt) * 64 + 16 * w + g + 8 * h; };
  uint32_t a[MT][KS][4];
  float sqr[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) sqr[mt][h] = query_row<KIND, KS>(P, q0, rows, row_of(mt, h), h, tg, a[mt]);

  /* Group n of a tile: m-tile n / (128 / GW) x its tokens GW (n % (128 /
   * GW)) .., into accumulator set n % 2, issued before group n - 1's
   * epilogue (NG = 2: the sets alternate inside a tile); a tile's
   * last epilogue runs after the next tile's first group is issued (or at
   * the document's end).  Nothing is in flight across loop iterations: a
   * wgmma in flight over a loop edge made ptxas serialize them all (C7514,
   * docs/cuda.md). */
  int s = 0, sp = 0, par = 0;
  uint32_t ph = 0;
  Acc_t acc[2][GW / 2];
  /* a group into accumulator set n % 2: m-tile mt x the tile's W tokens from
   * W hh (W = 64 or 128) */
  auto issue = [&](auto wide, uint64_t desc, int n, int mt, int hh) {
    constexpr int T = KIND == K_E5M2 ? 2 : KIND == K_E4M3;
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      if constexpr (decltype(wide)::value)
        wgmma_8bit_128<T>(acc[n & 1], a[mt][ks], wg_desc_add(desc, 32 * ks), ks > 0);
      else
        wgmma_8bit_64<T>(acc[n & 1], a[mt][ks], wg_desc_add(desc, hh * 64 * 128 + 32 * ks), ks > 0);
    }
    wg_commit();
  };
  float m[MT][2];
  /* the epilogue of accumulator set n % 2 (m-tile mt, W tokens from W hh)
   * from the scales of stage st: per element (float)dot * scale_D, then the
   * running max of its row (|scale_Q| multiplies it at the document's end) */
  auto epilogue = [&](auto wide, int n, int mt, int hh, int st) {
    constexpr int W = decltype(wide)::value ? 128 : 64;
    wg_fence_regs<W / 2>(acc[n & 1]);
    const float *sc = tsd + st * WS_TN + W * hh;
#pragma unroll
    for (int nb = 0; nb < W / 8; nb++) {
      const float2 sv = *(const float2 *)&sc[8 * nb + 2 * tg];
#pragma unroll
      for (int h = 0; h < 2; h++) { /* row g + 8 h, columns 8 nb + 2 tg and + 1 */
        const float x0 = to_f32(acc[n & 1][4 * nb + 2 * h]) * sv.x;
        const float x1 = to_f32(acc[n & 1][4 * nb + 2 * h + 1]) * sv.y;
        m[mt][h] = fmaxf(m[mt][h], fmaxf(x0, x1)); /* half the dependent chain */
      }
    }
  };
  /* stage st read: one arrival per warp on its "empty" barrier */
  auto release = [&](int st) {
    __syncwarp();
    if (lane == 0) bar_arrive(empties + 8 * st);
  };
  const std::true_type yes;
  const std::false_type no;
  const std::integral_constant<bool, GW == 128> wide_g; /* a group's width, 128 or 64 */
  /* the tile in stage s.  PREV: the last group of the tile before (stage
   * sp; m-tile MT - 1, its last GW tokens) is still to be read.  HALF: a
   * document's last tile whose tokens 64 .. are all past Ld: its MT groups
   * of tokens 0 .. 63 only, all read here.  Otherwise group n is m-tile n /
   * (128 / GW) x tokens GW (n % (128 / GW)) .., and the last one is read
   * after the next tile's first group is issued (or at the document's end). */
  auto tile = [&](auto prev, auto half) {
    constexpr bool PREV = decltype(prev)::value, HALF = decltype(half)::value;
    constexpr int NT = HALF ? MT : NG;
    constexpr int PER = WS_TN / GW; /* groups per m-tile */
    auto mt_of = [](int n) { return HALF ? n : n / PER; };
    auto hh_of = [](int n) { return HALF ? 0 : n % PER; };
    const std::integral_constant<bool, !HALF && GW == 128> wide;
    bar_wait(fulls + 8 * s, ph);
    /* the stage's descriptor through a lane-0 broadcast: it lives in
     * uniform registers */
    const uint64_t d0 = wg_desc(__shfl_sync(0xffffffffu, base + s * L::STAGE, 0));
    issue(wide, d0, 0, mt_of(0), hh_of(0));
    if constexpr (PREV) {
      epilogue(wide_g, NG - 1, MT - 1, PER - 1, sp);
      release(sp);
    }
#pragma unroll
    for (int n = 1; n < NT; n++) {
      issue(wide, d0, n, mt_of(n), hh_of(n));
      wg_wait<1>();
      epilogue(wide, n - 1, mt_of(n - 1), hh_of(n - 1), s);
    }
    wg_wait<0>();
    if constexpr (HALF) {
      epilogue(wide, NT - 1, mt_of(NT - 1), 0, s);
      release(s);
    }
    sp = s;
    if (++s == WS_NST) {
      s = 0;
      ph ^= 1u;
    }
  };
  const bool half = ld - (ntiles - 1) * WS_TN <= 64; /* the last tile's tokens 64 .. past Ld */
  for (int j = blockIdx.x / groups; j < nd; j += nblk, par ^= 1) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -CUDART_INF_F;
    if (ntiles == 1) {
      if (half) tile(no, yes);
      else tile(no, no);
    } else {
      tile(no, no);
      for (int it = 1; it + 1 < ntiles; ++it) tile(yes, no);
      if (half) tile(yes, yes);
      else tile(yes, no);
    }
    if (!half) {
      epilogue(wide_g, NG - 1, MT - 1, WS_TN / GW - 1, sp);
      release(sp);
    }
    float *rowmax = reinterpret_cast<float *>(sm + L::ROWMAX) + par * L::ROWS;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int h = 0; h < 2; h++) store_row_term(m[mt][h], sqr[mt][h], tg, &rowmax[row_of(mt, h)]);
    /* rowmax[par] is written again two documents on, after every consumer
     * has passed the next document's barrier, so after these sums */
    named_sync(1, 256);
    if (tid < qb && q0 + tid < P.nq)
      P.scores[(q0 + tid) * P.s_si + (int64_t)j * P.s_sj] = query_total(rowmax + tid * P.lq, P.lq);
  }
}

/* One int8 / fp8 query (Nq * Lq <= 32 stacked query rows) on sm_90a, 64 <
 * d <= 128, the documents' rows read by TMA (launch_doc_ws).  Memory-bound:
 * the documents are the M rows of wgmma m64n32k32 and the query rows its N
 * columns, so no tensor work is spent on absent query rows and every
 * document byte is read once, by a deep TMA pipeline.
 *   CTA        DW_THREADS = 160: consumer warpgroup (warps 0-3), producer
 *              warp 4; one CTA per SM, walking the documents j = blockIdx,
 *              + nblk, ...
 *   producer   ws_produce into DW_NST stages (DW_NST tiles of 16 KB in
 *              flight per SM).
 *   consumers  the query rows staged once per CTA as B (32 rows x 128
 *              bytes in the 128-byte swizzle; int8 -128 read as -127,
 *              values negated for a negative scale, zero past d and for
 *              absent rows), |scale_Q| beside them (NaN: masked or absent
 *              row).  Per tile, each 64-token m-tile with a token below Ld
 *              is one commit group of KS = 4 wgmma (A the stage through a
 *              descriptor, B the query tile); per element (float)dot *
 *              scale_D (the scales of the thread's rows g, g + 8: two a
 *              m-tile), then the running max of its column.  At a
 *              document's end each column's max over the warp's rows
 *              (shuffles) and the 4 warps (shared memory, two buffers by
 *              document parity, named barrier 1), times |scale_Q|, and one
 *              lane of warp 0 per query sums its tokens' terms in ascending
 *              order.
 * Masked and absent tokens: NaN scales, as tile_ws_kernel; int8 results
 * bitwise the CPU's, fp8 in wgmma's sums. */
constexpr int DW_THREADS = 160, DW_NST = 8, DW_N = 32;

/* Byte offsets of doc_ws_kernel's shared memory from a 1024-byte aligned
 * base: DW_NST stages, the query tile, the stages' document scales, the
 * query rows' |scale_Q|, the warps' column maxima of two documents, a
 * document's terms, the barriers (full, empty); BYTES with the alignment's
 * slack. */
struct DwSmem {
  static constexpr int QTILE = DW_NST * WS_STAGE;
  static constexpr int SCALES = QTILE + DW_N * 128;
  static constexpr int COLSQ = SCALES + DW_NST * WS_TN * 4;
  static constexpr int PART = COLSQ + DW_N * 4;
  static constexpr int TERMS = PART + 2 * 4 * DW_N * 4;
  static constexpr int BARS = TERMS + DW_N * 4;
  static constexpr int BYTES = BARS + 2 * DW_NST * 8 + 1024;
};

template <int KIND>
__global__ void __launch_bounds__(DW_THREADS, 1)
    doc_ws_kernel(const __grid_constant__ KQ P, const __grid_constant__ CUtensorMap tmap, int nblk) {
  using namespace lik_cuda;
  using L = DwSmem;
  using Acc_t = typename Acc<KIND>::T;
  constexpr int KS = 4;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *sm = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t base = smem_u32(sm), fulls = base + L::BARS, empties = fulls + 8 * DW_NST;
  float *tsd = reinterpret_cast<float *>(sm + L::SCALES);
  float *colsq = reinterpret_cast<float *>(sm + L::COLSQ);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  /* Nd and Ld below 2^30 (launch_doc_ws): int counters */
  const int nd = (int)P.nd, ld = (int)P.ld, lq = (int)P.lq;
  if (tid == 0) {
    for (int s = 0; s < DW_NST; ++s) {
      bar_init(fulls + 8 * s, 32);
      bar_init(empties + 8 * s, 4);
    }
    bar_init_fence();
  }
  if (tid < 128) { /* query row n = tid / 4, its 16-byte chunks 2 (tid % 4), + 1 */
    const int n = tid >> 2, rows = (int)P.nq * lq;
    const bool ok = n < rows;
    const int64_t i = ok ? n / lq : 0, s = ok ? n % lq : 0;
    const uint8_t *row = P.q + i * P.q_sn + s * P.q_sl;
    const bool valid = ok && (!P.qm || P.qm[i * P.qm_sn + s * P.qm_sl]);
    const float sq = !valid ? CUDART_NAN_F : P.sq ? P.sq[i * P.sq_sn + s * P.sq_sl] : 1.0f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int c = 2 * (tid & 3) + h;
      uint32_t v[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const uint32_t x = ok ? load4(row, P.q_sk, 16 * c + 4 * e, P.dim, P.qvec) : 0u;
        v[e] = negate_q<KIND>(KIND == K_INT8 ? __vmaxs4(x, 0x81818181u) : x, signbit(sq));
      }
      sts128(base + L::QTILE + n * 128 + 16 * (c ^ (n & 7)), v);
    }
    if ((tid & 3) == 0) colsq[n] = fabsf(sq);
    fence_proxy_async(); /* st.shared wrote the query tile; wgmma reads it */
  }
  __syncthreads();

  if (warp == 4) { /* the producer */
    ws_produce<DW_NST>(P, &tmap, blockIdx.x, nblk, base, fulls, empties, tsd, lane);
    return;
  }

  /* the consumers: warp w holds the rows 16 w + g and + 8 of each m-tile,
   * columns 8 nb + 2 tg + e of the query rows */
  const int g = lane >> 2, tg = lane & 3;
  const uint64_t qdesc = wg_desc(base + L::QTILE);
  float *terms = reinterpret_cast<float *>(sm + L::TERMS);
  Acc_t acc[2][16];
  float cm[4][2];
  /* m-tile mt of the stage with descriptor d0 into accumulator set mt */
  auto issue = [&](uint64_t d0, int mt) {
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
      wgmma_8bit_ss32<KIND == K_E5M2 ? 2 : KIND == K_E4M3>(
          acc[mt], wg_desc_add(d0, mt * 64 * 128 + 32 * ks), wg_desc_add(qdesc, 32 * ks), ks > 0);
    wg_commit();
  };
  /* per element (float)dot * scale_D, the running max of its column */
  auto epilogue = [&](int mt, int st) {
    wg_fence_regs<16>(acc[mt]);
    const float *sc = tsd + st * WS_TN + 64 * mt + 16 * warp + g;
    const float s0 = sc[0], s1 = sc[8];
#pragma unroll
    for (int nb = 0; nb < 4; nb++)
#pragma unroll
      for (int e = 0; e < 2; e++)
        cm[nb][e] = fmaxf(cm[nb][e], fmaxf(to_f32(acc[mt][4 * nb + e]) * s0,
                                           to_f32(acc[mt][4 * nb + 2 + e]) * s1));
  };
  int s = 0, par = 0;
  uint32_t ph = 0;
  for (int j = blockIdx.x; j < nd; j += nblk, par ^= 1) {
#pragma unroll
    for (int nb = 0; nb < 4; nb++) cm[nb][0] = cm[nb][1] = -CUDART_INF_F;
    for (int t0 = 0; t0 < ld; t0 += WS_TN) {
      bar_wait(fulls + 8 * s, ph);
      /* the stage's descriptor through a lane-0 broadcast: uniform registers */
      const uint64_t d0 = wg_desc(__shfl_sync(0xffffffffu, base + s * WS_STAGE, 0));
      if (t0 + 64 < ld) { /* both m-tiles hold tokens below Ld */
        issue(d0, 0);
        issue(d0, 1);
        wg_wait<1>();
        epilogue(0, s);
        wg_wait<0>();
        epilogue(1, s);
      } else {
        issue(d0, 0);
        wg_wait<0>();
        epilogue(0, s);
      }
      __syncwarp();
      if (lane == 0) bar_arrive(empties + 8 * s);
      if (++s == DW_NST) {
        s = 0;
        ph ^= 1u;
      }
    }
    float *part = reinterpret_cast<float *>(sm + L::PART) + par * 4 * DW_N;
#pragma unroll
    for (int nb = 0; nb < 4; nb++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const float x = column_max(cm[nb][e]);
        if (g == 0) part[warp * DW_N + 8 * nb + 2 * tg + e] = x;
      }
    /* part[par] is written again two documents on, after warp 0 has passed
     * the next document's barrier, so after these reads */
    named_sync(1, 128);
    if (warp == 0) {
      const float x = fmaxf(fmaxf(part[lane], part[DW_N + lane]), fmaxf(part[2 * DW_N + lane], part[3 * DW_N + lane]));
      terms[lane] = colsq[lane] * x;
      __syncwarp();
      if (lane < P.nq) P.scores[lane * P.s_si + (int64_t)j * P.s_sj] = query_total(terms + lane * lq, lq);
      __syncwarp(); /* terms are rewritten at the next document's end */
    }
  }
}

/* The sign kernels' query word: byte e (0 .. 3) is feature 32 g + 8 e + 7 - p
 * of a query row (their K order) as int8, -128 clamped to -127, or (QBITS)
 * its sign bit unpacked to +-1; 0 past d and where there is no row (ok
 * false); all four negated for a negative scale (neg). */
template <bool QBITS>
__device__ __forceinline__ uint32_t signs_qword(const KQ &P, const uint8_t *row, bool ok, int g,
                                                int p, bool neg) {
  uint32_t v = 0u;
#pragma unroll
  for (int e = 0; e < 4; e++) {
    const int64_t f = 32 * g + 8 * e + 7 - p;
    if (!ok || f >= P.dim) continue;
    uint32_t x;
    if (QBITS) x = (__ldg(row + (f / 8) * P.q_sk) >> p) & 1u ? 0x01u : 0xffu;
    else x = (uint8_t)max((int)(int8_t)__ldg(row + f * P.q_sk), -127);
    v |= x << (8 * e);
  }
  return negate_q<K_I8_BITS>(v, neg);
}

/* A block's walk over the 64-token tiles of its documents j0, j0 + nblk, ..
 * (the sign kernels): the next tile to load is document pj's token tt (a
 * multiple of TN); its bits at P.d + dbase, its mask bytes at P.dm + mbase
 * (64-bit offsets, block-uniform, bumped per tile and per document; int32
 * counters: Nd, Ld < 2^30). */
template <int TN> struct TileWalk {
  int pj, tt, nblk, tend;
  int64_t dbase, mbase, dstep, mstep, djump, mjump; /* djump: the last tile to the next document */
  __device__ TileWalk(const KQ &P, int j0, int nblk_, int ntiles)
      : pj(j0), tt(0), nblk(nblk_), tend(ntiles * TN), dbase(j0 * P.d_sn), mbase(j0 * P.dm_sn),
        dstep(TN * P.d_sl), mstep(TN * P.dm_sl), djump(nblk_ * P.d_sn - (ntiles - 1) * dstep),
        mjump(nblk_ * P.dm_sn - (ntiles - 1) * mstep) {}
  __device__ void next() {
    if ((tt += TN) == tend) {
      tt = 0;
      pj += nblk;
      dbase += djump;
      mbase += mjump;
    } else {
      dbase += dstep;
      mbase += mstep;
    }
  }
};

/* Sign-bit documents against int8 (QBITS false) or sign-bit (true) queries,
 * 64 < d <= 128, on wgmma m64n64k32 s8 (sm_90a), for more than 32 query
 * rows (fewer: signs_doc_kernel).  The block holds QB = 64 MW / Lq whole
 * queries as the rows of MW m-tiles (A fragments in registers; sign-bit
 * queries as +-1) and walks documents j = jb, jb + nblk, .. (a persistent grid) as one
 * stream of 64-token tiles across documents: each thread loads 8 bytes of
 * bits (half a token at d = 128) R tiles ahead, by cp.async into its slot
 * of a shared ring (ASYNC: no d_mask, 8-byte words) or with the token's
 * mask byte into registers (a ring of R slots, the tile loop unrolled over
 * them so a slot is refilled in place), so loads stay in flight across
 * document ends; all 128
 * threads unpack a tile into 0 / 1 int8 rows in the 128-byte swizzle (chunk
 * c of token t at chunk c ^ (t % 8)) while the tensor cores score the
 * previous one.
 *
 * The unpack is two instructions per 4 features because K is permuted:
 * position 32 G + 4 p + i of a row (word p of 32-feature group G) holds
 * feature 32 G + 8 i + 7 - p, so word p of a group is (bits >> p) &
 * 0x01010101 of the group's 4 bit bytes (byte b holds features 8b .. 8b+7,
 * most significant bit first); the query's A fragments are gathered in the
 * same order once (the sum over K does not depend on it), 0 past d (so
 * whatever bits the documents hold there add nothing).  With x in {0, 1},
 * the +-1 product is sum_k q_k (2 x_k - 1) = 2 dot01 - S, S = sum_k q_k of
 * the row, once per row at the end (max is monotone).
 *
 * Epilogue: there is no document scale, so v = (float)dot * sq and a row's
 * max over tokens is (float)(max dot) * sq for sq >= 0 (rounding and the
 * product are monotone; sq = +inf: inf, or NaN at max dot 0, as the CPU's
 * NaN-never-wins max).  A row with sq < 0 has its query values negated
 * (exact in [-127, 127]) and |sq| applied: max_t dot_t sq = (max_t -dot_t)
 * |sq|.  So each thread keeps an integer max (IMNMX) of dot01 per row;
 * masked and absent tokens get a bias of -2^30 (a full, unmasked tile skips
 * it), below any dot (|dot| <= 127 * 128), so a max below -2^24 means "no
 * valid token" (-inf).  A masked or absent query row has sq = NaN and is not
 * summed.  Bits x bits: the +-1 dot is d - 2 popcount(q ^ x), sq = 1.  So the
 * results are bitwise the CPU backend's.  A finished document's row values
 * are summed one tile later (rowmax double-buffered), one thread per query
 * in ascending order, while the tensor cores run. */
template <bool QBITS, int MW, bool ASYNC>
__global__ void __launch_bounds__(128, 4) signs_tile_kernel(KQ P, int qb, int groups, int nblk,
                                                            int dvec8) {
  constexpr int TN = 64, KS = 4, ROWS = 64 * MW;
  /* tiles of bits in flight: in registers, or (ASYNC: 8-byte rows, no mask)
   * in this thread's slots of a shared ring by cp.async, as signs_doc_kernel
   * (R = 4 at MW = 2 spills: the loop is unrolled over the slots) */
  constexpr int R = MW == 1 ? 4 : 2;
  __shared__ uint2 ring[ASYNC ? R : 1][128];
  constexpr int BIAS = -(1 << 30), NONE = -(1 << 24);
  __shared__ __align__(1024) uint8_t tile[2][TN * 128];
  __shared__ __align__(8) int tbias[2][TN];
  __shared__ float rowmax[2][ROWS]; /* a finished document's row maxima, summed one tile later */
  __shared__ float rowsq[ROWS]; /* |scale| of the row; NaN: not summed */
  __shared__ int rowqs[ROWS];   /* S: the sum of the row's (negated) query values */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
  const int64_t q0 = (int64_t)(blockIdx.x % groups) * qb;
  const int rows = (int)min((int64_t)qb, P.nq - q0) * (int)P.lq; /* valid stacked rows */
  auto row_of = [&](int mt, int h) { return mt * 64 + warp * 16 + g + 8 * h; };
  uint32_t a[MW][KS][4];
#pragma unroll
  for (int mt = 0; mt < MW; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = row_of(mt, h), lq = (int)P.lq; /* lq <= ROWS */
      const bool ok = r < rows;
      const int64_t i = q0 + (ok ? r / lq : 0), s = ok ? r % lq : 0;
      const uint8_t *row = P.q + i * P.q_sn + s * P.q_sl;
      const bool valid = ok && (!P.qm || P.qm[i * P.qm_sn + s * P.qm_sl]);
      const float sq = !valid ? CUDART_NAN_F : !QBITS && P.sq ? P.sq[i * P.sq_sn + s * P.sq_sl] : 1.0f;
      const bool neg = signbit(sq);
      int part = 0;
#pragma unroll
      for (int ks = 0; ks < KS; ks++)
#pragma unroll
        for (int c = 0; c < 2; c++) { /* A word (row, K 32 ks + 4 p ..), p = tg + 4 c */
          const uint32_t v = signs_qword<QBITS>(P, row, ok, ks, tg + 4 * c, neg);
          a[mt][ks][h + 2 * c] = v;
          part = __dp4a((int)v, 0x01010101, part);
        }
      part += __shfl_xor_sync(0xffffffffu, part, 1); /* the quad holds the row's K */
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      if (tg == 0) {
        rowsq[r] = fabsf(sq);
        rowqs[r] = part;
      }
    }

  /* thread x stages bytes 8 (x % 2) .. of token x / 2 of a tile: feature
   * groups 2 (x % 2) and 2 (x % 2) + 1, chunks 4 (x % 2) .. 4 (x % 2) + 3 */
  const int tx = threadIdx.x >> 1, hf = threadIdx.x & 1;
  const int nbytes = (int)((P.dim + 7) / 8);
  const int ntiles = (int)((P.ld + TN - 1) / TN), nd = (int)P.nd, ld = (int)P.ld; /* < 2^30 */
  uint2 pw[ASYNC ? 1 : R] = {};
  uint32_t pv[ASYNC ? 1 : R] = {}; /* mask bytes (1: none; 0 past Ld), tested only when unpacked */
  int ut = 0; /* ASYNC: the token offset of the next tile to unpack in its document */
  /* the next tile to load; this thread's token at + tx d_sl (+ 8 hf d_sk), + tx dm_sl */
  TileWalk<TN> walk(P, blockIdx.x / groups, nblk, ntiles);
  auto fetch = [&](uint2 &w, uint32_t &v) {
    w = make_uint2(0u, 0u);
    v = 0u;
    if (walk.pj < nd && walk.tt + tx < ld) {
      v = P.dm ? P.dm[walk.mbase + tx * P.dm_sl] : 1u;
      const uint8_t *src = P.d + walk.dbase + tx * P.d_sl + 8 * hf * P.d_sk;
      if (dvec8) {
        w = __ldg((const uint2 *)src);
      } else {
        uint32_t x[2] = {0u, 0u};
#pragma unroll
        for (int b = 0; b < 8; b++)
          if (8 * hf + b < nbytes) x[b / 4] |= (uint32_t)__ldg(src + b * P.d_sk) << (8 * (b % 4));
        w = make_uint2(x[0], x[1]);
      }
    }
    walk.next();
  };
  auto fetch_async = [&](int r) { /* the next tile into ring slot r, one commit group */
    const bool in = walk.pj < nd && walk.tt + tx < ld;
    lik_cuda::cp_async_ca<8>(lik_cuda::smem_u32(&ring[r][threadIdx.x]),
                             in ? (const void *)(P.d + walk.dbase + tx * P.d_sl + 8 * hf) : (const void *)P.d,
                             in ? 8 : 0);
    walk.next();
    lik_cuda::cp_async_commit();
  };
  /* the oldest tile in flight (ring slot r), unpacked into buffer b; the
   * slot is refilled R tiles ahead in place (no register moves) */
  auto unpack = [&](int b, int r) {
    bool v;
    uint2 w;
    if constexpr (ASYNC) {
      lik_cuda::cp_async_wait<R - 1>(); /* this thread's copy of the tile landed */
      w = lik_cuda::lds64(lik_cuda::smem_u32(&ring[r][threadIdx.x]));
      v = ut + tx < ld;
      if ((ut += TN) == ntiles * TN) ut = 0;
    } else {
      w = pw[r];
      v = pv[r] != 0u;
    }
    const uint32_t base = lik_cuda::smem_u32(&tile[b][tx * 128]);
#pragma unroll
    for (int c = 0; c < 4; c++) { /* group 2 hf + c / 2, words p = 4 (c % 2) .. */
      const uint32_t bits = c < 2 ? w.x : w.y;
      uint32_t w4[4];
#pragma unroll
      for (int q = 0; q < 4; q++) w4[q] = (bits >> (4 * (c % 2) + q)) & 0x01010101u;
      lik_cuda::sts128(base + 16 * ((4 * hf + c) ^ (tx & 7)), w4);
    }
    if (hf == 0) tbias[b][tx] = v ? 0 : BIAS;
    if constexpr (ASYNC) fetch_async(r);
    else fetch(pw[r], pv[r]);
    return v;
  };

#pragma unroll
  for (int r = 0; r < R; r++) {
    if constexpr (ASYNC) fetch_async(r);
    else fetch(pw[r], pv[r]);
  }
  bool v0 = unpack(0, 0);
  lik_cuda::fence_proxy_async(); /* st.shared wrote it; wgmma reads it */
  bool full = __syncthreads_and(v0);
  int m[MW][2];
#pragma unroll
  for (int mt = 0; mt < MW; mt++) m[mt][0] = m[mt][1] = INT32_MIN;
  /* the sum over a query's rows (ascending, as the CPU) of the document
   * finished in the previous iteration, by one thread per query while the
   * tensor cores run: rowmax[rb] was written before the last barrier, and
   * is written again two documents later */
  int it = 0, pend = -1; /* pend: that document, or none */
  int rb = 0;
  auto sum_rows = [&]() {
    if (pend >= 0 && threadIdx.x < qb && q0 + threadIdx.x < P.nq) {
      const int64_t i = q0 + threadIdx.x;
      P.scores[i * P.s_si + (int64_t)pend * P.s_sj] = query_total(rowmax[rb ^ 1] + threadIdx.x * P.lq, P.lq);
    }
    pend = -1;
  };
  /* unrolled over the ring's R slots (R even): tile f is in buffer f % 2
   * = sl % 2, tile f + 1 in slot (f + 1) % R, refilled in place */
  static_assert(R % 2 == 0, "the tile buffers alternate within the unrolled loop");
  for (int j = blockIdx.x / groups; j < nd;) {
#pragma unroll
    for (int sl = 0; sl < R; sl++) {
      if (j >= nd) break;
      const int b = sl & 1;
      int acc[MW][32];
      const uint64_t desc = lik_cuda::wg_desc(lik_cuda::smem_u32(tile[b]));
      lik_cuda::wg_fence();
#pragma unroll
      for (int mt = 0; mt < MW; mt++) {
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
          lik_cuda::wgmma_8bit_64<0>(acc[mt], a[mt][ks], lik_cuda::wg_desc_add(desc, 32 * ks), ks > 0);
        lik_cuda::wg_commit();
      }
      sum_rows();
      auto epilogue = [&](int mt) {
        lik_cuda::wg_fence_regs<32>(acc[mt]);
        if (full) {
#pragma unroll
          for (int e = 0; e < 32; e++) m[mt][(e >> 1) & 1] = max(m[mt][(e >> 1) & 1], acc[mt][e]);
        } else {
#pragma unroll
          for (int nb = 0; nb < TN / 8; nb++) {
            const int2 bv = *(const int2 *)&tbias[b][nb * 8 + 2 * tg];
#pragma unroll
            for (int e = 0; e < 4; e++) /* row g + 8 (e / 2), column 8 nb + 2 tg + e % 2 */
              m[mt][e >> 1] = max(m[mt][e >> 1], acc[mt][4 * nb + e] + (e & 1 ? bv.y : bv.x));
          }
        }
      };
      /* the next tile is unpacked while the last m-tile's MMAs run (past the
       * block's last tile: zeros, never read) */
      if constexpr (MW == 2) {
        lik_cuda::wg_wait<1>();
        epilogue(0);
      }
      v0 = unpack(b ^ 1, (sl + 1) % R);
      lik_cuda::wg_wait<0>();
      epilogue(MW - 1);
      if (++it == ntiles) { /* the document's last tile */
#pragma unroll
        for (int mt = 0; mt < MW; mt++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            int x = m[mt][h];
            x = max(x, __shfl_xor_sync(0xffffffffu, x, 1));
            x = max(x, __shfl_xor_sync(0xffffffffu, x, 2));
            const int r = row_of(mt, h);
            if (tg == 0) rowmax[rb][r] = x < NONE ? -CUDART_INF_F : (float)(2 * x - rowqs[r]) * rowsq[r];
            m[mt][h] = INT32_MIN;
          }
        pend = j;
        rb ^= 1;
        it = 0;
        j += nblk;
      }
      /* the unpacked tile and rowmax are visible, buffer b is free */
      lik_cuda::fence_proxy_async();
      full = __syncthreads_and(v0);
    }
  }
  sum_rows();
  if constexpr (ASYNC) lik_cuda::cp_async_wait<0>(); /* no copy outlives the block */
}

/* Sign-bit documents against at most 32 query rows (Nq * Lq <= 32: one
 * ColBERT query), 64 < d <= 128, sm_90a: the documents are the M rows of
 * wgmma m64n32k32 s8 and the queries its N columns, so no 64-row m-tile is
 * half empty and the documents are never staged as tiles: each warp
 * unpacks its 16 tokens of a 64-token tile straight into A fragments, and
 * the query rows (B, 4 KB, in the 128-byte swizzle) are staged once per
 * block.  K is permuted so that lane tg of a quad needs only the 32-bit
 * word tg of its tokens' bits (bytes 4 tg .. 4 tg + 3, features 32 tg ..):
 * K position 32 ks + 16 c + 4 tq + e holds feature 32 tq + 8 e + 7 - p, p =
 * ks + 4 c, so the A word of k-step ks is (word >> p) & 0x01010101 with p
 * known at compile time, and the query is gathered in the same order.  The
 * documents j = jb, jb + nblk, .. stream as one sequence of tiles; each
 * thread loads its word of its two tokens (rows g, g + 8 of its warp's 16)
 * R = 8 tiles ahead: without a d_mask and with 4-byte words (ASYNC) by
 * cp.async into its own slots of a shared ring, else with their mask bytes
 * into registers (the loop unrolled over the ring's slots).  Per element an integer max per column (query
 * row) of dot01 + bias (0, or -2^30 for masked and absent tokens:
 * VIADDMNMX); at a document's end the maxima are reduced over the warp's
 * rows (shuffles) and its 4 warps (shared memory, one barrier), and warp 0
 * sums them one tile later while the tensor cores run (a lane per column,
 * then a lane per query, ascending), as signs_tile_kernel: (float)(2 max -
 * S) * |scale| per row (rows of negative scale negated), bitwise the CPU's. */
template <bool QBITS, bool ASYNC>
__global__ void __launch_bounds__(128, 4) signs_doc_kernel(KQ P, int qb, int nblk, int dvec4) {
  constexpr int TN = 64, KS = 4, N = 32, R = 8;
  /* ASYNC: each thread's two words of a tile go through its own slots of a
   * shared ring by 4-byte cp.async (R - 1 tiles in flight by wait_group);
   * a register ring's loads all land on one scoreboard, so its first use
   * waited for the newest load as well, and the ring was one tile deep */
  __shared__ uint32_t ring[ASYNC ? R : 1][2][128];
  constexpr int BIAS = -(1 << 30), NONE = -(1 << 24);
  __shared__ __align__(1024) uint8_t qtile[N * 128];
  __shared__ int part[2][4][N]; /* per warp column maxima of a finished document */
  __shared__ float colsq[N];    /* |scale| of the query row; NaN: not summed */
  __shared__ int colqs[N];      /* S: the sum of the row's (negated) query values */
  __shared__ float colv[N];     /* a finished document's column maxima as fp32 */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
  const int rows = (int)min((int64_t)qb, P.nq) * (int)P.lq; /* valid query rows */
  {
    /* thread x: query row n = x / 4, k-step G = x % 4 (K 32 G ..): word 4 c +
     * tq holds features 32 tq + 8 e + 7 - (G + 4 c), e = 0 .. 3; chunks 2G,
     * 2G + 1 */
    const int n = threadIdx.x >> 2, G = threadIdx.x & 3, lq = (int)P.lq;
    const bool ok = n < rows;
    const int64_t i = ok ? n / lq : 0, s = ok ? n % lq : 0;
    const uint8_t *row = P.q + i * P.q_sn + s * P.q_sl;
    const bool valid = ok && (!P.qm || P.qm[i * P.qm_sn + s * P.qm_sl]);
    const float sq = !valid ? CUDART_NAN_F : !QBITS && P.sq ? P.sq[i * P.sq_sn + s * P.sq_sl] : 1.0f;
    const bool neg = signbit(sq);
    uint32_t w[8];
    int sum = 0;
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
      for (int tq = 0; tq < 4; tq++) {
        const uint32_t v = signs_qword<QBITS>(P, row, ok, tq, G + 4 * c, neg);
        w[4 * c + tq] = v;
        sum = __dp4a((int)v, 0x01010101, sum);
      }
    const uint32_t base = lik_cuda::smem_u32(&qtile[n * 128]);
    lik_cuda::sts128(base + 16 * ((2 * G) ^ (n & 7)), {w[0], w[1], w[2], w[3]});
    lik_cuda::sts128(base + 16 * ((2 * G + 1) ^ (n & 7)), {w[4], w[5], w[6], w[7]});
    sum += __shfl_xor_sync(0xffffffffu, sum, 1); /* the row's 4 k-steps */
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (G == 0) {
      colsq[n] = fabsf(sq);
      colqs[n] = sum;
    }
  }
  lik_cuda::fence_proxy_async(); /* st.shared wrote the query tile; wgmma reads it */
  __syncthreads();

  const int nbytes = (int)((P.dim + 7) / 8);
  const int ntiles = (int)((P.ld + TN - 1) / TN), nd = (int)P.nd, ld = (int)P.ld; /* < 2^30 */
  const int row0 = warp * 16 + g; /* this thread's rows: row0, row0 + 8 of a tile */
  uint32_t pw[ASYNC ? 1 : R][2] = {}; /* word tg of their bits, R tiles in flight (slot f % R) */
  uint32_t pv[ASYNC ? 1 : R][2] = {}; /* their mask bytes (1: none; 0 past Ld), tested when used */
  /* the next tile to load; this thread's rows at + own (+ 8 d_sl, + 8 dm_sl) */
  TileWalk<TN> walk(P, blockIdx.x, nblk, ntiles);
  /* the next tile into ring slot r (ASYNC; one commit group per tile) */
  auto fetch_async = [&](int r) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = row0 + 8 * h;
      const bool in = walk.pj < nd && walk.tt + row < ld;
      lik_cuda::cp_async_ca<4>(lik_cuda::smem_u32(&ring[r][h][threadIdx.x]),
                          in ? (const void *)(P.d + walk.dbase + row * P.d_sl + 4 * tg) : (const void *)P.d,
                          in ? 4 : 0);
    }
    walk.next();
    lik_cuda::cp_async_commit();
  };
  auto fetch = [&](uint32_t (&w)[2], uint32_t (&v)[2]) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      w[h] = 0u;
      v[h] = 0u;
      const int r = row0 + 8 * h;
      if (walk.pj < nd && walk.tt + r < ld) {
        v[h] = P.dm ? P.dm[walk.mbase + r * P.dm_sl] : 1u;
        const uint8_t *s = P.d + walk.dbase + r * P.d_sl + 4 * tg * P.d_sk;
        if (dvec4) {
          w[h] = __ldg((const unsigned int *)s);
        } else {
          uint32_t x = 0u;
#pragma unroll
          for (int b = 0; b < 4; b++)
            if (4 * tg + b < nbytes) x |= (uint32_t)__ldg(s + b * P.d_sk) << (8 * b);
          w[h] = x;
        }
      }
    }
    walk.next();
  };
#pragma unroll
  for (int r = 0; r < R; r++) {
    if constexpr (ASYNC) fetch_async(r);
    else fetch(pw[r], pv[r]);
  }

  int m[4][2]; /* running max of this thread's columns 8 nb + 2 tg + c */
#pragma unroll
  for (int nb = 0; nb < 4; nb++) m[nb][0] = m[nb][1] = INT32_MIN;
  const uint64_t desc = lik_cuda::wg_desc(lik_cuda::smem_u32(qtile));
  int it = 0, pend = -1; /* pend: a finished document whose sums are due */
  int pb = 0;
  /* warp 0: lane c the value of column c, then lane i the sum of query i's
   * (ascending, a chain of at most 32 adds) */
  auto sum_cols = [&]() {
    if (pend >= 0 && warp == 0) {
      const int x = max(max(part[pb ^ 1][0][lane], part[pb ^ 1][1][lane]),
                        max(part[pb ^ 1][2][lane], part[pb ^ 1][3][lane]));
      colv[lane] = x < NONE ? -CUDART_INF_F : (float)(2 * x - colqs[lane]) * colsq[lane];
      __syncwarp();
      if (lane < qb && lane < P.nq) {
        const int lq = (int)P.lq; /* lq * qb <= 32 */
        const float *v = colv + lane * lq;
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < N; s++)
          if (s < lq && v[s] > -CUDART_INF_F) total += v[s];
        P.scores[lane * P.s_si + (int64_t)pend * P.s_sj] = total;
      }
      __syncwarp(); /* colv is rewritten for the next document */
    }
    pend = -1;
  };
  /* unrolled over the ring's slots, so a register slot r stays in its registers */
  for (int j = blockIdx.x; j < nd;) {
#pragma unroll
    for (int r = 0; r < R; r++) {
      if (j >= nd) break;
      uint32_t w0, w1;
      int bias0, bias1;
      if constexpr (ASYNC) { /* no mask: rows past Ld are the only absent ones */
        lik_cuda::cp_async_wait<R - 1>(); /* this thread's copies of tile f landed */
        w0 = lik_cuda::lds32(lik_cuda::smem_u32(&ring[r][0][threadIdx.x]));
        w1 = lik_cuda::lds32(lik_cuda::smem_u32(&ring[r][1][threadIdx.x]));
        const int t = it * TN + row0;
        bias0 = t < ld ? 0 : BIAS;
        bias1 = t + 8 < ld ? 0 : BIAS;
      } else {
        w0 = pw[r][0], w1 = pw[r][1];
        bias0 = pv[r][0] ? 0 : BIAS, bias1 = pv[r][1] ? 0 : BIAS;
      }
      uint32_t a[KS][4];
#pragma unroll
      for (int ks = 0; ks < KS; ks++) { /* rows g, g + 8; K 32 ks + 4 tg .. and + 16 */
        a[ks][0] = (w0 >> ks) & 0x01010101u;
        a[ks][1] = (w1 >> ks) & 0x01010101u;
        a[ks][2] = (w0 >> (ks + 4)) & 0x01010101u;
        a[ks][3] = (w1 >> (ks + 4)) & 0x01010101u;
      }
      int acc[16];
      lik_cuda::wg_fence();
#pragma unroll
      for (int ks = 0; ks < KS; ks++)
        lik_cuda::wgmma_s8_32(acc, a[ks], lik_cuda::wg_desc_add(desc, 32 * ks), ks > 0);
      lik_cuda::wg_commit();
      /* while the MMAs run: the slot refills R tiles ahead, the last document is summed */
      if constexpr (ASYNC) fetch_async(r);
      else fetch(pw[r], pv[r]);
      sum_cols();
      lik_cuda::wg_wait<0>();
      lik_cuda::wg_fence_regs<16>(acc);
#pragma unroll
      for (int nb = 0; nb < 4; nb++)
#pragma unroll
        for (int e = 0; e < 4; e++) /* row g + 8 (e / 2), column 8 nb + 2 tg + e % 2 */
          m[nb][e & 1] = max(m[nb][e & 1], acc[4 * nb + e] + (e & 2 ? bias1 : bias0));
      if (++it == ntiles) { /* the document's last tile: its column maxima over the block's rows */
#pragma unroll
        for (int nb = 0; nb < 4; nb++)
#pragma unroll
          for (int c = 0; c < 2; c++) {
            const int x = column_max(m[nb][c]);
            if (g == 0) part[pb][warp][nb * 8 + 2 * tg + c] = x;
            m[nb][c] = INT32_MIN;
          }
        pend = j;
        pb ^= 1;
        it = 0;
        j += nblk;
        __syncthreads(); /* part[pb ^ 1] complete; it is written again two documents later */
      }
    }
  }
  sum_cols();
  if constexpr (ASYNC) lik_cuda::cp_async_wait<0>(); /* no copy outlives the block */
}

/* Bytes of bit row `row` as 64-bit word w (little-endian, bits past dim zero). */
__device__ __forceinline__ uint64_t bit_word(const uint8_t *row, int64_t sk, int64_t w,
                                             int64_t dim) {
  const int64_t nb = (dim + 7) / 8;
  uint64_t v = 0;
  for (int b = 0; b < 8 && 8 * w + b < nb; b++) {
    uint32_t x = __ldg(row + (8 * w + b) * sk);
    if (8 * w + b == nb - 1 && dim % 8) x &= 0xff00u >> (dim % 8);
    v |= (uint64_t)x << (8 * b);
  }
  return v;
}

/* bits x bits: lanes = query tokens, a running max per lane over the rows. */
__global__ void __launch_bounds__(128) bits_kernel(KQ P) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t pair = (int64_t)blockIdx.x * 4 + warp;
  __shared__ float best[4][32];
  if (pair >= P.nq * P.nd) return;
  const int64_t j = pair / P.nq, i = pair % P.nq, nw = (P.dim + 63) / 64;
  float total = 0.0f;
  for (int64_t s0 = 0; s0 < P.lq; s0 += 32) {
    const int64_t s = s0 + lane;
    const uint8_t *qrow = P.q + i * P.q_sn + s * P.q_sl;
    float m = -CUDART_INF_F;
    if (s < P.lq)
      for (int64_t t = 0; t < P.ld; t++) {
        if (P.dm && !P.dm[j * P.dm_sn + t * P.dm_sl]) continue;
        const uint8_t *drow = P.d + j * P.d_sn + t * P.d_sl;
        int64_t pc = 0;
        for (int64_t w = 0; w < nw; w++)
          pc += __popcll(bit_word(qrow, P.q_sk, w, P.dim) ^ bit_word(drow, P.d_sk, w, P.dim));
        const float v = (float)(P.dim - 2 * pc);
        m = v > m ? v : m;
      }
    best[warp][lane] = m;
    __syncwarp();
    if (lane == 0)
      for (int x = 0; x < 32 && s0 + x < P.lq; x++) {
        const bool valid = !P.qm || P.qm[i * P.qm_sn + (s0 + x) * P.qm_sl];
        if (valid && best[warp][x] > -CUDART_INF_F) total += best[warp][x];
      }
    __syncwarp();
  }
  if (lane == 0) P.scores[i * P.s_si + j * P.s_sj] = total;
}

int vec_ok8(const lik_seqs &s) {
  return s.sk == 1 && s.dim % 4 == 0 && ((uintptr_t)s.data) % 4 == 0 && s.sl % 4 == 0 &&
         s.sn % 4 == 0;
}

/* The 16-byte-load path (VEC) of an int8 / fp8 document: d = 32 KS with
 * KS = 2 or 4 (each thread's 8 KS bytes are whole uint4s), rows 16-byte
 * aligned.  Sign bits (one byte load per 8 features) need only d = 32 KS. */
bool vec16(const lik_quant_problem *p, int ks) {
  const lik_seqs &s = p->d_seqs;
  if (p->d != 32 * ks) return false;
  if (p->kind == LIK_QK_I8_BITS) return true;
  return ks >= 2 && s.sk == 1 && ((uintptr_t)s.data) % 16 == 0 && s.sl % 16 == 0 && s.sn % 16 == 0;
}

/* The TMA kernels' conditions (the context's DevInfo.wg and .bulk, 64 < d
 * <= 128, Lq >= 1, documents of unit feature stride in 16-byte aligned rows,
 * Nd and Ld < 2^30: the kernels' int counters) and their tensor map of the
 * documents (boxes of 128 bytes x WS_TN tokens); false where they do not
 * hold. */
bool ws_tmap(const lik_quant_problem *p, const KQ &P, const lik_cuda::Device &dev, CUtensorMap *tmap) {
  const lik_seqs &d = p->d_seqs;
  if (!dev.info->wg || !dev.info->bulk || P.dim <= 64 || P.dim > 128 || P.lq < 1) return false;
  if (P.nd < 1 || P.ld < 1 || P.nd >= (1 << 30) || P.ld >= (1 << 30) || d.sk != 1 ||
      ((uintptr_t)d.data) % 16 != 0 || d.sl % 16 != 0 || (P.nd > 1 && d.sn % 16 != 0))
    return false;
  const uint64_t dims[3] = {(uint64_t)P.dim, (uint64_t)P.ld, (uint64_t)P.nd};
  const uint64_t strides[2] = {(uint64_t)d.sl, (uint64_t)(P.nd > 1 ? d.sn : P.ld * d.sl)};
  const uint32_t box[3] = {128, (uint32_t)WS_TN, 1};
  return lik_cuda::encode_tmap(tmap, 1, 3, d.data, dims, strides, box);
}

/* Several int8 / fp8 queries on tile_ws_kernel where the TMA kernels run
 * (ws_tmap) and Lq <= 256: one m-tile a warpgroup where every query fits
 * 128 rows, else two (false where it does not apply). */
template <int KIND>
bool launch_ws(const lik_quant_problem *p, const KQ &P, const lik_cuda::Device &dev, cudaStream_t st) {
  CUtensorMap tmap;
  if (P.lq > 256 || !ws_tmap(p, P, dev, &tmap)) return false;
  const int mt = P.nq * P.lq <= 128 ? 1 : 2;
  const int qb = (int)(128 * mt / P.lq);
  const int64_t groups = (P.nq + qb - 1) / qb;
  /* one CTA per SM: nblk CTAs a group, or one a group past the SMs */
  const int64_t nblk = std::max<int64_t>(1, std::min<int64_t>(P.nd, dev.info->sms / groups));
  if (groups * nblk > INT32_MAX) return false;
  auto kern = mt == 1 ? tile_ws_kernel<KIND, 1> : tile_ws_kernel<KIND, 2>;
  const int smem = mt == 1 ? WsSmem<1>::BYTES : WsSmem<2>::BYTES;
  if (lik_cuda::allow_smem(dev, (const void *)kern, smem) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  kern<<<(unsigned)(groups * nblk), WS_THREADS, smem, st>>>(P, tmap, qb, (int)groups, (int)nblk);
  return true;
}

/* One int8 / fp8 query (Nq * Lq <= 32 stacked rows) on doc_ws_kernel where
 * the TMA kernels run (ws_tmap): one CTA per SM (false where it does not
 * apply). */
template <int KIND>
bool launch_doc_ws(const lik_quant_problem *p, const KQ &P, const lik_cuda::Device &dev,
                   cudaStream_t st) {
  CUtensorMap tmap;
  if (P.nq < 1 || P.nq * P.lq > DW_N || !ws_tmap(p, P, dev, &tmap)) return false;
  const int nblk = (int)std::min<int64_t>(P.nd, dev.info->sms);
  if (lik_cuda::allow_smem(dev, (const void *)doc_ws_kernel<KIND>, DwSmem::BYTES) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  doc_ws_kernel<KIND><<<(unsigned)nblk, DW_THREADS, DwSmem::BYTES, st>>>(P, tmap, nblk);
  return true;
}

/* Several int8 queries (int8 documents) of at most TileShape<KS>::ROWS
 * tokens off tile_ws_kernel: the shared-tile kernel on mma.sync (false
 * where it does not apply).  Sign-bit documents are not staged here (+-1
 * bytes through its registers spilled): signs_tile_kernel (launch_signs)
 * where wgmma runs, else the one-warp kernel. */
template <int KS>
bool launch_tile(const KQ &P, const lik_seqs &d, int sms, cudaStream_t st) {
  using S = TileShape<KS>;
  if (P.nq < 2 || P.lq < 1 || P.lq > S::ROWS) return false;
  const int qb = (int)(S::ROWS / P.lq);
  const int64_t groups = (P.nq + qb - 1) / qb;
  /* a persistent grid of about two waves of 4 blocks per SM */
  const int64_t nblk =
      std::max<int64_t>(1, std::min<int64_t>(P.nd, (8 * (int64_t)sms + groups - 1) / groups));
  if (groups * nblk > INT32_MAX) return false;
  const unsigned grid = (unsigned)(groups * nblk);
  const bool async = d.sk == 1 && P.dim % 16 == 0 && ((uintptr_t)d.data) % 16 == 0 &&
                     d.sl % 16 == 0 && d.sn % 16 == 0;
  if (async) tile_kernel<KS, true><<<grid, 128, 0, st>>>(P, qb, (int)groups, (int)nblk);
  else tile_kernel<KS, false><<<grid, 128, 0, st>>>(P, qb, (int)groups, (int)nblk);
  return true;
}

/* Sign-bit documents (int8 queries, or sign-bit ones: qbits) where wg (the
 * context's DevInfo.wg), 64 < d <= 128, 1 <= Lq <= 128, Nd and Ld < 2^30
 * (the kernels' int32 counters): signs_doc_kernel for up to 32 query rows,
 * else signs_tile_kernel, one m-tile (MW = 1) where every query fits in 64
 * rows, else two (false where it does not apply).  Any strides: 4- / 8-byte
 * bit loads where rows allow, else bytes. */
bool launch_signs(const lik_quant_problem *p, const KQ &P, bool qbits, bool wg, int sms,
                  cudaStream_t st) {
  if (!wg || P.dim <= 64 || P.dim > 128 || P.lq < 1 || P.lq > 128 || P.ld < 1)
    return false;
  if (P.nd >= (1 << 30) || P.ld >= (1 << 30)) return false; /* the kernels' int32 counters */
  const int mw = P.nq * P.lq <= 64 ? 1 : 2;
  const int qb = (int)(64 * mw / P.lq);
  const int64_t groups = (P.nq + qb - 1) / qb;
  /* a persistent grid of about two waves of 4 blocks per SM */
  const int64_t nblk =
      std::max<int64_t>(1, std::min<int64_t>(P.nd, (8 * (int64_t)sms + groups - 1) / groups));
  if (groups * nblk > INT32_MAX) return false;
  const unsigned grid = (unsigned)(groups * nblk);
  const lik_seqs &d = p->d_seqs;
  const int dvec8 = d.sk == 1 && P.dim > 120 && ((uintptr_t)d.data) % 8 == 0 && d.sl % 8 == 0 &&
                    d.sn % 8 == 0;
  const int g = (int)groups, n = (int)nblk;
  if (P.nq * P.lq <= 32) {
    const int dvec4 = d.sk == 1 && P.dim > 120 && ((uintptr_t)d.data) % 4 == 0 && d.sl % 4 == 0 &&
                      d.sn % 4 == 0;
    if (dvec4 && !P.dm) { /* the bits through the shared ring */
      if (qbits) signs_doc_kernel<true, true><<<grid, 128, 0, st>>>(P, qb, n, dvec4);
      else signs_doc_kernel<false, true><<<grid, 128, 0, st>>>(P, qb, n, dvec4);
    } else if (qbits) signs_doc_kernel<true, false><<<grid, 128, 0, st>>>(P, qb, n, dvec4);
    else signs_doc_kernel<false, false><<<grid, 128, 0, st>>>(P, qb, n, dvec4);
    return true;
  }
  if (dvec8 && !P.dm) { /* the bits through the shared ring */
    if (qbits && mw == 1) signs_tile_kernel<true, 1, true><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
    else if (qbits) signs_tile_kernel<true, 2, true><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
    else if (mw == 1) signs_tile_kernel<false, 1, true><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
    else signs_tile_kernel<false, 2, true><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
  } else if (qbits && mw == 1) signs_tile_kernel<true, 1, false><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
  else if (qbits) signs_tile_kernel<true, 2, false><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
  else if (mw == 1) signs_tile_kernel<false, 1, false><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
  else signs_tile_kernel<false, 2, false><<<grid, 128, 0, st>>>(P, qb, g, n, dvec8);
  return true;
}

/* int8 / fp8 documents: one query on doc_ws_kernel (launch_doc_ws), several
 * on tile_ws_kernel (launch_ws), else int8 on the shared-tile kernel
 * (launch_tile: d <= 256, Lq up to a block's rows); one query elsewhere
 * (memory-bound: a warp per document streams it once),
 * long queries, d > 256 and fp8 off wgmma (sm_90's mma.sync has no fp8
 * units: ptxas unpacks e4m3 / e5m2 to f16 and runs HMMA): the one-warp
 * kernel.  Sign-bit documents x int8 queries (K_I8_BITS; x sign-bit queries:
 * lik_cuda_maxsim_quant) where wg (the context's DevInfo.wg: sm_90a code
 * runs and LIK_CUDA_NO_WGMMA is off), 64 < d <= 128, 1 <= Lq <= 128, Nd and
 * Ld < 2^30 (launch_signs): signs_doc_kernel for Nq * Lq <= 32 (one ColBERT
 * query), else signs_tile_kernel (one m-tile for Nq * Lq <= 64, else two);
 * otherwise the one-warp kernel. */
template <int KIND>
void launch_mma(const lik_quant_problem *p, const KQ &P, unsigned grid, const lik_cuda::Device &dev,
                cudaStream_t st) {
  const bool wg = dev.info->wg, i8 = KIND == K_INT8;
  const int sms = dev.info->sms;
  if constexpr (KIND != K_I8_BITS)
    if (launch_doc_ws<KIND>(p, P, dev, st) || (P.nq >= 2 && launch_ws<KIND>(p, P, dev, st))) return;
  const lik_seqs &d = p->d_seqs;
  if (P.dim <= 32) {
    if (i8 && launch_tile<1>(P, d, sms, st)) return;
    if (vec16(p, 1)) mma_kernel<KIND, 1, true><<<grid, 128, 0, st>>>(P);
    else mma_kernel<KIND, 1, false><<<grid, 128, 0, st>>>(P);
  } else if (P.dim <= 64) {
    if (i8 && launch_tile<2>(P, d, sms, st)) return;
    if (vec16(p, 2)) mma_kernel<KIND, 2, true><<<grid, 128, 0, st>>>(P);
    else mma_kernel<KIND, 2, false><<<grid, 128, 0, st>>>(P);
  } else if (P.dim <= 128) {
    if (i8 && launch_tile<4>(P, d, sms, st)) return;
    if (KIND == K_I8_BITS && launch_signs(p, P, false, wg, sms, st)) return;
    if (vec16(p, 4)) mma_kernel<KIND, 4, true><<<grid, 128, 0, st>>>(P);
    else mma_kernel<KIND, 4, false><<<grid, 128, 0, st>>>(P);
  } else {
    if (i8 && P.dim <= 256 && launch_tile<8>(P, d, sms, st)) return;
    mma_kernel<KIND, 0, false><<<grid, 128, 0, st>>>(P);
  }
}

} // namespace

extern "C" lik_status lik_cuda_maxsim_quant(const lik_quant_problem *p) {
  using namespace lik_cuda;
  if ((p->kind == LIK_QK_INT8 || p->kind == LIK_QK_I8_BITS) && p->d > 65536)
    return lik_fail(LIK_ERR_UNSUPPORTED, "Q: d=%lld exceeds 65536, the int32 accumulator range "
                    "of the CUDA int8 kernels (the CPU serves any d)", (long long)p->d);
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  const int major = dev.info->cc_major, minor = dev.info->cc_minor, sms = dev.info->sms;
  if (major * 10 + minor < 80 || (p->kind == LIK_QK_FP8 && major * 10 + minor < 89))
    return lik_fail(LIK_ERR_UNSUPPORTED, "%s MaxSim on CUDA needs compute capability %s, the "
                    "device has %d.%d", p->kind == LIK_QK_FP8 ? "fp8" : "int8",
                    p->kind == LIK_QK_FP8 ? "8.9" : "8.0", major, minor);
  KQ P;
  P.q = (const uint8_t *)p->q.data;
  P.d = (const uint8_t *)p->d_seqs.data;
  P.q_sn = p->q.sn; P.q_sl = p->q.sl; P.q_sk = p->q.sk;
  P.d_sn = p->d_seqs.sn; P.d_sl = p->d_seqs.sl; P.d_sk = p->d_seqs.sk;
  P.nq = p->q.count; P.lq = p->q.len; P.nd = p->d_seqs.count; P.ld = p->d_seqs.len;
  P.dim = p->d;
  P.qm = p->q_mask.data; P.qm_sn = p->q_mask.sn; P.qm_sl = p->q_mask.sl;
  P.dm = p->d_mask.data; P.dm_sn = p->d_mask.sn; P.dm_sl = p->d_mask.sl;
  P.sq = p->scale_q.data; P.sq_sn = p->scale_q.sn; P.sq_sl = p->scale_q.sl;
  P.sd = p->scale_d.data; P.sd_sn = p->scale_d.sn; P.sd_sl = p->scale_d.sl;
  P.scores = p->scores; P.s_si = p->score_si; P.s_sj = p->score_sj;
  P.qvec = vec_ok8(p->q);
  P.dvec = vec_ok8(p->d_seqs);
  const int64_t blocks = (P.nq * P.nd + 3) / 4;
  if (blocks > INT32_MAX)
    return lik_fail(LIK_ERR_UNSUPPORTED, "Nq * Nd = %lld pairs exceed the CUDA grid",
                    (long long)(P.nq * P.nd));
  const unsigned grid = (unsigned)blocks;
  /* the context's flags: wgmma_runs(major, minor) unless LIK_CUDA_NO_WGMMA
   * (lik.Context(cuda_off=["wgmma"])), and TMA unless turned off likewise */
  cudaStream_t st = (cudaStream_t)p->call.stream;
  switch (p->kind) {
    case LIK_QK_INT8: launch_mma<K_INT8>(p, P, grid, dev, st); break;
    case LIK_QK_I8_BITS: launch_mma<K_I8_BITS>(p, P, grid, dev, st); break;
    case LIK_QK_FP8:
      if (p->q.dtype == LIK_F8E5M2) launch_mma<K_E5M2>(p, P, grid, dev, st);
      else launch_mma<K_E4M3>(p, P, grid, dev, st);
      break;
    case LIK_QK_BITS:
      if (!launch_signs(p, P, true, dev.info->wg, sms, st)) bits_kernel<<<grid, 128, 0, st>>>(P);
      break;
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? LIK_OK : cuda_fail(e, "lik_maxsim (low-bit) launch");
}
