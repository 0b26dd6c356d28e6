/*
 * index_internal.h — the PLAID index engine (src/index): what a
 * lik_plaid_index holds, and the functions its files share.
 *
 * Layer: src/api/plaid_index.c validates the public calls and routes them
 * here; the engine runs the stages and calls the CPU backend's entry points
 * (codec compress / train, residual MaxSim, approximate score, centroid
 * scores, the thread runner, the host top-k order) with problems it
 * describes itself (its data is valid by construction or checked as read).
 * docs/architecture.md, "The index engine".
 *
 * Storage: documents in order, grouped in chunks (a chunk = a saved
 * doclens.<i>.json).  A chunk's tokens are a segment: codes (I32 or I64) and
 * residual bytes [ntok][width], either inside a mapped file (read-only) or in
 * memory (the chunks lik_plaid_index_add appends; growable).
 */
#ifndef LIK_INDEX_INTERNAL_H
#define LIK_INDEX_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../core/plaid.h"
#include "commit.h"
#include "lik_experimental.h"

#define LIK_PLAID_MAX_CHUNKS (1 << 20)
#define LIK_PLAID_DEFAULT_CHUNK_DOCS 25000
/* ids and next_id are below this (a loaded doc_ids.npy / next_id.npy is
 * checked): next_id + documents added never overflows int64. */
#define LIK_PLAID_ID_LIMIT ((int64_t)1 << 62)

/* A mapped (or read) region; base NULL when empty. */
typedef struct {
  void *base;
  size_t size;
  int mapped; /* 1: munmap, 0: free */
} lik_region;

typedef struct {
  const void *codes;  /* token t's code at codes[t] (I32 or I64) */
  lik_dtype codes_dtype;
  const uint8_t *res; /* token t's residual bytes at res[t * width] */
  int64_t ntok, ndocs;
  int64_t tok0;       /* global index of the segment's first token */
  int64_t doc0;       /* global id of its first document */
  /* in-memory segments (owned != 0): growable buffers */
  int owned;
  int32_t *own_codes;
  uint8_t *own_res;
  int64_t cap_tok;
  /* where a mapped segment's data lies: region ids (-1: none) */
  int region_codes, region_res;
} lik_pseg;

struct lik_plaid_index {
  int nbits;
  int64_t dim, ncent, width; /* width = dim * nbits / 8 */
  uint16_t *cent_f16;        /* [ncent][dim] */
  float *cent_f32;           /* [ncent][dim], the same values */
  float cutoffs[255], weights[256];
  float *avg_residual; /* [dim] (zeros when the folder had none) */
  float cluster_threshold;
  int64_t chunk_docs;  /* documents per chunk for add */
  uint64_t seed;

  /* documents */
  int64_t ndocs, ntok;
  int64_t *doc_off; /* [ndocs + 1] global token offsets */
  int32_t *doc_seg; /* [ndocs] segment of each document */
  int64_t cap_docs;
  lik_pseg *segs;
  int64_t nseg, cap_seg;

  /* IVF: list c is ivf[ivf_off[c] .. ivf_off[c+1]) (ids, ascending) */
  int has_ivf;
  int64_t *ivf_off;     /* [ncent + 1] (owned) */
  const int64_t *ivf;   /* mapped or owned */
  int64_t *ivf_owned;   /* non-NULL when owned */

  /* ids (ids.c): the document at position j has id ids[j], or j when ids is
   * NULL; ids are unique and >= 0 (-1: a deleted document whose id an
   * update gave to a new position), positions are the stored order.  by_id
   * [ndocs]: positions sorted by id (kept with ids).  next_id: above every
   * id, the id of the next document add appends. */
  int64_t *ids;   /* [cap_docs] or NULL */
  int64_t *by_id; /* [cap_docs] or NULL (with ids) */
  int64_t next_id;

  /* tombstones: bit j of dead = the document at position j is deleted */
  uint64_t *dead; /* [cap_docs / 64 + 1] words, or NULL (none) */
  int64_t ndead;

