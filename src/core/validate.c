/* validate.c — argument checks shared by the public entry points. */
#include "context.h"
#include "validate.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "checked.h"

const char *lik_dtype_name(lik_dtype dtype) {
  switch (dtype) {
    case LIK_F32: return "float32";
    case LIK_F16: return "float16";
    case LIK_BF16: return "bfloat16";
    case LIK_F64: return "float64";
    case LIK_BOOL: return "bool";
    case LIK_U8: return "uint8";
    case LIK_I32: return "int32";
    case LIK_I64: return "int64";
    case LIK_I8: return "int8";
    case LIK_F8E4M3: return "float8_e4m3fn";
    case LIK_F8E5M2: return "float8_e5m2";
  }
  return "unknown";
}

static const char *dims_str(const int64_t *v, int ndim, char *buf) {
  int n = snprintf(buf, 96, "[");
  for (int i = 0; i < ndim && i < LIK_MAX_DIMS; i++)
    n += snprintf(buf + n, (size_t)(96 - n), i ? ", %lld" : "%lld", (long long)v[i]);
  snprintf(buf + n, (size_t)(96 - n), "]");
  return buf;
}

const char *lik_shape_str(const lik_tensor *t, char *buf) {
  return dims_str(t->shape, t->ndim, buf);
}

static const char *strides_str(const lik_tensor *t, char *buf) {
  return dims_str(t->strides, t->ndim, buf);
}

size_t lik_dtype_size(lik_dtype dtype) {
  switch (dtype) {
    case LIK_F64: case LIK_I64: return 8;
    case LIK_F32: case LIK_I32: return 4;
    case LIK_F16: case LIK_BF16: return 2;
    default: return 1;
  }
}

/* Number of elements, or -1 if it overflows int64. */
static int64_t numel(const lik_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    if (lik_mul_i64(n, t->shape[i], &n)) return -1;
  return n;
}

/* Element offsets a non-empty view reaches: [*lo, *hi], relative to data.
 * Nonzero if an offset or the byte extent does not fit int64. */
static int extent(const lik_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t a = 0, b = 0, step, bytes;
  for (int i = 0; i < t->ndim; i++) {
    if (lik_mul_i64(t->shape[i] - 1, t->strides[i], &step) ||
        lik_add_i64(step < 0 ? a : b, step, step < 0 ? &a : &b))
      return 1;
  }
  *lo = a;
  *hi = b;
  return lik_sub_i64(b, a, &step) || lik_add_i64(step, 1, &step) ||
         lik_mul_i64(step, (int64_t)lik_dtype_size(t->dtype), &bytes);
}

lik_status lik_check_tensor(const lik_tensor *t, const char *name, int min_ndim,
                            int max_ndim) {
  if (!t) return lik_fail(LIK_ERR_NULL, "%s: is NULL", name);
  if (t->ndim < min_ndim || t->ndim > max_ndim) {
    if (min_ndim == max_ndim)
      return lik_fail(LIK_ERR_SHAPE, "%s: expected %d dimensions, got %d", name,
                      min_ndim, t->ndim);
    return lik_fail(LIK_ERR_SHAPE, "%s: expected %d to %d dimensions, got %d", name,
                    min_ndim, max_ndim, t->ndim);
  }
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0)
      return lik_fail(LIK_ERR_SHAPE, "%s: dimension %d has negative size %lld", name, i,
                      (long long)t->shape[i]);
  if ((unsigned)t->dtype > LIK_F8E5M2)
    return lik_fail(LIK_ERR_DTYPE, "%s: unknown dtype code %d", name, (int)t->dtype);
  if (t->device != 0 && t->device != LIK_CPU && t->device != LIK_CUDA)
    return lik_fail(LIK_ERR_DEVICE, "%s: unknown device type %d", name, (int)t->device);
  const int64_t n = numel(t);
  if (n < 0) {
    char buf[96];
    return lik_fail(LIK_ERR_SHAPE, "%s: shape %s has more elements than int64 can count",
                    name, lik_shape_str(t, buf));
  }
  if (!t->data && n > 0)
    return lik_fail(LIK_ERR_NULL, "%s: data is NULL but the shape has elements", name);
  int64_t lo, hi;
  if (n > 0 && extent(t, &lo, &hi)) {
    char sb[96], tb[96];
    return lik_fail(LIK_ERR_SHAPE, "%s: strides %s over shape %s reach more bytes than int64 "
                    "can count", name, strides_str(t, sb), lik_shape_str(t, tb));
  }
  return LIK_OK;
}

