/*
 * test_residual.c — the residual codec and residual MaxSim
 * (lik_experimental.h) against the float64 reference (src/ref/residual_ref.c):
 * random sizes (d with d*nbits a multiple of 8, odd lengths, empty
 * documents), every nbits and layout, padded and packed documents, strided
 * views, input dtypes, thread-count invariance, and the argument errors.
 * Runs once per CPU path (LIK_CPU_ISA).
 */
#include "lik_test_util.h"

#include "../../src/ref/residual_ref.h"

static const int NBITS[] = {1, 2, 4, 8};
static const int64_t DIMS[] = {1, 3, 8, 16, 17, 24, 40, 48, 96, 128, 1000};

static int64_t pick_dim(int nbits) {
  for (;;) {
    const int64_t d = RNG_PICK(DIMS);
    if ((d * nbits) % 8 == 0 && (d <= 128 || rng_chance(0.3))) return d;
  }
}

/* A view of shape filled from v (logical row-major order); v is then
 * replaced by what the view holds (dtype rounding). */
static void view_from(view_t *w, lik_dtype dt, int ndim, const int64_t *shape, double *v,
                      int strided) {
  view_make(w, dt, ndim, shape, strided ? random_layout(ndim) : LAYOUT_DENSE, 0xAB);
  int64_t idx[LIK_MAX_DIMS];
  for (int64_t f = 0; f < t_numel(&w->t); f++) {
    t_unravel(&w->t, f, idx);
    t_put(&w->t, idx, v[f]);
    v[f] = t_get(&w->t, idx);
  }
}

static float *to_f32(const double *v, int64_t n) {
  float *f = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  return f;
}

/* A random codec: centroids [C, d] and weights [2^nbits] (their values as
 * stored in *cent / *wts, fp32), as views of random dtype and layout. */
typedef struct {
  int nbits;
  lik_residual_layout layout;
  int64_t C, d, width;
  view_t cent, wts;
  float *centf, *wtsf;
  lik_codec codec;
} codec_t;

static void codec_make(codec_t *c, int nbits, int64_t d, int64_t C) {
  static const lik_dtype cdt[] = {LIK_F32, LIK_F16, LIK_BF16};
  c->nbits = nbits;
  c->layout = rng_chance(0.5) ? LIK_RESIDUAL_COLBERT : LIK_RESIDUAL_LIK;
  c->C = C;
  c->d = d;
  c->width = d * nbits / 8;
  double *v = (double *)malloc((size_t)(C * d + 1) * sizeof(double));
  for (int64_t i = 0; i < C * d; i++) v[i] = rng_range(-1, 1);
  const int64_t cs[2] = {C, d};
  view_from(&c->cent, RNG_PICK(cdt), 2, cs, v, 1);
  c->centf = to_f32(v, C * d);
  const int64_t nb = (int64_t)1 << nbits;
  double w[256];
  for (int64_t b = 0; b < nb; b++) w[b] = rng_range(-0.4, 0.4);
  view_from(&c->wts, RNG_PICK(cdt), 1, &nb, w, 1);
  c->wtsf = to_f32(w, nb);
  free(v);
  c->codec = (lik_codec){&c->cent.t, NULL, &c->wts.t, nbits, c->layout};
}

static void codec_free(codec_t *c) {
  view_free(&c->cent);
  view_free(&c->wts);
  free(c->centf);
  free(c->wtsf);
}

/* ---- residual MaxSim ---------------------------------------------------------- */

/* aarch64: the neon / sve residual kernels (residual_neon.c) compute the
 * portable instance's values bit for bit, so every third residual MaxSim case
 * (a third: the second run costs as much as the first under qemu) and every
 * decompress also run on a portable context and must match exactly; NULL
 * elsewhere: on x86-64 the AVX2 / AVX-512 kernels contract and sum in another
 * order. */
static lik_context *g_port;

static void portable_context_init(void) {
#if defined(__aarch64__)
  const char *isa = lik_cpu_isa();
  if (strcmp(isa, "neon") && strcmp(isa, "sve")) return;
  lik_context_options co;
  memset(&co, 0, sizeof co);
  co.cpu_isa = "portable";
  if (lik_context_create(&co, &g_port) != LIK_OK) g_port = NULL;
  printf("%s against portable, bitwise: checked in every third residual MaxSim case and every "
         "decompress\n", isa);
#endif
}

