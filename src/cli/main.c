/* nevo: train and evaluate neural-network policies by evolution. Subcommand dispatch
 * and the helpers the subcommands share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "nevo/version.h"

static const char *usage =
    "nevo — neuroevolution at the speed of the hardware\n"
    "\n"
    "usage: nevo <command> [options]\n"
    "\n"
    "commands:\n"
    "  train CONFIG [key=value ...] [--out DIR] [--resume DIR] [--threads N]\n"
    "                   train: Deep GA, ES, novelty search, random search, SGD,\n"
    "                   V-trace or R2D2\n"
    "  eval FILE [--episodes N] [--seed S]\n"
    "                   evaluate a saved policy or a checkpoint's best policy\n"
    "  eval --env NAME --policy random|constant:A\n"
    "                   evaluate a reference policy\n"
    "  envs             list the environments and their spaces\n"
    "  bench            measure this machine's limits and nevo's hot paths\n"
    "  plot curves|behaviours RUN[=LABEL] ... --out FILE.png\n"
    "                   draw learning curves or final behaviours of runs as a PNG\n"
    "  version          print nevo's version (also --version)\n"
    "\n"
    "`nevo <command> --help` describes each command; `man nevo` all of them.\n";

int cli_errors_quiet;

int cli_fail(const NevoError *err) {
    fflush(stdout);
    if (!cli_errors_quiet) fprintf(stderr, "nevo: error: %s\n", err->msg);
    return err->status == NEVO_ERR_NUMERIC || err->status == NEVO_ERR_UNSUPPORTED ? 1 : 2;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1024], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    /* one line whatever the arguments held */
    if (!cli_errors_quiet)
        fprintf(stderr, "nevo %s: %s (see `nevo %s --help`)\n", cmd, nevo_escape(line, sizeof line, msg), cmd);
    return 2;
}

int cli_parse_int(const char *s, long long min, long long max, long long *out) {
    char *end;
    if (!s || !*s) return -1;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int cli_option(int argc, char **argv, int *i, const char *name, const char **value) {
    if (strcmp(argv[*i], name) != 0) return 0;
    if (*i + 1 >= argc) {
        *value = NULL;
        return 1;
    }
    *value = argv[++*i];
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "nevo %s: takes no arguments, got '%s'\n", cmd, cli_esc(argv[2]));
            return 2;
        }
        printf("nevo %s\n", nevo_version());
        return 0;
    }
    if (strcmp(cmd, "train") == 0) return nevo_cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return nevo_cmd_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "envs") == 0) return nevo_cmd_envs(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return nevo_cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "plot") == 0) return nevo_cmd_plot(argc - 1, argv + 1);
    fprintf(stderr, "nevo: unknown command '%s' (nevo --help lists them)\n", cli_esc(cmd));
    return 2;
}
