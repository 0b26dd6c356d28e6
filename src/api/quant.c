/*
 * quant.c — the low-bit calls of lik_experimental.h: lik_quantize_int8,
 * lik_quantize_binary, lik_maxsim_scaled (int8 / fp8), lik_maxsim_binary.
 * Validate once, describe the call, route it to the CPU or CUDA backend.
 */
#include "lik_experimental.h"

#include "../core/backend.h"
#include "../core/quant.h"
#include "../core/validate.h"

static int is_int8_or_fp8(lik_dtype t) {
  return t == LIK_I8 || t == LIK_F8E4M3 || t == LIK_F8E5M2;
}

static lik_status check_normalize(const lik_options *opts, const char *call) {
  if (opts && opts->normalize)
    return lik_fail(LIK_ERR_VALUE,
                    "%s: normalize is not supported on quantised embeddings; quantise "
                    "normalised embeddings (lik_quantize_int8 with normalize)", call);
  return LIK_OK;
}

/* Q [.., Lq, dq] / D [.., Ld, dd]: 2-D or 3-D, the given dtypes checked by the
 * caller; the rest of the call: scales, masks, devices, scores, options. */
static lik_status fill_call(lik_quant_problem *p, const char *call, const lik_tensor *Q,
                            const lik_tensor *scale_Q, const lik_tensor *D,
                            const lik_tensor *scale_D, const lik_tensor *q_mask,
                            const lik_tensor *d_mask, const lik_options *opts,
                            lik_tensor *scores) {
  lik_status st;
  if ((st = check_normalize(opts, call)) ||
      (st = lik_check_no_lengths(opts, "the low-bit calls take no lengths (give padding as "
                                 "q_mask / d_mask)")))
    return st;
  const int64_t lq = Q->shape[Q->ndim - 2], ld = D->shape[D->ndim - 2];
  if (lq > INT32_MAX || ld > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "%s: sequence length %lld exceeds %d", lq > INT32_MAX ? "Q" : "D",
                    (long long)(lq > INT32_MAX ? lq : ld), INT32_MAX);
  lik_problem lp = {0};
  int64_t grid[2];
  int ndim, has_i, has_j;
  if ((st = lik_layout_of(Q, D, &lp, grid, &ndim, &has_i, &has_j))) return st;
  if (scale_Q && (st = lik_check_scale(scale_Q, "scale_Q", Q->ndim - 1, Q->shape, &p->scale_q)))
    return st;
  if (scale_D && (st = lik_check_scale(scale_D, "scale_D", D->ndim - 1, D->shape, &p->scale_d)))
    return st;
  if (q_mask && (st = lik_check_mask(q_mask, "q_mask", Q->ndim - 1, Q->shape))) return st;
  if (d_mask && (st = lik_check_mask(d_mask, "d_mask", D->ndim - 1, D->shape))) return st;
  if ((st = lik_check_output(scores, "scores", LIK_F32, ndim, grid)) ||
      (st = lik_check_no_overlap(scores, "scores")))
    return st;
  const lik_tensor *ts[] = {Q, D, scale_Q, scale_D, q_mask, d_mask, scores};
  const char *names[] = {"Q", "D", "scale_Q", "scale_D", "q_mask", "d_mask", "scores"};
  if ((st = lik_check_devices(ts, names, 7, &p->call.device, &p->call.device_id)) ||
      (st = lik_check_disjoint(ts, names, 7, 1)))
    return st;
  p->q = lik_seqs_from(Q);
  p->d_seqs = lik_seqs_from(D);
  p->q_mask = lik_mask_from(q_mask);
  p->d_mask = lik_mask_from(d_mask);
  p->scores = (float *)scores->data;
  p->score_si = has_i ? scores->strides[0] : 0;
  p->score_sj = has_j ? scores->strides[ndim - 1] : 0;
  lik_call_from(&p->call, opts);
  return LIK_OK;
}

static lik_status route(const lik_quant_problem *p, const char *call) {
  if (p->q.count == 0 || p->d_seqs.count == 0) return LIK_OK;
  const lik_backend *b = lik_backend_of(p->call.device);
  return b->maxsim_quant ? b->maxsim_quant(p) : lik_no_entry(call);
}

