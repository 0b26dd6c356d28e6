/*
 * plaid.h — the validated PLAID search call and the index's state as a
 * backend copies it to a device (lik_experimental.h, "PLAID index").
 *
 * src/api/plaid_index.c validates a search into a lik_plaid_query; the index
 * engine (src/index/search.c) runs it on the CPU, or the CUDA backend
 * (src/cuda/plaid.cu) on the device copy that src/index/device.c made from a
 * lik_plaid_src.  Backends may assume everything here is valid (codes in
 * [0, ncent), IVF entries below ndocs, sizes that agree).
 */
#ifndef LIK_CORE_PLAID_H
#define LIK_CORE_PLAID_H

#include "residual.h"

/* A validated search call. */
typedef struct {
  lik_call call;
  lik_seqs q;             /* count Nq, len Lq */
  lik_index q_lengths;    /* data NULL: every query Lq tokens */
  lik_index subset;       /* with has_subset (host only) */
  int has_subset;         /* 0: no subset (all documents) */
  lik_index subset_cu;    /* data NULL: one subset for all */
  int64_t subset_n;       /* entries of subset (no cu) */
  int64_t top_k, n_probe, n_full;
  int prune;
  float threshold;
  float *scores;
  int64_t *ids;
  int64_t s_i, s_k, i_i, i_k; /* strides of scores / ids */
} lik_plaid_query;

/* One stored chunk of tokens: codes (checked in [0, ncent) by the caller,
 * who converts them to int32) and residual bytes [ntok][width]. */
typedef struct {
  const int32_t *codes;
  const uint8_t *res;
  int64_t ntok;
} lik_plaid_src_seg;

/* What a device copy of an index holds (host pointers).  Document j is
 * global tokens doc_off[j] .. doc_off[j+1]; the segments' tokens follow one
 * another.  IVF list c is ivf[ivf_off[c] .. ivf_off[c+1]) (positions,
 * ascending).  ids: the id of each position (NULL: the position); dead: the
 * tombstone bits (NULL: none), ndead of them set. */
typedef struct {
  int nbits;
  int64_t dim, ncent, width;
  const uint16_t *cent_f16; /* [ncent][dim] */
  const float *weights;     /* [2^nbits] */
  int64_t ndocs, ntok;
  const int64_t *doc_off;   /* [ndocs + 1] */
  const int64_t *ivf_off;   /* [ncent + 1] */
  const int32_t *ivf;       /* [ivf_off[ncent]] */
  const int64_t *ids;
  const uint64_t *dead;     /* [ndocs / 64 + 1] words */
  int64_t ndead;
  const lik_plaid_src_seg *segs;
  int64_t nseg;
} lik_plaid_src;

#ifdef LIK_WITH_CUDA
/* src/cuda/plaid.cu.  upload: a device copy of src on device_id in *state
 * (its bytes in *bytes); synchronous.  release: frees it (NULL: no-op).
 * search: q (every tensor on the state's device) on q->call.stream. */
lik_status lik_cuda_plaid_upload(const lik_plaid_src *src, int device_id, void **state,
                                 int64_t *bytes);
void lik_cuda_plaid_release(void *state);
lik_status lik_cuda_plaid_search(const void *state, const lik_plaid_query *q);
#endif

#endif /* LIK_CORE_PLAID_H */
