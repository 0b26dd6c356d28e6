/*
 * head.c — the CPU backend of the fused D-side head (lik_maxsim_from_hidden
 * and its backward): scratch, blocking, threads and the winner numbering;
 * the math is head_kernel.inc, instantiated for fp32 and fp64 compute.
 */
#include <math.h>
#include <stdatomic.h>

#include "../core/checked.h"
#include "../core/dtype.h"
#include "../core/head.h"
#include "../core/validate.h"
#include "cpu_internal.h"

#define HEAD_BLOCK_BYTES (1 << 20) /* projected rows per forward task */
#define HEAD_WCOLS 64              /* grad_W columns per task */
#define HEAD_ROWS 4                /* tokens projected together */
#define HEAD_MAX_THREADS 256

typedef struct {
  const lik_head *h;
  const void *wt, *bias;  /* REAL W^T [d_model][d_out], b [d_out] */
  int64_t gsize;          /* documents per group: Nd (cross), K (KD) */
  int64_t nb, bpg;        /* documents per task, tasks per group */
  char **scratch;
  atomic_int failed;
} head_fwd;

typedef struct {
  const lik_head_bw *bw;
  const void *wt, *bias;
  int64_t ndocs, nb;      /* documents, documents per task */
  int64_t nwin;           /* winning tokens, numbered document-major */
  int64_t *tok_row;       /* [ndocs * Ld]: winner number or -1 */
  int64_t *win_first;     /* [ndocs + 1]: first winner of each document */
  int64_t *win_doc;       /* [nwin] */
  int32_t *win_tok;       /* [nwin] */
  void *yhat, *gy, *wnorm; /* REAL [nwin][d_out], [nwin][d_out], [nwin] */
  char **scratch;
} head_bwd;

/* grad_scores of output (i, c). */
static inline double head_gs(const lik_head_bw *bw, int64_t i, int64_t c) {
  const int64_t at = i * bw->gs_si + c * bw->gs_sj;
  return bw->gs_dtype == LIK_F64 ? ((const double *)bw->gs)[at]
                                 : (double)((const float *)bw->gs)[at];
}

/* The MaxSim sub-problem of documents [n0, n0 + cnt) of group grp, projected
 * into buf ([cnt][Ld][d_out] of dtype dt), and its output view. */
static void head_block(const lik_problem *p, int64_t grp, int64_t n0, int64_t cnt, void *buf,
                       lik_dtype dt, lik_problem *sub, lik_cpu_out *o) {
  *sub = *p;
  sub->pairing = LIK_PAIRING_CROSS;
  sub->ncand = cnt;
  sub->call.normalize = 0;
  sub->call.threads = 1;
  lik_seqs d = {0};
  d.data = buf;
  d.dtype = dt;
  d.count = cnt;
  d.len = p->d.len;
  d.dim = p->q.dim;
  d.sk = 1;
  d.sl = d.dim;
  d.sn = d.len * d.dim;
  sub->d = d;
  if (p->d_mask.data) {
    const lik_mask *m = &p->d_mask;
    sub->d_mask.data += p->d.group ? (n0 / p->d.group) * m->sg + (n0 % p->d.group) * m->sn
                                   : n0 * m->sn;
    sub->d_mask.sg = 0;
  }
  int64_t i0 = 0, c0 = n0;
  if (p->pairing == LIK_PAIRING_KD) {
    i0 = grp;
    c0 = n0 - grp * p->ncand;
    sub->q.data = (const char *)p->q.data + i0 * p->q.sn * (int64_t)lik_dtype_size(p->q.dtype);
    sub->q.count = 1;
    if (p->q_mask.data) sub->q_mask.data += i0 * p->q_mask.sn;
  }
  o->cbeg = 0;
  o->cend = cnt;
  const int64_t at = i0 * p->out.score_si + c0 * p->out.score_sj;
  o->out = p->out;
  if (o->out.scores) o->out.scores += at;
  if (o->out.scores_f64) o->out.scores_f64 += at;
  if (o->out.argmax) o->out.argmax += i0 * p->out.argmax_si + c0 * p->out.argmax_sj;
}

