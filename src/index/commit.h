/*
 * commit.h — atomic changes of an index folder (docs/plaid_index.md,
 * "Atomic commits").  A change writes its new files beside the old ones and
 * switches with one atomic step; a reader sees the old state or the new one,
 * never a mix, whatever point a writer fails or is killed at.
 *
 * The folder keeps fast-plaid's fixed file names.  A change:
 *   1. finishes an interrupted earlier change (below), then creates the
 *      staging folder <dir>/.lik-new/ and writes every new file into it
 *      (each fsynced), plus .lik-new/.remove: the names the change deletes,
 *      one a line (always present, maybe empty); fsyncs .lik-new/;
 *   2. commits: renames .lik-new/ to .lik-commit/ and fsyncs <dir> — the one
 *      atomic step (before it the folder is the old state, after it the new);
 *   3. applies: renames each file of .lik-commit/ over its name in <dir>,
 *      deletes the .remove names, fsyncs <dir>, then deletes .remove and the
 *      empty .lik-commit/.
 * A reader (lik_folder_*) reads through a .lik-commit/ it finds: a name is
 * .lik-commit/<name> while that exists, absent when .remove lists it, else
 * <dir>/<name>; a .lik-new/ (a change that never committed) is ignored.  The
 * next change rolls an interrupted one forward (step 3) or removes its
 * .lik-new/.  One writer at a time (add / save need exclusive use).
 *
 * Every function returns 0 on success, else non-zero with a message in err
 * (naming the file and the system's reason).
 */
#ifndef LIK_INDEX_COMMIT_H
#define LIK_INDEX_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#define LIK_COMMIT_STAGING ".lik-new"
#define LIK_COMMIT_DIR ".lik-commit"
#define LIK_COMMIT_REMOVE ".remove"

/* ---- reading the current state ---- */

typedef struct {
  const char *dir;
  int committed;  /* a committed change not yet applied: read through it */
  char *remove;   /* its .remove (names separated by '\n'), or NULL */
} lik_folder;

/* Reads dir's commit state (a bounded .remove). */
int lik_folder_open(lik_folder *f, const char *dir, char *err, size_t errlen);
void lik_folder_close(lik_folder *f);

/* Opens file `name` of the current state read-only: a regular file only (a
 * FIFO or device is refused without blocking).  Returns the fd, -1 when the
 * state has no such file (err not set), -2 on an error (err set). */
int lik_folder_open_file(const lik_folder *f, const char *name, char *err, size_t errlen);

/* The identity of a file: equal identities are one file, unchanged (its
 * device, inode, size, modification and change times). */
typedef struct {
  uint64_t dev, ino, size, mtime, ctime;
} lik_file_id;

/* The identity of file `name` of the current state; 0 on success, else
 * non-zero (no such file, or err set). */
int lik_folder_file_id(const lik_folder *f, const char *name, lik_file_id *id, char *err,
                       size_t errlen);

/* A token that changes when a change commits or applies (the identities of
 * the commit folder and of metadata.json): a load that sees it change
 * while reading starts again. */
typedef struct {
  uint64_t v[6];
} lik_folder_stamp;
void lik_folder_stamp_get(const char *dir, lik_folder_stamp *s);

/* ---- writing a new state ---- */

typedef struct lik_commit lik_commit;

/* Begins a change of folder dir (created if absent): finishes or discards
 * an interrupted earlier change, makes an empty staging folder. */
int lik_commit_begin(const char *dir, lik_commit **out, char *err, size_t errlen);

/* Writes new file `name` in the staging folder: a buffered writer. */
int lik_commit_file(lik_commit *c, const char *name, char *err, size_t errlen);
void lik_commit_write(lik_commit *c, const void *p, size_t n);
int lik_commit_file_done(lik_commit *c, char *err, size_t errlen);

/* Marks `name` (in the folder now) as deleted by the change. */
int lik_commit_remove(lik_commit *c, const char *name, char *err, size_t errlen);

/* Commits and applies the change, then frees c.  An error before the
 * commit point leaves the old state (the staging folder removed); once
 * committed the change is kept (a failure to apply is finished by the
 * next change, readers see the new state) and 0 is returned. */
int lik_commit_finish(lik_commit *c, char *err, size_t errlen);

/* Abandons the change (the staging folder removed) and frees c; NULL: no-op. */
void lik_commit_abort(lik_commit *c);

#endif /* LIK_INDEX_COMMIT_H */
