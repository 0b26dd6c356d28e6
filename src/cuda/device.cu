/* device.cu — the CUDA backend's state in a lik_context, its scratch pools
 * and the driver's tensor-map encoder (device.cuh). */
#include <map>
#include <mutex>
#include <new>
#include <tuple>

#include <string.h>

#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled */

extern "C" {
#include "../core/context.h"
}
#include "device.cuh"

namespace lik_cuda {

enum { MAX_DEVICES = 64 };

/* Bytes a scratch pool keeps reserved between calls (the release threshold:
 * memory above it goes back to the device at a synchronisation). */
static const uint64_t LIK_CUDA_POOL_KEEP = 256ull << 20;

struct State {
  std::mutex lock;
  bool have[MAX_DEVICES] = {};
  DevInfo dev[MAX_DEVICES] = {};
  std::map<std::tuple<const void *, int, int64_t>, FnInfo> fns;
};

static void *create_state() { return new (std::nothrow) State; }
static void destroy_state(void *s) { delete static_cast<State *>(s); }

/* The scratch pools, one per device for the process (every context's calls
 * share them; never destroyed: destroying one from lik_context_free while
 * its frees were still in flight on a stream crashed in the driver on an
 * H100, tests/gpu/test_gpu_masks.py, 2026-12-05). */
static std::mutex pools_lock;
static cudaMemPool_t pools[MAX_DEVICES];
static bool pools_tried[MAX_DEVICES];

/* The sm_90a wgmma kernels run on this device: built for sm_90a
 * (cmake/cuda.cmake defines LIK_CUDA_SM90A), compute capability exactly 9.0
 * running that machine code (not the compute_90 PTX, where wgmma does not
 * exist: so not under CUDA_FORCE_PTX_JIT=1). */
bool wgmma_runs(int major, int minor) {
#ifdef LIK_CUDA_SM90A
  const char *jit = getenv("CUDA_FORCE_PTX_JIT");
  return major == 9 && minor == 0 && !(jit && strcmp(jit, "1") == 0);
#else
  (void)major;
  (void)minor;
  return false;
#endif
}

static cudaError_t read_info(int id, unsigned off, DevInfo *out) {
  int v[6] = {0};
  const cudaDeviceAttr attrs[6] = {
      cudaDevAttrMultiProcessorCount, cudaDevAttrMaxSharedMemoryPerBlockOptin,
      cudaDevAttrMaxSharedMemoryPerMultiprocessor, cudaDevAttrReservedSharedMemoryPerBlock,
      cudaDevAttrComputeCapabilityMajor, cudaDevAttrComputeCapabilityMinor};
  for (int i = 0; i < 6; i++) {
    const cudaError_t e = cudaDeviceGetAttribute(&v[i], attrs[i], id);
    if (e != cudaSuccess) return e;
  }
  out->sms = v[0];
  out->smem_max = v[1];
  out->smem_sm = v[2];
  out->smem_rsv = v[3];
  out->cc_major = v[4];
  out->cc_minor = v[5];
  out->wg = !(off & LIK_CUDA_NO_WGMMA) && wgmma_runs(v[4], v[5]);
  out->clusters = !(off & LIK_CUDA_NO_SPLIT) && v[4] >= 9;
  out->bulk = !(off & LIK_CUDA_NO_BULK) && v[4] >= 9;
  out->bw_sparse = !(off & LIK_CUDA_NO_BW_SPARSE);
  out->bw_buckets = !(off & LIK_CUDA_NO_BW_BUCKETS);
  out->pool = !(off & LIK_CUDA_NO_POOL);
  out->bw_ranges = !(off & LIK_CUDA_NO_BW_RANGES);
  return cudaSuccess;
}

lik_status device_of(const lik_call &call, Device *out) {
  lik_context *ctx = call.context;
  State *s = static_cast<State *>(lik_context_backend_state(ctx, create_state, destroy_state));
  if (!s) return lik_fail(LIK_ERR_ALLOC, "CUDA: cannot allocate the context's device cache");
  const int id = call.device_id;
  if (id < 0 || id >= MAX_DEVICES)
    return lik_fail(LIK_ERR_DEVICE, "CUDA device %d: ordinals of 0 .. %d are supported", id,
                    MAX_DEVICES - 1);
  std::lock_guard<std::mutex> g(s->lock);
  if (!s->have[id]) {
    const cudaError_t e = read_info(id, lik_context_cuda_off(ctx), &s->dev[id]);
    if (e != cudaSuccess)
      return lik_fail(LIK_ERR_CUDA, "CUDA error in cudaDeviceGetAttribute: %s (%s)",
                      cudaGetErrorName(e), cudaGetErrorString(e));
    s->have[id] = true;
  }
  out->id = id;
  out->info = &s->dev[id];
  out->state = s;
  return LIK_OK;
}

/* dev's pool, made on the first call that asks; null where it cannot be
 * made (the error is cleared: the default pool serves) or the call's context
 * turned it off. */
static cudaMemPool_t pool_of(const Device &dev) {
  if (!dev.info->pool) return nullptr;
  std::lock_guard<std::mutex> g(pools_lock);
  if (!pools_tried[dev.id]) {
    pools_tried[dev.id] = true;
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev.id;
    cudaMemPool_t pool = nullptr;
    uint64_t keep = LIK_CUDA_POOL_KEEP;
    if (cudaMemPoolCreate(&pool, &props) == cudaSuccess) {
      if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess)
        pools[dev.id] = pool;
      else
        (void)cudaMemPoolDestroy(pool);
    }
    (void)cudaGetLastError();
  }
  return pools[dev.id];
}

