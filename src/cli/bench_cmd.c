/* `nevo bench`: placeholder until the benchmark module lands. */
#include <stdio.h>

#include "cli/cli.h"

int nevo_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "nevo bench: not built yet\n");
    return 1;
}
