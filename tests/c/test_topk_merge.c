/*
 * test_topk_merge.c — lik_topk_merge (lik_experimental.h) against a reference
 * written here: every list's valid entries collected and insertion-sorted by
 * (score descending, NaN last, lower id, lower list).  Groups:
 *   random    random lists (ties from a small value set, NaN, +-0, +-inf,
 *             ids shared across lists), lengths or none, random strides,
 *             padding past the lengths full of NaN / -1 (never read), threads;
 *   order     hand-written cases of the order rule (NaN, -0 / +0, inf, an id
 *             in two lists);
 *   shards    lik_retrieve on contiguous shards (empty ones too, duplicated
 *             documents across shards) + lik_topk_merge == lik_retrieve on
 *             the whole corpus, bitwise;
 *   errors    every error status and the names in its message.
 *
 *   test_topk_merge [group ...]    LIK_TEST_SEED=<n> reproduces a run.
 */
#include "lik_experimental.h"
#include "lik_test_util.h"

/* ---- reference ------------------------------------------------------------- */

typedef struct {
  float s;
  int64_t id;
  int64_t list;
} cand_t;

static int ref_before(const cand_t *a, const cand_t *b) {
  const int an = a->s != a->s, bn = b->s != b->s;
  if (an != bn) return bn;
  if (!an && a->s > b->s) return 1;
  if (!an && a->s < b->s) return 0;
  if (a->id != b->id) return a->id < b->id;
  return a->list < b->list;
}

static void ref_sort(cand_t *c, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    const cand_t x = c[i];
    int64_t j = i;
    while (j > 0 && ref_before(&x, &c[j - 1])) {
      c[j] = c[j - 1];
      j--;
    }
    c[j] = x;
  }
}

static float *f32_at(const lik_tensor *t, const int64_t *idx) {
  return (float *)t->data + t_offset(t, idx);
}
static int64_t *i64_at(const lik_tensor *t, const int64_t *idx) {
  return (int64_t *)t->data + t_offset(t, idx);
}
static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ---- random cases ------------------------------------------------------------ */

static const float VALS[] = {3.0f, 1.5f, 1.0f, 0.0f, -0.0f, -2.0f, INFINITY, -INFINITY};

static float draw_score(double p_nan) {
  if (rng_chance(p_nan)) return NAN;
  if (rng_chance(0.5)) return RNG_PICK(VALS);
  return (float)rng_range(-4, 4);
}

typedef struct {
  int64_t R, nq, K, top_k;
  int with_len, threads, shared_ids;
  double p_nan;
  layout_t lS, lI, lL, lOS, lOI;
} mcase_t;

/* Builds the inputs of c (lists sorted by the reference order), runs
 * lik_topk_merge and compares with the reference. */
