/*
 * test_quant.c — the low-bit MaxSim (lik_experimental.h) against a float64
 * reference of the quantised semantics, per CPU path: int8, int8 x bits and
 * bits x bits, random sizes (d in {1, 3, 17, 48, 96, 130, 1000}: 1, 2, 3 and
 * 16 words of bits; lengths 1 .. 70), per-token scales of either sign
 * (a negative query scale negates the query's values in the kernels), masks with garbage (and NaN scales) in masked tokens, int8 -128 in
 * Q (read as -127); the quantisers against their formulas; errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lik_experimental.h"
#include "lik_test_util.h"

static lik_tensor dense(void *data, lik_dtype dt, int ndim, const int64_t *shape) {
  lik_tensor t = {0};
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.strides[i] = s;
    s *= shape[i];
  }
  t.device = LIK_CPU;
  return t;
}

enum { INT8, INT8_BITS, BITS }; /* Q x D */

/* Feature k of a row of sign bits (MSB first), +-1. */
static double sign_bit(const uint8_t *row, int64_t k) { return (row[k / 8] >> (7 - k % 8)) & 1 ? 1.0 : -1.0; }

static void one_case(int kind) {
  static const int64_t dims[] = {1, 3, 17, 48, 96, 130, 1000};
  static const char *names[] = {"int8", "int8 x bits", "bits x bits"};
  const int64_t nq = rng_int(1, 3), nd = rng_int(1, 5), lq = rng_int(1, 40), ld = rng_int(1, 70);
  const int binary = kind != INT8;
  const int64_t d = RNG_PICK(dims), nb = (d + 7) / 8, dl = binary ? nb : d, ql = kind == BITS ? nb : d;
  case_begin("%s nq=%lld nd=%lld lq=%lld ld=%lld d=%lld", names[kind], (long long)nq, (long long)nd,
             (long long)lq, (long long)ld, (long long)d);
  int8_t *q = malloc((size_t)(nq * lq * ql));
  uint8_t *dd = malloc((size_t)(nd * ld * dl));
  float *sq = malloc((size_t)(nq * lq) * 4), *sd = malloc((size_t)(nd * ld) * 4), *out = malloc((size_t)(nq * nd) * 4);
  uint8_t *qm = malloc((size_t)(nq * lq)), *dm = malloc((size_t)(nd * ld));
  double *qv = malloc((size_t)(nq * lq * d) * 8), *dv = malloc((size_t)(nd * ld * d) * 8);
  for (int64_t x = 0; x < nq * lq * ql; x++) q[x] = (int8_t)rng_int(-128, 127);
  for (int64_t x = 0; x < nd * ld * dl; x++) dd[x] = (uint8_t)rng_int(0, 255);
  for (int64_t x = 0; x < nq * lq; x++) {
    qm[x] = rng_chance(0.8);
    sq[x] = qm[x] ? (float)((rng_chance(0.3) ? -1 : 1) * rng_range(0.001, 0.1)) : NAN;
  }
  for (int64_t x = 0; x < nd * ld; x++) {
    dm[x] = (uint8_t)(rng_chance(0.7) ? rng_int(1, 255) : 0);
    sd[x] = dm[x] ? (float)((rng_chance(0.3) ? -1 : 1) * rng_range(0.001, 0.1)) : NAN;
  }
  const int64_t qs[3] = {nq, lq, ql}, ds[3] = {nd, ld, dl}, ms[2] = {nq, lq}, mds[2] = {nd, ld};
  const int64_t os[2] = {nq, nd};
  lik_tensor Q = dense(q, kind == BITS ? LIK_U8 : LIK_I8, 3, qs), D = dense(dd, binary ? LIK_U8 : LIK_I8, 3, ds);
  lik_tensor SQ = dense(sq, LIK_F32, 2, ms), SD = dense(sd, LIK_F32, 2, mds);
  lik_tensor QM = dense(qm, LIK_U8, 2, ms), DM = dense(dm, LIK_U8, 2, mds), O = dense(out, LIK_F32, 2, os);
  lik_status st = binary ? lik_maxsim_binary(&Q, kind == BITS ? NULL : &SQ, &D, d, &QM, &DM, NULL, &O)
                         : lik_maxsim_scaled(&Q, &SQ, &D, &SD, &QM, &DM, NULL, &O);
  CHECK(st == LIK_OK, "status %s: %s", lik_status_string(st), lik_last_error());
  /* the dequantised values, float64: (q * scale_Q) . (d * scale_D), bits +-1 */
  for (int64_t x = 0; x < nq * lq * d; x++)
    qv[x] = kind == BITS ? sign_bit((const uint8_t *)q + x / d * nb, x % d)
                         : (q[x] < -127 ? -127 : q[x]) * (double)sq[x / d];
  for (int64_t x = 0; x < nd * ld * d; x++) {
    const int64_t tok = x / d, k = x % d;
    const uint8_t *row = dd + tok * dl;
    dv[x] = binary ? sign_bit(row, k) : (int8_t)row[k] * (double)sd[tok];
  }
  int64_t *qoff = malloc((size_t)(nq + 1) * 8), *doff = malloc((size_t)(nd + 1) * 8);
  for (int64_t x = 0; x <= nq; x++) qoff[x] = x * lq;
  for (int64_t x = 0; x <= nd; x++) doff[x] = x * ld;
  const seqs_t RQ = {nq, lq, d, qv, qm, qoff, 0}, RD = {nd, ld, d, dv, dm, doff, 0};
  for (int64_t i = 0; st == LIK_OK && i < nq; i++)
    for (int64_t j = 0; j < nd; j++) {
      double sc;
      const double want = ref_score(&RQ, i, &RD, j, NULL, &sc);
      CHECK(fabs(out[i * nd + j] - want) <= 1e-5 * sc + 1e-30, "score (%lld, %lld) = %.9g, want %.9g",
            (long long)i, (long long)j, out[i * nd + j], want);
    }
  free(q); free(dd); free(sq); free(sd); free(out); free(qm); free(dm); free(qv); free(dv);
  free(qoff); free(doff);
}

