/*
 * residual.cuh — CUDA kernels of compressed late interaction
 * (lik_experimental.h): decoding (lik_codec_decompress), PLAID's centroid
 * score, and residual MaxSim, which decodes document tiles into shared memory
 * and scores them on the tensor cores (never a dense [Nd, Ld, d] tensor); the
 * full scan's common case (d 128, nbits 2 / 4, a half query, no argmax) runs
 * residual_scan.cuh's register-decode kernel instead.
 *
 * Decoding (the CPU's semantics, src/cpu/residual_decode.h): dimension k of a
 * token is centroid[code][k] + weights[bucket_k] in fp32; with normalize,
 * times 1 / max(||x||, 1e-12).  A thread decodes 8 dimensions: their bucket
 * indices are nbits consecutive residual bytes (each COLBERT byte
 * bit-reversed into the LIK order), dimension e at bits e*nbits.
 *
 * residual_maxsim (one CTA of 4 warps per (query group, document) item,
 * grid-stride; the PLAID lists' items in equal contiguous shares, so that a
 * CTA's query block stays loaded and short lists leave no CTA idle): the
 * query block (QB = 16*MT rows, normalised, as T) sits in
 * shared memory -- in the full scan of short queries (Lq <= 32) up to 128
 * rows of qpg stacked queries, qslot rows each, so that every decoded tile
 * serves all of them (the PLAID search's lists: one query per item); T = float for an fp32 / fp64 Q outside the PLAID search's
 * lists (fp32 accuracy: 3xTF32; one TF32 product under LIK_FP32_TF32),
 * else fp16 when normalize and bf16 without
 * (range).  The document is streamed in tiles of BN tokens.  The codes and
 * residual offsets of SUPER tiles are read in one round trip; all 128
 * threads then decode a tile into shared memory as T: each thread's first
 * round of loads (up to 4 groups of 8 dimensions: the group's nbits residual
 * bytes, its 16-byte fp16 centroid slice) is issued before the previous
 * tile's products, so that their latency overlaps them; for half types it
 * then adds
 * centroid and weights as T pairs, the weights of a whole byte read from a
 * per-call table of the 256 byte values (the bit layout folded in); float
 * tiles hold decode_group's fp32 values.  The squares are summed in fp32 (per
 * token in a fixed order -> 1 / ||x||).  Warp w takes n8 tiles w, w + 4,
 * ... and computes S = Q_blk . X^T with mma.sync (m16n8k16 of T, or
 * m16n8k8.tf32 x 3 for float; fp32 accumulation; A and B by ldmatrix over
 * 32-byte k-steps), scales each
 * column by its 1 / ||x||, masks tokens past the length (or with a code
 * outside [0, C): never read) and keeps a running max / argmax per query row
 * in registers (strict >: lowest index).  At the end of an item: quad
 * shuffles, a cross-warp merge in shared memory, and one thread sums the rows
 * in order (deterministic).  Longer queries loop over query blocks.
 * Offsets are 64-bit throughout (residual arrays over 2^31 bytes).
 */
#ifndef LIK_CUDA_RESIDUAL_CUH
#define LIK_CUDA_RESIDUAL_CUH

#include <type_traits>

#include "ptx.cuh"
#include "residual_call.cuh"

