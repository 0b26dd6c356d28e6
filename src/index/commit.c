/*
 * commit.c — atomic changes of an index folder: a staging folder, one
 * rename as the commit point, a reader that reads through a committed change
 * not yet applied (commit.h states the protocol).
 */
#define _POSIX_C_SOURCE 200809L
#include "commit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"

#define PATH_CAP 4096
#define REMOVE_MAX_BYTES ((size_t)1 << 20) /* a .remove of more is not lik's */
#define WBUF_BYTES ((size_t)1 << 20)

static int path2(char *out, const char *a, const char *b) {
  const int n = snprintf(out, PATH_CAP, "%s/%s", a, b);
  return n > 0 && n < PATH_CAP;
}

static int path3(char *out, const char *a, const char *b, const char *c) {
  const int n = snprintf(out, PATH_CAP, "%s/%s/%s", a, b, c);
  return n > 0 && n < PATH_CAP;
}

/* Opens a regular file read-only without blocking on a FIFO; -1 with errno. */
static int open_regular(const char *p) {
  const int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

static int fsync_dir(const char *p) {
  const int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int r = fsync(fd);
  const int e = errno;
  close(fd);
  errno = e;
  return r;
}

/* A bounded .remove list (NUL-terminated; NULL when absent).  0 on success. */
static int read_remove(const char *commit_dir, char **out, char *err, size_t errlen) {
  char p[PATH_CAP];
  *out = NULL;
  if (!path2(p, commit_dir, LIK_COMMIT_REMOVE)) return lik_errbuf(err, errlen, "%s: path too long", p);
  const int fd = open_regular(p);
  if (fd < 0) {
    if (errno == ENOENT) return 0; /* the change's cleanup had begun: all applied */
    return lik_errbuf(err, errlen, LIK_COMMIT_DIR "/" LIK_COMMIT_REMOVE ": cannot read (%s)",
                 errno == EINVAL ? "not a regular file" : strerror(errno));
  }
  struct stat st;
  char *buf = NULL;
  int bad = fstat(fd, &st);
  if (!bad && (size_t)st.st_size > REMOVE_MAX_BYTES)
    bad = lik_errbuf(err, errlen, LIK_COMMIT_DIR "/" LIK_COMMIT_REMOVE ": %lld bytes, more than %zu",
                (long long)st.st_size, REMOVE_MAX_BYTES);
  size_t n = 0;
  if (!bad && !(buf = (char *)malloc((size_t)st.st_size + 1)))
    bad = lik_errbuf(err, errlen, LIK_COMMIT_DIR "/" LIK_COMMIT_REMOVE ": cannot allocate %lld bytes",
                (long long)st.st_size);
  while (!bad && n < (size_t)st.st_size) {
    const ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* shorter than its size: read what is there */
    n += (size_t)r;
  }
  close(fd);
  if (bad) {
    free(buf);
    return 1;
  }
  buf[n] = 0;
  *out = buf;
  return 0;
}

/* Whether '\n'-separated list holds name. */
static int listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *s = list; s && *s;) {
    const char *e = strchr(s, '\n');
    const size_t k = e ? (size_t)(e - s) : strlen(s);
    if (k == n && !memcmp(s, name, n)) return 1;
    s = e ? e + 1 : s + k;
  }
  return 0;
}

/* ---- reading ---------------------------------------------------------------------- */

int lik_folder_open(lik_folder *f, const char *dir, char *err, size_t errlen) {
  char p[PATH_CAP];
  struct stat st;
  memset(f, 0, sizeof *f);
  f->dir = dir;
  if (!path2(p, dir, LIK_COMMIT_DIR)) return lik_errbuf(err, errlen, "path too long");
  if (stat(p, &st) || !S_ISDIR(st.st_mode)) return 0;
  f->committed = 1;
  return read_remove(p, &f->remove, err, errlen);
}

void lik_folder_close(lik_folder *f) {
  free(f->remove);
  f->remove = NULL;
}

int lik_folder_open_file(const lik_folder *f, const char *name, char *err, size_t errlen) {
  char p[PATH_CAP];
  if (f->committed) {
    if (listed(f->remove, name)) return -1;
    if (!path3(p, f->dir, LIK_COMMIT_DIR, name)) return lik_errbuf(err, errlen, "%s: path too long", name), -2;
    const int fd = open_regular(p);
    if (fd >= 0) return fd;
    if (errno != ENOENT) /* else applied already: the folder's file is the new one */
      return lik_errbuf(err, errlen, LIK_COMMIT_DIR "/%s: cannot open (%s)", name,
                   errno == EINVAL ? "not a regular file" : strerror(errno)), -2;
  }
  if (!path2(p, f->dir, name)) return lik_errbuf(err, errlen, "%s: path too long", name), -2;
  const int fd = open_regular(p);
  if (fd >= 0) return fd;
  if (errno == ENOENT) return -1;
  return lik_errbuf(err, errlen, "%s: cannot open (%s)", name,
               errno == EINVAL ? "not a regular file" : strerror(errno)), -2;
}

