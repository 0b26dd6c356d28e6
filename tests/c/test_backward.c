/*
 * test_backward.c — C tests of the training calls (lik.h, "training and packed
 * layouts"): gradients against an fp64 reference, bitwise determinism over
 * thread counts and strategies, packed == padded, error paths.  Runs under
 * the sanitizer build too (scripts/sanitize.sh).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lik.h"
#include "lik_experimental.h"
#include "../../src/core/dtype.h"
#include "../../src/ref/maxsim_ref.h"

static int g_fail = 0;
#define CHECK(c, ...)                                   \
  do {                                                  \
    if (!(c)) {                                         \
      g_fail++;                                         \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);       \
      printf(__VA_ARGS__);                              \
      printf("\n");                                     \
    }                                                   \
  } while (0)

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double rnd(void) { /* uniform [-1, 1) */
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 4503599627370496.0 - 1.0;
}

static lik_tensor view(void *data, lik_dtype dt, int nd, const int64_t *shape) {
  lik_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dt;
  t.ndim = nd;
  int64_t st = 1;
  for (int i = nd - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.strides[i] = st;
    st *= shape[i];
  }
  t.device = LIK_CPU;
  return t;
}

enum { NQ = 5, ND = 6, LQ = 7, LD = 9, DIM = 20 };

/* fp64 reference gradients of sum_ij g[i,j] * score[i,j] (cross layout)
 * through the forward's argmax am (src/ref/maxsim_ref.h). */
static void reference(const float *Q, const float *D, const uint8_t *qm, const uint8_t *dm,
                      const int32_t *am, const float *g, int normalize, double *gQ,
                      double *gD) {
  static double xq[NQ * LQ * DIM], xd[ND * LD * DIM];
  int64_t oq[NQ + 1], od[ND + 1];
  for (int i = 0; i < NQ * LQ * DIM; i++) xq[i] = Q[i];
  for (int i = 0; i < ND * LD * DIM; i++) xd[i] = D[i];
  for (int i = 0; i <= NQ; i++) oq[i] = (int64_t)i * LQ;
  for (int j = 0; j <= ND; j++) od[j] = (int64_t)j * LD;
  const lik_ref_seqs rq = {xq, oq, DIM, qm}, rd = {xd, od, DIM, dm};
  memset(gQ, 0, sizeof(double) * NQ * LQ * DIM);
  memset(gD, 0, sizeof(double) * ND * LD * DIM);
  const lik_ref_grads out = {gQ, gD, NULL, NULL};
  for (int i = 0; i < NQ; i++)
    for (int j = 0; j < ND; j++)
      lik_ref_maxsim_pair_backward(&rq, i, &rd, j, normalize, am + (i * ND + j) * LQ,
                                   g[i * ND + j], &out);
}

static float Q[NQ * LQ * DIM], D[ND * LD * DIM], G[NQ * ND], S[NQ * ND];
static uint8_t QM[NQ * LQ], DM[ND * LD];
static int32_t AM[NQ * ND * LQ];

static lik_status run_backward(int normalize, int threads, lik_backward b, float *gQ, float *gD) {
  const int64_t sq[] = {NQ, LQ, DIM}, sd[] = {ND, LD, DIM}, sqm[] = {NQ, LQ}, sdm[] = {ND, LD},
                sg[] = {NQ, ND}, sa[] = {NQ, ND, LQ};
  lik_tensor tq = view(Q, LIK_F32, 3, sq), td = view(D, LIK_F32, 3, sd);
  lik_tensor tqm = view(QM, LIK_U8, 2, sqm), tdm = view(DM, LIK_U8, 2, sdm);
  lik_tensor tg = view(G, LIK_F32, 2, sg), ts = view(S, LIK_F32, 2, sg);
  lik_tensor ta = view(AM, LIK_I32, 3, sa);
  lik_tensor tgq = view(gQ, LIK_F32, 3, sq), tgd = view(gD, LIK_F32, 3, sd);
  lik_options o = LIK_OPTIONS_INIT;
  o.normalize = normalize;
  o.num_threads = threads;
  o.backward = b;
  lik_status st = lik_maxsim(&tq, &td, &tqm, &tdm, &o, &ts, &ta);
  if (st) return st;
  return lik_maxsim_backward(&tq, &td, &tqm, &tdm, &ta, &tg, &o, &tgq, &tgd);
}

