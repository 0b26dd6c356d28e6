/* f32_mma_d32_bq64.cu — f32 (3xTF32), d <= 32, query block in registers: the
 * two mma.sync configurations of 32- or 64-row query blocks (one query of
 * Lq <= 64). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma_bq64<float, 32>(KParams &, const TileCfg &, bool,
                                                     cudaStream_t, const Device &);
} // namespace lik_cuda
