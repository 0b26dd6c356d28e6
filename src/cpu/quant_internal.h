/*
 * quant_internal.h — the tile kernels of the low-bit MaxSim (quant.c's
 * driver), one table per ISA.
 *
 * A panel holds LIK_QT_LANES valid query tokens in lanes (packed once per
 * call); the document's valid tokens are rows, read in place when they are
 * contiguous int8 with d % 4 == 0 (else copied to scratch, zero-padded).
 * int8 panels span kg = ceil(d / 4) groups of 4 features:
 *
 *   qp    [kg][LANES][4] int8: lane l's features 4g .. 4g+3 at qp[(g*LANES + l)*4]
 *         (zero past d and in unused lanes), values clamped to [-127, 127]
 *         and negated where the token's scale is negative (quant.c).
 *   qsum  [LANES] int32: sum_k of lane l's features (VNNI multiplies the
 *         uint8 d + 128 by q: the kernel subtracts 128 * qsum).
 *   rows[r] a document row of kg * 4 readable bytes (int8), sd[r] its scale.
 *   m     [LANES] running max, for every row r ascending:
 *           v = (float)dot(r, l) * sd[r];  m[l] = v > m[l] ? v : m[l]
 *         with dot the exact integer (kg * 4 <= LIK_QT_KMAX keeps int32 exact).
 *         The query scale is applied to the max by the driver (|scale_Q| * m).
 * Bit panels: qw [LANES][nw], rows of nw 64-bit words (bits past d zero),
 *   v = (float)(d - 2 * sum_w popcount(qw ^ row)).
 * Every kernel computes the same integers and the same fp32 operations, so
 * results are bitwise identical across ISAs.
 */
#ifndef LIK_QUANT_INTERNAL_H
#define LIK_QUANT_INTERNAL_H

#include <stdint.h>

#define LIK_QT_LANES 32
#define LIK_QT_KMAX 65536 /* (127 + 128) * 127 * 65536 < 2^31 */

typedef void (*lik_i8_tile_fn)(const int8_t *qp, const int32_t *qsum, const int8_t *const *rows,
                               const float *sd, int64_t nrows, int64_t kg, float *m);
typedef void (*lik_bits_tile_fn)(const uint64_t *qw, const uint64_t *const *rows, int64_t nrows,
                                 int64_t nw, int64_t d, float *m);

typedef struct lik_quant_kernels {
  const char *isa;
  lik_i8_tile_fn i8_tile;
  lik_bits_tile_fn bits_tile;
} lik_quant_kernels;

/* The bit tile of C, one body: the portable table's (quant.c) compiles it
 * without ISA flags, lik_bits_tile_popcnt (quant_avx2.c) with hardware
 * popcnt; aarch64 has its own (lik_bits_tile_neon). */
static inline void lik_bits_tile_body(const uint64_t *qw, const uint64_t *const *rows,
                                      int64_t nrows, int64_t nw, int64_t d, float *m) {
  for (int64_t r = 0; r < nrows; r++)
    for (int l = 0; l < LIK_QT_LANES; l++) {
      int64_t pc = 0;
      for (int64_t w = 0; w < nw; w++) pc += __builtin_popcountll(qw[l * nw + w] ^ rows[r][w]);
      const float v = (float)(d - 2 * pc);
      m[l] = v > m[l] ? v : m[l];
    }
}

extern const lik_quant_kernels lik_quant_kernels_portable;
void lik_i8_tile_portable(const int8_t *qp, const int32_t *qsum, const int8_t *const *rows,
                          const float *sd, int64_t nrows, int64_t kg, float *m);
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
extern const lik_quant_kernels lik_quant_kernels_avx2;
extern const lik_quant_kernels lik_quant_kernels_vnni;
void lik_bits_tile_popcnt(const uint64_t *qw, const uint64_t *const *rows, int64_t nrows,
                          int64_t nw, int64_t d, float *m);
#elif defined(__aarch64__) || defined(_M_ARM64)
/* NEON: the portable int8 tile and a CNT bit tile (quant_neon.c); SDOT: its
 * int8 tile and NEON's bit tile (quant_dotprod.c); SVE: its SDOT int8 tile
 * and NEON's bit tile (quant_sve.c). */
extern const lik_quant_kernels lik_quant_kernels_neon;
extern const lik_quant_kernels lik_quant_kernels_dotprod;
extern const lik_quant_kernels lik_quant_kernels_sve;
void lik_bits_tile_neon(const uint64_t *qw, const uint64_t *const *rows, int64_t nrows,
                        int64_t nw, int64_t d, float *m);
#endif

#endif /* LIK_QUANT_INTERNAL_H */
