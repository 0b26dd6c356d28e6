/* candidates.c — see candidates.h. */
#include "candidates.h"

#include <stdio.h>
#include <stdlib.h>

int retrieve_topk(const lik_tensor *q, const lik_tensor *qm, const lik_tensor *d,
                  const lik_tensor *dm, int64_t kb, const lik_options *opts, float *out_s,
                  int64_t *out_i, int64_t ld, char *err) {
  const int64_t shape[2] = {q->shape[0], kb}, strides[2] = {ld, 1};
  lik_tensor so = cpu_view(out_s, LIK_F32, 2, shape, strides);
  lik_tensor io = cpu_view(out_i, LIK_I64, 2, shape, strides);
  lik_status st = lik_retrieve(q, d, qm->data ? qm : NULL, dm->data ? dm : NULL, kb, opts, &so, &io);
  if (st == LIK_OK) return 0;
  snprintf(err, ERR_LEN, "lik_retrieve failed (%s): %s", lik_status_string(st), lik_last_error());
  return 1;
}

int cand_topk(const emb_set *Q, const emb_set *D, int64_t i, const int64_t *idx, int64_t n,
              int64_t kb, lik_dtype want, const lik_options *opts, lowbit *lb, cand_buf *b,
              float *out_s, int64_t *out_i, char *err) {
  lik_tensor q, qm, dx, dm;
  if (lb ? lowbit_topk_of(lb, i, idx, n, kb, opts, out_s, out_i, err)
         : emb_block(Q, i, i + 1, want, &q, &qm, &b->q, &b->qcap, &b->qm, &b->qmcap, err) ||
               emb_gather(D, idx, n, want, &dx, &dm, &b->d, &b->dcap, &b->dm, &b->dmcap, err) ||
               retrieve_topk(&q, &qm, &dx, &dm, kb, opts, out_s, out_i, kb, err))
    return 1;
  for (int64_t r = 0; r < kb; r++) out_i[r] = idx[out_i[r]];
  return 0;
}

void cand_free(cand_buf *b) {
  free(b->q);
  free(b->d);
  free(b->qm);
  free(b->dm);
}
