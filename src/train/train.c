/*
 * train.c — public entry points of the training and packed-layout calls
 * (lik.h, section "training and packed layouts"): validate once, describe the
 * call as a lik_problem (+ lik_bw for backward), run it on the CPU (the
 * packed forwards on CUDA too, through lik_cuda_maxsim).
 */
#include <stdlib.h>
#include <string.h>

#include "../validate.h"
#include "train_internal.h"

/* ---- shared checks --------------------------------------------------------- */

/* Devices of every tensor of a call; the backward calls run on the CPU only
 * (the packed forwards also run on CUDA: packed_forward). */
static lik_status check_cpu(lik_problem *p, const lik_tensor *const *ts,
                            const char *const *names, int n) {
  lik_status st = lik_check_devices(ts, names, n, &p->device, &p->device_id);
  if (st) return st;
  if (p->device == LIK_CUDA)
    return lik_fail(LIK_ERR_UNSUPPORTED,
                    "tensors are on CUDA but the backward calls of lik have a CPU backend "
                    "only (the forwards run on CUDA)");
  return LIK_OK;
}

static lik_backward strategy_of(const lik_options *opts) {
  return opts ? opts->backward : LIK_BACKWARD_AUTO;
}

static lik_status check_strategy(const lik_options *opts) {
  const lik_backward b = strategy_of(opts);
  if (b != LIK_BACKWARD_AUTO && b != LIK_BACKWARD_UNIFIED && b != LIK_BACKWARD_LOWMEM)
    return lik_fail(LIK_ERR_VALUE, "opts->backward: %d is not a lik_backward value", (int)b);
  return LIK_OK;
}

/* A gradient output: like its input (dtype, shape), each element written once. */
static lik_status check_grad(const lik_tensor *g, const char *name, const lik_tensor *like) {
  lik_status st = lik_check_output(g, name, like->dtype, like->ndim, like->shape);
  return st ? st : lik_check_no_overlap(g, name);
}

/* grad_scores: F32 or F64 with the scores' shape. */
static lik_status check_grad_scores(const lik_tensor *gs, int ndim, const int64_t *grid) {
  if (!gs) return lik_fail(LIK_ERR_NULL, "grad_scores: is NULL");
  lik_status st = lik_check_tensor(gs, "grad_scores", 0, LIK_MAX_DIMS);
  if (st) return st;
  if (gs->dtype != LIK_F32 && gs->dtype != LIK_F64)
    return lik_fail(LIK_ERR_DTYPE, "grad_scores: dtype %s, expected float32 or float64",
                    lik_dtype_name(gs->dtype));
  return lik_check_output(gs, "grad_scores", gs->dtype, ndim, grid);
}

static void fill_grads(lik_bw *bw, const lik_tensor *grad_Q, const lik_tensor *grad_D) {
  if (grad_Q) {
    bw->gq = lik_seqs_from(grad_Q);
    bw->gq.offsets = bw->p.q.offsets;
    bw->gq.count = bw->p.q.count;
    bw->gq.len = bw->p.q.len;
    if (bw->p.q.offsets.data) bw->gq.sn = 0;
  }
  if (grad_D) {
    bw->gd = lik_seqs_from(grad_D);
    bw->gd.offsets = bw->p.d.offsets;
    bw->gd.count = bw->p.d.count;
    bw->gd.len = bw->p.d.len;
    if (bw->p.d.offsets.data) bw->gd.sn = 0;
  }
}

/* ---- padded layouts: backward ---------------------------------------------- */

/* Shared by lik_maxsim_backward and lik_maxsim_pairs_backward once the layout
 * (pairing, ncand, grid) is known. */
