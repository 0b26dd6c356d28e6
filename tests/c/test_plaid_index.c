/*
 * test_plaid_index.c — the PLAID index (lik_plaid_index_*, lik_experimental.h)
 * through the public API: build / save / load round trips (bitwise), thread
 * invariance, add in parts == add at once, search semantics against the
 * residual scorer (the degenerate parameters make search exact), subsets,
 * ties, short results, argument errors, missing / corrupt / inconsistent
 * files (a clear error, never a crash: a byte-flip loop runs under ASan in
 * scripts/sanitize.sh).  Random sizes from a fresh seed (LIK_TEST_SEED
 * reproduces a run).
 */
#include "lik_test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lik_experimental.h"

/* ---- files -------------------------------------------------------------------------- */

static char g_tmp[256];

static void path_of(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
}

static void copy_dir(const char *src, const char *dst) {
  rm_tree(dst);
  mkdir(dst, 0777);
  DIR *d = opendir(src);
  struct dirent *e;
  char p[1024], q[1024];
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') {
      path_of(p, sizeof p, src, e->d_name);
      path_of(q, sizeof q, dst, e->d_name);
      size_t n;
      uint8_t *b = read_all(p, &n);
      if (b) write_all(q, b, n);
      free(b);
    }
  if (d) closedir(d);
}

/* 1 when the two folders hold the same files with the same bytes. */
static int same_dir(const char *a, const char *b) {
  DIR *d = opendir(a);
  struct dirent *e;
  int same = d != NULL, na = 0, nb = 0;
  char p[1024], q[1024];
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') {
      na++;
      path_of(p, sizeof p, a, e->d_name);
      path_of(q, sizeof q, b, e->d_name);
      size_t n1 = 0, n2 = 0;
      uint8_t *x = read_all(p, &n1), *y = read_all(q, &n2);
      if (!x || !y || n1 != n2 || memcmp(x, y, n1)) {
        if (same) printf("    differs: %s\n", e->d_name);
        same = 0;
      }
      free(x);
      free(y);
    }
  if (d) closedir(d);
  d = opendir(b);
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') nb++;
  if (d) closedir(d);
  return same && na == nb;
}

/* The data of a .npy file written by lik (C order, little-endian). */
static void *npy_data(const char *dir, const char *name, size_t *bytes, uint8_t **whole) {
  char p[1024];
  path_of(p, sizeof p, dir, name);
  size_t n = 0;
  uint8_t *b = read_all(p, &n);
  *whole = b;
  if (!b || n < 10) return NULL;
  const size_t off = 10 + (size_t)(b[8] | b[9] << 8);
  *bytes = n - off;
  return b + off;
}

/* ---- a corpus ------------------------------------------------------------------------- */

typedef struct {
  int64_t n, d, T;
  float *x;    /* [T][d], unit rows (some repeated documents for ties) */
  int64_t *cu; /* [n + 1] */
} corpus;

/* n documents of 0..maxlen tokens around `nclusters` random directions. */
static corpus make_corpus(int64_t n, int64_t d, int64_t maxlen, int nclusters) {
  corpus c;
  c.n = n;
  c.d = d;
  c.cu = malloc((size_t)(n + 1) * sizeof(int64_t));
  c.cu[0] = 0;
  for (int64_t j = 0; j < n; j++) c.cu[j + 1] = c.cu[j] + (rng_chance(0.05) ? 0 : rng_int(1, maxlen));
  c.T = c.cu[n];
  c.x = malloc((size_t)(c.T * d + 1) * sizeof(float));
  float *dirs = malloc((size_t)(nclusters * d) * sizeof(float));
  for (int64_t i = 0; i < nclusters * d; i++) dirs[i] = (float)rng_range(-1, 1);
  for (int64_t t = 0; t < c.T; t++) {
    const float *u = dirs + rng_int(0, nclusters - 1) * d;
    double ss = 0;
    for (int64_t k = 0; k < d; k++) {
      c.x[t * d + k] = u[k] + (float)rng_range(-0.35, 0.35);
      ss += (double)c.x[t * d + k] * c.x[t * d + k];
    }
    for (int64_t k = 0; k < d; k++) c.x[t * d + k] = (float)(c.x[t * d + k] / sqrt(ss));
  }
  /* a few documents repeat an earlier one of the same length (exact ties) */
  for (int64_t j = 1; j < n; j++)
    if (rng_chance(0.08)) {
      const int64_t i = rng_int(0, j - 1);
      if (c.cu[i + 1] - c.cu[i] == c.cu[j + 1] - c.cu[j])
        memcpy(c.x + c.cu[j] * d, c.x + c.cu[i] * d, (size_t)((c.cu[j + 1] - c.cu[j]) * d) * sizeof(float));
    }
  free(dirs);
  return c;
}

static void corpus_free(corpus *c) {
  free(c->x);
  free(c->cu);
}

static lik_tensor t2(void *p, lik_dtype dt, int64_t a, int64_t b) {
  lik_tensor t = {p, dt, 2, {a, b}, {b, 1}, LIK_CPU, 0};
  return t;
}
static lik_tensor t1(void *p, lik_dtype dt, int64_t a) {
  lik_tensor t = {p, dt, 1, {a}, {1}, LIK_CPU, 0};
  return t;
}
static lik_tensor t3(void *p, lik_dtype dt, int64_t a, int64_t b, int64_t c) {
  lik_tensor t = {p, dt, 3, {a, b, c}, {b * c, c, 1}, LIK_CPU, 0};
  return t;
}

/* An index of c (K 0: the default rule). */
static lik_plaid_index *build_k(const corpus *c, int nbits, int threads, int64_t chunk, int64_t K) {
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  o.nbits = nbits;
  o.num_threads = threads;
  o.seed = g_seed;
  o.chunk_docs = chunk;
  o.num_centroids = K;
  lik_tensor X = t2(c->x, LIK_F32, c->T, c->d), cu = t1(c->cu, LIK_I64, c->n + 1);
  lik_plaid_index *ix = NULL;
  lik_status st = lik_plaid_index_build(&X, &cu, &o, &ix);
  CHECK(st == LIK_OK && ix, "build: %s: %s", lik_status_string(st), lik_last_error());
  return ix;
}

static lik_plaid_index *build(const corpus *c, int nbits, int threads, int64_t chunk) {
  return build_k(c, nbits, threads, chunk, 0);
}

typedef struct {
  int64_t nq, lq, k;
  float *q;          /* [nq][lq][d] */
  int64_t *qlen;     /* [nq] */
  float *s;          /* [nq][k] */
  int64_t *i;
} queries;

static queries make_queries(const corpus *c, int64_t nq, int64_t lq, int64_t k) {
  queries q;
  q.nq = nq;
  q.lq = lq;
  q.k = k;
  q.q = malloc((size_t)(nq * lq * c->d) * sizeof(float));
  q.qlen = malloc((size_t)nq * sizeof(int64_t));
  q.s = malloc((size_t)(nq * k) * sizeof(float));
  q.i = malloc((size_t)(nq * k) * sizeof(int64_t));
  for (int64_t i = 0; i < nq; i++) {
    q.qlen[i] = rng_int(i == 0 ? 0 : 1, lq);
    for (int64_t s = 0; s < lq * c->d; s++) /* a corpus token plus noise */
      q.q[i * lq * c->d + s] = (float)rng_range(-0.3, 0.3);
    for (int64_t s = 0; s < lq && c->T; s++) {
      const int64_t t = rng_int(0, c->T - 1);
      for (int64_t k2 = 0; k2 < c->d; k2++) q.q[(i * lq + s) * c->d + k2] += c->x[t * c->d + k2];
    }
  }
  return q;
}

static void queries_free(queries *q) {
  free(q->q);
  free(q->qlen);
  free(q->s);
  free(q->i);
}

static lik_status search(const lik_plaid_index *ix, queries *q, int64_t d, const lik_plaid_search_params *p,
                         const lik_tensor *subset, const lik_tensor *subset_cu) {
  lik_tensor Q = t3(q->q, LIK_F32, q->nq, q->lq, d), ql = t1(q->qlen, LIK_I64, q->nq);
  lik_tensor S = t2(q->s, LIK_F32, q->nq, q->k), I = t2(q->i, LIK_I64, q->nq, q->k);
  lik_plaid_search_params pk = *p;
  pk.top_k = q->k;
  return lik_plaid_index_search(ix, &Q, &ql, subset, subset_cu, &pk, &S, &I);
}

/* ---- groups ------------------------------------------------------------------------------ */

static const int64_t DIMS[] = {8, 16, 24, 32, 40, 64};

static int pick_nbits(int64_t d) {
  static const int nb[] = {1, 2, 4, 8};
  for (;;) {
    const int b = RNG_PICK(nb);
    if ((d * b) % 8 == 0) return b;
  }
}

