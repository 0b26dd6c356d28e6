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
 * Devices: lik_codec_train runs on the CPU (LIK_ERR_UNSUPPORTED for CUDA
 * tensors); compress, decompress and the scoring calls run on either.  On
 * CUDA, codes, doc_lengths and cu_seqlens_d are device data that the
 * library does not read on the host (that would synchronise):
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
 * so a warm call makes no query), and the host workspace of the CPU calls:
 * their scratch, kept and reused, so a warm call allocates nothing (each
 * running call has an arena of its own; the context keeps as many as calls
 * ever ran on it at once, each at most 8 MiB between calls; larger scratch
 * is allocated per call).  The CUDA calls' scratch comes from lik's
 * stream-ordered pool of the device, one per device for the process
 * (cudaMallocFromPoolAsync on the call's stream, made on first use, kept
 * for the process; it keeps up to 256 MiB reserved across
 * synchronisations, returning what is above; captured in a CUDA graph the
 * allocations are the graph's memory nodes).  Pass it in
 * lik_options.context; NULL selects the default context, whose workspace
 * lives as long as the process.  A context may be used by many threads at
 * once; free it only when no call that uses it is running
 * (lik_context_free releases its workspace).
 */

/* CUDA features a context can turn off (they exist to compare kernel
 * families in tests; results agree, speeds differ; docs/cuda.md). */
#define LIK_CUDA_NO_WGMMA 1u /* sm_90a wgmma kernels -> mma.sync kernels        */
#define LIK_CUDA_NO_SPLIT 2u /* Ld split over thread-block clusters              */
#define LIK_CUDA_NO_BULK 4u  /* TMA / bulk-copy document tiles -> cp.async       */
#define LIK_CUDA_NO_BW_SPARSE 8u /* backward: grad_D's CTA-per-document kernel ->
                                    the buckets or tiles (same bits) */
#define LIK_CUDA_NO_BW_BUCKETS 16u /* backward: grad_D's buckets (the argmax
                                      transposed) -> the tiles of document rows
                                      (same bits) */
#define LIK_CUDA_NO_POOL 32u /* scratch from the device's default pool
                                (cudaMallocAsync) instead of lik's own
                                (bench/cuda_pool.py reads the default
                                pool's high-water mark) */
#define LIK_CUDA_NO_BW_RANGES 64u /* backward: grad_D by row ranges (a CTA per
                                     range of document rows, its buckets in
                                     shared memory) -> the buckets or tiles
                                     (same bits) */
#define LIK_CUDA_NO_ALL 127u

