/*
 * threads.c — a per-call fork/join over a dynamic task counter.  Threads are
 * created per call (no state between calls) and joined before returning.
 * Results never depend on which thread ran a task: callers give every output
 * exactly one task.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
  lik_task_fn fn;
  void *ctx;
  int64_t ntasks;
  atomic_llong next;
} pool;

typedef struct {
  pool *p;
  int tid;
} worker_arg;

static void work(pool *p, int tid) {
  for (;;) {
    int64_t t = (int64_t)atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (t >= p->ntasks) break;
    p->fn(p->ctx, tid, t);
  }
}

static void *worker_main(void *arg) {
  worker_arg *a = (worker_arg *)arg;
  work(a->p, a->tid);
  return NULL;
}

#define LIK_MAX_THREADS 256

void lik_parallel_run(int nthreads, int64_t ntasks, lik_task_fn fn, void *ctx) {
  if (ntasks <= 0) return;
  if (nthreads > LIK_MAX_THREADS) nthreads = LIK_MAX_THREADS;
  if ((int64_t)nthreads > ntasks) nthreads = (int)ntasks;
  if (nthreads < 1) nthreads = 1;
  pool p;
  p.fn = fn;
  p.ctx = ctx;
  p.ntasks = ntasks;
  atomic_init(&p.next, 0);
  pthread_t th[LIK_MAX_THREADS];
  worker_arg args[LIK_MAX_THREADS];
  int started[LIK_MAX_THREADS];
  for (int t = 1; t < nthreads; t++) {
    args[t].p = &p;
    args[t].tid = t;
    /* A thread that cannot be created is simply absent: the others drain
     * the counter, so the result is unchanged. */
    started[t] = pthread_create(&th[t], NULL, worker_main, &args[t]) == 0;
  }
  work(&p, 0);
  for (int t = 1; t < nthreads; t++)
    if (started[t]) pthread_join(th[t], NULL);
}