int lik_folder_file_id(const lik_folder *f, const char *name, lik_file_id *id, char *err,
                       size_t errlen) {
  struct stat st;
  memset(id, 0, sizeof *id);
  const int fd = lik_folder_open_file(f, name, err, errlen);
  if (fd < 0) return 1;
  if (fstat(fd, &st)) {
    const int e = errno;
    close(fd);
    return lik_errbuf(err, errlen, "%s: cannot stat (%s)", name, strerror(e));
  }
  close(fd);
  id->dev = (uint64_t)st.st_dev;
  id->ino = (uint64_t)st.st_ino;
  id->size = (uint64_t)st.st_size;
  id->mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  id->ctime = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
  return 0;
}

void lik_folder_stamp_get(const char *dir, lik_folder_stamp *s) {
  char p[PATH_CAP];
  struct stat st;
  memset(s, 0, sizeof *s);
  if (path2(p, dir, LIK_COMMIT_DIR) && !stat(p, &st)) s->v[0] = (uint64_t)st.st_ino + 1;
  if (path3(p, dir, LIK_COMMIT_DIR, "metadata.json") && !stat(p, &st)) s->v[1] = (uint64_t)st.st_ino + 1;
  if (path2(p, dir, "metadata.json") && !stat(p, &st)) {
    s->v[2] = (uint64_t)st.st_ino + 1;
    s->v[3] = (uint64_t)st.st_dev;
    s->v[4] = (uint64_t)st.st_size;
    s->v[5] = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  }
}

/* ---- writing ---------------------------------------------------------------------- */

struct lik_commit {
  char dir[PATH_CAP], stage[PATH_CAP], name[256];
  int fd, bad; /* the open file; bad: its first errno */
  uint8_t *buf;
  size_t nbuf;
  char *remove; /* names, each followed by '\n' */
  size_t nremove;
};

/* The names in folder p but "." / ".."; *out malloc'ed, '\n'-separated. */
static int list_dir(const char *p, char **out, size_t *count) {
  *out = NULL;
  *count = 0;
  DIR *d = opendir(p);
  if (!d) return -1;
  size_t n = 0, cap = 256;
  char *s = (char *)malloc(cap);
  struct dirent *e;
  while (s && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    const size_t k = strlen(e->d_name);
    if (n + k + 2 > cap) {
      while (n + k + 2 > cap) cap *= 2;
      char *t = (char *)realloc(s, cap);
      if (!t) {
        free(s);
        s = NULL;
        break;
      }
      s = t;
    }
    memcpy(s + n, e->d_name, k);
    s[n + k] = '\n';
    n += k + 1;
    (*count)++;
  }
  closedir(d);
  if (!s) {
    errno = ENOMEM;
    return -1;
  }
  s[n] = 0;
  *out = s;
  return 0;
}

/* Next name of a '\n' list into name (NUL-terminated); advances *s. */
static int next_name(const char **s, char *name, size_t cap) {
  while (**s == '\n') (*s)++;
  if (!**s) return 0;
  const char *e = strchr(*s, '\n');
  size_t k = e ? (size_t)(e - *s) : strlen(*s);
  if (k >= cap) k = cap - 1;
  memcpy(name, *s, k);
  name[k] = 0;
  *s += e ? (size_t)(e - *s) + 1 : strlen(*s);
  return 1;
}

/* Removes folder p and the files in it (a staging folder: flat). */
static int remove_flat(const char *p, char *err, size_t errlen) {
  char *names, q[PATH_CAP], name[256];
  size_t cnt;
  if (list_dir(p, &names, &cnt)) {
    if (errno == ENOENT) return 0;
    return lik_errbuf(err, errlen, "%s: cannot list (%s)", p, strerror(errno));
  }
  int bad = 0;
  for (const char *s = names; !bad && next_name(&s, name, sizeof name);)
    if (!path2(q, p, name) || (unlink(q) && errno != ENOENT))
      bad = lik_errbuf(err, errlen, "%s: cannot remove (%s)", q, strerror(errno));
  free(names);
  if (!bad && rmdir(p) && errno != ENOENT)
    bad = lik_errbuf(err, errlen, "%s: cannot remove (%s)", p, strerror(errno));
  return bad;
}

