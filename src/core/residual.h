/*
 * residual.h — the validated description of a codec / residual-scoring call
 * (lik_experimental.h), passed from src/api/codec.c and src/api/residual.c to
 * a backend.  Backends may assume everything here is valid: shapes agree,
 * dtypes are supported, codes and lengths are in range (host data), pointers
 * of non-empty tensors are set.  Also the one definition of the residual bit
 * layouts (lik_res_field / lik_res_byte).
 */
#ifndef LIK_CORE_RESIDUAL_H
#define LIK_CORE_RESIDUAL_H

#include "lik_experimental.h"
#include "problem.h"

/* A codec: centroids, and the cutoffs / weights the call needs (data NULL
 * where absent).  Vectors have 2^nbits - 1 (cutoffs) / 2^nbits entries. */
typedef struct {
  const void *cent;
  lik_dtype cent_dtype;
  int64_t ncent, dim, cent_sc, cent_sk; /* element (c, k) at c*cent_sc + k*cent_sk */
  const void *cutoffs, *weights;
  lik_dtype cutoffs_dtype, weights_dtype;
  int64_t cutoffs_s, weights_s;
  int nbits;
  lik_residual_layout layout;
  int64_t width; /* residual bytes per token: dim * nbits / 8 */
} lik_codec_view;

/* Compressed tokens.  Document n has lik_ct_len tokens; its token l is
 * flat token lik_ct_tok(n, l), whose code is codes[tok*code_s] and whose
 * residual byte p is res[tok*res_st + p*res_sp]; flat tokens are
 *   packed (offsets.data set):   row offsets[n] + l;
 *   padded (otherwise):          n*len + l, the code / residual views being
 *                                [count, len(, width)] with the strides
 *                                code_sn / res_sn for n (then code_s / res_st
 *                                stride l);
 * lengths.data NULL with offsets.data NULL: every document has len tokens.
 * Packed with res_rows.data set (the CPU backend's scoring; the PLAID search
 * sets it to read a chunk's residuals in place): the residual bytes of token l
 * of document n are row res_rows[n] + l of res instead. */
typedef struct {
  const void *codes;
  lik_dtype codes_dtype; /* I32 or I64 */
  int64_t code_sn, code_s;
  const uint8_t *res;
  int64_t res_sn, res_st, res_sp;
  int64_t count, len; /* documents; padded Ld, or the longest (-1: unknown, CUDA) */
  lik_index lengths;  /* padded: doc_lengths */
  lik_index offsets;  /* packed: cu_seqlens_d */
  lik_index res_rows; /* packed, CPU scoring: each document's first residual row (or data NULL) */
} lik_ctokens;

static inline int64_t lik_ct_len(const lik_ctokens *c, int64_t n) {
  if (c->offsets.data) return lik_index_at(&c->offsets, n + 1) - lik_index_at(&c->offsets, n);
  return c->lengths.data ? lik_index_at(&c->lengths, n) : c->len;
}

/* Total flat tokens (packed: offsets[count]; padded: count * len). */
static inline int64_t lik_ct_ntok(const lik_ctokens *c) {
  return c->offsets.data ? lik_index_at(&c->offsets, c->count) : c->count * c->len;
}

static inline int64_t lik_ct_tok(const lik_ctokens *c, int64_t n, int64_t l) {
  return c->offsets.data ? lik_index_at(&c->offsets, n) + l : n * c->len + l;
}

/* Element offsets of the code / first residual byte of token l of document n. */
static inline int64_t lik_ct_code_off(const lik_ctokens *c, int64_t n, int64_t l) {
  return c->offsets.data ? (lik_index_at(&c->offsets, n) + l) * c->code_s
                         : n * c->code_sn + l * c->code_s;
}
static inline int64_t lik_ct_res_off(const lik_ctokens *c, int64_t n, int64_t l) {
  if (!c->offsets.data) return n * c->res_sn + l * c->res_st;
  return (lik_index_at(c->res_rows.data ? &c->res_rows : &c->offsets, n) + l) * c->res_st;
}

static inline int64_t lik_ct_code(const lik_ctokens *c, int64_t off) {
  return c->codes_dtype == LIK_I32 ? (int64_t)((const int32_t *)c->codes)[off]
                                   : ((const int64_t *)c->codes)[off];
}

/* ---- the bit layouts and the bucket rule (the one definition; also CUDA
 * device code's: src/cuda/codec.cuh) ---- */

#ifdef __CUDACC__
#define LIK_HD __host__ __device__
#else
#define LIK_HD
#endif

LIK_HD static inline uint8_t lik_reverse8(uint8_t b) {
  b = (uint8_t)((b & 0xf0u) >> 4 | (b & 0x0fu) << 4);
  b = (uint8_t)((b & 0xccu) >> 2 | (b & 0x33u) << 2);
  return (uint8_t)((b & 0xaau) >> 1 | (b & 0x55u) << 1);
}

/* Bucket index of field i (dimension p * 8/nbits + i of byte p). */
LIK_HD static inline unsigned lik_res_field(uint8_t byte, int i, int nbits, lik_residual_layout layout) {
  if (layout == LIK_RESIDUAL_COLBERT) byte = lik_reverse8(byte);
  return (unsigned)(byte >> (i * nbits)) & ((1u << nbits) - 1u);
}