static void run_mcase(const mcase_t *c) {
  char l[5][64];
  layout_str(&c->lS, l[0], 64);
  layout_str(&c->lI, l[1], 64);
  layout_str(&c->lL, l[2], 64);
  layout_str(&c->lOS, l[3], 64);
  layout_str(&c->lOI, l[4], 64);
  case_begin("merge R=%lld Nq=%lld K=%lld top_k=%lld len=%d threads=%d shared=%d nan=%.2f "
             "S%s I%s L%s OS%s OI%s",
             (long long)c->R, (long long)c->nq, (long long)c->K, (long long)c->top_k,
             c->with_len, c->threads, c->shared_ids, c->p_nan, l[0], l[1], l[2], l[3], l[4]);
  const int64_t in_shape[3] = {c->R, c->nq, c->K}, len_shape[2] = {c->R, c->nq},
                out_shape[2] = {c->nq, c->top_k};
  view_t vS, vI, vL, vOS, vOI;
  view_make(&vS, LIK_F32, 3, in_shape, c->lS, 0xFF); /* padding: NaN */
  view_make(&vI, LIK_I64, 3, in_shape, c->lI, 0xFF); /* padding: -1  */
  view_make(&vOS, LIK_F32, 2, out_shape, c->lOS, 0xCD);
  view_make(&vOI, LIK_I64, 2, out_shape, c->lOI, 0xCD);
  if (c->with_len) view_make(&vL, LIK_I64, 2, len_shape, c->lL, 0xEE);
  const int64_t maxc = c->R * c->K > 0 ? c->R * c->K : 1;
  cand_t *all = (cand_t *)malloc(sizeof(cand_t) * (size_t)maxc);
  cand_t *list = (cand_t *)malloc(sizeof(cand_t) * (size_t)(c->K > 0 ? c->K : 1));
  int64_t *lens = (int64_t *)malloc(sizeof(int64_t) * (size_t)(c->R * c->nq + 1));
  /* Lengths first: a broadcast (stride 0) lengths view has one value per r. */
  for (int64_t r = 0; r < c->R; r++)
    for (int64_t q = 0; q < c->nq; q++) {
      int64_t n = c->K;
      if (c->with_len) {
        const int64_t idx[2] = {r, q};
        const int alias = q > 0 && vL.t.strides[1] == 0;
        n = alias ? *i64_at(&vL.t, idx) : rng_int(0, c->K);
        *i64_at(&vL.t, idx) = n;
      }
      lens[r * c->nq + q] = n;
    }
  int64_t min_total = INT64_MAX;
  for (int64_t q = 0; q < c->nq; q++) {
    int64_t total = 0, next_id = rng_int(-5, 5);
    for (int64_t r = 0; r < c->R; r++) {
      const int64_t n = lens[r * c->nq + q];
      for (int64_t p = 0; p < n; p++) {
        list[p].s = draw_score(c->p_nan);
        /* distinct ids within a list; across lists shared ids when asked */
        list[p].id = c->shared_ids ? p * 3 + rng_int(0, 2) : next_id++;
        list[p].list = r;
      }
      ref_sort(list, n);
      for (int64_t p = 0; p < n; p++) {
        const int64_t idx[3] = {r, q, p};
        *f32_at(&vS.t, idx) = list[p].s;
        *i64_at(&vI.t, idx) = list[p].id;
      }
      total += n;
    }
    if (total < min_total) min_total = total;
  }
  view_snapshot(&vS);
  view_snapshot(&vI);
  if (c->with_len) view_snapshot(&vL);
  lik_options o = LIK_OPTIONS_INIT;
  o.num_threads = c->threads;
  const lik_status st = lik_topk_merge(&vS.t, &vI.t, c->with_len ? &vL.t : NULL, c->top_k, &o,
                                       &vOS.t, &vOI.t);
  const int enough = c->nq == 0 || min_total >= c->top_k;
  if (!enough) {
    CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), "exceeds"),
          "fewer than top_k candidates: status %s, message \"%s\"", lik_status_string(st),
          lik_last_error());
  } else if (st != LIK_OK) {
    CHECK(0, "status %s: %s", lik_status_string(st), lik_last_error());
  } else {
    for (int64_t q = 0; q < c->nq; q++) {
      int64_t n = 0;
      for (int64_t r = 0; r < c->R; r++)
        for (int64_t p = 0; p < lens[r * c->nq + q]; p++) {
          const int64_t idx[3] = {r, q, p};
          all[n].s = *f32_at(&vS.t, idx);
          all[n].id = *i64_at(&vI.t, idx);
          all[n++].list = r;
        }
      ref_sort(all, n);
      for (int64_t p = 0; p < c->top_k; p++) {
        const int64_t idx[2] = {q, p};
        const float s = *f32_at(&vOS.t, idx);
        const int64_t id = *i64_at(&vOI.t, idx);
        CHECK(same_bits(s, all[p].s) && id == all[p].id,
              "query %lld rank %lld: got (%g, %lld), expected (%g, %lld) of list %lld",
              (long long)q, (long long)p, (double)s, (long long)id, (double)all[p].s,
              (long long)all[p].id, (long long)all[p].list);
      }
    }
    CHECK(view_outside_written(&vOS) == 0, "out_scores: written outside the view");
    CHECK(view_outside_written(&vOI) == 0, "out_indices: written outside the view");
  }
  CHECK(view_unchanged(&vS) && view_unchanged(&vI) && (!c->with_len || view_unchanged(&vL)),
        "an input was modified");
  free(all);
  free(list);
  free(lens);
  view_free(&vS);
  view_free(&vI);
  view_free(&vOS);
  view_free(&vOI);
  if (c->with_len) view_free(&vL);
}

