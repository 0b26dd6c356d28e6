/*
 * kernels_sve.c — the SVE tile for aarch64 (compiled on arm64 only, this file
 * alone with -march=armv8.2-a+sve; used only after dispatch.c saw HWCAP_SVE
 * and ran lik_cpu_kernels_sve_init).  The same micro-kernel contract as every
 * tile (cpu_internal.h, docs/kernels.md): one FMA chain per (row, lane) in
 * ascending k, strict-> running max / argmax; so its results are bitwise
 * those of the NEON tiles, at any vector length.
 *
 * Vector-length agnostic: a panel is 2 vectors of query lanes, w = 2 * VL / 32
 * (8 lanes at 128-bit SVE, 16 at 256, 32 at 512: the common Lq = 32 in one
 * panel), set at run time from svcntw(), as BLIS's armsve context sets its
 * tile sizes; the pack is NEON's (SVE CPUs have AdvSIMD; it is memory-bound).
 *
 * lik_tile_sve_10x2v: 10 doc rows x 2 vectors, the AVX2 6x16's shape: per k,
 *   2 Q vectors and one LD1RW broadcast per doc row feed 20 FMLAs.  20
 *   accumulators + 2 Q + the broadcasts stay within 32 z registers, and 20
 *   independent chains cover the FMA latency of Neoverse V1 / V2 (4 cycles x
 *   2 or 4 pipes) and A64FX (9 cycles x 2 pipes; 8 rows would leave it 12%
 *   idle, llvm-mca).  Not NEON's FMLA by element on 4 features loaded at
 *   once (LD1RQW): the element register of an indexed fp32 FMLA must be one
 *   of z0-z7, and GCC 12 then adds 14 register moves per 64 FMLAs (82% of
 *   the FMA peak modelled for Neoverse V2, against 100% here; docs/kernels.md).
 *   No narrow tail tile: a part-full last panel runs on the zero lanes the
 *   driver pads it with (a panel is at most 2 vectors wide).
 * The running max / argmax live in memory and are updated once per 10 rows
 * (FCMGT into a predicate + 2 SEL per row and vector; FCMGT is false for NaN).
 */
#include <arm_sve.h>

#include "backward_internal.h"
#include "cpu_internal.h"
#include "quant_internal.h"
#include "residual_internal.h"

#define MR 10

/* Strict-> update of running max mv and argmax iv with a row's dots v (t:
 * that row's doc-token index in every lane). */
#define UPD(v, mv, iv, t)                                \
  do {                                                   \
    const svbool_t gt_ = svcmpgt_f32(all, (v), (mv));    \
    (mv) = svsel_f32(gt_, (v), (mv));                    \
    (iv) = svsel_s32(gt_, (t), (iv));                    \
  } while (0)

/* Feature k of doc row br (broadcast) times the 2 Q vectors a0, a1. */
#define ROW(c0, c1, br)                                  \
  do {                                                   \
    const svfloat32_t e_ = svdup_n_f32((br)[k]);         \
    c0 = svmla_f32_x(all, c0, a0, e_);                   \
    c1 = svmla_f32_x(all, c1, a1, e_);                   \
  } while (0)

/* The row's dots c0, c1 into the running max / argmax of the 2 vectors. */
#define ROW_UPD(c0, c1, t)                               \
  do {                                                   \
    const svint32_t tv_ = svdup_n_s32(t);                \
    UPD(c0, m0, i0, tv_);                                \
    UPD(c1, m1, i1, tv_);                                \
  } while (0)

static void lik_tile_sve_10x2v(const float *q, int64_t ldq, const float *dr, int64_t d,
                               const int32_t *tix, int64_t nrows, float *m, int32_t *ix) {
  const svbool_t all = svptrue_b32();
  const int64_t vl = (int64_t)svcntw();
  for (int64_t r0 = 0; r0 < nrows; r0 += MR) {
    const float *b0 = dr + r0 * d, *b1 = b0 + d, *b2 = b1 + d, *b3 = b2 + d, *b4 = b3 + d,
                *b5 = b4 + d, *b6 = b5 + d, *b7 = b6 + d, *b8 = b7 + d, *b9 = b8 + d;
    svfloat32_t c00 = svdup_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
                c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00,
                c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00,
                c81 = c00, c90 = c00, c91 = c00;
    const float *qk = q;
    for (int64_t k = 0; k < d; k++, qk += ldq) {
      const svfloat32_t a0 = svld1_f32(all, qk), a1 = svld1_f32(all, qk + vl);
      ROW(c00, c01, b0); ROW(c10, c11, b1); ROW(c20, c21, b2); ROW(c30, c31, b3);
      ROW(c40, c41, b4); ROW(c50, c51, b5); ROW(c60, c61, b6); ROW(c70, c71, b7);
      ROW(c80, c81, b8); ROW(c90, c91, b9);
    }
    svfloat32_t m0 = svld1_f32(all, m), m1 = svld1_f32(all, m + vl);
    svint32_t i0 = svld1_s32(all, ix), i1 = svld1_s32(all, ix + vl);
    const int32_t *t = tix + r0;
    ROW_UPD(c00, c01, t[0]); ROW_UPD(c10, c11, t[1]); ROW_UPD(c20, c21, t[2]);
    ROW_UPD(c30, c31, t[3]); ROW_UPD(c40, c41, t[4]); ROW_UPD(c50, c51, t[5]);
    ROW_UPD(c60, c61, t[6]); ROW_UPD(c70, c71, t[7]); ROW_UPD(c80, c81, t[8]);
    ROW_UPD(c90, c91, t[9]);
    svst1_f32(all, m, m0); svst1_f32(all, m + vl, m1);
    svst1_s32(all, ix, i0); svst1_s32(all, ix + vl, i1);
  }
}

/* w (2 vectors of fp32 lanes) and the backward rows are set by
 * lik_cpu_kernels_sve_init. */
lik_cpu_kernels lik_cpu_kernels_sve = {
    "sve", 0, MR, lik_tile_sve_10x2v, 0, NULL, lik_pack_neon,
    &lik_bw_kernels_neon_f32, &lik_bw_kernels_neon_f64, &lik_res_kernels_neon,
    &lik_quant_kernels_sve};

/* The backward rows: backward_sve.c's from 512-bit vectors, NEON's below
 * (the same values).  The gathered-row axpy is load / store bound; NEON's
 * LDP / STP move 2 Q registers per instruction where an SVE load / store
 * moves one vector, so llvm-mca puts NEON ahead at 128 bits (Neoverse V2,
 * fp32: 4.8 against 3.9 lanes / cycle) and level or ahead at 256 (Neoverse
 * V1), SVE ahead at 512 (A64FX: 6.0 against 3.2; docs/kernels.md). */
void lik_cpu_kernels_sve_init(void) {
  lik_cpu_kernels_sve.w = 2 * (int)svcntw();
  if (svcntb() >= 64) {
    lik_cpu_kernels_sve.bw_f32 = &lik_bw_kernels_sve_f32;
    lik_cpu_kernels_sve.bw_f64 = &lik_bw_kernels_sve_f64;
  }
}
