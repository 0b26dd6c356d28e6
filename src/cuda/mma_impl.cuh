/* mma_impl.cuh — instantiates the tensor-core kernel for one dtype. */
#include "launch.cuh"
#include "maxsim_mma.cuh"

namespace lik_cuda {

/* Pipeline depth: 4 for the wgmma configurations and the 8-warp 32 x 64
 * mma.sync ones, else 3 (2-3 CTAs per SM; 6 stages for the K-streamed kernel
 * were measured slower: docs/cuda.md). */
template <class C>
constexpr int stages_of() {
  return C::WG || (C::NT >= 256 && C::NI == 8) ? 4 : 3;
}

template <class C, bool ARGMAX>
static cudaError_t launch_one(KParams &P, cudaStream_t stream, int sms) {
  constexpr int STAGES = stages_of<C>();
  auto kern = maxsim_mma_kernel<C, ARGMAX, STAGES>;
  const int smem = C::smem_bytes(STAGES, P.nkc);
  cudaError_t e = cudaFuncSetAttribute(
      kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  int occ = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, C::NT, smem);
  if (e != cudaSuccess) return e;
  if (occ < 1) occ = 1;
  decompose(P, (int64_t)sms * occ);
  const int64_t grid = P.nrows * P.upr;
  if (grid <= 0) return cudaSuccess;
  kern<<<(unsigned)grid, C::NT, smem, stream>>>(P);
  return cudaGetLastError();
}

template <class C>
static cudaError_t launch_am(KParams &P, bool argmax, cudaStream_t s, int sms) {
  return argmax ? launch_one<C, true>(P, s, sms) : launch_one<C, false>(P, s, sms);
}

template <typename T, int KC>
static cudaError_t launch_qreg(KParams &P, const TileCfg &c, bool argmax,
                               cudaStream_t s, int sms) {
  if constexpr (sizeof(T) == 2) { /* wgmma: half types only */
    if (c.wg == 1) return launch_am<WgCfg<T, 2, 64, KC, 1>>(P, argmax, s, sms);
    if (c.wg == 2) return launch_am<WgCfg<T, 2, 128, KC, 2>>(P, argmax, s, sms);
  }
  if (c.wm == 1) { /* 32 x 64 tiles, three (256-byte rows) or six (128) CTAs per SM */
    if constexpr (KC * sizeof(T) == 256)
      return launch_am<MmaCfg<T, 1, 4, 2, KC, true, 3>>(P, argmax, s, sms);
    else return launch_am<MmaCfg<T, 1, 2, 4, KC, true, 3>>(P, argmax, s, sms);
  }
  if (c.wm == 2) return launch_am<MmaCfg<T, 2, 2, 4, KC, true>>(P, argmax, s, sms);
  if (c.wm == 4) return launch_am<MmaCfg<T, 4, 2, 8, KC, true>>(P, argmax, s, sms);
  return launch_am<MmaCfg<T, 8, 1, 8, KC, true>>(P, argmax, s, sms);
}

/* c.kc is the bytes of a row's k-chunk (128 or 256); KC counts elements. */
template <typename T>
static cudaError_t launch_mma_t(KParams &P, const TileCfg &c, bool argmax,
                                cudaStream_t s, int sms) {
  constexpr int K128 = 128 / sizeof(T), K256 = 256 / sizeof(T);
  if (!c.qreg && c.wn == 8) return launch_am<MmaCfg<T, 1, 8, 4, K128, false>>(P, argmax, s, sms);
  if (!c.qreg) return launch_am<MmaCfg<T, 1, 4, 4, K128, false>>(P, argmax, s, sms);
  if (c.kc == 128) return launch_qreg<T, K128>(P, c, argmax, s, sms);
  return launch_qreg<T, K256>(P, c, argmax, s, sms);
}

} // namespace lik_cuda
