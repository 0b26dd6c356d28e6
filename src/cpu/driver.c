/*
 * driver.c — the fp32-compute MaxSim driver shared by every ISA (F32, F16,
 * BF16 inputs): blocking, packing, threading; the kernel table does the math.
 *
 * Work split.  Outputs (i, c) are grouped into tasks = (block of qb output
 * rows) x (block of cb candidates).  A task owns its outputs (one writer) and
 * computes each of them completely, so the result never depends on the
 * number of threads or on which thread ran the task:
 *   - per query token, the max over doc tokens is a strict-> running max in
 *     ascending token order (exact, whatever the chunking),
 *   - each dot is one fp32 chain over k ascending (see cpu_internal.h),
 *   - the score is summed over valid query tokens in ascending s.
 *
 * Inside a task, for each candidate c: its document is packed in chunks of R
 * valid rows (fp32, ~128 KiB, L2-resident) and every query of the block runs
 * its panels over the chunk; each query's panels are packed once per task.
 * So a document is widened once per query block, a query once per task, and
 * the [Lq, Ld] similarity matrix only ever exists as a register tile.
 *
 * -inf similarities (lik.h): the running max starts at -inf and only a
 * strict > replaces it, so a lane whose valid document tokens all score -inf
 * (or NaN) ends with argmax -1, like a lane without valid tokens.  Such lanes
 * (rare: only non-finite or overflowing inputs make them) are settled by a
 * second scan of the document with the query panel negated.
 */
#include <math.h>
#include <stdint.h>

#include "../core/checked.h"
#include "cpu_internal.h"

#define LIK_DOC_CHUNK_BYTES (128 * 1024)
#define LIK_QBLOCK_BYTES (256 * 1024)
#define LIK_ALIGN 64

typedef struct {
  const lik_problem *p;
  const lik_cpu_kernels *kt;
  lik_cpu_out o;
  int64_t nout;        /* output rows i */
  int64_t qb, cb, nqb, ncb;
  int64_t lq, lq_pad;  /* max query length, rounded up to kt->w */
  int64_t R;           /* doc rows per packed chunk, multiple of kt->mr */
  size_t off_m, off_ix, off_m2, off_ix2, off_qtok, off_qn, off_qid, off_qrow,
      off_drows, off_dtix, scratch_bytes;
  char *scratch;       /* one block per thread: thread t's at scratch + t * stride */
  size_t stride;
} drv;

static size_t align_up(size_t x) { return (x + LIK_ALIGN - 1) & ~(size_t)(LIK_ALIGN - 1); }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Pack the valid tokens of query qidx into slot panels [npan][d][w]. */
static void pack_query(const drv *g, int64_t qidx, float *pan, int32_t *qtok,
                       int64_t *qn, float *qrow) {
  const lik_problem *p = g->p;
  const int64_t w = g->kt->w, d = p->q.dim;
  int64_t len = lik_seq_len(&p->q, qidx), nv = 0;
  for (int64_t s = 0; s < len; s++)
    if (lik_mask_valid(&p->q_mask, &p->q, qidx, s)) qtok[nv++] = (int32_t)s;
  *qn = nv;
  int64_t npan = ceil_div(nv, w);
  memset(pan, 0, (size_t)(npan * w * d) * sizeof(float));
  for (int64_t lane = 0; lane < nv; lane++) {
    g->kt->pack(&p->q, qidx, &qtok[lane], 1, p->call.normalize, qrow);
    float *dst = pan + (lane / w) * w * d + (lane % w);
    for (int64_t k = 0; k < d; k++) dst[k * w] = qrow[k];
  }
}

/* Run all panels of a query slot over cnt packed doc rows. */
static void run_slot(const drv *g, const float *pan, int64_t nv,
                     const float *drows, const int32_t *dtix, int64_t cnt,
                     float *m, int32_t *ix) {
  const lik_cpu_kernels *kt = g->kt;
  const int64_t w = kt->w, d = g->p->q.dim;
  for (int64_t l0 = 0; l0 < nv; l0 += w) {
    lik_tile_fn f = kt->tile;
    if (kt->w_tail && nv - l0 <= kt->w_tail) f = kt->tile_tail;
    f(pan + l0 * d, w, drows, d, dtix, cnt, m + l0, ix + l0);
  }
}

