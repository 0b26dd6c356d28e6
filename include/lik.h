/*
 * lik.h — the public C API of lik, fused late-interaction (MaxSim) kernels.
 *
 * MaxSim (ColBERT, Khattab & Zaharia 2020; semantics as in the seed system
 * "late-interaction-kernels" and PyLate's colbert_scores):
 *
 *   score[i, j] = sum_{s : q_mask[i,s]} max_{t : d_mask[j,t]} <Q[i,s], D[j,t]>
 *
 * - A masked document token loses the max as -inf (it is never read), so
 *   negative similarities are honoured and NaN/Inf in masked tokens never
 *   influence a result.
 * - A query token with no valid document token contributes 0 (argmax -1).
 * - Infinities are numbers: the max runs over the valid tokens' similarities,
 *   so a similarity of -inf (an infinite input, or fp32 overflow of finite
 *   inputs such as 1e20 * -1e20) is the max when no valid token scores
 *   higher, and the query token then contributes -inf (argmax: the first
 *   such token); +inf beats everything.  Contributions are summed as numbers
 *   (+inf + -inf = NaN).  (CUDA fp32 runs as 3xTF32, which splits every
 *   input in two: there an infinite fp32 input gives a NaN similarity, while
 *   overflow of finite inputs gives +-inf as everywhere.)
 * - A NaN similarity never wins a max (comparisons with NaN are false): a
 *   valid token holding NaN is skipped as if masked, so a query token whose
 *   valid tokens all score NaN contributes 0.  Unlike torch.max, NaN does not
 *   propagate into the scores.
 * - normalize != 0 applies per-token L2 normalisation x / max(||x||, 1e-12)
 *   to both sides, the norm computed in fp32 (fp64 for fp64 inputs), fused
 *   into the kernel.  As with torch.nn.functional.normalize, a token whose
 *   squared norm overflows fp32 (||x|| > ~1.8e19) normalises to 0.
 * - Accumulation is fp32 (fp64 for fp64 inputs); scores are F32, or F64 for
 *   fp64 inputs (the fp64 sum itself; F32 scores round it once; F64 scores
 *   for other inputs are LIK_ERR_DTYPE: their sums are fp32).  fp32 inputs
 *   keep fp32 accuracy (never computed in fp16).
 * - The [Nq, Nd, Lq, Ld] similarity tensor is never materialised.
 *
 * Conventions used by every call
 * - Tensors are views (lik_tensor): shapes and strides in ELEMENTS (DLPack
 *   meaning), row-major logical order, any strides (transposed, sliced,
 *   broadcast with stride 0).  All offsets are 64-bit.
 * - The embedding dimension d is 1 .. INT32_MAX; sequence lengths up to
 *   INT32_MAX (argmax is int32).  These limits hold for every dtype, layout
 *   and device (LIK_ERR_SHAPE; a packed sequence longer than INT32_MAX:
 *   LIK_ERR_VALUE naming it).  A view whose strides reach more bytes than
 *   int64 counts is LIK_ERR_SHAPE.  Every size computed from these numbers is
 *   overflow-checked; scratch that cannot exist is LIK_ERR_ALLOC, never a
 *   wrapped size.
 * - Outputs are caller-allocated views; the library writes only them.  An
 *   output's elements may not overlap (sorted by |stride|, each dimension of
 *   size > 1 must step past what the smaller ones reach; so no stride 0 over
 *   a dimension of size > 1): LIK_ERR_SHAPE.  An output's memory (the byte
 *   range its view spans) may not intersect that of an input or of another
 *   output of the call: LIK_ERR_VALUE naming both (e.g. "grad_Q: overlaps Q
 *   in memory ...").  Inputs may share memory (Q and D may be one tensor).
 * - Every call returns lik_status.  On failure, lik_last_error() returns a
 *   message that names the argument and the sizes; nothing is written to
 *   stderr, nothing aborts, nothing leaks.  The message is thread-local.
 * - Scratch: the CPU backend allocates bounded per-call scratch (packed tiles,
 *   O(threads * tile) bytes, plus O(Nq * block) for retrieval) with malloc and
 *   frees it before returning; allocation failure returns LIK_ERR_ALLOC.
 *   No state is kept between calls.
 * - Threads: every call is thread-safe.  Work is split so that each output
 *   has one writer and a fixed reduction order: results are bitwise
 *   identical for any thread count.
 * - Device: all tensors of one call live on one device (CPU or CUDA).  CUDA
 *   calls run on lik_options.stream and never synchronise the host.
 */