static lik_status padded_backward(lik_bw *bw, const lik_tensor *Q, const lik_tensor *D,
                                  const lik_tensor *q_mask, const lik_tensor *d_mask,
                                  const lik_tensor *argmax, const lik_tensor *grad_scores,
                                  const lik_options *opts, lik_tensor *grad_Q,
                                  lik_tensor *grad_D, int ndim, const int64_t *grid, int has_i,
                                  int has_j) {
  lik_status st;
  lik_problem *p = &bw->p;
  if ((st = check_strategy(opts))) return st;
  if (q_mask && (st = lik_check_mask(q_mask, "q_mask", Q->ndim - 1, Q->shape))) return st;
  if (d_mask && (st = lik_check_mask(d_mask, "d_mask", D->ndim - 1, D->shape))) return st;
  if (!argmax) return lik_fail(LIK_ERR_NULL, "argmax: is NULL (pass the forward's argmax)");
  int64_t ashape[LIK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) ashape[i] = grid[i];
  ashape[ndim] = Q->shape[Q->ndim - 2];
  if ((st = lik_check_output(argmax, "argmax", LIK_I32, ndim + 1, ashape))) return st;
  if ((st = check_grad_scores(grad_scores, ndim, grid))) return st;
  if (grad_Q && (st = check_grad(grad_Q, "grad_Q", Q))) return st;
  if (grad_D && (st = check_grad(grad_D, "grad_D", D))) return st;
  const lik_tensor *ts[] = {Q, D, q_mask, d_mask, argmax, grad_scores, grad_Q, grad_D};
  const char *names[] = {"Q", "D", "q_mask", "d_mask", "argmax", "grad_scores", "grad_Q",
                         "grad_D"};
  if ((st = check_cpu(p, ts, names, 8))) return st;
  p->q = lik_seqs_from(Q);
  p->d = lik_seqs_from(D);
  p->q_mask = lik_mask_from(q_mask);
  p->d_mask = lik_mask_from(d_mask);
  lik_fill_options(p, opts);
  p->argmax = (int32_t *)argmax->data;
  p->argmax_si = has_i ? argmax->strides[0] : 0;
  p->argmax_sj = has_j ? argmax->strides[ndim - 1] : 0;
  p->argmax_ss = argmax->strides[ndim];
  bw->gs = grad_scores->data;
  bw->gs_dtype = grad_scores->dtype;
  bw->gs_si = has_i ? grad_scores->strides[0] : 0;
  bw->gs_sj = has_j ? grad_scores->strides[ndim - 1] : 0;
  fill_grads(bw, grad_Q, grad_D);
  return lik_cpu_maxsim_backward(bw, strategy_of(opts));
}

lik_status lik_maxsim_backward(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *q_mask,
                               const lik_tensor *d_mask, const lik_tensor *argmax,
                               const lik_tensor *grad_scores, const lik_options *opts,
                               lik_tensor *grad_Q, lik_tensor *grad_D) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 3, 2, 4))) return st;
  lik_bw bw;
  memset(&bw, 0, sizeof bw);
  int64_t grid[2];
  int ndim, has_i, has_j;
  if ((st = lik_layout_of(Q, D, &bw.p, grid, &ndim, &has_i, &has_j))) return st;
  return padded_backward(&bw, Q, D, q_mask, d_mask, argmax, grad_scores, opts, grad_Q, grad_D,
                         ndim, grid, has_i, has_j);
}

lik_status lik_maxsim_pairs_backward(const lik_tensor *Q, const lik_tensor *D,
                                     const lik_tensor *q_mask, const lik_tensor *d_mask,
                                     const lik_tensor *argmax, const lik_tensor *grad_scores,
                                     const lik_options *opts, lik_tensor *grad_Q,
                                     lik_tensor *grad_D) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 3, 3, 3, 3))) return st;
  if (D->shape[0] != Q->shape[0])
    return lik_fail(LIK_ERR_SHAPE, "D: batch B=%lld does not match Q's B=%lld",
                    (long long)D->shape[0], (long long)Q->shape[0]);
  lik_bw bw;
  memset(&bw, 0, sizeof bw);
  bw.p.pairing = LIK_PAIRING_KD; /* K = 1 */
  bw.p.ncand = 1;
  const int64_t grid[1] = {Q->shape[0]};
  return padded_backward(&bw, Q, D, q_mask, d_mask, argmax, grad_scores, opts, grad_Q, grad_D,
                         1, grid, 1, 0);
}

/* ---- packed layouts ----------------------------------------------------------- */