static mcase_t mcase_random(void) {
  mcase_t c;
  memset(&c, 0, sizeof c);
  c.R = rng_int(1, 6);
  c.nq = rng_int(0, 5);
  c.K = rng_int(0, 12);
  c.with_len = rng_chance(0.6);
  c.shared_ids = rng_chance(0.3);
  c.p_nan = rng_chance(0.3) ? 0.2 : 0.0;
  c.threads = (int)rng_int(0, 3);
  c.lS = c.lI = c.lL = c.lOS = c.lOI = LAYOUT_DENSE;
  if (rng_chance(0.5)) {
    c.lS = random_layout(3);
    c.lI = random_layout(3);
    c.lL = random_layout(2);
    c.lOS = random_layout(2);
    c.lOI = random_layout(2);
  }
  if (rng_chance(0.2)) c.lL.bcast = 2u; /* one length per list */
  const int64_t most = c.with_len ? c.R * c.K / 2 + 1 : c.R * c.K;
  c.top_k = rng_int(1, most > 0 ? most + 1 : 1);
  return c;
}

static void group_random(void) {
  group_begin("random");
  for (int r = 0; r < 400; r++) {
    mcase_t c = mcase_random();
    run_mcase(&c);
  }
  /* Many queries (several thread tasks): threads 1, 2, 3, 7 agree with the reference. */
  for (int r = 0; r < 8; r++) {
    mcase_t c = mcase_random();
    c.nq = rng_int(65, 300);
    c.with_len = 0;
    c.K = rng_int(1, 8);
    c.top_k = rng_int(1, c.R * c.K);
    c.threads = (int[]){1, 2, 3, 7}[r % 4];
    run_mcase(&c);
  }
  group_end();
}

/* ---- hand-written order cases ------------------------------------------------- */

/* R lists of up to 4 entries for one query; expect the first k of want. */
static void order_case(const char *what, int64_t R, const int64_t *n, const float (*s)[4],
                       const int64_t (*id)[4], int64_t k, const float *ws, const int64_t *wi) {
  case_begin("order: %s", what);
  float S[8][4];
  int64_t I[8][4], L[8];
  for (int64_t r = 0; r < R; r++) {
    L[r] = n[r];
    for (int p = 0; p < 4; p++) {
      S[r][p] = p < n[r] ? s[r][p] : NAN;
      I[r][p] = p < n[r] ? id[r][p] : -7;
    }
  }
  float os[8];
  int64_t oi[8];
  lik_tensor tS = {S, LIK_F32, 3, {R, 1, 4}, {4, 4, 1}, LIK_CPU, 0};
  lik_tensor tI = {I, LIK_I64, 3, {R, 1, 4}, {4, 4, 1}, LIK_CPU, 0};
  lik_tensor tL = {L, LIK_I64, 2, {R, 1}, {1, 1}, LIK_CPU, 0};
  lik_tensor tOS = {os, LIK_F32, 2, {1, k}, {k, 1}, LIK_CPU, 0};
  lik_tensor tOI = {oi, LIK_I64, 2, {1, k}, {k, 1}, LIK_CPU, 0};
  const lik_status st = lik_topk_merge(&tS, &tI, &tL, k, NULL, &tOS, &tOI);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  if (st != LIK_OK) return;
  for (int64_t p = 0; p < k; p++)
    CHECK(same_bits(os[p], ws[p]) && oi[p] == wi[p], "rank %lld: got (%g, %lld), expected (%g, %lld)",
          (long long)p, (double)os[p], (long long)oi[p], (double)ws[p], (long long)wi[p]);
}

