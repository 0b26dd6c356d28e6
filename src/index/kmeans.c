/*
 * kmeans.c — the arithmetic of training and of an expanding add: an input
 * row as fp32, quantiles, and the PLAID index's k-means: spherical (points
 * and centroids L2-normalised, a point goes to the centroid of highest inner
 * product, lowest index on ties, through the codec's compress backend: the
 * MaxSim tile kernels, or the CUDA compress with the same arithmetic when the
 * build has a device), centroids updated to the normalised mean of their
 * points.  Deterministic: the seed fixes the initial centroids and the
 * re-seeding of empty clusters; every centroid's sum is taken by one task in
 * ascending point order (fp64), so the result does not depend on threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../cpu/cpu_internal.h"
#include "index_internal.h"

int lik_plaid_load_row(const lik_seqs *x, int64_t r, float *dst) {
  int ok = 1;
  for (int64_t k = 0; k < x->dim; k++) {
    const float v = lik_load_f32(x->data, x->dtype, r * x->sl + k * x->sk);
    ok &= isfinite(v) != 0;
    dst[k] = v;
  }
  return ok;
}

/* ---- rows loaded / normalised over the threads (each row by one task: the
 * values and the first bad row do not depend on the thread count) ---- */

#define ROW_BLOCK 4096

typedef struct {
  const lik_seqs *x;
  const int64_t *src;
  float *dst;
  int64_t n, dim;
  int64_t *bad; /* [ntasks]: the task's first non-finite row of dst, or -1 */
} rows_ctx;

static void load_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  const rows_ctx *g = (const rows_ctx *)ctx;
  const int64_t i1 = (task + 1) * ROW_BLOCK < g->n ? (task + 1) * ROW_BLOCK : g->n;
  g->bad[task] = -1;
  for (int64_t i = task * ROW_BLOCK; i < i1; i++)
    if (!lik_plaid_load_row(g->x, g->src ? g->src[i] : i, g->dst + i * g->dim) && g->bad[task] < 0)
      g->bad[task] = i;
}

lik_status lik_plaid_load_rows(const lik_seqs *x, const int64_t *src, int64_t n, int threads,
                               float *dst, int64_t *bad) {
  *bad = -1;
  if (n == 0) return LIK_OK;
  const int64_t ntasks = (n + ROW_BLOCK - 1) / ROW_BLOCK;
  int64_t *b = (int64_t *)malloc((size_t)ntasks * sizeof(int64_t));
  if (!b) return lik_fail(LIK_ERR_ALLOC, "PLAID train: out of memory");
  rows_ctx g = {x, src, dst, n, x->dim, b};
  lik_parallel_run(threads, ntasks, load_task, &g);
  for (int64_t t = 0; t < ntasks && *bad < 0; t++) *bad = b[t];
  free(b);
  return LIK_OK;
}

static void normalize_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  const rows_ctx *g = (const rows_ctx *)ctx;
  const int64_t i1 = (task + 1) * ROW_BLOCK < g->n ? (task + 1) * ROW_BLOCK : g->n;
  for (int64_t i = task * ROW_BLOCK; i < i1; i++) {
    float *x = g->dst + i * g->dim;
    double ss = 0;
    for (int64_t k = 0; k < g->dim; k++) ss += (double)x[k] * x[k];
    const double inv = ss > 0 ? 1.0 / sqrt(ss) : 0.0;
    for (int64_t k = 0; k < g->dim; k++) x[k] = (float)(x[k] * inv);
  }
}

void lik_plaid_normalize(float *pts, int64_t n, int64_t dim, int threads) {
  rows_ctx g = {NULL, NULL, pts, n, dim, NULL};
  lik_parallel_run(threads, (n + ROW_BLOCK - 1) / ROW_BLOCK, normalize_task, &g);
}

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

float lik_plaid_quantile(float *v, int64_t n, double q) {
  qsort(v, (size_t)n, sizeof(float), cmp_float);
  const double pos = q * (double)(n - 1);
  const int64_t lo = (int64_t)pos, hi = lo + 1 < n ? lo + 1 : n - 1;
  return (float)(v[lo] + (pos - (double)lo) * (v[hi] - v[lo]));
}

lik_status lik_plaid_compress(const lik_codec_problem *p, lik_cuda_staged **keep, unsigned same) {
#ifdef LIK_WITH_CUDA
  if (p->call.device == LIK_CUDA) return lik_cuda_codec_compress_host(p, keep, same);
#endif
  (void)keep;
  (void)same;
  return lik_cpu_codec_compress(p);
}

void lik_plaid_staged_free(lik_cuda_staged *keep) {
#ifdef LIK_WITH_CUDA
  lik_cuda_staged_free(keep);
#else
  (void)keep;
#endif
}

