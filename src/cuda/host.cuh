/*
 * host.cuh — host-side helpers every CUDA entry point shares: device views of
 * a validated call's sequences, masks and index vectors (common.cuh's KSeq /
 * KMask / KIndex), the output fields of a forward's kernel parameters, the
 * vector-load test, CUDA errors as lik statuses, and the scope that makes the
 * call's device current.
 */
#ifndef LIK_CUDA_HOST_CUH
#define LIK_CUDA_HOST_CUH

#include <stdint.h>

#include "common.cuh"

namespace lik_cuda {

static inline KIndex kindex(const lik_index &ix) {
  KIndex k;
  k.data = ix.data;
  k.stride = ix.stride;
  k.is64 = ix.dtype == LIK_I64;
  return k;
}

static inline KSeq kseq(const lik_seqs &s) {
  KSeq k;
  k.data = s.data;
  k.count = s.count;
  k.len = s.len;
  k.dim = s.dim;
  k.sn = s.sn;
  k.sl = s.sl;
  k.sk = s.sk;
  k.group = s.group;
  k.sg = s.sg;
  k.off = kindex(s.offsets);
  k.lens = s.lens;
  k.lens_sn = s.lens_sn;
  k.lens_sg = s.lens_sg;
  return k;
}

static inline KMask kmask(const lik_mask &m) {
  KMask k;
  k.data = m.data;
  k.sn = m.sn;
  k.sl = m.sl;
  k.sg = m.sg;
  return k;
}

/* The scores / argmax fields of a forward's kernel parameters K (KParams,
 * res::KRes, head::HParams: scores, ssi, ssj, argmax, asi, asj, ass) from a
 * validated call Pr (lik_problem, lik_residual_problem: scores, score_si,
 * score_sj, argmax, argmax_si, argmax_sj, argmax_ss). */
template <class K, class Pr>
static inline void set_outputs(K &k, const Pr &p) {
  k.scores = p.scores;
  k.ssi = p.score_si;
  k.ssj = p.score_sj;
  k.argmax = p.argmax;
  k.asi = p.argmax_si;
  k.asj = p.argmax_sj;
  k.ass = p.argmax_ss;
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

} // namespace lik_cuda

#endif