static void group_order(void) {
  group_begin("order");
  {
    const int64_t n[2] = {2, 2};
    const float s[2][4] = {{1.0f, NAN}, {0.5f, NAN}};
    const int64_t id[2][4] = {{5, 0}, {2, 3}};
    const float ws[4] = {1.0f, 0.5f, NAN, NAN};
    const int64_t wi[4] = {5, 2, 0, 3};
    order_case("NaN below every number, NaNs by id", 2, n, s, id, 4, ws, wi);
  }
  {
    const int64_t n[2] = {2, 2};
    const float s[2][4] = {{0.0f, -1.0f}, {-0.0f, -INFINITY}};
    const int64_t id[2][4] = {{7, 1}, {3, 0}};
    const float ws[4] = {-0.0f, 0.0f, -1.0f, -INFINITY};
    const int64_t wi[4] = {3, 7, 1, 0};
    order_case("-0 == +0 (lower id first), -inf last of numbers", 2, n, s, id, 4, ws, wi);
  }
  {
    const int64_t n[3] = {1, 2, 0};
    const float s[3][4] = {{2.0f}, {INFINITY, 2.0f}, {0}};
    const int64_t id[3][4] = {{4}, {9, 4}, {0}};
    const float ws[3] = {INFINITY, 2.0f, 2.0f};
    const int64_t wi[3] = {9, 4, 4};
    order_case("one id in two lists: both kept", 3, n, s, id, 3, ws, wi);
  }
  {
    const int64_t n[2] = {3, 1};
    const float s[2][4] = {{1.0f, 1.0f, 1.0f}, {1.0f}};
    const int64_t id[2][4] = {{-3, 10, 11}, {2}};
    const float ws[2] = {1.0f, 1.0f};
    const int64_t wi[2] = {-3, 2};
    order_case("ties across lists go to the lower id; k < candidates", 2, n, s, id, 2, ws, wi);
  }
  group_end();
}

/* ---- shards: merge of shard-wise lik_retrieve == lik_retrieve ---------------- */

