/*
 * fuzz_plaid_commit.c — fuzz target of a change of an index folder: load an
 * untrusted folder (a committed change not yet applied, a stale staging
 * folder included: src/index/commit.c), add documents and / or delete one,
 * save over the folder (after a delete alone: only its files), load again.  Oracles: no crash, sanitizer report, leak or hang; every
 * refusal is LIK_ERR_VALUE / LIK_ERR_ALLOC with a message; a folder that
 * loaded still loads after a failed save (the old state) and, after a
 * successful one, loads with the added documents and searches exactly as
 * the index in memory did (the new state).
 *
 * Input: byte 0 = flags (bit 0: LIK_PLAID_LOAD_VERIFY; bit 1: add with
 * expand_centroids; bits 2-4: tokens a document - 1; bit 5: delete the
 * first live document), then the files of
 * FILES separated by FUZZ_SEP (fuzz_util.h; an empty part leaves the file
 * out), then the added tokens (float32, d each).  With libFuzzer a custom
 * mutator changes one file at a time (fuzz_mutate_folder).  Seeds:
 * tests/fuzz/plaid_seeds.py (corpus/fuzz_plaid_commit).
 */
#include "fuzz_util.h" /* first: it asks for _GNU_SOURCE */

#include <math.h>
#include <stdlib.h>

#include "lik_experimental.h"

static const char *FILES[] = {
    "metadata.json",      "centroids.npy",         "bucket_cutoffs.npy",       "bucket_weights.npy",
    "ivf.npy",            "ivf_lengths.npy",       "doclens.0.json",           "merged_codes.npy",
    "merged_residuals.npy", "doclens.1.json",      "1.codes.npy",              "1.residuals.npy",
    "avg_residual.npy",   "cluster_threshold.npy", "doc_ids.npy",             "deleted.npy",
    "next_id.npy",        ".lik-commit/metadata.json", ".lik-commit/ivf.npy", ".lik-commit/.remove", ".lik-new/metadata.json"};
#define NFILES (sizeof FILES / sizeof FILES[0])

#define CAP_CENT ((int64_t)1 << 16) /* K * d */
#define CAP_DOCS ((int64_t)1 << 12)
#define CAP_TOK ((int64_t)1 << 14)
#define CAP_ADD 256 /* added tokens */

static void refused(lik_status st, const lik_plaid_index *ix) {
  if ((st != LIK_ERR_VALUE && st != LIK_ERR_ALLOC) || ix || !lik_last_error()[0]) abort();
}

enum { NQ = 2, LQ = 3, TOPK = 4 };

