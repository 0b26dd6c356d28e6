/*
 * residual_avx512.c — the residual scorer's kernels (residual_kernel.inc)
 * compiled for AVX-512 (this file's name gives it -mavx512f/vl/bw -mfma),
 * and a token-norm kernel that decodes the residual in registers.
 */
#if defined(__x86_64__)

#include <immintrin.h>

#define KN(x) res_avx512_##x
#define VW 16
#define OWN_INV_NORM
#include "residual_kernel.inc"

/* The bits of every byte reversed (a COLBERT byte to the LIK order). */
static inline __m512i reverse_bits(__m512i b) {
  const __m512i rev_lo = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15));
  const __m512i rev_hi = _mm512_slli_epi16(rev_lo, 4); /* nibble values < 16: no carry */
  const __m512i nib = _mm512_set1_epi8(0x0f);
  const __m512i lo = _mm512_and_si512(b, nib);
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), nib);
  return _mm512_or_si512(_mm512_shuffle_epi8(rev_hi, lo), _mm512_shuffle_epi8(rev_lo, hi));
}

/* inv_norm, the residual decoded in registers: 16 dimensions per step, each
 * bucket index shifted out of its dword and looked up in a register
 * (nbits <= 4) or gathered (nbits = 8); the squares summed per lane (k % 16),
 * then reduced in a fixed tree. */
static float inv_norm_avx512(const lik_res_table *w, int64_t width, const float *c,
                             const uint8_t *res, int64_t sp) {
  const int nbits = w->nbits, lg = nbits == 1 ? 0 : nbits == 2 ? 1 : nbits == 4 ? 2 : 3;
  const int64_t d = width * 8 / nbits;
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i fmask = _mm512_set1_epi32((1 << nbits) - 1);
  const __m512i c31 = _mm512_set1_epi32(31);
  const __m512 wvec = _mm512_loadu_ps(w->wv);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < width; b0 += 64) {
    const int64_t nb = width - b0 < 64 ? width - b0 : 64;
    const __mmask64 bm = nb == 64 ? ~(__mmask64)0 : ((__mmask64)1 << nb) - 1;
    __m512i bytes;
    if (sp == 1) {
      bytes = _mm512_maskz_loadu_epi8(bm, res + b0);
    } else { /* strided bytes: gathered first, then the same arithmetic */
      uint8_t buf[64];
      for (int64_t i = 0; i < nb; i++) buf[i] = res[(b0 + i) * sp];
      bytes = _mm512_maskz_loadu_epi8(bm, buf);
    }
    if (w->colbert) bytes = reverse_bits(bytes);
    const int64_t k0 = b0 * 8 / nbits;
    for (int64_t g = 0; g < nb * 8 / nbits; g += 16) {
      /* bit position of dimension k0 + g + lane within the chunk */
      const __m512i pos = _mm512_slli_epi32(_mm512_add_epi32(lanes, _mm512_set1_epi32((int)g)), lg);
      const __m512i dw = _mm512_permutexvar_epi32(_mm512_srli_epi32(pos, 5), bytes);
      const __m512i idx = _mm512_and_si512(_mm512_srlv_epi32(dw, _mm512_and_si512(pos, c31)), fmask);
      const __m512 r = nbits == 8 ? _mm512_i32gather_ps(idx, w->wv, 4) : _mm512_permutexvar_ps(idx, wvec);
      const int64_t left = d - k0 - g;
      const __mmask16 km = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
      const __m512 x = _mm512_maskz_add_ps(km, _mm512_maskz_loadu_ps(km, c + k0 + g), r);
      acc = _mm512_fmadd_ps(x, x, acc);
    }
  }
  const float ss = _mm512_reduce_add_ps(acc);
  return 1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
}

const lik_res_kernels lik_res_kernels_avx512 = {res_avx512_byte_table, res_avx512_centroid_row,
                                                inv_norm_avx512, res_avx512_adc,
                                                res_avx512_max_rows,
    res_avx512_centroid_rows4, res_avx512_decode};

#else
typedef int lik_residual_avx512_unused;
#endif
