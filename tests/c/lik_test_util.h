/*
 * lik_test_util.h — shared helpers of the C tests (header-only, test-private):
 * seeded PRNG, fp16/bf16 conversions written independently of the library,
 * strided views over private allocations, the test data's bridge to the fp64
 * MaxSim reference (src/ref/maxsim_ref.h) and failure bookkeeping; whole files
 * and folder trees come from lik_test_files.h.
 *
 * Every test program prints its seed; LIK_TEST_SEED=<n> reproduces a run.
 */
#ifndef LIK_TEST_UTIL_H
#define LIK_TEST_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* SANITIZED: built with AddressSanitizer (scripts/sanitize.sh).  LIK_TEST_SMALL:
 * sanitized, or run under an emulator (LIK_TEST_EMULATED, a cross build's
 * ctest: tests/c/CMakeLists.txt), where a test shrinks its largest cases to
 * stay within its time. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(SANITIZED) || defined(LIK_TEST_EMULATED)
#define LIK_TEST_SMALL 1
#endif
#include <unistd.h>

#include "lik.h"
#include "../../src/ref/maxsim_ref.h"
#include "lik_test_files.h"

/* ---- CPU paths ------------------------------------------------------------- */

/* The CPU kernel paths of this architecture (lik_context_options.cpu_isa),
 * portable first; the best of them the CPU runs is lik_test_best_isa(). */
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1UL << 22)
#endif
static const char *const LIK_TEST_ISAS[] = {"portable", "neon", "sve"};
static const char *lik_test_best_isa(void) {
  const unsigned long hw = getauxval(AT_HWCAP);
  if (!(hw & HWCAP_ASIMD)) return "portable";
  return (hw & HWCAP_SVE) ? "sve" : "neon";
}
#include <sys/prctl.h>
/* The SVE vector length in bits (asked of the kernel, no SVE instruction), 0
 * without SVE: printed by test_init (qemu-aarch64 -cpu max,sve-max-vq=N). */
static int lik_test_sve_bits(void) {
#ifdef PR_SVE_GET_VL
  const int vl = (getauxval(AT_HWCAP) & HWCAP_SVE) ? prctl(PR_SVE_GET_VL) : -1;
  return vl < 0 ? 0 : (vl & PR_SVE_VL_LEN_MASK) * 8;
#else
  return 0;
#endif
}
#elif defined(__x86_64__)
static const char *const LIK_TEST_ISAS[] = {"portable", "avx2", "avx512"};
static const char *lik_test_best_isa(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return "avx512";
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "avx2" : "portable";
}
#else
static const char *const LIK_TEST_ISAS[] = {"portable"};
static const char *lik_test_best_isa(void) { return "portable"; }
#endif
#if !defined(__aarch64__)
static int lik_test_sve_bits(void) { return 0; }
#endif
#define LIK_TEST_NISAS ((int)(sizeof LIK_TEST_ISAS / sizeof LIK_TEST_ISAS[0]))

/* ---- failure bookkeeping --------------------------------------------------- */

static long g_fail_total = 0; /* all failures of the program            */
static long g_fail_group = 0; /* failures of the current group          */
static long g_checks_group = 0;
static long g_cases_group = 0;
static const char *g_group = "";
static char g_case_desc[512] = "";
static int g_case_printed = 0;
static const int g_max_reports = 12; /* detailed reports per group */
static long g_reports = 0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double g_group_t0;

static void group_begin(const char *name) {
  g_group_t0 = now_s();
  g_group = name;
  g_fail_group = 0;
  g_checks_group = 0;
  g_cases_group = 0;
  g_reports = 0;
}

static void group_end(void) {
  printf("[%s] %-15s cases=%-4ld checks=%-7ld failures=%ld  (%.2fs)\n",
         g_fail_group ? "FAIL" : " ok ", g_group, g_cases_group, g_checks_group,
         g_fail_group, now_s() - g_group_t0);
  fflush(stdout);
}

