/*
 * plaid.cu — extern "C" entry points of the PLAID index on CUDA
 * (src/core/plaid.h): the device copy of an index (one allocation, made
 * synchronously) and the search, every stage on the call's stream with no
 * host synchronisation (kernels in plaid.cuh; the exact stage is the residual
 * MaxSim kernel over each query's list of documents, residual.cuh).
 *
 * A search runs in chunks of queries whose scratch (one stream-ordered
 * allocation, freed on the stream) stays under CHUNK_BYTES: per query its
 * centroid scores [K][LQP], candidate bitmap, candidate list and two key
 * arrays [ndocs], the stages' lists.  Per chunk:
 *   prep, cs, (cmax), probe, mark, compact          the candidates
 *   (prune) approx + sort + select: n_full         stage A
 *   approx + sort + select: max(top_k, n_full / 4) stage B
 *   residual MaxSim of those, keys, sort, write     the exact top_k
 */
#include <stdint.h>
#include <string.h>

#include <cub/device/device_segmented_radix_sort.cuh>

#include "device.cuh"
#include "host.cuh"
#include "plaid.cuh"
#include "residual_call.cuh"

extern "C" {
#include "../core/plaid.h"
}

namespace lik_cuda {
namespace plaid {

constexpr int64_t CHUNK_BYTES = (int64_t)2 << 30;

struct IndexCopy {
  int device;
  void *base; /* the one allocation */
  int64_t bytes;
  KIndexCopy ix;
  const uint8_t *res;   /* [ntok][width] */
  const float *weights; /* [2^nbits] */
  int nbits;
  int64_t width, ntok;
};

/* Bump allocation inside one block (256-byte aligned parts). */
struct Carve {
  char *base;
  int64_t off;
  template <typename T>
  T *take(int64_t n) {
    T *p = base ? (T *)(base + off) : nullptr;
    off += (n * (int64_t)sizeof(T) + 255) / 256 * 256;
    return p;
  }
};

static lik_status copy_in(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0) return LIK_OK;
  const cudaError_t e = cudaMemcpy(dst, src, (size_t)bytes, cudaMemcpyHostToDevice);
  return e == cudaSuccess ? LIK_OK : cuda_fail(e, "copying the index to the device");
}

static int grid_of(int64_t threads, int block) { return (int)((threads + block - 1) / block); }

} // namespace plaid
} // namespace lik_cuda

using namespace lik_cuda;
using namespace lik_cuda::plaid;

