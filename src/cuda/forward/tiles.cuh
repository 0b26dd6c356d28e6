/*
 * forward/tiles.cuh — the two tile families of the tensor-core MaxSim
 * forward (the config class C of forward/kernel.cuh) and their shared-memory
 * layout.  Tiles are laid out in bytes: a 32-byte k-step is k16 of a half
 * type or k8 of tf32, with the same ldmatrix fragments.
 *
 *   MmaCfg     (sm_80+) CTA tile BQ = 32*WM query rows x BD = 8*NI*WN
 *              document tokens; warp tile 32 x 8*NI: 2 m16 tiles x NI n8
 *              tiles of mma.sync.m16n8k16 (m16n8k8.tf32 x 3 for fp32), fp32
 *              accumulators, operands from padded shared memory through
 *              ldmatrix.x4 (no bank conflicts); DENSE (sm_90+): 96-byte
 *              document rows by one bulk copy per tile, unpadded.
 *   WgCfg      (sm_90a) NWG warpgroups x MT m64 tiles of
 *              wgmma.m64nBDk16: A = the query rows in registers (loaded once
 *              per query block with ldmatrix, the mma.sync A layout), B = the
 *              document tile in shared memory in the 128-byte swizzle
 *              (wgmma.cuh), one commit group per m64 tile so the epilogue of
 *              tile 0 overlaps the MMAs of tile 1.  Half d <= 128 and,
 *              under TF32, fp32 d <= 128 (m64nBDk8.tf32).  Tiles by TMA
 *              where a tensor map describes D; then two warpgroups take
 *              turns issuing their MMAs (PINGPONG).
 *   rows       the BQ query rows are BQ / P.qrows slots of P.qrows rows:
 *              one slot (qrows = BQ) is one query block of one query; several
 *              slots (cross pairing) stack P.qpc queries, so one D tile in
 *              shared memory serves all of them.
 *   K          QREG (a row's d fits one k-chunk of KC features = 128 or 256
 *              bytes): the whole query block lives in registers as A
 *              fragments; one D tile = all of d.  Otherwise d is streamed in
 *              128-byte chunks and A comes from shared memory each k-step
 *              (the whole query block sits in shared memory: launch.cu
 *              checks that it fits).
 */
#ifndef LIK_CUDA_FORWARD_TILES_CUH
#define LIK_CUDA_FORWARD_TILES_CUH

#include "../common.cuh"

