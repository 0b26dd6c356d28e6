/*
 * kernels_neon.c — AdvSIMD (NEON) tiles and pack for aarch64 (compiled on
 * arm64 only, with no extra flags: AdvSIMD, fp32 FMA and the fp16 <-> fp32
 * conversions are baseline ARMv8-A; dispatch.c still checks HWCAP_ASIMD).
 * The same micro-kernel contract as the x86 tiles (cpu_internal.h,
 * docs/kernels.md): fp32 inputs widened and normalised by the pack, one FMA
 * chain per (row, lane) in ascending k, strict-> running max / argmax.
 *
 * lik_tile_neon_5x16: 5 doc rows x 16 query lanes (4 Q registers of 4 fp32).
 *   Per 4 features k0..k0+3: one load of those 4 features of each doc row
 *   (5 registers), then for each k the panel's 4 Q registers and 20 FMLAs
 *   by element (lane k - k0 of the row's register): each (row, lane) is still
 *   one FMA chain in ascending k.  Register budget (32 v registers): 20
 *   accumulators + 5 doc + 4 Q = 29, so nothing spills; 20 independent
 *   chains cover 4 FMA pipes x 4 cycles of latency.  Per 4 k: 80 FMLAs for
 *   21 loads — 20 cycles on 4 FMA pipes (Neoverse V2, Apple M), 7 cycles of
 *   loads at 3 per cycle.  A d % 4 tail takes the same FMLAs on broadcasts.
 *   Why not 6 rows, as AVX2's 6x16: 24 accumulators + 6 doc + 4 Q = 34 > 32
 *   registers.  Written with ld1r broadcasts, GCC 12 turns them into these
 *   same by-element FMLAs and spills two accumulators, a store-to-load round
 *   trip in the loop-carried chain of every k.  GCC compiles this file with
 *   -fno-schedule-insns (CMakeLists.txt): its scheduling before register
 *   allocation hoists the next k's Q loads and spills one accumulator of
 *   5x16 too; without it neither tile touches the stack in its loops.
 *   16 lanes mirror AVX2's panel (two panels for the common Lq = 32).
 * lik_tile_neon_5x8: 5 x 8 for a last panel with <= 8 valid query lanes.
 * The running max / argmax live in memory and are updated once per 5 rows
 * (fcmgt + 2 bsl per row and register; fcmgt is false for NaN, as
 * _CMP_GT_OQ).
 */
#include <arm_neon.h>
#include <math.h>

#include "backward_internal.h"
#include "cpu_internal.h"
#include "quant_internal.h"
#include "residual_internal.h"

#define MR 5

/* Strict-> update of running max mv and argmax iv with a row's dots v (t:
 * that row's doc-token index in every lane). */
#define UPD(v, mv, iv, t)                         \
  do {                                            \
    uint32x4_t gt_ = vcgtq_f32((v), (mv));        \
    (mv) = vbslq_f32(gt_, (v), (mv));             \
    (iv) = vbslq_s32(gt_, (t), (iv));             \
  } while (0)

/* Loops over the tile's rows and registers: unrolled completely, at -O2 too
 * (the arrays of a tile are registers only then). */
#define UNROLLED _Pragma("GCC unroll 8")

/* One k of a tile: the nv Q registers of feature k (at qk) times lane j of
 * each row's doc register e[r] (features k0..k0+3 of that row). */
#define KSTEP(qk, j)                                                           \
  do {                                                                         \
    float32x4_t a_[4];                                                         \
    UNROLLED for (int v_ = 0; v_ < nv; v_++) a_[v_] = vld1q_f32((qk) + 4 * v_); \
    UNROLLED for (int r_ = 0; r_ < MR; r_++)                                   \
      UNROLLED for (int v_ = 0; v_ < nv; v_++)                                 \
        c[r_][v_] = vfmaq_laneq_f32(c[r_][v_], a_[v_], e[r_], j);              \
  } while (0)

/* MR rows x 4*nv lanes; inlined with a constant nv (4: 5x16, 2: 5x8), so
 * c / e / a_ are registers: GCC 12 -O2 / -O3 compile both tiles with no
 * stack access in their loops (checked in the disassembly). */
