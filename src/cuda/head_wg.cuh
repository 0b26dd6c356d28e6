/*
 * head_wg.cuh — the fused D-side head forward on sm_90a tensor cores (half /
 * bf16 inputs, d_out <= 128, Lq <= 256; head.cu chooses it where H_d and W
 * are TMA-addressable, head_fwd.cuh's kernel serves the rest).  A CTA of
 * three warpgroups scores one document, or a range of its 128-token tiles
 * (`split`), against a block of up to 256 query rows (stacked queries):
 *
 *   producer   warpgroup 0, one thread: streams each tile's K chunks, H_d
 *              [128 tokens x 64 features] and W [N x 64], by TMA in the
 *              128-byte swizzle into nst stages; a stage's "full"
 *              transaction barrier completes with its bytes, its "empty"
 *              barrier with one arrival per consumer warp (8).
 *   consumers  warpgroups 1 and 2, 64 tokens of each tile each:
 *     projection  P = H_tile W^T: wgmma m64nNk16 from shared memory, fp32
 *                 accumulators (N = 64 or 128 columns; W's rows past d_out
 *                 read as zero);
 *     epilogue    + b and the L2 normalisation in fp32 (a token's sum of
 *                 squares over its quad, one fixed order); P stored as hi =
 *                 P rounded to T and lo = (P - hi) rounded to T, in the
 *                 128-byte swizzle: the projection never leaves the SM;
 *     MaxSim      S = Q P^T, 64 query rows at a time: wgmma m64n64k16 with
 *                 Q (shared memory, loaded once per CTA) and the
 *                 warpgroup's 64 projected tokens, hi and lo products summed
 *                 in fp32 (P kept to ~2^-16 relative, close to
 *                 head_fwd.cuh's fp32 projection, where one rounding to bf16
 *                 would cost ~2^-9); each thread keeps the running max /
 *                 argmax of its two query rows per 64-row tile over its
 *                 columns (tokens ascending, masked tokens skipped; NaN never
 *                 wins: common.cuh's takes_max).
 *   end        quads, then the two warpgroups, merge (value descending,
 *              index ascending: `better`); one thread per query sums its
 *              tokens' maxima in token order (finish_query) or, with split
 *              > 1, each CTA writes its rows' maxima and argmax as partials
 *              that merge_kernel combines in split order.  Deterministic.
 */
#ifndef LIK_CUDA_HEAD_WG_CUH
#define LIK_CUDA_HEAD_WG_CUH

#include "head_fwd.cuh"
#include "wgmma.cuh"

