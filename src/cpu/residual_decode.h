/*
 * residual_decode.h — the CPU decoder of compressed tokens, shared by the
 * codec (codec.c) and the fused scorer (residual.c), so that both see the
 * same fp32 values:
 *
 *   x_hat[k] = centroid[code][k] + bucket_weights[bucket_k]     (fp32)
 *   normalised: x_hat * (1 / max(||x_hat||, 1e-12)), ||.||^2 summed in fp32
 *   in ascending k (as the dense packs, pack_scalar.c).
 *
 * The bit layout enters only through the decode table (lik_res_field).
 */
#ifndef LIK_CPU_RESIDUAL_DECODE_H
#define LIK_CPU_RESIDUAL_DECODE_H

#include <math.h>
#include <string.h>

#include "../core/dtype.h"
#include "../core/residual.h"

/* For every byte value, the bucket weights of its 8/nbits fields:
 * w[byte * cpb + i] is the weight of dimension p * cpb + i of byte p. */
typedef struct {
  int cpb;     /* fields per byte: 8 / nbits */
  int nbits;
  int colbert; /* layout LIK_RESIDUAL_COLBERT */
  float w[256 * 8];
  float wv[256]; /* the bucket weights by bucket index (zero past 2^nbits) */
} lik_res_table;

static inline void lik_res_table_init(lik_res_table *t, const lik_codec_view *v) {
  const int cpb = 8 / v->nbits;
  memset(t->wv, 0, sizeof t->wv);
  for (int b = 0; b < (1 << v->nbits); b++)
    t->wv[b] = lik_load_f32(v->weights, v->weights_dtype, b * v->weights_s);
  t->cpb = cpb;
  t->nbits = v->nbits;
  t->colbert = v->layout == LIK_RESIDUAL_COLBERT;
  for (int byte = 0; byte < 256; byte++)
    for (int i = 0; i < cpb; i++)
      t->w[byte * cpb + i] = t->wv[lik_res_field((uint8_t)byte, i, v->nbits, v->layout)];
}

/* Centroid c as fp32 into dst[dim]. */
static inline void lik_res_centroid(const lik_codec_view *v, int64_t c, float *dst) {
  for (int64_t k = 0; k < v->dim; k++)
    dst[k] = lik_load_f32(v->cent, v->cent_dtype, c * v->cent_sc + k * v->cent_sk);
}

/* dst[k] = cent[k] + weight of dimension k (residual bytes res[p * sp]). */
static inline void lik_res_decode(const lik_res_table *t, int64_t width, const float *cent,
                                  const uint8_t *res, int64_t sp, float *dst) {
  const int cpb = t->cpb;
  for (int64_t p = 0; p < width; p++) {
    const float *w = t->w + res[p * sp] * cpb;
    for (int i = 0; i < cpb; i++) dst[p * cpb + i] = cent[p * cpb + i] + w[i];
  }
}

/* 1 / max(||x||, 1e-12), the norm in fp32 summed in ascending k. */
static inline float lik_res_inv_norm(const float *x, int64_t d) {
  float ss = 0.0f;
  for (int64_t k = 0; k < d; k++) ss += x[k] * x[k];
  return 1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
}

#endif /* LIK_CPU_RESIDUAL_DECODE_H */