static void case_begin(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_case_desc, sizeof g_case_desc, fmt, ap);
  va_end(ap);
  g_case_printed = 0;
  g_cases_group++;
}

/* Records one failure; prints the case description once and the message
 * (up to g_max_reports per group). */
static void failf(const char *fmt, ...) {
  g_fail_total++;
  g_fail_group++;
  if (g_reports >= g_max_reports) return;
  g_reports++;
  if (!g_case_printed) {
    printf("  FAIL in case: %s\n", g_case_desc);
    g_case_printed = 1;
  }
  va_list ap;
  va_start(ap, fmt);
  printf("    ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

#define CHECK(cond, ...)          \
  do {                            \
    g_checks_group++;             \
    if (!(cond)) failf(__VA_ARGS__); \
  } while (0)

/* ---- PRNG (splitmix64) ------------------------------------------------------ */

static uint64_t g_rng_state;

static uint64_t rng_u64(void) {
  uint64_t z = (g_rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_u64() >> 11) * 0x1.0p-53; }
static double rng_range(double lo, double hi) { return lo + (hi - lo) * rng_unit(); }
/* inclusive */
static int64_t rng_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rng_u64() % (uint64_t)(hi - lo + 1));
}
static int rng_chance(double p) { return rng_unit() < p; }
#define RNG_PICK(arr) ((arr)[rng_int(0, (int64_t)(sizeof(arr) / sizeof((arr)[0])) - 1)])

static uint64_t g_seed;

static void test_init(const char *prog) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* keep output up to a crash */
  const char *env = getenv("LIK_TEST_SEED");
  if (env && *env) {
    g_seed = strtoull(env, NULL, 0);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_seed = ((uint64_t)ts.tv_sec * 1000003ull) ^ (uint64_t)ts.tv_nsec ^
             ((uint64_t)getpid() << 32);
  }
  g_rng_state = g_seed;
  const char *isa_env = getenv("LIK_CPU_ISA");
  printf("%s: seed=%llu (reproduce: LIK_TEST_SEED=%llu)  LIK_CPU_ISA=%s  lik_cpu_isa()=%s"
         "  version=%s",
         prog, (unsigned long long)g_seed, (unsigned long long)g_seed,
         isa_env ? isa_env : "(unset)", lik_cpu_isa(), lik_version_string());
  if (lik_test_sve_bits()) printf("  SVE vector length=%d bits", lik_test_sve_bits());
  printf("\n");
  fflush(stdout);
}

static int test_finish(const char *prog) {
  printf("%s: %s (%ld failures, seed=%llu)\n", prog, g_fail_total ? "FAILED" : "PASSED",
         g_fail_total, (unsigned long long)g_seed);
  return g_fail_total ? 1 : 0;
}

/* ---- half-precision conversions (independent of the library) --------------- */

static uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf */
  if (ax < 0x38800000u) {                                   /* below 2^-14: subnormal */
    float v;
    memcpy(&v, &ax, 4);
    const uint32_t m = (uint32_t)lrintf(v * 16777216.0f); /* exact scaling, RNE */
    return (uint16_t)(sign | m);
  }
  uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax & 0x7fffffu) >> 13);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

