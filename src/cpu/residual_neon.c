/*
 * residual_neon.c — the residual scorer's kernels for aarch64 (compiled on
 * arm64 only, no extra flags: AdvSIMD is baseline): residual_kernel.inc at
 * the NEON width (VW 4, as the portable instance, whose generic vectors are
 * already NEON registers there), and a token-norm kernel that decodes the
 * residual in registers, as residual_avx512.c's.  The neon and sve paths use
 * it (residual.c's lik_res_kernels_for).
 *
 * inv_norm: 1 / max(||c + r||, 1e-12) of a compressed token, r the bucket
 * weights of its nbits fields.  The portable kernel sums x * x into 8 partial
 * sums by k % 8, one field at a time through an array the compiler keeps in
 * memory (its index is not a constant).  Here the 8 partial sums are 2
 * registers and 8 dimensions are one step: the centroid's 2 registers plus
 * the weights of the step's 8 / cpb bytes, each byte's cpb weights one load
 * of the decode table's row (lik_res_table.w: the layout's bit order is in
 * the table; nbits 1: 2 Q loads of a byte, 2: one Q load per byte, 4: one D
 * load per byte, 8: one lane per byte).  Each partial sum is the portable
 * chain (k ascending, the FMA GCC contracts the portable x * x + ss to), the
 * dimensions past the last whole step are the portable loop itself, and the
 * 8 sums are added in the portable tree: bitwise the portable value
 * (tests/c/test_residual.c checks neon and sve against portable bitwise).
 * The 8 chains bound a step to one FMA latency (docs/kernels.md, "ARM").
 */
#if defined(__aarch64__)

#include <arm_neon.h>

#define KN(x) res_neon_##x
#define VW 4
#define OWN_INV_NORM
#define OWN_DECODE
#include "residual_kernel.inc"
#undef OWN_INV_NORM
#undef OWN_DECODE

/* The weights of the 8 dimensions of step q (bytes q * 8 / cpb ..) as 2
 * registers w0, w1, one body per nbits (B(j): byte j of the step; a step's
 * 8 / cpb bytes are nbits, the loop's nb). */
#define B(j) ((int64_t)res[(q * nb + (j)) * sp])
#define WEIGHTS_NB1                  \
  const float *w = tw + B(0) * 8;    \
  w0 = vld1q_f32(w);                 \
  w1 = vld1q_f32(w + 4);
#define WEIGHTS_NB2                  \
  w0 = vld1q_f32(tw + B(0) * 4);     \
  w1 = vld1q_f32(tw + B(1) * 4);
#define WEIGHTS_NB4                                                  \
  w0 = vcombine_f32(vld1_f32(tw + B(0) * 2), vld1_f32(tw + B(1) * 2)); \
  w1 = vcombine_f32(vld1_f32(tw + B(2) * 2), vld1_f32(tw + B(3) * 2));
#define WEIGHTS_NB8                                                                        \
  w0 = vld1q_lane_f32(tw + B(3), vld1q_lane_f32(tw + B(2), vld1q_lane_f32(tw + B(1),        \
                      vld1q_dup_f32(tw + B(0)), 1), 2), 3);                                 \
  w1 = vld1q_lane_f32(tw + B(7), vld1q_lane_f32(tw + B(6), vld1q_lane_f32(tw + B(5),        \
                      vld1q_dup_f32(tw + B(4)), 1), 2), 3);

/* Over steps q < nstep, x = c + w of the step's 8 dimensions (2 registers),
 * then STEP: one function per (kind, nbits NB), each a loop of its own for
 * llvm-mca; a[0..1] the state the steps carry (the norm's 8 partial sums). */
#define STEP_LOOP(name, NB, STEP)                                                                \
  static __attribute__((noinline)) void name(const float *restrict tw, const float *restrict c, \
                                             const uint8_t *restrict res, int64_t sp,           \
                                             int64_t nstep, float32x4_t *a,                     \
                                             float *restrict dst) {                             \
    const int64_t nb = NB; /* bytes per step */                                                  \
    float32x4_t a0 = a[0], a1 = a[1];                                                            \
    (void)dst;                                                                                   \
    for (int64_t q = 0; q < nstep; q++) {                                                        \
      float32x4_t w0, w1;                                                                        \
      WEIGHTS_NB##NB                                                                             \
      const float32x4_t x0 = vaddq_f32(vld1q_f32(c + 8 * q), w0);                                \
      const float32x4_t x1 = vaddq_f32(vld1q_f32(c + 8 * q + 4), w1);                            \
      STEP;                                                                                      \
    }                                                                                            \
    a[0] = a0;                                                                                   \
    a[1] = a1;                                                                                   \
  }
