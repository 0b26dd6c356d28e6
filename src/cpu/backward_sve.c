/*
 * backward_sve.c — the backward row kernels of the sve path from 512-bit
 * vectors (kernels_sve.c; NEON's below; compiled on arm64 only, with
 * -march=armv8.2-a+sve: run only where dispatch.c found SVE):
 * backward_kernel.inc with its gathered-row axpy (the FUSED_AXPY hook)
 * in SVE intrinsics, vector-length agnostic.  backward_neon.c's loop with
 * one predicated vector per step where NEON has 4 Q registers, then 1, then
 * a scalar tail:
 *
 *   acc[k] = fma(x[k] (* inv), g, acc[k])      x: LD1H + FCVT (F16), LD1H +
 *                                              LSL #16 (BF16), or the fp32 /
 *                                              fp64 row
 *
 * over k < dim in steps of svcntw() (fp64: svcntd()) lanes, the last step's
 * lanes past dim switched off by WHILELT (nothing read or written there).
 * F16 / BF16 are loaded into 32-bit lanes (LD1H zero-extends), where FCVT
 * reads the low half and LSL #16 makes the bf16 bits an fp32.  The values are
 * the portable instance's bit for bit, as NEON's: the widenings are exact
 * (FCVT quiets a signalling NaN, as FCVTL), the scaled row is rounded once
 * (FMUL) before the FMLA, each element's FMA is the one GCC contracts the
 * portable axpy to, and no lane's value depends on the vector length
 * (tests/c/test_backward.c checks the sve path against portable bitwise at
 * 128, 256 and 512 bits: these rows at 512).  The rest of the .inc (norms, the Jacobian, the working
 * copies) is its C, as on every path, vectorised for AdvSIMD only
 * (CMakeLists.txt: GCC's SVE vectoriser sums the Jacobian's dot products in
 * another way, which changes their last bit).
 */
#if defined(__aarch64__)

#include <arm_sve.h>

#define BW_ISA sve
#define FUSED_AXPY
#include "backward_isa.inc"

/* One predicated vector of a row from element k, widened to the compute
 * type's lanes. */
static inline svfloat32_t ldv_f32(svbool_t pg, const void *x, int64_t k) {
  return svld1_f32(pg, (const float *)x + k);
}
static inline svfloat32_t ldv_f16(svbool_t pg, const void *x, int64_t k) {
  return svcvt_f32_f16_x(pg, svreinterpret_f16_u32(svld1uh_u32(pg, (const uint16_t *)x + k)));
}
static inline svfloat32_t ldv_bf16(svbool_t pg, const void *x, int64_t k) {
  return svreinterpret_f32_u32(svlsl_n_u32_x(pg, svld1uh_u32(pg, (const uint16_t *)x + k), 16));
}
static inline svfloat64_t ldv_f64(svbool_t pg, const void *x, int64_t k) {
  return svld1_f64(pg, (const double *)x + k);
}

/* acc += g * (x (* inv)) over dim lanes of T (VT its SVE vector, B its bits,
 * S the intrinsics' suffix, CNT svcntw / svcntd), x widened by LDV. */
#define AXPY(name, T, VT, B, S, CNT, LDV, SCALED)                                          \
  static __attribute__((noinline)) void name(T *restrict acc, T g, const void *restrict x, \
                                             int64_t dim, T inv) {                          \
    for (int64_t k = 0; k < dim; k += (int64_t)CNT()) {                                     \
      const svbool_t pg = svwhilelt_b##B##_s64(k, dim);                                     \
      VT v = LDV(pg, x, k);                                                                 \
      if (SCALED) v = svmul_n_##S##_x(pg, v, inv);                                          \
      svst1_##S(pg, acc + k, svmla_n_##S##_x(pg, svld1_##S(pg, acc + k), v, g));           \
    }                                                                                       \
  }

AXPY(bw_sve_axpy_f32, float, svfloat32_t, 32, f32, svcntw, ldv_f32, 0)
AXPY(bw_sve_axpy_f16, float, svfloat32_t, 32, f32, svcntw, ldv_f16, 0)
AXPY(bw_sve_axpy_bf16, float, svfloat32_t, 32, f32, svcntw, ldv_bf16, 0)
AXPY(bw_sve_axpy_scaled_f32, float, svfloat32_t, 32, f32, svcntw, ldv_f32, 1)
AXPY(bw_sve_axpy_scaled_f16, float, svfloat32_t, 32, f32, svcntw, ldv_f16, 1)
AXPY(bw_sve_axpy_scaled_bf16, float, svfloat32_t, 32, f32, svcntw, ldv_bf16, 1)
AXPY(bw_sve_axpy_f64, double, svfloat64_t, 64, f64, svcntd, ldv_f64, 0)
AXPY(bw_sve_axpy_scaled_f64, double, svfloat64_t, 64, f64, svcntd, ldv_f64, 1)

/* backward_kernel.inc's axpys of each compute type: [scaled][dtype]. */
static const bw_sve_f32_axpy_fn bw_sve_f32_axpys[2][3] = {
    {bw_sve_axpy_f32, bw_sve_axpy_f16, bw_sve_axpy_bf16},
    {bw_sve_axpy_scaled_f32, bw_sve_axpy_scaled_f16, bw_sve_axpy_scaled_bf16}};
static const bw_sve_f64_axpy_fn bw_sve_f64_axpys[2][3] = {{bw_sve_axpy_f64},
                                                          {bw_sve_axpy_scaled_f64}};

#else
typedef int lik_backward_sve_unused;
#endif
