/*
 * plaid_index.c — the PLAID index calls (lik_experimental.h): validate once,
 * resolve the options, route to the index engine (src/index).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/backend.h"
#include "../core/residual_check.h"
#include "../index/index_internal.h"

static lik_status on_cpu(const lik_tensor *const *ts, const char *const *names, int n,
                         const char *call) {
  lik_device_type dev;
  int32_t id;
  lik_status st = lik_check_devices(ts, names, n, &dev, &id);
  if (st) return st;
  return dev == LIK_CUDA ? lik_no_entry(call) : LIK_OK;
}

/* A count option: >= 0, 0 the default. */
typedef struct {
  const char *name;
  int64_t v;
} count_opt;

/* Every one of the n count options of what ("options", "params") >= 0. */
static lik_status check_counts(const char *what, const count_opt *c, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (c[i].v < 0)
      return lik_fail(LIK_ERR_VALUE, "%s.%s: %lld, must be >= 0 (0 = the default)", what,
                      c[i].name, (long long)c[i].v);
  return LIK_OK;
}

static lik_status resolve_build(const lik_plaid_build_options *o, lik_plaid_bopts *b) {
  static const lik_plaid_build_options defaults = LIK_PLAID_BUILD_OPTIONS_INIT;
  if (!o) o = &defaults;
  memset(b, 0, sizeof *b);
  b->nbits = o->nbits ? o->nbits : 2;
  b->niters = o->kmeans_niters ? o->kmeans_niters : 4;
  b->num_centroids = o->num_centroids;
  b->total_tokens = o->total_tokens;
  b->max_ppc = o->max_points_per_centroid ? o->max_points_per_centroid : 256;
  b->sample_docs = o->sample_docs;
  b->chunk_docs = o->chunk_docs ? o->chunk_docs : LIK_PLAID_DEFAULT_CHUNK_DOCS;
  b->seed = o->seed;
  b->progress = o->progress;
  b->progress_user = o->progress_user;
  lik_status st;
  if ((st = lik_check_nbits(b->nbits))) return st;
  const count_opt counts[] = {{"kmeans_niters", o->kmeans_niters},
                              {"num_centroids", o->num_centroids},
                              {"total_tokens", o->total_tokens},
                              {"max_points_per_centroid", o->max_points_per_centroid},
                              {"sample_docs", o->sample_docs},
                              {"chunk_docs", o->chunk_docs},
                              {"num_threads", o->num_threads}};
  if ((st = check_counts("options", counts, sizeof counts / sizeof counts[0]))) return st;
  if (o->expand_centroids != 0 && o->expand_centroids != 1)
    return lik_fail(LIK_ERR_VALUE, "options.expand_centroids: %d, must be 0 or 1",
                    o->expand_centroids);
  b->expand = o->expand_centroids;
  if (o->num_centroids > INT32_MAX)
    return lik_fail(LIK_ERR_VALUE, "options.num_centroids: %lld exceeds the int32 code range",
                    (long long)o->num_centroids);
  if (o->chunk_docs > INT32_MAX)
    return lik_fail(LIK_ERR_VALUE, "options.chunk_docs: %lld is too large",
                    (long long)o->chunk_docs);
  lik_options lo = LIK_OPTIONS_INIT;
  lo.num_threads = o->num_threads;
  lo.context = o->context;
  lik_call_from(&b->call, &lo);
  b->call.device = LIK_CPU;
  if (o->device != 0 && o->device != LIK_CPU && o->device != LIK_CUDA)
    return lik_fail(LIK_ERR_VALUE, "options.device: %d, must be LIK_CPU (1) or LIK_CUDA (2)",
                    (int)o->device);
  if (o->device == LIK_CUDA) {
    if (o->device_id < 0)
      return lik_fail(LIK_ERR_VALUE, "options.device_id: %d, must be >= 0",
                      (int)o->device_id);
    if (!lik_backend_of(LIK_CUDA)->codec_compress) return lik_no_cuda_backend();
    b->call.device = LIK_CUDA;
    b->call.device_id = o->device_id;
    b->call.stream = o->stream;
  }
  return LIK_OK;
}

