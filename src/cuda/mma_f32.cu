#include "mma_impl.cuh"
namespace lik_cuda {
cudaError_t launch_mma_f32(KParams &P, const TileCfg &c, bool argmax,
                           cudaStream_t stream, const Device &dev) {
  return launch_mma_t<float>(P, c, argmax, stream, dev);
}
} // namespace lik_cuda