lik_status lik_check_no_overlap(const lik_tensor *t, const char *name) {
  if (numel(t) == 0) return LIK_OK; /* nothing is written (numpy gives such views stride 0) */
  /* Dims of size > 1 by ascending |stride|: each must step past everything
   * the smaller ones reach (a sufficient test; every dense or sliced layout
   * passes it). */
  int dims[LIK_MAX_DIMS], n = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 2) continue;
    int j = n++;
    for (; j > 0 && llabs(t->strides[dims[j - 1]]) > llabs(t->strides[i]); j--)
      dims[j] = dims[j - 1];
    dims[j] = i;
  }
  int64_t reach = 0; /* extent is checked: no overflow below */
  for (int j = 0; j < n; j++) {
    const int i = dims[j];
    const int64_t a = llabs(t->strides[i]);
    if (a == 0)
      return lik_fail(LIK_ERR_SHAPE,
                      "%s: stride 0 over dimension %d of size %lld would write several "
                      "outputs to one element",
                      name, i, (long long)t->shape[i]);
    if (a <= reach) {
      char sb[96], tb[96];
      return lik_fail(LIK_ERR_SHAPE,
                      "%s: strides %s over shape %s make elements overlap (dimension %d "
                      "steps %lld elements, inside the %lld the smaller strides reach); "
                      "each output element must be written once",
                      name, strides_str(t, sb), lik_shape_str(t, tb), i, (long long)a,
                      (long long)reach + 1);
    }
    reach += (t->shape[i] - 1) * a;
  }
  return LIK_OK;
}

/* Byte range [*lo, *hi) of a non-empty view whose extent lik_check_tensor
 * accepted (so nothing below overflows). */
static void byte_range(const lik_tensor *t, uintptr_t *lo, uintptr_t *hi) {
  int64_t a, b;
  extent(t, &a, &b);
  const int64_t es = (int64_t)lik_dtype_size(t->dtype);
  *lo = (uintptr_t)t->data + (uintptr_t)(a * es);
  *hi = (uintptr_t)t->data + (uintptr_t)((b + 1) * es);
}

lik_status lik_check_disjoint(const lik_tensor *const *ts, const char *const *names, int n,
                              int nout) {
  for (int i = n - nout; i < n; i++) {
    if (!ts[i] || numel(ts[i]) == 0) continue;
    uintptr_t lo, hi;
    byte_range(ts[i], &lo, &hi);
    for (int j = 0; j < n; j++) {
      if (j == i || !ts[j] || numel(ts[j]) == 0) continue;
      uintptr_t lo2, hi2;
      byte_range(ts[j], &lo2, &hi2);
      if (lo < hi2 && lo2 < hi)
        return lik_fail(LIK_ERR_VALUE,
                        "%s: overlaps %s in memory (%s: %zu bytes at %p, %s: %zu bytes at "
                        "%p); an output may not share memory with %s",
                        names[i], names[j], names[i], (size_t)(hi - lo), (void *)lo, names[j],
                        (size_t)(hi2 - lo2), (void *)lo2,
                        j >= n - nout ? "another output" : "an input");
    }
  }
  return LIK_OK;
}

lik_status lik_check_float(const lik_tensor *t, const char *name) {
  if (t->dtype == LIK_F32 || t->dtype == LIK_F16 || t->dtype == LIK_BF16 ||
      t->dtype == LIK_F64)
    return LIK_OK;
  return lik_fail(LIK_ERR_DTYPE,
                  "%s: dtype %s is not supported (float32, float16, bfloat16, float64)",
                  name, lik_dtype_name(t->dtype));
}

lik_status lik_check_index(const lik_tensor *t, const char *name, int min_ndim, int max_ndim) {
  lik_status st;
  if ((st = lik_check_tensor(t, name, min_ndim, max_ndim))) return st;
  if (t->dtype != LIK_I32 && t->dtype != LIK_I64)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s, expected int32 or int64", name,
                    lik_dtype_name(t->dtype));
  return LIK_OK;
}

static int same_shape(const lik_tensor *t, int ndim, const int64_t *shape) {
  if (t->ndim != ndim) return 0;
  for (int i = 0; i < ndim; i++)
    if (t->shape[i] != shape[i]) return 0;
  return 1;
}

