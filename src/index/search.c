/*
 * search.c — PLAID search on the CPU (the stages of lik_experimental.h):
 * centroid scores through the residual scorer's centroid-row kernel, IVF
 * probing, candidate union (a bitmap), the approximate score and the exact
 * residual MaxSim through the CPU backend on the candidates' codes gathered
 * into packed buffers (checked as they are read; residual bytes read in place
 * where they are one array, else gathered too), rankings under the host
 * top-k order (lik_topk_better).
 *
 * Threads: a batch of at least as many queries as threads runs one query per
 * task (every stage on that task's thread); fewer queries run one after the
 * other, each with the threads inside its stages: centroid scores, probing
 * (centroid ranges, a heap per token in each, merged), the candidate union
 * (one IVF list per task into per-thread bitmaps, OR-ed), the gathers (blocks
 * of candidates at offsets from prefix sums), and the backend's approximate
 * and exact scores.  Every stage's output is a function of the query alone (a
 * set under a total order, or values each written by one task), so results do
 * not depend on the thread count.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../cpu/cpu_internal.h"
#include "../cpu/topk.h"
#include "index_internal.h"

#define LB 32
#define GBLOCK 64 /* candidates per gather task */
/* Work a thread of a stage gets at least (waking a thread of the pool costs
 * up to tens of microseconds), as (centroid, token) pairs probed, list
 * entries of the union, tokens gathered. */
#define PROBE_GRAIN 65536
#define UNION_GRAIN 16384
#define GATHER_GRAIN 32768

typedef struct {
  float *qt, *cs, *cmax;
  uint8_t *cellmark, *allowed, *zero;
  int64_t *cells;
  uint64_t *seen, *inset;
  uint64_t *tseen; /* [inner][words]: each thread's marks of the union, or NULL (one thread: seen) */
  int64_t *cand, cap_cand;
  int64_t *sub, cap_sub;
  lik_hit *hits;
  int64_t cap_hits;
  int64_t *sel, cap_sel;
  int32_t *gcodes;
  int64_t cap_gcodes;
  uint8_t *gres;
  int64_t cap_gres;
  const uint8_t *gres_in; /* the exact stage's residuals: a chunk's, read in place (rows grows), or NULL (gres) */
  int64_t *grows, cap_grows;
  int64_t *gcu, cap_gcu;
  float *sc;
  int64_t cap_sc;
  lik_hit *heap;   /* [parts + 1][lq + 1][n_probe]: a heap per query token per centroid range */
  int64_t *nheap; /* [parts + 1][lq + 1] */
  int64_t parts;  /* probing's centroid ranges (1: the heaps are final) */
  /* what its tables were made for (a worker kept with the index fits a later search) */
  int64_t K, words, lqmax, nprobe;
  int inner;
  /* error of this worker: the lowest query that failed */
  int64_t err_q;
  lik_status err_st;
  char err[512];
} worker;

typedef struct {
  const lik_plaid_index *ix;
  const lik_plaid_query *q;
  worker *w;
  int inner; /* threads inside a query */
  int64_t lqmax;
} sctx;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- scratch ------------------------------------------------------------------------ */

/* Room for need elements (the contents are not kept: every buffer is filled
 * after it grows). */
static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return 1;
  int64_t c = *cap ? *cap : 256;
  while (c < need) c *= 2;
  free(*p);
  *p = malloc((size_t)c * elem);
  *cap = *p ? c : 0;
  return *p != NULL;
}

#define GROW(w, f, cap, need) grow((void **)&(w)->f, &(w)->cap, (need), sizeof(*(w)->f))

static void worker_free(worker *w) {
  free(w->qt);
  free(w->cs);
  free(w->cmax);
  free(w->cellmark);
  free(w->allowed);
  free(w->zero);
  free(w->cells);
  free(w->seen);
  free(w->inset);
  free(w->tseen);
  free(w->cand);
  free(w->sub);
  free(w->hits);
  free(w->sel);
  free(w->gcodes);
  free(w->gres);
  free(w->grows);
  free(w->gcu);
  free(w->sc);
  free(w->heap);
  free(w->nheap);
}

