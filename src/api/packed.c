/*
 * packed.c — the packed-layout forwards (FlashAttention's cu_seqlens):
 * lik_maxsim_varlen and lik_score_pairs_packed.  Validate once, describe the
 * call as a lik_problem, route it to the CPU or CUDA backend.
 */
#include <string.h>

#include "route.h"

static lik_status packed_forward(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *cu_q,
                                 const lik_tensor *cu_d, const lik_tensor *pair_q,
                                 const lik_tensor *pair_d, const lik_tensor *q_mask,
                                 const lik_tensor *d_mask, const lik_options *opts,
                                 lik_tensor *scores, lik_tensor *argmax) {
  lik_clear_error();
  lik_status st;
  lik_problem p;
  memset(&p, 0, sizeof p);
  lik_packed_dims pd = {0};
  if ((st = lik_packed_problem(&p, &pd, Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, opts)))
    return st;
  const int list = p.pairing == LIK_PAIRING_LIST;
  int64_t grid[2];
  const int ndim = lik_packed_grid(&p, &pd, grid);
  if ((st = lik_fill_scores(&p, scores, ndim, grid))) return st;
  if (argmax && ((st = lik_check_packed_argmax(argmax, ndim, grid, pd.lq_max)) ||
                 (st = lik_check_no_overlap(argmax, "argmax"))))
    return st;
  const lik_tensor *ts[] = {Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, scores, argmax};
  const char *names[] = {"Q",      "D",      "cu_seqlens_q", "cu_seqlens_d", "pair_q",
                         "pair_d", "q_mask", "d_mask",       "scores",       "argmax"};
  if ((st = lik_check_devices(ts, names, 10, &p.call.device, &p.call.device_id)) ||
      (st = lik_check_disjoint(ts, names, 10, 2)))
    return st;
  lik_grid_strides(scores, ndim, !list, 1, &p.out.score_si, &p.out.score_sj);
  lik_set_argmax(&p.out, argmax, ndim, !list, 1);
  const int64_t ni = list ? 1 : pd.nq, nj = list ? pd.npairs : pd.nd;
  if (ni * nj == 0) return LIK_OK;
  if (p.call.device == LIK_CUDA) {
    /* lengths stay on the device: Lq is bounded by the argmax extent, else by
     * opts.max_seqlen_q or Q's rows; the kernel skips query blocks past each
     * query's end and writes argmax -1 up to the extent */
    const int64_t mq = opts ? opts->max_seqlen_q : 0;
    p.q.len = argmax ? argmax->shape[ndim] : mq > 0 && mq < Q->shape[0] ? mq : Q->shape[0];
    p.d.len = D->shape[0];
  }
  if ((st = lik_route_maxsim(&p)) || p.call.device == LIK_CUDA) return st;
  if (p.out.argmax) { /* -1 beyond each query's length (the kernel covers s < len) */
    const int64_t lmax = argmax->shape[ndim];
    for (int64_t i = 0; i < ni; i++)
      for (int64_t j = 0; j < nj; j++) {
        const int64_t qi = list ? lik_index_at(&p.pair_q, j) : i;
        int32_t *a = p.out.argmax + i * p.out.argmax_si + j * p.out.argmax_sj;
        for (int64_t s = lik_seq_len(&p.q, qi); s < lmax; s++) a[s * p.out.argmax_ss] = -1;
      }
  }
  return LIK_OK;
}

lik_status lik_maxsim_varlen(const lik_tensor *Q, const lik_tensor *D,
                             const lik_tensor *cu_seqlens_q, const lik_tensor *cu_seqlens_d,
                             const lik_tensor *q_mask, const lik_tensor *d_mask,
                             const lik_options *opts, lik_tensor *scores, lik_tensor *argmax) {
  return packed_forward(Q, D, cu_seqlens_q, cu_seqlens_d, NULL, NULL, q_mask, d_mask, opts,
                        scores, argmax);
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
