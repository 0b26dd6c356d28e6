/*
 * head_fwd.cuh — the fused D-side head forward on CUDA (half / bf16 / fp32
 * inputs): one CTA (8 warps) per (document, block of queries) walks the
 * document in tiles of BT = 128 tokens.  Per tile: the projection
 * P = H_tile @ W^T on tensor cores (fp32 accumulate; WMMA m16n16k16 for half
 * / bf16, m16n16k8 tf32 for fp32: 3xTF32 as the forward's, or one TF32
 * product with the call's tf32 option; K chunks of 64 bytes of features per
 * row in two shared buffers, the next chunk's 16-byte global loads in flight
 * during the current chunk's MMAs), + b and the L2 normalisation in fp32 in shared
 * memory, then every query token of the block takes its max over the tile in
 * fp32 (CUDA cores; 8 lanes per query token, tokens interleaved so shared
 * reads do not conflict).  The running max / argmax per query token lives in shared
 * memory; the projection never leaves the SM.
 */
#ifndef LIK_CUDA_HEAD_FWD_CUH
#define LIK_CUDA_HEAD_FWD_CUH

#include <mma.h>

#include "ptx.cuh"

extern "C" {
#include "../core/head.h"
}

namespace lik_cuda {
namespace head {

/* Everything the head kernels read, passed by value. */
struct HParams {
  KSeq q, h;           /* q.dim = d_out, h.dim = d_model */
  KMask qm, hm;
  lik_head_wb wb;      /* W[o, k] at w[o*w_so + k*w_sk]; NULL or b[o*b_s] */
  int kd;              /* 1: H_d is [Nq, K, Ld, d_model] */
  int64_t ncand;       /* Nd (cross) or K */
  int normalize;
  float *scores;
  int64_t ssi, ssj;
  int32_t *argmax;
  int64_t asi, asj, ass;
  int qpc;             /* queries per CTA (cross), 1 for KD */
  int vec_h, vec_w;    /* 16-byte loads of H_d rows / W rows are legal */
  int tf32;            /* fp32: one TF32 product per term, not 3xTF32 */
};

constexpr int BT = 128;  /* document tokens per tile (8 warps x 16 rows) */
constexpr int NTH = 256;
constexpr int LPQ = BT / 16; /* lanes per query token in the MaxSim step */

/* The staging of element type T: KC d_model features (64 bytes) of a row per
 * K chunk, rows HLD elements apart in shared memory, EV elements per 16-byte
 * vector load. */
template <typename T> struct Stage {
  static constexpr int KC = 64 / (int)sizeof(T);
  static constexpr int HLD = KC + 8;
  static constexpr int EV = 16 / (int)sizeof(T);
};

namespace wm = nvcuda::wmma;

/* A warp's products of one K chunk: its 16 rows of the H_d tile (hs) against
 * the NF blocks of 16 rows of W (ws), into acc[NF].  half / bf16: m16n16k16,
 * operands exact. */
template <typename T> struct TileMma {
  using Acc = wm::fragment<wm::accumulator, 16, 16, 16, float>;
  template <int NF> __device__ static void chunk(Acc *acc, const T *hs, const T *ws, int) {
    constexpr int LD = Stage<T>::HLD;
#pragma unroll
    for (int kk = 0; kk < Stage<T>::KC; kk += 16) {
      wm::fragment<wm::matrix_a, 16, 16, 16, T, wm::row_major> a;
      wm::load_matrix_sync(a, hs + kk, LD);
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        wm::fragment<wm::matrix_b, 16, 16, 16, T, wm::col_major> b;
        wm::load_matrix_sync(b, ws + f * 16 * LD + kk, LD);
        wm::mma_sync(acc[f], a, b, acc[f]);
      }
    }
  }
};

/* fp32: m16n16k8 on tf32 operands, each split as ptx.cuh's tf32_split (big +
 * small) and summed as its 3xTF32 (small*big + big*small + big*big, fp32
 * accuracy); with tf32, one product of operands rounded to tf32 once. */
template <> struct TileMma<float> {
  using Acc = wm::fragment<wm::accumulator, 16, 16, 8, float>;
  template <typename Frag> __device__ static void split(Frag &big, Frag &small, int tf32) {
#pragma unroll
    for (int i = 0; i < big.num_elements; ++i) {
      uint32_t hi, lo = 0;
      if (tf32) hi = tf32_rna(big.x[i]);
      else tf32_split(__float_as_uint(big.x[i]), hi, lo);
      big.x[i] = __uint_as_float(hi);
      small.x[i] = __uint_as_float(lo);
    }
  }
  template <int NF> __device__ static void chunk(Acc *acc, const float *hs, const float *ws, int tf32) {
    constexpr int LD = Stage<float>::HLD;
#pragma unroll
    for (int kk = 0; kk < Stage<float>::KC; kk += 8) {
      wm::fragment<wm::matrix_a, 16, 16, 8, wm::precision::tf32, wm::row_major> a, as;
      wm::load_matrix_sync(a, hs + kk, LD);
      split(a, as, tf32);
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        wm::fragment<wm::matrix_b, 16, 16, 8, wm::precision::tf32, wm::col_major> b, bs;
        wm::load_matrix_sync(b, ws + f * 16 * LD + kk, LD);
        split(b, bs, tf32);
        if (!tf32) {
          wm::mma_sync(acc[f], as, b, acc[f]);
          wm::mma_sync(acc[f], a, bs, acc[f]);
        }
        wm::mma_sync(acc[f], a, b, acc[f]);
      }
    }
  }
};

