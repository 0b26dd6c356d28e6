/*
 * json.c — a bounded JSON reader for the index folder's small files (see
 * json.h).  Grammar of RFC 8259; strings are checked for escapes but their
 * text is kept only for keys; numbers are parsed with strtod on a bounded
 * copy.
 */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *p, *end;
  const char *what;
  char *err;
  size_t errlen;
} jcur;

static int jfail(jcur *c, const char *fmt, ...) {
  if (c->err && c->errlen) {
    int n = snprintf(c->err, c->errlen, "%s: ", c->what);
    if (n < 0 || (size_t)n >= c->errlen) n = 0;
    va_list a;
    va_start(a, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, a);
    va_end(a);
  }
  return 1;
}

static size_t pos(const jcur *c, const char *base) { return (size_t)(c->p - base); }

static void ws(jcur *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

/* A string; its text (without escapes decoded beyond \" and \\) into
 * out[cap] when out is set.  0 on success. */
static int jstring(jcur *c, char *out, size_t cap) {
  if (c->p >= c->end || *c->p != '"') return jfail(c, "expected a string");
  c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != '"') {
    char ch = *c->p++;
    if ((unsigned char)ch < 0x20) return jfail(c, "control character in a string");
    if (ch == '\\') {
      if (c->p >= c->end) break;
      ch = *c->p++;
      if (ch == 'u') {
        for (int i = 0; i < 4; i++, c->p++)
          if (c->p >= c->end || !strchr("0123456789abcdefABCDEF", *c->p) || !*c->p)
            return jfail(c, "bad \\u escape");
        ch = '?';
      } else if (!strchr("\"\\/bfnrt", ch) || !ch) {
        return jfail(c, "bad escape in a string");
      }
    }
    if (out) {
      if (n + 1 >= cap) return jfail(c, "string too long (more than %zu bytes)", cap - 1);
      out[n++] = ch;
    }
  }
  if (c->p >= c->end) return jfail(c, "unterminated string");
  c->p++;
  if (out) out[n] = 0;
  return 0;
}

/* A number: *d its value, *is_int / *iv when it is an integer fitting int64. */
static int jnumber(jcur *c, double *d, int *is_int, int64_t *iv) {
  const char *s = c->p;
  if (c->p < c->end && *c->p == '-') c->p++;
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return jfail(c, "expected a value");
  if (*c->p == '0') c->p++;
  else
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
  int integer = 1;
  if (c->p < c->end && *c->p == '.') {
    integer = 0;
    c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return jfail(c, "malformed number");
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
  }
  if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
    integer = 0;
    c->p++;
    if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return jfail(c, "malformed number");
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
  }
  const size_t len = (size_t)(c->p - s);
  if (len > 63) return jfail(c, "number longer than 63 characters");
  char buf[64];
  memcpy(buf, s, len);
  buf[len] = 0;
  *d = strtod(buf, NULL);
  *is_int = 0;
  if (integer) {
    /* exact int64 parse */
    const char *q = buf;
    const int neg = *q == '-';
    if (neg) q++;
    uint64_t v = 0;
    int ok = 1;
    for (; *q; q++) {
      const unsigned dig = (unsigned)(*q - '0');
      if (v > (UINT64_MAX - dig) / 10) {
        ok = 0;
        break;
      }
      v = v * 10 + dig;
    }
    if (ok && (neg ? v <= (uint64_t)INT64_MAX + 1 : v <= (uint64_t)INT64_MAX)) {
      *iv = neg ? (int64_t)(0 - v) : (int64_t)v;
      *is_int = 1;
    }
  }
  return 0;
}

static int jword(jcur *c, const char *w) {
  const size_t n = strlen(w);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n)) return 0;
  c->p += n;
  return 1;
}

/* Skips white space, then ch if it comes next (1) or nothing (0). */
static int jtake(jcur *c, char ch) {
  ws(c);
  if (c->p >= c->end || *c->p != ch) return 0;
  c->p++;
  return 1;
}

/* Skips any value (nesting bounded). */
static int jskip(jcur *c, int depth) {
  ws(c);
  if (c->p >= c->end) return jfail(c, "unexpected end of input");
  if (depth > 32) return jfail(c, "nesting deeper than 32");
  if (*c->p == '"') return jstring(c, NULL, 0);
  if (*c->p == '{' || *c->p == '[') {
    const char close = *c->p == '{' ? '}' : ']';
    const int obj = *c->p == '{';
    c->p++;
    if (jtake(c, close)) return 0;
    for (;;) {
      ws(c);
      if (obj) {
        if (jstring(c, NULL, 0)) return 1;
        if (!jtake(c, ':')) return jfail(c, "expected ':'");
      }
      if (jskip(c, depth + 1)) return 1;
      if (jtake(c, ',')) continue;
      if (jtake(c, close)) return 0;
      return jfail(c, "expected ',' or '%c'", close);
    }
  }
  if (jword(c, "true") || jword(c, "false") || jword(c, "null")) return 0;
  double d;
  int ii;
  int64_t iv;
  return jnumber(c, &d, &ii, &iv);
}

