/*
 * residual.c — lik_maxsim_residual, lik_maxsim_residual_varlen and
 * lik_plaid_approx_score: validate once, describe the call, route it to the
 * CPU or CUDA backend.
 */
#include "../core/backend.h"
#include "../core/residual_check.h"

/* scores F32 grid[0 .. ndim), argmax NULL or I32 grid + [lq]. */
static lik_status check_outputs(const lik_tensor *scores, const lik_tensor *argmax, int ndim,
                                const int64_t *grid, int64_t lq) {
  lik_status st;
  if ((st = lik_check_output(scores, "scores", LIK_F32, ndim, grid)) ||
      (st = lik_check_no_overlap(scores, "scores")))
    return st;
  if (!argmax) return LIK_OK;
  int64_t shape[3];
  for (int i = 0; i < ndim; i++) shape[i] = grid[i];
  shape[ndim] = lq;
  if ((st = lik_check_output(argmax, "argmax", LIK_I32, ndim + 1, shape))) return st;
  return lik_check_no_overlap(argmax, "argmax");
}

/* lik_maxsim_residual (packed = 0: lens is doc_lengths) and _varlen
 * (packed = 1: lens is cu_seqlens_d). */
static lik_status residual_forward(const lik_tensor *Q, const lik_codec *codec,
                                   const lik_tensor *codes, const lik_tensor *residuals,
                                   const lik_tensor *lens, int packed, const lik_options *opts,
                                   lik_tensor *scores, lik_tensor *argmax) {
  lik_clear_error();
  lik_status st;
  lik_residual_problem p = {0};
  const char *lens_name = packed ? "cu_seqlens_d" : "doc_lengths";
  if (!lens) return lik_fail(LIK_ERR_NULL, "%s: is NULL", lens_name);
  if ((st = lik_check_no_lengths(opts, "the residual calls take doc_lengths / cu_seqlens_d")) ||
      (st = lik_check_tensor(Q, "Q", 2, 3)) || (st = lik_check_float(Q, "Q")))
    return st;
  if ((st = lik_codec_view_from(codec, 0, 1, &p.codec))) return st;
  if (Q->shape[Q->ndim - 1] != p.codec.dim)
    return lik_fail(LIK_ERR_SHAPE, "Q: d=%lld does not match centroids' d=%lld",
                    (long long)Q->shape[Q->ndim - 1], (long long)p.codec.dim);
  if (!residuals) return lik_fail(LIK_ERR_NULL, "residuals: is NULL");
  const lik_tensor *ts[] = {Q,         codec->centroids, codec->bucket_weights, codes,
                            residuals, lens,             scores,                argmax};
  const char *names[] = {"Q",         "centroids", "bucket_weights", "codes",
                         "residuals", lens_name,   "scores",         "argmax"};
  if ((st = lik_check_devices(ts, names, 8, &p.call.device, &p.call.device_id))) return st;
  const int host = p.call.device != LIK_CUDA;
  st = packed ? lik_ctokens_packed(codes, residuals, lens, p.codec.ncent, &p.codec, host, &p.d)
              : lik_ctokens_padded(codes, residuals, lens, &p.codec, host, &p.d);
  if (st) return st;
  p.q = lik_seqs_from(Q);
  if (p.q.len > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "Q: Lq=%lld exceeds the int32 argmax range",
                    (long long)p.q.len);
  const int q3 = Q->ndim == 3;
  int64_t grid[2];
  int ndim = 0;
  if (q3) grid[ndim++] = p.q.count;
  grid[ndim++] = p.d.count;
  if ((st = check_outputs(scores, argmax, ndim, grid, p.q.len)) ||
      (st = lik_check_disjoint(ts, names, 8, 2)))
    return st;
  p.out.scores = (float *)scores->data;
  lik_grid_strides(scores, ndim, q3, 1, &p.out.score_si, &p.out.score_sj);
  lik_set_argmax(&p.out, argmax, ndim, q3, 1);
  lik_call_from(&p.call, opts);
  if (p.q.count == 0 || p.d.count == 0) return LIK_OK;
  const lik_backend *b = lik_backend_of(p.call.device);
  return b->maxsim_residual ? b->maxsim_residual(&p) : lik_no_entry("lik_maxsim_residual");
}

lik_status lik_maxsim_residual(const lik_tensor *Q, const lik_codec *codec,
                               const lik_tensor *codes, const lik_tensor *residuals,
                               const lik_tensor *doc_lengths, const lik_options *opts,
                               lik_tensor *scores, lik_tensor *argmax) {
  return residual_forward(Q, codec, codes, residuals, doc_lengths, 0, opts, scores, argmax);
}

lik_status lik_maxsim_residual_varlen(const lik_tensor *Q, const lik_codec *codec,
                                      const lik_tensor *codes, const lik_tensor *residuals,
                                      const lik_tensor *cu_seqlens_d, const lik_options *opts,
                                      lik_tensor *scores, lik_tensor *argmax) {
  return residual_forward(Q, codec, codes, residuals, cu_seqlens_d, 1, opts, scores, argmax);
}

lik_status lik_plaid_approx_score(const lik_tensor *centroid_scores, const lik_tensor *codes,
                                  const lik_tensor *cu_seqlens_d, const lik_options *opts,
                                  lik_tensor *scores) {
  lik_clear_error();
  lik_status st;
  const lik_tensor *cs = centroid_scores;
  if ((st = lik_check_tensor(cs, "centroid_scores", 2, 3))) return st;
  if (cs->dtype != LIK_F32 && cs->dtype != LIK_F16 && cs->dtype != LIK_BF16)
    return lik_fail(LIK_ERR_DTYPE,
                    "centroid_scores: dtype %s, expected float32, float16 or bfloat16",
                    lik_dtype_name(cs->dtype));
  lik_approx_problem p = {0};
  const int q3 = cs->ndim == 3;
  p.cs.data = cs->data;
  p.cs.dtype = cs->dtype;
  p.cs.nq = q3 ? cs->shape[0] : 1;
  p.cs.lq = cs->shape[cs->ndim - 2];
  p.cs.ncent = cs->shape[cs->ndim - 1];
  p.cs.si = q3 ? cs->strides[0] : 0;
  p.cs.ss = cs->strides[cs->ndim - 2];
  p.cs.sc = cs->strides[cs->ndim - 1];
  const lik_tensor *ts[] = {cs, codes, cu_seqlens_d, scores};
  const char *names[] = {"centroid_scores", "codes", "cu_seqlens_d", "scores"};
  if ((st = lik_check_devices(ts, names, 4, &p.call.device, &p.call.device_id))) return st;
  if ((st = lik_ctokens_packed(codes, NULL, cu_seqlens_d, p.cs.ncent, NULL,
                               p.call.device != LIK_CUDA, &p.d)))
    return st;
  int64_t grid[2];
  int ndim = 0;
  if (q3) grid[ndim++] = p.cs.nq;
  grid[ndim++] = p.d.count;
  if ((st = check_outputs(scores, NULL, ndim, grid, 0)) ||
      (st = lik_check_disjoint(ts, names, 4, 1)))
    return st;
  p.scores = (float *)scores->data;
  p.score_si = q3 ? scores->strides[0] : 0;
  p.score_sj = scores->strides[ndim - 1];
  lik_call_from(&p.call, opts);
  if (p.cs.nq == 0 || p.d.count == 0) return LIK_OK;
  const lik_backend *b = lik_backend_of(p.call.device);
  return b->plaid_approx ? b->plaid_approx(&p) : lik_no_entry("lik_plaid_approx_score");
}
