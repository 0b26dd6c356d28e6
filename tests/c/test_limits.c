/*
 * test_limits.c — extreme sizes, non-finite similarities and aliasing (issue
 * 22): every dtype path refuses sequence lengths beyond INT32_MAX with the
 * same status, scratch sizes that overflow fail with LIK_ERR_ALLOC instead of
 * wrapping, a valid -inf similarity is a legitimate max (lik.h), and outputs
 * may not share memory with inputs, other outputs or themselves.  Stride-0
 * views stand for the huge tensors: nothing big is allocated.
 */
#include "lik_experimental.h"
#include "lik_test_util.h"

static const lik_dtype FLOATS[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};

static lik_tensor V(void *data, lik_dtype dt, int ndim, const int64_t *shape,
                    const int64_t *strides) {
  lik_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  t.device = LIK_CPU;
  for (int i = 0; i < ndim; i++) {
    t.shape[i] = shape[i];
    t.strides[i] = strides[i];
  }
  return t;
}
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/* A dense row-major view. */
static lik_tensor dense(void *data, lik_dtype dt, int ndim, const int64_t *shape) {
  int64_t st[LIK_MAX_DIMS], run = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = run;
    run *= shape[i] > 0 ? shape[i] : 1;
  }
  return V(data, dt, ndim, shape, st);
}

/* Checks a refused call: its status, that the message holds the substrings,
 * and that it took under a second (it never touched the data). */
static void expect_(lik_status got, lik_status want, double secs, const char *sub1,
                    const char *sub2) {
  const char *msg = lik_last_error();
  CHECK(got == want, "status %s, expected %s ('%s')", lik_status_string(got),
        lik_status_string(want), msg);
  if (sub1) CHECK(strstr(msg, sub1), "message '%s' lacks '%s'", msg, sub1);
  if (sub2) CHECK(strstr(msg, sub2), "message '%s' lacks '%s'", msg, sub2);
  CHECK(secs < 1.0, "took %.2f s", secs);
}
#define EXPECT(call, want, sub1, sub2)                \
  do {                                                \
    const double t0_ = now_s();                       \
    const lik_status st_ = (call);                    \
    expect_(st_, want, now_s() - t0_, sub1, sub2);    \
  } while (0)

static double zeros[64]; /* backing of the stride-0 views: any dtype */

/* ---- sequence lengths: > INT32_MAX refused on every path ---------------------- */

