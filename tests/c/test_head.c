/*
 * test_head.c — lik_maxsim_from_hidden and its backward against an fp64
 * scalar reference written from the contract (lik_experimental.h): random
 * sizes (d_model 1 / 3 / 17 / 96, d_out 1 / 17 / 128, empty batches and
 * lengths), random strided / flipped / transposed views, masks with NaN in
 * every masked token, cross and KD layouts, F32 / BF16 / F64; outputs are
 * written exactly inside their views and inputs are left unchanged.  The
 * backward reference uses the library's argmax (so ties cannot matter).
 */
#include "lik_experimental.h"
#include "lik_test_util.h"

typedef struct {
  int kd, normalize, has_b;
  int64_t nq, nd, lq, ld, dm, dout; /* nd = K in KD */
} hcase;

static double randn(void) {
  double u = rng_range(1e-12, 1.0), v = rng_unit();
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Index of token l of document n of H_d (cross [nd, ld, dm], KD [nq, K, ld, dm]). */
static void hidx(const hcase *c, int64_t n, int64_t l, int64_t k, int64_t *idx) {
  int a = 0;
  if (c->kd) idx[a++] = n / c->nd;
  idx[a++] = c->kd ? n % c->nd : n;
  idx[a++] = l;
  idx[a] = k;
}

static int mvalid(const view_t *m, const hcase *c, int64_t n, int64_t l) {
  int64_t idx[4];
  hidx(c, n, l, 0, idx);
  return t_get(&m->t, idx) != 0;
}

/* fp64 projection of token (n, l) into y[dout]; returns max(||y||, 1e-12). */
static double project(const hcase *c, const view_t *H, const view_t *W, const view_t *B,
                      int64_t n, int64_t l, double *y) {
  double ss = 0;
  for (int64_t o = 0; o < c->dout; o++) {
    double v = c->has_b ? t_get(&B->t, (int64_t[]){o}) : 0.0;
    for (int64_t k = 0; k < c->dm; k++) {
      int64_t idx[4];
      hidx(c, n, l, k, idx);
      v += t_get(&H->t, idx) * t_get(&W->t, (int64_t[]){o, k});
    }
    y[o] = v;
    ss += v * v;
  }
  return fmax(sqrt(ss), 1e-12);
}

static void run_case(const hcase *c, lik_dtype dt) {
  const int64_t ndoc = c->kd ? c->nq * c->nd : c->nd;
  const int hnd = c->kd ? 4 : 3;
  const int64_t qs[3] = {c->nq, c->lq, c->dout}, qms[2] = {c->nq, c->lq};
  const int64_t hs[4] = {c->kd ? c->nq : c->nd, c->kd ? c->nd : c->ld,
                         c->kd ? c->ld : c->dm, c->dm};
  const int64_t ws[2] = {c->dout, c->dm}, bs[1] = {c->dout}, ss[2] = {c->nq, c->nd};
  const int64_t as[3] = {c->nq, c->nd, c->lq};
  view_t Q, H, W, B, QM, HM, S, A, GS, GQ, GH, GW, GB;
  view_make(&Q, dt, 3, qs, random_layout(3), 0xFF);
  view_make(&H, dt, hnd, hs, random_layout(hnd), 0xFF);
  view_make(&W, dt, 2, ws, random_layout(2), 0xFF);
  view_make(&B, dt, 1, bs, random_layout(1), 0xFF);
  view_make(&QM, LIK_U8, 2, qms, random_layout(2), 0);
  view_make(&HM, LIK_U8, hnd - 1, hs, random_layout(hnd - 1), 0);
  const lik_dtype sdt = dt == LIK_F64 && rng_chance(0.5) ? LIK_F64 : LIK_F32;
  view_make(&S, sdt, 2, ss, random_layout(2), 0xFF);
  view_make(&A, LIK_I32, 3, as, random_layout(3), 0xFF);
  view_make(&GS, LIK_F32, 2, ss, random_layout(2), 0xFF);
  view_make(&GQ, dt, 3, qs, random_layout(3), 0xAB);
  view_make(&GH, dt, hnd, hs, random_layout(hnd), 0xAB);
  view_make(&GW, dt, 2, ws, random_layout(2), 0xAB);
  view_make(&GB, dt, 1, bs, random_layout(1), 0xAB);
  int64_t idx[4];
  for (int64_t f = 0; f < t_numel(&QM.t); f++) {
    t_unravel(&QM.t, f, idx);
    t_put(&QM.t, idx, rng_chance(0.8));
  }
  for (int64_t f = 0; f < t_numel(&HM.t); f++) {
    t_unravel(&HM.t, f, idx);
    t_put(&HM.t, idx, rng_chance(0.7));
  }
  for (int64_t f = 0; f < t_numel(&Q.t); f++) { /* masked tokens keep NaN */
    t_unravel(&Q.t, f, idx);
    if (t_get(&QM.t, idx)) t_put(&Q.t, idx, round_to(dt, randn() / sqrt((double)c->dout)));
  }
  for (int64_t f = 0; f < t_numel(&H.t); f++) {
    t_unravel(&H.t, f, idx);
    if (t_get(&HM.t, idx)) t_put(&H.t, idx, round_to(dt, randn()));
  }
  for (int64_t f = 0; f < t_numel(&W.t); f++) {
    t_unravel(&W.t, f, idx);
    t_put(&W.t, idx, round_to(dt, randn() / sqrt((double)c->dm)));
  }
  for (int64_t o = 0; o < c->dout; o++) t_put(&B.t, (int64_t[]){o}, round_to(dt, randn()));
  for (int64_t f = 0; f < t_numel(&GS.t); f++) {
    t_unravel(&GS.t, f, idx);
    t_put(&GS.t, idx, randn());
  }
  view_t *ins[] = {&Q, &H, &W, &B, &QM, &HM};
  for (int v = 0; v < 6; v++) view_snapshot(ins[v]);
  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = c->normalize;
  opts.num_threads = (int)rng_int(1, 3);
  const lik_tensor *bt = c->has_b ? &B.t : NULL;
  lik_status st = lik_maxsim_from_hidden(&Q.t, &H.t, &W.t, bt, &QM.t, &HM.t, &opts, &S.t, &A.t);
  CHECK(st == LIK_OK, "forward: status %s: %s", lik_status_string(st), lik_last_error());
  if (st == LIK_OK) {
    st = lik_maxsim_from_hidden_backward(&Q.t, &H.t, &W.t, bt, &QM.t, &HM.t, &A.t, &GS.t, &opts,
                                         &GQ.t, &GH.t, &GW.t, c->has_b ? &GB.t : NULL);
    CHECK(st == LIK_OK, "backward: status %s: %s", lik_status_string(st), lik_last_error());
  }
  /* F32 scores round the sum once; gradients are in the input dtype */
  const double tol = dt == LIK_F64 ? 1e-9 : dt == LIK_BF16 ? 2e-2 : 1e-4;
  /* reference: every projected token, fp64 */
  double *Y = calloc((size_t)(ndoc * c->ld * c->dout + 1), sizeof(double));
  double *NR = calloc((size_t)(ndoc * c->ld + 1), sizeof(double));
  double *E = calloc((size_t)(ndoc * c->ld * c->dout + 1), sizeof(double));
  for (int64_t n = 0; n < ndoc; n++)
    for (int64_t l = 0; l < c->ld; l++) {
      if (!mvalid(&HM, c, n, l)) continue;
      double *y = Y + (n * c->ld + l) * c->dout;
      NR[n * c->ld + l] = project(c, &H, &W, &B, n, l, y);
      if (c->normalize)
        for (int64_t o = 0; o < c->dout; o++) y[o] /= NR[n * c->ld + l];
    }
  double gqmax = 1e-30, gwmax = 1e-30;
  for (int64_t i = 0; i < c->nq && st == LIK_OK; i++)
    for (int64_t j = 0; j < c->nd; j++) {
      const int64_t n = c->kd ? i * c->nd + j : j;
      double ref = 0;
      for (int64_t s = 0; s < c->lq; s++) {
        const int qv = t_get(&QM.t, (int64_t[]){i, s}) != 0;
        double best = -INFINITY, bestsc = 0;
        for (int64_t l = 0; l < c->ld && qv; l++) {
          if (!mvalid(&HM, c, n, l)) continue;
          double v = 0;
          for (int64_t o = 0; o < c->dout; o++)
            v += t_get(&Q.t, (int64_t[]){i, s, o}) * Y[(n * c->ld + l) * c->dout + o];
          if (v > best) best = v, bestsc = 1;
        }
        if (bestsc) ref += best;
        const int a = (int)t_get(&A.t, (int64_t[]){i, j, s});
        CHECK(a >= -1 && a < c->ld && (a >= 0) == (bestsc != 0), "argmax[%lld,%lld,%lld]=%d",
              (long long)i, (long long)j, (long long)s, a);
        if (a < 0) continue;
        const double g = t_get(&GS.t, (int64_t[]){i, j});
        for (int64_t o = 0; o < c->dout; o++)
          E[(n * c->ld + a) * c->dout + o] += g * t_get(&Q.t, (int64_t[]){i, s, o});
      }
      const double got = t_get(&S.t, (int64_t[]){i, j});
      CHECK(fabs(got - ref) <= (sdt == LIK_F64 ? tol : fmax(tol, 1e-6)) * (1 + fabs(ref)), "score[%lld,%lld]=%.9g ref %.9g",
            (long long)i, (long long)j, got, ref);
    }
  if (st == LIK_OK) {
    /* grad_Q from the library's argmax */
    for (int64_t i = 0; i < c->nq; i++)
      for (int64_t s = 0; s < c->lq; s++)
        for (int64_t o = 0; o < c->dout; o++) {
          double r = 0;
          for (int64_t j = 0; j < c->nd; j++) {
            const int a = (int)t_get(&A.t, (int64_t[]){i, j, s});
            const int64_t n = c->kd ? i * c->nd + j : j;
            if (a >= 0) r += t_get(&GS.t, (int64_t[]){i, j}) * Y[(n * c->ld + a) * c->dout + o];
          }
          const double got = t_get(&GQ.t, (int64_t[]){i, s, o});
          gqmax = fmax(gqmax, fabs(r));
          CHECK(fabs(got - r) <= tol * (1 + fabs(r)), "grad_Q[%lld,%lld,%lld]=%.9g ref %.9g",
                (long long)i, (long long)s, (long long)o, got, r);
        }
    /* gy in place of E, then grad_H_d, grad_W, grad_b */
    double *gw = calloc((size_t)(c->dout * (c->dm + 1)), sizeof(double));
    double *ES = calloc((size_t)c->dout + 1, sizeof(double));
    for (int64_t n = 0; n < ndoc; n++)
      for (int64_t l = 0; l < c->ld; l++) {
        double *e = E + (n * c->ld + l) * c->dout;
        const double *y = Y + (n * c->ld + l) * c->dout;
        /* es: the magnitude of each gy term, the error scale of grad_H (the
         * normalisation's projection can cancel: d_model = 1 without a bias
         * gives grad_H = 0 from terms of size |e| ||W|| / ||W h||) */
        double *es = ES;
        for (int64_t o = 0; o < c->dout; o++) es[o] = fabs(e[o]);
        if (c->normalize && mvalid(&HM, c, n, l)) {
          double dot = 0;
          for (int64_t o = 0; o < c->dout; o++) dot += e[o] * y[o];
          for (int64_t o = 0; o < c->dout; o++) {
            es[o] = (fabs(e[o]) + fabs(y[o] * dot)) / NR[n * c->ld + l];
            e[o] = (e[o] - y[o] * dot) / NR[n * c->ld + l];
          }
        }
        for (int64_t k = 0; k < c->dm; k++) {
          int64_t ix[4];
          hidx(c, n, l, k, ix);
          double r = 0, scale = 0;
          for (int64_t o = 0; o < c->dout; o++) {
            r += e[o] * t_get(&W.t, (int64_t[]){o, k});
            scale += es[o] * fabs(t_get(&W.t, (int64_t[]){o, k}));
          }
          const double got = t_get(&GH.t, ix);
          CHECK(fabs(got - r) <= tol * (1 + scale), "grad_H[%lld,%lld,%lld]=%.9g ref %.9g (scale %.3g)",
                (long long)n, (long long)l, (long long)k, got, r, scale);
          if (mvalid(&HM, c, n, l))
            for (int64_t o = 0; o < c->dout; o++) gw[o * (c->dm + 1) + k] += e[o] * t_get(&H.t, ix);
        }
        for (int64_t o = 0; o < c->dout; o++) gw[o * (c->dm + 1) + c->dm] += e[o];
      }
    for (int64_t o = 0; o < c->dout; o++)
      for (int64_t k = 0; k <= c->dm; k++) gwmax = fmax(gwmax, fabs(gw[o * (c->dm + 1) + k]));
    for (int64_t o = 0; o < c->dout; o++)
      for (int64_t k = 0; k <= c->dm; k++) {
        if (k == c->dm && !c->has_b) continue;
        const double r = gw[o * (c->dm + 1) + k];
        const double got = k < c->dm ? t_get(&GW.t, (int64_t[]){o, k}) : t_get(&GB.t, (int64_t[]){o});
        CHECK(fabs(got - r) <= tol * (1 + gwmax), "grad_%s[%lld,%lld]=%.9g ref %.9g",
              k < c->dm ? "W" : "b", (long long)o, (long long)k, got, r);
      }
    free(gw);
    free(ES);
    view_t *outs[] = {&S, &A, &GQ, &GH, &GW, &GB};
    for (int v = 0; v < 6; v++)
      CHECK(view_outside_written(outs[v]) == 0, "output %d written outside its view", v);
    for (int v = 0; v < 6; v++) CHECK(view_unchanged(ins[v]), "input %d changed", v);
  }
  free(Y);
  free(NR);
  free(E);
  view_t *all[] = {&Q, &H, &W, &B, &QM, &HM, &S, &A, &GS, &GQ, &GH, &GW, &GB};
  for (int v = 0; v < 13; v++) view_free(all[v]);
}

static void group_random(void) {
  group_begin("random");
  static const int64_t dms[] = {1, 3, 17, 96}, douts[] = {1, 17, 128};
  static const lik_dtype dts[] = {LIK_F32, LIK_BF16, LIK_F64};
  for (int it = 0; it < 48; it++) {
    hcase c;
    c.kd = rng_chance(0.3);
    c.normalize = rng_chance(0.6);
    c.has_b = rng_chance(0.7);
    c.nq = rng_int(0, 3);
    c.nd = rng_int(0, 4);
    c.lq = rng_int(0, 6);
    c.ld = rng_chance(0.2) ? rng_int(0, 2) : rng_int(3, 40);
    c.dm = dms[rng_int(0, 3)];
    c.dout = douts[rng_int(0, 2)];
    const lik_dtype dt = dts[it % 3];
    case_begin("%s kd=%d norm=%d b=%d nq=%lld nd=%lld lq=%lld ld=%lld d_model=%lld d_out=%lld",
               dtype_str(dt), c.kd, c.normalize, c.has_b, (long long)c.nq, (long long)c.nd,
               (long long)c.lq, (long long)c.ld, (long long)c.dm, (long long)c.dout);
    run_case(&c, dt);
  }
  group_end();
}

static void group_errors(void) {
  group_begin("errors");
  case_begin("bad arguments");
  view_t Q, H, W, W2, B, S, A, GS, GB;
  view_make(&Q, LIK_F32, 3, (int64_t[]){2, 3, 4}, LAYOUT_DENSE, 0);
  view_make(&H, LIK_F32, 3, (int64_t[]){5, 6, 7}, LAYOUT_DENSE, 0);
  view_make(&W, LIK_F32, 2, (int64_t[]){4, 7}, LAYOUT_DENSE, 0);
  view_make(&W2, LIK_F32, 2, (int64_t[]){4, 6}, LAYOUT_DENSE, 0);
  view_make(&B, LIK_F64, 1, (int64_t[]){4}, LAYOUT_DENSE, 0);
  view_make(&S, LIK_F32, 2, (int64_t[]){2, 5}, LAYOUT_DENSE, 0);
  view_make(&A, LIK_I32, 3, (int64_t[]){2, 5, 3}, LAYOUT_DENSE, 0);
  view_make(&GS, LIK_F32, 2, (int64_t[]){2, 5}, LAYOUT_DENSE, 0);
  view_make(&GB, LIK_F32, 1, (int64_t[]){4}, LAYOUT_DENSE, 0);
  lik_status st = lik_maxsim_from_hidden(NULL, &H.t, &W.t, NULL, NULL, NULL, NULL, &S.t, NULL);
  CHECK(st == LIK_ERR_NULL, "NULL Q: %s", lik_status_string(st));
  st = lik_maxsim_from_hidden(&Q.t, &H.t, &W2.t, NULL, NULL, NULL, NULL, &S.t, NULL);
  CHECK(st == LIK_ERR_SHAPE && strstr(lik_last_error(), "d_model=7"), "W shape: %s %s",
        lik_status_string(st), lik_last_error());
  st = lik_maxsim_from_hidden(&Q.t, &H.t, &W.t, &B.t, NULL, NULL, NULL, &S.t, NULL);
  CHECK(st == LIK_ERR_DTYPE, "b dtype: %s", lik_status_string(st));
  st = lik_maxsim_from_hidden(&Q.t, &H.t, &W.t, NULL, NULL, NULL, NULL, &S.t, &A.t);
  CHECK(st == LIK_OK, "forward: %s %s", lik_status_string(st), lik_last_error());
  st = lik_maxsim_from_hidden_backward(&Q.t, &H.t, &W.t, NULL, NULL, NULL, &A.t, &GS.t, NULL,
                                       NULL, NULL, NULL, &GB.t);
  CHECK(st == LIK_ERR_VALUE, "grad_b without b: %s", lik_status_string(st));
  ((int32_t *)A.t.data)[1] = 6;
  st = lik_maxsim_from_hidden_backward(&Q.t, &H.t, &W.t, NULL, NULL, NULL, &A.t, &GS.t, NULL,
                                       NULL, NULL, NULL, NULL);
  CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), "argmax[0, 0, 1]=6"), "argmax range: %s %s",
        lik_status_string(st), lik_last_error());
  st = lik_maxsim_from_hidden(&Q.t, &H.t, &W.t, NULL, NULL, NULL, NULL, &Q.t, NULL);
  CHECK(st != LIK_OK, "scores aliasing Q accepted");
  /* lengths are not read by the fused head: an error, not a silent full-length score */
  int32_t lens[5] = {6, 99, 0, 1, 2};
  lik_tensor L = {.data = lens, .dtype = LIK_I32, .ndim = 1, .shape = {5}, .strides = {1}};
  lik_options lo = LIK_OPTIONS_INIT;
  lo.d_lengths = &L;
  st = lik_maxsim_from_hidden(&Q.t, &H.t, &W.t, NULL, NULL, NULL, &lo, &S.t, NULL);
  CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), "d_lengths: the fused head takes no lengths"),
        "forward lengths: %s %s", lik_status_string(st), lik_last_error());
  ((int32_t *)A.t.data)[1] = 0;
  st = lik_maxsim_from_hidden_backward(&Q.t, &H.t, &W.t, NULL, NULL, NULL, &A.t, &GS.t, &lo,
                                       NULL, NULL, NULL, NULL);
  CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), "d_lengths: the fused head takes no lengths"),
        "backward lengths: %s %s", lik_status_string(st), lik_last_error());
  view_t *all[] = {&Q, &H, &W, &W2, &B, &S, &A, &GS, &GB};
  for (int v = 0; v < 9; v++) view_free(all[v]);
  group_end();
}

int main(void) {
  test_init("test_head");
  group_random();
  group_errors();
  return test_finish("test_head");
}