static void quantize_case(void) {
  const int64_t n = rng_int(1, 9), d = rng_int(1, 70);
  case_begin("quantize n=%lld d=%lld", (long long)n, (long long)d);
  float *x = malloc((size_t)(n * d) * 4), *s = malloc((size_t)n * 4);
  int8_t *q = malloc((size_t)(n * d));
  uint8_t *b = malloc((size_t)(n * ((d + 7) / 8)));
  for (int64_t i = 0; i < n * d; i++) x[i] = (float)rng_range(-3, 3);
  for (int64_t k = 0; k < d; k++) x[k] = 0.0f; /* an all-zero token */
  const int64_t xs[2] = {n, d}, bs[2] = {n, (d + 7) / 8};
  lik_tensor X = dense(x, LIK_F32, 2, xs), Q = dense(q, LIK_I8, 2, xs), S = dense(s, LIK_F32, 1, xs);
  lik_tensor B = dense(b, LIK_U8, 2, bs);
  CHECK(lik_quantize_int8(&X, NULL, &Q, &S) == LIK_OK, "%s", lik_last_error());
  CHECK(lik_quantize_binary(&X, NULL, &B) == LIK_OK, "%s", lik_last_error());
  for (int64_t i = 0; i < n; i++) {
    float amax = 0;
    for (int64_t k = 0; k < d; k++) amax = fmaxf(amax, fabsf(x[i * d + k]));
    const float sc = amax / 127.0f;
    CHECK(s[i] == sc, "scale %lld = %g, want %g", (long long)i, s[i], sc);
    for (int64_t k = 0; k < d; k++) {
      const float want = sc > 0 ? fminf(127, fmaxf(-127, nearbyintf(x[i * d + k] / sc))) : 0;
      CHECK(q[i * d + k] == (int8_t)want, "q (%lld, %lld) = %d, want %g", (long long)i, (long long)k,
            q[i * d + k], want);
      const int bit = (b[i * ((d + 7) / 8) + k / 8] >> (7 - k % 8)) & 1;
      CHECK(bit == (x[i * d + k] > 0), "bit (%lld, %lld)", (long long)i, (long long)k);
    }
  }
  free(x); free(s); free(q); free(b);
}

