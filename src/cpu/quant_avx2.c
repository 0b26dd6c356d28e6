/*
 * quant_avx2.c — int8 tile on AVX2 (quant_internal.h): d * q as
 * maddubs(|d|, sign(q, d)) with d a row's 4 features broadcast (|d| <= 128,
 * |q| <= 127: each pair sum <= 32512, no saturation), widened by madd(., 1);
 * 32 lanes in four ymm, one row at a time.  Also the bit tile of both x86
 * tables (hardware popcnt: -mavx2 implies it).
 */
#include <immintrin.h>
#include <string.h>

#include "quant_internal.h"

static inline __m256i bcast(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

static inline __m256i mac(__m256i acc, __m256i dabs, __m256i d, __m256i q, __m256i ones) {
  return _mm256_add_epi32(acc,
                          _mm256_madd_epi16(_mm256_maddubs_epi16(dabs, _mm256_sign_epi8(q, d)), ones));
}

/* m = max((float)acc * sd, m): a NaN product keeps m */
static inline __m256 update(__m256i acc, __m256 sd, __m256 m) {
  return _mm256_max_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc), sd), m);
}

static void i8_tile_avx2(const int8_t *qp, const int32_t *qsum, const int8_t *const *rows,
                         const float *sd, int64_t nrows, int64_t kg, float *m) {
  (void)qsum;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 m0 = _mm256_loadu_ps(m), m1 = _mm256_loadu_ps(m + 8);
  __m256 m2 = _mm256_loadu_ps(m + 16), m3 = _mm256_loadu_ps(m + 24);
  for (int64_t r = 0; r < nrows; r++) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t g = 0; g < kg; g++) {
      const __m256i d = bcast(rows[r] + 4 * g), da = _mm256_abs_epi8(d);
      const int8_t *q = qp + g * 128;
      a0 = mac(a0, da, d, _mm256_loadu_si256((const __m256i *)q), ones);
      a1 = mac(a1, da, d, _mm256_loadu_si256((const __m256i *)(q + 32)), ones);
      a2 = mac(a2, da, d, _mm256_loadu_si256((const __m256i *)(q + 64)), ones);
      a3 = mac(a3, da, d, _mm256_loadu_si256((const __m256i *)(q + 96)), ones);
    }
    const __m256 s = _mm256_set1_ps(sd[r]);
    m0 = update(a0, s, m0);
    m1 = update(a1, s, m1);
    m2 = update(a2, s, m2);
    m3 = update(a3, s, m3);
  }
  _mm256_storeu_ps(m, m0);
  _mm256_storeu_ps(m + 8, m1);
  _mm256_storeu_ps(m + 16, m2);
  _mm256_storeu_ps(m + 24, m3);
}

void lik_bits_tile_popcnt(const uint64_t *qw, const uint64_t *const *rows, int64_t nrows,
                          int64_t nw, int64_t d, float *m) {
  lik_bits_tile_body(qw, rows, nrows, nw, d, m); /* popcnt: one instruction here */
}

const lik_quant_kernels lik_quant_kernels_avx2 = {"avx2", i8_tile_avx2, lik_bits_tile_popcnt};
