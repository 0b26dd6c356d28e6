/*
 * ids.c — a living index's documents: stable ids (the id map), tombstones,
 * compaction (docs/plaid_index.md, "Delete, update, compact"; txn.c makes
 * them changes).
 *
 * A document keeps its id for life.  Until something moves documents the id
 * is the position (ix->ids NULL); an update (a new position under an old id)
 * or a compact (positions close up) makes the map explicit, and a save writes
 * it as doc_ids.npy.  Deleting sets a tombstone bit per position (O(deleted):
 * the IVF and the codes stay as they are, the search skips the bit); compact
 * rewrites codes, residuals, document table and IVF without the deleted
 * documents, keeping every survivor's id.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "index_internal.h"

/* by_id = positions sorted by id (ids unique): a heap sort in place, so
 * that re-sorting after an update needs no memory (it cannot fail). */
static void sift(int64_t *h, int64_t n, int64_t i, const lik_plaid_index *ix) {
  const int64_t *id = ix->ids;
  for (;;) {
    int64_t b = i;
    const int64_t l = 2 * i + 1, r = l + 1;
    if (l < n && id[h[l]] > id[h[b]]) b = l;
    if (r < n && id[h[r]] > id[h[b]]) b = r;
    if (b == i) return;
    const int64_t t = h[i];
    h[i] = h[b];
    h[b] = t;
    i = b;
  }
}

static void sort_by_id(lik_plaid_index *ix) {
  int64_t *h = ix->by_id;
  const int64_t n = ix->ndocs;
  int sorted = 1;
  for (int64_t j = 0; j < n; j++) h[j] = j;
  for (int64_t j = 1; j < n && sorted; j++) sorted = ix->ids[j - 1] < ix->ids[j];
  if (sorted) return; /* the usual map: ascending with the positions */
  for (int64_t i = n / 2 - 1; i >= 0; i--) sift(h, n, i, ix);
  for (int64_t e = n - 1; e > 0; e--) {
    const int64_t t = h[0];
    h[0] = h[e];
    h[e] = t;
    sift(h, e, 0, ix);
  }
}

int64_t lik_plaid_find(const lik_plaid_index *ix, int64_t id) {
  if (!ix->ids) return id >= 0 && id < ix->ndocs ? id : -1;
  int64_t lo = 0, hi = ix->ndocs;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const int64_t v = ix->ids[ix->by_id[mid]];
    if (v == id) return ix->by_id[mid];
    if (v < id) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

lik_status lik_plaid_set_ids(lik_plaid_index *ix, int64_t *ids) {
  const int64_t cap = ix->cap_docs > ix->ndocs ? ix->cap_docs : ix->ndocs;
  int64_t *by = (int64_t *)malloc((size_t)(cap ? cap : 1) * sizeof(int64_t));
  if (!by) {
    free(ids);
    return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate the id map (%lld documents)",
                    (long long)ix->ndocs);
  }
  free(ix->ids);
  free(ix->by_id);
  ix->ids = ids;
  ix->by_id = by;
  int64_t next = 0;
  for (int64_t j = 0; j < ix->ndocs; j++)
    if (ids[j] >= next) next = ids[j] + 1;
  ix->next_id = next;
  sort_by_id(ix);
  return LIK_OK;
}

lik_status lik_plaid_reserve_living(lik_plaid_index *ix, int ids_too) {
  const int64_t cap = ix->cap_docs > ix->ndocs ? ix->cap_docs : ix->ndocs;
  if (!ix->dead) {
    ix->dead = (uint64_t *)calloc((size_t)(cap / 64 + 1), sizeof(uint64_t));
    if (!ix->dead) return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate the tombstones "
                                   "(%lld documents)", (long long)cap);
  }
  if (ids_too && !ix->ids) {
    int64_t *ids = (int64_t *)malloc((size_t)(cap ? cap : 1) * sizeof(int64_t));
    if (!ids) return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate the id map (%lld "
                              "documents)", (long long)cap);
    for (int64_t j = 0; j < ix->ndocs; j++) ids[j] = j;
    const int64_t next = ix->next_id;
    lik_status st = lik_plaid_set_ids(ix, ids);
    ix->next_id = next; /* ids of documents compacted away are not given again */
    return st;
  }
  return LIK_OK;
}

void lik_plaid_assign_ids(lik_plaid_index *ix, int64_t from, const lik_index *given) {
  if (!given) {
    if (ix->ids)
      for (int64_t j = from; j < ix->ndocs; j++) {
        ix->ids[j] = ix->next_id + (j - from);
        ix->by_id[j] = j; /* above every id: by_id stays sorted */
      }
    ix->next_id += ix->ndocs - from;
    return;
  }
  for (int64_t j = from; j < ix->ndocs; j++) ix->ids[j] = lik_index_at(given, j - from);
  sort_by_id(ix);
}

void lik_plaid_kill(lik_plaid_index *ix, const int64_t *pos, int64_t n, int forget) {
  for (int64_t i = 0; i < n; i++) {
    ix->dead[pos[i] >> 6] |= (uint64_t)1 << (pos[i] & 63);
    if (forget) ix->ids[pos[i]] = -1;
  }
  ix->ndead += n;
}

