/*
 * format.c — a PLAID index folder on disk (fast-plaid 1.7's files; see
 * lik_experimental.h): lik_plaid_index_load (memory-mapped, every size and
 * value read from a file checked against the file and the other files before
 * use) and the files of a save (staged into one atomic change of the folder,
 * commit.h, by txn.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/dtype.h"
#include "commit.h"
#include "index_internal.h"
#include "json.h"
#include "npy.h"

#define ERRLEN 400
#define JSON_MAX_BYTES ((size_t)1 << 30)
#define MERGED_HEADER_LEN 192 /* fast-plaid 1.7's fixed merged prologue */

/* ---- files ------------------------------------------------------------------------ */

typedef struct {
  const char *dir;
  lik_folder view; /* load: the folder's current state */
  lik_commit *cm;  /* save: the change being written */
  char err[ERRLEN];
} ctx_t;

static lik_status vfail(ctx_t *c) {
  return lik_fail(LIK_ERR_VALUE, "PLAID index %s: %s", c->dir, c->err);
}

static int cfail(ctx_t *c, const char *fmt, ...) {
  va_list a;
  va_start(a, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, a);
  va_end(a);
  return 1;
}

static int join(char *out, size_t cap, const char *dir, const char *name) {
  const int n = snprintf(out, cap, "%s/%s", dir, name);
  return n > 0 && (size_t)n < cap;
}

/* Whether the folder's current state has file `name` (-1: an error, in c->err). */
static int exists(ctx_t *c, const char *name) {
  const int fd = lik_folder_open_file(&c->view, name, c->err, sizeof c->err);
  if (fd >= 0) close(fd);
  return fd >= 0 ? 1 : fd == -1 ? 0 : -1;
}

/* Maps a whole file read-only (an empty file: base NULL).  0 on success. */
static int map_file(ctx_t *c, const char *name, lik_region *r) {
  memset(r, 0, sizeof *r);
  const int fd = lik_folder_open_file(&c->view, name, c->err, sizeof c->err);
  if (fd == -1) return cfail(c, "%s: cannot open (%s)", name, strerror(ENOENT));
  if (fd < 0) return 1;
  struct stat st;
  if (fstat(fd, &st)) {
    close(fd);
    return cfail(c, "%s: cannot stat (%s)", name, strerror(errno));
  }
  r->size = (size_t)st.st_size;
  if (r->size) {
    void *b = mmap(NULL, r->size, PROT_READ, MAP_SHARED, fd, 0);
    if (b == MAP_FAILED) {
      close(fd);
      return cfail(c, "%s: cannot map %zu bytes (%s)", name, r->size, strerror(errno));
    }
    r->base = b;
    r->mapped = 1;
  }
  close(fd);
  return 0;
}

static void unmap(lik_region *r) {
  if (r->base && r->mapped) munmap(r->base, r->size);
  else free(r->base);
  memset(r, 0, sizeof *r);
}

/* A mapped .npy: its header checked (dtype in `dtypes`, ndim in [1, 2]). */
typedef struct {
  lik_region r;
  lik_npy h;
  const uint8_t *data;
} npy_file;

static int open_npy(ctx_t *c, const char *name, npy_file *f) {
  memset(f, 0, sizeof *f);
  if (map_file(c, name, &f->r)) return 1;
  if (lik_npy_parse((const uint8_t *)f->r.base, f->r.size, f->r.size, name, &f->h, c->err,
                    sizeof c->err)) {
    unmap(&f->r);
    return 1;
  }
  f->data = (const uint8_t *)f->r.base + f->h.data_offset;
  return 0;
}

static int is_float(lik_dtype t) { return t == LIK_F16 || t == LIK_F32 || t == LIK_F64; }
static int is_int(lik_dtype t) { return t == LIK_I32 || t == LIK_I64; }

static float flt_at(const npy_file *f, int64_t i) { return lik_load_f32(f->data, f->h.dtype, i); }

