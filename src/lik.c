/*
 * lik.c — the forward public entry points: validate once, describe the call
 * as a lik_problem, route it to the CPU or CUDA backend.
 */
#include "problem.h"
#include "validate.h"

static lik_status route_maxsim(const lik_problem *p) {
  if (p->device == LIK_CUDA) {
#ifdef LIK_WITH_CUDA
    return lik_cuda_maxsim(p);
#else
    return lik_fail(LIK_ERR_UNSUPPORTED,
                    "tensors are on CUDA but this build of lik has no CUDA backend");
#endif
  }
  return lik_cpu_maxsim(p);
}

/* The common part of every forward: masks, devices, options. */
static lik_status fill_common(lik_problem *p, const lik_tensor *Q, const lik_tensor *D,
                              const lik_tensor *q_mask, const lik_tensor *d_mask,
                              const lik_tensor *out1, const lik_tensor *out2,
                              const char *out2_name, const lik_options *opts) {
  lik_status st;
  /* A mask covers every dimension of its tensor but the last (d). */
  if (q_mask && (st = lik_check_mask(q_mask, "q_mask", Q->ndim - 1, Q->shape))) return st;
  if (d_mask && (st = lik_check_mask(d_mask, "d_mask", D->ndim - 1, D->shape))) return st;
  const lik_tensor *ts[] = {Q, D, q_mask, d_mask, out1, out2};
  const char *names[] = {"Q", "D", "q_mask", "d_mask", "scores", out2_name};
  if ((st = lik_check_devices(ts, names, 6, &p->device, &p->device_id))) return st;
  p->q = lik_seqs_from(Q);
  p->d = lik_seqs_from(D);
  p->q_mask = lik_mask_from(q_mask);
  p->d_mask = lik_mask_from(d_mask);
  lik_fill_options(p, opts);
  return LIK_OK;
}

/* scores / argmax views: dims of the output grid, then Lq for argmax. */
static lik_status fill_outputs(lik_problem *p, lik_tensor *scores, lik_tensor *argmax,
                               int ndim, const int64_t *grid, int has_i, int has_j) {
  lik_status st;
  if ((st = lik_check_output(scores, "scores", LIK_F32, ndim, grid)) ||
      (st = lik_check_no_overlap(scores, "scores")))
    return st;
  p->scores = (float *)scores->data;
  p->score_si = has_i ? scores->strides[0] : 0;
  p->score_sj = has_j ? scores->strides[ndim - 1] : 0;
  if (!argmax) return LIK_OK;
  int64_t shape[LIK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) shape[i] = grid[i];
  shape[ndim] = p->q.len;
  if ((st = lik_check_output(argmax, "argmax", LIK_I32, ndim + 1, shape)) ||
      (st = lik_check_no_overlap(argmax, "argmax")))
    return st;
  p->argmax = (int32_t *)argmax->data;
  p->argmax_si = has_i ? argmax->strides[0] : 0;
  p->argmax_sj = has_j ? argmax->strides[ndim - 1] : 0;
  p->argmax_ss = argmax->strides[ndim];
  return LIK_OK;
}

static int64_t grid_size(const lik_problem *p) { return p->q.count * p->ncand; }

lik_status lik_maxsim(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *q_mask,
                      const lik_tensor *d_mask, const lik_options *opts,
                      lik_tensor *scores, lik_tensor *argmax) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 3, 2, 4))) return st;
  lik_problem p = {0};
  int64_t grid[2];
  int ndim, has_i, has_j;
  if ((st = lik_layout_of(Q, D, &p, grid, &ndim, &has_i, &has_j))) return st;
  if ((st = fill_common(&p, Q, D, q_mask, d_mask, scores, argmax, "argmax", opts))) return st;
  if ((st = fill_outputs(&p, scores, argmax, ndim, grid, has_i, has_j))) return st;
  return grid_size(&p) == 0 ? LIK_OK : route_maxsim(&p);
}

lik_status lik_maxsim_pairs(const lik_tensor *Q, const lik_tensor *D,
                            const lik_tensor *q_mask, const lik_tensor *d_mask,
                            const lik_options *opts, lik_tensor *scores,
                            lik_tensor *argmax) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 3, 3, 3, 3))) return st;
  if (D->shape[0] != Q->shape[0])
    return lik_fail(LIK_ERR_SHAPE, "D: batch B=%lld does not match Q's B=%lld",
                    (long long)D->shape[0], (long long)Q->shape[0]);
  lik_problem p = {0};
  p.pairing = LIK_PAIRING_KD; /* K = 1: pair b scores (Q[b], D[b]) */
  p.ncand = 1;
  if ((st = fill_common(&p, Q, D, q_mask, d_mask, scores, argmax, "argmax", opts))) return st;
  const int64_t grid[1] = {Q->shape[0]};
  if ((st = fill_outputs(&p, scores, argmax, 1, grid, 1, 0))) return st;
  return grid_size(&p) == 0 ? LIK_OK : route_maxsim(&p);
}

lik_status lik_retrieve(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *q_mask,
                        const lik_tensor *d_mask, int64_t top_k, const lik_options *opts,
                        lik_tensor *scores, lik_tensor *indices) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 3, 2, 3))) return st;
  if (top_k <= 0) return lik_fail(LIK_ERR_VALUE, "top_k: must be >= 1, got %lld", (long long)top_k);
  const int q3 = Q->ndim == 3;
  lik_problem p = {0};
  p.pairing = LIK_PAIRING_CROSS;
  p.ncand = D->ndim == 3 ? D->shape[0] : 1;
  const int64_t k = top_k < p.ncand ? top_k : p.ncand;
  if ((st = fill_common(&p, Q, D, q_mask, d_mask, scores, indices, "indices", opts))) return st;
  int64_t grid[2];
  int ndim = 0;
  if (q3) grid[ndim++] = Q->shape[0];
  grid[ndim++] = k;
  if ((st = lik_check_output(scores, "scores", LIK_F32, ndim, grid)) ||
      (st = lik_check_output(indices, "indices", LIK_I64, ndim, grid)) ||
      (st = lik_check_no_overlap(scores, "scores")) ||
      (st = lik_check_no_overlap(indices, "indices")))
    return st;
  if (p.q.count == 0 || k == 0) return LIK_OK;
  const int64_t ssi = q3 ? scores->strides[0] : 0, ssr = scores->strides[ndim - 1];
  const int64_t isi = q3 ? indices->strides[0] : 0, isr = indices->strides[ndim - 1];
  if (p.device == LIK_CUDA) {
#ifdef LIK_WITH_CUDA
    return lik_cuda_retrieve(&p, k, (float *)scores->data, ssi, ssr,
                             (int64_t *)indices->data, isi, isr);
#else
    return lik_fail(LIK_ERR_UNSUPPORTED,
                    "tensors are on CUDA but this build of lik has no CUDA backend");
#endif
  }
  return lik_cpu_retrieve(&p, k, (float *)scores->data, ssi, ssr, (int64_t *)indices->data,
                          isi, isr);
}
