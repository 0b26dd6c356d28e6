/* bf16_mma_d128_bq64.cu — bf16, 64 < d <= 128, query block in registers: the
 * two mma.sync configurations of 32- or 64-row query blocks (one query of
 * Lq <= 64). */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_qreg_mma_bq64<__nv_bfloat16, 128>(KParams &, const TileCfg &, bool,
                                                              cudaStream_t, const Device &);
} // namespace lik_cuda
