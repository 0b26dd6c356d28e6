/*
 * residual.cu — extern "C" entry points of the CUDA backend for compressed
 * late interaction (src/core/residual.h): lik_cuda_codec_decompress,
 * lik_cuda_maxsim_residual, lik_cuda_plaid_approx.  Kernels in residual.cuh
 * and residual_scan.cuh (the full scan's fast kernels, where they apply).
 * Everything runs on the call's stream; no host synchronisation, no
 * allocation.
 */
#include <stdint.h>
#include <string.h>

#include "device.cuh"
#include "host.cuh"
#include "residual.cuh"
#include "residual_scan.cuh"

namespace lik_cuda {
namespace res {

/* Resident CTAs per SM of fn with smem bytes of dynamic shared memory,
 * cached in the context.  The function's dynamic shared memory limit is set
 * to the device's (a limit, not a size: one set for a smaller size would
 * make a later, larger launch fail). */
static lik_status occupancy(const Device &dev, const void *fn, int threads, int64_t smem,
                            int *occ) {
  FnInfo fi;
  if (!fn_info_find(dev, fn, smem, &fi)) {
    memset(&fi, 0, sizeof fi);
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)dev.info->smem_max);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fi.occ, fn, threads, (size_t)smem);
    if (e != cudaSuccess) return cuda_fail(e, "the residual kernel's attributes");
    fn_info_put(dev, fn, smem, fi);
  }
  *occ = fi.occ > 0 ? fi.occ : 1;
  return LIK_OK;
}

static int64_t grid_for(int64_t items, const Device &dev, int occ) {
  const int64_t cap = (int64_t)dev.info->sms * occ;
  return items < cap ? items : cap;
}

/* Zeroed parameters K (KDecomp, KRes) with the codec and the tokens t. */
template <typename K> static K codec_params(const lik_codec_view &codec, const lik_ctokens &t) {
  K P;
  memset(&P, 0, sizeof P);
  P.c = kcodec(codec);
  P.t = ktok(t, codec.nbits);
  return P;
}

/* Launches kernel(P) on the call's stream (what: "the ... kernel launch"),
 * threads per CTA: a CTA per item, at most per_sm of them per SM (the kernel
 * strides over the rest). */
template <typename K>
static lik_status launch_capped(const char *what, void (*kernel)(K), const K &P, int64_t items,
                                int per_sm, int threads, const Device &dev, const lik_call &call) {
  kernel<<<(unsigned)grid_for(items, dev, per_sm), threads, 0, (cudaStream_t)call.stream>>>(P);
  return launched(what);
}

/* Shared memory of residual_maxsim for QB query rows, bn-token tiles and
 * T of es bytes (rows padded by 16 bytes: conflict-free ldmatrix). */
static int64_t layout(KRes &P, int qb, int bn, int es) {
  const int64_t ldr = P.dpad + 16 / es, chunks = P.dpad / 8;
  P.cdiv = 0xffffffffu / (uint32_t)chunks + 1u; /* ceil(2^32 / chunks): exact below 2^32 / chunks */
  int64_t off = 256 * sizeof(float); /* weights */
  P.off_wt = off;
  if (es == 2) off += 256 * 8 * 2; /* half types' byte table: 256 x 8/nbits weights */
  P.bn = bn;
  P.ldr = (int)ldr;
  P.off_q = off;
  off += qb * ldr * es;
  P.off_x = off;
  off += bn * ldr * es;
  P.off_part = off;
  off += (bn + 1) * chunks * 4;
  P.off_inv = off;
  off += bn * 4;
  off = (off + 7) / 8 * 8;
  P.off_code = off;
  off += SUPER * bn * 8;
  P.off_roff = off;
  off += SUPER * bn * 8;
  P.off_rv = off;
  off += 4 * qb * 4;
  P.off_ri = off;
  off += 4 * qb * 4;
  P.off_row = off;
  off += qb * 4;
  return (off + 15) / 16 * 16;
}

template <typename T, int MT, int NPW, bool LIST>
static lik_status launch(KRes &P, int64_t items, const Device &dev, cudaStream_t stream,
                         int64_t smem) {
  const void *fn = (const void *)residual_maxsim_kernel<T, MT, NPW, LIST>;
  int occ;
  lik_status st = occupancy(dev, fn, 128, smem, &occ);
  if (st) return st;
  const int64_t grid = grid_for(items, dev, occ);
  residual_maxsim_kernel<T, MT, NPW, LIST><<<(unsigned)grid, 128, (size_t)smem, stream>>>(P);
  return launched("the residual MaxSim kernel launch");
}

template <typename T, int MT, bool LIST>
static lik_status launch_mt(KRes &P, int64_t items, const Device &dev, cudaStream_t stream,
                            int64_t smem) {
  return P.bn == 64 ? launch<T, MT, 2, LIST>(P, items, dev, stream, smem)
                    : launch<T, MT, 1, LIST>(P, items, dev, stream, smem);
}

