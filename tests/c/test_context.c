/*
 * test_context.c — lik_context (lik_experimental.h): creation errors, and
 * calls through contexts of every CPU path and thread count agree with the
 * default context (bitwise across thread counts of one path; within fp32
 * tolerance across paths, which sum in different orders).
 */
#include "lik_experimental.h"
#include "lik_test_util.h"

static void group_create_errors(void) {
  group_begin("create errors");
  lik_context *c = (lik_context *)&c; /* must be reset to NULL on failure */
  lik_context_options o = {0};
  case_begin("out NULL");
  CHECK(lik_context_create(NULL, NULL) == LIK_ERR_NULL, "out NULL: %s", lik_last_error());
  case_begin("num_threads -1");
  o.num_threads = -1;
  CHECK(lik_context_create(&o, &c) == LIK_ERR_VALUE && c == NULL, "num_threads -1 accepted");
  CHECK(strstr(lik_last_error(), "num_threads") != NULL, "message: %s", lik_last_error());
  case_begin("cpu_isa sse");
  o.num_threads = 0;
  o.cpu_isa = "sse";
  CHECK(lik_context_create(&o, &c) == LIK_ERR_VALUE, "cpu_isa sse accepted");
  CHECK(strstr(lik_last_error(), "sse") != NULL, "message: %s", lik_last_error());
  case_begin("cuda_off 32");
  o.cpu_isa = NULL;
  o.cuda_off = 32;
  CHECK(lik_context_create(&o, &c) == LIK_ERR_VALUE, "cuda_off 32 accepted");
  case_begin("cuda_off all");
  o.cuda_off = LIK_CUDA_NO_ALL;
  CHECK(lik_context_create(&o, &c) == LIK_OK && c != NULL, "LIK_CUDA_NO_ALL: %s", lik_last_error());
  lik_context_free(c);
  case_begin("free NULL");
  lik_context_free(NULL);
  CHECK(lik_context_create(NULL, &c) == LIK_OK && c != NULL, "NULL options: %s", lik_last_error());
  lik_context_free(c);
  group_end();
}

enum { NQ = 3, ND = 5, LQ = 7, LD = 13, DIM = 19 };

static lik_status run(lik_context *ctx, int threads, const float *q, const float *d,
                      float *scores, int32_t *argmax) {
  lik_tensor Q = {(void *)q, LIK_F32, 3, {NQ, LQ, DIM}, {LQ * DIM, DIM, 1}, LIK_CPU, 0};
  lik_tensor D = {(void *)d, LIK_F32, 3, {ND, LD, DIM}, {LD * DIM, DIM, 1}, LIK_CPU, 0};
  lik_tensor S = {scores, LIK_F32, 2, {NQ, ND}, {ND, 1}, LIK_CPU, 0};
  lik_tensor A = {argmax, LIK_I32, 3, {NQ, ND, LQ}, {ND * LQ, LQ, 1}, LIK_CPU, 0};
  lik_options opts = LIK_OPTIONS_INIT;
  opts.normalize = 1;
  opts.num_threads = threads;
  opts.context = ctx;
  return lik_maxsim(&Q, &D, NULL, NULL, &opts, &S, &A);
}

static void group_paths(void) {
  group_begin("paths");
  static float q[NQ * LQ * DIM], d[ND * LD * DIM];
  for (int i = 0; i < NQ * LQ * DIM; i++) q[i] = (float)rng_range(-1, 1);
  for (int i = 0; i < ND * LD * DIM; i++) d[i] = (float)rng_range(-1, 1);
  float ref[NQ * ND];
  int32_t ref_am[NQ * ND * LQ];
  CHECK(run(NULL, 0, q, d, ref, ref_am) == LIK_OK, "default context: %s", lik_last_error());
  const char *const *isas = LIK_TEST_ISAS;
  for (int k = 0; k < LIK_TEST_NISAS; k++) {
    float first[NQ * ND];
    for (int threads = 1; threads <= 4; threads += 3) {
      case_begin("cpu_isa %s, context threads %d", isas[k], threads);
      lik_context_options o = {threads, isas[k], 0};
      lik_context *c = NULL;
      CHECK(lik_context_create(&o, &c) == LIK_OK, "create: %s", lik_last_error());
      float s[NQ * ND];
      int32_t am[NQ * ND * LQ];
      CHECK(run(c, 0, q, d, s, am) == LIK_OK, "maxsim: %s", lik_last_error());
      for (int i = 0; i < NQ * ND; i++)
        CHECK(fabsf(s[i] - ref[i]) <= 1e-5f * (1.0f + fabsf(ref[i])), "score %d: %g vs %g", i,
              (double)s[i], (double)ref[i]);
      if (threads == 1) memcpy(first, s, sizeof s);
      else CHECK(memcmp(first, s, sizeof s) == 0, "scores differ between 1 and %d threads", threads);
      lik_context_free(c);
    }
  }
  group_end();
}

int main(void) {
  test_init("test_context");
  group_create_errors();
  group_paths();
  return test_finish("test_context");
}
