/* The Python package (python/nevo) end to end: runs its pytest suite (python/tests:
 * vectorised trajectories against the C API bit for bit, autoreset, partial resets,
 * evaluate() against `nevo eval`, ask/tell against `nevo train` on envs and a dataset,
 * bad arguments, the documentation's examples, pip install, the installed prefix)
 * against the libnevo.so and `nevo` of the build under test (NEVO_BIN's directory;
 * NEVO_TEST_PREFIX names its installed copy). A sanitizer build's library cannot be
 * loaded into an uninstrumented python3 without preloading the runtimes, so there the
 * test says it is skipped. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A python3 with numpy and pytest (Debian's python3-numpy, python3-pytest): the one on
 * the PATH, else Debian's own where the PATH's is another installation. */
static const char *find_python(void) {
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
        if (test_run(NULL, 0, "%s -c 'import numpy, pytest' >/dev/null 2>&1", candidates[i]) == 0)
            return candidates[i];
    return NULL;
}

TEST(python_package) {
    const char *cflags = getenv("NEVO_TEST_CFLAGS");
    if (cflags && strstr(cflags, "-fsanitize")) {
        printf("     skipped: a sanitizer build's libnevo.so does not load into an uninstrumented python3\n");
        return;
    }
    char bin[PATH_MAX], repo[PATH_MAX], data[PATH_MAX];
    CHECK_MSG(realpath(test_nevo_bin(), bin) != NULL, "no nevo binary at %s", test_nevo_bin());
    snprintf(data, sizeof data, "%s/../..", test_data_dir());
    CHECK_MSG(realpath(data, repo) != NULL, "no repository above %s", test_data_dir());
    char lib[PATH_MAX + 16];
    snprintf(lib, sizeof lib, "%s", bin);
    char *slash = strrchr(lib, '/');
    CHECK(slash != NULL);
    snprintf(slash, sizeof lib - (size_t)(slash - lib), "/libnevo.so");
    CHECK_MSG(access(lib, R_OK) == 0, "no %s", lib);
    const char *py = find_python();
    CHECK_MSG(py != NULL, "no python3 with numpy and pytest (scripts/install-deps.sh installs python3-numpy and "
                          "python3-pytest)");
    static char out[1 << 16];
    int rc = test_run(out, sizeof out,
                      "cd %s && NEVO_BIN=%s NEVO_LIB=%s NEVO_MODELS=%s/models/mujoco PYTHONDONTWRITEBYTECODE=1 "
                      "timeout 600 %s -m pytest -q -p no:cacheprovider python/tests 2>&1",
                      repo, bin, lib, repo, py);
    CHECK_MSG(rc == 0, "python tests failed (exit %d):\n%s", rc, out);
    /* pytest's last line: "N passed, M skipped in S s" */
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n') out[--n] = '\0';
    const char *last = strrchr(out, '\n');
    printf("     python: %s\n", last ? last + 1 : out);
}

/* --- the C API beneath the package (nevo/vec.h), here so the sanitizer builds run it --- */

#include "nevo/nevo.h"

/* A vector of n instances against n single instances stepped by nevo_env_step, with
 * the vector's seeds and its autoreset rule; every observation, reward and flag equal.
 * Before steps 7 and 20 some instances are reset (nevo_vec_env_reset_masked): each
 * must then be a fresh instance (new memory) from the new seed, the others going on. */