/* nprobe <= K (the API's clamp); inner: the threads inside a query. */
static int worker_init(worker *w, const lik_plaid_index *ix, int64_t lqmax, int64_t nprobe, int inner) {
  memset(w, 0, sizeof *w);
  w->err_q = INT64_MAX;
  const int64_t K = ix->ncent, lqp = (lqmax + LB - 1) / LB * LB, words = ix->ndocs / 64 + 1;
  w->K = K;
  w->words = words;
  w->lqmax = lqmax;
  w->nprobe = nprobe;
  w->inner = inner;
  /* probing's centroid ranges: PROBE_GRAIN pairs and at least 4 n_probe
   * centroids each, so their heaps (16-byte hits) take at most about what
   * the centroid scores take */
  const int64_t parts = inner > 1 && nprobe > 0
                            ? min64(min64(2 * (int64_t)inner, K / (4 * nprobe)), K * lqmax / PROBE_GRAIN)
                            : 1;
  w->parts = parts > 1 ? parts : 1;
  w->qt = (float *)malloc((size_t)((lqp ? lqp : LB) * ix->dim) * sizeof(float));
  w->cs = (float *)malloc((size_t)(K * (lqp ? lqp : LB)) * sizeof(float));
  w->cmax = (float *)malloc((size_t)K * sizeof(float));
  w->cellmark = (uint8_t *)calloc((size_t)K, 1);
  w->allowed = (uint8_t *)calloc((size_t)K, 1);
  w->zero = (uint8_t *)calloc((size_t)lqp + 1, 1);
  w->cells = (int64_t *)malloc((size_t)K * sizeof(int64_t));
  w->seen = (uint64_t *)calloc((size_t)words, sizeof(uint64_t));
  w->inset = (uint64_t *)calloc((size_t)words, sizeof(uint64_t));
  if (inner > 1) w->tseen = (uint64_t *)calloc((size_t)(inner * words), sizeof(uint64_t));
  w->heap = (lik_hit *)malloc((size_t)((w->parts + 1) * (lqmax + 1) * nprobe) * sizeof(lik_hit));
  w->nheap = (int64_t *)malloc((size_t)((w->parts + 1) * (lqmax + 1)) * sizeof(int64_t));
  return w->qt && w->cs && w->cmax && w->cellmark && w->allowed && w->zero && w->cells &&
         w->seen && w->inset && (inner == 1 || w->tseen) && w->heap && w->nheap;
}

static lik_status nomem(const char *what) {
  return lik_fail(LIK_ERR_ALLOC, "PLAID search: cannot allocate %s", what);
}

/* ---- stages ------------------------------------------------------------------------- */

/* Query qi's tokens normalised into qt[k][lqp] (lanes past lq zero); zero[s]
 * marks an all-zero token. */
static void load_query(const sctx *g, worker *w, int64_t qi, int64_t lq, int64_t lqp) {
  const lik_seqs *q = &g->q->q;
  const int64_t d = g->ix->dim;
  memset(w->qt, 0, (size_t)(lqp * d) * sizeof(float));
  for (int64_t s = 0; s < lq; s++) {
    const int64_t off = lik_token_offset(q, qi, s);
    float ss = 0;
    for (int64_t k = 0; k < d; k++) {
      const float v = lik_load_f32(q->data, q->dtype, off + k * q->sk);
      w->qt[k * lqp + s] = v;
      ss += v * v;
    }
    w->zero[s] = !(ss > 0); /* all zero (or NaN): probes nothing */
    const float inv = 1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
    for (int64_t k = 0; k < d; k++) w->qt[k * lqp + s] *= inv;
  }
}

/* Heap of the p best (score, id) seen, the worst at the root. */
static int hit_worse(const lik_hit *a, const lik_hit *b) {
  return lik_topk_better(b->s, b->i, a->s, a->i);
}

