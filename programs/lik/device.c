/* device.c — see device.h.  The only file of the command that calls the CUDA
 * runtime (LIK_CLI_CUDA: the library has its CUDA backend; the command then
 * links the same static runtime, so one runtime owns every pointer and the
 * stream the library is handed). */
#define _POSIX_C_SOURCE 200809L
#include "device.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h" /* src/core: overflow-checked sizes */
#include "cli.h"
#include "emb_io.h" /* ERR_LEN */

#ifdef LIK_CLI_CUDA
#include <cuda_runtime.h>
#endif

int parse_device(const char *opt, const char *s, device_kind *kind, int *id) {
  char *e;
  long v = 0;
  *id = 0;
  if (!strcmp(s, "cpu")) *kind = DEVICE_CPU;
  else if (!strcmp(s, "auto")) *kind = DEVICE_AUTO;
  else if (!strcmp(s, "cuda")) *kind = DEVICE_CUDA;
  else if (!strncmp(s, "cuda:", 5) && s[5] >= '0' && s[5] <= '9' &&
           (errno = 0, v = strtol(s + 5, &e, 10), !errno && !*e && v <= INT_MAX)) {
    *kind = DEVICE_CUDA;
    *id = (int)v;
  } else {
    fprintf(stderr, "%s: %s expects cpu, cuda, cuda:N or auto, got '%s'\n", prog, opt, s);
    return 1;
  }
  return 0;
}

int device_default(device_kind *kind, int *id) {
  const char *s = getenv("LIK_DEVICE");
  return parse_device("LIK_DEVICE", s && *s ? s : "auto", kind, id);
}

lik_tensor device_view(const device *g, void *data, lik_dtype dt, int ndim, const int64_t *shape,
                       const int64_t *strides) {
  lik_tensor t = {0};
  t.data = data;
  t.dtype = dt;
  t.ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    t.shape[i] = shape[i];
    t.strides[i] = strides[i];
  }
  t.device = g && g->cuda ? LIK_CUDA : LIK_CPU;
  t.device_id = g && g->cuda ? g->id : 0;
  return t;
}

lik_tensor cpu_view(void *data, lik_dtype dt, int ndim, const int64_t *shape,
                    const int64_t *strides) {
  return device_view(NULL, data, dt, ndim, shape, strides);
}

/* Bytes from a view's first element to past its last (0 when it has none). */
static int span_bytes(const lik_tensor *t, size_t *out) {
  int64_t last = 0; /* element offset of the last element */
  for (int i = 0; i < t->ndim; i++) {
    int64_t step;
    if (t->shape[i] == 0) {
      *out = 0;
      return 0;
    }
    if (t->strides[i] < 0 || lik_mul_i64(t->shape[i] - 1, t->strides[i], &step) ||
        lik_add_i64(last, step, &last))
      return 1;
  }
  return lik_add_i64(last, 1, &last) || lik_bytes(last, dtype_size(t->dtype), out);
}

int device_put_tensor(device *g, const lik_tensor *host, dev_buf *b, lik_tensor *out, char *err) {
  size_t bytes;
  if (!host->data) { /* no tensor (a mask of all-valid tokens) */
    *out = *host;
    return 0;
  }
  if (span_bytes(host, &bytes)) {
    snprintf(err, ERR_LEN, "a tensor of %d dims (shape %lld x %lld x %lld) does not fit in memory",
             host->ndim, (long long)host->shape[0], (long long)(host->ndim > 1 ? host->shape[1] : 1),
             (long long)(host->ndim > 2 ? host->shape[2] : 1));
    return 1;
  }
  void *at;
  if (device_put(g, host->data, bytes, b, &at, err)) return 1;
  *out = device_view(g, at, host->dtype, host->ndim, host->shape, host->strides);
  return 0;
}

#ifdef LIK_CLI_CUDA

static int cuda_fail(char *err, const device *g, const char *what, size_t bytes, cudaError_t e) {
  if (bytes)
    snprintf(err, ERR_LEN, "%s of %zu bytes on %s failed: %s", what, bytes, g->name,
             cudaGetErrorString(e));
  else
    snprintf(err, ERR_LEN, "%s on %s failed: %s", what, g->name, cudaGetErrorString(e));
  return 1;
}

void dev_buf_free(dev_buf *b) {
  if (b->p) cudaFree(b->p);
  b->p = NULL;
  b->cap = 0;
}

/* b holds at least `bytes` bytes (at least 1: a tensor's data is never NULL). */
static int grow(device *g, dev_buf *b, size_t bytes, char *err) {
  if (bytes == 0) bytes = 1;
  if (bytes <= b->cap) return 0;
  if (b->p) { /* the stream's work may still read the old buffer */
    const cudaError_t e = cudaStreamSynchronize((cudaStream_t)g->stream);
    if (e != cudaSuccess) return cuda_fail(err, g, "cudaStreamSynchronize", 0, e);
  }
  dev_buf_free(b);
  const cudaError_t e = cudaMalloc(&b->p, bytes);
  if (e != cudaSuccess) {
    b->p = NULL;
    return cuda_fail(err, g, "cudaMalloc", bytes, e);
  }
  b->cap = bytes;
  return 0;
}