/* documents [T, d] float + cu_seqlens [N + 1] over T, on the CPU. */
static lik_status check_docs(const lik_tensor *X, const lik_tensor *cu, const char *call,
                             lik_plaid_docs *d) {
  lik_status st;
  if ((st = lik_check_tensor(X, "documents", 2, 2)) || (st = lik_check_float(X, "documents")))
    return st;
  if (X->shape[1] < 1 || X->shape[1] > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "documents: embedding dimension d=%lld is outside [1, %d]",
                    (long long)X->shape[1], INT32_MAX);
  if (!cu) return lik_fail(LIK_ERR_NULL, "cu_seqlens: is NULL");
  const lik_tensor *ts[] = {X, cu};
  const char *names[] = {"documents", "cu_seqlens"};
  if ((st = on_cpu(ts, names, 2, call))) return st;
  int64_t maxlen;
  memset(d, 0, sizeof *d);
  if ((st = lik_check_cu_seqlens(cu, "cu_seqlens", X->shape[0], "documents' rows T", 1, &d->cu,
                                 &d->ndocs, &maxlen)))
    return st;
  if (maxlen > INT32_MAX)
    return lik_fail(LIK_ERR_VALUE, "cu_seqlens: a document of %lld tokens exceeds INT32_MAX",
                    (long long)maxlen);
  d->x = lik_seqs_from(X);
  d->ntok = X->shape[0];
  return LIK_OK;
}

static lik_status check_bits(int nbits, int64_t d) {
  if ((d * nbits) % 8)
    return lik_fail(LIK_ERR_VALUE, "documents: d=%lld times nbits=%d is not a whole number of "
                    "bytes", (long long)d, nbits);
  return LIK_OK;
}

lik_status lik_plaid_index_build(const lik_tensor *documents, const lik_tensor *cu_seqlens,
                                 const lik_plaid_build_options *options, lik_plaid_index **out) {
  lik_clear_error();
  if (!out) return lik_fail(LIK_ERR_NULL, "out: is NULL");
  *out = NULL;
  lik_status st;
  lik_plaid_bopts b;
  lik_plaid_docs d;
  if ((st = resolve_build(options, &b)) ||
      (st = check_docs(documents, cu_seqlens, "lik_plaid_index_build", &d)) ||
      (st = check_bits(b.nbits, d.x.dim)))
    return st;
  return lik_plaid_build_impl(&d, &b, out);
}

lik_status lik_plaid_index_train(const lik_tensor *sample, const lik_plaid_build_options *options,
                                 lik_plaid_index **out) {
  lik_clear_error();
  if (!out) return lik_fail(LIK_ERR_NULL, "out: is NULL");
  *out = NULL;
  lik_status st;
  lik_plaid_bopts b;
  if ((st = resolve_build(options, &b))) return st;
  if ((st = lik_check_tensor(sample, "sample", 2, 2)) || (st = lik_check_float(sample, "sample")))
    return st;
  const lik_tensor *ts[] = {sample};
  const char *names[] = {"sample"};
  if ((st = on_cpu(ts, names, 1, "lik_plaid_index_train"))) return st;
  if (sample->shape[1] < 1 || sample->shape[1] > INT32_MAX)
    return lik_fail(LIK_ERR_SHAPE, "sample: embedding dimension d=%lld is outside [1, %d]",
                    (long long)sample->shape[1], INT32_MAX);
  if ((st = check_bits(b.nbits, sample->shape[1]))) return st;
  if (sample->shape[0] == 0) return lik_fail(LIK_ERR_VALUE, "sample: no tokens to train on");
  const lik_seqs s = lik_seqs_from(sample); /* [T, d]: one sequence of T tokens */
  return lik_plaid_train_impl(&s, &b, out);
}

