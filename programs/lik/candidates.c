/* candidates.c — see candidates.h. */
#include "candidates.h"

#include <stdio.h>
#include <stdlib.h>

int cand_topk(const emb_set *Q, const emb_set *D, int64_t i, const int64_t *idx, int64_t n,
              int64_t kb, lik_dtype want, const lik_options *opts, lowbit *lb, cand_buf *b,
              float *out_s, int64_t *out_i, char *err) {
  if (lb) return lowbit_topk_of(lb, i, idx, n, kb, opts, out_s, out_i, err);
  lik_tensor q, qm, dx, dm;
  if (emb_block(Q, i, i + 1, want, &q, &qm, &b->q, &b->qcap, &b->qm, &b->qmcap, err) ||
      emb_gather(D, idx, n, want, &dx, &dm, &b->d, &b->dcap, &b->dm, &b->dmcap, err))
    return 1;
  lik_tensor so = {0}, io;
  so.data = out_s;
  so.dtype = LIK_F32;
  so.ndim = 2;
  so.shape[0] = 1;
  so.shape[1] = kb;
  so.strides[0] = kb;
  so.strides[1] = 1;
  so.device = LIK_CPU;
  io = so;
  io.data = out_i;
  io.dtype = LIK_I64;
  lik_status st = lik_retrieve(&q, &dx, qm.data ? &qm : NULL, dm.data ? &dm : NULL, kb, opts,
                               &so, &io);
  if (st != LIK_OK) {
    snprintf(err, ERR_LEN, "lik_retrieve failed (%s): %s", lik_status_string(st),
             lik_last_error());
    return 1;
  }
  for (int64_t r = 0; r < kb; r++) out_i[r] = idx[out_i[r]];
  return 0;
}

void cand_free(cand_buf *b) {
  free(b->q);
  free(b->d);
  free(b->qm);
  free(b->dm);
}
