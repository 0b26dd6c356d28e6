/*
 * host_allocs.c — heap allocations per warm call of lik's CPU ops: malloc,
 * calloc, aligned_alloc and realloc are wrapped at link time, so every one the
 * static library makes is counted; call 0 of each op warms up, calls 1..100
 * are counted.  Nq = 4 queries of Lq = 32 against Nd = 64 documents of
 * Ld = 128, d = 128, fp32, normalize (retrieve: top 10).
 *
 *   W="-Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=aligned_alloc -Wl,--wrap=realloc"
 *   cc -O2 -Iinclude bench/host_allocs.c build/cpu/liblik.a $W -pthread -lm -o host_allocs
 *   ./host_allocs THREADS
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "lik.h"
void *__real_malloc(size_t); void *__real_calloc(size_t, size_t);
void *__real_aligned_alloc(size_t, size_t); void *__real_realloc(void *, size_t);
static atomic_long n;
void *__wrap_malloc(size_t b) { atomic_fetch_add(&n, 1); return __real_malloc(b); }
void *__wrap_calloc(size_t a, size_t b) { atomic_fetch_add(&n, 1); return __real_calloc(a, b); }
void *__wrap_aligned_alloc(size_t a, size_t b) { atomic_fetch_add(&n, 1); return __real_aligned_alloc(a, b); }
void *__wrap_realloc(void *p, size_t b) { atomic_fetch_add(&n, 1); return __real_realloc(p, b); }
enum { NQ = 4, ND = 64, LQ = 32, LD = 128, DIM = 128, K = 10, CALLS = 100 };
static float q[NQ * LQ * DIM], d[ND * LD * DIM], s[NQ * ND], gq[NQ * LQ * DIM], gd[ND * LD * DIM], gs[NQ * ND], rs[NQ * K];
static int32_t am[NQ * ND * LQ]; static int64_t ri[NQ * K];
int main(int argc, char **argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 2;
  for (int i = 0; i < NQ * LQ * DIM; i++) q[i] = (float)((i * 37 % 101) - 50) / 50;
  for (int i = 0; i < ND * LD * DIM; i++) d[i] = (float)((i * 53 % 103) - 51) / 51;
  for (int i = 0; i < NQ * ND; i++) gs[i] = 1;
  lik_tensor Q = {q, LIK_F32, 3, {NQ, LQ, DIM}, {LQ * DIM, DIM, 1}, LIK_CPU, 0};
  lik_tensor D = {d, LIK_F32, 3, {ND, LD, DIM}, {LD * DIM, DIM, 1}, LIK_CPU, 0};
  lik_tensor S = {s, LIK_F32, 2, {NQ, ND}, {ND, 1}, LIK_CPU, 0};
  lik_tensor A = {am, LIK_I32, 3, {NQ, ND, LQ}, {ND * LQ, LQ, 1}, LIK_CPU, 0};
  lik_tensor G = {gs, LIK_F32, 2, {NQ, ND}, {ND, 1}, LIK_CPU, 0};
  lik_tensor GQ = Q, GD = D; GQ.data = gq; GD.data = gd;
  lik_tensor RS = {rs, LIK_F32, 2, {NQ, K}, {K, 1}, LIK_CPU, 0};
  lik_tensor RI = {ri, LIK_I64, 2, {NQ, K}, {K, 1}, LIK_CPU, 0};
  lik_options o = LIK_OPTIONS_INIT; o.normalize = 1; o.num_threads = threads;
  const char *names[] = {"lik_maxsim", "lik_retrieve", "lik_maxsim_backward (lowmem)", "lik_maxsim_backward (unified)"};
  for (int op = 0; op < 4; op++) {
    long before = 0;
    for (int c = 0; c <= CALLS; c++) {
      if (c == 1) before = atomic_load(&n); /* call 0 warms up */
      lik_status st;
      if (op == 0) st = lik_maxsim(&Q, &D, NULL, NULL, &o, &S, &A);
      else if (op == 1) st = lik_retrieve(&Q, &D, NULL, NULL, K, &o, &RS, &RI);
      else { o.backward = op == 2 ? LIK_BACKWARD_LOWMEM : LIK_BACKWARD_UNIFIED;
             st = lik_maxsim_backward(&Q, &D, NULL, NULL, &A, &G, &o, &GQ, &GD); }
      if (st) { printf("%s: %s\n", names[op], lik_last_error()); return 1; }
    }
    printf("%-32s %6.2f heap allocations per warm call (%d threads)\n", names[op],
           (double)(atomic_load(&n) - before) / CALLS, threads);
  }
  return 0;
}
