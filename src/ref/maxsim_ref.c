/*
 * maxsim_ref.c — float64 reference of MaxSim and its backward (see
 * maxsim_ref.h): scalar, unblocked, the test oracle.
 */
#include "maxsim_ref.h"

#include <math.h>

#include "../core/problem.h" /* LIK_NORM_EPS */

static const double *row_of(const lik_ref_seqs *S, int64_t n, int64_t l) {
  return S->x + (S->offsets[n] + l) * S->dim;
}

static int row_valid(const lik_ref_seqs *S, int64_t n, int64_t l) {
  return !S->mask || S->mask[S->offsets[n] + l] != 0;
}

static int64_t seq_len(const lik_ref_seqs *S, int64_t n) {
  return S->offsets[n + 1] - S->offsets[n];
}

/* ||x|| (unclamped) */
static double norm_of(const double *x, int64_t dim) {
  double ss = 0.0;
  for (int64_t k = 0; k < dim; k++) ss += x[k] * x[k];
  return sqrt(ss);
}

/* The divisor of normalisation: max(||x||, eps), or 1 without it. */
static double divisor(const double *x, int64_t dim, int normalize) {
  if (!normalize) return 1.0;
  const double n = norm_of(x, dim);
  return n > LIK_NORM_EPS ? n : LIK_NORM_EPS;
}

double lik_ref_sim(const lik_ref_seqs *Q, int64_t qi, int64_t s, const lik_ref_seqs *D,
                   int64_t dj, int64_t t, int normalize, double *absum) {
  const double *q = row_of(Q, qi, s), *d = row_of(D, dj, t);
  const double qd = divisor(q, Q->dim, normalize), dd = divisor(d, D->dim, normalize);
  double dot = 0.0, as = 0.0;
  for (int64_t k = 0; k < Q->dim; k++) {
    const double v = (q[k] / qd) * (d[k] / dd);
    dot += v;
    as += fabs(v);
  }
  if (absum) *absum = as;
  return dot;
}

double lik_ref_maxsim_pair(const lik_ref_seqs *Q, int64_t qi, const lik_ref_seqs *D, int64_t dj,
                           int normalize, int32_t *argmax, double *scale) {
  const int64_t lq = seq_len(Q, qi), ld = seq_len(D, dj);
  double score = 0.0, sc = 0.0;
  for (int64_t s = 0; s < lq; s++) {
    double best = -INFINITY, top_abs = 0.0;
    int64_t arg = -1;
    if (row_valid(Q, qi, s))
      for (int64_t t = 0; t < ld; t++) {
        if (!row_valid(D, dj, t)) continue;
        double as;
        const double v = lik_ref_sim(Q, qi, s, D, dj, t, normalize, &as);
        if (v > best || (arg < 0 && v == -INFINITY)) {
          best = v;
          arg = t;
        }
        if (as > top_abs) top_abs = as;
      }
    if (arg >= 0) {
      score += best;
      sc += top_abs;
    }
    if (argmax) argmax[s] = (int32_t)arg;
  }
  if (scale) *scale = sc;
  return score;
}

/* out += g * d<x̂, ŷ> / dx, where sim = <x̂, ŷ> and x̂ = x / max(||x||, eps)
 * (x itself without normalize): the Jacobian (ŷ - x̂ sim) / ||x|| above the
 * clamp, ŷ / eps below it; scale (NULL: skipped) += the terms' |.|, with
 * sim_abs = Σ|x̂_k ŷ_k| standing for sim (a rounded sim is off by a fraction
 * of sim_abs, not of |sim|: the dot cancels). */
static void add_grad(const double *x, const double *y, int64_t dim, double sim, double sim_abs,
                     int normalize, double g, double *out, double *scale) {
  const double n = normalize ? norm_of(x, dim) : 1.0, yd = divisor(y, dim, normalize);
  const int clamped = normalize && !(n > LIK_NORM_EPS);
  for (int64_t k = 0; k < dim; k++) {
    const double yh = y[k] / yd;
    const double xh = normalize && !clamped ? x[k] / n : 0.0;
    const double div = clamped ? LIK_NORM_EPS : n;
    if (out) out[k] += g * (yh - xh * sim) / div;
    if (scale) scale[k] += fabs(g) * (fabs(yh) + fabs(xh) * sim_abs) / div;
  }
}

void lik_ref_maxsim_pair_backward(const lik_ref_seqs *Q, int64_t qi, const lik_ref_seqs *D,
                                  int64_t dj, int normalize, const int32_t *argmax, double g,
                                  const lik_ref_grads *out) {
  const int64_t lq = seq_len(Q, qi), dim = Q->dim;
  for (int64_t s = 0; s < lq; s++) {
    const int64_t t = argmax[s];
    if (t < 0 || !row_valid(Q, qi, s)) continue;
    const double *q = row_of(Q, qi, s), *d = row_of(D, dj, t);
    double sim_abs;
    const double sim = lik_ref_sim(Q, qi, s, D, dj, t, normalize, &sim_abs);
    const int64_t rq = (Q->offsets[qi] + s) * dim, rd = (D->offsets[dj] + t) * dim;
    add_grad(q, d, dim, sim, sim_abs, normalize, g, out->gq ? out->gq + rq : NULL,
             out->gq_scale ? out->gq_scale + rq : NULL);
    add_grad(d, q, dim, sim, sim_abs, normalize, g, out->gd ? out->gd + rd : NULL,
             out->gd_scale ? out->gd_scale + rd : NULL);
  }
}
