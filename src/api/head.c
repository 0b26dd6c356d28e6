/*
 * head.c — lik_maxsim_from_hidden and its backward (lik_experimental.h, "fused
 * D-side head"): validate once, describe the call as a lik_head, route it to
 * the CPU or CUDA backend.
 */
#include <stdint.h>

#include "lik_experimental.h"
#include "../core/backend.h"
#include "../core/head.h"
#include "../core/validate.h"

/* A size that must lie in [1, INT32_MAX]. */
static lik_status check_dim(const char *name, const char *what, int64_t v) {
  if (v < 1 || v > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "%s: %s=%lld is outside [1, %d]", name, what,
                    (long long)v, INT32_MAX);
  return LIK_OK;
}

/* A floating tensor of Q's dtype with ndim in [lo, hi]. */
static lik_status check_like_q(const lik_tensor *t, const char *name, int lo, int hi,
                               const lik_tensor *Q) {
  lik_status st;
  if ((st = lik_check_tensor(t, name, lo, hi)) || (st = lik_check_float(t, name))) return st;
  if (t->dtype != Q->dtype)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s does not match Q's dtype %s", name,
                    lik_dtype_name(t->dtype), lik_dtype_name(Q->dtype));
  return LIK_OK;
}

/* W and b (either NULL: absent) as the head's lik_head_wb. */
static lik_head_wb wb_of(const lik_tensor *W, const lik_tensor *b) {
  lik_head_wb wb = {0};
  if (W) {
    wb.w = W->data;
    wb.w_so = W->strides[0];
    wb.w_sk = W->strides[1];
  }
  if (b) {
    wb.b = b->data;
    wb.b_s = b->strides[0];
  }
  return wb;
}

/* Inputs of both calls: shapes, dtypes, masks; fills h (not devices, outputs,
 * options) and the scores' grid [Nq, Nd] or [Nq, K]. */
static lik_status describe(lik_head *h, const lik_tensor *Q, const lik_tensor *H_d,
                           const lik_tensor *W, const lik_tensor *b,
                           const lik_tensor *q_mask, const lik_tensor *d_mask,
                           int64_t grid[2]) {
  lik_status st;
  if ((st = lik_check_tensor(Q, "Q", 3, 3)) || (st = lik_check_float(Q, "Q")) ||
      (st = check_like_q(H_d, "H_d", 3, 4, Q)) || (st = check_like_q(W, "W", 2, 2, Q)) ||
      (b && (st = check_like_q(b, "b", 1, 1, Q))))
    return st;
  const int64_t d_out = Q->shape[2], d_model = H_d->shape[H_d->ndim - 1];
  const int64_t lq = Q->shape[1], ld = H_d->shape[H_d->ndim - 2];
  if ((st = check_dim("Q", "d_out", d_out)) || (st = check_dim("H_d", "d_model", d_model)))
    return st;
  if (lq > INT32_MAX || ld > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "%s: sequence length %lld exceeds %d (argmax is int32)",
                    lq > INT32_MAX ? "Q" : "H_d", (long long)(lq > INT32_MAX ? lq : ld),
                    INT32_MAX);
  if (W->shape[0] != d_out || W->shape[1] != d_model)
    return lik_fail(LIK_ERR_SHAPE, "W must be [d_out=%lld, d_model=%lld], got [%lld, %lld]",
                    (long long)d_out, (long long)d_model, (long long)W->shape[0],
                    (long long)W->shape[1]);
  if (b && b->shape[0] != d_out)
    return lik_fail(LIK_ERR_SHAPE, "b must be [d_out=%lld], got [%lld]", (long long)d_out,
                    (long long)b->shape[0]);
  if (H_d->ndim == 4 && H_d->shape[0] != Q->shape[0])
    return lik_fail(LIK_ERR_SHAPE,
                    "H_d: KD layout [Nq, K, Ld, d_model] has Nq=%lld but Q has Nq=%lld",
                    (long long)H_d->shape[0], (long long)Q->shape[0]);
  if ((q_mask && (st = lik_check_mask(q_mask, "q_mask", 2, Q->shape))) ||
      (d_mask && (st = lik_check_mask(d_mask, "d_mask", H_d->ndim - 1, H_d->shape))))
    return st;
  lik_problem *p = &h->p;
  p->pairing = H_d->ndim == 4 ? LIK_PAIRING_KD : LIK_PAIRING_CROSS;
  p->ncand = H_d->ndim == 4 ? H_d->shape[1] : H_d->shape[0];
  grid[0] = Q->shape[0];
  grid[1] = p->ncand;
  p->q = lik_seqs_from(Q);
  p->d = lik_seqs_from(H_d);
  p->q_mask = lik_mask_from(q_mask);
  p->d_mask = lik_mask_from(d_mask);
  h->wb = wb_of(W, b);
  return LIK_OK;
}

static lik_status route_forward(const lik_head *h) {
  const lik_backend *b = lik_backend_of(h->p.call.device);
  return b->maxsim_from_hidden ? b->maxsim_from_hidden(h) : lik_no_entry("lik_maxsim_from_hidden");
}

static lik_status route_backward(const lik_head_bw *bw) {
  const lik_backend *b = lik_backend_of(bw->h.p.call.device);
  return b->maxsim_from_hidden_backward ? b->maxsim_from_hidden_backward(bw)
                                        : lik_no_entry("lik_maxsim_from_hidden_backward");
}

/* The call's tensors ts[0 .. n) (the last nout outputs): one device, no
 * output aliasing another tensor; no lengths; then the envelope from opts. */
