/*
 * backward.c — the CPU backward driver: strategy, scratch, threads; plus the
 * portable instance of the row kernels (backward_kernel.inc).
 *
 * Phases (each a parallel loop over sequences, items claimed from an atomic
 * counter; an item's arithmetic never depends on the thread running it):
 *   1. normalize: per-token norms of Q and D              O(tokens) scratch
 *   2. unified:   normalised fp32/fp64 working copies     full-size scratch
 *   3. grad_Q:    one item per query   (rows owned by the item)
 *   4. grad_D:    one item per document (rows owned by the item)
 */
#include <stdlib.h>
#include <string.h>

#include "../core/checked.h"
#include "backward_internal.h"
#include "cpu_internal.h"

#define R float
#define KN(x) bw_port_f32_##x
#include "backward_kernel.inc"
#undef R
#undef KN

#define R double
#define KN(x) bw_port_f64_##x
#include "backward_kernel.inc"
#undef R
#undef KN

const lik_bw_kernels lik_bw_kernels_portable_f32 = {bw_port_f32_query_item, bw_port_f32_doc_item,
                                                    bw_port_f32_norm_item, bw_port_f32_ws_item};
const lik_bw_kernels lik_bw_kernels_portable_f64 = {bw_port_f64_query_item, bw_port_f64_doc_item,
                                                    bw_port_f64_norm_item, bw_port_f64_ws_item};

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
  void **scratch; /* per thread */
} bw_job;

static void bw_task(void *ctx, int tid, int64_t n) {
  bw_job *job = (bw_job *)ctx;
  switch (job->kind) {
  case JOB_NORM: job->k->norm_item(job->bw, job->side, n); break;
  case JOB_WS: job->k->ws_item(job->bw, job->side, n); break;
  case JOB_QUERY: job->k->query_item(job->bw, n, job->scratch[tid]); break;
  default: job->k->doc_item(job->bw, n, job->scratch[tid]); break;
  }
}

/* Runs items 0..count-1 on the shared thread runner (threads.c), each thread
 * with scratch_bytes of its own.  Threads whose scratch cannot be allocated
 * are not started (the others run their items: same results); no scratch at
 * all is LIK_ERR_ALLOC. */