static int64_t int_at(const void *data, lik_dtype t, int64_t i) {
  if (t == LIK_I32) {
    int32_t v;
    memcpy(&v, (const uint8_t *)data + 4 * i, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, (const uint8_t *)data + 8 * i, 8);
  return v;
}

/* A small float vector file of exactly n entries (any shape) into out[n]. */
static int read_vec(ctx_t *c, const char *name, int64_t n, float *out) {
  npy_file f;
  if (open_npy(c, name, &f)) return 1;
  int bad = 0;
  if (!is_float(f.h.dtype)) bad = cfail(c, "%s: dtype is not a float type", name);
  else if (f.h.numel != n)
    bad = cfail(c, "%s: has %lld entries, expected %lld", name, (long long)f.h.numel,
                (long long)n);
  for (int64_t i = 0; !bad && i < n; i++) {
    out[i] = flt_at(&f, i);
    if (!isfinite(out[i])) bad = cfail(c, "%s: entry %lld is not finite", name, (long long)i);
  }
  unmap(&f.r);
  return bad;
}

/* A JSON file (at most JSON_MAX_BYTES) read whole; *buf malloc'ed. */
static int read_text(ctx_t *c, const char *name, char **buf, size_t *n) {
  lik_region r;
  *buf = NULL;
  if (map_file(c, name, &r)) return 1;
  if (r.size > JSON_MAX_BYTES) {
    unmap(&r);
    return cfail(c, "%s: %zu bytes, more than a JSON file of an index may hold", name, r.size);
  }
  *buf = (char *)malloc(r.size + 1);
  if (!*buf) {
    unmap(&r);
    return cfail(c, "%s: cannot allocate %zu bytes", name, r.size);
  }
  if (r.size) memcpy(*buf, r.base, r.size);
  (*buf)[r.size] = 0;
  *n = r.size;
  unmap(&r);
  return 0;
}

/* ---- load ------------------------------------------------------------------------- */

/* Registers f's mapping with the index (the index unmaps it); -1 on failure. */
static int64_t keep(lik_plaid_index *ix, npy_file *f) {
  const int64_t id = lik_plaid_add_region(ix, f->r);
  if (id < 0) unmap(&f->r);
  else memset(&f->r, 0, sizeof f->r);
  return id;
}

/* Codes [n] (1-D, or [n, 1]) and residuals [n, width] of one chunk. */
static int check_codes(ctx_t *c, const char *name, const npy_file *f, int64_t need, int exact) {
  if (!is_int(f->h.dtype)) return cfail(c, "%s: codes must be int32 or int64", name);
  if (!(f->h.ndim == 1 || (f->h.ndim == 2 && f->h.shape[1] == 1)))
    return cfail(c, "%s: codes must be 1-D, got %d dims", name, f->h.ndim);
  if (exact ? f->h.shape[0] != need : f->h.shape[0] < need)
    return cfail(c, "%s: has %lld codes, the doclens files say %s%lld tokens", name,
                 (long long)f->h.shape[0], exact ? "" : "at least ", (long long)need);
  return 0;
}

static int check_res(ctx_t *c, const char *name, const npy_file *f, int64_t need, int exact,
                     int64_t width) {
  if (f->h.dtype != LIK_U8) return cfail(c, "%s: residuals must be uint8", name);
  const int64_t rows = f->h.ndim >= 1 ? f->h.shape[0] : 0;
  const int ok_shape = (f->h.ndim == 2 && f->h.shape[1] == width) || (f->h.ndim == 1 && rows == 0);
  if (!ok_shape)
    return cfail(c, "%s: residuals must be [tokens, %lld] (d * nbits / 8 bytes a token)", name,
                 (long long)width);
  if (exact ? rows != need : rows < need)
    return cfail(c, "%s: has %lld rows, the doclens files say %s%lld tokens", name,
                 (long long)rows, exact ? "" : "at least ", (long long)need);
  return 0;
}

static lik_status load_chunks(ctx_t *c, lik_plaid_index *ix, int64_t nchunks) {
  npy_file mc, mr;
  int64_t mcid = -1, mrid = -1;
  memset(&mc, 0, sizeof mc);
  memset(&mr, 0, sizeof mr);
  lik_status st;
  char name[96];
  for (int64_t i = 0; i < nchunks; i++) {
    snprintf(name, sizeof name, "doclens.%lld.json", (long long)i);
    char *txt;
    size_t n;
    if (read_text(c, name, &txt, &n)) return vfail(c);
    int64_t *lens, cnt;
    const int bad = lik_json_parse_int_array(txt, n, INT32_MAX, name, &lens, &cnt, c->err,
                                             sizeof c->err);
    free(txt);
    if (bad) return vfail(c);
    if ((st = lik_plaid_reserve_docs(ix, cnt)) || (st = lik_plaid_reserve_segs(ix, 1))) {
      free(lens);
      return st;
    }
    lik_pseg *s = &ix->segs[ix->nseg];
    memset(s, 0, sizeof *s);
    s->region_codes = s->region_res = -1;
    s->tok0 = ix->ntok;
    s->doc0 = ix->ndocs;
    s->ndocs = cnt;
    for (int64_t j = 0; j < cnt; j++) {
      if (s->ntok > ((int64_t)1 << 62) - lens[j]) {
        free(lens);
        cfail(c, "%s: token counts overflow", name);
        return vfail(c);
      }
      ix->doc_off[ix->ndocs + j + 1] = ix->doc_off[ix->ndocs + j] + lens[j];
      ix->doc_seg[ix->ndocs + j] = (int32_t)ix->nseg;
      s->ntok += lens[j];
    }
    free(lens);
    char cn[96], rn[96];
    snprintf(cn, sizeof cn, "%lld.codes.npy", (long long)i);
    snprintf(rn, sizeof rn, "%lld.residuals.npy", (long long)i);
    const int own_c = exists(c, cn), own_r = own_c < 0 ? -1 : exists(c, rn);
    if (own_r < 0) return vfail(c);
    if (own_c != own_r)
      return cfail(c, "%s is present without %s", own_c ? cn : rn, own_c ? rn : cn), vfail(c);
    if (own_c) { /* a chunk file (older fast-plaid, or staging): it wins */
      npy_file fc, fr;
      if (open_npy(c, cn, &fc)) return vfail(c);
      if (check_codes(c, cn, &fc, s->ntok, 1) || open_npy(c, rn, &fr)) {
        unmap(&fc.r);
        return vfail(c);
      }
      if (check_res(c, rn, &fr, s->ntok, 1, ix->width)) {
        unmap(&fc.r);
        unmap(&fr.r);
        return vfail(c);
      }
      s->codes = fc.data;
      s->codes_dtype = fc.h.dtype;
      s->res = fr.data;
      if ((s->region_codes = (int)keep(ix, &fc)) < 0 || (s->region_res = (int)keep(ix, &fr)) < 0) {
        unmap(&fr.r);
        return lik_fail(LIK_ERR_ALLOC, "PLAID index: out of memory");
      }
    } else if (s->ntok > 0) { /* the merged single copy, at this chunk's offset */
      if (mcid < 0) {
        const int hc = exists(c, "merged_codes.npy"), hr = hc < 0 ? -1 : exists(c, "merged_residuals.npy");
        if (hr < 0) return vfail(c);
        if (!hc || !hr)
          return cfail(c, "chunk %lld has %lld tokens but neither %s / %s nor merged_codes.npy / "
                       "merged_residuals.npy exist", (long long)i, (long long)s->ntok, cn, rn),
                 vfail(c);
        if (open_npy(c, "merged_codes.npy", &mc)) return vfail(c);
        if (open_npy(c, "merged_residuals.npy", &mr)) {
          unmap(&mc.r);
          return vfail(c);
        }
        if ((mcid = keep(ix, &mc)) < 0 || (mrid = keep(ix, &mr)) < 0) {
          unmap(&mr.r);
          return lik_fail(LIK_ERR_ALLOC, "PLAID index: out of memory");
        }
      }
      const int64_t need = s->tok0 + s->ntok;
      if (check_codes(c, "merged_codes.npy", &mc, need, 0) ||
          check_res(c, "merged_residuals.npy", &mr, need, 0, ix->width))
        return vfail(c);
      s->codes = mc.data + (size_t)s->tok0 * lik_npy_itemsize(mc.h.dtype);
      s->codes_dtype = mc.h.dtype;
      s->res = mr.data + (size_t)s->tok0 * (size_t)ix->width;
      s->region_codes = (int)mcid;
      s->region_res = (int)mrid;
    } else {
      s->codes_dtype = LIK_I32;
    }
    ix->ndocs += cnt;
    ix->ntok += s->ntok;
    ix->nseg++;
  }
  return LIK_OK;
}

static lik_status load_ivf(ctx_t *c, lik_plaid_index *ix) {
  const int hi = exists(c, "ivf.npy"), hl = hi < 0 ? -1 : exists(c, "ivf_lengths.npy");
  if (hl < 0) return vfail(c);
  if (!hi && !hl) return LIK_OK; /* compress-only */
  if (hi != hl)
    return cfail(c, "%s is present without %s", hi ? "ivf.npy" : "ivf_lengths.npy",
                 hi ? "ivf_lengths.npy" : "ivf.npy"), vfail(c);
  npy_file fl, fi;
  if (open_npy(c, "ivf_lengths.npy", &fl)) return vfail(c);
  int bad = 0;
  if (!is_int(fl.h.dtype)) bad = cfail(c, "ivf_lengths.npy: must be int32 or int64");
  else if (fl.h.numel != ix->ncent)
    bad = cfail(c, "ivf_lengths.npy: has %lld entries, centroids.npy has K=%lld",
                (long long)fl.h.numel, (long long)ix->ncent);
  int64_t total = 0;
  for (int64_t k = 0; !bad && k < ix->ncent; k++) {
    const int64_t n = int_at(fl.data, fl.h.dtype, k);
    if (n < 0 || n > ix->ndocs)
      bad = cfail(c, "ivf_lengths.npy: entry %lld = %lld is outside [0, num_docs=%lld]",
                  (long long)k, (long long)n, (long long)ix->ndocs);
    ix->ivf_off[k] = total;
    total += n; /* <= K * ndocs: no overflow (K <= 2^31, ndocs < 2^62 / 2^31 checked below) */
    if (total > ((int64_t)1 << 62)) bad = cfail(c, "ivf_lengths.npy: lengths overflow");
  }
  ix->ivf_off[ix->ncent] = total;
  unmap(&fl.r);
  if (bad) return vfail(c);
  if (open_npy(c, "ivf.npy", &fi)) return vfail(c);
  if (!is_int(fi.h.dtype) || fi.h.ndim != 1)
    bad = cfail(c, "ivf.npy: must be a 1-D int32 / int64 array");
  else if (fi.h.numel != total)
    bad = cfail(c, "ivf.npy: has %lld entries, ivf_lengths.npy sums to %lld",
                (long long)fi.h.numel, (long long)total);
  for (int64_t i = 0; !bad && i < total; i++) {
    const int64_t v = int_at(fi.data, fi.h.dtype, i);
    if (v < 0 || v >= ix->ndocs)
      bad = cfail(c, "ivf.npy: entry %lld = %lld is not a document id (num_docs=%lld)",
                  (long long)i, (long long)v, (long long)ix->ndocs);
  }
  if (bad) {
    unmap(&fi.r);
    return vfail(c);
  }
  if (fi.h.dtype == LIK_I64 && ((uintptr_t)fi.data % 8) == 0) {
    ix->ivf = (const int64_t *)fi.data;
    if (keep(ix, &fi) < 0) return lik_fail(LIK_ERR_ALLOC, "PLAID index: out of memory");
  } else {
    ix->ivf_owned = (int64_t *)malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    if (!ix->ivf_owned) {
      unmap(&fi.r);
      return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate the IVF (%lld entries)",
                      (long long)total);
    }
    for (int64_t i = 0; i < total; i++) ix->ivf_owned[i] = int_at(fi.data, fi.h.dtype, i);
    ix->ivf = ix->ivf_owned;
    unmap(&fi.r);
  }
  ix->has_ivf = 1;
  return LIK_OK;
}

