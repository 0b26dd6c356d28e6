/*
 * emb_io.c — safetensors / .npy readers and padded block views for `lik`.
 *
 * safetensors: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F16", "shape": [..], "data_offsets": [begin, end]},
 *    "__metadata__": {...}}, then the byte buffer (offsets relative to it).
 * .npy (format 1.0 / 2.0 / 3.0): "\x93NUMPY", major, minor, header length
 *   (uint16 for 1.0, uint32 otherwise, little-endian), then a Python dict
 *   literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), },
 *   then the C-order data.
 */
#define _POSIX_C_SOURCE 200809L
#include "emb_io.h"

#include "checked.h" /* src/core: the library's overflow-checked sizes */
#include "dtype.h"   /* src/core: the library's one fp16 / bf16 <-> fp32 conversion */

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, ERR_LEN, fmt, ap);
  va_end(ap);
  return 1;
}

size_t dtype_size(lik_dtype t) {
  switch (t) {
  case LIK_F32: return 4;
  case LIK_F16: return 2;
  case LIK_BF16: return 2;
  case LIK_F64: return 8;
  case LIK_BOOL: return 1;
  case LIK_U8: return 1;
  case LIK_I32: return 4;
  case LIK_I64: return 8;
  case LIK_I8: case LIK_F8E4M3: case LIK_F8E5M2: return 1;
  }
  return 0;
}

const char *dtype_name(lik_dtype t) {
  switch (t) {
  case LIK_F32: return "F32";
  case LIK_F16: return "F16";
  case LIK_BF16: return "BF16";
  case LIK_F64: return "F64";
  case LIK_BOOL: return "BOOL";
  case LIK_U8: return "U8";
  case LIK_I32: return "I32";
  case LIK_I64: return "I64";
  case LIK_I8: return "I8";
  case LIK_F8E4M3: return "F8E4M3";
  case LIK_F8E5M2: return "F8E5M2";
  }
  return "?";
}

static int is_float(lik_dtype t) {
  return t == LIK_F32 || t == LIK_F16 || t == LIK_BF16 || t == LIK_F64;
}

/* ---- files ------------------------------------------------------------- */

int open_regular(const char *path, const char *what, char *err) {
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fail(err, "%s: cannot open %s: %s", path, what, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    fail(err, "%s: cannot stat %s: %s", path, what, strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    fail(err, "%s: cannot open %s: %s, not a regular file", path, what,
         S_ISDIR(st.st_mode) ? "is a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a special file");
    close(fd);
    return -1;
  }
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    fail(err, "%s: cannot read %s: %s", path, what, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

void *calloc_n(int64_t n1, int64_t n2, size_t elem) {
  int64_t n;
  size_t bytes;
  if (n1 < 0 || n2 < 0 || lik_mul_i64(n1, n2, &n) || lik_bytes(n, elem, &bytes)) return NULL;
  return calloc(bytes ? bytes : 1, 1);
}

static int map_file(const char *path, const char *what, mapped_file *m, char *err) {
  m->base = NULL;
  m->size = 0;
  int fd = open_regular(path, what, err);
  if (fd < 0) return 1;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return fail(err, "%s: cannot stat %s: %s", path, what, strerror(errno));
  }
  if (st.st_size == 0) {
    close(fd);
    return fail(err, "%s: empty file", path);
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return fail(err, "%s: cannot mmap: %s", path, strerror(errno));
  m->base = p;
  m->size = (size_t)st.st_size;
  return 0;
}

static void unmap_file(mapped_file *m) {
  if (m->base) munmap((void *)m->base, m->size);
  m->base = NULL;
  m->size = 0;
}

static int checked_numel(const raw_array *a, int64_t *out) {
  int64_t n = 1;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] < 0 || __builtin_mul_overflow(n, a->shape[i], &n)) return 1;
  *out = n;
  return 0;
}

/* n elements of size bytes, zeroed (at least one element); NULL when the
 * product overflows or memory is short.  Callers bound n by the file first. */
static void *alloc_n(int64_t n, size_t size) {
  return n < 0 ? NULL : calloc((size_t)(n > 0 ? n : 1), size);
}

static void shape_str(const raw_array *a, char *buf, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, cap - o, "[");
  for (int i = 0; i < a->ndim && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* ---- safetensors ---------------------------------------------------------- */

static int st_dtype(const char *s, lik_dtype *t) {
  static const struct { const char *n; lik_dtype t; } tab[] = {
      {"F32", LIK_F32}, {"F16", LIK_F16}, {"BF16", LIK_BF16}, {"F64", LIK_F64},
      {"BOOL", LIK_BOOL}, {"U8", LIK_U8}, {"I32", LIK_I32}, {"I64", LIK_I64}};
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (strcmp(s, tab[i].n) == 0) {
      *t = tab[i].t;
      return 0;
    }
  return 1;
}

/* A JSON number that is a count or offset: an integer in [0, 2^53]. */
static int json_count(const cJSON *v, int64_t *out) {
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0) ||
      v->valuedouble != (double)(int64_t)v->valuedouble)
    return 1;
  *out = (int64_t)v->valuedouble;
  return 0;
}

