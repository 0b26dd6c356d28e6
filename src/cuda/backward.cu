/*
 * backward.cu — the CUDA backward of every MaxSim layout (lik.h, "training
 * and packed layouts"): extern "C" lik_cuda_maxsim_backward, declared in
 * src/core/problem.h under LIK_WITH_CUDA.
 *
 * Design (docs/training.md, "The CUDA backward"): with the forward's argmax
 * known, both gradients are gathers.  Every gradient row has ONE owner (a CTA
 * of the "rows" kernel below) that adds its terms into an fp32 (fp64 for F64)
 * accumulator in a fixed order and writes the row once, in the input dtype:
 *
 *   grad_Q[i,s] = q_mask[i,s] * sum_j  g[i,j] * D^[j, argmax[i,j,s]]
 *                 terms in output order: documents / candidates / pairs ascending
 *   grad_D[j,t] = sum_{(i,s): argmax[i,j,s] == t} q_mask[i,s] * g[i,j] * Q^[i,s]
 *                 terms in (output, query token) order ascending
 *
 * (X^ = X / max(||X||, eps) under normalize, whose Jacobian is applied when the
 * row is written.)  grad_Q and, on padded cross / KD calls, grad_D own a row
 * per warp: grad_D's terms first sorted by row (bucket_kernel: the argmax
 * transposed, stable, in grad_Q's still unwritten buffer), then gathered
 * (gather_kernel); where rows have at most 2 terms, both in one launch, a CTA
 * per range of a document's rows (range_kernel).  Elsewhere the owner of a
 * tile of target rows walks the candidate terms of its sequence(s) in that
 * canonical order in chunks of 1024: each
 * thread evaluates 4 candidates (argmax entry, masks, grad_scores, norms), a
 * stable block compaction keeps the terms that land in the tile, then warp w
 * adds the terms of the rows it owns (row % 8 == w) into a shared-memory
 * accumulator, each lane owning CPL columns.  So:
 *   - no atomics, no full-size fp32 buffer: deterministic, bitwise identical
 *     run to run and for any grid / tile size (a row's arithmetic is fixed by
 *     the data: the term order and the lane -> column map, which depends on
 *     the dtype only);
 *   - scratch (stream-ordered, from lik's pool: StreamScratch): token
 *     norms under normalize, for pair lists a CSR of the pairs by query and
 *     by document (a stable CUB radix sort: pairs ascending per key), and
 *     the buckets where grad_Q's buffer cannot hold them.
 * No host synchronisation; graph capturable.
 *
 * argmax entries are trusted to be the forward's: an entry outside
 * [0, Ld_j) of its document, or pointing at a masked document token, is
 * treated as -1 (contributes nothing); nothing is read out of bounds.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>

#include <cub/device/device_radix_sort.cuh>

#include "backward/kernels.cuh"
#include "device.cuh"
#include "host.cuh"

namespace lik_cuda {
namespace bw {

/* ---- host side ---------------------------------------------------------------- */

/* kern<<<grid, NT, smem, st>>>(args...) after allowing it smem bytes. */
template <typename... KArgs, typename... Args>
static cudaError_t launch_smem(const Device &dev, void (*kern)(KArgs...), int64_t grid,
                               size_t smem, cudaStream_t st, Args... args) {
  const cudaError_t e = allow_smem(dev, (const void *)kern, smem);
  if (e != cudaSuccess) return e;
  kern<<<(unsigned)grid, NT, smem, st>>>(args...);
  return cudaGetLastError();
}

/* grad_Q: a warp per Q row, 8 rows per CTA.  after_ranges: the stream's
 * previous kernel is range_kernel (grad_D, which neither reads nor writes
 * what grad_Q reads or writes): grad_Q is launched as its programmatic
 * dependent (sm_90+), so its CTAs start as the ranges' CTAs end, and each
 * waits for the ranges before it exits (the stream's next kernel sees both
 * done).  cudaErrorInvalidConfiguration: d too large for the per-warp
 * shared-memory row. */
