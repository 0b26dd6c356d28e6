/*
 * topk.c — sorting hits and the R-way merge of sorted lists, both under
 * lik_topk_better (the merge is a binary heap of list heads, ties between
 * equal heads broken by the lower list index, so its result is unique).
 */
#include <stdlib.h>

#include "topk.h"

static int cmp_hit(const void *x, const void *y) {
  const lik_hit *a = (const lik_hit *)x, *b = (const lik_hit *)y;
  return lik_topk_better(a->s, a->i, b->s, b->i)   ? -1
         : lik_topk_better(b->s, b->i, a->s, a->i) ? 1
                                                   : 0;
}

void lik_hits_sort(lik_hit *h, int64_t n) {
  if (n > 1) qsort(h, (size_t)n, sizeof(lik_hit), cmp_hit);
}

/* Head of list r (at position pos[r]) ranks before the head of list t. */
static int head_better(const lik_topk_list *L, const int64_t *pos, int64_t r, int64_t t) {
  const float sr = L[r].s[pos[r] * L[r].ss], st = L[t].s[pos[t] * L[t].ss];
  const int64_t ir = L[r].i[pos[r] * L[r].is], it = L[t].i[pos[t] * L[t].is];
  if (lik_topk_better(sr, ir, st, it)) return 1;
  if (lik_topk_better(st, it, sr, ir)) return 0;
  return r < t;
}

static void sift_down(const lik_topk_list *L, const int64_t *pos, int64_t *h, int64_t n,
                      int64_t a) {
  for (;;) {
    int64_t b = a, c = 2 * a + 1;
    if (c < n && head_better(L, pos, h[c], h[b])) b = c;
    if (c + 1 < n && head_better(L, pos, h[c + 1], h[b])) b = c + 1;
    if (b == a) return;
    const int64_t t = h[a];
    h[a] = h[b];
    h[b] = t;
    a = b;
  }
}

int64_t lik_topk_merge_lists(const lik_topk_list *lists, int64_t R, int64_t k,
                             float *out_s, int64_t os, int64_t *out_i, int64_t oi,
                             int64_t *heap) {
  int64_t *pos = heap + R, n = 0, m = 0;
  for (int64_t r = 0; r < R; r++) {
    pos[r] = 0;
    if (lists[r].n > 0) heap[n++] = r;
  }
  for (int64_t a = n / 2 - 1; a >= 0; a--) sift_down(lists, pos, heap, n, a);
  while (m < k && n > 0) {
    const int64_t r = heap[0];
    out_s[m * os] = lists[r].s[pos[r] * lists[r].ss];
    out_i[m * oi] = lists[r].i[pos[r] * lists[r].is];
    m++;
    if (++pos[r] == lists[r].n) heap[0] = heap[--n];
    sift_down(lists, pos, heap, n, 0);
  }
  return m;
}
