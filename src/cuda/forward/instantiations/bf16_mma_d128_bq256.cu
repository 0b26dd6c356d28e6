/* bf16_mma_d128_bq256.cu — bf16, 64 < d <= 128, query block in registers:
 * the two mma.sync configurations of 128- or 256-row query blocks (Lq > 64,
 * or stacked queries). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma_bq256<__nv_bfloat16, 128>(KParams &, const TileCfg &, bool,
                                                               cudaStream_t, const Device &);
} // namespace lik_cuda
