/* f32_wg_d128.cu — f32 under TF32, 64 < d <= 128, query block in
 * registers: the two wgmma configurations of 512-byte rows (sm_90a;
 * m64n64k8.tf32, one m64 tile per warpgroup). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_wg<float, 128>(KParams &, const TileCfg &, bool, cudaStream_t,
                                                const Device &);
} // namespace lik_cuda