typedef struct st_file {
  const mapped_file *m;
  cJSON *header;
  const unsigned char *data;
  size_t data_size;
} st_file;

typedef struct st_range {
  int64_t begin, end;
  const char *name;
} st_range;

static int cmp_range(const void *a, const void *b) {
  const st_range *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* The format's rule: the tensors' data_offsets, sorted, tile the data
 * section exactly (no overlap, no hole, nothing after the last). */
static int st_check_layout(const char *path, const st_file *f, char *err) {
  int n = cJSON_GetArraySize(f->header), k = 0, rc = 1;
  st_range *r = alloc_n(n, sizeof *r);
  if (!r) return fail(err, "%s: out of memory for %d header entries", path, n);
  for (const cJSON *e = f->header->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) continue;
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    st_range *x = &r[k];
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        json_count(cJSON_GetArrayItem(off, 0), &x->begin) ||
        json_count(cJSON_GetArrayItem(off, 1), &x->end) || x->end < x->begin) {
      fail(err, "%s: tensor \"%s\": data_offsets must be two integers [begin, end], "
           "0 <= begin <= end", path, e->string);
      goto out;
    }
    if ((uint64_t)x->end > f->data_size) {
      fail(err, "%s: tensor \"%s\": data_offsets [%lld, %lld] outside the file (data section "
           "has %zu bytes)", path, e->string, (long long)x->begin, (long long)x->end,
           f->data_size);
      goto out;
    }
    x->name = e->string;
    k++;
  }
  qsort(r, (size_t)k, sizeof *r, cmp_range);
  int64_t at = 0;
  for (int i = 0; i < k; i++) {
    if (r[i].begin < at) {
      fail(err, "%s: tensors \"%s\" [%lld, %lld] and \"%s\" [%lld, %lld] overlap in the data "
           "section (safetensors forbids it)", path, r[i - 1].name, (long long)r[i - 1].begin,
           (long long)r[i - 1].end, r[i].name, (long long)r[i].begin, (long long)r[i].end);
      goto out;
    }
    if (r[i].begin > at) {
      fail(err, "%s: bytes [%lld, %lld) of the data section belong to no tensor (safetensors "
           "forbids holes)", path, (long long)at, (long long)r[i].begin);
      goto out;
    }
    at = r[i].end;
  }
  if ((uint64_t)at != f->data_size) {
    fail(err, "%s: the tensors end at byte %lld of a %zu-byte data section (safetensors forbids "
         "trailing bytes)", path, (long long)at, f->data_size);
    goto out;
  }
  rc = 0;
out:
  free(r);
  return rc;
}

