/*
 * npy.c — .npy headers: a bounded parser of the header dict (untrusted
 * bytes: every read is within the buffer, every size overflow-checked) and
 * a writer.
 */
#include "npy.h"

#include <stdio.h>
#include <string.h>

#include "errbuf.h"

size_t lik_npy_itemsize(lik_dtype t) {
  switch (t) {
    case LIK_F16: return 2;
    case LIK_F32: case LIK_I32: return 4;
    case LIK_F64: case LIK_I64: return 8;
    default: return 1;
  }
}

typedef struct {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static int eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return 1;
  }
  return 0;
}

/* A quoted string (' or "), no escapes (none occur in npy headers), into
 * out[cap]; 0 on failure. */
static int read_str(cursor *c, char *out, size_t cap) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
  const char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || n + 1 >= cap) return 0;
    out[n++] = *c->p++;
  }
  if (c->p >= c->end) return 0;
  c->p++;
  out[n] = 0;
  return 1;
}

static int read_word(cursor *c, const char *w) {
  skip_ws(c);
  const size_t n = strlen(w);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n)) return 0;
  c->p += n;
  return 1;
}

/* A non-negative decimal integer that fits int64 (a trailing L of Python 2
 * numpy files allowed). */
static int read_dim(cursor *c, int64_t *v) {
  skip_ws(c);
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
  int64_t x = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    const int d = *c->p++ - '0';
    if (x > (INT64_MAX - d) / 10) return 0;
    x = x * 10 + d;
  }
  if (c->p < c->end && *c->p == 'L') c->p++;
  *v = x;
  return 1;
}

static int parse_descr(const char *s, lik_dtype *t) {
  char bo = s[0];
  const char *k = s;
  if (bo == '<' || bo == '>' || bo == '|' || bo == '=') k = s + 1;
  else bo = '=';
  static const struct {
    const char *code;
    lik_dtype t;
  } codes[] = {{"f2", LIK_F16}, {"f4", LIK_F32}, {"f8", LIK_F64}, {"i4", LIK_I32},
               {"i8", LIK_I64}, {"u1", LIK_U8},  {"b1", LIK_U8}};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (!strcmp(k, codes[i].code)) {
      if (bo == '>' && lik_npy_itemsize(codes[i].t) > 1) return -1; /* big-endian */
      *t = codes[i].t;
      return 0;
    }
  return 1;
}

