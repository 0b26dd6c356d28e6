/*
 * quant_dotprod.c — the int8 tile on AdvSIMD with the dot product extension
 * (SDOT; compiled on arm64 only, this file alone with
 * -march=armv8.2-a+dotprod; used on the neon and sve paths after dispatch.c
 * saw HWCAP_ASIMDDP).  quant_internal.h's contract: a query panel group g is
 * 32 lanes x 4 int8 features (8 registers of 16 bytes), so one SDOT of a Q
 * register with the row's 4 features broadcast to every 32-bit element adds
 * 4 products to each of 4 lanes, the exact integer dot as VNNI's (signed x
 * signed: no +128 correction).  2 rows at a time: 16 accumulators + 8 Q +
 * 2 broadcasts = 26 of 32 v registers, 16 SDOTs per group.  The bit tile is
 * NEON's (quant_neon.c).
 */
#include <arm_neon.h>
#include <string.h>

#include "quant_internal.h"

#define UNROLLED _Pragma("GCC unroll 8") /* the arrays below stay in registers */

/* The 4 int8 features of group g of a row, in every 32-bit element. */
static inline int8x16_t bcast4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/* Lanes 4j .. 4j+3 of a row: m = v > m ? v : m with v = (float)acc * sd, the
 * portable tile's operations (vmaxq would let a NaN through). */
static inline void update(int32x4_t acc, float sd, float *m) {
  const float32x4_t v = vmulq_n_f32(vcvtq_f32_s32(acc), sd);
  const float32x4_t mv = vld1q_f32(m);
  vst1q_f32(m, vbslq_f32(vcgtq_f32(v, mv), v, mv));
}

static void i8_tile_sdot(const int8_t *qp, const int32_t *qsum, const int8_t *const *rows,
                         const float *sd, int64_t nrows, int64_t kg, float *m) {
  (void)qsum;
  enum { NV = LIK_QT_LANES / 4 }; /* Q registers per group */
  int64_t r = 0;
  for (; r + 2 <= nrows; r += 2) {
    int32x4_t a[2][NV];
    UNROLLED for (int j = 0; j < NV; j++) a[0][j] = a[1][j] = vdupq_n_s32(0);
    for (int64_t g = 0; g < kg; g++) {
      const int8x16_t d0 = bcast4(rows[r] + 4 * g), d1 = bcast4(rows[r + 1] + 4 * g);
      UNROLLED for (int j = 0; j < NV; j++) {
        const int8x16_t q = vld1q_s8(qp + (g * NV + j) * 16);
        a[0][j] = vdotq_s32(a[0][j], q, d0);
        a[1][j] = vdotq_s32(a[1][j], q, d1);
      }
    }
    UNROLLED for (int j = 0; j < NV; j++) update(a[0][j], sd[r], m + 4 * j);
    UNROLLED for (int j = 0; j < NV; j++) update(a[1][j], sd[r + 1], m + 4 * j);
  }
  for (; r < nrows; r++) {
    int32x4_t a[NV];
    UNROLLED for (int j = 0; j < NV; j++) a[j] = vdupq_n_s32(0);
    for (int64_t g = 0; g < kg; g++) {
      const int8x16_t d0 = bcast4(rows[r] + 4 * g);
      UNROLLED for (int j = 0; j < NV; j++) a[j] = vdotq_s32(a[j], vld1q_s8(qp + (g * NV + j) * 16), d0);
    }
    UNROLLED for (int j = 0; j < NV; j++) update(a[j], sd[r], m + 4 * j);
  }
}

const lik_quant_kernels lik_quant_kernels_dotprod = {"dotprod", i8_tile_sdot, lik_bits_tile_neon};