static void check_vec_against_singles(const char *name, const NevoEnvOption *opts, int n_opts, int n, int threads,
                                      int mode) {
    NevoError err = {0};
    NevoVecEnv *v = NULL;
    CHECK_MSG(nevo_vec_env_new(name, opts, n_opts, n, 7, mode, threads, &v, &err) == NEVO_OK, "%s", err.msg);
    const NevoEnvSpec *s = nevo_vec_env_spec(v);
    NevoEnv *env = NULL;
    CHECK(nevo_env_new(name, opts, n_opts, &env, &err) == NEVO_OK);
    nevo_env_set_max_steps(env, 7);
    size_t od = (size_t)s->obs_dim, ad = (size_t)s->action_dim, isz = nevo_env_instance_size(env);
    float *obs = calloc((size_t)n * od, sizeof(float)), *fin = calloc((size_t)n * od, sizeof(float));
    float *ref = calloc((size_t)n * od, sizeof(float)), *act = calloc((size_t)n * ad, sizeof(float));
    float *rew = calloc((size_t)n, sizeof(float));
    bool *te = calloc((size_t)n, 1), *tr = calloc((size_t)n, 1), *has = calloc((size_t)n, 1);
    bool *mask = calloc((size_t)n, 1);
    unsigned char *insts = calloc((size_t)n, isz);
    int *episode = calloc((size_t)n, sizeof(int)), *ended = calloc((size_t)n, sizeof(int));
    uint64_t *seed = calloc((size_t)n, sizeof(uint64_t));
    nevo_vec_env_reset(v, 5, obs);
    for (int i = 0; i < n; i++) {
        seed[i] = 5;
        nevo_env_reset(env, insts + (size_t)i * isz, nevo_vec_env_episode_seed(5, i, 0), ref + (size_t)i * od);
        episode[i] = 1;
    }
    CHECK(memcmp(obs, ref, sizeof(float) * (size_t)n * od) == 0);
    int ends = 0, dropped = 0;
    for (int t = 0; t < 30; t++) {
        if (t == 7 || t == 20) {
            uint64_t sd = 60 + (uint64_t)t;
            for (int i = 0; i < n; i++) {
                mask[i] = (i + t) % 3 == 0;
                if (!mask[i]) continue;
                void *inst = insts + (size_t)i * isz;
                nevo_env_instance_free(env, inst); /* zeroed: a new instance */
                seed[i] = sd;
                nevo_env_reset(env, inst, nevo_vec_env_episode_seed(sd, i, 0), ref + (size_t)i * od);
                episode[i] = 1;
                dropped += ended[i];
                ended[i] = 0;
            }
            nevo_vec_env_reset_masked(v, sd, mask, obs);
            CHECK_MSG(memcmp(obs, ref, sizeof(float) * (size_t)n * od) == 0, "%s: reset before step %d", name, t);
            for (int i = 0; i < n; i++) CHECK(nevo_vec_env_episode(v, i) == episode[i]);
        }
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < ad; k++)
                act[(size_t)i * ad + k] = s->action_kind == NEVO_SPACE_DISCRETE ? (float)((5 * i + t * t) % s->n_actions)
                                                                                : 0.3f * (float)((i + t + (int)k) % 3 - 1);
        CHECK_MSG(nevo_vec_env_step(v, act, obs, rew, te, tr, fin, has, &err) == NEVO_OK, "%s", err.msg);
        for (int i = 0; i < n; i++) {
            void *inst = insts + (size_t)i * isz;
            float *o = ref + (size_t)i * od;
            if (mode == NEVO_AUTORESET_NEXT_STEP && ended[i]) {
                nevo_env_reset(env, inst, nevo_vec_env_episode_seed(seed[i], i, episode[i]++), o);
                ended[i] = 0;
                CHECK(rew[i] == 0.0f && !te[i] && !tr[i]);
                continue;
            }
            NevoStepResult r;
            nevo_env_step(env, inst, act + (size_t)i * ad, o, &r);
            CHECK(memcmp(&rew[i], &r.reward, sizeof(float)) == 0 && te[i] == r.terminated && tr[i] == r.truncated);
            int end = r.terminated || r.truncated;
            ends += end;
            if (mode == NEVO_AUTORESET_SAME_STEP) {
                CHECK(has[i] == (end != 0));
                if (end) {
                    CHECK(memcmp(fin + (size_t)i * od, o, sizeof(float) * od) == 0);
                    nevo_env_reset(env, inst, nevo_vec_env_episode_seed(seed[i], i, episode[i]++), o);
                }
            } else {
                ended[i] = end;
            }
        }
        CHECK_MSG(memcmp(obs, ref, sizeof(float) * (size_t)n * od) == 0, "%s: step %d differs", name, t);
    }
    CHECK(ends >= n);
    /* a next-step autoreset pending at a partial reset was dropped, and checked above */
    if (mode == NEVO_AUTORESET_NEXT_STEP) CHECK_MSG(dropped > 0, "%s: no pending autoreset met a reset", name);
    for (int i = 0; i < n; i++) nevo_env_instance_free(env, insts + (size_t)i * isz);
    nevo_env_free(env);
    nevo_vec_env_free(v);
    free(obs), free(fin), free(ref), free(act), free(rew), free(te), free(tr), free(has), free(mask), free(insts);
    free(episode), free(ended), free(seed);
}

