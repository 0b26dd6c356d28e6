/*
 * fuzz_util.h — what the file-reader fuzz targets share: an input split into
 * parts at a separator, and bytes presented as a file (a memfd, so the
 * readers' own open / fstat / mmap path runs).
 */
#ifndef LIK_FUZZ_UTIL_H
#define LIK_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

#endif /* LIK_FUZZ_UTIL_H */
