/* precision.c — see precision.h. */
#include "precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h" /* src/core: overflow-checked sizes */
#include "lik_experimental.h"

#define ERR_LEN 512
#define QUANT_BLOCK 1024 /* documents quantised per lik call */

int precision_parse(const char *s) {
  if (!strcmp(s, "fp16")) return PRECISION_FP16;
  if (!strcmp(s, "int8")) return PRECISION_INT8;
  if (!strcmp(s, "binary")) return PRECISION_BINARY;
  return -1;
}

/* Bytes of one quantised token: int8 values or sign bits. */
static int64_t row_bytes(const lowbit *c) {
  return c->kind == PRECISION_INT8 ? c->d : (c->d + 7) / 8;
}

static int fail(char *err, const char *what, lik_status st) {
  snprintf(err, ERR_LEN, "%s failed (%s): %s", what, lik_status_string(st), lik_last_error());
  return 1;
}

int lowbit_load(lowbit *c, precision kind, const emb_set *D, const lik_tensor *qx,
                const lik_tensor *qm, const lik_options *opts, char *err) {
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->n = D->n;
  c->lmax = D->L > 0 ? D->L : 1;
  c->d = D->d;
  c->nq = qx->shape[0];
  const int64_t dl = row_bytes(c), lq = qx->shape[1];
  int64_t cells = -1, qcells = -1; /* -1: the product does not fit; calloc_n refuses it */
  if (lik_mul_i64(c->n, c->lmax, &cells)) cells = -1;
  if (lik_mul_i64(c->nq, lq, &qcells)) qcells = -1;
  c->docs = calloc_n(cells, dl, 1);
  c->dscale = calloc_n(cells, 1, sizeof(float));
  c->dmask = calloc_n(cells, 1, 1);
  c->q = calloc_n(qcells, c->d, 1);
  c->qscale = calloc_n(qcells, 1, sizeof(float));
  if (!c->docs || !c->dscale || !c->dmask || !c->q || !c->qscale) {
    snprintf(err, ERR_LEN, "out of memory quantising %lld documents x %lld tokens x d=%lld",
             (long long)c->n, (long long)c->lmax, (long long)c->d);
    return 1;
  }
  /* queries: int8 with per-token scales (normalize: of the unit vectors) */
  const int64_t qs[3] = {c->nq, lq, c->d}, qst[3] = {lq * c->d, c->d, 1}, ss[2] = {lq, 1};
  c->qx = cpu_view(c->q, LIK_I8, 3, qs, qst);
  lik_tensor qsc = cpu_view(c->qscale, LIK_F32, 2, qs, ss);
  lik_status st = lik_quantize_int8(qx, opts, &c->qx, &qsc);
  if (st) return fail(err, "lik_quantize_int8 (queries)", st);
  c->qm = *qm;
  void *buf = NULL;
  uint8_t *mbuf = NULL;
  size_t cap = 0, mcap = 0;
  int rc = 0;
  for (int64_t j0 = 0; j0 < c->n && !rc; j0 += QUANT_BLOCK) {
    const int64_t j1 = j0 + QUANT_BLOCK < c->n ? j0 + QUANT_BLOCK : c->n;
    lik_tensor x, m;
    if (emb_block(D, j0, j1, LIK_F32, &x, &m, &buf, &cap, &mbuf, &mcap, err)) {
      rc = 1;
      break;
    }
    const int64_t nb = x.shape[0], lb = x.shape[1];
    const int64_t os[3] = {nb, lb, dl}, ost[3] = {c->lmax * dl, dl, 1};
    const int64_t sc[2] = {nb, lb}, sst[2] = {c->lmax, 1};
    lik_tensor out = cpu_view((uint8_t *)c->docs + j0 * c->lmax * dl,
                              kind == PRECISION_INT8 ? LIK_I8 : LIK_U8, 3, os, ost);
    lik_tensor scl = cpu_view(c->dscale + j0 * c->lmax, LIK_F32, 2, sc, sst);
    st = kind == PRECISION_INT8 ? lik_quantize_int8(&x, opts, &out, &scl)
                                : lik_quantize_binary(&x, opts, &out);
    if (st) rc = fail(err, "quantising the documents", st);
    for (int64_t j = 0; j < nb; j++)
      for (int64_t l = 0; l < lb; l++)
        c->dmask[(j0 + j) * c->lmax + l] =
            m.data ? ((const uint8_t *)m.data)[j * m.strides[0] + l * m.strides[1]] != 0 : 1;
  }
  free(buf);
  free(mbuf);
  return rc;
}