/* An I32 / I64 [n] vector (n -1: any length; `of` names what n counts) as a
 * lik_index, on any device (its entries not read). */
static lik_status index_shape(const lik_tensor *t, const char *name, int64_t n, const char *of,
                              lik_index *out) {
  lik_status st;
  if ((st = lik_check_index(t, name, 1, 1))) return st;
  if (n >= 0 && t->shape[0] != n)
    return lik_fail(LIK_ERR_SHAPE, "%s: has %lld entries, %s has %lld", name,
                    (long long)t->shape[0], of, (long long)n);
  *out = (lik_index){t->data, t->dtype, t->strides[0]};
  return LIK_OK;
}

/* index_shape on the CPU, every entry in [lo, hi]. */
static lik_status index_vector(const lik_tensor *t, const char *name, int64_t n, const char *of,
                               int64_t lo, int64_t hi, const char *call, lik_index *out) {
  lik_status st;
  if ((st = index_shape(t, name, n, of, out))) return st;
  const lik_tensor *ts[] = {t};
  const char *names[] = {name};
  if ((st = on_cpu(ts, names, 1, call))) return st;
  for (int64_t i = 0; i < t->shape[0]; i++) {
    const int64_t v = lik_index_at(out, i);
    if (v < lo || v > hi)
      return lik_fail(LIK_ERR_VALUE, "%s: %s[%lld]=%lld is outside [%lld, %lld]", name, name,
                      (long long)i, (long long)v, (long long)lo, (long long)hi);
  }
  return LIK_OK;
}

lik_status lik_plaid_index_delete(lik_plaid_index *index, const lik_tensor *ids) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  lik_index v;
  lik_status st =
      index_vector(ids, "ids", -1, NULL, INT64_MIN, INT64_MAX, "lik_plaid_index_delete", &v);
  if (st || ids->shape[0] == 0) return st;
  if ((st = lik_plaid_delete_impl(index, &v, ids->shape[0]))) return st;
  return lik_plaid_refresh_device(index);
}

/* add (update 0: the next ids) and update (update 1: ids [ndocs], replaced
 * by the new versions), checked under the name `call`. */
static lik_status add_docs(lik_plaid_index *index, int update, const lik_tensor *ids,
                           const lik_tensor *documents, const lik_tensor *cu_seqlens,
                           const lik_plaid_build_options *options, const char *call) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  lik_status st;
  lik_plaid_bopts b;
  lik_plaid_docs d;
  lik_index v;
  if ((st = resolve_build(options, &b)) || (st = check_docs(documents, cu_seqlens, call, &d)) ||
      (update && (st = index_vector(ids, "ids", d.ndocs, "documents", INT64_MIN, INT64_MAX, call, &v))))
    return st;
  if (d.x.dim != index->dim)
    return lik_fail(LIK_ERR_SHAPE, "documents: d=%lld does not match the index's d=%lld",
                    (long long)d.x.dim, (long long)index->dim);
  if (d.ndocs == 0) return LIK_OK;
  if ((st = lik_plaid_add_impl(index, &d, &b, update ? &v : NULL))) return st;
  return lik_plaid_refresh_device(index);
}

lik_status lik_plaid_index_add(lik_plaid_index *index, const lik_tensor *documents,
                               const lik_tensor *cu_seqlens,
                               const lik_plaid_build_options *options) {
  return add_docs(index, 0, NULL, documents, cu_seqlens, options, "lik_plaid_index_add");
}

lik_status lik_plaid_index_update(lik_plaid_index *index, const lik_tensor *ids,
                                  const lik_tensor *documents, const lik_tensor *cu_seqlens,
                                  const lik_plaid_build_options *options) {
  return add_docs(index, 1, ids, documents, cu_seqlens, options, "lik_plaid_index_update");
}