static void heap_push(lik_hit *h, int64_t *n, int64_t cap, lik_hit x) {
  if (*n < cap) {
    int64_t i = (*n)++;
    h[i] = x;
    while (i > 0) {
      const int64_t p = (i - 1) / 2;
      if (!hit_worse(&h[i], &h[p])) break;
      const lik_hit t = h[i];
      h[i] = h[p];
      h[p] = t;
      i = p;
    }
    return;
  }
  if (!hit_worse(&h[0], &x)) return; /* x is not better than the worst kept */
  h[0] = x;
  int64_t i = 0;
  for (;;) {
    int64_t b = i;
    const int64_t l = 2 * i + 1, r = l + 1;
    if (l < *n && hit_worse(&h[l], &h[b])) b = l;
    if (r < *n && hit_worse(&h[r], &h[b])) b = r;
    if (b == i) break;
    const lik_hit t = h[i];
    h[i] = h[b];
    h[b] = t;
    i = b;
  }
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* ---- probing: a heap per token over a range of centroids ------------------------------ */

typedef struct {
  const sctx *g;
  worker *w;
  int64_t lq, lqp, np;
} probe_ctx;

/* Range p of the centroids: its heaps (part p of w->heap), and with prune
 * its centroids' best scores over the query tokens (cmax). */
static void probe_task(void *ctx, int tid, int64_t p) {
  (void)tid;
  const probe_ctx *a = (const probe_ctx *)ctx;
  worker *w = a->w;
  const int64_t K = a->g->ix->ncent, lq = a->lq, lqp = a->lqp, np = a->np;
  const int has_sub = a->g->q->has_subset, prune = a->g->q->prune;
  lik_hit *heap = w->heap + p * (lq + 1) * np;
  int64_t *nheap = w->nheap + p * (lq + 1);
  memset(nheap, 0, (size_t)lq * sizeof(int64_t));
  for (int64_t c = p * K / w->parts; c < (p + 1) * K / w->parts; c++) {
    const float *row = w->cs + c * lqp;
    if (prune) {
      float m = -INFINITY;
      for (int64_t s = 0; s < lq; s++) m = fmaxf(m, row[s]);
      w->cmax[c] = m;
    }
    if (has_sub && !w->allowed[c]) continue;
    for (int64_t s = 0; s < lq; s++) {
      lik_hit *h = heap + s * np;
      if (w->zero[s] || (nheap[s] == np && !lik_topk_better(row[s], c, h[0].s, h[0].i))) continue;
      heap_push(h, &nheap[s], np, (lik_hit){row[s], c});
    }
  }
}

/* The probed cells (the n_probe best allowed centroids of every non-zero
 * token, a set) into w->cells; returns how many. */
static int64_t probe(const sctx *g, worker *w, int64_t lq, int64_t lqp) {
  probe_ctx a = {g, w, lq, lqp, g->q->n_probe};
  const int64_t np = a.np, P = w->parts;
  lik_parallel_run(g->inner, P, probe_task, &a);
  const lik_hit *heap = w->heap;
  const int64_t *nheap = w->nheap;
  if (P > 1) { /* the best of the ranges' best: part P */
    lik_hit *fh = w->heap + P * (lq + 1) * np;
    int64_t *fn = w->nheap + P * (lq + 1);
    for (int64_t s = 0; s < lq; s++) {
      fn[s] = 0;
      for (int64_t p = 0; p < P; p++)
        for (int64_t k = 0; k < w->nheap[p * (lq + 1) + s]; k++)
          heap_push(fh + s * np, &fn[s], np, w->heap[(p * (lq + 1) + s) * np + k]);
    }
    heap = fh;
    nheap = fn;
  }
  int64_t ncells = 0;
  for (int64_t s = 0; s < lq; s++)
    for (int64_t k = 0; k < nheap[s]; k++) {
      const int64_t c = heap[s * np + k].i;
      if (!w->cellmark[c]) {
        w->cellmark[c] = 1;
        w->cells[ncells++] = c;
      }
    }
  for (int64_t i = 0; i < ncells; i++) w->cellmark[w->cells[i]] = 0;
  return ncells;
}

/* ---- the candidate union: the probed lists' documents as bits ------------------------- */

typedef struct {
  const sctx *g;
  worker *w;
  uint64_t *bm; /* w->seen, or with several threads w->tseen: bitmap tid at bm + tid * words */
  int64_t words;
} union_ctx;

/* The documents of list cells[i] (live, in the subset) as bits of this
 * thread's bitmap. */
static void union_task(void *ctx, int tid, int64_t i) {
  const union_ctx *a = (const union_ctx *)ctx;
  const lik_plaid_index *ix = a->g->ix;
  const worker *w = a->w;
  const int has_sub = a->g->q->has_subset;
  uint64_t *bm = a->bm + tid * a->words;
  const int64_t c = w->cells[i];
  const int64_t *l = ix->ivf + ix->ivf_off[c];
  const int64_t n = ix->ivf_off[c + 1] - ix->ivf_off[c];
  for (int64_t k = 0; k < n; k++) {
    const int64_t j = l[k];
    const uint64_t bit = (uint64_t)1 << (j & 63);
    if (has_sub ? !(w->inset[j >> 6] & bit) : lik_plaid_is_dead(ix, j)) continue;
    bm[j >> 6] |= bit;
  }
}

/* The union of the probed cells' lists into w->seen; returns its size. */
static int64_t candidate_bits(const sctx *g, worker *w, int64_t ncells) {
  const lik_plaid_index *ix = g->ix;
  int64_t entries = 0;
  for (int64_t i = 0; i < ncells; i++) entries += ix->ivf_off[w->cells[i] + 1] - ix->ivf_off[w->cells[i]];
  const int nt = entries / UNION_GRAIN > 1 ? (int)min64(g->inner, entries / UNION_GRAIN) : 1;
  union_ctx a = {g, w, nt > 1 ? w->tseen : w->seen, ix->ndocs / 64 + 1};
  lik_parallel_run(nt, ncells, union_task, &a);
  int64_t n = 0;
  if (nt > 1) { /* the threads' bitmaps OR-ed (and cleared) */
    for (int64_t k = 0; k < a.words; k++) {
      uint64_t v = 0;
      for (int t = 0; t < nt; t++) {
        v |= w->tseen[t * a.words + k];
        w->tseen[t * a.words + k] = 0;
      }
      w->seen[k] = v;
      n += __builtin_popcountll(v);
    }
  } else {
    for (int64_t k = 0; k < a.words; k++) n += __builtin_popcountll(w->seen[k]);
  }
  return n;
}

/* ---- gathers ---------------------------------------------------------------------------- */

/* A code outside [0, K): token t of document ids[i]. */
typedef struct {
  int64_t i, t, c;
} badcode;

typedef struct {
  const lik_plaid_index *ix;
  worker *w;
  const int64_t *ids;
  int64_t n;
  const float *cmax; /* NULL: every token */
  float thr;
  int res;           /* the residual bytes too (copied unless w->gres_in) */
  int count;         /* the counting pass: tokens kept into gcu[i + 1] */
  badcode bad[256];  /* per thread: the first it met (i = INT64_MAX: none) */
} gather_ctx;

/* Block task of the candidates: the counting pass, or the copy to the
 * offsets gcu.  A thread stops at the first bad code it meets: threads take
 * blocks in increasing order, so the first bad code of all is the lowest of
 * the threads' first ones. */
static void gather_task(void *ctx, int tid, int64_t task) {
  gather_ctx *a = (gather_ctx *)ctx;
  const lik_plaid_index *ix = a->ix;
  worker *w = a->w;
  if (a->bad[tid].i != INT64_MAX) return;
  for (int64_t i = task * GBLOCK; i < min64((task + 1) * GBLOCK, a->n); i++) {
    const int64_t j = a->ids[i];
    const lik_pseg *s = &ix->segs[ix->doc_seg[j]];
    const int64_t t0 = ix->doc_off[j] - s->tok0, len = ix->doc_off[j + 1] - ix->doc_off[j];
    int64_t m = a->count ? 0 : w->gcu[i];
    for (int64_t t = 0; t < len; t++) {
      const int64_t c = lik_pseg_code(s, t0 + t);
      if (c < 0 || c >= ix->ncent) {
        a->bad[tid] = (badcode){i, t, c};
        return;
      }
      if (a->cmax && !(a->cmax[c] >= a->thr)) continue;
      if (!a->count) w->gcodes[m] = (int32_t)c;
      m++;
    }
    if (a->count) w->gcu[i + 1] = m;
    else if (a->res && !w->gres_in && len)
      memcpy(w->gres + w->gcu[i] * ix->width, s->res + t0 * ix->width, (size_t)(len * ix->width));
  }
}

/* The first bad code the tasks met, as an error (LIK_OK: none). */
static lik_status bad_code(const gather_ctx *a, int nth) {
  const badcode *b = NULL;
  for (int t = 0; t < nth; t++)
    if (a->bad[t].i != INT64_MAX && (!b || a->bad[t].i < b->i)) b = &a->bad[t];
  if (!b) return LIK_OK;
  return lik_fail(LIK_ERR_VALUE, "PLAID index: document %lld, token %lld: code %lld is outside "
                  "[0, K=%lld) (a corrupt codes file)", (long long)a->ids[b->i], (long long)b->t,
                  (long long)b->c, (long long)a->ix->ncent);
}

/* Codes (int32, checked) of documents ids[0..n) (ascending, n >= 1) into
 * w->gcodes, offsets into w->gcu; with cmax, tokens whose centroid scores
 * below thr are left out.  res: the residual bytes too, read in place when the documents'
 * rows are one array (w->gres_in, their first rows in w->grows), else copied
 * into w->gres. */
static lik_status gather(const sctx *g, worker *w, const int64_t *ids, int64_t n,
                         const float *cmax, float thr, int res, int64_t *maxlen) {
  const lik_plaid_index *ix = g->ix;
  const int nth = g->inner;
  if (!GROW(w, gcu, cap_gcu, n + 1)) return nomem("the candidates' tokens");
  gather_ctx a;
  a.ix = ix;
  a.w = w;
  a.ids = ids;
  a.n = n;
  a.cmax = cmax;
  a.thr = thr;
  a.res = res;
  for (int t = 0; t < nth; t++) a.bad[t].i = INT64_MAX;
  const int64_t ntasks = (n + GBLOCK - 1) / GBLOCK;
  int64_t all = 0; /* the candidates' tokens: the work of a pass */
  for (int64_t i = 0; i < n; i++) {
    w->gcu[i + 1] = ix->doc_off[ids[i] + 1] - ix->doc_off[ids[i]];
    all += w->gcu[i + 1];
  }
  const int nt = all / GATHER_GRAIN > 1 ? (int)min64(nth, all / GATHER_GRAIN) : 1;
  lik_status st;
  if (cmax) { /* the tokens kept */
    a.count = 1;
    lik_parallel_run(nt, ntasks, gather_task, &a);
    if ((st = bad_code(&a, nt))) return st;
  }
  /* in place: the ascending ids lie in chunks k0 .. k1 (chunks hold
   * consecutive documents), their rows one array when k0 == k1 or when the
   * chunks are consecutive parts of one mapped file (merged_residuals.npy) */
  w->gres_in = NULL;
  int inplace = res;
  const int64_t k0 = ix->doc_seg[ids[0]], k1 = ix->doc_seg[ids[n - 1]];
  const lik_pseg *s0 = &ix->segs[k0];
  for (int64_t k = k0 + 1; inplace && k <= k1; k++)
    inplace = s0->region_res >= 0 && ix->segs[k].region_res == s0->region_res &&
              ix->segs[k].res - s0->res == (ix->segs[k].tok0 - s0->tok0) * ix->width;
  if (inplace) {
    if (!GROW(w, grows, cap_grows, n)) return nomem("the candidates' tokens");
    for (int64_t i = 0; i < n; i++) w->grows[i] = ix->doc_off[ids[i]] - s0->tok0;
    w->gres_in = s0->res;
  }
  int64_t longest = 0;
  w->gcu[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    if (w->gcu[i + 1] > longest) longest = w->gcu[i + 1];
    w->gcu[i + 1] += w->gcu[i];
  }
  const int64_t tot = w->gcu[n];
  if (!GROW(w, gcodes, cap_gcodes, tot + 1) ||
      (res && !w->gres_in && !grow((void **)&w->gres, &w->cap_gres, tot * ix->width + 1, 1)))
    return nomem("the candidates' tokens");
  a.count = 0;
  lik_parallel_run(nt, ntasks, gather_task, &a);
  if ((st = bad_code(&a, nt))) return st;
  *maxlen = longest;
  return LIK_OK;
}

static lik_ctokens packed(const worker *w, int64_t n, int64_t maxlen, int64_t width, int res) {
  lik_ctokens d;
  memset(&d, 0, sizeof d);
  d.codes = w->gcodes;
  d.codes_dtype = LIK_I32;
  d.code_s = 1;
  if (res) {
    d.res = w->gres_in ? w->gres_in : w->gres;
    d.res_st = width;
    d.res_sp = 1;
    if (w->gres_in) d.res_rows = (lik_index){w->grows, LIK_I64, 1};
  }
  d.count = n;
  d.len = maxlen;
  d.offsets = (lik_index){w->gcu, LIK_I64, 1};
  return d;
}

/* Approximate scores of ids[0..n) into w->sc. */
static lik_status approx(const sctx *g, worker *w, const int64_t *ids, int64_t n, int64_t lq,
                         int64_t lqp, int prune) {
  const lik_plaid_index *ix = g->ix;
  int64_t maxlen;
  lik_status st = gather(g, w, ids, n, prune ? w->cmax : NULL, g->q->threshold, 0, &maxlen);
  if (st) return st;
  if (!GROW(w, sc, cap_sc, n)) return nomem("the approximate scores");
  lik_approx_problem p;
  memset(&p, 0, sizeof p);
  p.cs.data = w->cs;
  p.cs.dtype = LIK_F32;
  p.cs.nq = 1;
  p.cs.lq = lq;
  p.cs.ncent = ix->ncent;
  p.cs.ss = 1;
  p.cs.sc = lqp;
  p.d = packed(w, n, maxlen, ix->width, 0);
  p.scores = w->sc;
  p.score_sj = 1;
  p.call = g->q->call;
  p.call.threads = g->inner;
  p.call.normalize = 0;
  return lik_cpu_plaid_approx(&p);
}

/* ---- rankings ----------------------------------------------------------------------------- */

static void swap_hits(lik_hit *h, int64_t a, int64_t b) {
  const lik_hit t = h[a];
  h[a] = h[b];
  h[b] = t;
}

/* Rearranges h[0..n) so that h[k] is the hit of rank k (0: the best) under
 * lik_topk_better, the better ones before it (quickselect, median-of-three
 * pivots; the order is total, so the result is unique). */
static void select_rank(lik_hit *h, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1;
  while (hi > lo) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (hit_worse(&h[lo], &h[mid])) swap_hits(h, lo, mid);
    if (hit_worse(&h[lo], &h[hi])) swap_hits(h, lo, hi);
    if (hit_worse(&h[mid], &h[hi])) swap_hits(h, mid, hi);
    swap_hits(h, mid, hi); /* the median of the three as the pivot, at hi */
    int64_t store = lo;
    for (int64_t i = lo; i < hi; i++)
      if (hit_worse(&h[hi], &h[i])) swap_hits(h, i, store++);
    swap_hits(h, store, hi);
    if (store == k) return;
    if (k < store) hi = store - 1;
    else lo = store + 1;
  }
}