extern "C" lik_status lik_cuda_plaid_upload(const lik_plaid_src *s, int device_id, void **state,
                                            int64_t *bytes) {
  *state = NULL;
  *bytes = 0;
  DeviceGuard scope(device_id);
  if (scope.err != cudaSuccess)
    return lik_fail(LIK_ERR_DEVICE, "device_id: CUDA device %d cannot be selected (%s)",
                    device_id, cudaGetErrorString(scope.err));
  const int64_t words = (s->ndocs + 31) / 32, nivf = s->ivf_off[s->ncent];
  /* the layout, then the allocation */
  IndexCopy *S = (IndexCopy *)calloc(1, sizeof(IndexCopy));
  uint32_t *alive = (uint32_t *)calloc((size_t)words + 1, sizeof(uint32_t));
  uint32_t *full = (uint32_t *)calloc((size_t)words + 1, sizeof(uint32_t));
  if (!S || !alive || !full) {
    free(S);
    free(alive);
    free(full);
    return lik_fail(LIK_ERR_ALLOC, "lik_plaid_index_to_device: cannot allocate the host tables");
  }
  for (int64_t j = 0; j < s->ndocs; j++) {
    const int dead = s->dead && (s->dead[j >> 6] >> (j & 63) & 1);
    if (dead) continue;
    alive[j >> 5] |= 1u << (j & 31);
    if (s->doc_off[j + 1] > s->doc_off[j]) full[j >> 5] |= 1u << (j & 31);
  }
  Carve c = {nullptr, 0};
  for (int pass = 0; pass < 2; pass++) {
    c.off = 0;
    S->ix.cent = c.take<__half>(s->ncent * s->dim);
    S->ix.codes = c.take<int32_t>(s->ntok);
    S->res = c.take<uint8_t>(s->ntok * s->width);
    S->ix.doc_off = c.take<int64_t>(s->ndocs + 1);
    S->ix.ivf_off = c.take<int64_t>(s->ncent + 1);
    S->ix.ivf = c.take<int32_t>(nivf);
    S->ix.ids = s->ids ? c.take<int64_t>(s->ndocs) : nullptr;
    S->ix.alive = c.take<uint32_t>(words);
    S->ix.full = c.take<uint32_t>(words);
    S->weights = c.take<float>(256);
    if (pass == 0) {
      const cudaError_t e = cudaMalloc((void **)&c.base, (size_t)c.off);
      if (e != cudaSuccess) {
        free(S);
        free(alive);
        free(full);
        (void)cudaGetLastError();
        return lik_fail(e == cudaErrorMemoryAllocation ? LIK_ERR_ALLOC : LIK_ERR_CUDA,
                        "lik_plaid_index_to_device: %lld bytes of CUDA device %d memory: %s",
                        (long long)c.off, device_id, cudaGetErrorString(e));
      }
    }
  }
  lik_status st = copy_in((void *)S->ix.cent, s->cent_f16, s->ncent * s->dim * 2);
  int64_t tok = 0;
  for (int64_t g = 0; g < s->nseg && !st; g++) {
    const lik_plaid_src_seg *sg = &s->segs[g];
    st = copy_in((void *)(S->ix.codes + tok), sg->codes, sg->ntok * 4);
    if (!st) st = copy_in((void *)(S->res + tok * s->width), sg->res, sg->ntok * s->width);
    tok += sg->ntok;
  }
  if (!st) st = copy_in((void *)S->ix.doc_off, s->doc_off, (s->ndocs + 1) * 8);
  if (!st) st = copy_in((void *)S->ix.ivf_off, s->ivf_off, (s->ncent + 1) * 8);
  if (!st) st = copy_in((void *)S->ix.ivf, s->ivf, nivf * 4);
  if (!st && s->ids) st = copy_in((void *)S->ix.ids, s->ids, s->ndocs * 8);
  if (!st) st = copy_in((void *)S->ix.alive, alive, words * 4);
  if (!st) st = copy_in((void *)S->ix.full, full, words * 4);
  if (!st) st = copy_in((void *)S->weights, s->weights, ((int64_t)1 << s->nbits) * 4);
  free(alive);
  free(full);
  S->device = device_id;
  S->base = c.base;
  S->bytes = c.off;
  S->ix.ncent = s->ncent;
  S->ix.dim = s->dim;
  S->ix.ndocs = s->ndocs;
  S->ix.ndead = s->ndead;
  S->ix.words = words;
  S->nbits = s->nbits;
  S->width = s->width;
  S->ntok = s->ntok;
  if (st) {
    lik_cuda_plaid_release(S);
    return st;
  }
  *state = S;
  *bytes = S->bytes;
  return LIK_OK;
}

extern "C" void lik_cuda_plaid_release(void *state) {
  IndexCopy *S = (IndexCopy *)state;
  if (!S) return;
  DeviceGuard scope(S->device);
  cudaFree(S->base);
  free(S);
}

