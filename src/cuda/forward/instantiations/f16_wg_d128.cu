/* f16_wg_d128.cu — f16, 64 < d <= 128, query block in registers: the five
 * wgmma configurations (sm_90a). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_wg<__half, 128>(KParams &, const TileCfg &, bool,
                                                 cudaStream_t, const Device &);
} // namespace lik_cuda
