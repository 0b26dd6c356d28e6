/*
 * device.cuh — what the launchers know of a device, cached in the call's
 * lik_context (src/core/context.h) so that a warm call queries nothing:
 * properties read once per device, and per kernel function its occupancy and
 * dynamic shared memory attribute, set once; stream-ordered scratch; TMA
 * tensor maps.
 */
#ifndef LIK_CUDA_DEVICE_CUH
#define LIK_CUDA_DEVICE_CUH

#include <cuda.h> /* CUtensorMap (a type only) */
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "../core/problem.h"
}

namespace lik_cuda {

/* Properties the tile heuristic and launchers read: SMs; shared memory per
 * CTA (opt-in), per SM and reserved per CTA, in bytes; the compute
 * capability (major, minor); whether the sm_90a
 * wgmma kernels, thread-block clusters (the Ld split), bulk / TMA copies and
 * the backward's sparse grad_D kernel are usable (the device and the build
 * can, the context does not turn them off); whether scratch comes from the
 * process's pool of the device (scratch_alloc). */
struct DevInfo {
  int sms;
  int64_t smem_max, smem_sm, smem_rsv;
  int cc_major, cc_minor;
  bool wg, clusters, bulk, bw_sparse, bw_buckets, pool, bw_ranges;
};

/* What one kernel function needs on one device: resident CTAs per SM for a
 * dynamic shared memory size; for a cluster kernel the largest usable
 * cluster and the resident CTAs in clusters of s (slots[s]). */
struct FnInfo {
  int occ;
  int split_max;
  int64_t slots[9];
};

struct State;

/* A device as a call sees it: ordinal, properties, the context's cache. */
struct Device {
  int id;
  const DevInfo *info;
  State *state;
};

/* Whether the sm_90a wgmma kernels run on a device of compute capability
 * major.minor (this build has sm_90a code, the device is 9.0, no PTX JIT). */
bool wgmma_runs(int major, int minor);

/* Fills *out for the call's device (call.device_id) from its context's
 * cache; reads the properties on the first call for that device.
 * LIK_ERR_CUDA / LIK_ERR_ALLOC on failure. */
lik_status device_of(const lik_call &call, Device *out);

/* Stream-ordered scratch of `bytes` on st from lik's pool of dev
 * (cudaMallocFromPoolAsync; free it with cudaFreeAsync on st).  The pool,
 * one per device for the process, is made on first use and never destroyed;
 * it keeps up to 256 MiB reserved across synchronisations, so a warm call's
 * scratch comes without a driver allocation.  Where no pool can be made (an
 * old driver, a capture that forbids it) or the call's context turned it off
 * (LIK_CUDA_NO_POOL) the device's default pool serves (cudaMallocAsync).
 * Captured in a CUDA graph, the allocation becomes the graph's memory node,
 * as cudaMallocAsync's. */
cudaError_t scratch_alloc(const Device &dev, void **p, size_t bytes, cudaStream_t st);

/* A tensor map for TMA tile loads of 1-, 2- or 4-byte elements (es) in the
 * 128-byte swizzle, elements out of range read as zero: rank dims
 * (innermost first), rank - 1 byte strides (multiples of 16 below 2^40),
 * the box.  cuTensorMapEncodeTiled is reached through the runtime (no link
 * to libcuda).  False where the driver has no encoder or a size is out of
 * TMA's range. */
bool encode_tmap(CUtensorMap *map, int es, int rank, const void *data, const uint64_t *dims,
                 const uint64_t *strides, const uint32_t *box);

/* Allows fn smem bytes of dynamic shared memory on dev: the function's limit
 * raised to the device's opt-in maximum once per (kernel, device), cached in
 * the call's context (a limit set to one launch's size would fail a later,
 * larger one); cudaErrorInvalidValue past that maximum. */
cudaError_t allow_smem(const Device &dev, const void *fn, size_t smem);

/* The cached FnInfo of (fn, smem) on dev, or false. */
bool fn_info_find(const Device &dev, const void *fn, int64_t smem, FnInfo *out);
void fn_info_put(const Device &dev, const void *fn, int64_t smem, const FnInfo &info);

} // namespace lik_cuda

#endif