/* lik's files of a living index: deleted.npy (the tombstones: ascending
 * stored-order indices), doc_ids.npy (the id map, checked as a save's
 * doc_ids), next_id.npy (the id the next add gives, when the ids do not
 * imply it) and metadata.sqlite (bytes, kept as they are). */
static lik_status load_living(ctx_t *c, lik_plaid_index *ix) {
  npy_file f;
  int h = exists(c, "deleted.npy"), bad = 0;
  lik_status st;
  if (h < 0) return vfail(c);
  if (h) {
    if (open_npy(c, "deleted.npy", &f)) return vfail(c);
    if (!is_int(f.h.dtype) || f.h.ndim != 1)
      bad = cfail(c, "deleted.npy: must be a 1-D int32 / int64 array");
    else if ((st = lik_plaid_reserve_living(ix, 0))) {
      unmap(&f.r);
      return st;
    }
    for (int64_t i = 0, prev = -1; !bad && i < f.h.numel; i++) {
      const int64_t v = int_at(f.data, f.h.dtype, i);
      if (v <= prev || v >= ix->ndocs)
        bad = cfail(c, "deleted.npy: entry %lld = %lld is not above the one before it and below "
                    "num_docs=%lld", (long long)i, (long long)v, (long long)ix->ndocs);
      else ix->dead[v >> 6] |= (uint64_t)1 << (v & 63);
      prev = v;
    }
    if (!bad) ix->ndead = f.h.numel;
    unmap(&f.r);
    if (bad) return vfail(c);
  }
  ix->next_id = ix->ndocs;
  if ((h = exists(c, "doc_ids.npy")) < 0) return vfail(c);
  if (h) {
    if (open_npy(c, "doc_ids.npy", &f)) return vfail(c);
    if (!is_int(f.h.dtype) || f.h.ndim != 1)
      bad = cfail(c, "doc_ids.npy: must be a 1-D int32 / int64 array");
    else if (f.h.numel != ix->ndocs)
      bad = cfail(c, "doc_ids.npy: has %lld entries, the doclens files hold %lld documents",
                  (long long)f.h.numel, (long long)ix->ndocs);
    if (bad) {
      unmap(&f.r);
      return vfail(c);
    }
    const int64_t cap = ix->cap_docs > ix->ndocs ? ix->cap_docs : ix->ndocs;
    int64_t *ids = (int64_t *)malloc((size_t)(cap ? cap : 1) * sizeof(int64_t));
    if (!ids) {
      unmap(&f.r);
      return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate the id map (%lld documents)",
                      (long long)cap);
    }
    for (int64_t j = 0; j < ix->ndocs; j++) ids[j] = int_at(f.data, f.h.dtype, j);
    unmap(&f.r);
    char what[ERRLEN];
    snprintf(what, sizeof what, "PLAID index %s: doc_ids.npy", c->dir);
    if ((st = lik_plaid_check_id_map(ix, ids, 1, what))) {
      free(ids);
      return st;
    }
    if ((st = lik_plaid_set_ids(ix, ids))) return st;
  }
  /* next_id.npy: the id the next add gives, when the stored ids do not imply
   * it (documents with the highest ids compacted away): at least the highest
   * stored id + 1 (what the ids imply, ix->next_id now), below 2^62 */
  if ((h = exists(c, "next_id.npy")) < 0) return vfail(c);
  if (h) {
    if (open_npy(c, "next_id.npy", &f)) return vfail(c);
    int64_t v = 0;
    if (!is_int(f.h.dtype) || f.h.ndim > 1 || f.h.numel != 1)
      bad = cfail(c, "next_id.npy: must be one int32 / int64 value (shape () or (1,))");
    else v = int_at(f.data, f.h.dtype, 0);
    unmap(&f.r);
    if (!bad && v >= LIK_PLAID_ID_LIMIT)
      bad = cfail(c, "next_id.npy: %lld is not below 2^62", (long long)v);
    else if (!bad && v < ix->next_id)
      bad = cfail(c, "next_id.npy: %lld is not above every stored id (it must be at least %lld)",
                  (long long)v, (long long)ix->next_id);
    if (bad) return vfail(c);
    ix->next_id = v;
    /* ids 0..N-1 with next_id above N: the map explicit, so that an add
     * gives next_id onwards (reserve_living keeps next_id) */
    if (v != ix->ndocs && !ix->ids && (st = lik_plaid_reserve_living(ix, 1))) return st;
  }
  if ((h = exists(c, "metadata.sqlite")) < 0) return vfail(c);
  if (h) {
    lik_region r;
    if (map_file(c, "metadata.sqlite", &r)) return vfail(c);
    ix->meta = (uint8_t *)malloc(r.size + 1);
    if (!ix->meta) {
      unmap(&r);
      return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate metadata.sqlite's %zu bytes",
                      r.size);
    }
    if (r.size) memcpy(ix->meta, r.base, r.size);
    ix->meta_size = (int64_t)r.size;
    ix->has_meta = 1;
    unmap(&r);
  }
  return LIK_OK;
}

