/*
 * topk_merge.c — lik_topk_merge on the CPU: every query's R sorted lists are
 * merged by lik_topk_merge_lists (topk.c) into its best k.  Queries run in
 * blocks on lik_parallel_run; each query has one owner, so the result does
 * not depend on the thread count.
 */
#include "../core/checked.h"
#include "cpu_internal.h"
#include "topk.h"

#define LIK_MERGE_QBLOCK 64

typedef struct {
  const lik_merge *m;
  lik_topk_list *lists; /* [threads][R]   */
  int64_t *heap;        /* [threads][2 R] */
} merge_run;

static void merge_task(void *ctx, int tid, int64_t task) {
  const merge_run *run = (const merge_run *)ctx;
  const lik_merge *m = run->m;
  lik_topk_list *lists = run->lists + (int64_t)tid * m->R;
  int64_t *heap = run->heap + (int64_t)tid * 2 * m->R;
  const int64_t q1 = (task + 1) * LIK_MERGE_QBLOCK < m->nq ? (task + 1) * LIK_MERGE_QBLOCK : m->nq;
  for (int64_t q = task * LIK_MERGE_QBLOCK; q < q1; q++) {
    for (int64_t r = 0; r < m->R; r++) lists[r] = lik_merge_list(m, r, q);
    lik_topk_merge_lists(lists, m->R, m->k, m->out_s + q * m->o_sq, m->o_sc,
                         m->out_i + q * m->o_iq, m->o_ic, heap);
  }
}

lik_status lik_cpu_topk_merge(const lik_merge *m) {
  if (m->nq <= 0 || m->k <= 0) return LIK_OK;
  const int64_t ntasks = (m->nq + LIK_MERGE_QBLOCK - 1) / LIK_MERGE_QBLOCK;
  const int nt = (int64_t)m->call.threads < ntasks ? m->call.threads : (int)ntasks;
  merge_run run;
  run.m = m;
  size_t lists_b = 0, heap_b = 0;
  const int sizes_ok = !lik_bytes2(nt, m->R, sizeof(lik_topk_list), &lists_b) &&
                       !lik_bytes2(nt, m->R, 2 * sizeof(int64_t), &heap_b);
  lik_ws ws;
  lik_ws_open(&ws, m->call.context);
  run.lists = sizes_ok ? (lik_topk_list *)lik_ws_alloc(&ws, lists_b) : NULL;
  run.heap = sizes_ok ? (int64_t *)lik_ws_alloc(&ws, heap_b) : NULL;
  lik_status st = LIK_OK;
  if (!run.lists || !run.heap)
    st = lik_fail(LIK_ERR_ALLOC, "topk_merge: cannot allocate %zu + %zu bytes of scratch (%d "
                  "threads x R=%lld lists)", lists_b, heap_b, nt, (long long)m->R);
  else
    lik_parallel_run(nt, ntasks, merge_task, &run);
  lik_ws_close(&ws);
  return st;
}
