/*
 * expand.c — new centroids for documents far from every centroid, as
 * fast-plaid's update: a token is an outlier when its residual norm to its
 * nearest centroid exceeds the index's cluster_threshold (the 0.75-quantile
 * of residual norms); spherical k-means on the outliers (4 centroids per
 * max_points_per_centroid of them) gives centroids appended to the index
 * before the documents are coded; afterwards the threshold moves to the
 * token-weighted mean of the old one and the new tokens' 0.75-quantile.
 * docs/plaid_index.md, "Adding documents far from the centroids".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index_internal.h"

#define EXPAND_BATCH 4096 /* tokens assigned per call */

static int has_threshold(float t) { return isfinite(t) && t > 0; }

static lik_status out_of_memory(int64_t n) {
  return lik_fail(LIK_ERR_ALLOC, "PLAID add: cannot allocate the outlier tables (%lld tokens)",
                  (long long)n);
}

/* The tokens of docs (rows of docs->x) whose residual norm to their nearest
 * centroid exceeds the threshold: *ids (malloc'd, ascending), *n. */
static lik_status find_outliers(const lik_plaid_index *ix, const lik_plaid_docs *docs,
                                const lik_call *call, int64_t **ids, int64_t *n) {
  const int64_t d = ix->dim, T = docs->ntok;
  lik_codec_view cv;
  lik_plaid_codec_view(ix, &cv);
  float *rows = (float *)malloc((size_t)(EXPAND_BATCH * d) * sizeof(float));
  int32_t *codes = (int32_t *)malloc(EXPAND_BATCH * sizeof(int32_t));
  int64_t *out = NULL, cap = 0, cnt = 0;
  lik_status st = LIK_OK;
  if (!rows || !codes) {
    st = out_of_memory(EXPAND_BATCH);
    goto done;
  }
  for (int64_t t0 = 0; t0 < T; t0 += EXPAND_BATCH) {
    const int64_t m = T - t0 < EXPAND_BATCH ? T - t0 : EXPAND_BATCH;
    for (int64_t r = 0; r < m; r++)
      if (!lik_plaid_load_row(&docs->x, t0 + r, rows + r * d)) {
        st = lik_fail(LIK_ERR_VALUE, "documents: token %lld has a NaN or infinite value",
                      (long long)(t0 + r));
        goto done;
      }
    if ((st = lik_plaid_assign(&cv, rows, m, call, codes))) goto done;
    for (int64_t r = 0; r < m; r++) {
      const float *c = ix->cent_f32 + (int64_t)codes[r] * d;
      if (!(lik_plaid_residual_norm(rows + r * d, c, d) > ix->cluster_threshold)) continue;
      if (cnt == cap) {
        cap = cap ? 2 * cap : 1024;
        int64_t *g = (int64_t *)realloc(out, (size_t)cap * sizeof(int64_t));
        if (!g) {
          st = out_of_memory(cap);
          goto done;
        }
        out = g;
      }
      out[cnt++] = t0 + r;
    }
  }
done:
  free(rows);
  free(codes);
  if (st) {
    free(out);
    out = NULL;
    cnt = 0;
  }
  *ids = out;
  *n = cnt;
  return st;
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

lik_status lik_plaid_expand(lik_plaid_index *ix, const lik_plaid_docs *docs,
                            const lik_plaid_bopts *o) {
  if (!has_threshold(ix->cluster_threshold) || docs->ntok == 0) return LIK_OK;
  int64_t *ids, n;
  lik_status st = find_outliers(ix, docs, &o->call, &ids, &n);
  if (st || n == 0) return st;
  /* fast-plaid's rule: k = 4 * ceil(n / max_points_per_centroid) centroids,
   * k-means on min(n, 1 + 16 sqrt(120 n)) of the outliers (its document
   * sample rule, the outliers standing for documents), k at most that */
  const double s = 1.0 + floor(16.0 * sqrt(120.0 * (double)n));
  const int64_t npts = (double)n < s ? n : (int64_t)s;
  int64_t k = 4 * ((n + o->max_ppc - 1) / o->max_ppc);
  if (k > npts) k = npts;
  const int64_t d = ix->dim;
  int64_t *pick = NULL;
  float *pts = NULL, *cent = NULL;
  if (ix->ncent + k > INT32_MAX) {
    st = lik_fail(LIK_ERR_VALUE, "PLAID add: K=%lld centroids and %lld new ones exceed the int32 "
                  "code range", (long long)ix->ncent, (long long)k);
    goto out;
  }
  pick = (int64_t *)malloc((size_t)n * sizeof(int64_t));
  pts = (float *)malloc((size_t)(npts * d) * sizeof(float));
  cent = (float *)malloc((size_t)(k * d) * sizeof(float));
  if (!pick || !pts || !cent) {
    st = out_of_memory(n);
    goto out;
  }
  uint64_t rng = o->seed ^ 0x657870616e64ull; /* "expand" */
  lik_plaid_sample(&rng, pick, n, npts);
  qsort(pick, (size_t)npts, sizeof(int64_t), cmp_i64);
  for (int64_t i = 0; i < npts; i++) lik_plaid_load_row(&docs->x, ids[pick[i]], pts + i * d);
  lik_plaid_normalize(pts, npts, d, o->call.threads);
  if ((st = lik_plaid_kmeans(pts, npts, d, k, o->niters, o->seed, &o->call, cent))) goto out;
  st = lik_plaid_grow_centroids(ix, cent, k);
out:
  free(ids);
  free(pick);
  free(pts);
  free(cent);
  return st;
}

lik_status lik_plaid_updated_threshold(const lik_plaid_index *ix, const lik_plaid_docs *docs,
                                       int64_t doc_from, int64_t old_ntok, float *thr) {
  const int64_t T = docs->ntok, d = ix->dim;
  *thr = ix->cluster_threshold;
  if (T == 0) return LIK_OK;
  float *norms = (float *)malloc((size_t)T * sizeof(float));
  float *row = (float *)malloc((size_t)d * sizeof(float));
  if (!norms || !row) {
    free(norms);
    free(row);
    return out_of_memory(T);
  }
  /* the documents' rows in order: token t of docs is global token
   * doc_off[doc_from] + t */
  for (int64_t j = doc_from, t = 0; j < ix->ndocs; j++) {
    const lik_pseg *s = &ix->segs[ix->doc_seg[j]];
    for (int64_t g = ix->doc_off[j]; g < ix->doc_off[j + 1]; g++, t++) {
      lik_plaid_load_row(&docs->x, t, row); /* finite: it was coded */
      norms[t] = lik_plaid_residual_norm(row, ix->cent_f32 + lik_pseg_code(s, g - s->tok0) * d, d);
    }
  }
  const double q = lik_plaid_quantile(norms, T, 0.75), old = ix->cluster_threshold;
  *thr = has_threshold(ix->cluster_threshold)
             ? (float)((old * (double)old_ntok + q * (double)T) / (double)(old_ntok + T))
             : (float)q;
  free(norms);
  free(row);
  if (!isfinite(*thr)) /* it could not be saved (nor loaded): refuse the add */
    return lik_fail(LIK_ERR_VALUE, "documents: the new tokens' residual norms (0.75-quantile "
                    "%g) make cluster_threshold %g, not a finite float32 (tokens too large)", q,
                    (double)*thr);
  return LIK_OK;
}
