/*
 * lik_experimental.h — the part of lik's C API that may still change between
 * minor versions.  Conventions (views, status + lik_last_error, outputs,
 * threads, devices) are those of lik.h.
 *
 * ---- compressed late interaction (PLAID / ColBERTv2 residual codec) ----
 *
 * The codec (ColBERTv2, Santhanam et al. 2022; as written by ColBERT's
 * colbert/indexing/codecs/residual.py and fast-plaid's rust/index/create.rs):
 *
 * - centroids [n_centroids, d]: k-means centroids (ColBERT L2-normalises them
 *   and stores fp16).  A token x is coded by the centroid of highest inner
 *   product <x, c> (fp32; ties go to the lowest centroid index).
 * - residual r = x - c[code] (fp32), each dimension quantised to nbits bits:
 *   bucket(v) = the number of bucket_cutoffs strictly below v (torch.bucketize
 *   with right=False, numpy.searchsorted side="left"), 0 .. 2^nbits - 1.
 * - bucket_cutoffs [2^nbits - 1] and bucket_weights [2^nbits] are quantiles of
 *   all residual values of a sample pooled over dimensions, at i / 2^nbits
 *   (i = 1 .. 2^nbits - 1) and (i + 0.5) / 2^nbits (i = 0 .. 2^nbits - 1),
 *   linearly interpolated (lik_codec_train).
 * - decoding: x_hat[k] = c[code][k] + bucket_weights[bucket_k] in fp32, then,
 *   with normalize, x_hat / max(||x_hat||, 1e-12) (a zero vector stays 0).
 *
 * Residual bytes (nbits in {1, 2, 4, 8}; d * nbits must be a multiple of 8;
 * each token has d * nbits / 8 bytes; byte p holds dimensions
 * p * (8 / nbits) .. (p + 1) * (8 / nbits) - 1):
 *
 * - LIK_RESIDUAL_COLBERT (what ColBERTv2, fast-plaid and PyLate indexes hold):
 *   every dimension writes its bucket index least-significant bit first into
 *   one bit stream, packed most-significant bit first into bytes (numpy's
 *   packbits).  The earliest dimension of a byte sits in its top field, each
 *   field bit-reversed.
 * - LIK_RESIDUAL_LIK (the order of the seed system, late-interaction-kernels):
 *   dimension i of a byte is the field (byte >> (i * nbits)) & (2^nbits - 1).
 *   A LIK byte is the 8-bit reversal of the COLBERT byte with the same
 *   content.
 *
 * Devices: lik_codec_train and lik_codec_compress run on the CPU
 * (LIK_ERR_UNSUPPORTED for CUDA tensors); decompress and the scoring calls
 * run on either.  On CUDA, codes, doc_lengths and cu_seqlens_d are device
 * data that the library does not read on the host (that would synchronise):
 * the caller guarantees their values (the Python front checks a host copy),
 * and the kernels skip a token whose code is out of range rather than read
 * outside the centroid table.
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

/* ---- compressed late interaction ---------------------------------------------- */

/* Bit order of the packed residual bytes (see above). */
typedef enum lik_residual_layout {
  LIK_RESIDUAL_COLBERT = 0,
  LIK_RESIDUAL_LIK = 1
} lik_residual_layout;

/* A residual codec.  The tensors are views (any strides) on the device of
 * the call; each call names the members it needs, the others may be NULL. */
typedef struct lik_codec {
  const lik_tensor *centroids;      /* [n_centroids, d] F32, F16 or BF16   */
  const lik_tensor *bucket_cutoffs; /* [2^nbits - 1] F32, F16 or BF16      */
  const lik_tensor *bucket_weights; /* [2^nbits] F32, F16 or BF16          */
  int nbits;                        /* 1, 2, 4 or 8                        */
  lik_residual_layout layout;
} lik_codec;

/* lik_codec_train — bucket_cutoffs and bucket_weights from a residual sample.
 *
 *   residuals       any shape (1 to 4 dims), F32/F16/BF16/F64, CPU: every
 *                   value is pooled (read as fp32, as ColBERT does).
 *   nbits           1, 2, 4 or 8.
 *   bucket_cutoffs  F32 [2^nbits - 1]: the quantile at i / 2^nbits of the
 *                   sorted values (i = 1 ..), linear interpolation between
 *                   the two nearest ranks (numpy / torch "linear"), in fp64.
 *   bucket_weights  F32 [2^nbits]: the quantile at (i + 0.5) / 2^nbits.
 * Errors: LIK_ERR_VALUE (nbits, an empty sample, a NaN or infinite value,
 * naming its index), LIK_ERR_SHAPE / LIK_ERR_DTYPE (outputs), LIK_ERR_ALLOC,
 * LIK_ERR_UNSUPPORTED (CUDA tensors).
 */
LIK_API lik_status lik_codec_train(const lik_tensor *residuals, int nbits,
                                   lik_tensor *bucket_cutoffs, lik_tensor *bucket_weights);