static void test_maxsim_residual(int cases) {
  group_begin("maxsim_residual");
  for (int cs = 0; cs < cases; cs++) {
    const int nbits = RNG_PICK(NBITS);
    const int64_t d = pick_dim(nbits), C = rng_int(1, 40);
    codec_t cd;
    codec_make(&cd, nbits, d, C);
    const int packed = rng_chance(0.5), q2 = rng_chance(0.2), normalize = rng_chance(0.7);
    const int64_t nq = q2 ? 1 : rng_int(0, 3), lq = rng_int(1, 40), nd = rng_int(0, 6);
    int64_t len[6], ld = 0, T = 0, off[7] = {0};
    for (int64_t j = 0; j < nd; j++) {
      len[j] = rng_chance(0.2) ? 0 : rng_chance(0.2) ? 1 : rng_int(1, 45);
      ld = len[j] > ld ? len[j] : ld;
      off[j + 1] = off[j] + len[j];
    }
    T = off[nd];
    if (!packed) ld += rng_int(0, 3);
    static const lik_dtype qdt[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};
    const lik_dtype qt = RNG_PICK(qdt), ct = rng_chance(0.5) ? LIK_I32 : LIK_I64;
    case_begin("nbits=%d d=%lld C=%lld layout=%d %s Nq=%lld%s Lq=%lld Nd=%lld normalize=%d Q=%s",
               nbits, (long long)d, (long long)C, cd.layout, packed ? "packed" : "padded",
               (long long)nq, q2 ? "(2-D)" : "", (long long)lq, (long long)nd, normalize,
               dtype_str(qt));
    /* queries */
    double *qv = (double *)malloc((size_t)(nq * lq * d + 1) * sizeof(double));
    for (int64_t i = 0; i < nq * lq * d; i++) qv[i] = rng_range(-1, 1);
    const int64_t qs3[3] = {nq, lq, d};
    view_t Q;
    view_from(&Q, qt, q2 ? 2 : 3, q2 ? qs3 + 1 : qs3, qv, 1);
    float *qf = to_f32(qv, nq * lq * d);
    /* documents, logical: codes [T], residual bytes [T, width] */
    int32_t *codes = (int32_t *)malloc((size_t)(T + 1) * sizeof(int32_t));
    uint8_t *res = (uint8_t *)malloc((size_t)(T * cd.width + 1));
    for (int64_t t = 0; t < T; t++) codes[t] = (int32_t)rng_int(0, C - 1);
    for (int64_t b = 0; b < T * cd.width; b++) res[b] = (uint8_t)rng_u64();
    view_t Cv, Rv, Lv;
    if (packed) {
      double *cv = (double *)malloc((size_t)(T + 1) * sizeof(double));
      double *rv = (double *)malloc((size_t)(T * cd.width + 1) * sizeof(double));
      for (int64_t t = 0; t < T; t++) cv[t] = codes[t];
      for (int64_t b = 0; b < T * cd.width; b++) rv[b] = res[b];
      const int64_t rs[2] = {T, cd.width}, n1 = nd + 1;
      view_from(&Cv, ct, 1, &T, cv, 1);
      view_from(&Rv, LIK_U8, 2, rs, rv, 1);
      double ov[7];
      for (int64_t j = 0; j <= nd; j++) ov[j] = (double)off[j];
      view_from(&Lv, rng_chance(0.5) ? LIK_I32 : LIK_I64, 1, &n1, ov, 1);
      free(cv);
      free(rv);
    } else { /* padding holds codes outside [0, C): they must never be read */
      double *cv = (double *)malloc((size_t)(nd * ld + 1) * sizeof(double));
      double *rv = (double *)malloc((size_t)(nd * ld * cd.width + 1) * sizeof(double));
      for (int64_t j = 0; j < nd; j++)
        for (int64_t l = 0; l < ld; l++) {
          cv[j * ld + l] = l < len[j] ? codes[off[j] + l] : (rng_chance(0.5) ? -5 : C + 3);
          for (int64_t b = 0; b < cd.width; b++)
            rv[(j * ld + l) * cd.width + b] =
                l < len[j] ? res[(off[j] + l) * cd.width + b] : (double)(rng_u64() & 255);
        }
      const int64_t c2[2] = {nd, ld}, r3[3] = {nd, ld, cd.width};
      view_from(&Cv, ct, 2, c2, cv, 1);
      view_from(&Rv, LIK_U8, 3, r3, rv, 1);
      double lv[6];
      for (int64_t j = 0; j < nd; j++) lv[j] = (double)len[j];
      view_from(&Lv, rng_chance(0.5) ? LIK_I32 : LIK_I64, 1, &nd, lv, 1);
      free(cv);
      free(rv);
    }
    const int64_t gs[3] = {nq, nd, lq};
    view_t S, A, S1, A1;
    view_make(&S, LIK_F32, q2 ? 1 : 2, q2 ? gs + 1 : gs, random_layout(2), 0xFF);
    view_make(&A, LIK_I32, q2 ? 2 : 3, q2 ? gs + 1 : gs, random_layout(3), 0xFF);
    view_make(&S1, LIK_F32, q2 ? 1 : 2, q2 ? gs + 1 : gs, LAYOUT_DENSE, 0xFF);
    view_make(&A1, LIK_I32, q2 ? 2 : 3, q2 ? gs + 1 : gs, LAYOUT_DENSE, 0xFF);
    lik_options o = LIK_OPTIONS_INIT;
    o.normalize = normalize;
    o.num_threads = (int)rng_int(1, 4);
    lik_status st = packed ? lik_maxsim_residual_varlen(&Q.t, &cd.codec, &Cv.t, &Rv.t, &Lv.t, &o,
                                                        &S.t, &A.t)
                           : lik_maxsim_residual(&Q.t, &cd.codec, &Cv.t, &Rv.t, &Lv.t, &o, &S.t,
                                                 &A.t);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    o.num_threads = 1; /* a second run on one thread: bitwise the same */
    st = packed ? lik_maxsim_residual_varlen(&Q.t, &cd.codec, &Cv.t, &Rv.t, &Lv.t, &o, &S1.t, &A1.t)
                : lik_maxsim_residual(&Q.t, &cd.codec, &Cv.t, &Rv.t, &Lv.t, &o, &S1.t, &A1.t);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    if (g_port && st == LIK_OK && cs % 3 == 0) { /* the same on portable: bitwise S1 / A1 */
      view_t S2, A2;
      view_make(&S2, LIK_F32, q2 ? 1 : 2, q2 ? gs + 1 : gs, LAYOUT_DENSE, 0xFF);
      view_make(&A2, LIK_I32, q2 ? 2 : 3, q2 ? gs + 1 : gs, LAYOUT_DENSE, 0xFF);
      o.context = g_port;
      const lik_status sp =
          packed ? lik_maxsim_residual_varlen(&Q.t, &cd.codec, &Cv.t, &Rv.t, &Lv.t, &o, &S2.t, &A2.t)
                 : lik_maxsim_residual(&Q.t, &cd.codec, &Cv.t, &Rv.t, &Lv.t, &o, &S2.t, &A2.t);
      o.context = NULL;
      CHECK(sp == LIK_OK, "portable: %s", lik_last_error());
      CHECK(memcmp(S1.t.data, S2.t.data, (size_t)(nq * nd) * sizeof(float)) == 0 &&
                memcmp(A1.t.data, A2.t.data, (size_t)(nq * nd * lq) * sizeof(int32_t)) == 0,
            "scores / argmax differ from the portable path's");
      view_free(&S2);
      view_free(&A2);
    }
    CHECK(view_outside_written(&S) == 0 && view_outside_written(&A) == 0,
          "wrote outside the output views");
    int32_t *am = (int32_t *)malloc((size_t)lq * sizeof(int32_t));
    double *x = (double *)malloc((size_t)d * sizeof(double));
    for (int64_t i = 0; st == LIK_OK && i < nq; i++)
      for (int64_t j = 0; j < nd; j++) {
        const double ref =
            lik_ref_maxsim_residual(qf + i * lq * d, lq, cd.centf, d, cd.wtsf, nbits, cd.layout,
                                    codes + off[j], res + off[j] * cd.width, len[j], normalize, am);
        const int64_t si[2] = {i, j}, sj[1] = {j};
        const double got = t_get(&S.t, q2 ? sj : si), got1 = t_get(&S1.t, q2 ? sj : si);
        const double tol = 2e-5 * (1 + fabs(ref)) * (1 + (double)d / 64) * (normalize ? 1 : 8);
        CHECK(fabs(got - ref) <= tol, "score[%lld, %lld] = %.9g, reference %.9g", (long long)i,
              (long long)j, got, ref);
        CHECK(got == got1, "score[%lld, %lld] differs between thread counts", (long long)i,
              (long long)j);
        for (int64_t s = 0; s < lq; s++) {
          const int64_t ai[3] = {i, j, s}, aj[2] = {j, s};
          const int32_t a = (int32_t)t_get(&A.t, q2 ? aj : ai);
          CHECK(a == (int32_t)t_get(&A1.t, q2 ? aj : ai), "argmax differs between thread counts");
          if (len[j] == 0) {
            CHECK(a == -1, "argmax[%lld, %lld, %lld] = %d for an empty document", (long long)i,
                  (long long)j, (long long)s, a);
            continue;
          }
          if (a < 0 || a >= len[j]) {
            CHECK(0, "argmax[%lld, %lld, %lld] = %d outside [0, %lld)", (long long)i,
                  (long long)j, (long long)s, a, (long long)len[j]);
            continue;
          }
          /* the chosen token is a maximum up to rounding */
          double v[2];
          for (int w = 0; w < 2; w++) {
            const int32_t tk = w ? am[s] : a;
            lik_ref_decode(cd.centf, d, cd.wtsf, nbits, cd.layout, codes[off[j] + tk],
                           res + (off[j] + tk) * cd.width, normalize, x);
            double dot = 0, nn = 0;
            for (int64_t k = 0; k < d; k++) {
              dot += qf[(i * lq + s) * d + k] * x[k];
              nn += (double)qf[(i * lq + s) * d + k] * qf[(i * lq + s) * d + k];
            }
            v[w] = normalize ? dot / fmax(sqrt(nn), 1e-12) : dot;
          }
          CHECK(v[0] >= v[1] - tol, "argmax[%lld, %lld, %lld] = %d scores %.9g < best %.9g (token %d)",
                (long long)i, (long long)j, (long long)s, a, v[0], v[1], am[s]);
        }
      }
    free(am);
    free(x);
    free(qv);
    free(qf);
    free(codes);
    free(res);
    view_free(&Q);
    view_free(&Cv);
    view_free(&Rv);
    view_free(&Lv);
    view_free(&S);
    view_free(&A);
    view_free(&S1);
    view_free(&A1);
    codec_free(&cd);
  }
  group_end();
}