static void group_roundtrip(void) {
  group_begin("roundtrip");
  for (int rep = 0; rep < 4; rep++) {
    const int64_t d = RNG_PICK(DIMS), n = rng_int(20, 260);
    const int nbits = pick_nbits(d);
    case_begin("n=%lld d=%lld nbits=%d", (long long)n, (long long)d, nbits);
    corpus c = make_corpus(n, d, 23, (int)rng_int(3, 12));
    lik_plaid_index *ix = build(&c, nbits, (int)rng_int(1, 3), rng_int(7, 300));
    if (!ix) {
      corpus_free(&c);
      continue;
    }
    lik_plaid_index_info info;
    CHECK(lik_plaid_index_get_info(ix, &info) == LIK_OK && info.num_docs == n &&
              info.num_tokens == c.T && info.dim == d && info.nbits == nbits && info.has_ivf,
          "info: docs %lld tokens %lld", (long long)info.num_docs, (long long)info.num_tokens);
    queries q = make_queries(&c, rng_int(1, 9), rng_int(1, 40), rng_int(1, 15));
    lik_plaid_search_params p = {0};
    p.n_ivf_probe = rng_int(1, 6);
    p.n_full_scores = rng_int(4, 200);
    p.num_threads = (int)rng_int(1, 3);
    lik_status st = search(ix, &q, d, &p, NULL, NULL);
    CHECK(st == LIK_OK, "search: %s", lik_last_error());
    float *s0 = malloc((size_t)(q.nq * q.k) * sizeof(float));
    int64_t *i0 = malloc((size_t)(q.nq * q.k) * sizeof(int64_t));
    memcpy(s0, q.s, (size_t)(q.nq * q.k) * sizeof(float));
    memcpy(i0, q.i, (size_t)(q.nq * q.k) * sizeof(int64_t));
    CHECK(q.qlen[0] || (q.i[0] == -1 && isinf(q.s[0])), "an empty query (length 0) has no results");
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/a", g_tmp);
    snprintf(b, sizeof b, "%s/b", g_tmp);
    rm_tree(a);
    rm_tree(b);
    st = lik_plaid_index_save(ix, a, NULL);
    CHECK(st == LIK_OK, "save: %s", lik_last_error());
    lik_plaid_index *lx = NULL;
    st = lik_plaid_index_load(a, LIK_PLAID_LOAD_VERIFY, &lx);
    CHECK(st == LIK_OK && lx, "load: %s", lik_last_error());
    if (lx) {
      p.num_threads = (int)rng_int(1, 3);
      CHECK(search(lx, &q, d, &p, NULL, NULL) == LIK_OK, "search loaded: %s", lik_last_error());
      CHECK(!memcmp(s0, q.s, (size_t)(q.nq * q.k) * sizeof(float)) &&
                !memcmp(i0, q.i, (size_t)(q.nq * q.k) * sizeof(int64_t)),
            "loaded index searches differently");
      CHECK(lik_plaid_index_save(lx, b, NULL) == LIK_OK, "save loaded: %s", lik_last_error());
      CHECK(same_dir(a, b), "save(load(save(x))) differs from save(x)");
      /* saved over its own folder (mapped files replaced by rename) */
      CHECK(lik_plaid_index_save(lx, a, NULL) == LIK_OK, "save over itself: %s", lik_last_error());
      CHECK(search(lx, &q, d, &p, NULL, NULL) == LIK_OK &&
                !memcmp(i0, q.i, (size_t)(q.nq * q.k) * sizeof(int64_t)),
            "search after saving over the mapped folder");
      CHECK(same_dir(a, b), "saving over its own folder changed the files");
      lik_plaid_index_free(lx);
    }
    /* the same build with other thread counts writes the same files */
    lik_plaid_index *ix2 = NULL;
    lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
    o.nbits = nbits;
    o.seed = g_seed;
    o.num_threads = (int)rng_int(1, 4);
    lik_tensor X = t2(c.x, LIK_F32, c.T, c.d), cu = t1(c.cu, LIK_I64, c.n + 1);
    lik_plaid_index_info i1;
    lik_plaid_index_get_info(ix, &i1);
    o.chunk_docs = 1000000;
    CHECK(lik_plaid_index_build(&X, &cu, &o, &ix2) == LIK_OK, "rebuild: %s", lik_last_error());
    if (ix2) {
      lik_plaid_index *ix3 = NULL;
      o.num_threads = 1;
      CHECK(lik_plaid_index_build(&X, &cu, &o, &ix3) == LIK_OK, "rebuild: %s", lik_last_error());
      rm_tree(a);
      rm_tree(b);
      lik_plaid_index_save(ix2, a, NULL);
      lik_plaid_index_save(ix3, b, NULL);
      CHECK(same_dir(a, b), "the build depends on the thread count");
      lik_plaid_index_free(ix3);
      lik_plaid_index_free(ix2);
    }
    free(s0);
    free(i0);
    queries_free(&q);
    lik_plaid_index_free(ix);
    corpus_free(&c);
  }
  group_end();
}

static const int64_t *g_cu; /* the corpus of group_exact */

/* Sorted (score desc, id asc) top-k of scores[n] over ids allowed (NULL: all),
 * documents with tokens only (an empty document is never a candidate). */
static int64_t exact_topk(const float *sc, int64_t n, const uint8_t *allowed, int64_t k,
                          int64_t *out) {
  int64_t m = 0;
  for (int64_t r = 0; r < k; r++) {
    int64_t best = -1;
    for (int64_t j = 0; j < n; j++) {
      if (allowed && !allowed[j]) continue;
      if (g_cu && g_cu[j + 1] == g_cu[j]) continue; /* no tokens: in no IVF list */
      int used = 0;
      for (int64_t u = 0; u < r && !used; u++) used = out[u] == j;
      if (used) continue;
      if (best < 0 || sc[j] > sc[best]) best = j;
    }
    if (best < 0) break;
    out[m++] = best;
  }
  return m;
}

/* full [nq][n]: the residual MaxSim scores (normalize on) of the queries
 * against every document of ix, from its files saved into dir (g_cu = the
 * corpus's offsets). */
static void reference_scores(lik_plaid_index *ix, const char *dir, const corpus *c, int nbits,
                             const queries *q, float *full) {
  const int64_t n = c->n, d = c->d;
  g_cu = c->cu;
  rm_tree(dir);
  CHECK(lik_plaid_index_save(ix, dir, NULL) == LIK_OK, "save: %s", lik_last_error());
  size_t nc, nr, nw, ncen;
  uint8_t *f1, *f2, *f3, *f4;
  int64_t *codes = npy_data(dir, "merged_codes.npy", &nc, &f1);
  uint8_t *res = npy_data(dir, "merged_residuals.npy", &nr, &f2);
  float *w = npy_data(dir, "bucket_weights.npy", &nw, &f3);
  uint16_t *cent = npy_data(dir, "centroids.npy", &ncen, &f4);
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  lik_tensor ct = t2(cent, LIK_F16, info.num_centroids, d), wt = t1(w, LIK_F32, 1 << nbits);
  lik_codec codec = {&ct, NULL, &wt, nbits, LIK_RESIDUAL_COLBERT};
  lik_tensor codes_t = t1(codes, LIK_I64, c->T), res_t = t2(res, LIK_U8, c->T, d * nbits / 8),
             cu_t = t1(c->cu, LIK_I64, n + 1);
  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = 1;
  for (int64_t i = 0; i < q->nq; i++) {
    lik_tensor Qi = t2(q->q + i * q->lq * d, LIK_F32, q->qlen[i], d), si = t1(full + i * n, LIK_F32, n);
    CHECK(lik_maxsim_residual_varlen(&Qi, &codec, &codes_t, &res_t, &cu_t, &opts, &si, NULL) == LIK_OK,
          "reference: %s", lik_last_error());
  }
  free(f1);
  free(f2);
  free(f3);
  free(f4);
}

/* The search results in q are the exact top-k of full [nq][n]. */
static void check_exact(const queries *q, const float *full, int64_t n) {
  int64_t *want = malloc((size_t)(q->k + n) * sizeof(int64_t));
  for (int64_t i = 0; i < q->nq; i++) {
    const int64_t m = q->qlen[i] ? exact_topk(full + i * n, n, NULL, q->k, want) : 0;
    for (int64_t r = 0; r < q->k; r++) {
      const int64_t id = q->i[i * q->k + r];
      if (r < m)
        CHECK(id == want[r] && q->s[i * q->k + r] == full[i * n + want[r]],
              "query %lld rank %lld: id %lld score %.9g, expected id %lld score %.9g", (long long)i,
              (long long)r, (long long)id, q->s[i * q->k + r], (long long)want[r], full[i * n + want[r]]);
      else
        CHECK(id == -1 && q->s[i * q->k + r] == -INFINITY, "query %lld rank %lld: expected no result",
              (long long)i, (long long)r);
    }
  }
  free(want);
}

static void group_exact(void) {
  group_begin("exact");
  for (int rep = 0; rep < 4; rep++) {
    const int64_t d = RNG_PICK(DIMS), n = rng_int(10, 150);
    const int nbits = pick_nbits(d);
    case_begin("n=%lld d=%lld nbits=%d", (long long)n, (long long)d, nbits);
    corpus c = make_corpus(n, d, 17, (int)rng_int(2, 8));
    g_cu = c.cu;
    lik_plaid_index *ix = build(&c, nbits, 2, rng_int(5, 100));
    if (!ix) {
      corpus_free(&c);
      continue;
    }
    char a[300];
    snprintf(a, sizeof a, "%s/x", g_tmp);
    queries q = make_queries(&c, rng_int(1, 6), rng_int(1, 20), rng_int(1, 12));
    float *full = malloc((size_t)(q.nq * n) * sizeof(float));
    reference_scores(ix, a, &c, nbits, &q, full);
    lik_plaid_index_info info;
    lik_plaid_index_get_info(ix, &info);
    /* the same degenerate search, with and without subsets */
    lik_plaid_search_params p = {0};
    p.n_ivf_probe = info.num_centroids;
    p.n_full_scores = 4 * n + rng_int(0, 10);
    p.num_threads = (int)rng_int(1, 3);
    if (rng_chance(0.5)) {
      p.prune = 1;
      p.centroid_score_threshold = -2.0f; /* prunes nothing */
    }
    CHECK(search(ix, &q, d, &p, NULL, NULL) == LIK_OK, "search: %s", lik_last_error());
    check_exact(&q, full, n);
    int64_t *want = malloc((size_t)(q.k + n) * sizeof(int64_t));
    uint8_t *allowed = calloc((size_t)n, 1);
    int64_t *sub = malloc((size_t)(2 * n + 1) * sizeof(int64_t));
    /* one subset for every query (with duplicates) */
    int64_t ns = rng_int(0, n);
    for (int64_t s = 0; s < ns; s++) sub[s] = rng_int(0, n - 1);
    lik_tensor st1 = t1(sub, LIK_I64, ns);
    CHECK(search(ix, &q, d, &p, &st1, NULL) == LIK_OK, "search subset: %s", lik_last_error());
    memset(allowed, 0, (size_t)n);
    for (int64_t s = 0; s < ns; s++) allowed[sub[s]] = 1;
    for (int64_t i = 0; i < q.nq; i++) {
      const int64_t m = q.qlen[i] ? exact_topk(full + i * n, n, allowed, q.k, want) : 0;
      for (int64_t r = 0; r < q.k; r++)
        CHECK(q.i[i * q.k + r] == (r < m ? want[r] : -1), "subset query %lld rank %lld: id %lld, expected %lld",
              (long long)i, (long long)r, (long long)q.i[i * q.k + r], (long long)(r < m ? want[r] : -1));
    }
    /* per-query subsets */
    int64_t *scu = malloc((size_t)(q.nq + 1) * sizeof(int64_t));
    scu[0] = 0;
    for (int64_t i = 0; i < q.nq; i++) scu[i + 1] = scu[i] + rng_int(0, n < 2 * n / (q.nq + 1) ? n : 2 * n / (q.nq + 1));
    int64_t *sub2 = malloc((size_t)(scu[q.nq] + 1) * sizeof(int64_t));
    for (int64_t s = 0; s < scu[q.nq]; s++) sub2[s] = rng_int(0, n - 1);
    lik_tensor st2 = t1(sub2, LIK_I64, scu[q.nq]), scut = t1(scu, LIK_I64, q.nq + 1);
    CHECK(search(ix, &q, d, &p, &st2, &scut) == LIK_OK, "search subsets: %s", lik_last_error());
    for (int64_t i = 0; i < q.nq; i++) {
      memset(allowed, 0, (size_t)n);
      for (int64_t s = scu[i]; s < scu[i + 1]; s++) allowed[sub2[s]] = 1;
      const int64_t m = q.qlen[i] ? exact_topk(full + i * n, n, allowed, q.k, want) : 0;
      for (int64_t r = 0; r < q.k; r++)
        CHECK(q.i[i * q.k + r] == (r < m ? want[r] : -1), "per-query subset %lld rank %lld", (long long)i,
              (long long)r);
    }
    free(scu);
    free(sub2);
    free(sub);
    free(allowed);
    free(want);
    free(full);
    queries_free(&q);
    lik_plaid_index_free(ix);
    corpus_free(&c);
  }
  group_end();
}

/* One query runs its stages with the threads inside them (probing over
 * centroid ranges, the union over lists, the gathers over candidate blocks),
 * each stage with as many threads as its work is worth: each query searched
 * alone at 1..8 threads gives bitwise the rows of the batch searched at 1
 * thread (one query per task), with several chunks, tombstones, subsets,
 * pruning and n_ivf_probe up to K, the scratch a search keeps with the index
 * reused by the next; the last case is large enough (K 4096, 40-token
 * queries, many probes) that every stage splits. */
