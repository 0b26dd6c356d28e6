/* mma_impl.cuh — instantiates the tensor-core kernel for one dtype. */
#include "launch.cuh"
#include "maxsim_mma.cuh"

namespace lik_cuda {

template <typename T, int WM, int WN, int KC, bool QREG, bool ARGMAX>
static cudaError_t launch_one(KParams &P, cudaStream_t stream, int sms) {
  constexpr int STAGES = 3; /* 3 x 128 x 272 B (KC=128) keeps 2 CTAs/SM, KC=64 keeps 3 */
  using C = MmaCfg<T, WM, WN, KC, QREG>;
  auto kern = maxsim_mma_kernel<T, WM, WN, KC, QREG, ARGMAX, STAGES>;
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

template <typename T, int WM, int WN, int KC, bool QREG>
static cudaError_t launch_am(KParams &P, bool argmax, cudaStream_t s, int sms) {
  return argmax ? launch_one<T, WM, WN, KC, QREG, true>(P, s, sms)
                : launch_one<T, WM, WN, KC, QREG, false>(P, s, sms);
}

template <typename T>
static cudaError_t launch_mma_t(KParams &P, const TileCfg &c, bool argmax,
                                cudaStream_t s, int sms) {
  if (!c.qreg) return launch_am<T, 1, 4, 64, false>(P, argmax, s, sms);
  if (c.kc == 64) {
    if (c.wm == 1) return launch_am<T, 1, 4, 64, true>(P, argmax, s, sms);
    if (c.wm == 2) return launch_am<T, 2, 2, 64, true>(P, argmax, s, sms);
    return launch_am<T, 4, 2, 64, true>(P, argmax, s, sms);
  }
  if (c.wm == 1) return launch_am<T, 1, 4, 128, true>(P, argmax, s, sms);
  if (c.wm == 2) return launch_am<T, 2, 2, 128, true>(P, argmax, s, sms);
  return launch_am<T, 4, 2, 128, true>(P, argmax, s, sms);
}

} // namespace lik_cuda