__device__ __forceinline__ bool tok_valid(const KMask &m, const KSeq &s, int64_t n, int64_t l) {
  return !m.data || m.data[mask_base(m, s, n) + l * m.sl] != 0;
}

/* A query's score and argmax from its tokens' maxima: best(s, v, i) gives
 * token s's max v and its argmax i (-1: nothing won); valid tokens with an
 * argmax are summed in token order (head_fwd_kernel, head_wg.cuh's
 * head_wg_kernel and merge_kernel). */
template <class Best>
__device__ __forceinline__ void finish_query(const HParams &P, int64_t qi, int64_t c, Best best) {
  float tot = 0.f;
  for (int64_t s = 0; s < P.q.len; ++s) {
    float v;
    int i;
    best(s, v, i);
    const bool live = i >= 0 && tok_valid(P.qm, P.q, qi, s);
    if (live) tot += v;
    if (P.argmax) P.argmax[qi * P.asi + c * P.asj + s * P.ass] = live ? i : -1;
  }
  P.scores[qi * P.ssi + c * P.ssj] = tot;
}

/* Bytes of dynamic shared memory of head_fwd_kernel<T, NF> for nqt query tokens. */
template <typename T> __host__ __device__ constexpr size_t fwd_smem(int nf, int64_t nqt) {
  return 2 * ((size_t)BT + (size_t)nf * 16) * Stage<T>::HLD * sizeof(T) +
         (size_t)BT * (nf * 16 + 4) * 4 + (size_t)nqt * 8 + BT;
}

/* One K chunk of the H_d tile and of W: fetch() issues the global loads of
 * the next chunk into registers (16-byte vectors) before the current chunk's
 * MMAs, put() stores them into the other shared buffer after them.  Views
 * that forbid vector loads take the scalar path inside put(). */
