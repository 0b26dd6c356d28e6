/*
 * kernels_avx2.c — AVX2 + FMA + F16C tiles and pack (compiled with
 * -mavx2 -mfma -mf16c; only called after dispatch.c saw those features).
 *
 * lik_tile_avx2_6x16: 6 doc rows x 16 query lanes.
 *   Register budget (16 ymm): 12 accumulators (6 rows x 2 ymm) + 2 Q-panel
 *   loads + 1 broadcast doc feature = 15.  Per k: 2 loads + 6 broadcasts feed
 *   12 FMAs (6 cycles at 2 FMA/cycle), well within the load ports.
 *   The running max / argmax live in memory and are updated once per 6 rows
 *   (cmp + 2 blends per row and ymm), negligible next to 12*d FMAs.
 * lik_tile_avx2_6x8: 6 x 8, for a last panel with <= 8 valid query lanes
 *   (half the FMAs of a full tile would be wasted on zero lanes).
 */
#include <immintrin.h>
#include <math.h>

#include "backward_internal.h"
#include "cpu_internal.h"
#include "quant_internal.h"
#include "residual_internal.h"

#define MR 6

/* Strict-> update of running max m and argmax ix with a row's dots v. */
#define UPD(v, mv, iv, t)                                        \
  do {                                                           \
    __m256 gt_ = _mm256_cmp_ps((v), (mv), _CMP_GT_OQ);           \
    (mv) = _mm256_blendv_ps((mv), (v), gt_);                     \
    (iv) = _mm256_blendv_ps((iv), (t), gt_);                     \
  } while (0)

static void lik_tile_avx2_6x16(const float *q, int64_t ldq, const float *dr,
                               int64_t d, const int32_t *tix, int64_t nrows,
                               float *m, int32_t *ix) {
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b0 = dr + r0 * d, *b1 = b0 + d, *b2 = b1 + d, *b3 = b2 + d,
                *b4 = b3 + d, *b5 = b4 + d;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00,
           c50 = c00, c51 = c00;
    const float *qk = q;
    for (int64_t k = 0; k < d; k++, qk += ldq) {
      __m256 a0 = _mm256_loadu_ps(qk), a1 = _mm256_loadu_ps(qk + 8), b;
/* row i: c<i>0, c<i>1 += a0, a1 times doc feature b<i>[k] */
#define ROW_FMA(i)                                                     \
  b = _mm256_broadcast_ss(b##i + k);                                   \
  c##i##0 = _mm256_fmadd_ps(a0, b, c##i##0);                           \
  c##i##1 = _mm256_fmadd_ps(a1, b, c##i##1)
      ROW_FMA(0); ROW_FMA(1); ROW_FMA(2);
      ROW_FMA(3); ROW_FMA(4); ROW_FMA(5);
#undef ROW_FMA
    }
    __m256 m0 = _mm256_loadu_ps(m), m1 = _mm256_loadu_ps(m + 8);
    __m256 i0 = _mm256_loadu_ps((const float *)ix);
    __m256 i1 = _mm256_loadu_ps((const float *)ix + 8);
    const float *tf = (const float *)(tix + r0);
    __m256 t;
    t = _mm256_broadcast_ss(tf + 0); UPD(c00, m0, i0, t); UPD(c01, m1, i1, t);
    t = _mm256_broadcast_ss(tf + 1); UPD(c10, m0, i0, t); UPD(c11, m1, i1, t);
    t = _mm256_broadcast_ss(tf + 2); UPD(c20, m0, i0, t); UPD(c21, m1, i1, t);
    t = _mm256_broadcast_ss(tf + 3); UPD(c30, m0, i0, t); UPD(c31, m1, i1, t);
    t = _mm256_broadcast_ss(tf + 4); UPD(c40, m0, i0, t); UPD(c41, m1, i1, t);
    t = _mm256_broadcast_ss(tf + 5); UPD(c50, m0, i0, t); UPD(c51, m1, i1, t);
    _mm256_storeu_ps(m, m0); _mm256_storeu_ps(m + 8, m1);
    _mm256_storeu_ps((float *)ix, i0); _mm256_storeu_ps((float *)ix + 8, i1);
  }
}