lik_status lik_check_mask(const lik_tensor *m, const char *name, int ndim,
                          const int64_t *shape) {
  lik_status st = lik_check_tensor(m, name, 0, LIK_MAX_DIMS);
  if (st) return st;
  if (m->dtype != LIK_BOOL && m->dtype != LIK_U8)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s is not a mask dtype (bool or uint8)",
                    name, lik_dtype_name(m->dtype));
  if (!same_shape(m, ndim, shape)) {
    char got[96], want[96];
    return lik_fail(LIK_ERR_SHAPE, "%s must be %s (one entry per token), got %s", name,
                    dims_str(shape, ndim, want), lik_shape_str(m, got));
  }
  return LIK_OK;
}

lik_status lik_check_output(const lik_tensor *t, const char *name, lik_dtype dtype,
                            int ndim, const int64_t *shape) {
  lik_status st = lik_check_tensor(t, name, 0, LIK_MAX_DIMS);
  if (st) return st;
  if (t->dtype != dtype)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s, expected %s", name,
                    lik_dtype_name(t->dtype), lik_dtype_name(dtype));
  if (!same_shape(t, ndim, shape)) {
    char got[96], want[96];
    return lik_fail(LIK_ERR_SHAPE, "%s: shape %s, expected %s", name,
                    lik_shape_str(t, got), dims_str(shape, ndim, want));
  }
  return LIK_OK;
}

lik_status lik_pairs_layout(const lik_tensor *Q, const lik_tensor *D, lik_problem *p) {
  for (int k = 0; k < 2; k++) {
    const lik_tensor *t = k ? D : Q;
    if (t && t->ndim != 3)
      return lik_fail(LIK_ERR_SHAPE, "%s: pairs take Q and D as [B, L, d], got %d-D",
                      k ? "D" : "Q", t->ndim);
  }
  lik_status st = lik_check_embeddings(Q, D, 3, 3, 3, 3, 1);
  if (st) return st;
  if (D->shape[0] != Q->shape[0])
    return lik_fail(LIK_ERR_SHAPE,
                    "D: batch B=%lld does not match Q's B=%lld (pairs need Q.shape[0] == "
                    "D.shape[0])",
                    (long long)D->shape[0], (long long)Q->shape[0]);
  p->pairing = LIK_PAIRING_KD; /* K = 1: pair b scores (Q[b], D[b]) */
  p->ncand = 1;
  return LIK_OK;
}

void lik_grid_strides(const lik_tensor *t, int ndim, int has_i, int has_j, int64_t *si,
                      int64_t *sj) {
  *si = has_i ? t->strides[0] : 0;
  *sj = has_j ? t->strides[ndim - 1] : 0;
}

void lik_set_argmax(lik_out *o, const lik_tensor *argmax, int ndim, int has_i, int has_j) {
  if (!argmax) return;
  o->argmax = (int32_t *)argmax->data;
  lik_grid_strides(argmax, ndim, has_i, has_j, &o->argmax_si, &o->argmax_sj);
  o->argmax_ss = argmax->strides[ndim];
}

lik_status lik_fill_scores(lik_problem *p, const lik_tensor *scores, int ndim,
                           const int64_t *shape) {
  const int f64 = scores && scores->dtype == LIK_F64;
  if (f64 && p->q.dtype != LIK_F64)
    return lik_fail(LIK_ERR_DTYPE,
                    "scores: dtype float64 needs float64 Q and D (got %s, whose scores "
                    "are fp32 sums: pass float32 scores)",
                    lik_dtype_name(p->q.dtype));
  lik_status st = lik_check_output(scores, "scores", f64 ? LIK_F64 : LIK_F32, ndim, shape);
  if (st || (st = lik_check_no_overlap(scores, "scores"))) return st;
  if (f64)
    p->out.scores_f64 = (double *)scores->data;
  else
    p->out.scores = (float *)scores->data;
  return LIK_OK;
}

static lik_device_type device_of(const lik_tensor *t) {
  return t->device == LIK_CUDA ? LIK_CUDA : LIK_CPU;
}

lik_status lik_check_devices(const lik_tensor *const *ts, const char *const *names,
                             int n, lik_device_type *device, int32_t *device_id) {
  int first = -1;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    const lik_tensor *a = ts[first], *b = ts[i];
    if (device_of(a) != device_of(b) ||
        (device_of(a) == LIK_CUDA && a->device_id != b->device_id))
      return lik_fail(LIK_ERR_DEVICE,
                      "%s is on %s:%d but %s is on %s:%d (all tensors must be on the same device)",
                      names[i],
                      device_of(b) == LIK_CUDA ? "cuda" : "cpu", b->device_id,
                      names[first], device_of(a) == LIK_CUDA ? "cuda" : "cpu",
                      a->device_id);
  }
  *device = first < 0 ? LIK_CPU : device_of(ts[first]);
  *device_id = first < 0 ? 0 : ts[first]->device_id;
  return LIK_OK;
}