static lik_status bw_run(lik_bw_cpu *bw, const lik_bw_kernels *k, int kind, int side, int64_t count,
                         size_t scratch_bytes) {
  if (count <= 0) return LIK_OK;
  enum { MAX_THREADS = 256 };
  void *scratch[MAX_THREADS] = {0};
  int nt = bw->call.p.num_threads < 1 ? 1 : bw->call.p.num_threads;
  if (nt > count) nt = (int)count;
  if (nt > MAX_THREADS) nt = MAX_THREADS;
  if (scratch_bytes) {
    int got = 0;
    while (got < nt && (scratch[got] = malloc(scratch_bytes)) != NULL) got++;
    if (got == 0)
      return lik_fail(LIK_ERR_ALLOC, "backward: cannot allocate %zu bytes of scratch",
                      scratch_bytes);
    nt = got;
  }
  bw_job job = {bw, k, kind, side, scratch};
  lik_parallel_run(nt, count, bw_task, &job);
  for (int t = 0; t < nt; t++) free(scratch[t]);
  return LIK_OK;
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
static lik_status build_csr(const lik_index *key, int64_t nkeys, int64_t np, int64_t **start_out,
                            int64_t **pairs_out) {
  int64_t *start = (int64_t *)calloc((size_t)nkeys + 1, sizeof(int64_t));
  int64_t *pairs = (int64_t *)calloc((size_t)(np > 0 ? np : 1), sizeof(int64_t));
  int64_t *fill = (int64_t *)calloc((size_t)(nkeys > 0 ? nkeys : 1), sizeof(int64_t));
  if (!start || !pairs || !fill) {
    free(start);
    free(pairs);
    free(fill);
    return lik_fail(LIK_ERR_ALLOC, "backward: cannot allocate the pair index (%lld pairs)",
                    (long long)np);
  }
  for (int64_t p = 0; p < np; p++) start[lik_index_at(key, p) + 1]++;
  for (int64_t n = 0; n < nkeys; n++) start[n + 1] += start[n];
  memcpy(fill, start, (size_t)nkeys * sizeof(int64_t));
  for (int64_t p = 0; p < np; p++) pairs[fill[lik_index_at(key, p)]++] = p;
  free(fill);
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
  const lik_cpu_kernels *isa = lik_cpu_kernels_for(p->context);
  const lik_bw_kernels *k = bw->use_f64 ? isa->bw_f64 : isa->bw_f32;
  bw->lq_max = max_len(&p->q);
  bw->ld_max = max_len(&p->d);
  atomic_init(&bw->bad, 0);
  atomic_init(&bw->bad_where, -1);

  lik_status st = LIK_OK;
  int64_t *qs = NULL, *qp = NULL, *dst = NULL, *dp = NULL;
  void *qn = NULL, *dn = NULL, *qws = NULL, *dws = NULL;
  const int64_t ntq = lik_bw_ntok(&p->q), ntd = lik_bw_ntok(&p->d), dim = p->q.dim;

  if (p->pairing == LIK_PAIRING_LIST) {
    if (want_q && (st = build_csr(&p->pair_q, p->q.count, p->ncand, &qs, &qp))) goto done;
    if (want_d && (st = build_csr(&p->pair_d, p->d.count, p->ncand, &dst, &dp))) goto done;
    bw->q_start = qs;
    bw->q_pairs = qp;
    bw->d_start = dst;
    bw->d_pairs = dp;
  }

  if (p->normalize) {
    qn = calloc((size_t)(ntq > 0 ? ntq : 1), rs);
    dn = calloc((size_t)(ntd > 0 ? ntd : 1), rs);
    if (!qn || !dn) {
      st = lik_fail(LIK_ERR_ALLOC, "backward: cannot allocate token norms (%lld + %lld tokens)",
                    (long long)ntq, (long long)ntd);
      goto done;
    }
    bw->q_norm = qn;
    bw->d_norm = dn;
    if ((st = bw_run(bw, k, JOB_NORM, 0, p->q.count, 0))) goto done;
    if ((st = bw_run(bw, k, JOB_NORM, 1, p->d.count, 0))) goto done;
  }

  /* Strategy.  grad_Q gathers D rows, grad_D gathers Q rows: unified makes
   * working copies of exactly the sides that will be gathered. */
  {
    int64_t nd_el = 0, nq_el = 0, ws_bytes = 0;
    if ((want_q && lik_mul_i64(ntd, dim, &nd_el)) || (want_d && lik_mul_i64(ntq, dim, &nq_el)) ||
        lik_add_i64(nd_el, nq_el, &ws_bytes) || lik_mul_i64(ws_bytes, (int64_t)rs, &ws_bytes))
      ws_bytes = INT64_MAX; /* beyond any allocation: fails below */
    int unified = strategy == LIK_BACKWARD_UNIFIED;
    /* auto = lowmem: on the CPU the working copies cost more (allocation,
     * first touch, memory traffic) than the per-gather conversions they save,
     * for every dtype measured (bench/cpu_train.py). */
    if (unified && ws_bytes > 0) {
      if (want_q && ws_bytes < INT64_MAX) dws = calloc((size_t)nd_el, rs);
      if (want_d && ws_bytes < INT64_MAX) qws = calloc((size_t)nq_el, rs);
      if ((want_q && !dws) || (want_d && !qws)) {
        free(dws);
        free(qws);
        dws = qws = NULL;
        if (strategy == LIK_BACKWARD_UNIFIED) {
          st = lik_fail(LIK_ERR_ALLOC,
                        "backward: cannot allocate the unified working copies (%lld bytes); "
                        "use backward=lowmem",
                        (long long)ws_bytes);
          goto done;
        }
      }
      bw->d_ws = dws;
      bw->q_ws = qws;
      if (dws && (st = bw_run(bw, k, JOB_WS, 1, p->d.count, 0))) goto done;
      if (qws && (st = bw_run(bw, k, JOB_WS, 0, p->q.count, 0))) goto done;
    }
  }

  {
    size_t scratch;
    if (lik_bytes(lik_bw_scratch_elems(bw), rs, &scratch)) {
      st = lik_fail(LIK_ERR_ALLOC, "backward: scratch of %lld elements per thread exceeds the "
                    "address space (L=%lld, d=%lld)", (long long)lik_bw_scratch_elems(bw),
                    (long long)(bw->lq_max > bw->ld_max ? bw->lq_max : bw->ld_max),
                    (long long)dim);
      goto done;
    }
    if (want_q && (st = bw_run(bw, k, JOB_QUERY, 0, p->q.count, scratch))) goto done;
    if (want_d && (st = bw_run(bw, k, JOB_DOC, 1, p->d.count, scratch))) goto done;
  }
  if (atomic_load(&bw->bad)) {
    const long long w = (long long)atomic_load(&bw->bad_where);
    st = lik_fail(LIK_ERR_VALUE,
                  "argmax: an entry of output %lld (flattened) is outside [-1, Ld) or points at "
                  "a masked document token; pass the argmax the forward wrote",
                  w);
  }

done:
  free(qs);
  free(qp);
  free(dst);
  free(dp);
  free(qn);
  free(dn);
  free(qws);
  free(dws);
  return st;
}