TEST(vec_env_equals_single_instances) {
    /* MinAtar's sticky actions carry the last action over an autoreset, not a reset:
     * the actions before step 7 move the paddle in some of the instances reset there */
    NevoEnvOption sticky = {"sticky_prob", 0.5};
    check_vec_against_singles("CartPole-v1", NULL, 0, 40, 2, NEVO_AUTORESET_NEXT_STEP);
    check_vec_against_singles("minatar/breakout", NULL, 0, 70, 2, NEVO_AUTORESET_SAME_STEP);
    check_vec_against_singles("minatar/breakout", &sticky, 1, 12, 1, NEVO_AUTORESET_NEXT_STEP);
    check_vec_against_singles("mujoco/swimmer", NULL, 0, 3, 1, NEVO_AUTORESET_NEXT_STEP);
    check_vec_against_singles("Pendulum-v1", NULL, 0, 5, 1, NEVO_AUTORESET_SAME_STEP);
    check_vec_against_singles("CartPole-v1", NULL, 0, 6, 1, NEVO_AUTORESET_DISABLED);
}

/* Every env's vector step writes every value of every output, in every autoreset mode
 * (the package's copy=True steps into new, uninitialised arrays): outputs filled with
 * NaN and the byte 0xa5 before each reset and step hold none of them after. */
TEST(vec_env_writes_every_output) {
    for (int e = 0; e < nevo_env_count(); e++) {
        const char *name = nevo_env_class_at(e)->spec.name;
        for (int mode = NEVO_AUTORESET_NEXT_STEP; mode <= NEVO_AUTORESET_DISABLED; mode++) {
            NevoError err = {0};
            NevoVecEnv *v = NULL;
            const int n = 3;
            CHECK_MSG(nevo_vec_env_new(name, NULL, 0, n, 4, mode, 1, &v, &err) == NEVO_OK, "%s: %s", name, err.msg);
            if (!v) continue;
            const NevoEnvSpec *s = nevo_vec_env_spec(v);
            size_t od = (size_t)s->obs_dim, ad = (size_t)s->action_dim;
            float *obs = malloc(sizeof(float) * n * od), *fin = malloc(sizeof(float) * n * od);
            float *act = calloc((size_t)n * ad, sizeof(float)), rew[3];
            unsigned char te[3], tr[3], has[3];
            bool same = mode == NEVO_AUTORESET_SAME_STEP;
            for (size_t k = 0; k < n * od; k++) obs[k] = NAN;
            nevo_vec_env_reset(v, 9, obs);
            for (size_t k = 0; k < n * od; k++) CHECK_MSG(!isnan(obs[k]), "%s: reset left obs[%zu]", name, k);
            for (int t = 0; t < 10; t++) { /* episodes of 4 steps: ends at step 3, then autoresets or ended steps */
                for (size_t k = 0; k < n * od; k++) obs[k] = fin[k] = NAN;
                for (int i = 0; i < n; i++) rew[i] = NAN;
                memset(te, 0xa5, sizeof te), memset(tr, 0xa5, sizeof tr), memset(has, 0xa5, sizeof has);
                for (int i = 0; i < n; i++)
                    for (size_t k = 0; k < ad; k++)
                        act[(size_t)i * ad + k] = s->action_kind == NEVO_SPACE_DISCRETE ? (float)((i + t) % s->n_actions)
                                                                                        : 0.5f * (float)sin(i + t + k);
                CHECK_MSG(nevo_vec_env_step(v, act, obs, rew, (bool *)te, (bool *)tr, same ? fin : NULL,
                                            same ? (bool *)has : NULL, &err) == NEVO_OK, "%s: %s", name, err.msg);
                int bad = 0;
                for (size_t k = 0; k < n * od; k++) bad += isnan(obs[k]) || (same && isnan(fin[k]));
                for (int i = 0; i < n; i++) bad += isnan(rew[i]) || te[i] > 1 || tr[i] > 1 || (same && has[i] > 1);
                CHECK_MSG(bad == 0, "%s (autoreset mode %d), step %d: %d values not written", name, mode, t, bad);
            }
            nevo_vec_env_free(v);
            free(obs), free(fin), free(act);
        }
    }
}

