/*
 * launch.cuh — host-side glue between the launcher (launch.cu) and the
 * per-dtype kernel translation units.
 */
#ifndef LIK_CUDA_LAUNCH_CUH
#define LIK_CUDA_LAUNCH_CUH

#include "common.cuh"
#include "device.cuh"

namespace lik_cuda {

/* Tile traits chosen by choose_tile() (launch.cu), the one heuristic. */
struct TileCfg {
  int simt;   /* 1: CUDA-core kernel */
  int wm, wn; /* warps along queries / documents (tensor-core kernel) */
  int ni;     /* n8 tiles per warp of the K-streamed kernel: 4, or 5 (40 tokens) */
  int kc;     /* 96, 128 or 256 bytes of a row per k-chunk (48 / 64 / 128 half, 24 / 32 / 64 fp32 features) */
  int qreg;   /* query block held in registers (a row's d fits kc bytes) */
  int qpc;    /* queries stacked in the 32*wm rows of a CTA (1: one query) */
  int wg;     /* sm_90a wgmma kernel with wg warpgroups (wm = 4 wg), 0: mma.sync */
  int split_max; /* largest cluster that may share a document's tiles (P.split), 1: none */
  int bulk;      /* 96-byte rows by 1-D bulk copies into dense tiles (sm_90+) */
  int tma;       /* wgmma document tiles by TMA (P.tmap_d set) */
  int bn;        /* wgmma document tile tokens: 64 (one warpgroup), 128 or 104 (two) */
  int short_docs; /* forward/short_docs.cuh (tma set): 128 / Ld documents to a tile */
  int pdl;        /* launched right after the d_mask's prefix kernel (prefix.cu), as its
                   * programmatic dependent (sm_90+): the kernel's launch and prologue
                   * overlap that kernel, which it waits for before it reads KParams.dpre /
                   * dbits (griddep_wait) */
};

/* Fills P.upr / P.dpc / P.split for document tiles of bd tokens and
 * clusters of at most max_split CTAs, slots[s] of which are resident in
 * clusters of s (slots[1]: no cluster) (launch.cu). */
void decompose(KParams &P, const int64_t *slots, int bd, int max_split);

/* Launchers per dtype (mma.cu, simt.cu).  Each sets the decomposition
 * through decompose() from the kernel's occupancy on dev (cached in the
 * context, with the shared memory attribute set once), then launches on
 * `stream`; returns the CUDA error of the launch. */
cudaError_t launch_mma_bf16(KParams &P, const TileCfg &c, bool argmax,
                            cudaStream_t stream, const Device &dev);
cudaError_t launch_mma_f16(KParams &P, const TileCfg &c, bool argmax,
                           cudaStream_t stream, const Device &dev);
cudaError_t launch_mma_f32(KParams &P, const TileCfg &c, bool argmax,
                           cudaStream_t stream, const Device &dev);

/* The groups of tensor-core configurations launch_mma_* choose from
 * (defined in mma_impl.cuh; each instantiation in one file of
 * forward/instantiations/; KC: features of a 128- or 256-byte row). */
template <typename T> /* d streamed in k-chunks (c.qreg = 0) */
cudaError_t launch_kstream(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                           const Device &dev);
template <typename T> /* 96-byte rows (c.kc = 96) */
cudaError_t launch_rows96(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                          const Device &dev);
template <typename T, int KC> /* query block in registers, mma.sync, c.wm = 1 or 2 */
cudaError_t launch_qreg_mma_bq64(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                                 const Device &dev);
template <typename T, int KC> /* query block in registers, mma.sync, c.wm = 4 or 8 */
cudaError_t launch_qreg_mma_bq256(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                                  const Device &dev);
template <typename T, int KC> /* query block in registers, wgmma (c.wg = 1 or 2) */
cudaError_t launch_qreg_wg(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                           const Device &dev);

/* Short documents (forward/short_docs.cuh; choose_tile() chose them,
 * P.tmap_d made with boxes of pk = 128 / Ld documents, P.qpc / qrows /
 * qshift set): fills P.upr / P.dpc and launches on `stream`
 * (forward/instantiations/half_short_docs.cu). */
cudaError_t launch_short_docs(KParams &P, lik_dtype dt, cudaStream_t stream, const Device &dev);

/* KParams.dpre / dbits of P's padded documents (P.dm, P.dwords set) into
 * dpre[P.d.count] and bits[P.d.count * P.dwords], on stream (prefix.cu). */
cudaError_t launch_prefix(const KParams &P, int32_t *dpre, uint32_t *bits, cudaStream_t stream);

cudaError_t launch_simt(KParams &P, lik_dtype dt, bool argmax,
                        cudaStream_t stream, const Device &dev);

} // namespace lik_cuda

#endif