static void lik_tile_avx2_6x8(const float *q, int64_t ldq, const float *dr,
                              int64_t d, const int32_t *tix, int64_t nrows,
                              float *m, int32_t *ix) {
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b0 = dr + r0 * d;
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0,
           c5 = c0;
    const float *qk = q;
    for (int64_t k = 0; k < d; k++, qk += ldq) {
      __m256 a = _mm256_loadu_ps(qk);
      c0 = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b0 + k), c0);
      c1 = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b0 + d + k), c1);
      c2 = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b0 + 2 * d + k), c2);
      c3 = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b0 + 3 * d + k), c3);
      c4 = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b0 + 4 * d + k), c4);
      c5 = _mm256_fmadd_ps(a, _mm256_broadcast_ss(b0 + 5 * d + k), c5);
    }
    __m256 m0 = _mm256_loadu_ps(m), i0 = _mm256_loadu_ps((const float *)ix);
    const float *tf = (const float *)(tix + r0);
    UPD(c0, m0, i0, _mm256_broadcast_ss(tf + 0));
    UPD(c1, m0, i0, _mm256_broadcast_ss(tf + 1));
    UPD(c2, m0, i0, _mm256_broadcast_ss(tf + 2));
    UPD(c3, m0, i0, _mm256_broadcast_ss(tf + 3));
    UPD(c4, m0, i0, _mm256_broadcast_ss(tf + 4));
    UPD(c5, m0, i0, _mm256_broadcast_ss(tf + 5));
    _mm256_storeu_ps(m, m0);
    _mm256_storeu_ps((float *)ix, i0);
  }
}

/* Contiguous (sk == 1) row, widened: 8 elements per step, F16 through F16C,
 * BF16 by a 16-bit shift. */
static void widen_row_avx2(const void *base, lik_dtype dt, int64_t off, int64_t d, float *dst) {
  int64_t k = 0;
  if (dt == LIK_F32) {
    const float *src = (const float *)base + off;
    for (; k + 8 <= d; k += 8) _mm256_storeu_ps(dst + k, _mm256_loadu_ps(src + k));
    for (; k < d; k++) dst[k] = src[k];
  } else if (dt == LIK_F16) {
    const uint16_t *src = (const uint16_t *)base + off;
    for (; k + 8 <= d; k += 8)
      _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + k))));
    for (; k < d; k++) dst[k] = lik_tr_f16_to_f32(src[k]);
  } else {
    const uint16_t *src = (const uint16_t *)base + off;
    for (; k + 8 <= d; k += 8) {
      __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + k)));
      _mm256_storeu_ps(dst + k, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; k < d; k++) dst[k] = lik_tr_bf16_to_f32(src[k]);
  }
}

/* dst *= 1 / max(||dst||, eps): the fp32 norm with 8 partial sums (fixed
 * order).  Every widened row, contiguous or strided, is normalised here, so
 * a strided view scores bitwise as its contiguous copy. */
static void normalize_row_avx2(float *dst, int64_t d) {
  int64_t k;
  __m256 acc = _mm256_setzero_ps();
  for (k = 0; k + 8 <= d; k += 8) {
    __m256 x = _mm256_loadu_ps(dst + k);
    acc = _mm256_fmadd_ps(x, x, acc);
  }
  float part[8];
  _mm256_storeu_ps(part, acc);
  float ss = ((part[0] + part[1]) + (part[2] + part[3])) +
             ((part[4] + part[5]) + (part[6] + part[7]));
  for (; k < d; k++) ss += dst[k] * dst[k];
  float inv = 1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
  __m256 vi = _mm256_set1_ps(inv);
  for (k = 0; k + 8 <= d; k += 8)
    _mm256_storeu_ps(dst + k, _mm256_mul_ps(_mm256_loadu_ps(dst + k), vi));
  for (; k < d; k++) dst[k] *= inv;
}

static void lik_pack_avx2(const lik_seqs *s, int64_t n, const int32_t *tok,
                          int64_t cnt, int normalize, float *dst) {
  lik_pack_simd(s, n, tok, cnt, normalize, dst, widen_row_avx2, normalize_row_avx2);
}

const lik_cpu_kernels lik_cpu_kernels_avx2 = {
    "avx2", 16, MR, lik_tile_avx2_6x16, 8, lik_tile_avx2_6x8, lik_pack_avx2,
    &lik_bw_kernels_avx2_f32, &lik_bw_kernels_avx2_f64, &lik_res_kernels_avx2,
    &lik_quant_kernels_avx2};
