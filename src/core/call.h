/*
 * call.h — the envelope of every validated call: where it runs (context,
 * device, stream) and the options every op reads (threads, normalize, tf32),
 * resolved once from lik_options by lik_call_from.  It is the first member,
 * `call`, of every problem struct (problem.h, residual.h, quant.h, plaid.h,
 * topk.h), so a backend reads p->call.* whatever the op.
 */
#ifndef LIK_CORE_CALL_H
#define LIK_CORE_CALL_H

#include "lik_experimental.h"

typedef struct {
  lik_context *context;   /* resolved: never NULL */
  lik_device_type device; /* of the call's tensors (lik_check_devices) */
  int32_t device_id;
  void *stream;           /* CUDA: the caller's stream */
  int threads;            /* resolved: >= 1 */
  int normalize;
  int tf32;               /* fp32 inputs on CUDA: one TF32 product (LIK_FP32_TF32) */
} lik_call;

/* context, stream, threads, normalize and tf32 of opts (NULL: defaults) into
 * c; device and device_id are the tensors' (set by lik_check_devices), left
 * as they are. */
void lik_call_from(lik_call *c, const lik_options *opts);

#endif /* LIK_CORE_CALL_H */
