/*
 * residual_call.cuh — what launches the residual kernels (residual.cuh)
 * from another translation unit: their parameter blocks (the codec, the
 * compressed tokens, residual MaxSim's KRes) and the functions that fill the
 * first two from the validated call (kcodec, ktok; codec.cu's compress uses
 * them too), their element loader and
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
  int ldr;                  /* shared row stride in elements: dpad + 16 bytes */
  uint32_t cdiv;            /* x / (dpad / 8) == __umulhi(x, cdiv) for a tile's groups x */
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

/* fp16 centroid rows of 8 aligned halves: 16-byte loads. */
static inline int cent_vec(const lik_codec_view &v) {
  return v.cent_dtype == LIK_F16 && v.cent_sk == 1 && v.cent_sc % 8 == 0 &&
         ((uintptr_t)v.cent & 15) == 0;
}

/* The residual bytes of an 8-dimension group (nbits bytes) can be read in one
 * load: contiguous bytes, every token's row aligned to nbits. */
static inline int res_vec(const lik_ctokens &t, int nbits) {
  return t.res_sp == 1 && t.res_st % nbits == 0 && t.res_sn % nbits == 0 &&
         (uintptr_t)t.res % (uintptr_t)nbits == 0;
}

/* The device views of a codec and of compressed tokens: the host structs'
 * fields in the kernel structs' order, the dtypes and layout resolved to
 * flags (residual.cu's kernels read them; codec.cu's compress writes the
 * tokens' codes and residual bytes through them). */
static inline KCodec kcodec(const lik_codec_view &v) {
  return KCodec{v.cent, v.cent_dtype, cent_vec(v),
                v.ncent, v.dim, v.cent_sc, v.cent_sk,
                v.weights, v.weights_dtype, v.weights_s,
                v.nbits, v.layout == LIK_RESIDUAL_COLBERT, v.width};
}

static inline KTok ktok(const lik_ctokens &t, int nbits) {
  return KTok{t.codes, t.codes_dtype == LIK_I64, t.res ? res_vec(t, nbits) : 0,
              t.code_sn, t.code_s,
              t.res, t.res_sn, t.res_st, t.res_sp,
              t.count, t.len,
              kindex(t.lengths), kindex(t.offsets)};
}

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