cudaError_t scratch_alloc(const Device &dev, void **p, size_t bytes, cudaStream_t st) {
  const cudaMemPool_t pool = pool_of(dev);
  return pool ? cudaMallocFromPoolAsync(p, bytes, pool, st) : cudaMallocAsync(p, bytes, st);
}

static PFN_cuTensorMapEncodeTiled_v12000 tmap_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    (void)cudaGetLastError();
    return (PFN_cuTensorMapEncodeTiled_v12000)f;
  }();
  return fn;
}

bool encode_tmap(CUtensorMap *map, int es, int rank, const void *data, const uint64_t *dims,
                 const uint64_t *strides, const uint32_t *box) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tmap_encoder();
  if (!encode || rank < 1 || rank > 5) return false;
  for (int i = 0; i + 1 < rank; ++i)
    if (strides[i] % 16 != 0 || strides[i] >= (1ull << 40)) return false;
  cuuint64_t d[5], st[4];
  cuuint32_t b[5], step[5];
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 1 || dims[i] > (1ull << 32)) return false;
    d[i] = dims[i];
    b[i] = box[i];
    step[i] = 1;
    if (i + 1 < rank) st[i] = strides[i];
  }
  const CUtensorMapDataType type = es == 1   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : es == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                             : CU_TENSOR_MAP_DATA_TYPE_UINT32;
  return encode(map, type, (cuuint32_t)rank, const_cast<void *>(data), d, st, b, step,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

cudaError_t allow_smem(const Device &dev, const void *fn, size_t smem) {
  FnInfo fi;
  if (smem > (size_t)dev.info->smem_max) return cudaErrorInvalidValue;
  if (fn_info_find(dev, fn, -2, &fi)) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)dev.info->smem_max);
  if (e != cudaSuccess) return e;
  fi = FnInfo{};
  fn_info_put(dev, fn, -2, fi);
  return cudaSuccess;
}

bool fn_info_find(const Device &dev, const void *fn, int64_t smem, FnInfo *out) {
  std::lock_guard<std::mutex> g(dev.state->lock);
  const auto it = dev.state->fns.find(std::make_tuple(fn, dev.id, smem));
  if (it == dev.state->fns.end()) return false;
  *out = it->second;
  return true;
}

void fn_info_put(const Device &dev, const void *fn, int64_t smem, const FnInfo &info) {
  std::lock_guard<std::mutex> g(dev.state->lock);
  dev.state->fns[std::make_tuple(fn, dev.id, smem)] = info;
}

} // namespace lik_cuda
