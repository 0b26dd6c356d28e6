/*
 * test_errors.c — every validation path of the public forward API: the
 * returned status, the message (names the argument and the sizes), that no
 * output is written on failure; lik_status_string, lik_last_error (cleared by
 * a successful call, thread-local) and the version macros.
 */
#include <pthread.h>

#include "lik_test_util.h"

/* Base problem: Q [2,3,4], D [5,6,4], masks, scores [2,5], argmax [2,5,3]. */
static float qbuf[2 * 3 * 128], dbuf[13 * 2 * 6 * 128];
static uint8_t qmb[64], dmb[512];
static float sbuf[256];
static int32_t abuf[512];
static int64_t ibuf[256];

static lik_tensor T(void *data, lik_dtype dt, int ndim, int64_t a, int64_t b, int64_t c,
                    int64_t d) {
  lik_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  const int64_t s[4] = {a, b, c, d};
  for (int i = 0; i < ndim && i < 4; i++) t.shape[i] = s[i];
  int64_t st = 1;
  for (int i = (ndim < 4 ? ndim : 4) - 1; i >= 0; i--) {
    t.strides[i] = st;
    st *= t.shape[i] > 0 ? t.shape[i] : 1;
  }
  t.device = LIK_CPU;
  return t;
}

static lik_tensor Q, D, QM, DM, S, A;

static void reset(void) {
  Q = T(qbuf, LIK_F32, 3, 2, 3, 4, 0);
  D = T(dbuf, LIK_F32, 3, 5, 6, 4, 0);
  QM = T(qmb, LIK_BOOL, 2, 2, 3, 0, 0);
  DM = T(dmb, LIK_U8, 2, 5, 6, 0, 0);
  S = T(sbuf, LIK_F32, 2, 2, 5, 0, 0);
  A = T(abuf, LIK_I32, 3, 2, 5, 3, 0);
  memset(sbuf, 0xCD, sizeof sbuf);
  memset(abuf, 0xCD, sizeof abuf);
  memset(ibuf, 0xCD, sizeof ibuf);
}

static int outputs_untouched(void) {
  for (size_t i = 0; i < sizeof sbuf; i++)
    if (((unsigned char *)sbuf)[i] != 0xCD) return 0;
  for (size_t i = 0; i < sizeof abuf; i++)
    if (((unsigned char *)abuf)[i] != 0xCD) return 0;
  for (size_t i = 0; i < sizeof ibuf; i++)
    if (((unsigned char *)ibuf)[i] != 0xCD) return 0;
  return 1;
}

/* Checks a failing call: status in {want, want2}, message non-empty and
 * containing every given substring (NULL-terminated), outputs untouched. */
static void expect_fail(int line, const char *what, lik_status got, lik_status want,
                        lik_status want2, ...) {
  case_begin("line %d: %s", line, what);
  const char *msg = lik_last_error();
  CHECK(got == want || got == want2, "status %s, expected %s%s%s (message: '%s')",
        lik_status_string(got), lik_status_string(want), want2 != want ? " or " : "",
        want2 != want ? lik_status_string(want2) : "", msg);
  CHECK(msg && msg[0], "empty lik_last_error() after a failing call");
  va_list ap;
  va_start(ap, want2);
  const char *sub;
  while ((sub = va_arg(ap, const char *)))
    CHECK(msg && strstr(msg, sub), "message '%s' does not contain '%s'", msg, sub);
  va_end(ap);
  CHECK(outputs_untouched(), "an output was written by a failing call");
}

