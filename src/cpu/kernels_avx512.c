/*
 * kernels_avx512.c — AVX-512 (F/BW/VL) + FMA + F16C tiles and pack (compiled
 * with -mavx512f -mavx512vl -mavx512bw -mfma -mf16c; only called after
 * dispatch.c saw those features and OS-enabled ZMM state).
 *
 * lik_tile_avx512_12x32: 12 doc rows x 32 query lanes.
 *   Register budget (32 zmm): 24 accumulators (12 rows x 2 zmm) + 2 Q-panel
 *   loads + 1 broadcast = 27, leaving room for the compiler.  Per k: 2 loads
 *   + 12 broadcasts (folded into the FMAs as {1to16} memory operands) feed
 *   24 FMAs = 12 cycles at 2 FMA/cycle; 14 loads fit the 2 zmm loads/cycle.
 *   A 32-lane panel exactly covers the common Lq = 32 query.
 * lik_tile_avx512_12x16: 12 x 16 for a last panel with <= 16 valid lanes.
 *   12 accumulators; per k 1 load + 12 broadcasts for 12 FMAs, so it is
 *   load-port bound (about 6.5 cycles per 6 FMA cycles) — still far better
 *   than spending half a 32-lane tile on zero lanes.
 * The running max / argmax are in memory and updated once per 12 rows with
 * a compare-into-mask and two masked moves per row and zmm.
 */
#include <immintrin.h>
#include <math.h>

#include "backward_internal.h"
#include "cpu_internal.h"
#include "quant_internal.h"
#include "residual_internal.h"

#define MR 12

#define UPD(v, mv, iv, t)                                       \
  do {                                                          \
    __mmask16 gt_ = _mm512_cmp_ps_mask((v), (mv), _CMP_GT_OQ);  \
    (mv) = _mm512_mask_mov_ps((mv), gt_, (v));                  \
    (iv) = _mm512_mask_mov_epi32((iv), gt_, (t));               \
  } while (0)

static void lik_tile_avx512_12x32(const float *q, int64_t ldq, const float *dr,
                                  int64_t d, const int32_t *tix,
                                  int64_t nrows, float *m, int32_t *ix) {
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b = dr + r0 * d;
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm512_setzero_ps();
    const float *qk = q;
    for (int64_t k = 0; k < d; k++, qk += ldq) {
      __m512 a0 = _mm512_loadu_ps(qk), a1 = _mm512_loadu_ps(qk + 16);
#pragma GCC unroll 12
      for (int r = 0; r < MR; r++) {
        __m512 bb = _mm512_set1_ps(b[r * d + k]);
        c0[r] = _mm512_fmadd_ps(a0, bb, c0[r]);
        c1[r] = _mm512_fmadd_ps(a1, bb, c1[r]);
      }
    }
    __m512 m0 = _mm512_loadu_ps(m), m1 = _mm512_loadu_ps(m + 16);
    __m512i i0 = _mm512_loadu_si512(ix), i1 = _mm512_loadu_si512(ix + 16);
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
      __m512i t = _mm512_set1_epi32(tix[r0 + r]);
      UPD(c0[r], m0, i0, t);
      UPD(c1[r], m1, i1, t);
    }
    _mm512_storeu_ps(m, m0); _mm512_storeu_ps(m + 16, m1);
    _mm512_storeu_si512(ix, i0); _mm512_storeu_si512(ix + 16, i1);
  }
}

static void lik_tile_avx512_12x16(const float *q, int64_t ldq, const float *dr,
                                  int64_t d, const int32_t *tix,
                                  int64_t nrows, float *m, int32_t *ix) {
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b = dr + r0 * d;
    __m512 c0[MR];
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) c0[r] = _mm512_setzero_ps();
    const float *qk = q;
    for (int64_t k = 0; k < d; k++, qk += ldq) {
      __m512 a0 = _mm512_loadu_ps(qk);
#pragma GCC unroll 12
      for (int r = 0; r < MR; r++)
        c0[r] = _mm512_fmadd_ps(a0, _mm512_set1_ps(b[r * d + k]), c0[r]);
    }
    __m512 m0 = _mm512_loadu_ps(m);
    __m512i i0 = _mm512_loadu_si512(ix);
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
      __m512i t = _mm512_set1_epi32(tix[r0 + r]);
      UPD(c0[r], m0, i0, t);
    }
    _mm512_storeu_ps(m, m0);
    _mm512_storeu_si512(ix, i0);
  }
}

/* Contiguous (sk == 1) row, widened: 16 elements per step with masked tails
 * (no scalar remainder); F16 through F16C (vcvtph2ps zmm), BF16 by a shift. */
static void widen_row_avx512(const void *base, lik_dtype dt, int64_t off, int64_t d, float *dst) {
  for (int64_t k = 0; k < d; k += 16) {
    int64_t left = d - k;
    __mmask16 msk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    __m512 x;
    if (dt == LIK_F32) {
      x = _mm512_maskz_loadu_ps(msk, (const float *)base + off + k);
    } else {
      __m256i h = _mm256_maskz_loadu_epi16(msk, (const uint16_t *)base + off + k);
      if (dt == LIK_F16)
        x = _mm512_cvtph_ps(h);
      else
        x = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    _mm512_mask_storeu_ps(dst + k, msk, x);
  }
}

/* dst *= 1 / max(||dst||, eps): 16 fp32 partial sums reduced in a fixed
 * order.  Every widened row, contiguous or strided, is normalised here, so a
 * strided view scores bitwise as its contiguous copy. */
static void normalize_row_avx512(float *dst, int64_t d) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t k = 0; k < d; k += 16) {
    int64_t left = d - k;
    __mmask16 msk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    __m512 x = _mm512_maskz_loadu_ps(msk, dst + k);
    acc = _mm512_fmadd_ps(x, x, acc);
  }
  float part[16];
  _mm512_storeu_ps(part, acc);
  float ss = 0.0f;
  for (int i = 0; i < 16; i++) ss += part[i];
  __m512 vi = _mm512_set1_ps(1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS));
  for (int64_t k = 0; k < d; k += 16) {
    int64_t left = d - k;
    __mmask16 msk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    _mm512_mask_storeu_ps(dst + k, msk,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(msk, dst + k), vi));
  }
}

static void lik_pack_avx512(const lik_seqs *s, int64_t n, const int32_t *tok,
                            int64_t cnt, int normalize, float *dst) {
  lik_pack_simd(s, n, tok, cnt, normalize, dst, widen_row_avx512, normalize_row_avx512);
}

const lik_cpu_kernels lik_cpu_kernels_avx512 = {
    "avx512", 32, MR, lik_tile_avx512_12x32, 16, lik_tile_avx512_12x16,
    lik_pack_avx512, &lik_bw_kernels_avx2_f32, &lik_bw_kernels_avx2_f64,
    &lik_res_kernels_avx512, &lik_quant_kernels_avx2 /* VNNI: dispatch.c */};
