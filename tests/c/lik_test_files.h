/*
 * lik_test_files.h — whole files and folder trees, for the tests that write
 * index folders (header-only, test-private): the C tests have it through
 * lik_test_util.h, the fuzz targets through tests/fuzz/fuzz_util.h.
 *
 * The calls are the plain POSIX ones, so a program that defines open / write
 * / unlink / rmdir itself (test_plaid_commit.c) sees these helpers' calls too.
 */
#ifndef LIK_TEST_FILES_H
#define LIK_TEST_FILES_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole file in a new buffer (the caller frees it), its *n bytes followed
 * by a NUL (text files are parsed with strtoll); NULL and *n = 0 when the file
 * does not open. */
static inline uint8_t *read_all(const char *path, size_t *n) {
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  const long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)sz + 1);
  *n = fread(b, 1, (size_t)sz, f);
  b[*n] = 0;
  fclose(f);
  return b;
}

/* Writes n bytes as the whole file (created or truncated); nothing when it
 * does not open. */
static inline void write_all(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(p, 1, n, f);
  fclose(f);
}

/* Removes what a folder holds: its files, and its sub-folders with theirs
 * (links are removed, never followed; a path over 1023 bytes is left, never
 * cut short).  The folder itself stays.  Returns 0, or -1 when the folder does
 * not open (then nothing is removed). */
static inline int empty_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *e;
  char p[1024];
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
      struct stat st;
      if (!lstat(p, &st) && S_ISDIR(st.st_mode)) {
        if (!empty_tree(p)) rmdir(p);
      } else {
        unlink(p);
      }
    }
  closedir(d);
  return 0;
}

/* Removes a folder, its files and the files of its sub-folders. */
static inline void rm_tree(const char *dir) {
  if (!empty_tree(dir)) rmdir(dir);
}

#endif /* LIK_TEST_FILES_H */
