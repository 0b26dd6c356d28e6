/* topk.c — the data checks of lik_topk_merge (lengths, order, enough candidates). */
#include "topk.h"

lik_status lik_check_merge_lists(const lik_merge *m) {
  for (int64_t q = 0; q < m->nq; q++)
    for (int64_t r = 0; r < m->R; r++) {
      const lik_topk_list l = lik_merge_list(m, r, q);
      if (l.n < 0 || l.n > m->K)
        return lik_fail(LIK_ERR_VALUE,
                        "lengths: entry [%lld, %lld] = %lld is outside [0, K=%lld]",
                        (long long)r, (long long)q, (long long)l.n, (long long)m->K);
      for (int64_t c = 1; c < l.n; c++)
        if (!lik_topk_better(l.s[(c - 1) * l.ss], l.i[(c - 1) * l.is], l.s[c * l.ss],
                             l.i[c * l.is]))
          return lik_fail(LIK_ERR_VALUE,
                          "scores/indices: list %lld of query %lld is not sorted (score "
                          "descending, NaN last, ties by lower index) at entries %lld, %lld: "
                          "(%g, %lld) then (%g, %lld)",
                          (long long)r, (long long)q, (long long)(c - 1), (long long)c,
                          (double)l.s[(c - 1) * l.ss], (long long)l.i[(c - 1) * l.is],
                          (double)l.s[c * l.ss], (long long)l.i[c * l.is]);
    }
  for (int64_t q = 0; q < m->nq; q++) {
    int64_t total = 0;
    for (int64_t r = 0; r < m->R; r++) total += lik_merge_list(m, r, q).n;
    if (total < m->k)
      return lik_fail(LIK_ERR_VALUE,
                      "top_k=%lld exceeds the %lld candidates of query %lld (%lld lists of "
                      "at most K=%lld)",
                      (long long)m->k, (long long)total, (long long)q, (long long)m->R,
                      (long long)m->K);
  }
  return LIK_OK;
}