/* cu_seqlens: 1-D I32/I64 [N+1], starts at 0, non-decreasing, last == rows.
 * The values are checked (and *maxlen found) on the host only: on CUDA they
 * stay on the device (no copy, no sync) and *maxlen is -1. */
static lik_status check_cu(const lik_tensor *cu, const char *name, int64_t rows,
                           const char *rows_name, int on_host, lik_index *out,
                           int64_t *count, int64_t *maxlen) {
  lik_status st;
  if (!cu) return lik_fail(LIK_ERR_NULL, "%s: is NULL", name);
  if ((st = lik_check_tensor(cu, name, 1, 1))) return st;
  if (cu->dtype != LIK_I32 && cu->dtype != LIK_I64)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s, expected int32 or int64", name,
                    lik_dtype_name(cu->dtype));
  if (cu->shape[0] < 1)
    return lik_fail(LIK_ERR_SHAPE, "%s: has 0 entries, expected N+1 >= 1", name);
  out->data = cu->data;
  out->dtype = cu->dtype;
  out->stride = cu->strides[0];
  const int64_t n = cu->shape[0];
  *count = n - 1;
  *maxlen = -1;
  if (!on_host) return LIK_OK;
  int64_t prev = lik_index_at(out, 0), m = 0;
  if (prev != 0)
    return lik_fail(LIK_ERR_VALUE, "%s: %s[0]=%lld, must start at 0", name, name,
                    (long long)prev);
  for (int64_t i = 1; i < n; i++) {
    const int64_t v = lik_index_at(out, i);
    if (v < prev)
      return lik_fail(LIK_ERR_VALUE, "%s: %s[%lld]=%lld < %s[%lld]=%lld, must be non-decreasing",
                      name, name, (long long)i, (long long)v, name, (long long)(i - 1),
                      (long long)prev);
    if (v - prev > m) m = v - prev;
    prev = v;
  }
  if (prev != rows)
    return lik_fail(LIK_ERR_VALUE, "%s: last entry %s[%lld]=%lld does not equal %s=%lld", name,
                    name, (long long)(n - 1), (long long)prev, rows_name, (long long)rows);
  *maxlen = m;
  return LIK_OK;
}

/* Pair indices: 1-D I32/I64 [P], every value in [0, limit) (checked on the
 * host only, like cu_seqlens). */
static lik_status check_pairs(const lik_tensor *t, const char *name, int64_t limit,
                              const char *limit_name, int on_host, lik_index *out) {
  lik_status st;
  if (!t) return lik_fail(LIK_ERR_NULL, "%s: is NULL", name);
  if ((st = lik_check_tensor(t, name, 1, 1))) return st;
  if (t->dtype != LIK_I32 && t->dtype != LIK_I64)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s, expected int32 or int64", name,
                    lik_dtype_name(t->dtype));
  out->data = t->data;
  out->dtype = t->dtype;
  out->stride = t->strides[0];
  for (int64_t p = 0; on_host && p < t->shape[0]; p++) {
    const int64_t v = lik_index_at(out, p);
    if (v < 0 || v >= limit)
      return lik_fail(LIK_ERR_VALUE, "%s: %s[%lld]=%lld is out of range [0, %s=%lld)", name,
                      name, (long long)p, (long long)v, limit_name, (long long)limit);
  }
  return LIK_OK;
}

/* The common part of the packed calls: Q, D, cu_seqlens, masks, pairs. */
typedef struct {
  int64_t nq, nd, lq_max, ld_max, npairs;
} packed_dims;