  /* metadata.sqlite's bytes, kept and saved as they are (lik never reads them) */
  uint8_t *meta;
  int64_t meta_size;
  int has_meta;

  /* mapped files */
  lik_region *regions;
  int64_t nregions, cap_regions;

  /* its copy on a CUDA device (device.c): the backend's state, or NULL */
  void *cuda;
  int cuda_device;
  int64_t cuda_bytes;

  /* the folder the index is the state of (txn.c): has_home, the identity of
   * its metadata.json when the index was loaded from it or saved to it, and
   * dirty, the parts (LIK_PLAID_PART_*) changed since: a save there writes
   * only those */
  int has_home;
  lik_file_id home;
  unsigned dirty;

  /* search.c: the scratch of a search that ran each query over the threads,
   * kept for the next one (taken and put back atomically), or NULL */
  void *search_scratch;
};

/* The parts of an index folder, each a set of files a change rewrites whole
 * (metadata.json, the manifest, is written by every save). */
enum {
  LIK_PLAID_PART_DOCS = 1,    /* codec, IVF, codes, residuals, chunk files, doc_ids / next_id */
  LIK_PLAID_PART_DELETED = 2, /* deleted.npy */
  LIK_PLAID_PART_META = 4,    /* metadata.sqlite */
  LIK_PLAID_PART_ALL = 7
};

/* ---- ids and tombstones (ids.c) ---- */

static inline int64_t lik_plaid_id_of(const lik_plaid_index *ix, int64_t pos) {
  return ix->ids ? ix->ids[pos] : pos;
}

static inline int lik_plaid_is_dead(const lik_plaid_index *ix, int64_t pos) {
  return ix->dead && (ix->dead[pos >> 6] >> (pos & 63) & 1);
}

/* The position of document id, or -1 when the index has no such id
 * (deleted documents keep their positions: check lik_plaid_is_dead). */
int64_t lik_plaid_find(const lik_plaid_index *ix, int64_t id);

/* Sets the ids of the documents at positions [from, ndocs): given[i] for
 * position from + i, or next_id, next_id + 1, ... when given is NULL
 * (capacity reserved by lik_plaid_reserve_docs; by_id re-sorted in place
 * when given).  Never fails. */
void lik_plaid_assign_ids(lik_plaid_index *ix, int64_t from, const lik_index *given);

/* Sets ids (takes ownership of ids [>= cap_docs entries], checked unique and
 * >= 0 by the caller) with their by_id; LIK_ERR_ALLOC (ids freed) on failure. */
lik_status lik_plaid_set_ids(lik_plaid_index *ix, int64_t *ids);

/* Positions of the n ids of a validated call argument (name) into pos[n]:
 * LIK_ERR_VALUE naming the argument and the entry when an id is negative or
 * at least next_id ("out of range"), not in the index (a compacted one),
 * deleted, or given twice. */
lik_status lik_plaid_live_positions(const lik_plaid_index *ix, const lik_index *ids, int64_t n,
                                    const char *name, int64_t *pos);

/* Checks an id map for the index's stored documents (ids[j * stride], j <
 * ndocs, tombstones set): unique, >= 0, -1 only for a deleted document;
 * LIK_ERR_VALUE naming `what`, the entry or the duplicate id. */
lik_status lik_plaid_check_id_map(const lik_plaid_index *ix, const int64_t *ids, int64_t stride,
                                  const char *what);

/* Makes the tombstone bitmap (and, with ids_too, an identity id map) exist,
 * so that lik_plaid_kill / lik_plaid_assign_ids cannot fail; LIK_ERR_ALLOC. */
lik_status lik_plaid_reserve_living(lik_plaid_index *ix, int ids_too);

/* Tombstones the documents at positions pos[0..n) (live, distinct; the
 * bitmap reserved).  forget: their ids become -1 (an update gives the ids
 * to new positions; call lik_plaid_assign_ids next, which re-sorts by_id). */
void lik_plaid_kill(lik_plaid_index *ix, const int64_t *pos, int64_t n, int forget);

