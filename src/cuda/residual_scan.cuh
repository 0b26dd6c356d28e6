/*
 * residual_scan.cuh — the full residual scan's fast kernels (residual.cu
 * picks them where they apply: scan_fits, scan_layout): residual MaxSim of
 * d = 128 tokens coded at nbits 2 or 4 against half-type queries under
 * normalize, without an argmax.  residual_scan_kernel, first: decoded tokens
 * never pass through shared memory, each thread decodes straight into its
 * mma.sync operand registers.  residual_scan_ws_kernel, at the end: on
 * sm_90a, stacked queries in groups of 128 rows, the same decode by two
 * warpgroups into shared tiles that a third multiplies on wgmma by one or
 * two resident groups.
 *
 * One CTA of 4 warps; each warp streams its documents (gw, gw + warps,
 * ...) as one sequence of 16-token tiles.  In an m16n8k16 product with the
 * document as B (k = dimensions, n = 8 tokens), thread (g, t) = (lane / 4,
 * lane % 4) holds token g's MMA dimensions {2t, 2t+1, 2t+8, 2t+9} of each
 * 16-dimension k-step.  The scan assigns them so that every load is whole
 * sectors: thread t owns the 8-dimension chunks c = 8 (t / 2) + 2m + t % 2
 * (m = 0 .. 3), chunk m's dimensions 4h .. 4h+3 being k-step 2m + h's
 * four.  A token's four lanes then read, per 16-byte centroid load, two
 * whole 32-byte sectors of its fp16 row.  Lanes t, t ^ 1's chunks' bytes
 * interleave in one 16-byte (nbits 2; 32 at nbits 4) piece of the residual
 * row: each loads half of it, and two shuffles give each its 4 words.  The
 * query is stored in shared memory under the same permutation
 * (load_query<..., true>, scan_pos), so the dots are those of the
 * unpermuted vectors.  A k-step's operand pair is the centroid's fp16 pair
 * plus the weights of one byte (nbits 2: 4 dimensions) or two (nbits 4: 2
 * each) looked up in a shared table of the 256 byte values, replicated per
 * lane (16 copies of 8-byte entries / 32 of 4-byte ones: conflict-free).
 * The sums are residual_maxsim_kernel's fp16 values (centroid + weight in
 * fp16), so the scores are its scores up to the order of fp32 sums and the
 * rounding of 1 / ||x|| (rsqrtf).
 *
 * 1 / ||x||: the squares are summed on the tensor cores too: the two n8
 * tiles' operands of a k-step are, read as an A operand, the 16 x 16 block
 * X of the tile's tokens, so X . X_n^T (n = 0, 1) accumulates the tokens'
 * Gram blocks in fp32 (products of fp16 values are exact), whose diagonals
 * are the squared norms; shuffles bring each column its norm.  A masked
 * token (past the length, or a code outside [0, C): never read) gets a NaN
 * scale, which fmaxf never keeps.  Per query row a running max in registers;
 * at the end of a document quad shuffles, the warp's rows in shared memory
 * and lane q summing query q's rows in order (deterministic; a row with no
 * token scores 0).
 *
 * The next tile's bytes are loaded before the current tile's products, its
 * codes one tile earlier still, across document boundaries.  Up to 16 query
 * rows (MT = 1) keep their A operands in registers; more are read by
 * ldmatrix per k-step.  Where its time goes: bench/RESULTS.md, "the full
 * scan" (issue 29).
 */
#ifndef LIK_CUDA_RESIDUAL_SCAN_CUH
#define LIK_CUDA_RESIDUAL_SCAN_CUH

#include "residual.cuh"
#include "wgmma.cuh"

