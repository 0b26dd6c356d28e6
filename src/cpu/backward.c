/*
 * backward.c — the CPU backward driver: strategy, scratch (the context's
 * workspace, src/core/workspace.h), threads; plus the
 * portable instance of the row kernels (backward_kernel.inc).
 *
 * Phases (each a parallel loop over sequences, items claimed from an atomic
 * counter; an item's arithmetic never depends on the thread running it):
 *   1. normalize: per-token norms of Q and D              O(tokens) scratch
 *   2. unified:   normalised fp32/fp64 working copies     full-size scratch
 *   3. grad_Q:    one item per query   (rows owned by the item)
 *   4. grad_D:    one item per document (rows owned by the item)
 */
#include <string.h>

#include "../core/checked.h"
#include "backward_internal.h"
#include "cpu_internal.h"

#define BW_ISA portable
#include "backward_isa.inc"

int64_t lik_bw_scratch_elems(const lik_bw_cpu *bw) {
  const int64_t l = bw->lq_max > bw->ld_max ? bw->lq_max : bw->ld_max;
  /* acc [l*dim] + tmp [2*dim] + int32 list [l] (an R holds >= one int32);
   * l, dim <= INT32_MAX (validated), so this fits int64 */
  return l * bw->call.p.q.dim + 2 * bw->call.p.q.dim + l + 8;
}

enum { JOB_NORM, JOB_WS, JOB_QUERY, JOB_DOC };

typedef struct {
  lik_bw_cpu *bw;
  const lik_bw_kernels *k;
  int kind, side;
  char *scratch; /* query / document items: thread t's at scratch + t * stride */
  size_t stride;
} bw_job;

static void bw_task(void *ctx, int tid, int64_t n) {
  bw_job *job = (bw_job *)ctx;
  switch (job->kind) {
  case JOB_NORM: job->k->norm_item(job->bw, job->side, n); break;
  case JOB_WS: job->k->ws_item(job->bw, job->side, n); break;
  case JOB_QUERY: job->k->query_item(job->bw, n, job->scratch + (size_t)tid * job->stride); break;
  default: job->k->doc_item(job->bw, n, job->scratch + (size_t)tid * job->stride); break;
  }
}

/* Runs items 0..count-1 of job's kind and side on the shared thread runner
 * (threads.c), on at most nt threads (the blocks of job.scratch). */
static void bw_run(bw_job job, int kind, int side, int64_t count, int nt) {
  job.kind = kind;
  job.side = side;
  lik_parallel_run(nt, count, bw_task, &job);
}

static int64_t max_len(const lik_seqs *s) {
  if (!s->offsets.data) return s->count > 0 ? s->len : 0;
  int64_t m = 0;
  for (int64_t n = 0; n < s->count; n++) {
    const int64_t l = lik_seq_len(s, n);
    if (l > m) m = l;
  }
  return m;
}

/* CSR of the pair list grouped by key (pair_q or pair_d), ascending p. */
static lik_status build_csr(lik_ws *ws, const lik_index *key, int64_t nkeys, int64_t np,
                            const int64_t **start_out, const int64_t **pairs_out) {
  int64_t *start = (int64_t *)lik_ws_array(ws, nkeys + 1, sizeof(int64_t), 1);
  int64_t *pairs = (int64_t *)lik_ws_array(ws, np, sizeof(int64_t), 0);
  int64_t *fill = (int64_t *)lik_ws_array(ws, nkeys, sizeof(int64_t), 0);
  if (!start || !pairs || !fill)
    return lik_fail(LIK_ERR_ALLOC, "backward: cannot allocate the pair index (%lld pairs, %lld "
                    "keys: 8 bytes each)", (long long)np, (long long)nkeys);
  for (int64_t p = 0; p < np; p++) start[lik_index_at(key, p) + 1]++;
  for (int64_t n = 0; n < nkeys; n++) start[n + 1] += start[n];
  memcpy(fill, start, (size_t)nkeys * sizeof(int64_t));
  for (int64_t p = 0; p < np; p++) pairs[fill[lik_index_at(key, p)]++] = p;
  *start_out = start;
  *pairs_out = pairs;
  return LIK_OK;
}

