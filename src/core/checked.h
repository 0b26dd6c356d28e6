/*
 * checked.h — overflow-checked size arithmetic.  Every size the library
 * computes from a caller's numbers (shapes, strides, lengths, counts) goes
 * through these: each returns nonzero when the exact result does not fit,
 * and the caller then fails with a message naming the sizes (never wraps).
 */
#ifndef LIK_CHECKED_H
#define LIK_CHECKED_H

#include <stddef.h>
#include <stdint.h>

/* *out = a * b; nonzero on int64 overflow. */
static inline int lik_mul_i64(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

/* *out = a + b; nonzero on int64 overflow. */
static inline int lik_add_i64(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

/* *out = a - b; nonzero on int64 overflow. */
static inline int lik_sub_i64(int64_t a, int64_t b, int64_t *out) {
  return __builtin_sub_overflow(a, b, out);
}

/* *out = n elements of elem bytes, as a size_t; nonzero when n < 0 or the
 * byte count does not fit. */
static inline int lik_bytes(int64_t n, size_t elem, size_t *out) {
  return n < 0 || __builtin_mul_overflow((uint64_t)n, elem, out);
}

/* *out = a x b elements of elem bytes, as a size_t; nonzero when a or b < 0
 * or the byte count does not fit. */
static inline int lik_bytes2(int64_t a, int64_t b, size_t elem, size_t *out) {
  int64_t n;
  return a < 0 || b < 0 || lik_mul_i64(a, b, &n) || lik_bytes(n, elem, out);
}

#endif /* LIK_CHECKED_H */