#define FAIL1(call, want, ...) \
  expect_fail(__LINE__, #call, (call), want, want, ##__VA_ARGS__, (const char *)NULL)
#define FAIL2(call, want, want2, ...) \
  expect_fail(__LINE__, #call, (call), want, want2, ##__VA_ARGS__, (const char *)NULL)

#define MAXSIM() lik_maxsim(&Q, &D, &QM, &DM, NULL, &S, &A)

static void group_version(void) {
  group_begin("version");
  case_begin("version");
  CHECK(lik_version_number() == LIK_VERSION_NUMBER, "lik_version_number() %d != %d",
        lik_version_number(), LIK_VERSION_NUMBER);
  CHECK(LIK_VERSION_NUMBER ==
            LIK_VERSION_MAJOR * 10000 + LIK_VERSION_MINOR * 100 + LIK_VERSION_PATCH,
        "LIK_VERSION_NUMBER inconsistent with MAJOR/MINOR/PATCH");
  const char *vs = lik_version_string();
  CHECK(vs && !strcmp(vs, LIK_VERSION_STRING), "lik_version_string() '%s' != '%s'",
        vs ? vs : "(null)", LIK_VERSION_STRING);
  char buf[64];
  snprintf(buf, sizeof buf, "%d.%d.%d", LIK_VERSION_MAJOR, LIK_VERSION_MINOR, LIK_VERSION_PATCH);
  CHECK(!strcmp(buf, LIK_VERSION_STRING), "LIK_VERSION_STRING '%s' != '%s'", LIK_VERSION_STRING,
        buf);
  group_end();
}

static void group_status_strings(void) {
  group_begin("status-strings");
  case_begin("lik_status_string");
  const char *names[] = {"LIK_OK",           "LIK_ERR_NULL",   "LIK_ERR_SHAPE",
                         "LIK_ERR_DTYPE",    "LIK_ERR_VALUE",  "LIK_ERR_DEVICE",
                         "LIK_ERR_ALLOC",    "LIK_ERR_UNSUPPORTED", "LIK_ERR_CUDA"};
  for (int s = 0; s <= 8; s++) {
    const char *n = lik_status_string((lik_status)s);
    CHECK(n && !strcmp(n, names[s]), "lik_status_string(%d) = '%s', expected '%s'", s,
          n ? n : "(null)", names[s]);
  }
  const char *u = lik_status_string((lik_status)99);
  CHECK(u != NULL && u[0], "lik_status_string(99) is NULL or empty");
  u = lik_status_string((lik_status)-1);
  CHECK(u != NULL && u[0], "lik_status_string(-1) is NULL or empty");
  group_end();
}

static void group_maxsim_errors(void) {
  group_begin("maxsim-errors");
  /* sanity: the base call succeeds */
  reset();
  case_begin("base call");
  lik_status st = MAXSIM();
  CHECK(st == LIK_OK, "base call: %s: %s", lik_status_string(st), lik_last_error());
  /* NULL pointers */
  reset();
  FAIL1(lik_maxsim(NULL, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_NULL, "Q");
  reset();
  FAIL1(lik_maxsim(&Q, NULL, NULL, NULL, NULL, &S, NULL), LIK_ERR_NULL, "D");
  reset();
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, NULL, NULL), LIK_ERR_NULL, "scores");
  reset();
  Q.data = NULL;
  FAIL1(MAXSIM(), LIK_ERR_NULL, "Q");
  reset();
  D.data = NULL;
  FAIL1(MAXSIM(), LIK_ERR_NULL, "D");
  reset();
  DM.data = NULL;
  FAIL1(MAXSIM(), LIK_ERR_NULL, "d_mask");
  reset();
  S.data = NULL;
  FAIL1(MAXSIM(), LIK_ERR_NULL, "scores");
  /* ndim */
  reset();
  Q = T(qbuf, LIK_F32, 1, 4, 0, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "Q");
  reset();
  Q = T(qbuf, LIK_F32, 4, 1, 2, 3, 4);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "Q");
  reset();
  D = T(dbuf, LIK_F32, 1, 4, 0, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "D");
  reset();
  D.ndim = 5;
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "D");
  reset();
  Q.ndim = -1;
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "Q");
  reset();
  Q.shape[1] = -3;
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "Q", "-3");
  /* d mismatch: the message names both sizes */
  reset();
  Q = T(qbuf, LIK_F32, 3, 2, 3, 128, 0);
  D = T(dbuf, LIK_F32, 3, 5, 6, 96, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "D", "d=96", "d=128");
  /* d = 0 and d beyond INT32_MAX (a stride-0 view) are rejected, not divided by */
  reset();
  Q = T(qbuf, LIK_F32, 3, 2, 3, 0, 0);
  D = T(dbuf, LIK_F32, 3, 5, 6, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "d=0");
  reset();
  Q.shape[2] = D.shape[2] = (int64_t)1 << 40;
  Q.strides[2] = D.strides[2] = 0;
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "d=1099511627776");
  /* an element count that overflows int64 is an error, not an empty tensor */
  reset();
  Q.data = NULL;
  Q.shape[0] = (int64_t)1 << 62;
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "Q", "int64");
  /* outputs with stride 0 would have several writers per element */
  reset();
  S.strides[1] = 0;
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "scores", "stride 0");
  reset();
  A.strides[2] = 0;
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "argmax", "stride 0");
  reset();
  Q = T(qbuf, LIK_F32, 2, 3, 17, 0, 0);
  D = T(dbuf, LIK_F32, 4, 2, 2, 6, 33);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "17", "33");
  /* KD */
  reset();
  Q = T(qbuf, LIK_F32, 3, 11, 3, 4, 0);
  D = T(dbuf, LIK_F32, 4, 13, 2, 6, 4);
  S = T(sbuf, LIK_F32, 2, 11, 2, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "11", "13");
  reset();
  Q = T(qbuf, LIK_F32, 2, 3, 4, 0, 0);
  D = T(dbuf, LIK_F32, 4, 2, 2, 6, 4);
  S = T(sbuf, LIK_F32, 1, 2, 0, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "D");
  reset(); /* KD d_mask missing K */
  D = T(dbuf, LIK_F32, 4, 2, 7, 6, 4);
  DM = T(dmb, LIK_U8, 2, 2, 6, 0, 0);
  S = T(sbuf, LIK_F32, 2, 2, 7, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, &DM, NULL, &S, NULL), LIK_ERR_SHAPE, "d_mask");
  reset(); /* KD scores [Nq, Nd]-like wrong */
  D = T(dbuf, LIK_F32, 4, 2, 7, 6, 4);
  S = T(sbuf, LIK_F32, 2, 2, 6, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "scores");
  /* masks */
  reset();
  QM = T(qmb, LIK_BOOL, 2, 2, 4, 0, 0);
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "q_mask");
  reset();
  QM = T(qmb, LIK_BOOL, 1, 6, 0, 0, 0);
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "q_mask");
  reset();
  DM = T(dmb, LIK_U8, 2, 6, 5, 0, 0);
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "d_mask");
  reset();
  DM = T(dmb, LIK_U8, 3, 5, 6, 1, 0);
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "d_mask");
  reset();
  QM.dtype = LIK_F32;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "q_mask");
  reset();
  DM.dtype = LIK_I32;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "d_mask");
  reset();
  DM.dtype = LIK_F16;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "d_mask");
  /* scores */
  reset();
  S = T(sbuf, LIK_F32, 2, 5, 2, 0, 0);
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "scores");
  reset();
  S = T(sbuf, LIK_F32, 1, 10, 0, 0, 0);
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "scores");
  reset();
  S.dtype = LIK_F64; /* F64 scores need F64 inputs */
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "scores", "float64", "got float32");
  reset();
  S.dtype = LIK_F16;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "scores");
  reset(); /* 2-D Q: scores must be [Nd], not [1, Nd] */
  Q = T(qbuf, LIK_F32, 2, 3, 4, 0, 0);
  S = T(sbuf, LIK_F32, 2, 1, 5, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "scores");
  reset(); /* both 2-D: scores must be 0-d */
  Q = T(qbuf, LIK_F32, 2, 3, 4, 0, 0);
  D = T(dbuf, LIK_F32, 2, 6, 4, 0, 0);
  S = T(sbuf, LIK_F32, 1, 1, 0, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "scores");
  /* argmax */
  reset();
  A = T(abuf, LIK_I32, 2, 2, 5, 0, 0);
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "argmax");
  reset();
  A = T(abuf, LIK_I32, 3, 2, 5, 6, 0); /* Ld instead of Lq */
  FAIL1(MAXSIM(), LIK_ERR_SHAPE, "argmax");
  reset();
  A.dtype = LIK_I64;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "argmax");
  reset();
  A.dtype = LIK_F32;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "argmax");
  /* dtypes */
  reset();
  D.dtype = LIK_F16;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "D");
  reset();
  Q.dtype = LIK_BF16;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE);
  reset();
  Q.dtype = D.dtype = LIK_I32;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "Q");
  reset();
  Q.dtype = D.dtype = LIK_BOOL;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "Q");
  reset();
  Q.dtype = D.dtype = (lik_dtype)42;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE, "Q");
  reset();
  Q.dtype = D.dtype = LIK_I64;
  FAIL1(MAXSIM(), LIK_ERR_DTYPE);
  group_end();
}