namespace {

/* A chunk's scratch besides KChunk's own arrays. */
struct Scratch {
  int32_t *cand, *n0; /* [nq][ndocs] candidates, [nq] their counts */
  uint64_t *ka, *kb;  /* [nq][ndocs] sort keys, in and out */
  int32_t *la, *na;   /* [nq][capA] stage A's survivors */
  int32_t *lb, *nb;   /* [nq][NE] stage B's survivors */
  float *ex;          /* [nq][NE] their exact scores */
  int *begin, *end;   /* [nq] sort segments */
  float *part_s;      /* [nq][LQ][splits][np] the probe ranges' lists */
  int32_t *part_i;
  void *tmp;          /* the sort's scratch */
};

/* Lays out (c.base NULL: measures) the scratch of n queries. */
static void carve(Carve &c, int64_t n, KChunk &k, Scratch &x, int prune, int64_t capA,
                  int64_t NE, int splits, size_t tmp_bytes) {
  const int64_t nd = k.cap;
  k.qn = c.take<float>(n * k.lq * k.ix.dim);
  k.zero = c.take<uint8_t>(n * k.lq);
  k.qlen = c.take<int32_t>(n);
  k.cs = c.take<float>(n * k.ix.ncent * k.lqp);
  k.cmax = prune ? c.take<float>(n * k.ix.ncent) : nullptr;
  k.probes = c.take<int32_t>(n * k.lq * k.np);
  k.bits = c.take<uint32_t>(n * k.ix.words);
  x.cand = c.take<int32_t>(n * nd);
  x.n0 = c.take<int32_t>(n);
  x.ka = c.take<uint64_t>(n * nd);
  x.kb = c.take<uint64_t>(n * nd);
  x.la = c.take<int32_t>(n * capA);
  x.na = c.take<int32_t>(n);
  x.lb = c.take<int32_t>(n * NE);
  x.nb = c.take<int32_t>(n);
  x.ex = c.take<float>(n * NE);
  x.begin = c.take<int>(n);
  x.end = c.take<int>(n);
  x.part_s = c.take<float>(n * k.lq * splits * k.np);
  x.part_i = c.take<int32_t>(n * k.lq * splits * k.np);
  x.tmp = c.take<char>((int64_t)tmp_bytes);
}

/* One segmented sort of the chunk's keys: [q * cap, q * cap + n[q]). */
struct Sorter {
  void *tmp;
  size_t tmp_bytes;
  int *begin, *end;
  int pb;
  cudaStream_t stream;
  lik_status run(KChunk &P, const int32_t *n, const uint64_t *in, uint64_t *out) const {
    segments_kernel<<<grid_of(P.nq, 128), 128, 0, stream>>>(P, n, begin, end);
    size_t bytes = tmp_bytes;
    const cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeysDescending(
        tmp, bytes, in, out, (int)(P.nq * P.cap), (int)P.nq, begin, end, 0, 32 + pb, stream);
    return e == cudaSuccess ? launched("the PLAID search's sort") : cuda_fail(e, "the PLAID search's sort");
  }
};

} // namespace

