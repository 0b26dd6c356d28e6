/* f16_mma_d64_bq256.cu — f16, d <= 64, query block in registers: the two
 * mma.sync configurations of 128- or 256-row query blocks (Lq > 64, or
 * stacked queries). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma_bq256<__half, 64>(KParams &, const TileCfg &, bool,
                                                       cudaStream_t, const Device &);
} // namespace lik_cuda