int device_open(device *g, device_kind kind, int id, char *err) {
  memset(g, 0, sizeof *g);
  g->id = -1;
  snprintf(g->name, sizeof g->name, "cpu");
  if (kind == DEVICE_CPU) return 0;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (kind == DEVICE_AUTO) return 0;
    snprintf(err, ERR_LEN, "--device cuda: no CUDA device (%s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices");
    return 1;
  }
  if (id >= n) {
    snprintf(err, ERR_LEN, "--device cuda:%d: no such device (this machine has %d CUDA device%s, "
             "cuda:0 to cuda:%d)", id, n, n == 1 ? "" : "s", n - 1);
    return 1;
  }
  g->cuda = 1;
  g->id = id;
  snprintf(g->name, sizeof g->name, "cuda:%d", id);
  struct cudaDeviceProp prop;
  if ((e = cudaSetDevice(id)) != cudaSuccess) return cuda_fail(err, g, "cudaSetDevice", 0, e);
  if ((e = cudaGetDeviceProperties(&prop, id)) != cudaSuccess)
    return cuda_fail(err, g, "cudaGetDeviceProperties", 0, e);
  snprintf(g->model, sizeof g->model, "%s", prop.name);
  cudaStream_t s;
  if ((e = cudaStreamCreate(&s)) != cudaSuccess)
    return cuda_fail(err, g, "cudaStreamCreate", 0, e);
  g->stream = s;
  return 0;
}

void device_close(device *g) {
  dev_buf_free(&g->out_s);
  dev_buf_free(&g->out_i);
  if (g->stream) cudaStreamDestroy((cudaStream_t)g->stream);
  g->stream = NULL;
}

void device_describe(char *buf, size_t cap) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    snprintf(buf, cap, "no device (%s)", cudaGetErrorString(e));
  else if (n == 0)
    snprintf(buf, cap, "no device");
  else
    snprintf(buf, cap, "%d device%s", n, n == 1 ? "" : "s");
}

int device_put(device *g, const void *host, size_t bytes, dev_buf *b, void **at, char *err) {
  if (!g->cuda) {
    *at = (void *)host;
    return 0;
  }
  if (grow(g, b, bytes, err)) return 1;
  if (bytes) {
    const cudaError_t e =
        cudaMemcpyAsync(b->p, host, bytes, cudaMemcpyHostToDevice, (cudaStream_t)g->stream);
    if (e != cudaSuccess) return cuda_fail(err, g, "copying to the device", bytes, e);
  }
  *at = b->p;
  return 0;
}

int device_out(device *g, void *host, size_t bytes, dev_buf *b, void **at, char *err) {
  if (!g->cuda) {
    *at = host;
    return 0;
  }
  if (grow(g, b, bytes, err)) return 1;
  *at = b->p;
  return 0;
}

int device_get(device *g, void *host, const void *at, size_t bytes, char *err) {
  if (!g->cuda) return 0;
  cudaError_t e = cudaSuccess;
  if (bytes)
    e = cudaMemcpyAsync(host, at, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)g->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)g->stream);
  if (e != cudaSuccess) return cuda_fail(err, g, "copying the results to the host", bytes, e);
  return 0;
}

#else /* a build without the CUDA backend: the CPU is the only device */

void dev_buf_free(dev_buf *b) { (void)b; }

int device_open(device *g, device_kind kind, int id, char *err) {
  (void)id;
  memset(g, 0, sizeof *g);
  g->id = -1;
  snprintf(g->name, sizeof g->name, "cpu");
  if (kind != DEVICE_CUDA) return 0;
  snprintf(err, ERR_LEN, "--device cuda: this lik was built without the CUDA backend "
           "(-DLIK_CUDA=OFF); use --device cpu or auto, or build with -DLIK_CUDA=ON");
  return 1;
}

void device_close(device *g) { (void)g; }

void device_describe(char *buf, size_t cap) { snprintf(buf, cap, "not built"); }

int device_put(device *g, const void *host, size_t bytes, dev_buf *b, void **at, char *err) {
  (void)g, (void)bytes, (void)b, (void)err;
  *at = (void *)host;
  return 0;
}

int device_out(device *g, void *host, size_t bytes, dev_buf *b, void **at, char *err) {
  (void)g, (void)bytes, (void)b, (void)err;
  *at = host;
  return 0;
}

int device_get(device *g, void *host, const void *at, size_t bytes, char *err) {
  (void)g, (void)host, (void)at, (void)bytes, (void)err;
  return 0;
}

#endif