static double f16_bits_to_double(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 0x3ff;
  double v;
  if (e == 0) v = ldexp((double)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp((double)(m + 1024), e - 25);
  return s ? -v : v;
}

static uint16_t f32_to_bf16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

static double bf16_bits_to_double(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* A double rounded the way the library's input dtype stores it. */
static double round_to(lik_dtype dt, double v) {
  switch (dt) {
    case LIK_F32: return (double)(float)v;
    case LIK_F16: return f16_bits_to_double(f32_to_f16_bits((float)v));
    case LIK_BF16: return bf16_bits_to_double(f32_to_bf16_bits((float)v));
    default: return v;
  }
}

static size_t dtype_size(lik_dtype dt) {
  switch (dt) {
    case LIK_F32: case LIK_I32: return 4;
    case LIK_F16: case LIK_BF16: return 2;
    case LIK_F64: case LIK_I64: return 8;
    default: return 1;
  }
}

static const char *dtype_str(lik_dtype dt) {
  switch (dt) {
    case LIK_F32: return "f32";
    case LIK_F16: return "f16";
    case LIK_BF16: return "bf16";
    case LIK_F64: return "f64";
    case LIK_BOOL: return "bool";
    case LIK_U8: return "u8";
    case LIK_I32: return "i32";
    case LIK_I64: return "i64";
    case LIK_I8: return "i8";
    case LIK_F8E4M3: return "f8e4m3";
    case LIK_F8E5M2: return "f8e5m2";
  }
  return "?";
}

/* ---- tensor element access by multi-index ------------------------------------ */

static int64_t t_offset(const lik_tensor *t, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
  return off;
}

static void t_put(const lik_tensor *t, const int64_t *idx, double v) {
  const int64_t o = t_offset(t, idx);
  switch (t->dtype) {
    case LIK_F32: ((float *)t->data)[o] = (float)v; break;
    case LIK_F16: ((uint16_t *)t->data)[o] = f32_to_f16_bits((float)v); break;
    case LIK_BF16: ((uint16_t *)t->data)[o] = f32_to_bf16_bits((float)v); break;
    case LIK_F64: ((double *)t->data)[o] = v; break;
    case LIK_BOOL: case LIK_U8: ((uint8_t *)t->data)[o] = (uint8_t)v; break;
    case LIK_I32: ((int32_t *)t->data)[o] = (int32_t)v; break;
    case LIK_I64: ((int64_t *)t->data)[o] = (int64_t)v; break;
    case LIK_I8: ((int8_t *)t->data)[o] = (int8_t)v; break;
    case LIK_F8E4M3: case LIK_F8E5M2: break; /* no test writes fp8 here */
  }
}

static double t_get(const lik_tensor *t, const int64_t *idx) {
  const int64_t o = t_offset(t, idx);
  switch (t->dtype) {
    case LIK_F32: return ((const float *)t->data)[o];
    case LIK_F16: return f16_bits_to_double(((const uint16_t *)t->data)[o]);
    case LIK_BF16: return bf16_bits_to_double(((const uint16_t *)t->data)[o]);
    case LIK_F64: return ((const double *)t->data)[o];
    case LIK_BOOL: case LIK_U8: return ((const uint8_t *)t->data)[o];
    case LIK_I32: return ((const int32_t *)t->data)[o];
    case LIK_I64: return (double)((const int64_t *)t->data)[o];
    case LIK_I8: return ((const int8_t *)t->data)[o];
    case LIK_F8E4M3: case LIK_F8E5M2: break; /* no test reads fp8 here */
  }
  return NAN;
}

static int64_t t_numel(const lik_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* Row-major unravel of a flat logical index. */
static void t_unravel(const lik_tensor *t, int64_t flat, int64_t *idx) {
  for (int i = t->ndim - 1; i >= 0; i--) {
    const int64_t s = t->shape[i] ? t->shape[i] : 1;
    idx[i] = flat % s;
    flat /= s;
  }
}

/* ---- strided views over private allocations ---------------------------------- */

/* Memory layout of a view:
 *   perm  0: row-major; 1: last two axes swapped in memory (e.g. d outer, L
 *         inner: a transposed view); 2: all axes reversed (column-major).
 *   step  every axis' stride multiplied by step (step 2: every other element).
 *   flip  bit i set: axis i has a negative stride (data points at its end).
 *   bcast bit i set: axis i has stride 0 (every index aliases index 0). */
typedef struct {
  int perm, step;
  unsigned flip, bcast;
} layout_t;

static const layout_t LAYOUT_DENSE = {0, 1, 0, 0};

typedef struct {
  lik_tensor t;
  unsigned char *base; /* allocation */
  size_t bytes;
  unsigned char *before; /* copy of the allocation (inputs: unchanged check) */
  unsigned char fill;    /* fill byte of the allocation (outputs) */
} view_t;

static void layout_str(const layout_t *l, char *buf, size_t n) {
  snprintf(buf, n, "{perm=%d step=%d flip=%x bcast=%x}", l->perm, l->step, l->flip, l->bcast);
}

static layout_t random_layout(int ndim) {
  layout_t l = LAYOUT_DENSE;
  l.perm = (int)rng_int(0, 2);
  l.step = rng_chance(0.4) ? 2 : 1;
  for (int i = 0; i < ndim; i++)
    if (rng_chance(0.3)) l.flip |= 1u << i;
  return l;
}

/* Allocates a view of shape/dtype with the given layout; the whole allocation
 * is filled with `fill` bytes (0xFF = NaN for every float dtype). */
static void view_make(view_t *v, lik_dtype dt, int ndim, const int64_t *shape, layout_t l,
                      unsigned char fill) {
  memset(v, 0, sizeof *v);
  v->t.dtype = dt;
  v->t.ndim = ndim;
  v->t.device = LIK_CPU;
  for (int i = 0; i < ndim; i++) v->t.shape[i] = shape[i];
  int ord[LIK_MAX_DIMS];
  for (int i = 0; i < ndim; i++) ord[i] = i;
  if (l.perm == 1 && ndim >= 2) {
    ord[ndim - 2] = ndim - 1;
    ord[ndim - 1] = ndim - 2;
  } else if (l.perm == 2) {
    for (int i = 0; i < ndim; i++) ord[i] = ndim - 1 - i;
  }
  const int step = l.step > 0 ? l.step : 1;
  int64_t running = 1;
  for (int m = ndim - 1; m >= 0; m--) {
    const int ax = ord[m];
    if (l.bcast & (1u << ax)) {
      v->t.strides[ax] = 0;
      continue;
    }
    v->t.strides[ax] = running * step;
    running *= (shape[ax] > 0 ? shape[ax] : 1) * step;
  }
  const size_t es = dtype_size(dt);
  v->bytes = (size_t)running * es; /* exact: ASan sees any read past the view */
  v->base = (unsigned char *)malloc(v->bytes);
  v->fill = fill;
  memset(v->base, fill, v->bytes);
  int64_t start = 0;
  for (int i = 0; i < ndim; i++)
    if ((l.flip & (1u << i)) && v->t.strides[i] != 0) {
      start += (shape[i] > 0 ? shape[i] - 1 : 0) * v->t.strides[i];
      v->t.strides[i] = -v->t.strides[i];
    }
  v->t.data = v->base + start * (int64_t)es;
}

static void view_snapshot(view_t *v) {
  v->before = (unsigned char *)malloc(v->bytes);
  memcpy(v->before, v->base, v->bytes);
}

/* 1 if the allocation is byte-identical to the snapshot. */
static int view_unchanged(const view_t *v) { return memcmp(v->before, v->base, v->bytes) == 0; }

/* Number of elements of the allocation outside the view that differ from the
 * fill byte (the library must write only the view). */
static int64_t view_outside_written(const view_t *v) {
  const size_t es = dtype_size(v->t.dtype);
  const size_t nel = v->bytes / es;
  unsigned char *mark = (unsigned char *)calloc(nel ? nel : 1, 1);
  const int64_t n = t_numel(&v->t);
  int64_t idx[LIK_MAX_DIMS];
  const int64_t start = ((unsigned char *)v->t.data - v->base) / (int64_t)es;
  for (int64_t f = 0; f < n; f++) {
    t_unravel(&v->t, f, idx);
    mark[start + t_offset(&v->t, idx)] = 1;
  }
  int64_t bad = 0;
  for (size_t e = 0; e < nel; e++) {
    if (mark[e]) continue;
    for (size_t b = 0; b < es; b++)
      if (v->base[e * es + b] != v->fill) {
        bad++;
        break;
      }
  }
  free(mark);
  return bad;
}

static void view_free(view_t *v) {
  free(v->base);
  free(v->before);
  v->base = v->before = NULL;
}

/* ---- the fp64 reference (src/ref/maxsim_ref.c) over the test's data ---------------- */

/* A batch of sequences in logical order: x[(n*L + l)*d + k], mask m[n*L + l]
 * (1 = valid; NULL = all valid).  The values are those the views present;
 * norm: the call normalises (the reference then does too). */
typedef struct {
  int64_t n, L, d;
  double *x;
  uint8_t *m;
  int64_t *off; /* [n + 1]: sequence n is rows n*L .. n*L + L - 1 */
  int norm;
} seqs_t;

static lik_ref_seqs seqs_ref(const seqs_t *s) {
  lik_ref_seqs r = {s->x, s->off, s->d, s->m};
  return r;
}

/* lik_ref_sim of query token (qi, s) and document token (dj, t). */
static double ref_sim(const seqs_t *Q, int64_t qi, int64_t s, const seqs_t *D, int64_t dj,
                      int64_t t, double *absum) {
  const lik_ref_seqs q = seqs_ref(Q), d = seqs_ref(D);
  return lik_ref_sim(&q, qi, s, &d, dj, t, Q->norm, absum);
}

static int seq_valid(const seqs_t *s, int64_t n, int64_t l) {
  return !s->m || s->m[n * s->L + l];
}

/* Tolerances: score |got - ref| <= rel * scale + out_rel * |ref|, where scale
 * is sum over query tokens of max over doc tokens of sum_k |q_k d_k|.
 * exact (rel = out_rel = 0): integer data, every partial sum representable. */
typedef struct {
  double rel, out_rel, tok_rel;
} tol_t;

static tol_t tol_for(lik_dtype dt, int normalize, int exact) {
  tol_t t;
  if (exact) {
    t.rel = t.out_rel = t.tok_rel = 0;
  } else if (dt == LIK_F64 && !normalize) {
    t.rel = 1e-12;
    t.out_rel = 0x1.0p-23; /* scores are fp32: one ulp */
    t.tok_rel = 1e-12;
  } else if (dt == LIK_F64) {
    t.rel = 2e-6;
    t.out_rel = 0x1.0p-23;
    t.tok_rel = 2e-6;
  } else {
    t.rel = 1e-5;
    t.out_rel = 0x1.0p-23;
    t.tok_rel = 4e-6;
  }
  return t;
}

/* Reference score of query sequence qi against document sequence dj; argmax
 * NULL or [L] (the reference's winners), scale_out: the error scale. */
static double ref_score(const seqs_t *Q, int64_t qi, const seqs_t *D, int64_t dj,
                        int32_t *argmax, double *scale_out) {
  const lik_ref_seqs q = seqs_ref(Q), d = seqs_ref(D);
  return lik_ref_maxsim_pair(&q, qi, &d, dj, Q->norm, argmax, scale_out);
}

/* Checks one (query, doc) result; argmax row got_am(s) may be NULL.
 * Returns the number of failures recorded. */
static long check_pair(const seqs_t *Q, int64_t qi, const seqs_t *D, int64_t dj, double got,
                       const lik_tensor *am, int64_t *am_idx, int am_axis, tol_t tol,
                       const char *where) {
  long before = g_fail_total;
  double scale;
  int32_t *ram = (int32_t *)malloc(sizeof(int32_t) * (size_t)(Q->L > 0 ? Q->L : 1));
  const double ref = ref_score(Q, qi, D, dj, ram, &scale);
  const double lim = tol.rel * scale + tol.out_rel * fabs(ref);
  CHECK(fabs(got - ref) <= lim || (lim == 0 && got == ref),
        "%s: score %.9g, reference %.9g (|diff|=%.3g > tol %.3g, scale %.3g)", where, got,
        ref, fabs(got - ref), lim, scale);
  for (int64_t s = 0; am && s < Q->L; s++) {
    am_idx[am_axis] = s;
    const int64_t g = (int64_t)t_get(am, am_idx), best_t = ram[s];
    g_checks_group++;
    if (g == best_t) continue;
    /* A near-tie under rounding may legitimately pick another valid token. */
    int ok = 0;
    double best = NAN, gv = NAN;
    if (best_t >= 0 && g >= 0 && g < D->L && seq_valid(D, dj, g) && tol.tok_rel > 0) {
      double babs, gabs;
      best = ref_sim(Q, qi, s, D, dj, best_t, &babs);
      gv = ref_sim(Q, qi, s, D, dj, g, &gabs);
      ok = fabs(gv - best) <= tol.tok_rel * (babs > gabs ? babs : gabs);
    }
    if (!ok)
      failf("%s: argmax[query token %lld] = %lld, reference %lld (ref dot %.9g vs %.9g)", where,
            (long long)s, (long long)g, (long long)best_t, best, gv);
  }
  free(ram);
  return g_fail_total - before;
}

static void seqs_alloc(seqs_t *s, int64_t n, int64_t L, int64_t d, int with_mask) {
  s->n = n;
  s->L = L;
  s->d = d;
  const int64_t nt = n * L;
  s->x = (double *)calloc((size_t)(nt * d > 0 ? nt * d : 1), sizeof(double));
  s->m = with_mask ? (uint8_t *)calloc((size_t)(nt > 0 ? nt : 1), 1) : NULL;
  s->off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n + 1));
  for (int64_t i = 0; i <= n; i++) s->off[i] = i * L;
  s->norm = 0;
}
static void seqs_free(seqs_t *s) {
  free(s->x);
  free(s->m);
  free(s->off);
  s->x = NULL;
  s->m = NULL;
  s->off = NULL;
}
static void seqs_copy(seqs_t *dst, const seqs_t *src) {
  seqs_alloc(dst, src->n, src->L, src->d, src->m != NULL);
  memcpy(dst->x, src->x, sizeof(double) * (size_t)(src->n * src->L * src->d));
  if (src->m) memcpy(dst->m, src->m, (size_t)(src->n * src->L));
  dst->norm = src->norm;
}

/* ---- value generators ---------------------------------------------------------- */

enum {
  VAL_RAND = 0, /* uniform [-1, 1]                                        */
  VAL_NEG = 1,  /* q in [0.1, 1], d in [-1, -0.1]: every similarity < 0  */
  VAL_INT = 2,  /* integers in [-3, 3]: exact arithmetic, many ties       */
  VAL_BIG = 3,  /* |x| in [256, 320]: products exceed the fp16 range      */
  VAL_TINY = 4, /* queries are fp16 subnormals k * 2^-24, docs in [-1, 1]  */
  VAL_WIDE = 5  /* |x| = 10^U(-8, 4): zeros, subnormals, large normals     */
};

static double gen_value(int mode, int is_doc) {
  switch (mode) {
    case VAL_NEG: return is_doc ? -rng_range(0.1, 1.0) : rng_range(0.1, 1.0);
    case VAL_INT: return (double)rng_int(-3, 3);
    case VAL_BIG: return (rng_chance(0.5) ? -1 : 1) * rng_range(256, 320);
    case VAL_TINY:
      return is_doc ? rng_range(-1, 1) : (rng_chance(0.5) ? -1 : 1) * ldexp((double)rng_int(1, 1023), -24);
    case VAL_WIDE: return (rng_chance(0.5) ? -1 : 1) * pow(10.0, rng_range(-8, 4));
    default: return rng_range(-1, 1);
  }
}

static double garbage_value(int kind) {
  switch (kind & 3) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    default: return 1e30;
  }
}

#endif /* LIK_TEST_UTIL_H */
