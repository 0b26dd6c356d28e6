/*
 * retrieve.c — exact top-k by MaxSim without an [Nq, Nd] score matrix.
 * Documents stream in blocks of LIK_RETRIEVE_BLOCK: the threaded driver
 * scores a block into scratch [Nq, block], then each query's block is merged
 * into its running top-k, which lives in the caller's output arrays (sorted
 * by score descending, then document index ascending).  Scratch is
 * O(Nq * block + k), from the context's workspace (src/core/workspace.h).
 *
 * Order: lik_topk_better (src/core/topk.h; NaN ranks below every number,
 * ties by lower index), the sort and the merge of src/cpu/topk.c.
 */
#include "../core/checked.h"
#include "cpu_internal.h"
#include "topk.h"

#define LIK_RETRIEVE_BLOCK 2048

lik_status lik_cpu_retrieve(const lik_problem *p, int64_t k, float *out_scores,
                            int64_t out_si, int64_t out_sr, int64_t *out_indices,
                            int64_t idx_si, int64_t idx_sr) {
  const int64_t nq = p->q.count, nd = p->d.count;
  if (k > nd) k = nd;
  if (nq <= 0 || k <= 0) return LIK_OK;
  const int64_t B = nd < LIK_RETRIEVE_BLOCK ? nd : LIK_RETRIEVE_BLOCK;
  int64_t nblk = 0, ncand = 0;
  size_t blk_bytes = 0;
  const int sizes_ok = !lik_mul_i64(nq, B, &nblk) && !lik_bytes(nblk, sizeof(float), &blk_bytes) &&
                       !lik_add_i64(B, k, &ncand);
  lik_ws ws;
  lik_ws_open(&ws, p->call.context);
  float *blk = sizes_ok ? (float *)lik_ws_alloc(&ws, blk_bytes) : NULL;
  lik_hit *col = (lik_hit *)lik_ws_array(&ws, B, sizeof(lik_hit), 0);
  float *cs = sizes_ok ? (float *)lik_ws_array(&ws, ncand, sizeof(float), 0) : NULL;
  int64_t *ci = sizes_ok ? (int64_t *)lik_ws_array(&ws, ncand, sizeof(int64_t), 0) : NULL;
  int64_t *cnt = (int64_t *)lik_ws_array(&ws, nq, sizeof(int64_t), 1);
  int64_t heap[4];
  lik_status st = LIK_OK;
  if (!blk || !col || !cs || !ci || !cnt) {
    st = lik_fail(LIK_ERR_ALLOC,
                  "retrieve: cannot allocate scratch for Nq=%lld, block=%lld, k=%lld (%zu bytes "
                  "of block scores)",
                  (long long)nq, (long long)B, (long long)k, blk_bytes);
    goto done;
  }
  /* cs/ci[0, B): the sorted newcomers of a query; [B, B + k): the merge. */
  float *ms = cs + B;
  int64_t *mi = ci + B;
  for (int64_t j0 = 0; j0 < nd; j0 += B) {
    lik_cpu_out o;
    o.cbeg = j0;
    o.cend = j0 + B < nd ? j0 + B : nd;
    o.out = (lik_out){0};
    o.out.scores = blk;
    o.out.score_si = B;
    o.out.score_sj = 1;
    st = lik_cpu_run(p, &o);
    if (st != LIK_OK) goto done;
    for (int64_t i = 0; i < nq; i++) {
      float *os = out_scores + i * out_si;
      int64_t *oi = out_indices + i * idx_si;
      const int64_t n = cnt[i];
      int64_t nc = 0;
      const float ws = n == k ? os[(k - 1) * out_sr] : 0.0f; /* the k-th kept, once full */
      const int64_t wi = n == k ? oi[(k - 1) * idx_sr] : 0;
      for (int64_t j = o.cbeg; j < o.cend; j++) {
        const float s = blk[i * B + (j - j0)];
        if (n < k || lik_topk_better(s, j, ws, wi)) {
          col[nc].s = s;
          col[nc++].i = j;
        }
      }
      if (!nc) continue;
      lik_hits_sort(col, nc);
      for (int64_t b = 0; b < nc; b++) { cs[b] = col[b].s; ci[b] = col[b].i; }
      /* Merge the kept list with the sorted newcomers, keep the best k. */
      const lik_topk_list lists[2] = {{os, oi, out_sr, idx_sr, n}, {cs, ci, 1, 1, nc}};
      const int64_t m = lik_topk_merge_lists(lists, 2, k, ms, 1, mi, 1, heap);
      for (int64_t r = 0; r < m; r++) { os[r * out_sr] = ms[r]; oi[r * idx_sr] = mi[r]; }
      cnt[i] = m;
    }
  }
done:
  lik_ws_close(&ws);
  return st;
}
