/*
 * quant_avx2.c — int8 tile on AVX2 (quant_internal.h): q * d as
 * maddubs(|q|, sign(d, q)) (each pair sum <= 2 * 127 * 127, no saturation),
 * widened by madd(., 1); 16 lanes at a time, 8 int32 accumulators.
 */
#include <immintrin.h>
#include <string.h>

#include "quant_internal.h"

static void i8_tile_avx2(const uint8_t *qp, const int8_t *dp, const int32_t *dsum, int64_t kg,
                         const float *sq, const float *sd, float *m) {
  (void)dsum;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int h = 0; h < LIK_QT_LANES; h += 16) {
    __m256i acc[LIK_QT_ROWS][2];
    for (int r = 0; r < LIK_QT_ROWS; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t g = 0; g < kg; g++) {
      const int8_t *dg = dp + (g * LIK_QT_LANES + h) * 4;
      const __m256i d0 = _mm256_loadu_si256((const __m256i *)dg);
      const __m256i d1 = _mm256_loadu_si256((const __m256i *)(dg + 32));
      for (int r = 0; r < LIK_QT_ROWS; r++) {
        int32_t q4;
        memcpy(&q4, qp + (g * LIK_QT_ROWS + r) * 4, 4);
        const __m256i qb = _mm256_set1_epi32(q4);
        const __m256i qa = _mm256_abs_epi8(qb);
        acc[r][0] = _mm256_add_epi32(
            acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(d0, qb)), ones));
        acc[r][1] = _mm256_add_epi32(
            acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(d1, qb)), ones));
      }
    }
    for (int r = 0; r < LIK_QT_ROWS; r++) {
      const __m256 s = _mm256_set1_ps(sq[r]);
      for (int v = 0; v < 2; v++) {
        float *mr = m + r * LIK_QT_LANES + h + v * 8;
        const __m256 sc = _mm256_mul_ps(s, _mm256_loadu_ps(sd + h + v * 8));
        const __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][v]), sc);
        _mm256_storeu_ps(mr, _mm256_max_ps(x, _mm256_loadu_ps(mr)));
      }
    }
  }
}

/* The bit tile of both x86 tables (hardware popcnt: -mavx2 implies it). */
void lik_bits_tile_popcnt(const uint64_t *qw, const uint64_t *dw, int64_t nw, int64_t d,
                          float *m) {
  for (int r = 0; r < LIK_QT_ROWS; r++)
    for (int l = 0; l < LIK_QT_LANES; l++) {
      int64_t pc = 0;
      for (int64_t w = 0; w < nw; w++)
        pc += __builtin_popcountll(qw[r * nw + w] ^ dw[l * nw + w]);
      const float v = (float)(d - 2 * pc);
      float *mr = m + r * LIK_QT_LANES + l;
      *mr = v > *mr ? v : *mr;
    }
}

const lik_quant_kernels lik_quant_kernels_avx2 = {"avx2", 0, i8_tile_avx2, lik_bits_tile_popcnt};