/* the norm: 8 partial sums of x * x */
#define NORM_STEP  \
  a0 = vfmaq_f32(a0, x0, x0); \
  a1 = vfmaq_f32(a1, x1, x1)
/* the decode: x itself */
#define DECODE_STEP               \
  vst1q_f32(dst + 8 * q, x0);     \
  vst1q_f32(dst + 8 * q + 4, x1)

/* the norm and the decode loop of nbits NB */
#define STEP_LOOPS(NB)                                  \
  STEP_LOOP(res_neon_norm_nb##NB, NB, NORM_STEP)        \
  STEP_LOOP(res_neon_decode_nb##NB, NB, DECODE_STEP)
STEP_LOOPS(1)
STEP_LOOPS(2)
STEP_LOOPS(4)
STEP_LOOPS(8)
#undef STEP_LOOPS
#undef B

/* The step loops of each kind by log2(nbits). */
typedef void (*step_loop_fn)(const float *, const float *, const uint8_t *, int64_t, int64_t,
                             float32x4_t *, float *);
static const step_loop_fn norm_loops[4] = {res_neon_norm_nb1, res_neon_norm_nb2,
                                           res_neon_norm_nb4, res_neon_norm_nb8};
static const step_loop_fn decode_loops[4] = {res_neon_decode_nb1, res_neon_decode_nb2,
                                             res_neon_decode_nb4, res_neon_decode_nb8};

static float res_neon_inv_norm(const lik_res_table *w, int64_t width, const float *c,
                               const uint8_t *res, int64_t sp) {
  const int cpb = w->cpb, per = 8 / cpb; /* bytes per step of 8 dimensions */
  const int64_t nstep = width / per;
  float32x4_t a[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  norm_loops[__builtin_ctz((unsigned)w->nbits)](w->w, c, res, sp, nstep, a, NULL);
  float ss[8];
  vst1q_f32(ss, a[0]);
  vst1q_f32(ss + 4, a[1]);
  for (int64_t p = nstep * per; p < width; p++) { /* the portable loop, k % 8 from 0 */
    const float *wv = w->w + res[p * sp] * cpb, *cp = c + p * cpb;
    for (int i = 0; i < cpb; i++) {
      const float x = cp[i] + wv[i];
      ss[(p * cpb + i) & 7] += x * x;
    }
  }
  const float t = ((ss[0] + ss[1]) + (ss[2] + ss[3])) + ((ss[4] + ss[5]) + (ss[6] + ss[7]));
  return 1.0f / fmaxf(sqrtf(t), (float)LIK_NORM_EPS);
}

/* lik_res_decode by steps of 8 dimensions (the weights as in the norm, the
 * centroid's 2 registers added, 2 Q stores); the bytes past the last whole
 * step through lik_res_decode itself.  The same fp32 additions: bitwise. */
static void res_neon_decode(const lik_res_table *w, int64_t width, const float *c,
                            const uint8_t *res, int64_t sp, float *dst) {
  const int cpb = w->cpb, per = 8 / cpb;
  const int64_t nstep = width / per;
  float32x4_t a[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; /* unused by the decode */
  decode_loops[__builtin_ctz((unsigned)w->nbits)](w->w, c, res, sp, nstep, a, dst);
  lik_res_decode(w, width - nstep * per, c + 8 * nstep, res + nstep * per * sp, sp,
                 dst + 8 * nstep);
}

const lik_res_kernels lik_res_kernels_neon = {res_neon_byte_table, res_neon_centroid_row,
                                              res_neon_inv_norm, res_neon_adc,
                                              res_neon_max_rows, res_neon_centroid_rows4,
                                              res_neon_decode};

#else
typedef int lik_residual_neon_unused;
#endif
