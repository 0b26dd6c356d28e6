/*
 * backward_avx2.c — the backward row kernels compiled for AVX2 + FMA (this
 * file's name gives it -mavx2 -mfma -mf16c; see CMakeLists.txt).  Called only
 * when the CPU kernel path is avx2 or avx512 (lik_cpu_isa()).
 */
#if defined(__x86_64__)

#define R float
#define KN(x) bw_avx2_f32_##x
#include "backward_kernel.inc"
#undef R
#undef KN

#define R double
#define KN(x) bw_avx2_f64_##x
#include "backward_kernel.inc"
#undef R
#undef KN

const lik_bw_kernels lik_bw_kernels_avx2_f32 = {bw_avx2_f32_query_item, bw_avx2_f32_doc_item,
                                                bw_avx2_f32_norm_item, bw_avx2_f32_ws_item};
const lik_bw_kernels lik_bw_kernels_avx2_f64 = {bw_avx2_f64_query_item, bw_avx2_f64_doc_item,
                                                bw_avx2_f64_norm_item, bw_avx2_f64_ws_item};

#else
typedef int lik_backward_avx2_unused;
#endif
