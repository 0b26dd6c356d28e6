/* eval.c — qrels reading, nDCG and recall (see eval.h). */
#define _POSIX_C_SOURCE 200809L
#include "eval.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checked.h" /* src/core: overflow-checked sizes */
#include "emb_io.h"  /* ERR_LEN, open_regular, calloc_n */

/* Opens a text file for reading: a regular file only (open_regular: a
 * folder or a FIFO is refused, never waited on).  NULL with a message in err
 * on failure. */
static FILE *open_text(const char *path, const char *what, char *err) {
  const int fd = open_regular(path, what, err);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "r");
  if (!f) {
    snprintf(err, ERR_LEN, "%s: cannot open %s: %s", path, what, strerror(errno));
    close(fd);
  }
  return f;
}

static int cmp_qrel(const void *a, const void *b) {
  const qrel *x = a, *y = b;
  if (x->q != y->q) return x->q < y->q ? -1 : 1;
  if (x->d != y->d) return x->d < y->d ? -1 : 1;
  return 0;
}

/* Sorts by (query, doc) and keeps one entry per pair: a pair given twice
 * counts once; given with two different gains it is an error. */
static int sort_unique(qrels *r, const char *path, char *err) {
  if (r->n) qsort(r->v, (size_t)r->n, sizeof *r->v, cmp_qrel);
  int64_t w = 0;
  for (int64_t i = 0; i < r->n; i++) {
    const qrel *a = &r->v[i], *b = w ? &r->v[w - 1] : NULL;
    if (!b || a->q != b->q || a->d != b->d) {
      r->v[w++] = *a;
    } else if (a->gain != b->gain) {
      snprintf(err, ERR_LEN, "%s: query %lld, document %lld is judged twice, with gains %lld "
               "and %lld", path, (long long)a->q, (long long)a->d, (long long)b->gain,
               (long long)a->gain);
      qrels_free(r);
      return 1;
    }
  }
  r->n = w;
  return 0;
}

/* One line of a judgments / candidates file: 0 with a record in *out, -1 for
 * a line without one (blank, comment), 1 on an error (err set). */
typedef int (*line_fn)(char *line, const char *path, long lineno, qrel *out, char *err);

/* Reads the records of the text file at path (`what` names it in errors)
 * into r, sorted and de-duplicated. */
static int load_lines(qrels *r, const char *path, const char *what, line_fn parse, char *err) {
  r->v = NULL;
  r->n = 0;
  FILE *f = open_text(path, what, err);
  if (!f) return 1;
  size_t cap = 0;
  char line[1024];
  long lineno = 0;
  while (fgets(line, sizeof line, f)) {
    qrel rec;
    const int got = parse(line, path, ++lineno, &rec, err);
    if (got < 0) continue;
    if (got > 0) goto bad;
    if ((size_t)r->n == cap) {
      cap = cap ? 2 * cap : 1024;
      size_t bytes;
      qrel *v = lik_bytes((int64_t)cap, sizeof *v, &bytes) ? NULL : realloc(r->v, bytes);
      if (!v) {
        snprintf(err, ERR_LEN, "out of memory reading %s", path);
        goto bad;
      }
      r->v = v;
    }
    r->v[r->n++] = rec;
  }
  fclose(f);
  return sort_unique(r, path, err);
bad:
  fclose(f);
  qrels_free(r);
  return 1;
}

/* 'query doc gain' or 'query iter doc gain' (a negative gain counts as 0). */
static int qrels_line(char *line, const char *path, long lineno, qrel *out, char *err) {
  char *p = line;
  while (*p == ' ' || *p == '\t') p++;
  if (*p == '#' || *p == '\n' || *p == '\r' || *p == 0) return -1;
  long long c[4];
  int k = 0;
  char *e;
  while (k < 4) {
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '\n' || *p == '\r' || *p == 0) break;
    errno = 0;
    c[k] = strtoll(p, &e, 10);
    if (e == p || errno || (*e && *e != ' ' && *e != '\t' && *e != '\n' && *e != '\r')) {
      snprintf(err, ERR_LEN, "%s:%ld: not an integer column in a qrels line", path, lineno);
      return 1;
    }
    p = e;
    k++;
  }
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
  if ((k != 3 && k != 4) || *p) {
    snprintf(err, ERR_LEN, "%s:%ld: expected 'query doc gain' or 'query iter doc gain'", path,
             lineno);
    return 1;
  }
  out->q = c[0];
  out->d = k == 3 ? c[1] : c[2];
  out->gain = k == 3 ? c[2] : c[3];
  if (out->gain < 0) out->gain = 0;
  return 0;
}

