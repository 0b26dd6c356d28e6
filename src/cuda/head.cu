/*
 * head.cu — launchers of the fused D-side head on CUDA (extern "C"
 * lik_cuda_maxsim_from_hidden / _backward, declared in src/core/head.h):
 * half / bf16 / fp32 inputs, d_out <= 256 (the projection tile's width).  Kernels:
 * head_wg.cuh (the forward on sm_90a for half types, d_out <= 128, Lq <= 256,
 * TMA-addressable H_d and W), head_fwd.cuh (the forward elsewhere),
 * head_bwd.cuh.  Every launch is on the call's stream; scratch (the
 * backward's, the split forward's partials) is stream-ordered, from lik's
 * pool (StreamScratch).
 */
#include <limits.h>
#include <string.h>

#include <algorithm>

#include "device.cuh"
#include "head_bwd.cuh"
#include "head_wg.cuh"
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
  P.wb = h->wb;
  P.kd = p->pairing == LIK_PAIRING_KD;
  P.ncand = p->ncand;
  P.normalize = p->call.normalize ? 1 : 0;
  set_outputs(P, p->out);
  const int ev = 16 / elt_size(p->q.dtype); /* elements per 16-byte vector */
  P.vec_h = vec_ok(p->d, ev);
  P.vec_w = h->wb.w_sk == 1 && p->d.dim % ev == 0 && h->wb.w_so % ev == 0 && (uintptr_t)h->wb.w % 16 == 0;
  P.tf32 = p->call.tf32;
  return P;
}

unsigned blocks(int64_t n, int per) { return (unsigned)((n + per - 1) / per); }

/* H_d as a (d_model, Ld, grp, count / grp) and W as a (d_model, d_out)
 * tensor map of 2-byte elements, boxes of 64 features x 128 tokens / N
 * rows; false where TMA cannot address them (feature stride not 1, rows or
 * data not 16-byte aligned, sizes past its range). */
bool make_tmaps(WgParams &G, const lik_head *h, int n_rows) {
  const lik_seqs &d = h->p.d;
  if (d.sk != 1 || h->wb.w_sk != 1 || (uintptr_t)d.data % 16 || (uintptr_t)h->wb.w % 16 ||
      d.len >= INT_MAX || d.count >= INT_MAX)
    return false;
  const int64_t grp = d.group > 0 ? d.group : d.count, ng = d.count / grp;
  const int64_t sn = grp > 1 ? d.sn : d.len * d.sl, sg = ng > 1 ? d.sg : grp * sn;
  const uint64_t hdims[4] = {(uint64_t)d.dim, (uint64_t)d.len, (uint64_t)grp, (uint64_t)ng};
  const uint64_t hstrides[3] = {(uint64_t)d.sl * 2, (uint64_t)sn * 2, (uint64_t)sg * 2};
  const uint32_t hbox[4] = {64, WG_BT, 1, 1};
  const uint64_t wdims[2] = {(uint64_t)d.dim, (uint64_t)h->p.q.dim};
  const uint64_t wstrides[1] = {(uint64_t)h->wb.w_so * 2};
  const uint32_t wbox[2] = {64, (uint32_t)n_rows};
  G.grp = grp;
  return d.sl > 0 && sn > 0 && sg > 0 && h->wb.w_so > 0 &&
         encode_tmap(&G.tmap_h, 2, 4, d.data, hdims, hstrides, hbox) &&
         encode_tmap(&G.tmap_w, 2, 2, h->wb.w, wdims, wstrides, wbox);
}

/* The sm_90a forward (head_wg.cuh) with N = 64 or 128 projected columns:
 * false where it does not apply (Lq over 256, Ld = 0, no tensor maps, too
 * little shared memory), else launched, *err its outcome.  Documents that
 * are too few to fill the GPU split their tiles over several CTAs, whose
 * partial maxima merge_kernel combines. */
