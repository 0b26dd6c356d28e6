/* context.c — lik_context: resolution of the options, the default context,
 * backend state slots, the host workspace's slots. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "context.h"
#include "workspace.h"

struct lik_context {
  int num_threads;     /* >= 1 */
  int cpu_level;       /* 0 .. 3 */
  unsigned cuda_off;   /* LIK_CUDA_NO_* */
  _Atomic(void *) backend;       /* one backend state (CUDA) */
  void (*backend_destroy)(void *);
  pthread_mutex_t lock;          /* creation of the backend state */
  _Atomic(lik_ws_slot *) ws;     /* the host workspace's slots (workspace.h) */
};

static int env_threads(void) {
  const char *env = getenv("LIK_NUM_THREADS");
  if (env) {
    const long n = strtol(env, NULL, 10);
    if (n > 0 && n <= 4096) return (int)n;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* A path of the other architecture is a known name no CPU here runs: like
 * avx512 on an AVX2-only CPU, it leaves the best available path (level 3,
 * which dispatch.c lowers to the best). */
int lik_isa_level(const char *name) {
  if (!name) return -1;
  if (!strcmp(name, "portable")) return 0;
#if defined(__aarch64__) || defined(_M_ARM64)
  if (!strcmp(name, "neon")) return 1;
  if (!strcmp(name, "sve")) return 2;
  if (!strcmp(name, "avx2") || !strcmp(name, "avx512")) return 3;
#else
  if (!strcmp(name, "avx2")) return 1;
  if (!strcmp(name, "avx512")) return 2;
  if (!strcmp(name, "neon") || !strcmp(name, "sve")) return 3;
#endif
  return -1;
}

static unsigned env_cuda_off(void) {
  static const struct { const char *name; unsigned bit; } vars[] = {
      {"LIK_CUDA_WGMMA", LIK_CUDA_NO_WGMMA},
      {"LIK_CUDA_SPLIT", LIK_CUDA_NO_SPLIT},
      {"LIK_CUDA_BULK", LIK_CUDA_NO_BULK},
      {"LIK_CUDA_BW_SPARSE", LIK_CUDA_NO_BW_SPARSE},
      {"LIK_CUDA_BW_BUCKETS", LIK_CUDA_NO_BW_BUCKETS},
      {"LIK_CUDA_POOL", LIK_CUDA_NO_POOL},
      {"LIK_CUDA_BW_RANGES", LIK_CUDA_NO_BW_RANGES}};
  unsigned off = 0;
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *env = getenv(vars[i].name);
    if (env && !strcmp(env, "0")) off |= vars[i].bit;
  }
  return off;
}

static void init(lik_context *c, const lik_context_options *o) {
  memset(c, 0, sizeof *c);
  c->num_threads = o && o->num_threads > 0 ? o->num_threads : env_threads();
  int level = o && o->cpu_isa ? lik_isa_level(o->cpu_isa) : lik_isa_level(getenv("LIK_CPU_ISA"));
  c->cpu_level = level >= 0 ? level : 3;
  c->cuda_off = env_cuda_off() | (o ? o->cuda_off : 0);
  atomic_init(&c->backend, NULL);
  atomic_init(&c->ws, NULL);
  pthread_mutex_init(&c->lock, NULL);
}

static lik_context default_ctx;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void init_default(void) { init(&default_ctx, NULL); }

lik_context *lik_context_default(void) {
  pthread_once(&default_once, init_default);
  return &default_ctx;
}

lik_context *lik_context_of(const lik_options *opts) {
  return opts && opts->context ? opts->context : lik_context_default();
}

void lik_call_from(lik_call *c, const lik_options *opts) {
  c->context = lik_context_of(opts);
  c->stream = opts ? opts->stream : NULL;
  c->threads = opts && opts->num_threads > 0 ? opts->num_threads : c->context->num_threads;
  c->normalize = opts ? opts->normalize != 0 : 0;
  c->tf32 = opts && opts->fp32_precision == LIK_FP32_TF32;
}

int lik_context_cpu_level(const lik_context *ctx) { return ctx->cpu_level; }
unsigned lik_context_cuda_off(const lik_context *ctx) { return ctx->cuda_off; }
_Atomic(lik_ws_slot *) *lik_context_ws(lik_context *ctx) { return &ctx->ws; }

void *lik_context_backend_state(lik_context *ctx, void *(*create)(void),
                                void (*destroy)(void *)) {
  void *s = atomic_load_explicit(&ctx->backend, memory_order_acquire);
  if (s) return s;
  pthread_mutex_lock(&ctx->lock);
  s = atomic_load_explicit(&ctx->backend, memory_order_acquire);
  if (!s && (s = create()) != NULL) {
    ctx->backend_destroy = destroy;
    atomic_store_explicit(&ctx->backend, s, memory_order_release);
  }
  pthread_mutex_unlock(&ctx->lock);
  return s;
}

lik_context *lik_context_new(const lik_context_options *options) {
  lik_context *c = (lik_context *)malloc(sizeof *c);
  if (c) init(c, options);
  return c;
}

void lik_context_delete(lik_context *ctx) {
  if (!ctx || ctx == &default_ctx) return;
  void *s = atomic_load(&ctx->backend);
  if (s && ctx->backend_destroy) ctx->backend_destroy(s);
  lik_ws_free_slots(atomic_load(&ctx->ws));
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
}