typedef struct lik_context_options {
  int num_threads;     /* CPU threads for calls whose options say 0; 0 =
                          $LIK_NUM_THREADS, else the online cores            */
  const char *cpu_isa; /* "portable", "avx2", "avx512" (x86-64), "neon" or
                          "sve" (aarch64); a path the CPU cannot run falls
                          back to the best it can; NULL = $LIK_CPU_ISA, else
                          the best                                            */
  unsigned cuda_off;   /* LIK_CUDA_NO_* bits, OR'ed with those the
                          environment turns off (LIK_CUDA_WGMMA=0,
                          LIK_CUDA_SPLIT=0, LIK_CUDA_BULK=0,
                          LIK_CUDA_BW_SPARSE=0, LIK_CUDA_BW_BUCKETS=0,
                          LIK_CUDA_POOL=0, LIK_CUDA_BW_RANGES=0:
                          read once, when the
                          context is made)                                   */
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

/* lik_codec_compress — codes and packed residuals of embeddings (CPU or CUDA).
 *
 *   codec      centroids [C, d] and bucket_cutoffs [2^nbits - 1], nbits, layout.
 *   X          [T, d] F32/F16/BF16/F64, any strides (not normalised here:
 *              ColBERT's embeddings already are).
 *   opts       NULL or options (num_threads; CUDA: stream).
 *   codes      I32 or I64 [T]: the centroid of highest <x, c>, lowest index
 *              on ties; <x, c> is one fp32 FMA chain over k ascending from
 *              +0 of the values widened to fp32 (both devices: the same
 *              codes, bit for bit, as long as the CPU runs an FMA path —
 *              AVX2, AVX-512, NEON, SVE; LIK_CPU_ISA=portable rounds mul +
 *              add); a NaN score never wins.
 *   residuals  U8 [T, d * nbits / 8]: dimension k's bucket is the number of
 *              cutoffs (as fp32) strictly below x_k - c_k (fp32).
 * On CUDA (every tensor on one device) the call runs on opts->stream without
 * synchronising the host, and takes stream-ordered device scratch of
 * 4 + 8 * splits bytes a token (splits of the centroids: 1 when T >= 512 *
 * the SM count, else about 4 * SMs / ceil(T / 128), at most ceil(C / 128)).
 * A token with no finite inner product (all NaN or -inf) gets code -1
 * there, its residual bytes not written (the CPU's LIK_ERR_VALUE cannot be
 * returned without a sync).
 * Errors: LIK_ERR_VALUE (nbits; d * nbits not a multiple of 8; C = 0 with
 * T > 0; CPU: a token with no finite inner product, e.g. NaN, naming the
 * token), LIK_ERR_SHAPE, LIK_ERR_DTYPE, LIK_ERR_ALLOC (host or device
 * scratch), LIK_ERR_UNSUPPORTED (CUDA tensors in a build without CUDA),
 * LIK_ERR_CUDA (a launch).
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
 *                (computed in fp32; on CUDA an F16 / BF16 Q, and an F32 / F64
 *                one whose d needs more shared memory than the device has
 *                for fp32 tiles (d > 1088 on an H100 / H200), multiply on fp16
 *                tensor cores under normalize, bf16 without, with fp32 sums;
 *                opts->fp32_precision = LIK_FP32_TF32 lets an fp32 Q's tiles
 *                take one TF32 product).
 *   codec        centroids [C, d], bucket_weights [2^nbits], nbits, layout.
 *   codes        [Nd, Ld] I32/I64; entries past a document's length are
 *                never read (padding may hold anything).
 *   residuals    U8 [Nd, Ld, d * nbits / 8].
 *   doc_lengths  [Nd] I32/I64, each in [0, Ld].
 *   opts         normalize, num_threads, stream, fp32_precision.
 *   scores       F32 [Nq, Nd] ([Nd] for 2-D Q).  An empty document scores 0.
 *   argmax       NULL or I32 scores.shape + [Lq]: the winning token of the
 *                document per query token, lowest index on ties, -1 for an
 *                empty document.  A NaN similarity never wins, and (unlike
 *                lik_maxsim) neither does -inf: a query token whose tokens
 *                all score -inf or NaN adds 0 (argmax -1).
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE (d of Q / centroids, residual width !=
 * d * nbits / 8, batch sizes, outputs), LIK_ERR_DTYPE, LIK_ERR_VALUE (nbits,
 * a length outside [0, Ld], a code outside [0, C), naming the entry; an
 * opts->fp32_precision other than the two values; opts->q_lengths or
 * d_lengths set), LIK_ERR_DEVICE, LIK_ERR_ALLOC, LIK_ERR_UNSUPPORTED,
 * LIK_ERR_CUDA.
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

/* ---- low-bit MaxSim: int8, fp8 and binary embeddings ----------------------
 *
 * Fewer bytes per token for inference (scores only, no argmax, no gradient).
 * Layouts are those of lik_maxsim's cross product: Q [Nq, Lq, .] or [Lq, .],
 * D [Nd, Ld, .] or [Ld, .], masks [Nq, Lq] / [Nd, Ld] (BOOL or U8; a masked
 * token is never read, so it may hold anything), scores F32 [Nq, Nd] with the
 * dims of 2-D inputs dropped; Nq, Nd = 0 give an empty result, a query token
 * with no valid document token contributes 0.
 *
 * Scales (F32) are per tensor (a 0-d view) or per token (the shape of the
 * tensor minus its last dimension, i.e. the mask's shape).  Every scored
 * similarity is
 *
 *   int8, fp8      sim(s, t) = |scale_Q[s]| * (scale_D[t] * dot(s, t)),
 *                  with query token s's values negated (exactly) where
 *                  scale_Q[s] is negative (its sign bit set), so that the
 *                  query scale leaves the max: a query token adds
 *                  |scale_Q[s]| * max_t (scale_D[t] * dot(s, t)), two fp32
 *                  products in that order (one product per token pair in
 *                  the kernels);
 *                  dot: int8, the exact integer sum of q_k * d_k, converted
 *                  to fp32 (a -128 in Q is read as -127; lik_quantize_int8
 *                  never writes it); fp8, the fp32 sum of the exact products
 *                  of the fp8 values (e4m3 / e5m2 products are exact in fp32)
 *                  in ascending k on the CPU, in the tensor core's order on
 *                  CUDA; on sm_90, several queries with 64 < d <= 128 and
 *                  Lq <= 256, documents in 16-byte aligned rows, run on
 *                  wgmma (unless the context turns wgmma or TMA off), whose
 *                  fp8 accumulation keeps fewer bits than fp32 (partial sums
 *                  truncated: up to 1.3e-4 of sum_k |q_k d_k| scale_Q
 *                  scale_D below, measured).
 *   int8 Q, bits D sim(s, t) = scale_Q[s] * sum_k q_k * b_k,  b_k = +1 if bit
 *                  k of the document token is set, else -1 (exact integer).
 *   bits Q, bits D sim(s, t) = d - 2 * popcount(q_bits XOR d_bits)
 *                  = sum_k a_k * b_k with a, b in {-1, +1}: an integer in
 *                  [-d, d], not scaled.
 *
 * and score[i, j] = sum over valid s (ascending, fp32) of the max over valid
 * t of sim (a NaN similarity never wins, as in lik_maxsim; a query token
 * none of whose similarities exceeds -inf contributes 0).  For int8 and fp8
 * that term is r = |scale_Q[s]| * m, m the max over valid t of scale_D[t] *
 * dot (NaN never wins; -inf if none), and r is added where r > -inf (so a
 * NaN scale_Q, or 0 * inf, adds 0).
 *
 * Binary tokens (lik_quantize_binary): U8 [..., ceil(d / 8)]; dimension k is
 * bit (7 - k % 8) of byte k / 8, most significant bit first (the order of
 * numpy.packbits(x > 0, axis=-1)); the bits past d in the last byte are
 * ignored.
 *
 * Devices: the quantisers run on the CPU and on CUDA (where X is, on
 * opts->stream; one thread per token on CUDA, each fp32 operation rounded on
 * its own, so values, bits and scales are bitwise those of the x86-64 CPU
 * build).  The MaxSim calls run on the CPU (AVX-512 VNNI / AVX2 / portable kernels)
 * and on CUDA (tensor cores, mma.sync or on sm_90 wgmma: int8 and int8 x bits
 * on sm_80+, fp8 on sm_89+, else LIK_ERR_UNSUPPORTED; int8 d <= 65536 there;
 * bits x bits on sm_80+ too), on opts->stream.  Sign-bit documents (int8 x
 * bits and bits x bits) run on wgmma where all of these hold: the device runs
 * sm_90a code (compute capability 9.0, a build with sm_90a, no PTX JIT), the
 * context has not turned wgmma off (LIK_CUDA_NO_WGMMA), 64 < d <= 128, 1 <=
 * Lq <= 128, Nd and Ld below 2^30; otherwise int8 x bits runs on mma.sync
 * and bits x bits on a popcount kernel.  int8, int8 x bits and bits x bits
 * results are bitwise identical across CPU paths, thread counts and all of
 * these GPU kernels.
 */

/* lik_quantize_int8 — symmetric per-token int8.
 *
 *   X       [..., d] (1 to 4 dims) F32, F16, BF16 or F64, any strides.
 *   X_int8  I8, X's shape: q_k = round-half-even(x_k / scale), clamped to
 *           [-127, 127], the division in fp32 (x read as fp32).
 *   scale   F32, X's shape minus d (0-d for 1-D X): amax / 127 in fp32, amax
 *           = max_k |x_k|; 0 for an all-zero token (whose q are 0).  With
 *           opts->normalize, scale is divided (fp32) by max(||x||, 1e-12) (the
 *           norm in fp32), so q * scale approximates the L2-normalised token;
 *           q is the same either way.
 * A token holding NaN or Inf gives an unspecified q and scale.
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE (ndim, d = 0, outputs' shapes),
 * LIK_ERR_DTYPE, LIK_ERR_VALUE (outputs overlapping each other or X),
 * LIK_ERR_DEVICE (X and the outputs on different devices), LIK_ERR_UNSUPPORTED
 * (CUDA tensors in a build without CUDA; more than 2^31 - 1 blocks of 256
 * tokens), LIK_ERR_CUDA.
 */
LIK_API lik_status lik_quantize_int8(const lik_tensor *X, const lik_options *opts,
                                     lik_tensor *X_int8, lik_tensor *scale);

/* lik_quantize_binary — sign bits: bit k is set iff x_k > 0 (so 0, -0 and
 * NaN give 0); bits U8 [..., ceil(d / 8)] in the bit order above, the bits
 * past d zero.  X as in lik_quantize_int8.  Errors as lik_quantize_int8. */
LIK_API lik_status lik_quantize_binary(const lik_tensor *X, const lik_options *opts,
                                       lik_tensor *bits);

/* lik_maxsim_scaled — MaxSim of int8 or fp8 embeddings with scales.
 *
 *   Q, D      I8, F8E4M3 or F8E5M2, one dtype, the same d.
 *   scale_Q   F32, 0-d or Q's shape minus d; scale_D likewise for D.
 *   opts      normalize must be 0 (quantise normalised embeddings instead);
 *             q_lengths / d_lengths must be NULL (padding as masks).
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE (ndim, d, scale / mask / scores
 * shapes), LIK_ERR_DTYPE (Q / D not int8 or fp8 or not the same, scales not
 * F32, masks, scores not F32), LIK_ERR_VALUE (normalize set, lengths given,
 * scores sharing memory), LIK_ERR_DEVICE, LIK_ERR_ALLOC, LIK_ERR_UNSUPPORTED (see
 * Devices), LIK_ERR_CUDA.
 */
LIK_API lik_status lik_maxsim_scaled(const lik_tensor *Q, const lik_tensor *scale_Q,
                                     const lik_tensor *D, const lik_tensor *scale_D,
                                     const lik_tensor *q_mask, const lik_tensor *d_mask,
                                     const lik_options *opts, lik_tensor *scores);

/* lik_maxsim_binary — MaxSim against binary documents.
 *
 *   Q        I8 [.., d] with scale_Q (F32, 0-d or Q's shape minus d), or U8
 *            bits [.., ceil(d / 8)] with scale_Q NULL.
 *   D_bits   U8 [Nd, Ld, ceil(d / 8)] or [Ld, ceil(d / 8)].
 *   d        the embedding dimension, >= 1.
 *   opts     normalize must be 0.
 * Errors as lik_maxsim_scaled; LIK_ERR_SHAPE also when a byte dimension is
 * not ceil(d / 8) or Q's d differs from d; LIK_ERR_VALUE for a scale_Q given
 * with bit queries.
 */
LIK_API lik_status lik_maxsim_binary(const lik_tensor *Q, const lik_tensor *scale_Q,
                                     const lik_tensor *D_bits, int64_t d,
                                     const lik_tensor *q_mask, const lik_tensor *d_mask,
                                     const lik_options *opts, lik_tensor *scores);
/* ---- fused D-side head -----------------------------------------------------
 *
 * lik_maxsim_from_hidden — MaxSim against documents given as hidden states:
 *
 *   D[j, t]   = H_d[j, t] @ W^T + b                       (d_out features)
 *   D[j, t]  /= max(||D[j, t]||, 1e-12)                   (if opts->normalize)
 *   score[i, j] = sum_{valid s} max_{valid t} <Q[i, s], D[j, t]>
 *
 * in one pass: documents are projected tile by tile (CPU: a block of
 * documents into a per-thread buffer of about 1 MiB; CUDA: a tile of tokens
 * in shared memory) and scored at once; the [Nd, Ld, d_out] projection is
 * never written to memory.  opts->normalize normalises the projected
 * document tokens only: Q is used as given (pass it already normalised).
 * Semantics of masks, empty sequences, argmax, ties and NaN: lik_maxsim's.
 * The seed's maxsim_from_hidden (design notes, "Fused D-side head").
 *
 *   Q       [Nq, Lq, d_out], F32 / F16 / BF16 / F64.
 *   H_d     cross [Nd, Ld, d_model] or KD [Nq, K, Ld, d_model], Q's dtype.
 *   W       [d_out, d_model] (torch.nn.Linear.weight), Q's dtype.
 *   b       NULL or [d_out], Q's dtype.
 *   q_mask  NULL or [Nq, Lq];  d_mask  NULL or H_d's shape without d_model
 *           (BOOL or U8).
 *   opts    normalize, num_threads, stream, fp32_precision; q_lengths /
 *           d_lengths must be NULL (padding as masks).
 *   scores  F32 (or F64 for F64 inputs) [Nq, Nd] (cross) or [Nq, K] (KD).
 *   argmax  NULL or I32 scores.shape + [Lq] (for the backward).
 * Accumulation is fp32 (fp64 for F64); the projection of a token is one
 * chain over d_model ascending, so results do not depend on threads.  On
 * CUDA the projection runs on tensor cores: F16 / BF16 operands exactly, F32
 * as 3xTF32 (fp32 accuracy, relative error about 1e-6, as lik_maxsim's), or
 * one TF32 product (operands rounded to 10-bit mantissas, about 1e-3) with
 * opts->fp32_precision = LIK_FP32_TF32.  On sm_90a (BF16, or F16 with
 * normalize; d_out <= 128, Lq <= 256, unit feature strides and 16-byte
 * rows) the projected tokens are scored as a pair of the input type (hi and
 * lo, together within about 2^-16 of the fp32 projection).  The backward
 * accumulates in fp32 (the projections on tensor cores as above).
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE (ndim, W not [d_out, d_model], b not
 * [d_out], batch / mask / output shapes, d_out or d_model outside
 * [1, INT32_MAX]), LIK_ERR_DTYPE (also F64 scores for non-F64 inputs),
 * LIK_ERR_VALUE (outputs sharing memory with an input, lengths in opts),
 * LIK_ERR_DEVICE, LIK_ERR_ALLOC, LIK_ERR_UNSUPPORTED (CUDA tensors without
 * the CUDA backend; on CUDA, F64 inputs or d_out > 256),
 * LIK_ERR_CUDA.
 * CUDA: on opts->stream, no host synchronisation (docs/fused_head.md).
 */
LIK_API lik_status lik_maxsim_from_hidden(const lik_tensor *Q, const lik_tensor *H_d,
                                          const lik_tensor *W, const lik_tensor *b,
                                          const lik_tensor *q_mask, const lik_tensor *d_mask,
                                          const lik_options *opts, lik_tensor *scores,
                                          lik_tensor *argmax);

/* lik_maxsim_from_hidden_backward — gradients of lik_maxsim_from_hidden,
 * closed form: only the argmax tokens carry gradient, so only those tokens
 * of H_d are read and projected again.  With g = grad_scores and, per
 * winning token (j, t) (y its projection, y^ = y / ||y|| under normalize):
 *
 *   e[j, t]        = sum_{(i, s) : argmax[i, j, s] == t} g[i, j] * Q[i, s]
 *   gy[j, t]       = (e - y^ <e, y^>) / ||y||   (normalize; e without it)
 *   grad_Q[i, s]   = sum_j g[i, j] * y^[j, argmax[i, j, s]]
 *   grad_H_d[j, t] = gy[j, t] @ W   (zero where no query token wins)
 *   grad_W         = sum_{(j, t)} gy[j, t]^T H_d[j, t];  grad_b = sum gy[j, t]
 *
 *   Q, H_d, W, b, q_mask, d_mask, opts  exactly as passed to the forward.
 *   argmax       I32 scores.shape + [Lq], as the forward wrote it.
 *   grad_scores  F32 or F64 with the scores' shape.
 *   grad_Q, grad_H_d, grad_W, grad_b  NULL (skipped) or their input's shape
 *                and dtype; every element is written.
 * Deterministic: each gradient element has one owner summing in a fixed
 * order (CPU: documents, then tokens, then queries ascending, for any thread
 * count; CUDA: argmax slots ascending, the same run to run).  Scratch: CPU
 * O(winning tokens * d_out) plus an index per token of H_d; CUDA 2 * Nq *
 * ncand * Lq * d_out fp32 (stream-ordered allocations).  On CUDA argmax
 * entries are not checked (no host synchronisation): an entry outside
 * [0, Ld) or on a masked token counts as -1.
 * Errors as the forward, plus LIK_ERR_DTYPE (grad_scores not F32 / F64, a
 * gradient's dtype differs from its input), LIK_ERR_SHAPE (argmax,
 * grad_scores or gradient shapes), LIK_ERR_VALUE (grad_b without b; an
 * argmax entry outside [-1, Ld) or on a masked document token, CPU).
 */
LIK_API lik_status lik_maxsim_from_hidden_backward(
    const lik_tensor *Q, const lik_tensor *H_d, const lik_tensor *W, const lik_tensor *b,
    const lik_tensor *q_mask, const lik_tensor *d_mask, const lik_tensor *argmax,
    const lik_tensor *grad_scores, const lik_options *opts, lik_tensor *grad_Q,
    lik_tensor *grad_H_d, lik_tensor *grad_W, lik_tensor *grad_b);

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

/* ---- PLAID index ------------------------------------------------------------
 *
 * A PLAID index (ColBERTv2 / PLAID, Santhanam et al. 2022; the layout of
 * fast-plaid 1.7): k-means centroids of the corpus's token embeddings, the
 * residual codec above (colbert bit layout), every token as a centroid id +
 * nbits bits per dimension, document lengths, and an inverted file (IVF):
 * per centroid, the sorted unique ids of the documents having a token coded
 * by it.  Documents are numbered 0 .. num_docs-1 in the order they were
 * added.
 *
 * Search, per query (PLAID's stages; fast-plaid's parameters and defaults):
 *   1. centroid scores S[s, c] = <q_hat_s, centroid c> (q_hat: the query
 *      token L2-normalised; an all-zero token, e.g. padding, probes nothing);
 *   2. per query token, the n_ivf_probe centroids of highest score (ties:
 *      lower id); the candidates are the union of their IVF lists (with a
 *      subset: only centroids used by the subset's documents are probed, and
 *      only the subset's documents are kept, as fast-plaid);
 *   3. approximate scores (lik_plaid_approx_score over S) of the candidates;
 *      with prune, tokens whose centroid scores below
 *      centroid_score_threshold for every query token are left out of this
 *      score (ColBERTv2's centroid pruning) and the n_full_scores best are
 *      re-scored without pruning;
 *   4. the best max(top_k, n_full_scores / 4) by approximate score (fast-plaid
 *      decodes a quarter of n_full_scores) are scored exactly: residual MaxSim
 *      on the compressed tokens (lik_maxsim_residual_varlen, normalize on:
 *      both sides L2-normalised), the scores written;
 *   5. the top_k by exact score.
 * Every ranking orders by score descending, then lower document id (NaN
 * last): results are deterministic and independent of the thread count.
 *
 * Files (one folder; what fast-plaid 1.7.0 writes and reads, so either
 * loads the other's index): metadata.json, plan.json, centroids.npy (fp16
 * [K, d]), bucket_cutoffs.npy, bucket_weights.npy, avg_residual.npy,
 * cluster_threshold.npy (fp32), ivf.npy (int64) + ivf_lengths.npy (int32
 * [K]), per chunk i doclens.<i>.json and <i>.metadata.json, and the codes /
 * residuals either merged (merged_codes.npy int64 [T + pad],
 * merged_residuals.npy uint8 [T + pad, d*nbits/8], their manifests;
 * fast-plaid 1.7's single-copy layout, what lik writes) or per chunk
 * (<i>.codes.npy / <i>.residuals.npy, older fast-plaid; a chunk file wins
 * over the merged file, as in fast-plaid).  lik also writes doc_ids.npy
 * (the documents' ids when they are not 0..N-1), deleted.npy (tombstones),
 * next_id.npy (when the ids do not imply it) and metadata.sqlite (extra
 * files fast-plaid ignores; "a living index" below).
 *
 * Memory: lik_plaid_index_load maps codes, residuals and the IVF (mmap);
 * documents added afterwards live in memory until saved.  An index may be
 * searched by many threads at once; add, save and free need exclusive use.
 * Devices: an index lives on the host; lik_plaid_index_to_device copies
 * what search reads (centroids, codec, codes, residuals, IVF, document
 * table, ids, tombstones) into one CUDA device's memory.  A search runs where
 * its query tensor is: host Q on the CPU threads, CUDA Q (of the index's
 * device) with every stage on the GPU on params->stream (batched over the
 * queries, no host synchronisation, capturable in a CUDA graph).  Build,
 * train, add, update, delete, compact and save run on the host; after a
 * change the library refreshes the device copy in the same call.
 */

typedef struct lik_plaid_index lik_plaid_index;

/* Progress of a long call: done out of total units (documents). */
typedef void (*lik_progress_fn)(void *user, int64_t done, int64_t total);

/* Build options; zero-initialised fields take the defaults (fast-plaid's). */
typedef struct lik_plaid_build_options {
  int nbits;                       /* 1, 2, 4 or 8; 0 = 2                        */
  int kmeans_niters;               /* k-means iterations; 0 = 4                  */
  int64_t num_centroids;           /* K; 0 = 2^floor(log2(16 * sqrt(tokens))),
                                      at most the k-means sample's tokens         */
  int64_t total_tokens;            /* lik_plaid_index_train: the corpus's token
                                      count (an estimate) for K's rule; 0 = the
                                      sample's.  lik_plaid_index_build: unused     */
  int64_t max_points_per_centroid; /* k-means sample cap K * this; 0 = 256       */
  int64_t sample_docs;             /* build: documents sampled for k-means and the
                                      codec; 0 = min(N, 1 + 16 * sqrt(120 N))     */
  uint64_t seed;                   /* sampling and k-means initialisation        */
  int64_t chunk_docs;              /* documents per chunk; 0 = 25000             */
  int num_threads;                 /* 0 = the context's                          */
  lik_context *context;            /* NULL = the default context                 */
  lik_progress_fn progress;        /* NULL or called as documents are coded      */
  void *progress_user;
  int expand_centroids;            /* lik_plaid_index_add: 1 = new centroids for
                                      outlier tokens (fast-plaid's update), 0 =
                                      the centroids do not change             */
  /* Where the nearest-centroid search and the coding run (k-means'
   * assignment passes, the codec's held-out tokens, every document's code
   * and residual bytes): LIK_CPU (0 is read as LIK_CPU) on the CPU threads,
   * or LIK_CUDA on CUDA device device_id, the tokens copied there in chunks
   * and the codes and residual bytes copied back (the index stays a host
   * index; lik_plaid_index_to_device copies it for a GPU search).  The
   * device computes the CPU's fp32 FMA chains, so the index is the same,
   * byte for byte, as a CPU build with the same seed (the CPU's FMA paths:
   * AVX2, AVX-512, NEON, SVE; LIK_CPU_ISA=portable rounds mul + add).
   * Sampling, k-means' centroid update, the codec's quantiles and the IVF
   * stay on the host. */
  lik_device_type device;
  int32_t device_id;               /* CUDA ordinal (LIK_CUDA), >= 0            */
  void *stream;                    /* LIK_CUDA: the cudaStream_t the copies and
                                      kernels run on (NULL: legacy default);
                                      each call synchronises it               */
} lik_plaid_build_options;

#define LIK_PLAID_BUILD_OPTIONS_INIT \
  {2, 4, 0, 0, 256, 0, 42, 25000, 0, NULL, NULL, NULL, 0, LIK_CPU, 0, NULL}

/* Search parameters; zero-initialised fields take the defaults. */
typedef struct lik_plaid_search_params {
  int64_t top_k;                  /* results per query; 0 = 10                   */
  int64_t n_ivf_probe;            /* cells probed per query token; 0 = 8 (at
                                     most K)                                     */
  int64_t n_full_scores;          /* candidates kept by the approximate score;
                                     0 = 4096 (a quarter, at least top_k, are
                                     scored exactly)                             */
  int prune;                      /* 1: centroid-score pruning (stage 3)          */
  float centroid_score_threshold; /* with prune (ColBERTv2: 0.5 for top_k 10)    */
  int num_threads;                /* 0 = the context's                           */
  lik_context *context;
  void *stream;                   /* CUDA search: the cudaStream_t (NULL: legacy
                                     default stream)                             */
} lik_plaid_search_params;

typedef struct lik_plaid_index_info {
  int64_t num_docs, num_tokens, dim, num_centroids, num_chunks;
  int nbits;
  int has_ivf; /* 0: a compress-only index (searching it fails)  */
  int64_t num_deleted; /* documents deleted and not yet compacted away: of
                          num_docs (the stored documents), num_docs -
                          num_deleted are live                             */
  int64_t next_id;     /* the id the next added document gets            */
  int device;          /* the CUDA device holding a copy, -1: none        */
  int64_t device_bytes; /* bytes of that copy (0: none)                   */
} lik_plaid_index_info;

/* lik_plaid_index_build — an index of N documents in one call: samples
 * sample_docs documents (seeded), k-means on their L2-normalised tokens
 * (spherical: assignment by the highest inner product through the MaxSim
 * tiles, centroids the normalised means, an empty cluster re-seeded by a
 * sampled token; deterministic for a seed, independent of the thread
 * count), centroids stored fp16, the codec trained on the residuals of up
 * to 50000 sampled tokens (lik_codec_train), then every document coded
 * (lik_plaid_index_add).
 *
 *   documents   [T, d] F32/F16/BF16/F64, any strides, CPU: all tokens.
 *   cu_seqlens  [N + 1] I32/I64: document j is rows cu[j] .. cu[j+1]-1
 *               (from 0, non-decreasing, last T; empty documents allowed).
 *   options     NULL or options (defaults above).
 *   out         receives the index (NULL on failure); free it with
 *               lik_plaid_index_free.
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE, LIK_ERR_DTYPE, LIK_ERR_VALUE (nbits,
 * d * nbits not a whole number of bytes, N = 0 or no token, bad cu_seqlens,
 * negative options, a NaN / infinite token, naming it; options.device not
 * LIK_CPU / LIK_CUDA, a negative device_id), LIK_ERR_ALLOC (host or device
 * memory), LIK_ERR_UNSUPPORTED (CUDA tensors; options.device LIK_CUDA in a
 * build without the CUDA backend), LIK_ERR_DEVICE (options.device_id cannot
 * be selected: no such device, no driver), LIK_ERR_CUDA (a failed copy or
 * kernel). */
LIK_API lik_status lik_plaid_index_build(const lik_tensor *documents,
                                         const lik_tensor *cu_seqlens,
                                         const lik_plaid_build_options *options,
                                         lik_plaid_index **out);

/* lik_plaid_index_train — an empty index from a sample of tokens (for a
 * corpus streamed in chunks: train on a sample, then lik_plaid_index_add
 * chunk after chunk; the corpus never has to be in memory at once).
 *
 *   sample   [Ts, d] F32/F16/BF16/F64, CPU: sampled tokens (e.g. all tokens
 *            of randomly drawn documents).  k-means uses at most K *
 *            max_points_per_centroid of them (seeded), the codec the last
 *            min(50000, max(1, Ts / 20)).
 *   options  as lik_plaid_index_build (total_tokens sets K's rule).
 * Errors as lik_plaid_index_build. */
LIK_API lik_status lik_plaid_index_train(const lik_tensor *sample,
                                         const lik_plaid_build_options *options,
                                         lik_plaid_index **out);

/* lik_plaid_index_add — codes documents with the index's codec and appends
 * them (ids num_docs .. num_docs + N - 1), updating the IVF.  Arguments as
 * lik_plaid_index_build (options: num_threads, context, progress,
 * expand_centroids; chunk_docs of the index's build).
 *
 * expand_centroids 0: the centroids and the codec do not change.
 * expand_centroids 1 (fast-plaid's update): a token whose residual norm
 * ||x - c|| to its nearest centroid exceeds the index's cluster_threshold
 * (cluster_threshold.npy: the 0.75-quantile of residual norms at build) is
 * an outlier; n outliers give k = min(4 * ceil(n / max_points_per_centroid),
 * m) new centroids, spherical k-means (kmeans_niters, seed) on m = min(n,
 * 1 + 16 * sqrt(120 n)) sampled outliers, normalised and stored fp16 after
 * the K old ones (K grows, their IVF lists start empty); the documents are
 * then coded against all K + k.  The threshold becomes (old * T_old + q *
 * T_new) / (T_old + T_new), q the 0.75-quantile of the new tokens' residual
 * norms, T the token counts (q alone when the index had none: then no
 * token is an outlier).  Bucket cutoffs / weights and avg_residual do not
 * change.
 * On failure the index is unchanged.  Errors as lik_plaid_index_build;
 * LIK_ERR_VALUE also for expand_centroids not 0 or 1, or K + k above the
 * int32 code range. */
LIK_API lik_status lik_plaid_index_add(lik_plaid_index *index, const lik_tensor *documents,
                                       const lik_tensor *cu_seqlens,
                                       const lik_plaid_build_options *options);

/* lik_plaid_index_save — writes the index into folder path (created if
 * absent) as one atomic change (docs/plaid_index.md, "Atomic commits"): the
 * new files are staged in path/.lik-new/ and fsynced, committed by one
 * rename, then moved over the old ones.  On any error (or a killed process)
 * the folder keeps its old state; on success it holds the new one; a
 * concurrent lik_plaid_index_load sees one of them.  A loaded index may be
 * saved over its own folder.  One writer at a time.  The folder becomes the
 * index's own (the one it was loaded from is too): a later save there, while
 * no one else changed it, writes only the files the changes since touched
 * (after a delete: deleted.npy and metadata.json).
 *   doc_ids  NULL: the index's ids (doc_ids.npy written when they are not
 *            0..num_docs-1, removed otherwise); or I64 [num_docs] ids for
 *            the stored documents, unique, in [0, 2^62) (-1 allowed for a
 *            deleted one), written as doc_ids.npy instead: a load of the
 *            folder searches with them (this index keeps its own) and
 *            continues after the highest (no next_id.npy).
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE / LIK_ERR_DTYPE (doc_ids), LIK_ERR_VALUE
 * (an I/O failure, naming the file and the system's reason; a folder in the
 * place of a file; a code of a loaded chunk outside [0, K): a corrupt file
 * is not saved), LIK_ERR_ALLOC. */
LIK_API lik_status lik_plaid_index_save(lik_plaid_index *index, const char *path,
                                        const lik_tensor *doc_ids);

/* Load flags. */
#define LIK_PLAID_LOAD_VERIFY 1u /* read every code at load (else each code is
                                    checked when a search reads it)             */