/* Runs query slots [s0, s1) of the task's scratch over every valid token of
 * document didx, in packed chunks of up to R rows; slot sl's running max /
 * argmax are m / ix + (sl - s0) * lq_pad.  Returns the number of valid
 * document tokens. */
static int64_t scan_doc(const drv *g, char *sc, int64_t didx, int64_t s0, int64_t s1,
                        float *m, int32_t *ix) {
  const lik_problem *p = g->p;
  const int64_t d = p->q.dim, mr = g->kt->mr, lq_pad = g->lq_pad;
  const float *qpan = (const float *)sc;
  const int64_t *qn = (const int64_t *)(sc + g->off_qn);
  float *drows = (float *)(sc + g->off_drows);
  int32_t *dtix = (int32_t *)(sc + g->off_dtix);
  int64_t ld = lik_seq_len(&p->d, didx), t0 = 0, nvalid = 0;
  while (t0 < ld) {
    int64_t cnt = 0;
    /* Collect up to R valid rows (scratch has R + mr - 1 for padding). */
    for (; t0 < ld && cnt < g->R; t0++)
      if (lik_mask_valid(&p->d_mask, &p->d, didx, t0)) dtix[cnt++] = (int32_t)t0;
    if (!cnt) break;
    nvalid += cnt;
    g->kt->pack(&p->d, didx, dtix, cnt, p->call.normalize, drows);
    /* Pad to a multiple of mr with copies of the last row: an equal
     * value never passes the strict > of the running max. */
    for (; cnt % mr; cnt++) {
      dtix[cnt] = dtix[cnt - 1];
      memcpy(drows + cnt * d, drows + (cnt - 1) * d, (size_t)d * sizeof(float));
    }
    for (int64_t sl = s0; sl < s1; sl++)
      if (qn[sl])
        run_slot(g, qpan + sl * lq_pad * d, qn[sl], drows, dtix, cnt,
                 m + (sl - s0) * lq_pad, ix + (sl - s0) * lq_pad);
  }
  return nvalid;
}

/* Lanes of slot sl still at argmax -1 after a document with valid tokens have
 * only -inf / NaN similarities.  Negating the query panel negates every dot
 * exactly (round-to-nearest is symmetric), so a second scan finds the first
 * token whose similarity is -inf as the first +inf: that token wins the lane
 * (its max stays -inf); a lane of NaNs only keeps -1. */
static void settle_neg_inf(const drv *g, char *sc, int64_t didx, int64_t sl) {
  const int64_t d = g->p->q.dim, w = g->kt->w, lq_pad = g->lq_pad;
  const int64_t nv = ((const int64_t *)(sc + g->off_qn))[sl];
  int32_t *ix = (int32_t *)(sc + g->off_ix) + sl * lq_pad;
  int64_t l = 0;
  while (l < nv && ix[l] >= 0) l++;
  if (l == nv) return;
  float *pan = (float *)sc + sl * lq_pad * d;
  float *m2 = (float *)(sc + g->off_m2);
  int32_t *ix2 = (int32_t *)(sc + g->off_ix2);
  const int64_t nel = ceil_div(nv, w) * w * d;
  for (int64_t e = 0; e < nel; e++) pan[e] = -pan[e];
  for (l = 0; l < lq_pad; l++) { m2[l] = -INFINITY; ix2[l] = -1; }
  scan_doc(g, sc, didx, sl, sl + 1, m2, ix2);
  for (int64_t e = 0; e < nel; e++) pan[e] = -pan[e];
  for (l = 0; l < nv; l++)
    if (ix[l] < 0) ix[l] = ix2[l];
}