/* The byte holding the 8/nbits bucket indices b[0 ..] (inverse of lik_res_field). */
/* The byte of bucket indices packed in the LIK order in v (field i at bits
 * i * nbits): as it is (LIK), bit-reversed (COLBERT). */
LIK_HD static inline uint8_t lik_res_byte_of(unsigned v, lik_residual_layout layout) {
  return layout == LIK_RESIDUAL_COLBERT ? lik_reverse8((uint8_t)v) : (uint8_t)v;
}

LIK_HD static inline uint8_t lik_res_byte(const uint8_t *b, int nbits, lik_residual_layout layout) {
  unsigned v = 0;
  for (int i = 0; i < 8 / nbits; i++) v |= (unsigned)b[i] << (i * nbits);
  return lik_res_byte_of(v, layout);
}

/* The bucket of residual value r (x_k - c_k in fp32): the number of the ncut
 * fp32 cutoffs strictly below r (NaN: 0). */
LIK_HD static inline int lik_res_bucket(const float *cut, int ncut, float r) {
  int b = 0;
  for (int i = 0; i < ncut; i++) b += cut[i] < r;
  return b;
}

/* ---- validated calls ---- */

/* lik_codec_compress / lik_codec_decompress: x is [T, d] as a lik_seqs with
 * count 1, len T (X, or the output of decompress), tok the [T] codes and
 * [T, width] residuals (count 1, len T).  Compress with tok.res NULL (and no
 * cutoffs) writes the codes only (the PLAID index's k-means assignment). */
typedef struct {
  lik_call call;
  lik_codec_view codec;
  lik_seqs x;
  lik_ctokens tok;
} lik_codec_problem;

/* lik_maxsim_residual(_varlen): queries q (padded, q.count queries of q.len
 * tokens), documents d; output (i, j) in out (scores F32, argmax NULL: not
 * wanted). */
typedef struct {
  lik_call call;
  lik_seqs q;
  lik_ctokens d;
  lik_codec_view codec;
  lik_out out;
} lik_residual_problem;

/* PLAID's centroid scores: score (i, s, c) of query i, query token s and
 * centroid c at data[i*si + s*ss + c*sc] (F32/F16/BF16), i < nq, s < lq,
 * c < ncent.  No field to resolve for a device: the CUDA kernel reads this
 * view as it is (src/cuda/residual.cuh, KApprox). */
typedef struct {
  const void *data;
  lik_dtype dtype;
  int64_t nq, lq, ncent, si, ss, sc;
} lik_cscores;

/* lik_plaid_approx_score: centroid scores cs, documents d (packed). */
typedef struct {
  lik_call call;
  lik_cscores cs;
  lik_ctokens d;
  float *scores;
  int64_t score_si, score_sj;
} lik_approx_problem;

/* Backends (src/cpu/codec.c, src/cpu/residual.c, src/cuda/residual.cu). */
/* ctx: the context whose workspace holds the sorted sample. */
lik_status lik_cpu_codec_train(lik_context *ctx, const lik_tensor *residuals, int nbits,
                               float *cutoffs, int64_t cutoffs_s, float *weights,
                               int64_t weights_s);
lik_status lik_cpu_codec_compress(const lik_codec_problem *p);
lik_status lik_cpu_codec_decompress(const lik_codec_problem *p);
lik_status lik_cpu_maxsim_residual(const lik_residual_problem *p);
lik_status lik_cpu_plaid_approx(const lik_approx_problem *p);
/* Centroid scores for the PLAID index (src/index): out[c * lqp + l] =
 * sum_k cent[c * d + k] * qt[k * lqp + l] for c < ncent, l < lqp (lqp a
 * multiple of 32; qt [d][lqp] fp32), over nth threads; each value one fp32
 * chain in ascending k (independent of the thread count). */
void lik_cpu_centroid_scores(const lik_context *ctx, int nth, const float *qt, int64_t lqp,
                             const float *cent, int64_t ncent, int64_t d, float *out);
lik_status lik_cuda_codec_compress(const lik_codec_problem *p);
lik_status lik_cuda_codec_decompress(const lik_codec_problem *p);
/* The compress of host data on CUDA device p->call.device_id (src/cuda/codec.cu;
 * the PLAID index's build with a device): every pointer of p on the host; the
 * CPU's codes and residual bytes, bit for bit (the CPU's FMA paths: AVX2,
 * AVX-512, NEON, SVE), and its error for a token without a finite best
 * centroid.  Synchronous, on p->call.stream.  keep: NULL, or a handle (*keep
 * NULL at first; free it with lik_cuda_staged_free) that keeps the device
 * buffers between calls, and what `same` says the caller did not change
 * since the last call on it (checked against the pointers and sizes, the
 * contents trusted): LIK_CUDA_SAME_ROWS the tokens (k-means' assignment
 * passes: kept on the device), LIK_CUDA_SAME_CODEC the centroids and
 * cutoffs (an add's batches: not copied again). */
#define LIK_CUDA_SAME_ROWS 1u
#define LIK_CUDA_SAME_CODEC 2u
typedef struct lik_cuda_staged lik_cuda_staged;
lik_status lik_cuda_codec_compress_host(const lik_codec_problem *p, lik_cuda_staged **keep,
                                        unsigned same);
void lik_cuda_staged_free(lik_cuda_staged *s);
lik_status lik_cuda_maxsim_residual(const lik_residual_problem *p);
lik_status lik_cuda_plaid_approx(const lik_approx_problem *p);

#endif /* LIK_CORE_RESIDUAL_H */
