/*
 * plaid.cuh — kernels of the PLAID search on the GPU (src/cuda/plaid.cu runs
 * them; the stages and their rules are the CPU's, src/index/search.c):
 *
 *   prep      one warp per query token: the token in fp32, its squared norm
 *             summed in ascending k (mul, then add: the host's chain, run
 *             by every lane on shuffled values), the token normalised into
 *             qn [q][LQ][d]; zero[q][s] marks a token that probes nothing
 *             (all zero, NaN, or past the query's length)
 *   cs        centroid scores cs[q][c][s] (s padded to LQP, a multiple of 32)
 *             = one fp32 FMA chain in ascending k, as the host's
 *             lik_cpu_centroid_scores on an FMA machine; 256 centroids x 32
 *             tokens per CTA, a thread 8 x 4 of them, k in chunks through
 *             shared memory (tiles laid out for conflict-free loads and
 *             stores)
 *   cmax      (prune) the best score of each centroid over the query's tokens
 *   probe     per query token, the n_probe best centroids (score descending,
 *             then lower id; NaN last): the centroids split in ranges over
 *             CTAs (one query must fill the GPU too); in a CTA each warp scans
 *             a strided share of its range into per-lane sorted lists in
 *             shared memory and lane s of warp 0 merges the warps' lists of
 *             token s; probe_merge merges the ranges' lists
 *   mark      one warp per probed cell: its IVF list's bits set in the
 *             query's candidate bitmap (atomicOr)
 *   compact   one CTA per query: the bitmap (and the live documents) into an
 *             ascending candidate list (block scan of the words' popcounts);
 *             with tombstones and fewer than top_k candidates, every live
 *             document with tokens; the bitmap cleared for the next chunk
 *   approx    one warp per (query, candidate): lane s keeps the max over the
 *             document's tokens of cs[q][code][s] (tokens whose centroid
 *             scores below the threshold everywhere left out with prune),
 *             lane 0 sums the maxima in ascending s (a token nothing won adds
 *             nothing) — the host's sum, bitwise; written as a sort key
 *   select    a stage's survivors: the first keep of the sorted keys
 *   keys      the exact scores as sort keys; write: the top_k as scores / ids
 *
 * A sort key orders (score descending, then lower position; NaN last, -0 ==
 * +0: common.cuh's fkey) as one unsigned integer, so a segmented radix sort
 * (CUB) ranks every stage: key = fkey(score) << pb | (ndocs - 1 -
 * position), pb the bits of a position.  Lists are int32 positions (the
 * device copy has < 2^31 documents).
 */
#ifndef LIK_CUDA_PLAID_CUH
#define LIK_CUDA_PLAID_CUH

#include <cub/block/block_scan.cuh>

#include "common.cuh"
#include "residual_call.cuh"