#define REAL float
#define HK(name) head_##name##_f32
#include "head_kernel.inc"
#undef REAL
#undef HK
#define REAL double
#define HK(name) head_##name##_f64
#include "head_kernel.inc"
#undef REAL
#undef HK

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* nthreads blocks of bytes each from ws into ptrs; 0 on success. */
static int alloc_blocks(lik_ws *ws, char **ptrs, int64_t nthreads, size_t bytes) {
  size_t stride;
  char *base = lik_ws_blocks(ws, nthreads, bytes, &stride);
  for (int64_t t = 0; base && t < nthreads; t++) ptrs[t] = base + (size_t)t * stride;
  return base == NULL;
}

/* REAL W^T and b (from ws), loaded once per call; NULL on allocation failure. */
static void *load_weights(lik_ws *ws, const lik_head *h, size_t real, void **bias) {
  const int64_t d_out = h->p.q.dim, d_model = h->p.d.dim;
  size_t bytes;
  int64_t n;
  if (lik_mul_i64(d_out, d_model, &n) || lik_add_i64(n, d_out, &n) || lik_bytes(n, real, &bytes))
    return NULL;
  char *wt = lik_ws_alloc(ws, bytes);
  if (!wt) return NULL;
  *bias = wt + (size_t)(d_out * d_model) * real;
  if (real == 8)
    head_load_weights_f64(h, (double *)wt, (double *)*bias);
  else
    head_load_weights_f32(h, (float *)wt, (float *)*bias);
  return wt;
}

lik_status lik_cpu_maxsim_from_hidden(const lik_head *h) {
  const lik_problem *p = &h->p;
  const int kd = p->pairing == LIK_PAIRING_KD, f64 = p->q.dtype == LIK_F64;
  const size_t real = f64 ? 8 : 4;
  const int64_t d_out = p->q.dim, d_model = p->d.dim, ld = p->d.len;
  head_fwd g;
  memset(&g, 0, sizeof g);
  g.h = h;
  g.gsize = kd ? p->ncand : p->d.count;
  const int64_t ngroups = kd ? p->q.count : 1;
  const int64_t row_bytes = ld * d_out * (int64_t)real; /* ld, d_out <= INT32_MAX */
  g.nb = row_bytes > 0 ? HEAD_BLOCK_BYTES / row_bytes : g.gsize;
  if (g.nb < 1) g.nb = 1;
  if (g.nb > g.gsize) g.nb = g.gsize;
  g.bpg = ceil_div(g.gsize, g.nb);
  const int64_t ntasks = ngroups * g.bpg;
  int64_t T = p->call.threads < HEAD_MAX_THREADS ? p->call.threads : HEAD_MAX_THREADS;
  if (T > ntasks) T = ntasks;
  int64_t vals;
  size_t bytes;
  if (lik_mul_i64(g.nb, ld * d_out, &vals) ||
      lik_add_i64(vals, HEAD_ROWS * (d_model + d_out), &vals) ||
      lik_bytes(vals, real, &bytes))
    return lik_fail(LIK_ERR_ALLOC, "fused head: a block of %lld documents x Ld=%lld x "
                    "d_out=%lld values exceeds the address space",
                    (long long)g.nb, (long long)ld, (long long)d_out);
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);
  void *bias = NULL, *wt = load_weights(&ws, h, real, &bias);
  char *ptrs[HEAD_MAX_THREADS];
  if (!wt || alloc_blocks(&ws, ptrs, T, bytes)) {
    lik_ws_close(&ws);
    return lik_fail(LIK_ERR_ALLOC, "fused head: cannot allocate W^T (d_out=%lld x "
                    "d_model=%lld) and %lld blocks of %zu bytes", (long long)d_out,
                    (long long)d_model, (long long)T, bytes);
  }
  g.wt = wt;
  g.bias = bias;
  g.scratch = ptrs;
  atomic_init(&g.failed, 0);
  lik_parallel_run((int)T, ntasks, f64 ? head_fwd_task_f64 : head_fwd_task_f32, &g);
  lik_ws_close(&ws);
  if (atomic_load(&g.failed))
    return lik_fail(LIK_ERR_ALLOC, "fused head: MaxSim scratch for a block of %lld documents "
                    "could not be allocated", (long long)g.nb);
  return LIK_OK;
}

