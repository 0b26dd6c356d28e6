/*
 * pack_scalar.c — scalar widening + L2 normalisation of token rows: the
 * portable pack, and the widening the SIMD packs use for strided rows
 * (sk != 1; they normalise every row with their own norm, called with
 * normalize = 0 here).  The norm is fp32, summed in ascending k, and applied as a
 * multiply by 1 / max(||x||, 1e-12) (one division per token, not per element).
 */
#include <math.h>

#include "cpu_internal.h"

void lik_pack_row_scalar(const void *base, lik_dtype dt, int64_t off,
                         int64_t sk, int64_t d, int normalize, float *dst) {
  /* unswitched by dtype: a loop per dtype measured faster than one loop over
   * the loader's switch (fp64 never reaches the fp32 pack) */
  switch (dt) {
    case LIK_F16:
      for (int64_t k = 0; k < d; k++) dst[k] = lik_load_f32(base, LIK_F16, off + k * sk);
      break;
    case LIK_BF16:
      for (int64_t k = 0; k < d; k++) dst[k] = lik_load_f32(base, LIK_BF16, off + k * sk);
      break;
    default:
      for (int64_t k = 0; k < d; k++) dst[k] = lik_load_f32(base, LIK_F32, off + k * sk);
      break;
  }
  if (normalize) {
    float ss = 0.0f;
    for (int64_t k = 0; k < d; k++) ss += dst[k] * dst[k];
    float inv = 1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
    for (int64_t k = 0; k < d; k++) dst[k] *= inv;
  }
}

void lik_pack_portable(const lik_seqs *s, int64_t n, const int32_t *tok,
                       int64_t cnt, int normalize, float *dst) {
  for (int64_t i = 0; i < cnt; i++)
    lik_pack_row_scalar(s->data, s->dtype, lik_tok_off(s, n, tok[i]), s->sk,
                        s->dim, normalize, dst + i * s->dim);
}