namespace lik_cuda {
namespace res {

__device__ __forceinline__ int64_t doc_len(const KTok &k, int64_t n) {
  if (k.offsets.data) return kidx(k.offsets, n + 1) - kidx(k.offsets, n);
  if (!k.lengths.data) return k.len;
  const int64_t l = kidx(k.lengths, n);
  return l < 0 ? 0 : l > k.len ? k.len : l;
}

/* Flat position of token l of document n: the code at codes[pos.x], the
 * residual bytes at res[pos.y + p * res_sp]. */
__device__ __forceinline__ longlong2 tok_pos(const KTok &k, int64_t n, int64_t l) {
  if (k.offsets.data) {
    const int64_t r = kidx(k.offsets, n) + l;
    return make_longlong2(r * k.code_s, r * k.res_st);
  }
  return make_longlong2(n * k.code_sn + l * k.code_s, n * k.res_sn + l * k.res_st);
}

__device__ __forceinline__ int64_t code_at(const KTok &k, int64_t off) {
  return k.codes64 ? (int64_t)__ldg((const long long *)k.codes + off)
                   : (int64_t)__ldg((const int *)k.codes + off);
}

/* The bits of each byte of v reversed (a COLBERT word to the LIK order). */
__device__ __forceinline__ uint32_t reverse_bytes_bits(uint32_t v) {
  return __brev(__byte_perm(v, 0, 0x0123));
}

/* The nbits residual bytes of dimensions k0 .. k0+7 (k0 a multiple of 8),
 * byte m at bits 8m (0 past the row). */
__device__ __forceinline__ uint64_t group_bytes(const KCodec &c, const uint8_t *res, int64_t sp,
                                                int res_vec, int64_t k0) {
  const int64_t b0 = k0 * c.nbits / 8;
  if (res_vec && b0 + c.nbits <= c.width) /* contiguous, aligned bytes: one load */
    switch (c.nbits) {
      case 1: return __ldg(res + b0);
      case 2: return __ldg((const unsigned short *)(res + b0));
      case 4: return __ldg((const unsigned int *)(res + b0));
      default: return __ldg((const unsigned long long *)(res + b0));
    }
  uint64_t u = 0;
  for (int i = 0; i < c.nbits; i++)
    if (b0 + i < c.width) u |= (uint64_t)__ldg(res + (b0 + i) * sp) << (8 * i);
  return u;
}

/* What a thread fetches from global memory for 8 dimensions k0 .. k0+7 of
 * a token (issued for several groups before any is used, so that their
 * latencies overlap): the group's residual bytes and, where 16-byte loads
 * apply (fp16 centroids; T = __half or float, which use them), the 8 fp16
 * centroid values. */
struct Group {
  uint64_t u;
  uint4 cent;
};

template <typename T>
__device__ __forceinline__ Group fetch8(const KCodec &c, int64_t code, const uint8_t *res,
                                        int64_t sp, int res_vec, int64_t k0) {
  Group g;
  g.u = group_bytes(c, res, sp, res_vec, k0);
  if (c.cent_vec && k0 + 8 <= c.dim && !std::is_same<T, __nv_bfloat16>::value)
    g.cent = __ldg((const uint4 *)((const __half *)c.cent + code * c.cent_sc + k0));
  return g;
}

/* Dimensions k0 .. k0+7 of a token in fp32 (decompress) from its fetched
 * group g: x[e], 0 past dim.  Dimension e's bucket index is at bits
 * e * nbits of the group's bytes in the LIK order (a COLBERT byte
 * bit-reversed). */
__device__ __forceinline__ void decode_group(const KCodec &c, const float *wv, int64_t code,
                                             const Group &g, int64_t k0, float x[8]) {
  uint64_t u = g.u;
  if (c.colbert)
    u = (uint64_t)reverse_bytes_bits((uint32_t)u) | (uint64_t)reverse_bytes_bits((uint32_t)(u >> 32)) << 32;
  const uint32_t mask = (1u << c.nbits) - 1u;
  const bool vec = c.cent_vec && k0 + 8 <= c.dim;
  const __half *ch = (const __half *)&g.cent;
#pragma unroll
  for (int e = 0; e < 8; e++)
    x[e] = k0 + e < c.dim
               ? (vec ? __half2float(ch[e])
                      : load_f(c.cent, c.cent_dt, code * c.cent_sc + (k0 + e) * c.cent_sk)) +
                     wv[(u >> (e * c.nbits)) & mask]
               : 0.f;
}

__device__ __forceinline__ void decode8(const KCodec &c, const float *wv, int64_t code,
                                        const uint8_t *res, int64_t sp, int res_vec, int64_t k0,
                                        float x[8]) {
  decode_group(c, wv, code, fetch8<float>(c, code, res, sp, res_vec, k0), k0, x);
}

/* The codec's weights into shared memory (256 entries, zero past 2^nbits). */
__device__ __forceinline__ void load_weights(const KCodec &c, float *wv) {
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    wv[b] = b < (1 << c.nbits) ? load_f(c.weights, c.w_dt, b * c.ws) : 0.f;
  __syncthreads();
}

/* ---- decompress: one warp per token ------------------------------------------- */

struct KDecomp {
  KCodec c;
  KTok t; /* one sequence of len tokens */
  void *out;
  int out_dt;
  int64_t out_sl, out_sk;
  int normalize;
};

__global__ void __launch_bounds__(256) decompress_kernel(KDecomp P) {
  __shared__ float wv[256];
  load_weights(P.c, wv);
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t t = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; t < P.t.len;
       t += nwarps) {
    const longlong2 pos = tok_pos(P.t, 0, t);
    const int64_t code = code_at(P.t, pos.x);
    const uint8_t *r = P.t.res + pos.y;
    float inv = 1.f;
    if (P.normalize) {
      float ss = 0.f;
      for (int64_t k0 = 8 * lane; k0 < P.c.dim; k0 += 256) {
        float x[8];
        decode8(P.c, wv, code, r, P.t.res_sp, P.t.res_vec, k0, x);
#pragma unroll
        for (int e = 0; e < 8; e++) ss += x[e] * x[e];
      }
#pragma unroll
      for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      inv = 1.f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
    }
    for (int64_t k0 = 8 * lane; k0 < P.c.dim; k0 += 256) {
      float x[8];
      decode8(P.c, wv, code, r, P.t.res_sp, P.t.res_vec, k0, x);
      for (int e = 0; e < 8 && k0 + e < P.c.dim; e++) {
        const int64_t o = t * P.out_sl + (k0 + e) * P.out_sk;
        const float v = x[e] * inv;
        switch (P.out_dt) {
          case LIK_F16: ((__half *)P.out)[o] = __float2half_rn(v); break;
          case LIK_BF16: ((__nv_bfloat16 *)P.out)[o] = __float2bfloat16_rn(v); break;
          case LIK_F64: ((double *)P.out)[o] = v; break;
          default: ((float *)P.out)[o] = v; break;
        }
      }
    }
  }
}

/* ---- PLAID's centroid score: one CTA per (query, document) item ---------------- */

struct KApprox {
  lik_cscores cs; /* the host's view */
  KTok t;
  float *scores;
  int64_t ssi, ssj;
};

__global__ void __launch_bounds__(128) approx_kernel(KApprox P) {
  __shared__ float rowv[128];
  for (int64_t item = blockIdx.x; item < P.cs.nq * P.t.count; item += gridDim.x) {
    const int64_t i = item / P.t.count, j = item % P.t.count, len = doc_len(P.t, j);
    float score = 0.f;
    for (int64_t s0 = 0; s0 < P.cs.lq; s0 += blockDim.x) {
      const int64_t s = s0 + threadIdx.x;
      float m = -INFINITY;
      if (s < P.cs.lq)
        for (int64_t l = 0; l < len; l++) {
          const int64_t c = code_at(P.t, tok_pos(P.t, j, l).x);
          if (c < 0 || c >= P.cs.ncent) continue;
          const float v = load_f(P.cs.data, P.cs.dtype, i * P.cs.si + s * P.cs.ss + c * P.cs.sc);
          if (v > m) m = v;
        }
      rowv[threadIdx.x] = m != -INFINITY ? m : 0.f;
      __syncthreads();
      if (threadIdx.x == 0)
        for (int64_t r = 0; r < blockDim.x && s0 + r < P.cs.lq; r++) score += rowv[r];
      __syncthreads();
    }
    if (threadIdx.x == 0) P.scores[i * P.ssi + j * P.ssj] = score;
  }
}

/* ---- residual MaxSim ------------------------------------------------------------ */

/* Where dimension k of a d = 128 query row sits in the full scan's layout
 * (residual_scan.cuh): its 8-dimension chunk c = k / 8 is thread t = 2 (c / 8)
 * + c % 2's chunk m = c % 8 / 2, whose dimensions 4h .. 4h+3 are k-step
 * j = 2m + h's MMA columns 2t, 2t+1, 2t+8, 2t+9. */
__device__ __forceinline__ int scan_pos(int k) {
  const int c = k >> 3, h = (k >> 2) & 1, e = k & 3;
  const int t = 2 * (c >> 3) + (c & 1), j = 2 * ((c & 7) >> 1) + h;
  return 16 * j + 2 * t + (e & 1) + ((e >> 1) << 3);
}

/* Query block (rows r0 .. r0 + QB) of query i into qs (normalised as T);
 * PERM: each row's dimension k at scan_pos(k).  A warp a row; a lane's
 * dimensions lane + 32 u are loaded LQ_U at a time, independently (one
 * memory latency a chunk, not one a dimension), and the row's first chunk
 * stays in registers for the store; the squares are summed in the same
 * order as one load at a time (the same bits). */
constexpr int LQ_U = 4;
template <typename T, int QB, bool PERM = false>
__device__ void load_query(const KRes &P, int qpg, int qslot, int64_t i, int64_t r0, T *qs) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  for (int r = warp; r < QB; r += 4) {
    const int64_t q = i * qpg + r / qslot, s = r0 + r % qslot;
    const bool ok = q < P.nq && s < P.lq;
    const int64_t base = q * P.q_sn + s * P.q_sl;
    auto load = [&](int64_t k0, float (&x)[LQ_U]) {
#pragma unroll
      for (int u = 0; u < LQ_U; u++) {
        const int64_t k = k0 + lane + 32 * u;
        x[u] = ok && k < P.c.dim ? load_f(P.q, P.q_dt, base + k * P.q_sk) : 0.f;
      }
    };
    float x0[LQ_U];
    load(0, x0);
    auto chunk = [&](int64_t k0, float (&x)[LQ_U]) { /* the first chunk from x0 */
      if (k0 == 0) {
#pragma unroll
        for (int u = 0; u < LQ_U; u++) x[u] = x0[u];
      } else {
        load(k0, x);
      }
    };
    float inv = 1.f;
    if (ok && P.normalize) {
      float ss = 0.f;
      for (int64_t k0 = 0; k0 < P.c.dim; k0 += 32 * LQ_U) {
        float x[LQ_U];
        chunk(k0, x);
#pragma unroll
        for (int u = 0; u < LQ_U; u++)
          if (k0 + lane + 32 * u < P.c.dim) ss += x[u] * x[u];
      }
#pragma unroll
      for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      inv = 1.f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS);
    }
    for (int64_t k0 = 0; k0 < P.dpad; k0 += 32 * LQ_U) {
      float x[LQ_U];
      chunk(k0, x);
#pragma unroll
      for (int u = 0; u < LQ_U; u++) {
        const int64_t k = k0 + lane + 32 * u;
        if (k < P.dpad)
          qs[r * P.ldr + (PERM ? scan_pos((int)k) : k)] = from_f<T>(ok && k < P.c.dim ? x[u] * inv : 0.f);
      }
    }
  }
}

