/* error.c — status names and the thread-local last-error message. */
#include <stdarg.h>
#include <stdio.h>

#include "problem.h"

static _Thread_local char last_error[512];

const char *lik_status_string(lik_status status) {
  switch (status) {
    case LIK_OK: return "LIK_OK";
    case LIK_ERR_NULL: return "LIK_ERR_NULL";
    case LIK_ERR_SHAPE: return "LIK_ERR_SHAPE";
    case LIK_ERR_DTYPE: return "LIK_ERR_DTYPE";
    case LIK_ERR_VALUE: return "LIK_ERR_VALUE";
    case LIK_ERR_DEVICE: return "LIK_ERR_DEVICE";
    case LIK_ERR_ALLOC: return "LIK_ERR_ALLOC";
    case LIK_ERR_UNSUPPORTED: return "LIK_ERR_UNSUPPORTED";
    case LIK_ERR_CUDA: return "LIK_ERR_CUDA";
  }
  return "LIK_ERR_UNKNOWN";
}

const char *lik_last_error(void) { return last_error; }

void lik_clear_error(void) { last_error[0] = '\0'; }

lik_status lik_fail(lik_status status, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, args);
  va_end(args);
  return status;
}

int lik_version_number(void) { return LIK_VERSION_NUMBER; }

const char *lik_version_string(void) { return LIK_VERSION_STRING; }