static inline __attribute__((always_inline)) void tile_neon(const int nv, const float *q,
                                                            int64_t ldq, const float *dr,
                                                            int64_t d, const int32_t *tix,
                                                            int64_t nrows, float *m,
                                                            int32_t *ix) {
  const int64_t d4 = d & ~(int64_t)3;
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b = dr + r0 * d;
    float32x4_t c[MR][4], e[MR];
    UNROLLED for (int r = 0; r < MR; r++)
      UNROLLED for (int v = 0; v < nv; v++) c[r][v] = vdupq_n_f32(0.0f);
    const float *qk = q;
    int64_t k = 0;
    for (; k < d4; k += 4, qk += 4 * ldq) {
      UNROLLED for (int r = 0; r < MR; r++) e[r] = vld1q_f32(b + r * d + k);
      KSTEP(qk, 0);
      KSTEP(qk + ldq, 1);
      KSTEP(qk + 2 * ldq, 2);
      KSTEP(qk + 3 * ldq, 3);
    }
    for (; k < d; k++, qk += ldq) { /* d % 4 features: lane 0 of a broadcast */
      UNROLLED for (int r = 0; r < MR; r++) e[r] = vld1q_dup_f32(b + r * d + k);
      KSTEP(qk, 0);
    }
    UNROLLED for (int v = 0; v < nv; v++) {
      float32x4_t mv = vld1q_f32(m + 4 * v);
      int32x4_t iv = vld1q_s32(ix + 4 * v);
      UNROLLED for (int r = 0; r < MR; r++) UPD(c[r][v], mv, iv, vdupq_n_s32(tix[r0 + r]));
      vst1q_f32(m + 4 * v, mv);
      vst1q_s32(ix + 4 * v, iv);
    }
  }
}

static void lik_tile_neon_5x16(const float *q, int64_t ldq, const float *dr,
                               int64_t d, const int32_t *tix, int64_t nrows,
                               float *m, int32_t *ix) {
  tile_neon(4, q, ldq, dr, d, tix, nrows, m, ix);
}

static void lik_tile_neon_5x8(const float *q, int64_t ldq, const float *dr,
                              int64_t d, const int32_t *tix, int64_t nrows,
                              float *m, int32_t *ix) {
  tile_neon(2, q, ldq, dr, d, tix, nrows, m, ix);
}

/* Contiguous (sk == 1) row, widened: 8 elements per step, F16 by FCVTL
 * (exact, subnormals included), BF16 by a 16-bit left shift (USHLL). */
static void widen_row_neon(const void *base, lik_dtype dt, int64_t off, int64_t d, float *dst) {
  int64_t k = 0;
  if (dt == LIK_F32) {
    const float *src = (const float *)base + off;
    for (; k + 8 <= d; k += 8) {
      vst1q_f32(dst + k, vld1q_f32(src + k));
      vst1q_f32(dst + k + 4, vld1q_f32(src + k + 4));
    }
    for (; k < d; k++) dst[k] = src[k];
  } else if (dt == LIK_F16) {
    const uint16_t *src = (const uint16_t *)base + off;
    for (; k + 8 <= d; k += 8) {
      const uint16x8_t h = vld1q_u16(src + k);
      vst1q_f32(dst + k, vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))));
      vst1q_f32(dst + k + 4, vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h))));
    }
    for (; k < d; k++) dst[k] = lik_tr_f16_to_f32(src[k]);
  } else {
    const uint16_t *src = (const uint16_t *)base + off;
    for (; k + 8 <= d; k += 8) {
      const uint16x8_t h = vld1q_u16(src + k);
      vst1q_f32(dst + k, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
      vst1q_f32(dst + k + 4, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16)));
    }
    for (; k < d; k++) dst[k] = lik_tr_bf16_to_f32(src[k]);
  }
}

/* dst *= 1 / max(||dst||, eps): the fp32 norm with 8 partial sums (two
 * registers, feature k into partial k mod 8) combined in the AVX2 pack's
 * fixed order.  Every widened row, contiguous or strided, is normalised here,
 * so a strided view scores bitwise as its contiguous copy. */
static void normalize_row_neon(float *dst, int64_t d) {
  int64_t k;
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0;
  for (k = 0; k + 8 <= d; k += 8) {
    const float32x4_t x0 = vld1q_f32(dst + k), x1 = vld1q_f32(dst + k + 4);
    acc0 = vfmaq_f32(acc0, x0, x0);
    acc1 = vfmaq_f32(acc1, x1, x1);
  }
  float p[8];
  vst1q_f32(p, acc0);
  vst1q_f32(p + 4, acc1);
  float ss = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  for (; k < d; k++) ss = fmaf(dst[k], dst[k], ss);
  const float inv = 1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
  const float32x4_t vi = vdupq_n_f32(inv);
  for (k = 0; k + 4 <= d; k += 4) vst1q_f32(dst + k, vmulq_f32(vld1q_f32(dst + k), vi));
  for (; k < d; k++) dst[k] *= inv;
}

void lik_pack_neon(const lik_seqs *s, int64_t n, const int32_t *tok,
                   int64_t cnt, int normalize, float *dst) {
  lik_pack_simd(s, n, tok, cnt, normalize, dst, widen_row_neon, normalize_row_neon);
}

/* Backward rows: the portable kernels for now (docs/kernels.md, "ARM"). */
const lik_cpu_kernels lik_cpu_kernels_neon = {
    "neon", 16, MR, lik_tile_neon_5x16, 8, lik_tile_neon_5x8, lik_pack_neon,
    &lik_bw_kernels_neon_f32, &lik_bw_kernels_neon_f64, &lik_res_kernels_neon,
    &lik_quant_kernels_neon /* SDOT: dispatch.c */};
