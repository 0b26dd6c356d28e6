/*
 * prefix.cu — reads a padded D's d_mask once, on the device, for the
 * tensor-core forward (KParams.dpre / dbits; docs/cuda.md, "Padding"):
 * which documents' masks are prefixes (padding; those then run as unmasked
 * documents of their valid length) and every document's mask as bits (the
 * others' tiles read 32 tokens per word instead of a byte per token).  One
 * warp per document; no host synchronisation.
 */
#include "launch.cuh"

namespace lik_cuda {

/* dpre[n] = c if document n's valid tokens (within its length) are exactly
 * [0, c), else -1; bits[n * dwords + w] = validity of tokens 32 w .. 32 w + 31
 * (0 past the length).  A mask is a prefix iff its first false token f (the
 * length if none) equals its number of true tokens c: two reductions over
 * independent loads, no scan.  VEC: 16 mask bytes per lane (unit token
 * stride, 16-byte aligned rows); else a byte per lane. */
template <bool VEC>
__global__ void __launch_bounds__(256) prefix_kernel(KSeq d, KMask m, int32_t *dpre, uint32_t *bits,
                                                     int64_t dwords) {
  const int64_t n = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (n >= d.count) return; /* warp-uniform */
  const int lane = threadIdx.x & 31;
  const int64_t len = seq_len(d, n);
  const uint8_t *row = m.data + mask_base(m, d, n);
  uint32_t *out = bits + n * dwords;
  int64_t first = len; /* first false token */
  int64_t count = 0;   /* true tokens */
  constexpr int STEP = VEC ? 32 * 16 : 32;
  for (int64_t base = 0; base < dwords * 32; base += STEP) { /* warp-uniform trip count */
    if (VEC) {
      const int64_t t0 = base + lane * 16;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t0 + 16 <= len) v = __ldg(reinterpret_cast<const uint4 *>(row + t0));
      else
        for (int b = 0; t0 + b < len; ++b) reinterpret_cast<uint8_t *>(&v)[b] = row[t0 + b];
      const uint8_t *e = reinterpret_cast<const uint8_t *>(&v);
      uint32_t half = 0; /* this lane's 16 tokens */
#pragma unroll
      for (int b = 0; b < 16; ++b) {
        const bool in = t0 + b < len, on = in && e[b] != 0;
        half |= (uint32_t)on << b;
        if (in && !on && t0 + b < first) first = t0 + b;
      }
      count += __popc(half);
      const uint32_t hi = __shfl_down_sync(0xffffffffu, half, 1);
      if (!(lane & 1) && t0 < dwords * 32) out[t0 >> 5] = half | hi << 16;
    } else {
      const int64_t t = base + lane;
      const bool in = t < len, on = in && row[t * m.sl] != 0;
      const uint32_t word = __ballot_sync(0xffffffffu, on);
      count += on;
      if (in && !on && t < first) first = t;
      if (lane == 0) out[base >> 5] = word;
    }
  }
  /* lengths fit int32 (lik.h), so do the counts */
  const int c = __reduce_add_sync(0xffffffffu, (unsigned)count);
  const int f = (int)__reduce_min_sync(0xffffffffu, (unsigned)first);
  if (lane == 0) dpre[n] = c == f ? c : -1;
}

cudaError_t launch_prefix(const KParams &P, int32_t *dpre, uint32_t *bits, cudaStream_t stream) {
  const int64_t n = P.d.count;
  if (n <= 0) return cudaSuccess;
  const uintptr_t base = (uintptr_t)P.dm.data;
  const bool vec = P.dm.sl == 1 && base % 16 == 0 && P.dm.sn % 16 == 0 &&
                   (P.d.group == 0 || P.dm.sg % 16 == 0);
  const unsigned grid = (unsigned)((n + 7) / 8);
  if (vec) prefix_kernel<true><<<grid, 256, 0, stream>>>(P.d, P.dm, dpre, bits, P.dwords);
  else prefix_kernel<false><<<grid, 256, 0, stream>>>(P.d, P.dm, dpre, bits, P.dwords);
  return cudaGetLastError();
}

} // namespace lik_cuda
