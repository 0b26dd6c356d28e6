/*
 * residual.c — the CPU residual scorer (lik_maxsim_residual, _varlen) and
 * PLAID's approximate score (lik_plaid_approx_score): the drivers over the
 * kernels of residual_internal.h (this file holds their portable instance).
 *
 * One call:
 *   1. marks the centroids the documents use (parallel over documents) and
 *      numbers them (u = 0 .. nused-1);
 *   2. scoring: widens the used centroids to fp32 (fp32 centroids with unit
 *      stride are read in place) and, under normalize, computes every
 *      token's 1 / ||c + r|| once (parallel);
 *   3. per query: builds its tables (QC over the used centroids and the byte
 *      tables; approx: the query's centroid scores over the used centroids),
 *      then scores blocks of documents in parallel.
 * Every output (i, j) is computed by one task in a fixed order (tokens
 * ascending, strict-> max, lowest index on ties; the score summed over query
 * tokens ascending), so results do not depend on the thread count.
 */
#include "../core/checked.h"
#include "cpu_internal.h"
#include "residual_internal.h"

#define KN(x) res_portable_##x
#define VW 4
#include "residual_kernel.inc"
#undef KN
#undef VW

const lik_res_kernels lik_res_kernels_portable = {res_portable_byte_table,
                                                  res_portable_centroid_row, res_portable_inv_norm,
                                                  res_portable_adc, res_portable_max_rows,
    res_portable_centroid_rows4, res_portable_decode};

#define LB LIK_RES_LB
#define CH 256    /* tokens per kernel call */
#define UROWS 64  /* table rows per task */
#define PREFETCH 4 /* tokens ahead */

const lik_res_kernels *lik_res_kernels_for(const lik_context *ctx) {
  return lik_cpu_kernels_for(ctx)->res;
}

typedef struct {
  /* the call */
  const lik_residual_problem *rp; /* scoring, or NULL */
  const lik_approx_problem *ap;   /* approx, or NULL */
  const lik_ctokens *d;
  const lik_res_kernels *rk;
  lik_res_table wt;
  int64_t ncent, dim, width, nq, lq, lqp, nlb;
  /* used centroids */
  uint8_t *used;  /* [ncent] */
  int32_t *umap;  /* [ncent]: row u of a used centroid */
  int32_t *ulist; /* [nused]: its centroid id */
  int64_t nused;
  float *cent;    /* scoring: [nused][dim] fp32, widened (NULL: cin) */
  const float *cin; /* scoring: the codec's fp32 rows, read in place (centroid c at c * cin_s) */
  int64_t cin_s;
  float *inv;     /* scoring: [tokens] 1/||x|| (or 1) */
  /* the current query */
  int64_t qi;
  float *qt;  /* scoring: [dim][lqp] */
  float *qc;  /* [nlb][nused][LB]: QC, or the approx centroid scores */
  float *tab; /* scoring: [nlb][width][256][LB] */
  int64_t ntab_tasks;
  /* work split over documents */
  int64_t dblock, ndblocks;
  char *scratch; /* one block per thread: thread t's at scratch + t * stride */
  size_t stride, off_urow, off_inv, off_m, off_ix;
} rctx;

/* a x b x c elements of elem bytes from the call's workspace, 64-byte
 * aligned (a table row never straddles a cache line), never NULL for a zero
 * count; NULL when a count is negative, the size does not fit
 * (src/core/checked.h) or memory is out. */
static void *xalloc(lik_ws *ws, int64_t a, int64_t b, int64_t c, size_t elem) {
  int64_t n;
  size_t bytes;
  if (lik_mul_i64(a, b, &n) || lik_bytes2(n, c, elem, &bytes) || bytes > SIZE_MAX - 128) return NULL;
  return lik_ws_alloc(ws, (bytes + 63) / 64 * 64 + 64);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Scoring: the fp32 row of used centroid u (centroid c). */
static const float *cent_row(const rctx *g, int64_t u, int64_t c) {
  return g->cin ? g->cin + c * g->cin_s : g->cent + u * g->dim;
}

/* ---- 1. used centroids, 2. centroids and norms --------------------------------- */

/* fn(g, d, n, l, len) for each token l of each document n (len tokens) of
 * block task: the walk of mark_task and norm_task. */
typedef void (*token_fn)(rctx *g, const lik_ctokens *d, int64_t n, int64_t l, int64_t len);
static inline __attribute__((always_inline)) void block_tokens(void *ctx, int64_t task,
                                                               token_fn fn) {
  rctx *g = (rctx *)ctx;
  const lik_ctokens *d = g->d;
  for (int64_t n = task * g->dblock; n < min64((task + 1) * g->dblock, d->count); n++) {
    const int64_t len = lik_ct_len(d, n);
    for (int64_t l = 0; l < len; l++) fn(g, d, n, l, len);
  }
}

static void mark_token(rctx *g, const lik_ctokens *d, int64_t n, int64_t l, int64_t len) {
  (void)len;
  __atomic_store_n(&g->used[lik_ct_code(d, lik_ct_code_off(d, n, l))], 1, __ATOMIC_RELAXED);
}

static void mark_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  block_tokens(ctx, task, mark_token);
}