static lik_status packed_problem(lik_problem *p, packed_dims *pd, const lik_tensor *Q,
                                 const lik_tensor *D, const lik_tensor *cu_q,
                                 const lik_tensor *cu_d, const lik_tensor *pair_q,
                                 const lik_tensor *pair_d, const lik_tensor *q_mask,
                                 const lik_tensor *d_mask, const lik_options *opts) {
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 2, 2, 2))) return st;
  {
    const lik_tensor *ts[] = {Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask};
    const char *names[] = {"Q",      "D",      "cu_seqlens_q", "cu_seqlens_d",
                           "pair_q", "pair_d", "q_mask",       "d_mask"};
    if ((st = lik_check_devices(ts, names, 8, &p->device, &p->device_id))) return st;
  }
  const int host = p->device != LIK_CUDA;
  lik_index iq = {0}, id = {0};
  if ((st = check_cu(cu_q, "cu_seqlens_q", Q->shape[0], "Q rows", host, &iq, &pd->nq,
                     &pd->lq_max)) ||
      (st = check_cu(cu_d, "cu_seqlens_d", D->shape[0], "D rows", host, &id, &pd->nd,
                     &pd->ld_max)))
    return st;
  const int64_t mq = opts ? opts->max_seqlen_q : 0;
  if (mq < 0)
    return lik_fail(LIK_ERR_VALUE, "opts.max_seqlen_q: %lld, must be >= 0 (0: unknown)",
                    (long long)mq);
  if (host && mq > 0 && mq < pd->lq_max)
    return lik_fail(LIK_ERR_VALUE,
                    "opts.max_seqlen_q: %lld is shorter than the longest query (%lld tokens in "
                    "cu_seqlens_q)",
                    (long long)mq, (long long)pd->lq_max);
  if (q_mask && (st = lik_check_mask(q_mask, "q_mask", 1, Q->shape))) return st;
  if (d_mask && (st = lik_check_mask(d_mask, "d_mask", 1, D->shape))) return st;
  p->pairing = LIK_PAIRING_CROSS;
  p->ncand = pd->nd;
  if (pair_q || pair_d) {
    if ((st = check_pairs(pair_q, "pair_q", pd->nq, "Nq", host, &p->pair_q)) ||
        (st = check_pairs(pair_d, "pair_d", pd->nd, "Nd", host, &p->pair_d)))
      return st;
    if (pair_q->shape[0] != pair_d->shape[0])
      return lik_fail(LIK_ERR_SHAPE, "pair_d: has %lld pairs but pair_q has %lld",
                      (long long)pair_d->shape[0], (long long)pair_q->shape[0]);
    p->pairing = LIK_PAIRING_LIST;
    p->ncand = pd->npairs = pair_q->shape[0];
  }
  p->q = lik_seqs_from(Q);
  p->q.offsets = iq;
  p->q.count = pd->nq;
  p->q.len = pd->lq_max;
  p->q.sn = 0;
  p->d = lik_seqs_from(D);
  p->d.offsets = id;
  p->d.count = pd->nd;
  p->d.len = pd->ld_max;
  p->d.sn = 0;
  p->q_mask = lik_mask_from(q_mask);
  p->d_mask = lik_mask_from(d_mask);
  lik_fill_options(p, opts);
  return LIK_OK;
}

/* argmax of a packed call: I32, grid + [Lmax] with Lmax >= lq_max. */
static lik_status check_packed_argmax(const lik_tensor *a, int ndim, const int64_t *grid,
                                      int64_t lq_max) {
  lik_status st = lik_check_tensor(a, "argmax", ndim + 1, ndim + 1);
  if (st) return st;
  int64_t shape[LIK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) shape[i] = grid[i];
  shape[ndim] = a->shape[ndim];
  if ((st = lik_check_output(a, "argmax", LIK_I32, ndim + 1, shape))) return st;
  if (a->shape[ndim] < lq_max)
    return lik_fail(LIK_ERR_SHAPE,
                    "argmax: last dimension %lld is shorter than the longest query (%lld tokens)",
                    (long long)a->shape[ndim], (long long)lq_max);
  return LIK_OK;
}

