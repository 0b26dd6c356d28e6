/*
 * dtype.h — the host's scalar dtype conversions (fp16 / bf16 <-> fp32:
 * exact widening; round-to-nearest-even narrowing, NaN kept NaN) and its one
 * element loader and storer (lik_load_f64 / lik_load_f32, lik_store_f64:
 * element i of an array of any lik float dtype).  Header-only: the library and the command both use it.
 */
#ifndef LIK_CORE_DTYPE_H
#define LIK_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "lik.h"

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

/* Element i (an element offset, any sign) of an F32 / F64 / F16 / BF16 array
 * at base, widened exactly to double; any other dtype reads as F32.  The
 * bytes are copied, so base need not be aligned (file bytes: the command,
 * the index's .npy files); for an aligned array the copy is a plain load. */
static inline double lik_load_f64(const void *base, lik_dtype dt, int64_t i) {
  const char *p = (const char *)base;
  switch (dt) {
    case LIK_F64: {
      double v;
      memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case LIK_F16: {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      return lik_tr_f16_to_f32(h);
    }
    case LIK_BF16: {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      return lik_tr_bf16_to_f32(h);
    }
    default: {
      float v;
      memcpy(&v, p + 4 * i, 4);
      return v;
    }
  }
}

/* Stores v as element i of an F32 / F64 / F16 / BF16 array at base (any
 * other dtype: F32): F64 exact, F32 rounded to nearest, F16 / BF16 rounded
 * to fp32 and then to nearest even (as lik_tr_f32_to_f16 / _bf16).  base
 * is aligned to its dtype (every destination is an output or a buffer of
 * its own), so the stores are typed: with byte copies GCC 12 -O3 compiled
 * the backward's row stores differently (its finish_row 1264 -> 797
 * instructions), with typed ones as they were. */
static inline void lik_store_f64(void *base, lik_dtype dt, int64_t i, double v) {
  switch (dt) {
    case LIK_F64: ((double *)base)[i] = v; break;
    case LIK_F16: ((uint16_t *)base)[i] = lik_tr_f32_to_f16((float)v); break;
    case LIK_BF16: ((uint16_t *)base)[i] = lik_tr_f32_to_bf16((float)v); break;
    default: ((float *)base)[i] = (float)v; break;
  }
}

/* The same element as fp32 (F64 rounded to nearest; the others exact: the
 * compiler drops the float -> double -> float round trip). */
static inline float lik_load_f32(const void *base, lik_dtype dt, int64_t i) {
  return (float)lik_load_f64(base, dt, i);
}

#endif /* LIK_CORE_DTYPE_H */
