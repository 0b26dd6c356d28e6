/*
 * threads.c — fork/join over a dynamic task counter.  The caller is thread 0;
 * threads 1 .. n-1 come from a pool kept between calls (started when first
 * needed, waiting on a condition variable between calls), so a call costs
 * waking them rather than creating them.  One call at a time uses the pool:
 * a call made while it is in use (from another thread, or from inside a
 * task) creates threads of its own and joins them before returning.  Results
 * never depend on which thread ran a task: callers give every output exactly
 * one task.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu_internal.h"

#define LIK_MAX_THREADS 256

typedef struct {
  lik_task_fn fn;
  void *ctx;
  int64_t ntasks;
  atomic_llong next;
} job;

static void work(job *j, int tid) {
  for (;;) {
    int64_t t = (int64_t)atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (t >= j->ntasks) break;
    j->fn(j->ctx, tid, t);
  }
}

/* ---- threads of one call ---------------------------------------------------------- */

typedef struct {
  job *j;
  int tid;
} own_arg;

static void *own_main(void *arg) {
  own_arg *a = (own_arg *)arg;
  work(a->j, a->tid);
  return NULL;
}

static void run_own(job *j, int nthreads) {
  pthread_t th[LIK_MAX_THREADS];
  own_arg args[LIK_MAX_THREADS];
  int started[LIK_MAX_THREADS];
  for (int t = 1; t < nthreads; t++) {
    args[t].j = j;
    args[t].tid = t;
    /* A thread that cannot be created is simply absent: the others drain
     * the counter, so the result is unchanged. */
    started[t] = pthread_create(&th[t], NULL, own_main, &args[t]) == 0;
  }
  work(j, 0);
  for (int t = 1; t < nthreads; t++)
    if (started[t]) pthread_join(th[t], NULL);
}

/* ---- the pool ----------------------------------------------------------------------- */

/* A thread done with a job, or the caller done with its share, polls this
 * many times (tens of microseconds) before sleeping: the stages of one call
 * follow each other closer than a wake-up takes. */
#define SPIN 2000

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

typedef struct {
  int tid;
  uint64_t post; /* the last job posted before it started (not its own) */
} pool_arg;

static struct {
  pthread_mutex_t use; /* held by the call using the pool */
  pthread_mutex_t m;   /* with go / done: sleeping and waking */
  pthread_cond_t go, done;
  job *j;              /* the last job posted: read by its threads only */
  _Atomic uint64_t post; /* jobs posted << 9 | want: threads 1 .. want run the last */
  atomic_int left;     /* of them, those not finished */
  atomic_int quit;
  int started;         /* threads 1 .. started exist */
  pthread_t th[LIK_MAX_THREADS];
  pool_arg args[LIK_MAX_THREADS];
} P = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
       PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, 0, {0}, {{0, 0}}};

/* The first post other than seen (or seen when the pool quits). */
static uint64_t next_post(uint64_t seen) {
  uint64_t p;
  for (int i = 0; i < SPIN; i++) {
    if ((p = atomic_load_explicit(&P.post, memory_order_acquire)) != seen || atomic_load(&P.quit)) return p;
    relax();
  }
  pthread_mutex_lock(&P.m);
  while ((p = atomic_load_explicit(&P.post, memory_order_acquire)) == seen && !atomic_load(&P.quit))
    pthread_cond_wait(&P.go, &P.m);
  pthread_mutex_unlock(&P.m);
  return p;
}

static void *pool_main(void *arg) {
  const int tid = ((const pool_arg *)arg)->tid;
  uint64_t seen = ((const pool_arg *)arg)->post;
  for (;;) {
    seen = next_post(seen);
    if (atomic_load(&P.quit)) break;
    if (tid > (int)(seen & 511)) continue;
    work(P.j, tid);
    if (atomic_fetch_sub_explicit(&P.left, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&P.m);
      pthread_cond_signal(&P.done);
      pthread_mutex_unlock(&P.m);
    }
  }
  return NULL;
}