static lik_status verify_codes(lik_plaid_index *ix) {
  for (int64_t s = 0; s < ix->nseg; s++) {
    const lik_pseg *g = &ix->segs[s];
    for (int64_t t = 0; t < g->ntok; t++) {
      const int64_t v = lik_pseg_code(g, t);
      if (v < 0 || v >= ix->ncent)
        return lik_fail(LIK_ERR_VALUE, "PLAID index: chunk %lld, token %lld: code %lld is "
                        "outside [0, K=%lld)", (long long)s, (long long)t, (long long)v,
                        (long long)ix->ncent);
    }
  }
  return LIK_OK;
}

/* One load of the folder's current state (c->view open). */
static lik_status load_once(ctx_t *c, unsigned flags, lik_plaid_index **out) {
  char *txt;
  size_t n;
  if (read_text(c, "metadata.json", &txt, &n)) return vfail(c);
  lik_json_object meta;
  const int bad = lik_json_parse_object(txt, n, "metadata.json", &meta, c->err, sizeof c->err);
  free(txt);
  if (bad) return vfail(c);
  int64_t nbits = 0, nchunks = 0, v;
  int r;
  if ((r = lik_json_get_int(&meta, "nbits", 1, 8, &nbits, "metadata.json", c->err,
                            sizeof c->err)) <= 0 ||
      (nbits != 1 && nbits != 2 && nbits != 4 && nbits != 8)) {
    if (r == 0) cfail(c, "metadata.json: no \"nbits\"");
    else if (r > 0) cfail(c, "metadata.json: nbits=%lld, must be 1, 2, 4 or 8", (long long)nbits);
    return vfail(c);
  }
  if ((r = lik_json_get_int(&meta, "num_chunks", 0, LIK_PLAID_MAX_CHUNKS, &nchunks,
                            "metadata.json", c->err, sizeof c->err)) <= 0) {
    if (r == 0) cfail(c, "metadata.json: no \"num_chunks\"");
    return vfail(c);
  }
  /* codec */
  npy_file fc;
  if (open_npy(c, "centroids.npy", &fc)) return vfail(c);
  if (!is_float(fc.h.dtype) || fc.h.ndim != 2) {
    unmap(&fc.r);
    return cfail(c, "centroids.npy: must be a 2-D float array [K, d]"), vfail(c);
  }
  const int64_t K = fc.h.shape[0], d = fc.h.shape[1];
  if (K < 1 || K > INT32_MAX || d < 1 || d > INT32_MAX || (d * nbits) % 8) {
    unmap(&fc.r);
    return cfail(c, "centroids.npy: shape [%lld, %lld] (K in [1, 2^31), d * nbits=%lld a "
                 "multiple of 8)", (long long)K, (long long)d, (long long)nbits), vfail(c);
  }
  if (lik_json_get_int(&meta, "num_partitions", 0, INT64_MAX, &v, "metadata.json", c->err,
                       sizeof c->err) > 0 && v != K) {
    unmap(&fc.r);
    return cfail(c, "metadata.json: num_partitions=%lld but centroids.npy has K=%lld",
                 (long long)v, (long long)K), vfail(c);
  }
  uint16_t *c16 = (uint16_t *)malloc((size_t)(K * d) * sizeof(uint16_t));
  if (!c16) {
    unmap(&fc.r);
    return lik_fail(LIK_ERR_ALLOC, "PLAID index: cannot allocate the centroids (%lld x %lld)",
                    (long long)K, (long long)d);
  }
  int64_t bad_cent = -1;
  for (int64_t i = 0; i < K * d; i++) {
    c16[i] = fc.h.dtype == LIK_F16 ? (uint16_t)(fc.data[2 * i] | fc.data[2 * i + 1] << 8)
                                   : lik_tr_f32_to_f16(flt_at(&fc, i));
    if (bad_cent < 0 && (c16[i] & 0x7c00) == 0x7c00) bad_cent = i; /* fp16 inf / NaN */
  }
  if (bad_cent >= 0) {
    cfail(c, "centroids.npy: entry [%lld, %lld] = %g is not finite in fp16 (|x| <= 65504)",
          (long long)(bad_cent / d), (long long)(bad_cent % d), (double)flt_at(&fc, bad_cent));
    unmap(&fc.r);
    free(c16);
    return vfail(c);
  }
  unmap(&fc.r);
  const int nb = 1 << nbits;
  float cut[255], wts[256];
  float *avg = (float *)calloc((size_t)d, sizeof(float));
  if (!avg) {
    free(c16);
    return lik_fail(LIK_ERR_ALLOC, "PLAID index: out of memory");
  }
  int has_avg, has_thr = 0;
  float thr = 0;
  if (read_vec(c, "bucket_cutoffs.npy", nb - 1, cut) ||
      read_vec(c, "bucket_weights.npy", nb, wts) || (has_avg = exists(c, "avg_residual.npy")) < 0 ||
      (has_avg && read_vec(c, "avg_residual.npy", d, avg)) ||
      (has_thr = exists(c, "cluster_threshold.npy")) < 0 ||
      (has_thr && read_vec(c, "cluster_threshold.npy", 1, &thr))) {
    free(c16);
    free(avg);
    return vfail(c);
  }
  for (int i = 0; i < nb; i++) /* decoded values c + w stay far from fp32 overflow */
    if (fabsf(wts[i]) > 65504.0f) {
      free(c16);
      free(avg);
      return cfail(c, "bucket_weights.npy: entry %d = %g is outside the fp16 range (|w| <= "
                   "65504)", i, (double)wts[i]), vfail(c);
    }
  lik_plaid_index *ix = lik_plaid_new((int)nbits, d, K, c16, cut, wts, avg);
  if (!ix) return lik_fail(LIK_ERR_ALLOC, "PLAID index: out of memory");
  if (has_thr) ix->cluster_threshold = thr;
  lik_status st;
  if ((st = load_chunks(c, ix, nchunks)) || (st = load_ivf(c, ix)) || (st = load_living(c, ix)))
    goto fail;
  if (lik_json_get_int(&meta, "num_embeddings", 0, INT64_MAX, &v, "metadata.json", c->err,
                       sizeof c->err) > 0 && v != ix->ntok) {
    st = (cfail(c, "metadata.json: num_embeddings=%lld but the doclens files hold %lld tokens",
                (long long)v, (long long)ix->ntok), vfail(c));
    goto fail;
  }
  if (lik_json_get_int(&meta, "num_documents", 0, INT64_MAX, &v, "metadata.json", c->err,
                       sizeof c->err) > 0 && v != ix->ndocs) {
    st = (cfail(c, "metadata.json: num_documents=%lld but the doclens files hold %lld",
                (long long)v, (long long)ix->ndocs), vfail(c));
    goto fail;
  }
  if ((flags & LIK_PLAID_LOAD_VERIFY) && (st = verify_codes(ix))) goto fail;
  ix->chunk_docs = LIK_PLAID_DEFAULT_CHUNK_DOCS;
  /* the folder is the index's home (an error here only costs a later save
   * its shortcut) */
  ix->has_home = !lik_folder_file_id(&c->view, "metadata.json", &ix->home, c->err, sizeof c->err);
  *out = ix;
  return LIK_OK;
fail:
  lik_plaid_index_free(ix);
  return st;
}