static void cent_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  rctx *g = (rctx *)ctx;
  for (int64_t u = task * UROWS; u < min64((task + 1) * UROWS, g->nused); u++)
    lik_res_centroid(&g->rp->codec, g->ulist[u], g->cent + u * g->dim);
}

static void norm_token(rctx *g, const lik_ctokens *d, int64_t n, int64_t l, int64_t len) {
  const int64_t c = lik_ct_code(d, lik_ct_code_off(d, n, l));
  if (l + PREFETCH < len) { /* the centroid row a few tokens ahead (a random row) */
    const int64_t c2 = lik_ct_code(d, lik_ct_code_off(d, n, l + PREFETCH));
    const float *r = cent_row(g, g->umap[c2], c2);
    for (int64_t k = 0; k < g->dim; k += 16) __builtin_prefetch(r + k);
  }
  g->inv[lik_ct_tok(d, n, l)] =
      g->rp->call.normalize ? g->rk->inv_norm(&g->wt, g->width, cent_row(g, g->umap[c], c),
                                              d->res + lik_ct_res_off(d, n, l), d->res_sp)
                            : 1.0f;
}

static void norm_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  block_tokens(ctx, task, norm_token);
}

/* ---- 3. per query: tables, documents ------------------------------------------- */

/* Query qi, widened (and normalised) into qt[k][s], lanes past lq zero. */
static void load_query(rctx *g) {
  const lik_seqs *q = &g->rp->q;
  const int64_t dim = g->dim;
  float *row = g->qt + dim * g->lqp; /* scratch row after qt */
  memset(g->qt, 0, (size_t)(dim * g->lqp) * sizeof(float));
  for (int64_t s = 0; s < g->lq; s++) {
    const int64_t off = lik_token_offset(q, g->qi, s);
    for (int64_t k = 0; k < dim; k++) row[k] = lik_load_f32(q->data, q->dtype, off + k * q->sk);
    const float inv = g->rp->call.normalize ? lik_res_inv_norm(row, dim) : 1.0f;
    for (int64_t k = 0; k < dim; k++) g->qt[k * g->lqp + s] = row[k] * inv;
  }
}

static void table_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  rctx *g = (rctx *)ctx;
  if (task < g->ntab_tasks) { /* byte table p of lane block b */
    const int64_t b = task / g->width, p = task % g->width;
    g->rk->byte_table(g->qt + b * LB, g->lqp, &g->wt, p,
                      g->tab + ((b * g->width + p) << 8) * LB);
    return;
  }
  task -= g->ntab_tasks;
  const int64_t nub = (g->nused + UROWS - 1) / UROWS, b = task / nub, u0 = (task % nub) * UROWS;
  float *dst = g->qc + b * g->nused * LB;
  for (int64_t u = u0; u < min64(u0 + UROWS, g->nused); u++) {
    if (g->rp) {
      g->rk->centroid_row(cent_row(g, u, g->ulist[u]), g->dim, g->qt + b * LB, g->lqp, dst + u * LB);
      continue;
    }
    const lik_approx_problem *a = g->ap; /* approx: the query's centroid scores */
    for (int l = 0; l < LB; l++) {
      const int64_t s = b * LB + l;
      const int64_t off = g->qi * a->cs.si + s * a->cs.ss + g->ulist[u] * a->cs.sc;
      dst[u * LB + l] = s < g->lq ? lik_load_f32(a->cs.data, a->cs.dtype, off) : 0.0f;
    }
  }
}