/* The m best of ids[0..n) (ascending) by w->sc into w->sel, ascending ids. */
static lik_status select_best(worker *w, const int64_t *ids, int64_t n, int64_t m) {
  if (!GROW(w, hits, cap_hits, n) || !GROW(w, sel, cap_sel, n)) return nomem("the ranking");
  if (m >= n) {
    memcpy(w->sel, ids, (size_t)n * sizeof(int64_t));
    return LIK_OK;
  }
  for (int64_t i = 0; i < n; i++) w->hits[i] = (lik_hit){w->sc[i], ids[i]};
  select_rank(w->hits, n, m - 1);
  const lik_hit last = w->hits[m - 1]; /* the m-th best: those not worse are kept */
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    const lik_hit h = {w->sc[i], ids[i]};
    if (!hit_worse(&h, &last)) w->sel[k++] = ids[i];
  }
  return LIK_OK;
}

/* Results (hits by position) as the documents' ids. */
static void write_row(const lik_plaid_index *ix, const lik_plaid_query *q, int64_t qi,
                      const lik_hit *h, int64_t n) {
  for (int64_t r = 0; r < q->top_k; r++) {
    q->scores[qi * q->s_i + r * q->s_k] = r < n ? h[r].s : -INFINITY;
    q->ids[qi * q->i_i + r * q->i_k] = r < n ? lik_plaid_id_of(ix, h[r].i) : -1;
  }
}