namespace lik_cuda {
namespace res {

constexpr int SCAN_D = 128;     /* dimensions */
constexpr int SCAN_LDQ = 136;   /* query row stride in halves (272 bytes: conflict-free ldmatrix) */
constexpr int SCAN_TABLE = 32768; /* bytes of the replicated byte table */

/* The byte table: for nbits 2, raw byte b's 4 dimensions' weights (fp16,
 * in dimension order, the layout folded in) at bytes (b * 16 + c) * 8, copy
 * c = 0 .. 15; for nbits 4, its 2 dimensions' at (b * 32 + c) * 4, c = 0 ..
 * 31.  A lane reads copy lane % 16 (lane): its banks are its own. */
template <int NBITS>
__device__ void scan_table(const KCodec &c, const float *wv, uint32_t *tab) {
  constexpr int CPB = 8 / NBITS, COPIES = NBITS == 2 ? 16 : 32, WORDS = CPB / 2;
  for (int e = threadIdx.x; e < 256 * COPIES; e += blockDim.x) {
    const uint32_t b = e / COPIES, byte = c.colbert ? __brev(b) >> 24 : b;
#pragma unroll
    for (int w = 0; w < WORDS; w++) {
      const __half2 h = __floats2half2_rn(wv[(byte >> (2 * w * NBITS)) & ((1u << NBITS) - 1u)],
                                          wv[(byte >> ((2 * w + 1) * NBITS)) & ((1u << NBITS) - 1u)]);
      tab[e * WORDS + w] = as_word(h);
    }
  }
  __syncthreads();
}

/* What a thread loads of one token of a tile: its 4 chunks' centroid
 * values (fp16 pairs, k-step j's at words 2j, 2j + 1) and its half of the
 * residual piece (scan_words). */
template <int NBITS>
struct ScanTok {
  uint4 cent[4];
  uint32_t res[NBITS];
};

/* A warp's position in its stream of tiles: document j (its length len),
 * tile tt.  next: the following tile, past empty documents (j >= count: the
 * stream's end, never loaded). */
struct ScanCursor {
  int64_t j, len, tt;
};

__device__ __forceinline__ void scan_next(const KRes &P, int64_t nw, ScanCursor &c) {
  if (++c.tt * 16 < c.len) return;
  do {
    c.j += nw;
    c.tt = 0;
    c.len = c.j < P.t.count ? doc_len(P.t, c.j) : 1;
  } while (c.len == 0);
}

/* Token 8n + g of the cursor's tile: its code, -1 past the stream, the
 * length or outside [0, C); roff: its residual row's offset. */
__device__ __forceinline__ int scan_code(const KRes &P, const ScanCursor &c, int n, int g,
                                         int64_t &roff) {
  const int64_t l = 16 * c.tt + 8 * n + g;
  if (c.j >= P.t.count || l >= c.len) return -1;
  const longlong2 pos = tok_pos(P.t, c.j, l);
  const int64_t code = code_at(P.t, pos.x);
  roff = pos.y;
  return code < 0 || code >= P.c.ncent ? -1 : (int)code;
}

template <int NBITS>
__device__ __forceinline__ void scan_fetch(const KRes &P, int code, int64_t roff, int tq,
                                           ScanTok<NBITS> &x) {
  if (code < 0) return;
  const uint4 *cp = (const uint4 *)((const __half *)P.c.cent + (int64_t)code * P.c.cent_sc) +
                    8 * (tq >> 1) + (tq & 1);
#pragma unroll
  for (int m = 0; m < 4; m++) x.cent[m] = __ldg(cp + m * 2);
  const uint8_t *rp = P.t.res + roff + 4 * NBITS * tq; /* byte 4 nbits t: half t % 2 of piece t / 2 */
  if constexpr (NBITS == 2) {
    const uint2 r = __ldg((const uint2 *)rp);
    x.res[0] = r.x, x.res[1] = r.y;
  } else {
    const uint4 r = __ldg((const uint4 *)rp);
    x.res[0] = r.x, x.res[1] = r.y, x.res[2] = r.z, x.res[3] = r.w;
  }
}

/* One step of a warp's tile stream: the fetched tile becomes current
 * (ccode: its codes), the next one's bytes are fetched, and the cursor moves
 * `steps` tiles on to read the codes of the one after. */
template <int NBITS>
__device__ __forceinline__ void scan_shift(const KRes &P, int64_t nw, int steps, int g, int tq,
                                           ScanCursor &cc, int (&ccode)[2], int (&code)[2],
                                           int (&ncode)[2], int64_t (&roff)[2],
                                           ScanTok<NBITS> (&cur)[2], ScanTok<NBITS> (&nxt)[2]) {
#pragma unroll
  for (int n = 0; n < 2; n++) {
    cur[n] = nxt[n];
    ccode[n] = code[n];
    code[n] = ncode[n];
    scan_fetch<NBITS>(P, code[n], roff[n], tq, nxt[n]);
  }
  for (int s = 0; s < steps; s++) scan_next(P, nw, cc);
#pragma unroll
  for (int n = 0; n < 2; n++) ncode[n] = scan_code(P, cc, n, g, roff[n]);
}

/* The 4 residual words of a thread's chunks, word m holding chunk m's
 * bytes (nbits 2: bytes 2 (t % 2), + 1 of the piece's word m; nbits 4: all
 * 4 bytes of its word 2m + t % 2), from its half of the piece and its
 * partner's (lane ^ 1; every lane takes part). */
template <int NBITS>
__device__ __forceinline__ void scan_words(const ScanTok<NBITS> &x, int tq, uint32_t (&rw)[4]) {
  const bool odd = tq & 1;
  uint32_t s0, s1;
  if constexpr (NBITS == 2) {
    s0 = x.res[0], s1 = x.res[1];
  } else {
    s0 = odd ? x.res[0] : x.res[1];
    s1 = odd ? x.res[2] : x.res[3];
  }
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, 1), r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
  if constexpr (NBITS == 2) {
    rw[0] = odd ? r0 : x.res[0], rw[1] = odd ? r1 : x.res[1];
    rw[2] = odd ? x.res[0] : r0, rw[3] = odd ? x.res[1] : r1;
  } else {
    rw[0] = odd ? r0 : x.res[0], rw[1] = odd ? r1 : x.res[2];
    rw[2] = odd ? x.res[1] : r0, rw[3] = odd ? x.res[3] : r1;
  }
}

/* k-step j = 2m + h's B operand of a fetched token: centroid + weights as
 * fp16 pairs; chunk m's dimensions 4h .. 4h+3 are, in word m of scan_words,
 * byte 2 (t % 2) + h (nbits 2) or bytes 2h, 2h + 1 (nbits 4). */
template <int NBITS>
__device__ __forceinline__ void scan_operand(const ScanTok<NBITS> &x, const uint32_t (&rw)[4],
                                             uint32_t tab_lane, int tq, int j, uint32_t &b0,
                                             uint32_t &b1) {
  const uint32_t *cw = (const uint32_t *)x.cent, word = rw[j >> 1];
  const int h = j & 1;
  uint32_t w0, w1;
  if constexpr (NBITS == 2) {
    const uint2 w = lds64(tab_lane + (__byte_perm(word, 0, 0x4440 | (2 * (tq & 1) + h)) << 7));
    w0 = w.x;
    w1 = w.y;
  } else {
    w0 = lds32(tab_lane + (__byte_perm(word, 0, 0x4440 | (2 * h)) << 7));
    w1 = lds32(tab_lane + (__byte_perm(word, 0, 0x4440 | (2 * h + 1)) << 7));
  }
  b0 = as_word(__hadd2(as_pair<__half2>(cw[2 * j]), as_pair<__half2>(w0)));
  b1 = as_word(__hadd2(as_pair<__half2>(cw[2 * j + 1]), as_pair<__half2>(w1)));
}

/* Resident CTAs the registers are sized for. */
template <int MT>
constexpr int scan_min_ctas() {
  return MT == 8 ? 2 : 3;
}

template <int NBITS, int MT>
__global__ void __launch_bounds__(128, scan_min_ctas<MT>()) residual_scan_kernel(KRes P) {
  constexpr int QB = 16 * MT;
  constexpr bool AREG = MT == 1; /* A operands held in registers */
  extern __shared__ __align__(16) unsigned char smem[];
  float *wv = (float *)smem;
  uint32_t *tab = (uint32_t *)(smem + P.off_wt);
  __half *qs = (__half *)(smem + P.off_q);
  load_weights(P.c, wv);
  scan_table<NBITS>(P.c, wv, tab);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane / 4, tq = lane % 4;
  float *rowv = (float *)(smem + P.off_row) + warp * QB;
  const uint32_t tab_lane =
      smem_u32(tab) + (NBITS == 2 ? (uint32_t)(lane & 15) * 8u : (uint32_t)lane * 4u);
  const uint32_t qs_a = smem_u32(qs);
  const int qpg = P.qpg, qslot = P.qslot;
  const int64_t nqb = (P.lq + qslot - 1) / qslot, groups = (P.nq + qpg - 1) / qpg;
  const int64_t nw = (int64_t)gridDim.x * 4, gw = (int64_t)blockIdx.x * 4 + warp;
  uint32_t areg[AREG ? MT : 1][AREG ? 8 : 1][4];
  for (int64_t blk = 0; blk < groups * nqb; blk++) { /* query group i, its block qb */
    const int64_t i = blk / nqb, qb = blk % nqb, r0 = qb * qslot;
    __syncthreads();
    load_query<__half, QB, true>(P, qpg, qslot, i, r0, qs);
    __syncthreads();
    if constexpr (AREG)
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int k = 0; k < 8; k++) {
          const int row = mt * 16 + (lane / 8 % 2) * 8 + lane % 8, kk = 16 * k + (lane / 16) * 8;
          ldsm_x4(qs_a + (uint32_t)(row * SCAN_LDQ + kk) * 2u, areg[mt][k][0], areg[mt][k][1],
                  areg[mt][k][2], areg[mt][k][3]);
        }
    /* the warp's documents gw, gw + nw, ... as one stream of 16-token
     * tiles: codes two tiles ahead of the products, bytes one */
    ScanCursor cc{gw - nw, 0, -1};
    int64_t roff[2] = {0, 0};
    int code[2], ncode[2];
    ScanTok<NBITS> cur[2], nxt[2];
    scan_next(P, nw, cc);
#pragma unroll
    for (int n = 0; n < 2; n++) {
      code[n] = scan_code(P, cc, n, g, roff[n]);
      scan_fetch<NBITS>(P, code[n], roff[n], tq, nxt[n]);
    }
    scan_next(P, nw, cc);
#pragma unroll
    for (int n = 0; n < 2; n++) ncode[n] = scan_code(P, cc, n, g, roff[n]);
    for (int64_t j = gw; j < P.t.count; j += nw) {
      const int64_t ntile = (doc_len(P.t, j) + 15) / 16;
      float best[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) best[mt][0] = best[mt][1] = -INFINITY;
      for (int64_t tt = 0; tt < ntile; tt++) {
        int ccode[2];
        scan_shift<NBITS>(P, nw, 1, g, tq, cc, ccode, code, ncode, roff, cur, nxt);
        uint32_t rw[2][4];
#pragma unroll
        for (int n = 0; n < 2; n++) scan_words<NBITS>(cur[n], tq, rw[n]);
        float acc[MT][2][4], gram[2][4];
#pragma unroll
        for (int n = 0; n < 2; n++) {
#pragma unroll
          for (int e = 0; e < 4; e++) gram[n][e] = 0.f;
#pragma unroll
          for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mt][n][e] = 0.f;
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
          uint32_t b[2][2];
#pragma unroll
          for (int n = 0; n < 2; n++) {
            if (ccode[n] >= 0) scan_operand<NBITS>(cur[n], rw[n], tab_lane, tq, k, b[n][0], b[n][1]);
            else b[n][0] = b[n][1] = 0u;
          }
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            uint32_t a[4];
            if constexpr (AREG) {
#pragma unroll
              for (int x = 0; x < 4; x++) a[x] = areg[mt][k][x];
            } else {
              const int row = mt * 16 + (lane / 8 % 2) * 8 + lane % 8, kk = 16 * k + (lane / 16) * 8;
              ldsm_x4(qs_a + (uint32_t)(row * SCAN_LDQ + kk) * 2u, a[0], a[1], a[2], a[3]);
            }
#pragma unroll
            for (int n = 0; n < 2; n++) mma16816<__half>(acc[mt][n], a, b[n]);
          }
          const uint32_t x[4] = {b[0][0], b[1][0], b[0][1], b[1][1]}; /* the tile's 16 tokens as A */
#pragma unroll
          for (int n = 0; n < 2; n++) mma16816<__half>(gram[n], x, b[n]);
        }
        /* token g's (and 8 + g's) squared norm sits at lane (g, g / 2);
         * column 2tq + e of tile n reads lane 9 tq + 4 e */
        float sc[2];
#pragma unroll
        for (int n = 0; n < 2; n++) {
          const float ss = g & 1 ? gram[n][2 * n + 1] : gram[n][2 * n];
          sc[n] = ccode[n] >= 0 ? rsqrtf(fmaxf(ss, (float)(LIK_NORM_EPS * LIK_NORM_EPS)))
                                : __int_as_float(0x7fffffff);
        }
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
          for (int e = 0; e < 2; e++) {
            const float s = __shfl_sync(0xffffffffu, sc[n], 9 * tq + 4 * e);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
              for (int h = 0; h < 2; h++) best[mt][h] = fmaxf(best[mt][h], acc[mt][n][2 * h + e] * s);
          }
      }
      /* the document's rows: quad maxima, then each query's rows summed in
       * order by lane q (a row with no token: 0) */
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          float v = best[mt][h];
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
          v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
          if (tq == 0) rowv[mt * 16 + h * 8 + g] = v == -INFINITY ? 0.f : v;
        }
      __syncwarp();
      if (lane < qpg && i * qpg + lane < P.nq) {
        float score = 0.f;
        for (int r = 0; r < qslot && r0 + r < P.lq; r++) score += rowv[lane * qslot + r];
        float *out = P.scores + (i * qpg + lane) * P.ssi + j * P.ssj;
        *out = qb ? *out + score : score;
      }
      __syncwarp();
    }
  }
}