static void doc_task(void *ctx, int tid, int64_t task) {
  rctx *g = (rctx *)ctx;
  const lik_ctokens *d = g->d;
  char *sc = g->scratch + (size_t)tid * g->stride;
  int64_t *roff = (int64_t *)sc;
  int32_t *urow = (int32_t *)(sc + g->off_urow);
  float *inv = (float *)(sc + g->off_inv), *m = (float *)(sc + g->off_m);
  int32_t *ix = (int32_t *)(sc + g->off_ix);
  for (int64_t n = task * g->dblock; n < min64((task + 1) * g->dblock, d->count); n++) {
    for (int64_t s = 0; s < g->lqp; s++) {
      m[s] = -INFINITY;
      ix[s] = -1;
    }
    const int64_t len = lik_ct_len(d, n);
    for (int64_t l0 = 0; l0 < len; l0 += CH) {
      const int64_t cnt = min64(CH, len - l0);
      for (int64_t t = 0; t < cnt; t++) {
        urow[t] = g->umap[lik_ct_code(d, lik_ct_code_off(d, n, l0 + t))];
        if (g->rp) {
          roff[t] = lik_ct_res_off(d, n, l0 + t);
          inv[t] = g->inv[lik_ct_tok(d, n, l0 + t)];
        }
      }
      for (int64_t b = 0; b < g->nlb; b++) {
        const float *qc = g->qc + b * g->nused * LB;
        if (g->rp)
          g->rk->adc(qc, g->tab + b * g->width * 256 * LB, g->width, d->res, d->res_sp, roff, urow,
                     inv, cnt, (int32_t)l0, m + b * LB, ix + b * LB);
        else
          g->rk->max_rows(qc, urow, cnt, m + b * LB);
      }
    }
    float s = 0.0f;
    for (int64_t q = 0; q < g->lq; q++)
      if (m[q] != -INFINITY) s += m[q]; /* no winning token: adds 0 */
    if (g->rp) {
      const lik_residual_problem *p = g->rp;
      p->out.scores[g->qi * p->out.score_si + n * p->out.score_sj] = s;
      if (p->out.argmax)
        for (int64_t q = 0; q < g->lq; q++)
          p->out.argmax[g->qi * p->out.argmax_si + n * p->out.argmax_sj + q * p->out.argmax_ss] =
              ix[q];
    } else {
      g->ap->scores[g->qi * g->ap->score_si + n * g->ap->score_sj] = s;
    }
  }
}

/* ---- the call -------------------------------------------------------------------- */

/* Steps 1 and 2 and every allocation (from ws); 0 on allocation failure. */
static int prepare(rctx *g, int nth, lik_ws *ws) {
  const lik_ctokens *d = g->d;
  g->used = g->ncent < INT64_MAX ? (uint8_t *)lik_ws_array(ws, g->ncent + 1, 1, 1) : NULL;
  g->umap = (int32_t *)xalloc(ws, g->ncent, 1, 1, sizeof(int32_t));
  if (!g->used || !g->umap) return 0;
  lik_parallel_run(nth, g->ndblocks, mark_task, g);
  for (int64_t c = 0; c < g->ncent; c++) g->umap[c] = g->used[c] ? (int32_t)g->nused++ : -1;
  g->ulist = (int32_t *)xalloc(ws, g->nused, 1, 1, sizeof(int32_t));
  g->qc = (float *)xalloc(ws, g->nlb, g->nused, LB, sizeof(float));
  if (!g->ulist || !g->qc) return 0;
  for (int64_t c = 0; c < g->ncent; c++)
    if (g->umap[c] >= 0) g->ulist[g->umap[c]] = (int32_t)c;
  if (g->rp) {
    const lik_codec_view *cv = &g->rp->codec;
    if (cv->cent_dtype == LIK_F32 && cv->cent_sk == 1) {
      g->cin = (const float *)cv->cent;
      g->cin_s = cv->cent_sc;
    } else if (!(g->cent = (float *)xalloc(ws, g->nused, g->dim, 1, sizeof(float)))) {
      return 0;
    }
    g->inv = (float *)xalloc(ws, lik_ct_ntok(d), 1, 1, sizeof(float));
    g->qt = (float *)xalloc(ws, g->lqp + 1, g->dim, 1, sizeof(float));
    g->tab = (float *)xalloc(ws, g->nlb, g->width, 256 * LB, sizeof(float));
    if (!g->inv || !g->qt || !g->tab) return 0;
    if (g->cent) lik_parallel_run(nth, (g->nused + UROWS - 1) / UROWS, cent_task, g);
    lik_parallel_run(nth, g->ndblocks, norm_task, g);
    g->ntab_tasks = g->nlb * g->width;
  }
  size_t off = CH * sizeof(int64_t);
  g->off_urow = off;
  off += CH * sizeof(int32_t);
  g->off_inv = off;
  off += CH * sizeof(float);
  g->off_m = off;
  off += (size_t)g->lqp * sizeof(float);
  g->off_ix = off;
  off += (size_t)g->lqp * sizeof(int32_t);
  return (g->scratch = lik_ws_blocks(ws, nth, off, &g->stride)) != NULL;
}

