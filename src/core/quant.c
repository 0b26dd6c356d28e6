/* quant.c — the checks shared by the low-bit MaxSim calls. */
#include "quant.h"
#include "validate.h"

lik_status lik_check_scale(const lik_tensor *scale, const char *name, int ndim,
                           const int64_t *shape, lik_scale *out) {
  lik_status st = lik_check_tensor(scale, name, 0, LIK_MAX_DIMS);
  if (st) return st;
  if (scale->dtype != LIK_F32)
    return lik_fail(LIK_ERR_DTYPE, "%s: dtype %s, expected float32", name,
                    lik_dtype_name(scale->dtype));
  *out = (lik_scale){(const float *)scale->data, 0, 0};
  if (scale->ndim == 0) return LIK_OK;
  int same = scale->ndim == ndim;
  for (int i = 0; same && i < ndim; i++) same = scale->shape[i] == shape[i];
  if (!same) {
    char got[96];
    char want[96];
    lik_tensor w = {0};
    w.ndim = ndim;
    for (int i = 0; i < ndim; i++) w.shape[i] = shape[i];
    return lik_fail(LIK_ERR_SHAPE,
                    "%s: shape %s is neither () (per tensor) nor %s (per token)", name,
                    lik_shape_str(scale, got), lik_shape_str(&w, want));
  }
  out->sl = scale->strides[ndim - 1];
  out->sn = ndim >= 2 ? scale->strides[ndim - 2] : 0;
  return LIK_OK;
}