static void group_one_query_threads(void) {
  group_begin("one query: threads inside the stages");
  for (int rep = 0; rep < 5; rep++) {
    const int large = rep == 4;
#ifdef LIK_TEST_SMALL /* the large case's k-means and searches, 30x slower under ASan or qemu */
    const int64_t n_large = 1000, k_large = 1024;
#else
    const int64_t n_large = 2500, k_large = 4096;
#endif
    const int64_t d = large ? 8 : RNG_PICK(DIMS), n = large ? n_large : rng_int(60, 400);
    const int nbits = pick_nbits(d);
    case_begin("n=%lld d=%lld nbits=%d", (long long)n, (long long)d, nbits);
    corpus c = make_corpus(n, d, large ? 60 : 30, large ? 40 : (int)rng_int(3, 12));
    lik_plaid_index *ix = build_k(&c, nbits, 2, large ? rng_int(n_large / 4, n_large) : rng_int(10, 500),
                                  large ? k_large : 0);
    if (!ix) {
      corpus_free(&c);
      continue;
    }
    int64_t del[8];
    const int64_t ndel = rep % 2 ? 0 : rng_int(1, 8);
    for (int64_t k = 0; k < ndel; k++) del[k] = (n / 8) * k + rng_int(0, n / 8 - 1); /* distinct */
    lik_tensor dt = t1(del, LIK_I64, ndel);
    CHECK(!ndel || lik_plaid_index_delete(ix, &dt) == LIK_OK, "delete: %s", lik_last_error());
    lik_plaid_index_info info;
    lik_plaid_index_get_info(ix, &info);
    queries q = make_queries(&c, rng_int(2, 6), large ? 40 : rng_int(1, 40), rng_int(1, 30));
    int64_t sub[64];
    const int64_t ns = rep == 1 ? rng_int(1, 64) : 0;
    for (int64_t k = 0; k < ns; k++) sub[k] = rng_int(0, n - 1);
    lik_tensor st = t1(sub, LIK_I64, ns);
    lik_plaid_search_params p = {0};
    p.n_ivf_probe = large ? rng_int(64, 512) : rng_chance(0.2) ? info.num_centroids : rng_int(1, 6);
    p.n_full_scores = large ? 8000 : rng_int(4, 3 * n);
    if (rng_chance(0.5)) {
      p.prune = 1;
      p.centroid_score_threshold = (float)rng_range(-0.2, 0.6);
    }
    p.num_threads = 1;
    CHECK(search(ix, &q, d, &p, ns ? &st : NULL, NULL) == LIK_OK, "batch: %s", lik_last_error());
    const int64_t nk = q.nq * q.k;
    float *s0 = malloc((size_t)nk * sizeof(float));
    int64_t *i0 = malloc((size_t)nk * sizeof(int64_t));
    memcpy(s0, q.s, (size_t)nk * sizeof(float));
    memcpy(i0, q.i, (size_t)nk * sizeof(int64_t));
    for (int th = 1; th <= 8; th++) /* queries one after another: the kept scratch reused */
      for (int64_t i = 0; i < q.nq; i++) {
        queries one = q; /* query i alone */
        one.nq = 1;
        one.q = q.q + i * q.lq * d;
        one.qlen = q.qlen + i;
        one.s = q.s + i * q.k;
        one.i = q.i + i * q.k;
        p.num_threads = th;
        CHECK(search(ix, &one, d, &p, ns ? &st : NULL, NULL) == LIK_OK, "query %lld, %d threads: %s",
              (long long)i, th, lik_last_error());
        CHECK(!memcmp(one.s, s0 + i * q.k, (size_t)q.k * sizeof(float)) &&
                  !memcmp(one.i, i0 + i * q.k, (size_t)q.k * sizeof(int64_t)),
              "query %lld alone at %d threads differs from the batch at 1 thread", (long long)i, th);
      }
    free(s0);
    free(i0);
    queries_free(&q);
    lik_plaid_index_free(ix);
    corpus_free(&c);
  }
  group_end();
}

static void group_add(void) {
  group_begin("add");
  for (int rep = 0; rep < 3; rep++) {
    const int64_t d = RNG_PICK(DIMS), n = rng_int(30, 200);
    const int nbits = pick_nbits(d);
    case_begin("n=%lld d=%lld nbits=%d", (long long)n, (long long)d, nbits);
    corpus c = make_corpus(n, d, 15, 6);
    lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
    o.nbits = nbits;
    o.seed = g_seed;
    o.chunk_docs = rng_int(1, 3) == 1 ? 1000000 : rng_int(5, 40);
    lik_tensor S = t2(c.x, LIK_F32, c.T < 300 ? c.T : 300, d);
    lik_plaid_index *a = NULL, *b = NULL;
    CHECK(lik_plaid_index_train(&S, &o, &a) == LIK_OK && lik_plaid_index_train(&S, &o, &b) == LIK_OK,
          "train: %s", lik_last_error());
    if (!a || !b) {
      lik_plaid_index_free(a);
      lik_plaid_index_free(b);
      corpus_free(&c);
      continue;
    }
    lik_tensor X = t2(c.x, LIK_F32, c.T, d), cu = t1(c.cu, LIK_I64, n + 1);
    CHECK(lik_plaid_index_add(a, &X, &cu, &o) == LIK_OK, "add all: %s", lik_last_error());
    /* b: three parts; the middle one through a save / load */
    const int64_t j1 = rng_int(0, n), j2 = rng_int(j1, n);
    const int64_t cuts[4] = {0, j1, j2, n};
    for (int part = 0; part < 3; part++) {
      const int64_t a0 = cuts[part], a1 = cuts[part + 1];
      int64_t *pc = malloc((size_t)(a1 - a0 + 1) * sizeof(int64_t));
      for (int64_t j = a0; j <= a1; j++) pc[j - a0] = c.cu[j] - c.cu[a0];
      lik_tensor Xp = t2(c.x + c.cu[a0] * d, LIK_F32, c.cu[a1] - c.cu[a0], d),
                 cp = t1(pc, LIK_I64, a1 - a0 + 1);
      CHECK(lik_plaid_index_add(b, &Xp, &cp, &o) == LIK_OK, "add part %d: %s", part, lik_last_error());
      free(pc);
      if (part == 1) {
        char p[300];
        snprintf(p, sizeof p, "%s/part", g_tmp);
        rm_tree(p);
        CHECK(lik_plaid_index_save(b, p, NULL) == LIK_OK, "save: %s", lik_last_error());
        lik_plaid_index_free(b);
        b = NULL;
        CHECK(lik_plaid_index_load(p, 0, &b) == LIK_OK, "load: %s", lik_last_error());
        if (!b) break;
      }
    }
    if (b) {
      queries q = make_queries(&c, 5, 12, 8);
      lik_plaid_search_params p = {0};
      p.n_ivf_probe = 3;
      p.n_full_scores = 40;
      CHECK(search(a, &q, d, &p, NULL, NULL) == LIK_OK, "search: %s", lik_last_error());
      float *s0 = malloc((size_t)(q.nq * q.k) * sizeof(float));
      int64_t *i0 = malloc((size_t)(q.nq * q.k) * sizeof(int64_t));
      memcpy(s0, q.s, (size_t)(q.nq * q.k) * sizeof(float));
      memcpy(i0, q.i, (size_t)(q.nq * q.k) * sizeof(int64_t));
      CHECK(search(b, &q, d, &p, NULL, NULL) == LIK_OK, "search: %s", lik_last_error());
      CHECK(!memcmp(s0, q.s, (size_t)(q.nq * q.k) * sizeof(float)) &&
                !memcmp(i0, q.i, (size_t)(q.nq * q.k) * sizeof(int64_t)),
            "add in parts (with a save / load) searches differently from add at once");
      char pa[300], pb[300];
      snprintf(pa, sizeof pa, "%s/ea", g_tmp);
      snprintf(pb, sizeof pb, "%s/eb", g_tmp);
      rm_tree(pa);
      rm_tree(pb);
      lik_plaid_index_save(a, pa, NULL);
      lik_plaid_index_save(b, pb, NULL);
      size_t n1, n2;
      uint8_t *w1, *w2;
      void *v1 = npy_data(pa, "ivf.npy", &n1, &w1), *v2 = npy_data(pb, "ivf.npy", &n2, &w2);
      CHECK(v1 && v2 && n1 == n2 && !memcmp(v1, v2, n1), "the IVF differs");
      free(w1);
      free(w2);
      v1 = npy_data(pa, "merged_residuals.npy", &n1, &w1);
      v2 = npy_data(pb, "merged_residuals.npy", &n2, &w2);
      CHECK(v1 && v2 && n1 == n2 && !memcmp(v1, v2, n1), "the residuals differ");
      free(w1);
      free(w2);
      free(s0);
      free(i0);
      queries_free(&q);
    }
    lik_plaid_index_free(a);
    lik_plaid_index_free(b);
    corpus_free(&c);
  }
  group_end();
}

/* ---- centroid expansion (add with expand_centroids) ---------------------------------------- */

static corpus concat(const corpus *a, const corpus *b) {
  corpus c;
  c.n = a->n + b->n;
  c.d = a->d;
  c.T = a->T + b->T;
  c.x = malloc((size_t)(c.T * c.d + 1) * sizeof(float));
  memcpy(c.x, a->x, (size_t)(a->T * a->d) * sizeof(float));
  memcpy(c.x + a->T * a->d, b->x, (size_t)(b->T * b->d) * sizeof(float));
  c.cu = malloc((size_t)(c.n + 1) * sizeof(int64_t));
  memcpy(c.cu, a->cu, (size_t)(a->n + 1) * sizeof(int64_t));
  for (int64_t j = 1; j <= b->n; j++) c.cu[a->n + j] = a->T + b->cu[j];
  return c;
}

/* Tokens x [T][d] whose distance to the centroid (fp16 [K][d]) of highest
 * inner product (lowest index on ties) exceeds thr: fast-plaid's outliers. */
static int64_t count_outliers(const float *x, int64_t T, int64_t d, const uint16_t *cent, int64_t K,
                              double thr) {
  int64_t n = 0;
  for (int64_t t = 0; t < T; t++) {
    int64_t best = 0;
    double bs = -INFINITY;
    for (int64_t k = 0; k < K; k++) {
      double ip = 0;
      for (int64_t i = 0; i < d; i++) ip += x[t * d + i] * f16_bits_to_double(cent[k * d + i]);
      if (ip > bs) bs = ip, best = k;
    }
    double ss = 0;
    for (int64_t i = 0; i < d; i++) {
      const double r = x[t * d + i] - f16_bits_to_double(cent[best * d + i]);
      ss += r * r;
    }
    n += sqrt(ss) > thr;
  }
  return n;
}

static lik_status add_expand(lik_plaid_index *ix, const corpus *c, int expand) {
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  o.seed = g_seed;
  o.num_threads = (int)rng_int(1, 3);
  o.expand_centroids = expand;
  lik_tensor X = t2(c->x, LIK_F32, c->T, c->d), cu = t1(c->cu, LIK_I64, c->n + 1);
  return lik_plaid_index_add(ix, &X, &cu, &o);
}

