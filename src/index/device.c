/*
 * device.c — the index's copy on a CUDA device: what the backend copies
 * (a lik_plaid_src: codes as int32 checked in [0, K), the IVF as int32
 * positions), the refresh after a change, the search routed to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/validate.h"
#include "index_internal.h"

#ifdef LIK_WITH_CUDA

typedef struct {
  lik_plaid_src src;
  lik_plaid_src_seg *segs;
  int32_t **own; /* [nseg]: converted codes, or NULL where the segment's are used */
  int32_t *ivf;
} staged;

static void unstage(staged *s) {
  if (s->own)
    for (int64_t i = 0; i < s->src.nseg; i++) free(s->own[i]);
  free(s->own);
  free(s->segs);
  free(s->ivf);
}

static lik_status nomem(const char *what) {
  return lik_fail(LIK_ERR_ALLOC, "lik_plaid_index_to_device: cannot allocate %s", what);
}

/* The host view of ix for the backend; codes checked (each read once). */
static lik_status stage(const lik_plaid_index *ix, staged *s) {
  memset(s, 0, sizeof *s);
  if (ix->ndocs >= INT32_MAX)
    return lik_fail(LIK_ERR_VALUE, "index: %lld documents; the CUDA search takes at most "
                    "2^31 - 1", (long long)ix->ndocs);
  lik_plaid_src *p = &s->src;
  p->nbits = ix->nbits;
  p->dim = ix->dim;
  p->ncent = ix->ncent;
  p->width = ix->width;
  p->cent_f16 = ix->cent_f16;
  p->weights = ix->weights;
  p->ndocs = ix->ndocs;
  p->ntok = ix->ntok;
  p->doc_off = ix->doc_off;
  p->ivf_off = ix->ivf_off;
  p->ids = ix->ids;
  p->dead = ix->ndead ? ix->dead : NULL;
  p->ndead = ix->ndead;
  p->nseg = ix->nseg;
  const int64_t nivf = ix->ivf_off[ix->ncent];
  s->segs = (lik_plaid_src_seg *)calloc((size_t)ix->nseg + 1, sizeof *s->segs);
  s->own = (int32_t **)calloc((size_t)ix->nseg + 1, sizeof *s->own);
  s->ivf = (int32_t *)malloc((size_t)nivf * sizeof(int32_t) + 1);
  if (!s->segs || !s->own || !s->ivf) return nomem("the staging tables");
  p->segs = s->segs;
  p->ivf = s->ivf;
  for (int64_t i = 0; i < nivf; i++) s->ivf[i] = (int32_t)ix->ivf[i]; /* < ndocs (checked at load) */
  for (int64_t g = 0; g < ix->nseg; g++) {
    const lik_pseg *sg = &ix->segs[g];
    int32_t *codes = NULL;
    if (sg->codes_dtype != LIK_I32) {
      codes = s->own[g] = (int32_t *)malloc((size_t)sg->ntok * sizeof(int32_t) + 1);
      if (!codes) return nomem("the codes of a chunk");
    }
    for (int64_t t = 0; t < sg->ntok; t++) {
      const int64_t c = lik_pseg_code(sg, t);
      if (c < 0 || c >= ix->ncent) {
        /* the document holding global token tok0 + t */
        int64_t lo = 0, hi = ix->ndocs;
        while (hi - lo > 1) {
          const int64_t mid = (lo + hi) / 2;
          if (ix->doc_off[mid] <= sg->tok0 + t) lo = mid;
          else hi = mid;
        }
        return lik_fail(LIK_ERR_VALUE, "PLAID index: document %lld, token %lld: code %lld is "
                        "outside [0, K=%lld) (a corrupt codes file)", (long long)lo,
                        (long long)(sg->tok0 + t - ix->doc_off[lo]), (long long)c,
                        (long long)ix->ncent);
      }
      if (codes) codes[t] = (int32_t)c;
    }
    s->segs[g].codes = codes ? codes : (const int32_t *)sg->codes;
    s->segs[g].res = sg->res;
    s->segs[g].ntok = sg->ntok;
  }
  return LIK_OK;
}

static void drop(lik_plaid_index *ix) {
  lik_cuda_plaid_release(ix->cuda);
  ix->cuda = NULL;
  ix->cuda_device = -1;
  ix->cuda_bytes = 0;
}

lik_status lik_plaid_to_device_impl(lik_plaid_index *ix, int device_id) {
  if (device_id < 0) {
    drop(ix);
    return LIK_OK;
  }
  if (!ix->has_ivf)
    return lik_fail(LIK_ERR_UNSUPPORTED, "index: has no IVF (a compress-only index): it "
                    "cannot be searched, on any device");
  staged s;
  lik_status st = stage(ix, &s);
  void *state = NULL;
  int64_t bytes = 0;
  if (!st) st = lik_cuda_plaid_upload(&s.src, device_id, &state, &bytes);
  unstage(&s);
  if (st) return st;
  drop(ix);
  ix->cuda = state;
  ix->cuda_device = device_id;
  ix->cuda_bytes = bytes;
  return LIK_OK;
}

lik_status lik_plaid_refresh_device(lik_plaid_index *ix) {
  if (!ix->cuda) return LIK_OK;
  const int dev = ix->cuda_device;
  drop(ix); /* the old copy first: room for the new one */
  const lik_status st = lik_plaid_to_device_impl(ix, dev);
  if (st) {
    char why[512];
    snprintf(why, sizeof why, "%s", lik_last_error());
    return lik_fail(st, "the index changed, but its copy on CUDA device %d could not be made "
                    "again and was freed (call lik_plaid_index_to_device): %s", dev, why);
  }
  return LIK_OK;
}

lik_status lik_plaid_search_device(const lik_plaid_index *ix, const lik_plaid_query *q) {
  return lik_cuda_plaid_search(ix->cuda, q);
}

#else

lik_status lik_plaid_to_device_impl(lik_plaid_index *ix, int device_id) {
  if (device_id < 0) return LIK_OK;
  (void)ix;
  return lik_fail(LIK_ERR_UNSUPPORTED, "lik_plaid_index_to_device: this library was built "
                  "without the CUDA backend");
}

lik_status lik_plaid_refresh_device(lik_plaid_index *ix) {
  (void)ix;
  return LIK_OK;
}

lik_status lik_plaid_search_device(const lik_plaid_index *ix, const lik_plaid_query *q) {
  (void)ix;
  (void)q;
  return lik_no_cuda_backend();
}

#endif
