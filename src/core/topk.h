/*
 * topk.h — the deterministic top-k order of the host backends, and the
 * validated call of lik_topk_merge (include/lik_experimental.h).
 *
 * The order (lik_retrieve's and lik_topk_merge's, one definition on the host):
 * a hit (score, index) ranks before another when its score is larger; NaN
 * ranks below every number; equal scores (-0 == +0, and NaN == NaN) rank the
 * lower index first.  It is total over distinct indices, so a sort or a merge
 * under it has one result.  The CUDA backend writes the same rule in device
 * code (src/cuda/retrieve.cuh).
 */
#ifndef LIK_TOPK_H
#define LIK_TOPK_H

#include <math.h>

#include "problem.h"

/* (sa, ia) ranks before (sb, ib). */
static inline int lik_topk_better(float sa, int64_t ia, float sb, int64_t ib) {
  const int na = isnan(sa), nb = isnan(sb);
  if (na || nb) return na == nb ? ia < ib : nb;
  if (sa != sb) return sa > sb;
  return ia < ib;
}

/* One sorted candidate list: entry p is (s[p * ss], i[p * is]), p < n. */
typedef struct {
  const float *s;
  const int64_t *i;
  int64_t ss, is, n;
} lik_topk_list;

/* The validated lik_topk_merge call: list r of query q is entries
 * c < len(r, q) of scores[r*s_r + q*s_q + c*s_c] / indices[r*i_r + q*i_q +
 * c*i_c]; len(r, q) = K without lengths, else lengths[r*l_r + q*l_q].
 * Output (q, c), c < k: out_s[q*o_sq + c*o_sc], out_i[q*o_iq + c*o_ic]. */
typedef struct {
  lik_call call; /* context (its workspace holds the scratch), threads */
  const float *s;
  const int64_t *ix;
  const int64_t *len; /* NULL: every list holds K entries */
  int64_t R, nq, K, k;
  int64_t s_r, s_q, s_c, i_r, i_q, i_c, l_r, l_q;
  float *out_s;
  int64_t *out_i;
  int64_t o_sq, o_sc, o_iq, o_ic;
} lik_merge;

/* List r of query q of m. */
static inline lik_topk_list lik_merge_list(const lik_merge *m, int64_t r, int64_t q) {
  lik_topk_list l;
  l.s = m->s ? m->s + r * m->s_r + q * m->s_q : NULL;
  l.i = m->ix ? m->ix + r * m->i_r + q * m->i_q : NULL;
  l.ss = m->s_c;
  l.is = m->i_c;
  l.n = m->len ? m->len[r * m->l_r + q * m->l_q] : m->K;
  return l;
}

/* The checks of m's data (src/core/topk.c): every length in [0, K], every
 * list sorted by lik_topk_better, at least k candidates per query.  Returns
 * LIK_OK or LIK_ERR_VALUE naming the list, the query and the sizes. */
lik_status lik_check_merge_lists(const lik_merge *m);

/* Backend (src/cpu/topk_merge.c): writes the best k of every query's R lists. */
lik_status lik_cpu_topk_merge(const lik_merge *m);

#endif /* LIK_TOPK_H */