namespace lik_cuda {
namespace plaid {

/* The device copy of an index (device pointers). */
struct KIndexCopy {
  const __half *cent;     /* [ncent][dim] */
  const int32_t *codes;   /* [ntok] */
  const int64_t *doc_off; /* [ndocs + 1] */
  const int64_t *ivf_off; /* [ncent + 1] */
  const int32_t *ivf;
  const int64_t *ids;     /* [ndocs] or NULL */
  const uint32_t *alive;  /* [words]: live documents */
  const uint32_t *full;   /* [words]: live documents with tokens */
  int64_t ncent, dim, ndocs, ndead, words;
};

/* A chunk of queries and its scratch. */
struct KChunk {
  KIndexCopy ix;
  KSeq q;              /* the call's Q (count: the whole call) */
  int q_dt;
  KIndex q_lengths;    /* data NULL: every query LQ tokens */
  int64_t q0, nq;      /* the chunk: queries q0 .. q0 + nq */
  int64_t lq, lqp;     /* LQ, and LQ padded to 32 */
  float *qn;           /* [nq][lq][dim] */
  uint8_t *zero;       /* [nq][lq] */
  int32_t *qlen;       /* [nq] */
  float *cs;           /* [nq][ncent][lqp] */
  float *cmax;         /* [nq][ncent] */
  int32_t *probes;     /* [nq][lq][np] */
  int64_t np;
  uint32_t *bits;      /* [nq][words] */
  int64_t cap;         /* slots per query of cand / keys: ndocs */
  int pb;              /* bits of a position in a key */
  int64_t top_k;
};

/* The score of a key's top 32 bits (fkey's inverse; NaN for 0). */
__device__ __forceinline__ float from_fkey(uint32_t k) {
  if (k == 0u) return CUDART_NAN_F;
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ uint64_t make_key(float s, int64_t pos, int64_t ndocs, int pb) {
  return (uint64_t)fkey(s) << pb | (uint64_t)(ndocs - 1 - pos);
}

__device__ __forceinline__ int64_t key_pos(uint64_t k, int64_t ndocs, int pb) {
  return ndocs - 1 - (int64_t)(k & (((uint64_t)1 << pb) - 1));
}

__device__ __forceinline__ int64_t query_len(const KChunk &P, int64_t q) {
  if (!P.q_lengths.data) return P.lq;
  const int64_t l = kidx(P.q_lengths, P.q0 + q);
  return l < 0 ? 0 : l > P.lq ? P.lq : l;
}

/* ---- prep: one warp per token --------------------------------------------------- */

__global__ void prep_kernel(KChunk P) {
  const int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (t >= P.nq * P.lq) return;
  const int64_t q = t / P.lq, s = t % P.lq, len = query_len(P, q), dim = P.ix.dim;
  if (s == 0 && lane == 0) P.qlen[q] = (int32_t)len;
  float *dst = P.qn + t * dim;
  if (s >= len) {
    for (int64_t k = lane; k < dim; k += 32) dst[k] = 0.f;
    if (lane == 0) P.zero[t] = 1;
    return;
  }
  const int64_t off = (P.q0 + q) * P.q.sn + s * P.q.sl;
  float ss = 0.f; /* every lane: the one chain over k ascending (mul, then add) */
  for (int64_t k0 = 0; k0 < dim; k0 += 32) {
    const int64_t k = k0 + lane;
    const float v = k < dim ? res::load_f(P.q.data, P.q_dt, off + k * P.q.sk) : 0.f;
    if (k < dim) dst[k] = v;
    const int n = dim - k0 < 32 ? (int)(dim - k0) : 32;
    for (int r = 0; r < n; r++) {
      const float u = __shfl_sync(0xffffffffu, v, r);
      ss = __fadd_rn(ss, __fmul_rn(u, u));
    }
  }
  if (lane == 0) P.zero[t] = !(ss > 0.f);
  const float inv = 1.0f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
  __syncwarp();
  for (int64_t k = lane; k < dim; k += 32) dst[k] = __fmul_rn(dst[k], inv);
}

/* ---- centroid scores: CS_C centroids x 32 tokens per CTA of 256 threads, a
 * thread 8 centroids x 4 tokens (tokens tg, tg + 8, tg + 16, tg + 24: their
 * rows of the query tile in distinct banks); each score one fp32 FMA chain
 * over the features in order (the host's sums, bit for bit).  The query tile
 * is [token][k] (rows padded to CS_QLD floats; 4 k-values by one 16-byte
 * load), the centroid tile [k][centroid] (8 centroids by two 16-byte loads);
 * the centroids' fp16 rows are staged by 16-byte loads where d is a multiple
 * of 8, consecutive threads on consecutive centroids (conflict-free stores),
 * else a 2-byte load per thread ---- */

constexpr int CS_C = 256, CS_K = 32, CS_QLD = CS_K + 4;

__global__ void __launch_bounds__(256) cs_kernel(KChunk P) {
  __shared__ __align__(16) float qs[32][CS_QLD]; /* [token][k] */
  __shared__ __align__(16) float ct[CS_K][CS_C]; /* [k][centroid] */
  const int64_t q = blockIdx.z, c0 = (int64_t)blockIdx.x * CS_C, s0 = (int64_t)blockIdx.y * 32;
  const int tg = threadIdx.x & 7, cg = threadIdx.x >> 3; /* tokens tg + 8i, centroids 8cg .. 8cg+7 */
  const int64_t dim = P.ix.dim;
  const bool vec = dim % 8 == 0; /* 16-byte aligned pieces of the rows */
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[j][i] = 0.f;
  for (int64_t k0 = 0; k0 < dim; k0 += CS_K) {
    __syncthreads();
    for (int e = threadIdx.x; e < 32 * (CS_K / 4); e += blockDim.x) {
      const int r = e / (CS_K / 4), k4 = 4 * (e % (CS_K / 4));
      const int64_t s = s0 + r;
      float v[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int64_t k = k0 + k4 + u;
        v[u] = s < P.lq && k < dim ? P.qn[(q * P.lq + s) * dim + k] : 0.f;
      }
      *(float4 *)&qs[r][k4] = make_float4(v[0], v[1], v[2], v[3]);
    }
    if (vec) {
      for (int e = threadIdx.x; e < CS_C * (CS_K / 8); e += blockDim.x) {
        const int r = e % CS_C, h = e / CS_C;
        const int64_t c = c0 + r, k = k0 + 8 * h;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (c < P.ix.ncent && k < dim) v = __ldg(reinterpret_cast<const uint4 *>(P.ix.cent + c * dim + k));
        const __half2 *hv = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const float2 f = __half22float2(hv[i]);
          ct[8 * h + 2 * i][r] = f.x;
          ct[8 * h + 2 * i + 1][r] = f.y;
        }
      }
    } else {
      for (int e = threadIdx.x; e < CS_C * CS_K; e += blockDim.x) {
        const int r = e % CS_C, kk = e / CS_C;
        const int64_t c = c0 + r, k = k0 + kk;
        ct[kk][r] = c < P.ix.ncent && k < dim ? __half2float(P.ix.cent[c * dim + k]) : 0.f;
      }
    }
    __syncthreads();
    const int kn = dim - k0 < CS_K ? (int)(dim - k0) : CS_K;
    int kk = 0;
    for (; kk + 4 <= kn; kk += 4) {
      float4 qv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) qv[i] = *(const float4 *)&qs[tg + 8 * i][kk];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const float4 a = *(const float4 *)&ct[kk + u][8 * cg], b = *(const float4 *)&ct[kk + u][8 * cg + 4];
        const float cv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const float x = u == 0 ? qv[i].x : u == 1 ? qv[i].y : u == 2 ? qv[i].z : qv[i].w;
#pragma unroll
          for (int j = 0; j < 8; j++) acc[j][i] = __fmaf_rn(x, cv[j], acc[j][i]);
        }
      }
    }
    for (; kk < kn; kk++) { /* the last chunk's k-values past a multiple of 4 */
      const float4 a = *(const float4 *)&ct[kk][8 * cg], b = *(const float4 *)&ct[kk][8 * cg + 4];
      const float cv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const float x = qs[tg + 8 * i][kk];
#pragma unroll
        for (int j = 0; j < 8; j++) acc[j][i] = __fmaf_rn(x, cv[j], acc[j][i]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 8; j++) {
    const int64_t c = c0 + 8 * cg + j;
    if (c < P.ix.ncent)
#pragma unroll
      for (int i = 0; i < 4; i++) P.cs[(q * P.ix.ncent + c) * P.lqp + s0 + tg + 8 * i] = acc[j][i];
  }
}

/* ---- cmax: one thread per (query, centroid) ---------------------------------------- */

__global__ void cmax_kernel(KChunk P) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= P.nq * P.ix.ncent) return;
  const int64_t q = t / P.ix.ncent;
  const float *row = P.cs + t * P.lqp;
  float m = -INFINITY;
  for (int s = 0; s < P.qlen[q]; s++) m = fmaxf(m, row[s]);
  P.cmax[t] = m;
}