template <typename T, typename R, int CPL>
static cudaError_t launch_gradq(Params P, const Device &dev, cudaStream_t st, bool after_ranges) {
  const int cw = 32 * CPL;
  const int64_t nch = (P.q.dim + cw - 1) / cw;
  const int64_t total = P.q.off.data ? P.q_total : P.q.count * P.q.len;
  if (total <= 0) return cudaSuccess;
  const int64_t blocks = (total + NW - 1) / NW;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  P.nch = (int)nch;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(NT);
  cfg.stream = st;
  cfg.attrs = attr;
  if (after_ranges && dev.info->cc_major >= 9) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.numAttrs = 1;
  }
  cudaError_t e;
  if (nch == 1) {
    e = cudaLaunchKernelEx(&cfg, gradq_kernel<T, R, CPL, true>, P);
  } else {
    const size_t smem = (size_t)NW * (size_t)(nch * cw) * sizeof(R);
    if (smem > (size_t)dev.info->smem_max) return cudaErrorInvalidConfiguration;
    if ((e = allow_smem(dev, (const void *)gradq_kernel<T, R, CPL, false>, smem))) return e;
    cfg.dynamicSmemBytes = smem;
    e = cudaLaunchKernelEx(&cfg, gradq_kernel<T, R, CPL, false>, P);
  }
  return e != cudaSuccess ? e : cudaGetLastError();
}

/* grad_D by buckets (padded cross / KD): documents in groups whose lists fit
 * the workspace ws (ws_bytes; none: stream-ordered scratch for every
 * document), per group a bucket_kernel and a gather_kernel launch.
 * cudaErrorNotSupported: Ld too long for the per-warp counts in shared
 * memory (the tiles run instead). */
