/*
 * test_context.c — lik_context (lik_experimental.h): creation errors, and
 * calls through contexts of every CPU path and thread count agree with the
 * default context (bitwise across thread counts of one path; within fp32
 * tolerance across paths, which sum in different orders).  The host
 * workspace (src/core/workspace.h): one context reused across ops and sizes,
 * and shared by several threads at once, gives bitwise the results of fresh
 * contexts; a workspace allocation that fails is LIK_ERR_ALLOC naming its
 * bytes, and the context works again afterwards.
 */
#include <pthread.h>

#include "../../src/core/workspace.h"
#include "lik_experimental.h"
#include "lik_test_util.h"

static void group_create_errors(void) {
  group_begin("create errors");
  lik_context *c = (lik_context *)&c; /* must be reset to NULL on failure */
  lik_context_options o = {0};
  case_begin("out NULL");
  CHECK(lik_context_create(NULL, NULL) == LIK_ERR_NULL, "out NULL: %s", lik_last_error());
  case_begin("num_threads -1");
  o.num_threads = -1;
  CHECK(lik_context_create(&o, &c) == LIK_ERR_VALUE && c == NULL, "num_threads -1 accepted");
  CHECK(strstr(lik_last_error(), "num_threads") != NULL, "message: %s", lik_last_error());
  case_begin("cpu_isa sse");
  o.num_threads = 0;
  o.cpu_isa = "sse";
  CHECK(lik_context_create(&o, &c) == LIK_ERR_VALUE, "cpu_isa sse accepted");
  CHECK(strstr(lik_last_error(), "sse") != NULL, "message: %s", lik_last_error());
  case_begin("cuda_off past LIK_CUDA_NO_ALL");
  o.cpu_isa = NULL;
  o.cuda_off = LIK_CUDA_NO_ALL + 1u;
  CHECK(lik_context_create(&o, &c) == LIK_ERR_VALUE, "cuda_off 0x%x accepted", o.cuda_off);
  case_begin("cuda_off all");
  o.cuda_off = LIK_CUDA_NO_ALL;
  CHECK(lik_context_create(&o, &c) == LIK_OK && c != NULL, "LIK_CUDA_NO_ALL: %s", lik_last_error());
  lik_context_free(c);
  case_begin("free NULL");
  lik_context_free(NULL);
  CHECK(lik_context_create(NULL, &c) == LIK_OK && c != NULL, "NULL options: %s", lik_last_error());
  lik_context_free(c);
  group_end();
}

enum { NQ = 3, ND = 5, LQ = 7, LD = 13, DIM = 19 };

static lik_status run(lik_context *ctx, int threads, const float *q, const float *d,
                      float *scores, int32_t *argmax) {
  lik_tensor Q = {(void *)q, LIK_F32, 3, {NQ, LQ, DIM}, {LQ * DIM, DIM, 1}, LIK_CPU, 0};
  lik_tensor D = {(void *)d, LIK_F32, 3, {ND, LD, DIM}, {LD * DIM, DIM, 1}, LIK_CPU, 0};
  lik_tensor S = {scores, LIK_F32, 2, {NQ, ND}, {ND, 1}, LIK_CPU, 0};
  lik_tensor A = {argmax, LIK_I32, 3, {NQ, ND, LQ}, {ND * LQ, LQ, 1}, LIK_CPU, 0};
  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = 1;
  opts.num_threads = threads;
  opts.context = ctx;
  return lik_maxsim(&Q, &D, NULL, NULL, &opts, &S, &A);
}

