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

/* ---- merging top-k lists ---------------------------------------------------
 *
 * lik_topk_merge — the global top-k of R sorted candidate lists per query,
 * under lik_retrieve's order.  What a sharded search does after every shard
 * has run lik_retrieve on its part of the corpus: lik.distributed.retrieve
 * calls it on the all-gathered [world, Nq, K] candidates, and an RPC server
 * can call it on the shards' answers stacked into one [R, Nq, K] view.
 *
 *   scores   F32 [R, Nq, K], any strides: list r of query q is
 *            scores[r, q, 0 .. n(r, q)), n(r, q) = lengths[r, q] (K without
 *            lengths).  Entries past n(r, q) are never read (padding may hold
 *            anything).
 *   indices  I64 [R, Nq, K], any strides: the candidates' ids, compared as
 *            given (for shards, the caller maps shard-local document indices
 *            to global ids first: local index + the shard's first global id).
 *   lengths  NULL or I64 [R, Nq], any strides (stride 0 over Nq gives one
 *            length per list r), 0 <= lengths[r, q] <= K.
 *   top_k    >= 1; every query must have at least top_k candidates in all
 *            (sum over r of n(r, q) >= top_k), else LIK_ERR_VALUE naming the
 *            query and the count: fewer results are never written silently.
 *   opts     NULL or options; num_threads (and the context's thread count)
 *            split the queries; the result does not depend on it.
 *   out_scores   F32 [Nq, top_k]; out_indices I64 [Nq, top_k]; any
 *            non-overlapping strides, not overlapping the inputs.
 *
 * Order (lik_retrieve's, on input and output): score descending; NaN ranks
 * below every number; equal scores (-0 == +0, NaN == NaN) put the lower id
 * first.  Each list must be strictly sorted under it (no id twice in one
 * list), else LIK_ERR_VALUE naming the list, the query and the two entries.
 * An id present in two lists is not deduplicated: both entries compete, the
 * lower list first.  So when each list is a shard's exact lik_retrieve top-k
 * (k_r = min(top_k, shard size) entries, ids offset to global) over
 * contiguous shards, the result equals lik_retrieve on the whole corpus,
 * bitwise, ties included.
 *
 * Nq = 0 writes nothing.  Errors: LIK_ERR_NULL, LIK_ERR_SHAPE (ndim, shapes
 * of indices / lengths / outputs, stride-0 outputs), LIK_ERR_DTYPE,
 * LIK_ERR_VALUE (top_k <= 0, a length outside [0, K], an unsorted list, fewer
 * than top_k candidates), LIK_ERR_DEVICE (mixed devices), LIK_ERR_UNSUPPORTED
 * (CUDA tensors: the merge runs on the host; the candidates are small, copy
 * them), LIK_ERR_ALLOC.
 */
LIK_API lik_status lik_topk_merge(const lik_tensor *scores, const lik_tensor *indices,
                                  const lik_tensor *lengths, int64_t top_k,
                                  const lik_options *opts, lik_tensor *out_scores,
                                  lik_tensor *out_indices);

#ifdef __cplusplus
}
#endif

#endif /* LIK_EXPERIMENTAL_H */