#define LOAD_ATTEMPTS 16 /* a change committed while loading: load again */

lik_status lik_plaid_load_impl(const char *path, unsigned flags, lik_plaid_index **out) {
  *out = NULL;
  struct stat sb;
  if (stat(path, &sb) || !S_ISDIR(sb.st_mode))
    return lik_fail(LIK_ERR_VALUE, "PLAID index %s: not a folder (%s)", path,
                    errno ? strerror(errno) : "not a directory");
  lik_status st = LIK_OK;
  for (int attempt = 0; attempt < LOAD_ATTEMPTS; attempt++) {
    ctx_t c;
    memset(&c, 0, sizeof c);
    c.dir = path;
    lik_folder_stamp s0, s1;
    lik_folder_stamp_get(path, &s0);
    if (lik_folder_open(&c.view, path, c.err, sizeof c.err)) return vfail(&c);
    st = load_once(&c, flags, out);
    lik_folder_close(&c.view);
    lik_folder_stamp_get(path, &s1);
    if (!memcmp(&s0, &s1, sizeof s0)) return st;
    lik_plaid_index_free(*out); /* the folder changed meanwhile: maybe a mix */
    *out = NULL;
  }
  return st ? st : lik_fail(LIK_ERR_VALUE, "PLAID index %s: the folder changed during each of "
                            "%d loads (a writer at work?)", path, LOAD_ATTEMPTS);
}

