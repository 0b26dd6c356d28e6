/*
 * test_plaid_commit.c — a change of a PLAID index folder (lik_plaid_index_save
 * after build, add, an expanding add, a delete (alone: only its files are
 * written), a delete with metadata, a delete + add, a delete + compact, an
 * update) is atomic (docs/plaid_index.md, "Atomic
 * commits"): whatever write it fails at or is killed at, the folder loads and
 * is the old state or the new one, bitwise (its files, read through a
 * committed change as a loader does, and search results); a failed call
 * leaves the old state, a successful one the new; the next change finishes
 * or discards an interrupted one.
 *
 * Write points are enumerated deterministically: this program defines open /
 * write / fsync / rename / unlink / mkdir / rmdir itself (the static library's
 * calls bind to them; each forwards to the C library), and a forked child
 * running the change fails (errno) or dies (SIGKILL) at the n-th of them, for
 * every n.  Also: RLIMIT_FSIZE at each file size, a folder in the way of each
 * file, a corrupt code (refused before anything is written), a FIFO in place
 * of each file (refused, never blocks), non-finite centroids and bucket
 * weights out of fp16 range (refused at load, naming the file).  And a save
 * to the index's own folder writes only the files its changes touched (by
 * inode), the same bytes as a whole save, and every file when someone else
 * changed the folder.  Under the sanitizers (their own interceptors) the
 * write-point sweep is left out.
 */
#undef _FORTIFY_SOURCE /* this file defines open(): no inline wrapper of it */
#include "lik_test_util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lik_experimental.h"

/* ---- write points ------------------------------------------------------------------- */

enum { MODE_FAIL = 1, MODE_KILL = 2 };
static long g_fault_at;       /* 0: off; else the write point that fails / kills */
static int g_mode;
static volatile long *g_count; /* shared with the parent: points passed */

static int fault(int err) {
  if (!g_fault_at) return 0;
  if (++*g_count != g_fault_at) return 0;
  if (g_mode == MODE_KILL) raise(SIGKILL);
  errno = err;
  return 1;
}

#ifndef SANITIZED
#define REAL(ret, name, ...)                                           \
  static ret (*real)(__VA_ARGS__);                                    \
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, name)

static int open_impl(const char *name, const char *p, int flags, mode_t m) {
  REAL(int, name, const char *, int, ...);
  if ((flags & (O_WRONLY | O_RDWR | O_CREAT)) && fault(EACCES)) return -1;
  return real(p, flags, m);
}
int open(const char *p, int flags, ...) {
  va_list a;
  va_start(a, flags);
  const mode_t m = (flags & O_CREAT) ? (mode_t)va_arg(a, int) : 0;
  va_end(a);
  return open_impl("open", p, flags, m);
}
int open64(const char *p, int flags, ...) {
  va_list a;
  va_start(a, flags);
  const mode_t m = (flags & O_CREAT) ? (mode_t)va_arg(a, int) : 0;
  va_end(a);
  return open_impl("open64", p, flags, m);
}
ssize_t write(int fd, const void *b, size_t n) {
  REAL(ssize_t, "write", int, const void *, size_t);
  return fault(ENOSPC) ? -1 : real(fd, b, n);
}
int fsync(int fd) {
  REAL(int, "fsync", int);
  return fault(EIO) ? -1 : real(fd);
}
int rename(const char *a, const char *b) {
  REAL(int, "rename", const char *, const char *);
  return fault(EIO) ? -1 : real(a, b);
}
int unlink(const char *p) {
  REAL(int, "unlink", const char *);
  return fault(EIO) ? -1 : real(p);
}
int mkdir(const char *p, mode_t m) {
  REAL(int, "mkdir", const char *, mode_t);
  return fault(ENOSPC) ? -1 : real(p, m);
}
int rmdir(const char *p) {
  REAL(int, "rmdir", const char *);
  return fault(EIO) ? -1 : real(p);
}
#endif

/* ---- folders and states ------------------------------------------------------------- */

static char g_tmp[256];

#define MAXF 64
typedef struct {
  int n;
  char name[MAXF][256];
  uint8_t *data[MAXF];
  size_t len[MAXF];
} state;

static void state_free(state *s) {
  for (int i = 0; i < s->n; i++) free(s->data[i]);
  memset(s, 0, sizeof *s);
}

static int state_find(const state *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->name[i], name)) return i;
  return -1;
}