static void group_shards(void) {
  group_begin("shards");
  for (int rep = 0; rep < 24; rep++) {
    const int64_t nq = rng_int(1, 4), Lq = rng_int(1, 6), Ld = rng_int(1, 7), d = rng_int(1, 20);
    const int64_t R = rng_int(1, 5);
    int64_t size[5], off[6] = {0};
    for (int64_t r = 0; r < R; r++) {
      size[r] = rng_chance(0.25) ? 0 : rng_int(1, 30);
      off[r + 1] = off[r] + size[r];
    }
    const int64_t nd = off[R];
    if (nd == 0) continue;
    const int64_t top_k = rng_int(1, nd);
    const int normalize = rep & 1;
    case_begin("shards R=%lld Nd=%lld Nq=%lld Lq=%lld Ld=%lld d=%lld top_k=%lld norm=%d",
               (long long)R, (long long)nd, (long long)nq, (long long)Lq, (long long)Ld,
               (long long)d, (long long)top_k, normalize);
    float *Q = (float *)malloc(sizeof(float) * (size_t)(nq * Lq * d));
    float *D = (float *)malloc(sizeof(float) * (size_t)(nd * Ld * d));
    for (int64_t e = 0; e < nq * Lq * d; e++) Q[e] = (float)rng_int(-2, 2);
    for (int64_t j = 0; j < nd; j++) {
      if (j > 0 && rng_chance(0.4)) { /* a duplicate of an earlier document: exact tie */
        memcpy(D + j * Ld * d, D + rng_int(0, j - 1) * Ld * d, sizeof(float) * (size_t)(Ld * d));
        continue;
      }
      for (int64_t e = 0; e < Ld * d; e++) D[j * Ld * d + e] = (float)rng_int(-2, 2);
    }
    lik_options o = LIK_OPTIONS_INIT;
    o.normalize = normalize;
    lik_tensor tQ = {Q, LIK_F32, 3, {nq, Lq, d}, {Lq * d, d, 1}, LIK_CPU, 0};
    lik_tensor tD = {D, LIK_F32, 3, {nd, Ld, d}, {Ld * d, d, 1}, LIK_CPU, 0};
    float *ws = (float *)malloc(sizeof(float) * (size_t)(nq * top_k));
    int64_t *wi = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nq * top_k));
    lik_tensor tWS = {ws, LIK_F32, 2, {nq, top_k}, {top_k, 1}, LIK_CPU, 0};
    lik_tensor tWI = {wi, LIK_I64, 2, {nq, top_k}, {top_k, 1}, LIK_CPU, 0};
    lik_status st = lik_retrieve(&tQ, &tD, NULL, NULL, top_k, &o, &tWS, &tWI);
    CHECK(st == LIK_OK, "whole corpus: %s", lik_last_error());
    /* candidates [R, Nq, top_k], lengths [R] broadcast over Nq */
    float *cs = (float *)malloc(sizeof(float) * (size_t)(R * nq * top_k));
    int64_t *ci = (int64_t *)malloc(sizeof(int64_t) * (size_t)(R * nq * top_k));
    int64_t len[5];
    for (int64_t r = 0; r < R && st == LIK_OK; r++) {
      len[r] = size[r] < top_k ? size[r] : top_k;
      if (!len[r]) continue;
      lik_tensor tDr = tD;
      tDr.data = D + off[r] * Ld * d;
      tDr.shape[0] = size[r];
      lik_tensor tCS = {cs + r * nq * top_k, LIK_F32, 2, {nq, len[r]}, {top_k, 1}, LIK_CPU, 0};
      lik_tensor tCI = {ci + r * nq * top_k, LIK_I64, 2, {nq, len[r]}, {top_k, 1}, LIK_CPU, 0};
      st = lik_retrieve(&tQ, &tDr, NULL, NULL, top_k, &o, &tCS, &tCI);
      CHECK(st == LIK_OK, "shard %lld: %s", (long long)r, lik_last_error());
      for (int64_t q = 0; q < nq; q++)
        for (int64_t p = 0; p < len[r]; p++) ci[(r * nq + q) * top_k + p] += off[r];
    }
    if (st == LIK_OK) {
      float *ms = (float *)malloc(sizeof(float) * (size_t)(nq * top_k));
      int64_t *mi = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nq * top_k));
      lik_tensor tCS = {cs, LIK_F32, 3, {R, nq, top_k}, {nq * top_k, top_k, 1}, LIK_CPU, 0};
      lik_tensor tCI = {ci, LIK_I64, 3, {R, nq, top_k}, {nq * top_k, top_k, 1}, LIK_CPU, 0};
      lik_tensor tL = {len, LIK_I64, 2, {R, nq}, {1, 0}, LIK_CPU, 0};
      lik_tensor tMS = {ms, LIK_F32, 2, {nq, top_k}, {top_k, 1}, LIK_CPU, 0};
      lik_tensor tMI = {mi, LIK_I64, 2, {nq, top_k}, {top_k, 1}, LIK_CPU, 0};
      st = lik_topk_merge(&tCS, &tCI, &tL, top_k, NULL, &tMS, &tMI);
      CHECK(st == LIK_OK, "merge: %s", lik_last_error());
      if (st == LIK_OK)
        CHECK(!memcmp(ms, ws, sizeof(float) * (size_t)(nq * top_k)) &&
                  !memcmp(mi, wi, sizeof(int64_t) * (size_t)(nq * top_k)),
              "merged shard results differ from lik_retrieve on the whole corpus");
      free(ms);
      free(mi);
    }
    free(Q);
    free(D);
    free(ws);
    free(wi);
    free(cs);
    free(ci);
  }
  group_end();
}

