/* algo vtrace and the actor-learner runtime (vtrace.h, seed.h): one trajectory's
 * gradient against finite differences of IMPALA's loss (targets held fixed, as the
 * learner holds them); the actors' action draws against their probabilities; every
 * actor of the async runtime gets its own rows of a batched inference (an env whose
 * observation names the action it rewards, a policy that plays it); sync mode
 * bit-identical across threads and a kill and --resume; CartPole learned; bad configs.
 * The runtime's test also runs under ThreadSanitizer. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nevo/grad.h"
#include "nevo/noise.h"
#include "nevo/rl.h"
#include "nevo/rng.h"
#include "nevo/seed.h"
#include "nevo/vtrace.h"

static NevoPolicy *small_policy(int obs_dim, int A, const char *hidden) {
    NevoEnvSpec spec;
    memset(&spec, 0, sizeof spec);
    spec.name = "test";
    spec.obs_rank = 1;
    spec.obs_shape[0] = obs_dim;
    spec.obs_dim = obs_dim;
    spec.action_kind = NEVO_SPACE_DISCRETE;
    spec.n_actions = A;
    spec.action_dim = 1;
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    char doc[256];
    snprintf(doc, sizeof doc, "{\"policy\": {\"hidden\": %s, \"activation\": \"tanh\", \"value_head\": true}}", hidden);
    NevoError err;
    CHECK_MSG(nevo_config_apply_json(&cfg, doc, "test", &err) == NEVO_OK, "%s", err.msg);
    NevoPolicy *p;
    CHECK_MSG(nevo_policy_new(&spec, &cfg.policy, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    CHECK_EQ_INT(p->n_out, A + 1);
    CHECK_EQ_INT(p->n_act, A);
    return p;
}

/* IMPALA's loss of theta on the trajectory with the targets vs, pg held fixed */
static double loss_at(const NevoPolicy *p, const float *theta, const float *obs, int T, const int *act,
                      const float *vs, const float *pg, const NevoRLConfig *rl) {
    int A = p->n_act, O = p->n_out;
    float out[8 * 8], logits[8 * 8], values[8], scratch[4096];
    int nets[8] = {0};
    CHECK(nevo_policy_scratch_floats(p, T) <= 4096);
    nevo_policy_forward(p, theta, 0, nets, obs, T, out, scratch);
    for (int t = 0; t < T; t++) {
        memcpy(logits + t * A, out + t * O, sizeof(float) * (size_t)A);
        values[t] = out[t * O + A];
    }
    return nevo_impala_loss(logits, values, act, vs, pg, T, A, (float)rl->baseline_cost, (float)rl->entropy_cost, NULL,
                            NULL);
}