/* The weights of every byte value's 8/nbits dimensions, as T: wt[b * cpb +
 * i] is the weight of dimension i of a byte b (the layout folded in). */
template <typename T>
__device__ void byte_table(const KCodec &c, const float *wv, T *wt) {
  const int cpb = 8 / c.nbits;
  for (int e = threadIdx.x; e < 256 * cpb; e += blockDim.x) {
    const uint32_t b = e / cpb, byte = c.colbert ? __brev(b) >> 24 : b;
    wt[e] = from_f<T>(wv[(byte >> (e % cpb * c.nbits)) & ((1u << c.nbits) - 1u)]);
  }
  __syncthreads();
}

template <typename T2>
__device__ __forceinline__ T2 as_pair(uint32_t v) {
  T2 r;
  memcpy(&r, &v, 4);
  return r;
}

template <typename T2>
__device__ __forceinline__ uint32_t as_word(T2 v) {
  uint32_t r;
  memcpy(&r, &v, 4);
  return r;
}

/* The 8 dimensions as T, centroid + weight (the weight rounded to T, the sum
 * in T), 0 past dim; returns their squares' sum (fp32).  Pairs of T travel as
 * 32-bit words (registers, no local arrays). */
template <typename T>
__device__ __forceinline__ float finish8(const KCodec &c, const T *wt, int64_t code, const Group &g,
                                         int64_t k0, uint4 &out) {
  using T2 = typename std::conditional<std::is_same<T, __half>::value, __half2, __nv_bfloat162>::type;
  const uint64_t u = g.u;
  uint32_t w[4]; /* the 8 weights: byte m gives dimensions m*cpb .. */
  switch (c.nbits) {
    case 1: {
      const uint4 a = *(const uint4 *)(wt + (u & 255) * 8);
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
      break;
    }
    case 2: {
      const uint2 a = *(const uint2 *)(wt + (u & 255) * 4), b = *(const uint2 *)(wt + (u >> 8 & 255) * 4);
      w[0] = a.x, w[1] = a.y, w[2] = b.x, w[3] = b.y;
      break;
    }
    case 4:
#pragma unroll
      for (int m = 0; m < 4; m++) w[m] = *(const uint32_t *)(wt + (u >> (8 * m) & 255) * 2);
      break;
    default:
#pragma unroll
      for (int m = 0; m < 4; m++)
        w[m] = (uint32_t)*(const unsigned short *)(wt + (u >> (16 * m) & 255)) |
               (uint32_t)*(const unsigned short *)(wt + (u >> (16 * m + 8) & 255)) << 16;
  }
  uint32_t cw[4];
  if (c.cent_vec && k0 + 8 <= c.dim && std::is_same<T, __half>::value) {
    cw[0] = g.cent.x, cw[1] = g.cent.y, cw[2] = g.cent.z, cw[3] = g.cent.w;
  } else {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      T2 p;
      p.x = from_f<T>(k0 + 2 * e < c.dim ? load_f(c.cent, c.cent_dt, code * c.cent_sc + (k0 + 2 * e) * c.cent_sk) : 0.f);
      p.y = from_f<T>(k0 + 2 * e + 1 < c.dim
                          ? load_f(c.cent, c.cent_dt, code * c.cent_sc + (k0 + 2 * e + 1) * c.cent_sk)
                          : 0.f);
      cw[e] = as_word(p);
    }
  }
  uint32_t xw[4];
  float ss = 0.f;
  const bool tail = k0 + 8 > c.dim;