static void state_put(state *s, const char *name, uint8_t *data, size_t len) {
  int i = state_find(s, name);
  if (i < 0 && s->n < MAXF) snprintf(s->name[i = s->n++], sizeof s->name[0], "%s", name);
  if (i < 0) return;
  free(s->data[i]);
  s->data[i] = data;
  s->len[i] = len;
}

static void state_drop(state *s, const char *name) {
  const int i = state_find(s, name);
  if (i < 0) return;
  free(s->data[i]);
  s->n--;
  memmove(&s->name[i], &s->name[i + 1], (size_t)(s->n - i) * sizeof s->name[0]);
  memmove(&s->data[i], &s->data[i + 1], (size_t)(s->n - i) * sizeof s->data[0]);
  memmove(&s->len[i], &s->len[i + 1], (size_t)(s->n - i) * sizeof s->len[0]);
}

/* The regular files of dir (no dot names); *other counts dot names and folders. */
static void read_files(const char *dir, state *s, int *other) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[1024];
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (e->d_name[0] == '.' || lstat(p, &st) || !S_ISREG(st.st_mode)) {
      if (other) (*other)++;
      continue;
    }
    size_t n;
    uint8_t *b = read_all(p, &n);
    state_put(s, e->d_name, b, n);
  }
  if (d) closedir(d);
}

/* The folder's state as the format defines it: its files, overlaid by a
 * committed change (.lik-commit/: its files win, .remove's names are gone);
 * a .lik-new/ is not part of it. */
static void read_state(const char *dir, state *s) {
  memset(s, 0, sizeof *s);
  read_files(dir, s, NULL);
  char c[1024], p[1200];
  snprintf(c, sizeof c, "%s/.lik-commit", dir);
  state staged = {0};
  read_files(c, &staged, NULL);
  for (int i = 0; i < staged.n; i++) {
    if (!strcmp(staged.name[i], ".remove")) continue;
    state_put(s, staged.name[i], staged.data[i], staged.len[i]);
    staged.data[i] = NULL;
  }
  state_free(&staged);
  snprintf(p, sizeof p, "%s/.remove", c);
  size_t n;
  char *rm = (char *)read_all(p, &n);
  for (char *t = rm ? strtok(rm, "\n") : NULL; t; t = strtok(NULL, "\n")) state_drop(s, t);
  free(rm);
}

static int state_eq(const state *a, const state *b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; i++) {
    const int j = state_find(b, a->name[i]);
    if (j < 0 || a->len[i] != b->len[j] || memcmp(a->data[i], b->data[j], a->len[i])) return 0;
  }
  return 1;
}

static void write_state(const char *dir, const state *s) {
  rm_tree(dir);
  mkdir(dir, 0777);
  char p[1024];
  for (int i = 0; i < s->n; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, s->name[i]);
    write_all(p, s->data[i], s->len[i]);
  }
}

/* ---- the changes -------------------------------------------------------------------- */

enum { D = 16, NQ = 3, LQ = 5, TOPK = 8 };

typedef struct {
  float *x;
  int64_t *cu, n, T;
} docs;

static docs make_docs(int64_t n, int maxlen, int flip) {
  docs c;
  c.n = n;
  c.cu = malloc((size_t)(n + 1) * sizeof(int64_t));
  c.cu[0] = 0;
  for (int64_t j = 0; j < n; j++) c.cu[j + 1] = c.cu[j] + rng_int(1, maxlen);
  c.T = c.cu[n];
  c.x = malloc((size_t)(c.T * D) * sizeof(float));
  for (int64_t i = 0; i < c.T * D; i++) {
    float v = (float)rng_range(-1, 1);
    if (i % D < D / 2) v = flip ? -fabsf(v) : fabsf(v); /* flip: far from the built centroids */
    c.x[i] = v;
  }
  return c;
}

static void docs_tensors(const docs *c, lik_tensor *X, lik_tensor *cu) {
  *X = (lik_tensor){c->x, LIK_F32, 2, {c->T, D}, {D, 1}, LIK_CPU, 0};
  *cu = (lik_tensor){c->cu, LIK_I64, 1, {c->n + 1}, {1}, LIK_CPU, 0};
}

static docs g_base, g_more;
static lik_plaid_index *g_built; /* g_base built (scenario "save") */
static int64_t g_ids[1024];

