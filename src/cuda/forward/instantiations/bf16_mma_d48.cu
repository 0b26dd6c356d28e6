/* bf16_mma_d48.cu — bf16, d <= 48 (96-byte rows), one query of Lq <= 32: the
 * padded and the dense (bulk-copy) mma.sync configurations. */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_rows96<__nv_bfloat16>(KParams &, const TileCfg &, bool,
                                                  cudaStream_t, const Device &);
} // namespace lik_cuda
