/* workspace.c — the host workspace of a context (workspace.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "context.h"
#include "workspace.h"

#if defined(__SANITIZE_ADDRESS__)
#define LIK_WS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LIK_WS_ASAN 1
#endif
#endif
#ifdef LIK_WS_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#endif

#define WS_ALIGN 64 /* a cache line: per-thread blocks share none */

/* The most a slot keeps between calls.  A call whose scratch is larger (the
 * unified backward's working copies, a retrieve over many queries) allocates
 * and frees it as before the workspace existed: its work dwarfs the
 * allocation, and memory held idle would add to the process's peak when the
 * caller's own allocations peak between calls (bench/RESULTS.md,
 * 2026-12-05). */
#define WS_KEEP ((size_t)8 << 20)

struct lik_ws_slot {
  lik_ws_arena a;
  atomic_int busy;
  lik_ws_slot *next; /* set before the slot is published, never changed */
};

static _Atomic size_t ws_limit = SIZE_MAX;

void lik_ws_set_limit(size_t bytes) { atomic_store(&ws_limit, bytes); }

void lik_ws_open(lik_ws *ws, lik_context *ctx) {
  _Atomic(lik_ws_slot *) *head = lik_context_ws(ctx ? ctx : lik_context_default());
  memset(&ws->own, 0, sizeof ws->own);
  lik_ws_slot *s = atomic_load_explicit(head, memory_order_acquire);
  for (; s; s = s->next)
    if (!atomic_load_explicit(&s->busy, memory_order_relaxed) &&
        !atomic_exchange_explicit(&s->busy, 1, memory_order_acquire))
      break;
  if (!s && (s = (lik_ws_slot *)calloc(1, sizeof *s)) != NULL) {
    atomic_init(&s->busy, 1);
    s->next = atomic_load_explicit(head, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(head, &s->next, s, memory_order_release,
                                                  memory_order_relaxed)) {
    }
  }
  ws->s = s;
  ws->a = s ? &s->a : &ws->own;
}

void lik_ws_close(lik_ws *ws) {
  lik_ws_arena *a = ws->a;
  while (a->extra) {
    void *next = *(void **)a->extra;
    free(a->extra);
    a->extra = next;
  }
  if (a->total > a->want && a->total <= WS_KEEP) a->want = a->total;
  if (!ws->s || a->cap > WS_KEEP || a->cap < a->want) { /* the next call makes one of want bytes */
    free(a->block);
    a->block = NULL;
    a->cap = 0;
  } else if (a->block) {
    ASAN_POISON_MEMORY_REGION(a->block, a->cap);
  }
  a->used = a->total = 0;
  if (ws->s) atomic_store_explicit(&ws->s->busy, 0, memory_order_release);
}

void *lik_ws_alloc(lik_ws *ws, size_t bytes) {
  lik_ws_arena *a = ws->a;
  if (bytes > atomic_load_explicit(&ws_limit, memory_order_relaxed) ||
      bytes > SIZE_MAX - 2 * WS_ALIGN)
    return NULL;
  const size_t b = ((bytes ? bytes : 1) + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1);
  if (a->used == 0 && a->cap < b) { /* nothing handed out of the block: replace it */
    free(a->block);
    a->cap = 0;
    size_t cap = a->want > b ? a->want : b;
    if (!(a->block = (char *)aligned_alloc(WS_ALIGN, cap)) && cap > b)
      a->block = (char *)aligned_alloc(WS_ALIGN, cap = b);
    if (a->block) {
      a->cap = cap;
      ASAN_POISON_MEMORY_REGION(a->block, cap);
    }
  }
  char *p;
  if (a->cap - a->used >= b) {
    p = a->block + a->used;
    a->used += b;
  } else { /* an extra block: a header of one line, then the buffer */
    char *e = (char *)aligned_alloc(WS_ALIGN, WS_ALIGN + b);
    if (!e) return NULL;
    *(void **)e = a->extra;
    a->extra = e;
    p = e + WS_ALIGN;
  }
  a->total = a->total > SIZE_MAX - b ? SIZE_MAX : a->total + b;
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
  return p;
}

void *lik_ws_array(lik_ws *ws, int64_t n, size_t elem, int zero) {
  size_t bytes;
  if (lik_bytes(n, elem, &bytes)) return NULL;
  void *p = lik_ws_alloc(ws, bytes);
  if (p && zero) memset(p, 0, bytes);
  return p;
}

char *lik_ws_blocks(lik_ws *ws, int64_t n, size_t bytes, size_t *stride) {
  if (bytes > SIZE_MAX - WS_ALIGN) return NULL;
  *stride = ((bytes ? bytes : 1) + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1);
  size_t all;
  if (lik_bytes(n, *stride, &all)) return NULL;
  char *base = (char *)lik_ws_alloc(ws, all);
  if (base) { /* the tail of each block poisoned: an overflow into the next is reported */
    ASAN_POISON_MEMORY_REGION(base, all);
    for (int64_t t = 0; t < n; t++) ASAN_UNPOISON_MEMORY_REGION(base + (size_t)t * *stride, bytes);
  }
  return base;
}

void lik_ws_free_slots(lik_ws_slot *s) {
  while (s) {
    lik_ws_slot *next = s->next;
    free(s->a.block);
    free(s);
    s = next;
  }
}
