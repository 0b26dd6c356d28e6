/*
 * forward/short_docs.cuh — the MaxSim forward of short documents on sm_90a
 * tensor cores (scores only; launch.cu chooses it, short_docs_ok()): a
 * 128-token tile holds pk = floor(128 / Ld) whole documents (Ld a multiple
 * of 8 up to 64), so a 32-token document is a quarter of a tile, not half of
 * one padded with zeros, and a tile ends with one reduction for all of its
 * documents.
 *
 *   CTA        288 threads: consumer warpgroups 0 and 1, producer warp 8.
 *              Each CTA scores one group of at most 64 query rows (one
 *              query of Lq <= 64, or two of Lq <= 32: P.qpc, P.qrows) against
 *              a contiguous range of P.dpc documents (P.upr ranges per
 *              group, about one CTA per SM).
 *   producer   one thread streams tile after tile by TMA (P.tmap_d: boxes of
 *              128 bytes of features x Ld tokens x pk documents, the
 *              128-byte swizzle, features past d and documents past Nd read
 *              as zero) into nst stages; a stage's "full" transaction barrier
 *              completes with its bytes, its "empty" barrier with one arrival
 *              per warp of the consumer that read it.
 *   consumers  warpgroup c takes the tiles c, c + 2, ...: wgmma m64n128k16
 *              with the query rows as A in registers (loaded once) and the
 *              tile as B, fp32 accumulators; then the tile's epilogue:
 *     columns  column 8 nb + 2 tg + e of the tile is token t of document p
 *              (8 nb + ... = p Ld + t); a column is valid if its document is
 *              in the range and t is below the document's length and set in
 *              its d_mask (KParams.dbits); invalid columns are NaN, which
 *              fmaxf ignores (a valid -inf wins over nothing, a NaN
 *              similarity never wins: common.cuh's takes_max);
 *     maxima   each row's max over a document's columns: the thread's
 *              columns, then its quad; rows with a value and a valid query
 *              token contribute it, the others 0 (shared memory);
 *     sums     a warp per (document, query): its 32-row halves summed by a
 *              shuffle tree, the halves added in order -- the order of the
 *              one-query kernel (forward/kernel.cuh) for the same rows.
 *   Deterministic; no atomics.  One CTA per SM (nst stages of 16 KB per
 *   128 bytes of a token's row fill the shared memory).
 */
#ifndef LIK_CUDA_FORWARD_SHORT_DOCS_CUH
#define LIK_CUDA_FORWARD_SHORT_DOCS_CUH

#include "../common.cuh"
#include "../ptx.cuh"
#include "../wgmma.cuh"

