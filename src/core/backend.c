/*
 * backend.c — the backend tables (backend.h): the CPU's, and CUDA's where
 * the build has it (the one LIK_WITH_CUDA switch of src/api's calls; the
 * index's device copy, src/index/device.c, has its own).
 */
#include "backend.h"

#include "validate.h"

/* Every op of the table, once: X(name) for the entries lik_<backend>_<name>. */
#define LIK_BACKEND_OPS(X)                                                                   \
  X(maxsim) X(retrieve) X(maxsim_backward) X(maxsim_quant) X(quantize) X(codec_compress)     \
  X(codec_decompress) X(maxsim_residual) X(plaid_approx) X(maxsim_from_hidden) X(maxsim_from_hidden_backward)

#define CPU_ENTRY(op) .op = lik_cpu_##op,
static const lik_backend cpu = {LIK_BACKEND_OPS(CPU_ENTRY)};

#ifdef LIK_WITH_CUDA
#define CUDA_ENTRY(op) .op = lik_cuda_##op,
static const lik_backend cuda = {LIK_BACKEND_OPS(CUDA_ENTRY)};
#else
static const lik_backend cuda = {.maxsim = NULL}; /* every entry NULL: lik_no_entry */
#endif

const lik_backend *lik_backend_of(lik_device_type device) {
  return device == LIK_CUDA ? &cuda : &cpu;
}

lik_status lik_no_entry(const char *call) {
  if (!cuda.maxsim) return lik_no_cuda_backend();
  return lik_fail(LIK_ERR_UNSUPPORTED, "%s runs on the CPU: pass CPU tensors", call);
}