static void group_paths(void) {
  group_begin("paths");
  static float q[NQ * LQ * DIM], d[ND * LD * DIM];
  for (int i = 0; i < NQ * LQ * DIM; i++) q[i] = (float)rng_range(-1, 1);
  for (int i = 0; i < ND * LD * DIM; i++) d[i] = (float)rng_range(-1, 1);
  float ref[NQ * ND];
  int32_t ref_am[NQ * ND * LQ];
  CHECK(run(NULL, 0, q, d, ref, ref_am) == LIK_OK, "default context: %s", lik_last_error());
  const char *const *isas = LIK_TEST_ISAS;
  for (int k = 0; k < LIK_TEST_NISAS; k++) {
    float first[NQ * ND];
    for (int threads = 1; threads <= 4; threads += 3) {
      case_begin("cpu_isa %s, context threads %d", isas[k], threads);
      lik_context_options o = {threads, isas[k], 0};
      lik_context *c = NULL;
      CHECK(lik_context_create(&o, &c) == LIK_OK, "create: %s", lik_last_error());
      float s[NQ * ND];
      int32_t am[NQ * ND * LQ];
      CHECK(run(c, 0, q, d, s, am) == LIK_OK, "maxsim: %s", lik_last_error());
      for (int i = 0; i < NQ * ND; i++)
        CHECK(fabsf(s[i] - ref[i]) <= 1e-5f * (1.0f + fabsf(ref[i])), "score %d: %g vs %g", i,
              (double)s[i], (double)ref[i]);
      if (threads == 1) memcpy(first, s, sizeof s);
      else CHECK(memcmp(first, s, sizeof s) == 0, "scores differ between 1 and %d threads", threads);
      lik_context_free(c);
    }
  }
  group_end();
}


/* ---- the workspace ------------------------------------------------------------ */

/* One call of a workspace job: an op over random inputs of its sizes. */
enum { WS_FWD, WS_FWD_F64, WS_RETRIEVE, WS_BW_UNIFIED, WS_BW_LOWMEM, WS_MERGE, WS_NOPS };
typedef struct {
  int op, nq, nd, lq, ld, dim, threads;
} ws_job;

static const ws_job ws_jobs[] = {
    {WS_FWD, 3, 5, 7, 13, 19, 2},        {WS_BW_UNIFIED, 4, 6, 9, 30, 33, 2},
    {WS_FWD, 2, 40, 32, 180, 96, 3},     {WS_RETRIEVE, 3, 300, 8, 12, 16, 2},
    {WS_FWD_F64, 2, 3, 5, 11, 7, 2},     {WS_BW_LOWMEM, 2, 9, 16, 64, 48, 1},
    {WS_MERGE, 70, 3, 0, 0, 0, 2},       {WS_FWD, 1, 1, 1, 1, 1, 1},
    {WS_BW_UNIFIED, 1, 2, 3, 4, 5, 4},   {WS_RETRIEVE, 5, 2100, 4, 6, 8, 2},
    {WS_FWD_F64, 3, 20, 40, 90, 64, 2},  {WS_MERGE, 3, 9, 0, 0, 0, 1},
    {WS_RETRIEVE, 1100, 2100, 2, 3, 4, 2}, /* 9 MB of block scores: above what a slot keeps */
};
enum { WS_LARGE = (int)(sizeof ws_jobs / sizeof ws_jobs[0]) - 1 }; /* the last job: slow */
#ifdef LIK_TEST_EMULATED /* under qemu it takes minutes: left out */
enum { WS_NJOBS = WS_LARGE };
#else
enum { WS_NJOBS = WS_LARGE + 1 };
#endif

/* Deterministic inputs of job j (no shared state: threads call it). */
static void ws_fill(void *dst, size_t n, int f64, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const double v = (double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    if (f64) ((double *)dst)[i] = v;
    else ((float *)dst)[i] = (float)v;
  }
}

