/*
 * cpu_internal.h — what the CPU backend's files share: the kernel table (one
 * per ISA, chosen once at run time), the sequence helpers, the thread pool.
 *
 * Layout of the data a tile kernel sees (the micro-kernel contract; see
 * docs/kernels.md for the full text):
 *
 *   Q panel  [d][ldq] fp32: feature k of the panel's query lane l at
 *            q[k*ldq + l].  Lanes hold valid query tokens (ascending s),
 *            already widened and normalised; unused lanes are zero.
 *   D rows   [nrows][d] fp32, row-contiguous (row r at dr + r*d): valid doc
 *            tokens compacted by the mask, widened and normalised.  nrows is
 *            a multiple of the table's mr; the packer pads the tail by
 *            repeating the last row (and its token index), which can never
 *            change a strict-> running max, so kernels have no row edge case.
 *   tix      [nrows] int32: the original doc-token index of each row.
 *   m, ix    [W] running max / argmax of the W lanes the kernel covers.
 *
 * A tile kernel of width W computes, for every row r ascending and lane l<W:
 *   v = sum_k q[k*ldq+l] * dr[r*d+k]   (fp32, k ascending, one rounding
 *                                       chain per (r,l): FMA or mul+add)
 *   if (v > m[l]) { m[l] = v; ix[l] = tix[r]; }
 * It reads exactly q[0 .. d*ldq), dr[0 .. nrows*d), tix[0 .. nrows) and
 * m/ix[0 .. W), and writes only m/ix.  Because every (r,l) value is the same
 * chain regardless of which rows share a tile, results never depend on the
 * blocking or on the thread that ran them.
 */
#ifndef LIK_CPU_INTERNAL_H
#define LIK_CPU_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "../core/dtype.h"
#include "../core/problem.h"
#include "../core/workspace.h"

typedef void (*lik_tile_fn)(const float *q, int64_t ldq, const float *dr,
                            int64_t d, const int32_t *tix, int64_t nrows,
                            float *m, int32_t *ix);

/* Widen + (optionally) L2-normalise cnt tokens of sequence n of s into
 * dst[cnt][s->dim] fp32.  tok[i] is the token index l within the sequence. */
typedef void (*lik_pack_fn)(const lik_seqs *s, int64_t n, const int32_t *tok,
                            int64_t cnt, int normalize, float *dst);

struct lik_bw_kernels;    /* backward row kernels (backward_internal.h) */
struct lik_res_kernels;   /* residual / PLAID scorer kernels (residual_internal.h) */
struct lik_quant_kernels; /* low-bit tiles (quant_internal.h) */

typedef struct {
  const char *isa;     /* "portable", "avx2", "avx512", "neon", "sve" */
  int w;               /* query lanes per panel (ldq); sve: 2 vectors      */
  int mr;              /* doc rows per tile; packed row counts are a multiple */
  lik_tile_fn tile;    /* full-width tile kernel (w lanes)                 */
  int w_tail;          /* 0, or a narrower width for a last, partly full panel */
  lik_tile_fn tile_tail;
  lik_pack_fn pack;
  /* backward row kernels, fp32 and fp64 compute (avx512 uses avx2's) */
  const struct lik_bw_kernels *bw_f32, *bw_f64;
  /* the residual scorer's kernels (sve uses neon's) */
  const struct lik_res_kernels *res;
  /* the low-bit tiles: the ISA's own; dispatch.c puts the VNNI (avx512) or
   * SDOT (neon, sve) tiles in the table where the CPU has them */
  const struct lik_quant_kernels *quant;
} lik_cpu_kernels;

extern const lik_cpu_kernels lik_cpu_kernels_portable;
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#define LIK_CPU_X86 1
extern const lik_cpu_kernels lik_cpu_kernels_avx2;
extern const lik_cpu_kernels lik_cpu_kernels_avx512;
#elif defined(__aarch64__) || defined(_M_ARM64)
#define LIK_CPU_ARM64 1
extern const lik_cpu_kernels lik_cpu_kernels_neon;
/* SVE: w and the backward rows depend on the vector length, set by
 * lik_cpu_kernels_sve_init (SVE instructions: run once, and only on a CPU with
 * SVE; dispatch.c). */
extern lik_cpu_kernels lik_cpu_kernels_sve;
void lik_cpu_kernels_sve_init(void);
/* The NEON pack, also SVE's (kernels_neon.c). */
void lik_pack_neon(const lik_seqs *s, int64_t n, const int32_t *tok, int64_t cnt,
                   int normalize, float *dst);
#endif

/* The table of a call, the one place a CPU kernel's ISA is chosen: the best
 * the CPU runs (x86: cpuid + xgetbv; aarch64: getauxval(AT_HWCAP) on Linux,
 * sysctlbyname on macOS; found once), or the lower path ctx asks for (dispatch.c).  Every op takes its
 * kernels from it: tiles and pack (driver.c, codec.c), backward rows,
 * residual scorer, low-bit tiles. */