template <typename T, bool LIST>
static lik_status launch_t(KRes &P, int mt, int64_t items, const Device &dev,
                           cudaStream_t stream, int64_t smem) {
  if constexpr (!LIST) /* stacked queries: the full scan only */
    if (mt == 8) return launch_mt<T, 8, false>(P, items, dev, stream, smem);
  switch (mt) {
    case 1: return launch_mt<T, 1, LIST>(P, items, dev, stream, smem);
    case 2: return launch_mt<T, 2, LIST>(P, items, dev, stream, smem);
    default: return launch_mt<T, 4, LIST>(P, items, dev, stream, smem);
  }
}

/* Query rows per block (16 .. 128) and tile tokens (64, else 32) that fit
 * for T of es bytes: the shared memory, or 0 where none fits; P.qpg /
 * P.qslot: the queries stacked in the block (the full scan: up to 128 rows
 * of queries of Lq <= 32, rounded up to 16 / 32 rows each) and their rows. */
static int64_t fit(KRes &P, int es, const Device &dev, int *mt) {
  int bn = 64;
  const int slot = P.lq <= 16 ? 16 : P.lq <= 32 ? 32 : 64;
  int rows = slot;
  if (!P.list && slot <= 32)
    while (rows < 128 && rows < slot * P.nq) rows *= 2;
  *mt = rows / 16;
  int64_t smem = layout(P, 16 * *mt, bn, es);
  while (smem > dev.info->smem_max && (bn > 32 || *mt > 1)) {
    if (bn > 32) bn = 32;
    else *mt /= 2;
    smem = layout(P, 16 * *mt, bn, es);
  }
  P.qslot = 16 * *mt < slot ? 16 * *mt : slot;
  P.qpg = 16 * *mt / P.qslot;
  return smem > dev.info->smem_max ? 0 : smem;
}

/* Whether residual_scan_kernel takes the call: the full scan (no argmax)
 * of d = 128 tokens at nbits 2 / 4, fp16 centroid rows of 16-byte loads
 * (codes below 2^31), residual rows of contiguous bytes aligned to a
 * lane's load (4 nbits bytes), a half-type query under normalize. */
static bool scan_fits(const KRes &P) {
  const int64_t a = 4 * P.c.nbits; /* a lane's residual load */
  return !P.list && !P.argmax && P.normalize && (P.q_dt == LIK_F16 || P.q_dt == LIK_BF16) &&
         P.c.dim == SCAN_D && (P.c.nbits == 2 || P.c.nbits == 4) && P.c.cent_vec &&
         P.c.ncent <= INT32_MAX &&
         P.t.res_sp == 1 && P.t.res_st % a == 0 && P.t.res_sn % a == 0 &&
         (uintptr_t)P.t.res % (uintptr_t)a == 0;
}

/* residual_scan_kernel's query block and shared memory: queries of Lq <= 64
 * stacked in slots of 16 / 32 / 64 rows up to 128 rows, longer ones in
 * blocks of 128 rows; the weights, the byte table, the permuted query
 * block, each warp's rows' maxima.  *wsg: on sm_90a, 128 stacked rows go to
 * residual_scan_ws_kernel instead (its own layout, scan_ws_smem), with
 * *wsg = SCAN_WS_G groups resident where the call has that many; one group
 * (*wsg = 1) at nbits 4 only (at nbits 2 residual_scan_kernel was faster
 * there: bench/RESULTS.md); 0: residual_scan_kernel. */
static int64_t scan_layout(KRes &P, const Device &dev, int *wsg, int *mt) {
  const int slot = P.lq <= 16 ? 16 : P.lq <= 32 ? 32 : P.lq <= 64 ? 64 : 128;
  int rows = slot;
  while (rows < 128 && rows < slot * P.nq) rows *= 2;
  *mt = rows / 16;
  P.qslot = slot;
  P.qpg = rows / slot;
  P.dpad = SCAN_D;
  P.ldr = SCAN_LDQ;
  const int64_t groups = (P.nq + P.qpg - 1) / P.qpg;
  *wsg = !(dev.info->wg && slot <= 64 && rows == SCAN_WS_N) ? 0
         : groups >= SCAN_WS_G                            ? SCAN_WS_G
         : P.c.nbits == 4                                 ? 1
                                                          : 0;
  if (*wsg) return scan_ws_smem(*wsg);
  int64_t off = 256 * sizeof(float);
  P.off_wt = off;
  off += SCAN_TABLE;
  P.off_q = off;
  off += (int64_t)rows * SCAN_LDQ * 2;
  P.off_row = off;
  return off + 4 * rows * 4;
}

template <int NBITS, int MT>
static lik_status launch_scan(KRes &P, const Device &dev, cudaStream_t stream, int64_t smem) {
  const void *fn = (const void *)residual_scan_kernel<NBITS, MT>;
  int occ;
  lik_status st = occupancy(dev, fn, 128, smem, &occ);
  if (st) return st;
  const int64_t grid = grid_for((P.t.count + 3) / 4, dev, occ); /* a warp per document at most */
  residual_scan_kernel<NBITS, MT><<<(unsigned)grid, 128, (size_t)smem, stream>>>(P);
  return launched("the residual scan kernel launch");
}