static void group_expand(void) {
  static const int64_t dims[] = {16, 24, 40, 64};
  group_begin("expand");
  for (int rep = 0; rep < 4; rep++) {
    const int64_t d = RNG_PICK(dims), na = rng_int(40, 160), nb = rng_int(20, 120);
    const int nbits = pick_nbits(d), mapped = rep % 2;
    case_begin("na=%lld nb=%lld d=%lld nbits=%d %s", (long long)na, (long long)nb, (long long)d, nbits,
               mapped ? "loaded (mapped)" : "built");
    corpus a = make_corpus(na, d, 15, (int)rng_int(3, 6));
    corpus b = make_corpus(nb, d, 15, (int)rng_int(3, 6)); /* other directions */
    corpus ab = concat(&a, &b);
    char p0[300], p1[300], p2[300], p3[300];
    snprintf(p0, sizeof p0, "%s/x0", g_tmp);
    snprintf(p1, sizeof p1, "%s/x1", g_tmp);
    snprintf(p2, sizeof p2, "%s/x2", g_tmp);
    snprintf(p3, sizeof p3, "%s/x3", g_tmp);
    lik_plaid_index *ix = build(&a, nbits, 2, rng_int(10, 100));
    rm_tree(p0);
    CHECK(ix && lik_plaid_index_save(ix, p0, NULL) == LIK_OK, "save: %s", lik_last_error());
    if (ix && mapped) {
      lik_plaid_index_free(ix);
      ix = NULL;
      CHECK(lik_plaid_index_load(p0, 0, &ix) == LIK_OK, "load: %s", lik_last_error());
    }
    if (!ix) {
      corpus_free(&a);
      corpus_free(&b);
      corpus_free(&ab);
      continue;
    }
    lik_plaid_index_info i0, i1;
    lik_plaid_index_get_info(ix, &i0);
    size_t n1, n2;
    uint8_t *w1, *w2;
    const float thr = *(const float *)npy_data(p0, "cluster_threshold.npy", &n1, &w1);
    const uint16_t *cent = npy_data(p0, "centroids.npy", &n2, &w2);
    const int64_t nout = count_outliers(b.x, b.T, d, cent, i0.num_centroids, thr);
    const double cap = 1.0 + floor(16.0 * sqrt(120.0 * (double)nout));
    int64_t k = 4 * ((nout + 255) / 256);
    if (k > nout || k > cap) k = nout < cap ? nout : (int64_t)cap;
    CHECK(nout > 0, "no outlier among the tokens of other directions (threshold %g)", thr);
    free(w1);
    free(w2);
    /* failures leave the index as it was: bad option, a NaN token */
    CHECK(add_expand(ix, &b, 2) == LIK_ERR_VALUE && strstr(lik_last_error(), "expand_centroids"),
          "expand_centroids=2: %s", lik_last_error());
    const int64_t bad = rng_int(0, b.T * d - 1);
    const float keep = b.x[bad];
    b.x[bad] = rng_chance(0.5) ? NAN : INFINITY;
    CHECK(add_expand(ix, &b, 1) == LIK_ERR_VALUE, "a NaN / inf token: %s", lik_last_error());
    b.x[bad] = keep;
    lik_plaid_index_get_info(ix, &i1);
    rm_tree(p1);
    CHECK(lik_plaid_index_save(ix, p1, NULL) == LIK_OK && same_dir(p0, p1) &&
              i1.num_centroids == i0.num_centroids && i1.num_docs == i0.num_docs,
          "a failed add changed the index");
    /* the documents of other directions get k new centroids */
    CHECK(add_expand(ix, &b, 1) == LIK_OK, "add: %s", lik_last_error());
    lik_plaid_index_get_info(ix, &i1);
    CHECK(i1.num_centroids == i0.num_centroids + k && i1.num_docs == na + nb,
          "K %lld -> %lld, expected + %lld (%lld outliers)", (long long)i0.num_centroids,
          (long long)i1.num_centroids, (long long)k, (long long)nout);
    /* the grown index searches exactly with the degenerate parameters */
    queries q = make_queries(&ab, rng_int(1, 6), rng_int(1, 20), rng_int(1, 12));
    float *full = malloc((size_t)(q.nq * ab.n) * sizeof(float));
    reference_scores(ix, p2, &ab, nbits, &q, full);
    lik_plaid_search_params p = {0};
    p.n_ivf_probe = i1.num_centroids;
    p.n_full_scores = 4 * ab.n;
    CHECK(search(ix, &q, d, &p, NULL, NULL) == LIK_OK, "search: %s", lik_last_error());
    check_exact(&q, full, ab.n);
    /* its files load back, search the same, save the same */
    lik_plaid_index *lx = NULL;
    CHECK(lik_plaid_index_load(p2, LIK_PLAID_LOAD_VERIFY, &lx) == LIK_OK, "load: %s", lik_last_error());
    if (lx) {
      CHECK(search(lx, &q, d, &p, NULL, NULL) == LIK_OK, "search loaded: %s", lik_last_error());
      check_exact(&q, full, ab.n);
      rm_tree(p3);
      CHECK(lik_plaid_index_save(lx, p3, NULL) == LIK_OK && same_dir(p2, p3), "save(load(x)) differs");
      /* documents made of the centroids themselves: no outlier */
      const uint16_t *c2 = npy_data(p3, "centroids.npy", &n2, &w2);
      corpus near = make_corpus(rng_int(1, 30), d, 10, 1);
      for (int64_t t = 0; t < near.T; t++) {
        const int64_t cc = rng_int(0, i1.num_centroids - 1);
        for (int64_t i = 0; i < d; i++)
          near.x[t * d + i] = (float)f16_bits_to_double(c2[cc * d + i]) + (float)rng_range(-1e-4, 1e-4);
      }
      free(w2);
      lik_plaid_index_get_info(lx, &i0);
      CHECK(add_expand(lx, &near, 1) == LIK_OK, "add near: %s", lik_last_error());
      lik_plaid_index_get_info(lx, &i1);
      CHECK(i1.num_centroids == i0.num_centroids && i1.num_docs == i0.num_docs + near.n,
            "tokens on the centroids made K %lld -> %lld", (long long)i0.num_centroids,
            (long long)i1.num_centroids);
      corpus_free(&near);
      lik_plaid_index_free(lx);
    }
    free(full);
    queries_free(&q);
    lik_plaid_index_free(ix);
    corpus_free(&a);
    corpus_free(&b);
    corpus_free(&ab);
  }
  group_end();
}

#define EXPECT_FAIL(call, status, ...)                                                          \
  do {                                                                                          \
    const lik_status st_ = (call);                                                              \
    CHECK(st_ == (status) && lik_last_error()[0], "%s: got %s (%s)", #call, lik_status_string(st_), \
          lik_last_error());                                                                    \
  } while (0)

static void group_errors(void) {
  group_begin("errors");
  case_begin("arguments");
  corpus c = make_corpus(40, 16, 9, 4);
  lik_plaid_index *ix = build(&c, 2, 1, 100);
  if (!ix) {
    corpus_free(&c);
    group_end();
    return;
  }
  lik_tensor X = t2(c.x, LIK_F32, c.T, 16), cu = t1(c.cu, LIK_I64, 41);
  lik_plaid_index *out = NULL;
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  EXPECT_FAIL(lik_plaid_index_build(&X, &cu, &o, NULL), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_build(NULL, &cu, &o, &out), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_build(&X, NULL, &o, &out), LIK_ERR_NULL);
  o.nbits = 3;
  EXPECT_FAIL(lik_plaid_index_build(&X, &cu, &o, &out), LIK_ERR_VALUE);
  o.nbits = 2;
  o.kmeans_niters = -1;
  EXPECT_FAIL(lik_plaid_index_build(&X, &cu, &o, &out), LIK_ERR_VALUE);
  o.kmeans_niters = 4;
  lik_tensor X5 = t2(c.x, LIK_F32, c.T, 5); /* 5 * 2 bits */
  EXPECT_FAIL(lik_plaid_index_build(&X5, &cu, &o, &out), LIK_ERR_VALUE);
  int64_t cubad[3] = {0, c.T + 1, c.T}; /* not non-decreasing */
  lik_tensor cub = t1(cubad, LIK_I64, 3);
  EXPECT_FAIL(lik_plaid_index_build(&X, &cub, &o, &out), LIK_ERR_VALUE);
  lik_tensor Xc = X;
  Xc.device = LIK_CUDA;
  lik_tensor cuc = cu;
  cuc.device = LIK_CUDA;
  EXPECT_FAIL(lik_plaid_index_build(&Xc, &cuc, &o, &out), LIK_ERR_UNSUPPORTED);
  float keep = c.x[3];
  c.x[3] = NAN;
  EXPECT_FAIL(lik_plaid_index_build(&X, &cu, &o, &out), LIK_ERR_VALUE);
  lik_plaid_index_info before, after;
  lik_plaid_index_get_info(ix, &before);
  EXPECT_FAIL(lik_plaid_index_add(ix, &X, &cu, &o), LIK_ERR_VALUE);
  lik_plaid_index_get_info(ix, &after);
  CHECK(after.num_docs == before.num_docs && after.num_tokens == before.num_tokens,
        "a failed add changed the index");
  c.x[3] = keep;
  lik_tensor X8 = t2(c.x, LIK_F32, c.T / 2, 8);
  lik_tensor cu8 = t1(c.cu, LIK_I64, 2);
  int64_t cu8v[2] = {0, c.T / 2};
  cu8.data = cu8v;
  EXPECT_FAIL(lik_plaid_index_add(ix, &X8, &cu8, &o), LIK_ERR_SHAPE);
  EXPECT_FAIL(lik_plaid_index_add(NULL, &X, &cu, &o), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_save(ix, NULL, NULL), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_save(ix, "/proc/no/such/dir", NULL), LIK_ERR_VALUE);
  int64_t ids[3] = {1, 2, 3};
  lik_tensor idt = t1(ids, LIK_I64, 3);
  EXPECT_FAIL(lik_plaid_index_save(ix, g_tmp, &idt), LIK_ERR_SHAPE);
  EXPECT_FAIL(lik_plaid_index_load(NULL, 0, &out), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_load(g_tmp, 0, NULL), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_load(g_tmp, 8, &out), LIK_ERR_VALUE);
  EXPECT_FAIL(lik_plaid_index_load("/no/such/index", 0, &out), LIK_ERR_VALUE);
  EXPECT_FAIL(lik_plaid_index_get_info(NULL, &before), LIK_ERR_NULL);

  queries q = make_queries(&c, 3, 5, 4);
  lik_tensor Q = t3(q.q, LIK_F32, 3, 5, 16), S = t2(q.s, LIK_F32, 3, 4), I = t2(q.i, LIK_I64, 3, 4);
  lik_plaid_search_params p = {0};
  p.top_k = 4;
  CHECK(lik_plaid_index_search(ix, &Q, NULL, NULL, NULL, &p, &S, &I) == LIK_OK, "valid search: %s",
        lik_last_error());
  EXPECT_FAIL(lik_plaid_index_search(NULL, &Q, NULL, NULL, NULL, &p, &S, &I), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_search(ix, NULL, NULL, NULL, NULL, &p, &S, &I), LIK_ERR_NULL);
  p.top_k = 5;
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, NULL, NULL, NULL, &p, &S, &I), LIK_ERR_SHAPE);
  p.top_k = -1;
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, NULL, NULL, NULL, &p, &S, &I), LIK_ERR_VALUE);
  p.top_k = 4;
  p.prune = 1;
  p.centroid_score_threshold = NAN;
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, NULL, NULL, NULL, &p, &S, &I), LIK_ERR_VALUE);
  p.prune = 0;
  lik_tensor Q8 = t3(q.q, LIK_F32, 3, 5, 8);
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q8, NULL, NULL, NULL, &p, &S, &I), LIK_ERR_SHAPE);
  int64_t ql[3] = {1, 6, 2};
  lik_tensor qlt = t1(ql, LIK_I64, 3);
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, &qlt, NULL, NULL, &p, &S, &I), LIK_ERR_VALUE);
  int64_t sub[2] = {0, 40};
  lik_tensor sbt = t1(sub, LIK_I64, 2);
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, NULL, &sbt, NULL, &p, &S, &I), LIK_ERR_VALUE);
  sub[1] = 39;
  int64_t scu[3] = {0, 1, 2};
  lik_tensor scut = t1(scu, LIK_I64, 3);
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, NULL, &sbt, &scut, &p, &S, &I), LIK_ERR_SHAPE);
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, NULL, NULL, &scut, &p, &S, &I), LIK_ERR_NULL);
  lik_tensor Ib = t2(q.i, LIK_I32, 3, 4);
  EXPECT_FAIL(lik_plaid_index_search(ix, &Q, NULL, NULL, NULL, &p, &S, &Ib), LIK_ERR_DTYPE);
  lik_tensor Qc = Q, Sc = S, Ic = I;
  Qc.device = Sc.device = Ic.device = LIK_CUDA;
  /* no copy on that device; a subset on CUDA */
  EXPECT_FAIL(lik_plaid_index_search(ix, &Qc, NULL, NULL, NULL, &p, &Sc, &Ic), LIK_ERR_DEVICE);
  sbt.device = LIK_CUDA;
  EXPECT_FAIL(lik_plaid_index_search(ix, &Qc, NULL, &sbt, NULL, &p, &Sc, &Ic), LIK_ERR_UNSUPPORTED);
  EXPECT_FAIL(lik_plaid_index_search(ix, &Qc, NULL, NULL, NULL, &p, &S, &I), LIK_ERR_DEVICE);
  EXPECT_FAIL(lik_plaid_index_to_device(NULL, 0), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_to_device(ix, -2), LIK_ERR_VALUE);
  CHECK(lik_plaid_index_to_device(ix, -1) == LIK_OK, "to_device(-1) without a copy: %s",
        lik_last_error());
  lik_plaid_index_get_info(ix, &after);
  CHECK(after.device == -1 && after.device_bytes == 0, "info.device %d / %lld without a copy",
        after.device, (long long)after.device_bytes);
  queries_free(&q);
  lik_plaid_index_free(ix);
  corpus_free(&c);
  group_end();
}

