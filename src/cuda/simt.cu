#include "launch.cuh"
#include "maxsim_simt.cuh"

namespace lik_cuda {

template <typename T, typename A, bool ARGMAX>
static cudaError_t launch_simt_t(KParams &P, cudaStream_t stream, const Device &dev) {
  auto kern = maxsim_simt_kernel<T, A, ARGMAX>;
  FnInfo fi;
  if (!fn_info_find(dev, (const void *)kern, 0, &fi)) {
    fi = FnInfo{};
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fi.occ, kern, 256, 0);
    if (e != cudaSuccess) return e;
    fn_info_put(dev, (const void *)kern, 0, fi);
  }
  const int64_t slots[2] = {0, (int64_t)dev.info->sms * (fi.occ > 0 ? fi.occ : 1)};
  decompose(P, slots, 64, 1);
  const int64_t grid = P.nrows * P.upr;
  if (grid <= 0) return cudaSuccess;
  kern<<<(unsigned)grid, 256, 0, stream>>>(P);
  return cudaGetLastError();
}

template <typename T, typename A>
static cudaError_t launch_simt_am(KParams &P, bool am, cudaStream_t s, const Device &dev) {
  return am ? launch_simt_t<T, A, true>(P, s, dev)
            : launch_simt_t<T, A, false>(P, s, dev);
}

cudaError_t launch_simt(KParams &P, lik_dtype dt, bool argmax,
                        cudaStream_t stream, const Device &dev) {
  switch (dt) {
  case LIK_F32: return launch_simt_am<float, float>(P, argmax, stream, dev);
  case LIK_F64: return launch_simt_am<double, double>(P, argmax, stream, dev);
  case LIK_BF16: return launch_simt_am<__nv_bfloat16, float>(P, argmax, stream, dev);
  case LIK_F16: return launch_simt_am<__half, float>(P, argmax, stream, dev);
  default: return cudaErrorInvalidValue;
  }
}

} // namespace lik_cuda