lik_status lik_plaid_index_compact(lik_plaid_index *index) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  if (index->ndead == 0) return LIK_OK;
  const lik_status st = lik_plaid_compact_impl(index);
  return st ? st : lik_plaid_refresh_device(index);
}

lik_status lik_plaid_index_to_device(lik_plaid_index *index, int device_id) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  if (device_id < -1)
    return lik_fail(LIK_ERR_VALUE, "device_id: %d, must be a CUDA device (>= 0) or -1 (free "
                    "the device copy)", device_id);
  return lik_plaid_to_device_impl(index, device_id);
}

lik_status lik_plaid_index_get_ids(const lik_plaid_index *index, lik_tensor *ids) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  lik_status st;
  const int64_t n = index->ndocs;
  if ((st = lik_check_output(ids, "ids", LIK_I64, 1, &n))) return st;
  const lik_tensor *ts[] = {ids};
  const char *names[] = {"ids"};
  if ((st = on_cpu(ts, names, 1, "lik_plaid_index_get_ids"))) return st;
  int64_t *o = (int64_t *)ids->data;
  for (int64_t j = 0; j < n; j++)
    o[j * ids->strides[0]] = lik_plaid_is_dead(index, j) ? -1 : lik_plaid_id_of(index, j);
  return LIK_OK;
}

lik_status lik_plaid_index_set_metadata_db(lik_plaid_index *index, const void *data,
                                           int64_t size) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  if (size < -1)
    return lik_fail(LIK_ERR_VALUE, "size: %lld, must be >= 0 (the bytes) or -1 (no database)",
                    (long long)size);
  if (size > 0 && !data)
    return lik_fail(LIK_ERR_NULL, "data: is NULL with size %lld", (long long)size);
  return lik_plaid_set_meta_impl(index, data, size);
}

lik_status lik_plaid_index_get_metadata_db(const lik_plaid_index *index, void *buf,
                                           int64_t capacity, int64_t *size) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  if (!size) return lik_fail(LIK_ERR_NULL, "size: is NULL");
  *size = index->has_meta ? index->meta_size : -1;
  if (!buf || !index->has_meta) return LIK_OK;
  if (capacity < index->meta_size)
    return lik_fail(LIK_ERR_SHAPE, "buf: capacity %lld bytes, the metadata database has %lld",
                    (long long)capacity, (long long)index->meta_size);
  if (index->meta_size) memcpy(buf, index->meta, (size_t)index->meta_size);
  return LIK_OK;
}

lik_status lik_plaid_index_save(lik_plaid_index *index, const char *path,
                                const lik_tensor *doc_ids) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  if (!path) return lik_fail(LIK_ERR_NULL, "path: is NULL");
  if (!path[0]) return lik_fail(LIK_ERR_VALUE, "path: is empty");
  const int64_t *ids = NULL, stride = 0;
  if (doc_ids) {
    lik_status st;
    if ((st = lik_check_tensor(doc_ids, "doc_ids", 1, 1))) return st;
    if (doc_ids->dtype != LIK_I64)
      return lik_fail(LIK_ERR_DTYPE, "doc_ids: dtype %s, expected int64",
                      lik_dtype_name(doc_ids->dtype));
    if (doc_ids->shape[0] != index->ndocs)
      return lik_fail(LIK_ERR_SHAPE, "doc_ids: has %lld entries, the index has %lld documents",
                      (long long)doc_ids->shape[0], (long long)index->ndocs);
    const lik_tensor *ts[] = {doc_ids};
    const char *names[] = {"doc_ids"};
    if ((st = on_cpu(ts, names, 1, "lik_plaid_index_save"))) return st;
    ids = (const int64_t *)doc_ids->data;
    if ((st = lik_plaid_check_id_map(index, ids, doc_ids->strides[0], "doc_ids"))) return st;
    return lik_plaid_save_impl(index, path, ids, doc_ids->strides[0]);
  }
  return lik_plaid_save_impl(index, path, ids, stride);
}

