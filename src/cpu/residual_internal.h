/*
 * residual_internal.h — the CPU residual scorer's kernels (residual_kernel.inc,
 * one instance per ISA) and the layout of the per-query tables they read.
 *
 * Scoring a compressed token t against query token s splits the decoded
 * vector into centroid and residual (an asymmetric-distance lookup, as in
 * product quantisation):
 *
 *   <q_s, c + r> * inv_t = (QC[code_t][s] + sum_p TAB[p][byte_p(t)][s]) * inv_t
 *
 *   QC[u][s]       = <q_s, centroid u>                  (used centroids only)
 *   TAB[p][v][s]   = sum_i q_s[p*cpb + i] * w_i(v)       (byte p holding value v)
 *   inv_t          = 1 / max(||c + r||, 1e-12) under normalize, else 1
 *
 * so a token costs width + 1 row additions of the query lanes instead of d
 * multiply-adds.  Lanes come in blocks of LIK_RES_LB query tokens; tables are
 * stored block-major: QC as [nlb][nused][LB], TAB as [nlb][width][256][LB].
 */
#ifndef LIK_CPU_RESIDUAL_INTERNAL_H
#define LIK_CPU_RESIDUAL_INTERNAL_H

#include "residual_decode.h"

#define LIK_RES_LB 32 /* query lanes per block */

typedef struct lik_res_kernels {
  /* dst[v][l] = sum_i qt[(p*cpb + i)*lqp + l] * w[v*cpb + i], v < 256, l < LB */
  void (*byte_table)(const float *qt, int64_t lqp, const lik_res_table *w, int64_t p, float *dst);
  /* dst[l] = sum_k c[k] * qt[k*lqp + l], l < LB */
  void (*centroid_row)(const float *c, int64_t d, const float *qt, int64_t lqp, float *dst);
  /* 1 / max(||c + r||, 1e-12) of a decoded token (residual bytes res[p*sp]) */
  float (*inv_norm)(const lik_res_table *w, int64_t width, const float *c, const uint8_t *res,
                    int64_t sp);
  /* For tokens t < n of one document (token index l0 + t): v = (qc[urow[t]]
   * + sum_p tab[p][res[roff[t] + p*sp]]) * inv[t] per lane; strict-> running
   * max m / argmax ix over LB lanes. */
  void (*adc)(const float *qc, const float *tab, int64_t width, const uint8_t *res, int64_t sp,
              const int64_t *roff, const int32_t *urow, const float *inv, int64_t n, int32_t l0,
              float *m, int32_t *ix);
  /* m[l] = max(m[l], rows[urow[t]][l]) over t < n (NaN never wins). */
  void (*max_rows)(const float *rows, const int32_t *urow, int64_t n, float *m);
  /* centroid_row of the 4 centroids c[r*d ..] into dst[r*ldd + l], r < 4
   * (bitwise the same values; the PLAID index's centroid scores) */
  void (*centroid_rows4)(const float *c, int64_t d, const float *qt, int64_t lqp, float *dst,
                         int64_t ldd);
  /* dst[k] = c[k] + weight of dimension k (residual bytes res[p*sp]), k < width * cpb:
   * lik_res_decode's values bit for bit (the codec's decompress) */
  void (*decode)(const lik_res_table *w, int64_t width, const float *c, const uint8_t *res,
                 int64_t sp, float *dst);
} lik_res_kernels;

extern const lik_res_kernels lik_res_kernels_portable;
#if defined(__x86_64__)
extern const lik_res_kernels lik_res_kernels_avx2;
extern const lik_res_kernels lik_res_kernels_avx512;
#elif defined(__aarch64__)
extern const lik_res_kernels lik_res_kernels_neon; /* the neon and sve paths */
#endif

/* The kernels of a call's CPU path (lik_cpu_kernels_for's table; residual.c):
 * the residual scorer, PLAID's approximate and centroid scores, the codec's
 * decompress. */
const lik_res_kernels *lik_res_kernels_for(const lik_context *ctx);

#endif /* LIK_CPU_RESIDUAL_INTERNAL_H */
