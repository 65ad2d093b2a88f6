/* The libFuzzer targets of fuzz/ (built by fuzz/fuzz.mk with clang, AddressSanitizer and
 * UndefinedBehaviorSanitizer), each run briefly over its seed corpus in fuzz/corpus/
 * plus a fixed number of mutations from a fixed seed: a crash, a sanitizer report, a
 * leak, a timeout or a message of more than one line fails the test, with the
 * fuzzer's report. The directory of the targets comes from NEVO_FUZZ_DIR, which
 * `make check` sets where clang and libFuzzer are installed; without it the tests say
 * they are skipped. `make fuzz` runs the targets for longer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void run_target(const char *target, int runs) {
    const char *dir = getenv("NEVO_FUZZ_DIR");
    if (!dir || !*dir) {
        printf("     skipped: fuzz_%s (NEVO_FUZZ_DIR is not set; the plain `make check` sets it where clang and libFuzzer "
               "are installed)\n",
               target);
        return;
    }
    char bin[1024], corpus[1024];
    snprintf(bin, sizeof bin, "%s/fuzz_%s", dir, target);
    snprintf(corpus, sizeof corpus, "fuzz/corpus/%s", target);
    CHECK_MSG(access(bin, X_OK) == 0, "NEVO_FUZZ_DIR is set but %s is missing (make fuzz-build)", bin);
    CHECK_MSG(access(corpus, R_OK) == 0, "no seed corpus %s (run the tests from the repository root)", corpus);
    /* new inputs go to a scratch directory (the first one given), never to the tree */
    char scratch[1024];
    snprintf(scratch, sizeof scratch, "%s/corpus", test_tmpdir());
    char out[65536];
    int rc = test_run(out, sizeof out,
                      "mkdir -p %s && %s -seed=1 -runs=%d -max_total_time=60 -timeout=20 -rss_limit_mb=2048 "
                      "-artifact_prefix=%s/ %s %s",
                      scratch, bin, runs, test_tmpdir(), scratch, corpus);
    /* the report's tail: what crashed and where */
    size_t n = strlen(out);
    const char *tail = n > 6000 ? out + n - 6000 : out;
    CHECK_MSG(rc == 0, "fuzz_%s exited %d:\n%s", target, rc, tail);
    CHECK_MSG(strstr(out, "Done ") != NULL, "fuzz_%s did not finish its runs:\n%s", target, tail);
}

TEST(fuzz_config_briefly) { run_target("config", 20000); }
TEST(fuzz_policy_briefly) { run_target("policy", 5000); }
TEST(fuzz_checkpoint_briefly) { run_target("checkpoint", 500); }
TEST(fuzz_tasks_briefly) { run_target("tasks", 3000); }
TEST(fuzz_idx_briefly) { run_target("idx", 5000); }
TEST(fuzz_model_briefly) { run_target("model", 5000); }