/* ---- probe: CTA (32 tokens of a query, one of `splits` ranges of the
 * centroids) of W warps; its best np per token into part; probe_merge then
 * merges the ranges' lists ---------------------------------------------------- */

__global__ void probe_kernel(KChunk P, int splits, float *part_s, int32_t *part_i) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int W = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t np = P.np;
  float *ls = (float *)smem;                   /* [W][np][32] */
  int32_t *li = (int32_t *)(ls + W * np * 32); /* [W][np][32] */
  int32_t *cnt = li + W * np * 32;             /* [W][32] */
  const int64_t q = blockIdx.z, s = (int64_t)blockIdx.x * 32 + lane, sp = blockIdx.y;
  const int64_t per = (P.ix.ncent + splits - 1) / splits, c_lo = sp * per;
  const int64_t c_hi = c_lo + per < P.ix.ncent ? c_lo + per : P.ix.ncent;
  const bool on = s < P.lq && !P.zero[q * P.lq + s];
  float *ws = ls + (int64_t)warp * np * 32;
  int32_t *wi = li + (int64_t)warp * np * 32;
  int n = 0;
  constexpr int PF = 8; /* scores loaded ahead of their insertion */
  const float *col = P.cs + q * P.ix.ncent * P.lqp + s;
  if (on)
    for (int64_t c0 = c_lo + warp; c0 < c_hi; c0 += PF * W) {
      float vs[PF];
#pragma unroll
      for (int u = 0; u < PF; u++) {
        const int64_t c = c0 + (int64_t)u * W;
        vs[u] = c < c_hi ? col[c * P.lqp] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < PF; u++) {
        const int64_t c = c0 + (int64_t)u * W;
        if (c >= c_hi) break;
        const float v = vs[u];
        int pos;
        if (n < np) pos = n++;
        else if (rbetter(v, c, ws[(np - 1) * 32 + lane], wi[(np - 1) * 32 + lane])) pos = (int)np - 1;
        else continue;
        while (pos > 0 && rbetter(v, c, ws[(pos - 1) * 32 + lane], wi[(pos - 1) * 32 + lane])) {
          ws[pos * 32 + lane] = ws[(pos - 1) * 32 + lane];
          wi[pos * 32 + lane] = wi[(pos - 1) * 32 + lane];
          pos--;
        }
        ws[pos * 32 + lane] = v;
        wi[pos * 32 + lane] = (int32_t)c;
      }
    }
  cnt[warp * 32 + lane] = n;
  __syncthreads();
  if (warp != 0 || s >= P.lq) return;
  const int64_t o = ((q * P.lq + s) * splits + sp) * np;
  int head[32];
  for (int w = 0; w < W; w++) head[w] = 0;
  for (int64_t r = 0; r < np; r++) {
    int bw = -1;
    float bv = 0.f;
    int32_t bc = -1;
    for (int w = 0; w < W; w++) {
      if (head[w] >= cnt[w * 32 + lane]) continue;
      const int64_t e = ((int64_t)w * np + head[w]) * 32 + lane;
      if (bw < 0 || rbetter(ls[e], li[e], bv, bc)) {
        bw = w;
        bv = ls[e];
        bc = li[e];
      }
    }
    part_s[o + r] = bv;
    part_i[o + r] = bc; /* -1: no more centroids in this range */
    if (bw >= 0) head[bw]++;
  }
}