int qrels_load(qrels *r, const char *path, char *err) {
  return load_lines(r, path, "qrels", qrels_line, err);
}

void qrels_free(qrels *r) {
  free(r->v);
  r->v = NULL;
  r->n = 0;
}

static int cmp_gain_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

int eval_query(const qrels *r, int64_t q, const int64_t *ranked, int64_t n, int ndcg_k,
               int recall_k, double *ndcg, double *recall) {
  /* The judgments of q: [lo, hi). */
  int64_t lo = 0, hi = r->n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (r->v[mid].q < q) lo = mid + 1; else hi = mid;
  }
  int64_t b = lo;
  hi = lo;
  while (hi < r->n && r->v[hi].q == q) hi++;
  int64_t nrel = 0;
  for (int64_t i = b; i < hi; i++) nrel += r->v[i].gain > 0;
  if (nrel == 0) return 0;

  int64_t *g = calloc_n(hi - b, 1, sizeof(int64_t));
  if (!g) return 0;
  for (int64_t i = b; i < hi; i++) g[i - b] = r->v[i].gain;
  qsort(g, (size_t)(hi - b), sizeof *g, cmp_gain_desc);
  double idcg = 0, dcg = 0;
  for (int64_t i = 0; i < hi - b && i < ndcg_k; i++) idcg += (double)g[i] / log2((double)i + 2);
  free(g);

  int64_t found = 0;
  for (int64_t rnk = 0; rnk < n; rnk++) {
    /* gain of ranked[rnk] */
    int64_t l2 = b, h2 = hi, gain = 0;
    while (l2 < h2) {
      int64_t mid = l2 + (h2 - l2) / 2;
      if (r->v[mid].d < ranked[rnk]) l2 = mid + 1; else h2 = mid;
    }
    if (l2 < hi && r->v[l2].d == ranked[rnk]) gain = r->v[l2].gain;
    if (rnk < ndcg_k) dcg += (double)gain / log2((double)rnk + 2);
    if (rnk < recall_k && gain > 0) found++;
  }
  *ndcg = idcg > 0 ? dcg / idcg : 0;
  *recall = (double)found / (double)nrel;
  return 1;
}

/* 'query doc' or a TREC run line 'query Q0 doc rank score tag' (gain 0). */
static int pairs_line(char *line, const char *path, long lineno, qrel *out, char *err) {
  char *tok[8], *save = NULL;
  int k = 0;
  for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
    if (k < 8) tok[k++] = t; else k++;
  if (k == 0 || tok[0][0] == '#') return -1;
  if (k != 2 && k != 6) {
    snprintf(err, ERR_LEN, "%s:%ld: expected 'query doc' or a TREC run line "
             "'query Q0 doc rank score tag'", path, lineno);
    return 1;
  }
  char *e1, *e2;
  errno = 0;
  long long q = strtoll(tok[0], &e1, 10);
  long long d = strtoll(tok[k == 2 ? 1 : 2], &e2, 10);
  if (errno || *e1 || *e2) {
    snprintf(err, ERR_LEN, "%s:%ld: query and document ids must be integers", path, lineno);
    return 1;
  }
  out->q = q;
  out->d = d;
  out->gain = 0;
  return 0;
}

int pairs_load(qrels *r, const char *path, char *err) {
  return load_lines(r, path, "candidates", pairs_line, err);
}

int64_t qrels_range(const qrels *r, int64_t q, int64_t *begin) {
  int64_t lo = 0, hi = r->n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (r->v[mid].q < q) lo = mid + 1; else hi = mid;
  }
  *begin = lo;
  while (hi < r->n && r->v[hi].q == q) hi++;
  return hi - lo;
}