static void group_pairs_errors(void) {
  group_begin("pairs-errors");
  reset();
  Q = T(qbuf, LIK_F32, 3, 2, 3, 4, 0);
  D = T(dbuf, LIK_F32, 3, 2, 6, 4, 0);
  S = T(sbuf, LIK_F32, 1, 2, 0, 0, 0);
  A = T(abuf, LIK_I32, 2, 2, 3, 0, 0);
  case_begin("base pairs call");
  lik_status st = lik_maxsim_pairs(&Q, &D, NULL, NULL, NULL, &S, &A);
  CHECK(st == LIK_OK, "base pairs call: %s: %s", lik_status_string(st), lik_last_error());
  memset(sbuf, 0xCD, sizeof sbuf);
  memset(abuf, 0xCD, sizeof abuf);
  FAIL1(lik_maxsim_pairs(NULL, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_NULL, "Q");
  FAIL1(lik_maxsim_pairs(&Q, NULL, NULL, NULL, NULL, &S, NULL), LIK_ERR_NULL, "D");
  FAIL1(lik_maxsim_pairs(&Q, &D, NULL, NULL, NULL, NULL, NULL), LIK_ERR_NULL, "scores");
  lik_tensor Q2 = T(qbuf, LIK_F32, 2, 3, 4, 0, 0);
  FAIL1(lik_maxsim_pairs(&Q2, &D, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE);
  lik_tensor D4 = T(dbuf, LIK_F32, 4, 2, 1, 6, 4);
  FAIL1(lik_maxsim_pairs(&Q, &D4, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "D");
  lik_tensor Db = T(dbuf, LIK_F32, 3, 13, 6, 4, 0);
  lik_tensor Qb = T(qbuf, LIK_F32, 3, 11, 3, 4, 0);
  lik_tensor Sb = T(sbuf, LIK_F32, 1, 11, 0, 0, 0);
  FAIL1(lik_maxsim_pairs(&Qb, &Db, NULL, NULL, NULL, &Sb, NULL), LIK_ERR_SHAPE, "11", "13");
  lik_tensor Dd = T(dbuf, LIK_F32, 3, 2, 6, 5, 0);
  FAIL1(lik_maxsim_pairs(&Q, &Dd, NULL, NULL, NULL, &S, NULL), LIK_ERR_SHAPE, "5", "4");
  lik_tensor S2 = T(sbuf, LIK_F32, 2, 2, 2, 0, 0);
  FAIL1(lik_maxsim_pairs(&Q, &D, NULL, NULL, NULL, &S2, NULL), LIK_ERR_SHAPE, "scores");
  lik_tensor A3 = T(abuf, LIK_I32, 3, 2, 1, 3, 0);
  FAIL1(lik_maxsim_pairs(&Q, &D, NULL, NULL, NULL, &S, &A3), LIK_ERR_SHAPE, "argmax");
  lik_tensor M = T(dmb, LIK_BOOL, 2, 2, 5, 0, 0);
  FAIL1(lik_maxsim_pairs(&Q, &D, NULL, &M, NULL, &S, NULL), LIK_ERR_SHAPE, "d_mask");
  lik_tensor Dh = D;
  Dh.dtype = LIK_F16;
  FAIL1(lik_maxsim_pairs(&Q, &Dh, NULL, NULL, NULL, &S, NULL), LIK_ERR_DTYPE);
  group_end();
}

/* lik_options' q_lengths / d_lengths: dtype, shape, range, aliasing, packed. */
static void group_lengths_errors(void) {
  group_begin("lengths-errors");
  static int32_t lens[16];
  lik_options o = LIK_OPTIONS_INIT;
  reset();
  lik_tensor DL = T(lens, LIK_I32, 1, 5, 0, 0, 0), QL = T(lens, LIK_I32, 1, 2, 0, 0, 0);
  for (int i = 0; i < 16; i++) lens[i] = 2;
  o.d_lengths = &DL;
  case_begin("base call with d_lengths");
  lik_status st = lik_maxsim(&Q, &D, &QM, &DM, &o, &S, &A);
  CHECK(st == LIK_OK, "%s: %s", lik_status_string(st), lik_last_error());
  reset();
  lens[3] = 7; /* Ld = 6 */
  FAIL1(lik_maxsim(&Q, &D, &QM, &DM, &o, &S, &A), LIK_ERR_VALUE, "d_lengths", "entry 3 is 7",
        "6");
  lens[3] = -1;
  FAIL1(lik_maxsim(&Q, &D, &QM, &DM, &o, &S, &A), LIK_ERR_VALUE, "entry 3 is -1");
  lens[3] = 2;
  lik_tensor bad = T(lens, LIK_I32, 1, 4, 0, 0, 0);
  o.d_lengths = &bad;
  FAIL1(lik_maxsim(&Q, &D, &QM, &DM, &o, &S, &A), LIK_ERR_SHAPE, "d_lengths", "[4]", "[5]");
  bad = T(lens, LIK_I64, 1, 5, 0, 0, 0);
  FAIL1(lik_maxsim(&Q, &D, &QM, &DM, &o, &S, &A), LIK_ERR_DTYPE, "d_lengths", "int64");
  o.d_lengths = NULL;
  o.q_lengths = &QL;
  lik_tensor Sa = T(lens, LIK_F32, 2, 2, 5, 0, 0); /* scores over the lengths' memory */
  FAIL1(lik_maxsim(&Q, &D, &QM, &DM, &o, &Sa, NULL), LIK_ERR_VALUE, "scores", "q_lengths");
  /* packed calls take their lengths from cu_seqlens */
  int32_t cu[3] = {0, 1, 3};
  lik_tensor P2 = T(qbuf, LIK_F32, 2, 3, 4, 0, 0), CU = T(cu, LIK_I32, 1, 3, 0, 0, 0);
  lik_tensor SV = T(sbuf, LIK_F32, 2, 2, 2, 0, 0);
  FAIL1(lik_maxsim_varlen(&P2, &P2, &CU, &CU, NULL, NULL, &o, &SV, NULL), LIK_ERR_VALUE,
        "q_lengths", "cu_seqlens");
  o.q_lengths = NULL;
  o.fp32_precision = (lik_fp32_precision)5;
  FAIL1(lik_maxsim(&Q, &D, &QM, &DM, &o, &S, &A), LIK_ERR_VALUE, "fp32_precision 5");
  FAIL1(lik_maxsim_varlen(&P2, &P2, &CU, &CU, NULL, NULL, &o, &SV, NULL), LIK_ERR_VALUE,
        "fp32_precision");
  group_end();
}

#define RETRIEVE(k) lik_retrieve(&Q, &D, &QM, &DM, (k), NULL, &RS, &RI)

static void group_retrieve_errors(void) {
  group_begin("retrieve-errors");
  reset();
  lik_tensor RS = T(sbuf, LIK_F32, 2, 2, 3, 0, 0), RI = T(ibuf, LIK_I64, 2, 2, 3, 0, 0);
  case_begin("base retrieve call");
  lik_status st = RETRIEVE(3);
  CHECK(st == LIK_OK, "base retrieve call: %s: %s", lik_status_string(st), lik_last_error());
  reset();
  FAIL1(RETRIEVE(0), LIK_ERR_VALUE, "top_k");
  FAIL1(RETRIEVE(-1), LIK_ERR_VALUE, "top_k");
  FAIL1(RETRIEVE(INT64_MIN), LIK_ERR_VALUE, "top_k");
  FAIL1(lik_retrieve(NULL, &D, NULL, NULL, 3, NULL, &RS, &RI), LIK_ERR_NULL, "Q");
  FAIL1(lik_retrieve(&Q, NULL, NULL, NULL, 3, NULL, &RS, &RI), LIK_ERR_NULL, "D");
  FAIL1(lik_retrieve(&Q, &D, NULL, NULL, 3, NULL, NULL, &RI), LIK_ERR_NULL, "scores");
  FAIL1(lik_retrieve(&Q, &D, NULL, NULL, 3, NULL, &RS, NULL), LIK_ERR_NULL, "indices");
  lik_tensor RS4 = T(sbuf, LIK_F32, 2, 2, 4, 0, 0);
  FAIL1(lik_retrieve(&Q, &D, NULL, NULL, 3, NULL, &RS4, &RI), LIK_ERR_SHAPE, "scores");
  lik_tensor RI4 = T(ibuf, LIK_I64, 2, 2, 4, 0, 0);
  FAIL1(lik_retrieve(&Q, &D, NULL, NULL, 3, NULL, &RS, &RI4), LIK_ERR_SHAPE, "indices");
  /* top_k > Nd: outputs must be [Nq, Nd] */
  FAIL1(lik_retrieve(&Q, &D, NULL, NULL, 9, NULL, &RS, &RI), LIK_ERR_SHAPE, "scores");
  lik_tensor RI32 = T(ibuf, LIK_I32, 2, 2, 3, 0, 0);
  FAIL1(lik_retrieve(&Q, &D, NULL, NULL, 3, NULL, &RS, &RI32), LIK_ERR_DTYPE, "indices");
  lik_tensor RS64 = T(sbuf, LIK_F64, 2, 2, 3, 0, 0);
  FAIL1(lik_retrieve(&Q, &D, NULL, NULL, 3, NULL, &RS64, &RI), LIK_ERR_DTYPE, "scores");
  lik_tensor D4 = T(dbuf, LIK_F32, 4, 2, 5, 6, 4);
  FAIL1(lik_retrieve(&Q, &D4, NULL, NULL, 3, NULL, &RS, &RI), LIK_ERR_SHAPE, "D");
  lik_tensor Dd = T(dbuf, LIK_F32, 3, 5, 6, 96, 0);
  lik_tensor Qd = T(qbuf, LIK_F32, 3, 2, 3, 128, 0);
  FAIL1(lik_retrieve(&Qd, &Dd, NULL, NULL, 3, NULL, &RS, &RI), LIK_ERR_SHAPE, "d=96", "d=128");
  lik_tensor Dh = D;
  Dh.dtype = LIK_BF16;
  FAIL1(lik_retrieve(&Q, &Dh, NULL, NULL, 3, NULL, &RS, &RI), LIK_ERR_DTYPE);
  lik_tensor M = T(dmb, LIK_BOOL, 2, 5, 7, 0, 0);
  FAIL1(lik_retrieve(&Q, &D, NULL, &M, 3, NULL, &RS, &RI), LIK_ERR_SHAPE, "d_mask");
  M = T(dmb, LIK_I64, 2, 5, 6, 0, 0);
  FAIL1(lik_retrieve(&Q, &D, NULL, &M, 3, NULL, &RS, &RI), LIK_ERR_DTYPE, "d_mask");
  /* 2-D Q: outputs [k] */
  lik_tensor Q2 = T(qbuf, LIK_F32, 2, 3, 4, 0, 0);
  FAIL1(lik_retrieve(&Q2, &D, NULL, NULL, 3, NULL, &RS, &RI), LIK_ERR_SHAPE);
  group_end();
}

static void set_dev(lik_tensor *t, lik_device_type dev, int id) {
  t->device = dev;
  t->device_id = id;
}

static void group_device_errors(void) {
  group_begin("device-errors");
#ifndef LIK_TEST_HAS_CUDA
  /* CUDA tensors in a CPU-only build */
  reset();
  set_dev(&Q, LIK_CUDA, 0), set_dev(&D, LIK_CUDA, 0), set_dev(&QM, LIK_CUDA, 0);
  set_dev(&DM, LIK_CUDA, 0), set_dev(&S, LIK_CUDA, 0), set_dev(&A, LIK_CUDA, 0);
  FAIL2(MAXSIM(), LIK_ERR_UNSUPPORTED, LIK_ERR_DEVICE);
  lik_tensor RS = T(sbuf, LIK_F32, 2, 2, 3, 0, 0), RI = T(ibuf, LIK_I64, 2, 2, 3, 0, 0);
  set_dev(&RS, LIK_CUDA, 0), set_dev(&RI, LIK_CUDA, 0);
  FAIL2(RETRIEVE(3), LIK_ERR_UNSUPPORTED, LIK_ERR_DEVICE);
  {
    lik_tensor Qp = T(qbuf, LIK_F32, 3, 2, 3, 4, 0), Dp = T(dbuf, LIK_F32, 3, 2, 6, 4, 0),
               Sp = T(sbuf, LIK_F32, 1, 2, 0, 0, 0);
    set_dev(&Qp, LIK_CUDA, 0), set_dev(&Dp, LIK_CUDA, 0), set_dev(&Sp, LIK_CUDA, 0);
    FAIL2(lik_maxsim_pairs(&Qp, &Dp, NULL, NULL, NULL, &Sp, NULL), LIK_ERR_UNSUPPORTED,
          LIK_ERR_DEVICE);
  }
#else
  printf("  note: CUDA build: the CUDA-tensors-in-a-CPU-only-build checks are skipped\n");
#endif
  /* mixed devices: every tensor in turn on CUDA while the rest are on the CPU */
  const char *names[6] = {"Q", "D", "q_mask", "d_mask", "scores", "argmax"};
  for (int w = 0; w < 6; w++) {
    reset();
    lik_tensor *ts[6] = {&Q, &D, &QM, &DM, &S, &A};
    set_dev(ts[w], LIK_CUDA, 0);
    FAIL1(MAXSIM(), LIK_ERR_DEVICE, names[w]);
  }
  reset(); /* two CUDA ordinals */
  set_dev(&Q, LIK_CUDA, 0), set_dev(&D, LIK_CUDA, 1), set_dev(&QM, LIK_CUDA, 0);
  set_dev(&DM, LIK_CUDA, 0), set_dev(&S, LIK_CUDA, 0), set_dev(&A, LIK_CUDA, 0);
  FAIL1(MAXSIM(), LIK_ERR_DEVICE, "D");
  reset();
  {
    lik_tensor RS = T(sbuf, LIK_F32, 2, 2, 3, 0, 0), RI = T(ibuf, LIK_I64, 2, 2, 3, 0, 0);
    set_dev(&RI, LIK_CUDA, 0);
    FAIL1(RETRIEVE(3), LIK_ERR_DEVICE, "indices");
  }
  reset();
  Q.device = (lik_device_type)7;
  FAIL1(MAXSIM(), LIK_ERR_DEVICE, "Q");
  reset(); /* device 0 reads as CPU */
  Q.device = (lik_device_type)0;
  D.device = (lik_device_type)0;
  case_begin("device code 0 is the CPU");
  lik_status st = MAXSIM();
  CHECK(st == LIK_OK, "device 0: %s: %s", lik_status_string(st), lik_last_error());
  group_end();
}

static void *thread_fn(void *arg) {
  const char **out = (const char **)arg;
  static _Thread_local char copy[512];
  snprintf(copy, sizeof copy, "%s", lik_last_error());
  out[0] = copy[0] ? "nonempty" : "";
  /* fail on this thread; must not change the main thread's message */
  lik_tensor q = T(qbuf, LIK_F32, 3, 2, 3, 4, 0);
  lik_status st = lik_maxsim(&q, NULL, NULL, NULL, NULL, NULL, NULL);
  out[1] = st == LIK_ERR_NULL ? "ok" : "bad";
  return NULL;
}

static void group_last_error(void) {
  group_begin("last-error");
  case_begin("lik_last_error lifecycle");
  reset();
  lik_status st = lik_maxsim(NULL, &D, NULL, NULL, NULL, &S, NULL);
  CHECK(st == LIK_ERR_NULL && lik_last_error()[0], "failing call left no message");
  char saved[512];
  snprintf(saved, sizeof saved, "%s", lik_last_error());
  const char *res[2] = {NULL, NULL};
  pthread_t th;
  pthread_create(&th, NULL, thread_fn, res);
  pthread_join(th, NULL);
  CHECK(res[0] && !strcmp(res[0], ""), "a new thread sees another thread's message");
  CHECK(res[1] && !strcmp(res[1], "ok"), "failing call on a second thread");
  CHECK(!strcmp(saved, lik_last_error()), "another thread's failure changed this thread's "
                                          "message: '%s' -> '%s'", saved, lik_last_error());
  reset();
  st = MAXSIM();
  CHECK(st == LIK_OK, "successful call failed: %s", lik_last_error());
  CHECK(lik_last_error()[0] == '\0', "lik_last_error() not cleared by a successful call: '%s'",
        lik_last_error());
  /* same for pairs and retrieve */
  lik_maxsim(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  reset();
  lik_tensor RS = T(sbuf, LIK_F32, 2, 2, 3, 0, 0), RI = T(ibuf, LIK_I64, 2, 2, 3, 0, 0);
  st = RETRIEVE(3);
  CHECK(st == LIK_OK && lik_last_error()[0] == '\0',
        "lik_retrieve success did not clear the message: '%s'", lik_last_error());
  lik_maxsim(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  reset();
  Q = T(qbuf, LIK_F32, 3, 2, 3, 4, 0);
  D = T(dbuf, LIK_F32, 3, 2, 6, 4, 0);
  S = T(sbuf, LIK_F32, 1, 2, 0, 0, 0);
  st = lik_maxsim_pairs(&Q, &D, NULL, NULL, NULL, &S, NULL);
  CHECK(st == LIK_OK && lik_last_error()[0] == '\0',
        "lik_maxsim_pairs success did not clear the message: '%s'", lik_last_error());
  /* empty problems succeed and clear too */
  lik_maxsim(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  reset();
  Q = T(NULL, LIK_F32, 3, 0, 3, 4, 0);
  S = T(NULL, LIK_F32, 2, 0, 5, 0, 0);
  st = lik_maxsim(&Q, &D, NULL, NULL, NULL, &S, NULL);
  CHECK(st == LIK_OK && lik_last_error()[0] == '\0',
        "empty lik_maxsim: %s '%s'", lik_status_string(st), lik_last_error());
  group_end();
}

int main(void) {
  test_init("test_errors");
  for (size_t i = 0; i < sizeof qbuf / sizeof *qbuf; i++) qbuf[i] = (float)rng_range(-1, 1);
  for (size_t i = 0; i < sizeof dbuf / sizeof *dbuf; i++) dbuf[i] = (float)rng_range(-1, 1);
  memset(qmb, 1, sizeof qmb);
  memset(dmb, 1, sizeof dmb);
  group_version();
  group_status_strings();
  group_maxsim_errors();
  group_pairs_errors();
  group_lengths_errors();
  group_retrieve_errors();
  group_device_errors();
  group_last_error();
  return test_finish("test_errors");
}