/* A warp per (query, token): the np best of the splits' sorted lists (at
 * most 64).  Lane l holds the heads of ranges l and l + 32 and the entry
 * after each (loaded while the warp merges); each round the warp's best head
 * (rbetter: score descending, then lower id, NaN last; the ranges' ids are
 * disjoint, so the best is unique) is the next probe and its range advances.
 * -1 (a range with no more centroids) never wins; a round nothing wins
 * writes -1.  The same lists as a serial merge, without its serial loads. */
__global__ void probe_merge_kernel(KChunk P, int splits, const float *part_s,
                                   const int32_t *part_i) {
  const int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (t >= P.nq * P.lq) return; /* warp-uniform */
  const int64_t np = P.np, base = t * splits * np;
  int32_t *out = P.probes + t * np;
  /* entry h of range sp, or (0, -1) past its list */
  auto entry = [&](int sp, int64_t h, float &v, int32_t &c) {
    c = -1;
    v = 0.f;
    if (sp < splits && h < np) {
      const int64_t e = base + sp * np + h;
      c = part_i[e];
      if (c >= 0) v = part_s[e];
    }
  };
  int64_t h[2] = {0, 0};
  float v[2], nv[2];
  int32_t c[2], nc[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    entry(lane + 32 * k, 0, v[k], c[k]);
    entry(lane + 32 * k, 1, nv[k], nc[k]);
  }
  for (int64_t r = 0; r < np; ++r) {
    const bool one = c[1] >= 0 && (c[0] < 0 || rbetter(v[1], c[1], v[0], c[0]));
    float bv = one ? v[1] : v[0];
    int32_t bc = one ? c[1] : c[0];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int32_t oc = __shfl_xor_sync(0xffffffffu, bc, o);
      if (oc >= 0 && (bc < 0 || rbetter(ov, oc, bv, bc))) {
        bv = ov;
        bc = oc;
      }
    }
    if (lane == 0) out[r] = bc;
#pragma unroll
    for (int k = 0; k < 2; ++k)
      if (bc >= 0 && c[k] == bc) { /* this lane's range k won: its next entry moves up */
        v[k] = nv[k];
        c[k] = nc[k];
        entry(lane + 32 * k, ++h[k] + 1, nv[k], nc[k]);
      }
  }
}

