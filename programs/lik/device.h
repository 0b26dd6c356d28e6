/*
 * device.h — where the `lik` command scores (`--device cpu|cuda|auto`): the
 * choice, and the host <-> CUDA copies around the library's calls.  The one
 * file of the command that calls the CUDA runtime (device.c; a build
 * without the CUDA backend compiles its stub half, where only the CPU
 * exists).  Every other file stays plain C: it describes its tensors with
 * device_view, moves data with device_put / device_out / device_get, and
 * passes the session's stream in lik_options.stream.  On the CPU every
 * transfer is the identity: the host pointer is the one scored.
 *
 * Messages: functions that fail write one into err (ERR_LEN bytes, naming
 * the device, the call and the sizes) and return 1; nothing prints.
 */
#ifndef LIK_CLI_DEVICE_H
#define LIK_CLI_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "lik.h"

/* --device's values.  DEVICE_AUTO: the first CUDA device when the build has
 * the CUDA backend and a device is present, else the CPU. */
typedef enum { DEVICE_AUTO = 0, DEVICE_CPU, DEVICE_CUDA } device_kind;

/* The value s of option opt (--device): "cpu", "cuda", "cuda:N" (N >= 0,
 * decimal) or "auto" into *kind and *id (the CUDA ordinal, 0 for "cuda").
 * Returns 0, or 1 after printing "PROG: OPT expects cpu, cuda, cuda:N or
 * auto, got 'S'" (a usage error: exit 2). */
int parse_device(const char *opt, const char *s, device_kind *kind, int *id);

/* --device's default: $LIK_DEVICE when set and not empty (parse_device's
 * values; its message names LIK_DEVICE), else auto. */
int device_default(device_kind *kind, int *id);

/* A device buffer, grown on demand (zero-initialise; dev_buf_free). */
typedef struct dev_buf {
  void *p;
  size_t cap;
} dev_buf;

void dev_buf_free(dev_buf *b);

/* Where a job scores: the CPU, or one CUDA device with one stream that every
 * copy and every library call of the job runs on, in order. */
typedef struct device {
  int cuda;          /* 0: the CPU; 1: CUDA device `id` */
  int id;            /* CUDA ordinal (-1 on the CPU) */
  void *stream;      /* cudaStream_t (NULL on the CPU): lik_options.stream */
  char name[24];     /* "cpu" or "cuda:N": the reports' "device" */
  char model[256];   /* the CUDA device's name ("" on the CPU) */
  dev_buf out_s, out_i; /* results of device_out by retrieve_topk (candidates.h) */
} device;

/* Opens kind / id into g (zeroed first): the CPU; or CUDA device id (made
 * current, a stream created); or, for DEVICE_AUTO, device 0 when one is
 * there, else the CPU.  Returns 0, or 1 with err set ("--device cuda: ..."
 * naming why: a build without the CUDA backend, no device, an ordinal past
 * the device count, a CUDA error).  device_close(g) after either. */
int device_open(device *g, device_kind kind, int id, char *err);

/* Frees g's buffers and stream (g zeroed by device_open: a no-op before it). */
void device_close(device *g);

/* This build's CUDA in words, for --version: "not built", "no device (...)"
 * or "N device(s)". */
void device_describe(char *buf, size_t cap);

/* A tensor view of data (ndim <= 3, strides in elements) on the CPU (g NULL
 * or g->cuda 0) or on g's CUDA device (data then a device pointer). */
lik_tensor device_view(const device *g, void *data, lik_dtype dt, int ndim, const int64_t *shape,
                       const int64_t *strides);

/* A CPU tensor view: device_view(NULL, ...). */
lik_tensor cpu_view(void *data, lik_dtype dt, int ndim, const int64_t *shape,
                    const int64_t *strides);

/* Input: *at = the bytes host[0..bytes) where g scores them: host itself on
 * the CPU; on CUDA a copy in b (grown as needed; asynchronous on g's
 * stream, host may be reused on return). */
int device_put(device *g, const void *host, size_t bytes, dev_buf *b, void **at, char *err);

/* device_put of the elements a host tensor view reaches (its span: strides
 * >= 0), *out the same view (shape, strides) on g's device; a view with
 * data NULL (emb_block's mask when every token is valid) is copied as is. */
int device_put_tensor(device *g, const lik_tensor *host, dev_buf *b, lik_tensor *out, char *err);

/* Output: *at = where a call on g writes `bytes` bytes bound for host: host
 * itself on the CPU, a buffer b on CUDA (grown as needed). */
int device_out(device *g, void *host, size_t bytes, dev_buf *b, void **at, char *err);

/* The bytes an output `at` of device_out holds, into host, waiting for the
 * stream (the library's calls on it included): a no-op on the CPU. */
int device_get(device *g, void *host, const void *at, size_t bytes, char *err);

#endif