#pragma unroll
  for (int e = 0; e < 4; e++) {
    T2 x = __hadd2(as_pair<T2>(cw[e]), as_pair<T2>(w[e]));
    if (tail && k0 + 2 * e + 2 > c.dim) { /* past dim: 0 */
      const T z = from_f<T>(0.f);
      if (k0 + 2 * e >= c.dim) x.x = z;
      x.y = z;
    }
    const float fx = (float)x.x, fy = (float)x.y;
    ss = fmaf(fx, fx, ss);
    ss = fmaf(fy, fy, ss);
    xw[e] = as_word(x);
  }
  out = make_uint4(xw[0], xw[1], xw[2], xw[3]);
  return ss;
}

/* Codes and residual offsets of tokens t0 .. t0 + SUPER*bn of document j
 * (one round trip for SUPER tiles): tcode = -1 past the length or for a code
 * outside [0, C) (never read; the column is masked). */
constexpr int SUPER = 4;

__device__ void token_codes(const KRes &P, int64_t j, int64_t len, int64_t t0, int64_t *tcode,
                            int64_t *troff) {
  for (int tk = threadIdx.x; tk < SUPER * P.bn; tk += blockDim.x) {
    const int64_t l = t0 + tk;
    int64_t code = -1, roff = 0;
    if (l < len) {
      const longlong2 pos = tok_pos(P.t, j, l);
      code = code_at(P.t, pos.x);
      roff = pos.y;
      if (code >= P.c.ncent) code = -1;
    }
    tcode[tk] = code < 0 ? -1 : code;
    troff[tk] = roff;
  }
  __syncthreads();
}