static void test_gradients_and_determinism(void) {
  static float gQ[NQ * LQ * DIM], gD[ND * LD * DIM], bQ[NQ * LQ * DIM], bD[ND * LD * DIM];
  static double rQ[NQ * LQ * DIM], rD[ND * LD * DIM];
  for (int i = 0; i < NQ * LQ * DIM; i++) Q[i] = (float)rnd() * (i % 3 == 0 ? 1e4f : 1.0f);
  for (int i = 0; i < ND * LD * DIM; i++) D[i] = (float)rnd();
  for (int i = 0; i < NQ * LQ; i++) QM[i] = rnd() > -0.6;
  for (int i = 0; i < ND * LD; i++) DM[i] = rnd() > -0.6;
  for (int t = 0; t < LD; t++) DM[2 * LD + t] = 0; /* a fully masked document */
  for (int i = 0; i < NQ * ND; i++) G[i] = (float)rnd();
  for (int normalize = 0; normalize < 2; normalize++) {
    CHECK(run_backward(normalize, 1, LIK_BACKWARD_LOWMEM, bQ, bD) == LIK_OK, "%s", lik_last_error());
    reference(Q, D, QM, DM, AM, G, normalize, rQ, rD);
    double eq = 0, ed = 0, sq = 1, sd = 1;
    for (int i = 0; i < NQ * LQ * DIM; i++) {
      eq = fmax(eq, fabs(bQ[i] - rQ[i]));
      sq = fmax(sq, fabs(rQ[i]));
    }
    for (int i = 0; i < ND * LD * DIM; i++) {
      ed = fmax(ed, fabs(bD[i] - rD[i]));
      sd = fmax(sd, fabs(rD[i]));
    }
    CHECK(eq <= 1e-5 * sq && ed <= 1e-5 * sd, "normalize=%d: err grad_Q %g (scale %g) grad_D %g (%g)",
          normalize, eq, sq, ed, sd);
    for (int i = 0; i < NQ * LQ; i++)
      if (!QM[i])
        for (int k = 0; k < DIM; k++) CHECK(bQ[i * DIM + k] == 0.0f, "masked query token has gradient");
    for (int i = 0; i < ND * LD; i++)
      if (!DM[i])
        for (int k = 0; k < DIM; k++) CHECK(bD[i * DIM + k] == 0.0f, "masked doc token has gradient");
    const lik_backward strategies[] = {LIK_BACKWARD_AUTO, LIK_BACKWARD_UNIFIED, LIK_BACKWARD_LOWMEM};
    for (int threads = 1; threads <= 5; threads += 2)
      for (int b = 0; b < 3; b++) {
        memset(gQ, 0x7f, sizeof gQ);
        memset(gD, 0x7f, sizeof gD);
        CHECK(run_backward(normalize, threads, strategies[b], gQ, gD) == LIK_OK, "%s", lik_last_error());
        CHECK(memcmp(gQ, bQ, sizeof gQ) == 0 && memcmp(gD, bD, sizeof gD) == 0,
              "not bitwise identical: normalize=%d threads=%d strategy=%d", normalize, threads, b);
      }
  }
  printf("gradients + determinism: done\n");
}

