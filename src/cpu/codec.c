/*
 * codec.c — the residual codec on the CPU: train (quantiles of a residual
 * sample), compress (nearest centroid through the MaxSim tile kernels, then
 * bucketise and pack), decompress (residual_decode.h; the path's decode kernel,
 * residual_internal.h).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "../core/checked.h"
#include "cpu_internal.h"
#include "residual_internal.h"

/* ---- train ------------------------------------------------------------------ */

/* The order key of a finite float: ascending with the values, -0 equal to +0. */
static uint32_t sort_key(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if (u == 0x80000000u) u = 0;
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* Sorts the finite v[0 .. n) ascending, stable (LSD radix, 4 passes of 8
 * bits; tmp: n floats): the array a stable comparison sort gives -- equal
 * values keep their order, -0 and +0 included -- as glibc's qsort (a merge
 * sort) gave before, in O(n). */
static void sort_floats(float *v, float *tmp, int64_t n) {
  int64_t cnt[256];
  float *a = v, *b = tmp;
  for (int sh = 0; sh < 32; sh += 8) {
    memset(cnt, 0, sizeof cnt);
    for (int64_t i = 0; i < n; i++) cnt[(sort_key(a[i]) >> sh) & 255]++;
    int64_t sum = 0;
    for (int j = 0; j < 256; j++) {
      const int64_t c = cnt[j];
      cnt[j] = sum;
      sum += c;
    }
    for (int64_t i = 0; i < n; i++) b[cnt[(sort_key(a[i]) >> sh) & 255]++] = a[i];
    float *t = a;
    a = b;
    b = t;
  } /* 4 passes: the result is back in v */
}

/* numpy's / torch's "linear" quantile q of sorted v[0 .. n), in fp64. */
static float quantile(const float *v, int64_t n, double q) {
  const double pos = q * (double)(n - 1);
  const int64_t lo = (int64_t)pos, hi = lo + 1 < n ? lo + 1 : n - 1;
  const double t = pos - (double)lo;
  return (float)((double)v[lo] + t * ((double)v[hi] - (double)v[lo]));
}

lik_status lik_cpu_codec_train(lik_context *ctx, const lik_tensor *r, int nbits, float *cutoffs,
                               int64_t cutoffs_s, float *weights, int64_t weights_s) {
  int64_t shape[LIK_MAX_DIMS] = {1, 1, 1, 1}, strides[LIK_MAX_DIMS] = {0, 0, 0, 0};
  const int off = LIK_MAX_DIMS - r->ndim; /* right-align to 4 dims */
  for (int i = 0; i < r->ndim; i++) {
    shape[off + i] = r->shape[i];
    strides[off + i] = r->strides[i];
  }
  const int64_t n = shape[0] * shape[1] * shape[2] * shape[3]; /* n x 4 bytes fit: lik_codec_train */
  lik_ws ws;
  lik_ws_open(&ws, ctx);
  float *v = (float *)lik_ws_array(&ws, n, sizeof(float), 0);
  float *tmp = v ? (float *)lik_ws_array(&ws, n, sizeof(float), 0) : NULL;
  if (!v || !tmp) {
    lik_ws_close(&ws);
    return lik_fail(LIK_ERR_ALLOC, "lik_codec_train: cannot allocate %lld bytes for the sample",
                    (long long)n * 8);
  }
  int64_t m = 0;
  for (int64_t a = 0; a < shape[0]; a++)
    for (int64_t b = 0; b < shape[1]; b++)
      for (int64_t c = 0; c < shape[2]; c++)
        for (int64_t e = 0; e < shape[3]; e++, m++) {
          const int64_t o = a * strides[0] + b * strides[1] + c * strides[2] + e * strides[3];
          v[m] = lik_load_f32(r->data, r->dtype, o);
          if (!isfinite(v[m])) {
            const int nan = isnan(v[m]);
            lik_ws_close(&ws);
            return lik_fail(LIK_ERR_VALUE, "residuals: value %lld (flat, row-major) is %s",
                            (long long)m, nan ? "NaN" : "infinite");
          }
        }
  sort_floats(v, tmp, n);
  const int nb = 1 << nbits;
  for (int i = 1; i < nb; i++) cutoffs[(i - 1) * cutoffs_s] = quantile(v, n, (double)i / nb);
  for (int i = 0; i < nb; i++) weights[i * weights_s] = quantile(v, n, (i + 0.5) / nb);
  lik_ws_close(&ws);
  return LIK_OK;
}

/* ---- compress ---------------------------------------------------------------- */

#define LIK_CODEC_CHUNK_BYTES (128 * 1024) /* centroid rows per pass of the tiles */
#define LIK_CODEC_PANELS 8                 /* query panels (of w tokens) per task */