static int st_open(const char *path, const mapped_file *m, st_file *f, char *err) {
  f->m = m;
  f->header = NULL;
  if (m->size < 8) return fail(err, "%s: not a safetensors file (%zu bytes)", path, m->size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | m->base[i];
  if (n == 0 || n > m->size - 8 || n > (uint64_t)100 << 20)
    return fail(err, "%s: bad safetensors header length %llu (file has %zu bytes)", path,
                (unsigned long long)n, m->size);
  f->header = cJSON_ParseWithLength((const char *)m->base + 8, (size_t)n);
  if (!f->header || !cJSON_IsObject(f->header)) {
    if (f->header) cJSON_Delete(f->header);
    f->header = NULL;
    return fail(err, "%s: safetensors header is not valid JSON", path);
  }
  f->data = m->base + 8 + n;
  f->data_size = m->size - 8 - (size_t)n;
  if (st_check_layout(path, f, err)) {
    cJSON_Delete(f->header);
    f->header = NULL;
    return 1;
  }
  return 0;
}

/* Returns 0 and fills `a`, 1 on error (message in err), -1 when absent. */
static int st_get(const char *path, const st_file *f, const char *name, raw_array *a, char *err) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(f->header, name);
  if (!e) return -1;
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
      cJSON_GetArraySize(off) != 2)
    return fail(err, "%s: tensor \"%s\": malformed header entry (needs dtype, shape, data_offsets)",
                path, name);
  if (st_dtype(dt->valuestring, &a->dtype))
    return fail(err, "%s: tensor \"%s\": unsupported dtype %s", path, name, dt->valuestring);
  int nd = cJSON_GetArraySize(sh);
  if (nd > 8) return fail(err, "%s: tensor \"%s\": %d dimensions", path, name, nd);
  a->ndim = nd;
  for (int i = 0; i < nd; i++)
    if (json_count(cJSON_GetArrayItem(sh, i), &a->shape[i]))
      return fail(err, "%s: tensor \"%s\": shape entry %d is not an integer in [0, 2^53]", path,
                  name, i);
  int64_t begin = 0, end = 0, bytes; /* offsets were checked by st_check_layout */
  json_count(cJSON_GetArrayItem(off, 0), &begin);
  json_count(cJSON_GetArrayItem(off, 1), &end);
  if (checked_numel(a, &a->numel) ||
      __builtin_mul_overflow(a->numel, (int64_t)dtype_size(a->dtype), &bytes) ||
      bytes != end - begin) {
    char s[128];
    shape_str(a, s, sizeof s);
    return fail(err, "%s: tensor \"%s\": shape %s of %s needs a different byte size than "
                "data_offsets [%lld, %lld]", path, name, s, dtype_name(a->dtype),
                (long long)begin, (long long)end);
  }
  a->data = f->data + begin;
  return 0;
}

/* ---- npy ------------------------------------------------------------------ */

static int npy_dtype(const char *d, lik_dtype *t, char *why, size_t whylen) {
  char o = d[0];
  if (o == '>' && strcmp(d + 1, "u1") != 0 && strcmp(d + 1, "b1") != 0 && strcmp(d + 1, "i1") != 0) {
    snprintf(why, whylen, "big-endian dtype '%s' is not supported", d);
    return 1;
  }
  if (o != '<' && o != '|' && o != '=' && o != '>') {
    snprintf(why, whylen, "unknown dtype '%s'", d);
    return 1;
  }
  const char *c = d + 1;
  static const struct { const char *n; lik_dtype t; } tab[] = {
      {"f4", LIK_F32}, {"f2", LIK_F16}, {"f8", LIK_F64}, {"V2", LIK_BF16} /* ml_dtypes bfloat16 */,
      {"b1", LIK_BOOL}, {"u1", LIK_U8}, {"i4", LIK_I32}, {"i8", LIK_I64}};
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (strcmp(c, tab[i].n) == 0) {
      *t = tab[i].t;
      return 0;
    }
  snprintf(why, whylen, "unsupported dtype '%s' (use float16, bfloat16, float32, float64; "
           "int32/int64 for lengths, offsets and ids; bool/uint8 for masks)", d);
  return 1;
}