TEST(vec_env_refuses_bad_input) {
    NevoError err = {0};
    NevoVecEnv *v = NULL;
    CHECK(nevo_vec_env_new("CartPol", NULL, 0, 2, 0, 0, 1, &v, &err) == NEVO_ERR_NOTFOUND && !v);
    CHECK(nevo_vec_env_new("CartPole-v1", NULL, 0, 0, 0, 0, 1, &v, &err) == NEVO_ERR_INVALID);
    CHECK(nevo_vec_env_new("CartPole-v1", NULL, 0, 2, 0, 3, 1, &v, &err) == NEVO_ERR_INVALID);
    CHECK(nevo_vec_env_new("CartPole-v1", NULL, 0, 2, 0, 0, 1, &v, &err) == NEVO_OK);
    float obs[8], rew[2], act[2] = {1, 2};
    bool te[2], tr[2];
    act[1] = 1;
    CHECK(nevo_vec_env_step(v, act, obs, rew, te, tr, NULL, NULL, &err) == NEVO_ERR_INVALID); /* no reset yet */
    CHECK_MSG(strstr(err.msg, "before the first reset") != NULL, "%s", err.msg);
    bool first[2] = {true, false}; /* a partial reset leaves env 1 never reset */
    nevo_vec_env_reset_masked(v, 1, first, obs);
    CHECK(nevo_vec_env_step(v, act, obs, rew, te, tr, NULL, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "before the first reset of env 1") != NULL, "%s", err.msg);
    act[1] = 2;
    nevo_vec_env_reset(v, 1, obs);
    CHECK(nevo_vec_env_step(v, act, obs, rew, te, tr, NULL, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "action 2 of env 1 is not one of its 2 actions") != NULL, "%s", err.msg);
    act[1] = 0.0f / 0.0f;
    CHECK(nevo_vec_env_step(v, act, obs, rew, te, tr, NULL, NULL, &err) == NEVO_ERR_INVALID);
    nevo_vec_env_free(v);
}

TEST(pop_eval_and_strategy) {
    NevoError err = {0};
    NevoPopEval *pe = NULL;
    CHECK(nevo_pop_eval_new("{\"env\": \"CartPole-v1\", \"policy\": {\"hiden\": [4]}}", 1, &pe, &err) != NEVO_OK);
    CHECK_MSG(strstr(err.msg, "policy.hiden") != NULL, "%s", err.msg);
    CHECK(nevo_pop_eval_new("{\"env\": \"CartPole-v1\", \"policy\": {\"hidden\": [4]}}", 2, &pe, &err) == NEVO_OK);
    size_t np = nevo_pop_eval_nparams(pe);
    float *params = calloc(3 * np, sizeof(float));
    for (size_t k = 0; k < 3 * np; k++) params[k] = 0.5f * (float)sin((double)k * 1.7);
    int net[6] = {0, 0, 1, 1, 2, 2};
    uint64_t seeds[6];
    for (int t = 0; t < 6; t++) seeds[t] = nevo_eval_episode_seed(9, t % 2);
    double ret[6];
    int len[6];
    bool term[6];
    float bc[6 * NEVO_ENV_MAX_BC];
    CHECK(nevo_pop_eval_run(pe, params, np, 3, net, seeds, 6, ret, len, term, bc, &err) == NEVO_OK);
    /* row 2 as nevo_eval_params evaluates it (nevo eval's episodes) */
    NevoEnv *env = NULL;
    NevoPolicy *pol = NULL;
    NevoPolicyConfig pc;
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    pc = cfg.policy;
    pc.n_hidden = 1;
    pc.hidden[0] = 4;
    CHECK(nevo_env_new("CartPole-v1", NULL, 0, &env, &err) == NEVO_OK);
    CHECK(nevo_policy_new(nevo_env_spec(env), &pc, 0, &pol, &err) == NEVO_OK);
    NevoPool *pool = nevo_pool_new(1);
    NevoEvalSummary sum;
    CHECK(nevo_eval_params(env, pol, params + 2 * np, pool, 2, 9, &sum, &err) == NEVO_OK);
    CHECK(sum.return_mean == (ret[4] + ret[5]) / 2 && sum.frames == len[4] + len[5]);
    net[0] = 3;
    CHECK(nevo_pop_eval_run(pe, params, np, 3, net, seeds, 6, ret, len, term, bc, &err) == NEVO_ERR_INVALID);
    float obs[4] = {0.01f, 0, 0.02f, 0}, a[1];
    nevo_pop_eval_act(pe, params, obs, 1, NULL, a);
    CHECK(a[0] == 0.0f || a[0] == 1.0f);
    nevo_pool_free(pool);
    nevo_policy_free(pol);
    nevo_env_free(env);
    nevo_pop_eval_free(pe);
    free(params);

    NevoStrategy *s = NULL;
    CHECK(nevo_strategy_new("{\"algo\": \"sgd\"}", 1, &s, &err) != NEVO_OK && !s);
    const char *ga = "{\"env\": \"CartPole-v1\", \"population\": 12, \"generations\": 2, \"policy\": {\"hidden\": [4]},"
                     " \"ga\": {\"truncation\": 3, \"validation_candidates\": 2, \"validation_episodes\": 2}}";
    CHECK_MSG(nevo_strategy_new(ga, 2, &s, &err) == NEVO_OK, "%s", err.msg);
    int gens = 0;
    while (nevo_strategy_generations_done(s) < 2) {
        int nn, nt;
        nevo_strategy_ask(s, &nn, &nt);
        CHECK(nn > 0 && nt > 0 && nt <= 64);
        float *rows = calloc((size_t)nn * nevo_strategy_nparams(s), sizeof(float));
        nevo_strategy_ask_params(s, rows, nevo_strategy_nparams(s));
        double r[64], stats[NEVO_STRATEGY_STATS];
        int l[64], done = 0;
        bool tm[64];
        CHECK(nevo_strategy_evaluate(s, r, l, tm, NULL, &err) == NEVO_OK);
        CHECK(nevo_strategy_tell(s, r, l, tm, NULL, stats, &done, &err) == NEVO_OK);
        if (done) CHECK(stats[0] == gens++);
        free(rows);
    }
    nevo_strategy_free(s);
}

/* dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte: n 4x4 images of two classes (the
 * brighter half, top or bottom), n / 2 in the test split */
static void write_tiny_idx(const char *dir, int n) {
    mkdir(dir, 0755);
    for (int split = 0; split < 2; split++) {
        int m = split ? n / 2 : n;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split ? "t10k" : "train");
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        uint8_t head[16] = {0, 0, 8, 3, 0, 0, (uint8_t)(m >> 8), (uint8_t)m, 0, 0, 0, 4, 0, 0, 0, 4};
        CHECK(fwrite(head, 1, 16, f) == 16);
        for (int i = 0; i < m; i++)
            for (int p = 0; p < 16; p++) CHECK(fputc((p < 8) == (i % 2) ? 200 - 3 * p : 40 + 7 * ((i * p) % 5), f) != EOF);
        CHECK(fclose(f) == 0);
        snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split ? "t10k" : "train");
        f = fopen(path, "wb");
        CHECK(f != NULL);
        uint8_t lhead[8] = {0, 0, 8, 1, 0, 0, (uint8_t)(m >> 8), (uint8_t)m};
        CHECK(fwrite(lhead, 1, 8, f) == 8);
        for (int i = 0; i < m; i++) CHECK(fputc(i % 2, f) != EOF);
        CHECK(fclose(f) == 0);
    }
}

/* ask/tell on a dataset: each task's network scored on its batch, the generation's
 * scores of the best policy; sgd (which trains by itself) refused */
TEST(strategy_on_a_dataset) {
    char dir[900], cfg[1200];
    snprintf(dir, sizeof dir, "%s/tiny", test_tmpdir());
    write_tiny_idx(dir, 60);
    NevoError err = {0};
    NevoStrategy *s = NULL;
    snprintf(cfg, sizeof cfg, "{\"dataset\": \"%s\", \"algo\": \"sgd\"}", dir);
    CHECK(nevo_strategy_new(cfg, 1, &s, &err) == NEVO_ERR_INVALID && !s);
    CHECK_MSG(strstr(err.msg, "trains by itself") != NULL, "%s", err.msg);
    snprintf(cfg, sizeof cfg, "{\"dataset\": \"%s\", \"algo\": \"es\", \"population\": 6, \"generations\": 2, "
             "\"data\": {\"fitness_batch\": 20}, \"policy\": {\"hidden\": [4]}}", dir);
    CHECK_MSG(nevo_strategy_new(cfg, 2, &s, &err) == NEVO_OK, "%s", err.msg);
    CHECK(nevo_strategy_spec(s)->obs_dim == 16 && nevo_strategy_spec(s)->n_actions == 2);
    long long frames = 0;
    for (int g = 0; g < 2;) { /* ES: the population's round, then its centre's */
        int nn, nt, done = 0;
        nevo_strategy_ask(s, &nn, &nt);
        CHECK(nt > 0 && nt <= 16);
        double r[16], stats[NEVO_STRATEGY_STATS];
        int l[16];
        bool tm[16];
        CHECK_MSG(nevo_strategy_evaluate(s, r, l, tm, NULL, &err) == NEVO_OK, "%s", err.msg);
        for (int t = 0; t < nt; t++) CHECK(r[t] < 0.0 && l[t] == 20 && tm[t]);
        frames += 20 * nt;
        CHECK_MSG(nevo_strategy_tell(s, r, NULL, NULL, NULL, stats, &done, &err) == NEVO_OK, "%s", err.msg);
        if (!done) continue;
        CHECK_MSG(stats[0] == g && stats[1] == (double)frames, "%g %g %lld", stats[0], stats[1], frames);
        CHECK(stats[10] > 0.0 && stats[11] > 0.0 && stats[12] >= 0.0 && stats[12] <= 1.0 && stats[13] == 0.0);
        frames = 0;
        g++;
    }
    nevo_strategy_free(s);
}