namespace lik_cuda {

constexpr int SD_THREADS = 288; /* two consumer warpgroups and a producer warp */
constexpr int SD_TILE = 128;    /* tokens per tile */

/* The kernel's shape beside P: documents per tile, pipeline stages (even:
 * stage s then always serves the same consumer warpgroup). */
struct ShortDocs {
  int pk, nst;
};

/* Byte offsets of the shared memory from a 1024-byte aligned base: nst
 * stages of NA atoms (128 tokens x 128 bytes), per consumer and tile parity
 * the row contributions [16 documents][64 rows] and the documents' valid
 * tokens (64 bits each), the barriers (full, empty). */
template <int NA> struct ShortDocsSmem {
  static constexpr int STAGE = NA * SD_TILE * 128;
  int nst;
  __host__ __device__ int rows() const { return nst * STAGE; }
  __host__ __device__ int valid() const { return rows() + 2 * 2 * 16 * 64 * 4; }
  __host__ __device__ int bars() const { return valid() + 2 * 2 * 16 * 8; }
  __host__ __device__ int bytes() const { return bars() + 2 * nst * 8; }
};

/* Valid tokens of document j (Ld <= 64): below its length, and set in its
 * d_mask where it has one. */
__device__ __forceinline__ uint64_t doc_valid(const KParams &P, int64_t j) {
  const int64_t len = seq_len(P.d, j);
  uint64_t m = len >= 64 ? ~0ull : (1ull << len) - 1;
  if (P.dbits) {
    const uint32_t *w = P.dbits + j * P.dwords;
    m &= (uint64_t)__ldg(w) | (P.dwords > 1 ? (uint64_t)__ldg(w + 1) << 32 : 0ull);
  }
  return m;
}

/* Bits 8 u and 8 u + 1 of m (u = 0 .. 7) as bits 2 u and 2 u + 1: a thread's two
 * columns of each n8 block of a document, from the document's valid tokens
 * shifted by 2 tg (three shift-or-mask steps instead of a loop over blocks). */
__device__ __forceinline__ uint32_t block_pairs(uint64_t m) {
  m &= 0x0303030303030303ull;
  m = (m | m >> 6) & 0x000f000f000f000full;
  m = (m | m >> 12) & 0x000000ff000000ffull;
  return (uint32_t)(m | m >> 24) & 0xffffu;
}

/* NA: 128-byte atoms of a token's row (d <= 64 NA half features). */
template <typename T, int NA>
__global__ void __launch_bounds__(SD_THREADS, 1)
    short_docs_kernel(const __grid_constant__ KParams P, const ShortDocs S) {
  using L = ShortDocsSmem<NA>;
  constexpr int KS = 4 * NA; /* k16 steps */
  extern __shared__ unsigned char smem_raw[];
  unsigned char *sm = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const L lay{S.nst};
  const uint32_t base = smem_u32(sm), fulls = base + lay.bars(), empties = fulls + 8 * S.nst;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ld = (int)P.d.len, pk = S.pk;
  const int64_t unit = blockIdx.x % P.upr, q0 = (int64_t)(blockIdx.x / P.upr) * P.qpc;
  const int64_t jb = unit * P.dpc, je = min(P.ncand, jb + P.dpc);
  if (jb >= je) return; /* CTA-uniform */
  const int64_t ntiles = (je - jb + pk - 1) / pk;

  if (tid == 0) {
    for (int s = 0; s < S.nst; ++s) {
      bar_init(fulls + 8 * s, 1);
      bar_init(empties + 8 * s, 4);
    }
    bar_init_fence();
  }
  __syncthreads();

  if (warp == 8) { /* the producer */
    if (lane == 0) {
      const uint32_t bytes = (uint32_t)(NA * 128 * ld * pk);
      int s = 0;
      uint32_t ph = 0;
      for (int64_t i = 0; i < ntiles; ++i) {
        bar_wait(empties + 8 * s, ph ^ 1u);
        bar_expect(fulls + 8 * s, bytes);
        const uint32_t dst = base + s * L::STAGE;
#pragma unroll
        for (int a = 0; a < NA; ++a)
          tma_load_3d(dst + a * (SD_TILE * 128), &P.tmap_d, a * (128 / (int)sizeof(T)), 0,
                      (int)(jb + i * pk), fulls + 8 * s);
        if (++s == S.nst) {
          s = 0;
          ph ^= 1u;
        }
      }
    }
    return;
  }

  /* the consumers: warp w of warpgroup cw holds rows 16 w .. 16 w + 15, this
   * thread rows 16 w + g and 16 w + g + 8 (h = 0, 1) */
  const int cw = warp >> 2, w = warp & 3, g = lane >> 2, tg = lane & 3;
  const int slot = P.qrows; /* 32 or 64 rows per query */
  bool qv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = 16 * w + g + 8 * h;
    const int64_t qi = q0 + (r >> P.qshift), s = r & (slot - 1);
    bool v = qi < P.nq && s < seq_len(P.q, qi);
    if (v && P.qm.data) v = P.qm.data[mask_base(P.qm, P.q, qi) + s * P.qm.sl] != 0;
    qv[h] = v;
  }
  /* A fragments (the m16n8k16 layout): element x of step ks is row
   * 16 w + g + 8 (x & 1), features ks * 16 + 2 tg + 8 (x >> 1) and + 1;
   * zero for invalid rows (their contents are never read) and past d (a
   * multiple of 8: TMA's 16-byte rows) */
  uint32_t a[KS][4];
  {
    const T *Qp = reinterpret_cast<const T *>(P.q.data);
    const T *row[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * w + g + 8 * h;
      row[h] = qv[h] ? Qp + seq_base(P.q, q0 + (r >> P.qshift)) + (r & (slot - 1)) * P.q.sl : Qp;
    }
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int h = x & 1;
        const int64_t k = ks * 16 + 2 * tg + 8 * (x >> 1);
        uint32_t v = 0;
        if (qv[h] && k < P.q.dim) {
          if (P.fast_q) { /* 16-byte aligned rows of unit stride */
            v = __ldg(reinterpret_cast<const unsigned int *>(row[h] + k));
          } else {
            uint16_t e[2];
            memcpy(&e[0], row[h] + k * P.q.sk, 2);
            memcpy(&e[1], row[h] + (k + 1) * P.q.sk, 2);
            v = (uint32_t)e[0] | (uint32_t)e[1] << 16;
          }
        }
        a[ks][x] = v;
      }
  }

  float *rows = reinterpret_cast<float *>(sm + lay.rows()) + cw * (2 * 16 * 64);
  uint64_t *valid = reinterpret_cast<uint64_t *>(sm + lay.valid()) + cw * (2 * 16);
  const int nbpd = ld / 8; /* n8 column blocks per document */
  float acc[64];
  /* no mask and no lengths: a tile's valid columns are its documents' blocks */
  const bool plain = !P.dbits && !P.d.lens;
  /* warp 0's lane p: the valid tokens of document p of this warpgroup's
   * next tile, loaded a tile ahead (off the tile's critical path) */
  auto tile_valid = [&](int64_t i) -> uint64_t {
    const int64_t j = jb + i * pk + lane;
    return i < ntiles && lane < pk && j < je ? doc_valid(P, j) : 0ull;
  };
  uint64_t vnext = w == 0 && !plain ? tile_valid(cw) : 0ull;
  int k = 0; /* this warpgroup's tiles so far */
  for (int64_t i = cw; i < ntiles; i += 2, ++k) {
    const int b = k & 1, s = (int)(i % S.nst);
    const int64_t j0 = jb + i * pk;
    const int nvd = (int)min((int64_t)pk, je - j0); /* the tile's documents in the range */
    if (w == 0 && !plain) {
      if (lane < nvd) valid[16 * b + lane] = vnext;
      vnext = tile_valid(i + 2);
    }
    /* a stage's tiles alternate between the warpgroups only if nst is odd:
     * launch_t keeps it even, so full[s]'s parity is this warpgroup's own */
    bar_wait(fulls + 8 * s, (uint32_t)((i / S.nst) & 1));
    /* the stage's address through a lane-0 broadcast: the descriptors live
     * in uniform registers (forward/kernel.cuh) */
    const uint64_t d0 = wg_desc(__shfl_sync(0xffffffffu, base + s * L::STAGE, 0));
    wg_fence_regs<64>(acc);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
      wgmma_rs<T, SD_TILE>(acc, a[ks], wg_desc_add(d0, (ks >> 2) * (SD_TILE * 128) + (ks & 3) * 32),
                           ks > 0);
    wg_commit();
    wg_wait<0>();
    wg_fence_regs<64>(acc);
    __syncwarp();
    if (lane == 0) bar_arrive(empties + 8 * s);
    named_sync(1 + cw, 128); /* the tile's valid tokens are written */

    /* bit 2 nb + e: column 8 nb + 2 tg + e is valid */
    uint32_t vb = 0;
    if (plain) {
      const int nbits = 2 * nvd * nbpd; /* every column of the tile's documents */
      vb = nbits >= 32 ? ~0u : (1u << nbits) - 1;
    } else {
      const uint32_t keep = (1u << (2 * nbpd)) - 1; /* the document's blocks */
      for (int p = 0; p < nvd; ++p)
        vb |= (block_pairs(valid[16 * b + p] >> (2 * tg)) & keep) << (2 * nbpd * p);
    }
    /* each document's row maxima (C element e of block nb: row g + 8 (e / 2),
     * column 8 nb + 2 tg + e % 2); a document ends where its blocks do */
    float mx[2] = {CUDART_NAN_F, CUDART_NAN_F};
    int p = 0, end = nbpd;
#pragma unroll
    for (int nb = 0; nb < SD_TILE / 8; ++nb) {
      const bool v0 = (vb >> (2 * nb)) & 1u, v1 = (vb >> (2 * nb + 1)) & 1u;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        mx[h] = fmaxf(mx[h], fmaxf(v0 ? acc[4 * nb + 2 * h] : CUDART_NAN_F,
                                   v1 ? acc[4 * nb + 2 * h + 1] : CUDART_NAN_F));
      if (nb + 1 == end) { /* warp-uniform */
        if (p < nvd)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float v = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
            if (tg == 0) rows[(16 * b + p) * 64 + 16 * w + g + 8 * h] = qv[h] && v == v ? v : 0.f;
          }
        mx[0] = mx[1] = CUDART_NAN_F;
        ++p;
        end += nbpd;
      }
    }
    named_sync(1 + cw, 128); /* the row contributions are written */
    for (int t = w; t < nvd * P.qpc; t += 4) {
      const int pd = t / P.qpc, q = t % P.qpc;
      const float *r = rows + (16 * b + pd) * 64 + q * slot;
      float tot = 0.f;
      for (int half = 0; half < slot; half += 32) {
        float x = r[half + lane];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
        tot = half == 0 ? x : tot + x;
      }
      if (lane == 0 && q0 + q < P.nq) P.scores[(q0 + q) * P.ssi + (j0 + pd) * P.ssj] = tot;
    }
  }
}

} // namespace lik_cuda

#endif