#ifndef LIK_H
#define LIK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(LIK_SHARED_BUILD)
#define LIK_API __declspec(dllexport)
#elif defined(__GNUC__)
#define LIK_API __attribute__((visibility("default")))
#else
#define LIK_API
#endif

/* ---- version ------------------------------------------------------------ */

#define LIK_VERSION_MAJOR 0
#define LIK_VERSION_MINOR 2
#define LIK_VERSION_PATCH 0
#define LIK_VERSION_NUMBER \
  (LIK_VERSION_MAJOR * 10000 + LIK_VERSION_MINOR * 100 + LIK_VERSION_PATCH)
#define LIK_VERSION_STRING "0.2.0"

/* Runtime version of the linked library: LIK_VERSION_NUMBER / _STRING. */
LIK_API int lik_version_number(void);
LIK_API const char *lik_version_string(void);

/* ---- status ------------------------------------------------------------- */

typedef enum lik_status {
  LIK_OK = 0,
  LIK_ERR_NULL = 1,        /* a required pointer argument is NULL          */
  LIK_ERR_SHAPE = 2,       /* ndim / shape / size mismatch                 */
  LIK_ERR_DTYPE = 3,       /* unsupported or mismatched dtype              */
  LIK_ERR_VALUE = 4,       /* bad value (top_k <= 0, bad cu_seqlens, an
                              output sharing memory with another tensor) */
  LIK_ERR_DEVICE = 5,      /* tensors on different / unsupported devices   */
  LIK_ERR_ALLOC = 6,       /* scratch allocation failed                    */
  LIK_ERR_UNSUPPORTED = 7, /* valid request this build cannot serve        */
  LIK_ERR_CUDA = 8         /* the CUDA runtime reported an error           */
} lik_status;

/* Static, never-NULL name of a status ("LIK_ERR_SHAPE", ...). */
LIK_API const char *lik_status_string(lik_status status);

/* Message of the last failing call on this thread ("" if none).  Valid until
 * the next lik call on this thread.  Example:
 *   "D: last dimension d=96 does not match Q's d=128" */
LIK_API const char *lik_last_error(void);

/* ---- tensor views --------------------------------------------------------- */

typedef enum lik_dtype {
  LIK_F32 = 0,
  LIK_F16 = 1,
  LIK_BF16 = 2,
  LIK_F64 = 3,
  LIK_BOOL = 4, /* 1 byte, nonzero = true (masks)           */
  LIK_U8 = 5,   /* 1 byte, nonzero = true (masks)           */
  LIK_I32 = 6,  /* argmax outputs, cu_seqlens, pair indices */
  LIK_I64 = 7,  /* retrieval indices, cu_seqlens, pairs     */
  LIK_I8 = 8,       /* int8 embeddings (lik_experimental.h low-bit MaxSim) */
  LIK_F8E4M3 = 9,   /* fp8 e4m3 (OCP "fn": no inf, 0x7f/0xff NaN), same  */
  LIK_F8E5M2 = 10   /* fp8 e5m2 (IEEE-like), same                        */
} lik_dtype;

/* Device types use DLPack's codes. */
typedef enum lik_device_type { LIK_CPU = 1, LIK_CUDA = 2 } lik_device_type;

#define LIK_MAX_DIMS 4

typedef struct lik_tensor {
  void *data;                     /* first element; may be NULL if numel=0 */
  lik_dtype dtype;
  int32_t ndim;                   /* 0 .. LIK_MAX_DIMS                     */
  int64_t shape[LIK_MAX_DIMS];    /* elements per dimension, >= 0          */
  int64_t strides[LIK_MAX_DIMS];  /* in elements, may be 0 or negative     */
  lik_device_type device;         /* LIK_CPU (0 is read as LIK_CPU)        */
  int32_t device_id;              /* CUDA ordinal, 0 on CPU                */
} lik_tensor;

/* ---- options -------------------------------------------------------------- */

