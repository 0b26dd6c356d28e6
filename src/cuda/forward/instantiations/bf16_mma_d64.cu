/* bf16_mma_d64.cu — bf16, d <= 64, query block in registers: the four
 * mma.sync configurations. */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma<__nv_bfloat16, 64>(KParams &, const TileCfg &, bool,
                                                        cudaStream_t, const Device &);
} // namespace lik_cuda