/* ---- mark: one warp per (query, token, probe) --------------------------------------- */

__global__ void mark_kernel(KChunk P) {
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= P.nq * P.lq * P.np) return;
  const int32_t c = P.probes[w];
  if (c < 0) return;
  const int64_t q = w / (P.lq * P.np);
  uint32_t *bits = P.bits + q * P.ix.words;
  for (int64_t e = P.ix.ivf_off[c] + lane; e < P.ix.ivf_off[c + 1]; e += 32) {
    const int32_t j = P.ix.ivf[e];
    atomicOr(bits + (j >> 5), 1u << (j & 31));
  }
}

/* ---- compact: one CTA of CT threads per query ------------------------------------- */

constexpr int CT = 1024;

__global__ void __launch_bounds__(CT) compact_kernel(KChunk P, int32_t *cand, int32_t *ncand) {
  typedef cub::BlockScan<int, CT> Scan;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int any, total;
  const int64_t q = blockIdx.x;
  uint32_t *bits = P.bits + q * P.ix.words;
  int32_t *out = cand + q * P.cap;
  if (threadIdx.x == 0) any = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < P.lq; s += CT)
    if (!P.zero[q * P.lq + s]) any = 1;
  __syncthreads();
  /* pass 0: the probed lists' live documents; pass 1 (tombstones, fewer than
   * top_k, something probed): every live document with tokens */
  for (int pass = 0; pass < 2; pass++) {
    int base = 0;
    for (int64_t w0 = 0; w0 < P.ix.words; w0 += CT) {
      const int64_t w = w0 + threadIdx.x;
      uint32_t word = 0;
      if (w < P.ix.words) {
        word = pass ? P.ix.full[w] : bits[w] & P.ix.alive[w];
        if (!pass) bits[w] = 0;
      }
      int off, sum;
      Scan(tmp).ExclusiveSum(__popc(word), off, sum);
      for (int o = base + off; word; word &= word - 1) out[o++] = (int32_t)(w * 32 + __ffs(word) - 1);
      base += sum;
      __syncthreads();
    }
    if (threadIdx.x == 0) total = base;
    __syncthreads();
    if (pass || !(any && P.ix.ndead > 0 && total < P.top_k)) break;
  }
  if (threadIdx.x == 0) ncand[q] = any ? total : 0;
}

/* ---- approx: one warp per (query, slot) ------------------------------------------- */

