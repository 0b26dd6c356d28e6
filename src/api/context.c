/* context.c — lik_context_create / lik_context_free (lik_experimental.h). */
#include "../core/context.h"
#include "../core/validate.h"

lik_status lik_context_create(const lik_context_options *options, lik_context **out) {
  lik_clear_error();
  if (!out) return lik_fail(LIK_ERR_NULL, "out: is NULL");
  *out = NULL;
  if (options && options->num_threads < 0)
    return lik_fail(LIK_ERR_VALUE, "options->num_threads: %d, must be >= 0 (0: default)",
                    options->num_threads);
  if (options && options->cpu_isa && lik_isa_level(options->cpu_isa) < 0)
    return lik_fail(LIK_ERR_VALUE,
                    "options->cpu_isa: \"%.32s\" is not \"portable\", \"avx2\", \"avx512\", "
                    "\"neon\" or \"sve\"",
                    options->cpu_isa);
  if (options && (options->cuda_off & ~(unsigned)LIK_CUDA_NO_ALL))
    return lik_fail(LIK_ERR_VALUE, "options->cuda_off: 0x%x has bits outside LIK_CUDA_NO_ALL",
                    options->cuda_off);
  if (!(*out = lik_context_new(options)))
    return lik_fail(LIK_ERR_ALLOC, "lik_context_create: out of memory");
  return LIK_OK;
}

void lik_context_free(lik_context *ctx) { lik_context_delete(ctx); }