enum {
  SCN_SAVE, SCN_ADD, SCN_EXPAND, SCN_DELETE, SCN_COMPACT, SCN_UPDATE, SCN_DELETE_ONLY,
  SCN_DELETE_ADD, NSCN
};
static const char *SCN_NAME[] = {"save a built index", "load + add + save (ids)",
                                 "load + expanding add + save (the index's ids)",
                                 "load + delete 2 + metadata + save (deleted.npy, metadata.sqlite)",
                                 "load + delete the 2 highest ids + compact + save (doc_ids.npy: the "
                                 "id map; next_id.npy)",
                                 "load + update 1 + save (a new position under an old id)",
                                 "load + delete 2 + save (deleted.npy and metadata.json only)",
                                 "load + delete 2 + add + save (every file)"};

static lik_plaid_build_options opts(int expand) {
  lik_plaid_build_options o = LIK_PLAID_BUILD_OPTIONS_INIT;
  o.num_centroids = 8;
  o.num_threads = 1;
  o.chunk_docs = 16;
  o.expand_centroids = expand;
  return o;
}

/* The changes of a living index (frees ix): each deletes / updates live
 * documents of the state it finds (k deleted so far, from the front; a
 * compact's from the back), so that it can be applied again. */
static lik_status change_living(int scn, const char *dir, lik_plaid_index *ix) {
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  const int64_t k = info.num_deleted + (scn == SCN_COMPACT ? g_base.n - info.num_docs : 0);
  lik_status st;
  if (scn == SCN_UPDATE) {
    lik_tensor X = {g_more.x, LIK_F32, 2, {g_more.cu[1], D}, {D, 1}, LIK_CPU, 0};
    int64_t cu[2] = {0, g_more.cu[1]}, id = g_ids[0];
    lik_tensor CU = {cu, LIK_I64, 1, {2}, {1}, LIK_CPU, 0}, ID = {&id, LIK_I64, 1, {1}, {1}, LIK_CPU, 0};
    lik_plaid_build_options o = opts(0);
    st = lik_plaid_index_update(ix, &ID, &X, &CU, &o);
  } else {
    /* compact: the highest live ids, so that next_id.npy keeps them given */
    const int64_t at = scn == SCN_COMPACT ? g_base.n - 2 - k : k;
    int64_t two[2] = {g_ids[at], g_ids[at + 1]};
    lik_tensor ids = {two, LIK_I64, 1, {2}, {1}, LIK_CPU, 0};
    char meta[64];
    snprintf(meta, sizeof meta, "metadata after %lld deletions", (long long)k + 2);
    st = lik_plaid_index_delete(ix, &ids);
    if (!st && scn == SCN_DELETE) st = lik_plaid_index_set_metadata_db(ix, meta, (int64_t)strlen(meta));
    if (!st && scn == SCN_COMPACT) st = lik_plaid_index_compact(ix);
    if (!st && scn == SCN_DELETE_ADD) {
      lik_tensor X, cu;
      docs_tensors(&g_more, &X, &cu);
      lik_plaid_build_options o = opts(0);
      st = lik_plaid_index_add(ix, &X, &cu, &o);
    }
  }
  if (!st) st = lik_plaid_index_save(ix, dir, NULL);
  lik_plaid_index_free(ix);
  return st;
}

/* One change of folder dir. */
static lik_status change(int scn, const char *dir) {
  if (scn == SCN_SAVE) {
    lik_tensor ids = {g_ids, LIK_I64, 1, {g_base.n}, {1}, LIK_CPU, 0};
    return lik_plaid_index_save(g_built, dir, &ids);
  }
  lik_plaid_index *ix = NULL;
  lik_status st = lik_plaid_index_load(dir, 0, &ix);
  if (st) return st;
  if (scn >= SCN_DELETE) return change_living(scn, dir, ix);
  lik_tensor X, cu;
  docs_tensors(&g_more, &X, &cu);
  lik_plaid_build_options o = opts(scn == SCN_EXPAND);
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  lik_tensor ids = {g_ids, LIK_I64, 1, {info.num_docs + g_more.n}, {1}, LIK_CPU, 0};
  if (!(st = lik_plaid_index_add(ix, &X, &cu, &o)))
    st = lik_plaid_index_save(ix, dir, scn == SCN_EXPAND ? NULL : &ids);
  lik_plaid_index_free(ix);
  return st;
}

