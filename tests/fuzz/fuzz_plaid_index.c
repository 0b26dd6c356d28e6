/*
 * fuzz_plaid_index.c — fuzz target of the PLAID index loader
 * (lik_plaid_index_load: src/index/format.c, npy.c, json.c), whose input is
 * an untrusted folder, and of a search over whatever it accepts.  Oracles:
 * no crash, sanitizer report, leak or hang; a refused folder says why
 * (LIK_ERR_VALUE or LIK_ERR_ALLOC with a message); an accepted one answers a
 * search with a status (a corrupt code found by the search is
 * LIK_ERR_VALUE), never reading outside its files.
 *
 * Input: byte 0 = flags (bit 0: LIK_PLAID_LOAD_VERIFY; bit 1: search with a
 * subset; bit 2: prune), then the files of the folder separated by FUZZ_SEP
 * (fuzz_util.h), in the order of FILES below; an empty part leaves that file
 * out.  Seeds: tests/fuzz/plaid_seeds.py (corpus/fuzz_plaid_index).
 */
#include "fuzz_util.h" /* first: it asks for _GNU_SOURCE */

#include <stdlib.h>

#include "lik_experimental.h"

static const char *FILES[] = {"metadata.json",        "centroids.npy",     "bucket_cutoffs.npy",
                              "bucket_weights.npy",   "ivf.npy",           "ivf_lengths.npy",
                              "doclens.0.json",       "merged_codes.npy",  "merged_residuals.npy",
                              "doclens.1.json",       "1.codes.npy",       "1.residuals.npy",
                              "avg_residual.npy",     "cluster_threshold.npy", "doc_ids.npy",
                              "deleted.npy",          "next_id.npy"};
#define NFILES (sizeof FILES / sizeof FILES[0])

/* Limits that keep one execution in milliseconds. */
#define CAP_CENT ((int64_t)1 << 18) /* K * d */
#define CAP_DOCS ((int64_t)1 << 14)
#define CAP_TOK ((int64_t)1 << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *dir = fuzz_dir("lik_fuzz_plaid"); /* empty */
  const unsigned flags = data[0];
  const uint8_t *part[NFILES];
  size_t len[NFILES];
  const size_t nparts = fuzz_split(data + 1, size - 1, part, len, NFILES);
  fuzz_write_folder(dir, FILES, NFILES, part, len, nparts);
  lik_plaid_index *ix = NULL;
  lik_status st = lik_plaid_index_load(dir, flags & 1 ? LIK_PLAID_LOAD_VERIFY : 0, &ix);
  if (st != LIK_OK) {
    if ((st != LIK_ERR_VALUE && st != LIK_ERR_ALLOC) || ix || !lik_last_error()[0]) abort();
    return 0;
  }
  lik_plaid_index_info info;
  if (lik_plaid_index_get_info(ix, &info) != LIK_OK) abort();
  if (info.num_centroids * info.dim <= CAP_CENT && info.num_docs <= CAP_DOCS &&
      info.num_tokens <= CAP_TOK && info.has_ivf) {
    enum { NQ = 2, LQ = 3, TOPK = 4 };
    float *q = malloc(sizeof(float) * NQ * LQ * (size_t)info.dim);
    for (int64_t i = 0; i < NQ * LQ * info.dim; i++) q[i] = (float)((i * 7919) % 13) - 6.0f;
    float s[NQ * TOPK];
    int64_t ids[NQ * TOPK], sub[2] = {0, info.num_docs - 1};
    lik_tensor Q = {q, LIK_F32, 3, {NQ, LQ, info.dim}, {LQ * info.dim, info.dim, 1}, LIK_CPU, 0};
    lik_tensor S = {s, LIK_F32, 2, {NQ, TOPK}, {TOPK, 1}, LIK_CPU, 0};
    lik_tensor I = {ids, LIK_I64, 2, {NQ, TOPK}, {TOPK, 1}, LIK_CPU, 0};
    lik_tensor SB = {sub, LIK_I64, 1, {info.num_docs ? 2 : 0}, {1}, LIK_CPU, 0};
    lik_plaid_search_params sp = {0};
    sp.top_k = TOPK;
    sp.n_ivf_probe = 4;
    sp.n_full_scores = 16;
    sp.prune = (flags >> 2) & 1;
    sp.centroid_score_threshold = 0.1f;
    sp.num_threads = 1;
    st = lik_plaid_index_search(ix, &Q, NULL, (flags & 2) ? &SB : NULL, NULL, &sp, &S, &I);
    if (st != LIK_OK && !(st == LIK_ERR_VALUE && lik_last_error()[0])) abort();
    if (st == LIK_OK)
      for (int i = 0; i < NQ * TOPK; i++)
        if (ids[i] < -1 || ids[i] >= info.next_id) abort(); /* ids, not positions */
    free(q);
  }
  lik_plaid_index_free(ix);
  return 0;
}

#ifdef LIK_FUZZ_MUTATOR
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed) {
  return fuzz_mutate_folder(data, size, max_size, seed, NFILES);
}
#endif