/* Groups of 8 dimensions a thread fetches in one round of a tile's decode
 * (the next round's are in flight while a round is decoded). */
constexpr int NB = 4;

/* Issues the loads of groups c0, c0 + blockDim.x, ... (NB of them) of the
 * tile whose codes are tcode[0 .. bn): the next tile's first round is
 * fetched before the current tile's products, so that its latency overlaps
 * them. */
template <typename T>
__device__ __forceinline__ void fetch_groups(const KRes &P, const int64_t *tcode,
                                             const int64_t *troff, int c0, Group (&gr)[NB]) {
  const int chunks = P.dpad / 8, total = P.bn * chunks;
#pragma unroll
  for (int b = 0; b < NB; b++) {
    const int c = c0 + b * blockDim.x, tk = (int)__umulhi((uint32_t)c, P.cdiv);
    if (c < total && tcode[tk] >= 0)
      gr[b] = fetch8<T>(P.c, tcode[tk], P.t.res + troff[tk], P.t.res_sp, P.t.res_vec,
                        8 * (int64_t)(c - tk * chunks));
  }
}

/* The tile of bn tokens whose codes are tcode[0 .. bn) into xs (as T),
 * 1 / ||x|| into inv (-1: a masked token).  gr holds the fetched groups of
 * the first round (fetch_groups at threadIdx.x); each round fetches the
 * next before it decodes its own.  Half types: centroid + weight added in T
 * from the byte table wt; float: decode_group's fp32 values (decompress's,
 * exactly). */