/* Search results of the folder's index (status; scores / ids [NQ * TOPK]). */
static float g_q[NQ * LQ * D];
static lik_status results(const char *dir, float *s, int64_t *i) {
  lik_plaid_index *ix = NULL;
  lik_status st = lik_plaid_index_load(dir, LIK_PLAID_LOAD_VERIFY, &ix);
  if (st) return st;
  lik_tensor Q = {g_q, LIK_F32, 3, {NQ, LQ, D}, {LQ * D, D, 1}, LIK_CPU, 0};
  lik_tensor S = {s, LIK_F32, 2, {NQ, TOPK}, {TOPK, 1}, LIK_CPU, 0};
  lik_tensor I = {i, LIK_I64, 2, {NQ, TOPK}, {TOPK, 1}, LIK_CPU, 0};
  lik_plaid_search_params p = {0};
  p.top_k = TOPK;
  p.n_ivf_probe = 1000;
  p.num_threads = 1;
  st = lik_plaid_index_search(ix, &Q, NULL, NULL, NULL, &p, &S, &I);
  lik_plaid_index_free(ix);
  return st;
}

typedef struct {
  state files;
  int has_index;
  float s[NQ * TOPK];
  int64_t i[NQ * TOPK];
} snapshot;

static void take(const char *dir, snapshot *z) {
  read_state(dir, &z->files);
  z->has_index = results(dir, z->s, z->i) == LIK_OK;
}

static int same_results(const snapshot *z, const float *s, const int64_t *i) {
  return !memcmp(z->s, s, sizeof z->s) && !memcmp(z->i, i, sizeof z->i);
}

typedef struct {
  snapshot old, neu, neu2; /* before, after one change, after two */
  char work[300];
} scenario;

static void set_up(int scn, scenario *z) {
  snprintf(z->work, sizeof z->work, "%s/work", g_tmp);
  rm_tree(z->work);
  if (scn != SCN_SAVE) {
    lik_tensor ids = {g_ids, LIK_I64, 1, {g_base.n}, {1}, LIK_CPU, 0};
    CHECK(lik_plaid_index_save(g_built, z->work, &ids) == LIK_OK, "save: %s", lik_last_error());
  }
  take(z->work, &z->old);
  CHECK(change(scn, z->work) == LIK_OK, "%s: %s", SCN_NAME[scn], lik_last_error());
  take(z->work, &z->neu);
  CHECK(scn != SCN_COMPACT || state_find(&z->neu.files, "next_id.npy") >= 0,
        "%s: no next_id.npy written", SCN_NAME[scn]);
  CHECK(change(scn, z->work) == LIK_OK, "%s again: %s", SCN_NAME[scn], lik_last_error());
  take(z->work, &z->neu2);
  CHECK(z->neu.has_index && !state_eq(&z->old.files, &z->neu.files), "the change changes nothing");
}

static void restore_old(const scenario *z, int scn) {
  if (scn == SCN_SAVE) rm_tree(z->work);
  else write_state(z->work, &z->old.files);
}

/* After a change failed (child_ok 0), succeeded (1) or was killed (-1): the
 * folder is the old or the new state, loads as it, and the next change
 * finishes the job with no staging left behind. */
static void check_after(const scenario *z, int scn, int child_ok, const char *what) {
  state s;
  read_state(z->work, &s);
  const int is_old = state_eq(&s, &z->old.files), is_new = state_eq(&s, &z->neu.files);
  CHECK(is_old || is_new, "%s: the folder is neither the old nor the new state", what);
  CHECK(child_ok != 1 || is_new, "%s: the change succeeded but the folder is not the new state", what);
  CHECK(child_ok != 0 || is_old, "%s: the change failed but the folder is not the old state", what);
  state_free(&s);
  float sc[NQ * TOPK];
  int64_t id[NQ * TOPK];
  const lik_status st = results(z->work, sc, id);
  if (is_new || (is_old && z->old.has_index))
    CHECK(st == LIK_OK && same_results(is_new ? &z->neu : &z->old, sc, id),
          "%s: the folder does not load / search as the %s state: %s", what, is_new ? "new" : "old",
          lik_last_error());
  CHECK(change(scn, z->work) == LIK_OK, "%s: the next change fails: %s", what, lik_last_error());
  int other = 0;
  read_files(z->work, &s, &other);
  CHECK(other == 0, "%s: the next change left %d staging entries", what, other);
  CHECK(state_eq(&s, is_new ? &z->neu2.files : &z->neu.files), "%s: the next change's result differs",
        what);
  state_free(&s);
}

/* Runs the change in a child at fault point `at` (0: none) under an
 * optional file-size limit; returns 1 it succeeded, 0 it failed, -1 killed. */