static lik_status assign_keep(const lik_codec_view *cv, const float *rows, int64_t n,
                              const lik_call *call, int32_t *codes, lik_cuda_staged **keep) {
  if (n == 0) return LIK_OK;
  lik_codec_problem p;
  memset(&p, 0, sizeof p);
  p.codec = *cv;
  p.codec.cutoffs = NULL;
  p.x.data = rows;
  p.x.dtype = LIK_F32;
  p.x.count = 1;
  p.x.len = n;
  p.x.dim = cv->dim;
  p.x.sl = cv->dim;
  p.x.sk = 1;
  p.tok.codes = codes;
  p.tok.codes_dtype = LIK_I32;
  p.tok.code_s = 1;
  p.tok.count = 1;
  p.tok.len = n;
  p.call = *call;
  return lik_plaid_compress(&p, keep, LIK_CUDA_SAME_ROWS); /* keep: the same points each pass */
}

lik_status lik_plaid_assign(const lik_codec_view *cv, const float *rows, int64_t n,
                            const lik_call *call, int32_t *codes) {
  return assign_keep(cv, rows, n, call, codes, NULL);
}

typedef struct {
  const float *pts;
  const int64_t *order, *start;
  int64_t dim;
  float *cent;
  uint8_t *empty;
} upd_ctx;

#define UPD_BLOCK 16

static void update_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  const upd_ctx *g = (const upd_ctx *)ctx;
  const int64_t d = g->dim;
  double acc[1024], *sum = acc;
  double *heap = d > 1024 ? (double *)malloc((size_t)d * sizeof(double)) : NULL;
  if (d > 1024) {
    if (!heap) { /* no memory: leave these centroids as they are */
      return;
    }
    sum = heap;
  }
  for (int64_t c = task * UPD_BLOCK; c < (task + 1) * UPD_BLOCK; c++) {
    if (g->start[c] == g->start[c + 1]) {
      g->empty[c] = 1;
      continue;
    }
    for (int64_t k = 0; k < d; k++) sum[k] = 0;
    for (int64_t i = g->start[c]; i < g->start[c + 1]; i++) {
      const float *x = g->pts + g->order[i] * d;
      for (int64_t k = 0; k < d; k++) sum[k] += x[k];
    }
    double ss = 0;
    for (int64_t k = 0; k < d; k++) ss += sum[k] * sum[k];
    if (!(ss > 0)) { /* points that cancel out: re-seed it */
      g->empty[c] = 1;
      continue;
    }
    const double inv = 1.0 / sqrt(ss);
    for (int64_t k = 0; k < d; k++) g->cent[c * d + k] = (float)(sum[k] * inv);
  }
  free(heap);
}

lik_status lik_plaid_kmeans(const float *pts, int64_t n, int64_t dim, int64_t k, int niters,
                            uint64_t seed, const lik_call *call, float *cent) {
  uint64_t rng = seed ^ 0x6b6d65616e73ull; /* "kmeans" */
  const int64_t kpad = (k + UPD_BLOCK - 1) / UPD_BLOCK * UPD_BLOCK;
  int64_t *perm = (int64_t *)malloc((size_t)n * sizeof(int64_t));
  int32_t *codes = (int32_t *)malloc((size_t)n * sizeof(int32_t));
  int64_t *order = (int64_t *)malloc((size_t)n * sizeof(int64_t));
  int64_t *start = (int64_t *)calloc((size_t)kpad + 2, sizeof(int64_t));
  uint8_t *empty = (uint8_t *)calloc((size_t)kpad, 1);
  lik_cuda_staged *keep = NULL;
  lik_status st = LIK_OK;
  if (!perm || !codes || !order || !start || !empty) {
    st = lik_fail(LIK_ERR_ALLOC, "k-means: cannot allocate its tables for %lld points",
                  (long long)n);
    goto out;
  }
  /* initial centroids: k distinct points */
  lik_plaid_sample(&rng, perm, n, k);
  for (int64_t i = 0; i < k; i++)
    memcpy(cent + i * dim, pts + perm[i] * dim, (size_t)dim * sizeof(float));
  const lik_codec_view cv = lik_plaid_dense_view(cent, LIK_F32, k, dim, 8);
  for (int it = 0; it < niters; it++) {
    /* on a device the points stay there between the passes */
    if ((st = assign_keep(&cv, pts, n, call, codes, &keep))) goto out;
    /* counting sort of the points by centroid (stable: ascending points) */
    memset(start, 0, (size_t)(kpad + 2) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) start[codes[i] + 2]++;
    for (int64_t c = 0; c < kpad; c++) start[c + 2] += start[c + 1];
    for (int64_t i = 0; i < n; i++) order[start[codes[i] + 1]++] = i;
    /* start[c] .. start[c+1] are now centroid c's points */
    memset(empty, 0, (size_t)kpad);
    upd_ctx g = {pts, order, start, dim, cent, empty};
    /* the padding centroids (k .. kpad) have no points: never read */
    lik_parallel_run(call->threads, kpad / UPD_BLOCK, update_task, &g);
    for (int64_t c = 0; c < k; c++)
      if (empty[c]) {
        const int64_t r = (int64_t)lik_plaid_below(&rng, (uint64_t)n);
        memcpy(cent + c * dim, pts + r * dim, (size_t)dim * sizeof(float));
      }
  }
out:
  lik_plaid_staged_free(keep);
  free(perm);
  free(codes);
  free(order);
  free(start);
  free(empty);
  return st;
}
