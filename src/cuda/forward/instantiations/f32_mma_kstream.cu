/* f32_mma_kstream.cu — f32 (3xTF32), d > 64, streamed in 32-feature chunks:
 * the four K-streamed mma.sync configurations. */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_kstream<float>(KParams &, const TileCfg &, bool,
                                           cudaStream_t, const Device &);
} // namespace lik_cuda
