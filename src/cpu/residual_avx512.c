/*
 * residual_avx512.c — the residual scorer's kernels (residual_kernel.inc)
 * compiled for AVX-512 (this file's name gives it -mavx512f/vl/bw -mfma).
 */
#if defined(__x86_64__)

#define KN(x) res_avx512_##x
#include "residual_kernel.inc"

const lik_res_kernels lik_res_kernels_avx512 = {res_avx512_byte_table, res_avx512_centroid_row,
                                                res_avx512_inv_norm, res_avx512_adc,
                                                res_avx512_max_rows};

#else
typedef int lik_residual_avx512_unused;
#endif
