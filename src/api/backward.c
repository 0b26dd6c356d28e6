/*
 * backward.c — the public backward calls (lik.h, "training and packed
 * layouts"): validate once, describe the call as a lik_bw (the forward's
 * lik_problem + grad_scores + gradient outputs), route it to a backend.
 */
#include <string.h>

#include "../core/backend.h"
#include "../core/validate.h"

/* ---- shared checks --------------------------------------------------------- */

/* Devices of every tensor of a call: one device, CPU or CUDA (CUDA needs a
 * build with the CUDA backend). */
static lik_status check_device(lik_problem *p, const lik_tensor *const *ts,
                               const char *const *names, int n) {
  lik_status st = lik_check_devices(ts, names, n, &p->call.device, &p->call.device_id);
  if (st) return st;
  if (!lik_backend_of(p->call.device)->maxsim_backward) return lik_no_entry("lik_maxsim_backward");
  return LIK_OK;
}

static lik_backward strategy_of(const lik_options *opts) {
  return opts ? opts->backward : LIK_BACKWARD_AUTO;
}

/* The backend of a validated backward call. */
static lik_status route(lik_bw *bw, const lik_options *opts) {
  return lik_backend_of(bw->p.call.device)->maxsim_backward(bw, strategy_of(opts));
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

/* A gradient output as a lik_seqs with its input's geometry (count, len,
 * offsets) over its own strides. */
static lik_seqs grad_seqs(const lik_tensor *g, const lik_seqs *like) {
  lik_seqs s = lik_seqs_from(g);
  s.offsets = like->offsets;
  s.count = like->count;
  s.len = like->len;
  if (like->offsets.data) s.sn = 0;
  return s;
}

/* argmax, grad_scores and the gradient outputs of a validated call. */
static void fill_outputs(lik_bw *bw, const lik_tensor *argmax, const lik_tensor *grad_scores,
                         const lik_tensor *grad_Q, const lik_tensor *grad_D, int ndim,
                         int has_i, int has_j) {
  lik_set_argmax(&bw->p.out, argmax, ndim, has_i, has_j);
  bw->gs = grad_scores->data;
  bw->gs_dtype = grad_scores->dtype;
  lik_grid_strides(grad_scores, ndim, has_i, has_j, &bw->gs_si, &bw->gs_sj);
  if (grad_Q) bw->gq = grad_seqs(grad_Q, &bw->p.q);
  if (grad_D) bw->gd = grad_seqs(grad_D, &bw->p.d);
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
  if ((st = check_device(p, ts, names, 8)) || (st = lik_check_disjoint(ts, names, 8, 2)))
    return st;
  p->q = lik_seqs_from(Q);
  p->d = lik_seqs_from(D);
  p->q_mask = lik_mask_from(q_mask);
  p->d_mask = lik_mask_from(d_mask);
  lik_call_from(&p->call, opts);
  if ((st = lik_fill_lengths(p, Q, D, opts))) return st;
  fill_outputs(bw, argmax, grad_scores, grad_Q, grad_D, ndim, has_i, has_j);
  return route(bw, opts);
}

lik_status lik_maxsim_backward(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *q_mask,
                               const lik_tensor *d_mask, const lik_tensor *argmax,
                               const lik_tensor *grad_scores, const lik_options *opts,
                               lik_tensor *grad_Q, lik_tensor *grad_D) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 3, 2, 4, 1))) return st;
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
  lik_bw bw;
  memset(&bw, 0, sizeof bw);
  if ((st = lik_pairs_layout(Q, D, &bw.p))) return st;
  const int64_t grid[1] = {Q->shape[0]};
  return padded_backward(&bw, Q, D, q_mask, d_mask, argmax, grad_scores, opts, grad_Q, grad_D,
                         1, grid, 1, 0);
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
  lik_packed_dims pd = {0};
  if ((st = lik_packed_problem(p, &pd, Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, opts)))
    return st;
  const int list = p->pairing == LIK_PAIRING_LIST;
  int64_t grid[2];
  const int ndim = lik_packed_grid(p, &pd, grid);
  if (!argmax) return lik_fail(LIK_ERR_NULL, "argmax: is NULL (pass the forward's argmax)");
  if ((st = lik_check_packed_argmax(argmax, ndim, grid, pd.lq_max))) return st;
  if ((st = check_grad_scores(grad_scores, ndim, grid))) return st;
  if (grad_Q && (st = check_grad(grad_Q, "grad_Q", Q))) return st;
  if (grad_D && (st = check_grad(grad_D, "grad_D", D))) return st;
  const lik_tensor *ts[] = {Q,      D,      cu_q,   cu_d,        pair_q, pair_d,
                            q_mask, d_mask, argmax, grad_scores, grad_Q, grad_D};
  const char *names[] = {"Q",      "D",      "cu_seqlens_q", "cu_seqlens_d",
                         "pair_q", "pair_d", "q_mask",       "d_mask",
                         "argmax", "grad_scores", "grad_Q",  "grad_D"};
  if ((st = check_device(p, ts, names, 12)) || (st = lik_check_disjoint(ts, names, 12, 2)))
    return st;
  if (p->call.device == LIK_CUDA) {
    /* lengths stay on the device (as in the packed forward): queries are
     * bounded by the argmax extent, documents by D's rows */
    p->q.len = argmax->shape[ndim];
    p->d.len = D->shape[0];
  }
  bw.q_total = Q->shape[0];
  bw.d_total = D->shape[0];
  fill_outputs(&bw, argmax, grad_scores, grad_Q, grad_D, ndim, !list, 1);
  return route(&bw, opts);
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
