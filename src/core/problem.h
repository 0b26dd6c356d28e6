/*
 * problem.h — the validated description of one MaxSim call, passed from the
 * public entry points (src/api/maxsim.c, which validates once) to a backend
 * (src/cpu/, src/cuda/).  Backends may assume everything here is valid:
 * shapes agree, dtypes are supported, pointers of non-empty tensors are set.
 */
#ifndef LIK_PROBLEM_H
#define LIK_PROBLEM_H

#include "call.h"

/* An integer vector (cu_seqlens, pair indices) of I32 or I64. */
typedef struct {
  const void *data; /* NULL = absent */
  lik_dtype dtype;  /* LIK_I32 or LIK_I64 */
  int64_t stride;   /* in elements */
} lik_index;

static inline int64_t lik_index_at(const lik_index *ix, int64_t i) {
  return ix->dtype == LIK_I32
             ? (int64_t)((const int32_t *)ix->data)[i * ix->stride]
             : ((const int64_t *)ix->data)[i * ix->stride];
}

/* A batch of token sequences.
 * Padded:  token (n, l), feature k at element n*sn + l*sl + k*sk.
 * Grouped (group > 0; the KD layout D[Nq, K, Ld, d] with any strides):
 *          sequence n = g*group + r starts at element g*sg + r*sn.
 * Packed (offsets.data != NULL, FlashAttention's cu_seqlens): sequence n is
 *          rows offsets[n] .. offsets[n+1]-1 of a [total, dim] tensor; token
 *          (n, l) is row r = offsets[n] + l at element r*sl + k*sk (sn = 0).
 * len is the (maximum) number of tokens per sequence.
 * Lengths (padded or grouped only; lens != NULL, lik_options' q_lengths /
 *          d_lengths): sequence n has min(max(lens[i], 0), len) tokens,
 *          i = n*lens_sn (grouped: g*lens_sg + r*lens_sn), a prefix mask. */
typedef struct {
  const void *data;
  lik_dtype dtype; /* F32, F16, BF16 or F64 */
  int64_t count, len, dim;
  int64_t sn, sl, sk;
  int64_t group, sg; /* group = 0: not grouped */
  lik_index offsets;
  const int32_t *lens;
  int64_t lens_sn, lens_sg;
} lik_seqs;

/* A token mask over a lik_seqs: token (n, l) (padded) or packed row r is
 * valid iff data == NULL or data[n*sn + l*sl] != 0 (packed: data[r*sl];
 * grouped as the lik_seqs: data[g*sg + r*sn + l*sl]). */
typedef struct {
  const uint8_t *data;
  int64_t sn, sl, sg;
} lik_mask;

/* Which (query, document) pairs are scored. */
typedef enum {
  LIK_PAIRING_CROSS = 0, /* every (i, j): out (i, j), i < nq, j < d.count    */
  LIK_PAIRING_KD = 1,    /* (i, i*ncand + k): out (i, k), k < ncand           */
  LIK_PAIRING_LIST = 2   /* (pair_q[p], pair_d[p]): out (0, p), p < ncand     */
} lik_pairing;

/* A forward's outputs: output (i, j) of its pairing at
 * scores[i*score_si + j*score_sj], F32 (scores) or, for F64 inputs only, F64
 * (scores_f64); one is set.  NULL or argmax[i*argmax_si + j*argmax_sj +
 * s*argmax_ss] for query token s. */
typedef struct {
  float *scores;
  double *scores_f64;
  int64_t score_si, score_sj;
  int32_t *argmax;
  int64_t argmax_si, argmax_sj, argmax_ss;
} lik_out;

typedef struct {
  lik_call call; /* where it runs, threads, normalize, tf32 */
  lik_seqs q, d;
  lik_mask q_mask, d_mask;
  lik_pairing pairing;
  int64_t ncand;         /* cross: d.count; KD: K; list: number of pairs */
  lik_index pair_q, pair_d; /* LIK_PAIRING_LIST only */
  lik_out out;              /* output (i, j) of the pairing above */
} lik_problem;

/* One backward call: a validated lik_problem (the forward's description:
 * sequences, masks, pairing, argmax) plus grad_scores and the two gradient
 * outputs, which are lik_seqs over the caller's grad_Q / grad_D views (same
 * count / len / dim / offsets as p.q / p.d, their own strides and dtype). */