template <typename T, int DO> struct ChunkLoader {
  static constexpr int KC = Stage<T>::KC, HLD = Stage<T>::HLD, EV = Stage<T>::EV;
  static constexpr int HV = BT * KC / EV / NTH, WV = (DO * KC / EV + NTH - 1) / NTH;
  uint4 hr[HV], wr[WV];
  __device__ __forceinline__ void fetch(const HParams &P, const T *H, const T *W, int64_t hbase,
                                        int64_t t0, int64_t k0, const unsigned char *tv, int tid) {
    const int64_t d_model = P.h.dim, d_out = P.q.dim;
    if (P.vec_h)
#pragma unroll
      for (int v = 0; v < HV; ++v) {
        const int u = tid + v * NTH, r = u / (KC / EV);
        const int64_t k = k0 + u % (KC / EV) * EV;
        hr[v] = tv[r] && k < d_model
                    ? __ldg(reinterpret_cast<const uint4 *>(H + hbase + (t0 + r) * P.h.sl + k))
                    : make_uint4(0, 0, 0, 0);
      }
    if (P.vec_w)
#pragma unroll
      for (int v = 0; v < WV; ++v) {
        const int u = tid + v * NTH, o = u / (KC / EV);
        const int64_t k = k0 + u % (KC / EV) * EV;
        wr[v] = u < DO * KC / EV && o < d_out && k < d_model
                    ? __ldg(reinterpret_cast<const uint4 *>(W + o * P.wb.w_so + k))
                    : make_uint4(0, 0, 0, 0);
      }
  }
  __device__ __forceinline__ void put(const HParams &P, const T *H, const T *W, int64_t hbase,
                                      int64_t t0, int64_t k0, const unsigned char *tv, int tid,
                                      T *Hs, T *Ws) {
    const int64_t d_model = P.h.dim, d_out = P.q.dim;
    if (P.vec_h) {
#pragma unroll
      for (int v = 0; v < HV; ++v) {
        const int u = tid + v * NTH;
        *reinterpret_cast<uint4 *>(Hs + u / (KC / EV) * HLD + u % (KC / EV) * EV) = hr[v];
      }
    } else {
      for (int u = tid; u < BT * KC; u += NTH) {
        const int r = u / KC, kk = u % KC;
        const int64_t k = k0 + kk;
        Hs[r * HLD + kk] = tv[r] && k < d_model ? H[hbase + (t0 + r) * P.h.sl + k * P.h.sk]
                                                 : from_f<T>(0.f);
      }
    }
    if (P.vec_w) {
#pragma unroll
      for (int v = 0; v < WV; ++v) {
        const int u = tid + v * NTH;
        if (u < DO * KC / EV)
          *reinterpret_cast<uint4 *>(Ws + u / (KC / EV) * HLD + u % (KC / EV) * EV) = wr[v];
      }
    } else {
      for (int u = tid; u < DO * KC; u += NTH) {
        const int o = u / KC, kk = u % KC;
        const int64_t k = k0 + kk;
        Ws[o * HLD + kk] = o < d_out && k < d_model ? W[o * P.wb.w_so + k * P.wb.w_sk] : from_f<T>(0.f);
      }
    }
  }
};