lik_status lik_plaid_index_load(const char *path, unsigned flags, lik_plaid_index **out) {
  lik_clear_error();
  if (!out) return lik_fail(LIK_ERR_NULL, "out: is NULL");
  *out = NULL;
  if (!path) return lik_fail(LIK_ERR_NULL, "path: is NULL");
  if (flags & ~LIK_PLAID_LOAD_VERIFY)
    return lik_fail(LIK_ERR_VALUE, "flags: unknown bits 0x%x", flags & ~LIK_PLAID_LOAD_VERIFY);
  return lik_plaid_load_impl(path, flags, out);
}

lik_status lik_plaid_index_get_info(const lik_plaid_index *index, lik_plaid_index_info *info) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  if (!info) return lik_fail(LIK_ERR_NULL, "info: is NULL");
  memset(info, 0, sizeof *info);
  info->num_docs = index->ndocs;
  info->num_tokens = index->ntok;
  info->dim = index->dim;
  info->num_centroids = index->ncent;
  info->num_chunks = index->nseg;
  info->nbits = index->nbits;
  info->has_ivf = index->has_ivf;
  info->num_deleted = index->ndead;
  info->next_id = index->next_id;
  info->device = index->cuda ? index->cuda_device : -1;
  info->device_bytes = index->cuda ? index->cuda_bytes : 0;
  return LIK_OK;
}

