/*
 * residual.c — argument checks of the codec and residual-scoring calls
 * (lik_experimental.h): the codec, the compressed tokens (flat, padded,
 * packed) and their values where they live on the host.
 */
#include "residual_check.h"

lik_status lik_check_nbits(int nbits) {
  if (nbits == 1 || nbits == 2 || nbits == 4 || nbits == 8) return LIK_OK;
  return lik_fail(LIK_ERR_VALUE, "nbits: %d, must be 1, 2, 4 or 8", nbits);
}

/* A 1-D F32/F16/BF16 vector of n entries. */
static lik_status check_vector(const lik_tensor *t, const char *name, int64_t n, int nbits,
                               const void **data, lik_dtype *dtype, int64_t *stride) {
  lik_status st;
  if ((st = lik_check_tensor(t, name, 1, 1))) return st;
  if (t->dtype != LIK_F32 && t->dtype != LIK_F16 && t->dtype != LIK_BF16)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s, expected float32, float16 or bfloat16", name,
                    lik_dtype_name(t->dtype));
  if (t->shape[0] != n)
    return lik_fail(LIK_ERR_SHAPE, "%s: has %lld entries, expected %lld for nbits=%d", name,
                    (long long)t->shape[0], (long long)n, nbits);
  *data = t->data;
  *dtype = t->dtype;
  *stride = t->strides[0];
  return LIK_OK;
}

lik_status lik_codec_view_from(const lik_codec *c, int need_cutoffs, int need_weights,
                               lik_codec_view *v) {
  lik_status st;
  if (!c) return lik_fail(LIK_ERR_NULL, "codec: is NULL");
  if ((st = lik_check_nbits(c->nbits))) return st;
  if (c->layout != LIK_RESIDUAL_COLBERT && c->layout != LIK_RESIDUAL_LIK)
    return lik_fail(LIK_ERR_VALUE, "codec.layout: %d, must be LIK_RESIDUAL_COLBERT (0) or "
                    "LIK_RESIDUAL_LIK (1)", (int)c->layout);
  const lik_tensor *ct = c->centroids;
  if ((st = lik_check_tensor(ct, "centroids", 2, 2))) return st;
  if (ct->dtype != LIK_F32 && ct->dtype != LIK_F16 && ct->dtype != LIK_BF16)
    return lik_fail(LIK_ERR_DTYPE, "centroids: dtype %s, expected float32, float16 or bfloat16",
                    lik_dtype_name(ct->dtype));
  const int64_t d = ct->shape[1];
  if (d < 1 || d > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "centroids: embedding dimension d=%lld is outside [1, %d]",
                    (long long)d, INT32_MAX);
  if ((d * c->nbits) % 8)
    return lik_fail(LIK_ERR_VALUE,
                    "centroids: d=%lld times nbits=%d is %lld bits, not a whole number of bytes",
                    (long long)d, c->nbits, (long long)(d * c->nbits));
  if (ct->shape[0] > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "centroids: C=%lld centroids exceed the int32 code range",
                    (long long)ct->shape[0]);
  *v = (lik_codec_view){0};
  v->cent = ct->data;
  v->cent_dtype = ct->dtype;
  v->ncent = ct->shape[0];
  v->dim = d;
  v->cent_sc = ct->strides[0];
  v->cent_sk = ct->strides[1];
  v->nbits = c->nbits;
  v->layout = c->layout;
  v->width = d * c->nbits / 8;
  const int64_t nb = (int64_t)1 << c->nbits;
  if (need_cutoffs) {
    if (!c->bucket_cutoffs) return lik_fail(LIK_ERR_NULL, "bucket_cutoffs: is NULL");
    if ((st = check_vector(c->bucket_cutoffs, "bucket_cutoffs", nb - 1, c->nbits, &v->cutoffs,
                           &v->cutoffs_dtype, &v->cutoffs_s)))
      return st;
  }
  if (need_weights) {
    if (!c->bucket_weights) return lik_fail(LIK_ERR_NULL, "bucket_weights: is NULL");
    if ((st = check_vector(c->bucket_weights, "bucket_weights", nb, c->nbits, &v->weights,
                           &v->weights_dtype, &v->weights_s)))
      return st;
  }
  return LIK_OK;
}

/* codes: ndim dims, I32/I64, leading shape lead[0 .. ndim). */
static lik_status check_codes(const lik_tensor *codes, int ndim, const int64_t *lead,
                              const char *lead_what) {
  lik_status st;
  if ((st = lik_check_index(codes, "codes", ndim, ndim))) return st;
  for (int i = 0; lead && i < ndim; i++)
    if (codes->shape[i] != lead[i]) {
      char buf[96];
      return lik_fail(LIK_ERR_SHAPE, "codes: shape %s does not match %s", lik_shape_str(codes, buf),
                      lead_what);
    }
  return LIK_OK;
}

/* residuals: U8 [lead..., width]. */
static lik_status check_residuals(const lik_tensor *r, int ndim, const int64_t *lead,
                                  const char *lead_what, const lik_codec_view *v) {
  lik_status st;
  if ((st = lik_check_tensor(r, "residuals", ndim, ndim))) return st;
  if (r->dtype != LIK_U8)
    return lik_fail(LIK_ERR_DTYPE, "residuals: dtype %s, expected uint8", lik_dtype_name(r->dtype));
  for (int i = 0; i < ndim - 1; i++)
    if (r->shape[i] != lead[i]) {
      char buf[96];
      return lik_fail(LIK_ERR_SHAPE, "residuals: shape %s does not match %s",
                      lik_shape_str(r, buf), lead_what);
    }
  if (r->shape[ndim - 1] != v->width)
    return lik_fail(LIK_ERR_SHAPE,
                    "residuals: last dimension %lld does not match d*nbits/8 = %lld (d=%lld, "
                    "nbits=%d)",
                    (long long)r->shape[ndim - 1], (long long)v->width, (long long)v->dim,
                    v->nbits);
  return LIK_OK;
}

