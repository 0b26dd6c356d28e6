/*
 * index_cmd.h — the `lik index` and `lik search` subcommands (PLAID index:
 * lik_plaid_index_* in lik_experimental.h).  main.c dispatches to them.
 */
#ifndef LIK_CLI_INDEX_CMD_H
#define LIK_CLI_INDEX_CMD_H

/* `lik index [OPTIONS] [DOCS] OUT_DIR`; argv[0] is "index".  Exit status. */
int cmd_index(int argc, char **argv);

/* `lik search [OPTIONS] INDEX [QUERIES]`; argv[0] is "search".  Exit status. */
int cmd_search(int argc, char **argv);

#endif