/* ---- decompress, compress, train, approx ------------------------------------------ */

static void test_decompress(int cases) {
  group_begin("decompress");
  static const lik_dtype odt[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};
  for (int cs = 0; cs < cases; cs++) {
    const int nbits = RNG_PICK(NBITS);
    const int64_t d = pick_dim(nbits), C = rng_int(1, 20), T = rng_int(0, 50);
    codec_t cd;
    codec_make(&cd, nbits, d, C);
    const int normalize = rng_chance(0.5), zero = rng_chance(0.2);
    const lik_dtype ot = RNG_PICK(odt);
    case_begin("nbits=%d d=%lld C=%lld T=%lld layout=%d normalize=%d out=%s zero=%d", nbits,
               (long long)d, (long long)C, (long long)T, cd.layout, normalize, dtype_str(ot), zero);
    if (zero) { /* decodes to exact zero vectors: normalise to 0, not NaN */
      memset(cd.centf, 0, (size_t)(C * d) * sizeof(float));
      memset(cd.wtsf, 0, ((size_t)1 << nbits) * sizeof(float));
      int64_t idx[2];
      for (int64_t f = 0; f < C * d; f++) {
        t_unravel(&cd.cent.t, f, idx);
        t_put(&cd.cent.t, idx, 0.0);
      }
      for (int64_t b = 0; b < ((int64_t)1 << nbits); b++) t_put(&cd.wts.t, &b, 0.0);
    }
    int32_t *codes = (int32_t *)malloc((size_t)(T + 1) * sizeof(int32_t));
    double *cv = (double *)malloc((size_t)(T + 1) * sizeof(double));
    double *rv = (double *)malloc((size_t)(T * cd.width + 1) * sizeof(double));
    uint8_t *res = (uint8_t *)malloc((size_t)(T * cd.width + 1));
    for (int64_t t = 0; t < T; t++) cv[t] = codes[t] = (int32_t)rng_int(0, C - 1);
    for (int64_t b = 0; b < T * cd.width; b++) rv[b] = res[b] = (uint8_t)rng_u64();
    view_t Cv, Rv, O;
    const int64_t rs[2] = {T, cd.width}, os[2] = {T, d};
    view_from(&Cv, rng_chance(0.5) ? LIK_I32 : LIK_I64, 1, &T, cv, 1);
    view_from(&Rv, LIK_U8, 2, rs, rv, 1);
    const layout_t ol = random_layout(2);
    view_make(&O, ot, 2, os, ol, 0xAB);
    lik_options o = LIK_OPTIONS_INIT;
    o.normalize = normalize;
    o.num_threads = (int)rng_int(1, 3);
    const lik_status st = lik_codec_decompress(&cd.codec, &Cv.t, &Rv.t, &o, &O.t);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    CHECK(view_outside_written(&O) == 0, "wrote outside the output view");
    if (g_port && st == LIK_OK) { /* the same on portable: bitwise, every case (cheap) */
      view_t O2;
      view_make(&O2, ot, 2, os, ol, 0xAB);
      o.context = g_port;
      const lik_status sp = lik_codec_decompress(&cd.codec, &Cv.t, &Rv.t, &o, &O2.t);
      CHECK(sp == LIK_OK, "portable: %s", lik_last_error());
      CHECK(O.bytes == O2.bytes && memcmp(O.base, O2.base, O.bytes) == 0,
            "decompressed tokens differ from the portable path's");
      view_free(&O2);
    }
    double *x = (double *)malloc((size_t)d * sizeof(double));
    for (int64_t t = 0; st == LIK_OK && t < T; t++) {
      lik_ref_decode(cd.centf, d, cd.wtsf, nbits, cd.layout, codes[t], res + t * cd.width,
                     normalize, x);
      for (int64_t k = 0; k < d; k++) {
        const int64_t idx[2] = {t, k};
        const double got = t_get(&O.t, idx);
        const double tol = (ot == LIK_F16 ? 1e-3 : ot == LIK_BF16 ? 8e-3 : 1e-6) * (1 + fabs(x[k]));
        CHECK(fabs(got - x[k]) <= tol, "out[%lld, %lld] = %.9g, reference %.9g", (long long)t,
              (long long)k, got, x[k]);
      }
    }
    free(x);
    free(codes);
    free(cv);
    free(rv);
    free(res);
    view_free(&Cv);
    view_free(&Rv);
    view_free(&O);
    codec_free(&cd);
  }
  group_end();
}