typedef enum lik_backward {
  LIK_BACKWARD_AUTO = 0,    /* CPU: lowmem; CUDA: the one (deterministic) kernel */
  LIK_BACKWARD_UNIFIED = 1, /* CPU: fp32 working copies; CUDA: same as auto      */
  LIK_BACKWARD_LOWMEM = 2   /* destination-owned, no full-size buffer            */
} lik_backward;

/* A context: what calls read of their environment (thread count, CPU kernel
 * path, CUDA switches), resolved once, plus the backends' cached device
 * properties and the CPU calls' scratch (reused across calls).  Created and freed with lik_experimental.h's
 * lik_context_create / lik_context_free; NULL selects the process's default
 * context, made on first use from the environment variables LIK_NUM_THREADS,
 * LIK_CPU_ISA and LIK_CUDA_WGMMA / LIK_CUDA_SPLIT / LIK_CUDA_BULK /
 * LIK_CUDA_BW_SPARSE (read once: setting them later changes nothing). */
typedef struct lik_context lik_context;

/* How fp32 inputs meet the tensor cores (CUDA; torch's
 * torch.get_float32_matmul_precision()).  fp16 / bf16 / fp64 inputs and the
 * CPU ignore it (the CPU always keeps fp32 accuracy). */
typedef enum lik_fp32_precision {
  LIK_FP32_HIGHEST = 0, /* fp32 accuracy: 3xTF32 (torch "highest")            */
  LIK_FP32_TF32 = 1     /* one TF32 product per term (inputs rounded to 10-bit
                           mantissas; fp32 accumulate): torch "high" / "medium" */
} lik_fp32_precision;

typedef struct lik_options {
  int normalize;         /* fused per-token L2 normalisation (0/1)          */
  int num_threads;       /* CPU threads; 0 (or negative) = the context's
                            (default context: $LIK_NUM_THREADS or all cores);
                            more than the work needs is not an error       */
  void *stream;          /* cudaStream_t for CUDA tensors; NULL = default   */
  lik_backward backward; /* backward strategy (training calls only)         */
  int64_t max_seqlen_q;  /* packed calls: >= every query's length, 0 = unknown
                            (FlashAttention's max_seqlen_q; lik_maxsim_varlen) */
  lik_context *context;  /* NULL = the default context                      */
  /* Sequence lengths of padded inputs (lik_maxsim, lik_maxsim_pairs,
   * lik_retrieve and their backwards): NULL, or an I32 view with Q's / D's
   * shape without the last two dimensions (cross [Nq] / [Nd], 0-d for a 2-D
   * Q / D; KD D: [Nq, K]; pairs [B]), on the tensors' device.  Token l of
   * sequence n is valid iff l < lengths[n] (and its mask, if any, is set):
   * exactly a prefix mask, which it may replace (faster on CUDA).  Entries
   * must lie in [0, L] (L = Lq / Ld): LIK_ERR_VALUE naming the entry on the
   * CPU; on CUDA they are not read on the host and are clamped to [0, L].
   * Packed calls take their lengths from cu_seqlens, and the low-bit calls,
   * the fused head and residual MaxSim of lik_experimental.h take none
   * (masks, doc_lengths): non-NULL there is LIK_ERR_VALUE.  A backward must get the forward's
   * lengths. */
  const lik_tensor *q_lengths;
  const lik_tensor *d_lengths;
  lik_fp32_precision fp32_precision; /* forward only, and
                                        lik_maxsim_residual* (another value:
                                        LIK_ERR_VALUE); the CUDA backward of
                                        fp32 inputs keeps fp32 accuracy   */
} lik_options;

/* Zero-initialised options are the defaults; NULL options means defaults. */
#define LIK_OPTIONS_INIT {0, 0, NULL, LIK_BACKWARD_AUTO, 0, NULL, NULL, NULL, LIK_FP32_HIGHEST}