TEST(vtrace_trajectory_gradient_matches_finite_differences) {
    enum { T = 5, D = 3, A = 3 };
    NevoPolicy *p = small_policy(D, A, "[6]");
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new(1 << 16, pool);
    float *theta = calloc(p->nparams, sizeof(float));
    nevo_policy_init_params(p, noise, 3, 0, 0, theta);
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    cfg.rl.rho_bar = 1.0, cfg.rl.c_bar = 1.0, cfg.rl.baseline_cost = 0.5, cfg.rl.entropy_cost = 0.01;
    NevoRng rng;
    nevo_rng_init(&rng, 9, NEVO_RNG_USER, 0, 0, 0);
    float obs[(T + 1) * D], mu[T], rew[T], disc[T];
    int act[T];
    for (int i = 0; i < (T + 1) * D; i++) obs[i] = (float)(2 * nevo_rng_uniform(&rng) - 1);
    for (int t = 0; t < T; t++) {
        act[t] = (int)nevo_rng_below(&rng, A);
        mu[t] = (float)log(0.2 + 0.5 * nevo_rng_uniform(&rng)); /* off-policy: rho != 1 */
        rew[t] = (float)(nevo_rng_uniform(&rng) - 0.3);
        disc[t] = t == 2 ? 0.0f : 0.9f; /* an episode ends inside the unroll */
    }
    NevoVTraceWork *w = nevo_vtrace_work_new(p, T, 2);
    float *grad = calloc(p->nparams, sizeof(float));
    double loss;
    CHECK(nevo_vtrace_batch(p, &cfg.rl, theta, T, 1, obs, act, mu, rew, disc, 1.0f, w, grad, &loss) == NEVO_OK);
    /* the targets at theta, as the learner fixes them */
    float out[(T + 1) * (A + 1)], scratch[4096], logits[T * A], logp[T * A], values[T + 1], lrho[T], vs[T], pg[T];
    int nets[T + 1] = {0};
    nevo_policy_forward(p, theta, 0, nets, obs, T + 1, out, scratch);
    for (int t = 0; t <= T; t++) {
        if (t < T) memcpy(logits + t * A, out + t * (A + 1), sizeof(float) * A);
        values[t] = out[t * (A + 1) + A];
    }
    nevo_log_softmax(logits, T, A, logp);
    for (int t = 0; t < T; t++) lrho[t] = logp[t * A + act[t]] - mu[t];
    nevo_vtrace(lrho, disc, rew, values, values + T, T, 1, 1.0f, 1.0f, vs, pg);
    double L0 = loss_at(p, theta, obs, T, act, vs, pg, &cfg.rl);
    CHECK_NEAR(L0, loss, 1e-4 * (1 + fabs(L0)));
    int checked = 0;
    for (size_t i = 0; i < p->nparams; i++) {
        float keep = theta[i], h = 1e-2f;
        theta[i] = keep + h;
        double up = loss_at(p, theta, obs, T, act, vs, pg, &cfg.rl);
        theta[i] = keep - h;
        double down = loss_at(p, theta, obs, T, act, vs, pg, &cfg.rl);
        theta[i] = keep;
        double fd = (up - down) / (2.0 * h);
        CHECK_MSG(fabs(fd - grad[i]) <= 2e-3 + 2e-2 * fabs(fd), "parameter %zu: backward %.6g, finite difference %.6g", i,
                  grad[i], fd);
        checked += fabs(fd) > 1e-3;
    }
    CHECK_MSG(checked > (int)p->nparams / 2, "only %d of %zu gradients were away from 0", checked, p->nparams);
    /* two trajectories in one call: their losses and gradients add up (the same
     * trajectory twice, scaled by a half: the one trajectory's) */
    float obs2[2 * (T + 1) * D], mu2[2 * T], rew2[2 * T], disc2[2 * T], *grad2 = calloc(p->nparams, sizeof(float));
    int act2[2 * T];
    for (int j = 0; j < 2; j++) {
        memcpy(obs2 + j * (T + 1) * D, obs, sizeof obs);
        memcpy(mu2 + j * T, mu, sizeof mu), memcpy(rew2 + j * T, rew, sizeof rew);
        memcpy(disc2 + j * T, disc, sizeof disc), memcpy(act2 + j * T, act, sizeof act);
    }
    double loss2;
    CHECK(nevo_vtrace_batch(p, &cfg.rl, theta, T, 2, obs2, act2, mu2, rew2, disc2, 0.5f, w, grad2, &loss2) == NEVO_OK);
    CHECK_NEAR(loss2, 2 * loss, 1e-9 * (1 + fabs(loss)));
    for (size_t i = 0; i < p->nparams; i++) CHECK_NEAR(grad2[i], grad[i], 1e-6 * (1 + fabs(grad[i])));
    free(grad2);
    nevo_vtrace_work_free(w);
    free(grad);
    free(theta);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
}

TEST(vtrace_sample_frequencies_match_the_softmax) {
    const float logits[4] = {0.0f, 1.0f, -1.0f, 2.0f};
    float lp[4];
    nevo_log_softmax(logits, 1, 4, lp);
    enum { N = 40000 };
    int count[4] = {0};
    for (int s = 0; s < N; s++) {
        float logp;
        int a = nevo_vtrace_sample(logits, 4, 11, (uint32_t)(s % 7), (uint64_t)s, &logp);
        CHECK(a >= 0 && a < 4);
        CHECK(logp == lp[a]);
        count[a]++;
    }
    for (int a = 0; a < 4; a++) {
        double pr = exp((double)lp[a]), sd = sqrt(N * pr * (1 - pr));
        CHECK_MSG(fabs(count[a] - N * pr) < 4 * sd, "action %d drawn %d times, expected %.0f +- %.0f", a, count[a],
                  N * pr, sd);
    }
    /* a draw is named by (seed, env, step): the same name, the same action */
    float l1, l2;
    CHECK_EQ_INT(nevo_vtrace_sample(logits, 4, 5, 3, 99, &l1), nevo_vtrace_sample(logits, 4, 5, 3, 99, &l2));
}