lik_status lik_plaid_live_positions(const lik_plaid_index *ix, const lik_index *ids, int64_t n,
                                    const char *name, int64_t *pos) {
  for (int64_t i = 0; i < n; i++) {
    const int64_t id = lik_index_at(ids, i);
    if (id < 0 || id >= ix->next_id)
      return lik_fail(LIK_ERR_VALUE, "%s: %s[%lld]=%lld is out of range (ids are in [0, %lld))",
                      name, name, (long long)i, (long long)id, (long long)ix->next_id);
    pos[i] = lik_plaid_find(ix, id);
    if (pos[i] < 0)
      return lik_fail(LIK_ERR_VALUE, "%s: %s[%lld]=%lld is not a document of the index (an "
                      "unknown id: deleted and compacted away)", name, name, (long long)i,
                      (long long)id);
    if (lik_plaid_is_dead(ix, pos[i]))
      return lik_fail(LIK_ERR_VALUE, "%s: %s[%lld]=%lld is a deleted document", name, name,
                      (long long)i, (long long)id);
  }
  /* duplicates: a bitmap of positions; the first entry a repeated one names */
  uint64_t *seen = (uint64_t *)calloc((size_t)(ix->ndocs / 64 + 1), sizeof(uint64_t));
  if (!seen) return lik_fail(LIK_ERR_ALLOC, "%s: cannot allocate a bitmap of %lld documents",
                             name, (long long)ix->ndocs);
  lik_status st = LIK_OK;
  for (int64_t i = 0; i < n && !st; i++) {
    const uint64_t bit = (uint64_t)1 << (pos[i] & 63);
    if (seen[pos[i] >> 6] & bit) {
      int64_t first = 0;
      while (pos[first] != pos[i]) first++;
      st = lik_fail(LIK_ERR_VALUE, "%s: %s[%lld]=%lld is a duplicate of %s[%lld]", name, name,
                    (long long)i, (long long)lik_index_at(ids, i), name, (long long)first);
    }
    seen[pos[i] >> 6] |= bit;
  }
  free(seen);
  return st;
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

lik_status lik_plaid_check_id_map(const lik_plaid_index *ix, const int64_t *ids, int64_t stride,
                                  const char *what) {
  const int64_t n = ix->ndocs;
  int64_t *v = (int64_t *)malloc((size_t)n * sizeof(int64_t) + 1);
  if (!v) return lik_fail(LIK_ERR_ALLOC, "%s: cannot allocate %lld ids", what, (long long)n);
  for (int64_t j = 0; j < n; j++) {
    v[j] = ids[j * stride];
    if (v[j] < -1 || v[j] >= LIK_PLAID_ID_LIMIT || (v[j] == -1 && !lik_plaid_is_dead(ix, j))) {
      free(v);
      return lik_fail(LIK_ERR_VALUE, "%s: entry %lld = %lld is not an id (ids are in [0, 2^62); "
                      "-1 only for a deleted document)", what, (long long)j,
                      (long long)ids[j * stride]);
    }
  }
  qsort(v, (size_t)n, sizeof(int64_t), cmp_i64);
  for (int64_t j = 1; j < n; j++)
    if (v[j] >= 0 && v[j] == v[j - 1]) {
      const int64_t dup = v[j];
      free(v);
      return lik_fail(LIK_ERR_VALUE, "%s: id %lld is given to two documents", what,
                      (long long)dup);
    }
  free(v);
  return LIK_OK;
}

/* ---- compact ---------------------------------------------------------------------- */

lik_status lik_plaid_compact(lik_plaid_index *ix) {
  const int64_t N = ix->ndocs, L = N - ix->ndead, K = ix->ncent, W = ix->width;
  const int64_t chunk = ix->chunk_docs > 0 ? ix->chunk_docs : LIK_PLAID_DEFAULT_CHUNK_DOCS;
  const int64_t nseg = (L + chunk - 1) / chunk;
  int64_t *remap = (int64_t *)malloc((size_t)N * sizeof(int64_t) + 1);
  int64_t *off = (int64_t *)malloc((size_t)(L + 1) * sizeof(int64_t));
  int32_t *dseg = (int32_t *)malloc((size_t)(L ? L : 1) * sizeof(int32_t));
  int64_t *ids = (int64_t *)malloc((size_t)(L ? L : 1) * sizeof(int64_t));
  int64_t *by = (int64_t *)malloc((size_t)(L ? L : 1) * sizeof(int64_t));
  int64_t *ivo = (int64_t *)malloc((size_t)(K + 1) * sizeof(int64_t));
  lik_pseg *segs = (lik_pseg *)calloc((size_t)(nseg ? nseg : 1), sizeof(lik_pseg));
  int64_t *ivf = NULL;
  lik_status st = LIK_OK;
  if (!remap || !off || !dseg || !ids || !by || !ivo || !segs) goto nomem;
  /* the survivors' positions and token offsets */
  off[0] = 0;
  for (int64_t j = 0, k = 0; j < N; j++) {
    remap[j] = lik_plaid_is_dead(ix, j) ? -1 : k;
    if (remap[j] < 0) continue;
    ids[k] = lik_plaid_id_of(ix, j);
    off[k + 1] = off[k] + ix->doc_off[j + 1] - ix->doc_off[j];
    k++;
  }
  /* codes and residuals, chunk by chunk (codes read back checked) */
  for (int64_t s = 0, j = 0; s < nseg; s++) {
    lik_pseg *g = &segs[s];
    const int64_t d0 = s * chunk, d1 = d0 + chunk < L ? d0 + chunk : L;
    g->owned = 1;
    g->codes_dtype = LIK_I32;
    g->doc0 = d0;
    g->ndocs = d1 - d0;
    g->tok0 = off[d0];
    g->ntok = off[d1] - off[d0];
    g->cap_tok = g->ntok;
    g->region_codes = g->region_res = -1;
    g->own_codes = (int32_t *)malloc((size_t)g->ntok * sizeof(int32_t) + 1);
    g->own_res = (uint8_t *)malloc((size_t)(g->ntok * W) + 1);
    g->codes = g->own_codes;
    g->res = g->own_res;
    if (!g->own_codes || !g->own_res) goto nomem;
    for (int64_t k = d0; k < d1; k++) dseg[k] = (int32_t)s;
    for (int64_t t = 0; j < N && (remap[j] < 0 || remap[j] < d1); j++) {
      if (remap[j] < 0) continue;
      const lik_pseg *o = &ix->segs[ix->doc_seg[j]];
      const int64_t t0 = ix->doc_off[j] - o->tok0, len = ix->doc_off[j + 1] - ix->doc_off[j];
      for (int64_t u = 0; u < len; u++) {
        const int64_t c = lik_pseg_code(o, t0 + u);
        if (c < 0 || c >= K) {
          st = lik_fail(LIK_ERR_VALUE, "PLAID compact: document %lld, token %lld: code %lld is "
                        "outside [0, K=%lld) (a corrupt codes file; the index is unchanged)",
                        (long long)lik_plaid_id_of(ix, j), (long long)u, (long long)c,
                        (long long)K);
          goto out;
        }
        g->own_codes[t + u] = (int32_t)c;
      }
      if (len) memcpy(g->own_res + t * W, o->res + t0 * W, (size_t)(len * W));
      t += len;
    }
  }
  /* the IVF without the deleted documents, renumbered (order kept) */
  if (ix->has_ivf) {
    int64_t total = 0;
    for (int64_t i = 0; i < ix->ivf_off[K]; i++) total += remap[ix->ivf[i]] >= 0;
    ivf = (int64_t *)malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    if (!ivf) goto nomem;
    int64_t m = 0;
    for (int64_t c = 0; c < K; c++) {
      ivo[c] = m;
      for (int64_t i = ix->ivf_off[c]; i < ix->ivf_off[c + 1]; i++)
        if (remap[ix->ivf[i]] >= 0) ivf[m++] = remap[ix->ivf[i]];
    }
    ivo[K] = m;
  }
  /* swap in (nothing below fails) */
  for (int64_t s = 0; s < ix->nseg; s++) {
    free(ix->segs[s].own_codes);
    free(ix->segs[s].own_res);
  }
  free(ix->segs);
  ix->segs = segs;
  ix->nseg = ix->cap_seg = nseg;
  segs = NULL;
  for (int64_t r = 0; r < ix->nregions; r++) /* the mapped files are no longer read */
    if (ix->regions[r].base && ix->regions[r].mapped) {
      munmap(ix->regions[r].base, ix->regions[r].size);
      ix->regions[r].base = NULL;
    }
  free(ix->doc_off);
  free(ix->doc_seg);
  ix->doc_off = off;
  ix->doc_seg = dseg;
  ix->cap_docs = L;
  ix->ndocs = L;
  ix->ntok = ix->doc_off[L];
  off = NULL;
  dseg = NULL;
  if (ix->has_ivf) {
    free(ix->ivf_owned);
    ix->ivf_owned = ivf;
    ix->ivf = ivf;
    memcpy(ix->ivf_off, ivo, (size_t)(K + 1) * sizeof(int64_t));
    ivf = NULL;
  }
  free(ix->ids);
  free(ix->by_id);
  ix->ids = ids;
  ix->by_id = by;
  ids = by = NULL;
  sort_by_id(ix);
  free(ix->dead);
  ix->dead = NULL;
  ix->ndead = 0;
  goto out;
nomem:
  st = lik_fail(LIK_ERR_ALLOC, "PLAID compact: out of memory for %lld documents, %lld tokens "
                "(the index is unchanged)", (long long)L, (long long)ix->ntok);
out:
  if (segs)
    for (int64_t s = 0; s < nseg; s++) {
      free(segs[s].own_codes);
      free(segs[s].own_res);
    }
  free(segs);
  free(remap);
  free(off);
  free(dseg);
  free(ids);
  free(by);
  free(ivo);
  free(ivf);
  return st;
}
