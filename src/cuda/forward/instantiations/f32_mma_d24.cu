/* f32_mma_d24.cu — f32 (3xTF32), d <= 24 (96-byte rows), one query of
 * Lq <= 32: the padded and the dense (bulk-copy) mma.sync configurations. */
#include "../../mma_impl.cuh"

namespace lik_cuda {
template cudaError_t launch_rows96<float>(KParams &, const TileCfg &, bool,
                                          cudaStream_t, const Device &);
} // namespace lik_cuda
