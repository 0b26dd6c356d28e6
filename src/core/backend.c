/*
 * backend.c — the backend tables (backend.h): the CPU's, and CUDA's where
 * the build has it (the one LIK_WITH_CUDA switch of src/api's calls; the
 * index's device copy, src/index/device.c, has its own).
 */
#include "backend.h"

#include "validate.h"

static const lik_backend cpu = {
    .maxsim = lik_cpu_maxsim,
    .retrieve = lik_cpu_retrieve,
    .maxsim_backward = lik_cpu_maxsim_backward,
    .maxsim_quant = lik_cpu_maxsim_quant,
    .codec_decompress = lik_cpu_codec_decompress,
    .maxsim_residual = lik_cpu_maxsim_residual,
    .plaid_approx = lik_cpu_plaid_approx,
    .maxsim_from_hidden = lik_cpu_maxsim_from_hidden,
    .maxsim_from_hidden_backward = lik_cpu_maxsim_from_hidden_backward,
};

static const lik_backend cuda = {
#ifdef LIK_WITH_CUDA
    .maxsim = lik_cuda_maxsim,
    .retrieve = lik_cuda_retrieve,
    .maxsim_backward = lik_cuda_maxsim_backward,
    .maxsim_quant = lik_cuda_maxsim_quant,
    .codec_decompress = lik_cuda_codec_decompress,
    .maxsim_residual = lik_cuda_maxsim_residual,
    .plaid_approx = lik_cuda_plaid_approx,
    .maxsim_from_hidden = lik_cuda_maxsim_from_hidden,
    .maxsim_from_hidden_backward = lik_cuda_maxsim_from_hidden_backward,
#else
    .maxsim = NULL, /* every entry NULL: lik_no_entry */
#endif
};

const lik_backend *lik_backend_of(lik_device_type device) {
  return device == LIK_CUDA ? &cuda : &cpu;
}

lik_status lik_no_entry(const char *call) {
  if (!cuda.maxsim) return lik_no_cuda_backend();
  return lik_fail(LIK_ERR_UNSUPPORTED, "%s runs on the CPU: pass CPU tensors", call);
}