/* lik_plaid_index_load — maps the index in folder path (fast-plaid's files or
 * lik's; through a change a save committed but did not finish, which it
 * reads as the new state).  Every size read from a file is checked against
 * the file and the other files before anything is allocated; IVF entries are
 * checked against num_docs; centroids must be finite in fp16, bucket weights
 * in the fp16 range, cutoffs / avg_residual / cluster_threshold finite.  Only
 * regular files are read (a FIFO is refused, never waited on).  A missing,
 * inconsistent or non-finite file gives LIK_ERR_VALUE naming the file and
 * the sizes or the entry.  A code outside [0, K) (a corrupt file) is reported by
 * the load with LIK_PLAID_LOAD_VERIFY, else by the search that reads it
 * (LIK_ERR_VALUE naming the document and token).
 * Errors: LIK_ERR_NULL, LIK_ERR_VALUE, LIK_ERR_ALLOC. */
LIK_API lik_status lik_plaid_index_load(const char *path, unsigned flags,
                                        lik_plaid_index **out);

/* lik_plaid_index_search — the top_k documents of each query (stages above).
 *
 *   index      a built or loaded index with an IVF.
 *   Q          [Nq, Lq, d] or [Lq, d] F32/F16/BF16/F64, any strides; on the
 *              host (the CPU search) or on the CUDA device holding the
 *              index's copy (lik_plaid_index_to_device: the GPU search, on
 *              params->stream; q_lengths, scores and ids on that device too).
 *   q_lengths  NULL (every query has Lq tokens) or [Nq] I32/I64 in [0, Lq]:
 *              tokens past a query's length are not read (on CUDA a length
 *              outside [0, Lq] is clamped: it is not read on the host).
 *   subset     NULL, or I32/I64 [S] ids of documents of the index (duplicates
 *              and deleted ones allowed; an id never given or compacted away
 *              is LIK_ERR_VALUE): only these live documents are searched;
 *              with a subset or deleted documents, a query whose probes find
 *              fewer than top_k candidates takes every live (subset)
 *              document with tokens, so it gets top_k results when they
 *              exist, and a subset of at most max(top_k, n_full_scores / 4)
 *              live documents is scored whole (exactly);
 *   subset_cu  NULL (one subset for every query) or [Nq + 1] I32/I64: query
 *              i's subset is subset[subset_cu[i] .. subset_cu[i+1]).  Host
 *              tensors only (a CUDA search with a subset is
 *              LIK_ERR_UNSUPPORTED in this version).
 *   params     NULL or parameters (defaults above).
 *   scores     F32 [Nq, top_k] ([top_k] for 2-D Q): exact residual MaxSim
 *              scores, descending; ids I64 of the same shape: the documents'
 *              ids (never a deleted one; ties: the earlier stored document).  A query with
 *              fewer than top_k results (few candidates, an empty query) gets
 *              ids -1 and scores -inf in the remaining slots.
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE, LIK_ERR_DTYPE, LIK_ERR_VALUE (negative
 * parameters, a non-finite threshold, lengths, subset ids, a corrupt code),
 * LIK_ERR_UNSUPPORTED (no IVF; a CUDA search with a subset or n_ivf_probe
 * above 512), LIK_ERR_DEVICE (CUDA tensors of a device without the
 * index's copy; mixed devices), LIK_ERR_ALLOC. */
