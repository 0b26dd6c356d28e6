/*
 * maxsim.c — the CPU backend's MaxSim entry: route F64 to the scalar double
 * path, everything else (F32/F16/BF16, fp32 compute) to the tiled driver.
 */
#include "cpu_internal.h"

static lik_status run(const lik_problem *p, const lik_cpu_out *o) {
  return p->q.dtype == LIK_F64 ? lik_cpu_run_f64(p, o) : lik_cpu_run_f32(p, o);
}

lik_status lik_cpu_maxsim(const lik_problem *p) {
  lik_cpu_out o;
  o.cbeg = 0;
  o.cend = p->ncand;
  o.out = p->out;
  return run(p, &o);
}

lik_status lik_cpu_run(const lik_problem *p, const lik_cpu_out *o) { return run(p, o); }
