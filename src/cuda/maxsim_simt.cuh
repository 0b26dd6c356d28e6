/*
 * maxsim_simt.cuh — the CUDA-core MaxSim forward: fp64 inputs in fp64 DFMA
 * (norms, maxima and the score sum in fp64 too; F64 or F32 scores), and the
 * fallback for half / fp32 inputs whose query block does not fit in shared
 * memory (fp32 then in FFMA, full fp32 accuracy).  Same work decomposition
 * and semantics as the tensor-core kernel; plain, not tuned.  A is the
 * compute type: double for fp64 inputs, else float.
 *
 * CTA: 256 threads = 32 query rows x 8 column groups; D tiles of 64 tokens,
 * K chunks of 32 features through shared memory.
 */
#include "common.cuh"

namespace lik_cuda {

template <typename T> __device__ __forceinline__ double to_d(T x) {
  return (double)to_f<T>(x);
}
template <> __device__ __forceinline__ double to_d<double>(double x) { return x; }

template <typename T, typename A, bool ARGMAX>
__global__ void __launch_bounds__(256) maxsim_simt_kernel(const KParams P) {
  constexpr int BQ = 32, BD = 64, KC = 32;
  __shared__ A qs[BQ][KC + 1];
  __shared__ A ds[BD][KC + 1];
  __shared__ A qinv[BQ], dinv[BD];
  __shared__ A redc[BQ];

  const int tid = threadIdx.x;
  const int r = tid >> 3, cg = tid & 7;
  const int64_t row = (int64_t)blockIdx.x / P.upr;
  const int64_t unit = (int64_t)blockIdx.x % P.upr;
  const int64_t j0 = unit * P.dpc;
  int64_t nitems = P.ncand - j0;
  if (nitems > P.dpc) nitems = P.dpc;
  if (nitems <= 0) return;
  const T *Qp = reinterpret_cast<const T *>(P.q.data);
  const T *Dp = reinterpret_cast<const T *>(P.d.data);
  const int64_t dim = P.d.dim;

  for (int64_t it = 0; it < nitems; ++it) {
    A total = (A)0; /* the score in A, rounded once when written */
    for (int qb = 0; qb < P.nqb; ++qb) {
      int64_t qi, dj;
      item_of(P, row, j0 + it, qi, dj);
      const int64_t qlen = seq_len(P.q, qi), qbase = seq_base(P.q, qi);
      /* a block wholly past a packed query's end sees an empty document */
      const int64_t dlen = qb > 0 && (int64_t)qb * BQ >= qlen ? 0 : seq_len(P.d, dj);
      const int64_t dbase = seq_base(P.d, dj);
      const int64_t s = (int64_t)qb * BQ + r;
      __syncthreads();
      if (tid < BQ) {
        A ss = (A)0;
        const int64_t sq = (int64_t)qb * BQ + tid;
        if (P.normalize && sq < qlen) {
          const T *tok = Qp + qbase + sq * P.q.sl;
          for (int64_t k = 0; k < dim; ++k) {
            const A x = (A)to_d<T>(tok[k * P.q.sk]);
            ss = fma(x, x, ss);
          }
        }
        qinv[tid] = (A)1 / fmax(sqrt(ss), (A)LIK_NORM_EPS);
      }
      A rmv = (A)CUDART_NAN; /* no value yet (takes_max) */
      int rai = -1;
      const int64_t ntiles = dlen > 0 ? (dlen + BD - 1) / BD : 1;
      for (int64_t tile = 0; tile < ntiles; ++tile) {
        const int64_t t0 = tile * BD;
        A acc[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) acc[u] = (A)0;
        A dss = (A)0;
        for (int64_t k0 = 0; k0 < dim; k0 += KC) {
          __syncthreads();
          for (int u = tid; u < BQ * KC; u += 256) {
            const int rr = u / KC, kk = u % KC;
            const int64_t sq = (int64_t)qb * BQ + rr, k = k0 + kk;
            qs[rr][kk] = (sq < qlen && k < dim)
                             ? (A)to_d<T>(Qp[qbase + sq * P.q.sl + k * P.q.sk])
                             : (A)0;
          }
          for (int u = tid; u < BD * KC; u += 256) {
            const int rr = u / KC, kk = u % KC;
            const int64_t t = t0 + rr, k = k0 + kk;
            ds[rr][kk] = (t < dlen && k < dim)
                             ? (A)to_d<T>(Dp[dbase + t * P.d.sl + k * P.d.sk])
                             : (A)0;
          }
          __syncthreads();
          if (P.normalize && tid < BD) {
            for (int kk = 0; kk < KC; ++kk) {
              const A x = ds[tid][kk];
              dss = fma(x, x, dss);
            }
          }
#pragma unroll 4
          for (int kk = 0; kk < KC; ++kk) {
            const A qv = qs[r][kk];
#pragma unroll
            for (int u = 0; u < 8; ++u) acc[u] += qv * ds[cg + 8 * u][kk];
          }
        }
        if (P.normalize) {
          __syncthreads();
          if (tid < BD) dinv[tid] = (A)1 / fmax(sqrt(dss), (A)LIK_NORM_EPS);
          __syncthreads();
        }
        const int64_t mb = P.dm.data ? mask_base(P.dm, P.d, dj) : 0;
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int cl = cg + 8 * u;
          const int64_t t = t0 + cl;
          bool ok = t < dlen;
          if (ok && P.dm.data) ok = P.dm.data[mb + t * P.dm.sl] != 0;
          if (!ok) continue;
          const A v = P.normalize ? acc[u] * dinv[cl] : acc[u];
          if (takes_max(v, rmv)) {
            rmv = v;
            rai = (int)t;
          }
        }
      }
      /* reduce the 8 column groups of row r (consecutive lanes) */
      argmax_lanes<8>(rmv, rai);
      if (cg == 0) {
        bool qv = s < qlen;
        if (qv && P.qm.data)
          qv = P.qm.data[mask_base(P.qm, P.q, qi) + s * P.qm.sl] != 0;
        const bool live = qv && rmv == rmv; /* some valid token won (-inf included) */
        redc[r] = live ? (P.normalize ? rmv * qinv[r] : rmv) : (A)0;
        if (ARGMAX && s < P.q.len) /* -1 past a packed query's length */
          P.argmax[row * P.asi + (j0 + it) * P.asj + s * P.ass] = live ? rai : -1;
      }
      __syncthreads();
      if (tid == 0) {
        A tot = (A)0;
        for (int x = 0; x < BQ; ++x) tot += redc[x];
        total += tot;
      }
    }
    if (tid == 0) {
      const int64_t at = row * P.ssi + (j0 + it) * P.ssj;
      if (P.scores64) /* F64 scores: fp64 inputs only (validated) */
        P.scores64[at] = (double)total;
      else
        P.scores[at] = (float)total;
    }
  }
}

} // namespace lik_cuda
