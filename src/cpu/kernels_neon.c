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

#define MR 5

/* Strict-> update of running max mv and argmax iv with a row's dots v (t:
 * that row's doc-token index in every lane). */
#define UPD(v, mv, iv, t)                         \
  do {                                            \
    uint32x4_t gt_ = vcgtq_f32((v), (mv));        \
    (mv) = vbslq_f32(gt_, (v), (mv));             \
    (iv) = vbslq_s32(gt_, (t), (iv));             \
  } while (0)

/* One k of the 5x16 tile: the 4 Q registers of feature k times lane j of
 * each row's doc register (features k0..k0+3 of that row). */
#define K16(qk, j)                                                                     \
  do {                                                                                 \
    const float32x4_t a0 = vld1q_f32(qk), a1 = vld1q_f32((qk) + 4),                    \
                      a2 = vld1q_f32((qk) + 8), a3 = vld1q_f32((qk) + 12);             \
    c00 = vfmaq_laneq_f32(c00, a0, e0, j); c01 = vfmaq_laneq_f32(c01, a1, e0, j);      \
    c02 = vfmaq_laneq_f32(c02, a2, e0, j); c03 = vfmaq_laneq_f32(c03, a3, e0, j);      \
    c10 = vfmaq_laneq_f32(c10, a0, e1, j); c11 = vfmaq_laneq_f32(c11, a1, e1, j);      \
    c12 = vfmaq_laneq_f32(c12, a2, e1, j); c13 = vfmaq_laneq_f32(c13, a3, e1, j);      \
    c20 = vfmaq_laneq_f32(c20, a0, e2, j); c21 = vfmaq_laneq_f32(c21, a1, e2, j);      \
    c22 = vfmaq_laneq_f32(c22, a2, e2, j); c23 = vfmaq_laneq_f32(c23, a3, e2, j);      \
    c30 = vfmaq_laneq_f32(c30, a0, e3, j); c31 = vfmaq_laneq_f32(c31, a1, e3, j);      \
    c32 = vfmaq_laneq_f32(c32, a2, e3, j); c33 = vfmaq_laneq_f32(c33, a3, e3, j);      \
    c40 = vfmaq_laneq_f32(c40, a0, e4, j); c41 = vfmaq_laneq_f32(c41, a1, e4, j);      \
    c42 = vfmaq_laneq_f32(c42, a2, e4, j); c43 = vfmaq_laneq_f32(c43, a3, e4, j);      \
  } while (0)

static void lik_tile_neon_5x16(const float *q, int64_t ldq, const float *dr,
                               int64_t d, const int32_t *tix, int64_t nrows,
                               float *m, int32_t *ix) {
  const int64_t d4 = d & ~(int64_t)3;
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b0 = dr + r0 * d, *b1 = b0 + d, *b2 = b1 + d, *b3 = b2 + d,
                *b4 = b3 + d;
    float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c02 = c00, c03 = c00;
    float32x4_t c10 = c00, c11 = c00, c12 = c00, c13 = c00;
    float32x4_t c20 = c00, c21 = c00, c22 = c00, c23 = c00;
    float32x4_t c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    float32x4_t c40 = c00, c41 = c00, c42 = c00, c43 = c00;
    const float *qk = q;
    int64_t k = 0;
    for (; k < d4; k += 4, qk += 4 * ldq) {
      const float32x4_t e0 = vld1q_f32(b0 + k), e1 = vld1q_f32(b1 + k),
                        e2 = vld1q_f32(b2 + k), e3 = vld1q_f32(b3 + k),
                        e4 = vld1q_f32(b4 + k);
      K16(qk, 0);
      K16(qk + ldq, 1);
      K16(qk + 2 * ldq, 2);
      K16(qk + 3 * ldq, 3);
    }
    for (; k < d; k++, qk += ldq) { /* d % 4 features: lane 0 of a broadcast */
      const float32x4_t e0 = vld1q_dup_f32(b0 + k), e1 = vld1q_dup_f32(b1 + k),
                        e2 = vld1q_dup_f32(b2 + k), e3 = vld1q_dup_f32(b3 + k),
                        e4 = vld1q_dup_f32(b4 + k);
      K16(qk, 0);
    }
    float32x4_t m0 = vld1q_f32(m), m1 = vld1q_f32(m + 4), m2 = vld1q_f32(m + 8),
                m3 = vld1q_f32(m + 12);
    int32x4_t i0 = vld1q_s32(ix), i1 = vld1q_s32(ix + 4), i2 = vld1q_s32(ix + 8),
              i3 = vld1q_s32(ix + 12);
    const int32_t *t = tix + r0;
    int32x4_t tv;
    tv = vdupq_n_s32(t[0]);
    UPD(c00, m0, i0, tv); UPD(c01, m1, i1, tv); UPD(c02, m2, i2, tv); UPD(c03, m3, i3, tv);
    tv = vdupq_n_s32(t[1]);
    UPD(c10, m0, i0, tv); UPD(c11, m1, i1, tv); UPD(c12, m2, i2, tv); UPD(c13, m3, i3, tv);
    tv = vdupq_n_s32(t[2]);
    UPD(c20, m0, i0, tv); UPD(c21, m1, i1, tv); UPD(c22, m2, i2, tv); UPD(c23, m3, i3, tv);
    tv = vdupq_n_s32(t[3]);
    UPD(c30, m0, i0, tv); UPD(c31, m1, i1, tv); UPD(c32, m2, i2, tv); UPD(c33, m3, i3, tv);
    tv = vdupq_n_s32(t[4]);
    UPD(c40, m0, i0, tv); UPD(c41, m1, i1, tv); UPD(c42, m2, i2, tv); UPD(c43, m3, i3, tv);
    vst1q_f32(m, m0); vst1q_f32(m + 4, m1); vst1q_f32(m + 8, m2); vst1q_f32(m + 12, m3);
    vst1q_s32(ix, i0); vst1q_s32(ix + 4, i1); vst1q_s32(ix + 8, i2); vst1q_s32(ix + 12, i3);
  }
}

