#include "launch.cuh"
#include "maxsim_simt.cuh"

namespace lik_cuda {

template <typename T, typename A, bool ARGMAX>
static cudaError_t launch_simt_t(KParams &P, cudaStream_t stream, int sms) {
  auto kern = maxsim_simt_kernel<T, A, ARGMAX>;
  int occ = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, 256, 0);
  if (e != cudaSuccess) return e;
  if (occ < 1) occ = 1;
  const int64_t slots[2] = {0, (int64_t)sms * occ};
  decompose(P, slots, 64, 1);
  const int64_t grid = P.nrows * P.upr;
  if (grid <= 0) return cudaSuccess;
  kern<<<(unsigned)grid, 256, 0, stream>>>(P);
  return cudaGetLastError();
}

template <typename T, typename A>
static cudaError_t launch_simt_am(KParams &P, bool am, cudaStream_t s, int sms) {
  return am ? launch_simt_t<T, A, true>(P, s, sms)
            : launch_simt_t<T, A, false>(P, s, sms);
}

cudaError_t launch_simt(KParams &P, lik_dtype dt, bool argmax,
                        cudaStream_t stream, int sms) {
  switch (dt) {
  case LIK_F32: return launch_simt_am<float, float>(P, argmax, stream, sms);
  case LIK_F64: return launch_simt_am<double, double>(P, argmax, stream, sms);
  case LIK_BF16: return launch_simt_am<__nv_bfloat16, float>(P, argmax, stream, sms);
  case LIK_F16: return launch_simt_am<__half, float>(P, argmax, stream, sms);
  default: return cudaErrorInvalidValue;
  }
}

} // namespace lik_cuda