template <typename T>
__device__ void decode_tile(const KRes &P, const float *wv, const T *wt, const int64_t *tcode,
                            const int64_t *troff, Group (&gr)[NB], T *xs, float *part, float *inv) {
  const int chunks = P.dpad / 8, total = P.bn * chunks;
  for (int c0 = threadIdx.x; c0 < total; c0 += NB * blockDim.x) {
    Group nx[NB];
    if (c0 + NB * (int)blockDim.x < total) fetch_groups<T>(P, tcode, troff, c0 + NB * blockDim.x, nx);
#pragma unroll
    for (int b = 0; b < NB; b++) {
      const int c = c0 + b * blockDim.x;
      if (c < total) {
        const int tk = (int)__umulhi((uint32_t)c, P.cdiv), q8 = c - tk * chunks;
        const int64_t code = tcode[tk];
        float ss = 0.f;
        if constexpr (std::is_same<T, float>::value) {
          float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
          if (code >= 0) decode_group(P.c, wv, code, gr[b], 8 * (int64_t)q8, x);
#pragma unroll
          for (int e = 0; e < 8; e++) ss = fmaf(x[e], x[e], ss);
          float4 *o = (float4 *)(xs + tk * P.ldr + 8 * q8);
          o[0] = make_float4(x[0], x[1], x[2], x[3]);
          o[1] = make_float4(x[4], x[5], x[6], x[7]);
        } else {
          uint4 x = make_uint4(0, 0, 0, 0);
          if (code >= 0) ss = finish8<T>(P.c, wt, code, gr[b], 8 * (int64_t)q8, x);
          *(uint4 *)(xs + tk * P.ldr + 8 * q8) = x;
        }
        part[q8 * (P.bn + 1) + tk] = ss;
      }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) gr[b] = nx[b];
  }
  __syncthreads();
  for (int tk = threadIdx.x; tk < P.bn; tk += blockDim.x) {
    float ss = 0.f;
#pragma unroll 4
    for (int q8 = 0; q8 < chunks; q8++) ss += part[q8 * (P.bn + 1) + tk];
    inv[tk] = tcode[tk] < 0 ? -1.f : P.normalize ? 1.f / fmaxf(sqrtf(ss), (float)LIK_NORM_EPS) : 1.f;
  }
  __syncthreads();
}

/* LIST: this CTA's share of the items of every list (list_n[q] of query q,
 * in query order), as many for every CTA: its first item (i, jo) and how
 * many.  Items past a list's length are never a CTA's, so short lists leave
 * no CTA idle.  sh: shared scratch of 7 entries (4 warps' sums, the result). */
__device__ int64_t list_share(const KRes &P, int64_t *sh /* 7 entries */, int64_t &i, int64_t &jo) {
  int64_t n = 0;
  for (int64_t q = threadIdx.x; q < P.nq; q += blockDim.x) n += P.list_n[q];
#pragma unroll
  for (int o = 16; o; o >>= 1) n += __shfl_xor_sync(0xffffffffu, n, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = n;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t total = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) total += sh[w];
    const int64_t per = (total + gridDim.x - 1) / gridDim.x, first = blockIdx.x * per;
    int64_t q = 0, at = first;
    while (q < P.nq && at >= P.list_n[q]) at -= P.list_n[q++];
    sh[4] = q;
    sh[5] = at;
    sh[6] = first >= total ? 0 : total - first < per ? total - first : per;
  }
  __syncthreads();
  i = sh[4];
  jo = sh[5];
  return sh[6];
}

