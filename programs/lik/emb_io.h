/*
 * emb_io.h — reading embedding sets for the `lik` command.
 *
 * An embedding set is N token sequences of dimension d, stored either
 *   ragged: embeddings [T, d] + cu_seqlens [N+1] (FlashAttention convention), or
 *   padded: embeddings [N, L, d] + optional lengths [N] or mask [N, L],
 * read from safetensors (header parsed with cJSON) or .npy files (header
 * parsed here), all memory-mapped.  Every function reports failures by
 * writing a message into `err` (ERR_LEN bytes) and returning non-zero.
 */
#ifndef LIK_CLI_EMB_IO_H
#define LIK_CLI_EMB_IO_H

#include <stddef.h>
#include <stdint.h>

#include "lik.h"

#define ERR_LEN 512

/* A read-only memory-mapped file. */
typedef struct mapped_file {
  const unsigned char *base;
  size_t size;
} mapped_file;

/* A typed n-d array inside a mapped file (or owned memory). */
typedef struct raw_array {
  const void *data;
  lik_dtype dtype;
  int ndim;
  int64_t shape[8];
  int64_t numel;
} raw_array;

/* Companion files given on the command line (NULL when absent). */
typedef struct emb_sources {
  const char *path;       /* .safetensors or .npy embeddings                 */
  const char *lengths;    /* .npy [N] valid lengths (padded input)           */
  const char *cu_seqlens; /* .npy [N+1] offsets (ragged 2-D input)           */
  const char *ids;        /* .npy [N] ids                                    */
} emb_sources;

typedef struct emb_set {
  const char *name;  /* "queries" / "documents", for messages */
  const char *path;
  lik_dtype dtype;   /* F16, BF16, F32 or F64 */
  int64_t n, d;
  int ragged;        /* 1: data [T, d] + cu; 0: data [n, L, d] */
  const void *data;
  int64_t total;     /* ragged: T */
  int64_t L;         /* padded: L; ragged: max length */
  int64_t *cu;       /* ragged: [n+1] offsets (owned) */
  const uint8_t *mask; /* padded: [n, L] U8/BOOL, NULL = all valid */
  uint8_t *mask_owned;
  int64_t *len;      /* [n] valid tokens per sequence (owned) */
  int64_t *ids;      /* [n] ids (owned) */
  int ids_given;     /* 1: ids from the file / --*-ids; 0: ids = 0..n-1 */
  int64_t tokens;    /* sum of len */
  int64_t min_len, max_len;
  mapped_file files[4];
  int nfiles;
} emb_set;

size_t dtype_size(lik_dtype t);

/* Opens an input file for reading: a regular file only (a FIFO, a device or
 * a folder is refused at once, never waited on: opened O_NONBLOCK, checked
 * with fstat, then made blocking).  Returns the descriptor, or -1 with a
 * message naming the file and `what` in err. */
int open_regular(const char *path, const char *what, char *err);

/* calloc of n1 x n2 elements of elem bytes (at least one byte), the size
 * computed by src/core/checked.h: NULL when a count is negative, the size
 * does not fit a size_t, or memory is short.  Every buffer of the command
 * sized by a product of counts comes from here. */
void *calloc_n(int64_t n1, int64_t n2, size_t elem);

/* A 1-D integer .npy file (int64, int32 or uint8; format 1.0 to 3.0, any key
 * order: the reader of emb_load) as malloc'ed int64 [want_len] in *out
 * (want_len < 0: any length), its entry count in *len (NULL: not wanted).
 * Returns 0, or 1 with a message naming the file and `what` in err. */
int npy_read_ints(const char *path, const char *what, int64_t want_len, int64_t **out,
                  int64_t *len, char *err);
const char *dtype_name(lik_dtype t);

/* Reads an embedding set.  Returns 0 on success. */
int emb_load(emb_set *s, const char *name, const emb_sources *src, char *err);
void emb_free(emb_set *s);

/* A padded block [nb, Lb, d] of sequences [i0, i1) in dtype `want`, with a
 * U8 mask [nb, Lb] (NULL when every token is valid).  Views into the mapped
 * data when possible, otherwise a copy into `*buf` / `*mbuf` (grown with
 * realloc; the caller frees them).  Returns 0 on success. */
int emb_block(const emb_set *s, int64_t i0, int64_t i1, lik_dtype want,
              lik_tensor *x, lik_tensor *mask, void **buf, size_t *buf_cap,
              uint8_t **mbuf, size_t *mbuf_cap, char *err);

/* As emb_block, for the sequences idx[0..nb) (always a copy). */
int emb_gather(const emb_set *s, const int64_t *idx, int64_t nb, lik_dtype want, lik_tensor *x,
               lik_tensor *mask, void **buf, size_t *buf_cap, uint8_t **mbuf, size_t *mbuf_cap,
               char *err);

#endif
