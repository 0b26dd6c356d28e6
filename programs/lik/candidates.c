/* candidates.c — see candidates.h. */
#include "candidates.h"

#include <stdio.h>
#include <stdlib.h>

int retrieve_topk(device *g, const lik_tensor *q, const lik_tensor *qm, const lik_tensor *d,
                  const lik_tensor *dm, int64_t kb, const lik_options *opts, float *out_s,
                  int64_t *out_i, int64_t ld, char *err) {
  const int64_t rows = q->shape[0], shape[2] = {rows, kb}, strides[2] = {ld, 1};
  const size_t span = rows > 0 ? (size_t)((rows - 1) * ld + kb) : 0; /* within the host rows */
  void *as, *ai;
  if (device_out(g, out_s, span * sizeof *out_s, &g->out_s, &as, err) ||
      device_out(g, out_i, span * sizeof *out_i, &g->out_i, &ai, err))
    return 1;
  lik_tensor so = device_view(g, as, LIK_F32, 2, shape, strides);
  lik_tensor io = device_view(g, ai, LIK_I64, 2, shape, strides);
  lik_status st = lik_retrieve(q, d, qm->data ? qm : NULL, dm->data ? dm : NULL, kb, opts, &so, &io);
  if (st != LIK_OK) {
    snprintf(err, ERR_LEN, "lik_retrieve on %s failed (%s): %s", g->name, lik_status_string(st),
             lik_last_error());
    return 1;
  }
  return device_get(g, out_s, as, span * sizeof *out_s, err) ||
         device_get(g, out_i, ai, span * sizeof *out_i, err);
}

int cand_topk(const emb_set *Q, const emb_set *D, int64_t i, const int64_t *idx, int64_t n,
              int64_t kb, lik_dtype want, const lik_options *opts, lowbit *lb, device *g,
              cand_buf *b, float *out_s, int64_t *out_i, char *err) {
  lik_tensor q, qm, dx, dm, gq, gqm, gdx, gdm;
  if (lb ? lowbit_topk_of(lb, i, idx, n, kb, opts, out_s, out_i, err)
         : emb_block(Q, i, i + 1, want, &q, &qm, &b->q, &b->qcap, &b->qm, &b->qmcap, err) ||
               emb_gather(D, idx, n, want, &dx, &dm, &b->d, &b->dcap, &b->dm, &b->dmcap, err) ||
               device_put_tensor(g, &q, &b->gq, &gq, err) ||
               device_put_tensor(g, &qm, &b->gqm, &gqm, err) ||
               device_put_tensor(g, &dx, &b->gd, &gdx, err) ||
               device_put_tensor(g, &dm, &b->gdm, &gdm, err) ||
               retrieve_topk(g, &gq, &gqm, &gdx, &gdm, kb, opts, out_s, out_i, kb, err))
    return 1;
  for (int64_t r = 0; r < kb; r++) out_i[r] = idx[out_i[r]];
  return 0;
}

void cand_free(cand_buf *b) {
  free(b->q);
  free(b->d);
  free(b->qm);
  free(b->dm);
  dev_buf_free(&b->gq);
  dev_buf_free(&b->gd);
  dev_buf_free(&b->gqm);
  dev_buf_free(&b->gdm);
}