/* Runs job j on ctx; its outputs, concatenated, in *out (malloc'd, *bytes). */
static lik_status ws_run(lik_context *ctx, int j, unsigned char **out, size_t *bytes) {
  const ws_job *b = &ws_jobs[j];
  const int f64 = b->op == WS_FWD_F64;
  const size_t es = f64 ? 8 : 4, nq_el = (size_t)b->nq * b->lq * b->dim,
               nd_el = (size_t)b->nd * b->ld * b->dim;
  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = 1;
  opts.num_threads = b->threads;
  opts.context = ctx;
  lik_status st;
  if (b->op == WS_MERGE) { /* R = nd lists of K = 16 sorted entries per query, top 10 */
    enum { K = 16, TOPK = 10 };
    const size_t nl = (size_t)b->nd * b->nq * K;
    float *s = malloc(nl * 4);
    int64_t *ix = malloc(nl * 8);
    *bytes = (size_t)b->nq * TOPK * 12;
    *out = malloc(*bytes);
    ws_fill(s, nl, 0, (uint64_t)j);
    for (size_t l = 0; l < nl / K; l++) { /* each list descending */
      for (int a = 1; a < K; a++)
        for (int c = a; c > 0 && s[l * K + c] > s[l * K + c - 1]; c--) {
          const float t = s[l * K + c];
          s[l * K + c] = s[l * K + c - 1];
          s[l * K + c - 1] = t;
        }
      for (int a = 0; a < K; a++) ix[l * K + a] = (int64_t)(l * K + a);
    }
    lik_tensor S = {s, LIK_F32, 3, {b->nd, b->nq, K}, {(int64_t)b->nq * K, K, 1}, LIK_CPU, 0};
    lik_tensor I = {ix, LIK_I64, 3, {b->nd, b->nq, K}, {(int64_t)b->nq * K, K, 1}, LIK_CPU, 0};
    lik_tensor OI = {*out, LIK_I64, 2, {b->nq, TOPK}, {TOPK, 1}, LIK_CPU, 0};
    lik_tensor OS = {*out + (size_t)b->nq * TOPK * 8, LIK_F32, 2, {b->nq, TOPK}, {TOPK, 1},
                     LIK_CPU, 0};
    st = lik_topk_merge(&S, &I, NULL, TOPK, &opts, &OS, &OI);
    free(s);
    free(ix);
    return st;
  }
  void *q = malloc(nq_el * es), *d = malloc(nd_el * es);
  ws_fill(q, nq_el, f64, 2 * (uint64_t)j);
  ws_fill(d, nd_el, f64, 2 * (uint64_t)j + 1);
  const lik_dtype dt = f64 ? LIK_F64 : LIK_F32;
  lik_tensor Q = {q, dt, 3, {b->nq, b->lq, b->dim}, {(int64_t)b->lq * b->dim, b->dim, 1}, LIK_CPU, 0};
  lik_tensor D = {d, dt, 3, {b->nd, b->ld, b->dim}, {(int64_t)b->ld * b->dim, b->dim, 1}, LIK_CPU, 0};
  const size_t ns = (size_t)b->nq * b->nd, na = ns * b->lq;
  if (b->op == WS_RETRIEVE) {
    const int k = 7;
    *bytes = (size_t)b->nq * k * 12;
    *out = malloc(*bytes);
    lik_tensor I = {*out, LIK_I64, 2, {b->nq, k}, {k, 1}, LIK_CPU, 0}; /* int64 first: aligned */
    lik_tensor S = {*out + (size_t)b->nq * k * 8, LIK_F32, 2, {b->nq, k}, {k, 1}, LIK_CPU, 0};
    st = lik_retrieve(&Q, &D, NULL, NULL, k, &opts, &S, &I);
  } else {
    const int bw = b->op == WS_BW_UNIFIED || b->op == WS_BW_LOWMEM;
    *bytes = ns * es + na * 4 + (bw ? (nq_el + nd_el) * 4 : 0);
    *out = malloc(*bytes);
    unsigned char *o = *out;
    lik_tensor S = {o, dt, 2, {b->nq, b->nd}, {b->nd, 1}, LIK_CPU, 0};
    lik_tensor A = {o + ns * es, LIK_I32, 3, {b->nq, b->nd, b->lq}, {(int64_t)b->nd * b->lq, b->lq, 1},
                    LIK_CPU, 0};
    st = lik_maxsim(&Q, &D, NULL, NULL, &opts, &S, &A);
    if (!st && bw) {
      float *gs = malloc(ns * 4);
      ws_fill(gs, ns, 0, 1000 + (uint64_t)j);
      lik_tensor G = {gs, LIK_F32, 2, {b->nq, b->nd}, {b->nd, 1}, LIK_CPU, 0};
      lik_tensor GQ = Q, GD = D;
      GQ.data = o + ns * es + na * 4;
      GD.data = o + ns * es + na * 4 + nq_el * 4;
      opts.backward = b->op == WS_BW_UNIFIED ? LIK_BACKWARD_UNIFIED : LIK_BACKWARD_LOWMEM;
      st = lik_maxsim_backward(&Q, &D, NULL, NULL, &A, &G, &opts, &GQ, &GD);
      free(gs);
    }
  }
  free(q);
  free(d);
  return st;
}

/* The results of every job, each on a fresh context. */
static unsigned char *ws_ref[WS_NJOBS];
static size_t ws_ref_bytes[WS_NJOBS];

static int ws_matches(lik_context *ctx, int j) {
  unsigned char *o;
  size_t n;
  const lik_status st = ws_run(ctx, j, &o, &n);
  const int ok = st == LIK_OK && n == ws_ref_bytes[j] && memcmp(o, ws_ref[j], n) == 0;
  free(o);
  return ok;
}

