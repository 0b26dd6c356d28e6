/*
 * kernels_portable.c — the plain-C tile (no intrinsics): same contract and
 * tiling idea as the SIMD kernels (see cpu_internal.h), 4 doc rows x 16 query
 * lanes of accumulators, which compilers keep in vector registers at the
 * baseline ISA.  Used where no SIMD path is available or LIK_CPU_ISA=portable.
 */
#include "backward_internal.h"
#include "cpu_internal.h"
#include "quant_internal.h"
#include "residual_internal.h"

#define PW 16 /* query lanes */
#define PR 4  /* doc rows per tile */

static void lik_tile_portable_4x16(const float *q, int64_t ldq, const float *dr,
                                   int64_t d, const int32_t *tix,
                                   int64_t nrows, float *m, int32_t *ix) {
  for (int64_t r0 = 0; r0 < nrows; r0 += PR) {
    float acc[PR][PW] = {{0}};
    const float *row = dr + r0 * d;
    for (int64_t k = 0; k < d; k++) {
      const float *qk = q + k * ldq;
      for (int r = 0; r < PR; r++) {
        float b = row[r * d + k];
        for (int l = 0; l < PW; l++) acc[r][l] += qk[l] * b;
      }
    }
    for (int r = 0; r < PR; r++) {
      int32_t t = tix[r0 + r];
      for (int l = 0; l < PW; l++)
        if (acc[r][l] > m[l]) { m[l] = acc[r][l]; ix[l] = t; }
    }
  }
}

void lik_pack_portable(const lik_seqs *s, int64_t n, const int32_t *tok,
                       int64_t cnt, int normalize, float *dst);

const lik_cpu_kernels lik_cpu_kernels_portable = {
    "portable", PW, PR, lik_tile_portable_4x16, 0, NULL, lik_pack_portable,
    &lik_bw_kernels_portable_f32, &lik_bw_kernels_portable_f64, &lik_res_kernels_portable,
    &lik_quant_kernels_portable};