const lik_cpu_kernels *lik_cpu_kernels_for(const lik_context *ctx);

/* ---- dtypes: src/core/dtype.h (lik_load_f32, lik_tr_f16_to_f32, ...) ---- */

/* Sequence helpers without re-reading the offsets per token. */
static inline int64_t lik_seq_first_row(const lik_seqs *s, int64_t n) {
  return s->offsets.data ? lik_index_at(&s->offsets, n) : 0;
}

/* Scalar widen+normalise of one token at element offset off (the portable
 * pack, and the strided fallback of the SIMD packs).  Returns nothing; the
 * norm is computed in fp32 in ascending k. */
void lik_pack_row_scalar(const void *base, lik_dtype dt, int64_t off,
                         int64_t sk, int64_t d, int normalize, float *dst);

/* Element offset of token l of sequence n (feature 0). */
static inline int64_t lik_tok_off(const lik_seqs *s, int64_t n, int64_t l) {
  return lik_token_offset(s, n, l);
}

/* The pack of the SIMD paths (avx2, avx512, neon; sve runs neon's): each
 * token's row widened — a contiguous one (sk == 1) by the ISA's widen, a
 * strided one by the scalar widen — then, with normalize, scaled by the ISA's
 * norm (every row, so a strided view scores bitwise as its contiguous copy).
 * Inlined into each ISA's pack, where widen and norm are that file's own
 * functions (direct calls). */
static inline void lik_pack_simd(const lik_seqs *s, int64_t n, const int32_t *tok, int64_t cnt,
                                 int normalize, float *dst,
                                 void (*widen)(const void *base, lik_dtype dt, int64_t off,
                                               int64_t d, float *dst),
                                 void (*norm)(float *dst, int64_t d)) {
  for (int64_t i = 0; i < cnt; i++) {
    const int64_t off = lik_tok_off(s, n, tok[i]);
    float *row = dst + i * s->dim;
    if (s->sk == 1)
      widen(s->data, s->dtype, off, s->dim, row);
    else
      lik_pack_row_scalar(s->data, s->dtype, off, s->sk, s->dim, 0, row);
    if (normalize) norm(row, s->dim);
  }
}

/* ---- threads ------------------------------------------------------------- */

/* Runs fn(ctx, tid, task) for task in [0, ntasks) on up to nthreads threads
 * (the caller is thread 0; tid < nthreads indexes per-thread scratch).  Tasks
 * are claimed dynamically; callers make every task's result independent of
 * which thread runs it.  If a thread cannot be created the others do its
 * share, so this cannot fail. */
typedef void (*lik_task_fn)(void *ctx, int tid, int64_t task);
void lik_parallel_run(int nthreads, int64_t ntasks, lik_task_fn fn, void *ctx);

/* lik_parallel_run with a block of bytes of ws per thread: *scratch and
 * *stride are set before the threads start (thread tid's block at *scratch +
 * tid * *stride).  LIK_ERR_ALLOC naming what, the threads and the bytes when
 * the blocks cannot be had (nothing runs then). */
lik_status lik_parallel_run_ws(lik_ws *ws, int nthreads, int64_t ntasks, size_t bytes,
                               char **scratch, size_t *stride, lik_task_fn fn, void *ctx,
                               const char *what);

/* ---- drivers --------------------------------------------------------------- */

/* Output view of one driver run: candidates [cbeg, cend) of p's pairing,
 * (i, c) as out's (i, c - cbeg) (F64 path: scores_f64 when set). */
typedef struct {
  int64_t cbeg, cend;
  lik_out out;
} lik_cpu_out;

lik_status lik_cpu_run_f32(const lik_problem *p, const lik_cpu_out *o);
lik_status lik_cpu_run_f64(const lik_problem *p, const lik_cpu_out *o);
/* Either of the above by dtype (maxsim.c). */
lik_status lik_cpu_run(const lik_problem *p, const lik_cpu_out *o);

/* Number of output rows i of p's pairing (cross/KD: q.count, list: 1). */
static inline int64_t lik_cpu_out_rows(const lik_problem *p) {
  return p->pairing == LIK_PAIRING_LIST ? 1 : p->q.count;
}

/* Query / document sequence index of output (i, c). */
static inline int64_t lik_cpu_qidx(const lik_problem *p, int64_t i, int64_t c) {
  return p->pairing == LIK_PAIRING_LIST ? lik_index_at(&p->pair_q, c) : i;
}
static inline int64_t lik_cpu_didx(const lik_problem *p, int64_t i, int64_t c) {
  switch (p->pairing) {
    case LIK_PAIRING_KD: return i * p->ncand + c;
    case LIK_PAIRING_LIST: return lik_index_at(&p->pair_d, c);
    default: return c;
  }
}

/* Whether token l of sequence n is valid (mask over s). */
static inline int lik_cpu_valid(const lik_mask *m, const lik_seqs *s,
                                int64_t n, int64_t l) {
  return lik_mask_valid(m, s, n, l);
}

#endif /* LIK_CPU_INTERNAL_H */