LIK_API lik_status lik_plaid_index_search(const lik_plaid_index *index, const lik_tensor *Q,
                                          const lik_tensor *q_lengths,
                                          const lik_tensor *subset,
                                          const lik_tensor *subset_cu,
                                          const lik_plaid_search_params *params,
                                          lik_tensor *scores, lik_tensor *ids);

/* ---- a living index: ids, delete, update, compact, metadata ---------------------
 *
 * Every document has an id for life: 0, 1, ... in the order documents are
 * added (lik_plaid_index_add gives next_id, next_id + 1, ...; a folder's
 * doc_ids.npy, when present, holds the ids of its stored documents); search
 * returns ids, subset and the calls below take ids.  Deleting tombstones a
 * document (O(deleted): nothing is rewritten; search never returns it and
 * leaves it out before the candidate stages); compacting rewrites the codes,
 * residuals, document table and IVF without the deleted documents, keeping
 * every other id (the map is saved as doc_ids.npy).  A save writes the
 * tombstones as deleted.npy (int64 stored-order indices; lik only, see
 * docs/plaid_index.md for what fast-plaid sees) through the same atomic
 * change as the rest.  An id is never given twice: when a compact has
 * dropped the documents with the highest ids, so that the stored ids no
 * longer imply next_id (the highest + 1), the save writes it as
 * next_id.npy (an int64 scalar) in the same change, and a later load + add
 * continues from it (a load refuses a next_id.npy below the highest stored
 * id + 1 or not below 2^62).
 * On any error the index is unchanged. */

