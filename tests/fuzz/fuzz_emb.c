/*
 * fuzz_emb.c — fuzz target of the `lik` command's embedding readers
 * (programs/lik/emb_io.c): built as fuzz_npy (FUZZ_NPY=1: every file is a
 * .npy, the magic "\x93NUMPY" is prepended to each part) and as
 * fuzz_safetensors (the main file as given: safetensors, or .npy by magic).
 *
 * Input: byte 0 = flags, then files separated by FUZZ_SEP:
 *   bit 0  a --lengths companion .npy follows      bit 3  load as "documents"
 *   bit 1  a --cu-seqlens companion .npy follows   bits 4-5  block dtype:
 *   bit 2  an --ids companion .npy follows         own, F32, F64, own
 * the main file first, then the flagged companions in that order.  A loaded
 * set is read back through emb_block (blocks of 7) and emb_gather (all,
 * reversed), touching every valid token of every view.
 */
#include "fuzz_util.h" /* first: it asks for _GNU_SOURCE */

#include <stdlib.h>

#include "emb_io.h"

#ifndef FUZZ_NPY
#define FUZZ_NPY 0
#endif

static volatile unsigned sink;

/* Reads every valid token of a padded view (ASan / SEGV on a bad view). */
static void touch(const lik_tensor *x, const lik_tensor *m) {
  const size_t es = dtype_size(x->dtype);
  unsigned acc = 0;
  for (int64_t i = 0; i < x->shape[0]; i++)
    for (int64_t l = 0; l < x->shape[1]; l++) {
      if (m->data && !((const uint8_t *)m->data)[i * m->strides[0] + l * m->strides[1]])
        continue;
      const unsigned char *row =
          (const unsigned char *)x->data + (i * x->strides[0] + l * x->strides[1]) * (int64_t)es;
      for (int64_t k = 0; k < x->shape[2]; k++) acc += row[k * x->strides[2] * (int64_t)es];
    }
  sink += acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const unsigned flags = data[0];
  const uint8_t *part[4];
  size_t len[4];
  const size_t nparts = fuzz_split(data + 1, size - 1, part, len, 4);
  uint8_t *files[4] = {0};
  char paths[4][32];
  int fds[4] = {-1, -1, -1, -1};
  for (size_t i = 0; i < nparts; i++) {
    const int npy = FUZZ_NPY || i > 0; /* companions are always .npy */
    const size_t n = len[i] + (npy ? 6 : 0);
    files[i] = malloc(n ? n : 1);
    if (npy) memcpy(files[i], "\x93NUMPY", 6);
    memcpy(files[i] + (npy ? 6 : 0), part[i], len[i]);
    fds[i] = fuzz_file(files[i], n, paths[i]);
  }
  emb_sources src = {0};
  size_t next = 1;
  src.path = fds[0] >= 0 ? paths[0] : "/nonexistent";
  if ((flags & 1) && next < nparts && fds[next] >= 0) src.lengths = paths[next++];
  if ((flags & 2) && next < nparts && fds[next] >= 0) src.cu_seqlens = paths[next++];
  if ((flags & 4) && next < nparts && fds[next] >= 0) src.ids = paths[next++];

  emb_set s;
  char err[ERR_LEN] = "";
  if (emb_load(&s, flags & 8 ? "documents" : "queries", &src, err) == 0) {
    const unsigned w = (flags >> 4) & 3;
    const lik_dtype want = w == 1 ? LIK_F32 : w == 2 ? LIK_F64 : s.dtype;
    void *buf = NULL;
    uint8_t *mbuf = NULL;
    size_t cap = 0, mcap = 0;
    lik_tensor x, m;
    for (int64_t i0 = 0; i0 < s.n; i0 += 7) {
      const int64_t i1 = i0 + 7 < s.n ? i0 + 7 : s.n;
      if (emb_block(&s, i0, i1, want, &x, &m, &buf, &cap, &mbuf, &mcap, err)) break;
      touch(&x, &m);
    }
    int64_t *idx = calloc((size_t)(s.n > 0 ? s.n : 1), sizeof *idx);
    for (int64_t i = 0; i < s.n; i++) idx[i] = s.n - 1 - i;
    if (idx && emb_gather(&s, idx, s.n, want, &x, &m, &buf, &cap, &mbuf, &mcap, err) == 0)
      touch(&x, &m);
    free(idx);
    free(buf);
    free(mbuf);
  } else if (!err[0]) {
    __builtin_trap(); /* a failure must say why */
  }
  emb_free(&s);
  for (size_t i = 0; i < nparts; i++) {
    if (fds[i] >= 0) close(fds[i]);
    free(files[i]);
  }
  return 0;
}