static lik_status run(rctx *g, const lik_ctokens *d, const lik_call *call) {
  lik_context *ctx = call->context;
  const int nth = call->threads < 256 ? call->threads : 256;
  g->d = d;
  g->rk = lik_res_kernels_for(ctx);
  g->lqp = (g->lq + LB - 1) / LB * LB;
  g->nlb = g->lqp / LB;
  g->dblock = (g->d->count + 8 * nth - 1) / (8 * nth);
  g->ndblocks = (g->d->count + g->dblock - 1) / g->dblock;
  lik_status st = LIK_OK;
  lik_ws ws;
  lik_ws_open(&ws, ctx);
  if (prepare(g, nth, &ws)) {
    const int64_t ntables = g->ntab_tasks + g->nlb * ((g->nused + UROWS - 1) / UROWS);
    for (g->qi = 0; g->qi < g->nq; g->qi++) {
      if (g->rp) load_query(g);
      lik_parallel_run(nth, ntables, table_task, g);
      lik_parallel_run(nth, g->ndblocks, doc_task, g);
    }
  } else {
    st = lik_fail(LIK_ERR_ALLOC, "residual scoring: cannot allocate its tables (%lld centroids, "
                  "%lld tokens)", (long long)g->ncent, (long long)lik_ct_ntok(g->d));
  }
  lik_ws_close(&ws);
  return st;
}

lik_status lik_cpu_maxsim_residual(const lik_residual_problem *p) {
  rctx g;
  memset(&g, 0, sizeof g);
  g.rp = p;
  lik_res_table_init(&g.wt, &p->codec);
  g.ncent = p->codec.ncent;
  g.dim = p->codec.dim;
  g.width = p->codec.width;
  g.nq = p->q.count;
  g.lq = p->q.len;
  return run(&g, &p->d, &p->call);
}

lik_status lik_cpu_plaid_approx(const lik_approx_problem *p) {
  rctx g;
  memset(&g, 0, sizeof g);
  g.ap = p;
  g.ncent = p->cs.ncent;
  g.nq = p->cs.nq;
  g.lq = p->cs.lq;
  return run(&g, &p->d, &p->call);
}

/* ---- centroid scores (the PLAID index's stage 1) ---------------------------------- */

typedef struct {
  const lik_res_kernels *rk;
  const float *qt, *cent;
  int64_t lqp, ncent, d;
  float *out;
} cs_ctx;

static void cs_task(void *ctx, int tid, int64_t task) {
  (void)tid;
  const cs_ctx *g = (const cs_ctx *)ctx;
  const int64_t c1 = min64((task + 1) * UROWS, g->ncent);
  int64_t c = task * UROWS;
  for (; c + 4 <= c1; c += 4)
    for (int64_t b = 0; b < g->lqp; b += LB)
      g->rk->centroid_rows4(g->cent + c * g->d, g->d, g->qt + b, g->lqp, g->out + c * g->lqp + b,
                            g->lqp);
  for (; c < c1; c++)
    for (int64_t b = 0; b < g->lqp; b += LB)
      g->rk->centroid_row(g->cent + c * g->d, g->d, g->qt + b, g->lqp, g->out + c * g->lqp + b);
}

void lik_cpu_centroid_scores(const lik_context *ctx, int nth, const float *qt, int64_t lqp,
                             const float *cent, int64_t ncent, int64_t d, float *out) {
  cs_ctx g = {lik_res_kernels_for(ctx), qt, cent, lqp, ncent, d, out};
  lik_parallel_run(nth, (ncent + UROWS - 1) / UROWS, cs_task, &g);
}