static int npy_parse(const char *path, const mapped_file *m, raw_array *a, char *err) {
  const unsigned char *p = m->base;
  if (m->size < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
    return fail(err, "%s: not a .npy file (bad magic)", path);
  int major = p[6];
  size_t hlen, hoff;
  if (major == 1) {
    hlen = (size_t)p[8] | ((size_t)p[9] << 8);
    hoff = 10;
  } else if (major == 2 || major == 3) {
    if (m->size < 12) return fail(err, "%s: truncated .npy header", path);
    hlen = (size_t)p[8] | ((size_t)p[9] << 8) | ((size_t)p[10] << 16) | ((size_t)p[11] << 24);
    hoff = 12;
  } else {
    return fail(err, "%s: unsupported .npy format version %d", path, major);
  }
  if (hlen > m->size - hoff || hlen > 1 << 20) return fail(err, "%s: truncated .npy header", path);
  char *h = malloc(hlen + 1);
  if (!h) return fail(err, "%s: out of memory for a %zu-byte .npy header", path, hlen);
  memcpy(h, p + hoff, hlen);
  h[hlen] = 0;
  int rc = 1;
  char descr[32] = {0};
  const char *s = strstr(h, "'descr'");
  if (!s || !(s = strchr(s + 7, ':'))) {
    fail(err, "%s: .npy header has no 'descr'", path);
    goto out;
  }
  s++;
  while (*s == ' ') s++;
  if (*s != '\'' && *s != '"') {
    fail(err, "%s: .npy 'descr' is not a simple dtype string (structured arrays are not supported)",
         path);
    goto out;
  }
  {
    char q = *s++;
    size_t k = 0;
    while (*s && *s != q && k + 1 < sizeof descr) descr[k++] = *s++;
    if (*s != q) {
      fail(err, "%s: bad .npy 'descr'", path);
      goto out;
    }
  }
  char why[200];
  if (npy_dtype(descr, &a->dtype, why, sizeof why)) {
    fail(err, "%s: %s", path, why);
    goto out;
  }
  s = strstr(h, "'fortran_order'");
  if (!s || !(s = strchr(s, ':'))) {
    fail(err, "%s: .npy header has no 'fortran_order'", path);
    goto out;
  }
  s++;
  while (*s == ' ') s++;
  if (strncmp(s, "True", 4) == 0) {
    fail(err, "%s: Fortran-order .npy arrays are not supported (save a C-contiguous array)", path);
    goto out;
  }
  s = strstr(h, "'shape'");
  if (!s || !(s = strchr(s, '('))) {
    fail(err, "%s: .npy header has no 'shape'", path);
    goto out;
  }
  s++;
  a->ndim = 0;
  for (;;) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    if (*s < '0' || *s > '9' || a->ndim >= 8) {
      fail(err, "%s: bad .npy 'shape'", path);
      goto out;
    }
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (errno) {
      fail(err, "%s: bad .npy 'shape'", path);
      goto out;
    }
    a->shape[a->ndim++] = v;
    s = e;
    if (*s == 'L') s++;
  }
  if (checked_numel(a, &a->numel) || a->numel > INT64_MAX / 8) {
    fail(err, "%s: .npy shape too large", path);
    goto out;
  }
  size_t need = (size_t)a->numel * dtype_size(a->dtype);
  if (need > m->size - hoff - hlen) {
    char sh[128];
    shape_str(a, sh, sizeof sh);
    fail(err, "%s: truncated .npy data: shape %s of %s needs %zu bytes, file has %zu", path, sh,
         dtype_name(a->dtype), need, m->size - hoff - hlen);
    goto out;
  }
  a->data = p + hoff + hlen;
  rc = 0;
out:
  free(h);
  return rc;
}

static int is_npy(const mapped_file *m) {
  return m->size >= 6 && memcmp(m->base, "\x93NUMPY", 6) == 0;
}

/* ---- integer arrays -------------------------------------------------------- */

static int64_t get_int(const raw_array *a, int64_t i) {
  switch (a->dtype) {
  case LIK_I64: { int64_t v; memcpy(&v, (const char *)a->data + 8 * i, 8); return v; }
  case LIK_I32: { int32_t v; memcpy(&v, (const char *)a->data + 4 * i, 4); return v; }
  case LIK_U8:
  case LIK_BOOL: return ((const uint8_t *)a->data)[i];
  default: return 0;
  }
}

static int to_int64(const char *path, const char *what, const raw_array *a, int64_t want_len,
                    int64_t **out, int64_t *len, char *err) {
  if (a->dtype != LIK_I64 && a->dtype != LIK_I32 && a->dtype != LIK_U8)
    return fail(err, "%s: %s must be an integer array (I32, I64 or U8), got %s", path, what,
                dtype_name(a->dtype));
  if (a->ndim != 1)
    return fail(err, "%s: %s must be 1-D, got %d-D", path, what, a->ndim);
  if (want_len >= 0 && a->shape[0] != want_len)
    return fail(err, "%s: %s has %lld entries, expected %lld", path, what, (long long)a->shape[0],
                (long long)want_len);
  int64_t n = a->shape[0]; /* entries held by the file */
  int64_t *v = alloc_n(n, sizeof(int64_t));
  if (!v) return fail(err, "%s: out of memory for %lld %s entries", path, (long long)n, what);
  for (int64_t i = 0; i < n; i++) v[i] = get_int(a, i);
  *out = v;
  if (len) *len = n;
  return 0;
}

/* ---- loading ---------------------------------------------------------------- */

int npy_read_ints(const char *path, const char *what, int64_t want_len, int64_t **out,
                  int64_t *len, char *err) {
  mapped_file m;
  raw_array a = {0};
  if (map_file(path, what, &m, err)) return 1;
  const int rc = !is_npy(&m) ? fail(err, "%s: %s must be a .npy file", path, what)
                             : npy_parse(path, &m, &a, err) ||
                                   to_int64(path, what, &a, want_len, out, len, err);
  unmap_file(&m);
  return rc;
}

