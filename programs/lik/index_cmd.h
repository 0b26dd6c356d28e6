/*
 * index_cmd.h — the `lik index` and `lik search` subcommands (PLAID index:
 * lik_plaid_index_* in lik_experimental.h), and what they share with the
 * exact job in main.c.
 */
#ifndef LIK_CLI_INDEX_CMD_H
#define LIK_CLI_INDEX_CMD_H

#include <stddef.h>

/* `lik index [OPTIONS] [DOCS] OUT_DIR`; argv[0] is "index".  Exit status. */
int cmd_index(int argc, char **argv);

/* `lik search [OPTIONS] INDEX [QUERIES]`; argv[0] is "search".  Exit status. */
int cmd_search(int argc, char **argv);

/* main.c: the bundled Cranfield folder (0 on success); a progress bar on
 * stderr (frac in [0, 1], done erases it). */
int find_default_data(char *dir, size_t cap);
void progress(double frac, int done);

#endif
