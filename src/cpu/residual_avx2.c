/*
 * residual_avx2.c — the residual scorer's kernels (residual_kernel.inc)
 * compiled for AVX2 + FMA (this file's name gives it -mavx2 -mfma -mf16c).
 */
#if defined(__x86_64__)

#define KN(x) res_avx2_##x
#define VW 8
#include "residual_kernel.inc"

const lik_res_kernels lik_res_kernels_avx2 = {res_avx2_byte_table, res_avx2_centroid_row,
                                              res_avx2_inv_norm, res_avx2_adc, res_avx2_max_rows,
    res_avx2_centroid_rows4, res_avx2_decode};

#else
typedef int lik_residual_avx2_unused;
#endif