static void group_lengths(void) {
  group_begin("lengths");
  const int64_t big = ((int64_t)1 << 31) + 3;
  float sc[4];
  int32_t am[8];
  int64_t ri[1];
  for (size_t k = 0; k < sizeof FLOATS / sizeof *FLOATS; k++) {
    const lik_dtype dt = FLOATS[k];
    lik_tensor Qs = V(zeros, dt, 3, DIMS(1, 2, 4), DIMS(0, 0, 1));
    lik_tensor Ql = V(zeros, dt, 3, DIMS(1, big, 4), DIMS(0, 0, 1));
    lik_tensor Dl = V(zeros, dt, 3, DIMS(1, big, 4), DIMS(0, 0, 1));
    lik_tensor Dd = V(zeros, dt, 3, DIMS(1, ((int64_t)1 << 31), 4), DIMS(0, 0, 1));
    lik_tensor S = dense(sc, LIK_F32, 2, DIMS(1, 1));
    lik_tensor A = dense(am, LIK_I32, 3, DIMS(1, 1, 2));
    lik_tensor S1 = dense(sc, LIK_F32, 1, DIMS(1));
    lik_tensor A1 = dense(am, LIK_I32, 2, DIMS(1, 2));
    lik_tensor RI = dense(ri, LIK_I64, 2, DIMS(1, 1));
    lik_tensor G = dense(sc + 2, LIK_F32, 2, DIMS(1, 1));
    lik_tensor G1 = dense(sc + 2, LIK_F32, 1, DIMS(1));
    for (int i = 0; i < 8; i++) am[i] = 0x5A5A5A5A;

    case_begin("%s: maxsim, Ld = 2^31 + 3", dtype_str(dt));
    EXPECT(lik_maxsim(&Qs, &Dl, NULL, NULL, NULL, &S, &A), LIK_ERR_SHAPE,
           "D: sequence length Ld=2147483651", "2147483647");
    CHECK(am[0] == 0x5A5A5A5A && am[1] == 0x5A5A5A5A, "argmax written by a refused call");
    case_begin("%s: maxsim, Lq = Ld = 2^31", dtype_str(dt));
    lik_tensor Qd = V(zeros, dt, 3, DIMS(1, ((int64_t)1 << 31), 4), DIMS(0, 0, 1));
    EXPECT(lik_maxsim(&Qd, &Dd, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE,
           "Q: sequence length Lq=2147483648", NULL);
    case_begin("%s: maxsim_pairs, Lq = 2^31 + 3", dtype_str(dt));
    EXPECT(lik_maxsim_pairs(&Ql, &Qs, NULL, NULL, NULL, &S1, NULL), LIK_ERR_SHAPE,
           "Q: sequence length Lq=2147483651", NULL);
    case_begin("%s: retrieve, Ld = 2^31 + 3", dtype_str(dt));
    EXPECT(lik_retrieve(&Qs, &Dl, NULL, NULL, 1, NULL, &S, &RI), LIK_ERR_SHAPE,
           "D: sequence length Ld=2147483651", NULL);
    case_begin("%s: maxsim_backward, Ld = 2^31 + 3", dtype_str(dt));
    EXPECT(lik_maxsim_backward(&Qs, &Dl, NULL, NULL, &A, &G, NULL, NULL, NULL), LIK_ERR_SHAPE,
           "D: sequence length Ld=2147483651", NULL);
    case_begin("%s: maxsim_pairs_backward, Ld = 2^31 + 3", dtype_str(dt));
    EXPECT(lik_maxsim_pairs_backward(&Qs, &Dl, NULL, NULL, &A1, &G1, NULL, NULL, NULL),
           LIK_ERR_SHAPE, "D: sequence length Ld=2147483651", NULL);

    /* packed: one query of 2^31 + 1 rows (broadcast) */
    case_begin("%s: maxsim_varlen, one sequence of 2^31 + 1 tokens", dtype_str(dt));
    const int64_t rows = ((int64_t)1 << 31) + 1;
    int64_t cuq[2] = {0, rows}, cud[2] = {0, 1};
    lik_tensor Qp = V(zeros, dt, 2, DIMS(rows, 4), DIMS(0, 1));
    lik_tensor Dp = V(zeros, dt, 2, DIMS(1, 4), DIMS(0, 1));
    lik_tensor CQ = dense(cuq, LIK_I64, 1, DIMS(2)), CD = dense(cud, LIK_I64, 1, DIMS(2));
    EXPECT(lik_maxsim_varlen(&Qp, &Dp, &CQ, &CD, NULL, NULL, NULL, &S, NULL), LIK_ERR_VALUE,
           "cu_seqlens_q: sequence 0 has 2147483649 tokens", NULL);
  }
  group_end();
}

/* ---- scratch sizes that overflow: LIK_ERR_ALLOC, never a wrapped size ------------ */

static void group_scratch(void) {
  group_begin("scratch");
  const lik_dtype dts[] = {LIK_F32, LIK_F16, LIK_BF16}; /* the fp32-compute driver */
  for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
    const lik_dtype dt = dts[k];
    const int64_t m = INT32_MAX; /* Lq = d = INT32_MAX, within the limits */
    lik_tensor Q = V(zeros, dt, 3, DIMS(1, m, m), DIMS(0, 0, 0));
    lik_tensor D = V(zeros, dt, 3, DIMS(1, 1, m), DIMS(0, 0, 0));
    float sc[2];
    int64_t ix[2];
    lik_tensor S = dense(sc, LIK_F32, 2, DIMS(1, 1));
    case_begin("%s: maxsim, Lq = d = INT32_MAX", dtype_str(dt));
    EXPECT(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_ALLOC,
           "Lq=2147483647", "d=2147483647");
    case_begin("%s: retrieve, Lq = d = INT32_MAX", dtype_str(dt));
    lik_tensor I = dense(ix, LIK_I64, 2, DIMS(1, 1));
    EXPECT(lik_retrieve(&Q, &D, NULL, NULL, 1, NULL, &S, &I), LIK_ERR_ALLOC,
           "Lq=2147483647", "d=2147483647");
  }
  /* A size from hostile counts (issue 27 B): a product that wrapped to a small
   * allocation, then written past, is LIK_ERR_ALLOC naming the shape. */
  float cut[3], wts[4];
  lik_tensor CUT = dense(cut, LIK_F32, 1, DIMS(3)), W = dense(wts, LIK_F32, 1, DIMS(4));
  case_begin("codec_train: a [2^62 + 1] sample (its fp32 copy's 2^64 + 4 bytes wrapped to 4)");
  lik_tensor R = V(zeros, LIK_F32, 1, DIMS(((int64_t)1 << 62) + 1), DIMS(0));
  EXPECT(lik_codec_train(&R, 2, &CUT, &W), LIK_ERR_ALLOC, "residuals: a sample of shape",
         "[4611686018427387905]");
  group_end();
}

