/* f32_mma_d64_bq64.cu — f32 (3xTF32), 32 < d <= 64, query block in
 * registers: the two mma.sync configurations of 32- or 64-row query blocks
 * (one query of Lq <= 64). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma_bq64<float, 64>(KParams &, const TileCfg &, bool,
                                                     cudaStream_t, const Device &);
} // namespace lik_cuda