/* A forked child has none of the pool's threads: it starts a pool of its own. */
static void pool_forget(void) {
  pthread_mutex_init(&P.use, NULL);
  pthread_mutex_init(&P.m, NULL);
  pthread_cond_init(&P.go, NULL);
  pthread_cond_init(&P.done, NULL);
  P.j = NULL;
  atomic_store(&P.post, 0);
  atomic_store(&P.left, 0);
  atomic_store(&P.quit, 0);
  P.started = 0;
}

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static void pool_init(void) { pthread_atfork(NULL, NULL, pool_forget); }

/* Runs j on the pool (0: the pool is in use, nothing done). */
static int run_pool(job *j, int nthreads) {
  if (pthread_mutex_trylock(&P.use)) return 0;
  pthread_once(&pool_once, pool_init);
  const uint64_t last = atomic_load(&P.post);
  while (P.started < nthreads - 1) { /* a thread that cannot be created is absent */
    const int t = P.started + 1;
    P.args[t] = (pool_arg){t, last};
    if (pthread_create(&P.th[t], NULL, pool_main, &P.args[t])) break;
    P.started = t;
  }
  const int want = nthreads - 1 < P.started ? nthreads - 1 : P.started;
  P.j = j;
  atomic_store_explicit(&P.left, want, memory_order_relaxed);
  pthread_mutex_lock(&P.m);
  atomic_store_explicit(&P.post, ((last >> 9) + 1) << 9 | (uint64_t)want, memory_order_release);
  pthread_cond_broadcast(&P.go);
  pthread_mutex_unlock(&P.m);
  work(j, 0);
  for (int i = 0; i < SPIN && atomic_load_explicit(&P.left, memory_order_acquire); i++) relax();
  if (atomic_load_explicit(&P.left, memory_order_acquire)) {
    pthread_mutex_lock(&P.m);
    while (atomic_load_explicit(&P.left, memory_order_acquire)) pthread_cond_wait(&P.done, &P.m);
    pthread_mutex_unlock(&P.m);
  }
  pthread_mutex_unlock(&P.use);
  return 1;
}

/* The pool's threads end (and are joined) when the library is unloaded or
 * the process exits, unless a call is using them then. */
__attribute__((destructor)) static void pool_stop(void) {
  if (pthread_mutex_trylock(&P.use)) return;
  pthread_mutex_lock(&P.m);
  atomic_store(&P.quit, 1);
  pthread_cond_broadcast(&P.go);
  pthread_mutex_unlock(&P.m);
  for (int t = 1; t <= P.started; t++) pthread_join(P.th[t], NULL);
  P.started = 0;
  atomic_store(&P.quit, 0);
  pthread_mutex_unlock(&P.use);
}

void lik_parallel_run(int nthreads, int64_t ntasks, lik_task_fn fn, void *ctx) {
  if (ntasks <= 0) return;
  if (nthreads > LIK_MAX_THREADS) nthreads = LIK_MAX_THREADS;
  if ((int64_t)nthreads > ntasks) nthreads = (int)ntasks;
  if (nthreads < 1) nthreads = 1;
  job j;
  j.fn = fn;
  j.ctx = ctx;
  j.ntasks = ntasks;
  atomic_init(&j.next, 0);
  if (nthreads == 1) work(&j, 0);
  else if (!run_pool(&j, nthreads)) run_own(&j, nthreads);
}

lik_status lik_parallel_run_ws(lik_ws *ws, int nthreads, int64_t ntasks, size_t bytes,
                               char **scratch, size_t *stride, lik_task_fn fn, void *ctx,
                               const char *what) {
  if (!(*scratch = lik_ws_blocks(ws, nthreads, bytes, stride)))
    return lik_fail(LIK_ERR_ALLOC, "%s: cannot allocate %d threads x %zu bytes of scratch", what,
                    nthreads, bytes);
  lik_parallel_run(nthreads, ntasks, fn, ctx);
  return LIK_OK;
}
