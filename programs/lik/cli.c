/* cli.c — see cli.h. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef LIK_DEFAULT_DATA_DIR
#define LIK_DEFAULT_DATA_DIR ""
#endif

const char *prog = "lik";

/* strtoll of the whole string in [lo, hi]; want: the accepted range in words. */
static int parse_range(const char *opt, const char *s, long long lo, long long hi, const char *want,
                       long long *out) {
  char *e;
  errno = 0;
  long long v = strtoll(s, &e, 10);
  if (errno || e == s || *e || v < lo || v > hi) {
    fprintf(stderr, "%s: %s expects %s, got '%s'\n", prog, opt, want, s);
    return 1;
  }
  *out = v;
  return 0;
}

int parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
  char want[80];
  snprintf(want, sizeof want, "an integer in [%lld, %lld]", lo, hi);
  return parse_range(opt, s, lo, hi, want, out);
}

int parse_int_min(const char *opt, const char *s, long long lo, long long *out) {
  char want[48];
  snprintf(want, sizeof want, "an integer >= %lld", lo);
  return parse_range(opt, s, lo, LLONG_MAX, want, out);
}

int parse_float(const char *opt, const char *s, float *out) {
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  if (errno || e == s || *e || !isfinite(v)) {
    fprintf(stderr, "%s: %s expects a finite number, got '%s'\n", prog, opt, s);
    return 1;
  }
  *out = (float)v;
  return 0;
}

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress(double frac, int done) {
  int w = 40, f = (int)(frac * w + 0.5);
  fprintf(stderr, "\r[");
  for (int i = 0; i < w; i++) fputc(i < f ? '#' : ' ', stderr);
  fprintf(stderr, "] %3d%%", (int)(frac * 100 + 0.5));
  if (done) fprintf(stderr, "\r%*s\r", w + 8, "");
  fflush(stderr);
}

static int file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int find_default_data(char *dir, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char probe[PATH_MAX + 64];
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      int w = snprintf(dir, cap, "%s/../share/lik/cranfield", exe);
      if (w > 0 && (size_t)w < cap) {
        snprintf(probe, sizeof probe, "%s/docs.safetensors", dir);
        if (file_exists(probe)) return 0;
      }
    }
  }
  if (LIK_DEFAULT_DATA_DIR[0]) {
    snprintf(dir, cap, "%s", LIK_DEFAULT_DATA_DIR);
    snprintf(probe, sizeof probe, "%s/docs.safetensors", dir);
    if (file_exists(probe)) return 0;
  }
  return 1;
}

const char *default_data_dir(void) { return LIK_DEFAULT_DATA_DIR; }
