/*
 * context.h — the library's context (lik_context, lik_experimental.h): what a
 * call reads of its environment, resolved once.  A context holds the thread
 * count, the CPU kernel path asked for, the CUDA switches and, per backend, a
 * lazily created state (the CUDA backend keeps device properties and kernel
 * attributes there, so a warm call queries nothing) and the host workspace
 * of the CPU ops (workspace.h: scratch reused across calls).
 *
 * The default context (opts->context == NULL) is created on first use from
 * the environment: LIK_NUM_THREADS, LIK_CPU_ISA, LIK_CUDA_WGMMA / _SPLIT /
 * _BULK / _BW_SPARSE (=0 turns a feature off).  It lives as long as the process.
 */
#ifndef LIK_CORE_CONTEXT_H
#define LIK_CORE_CONTEXT_H

#include "lik_experimental.h"

/* The default context (never NULL). */
lik_context *lik_context_default(void);

/* The context of a call: opts->context, else the default. */
lik_context *lik_context_of(const lik_options *opts);

/* CPU path asked for: 0 portable, 1 avx2 / neon, 2 avx512 / sve, 3 the best
 * the CPU runs. */
int lik_context_cpu_level(const lik_context *ctx);

/* LIK_CUDA_NO_* bits of the features turned off. */
unsigned lik_context_cuda_off(const lik_context *ctx);

/* A backend's state in ctx, created by create() on first use (once, also
 * under concurrent first calls; NULL if create() returned NULL, then tried
 * again next call) and released by destroy() when the context is freed. */
void *lik_context_backend_state(lik_context *ctx, void *(*create)(void),
                                void (*destroy)(void *));

/* A context from validated options (NULL: as the default); NULL when out of
 * memory.  lik_context_delete releases it (its backend state and its
 * workspace: no call may be using it); the
 * default context is never released. */
lik_context *lik_context_new(const lik_context_options *options);
void lik_context_delete(lik_context *ctx);

/* "portable" -> 0; x86: "avx2" / "avx512" -> 1 / 2; aarch64: "neon" / "sve"
 * -> 1 / 2; the other architecture's names -> 3 (the best available);
 * anything else (NULL too): -1. */
int lik_isa_level(const char *name);

#endif /* LIK_CORE_CONTEXT_H */
