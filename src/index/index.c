/*
 * index.c — a lik_plaid_index's memory: creation, growth of the document /
 * segment / region tables, release.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/dtype.h"
#include "index_internal.h"

void lik_plaid_codec_view(const lik_plaid_index *ix, lik_codec_view *v) {
  memset(v, 0, sizeof *v);
  v->cent = ix->cent_f16;
  v->cent_dtype = LIK_F16;
  v->ncent = ix->ncent;
  v->dim = ix->dim;
  v->cent_sc = ix->dim;
  v->cent_sk = 1;
  v->cutoffs = ix->cutoffs;
  v->cutoffs_dtype = LIK_F32;
  v->cutoffs_s = 1;
  v->weights = ix->weights;
  v->weights_dtype = LIK_F32;
  v->weights_s = 1;
  v->nbits = ix->nbits;
  v->layout = LIK_RESIDUAL_COLBERT;
  v->width = ix->width;
}

lik_plaid_index *lik_plaid_new(int nbits, int64_t dim, int64_t ncent, uint16_t *cent_f16,
                               const float *cutoffs, const float *weights, float *avg_residual) {
  lik_plaid_index *ix = (lik_plaid_index *)calloc(1, sizeof *ix);
  if (!ix) {
    free(cent_f16);
    free(avg_residual);
    return NULL;
  }
  ix->nbits = nbits;
  ix->dim = dim;
  ix->ncent = ncent;
  ix->width = dim * nbits / 8;
  ix->cent_f16 = cent_f16;
  ix->avg_residual = avg_residual ? avg_residual : (float *)calloc((size_t)dim, sizeof(float));
  ix->cent_f32 = (float *)malloc((size_t)(ncent * dim) * sizeof(float) + 1);
  ix->ivf_off = (int64_t *)calloc((size_t)ncent + 1, sizeof(int64_t));
  ix->doc_off = (int64_t *)calloc(1, sizeof(int64_t));
  ix->chunk_docs = LIK_PLAID_DEFAULT_CHUNK_DOCS;
  if (!ix->avg_residual || !ix->cent_f32 || !ix->ivf_off || !ix->doc_off) {
    lik_plaid_index_free(ix);
    return NULL;
  }
  for (int64_t i = 0; i < ncent * dim; i++) ix->cent_f32[i] = lik_tr_f16_to_f32(cent_f16[i]);
  const int nb = 1 << nbits;
  for (int i = 0; i < nb - 1; i++) ix->cutoffs[i] = cutoffs[i];
  for (int i = 0; i < nb; i++) ix->weights[i] = weights[i];
  return ix;
}

lik_status lik_plaid_reserve_docs(lik_plaid_index *ix, int64_t n) {
  if (ix->ndocs + n <= ix->cap_docs) return LIK_OK;
  int64_t cap = ix->cap_docs ? ix->cap_docs : 64;
  while (cap < ix->ndocs + n) cap *= 2;
  int64_t *off = (int64_t *)realloc(ix->doc_off, (size_t)(cap + 1) * sizeof(int64_t));
  if (!off) return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot grow the document table to %lld",
                            (long long)cap);
  ix->doc_off = off;
  int32_t *seg = (int32_t *)realloc(ix->doc_seg, (size_t)cap * sizeof(int32_t));
  if (!seg) return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot grow the document table to %lld",
                            (long long)cap);
  ix->doc_seg = seg;
  if (ix->ids) {
    int64_t *ids = (int64_t *)realloc(ix->ids, (size_t)cap * sizeof(int64_t));
    if (ids) ix->ids = ids;
    int64_t *by = ids ? (int64_t *)realloc(ix->by_id, (size_t)cap * sizeof(int64_t)) : NULL;
    if (!by) return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot grow the id map to %lld",
                             (long long)cap);
    ix->by_id = by;
  }
  if (ix->dead) {
    const size_t w_old = (size_t)(ix->cap_docs / 64 + 1), w_new = (size_t)(cap / 64 + 1);
    uint64_t *d = (uint64_t *)realloc(ix->dead, w_new * sizeof(uint64_t));
    if (!d) return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot grow the tombstones to %lld",
                            (long long)cap);
    memset(d + w_old, 0, (w_new - w_old) * sizeof(uint64_t));
    ix->dead = d;
  }
  ix->cap_docs = cap;
  return LIK_OK;
}

lik_status lik_plaid_reserve_segs(lik_plaid_index *ix, int64_t n) {
  if (ix->nseg + n <= ix->cap_seg) return LIK_OK;
  int64_t cap = ix->cap_seg ? ix->cap_seg : 8;
  while (cap < ix->nseg + n) cap *= 2;
  lik_pseg *s = (lik_pseg *)realloc(ix->segs, (size_t)cap * sizeof(lik_pseg));
  if (!s) return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot grow the chunk table to %lld",
                          (long long)cap);
  ix->segs = s;
  ix->cap_seg = cap;
  return LIK_OK;
}

lik_status lik_plaid_grow_centroids(lik_plaid_index *ix, const float *cent, int64_t k) {
  const int64_t K = ix->ncent, n = (K + k) * ix->dim;
  uint16_t *c16 = (uint16_t *)realloc(ix->cent_f16, (size_t)n * sizeof(uint16_t));
  if (c16) ix->cent_f16 = c16;
  float *c32 = c16 ? (float *)realloc(ix->cent_f32, (size_t)n * sizeof(float)) : NULL;
  if (c32) ix->cent_f32 = c32;
  int64_t *off = c32 ? (int64_t *)realloc(ix->ivf_off, (size_t)(K + k + 1) * sizeof(int64_t)) : NULL;
  if (!off)
    return lik_fail(LIK_ERR_ALLOC, "PLAID add: cannot grow the centroids to %lld",
                    (long long)(K + k));
  ix->ivf_off = off;
  for (int64_t i = K * ix->dim; i < n; i++) {
    c16[i] = lik_tr_f32_to_f16(cent[i - K * ix->dim]);
    c32[i] = lik_tr_f16_to_f32(c16[i]);
  }
  for (int64_t c = K + 1; c <= K + k; c++) off[c] = off[K];
  ix->ncent = K + k;
  return LIK_OK;
}

int64_t lik_plaid_add_region(lik_plaid_index *ix, lik_region r) {
  if (ix->nregions == ix->cap_regions) {
    const int64_t cap = ix->cap_regions ? 2 * ix->cap_regions : 8;
    lik_region *g = (lik_region *)realloc(ix->regions, (size_t)cap * sizeof(lik_region));
    if (!g) return -1;
    ix->regions = g;
    ix->cap_regions = cap;
  }
  ix->regions[ix->nregions] = r;
  return ix->nregions++;
}

void lik_plaid_index_free(lik_plaid_index *ix) {
  if (!ix) return;
  lik_plaid_to_device_impl(ix, -1);
  lik_plaid_search_scratch_free(ix);
  for (int64_t s = 0; s < ix->nseg; s++) {
    free(ix->segs[s].own_codes);
    free(ix->segs[s].own_res);
  }
  for (int64_t r = 0; r < ix->nregions; r++) {
    if (!ix->regions[r].base) continue;
    if (ix->regions[r].mapped) munmap(ix->regions[r].base, ix->regions[r].size);
    else free(ix->regions[r].base);
  }
  free(ix->regions);
  free(ix->segs);
  free(ix->doc_off);
  free(ix->doc_seg);
  free(ix->ids);
  free(ix->by_id);
  free(ix->dead);
  free(ix->meta);
  free(ix->ivf_off);
  free(ix->ivf_owned);
  free(ix->cent_f16);
  free(ix->cent_f32);
  free(ix->avg_residual);
  free(ix);
}
