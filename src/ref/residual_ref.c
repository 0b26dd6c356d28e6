/*
 * residual_ref.c — float64 reference of the residual codec and residual
 * MaxSim (see residual_ref.h): scalar, unblocked, the test oracle.
 */
#include "residual_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/residual.h"

void lik_ref_decode(const float *cent, int64_t d, const float *weights, int nbits,
                    lik_residual_layout layout, int64_t code, const uint8_t *res, int normalize,
                    double *out) {
  const int cpb = 8 / nbits;
  double ss = 0.0;
  for (int64_t k = 0; k < d; k++) {
    const unsigned b = lik_res_field(res[k / cpb], (int)(k % cpb), nbits, layout);
    out[k] = (double)cent[code * d + k] + (double)weights[b];
    ss += out[k] * out[k];
  }
  if (!normalize) return;
  const double n = fmax(sqrt(ss), LIK_NORM_EPS);
  for (int64_t k = 0; k < d; k++) out[k] /= n;
}

double lik_ref_maxsim_residual(const float *q, int64_t lq, const float *cent, int64_t d,
                               const float *weights, int nbits, lik_residual_layout layout,
                               const int32_t *codes, const uint8_t *res, int64_t len,
                               int normalize, int32_t *argmax) {
  double *x = (double *)malloc((size_t)(len * d + d) * sizeof(double)), *qs = x + len * d;
  const int64_t width = d * nbits / 8;
  for (int64_t t = 0; t < len; t++)
    lik_ref_decode(cent, d, weights, nbits, layout, codes[t], res + t * width, normalize,
                   x + t * d);
  double score = 0.0;
  for (int64_t s = 0; s < lq; s++) {
    double ss = 0.0;
    for (int64_t k = 0; k < d; k++) {
      qs[k] = q[s * d + k];
      ss += qs[k] * qs[k];
    }
    const double n = normalize ? fmax(sqrt(ss), LIK_NORM_EPS) : 1.0;
    double best = -INFINITY;
    int32_t arg = -1;
    for (int64_t t = 0; t < len; t++) {
      double v = 0.0;
      for (int64_t k = 0; k < d; k++) v += qs[k] / n * x[t * d + k];
      if (v > best) {
        best = v;
        arg = (int32_t)t;
      }
    }
    if (arg >= 0) score += best;
    if (argmax) argmax[s] = arg;
  }
  free(x);
  return score;
}

double lik_ref_plaid_approx(const float *cs, int64_t lq, int64_t ncent, const int32_t *codes,
                            int64_t len) {
  double score = 0.0;
  for (int64_t s = 0; s < lq; s++) {
    double best = -INFINITY;
    for (int64_t t = 0; t < len; t++)
      if (cs[s * ncent + codes[t]] > best) best = cs[s * ncent + codes[t]];
    if (best != -INFINITY) score += best;
  }
  return score;
}

int lik_ref_bucket(const float *cutoffs, int nbits, float v) {
  int b = 0;
  while (b < (1 << nbits) - 1 && cutoffs[b] < v) b++;
  return b;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double lik_ref_quantile(const float *v, int64_t n, double q) {
  double *s = (double *)malloc((size_t)n * sizeof(double));
  for (int64_t i = 0; i < n; i++) s[i] = v[i];
  qsort(s, (size_t)n, sizeof(double), cmp_double);
  const double pos = q * (double)(n - 1);
  const int64_t lo = (int64_t)floor(pos), hi = lo + 1 < n ? lo + 1 : n - 1;
  const double r = s[lo] + (pos - (double)lo) * (s[hi] - s[lo]);
  free(s);
  return r;
}