/* ---- the warp-specialised scan: stacked queries on wgmma -------------------
 *
 * residual_scan_ws_kernel<NBITS, G> (sm_90a): stacked queries of Lq <= 64
 * filling SCAN_WS_N = 128 rows a group, G groups (query blocks) resident at
 * once, so that each token is decoded once for G x 128 rows (G = 2 where
 * the call has two groups or more; residual.cu's scan_layout).  A CTA is
 * SCAN_WS_DEC + 1 warpgroups and streams 4 document streams w = 0 .. 3
 * (documents gw, gw + nw, .. as 16-token tiles).  Warp w of decoder
 * warpgroup d < SCAN_WS_DEC decodes stream w's tiles d, d + SCAN_WS_DEC, ..
 * as residual_scan_kernel's warps do (codes two of its tiles ahead, bytes
 * one), into ring d of SCAN_WS_STAGES shared 64-token A tiles (stream w:
 * rows 16w .. 16w + 15), with the tokens' scales and each stream's
 * (document, last tile).  The last warpgroup multiplies the A tiles, the
 * rings in turn (the streams' tile order), by the G query blocks (B,
 * resident) on wgmma: m64n128k16 for one block, m64n64k16 sub-blocks for
 * two (one 32-register accumulator through them in turn, beside the 64
 * registers of their running maxima): the decode (ALU / LSU) and the
 * products (tensor) overlap.  Consumer warp w's accumulator rows are stream
 * w's tokens, so its running maxima, document ends and per-query sums are
 * residual_scan_kernel's.  A decoder thread stores its 32 halves of a token
 * as 4 x 16 bytes: K position 32 t + 4 j + 2 r + h holds its k-step j
 * register r half h (scan_wmap; the query is stored under the same map, so
 * the dots are those of the unpermuted vectors), in the 128-byte swizzle of
 * wg_desc (two 64-dimension atoms).  Full / empty mbarriers per stage;
 * every stream runs the CTA's longest stream's tiles (past its end: masked
 * tiles, scale NaN, never a max). */