template <typename T, typename R, int CPL>
static cudaError_t launch_buckets(Params P, const Device &dev, cudaStream_t st, void *ws,
                                  size_t ws_bytes) {
  const KSeq &TS = P.d;
  const int64_t len = TS.len, ndocs = TS.count;
  const size_t cnt_smem = BUCKET_SMEM0 + (size_t)NW * (size_t)len * sizeof(uint16_t);
  if (cnt_smem > (size_t)dev.info->smem_max) return cudaErrorNotSupported;
  const int64_t nc = (P.pairing == 0 ? P.q.count : 1) * P.q.len;
  /* segments: enough CTAs for two per SM, count tables at most a quarter
   * of the lists, at most SEG_MAX candidates */
  const int64_t nseg_min = (nc + SEG_MAX - 1) / SEG_MAX;
  const int64_t nseg_par = (2 * (int64_t)dev.info->sms + ndocs - 1) / ndocs;
  const int64_t nseg_mem = nc / (4 * (len + 1));
  int64_t nseg = std::max(nseg_min, std::min(nseg_par, std::max<int64_t>(1, nseg_mem)));
  const int64_t seg = std::max<int64_t>(NT, ((nc + nseg - 1) / nseg + NT - 1) / NT * NT);
  nseg = std::max<int64_t>(1, (nc + seg - 1) / seg);
  const size_t per_doc = (size_t)nseg * (size_t)(seg + len + 1) * sizeof(uint16_t);
  int64_t group = ws ? (int64_t)(ws_bytes / per_doc) : 0;
  StreamScratch sc(dev, st);
  if (group <= 0) {
    group = ndocs;
    if ((size_t)ndocs > SIZE_MAX / per_doc) return cudaErrorMemoryAllocation;
    const cudaError_t e = sc.get(&ws, (size_t)ndocs * per_doc);
    if (e != cudaSuccess) return e;
  }
  group = std::min(group, ndocs);
  group = (ndocs + (ndocs + group - 1) / group - 1) / ((ndocs + group - 1) / group); /* even groups */
  const int cw = 32 * CPL;
  const int64_t nch = (TS.dim + cw - 1) / cw;
  P.nch = (int)nch;
  const size_t row_smem = (size_t)NW * (size_t)(nch * cw) * sizeof(R);
  if (nch > 1 && row_smem > (size_t)dev.info->smem_max) return cudaErrorInvalidConfiguration;
  /* rows of at most 8 terms on average (a row one chunk of columns): 8 rows
   * a warp, which then share their loads' latency (32 KB of rows a CTA) */
  const int gr = nch == 1 && nc <= 8 * len ? 8 : 1;
  Buckets B;
  B.nseg = (int)nseg;
  B.seg = (int)seg;
  B.gr = gr;
  B.list = static_cast<uint16_t *>(ws);
  B.start = B.list + group * nseg * seg;
  for (int64_t n0 = 0; n0 < ndocs; n0 += group) {
    const int64_t count = std::min(group, ndocs - n0);
    B.n0 = n0;
    if (count * nseg > INT_MAX || (count * len + NW - 1) / NW > INT_MAX)
      return cudaErrorInvalidConfiguration;
    cudaError_t e = launch_smem(dev, bucket_kernel<R>, count * nseg, cnt_smem, st, P, B);
    if (e != cudaSuccess) return e;
    const int64_t blocks = (count * ((len + gr - 1) / gr) + NW - 1) / NW;
    if (gr > 1) {
      e = launch_smem(dev, gather_rows_kernel<T, R, CPL>, blocks, gr * row_smem, st, P, B, count);
    } else if (nch == 1) {
      gather_kernel<T, R, CPL, true><<<(unsigned)blocks, NT, 0, st>>>(P, B, count);
      e = cudaGetLastError();
    } else {
      e = launch_smem(dev, gather_kernel<T, R, CPL, false>, blocks, row_smem, st, P, B, count);
    }
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

/* grad_D by row ranges (padded cross / KD, d <= 32 CPL, Nq Lq <= 2 Ld and
 * <= SEG_MAX): a CTA per (document, range of rows), ranges of about 256 rows,
 * split evenly.  cudaErrorNotSupported: the lists and rows would leave room
 * for fewer than two CTAs an SM (the buckets run instead). */
template <typename T, typename R, int CPL>
static cudaError_t launch_ranges(Params P, const Device &dev, cudaStream_t st) {
  const int64_t len = P.d.len, ndocs = P.d.count;
  const int64_t nc = (P.pairing == 0 ? P.q.count : 1) * P.q.len;
  const int64_t nrange = (len + 255) / 256;
  Ranges G;
  G.rr = (int)(((len + nrange - 1) / nrange + 7) / 8 * 8);
  G.nrange = (int)((len + G.rr - 1) / G.rr);
  /* the scan, 8 rows a warp, the counts, the starts, a list of every
   * candidate and every candidate's row */
  const size_t smem = BUCKET_SMEM0 + (size_t)NW * 8 * 32 * CPL * sizeof(R) +
                      (size_t)(NW * G.rr + G.rr + 1 + 2 * nc) * sizeof(uint16_t);
  if (2 * smem > (size_t)dev.info->smem_max) return cudaErrorNotSupported;
  if (ndocs * G.nrange > INT_MAX) return cudaErrorInvalidConfiguration;
  P.nch = 1;
  return launch_smem(dev, range_kernel<T, R, CPL>, ndocs * G.nrange, smem, st, P, G);
}

/* grad_D: the sparse mode where a document's candidates fit one chunk, the
 * buckets for other padded cross / KD calls, else tiles of tt rows.  The
 * choice and the tile sizes change only the work split, never a row's
 * arithmetic.  ws: a workspace the buckets may use (see run). */
template <typename T, typename R, int CPL>
static cudaError_t launch_gradd(Params P, const Device &dev, cudaStream_t st, void *ws,
                                size_t ws_bytes, bool &ranges) {
  const KSeq &TS = P.d;
  const int cw = 32 * CPL;
  const int64_t nch = (TS.dim + cw - 1) / cw;
  const size_t row_bytes = (size_t)(nch * cw) * sizeof(R);
  const size_t fixed = (sizeof(Smem<R>) + 15) / 16 * 16;
  const int64_t smem_max = dev.info->smem_max;
  const int sms = dev.info->sms;
  const bool packed = TS.off.data != nullptr;
  const int64_t len = packed ? 0 : TS.len;
  const int64_t total = packed ? P.d_total : TS.count * TS.len;
  if (total <= 0) return cudaSuccess;
  int tt = 128;
  while (tt > 1 && fixed + (size_t)tt * row_bytes > (size_t)smem_max) tt >>= 1;
  if (fixed + (size_t)tt * row_bytes > (size_t)smem_max) return cudaErrorInvalidConfiguration;
  /* sparse mode: every candidate of a document in one chunk (KD, pairs, few
   * queries): a CTA per document (gradd_sparse_kernel), unless the context
   * turns it off (LIK_CUDA_NO_BW_SPARSE: the tests compare both paths) */
  const int64_t ncands = P.pairing == 0 ? P.q.count * P.q.len : P.q.len;
  if (dev.info->bw_sparse && !packed && P.pairing != 2 && ncands <= CH && len <= (1 << 20) &&
      TS.count <= INT_MAX) {
    P.nch = (int)nch;
    const size_t smem = fixed + (size_t)NW * row_bytes + (size_t)NW * (((len + NW - 1) / NW + 31) / 32) * 4;
    if (smem > (size_t)smem_max) return cudaErrorInvalidConfiguration;
    return launch_smem(dev, gradd_sparse_kernel<T, R, CPL>, TS.count, smem, st, P, fixed);
  }
  /* row ranges where rows have at most 2 terms on average (d one chunk of
   * columns: the CachedContrastive tiles, Lq 128 x 32 queries against Ld
   * 2048 ... 8192); else buckets where a document has at least a candidate
   * per row; with fewer (a few long documents) a CTA per (document, segment)
   * leaves SMs idle and most rows empty: the tiles */
  if (dev.info->bw_buckets && !packed && P.pairing != 2) {
    cudaError_t e = cudaErrorNotSupported;
    if (dev.info->bw_ranges && nch == 1 && ncands <= 2 * len && ncands <= SEG_MAX) {
      e = launch_ranges<T, R, CPL>(P, dev, st);
      ranges = e == cudaSuccess;
    }
    if (e == cudaErrorNotSupported && ncands >= len)
      e = launch_buckets<T, R, CPL>(P, dev, st, ws, ws_bytes);
    if (e != cudaErrorNotSupported) return e;
  }
  /* tiles of up to 128 rows while two CTAs fit an SM, fewer while the grid
   * would leave SMs idle */
  if (tt > 64 && 2 * (fixed + (size_t)128 * row_bytes) <= (size_t)smem_max) tt = 128;
  else if (tt > 64) tt = 64;
  if (!packed)
    while (tt > 8 && tt / 2 >= len) tt >>= 1;
  int64_t items;
  {
    auto count = [&](int t) -> int64_t {
      if (packed) return (total + t - 1) / t;
      return TS.count * ((len + t - 1) / t);
    };
    while (tt > 8 && count(tt) < 4 * (int64_t)sms) tt >>= 1;
    P.tps = packed ? 0 : (len + tt - 1) / tt;
    items = count(tt);
  }
  if (items <= 0) return cudaSuccess;
  if (items > INT_MAX) return cudaErrorInvalidConfiguration;
  P.tt = tt;
  P.nch = (int)nch;
  return launch_smem(dev, gradd_kernel<T, R, CPL>, items, fixed + (size_t)tt * row_bytes, st, P);
}

template <typename T, typename R>
static cudaError_t launch_norms(const KSeq &s, int64_t ntok, R *out, cudaStream_t st) {
  if (ntok <= 0) return cudaSuccess;
  const int64_t blocks = (ntok + NW - 1) / NW;
  norms_kernel<T, R><<<(unsigned)blocks, NT, 0, st>>>(s, ntok, out);
  return cudaGetLastError();
}

/* CSR of the pair list by key (pair_q or pair_d): start [nkeys + 1], pairs [P]. */
static cudaError_t build_csr(StreamScratch &sc, const KIndex &key, int64_t np, int64_t nkeys,
                             int32_t **start, int32_t **pairs, cudaStream_t st) {
  uint32_t *k_in, *k_out;
  int32_t *v_in;
  cudaError_t e;
  if ((e = sc.get((void **)&k_in, np * 4)) || (e = sc.get((void **)&k_out, np * 4)) ||
      (e = sc.get((void **)&v_in, np * 4)) || (e = sc.get((void **)pairs, np * 4)) ||
      (e = sc.get((void **)start, (nkeys + 1) * 4)))
    return e;
  if (np > 0) {
    pair_keys_kernel<<<(unsigned)((np + 255) / 256), 256, 0, st>>>(key, np, k_in, v_in);
    if ((e = cudaGetLastError())) return e;
    int bits = 1;
    while (bits < 32 && ((int64_t)1 << bits) <= nkeys) ++bits;
    size_t tmp_bytes = 0;
    if ((e = cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, k_in, k_out, v_in, *pairs,
                                             (int)np, 0, bits, st)))
      return e;
    void *tmp;
    if ((e = sc.get(&tmp, tmp_bytes))) return e;
    if ((e = cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, k_in, k_out, v_in, *pairs, (int)np,
                                             0, bits, st)))
      return e;
  }
  csr_start_kernel<<<(unsigned)((nkeys + 1 + 255) / 256), 256, 0, st>>>(k_out, np, nkeys, *start);
  return cudaGetLastError();
}