/* Drops the deleted documents (ndead > 0): codes, residuals, document
 * table and IVF rebuilt aside, then swapped in; on failure the index is
 * unchanged. */
lik_status lik_plaid_compact(lik_plaid_index *ix);

/* The codec view of the index (F16 centroids, F32 cutoffs / weights,
 * colbert layout) for the CPU backend. */
void lik_plaid_codec_view(const lik_plaid_index *ix, lik_codec_view *v);

/* A new index with its codec (takes ownership of cent_f16 / avg_residual,
 * which may be NULL for zeros); NULL when out of memory. */
lik_plaid_index *lik_plaid_new(int nbits, int64_t dim, int64_t ncent, uint16_t *cent_f16,
                               const float *cutoffs, const float *weights, float *avg_residual);

/* Room for n more documents / one more segment / region; LIK_OK or
 * LIK_ERR_ALLOC. */
lik_status lik_plaid_reserve_docs(lik_plaid_index *ix, int64_t n);
lik_status lik_plaid_reserve_segs(lik_plaid_index *ix, int64_t n);
int64_t lik_plaid_add_region(lik_plaid_index *ix, lik_region r); /* -1: no memory */

/* Token t (global) of document j: segment s = doc_seg[j]; its code / bytes. */
static inline int64_t lik_pseg_code(const lik_pseg *s, int64_t t) {
  return s->codes_dtype == LIK_I32 ? (int64_t)((const int32_t *)s->codes)[t]
                                   : ((const int64_t *)s->codes)[t];
}

/* ---- build (build.c, kmeans.c, ivf.c) ---- */

/* L2-normalises the rows of pts [n][dim] in place (an all-zero row stays
 * zero; fp64 sums, each row by one task): the k-means points. */
void lik_plaid_normalize(float *pts, int64_t n, int64_t dim, int threads);

/* Rows of x as fp32 into dst [n][x->dim] over threads: dst row i is x's row
 * src[i] (src NULL: row i).  *bad: the first dst row with a NaN / infinite
 * value, or -1 (every row is loaded either way).  LIK_ERR_ALLOC. */
lik_status lik_plaid_load_rows(const lik_seqs *x, const int64_t *src, int64_t n, int threads,
                               float *dst, int64_t *bad);

/* Spherical k-means of n normalised points [n][dim] fp32 into k centroids
 * (written normalised, fp32 [k][dim]); deterministic for the seed. */
lik_status lik_plaid_kmeans(const float *pts, int64_t n, int64_t dim, int64_t k, int niters,
                            uint64_t seed, const lik_call *call, float *cent);

/* The codec's compress of p where p->call says (host data either way):
 * the CPU's, or LIK_CUDA: lik_cuda_codec_compress_host on device
 * p->call.device_id (the same codes and bytes).  keep, same: NULL or a
 * handle kept between calls and what did not change since the last
 * (lik_cuda_codec_compress_host); free it with lik_plaid_staged_free (NULL:
 * no-op). */
lik_status lik_plaid_compress(const lik_codec_problem *p, lik_cuda_staged **keep, unsigned same);
void lik_plaid_staged_free(lik_cuda_staged *keep);

/* Codes (nearest centroid by inner product, lowest index on ties) of rows
 * [n][dim] fp32 against centroids of the view cv; codes I32 [n].  Through
 * the codec's compress backend (no residuals). */
lik_status lik_plaid_assign(const lik_codec_view *cv, const float *rows, int64_t n,
                            const lik_call *call, int32_t *codes);

/* Rebuilds / extends the IVF with the documents [doc_from, ndocs). */
lik_status lik_plaid_ivf_extend(lik_plaid_index *ix, int64_t doc_from);

/* Appends k centroids cent [k][dim] fp32 (normalised) to the index: stored
 * fp16 (cent_f32 holds the fp16 values), empty IVF lists; ncent grows by k.
 * On failure (LIK_ERR_ALLOC) ncent is unchanged.  The tables only grow, so
 * setting ncent back undoes the call. */