template <typename T, int N>
bool launch_wg(const lik_head *h, const HParams &P, const Device &dev, cudaStream_t st,
               cudaError_t *err) {
  const lik_problem *p = &h->p;
  const int64_t lq = p->q.len, ld = p->d.len, nq = p->q.count, ndocs = p->d.count;
  if (lq < 1 || lq > WG_MAXQ || ld < 1) return false;
  WgParams G;
  memset(&G, 0, sizeof G);
  G.f = P;
  G.f.qpc = P.kd ? 1 : (int)std::min<int64_t>(nq, WG_MAXQ / lq);
  G.qr = (int)((G.f.qpc * lq + 63) / 64 * 64);
  if (!make_tmaps(G, h, N)) return false;
  WgSmem<N> lay{0, G.qr};
  const int64_t nst = std::min<int64_t>(4, (dev.info->smem_max - 1024 - lay.bytes()) /
                                               (WgSmem<N>::SB + 16));
  if (nst < 2) return false;
  G.nst = lay.nst = (int)nst;
  const int64_t smem = lay.bytes() + 1024; /* + the base's alignment to 1024 bytes */
  G.nqb = P.kd ? 1 : (nq + G.f.qpc - 1) / G.f.qpc;
  const int64_t items = ndocs * G.nqb, ntile = (ld + WG_BT - 1) / WG_BT;
  const int64_t split = items >= dev.info->sms
                            ? 1
                            : std::min<int64_t>(ntile, (dev.info->sms + items - 1) / items);
  G.tps = (ntile + split - 1) / split;
  G.split = (int)((ntile + G.tps - 1) / G.tps);
  if (items * G.split > INT_MAX) return false;
  StreamScratch sc(dev, st);
  if (G.split > 1) {
    const size_t parts = (size_t)(ndocs * (P.kd ? 1 : nq) * lq * G.split);
    if ((*err = sc.get((void **)&G.part_v, parts * sizeof(float))) ||
        (*err = sc.get((void **)&G.part_i, parts * sizeof(int32_t))))
      return true;
  }
  auto fn = head_wg_kernel<T, N>;
  FnInfo fi;
  if (!fn_info_find(dev, (const void *)fn, 0, &fi)) {
    memset(&fi, 0, sizeof fi);
    if ((*err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)dev.info->smem_max)))
      return true;
    fn_info_put(dev, (const void *)fn, 0, fi);
  }
  fn<<<(unsigned)(items * G.split), WG_TH, (size_t)smem, st>>>(G);
  if (G.split > 1 && !(*err = cudaGetLastError()))
    merge_kernel<<<blocks(nq * P.ncand, 128), 128, 0, st>>>(G);
  *err = cudaGetLastError();
  return true;
}

