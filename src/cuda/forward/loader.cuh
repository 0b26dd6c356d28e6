/*
 * forward/loader.cuh — what the tensor-core MaxSim forward (forward/kernel.cuh)
 * reads from global memory: 16-byte chunks of a token's features, and the
 * cursor that walks a CTA's (query block, item, document tile, k-chunk)
 * sequence: one cursor issues the loads ahead, one follows it to compute.
 */
#ifndef LIK_CUDA_FORWARD_LOADER_CUH
#define LIK_CUDA_FORWARD_LOADER_CUH

#include "../common.cuh"

namespace lik_cuda {

/* Byte offset of 16-byte chunk ch of row r in a tile with RB-byte rows,
 * each row padded by 16 bytes: the 8 row addresses of an ldmatrix 8x8 are
 * 4 banks apart (conflict-free) and the k-step offset is an immediate. */
template <int RB>
__device__ __forceinline__ uint32_t swz(int r, int ch) {
  return (uint32_t)(r * (RB + 16) + (ch << 4));
}

/* Elements of T in one 16-byte chunk (8 half, 4 fp32). */
template <typename T> constexpr int epc() { return 16 / (int)sizeof(T); }

template <typename T>
__device__ __forceinline__ float sumsq8(uint4 v) {
  const T *e = reinterpret_cast<const T *>(&v);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < epc<T>(); ++i) {
    float x = to_f<T>(e[i]);
    s = fmaf(x, x, s);
  }
  return s;
}

/* Loads the 16-byte chunk of features [k0, k0 + epc) of one token element
 * by element (any stride sk: the path for views without 16-byte vectors),
 * zero outside [0, dim). */
template <typename T>
__device__ __forceinline__ uint4 load8(const T *tok, int64_t sk, int64_t k0, int64_t dim) {
  uint4 v = make_uint4(0, 0, 0, 0);
  T *e = reinterpret_cast<T *>(&v);
#pragma unroll
  for (int i = 0; i < epc<T>(); ++i) {
    const int64_t k = k0 + i;
    e[i] = k < dim ? tok[k * sk] : from_f<T>(0.f);
  }
  return v;
}

struct Cursor {
  int qb;
  int kc;
  int rank, split; /* this cursor's tiles: rank, rank + split, ... (1 CTA: 0, 1) */
  int64_t it, tile;
  int64_t qi, doc, len, ntiles, base;
  bool masked; /* the item's tiles read d_mask (not a detected prefix) */
  bool done;
};

template <int BD>
__device__ __forceinline__ void cursor_item(const KParams &P, Cursor &c,
                                            int64_t row, int64_t j0) {
  item_of(P, row, j0 + c.it, c.qi, c.doc);
  c.len = seq_len(P.d, c.doc);
  c.masked = P.dm.data != nullptr;
  if (P.dpre) { /* a prefix mask: the item runs unmasked, shortened */
    const int64_t v = __ldg(P.dpre + c.doc);
    if (v >= 0) {
      c.masked = false;
      if (v < c.len) c.len = v;
    }
  }
  /* a query block wholly past a packed query's end (P.q.len only bounds it):
   * one empty tile, no loads, no MMAs; it adds 0 and writes argmax -1 */
  if (c.qb > 0 && P.s0 + (int64_t)c.qb * P.qrows >= seq_len(P.q, c.qi)) c.len = 0;
  /* this rank's tiles; none (a rank past a short document): one empty tile */
  const int64_t all = (c.len + BD - 1) / BD;
  const int64_t mine = c.split == 1 ? all : (all - c.rank + c.split - 1) / c.split;
  c.ntiles = mine > 0 ? mine : 1;
  c.base = seq_base(P.d, c.doc);
}

/* First token of the cursor's current tile. */
template <int BD>
__device__ __forceinline__ int64_t tile_t0(const Cursor &c) {
  return (c.tile * c.split + c.rank) * BD;
}

template <int BD>
__device__ __forceinline__ void cursor_next(const KParams &P, Cursor &c,
                                            int64_t row, int64_t j0,
                                            int64_t nitems, int nkc, int nqb) {
  if (++c.kc < nkc) return;
  c.kc = 0;
  if (++c.tile < c.ntiles) return;
  c.tile = 0;
  if (++c.it == nitems) {
    c.it = 0;
    if (++c.qb == nqb) {
      c.done = true;
      return;
    }
  }
  cursor_item<BD>(P, c, row, j0);
}

} // namespace lik_cuda

#endif
