/*
 * forward/kernel.cuh — the tensor-core MaxSim forward for bf16 / fp16 and
 * fp32 (3xTF32, fp32 accuracy; one TF32 product under LIK_FP32_TF32): one
 * kernel over the two tile families of forward/tiles.cuh (the config class
 * C), loads from forward/loader.cuh.
 *
 * One CTA owns one output row's range of items (documents) and streams their
 * token tiles through a STAGES-deep cp.async (or bulk-copy / TMA) pipeline
 * (the pipeline runs on across document boundaries, so it never drains
 * between documents).
 *
 *   epilogue   per column: optional x 1/||d_t|| (fused normalize), -inf for
 *              masked / out-of-range tokens (select, so NaN in masked tokens
 *              never matters), running max (+ argmax, lowest index on ties)
 *              per query row in registers.  At the end of a document: quad
 *              shuffles, cross-warp merge in shared memory, x 1/||q_s||,
 *              masked / empty rows -> 0 and argmax -1, fixed-order sum.
 *   long Lq    query blocks are the outermost loop of a CTA; the score of a
 *              later block is added to the one the same thread stored before
 *              (deterministic, no atomics, no scratch).  In the two-warpgroup
 *              TMA kernel the next block is loaded into shared memory while
 *              the current one's last documents compute (its rows are in
 *              registers by then).  A last block that would be mostly
 *              padding runs as a launch of its own (P.s0: launch.cu,
 *              run_forward), after this one, adding to its scores.
 *   Ld split   (SPLIT, scores only, sm_90+) the P.split CTAs of a cluster
 *              share each item: rank r takes the document tiles t = r mod
 *              split; at the end of an item the ranks > 0 write their
 *              per-row maxima into rank 0's shared memory (distributed shared
 *              memory, double-buffered), one cluster barrier, and rank 0
 *              merges them and stores (deterministic: max is exact).  A
 *              separate instantiation: the kernels without it are unchanged.
 */
#ifndef LIK_CUDA_FORWARD_KERNEL_CUH
#define LIK_CUDA_FORWARD_KERNEL_CUH

#include <type_traits>

#include "../common.cuh"
#include "../ptx.cuh"
#include "../wgmma.cuh"
#include "loader.cuh"
#include "tiles.cuh"

