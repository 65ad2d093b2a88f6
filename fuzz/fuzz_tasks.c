/* libFuzzer target: evaluation task sets as another process receives them (seed corpus
 * fuzz/corpus/tasks), through nevo_taskset_read. The receiver's context is fixed:
 * CartPole-v1 capped at 50 steps, a 4-unit tanh network (30 parameters) with and
 * without observation normalisation, and a noise table of NEVO_NOISE_MIN_FLOATS.
 *
 * As fuzz_file.h does for files, the harness repairs the container's length and CRC
 * unless bit 0 of the reserved field is set, so the payload is what gets fuzzed. A read
 * must fail cleanly or give a set that writes back to the same structure; a set that
 * fits the context (and holds at most 64 episodes) is materialised and evaluated, and
 * its results must travel back through nevo_results_write / _read unchanged.
 *
 * NEVO_FUZZ_WRITE_CORPUS=DIR writes the seed corpus instead (the sets a GA and an ES
 * with observation normalisation ask for in that context) and exits:
 * fuzz/make_corpus.sh runs it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "nevo/algo.h"
#include "nevo/eval.h"
#include "nevo/tasks.h"
#include "nevo/train.h"

enum { CAP = 50, MAX_TASKS = 64 };

static NevoEnv *env;
static NevoPolicy *plain, *normed; /* without, with observation normalisation */
static NevoPool *pool;
static NevoNoise *noise;
static NevoEvaluator *ev_plain, *ev_normed;

static NevoPolicy *policy(int obs_norm) {
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_hidden = 1;
    c.hidden[0] = 4;
    strcpy(c.activation, "tanh");
    strcpy(c.init, "scaled");
    NevoPolicy *p = NULL;
    NevoError err;
    if (nevo_policy_new(nevo_env_spec(env), &c, obs_norm, &p, &err)) exit(1);
    return p;
}

/* The sets of a run's first two generations, one file each. */
static void write_corpus(const char *dir, const char *algo_json, const char *name) {
    NevoConfig cfg;
    NevoError err;
    nevo_config_defaults(&cfg);
    if (nevo_config_apply_json(&cfg, algo_json, name, &err)) exit(1);
    NevoPolicy *p = nevo_algo_obs_norm(&cfg) ? normed : plain;
    NevoEvaluator *ev = nevo_algo_obs_norm(&cfg) ? ev_normed : ev_plain;
    NevoAlgo *a = NULL;
    if (nevo_algo_new(&cfg, env, p, noise, pool, &a, &err)) exit(1);
    for (int round = 0; round < 4; round++) {
        NevoBuf b = {0};
        if (nevo_taskset_write(nevo_algo_ask(a), &b, &err)) exit(1);
        char path[512];
        snprintf(path, sizeof path, "%s/%s_%d.tasks", dir, name, round);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f)) exit(1);
        nevo_buf_free(&b);
        /* the round's evaluation, then the next */
        const NevoTaskSet *ts = nevo_algo_ask(a);
        NevoEpisode res[1024];
        NevoObsStats stats[1024];
        memset(stats, 0, sizeof stats);
        if (ts->n_tasks > 1024) exit(1);
        for (int t = 0; t < ts->n_tasks; t++)
            if (ts->tasks[t].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_init(&stats[t], ts->obs_dim);
        int n = ts->n_tasks, done;
        NevoGenStats gs;
        if (nevo_evaluate_tasks(ev, ts, res, stats, NULL, &err) || nevo_algo_tell(a, res, stats, NULL, &gs, &done, &err))
            exit(1);
        for (int t = 0; t < n; t++) nevo_obs_stats_free(&stats[t]);
    }
    nevo_algo_free(a);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    NevoError err;
    if (nevo_env_new("CartPole-v1", NULL, 0, &env, &err)) exit(1);
    nevo_env_set_max_steps(env, CAP);
    plain = policy(0);
    normed = policy(1);
    pool = nevo_pool_new(1);
    noise = nevo_noise_new(NEVO_NOISE_MIN_FLOATS, pool);
    ev_plain = nevo_evaluator_new(env, plain, pool, 3);
    ev_normed = nevo_evaluator_new(env, normed, pool, 3);
    const char *dir = getenv("NEVO_FUZZ_WRITE_CORPUS");
    if (dir) {
        const char *base = "{\"env\": \"CartPole-v1\", \"max_episode_steps\": 50, \"population\": 8, \"seed\": 3, "
                           "\"noise_table_floats\": 1048576, \"policy\": {\"hidden\": [4]}, ";
        char json[1024];
        snprintf(json, sizeof json, "%s\"algo\": \"ga\", \"ga\": {\"truncation\": 2, \"validation_candidates\": 3, "
                 "\"validation_episodes\": 2}}", base);
        write_corpus(dir, json, "ga");
        snprintf(json, sizeof json, "%s\"algo\": \"ga\", \"ga\": {\"truncation\": 2, \"validation_candidates\": 3, "
                 "\"validation_episodes\": 2, \"rank\": 2, \"factored\": true}}", base);
        write_corpus(dir, json, "ga_rank");
        snprintf(json, sizeof json, "%s\"algo\": \"es\", \"episodes\": 2, \"es\": {\"obs_norm\": true, "
                 "\"obs_norm_prob\": 0.5, \"center_episodes\": 2}}", base);
        write_corpus(dir, json, "es");
        exit(0);
    }
    return 0;
}

