/*
 * backward_internal.h — what the CPU backward files share: the per-ISA row
 * kernels over a lik_bw (src/core/problem.h) and their scratch size.
 *
 * Determinism: every gradient row is owned by one work item (a query for
 * grad_Q, a document for grad_D).  An item sums its terms into a private
 * accumulator in a fixed order (pairs ascending — cross: documents / queries
 * ascending, KD: candidates ascending, list: pair index ascending — then query
 * tokens ascending) and writes its rows once.  Which thread runs an item never
 * changes its arithmetic, so results are bitwise independent of the thread
 * count and of the strategy (lowmem and unified read identical row values).
 */
#ifndef LIK_CPU_BACKWARD_INTERNAL_H
#define LIK_CPU_BACKWARD_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/problem.h"

/* A backward call as the CPU runs it: the validated call plus the state of
 * the run. */
typedef struct lik_bw_cpu {
  lik_bw call;

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
} lik_bw_cpu;

/* Row kernels, one set per ISA.  scratch holds at least
 * lik_bw_scratch_elems(bw) elements of the compute type. */
typedef struct lik_bw_kernels {
  void (*query_item)(lik_bw_cpu *bw, int64_t n, void *scratch);
  void (*doc_item)(lik_bw_cpu *bw, int64_t n, void *scratch);
  void (*norm_item)(lik_bw_cpu *bw, int side, int64_t n); /* norms of sequence n */
  void (*ws_item)(lik_bw_cpu *bw, int side, int64_t n);   /* working copy of n */
} lik_bw_kernels;

extern const lik_bw_kernels lik_bw_kernels_portable_f32, lik_bw_kernels_portable_f64;
#if defined(__x86_64__)
extern const lik_bw_kernels lik_bw_kernels_avx2_f32, lik_bw_kernels_avx2_f64;
#elif defined(__aarch64__)
extern const lik_bw_kernels lik_bw_kernels_neon_f32, lik_bw_kernels_neon_f64;
extern const lik_bw_kernels lik_bw_kernels_sve_f32, lik_bw_kernels_sve_f64; /* SVE CPUs only */
#endif

int64_t lik_bw_scratch_elems(const lik_bw_cpu *bw);

#endif /* LIK_CPU_BACKWARD_INTERNAL_H */
