/*
 * dispatch.c — picks the kernel table once per process: the best ISA that
 * both the CPU (cpuid) and the OS (xgetbv: YMM/ZMM state saved on context
 * switch) support, or the one named by LIK_CPU_ISA=portable|avx2|avx512 when
 * it can run here (otherwise the best available is kept).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(LIK_CPU_X86)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

/* 0 = portable, 1 = avx2 (+fma+f16c), 2 = avx512 (f/bw/vl + the above). */
static int best_level(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  int fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  if (!osxsave || !avx || !fma || !f16c) return 0;
  uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return 0; /* XMM + YMM state */
  if (__get_cpuid_max(0, NULL) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  int avx2 = (b >> 5) & 1;
  if (!avx2) return 0;
  int f512 = (b >> 16) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
  if (f512 && bw && vl && (xcr0 & 0xe0) == 0xe0) return 2; /* opmask+ZMM */
  return 1;
}
#endif

static const lik_cpu_kernels *chosen = &lik_cpu_kernels_portable;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void choose(void) {
#if defined(LIK_CPU_X86)
  int best = best_level(), level = best;
  const char *env = getenv("LIK_CPU_ISA");
  if (env) {
    int want = -1;
    if (!strcmp(env, "portable")) want = 0;
    else if (!strcmp(env, "avx2")) want = 1;
    else if (!strcmp(env, "avx512")) want = 2;
    if (want >= 0 && want <= best) level = want;
  }
  chosen = level == 2   ? &lik_cpu_kernels_avx512
           : level == 1 ? &lik_cpu_kernels_avx2
                        : &lik_cpu_kernels_portable;
#endif
}

const lik_cpu_kernels *lik_cpu_kernels_get(void) {
  pthread_once(&once, choose);
  return chosen;
}

LIK_API const char *lik_cpu_isa(void) { return lik_cpu_kernels_get()->isa; }