static lik_status search_one(const sctx *g, worker *w, int64_t qi) {
  const lik_plaid_index *ix = g->ix;
  const lik_plaid_query *q = g->q;
  const int64_t K = ix->ncent;
  const int64_t lq = q->q_lengths.data ? lik_index_at(&q->q_lengths, qi) : q->q.len;
  const int64_t lqp = (lq + LB - 1) / LB * LB;
  if (lq == 0 || ix->ndocs == 0) {
    write_row(ix, q, qi, NULL, 0);
    return LIK_OK;
  }
  lik_status st = LIK_OK;
  load_query(g, w, qi, lq, lqp);
  lik_cpu_centroid_scores(q->call.context, g->inner, w->qt, lqp, ix->cent_f32, K, ix->dim, w->cs);

  /* subset: its sorted unique ids, their bits, the centroids they use */
  int64_t nsub = 0;
  const int has_sub = q->has_subset;
  if (has_sub) {
    const int64_t a = q->subset_cu.data ? lik_index_at(&q->subset_cu, qi) : 0;
    const int64_t b = q->subset_cu.data ? lik_index_at(&q->subset_cu, qi + 1) : q->subset_n;
    if (!GROW(w, sub, cap_sub, b - a + 1)) return nomem("the subset");
    int64_t m = 0; /* the live documents of the subset, as positions */
    for (int64_t i = a; i < b; i++) {
      const int64_t j = lik_plaid_find(ix, lik_index_at(&q->subset, i));
      if (!lik_plaid_is_dead(ix, j)) w->sub[m++] = j;
    }
    qsort(w->sub, (size_t)m, sizeof(int64_t), cmp_i64);
    for (int64_t i = 0; i < m; i++)
      if (nsub == 0 || w->sub[i] != w->sub[nsub - 1]) w->sub[nsub++] = w->sub[i];
    memset(w->allowed, 0, (size_t)K);
    for (int64_t i = 0; i < nsub; i++) {
      const int64_t j = w->sub[i];
      w->inset[j >> 6] |= (uint64_t)1 << (j & 63);
      const lik_pseg *s = &ix->segs[ix->doc_seg[j]];
      for (int64_t t = ix->doc_off[j] - s->tok0; t < ix->doc_off[j + 1] - s->tok0; t++) {
        const int64_t c = lik_pseg_code(s, t);
        if (c < 0 || c >= K) {
          st = lik_fail(LIK_ERR_VALUE, "PLAID index: document %lld: code %lld is outside "
                        "[0, K=%lld) (a corrupt codes file)", (long long)j, (long long)c,
                        (long long)K);
          goto done;
        }
        w->allowed[c] = 1;
      }
    }
  }

  /* probing (and, with prune, every centroid's best score: cmax), then the
   * candidates: the union of the probed lists (in the subset) */
  const int64_t ncells = probe(g, w, lq, lqp);
  int64_t ncand = candidate_bits(g, w, ncells);
  /* every live document of the subset (or of the index) with tokens is a
   * candidate when a filter (subset, tombstones) left fewer than top_k, so a
   * query gets top_k results whenever that many exist (without a filter, few
   * candidates stay few, as in fast-plaid); and when the subset is no larger
   * than what the exact stage scores anyway, so a selective filter is
   * searched exactly instead of through the probes */
  const int64_t n_exact = q->top_k > q->n_full / 4 ? q->top_k : q->n_full / 4;
  if (ncells > 0 && ((ncand < q->top_k && (has_sub || ix->ndead)) || (has_sub && nsub <= n_exact))) {
    const int64_t nall = has_sub ? nsub : ix->ndocs;
    for (int64_t i = 0; i < nall; i++) {
      const int64_t j = has_sub ? w->sub[i] : i;
      const uint64_t bit = (uint64_t)1 << (j & 63);
      if ((w->seen[j >> 6] & bit) || lik_plaid_is_dead(ix, j) ||
          ix->doc_off[j + 1] == ix->doc_off[j])
        continue;
      w->seen[j >> 6] |= bit;
      ncand++;
    }
  }
  /* the candidates, ascending, out of the bits (cleared) */
  const int64_t words = ix->ndocs / 64 + 1;
  if (!GROW(w, cand, cap_cand, ncand + 1)) {
    memset(w->seen, 0, (size_t)words * sizeof(uint64_t));
    st = nomem("the candidates");
    goto done;
  }
  ncand = 0;
  for (int64_t k = 0; k < words; k++)
    for (uint64_t v = w->seen[k]; v; v &= v - 1) w->cand[ncand++] = k * 64 + __builtin_ctzll(v);
  memset(w->seen, 0, (size_t)words * sizeof(uint64_t));
  if (ncand == 0) {
    write_row(ix, q, qi, NULL, 0);
    goto done;
  }

  /* approximate stages */
  const int64_t *ids = w->cand;
  int64_t n = ncand;
  if (q->prune && n > n_exact) {
    if ((st = approx(g, w, ids, n, lq, lqp, 1)) || (st = select_best(w, ids, n, q->n_full)))
      goto done;
    n = n < q->n_full ? n : q->n_full;
    /* the survivors, re-scored without pruning: w->sel -> w->cand */
    memcpy(w->cand, w->sel, (size_t)n * sizeof(int64_t));
  }
  if (n > n_exact) {
    if ((st = approx(g, w, ids, n, lq, lqp, 0)) || (st = select_best(w, ids, n, n_exact)))
      goto done;
    n = n_exact;
    ids = w->sel;
  }

  /* exact residual MaxSim of the n survivors */
  int64_t maxlen;
  if ((st = gather(g, w, ids, n, NULL, 0, 1, &maxlen))) goto done;
  if (!GROW(w, sc, cap_sc, n) || !GROW(w, hits, cap_hits, n)) {
    st = nomem("the exact scores");
    goto done;
  }
  lik_residual_problem p;
  memset(&p, 0, sizeof p);
  p.q = q->q;
  p.q.data = (const char *)q->q.data +
             (ptrdiff_t)(qi * q->q.sn) * (ptrdiff_t)(q->q.dtype == LIK_F64   ? 8
                                                     : q->q.dtype == LIK_F32 ? 4
                                                                             : 2);
  p.q.count = 1;
  p.q.len = lq;
  lik_plaid_codec_view(ix, &p.codec);
  p.codec.cent = ix->cent_f32; /* the same values as fp32 rows: read in place */
  p.codec.cent_dtype = LIK_F32;
  p.d = packed(w, n, maxlen, ix->width, 1);
  p.out.scores = w->sc;
  p.out.score_sj = 1;
  p.call = q->call;
  p.call.threads = g->inner;
  p.call.normalize = 1;
  if ((st = lik_cpu_maxsim_residual(&p))) goto done;
  for (int64_t i = 0; i < n; i++) w->hits[i] = (lik_hit){w->sc[i], ids[i]};
  const int64_t top = n < q->top_k ? n : q->top_k;
  select_rank(w->hits, n, top - 1);
  lik_hits_sort(w->hits, top);
  write_row(ix, q, qi, w->hits, top);
done:
  if (has_sub)
    for (int64_t i = 0; i < nsub; i++) w->inset[w->sub[i] >> 6] = 0;
  return st;
}

