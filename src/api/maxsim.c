/*
 * maxsim.c — lik_maxsim and lik_maxsim_pairs: validate once, describe the
 * call as a lik_problem, route it to the CPU or CUDA backend.
 */
#include "route.h"

/* scores / argmax views: dims of the output grid, then Lq for argmax. */
static lik_status fill_outputs(lik_problem *p, lik_tensor *scores, lik_tensor *argmax,
                               int ndim, const int64_t *grid, int has_i, int has_j) {
  lik_status st;
  if ((st = lik_fill_scores(p, scores, ndim, grid))) return st;
  lik_grid_strides(scores, ndim, has_i, has_j, &p->out.score_si, &p->out.score_sj);
  if (!argmax) return LIK_OK;
  int64_t shape[LIK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) shape[i] = grid[i];
  shape[ndim] = p->q.len;
  if ((st = lik_check_output(argmax, "argmax", LIK_I32, ndim + 1, shape)) ||
      (st = lik_check_no_overlap(argmax, "argmax")))
    return st;
  lik_set_argmax(&p->out, argmax, ndim, has_i, has_j);
  return LIK_OK;
}

static int64_t grid_size(const lik_problem *p) { return p->q.count * p->ncand; }

/* The outputs share no memory with the inputs or with each other. */
static lik_status check_aliasing(const lik_tensor *Q, const lik_tensor *D,
                                 const lik_tensor *q_mask, const lik_tensor *d_mask,
                                 const lik_options *opts, const lik_tensor *scores,
                                 const lik_tensor *argmax) {
  const lik_tensor *ts[] = {Q, D, q_mask, d_mask, opts ? opts->q_lengths : NULL,
                            opts ? opts->d_lengths : NULL, scores, argmax};
  const char *names[] = {"Q", "D", "q_mask", "d_mask", "q_lengths", "d_lengths", "scores",
                         "argmax"};
  return lik_check_disjoint(ts, names, 8, 2);
}

lik_status lik_maxsim(const lik_tensor *Q, const lik_tensor *D, const lik_tensor *q_mask,
                      const lik_tensor *d_mask, const lik_options *opts,
                      lik_tensor *scores, lik_tensor *argmax) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_embeddings(Q, D, 2, 3, 2, 4, 1))) return st;
  lik_problem p = {0};
  int64_t grid[2];
  int ndim, has_i, has_j;
  if ((st = lik_layout_of(Q, D, &p, grid, &ndim, &has_i, &has_j))) return st;
  if ((st = lik_fill_common(&p, Q, D, q_mask, d_mask, scores, argmax, "argmax", opts))) return st;
  if ((st = fill_outputs(&p, scores, argmax, ndim, grid, has_i, has_j)) ||
      (st = check_aliasing(Q, D, q_mask, d_mask, opts, scores, argmax)))
    return st;
  return grid_size(&p) == 0 ? LIK_OK : lik_route_maxsim(&p);
}

lik_status lik_maxsim_pairs(const lik_tensor *Q, const lik_tensor *D,
                            const lik_tensor *q_mask, const lik_tensor *d_mask,
                            const lik_options *opts, lik_tensor *scores,
                            lik_tensor *argmax) {
  lik_clear_error();
  lik_status st;
  lik_problem p = {0};
  if ((st = lik_pairs_layout(Q, D, &p))) return st;
  if ((st = lik_fill_common(&p, Q, D, q_mask, d_mask, scores, argmax, "argmax", opts))) return st;
  const int64_t grid[1] = {Q->shape[0]};
  if ((st = fill_outputs(&p, scores, argmax, 1, grid, 1, 0)) ||
      (st = check_aliasing(Q, D, q_mask, d_mask, opts, scores, argmax)))
    return st;
  return grid_size(&p) == 0 ? LIK_OK : lik_route_maxsim(&p);
}
