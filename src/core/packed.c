/*
 * packed.c — validation shared by the packed-layout calls (forward and
 * backward): cu_seqlens, pair lists, the packed lik_problem, the argmax view.
 */
#include <stdint.h>

#include "validate.h"

lik_status lik_check_cu_seqlens(const lik_tensor *cu, const char *name, int64_t rows,
                                const char *rows_name, int on_host, lik_index *out,
                                int64_t *count, int64_t *maxlen) {
  lik_status st;
  if ((st = lik_check_index(cu, name, 1, 1))) return st;
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
    if (m > INT32_MAX)
      return lik_fail(LIK_ERR_VALUE,
                      "%s: sequence %lld has %lld tokens (%s[%lld] - %s[%lld]), more than %d "
                      "(argmax is int32)",
                      name, (long long)(i - 1), (long long)m, name, (long long)i, name,
                      (long long)(i - 1), INT32_MAX);
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
  if ((st = lik_check_index(t, name, 1, 1))) return st;
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
lik_status lik_packed_problem(lik_problem *p, lik_packed_dims *pd, const lik_tensor *Q,
                                 const lik_tensor *D, const lik_tensor *cu_q,
                                 const lik_tensor *cu_d, const lik_tensor *pair_q,
                                 const lik_tensor *pair_d, const lik_tensor *q_mask,
                                 const lik_tensor *d_mask, const lik_options *opts) {
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 2, 2, 2, 0))) return st;
  {
    const lik_tensor *ts[] = {Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask};
    const char *names[] = {"Q",      "D",      "cu_seqlens_q", "cu_seqlens_d",
                           "pair_q", "pair_d", "q_mask",       "d_mask"};
    if ((st = lik_check_devices(ts, names, 8, &p->call.device, &p->call.device_id))) return st;
  }
  const int host = p->call.device != LIK_CUDA;
  lik_index iq = {0}, id = {0};
  if ((st = lik_check_cu_seqlens(cu_q, "cu_seqlens_q", Q->shape[0], "Q rows", host, &iq, &pd->nq,
                     &pd->lq_max)) ||
      (st = lik_check_cu_seqlens(cu_d, "cu_seqlens_d", D->shape[0], "D rows", host, &id, &pd->nd,
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
  lik_call_from(&p->call, opts);
  return lik_check_no_lengths(opts, "packed calls take their lengths from cu_seqlens");
}

/* argmax of a packed call: I32, grid + [Lmax] with Lmax >= lq_max. */
lik_status lik_check_packed_argmax(const lik_tensor *a, int ndim, const int64_t *grid,
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

int lik_packed_grid(const lik_problem *p, const lik_packed_dims *pd, int64_t grid[2]) {
  if (p->pairing == LIK_PAIRING_LIST) {
    grid[0] = pd->npairs;
    return 1;
  }
  grid[0] = pd->nq;
  grid[1] = pd->nd;
  return 2;
}