/* Checks argmax and numbers the winning tokens into g (tok_row, win_*). */
static lik_status number_winners(head_bwd *g) {
  const lik_problem *p = &g->bw->h.p;
  const int64_t ld = p->d.len, ntok = g->ndocs * ld;
  for (int64_t x = 0; x < ntok; x++) g->tok_row[x] = -1;
  for (int64_t i = 0; i < p->q.count; i++)
    for (int64_t c = 0; c < p->ncand; c++) {
      const int64_t n = p->pairing == LIK_PAIRING_KD ? i * p->ncand + c : c;
      for (int64_t s = 0; s < p->q.len; s++) {
        const int32_t a =
            p->out.argmax[i * p->out.argmax_si + c * p->out.argmax_sj + s * p->out.argmax_ss];
        if (a == -1) continue;
        if (a < -1 || a >= ld)
          return lik_fail(LIK_ERR_VALUE, "argmax[%lld, %lld, %lld]=%d is outside [-1, Ld=%lld)",
                          (long long)i, (long long)c, (long long)s, (int)a, (long long)ld);
        if (!lik_mask_valid(&p->d_mask, &p->d, n, a))
          return lik_fail(LIK_ERR_VALUE, "argmax[%lld, %lld, %lld]=%d points at a masked "
                          "document token", (long long)i, (long long)c, (long long)s, (int)a);
        if (lik_mask_valid(&p->q_mask, &p->q, i, s)) g->tok_row[n * ld + a] = 0;
      }
    }
  int64_t nwin = 0;
  for (int64_t n = 0; n < g->ndocs; n++) {
    g->win_first[n] = nwin;
    for (int64_t l = 0; l < ld; l++)
      if (g->tok_row[n * ld + l] == 0) g->tok_row[n * ld + l] = nwin++;
  }
  g->win_first[g->ndocs] = nwin;
  g->nwin = nwin;
  return LIK_OK;
}

/* Allocates the winner lists and rows (from ws) once nwin is known. */
static lik_status alloc_rows(head_bwd *g, lik_ws *ws, size_t real, int64_t d_out) {
  size_t b1, b2, b3, b4;
  if (lik_bytes(g->nwin, sizeof(int64_t), &b1) || lik_bytes(g->nwin, sizeof(int32_t), &b2) ||
      lik_bytes2(g->nwin, d_out, real, &b3) || lik_bytes(g->nwin, real, &b4))
    return lik_fail(LIK_ERR_ALLOC, "fused head backward: %lld winning tokens x d_out=%lld",
                    (long long)g->nwin, (long long)d_out);
  g->win_doc = lik_ws_alloc(ws, b1);
  g->win_tok = lik_ws_alloc(ws, b2);
  g->yhat = lik_ws_alloc(ws, b3);
  g->gy = lik_ws_alloc(ws, b3);
  g->wnorm = lik_ws_alloc(ws, b4);
  if (!g->win_doc || !g->win_tok || !g->yhat || !g->gy || !g->wnorm)
    return lik_fail(LIK_ERR_ALLOC, "fused head backward: cannot allocate rows for %lld "
                    "winning tokens x d_out=%lld", (long long)g->nwin, (long long)d_out);
  for (int64_t n = 0; n < g->ndocs; n++)
    for (int64_t w = g->win_first[n]; w < g->win_first[n + 1]; w++) g->win_doc[w] = n;
  const int64_t ld = g->bw->h.p.d.len;
  for (int64_t x = 0; x < g->ndocs * ld; x++)
    if (g->tok_row[x] >= 0) g->win_tok[g->tok_row[x]] = (int32_t)(x % ld);
  return LIK_OK;
}