/* ---- non-finite similarities (lik.h) ------------------------------------------ */

/* One query token q = [q0, 0] against document tokens t = [v_t, 0], so the
 * similarity of token t is q0 * v_t. */
typedef struct {
  const char *name;
  double q0;
  int n;
  double v[3];
  int valid[3];
  double score; /* the query token's contribution */
  int argmax;
} inf_case;

static const inf_case INF_CASES[] = {
    {"one -inf token", 1, 1, {-INFINITY}, {1}, -INFINITY, 0},
    {"NaN, -inf, NaN", 1, 3, {NAN, -INFINITY, NAN}, {1, 1, 1}, -INFINITY, 1},
    {"-inf, -inf: the first wins", 1, 2, {-INFINITY, -INFINITY}, {1, 1}, -INFINITY, 0},
    {"NaN, NaN: no token wins", 1, 2, {NAN, NAN}, {1, 1}, 0, -1},
    {"-inf, 3, -inf", 1, 3, {-INFINITY, 3, -INFINITY}, {1, 1, 1}, 3, 1},
    {"+inf, -inf", 1, 2, {INFINITY, -INFINITY}, {1, 1}, INFINITY, 0},
    {"masked -inf, NaN", 1, 2, {-INFINITY, NAN}, {0, 1}, 0, -1},
    {"masked -inf, 2", 1, 2, {-INFINITY, 2}, {0, 1}, 2, 1},
    {"fp32 overflow 1e20 * -1e20", 1e20, 2, {-1e20, NAN}, {1, 1}, -INFINITY, 0},
};