static int load_companion(emb_set *s, const char *path, const char *what, raw_array *a,
                          char *err) {
  if (s->nfiles >= 4) return fail(err, "too many files");
  mapped_file *m = &s->files[s->nfiles];
  if (map_file(path, what, m, err)) return 1;
  s->nfiles++;
  if (!is_npy(m)) return fail(err, "%s: companion arrays must be .npy files", path);
  return npy_parse(path, m, a, err);
}

int emb_load(emb_set *s, const char *name, const emb_sources *src, char *err) {
  memset(s, 0, sizeof *s);
  s->name = name;
  s->path = src->path;
  const char *path = src->path;
  raw_array emb = {0}, cu = {0}, lens = {0}, mask = {0}, ids = {0};
  int have_cu = 0, have_lens = 0, have_mask = 0, have_ids = 0;

  if (map_file(path, name, &s->files[0], err)) return 1;
  s->nfiles = 1;
  const mapped_file *m = &s->files[0];
  if (is_npy(m)) {
    if (npy_parse(path, m, &emb, err)) return 1;
  } else {
    st_file f;
    if (st_open(path, m, &f, err)) return 1;
    int rc = st_get(path, &f, "embeddings", &emb, err);
    if (rc < 0) {
      /* Name the tensors that are there. */
      char names[256] = "";
      size_t o = 0;
      for (const cJSON *e = f.header->child; e && o < sizeof names - 40; e = e->next)
        if (strcmp(e->string, "__metadata__") != 0)
          o += (size_t)snprintf(names + o, sizeof names - o, "%s\"%s\"", o ? ", " : "", e->string);
      fail(err, "%s: no tensor \"embeddings\" (tensors: %s)", path, o ? names : "none");
      rc = 1;
    }
    int r;
    if (!rc && (r = st_get(path, &f, "cu_seqlens", &cu, err)) >= 0) { rc = r; have_cu = !r; }
    if (!rc && (r = st_get(path, &f, "lengths", &lens, err)) >= 0) { rc = r; have_lens = !r; }
    if (!rc && (r = st_get(path, &f, "mask", &mask, err)) >= 0) { rc = r; have_mask = !r; }
    if (!rc && !have_mask && (r = st_get(path, &f, "attention_mask", &mask, err)) >= 0) {
      rc = r;
      have_mask = !r;
    }
    if (!rc && (r = st_get(path, &f, "ids", &ids, err)) >= 0) { rc = r; have_ids = !r; }
    cJSON_Delete(f.header);
    if (rc) return 1;
  }
  if (src->cu_seqlens) {
    if (load_companion(s, src->cu_seqlens, "cu_seqlens", &cu, err)) return 1;
    have_cu = 1;
  }
  if (src->lengths) {
    if (load_companion(s, src->lengths, "lengths", &lens, err)) return 1;
    have_lens = 1;
  }
  if (src->ids) {
    if (load_companion(s, src->ids, "ids", &ids, err)) return 1;
    have_ids = 1;
  }

  if (!is_float(emb.dtype))
    return fail(err, "%s: embeddings have dtype %s; expected F16, BF16, F32 or F64", path,
                dtype_name(emb.dtype));
  s->dtype = emb.dtype;
  if (emb.ndim == 2) {
    if (!have_cu)
      return fail(err, "%s: 2-D embeddings [%lld, %lld] need cu_seqlens (a \"cu_seqlens\" tensor "
                  "or --%s-cu-seqlens FILE.npy)", path, (long long)emb.shape[0],
                  (long long)emb.shape[1], name[0] == 'q' ? "query" : "doc");
    s->ragged = 1;
    s->total = emb.shape[0];
    s->d = emb.shape[1];
    if (to_int64(src->cu_seqlens ? src->cu_seqlens : path, "cu_seqlens", &cu, -1, &s->cu, NULL, err))
      return 1;
    if (cu.shape[0] < 1) return fail(err, "%s: cu_seqlens is empty", path);
    s->n = cu.shape[0] - 1;
    if (s->cu[0] != 0) return fail(err, "%s: cu_seqlens[0] = %lld, must be 0", path,
                                   (long long)s->cu[0]);
    for (int64_t i = 0; i < s->n; i++)
      if (s->cu[i + 1] < s->cu[i])
        return fail(err, "%s: cu_seqlens decreases at %lld (%lld -> %lld)", path, (long long)i,
                    (long long)s->cu[i], (long long)s->cu[i + 1]);
    if (s->cu[s->n] > s->total)
      return fail(err, "%s: cu_seqlens ends at %lld but embeddings have %lld rows", path,
                  (long long)s->cu[s->n], (long long)s->total);
  } else if (emb.ndim == 3) {
    if (have_cu) return fail(err, "%s: cu_seqlens given for padded 3-D embeddings", path);
    s->n = emb.shape[0];
    s->L = emb.shape[1];
    s->d = emb.shape[2];
    /* N is the one count the data does not bound (a padded [N, 0, d] array
     * holds no bytes): bounded by the file before anything is allocated, at
     * most one sequence per byte of it.  (Ragged counts are cu_seqlens
     * entries, held by a file.) */
    if ((uint64_t)s->n > m->size)
      return fail(err, "%s: embeddings [%lld, %lld, %lld] declare %lld sequences in a %zu-byte "
                  "file (at most one per byte)", path, (long long)s->n, (long long)s->L,
                  (long long)s->d, (long long)s->n, m->size);
  } else {
    char sh[128];
    shape_str(&emb, sh, sizeof sh);
    return fail(err, "%s: embeddings have shape %s; expected [T, d] with cu_seqlens or "
                "[N, L, d]", path, sh);
  }
  if (s->d <= 0 || s->d > INT32_MAX)
    return fail(err, "%s: embedding dimension d=%lld is outside [1, %d]", path, (long long)s->d,
                INT32_MAX);
  s->data = emb.data;

  s->len = alloc_n(s->n, sizeof(int64_t));
  if (!s->len)
    return fail(err, "%s: out of memory for the lengths of %lld sequences", path,
                (long long)s->n);
  if (s->ragged) {
    for (int64_t i = 0; i < s->n; i++) s->len[i] = s->cu[i + 1] - s->cu[i];
  } else if (have_mask) {
    if (have_lens) return fail(err, "%s: give either lengths or a mask, not both", path);
    if (mask.ndim != 2 || mask.shape[0] != s->n || mask.shape[1] != s->L)
      return fail(err, "%s: mask must be [%lld, %lld]", path, (long long)s->n, (long long)s->L);
    if (mask.dtype == LIK_BOOL || mask.dtype == LIK_U8) {
      s->mask = mask.data;
    } else if (mask.dtype == LIK_I32 || mask.dtype == LIK_I64) {
      s->mask_owned = alloc_n(mask.numel, 1);
      if (!s->mask_owned)
        return fail(err, "%s: out of memory for a [%lld, %lld] mask", path, (long long)s->n,
                    (long long)s->L);
      for (int64_t i = 0; i < mask.numel; i++) s->mask_owned[i] = get_int(&mask, i) != 0;
      s->mask = s->mask_owned;
    } else {
      return fail(err, "%s: mask dtype %s unsupported (BOOL, U8, I32, I64)", path,
                  dtype_name(mask.dtype));
    }
    for (int64_t i = 0; i < s->n; i++) {
      int64_t c = 0;
      for (int64_t t = 0; t < s->L; t++) c += s->mask[i * s->L + t] != 0;
      s->len[i] = c;
    }
  } else if (have_lens) {
    int64_t *lv;
    if (to_int64(src->lengths ? src->lengths : path, "lengths", &lens, s->n, &lv, NULL, err)) return 1;
    for (int64_t i = 0; i < s->n; i++) {
      if (lv[i] < 0 || lv[i] > s->L) {
        int64_t bad = lv[i];
        free(lv);
        return fail(err, "%s: lengths[%lld] = %lld outside [0, %lld]", path, (long long)i,
                    (long long)bad, (long long)s->L);
      }
      s->len[i] = lv[i];
    }
    free(lv);
    /* A prefix mask from the lengths (n * L <= the embeddings' elements). */
    s->mask_owned = calloc_n(s->n, s->L, 1);
    if (!s->mask_owned)
      return fail(err, "%s: out of memory for a [%lld, %lld] mask", path, (long long)s->n,
                  (long long)s->L);
    for (int64_t i = 0; i < s->n; i++) memset(s->mask_owned + i * s->L, 1, (size_t)s->len[i]);
    s->mask = s->mask_owned;
  } else {
    for (int64_t i = 0; i < s->n; i++) s->len[i] = s->L;
  }
  s->tokens = 0;
  s->min_len = s->n ? INT64_MAX : 0;
  s->max_len = 0;
  for (int64_t i = 0; i < s->n; i++) {
    s->tokens += s->len[i];
    if (s->len[i] < s->min_len) s->min_len = s->len[i];
    if (s->len[i] > s->max_len) s->max_len = s->len[i];
  }
  if (s->ragged) s->L = s->max_len;

  s->ids_given = have_ids;
  if (have_ids) {
    if (to_int64(src->ids ? src->ids : path, "ids", &ids, s->n, &s->ids, NULL, err)) return 1;
  } else {
    s->ids = alloc_n(s->n, sizeof(int64_t));
    if (!s->ids)
      return fail(err, "%s: out of memory for the ids of %lld sequences", path,
                  (long long)s->n);
    for (int64_t i = 0; i < s->n; i++) s->ids[i] = i;
  }
  return 0;
}

