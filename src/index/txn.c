/*
 * txn.c — changing an index.  Every change of a lik_plaid_index (build, add,
 * an update, an expanding add, delete, compact, its metadata) and of its
 * folder (save) is one transaction here, and the rule that keeps a change
 * whole lives here alone (docs/plaid_index.md, "Changing an index"):
 *
 *   begin   records what the index is: its sizes, centroids, threshold, id map;
 *   stage   builds the new state beside the old: tables only grow (documents,
 *           chunks and centroids past the recorded sizes), a compact builds
 *           its tables aside, a save writes its files into the folder's
 *           staging folder (commit.h);
 *   commit  switches with steps that cannot fail (sizes, ids, tombstones,
 *           swapped tables; the folder's one rename) and records the parts of
 *           the folder the change made stale (a save there writes only them);
 *   abort   returns to what begin recorded, bitwise (a save: the staging
 *           folder removed, the folder as it was).
 *
 * The files it calls do one job each and change nothing on their own:
 * build.c trains and codes, expand.c finds new centroids, ivf.c lists, ids.c
 * maps ids and compacts, format.c writes the files, commit.c switches a folder.
 */
#include <stdlib.h>
#include <string.h>

#include "commit.h"
#include "index_internal.h"

#define ERRLEN 400

typedef struct {
  lik_plaid_index *ix;
  int64_t ndocs, ntok, nseg, ncent;
  int64_t last_ntok, last_ndocs; /* the last chunk's, when in memory (an add grows it) */
  int last_owned, had_ids;
  float threshold;
} txn;

static void begin(txn *t, lik_plaid_index *ix) {
  memset(t, 0, sizeof *t);
  t->ix = ix;
  t->ndocs = ix->ndocs;
  t->ntok = ix->ntok;
  t->nseg = ix->nseg;
  t->ncent = ix->ncent;
  t->last_owned = ix->nseg > 0 && ix->segs[ix->nseg - 1].owned;
  if (t->last_owned) {
    t->last_ntok = ix->segs[ix->nseg - 1].ntok;
    t->last_ndocs = ix->segs[ix->nseg - 1].ndocs;
  }
  t->had_ids = ix->ids != NULL;
  t->threshold = ix->cluster_threshold;
}

/* The change is whole; parts: the parts of the folder it made stale. */
static lik_status commit(txn *t, unsigned parts) {
  t->ix->dirty |= parts;
  return LIK_OK;
}

/* Back to the index at begin; returns st. */
static lik_status abort_change(txn *t, lik_status st) {
  lik_plaid_index *ix = t->ix;
  for (int64_t i = t->nseg; i < ix->nseg; i++) {
    free(ix->segs[i].own_codes);
    free(ix->segs[i].own_res);
  }
  ix->nseg = t->nseg;
  if (t->last_owned) {
    ix->segs[t->nseg - 1].ntok = t->last_ntok;
    ix->segs[t->nseg - 1].ndocs = t->last_ndocs;
  }
  ix->ndocs = t->ndocs;
  ix->ntok = t->ntok;
  ix->ncent = t->ncent; /* the grown centroid tables are not read past it */
  ix->cluster_threshold = t->threshold;
  if (!t->had_ids && ix->ids) { /* an update's identity map: the ids stay the positions */
    free(ix->ids);
    free(ix->by_id);
    ix->ids = ix->by_id = NULL;
  }
  return st;
}

lik_status lik_plaid_add_impl(lik_plaid_index *ix, const lik_plaid_docs *docs,
                              const lik_plaid_bopts *o, const lik_index *given) {
  const int64_t N = docs->ndocs;
  int64_t *upd = NULL; /* an update: the positions of the given ids */
  float thr = ix->cluster_threshold;
  txn t;
  begin(&t, ix);
  lik_status st = LIK_OK;
  if (given) {
    upd = (int64_t *)malloc((size_t)N * sizeof(int64_t) + 1);
    if (!upd) return lik_fail(LIK_ERR_ALLOC, "ids: cannot allocate %lld positions", (long long)N);
    if (!(st = lik_plaid_live_positions(ix, given, N, "ids", upd)))
      st = lik_plaid_reserve_living(ix, 1);
  }
  if (!st) st = lik_plaid_reserve_docs(ix, N);
  if (!st && o->expand) st = lik_plaid_expand(ix, docs, o);
  if (!st) st = lik_plaid_append(ix, docs, o); /* against the expanded centroids */
  if (!st && o->expand) st = lik_plaid_updated_threshold(ix, docs, t.ndocs, t.ntok, &thr);
  if (!st) st = lik_plaid_ivf_extend(ix, ix->has_ivf ? t.ndocs : 0);
  if (st) {
    free(upd);
    return abort_change(&t, st);
  }
  ix->cluster_threshold = thr;
  if (upd) lik_plaid_kill(ix, upd, N, 1);
  lik_plaid_assign_ids(ix, t.ndocs, given);
  free(upd);
  return commit(&t, given ? LIK_PLAID_PART_DOCS | LIK_PLAID_PART_DELETED : LIK_PLAID_PART_DOCS);
}