/* One gradient's launch (grad_Q, else grad_D) with its vector flags: it
 * reads the other side's rows (sources) and its own (normalize) and writes
 * its output.  A d too large for the kernel is LIK_ERR_UNSUPPORTED. */
template <typename T, typename R, int CPL>
static lik_status launch_side(const lik_bw *bw, Params P, bool grad_q, const Device &dev,
                              cudaStream_t st, bool &ranges, void *ws = nullptr,
                              size_t ws_bytes = 0) {
  const int vq = vec_ok(bw->p.q, CPL), vd = vec_ok(bw->p.d, CPL);
  P.vec_src = grad_q ? vd : vq;
  P.vec_tgt = grad_q ? vq : vd;
  P.vec_out = vec_ok(grad_q ? bw->gq : bw->gd, CPL);
  const cudaError_t e = grad_q ? launch_gradq<T, R, CPL>(P, dev, st, ranges)
                               : launch_gradd<T, R, CPL>(P, dev, st, ws, ws_bytes, ranges);
  if (e == cudaErrorInvalidConfiguration)
    return lik_fail(LIK_ERR_UNSUPPORTED, "%s: d=%lld is too large for the CUDA backward",
                    grad_q ? "Q" : "D", (long long)bw->p.q.dim);
  return e == cudaSuccess ? LIK_OK
                          : cuda_fail(e, grad_q ? "the grad_Q kernel launch"
                                                : "the grad_D kernel launch");
}

