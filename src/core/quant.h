/*
 * quant.h — the validated description of a low-bit MaxSim call (int8, fp8,
 * binary; lik_experimental.h), passed from src/api/quant.c to a backend, and
 * the checks those calls share.
 */
#ifndef LIK_QUANT_H
#define LIK_QUANT_H

#include "problem.h"

/* A scale: value (n, l) at data[n*sn + l*sl]; per tensor: sn = sl = 0. */
typedef struct {
  const float *data;
  int64_t sn, sl;
} lik_scale;

typedef enum {
  LIK_QK_INT8 = 0,    /* q, d int8: dot product of integers         */
  LIK_QK_FP8 = 1,     /* q, d fp8 (e4m3 or e5m2, q.dtype): fp32 sums */
  LIK_QK_I8_BITS = 2, /* q int8, d sign bits                         */
  LIK_QK_BITS = 3     /* q and d sign bits: d - 2 popcount(xor)      */
} lik_quant_kind;

/* One call: q / d over the stored elements (int8 / fp8 bytes, or bit bytes
 * with dim = ceil(d / 8)); scale_q / scale_d unused (data NULL) where the
 * kind has none.  Cross pairing; scores (i, j) at scores[i*score_si +
 * j*score_sj]. */
typedef struct {
  lik_call call;
  lik_quant_kind kind;
  int64_t d; /* embedding dimension (bits: the number of valid bits) */
  lik_seqs q, d_seqs;
  lik_mask q_mask, d_mask;
  lik_scale scale_q, scale_d;
  float *scores;
  int64_t score_si, score_sj;
} lik_quant_problem;

/* scale (non-NULL): F32, 0-d (per tensor) or of shape ndim / shape (per
 * token: the tensor minus its last dimension); *out views it. */
lik_status lik_check_scale(const lik_tensor *scale, const char *name, int ndim,
                           const int64_t *shape, lik_scale *out);

/* Reads a scale's value of token (n, l). */
static inline float lik_scale_at(const lik_scale *s, int64_t n, int64_t l) {
  return s->data[n * s->sn + l * s->sl];
}

/* Number of bytes of a binary token of dimension d: ceil(d / 8). */
static inline int64_t lik_bits_bytes(int64_t d) { return d / 8 + (d % 8 != 0); }

/* One quantize call: tokens of X [lead..., d] (nlead = X's ndim - 1 leading
 * dims, any strides) into out (int8 values, or bit bytes) and, for int8,
 * scale (F32, one per token). */
typedef struct {
  lik_call call; /* threads, normalize */
  const void *x;
  lik_dtype dtype;
  int64_t d, sxk;
  int nlead;
  int64_t lead[LIK_MAX_DIMS - 1];
  int64_t sx[LIK_MAX_DIMS - 1], so[LIK_MAX_DIMS - 1], ss[LIK_MAX_DIMS - 1];
  void *out;
  int64_t sok;
  float *scale; /* NULL: binary */
} lik_quantize_problem;

/* Backends. */
lik_status lik_cpu_maxsim_quant(const lik_quant_problem *p);
lik_status lik_cuda_maxsim_quant(const lik_quant_problem *p);
lik_status lik_cpu_quantize(const lik_quantize_problem *p);
lik_status lik_cuda_quantize(const lik_quantize_problem *p);

#endif /* LIK_QUANT_H */