lik_status lik_plaid_build_impl(const lik_plaid_docs *docs, const lik_plaid_bopts *o,
                                lik_plaid_index **out) {
  lik_status st = lik_plaid_train_docs(docs, o, out);
  if (st) return st;
  lik_plaid_bopts add = *o;
  add.expand = 0; /* the documents the centroids were trained on */
  if ((st = lik_plaid_add_impl(*out, docs, &add, NULL))) {
    lik_plaid_index_free(*out);
    *out = NULL;
  }
  return st;
}

lik_status lik_plaid_delete_impl(lik_plaid_index *ix, const lik_index *ids, int64_t n) {
  int64_t *pos = (int64_t *)malloc((size_t)n * sizeof(int64_t) + 1);
  if (!pos) return lik_fail(LIK_ERR_ALLOC, "ids: cannot allocate %lld positions", (long long)n);
  txn t;
  begin(&t, ix);
  lik_status st = lik_plaid_live_positions(ix, ids, n, "ids", pos);
  if (!st) st = lik_plaid_reserve_living(ix, 0);
  if (!st) lik_plaid_kill(ix, pos, n, 0);
  free(pos);
  return st ? abort_change(&t, st) : commit(&t, LIK_PLAID_PART_DELETED);
}

lik_status lik_plaid_compact_impl(lik_plaid_index *ix) {
  if (!ix->ndead) return LIK_OK;
  txn t;
  begin(&t, ix);
  const lik_status st = lik_plaid_compact(ix); /* built aside, swapped in */
  return st ? abort_change(&t, st)
            : commit(&t, LIK_PLAID_PART_DOCS | LIK_PLAID_PART_DELETED);
}

lik_status lik_plaid_set_meta_impl(lik_plaid_index *ix, const void *data, int64_t size) {
  if (size < 0 ? !ix->has_meta
               : ix->has_meta && ix->meta_size == size && (!size || !memcmp(ix->meta, data, (size_t)size)))
    return LIK_OK; /* the database it has: nothing to save */
  uint8_t *copy = NULL;
  if (size >= 0) {
    copy = (uint8_t *)malloc((size_t)size + 1);
    if (!copy) return lik_fail(LIK_ERR_ALLOC, "data: cannot copy %lld bytes", (long long)size);
    if (size) memcpy(copy, data, (size_t)size);
  }
  txn t;
  begin(&t, ix);
  free(ix->meta);
  ix->meta = copy;
  ix->meta_size = size >= 0 ? size : 0;
  ix->has_meta = size >= 0;
  return commit(&t, LIK_PLAID_PART_META);
}

/* ---- save: a change of the folder ------------------------------------------------ */

/* The identity of path's metadata.json (its current state); 0 on success. */
static int manifest_id(const char *path, lik_file_id *id) {
  char err[ERRLEN];
  lik_folder f;
  int bad = lik_folder_open(&f, path, err, sizeof err);
  if (!bad) bad = lik_folder_file_id(&f, "metadata.json", id, err, sizeof err);
  lik_folder_close(&f);
  return bad;
}

lik_status lik_plaid_save_impl(lik_plaid_index *ix, const char *path, const int64_t *doc_ids,
                               int64_t doc_ids_stride) {
  char err[ERRLEN];
  lik_commit *cm;
  if (lik_commit_begin(path, &cm, err, sizeof err))
    return lik_fail(LIK_ERR_VALUE, "PLAID index %s: %s", path, err);
  /* the index's home, unchanged since (every change rewrites metadata.json):
   * its files of the parts not dirty are the index's */
  lik_file_id now;
  const int home = !doc_ids && ix->has_home && !manifest_id(path, &now) &&
                   !memcmp(&now, &ix->home, sizeof now);
  const lik_status st = lik_plaid_stage_files(cm, ix, path, home ? ix->dirty : LIK_PLAID_PART_ALL,
                                              doc_ids, doc_ids_stride);
  if (st) {
    lik_commit_abort(cm);
    return st;
  }
  if (lik_commit_finish(cm, err, sizeof err))
    return lik_fail(LIK_ERR_VALUE, "PLAID index %s: %s", path, err);
  /* committed: path holds the index (not with doc_ids, which it does not hold) */
  ix->has_home = !doc_ids && !manifest_id(path, &ix->home);
  ix->dirty = 0;
  return LIK_OK;
}
