/*
 * head.cu — launchers of the fused D-side head on CUDA (extern "C"
 * lik_cuda_maxsim_from_hidden / _backward, declared in src/core/head.h):
 * half / bf16 / fp32 inputs, d_out <= 256 (the projection tile's width).  Kernels:
 * head_fwd.cuh, head_bwd.cuh.  Every launch is on the call's stream; scratch
 * of the backward is stream-ordered, from lik's pool (StreamScratch).
 */
#include <string.h>

#include "device.cuh"
#include "head_bwd.cuh"
#include "host.cuh"

extern "C" {
#include "../core/checked.h"
#include "../core/head.h"
}

using namespace lik_cuda;
using namespace lik_cuda::head;

namespace {

constexpr int64_t kMaxDout = 256;
constexpr int64_t kQueryTokensPerCta = 256;

/* Checks what this backend serves: half / bf16 / fp32, d_out <= 256. */
lik_status supported(const lik_problem *p) {
  if (p->q.dtype == LIK_F64)
    return lik_fail(LIK_ERR_UNSUPPORTED, "maxsim_from_hidden on CUDA takes float16, bfloat16 "
                    "or float32 inputs, got float64 (use the CPU for float64)");
  if (p->q.dim > kMaxDout)
    return lik_fail(LIK_ERR_UNSUPPORTED, "maxsim_from_hidden on CUDA: d_out=%lld exceeds %lld",
                    (long long)p->q.dim, (long long)kMaxDout);
  return LIK_OK;
}

int nf_of(int64_t d_out) {
  int nf = 1;
  while (nf * 16 < d_out) nf *= 2;
  return nf;
}

HParams hparams(const lik_head *h) {
  const lik_problem *p = &h->p;
  HParams P;
  memset(&P, 0, sizeof P);
  P.q = kseq(p->q);
  P.h = kseq(p->d);
  P.qm = kmask(p->q_mask);
  P.hm = kmask(p->d_mask);
  P.w = h->w;
  P.w_so = h->w_so;
  P.w_sk = h->w_sk;
  P.b = h->b;
  P.b_s = h->b_s;
  P.kd = p->pairing == LIK_PAIRING_KD;
  P.ncand = p->ncand;
  P.normalize = p->call.normalize ? 1 : 0;
  set_outputs(P, p->out);
  const int ev = 16 / elt_size(p->q.dtype); /* elements per 16-byte vector */
  P.vec_h = vec_ok(p->d, ev);
  P.vec_w = h->w_sk == 1 && p->d.dim % ev == 0 && h->w_so % ev == 0 && (uintptr_t)h->w % 16 == 0;
  P.tf32 = p->call.tf32;
  return P;
}

template <typename T, int NF>
cudaError_t launch_fwd(HParams P, int64_t smem_max, cudaStream_t st, bool *too_big) {
  const int64_t lq = P.q.len > 0 ? P.q.len : 1;
  P.qpc = P.kd ? 1 : (int)(kQueryTokensPerCta / lq > 1 ? kQueryTokensPerCta / lq : 1);
  if (!P.kd && P.qpc > P.q.count) P.qpc = (int)(P.q.count > 0 ? P.q.count : 1);
  const size_t smem = fwd_smem<T>(NF, (int64_t)P.qpc * P.q.len);
  *too_big = (int64_t)smem > smem_max;
  if (*too_big) return cudaSuccess;
  auto fn = head_fwd_kernel<T, NF>;
  cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e) return e;
  const int64_t ndocs = P.h.count;
  const int64_t nqb = P.kd ? 1 : (P.q.count + P.qpc - 1) / P.qpc;
  fn<<<dim3((unsigned)ndocs, (unsigned)nqb), NTH, smem, st>>>(P);
  return cudaGetLastError();
}

template <typename T>
cudaError_t fwd_by_width(const HParams &P, int64_t smem_max, cudaStream_t st, bool *too_big) {
  switch (nf_of(P.q.dim)) {
  case 1: return launch_fwd<T, 1>(P, smem_max, st, too_big);
  case 2: return launch_fwd<T, 2>(P, smem_max, st, too_big);
  case 4: return launch_fwd<T, 4>(P, smem_max, st, too_big);
  case 8: return launch_fwd<T, 8>(P, smem_max, st, too_big);
  default: return launch_fwd<T, 16>(P, smem_max, st, too_big);
  }
}

unsigned blocks(int64_t n, int per) { return (unsigned)((n + per - 1) / per); }

