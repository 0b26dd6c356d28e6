/*
 * backend.h — every op's entry point of one backend in one table: the
 * CPU's (src/cpu) and CUDA's (src/cuda; every entry NULL in a build without
 * it).  src/api routes a validated call with lik_backend_of(device) and
 * lik_no_entry() where the table has none; the tables are filled once, in
 * backend.c.
 */
#ifndef LIK_CORE_BACKEND_H
#define LIK_CORE_BACKEND_H

#include "head.h"
#include "problem.h"
#include "quant.h"
#include "residual.h"

typedef struct lik_backend {
  lik_status (*maxsim)(const lik_problem *p);
  lik_status (*retrieve)(const lik_problem *p, int64_t k, float *out_scores, int64_t out_si,
                         int64_t out_sr, int64_t *out_indices, int64_t idx_si, int64_t idx_sr);
  lik_status (*maxsim_backward)(const lik_bw *bw, lik_backward strategy);
  lik_status (*maxsim_quant)(const lik_quant_problem *p);
  lik_status (*quantize)(const lik_quantize_problem *p);
  lik_status (*codec_compress)(const lik_codec_problem *p);
  lik_status (*codec_decompress)(const lik_codec_problem *p);
  lik_status (*maxsim_residual)(const lik_residual_problem *p);
  lik_status (*plaid_approx)(const lik_approx_problem *p);
  lik_status (*maxsim_from_hidden)(const lik_head *h);
  lik_status (*maxsim_from_hidden_backward)(const lik_head_bw *bw);
} lik_backend;

/* The backend of tensors on device (LIK_CUDA: CUDA's table, else the CPU's). */
const lik_backend *lik_backend_of(lik_device_type device);

/* The error of a call whose backend has no entry for it: a build without
 * CUDA (lik_no_cuda_backend's message), or an op that runs on the CPU only
 * ("call runs on the CPU: pass CPU tensors"). */
lik_status lik_no_entry(const char *call);

#endif /* LIK_CORE_BACKEND_H */
