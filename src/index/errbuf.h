/*
 * errbuf.h — the index's file readers' and writers' error message: printf-style
 * into the caller's buffer err[errlen] (npy.c, commit.c), returning 1 so a
 * caller writes `return lik_errbuf(err, errlen, "...", ...);`.
 */
#ifndef LIK_INDEX_ERRBUF_H
#define LIK_INDEX_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int lik_errbuf(char *err, size_t errlen, const char *fmt, ...) {
  va_list a;
  va_start(a, fmt);
  vsnprintf(err, errlen, fmt, a);
  va_end(a);
  return 1;
}

#endif /* LIK_INDEX_ERRBUF_H */