/* ---- the async runtime: every actor its own rows ------------------------------------- */

/* An env whose observation is one-hot of the action it rewards (fixed per episode,
 * from the seed), 7 steps an episode. */
typedef struct IdState {
    int id, steps;
} IdState;

static void id_obs(const IdState *s, float *obs) {
    for (int k = 0; k < 4; k++) obs[k] = k == s->id ? 1.0f : 0.0f;
}

static void id_reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    IdState *s = state;
    s->id = (int)(seed % 4);
    s->steps = 0;
    id_obs(s, obs);
}

static void id_step(const NevoEnv *env, void *state, const float *action, float *obs, NevoStepResult *out) {
    IdState *s = state;
    out->reward = (int)action[0] == s->id ? 1.0f : 0.0f;
    out->terminated = ++s->steps == 7;
    id_obs(s, obs);
}

static const NevoEnvClass id_class = {
    .spec = {.name = "Id-v0", .summary = "rewards the action its observation names", .obs_rank = 1,
             .obs_shape = {4}, .obs_dim = 4, .action_kind = NEVO_SPACE_DISCRETE, .n_actions = 4, .action_dim = 1},
    .state_size = sizeof(IdState),
    .reset = id_reset,
    .step = id_step,
};

/* the learner's counts (its thread) and the episodes' (actor threads, under the
 * runtime's lock): apart, as they run at the same time */
typedef struct Check {
    int T, trajectories, wrong, rewarded;
    long long episodes;
    int wrong_episodes;
} Check;

static NevoStatus check_learn(void *ctx, const NevoTrajectory *batch, int n, float *theta, NevoError *err) {
    Check *c = ctx;
    for (int b = 0; b < n; b++) {
        const NevoTrajectory *tr = &batch[b];
        for (int t = 0; t < c->T; t++) {
            int want = 0;
            for (int k = 1; k < 4; k++)
                if (tr->obs[t * 4 + k] > tr->obs[t * 4 + want]) want = k;
            c->wrong += tr->act[t] != want;
            c->rewarded += tr->rew[t] == 1.0f;
        }
        c->trajectories++;
    }
    return NEVO_OK;
}

static void check_episode(void *ctx, double ret, int length) {
    Check *c = ctx;
    c->episodes++;
    c->wrong_episodes += ret != 7.0 || length != 7;
}