constexpr int SCAN_WS_DEC = 2;    /* decoder warpgroups (rings) */
constexpr int SCAN_WS_STAGES = 2;
constexpr int SCAN_WS_N = 128;                /* query rows: wgmma's N */
constexpr int SCAN_WS_TILE = 64 * SCAN_D * 2; /* an A tile: 64 tokens x 256 bytes */
constexpr int SCAN_WS_META = 64 * 4 + 4 * 16; /* scales [64], (document, last) per warp */
static_assert(SCAN_WS_N * SCAN_LDQ * 2 <= SCAN_WS_DEC * SCAN_WS_STAGES * SCAN_WS_TILE,
              "the query is staged in the ring");

constexpr int SCAN_WS_G = 2;                  /* query blocks a CTA holds, at most */

/* Shared memory past its 1024-byte aligned start: A tiles [2][S], the G
 * query blocks, metadata [2][S], full / empty barriers [2][S] each, the
 * consumer warps' rows [4][N], the rings' tile counts, the weights, the
 * byte table. */
constexpr int64_t scan_ws_smem(int g) {
  return 1024 + SCAN_WS_DEC * SCAN_WS_STAGES * (SCAN_WS_TILE + SCAN_WS_META + 2 * 8) +
         g * SCAN_WS_N * SCAN_D * 2 + 4 * SCAN_WS_N * 4 + 16 + 256 * 4 + SCAN_TABLE;
}