static int jend(jcur *c) {
  ws(c);
  return c->p == c->end ? 0 : jfail(c, "trailing characters after the JSON value");
}

int lik_json_parse_object(const char *s, size_t n, const char *what, lik_json_object *o,
                          char *err, size_t errlen) {
  jcur c = {s, s + n, what, err, errlen};
  memset(o, 0, sizeof *o);
  ws(&c);
  if (c.p >= c.end || *c.p != '{') return jfail(&c, "not a JSON object");
  c.p++;
  if (jtake(&c, '}')) return jend(&c);
  for (;;) {
    ws(&c);
    lik_json_member m;
    memset(&m, 0, sizeof m);
    if (jstring(&c, m.key, sizeof m.key)) return 1;
    if (!jtake(&c, ':')) return jfail(&c, "expected ':' after \"%s\"", m.key);
    ws(&c);
    if (c.p >= c.end) return jfail(&c, "unexpected end of input");
    if (*c.p == '"') {
      if (jstring(&c, NULL, 0)) return 1;
      m.type = LIK_JSON_STRING;
    } else if (*c.p == '{' || *c.p == '[') {
      if (jskip(&c, 1)) return 1;
      m.type = LIK_JSON_OTHER;
    } else if (jword(&c, "true")) {
      m.type = LIK_JSON_BOOL;
      m.boolean = 1;
    } else if (jword(&c, "false")) {
      m.type = LIK_JSON_BOOL;
    } else if (jword(&c, "null")) {
      m.type = LIK_JSON_NULL;
    } else {
      if (jnumber(&c, &m.num, &m.is_int, &m.i)) return 1;
      m.type = LIK_JSON_NUMBER;
    }
    if (o->n < LIK_JSON_MAX_MEMBERS) o->m[o->n++] = m;
    if (jtake(&c, ',')) continue;
    if (jtake(&c, '}')) return jend(&c);
    return jfail(&c, "expected ',' or '}' at byte %zu", pos(&c, s));
  }
}

const lik_json_member *lik_json_get(const lik_json_object *o, const char *key) {
  for (int i = o->n - 1; i >= 0; i--) /* the last duplicate wins, as in Python */
    if (!strcmp(o->m[i].key, key)) return &o->m[i];
  return NULL;
}

int lik_json_get_int(const lik_json_object *o, const char *key, int64_t lo, int64_t hi,
                     int64_t *v, const char *what, char *err, size_t errlen) {
  const lik_json_member *m = lik_json_get(o, key);
  if (!m) return 0;
  if (m->type != LIK_JSON_NUMBER || !m->is_int || m->i < lo || m->i > hi) {
    snprintf(err, errlen, "%s: \"%s\" must be an integer in [%lld, %lld]", what, key,
             (long long)lo, (long long)hi);
    return -1;
  }
  *v = m->i;
  return 1;
}

int lik_json_parse_int_array(const char *s, size_t n, int64_t hi, const char *what,
                             int64_t **out, int64_t *count, char *err, size_t errlen) {
  jcur c = {s, s + n, what, err, errlen};
  *out = NULL;
  *count = 0;
  ws(&c);
  if (c.p >= c.end || *c.p != '[') return jfail(&c, "not a JSON array");
  c.p++;
  /* every entry needs at least 2 bytes ("0,"): a bound before allocating */
  const size_t cap = n / 2 + 1;
  int64_t *v = (int64_t *)malloc(cap * sizeof(int64_t));
  if (!v) return jfail(&c, "cannot allocate %zu bytes", cap * sizeof(int64_t));
  size_t k = 0;
  if (!jtake(&c, ']')) {
    for (;;) {
      ws(&c);
      double d;
      int is_int;
      int64_t iv;
      if (jnumber(&c, &d, &is_int, &iv)) goto bad;
      if (!is_int && !(d == floor(d) && d >= 0 && d <= (double)hi)) {
        jfail(&c, "entry %zu is not an integer", k);
        goto bad;
      }
      if (!is_int) iv = (int64_t)d;
      if (iv < 0 || iv > hi) {
        jfail(&c, "entry %zu = %lld is outside [0, %lld]", k, (long long)iv, (long long)hi);
        goto bad;
      }
      if (k == cap) {
        jfail(&c, "too many entries");
        goto bad;
      }
      v[k++] = iv;
      if (jtake(&c, ',')) continue;
      if (jtake(&c, ']')) break;
      jfail(&c, "expected ',' or ']' after entry %zu", k - 1);
      goto bad;
    }
  }
  if (jend(&c)) goto bad;
  if (k == 0) {
    free(v);
    v = NULL;
  }
  *out = v;
  *count = (int64_t)k;
  return 0;
bad:
  free(v);
  return 1;
}