lik_status lik_plaid_grow_centroids(lik_plaid_index *ix, const float *cent, int64_t k);

/* Row r of a [T, d] lik_seqs (count 1) as fp32 into dst; 0 if a value is
 * not finite. */
int lik_plaid_load_row(const lik_seqs *x, int64_t r, float *dst);

/* The q-quantile of v [n] (n >= 1; sorts v): linear interpolation between
 * order statistics, as numpy / torch.quantile. */
float lik_plaid_quantile(float *v, int64_t n, double q);

/* ||x - c|| of a token x and a centroid c [dim] (fp32 sum of squares). */
static inline float lik_plaid_residual_norm(const float *x, const float *c, int64_t dim) {
  float ss = 0;
  for (int64_t k = 0; k < dim; k++) {
    const float r = x[k] - c[k];
    ss += r * r;
  }
  return sqrtf(ss);
}

/* A counter-based PRNG (splitmix64): the n-th draw of a seed. */
static inline uint64_t lik_plaid_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n) (n >= 1). */
static inline uint64_t lik_plaid_below(uint64_t *state, uint64_t n) {
  const uint64_t lim = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = lik_plaid_rand(state);
  while (x >= lim);
  return x % n;
}

/* A seeded sample of k of 0 .. n-1: perm [n] gets 0 .. n-1 with its first k
 * entries shuffled in (a partial Fisher-Yates shuffle; k <= n). */
