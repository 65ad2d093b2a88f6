/* The `nevo` command's subcommands (internal to the CLI). Each returns the process
 * exit status: 0 success, 2 bad input (usage, config, file), 1 failure while running. */
#ifndef NEVO_CLI_H
#define NEVO_CLI_H

#include "core/strutil.h"
#include "nevo/status.h"

int nevo_cmd_train(int argc, char **argv);
int nevo_cmd_eval(int argc, char **argv);
int nevo_cmd_envs(int argc, char **argv);
int nevo_cmd_bench(int argc, char **argv);
int nevo_cmd_plot(int argc, char **argv);

/* Whether error messages are printed: not on the ranks other than 0 of an MPI job,
 * whose errors rank 0 reports (comm.h, nevo_comm_agree). */
extern int cli_errors_quiet;
/* Prints "nevo: error: MSG" and returns the exit status for the error's kind. */
int cli_fail(const NevoError *err);
/* Prints a usage error and returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a non-negative integer option value; returns 0 on success. */
int cli_parse_int(const char *s, long long min, long long max, long long *out);
/* s (a name or value from the command line) escaped for a one-line message
 * (nevo_escape): control characters and bytes that are not UTF-8 become \xNN. Four
 * rotating buffers, so a message may echo up to four such strings. */
static inline const char *cli_esc(const char *s) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    return nevo_escape(buf[k], sizeof buf[k], s ? s : "");
}
/* True if argv[i] equals name; takes its value from argv[i+1] into *value. */
int cli_option(int argc, char **argv, int *i, const char *name, const char **value);

#endif
