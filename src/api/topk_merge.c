/*
 * topk_merge.c — lik_topk_merge: validate once (shapes, dtypes, devices, then
 * the lists' lengths, order and count), route to the CPU merge.
 */
#include "../core/topk.h"
#include "../core/validate.h"

lik_status lik_topk_merge(const lik_tensor *scores, const lik_tensor *indices,
                          const lik_tensor *lengths, int64_t top_k, const lik_options *opts,
                          lik_tensor *out_scores, lik_tensor *out_indices) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_tensor(scores, "scores", 3, 3))) return st;
  if (scores->dtype != LIK_F32)
    return lik_fail(LIK_ERR_DTYPE, "scores: dtype %s, expected float32",
                    lik_dtype_name(scores->dtype));
  if ((st = lik_check_tensor(indices, "indices", 3, 3))) return st;
  if (indices->dtype != LIK_I64)
    return lik_fail(LIK_ERR_DTYPE, "indices: dtype %s, expected int64",
                    lik_dtype_name(indices->dtype));
  const int64_t R = scores->shape[0], nq = scores->shape[1], K = scores->shape[2];
  if ((st = lik_check_output(indices, "indices", LIK_I64, 3, scores->shape))) return st;
  if (lengths) {
    const int64_t lshape[2] = {R, nq};
    if ((st = lik_check_tensor(lengths, "lengths", 2, 2))) return st;
    if (lengths->dtype != LIK_I64)
      return lik_fail(LIK_ERR_DTYPE, "lengths: dtype %s, expected int64",
                      lik_dtype_name(lengths->dtype));
    if ((st = lik_check_output(lengths, "lengths", LIK_I64, 2, lshape))) return st;
  }
  if (top_k <= 0) return lik_fail(LIK_ERR_VALUE, "top_k: got %lld, but top_k must be positive (>= 1)", (long long)top_k);
  const int64_t oshape[2] = {nq, top_k};
  if ((st = lik_check_output(out_scores, "out_scores", LIK_F32, 2, oshape)) ||
      (st = lik_check_output(out_indices, "out_indices", LIK_I64, 2, oshape)) ||
      (st = lik_check_no_overlap(out_scores, "out_scores")) ||
      (st = lik_check_no_overlap(out_indices, "out_indices")))
    return st;
  const lik_tensor *all[5] = {scores, indices, lengths, out_scores, out_indices};
  static const char *const names[5] = {"scores", "indices", "lengths", "out_scores",
                                       "out_indices"};
  lik_device_type dev;
  int32_t dev_id;
  if ((st = lik_check_devices(all, names, 5, &dev, &dev_id)) ||
      (st = lik_check_disjoint(all, names, 5, 2)))
    return st;
  if (dev == LIK_CUDA)
    return lik_fail(LIK_ERR_UNSUPPORTED,
                    "lik_topk_merge runs on the CPU: the candidates are on cuda:%d (copy "
                    "them to the host; they are small)",
                    dev_id);

  lik_merge m = {0};
  m.s = (const float *)scores->data;
  m.ix = (const int64_t *)indices->data;
  m.len = lengths ? (const int64_t *)lengths->data : NULL;
  m.R = R;
  m.nq = nq;
  m.K = K;
  m.k = top_k;
  m.s_r = scores->strides[0];
  m.s_q = scores->strides[1];
  m.s_c = scores->strides[2];
  m.i_r = indices->strides[0];
  m.i_q = indices->strides[1];
  m.i_c = indices->strides[2];
  m.l_r = lengths ? lengths->strides[0] : 0;
  m.l_q = lengths ? lengths->strides[1] : 0;
  m.out_s = (float *)out_scores->data;
  m.out_i = (int64_t *)out_indices->data;
  m.o_sq = out_scores->strides[0];
  m.o_sc = out_scores->strides[1];
  m.o_iq = out_indices->strides[0];
  m.o_ic = out_indices->strides[1];
  lik_call_from(&m.call, opts);
  if ((st = lik_check_merge_lists(&m))) return st;
  return lik_cpu_topk_merge(&m);
}
