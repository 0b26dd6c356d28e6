/*
 * workspace.h — the host workspace of a context: the scratch of every CPU op,
 * kept in the lik_context and reused, so a warm call allocates nothing.
 *
 * A context holds a list of arenas ("slots").  A call opens a workspace
 * (lik_ws_open): it takes a free slot — an atomic flag per slot, no lock —
 * or, when every slot is busy, adds one to the list, so the context keeps as
 * many slots as calls ever ran on it at once (nested calls included: the
 * threads of a fused-head forward each run the forward driver).  The call
 * carves its buffers from the slot's block (lik_ws_alloc / _array /
 * _blocks: 64-byte aligned, uninitialised unless asked) before it starts its
 * threads, and lik_ws_close gives them all back at its end.  A slot's block
 * is reused as long as it holds the whole call; a call that needs more gets
 * the rest as extra blocks freed at close, and the slot's next call makes one
 * block of the largest total seen, up to 8 MiB (WS_KEEP): a block above it
 * is freed at close, so a large call (unified backward copies, a wide
 * retrieve) allocates as it did before, its work dwarfing the allocation,
 * and memory held between calls never exceeds 8 MiB a slot.  So a context
 * concurrently used by several threads stays safe (each call owns its slot),
 * small and medium calls allocate nothing once warm, and a process's peak
 * memory is unchanged within 8 MiB a slot.  lik_context_free releases it;
 * the default context's lives with the process.
 *
 * Under AddressSanitizer the unused bytes of a block are poisoned, so an
 * overflow from one buffer into the next is reported as with malloc.
 */
#ifndef LIK_CORE_WORKSPACE_H
#define LIK_CORE_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "lik.h"

typedef struct lik_ws_slot lik_ws_slot;

/* An arena: block (cap bytes, used of them handed out in this call), the
 * call's extra blocks, the bytes the call asked for (total) and the block
 * size its next call makes (want: the largest total seen). */
typedef struct {
  char *block;
  size_t cap, used, total, want;
  void *extra;
} lik_ws_arena;

/* One call's workspace, on the caller's stack between lik_ws_open and
 * lik_ws_close (never copied: a points into it when no slot could be made). */
typedef struct {
  lik_ws_arena *a;
  lik_ws_slot *s; /* NULL: a == &own */
  lik_ws_arena own;
} lik_ws;

/* Takes a slot of ctx (the call's resolved context; NULL: the default
 * context's) for this call.  Cannot fail: without memory for a new slot,
 * the call's buffers are its own, freed at close. */
void lik_ws_open(lik_ws *ws, lik_context *ctx);

/* Gives back every buffer of the call and the slot. */
void lik_ws_close(lik_ws *ws);

/* bytes (0 counts as 1), 64-byte aligned, uninitialised; NULL when out of
 * memory (the caller fails with LIK_ERR_ALLOC naming the sizes). */
void *lik_ws_alloc(lik_ws *ws, size_t bytes);

/* n elements of elem bytes (zero: set to 0); NULL when n < 0, the size does
 * not fit or memory is out. */
void *lik_ws_array(lik_ws *ws, int64_t n, size_t elem, int zero);

/* n blocks of bytes each, one per worker thread: block t at base + t *
 * *stride, every block 64-byte aligned and on cache lines of its own; NULL
 * when the size does not fit or memory is out. */
char *lik_ws_blocks(lik_ws *ws, int64_t n, size_t bytes, size_t *stride);

/* The head of ctx's slot list (context.c; declared here, not in context.h,
 * which CUDA's C++ includes). */
_Atomic(lik_ws_slot *) *lik_context_ws(lik_context *ctx);

/* A context's slot list: frees every slot (none may be in use). */
void lik_ws_free_slots(lik_ws_slot *head);

/* Tests only: a request above bytes fails as if memory were out (SIZE_MAX:
 * no limit, the default).  Process-wide. */
void lik_ws_set_limit(size_t bytes);

#endif /* LIK_CORE_WORKSPACE_H */
