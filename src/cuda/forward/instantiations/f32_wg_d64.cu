/* f32_wg_d64.cu — f32 under TF32, d <= 64, query block in registers: the
 * five wgmma configurations (sm_90a; m64nNk8.tf32). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_wg<float, 64>(KParams &, const TileCfg &, bool, cudaStream_t,
                                               const Device &);
} // namespace lik_cuda