static lik_status packed_forward(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *cu_q,
                                 const lik_tensor *cu_d, const lik_tensor *pair_q,
                                 const lik_tensor *pair_d, const lik_tensor *q_mask,
                                 const lik_tensor *d_mask, const lik_options *opts,
                                 lik_tensor *scores, lik_tensor *argmax) {
  lik_clear_error();
  lik_status st;
  lik_problem p;
  memset(&p, 0, sizeof p);
  packed_dims pd = {0};
  if ((st = packed_problem(&p, &pd, Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, opts)))
    return st;
  const int list = p.pairing == LIK_PAIRING_LIST;
  int64_t grid[2];
  int ndim = 0;
  if (list) {
    grid[ndim++] = pd.npairs;
  } else {
    grid[ndim++] = pd.nq;
    grid[ndim++] = pd.nd;
  }
  if ((st = lik_check_output(scores, "scores", LIK_F32, ndim, grid))) return st;
  if (argmax && (st = check_packed_argmax(argmax, ndim, grid, pd.lq_max))) return st;
  const lik_tensor *ts[] = {Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, scores, argmax};
  const char *names[] = {"Q",      "D",      "cu_seqlens_q", "cu_seqlens_d", "pair_q",
                         "pair_d", "q_mask", "d_mask",       "scores",       "argmax"};
  if ((st = lik_check_devices(ts, names, 10, &p.device, &p.device_id))) return st;
  p.scores = (float *)scores->data;
  p.score_si = list ? 0 : scores->strides[0];
  p.score_sj = scores->strides[ndim - 1];
  if (argmax) {
    p.argmax = (int32_t *)argmax->data;
    p.argmax_si = list ? 0 : argmax->strides[0];
    p.argmax_sj = argmax->strides[ndim - 1];
    p.argmax_ss = argmax->strides[ndim];
  }
  const int64_t ni = list ? 1 : pd.nq, nj = list ? pd.npairs : pd.nd;
  if (ni * nj == 0) return LIK_OK;
  if (p.device == LIK_CUDA) {
#ifdef LIK_WITH_CUDA
    /* lengths stay on the device: Lq is bounded by the argmax extent, else by
     * opts.max_seqlen_q or Q's rows; the kernel skips query blocks past each
     * query's end and writes argmax -1 up to the extent */
    const int64_t mq = opts ? opts->max_seqlen_q : 0;
    p.q.len = argmax ? argmax->shape[ndim] : mq > 0 && mq < Q->shape[0] ? mq : Q->shape[0];
    p.d.len = D->shape[0];
    return lik_cuda_maxsim(&p);
#else
    return lik_fail(LIK_ERR_UNSUPPORTED,
                    "tensors are on CUDA but this build of lik has no CUDA backend");
#endif
  }
  if ((st = lik_cpu_maxsim(&p))) return st;
  if (argmax) { /* -1 beyond each query's length (the kernel covers s < len) */
    const int64_t lmax = argmax->shape[ndim];
    for (int64_t i = 0; i < ni; i++)
      for (int64_t j = 0; j < nj; j++) {
        const int64_t qi = list ? lik_index_at(&p.pair_q, j) : i;
        int32_t *a = p.argmax + i * p.argmax_si + j * p.argmax_sj;
        for (int64_t s = lik_seq_len(&p.q, qi); s < lmax; s++) a[s * p.argmax_ss] = -1;
      }
  }
  return LIK_OK;
}

static lik_status packed_backward(const lik_tensor *Q, const lik_tensor *D,
                                  const lik_tensor *cu_q, const lik_tensor *cu_d,
                                  const lik_tensor *pair_q, const lik_tensor *pair_d,
                                  const lik_tensor *q_mask, const lik_tensor *d_mask,
                                  const lik_tensor *argmax, const lik_tensor *grad_scores,
                                  const lik_options *opts, lik_tensor *grad_Q,
                                  lik_tensor *grad_D) {
  lik_clear_error();
  lik_status st;
  if ((st = check_strategy(opts))) return st;
  lik_bw bw;
  memset(&bw, 0, sizeof bw);
  lik_problem *p = &bw.p;
  packed_dims pd = {0};
  if ((st = packed_problem(p, &pd, Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, opts)))
    return st;
  const int list = p->pairing == LIK_PAIRING_LIST;
  int64_t grid[2];
  int ndim = 0;
  if (list) {
    grid[ndim++] = pd.npairs;
  } else {
    grid[ndim++] = pd.nq;
    grid[ndim++] = pd.nd;
  }
  if (!argmax) return lik_fail(LIK_ERR_NULL, "argmax: is NULL (pass the forward's argmax)");
  if ((st = check_packed_argmax(argmax, ndim, grid, pd.lq_max))) return st;
  if ((st = check_grad_scores(grad_scores, ndim, grid))) return st;
  if (grad_Q && (st = check_grad(grad_Q, "grad_Q", Q))) return st;
  if (grad_D && (st = check_grad(grad_D, "grad_D", D))) return st;
  const lik_tensor *ts[] = {Q,      D,      cu_q,   cu_d,        pair_q, pair_d,
                            q_mask, d_mask, argmax, grad_scores, grad_Q, grad_D};
  const char *names[] = {"Q",      "D",      "cu_seqlens_q", "cu_seqlens_d",
                         "pair_q", "pair_d", "q_mask",       "d_mask",
                         "argmax", "grad_scores", "grad_Q",  "grad_D"};
  if ((st = check_cpu(p, ts, names, 12))) return st;
  p->argmax = (int32_t *)argmax->data;
  p->argmax_si = list ? 0 : argmax->strides[0];
  p->argmax_sj = argmax->strides[ndim - 1];
  p->argmax_ss = argmax->strides[ndim];
  bw.gs = grad_scores->data;
  bw.gs_dtype = grad_scores->dtype;
  bw.gs_si = list ? 0 : grad_scores->strides[0];
  bw.gs_sj = grad_scores->strides[ndim - 1];
  fill_grads(&bw, grad_Q, grad_D);
  return lik_cpu_maxsim_backward(&bw, strategy_of(opts));
}