/* varlen on packed rows == cross-product on the padded batch with masks. */
static void test_packed_equals_padded(void) {
  static float gQ[NQ * LQ * DIM], gD[ND * LD * DIM];
  static float Qp[NQ * LQ * DIM], Dp[ND * LD * DIM], gQp[NQ * LQ * DIM], gDp[ND * LD * DIM];
  static float Sp[NQ * ND];
  static int32_t AMp[NQ * ND * LQ];
  int64_t cuq[NQ + 1] = {0}, cud[ND + 1] = {0};
  const int lq[NQ] = {7, 0, 3, 1, 5}, ld[ND] = {9, 2, 0, 4, 9, 1};
  for (int i = 0; i < NQ * LQ; i++) QM[i] = (i % LQ) < lq[i / LQ];
  for (int i = 0; i < ND * LD; i++) DM[i] = (i % LD) < ld[i / LD];
  int64_t rq = 0, rd = 0;
  for (int i = 0; i < NQ; i++) {
    memcpy(Qp + rq * DIM, Q + i * LQ * DIM, sizeof(float) * lq[i] * DIM);
    rq += lq[i];
    cuq[i + 1] = rq;
  }
  for (int j = 0; j < ND; j++) {
    memcpy(Dp + rd * DIM, D + j * LD * DIM, sizeof(float) * ld[j] * DIM);
    rd += ld[j];
    cud[j + 1] = rd;
  }
  for (int normalize = 0; normalize < 2; normalize++) {
    CHECK(run_backward(normalize, 2, LIK_BACKWARD_AUTO, gQ, gD) == LIK_OK, "%s", lik_last_error());
    const int64_t sq[] = {rq, DIM}, sd[] = {rd, DIM}, scq[] = {NQ + 1}, scd[] = {ND + 1},
                  sg[] = {NQ, ND}, sa[] = {NQ, ND, LQ};
    lik_tensor tq = view(Qp, LIK_F32, 2, sq), td = view(Dp, LIK_F32, 2, sd);
    lik_tensor tcq = view(cuq, LIK_I64, 1, scq), tcd = view(cud, LIK_I64, 1, scd);
    lik_tensor ts = view(Sp, LIK_F32, 2, sg), ta = view(AMp, LIK_I32, 3, sa), tg = view(G, LIK_F32, 2, sg);
    lik_tensor tgq = view(gQp, LIK_F32, 2, sq), tgd = view(gDp, LIK_F32, 2, sd);
    lik_options o = LIK_OPTIONS_INIT;
    o.normalize = normalize;
    CHECK(lik_maxsim_varlen(&tq, &td, &tcq, &tcd, NULL, NULL, &o, &ts, &ta) == LIK_OK, "%s",
          lik_last_error());
    CHECK(lik_maxsim_varlen_backward(&tq, &td, &tcq, &tcd, NULL, NULL, &ta, &tg, &o, &tgq, &tgd) ==
              LIK_OK,
          "%s", lik_last_error());
    CHECK(memcmp(S, Sp, sizeof S) == 0, "varlen scores differ from padded+mask");
    rq = 0;
    for (int i = 0; i < NQ; i++, rq += lq[i - 1])
      CHECK(memcmp(gQp + rq * DIM, gQ + i * LQ * DIM, sizeof(float) * lq[i] * DIM) == 0,
            "varlen grad_Q of query %d differs", i);
    rd = 0;
    for (int j = 0; j < ND; j++, rd += ld[j - 1])
      CHECK(memcmp(gDp + rd * DIM, gD + j * LD * DIM, sizeof(float) * ld[j] * DIM) == 0,
            "varlen grad_D of doc %d differs", j);
    /* errors: bad cu_seqlens, pair out of range */
    cuq[2] = cuq[1] - 1; /* decreasing */
    CHECK(lik_maxsim_varlen(&tq, &td, &tcq, &tcd, NULL, NULL, &o, &ts, &ta) == LIK_ERR_VALUE,
          "bad cu_seqlens_q accepted");
    CHECK(strstr(lik_last_error(), "cu_seqlens_q") != NULL, "message: %s", lik_last_error());
    cuq[2] = cuq[1] + lq[1];
    int32_t pq[2] = {0, NQ}, pd[2] = {0, 1};
    float s2[2];
    const int64_t sp[] = {2};
    lik_tensor tpq = view(pq, LIK_I32, 1, sp), tpd = view(pd, LIK_I32, 1, sp), ts2 = view(s2, LIK_F32, 1, sp);
    CHECK(lik_score_pairs_packed(&tq, &td, &tcq, &tcd, &tpq, &tpd, NULL, NULL, &o, &ts2, NULL) ==
              LIK_ERR_VALUE,
          "pair out of range accepted");
    pq[1] = 4;
    CHECK(lik_score_pairs_packed(&tq, &td, &tcq, &tcd, &tpq, &tpd, NULL, NULL, &o, &ts2, NULL) == LIK_OK,
          "%s", lik_last_error());
    CHECK(s2[0] == Sp[0 * ND + 0] && s2[1] == Sp[4 * ND + 1], "pair scores differ from varlen");
    /* opts.max_seqlen_q: a bound >= the longest query (7) changes nothing */
    float S7[NQ * ND];
    lik_tensor ts7 = view(S7, LIK_F32, 2, sg);
    o.max_seqlen_q = 7;
    CHECK(lik_maxsim_varlen(&tq, &td, &tcq, &tcd, NULL, NULL, &o, &ts7, NULL) == LIK_OK, "%s",
          lik_last_error());
    CHECK(memcmp(S7, Sp, sizeof S7) == 0, "scores differ with max_seqlen_q = 7");
    o.max_seqlen_q = 6;
    CHECK(lik_maxsim_varlen(&tq, &td, &tcq, &tcd, NULL, NULL, &o, &ts7, NULL) == LIK_ERR_VALUE,
          "max_seqlen_q shorter than the longest query accepted");
    CHECK(strstr(lik_last_error(), "max_seqlen_q: 6 is shorter than the longest query (7 tokens") != NULL,
          "message: %s", lik_last_error());
    o.max_seqlen_q = -1;
    CHECK(lik_score_pairs_packed(&tq, &td, &tcq, &tcd, &tpq, &tpd, NULL, NULL, &o, &ts2, NULL) ==
              LIK_ERR_VALUE,
          "negative max_seqlen_q accepted");
    CHECK(strstr(lik_last_error(), "opts.max_seqlen_q: -1") != NULL, "message: %s", lik_last_error());
    o.max_seqlen_q = 0;
  }
  printf("packed == padded + mask, errors: done\n");
}