typedef struct {
  const lik_codec_problem *p;
  const lik_cpu_kernels *kt;
  float *crows;   /* [cpad][d] fp32 centroids, the last one repeated to cpad */
  int32_t *ctix;  /* [cpad] centroid index of each row */
  int64_t cpad, R, block;
  float cut[255];
  int ncut;
  char *scratch; /* one block per thread: thread t's at scratch + t * stride */
  size_t stride, off_rows, off_m, off_ix;
  atomic_llong bad; /* lowest token without a finite best centroid, or INT64_MAX */
} comp_ctx;

static void compress_task(void *ctx, int tid, int64_t task) {
  comp_ctx *g = (comp_ctx *)ctx;
  const lik_codec_problem *p = g->p;
  const lik_cpu_kernels *kt = g->kt;
  const int64_t d = p->codec.dim, w = kt->w, T = p->x.len;
  const int64_t t0 = task * g->block, nt = t0 + g->block < T ? g->block : T - t0;
  const int64_t npan = (nt + w - 1) / w;
  char *sc = g->scratch + (size_t)tid * g->stride;
  float *pan = (float *)sc, *rows = (float *)(sc + g->off_rows), *m = (float *)(sc + g->off_m);
  int32_t *ix = (int32_t *)(sc + g->off_ix);

  memset(pan, 0, (size_t)(npan * w * d) * sizeof(float));
  for (int64_t j = 0; j < nt; j++) {
    float *x = rows + j * d, *dst = pan + (j / w) * w * d + j % w;
    for (int64_t k = 0; k < d; k++) {
      x[k] = lik_load_f32(p->x.data, p->x.dtype, (t0 + j) * p->x.sl + k * p->x.sk);
      dst[k * w] = x[k];
    }
  }
  for (int64_t l = 0; l < npan * w; l++) {
    m[l] = -INFINITY;
    ix[l] = -1;
  }
  for (int64_t c0 = 0; c0 < g->cpad; c0 += g->R) {
    const int64_t cnt = c0 + g->R < g->cpad ? g->R : g->cpad - c0;
    for (int64_t q = 0; q < npan; q++) {
      const int narrow = kt->w_tail && nt - q * w <= kt->w_tail;
      (narrow ? kt->tile_tail : kt->tile)(pan + q * w * d, w, g->crows + c0 * d, d,
                                          g->ctix + c0, cnt, m + q * w, ix + q * w);
    }
  }

  const lik_ctokens *ct = &p->tok;
  const int nbits = p->codec.nbits, cpb = 8 / nbits;
  for (int64_t j = 0; j < nt; j++) {
    const int64_t t = t0 + j;
    if (ix[j] < 0) { /* NaN / -inf everywhere: record the lowest such token */
      long long cur = atomic_load(&g->bad);
      while (t < cur && !atomic_compare_exchange_weak(&g->bad, &cur, (long long)t)) {
      }
      continue;
    }
    const float *x = rows + j * d, *c = g->crows + (int64_t)ix[j] * d;
    if (ct->codes_dtype == LIK_I32)
      ((int32_t *)ct->codes)[t * ct->code_s] = ix[j];
    else
      ((int64_t *)ct->codes)[t * ct->code_s] = ix[j];
    if (!ct->res) continue; /* codes only (k-means assignment) */
    uint8_t *res = (uint8_t *)ct->res + t * ct->res_st;
    for (int64_t byte = 0; byte < p->codec.width; byte++) {
      uint8_t b[8];
      for (int i = 0; i < cpb; i++) {
        const int64_t k = byte * cpb + i;
        b[i] = (uint8_t)lik_res_bucket(g->cut, g->ncut, x[k] - c[k]);
      }
      res[byte * ct->res_sp] = lik_res_byte(b, nbits, p->codec.layout);
    }
  }
}