/* ---- the copy on a CUDA device ---------------------------------------------------------------- */

#ifdef LIK_TEST_HAS_CUDA
#include <cuda_runtime_api.h>

static void *to_gpu(const void *h, size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
  if (bytes) cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
  return d;
}

/* The GPU's results (gs, gi) against the host's (hs, hi), [nq][k]: every
 * rank's score within tol (fp16 tensor cores against fp32), and where the ids
 * differ, the host's scores there are tied within 2 tol with a neighbour (or
 * it is the last rank: the next candidate may have swapped in). */
static void check_same_ranking(const char *what, const float *gs, const int64_t *gi,
                               const float *hs, const int64_t *hi, int64_t nq, int64_t k,
                               double tol) {
  for (int64_t i = 0; i < nq; i++)
    for (int64_t r = 0; r < k; r++) {
      const int64_t e = i * k + r;
      if (hi[e] < 0 || gi[e] < 0) {
        CHECK(hi[e] == gi[e] && isinf(gs[e]) && gs[e] < 0, "%s: query %lld rank %lld: id %lld "
              "(GPU) vs %lld (host)", what, (long long)i, (long long)r, (long long)gi[e],
              (long long)hi[e]);
        continue;
      }
      CHECK(fabs((double)gs[e] - hs[e]) <= tol, "%s: query %lld rank %lld: score %.6f (GPU) vs "
            "%.6f (host), tol %.2g", what, (long long)i, (long long)r, gs[e], hs[e], tol);
      if (gi[e] == hi[e]) continue;
      const int tied = (r > 0 && fabs((double)hs[e] - hs[e - 1]) <= 2 * tol) ||
                       (r + 1 < k && hi[e + 1] >= 0 && fabs((double)hs[e] - hs[e + 1]) <= 2 * tol) ||
                       r + 1 == k;
      CHECK(tied, "%s: query %lld rank %lld: id %lld (GPU) vs %lld (host), no tie", what,
            (long long)i, (long long)r, (long long)gi[e], (long long)hi[e]);
    }
}

/* One search on the device (queries q's inputs copied) into q->s / q->i. */
static lik_status search_gpu(const lik_plaid_index *ix, queries *q, int64_t d,
                             const lik_plaid_search_params *p) {
  const size_t qb = (size_t)(q->nq * q->lq * d) * sizeof(float), lb = (size_t)q->nq * sizeof(int64_t),
               sb = (size_t)(q->nq * q->k) * sizeof(float), ib = (size_t)(q->nq * q->k) * sizeof(int64_t);
  void *dq = to_gpu(q->q, qb), *dl = to_gpu(q->qlen, lb), *ds = NULL, *di = NULL;
  cudaMalloc(&ds, sb);
  cudaMalloc(&di, ib);
  lik_tensor Q = t3(dq, LIK_F32, q->nq, q->lq, d), ql = t1(dl, LIK_I64, q->nq);
  lik_tensor S = t2(ds, LIK_F32, q->nq, q->k), I = t2(di, LIK_I64, q->nq, q->k);
  Q.device = ql.device = S.device = I.device = LIK_CUDA;
  lik_plaid_search_params pk = *p;
  pk.top_k = q->k;
  const lik_status st = lik_plaid_index_search(ix, &Q, &ql, NULL, NULL, &pk, &S, &I);
  cudaMemcpy(q->s, ds, sb, cudaMemcpyDeviceToHost);
  cudaMemcpy(q->i, di, ib, cudaMemcpyDeviceToHost);
  cudaFree(dq);
  cudaFree(dl);
  cudaFree(ds);
  cudaFree(di);
  return st;
}
#endif

/* CUDA devices visible to the test (0 in a build without CUDA or without a GPU). */
static int cuda_devices(void) {
  int n = 0;
#ifdef LIK_TEST_HAS_CUDA
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
#endif
  return n;
}

static void group_device(void) {
  group_begin("device");
  case_begin("copy and search");
  const int ndev = cuda_devices();
  corpus c = ndev ? make_corpus(300, 32, 60, 12) : make_corpus(40, 16, 9, 4); /* no GPU: errors only */
  lik_plaid_index *ix = build(&c, 2, 2, ndev ? 120 : 100);
  if (!ix) {
    corpus_free(&c);
    group_end();
    return;
  }
  lik_plaid_index_info info;
  if (ndev == 0) { /* no backend or no device: a clear error, the index unchanged */
    const lik_status st = lik_plaid_index_to_device(ix, 0);
    CHECK(st == LIK_ERR_UNSUPPORTED || st == LIK_ERR_DEVICE, "to_device(0) without a GPU: %s",
          lik_status_string(st));
    lik_plaid_index_get_info(ix, &info);
    CHECK(info.device == -1, "a failed copy left info.device %d", info.device);
  }
#ifdef LIK_TEST_HAS_CUDA
  if (ndev > 0) {
    CHECK(lik_plaid_index_to_device(ix, 0) == LIK_OK, "to_device(0): %s", lik_last_error());
    lik_plaid_index_get_info(ix, &info);
    CHECK(info.device == 0 && info.device_bytes > 0, "info.device %d / %lld bytes", info.device,
          (long long)info.device_bytes);
    static const struct {
      int64_t nq, lq, k, probe, full;
      int prune;
    } cases[] = {{7, 9, 10, 4, 0, 0}, {5, 40, 25, 8, 64, 1}, {3, 5, 400, 2, 16, 0}, {9, 33, 1, 32, 0, 1}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
      queries h = make_queries(&c, cases[ci].nq, cases[ci].lq, cases[ci].k);
      queries g = h;
      g.s = malloc((size_t)(h.nq * h.k) * sizeof(float));
      g.i = malloc((size_t)(h.nq * h.k) * sizeof(int64_t));
      lik_plaid_search_params p = {0};
      p.n_ivf_probe = cases[ci].probe;
      p.n_full_scores = cases[ci].full;
      p.prune = cases[ci].prune;
      p.centroid_score_threshold = 0.4f;
      CHECK(search(ix, &h, c.d, &p, NULL, NULL) == LIK_OK, "host search: %s", lik_last_error());
      CHECK(search_gpu(ix, &g, c.d, &p) == LIK_OK, "GPU search: %s", lik_last_error());
      char what[64];
      snprintf(what, sizeof what, "case %zu", ci);
      check_same_ranking(what, g.s, g.i, h.s, h.i, h.nq, h.k, 3e-3 * (double)h.lq);
      free(g.s);
      free(g.i);
      queries_free(&h);
    }
    /* a delete refreshes the copy: the deleted documents are never returned */
    int64_t del[40];
    for (int i = 0; i < 40; i++) del[i] = 7 * i;
    lik_tensor dt = t1(del, LIK_I64, 40);
    CHECK(lik_plaid_index_delete(ix, &dt) == LIK_OK, "delete: %s", lik_last_error());
    lik_plaid_index_get_info(ix, &info);
    CHECK(info.device == 0, "the copy was not kept after a delete");
    queries h = make_queries(&c, 6, 12, 30), g = h;
    g.s = malloc((size_t)(h.nq * h.k) * sizeof(float));
    g.i = malloc((size_t)(h.nq * h.k) * sizeof(int64_t));
    lik_plaid_search_params p = {0};
    CHECK(search(ix, &h, c.d, &p, NULL, NULL) == LIK_OK, "host search: %s", lik_last_error());
    CHECK(search_gpu(ix, &g, c.d, &p) == LIK_OK, "GPU search: %s", lik_last_error());
    check_same_ranking("after delete", g.s, g.i, h.s, h.i, h.nq, h.k, 3e-3 * (double)h.lq);
    for (int64_t e = 0; e < h.nq * h.k; e++)
      CHECK(g.i[e] < 0 || g.i[e] % 7 != 0 || g.i[e] >= 280, "deleted id %lld returned",
            (long long)g.i[e]);
    CHECK(lik_plaid_index_compact(ix) == LIK_OK, "compact: %s", lik_last_error());
    CHECK(search_gpu(ix, &g, c.d, &p) == LIK_OK, "GPU search after compact: %s", lik_last_error());
    check_same_ranking("after compact", g.s, g.i, h.s, h.i, h.nq, h.k, 3e-3 * (double)h.lq);
    /* freed: CUDA queries are refused */
    CHECK(lik_plaid_index_to_device(ix, -1) == LIK_OK, "to_device(-1): %s", lik_last_error());
    EXPECT_FAIL(search_gpu(ix, &g, c.d, &p), LIK_ERR_DEVICE);
    free(g.s);
    free(g.i);
    queries_free(&h);
  }
#endif
  lik_plaid_index_free(ix);
  corpus_free(&c);
  group_end();
}