/* Resident CTAs the registers are sized for (ptxas' own choice spills some
 * instances): 4 up to 32 query rows, 3 at 64, 1 at 128. */
template <int MT>
constexpr int res_min_ctas() {
  return MT <= 2 ? 4 : MT == 4 ? 3 : 1;
}

template <typename T, int MT, int NPW, bool LIST>
__global__ void __launch_bounds__(128, res_min_ctas<MT>()) residual_maxsim_kernel(KRes P) {
  constexpr int QB = 16 * MT;
  constexpr int KS = 32 / sizeof(T); /* elements of one 32-byte k-step (k16 of half, k8 of tf32) */
  extern __shared__ __align__(16) unsigned char smem[];
  float *wv = (float *)smem;
  T *wt = (T *)(smem + P.off_wt);
  T *qs = (T *)(smem + P.off_q), *xs = (T *)(smem + P.off_x);
  float *part = (float *)(smem + P.off_part), *inv = (float *)(smem + P.off_inv);
  int64_t *tcode = (int64_t *)(smem + P.off_code), *troff = (int64_t *)(smem + P.off_roff);
  float *red_v = (float *)(smem + P.off_rv), *rowv = (float *)(smem + P.off_row);
  int *red_i = (int *)(smem + P.off_ri);
  load_weights(P.c, wv);
  if constexpr (!std::is_same<T, float>::value) byte_table<T>(P.c, wv, wt);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane / 4, tq = lane % 4;
  /* item (i, jo): query group i (queries i * qpg .. of qslot rows each) */
  const int qpg = LIST ? 1 : P.qpg, qslot = LIST ? QB : P.qslot;
  const int64_t nqb = (P.lq + qslot - 1) / qslot, items = (P.nq + qpg - 1) / qpg * P.t.count;
  const uint32_t qs_a = (uint32_t)__cvta_generic_to_shared(qs);
  const uint32_t xs_a = (uint32_t)__cvta_generic_to_shared(xs);
  int64_t loaded = -1; /* query block in qs: i * nqb + qb */
  /* LIST: the CTA's share of the lists' items, from (i, jo) on; the full
   * scan strides over the grid */
  int64_t i = 0, jo = 0, left = 0;
  if constexpr (LIST) left = list_share(P, (int64_t *)red_v, i, jo); /* red_v: free until a block's merge */
  for (int64_t item = blockIdx.x; LIST ? left > 0 : item < items; item += gridDim.x) {
    if constexpr (!LIST) {
      i = item / P.t.count;
      jo = item % P.t.count;
    }
    const int64_t j = LIST ? (int64_t)P.list[i * P.list_sn + jo] : jo, len = doc_len(P.t, j);
    float score = 0.f; /* thread t < qpg: query i * qpg + t */
    for (int64_t qb = 0; qb < nqb; qb++) {
      const int64_t r0 = qb * qslot;
      if (loaded != i * nqb + qb) {
        __syncthreads();
        load_query<T, QB>(P, qpg, qslot, i, r0, qs);
        loaded = i * nqb + qb;
      }
      float best[MT][2];
      int bidx[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
        for (int h = 0; h < 2; h++) {
          best[mt][h] = -INFINITY;
          bidx[mt][h] = -1;
        }
      Group gr[NB];
      if (len > 0) {
        __syncthreads(); /* qs written */
        token_codes(P, j, len, 0, tcode, troff);
        fetch_groups<T>(P, tcode, troff, threadIdx.x, gr);
      }
      for (int64_t t0 = 0; t0 < len; t0 += P.bn) {
        __syncthreads(); /* the previous tile's xs read */
        const int64_t sub = t0 % (SUPER * P.bn);
        decode_tile<T>(P, wv, wt, tcode + sub, troff + sub, gr, xs, part, inv);
        if (t0 + P.bn < len) { /* the next tile's codes (every SUPER tiles) and first groups */
          const int64_t nsub = (t0 + P.bn) % (SUPER * P.bn);
          if (nsub == 0) token_codes(P, j, len, t0 + P.bn, tcode, troff);
          fetch_groups<T>(P, tcode + nsub, troff + nsub, threadIdx.x, gr);
        }
        float acc[NPW][MT][4];
#pragma unroll
        for (int n = 0; n < NPW; n++)
#pragma unroll
          for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[n][mt][e] = 0.f;
        for (int k0 = 0; k0 < P.dpad; k0 += KS) {
          uint32_t a[MT][4], b[NPW][2];
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            const int row = mt * 16 + (lane / 8 % 2) * 8 + lane % 8, kk = k0 + (lane / 16) * (KS / 2);
            ldsm_x4(qs_a + (uint32_t)((row * P.ldr + kk) * sizeof(T)), a[mt][0], a[mt][1], a[mt][2],
                    a[mt][3]);
          }
#pragma unroll
          for (int n = 0; n < NPW; n++) {
            const int tok = (warp + 4 * n) * 8 + lane % 8, kk = k0 + (lane / 8 % 2) * (KS / 2);
            ldsm_x2(xs_a + (uint32_t)((tok * P.ldr + kk) * sizeof(T)), b[n][0], b[n][1]);
          }
          if constexpr (std::is_same<T, float>::value)
            if (P.tf32) { /* one TF32 product (LIK_FP32_TF32): operands rounded once */
#pragma unroll
              for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int x = 0; x < 4; x++) a[mt][x] = tf32_rna(__uint_as_float(a[mt][x]));
#pragma unroll
              for (int n = 0; n < NPW; n++)
#pragma unroll
                for (int x = 0; x < 2; x++) b[n][x] = tf32_rna(__uint_as_float(b[n][x]));
#pragma unroll
              for (int n = 0; n < NPW; n++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++) mma_tf32(acc[n][mt], a[mt], b[n]);
              continue;
            }
#pragma unroll
          for (int n = 0; n < NPW; n++)
#pragma unroll
            for (int mt = 0; mt < MT; mt++) mma16816<T>(acc[n][mt], a[mt], b[n]);
        }
#pragma unroll
        for (int n = 0; n < NPW; n++)
#pragma unroll
          for (int e = 0; e < 2; e++) {
            const int col = (warp + 4 * n) * 8 + 2 * tq + e;
            const float s = inv[col];
            if (s < 0.f) continue; /* masked */
            const int tok = (int)(t0 + col);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
              for (int h = 0; h < 2; h++) {
                const float v = acc[n][mt][2 * h + e] * s;
                if (v > best[mt][h]) { /* strict: the lowest column wins ties */
                  best[mt][h] = v;
                  bidx[mt][h] = tok;
                }
              }
          }
      }
      /* rows of this block: quad, then warps, then the fixed-order sum */
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          float v = best[mt][h];
          int ix = bidx[mt][h];
          argmax_lanes<4>(v, ix);
          if (tq == 0) {
            red_v[warp * QB + mt * 16 + h * 8 + g] = v;
            red_i[warp * QB + mt * 16 + h * 8 + g] = ix;
          }
        }
      __syncthreads();
      for (int r = threadIdx.x; r < QB; r += blockDim.x) {
        float v = red_v[r];
        int ix = red_i[r];
        for (int w = 1; w < 4; w++)
          if (better(red_v[w * QB + r], red_i[w * QB + r], v, ix)) {
            v = red_v[w * QB + r];
            ix = red_i[w * QB + r];
          }
        rowv[r] = ix >= 0 ? v : 0.f;
        const int64_t q = i * qpg + r / qslot, s = r0 + r % qslot;
        if (P.argmax && q < P.nq && s < P.lq) P.argmax[q * P.asi + jo * P.asj + s * P.ass] = ix;
      }
      __syncthreads();
      if (threadIdx.x < qpg) /* a query's rows in order */
        for (int r = 0; r < qslot && r0 + r < P.lq; r++) score += rowv[threadIdx.x * qslot + r];
    }
    if (threadIdx.x < qpg && i * qpg + threadIdx.x < P.nq)
      P.scores[(i * qpg + threadIdx.x) * P.ssi + jo * P.ssj] = score;
    if constexpr (LIST) { /* the next item: the list's next slot, else the next non-empty list */
      left--;
      if (++jo == P.list_n[i]) {
        jo = 0;
        do i++;
        while (i < P.nq && P.list_n[i] == 0);
      }
    }
  }
}

} // namespace res
} // namespace lik_cuda

#endif