/* lik_plaid_index_delete — tombstones the documents ids [n] I32/I64 (CPU).
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE / LIK_ERR_DTYPE (ids), LIK_ERR_VALUE
 * naming the entry: an id out of range (negative, or >= next_id), unknown
 * (compacted away), already deleted, or given twice; LIK_ERR_ALLOC. */
LIK_API lik_status lik_plaid_index_delete(lik_plaid_index *index, const lik_tensor *ids);

/* lik_plaid_index_update — replaces documents: ids [N] I32/I64 live ids get
 * the N new documents (documents / cu_seqlens / options as
 * lik_plaid_index_add), which are coded and appended; the old versions are
 * deleted.  Errors as lik_plaid_index_add, and for ids as
 * lik_plaid_index_delete (LIK_ERR_SHAPE: not N entries). */
LIK_API lik_status lik_plaid_index_update(lik_plaid_index *index, const lik_tensor *ids,
                                          const lik_tensor *documents,
                                          const lik_tensor *cu_seqlens,
                                          const lik_plaid_build_options *options);

/* lik_plaid_index_compact — drops the deleted documents (no-op without):
 * the live documents in their order, chunks of the build's chunk_docs, IVF
 * lists without the deleted ids; ids unchanged.  The index then lives in
 * memory (its files are unmapped) until saved.  Errors: LIK_ERR_NULL,
 * LIK_ERR_VALUE (a corrupt code of a mapped file, naming the document),
 * LIK_ERR_ALLOC (the live codes and residuals are copied). */