lik_status lik_maxsim_scaled(const lik_tensor *Q, const lik_tensor *scale_Q,
                             const lik_tensor *D, const lik_tensor *scale_D,
                             const lik_tensor *q_mask, const lik_tensor *d_mask,
                             const lik_options *opts, lik_tensor *scores) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_tensor(Q, "Q", 2, 3)) || (st = lik_check_tensor(D, "D", 2, 3)))
    return st;
  if (!is_int8_or_fp8(Q->dtype))
    return lik_fail(LIK_ERR_DTYPE,
                    "Q: dtype %s is not supported (int8, float8_e4m3fn, float8_e5m2)",
                    lik_dtype_name(Q->dtype));
  if (D->dtype != Q->dtype)
    return lik_fail(LIK_ERR_DTYPE, "D: dtype %s does not match Q's dtype %s",
                    lik_dtype_name(D->dtype), lik_dtype_name(Q->dtype));
  const int64_t dq = Q->shape[Q->ndim - 1], dd = D->shape[D->ndim - 1];
  if (dq != dd)
    return lik_fail(LIK_ERR_SHAPE, "D: last dimension d=%lld does not match Q's d=%lld",
                    (long long)dd, (long long)dq);
  if (dq < 1 || dq > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "Q: embedding dimension d=%lld is outside [1, %d]",
                    (long long)dq, INT32_MAX);
  if (!scale_Q) return lik_fail(LIK_ERR_NULL, "scale_Q: is NULL");
  if (!scale_D) return lik_fail(LIK_ERR_NULL, "scale_D: is NULL");
  lik_quant_problem p = {0};
  p.kind = Q->dtype == LIK_I8 ? LIK_QK_INT8 : LIK_QK_FP8;
  p.d = dq;
  if ((st = fill_call(&p, "lik_maxsim_scaled", Q, scale_Q, D, scale_D, q_mask, d_mask, opts,
                      scores)))
    return st;
  return route(&p, "lik_maxsim_scaled");
}

lik_status lik_maxsim_binary(const lik_tensor *Q, const lik_tensor *scale_Q,
                             const lik_tensor *D_bits, int64_t d, const lik_tensor *q_mask,
                             const lik_tensor *d_mask, const lik_options *opts,
                             lik_tensor *scores) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_tensor(Q, "Q", 2, 3)) || (st = lik_check_tensor(D_bits, "D_bits", 2, 3)))
    return st;
  if (d < 1 || d > INT32_MAX)
    return lik_fail(LIK_ERR_VALUE, "d: embedding dimension %lld is outside [1, %d]",
                    (long long)d, INT32_MAX);
  if (D_bits->dtype != LIK_U8)
    return lik_fail(LIK_ERR_DTYPE, "D_bits: dtype %s, expected uint8 (packed sign bits)",
                    lik_dtype_name(D_bits->dtype));
  const int64_t nb = lik_bits_bytes(d);
  if (D_bits->shape[D_bits->ndim - 1] != nb)
    return lik_fail(LIK_ERR_SHAPE, "D_bits: last dimension %lld is not ceil(d / 8) = %lld for d=%lld",
                    (long long)D_bits->shape[D_bits->ndim - 1], (long long)nb, (long long)d);
  const int64_t qlast = Q->shape[Q->ndim - 1];
  lik_quant_problem p = {0};
  p.d = d;
  if (Q->dtype == LIK_I8) {
    if (qlast != d)
      return lik_fail(LIK_ERR_SHAPE, "Q: last dimension d=%lld does not match d=%lld",
                      (long long)qlast, (long long)d);
    if (!scale_Q) return lik_fail(LIK_ERR_NULL, "scale_Q: is NULL (int8 queries need a scale)");
    p.kind = LIK_QK_I8_BITS;
  } else if (Q->dtype == LIK_U8) {
    if (qlast != nb)
      return lik_fail(LIK_ERR_SHAPE, "Q: last dimension %lld of bit queries is not ceil(d / 8) = "
                      "%lld for d=%lld", (long long)qlast, (long long)nb, (long long)d);
    if (scale_Q)
      return lik_fail(LIK_ERR_VALUE, "scale_Q: must be NULL for bit queries (uint8)");
    p.kind = LIK_QK_BITS;
  } else {
    return lik_fail(LIK_ERR_DTYPE, "Q: dtype %s is not supported (int8 with scale_Q, or uint8 "
                    "sign bits)", lik_dtype_name(Q->dtype));
  }
  if ((st = fill_call(&p, "lik_maxsim_binary", Q, scale_Q, D_bits, NULL, q_mask, d_mask, opts,
                      scores)))
    return st;
  return route(&p, "lik_maxsim_binary");
}

