/*
 * backward_neon.c — the backward row kernels for aarch64 (compiled on arm64
 * only, no extra flags: AdvSIMD is baseline): backward_kernel.inc with its
 * hot loop, the gathered-row axpy (its FUSED_AXPY hook), written in NEON
 * intrinsics: the neon table's (kernels_neon.c), and the sve table's below
 * 512-bit vectors (kernels_sve.c says why).
 *
 * What the x86 AVX2 instance gets from its flags (-mavx2 -mfma) the portable
 * instance already gets on aarch64 (128-bit vectors and FMA contraction are
 * baseline, so its axpy is a 4-lane FMLA loop); what it does not get is the
 * gather of a row that is not fp32 in memory.  The generic gather
 * (lowmem, the default strategy) widens an F16 / BF16 row into tmp with a
 * scalar conversion per element, scales it by 1 / ||x|| under normalize in a
 * second pass and reads it again in the axpy.  Here one pass per row:
 *
 *   acc[k] = fma(x[k] (* inv), g, acc[k])      x: FCVTL (F16), USHLL #16
 *                                              (BF16), or the fp32 / fp64 row
 *
 * 4 Q registers per iteration (16 fp32 / 8 fp64 lanes, 4 independent FMLAs),
 * then 1, then scalar fmaf / fma.  The values are the generic instance's bit
 * for bit: the widenings are exact (FCVTL quiets a signalling NaN, as the
 * FMA after it would anyway), the scaled row is
 * rounded once before the FMA as in tmp, and each element's FMA is the one
 * GCC contracts the portable axpy to (tests/c/test_backward.c checks neon and
 * sve against portable bitwise).  Strided rows (sk != 1) and the unified
 * working copies take the same axpy on their rows.
 */
#if defined(__aarch64__)

#include <arm_neon.h>

#define BW_ISA neon
#define FUSED_AXPY
#include "backward_isa.inc"

/* Widen one register of a row (4 fp32 / 2 fp64 lanes) from element k, and
 * one element. */
static inline float32x4_t ldv_f32(const void *x, int64_t k) {
  return vld1q_f32((const float *)x + k);
}
static inline float32x4_t ldv_f16(const void *x, int64_t k) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)x + k)));
}
static inline float32x4_t ldv_bf16(const void *x, int64_t k) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)x + k), 16));
}
static inline float64x2_t ldv_f64(const void *x, int64_t k) {
  return vld1q_f64((const double *)x + k);
}
static inline float ld1_f32(const void *x, int64_t k) { return ((const float *)x)[k]; }
static inline float ld1_f16(const void *x, int64_t k) {
  return lik_tr_f16_to_f32(((const uint16_t *)x)[k]);
}
static inline float ld1_bf16(const void *x, int64_t k) {
  return lik_tr_bf16_to_f32(((const uint16_t *)x)[k]);
}
static inline double ld1_f64(const void *x, int64_t k) { return ((const double *)x)[k]; }

/* acc += g * (x (* inv)) over dim lanes of T (V: NL lanes; the _q / _f32 /
 * _f64 intrinsics by suffix S), x widened by LDV / LD1: 4 registers per
 * iteration, then 1, then one lane (FMA1: fmaf / fma). */
#define AXPY(name, T, S, NL, LDV, LD1, FMA1, SCALED)                                       \
  static __attribute__((noinline)) void name(T *restrict acc, T g, const void *restrict x, \
                                             int64_t dim, T inv) {                          \
    int64_t k = 0;                                                                          \
    for (; k + 4 * NL <= dim; k += 4 * NL) {                                                \
      __typeof__(LDV(x, 0)) v[4] = {LDV(x, k), LDV(x, k + NL), LDV(x, k + 2 * NL),         \
                                    LDV(x, k + 3 * NL)};                                    \
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                 \
        if (SCALED) v[j] = vmulq_n_##S(v[j], inv);                                          \
        vst1q_##S(acc + k + j * NL, vfmaq_n_##S(vld1q_##S(acc + k + j * NL), v[j], g));     \
      }                                                                                     \
    }                                                                                       \
    for (; k + NL <= dim; k += NL) {                                                        \
      __typeof__(LDV(x, 0)) v = LDV(x, k);                                                  \
      if (SCALED) v = vmulq_n_##S(v, inv);                                                  \
      vst1q_##S(acc + k, vfmaq_n_##S(vld1q_##S(acc + k), v, g));                            \
    }                                                                                       \
    for (; k < dim; k++) {                                                                  \
      T v = LD1(x, k);                                                                      \
      if (SCALED) v = v * inv;                                                              \
      acc[k] = FMA1(v, g, acc[k]);                                                          \
    }                                                                                       \
  }

AXPY(bw_neon_axpy_f32, float, f32, 4, ldv_f32, ld1_f32, fmaf, 0)
AXPY(bw_neon_axpy_f16, float, f32, 4, ldv_f16, ld1_f16, fmaf, 0)
AXPY(bw_neon_axpy_bf16, float, f32, 4, ldv_bf16, ld1_bf16, fmaf, 0)
AXPY(bw_neon_axpy_scaled_f32, float, f32, 4, ldv_f32, ld1_f32, fmaf, 1)
AXPY(bw_neon_axpy_scaled_f16, float, f32, 4, ldv_f16, ld1_f16, fmaf, 1)
AXPY(bw_neon_axpy_scaled_bf16, float, f32, 4, ldv_bf16, ld1_bf16, fmaf, 1)
AXPY(bw_neon_axpy_f64, double, f64, 2, ldv_f64, ld1_f64, fma, 0)
AXPY(bw_neon_axpy_scaled_f64, double, f64, 2, ldv_f64, ld1_f64, fma, 1)

/* backward_kernel.inc's axpys of each compute type: [scaled][dtype]. */
static const bw_neon_f32_axpy_fn bw_neon_f32_axpys[2][3] = {
    {bw_neon_axpy_f32, bw_neon_axpy_f16, bw_neon_axpy_bf16},
    {bw_neon_axpy_scaled_f32, bw_neon_axpy_scaled_f16, bw_neon_axpy_scaled_bf16}};
static const bw_neon_f64_axpy_fn bw_neon_f64_axpys[2][3] = {{bw_neon_axpy_f64},
                                                            {bw_neon_axpy_scaled_f64}};

#else
typedef int lik_backward_neon_unused;
#endif
