/*
 * mma.cu — launch_mma_bf16 / f16 / f32: the group of tile configurations
 * (mma_impl.cuh, instantiated in forward/instantiations/) that serves the
 * TileCfg chosen by choose_tile() (launch.cu).  No kernel is compiled here.
 */
#include "launch.cuh"

namespace lik_cuda {

/* c.kc is the bytes of a row's k-chunk (96, 128, 256, or 512 for fp32 on
 * wgmma); KC counts elements. */
template <typename T>
static cudaError_t launch_mma_t(KParams &P, const TileCfg &c, bool argmax,
                                cudaStream_t s, const Device &dev) {
  constexpr int K128 = 128 / sizeof(T), K256 = 256 / sizeof(T);
  if (!c.qreg) return launch_kstream<T>(P, c, argmax, s, dev);
  if (c.kc == 96) return launch_rows96<T>(P, c, argmax, s, dev);
  if (c.wg) {
    if constexpr (sizeof(T) == 2) /* half types: 128- or 256-byte rows */
      return c.kc == 128 ? launch_qreg_wg<T, K128>(P, c, argmax, s, dev)
                         : launch_qreg_wg<T, K256>(P, c, argmax, s, dev);
    else /* fp32 under TF32: 256- or 512-byte rows */
      return c.kc == 256 ? launch_qreg_wg<T, K256>(P, c, argmax, s, dev)
                         : launch_qreg_wg<T, 2 * K256>(P, c, argmax, s, dev);
  }
  if (c.wm <= 2)
    return c.kc == 128 ? launch_qreg_mma_bq64<T, K128>(P, c, argmax, s, dev)
                       : launch_qreg_mma_bq64<T, K256>(P, c, argmax, s, dev);
  return c.kc == 128 ? launch_qreg_mma_bq256<T, K128>(P, c, argmax, s, dev)
                     : launch_qreg_mma_bq256<T, K256>(P, c, argmax, s, dev);
}

cudaError_t launch_mma_bf16(KParams &P, const TileCfg &c, bool argmax,
                            cudaStream_t stream, const Device &dev) {
  return launch_mma_t<__nv_bfloat16>(P, c, argmax, stream, dev);
}

cudaError_t launch_mma_f16(KParams &P, const TileCfg &c, bool argmax,
                           cudaStream_t stream, const Device &dev) {
  return launch_mma_t<__half>(P, c, argmax, stream, dev);
}

cudaError_t launch_mma_f32(KParams &P, const TileCfg &c, bool argmax,
                           cudaStream_t stream, const Device &dev) {
  return launch_mma_t<float>(P, c, argmax, stream, dev);
}

} // namespace lik_cuda