/* ---- the build on a CUDA device (options.device): the CPU's files ---------------------------- */

static void group_device_build(void) {
  group_begin("device build");
  case_begin("options.device");
  const int ndev = cuda_devices();
  corpus c = make_corpus(ndev ? 400 : 40, 48, 50, 10);
  lik_tensor X = t2(c.x, LIK_F32, c.T, c.d), cu = t1(c.cu, LIK_I64, c.n + 1);
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  o.seed = g_seed;
  o.num_centroids = 64;
  lik_plaid_index *ix = NULL;
  o.device = (lik_device_type)7;
  EXPECT_FAIL(lik_plaid_index_build(&X, &cu, &o, &ix), LIK_ERR_VALUE);
  o.device = LIK_CUDA;
  o.device_id = -1;
  EXPECT_FAIL(lik_plaid_index_build(&X, &cu, &o, &ix), LIK_ERR_VALUE);
  o.device_id = 0;
  if (ndev == 0) { /* no backend or no device: refused, nothing built */
    const lik_status st = lik_plaid_index_build(&X, &cu, &o, &ix);
    CHECK((st == LIK_ERR_UNSUPPORTED || st == LIK_ERR_DEVICE) && !ix,
          "a build on CUDA device 0 without a GPU: %s", lik_status_string(st));
  }
#ifdef LIK_TEST_HAS_CUDA
  if (ndev > 0) {
    char a[400], b[400];
    path_of(a, sizeof a, g_tmp, "ga");
    path_of(b, sizeof b, g_tmp, "gb");
    for (int nbits = 1; nbits <= 8; nbits *= 2) {
      lik_plaid_index *hx = NULL, *gx = NULL;
      o.nbits = nbits;
      o.device = LIK_CPU;
      CHECK(lik_plaid_index_build(&X, &cu, &o, &hx) == LIK_OK, "host build: %s", lik_last_error());
      o.device = LIK_CUDA;
      CHECK(lik_plaid_index_build(&X, &cu, &o, &gx) == LIK_OK, "CUDA build: %s", lik_last_error());
      if (hx && gx) {
        rm_tree(a);
        rm_tree(b);
        CHECK(lik_plaid_index_save(hx, a, NULL) == LIK_OK && lik_plaid_index_save(gx, b, NULL) == LIK_OK,
              "save: %s", lik_last_error());
        CHECK(same_dir(a, b), "nbits %d: the CUDA build's files differ from the host build's", nbits);
        /* an add on the device codes as the host's */
        lik_tensor X2 = t2(c.x, LIK_F32, c.cu[c.n / 2], c.d), cu2 = t1(c.cu, LIK_I64, c.n / 2 + 1);
        o.device = LIK_CPU;
        CHECK(lik_plaid_index_add(hx, &X2, &cu2, &o) == LIK_OK, "host add: %s", lik_last_error());
        o.device = LIK_CUDA;
        CHECK(lik_plaid_index_add(gx, &X2, &cu2, &o) == LIK_OK, "CUDA add: %s", lik_last_error());
        rm_tree(a);
        rm_tree(b);
        lik_plaid_index_save(hx, a, NULL);
        lik_plaid_index_save(gx, b, NULL);
        CHECK(same_dir(a, b), "nbits %d: the CUDA add's files differ from the host add's", nbits);
      }
      lik_plaid_index_free(hx);
      lik_plaid_index_free(gx);
    }
    /* a NaN token of an add: the host's error, word for word */
    lik_plaid_index *hx = NULL;
    o.device = LIK_CPU;
    o.nbits = 2;
    CHECK(lik_plaid_index_build(&X, &cu, &o, &hx) == LIK_OK, "host build: %s", lik_last_error());
    const float keep = c.x[5 * c.d + 3];
    c.x[5 * c.d + 3] = NAN;
    char msg[512];
    if (hx) {
      EXPECT_FAIL(lik_plaid_index_add(hx, &X, &cu, &o), LIK_ERR_VALUE);
      snprintf(msg, sizeof msg, "%s", lik_last_error());
      o.device = LIK_CUDA;
      EXPECT_FAIL(lik_plaid_index_add(hx, &X, &cu, &o), LIK_ERR_VALUE);
      CHECK(!strcmp(msg, lik_last_error()), "NaN token: '%s' (CUDA) vs '%s' (host)", lik_last_error(), msg);
    }
    c.x[5 * c.d + 3] = keep;
    lik_plaid_index_free(hx);
    rm_tree(a);
    rm_tree(b);
  }
#endif
  corpus_free(&c);
  group_end();
}

/* ---- files: missing, inconsistent, corrupt --------------------------------------------------- */

/* A .npy (v1.0, int64 [n]) of v into file; returns its size. */
static size_t npy_i64(uint8_t *file, const int64_t *v, int64_t n) {
  char d[128];
  int k = snprintf(d, sizeof d, "{'descr': '<i8', 'fortran_order': False, 'shape': (%lld,), }",
                   (long long)n);
  while ((10 + k + 1) % 64) d[k++] = ' ';
  d[k++] = '\n';
  memcpy(file, "\x93NUMPY\x01\x00", 8);
  file[8] = (uint8_t)k;
  file[9] = 0;
  memcpy(file + 10, d, (size_t)k);
  memcpy(file + 10 + k, v, (size_t)n * sizeof(int64_t));
  return 10 + (size_t)k + (size_t)n * sizeof(int64_t);
}

/* Whether the last error message contains a (and b when given). */
static int says(const char *a, const char *b) { return strstr(lik_last_error(), a) && (!b || strstr(lik_last_error(), b)); }