lik_status lik_maxsim_varlen(const lik_tensor *Q, const lik_tensor *D,
                             const lik_tensor *cu_seqlens_q, const lik_tensor *cu_seqlens_d,
                             const lik_tensor *q_mask, const lik_tensor *d_mask,
                             const lik_options *opts, lik_tensor *scores, lik_tensor *argmax) {
  return packed_forward(Q, D, cu_seqlens_q, cu_seqlens_d, NULL, NULL, q_mask, d_mask, opts,
                        scores, argmax);
}

lik_status lik_maxsim_varlen_backward(const lik_tensor *Q, const lik_tensor *D,
                                      const lik_tensor *cu_seqlens_q,
                                      const lik_tensor *cu_seqlens_d, const lik_tensor *q_mask,
                                      const lik_tensor *d_mask, const lik_tensor *argmax,
                                      const lik_tensor *grad_scores, const lik_options *opts,
                                      lik_tensor *grad_Q, lik_tensor *grad_D) {
  return packed_backward(Q, D, cu_seqlens_q, cu_seqlens_d, NULL, NULL, q_mask, d_mask, argmax,
                         grad_scores, opts, grad_Q, grad_D);
}

lik_status lik_score_pairs_packed(const lik_tensor *Q, const lik_tensor *D,
                                  const lik_tensor *cu_seqlens_q, const lik_tensor *cu_seqlens_d,
                                  const lik_tensor *pair_q, const lik_tensor *pair_d,
                                  const lik_tensor *q_mask, const lik_tensor *d_mask,
                                  const lik_options *opts, lik_tensor *scores,
                                  lik_tensor *argmax) {
  if (!pair_q || !pair_d) {
    lik_clear_error();
    return lik_fail(LIK_ERR_NULL, "%s: is NULL", pair_q ? "pair_d" : "pair_q");
  }
  return packed_forward(Q, D, cu_seqlens_q, cu_seqlens_d, pair_q, pair_d, q_mask, d_mask, opts,
                        scores, argmax);
}

lik_status lik_score_pairs_packed_backward(
    const lik_tensor *Q, const lik_tensor *D, const lik_tensor *cu_seqlens_q,
    const lik_tensor *cu_seqlens_d, const lik_tensor *pair_q, const lik_tensor *pair_d,
    const lik_tensor *q_mask, const lik_tensor *d_mask, const lik_tensor *argmax,
    const lik_tensor *grad_scores, const lik_options *opts, lik_tensor *grad_Q,
    lik_tensor *grad_D) {
  if (!pair_q || !pair_d) {
    lik_clear_error();
    return lik_fail(LIK_ERR_NULL, "%s: is NULL", pair_q ? "pair_d" : "pair_q");
  }
  return packed_backward(Q, D, cu_seqlens_q, cu_seqlens_d, pair_q, pair_d, q_mask, d_mask,
                         argmax, grad_scores, opts, grad_Q, grad_D);
}
