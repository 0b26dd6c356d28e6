/*
 * quant_vnni.c — int8 tile on AVX-512 VNNI (quant_internal.h): vpdpbusd of
 * the uint8 q + 128 with int8 d, corrected by 128 * sum_k d; 32 lanes in two
 * zmm, 8 int32 accumulators.  Bit tiles: quant_avx2.c's.
 */
#include <immintrin.h>
#include <string.h>

#include "quant_internal.h"

static void i8_tile_vnni(const uint8_t *qp, const int8_t *dp, const int32_t *dsum, int64_t kg,
                         const float *sq, const float *sd, float *m) {
  __m512i acc[LIK_QT_ROWS][2];
  for (int r = 0; r < LIK_QT_ROWS; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t g = 0; g < kg; g++) {
    const int8_t *dg = dp + g * LIK_QT_LANES * 4;
    const __m512i d0 = _mm512_loadu_si512((const void *)dg);
    const __m512i d1 = _mm512_loadu_si512((const void *)(dg + 64));
    for (int r = 0; r < LIK_QT_ROWS; r++) {
      int32_t q4;
      memcpy(&q4, qp + (g * LIK_QT_ROWS + r) * 4, 4);
      const __m512i qb = _mm512_set1_epi32(q4);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], qb, d0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], qb, d1);
    }
  }
  for (int v = 0; v < 2; v++) {
    const __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512((const void *)(dsum + v * 16)), 7);
    const __m512 sdv = _mm512_loadu_ps(sd + v * 16);
    for (int r = 0; r < LIK_QT_ROWS; r++) {
      float *mr = m + r * LIK_QT_LANES + v * 16;
      const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(sq[r]), sdv);
      const __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][v], corr)), sc);
      _mm512_storeu_ps(mr, _mm512_max_ps(x, _mm512_loadu_ps(mr)));
    }
  }
}

const lik_quant_kernels lik_quant_kernels_vnni = {"avx512-vnni", 0x80, i8_tile_vnni,
                                                  lik_bits_tile_popcnt};