static void task(void *ctx, int tid, int64_t t) {
  const drv *g = (const drv *)ctx;
  const lik_problem *p = g->p;
  const int64_t d = p->q.dim;
  char *sc = g->scratch + (size_t)tid * g->stride;
  float *qpan = (float *)sc;
  float *mx = (float *)(sc + g->off_m);
  int32_t *ixs = (int32_t *)(sc + g->off_ix);
  int32_t *qtok = (int32_t *)(sc + g->off_qtok);
  int64_t *qn = (int64_t *)(sc + g->off_qn);
  int64_t *qid = (int64_t *)(sc + g->off_qid);
  float *qrow = (float *)(sc + g->off_qrow);

  int64_t qblk = t / g->ncb, cblk = t % g->ncb;
  int64_t i0 = qblk * g->qb, i1 = i0 + g->qb < g->nout ? i0 + g->qb : g->nout;
  int64_t c0 = g->o.cbeg + cblk * g->cb;
  int64_t c1 = c0 + g->cb < g->o.cend ? c0 + g->cb : g->o.cend;
  int64_t nslot = i1 - i0;
  for (int64_t sl = 0; sl < nslot; sl++) qid[sl] = -1;

  for (int64_t c = c0; c < c1; c++) {
    int64_t any = 0;
    for (int64_t sl = 0; sl < nslot; sl++) {
      int64_t qidx = lik_cpu_qidx(p, i0 + sl, c);
      if (qid[sl] != qidx) {
        pack_query(g, qidx, qpan + sl * g->lq_pad * d, qtok + sl * g->lq,
                   &qn[sl], qrow);
        qid[sl] = qidx;
      }
      float *m = mx + sl * g->lq_pad;
      int32_t *ix = ixs + sl * g->lq_pad;
      for (int64_t l = 0; l < g->lq_pad; l++) { m[l] = -INFINITY; ix[l] = -1; }
      any |= qn[sl];
    }
    if (any) {
      int64_t didx = lik_cpu_didx(p, i0, c); /* cross: c; KD/list: qb == 1 */
      if (scan_doc(g, sc, didx, 0, nslot, mx, ixs) > 0)
        for (int64_t sl = 0; sl < nslot; sl++) settle_neg_inf(g, sc, didx, sl);
    }
    for (int64_t sl = 0; sl < nslot; sl++) {
      int64_t i = i0 + sl;
      const float *m = mx + sl * g->lq_pad;
      const int32_t *ix = ixs + sl * g->lq_pad;
      const int32_t *tok = qtok + sl * g->lq;
      float s = 0.0f;
      for (int64_t l = 0; l < qn[sl]; l++)
        if (ix[l] >= 0) s += m[l]; /* no document token won: adds 0 */
      const lik_out *out = &g->o.out;
      const int64_t j = c - g->o.cbeg;
      out->scores[i * out->score_si + j * out->score_sj] = s;
      if (out->argmax) {
        int32_t *a = out->argmax + i * out->argmax_si + j * out->argmax_sj;
        for (int64_t q = 0; q < g->lq; q++) a[q * out->argmax_ss] = -1;
        for (int64_t l = 0; l < qn[sl]; l++) a[tok[l] * out->argmax_ss] = ix[l];
      }
    }
  }
}

/* Appends a 64-byte aligned block of n elements of es bytes to the scratch
 * layout: *at = its offset, *off grows.  Nonzero if the size overflows. */
static int layout_add(size_t *off, size_t *at, int64_t n, size_t es) {
  size_t b;
  if (lik_bytes(n, es, &b) || b > SIZE_MAX - LIK_ALIGN - *off) return 1;
  *at = *off;
  *off += align_up(b);
  return 0;
}