/* ---- errors ------------------------------------------------------------------- */

static void expect_err(const char *what, lik_status got, lik_status want, const char *needle1,
                       const char *needle2) {
  case_begin("error: %s", what);
  const char *msg = lik_last_error();
  CHECK(got == want && strstr(msg, needle1) && (!needle2 || strstr(msg, needle2)),
        "%s: got %s \"%s\", expected %s naming \"%s\"%s%s", what, lik_status_string(got), msg,
        lik_status_string(want), needle1, needle2 ? " and " : "", needle2 ? needle2 : "");
}

static void group_errors(void) {
  group_begin("errors");
  float S[2][1][3] = {{{3, 2, 1}}, {{5, 4, 0}}};
  int64_t I[2][1][3] = {{{0, 1, 2}}, {{3, 4, 5}}};
  int64_t L[2][1] = {{3}, {3}};
  float os[4];
  int64_t oi[4];
  const lik_tensor tS = {S, LIK_F32, 3, {2, 1, 3}, {3, 3, 1}, LIK_CPU, 0};
  const lik_tensor tI = {I, LIK_I64, 3, {2, 1, 3}, {3, 3, 1}, LIK_CPU, 0};
  const lik_tensor tL = {L, LIK_I64, 2, {2, 1}, {1, 1}, LIK_CPU, 0};
  const lik_tensor tOS = {os, LIK_F32, 2, {1, 4}, {4, 1}, LIK_CPU, 0};
  const lik_tensor tOI = {oi, LIK_I64, 2, {1, 4}, {4, 1}, LIK_CPU, 0};
  lik_tensor a, b, c, e, f;
#define RESET() (a = tS, b = tI, c = tL, e = tOS, f = tOI)
  RESET();
  expect_err("valid call", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_OK, "", NULL);
  CHECK(os[0] == 5 && oi[0] == 3 && os[3] == 2 && oi[3] == 1, "valid call: wrong result");
  expect_err("scores NULL", lik_topk_merge(NULL, &b, &c, 4, NULL, &e, &f), LIK_ERR_NULL, "scores", NULL);
  expect_err("out_indices NULL", lik_topk_merge(&a, &b, &c, 4, NULL, &e, NULL), LIK_ERR_NULL, "out_indices", NULL);
  a.ndim = 2;
  expect_err("scores 2-D", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_SHAPE, "scores", "3 dimensions");
  RESET();
  a.dtype = LIK_F64;
  expect_err("scores float64", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_DTYPE, "scores", "float32");
  RESET();
  b.dtype = LIK_I32;
  expect_err("indices int32", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_DTYPE, "indices", "int64");
  RESET();
  b.shape[2] = 2;
  expect_err("indices shape", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_SHAPE, "indices", "[2, 1, 3]");
  RESET();
  c.shape[0] = 3;
  expect_err("lengths shape", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_SHAPE, "lengths", "[2, 1]");
  RESET();
  c.dtype = LIK_F32;
  expect_err("lengths dtype", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_DTYPE, "lengths", "int64");
  RESET();
  expect_err("top_k 0", lik_topk_merge(&a, &b, &c, 0, NULL, &e, &f), LIK_ERR_VALUE, "top_k", ">= 1");
  e.shape[1] = 3;
  expect_err("out_scores shape", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_SHAPE, "out_scores", "[1, 4]");
  RESET();
  f.dtype = LIK_I32;
  expect_err("out_indices dtype", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_DTYPE, "out_indices", NULL);
  RESET();
  e.strides[1] = 0;
  expect_err("out_scores stride 0", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_SHAPE, "out_scores", "stride 0");
  RESET();
  L[1][0] = 4;
  expect_err("length > K", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_VALUE, "lengths", "K=3");
  L[1][0] = -1;
  expect_err("length < 0", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_VALUE, "[1, 0] = -1", NULL);
  L[0][0] = 1;
  L[1][0] = 2;
  expect_err("top_k > candidates", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_VALUE,
             "top_k=4 exceeds the 3 candidates of query 0", NULL);
  L[0][0] = L[1][0] = 3;
  expect_err("top_k > candidates, no lengths", lik_topk_merge(&a, &b, NULL, 7, NULL, &e, &f),
             LIK_ERR_SHAPE, "out_scores", NULL); /* outputs are [1, 4]: the shape check first */
  {
    float s7[1][7];
    int64_t i7[1][7];
    lik_tensor g = {s7, LIK_F32, 2, {1, 7}, {7, 1}, LIK_CPU, 0};
    lik_tensor h = {i7, LIK_I64, 2, {1, 7}, {7, 1}, LIK_CPU, 0};
    expect_err("top_k 7 > 6 candidates", lik_topk_merge(&a, &b, NULL, 7, NULL, &g, &h),
               LIK_ERR_VALUE, "top_k=7 exceeds the 6 candidates", NULL);
  }
  S[1][0][1] = 6;
  expect_err("unsorted list", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_VALUE,
             "list 1 of query 0 is not sorted", "entries 0, 1");
  S[1][0][1] = 4;
  S[0][0][0] = NAN;
  expect_err("NaN before a number", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_VALUE,
             "list 0 of query 0 is not sorted", NULL);
  S[0][0][0] = 2;
  I[0][0][1] = 0;
  expect_err("one id twice with equal scores", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f),
             LIK_ERR_VALUE, "list 0 of query 0 is not sorted", NULL);
  S[0][0][0] = 3;
  I[0][0][1] = 1;
  a.device = LIK_CUDA;
  b.device = LIK_CUDA;
  c.device = LIK_CUDA;
  e.device = LIK_CUDA;
  f.device = LIK_CUDA;
  expect_err("CUDA tensors", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_UNSUPPORTED, "CPU", NULL);
  RESET();
  f.device = LIK_CUDA;
  expect_err("mixed devices", lik_topk_merge(&a, &b, &c, 4, NULL, &e, &f), LIK_ERR_DEVICE, "out_indices", NULL);
  RESET();
  {
    lik_tensor z1 = {NULL, LIK_F32, 3, {0, 0, 3}, {0, 3, 1}, LIK_CPU, 0};
    lik_tensor z2 = {NULL, LIK_I64, 3, {0, 0, 3}, {0, 3, 1}, LIK_CPU, 0};
    lik_tensor z3 = {NULL, LIK_F32, 2, {0, 2}, {2, 1}, LIK_CPU, 0};
    lik_tensor z4 = {NULL, LIK_I64, 2, {0, 2}, {2, 1}, LIK_CPU, 0};
    expect_err("R = 0, Nq = 0: nothing to do", lik_topk_merge(&z1, &z2, NULL, 2, NULL, &z3, &z4),
               LIK_OK, "", NULL);
    z1.shape[1] = z2.shape[1] = z3.shape[0] = z4.shape[0] = 1;
    z3.data = os;
    z4.data = oi;
    expect_err("R = 0, Nq = 1", lik_topk_merge(&z1, &z2, NULL, 2, NULL, &z3, &z4), LIK_ERR_VALUE,
               "exceeds the 0 candidates", NULL);
  }
#undef RESET
  group_end();
}

int main(int argc, char **argv) {
  test_init("test_topk_merge");
  struct {
    const char *name;
    void (*fn)(void);
  } groups[] = {{"random", group_random},
                {"order", group_order},
                {"shards", group_shards},
                {"errors", group_errors}};
  const int ng = (int)(sizeof groups / sizeof *groups);
  for (int g = 0; g < ng; g++) {
    int run = argc < 2;
    for (int a = 1; a < argc; a++)
      if (!strcmp(argv[a], groups[g].name)) run = 1;
    if (run) groups[g].fn();
  }
  return test_finish("test_topk_merge");
}