/* X [lead..., d] and its outputs out [lead..., dout] (dtype odt), scale
 * [lead...] (NULL: none) into p. */
static lik_status fill_quantize(lik_quantize_problem *p, const lik_tensor *X,
                                const lik_options *opts, lik_tensor *out, const char *out_name,
                                lik_dtype odt, int64_t dout, lik_tensor *scale) {
  lik_status st;
  if ((st = lik_check_tensor(X, "X", 1, LIK_MAX_DIMS)) || (st = lik_check_float(X, "X")))
    return st;
  const int nl = X->ndim - 1;
  const int64_t d = X->shape[nl];
  if (d < 1 || d > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "X: embedding dimension d=%lld is outside [1, %d]",
                    (long long)d, INT32_MAX);
  int64_t oshape[LIK_MAX_DIMS];
  for (int i = 0; i < nl; i++) oshape[i] = X->shape[i];
  oshape[nl] = dout;
  if ((st = lik_check_output(out, out_name, odt, X->ndim, oshape)) ||
      (st = lik_check_no_overlap(out, out_name)))
    return st;
  if (scale && ((st = lik_check_output(scale, "scale", LIK_F32, nl, X->shape)) ||
                (st = lik_check_no_overlap(scale, "scale"))))
    return st;
  const lik_tensor *ts[] = {X, out, scale};
  const char *names[] = {"X", out_name, "scale"};
  if ((st = lik_check_devices(ts, names, scale ? 3 : 2, &p->call.device, &p->call.device_id)) ||
      (st = lik_check_disjoint(ts, names, scale ? 3 : 2, scale ? 2 : 1)))
    return st;
  p->x = X->data;
  p->dtype = X->dtype;
  p->d = d;
  p->sxk = X->strides[nl];
  p->nlead = nl;
  for (int i = 0; i < nl; i++) {
    p->lead[i] = X->shape[i];
    p->sx[i] = X->strides[i];
    p->so[i] = out->strides[i];
    p->ss[i] = scale ? scale->strides[i] : 0;
  }
  p->out = out->data;
  p->sok = out->strides[nl];
  p->scale = scale ? (float *)scale->data : NULL;
  lik_call_from(&p->call, opts);
  return LIK_OK;
}

static lik_status route_quantize(const lik_quantize_problem *p, const char *call) {
  const lik_backend *b = lik_backend_of(p->call.device);
  return b->quantize ? b->quantize(p) : lik_no_entry(call);
}

lik_status lik_quantize_int8(const lik_tensor *X, const lik_options *opts, lik_tensor *X_int8,
                             lik_tensor *scale) {
  lik_clear_error();
  lik_status st;
  if (!scale) return lik_fail(LIK_ERR_NULL, "scale: is NULL");
  lik_quantize_problem p = {0};
  if ((st = lik_check_tensor(X, "X", 1, LIK_MAX_DIMS)) ||
      (st = fill_quantize(&p, X, opts, X_int8, "X_int8", LIK_I8,
                          X->shape[X->ndim - 1], scale)))
    return st;
  return route_quantize(&p, "lik_quantize_int8");
}

lik_status lik_quantize_binary(const lik_tensor *X, const lik_options *opts, lik_tensor *bits) {
  lik_clear_error();
  lik_status st;
  lik_quantize_problem p = {0};
  if ((st = lik_check_tensor(X, "X", 1, LIK_MAX_DIMS)) ||
      (st = fill_quantize(&p, X, opts, bits, "bits", LIK_U8,
                          lik_bits_bytes(X->shape[X->ndim - 1]), NULL)))
    return st;
  return route_quantize(&p, "lik_quantize_binary");
}