/* Step 3: moves a committed change's files into dir, deletes its .remove names. */
static int apply(const char *dir, char *err, size_t errlen) {
  char cdir[PATH_CAP], from[PATH_CAP], to[PATH_CAP], name[256];
  if (!path2(cdir, dir, LIK_COMMIT_DIR)) return lik_errbuf(err, errlen, "path too long");
  char *rm, *names;
  size_t cnt;
  if (read_remove(cdir, &rm, err, errlen)) return 1;
  if (list_dir(cdir, &names, &cnt)) {
    free(rm);
    return lik_errbuf(err, errlen, LIK_COMMIT_DIR ": cannot list (%s)", strerror(errno));
  }
  int bad = 0;
  for (const char *s = names; !bad && next_name(&s, name, sizeof name);) {
    if (!strcmp(name, LIK_COMMIT_REMOVE)) continue;
    if (!path2(from, cdir, name) || !path2(to, dir, name) || rename(from, to))
      bad = lik_errbuf(err, errlen, "%s: cannot move the committed file in place (%s)", name,
                  strerror(errno));
  }
  for (const char *s = rm; !bad && s && next_name(&s, name, sizeof name);)
    if (!path2(to, dir, name) || (unlink(to) && errno != ENOENT))
      bad = lik_errbuf(err, errlen, "%s: cannot remove (%s)", name, strerror(errno));
  free(names);
  free(rm);
  if (!bad && fsync_dir(dir))
    bad = lik_errbuf(err, errlen, "cannot sync the folder (%s)", strerror(errno));
  if (!bad && (!path2(from, cdir, LIK_COMMIT_REMOVE) || (unlink(from) && errno != ENOENT)))
    bad = lik_errbuf(err, errlen, LIK_COMMIT_DIR "/" LIK_COMMIT_REMOVE ": cannot remove (%s)",
                strerror(errno));
  return bad || remove_flat(cdir, err, errlen);
}

static int make_dir(const char *dir, char *err, size_t errlen) {
  if (!mkdir(dir, 0777)) { /* a new folder: its entry in the parent made durable */
    char parent[PATH_CAP];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == 0) { /* "a/b/" */
      *slash = 0;
      slash = strrchr(parent, '/');
    }
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) parent[1] = 0;
    else *slash = 0;
    if (fsync_dir(parent)) return lik_errbuf(err, errlen, "cannot sync the parent folder (%s)", strerror(errno));
  } else if (errno != EEXIST) {
    return lik_errbuf(err, errlen, "cannot create the folder (%s)", strerror(errno));
  }
  struct stat st;
  if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return lik_errbuf(err, errlen, "not a folder");
  return 0;
}

int lik_commit_begin(const char *dir, lik_commit **out, char *err, size_t errlen) {
  *out = NULL;
  lik_commit *c = (lik_commit *)calloc(1, sizeof *c);
  if (!c) return lik_errbuf(err, errlen, "out of memory");
  c->fd = -1;
  char cdir[PATH_CAP];
  struct stat st;
  if (snprintf(c->dir, PATH_CAP, "%s", dir) >= PATH_CAP || !path2(c->stage, dir, LIK_COMMIT_STAGING) ||
      !path2(cdir, dir, LIK_COMMIT_DIR)) {
    free(c);
    return lik_errbuf(err, errlen, "path too long");
  }
  int bad = make_dir(dir, err, errlen);
  if (!bad && !lstat(cdir, &st)) { /* an interrupted change: roll it forward */
    if (!S_ISDIR(st.st_mode)) bad = lik_errbuf(err, errlen, LIK_COMMIT_DIR ": not a folder");
    else if (apply(dir, err, errlen)) {
      const size_t k = strlen(err);
      snprintf(err + k, errlen - k, " (finishing an interrupted change)");
      bad = 1;
    }
  }
  if (!bad) bad = remove_flat(c->stage, err, errlen); /* a change that never committed */
  if (!bad && mkdir(c->stage, 0777))
    bad = lik_errbuf(err, errlen, LIK_COMMIT_STAGING ": cannot create (%s)", strerror(errno));
  if (!bad && !(c->buf = (uint8_t *)malloc(WBUF_BYTES)))
    bad = lik_errbuf(err, errlen, "cannot allocate a write buffer of %zu bytes", WBUF_BYTES);
  if (bad) {
    free(c->buf);
    free(c);
    return 1;
  }
  *out = c;
  return 0;
}

