/*
 * quant_neon.c — the bit tile on AdvSIMD (quant_internal.h; compiled on arm64
 * only, no flags: CNT is baseline), the bit tile of the neon and sve paths,
 * with or without SDOT (quant_dotprod.c's table holds it too):
 * v = d - 2 * popcount(q ^ row) per (row, lane).
 *
 * 8 lanes at a time: per pair of 64-bit words, EOR of each lane's words with
 * the row's, CNT (a bit count per byte) and UADALP into the lane's 8 uint16
 * partial counts; a row's 8 lanes then reduce with 2 levels of ADDP and a
 * widening UADDLP to 2 vectors of 4 uint32 counts (an odd last word: a 64-bit
 * EOR / CNT, zero above).  The running max of v is a running min of the
 * count (v decreases with it), converted once per panel: d <= LIK_QT_KMAX
 * (quant.c sends larger d to the portable tile), so every v is an exact fp32
 * integer and the max the portable tile's value.  No partial count can
 * overflow: at most 512 word pairs (d <= 65536), so a uint16 element (2 bytes
 * of each pair) stays <= 8192, and <= 32768 after the 2 ADDPs.
 */
#include <arm_neon.h>

#include "quant_internal.h"

#define UNROLLED _Pragma("GCC unroll 8") /* the arrays below stay in registers */

enum { G = 8 }; /* lanes a step: 8 partial counts reduce to 2 uint32 vectors */

/* Words w, w + 1 of p (left = nw - w words remain), or word w alone with zero
 * above when it is the last. */
static inline uint64x2_t words(const uint64_t *p, int64_t left) {
  return left >= 2 ? vld1q_u64(p) : vcombine_u64(vld1_u64(p), vdup_n_u64(0));
}

static inline uint8x16_t xor_count(uint64x2_t q, uint64x2_t x) {
  return vcntq_u8(vreinterpretq_u8_u64(veorq_u64(q, x)));
}

/* m = v > m ? v : m for 4 lanes, v = d - 2 * pc. */
static inline void update(uint32x4_t pc, int32x4_t dv, float *m) {
  const float32x4_t v = vcvtq_f32_s32(vsubq_s32(dv, vreinterpretq_s32_u32(vshlq_n_u32(pc, 1))));
  const float32x4_t mv = vld1q_f32(m);
  vst1q_f32(m, vbslq_f32(vcgtq_f32(v, mv), v, mv));
}

void lik_bits_tile_neon(const uint64_t *qw, const uint64_t *const *rows, int64_t nrows,
                        int64_t nw, int64_t d, float *m) {
  if (nrows <= 0) return;
  const int32x4_t dv = vdupq_n_s32((int32_t)d);
  for (int g = 0; g < LIK_QT_LANES; g += G) {
    const uint64_t *q = qw + g * nw;
    uint32x4_t lo = vdupq_n_u32(UINT32_MAX), hi = lo; /* least counts of lanes g .. g+7 */
    for (int64_t r = 0; r < nrows; r++) {
      const uint64_t *row = rows[r];
      uint16x8_t a[G];
      const uint64x2_t x0 = words(row, nw);
      UNROLLED for (int l = 0; l < G; l++) a[l] = vpaddlq_u8(xor_count(words(q + l * nw, nw), x0));
      for (int64_t w = 2; w < nw; w += 2) {
        const uint64x2_t x = words(row + w, nw - w);
        UNROLLED for (int l = 0; l < G; l++)
          a[l] = vpadalq_u8(a[l], xor_count(words(q + l * nw + w, nw - w), x));
      }
      const uint16x8_t a03 = vpaddq_u16(vpaddq_u16(a[0], a[1]), vpaddq_u16(a[2], a[3]));
      const uint16x8_t a47 = vpaddq_u16(vpaddq_u16(a[4], a[5]), vpaddq_u16(a[6], a[7]));
      lo = vminq_u32(lo, vpaddlq_u16(a03));
      hi = vminq_u32(hi, vpaddlq_u16(a47));
    }
    update(lo, dv, m + g);
    update(hi, dv, m + g + 4);
  }
}

const lik_quant_kernels lik_quant_kernels_neon = {"neon", lik_i8_tile_portable, lik_bits_tile_neon};
