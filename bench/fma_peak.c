/*
 * fma_peak.c — measures this machine's fp32 FMA peak (GFLOP/s): every thread
 * runs independent chains of vfmadd on registers only (no memory traffic), so
 * the figure is the FMA units' throughput, the ceiling a MaxSim tile can reach.
 *
 *   cc -O3 -pthread -mavx2 -mfma fma_peak.c -o fma_peak             (AVX2)
 *   cc -O3 -pthread -mavx512f -DWIDTH=16 fma_peak.c -o fma_peak512  (AVX-512)
 *   ./fma_peak THREADS
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef WIDTH
#define WIDTH 8
#endif
#if WIDTH == 16
typedef __m512 vec;
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define SUM(v) _mm512_reduce_add_ps(v)
#else
typedef __m256 vec;
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
static float SUM(__m256 v) {
  float f[8];
  _mm256_storeu_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#endif

enum { CHAINS = 12, ITERS = 50 * 1000 * 1000 };

static void *run(void *out) {
  vec acc[CHAINS];
  const vec a = SET1(0.999999f), b = SET1(1e-7f);
  for (int c = 0; c < CHAINS; c++) acc[c] = SET1((float)c);
  for (long i = 0; i < ITERS; i++)
#pragma GCC unroll 12 /* all chains in registers, none through the stack */
    for (int c = 0; c < CHAINS; c++) acc[c] = FMA(acc[c], a, b);
  vec s = acc[0];
  for (int c = 1; c < CHAINS; c++) s = ADD(s, acc[c]);
  *(float *)out = SUM(s); /* keeps the chains alive */
  return NULL;
}

int main(int argc, char **argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 1;
  pthread_t tid[256];
  float sink[256];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, run, &sink[t]);
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  const double flops = 2.0 * WIDTH * CHAINS * (double)ITERS * threads;
  printf("%.1f\n", flops / s * 1e-9);
  return sink[0] == 12345.0f; /* never true; uses the result */
}