namespace lik_cuda {

template <class C, bool ARGMAX, int STAGES, bool SPLIT>
__global__ void __launch_bounds__(C::NT, C::MINB)
    maxsim_mma_kernel(const __grid_constant__ KParams P) {
  static_assert(!(ARGMAX && SPLIT), "the Ld split is scores-only");
  using T = typename C::T;
  constexpr int NT = C::NT, BQ = C::BQ, BD = C::BD, KS = C::KS, CPR = C::CPR,
                WC = C::WC, NI = C::NI, MI = C::MI, KC = C::KC, RB = C::RB;
  constexpr bool QREG = C::QR, BULK = C::DENSE, TMA = C::TMA;
  constexpr bool MBAR = BULK || TMA; /* tiles complete on stage barriers */
  /* Two-warpgroup TMA kernel: no CTA barrier per tile; each warp releases a
   * stage on its "empty" barrier, thread 0 waits for it before refilling the
   * stage.  The warpgroups take turns issuing their MMAs (named barriers 1
   * and 2), so one's reduction runs while the other's MMAs fill the tensor
   * cores (longq -9 ... -11 %), and the ring refills a stage two tiles after
   * its use (the warpgroups are up to a tile apart).  Items end with
   * warpgroup barriers only (item_sync, below).  The same without the
   * turns in the one-warpgroup kernel (two CTAs per SM) was 5-13 % slower. */
  constexpr bool PINGPONG = TMA && C::NT == 256;
  constexpr int AHEAD = PINGPONG ? STAGES - 2 : STAGES - 1; /* tiles loaded ahead */
  constexpr bool QAHEAD = PINGPONG; /* the next query block loads early (below) */
  constexpr int EPC = epc<T>(); /* features per 16-byte chunk */
  constexpr uint32_t ALLV = (uint32_t)((1ull << (2 * NI)) - 1); /* all 2*NI columns valid */
  extern __shared__ __align__(128) unsigned char smem[];
  float *qinv = reinterpret_cast<float *>(smem + C::OFF_QINV);
  float *dinv = reinterpret_cast<float *>(smem + C::OFF_DINV);
  float *redv = reinterpret_cast<float *>(smem + C::OFF_REDV);
  int *redi = reinterpret_cast<int *>(smem + C::OFF_REDI);
  float *wsum = reinterpret_cast<float *>(smem + C::OFF_WSUM);
  unsigned char *stages = smem + C::SMALL;
  if (C::WG) /* the 128-byte swizzle needs 1024-byte aligned tiles */
    stages += (1024u - (smem_u32(stages) & 1023u)) & 1023u;
  unsigned char *qs = stages + STAGES * C::STAGE_BYTES;
  const uint32_t stages_u = smem_u32(stages), qs_u = smem_u32(qs);
  /* Ld split: [2][split - 1][BQ] row maxima of ranks 1.. (rank 0's copy is read) */
  float *xv = reinterpret_cast<float *>(qs + (QREG ? 1 : P.nkc) * BQ * C::RBP);
  int xpar = 0;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wn = C::wn_of(warp), wrow = C::row0(warp);
  const int nkc = QREG ? 1 : P.nkc;
  const int64_t dim = P.d.dim;

  const int split = SPLIT ? P.split : 1;
  const int rank = SPLIT ? (int)(blockIdx.x % split) : 0; /* in the cluster */
  const int64_t cta = SPLIT ? (int64_t)blockIdx.x / split : (int64_t)blockIdx.x;
  const int64_t row = cta / P.upr;
  const int64_t unit = cta % P.upr;
  const int64_t j0 = unit * P.dpc;
  int64_t nitems = P.ncand - j0;
  if (nitems > P.dpc) nitems = P.dpc;
  if (nitems <= 0) return;
  /* the Ld split writes into rank 0's shared memory: every CTA of the
   * cluster must have started (CUDA's rule for distributed shared memory) */
  if (SPLIT) cluster_sync();
  /* one query per CTA (cross / KD), scores only: just the blocks its length
   * needs (with an argmax, later blocks still write -1 up to its extent) */
  int nqb = P.nqb;
  if (!ARGMAX && P.pairing != 2 && P.qpc == 1) {
    const int64_t need = (seq_len(P.q, row) - P.s0 + P.qrows - 1) / P.qrows;
    if (need < nqb) nqb = need < 1 ? 1 : (int)need;
  }

  const T *Dp = reinterpret_cast<const T *>(P.d.data);
  const T *Qp = reinterpret_cast<const T *>(P.q.data);

  /* MBAR: the stage barriers, and this thread's parity bit per stage */
  const uint32_t bars = smem_u32(smem + C::OFF_BAR), empties = bars + 64;
  uint32_t bphase = 0;
  uint32_t filled = 0, ephase = 0; /* thread 0 (PINGPONG): stages filled before, their empty parity */
  if constexpr (MBAR) {
    static_assert(STAGES <= 8 && QREG && AHEAD >= 1, "8 stage barriers; one k-chunk per tile");
    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) {
        bar_init(bars + 8 * s, 1);
        bar_init(empties + 8 * s, NT / 32);
      }
      bar_init_fence();
    }
    __syncthreads();
  }
  /* launched right after the d_mask's prefix kernel (TileCfg.pdl), the
   * CTA got here while that kernel ran: dpre / dbits are read from here on */
  griddep_wait();

  /* ---- producer: issue the loads of one pipeline step ---- */
  /* Fast path: thread tid always copies 16-byte chunk ch = tid % CPR of rows
   * r0 + i * RSTEP, so the shared address advances by an immediate (for the
   * wgmma swizzle RSTEP is a multiple of 8: the swizzle term is constant per
   * thread).  Where CPR does not divide NT (96-byte rows: 6 chunks, 64
   * threads) the last RSTEP * CPR .. NT - 1 threads copy nothing and the
   * last pass covers the tile's remaining rows only. */
  constexpr int RSTEP = NT / CPR;
  constexpr int NIT = (BD + RSTEP - 1) / RSTEP;
  constexpr bool RAGGED = RSTEP * CPR != NT || BD % RSTEP != 0;
  static_assert(RSTEP > 0 && (!C::WG || TMA || (RSTEP % 8 == 0 && !RAGGED)), "tile / thread mismatch");
  const int my_ch = tid % CPR, my_r0 = tid / CPR;
  const bool my_on = tid < RSTEP * CPR;
  /* pass i of this thread copies a row of the tile */
  auto my_row = [&](const int i) { return !RAGGED || (my_on && my_r0 + i * RSTEP < BD); };
  const uint32_t my_swz = C::doff(my_r0, my_ch);
  auto issue = [&](const Cursor &c, int st) {
    const uint32_t dst0 = stages_u + st * C::STAGE_BYTES;
    const int64_t t0 = tile_t0<BD>(c);
    const int64_t rows = c.len - t0; /* valid rows in this tile */
    const int64_t k0 = (int64_t)c.kc * KC;
    if constexpr (BULK) { /* the tile's valid rows, contiguous in global memory */
      if (tid == 0) {
        const uint32_t bytes = rows <= 0 ? 0u : (uint32_t)(rows < BD ? rows : BD) * RB;
        bar_expect(bars + 8 * st, bytes);
        if (bytes) bulk_copy(dst0, Dp + c.base + t0 * P.d.sl, bytes, bars + 8 * st);
      }
    } else if constexpr (TMA) { /* one box of 128 bytes of features x BD tokens per atom */
      if (tid == 0) {
        if (PINGPONG) {
          if ((filled >> st) & 1u) { /* every warp is done with the stage's last tile */
            bar_wait(empties + 8 * st, (ephase >> st) & 1u);
            ephase ^= 1u << st;
          }
          filled |= 1u << st;
        }
        bar_expect(bars + 8 * st, C::STAGE_BYTES);
#pragma unroll
        for (int a = 0; a < RB / 128; ++a)
          tma_load_3d(dst0 + a * (BD * 128), &P.tmap_d, a * (128 / (int)sizeof(T)), (int)t0,
                      (int)c.doc, bars + 8 * st);
      }
    } else if (P.fast_d) {
      const bool kok = k0 + my_ch * EPC < dim;
      const int64_t step = (int64_t)RSTEP * P.d.sl;
      const T *src = Dp + c.base + (t0 + my_r0) * P.d.sl + k0 + my_ch * EPC;
      if (kok && rows >= BD) { /* full tile: no per-row checks */
#pragma unroll
        for (int i = 0; i < NIT; ++i) {
          if (my_row(i)) cp_async16(dst0 + my_swz + i * RSTEP * C::ROWB, src, 16);
          src += step;
        }
        return;
      }
#pragma unroll
      for (int i = 0; i < NIT; ++i) {
        const bool ok = kok && (my_r0 + i * RSTEP) < rows;
        if (my_row(i))
          cp_async16(dst0 + my_swz + i * RSTEP * C::ROWB, ok ? (const void *)src : (const void *)Dp,
                     ok ? 16 : 0);
        src += step;
      }
    } else {
      for (int u = tid; u < BD * CPR; u += NT) {
        const int r = u / CPR, ch = u % CPR;
        const int64_t k = k0 + ch * EPC;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < rows && k < dim)
          v = load8<T>(Dp + c.base + (t0 + r) * P.d.sl, P.d.sk, k, dim);
        *reinterpret_cast<uint4 *>(stages + st * C::STAGE_BYTES + C::doff(r, ch)) = v;
      }
    }
  };

  Cursor pc, cc;
  pc.qb = 0; pc.kc = 0; pc.rank = rank; pc.split = split; pc.it = 0; pc.tile = 0; pc.done = false;
  cursor_item<BD>(P, pc, row, j0);
  cc = pc;