static void group_workspace_reuse(void) {
  group_begin("workspace reuse");
  for (int j = 0; j < WS_NJOBS; j++) {
    lik_context *c = NULL;
    CHECK(lik_context_create(NULL, &c) == LIK_OK, "create: %s", lik_last_error());
    CHECK(ws_run(c, j, &ws_ref[j], &ws_ref_bytes[j]) == LIK_OK, "job %d: %s", j, lik_last_error());
    lik_context_free(c);
  }
  /* One context through every job, three rounds, in an order that grows and
   * shrinks the workspace (and the default context the same way). */
  lik_context *c = NULL;
  CHECK(lik_context_create(NULL, &c) == LIK_OK, "create: %s", lik_last_error());
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < WS_NJOBS; i++) {
      const int j = round == 1 ? WS_NJOBS - 1 - i : (i * 5 + round) % WS_NJOBS;
      if (j == WS_LARGE && round > 0) continue; /* once */
      case_begin("round %d, job %d (op %d)", round, j, ws_jobs[j].op);
      CHECK(ws_matches(c, j), "shared context: not bitwise the fresh context's result (%s)",
            lik_last_error());
      CHECK(ws_matches(NULL, j), "default context: not bitwise the fresh context's result (%s)",
            lik_last_error());
    }
  lik_context_free(c);
  group_end();
}

typedef struct {
  lik_context *ctx;
  int first, bad;
} ws_thread_arg;

static void *ws_thread(void *p) { /* every job but the last (large, slow) one */
  ws_thread_arg *a = (ws_thread_arg *)p;
#ifdef LIK_TEST_EMULATED
  const int rounds = 1; /* qemu: threads are slow to emulate */
#else
  const int rounds = 4;
#endif
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < WS_LARGE; i++) {
      const int j = (a->first + i * 7 + r) % WS_LARGE;
      if (!ws_matches(a->ctx, j)) a->bad = j + 1;
    }
  return NULL;
}

static void group_workspace_threads(void) {
  group_begin("workspace shared by threads");
  enum { NT = 4 };
  for (int shared = 0; shared < 2; shared++) {
    case_begin("%d threads on %s", NT, shared ? "one created context" : "the default context");
    lik_context *c = NULL;
    if (shared) CHECK(lik_context_create(NULL, &c) == LIK_OK, "create: %s", lik_last_error());
    pthread_t th[NT];
    ws_thread_arg args[NT];
    for (int t = 0; t < NT; t++) {
      args[t] = (ws_thread_arg){c, t * 3, 0};
      CHECK(pthread_create(&th[t], NULL, ws_thread, &args[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < NT; t++) {
      pthread_join(th[t], NULL);
      CHECK(args[t].bad == 0, "thread %d: job %d not bitwise the fresh context's result", t,
            args[t].bad - 1);
    }
    lik_context_free(c);
  }
  group_end();
}

static void group_workspace_alloc_fail(void) {
  group_begin("workspace allocation failure");
  lik_context *c = NULL;
  CHECK(lik_context_create(NULL, &c) == LIK_OK, "create: %s", lik_last_error());
  for (int j = 0; j < WS_NJOBS; j++) {
    case_begin("job %d (op %d) with no workspace above 64 bytes", j, ws_jobs[j].op);
    lik_ws_set_limit(64);
    unsigned char *o;
    size_t n;
    const lik_status st = ws_run(c, j, &o, &n);
    lik_ws_set_limit(SIZE_MAX);
    free(o);
    CHECK(st == LIK_ERR_ALLOC, "job %d: status %d, not LIK_ERR_ALLOC", j, (int)st);
    CHECK(strstr(lik_last_error(), "bytes") != NULL, "message names no size: %s", lik_last_error());
    CHECK(ws_matches(c, j), "job %d after the failure: not bitwise the fresh context's result", j);
  }
  lik_context_free(c);
  for (int j = 0; j < WS_NJOBS; j++) free(ws_ref[j]);
  group_end();
}

int main(void) {
  test_init("test_context");
  group_create_errors();
  group_paths();
  group_workspace_reuse();
  group_workspace_threads();
  group_workspace_alloc_fail();
  return test_finish("test_context");
}
