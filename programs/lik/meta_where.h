/*
 * meta_where.h — `lik search --where COND [--param V ...]`: the ids of an
 * index's live documents whose metadata satisfies COND, read with SQLite
 * from the database bytes the library holds for the index
 * (lik_plaid_index_get_metadata_db: the metadata.sqlite of the loaded
 * state), with python/lik/_metadata.py's confinement: one expression in
 * `SELECT _id FROM metadata WHERE (COND)`, ';' refused, parameters bound,
 * the database deserialized read-only and an authorizer that allows only
 * SELECT, reading table `metadata` and calling functions.
 */
#ifndef LIK_CLI_META_WHERE_H
#define LIK_CLI_META_WHERE_H

#include <stdint.h>

#include "lik_experimental.h"

/* Parameter typing: a decimal integer that fits int64 binds as INTEGER, a
 * decimal number (1.5, -2e3, an integer past int64) as REAL, anything else
 * as TEXT.  Returns 0 and *ids (malloc'ed, ascending, live documents only)
 * / *n, or 1 with a message naming --where / --param in err[ERR_LEN]. */
int meta_where(const lik_plaid_index *ix, const char *index_dir, const char *cond,
               const char *const *params, int nparams, int64_t **ids, int64_t *n, char *err);

#endif
