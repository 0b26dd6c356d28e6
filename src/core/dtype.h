/*
 * dtype.h — scalar dtype conversions (fp16 / bf16 <-> fp32)
 * (exact widening; round-to-nearest-even narrowing, NaN kept NaN).
 */
#ifndef LIK_CORE_DTYPE_H
#define LIK_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

static inline float lik_tr_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint32_t lik_tr_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static inline float lik_tr_bf16_to_f32(uint16_t h) { return lik_tr_bits_f32((uint32_t)h << 16); }

static inline uint16_t lik_tr_f32_to_bf16(float f) {
  uint32_t u = lik_tr_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float lik_tr_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) { /* zero or subnormal: man * 2^-24 is exact in fp32 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return lik_tr_bits_f32(sign | 0x7f800000u | (man << 13));
  return lik_tr_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t lik_tr_f32_to_f16(float f) {
  const uint32_t u = lik_tr_f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);          /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);         /* overflow (RNE) -> inf */
  if (a < 0x38800000u) {                                            /* subnormal or zero */
    /* value / 2^-24 rounded to nearest even; exact in fp32 arithmetic */
    const float v = lik_tr_bits_f32(a) * 16777216.0f;               /* * 2^24 */
    float r = (float)(int32_t)v;
    const float frac = v - r;
    if (frac > 0.5f || (frac == 0.5f && ((int32_t)r & 1))) r += 1.0f;
    return (uint16_t)(sign | (uint16_t)(int32_t)r);
  }
  uint32_t m = a + 0xc8000fffu + ((a >> 13) & 1u); /* rebias exponent (-112<<23), round */
  return (uint16_t)(sign | (uint16_t)(m >> 13));
}

#endif /* LIK_CORE_DTYPE_H */
