/*
 * mma_impl.cuh — the launchers of the tensor-core forward's tile
 * configurations (forward/kernel.cuh): a group launcher per family of
 * configurations, declared in launch.cuh and instantiated once per (dtype,
 * group) in forward/instantiations/, one file each (named by what it
 * instantiates), so that each translation unit compiles a few kernels;
 * mma.cu picks the group.
 */
#include "launch.cuh"
#include "forward/kernel.cuh"

namespace lik_cuda {

/* Pipeline depth: 4 for the wgmma configurations and the 8-warp 32 x 64
 * mma.sync ones, else 3 (2-3 CTAs per SM; 6 stages for the K-streamed kernel
 * were measured slower: docs/cuda.md). */
template <class C>
constexpr int stages_of() {
  return C::WG || (C::NT >= 256 && C::NI == 8) ? 4 : 3;
}

/* Bytes of the Ld split's exchange buffers: [2][split - 1][BQ] row maxima. */
template <class C>
constexpr int xch_bytes(int split) {
  return 2 * (split - 1) * C::BQ * 4;
}

/* The Ld split is instantiated for the scores-only one-query tiles with the
 * query block in registers (Lq <= 64: reranking a few long documents); every
 * other kernel is built without it. */
template <class C, bool ARGMAX>
constexpr bool can_split() {
  return !ARGMAX && !C::WG && C::QR && C::BQ <= 64;
}

/* kern runs sm_90 code here: machine code for 9.0+, or PTX for 9.0+ (not
 * a build for sm_80 only, JIT-compiled on a Hopper GPU).  Read once per
 * function and device (cached as FnInfo.occ of a zero-byte entry). */
template <class K>
static bool built_for_sm90(K kern, const Device &dev) {
  FnInfo fi;
  if (!fn_info_find(dev, (const void *)kern, -1, &fi)) {
    cudaFuncAttributes fa;
    fi = FnInfo{};
    fi.occ = cudaFuncGetAttributes(&fa, kern) == cudaSuccess && fa.binaryVersion >= 90 &&
             (fa.ptxVersion == 0 || fa.ptxVersion >= 90);
    (void)cudaGetLastError();
    fn_info_put(dev, (const void *)kern, -1, fi);
  }
  return fi.occ != 0;
}

/* Resident CTAs of the split kernel in clusters of s = 2 .. split_max
 * (fi->slots[s]) and the largest usable size (fi->split_max; 1 where the
 * split cannot run: no cluster code in the binary (a build for sm_80 only,
 * JIT-compiled on a Hopper GPU), too little shared memory, a failed query).
 * Errors of the queries are cleared (they only mean: no split). */
template <class C, class K>
static void split_slots(K kern_split, int base, int split_max, const Device &dev, FnInfo *fi) {
  if (!built_for_sm90(kern_split, dev)) split_max = 1;
  while (split_max > 1 && base + xch_bytes<C>(split_max) > dev.info->smem_max) --split_max;
  if (split_max > 1 && cudaFuncSetAttribute(kern_split, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)dev.info->smem_max) != cudaSuccess)
    split_max = 1;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(C::NT);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  for (int s = 2; s <= split_max; ++s) {
    int nclusters = 0;
    attr[0].val.clusterDim.x = (unsigned)s;
    cfg.gridDim = dim3((unsigned)s);
    cfg.dynamicSmemBytes = base + xch_bytes<C>(s);
    if (cudaOccupancyMaxActiveClusters(&nclusters, kern_split, &cfg) == cudaSuccess)
      fi->slots[s] = (int64_t)nclusters * s;
  }
  (void)cudaGetLastError();
  fi->split_max = split_max;
}

/* kern's resident CTAs per SM with `base` bytes of dynamic shared memory,
 * and (cluster kernels) the split's slots: queried on the first launch of a
 * (function, size, device), the function's shared memory limit raised to the
 * device's opt-in maximum then (once), cached in the context. */