lik_status lik_check_embeddings(const lik_tensor *Q, const lik_tensor *D, int q_min,
                                int q_max, int d_min, int d_max, int padded) {
  lik_status st;
  if ((st = lik_check_tensor(Q, "Q", q_min, q_max)) || (st = lik_check_float(Q, "Q")) ||
      (st = lik_check_tensor(D, "D", d_min, d_max)) || (st = lik_check_float(D, "D")))
    return st;
  if (Q->dtype != D->dtype)
    return lik_fail(LIK_ERR_DTYPE, "D: dtype %s does not match Q's dtype %s",
                    lik_dtype_name(D->dtype), lik_dtype_name(Q->dtype));
  const int64_t dq = Q->shape[Q->ndim - 1], dd = D->shape[D->ndim - 1];
  if (dq != dd)
    return lik_fail(LIK_ERR_SHAPE,
                    "D: last dimension d=%lld does not match Q's d=%lld (Q and D must share the "
                    "embedding dim)",
                    (long long)dd, (long long)dq);
  if (dq < 1 || dq > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "Q: embedding dimension d=%lld is outside [1, %d]",
                    (long long)dq, INT32_MAX);
  if (!padded) return LIK_OK;
  const int64_t lq = Q->shape[Q->ndim - 2], ld = D->shape[D->ndim - 2];
  if (lq > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "Q: sequence length Lq=%lld exceeds %d (argmax is int32)",
                    (long long)lq, INT32_MAX);
  if (ld > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "D: sequence length Ld=%lld exceeds %d (argmax is int32)",
                    (long long)ld, INT32_MAX);
  return LIK_OK;
}

lik_status lik_layout_of(const lik_tensor *Q, const lik_tensor *D, lik_problem *p,
                         int64_t grid[2], int *ndim, int *has_i, int *has_j) {
  const int q3 = Q->ndim == 3;
  *ndim = 0;
  *has_i = q3;
  if (D->ndim == 4) {
    if (!q3)
      return lik_fail(LIK_ERR_SHAPE,
                      "D: a 4-D D [Nq, K, Ld, d] (KD layout) needs Q to be 3-D [Nq, Lq, d], got %d-D",
                      Q->ndim);
    if (D->shape[0] != Q->shape[0])
      return lik_fail(LIK_ERR_SHAPE,
                      "D: KD layout D[Nq, K, Ld, d] has Nq=%lld but Q has Nq=%lld (KD layout "
                      "needs D.shape[0] == Q.shape[0])",
                      (long long)D->shape[0], (long long)Q->shape[0]);
    p->pairing = LIK_PAIRING_KD;
    p->ncand = D->shape[1];
    grid[(*ndim)++] = Q->shape[0];
    grid[(*ndim)++] = D->shape[1];
    *has_j = 1;
    return LIK_OK;
  }
  p->pairing = LIK_PAIRING_CROSS;
  p->ncand = D->ndim == 3 ? D->shape[0] : 1;
  if (q3) grid[(*ndim)++] = Q->shape[0];
  if (D->ndim == 3) grid[(*ndim)++] = D->shape[0];
  *has_j = D->ndim == 3;
  return LIK_OK;
}

/* One side's lengths (opts->q_lengths / d_lengths) over the sequences of x. */
static lik_status seq_lengths(lik_seqs *s, const lik_tensor *len, const char *name,
                              const lik_tensor *x, const char *xname, const lik_problem *p) {
  const int nd = x->ndim - 2;
  lik_status st = lik_check_tensor(len, name, nd, nd);
  if (st) return st;
  if (len->dtype != LIK_I32)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s, expected int32", name,
                    lik_dtype_name(len->dtype));
  if (!same_shape(len, nd, x->shape)) {
    char got[96], want[96];
    return lik_fail(LIK_ERR_SHAPE, "%s: shape %s does not match %s's sequences %s", name,
                    lik_shape_str(len, got), xname, dims_str(x->shape, nd, want));
  }
  if (device_of(len) != p->call.device || (p->call.device == LIK_CUDA && len->device_id != p->call.device_id))
    return lik_fail(LIK_ERR_DEVICE, "%s: on a different device than %s", name, xname);
  s->lens = (const int32_t *)len->data;
  s->lens_sn = nd >= 1 ? len->strides[nd - 1] : 0;
  s->lens_sg = nd == 2 ? len->strides[0] : 0;
  if (p->call.device == LIK_CUDA || !s->lens) return LIK_OK; /* device data: clamped there */
  for (int64_t n = 0; n < s->count; n++) {
    const int64_t v = lik_lens_at(s, n);
    if (v < 0 || v > s->len)
      return lik_fail(LIK_ERR_VALUE, "%s: entry %lld is %lld, outside [0, %s's length %lld]", name,
                      (long long)n, (long long)v, xname, (long long)s->len);
  }
  return LIK_OK;
}