int lik_npy_parse(const uint8_t *buf, size_t n, size_t file_size, const char *what,
                  lik_npy *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (n > file_size) n = file_size;
  if (n < 10 || memcmp(buf, "\x93NUMPY", 6))
    return lik_errbuf(err, errlen, "%s: not a .npy file (no \\x93NUMPY magic; %zu bytes)", what,
                file_size);
  const int major = buf[6];
  size_t hlen, pre;
  if (major == 1) {
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    pre = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12) return lik_errbuf(err, errlen, "%s: truncated .npy prologue (%zu bytes)", what, n);
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    pre = 12;
  } else {
    return lik_errbuf(err, errlen, "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0)",
                what, major, buf[7]);
  }
  if (hlen > n - pre)
    return lik_errbuf(err, errlen, "%s: .npy header of %zu bytes runs past the %s (%zu bytes)", what,
                hlen, n < file_size ? "bytes read" : "file", n);
  cursor c = {(const char *)buf + pre, (const char *)buf + pre + hlen};
  int have_descr = 0, have_fo = 0, have_shape = 0, fortran = 0;
  char s[32];
  if (!eat(&c, '{')) return lik_errbuf(err, errlen, "%s: .npy header is not a dict", what);
  while (!eat(&c, '}')) {
    char key[32];
    if (!read_str(&c, key, sizeof key) || !eat(&c, ':'))
      return lik_errbuf(err, errlen, "%s: malformed .npy header dict", what);
    if (!strcmp(key, "descr")) {
      if (!read_str(&c, s, sizeof s))
        return lik_errbuf(err, errlen, "%s: .npy 'descr' is not a simple dtype string", what);
      const int r = parse_descr(s, &out->dtype);
      if (r < 0) return lik_errbuf(err, errlen, "%s: big-endian dtype '%s' is not supported", what, s);
      if (r > 0)
        return lik_errbuf(err, errlen,
                    "%s: dtype '%s' is not one an index holds (float16/32/64, int32/64, uint8)",
                    what, s);
      have_descr = 1;
    } else if (!strcmp(key, "fortran_order")) {
      if (read_word(&c, "True")) fortran = 1;
      else if (read_word(&c, "False")) fortran = 0;
      else return lik_errbuf(err, errlen, "%s: .npy 'fortran_order' is not True or False", what);
      have_fo = 1;
    } else if (!strcmp(key, "shape")) {
      if (!eat(&c, '(')) return lik_errbuf(err, errlen, "%s: .npy 'shape' is not a tuple", what);
      out->ndim = 0;
      while (!eat(&c, ')')) {
        if (out->ndim == LIK_NPY_MAX_DIMS)
          return lik_errbuf(err, errlen, "%s: more than %d dimensions", what, LIK_NPY_MAX_DIMS);
        if (!read_dim(&c, &out->shape[out->ndim]))
          return lik_errbuf(err, errlen, "%s: .npy shape entry %d is not a non-negative integer", what,
                      out->ndim);
        out->ndim++;
        if (!eat(&c, ',')) {
          if (!eat(&c, ')')) return lik_errbuf(err, errlen, "%s: malformed .npy shape tuple", what);
          break;
        }
      }
      have_shape = 1;
    } else {
      return lik_errbuf(err, errlen, "%s: unknown .npy header key '%s'", what, key);
    }
    if (!eat(&c, ',')) {
      if (!eat(&c, '}')) return lik_errbuf(err, errlen, "%s: malformed .npy header dict", what);
      break;
    }
  }
  if (!have_descr || !have_fo || !have_shape)
    return lik_errbuf(err, errlen, "%s: .npy header lacks '%s'", what,
                !have_descr ? "descr" : !have_fo ? "fortran_order" : "shape");
  int big = 0;
  for (int i = 0; i < out->ndim; i++) big += out->shape[i] > 1;
  if (fortran && big > 1)
    return lik_errbuf(err, errlen, "%s: Fortran-order arrays are not supported", what);
  int64_t numel = 1;
  for (int i = 0; i < out->ndim; i++)
    if (__builtin_mul_overflow(numel, out->shape[i], &numel))
      return lik_errbuf(err, errlen, "%s: shape overflows int64", what);
  out->numel = numel;
  size_t bytes = 0;
  if (numel > 0 && (__builtin_mul_overflow((size_t)numel, lik_npy_itemsize(out->dtype), &bytes)))
    return lik_errbuf(err, errlen, "%s: %lld elements overflow the address space", what,
                (long long)numel);
  if (numel == 0) bytes = 0;
  out->data_offset = pre + hlen;
  out->data_bytes = bytes;
  /* the data is read in place (mapped): every writer pads the header so the
   * elements are aligned; a file that does not is refused, never misread */
  if (out->data_offset % lik_npy_itemsize(out->dtype))
    return lik_errbuf(err, errlen,
                "%s: .npy data starts at byte %zu, not a multiple of its %zu-byte elements", what,
                out->data_offset, lik_npy_itemsize(out->dtype));
  if (bytes > file_size - out->data_offset)
    return lik_errbuf(err, errlen,
                "%s: header says %lld elements (%zu bytes) but the file holds %zu data bytes",
                what, (long long)numel, bytes, file_size - out->data_offset);
  return 0;
}

static const char *descr_of(lik_dtype t) {
  switch (t) {
    case LIK_F16: return "<f2";
    case LIK_F32: return "<f4";
    case LIK_F64: return "<f8";
    case LIK_I32: return "<i4";
    case LIK_I64: return "<i8";
    default: return "|u1";
  }
}

size_t lik_npy_header(lik_dtype dtype, int ndim, const int64_t *shape, size_t total_len,
                      char *out, size_t cap) {
  char dict[256];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   descr_of(dtype));
  for (int i = 0; i < ndim; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, i + 1 < ndim ? "%lld, " : "%lld",
                  (long long)shape[i]);
  n += snprintf(dict + n, sizeof dict - (size_t)n, ndim == 1 ? ",), }" : "), }");
  if (n <= 0 || (size_t)n >= sizeof dict) return 0;
  size_t need = 10 + (size_t)n + 1;
  size_t total = total_len ? total_len : (need + 63) / 64 * 64;
  if (total < need || total > cap || total - 10 > 65535) return 0;
  memcpy(out, "\x93NUMPY\x01\x00", 8);
  out[8] = (char)((total - 10) & 0xff);
  out[9] = (char)((total - 10) >> 8);
  memcpy(out + 10, dict, (size_t)n);
  memset(out + 10 + n, ' ', total - need);
  out[total - 1] = '\n';
  return total;
}