static inline void lik_plaid_sample(uint64_t *state, int64_t *perm, int64_t n, int64_t k) {
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = 0; i < k; i++) {
    const int64_t j = i + (int64_t)lik_plaid_below(state, (uint64_t)(n - i));
    const int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

/* The codec view of dense centroids cent [k][dim] of dtype (F32 or F16). */
static inline lik_codec_view lik_plaid_dense_view(const void *cent, lik_dtype dtype, int64_t k,
                                                  int64_t dim, int nbits) {
  lik_codec_view cv;
  memset(&cv, 0, sizeof cv);
  cv.cent = cent;
  cv.cent_dtype = dtype;
  cv.ncent = k;
  cv.dim = dim;
  cv.cent_sc = dim;
  cv.cent_sk = 1;
  cv.nbits = nbits;
  cv.width = dim * nbits / 8;
  return cv;
}

/* Resolved build options (defaults applied). */
typedef struct {
  int nbits, niters;
  int expand; /* add: new centroids for outlier tokens (expand.c) */
  int64_t num_centroids, total_tokens, max_ppc, sample_docs, chunk_docs;
  uint64_t seed;
  lik_call call;
  lik_progress_fn progress;
  void *progress_user;
} lik_plaid_bopts;

/* Validated inputs of build / add: X [T, d] as rows, cu [N + 1]. */
typedef struct {
  lik_seqs x;      /* count 1, len T, dim d */
  lik_index cu;    /* N + 1 offsets */
  int64_t ndocs, ntok;
} lik_plaid_docs;

/* A new index, without documents, trained on the tokens of sample / of
 * fast-plaid's document sample of docs. */
lik_status lik_plaid_train_impl(const lik_seqs *sample, const lik_plaid_bopts *o,
                                lik_plaid_index **out);
lik_status lik_plaid_train_docs(const lik_plaid_docs *docs, const lik_plaid_bopts *o,
                                lik_plaid_index **out);

/* Codes docs with the index's centroids and appends them as documents
 * ndocs .. (in-memory chunks of chunk_docs; progress reported).  Leaves the
 * IVF, ids and threshold alone; on failure part of them may be appended (the
 * transaction, txn.c, rolls back). */
lik_status lik_plaid_append(lik_plaid_index *ix, const lik_plaid_docs *docs,
                            const lik_plaid_bopts *o);

/* ---- centroid expansion (expand.c; fast-plaid's update) ---- */

/* Outlier tokens of docs (residual norm to their nearest centroid above
 * cluster_threshold) get new centroids: k-means on them, appended with
 * lik_plaid_grow_centroids.  A threshold that is not a positive finite
 * number (an index without cluster_threshold.npy) flags none.  On failure
 * the index is unchanged. */
lik_status lik_plaid_expand(lik_plaid_index *ix, const lik_plaid_docs *docs,
                            const lik_plaid_bopts *o);

/* The cluster threshold after adding docs as documents doc_from .. ndocs-1
 * (coded; old_ntok tokens before them): the old one and the 0.75-quantile
 * of the new tokens' residual norms, weighted by their token counts (the
 * new quantile alone when the old one is not a positive finite number). */
lik_status lik_plaid_updated_threshold(const lik_plaid_index *ix, const lik_plaid_docs *docs,
                                       int64_t doc_from, int64_t old_ntok, float *thr);

/* ---- files (format.c) ---- */

/* Loads folder path (its home: has_home, home set, nothing dirty). */
lik_status lik_plaid_load_impl(const char *path, unsigned flags, lik_plaid_index **out);

/* Stages into change cm of folder dir the files of the parts (LIK_PLAID_PART_*)
 * and marks the ones their state has not for removal, then the manifest
 * metadata.json.  doc_ids (stride): written as doc_ids.npy instead of the
 * index's ids (LIK_PLAID_PART_DOCS).  LIK_ERR_VALUE naming dir and the file,
 * LIK_ERR_ALLOC; nothing committed either way. */
lik_status lik_plaid_stage_files(lik_commit *cm, const lik_plaid_index *ix, const char *dir,
                                 unsigned parts, const int64_t *doc_ids, int64_t doc_ids_stride);

/* ---- changing an index (txn.c) ---- */

/* Each call is one transaction: on failure the index is as it was, bitwise
 * (and its folder, for a save); on success its dirty parts name what a save
 * to its home rewrites. */

/* train on docs' sample, then add docs (never expanding); *out NULL on failure */
lik_status lik_plaid_build_impl(const lik_plaid_docs *docs, const lik_plaid_bopts *o,
                                lik_plaid_index **out);
/* Appends docs (expanding the centroids first with o->expand); their ids:
 * given (live ids, which are deleted at their old positions: an update), or
 * the next ids when given is NULL. */
lik_status lik_plaid_add_impl(lik_plaid_index *ix, const lik_plaid_docs *docs,
                              const lik_plaid_bopts *o, const lik_index *given);
lik_status lik_plaid_delete_impl(lik_plaid_index *ix, const lik_index *ids, int64_t n);
lik_status lik_plaid_compact_impl(lik_plaid_index *ix);
/* The metadata database: a copy of data [size] (size -1: none). */
lik_status lik_plaid_set_meta_impl(lik_plaid_index *ix, const void *data, int64_t size);
/* One atomic change of folder path (commit.h): the dirty parts when path is
 * the index's home (unchanged since), else every part; then path is its home
 * (none after a save with doc_ids, which the index does not hold). */
lik_status lik_plaid_save_impl(lik_plaid_index *ix, const char *path, const int64_t *doc_ids,
                               int64_t doc_ids_stride);

/* ---- the device copy (device.c) ---- */

/* Copies the index to CUDA device device_id (replacing a copy), or frees the
 * copy (device_id -1).  LIK_ERR_UNSUPPORTED in a build without CUDA. */
lik_status lik_plaid_to_device_impl(lik_plaid_index *ix, int device_id);
/* After a change (add, update, delete, compact) that succeeded: the copy made
 * again on its device; on failure it is freed and the message says so. */
lik_status lik_plaid_refresh_device(lik_plaid_index *ix);
/* The search on the device copy (q's tensors on ix->cuda_device). */
lik_status lik_plaid_search_device(const lik_plaid_index *ix, const lik_plaid_query *q);

/* ---- search (search.c) ---- */

lik_status lik_plaid_search_impl(const lik_plaid_index *ix, const lik_plaid_query *q);

/* Frees the scratch a search kept with the index (lik_plaid_index_free). */
void lik_plaid_search_scratch_free(lik_plaid_index *ix);

#endif /* LIK_INDEX_INTERNAL_H */