/* One k of the 5x8 tile (as K16, two Q registers). */
#define K8(qk, j)                                                                      \
  do {                                                                                 \
    const float32x4_t a0 = vld1q_f32(qk), a1 = vld1q_f32((qk) + 4);                    \
    c00 = vfmaq_laneq_f32(c00, a0, e0, j); c01 = vfmaq_laneq_f32(c01, a1, e0, j);      \
    c10 = vfmaq_laneq_f32(c10, a0, e1, j); c11 = vfmaq_laneq_f32(c11, a1, e1, j);      \
    c20 = vfmaq_laneq_f32(c20, a0, e2, j); c21 = vfmaq_laneq_f32(c21, a1, e2, j);      \
    c30 = vfmaq_laneq_f32(c30, a0, e3, j); c31 = vfmaq_laneq_f32(c31, a1, e3, j);      \
    c40 = vfmaq_laneq_f32(c40, a0, e4, j); c41 = vfmaq_laneq_f32(c41, a1, e4, j);      \
  } while (0)

static void lik_tile_neon_5x8(const float *q, int64_t ldq, const float *dr,
                              int64_t d, const int32_t *tix, int64_t nrows,
                              float *m, int32_t *ix) {
  const int64_t d4 = d & ~(int64_t)3;
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b0 = dr + r0 * d, *b1 = b0 + d, *b2 = b1 + d, *b3 = b2 + d,
                *b4 = b3 + d;
    float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00,
                c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00;
    const float *qk = q;
    int64_t k = 0;
    for (; k < d4; k += 4, qk += 4 * ldq) {
      const float32x4_t e0 = vld1q_f32(b0 + k), e1 = vld1q_f32(b1 + k),
                        e2 = vld1q_f32(b2 + k), e3 = vld1q_f32(b3 + k),
                        e4 = vld1q_f32(b4 + k);
      K8(qk, 0);
      K8(qk + ldq, 1);
      K8(qk + 2 * ldq, 2);
      K8(qk + 3 * ldq, 3);
    }
    for (; k < d; k++, qk += ldq) {
      const float32x4_t e0 = vld1q_dup_f32(b0 + k), e1 = vld1q_dup_f32(b1 + k),
                        e2 = vld1q_dup_f32(b2 + k), e3 = vld1q_dup_f32(b3 + k),
                        e4 = vld1q_dup_f32(b4 + k);
      K8(qk, 0);
    }
    float32x4_t m0 = vld1q_f32(m), m1 = vld1q_f32(m + 4);
    int32x4_t i0 = vld1q_s32(ix), i1 = vld1q_s32(ix + 4);
    const int32_t *t = tix + r0;
    int32x4_t tv;
    tv = vdupq_n_s32(t[0]); UPD(c00, m0, i0, tv); UPD(c01, m1, i1, tv);
    tv = vdupq_n_s32(t[1]); UPD(c10, m0, i0, tv); UPD(c11, m1, i1, tv);
    tv = vdupq_n_s32(t[2]); UPD(c20, m0, i0, tv); UPD(c21, m1, i1, tv);
    tv = vdupq_n_s32(t[3]); UPD(c30, m0, i0, tv); UPD(c31, m1, i1, tv);
    tv = vdupq_n_s32(t[4]); UPD(c40, m0, i0, tv); UPD(c41, m1, i1, tv);
    vst1q_f32(m, m0); vst1q_f32(m + 4, m1);
    vst1q_s32(ix, i0); vst1q_s32(ix + 4, i1);
  }
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
    for (; k < d; k++) dst[k] = lik_f16_to_f32(src[k]);
  } else {
    const uint16_t *src = (const uint16_t *)base + off;
    for (; k + 8 <= d; k += 8) {
      const uint16x8_t h = vld1q_u16(src + k);
      vst1q_f32(dst + k, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
      vst1q_f32(dst + k + 4, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16)));
    }
    for (; k < d; k++) dst[k] = lik_bf16_to_f32(src[k]);
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

static void lik_pack_neon(const lik_seqs *s, int64_t n, const int32_t *tok,
                          int64_t cnt, int normalize, float *dst) {
  for (int64_t i = 0; i < cnt; i++) {
    const int64_t off = lik_tok_off(s, n, tok[i]);
    float *row = dst + i * s->dim;
    if (s->sk == 1)
      widen_row_neon(s->data, s->dtype, off, s->dim, row);
    else
      lik_pack_row_scalar(s->data, s->dtype, off, s->sk, s->dim, 0, row);
    if (normalize) normalize_row_neon(row, s->dim);
  }
}

/* Backward rows: the portable kernels for now (docs/kernels.md, "ARM"). */
const lik_cpu_kernels lik_cpu_kernels_neon = {
    "neon", 16, MR, lik_tile_neon_5x16, 8, lik_tile_neon_5x8, lik_pack_neon,
    &lik_bw_kernels_portable_f32, &lik_bw_kernels_portable_f64};