template <class C, bool CAN, class K>
static cudaError_t kernel_info(K kern, K kern_split, int base, int split_max, const Device &dev,
                               FnInfo *fi) {
  if (fn_info_find(dev, (const void *)kern, base, fi)) return cudaSuccess;
  *fi = FnInfo{};
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)dev.info->smem_max);
  if (e != cudaSuccess) return e;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fi->occ, kern, C::NT, base);
  if (e != cudaSuccess) return e;
  fi->split_max = 1;
  if (CAN && split_max > 1) split_slots<C>(kern_split, base, split_max, dev, fi);
  fn_info_put(dev, (const void *)kern, base, *fi);
  return cudaSuccess;
}

template <class C, bool ARGMAX>
static cudaError_t launch_one(KParams &P, int split_max, bool pdl, cudaStream_t stream,
                              const Device &dev) {
  constexpr int STAGES = stages_of<C>();
  constexpr bool CAN = can_split<C, ARGMAX>();
  auto kern = maxsim_mma_kernel<C, ARGMAX, STAGES, false>;
  auto kern_split = maxsim_mma_kernel<C, ARGMAX, STAGES, CAN>;
  const int base = C::smem_bytes(STAGES, P.nkc);
  FnInfo fi;
  cudaError_t e = kernel_info<C, CAN>(kern, kern_split, base, split_max, dev, &fi);
  if (e != cudaSuccess) return e;
  int64_t slots[9] = {0, (int64_t)dev.info->sms * (fi.occ > 0 ? fi.occ : 1)};
  /* The Ld split only where the items alone leave CTA slots empty (few,
   * long documents); resident clusters per size from the runtime (a
   * cluster's CTAs share a GPC, so fewer may be resident than CTAs alone). */
  if (!CAN || split_max < 2 || P.nrows * P.ncand >= slots[1]) {
    split_max = 1;
  } else {
    split_max = fi.split_max;
    for (int s = 2; s <= split_max; ++s) slots[s] = fi.slots[s];
  }
  decompose(P, slots, C::BD, split_max);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  cfg.gridDim = dim3((unsigned)(P.nrows * P.upr * P.split));
  cfg.blockDim = dim3(C::NT);
  cfg.stream = stream;
  cfg.attrs = attr;
  if (cfg.gridDim.x == 0) return cudaSuccess;
  if (pdl) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (P.split > 1) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[cfg.numAttrs].val.clusterDim.x = (unsigned)P.split;
    attr[cfg.numAttrs].val.clusterDim.y = 1;
    attr[cfg.numAttrs++].val.clusterDim.z = 1;
    cfg.dynamicSmemBytes = base + xch_bytes<C>(P.split);
    e = cudaLaunchKernelEx(&cfg, kern_split, P);
  } else {
    cfg.dynamicSmemBytes = base;
    e = cudaLaunchKernelEx(&cfg, kern, P);
  }
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

template <class C>
static cudaError_t launch_am(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s, const Device &dev) {
  return argmax ? launch_one<C, true>(P, c.split_max, c.pdl, s, dev)
                : launch_one<C, false>(P, c.split_max, c.pdl, s, dev);
}

/* d > 128 half / 64 fp32 features (c.qreg = 0): d streamed in 128-byte
 * chunks, A from shared memory; 4 or 8 warps (c.wn) of 32 x 32 or 32 x 40
 * (c.ni = 5) tokens. */
template <typename T>
cudaError_t launch_kstream(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                           const Device &dev) {
  constexpr int K128 = 128 / sizeof(T);
  if (c.wn == 8)
    return c.ni == 5 ? launch_am<MmaCfg<T, 1, 8, 5, K128, false>>(P, c, argmax, s, dev)
                     : launch_am<MmaCfg<T, 1, 8, 4, K128, false>>(P, c, argmax, s, dev);
  return c.ni == 5 ? launch_am<MmaCfg<T, 1, 4, 5, K128, false>>(P, c, argmax, s, dev)
                   : launch_am<MmaCfg<T, 1, 4, 4, K128, false>>(P, c, argmax, s, dev);
}

