/* libFuzzer target: configs. The input is a JSON text, then `key=value` overrides, each
 * after a NUL byte. It goes through what `nevo train CONFIG key=value ...` does with
 * them: nevo_config_apply_json, nevo_config_override, nevo_config_check, then the env
 * and the network the config names and the memory check, all of which must fail
 * cleanly (a status and one line) or succeed. A config that passes must survive the
 * JSON dump that policy files and checkpoints store: re-applied and re-checked, it
 * dumps the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "nevo/algo.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/policy.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("NEVO_MAX_MEMORY_MB", "1024", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    NevoError err = {0};
    NevoStatus st = nevo_config_apply_json(&cfg, text, "fuzz.json", &err);
    fuzz_check_error(st, &err);
    for (size_t at = strlen(text) + 1; st == NEVO_OK && at < size; at += strlen(text + at) + 1) {
        st = nevo_config_override(&cfg, text + at, &err);
        fuzz_check_error(st, &err);
    }
    if (st == NEVO_OK) {
        st = nevo_config_check(&cfg, &err);
        fuzz_check_error(st, &err);
    }
    if (st == NEVO_OK) {
        /* the dump round-trips */
        char *j1 = nevo_config_to_json(&cfg);
        NevoConfig back;
        nevo_config_defaults(&back);
        NevoStatus st2 = nevo_config_apply_json(&back, j1, "dump", &err);
        fuzz_check_error(st2, &err);
        FUZZ_REQUIRE(st2 == NEVO_OK);
        FUZZ_REQUIRE(nevo_config_check(&back, &err) == NEVO_OK);
        char *j2 = nevo_config_to_json(&back);
        FUZZ_REQUIRE(strcmp(j1, j2) == 0);
        free(j1);
        free(j2);
        /* what a run builds before anything else: env, the algorithm's checks, network,
         * memory bound */
        NevoEnv *env = NULL;
        NevoPolicy *policy = NULL;
        st = nevo_env_new(cfg.env, cfg.env_options, cfg.n_env_options, &env, &err);
        fuzz_check_error(st, &err);
        if (st == NEVO_OK) {
            st = nevo_algo_check(&cfg, nevo_env_spec(env), &err);
            fuzz_check_error(st, &err);
        }
        if (st == NEVO_OK) {
            st = nevo_policy_new(nevo_env_spec(env), &cfg.policy, 0, &policy, &err);
            fuzz_check_error(st, &err);
        }
        if (st == NEVO_OK) {
            st = nevo_algo_check_memory(&cfg, policy->nparams, &err);
            fuzz_check_error(st, &err);
        }
        nevo_policy_free(policy);
        nevo_env_free(env);
    }
    free(text);
    return 0;
}