static void test_compress(int cases) {
  group_begin("compress");
  static const lik_dtype xdt[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};
  for (int cs = 0; cs < cases; cs++) {
    const int nbits = RNG_PICK(NBITS);
    const int64_t d = pick_dim(nbits), C = rng_int(1, 70), T = rng_int(0, 150);
    codec_t cd;
    codec_make(&cd, nbits, d, C);
    const lik_dtype xt = RNG_PICK(xdt), ct = rng_chance(0.5) ? LIK_I32 : LIK_I64;
    case_begin("nbits=%d d=%lld C=%lld T=%lld layout=%d X=%s codes=%s", nbits, (long long)d,
               (long long)C, (long long)T, cd.layout, dtype_str(xt), dtype_str(ct));
    const int64_t nb = (int64_t)1 << nbits;
    double cuts[255];
    for (int64_t i = 0; i < nb - 1; i++) cuts[i] = -0.5 + (i + rng_unit()) / (double)(nb - 1);
    const int64_t ncut = nb - 1;
    view_t Ct, X, Cv, Rv;
    view_from(&Ct, LIK_F32, 1, &ncut, cuts, 1);
    float cutf[255];
    for (int64_t i = 0; i < ncut; i++) cutf[i] = (float)cuts[i];
    double *xv = (double *)malloc((size_t)(T * d + 1) * sizeof(double));
    for (int64_t i = 0; i < T * d; i++) xv[i] = rng_range(-1, 1);
    const int64_t xs[2] = {T, d}, rs[2] = {T, cd.width};
    view_from(&X, xt, 2, xs, xv, 1);
    view_make(&Cv, ct, 1, &T, random_layout(1), 0xAB);
    view_make(&Rv, LIK_U8, 2, rs, random_layout(2), 0xAB);
    lik_codec codec = cd.codec;
    codec.bucket_cutoffs = &Ct.t;
    codec.bucket_weights = NULL;
    lik_options o = LIK_OPTIONS_INIT;
    o.num_threads = (int)rng_int(1, 3);
    const lik_status st = lik_codec_compress(&codec, &X.t, &o, &Cv.t, &Rv.t);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    CHECK(view_outside_written(&Cv) == 0 && view_outside_written(&Rv) == 0,
          "wrote outside the output views");
    /* buckets of the written bytes: decode with weights b and zero centroids */
    float ident[256], *zero = (float *)calloc((size_t)d, sizeof(float));
    for (int b = 0; b < 256; b++) ident[b] = (float)b;
    uint8_t *row = (uint8_t *)malloc((size_t)cd.width + 1);
    double *bk = (double *)malloc((size_t)d * sizeof(double));
    for (int64_t t = 0; st == LIK_OK && t < T; t++) {
      const int64_t code = (int64_t)t_get(&Cv.t, &t);
      if (code < 0 || code >= C) {
        CHECK(0, "codes[%lld] = %lld outside [0, %lld)", (long long)t, (long long)code, (long long)C);
        continue;
      }
      double best = -INFINITY, got = 0;
      for (int64_t c = 0; c < C; c++) {
        double v = 0;
        for (int64_t k = 0; k < d; k++) v += xv[t * d + k] * cd.centf[c * d + k];
        if (v > best) best = v;
        if (c == code) got = v;
      }
      CHECK(got >= best - 1e-5 * (1 + (double)d / 16), "codes[%lld] = %lld scores %.9g < best %.9g",
            (long long)t, (long long)code, got, best);
      for (int64_t b = 0; b < cd.width; b++) {
        const int64_t idx[2] = {t, b};
        row[b] = (uint8_t)t_get(&Rv.t, idx);
      }
      lik_ref_decode(zero, d, ident, nbits, cd.layout, 0, row, 0, bk);
      for (int64_t k = 0; k < d; k++) {
        const float r = (float)xv[t * d + k] - cd.centf[code * d + k];
        const int want = lik_ref_bucket(cutf, nbits, r);
        CHECK((int)bk[k] == want, "token %lld dim %lld: bucket %d, reference %d (residual %.9g)",
              (long long)t, (long long)k, (int)bk[k], want, r);
      }
    }
    free(zero);
    free(row);
    free(bk);
    free(xv);
    view_free(&Ct);
    view_free(&X);
    view_free(&Cv);
    view_free(&Rv);
    codec_free(&cd);
  }
  group_end();
}

