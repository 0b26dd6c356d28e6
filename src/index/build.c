/*
 * build.c — the data of a PLAID index: training (k-means on a sample, the
 * codec from the residuals of held-out sample tokens; for a one-call build on
 * documents sampled by fast-plaid's rule) and coding documents into in-memory
 * chunks.  Changing an index with them is txn.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../cpu/cpu_internal.h"
#include "index_internal.h"

#define HELDOUT_MAX 50000
#define ADD_BATCH_DOCS 4096

static size_t elem_size(lik_dtype t) {
  return t == LIK_F64 ? 8 : t == LIK_F32 ? 4 : 2;
}

static lik_status not_finite(const char *what, int64_t r) {
  return lik_fail(LIK_ERR_VALUE, "%s: token %lld has a NaN or infinite value", what,
                  (long long)r);
}

/* K's rule (ColBERTv2 / fast-plaid): 2^floor(log2(16 * sqrt(tokens))). */
static int64_t k_rule(int64_t tokens) {
  const double v = 16.0 * sqrt((double)(tokens > 0 ? tokens : 1));
  int e = (int)floor(log2(v));
  if (e > 30) e = 30;
  return (int64_t)1 << e;
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Trains an index on rows [ts][d] fp32 (raw embeddings), which it
 * overwrites (the k-means points are compacted and normalised in place: no
 * second copy of the sample).  tokens: for K's rule. */
static lik_status train_rows(float *rows, int64_t ts, int64_t dim, int64_t tokens,
                             const lik_plaid_bopts *o, lik_plaid_index **out) {
  *out = NULL;
  if (ts < 1) return lik_fail(LIK_ERR_VALUE, "sample: no tokens to train on");
  int64_t K = o->num_centroids ? o->num_centroids : k_rule(tokens);
  if (K > ts) K = ts;
  if (K > INT32_MAX) K = INT32_MAX;
  int64_t npts = ts;
  if (o->max_ppc > 0 && K <= INT64_MAX / o->max_ppc && npts > K * o->max_ppc)
    npts = K * o->max_ppc;
  uint64_t rng = o->seed ^ 0x73616d706c65ull; /* "sample" */
  lik_status st = LIK_OK;
  float *pts = rows; /* the first npts rows, once compacted and normalised */
  float *heldrows = NULL;
  float *cent = (float *)malloc((size_t)(K * dim) * sizeof(float));
  uint16_t *c16 = (uint16_t *)malloc((size_t)(K * dim) * sizeof(uint16_t));
  int64_t *pick = npts < ts ? (int64_t *)malloc((size_t)ts * sizeof(int64_t)) : NULL;
  const int64_t H = ts / 20 < 1 ? 1 : (ts / 20 > HELDOUT_MAX ? HELDOUT_MAX : ts / 20);
  float *res = (float *)malloc((size_t)(H * dim) * sizeof(float));
  int32_t *hc = (int32_t *)malloc((size_t)H * sizeof(int32_t));
  float *norms = (float *)malloc((size_t)H * sizeof(float));
  float *avg = (float *)calloc((size_t)dim, sizeof(float));
  heldrows = (float *)malloc((size_t)(H * dim) * sizeof(float));
  if (!heldrows || !cent || !c16 || (npts < ts && !pick) || !res || !hc || !norms || !avg) {
    st = lik_fail(LIK_ERR_ALLOC, "PLAID train: cannot allocate the k-means sample (%lld x %lld)",
                  (long long)npts, (long long)dim);
    goto out;
  }
  /* the codec's held-out rows (the last H), raw, before the rows change */
  memcpy(heldrows, rows + (ts - H) * dim, (size_t)(H * dim) * sizeof(float));
  /* k-means points: npts of the ts rows (seeded), compacted to the front in
   * ascending row order (pick[i] >= i: safe in place), L2-normalised */
  if (pick) {
    lik_plaid_sample(&rng, pick, ts, npts);
    qsort(pick, (size_t)npts, sizeof(int64_t), cmp_i64);
    for (int64_t i = 0; i < npts; i++)
      if (pick[i] != i) memcpy(rows + i * dim, rows + pick[i] * dim, (size_t)dim * sizeof(float));
  }
  lik_plaid_normalize(pts, npts, dim, o->call.threads);
  if ((st = lik_plaid_kmeans(pts, npts, dim, K, o->niters, o->seed, &o->call, cent))) goto out;
  for (int64_t i = 0; i < K * dim; i++) c16[i] = lik_tr_f32_to_f16(cent[i]);

  /* codec: residuals of the last H rows against the fp16 centroids */
  const lik_codec_view cv = lik_plaid_dense_view(c16, LIK_F16, K, dim, o->nbits);
  const float *held = heldrows;
  if ((st = lik_plaid_assign(&cv, held, H, &o->call, hc))) goto out;
  double *acc = (double *)calloc((size_t)dim, sizeof(double));
  if (!acc) {
    st = lik_fail(LIK_ERR_ALLOC, "PLAID train: out of memory");
    goto out;
  }
  for (int64_t i = 0; i < H; i++) {
    float ss = 0;
    for (int64_t k = 0; k < dim; k++) {
      const float r = held[i * dim + k] - lik_tr_f16_to_f32(c16[(int64_t)hc[i] * dim + k]);
      res[i * dim + k] = r;
      acc[k] += fabs((double)r);
      ss += r * r;
    }
    norms[i] = sqrtf(ss);
  }
  for (int64_t k = 0; k < dim; k++) avg[k] = (float)(acc[k] / (double)H);
  free(acc);
  lik_tensor rt = {0};
  rt.data = res;
  rt.dtype = LIK_F32;
  rt.ndim = 2;
  rt.shape[0] = H;
  rt.shape[1] = dim;
  rt.strides[0] = dim;
  rt.strides[1] = 1;
  rt.device = LIK_CPU;
  float cut[255], wts[256];
  if ((st = lik_cpu_codec_train(o->call.context, &rt, o->nbits, cut, 1, wts, 1))) goto out;
  const float thr = lik_plaid_quantile(norms, H, 0.75);

  lik_plaid_index *ix = lik_plaid_new(o->nbits, dim, K, c16, cut, wts, avg);
  c16 = NULL;
  avg = NULL;
  if (!ix) {
    st = lik_fail(LIK_ERR_ALLOC, "PLAID train: out of memory");
    goto out;
  }
  ix->cluster_threshold = thr;
  ix->chunk_docs = o->chunk_docs;
  ix->seed = o->seed;
  ix->has_ivf = 1; /* empty lists */
  *out = ix;
out:
  free(heldrows);
  free(cent);
  free(c16);
  free(pick);
  free(res);
  free(hc);
  free(norms);
  free(avg);
  return st;
}

lik_status lik_plaid_train_impl(const lik_seqs *sample, const lik_plaid_bopts *o,
                                lik_plaid_index **out) {
  const int64_t ts = sample->len, dim = sample->dim;
  float *rows = (float *)malloc((size_t)(ts * dim) * sizeof(float) + 1);
  if (!rows)
    return lik_fail(LIK_ERR_ALLOC, "PLAID train: cannot allocate %lld x %lld floats",
                    (long long)ts, (long long)dim);
  int64_t bad;
  lik_status st = lik_plaid_load_rows(sample, NULL, ts, o->call.threads, rows, &bad);
  if (st || bad >= 0) {
    free(rows);
    return st ? st : not_finite("sample", bad);
  }
  st = train_rows(rows, ts, dim, o->total_tokens ? o->total_tokens : ts, o, out);
  free(rows);
  return st;
}

lik_status lik_plaid_train_docs(const lik_plaid_docs *docs, const lik_plaid_bopts *o,
                                lik_plaid_index **out) {
  *out = NULL;
  const int64_t N = docs->ndocs, dim = docs->x.dim;
  if (N < 1) return lik_fail(LIK_ERR_VALUE, "cu_seqlens: no documents to index");
  if (docs->ntok < 1) return lik_fail(LIK_ERR_VALUE, "documents: no tokens to index");
  int64_t S = o->sample_docs;
  if (!S) S = 1 + (int64_t)(16.0 * sqrt(120.0 * (double)N));
  if (S > N) S = N;
  /* sampled documents: a partial Fisher-Yates shuffle, then ascending ids */
  int64_t *ids = (int64_t *)malloc((size_t)N * sizeof(int64_t));
  if (!ids) return lik_fail(LIK_ERR_ALLOC, "PLAID build: out of memory");
  uint64_t rng = o->seed ^ 0x646f6373ull; /* "docs" */
  for (int64_t i = 0; i < N; i++) ids[i] = i;
  for (int64_t i = 0; i < S; i++) {
    const int64_t j = i + (int64_t)lik_plaid_below(&rng, (uint64_t)(N - i));
    const int64_t t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
  }
  int64_t ts = 0;
  for (int64_t i = 0; i < S; i++)
    ts += lik_index_at(&docs->cu, ids[i] + 1) - lik_index_at(&docs->cu, ids[i]);
  if (ts < 1) { /* the sampled documents are empty: take every token */
    for (int64_t i = 0; i < N; i++) ids[i] = i;
    S = N;
    ts = docs->ntok;
  }
  float *rows = (float *)malloc((size_t)(ts * dim) * sizeof(float));
  int64_t *src = (int64_t *)malloc((size_t)ts * sizeof(int64_t));
  if (!rows || !src) {
    free(rows);
    free(src);
    free(ids);
    return lik_fail(LIK_ERR_ALLOC, "PLAID build: cannot allocate the sample (%lld tokens)",
                    (long long)ts);
  }
  int64_t r = 0; /* the sampled documents' tokens in sample order */
  for (int64_t i = 0; i < S; i++) {
    const int64_t a = lik_index_at(&docs->cu, ids[i]), b = lik_index_at(&docs->cu, ids[i] + 1);
    for (int64_t t = a; t < b; t++) src[r++] = t;
  }
  free(ids);
  int64_t bad;
  lik_status st = lik_plaid_load_rows(&docs->x, src, ts, o->call.threads, rows, &bad);
  if (!st && bad >= 0) st = not_finite("documents", src[bad]);
  free(src);
  if (st) {
    free(rows);
    return st;
  }
  st = train_rows(rows, ts, dim, docs->ntok, o, out);
  free(rows);
  return st;
}

/* ---- coding documents into chunks ------------------------------------------------ */

static lik_status grow_seg(lik_pseg *s, int64_t ntok, int64_t width) {
  if (s->ntok + ntok <= s->cap_tok) return LIK_OK;
  int64_t cap = s->cap_tok ? s->cap_tok + s->cap_tok / 2 : 1024;
  if (cap < s->ntok + ntok) cap = s->ntok + ntok;
  int32_t *c = (int32_t *)realloc(s->own_codes, (size_t)cap * sizeof(int32_t));
  if (!c) return lik_fail(LIK_ERR_ALLOC, "PLAID add: cannot grow a chunk to %lld tokens",
                          (long long)cap);
  s->own_codes = c;
  s->codes = c;
  uint8_t *r = (uint8_t *)realloc(s->own_res, (size_t)(cap * width) + 1);
  if (!r) return lik_fail(LIK_ERR_ALLOC, "PLAID add: cannot grow a chunk to %lld tokens",
                          (long long)cap);
  s->own_res = r;
  s->res = r;
  s->cap_tok = cap;
  return LIK_OK;
}

lik_status lik_plaid_append(lik_plaid_index *ix, const lik_plaid_docs *docs,
                            const lik_plaid_bopts *o) {
  const int64_t N = docs->ndocs;
  const int64_t chunk = ix->chunk_docs > 0 ? ix->chunk_docs : LIK_PLAID_DEFAULT_CHUNK_DOCS;
  lik_status st = LIK_OK;
  lik_codec_view cv;
  lik_plaid_codec_view(ix, &cv);
  lik_cuda_staged *keep = NULL; /* on a device: buffers and the codec kept over the batches */
  for (int64_t j0 = 0; j0 < N;) {
    lik_pseg *s = ix->nseg ? &ix->segs[ix->nseg - 1] : NULL;
    if (!s || !s->owned || s->ndocs >= chunk) {
      if ((st = lik_plaid_reserve_segs(ix, 1))) goto out;
      s = &ix->segs[ix->nseg++];
      memset(s, 0, sizeof *s);
      s->owned = 1;
      s->codes_dtype = LIK_I32;
      s->tok0 = ix->ntok;
      s->doc0 = ix->ndocs;
      s->region_codes = s->region_res = -1;
    }
    int64_t m = chunk - s->ndocs;
    if (m > N - j0) m = N - j0;
    if (m > ADD_BATCH_DOCS) m = ADD_BATCH_DOCS;
    const int64_t a = lik_index_at(&docs->cu, j0), b = lik_index_at(&docs->cu, j0 + m);
    if ((st = grow_seg(s, b - a, ix->width))) goto out;
    if (b > a) {
      lik_codec_problem p;
      memset(&p, 0, sizeof p);
      p.codec = cv;
      p.x = docs->x;
      p.x.data = (const char *)docs->x.data +
                 (ptrdiff_t)(a * docs->x.sl) * (ptrdiff_t)elem_size(docs->x.dtype);
      p.x.len = b - a;
      p.tok.codes = s->own_codes + s->ntok;
      p.tok.codes_dtype = LIK_I32;
      p.tok.code_s = 1;
      p.tok.res = s->own_res + s->ntok * ix->width;
      p.tok.res_st = ix->width;
      p.tok.res_sp = 1;
      p.tok.count = 1;
      p.tok.len = b - a;
      p.call = o->call;
      if ((st = lik_plaid_compress(&p, &keep, LIK_CUDA_SAME_CODEC))) {
        /* name the token in the caller's numbering */
        const char *msg = lik_last_error();
        long long t;
        if (sscanf(msg, "X: token %lld", &t) == 1)
          st = lik_fail(st, "documents: token %lld has no finite inner product with any "
                        "centroid (NaN or infinite values)", t + (long long)a);
        goto out;
      }
    }
    for (int64_t j = j0; j < j0 + m; j++) {
      ix->doc_off[ix->ndocs + 1] = ix->doc_off[ix->ndocs] + lik_index_at(&docs->cu, j + 1) -
                                   lik_index_at(&docs->cu, j);
      ix->doc_seg[ix->ndocs] = (int32_t)(s - ix->segs);
      ix->ndocs++;
    }
    s->ntok += b - a;
    s->ndocs += m;
    ix->ntok += b - a;
    j0 += m;
    if (o->progress) o->progress(o->progress_user, j0, N);
  }
out:
  lik_plaid_staged_free(keep);
  return st;
}
