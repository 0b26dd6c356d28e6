/*
 * route.h — the backend of a validated forward (src/api's own header),
 * through the backend tables (src/core/backend.h): CUDA tensors to the CUDA
 * backend (LIK_ERR_UNSUPPORTED in a build without it), the rest to the CPU.
 */
#ifndef LIK_API_ROUTE_H
#define LIK_API_ROUTE_H

#include "../core/backend.h"
#include "../core/validate.h"

static inline lik_status lik_route_maxsim(const lik_problem *p) {
  const lik_backend *b = lik_backend_of(p->call.device);
  return b->maxsim ? b->maxsim(p) : lik_no_entry("lik_maxsim");
}

#endif /* LIK_API_ROUTE_H */
