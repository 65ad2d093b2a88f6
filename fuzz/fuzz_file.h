/* The body of the file fuzz targets (internal to fuzz/): the input is a whole nevo file
 * (a policy file or a checkpoint) given to nevo_load_any_policy, the loader behind
 * `nevo eval FILE`, which for a checkpoint rebuilds the algorithm and replays its state.
 *
 * Mutated bytes would almost never pass the CRC, so the harness repairs the container
 * (the header's payload length and the CRC) of every input whose reserved field
 * (bytes 12-15, which readers ignore) has bit 0 clear: the payload is what gets fuzzed,
 * as a crafted file would be. Inputs with the bit set go through unrepaired, to fuzz
 * the container checks themselves. The file lives in a memfd (/proc/self/fd/N), so no
 * temporary file is left behind.
 *
 * A load must fail cleanly (a status and one line) or give a policy that runs: a few
 * steps of its env are taken with it. */
#ifndef NEVO_FUZZ_FILE_H
#define NEVO_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "nevo/env.h"
#include "nevo/checkpoint.h"
#include "nevo/io.h"
#include "nevo/policy.h"

static int fuzz_fd = -1;
static char fuzz_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    /* a crafted config may ask for any size: loads refuse more than this (and the
     * fuzzer's own limit, -rss_limit_mb, is 2 GiB by default) */
    setenv("NEVO_MAX_MEMORY_MB", "256", 0);
    fuzz_fd = memfd_create("nevo-fuzz", MFD_CLOEXEC);
    if (fuzz_fd < 0) {
        perror("memfd_create");
        exit(1);
    }
    snprintf(fuzz_path, sizeof fuzz_path, "/proc/self/fd/%d", fuzz_fd);
    return 0;
}

/* A few steps of the loaded policy in its env. */
static void fuzz_run_policy(const NevoLoadedPolicy *lp) {
    const NevoPolicy *p = lp->policy;
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(lp->env));
    float *obs = nevo_alloc(sizeof(float) * (size_t)nevo_env_spec(lp->env)->obs_dim);
    float *out = nevo_alloc(sizeof(float) * (size_t)p->n_out);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, 1));
    float action[NEVO_ENV_MAX_ACT_DIM];
    int net = 0;
    nevo_env_reset(lp->env, inst, 1, obs);
    NevoStepResult r = {0};
    for (int t = 0; t < 5 && !r.terminated && !r.truncated; t++) {
        nevo_policy_forward(p, lp->theta, p->nparams, &net, obs, 1, out, scratch);
        nevo_policy_actions(p, out, 1, action);
        nevo_env_step(lp->env, inst, action, obs, &r);
    }
    nevo_env_instance_free(lp->env, inst);
    free(inst);
    free(obs);
    free(out);
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *file = malloc(size ? size : 1);
    memcpy(file, data, size);
    fuzz_repair_container(file, size);
    FUZZ_REQUIRE(ftruncate(fuzz_fd, 0) == 0);
    FUZZ_REQUIRE(pwrite(fuzz_fd, file, size, 0) == (ssize_t)size);
    free(file);
    NevoLoadedPolicy lp;
    NevoError err = {0};
    NevoStatus st = nevo_load_any_policy(fuzz_path, &lp, &err);
    fuzz_check_error(st, &err);
    if (st == NEVO_OK) {
        FUZZ_REQUIRE(lp.env && lp.policy && lp.theta);
        fuzz_run_policy(&lp);
        nevo_loaded_policy_free(&lp);
    }
    return 0;
}

#endif