#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (!pc.done) {
      issue(pc, s);
      cursor_next<BD>(P, pc, row, j0, nitems, nkc, nqb);
    }
    cp_async_commit();
  }
  int pst = AHEAD, cst = 0;
  const int wg = warp >> 2;
  /* The thread that reduces and stores query row rrow at an item's end:
   * row tid, or, where two warpgroups hold one m64 tile each (BQ = NT / 2),
   * rows 64 w .. 64 w + 63 the first 64 threads of warpgroup w: each
   * warpgroup reduces its own rows (behind its own item barrier). */
  constexpr bool HALF = C::WG && 2 * BQ == NT;
  const int rrow = HALF ? ((tid >> 7) << 6) + (tid & 127) : tid;
  const bool rthr = HALF ? (tid & 127) < 64 : tid < BQ;
  if (PINGPONG && wg == 1) named_arrive(1, NT); /* warpgroup 0 issues first */

  uint32_t afr[QREG ? MI : 1][QREG ? KS : 1][4];
  float acc[MI][NI][4];
  float rm[MI][2];
  int ra[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rm[mi][h] = CUDART_NAN_F; /* no value yet (takes_max) */
      ra[mi][h] = -1;
    }
  int64_t loaded_qi = -1;
  int loaded_qb = -1;
  /* The end of an item synchronises the CTA, or, in the two-warpgroup
   * kernel where each query slot lies in one warpgroup's rows (stacked
   * queries), or in its ping-pong form (TMA tiles), just that warpgroup
   * (named barriers 3 / 4): the other one keeps its MMAs going.  A 256-row
   * slot there is summed across them through named barriers 5 / 6 (below). */
  const bool wg_items = C::WG && NT == 256 && P.qrows <= 64 * MI;
  auto item_sync = [&]() {
    if (wg_items || PINGPONG) named_sync(3 + (warp >> 2), 128);
    else __syncthreads();
  };
  uint32_t nitem = 0; /* items ended so far (PINGPONG: wsum buffer and barrier 5 / 6) */
  constexpr int DR = (BD + NT - 1) / NT; /* document rows per thread (normalize) */
  float dss[DR];
  uint32_t vbits = ALLV;
  bool full = true; /* CTA-uniform: every column of the tile is valid */

  /* Query block qb of the queries from qi0 into qs: cp.async where P.fast_q
   * (one group), else synchronous loads.  A thread's rows of one query run
   * in order, so a query's length and first token are fetched once. */
  auto q_issue = [&](const int64_t qi0, const int qb, const int r0, const int nr, const int t,
                     const int step) { /* rows r0 .. r0 + nr - 1, by threads t, t + step, ... */
    const int nkq = QREG ? 1 : nkc;
    int64_t cq = -1, qlen = 0;
    const T *q0 = Qp;
    for (int u = t; u < nkq * nr * CPR; u += step) {
      const int kc = u / (nr * CPR);
      const int r = r0 + (u / CPR) % nr, ch = u % CPR;
      const int64_t qi = qi0 + (r >> P.qshift);
      if (qi != cq) {
        cq = qi;
        qlen = qi < P.nq ? seq_len(P.q, qi) : 0;
        q0 = qi < P.nq ? Qp + seq_base(P.q, qi) : Qp;
      }
      const int64_t s = P.s0 + (int64_t)qb * P.qrows + (r & (P.qrows - 1));
      const int64_t k = (int64_t)kc * KC + ch * EPC;
      const uint32_t off = kc * BQ * C::RBP + swz<RB>(r, ch);
      if (P.fast_q) { /* asynchronous: all of the block's loads in flight at once */
        const bool v = s < qlen && k < P.q.dim;
        cp_async16(qs_u + off, v ? (const void *)(q0 + s * P.q.sl + k) : Qp, v ? 16 : 0);
      } else {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (s < qlen) v = load8<T>(q0 + s * P.q.sl, P.q.sk, k, P.q.dim);
        *reinterpret_cast<uint4 *>(qs + off) = v;
      }
    }
    cp_async_commit();
  };
  /* Long queries (the two-warpgroup TMA kernel: its tiles have no cp.async
   * groups): the next query block is loaded into qs at the first item end
   * after the current one went to registers, under the block's remaining
   * tiles; (ahead_qi, ahead_qb) is the block in flight there.  Compiled
   * into that kernel only (in all of them, colpali was 2-5 % slower in one
   * of two runs). */
  const bool q_ahead = QAHEAD && P.fast_q && P.pairing != 2 && nqb > 1 && !wg_items;
  int64_t ahead_qi = -1;
  int ahead_qb = -1;

  while (!cc.done) {
    /* ---- (re)load the query block: CTA-uniform condition ---- */
    if (cc.tile == 0 && cc.kc == 0 && (cc.qi != loaded_qi || cc.qb != loaded_qb)) {
      if (!QAHEAD || cc.qi != ahead_qi || cc.qb != ahead_qb) {
        __syncthreads(); /* every warp has read the previous block */
        q_issue(cc.qi, cc.qb, 0, BQ, tid, NT);
      }
      cp_async_wait<0>();
      __syncthreads();
      const int nkq = QREG ? 1 : nkc;
      if (P.normalize && tid < BQ) {
        float ss = 0.f;
        for (int kc = 0; kc < nkq; ++kc)
#pragma unroll 4
          for (int ch = 0; ch < CPR; ++ch)
            ss += sumsq8<T>(*reinterpret_cast<const uint4 *>(qs + kc * BQ * C::RBP + swz<RB>(tid, ch)));
        qinv[tid] = 1.f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
      }
      if (QREG) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) {
            const int r = wrow + mi * C::MSTEP + (lane & 15);
            const int ch = ks * 2 + (lane >> 4);
            uint32_t *f = afr[QREG ? mi : 0][QREG ? ks : 0];
            ldsm_x4(qs_u + swz<RB>(r, ch), f[0], f[1], f[2], f[3]);
            if constexpr (C::WG && std::is_same_v<T, float>) /* wgmma TF32: A rounded once */
#pragma unroll
              for (int x = 0; x < 4; ++x) f[x] = tf32_rna(__uint_as_float(f[x]));
          }
      }
      loaded_qi = cc.qi;
      loaded_qb = cc.qb;
    }

    if constexpr (MBAR) {
      bar_wait(bars + 8 * cst, (bphase >> cst) & 1u);
      bphase ^= 1u << cst;
    } else {
      cp_async_wait<STAGES - 2>();
    }
    if (C::WG && !TMA) fence_proxy_async(); /* cp.async wrote it; wgmma reads it */
    /* the stage refilled below was read by every thread before this barrier
     * (PINGPONG: the empty barriers order that; normalize: dinv) */
    if (!PINGPONG || P.normalize) __syncthreads();
    /* the next pipeline step's loads (into the slot every thread finished
     * reading before the barrier).  The wgmma kernel issues MMAs first: the
     * one-warpgroup form all of the tile's (train-batch-128 -8 %, colpali
     * -4.5 %), the two-warpgroup form m64 tile 0's (longq -5 ... -8 %;
     * after both it had no registers to spare for the loads while 128
     * accumulators are in flight: it spilled and was 2.5 % slower). */
    auto prefetch = [&]() {
      if (!pc.done) {
        issue(pc, pst);
        cursor_next<BD>(P, pc, row, j0, nitems, nkc, nqb);
      }
      cp_async_commit();
      pst = (pst + 1 == STAGES) ? 0 : pst + 1;
    };
    if (!C::WG) prefetch();

    const uint32_t sb = stages_u + cst * C::STAGE_BYTES;
    const int64_t t0 = tile_t0<BD>(cc);

    if (cc.kc == 0) {
      if (!C::WG) /* wgmma overwrites on its first k-step */
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
#pragma unroll
      for (int i = 0; i < DR; ++i) dss[i] = 0.f;
      /* validity of this thread's 8 columns */
      const int64_t rows = cc.len - t0;
      if (cc.masked || rows < BD) {
        full = false;
        vbits = 0;
        /* this thread's column c0 + ni * 8 + e is in range iff ni * 8 + e < lim */
        const int c0 = wn * WC + 2 * (lane & 3);
        const int lim = rows - c0 < BD ? (int)(rows - c0) : BD;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int e = 0; e < 2; ++e) vbits |= (uint32_t)(ni * 8 + e < lim) << (ni * 2 + e);
        if (cc.masked && P.dbits) {
          /* the mask as bits (prefix.cu): this thread's 8 NI columns from
           * t0 + c0 are bits s .. of words w0 .., one funnel shift per 32 */
          constexpr int NG = (8 * NI + 31) / 32;
          const uint32_t *mw = P.dbits + cc.doc * P.dwords;
          const int64_t at = t0 + c0, w0 = at >> 5;
          const int s = (int)(at & 31);
          uint32_t w[NG + 1], x[NG];
#pragma unroll
          for (int k = 0; k <= NG; ++k) w[k] = w0 + k < P.dwords ? __ldg(mw + w0 + k) : 0u;
#pragma unroll
          for (int k = 0; k < NG; ++k) x[k] = __funnelshift_r(w[k], w[k + 1], s);
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int o = ni * 8 + e;
              if (!((x[o >> 5] >> (o & 31)) & 1u)) vbits &= ~(1u << (ni * 2 + e));
            }
        } else if (cc.masked) {
          const uint8_t *mrow = P.dm.data + mask_base(P.dm, P.d, cc.doc) + (t0 + c0) * P.dm.sl;
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (((vbits >> (ni * 2 + e)) & 1u) && mrow[(ni * 8 + e) * P.dm.sl] == 0)
                vbits &= ~(1u << (ni * 2 + e));
        }
      } else {
        full = true;
        vbits = ALLV;
      }
    }

    if (P.normalize) {
      const unsigned char *rp = stages + cst * C::STAGE_BYTES;
#pragma unroll
      for (int i = 0; i < DR; ++i)
        if (tid + i * NT < BD)
#pragma unroll 4
          for (int ch = 0; ch < CPR; ++ch)
            dss[i] += sumsq8<T>(*reinterpret_cast<const uint4 *>(rp + C::doff(tid + i * NT, ch)));
    }

    /* ---- tensor-core tile ---- */
    const int64_t kbase = (int64_t)cc.kc * KC;
    /* all columns valid, no scaling: the max-chain epilogue, with an argmax
     * too (uniform across the CTA: the wgmma waits inside it are
     * warpgroup-wide) */
    const bool fast = !P.normalize && full;
    if constexpr (C::WG) {
      /* one warpgroup-wide wgmma per (m64 tile, k16 step), committed as one
       * group per m64 tile; unconditional (an empty document's tile is
       * zero-filled and masked), so the waits below stay in straight code */
      /* the tile's address through a lane-0 broadcast, which ptxas knows is
       * warp-uniform: the descriptors then live in uniform registers (no
       * R2UR pair per wgmma: longq -2 ... -3 %, colpali -4.6 %) */
      const uint64_t d0 = wg_desc(__shfl_sync(0xffffffffu, sb, 0));
      if (PINGPONG) named_sync(1 + wg, NT); /* this warpgroup's turn */
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        wg_fence_regs<NI * 4>(&acc[mi][0][0]);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) { /* features past d are zero */
          const uint64_t db = wg_desc_add(d0, (ks >> 2) * (BD * 128) + (ks & 3) * 32);
          wgmma_rs<T, BD>(&acc[mi][0][0], afr[mi][ks], db, ks > 0);
        }
        wg_commit();
        if (mi == (C::NT == 128 ? MI - 1 : 0)) prefetch();
      }
      if (PINGPONG) named_arrive(2 - wg, NT); /* the other warpgroup's turn */
    } else {
      const bool warp_live = (int64_t)(wn * WC) < cc.len - t0; /* warp-uniform */
      auto kstep = [&](const int ks) {
        uint32_t a[MI][4];
        if (QREG) {
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int x = 0; x < 4; ++x) a[mi][x] = afr[QREG ? mi : 0][QREG ? ks : 0][x];
        } else {
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) {
            const int r = wrow + mi * C::MSTEP + (lane & 15);
            const int ch = ks * 2 + (lane >> 4);
            ldsm_x4(qs_u + cc.kc * BQ * C::RBP + swz<RB>(r, ch), a[mi][0], a[mi][1],
                    a[mi][2], a[mi][3]);
          }
        }
        uint32_t b[NI][2];