static int run_child(const scenario *z, int scn, long at, int mode, long fsize) {
  *g_count = 0;
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    if (fsize >= 0) {
      signal(SIGXFSZ, SIG_IGN);
      struct rlimit r = {(rlim_t)fsize, (rlim_t)fsize};
      setrlimit(RLIMIT_FSIZE, &r);
    }
    g_fault_at = at;
    g_mode = mode;
    _exit(change(scn, z->work) == LIK_OK ? 0 : 1);
  }
  int ws = 0;
  waitpid(pid, &ws, 0);
  if (WIFSIGNALED(ws)) return -1;
  return WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
}

static long g_points;

static void group_points(void) {
  group_begin("every write point: fail, kill");
#ifdef SANITIZED
  printf("  (left out under the sanitizers)\n");
#else
  for (int scn = 0; scn < NSCN; scn++) {
    scenario z;
    memset(&z, 0, sizeof z);
    set_up(scn, &z);
    restore_old(&z, scn);
    CHECK(run_child(&z, scn, LONG_MAX, MODE_FAIL, -1) == 1, "%s: counting run failed", SCN_NAME[scn]);
    const long n = *g_count;
    CHECK(n > 10, "%s: only %ld write points seen", SCN_NAME[scn], n);
    printf("  %s: %ld write points\n", SCN_NAME[scn], n);
    for (int mode = MODE_FAIL; mode <= MODE_KILL; mode++)
      for (long at = 1; at <= n; at++) {
        char what[200];
        snprintf(what, sizeof what, "%s, %s at write point %ld of %ld", SCN_NAME[scn],
                 mode == MODE_FAIL ? "failing" : "killed", at, n);
        case_begin("%s", what);
        restore_old(&z, scn);
        const int r = run_child(&z, scn, at, mode, -1);
        CHECK(mode == MODE_FAIL ? r >= 0 : r == -1, "%s: child ended as %d", what, r);
        check_after(&z, scn, r, what);
        g_points++;
      }
    for (int i = 0; i < 3; i++) {
      state_free(&(i == 0 ? &z.old : i == 1 ? &z.neu : &z.neu2)->files);
    }
  }
#endif
  group_end();
}

static void group_fsize(void) {
  group_begin("RLIMIT_FSIZE at each file size");
  for (int scn = 0; scn < NSCN; scn++) {
    scenario z;
    memset(&z, 0, sizeof z);
    set_up(scn, &z);
    for (int f = -1; f < z.neu.files.n; f++) {
      const long lim = f < 0 ? 0 : (long)z.neu.files.len[f] - 1;
      if (lim < 0) continue;
      char what[200];
      snprintf(what, sizeof what, "%s, file size limit %ld", SCN_NAME[scn], lim);
      case_begin("%s", what);
      restore_old(&z, scn);
      check_after(&z, scn, run_child(&z, scn, 0, 0, lim), what);
      g_points++;
    }
    for (int i = 0; i < 3; i++) state_free(&(i == 0 ? &z.old : i == 1 ? &z.neu : &z.neu2)->files);
  }
  group_end();
}

/* A folder where the change writes a file: refused before the commit, the
 * other files as they were. */
static void group_in_the_way(void) {
  group_begin("a folder in the way of each file");
  scenario z;
  memset(&z, 0, sizeof z);
  set_up(SCN_ADD, &z);
  char p[1024];
  for (int f = 0; f < z.neu.files.n; f++) {
    case_begin("%s is a folder", z.neu.files.name[f]);
    restore_old(&z, SCN_ADD);
    snprintf(p, sizeof p, "%s/%s", z.work, z.neu.files.name[f]);
    unlink(p);
    mkdir(p, 0777);
    const lik_status st = change(SCN_ADD, z.work);
    CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), z.neu.files.name[f]),
          "%s in the way: %s (%s)", z.neu.files.name[f], lik_status_string(st), lik_last_error());
    state s, want;
    read_state(z.work, &s);
    memset(&want, 0, sizeof want);
    for (int i = 0; i < z.old.files.n; i++)
      if (strcmp(z.old.files.name[i], z.neu.files.name[f]))
        state_put(&want, z.old.files.name[i], (uint8_t *)z.old.files.data[i], z.old.files.len[i]);
    CHECK(state_eq(&s, &want), "%s in the way: the other files changed", z.neu.files.name[f]);
    for (int i = 0; i < want.n; i++) want.data[i] = NULL;
    state_free(&s);
    float sc[NQ * TOPK];
    int64_t id[NQ * TOPK];
    if (!strcmp(z.neu.files.name[f], "plan.json")) /* a file the loader does not read */
      CHECK(results(z.work, sc, id) == LIK_OK && same_results(&z.old, sc, id),
            "plan.json in the way: the index no longer searches as before: %s", lik_last_error());
    rmdir(p);
    int other = 0;
    read_files(z.work, &s, &other);
    CHECK(other == 0, "%s in the way: %d staging entries left", z.neu.files.name[f], other);
    state_free(&s);
  }
  for (int i = 0; i < 3; i++) state_free(&(i == 0 ? &z.old : i == 1 ? &z.neu : &z.neu2)->files);
  group_end();
}

