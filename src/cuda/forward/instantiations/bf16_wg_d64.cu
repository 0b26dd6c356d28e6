/* bf16_wg_d64.cu — bf16, d <= 64, query block in registers: the five wgmma
 * configurations (sm_90a). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_wg<__nv_bfloat16, 64>(KParams &, const TileCfg &, bool,
                                                       cudaStream_t, const Device &);
} // namespace lik_cuda
