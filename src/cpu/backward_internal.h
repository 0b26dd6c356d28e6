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

#include <stdint.h>

#include "../core/problem.h"

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

#endif /* LIK_CPU_BACKWARD_INTERNAL_H */
