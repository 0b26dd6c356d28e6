/*
 * prefix.cu — detects, on the device, which documents' d_mask is a prefix
 * (padding): KParams.dpre for the tensor-core forward, which then runs
 * those documents as unmasked ones of their valid length (docs/cuda.md,
 * "Masks").  One warp per document; no host synchronisation.
 */
#include "launch.cuh"

namespace lik_cuda {

/* dpre[n] = c if document n's valid tokens (within its length) are exactly
 * [0, c), else -1.  A mask is a prefix iff its first false token f (the
 * length if none) equals its number of true tokens c: both are reductions,
 * so every load is independent (no scan).  VEC: 16 mask bytes per lane
 * (unit token stride, 16-byte aligned rows). */
template <bool VEC>
__global__ void __launch_bounds__(256) prefix_kernel(KSeq d, KMask m, int32_t *dpre) {
  const int64_t n = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (n >= d.count) return;
  const int lane = threadIdx.x & 31;
  const int64_t len = seq_len(d, n);
  const uint8_t *row = m.data + mask_base(m, d, n);
  int64_t first = len; /* first false token */
  int64_t count = 0;   /* true tokens */
  if (VEC) {
#pragma unroll 4
    for (int64_t t0 = (int64_t)lane * 16; t0 < len; t0 += 32 * 16) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t0 + 16 <= len) v = __ldg(reinterpret_cast<const uint4 *>(row + t0));
      else
        for (int b = 0; t0 + b < len; ++b) reinterpret_cast<uint8_t *>(&v)[b] = row[t0 + b];
      const uint8_t *e = reinterpret_cast<const uint8_t *>(&v);
#pragma unroll
      for (int b = 0; b < 16; ++b) {
        const bool in = t0 + b < len, on = e[b] != 0;
        count += in && on;
        if (in && !on && t0 + b < first) first = t0 + b;
      }
    }
  } else {
#pragma unroll 8
    for (int64_t t = lane; t < len; t += 32) {
      const bool on = row[t * m.sl] != 0;
      count += on;
      if (!on && t < first) first = t;
    }
  }
  /* lengths fit int32 (lik.h), so do the counts */
  const int c = __reduce_add_sync(0xffffffffu, (unsigned)count);
  const int f = (int)__reduce_min_sync(0xffffffffu, (unsigned)first);
  if (lane == 0) dpre[n] = c == f ? c : -1;
}

cudaError_t launch_prefix(const KParams &P, int32_t *dpre, cudaStream_t stream) {
  const int64_t n = P.d.count;
  if (n <= 0) return cudaSuccess;
  const uintptr_t base = (uintptr_t)P.dm.data;
  const bool vec = P.dm.sl == 1 && base % 16 == 0 && P.dm.sn % 16 == 0 &&
                   (P.d.group == 0 || P.dm.sg % 16 == 0) && !P.d.off.data;
  const unsigned grid = (unsigned)((n + 7) / 8);
  if (vec) prefix_kernel<true><<<grid, 256, 0, stream>>>(P.d, P.dm, dpre);
  else prefix_kernel<false><<<grid, 256, 0, stream>>>(P.d, P.dm, dpre);
  return cudaGetLastError();
}

} // namespace lik_cuda
