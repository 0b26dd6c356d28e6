/*
 * precision.h — `lik --precision int8|binary`: the corpus quantised once on
 * load (lik_quantize_int8 / lik_quantize_binary, lik_experimental.h; on the
 * CPU) into a padded [N, Lmax, .] copy, int8 queries, and the top-k of a
 * block of documents (or of one query's candidates) by lik_maxsim_scaled /
 * lik_maxsim_binary in lik_retrieve's order, scored on the job's device
 * (the quantised corpus and queries copied there once, lowbit_to_device;
 * the scores copied back and ranked on the host).
 */
#ifndef LIK_CLI_PRECISION_H
#define LIK_CLI_PRECISION_H

#include "device.h"
#include "emb_io.h"
#include "lik.h"

typedef enum { PRECISION_AS_LOADED = 0, PRECISION_FP16, PRECISION_INT8, PRECISION_BINARY } precision;

typedef struct {
  precision kind;     /* PRECISION_INT8 or PRECISION_BINARY */
  int64_t n, lmax, d, nq;
  void *docs;         /* int8 [n, lmax, d] or bits [n, lmax, ceil(d / 8)] */
  float *dscale;      /* int8: [n, lmax] */
  uint8_t *dmask;     /* [n, lmax] */
  int8_t *q;          /* [nq, Lq, d] */
  float *qscale;      /* [nq, Lq] */
  lik_tensor qx, qm;  /* views of q (mask: the loader's) */
  float *scores;      /* [nq, block] scratch */
  int64_t *ids;       /* [block] 0, 1, ..: the scores' document indices */
  int64_t scores_cap, ids_cap;
  uint8_t *gdocs, *gmask; /* gathered candidates (lowbit_topk_of): [cap, lmax, .] */
  float *gscale;
  int64_t gather_cap;
  /* Where it is scored (lowbit_to_device): the arrays above on the CPU, their
   * copies in the dev_bufs on a CUDA device. */
  device *g;
  void *at_docs, *at_dscale, *at_dmask, *at_q, *at_qscale;
  lik_tensor at_qm;
  dev_buf b_docs, b_dscale, b_dmask, b_q, b_qscale, b_qm, b_scores, b_gdocs, b_gscale, b_gmask;
} lowbit;

/* Parses "fp16", "int8", "binary"; -1 for anything else. */
int precision_parse(const char *s);

/* Quantises documents D (all) and the nq queries of the block qx / qm (float
 * views from emb_block) into c.  Returns 0, or 1 with err set. */
int lowbit_load(lowbit *c, precision kind, const emb_set *D, const lik_tensor *qx,
                const lik_tensor *qm, const lik_options *opts, char *err);

/* Scores c on g from now on: on CUDA copies the quantised corpus, its scales
 * and mask, and the queries there (asynchronously, on g's stream); on the
 * CPU takes the host arrays.  Returns 0, or 1 with err set. */
int lowbit_to_device(lowbit *c, device *g, char *err);

/* The top-kb documents of [j0, j1) per query, sorted as lik_retrieve (score
 * descending, NaN last, ties by lower index: lik_topk_merge ranks them):
 * out_s / out_i [nq, kb], rows ld elements apart, indices relative to j0.
 * Returns 0, or 1 with err set. */
int lowbit_topk(lowbit *c, int64_t j0, int64_t j1, int64_t kb, const lik_options *opts,
                float *out_s, int64_t *out_i, int64_t ld, char *err);

/* The top-kb of query qi against the documents idx[0..n) (kb <= n), sorted
 * as lik_retrieve: out_s / out_i [kb], positions in idx.
 * Returns 0, or 1 with err set. */
int lowbit_topk_of(lowbit *c, int64_t qi, const int64_t *idx, int64_t n, int64_t kb,
                   const lik_options *opts, float *out_s, int64_t *out_i, char *err);

void lowbit_free(lowbit *c);

#endif