#pragma unroll
        for (int np = 0; np < NI / 2; ++np) {
          const int r = wn * WC + np * 16 + (lane & 7) + ((lane >> 4) << 3);
          const int ch = ks * 2 + ((lane >> 3) & 1);
          ldsm_x4(sb + C::doff(r, ch), b[2 * np][0], b[2 * np][1], b[2 * np + 1][0],
                  b[2 * np + 1][1]);
        }
        if constexpr (NI % 2 == 1) { /* the last n8 tile of an odd count: lanes 0-15 address it */
          const int r = wn * WC + (NI - 1) * 8 + (lane & 7);
          const int ch = ks * 2 + ((lane >> 3) & 1);
          ldsm_x2(sb + C::doff(r, ch), b[NI - 1][0], b[NI - 1][1]);
        }
        if constexpr (std::is_same_v<T, float>) {
          if (P.tf32) { /* one TF32 product: operands rounded to tf32 once */
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
              for (int x = 0; x < 4; ++x) a[mi][x] = tf32_rna(__uint_as_float(a[mi][x]));
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
#pragma unroll
              for (int x = 0; x < 2; ++x) b[ni][x] = tf32_rna(__uint_as_float(b[ni][x]));
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
              for (int ni = 0; ni < NI; ++ni) mma_tf32(acc[mi][ni], a[mi], b[ni]);
            return;
          }
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) mma16816<T>(acc[mi][ni], a[mi], b[ni]);
      };
      if (warp_live) {
        if (kbase + KC <= dim) {
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) kstep(ks);
        } else {
#pragma unroll
          for (int ks = 0; ks < KS; ++ks)
            if (kbase + ks * (32 / (int)sizeof(T)) < dim) kstep(ks);
        }
      }
    }

    if (cc.kc == nkc - 1) {
      /* ---- epilogue of a tile ---- */
      if (P.normalize) {
#pragma unroll
        for (int i = 0; i < DR; ++i)
          if (tid + i * NT < BD) dinv[tid + i * NT] = 1.f / fmaxf(sqrtf(dss[i]), (float)LIK_NORM_EPS);
        __syncthreads();
      }
      /* two max chains per row (a nested tree with a variable bound went
       * to local memory at NI = 16).  With the argmax: the chains give the
       * tile's max of this thread's columns; only where it beats the
       * running max is the first column holding it looked up (the lowest
       * index on ties, as slow_cols: the thread's columns ascend with
       * (ni, e), the tiles with the pipeline), so a tile that improves
       * nothing costs what the scores-only epilogue costs.  fmaxf skips
       * NaN: a NaN similarity never wins, an all-NaN tile changes nothing. */
      auto reduce_fast = [&](const int mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float m0 = ARGMAX ? acc[mi][0][h * 2] : rm[mi][h], m1 = acc[mi][0][h * 2 + 1];
#pragma unroll
          for (int ni = ARGMAX ? 1 : 0; ni < NI; ++ni) {
            m0 = fmaxf(m0, acc[mi][ni][h * 2]);
            if (ni > 0) m1 = fmaxf(m1, acc[mi][ni][h * 2 + 1]);
          }
          const float m = fmaxf(m0, m1);
          if (!ARGMAX) {
            rm[mi][h] = m;
          } else if (takes_max(m, rm[mi][h])) {
            int c = 2 * NI - 1; /* column k = 2 ni + e: the lowest holding m */
#pragma unroll
            for (int k = 2 * NI - 2; k >= 0; --k)
              if (acc[mi][k >> 1][h * 2 + (k & 1)] == m) c = k;
            rm[mi][h] = m;
            ra[mi][h] = (int)(t0 + wn * WC + (c >> 1) * 8 + 2 * (lane & 3) + (c & 1));
          }
        }
      };
      /* masked / out-of-range / scaled columns (argmax: the lowest index on
       * ties); the scale is a compile-time choice, so the unscaled form has
       * no multiply and no shared-memory load */
      auto slow_cols = [&](auto norm) {
        constexpr bool NORM = decltype(norm)::value;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int cl = wn * WC + ni * 8 + 2 * (lane & 3) + e;
            const float sc = NORM ? dinv[cl] : 1.f;
            const bool ok = (vbits >> (ni * 2 + e)) & 1u;
            const int tg = (int)(t0 + cl);
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const float v = ok ? acc[mi][ni][h * 2 + e] * sc : CUDART_NAN_F;
                if (ARGMAX) {
                  if (takes_max(v, rm[mi][h])) {
                    rm[mi][h] = v;
                    ra[mi][h] = tg;
                  }
                } else {
                  rm[mi][h] = fmaxf(rm[mi][h], v);
                }
              }
          }
      };
      auto reduce_slow = [&]() {
        if (P.normalize) slow_cols(std::true_type{});
        else slow_cols(std::false_type{});
      };
      /* The wgmma waits stay in straight code (behind a data-dependent
       * branch ptxas serialises the wgmmas: C7518).  Two-warpgroup kernel
       * (one CTA per SM): m64 tile 0 is reduced while tile 1 still
       * computes, in a basic block of its own between the waits, else
       * ptxas hoists the second wait above it (longq -1 ... -3 %).  The
       * one-warpgroup kernel (two CTAs per SM: the other one's MMAs fill
       * the gap) keeps both waits in the reduction's block, where ptxas
       * does hoist the second one and interleaves the two reductions; the
       * two-block form measured 3-7 % slower there. */
      static_assert(MI <= 2 || !C::WG, "one wgmma group per m64 tile, at most 2");
      if constexpr (C::WG && C::NT == 256 && MI == 2) {
        wg_wait<1>();
        wg_fence_regs<NI * 4>(&acc[0][0][0]);
        if (fast) reduce_fast(0);
        wg_wait<0>();
        wg_fence_regs<NI * 4>(&acc[1][0][0]);
        if (fast) reduce_fast(1);
        else reduce_slow();
      } else if (fast) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          if (C::WG) {
            if (mi == MI - 1) wg_wait<0>();
            else wg_wait<1>();
            wg_fence_regs<NI * 4>(&acc[mi][0][0]);
          }
          reduce_fast(mi);
        }
      } else {
        if (C::WG) {
          wg_wait<0>();
          wg_fence_regs<MI * NI * 4>(&acc[0][0][0]);
        }
        reduce_slow();
      }
      /* PINGPONG: this warp's MMAs on the stage are complete (waited above) */
      if (PINGPONG && lane == 0) bar_arrive(empties + 8 * cst);

      if (cc.tile == cc.ntiles - 1) {
        /* ---- end of a (document, query block): reduce and store ---- */
        const int wpar = PINGPONG ? (int)(nitem & 1) * 8 : 0; /* this item's wsum buffer */
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float v = rm[mi][h];
            int ix = ra[mi][h];
#pragma unroll
            for (int o = 1; o <= 2; o <<= 1) {
              const float ov = __shfl_xor_sync(0xffffffffu, v, o);
              if (ARGMAX) {
                const int oi = __shfl_xor_sync(0xffffffffu, ix, o);
                if (better(ov, oi, v, ix)) {
                  v = ov;
                  ix = oi;
                }
              } else {
                v = fmaxf(v, ov);
              }
            }
            if ((lane & 3) == 0) {
              const int r = wrow + mi * C::MSTEP + h * 8 + (lane >> 2);
              redv[wn * BQ + r] = v;
              redi[wn * BQ + r] = ix;
            }
            rm[mi][h] = CUDART_NAN_F;
            ra[mi][h] = -1;
          }
        item_sync();
        float v = CUDART_NAN_F;
        int ix = -1;
        if (rthr) {
          v = redv[rrow];
          ix = redi[rrow];
#pragma unroll
          for (int w = 1; w < C::NWN; ++w) {
            const float ov = redv[w * BQ + rrow];
            if (ARGMAX) {
              const int oi = redi[w * BQ + rrow];
              if (better(ov, oi, v, ix)) {
                v = ov;
                ix = oi;
              }
            } else {
              v = fmaxf(v, ov);
            }
          }
          if (SPLIT && rank > 0)
            *cluster_map(xv + (xpar * (split - 1) + rank - 1) * BQ + rrow, 0) = v;
        }
        if constexpr (SPLIT) {
          cluster_sync(); /* ranks > 0 wrote; rank 0 reads (the other buffer next item) */
          if (rank == 0 && rthr)
            for (int r = 1; r < split; ++r) v = fmaxf(v, xv[(xpar * (split - 1) + r - 1) * BQ + rrow]);
          xpar ^= 1;
        }
        if (rthr) {
          const int g = rrow >> P.qshift;
          const int64_t qi = cc.qi + g;
          const int64_t s = P.s0 + (int64_t)cc.qb * P.qrows + (rrow & (P.qrows - 1));
          const bool qok = qi < P.nq;
          bool qv = qok && s < seq_len(P.q, qi);
          if (qv && P.qm.data)
            qv = P.qm.data[mask_base(P.qm, P.q, qi) + s * P.qm.sl] != 0;
          const bool live = qv && v == v; /* some valid token won (-inf included) */
          float contrib = live ? (P.normalize ? v * qinv[rrow] : v) : 0.f;
          const int64_t j = j0 + cc.it;
          /* rows past a packed query's length up to the argmax extent get -1 */
          if (ARGMAX && qok && s < P.q.len)
            P.argmax[(row * P.qpc + g) * P.asi + j * P.asj + s * P.ass] = live ? ix : -1;
#pragma unroll
          for (int o = 16; o > 0; o >>= 1)
            contrib += __shfl_down_sync(0xffffffffu, contrib, o);
          if (lane == 0) wsum[wpar + (rrow >> 5)] = contrib;
        }
        item_sync();
        const int wps = P.qrows / 32, slot = rrow >> P.qshift; /* warps per slot */
        if (PINGPONG && !wg_items) {
          /* one slot of all BQ rows over both warpgroups: warpgroup 0
           * (which issues first, so it is rarely waited for) hands its
           * warps' sums over by arriving at named barrier 5 + nitem % 2,
           * warpgroup 1 waits there and thread 128 adds all BQ / 32 of
           * them in row order.  Warpgroup 0
           * reaches item nitem + 2 only after warpgroup 1 has issued a later
           * tile, i.e. after this wait: two barriers and buffers suffice. */
          if (wg == 0) named_arrive(5 + (int)(nitem & 1), NT);
          else named_sync(5 + (int)(nitem & 1), NT);
          if (tid == 128) {
            float tot = wsum[wpar];
            for (int w = 1; w < BQ / 32; ++w) tot += wsum[wpar + w];
            float *out = P.scores + row * P.qpc * P.ssi + (j0 + cc.it) * P.ssj;
            if (cc.qi < P.nq) *out = cc.qb == 0 && P.s0 == 0 ? tot : *out + tot;
          }
        } else if (rank == 0 && rthr && (rrow & (P.qrows - 1)) == 0 && cc.qi + slot < P.nq) {
          /* a slot's sum by its first row's thread (in the slot's warpgroup) */
          float tot = wsum[wpar + slot * wps];
          for (int w = 1; w < wps; ++w) tot += wsum[wpar + slot * wps + w];
          float *out = P.scores + (row * P.qpc + slot) * P.ssi + (j0 + cc.it) * P.ssj;
          *out = cc.qb == 0 && P.s0 == 0 ? tot : *out + tot;
        }
        ++nitem;
        /* each warpgroup its own rows, which its warps put into registers
         * before this item (the warpgroup's barrier above orders them) */
        if constexpr (QAHEAD) {
          if (q_ahead && cc.qb + 1 < nqb && ahead_qb != cc.qb + 1) {
            q_issue(cc.qi, cc.qb + 1, 64 * MI * wg, 64 * MI, tid & 127, 128);
            ahead_qi = cc.qi;
            ahead_qb = cc.qb + 1;
          }
        }
      }
    }

    cst = (cst + 1 == STAGES) ? 0 : cst + 1;
    cursor_next<BD>(P, cc, row, j0, nitems, nkc, nqb);
  }
  if (PINGPONG && wg == 0) named_sync(1, NT); /* warpgroup 1's last turn signal */
  cp_async_wait<0>();
}

} // namespace lik_cuda

#endif