static int same_value(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void group_inf_cases(void) {
  group_begin("inf-cases");
  for (size_t k = 0; k < sizeof FLOATS / sizeof *FLOATS; k++) {
    const lik_dtype dt = FLOATS[k];
    for (size_t c = 0; c < sizeof INF_CASES / sizeof *INF_CASES; c++) {
      const inf_case *ic = &INF_CASES[c];
      double qb[2], db[6];
      uint8_t dm[3];
      float sc[1];
      int32_t am[1] = {-7};
      lik_tensor Q = dense(qb, dt, 3, DIMS(1, 1, 2));
      lik_tensor D = dense(db, dt, 3, DIMS(1, ic->n, 2));
      lik_tensor DM = dense(dm, LIK_U8, 2, DIMS(1, ic->n));
      lik_tensor S = dense(sc, LIK_F32, 2, DIMS(1, 1));
      lik_tensor A = dense(am, LIK_I32, 3, DIMS(1, 1, 1));
      t_put(&Q, DIMS(0, 0, 0), ic->q0);
      t_put(&Q, DIMS(0, 0, 1), 0);
      for (int t = 0; t < ic->n; t++) {
        t_put(&D, DIMS(0, t, 0), ic->v[t]);
        t_put(&D, DIMS(0, t, 1), 0);
        dm[t] = (uint8_t)ic->valid[t];
      }
      case_begin("%s: maxsim, %s", dtype_str(dt), ic->name);
      lik_status st = lik_maxsim(&Q, &D, NULL, &DM, NULL, &S, &A);
      CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
      CHECK(same_value(sc[0], ic->score), "score %g, expected %g", sc[0], ic->score);
      CHECK(am[0] == ic->argmax, "argmax %d, expected %d", am[0], ic->argmax);

      case_begin("%s: maxsim_varlen, %s", dtype_str(dt), ic->name);
      int64_t cuq[2] = {0, 1}, cud[2] = {0, ic->n};
      lik_tensor Qp = dense(qb, dt, 2, DIMS(1, 2)), Dp = dense(db, dt, 2, DIMS(ic->n, 2));
      lik_tensor DMp = dense(dm, LIK_U8, 1, DIMS(ic->n));
      lik_tensor CQ = dense(cuq, LIK_I64, 1, DIMS(2)), CD = dense(cud, LIK_I64, 1, DIMS(2));
      sc[0] = 7;
      am[0] = -7;
      st = lik_maxsim_varlen(&Qp, &Dp, &CQ, &CD, NULL, &DMp, NULL, &S, &A);
      CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
      CHECK(same_value(sc[0], ic->score), "score %g, expected %g", sc[0], ic->score);
      CHECK(am[0] == ic->argmax, "argmax %d, expected %d", am[0], ic->argmax);
    }
  }
  group_end();
}

/* Many lanes, several panels, several document chunks, query blocks: every
 * valid document token is a NaN row (similarity NaN) or a "-inf row"
 * [-inf, 0, ...] (similarity -inf for q0 > 0, +inf for q0 < 0).  Expected
 * per query token: the first valid -inf row, of value -sign(q0) * inf; none:
 * 0 and argmax -1. */
static void group_inf_random(void) {
  group_begin("inf-random");
  enum { NQ = 3, LQ = 37, ND = 4, LD = 150, DIM = 600 };
  for (size_t k = 0; k < sizeof FLOATS / sizeof *FLOATS; k++) {
    const lik_dtype dt = FLOATS[k];
    const size_t es = dtype_size(dt);
    void *qb = malloc(NQ * LQ * DIM * es), *db = malloc(ND * LD * DIM * es);
    uint8_t *dm = (uint8_t *)malloc(ND * LD);
    int kind[ND][LD]; /* 0 masked, 1 NaN row, 2 -inf row */
    float sc[NQ * ND];
    int32_t *am = (int32_t *)malloc(sizeof(int32_t) * NQ * ND * LQ);
    lik_tensor Q = dense(qb, dt, 3, DIMS(NQ, LQ, DIM)), D = dense(db, dt, 3, DIMS(ND, LD, DIM));
    lik_tensor DM = dense(dm, LIK_U8, 2, DIMS(ND, LD));
    lik_tensor S = dense(sc, LIK_F32, 2, DIMS(NQ, ND));
    lik_tensor A = dense(am, LIK_I32, 3, DIMS(NQ, ND, LQ));
    double q0[NQ][LQ];
    for (int i = 0; i < NQ; i++)
      for (int s = 0; s < LQ; s++) {
        q0[i][s] = (rng_chance(0.5) ? 1 : -1) * rng_range(0.5, 1);
        t_put(&Q, DIMS(i, s, 0), q0[i][s]);
        q0[i][s] = round_to(dt, q0[i][s]);
        for (int c = 1; c < DIM; c++) t_put(&Q, DIMS(i, s, c), rng_range(-1, 1));
      }
    for (int j = 0; j < ND; j++)
      for (int t = 0; t < LD; t++) {
        /* doc 0: -inf rows only late (a later chunk); doc 3: NaN rows only */
        const double p_inf = j == 3 ? 0 : j == 0 ? (t > 120 ? 0.3 : 0) : 0.05;
        kind[j][t] = rng_chance(0.2) ? 0 : rng_chance(p_inf) ? 2 : 1;
        dm[j * LD + t] = kind[j][t] != 0;
        for (int c = 0; c < DIM; c++)
          t_put(&D, DIMS(j, t, c), kind[j][t] == 1 ? NAN : c == 0 ? -INFINITY : 0);
      }
    case_begin("%s: %dx%dx%d vs %dx%d, NaN / -inf rows", dtype_str(dt), NQ, LQ, DIM, ND, LD);
    lik_status st = lik_maxsim(&Q, &D, NULL, &DM, NULL, &S, &A);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    for (int i = 0; i < NQ && st == LIK_OK; i++)
      for (int j = 0; j < ND; j++) {
        int first = -1;
        for (int t = 0; t < LD && first < 0; t++)
          if (kind[j][t] == 2) first = t;
        double want = 0;
        for (int s = 0; s < LQ; s++) {
          const int got = am[(i * ND + j) * LQ + s];
          CHECK(got == first, "query %d token %d, doc %d: argmax %d, expected %d", i, s, j, got,
                first);
          if (first >= 0) want += q0[i][s] > 0 ? -INFINITY : INFINITY;
        }
        CHECK(same_value(sc[i * ND + j], want), "query %d, doc %d: score %g, expected %g", i, j,
              sc[i * ND + j], want);
      }
    free(qb);
    free(db);
    free(dm);
    free(am);
  }
  group_end();
}

/* retrieve ranks a -inf score below every finite one, an all-NaN doc as 0. */
static void group_inf_retrieve(void) {
  group_begin("inf-retrieve");
  for (size_t k = 0; k < sizeof FLOATS / sizeof *FLOATS; k++) {
    const lik_dtype dt = FLOATS[k];
    double qb[2], db[8];
    float sc[4];
    int64_t ix[4];
    lik_tensor Q = dense(qb, dt, 3, DIMS(1, 1, 2)), D = dense(db, dt, 3, DIMS(4, 1, 2));
    t_put(&Q, DIMS(0, 0, 0), 1);
    t_put(&Q, DIMS(0, 0, 1), 0);
    const double v[4] = {1, -INFINITY, NAN, -5};
    for (int j = 0; j < 4; j++) {
      t_put(&D, DIMS(j, 0, 0), v[j]);
      t_put(&D, DIMS(j, 0, 1), 0);
    }
    lik_tensor S = dense(sc, LIK_F32, 2, DIMS(1, 4)), I = dense(ix, LIK_I64, 2, DIMS(1, 4));
    case_begin("%s: retrieve over scores 1, -inf, 0 (NaN), -5", dtype_str(dt));
    lik_status st = lik_retrieve(&Q, &D, NULL, NULL, 4, NULL, &S, &I);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    const int64_t want_i[4] = {0, 2, 3, 1};
    const double want_s[4] = {1, 0, -5, -INFINITY};
    for (int r = 0; r < 4; r++)
      CHECK(ix[r] == want_i[r] && sc[r] == want_s[r], "rank %d: doc %lld score %g, expected "
            "doc %lld score %g", r, (long long)ix[r], sc[r], (long long)want_i[r], want_s[r]);
  }
  group_end();
}

/* ---- aliasing and overlapping outputs -------------------------------------------- */

static void group_aliasing(void) {
  group_begin("aliasing");
  static _Alignas(64) float buf[4096];
  static int32_t ibuf[256];
  static int64_t lbuf[64];
  for (int i = 0; i < 4096; i++) buf[i] = (float)rng_range(-1, 1);
  float *q = buf, *d = buf + 64, *g = buf + 256; /* Q [2,3,4]: 24, D [5,6,4]: 120 */
  lik_tensor Q = dense(q, LIK_F32, 3, DIMS(2, 3, 4)), D = dense(d, LIK_F32, 3, DIMS(5, 6, 4));
  lik_tensor S = dense(g, LIK_F32, 2, DIMS(2, 5)), A = dense(ibuf, LIK_I32, 3, DIMS(2, 5, 3));

  case_begin("scores inside Q");
  lik_tensor Sq = dense(q + 10, LIK_F32, 2, DIMS(2, 5));
  EXPECT(lik_maxsim(&Q, &D, NULL, NULL, NULL, &Sq, NULL), LIK_ERR_VALUE,
         "scores: overlaps Q in memory", "an input");
  case_begin("scores just past Q's last element: no overlap");
  lik_tensor Sn = dense(q + 24, LIK_F32, 2, DIMS(2, 5));
  lik_status st = lik_maxsim(&Q, &D, NULL, NULL, NULL, &Sn, NULL);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  case_begin("argmax and scores overlapping");
  lik_tensor As = dense(g, LIK_I32, 3, DIMS(2, 5, 3));
  EXPECT(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, &As), LIK_ERR_VALUE,
         "scores: overlaps argmax", "another output");
  case_begin("Q and D one tensor: inputs may share memory");
  lik_tensor Sqq = dense(g, LIK_F32, 2, DIMS(2, 2));
  st = lik_maxsim(&Q, &Q, NULL, NULL, NULL, &Sqq, NULL);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  case_begin("pairs: scores inside d_mask");
  {
    static float mbuf[16];
    uint8_t *dmask = (uint8_t *)mbuf;
    lik_tensor Q2 = dense(q, LIK_F32, 3, DIMS(2, 3, 4)), D2 = dense(d, LIK_F32, 3, DIMS(2, 6, 4));
    lik_tensor DM = dense(dmask, LIK_U8, 2, DIMS(2, 6));
    lik_tensor S2 = dense(mbuf + 1, LIK_F32, 1, DIMS(2));
    EXPECT(lik_maxsim_pairs(&Q2, &D2, NULL, &DM, NULL, &S2, NULL), LIK_ERR_VALUE,
           "scores: overlaps d_mask", NULL);
  }
  case_begin("retrieve: indices overlapping D");
  lik_tensor Id = dense(d + 8, LIK_I64, 2, DIMS(2, 2));
  lik_tensor S22 = dense(g, LIK_F32, 2, DIMS(2, 2));
  EXPECT(lik_retrieve(&Q, &D, NULL, NULL, 2, NULL, &S22, &Id), LIK_ERR_VALUE,
         "indices: overlaps D", NULL);

  /* backward: argmax from a real forward */
  st = lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, &A);
  CHECK(st == LIK_OK, "forward: %s", lik_last_error());
  lik_tensor GS = dense(buf + 512, LIK_F32, 2, DIMS(2, 5));
  case_begin("backward: grad_Q is Q");
  lik_tensor GQ = Q, GD = dense(buf + 1024, LIK_F32, 3, DIMS(5, 6, 4));
  EXPECT(lik_maxsim_backward(&Q, &D, NULL, NULL, &A, &GS, NULL, &GQ, &GD), LIK_ERR_VALUE,
         "grad_Q: overlaps Q in memory", NULL);
  case_begin("backward: grad_Q and grad_D overlapping");
  lik_tensor GQ2 = dense(buf + 2048, LIK_F32, 3, DIMS(2, 3, 4));
  lik_tensor GD2 = dense(buf + 2048 + 20, LIK_F32, 3, DIMS(5, 6, 4));
  EXPECT(lik_maxsim_backward(&Q, &D, NULL, NULL, &A, &GS, NULL, &GQ2, &GD2), LIK_ERR_VALUE,
         "grad_Q: overlaps grad_D", "another output");
  case_begin("backward: grad_D overlapping grad_scores");
  lik_tensor GD3 = dense(buf + 500, LIK_F32, 3, DIMS(5, 6, 4));
  EXPECT(lik_maxsim_backward(&Q, &D, NULL, NULL, &A, &GS, NULL, NULL, &GD3), LIK_ERR_VALUE,
         "grad_D: overlaps grad_scores", NULL);
  case_begin("backward: disjoint buffers work");
  st = lik_maxsim_backward(&Q, &D, NULL, NULL, &A, &GS, NULL, &GQ2, &GD);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());

  case_begin("packed: scores overlapping cu_seqlens_q");
  {
    lbuf[0] = 0; lbuf[1] = 3; lbuf[2] = 6;    /* cu_seqlens_q: 2 queries of Q's 6 rows */
    lbuf[8] = 0; lbuf[9] = 10; lbuf[10] = 30; /* cu_seqlens_d: 2 documents of 30 rows */
    lik_tensor Qp = dense(q, LIK_F32, 2, DIMS(6, 4)), Dp = dense(d, LIK_F32, 2, DIMS(30, 4));
    lik_tensor CQ = dense(lbuf, LIK_I64, 1, DIMS(3)), CD = dense(lbuf + 8, LIK_I64, 1, DIMS(3));
    lik_tensor Sc = dense(lbuf + 1, LIK_F32, 2, DIMS(2, 2));
    EXPECT(lik_maxsim_varlen(&Qp, &Dp, &CQ, &CD, NULL, NULL, NULL, &Sc, NULL), LIK_ERR_VALUE,
           "scores: overlaps cu_seqlens_q", NULL);
  }

  case_begin("topk_merge: out_scores inside scores");
  {
    float ls[2 * 1 * 3] = {3, 2, 1, 6, 5, 4};
    int64_t li[2 * 1 * 3] = {0, 1, 2, 3, 4, 5}, oi[2];
    lik_tensor LS = dense(ls, LIK_F32, 3, DIMS(2, 1, 3)), LI = dense(li, LIK_I64, 3, DIMS(2, 1, 3));
    lik_tensor OS = dense(ls + 1, LIK_F32, 2, DIMS(1, 2)), OI = dense(oi, LIK_I64, 2, DIMS(1, 2));
    EXPECT(lik_topk_merge(&LS, &LI, NULL, 2, NULL, &OS, &OI), LIK_ERR_VALUE,
           "out_scores: overlaps scores", NULL);
  }
  case_begin("codec_decompress: out inside the centroids");
  {
    float cent[4 * 8], w[4] = {-1, -0.5f, 0.5f, 1};
    int64_t codes[2] = {0, 3};
    uint8_t res[2 * 2] = {0};
    for (int i = 0; i < 32; i++) cent[i] = (float)i;
    lik_tensor C = dense(cent, LIK_F32, 2, DIMS(4, 8)), W = dense(w, LIK_F32, 1, DIMS(4));
    lik_tensor K = dense(codes, LIK_I64, 1, DIMS(2)), R = dense(res, LIK_U8, 2, DIMS(2, 2));
    lik_tensor O = dense(cent + 8, LIK_F32, 2, DIMS(2, 8));
    const lik_codec codec = {&C, NULL, &W, 2, LIK_RESIDUAL_COLBERT};
    EXPECT(lik_codec_decompress(&codec, &K, &R, NULL, &O), LIK_ERR_VALUE,
           "out: overlaps centroids", NULL);
  }

  case_begin("scores with strides [1, 1]: elements overlap");
  lik_tensor So = V(g, LIK_F32, 2, DIMS(2, 5), DIMS(1, 1));
  EXPECT(lik_maxsim(&Q, &D, NULL, NULL, NULL, &So, NULL), LIK_ERR_SHAPE,
         "scores: strides [1, 1] over shape [2, 5] make elements overlap", NULL);
  case_begin("scores with strides [1, 2]: interleaved, no overlap");
  lik_tensor Si = V(g, LIK_F32, 2, DIMS(2, 5), DIMS(1, 2));
  st = lik_maxsim(&Q, &D, NULL, NULL, NULL, &Si, NULL);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  case_begin("Q whose strides reach beyond int64");
  lik_tensor Qx = V(q, LIK_F32, 3, DIMS(2, 3, 4), DIMS(INT64_MAX / 2, 4, 1));
  EXPECT(lik_maxsim(&Qx, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE,
         "Q: strides [4611686018427387903, 4, 1] over shape [2, 3, 4] reach more bytes", NULL);
  group_end();
}