/* ---- a save writes only what changed ------------------------------------------------ */

typedef struct {
  int n;
  char name[MAXF][256];
  ino_t ino[MAXF];
} inodes;

static void read_inodes(const char *dir, inodes *s) {
  memset(s, 0, sizeof *s);
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[1024];
  struct stat st;
  while (d && (e = readdir(d)) && s->n < MAXF) {
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (e->d_name[0] == '.' || lstat(p, &st)) continue;
    snprintf(s->name[s->n], sizeof s->name[0], "%s", e->d_name);
    s->ino[s->n++] = st.st_ino;
  }
  if (d) closedir(d);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names a save wrote or removed (another inode, new, gone), sorted,
 * comma-separated; "*" when it wrote every file. */
static void changed(const inodes *a, const inodes *b, char *out, size_t cap) {
  const char *v[2 * MAXF];
  int n = 0;
  for (int i = 0; i < b->n; i++) {
    int j = 0;
    while (j < a->n && strcmp(a->name[j], b->name[i])) j++;
    if (j == a->n || a->ino[j] != b->ino[i]) v[n++] = b->name[i];
  }
  const int all = n == b->n;
  for (int j = 0; j < a->n; j++) {
    int i = 0;
    while (i < b->n && strcmp(a->name[j], b->name[i])) i++;
    if (i == b->n) v[n++] = a->name[j];
  }
  qsort(v, (size_t)n, sizeof v[0], cmp_name);
  out[0] = 0;
  if (all) snprintf(out, cap, "*");
  else
    for (int i = 0; i < n; i++)
      snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? "," : "", v[i]);
}

/* The folder is what a whole save of the index it holds writes, bitwise. */
static int is_whole(const char *dir) {
  char full[300];
  snprintf(full, sizeof full, "%s/whole", g_tmp);
  rm_tree(full);
  lik_plaid_index *ix = NULL;
  int ok = lik_plaid_index_load(dir, LIK_PLAID_LOAD_VERIFY, &ix) == LIK_OK &&
           lik_plaid_index_save(ix, full, NULL) == LIK_OK;
  lik_plaid_index_free(ix);
  state a, b;
  read_state(dir, &a);
  read_state(full, &b);
  ok = ok && state_eq(&a, &b);
  state_free(&a);
  state_free(&b);
  rm_tree(full);
  return ok;
}

static lik_status delete2(lik_plaid_index *ix, int64_t at) {
  int64_t two[2] = {g_ids[at], g_ids[at + 1]};
  lik_tensor ids = {two, LIK_I64, 1, {2}, {1}, LIK_CPU, 0};
  return lik_plaid_index_delete(ix, &ids);
}

/* save ix to dir, which must then have `want` changed (see changed()) and
 * be whole. */
static void save_writes(lik_plaid_index *ix, const char *dir, const char *want, const char *what) {
  inodes before, after;
  char got[4096];
  case_begin("%s", what);
  read_inodes(dir, &before);
  CHECK(lik_plaid_index_save(ix, dir, NULL) == LIK_OK, "%s: save: %s", what, lik_last_error());
  read_inodes(dir, &after);
  changed(&before, &after, got, sizeof got);
  CHECK(!strcmp(got, want), "%s: the save wrote / removed %s, expected %s", what, got, want);
  CHECK(is_whole(dir), "%s: the folder differs from a whole save of its index", what);
}

