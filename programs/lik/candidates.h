/*
 * candidates.h — one query against a list of candidate documents: --rerank's
 * candidates, or --rescore's low-bit top k*C.  Scored exactly (lik_retrieve
 * on the gathered documents, on the job's device) or with the quantised
 * corpus (precision.h).
 */
#ifndef LIK_CLI_CANDIDATES_H
#define LIK_CLI_CANDIDATES_H

#include "device.h"
#include "emb_io.h"
#include "precision.h"

/* Gather buffers, reused from call to call (zero-initialise; cand_free):
 * on the host, and their copies on a CUDA device. */
typedef struct {
  void *q, *d;
  uint8_t *qm, *dm;
  size_t qcap, dcap, qmcap, dmcap;
  dev_buf gq, gd, gqm, gdm;
} cand_buf;

/* The top kb (1 <= kb <= n) of query i of Q against the documents idx[0..n)
 * of D (ascending, unique): out_s / out_i [kb], document indices, in
 * lik_retrieve's order (score descending, ties by lower index).  lb NULL:
 * exact, in dtype want, on g (the query and the gathered documents copied
 * there); else lb's quantised corpus on its device.  Returns 0, or 1 with
 * err set. */
int cand_topk(const emb_set *Q, const emb_set *D, int64_t i, const int64_t *idx, int64_t n,
              int64_t kb, lik_dtype want, const lik_options *opts, lowbit *lb, device *g,
              cand_buf *b, float *out_s, int64_t *out_i, char *err);

/* lik_retrieve of q against d (masks: data NULL for none; all four on g's
 * device, opts->stream g's) into host out_s / out_i [q.shape[0], kb], rows
 * ld elements apart (on CUDA through g->out_s / out_i: the entries of a row
 * past kb are overwritten too).  Returns 0, or 1 with err set. */
int retrieve_topk(device *g, const lik_tensor *q, const lik_tensor *qm, const lik_tensor *d,
                  const lik_tensor *dm, int64_t kb, const lik_options *opts, float *out_s,
                  int64_t *out_i, int64_t ld, char *err);

void cand_free(cand_buf *b);

#endif