template <typename T, int NF>
cudaError_t launch_bwd(BParams B, const lik_head_bw *bw, cudaStream_t st) {
  const int64_t d_out = B.f.q.dim, d_model = B.f.h.dim;
  cudaError_t e;
  if (B.nslot > 0) {
    slot_kernel<T, NF><<<blocks(B.nslot, SB), BTH, 0, st>>>(B);
    if ((e = cudaGetLastError())) return e;
  }
  if (bw->gq.data && B.f.q.count * B.f.q.len * d_out > 0) {
    q_kernel<T><<<blocks(B.f.q.count * B.f.q.len * d_out, 256), 256, 0, st>>>(B);
    if ((e = cudaGetLastError())) return e;
  }
  if (bw->gw || bw->gb) {
    if (B.nslot > 0) {
      w_kernel<T><<<dim3(blocks(d_model + 1, BTH), blocks(d_out, 16), (unsigned)B.nsplit), BTH, 0, st>>>(B);
      if ((e = cudaGetLastError())) return e;
    } else if ((e = cudaMemsetAsync(B.wpart, 0, (size_t)(d_out * (d_model + 1)) * 4, st))) {
      return e;
    }
    w_sum_kernel<T><<<blocks(d_out * (d_model + 1), 256), 256, 0, st>>>(B);
    if ((e = cudaGetLastError())) return e;
  }
  if (bw->gh.data && B.f.h.count * B.f.h.len > 0) {
    h_kernel<T, NF><<<blocks(B.f.h.count * B.f.h.len, 4), BTH, 0, st>>>(B);
    if ((e = cudaGetLastError())) return e;
  }
  return cudaSuccess;
}

template <typename T>
cudaError_t bwd_by_width(const BParams &B, const lik_head_bw *bw, cudaStream_t st) {
  switch (nf_of(B.f.q.dim)) {
  case 1: return launch_bwd<T, 1>(B, bw, st);
  case 2: return launch_bwd<T, 2>(B, bw, st);
  case 4: return launch_bwd<T, 4>(B, bw, st);
  case 8: return launch_bwd<T, 8>(B, bw, st);
  default: return launch_bwd<T, 16>(B, bw, st);
  }
}

} // namespace

extern "C" lik_status lik_cuda_maxsim_from_hidden(const lik_head *h) {
  const lik_problem *p = &h->p;
  lik_status s = supported(p);
  if (s) return s;
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  const HParams P = hparams(h);
  cudaStream_t st = (cudaStream_t)p->call.stream;
  bool too_big = false;
  const cudaError_t e =
      p->q.dtype == LIK_F32    ? fwd_by_width<float>(P, dev.info->smem_max, st, &too_big)
      : p->q.dtype == LIK_BF16 ? fwd_by_width<__nv_bfloat16>(P, dev.info->smem_max, st, &too_big)
                               : fwd_by_width<__half>(P, dev.info->smem_max, st, &too_big);
  if (too_big)
    return lik_fail(LIK_ERR_UNSUPPORTED, "maxsim_from_hidden on CUDA: Lq=%lld query tokens do "
                    "not fit in shared memory (%lld bytes)", (long long)p->q.len,
                    (long long)dev.info->smem_max);
  return e ? cuda_fail(e, "maxsim_from_hidden") : LIK_OK;
}

extern "C" lik_status lik_cuda_maxsim_from_hidden_backward(const lik_head_bw *bw) {
  const lik_problem *p = &bw->h.p;
  lik_status s = supported(p);
  if (s) return s;
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  BParams B;
  memset(&B, 0, sizeof B);
  B.f = hparams(&bw->h);
  set_grad_scores(B, *bw);
  B.gq = kseq(bw->gq);
  B.gh = kseq(bw->gh);
  B.gw = bw->gw;
  B.gb = bw->gb;
  B.gw_so = bw->gw_so;
  B.gw_sk = bw->gw_sk;
  B.gb_s = bw->gb_s;
  B.vec_gh = bw->gh.data ? vec_ok(bw->gh, 16 / elt_size(p->q.dtype)) : 0;
  const int64_t d_out = p->q.dim, d_model = p->d.dim;
  B.nslot = p->q.count * p->ncand * p->q.len;
  /* fixed by the shape only, so results do not depend on the device */
  B.nsplit = (B.nslot + 511) / 512;
  if (B.nsplit > 64) B.nsplit = 64;
  if (B.nsplit < 1) B.nsplit = 1;
  B.split_len = (B.nslot + B.nsplit - 1) / B.nsplit;
  size_t rows, toks, parts;
  int64_t nrow, npart;
  if (lik_mul_i64(B.nslot, d_out, &nrow) || lik_bytes(nrow, sizeof(float), &rows) ||
      lik_bytes(B.nslot, sizeof(int64_t), &toks) ||
      lik_mul_i64(B.nsplit * d_out, d_model + 1, &npart) || lik_bytes(npart, sizeof(float), &parts))
    return lik_fail(LIK_ERR_ALLOC, "maxsim_from_hidden backward: %lld argmax slots x d_out=%lld "
                    "exceed the address space", (long long)B.nslot, (long long)d_out);
  cudaStream_t st = (cudaStream_t)p->call.stream;
  StreamScratch sc(dev, st);
  cudaError_t e;
  if ((e = sc.get((void **)&B.yhat, rows)) || (e = sc.get((void **)&B.gy, rows)) ||
      (e = sc.get((void **)&B.tok, toks)) || (e = sc.get((void **)&B.wpart, parts)))
    return cuda_fail(e, "allocating CUDA scratch (maxsim_from_hidden backward)");
  e = p->q.dtype == LIK_F32    ? bwd_by_width<float>(B, bw, st)
      : p->q.dtype == LIK_BF16 ? bwd_by_width<__nv_bfloat16>(B, bw, st)
                               : bwd_by_width<__half>(B, bw, st);
  return e ? cuda_fail(e, "maxsim_from_hidden backward") : LIK_OK;
}
