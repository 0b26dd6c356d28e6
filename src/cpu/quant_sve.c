/*
 * quant_sve.c — the int8 tile in SVE (quant_internal.h; compiled on arm64
 * only, this file alone with -march=armv8.2-a+sve; SDOT on z registers is
 * base SVE: no flag beside HWCAP_SVE), vector-length agnostic: the sve
 * table's int8 tile, on every SVE CPU (A64FX has no AdvSIMD SDOT).
 *
 * A panel group g is 32 lanes x 4 int8 features, svcntw() lanes a vector, so
 * one SDOT of a query vector with a row's 4 features broadcast (LD1RW) to
 * every 32-bit element adds 4 exact products to each of its lanes, as NEON's
 * and VNNI's tiles do.  SVE types cannot form the arrays of accumulators
 * NEON's tile unrolls, so the panel's lanes go 2 vectors at a time (a loop of
 * 32 / (2 * svcntw()) steps: 4 at 128 bits, 1 at 512; predicated, so 1024
 * and 2048 bits read and write only the 32 lanes) around a block of 4 rows:
 * 8 accumulators, 2 query loads and 4 broadcasts per 8 SDOTs.  A last block
 * of fewer rows repeats the last row, which never changes a strict-> max.
 * The same integers and fp32 operations as every int8 tile: bitwise the
 * portable scores.
 */
#include <arm_sve.h>
#include <string.h>

#include "quant_internal.h"

enum { L = LIK_QT_LANES, RB = 4 };

static inline int64_t at_most(int64_t i, int64_t last) { return i < last ? i : last; }

/* The 4 int8 features of group g of a row, in every 32-bit element. */
static inline svint8_t bcast4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return svreinterpret_s8_s32(svdup_n_s32(v));
}

/* m = v > m ? v : m on lanes pw, v = (float)acc * sd: the portable tile's
 * operations. */
static inline svfloat32_t update(svbool_t pw, svint32_t acc, float sd, svfloat32_t m) {
  const svfloat32_t v = svmul_n_f32_x(pw, svcvt_f32_s32_x(pw, acc), sd);
  return svsel_f32(svcmpgt_f32(pw, v, m), v, m);
}

#define DOT2(a0, a1, d)               \
  do {                                \
    const svint8_t d_ = (d);          \
    a0 = svdot_s32(a0, q0, d_);       \
    a1 = svdot_s32(a1, q1, d_);       \
  } while (0)

static void i8_tile_sve(const int8_t *qp, const int32_t *qsum, const int8_t *const *rows,
                        const float *sd, int64_t nrows, int64_t kg, float *m) {
  (void)qsum;
  const int64_t vw = (int64_t)svcntw();
  for (int64_t j = 0; j < L; j += 2 * vw) {
    /* lanes j .. j+vw and j+vw .. j+2vw (none past L: the offsets stay in the panel) */
    const int64_t j1 = j + vw < L ? j + vw : j;
    const svbool_t w0 = svwhilelt_b32(j, (int64_t)L), w1 = svwhilelt_b32(j + vw, (int64_t)L);
    const svbool_t b0 = svwhilelt_b8(4 * j, 4 * (int64_t)L), b1 = svwhilelt_b8(4 * (j + vw), 4 * (int64_t)L);
    svfloat32_t m0 = svld1_f32(w0, m + j), m1 = svld1_f32(w1, m + j1);
    for (int64_t r = 0; r < nrows; r += RB) {
      const int64_t last = nrows - 1, i1 = at_most(r + 1, last), i2 = at_most(r + 2, last),
                    i3 = at_most(r + 3, last);
      const int8_t *r0 = rows[r], *r1 = rows[i1], *r2 = rows[i2], *r3 = rows[i3];
      svint32_t a00 = svdup_n_s32(0), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
                a30 = a00, a31 = a00;
      for (int64_t g = 0; g < kg; g++) {
        const svint8_t q0 = svld1_s8(b0, qp + (g * L + j) * 4), q1 = svld1_s8(b1, qp + (g * L + j1) * 4);
        DOT2(a00, a01, bcast4(r0 + 4 * g));
        DOT2(a10, a11, bcast4(r1 + 4 * g));
        DOT2(a20, a21, bcast4(r2 + 4 * g));
        DOT2(a30, a31, bcast4(r3 + 4 * g));
      }
      m0 = update(w0, a00, sd[r], m0);
      m1 = update(w1, a01, sd[r], m1);
      m0 = update(w0, a10, sd[i1], m0);
      m1 = update(w1, a11, sd[i1], m1);
      m0 = update(w0, a20, sd[i2], m0);
      m1 = update(w1, a21, sd[i2], m1);
      m0 = update(w0, a30, sd[i3], m0);
      m1 = update(w1, a31, sd[i3], m1);
    }
    svst1_f32(w0, m + j, m0);
    svst1_f32(w1, m + j1, m1);
  }
}

const lik_quant_kernels lik_quant_kernels_sve = {"sve", i8_tile_sve, lik_bits_tile_neon};
