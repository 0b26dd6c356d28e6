/*
 * topk.h — CPU top-k building blocks under the one host order
 * (lik_topk_better, src/core/topk.h): sorting hits and merging sorted lists.
 * Used by lik_retrieve's streaming selection (retrieve.c) and by
 * lik_topk_merge (topk_merge.c).
 */
#ifndef LIK_CPU_TOPK_H
#define LIK_CPU_TOPK_H

#include "../core/topk.h"

typedef struct {
  float s;
  int64_t i;
} lik_hit;

/* Sorts n hits by lik_topk_better (distinct indices: one result). */
void lik_hits_sort(lik_hit *h, int64_t n);

/* Merges the R sorted lists into their best min(k, sum of lengths) entries,
 * written to (out_s[c * os], out_i[c * oi]) in order; returns how many.  Equal
 * (score, index) pairs of two lists come lower list first.  heap: scratch of
 * 2 * R int64.  The outputs must not overlap the lists. */
int64_t lik_topk_merge_lists(const lik_topk_list *lists, int64_t R, int64_t k,
                             float *out_s, int64_t os, int64_t *out_i, int64_t oi,
                             int64_t *heap);

#endif /* LIK_CPU_TOPK_H */