namespace lik_cuda {
namespace head {

/* head_wg_kernel's parameters: the forward's, the tensor maps, the split. */
struct WgParams {
  HParams f;           /* f.qpc: queries per CTA (cross), 1 (KD) */
  CUtensorMap tmap_h;  /* H_d as (d_model, Ld, grp, count / grp) */
  CUtensorMap tmap_w;  /* W as (d_model, d_out) */
  int64_t grp;         /* K (KD) or Nd (cross) */
  int64_t nqb;         /* query blocks (cross), 1 (KD) */
  int nst;             /* pipeline stages */
  int qr;              /* query rows in shared memory: qpc * Lq rounded up to 64, <= 256 */
  int split;           /* CTAs per (document, query block), each tps tiles */
  int64_t tps;
  float *part_v;       /* split > 1: [document, query token][split] maxima */
  int32_t *part_i;     /* and their argmax (-1: none) */
};

constexpr int WG_TH = 384;   /* a producer and two consumer warpgroups */
constexpr int WG_BT = 128;   /* tokens per tile */
constexpr int WG_MAXQ = 256; /* query rows per CTA */

/* head_wg_kernel<T, N>'s shared memory, byte offsets from a 1024-byte
 * aligned base: nst stages of (H_d tile, W chunk); per consumer warpgroup
 * its hi and lo projected tiles (64 tokens x N, N / 64 atoms of 64 rows x
 * 128 bytes; warpgroup 1's hi tile holds the end's merge buffer); Q (N / 64
 * atoms of qr rows x 128 bytes); b (fp32, zero past d_out); per consumer
 * warpgroup its 64 tokens' valid flags; the barriers (full, empty). */
template <int N> struct WgSmem {
  static constexpr int HB = WG_BT * 128, SB = HB + N * 128, PB = 64 * N * 2;
  int nst, qr;
  __host__ __device__ int ps() const { return nst * SB; }
  __host__ __device__ int q() const { return ps() + 4 * PB; }
  __host__ __device__ int bias() const { return q() + N / 64 * qr * 128; }
  __host__ __device__ int tv() const { return bias() + N * 4; }
  __host__ __device__ int bars() const { return tv() + 2 * 64; }
  __host__ __device__ int bytes() const { return bars() + 2 * nst * 8; }
};

/* Two values rounded to T as one 32-bit pair (low half first); a and b are
 * left holding what the rounding dropped. */
template <typename T> __device__ __forceinline__ uint32_t round_pair(float &a, float &b) {
  const T ta = from_f<T>(a), tb = from_f<T>(b);
  a -= to_f<T>(ta);
  b -= to_f<T>(tb);
  uint16_t ua, ub;
  memcpy(&ua, &ta, 2);
  memcpy(&ub, &tb, 2);
  return (uint32_t)ua | (uint32_t)ub << 16;
}

template <typename T, int N>
__global__ void __launch_bounds__(WG_TH, 1) head_wg_kernel(const __grid_constant__ WgParams G) {
  using L = WgSmem<N>;
  const HParams &P = G.f;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *sm = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const L lay{G.nst, G.qr};
  const uint32_t base = smem_u32(sm), fulls = base + lay.bars(), empties = fulls + 8 * G.nst;
  const int tid = threadIdx.x, wgi = tid >> 7;
  const int64_t lq = P.q.len, ld = P.h.len, d_out = P.q.dim;

  int64_t item = blockIdx.x;
  const int sp = (int)(item % G.split);
  item /= G.split;
  const int64_t n = item / G.nqb;                       /* document: j, or i * K + k (KD) */
  const int64_t c = P.kd ? n % P.ncand : n;             /* its score column */
  const int64_t q0 = P.kd ? n / P.ncand : item % G.nqb * P.qpc;
  const int64_t nqry = P.kd ? 1 : min((int64_t)P.qpc, P.q.count - q0);
  const int qrows = (int)(nqry * lq), qt = (qrows + 63) / 64;
  const int64_t t_begin = sp * G.tps;
  const int64_t t_end = min((ld + WG_BT - 1) / WG_BT, t_begin + G.tps);
  const int nk = (int)((P.h.dim + 63) / 64);

  if (tid == 0) {
    for (int s = 0; s < G.nst; ++s) {
      bar_init(fulls + 8 * s, 1);
      bar_init(empties + 8 * s, 8);
    }
    bar_init_fence();
  }
  if (wgi > 0) { /* Q (rows past the block's zero) in the swizzle, and b */
    const T *Q = reinterpret_cast<const T *>(P.q.data);
    for (int u = tid - 128; u < G.qr * (N / 8); u += 256) {
      const int r = u / (N / 8), ch = u % (N / 8);
      uint16_t e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (r < qrows) {
        const T *row = Q + seq_base(P.q, q0 + r / lq) + (r % lq) * P.q.sl;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (ch * 8 + j < d_out) memcpy(&e[j], row + (ch * 8 + j) * P.q.sk, 2);
      }
      *reinterpret_cast<uint4 *>(sm + lay.q() + ch / 8 * G.qr * 128 + r * 128 +
                                 ((ch % 8) ^ (r % 8)) * 16) = *reinterpret_cast<const uint4 *>(e);
    }
    float *bias = reinterpret_cast<float *>(sm + lay.bias());
    for (int o = tid - 128; o < N; o += 256)
      bias[o] = P.wb.b && o < d_out ? to_f<T>(reinterpret_cast<const T *>(P.wb.b)[o * P.wb.b_s]) : 0.f;
    fence_proxy_async(); /* Q: generic stores, read by wgmma */
  }
  __syncthreads();

  if (wgi == 0) { /* the producer */
    if (tid == 0) {
      const int z = (int)(n % G.grp), w = (int)(n / G.grp);
      int s = 0;
      uint32_t ph = 0;
      for (int64_t t = t_begin; t < t_end; ++t)
        for (int kc = 0; kc < nk; ++kc) {
          bar_wait(empties + 8 * s, ph ^ 1u);
          bar_expect(fulls + 8 * s, L::SB);
          const uint32_t dst = base + s * L::SB;
          tma_load_4d(dst, &G.tmap_h, kc * 64, (int)(t * WG_BT), z, w, fulls + 8 * s);
          tma_load_2d(dst + L::HB, &G.tmap_w, kc * 64, 0, fulls + 8 * s);
          if (++s == G.nst) { s = 0; ph ^= 1u; }
        }
    }
    return;
  }

  /* the consumers */
  const int cw = wgi - 1, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, tg = lane & 3;
  const uint32_t ps_hi = base + lay.ps() + 2 * cw * L::PB, ps_lo = ps_hi + L::PB;
  unsigned char *tvs = sm + lay.tv() + 64 * cw;
  const float *bias = reinterpret_cast<const float *>(sm + lay.bias());
  const uint32_t qs = base + lay.q();
  float bv[4][2];
  int bi[4][2];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      bv[mt][h] = CUDART_NAN_F;
      bi[mt][h] = -1;
    }
  auto release = [&](int st) {
    __syncwarp();
    if (lane == 0) bar_arrive(empties + 8 * st);
  };
  int s = 0;
  uint32_t ph = 0;
  float acc[N / 2];
  for (int64_t t = t_begin; t < t_end; ++t) {
    int prev = 0;
    for (int kc = 0; kc < nk; ++kc) {
      bar_wait(fulls + 8 * s, ph);
      const uint32_t st_u = base + s * L::SB;
      const uint64_t da = wg_desc(st_u + cw * 64 * 128), db = wg_desc(st_u + L::HB);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_ss<T, N>(acc, wg_desc_add(da, 32 * ks), wg_desc_add(db, 32 * ks), kc > 0 || ks > 0);
      wg_commit();
      if (kc > 0) {
        wg_wait<1>();
        release(prev);
      }
      prev = s;
      if (++s == G.nst) { s = 0; ph ^= 1u; }
    }
    wg_wait<0>();
    release(prev);
    wg_fence_regs<N / 2>(acc);
    const int64_t t0 = t * WG_BT + 64 * cw; /* this warpgroup's first token */
    if (t0 >= ld) continue;                 /* (uniform over the warpgroup) */

    /* epilogue: C element e of n-block nb is row warp*16 + g + 8 (e / 2),
     * column 8 nb + 2 tg + e % 2 */
    float ss[2] = {0.f, 0.f};
#pragma unroll
    for (int nb = 0; nb < N / 8; ++nb) {
      const float2 bb = *reinterpret_cast<const float2 *>(bias + 8 * nb + 2 * tg);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float v = acc[4 * nb + e] + (e & 1 ? bb.y : bb.x);
        acc[4 * nb + e] = v;
        ss[e >> 1] = fmaf(v, v, ss[e >> 1]);
      }
    }
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 1);
      ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 2);
      inv[h] = P.normalize ? 1.f / fmaxf(sqrtf(ss[h]), (float)LIK_NORM_EPS) : 1.f;
    }
    named_sync(1 + cw, 128); /* the previous tile's MaxSim is done with Ps and tvs */
