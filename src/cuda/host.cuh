/*
 * host.cuh — host-side helpers every CUDA entry point shares: device views of
 * a validated call's sequences, masks and index vectors (common.cuh's KSeq /
 * KMask / KIndex), the output / argmax / grad_scores fields of kernel
 * parameters, the vector-load test, CUDA errors as lik statuses, the scope
 * that makes the call's device current, the entry of a call on its device
 * (OnDevice) and stream-ordered scratch (StreamScratch).
 */
#ifndef LIK_CUDA_HOST_CUH
#define LIK_CUDA_HOST_CUH

#include <stdint.h>

#include "common.cuh"
#include "device.cuh"

namespace lik_cuda {

/* The device views of a validated call's index vectors, sequences and masks:
 * the host structs' fields in the kernel structs' order, the index's dtype
 * resolved to is64; a mask is the host's as it is. */
static inline KIndex kindex(const lik_index &ix) {
  return KIndex{ix.data, ix.stride, ix.dtype == LIK_I64};
}

static inline KSeq kseq(const lik_seqs &s) {
  return KSeq{s.data,
              s.count, s.len, s.dim, s.sn, s.sl, s.sk, s.group, s.sg,
              kindex(s.offsets),
              s.lens, s.lens_sn, s.lens_sg};
}

static inline KMask kmask(const lik_mask &m) { return m; }

/* The sequences, masks, pairing and normalize of a validated call p in
 * kernel parameters K (KParams, bw::Params: q, d, qm, dm, pairing,
 * normalize, ncand, pq, pd). */
template <class K>
static inline void set_problem(K &k, const lik_problem &p) {
  k.q = kseq(p.q);
  k.d = kseq(p.d);
  k.qm = kmask(p.q_mask);
  k.dm = kmask(p.d_mask);
  k.pairing = (int)p.pairing;
  k.normalize = p.call.normalize ? 1 : 0;
  k.ncand = p.ncand;
  k.pq = kindex(p.pair_q);
  k.pd = kindex(p.pair_d);
}

/* The argmax fields of kernel parameters K (argmax, asi, asj, ass) from a
 * validated call's outputs o: a forward's output, the backward's input. */
template <class K>
static inline void set_argmax(K &k, const lik_out &o) {
  k.argmax = o.argmax;
  k.asi = o.argmax_si;
  k.asj = o.argmax_sj;
  k.ass = o.argmax_ss;
}

/* The F32 scores / argmax fields of a forward's kernel parameters K
 * (KParams, res::KRes, head::HParams: scores, ssi, ssj and set_argmax's)
 * from a validated call's outputs o. */
template <class K>
static inline void set_outputs(K &k, const lik_out &o) {
  k.scores = o.scores;
  k.ssi = o.score_si;
  k.ssj = o.score_sj;
  set_argmax(k, o);
}

/* The grad_scores fields of a backward's kernel parameters K (gs, gs64,
 * gsi, gsj) from a validated backward B (lik_bw, lik_head_bw: gs,
 * gs_dtype, gs_si, gs_sj). */
template <class K, class B>
static inline void set_grad_scores(K &k, const B &bw) {
  k.gs = bw.gs;
  k.gs64 = bw.gs_dtype == LIK_F64;
  k.gsi = bw.gs_si;
  k.gsj = bw.gs_sj;
}

static inline int elt_size(lik_dtype t) { return t == LIK_F64 ? 8 : t == LIK_F32 ? 4 : 2; }

/* Vector accesses of cpl elements are legal for every token of s: unit
 * feature stride, d and every token / sequence stride multiples of cpl, data
 * aligned to the vector. */
static inline int vec_ok(const lik_seqs &s, int cpl) {
  const int64_t vb = (int64_t)elt_size(s.dtype) * cpl;
  if (s.sk != 1 || s.dim % cpl != 0 || ((uintptr_t)s.data) % vb != 0) return 0;
  if (s.sl % cpl != 0) return 0;
  if (!s.offsets.data) {
    if (s.sn % cpl != 0) return 0;
    if (s.group > 0 && s.sg % cpl != 0) return 0;
  }
  return 1;
}

static inline lik_status cuda_fail(cudaError_t e, const char *what) {
  return lik_fail(LIK_ERR_CUDA, "CUDA error in %s: %s (%s)", what, cudaGetErrorName(e),
                  cudaGetErrorString(e));
}

/* The last launch's outcome as a lik status (what: "the ... kernel launch"). */
static inline lik_status launched(const char *what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? LIK_OK : cuda_fail(e, what);
}

/* Makes the call's device current; restores the caller's on exit. */
struct DeviceGuard {
  int prev = -1;
  cudaError_t err = cudaSuccess;
  explicit DeviceGuard(int dev) {
    err = cudaGetDevice(&prev);
    if (err == cudaSuccess && prev != dev) err = cudaSetDevice(dev);
    else prev = -1;
  }
  ~DeviceGuard() {
    if (prev >= 0) cudaSetDevice(prev);
  }
};

/* A call's stream-ordered scratch from lik's pool of the device (scratch_alloc,
 * device.cuh): up to 16 buffers, freed on the stream at scope exit. */
struct StreamScratch {
  const Device &dev;
  cudaStream_t st;
  void *ptrs[16];
  int n = 0;
  StreamScratch(const Device &d, cudaStream_t s) : dev(d), st(s) {}
  cudaError_t get(void **p, size_t bytes) {
    *p = nullptr;
    if (n == 16) return cudaErrorMemoryAllocation;
    const cudaError_t e = scratch_alloc(dev, p, bytes ? bytes : 16, st);
    if (e == cudaSuccess) ptrs[n++] = *p;
    return e;
  }
  ~StreamScratch() {
    for (int i = n - 1; i >= 0; --i) cudaFreeAsync(ptrs[i], st);
  }
};

/* A call entered on its device: the device current for the scope (the
 * caller's restored at exit), its properties (device_of: cached in the
 * call's context), no earlier, unrelated error left to report; st is LIK_OK
 * or why the call cannot run.  Every entry point starts with one:
 *   OnDevice dev(p->call);
 *   if (dev.st) return dev.st; */
struct OnDevice : Device {
  DeviceGuard guard;
  lik_status st;
  explicit OnDevice(const lik_call &call) : Device(), guard(call.device_id) {
    st = guard.err != cudaSuccess ? cuda_fail(guard.err, "selecting the device")
                                  : device_of(call, this);
    (void)cudaGetLastError();
  }
};

} // namespace lik_cuda

#endif