static void test_train(int cases) {
  group_begin("train");
  static const lik_dtype rdt[] = {LIK_F32, LIK_F16, LIK_BF16, LIK_F64};
  for (int cs = 0; cs < cases; cs++) {
    const int nbits = RNG_PICK(NBITS);
    const int64_t n0 = rng_int(1, 60), n1 = rng_int(1, 20);
    const lik_dtype rt = RNG_PICK(rdt);
    case_begin("nbits=%d sample [%lld, %lld] %s", nbits, (long long)n0, (long long)n1,
               dtype_str(rt));
    double *v = (double *)malloc((size_t)(n0 * n1) * sizeof(double));
    for (int64_t i = 0; i < n0 * n1; i++) v[i] = rng_chance(0.1) ? 0.25 : rng_range(-1, 1) * rng_unit();
    const int64_t shape[2] = {n0, n1}, nb = (int64_t)1 << nbits, ncut = nb - 1;
    view_t R, Cut, W;
    view_from(&R, rt, 2, shape, v, 1);
    view_make(&Cut, LIK_F32, 1, &ncut, random_layout(1), 0xAB);
    view_make(&W, LIK_F32, 1, &nb, random_layout(1), 0xAB);
    const lik_status st = lik_codec_train(&R.t, nbits, &Cut.t, &W.t);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    float *vf = to_f32(v, n0 * n1);
    for (int64_t i = 0; st == LIK_OK && i < nb; i++) {
      const double wq = lik_ref_quantile(vf, n0 * n1, (i + 0.5) / (double)nb);
      CHECK(fabs(t_get(&W.t, &i) - wq) <= 1e-6 * (1 + fabs(wq)), "bucket_weights[%lld] = %.9g, reference %.9g",
            (long long)i, t_get(&W.t, &i), wq);
      if (i == 0) continue;
      const int64_t c = i - 1;
      const double cq = lik_ref_quantile(vf, n0 * n1, (double)i / (double)nb);
      CHECK(fabs(t_get(&Cut.t, &c) - cq) <= 1e-6 * (1 + fabs(cq)), "bucket_cutoffs[%lld] = %.9g, reference %.9g",
            (long long)c, t_get(&Cut.t, &c), cq);
    }
    free(v);
    free(vf);
    view_free(&R);
    view_free(&Cut);
    view_free(&W);
  }
  group_end();
}