static lik_status search(lik_plaid_index *ix, int64_t d, float *s, int64_t *ids) {
  float q[NQ * LQ * 64];
  for (int64_t i = 0; i < NQ * LQ * d; i++) q[i] = (float)((i * 7919) % 13) - 6.0f;
  lik_tensor Q = {q, LIK_F32, 3, {NQ, LQ, d}, {LQ * d, d, 1}, LIK_CPU, 0};
  lik_tensor S = {s, LIK_F32, 2, {NQ, TOPK}, {TOPK, 1}, LIK_CPU, 0};
  lik_tensor I = {ids, LIK_I64, 2, {NQ, TOPK}, {TOPK, 1}, LIK_CPU, 0};
  lik_plaid_search_params sp = {0};
  sp.top_k = TOPK;
  sp.n_ivf_probe = 4;
  sp.n_full_scores = 16;
  sp.num_threads = 1;
  return lik_plaid_index_search(ix, &Q, NULL, NULL, NULL, &sp, &S, &I);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *dir = fuzz_dir("lik_fuzz_commit"); /* empty */
  const unsigned flags = data[0];
  const uint8_t *part[NFILES + 1];
  size_t len[NFILES + 1];
  const size_t nparts = fuzz_split(data + 1, size - 1, part, len, NFILES + 1);
  fuzz_write_folder(dir, FILES, NFILES, part, len, nparts); /* the staging folders' files too */
  const unsigned load_flags = flags & 1 ? LIK_PLAID_LOAD_VERIFY : 0;
  lik_plaid_index *ix = NULL;
  lik_status st = lik_plaid_index_load(dir, load_flags, &ix);
  if (st != LIK_OK) return refused(st, ix), 0;
  lik_plaid_index_info a;
  if (lik_plaid_index_get_info(ix, &a) != LIK_OK) abort();
  if (a.num_centroids * a.dim > CAP_CENT || a.num_docs > CAP_DOCS || a.num_tokens > CAP_TOK ||
      a.dim > 64) {
    lik_plaid_index_free(ix);
    return 0;
  }
  /* the documents to add: the last part's floats, (flags >> 2 & 7) + 1 tokens each */
  const uint8_t *add = nparts > NFILES ? part[NFILES] : NULL;
  int64_t T = add ? (int64_t)(len[NFILES] / (4 * (size_t)a.dim)) : 0;
  if (T > CAP_ADD) T = CAP_ADD;
  const int64_t per = (flags >> 2 & 7) + 1, n = (T + per - 1) / per;
  float *x = malloc((size_t)(T * a.dim + 1) * sizeof(float));
  int64_t *cu = malloc((size_t)(n + 1) * sizeof(int64_t));
  if (T) memcpy(x, add, (size_t)(T * a.dim) * sizeof(float));
  for (int64_t j = 0; j <= n; j++) cu[j] = j * per < T ? j * per : T;
  lik_tensor X = {x, LIK_F32, 2, {T, a.dim}, {a.dim, 1}, LIK_CPU, 0};
  lik_tensor CU = {cu, LIK_I64, 1, {n + 1}, {1}, LIK_CPU, 0};
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  o.num_threads = 1;
  o.expand_centroids = (flags >> 1) & 1;
  st = n ? lik_plaid_index_add(ix, &X, &CU, &o) : LIK_OK;
  if (st != LIK_OK && !((st == LIK_ERR_VALUE || st == LIK_ERR_ALLOC) && lik_last_error()[0])) abort();
  free(x);
  free(cu);
  if (flags & 32) { /* delete the first live document */
    lik_plaid_index_info m;
    if (lik_plaid_index_get_info(ix, &m) != LIK_OK) abort();
    int64_t *ids = malloc((size_t)(m.num_docs + 1) * sizeof(int64_t)), j = 0;
    lik_tensor I = {ids, LIK_I64, 1, {m.num_docs}, {1}, LIK_CPU, 0};
    if (lik_plaid_index_get_ids(ix, &I) != LIK_OK) abort();
    while (j < m.num_docs && ids[j] < 0) j++;
    lik_tensor one = {ids + j, LIK_I64, 1, {1}, {1}, LIK_CPU, 0};
    if (j < m.num_docs && lik_plaid_index_delete(ix, &one) != LIK_OK) abort();
    free(ids);
  }
  lik_plaid_index_info b;
  if (lik_plaid_index_get_info(ix, &b) != LIK_OK) abort();
  float s0[NQ * TOPK], s1[NQ * TOPK];
  int64_t i0[NQ * TOPK], i1[NQ * TOPK];
  const lik_status q0 = b.has_ivf ? search(ix, b.dim, s0, i0) : LIK_ERR_UNSUPPORTED;
  const lik_status saved = lik_plaid_index_save(ix, dir, NULL);
  if (saved != LIK_OK && !((saved == LIK_ERR_VALUE || saved == LIK_ERR_ALLOC) && lik_last_error()[0]))
    abort();
  lik_plaid_index_free(ix);
  ix = NULL;
  st = lik_plaid_index_load(dir, load_flags, &ix); /* the old state or the new one */
  if (st != LIK_OK) abort();
  lik_plaid_index_info c;
  if (lik_plaid_index_get_info(ix, &c) != LIK_OK) abort();
  const lik_plaid_index_info *want = saved == LIK_OK ? &b : &a;
  if (c.num_docs != want->num_docs || c.num_tokens != want->num_tokens ||
      c.num_centroids != want->num_centroids || c.dim != want->dim ||
      c.num_deleted != want->num_deleted || c.next_id != want->next_id) /* ids never given twice */
    abort();
  if (saved == LIK_OK && q0 == LIK_OK) { /* the new state searches as the index in memory did */
    if (search(ix, c.dim, s1, i1) != LIK_OK) abort();
    if (memcmp(i0, i1, sizeof i0) || memcmp(s0, s1, sizeof s0)) abort();
  }
  lik_plaid_index_free(ix);
  return 0;
}

#ifdef LIK_FUZZ_MUTATOR
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed) {
  return fuzz_mutate_folder(data, size, max_size, seed, NFILES + 1);
}
#endif