int lowbit_to_device(lowbit *c, device *g, char *err) {
  /* the sizes of lowbit_load's allocations (calloc_n checked them) */
  const size_t cells = (size_t)(c->n * c->lmax), qcells = (size_t)(c->nq * c->qx.shape[1]);
  c->g = g;
  return device_put(g, c->docs, cells * (size_t)row_bytes(c), &c->b_docs, &c->at_docs, err) ||
         device_put(g, c->dscale, cells * sizeof(float), &c->b_dscale, &c->at_dscale, err) ||
         device_put(g, c->dmask, cells, &c->b_dmask, &c->at_dmask, err) ||
         device_put(g, c->q, qcells * (size_t)c->d, &c->b_q, &c->at_q, err) ||
         device_put(g, c->qscale, qcells * sizeof(float), &c->b_qscale, &c->at_qscale, err) ||
         device_put_tensor(g, &c->qm, &c->b_qm, &c->at_qm, err);
}

/* Scores queries [q0, q0 + nqs) against the nb quantised documents of the
 * views D / dsc / dm (on c's device), and writes each query's top kb into
 * out_s / out_i [nqs, kb], rows ld apart (indices into the nb documents).
 * The scores come back to the host, where the ranking is the library's:
 * every score is a one-entry candidate list of lik_topk_merge, whose order
 * (lik_retrieve's: score descending, NaN last, ties to the lower index) is
 * the only one the command uses. */
static int score_rank(lowbit *c, int64_t q0, int64_t nqs, lik_tensor *D, lik_tensor *dsc,
                      lik_tensor *dm, int64_t nb, int64_t kb, const lik_options *opts,
                      float *out_s, int64_t *out_i, int64_t ld, char *err) {
  int64_t need;
  if (lik_mul_i64(nb, nqs, &need) || need > c->scores_cap) {
    free(c->scores);
    c->scores = calloc_n(nb, nqs, sizeof(float));
    c->scores_cap = c->scores ? need : 0;
    if (!c->scores) {
      snprintf(err, ERR_LEN, "out of memory for %lld x %lld scores", (long long)nqs,
               (long long)nb);
      return 1;
    }
  }
  if (nb > c->ids_cap) {
    free(c->ids);
    c->ids = calloc_n(nb, 1, sizeof(int64_t));
    c->ids_cap = c->ids ? nb : 0;
    if (!c->ids) {
      snprintf(err, ERR_LEN, "out of memory for %lld document indices", (long long)nb);
      return 1;
    }
    for (int64_t j = 0; j < nb; j++) c->ids[j] = j;
  }
  const int64_t lq = c->qx.shape[1];
  const int64_t qs[3] = {nqs, lq, c->d}, qss[2] = {nqs, lq}, ss[2] = {nqs, nb};
  lik_tensor q = device_view(c->g, (int8_t *)c->at_q + q0 * lq * c->d, LIK_I8, 3, qs,
                             c->qx.strides);
  lik_tensor qm = c->at_qm;
  if (qm.data) {
    qm.data = (uint8_t *)qm.data + q0 * qm.strides[0];
    qm.shape[0] = nqs;
  }
  lik_tensor qsc = device_view(c->g, (float *)c->at_qscale + q0 * lq, LIK_F32, 2, qss,
                               (const int64_t[2]){lq, 1});
  void *at;
  if (device_out(c->g, c->scores, (size_t)need * sizeof(float), &c->b_scores, &at, err)) return 1;
  lik_tensor sc = device_view(c->g, at, LIK_F32, 2, ss, (const int64_t[2]){nb, 1});
  lik_options o = *opts;
  o.normalize = 0; /* the quantised values are what is scored */
  lik_status st;
  if (c->kind == PRECISION_INT8)
    st = lik_maxsim_scaled(&q, &qsc, D, dsc, qm.data ? &qm : NULL, dm, &o, &sc);
  else
    st = lik_maxsim_binary(&q, &qsc, D, c->d, qm.data ? &qm : NULL, dm, &o, &sc);
  if (st) return fail(err, c->kind == PRECISION_INT8 ? "lik_maxsim_scaled" : "lik_maxsim_binary", st);
  if (device_get(c->g, c->scores, at, (size_t)need * sizeof(float), err)) return 1;
  const int64_t ls[3] = {nb, nqs, 1}, os[2] = {nqs, kb}, ost[2] = {ld, 1};
  lik_tensor S = cpu_view(c->scores, LIK_F32, 3, ls, (const int64_t[3]){1, nb, 1});
  lik_tensor I = cpu_view(c->ids, LIK_I64, 3, ls, (const int64_t[3]){1, 0, 1});
  lik_tensor OS = cpu_view(out_s, LIK_F32, 2, os, ost);
  lik_tensor OI = cpu_view(out_i, LIK_I64, 2, os, ost);
  if ((st = lik_topk_merge(&S, &I, NULL, kb, &o, &OS, &OI))) return fail(err, "lik_topk_merge", st);
  return 0;
}