TEST(seed_every_actor_gets_its_own_rows) {
    NevoEnv *env;
    NevoError err;
    CHECK(nevo_env_new_from_class(&id_class, NULL, 0, &env, &err) == NEVO_OK);
    NevoPolicy *p = small_policy(4, 4, "[]");
    /* logits = 40 x obs: the action its observation names, with probability 1 - 3e-17 */
    float *theta = calloc(p->nparams, sizeof(float));
    for (int k = 0; k < 4; k++) theta[k * 5 + k] = 40.0f; /* W (4, 5) row-major, then b */
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    cfg.rl.envs = 13, cfg.rl.actors = 4, cfg.rl.unroll = 5, cfg.rl.batch = 6, cfg.rl.queue = 12;
    cfg.rl.batch_wait_us = 100;
    Check c = {cfg.rl.unroll, 0, 0, 0, 0, 0};
    NevoBackend *cpu;
    CHECK(nevo_backend_new("cpu", &cpu, &err) == NEVO_OK);
    NevoSeed *s;
    CHECK_MSG(nevo_seed_new(env, p, cpu, &cfg.rl, 5, theta, NULL, check_learn, check_episode, &c, &s, &err) == NEVO_OK,
              "%s", err.msg);
    CHECK(nevo_seed_run(s, 20, 0, &err) == NEVO_OK);
    CHECK(nevo_seed_run(s, 10, 0, &err) == NEVO_OK); /* stopped and started again */
    NevoSeedStats st;
    nevo_seed_stats(s, &st);
    CHECK_EQ_INT(c.trajectories, 30 * 6);
    CHECK_MSG(c.wrong == 0 && c.wrong_episodes == 0, "%d actions and %d episodes were not their own env's", c.wrong,
              c.wrong_episodes);
    CHECK_EQ_INT(c.rewarded, 30 * 6 * 5);
    CHECK(c.episodes > 0 && st.episodes == c.episodes);
    CHECK_EQ_INT(st.updates, 30);
    CHECK_MSG(st.mean_batch >= 1 && st.mean_batch <= 13, "mean batch %.2f", st.mean_batch);
    CHECK(st.frames >= 30 * 6 * 5 && st.max_lag >= 0);
    /* the actors and server alone, to a frame count */
    NevoSeed *f;
    CHECK(nevo_seed_new(env, p, cpu, &cfg.rl, 5, theta, NULL, NULL, NULL, NULL, &f, &err) == NEVO_OK);
    CHECK(nevo_seed_run(f, 0, 5000, &err) == NEVO_OK);
    nevo_seed_stats(f, &st);
    CHECK_MSG(st.frames >= 5000 && st.updates == 0, "%lld frames, %lld updates", st.frames, st.updates);
    nevo_seed_free(f);
    nevo_seed_free(s);
    nevo_backend_free(cpu);
    free(theta);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* ---- a crafted state -------------------------------------------------------------- */

#ifndef NEVO_TSAN_ONLY
#include "nevo/algo.h"

typedef struct VtParts {
    NevoConfig cfg;
    NevoEnv *env;
    NevoPolicy *p;
    NevoPool *pool;
    NevoNoise *noise;
    NevoAlgo *algo;
    int own; /* pool and noise made here */
} VtParts;

/* the parts of a run (pool and noise table given, or made where NULL) */
static void vt_parts(VtParts *v, const char *env, NevoPool *pool, NevoNoise *noise) {
    char doc[1024];
    snprintf(doc, sizeof doc,
             "{\"env\": \"%s\", \"algo\": \"vtrace\", \"seed\": 3, \"policy\": {\"conv_filters\": [4], "
             "\"hidden\": [8], \"activation\": \"relu\", \"value_head\": true}, \"rl\": {\"envs\": 3, "
             "\"unroll\": 4, \"steps_per_generation\": 2}}", env);
    NevoError err;
    nevo_config_defaults(&v->cfg);
    CHECK_MSG(nevo_config_apply_json(&v->cfg, doc, "test", &err) == NEVO_OK, "%s", err.msg);
    CHECK(nevo_env_new(v->cfg.env, NULL, 0, &v->env, &err) == NEVO_OK);
    CHECK(nevo_policy_new(nevo_env_spec(v->env), &v->cfg.policy, 0, &v->p, &err) == NEVO_OK);
    v->own = !pool;
    v->pool = pool ? pool : nevo_pool_new(1);
    v->noise = noise ? noise : nevo_noise_new(nevo_algo_noise_floats(&v->cfg, v->p->nparams), v->pool);
    CHECK_MSG(nevo_algo_new(&v->cfg, v->env, v->p, v->noise, v->pool, &v->algo, &err) == NEVO_OK, "%s", err.msg);
}

static void vt_parts_free(VtParts *v) {
    nevo_algo_free(v->algo);
    if (v->own) nevo_noise_free(v->noise), nevo_pool_free(v->pool);
    nevo_policy_free(v->p);
    nevo_env_free(v->env);
}

/* A sync run's state with bytes changed at random (a crafted checkpoint whose checksum
 * was made to fit): loading it fails with a message or succeeds, and a generation after
 * a successful load runs; it never crashes (the sanitizer builds run this too). Every
 * MinAtar game's instance bytes, counts and random stream are in the state. */
TEST(vtrace_crafted_state_is_refused_or_runs) {
    static const char *const games[] = {"minatar/seaquest", "minatar/space_invaders", "minatar/breakout"};
    for (int g = 0; g < 3; g++) {
        VtParts v;
        vt_parts(&v, games[g], NULL, NULL);
        NevoGenStats gs;
        NevoError err;
        CHECK(nevo_algo_train(v.algo, &gs, &err) == NEVO_OK);
        NevoBuf good = {0};
        nevo_algo_save(v.algo, &good);
        NevoRng rng;
        nevo_rng_init(&rng, 77, NEVO_RNG_USER, (uint32_t)g, 0, 0);
        int loaded = 0, refused = 0;
        uint8_t *bad = malloc(good.len);
        for (int trial = 0; trial < 60; trial++) {
            memcpy(bad, good.data, good.len);
            int flips = 1 + (int)nevo_rng_below(&rng, 8);
            for (int f = 0; f < flips; f++) {
                size_t at = good.len / 4 + nevo_rng_below(&rng, (uint32_t)(good.len - good.len / 4)); /* the envs' part */
                bad[at] = (uint8_t)(trial % 3 == 0 ? 0xFF : nevo_rng_below(&rng, 256));
            }
            VtParts w;
            vt_parts(&w, games[g], v.pool, v.noise);
            NevoReader r = nevo_reader(bad, good.len);
            if (nevo_algo_load(w.algo, &r, &err) == NEVO_OK && nevo_reader_ok(&r, true)) {
                loaded++;
                NevoStatus st = nevo_algo_train(w.algo, &gs, &err); /* runs, or says why not */
                CHECK_MSG(st == NEVO_OK || err.msg[0], "%s: a generation failed without a message", games[g]);
            } else {
                refused++;
                CHECK_MSG(err.msg[0] != '\0', "%s: a state refused without a message", games[g]);
            }
            vt_parts_free(&w);
        }
        free(bad);
        nevo_buf_free(&good);
        vt_parts_free(&v);
        CHECK_MSG(loaded > 0 && refused > 0, "%s: %d loaded, %d refused: the test exercised one side only", games[g],
                  loaded, refused);
    }
}
#endif

/* ---- the algorithm through the command --------------------------------------------- */

#ifndef NEVO_TSAN_ONLY
static int nevo(char *out, size_t n, const char *args) {
    return test_run(out, n, "cd %s && %s/%s %s", test_tmpdir(), getenv("PWD"), test_nevo_bin(), args);
}

TEST(vtrace_sync_bit_identical_across_threads_and_resume) {
    char args[1024];
    static const char *const envs[] = {"CartPole-v1", "minatar/breakout"};
    for (int k = 0; k < 2; k++) {
        const char *net = k ? "'policy.conv_filters=[8]' 'policy.hidden=[32]' policy.activation=relu" : "";
        /* killed after the generation that reaches 5,000 frames (the checkpoint is of
         * generation 3) */
        snprintf(args, sizeof args,
                 "%s/configs/cartpole_vtrace.json env=%s %s generations=8 rl.envs=6 rl.unroll=10 "
                 "rl.steps_per_generation=20 checkpoint_every=3 eval_episodes=2 max_episode_steps=300 --quiet",
                 getenv("PWD"), envs[k], net);
        test_runs_same_across_threads_and_resume(args, 5000, k ? "breakout" : "cartpole");
    }
}

/* The committed config: CartPole solved (greedy evaluation >= 475 over 100 episodes). */
TEST(vtrace_learns_cartpole) {
    const char *cflags = getenv("NEVO_TEST_CFLAGS");
    if (cflags && strstr(cflags, "-fsanitize")) { /* 3.2M frames: minutes under a sanitizer */
        printf("     skipped: sanitizer build (the plain build runs it; the sync test covers the same paths)\n");
        return;
    }
    char out[8192], args[1024];
    snprintf(args, sizeof args, "train %s/configs/cartpole_vtrace.json --out cp --quiet", getenv("PWD"));
    CHECK_MSG(nevo(out, sizeof out, args) == 0, "%s", out);
    const char *m = strstr(out, "\"eval_return_mean\": ");
    CHECK_MSG(m && atof(m + 20) >= 475.0, "%s", out);
    printf("     CartPole: %.*s\n", 80, m);
}

TEST(vtrace_bad_configs_exit_2) {
    char out[8192], args[1024];
    static const char *const cases[][2] = {
        {"policy.value_head=false", "set policy.value_head=true"},
        {"env=Pendulum-v1", "continuous actions"},
        {"rl.batch=3", "sync mode trains on every env's trajectory"},
        {"rl.mode=async rl.batch=100 rl.queue=10", "exceeds rl.queue"},
        {"policy.lstm=8", "feed-forward"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "train %s/configs/cartpole_vtrace.json %s --out bad%zu --quiet",
                 getenv("PWD"), cases[i][0], i);
        CHECK_EQ_INT(nevo(out, sizeof out, args), 2);
        CHECK_MSG(strstr(out, cases[i][1]) != NULL, "%s: %s", cases[i][0], out);
    }
}
#endif