/* ---- forward ---------------------------------------------------------------
 *
 * lik_maxsim — fused MaxSim forward, cross-product or KD layout.
 *
 *   Q       [Nq, Lq, d] or [Lq, d] (a single query, Nq = 1, dim dropped)
 *           dtype F32, F16, BF16 or F64.
 *   D       cross: [Nd, Ld, d] or [Ld, d] (single document, dim dropped)
 *           KD:    [Nq, K, Ld, d]  (per-query candidates; requires 3-D Q)
 *           same dtype as Q.
 *   q_mask  NULL or [Nq, Lq] (or [Lq] for 2-D Q), BOOL or U8.
 *   d_mask  NULL or [Nd, Ld] / [Ld] (cross), [Nq, K, Ld] (KD), BOOL or U8.
 *   scores  F32 (or F64 for F64 inputs), cross [Nq, Nd] with the dims of 2-D
 *           inputs dropped
 *           (2-D Q: [Nd]; 2-D D: [Nq]; both: 0-d), KD [Nq, K].
 *   argmax  NULL or I32 with shape scores.shape + [Lq]: the winning document
 *           token per query token, -1 where the query token is masked or
 *           no valid document token wins (none is valid, or all score NaN);
 *           lowest index on ties.
 *   opts    NULL or options (normalize, num_threads, stream).
 *
 * Nq, Nd, K = 0 give an empty result; Lq = 0 or Ld = 0 give zero scores.
 * Errors: LIK_ERR_NULL (Q, D or scores NULL), LIK_ERR_SHAPE (ndim, d, batch,
 * mask or output shapes, lengths, overlapping output elements),
 * LIK_ERR_DTYPE (Q/D dtype differ or unsupported, mask not BOOL/U8, scores
 * not F32 / F64, or F64 for non-F64 inputs, argmax not I32), LIK_ERR_VALUE (an output sharing memory with
 * another tensor of the call), LIK_ERR_DEVICE,
 * LIK_ERR_ALLOC, LIK_ERR_UNSUPPORTED (CUDA tensors in a build without CUDA),
 * LIK_ERR_CUDA.
 */
LIK_API lik_status lik_maxsim(const lik_tensor *Q, const lik_tensor *D,
                              const lik_tensor *q_mask,
                              const lik_tensor *d_mask,
                              const lik_options *opts, lik_tensor *scores,
                              lik_tensor *argmax);

/* lik_maxsim_pairs — one score per same-index pair (Q[b], D[b]); PyLate's
 * colbert_scores_pairwise.  The K = 1 case of the KD layout.
 *
 *   Q [B, Lq, d], D [B, Ld, d] (same dtype, F32/F16/BF16/F64)
 *   q_mask NULL or [B, Lq]; d_mask NULL or [B, Ld] (BOOL or U8)
 *   scores F32 [B] (or F64 for F64 inputs); argmax NULL or I32 [B, Lq] (as in lik_maxsim)
 * Errors as lik_maxsim; B of Q and D must match.
 */
LIK_API lik_status lik_maxsim_pairs(const lik_tensor *Q, const lik_tensor *D,
                                    const lik_tensor *q_mask,
                                    const lik_tensor *d_mask,
                                    const lik_options *opts,
                                    lik_tensor *scores, lik_tensor *argmax);

/* ---- retrieval -------------------------------------------------------------
 *
 * lik_retrieve — exact top-k documents per query by MaxSim, streaming
 * document blocks through per-query selection: no [Nq, Nd] score matrix is
 * held (scratch is O(Nq * block)).
 *
 *   Q, D, q_mask, d_mask as in lik_maxsim, cross layout only.
 *   top_k   >= 1; k = min(top_k, Nd) results are written.
 *   scores  F32 [Nq, k] (or [k] for 2-D Q), descending.
 *   indices I64 [Nq, k] (or [k]): document indices into D, no duplicates;
 *           equal scores are ordered by lower document index first.
 * Errors as lik_maxsim, plus LIK_ERR_VALUE for top_k <= 0.  Note: the seed's
 * retrieve() defaults to normalize=True; here normalize comes from opts.
 */
LIK_API lik_status lik_retrieve(const lik_tensor *Q, const lik_tensor *D,
                                const lik_tensor *q_mask,
                                const lik_tensor *d_mask, int64_t top_k,
                                const lik_options *opts, lik_tensor *scores,
                                lik_tensor *indices);

/* ---- CPU kernel selection ----------------------------------------------- */

/* Name of the CPU kernel path of the default context ("avx512", "avx2",
 * "portable" on x86-64; "sve", "neon", "portable" on aarch64).  The best the
 * CPU runs (x86: cpuid + xgetbv; aarch64 Linux: getauxval(AT_HWCAP)); the
 * environment variable LIK_CPU_ISA=portable|avx2|avx512|neon|sve, read once,
 * asks for a path (a path the CPU cannot run is ignored and the best
 * available one is used). */
