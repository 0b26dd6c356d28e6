/*
 * fuzz_util.h — what the file-reader fuzz targets share: an input split into
 * parts at a separator, bytes presented as a file (a memfd, so the readers'
 * own open / fstat / mmap path runs), and a folder input written out as files
 * (whole files and folder trees: tests/c/lik_test_files.h, shared with the C
 * tests).
 */
#ifndef LIK_FUZZ_UTIL_H
#define LIK_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../c/lik_test_files.h"

/* Separates the files of one input (a libFuzzer dictionary entry). */
#define FUZZ_SEP "|LIKSEP|"
#define FUZZ_SEP_LEN 8

/* Splits data at FUZZ_SEP into at most max parts; returns their number. */
static inline size_t fuzz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len,
                                size_t max) {
  size_t n = 0, start = 0;
  for (size_t i = 0; n + 1 < max && i + FUZZ_SEP_LEN <= size; i++)
    if (memcmp(data + i, FUZZ_SEP, FUZZ_SEP_LEN) == 0) {
      part[n] = data + start;
      len[n++] = i - start;
      start = i + FUZZ_SEP_LEN;
      i = start - 1;
    }
  part[n] = data + start;
  len[n++] = size - start;
  return n;
}

/* The bytes as a file: *path gets "/proc/self/fd/N"; returns the fd to close
 * afterwards, or -1. */
static inline int fuzz_file(const uint8_t *data, size_t size, char path[32]) {
  int fd = memfd_create("lik-fuzz", 0);
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < size) {
    ssize_t w = write(fd, data + off, size - off);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    off += (size_t)w;
  }
  snprintf(path, 32, "/proc/self/fd/%d", fd);
  return fd;
}

/* The folder of a folder target's inputs: made on the first call
 * (/tmp/<name>_XXXXXX), removed with all it holds at exit, and emptied on
 * every call. */
static inline char *fuzz_dir_name(void) {
  static char dir[64];
  return dir;
}
static inline void fuzz_dir_remove(void) {
  rm_tree(fuzz_dir_name());
}
static inline const char *fuzz_dir(const char *name) {
  char *dir = fuzz_dir_name();
  if (!dir[0]) {
    snprintf(dir, 64, "/tmp/%s_XXXXXX", name);
    if (!mkdtemp(dir)) abort();
    atexit(fuzz_dir_remove);
  }
  empty_tree(dir);
  return dir;
}

/* Writes parts 0 .. min(nparts, nfiles) - 1 of a folder input as the files
 * names[i] of dir; an empty part leaves its file out, and a name
 * "sub/file" makes the folder sub first. */
static inline void fuzz_write_folder(const char *dir, const char *const *names, size_t nfiles,
                                     const uint8_t *const *part, const size_t *len,
                                     size_t nparts) {
  for (size_t f = 0; f < nparts && f < nfiles; f++) {
    if (!len[f]) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, names[f]);
    if (strchr(names[f], '/')) {
      char *slash = strrchr(path, '/');
      *slash = 0;
      mkdir(path, 0777);
      *slash = '/';
    }
    write_all(path, part[f], len[f]);
  }
}

#ifdef LIK_FUZZ_MUTATOR
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* A mutator of a folder input (byte 0 = flags, then files at FUZZ_SEP):
 * libFuzzer's own mutation of one file (or of the flags), the separators
 * kept, so that a change stays a change of one file.  Returns the new size
 * (at most max_size). */
static inline size_t fuzz_mutate_folder(uint8_t *data, size_t size, size_t max_size,
                                        unsigned seed, size_t max_parts) {
  if (size < 1 || max_size < 2) return LLVMFuzzerMutate(data, size, max_size);
  const uint8_t *part[64];
  size_t len[64];
  if (max_parts > 64) max_parts = 64;
  const size_t n = fuzz_split(data + 1, size - 1, part, len, max_parts);
  const size_t pick = seed % (n + 1); /* n: the flags byte */
  if (pick == n) {
    data[0] = (uint8_t)(data[0] ^ (1u << (seed / 7 % 8)));
    return size;
  }
  const size_t off = (size_t)(part[pick] - data), tail = size - off - len[pick];
  if (max_size - size + len[pick] < 1) return size;
  const size_t room = max_size - size + len[pick]; /* the most this part may grow to */
  uint8_t *buf = (uint8_t *)malloc(room + 1), *rest = (uint8_t *)malloc(tail + 1);
  if (!buf || !rest) {
    free(buf);
    free(rest);
    return size;
  }
  memcpy(buf, part[pick], len[pick]);
  memcpy(rest, data + off + len[pick], tail);
  const size_t m = LLVMFuzzerMutate(buf, len[pick], room);
  memcpy(data + off, buf, m);
  memcpy(data + off + m, rest, tail);
  free(buf);
  free(rest);
  return off + m + tail;
}
#endif

#endif /* LIK_FUZZ_UTIL_H */
