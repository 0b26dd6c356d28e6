/*
 * dispatch.c — the kernel table of a call, the CPU backend's one choice of
 * ISA: the best ISA that both the CPU and the OS support (found once per
 * process), or the one the call's context asks for
 * (lik_context_options.cpu_isa, LIK_CPU_ISA in the default context) when it
 * can run here (otherwise the best available).  The table holds every op's
 * kernels (cpu_internal.h), so no op chooses again.
 *   x86-64:  cpuid, and xgetbv for the OS (YMM/ZMM state saved on context
 *            switch): portable < avx2 < avx512 (+VNNI for the int8 tiles).
 *   aarch64: AdvSIMD (NEON) is baseline in the ABI; Linux still reports it
 *            in getauxval(AT_HWCAP) (HWCAP_ASIMD), macOS in sysctlbyname
 *            ("hw.optional.AdvSIMD"), which are checked so that a kernel or
 *            emulator without it gets the portable path; other systems take
 *            it as given.  SVE: HWCAP_SVE (the kernel sets it only where it
 *            saves SVE state) / "hw.optional.arm.FEAT_SVE" (no Apple CPU has
 *            had it so far: M4's SME streaming SVE is not it); the dot product:
 *            HWCAP_ASIMDDP / "hw.optional.arm.FEAT_DotProd" (M1 and later), for
 *            the neon path's int8 tile (SVE's SDOT is base SVE).
 *            portable < neon < sve.
 */
#include <pthread.h>

#include "../core/context.h"
#include "cpu_internal.h"
#include "quant_internal.h"

#if defined(LIK_CPU_X86)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

/* 0 = portable, 1 = avx2 (+fma+f16c), 2 = avx512 (f/bw/vl + the above),
 * 3 = avx512 + VNNI (the int8 kernels' extra level; quant.c). */
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
  if (f512 && bw && vl && (xcr0 & 0xe0) == 0xe0) return 2 + ((c >> 11) & 1); /* +VNNI */
  return 1;
}
#elif defined(LIK_CPU_ARM64)
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1) /* <asm/hwcap.h> */
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1UL << 22)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#elif defined(__APPLE__)
#include <sys/sysctl.h>

/* A macOS CPU feature flag (hw.optional.*): 1 where the name exists and is
 * non-zero; 0 where it does not (an older macOS lacks the FEAT_ names). */
static int apple_has(const char *name) {
  int v = 0;
  size_t n = sizeof v;
  return sysctlbyname(name, &v, &n, NULL, 0) == 0 && v != 0;
}
#endif

/* 0 = portable, 1 = neon (AdvSIMD fp32 FMA), 2 = sve. */
static int best_level(void) {
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  if (!(hw & HWCAP_ASIMD)) return 0;
  return (hw & HWCAP_SVE) ? 2 : 1;
#elif defined(__APPLE__)
  if (!apple_has("hw.optional.AdvSIMD")) return 0;
  return apple_has("hw.optional.arm.FEAT_SVE") ? 2 : 1;
#else
  return 1;
#endif
}

/* AdvSIMD SDOT, read once by find_best on a CPU at level >= 1. */
static int has_dotprod(void) {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__APPLE__)
  return apple_has("hw.optional.arm.FEAT_DotProd");
#else
  return 0;
#endif
}
#endif

/* The table of each level (0 portable; x86: 1 avx2, 2 avx512; aarch64:
 * 1 neon, 2 sve up to the best level), filled once: the ISA's own table,
 * with the int8 tile of the CPU's extra instructions (AVX-512 VNNI on the
 * avx512 path; AdvSIMD SDOT on neon; the sve table has SVE's own). */
static lik_cpu_kernels tables[3];
static int best = 0;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void find_best(void) {
  tables[0] = lik_cpu_kernels_portable;
#if defined(LIK_CPU_X86)
  best = best_level();
  tables[1] = lik_cpu_kernels_avx2;
  tables[2] = lik_cpu_kernels_avx512;
  if (best == 3) {
    best = 2;
    tables[2].quant = &lik_quant_kernels_vnni;
  }
#elif defined(LIK_CPU_ARM64)
  best = best_level();
  tables[1] = lik_cpu_kernels_neon;
  if (best == 2) {
    lik_cpu_kernels_sve_init();
    tables[2] = lik_cpu_kernels_sve;
  }
  if (best >= 1 && has_dotprod()) tables[1].quant = &lik_quant_kernels_dotprod;
#endif
}

const lik_cpu_kernels *lik_cpu_kernels_for(const lik_context *ctx) {
  pthread_once(&once, find_best);
  const int level = lik_context_cpu_level(ctx);
  return &tables[level < best ? level : best];
}

LIK_API const char *lik_cpu_isa(void) { return lik_cpu_kernels_for(lik_context_default())->isa; }
