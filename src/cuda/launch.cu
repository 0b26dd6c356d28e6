/*
 * launch.cu — extern "C" entry points of the CUDA backend (declared in
 * src/core/problem.h under LIK_WITH_CUDA): lik_cuda_maxsim, lik_cuda_retrieve.
 *
 * Everything runs on p->call.stream; no host synchronisation (graph capturable).
 * A forward with a d_mask, and the retrieve path, take their bounded
 * scratch from lik's stream-ordered pool (StreamScratch, host.cuh).
 */
#include <limits.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host.cuh"
#include "launch.cuh"

namespace lik_cuda {

/* 16-byte vector loads (8 half / 4 fp32 features) are legal for every token
 * of s. */
static int vec16_ok(const lik_seqs &s) {
  return s.dtype != LIK_F64 && vec_ok(s, 16 / elt_size(s.dtype));
}

/* D's padded tokens are one (feature, token, document) tensor of 16-byte
 * aligned rows: a TMA tensor map can describe them. */
static bool tmap_layout_ok(const KParams &P) {
  return P.fast_d && !P.d.off.data && (P.d.group == 0 || P.d.sg == P.d.group * P.d.sn);
}

/* P.tmap_d for wgmma tiles of bd tokens: boxes of 128 bytes of features
 * (64 half, 32 fp32) x bd tokens x docs documents in the 128-byte swizzle
 * (the layout WgCfg::doff reads; docs > 1: bd = Ld, the short-document
 * tiles), features past d, tokens past Ld and documents past the last read
 * as zero.  False where the map cannot be made (no encoder, sizes past
 * TMA's limits). */
static bool make_tmap_d(KParams &P, lik_dtype dt, int bd, int docs) {
  const int64_t ndocs = P.pairing == 0 ? P.ncand : P.pairing == 1 ? P.nrows * P.ncand : P.d.count;
  const int64_t es = elt_size(dt);
  if (ndocs >= INT_MAX || P.d.len >= INT_MAX || P.d.len < 1) return false;
  const uint64_t dims[3] = {(uint64_t)P.d.dim, (uint64_t)P.d.len, (uint64_t)ndocs};
  const uint64_t strides[2] = {(uint64_t)(P.d.sl * es),
                               (uint64_t)((ndocs > 1 ? P.d.sn : P.d.len * P.d.sl) * es)};
  const uint32_t box[3] = {(uint32_t)(128 / es), (uint32_t)bd, (uint32_t)docs};
  return encode_tmap(&P.tmap_d, (int)es, 3, P.d.data, dims, strides, box);
}

/* Shared memory of the K-streamed mma.sync configuration with wn warps of
 * ni n8 tiles (MmaCfg<T, 1, wn, ni, 128 bytes, false>, 3 stages;
 * forward/tiles.cuh): small arrays, 3 tiles of 8 ni wn rows and the 32-row
 * query block, rows of 128-byte k-chunks + 16 bytes of padding; row_bytes =
 * d * element size. */
static int64_t kstream_smem(int wn, int ni, int64_t row_bytes) {
  const int64_t row = 128 + 16, bd = 8 * ni * wn;
  const int64_t small = (256 + bd * 4 + wn * 256 + 127) / 128 * 128;
  return small + 3 * bd * row + (row_bytes + 127) / 128 * 32 * row;
}

/* THE tile heuristic: one place decides which kernel and tile shape runs.
 * Sizes are in bytes of a token's row, rb = d * element size (a half d of
 * 128 is 256 bytes, as an fp32 d of 64).
 *   fp64                 CUDA-core DFMA kernel
 *   bf16 / fp16 / fp32   tensor cores (fp32: 3xTF32 mma.sync, fp32 accuracy,
 *                        or under TF32 one product: docs/cuda.md):
 *   fp32 under TF32, sm_90a, rb <= 256 with stacked queries or Lq > 64,
 *   or 256 < rb <= 512 (any queries)
 *                        wgmma m64nNk8.tf32 as the half types' wgmma below
 *                        (rb <= 256: the same tiles; 512: two warpgroups of
 *                        one m64 tile each, 128-row blocks x 64 tokens)
 *   256 < rb             K-streamed, 32-row query blocks in shared memory:
 *                        128-token tiles (4 warps), 256 (8 warps) for
 *                        rb > 1536 where they fit, 160 / 320 (warp tiles of
 *                        40 tokens) where those need fewer tiles per
 *                        document at no loss of CTAs per SM (Ld = 300); the
 *                        CUDA-core kernel where
 *                        neither fits (half d > 2432 on an H100 / H200, > 1472
 *                        on an A100; half that for fp32)
 *   rb <= 256            query block in registers:
 *     short documents (sm_90a with TMA, half types, Ld a multiple of 8 up
 *     to 64, Lq <= 64, queries too few to stack; `few`: cross pairing,
 *     padded D, scores only, no fused normalize) -> forward/short_docs.cuh:
 *     floor(128 / Ld) whole documents to a 128-token wgmma tile, one
 *     reduction per tile, about one CTA per SM;
 *     many short queries (cross pairing, padded Q, Lq <= 64, >= 128 rows in
 *     all): stacked in the CTA's rows (4 / 8 of Lq <= 32, 2 / 4 of <= 64 in
 *     128 / 256 rows), so each document tile is read once for all of them;
 *     sm_90a, stacked queries or Lq > 64 -> wgmma (docs/cuda.md):
 *     one warpgroup, 128 rows x 64-token tiles (two CTAs per SM) for
 *     stacked queries and Lq <= 128; two warpgroups, 256-row blocks x 128
 *     tokens beyond, and for stacked queries filling 256 rows when the
 *     tiles come by TMA (two cross queries of 64 < Lq <= 128 too, a
 *     128-row slot each; the warpgroups taking turns; 104-token tiles
 *     where they pad a document less: Ld = 300 in 312 columns, not 384,
 *     for stacked queries, and for long queries against documents of all
 *     Ld tokens (`full`: Ld = 1030 in 1040 columns, not 1152; shorter
 *     documents of a padded batch measured no gain));
 *     document tiles by TMA where a tensor map describes D (padded,
 *     16-byte rows) and bulk copies are on;
 *     otherwise mma.sync: 8 warps x (32 x 64) for stacked queries; one
 *     query: Lq <= 32 -> 32 x 64 tiles (4 warps of 32 x 16, three CTAs per
 *     SM; 2 warps of 32 x 32, six per SM, for rb <= 128, eight in rows of
 *     96 bytes for rb <= 96: half d <= 48; where the document rows are
 *     exactly 96 bytes, dense, by bulk copies on sm_90+), <= 64 -> 64 x 64,
 *     <= 128 -> 128 x 128 (4 x 2 warps of 32 x 64), longer -> 256 x 64 query
 *     blocks (8 warps of 32 x 64) looped inside the CTA.  Lq <= 64 with one
 *     query stays on mma.sync on sm_90a too (memory-bound; wgmma's 64-row
 *     minimum measured no faster there).
 * On sm_90+ the scores-only one-query tiles (Lq <= 64, query in registers)
 * may split each document's tiles over the CTAs of a cluster (up to 8;
 * mma_impl.cuh and decompose() decide, LIK_CUDA_SPLIT=0 turns it off): few
 * long documents then fill the GPU. */
static TileCfg choose_tile(lik_dtype dt, int64_t d, int64_t lq, int64_t ld, int64_t stack_nq,
                           bool dense_rows, bool tmap_ok, bool tf32, bool few, bool full,
                           const DevInfo &dev) {
  TileCfg c = {0, 1, 4, 4, 128, 1, 1, 0, 1, 0, 0, 64, 0};
  const int64_t rb = d * elt_size(dt);
  const int64_t slot = lq <= 32 ? 32 : 64;
  const bool stack = lq <= 64 && stack_nq * slot >= 128;
  if (few && !stack && dev.wg && dev.bulk && tmap_ok && (dt == LIK_BF16 || dt == LIK_F16) &&
      rb <= 256 && lq >= 1 && lq <= 64 && ld >= 8 && ld <= 64 && ld % 8 == 0) {
    c.short_docs = c.tma = 1;
    return c;
  }
  /* wgmma: half types and fp32 under TF32 with stacked queries or Lq > 64;
   * fp32 rows of 512 bytes under TF32 always (the alternative streams d
   * through shared memory in k-chunks and rounds both operands per k-step) */
  const bool wg = dev.wg && (dt == LIK_F32 ? tf32 && rb <= 512 && (stack || lq > 64 || rb > 256)
                                           : rb <= 256 && (stack || lq > 64));
  if (dt == LIK_F64 || (rb > 256 && !wg && kstream_smem(4, 4, rb) > dev.smem_max)) {
    c.simt = 1;
    return c;
  }
  if (dev.clusters) c.split_max = 8; /* the portable cluster size */
  if (rb > 256 && !wg) {
    c.qreg = 0;
    /* 8 warps where 4-warp CTAs would run one per SM (large query block) */
    if (rb > 1536 && kstream_smem(8, 4, rb) <= dev.smem_max) c.wn = 8;
    /* 40-token warp tiles where they cut a document's tile count at no
     * cost in CTAs per SM: every tile streams all of d, so a nearly empty
     * last tile costs over half a full one (Ld = 300: two tiles of 160
     * tokens instead of three of 128, one of 320 instead of two of 256) */
    const int64_t bd4 = 32 * c.wn, bd5 = 40 * c.wn;
    const int64_t s4 = kstream_smem(c.wn, 4, rb), s5 = kstream_smem(c.wn, 5, rb);
    if ((ld + bd5 - 1) / bd5 < (ld + bd4 - 1) / bd4 && s5 <= dev.smem_max &&
        dev.smem_sm / (s5 + dev.smem_rsv) >= dev.smem_sm / (s4 + dev.smem_rsv))
      c.ni = 5;
    return c;
  }
  c.kc = rb <= 128 && !(wg && dt == LIK_F32) ? 128 : rb <= 256 ? 256 : 512;
  if (wg) {
    c.tma = tmap_ok && dev.bulk;
    /* two queries of 64 < Lq <= 128 (cross): a 128-row slot each in the
     * two-warpgroup TMA kernel's 256 rows, so a tile is read once for both */
    const bool pair = lq > 64 && lq <= 128 && stack_nq >= 2 && c.tma && c.kc != 512;
    c.wg = lq > 128 || pair || (stack && c.tma && stack_nq * slot >= 256) ? 2 : 1;
    if (c.wg == 2)
      c.bn = (stack || pair || full) && c.tma && (ld + 103) / 104 * 104 < (ld + 127) / 128 * 128 ? 104 : 128;
    if (c.kc == 512) { /* fp32 64 < d <= 128: two warpgroups of 64 rows */
      c.wg = 2;
      c.bn = 64;
    }
    c.wm = c.kc == 512 ? 4 : 4 * c.wg;
    c.wn = 1;
    if (stack) c.qpc = (int)(32 * c.wm / slot);
    else if (pair) c.qpc = 2;
  } else if (stack) {
    c.wm = 8; c.wn = 1; c.qpc = (int)(256 / slot);
  } else if (lq <= 32) {
    c.wm = 1; c.wn = rb <= 128 ? 2 : 4;
    if (rb <= 96) c.kc = 96; /* 96-byte rows: eight CTAs per SM */
    c.bulk = rb == 96 && dense_rows && dev.bulk;
  } else if (lq <= 64) {
    c.wm = 2; c.wn = 2;
  } else if (lq <= 128) {
    c.wm = 4; c.wn = 2;
  } else {
    c.wm = 8; c.wn = 1;
  }
  return c;
}

/* Tokens of a document: the padded Ld, or the mean packed length (the
 * lengths are on the device; a pair list has one document per pair). */
static int64_t doc_tokens(const KParams &P) {
  if (!P.d.off.data) return P.d.len;
  const int64_t ndocs = P.pairing == 1 ? P.nrows * P.ncand : P.ncand;
  return ndocs > 0 ? (P.d.len + ndocs - 1) / ndocs : P.d.len;
}

/* Split each output row's items over `upr` units of `dpc` items and each
 * item's document tiles over the `split` CTAs of a cluster, minimising
 * waves x (work per CTA + a ramp-up cost of about one item); slots[s] CTAs
 * are resident in clusters of s (slots[1]: without clusters; 0: that size
 * cannot run).  An item is `tiles` tiles of bd tokens (the padded Ld, or the
 * mean packed length); a rank of a split does ceil(tiles / split) of them,
 * plus about half a tile (of nkc k-steps) for the cluster barrier at the
 * item's end. */
void decompose(KParams &P, const int64_t *slots, int bd, int max_split) {
  const int64_t nrows = P.nrows, ncand = P.ncand;
  P.upr = 1;
  P.dpc = ncand > 0 ? ncand : 1;
  P.split = 1;
  if (nrows <= 0 || ncand <= 0) return;
  const int64_t ld = doc_tokens(P);
  const int64_t tiles = ld > bd ? (ld + bd - 1) / bd : 1;
  const double nkc = P.nkc > 0 ? P.nkc : 1;
  double best = 1e300;
  for (int s = 1; s <= max_split && s <= tiles; ++s) {
    const int64_t sl = slots[s] > 0 ? slots[s] : s == 1 ? 1 : 0;
    if (sl == 0) continue;
    const double w = s == 1 ? 1.0 : ((double)((tiles + s - 1) / s) * nkc + 0.5) / ((double)tiles * nkc);
    int64_t maxu = (8 * sl + nrows * s - 1) / (nrows * s);
    if (maxu > ncand) maxu = ncand;
    if (maxu < 1) maxu = 1;
    while (maxu > 1 && nrows * maxu * s > (int64_t)INT_MAX) maxu /= 2;
    if (nrows * maxu * s > (int64_t)INT_MAX) break;
    for (int64_t u = 1; u <= maxu; ++u) {
      const int64_t dpc = (ncand + u - 1) / u;
      const int64_t ueff = (ncand + dpc - 1) / dpc;
      const int64_t waves = (nrows * ueff * s + sl - 1) / sl;
      const double cost = (double)waves * ((double)dpc * w + 1.0);
      if (cost < best - 1e-9) {
        best = cost;
        P.upr = ueff;
        P.dpc = dpc;
        P.split = s;
      }
    }
  }
}

static KParams make_params(const lik_problem *p) {
  KParams P;
  memset(&P, 0, sizeof(P));
  set_problem(P, *p);
  P.tf32 = p->call.tf32 ? 1 : 0;
  P.nrows = p->pairing == LIK_PAIRING_LIST ? 1 : p->q.count;
  P.nq = p->q.count;
  P.qpc = 1;
  P.split = 1;
  set_outputs(P, p->out);
  P.scores64 = p->out.scores_f64;
  return P;
}

/* Launches the forward for P (scores / argmax already set) on dev. */
static lik_status run_forward(KParams &P, lik_dtype dt, cudaStream_t stream, const Device &dev) {
  const KParams given = P; /* a last block split off below starts from it */
  /* queries can share a CTA's rows in the cross pairing, padded or packed
   * (packed: slots sized by P.q.len, the max_seqlen_q / argmax bound; the
   * kernel masks each slot's rows past its query's own length) */
  const int64_t stack_nq = P.pairing == 0 ? P.nq : 1;
  const int64_t lq = P.q.len - P.s0; /* query rows of this launch */
  const DevInfo &info = *dev.info;
  const bool am = P.argmax != nullptr;
  cudaError_t e;
  /* a document's rows are contiguous: a tile is one copy */
  const bool dense_rows = P.fast_d && P.d.sl == P.d.dim;
  /* the short-document tiles: one query or a few (cross), scores only; a
   * d_mask read as bits (retrieve's blocks pass the mask bytes alone) */
  const bool few = P.s0 == 0 && P.pairing == 0 && !am && !P.normalize && !P.scores64 &&
                   !P.d.off.data && (!P.dm.data || P.dbits);
  /* every document has all its Ld tokens (no d_mask, lengths or packing) */
  const bool full = !P.dm.data && !P.d.lens && !P.d.off.data;
  TileCfg c = choose_tile(dt, P.d.dim, lq, doc_tokens(P), stack_nq, dense_rows,
                          tmap_layout_ok(P), P.tf32, few, full, info);
  const int docs = c.short_docs ? (int)(128 / P.d.len) : 1;
  if (c.tma && !make_tmap_d(P, dt, c.short_docs ? (int)P.d.len : c.bn, docs))
    /* no tensor map: the tiles without TMA */
    c = choose_tile(dt, P.d.dim, lq, doc_tokens(P), stack_nq, dense_rows, false, P.tf32, few,
                    full, info);
  if (c.short_docs) {
    P.qrows = P.q.len <= 32 ? 32 : 64;
    P.qshift = __builtin_ctz((unsigned)P.qrows);
    P.qpc = (int)(64 / P.qrows < P.nq ? 64 / P.qrows : P.nq);
    e = launch_short_docs(P, dt, stream, dev);
    return e == cudaSuccess ? LIK_OK : cuda_fail(e, "the MaxSim kernel launch");
  }
  /* the tensor-core kernel right after the d_mask's prefix kernel
   * (lik_cuda_maxsim) overlaps it; the short-document kernel is launched
   * as before (docs/cuda.md, "Padding") */
  c.pdl = P.dpre && P.s0 == 0 && info.cc_major >= 9;
  const int bq = c.simt ? 32 : 32 * c.wm;
  P.qpc = c.qpc;
  P.qrows = bq / c.qpc; /* 32 .. 256, a power of two */
  P.qshift = __builtin_ctz((unsigned)P.qrows);
  if (c.qpc > 1) P.nrows = (P.nq + c.qpc - 1) / c.qpc;
  int64_t nqb = (lq + P.qrows - 1) / P.qrows;
  if (nqb < 1) nqb = 1;
  if (nqb > INT_MAX)
    return lik_fail(LIK_ERR_UNSUPPORTED, "Q: Lq=%lld is too long for the CUDA backend",
                    (long long)P.q.len);
  /* A long query's last block that would be at least half padding (Lq 1030
   * in blocks of 256 rows: 6 rows in the fifth) runs as a launch of its
   * own after this one, where its row count chooses smaller blocks
   * (stacked 32-row slots for 6 rows), adding to the scores: in this
   * launch it would cost a whole block of MMAs, and the launch reads D
   * once as that block did.  The blocks' sums are added in the same order
   * (run to run deterministic as before).  Not for packed queries. */
  const int64_t last = lq - (nqb - 1) * P.qrows; /* rows of the last block */
  bool tail = false;
  if (!c.simt && P.qpc == 1 && nqb >= 2 && !P.q.off.data && 2 * last <= P.qrows) {
    const TileCfg t = choose_tile(dt, P.d.dim, last, doc_tokens(P), stack_nq, dense_rows,
                                  tmap_layout_ok(P), P.tf32, false, full, info);
    tail = !t.simt && 32 * t.wm / t.qpc < P.qrows;
  }
  if (tail) --nqb;
  P.nqb = (int)nqb;
  P.nkc = c.simt ? 1 : (int)((P.d.dim * elt_size(dt) + c.kc - 1) / c.kc);
  if (P.nkc < 1) P.nkc = 1;
  if (c.simt) {
    e = launch_simt(P, dt, am, stream, dev);
  } else if (dt == LIK_BF16) {
    e = launch_mma_bf16(P, c, am, stream, dev);
  } else if (dt == LIK_F16) {
    e = launch_mma_f16(P, c, am, stream, dev);
  } else {
    e = launch_mma_f32(P, c, am, stream, dev);
  }
  if (e != cudaSuccess) return cuda_fail(e, "the MaxSim kernel launch");
  if (!tail) return LIK_OK;
  KParams rest = given;
  rest.s0 = P.s0 + nqb * P.qrows;
  return run_forward(rest, dt, stream, dev);
}

} // namespace lik_cuda

