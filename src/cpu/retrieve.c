/*
 * retrieve.c — exact top-k by MaxSim without an [Nq, Nd] score matrix.
 * Documents stream in blocks of LIK_RETRIEVE_BLOCK: the threaded driver
 * scores a block into scratch [Nq, block], then each query's block is merged
 * into its running top-k, which lives in the caller's output arrays (sorted
 * by score descending, then document index ascending).  Scratch is
 * O(Nq * block + k).
 *
 * Order is total and deterministic even with NaN scores: NaN ranks below
 * every number (then by index), so qsort's result is unique.
 */
#include <math.h>
#include <stdlib.h>

#include "../core/checked.h"
#include "cpu_internal.h"

#define LIK_RETRIEVE_BLOCK 2048

typedef struct {
  float s;
  int64_t i;
} hit;

/* a ranks before b. */
static int better(const hit *a, const hit *b) {
  int na = isnan(a->s), nb = isnan(b->s);
  if (na || nb) return na == nb ? a->i < b->i : nb;
  if (a->s != b->s) return a->s > b->s;
  return a->i < b->i;
}

static int cmp_hit(const void *x, const void *y) {
  const hit *a = (const hit *)x, *b = (const hit *)y;
  return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

lik_status lik_cpu_retrieve(const lik_problem *p, int64_t k, float *out_scores,
                            int64_t out_si, int64_t out_sr, int64_t *out_indices,
                            int64_t idx_si, int64_t idx_sr) {
  const int64_t nq = p->q.count, nd = p->d.count;
  if (k > nd) k = nd;
  if (nq <= 0 || k <= 0) return LIK_OK;
  const int64_t B = nd < LIK_RETRIEVE_BLOCK ? nd : LIK_RETRIEVE_BLOCK;
  int64_t nblk = 0, nmrg = 0;
  size_t blk_bytes = 0, mrg_bytes = 0;
  const int sizes_ok = !lik_mul_i64(nq, B, &nblk) && !lik_bytes(nblk, sizeof(float), &blk_bytes) &&
                       !lik_add_i64(k, B, &nmrg) && !lik_bytes(nmrg, sizeof(hit), &mrg_bytes);
  float *blk = sizes_ok ? (float *)malloc(blk_bytes) : NULL;
  hit *col = (hit *)malloc((size_t)B * sizeof(hit));
  hit *mrg = sizes_ok ? (hit *)malloc(mrg_bytes) : NULL;
  int64_t *cnt = (int64_t *)calloc((size_t)nq, sizeof(int64_t));
  lik_status st = LIK_OK;
  if (!blk || !col || !mrg || !cnt) {
    st = lik_fail(LIK_ERR_ALLOC, "retrieve: cannot allocate scratch for Nq=%lld, block=%lld, k=%lld",
                  (long long)nq, (long long)B, (long long)k);
    goto done;
  }
  for (int64_t j0 = 0; j0 < nd; j0 += B) {
    lik_cpu_out o;
    o.cbeg = j0;
    o.cend = j0 + B < nd ? j0 + B : nd;
    o.scores = blk;
    o.si = B;
    o.sj = 1;
    o.argmax = NULL;
    o.asi = o.asj = o.ass = 0;
    st = lik_cpu_run(p, &o);
    if (st != LIK_OK) goto done;
    for (int64_t i = 0; i < nq; i++) {
      float *os = out_scores + i * out_si;
      int64_t *oi = out_indices + i * idx_si;
      int64_t n = cnt[i], nc = 0;
      hit worst = {0.0f, 0};
      if (n == k) { worst.s = os[(k - 1) * out_sr]; worst.i = oi[(k - 1) * idx_sr]; }
      for (int64_t j = o.cbeg; j < o.cend; j++) {
        hit h = {blk[i * B + (j - j0)], j};
        if (n < k || better(&h, &worst)) col[nc++] = h;
      }
      if (!nc) continue;
      qsort(col, (size_t)nc, sizeof(hit), cmp_hit);
      /* Merge the kept list with the sorted newcomers, keep the best k. */
      int64_t a = 0, b = 0, m = 0;
      while (m < k && (a < n || b < nc)) {
        hit ha;
        if (a < n) { ha.s = os[a * out_sr]; ha.i = oi[a * idx_sr]; }
        if (b >= nc || (a < n && better(&ha, &col[b]))) { mrg[m++] = ha; a++; }
        else mrg[m++] = col[b++];
      }
      for (int64_t r = 0; r < m; r++) { os[r * out_sr] = mrg[r].s; oi[r * idx_sr] = mrg[r].i; }
      cnt[i] = m;
    }
  }
done:
  free(blk);
  free(col);
  free(mrg);
  free(cnt);
  return st;
}