/* ---- save ------------------------------------------------------------------------- */

/* The change's writer: one file at a time (commit.h). */
static int wopen(ctx_t *c, const char *name) {
  return lik_commit_file(c->cm, name, c->err, sizeof c->err);
}

static void wbytes(ctx_t *c, const void *p, size_t n) { lik_commit_write(c->cm, p, n); }

static int wclose(ctx_t *c) { return lik_commit_file_done(c->cm, c->err, sizeof c->err); }

static int wnpy(ctx_t *c, const char *name, lik_dtype t, int ndim, const int64_t *shape,
                const void *data, size_t total) {
  if (wopen(c, name)) return 1;
  char h[256];
  const size_t hn = lik_npy_header(t, ndim, shape, total, h, sizeof h);
  wbytes(c, h, hn);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  wbytes(c, data, (size_t)n * lik_npy_itemsize(t));
  return wclose(c);
}

static int wtext(ctx_t *c, const char *name, const char *text) {
  if (wopen(c, name)) return 1;
  wbytes(c, text, strlen(text));
  return wclose(c);
}

/* Codes of every segment as int64 (merged_codes.npy: T + pad rows), each
 * checked in [0, K): a corrupt code of a mapped file is refused, not saved. */
static int write_merged(ctx_t *c, const lik_plaid_index *ix, int64_t pad) {
  char h[256];
  int64_t shape[2] = {ix->ntok + pad, ix->width};
  if (wopen(c, "merged_codes.npy")) return 1;
  wbytes(c, h, lik_npy_header(LIK_I64, 1, shape, MERGED_HEADER_LEN, h, sizeof h));
  int64_t buf[4096];
  for (int64_t s = 0; s < ix->nseg; s++) {
    const lik_pseg *g = &ix->segs[s];
    for (int64_t t0 = 0; t0 < g->ntok; t0 += 4096) {
      const int64_t n = g->ntok - t0 < 4096 ? g->ntok - t0 : 4096;
      for (int64_t t = 0; t < n; t++) {
        buf[t] = lik_pseg_code(g, t0 + t);
        if (buf[t] < 0 || buf[t] >= ix->ncent)
          return cfail(c, "chunk %lld, token %lld: code %lld is outside [0, K=%lld) (a corrupt "
                       "codes file; nothing was written)", (long long)s, (long long)(t0 + t),
                       (long long)buf[t], (long long)ix->ncent);
      }
      wbytes(c, buf, (size_t)n * 8);
    }
  }
  memset(buf, 0, sizeof buf);
  for (int64_t t = 0; t < pad; t += 4096) wbytes(c, buf, (size_t)(pad - t < 4096 ? pad - t : 4096) * 8);
  if (wclose(c)) return 1;
  if (wopen(c, "merged_residuals.npy")) return 1;
  wbytes(c, h, lik_npy_header(LIK_U8, 2, shape, MERGED_HEADER_LEN, h, sizeof h));
  for (int64_t s = 0; s < ix->nseg; s++)
    wbytes(c, ix->segs[s].res, (size_t)(ix->segs[s].ntok * ix->width));
  memset(buf, 0, sizeof buf);
  for (int64_t t = 0; t < pad * ix->width; t += (int64_t)sizeof buf)
    wbytes(c, buf, (size_t)(pad * ix->width - t < (int64_t)sizeof buf ? pad * ix->width - t : (int64_t)sizeof buf));
  return wclose(c);
}