#pragma unroll
    for (int nb = 0; nb < N / 8; ++nb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float a = acc[4 * nb + 2 * h] * inv[h], b = acc[4 * nb + 2 * h + 1] * inv[h];
        const uint32_t hi = round_pair<T>(a, b), lo = round_pair<T>(a, b);
        const uint32_t off = nb / 8 * (64 * 128) + (warp * 16 + g + 8 * h) * 128 +
                             ((nb % 8) ^ g) * 16 + 4 * tg; /* row % 8 == g */
        sts32(ps_hi + off, hi);
        sts32(ps_lo + off, lo);
      }
    if (tg == 0)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + g + 8 * h;
        tvs[r] = t0 + r < ld && tok_valid(P.hm, P.h, n, t0 + r);
      }
    fence_proxy_async();
    named_sync(1 + cw, 128);

    /* MaxSim of the query rows over the warpgroup's 64 tokens */
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
      if (mt >= qt) break;
      float sacc[32];
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < N / 16; ++ks) {
        const uint64_t dq = wg_desc_add(wg_desc(qs + ks / 4 * G.qr * 128 + mt * (64 * 128)), 32 * (ks % 4));
        const uint32_t po = ks / 4 * (64 * 128);
        wgmma_ss<T, 64>(sacc, dq, wg_desc_add(wg_desc(ps_hi + po), 32 * (ks % 4)), ks > 0);
        wgmma_ss<T, 64>(sacc, dq, wg_desc_add(wg_desc(ps_lo + po), 32 * (ks % 4)), 1);
      }
      wg_commit();
      wg_wait<0>();
      wg_fence_regs<32>(sacc);
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) {
        const uint16_t ok = *reinterpret_cast<const uint16_t *>(tvs + 8 * nb + 2 * tg);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = 8 * nb + 2 * tg + (e & 1);
          const float x = sacc[4 * nb + e];
          if (((ok >> (8 * (e & 1))) & 1) && takes_max(x, bv[mt][e >> 1])) {
            bv[mt][e >> 1] = x;
            bi[mt][e >> 1] = (int)(t0 + col);
          }
        }
      }
    }
  }

  /* merge: the quad, then warpgroup 1's rows into warpgroup 0's */
  float *red_v = reinterpret_cast<float *>(sm + lay.ps() + 2 * L::PB);
  int *red_i = reinterpret_cast<int *>(red_v + WG_MAXQ);
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) argmax_lanes<4>(bv[mt][h], bi[mt][h]);
  auto each_row = [&](auto f) { /* f(mt, h, the row in the block) for this thread's rows */
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (mt < qt) f(mt, h, mt * 64 + warp * 16 + g + 8 * h);
  };
  if (cw == 1 && tg == 0)
    each_row([&](int mt, int h, int r) {
      red_v[r] = bv[mt][h];
      red_i[r] = bi[mt][h];
    });
  named_sync(3, 256);
  if (cw == 0 && tg == 0)
    each_row([&](int mt, int h, int r) {
      if (!better(red_v[r], red_i[r], bv[mt][h], bi[mt][h])) {
        red_v[r] = bv[mt][h];
        red_i[r] = bi[mt][h];
      }
    });
  named_sync(3, 256);
  const int u = tid - 128;
  if (G.split == 1) {
    if (u < nqry)
      finish_query(P, q0 + u, c, [&](int64_t s, float &v, int &i) {
        v = red_v[u * lq + s];
        i = red_i[u * lq + s];
      });
  } else {
    const int64_t prow = (P.kd ? n : n * P.q.count + q0) * lq;
    for (int r = u; r < qrows; r += 256) {
      G.part_v[(prow + r) * G.split + sp] = red_v[r];
      G.part_i[(prow + r) * G.split + sp] = red_i[r];
    }
  }
}

/* split > 1: a thread per (query, score column) merges its tokens' partial
 * maxima in split order and finishes the query. */
__global__ void merge_kernel(const WgParams G) {
  const HParams &P = G.f;
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= P.q.count * P.ncand) return;
  const int64_t qi = e / P.ncand, c = e % P.ncand;
  const int64_t prow = (P.kd ? qi * P.ncand + c : c * P.q.count + qi) * P.q.len;
  finish_query(P, qi, c, [&](int64_t s, float &v, int &i) {
    v = CUDART_NAN_F;
    i = -1;
    for (int k = 0; k < G.split; ++k) {
      const float pv = G.part_v[(prow + s) * G.split + k];
      const int pi = G.part_i[(prow + s) * G.split + k];
      if (better(pv, pi, v, i)) {
        v = pv;
        i = pi;
      }
    }
  });
}

} // namespace head
} // namespace lik_cuda

#endif