/* Empty queries with an argmax of width 0 (NULL data): nothing to write, and
 * no arithmetic on the NULL pointer (fuzz_api found it; UBSan). */
static void group_empty_argmax(void) {
  group_begin("empty-argmax");
  float db[9 * 8] = {0}, sc[6];
  int64_t cuq[3] = {0, 0, 0}, cud[4] = {0, 3, 6, 9};
  int64_t pq[5] = {0, 1, 0, 1, 1}, pd[5] = {0, 1, 2, 2, 0};
  lik_tensor Q = dense(NULL, LIK_F32, 2, DIMS(0, 8)), D = dense(db, LIK_F32, 2, DIMS(9, 8));
  lik_tensor CQ = dense(cuq, LIK_I64, 1, DIMS(3)), CD = dense(cud, LIK_I64, 1, DIMS(4));
  lik_tensor PQ = dense(pq, LIK_I64, 1, DIMS(5)), PD = dense(pd, LIK_I64, 1, DIMS(5));
  case_begin("score_pairs_packed, argmax [5, 0]");
  lik_tensor S = dense(sc, LIK_F32, 1, DIMS(5)), A = dense(NULL, LIK_I32, 2, DIMS(5, 0));
  for (int i = 0; i < 5; i++) sc[i] = 7;
  lik_status st = lik_score_pairs_packed(&Q, &D, &CQ, &CD, &PQ, &PD, NULL, NULL, NULL, &S, &A);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  for (int i = 0; i < 5; i++) CHECK(sc[i] == 0, "scores[%d] = %g, expected 0", i, sc[i]);
  case_begin("maxsim_varlen, argmax [2, 3, 0]");
  lik_tensor S2 = dense(sc, LIK_F32, 2, DIMS(2, 3)), A2 = dense(NULL, LIK_I32, 3, DIMS(2, 3, 0));
  st = lik_maxsim_varlen(&Q, &D, &CQ, &CD, NULL, NULL, NULL, &S2, &A2);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  group_end();
}