LIK_API const char *lik_cpu_isa(void);

/* ---- training and packed layouts -------------------------------------------
 *
 * Backward passes (gradients of MaxSim from the forward's saved argmax) and the
 * packed (FlashAttention cu_seqlens) layouts.  Semantics: the seed's design
 * notes ("Backward", "Varlen / packed path"):
 *
 *   grad_Q[i,s] = q_mask[i,s] * sum_j g[i,j] * D[j, argmax[i,j,s]]
 *   grad_D[j,t] = sum_{(i,s) : argmax[i,j,s] == t} q_mask[i,s] * g[i,j] * Q[i,s]
 *
 * with g = grad_scores.  With opts->normalize the forward scored the
 * normalised tokens y = x / max(||x||, 1e-12); the backward applies the
 * L2-normalisation Jacobian, fused:
 *   dx = (dy - y * <dy, y>) / ||x||   if ||x|| > 1e-12,   dx = dy / 1e-12 else.
 *
 * Rules shared by every backward call:
 * - argmax must be the one the matching forward wrote for the same inputs,
 *   masks and normalize.  On the CPU an entry outside [-1, Ld) of its
 *   document, or pointing at a masked document token, returns LIK_ERR_VALUE.
 *   On CUDA the entries are not checked (that would synchronise the host):
 *   such an entry is treated as -1, and nothing is read or written out of
 *   bounds.  -1 (masked query token, empty or fully masked document)
 *   contributes nothing anywhere.
 * - Masked query and document tokens (and, on packed paths, rows of no
 *   sequence) get exactly zero gradient.  Every element of grad_Q / grad_D is
 *   written (no accumulation into the caller's buffer).
 * - grad_scores is F32 or F64 (any strides); grad_Q has Q's shape and dtype,
 *   grad_D has D's shape and dtype, any non-overlapping strides; either may
 *   be NULL to skip that gradient.  Accumulation is fp32 (fp64 for F64).
 * - Determinism, every device and strategy: each gradient row has one owner
 *   that sums its terms in a fixed order (queries / pairs ascending, then
 *   query tokens ascending) and writes it once; no atomics.  Results are
 *   bitwise identical run to run, for any thread count (CPU) or launch
 *   configuration (CUDA), and for every strategy of a device.
 * - opts->backward picks the strategy.  On the CPU the strategies give
 *   bitwise identical results; they differ only in memory and speed:
 *     LIK_BACKWARD_LOWMEM   no full-size buffer: rows are converted (and
 *                           normalised) on the fly, gradients are written in
 *                           the input dtype from per-thread row accumulators
 *                           (scratch O(threads * L * d) + O(tokens) norms).
 *     LIK_BACKWARD_UNIFIED  converts (and normalises) Q and D once into
 *                           full-size fp32 working copies (fp64 for F64), then
 *                           as lowmem (rows gathered from the copies).
 *     LIK_BACKWARD_AUTO     lowmem on the CPU (measured faster than unified
 *                           for every dtype: bench/RESULTS.md, "CPU training").
 *   On CUDA every strategy runs the same destination-owned kernels
 *   (docs/training.md, "The CUDA backward"): grad_Q by a warp per query
 *   token; grad_D by a warp per document row over its argmax hits sorted by
 *   row (padded cross / KD: 2 bytes per (query token, document) of lists,
 *   kept in grad_Q's buffer before grad_Q is written when grad_Q is
 *   requested and contiguous), else by tiles of document rows that gather
 *   their hits in order into an fp32 (fp64) shared-memory accumulator;
 *   gradients are written once in the input dtype.  No full-size fp32
 *   buffer: scratch is O(tokens) norms under normalize, for pair lists the
 *   pairs grouped by query and by document, and the lists where grad_Q's
 *   buffer cannot hold them (stream-ordered on opts->stream, from the
 *   lik's pool of the device: graph capturable; lik_experimental.h).  normalize with d larger than the
 *   shared-memory row (about 7000 features, 3500 for F64) returns
 *   LIK_ERR_UNSUPPORTED on CUDA.
 * - Errors as the matching forward, plus: LIK_ERR_DTYPE (grad_scores not
 *   F32/F64, argmax not I32, a gradient's dtype differs from its input),
 *   LIK_ERR_SHAPE (argmax / grad_scores / gradient shapes, a gradient with a
 *   zero stride over a dimension of size > 1), LIK_ERR_VALUE (argmax entry
 *   out of range, CPU), LIK_ERR_ALLOC, LIK_ERR_CUDA.
 * - CUDA tensors: every forward and backward of this section runs on the
 *   GPU, on opts->stream, without synchronising the host.  cu_seqlens and
 *   pair indices are device data that the library does not read on the host
 *   (that would synchronise), so the caller guarantees their values (the
 *   Python front checks a host copy); argmax likewise (see above).
 */