static lik_status finish_call(lik_problem *p, const lik_tensor *const *ts,
                              const char *const *names, int n, int nout,
                              const lik_options *opts) {
  lik_status st;
  if ((st = lik_check_devices(ts, names, n, &p->call.device, &p->call.device_id)) ||
      (st = lik_check_disjoint(ts, names, n, nout)) ||
      (st = lik_check_no_lengths(opts, "the fused head takes no lengths (give padding as "
                                 "q_mask / d_mask)")))
    return st;
  lik_call_from(&p->call, opts);
  return LIK_OK;
}

/* argmax: I32 grid + [Lq]; output = 1 also checks it is writable once. */
static lik_status check_argmax(lik_problem *p, const lik_tensor *argmax,
                               const int64_t grid[2], int output) {
  const int64_t shape[3] = {grid[0], grid[1], p->q.len};
  lik_status st = lik_check_output(argmax, "argmax", LIK_I32, 3, shape);
  if (st || (output && (st = lik_check_no_overlap(argmax, "argmax")))) return st;
  lik_set_argmax(&p->out, argmax, 2, 1, 1);
  return LIK_OK;
}

lik_status lik_maxsim_from_hidden(const lik_tensor *Q, const lik_tensor *H_d,
                                  const lik_tensor *W, const lik_tensor *b,
                                  const lik_tensor *q_mask, const lik_tensor *d_mask,
                                  const lik_options *opts, lik_tensor *scores,
                                  lik_tensor *argmax) {
  lik_clear_error();
  lik_head h = {0};
  lik_problem *p = &h.p;
  int64_t grid[2];
  lik_status st;
  if (!scores) return lik_fail(LIK_ERR_NULL, "scores: is NULL");
  if ((st = describe(&h, Q, H_d, W, b, q_mask, d_mask, grid)) ||
      (st = lik_fill_scores(p, scores, 2, grid)) ||
      (argmax && (st = check_argmax(p, argmax, grid, 1))))
    return st;
  const lik_tensor *ts[] = {Q, H_d, W, b, q_mask, d_mask, scores, argmax};
  const char *names[] = {"Q", "H_d", "W", "b", "q_mask", "d_mask", "scores", "argmax"};
  if ((st = finish_call(p, ts, names, 8, 2, opts))) return st;
  lik_grid_strides(scores, 2, 1, 1, &p->out.score_si, &p->out.score_sj);
  return grid[0] * grid[1] == 0 ? LIK_OK : route_forward(&h);
}

/* A gradient output: its input's dtype and shape, each element written once. */
static lik_status check_grad(const lik_tensor *g, const char *name, const lik_tensor *like) {
  lik_status st = lik_check_output(g, name, like->dtype, like->ndim, like->shape);
  return st ? st : lik_check_no_overlap(g, name);
}

lik_status lik_maxsim_from_hidden_backward(
    const lik_tensor *Q, const lik_tensor *H_d, const lik_tensor *W, const lik_tensor *b,
    const lik_tensor *q_mask, const lik_tensor *d_mask, const lik_tensor *argmax,
    const lik_tensor *grad_scores, const lik_options *opts, lik_tensor *grad_Q,
    lik_tensor *grad_H_d, lik_tensor *grad_W, lik_tensor *grad_b) {
  lik_clear_error();
  lik_head_bw bw = {0};
  lik_problem *p = &bw.h.p;
  int64_t grid[2];
  lik_status st;
  if ((st = describe(&bw.h, Q, H_d, W, b, q_mask, d_mask, grid))) return st;
  if (!argmax) return lik_fail(LIK_ERR_NULL, "argmax: is NULL (pass the forward's argmax)");
  if (!grad_scores) return lik_fail(LIK_ERR_NULL, "grad_scores: is NULL");
  if ((st = check_argmax(p, argmax, grid, 0)) ||
      (st = lik_check_tensor(grad_scores, "grad_scores", 2, 2)))
    return st;
  if (grad_scores->dtype != LIK_F32 && grad_scores->dtype != LIK_F64)
    return lik_fail(LIK_ERR_DTYPE, "grad_scores: dtype %s, expected float32 or float64",
                    lik_dtype_name(grad_scores->dtype));
  if ((st = lik_check_output(grad_scores, "grad_scores", grad_scores->dtype, 2, grid)))
    return st;
  if (grad_b && !b) return lik_fail(LIK_ERR_VALUE, "grad_b: given but b is NULL");
  if ((grad_Q && (st = check_grad(grad_Q, "grad_Q", Q))) ||
      (grad_H_d && (st = check_grad(grad_H_d, "grad_H_d", H_d))) ||
      (grad_W && (st = check_grad(grad_W, "grad_W", W))) ||
      (grad_b && (st = check_grad(grad_b, "grad_b", b))))
    return st;
  const lik_tensor *ts[] = {Q, H_d, W, b, q_mask, d_mask, argmax, grad_scores,
                            grad_Q, grad_H_d, grad_W, grad_b};
  const char *names[] = {"Q", "H_d", "W", "b", "q_mask", "d_mask", "argmax",
                         "grad_scores", "grad_Q", "grad_H_d", "grad_W", "grad_b"};
  if ((st = finish_call(p, ts, names, 12, 4, opts))) return st;
  bw.gs = grad_scores->data;
  bw.gs_dtype = grad_scores->dtype;
  bw.gs_si = grad_scores->strides[0];
  bw.gs_sj = grad_scores->strides[1];
  if (grad_Q) bw.gq = lik_seqs_from(grad_Q);
  if (grad_H_d) bw.gh = lik_seqs_from(grad_H_d);
  bw.g = wb_of(grad_W, grad_b);
  return route_backward(&bw);
}
