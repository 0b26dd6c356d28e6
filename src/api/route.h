/*
 * route.h — the backend of a validated forward (src/api's own header): CUDA
 * tensors to the CUDA backend (LIK_ERR_UNSUPPORTED in a build without it),
 * the rest to the CPU.
 */
#ifndef LIK_API_ROUTE_H
#define LIK_API_ROUTE_H

#include "../core/validate.h"

static inline lik_status lik_route_maxsim(const lik_problem *p) {
  if (p->device == LIK_CUDA) {
#ifdef LIK_WITH_CUDA
    return lik_cuda_maxsim(p);
#else
    return lik_no_cuda_backend();
#endif
  }
  return lik_cpu_maxsim(p);
}

#endif /* LIK_API_ROUTE_H */