/* Evaluates a set that fits the context, and sends its results back and forth. */
static void evaluate(NevoTaskSet *ts) {
    NevoPolicy *p = ts->obs_mean ? normed : plain;
    NevoEvaluator *ev = ts->obs_mean ? ev_normed : ev_plain;
    NevoError err = {0};
    NevoStatus st = nevo_taskset_materialise(ts, p, noise, &err);
    if (st == NEVO_OK) st = nevo_taskset_prepare_policy(ts, p, &err);
    fuzz_check_error(st, &err);
    if (st || ts->n_tasks > MAX_TASKS) return;
    NevoEpisode res[MAX_TASKS], back[MAX_TASKS];
    NevoObsStats stats[MAX_TASKS], stats_back[MAX_TASKS];
    memset(stats, 0, sizeof stats);
    memset(stats_back, 0, sizeof stats_back);
    for (int t = 0; t < ts->n_tasks; t++)
        if (ts->tasks[t].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_init(&stats[t], ts->obs_dim);
    st = nevo_evaluate_tasks(ev, ts, res, stats, NULL, &err);
    fuzz_check_error(st, &err);
    if (st == NEVO_OK) {
        NevoBuf b = {0};
        FUZZ_REQUIRE(nevo_results_write(ts, res, stats, NULL, &b, &err) == NEVO_OK);
        st = nevo_results_read(ts, b.data, b.len, back, stats_back, NULL, &err);
        fuzz_check_error(st, &err);
        FUZZ_REQUIRE(st == NEVO_OK);
        for (int t = 0; t < ts->n_tasks; t++) {
            FUZZ_REQUIRE(back[t].length == res[t].length && back[t].terminated == res[t].terminated);
            FUZZ_REQUIRE(memcmp(&back[t].ret, &res[t].ret, sizeof res[t].ret) == 0);
        }
        nevo_buf_free(&b);
    }
    for (int t = 0; t < ts->n_tasks; t++) {
        nevo_obs_stats_free(&stats[t]);
        nevo_obs_stats_free(&stats_back[t]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *bytes = malloc(size ? size : 1);
    memcpy(bytes, data, size);
    fuzz_repair_container(bytes, size);
    NevoTaskSet *ts = NULL;
    NevoError err = {0};
    NevoStatus st = nevo_taskset_read(bytes, size, &ts, &err);
    free(bytes);
    fuzz_check_error(st, &err);
    if (st) return 0;
    /* what was read writes back to the same structure */
    NevoBuf b = {0};
    FUZZ_REQUIRE(nevo_taskset_write(ts, &b, &err) == NEVO_OK);
    NevoTaskSet *again = NULL;
    FUZZ_REQUIRE(nevo_taskset_read(b.data, b.len, &again, &err) == NEVO_OK);
    FUZZ_REQUIRE(again->n_bases == ts->n_bases && again->n_nets == ts->n_nets && again->n_tasks == ts->n_tasks);
    FUZZ_REQUIRE(memcmp(again->nets, ts->nets, sizeof(NevoNet) * (size_t)ts->n_nets) == 0);
    nevo_taskset_free(again);
    nevo_buf_free(&b);
    if (ts->nparams == plain->nparams && (ts->noise_floats == 0 || ts->noise_floats == noise->size)) evaluate(ts);
    nevo_taskset_free(ts);
    return 0;
}