static lik_status check_precision(const lik_options *opts) {
  if (opts->fp32_precision != LIK_FP32_HIGHEST && opts->fp32_precision != LIK_FP32_TF32)
    return lik_fail(LIK_ERR_VALUE, "opts: fp32_precision %d is not LIK_FP32_HIGHEST (0) or "
                    "LIK_FP32_TF32 (1)", (int)opts->fp32_precision);
  return LIK_OK;
}

lik_status lik_fill_lengths(lik_problem *p, const lik_tensor *Q, const lik_tensor *D,
                            const lik_options *opts) {
  lik_status st;
  if (!opts) return LIK_OK;
  if ((st = check_precision(opts))) return st;
  if (opts->q_lengths && (st = seq_lengths(&p->q, opts->q_lengths, "q_lengths", Q, "Q", p)))
    return st;
  if (opts->d_lengths && (st = seq_lengths(&p->d, opts->d_lengths, "d_lengths", D, "D", p)))
    return st;
  return LIK_OK;
}

lik_status lik_check_no_lengths(const lik_options *opts, const char *why) {
  lik_status st;
  if (opts && (st = check_precision(opts))) return st;
  if (opts && (opts->q_lengths || opts->d_lengths))
    return lik_fail(LIK_ERR_VALUE, "%s: %s; pass NULL",
                    opts->q_lengths ? "q_lengths" : "d_lengths", why);
  return LIK_OK;
}

lik_seqs lik_seqs_from(const lik_tensor *t) {
  lik_seqs s = {0};
  const int nd = t->ndim;
  s.data = t->data;
  s.dtype = t->dtype;
  s.dim = t->shape[nd - 1];
  s.len = t->shape[nd - 2];
  s.sk = t->strides[nd - 1];
  s.sl = t->strides[nd - 2];
  if (nd == 2) {
    s.count = 1;
  } else if (nd == 3) {
    s.count = t->shape[0];
    s.sn = t->strides[0];
  } else { /* KD [Nq, K, L, d]: sequence i*K + k */
    s.count = t->shape[0] * t->shape[1];
    s.group = t->shape[1];
    s.sg = t->strides[0];
    s.sn = t->strides[1];
  }
  return s;
}

lik_mask lik_mask_from(const lik_tensor *m) {
  lik_mask k = {0};
  if (!m) return k;
  const int nd = m->ndim;
  k.data = (const uint8_t *)m->data;
  k.sl = m->strides[nd - 1];
  if (nd >= 2) k.sn = m->strides[nd - 2];
  if (nd == 3) k.sg = m->strides[0];
  return k;
}

/* The common part of every forward: masks, devices, options. */
lik_status lik_fill_common(lik_problem *p, const lik_tensor *Q, const lik_tensor *D,
                              const lik_tensor *q_mask, const lik_tensor *d_mask,
                              const lik_tensor *out1, const lik_tensor *out2,
                              const char *out2_name, const lik_options *opts) {
  lik_status st;
  /* A mask covers every dimension of its tensor but the last (d). */
  if (q_mask && (st = lik_check_mask(q_mask, "q_mask", Q->ndim - 1, Q->shape))) return st;
  if (d_mask && (st = lik_check_mask(d_mask, "d_mask", D->ndim - 1, D->shape))) return st;
  const lik_tensor *ts[] = {Q, D, q_mask, d_mask, out1, out2};
  const char *names[] = {"Q", "D", "q_mask", "d_mask", "scores", out2_name};
  if ((st = lik_check_devices(ts, names, 6, &p->call.device, &p->call.device_id))) return st;
  p->q = lik_seqs_from(Q);
  p->d = lik_seqs_from(D);
  p->q_mask = lik_mask_from(q_mask);
  p->d_mask = lik_mask_from(d_mask);
  lik_call_from(&p->call, opts);
  return lik_fill_lengths(p, Q, D, opts);
}

lik_status lik_no_cuda_backend(void) {
  return lik_fail(LIK_ERR_UNSUPPORTED,
                  "tensors are on CUDA but this build of lik has no CUDA backend");
}