/* lik_maxsim_backward — gradients of lik_maxsim (cross or KD layout).
 *
 *   Q, D, q_mask, d_mask  exactly as passed to lik_maxsim.
 *   argmax       I32, scores.shape + [Lq], as written by lik_maxsim.
 *   grad_scores  F32 or F64 with the shape of lik_maxsim's scores.
 *   opts         normalize (must match the forward), num_threads, backward,
 *                stream (CUDA).
 *   grad_Q       NULL or Q's shape and dtype;  grad_D  NULL or D's.
 */
LIK_API lik_status lik_maxsim_backward(const lik_tensor *Q, const lik_tensor *D,
                                       const lik_tensor *q_mask,
                                       const lik_tensor *d_mask,
                                       const lik_tensor *argmax,
                                       const lik_tensor *grad_scores,
                                       const lik_options *opts,
                                       lik_tensor *grad_Q, lik_tensor *grad_D);

/* lik_maxsim_pairs_backward — gradients of lik_maxsim_pairs.
 *   Q [B, Lq, d], D [B, Ld, d], masks as lik_maxsim_pairs; argmax I32
 *   [B, Lq]; grad_scores F32/F64 [B]; grad_Q / grad_D NULL or like Q / D. */
LIK_API lik_status lik_maxsim_pairs_backward(const lik_tensor *Q,
                                             const lik_tensor *D,
                                             const lik_tensor *q_mask,
                                             const lik_tensor *d_mask,
                                             const lik_tensor *argmax,
                                             const lik_tensor *grad_scores,
                                             const lik_options *opts,
                                             lik_tensor *grad_Q,
                                             lik_tensor *grad_D);

/* lik_maxsim_varlen — MaxSim of every (query, document) pair of two packed
 * batches (the seed's maxsim_varlen; FlashAttention's cu_seqlens convention).
 *
 *   Q             [total_q, d]  F32/F16/BF16/F64; query i is rows
 *                 cu_seqlens_q[i] .. cu_seqlens_q[i+1]-1.
 *   D             [total_d, d]  same dtype and d; document j likewise.
 *   cu_seqlens_q  [Nq + 1] I32 or I64, any stride: starts at 0,
 *                 non-decreasing, last == total_q (else LIK_ERR_VALUE).
 *   cu_seqlens_d  [Nd + 1] likewise for D.
 *                 CUDA tensors: the kernels read the offsets (and
 *                 lik_score_pairs_packed's pair indices) on the device; the
 *                 host reads no value in device memory, so a call never
 *                 synchronises and can be captured in a CUDA graph (the
 *                 backwards too).  Those values are then not checked: the
 *                 caller guarantees the rules (malformed offsets or pair
 *                 indices are undefined behaviour), as in FlashAttention.
 *   q_mask        NULL or [total_q] BOOL/U8 (beyond the seed: masks and
 *   d_mask        NULL or [total_d]  normalize work on packed paths too).
 *   scores        F32 [Nq, Nd] (or F64 for F64 inputs).  An empty (or
 *                 fully masked) sequence scores 0.
 *   argmax        NULL or I32 [Nq, Nd, Lmax], Lmax >= the longest query:
 *                 argmax[i,j,s] = winning token of document j, counted from
 *                 the document's first row (0 .. Ld_j-1); -1 for s beyond
 *                 query i's length, masked query tokens, and documents
 *                 without a valid token; lowest index on ties.
 *   opts          as lik_maxsim, plus max_seqlen_q: 0, or a bound >= the
 *                 longest query (LIK_ERR_VALUE if negative, or shorter than
 *                 the longest query where cu_seqlens_q is read on the host).
 *                 On CUDA, where the lengths stay on the device, it sizes the
 *                 kernel's query blocks for a call without argmax (with one,
 *                 Lmax sizes them; with neither, Q's rows: correct, slower
 *                 for short queries).
 * On the CPU an Lmax or max_seqlen_q shorter than the longest query is an
 * error (LIK_ERR_SHAPE / LIK_ERR_VALUE).  On CUDA, where it is not checked,
 * it is memory-safe (here and in the backward: no access outside the
 * arguments, no argmax entry past Lmax); that query's scores and gradients
 * are undefined (its tokens past the bound may be left out).
 */