template <int NBITS, int G>
static lik_status launch_scan_ws(KRes &P, const Device &dev, cudaStream_t stream, int64_t smem) {
  const void *fn = (const void *)residual_scan_ws_kernel<NBITS, G>;
  int occ;
  lik_status st = occupancy(dev, fn, 128 * (SCAN_WS_DEC + 1), smem, &occ);
  if (st) return st;
  const int64_t grid = grid_for((P.t.count + 3) / 4, dev, occ); /* a stream per document at most */
  residual_scan_ws_kernel<NBITS, G><<<(unsigned)grid, 128 * (SCAN_WS_DEC + 1), (size_t)smem, stream>>>(P);
  return launched("the residual scan kernel launch");
}

template <int NBITS>
static lik_status launch_scan_mt(KRes &P, int wsg, int mt, const Device &dev,
                                 cudaStream_t stream, int64_t smem) {
  if (wsg) return wsg == 1 ? launch_scan_ws<NBITS, 1>(P, dev, stream, smem)
                           : launch_scan_ws<NBITS, SCAN_WS_G>(P, dev, stream, smem);
  switch (mt) {
    case 1: return launch_scan<NBITS, 1>(P, dev, stream, smem);
    case 2: return launch_scan<NBITS, 2>(P, dev, stream, smem);
    case 4: return launch_scan<NBITS, 4>(P, dev, stream, smem);
    default: return launch_scan<NBITS, 8>(P, dev, stream, smem);
  }
}

lik_status launch_residual(KRes &P, int64_t items, const Device &dev, cudaStream_t stream) {
  if (scan_fits(P)) {
    int wsg, mt;
    const int64_t smem = scan_layout(P, dev, &wsg, &mt);
    if (smem <= dev.info->smem_max)
      return P.c.nbits == 2 ? launch_scan_mt<2>(P, wsg, mt, dev, stream, smem)
                            : launch_scan_mt<4>(P, wsg, mt, dev, stream, smem);
  }
  P.dpad = (int)((P.c.dim + 15) / 16 * 16);
  int mt;
  /* an fp32 / fp64 query scores in fp32 (3xTF32) where its tiles fit; the
   * PLAID search's lists, and d past that, on half types */
  if (!P.list && (P.q_dt == LIK_F32 || P.q_dt == LIK_F64)) {
    const int64_t smem = fit(P, 4, dev, &mt);
    if (smem)
      return launch_t<float, false>(P, mt, (P.nq + P.qpg - 1) / P.qpg * P.t.count, dev, stream,
                                    smem);
  }
  const int64_t smem = fit(P, 2, dev, &mt);
  if (!smem)
    return lik_fail(LIK_ERR_UNSUPPORTED,
                    "centroids: d=%lld is too large for the CUDA residual kernel (%lld bytes of "
                    "shared memory, the device allows %lld)",
                    (long long)P.c.dim, (long long)layout(P, 16, 32, 2), (long long)dev.info->smem_max);
  if (P.list)
    return P.normalize ? launch_t<__half, true>(P, mt, items, dev, stream, smem)
                       : launch_t<__nv_bfloat16, true>(P, mt, items, dev, stream, smem);
  items = (P.nq + P.qpg - 1) / P.qpg * P.t.count; /* query groups x documents */
  return P.normalize ? launch_t<__half, false>(P, mt, items, dev, stream, smem)
                     : launch_t<__nv_bfloat16, false>(P, mt, items, dev, stream, smem);
}

} // namespace res
} // namespace lik_cuda

using namespace lik_cuda;
using namespace lik_cuda::res;

extern "C" lik_status lik_cuda_codec_decompress(const lik_codec_problem *p) {
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  KDecomp P = codec_params<KDecomp>(p->codec, p->tok);
  P.out = (void *)p->x.data;
  P.out_dt = p->x.dtype;
  P.out_sl = p->x.sl;
  P.out_sk = p->x.sk;
  P.normalize = p->call.normalize;
  return launch_capped("the decompress kernel launch", decompress_kernel, P,
                       (p->tok.len + 7) / 8, 8, 256, dev, p->call);
}

extern "C" lik_status lik_cuda_plaid_approx(const lik_approx_problem *p) {
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  KApprox P;
  memset(&P, 0, sizeof P);
  P.cs = p->cs;
  P.t = ktok(p->d, 1);
  P.scores = p->scores;
  P.ssi = p->score_si;
  P.ssj = p->score_sj;
  return launch_capped("the approx score kernel launch", approx_kernel, P,
                       p->cs.nq * p->d.count, 16, 128, dev, p->call);
}

extern "C" lik_status lik_cuda_maxsim_residual(const lik_residual_problem *p) {
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  KRes P = codec_params<KRes>(p->codec, p->d);
  P.q = p->q.data;
  P.q_dt = p->q.dtype;
  P.nq = p->q.count;
  P.lq = p->q.len;
  P.q_sn = p->q.sn;
  P.q_sl = p->q.sl;
  P.q_sk = p->q.sk;
  set_outputs(P, p->out);
  P.normalize = p->call.normalize;
  P.tf32 = p->call.tf32;
  return launch_residual(P, 0, dev, (cudaStream_t)p->call.stream); /* items: counted there */
}