int lowbit_topk(lowbit *c, int64_t j0, int64_t j1, int64_t kb, const lik_options *opts,
                float *out_s, int64_t *out_i, int64_t ld, char *err) {
  const int64_t nb = j1 - j0, dl = row_bytes(c);
  const int64_t ds[3] = {nb, c->lmax, dl}, dst[3] = {c->lmax * dl, dl, 1};
  const int64_t ms[2] = {nb, c->lmax}, mst[2] = {c->lmax, 1};
  lik_tensor D = device_view(c->g, (uint8_t *)c->at_docs + j0 * c->lmax * dl,
                             c->kind == PRECISION_INT8 ? LIK_I8 : LIK_U8, 3, ds, dst);
  lik_tensor dm = device_view(c->g, (uint8_t *)c->at_dmask + j0 * c->lmax, LIK_U8, 2, ms, mst);
  lik_tensor dsc = device_view(c->g, (float *)c->at_dscale + j0 * c->lmax, LIK_F32, 2, ms, mst);
  return score_rank(c, 0, c->nq, &D, &dsc, &dm, nb, kb, opts, out_s, out_i, ld, err);
}

int lowbit_topk_of(lowbit *c, int64_t qi, const int64_t *idx, int64_t n, int64_t kb,
                   const lik_options *opts, float *out_s, int64_t *out_i, char *err) {
  const int64_t dl = row_bytes(c), cell = c->lmax * dl;
  if (n > c->gather_cap) {
    free(c->gdocs);
    free(c->gscale);
    free(c->gmask);
    c->gdocs = calloc_n(n, cell, 1);
    c->gscale = calloc_n(n, c->lmax, sizeof(float));
    c->gmask = calloc_n(n, c->lmax, 1);
    c->gather_cap = c->gdocs && c->gscale && c->gmask ? n : 0;
    if (!c->gather_cap) {
      snprintf(err, ERR_LEN, "out of memory gathering %lld candidates x %lld tokens",
               (long long)n, (long long)c->lmax);
      return 1;
    }
  }
  for (int64_t r = 0; r < n; r++) {
    const int64_t j = idx[r];
    memcpy(c->gdocs + r * cell, (const uint8_t *)c->docs + j * cell, (size_t)cell);
    memcpy(c->gscale + r * c->lmax, c->dscale + j * c->lmax, (size_t)c->lmax * sizeof(float));
    memcpy(c->gmask + r * c->lmax, c->dmask + j * c->lmax, (size_t)c->lmax);
  }
  const int64_t ds[3] = {n, c->lmax, dl}, dst[3] = {cell, dl, 1};
  const int64_t ms[2] = {n, c->lmax}, mst[2] = {c->lmax, 1};
  void *gd, *gs, *gm; /* the gathered arrays where they are scored */
  if (device_put(c->g, c->gdocs, (size_t)(n * cell), &c->b_gdocs, &gd, err) ||
      device_put(c->g, c->gscale, (size_t)(n * c->lmax) * sizeof(float), &c->b_gscale, &gs, err) ||
      device_put(c->g, c->gmask, (size_t)(n * c->lmax), &c->b_gmask, &gm, err))
    return 1;
  lik_tensor D = device_view(c->g, gd, c->kind == PRECISION_INT8 ? LIK_I8 : LIK_U8, 3, ds, dst);
  lik_tensor dm = device_view(c->g, gm, LIK_U8, 2, ms, mst);
  lik_tensor dsc = device_view(c->g, gs, LIK_F32, 2, ms, mst);
  return score_rank(c, qi, 1, &D, &dsc, &dm, n, kb, opts, out_s, out_i, kb, err);
}

void lowbit_free(lowbit *c) {
  free(c->docs);
  free(c->dscale);
  free(c->dmask);
  free(c->q);
  free(c->qscale);
  free(c->scores);
  free(c->ids);
  free(c->gdocs);
  free(c->gscale);
  free(c->gmask);
  dev_buf *bufs[] = {&c->b_docs, &c->b_dscale, &c->b_dmask, &c->b_q,      &c->b_qscale,
                     &c->b_qm,   &c->b_scores, &c->b_gdocs, &c->b_gscale, &c->b_gmask};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) dev_buf_free(bufs[i]);
}