lik_status lik_plaid_index_search(const lik_plaid_index *index, const lik_tensor *Q,
                                  const lik_tensor *q_lengths, const lik_tensor *subset,
                                  const lik_tensor *subset_cu,
                                  const lik_plaid_search_params *params, lik_tensor *scores,
                                  lik_tensor *ids) {
  lik_clear_error();
  if (!index) return lik_fail(LIK_ERR_NULL, "index: is NULL");
  lik_status st;
  if ((st = lik_check_tensor(Q, "Q", 2, 3)) || (st = lik_check_float(Q, "Q"))) return st;
  const lik_tensor *ts[] = {Q, q_lengths, subset, subset_cu, scores, ids};
  const char *names[] = {"Q", "q_lengths", "subset", "subset_cu", "scores", "ids"};
  lik_device_type dev;
  int32_t dev_id;
  if ((st = lik_check_devices(ts, names, 6, &dev, &dev_id))) return st;
  if (dev == LIK_CUDA) {
    if (subset || subset_cu)
      return lik_fail(LIK_ERR_UNSUPPORTED, "subset: the CUDA search takes no subset in this "
                      "version (search host tensors)");
    if (!index->cuda || index->cuda_device != dev_id)
      return lik_fail(LIK_ERR_DEVICE, "Q: is on CUDA device %d, but the index has no copy "
                      "there (lik_plaid_index_to_device)", (int)dev_id);
  }
  if (!index->has_ivf)
    return lik_fail(LIK_ERR_UNSUPPORTED, "index: has no IVF (a compress-only index): it cannot "
                    "be searched");
  if (Q->shape[Q->ndim - 1] != index->dim)
    return lik_fail(LIK_ERR_SHAPE, "Q: d=%lld does not match the index's d=%lld",
                    (long long)Q->shape[Q->ndim - 1], (long long)index->dim);
  lik_plaid_query q;
  memset(&q, 0, sizeof q);
  q.q = lik_seqs_from(Q);
  const lik_plaid_search_params zero = {0};
  const lik_plaid_search_params *pp = params ? params : &zero;
  const count_opt counts[] = {{"top_k", pp->top_k},
                              {"n_ivf_probe", pp->n_ivf_probe},
                              {"n_full_scores", pp->n_full_scores},
                              {"num_threads", pp->num_threads}};
  if ((st = check_counts("params", counts, sizeof counts / sizeof counts[0]))) return st;
  q.top_k = pp->top_k ? pp->top_k : 10;
  q.n_probe = pp->n_ivf_probe ? pp->n_ivf_probe : 8;
  if (q.n_probe > index->ncent) q.n_probe = index->ncent;
  q.n_full = pp->n_full_scores ? pp->n_full_scores : 4096;
  q.prune = pp->prune != 0;
  q.threshold = pp->centroid_score_threshold;
  if (q.prune && !isfinite(q.threshold))
    return lik_fail(LIK_ERR_VALUE, "params.centroid_score_threshold: %g is not finite",
                    (double)q.threshold);
  if (q.top_k > ((int64_t)1 << 40))
    return lik_fail(LIK_ERR_VALUE, "params.top_k: %lld is too large", (long long)q.top_k);
  const int64_t nq = q.q.count;
  if (q_lengths && (st = dev == LIK_CUDA
                             ? index_shape(q_lengths, "q_lengths", nq, "Q", &q.q_lengths)
                             : index_vector(q_lengths, "q_lengths", nq, "Q", 0, q.q.len,
                                            "lik_plaid_index_search", &q.q_lengths)))
    return st;
  if (subset_cu && !subset) return lik_fail(LIK_ERR_NULL, "subset: is NULL but subset_cu is not");
  if (subset) {
    if ((st = index_vector(subset, "subset", -1, NULL, 0, index->next_id - 1,
                           "lik_plaid_index_search", &q.subset)))
      return st;
    q.subset_n = subset->shape[0];
    for (int64_t i = 0; i < q.subset_n; i++)
      if (lik_plaid_find(index, lik_index_at(&q.subset, i)) < 0)
        return lik_fail(LIK_ERR_VALUE, "subset: subset[%lld]=%lld is not a document of the "
                        "index (an unknown id: deleted and compacted away)", (long long)i,
                        (long long)lik_index_at(&q.subset, i));
    q.has_subset = 1;
    if (subset_cu) {
      int64_t cnt, maxlen;
      if ((st = lik_check_cu_seqlens(subset_cu, "subset_cu", q.subset_n, "subset's entries", 1,
                                     &q.subset_cu, &cnt, &maxlen)))
        return st;
      if (cnt != nq)
        return lik_fail(LIK_ERR_SHAPE, "subset_cu: has %lld entries, expected Nq + 1 = %lld",
                        (long long)cnt + 1, (long long)nq + 1);
    }
  }
  const int q3 = Q->ndim == 3;
  int64_t grid[2];
  int ndim = 0;
  if (q3) grid[ndim++] = nq;
  grid[ndim++] = q.top_k;
  if ((st = lik_check_output(scores, "scores", LIK_F32, ndim, grid)) ||
      (st = lik_check_no_overlap(scores, "scores")) ||
      (st = lik_check_output(ids, "ids", LIK_I64, ndim, grid)) ||
      (st = lik_check_no_overlap(ids, "ids")))
    return st;
  q.scores = (float *)scores->data;
  q.ids = (int64_t *)ids->data;
  q.s_i = q3 ? scores->strides[0] : 0;
  q.s_k = scores->strides[ndim - 1];
  q.i_i = q3 ? ids->strides[0] : 0;
  q.i_k = ids->strides[ndim - 1];
  lik_options lo = LIK_OPTIONS_INIT;
  lo.num_threads = pp->num_threads;
  lo.context = pp->context;
  lo.stream = pp->stream;
  lik_call_from(&q.call, &lo);
  q.call.device = dev;
  q.call.device_id = dev_id;
  if (nq == 0) return LIK_OK;
  if (dev == LIK_CUDA) {
    if (q.n_probe > 512)
      return lik_fail(LIK_ERR_UNSUPPORTED, "params.n_ivf_probe: %lld; the CUDA search probes at "
                      "most 512 cells per query token", (long long)q.n_probe);
    return lik_plaid_search_device(index, &q);
  }
  return lik_plaid_search_impl(index, &q);
}