static void group_living(void) {
  group_begin("living: delete, update, compact, metadata");
  corpus c = make_corpus(40, 16, 9, 4);
  lik_plaid_index *ix = build(&c, 2, 1, 7);
  if (!ix) {
    corpus_free(&c);
    group_end();
    return;
  }
  case_begin("delete: errors name the entry, leave the index unchanged");
  int64_t v[4] = {3, 5, 3, 0};
  lik_tensor ids = t1(v, LIK_I64, 3);
  EXPECT_FAIL(lik_plaid_index_delete(ix, &ids), LIK_ERR_VALUE);
  CHECK(says("ids[2]=3 is a duplicate of ids[0]", NULL), "%s", lik_last_error());
  v[2] = 40;
  EXPECT_FAIL(lik_plaid_index_delete(ix, &ids), LIK_ERR_VALUE);
  CHECK(says("ids[2]=40 is out of range", "[0, 40)"), "%s", lik_last_error());
  v[2] = -2;
  EXPECT_FAIL(lik_plaid_index_delete(ix, &ids), LIK_ERR_VALUE);
  lik_tensor f = t1(v, LIK_F32, 2);
  EXPECT_FAIL(lik_plaid_index_delete(ix, &f), LIK_ERR_DTYPE);
  EXPECT_FAIL(lik_plaid_index_delete(NULL, &ids), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_delete(ix, NULL), LIK_ERR_NULL);
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  CHECK(info.num_deleted == 0 && info.next_id == 40, "a failed delete changed the index");
  v[2] = 7;
  CHECK(lik_plaid_index_delete(ix, &ids) == LIK_OK, "delete: %s", lik_last_error());
  EXPECT_FAIL(lik_plaid_index_delete(ix, &ids), LIK_ERR_VALUE);
  CHECK(says("ids[0]=3 is a deleted document", NULL), "%s", lik_last_error());

  case_begin("search: never a deleted document, all live ones when asked for");
  queries q = make_queries(&c, 4, 6, 40);
  lik_plaid_search_params p = {0};
  p.n_ivf_probe = 1; /* few probes: the tombstones and the widening decide */
  p.num_threads = 1;
  CHECK(search(ix, &q, 16, &p, NULL, NULL) == LIK_OK, "search: %s", lik_last_error());
  int64_t live = 0; /* live documents with tokens: what a search can return */
  for (int64_t j = 0; j < 40; j++) live += j != 3 && j != 5 && j != 7 && c.cu[j + 1] > c.cu[j];
  for (int64_t i = 0; i < q.nq; i++) {
    int64_t got = 0;
    for (int64_t r = 0; r < q.k; r++) {
      const int64_t j = q.i[i * q.k + r];
      CHECK(j != 3 && j != 5 && j != 7, "query %lld: deleted document %lld returned", (long long)i, (long long)j);
      got += j >= 0;
    }
    CHECK(q.qlen[i] == 0 || got == live, "query %lld: %lld results of %lld live documents", (long long)i,
          (long long)got, (long long)live);
  }
  int64_t sub[3] = {3, 9, 10};
  lik_tensor st = t1(sub, LIK_I64, 3);
  q.k = 3;
  CHECK(search(ix, &q, 16, &p, &st, NULL) == LIK_OK, "subset search: %s", lik_last_error());
  const int64_t nsub = (c.cu[10] > c.cu[9]) + (c.cu[11] > c.cu[10]); /* 3 is deleted */
  for (int64_t i = 1; i < q.nq; i++)
    for (int64_t r = 0; r < 3; r++) {
      const int64_t j = q.i[i * 3 + r];
      CHECK(r < nsub ? j == 9 || j == 10 : j == -1, "subset: query %lld, result %lld: %lld",
            (long long)i, (long long)r, (long long)j);
    }

  case_begin("update, get_ids, compact, metadata, save / load");
  int64_t u = 9;
  lik_tensor ut = t1(&u, LIK_I64, 1), X1 = t2(c.x, LIK_F32, c.cu[1], 16);
  int64_t cu1[2] = {0, c.cu[1]};
  lik_tensor C1 = t1(cu1, LIK_I64, 2);
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  CHECK(lik_plaid_index_update(ix, &ut, &X1, &C1, &o) == LIK_OK, "update: %s", lik_last_error());
  EXPECT_FAIL(lik_plaid_index_update(ix, &ids, &X1, &C1, &o), LIK_ERR_SHAPE);
  int64_t all[41];
  lik_tensor at = t1(all, LIK_I64, 41);
  CHECK(lik_plaid_index_get_ids(ix, &at) == LIK_OK && all[3] == -1 && all[9] == -1 && all[40] == 9 &&
        all[39] == 39, "get_ids after an update");
  EXPECT_FAIL(lik_plaid_index_set_metadata_db(ix, NULL, 5), LIK_ERR_NULL);
  EXPECT_FAIL(lik_plaid_index_set_metadata_db(ix, "x", -2), LIK_ERR_VALUE);
  CHECK(lik_plaid_index_set_metadata_db(ix, "abc", 3) == LIK_OK, "set metadata");
  char dir[400], buf[8];
  snprintf(dir, sizeof dir, "%s/live", g_tmp);
  CHECK(lik_plaid_index_save(ix, dir, NULL) == LIK_OK, "save: %s", lik_last_error());
  lik_plaid_index *lx = NULL;
  CHECK(lik_plaid_index_load(dir, LIK_PLAID_LOAD_VERIFY, &lx) == LIK_OK, "load: %s", lik_last_error());
  int64_t n = 0;
  if (lx) {
    lik_plaid_index_get_info(lx, &info);
    CHECK(info.num_deleted == 4 && info.num_docs == 41 && info.next_id == 40, "loaded sizes");
    EXPECT_FAIL(lik_plaid_index_get_metadata_db(lx, buf, 2, &n), LIK_ERR_SHAPE);
    CHECK(lik_plaid_index_get_metadata_db(lx, buf, 8, &n) == LIK_OK && n == 3 && !memcmp(buf, "abc", 3),
          "metadata bytes");
    CHECK(lik_plaid_index_compact(lx) == LIK_OK, "compact: %s", lik_last_error());
    lik_plaid_index_get_info(lx, &info);
    CHECK(info.num_deleted == 0 && info.num_docs == 37 && info.next_id == 40, "compacted sizes");
    lik_tensor a37 = t1(all, LIK_I64, 37);
    CHECK(lik_plaid_index_get_ids(lx, &a37) == LIK_OK && all[36] == 9 && all[3] == 4, "ids after compact");
    EXPECT_FAIL(lik_plaid_index_delete(lx, &ids), LIK_ERR_VALUE);
    CHECK(says("ids[0]=3 is not a document of the index", NULL), "%s", lik_last_error());
    CHECK(lik_plaid_index_set_metadata_db(lx, NULL, -1) == LIK_OK, "remove metadata");
    CHECK(lik_plaid_index_save(lx, dir, NULL) == LIK_OK, "save compacted: %s", lik_last_error());
    char p2[500];
    path_of(p2, sizeof p2, dir, "metadata.sqlite");
    CHECK(access(p2, F_OK) != 0, "metadata.sqlite kept after its removal");
    lik_plaid_index_free(lx);
  }

  case_begin("untrusted living files");
  int64_t bad[2] = {5, 5};
  uint8_t file[512];
  char p3[500];
  path_of(p3, sizeof p3, dir, "deleted.npy");
  write_all(p3, file, npy_i64(file, bad, 2));
  lx = NULL;
  EXPECT_FAIL(lik_plaid_index_load(dir, 0, &lx), LIK_ERR_VALUE);
  CHECK(says("deleted.npy: entry 1 = 5 is not above the one before it", NULL), "%s", lik_last_error());
  unlink(p3);
  int64_t dup[37];
  for (int i = 0; i < 37; i++) dup[i] = i;
  dup[20] = 4;
  path_of(p3, sizeof p3, dir, "doc_ids.npy");
  write_all(p3, file, npy_i64(file, dup, 37));
  EXPECT_FAIL(lik_plaid_index_load(dir, 0, &lx), LIK_ERR_VALUE);
  CHECK(says("doc_ids.npy: id 4 is given to two documents", NULL), "%s", lik_last_error());
  dup[20] = (int64_t)1 << 62; /* next_id (above every id) would pass the int64 range */
  write_all(p3, file, npy_i64(file, dup, 37));
  EXPECT_FAIL(lik_plaid_index_load(dir, 0, &lx), LIK_ERR_VALUE);
  CHECK(says("doc_ids.npy: entry 20 = 4611686018427387904 is not an id", "[0, 2^62)"), "%s",
        lik_last_error());

  case_begin("ids never given twice: next_id.npy after a compact drops the highest ids");
  char d2[400], pn[500];
  snprintf(d2, sizeof d2, "%s/nextid", g_tmp);
  path_of(pn, sizeof pn, d2, "next_id.npy");
  lik_plaid_index *nx = build(&c, 2, 1, 7);
  int64_t top[2] = {39, 38};
  lik_tensor tt = t1(top, LIK_I64, 2);
  CHECK(nx && lik_plaid_index_save(nx, d2, NULL) == LIK_OK, "save: %s", lik_last_error());
  CHECK(access(pn, F_OK) != 0, "next_id.npy written for an index without deletes");
  CHECK(nx && lik_plaid_index_delete(nx, &tt) == LIK_OK && lik_plaid_index_save(nx, d2, NULL) == LIK_OK,
        "delete + save: %s", lik_last_error());
  CHECK(access(pn, F_OK) != 0, "next_id.npy written while doc_ids.npy / deleted.npy imply it");
  CHECK(nx && lik_plaid_index_compact(nx) == LIK_OK && lik_plaid_index_save(nx, d2, NULL) == LIK_OK,
        "compact + save: %s", lik_last_error());
  CHECK(access(pn, F_OK) == 0, "next_id.npy not written after a compact dropped ids 38, 39");
  lik_plaid_index_free(nx);
  nx = NULL;
  CHECK(lik_plaid_index_load(d2, 0, &nx) == LIK_OK, "load: %s", lik_last_error());
  if (nx) {
    lik_plaid_index_get_info(nx, &info);
    CHECK(info.num_docs == 38 && info.next_id == 40, "loaded next_id %lld, not 40", (long long)info.next_id);
    EXPECT_FAIL(lik_plaid_index_delete(nx, &tt), LIK_ERR_VALUE);
    CHECK(says("ids[0]=39 is not a document of the index", NULL), "%s", lik_last_error());
    CHECK(lik_plaid_index_add(nx, &X1, &C1, &o) == LIK_OK, "add: %s", lik_last_error());
    lik_tensor a39 = t1(all, LIK_I64, 39);
    CHECK(lik_plaid_index_get_ids(nx, &a39) == LIK_OK && all[38] == 40 && all[37] == 37,
          "the added document got id %lld, not 40 (above the deleted 39)", (long long)all[38]);
    /* an update carries it too; then ids 0..37, 40: implied again, the file goes */
    int64_t u0 = 0;
    lik_tensor u0t = t1(&u0, LIK_I64, 1);
    CHECK(lik_plaid_index_update(nx, &u0t, &X1, &C1, &o) == LIK_OK, "update: %s", lik_last_error());
    lik_plaid_index_get_info(nx, &info);
    CHECK(info.next_id == 41, "next_id after add + update: %lld", (long long)info.next_id);
    CHECK(lik_plaid_index_save(nx, d2, NULL) == LIK_OK, "save: %s", lik_last_error());
    CHECK(access(pn, F_OK) != 0, "a stale next_id.npy kept when the ids imply it");
    lik_plaid_index_free(nx);
  }

  case_begin("untrusted next_id.npy");
  nx = build(&c, 2, 1, 7);
  CHECK(nx && lik_plaid_index_delete(nx, &tt) == LIK_OK && lik_plaid_index_compact(nx) == LIK_OK &&
        lik_plaid_index_save(nx, d2, NULL) == LIK_OK, "delete + compact + save: %s", lik_last_error());
  lik_plaid_index_free(nx);
  static const struct {
    int64_t v[2], n;
    const char *says;
  } hostile[] = {{{37, 0}, 1, "next_id.npy: 37 is not above every stored id (it must be at least 38)"},
                 {{-5, 0}, 1, "next_id.npy: -5 is not above every stored id"},
                 {{(int64_t)1 << 62, 0}, 1, "is not below 2^62"},
                 {{INT64_MAX, 0}, 1, "is not below 2^62"},
                 {{45, 46}, 2, "next_id.npy: must be one int32 / int64 value"},
                 {{0, 0}, 0, "next_id.npy: must be one int32 / int64 value"}};
  for (size_t h = 0; h < sizeof hostile / sizeof hostile[0]; h++) {
    write_all(pn, file, npy_i64(file, hostile[h].v, hostile[h].n));
    nx = NULL;
    EXPECT_FAIL(lik_plaid_index_load(d2, 0, &nx), LIK_ERR_VALUE);
    CHECK(!nx && says("PLAID index", hostile[h].says), "next_id %lld: %s", (long long)hostile[h].v[0],
          lik_last_error());
    lik_plaid_index_free(nx);
  }
  write_all(pn, file, 10); /* a truncated header */
  nx = NULL;
  EXPECT_FAIL(lik_plaid_index_load(d2, 0, &nx), LIK_ERR_VALUE);
  CHECK(says("next_id.npy", NULL), "%s", lik_last_error());
  lik_plaid_index_free(nx);
  /* without doc_ids.npy: ids 0..N-1, then next_id onwards */
  path_of(p3, sizeof p3, d2, "doc_ids.npy");
  unlink(p3);
  int64_t n45 = 45;
  write_all(pn, file, npy_i64(file, &n45, 1));
  nx = NULL;
  CHECK(lik_plaid_index_load(d2, 0, &nx) == LIK_OK, "load without doc_ids.npy: %s", lik_last_error());
  if (nx) {
    lik_plaid_index_get_info(nx, &info);
    CHECK(info.next_id == 45, "next_id %lld, not 45", (long long)info.next_id);
    CHECK(lik_plaid_index_add(nx, &X1, &C1, &o) == LIK_OK, "add: %s", lik_last_error());
    lik_tensor a39 = t1(all, LIK_I64, 39);
    CHECK(lik_plaid_index_get_ids(nx, &a39) == LIK_OK && all[37] == 37 && all[38] == 45,
          "ids after an add: [37]=%lld [38]=%lld", (long long)all[37], (long long)all[38]);
    lik_plaid_index_free(nx);
  }
  rm_tree(d2);
  queries_free(&q);
  lik_plaid_index_free(ix);
  corpus_free(&c);
  rm_tree(dir);
  group_end();
}

static void group_files(void) {
  group_begin("files");
  corpus c = make_corpus(60, 16, 11, 5);
  lik_plaid_index *ix = build(&c, 2, 2, 25);
  if (!ix) {
    corpus_free(&c);
    group_end();
    return;
  }
  char good[300], bad[300], p[600];
  snprintf(good, sizeof good, "%s/good", g_tmp);
  snprintf(bad, sizeof bad, "%s/bad", g_tmp);
  rm_tree(good);
  CHECK(lik_plaid_index_save(ix, good, NULL) == LIK_OK, "save: %s", lik_last_error());
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  queries q = make_queries(&c, 2, 6, 5);
  lik_plaid_search_params sp = {0};
  sp.n_ivf_probe = info.num_centroids;
  sp.n_full_scores = 1000;
  static const char *needed[] = {"metadata.json", "centroids.npy", "bucket_cutoffs.npy",
                                 "bucket_weights.npy", "doclens.1.json", "merged_codes.npy",
                                 "merged_residuals.npy", "ivf.npy"};
  for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
    case_begin("missing %s", needed[i]);
    copy_dir(good, bad);
    path_of(p, sizeof p, bad, needed[i]);
    unlink(p);
    lik_plaid_index *lx = NULL;
    const lik_status st = lik_plaid_index_load(bad, 0, &lx);
    CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), needed[i]) && !lx,
          "load without %s: %s (%s)", needed[i], lik_status_string(st), lik_last_error());
    lik_plaid_index_free(lx);
  }
  /* edits of single files: each must fail with the file named */
