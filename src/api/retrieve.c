/*
 * retrieve.c — lik_retrieve: validate once, route the exact top-k to the CPU
 * or CUDA backend.
 */
#include "../core/backend.h"
#include "../core/problem.h"
#include "../core/validate.h"

lik_status lik_retrieve(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *q_mask,
                        const lik_tensor *d_mask, int64_t top_k, const lik_options *opts,
                        lik_tensor *scores, lik_tensor *indices) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 3, 2, 3, 1))) return st;
  if (top_k <= 0) return lik_fail(LIK_ERR_VALUE, "top_k: got %lld, but top_k must be positive (>= 1)", (long long)top_k);
  const int q3 = Q->ndim == 3;
  lik_problem p = {0};
  p.pairing = LIK_PAIRING_CROSS;
  p.ncand = D->ndim == 3 ? D->shape[0] : 1;
  const int64_t k = top_k < p.ncand ? top_k : p.ncand;
  if ((st = lik_fill_common(&p, Q, D, q_mask, d_mask, scores, indices, "indices", opts))) return st;
  int64_t grid[2];
  int ndim = 0;
  if (q3) grid[ndim++] = Q->shape[0];
  grid[ndim++] = k;
  if ((st = lik_check_output(scores, "scores", LIK_F32, ndim, grid)) ||
      (st = lik_check_output(indices, "indices", LIK_I64, ndim, grid)) ||
      (st = lik_check_no_overlap(scores, "scores")) ||
      (st = lik_check_no_overlap(indices, "indices")))
    return st;
  {
    const lik_tensor *ts[] = {Q, D, q_mask, d_mask, opts ? opts->q_lengths : NULL,
                              opts ? opts->d_lengths : NULL, scores, indices};
    const char *names[] = {"Q", "D", "q_mask", "d_mask", "q_lengths", "d_lengths", "scores",
                           "indices"};
    if ((st = lik_check_disjoint(ts, names, 8, 2))) return st;
  }
  if (p.q.count == 0 || k == 0) return LIK_OK;
  const int64_t ssi = q3 ? scores->strides[0] : 0, ssr = scores->strides[ndim - 1];
  const int64_t isi = q3 ? indices->strides[0] : 0, isr = indices->strides[ndim - 1];
  const lik_backend *b = lik_backend_of(p.call.device);
  if (!b->retrieve) return lik_no_entry("lik_retrieve");
  return b->retrieve(&p, k, (float *)scores->data, ssi, ssr, (int64_t *)indices->data, isi, isr);
}