static void query_task(void *ctx, int tid, int64_t qi) {
  const sctx *g = (const sctx *)ctx;
  worker *w = &g->w[tid];
  if (w->err_q < qi) return; /* this worker failed on an earlier query */
  const lik_status st = search_one(g, w, qi);
  if (st && qi < w->err_q) {
    w->err_q = qi;
    w->err_st = st;
    snprintf(w->err, sizeof w->err, "%s", lik_last_error());
  }
}

/* The scratch a search kept with the index: taken by a search of one worker
 * that it fits (the same K and bitmap words, as many threads inside a query,
 * no more query tokens and probes), so that one query after another does
 * not allocate (and fault in) tables of K and N entries every time. */
static void **kept(const lik_plaid_index *ix) { return (void **)&((lik_plaid_index *)ix)->search_scratch; }

static worker *take_kept(const lik_plaid_index *ix, int64_t lqmax, int64_t nprobe, int inner) {
  worker *w = (worker *)__atomic_exchange_n(kept(ix), NULL, __ATOMIC_ACQ_REL);
  if (w && w->K == ix->ncent && w->words == ix->ndocs / 64 + 1 && w->inner == inner &&
      lqmax <= w->lqmax && nprobe <= w->nprobe) {
    w->err_q = INT64_MAX;
    return w;
  }
  if (w) {
    worker_free(w);
    free(w);
  }
  return NULL;
}