#define E(f, t, n) {f, t, sizeof(t) - 1, n}
  static const struct {
    const char *file, *text;
    size_t len;
    const char *named;
  } edits[] = {
      E("metadata.json", "{\"nbits\": 3, \"num_chunks\": 3}", "nbits"),
      E("metadata.json", "{\"nbits\": 2}", "num_chunks"),
      E("metadata.json", "{\"nbits\": 2, \"num_chunks\": 3, \"num_documents\": 61}", "num_documents"),
      E("metadata.json", "{\"nbits\": 2, \"num_chunks\": 3, \"num_embeddings\": 1}", "num_embeddings"),
      E("metadata.json", "{\"nbits\": 2, \"num_chunks\": 3", "metadata.json"),
      E("metadata.json", "[1, 2]", "metadata.json"),
      E("metadata.json", "{\"nbits\": 2, \"num_chunks\": 4}", "doclens.3.json"),
      E("doclens.0.json", "[1, 2, -3]", "doclens.0.json"),
      E("doclens.0.json", "[1, 2, 3.5]", "doclens.0.json"),
      E("doclens.0.json", "[1, 2, 99999999999]", "doclens.0.json"),
      E("doclens.0.json", "[1, 2,]", "doclens.0.json"),
      E("doclens.2.json", "[1000000]", "merged_codes.npy"),
      E("centroids.npy", "\x93NUMPY\x01\x00\x20\x00{'descr': '<f2', 'fortran_order': False, 'shape': (3, 16), }", "centroids.npy"),
      E("bucket_weights.npy", "\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}", "bucket_weights.npy"),
      E("ivf_lengths.npy", "\x93NUMPY\x01\x00\x40\x00{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }             \n\x01\x00\x00\x00", "ivf_lengths.npy"),
      E("merged_codes.npy", "\x93NUMPY\x01\x00\x40\x00{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }             \n", "merged_codes.npy"),
      E("merged_codes.npy", "\x93NUMPY\x09\x00", "merged_codes.npy"),
  };
#undef E

  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
    case_begin("edited %s: %s", edits[i].file, edits[i].text);
    copy_dir(good, bad);
    path_of(p, sizeof p, bad, edits[i].file);
    write_all(p, edits[i].text, edits[i].len);
    lik_plaid_index *lx = NULL;
    const lik_status st = lik_plaid_index_load(bad, 0, &lx);
    CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), edits[i].named) && !lx,
          "load: %s (%s), expected the message to name %s", lik_status_string(st), lik_last_error(),
          edits[i].named);
    lik_plaid_index_free(lx);
  }
  /* truncations */
  static const char *trunc[] = {"merged_residuals.npy", "merged_codes.npy", "ivf.npy", "centroids.npy"};
  for (size_t i = 0; i < sizeof trunc / sizeof trunc[0]; i++) {
    case_begin("truncated %s", trunc[i]);
    copy_dir(good, bad);
    path_of(p, sizeof p, bad, trunc[i]);
    size_t n;
    uint8_t *b = read_all(p, &n);
    write_all(p, b, n - 3);
    free(b);
    lik_plaid_index *lx = NULL;
    const lik_status st = lik_plaid_index_load(bad, 0, &lx);
    CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), trunc[i]), "load: %s (%s)",
          lik_status_string(st), lik_last_error());
    lik_plaid_index_free(lx);
  }
  /* a code out of range: VERIFY finds it at load; otherwise the search reading it */
  case_begin("corrupt code");
  copy_dir(good, bad);
  path_of(p, sizeof p, bad, "merged_codes.npy");
  size_t n = 0;
  uint8_t *b = read_all(p, &n);
  const int64_t badcode = info.num_centroids + 5;
  const size_t off = 10 + (size_t)(b[8] | b[9] << 8);
  for (size_t t = off; t + 8 <= n; t += 8) memcpy(b + t, &badcode, 8);
  write_all(p, b, n);
  free(b);
  lik_plaid_index *lx = NULL;
  EXPECT_FAIL(lik_plaid_index_load(bad, LIK_PLAID_LOAD_VERIFY, &lx), LIK_ERR_VALUE);
  CHECK(lik_plaid_index_load(bad, 0, &lx) == LIK_OK, "load without verify: %s", lik_last_error());
  if (lx) {
    const lik_status st = search(lx, &q, 16, &sp, NULL, NULL);
    CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), "code"), "search of a corrupt code: %s (%s)",
          lik_status_string(st), lik_last_error());
    lik_plaid_index_free(lx);
  }
  /* an IVF entry that is no document */
  case_begin("ivf entry out of range");
  copy_dir(good, bad);
  path_of(p, sizeof p, bad, "ivf.npy");
  b = read_all(p, &n);
  const int64_t big = 1000;
  memcpy(b + n - 8, &big, 8);
  write_all(p, b, n);
  free(b);
  EXPECT_FAIL(lik_plaid_index_load(bad, 0, &lx), LIK_ERR_VALUE);
  CHECK(strstr(lik_last_error(), "ivf.npy") != NULL, "message: %s", lik_last_error());
  /* a per-chunk file wins over the merged one (older fast-plaid layout) */
  case_begin("chunk files");
  copy_dir(good, bad);
  {
    size_t nc, nr;
    uint8_t *wc, *wr;
    int64_t *codes = npy_data(good, "merged_codes.npy", &nc, &wc);
    uint8_t *res = npy_data(good, "merged_residuals.npy", &nr, &wr);
    /* chunk 0's tokens: the first doclens file's sum */
    char dl[600];
    path_of(dl, sizeof dl, good, "doclens.0.json");
    uint8_t *txt = read_all(dl, &n);
    int64_t tok = 0;
    for (char *s = (char *)txt + 1; s && *s && *s != ']';) {
      tok += strtoll(s, &s, 10);
      if (*s == ',') s++;
    }
    free(txt);
    char h[128];
    int hl = snprintf(h, sizeof h, "{'descr': '<i8', 'fortran_order': False, 'shape': (%lld,), }", (long long)tok);
    uint8_t pro[128] = "\x93NUMPY\x01\x00";
    pro[8] = (uint8_t)(118);
    pro[9] = 0;
    memset(pro + 10, ' ', 118);
    memcpy(pro + 10, h, (size_t)hl);
    pro[127] = '\n';
    path_of(p, sizeof p, bad, "0.codes.npy");
    FILE *f = fopen(p, "wb");
    fwrite(pro, 1, 128, f);
    fwrite(codes, 8, (size_t)tok, f);
    fclose(f);
    hl = snprintf(h, sizeof h, "{'descr': '|u1', 'fortran_order': False, 'shape': (%lld, 4), }", (long long)tok);
    memset(pro + 10, ' ', 118);
    memcpy(pro + 10, h, (size_t)hl);
    pro[127] = '\n';
    path_of(p, sizeof p, bad, "0.residuals.npy");
    f = fopen(p, "wb");
    fwrite(pro, 1, 128, f);
    fwrite(res, 4, (size_t)tok, f);
    fclose(f);
    /* poison the merged copy of chunk 0: the chunk files must be the ones read */
    path_of(p, sizeof p, bad, "merged_codes.npy");
    uint8_t *m = read_all(p, &n);
    memset(m + 192, 0xff, (size_t)tok * 8);
    write_all(p, m, n);
    free(m);
    free(wc);
    free(wr);
    CHECK(lik_plaid_index_load(bad, LIK_PLAID_LOAD_VERIFY, &lx) == LIK_OK, "load with chunk files: %s",
          lik_last_error());
    if (lx) {
      CHECK(search(ix, &q, 16, &sp, NULL, NULL) == LIK_OK, "search: %s", lik_last_error());
      int64_t want[10];
      memcpy(want, q.i, (size_t)(q.nq * q.k) * sizeof(int64_t));
      CHECK(search(lx, &q, 16, &sp, NULL, NULL) == LIK_OK && !memcmp(want, q.i, (size_t)(q.nq * q.k) * 8),
            "the chunk-file index searches differently: %s", lik_last_error());
      /* saving it writes the merged layout and removes the chunk files */
      char re[300];
      snprintf(re, sizeof re, "%s/resaved", g_tmp);
      rm_tree(re);
      CHECK(lik_plaid_index_save(lx, re, NULL) == LIK_OK && same_dir(good, re), "resave differs");
      lik_plaid_index_save(lx, bad, NULL);
      path_of(p, sizeof p, bad, "0.codes.npy");
      CHECK(access(p, F_OK) != 0, "0.codes.npy survived a save over the folder");
      lik_plaid_index_free(lx);
    }
  }
  /* byte flips anywhere: a status, never a crash (ASan checks the reads) */
  case_begin("byte flips");
  static const char *files[] = {"metadata.json", "centroids.npy", "bucket_cutoffs.npy",
                                "bucket_weights.npy", "doclens.0.json", "doclens.2.json", "merged_codes.npy",
                                "merged_residuals.npy", "ivf.npy", "ivf_lengths.npy",
                                "avg_residual.npy"};
  int ok = 0, failed = 0;
  for (int it = 0; it < 60; it++) {
    copy_dir(good, bad);
    const char *f = RNG_PICK(files);
    path_of(p, sizeof p, bad, f);
    b = read_all(p, &n);
    if (!b || !n) {
      free(b);
      continue;
    }
    const int nflip = (int)rng_int(1, 4);
    const size_t lim = rng_chance(0.7) && n > 200 ? 200 : n; /* mostly the headers */
    for (int k = 0; k < nflip; k++) b[rng_int(0, (int64_t)lim - 1)] ^= (uint8_t)rng_int(1, 255);
    size_t keepn = rng_chance(0.2) ? (size_t)rng_int(0, (int64_t)n) : n;
    write_all(p, b, keepn);
    free(b);
    const lik_status st = lik_plaid_index_load(bad, rng_chance(0.5) ? LIK_PLAID_LOAD_VERIFY : 0, &lx);
    if (st == LIK_OK) {
      ok++;
      const lik_status s2 = search(lx, &q, 16, &sp, NULL, NULL);
      CHECK(s2 == LIK_OK || (s2 == LIK_ERR_VALUE && lik_last_error()[0]), "search after a flip in %s: %s", f,
            lik_status_string(s2));
      lik_plaid_index_free(lx);
    } else {
      failed++;
      CHECK(st == LIK_ERR_VALUE && lik_last_error()[0] && !lx, "flip in %s: %s (%s)", f,
            lik_status_string(st), lik_last_error());
    }
  }
  printf("    byte flips: %d loaded, %d refused\n", ok, failed);
  queries_free(&q);
  lik_plaid_index_free(ix);
  corpus_free(&c);
  group_end();
}

int main(int argc, char **argv) {
  (void)argc;
  test_init("test_plaid_index");
  snprintf(g_tmp, sizeof g_tmp, "/tmp/lik_test_plaid_XXXXXX");
  if (!mkdtemp(g_tmp)) {
    printf("cannot create a temporary folder\n");
    return 1;
  }
  group_roundtrip();
  group_exact();
  group_one_query_threads();
  group_add();
  group_expand();
  group_errors();
  group_living();
  group_device();
  group_device_build();
  group_files();
  static const char *sub[] = {"a", "b", "x", "part", "ea", "eb", "x0", "x1", "x2", "x3", "good", "bad", "resaved"};
  for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", g_tmp, sub[i]);
    rm_tree(p);
  }
  rmdir(g_tmp);
  (void)argv;
  return test_finish("test_plaid_index");
}