extern "C" lik_status lik_cuda_plaid_search(const void *state, const lik_plaid_query *q) {
  const IndexCopy &S = *(const IndexCopy *)state;
  OnDevice dev(q->call);
  if (dev.st) return dev.st;
  lik_status st = LIK_OK;
  cudaStream_t stream = (cudaStream_t)q->call.stream;
  const int64_t nq = q->q.count, lq = q->q.len, K = S.ix.ncent, nd = S.ix.ndocs;
  const int64_t np = q->n_probe;
  const int64_t n_exact = q->top_k > q->n_full / 4 ? q->top_k : q->n_full / 4;
  const int64_t capA = nd < (q->n_full > n_exact ? q->n_full : n_exact)
                           ? nd : (q->n_full > n_exact ? q->n_full : n_exact);
  const int64_t NE = nd < n_exact ? nd : n_exact;
  KChunk P;
  memset(&P, 0, sizeof P);
  P.ix = S.ix;
  P.q = kseq(q->q);
  P.q_dt = q->q.dtype;
  P.q_lengths = kindex(q->q_lengths);
  P.lq = lq;
  P.lqp = (lq + 31) / 32 * 32;
  P.np = np;
  P.cap = nd;
  P.top_k = q->top_k;
  P.pb = 1;
  while (P.pb < 31 && ((int64_t)1 << P.pb) < nd) P.pb++;
  if (nd == 0 || lq == 0) { /* no results: -inf / -1 everywhere */
    P.nq = nq;
    write_kernel<<<grid_of(nq * q->top_k, 256), 256, 0, stream>>>(P, nullptr, nullptr, q->scores,
                                                                   q->s_i, q->s_k, q->ids, q->i_i, q->i_k);
    return launched("the PLAID search's output kernel");
  }
  /* the probe's centroid ranges: enough CTAs to fill the GPU twice for few
   * queries, ranges of at least 256 centroids */
  const int64_t tiles = (lq + 31) / 32, kmax = K / 256 < 1 ? 1 : K / 256;
  int64_t splits_ = (2 * (int64_t)dev.info->sms + tiles * nq - 1) / (tiles * nq);
  if (splits_ > 64) splits_ = 64;
  if (splits_ > kmax) splits_ = kmax;
  const int splits = (int)(splits_ < 1 ? 1 : splits_);
  /* the chunk: as many queries as fit CHUNK_BYTES of scratch (at least one;
   * grid y / z and the sort's int counts bound it too) */
  Scratch x;
  Carve c = {nullptr, 0};
  carve(c, 1, P, x, q->prune, capA, NE, splits, 0);
  int64_t qc = CHUNK_BYTES / c.off;
  if (qc > nq) qc = nq;
  if (qc > 65535) qc = 65535;
  if (qc > (int64_t)INT32_MAX / nd) qc = (int64_t)INT32_MAX / nd;
  if (qc < 1) qc = 1;
  Sorter sort;
  memset(&sort, 0, sizeof sort);
  sort.pb = P.pb;
  sort.stream = stream;
  cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeysDescending(
      nullptr, sort.tmp_bytes, (const uint64_t *)nullptr, (uint64_t *)nullptr, (int)(qc * nd),
      (int)qc, (int *)nullptr, (int *)nullptr, 0, 32 + P.pb, stream);
  if (e != cudaSuccess) return cuda_fail(e, "sizing the PLAID search's sort");
  c.off = 0;
  carve(c, qc, P, x, q->prune, capA, NE, splits, sort.tmp_bytes);
  void *base = nullptr;
  StreamScratch sc(dev, stream);
  e = sc.get(&base, (size_t)c.off);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return lik_fail(e == cudaErrorMemoryAllocation ? LIK_ERR_ALLOC : LIK_ERR_CUDA,
                    "PLAID search: %lld bytes of CUDA scratch for %lld queries: %s",
                    (long long)c.off, (long long)qc, cudaGetErrorString(e));
  }
  c.base = (char *)base;
  c.off = 0;
  carve(c, qc, P, x, q->prune, capA, NE, splits, sort.tmp_bytes);
  sort.tmp = x.tmp;
  sort.begin = x.begin;
  sort.end = x.end;
  e = cudaMemsetAsync(P.bits, 0, (size_t)(qc * S.ix.words * 4), stream);
  if (e != cudaSuccess) st = cuda_fail(e, "clearing the PLAID search's bitmaps");

  res::KRes R; /* the exact stage: residual MaxSim of each query's list */
  memset(&R, 0, sizeof R);
  R.c.cent = S.ix.cent;
  R.c.cent_dt = LIK_F16;
  R.c.cent_vec = S.ix.dim % 8 == 0;
  R.c.ncent = K;
  R.c.dim = S.ix.dim;
  R.c.cent_sc = S.ix.dim;
  R.c.cent_sk = 1;
  R.c.weights = S.weights;
  R.c.w_dt = LIK_F32;
  R.c.ws = 1;
  R.c.nbits = S.nbits;
  R.c.colbert = 1;
  R.c.width = S.width;
  R.t.codes = S.ix.codes;
  R.t.res_vec = S.width % S.nbits == 0;
  R.t.code_s = 1;
  R.t.res = S.res;
  R.t.res_st = S.width;
  R.t.res_sp = 1;
  R.t.count = NE;
  R.t.len = -1;
  R.t.offsets.data = S.ix.doc_off;
  R.t.offsets.stride = 1;
  R.t.offsets.is64 = 1;
  R.q_dt = LIK_F32;
  R.lq = lq;
  R.q_sn = lq * S.ix.dim;
  R.q_sl = S.ix.dim;
  R.q_sk = 1;
  R.ssi = NE;
  R.ssj = 1;
  R.normalize = 1;
  R.list_sn = NE;

  for (int64_t q0 = 0; q0 < nq && !st; q0 += qc) {
    P.q0 = q0;
    P.nq = nq - q0 < qc ? nq - q0 : qc;
    prep_kernel<<<grid_of(P.nq * lq * 32, 128), 128, 0, stream>>>(P);
    cs_kernel<<<dim3((unsigned)((K + CS_C - 1) / CS_C), (unsigned)(P.lqp / 32), (unsigned)P.nq), 256,
                0, stream>>>(P);
    if (q->prune) cmax_kernel<<<grid_of(P.nq * K, 256), 256, 0, stream>>>(P);
    {
      int W = (int)(49152 / (256 * np + 128));
      if (W > 32) W = 32;
      if (W < 1) W = 1;
      const int64_t smem = (int64_t)W * 32 * (8 * np + 4);
      if (smem > 49152) {
        e = cudaFuncSetAttribute((const void *)probe_kernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) {
          st = cuda_fail(e, "the PLAID probe kernel's shared memory");
          break;
        }
      }
      probe_kernel<<<dim3((unsigned)tiles, (unsigned)splits, (unsigned)P.nq), 32 * W, (size_t)smem,
                     stream>>>(P, splits, x.part_s, x.part_i);
      probe_merge_kernel<<<grid_of(P.nq * lq * 32, 128), 128, 0, stream>>>(P, splits, x.part_s, x.part_i);
    }
    mark_kernel<<<grid_of(P.nq * lq * np * 32, 256), 256, 0, stream>>>(P);
    compact_kernel<<<(unsigned)P.nq, CT, 0, stream>>>(P, x.cand, x.n0);
    if ((st = launched("the PLAID candidate kernels"))) break;
    const int32_t *l1 = x.cand, *n1 = x.n0;
    int64_t cap1 = nd;
    if (q->prune) { /* stage A: the n_full best by the pruned score */
      approx_kernel<<<grid_of(P.nq * nd * 32, 256), 256, 0, stream>>>(P, x.cand, x.n0, nd, 1,
                                                                      q->threshold, x.ka);
      if ((st = sort.run(P, x.n0, x.ka, x.kb))) break;
      select_kernel<<<grid_of(P.nq * capA, 256), 256, 0, stream>>>(P, x.kb, x.n0, n_exact, q->n_full,
                                                                   x.la, x.na, capA);
      l1 = x.la;
      n1 = x.na;
      cap1 = capA;
    }
    /* stage B: the n_exact best by the full approximate score */
    approx_kernel<<<grid_of(P.nq * cap1 * 32, 256), 256, 0, stream>>>(P, l1, n1, cap1, 0, 0.f, x.ka);
    if ((st = sort.run(P, n1, x.ka, x.kb))) break;
    select_kernel<<<grid_of(P.nq * NE, 256), 256, 0, stream>>>(P, x.kb, n1, n_exact, n_exact, x.lb,
                                                                x.nb, NE);
    if ((st = launched("the PLAID approximate stages"))) break;
    /* exact residual MaxSim, ranked */
    R.q = P.qn;
    R.nq = P.nq;
    R.scores = x.ex;
    R.list = x.lb;
    R.list_n = x.nb;
    if ((st = res::launch_residual(R, P.nq * NE, dev, stream))) break;
    keys_kernel<<<grid_of(P.nq * NE, 256), 256, 0, stream>>>(P, x.ex, x.lb, x.nb, NE, x.ka);
    if ((st = sort.run(P, x.nb, x.ka, x.kb))) break;
    write_kernel<<<grid_of(P.nq * q->top_k, 256), 256, 0, stream>>>(P, x.kb, x.nb, q->scores, q->s_i,
                                                                     q->s_k, q->ids, q->i_i, q->i_k);
    st = launched("the PLAID search's output kernel");
  }
  return st;
}