lik_status lik_cpu_run_f32(const lik_problem *p, const lik_cpu_out *o) {
  drv g;
  memset(&g, 0, sizeof g);
  g.p = p;
  g.kt = lik_cpu_kernels_for(p->call.context);
  g.o = *o;
  g.nout = lik_cpu_out_rows(p);
  int64_t ncand = o->cend - o->cbeg;
  if (g.nout <= 0 || ncand <= 0) return LIK_OK;
  const int64_t d = p->q.dim, w = g.kt->w, mr = g.kt->mr;
  g.lq = p->q.len;
  g.lq_pad = ceil_div(g.lq, w) * w;

  /* Doc chunk: ~128 KiB of fp32 rows, a multiple of mr, no more than the
   * longest document needs. */
  int64_t R = LIK_DOC_CHUNK_BYTES / (d * 4) / mr * mr;
  if (R < mr) R = mr;
  int64_t rmax = ceil_div(p->d.len > 0 ? p->d.len : 1, mr) * mr;
  if (R > rmax) R = rmax;
  g.R = R;

  /* Query block: cross-pairing queries share each packed document; KD and
   * list pairs have their own documents, so one query per task. */
  int64_t panel; /* fp32 values of one query's panels */
  if (lik_mul_i64(g.lq_pad > 0 ? g.lq_pad : 1, d, &panel)) panel = INT64_MAX;
  int64_t qb = 1;
  if (p->pairing == LIK_PAIRING_CROSS) {
    qb = LIK_QBLOCK_BYTES / 4 / panel;
    if (qb < 1) qb = 1;
    if (qb > 64) qb = 64;
    if (qb > g.nout) qb = g.nout;
  }
  int64_t T = p->call.threads >= 1 ? p->call.threads : 1;
  int64_t want = 8 * T;
  int64_t nqb = ceil_div(g.nout, qb);
  int64_t ncb = ceil_div(want, nqb);
  if (ncb > ncand) ncb = ncand;
  int64_t cb = ceil_div(ncand, ncb);
  ncb = ceil_div(ncand, cb);
  if (nqb * ncb < want && qb > 1) {
    qb = ceil_div(g.nout, ceil_div(want, ncb));
    if (qb < 1) qb = 1;
    nqb = ceil_div(g.nout, qb);
  }
  g.qb = qb; g.cb = cb; g.nqb = nqb; g.ncb = ncb;
  int64_t ntasks = nqb * ncb;
  if (T > ntasks) T = ntasks;

  /* Per-thread scratch from the context's workspace (src/core/workspace.h),
   * taken before any thread starts so a failure returns cleanly. */
  size_t off = 0, at0;
  int64_t lanes, qvals, qtoks;
  if (lik_mul_i64(qb, g.lq_pad, &lanes) || lik_mul_i64(lanes, d, &qvals) ||
      lik_mul_i64(qb, g.lq, &qtoks) ||
      layout_add(&off, &at0, qvals, sizeof(float)) || /* query panels at 0 */
      layout_add(&off, &g.off_m, lanes, sizeof(float)) ||
      layout_add(&off, &g.off_ix, lanes, sizeof(int32_t)) ||
      layout_add(&off, &g.off_m2, g.lq_pad, sizeof(float)) ||
      layout_add(&off, &g.off_ix2, g.lq_pad, sizeof(int32_t)) ||
      layout_add(&off, &g.off_qtok, qtoks, sizeof(int32_t)) ||
      layout_add(&off, &g.off_qn, qb, sizeof(int64_t)) ||
      layout_add(&off, &g.off_qid, qb, sizeof(int64_t)) ||
      layout_add(&off, &g.off_qrow, d, sizeof(float)) ||
      layout_add(&off, &g.off_drows, (R + mr) * d, sizeof(float)) ||
      layout_add(&off, &g.off_dtix, R + mr, sizeof(int32_t)))
    return lik_fail(LIK_ERR_ALLOC,
                    "CPU scratch: query panels of %lld x Lq=%lld x d=%lld fp32 values exceed "
                    "the address space",
                    (long long)qb, (long long)g.lq, (long long)d);
  g.scratch_bytes = off;

  if (T > 256) T = 256;
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);
  const lik_status st =
      lik_parallel_run_ws(&ws, (int)T, ntasks, g.scratch_bytes, &g.scratch, &g.stride, task, &g,
                          "CPU forward (query panels, document rows)");
  lik_ws_close(&ws);
  return st;
}