/* x's tokens fill one dense block of tokens * dim elements. */
static bool dense_block(const lik_seqs &x, int64_t tokens) {
  if (tokens <= 0 || x.sk != 1 || x.sl != x.dim) return false;
  return x.offsets.data || (x.group == 0 && (x.count <= 1 || x.sn == x.len * x.dim));
}

template <typename T, typename R, int CPL>
static lik_status run(const lik_bw *bw, Params P, const Device &dev, cudaStream_t st) {
  const lik_problem *p = &bw->p;
  const bool want_q = bw->gq.data && p->q.count > 0;
  const bool want_d = bw->gd.data && p->d.count > 0;
  cudaError_t e;
  StreamScratch sc(dev, st);
  const int64_t ntq = p->q.offsets.data ? bw->q_total : p->q.count * p->q.len;
  const int64_t ntd = p->d.offsets.data ? bw->d_total : p->d.count * p->d.len;
  if (p->call.normalize) {
    R *qn, *dn;
    if (ntq > (int64_t)(SIZE_MAX / sizeof(R)) || ntd > (int64_t)(SIZE_MAX / sizeof(R)))
      return lik_fail(LIK_ERR_ALLOC, /* broadcast views can count more tokens than memory holds */
                      "backward: the norms of %lld + %lld tokens exceed the address space",
                      (long long)ntq, (long long)ntd);
    if ((e = sc.get((void **)&qn, (size_t)ntq * sizeof(R))) ||
        (e = sc.get((void **)&dn, (size_t)ntd * sizeof(R))))
      return cuda_fail(e, "allocating CUDA scratch (token norms)");
    if ((e = launch_norms<T, R>(P.q, ntq, qn, st)) || (e = launch_norms<T, R>(P.d, ntd, dn, st)))
      return cuda_fail(e, "the norm kernel launch");
    P.qnorm = qn;
    P.dnorm = dn;
  }
  if (p->pairing == LIK_PAIRING_LIST) {
    if (p->ncand > INT_MAX || p->q.count >= INT_MAX || p->d.count >= INT_MAX)
      return lik_fail(LIK_ERR_UNSUPPORTED,
                      "pair_q: %lld pairs is too many for the CUDA backward (at most %d)",
                      (long long)p->ncand, INT_MAX);
    int32_t *s, *l;
    if (want_q) {
      if ((e = build_csr(sc, P.pq, p->ncand, p->q.count, &s, &l, st)))
        return cuda_fail(e, "grouping the pairs by query");
      P.q_start = s;
      P.q_pairs = l;
    }
    if (want_d) {
      if ((e = build_csr(sc, P.pd, p->ncand, p->d.count, &s, &l, st)))
        return cuda_fail(e, "grouping the pairs by document");
      P.d_start = s;
      P.d_pairs = l;
    }
  }
  /* grad_D first: until grad_Q is written, its buffer (when it is one dense
   * block of memory) is the workspace of grad_D's buckets, so they cost no
   * memory beyond the gradients */
  void *ws = nullptr;
  size_t ws_bytes = 0;
  if (want_q && dense_block(bw->gq, p->q.offsets.data ? bw->q_total : p->q.count * p->q.len)) {
    ws = const_cast<void *>(bw->gq.data);
    ws_bytes = (size_t)(p->q.offsets.data ? bw->q_total : p->q.count * p->q.len) *
               (size_t)bw->gq.dim * sizeof(T);
  }
  lik_status s;
  bool ranges = false; /* grad_D ran range_kernel: grad_Q may overlap its end */
  if (want_d && (s = launch_side<T, R, CPL>(bw, P, false, dev, st, ranges, ws, ws_bytes)))
    return s;
  return want_q ? launch_side<T, R, CPL>(bw, P, true, dev, st, ranges) : LIK_OK;
}

} // namespace bw
} // namespace lik_cuda