/* A growable string. */
typedef struct {
  char *s;
  size_t n, cap;
  int bad;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->bad) return;
  for (;;) {
    va_list a;
    va_start(a, fmt);
    const int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, a);
    va_end(a);
    if (k < 0) {
      b->bad = 1;
      return;
    }
    if (b->s && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = b->cap ? 2 * b->cap : 4096;
    while (cap <= b->n + (size_t)k) cap *= 2;
    char *s = (char *)realloc(b->s, cap);
    if (!s) {
      b->bad = 1;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
}

/* Marks for removal the chunk payload files ("<i>.codes.npy",
 * "<i>.residuals.npy") of an older layout (they would win over the merged
 * file on load), and doclens / chunk metadata past the new chunk count. */
static int remove_stale(ctx_t *c, int64_t nchunks) {
  DIR *d = opendir(c->dir);
  if (!d) return cfail(c, "cannot list the folder (%s)", strerror(errno));
  struct dirent *e;
  int bad = 0;
  while (!bad && (e = readdir(d))) {
    long long i;
    char tail[64];
    int stale = 0;
    if (sscanf(e->d_name, "%lld.%63s", &i, tail) == 2 && i >= 0 &&
        (!strcmp(tail, "codes.npy") || !strcmp(tail, "residuals.npy")))
      stale = 1;
    else if (sscanf(e->d_name, "%lld.%63s", &i, tail) == 2 && !strcmp(tail, "metadata.json") &&
             i >= nchunks)
      stale = 1;
    else if (sscanf(e->d_name, "doclens.%lld.jso%63s", &i, tail) == 2 && !strcmp(tail, "n") &&
             i >= nchunks)
      stale = 1;
    if (stale) bad = lik_commit_remove(c->cm, e->d_name, c->err, sizeof c->err);
  }
  closedir(d);
  return bad;
}

/* Marks folder file `name` for removal when it is there (the folder is the
 * committed state: lik_commit_begin finished any earlier change); 1 on an
 * error (in c->err). */
static int gone(ctx_t *c, const char *name) {
  char p[4096];
  struct stat st;
  return join(p, sizeof p, c->dir, name) && !lstat(p, &st) &&
         lik_commit_remove(c->cm, name, c->err, sizeof c->err);
}

/* The DOCS part: the codec, the IVF, codes and residuals (merged), the chunk
 * files, the ids (doc_ids.npy; next_id.npy when the ids do not imply it);
 * stale chunk files, and lik's id files this state has not, removed. */
static lik_status stage_docs(ctx_t *c, const lik_plaid_index *ix, const int64_t *doc_ids,
                             int64_t doc_ids_stride) {
  const int64_t K = ix->ncent, d = ix->dim, nb = (int64_t)1 << ix->nbits;
  int64_t shape[2] = {K, d}, one = 1, nbm1 = nb - 1, total_ivf = ix->ivf_off[K];
  const float thr = ix->cluster_threshold;
  /* padding rows of the merged files (fast-plaid: max doc length - last) */
  int64_t maxlen = 0, lastlen = 0;
  for (int64_t j = 0; j < ix->ndocs; j++) {
    const int64_t l = ix->doc_off[j + 1] - ix->doc_off[j];
    if (l > maxlen) maxlen = l;
    lastlen = l;
  }
  if (wnpy(c, "centroids.npy", LIK_F16, 2, shape, ix->cent_f16, 0) ||
      wnpy(c, "bucket_cutoffs.npy", LIK_F32, 1, &nbm1, ix->cutoffs, 0) ||
      wnpy(c, "bucket_weights.npy", LIK_F32, 1, &nb, ix->weights, 0) ||
      wnpy(c, "avg_residual.npy", LIK_F32, 1, &d, ix->avg_residual, 0) ||
      wnpy(c, "cluster_threshold.npy", LIK_F32, 1, &one, &thr, 0))
    return vfail(c);
  if (ix->has_ivf) {
    int32_t *lens = (int32_t *)malloc((size_t)K * sizeof(int32_t) + 1);
    if (!lens) return lik_fail(LIK_ERR_ALLOC, "PLAID save: out of memory");
    for (int64_t k = 0; k < K; k++) lens[k] = (int32_t)(ix->ivf_off[k + 1] - ix->ivf_off[k]);
    const int bad = wnpy(c, "ivf.npy", LIK_I64, 1, &total_ivf, ix->ivf, 0) ||
                    wnpy(c, "ivf_lengths.npy", LIK_I32, 1, &K, lens, 0);
    free(lens);
    if (bad) return vfail(c);
  }
  if (write_merged(c, ix, maxlen - lastlen)) return vfail(c);
  if (!doc_ids && ix->ids) {
    doc_ids = ix->ids;
    doc_ids_stride = 1;
  }
  if (doc_ids) {
    int64_t *v = (int64_t *)malloc((size_t)(ix->ndocs ? ix->ndocs : 1) * sizeof(int64_t));
    if (!v) return lik_fail(LIK_ERR_ALLOC, "PLAID save: out of memory");
    for (int64_t j = 0; j < ix->ndocs; j++) v[j] = doc_ids[j * doc_ids_stride];
    const int bad = wnpy(c, "doc_ids.npy", LIK_I64, 1, &ix->ndocs, v, 0);
    free(v);
    if (bad) return vfail(c);
  }
  /* next_id.npy: only when the written ids do not imply it (the highest + 1;
   * 0..N-1 without doc_ids.npy): after a compact dropped the highest ids.
   * Given doc_ids are the folder's ids: they imply it. */
  int64_t implied = 0;
  if (doc_ids) {
    for (int64_t j = 0; j < ix->ndocs; j++)
      if (doc_ids[j * doc_ids_stride] >= implied) implied = doc_ids[j * doc_ids_stride] + 1;
  } else {
    implied = ix->ndocs;
  }
  const int own_ids = !doc_ids || doc_ids == ix->ids;
  const int write_next = own_ids && ix->next_id != implied;
  if (write_next && wnpy(c, "next_id.npy", LIK_I64, 0, NULL, &ix->next_id, 0)) return vfail(c);
  sbuf b = {0};
  char name[96];
  int bad = 0;
  for (int64_t s = 0; s < ix->nseg && !bad && !b.bad; s++) {
    const lik_pseg *g = &ix->segs[s];
    b.n = 0;
    sb_printf(&b, "[");
    for (int64_t j = g->doc0; j < g->doc0 + g->ndocs; j++)
      sb_printf(&b, j > g->doc0 ? ",%lld" : "%lld", (long long)(ix->doc_off[j + 1] - ix->doc_off[j]));
    sb_printf(&b, "]");
    snprintf(name, sizeof name, "doclens.%lld.json", (long long)s);
    if (b.bad || (bad = wtext(c, name, b.s))) break;
    b.n = 0;
    sb_printf(&b, "{\n  \"embedding_offset\": %lld,\n  \"num_documents\": %lld,\n  "
              "\"num_embeddings\": %lld\n}", (long long)g->tok0, (long long)g->ndocs,
              (long long)g->ntok);
    snprintf(name, sizeof name, "%lld.metadata.json", (long long)s);
    if (!b.bad) bad = wtext(c, name, b.s);
  }
  for (int m = 0; m < 2 && !bad && !b.bad; m++) {
    const char *sfx = m ? "residuals" : "codes";
    b.n = 0;
    sb_printf(&b, "{");
    for (int64_t s = 0; s < ix->nseg; s++)
      sb_printf(&b, "%s\"%lld.%s.npy\": {\"rows\": %lld, \"merged\": true, \"mtime\": null}",
                s ? ", " : "", (long long)s, sfx, (long long)ix->segs[s].ntok);
    sb_printf(&b, "}");
    snprintf(name, sizeof name, "merged_%s.manifest.json", sfx);
    if (!b.bad) bad = wtext(c, name, b.s);
  }
  if (!bad && !b.bad) {
    b.n = 0;
    sb_printf(&b, "{\n  \"nbits\": %d,\n  \"num_chunks\": %lld\n}\n", ix->nbits,
              (long long)ix->nseg);
    if (!b.bad) bad = wtext(c, "plan.json", b.s);
  }
  const int nomem = b.bad;
  free(b.s);
  if (nomem) return lik_fail(LIK_ERR_ALLOC, "PLAID save: out of memory");
  if (bad || remove_stale(c, ix->nseg)) return vfail(c);
  if (!ix->has_ivf) /* a compress-only index: no lists from an earlier one */
    for (int i = 0; i < 2; i++)
      if (gone(c, i ? "ivf_lengths.npy" : "ivf.npy")) return vfail(c);
  /* lik's id files this state has not: ids 0..N-1, next_id implied */
  if ((!doc_ids && gone(c, "doc_ids.npy")) || (!write_next && gone(c, "next_id.npy")))
    return vfail(c);
  return LIK_OK;
}

/* The manifest: metadata.json, in every change (a reader's stamp watches it). */
static lik_status stage_manifest(ctx_t *c, const lik_plaid_index *ix) {
  sbuf b = {0};
  sb_printf(&b, "{\n  \"avg_doclen\": %.17g,\n  \"compress_only\": %s,\n  \"nbits\": %d,\n  "
            "\"num_chunks\": %lld,\n  \"num_documents\": %lld,\n  \"num_embeddings\": %lld,\n  "
            "\"num_partitions\": %lld,\n  \"frozen\": true,\n  \"mutable\": true\n}",
            ix->ndocs ? (double)ix->ntok / (double)ix->ndocs : 0.0,
            ix->has_ivf ? "false" : "true", ix->nbits, (long long)ix->nseg,
            (long long)ix->ndocs, (long long)ix->ntok, (long long)ix->ncent);
  if (b.bad) {
    free(b.s);
    return lik_fail(LIK_ERR_ALLOC, "PLAID save: out of memory");
  }
  const int bad = wtext(c, "metadata.json", b.s);
  free(b.s);
  return bad ? vfail(c) : LIK_OK;
}

lik_status lik_plaid_stage_files(lik_commit *cm, const lik_plaid_index *ix, const char *dir,
                                 unsigned parts, const int64_t *doc_ids, int64_t doc_ids_stride) {
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.dir = dir;
  c.cm = cm;
  lik_status st;
  if ((parts & LIK_PLAID_PART_DOCS) && (st = stage_docs(&c, ix, doc_ids, doc_ids_stride)))
    return st;
  if (parts & LIK_PLAID_PART_DELETED) { /* the tombstones: ascending positions */
    if (!ix->ndead) {
      if (gone(&c, "deleted.npy")) return vfail(&c);
    } else {
      int64_t *v = (int64_t *)malloc((size_t)ix->ndead * sizeof(int64_t));
      if (!v) return lik_fail(LIK_ERR_ALLOC, "PLAID save: out of memory");
      int64_t n = 0;
      for (int64_t j = 0; j < ix->ndocs; j++)
        if (lik_plaid_is_dead(ix, j)) v[n++] = j;
      const int bad = wnpy(&c, "deleted.npy", LIK_I64, 1, &n, v, 0);
      free(v);
      if (bad) return vfail(&c);
    }
  }
  if (parts & LIK_PLAID_PART_META) {
    if (!ix->has_meta) {
      if (gone(&c, "metadata.sqlite")) return vfail(&c);
    } else {
      if (wopen(&c, "metadata.sqlite")) return vfail(&c);
      wbytes(&c, ix->meta, (size_t)ix->meta_size);
      if (wclose(&c)) return vfail(&c);
    }
  }
  return stage_manifest(&c, ix);
}
