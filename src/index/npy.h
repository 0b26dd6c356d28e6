/*
 * npy.h — the .npy format (numpy's NEP 1) as a PLAID index folder holds it:
 * reading a header from untrusted bytes, writing one.
 *
 * Reading accepts versions 1.0, 2.0 and 3.0, a header dict with the keys
 * 'descr', 'fortran_order' and 'shape' in any order (single or double quotes,
 * any spacing, a trailing comma; numpy's, torch tch's and fast-plaid's
 * writers), little-endian or byte-order-free descr codes of the dtypes an
 * index uses (float16/32/64, int32/64, uint8), C order (Fortran order only
 * where it means the same: at most one dimension > 1), at most 4 dims.
 * Every size is checked against the file: the data must lie inside it, and
 * start at a multiple of its element size (it is read in place).
 */
#ifndef LIK_INDEX_NPY_H
#define LIK_INDEX_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "lik.h"

#define LIK_NPY_MAX_DIMS 4

typedef struct {
  lik_dtype dtype; /* F16, F32, F64, I32, I64 or U8 */
  int ndim;
  int64_t shape[LIK_NPY_MAX_DIMS];
  int64_t numel;
  size_t data_offset; /* bytes from the file's start to element 0 */
  size_t data_bytes;  /* numel * element size */
} lik_npy;

/* Bytes of one element of an npy dtype. */
size_t lik_npy_itemsize(lik_dtype t);

/* Parses the header of a .npy file of file_size bytes whose first n bytes
 * are buf (n >= min(file_size, 65536 + 12) suffices).  On failure returns
 * non-zero and writes a message (naming `what`, the offending field and the
 * sizes) into err[errlen]. */
int lik_npy_parse(const uint8_t *buf, size_t n, size_t file_size, const char *what,
                  lik_npy *out, char *err, size_t errlen);

/* Writes a version 1.0 prologue (magic, version, length, dict, padding,
 * newline) for a C-order array into out[cap]: its total length is
 * `total_len` when > 0 (fast-plaid's merged files use 192), else the least
 * multiple of 64 that fits (numpy's alignment).  Returns the prologue's
 * length, 0 if it does not fit. */
size_t lik_npy_header(lik_dtype dtype, int ndim, const int64_t *shape, size_t total_len,
                      char *out, size_t cap);

#endif /* LIK_INDEX_NPY_H */