using namespace lik_cuda;
using namespace lik_cuda::bw;

extern "C" lik_status lik_cuda_maxsim_backward(const lik_bw *bwp, lik_backward strategy) {
  (void)strategy; /* every strategy is this one kernel family */
  const lik_problem *p = &bwp->p;
  const bool want_q = bwp->gq.data && p->q.count > 0;
  const bool want_d = bwp->gd.data && p->d.count > 0;
  if (!want_q && !want_d) return LIK_OK;
  OnDevice dev(p->call);
  if (dev.st) return dev.st;
  Params P;
  memset(&P, 0, sizeof P);
  set_problem(P, *p);
  P.gq = kseq(bwp->gq);
  P.gd = kseq(bwp->gd);
  set_argmax(P, p->out);
  set_grad_scores(P, *bwp);
  P.q_total = bwp->q_total;
  P.d_total = bwp->d_total;
  cudaStream_t st = (cudaStream_t)p->call.stream;
  switch (p->q.dtype) {
  case LIK_BF16: return run<__nv_bfloat16, float, 4>(bwp, P, dev, st);
  case LIK_F16: return run<__half, float, 4>(bwp, P, dev, st);
  case LIK_F32: return run<float, float, 4>(bwp, P, dev, st);
  default: return run<double, double, 2>(bwp, P, dev, st);
  }
}