void emb_free(emb_set *s) {
  for (int i = 0; i < s->nfiles; i++) unmap_file(&s->files[i]);
  free(s->cu);
  free(s->len);
  free(s->ids);
  free(s->mask_owned);
  memset(s, 0, sizeof *s);
}

/* ---- conversion and blocks ----------------------------------------------------- */

/* Converts `n` elements from `src` (dtype `from`) into `dst` (dtype `to`);
 * `to` is either `from` (plain copy), F32, F64 or F16 (--precision fp16). */
static void convert(void *dst, lik_dtype to, const void *src, lik_dtype from, int64_t n) {
  if (to == from) {
    memcpy(dst, src, (size_t)n * dtype_size(from));
    return;
  }
  for (int64_t i = 0; i < n; i++) lik_store_f64(dst, to, i, lik_load_f64(src, from, i));
}

static int grow(void **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  void *q = realloc(*p, need);
  if (!q) return 1;
  *p = q;
  *cap = need;
  return 0;
}

/* Zeroed buffers of a padded block [nb, Lb, d] in dtype `want` and its mask
 * [nb, Lb]; *nel = nb * Lb * d.  Sizes are overflow-checked. */
static int block_buffers(const emb_set *s, int64_t nb, int64_t Lb, lik_dtype want, void **buf,
                         size_t *buf_cap, uint8_t **mbuf, size_t *mbuf_cap, size_t *nel,
                         char *err) {
  int64_t tok, el;
  size_t bytes;
  if (__builtin_mul_overflow(nb, Lb, &tok) || __builtin_mul_overflow(tok, s->d, &el) ||
      __builtin_mul_overflow((size_t)el, dtype_size(want), &bytes) ||
      grow(buf, buf_cap, bytes ? bytes : 1) || grow((void **)mbuf, mbuf_cap, (size_t)tok + 1))
    return fail(err, "%s: out of memory for a padded block of %lld %s x %lld tokens x d=%lld "
                "(%s)", s->path, (long long)nb, s->name, (long long)Lb, (long long)s->d,
                dtype_name(want));
  *nel = (size_t)el;
  memset(*buf, 0, bytes);
  memset(*mbuf, 0, (size_t)tok);
  return 0;
}