int lik_commit_file(lik_commit *c, const char *name, char *err, size_t errlen) {
  char p[PATH_CAP];
  c->bad = 0;
  c->nbuf = 0;
  if (snprintf(c->name, sizeof c->name, "%s", name) >= (int)sizeof c->name || !path2(p, c->stage, name))
    return lik_errbuf(err, errlen, "%s: path too long", name);
  c->fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (c->fd < 0) return lik_errbuf(err, errlen, "%s: cannot create (%s)", name, strerror(errno));
  return 0;
}

static void flush(lik_commit *c) {
  for (size_t off = 0; !c->bad && off < c->nbuf;) {
    const ssize_t w = write(c->fd, c->buf + off, c->nbuf - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) c->bad = w < 0 ? errno : EIO;
    else off += (size_t)w;
  }
  c->nbuf = 0;
}

void lik_commit_write(lik_commit *c, const void *p, size_t n) {
  const uint8_t *s = (const uint8_t *)p;
  while (n && !c->bad) {
    if (c->nbuf == WBUF_BYTES) flush(c);
    const size_t k = n < WBUF_BYTES - c->nbuf ? n : WBUF_BYTES - c->nbuf;
    memcpy(c->buf + c->nbuf, s, k);
    c->nbuf += k;
    s += k;
    n -= k;
  }
}

int lik_commit_file_done(lik_commit *c, char *err, size_t errlen) {
  flush(c);
  if (!c->bad && fsync(c->fd)) c->bad = errno;
  if (close(c->fd) && !c->bad) c->bad = errno;
  c->fd = -1;
  if (c->bad) return lik_errbuf(err, errlen, "%s: write failed (%s)", c->name, strerror(c->bad));
  return 0;
}

int lik_commit_remove(lik_commit *c, const char *name, char *err, size_t errlen) {
  const size_t k = strlen(name);
  char *r = (char *)realloc(c->remove, c->nremove + k + 2);
  if (!r) return lik_errbuf(err, errlen, "out of memory");
  memcpy(r + c->nremove, name, k);
  r[c->nremove + k] = '\n';
  c->nremove += k + 1;
  r[c->nremove] = 0;
  c->remove = r;
  return 0;
}

static void commit_free(lik_commit *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->buf);
  free(c->remove);
  free(c);
}

void lik_commit_abort(lik_commit *c) {
  if (!c) return;
  char e[8];
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  remove_flat(c->stage, e, sizeof e);
  commit_free(c);
}

/* A staged file may not replace a folder (rename would fail after the commit). */
static int check_targets(const lik_commit *c, char *err, size_t errlen) {
  char *names, p[PATH_CAP], name[256];
  size_t cnt;
  if (list_dir(c->stage, &names, &cnt))
    return lik_errbuf(err, errlen, LIK_COMMIT_STAGING ": cannot list (%s)", strerror(errno));
  int bad = 0;
  struct stat st;
  for (const char *s = names; !bad && next_name(&s, name, sizeof name);)
    if (strcmp(name, LIK_COMMIT_REMOVE) && path2(p, c->dir, name) && !lstat(p, &st) &&
        S_ISDIR(st.st_mode))
      bad = lik_errbuf(err, errlen, "%s: is a folder, the new file cannot replace it", name);
  free(names);
  return bad;
}

int lik_commit_finish(lik_commit *c, char *err, size_t errlen) {
  char cdir[PATH_CAP];
  int bad = lik_commit_file(c, LIK_COMMIT_REMOVE, err, errlen);
  if (!bad) {
    lik_commit_write(c, c->remove ? c->remove : "", c->nremove);
    bad = lik_commit_file_done(c, err, errlen);
  }
  if (!bad) bad = check_targets(c, err, errlen);
  if (!bad && fsync_dir(c->stage))
    bad = lik_errbuf(err, errlen, LIK_COMMIT_STAGING ": cannot sync (%s)", strerror(errno));
  if (!bad && (!path2(cdir, c->dir, LIK_COMMIT_DIR) || rename(c->stage, cdir)))
    bad = lik_errbuf(err, errlen, "cannot commit (rename " LIK_COMMIT_STAGING " to " LIK_COMMIT_DIR
                ": %s)", strerror(errno));
  if (bad) {
    lik_commit_abort(c);
    return 1;
  }
  if (fsync_dir(c->dir)) { /* not known durable: undo, the old state stays */
    lik_errbuf(err, errlen, "cannot sync the folder after the commit (%s)", strerror(errno));
    if (!rename(cdir, c->stage)) lik_commit_abort(c);
    else commit_free(c);
    return 1;
  }
  char e[8]; /* the change is durable: a failure to apply is finished by the next change */
  apply(c->dir, e, sizeof e);
  commit_free(c);
  return 0;
}
