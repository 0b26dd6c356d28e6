/*
 * meta_where.c — the metadata filter of `lik search --where` (meta_where.h).
 * Same semantics as python/lik/_metadata.py's MetaDB.where followed by
 * Index.where's restriction to live documents.
 */
#define _POSIX_C_SOURCE 200809L
#include "meta_where.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h" /* src/core: overflow-checked sizes */
#include "emb_io.h"  /* ERR_LEN */

/* python/lik/_metadata.py's authorizer: SELECT, reads of table `metadata`,
 * function calls; everything else (ATTACH, PRAGMA, sqlite_master, writes) denied. */
static int allow(void *user, int action, const char *a1, const char *a2, const char *db,
                 const char *trigger) {
  (void)user, (void)a2, (void)db, (void)trigger;
  if (action == SQLITE_SELECT || action == SQLITE_FUNCTION) return SQLITE_OK;
  if (action == SQLITE_READ && a1 && !strcmp(a1, "metadata")) return SQLITE_OK;
  return SQLITE_DENY;
}

/* 1 when s is [+-]digits (kind 0) or a decimal number [+-](d+[.d*]|.d+)[(e|E)[+-]d+] (kind 1). */
static int is_number(const char *s, int kind) {
  const char *p = s + (*s == '+' || *s == '-');
  int digits = 0;
  while (isdigit((unsigned char)*p)) p++, digits++;
  if (kind == 0) return digits > 0 && !*p;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p)) p++, digits++;
  }
  if (!digits) return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    p += *p == '+' || *p == '-';
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
  }
  return !*p;
}

static int bind_param(sqlite3_stmt *st, int i, const char *s) {
  if (is_number(s, 0)) {
    errno = 0;
    const long long v = strtoll(s, NULL, 10);
    if (!errno) return sqlite3_bind_int64(st, i, v);
  }
  if (is_number(s, 1)) {
    errno = 0;
    const double v = strtod(s, NULL);
    if (isfinite(v)) return sqlite3_bind_double(st, i, v);
  }
  return sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
}