/* The wgmma K position of MMA position p = 16 j + 8 r + 2 t + h (see
 * above): 32 t + 4 j + 2 r + h. */
__device__ __forceinline__ int scan_wmap(int p) {
  const int j = p >> 4, r = (p >> 3) & 1, t = (p >> 1) & 3, h = p & 1;
  return 32 * t + 4 * j + 2 * r + h;
}

/* Byte offset of K position p of row `row` in a K-major tile of `rows` rows
 * in wg_desc's 128-byte swizzle (64 halves an atom, atoms rows * 128 apart). */
__device__ __forceinline__ uint32_t wg_off(int rows, int row, int p) {
  return (uint32_t)((p >> 6) * rows * 128 + row * 128 + ((((p >> 3) & 7) ^ (row & 7)) << 4) +
                    (p & 7) * 2);
}

template <int NBITS, int G>
__global__ void __launch_bounds__(128 * (SCAN_WS_DEC + 1), 1) residual_scan_ws_kernel(KRes P) {
  constexpr int N = SCAN_WS_N, S = SCAN_WS_STAGES, ND = SCAN_WS_DEC;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *atile = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  unsigned char *qtile = atile + ND * S * SCAN_WS_TILE;
  unsigned char *meta = qtile + G * N * SCAN_D * 2;
  uint64_t *bars = (uint64_t *)(meta + ND * S * SCAN_WS_META); /* full [ND][S], empty [ND][S] */
  float *rowv = (float *)(bars + 2 * ND * S);
  int *tiles = (int *)(rowv + 4 * N); /* [0]: the CTA's longest stream's tiles */
  float *wv = (float *)(tiles + 4);
  uint32_t *tab = (uint32_t *)(wv + 256);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane / 4, tq = lane % 4;
  const int w = warp & 3, d = warp >> 2; /* d = ND: the consumer warpgroup */
  /* stream w of the CTA: documents gw, gw + nw, ..; decoder warp w of
   * warpgroup d decodes its tiles d, d + ND, .. into ring d */
  const int64_t nw = (int64_t)gridDim.x * 4, gw = (int64_t)blockIdx.x * 4 + w;
  if (threadIdx.x == 0) {
    for (int b = 0; b < ND * S; b++) {
      lik_cuda::bar_init(smem_u32(&bars[b]), 128);         /* full: a decoder warpgroup */
      lik_cuda::bar_init(smem_u32(&bars[ND * S + b]), 128); /* empty: the consumers */
    }
    lik_cuda::bar_init_fence();
    tiles[0] = 0;
  }
  __syncthreads();
  if (d == 0) { /* the stream's tiles (the CTA runs its longest); its empty documents score 0 */
    int64_t n = 0;
    for (int64_t j = gw + lane * nw; j < P.t.count; j += 32 * nw) {
      const int64_t len = doc_len(P.t, j);
      n += (len + 15) / 16;
      if (len == 0)
        for (int64_t q = 0; q < P.nq; q++) P.scores[q * P.ssi + j * P.ssj] = 0.f;
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) n += __shfl_xor_sync(0xffffffffu, n, o);
    if (lane == 0) atomicMax(&tiles[0], (int)min(n, (int64_t)INT32_MAX));
  }
  load_weights(P.c, wv); /* its barrier also publishes tiles[] */
  scan_table<NBITS>(P.c, wv, tab);
  const int ntiles = tiles[0]; /* ring d runs the stream's tiles d, d + ND, .. */
  const uint32_t tab_lane =
      smem_u32(tab) + (NBITS == 2 ? (uint32_t)(lane & 15) * 8u : (uint32_t)lane * 4u);
  const int qpg = P.qpg, qslot = P.qslot;
  const int64_t groups = (P.nq + qpg - 1) / qpg;
  /* the tiles through each ring so far: fd (a decoder's own), f[r] (the consumers') */
  int64_t fd = 0, f[ND] = {};
  for (int64_t i = 0; i < groups; i += G) {
    /* the query blocks of groups i .. i + G - 1, each as residual_scan_kernel's
     * (permuted by scan_pos, in the free ring), then each row's MMA position p
     * at scan_wmap(p), swizzled (a group past the last: zeros, no scores) */
    __half *qs = (__half *)atile;
#pragma unroll
    for (int h = 0; h < G; h++) {
      __syncthreads();
      if (warp < 4) load_query<__half, N, true>(P, qpg, qslot, i + h, 0, qs);
      __syncthreads();
      unsigned char *qt = qtile + h * N * SCAN_D * 2;
      for (int e = threadIdx.x; e < N * SCAN_D; e += blockDim.x) {
        const int r = e / SCAN_D, p = e % SCAN_D;
        *(__half *)(qt + wg_off(N, r, scan_wmap(p))) = qs[r * SCAN_LDQ + p];
      }
    }
    lik_cuda::fence_proxy_async(); /* st.shared wrote B; wgmma reads it */
    __syncthreads();
    if (d < ND) {
      ScanCursor cc{gw - nw, 0, -1};
      int64_t roff[2] = {0, 0}, mj[3];
      int code[2], ncode[2], ccode[2];
      bool ml[3];
      ScanTok<NBITS> cur[2], nxt[2];
      for (int s = 0; s <= d; s++) scan_next(P, nw, cc);
#pragma unroll
      for (int n = 0; n < 2; n++) {
        code[n] = scan_code(P, cc, n, g, roff[n]);
        scan_fetch<NBITS>(P, code[n], roff[n], tq, nxt[n]);
      }
      mj[1] = cc.j, ml[1] = (cc.tt + 1) * 16 >= cc.len;
      for (int s = 0; s < ND; s++) scan_next(P, nw, cc);
#pragma unroll
      for (int n = 0; n < 2; n++) ncode[n] = scan_code(P, cc, n, g, roff[n]);
      mj[2] = cc.j, ml[2] = (cc.tt + 1) * 16 >= cc.len;
      for (int it = d; it < ntiles; it += ND, fd++) {
        const int st = (int)(fd % S), b = d * S + st;
        const uint32_t ph = (uint32_t)(fd / S) & 1u;
        scan_shift<NBITS>(P, nw, ND, g, tq, cc, ccode, code, ncode, roff, cur, nxt);
        mj[0] = mj[1], ml[0] = ml[1], mj[1] = mj[2], ml[1] = ml[2];
        mj[2] = cc.j, ml[2] = (cc.tt + 1) * 16 >= cc.len;
        uint32_t rw[2][4];
#pragma unroll
        for (int n = 0; n < 2; n++) scan_words<NBITS>(cur[n], tq, rw[n]);
        lik_cuda::bar_wait(smem_u32(&bars[ND * S + b]), ph ^ 1u); /* the consumers freed it */
        unsigned char *at = atile + b * SCAN_WS_TILE;
        float gram[2][4] = {};
#pragma unroll
        for (int m = 0; m < 4; m++) { /* k-steps 2m, 2m + 1: K 32 tq + 8 m .. */
          uint32_t v[2][4];
#pragma unroll
          for (int h = 0; h < 2; h++) {
            uint32_t bk[2][2];
#pragma unroll
            for (int n = 0; n < 2; n++) {
              if (ccode[n] >= 0)
                scan_operand<NBITS>(cur[n], rw[n], tab_lane, tq, 2 * m + h, bk[n][0], bk[n][1]);
              else bk[n][0] = bk[n][1] = 0u;
              v[n][2 * h] = bk[n][0];
              v[n][2 * h + 1] = bk[n][1];
            }
            const uint32_t x[4] = {bk[0][0], bk[1][0], bk[0][1], bk[1][1]}; /* as A: Gram */
#pragma unroll
            for (int n = 0; n < 2; n++) mma16816<__half>(gram[n], x, bk[n]);
          }
#pragma unroll
          for (int n = 0; n < 2; n++)
            sts128(smem_u32(at + wg_off(64, 16 * w + 8 * n + g, 32 * tq + 8 * m)), v[n]);
        }
        unsigned char *mt = meta + b * SCAN_WS_META;
#pragma unroll
        for (int n = 0; n < 2; n++) { /* token g's squared norm at lane (g, g / 2) */
          const float ss = g & 1 ? gram[n][2 * n + 1] : gram[n][2 * n];
          const float sc = ccode[n] >= 0 ? rsqrtf(fmaxf(ss, (float)(LIK_NORM_EPS * LIK_NORM_EPS)))
                                         : __int_as_float(0x7fffffff);
#pragma unroll
          for (int e = 0; e < 2; e++) { /* token 2 tq + e: lane 9 tq + 4 e's */
            const float s = __shfl_sync(0xffffffffu, sc, 9 * tq + 4 * e);
            if (g == 0) ((float *)mt)[16 * w + 8 * n + 2 * tq + e] = s;
          }
        }
        if (lane == 0) {
          *(int64_t *)(mt + 256 + 16 * w) = mj[0];
          *(int *)(mt + 256 + 16 * w + 8) = ml[0];
        }
        lik_cuda::fence_proxy_async(); /* this thread's A rows, for wgmma */
        lik_cuda::bar_arrive(smem_u32(&bars[b]));
      }
    } else {
      /* the G blocks' columns in sub-blocks of NS (one accumulator of NS / 2
       * registers at a time); best: sub-block h's running maxima, columns
       * NS h + 8 c + 2 tq + e, rows g, g + 8 */
      constexpr int NS = G == 1 ? N : 64, NH = G * N / NS;
      float best[NH][NS / 8][2];
#pragma unroll
      for (int h = 0; h < NH; h++)
#pragma unroll
        for (int c = 0; c < NS / 8; c++) best[h][c][0] = best[h][c][1] = -INFINITY;
      const uint64_t bdesc = lik_cuda::wg_desc(smem_u32(qtile));
      float *rv = rowv + w * N;
      for (int it0 = 0; it0 < ntiles; it0 += ND) {
#pragma unroll
        for (int r = 0; r < ND; r++) { /* the stream's tile it0 + r: ring r */
          if (it0 + r >= ntiles) break;
          const int st = (int)(f[r] % S), b = r * S + st;
          const uint32_t ph = (uint32_t)(f[r] / S) & 1u;
          f[r]++;
          lik_cuda::bar_wait(smem_u32(&bars[b]), ph);
          const uint64_t adesc = lik_cuda::wg_desc(smem_u32(atile + b * SCAN_WS_TILE));
          const unsigned char *mt = meta + b * SCAN_WS_META;
          const float s0 = ((const float *)mt)[16 * w + g], s1 = ((const float *)mt)[16 * w + 8 + g];
          const int64_t j = *(const int64_t *)(mt + 256 + 16 * w);
          const bool end = *(const int *)(mt + 256 + 16 * w + 8) && j < P.t.count; /* warp-uniform */
#pragma unroll
          for (int h = 0; h < NH; h++) { /* rows NS h' .. of block h / (N / NS), h' = h % (N / NS) */
            /* block h's descriptor, opaque: not hoisted (G x 8 live descriptors) */
            uint64_t bd =
                lik_cuda::wg_desc_add(bdesc, h / (N / NS) * N * SCAN_D * 2 + h % (N / NS) * NS * 128);
            if (G > 1) asm volatile("" : "+l"(bd));
            float acc[NS / 2];
            lik_cuda::wg_fence();
#pragma unroll
            for (int k = 0; k < 8; k++) /* K 16 k ..: atom k / 4, 32 bytes a k-step in it */
              lik_cuda::wgmma_ss<__half, NS>(
                  acc, lik_cuda::wg_desc_add(adesc, (k >> 2) * 64 * 128 + (k & 3) * 32),
                  lik_cuda::wg_desc_add(bd, (k >> 2) * N * 128 + (k & 3) * 32), k > 0);
            lik_cuda::wg_commit();
            lik_cuda::wg_wait<0>();
            lik_cuda::wg_fence_regs<NS / 2>(acc);
            if (h == NH - 1) lik_cuda::bar_arrive(smem_u32(&bars[ND * S + b]));
            /* rows g, g + 8; columns 8 c + 2 tq, + 1 (past the stream's end: scales
             * NaN, never a max) */
#pragma unroll
            for (int c = 0; c < NS / 8; c++)
#pragma unroll
              for (int e = 0; e < 2; e++)
                best[h][c][e] = fmaxf(best[h][c][e], fmaxf(acc[4 * c + e] * s0, acc[4 * c + 2 + e] * s1));
            if (!end) continue;
            /* document j ends: each column's max over the warp's rows (here, one
             * sub-block at a time: its shuffles' registers are free), then, with
             * block h / (N / NS)'s rows in rv, the ordered sums of its queries */
#pragma unroll
            for (int c = 0; c < NS / 8; c++)
#pragma unroll
              for (int e = 0; e < 2; e++) {
                float v = best[h][c][e];
                v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
                v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
                v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
                if (g == 0) rv[h % (N / NS) * NS + 8 * c + 2 * tq + e] = v == -INFINITY ? 0.f : v;
                best[h][c][e] = -INFINITY;
              }
            if (h % (N / NS) < N / NS - 1) continue;
            __syncwarp();
            const int64_t q = (i + h / (N / NS)) * qpg + lane;
            if (lane < qpg && q < P.nq) {
              float score = 0.f;
              for (int s = 0; s < qslot && s < P.lq; s++) score += rv[lane * qslot + s];
              P.scores[q * P.ssi + j * P.ssj] = score;
            }
            __syncwarp();
          }
        }
      }
    }
  }
}

} // namespace res
} // namespace lik_cuda

#endif
