/*
 * lik_experimental.h — the part of lik's C API that may still change between
 * minor versions.  Conventions (views, status + lik_last_error, outputs,
 * threads, devices) are those of lik.h.
 */
#ifndef LIK_EXPERIMENTAL_H
#define LIK_EXPERIMENTAL_H

#include "lik.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- context ----------------------------------------------------------------
 *
 * A lik_context (lik.h) resolves once what every call would otherwise read of
 * its environment, and keeps per-device state of the backends (the CUDA
 * backend caches device properties, function attributes and occupancy there,
 * so a warm call makes no query).  Pass it in lik_options.context; NULL
 * selects the default context.  A context may be used by many threads at
 * once; free it only when no call that uses it is running.
 */

/* CUDA features a context can turn off (they exist to compare kernel
 * families in tests; results agree, speeds differ; docs/cuda.md). */
#define LIK_CUDA_NO_WGMMA 1u /* sm_90a wgmma kernels -> mma.sync kernels        */
#define LIK_CUDA_NO_SPLIT 2u /* Ld split over thread-block clusters              */
#define LIK_CUDA_NO_BULK 4u  /* TMA / bulk-copy document tiles -> cp.async       */
#define LIK_CUDA_NO_ALL 7u

typedef struct lik_context_options {
  int num_threads;     /* CPU threads for calls whose options say 0; 0 =
                          $LIK_NUM_THREADS, else the online cores            */
  const char *cpu_isa; /* "portable", "avx2" or "avx512" (a path the CPU
                          cannot run falls back to the best it can); NULL =
                          $LIK_CPU_ISA, else the best                        */
  unsigned cuda_off;   /* LIK_CUDA_NO_* bits, OR'ed with those the
                          environment turns off (LIK_CUDA_WGMMA=0, ...)      */
} lik_context_options;

/* Creates a context.  options NULL (or zero-initialised) gives a context
 * equal to the default one.  *out receives it (NULL on failure).
 * Errors: LIK_ERR_NULL (out), LIK_ERR_VALUE (num_threads < 0, unknown
 * cpu_isa name, unknown cuda_off bits), LIK_ERR_ALLOC. */
LIK_API lik_status lik_context_create(const lik_context_options *options,
                                      lik_context **out);

/* Frees a context made by lik_context_create; NULL is a no-op. */
LIK_API void lik_context_free(lik_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* LIK_EXPERIMENTAL_H */