static void group_partial(void) {
  group_begin("a save writes only what changed");
  char dir[300], other[300];
  snprintf(dir, sizeof dir, "%s/own", g_tmp);
  snprintf(other, sizeof other, "%s/other", g_tmp);
  rm_tree(dir);
  rm_tree(other);
  lik_tensor all = {g_ids, LIK_I64, 1, {g_base.n}, {1}, LIK_CPU, 0};
  CHECK(lik_plaid_index_save(g_built, dir, &all) == LIK_OK, "save: %s", lik_last_error());
  lik_plaid_index *ix = NULL, *ix2 = NULL;
  CHECK(lik_plaid_index_load(dir, 0, &ix) == LIK_OK, "load: %s", lik_last_error());
  if (!ix) return;
  CHECK(delete2(ix, 0) == LIK_OK, "delete: %s", lik_last_error());
  save_writes(ix, dir, "deleted.npy,metadata.json", "load + delete + save");
  CHECK(delete2(ix, 2) == LIK_OK, "delete: %s", lik_last_error());
  save_writes(ix, dir, "deleted.npy,metadata.json", "delete + save again (the folder it saved)");
  save_writes(ix, dir, "metadata.json", "save without a change");
  CHECK(lik_plaid_index_set_metadata_db(ix, "m1", 2) == LIK_OK, "set: %s", lik_last_error());
  save_writes(ix, dir, "metadata.json,metadata.sqlite", "metadata + save");
  CHECK(lik_plaid_index_set_metadata_db(ix, "m1", 2) == LIK_OK, "set: %s", lik_last_error());
  save_writes(ix, dir, "metadata.json", "the same metadata + save");
  CHECK(lik_plaid_index_set_metadata_db(ix, NULL, -1) == LIK_OK, "set: %s", lik_last_error());
  save_writes(ix, dir, "metadata.json,metadata.sqlite", "no metadata + save (removed)");
  /* someone else changes the folder: the next save writes it whole, as ix */
  CHECK(lik_plaid_index_load(dir, 0, &ix2) == LIK_OK && delete2(ix2, 4) == LIK_OK &&
            lik_plaid_index_save(ix2, dir, NULL) == LIK_OK,
        "another index's delete + save: %s", lik_last_error());
  lik_plaid_index_free(ix2);
  CHECK(delete2(ix, 6) == LIK_OK, "delete: %s", lik_last_error());
  save_writes(ix, dir, "*", "delete + save after another index saved there");
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  CHECK(lik_plaid_index_load(dir, 0, &ix2) == LIK_OK, "load: %s", lik_last_error());
  lik_plaid_index_info info2 = {0};
  lik_plaid_index_get_info(ix2, &info2);
  CHECK(info2.num_deleted == info.num_deleted, "the folder has %lld deleted, the index %lld",
        (long long)info2.num_deleted, (long long)info.num_deleted);
  lik_plaid_index_free(ix2);
  /* another folder: whole; then it is the index's */
  save_writes(ix, other, "*", "save to another folder");
  CHECK(delete2(ix, 8) == LIK_OK, "delete: %s", lik_last_error());
  save_writes(ix, other, "deleted.npy,metadata.json", "delete + save to the other folder");
  save_writes(ix, dir, "*", "save to the folder before");
  /* given doc_ids: the folder holds ids the index has not, the next save is whole */
  int64_t v[1024];
  for (int64_t j = 0; j < info.num_docs; j++) v[j] = 7 * j;
  lik_tensor given = {v, LIK_I64, 1, {info.num_docs}, {1}, LIK_CPU, 0};
  CHECK(lik_plaid_index_save(ix, dir, &given) == LIK_OK, "save with doc_ids: %s", lik_last_error());
  CHECK(delete2(ix, 10) == LIK_OK, "delete: %s", lik_last_error());
  save_writes(ix, dir, "*", "delete + save after a save with doc_ids");
  lik_plaid_index_free(ix);
  rm_tree(dir);
  rm_tree(other);
  group_end();
}

/* ---- values checked before use ------------------------------------------------------ */

/* The data of a .npy file lik wrote (version 1 header). */
static uint8_t *npy_at(uint8_t *file) { return file + 10 + (file[8] | file[9] << 8); }

static void edit(const char *dir, const char *name, size_t off, const void *bytes, size_t n) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  size_t len;
  uint8_t *b = read_all(p, &len);
  if (!b) return;
  uint8_t *data = npy_at(b);
  if ((size_t)(data - b) + off + n <= len) memcpy(data + off, bytes, n);
  write_all(p, b, len);
  free(b);
}