namespace lik_cuda {

/* Shared-memory layout common to both tile families: small arrays first,
 * then STAGES document tiles (aligned to ALIGN), then the query block. */
template <int BQ, int BD, int NWN, int ALIGN>
struct SmemSmall {
  static constexpr int OFF_QINV = 0;
  static constexpr int OFF_DINV = OFF_QINV + BQ * 4;
  static constexpr int OFF_REDV = OFF_DINV + BD * 4;
  static constexpr int OFF_REDI = OFF_REDV + NWN * BQ * 4;
  static constexpr int OFF_WSUM = OFF_REDI + NWN * BQ * 4;
  static constexpr int OFF_BAR = OFF_WSUM + 32 * 4; /* 8 "full" + 8 "empty" stage barriers */
  static constexpr int SMALL = ((OFF_BAR + 16 * 8) + ALIGN - 1) / ALIGN * ALIGN;
};

/* mma.sync family (sm_80+): WM x WN warps of 32 x 8*NI warp tiles, document
 * tiles in padded rows (conflict-free ldmatrix); MINB_ CTAs per SM for the
 * register budget (0: 2, or 1 for 256 threads and more).  DENSE_ (sm_90+,
 * rows of exactly RB bytes in global memory): a tile is one bulk copy into
 * unpadded rows (for 96-byte rows a 2-way ldmatrix conflict, cheap where
 * the tile is memory-bound; cp.async tiles streamed 3.0-3.3 TB/s in a copy
 * test, bulk copies 3.7-3.9: docs/cuda.md, v11). */
template <typename T_, int WM, int WN, int NI_, int KC_, bool QREG, int MINB_ = 0,
          bool DENSE_ = false>
struct MmaCfg : SmemSmall<32 * WM, 8 * NI_ * WN, WN, 128> {
  using T = T_;
  static constexpr bool WG = false, QR = QREG, DENSE = DENSE_, TMA = false;
  static constexpr int NT = WM * WN * 32;
  static constexpr int BQ = 32 * WM;
  static constexpr int NI = NI_, KC = KC_;
  static constexpr int WC = 8 * NI; /* document tokens per warp */
  static constexpr int BD = WC * WN;
  static constexpr int NWN = WN;
  static constexpr int MI = 2, MSTEP = 16; /* m16 tiles per warp, row step */
  static constexpr int RB = KC * (int)sizeof(T); /* bytes of a row's k-chunk */
  static constexpr int KS = RB / 32;             /* 32-byte k-steps */
  static constexpr int CPR = RB / 16;
  static constexpr int RBP = RB + 16; /* padded row (the query block) */
  static constexpr int ROWB = DENSE ? RB : RBP; /* bytes between document rows */
  static constexpr int STAGE_BYTES = BD * ROWB;
  static constexpr int MINB = MINB_ ? MINB_ : NT >= 256 ? 1 : 2;
  __device__ static int row0(int warp) { return (warp % WM) * 32; }
  __device__ static int wn_of(int warp) { return warp / WM; }
  __device__ static uint32_t doff(int r, int ch) { return (uint32_t)(r * ROWB + (ch << 4)); }
  static int smem_bytes(int stages, int nkc) {
    return MmaCfg::SMALL + stages * STAGE_BYTES + (QREG ? 1 : nkc) * BQ * RBP;
  }
};

/* wgmma family (sm_90a): NWG warpgroups, each MT m64 tiles x BN tokens
 * (wgmma.m64nBNk16 of a half type, m64nBNk8.tf32 of fp32 under TF32: the
 * same 32 bytes per k-step; A = query rows in registers, B = document tile
 * in the 128-byte swizzle; BN = 64, 128, or 104 with TMA: a multiple of 8
 * rows, so the tile stays 1024-byte aligned); rows of RB = KC * sizeof(T)
 * = 128, 256 or (fp32, MT = 1) 512 bytes, query block in registers.  TMA_:
 * document tiles by TMA from P.tmap_d (one thread, no per-thread address
 * work; the query block's loads no longer drain the ring). */
template <typename T_, int MT, int BN, int KC_, int NWG, bool TMA_ = false>
struct WgCfg : SmemSmall<64 * MT * NWG, BN, 1, 1024> {
  using T = T_;
  static constexpr bool WG = true, QR = true, DENSE = false, TMA = TMA_;
  static constexpr int NT = 128 * NWG;
  static constexpr int BQ = 64 * MT * NWG;
  static constexpr int NI = BN / 8, KC = KC_;
  static constexpr int WC = BN, BD = BN, NWN = 1;
  static constexpr int MI = MT, MSTEP = 64;
  static constexpr int RB = KC * (int)sizeof(T); /* bytes of a row */
  static constexpr int KS = RB / 32;             /* 32-byte k-steps */
  static constexpr int CPR = RB / 16;
  static constexpr int RBP = RB + 16; /* query block rows (ldmatrix) */
  static constexpr int ROWB = 128;    /* document rows inside a 128-byte atom */
  static constexpr int STAGE_BYTES = BD * RB;
  static constexpr int MINB = NWG == 1 ? 2 : 1;
  static_assert(BQ <= NT, "one thread per query row in the reductions");
  __device__ static int row0(int warp) { return (warp >> 2) * 64 * MT + (warp & 3) * 16; }
  __device__ static int wn_of(int) { return 0; }
  __device__ static uint32_t doff(int r, int ch) {
    return (uint32_t)((ch >> 3) * (BD * 128) + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
  }
  static int smem_bytes(int stages, int) {
    return WgCfg::SMALL + stages * STAGE_BYTES + BQ * RBP + 1024 /* alignment */;
  }
};

} // namespace lik_cuda

#endif
