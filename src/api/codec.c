/*
 * codec.c — lik_codec_train, lik_codec_compress, lik_codec_decompress:
 * validate once, describe the call, route it to a backend.
 */
#include "../core/checked.h"
#include "../core/backend.h"
#include "../core/context.h"
#include "../core/residual_check.h"

/* A 1-D F32 output of n entries. */
static lik_status check_vector_out(lik_tensor *t, const char *name, int64_t n) {
  lik_status st;
  if ((st = lik_check_output(t, name, LIK_F32, 1, &n))) return st;
  return lik_check_no_overlap(t, name);
}

lik_status lik_codec_train(const lik_tensor *residuals, int nbits, lik_tensor *bucket_cutoffs,
                           lik_tensor *bucket_weights) {
  lik_clear_error();
  lik_status st;
  if ((st = lik_check_nbits(nbits))) return st;
  if ((st = lik_check_tensor(residuals, "residuals", 1, LIK_MAX_DIMS)) ||
      (st = lik_check_float(residuals, "residuals")))
    return st;
  const int64_t nb = (int64_t)1 << nbits;
  if ((st = check_vector_out(bucket_cutoffs, "bucket_cutoffs", nb - 1)) ||
      (st = check_vector_out(bucket_weights, "bucket_weights", nb)))
    return st;
  const lik_tensor *ts[] = {residuals, bucket_cutoffs, bucket_weights};
  const char *names[] = {"residuals", "bucket_cutoffs", "bucket_weights"};
  lik_device_type dev;
  int32_t dev_id;
  if ((st = lik_check_devices(ts, names, 3, &dev, &dev_id)) ||
      (st = lik_check_disjoint(ts, names, 3, 2)))
    return st;
  if (dev == LIK_CUDA) return lik_no_entry("lik_codec_train");
  int64_t n = 1; /* fits int64: lik_check_tensor */
  size_t bytes;
  for (int i = 0; i < residuals->ndim; i++) n *= residuals->shape[i];
  if (lik_bytes(n, sizeof(float), &bytes)) {
    char s[96];
    return lik_fail(LIK_ERR_ALLOC, "residuals: a sample of shape %s does not fit in memory (its fp32 "
                    "copy exceeds the address space)", lik_shape_str(residuals, s));
  }
  if (n == 0) return lik_fail(LIK_ERR_VALUE, "residuals: the sample is empty");
  return lik_cpu_codec_train(lik_context_default(), residuals, nbits, (float *)bucket_cutoffs->data,
                             bucket_cutoffs->strides[0], (float *)bucket_weights->data,
                             bucket_weights->strides[0]);
}

/* [T, d] floats whose d matches the codec's. */
static lik_status check_rows(const lik_tensor *t, const char *name, const lik_codec_view *v) {
  lik_status st;
  if ((st = lik_check_tensor(t, name, 2, 2)) || (st = lik_check_float(t, name))) return st;
  if (t->shape[1] != v->dim)
    return lik_fail(LIK_ERR_SHAPE, "%s: d=%lld does not match centroids' d=%lld", name,
                    (long long)t->shape[1], (long long)v->dim);
  return LIK_OK;
}

lik_status lik_codec_compress(const lik_codec *codec, const lik_tensor *X,
                              const lik_options *opts, lik_tensor *codes,
                              lik_tensor *residuals) {
  lik_clear_error();
  lik_status st;
  lik_codec_problem p = {0};
  if ((st = lik_codec_view_from(codec, 1, 0, &p.codec))) return st;
  if ((st = check_rows(X, "X", &p.codec))) return st;
  const int64_t T = X->shape[0];
  if ((st = lik_ctokens_flat(codes, residuals, &p.codec, 0, &p.tok))) return st;
  if (codes->shape[0] != T)
    return lik_fail(LIK_ERR_SHAPE, "codes: has %lld entries but X has T=%lld tokens",
                    (long long)codes->shape[0], (long long)T);
  if ((st = lik_check_no_overlap(codes, "codes")) ||
      (st = lik_check_no_overlap(residuals, "residuals")))
    return st;
  const lik_tensor *ts[] = {X, codec->centroids, codec->bucket_cutoffs, codes, residuals};
  const char *names[] = {"X", "centroids", "bucket_cutoffs", "codes", "residuals"};
  if ((st = lik_check_devices(ts, names, 5, &p.call.device, &p.call.device_id)) ||
      (st = lik_check_disjoint(ts, names, 5, 2)))
    return st;
  if (T > 0 && p.codec.ncent == 0)
    return lik_fail(LIK_ERR_VALUE, "centroids: C=0 centroids cannot code T=%lld tokens",
                    (long long)T);
  p.x = lik_seqs_from(X);
  lik_call_from(&p.call, opts);
  if (T == 0) return LIK_OK;
  const lik_backend *b = lik_backend_of(p.call.device);
  return b->codec_compress ? b->codec_compress(&p) : lik_no_entry("lik_codec_compress");
}

lik_status lik_codec_decompress(const lik_codec *codec, const lik_tensor *codes,
                                const lik_tensor *residuals, const lik_options *opts,
                                lik_tensor *out) {
  lik_clear_error();
  lik_status st;
  lik_codec_problem p = {0};
  if ((st = lik_codec_view_from(codec, 0, 1, &p.codec))) return st;
  const lik_tensor *ts[] = {codec->centroids, codec->bucket_weights, codes, residuals, out};
  const char *names[] = {"centroids", "bucket_weights", "codes", "residuals", "out"};
  if ((st = lik_check_devices(ts, names, 5, &p.call.device, &p.call.device_id))) return st;
  if ((st = lik_ctokens_flat(codes, residuals, &p.codec, p.call.device != LIK_CUDA, &p.tok))) return st;
  if ((st = check_rows(out, "out", &p.codec)) || (st = lik_check_no_overlap(out, "out")))
    return st;
  if (out->shape[0] != codes->shape[0])
    return lik_fail(LIK_ERR_SHAPE, "out: has %lld rows but codes has T=%lld tokens",
                    (long long)out->shape[0], (long long)codes->shape[0]);
  if ((st = lik_check_disjoint(ts, names, 5, 1))) return st;
  p.x = lik_seqs_from(out);
  lik_call_from(&p.call, opts);
  if (p.tok.len == 0) return LIK_OK;
  const lik_backend *b = lik_backend_of(p.call.device);
  return b->codec_decompress ? b->codec_decompress(&p) : lik_no_entry("lik_codec_decompress");
}
