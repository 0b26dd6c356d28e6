/* f32_mma_d32.cu — f32 (3xTF32), d <= 32, query block in registers: the four
 * mma.sync configurations. */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma<float, 32>(KParams &, const TileCfg &, bool,
                                                cudaStream_t, const Device &);
} // namespace lik_cuda