/* lik_maxsim_residual_varlen without residuals: refused, never read (fuzz_api
 * found the NULL read). */
static void group_residual_null(void) {
  group_begin("residual-null");
  float q[3 * 8] = {0}, cent[6 * 8] = {0}, w[4] = {0}, sc[3];
  int64_t codes[9] = {0}, cu[4] = {0, 3, 6, 9};
  lik_tensor Q = dense(q, LIK_F32, 2, DIMS(3, 8)), C = dense(cent, LIK_F32, 2, DIMS(6, 8));
  lik_tensor W = dense(w, LIK_F32, 1, DIMS(4)), K = dense(codes, LIK_I64, 1, DIMS(9));
  lik_tensor CU = dense(cu, LIK_I64, 1, DIMS(4)), S = dense(sc, LIK_F32, 1, DIMS(3));
  const lik_codec codec = {&C, NULL, &W, 2, LIK_RESIDUAL_COLBERT};
  case_begin("maxsim_residual_varlen, residuals NULL");
  EXPECT(lik_maxsim_residual_varlen(&Q, &codec, &K, NULL, &CU, NULL, &S, NULL), LIK_ERR_NULL,
         "residuals: is NULL", NULL);
  group_end();
}

int main(void) {
  test_init("test_limits");
  group_lengths();
  group_scratch();
  group_inf_cases();
  group_inf_random();
  group_inf_retrieve();
  group_aliasing();
  group_empty_argmax();
  group_residual_null();
  return test_finish("test_limits");
}
