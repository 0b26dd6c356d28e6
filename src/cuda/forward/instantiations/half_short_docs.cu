/* half_short_docs.cu — bf16 / fp16, d <= 128: the short-document kernel
 * (forward/short_docs.cuh, sm_90a) and its launcher, launch_short_docs. */
#include <string.h>

#include "../../launch.cuh"
#include "../short_docs.cuh"

namespace lik_cuda {

/* Every 128-byte atom of a row is one 16 KB atom of a stage; as many
 * stages as the shared memory holds (an even number, at most 8), one CTA
 * per SM.  Each
 * group of P.qpc queries takes about sms / groups CTAs, each a range of
 * whole tiles (P.upr ranges of P.dpc documents). */
template <typename T, int NA>
static cudaError_t launch_t(KParams &P, cudaStream_t st, const Device &dev) {
  using L = ShortDocsSmem<NA>;
  ShortDocs S;
  S.pk = (int)(SD_TILE / P.d.len);
  const int64_t fixed = L{0}.bytes() + 1024; /* + the 1024-byte alignment */
  S.nst = (int)((dev.info->smem_max - fixed) / (L::STAGE + 16)) & ~1; /* even */
  if (S.nst > 8) S.nst = 8;
  if (S.nst < 2) return cudaErrorInvalidConfiguration; /* not on sm_90 (227 KB) */
  const size_t smem = (size_t)(L{S.nst}.bytes() + 1024);
  auto fn = short_docs_kernel<T, NA>;
  FnInfo fi;
  if (!fn_info_find(dev, (const void *)fn, 0, &fi)) {
    memset(&fi, 0, sizeof fi);
    const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)dev.info->smem_max);
    if (e != cudaSuccess) return e;
    fn_info_put(dev, (const void *)fn, 0, fi);
  }
  const int64_t groups = (P.nq + P.qpc - 1) / P.qpc;
  const int64_t tiles = (P.ncand + S.pk - 1) / S.pk;
  int64_t upr = dev.info->sms / groups;
  if (upr < 1) upr = 1;
  if (upr > tiles) upr = tiles;
  P.dpc = (tiles + upr - 1) / upr * S.pk;
  P.upr = (P.ncand + P.dpc - 1) / P.dpc;
  fn<<<(unsigned)(groups * P.upr), SD_THREADS, smem, st>>>(P, S);
  return cudaGetLastError();
}

cudaError_t launch_short_docs(KParams &P, lik_dtype dt, cudaStream_t st, const Device &dev) {
  const bool two = P.d.dim > 64; /* atoms of a row */
  if (dt == LIK_BF16)
    return two ? launch_t<__nv_bfloat16, 2>(P, st, dev) : launch_t<__nv_bfloat16, 1>(P, st, dev);
  return two ? launch_t<__half, 2>(P, st, dev) : launch_t<__half, 1>(P, st, dev);
}

} // namespace lik_cuda
