/*
 * ivf.c — the inverted file: for every centroid, the ascending unique ids of
 * the documents with a token coded by it.  Extending it by new documents
 * (ids above every listed one) appends to each list, so a whole build and a
 * build followed by adds give the same lists.
 */
#include <stdlib.h>
#include <string.h>

#include "index_internal.h"

lik_status lik_plaid_ivf_extend(lik_plaid_index *ix, int64_t doc_from) {
  const int64_t K = ix->ncent;
  int64_t *last = (int64_t *)malloc((size_t)K * sizeof(int64_t));
  int64_t *cnt = (int64_t *)calloc((size_t)K + 1, sizeof(int64_t));
  int64_t *off = (int64_t *)malloc((size_t)(K + 1) * sizeof(int64_t));
  int64_t *ivf = NULL;
  lik_status st = LIK_OK;
  if (!last || !cnt || !off) goto nomem;
  /* pass 1: new (centroid, document) pairs per centroid */
  for (int64_t c = 0; c < K; c++) last[c] = -1;
  for (int64_t j = doc_from; j < ix->ndocs; j++) {
    const lik_pseg *s = &ix->segs[ix->doc_seg[j]];
    for (int64_t t = ix->doc_off[j] - s->tok0; t < ix->doc_off[j + 1] - s->tok0; t++) {
      const int64_t c = lik_pseg_code(s, t);
      if (c < 0 || c >= K) {
        st = lik_fail(LIK_ERR_VALUE, "PLAID index: document %lld, token %lld: code %lld is "
                      "outside [0, K=%lld)", (long long)j,
                      (long long)(t + s->tok0 - ix->doc_off[j]), (long long)c, (long long)K);
        goto out;
      }
      if (last[c] != j) {
        last[c] = j;
        cnt[c]++;
      }
    }
  }
  int64_t total = 0;
  for (int64_t c = 0; c < K; c++) {
    off[c] = total;
    total += ix->ivf_off[c + 1] - ix->ivf_off[c] + cnt[c];
  }
  off[K] = total;
  ivf = (int64_t *)malloc((size_t)(total ? total : 1) * sizeof(int64_t));
  if (!ivf) goto nomem;
  /* old lists first, then the new documents (pass 2) */
  for (int64_t c = 0; c < K; c++) {
    const int64_t n = ix->ivf_off[c + 1] - ix->ivf_off[c];
    if (n) memcpy(ivf + off[c], ix->ivf + ix->ivf_off[c], (size_t)n * sizeof(int64_t));
    cnt[c] = off[c] + n; /* write position */
    last[c] = -1;
  }
  for (int64_t j = doc_from; j < ix->ndocs; j++) {
    const lik_pseg *s = &ix->segs[ix->doc_seg[j]];
    for (int64_t t = ix->doc_off[j] - s->tok0; t < ix->doc_off[j + 1] - s->tok0; t++) {
      const int64_t c = lik_pseg_code(s, t);
      if (last[c] != j) {
        last[c] = j;
        ivf[cnt[c]++] = j;
      }
    }
  }
  free(ix->ivf_owned);
  ix->ivf_owned = ivf;
  ix->ivf = ivf;
  memcpy(ix->ivf_off, off, (size_t)(K + 1) * sizeof(int64_t));
  ix->has_ivf = 1;
  ivf = NULL;
  goto out;
nomem:
  st = lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate the inverted file (K=%lld)",
                (long long)K);
out:
  free(last);
  free(cnt);
  free(off);
  free(ivf);
  return st;
}
