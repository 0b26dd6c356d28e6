/*
 * maxsim_f64.c — the F64 path: plain scalar double loops (it exists for
 * gradient checking, not speed).  Same semantics and work split as the fp32
 * driver: one task owns whole outputs, per-token strict-> max over doc tokens
 * ascending, score summed over valid query tokens ascending (in double,
 * stored as fp64 scores, or rounded once to fp32 scores).  Normalisation in fp64: q / max(||q||, 1e-12) applied to
 * the query token, the dot divided by max(||d||, 1e-12).  A valid token whose
 * similarity is -inf wins a max nothing else won (lik.h).
 */
#include <math.h>

#include "../core/checked.h"
#include "cpu_internal.h"

#define F64_BLOCK 16

typedef struct {
  const lik_problem *p;
  lik_cpu_out o;
  int64_t nout, ncand;
  size_t bytes;
  char *scratch; /* one block per thread: thread t's at scratch + t * stride */
  size_t stride;
} f64drv;

static double norm_div(const double *x, int64_t sk, int64_t d) {
  double ss = 0.0;
  for (int64_t k = 0; k < d; k++) ss += x[k * sk] * x[k * sk];
  double n = sqrt(ss);
  return n > LIK_NORM_EPS ? n : LIK_NORM_EPS;
}

static void pair_f64(const f64drv *g, int64_t i, int64_t c, double *qrow,
                     double *dnorm) {
  const lik_problem *p = g->p;
  const lik_seqs *Q = &p->q, *D = &p->d;
  const double *qb = (const double *)Q->data, *db = (const double *)D->data;
  const int64_t d = Q->dim;
  int64_t qi = lik_cpu_qidx(p, i, c), di = lik_cpu_didx(p, i, c);
  int64_t lq = lik_seq_len(Q, qi), ld = lik_seq_len(D, di);
  for (int64_t t = 0; t < ld; t++)
    if (lik_mask_valid(&p->d_mask, D, di, t))
      dnorm[t] = p->call.normalize ? norm_div(db + lik_token_offset(D, di, t), D->sk, d) : 1.0;
  const lik_out *out = &g->o.out;
  const int64_t j = c - g->o.cbeg;
  int32_t *a = out->argmax ? out->argmax + i * out->argmax_si + j * out->argmax_sj : NULL;
  if (a)
    for (int64_t s = 0; s < Q->len; s++) a[s * out->argmax_ss] = -1;
  double score = 0.0;
  for (int64_t s = 0; s < lq; s++) {
    if (!lik_mask_valid(&p->q_mask, Q, qi, s)) continue;
    const double *x = qb + lik_token_offset(Q, qi, s);
    double qn = p->call.normalize ? norm_div(x, Q->sk, d) : 1.0;
    for (int64_t k = 0; k < d; k++) qrow[k] = x[k * Q->sk] / qn;
    double best = -INFINITY;
    int32_t arg = -1;
    for (int64_t t = 0; t < ld; t++) {
      if (!lik_mask_valid(&p->d_mask, D, di, t)) continue;
      const double *y = db + lik_token_offset(D, di, t);
      double dot = 0.0;
      for (int64_t k = 0; k < d; k++) dot += qrow[k] * y[k * D->sk];
      if (p->call.normalize) dot /= dnorm[t];
      if (dot > best || (arg < 0 && dot == -INFINITY)) { best = dot; arg = (int32_t)t; }
    }
    if (arg >= 0) score += best;
    if (a) a[s * out->argmax_ss] = arg;
  }
  const int64_t at = i * out->score_si + j * out->score_sj;
  if (out->scores_f64)
    out->scores_f64[at] = score;
  else
    out->scores[at] = (float)score;
}

static void task_f64(void *ctx, int tid, int64_t t) {
  const f64drv *g = (const f64drv *)ctx;
  double *qrow = (double *)(g->scratch + (size_t)tid * g->stride);
  double *dnorm = qrow + g->p->q.dim;
  int64_t total = g->nout * g->ncand;
  for (int64_t f = t * F64_BLOCK; f < total && f < (t + 1) * F64_BLOCK; f++)
    pair_f64(g, f / g->ncand, g->o.cbeg + f % g->ncand, qrow, dnorm);
}

lik_status lik_cpu_run_f64(const lik_problem *p, const lik_cpu_out *o) {
  f64drv g;
  g.p = p;
  g.o = *o;
  g.nout = lik_cpu_out_rows(p);
  g.ncand = o->cend - o->cbeg;
  if (g.nout <= 0 || g.ncand <= 0) return LIK_OK;
  int64_t ntasks = (g.nout * g.ncand + F64_BLOCK - 1) / F64_BLOCK;
  int64_t T = p->call.threads >= 1 ? p->call.threads : 1;
  if (T > ntasks) T = ntasks;
  if (T > 256) T = 256;
  /* d, Ld <= INT32_MAX (validated): the sum fits */
  if (lik_bytes(p->q.dim + p->d.len + 1, sizeof(double), &g.bytes))
    return lik_fail(LIK_ERR_ALLOC, "CPU scratch: d=%lld + Ld=%lld doubles exceed the address space",
                    (long long)p->q.dim, (long long)p->d.len);
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);
  const lik_status st = lik_parallel_run_ws(&ws, (int)T, ntasks, g.bytes, &g.scratch, &g.stride,
                                            task_f64, &g, "CPU F64 forward (d + Ld doubles)");
  lik_ws_close(&ws);
  return st;
}
