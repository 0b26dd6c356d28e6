/*
 * prefix.cu — reads a padded D's d_mask once, on the device, for the
 * tensor-core forward (KParams.dpre / dbits; docs/cuda.md, "Padding"):
 * which documents' masks are prefixes (padding; those then run as unmasked
 * documents of their valid length) and every document's mask as bits (the
 * others' tiles read 32 tokens per word instead of a byte per token).  A
 * group of 2 .. 32 lanes per document (16-byte rows), else a warp; no host
 * synchronisation; the forward launched after it overlaps its launch and
 * prologue with this kernel (programmatic dependent launch, sm_90+).
 */
#include "launch.cuh"
#include "ptx.cuh"

namespace lik_cuda {

/* dpre[n] = c if document n's valid tokens (within its length) are exactly
 * [0, c), else -1; bits[n * dwords + w] = validity of tokens 32 w .. 32 w + 31
 * (0 past the length).  A mask is a prefix iff its first false token f (the
 * length if none) equals its number of true tokens c: two reductions over
 * independent loads, no scan.  VEC: 16 mask bytes per lane (unit token
 * stride, 16-byte aligned rows) and LPD lanes per document, 2 dwords of them
 * rounded up to a power of two (so a warp takes 32 / LPD short documents at
 * once: a warp per 32-token document spent most of its time launching);
 * else a warp per document and a byte per lane. */
template <bool VEC, int LPD>
__global__ void __launch_bounds__(256) prefix_kernel(KSeq d, KMask m, int32_t *dpre, uint32_t *bits,
                                                     int64_t dwords) {
  static_assert(VEC ? LPD >= 2 && LPD <= 32 && (LPD & (LPD - 1)) == 0 : LPD == 32, "lanes per document");
  /* the forward after it may start its prologue now (TileCfg.pdl): it
   * waits for this grid before it reads dpre / bits */
  griddep_launch();
  const int lane = threadIdx.x & 31, sub = lane % LPD;
  const int64_t n0 = ((int64_t)blockIdx.x * 8 + (threadIdx.x >> 5)) * (32 / LPD); /* the warp's first */
  if (n0 >= d.count) return; /* warp-uniform */
  const int64_t n = n0 + lane / LPD;
  const bool live = n < d.count;
  const int64_t len = live ? seq_len(d, n) : 0;
  const uint8_t *row = live ? m.data + mask_base(m, d, n) : m.data;
  uint32_t *out = bits + (live ? n : 0) * dwords;
  int first = (int)len; /* first false token (lengths fit int32: lik.h) */
  int count = 0;        /* true tokens */
  constexpr int STEP = VEC ? LPD * 16 : 32;
  for (int64_t base = 0; base < dwords * 32; base += STEP) { /* warp-uniform trip count */
    if (VEC) {
      const int64_t t0 = base + sub * 16;
      uint32_t e[4] = {0u, 0u, 0u, 0u}; /* the 16 mask bytes (0 past the length) */
      if (t0 + 16 <= len) {
        const uint4 v = __ldg(reinterpret_cast<const uint4 *>(row + t0));
        e[0] = v.x, e[1] = v.y, e[2] = v.z, e[3] = v.w;
      } else {
#pragma unroll
        for (int b = 0; b < 16; ++b)
          if (t0 + b < len) e[b / 4] |= (uint32_t)row[t0 + b] << (8 * (b % 4));
      }
      uint32_t half = 0; /* this lane's 16 tokens */
#pragma unroll
      for (int b = 0; b < 16; ++b) {
        const bool in = t0 + b < len, on = in && (e[b / 4] >> (8 * (b % 4)) & 0xffu) != 0;
        half |= (uint32_t)on << b;
        if (in && !on && t0 + b < first) first = (int)(t0 + b);
      }
      count += __popc(half);
      const uint32_t hi = __shfl_down_sync(0xffffffffu, half, 1); /* sub + 1: the same document */
      if (live && !(sub & 1) && t0 < dwords * 32) out[t0 >> 5] = half | hi << 16;
    } else {
      const int64_t t = base + lane;
      const bool in = t < len, on = in && row[t * m.sl] != 0;
      const uint32_t word = __ballot_sync(0xffffffffu, on);
      count += on;
      if (in && !on && t < first) first = (int)t;
      if (lane == 0) out[base >> 5] = word;
    }
  }
#pragma unroll
  for (int o = LPD / 2; o > 0; o >>= 1) { /* within the document's lanes */
    count += __shfl_xor_sync(0xffffffffu, count, o);
    first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
  }
  if (live && sub == 0) dpre[n] = count == first ? count : -1;
}

template <int LPD>
static void launch_vec(const KParams &P, int32_t *dpre, uint32_t *bits, cudaStream_t stream) {
  constexpr int per_block = 8 * (32 / LPD);
  const unsigned grid = (unsigned)((P.d.count + per_block - 1) / per_block);
  prefix_kernel<true, LPD><<<grid, 256, 0, stream>>>(P.d, P.dm, dpre, bits, P.dwords);
}

cudaError_t launch_prefix(const KParams &P, int32_t *dpre, uint32_t *bits, cudaStream_t stream) {
  const int64_t n = P.d.count;
  if (n <= 0) return cudaSuccess;
  const uintptr_t base = (uintptr_t)P.dm.data;
  const bool vec = P.dm.sl == 1 && base % 16 == 0 && P.dm.sn % 16 == 0 &&
                   (P.d.group == 0 || P.dm.sg % 16 == 0);
  const int64_t lanes = 2 * P.dwords; /* 16 tokens a lane */
  if (!vec) prefix_kernel<false, 32><<<(unsigned)((n + 7) / 8), 256, 0, stream>>>(P.d, P.dm, dpre, bits, P.dwords);
  else if (lanes <= 2) launch_vec<2>(P, dpre, bits, stream);
  else if (lanes <= 4) launch_vec<4>(P, dpre, bits, stream);
  else if (lanes <= 8) launch_vec<8>(P, dpre, bits, stream);
  else if (lanes <= 16) launch_vec<16>(P, dpre, bits, stream);
  else launch_vec<32>(P, dpre, bits, stream);
  return cudaGetLastError();
}

} // namespace lik_cuda
