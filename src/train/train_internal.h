/*
 * train_internal.h — what the training files (src/train/) share: the
 * description of one backward call and the per-ISA row kernels.
 *
 * A backward call is a validated lik_problem (the forward's description:
 * sequences, masks, pairing, argmax) plus grad_scores and the two gradient
 * outputs, which are lik_seqs over the caller's grad_Q / grad_D views (same
 * count / len / dim / offsets as p.q / p.d, their own strides and dtype).
 *
 * Determinism: every gradient row is owned by one work item (a query for
 * grad_Q, a document for grad_D).  An item sums its terms into a private
 * accumulator in a fixed order (pairs ascending — cross: documents / queries
 * ascending, KD: candidates ascending, list: pair index ascending — then query
 * tokens ascending) and writes its rows once.  Which thread runs an item never
 * changes its arithmetic, so results are bitwise independent of the thread
 * count and of the strategy (lowmem and unified read identical row values).
 */
#ifndef LIK_TRAIN_INTERNAL_H
#define LIK_TRAIN_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "../problem.h"

#define LIK_NORM_EPS 1e-12

typedef struct lik_bw {
  lik_problem p; /* forward description; p.argmax required */

  /* grad_scores of output (i, j): gs[i*gs_si + j*gs_sj], F32 or F64. */
  const void *gs;
  lik_dtype gs_dtype;
  int64_t gs_si, gs_sj;

  /* Outputs (data NULL: skip).  Same geometry as p.q / p.d. */
  lik_seqs gq, gd;

  /* LIK_PAIRING_LIST: pairs grouped by query and by document (CSR), each
   * group in ascending pair order. */
  const int64_t *q_start, *q_pairs; /* [nq+1], [P] */
  const int64_t *d_start, *d_pairs; /* [nd+1], [P] */

  /* normalize: per-token norms ||x|| in the compute type, indexed by token
   * index (lik_bw_tok). */
  const void *q_norm, *d_norm;

  /* unified: full-size working copies (normalised, compute type), row of
   * token index t at ws + t*dim; NULL under lowmem. */
  const void *q_ws, *d_ws;

  int64_t lq_max, ld_max; /* longest sequence of each side */
  int use_f64;            /* compute type double (F64 inputs) */

  atomic_int bad;         /* set when an argmax entry is out of range */
  atomic_llong bad_where; /* first detected: item index (diagnostic)  */
} lik_bw;

/* Token index of (n, l): packed row, or n*len + l. */
static inline int64_t lik_bw_tok(const lik_seqs *s, int64_t n, int64_t l) {
  return s->offsets.data ? lik_index_at(&s->offsets, n) + l : n * s->len + l;
}

/* Total number of token indices of a side. */
static inline int64_t lik_bw_ntok(const lik_seqs *s) {
  return s->offsets.data ? lik_index_at(&s->offsets, s->count) : s->count * s->len;
}

/* Row kernels, one set per ISA.  scratch holds at least
 * lik_bw_scratch_elems(bw) elements of the compute type. */
typedef struct {
  void (*query_item)(lik_bw *bw, int64_t n, void *scratch);
  void (*doc_item)(lik_bw *bw, int64_t n, void *scratch);
  void (*norm_item)(lik_bw *bw, int side, int64_t n); /* norms of sequence n */
  void (*ws_item)(lik_bw *bw, int side, int64_t n);   /* working copy of n */
} lik_bw_kernels;

extern const lik_bw_kernels lik_bw_kernels_portable_f32, lik_bw_kernels_portable_f64;
#if defined(__x86_64__)
extern const lik_bw_kernels lik_bw_kernels_avx2_f32, lik_bw_kernels_avx2_f64;
#endif

int64_t lik_bw_scratch_elems(const lik_bw *bw);

/* Runs the backward described by bw (validated) on the CPU. */
lik_status lik_cpu_maxsim_backward(lik_bw *bw, lik_backward strategy);

#endif /* LIK_TRAIN_INTERNAL_H */