LIK_API lik_status lik_plaid_index_compact(lik_plaid_index *index);

/* lik_plaid_index_get_ids — ids: I64 [num_docs] output (CPU, any stride):
 * the id of each stored document in stored order, -1 for a deleted one.
 * Errors: LIK_ERR_NULL, LIK_ERR_SHAPE / LIK_ERR_DTYPE (ids). */
LIK_API lik_status lik_plaid_index_get_ids(const lik_plaid_index *index, lik_tensor *ids);

/* Per-document metadata: an SQLite database (the Python front's and the
 * command's; the library never reads it) kept as bytes with the index and
 * saved as metadata.sqlite in the same atomic change as the index files
 * (a load reads it with them: the two never disagree after a crash).
 * set: size >= 0 copies data[size] (size 0: an empty database); size -1
 *      removes it (the next save deletes metadata.sqlite).
 * get: *size = its bytes (-1: none); with buf non-NULL copies them into
 *      buf[capacity] (LIK_ERR_SHAPE when capacity is too small).
 * Errors: LIK_ERR_NULL, LIK_ERR_VALUE (size < -1), LIK_ERR_SHAPE,
 * LIK_ERR_ALLOC. */
LIK_API lik_status lik_plaid_index_set_metadata_db(lik_plaid_index *index, const void *data,
                                                   int64_t size);