typedef struct lik_bw {
  lik_problem p; /* forward description; p.out.argmax required */

  /* grad_scores of output (i, j): gs[i*gs_si + j*gs_sj], F32 or F64. */
  const void *gs;
  lik_dtype gs_dtype;
  int64_t gs_si, gs_sj;

  /* Outputs (data NULL: skip).  Same geometry as p.q / p.d. */
  lik_seqs gq, gd;

  /* Packed layouts: rows of Q / D (the CUDA backend, which does not read
   * cu_seqlens on the host, sizes its grid by them). */
  int64_t q_total, d_total;
} lik_bw;

/* Token index of (n, l): packed row, or n*len + l. */
static inline int64_t lik_bw_tok(const lik_seqs *s, int64_t n, int64_t l) {
  return s->offsets.data ? lik_index_at(&s->offsets, n) + l : n * s->len + l;
}

/* Total number of token indices of a side. */
static inline int64_t lik_bw_ntok(const lik_seqs *s) {
  return s->offsets.data ? lik_index_at(&s->offsets, s->count) : s->count * s->len;
}

/* Token (n, l) of a sequence batch: element offset of feature 0. */
static inline int64_t lik_token_offset(const lik_seqs *s, int64_t n, int64_t l) {
  if (s->offsets.data) return (lik_index_at(&s->offsets, n) + l) * s->sl;
  if (s->group > 0) return (n / s->group) * s->sg + (n % s->group) * s->sn + l * s->sl;
  return n * s->sn + l * s->sl;
}

/* The given length of padded sequence n (s->lens set), unclamped. */
static inline int64_t lik_lens_at(const lik_seqs *s, int64_t n) {
  return s->group > 0 ? s->lens[(n / s->group) * s->lens_sg + (n % s->group) * s->lens_sn]
                      : s->lens[n * s->lens_sn];
}

/* Number of tokens of sequence n. */
static inline int64_t lik_seq_len(const lik_seqs *s, int64_t n) {
  if (s->offsets.data) return lik_index_at(&s->offsets, n + 1) - lik_index_at(&s->offsets, n);
  if (!s->lens) return s->len;
  const int64_t v = lik_lens_at(s, n);
  return v < 0 ? 0 : v > s->len ? s->len : v;
}

/* Whether token (n, l) is valid under a mask over s. */
static inline int lik_mask_valid(const lik_mask *m, const lik_seqs *s,
                                 int64_t n, int64_t l) {
  if (!m->data) return 1;
  if (s->offsets.data) return m->data[(lik_index_at(&s->offsets, n) + l) * m->sl] != 0;
  if (s->group > 0)
    return m->data[(n / s->group) * m->sg + (n % s->group) * m->sn + l * m->sl] != 0;
  return m->data[n * m->sn + l * m->sl] != 0;
}

/* Error reporting (src/core/error.c): records a thread-local message built from
 * printf-style arguments and returns status, so callers write
 *   return lik_fail(LIK_ERR_SHAPE, "D: d=%lld does not match ...", ...); */
lik_status lik_fail(lik_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* L2 normalisation x / max(||x||, LIK_NORM_EPS), as torch.nn.functional.normalize. */
#define LIK_NORM_EPS 1e-12

/* Backends.  Each returns LIK_OK or a status set through lik_fail. */
lik_status lik_cpu_maxsim(const lik_problem *p);
/* Exact top-k over a cross-pairing problem (p->out unused): writes
 * k = min(top_k, d.count) results per query, scores descending, ties by lower
 * document index; row i at out_scores[i*out_si + r*out_sr], same for indices. */
lik_status lik_cpu_retrieve(const lik_problem *p, int64_t k, float *out_scores,
                            int64_t out_si, int64_t out_sr, int64_t *out_indices,
                            int64_t idx_si, int64_t idx_sr);

/* Runs the backward described by bw (validated) on the CPU; strategy is
 * lowmem or unified (auto resolved by the caller or here). */
lik_status lik_cpu_maxsim_backward(const lik_bw *bw, lik_backward strategy);

lik_status lik_cuda_maxsim(const lik_problem *p);
lik_status lik_cuda_retrieve(const lik_problem *p, int64_t k, float *out_scores,
                             int64_t out_si, int64_t out_sr, int64_t *out_indices,
                             int64_t idx_si, int64_t idx_sr);
/* Runs the backward described by bw (validated) on the GPU, on p.call.stream,
 * without host synchronisation: every strategy is the deterministic,
 * destination-owned one (src/cuda/backward.cu).  Packed: p.q.len is the
 * argmax extent (>= every query's length), cu_seqlens / pair indices stay on
 * the device, q_total / d_total are the rows of Q / D. */
lik_status lik_cuda_maxsim_backward(const lik_bw *bw, lik_backward strategy);

#endif /* LIK_PROBLEM_H */
