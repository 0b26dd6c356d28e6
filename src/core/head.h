/*
 * head.h — the validated description of one fused D-side head call
 * (lik_maxsim_from_hidden and its backward), passed from src/api/head.c to a
 * backend.  p describes the MaxSim of Q against the hidden states: p.q is Q
 * (dim d_out), p.d is H_d (dim d_model), p.call.normalize normalises the projected
 * document tokens only.  Backends may assume every field is valid.
 */
#ifndef LIK_HEAD_H
#define LIK_HEAD_H

#include "problem.h"

/* The head's W and b (the forward's inputs, the backward's gradient
 * outputs): W[o, k] at w[o*w_so + k*w_sk], p.q.dtype, o < p.q.dim, k <
 * p.d.dim; NULL or b[o] at b[o*b_s].  In the backward either may be NULL
 * (not requested). */
typedef struct {
  void *w;
  int64_t w_so, w_sk;
  void *b;
  int64_t b_s;
} lik_head_wb;

typedef struct {
  lik_problem p;
  lik_head_wb wb; /* inputs: read only */
} lik_head;

/* One backward call: the forward's description (h.p.out.argmax required),
 * grad_scores, and the gradient outputs (data NULL: skip). */
typedef struct {
  lik_head h;
  const void *gs;
  lik_dtype gs_dtype;
  int64_t gs_si, gs_sj;
  lik_seqs gq, gh;      /* geometry of p.q / p.d, their own strides */
  lik_head_wb g;        /* grad_W [d_out, d_model], grad_b [d_out] */
} lik_head_bw;

lik_status lik_cpu_maxsim_from_hidden(const lik_head *h);
lik_status lik_cpu_maxsim_from_hidden_backward(const lik_head_bw *bw);
lik_status lik_cuda_maxsim_from_hidden(const lik_head *h);
lik_status lik_cuda_maxsim_from_hidden_backward(const lik_head_bw *bw);

#endif /* LIK_HEAD_H */