/* 96-byte rows (c.kc = 96: one query, Lq <= 32, half d <= 48, fp32 d <= 24):
 * 2 warps of 32 x 32, rows padded to 112 bytes (still conflict-free for
 * ldmatrix), 26 KB of shared memory and at most 128 registers: eight CTAs
 * per SM; rows of exactly 96 bytes (c.bulk) take the dense bulk-copy tiles
 * where the kernel runs sm_90 code. */
template <typename T>
cudaError_t launch_rows96(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                          const Device &dev) {
  constexpr int K96 = 96 / sizeof(T);
  using Dense = MmaCfg<T, 1, 2, 4, K96, true, 8, true>;
  if (c.bulk && built_for_sm90(maxsim_mma_kernel<Dense, false, stages_of<Dense>(), false>, dev))
    return launch_am<Dense>(P, c, argmax, s, dev);
  return launch_am<MmaCfg<T, 1, 2, 4, K96, true, 8>>(P, c, argmax, s, dev);
}

/* The query block in registers on mma.sync (d <= KC features: 128- or
 * 256-byte rows), 32- or 64-row query blocks (c.wm = 1 or 2: one query of
 * Lq <= 64, the tiles the Ld split serves). */
template <typename T, int KC>
cudaError_t launch_qreg_mma_bq64(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                                 const Device &dev) {
  if (c.wm == 1) { /* 32 x 64 tiles, three (256-byte rows) or six (128) CTAs per SM */
    if constexpr (KC * sizeof(T) == 256)
      return launch_am<MmaCfg<T, 1, 4, 2, KC, true, 3>>(P, c, argmax, s, dev);
    else return launch_am<MmaCfg<T, 1, 2, 4, KC, true, 3>>(P, c, argmax, s, dev);
  }
  return launch_am<MmaCfg<T, 2, 2, 4, KC, true>>(P, c, argmax, s, dev);
}

/* The same, 128- or 256-row query blocks (c.wm = 4 or 8: Lq > 64, or
 * stacked queries). */
template <typename T, int KC>
cudaError_t launch_qreg_mma_bq256(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                                  const Device &dev) {
  if (c.wm == 4) return launch_am<MmaCfg<T, 4, 2, 8, KC, true>>(P, c, argmax, s, dev);
  return launch_am<MmaCfg<T, 8, 1, 8, KC, true>>(P, c, argmax, s, dev);
}

/* The query block in registers on wgmma (sm_90a; half types, and fp32
 * under TF32; d <= KC features): c.wg = 1 or 2 warpgroups; TMA tiles where
 * c.tma.  Rows of 512 bytes (fp32, 64 < d <= 128): one m64 tile per
 * warpgroup (its A fragments are 64 registers), two warpgroups, 64-token
 * tiles (four stages of 32 KB). */
template <typename T, int KC>
cudaError_t launch_qreg_wg(KParams &P, const TileCfg &c, bool argmax, cudaStream_t s,
                           const Device &dev) {
  if constexpr (KC * sizeof(T) == 512) {
    return c.tma ? launch_am<WgCfg<T, 1, 64, KC, 2, true>>(P, c, argmax, s, dev)
                 : launch_am<WgCfg<T, 1, 64, KC, 2>>(P, c, argmax, s, dev);
  } else {
    if (c.wg == 1)
      return c.tma ? launch_am<WgCfg<T, 2, 64, KC, 1, true>>(P, c, argmax, s, dev)
                   : launch_am<WgCfg<T, 2, 64, KC, 1>>(P, c, argmax, s, dev);
    if (c.bn == 104) /* chosen with TMA tiles only */
      return launch_am<WgCfg<T, 2, 104, KC, 2, true>>(P, c, argmax, s, dev);
    return c.tma ? launch_am<WgCfg<T, 2, 128, KC, 2, true>>(P, c, argmax, s, dev)
                 : launch_am<WgCfg<T, 2, 128, KC, 2>>(P, c, argmax, s, dev);
  }
}

} // namespace lik_cuda