lik_status lik_cpu_codec_compress(const lik_codec_problem *p) {
  comp_ctx g;
  memset(&g, 0, sizeof g);
  g.p = p;
  g.kt = lik_cpu_kernels_for(p->call.context);
  const int64_t d = p->codec.dim, C = p->codec.ncent, mr = g.kt->mr, w = g.kt->w;
  g.ncut = p->codec.cutoffs ? (1 << p->codec.nbits) - 1 : 0; /* none: codes only */
  for (int i = 0; i < g.ncut; i++)
    g.cut[i] = lik_load_f32(p->codec.cutoffs, p->codec.cutoffs_dtype, i * p->codec.cutoffs_s);
  atomic_init(&g.bad, INT64_MAX);

  /* Centroids as fp32 tile rows, padded to a multiple of mr by repeating the
   * last one (an equal dot never passes the tiles' strict >). */
  g.cpad = C / mr * mr + (C % mr ? mr : 0); /* no C + mr - 1 overflow */
  size_t rows_b, tix_b;
  if (lik_bytes2(g.cpad, d, sizeof(float), &rows_b) || lik_bytes(g.cpad, sizeof(int32_t), &tix_b))
    return lik_fail(LIK_ERR_ALLOC, "lik_codec: C=%lld centroid rows of d=%lld fp32 values exceed the "
                    "address space", (long long)C, (long long)d);
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);
  g.crows = (float *)lik_ws_alloc(&ws, rows_b);
  g.ctix = (int32_t *)lik_ws_alloc(&ws, tix_b);
  if (!g.crows || !g.ctix) {
    lik_ws_close(&ws);
    return lik_fail(LIK_ERR_ALLOC, "lik_codec: cannot allocate %zu + %zu bytes for the centroid "
                    "rows", rows_b, tix_b);
  }
  for (int64_t c = 0; c < g.cpad; c++) {
    g.ctix[c] = (int32_t)(c < C ? c : C - 1);
    lik_res_centroid(&p->codec, g.ctix[c], g.crows + c * d);
  }
  g.R = LIK_CODEC_CHUNK_BYTES / (d * 4) / mr * mr;
  if (g.R < mr) g.R = mr;
  g.block = LIK_CODEC_PANELS * w;
  const int64_t T = p->x.len, ntasks = (T + g.block - 1) / g.block;

  size_t off = (size_t)(g.block * d) * sizeof(float);
  g.off_rows = off;
  off += (size_t)(g.block * d) * sizeof(float);
  g.off_m = off;
  off += (size_t)g.block * sizeof(float);
  g.off_ix = off;
  off += (size_t)g.block * sizeof(int32_t);
  int nth = p->call.threads < 256 ? p->call.threads : 256;
  if (nth > ntasks) nth = (int)ntasks;
  const lik_status st = lik_parallel_run_ws(&ws, nth, ntasks, off, &g.scratch, &g.stride,
                                            compress_task, &g, "lik_codec compress");
  lik_ws_close(&ws);
  if (st) return st;
  const long long bad = atomic_load(&g.bad);
  if (bad != INT64_MAX)
    return lik_fail(LIK_ERR_VALUE,
                    "X: token %lld has no finite inner product with any centroid (NaN or "
                    "infinite values); its code and residual are not written",
                    bad);
  return LIK_OK;
}

/* ---- decompress -------------------------------------------------------------- */

#define LIK_CODEC_DECODE_BLOCK 256

typedef struct {
  const lik_codec_problem *p;
  const lik_res_kernels *rk; /* the call's path: its decode */
  lik_res_table tab;
  char *scratch; /* per thread (at scratch + t * stride): centroid row + decoded row, 2 * d */
  size_t stride;
} decomp_ctx;

static void store_row(const lik_seqs *s, int64_t t, const float *v) {
  const int64_t off = t * s->sl;
  for (int64_t k = 0; k < s->dim; k++) lik_store_f64((void *)s->data, s->dtype, off + k * s->sk, v[k]);
}

static void decompress_task(void *ctx, int tid, int64_t task) {
  const decomp_ctx *g = (const decomp_ctx *)ctx;
  const lik_codec_problem *p = g->p;
  const lik_ctokens *ct = &p->tok;
  const int64_t d = p->codec.dim, T = p->x.len;
  float *cent = (float *)(g->scratch + (size_t)tid * g->stride), *x = cent + d;
  const int64_t t1 = (task + 1) * LIK_CODEC_DECODE_BLOCK < T ? (task + 1) * LIK_CODEC_DECODE_BLOCK : T;
  for (int64_t t = task * LIK_CODEC_DECODE_BLOCK; t < t1; t++) {
    const int64_t c = lik_ct_code(ct, t * ct->code_s);
    const float *cr = cent;
    if (p->codec.cent_dtype == LIK_F32 && p->codec.cent_sk == 1) /* read in place */
      cr = (const float *)p->codec.cent + c * p->codec.cent_sc;
    else
      lik_res_centroid(&p->codec, c, cent);
    g->rk->decode(&g->tab, p->codec.width, cr, ct->res + t * ct->res_st, ct->res_sp, x);
    if (p->call.normalize) {
      const float inv = lik_res_inv_norm(x, d);
      for (int64_t k = 0; k < d; k++) x[k] *= inv;
    }
    store_row(&p->x, t, x);
  }
}

lik_status lik_cpu_codec_decompress(const lik_codec_problem *p) {
  decomp_ctx g;
  g.p = p;
  g.rk = lik_res_kernels_for(p->call.context);
  lik_res_table_init(&g.tab, &p->codec);
  const int64_t ntasks = (p->x.len + LIK_CODEC_DECODE_BLOCK - 1) / LIK_CODEC_DECODE_BLOCK;
  int nth = p->call.threads < 256 ? p->call.threads : 256;
  if (nth > ntasks) nth = (int)ntasks;
  const size_t bytes = (size_t)(2 * p->codec.dim) * sizeof(float);
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);
  const lik_status st = lik_parallel_run_ws(&ws, nth, ntasks, bytes, &g.scratch, &g.stride,
                                            decompress_task, &g, "lik_codec decompress");
  lik_ws_close(&ws);
  return st;
}