/* aarch64: the neon / sve backward (backward_neon.c) computes the portable
 * instance's values bit for bit (the same FMA per element, the widenings
 * exact); on x86-64 the AVX2 instance contracts where the portable one does
 * not, so the paths agree only to rounding there (the harness's tolerance).
 * Every input dtype, normalize on and off, lowmem and unified, d with a
 * 16-lane body, a 4-lane step and a scalar tail, a strided D. */
static void test_isa_matches_portable(void) {
  const char *isa = lik_cpu_isa();
#if defined(__aarch64__)
  const int bitwise = !strcmp(isa, "neon") || !strcmp(isa, "sve");
#else
  const int bitwise = 0;
#endif
  if (!bitwise) {
    printf("%s against portable, bitwise: not asked on this path\n", isa);
    return;
  }
  lik_context_options co;
  memset(&co, 0, sizeof co);
  co.cpu_isa = "portable";
  lik_context *port = NULL;
  CHECK(lik_context_create(&co, &port) == LIK_OK, "%s", lik_last_error());
  enum { N = 3, L = 6 };
  static const lik_dtype dts[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};
  static const int64_t dims[] = {23, 37, 3};
  static float g[N * N], sc[N * N];
  static int32_t am[N * N * L];
  for (int di = 0; di < 3; di++)
    for (int ti = 0; ti < 4; ti++)
      for (int normalize = 0; normalize < 2; normalize++)
        for (int b = 0; b < 2; b++) {
          const int64_t d = dims[di], dd = d + (di == 1 ? 2 : 0); /* D strided for d = 37 */
          const lik_dtype dt = dts[ti];
          const size_t es = dt == LIK_F64 ? 8 : dt == LIK_F32 ? 4 : 2;
          unsigned char *buf[2], *gbuf[2][2];
          for (int side = 0; side < 2; side++) {
            const int64_t ld = side ? dd : d;
            buf[side] = (unsigned char *)calloc((size_t)(N * L * ld), es);
            for (int64_t i = 0; i < N * L * ld; i++) {
              const double v = rnd() * (i % 5 == 0 ? 3.0 : 1.0);
              if (dt == LIK_F32) ((float *)buf[side])[i] = (float)v;
              else if (dt == LIK_F64) ((double *)buf[side])[i] = v;
              else if (dt == LIK_F16) ((uint16_t *)buf[side])[i] = lik_tr_f32_to_f16((float)v);
              else ((uint16_t *)buf[side])[i] = lik_tr_f32_to_bf16((float)v);
            }
            for (int r = 0; r < 2; r++)
              gbuf[r][side] = (unsigned char *)calloc((size_t)(N * L * d), es);
          }
          for (int i = 0; i < N * N; i++) g[i] = (float)rnd();
          const int64_t shp[] = {N, L, d}, sg[] = {N, N}, sa[] = {N, N, L};
          lik_tensor tq = view(buf[0], dt, 3, shp), td = view(buf[1], dt, 3, shp);
          td.strides[0] = L * dd;
          td.strides[1] = dd;
          lik_tensor ts = view(sc, LIK_F32, 2, sg), ta = view(am, LIK_I32, 3, sa),
                     tg = view(g, LIK_F32, 2, sg);
          lik_options o = LIK_OPTIONS_INIT;
          o.normalize = normalize;
          o.num_threads = 2;
          o.backward = b ? LIK_BACKWARD_UNIFIED : LIK_BACKWARD_LOWMEM;
          lik_status st = lik_maxsim(&tq, &td, NULL, NULL, &o, &ts, &ta);
          CHECK(st == LIK_OK, "%s", lik_last_error());
          for (int r = 0; r < 2 && st == LIK_OK; r++) {
            lik_tensor tgq = view(gbuf[r][0], dt, 3, shp), tgd = view(gbuf[r][1], dt, 3, shp);
            o.context = r ? port : NULL;
            st = lik_maxsim_backward(&tq, &td, NULL, NULL, &ta, &tg, &o, &tgq, &tgd);
            CHECK(st == LIK_OK, "%s", lik_last_error());
          }
          const size_t bytes = (size_t)(N * L * d) * es;
          CHECK(memcmp(gbuf[0][0], gbuf[1][0], bytes) == 0 &&
                    memcmp(gbuf[0][1], gbuf[1][1], bytes) == 0,
                "%s backward differs from portable: d=%lld dtype=%d normalize=%d %s", isa,
                (long long)d, (int)dt, normalize, b ? "unified" : "lowmem");
          for (int side = 0; side < 2; side++) {
            free(buf[side]);
            for (int r = 0; r < 2; r++) free(gbuf[r][side]);
          }
        }
  lik_context_free(port);
  printf("%s against portable, bitwise: done\n", isa);
}

/* test_backward [bitwise]: every group, or only the comparison with portable
 * (the SVE vector-length tests, tests/c/CMakeLists.txt). */
int main(int argc, char **argv) {
  printf("lik %s, cpu_isa %s\n", lik_version_string(), lik_cpu_isa());
  const int all = argc < 2 || strcmp(argv[1], "bitwise");
  if (all) {
    test_gradients_and_determinism();
    test_packed_equals_padded();
  }
  test_isa_matches_portable();
  printf("%s (%d failures)\n", g_fail ? "FAILED" : "OK", g_fail);
  return g_fail ? 1 : 0;
}
