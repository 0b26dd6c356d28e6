/*
 * quant_internal.h — the tile kernels of the low-bit MaxSim (quant.c's
 * driver), one table per ISA.
 *
 * An int8 tile covers LIK_QT_ROWS query tokens x LIK_QT_LANES document tokens
 * over kg = ceil(d / 4) groups of 4 features (zero-padded):
 *
 *   qp    [kg][ROWS][4] bytes: query row r's features 4g .. 4g+3 at
 *         qp[(g*ROWS + r)*4]; int8, XORed with the table's q_xor (0x80 turns
 *         int8 into the uint8 q + 128 that VNNI's vpdpbusd multiplies).
 *   dp    [kg][LANES][4] int8: document lane l's features at dp[(g*LANES + l)*4].
 *   dsum  [LANES] int32: sum_k of lane l's features (undoes the + 128).
 *   sq    [ROWS], sd [LANES]: fp32 scales.
 *   m     [ROWS][LANES] running max, updated as
 *           v = (float)dot(r, l) * (sq[r] * sd[l]);  m = v > m ? v : m
 *         with dot the exact integer (kg * 4 <= LIK_QT_KMAX keeps int32 exact).
 * Bit tiles: qw [ROWS][nw], dw [LANES][nw] 64-bit words (bits past d zero),
 *   v = (float)(d - 2 * sum_w popcount(qw ^ dw)).
 * Every kernel computes the same integers and the same fp32 operations, so
 * results are bitwise identical across ISAs.
 */
#ifndef LIK_QUANT_INTERNAL_H
#define LIK_QUANT_INTERNAL_H

#include <stdint.h>

#define LIK_QT_ROWS 4
#define LIK_QT_LANES 32
#define LIK_QT_KMAX 65536 /* (127 + 128) * 127 * 65536 < 2^31 */

typedef void (*lik_i8_tile_fn)(const uint8_t *qp, const int8_t *dp, const int32_t *dsum,
                               int64_t kg, const float *sq, const float *sd, float *m);
typedef void (*lik_bits_tile_fn)(const uint64_t *qw, const uint64_t *dw, int64_t nw,
                                 int64_t d, float *m);

typedef struct {
  const char *isa;
  uint8_t q_xor;
  lik_i8_tile_fn i8_tile;
  lik_bits_tile_fn bits_tile;
} lik_quant_kernels;

extern const lik_quant_kernels lik_quant_kernels_portable;
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
extern const lik_quant_kernels lik_quant_kernels_avx2;
extern const lik_quant_kernels lik_quant_kernels_vnni;
void lik_bits_tile_popcnt(const uint64_t *qw, const uint64_t *dw, int64_t nw, int64_t d,
                          float *m);
#endif

#endif /* LIK_QUANT_INTERNAL_H */