lik_status lik_cpu_maxsim_backward(const lik_bw *call, lik_backward strategy) {
  lik_bw_cpu run;
  memset(&run, 0, sizeof run);
  run.call = *call;
  lik_bw_cpu *bw = &run;
  lik_problem *p = &bw->call.p;
  const int want_q = bw->call.gq.data != NULL && p->q.count > 0;
  const int want_d = bw->call.gd.data != NULL && p->d.count > 0;
  if (!want_q && !want_d) return LIK_OK;
  bw->use_f64 = p->q.dtype == LIK_F64;
  const size_t rs = bw->use_f64 ? sizeof(double) : sizeof(float);
  const lik_cpu_kernels *isa = lik_cpu_kernels_for(p->call.context);
  bw_job job = {bw, bw->use_f64 ? isa->bw_f64 : isa->bw_f32, 0, 0, NULL, 0};
  const int nt = p->call.threads < 1 ? 1 : p->call.threads > 256 ? 256 : p->call.threads;
  bw->lq_max = max_len(&p->q);
  bw->ld_max = max_len(&p->d);
  atomic_init(&bw->bad, 0);
  atomic_init(&bw->bad_where, -1);

  lik_status st = LIK_OK;
  const int64_t ntq = lik_bw_ntok(&p->q), ntd = lik_bw_ntok(&p->d), dim = p->q.dim;
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);

  if (p->pairing == LIK_PAIRING_LIST) {
    if (want_q && (st = build_csr(&ws, &p->pair_q, p->q.count, p->ncand, &bw->q_start,
                                  &bw->q_pairs)))
      goto done;
    if (want_d && (st = build_csr(&ws, &p->pair_d, p->d.count, p->ncand, &bw->d_start,
                                  &bw->d_pairs)))
      goto done;
  }

  if (p->call.normalize) {
    bw->q_norm = lik_ws_array(&ws, ntq, rs, 1);
    bw->d_norm = lik_ws_array(&ws, ntd, rs, 1);
    if (!bw->q_norm || !bw->d_norm) {
      st = lik_fail(LIK_ERR_ALLOC, "backward: cannot allocate token norms (%lld + %lld tokens "
                    "of %zu bytes)", (long long)ntq, (long long)ntd, rs);
      goto done;
    }
    bw_run(job, JOB_NORM, 0, p->q.count, nt);
    bw_run(job, JOB_NORM, 1, p->d.count, nt);
  }

  /* Strategy.  grad_Q gathers D rows, grad_D gathers Q rows: unified makes
   * working copies of exactly the sides that will be gathered. */
  {
    int64_t nd_el = 0, nq_el = 0, ws_bytes = 0;
    if ((want_q && lik_mul_i64(ntd, dim, &nd_el)) || (want_d && lik_mul_i64(ntq, dim, &nq_el)) ||
        lik_add_i64(nd_el, nq_el, &ws_bytes) || lik_mul_i64(ws_bytes, (int64_t)rs, &ws_bytes))
      ws_bytes = INT64_MAX; /* beyond any allocation: fails below */
    /* auto = lowmem: on the CPU the working copies cost more (allocation,
     * first touch, memory traffic) than the per-gather conversions they save,
     * for every dtype measured (bench/cpu_train.py). */
    if (strategy == LIK_BACKWARD_UNIFIED && ws_bytes > 0) {
      if (ws_bytes < INT64_MAX) {
        if (want_q) bw->d_ws = lik_ws_array(&ws, nd_el, rs, 1);
        if (want_d) bw->q_ws = lik_ws_array(&ws, nq_el, rs, 1);
      }
      if ((want_q && !bw->d_ws) || (want_d && !bw->q_ws)) {
        st = lik_fail(LIK_ERR_ALLOC,
                      "backward: cannot allocate the unified working copies (%lld bytes); "
                      "use backward=lowmem",
                      (long long)ws_bytes);
        goto done;
      }
      if (bw->d_ws) bw_run(job, JOB_WS, 1, p->d.count, nt);
      if (bw->q_ws) bw_run(job, JOB_WS, 0, p->q.count, nt);
    }
  }

  {
    /* One block per thread for both item phases. */
    const int64_t nq_items = want_q ? p->q.count : 0, nd_items = want_d ? p->d.count : 0;
    const int64_t items = nq_items > nd_items ? nq_items : nd_items;
    const int nts = items < nt ? (int)items : nt;
    size_t scratch;
    if (lik_bytes(lik_bw_scratch_elems(bw), rs, &scratch) ||
        !(job.scratch = lik_ws_blocks(&ws, nts, scratch, &job.stride))) {
      st = lik_fail(LIK_ERR_ALLOC, "backward: cannot allocate %d threads x %lld elements of %zu "
                    "bytes of scratch (L=%lld, d=%lld)", nts,
                    (long long)lik_bw_scratch_elems(bw), rs,
                    (long long)(bw->lq_max > bw->ld_max ? bw->lq_max : bw->ld_max),
                    (long long)dim);
      goto done;
    }
    if (want_q) bw_run(job, JOB_QUERY, 0, p->q.count, nts);
    if (want_d) bw_run(job, JOB_DOC, 1, p->d.count, nts);
  }
  if (atomic_load(&bw->bad)) {
    const long long w = (long long)atomic_load(&bw->bad_where);
    st = lik_fail(LIK_ERR_VALUE,
                  "argmax: an entry of output %lld (flattened) is outside [-1, Ld) or points at "
                  "a masked document token; pass the argmax the forward wrote",
                  w);
  }

done:
  lik_ws_close(&ws);
  return st;
}