using namespace lik_cuda;

extern "C" lik_status lik_cuda_maxsim(const lik_problem *p) {
  const int64_t nrows = p->pairing == LIK_PAIRING_LIST ? 1 : p->q.count;
  if (nrows <= 0 || p->ncand <= 0) return LIK_OK;
  if (p->q.dim != p->d.dim)
    return lik_fail(LIK_ERR_SHAPE, "D: d=%lld does not match Q's d=%lld",
                    (long long)p->d.dim, (long long)p->q.dim);
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  KParams P = make_params(p);
  P.fast_q = vec16_ok(p->q);
  P.fast_d = vec16_ok(p->d);
  const cudaStream_t stream = (cudaStream_t)p->call.stream;
  if (!P.dm.data || p->q.dtype == LIK_F64 || P.d.off.data)
    return run_forward(P, p->q.dtype, stream, dev);
  /* a padded D's d_mask, read once on the device: prefix documents
   * (padding) run as unmasked documents of that length, the others' tiles
   * read the mask as bits (prefix.cu) */
  P.dwords = (P.d.len + 31) / 32;
  int32_t *dpre = nullptr;
  const size_t bytes = (size_t)p->d.count * (size_t)(1 + P.dwords) * 4;
  StreamScratch sc(dev, stream);
  cudaError_t e = sc.get((void **)&dpre, bytes);
  if (e != cudaSuccess) return cuda_fail(e, "allocating the d_mask prefix lengths");
  uint32_t *bits = reinterpret_cast<uint32_t *>(dpre + p->d.count);
  e = launch_prefix(P, dpre, bits, stream);
  P.dpre = dpre;
  P.dbits = bits;
  const lik_status rs = e == cudaSuccess ? run_forward(P, p->q.dtype, stream, dev)
                                         : cuda_fail(e, "the d_mask prefix kernel launch");
  return rs;
}

/* ---- retrieve ------------------------------------------------------------ */
#include "retrieve.cuh"

extern "C" lik_status lik_cuda_retrieve(const lik_problem *p, int64_t k,
                                        float *out_scores, int64_t out_si,
                                        int64_t out_sr, int64_t *out_indices,
                                        int64_t idx_si, int64_t idx_sr) {
  return lik_cuda::retrieve(p, k, out_scores, out_si, out_sr, out_indices,
                            idx_si, idx_sr);
}
