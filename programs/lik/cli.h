/*
 * cli.h — what every subcommand of the `lik` command shares: the program
 * name its messages start with, option-value parsers that print their own
 * usage error, a monotonic clock, the stderr progress bar and the bundled
 * data folder.  Below main.c, exact.c and index_cmd.c: it includes none of
 * them.
 */
#ifndef LIK_CLI_CLI_H
#define LIK_CLI_CLI_H

#include <stddef.h>

/* The name messages start with ("lik"; main.c sets argv[0]'s base name). */
extern const char *prog;

/* An integer option value in [lo, hi] into *out: 0, or 1 after printing
 * "PROG: OPT expects an integer in [LO, HI], got 'S'". */
int parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);

/* The same for an integer >= lo ("expects an integer >= LO"). */
int parse_int_min(const char *opt, const char *s, long long lo, long long *out);

/* A finite number into *out: 0, or 1 after printing "expects a finite number". */
int parse_float(const char *opt, const char *s, float *out);

/* Seconds on CLOCK_MONOTONIC. */
double now_s(void);

/* A progress bar on stderr: frac in [0, 1]; done erases it. */
void progress(double frac, int done);

/* The bundled Cranfield folder into dir: <bin>/../share/lik/cranfield, then
 * the compiled-in LIK_DEFAULT_DATA_DIR (each only where docs.safetensors is
 * a regular file there).  0 when found, 1 otherwise. */
int find_default_data(char *dir, size_t cap);

/* The compiled-in data folder ("" when none): for messages. */
const char *default_data_dir(void);

#endif