LIK_API lik_status lik_plaid_index_get_metadata_db(const lik_plaid_index *index, void *buf,
                                                   int64_t capacity, int64_t *size);

/* Sizes of an index.  Errors: LIK_ERR_NULL. */
LIK_API lik_status lik_plaid_index_get_info(const lik_plaid_index *index,
                                            lik_plaid_index_info *info);

/* lik_plaid_index_to_device — device_id >= 0: copies the index's search
 * state into the memory of CUDA device device_id (replacing an earlier
 * copy; synchronous), so that lik_plaid_index_search takes CUDA tensors of
 * that device; -1: frees the device copy.  Codes are checked in [0, K) as
 * they are copied (the device never reads a corrupt code).  The copy holds
 * centroids fp16 [K, d], codes int32 [T], residuals uint8 [T, d*nbits/8],
 * the IVF as int32 positions, doc offsets int64 [N+1], ids int64 [N] and
 * the tombstone bitmap: about T * (4 + d*nbits/8) bytes
 * (lik_plaid_index_info.device_bytes).  The host copy stays (CPU searches
 * and saves read it).  After add, update, delete or compact the library
 * copies the changed index again in the same call; if that fails the call
 * reports it (the index itself has changed) and the device copy is freed.
 * Errors: LIK_ERR_NULL, LIK_ERR_VALUE (device_id < -1, a corrupt code
 * naming the document and token, more than 2^31 - 1 documents),
 * LIK_ERR_UNSUPPORTED (no IVF; a library built without CUDA), LIK_ERR_DEVICE
 * (no such device), LIK_ERR_ALLOC (device memory). */
LIK_API lik_status lik_plaid_index_to_device(lik_plaid_index *index, int device_id);

/* Frees an index (unmaps its files); NULL is a no-op. */
LIK_API void lik_plaid_index_free(lik_plaid_index *index);

#ifdef __cplusplus
}
#endif

#endif /* LIK_EXPERIMENTAL_H */