int emb_block(const emb_set *s, int64_t i0, int64_t i1, lik_dtype want, lik_tensor *x,
              lik_tensor *mask, void **buf, size_t *buf_cap, uint8_t **mbuf, size_t *mbuf_cap,
              char *err) {
  int64_t nb = i1 - i0, d = s->d;
  size_t es = dtype_size(s->dtype);
  memset(x, 0, sizeof *x);
  memset(mask, 0, sizeof *mask);
  x->dtype = want;
  x->ndim = 3;
  x->device = LIK_CPU;
  mask->dtype = LIK_U8;
  mask->ndim = 2;
  mask->device = LIK_CPU;

  if (!s->ragged && want == s->dtype && ((uintptr_t)s->data % es) == 0) {
    /* A view into the mapped padded data. */
    x->data = (char *)s->data + (size_t)(i0 * s->L * d) * es;
    x->shape[0] = nb;
    x->shape[1] = s->L;
    x->shape[2] = d;
    x->strides[0] = s->L * d;
    x->strides[1] = d;
    x->strides[2] = 1;
    if (s->mask) {
      mask->data = (void *)(s->mask + i0 * s->L);
      mask->shape[0] = nb;
      mask->shape[1] = s->L;
      mask->strides[0] = s->L;
      mask->strides[1] = 1;
    } else {
      mask->data = NULL;
    }
    return 0;
  }

  /* Copy into a padded buffer of the block's own max length. */
  int64_t Lb = 0;
  for (int64_t i = i0; i < i1; i++) {
    int64_t l = s->ragged ? s->len[i] : s->L;
    if (l > Lb) Lb = l;
  }
  size_t ws = dtype_size(want), nel;
  if (block_buffers(s, nb, Lb, want, buf, buf_cap, mbuf, mbuf_cap, &nel, err)) return 1;
  for (int64_t i = i0; i < i1; i++) {
    char *dst = (char *)*buf + (size_t)((i - i0) * Lb * d) * ws;
    uint8_t *mrow = *mbuf + (i - i0) * Lb;
    if (s->ragged) {
      const char *src = (const char *)s->data + (size_t)(s->cu[i] * d) * es;
      convert(dst, want, src, s->dtype, s->len[i] * d);
      memset(mrow, 1, (size_t)s->len[i]);
    } else {
      const char *src = (const char *)s->data + (size_t)(i * s->L * d) * es;
      convert(dst, want, src, s->dtype, s->L * d);
      if (s->mask)
        for (int64_t t = 0; t < s->L; t++) mrow[t] = s->mask[i * s->L + t] != 0;
      else
        memset(mrow, 1, (size_t)s->L);
    }
  }
  x->data = nel ? *buf : NULL;
  x->shape[0] = nb;
  x->shape[1] = Lb;
  x->shape[2] = d;
  x->strides[0] = Lb * d;
  x->strides[1] = d;
  x->strides[2] = 1;
  mask->data = (nb > 0 && Lb > 0) ? (void *)*mbuf : NULL;
  mask->shape[0] = nb;
  mask->shape[1] = Lb;
  mask->strides[0] = Lb;
  mask->strides[1] = 1;
  return 0;
}