LIK_API lik_status lik_maxsim_varlen(const lik_tensor *Q, const lik_tensor *D,
                                     const lik_tensor *cu_seqlens_q,
                                     const lik_tensor *cu_seqlens_d,
                                     const lik_tensor *q_mask,
                                     const lik_tensor *d_mask,
                                     const lik_options *opts,
                                     lik_tensor *scores, lik_tensor *argmax);

/* lik_maxsim_varlen_backward — gradients of lik_maxsim_varlen: arguments as
 * there, argmax I32 [Nq, Nd, Lmax] from it, grad_scores F32/F64 [Nq, Nd],
 * grad_Q NULL or [total_q, d], grad_D NULL or [total_d, d] (input dtype). */
LIK_API lik_status lik_maxsim_varlen_backward(
    const lik_tensor *Q, const lik_tensor *D, const lik_tensor *cu_seqlens_q,
    const lik_tensor *cu_seqlens_d, const lik_tensor *q_mask,
    const lik_tensor *d_mask, const lik_tensor *argmax,
    const lik_tensor *grad_scores, const lik_options *opts, lik_tensor *grad_Q,
    lik_tensor *grad_D);

/* lik_score_pairs_packed — MaxSim of a list of (query, document) pairs of two
 * packed batches (the seed's score_pairs_packed): scores[p] = MaxSim(query
 * pair_q[p], document pair_d[p]).
 *
 *   Q, D, cu_seqlens_q, cu_seqlens_d, q_mask, d_mask, opts  as lik_maxsim_varlen.
 *   pair_q, pair_d  [P] I32 or I64, any stride; 0 <= pair_q[p] < Nq and
 *                   0 <= pair_d[p] < Nd (else LIK_ERR_VALUE naming p;
 *                   CUDA tensors: unchecked, as cu_seqlens).
 *                   Pairs may repeat and come in any order.
 *   scores          F32 [P] (or F64 for F64 inputs).
 *   argmax          NULL or I32 [P, Lmax], Lmax >= the longest query, entries
 *                   as in lik_maxsim_varlen.
 */
LIK_API lik_status lik_score_pairs_packed(const lik_tensor *Q, const lik_tensor *D,
                                          const lik_tensor *cu_seqlens_q,
                                          const lik_tensor *cu_seqlens_d,
                                          const lik_tensor *pair_q,
                                          const lik_tensor *pair_d,
                                          const lik_tensor *q_mask,
                                          const lik_tensor *d_mask,
                                          const lik_options *opts,
                                          lik_tensor *scores, lik_tensor *argmax);

/* lik_score_pairs_packed_backward — gradients of lik_score_pairs_packed:
 * arguments as there, argmax I32 [P, Lmax] from it, grad_scores F32/F64 [P],
 * grad_Q NULL or [total_q, d], grad_D NULL or [total_d, d].  A repeated pair
 * contributes once per occurrence. */
LIK_API lik_status lik_score_pairs_packed_backward(
    const lik_tensor *Q, const lik_tensor *D, const lik_tensor *cu_seqlens_q,
    const lik_tensor *cu_seqlens_d, const lik_tensor *pair_q,
    const lik_tensor *pair_d, const lik_tensor *q_mask, const lik_tensor *d_mask,
    const lik_tensor *argmax, const lik_tensor *grad_scores,
    const lik_options *opts, lik_tensor *grad_Q, lik_tensor *grad_D);

#ifdef __cplusplus
}
#endif

#endif /* LIK_H */
