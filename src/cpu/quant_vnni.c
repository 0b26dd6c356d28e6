/*
 * quant_vnni.c — int8 tile on AVX-512 VNNI (quant_internal.h): vpdpbusd of
 * the broadcast uint8 d + 128 (4 features of a row) with 32 int8 query lanes
 * (two zmm), corrected by 128 * qsum; 4 rows at a time, 8 accumulators.
 * Bit tiles: quant_avx2.c's.
 */
#include <immintrin.h>
#include <string.h>

#include "quant_internal.h"

static inline __m512i bcast_u8(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm512_set1_epi32((int32_t)((uint32_t)v ^ 0x80808080u));
}

/* m = max((float)(acc - 128 qsum) * sd, m) over 16 lanes: a NaN product
 * keeps m. */
static inline __m512 update(__m512i acc, __m512i corr, float sd, __m512 m) {
  return _mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, corr)),
                                     _mm512_set1_ps(sd)), m);
}

static void i8_tile_vnni(const int8_t *qp, const int32_t *qsum, const int8_t *const *rows,
                         const float *sd, int64_t nrows, int64_t kg, float *m) {
  const __m512i c0 = _mm512_slli_epi32(_mm512_loadu_si512((const void *)qsum), 7);
  const __m512i c1 = _mm512_slli_epi32(_mm512_loadu_si512((const void *)(qsum + 16)), 7);
  __m512 m0 = _mm512_loadu_ps(m), m1 = _mm512_loadu_ps(m + 16);
  int64_t r = 0;
  for (; r + 4 <= nrows; r += 4) {
    const int8_t *r0 = rows[r], *r1 = rows[r + 1], *r2 = rows[r + 2], *r3 = rows[r + 3];
    __m512i a00 = _mm512_setzero_si512(), a01 = a00, a10 = a00, a11 = a00;
    __m512i a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    for (int64_t g = 0; g < kg; g++) {
      const __m512i q0 = _mm512_loadu_si512((const void *)(qp + g * 128));
      const __m512i q1 = _mm512_loadu_si512((const void *)(qp + g * 128 + 64));
      __m512i d = bcast_u8(r0 + 4 * g);
      a00 = _mm512_dpbusd_epi32(a00, d, q0);
      a01 = _mm512_dpbusd_epi32(a01, d, q1);
      d = bcast_u8(r1 + 4 * g);
      a10 = _mm512_dpbusd_epi32(a10, d, q0);
      a11 = _mm512_dpbusd_epi32(a11, d, q1);
      d = bcast_u8(r2 + 4 * g);
      a20 = _mm512_dpbusd_epi32(a20, d, q0);
      a21 = _mm512_dpbusd_epi32(a21, d, q1);
      d = bcast_u8(r3 + 4 * g);
      a30 = _mm512_dpbusd_epi32(a30, d, q0);
      a31 = _mm512_dpbusd_epi32(a31, d, q1);
    }
    m0 = update(a00, c0, sd[r], m0);
    m1 = update(a01, c1, sd[r], m1);
    m0 = update(a10, c0, sd[r + 1], m0);
    m1 = update(a11, c1, sd[r + 1], m1);
    m0 = update(a20, c0, sd[r + 2], m0);
    m1 = update(a21, c1, sd[r + 2], m1);
    m0 = update(a30, c0, sd[r + 3], m0);
    m1 = update(a31, c1, sd[r + 3], m1);
  }
  for (; r < nrows; r++) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
    for (int64_t g = 0; g < kg; g++) {
      const __m512i d = bcast_u8(rows[r] + 4 * g);
      a0 = _mm512_dpbusd_epi32(a0, d, _mm512_loadu_si512((const void *)(qp + g * 128)));
      a1 = _mm512_dpbusd_epi32(a1, d, _mm512_loadu_si512((const void *)(qp + g * 128 + 64)));
    }
    m0 = update(a0, c0, sd[r], m0);
    m1 = update(a1, c1, sd[r], m1);
  }
  _mm512_storeu_ps(m, m0);
  _mm512_storeu_ps(m + 16, m1);
}

const lik_quant_kernels lik_quant_kernels_vnni = {"avx512-vnni", i8_tile_vnni,
                                                  lik_bits_tile_popcnt};