static lik_status run_backward(head_bwd *g, const lik_head_bw *bw, lik_ws *ws) {
  const lik_problem *p = &bw->h.p;
  const int f64 = p->q.dtype == LIK_F64;
  const size_t real = f64 ? 8 : 4;
  const int64_t d_out = p->q.dim, d_model = p->d.dim, ld = p->d.len;
  int64_t ntok;
  size_t bytes;
  if (lik_mul_i64(g->ndocs, ld, &ntok) || lik_bytes(ntok, sizeof(int64_t), &bytes))
    return lik_fail(LIK_ERR_ALLOC, "fused head backward: %lld documents x Ld=%lld tokens",
                    (long long)g->ndocs, (long long)ld);
  size_t first_b;
  int64_t ndocs1;
  if (lik_add_i64(g->ndocs, 1, &ndocs1) || lik_bytes(ndocs1, sizeof(int64_t), &first_b))
    return lik_fail(LIK_ERR_ALLOC, "fused head backward: %lld documents", (long long)g->ndocs);
  g->tok_row = lik_ws_alloc(ws, bytes);
  g->win_first = lik_ws_alloc(ws, first_b);
  if (!g->tok_row || !g->win_first)
    return lik_fail(LIK_ERR_ALLOC, "fused head backward: cannot allocate a map of %lld tokens",
                    (long long)ntok);
  lik_status st;
  if ((st = number_winners(g)) || (st = alloc_rows(g, ws, real, d_out))) return st;
  void *bias = NULL;
  void *wt = load_weights(ws, &bw->h, real, &bias);
  int64_t T = p->call.threads < HEAD_MAX_THREADS ? p->call.threads : HEAD_MAX_THREADS;
  const int64_t scratch_vals = d_model + d_out > HEAD_WCOLS * d_out ? d_model + d_out
                                                                    : HEAD_WCOLS * d_out;
  char *ptrs[HEAD_MAX_THREADS];
  if (!wt || alloc_blocks(ws, ptrs, T, (size_t)scratch_vals * real))
    return lik_fail(LIK_ERR_ALLOC, "fused head backward: cannot allocate W^T (d_out=%lld x "
                    "d_model=%lld) and %lld threads x %lld values", (long long)d_out,
                    (long long)d_model, (long long)T, (long long)scratch_vals);
  g->wt = wt;
  g->bias = bias;
  g->scratch = ptrs;
  g->nb = g->ndocs / (8 * T) > 1 ? g->ndocs / (8 * T) : 1;
  lik_parallel_run((int)T, ceil_div(g->ndocs, g->nb), f64 ? head_bw_doc_task_f64 : head_bw_doc_task_f32, g);
  if (bw->gq.data)
    lik_parallel_run((int)T, p->q.count, f64 ? head_bw_q_task_f64 : head_bw_q_task_f32, g);
  if (bw->g.w)
    lik_parallel_run((int)T, ceil_div(d_model, HEAD_WCOLS), f64 ? head_bw_w_task_f64 : head_bw_w_task_f32, g);
  if (bw->g.b) {
    if (f64)
      head_bw_b_f64(g, (double *)ptrs[0]);
    else
      head_bw_b_f32(g, (float *)ptrs[0]);
  }
  return LIK_OK;
}

lik_status lik_cpu_maxsim_from_hidden_backward(const lik_head_bw *bw) {
  head_bwd g;
  memset(&g, 0, sizeof g);
  g.bw = bw;
  g.ndocs = bw->h.p.d.count;
  lik_ws ws;
  lik_ws_open(&ws, bw->h.p.call.context);
  lik_status st = run_backward(&g, bw, &ws);
  lik_ws_close(&ws);
  return st;
}