static void group_values(void) {
  group_begin("values and file kinds");
  char good[300], bad[300], p[1024];
  snprintf(good, sizeof good, "%s/good", g_tmp);
  snprintf(bad, sizeof bad, "%s/bad", g_tmp);
  rm_tree(good);
  CHECK(lik_plaid_index_save(g_built, good, NULL) == LIK_OK, "save: %s", lik_last_error());
  state s;
  read_state(good, &s);
  static const struct {
    const char *file;
    size_t off;
    uint8_t bytes[4];
    size_t n;
  } edits[] = {
      {"centroids.npy", 2 * 5, {0x00, 0x7e}, 2},             /* fp16 NaN */
      {"centroids.npy", 0, {0x00, 0x7c}, 2},                 /* fp16 +inf */
      {"bucket_weights.npy", 4, {0x00, 0x00, 0x80, 0x7f}, 4}, /* +inf */
      {"bucket_weights.npy", 0, {0xca, 0xf2, 0x49, 0xf1}, 4}, /* -1e30 */
      {"bucket_weights.npy", 8, {0x00, 0x01, 0x80, 0x47}, 4}, /* 65538 */
      {"cluster_threshold.npy", 0, {0x00, 0x00, 0xc0, 0x7f}, 4}, /* NaN */
  };
  for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
    case_begin("%s: a bad value at byte %zu", edits[e].file, edits[e].off);
    write_state(bad, &s);
    edit(bad, edits[e].file, edits[e].off, edits[e].bytes, edits[e].n);
    lik_plaid_index *ix = NULL;
    const lik_status st = lik_plaid_index_load(bad, 0, &ix);
    CHECK(st == LIK_ERR_VALUE && !ix && strstr(lik_last_error(), edits[e].file),
          "%s with a bad value loads: %s (%s)", edits[e].file, lik_status_string(st), lik_last_error());
    lik_plaid_index_free(ix);
  }
  /* a code out of range: an add + save refuses it and writes nothing */
  case_begin("a code out of range, then add + save");
  write_state(bad, &s);
  const int64_t big = 1000;
  edit(bad, "merged_codes.npy", 8 * 3, &big, 8);
  state before;
  read_state(bad, &before);
  lik_status st = change(SCN_ADD, bad);
  CHECK(st == LIK_ERR_VALUE && strstr(lik_last_error(), "code 1000"),
        "add + save over a corrupt code: %s (%s)", lik_status_string(st), lik_last_error());
  state after;
  read_state(bad, &after);
  CHECK(state_eq(&before, &after), "add + save over a corrupt code changed the folder");
  state_free(&before);
  state_free(&after);
  /* a FIFO in place of each file: refused without blocking */
  for (int f = 0; f < s.n; f++) {
    case_begin("%s is a FIFO", s.name[f]);
    write_state(bad, &s);
    snprintf(p, sizeof p, "%s/%s", bad, s.name[f]);
    unlink(p);
    CHECK(mkfifo(p, 0666) == 0, "mkfifo: %s", strerror(errno));
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(20); /* a reader blocked on the FIFO dies here */
      lik_plaid_index *ix = NULL;
      const lik_status r = lik_plaid_index_load(bad, LIK_PLAID_LOAD_VERIFY, &ix);
      int ok = r == LIK_OK || (r == LIK_ERR_VALUE && strstr(lik_last_error(), s.name[f]));
      if (!r) { /* a file the loader does not read: the change replaces it */
        ok = change(SCN_ADD, bad) == LIK_OK;
        lik_plaid_index_free(ix);
      }
      _exit(ok ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "%s as a FIFO: the loader %s", s.name[f],
          WIFSIGNALED(ws) ? "blocked" : "gave a wrong status or message");
  }
  state_free(&s);
  rm_tree(good);
  rm_tree(bad);
  group_end();
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  test_init("test_plaid_commit");
  snprintf(g_tmp, sizeof g_tmp, "/tmp/lik_test_commit_XXXXXX");
  if (!mkdtemp(g_tmp)) {
    printf("cannot create a temporary folder\n");
    return 1;
  }
  g_count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_count == MAP_FAILED) return 1;
  for (int64_t j = 0; j < 1024; j++) g_ids[j] = 1000 + 3 * j;
  g_base = make_docs(40, 12, 0);
  g_more = make_docs(20, 12, 1);
  for (int i = 0; i < NQ * LQ * D; i++) g_q[i] = (float)rng_range(-1, 1);
  lik_tensor X, cu;
  docs_tensors(&g_base, &X, &cu);
  lik_plaid_build_options o = opts(0);
  if (lik_plaid_index_build(&X, &cu, &o, &g_built) != LIK_OK) {
    printf("build: %s\n", lik_last_error());
    return 1;
  }
  const double t0 = now_s();
  group_points();
  group_fsize();
  group_in_the_way();
  group_partial();
  group_values();
  printf("%ld fault points in %.1f s\n", g_points, now_s() - t0);
  lik_plaid_index_free(g_built);
  rm_tree(g_tmp);
  return test_finish("test_plaid_commit");
}