static void errors(void) {
  case_begin("errors");
  int8_t q[2 * 3 * 16] = {0};
  float s[6] = {1, 1, 1, 1, 1, 1}, o[4];
  const int64_t qs[3] = {2, 3, 16}, ss[2] = {2, 3}, ss_bad[2] = {3, 2}, os[2] = {2, 2}, bs[3] = {2, 3, 2};
  lik_tensor Q = dense(q, LIK_I8, 3, qs), S = dense(s, LIK_F32, 2, ss), O = dense(o, LIK_F32, 2, os);
  lik_tensor SB = dense(s, LIK_F32, 2, ss_bad), F = dense(q, LIK_F32, 3, qs);
  CHECK(lik_maxsim_scaled(&Q, &S, &Q, &SB, NULL, NULL, NULL, &O) == LIK_ERR_SHAPE &&
            strstr(lik_last_error(), "scale_D: shape [3, 2] is neither ()"), "%s", lik_last_error());
  CHECK(lik_maxsim_scaled(&F, &S, &F, &S, NULL, NULL, NULL, &O) == LIK_ERR_DTYPE, "%s", lik_last_error());
  CHECK(lik_maxsim_scaled(&Q, NULL, &Q, &S, NULL, NULL, NULL, &O) == LIK_ERR_NULL, "%s", lik_last_error());
  lik_tensor B = dense(q, LIK_U8, 3, bs);
  CHECK(lik_maxsim_binary(&Q, &S, &B, 17, NULL, NULL, NULL, &O) == LIK_ERR_SHAPE &&
            strstr(lik_last_error(), "ceil(d / 8) = 3 for d=17"), "%s", lik_last_error());
  CHECK(lik_maxsim_binary(&B, &S, &B, 16, NULL, NULL, NULL, &O) == LIK_ERR_VALUE, "%s", lik_last_error());
  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = 1;
  CHECK(lik_maxsim_scaled(&Q, &S, &Q, &S, NULL, NULL, &opts, &O) == LIK_ERR_VALUE, "%s", lik_last_error());
  /* lengths are not read by the low-bit calls: an error, not a silent full-length score */
  int32_t lens[2] = {3, 9};
  const int64_t ls[1] = {2};
  lik_tensor L = dense(lens, LIK_I32, 1, ls);
  opts.normalize = 0;
  opts.d_lengths = &L;
  CHECK(lik_maxsim_scaled(&Q, &S, &Q, &S, NULL, NULL, &opts, &O) == LIK_ERR_VALUE &&
            strstr(lik_last_error(), "d_lengths: the low-bit calls take no lengths"), "%s", lik_last_error());
  opts.d_lengths = NULL;
  opts.q_lengths = &L;
  CHECK(lik_maxsim_binary(&B, NULL, &B, 16, NULL, NULL, &opts, &O) == LIK_ERR_VALUE &&
            strstr(lik_last_error(), "q_lengths: the low-bit calls take no lengths"), "%s", lik_last_error());
  CHECK(lik_quantize_int8(&Q, NULL, &Q, &S) == LIK_ERR_DTYPE, "%s", lik_last_error());
  /* the quantisers on CUDA tensors: X on cuda:0 and its outputs on cuda:1 or on the host are
   * refused before any launch, in a build with CUDA or without */
  lik_tensor X = F, XQ = Q, XS = S, XB = B;
  X.device = XQ.device = XS.device = XB.device = LIK_CUDA;
  XQ.device_id = 1;
  CHECK(lik_quantize_int8(&X, NULL, &XQ, &XS) == LIK_ERR_DEVICE &&
            strstr(lik_last_error(), "X_int8 is on cuda:1"), "%s", lik_last_error());
  XB.device = LIK_CPU;
  CHECK(lik_quantize_binary(&X, NULL, &XB) == LIK_ERR_DEVICE && strstr(lik_last_error(), "bits is on cpu"),
        "%s", lik_last_error());
}

int main(void) {
  test_init("test_quant");
  group_begin("int8 / int8 x bits / bits vs float64");
  for (int c = 0; c < 60; c++) one_case(c % 3);
  group_end();
  group_begin("quantisers");
  for (int c = 0; c < 20; c++) quantize_case();
  group_end();
  group_begin("errors");
  errors();
  group_end();
  return test_finish("test_quant");
}