/* Kept with the index unless another search kept its own first. */
static void keep(const lik_plaid_index *ix, worker *w) {
  void *none = NULL;
  if (__atomic_compare_exchange_n(kept(ix), &none, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  worker_free(w);
  free(w);
}

void lik_plaid_search_scratch_free(lik_plaid_index *ix) {
  worker *w = (worker *)ix->search_scratch;
  ix->search_scratch = NULL;
  if (w) worker_free(w);
  free(w);
}

lik_status lik_plaid_search_impl(const lik_plaid_index *ix, const lik_plaid_query *q) {
  const int64_t nq = q->q.count;
  int nth = q->call.threads < 1 ? 1 : q->call.threads;
  if (nth > 256) nth = 256;
  const int outer = nq >= nth && nth > 1;
  const int nw = outer ? nth : 1;
  sctx g;
  g.ix = ix;
  g.q = q;
  g.inner = outer ? 1 : nth;
  g.lqmax = q->q.len;
  g.w = outer ? NULL : take_kept(ix, g.lqmax, q->n_probe, g.inner);
  const int fresh = g.w == NULL;
  if (fresh && !(g.w = (worker *)calloc((size_t)nw, sizeof(worker)))) return nomem("its workers");
  lik_status st = LIK_OK;
  for (int i = 0; fresh && i < nw; i++)
    if (!worker_init(&g.w[i], ix, g.lqmax, q->n_probe, g.inner)) {
      st = nomem("per-thread tables (centroid scores, document bitmaps)");
      break;
    }
  if (!st) {
    if (outer) lik_parallel_run(nth, nq, query_task, &g);
    else
      for (int64_t qi = 0; qi < nq; qi++) query_task(&g, 0, qi);
    int64_t bq = INT64_MAX;
    int bw = -1;
    for (int i = 0; i < nw; i++)
      if (g.w[i].err_q < bq) {
        bq = g.w[i].err_q;
        bw = i;
      }
    if (bw >= 0) st = lik_fail(g.w[bw].err_st, "query %lld: %s", (long long)bq, g.w[bw].err);
  }
  if (!outer && !st) {
    keep(ix, g.w);
    return st;
  }
  for (int i = 0; i < nw; i++) worker_free(&g.w[i]);
  free(g.w);
  return st;
}