static int cmp_i64(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The index's live ids, ascending, malloc'ed into *live / *n_live. */
static int live_ids(const lik_plaid_index *ix, int64_t **live, int64_t *n_live, char *err) {
  lik_plaid_index_info info;
  lik_plaid_index_get_info(ix, &info);
  int64_t *v = calloc_n(info.num_docs + 1, 1, sizeof(int64_t));
  if (!v) {
    snprintf(err, ERR_LEN, "--where: out of memory for %lld document ids", (long long)info.num_docs);
    return 1;
  }
  lik_tensor T = {v, LIK_I64, 1, {info.num_docs}, {1}, LIK_CPU, 0};
  if (lik_plaid_index_get_ids(ix, &T) != LIK_OK) {
    snprintf(err, ERR_LEN, "--where: %s", lik_last_error());
    free(v);
    return 1;
  }
  int64_t m = 0;
  for (int64_t i = 0; i < info.num_docs; i++)
    if (v[i] >= 0) v[m++] = v[i];
  qsort(v, (size_t)m, sizeof(int64_t), cmp_i64);
  *live = v;
  *n_live = m;
  return 0;
}

int meta_where(const lik_plaid_index *ix, const char *index_dir, const char *cond,
               const char *const *params, int nparams, int64_t **ids, int64_t *n, char *err) {
  const char *c = cond;
  while (isspace((unsigned char)*c)) c++;
  if (!*c) {
    snprintf(err, ERR_LEN, "--where: expected a non-empty SQL expression");
    return 1;
  }
  if (strchr(cond, ';')) {
    snprintf(err, ERR_LEN, "--where: one WHERE expression only (';' is refused)");
    return 1;
  }
  int64_t size = -1;
  if (lik_plaid_index_get_metadata_db(ix, NULL, 0, &size) != LIK_OK) {
    snprintf(err, ERR_LEN, "--where: %s", lik_last_error());
    return 1;
  }
  if (size < 0) {
    snprintf(err, ERR_LEN, "--where: the index %s has no metadata (metadata.sqlite: written by "
             "Python's Index.build / add with metadata=[...])", index_dir);
    return 1;
  }
  int rc = 1;
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  char *sql = NULL;
  int64_t *found = NULL, *live = NULL, n_found = 0, cap = 0, n_live = 0;
  unsigned char *bytes = NULL;
  if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    snprintf(err, ERR_LEN, "--where: SQLite: %s", db ? sqlite3_errmsg(db) : "out of memory");
    goto out;
  }
  /* the bytes are untrusted: no schema-defined functions / views run with privileges */
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
  if (size > 0) {
    bytes = sqlite3_malloc64((sqlite3_uint64)size);
    if (!bytes) {
      snprintf(err, ERR_LEN, "--where: out of memory for the metadata (%lld bytes)", (long long)size);
      goto out;
    }
    if (lik_plaid_index_get_metadata_db(ix, bytes, size, &size) != LIK_OK) {
      snprintf(err, ERR_LEN, "--where: %s", lik_last_error());
      sqlite3_free(bytes);
      goto out;
    }
    /* read-only, in memory; SQLite frees the bytes (also on failure) */
    if (sqlite3_deserialize(db, "main", bytes, size, size,
                            SQLITE_DESERIALIZE_READONLY | SQLITE_DESERIALIZE_FREEONCLOSE) != SQLITE_OK) {
      snprintf(err, ERR_LEN, "--where: the metadata of %s: %s", index_dir, sqlite3_errmsg(db));
      goto out;
    }
  }
  /* Python's MetaDB creates the (empty) table when a database lacks it; here it
   * goes to the temp schema, the read-only database untouched. */
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'metadata'",
                         -1, &st, NULL) != SQLITE_OK) {
    snprintf(err, ERR_LEN, "--where: the metadata of %s: %s", index_dir, sqlite3_errmsg(db));
    goto out;
  }
  const int step = sqlite3_step(st);
  sqlite3_finalize(st);
  st = NULL;
  if (step != SQLITE_ROW && step != SQLITE_DONE) {
    snprintf(err, ERR_LEN, "--where: the metadata of %s: %s", index_dir, sqlite3_errmsg(db));
    goto out;
  }
  if (step == SQLITE_DONE &&
      sqlite3_exec(db, "CREATE TEMP TABLE metadata (\"_id\" INTEGER PRIMARY KEY)", NULL, NULL, NULL) !=
          SQLITE_OK) {
    snprintf(err, ERR_LEN, "--where: SQLite: %s", sqlite3_errmsg(db));
    goto out;
  }
  static const char head[] = "SELECT \"_id\" FROM metadata WHERE (", tail[] = ") ORDER BY \"_id\"";
  const size_t len = strlen(cond);
  sql = len > (size_t)1 << 30 ? NULL : malloc(sizeof head + len + sizeof tail);
  if (!sql) {
    snprintf(err, ERR_LEN, "--where: out of memory for a condition of %zu bytes", len);
    goto out;
  }
  snprintf(sql, sizeof head + len + sizeof tail, "%s%s%s", head, cond, tail);
  sqlite3_set_authorizer(db, allow, NULL);
  const char *rest = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, &rest) != SQLITE_OK || !st) {
    snprintf(err, ERR_LEN, "--where \"%.200s\": %s", cond, sqlite3_errmsg(db));
    goto out;
  }
  for (; rest && *rest; rest++)
    if (!isspace((unsigned char)*rest)) {
      snprintf(err, ERR_LEN, "--where \"%.200s\": one WHERE expression only", cond);
      goto out;
    }
  const int want = sqlite3_bind_parameter_count(st);
  if (want != nparams) {
    snprintf(err, ERR_LEN, "--param: the condition \"%.200s\" has %d parameter%s, %d --param given", cond,
             want, want == 1 ? "" : "s", nparams);
    goto out;
  }
  for (int i = 0; i < nparams; i++)
    if (bind_param(st, i + 1, params[i]) != SQLITE_OK) {
      snprintf(err, ERR_LEN, "--param %d (%.100s): %s", i + 1, params[i], sqlite3_errmsg(db));
      goto out;
    }
  int r;
  while ((r = sqlite3_step(st)) == SQLITE_ROW) {
    if (n_found == cap) {
      cap = cap ? 2 * cap : 1024;
      int64_t *g = realloc(found, (size_t)cap * sizeof(int64_t));
      if (!g) {
        snprintf(err, ERR_LEN, "--where: out of memory for %lld ids", (long long)cap);
        goto out;
      }
      found = g;
    }
    found[n_found++] = sqlite3_column_int64(st, 0);
  }
  if (r != SQLITE_DONE) {
    snprintf(err, ERR_LEN, "--where \"%.200s\": %s", cond, sqlite3_errmsg(db));
    goto out;
  }
  /* rows of documents deleted outside Python (lik index --delete keeps them) are dropped */
  if (live_ids(ix, &live, &n_live, err)) goto out;
  int64_t m = 0;
  for (int64_t i = 0; i < n_found; i++)
    if (bsearch(&found[i], live, (size_t)n_live, sizeof(int64_t), cmp_i64)) found[m++] = found[i];
  *ids = found;
  *n = m;
  found = NULL;
  rc = 0;
out:
  sqlite3_finalize(st);
  sqlite3_close(db);
  free(sql);
  free(found);
  free(live);
  return rc;
}