template <typename T, int NF>
__global__ void __launch_bounds__(NTH) head_fwd_kernel(const HParams P) {
  constexpr int DO = NF * 16, PLD = DO + 4, KC = Stage<T>::KC, HLD = Stage<T>::HLD;
  extern __shared__ __align__(128) unsigned char smem[];
  const int64_t lq = P.q.len, ld = P.h.len, d_out = P.q.dim, d_model = P.h.dim;
  const int64_t n = blockIdx.x; /* document: j (cross) or i*K + k (KD) */
  int64_t q0 = (int64_t)blockIdx.y * P.qpc, nqry = P.q.count - q0;
  if (P.kd) { q0 = n / P.ncand; nqry = 1; }
  if (nqry > P.qpc) nqry = P.qpc;
  const int64_t nqt = nqry * lq, c = P.kd ? n % P.ncand : n;

  T *Hs = reinterpret_cast<T *>(smem); /* [2][BT][HLD] */
  T *Ws = Hs + 2 * BT * HLD;            /* [2][DO][HLD] */
  float *Ps = reinterpret_cast<float *>(Ws + 2 * DO * HLD);
  float *rm = Ps + BT * PLD;
  int *ri = reinterpret_cast<int *>(rm + nqt);
  unsigned char *tv = reinterpret_cast<unsigned char *>(ri + nqt);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const T *H = reinterpret_cast<const T *>(P.h.data);
  const T *W = reinterpret_cast<const T *>(P.wb.w);
  const T *Qp = reinterpret_cast<const T *>(P.q.data);
  const int64_t hbase = seq_base(P.h, n);
  const int64_t nchunk = (d_model + KC - 1) / KC;
  ChunkLoader<T, DO> ld_;
  for (int64_t x = tid; x < nqt; x += NTH) { rm[x] = CUDART_NAN_F; ri[x] = -1; }

  for (int64_t t0 = 0; t0 < ld; t0 += BT) {
    __syncthreads();
    if (tid < BT) tv[tid] = t0 + tid < ld && tok_valid(P.hm, P.h, n, t0 + tid);
    __syncthreads();
    typename TileMma<T>::Acc acc[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) wm::fill_fragment(acc[f], 0.f);
    ld_.fetch(P, H, W, hbase, t0, 0, tv, tid);
    ld_.put(P, H, W, hbase, t0, 0, tv, tid, Hs, Ws);
    __syncthreads();
    for (int64_t c = 0; c < nchunk; ++c) {
      const int cur = (int)(c & 1);
      if (c + 1 < nchunk) ld_.fetch(P, H, W, hbase, t0, (c + 1) * KC, tv, tid);
      TileMma<T>::template chunk<NF>(acc, Hs + cur * BT * HLD + warp * 16 * HLD, Ws + cur * DO * HLD,
                                     P.tf32);
      /* the other buffer was last read before the previous barrier */
      if (c + 1 < nchunk)
        ld_.put(P, H, W, hbase, t0, (c + 1) * KC, tv, tid, Hs + (1 - cur) * BT * HLD,
                Ws + (1 - cur) * DO * HLD);
      __syncthreads();
    }
#pragma unroll
    for (int f = 0; f < NF; ++f)
      wm::store_matrix_sync(Ps + warp * 16 * PLD + f * 16, acc[f], PLD, wm::mem_row_major);
    __syncwarp();
    /* + b, then x / max(||x||, eps): each warp its 16 rows, one fixed order. */
    for (int r = warp * 16; r < warp * 16 + 16; ++r) {
      float ss = 0.f;
      for (int o = lane; o < DO; o += 32) {
        float v = Ps[r * PLD + o];
        if (P.wb.b && o < d_out) v += to_f<T>(reinterpret_cast<const T *>(P.wb.b)[o * P.wb.b_s]);
        Ps[r * PLD + o] = v;
        ss = fmaf(v, v, ss);
      }
#pragma unroll
      for (int m = 16; m > 0; m >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, m);
      if (P.normalize) {
        const float inv = 1.f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
        for (int o = lane; o < DO; o += 32) Ps[r * PLD + o] *= inv;
      }
    }
    __syncthreads();
    /* MaxSim of the block's query tokens over this tile: LPQ lanes per query
     * token, lane g takes tokens g, g + LPQ, ... (16 each; rows LPQ apart
     * land in distinct banks). */
    const int g = tid & (LPQ - 1);
    for (int64_t x0 = 0; x0 < nqt; x0 += NTH / LPQ) {
      const int64_t x = x0 + tid / LPQ;
      float bv = CUDART_NAN_F;
      int bi = -1;
      if (x < nqt) {
        const int64_t qi = q0 + x / lq, s = x % lq;
        if (tok_valid(P.qm, P.q, qi, s)) {
          float a[16];
#pragma unroll
          for (int tt = 0; tt < 16; ++tt) a[tt] = 0.f;
          const T *qrow = Qp + seq_base(P.q, qi) + s * P.q.sl;
          for (int64_t o = 0; o < d_out; ++o) {
            const float qv = to_f<T>(qrow[o * P.q.sk]);
#pragma unroll
            for (int tt = 0; tt < 16; ++tt) a[tt] = fmaf(qv, Ps[(g + LPQ * tt) * PLD + o], a[tt]);
          }
#pragma unroll
          for (int tt = 0; tt < 16; ++tt)
            if (tv[g + LPQ * tt] && takes_max(a[tt], bv)) { bv = a[tt]; bi = (int)(t0 + g + LPQ * tt); }
        }
      }
      argmax_lanes<LPQ>(bv, bi);
      if (g == 0 && x < nqt && bi >= 0 && takes_max(bv, rm[x])) { rm[x] = bv; ri[x] = bi; }
    }
  }
  __syncthreads();
  for (int64_t qq = tid; qq < nqry; qq += NTH)
    finish_query(P, q0 + qq, c, [&](int64_t s, float &v, int &i) {
      v = rm[qq * lq + s];
      i = ri[qq * lq + s];
    });
}

} // namespace head
} // namespace lik_cuda

#endif
