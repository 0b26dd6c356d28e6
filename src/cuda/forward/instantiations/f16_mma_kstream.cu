/* f16_mma_kstream.cu — f16, d > 128, streamed in 64-feature chunks: the four
 * K-streamed mma.sync configurations. */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_kstream<__half>(KParams &, const TileCfg &, bool,
                                            cudaStream_t, const Device &);
} // namespace lik_cuda