static void test_approx(int cases) {
  group_begin("plaid_approx");
  static const lik_dtype sdt[] = {LIK_F32, LIK_F16, LIK_BF16};
  for (int cs = 0; cs < cases; cs++) {
    const int64_t nq = rng_int(1, 3), lq = rng_int(1, 40), C = rng_int(1, 50), nd = rng_int(0, 6);
    const lik_dtype stt = RNG_PICK(sdt);
    case_begin("Nq=%lld Lq=%lld C=%lld Nd=%lld %s", (long long)nq, (long long)lq, (long long)C,
               (long long)nd, dtype_str(stt));
    double *sv = (double *)malloc((size_t)(nq * lq * C) * sizeof(double));
    for (int64_t i = 0; i < nq * lq * C; i++) sv[i] = rng_range(-2, 2);
    const int64_t ss[3] = {nq, lq, C};
    view_t Sc, Cv, Cu, Out;
    view_from(&Sc, stt, 3, ss, sv, 1);
    float *sf = to_f32(sv, nq * lq * C);
    int64_t off[7] = {0};
    for (int64_t j = 0; j < nd; j++) off[j + 1] = off[j] + (rng_chance(0.2) ? 0 : rng_int(1, 30));
    int64_t T = off[nd], n1 = nd + 1;
    int32_t *codes = (int32_t *)malloc((size_t)(T + 1) * sizeof(int32_t));
    double *cv = (double *)malloc((size_t)(T + 1) * sizeof(double)), ov[7];
    for (int64_t t = 0; t < T; t++) cv[t] = codes[t] = (int32_t)rng_int(0, C - 1);
    for (int64_t j = 0; j <= nd; j++) ov[j] = (double)off[j];
    view_from(&Cv, rng_chance(0.5) ? LIK_I32 : LIK_I64, 1, &T, cv, 1);
    view_from(&Cu, rng_chance(0.5) ? LIK_I32 : LIK_I64, 1, &n1, ov, 1);
    const int64_t os[2] = {nq, nd};
    view_make(&Out, LIK_F32, 2, os, random_layout(2), 0xAB);
    lik_options o = LIK_OPTIONS_INIT;
    o.num_threads = (int)rng_int(1, 3);
    const lik_status st = lik_plaid_approx_score(&Sc.t, &Cv.t, &Cu.t, &o, &Out.t);
    CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
    for (int64_t i = 0; st == LIK_OK && i < nq; i++)
      for (int64_t j = 0; j < nd; j++) {
        const double ref = lik_ref_plaid_approx(sf + i * lq * C, lq, C, codes + off[j], off[j + 1] - off[j]);
        const int64_t idx[2] = {i, j};
        CHECK(fabs(t_get(&Out.t, idx) - ref) <= 1e-5 * (1 + fabs(ref)), "score[%lld, %lld] = %.9g, reference %.9g",
              (long long)i, (long long)j, t_get(&Out.t, idx), ref);
      }
    free(sv);
    free(sf);
    free(codes);
    free(cv);
    view_free(&Sc);
    view_free(&Cv);
    view_free(&Cu);
    view_free(&Out);
  }
  group_end();
}

