/* f32_mma_d32_bq256.cu — f32 (3xTF32), d <= 32, query block in registers:
 * the two mma.sync configurations of 128- or 256-row query blocks (Lq > 64,
 * or stacked queries). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma_bq256<float, 32>(KParams &, const TileCfg &, bool,
                                                      cudaStream_t, const Device &);
} // namespace lik_cuda