/* Every read code in [0, C) (host data only). */
static lik_status check_code_values(const lik_ctokens *ct, int64_t ncent, int padded) {
  for (int64_t n = 0; n < ct->count; n++) {
    const int64_t len = lik_ct_len(ct, n);
    for (int64_t l = 0; l < len; l++) {
      const int64_t v = lik_ct_code(ct, lik_ct_code_off(ct, n, l));
      if (v >= 0 && v < ncent) continue;
      if (padded)
        return lik_fail(LIK_ERR_VALUE, "codes: codes[%lld, %lld]=%lld is outside [0, C=%lld)",
                        (long long)n, (long long)l, (long long)v, (long long)ncent);
      return lik_fail(LIK_ERR_VALUE, "codes: codes[%lld]=%lld is outside [0, C=%lld)",
                      (long long)lik_ct_tok(ct, n, l), (long long)v, (long long)ncent);
    }
  }
  return LIK_OK;
}

static void fill_tokens(lik_ctokens *ct, const lik_tensor *codes, const lik_tensor *res, int padded) {
  ct->codes = codes->data;
  ct->codes_dtype = codes->dtype;
  ct->res = (const uint8_t *)res->data;
  const int nd = codes->ndim;
  ct->code_s = codes->strides[nd - 1];
  ct->res_st = res->strides[nd - 1];
  ct->res_sp = res->strides[nd];
  if (padded) {
    ct->code_sn = codes->strides[0];
    ct->res_sn = res->strides[0];
  }
}

lik_status lik_ctokens_flat(const lik_tensor *codes, const lik_tensor *residuals,
                            const lik_codec_view *v, int check_values, lik_ctokens *ct) {
  lik_status st;
  if ((st = check_codes(codes, 1, NULL, NULL))) return st;
  const int64_t T = codes->shape[0];
  if ((st = check_residuals(residuals, 2, &T, "codes' [T]", v))) return st;
  *ct = (lik_ctokens){0};
  fill_tokens(ct, codes, residuals, 0);
  ct->count = 1;
  ct->len = T;
  return check_values ? check_code_values(ct, v->ncent, 0) : LIK_OK;
}

lik_status lik_ctokens_padded(const lik_tensor *codes, const lik_tensor *residuals,
                              const lik_tensor *doc_lengths, const lik_codec_view *v,
                              int on_host, lik_ctokens *ct) {
  lik_status st;
  if ((st = check_codes(codes, 2, NULL, NULL))) return st;
  if ((st = check_residuals(residuals, 3, codes->shape, "codes' [Nd, Ld]", v))) return st;
  if ((st = lik_check_index(doc_lengths, "doc_lengths", 1, 1))) return st;
  const int64_t nd = codes->shape[0], ld = codes->shape[1];
  if (doc_lengths->shape[0] != nd)
    return lik_fail(LIK_ERR_SHAPE, "doc_lengths: has %lld entries but codes has Nd=%lld",
                    (long long)doc_lengths->shape[0], (long long)nd);
  if (ld > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "codes: Ld=%lld exceeds the int32 argmax range",
                    (long long)ld);
  *ct = (lik_ctokens){0};
  fill_tokens(ct, codes, residuals, 1);
  ct->count = nd;
  ct->len = ld;
  ct->lengths = (lik_index){doc_lengths->data, doc_lengths->dtype, doc_lengths->strides[0]};
  if (!on_host) return LIK_OK;
  for (int64_t n = 0; n < nd; n++) {
    const int64_t len = lik_index_at(&ct->lengths, n);
    if (len < 0 || len > ld)
      return lik_fail(LIK_ERR_VALUE, "doc_lengths: doc_lengths[%lld]=%lld is outside [0, Ld=%lld]",
                      (long long)n, (long long)len, (long long)ld);
  }
  return check_code_values(ct, v->ncent, 1);
}

lik_status lik_ctokens_packed(const lik_tensor *codes, const lik_tensor *residuals,
                              const lik_tensor *cu_seqlens_d, int64_t ncent,
                              const lik_codec_view *v, int on_host, lik_ctokens *ct) {
  lik_status st;
  if ((st = check_codes(codes, 1, NULL, NULL))) return st;
  const int64_t T = codes->shape[0];
  if (residuals && (st = check_residuals(residuals, 2, &T, "codes' [T]", v))) return st;
  *ct = (lik_ctokens){0};
  if (residuals) {
    fill_tokens(ct, codes, residuals, 0);
  } else {
    ct->codes = codes->data;
    ct->codes_dtype = codes->dtype;
    ct->code_s = codes->strides[0];
  }
  if ((st = lik_check_cu_seqlens(cu_seqlens_d, "cu_seqlens_d", T, "codes' T", on_host,
                                 &ct->offsets, &ct->count, &ct->len)))
    return st;
  return on_host ? check_code_values(ct, ncent, 0) : LIK_OK;
}