/* ---- errors ------------------------------------------------------------------------ */

static void expect(lik_status st, lik_status want, const char *needle, const char *what) {
  CHECK(st == want, "%s: status %s, expected %s (%s)", what, lik_status_string(st),
        lik_status_string(want), lik_last_error());
  CHECK(strstr(lik_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what,
        lik_last_error(), needle);
}

static void test_errors(void) {
  group_begin("errors");
  case_begin("argument errors");
  float cent[4 * 8] = {0}, w[16] = {0, 1, 2, 3}, q[2 * 8] = {0}, sc[2], cut[3] = {-1, 0, 1};
  int32_t codes[6] = {0, 1, 2, 3, 0, 1}, lens[2] = {3, 3}, cu[3] = {0, 3, 6}, am[2 * 2];
  uint8_t res[6 * 2] = {0};
  lik_tensor C = {cent, LIK_F32, 2, {4, 8}, {8, 1}, LIK_CPU, 0};
  lik_tensor W = {w, LIK_F32, 1, {4}, {1}, LIK_CPU, 0};
  lik_tensor Q = {q, LIK_F32, 2, {2, 8}, {8, 1}, LIK_CPU, 0};
  lik_tensor S = {sc, LIK_F32, 1, {2}, {1}, LIK_CPU, 0};
  lik_tensor A = {am, LIK_I32, 2, {2, 2}, {2, 1}, LIK_CPU, 0};
  lik_tensor Cp = {codes, LIK_I32, 2, {2, 3}, {3, 1}, LIK_CPU, 0};
  lik_tensor Rp = {res, LIK_U8, 3, {2, 3, 2}, {6, 2, 1}, LIK_CPU, 0};
  lik_tensor L = {lens, LIK_I32, 1, {2}, {1}, LIK_CPU, 0};
  lik_tensor Ck = {codes, LIK_I32, 1, {6}, {1}, LIK_CPU, 0};
  lik_tensor Rk = {res, LIK_U8, 2, {6, 2}, {2, 1}, LIK_CPU, 0};
  lik_tensor Cu = {cu, LIK_I32, 1, {3}, {1}, LIK_CPU, 0};
  lik_tensor Cut = {cut, LIK_F32, 1, {3}, {1}, LIK_CPU, 0};
  lik_codec k = {&C, NULL, &W, 2, LIK_RESIDUAL_COLBERT};
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, &A), LIK_OK, "", "valid padded");
  expect(lik_maxsim_residual_varlen(&Q, &k, &Ck, &Rk, &Cu, NULL, &S, &A), LIK_OK, "", "valid packed");
  lik_options o = LIK_OPTIONS_INIT;
  o.fp32_precision = LIK_FP32_TF32; /* CUDA's; the CPU keeps fp32 */
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, &o, &S, &A), LIK_OK, "", "fp32_precision TF32");
  o.fp32_precision = (lik_fp32_precision)2;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, &o, &S, NULL), LIK_ERR_VALUE,
         "opts: fp32_precision 2", "fp32_precision 2");
  o.fp32_precision = LIK_FP32_HIGHEST;
  o.d_lengths = &L;
  expect(lik_maxsim_residual_varlen(&Q, &k, &Ck, &Rk, &Cu, &o, &S, NULL), LIK_ERR_VALUE,
         "d_lengths: the residual calls take doc_lengths", "opts lengths");
  k.nbits = 3;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_VALUE, "nbits: 3", "nbits 3");
  k.nbits = 4;
  W.shape[0] = 16;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_SHAPE,
         "residuals: last dimension 2 does not match d*nbits/8 = 4", "residual width");
  W.shape[0] = 4;
  k.nbits = 2;
  k.layout = (lik_residual_layout)7;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_VALUE, "codec.layout", "layout");
  k.layout = LIK_RESIDUAL_LIK;
  codes[4] = 4;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_VALUE,
         "codes[1, 1]=4 is outside [0, C=4)", "code out of range (padded)");
  expect(lik_maxsim_residual_varlen(&Q, &k, &Ck, &Rk, &Cu, NULL, &S, NULL), LIK_ERR_VALUE,
         "codes[4]=4 is outside [0, C=4)", "code out of range (packed)");
  lens[1] = 1; /* the bad code is now padding: not read */
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_OK, "", "bad code in padding");
  codes[4] = 0;
  lens[1] = -1;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_VALUE,
         "doc_lengths[1]=-1 is outside [0, Ld=3]", "negative length");
  lens[1] = 4;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_VALUE,
         "doc_lengths[1]=4 is outside [0, Ld=3]", "overlong length");
  lens[1] = 3;
  cu[1] = 7;
  expect(lik_maxsim_residual_varlen(&Q, &k, &Ck, &Rk, &Cu, NULL, &S, NULL), LIK_ERR_VALUE,
         "must be non-decreasing", "cu_seqlens not monotone");
  cu[1] = 3;
  cu[2] = 5;
  expect(lik_maxsim_residual_varlen(&Q, &k, &Ck, &Rk, &Cu, NULL, &S, NULL), LIK_ERR_VALUE,
         "does not equal codes' T=6", "cu_seqlens total");
  cu[2] = 6;
  Q.shape[1] = 7;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_SHAPE,
         "Q: d=7 does not match centroids' d=8", "Q's d");
  Q.shape[1] = 8;
  W.shape[0] = 3;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_SHAPE,
         "bucket_weights: has 3 entries, expected 4 for nbits=2", "weights length");
  W.shape[0] = 4;
  Rp.dtype = LIK_I32;
  expect(lik_maxsim_residual(&Q, &k, &Cp, &Rp, &L, NULL, &S, NULL), LIK_ERR_DTYPE,
         "residuals: dtype int32, expected uint8", "residual dtype");
  Rp.dtype = LIK_U8;
  C.shape[1] = 3; /* d*nbits = 6 bits */
  expect(lik_codec_decompress(&k, &Ck, &Rk, NULL, &Q), LIK_ERR_VALUE, "not a whole number of bytes",
         "d*nbits not a byte multiple");
  C.shape[1] = 8;
  k.bucket_cutoffs = &Cut;
  Ck.shape[0] = 5;
  expect(lik_codec_compress(&k, &Q, NULL, &Ck, &Rk), LIK_ERR_SHAPE, "residuals: shape [6, 2]",
         "compress shapes");
  Ck.shape[0] = 6;
  float nanv[8] = {NAN, 0, 0, 0, 0, 0, 0, 0};
  lik_tensor Xn = {nanv, LIK_F32, 2, {1, 8}, {8, 1}, LIK_CPU, 0};
  lik_tensor C1 = {codes, LIK_I32, 1, {1}, {1}, LIK_CPU, 0};
  lik_tensor R1 = {res, LIK_U8, 2, {1, 2}, {2, 1}, LIK_CPU, 0};
  expect(lik_codec_compress(&k, &Xn, NULL, &C1, &R1), LIK_ERR_VALUE, "X: token 0 has no finite",
         "NaN token");
  lik_tensor Tn = {nanv, LIK_F32, 1, {8}, {1}, LIK_CPU, 0};
  expect(lik_codec_train(&Tn, 2, &Cut, &W), LIK_ERR_VALUE, "residuals: value 0", "NaN in sample");
  Tn.shape[0] = 0;
  expect(lik_codec_train(&Tn, 2, &Cut, &W), LIK_ERR_VALUE, "the sample is empty", "empty sample");
  expect(lik_codec_train(&Tn, 5, &Cut, &W), LIK_ERR_VALUE, "nbits: 5", "train nbits");
  float cs[2 * 4];
  lik_tensor CS = {cs, LIK_F32, 2, {2, 3}, {4, 1}, LIK_CPU, 0};
  expect(lik_plaid_approx_score(&CS, &Ck, &Cu, NULL, &S), LIK_ERR_VALUE,
         "codes[3]=3 is outside [0, C=3)", "approx code range");
  group_end();
}

int main(int argc, char **argv) {
  (void)argc;
  test_init(argv[0]);
  portable_context_init();
  test_maxsim_residual(300);
  test_decompress(120);
  test_compress(120);
  test_train(60);
  test_approx(100);
  test_errors();
  lik_context_free(g_port);
  return test_finish(argv[0]);
}