__global__ void approx_kernel(KChunk P, const int32_t *list, const int32_t *nlist, int64_t lcap,
                              int prune, float thr, uint64_t *keys) {
  const int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= P.nq * lcap) return;
  const int64_t q = w / lcap, slot = w % lcap;
  if (slot >= nlist[q]) return;
  const int64_t j = list[q * lcap + slot], t0 = P.ix.doc_off[j], t1 = P.ix.doc_off[j + 1];
  const int len = P.qlen[q];
  const float *cs = P.cs + q * P.ix.ncent * P.lqp;
  const float *cm = P.cmax + q * P.ix.ncent;
  float score = 0.f;
  for (int s0 = 0; s0 < len; s0 += 32) {
    float m = -INFINITY;
    for (int64_t tb = t0; tb < t1; tb += 32) {
      const int32_t mine = tb + lane < t1 ? __ldg(P.ix.codes + tb + lane) : 0;
      const int n = t1 - tb < 32 ? (int)(t1 - tb) : 32;
      for (int u = 0; u < n; u++) {
        const int32_t c = __shfl_sync(0xffffffffu, mine, u);
        if (prune && !(cm[c] >= thr)) continue;
        const float v = cs[(int64_t)c * P.lqp + s0 + lane];
        if (v > m) m = v;
      }
    }
    for (int r = 0; r < 32 && s0 + r < len; r++) {
      const float v = __shfl_sync(0xffffffffu, m, r);
      if (v != -INFINITY) score += v; /* every lane: the same sum */
    }
  }
  if (lane == 0) keys[q * P.cap + slot] = make_key(score, j, P.ix.ndocs, P.pb);
}

/* ---- segments, select, keys, write ------------------------------------------------ */

/* Sort segments of the chunk's queries: [q * cap, q * cap + n[q]). */
__global__ void segments_kernel(KChunk P, const int32_t *n, int *begin, int *end) {
  const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= P.nq) return;
  begin[q] = (int)(q * P.cap);
  end[q] = (int)(q * P.cap + n[q]);
}

/* The first keep(n) positions of each query's sorted keys into out [nq][ocap]:
 * keep = min(n, m) when n > gate, else n. */
__global__ void select_kernel(KChunk P, const uint64_t *keys, const int32_t *n, int64_t gate,
                              int64_t m, int32_t *out, int32_t *nout, int64_t ocap) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= P.nq * ocap) return;
  const int64_t q = t / ocap, r = t % ocap, nq = n[q];
  const int64_t keep = nq > gate && m < nq ? m : nq;
  if (r == 0) nout[q] = (int32_t)keep;
  if (r < keep) out[t] = (int32_t)key_pos(keys[q * P.cap + r], P.ix.ndocs, P.pb);
}

__global__ void keys_kernel(KChunk P, const float *sc, const int32_t *list, const int32_t *n,
                            int64_t lcap, uint64_t *keys) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= P.nq * lcap) return;
  const int64_t q = t / lcap, r = t % lcap;
  if (r < n[q]) keys[q * P.cap + r] = make_key(sc[t], list[t], P.ix.ndocs, P.pb);
}

/* Outputs of the chunk's queries (n NULL: no results). */
__global__ void write_kernel(KChunk P, const uint64_t *keys, const int32_t *n, float *scores,
                             int64_t s_i, int64_t s_k, int64_t *ids, int64_t i_i, int64_t i_k) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= P.nq * P.top_k) return;
  const int64_t q = t / P.top_k, r = t % P.top_k, g = P.q0 + q;
  float s = -INFINITY;
  int64_t id = -1;
  if (n && r < n[q]) {
    const uint64_t k = keys[q * P.cap + r];
    const int64_t pos = key_pos(k, P.ix.ndocs, P.pb);
    s = from_fkey((uint32_t)(k >> P.pb));
    id = P.ix.ids ? P.ix.ids[pos] : pos;
  }
  scores[g * s_i + r * s_k] = s;
  ids[g * i_i + r * i_k] = id;
}

} // namespace plaid
} // namespace lik_cuda

#endif