/* lik_codec_compress — codes and packed residuals of embeddings (CPU).
 *
 *   codec      centroids [C, d] and bucket_cutoffs [2^nbits - 1], nbits, layout.
 *   X          [T, d] F32/F16/BF16/F64, any strides (not normalised here:
 *              ColBERT's embeddings already are).
 *   opts       NULL or options (num_threads).
 *   codes      I32 or I64 [T]: the centroid of highest <x, c>, lowest index
 *              on ties.
 *   residuals  U8 [T, d * nbits / 8].
 * Errors: LIK_ERR_VALUE (nbits; d * nbits not a multiple of 8; C = 0 with
 * T > 0; a token with no finite inner product, e.g. NaN, naming the token),
 * LIK_ERR_SHAPE, LIK_ERR_DTYPE, LIK_ERR_ALLOC, LIK_ERR_UNSUPPORTED (CUDA).
 */
LIK_API lik_status lik_codec_compress(const lik_codec *codec, const lik_tensor *X,
                                      const lik_options *opts, lik_tensor *codes,
                                      lik_tensor *residuals);

/* lik_codec_decompress — decoded embeddings x_hat (see above).
 *
 *   codec      centroids [C, d] and bucket_weights [2^nbits], nbits, layout.
 *   codes      I32 or I64 [T], each in [0, C) (LIK_ERR_VALUE naming the
 *              entry; on CUDA guaranteed by the caller).
 *   residuals  U8 [T, d * nbits / 8].
 *   opts       normalize (0: c + w, 1: L2-normalised), num_threads, stream.
 *   out        [T, d] F32, F16, BF16 or F64 (computed in fp32, then rounded
 *              to nearest even), any non-overlapping strides.
 */
LIK_API lik_status lik_codec_decompress(const lik_codec *codec, const lik_tensor *codes,
                                        const lik_tensor *residuals, const lik_options *opts,
                                        lik_tensor *out);

/* lik_maxsim_residual — MaxSim of queries against compressed documents,
 * decoded on the fly (never a dense [Nd, Ld, d] tensor):
 *
 *   score[i, j] = sum_s max_{t < len_j} <q_hat[i, s], x_hat[j, t]>
 *
 * with q_hat = q / max(||q||, 1e-12) and x_hat normalised as in decompress
 * when opts->normalize (PLAID's convention; raw q and c + w otherwise).
 *
 *   Q            [Nq, Lq, d] or [Lq, d] (Nq = 1, dim dropped), F32/F16/BF16/F64
 *                (computed in fp32).
 *   codec        centroids [C, d], bucket_weights [2^nbits], nbits, layout.
 *   codes        [Nd, Ld] I32/I64; entries past a document's length are
 *                never read (padding may hold anything).
 *   residuals    U8 [Nd, Ld, d * nbits / 8].
 *   doc_lengths  [Nd] I32/I64, each in [0, Ld].
 *   opts         normalize, num_threads, stream.
 *   scores       F32 [Nq, Nd] ([Nd] for 2-D Q).  An empty document scores 0.
 *   argmax       NULL or I32 scores.shape + [Lq]: the winning token of the
 *                document per query token, lowest index on ties, -1 for an
 *                empty document.  A NaN similarity never wins.
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE (d of Q / centroids, residual width !=
 * d * nbits / 8, batch sizes, outputs), LIK_ERR_DTYPE, LIK_ERR_VALUE (nbits,
 * a length outside [0, Ld], a code outside [0, C), naming the entry),
 * LIK_ERR_DEVICE, LIK_ERR_ALLOC, LIK_ERR_UNSUPPORTED, LIK_ERR_CUDA.
 */
LIK_API lik_status lik_maxsim_residual(const lik_tensor *Q, const lik_codec *codec,
                                       const lik_tensor *codes, const lik_tensor *residuals,
                                       const lik_tensor *doc_lengths, const lik_options *opts,
                                       lik_tensor *scores, lik_tensor *argmax);

/* lik_maxsim_residual_varlen — lik_maxsim_residual on packed documents
 * (the layout of a ColBERT / fast-plaid index: document j is tokens
 * cu_seqlens_d[j] .. cu_seqlens_d[j+1]-1).
 *
 *   codes         [T] I32/I64, each in [0, C).
 *   residuals     U8 [T, d * nbits / 8].
 *   cu_seqlens_d  [Nd + 1] I32/I64: starts at 0, non-decreasing, last == T.
 *   Q, codec, opts, scores, argmax as lik_maxsim_residual.
 */
LIK_API lik_status lik_maxsim_residual_varlen(const lik_tensor *Q, const lik_codec *codec,
                                              const lik_tensor *codes,
                                              const lik_tensor *residuals,
                                              const lik_tensor *cu_seqlens_d,
                                              const lik_options *opts, lik_tensor *scores,
                                              lik_tensor *argmax);

/* lik_plaid_approx_score — PLAID's centroid-interaction score (the IVF
 * pruning step): every token stands for its centroid.
 *
 *   score[i, j] = sum_s max_{t in document j} centroid_scores[i, s, codes[t]]
 *
 *   centroid_scores  [Nq, Lq, C] or [Lq, C] F32/F16/BF16 (e.g. Q @ centroids^T).
 *   codes            [T] I32/I64, each in [0, C).
 *   cu_seqlens_d     [Nd + 1] I32/I64 (as lik_maxsim_residual_varlen).
 *   opts             num_threads, stream.
 *   scores           F32 [Nq, Nd] ([Nd] for 2-D centroid_scores).  An empty
 *                    document scores 0; a NaN score never wins a max.
 */
LIK_API lik_status lik_plaid_approx_score(const lik_tensor *centroid_scores,
                                          const lik_tensor *codes,
                                          const lik_tensor *cu_seqlens_d,
                                          const lik_options *opts, lik_tensor *scores);

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