template <typename T>
bool fwd_wg(const lik_head *h, const HParams &P, const Device &dev, cudaStream_t st,
            cudaError_t *err) {
  return h->p.q.dim <= 64 ? launch_wg<T, 64>(h, P, dev, st, err)
                          : launch_wg<T, 128>(h, P, dev, st, err);
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

template <typename T, int NF>
cudaError_t launch_bwd(BParams B, const lik_head_bw *bw, cudaStream_t st) {
  const int64_t d_out = B.f.q.dim, d_model = B.f.h.dim;
  cudaError_t e;
  if (B.nslot > 0) {
    slot_kernel<T, NF><<<blocks(B.nslot, SB), 128, 0, st>>>(B);
    if ((e = cudaGetLastError())) return e;
  }
  if (bw->gq.data && B.f.q.count * B.f.q.len > 0) {
    q_kernel<T, NF><<<(unsigned)(B.f.q.count * B.f.q.len), BTH, 0, st>>>(B);
    if ((e = cudaGetLastError())) return e;
  }
  if (bw->g.w || bw->g.b) {
    if (B.nslot > 0) {
      w_kernel<T, NF><<<dim3(blocks(d_model + 1, WC), (unsigned)B.nsplit, NF > 8 ? 2 : 1), BTH, 0, st>>>(B);
      if ((e = cudaGetLastError())) return e;
    } else if ((e = cudaMemsetAsync(B.wpart, 0, (size_t)(d_out * (d_model + 1)) * 4, st))) {
      return e;
    }
    w_sum_kernel<T><<<blocks(d_out * (d_model + 1), 256), 256, 0, st>>>(B);
    if ((e = cudaGetLastError())) return e;
  }
  if (bw->gh.data && B.f.h.count * B.f.h.len > 0) {
    h_kernel<T, NF><<<(unsigned)(B.f.h.count * ((B.f.h.len + HR - 1) / HR)), BTH, 0, st>>>(B);
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
  cudaError_t e = cudaSuccess;
  /* sm_90a: half types with d_out <= 128 (fp16 normalised only: its hi / lo
   * pair holds unnormalised projections only below 65504) */
  if (dev.info->wg && p->q.dim <= 128 &&
      (p->q.dtype == LIK_BF16 || (p->q.dtype == LIK_F16 && p->call.normalize)) &&
      (p->q.dtype == LIK_BF16 ? fwd_wg<__nv_bfloat16>(h, P, dev, st, &e)
                              : fwd_wg<__half>(h, P, dev, st, &e)))
    return e ? cuda_fail(e, "maxsim_from_hidden") : LIK_OK;
  bool too_big = false;
  e = p->q.dtype == LIK_F32    ? fwd_by_width<float>(P, dev.info->smem_max, st, &too_big)
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
  B.g = bw->g;
  B.vec_gh = bw->gh.data ? vec_ok(bw->gh, 16 / elt_size(p->q.dtype)) : 0;
  const int64_t d_out = p->q.dim, d_model = p->d.dim;
  B.nslot = p->q.count * p->ncand * p->q.len;
  /* fixed by the shape only, so results do not depend on the device */
  B.nsplit = (B.nslot + 511) / 512;
  if (B.nsplit > 64) B.nsplit = 64;
  if (B.nsplit < 1) B.nsplit = 1;
  B.split_len = (B.nslot + B.nsplit - 1) / B.nsplit;
  /* h_kernel: a CTA per (document, HR tokens), each with its document's slots' buckets */
  const int64_t hctas = p->d.count * ((p->d.len + HR - 1) / HR);
  size_t rows, toks, parts, lsts;
  int64_t nrow, npart, nlst;
  if (lik_mul_i64(B.nslot, d_out, &nrow) || lik_bytes(nrow, sizeof(float), &rows) ||
      lik_bytes(B.nslot, sizeof(int64_t), &toks) ||
      lik_mul_i64(B.nsplit * d_out, d_model + 1, &npart) || lik_bytes(npart, sizeof(float), &parts) ||
      lik_mul_i64(B.nslot, (p->d.len + HR - 1) / HR, &nlst) || lik_bytes(nlst, sizeof(int32_t), &lsts))
    return lik_fail(LIK_ERR_ALLOC, "maxsim_from_hidden backward: %lld argmax slots x d_out=%lld "
                    "exceed the address space", (long long)B.nslot, (long long)d_out);
  if (hctas > INT_MAX || B.nslot / SB >= INT_MAX || p->q.count * p->q.len > INT_MAX)
    return lik_fail(LIK_ERR_UNSUPPORTED, "maxsim_from_hidden backward: %lld documents x Ld=%lld, "
                    "%lld argmax slots exceed the CUDA grid", (long long)p->d.count,
                    (long long)p->d.len, (long long)B.nslot);
  cudaStream_t st = (cudaStream_t)p->call.stream;
  StreamScratch sc(dev, st);
  cudaError_t e;
  if ((e = sc.get((void **)&B.yhat, rows)) || (e = sc.get((void **)&B.gy, rows)) ||
      (e = sc.get((void **)&B.tok, toks)) || (e = sc.get((void **)&B.wpart, parts)) ||
      (bw->gh.data && (e = sc.get((void **)&B.lst, lsts))))
    return cuda_fail(e, "allocating CUDA scratch (maxsim_from_hidden backward)");
  e = p->q.dtype == LIK_F32    ? bwd_by_width<float>(B, bw, st)
      : p->q.dtype == LIK_BF16 ? bwd_by_width<__nv_bfloat16>(B, bw, st)
                               : bwd_by_width<__half>(B, bw, st);
  return e ? cuda_fail(e, "maxsim_from_hidden backward") : LIK_OK;
}