int emb_gather(const emb_set *s, const int64_t *idx, int64_t nb, lik_dtype want, lik_tensor *x,
               lik_tensor *mask, void **buf, size_t *buf_cap, uint8_t **mbuf, size_t *mbuf_cap,
               char *err) {
  int64_t d = s->d, Lb = 0;
  size_t es = dtype_size(s->dtype), ws = dtype_size(want);
  for (int64_t r = 0; r < nb; r++) {
    if (idx[r] < 0 || idx[r] >= s->n)
      return fail(err, "%s: sequence index %lld out of range", s->path, (long long)idx[r]);
    int64_t l = s->ragged ? s->len[idx[r]] : s->L;
    if (l > Lb) Lb = l;
  }
  size_t nel;
  if (block_buffers(s, nb, Lb, want, buf, buf_cap, mbuf, mbuf_cap, &nel, err)) return 1;
  for (int64_t r = 0; r < nb; r++) {
    int64_t i = idx[r];
    char *dst = (char *)*buf + (size_t)(r * Lb * d) * ws;
    uint8_t *mrow = *mbuf + r * Lb;
    if (s->ragged) {
      convert(dst, want, (const char *)s->data + (size_t)(s->cu[i] * d) * es, s->dtype,
              s->len[i] * d);
      memset(mrow, 1, (size_t)s->len[i]);
    } else {
      convert(dst, want, (const char *)s->data + (size_t)(i * s->L * d) * es, s->dtype, s->L * d);
      if (s->mask)
        for (int64_t t = 0; t < s->L; t++) mrow[t] = s->mask[i * s->L + t] != 0;
      else
        memset(mrow, 1, (size_t)s->L);
    }
  }
  memset(x, 0, sizeof *x);
  memset(mask, 0, sizeof *mask);
  x->dtype = want;
  x->ndim = 3;
  x->device = LIK_CPU;
  x->data = nel ? *buf : NULL;
  x->shape[0] = nb;
  x->shape[1] = Lb;
  x->shape[2] = d;
  x->strides[0] = Lb * d;
  x->strides[1] = d;
  x->strides[2] = 1;
  mask->dtype = LIK_U8;
  mask->ndim = 2;
  mask->device = LIK_CPU;
  mask->data = (nb > 0 && Lb > 0) ? (void *)*mbuf : NULL;
  mask->shape[0] = nb;
  mask->shape[1] = Lb;
  mask->strides[0] = Lb;
  mask->strides[1] = 1;
  return 0;
}
