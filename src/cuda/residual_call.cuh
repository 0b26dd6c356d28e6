/*
 * residual_call.cuh — what launches the residual kernels (residual.cuh)
 * from another translation unit: their parameter blocks (the codec, the
 * compressed tokens, residual MaxSim's KRes), their element loader and
 * residual MaxSim's launcher (residual.cu; the
 * PLAID search, plaid.cu, launches its exact stage through it).  No kernels:
 * they stay in residual.cu's translation unit.
 */
#ifndef LIK_CUDA_RESIDUAL_CALL_CUH
#define LIK_CUDA_RESIDUAL_CALL_CUH

#include "common.cuh"
#include "device.cuh"
#include "host.cuh"

extern "C" {
#include "../core/residual.h"
}

namespace lik_cuda {
namespace res {

struct KCodec {
  const void *cent;
  int cent_dt;
  int cent_vec; /* F16 rows of 8 aligned halves: 16-byte loads */
  int64_t ncent, dim, cent_sc, cent_sk;
  const void *weights;
  int w_dt;
  int64_t ws;
  int nbits, colbert;
  int64_t width;
};

struct KTok {
  const void *codes;
  int codes64;
  int res_vec; /* residual bytes contiguous, a token's 8-dimension groups aligned to nbits */
  int64_t code_sn, code_s;
  const uint8_t *res;
  int64_t res_sn, res_st, res_sp;
  int64_t count, len;
  KIndex lengths, offsets; /* data NULL where absent */
};

struct KRes {
  KCodec c;
  KTok t;
  const void *q;
  int q_dt;
  int64_t nq, lq, q_sn, q_sl, q_sk;
  float *scores;
  int64_t ssi, ssj;
  int32_t *argmax;
  int64_t asi, asj, ass;
  int normalize;
  int dpad, bn;             /* d rounded up to 16; tokens per tile (32 or 64) */
  int64_t ldr;              /* shared row stride in elements: dpad + 16 bytes */
  int64_t off_wt, off_q, off_x, off_part, off_inv, off_code, off_roff, off_rv, off_ri, off_row; /* bytes */
  /* LIST kernels (the PLAID search's exact stage): item (i, j) scores
   * document list[i * list_sn + j] of the index when j < list_n[i] */
  const int32_t *list, *list_n;
  int64_t list_sn;
  int tf32;                 /* float tiles: one TF32 product (LIK_FP32_TF32) */
  /* the full scan's query stacking: a CTA's QB rows are qpg slots of qslot
   * rows, one query each (qpg = 1, qslot = QB: one query per item; LIST
   * kernels never stack) */
  int qpg, qslot;
};

/* Element i of an F16 / BF16 / F64 / F32 array as fp32 (the residual kernels'
 * and the PLAID search's one loader). */
__device__ __forceinline__ float load_f(const void *p, int dt, int64_t i) {
  switch (dt) {
    case LIK_F16: return __half2float(((const __half *)p)[i]);
    case LIK_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case LIK_F64: return (float)((const double *)p)[i];
    default: return ((const float *)p)[i];
  }
}

/* residual_maxsim_kernel's launch (src/cuda/residual.cu): P's codec, tokens,
 * query and outputs set; picks the query block (and, for the full scan, the
 * queries stacked in it) and tile, lays out shared memory, launches on
 * stream (LIST: P.list set, items = queries x list slots; the full scan
 * counts its own items). */
lik_status launch_residual(KRes &P, int64_t items, const Device &dev, cudaStream_t stream);

} // namespace res
} // namespace lik_cuda

#endif
