/*
 * backward_avx2.c — the backward row kernels compiled for AVX2 + FMA (this
 * file's name gives it -mavx2 -mfma -mf16c; see CMakeLists.txt).  Called only
 * when the CPU kernel path is avx2 or avx512 (lik_cpu_isa()).
 */
#if defined(__x86_64__)

#define BW_ISA avx2
#include "backward_isa.inc"

#else
typedef int lik_backward_avx2_unused;
#endif
