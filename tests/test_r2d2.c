/* algo r2d2 (r2d2.h): a batch of replayed sequences' gradient against finite differences
 * of R2D2's loss computed step by step (targets and the burned-in state held fixed, as
 * the learner holds them), for a dueling and a plain head; priorities; the dueling
 * combination and the epsilon-greedy draw by hand; sync runs bit-identical across
 * threads and a kill and --resume; a crafted state refused or run; CartPole learned; bad
 * configs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run_core.h"
#include "harness.h"
#include "nevo/algo.h"
#include "nevo/backend.h"
#include "nevo/eval.h"
#include "nevo/noise.h"
#include "nevo/r2d2.h"
#include "nevo/rl.h"
#include "nevo/rng.h"
#include "nevo/seed.h"

static NevoPolicy *rec_policy(int obs_dim, int A, const char *hidden, int lstm, int dueling) {
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
    snprintf(doc, sizeof doc,
             "{\"policy\": {\"hidden\": %s, \"lstm\": %d, \"activation\": \"tanh\", \"value_head\": %s}}", hidden,
             lstm, dueling ? "true" : "false");
    NevoError err;
    CHECK_MSG(nevo_config_apply_json(&cfg, doc, "test", &err) == NEVO_OK, "%s", err.msg);
    NevoPolicy *p;
    CHECK_MSG(nevo_policy_new(&spec, &cfg.policy, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    CHECK_EQ_INT(p->n_out, A + (dueling ? 1 : 0));
    return p;
}

TEST(r2d2_dueling_q_and_epsilon_greedy_by_hand) {
    NevoPolicy *p = rec_policy(2, 3, "[]", 2, 1);
    float out[4] = {1, 2, 3, 0.5f}, q[3];
    nevo_r2d2_q(p, out, 1, q); /* mean advantage 2: Q = 0.5 + (A - 2) */
    CHECK(q[0] == -0.5f && q[1] == 0.5f && q[2] == 1.5f);
    nevo_policy_free(p);
    float qs[4] = {0.1f, 0.7f, 0.7f, -1.0f};
    int greedy = 0, counts[4] = {0};
    for (int s = 0; s < 20000; s++) {
        CHECK_EQ_INT(nevo_r2d2_act(qs, 4, 0.0, 5, 2, (uint64_t)s), 1); /* eps 0: the first maximum */
        int a = nevo_r2d2_act(qs, 4, 0.4, 5, 2, (uint64_t)s);
        counts[a]++;
        greedy += a == 1;
    }
    /* eps 0.4: action 1 with 0.6 + 0.1, the others 0.1 each (4 standard deviations) */
    CHECK_MSG(fabs(greedy / 20000.0 - 0.7) < 4 * sqrt(0.7 * 0.3 / 20000), "greedy %d", greedy);
    for (int a = 0; a < 4; a++)
        if (a != 1) CHECK_MSG(fabs(counts[a] / 20000.0 - 0.1) < 4 * sqrt(0.09 / 20000), "action %d: %d", a, counts[a]);
}

/* The sequences of a test batch. */
enum { K = 2, BI = 2, T = 4, M = BI + T, D = 3, A = 3 };
typedef struct Batch {
    float obs[K * (M + 1) * D], rew[K * M], disc[K * M], weight[K], *state0;
    uint8_t reset[K * (M + 1)];
    int act[K * M];
} Batch;

/* Burn-in and the T + 1 steps of sequence k, step by step through
 * nevo_policy_forward_state (the acting path, not the learner's tapes): the outputs of
 * steps BI..M into out (T + 1, O). The burn-in's final state goes into burned, or, where
 * burned_in is given, the burn-in is skipped and the steps start from it. */
static void run_steps(const NevoPolicy *p, const float *theta, const Batch *b, int k, const float *burned_in,
                      float *burned, float *out) {
    size_t S = nevo_policy_state_floats(p);
    float state[64], o[8], scratch[8192];
    int net = 0;
    CHECK(S <= 64 && nevo_policy_scratch_floats(p, 1) <= 8192);
    memcpy(state, burned_in ? burned_in : b->state0 + k * S, sizeof(float) * S);
    for (int t = burned_in ? BI : 0; t <= M; t++) {
        if (t == BI && burned) memcpy(burned, state, sizeof(float) * S);
        if (b->reset[k * (M + 1) + t]) memset(state, 0, sizeof(float) * S);
        nevo_policy_forward_state(p, theta, p->nparams, &net, b->obs + (k * (M + 1) + t) * D, 1, state, o, scratch);
        if (t >= BI) memcpy(out + (t - BI) * p->n_out, o, sizeof(float) * (size_t)p->n_out);
    }
}

/* R2D2's loss at theta with the targets y (T, K) and each sequence's burned-in state
 * held fixed */
static double loss_at(const NevoPolicy *p, const float *theta, const Batch *b, const float *burned, const float *y) {
    size_t S = nevo_policy_state_floats(p);
    double L = 0.0;
    for (int k = 0; k < K; k++) {
        float out[(T + 1) * 8], q[(T + 1) * A];
        run_steps(p, theta, b, k, burned + k * S, NULL, out);
        nevo_r2d2_q(p, out, T + 1, q);
        for (int t = 0; t < T; t++) {
            double d = y[t * K + k] - q[t * A + b->act[k * M + BI + t]];
            L += b->weight[k] * 0.5 * d * d;
        }
    }
    return L;
}

static void check_gradient(const char *hidden, int dueling) {
    NevoPolicy *p = rec_policy(D, A, hidden, 4, dueling);
    size_t S = nevo_policy_state_floats(p), np = p->nparams;
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new(1 << 16, pool);
    float *theta = calloc(np, sizeof(float)), *target = calloc(np, sizeof(float));
    nevo_policy_init_params(p, noise, 3, 0, 0, theta);
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    for (size_t i = 0; i < np; i++) target[i] = theta[i] + 0.1f * (float)(nevo_rng_uniform(&rng) - 0.5);
    Batch b;
    b.state0 = calloc((size_t)K * S, sizeof(float));
    for (size_t i = 0; i < (size_t)K * S; i++) b.state0[i] = (float)(nevo_rng_uniform(&rng) - 0.5);
    for (int i = 0; i < K * (M + 1) * D; i++) b.obs[i] = (float)(2 * nevo_rng_uniform(&rng) - 1);
    memset(b.reset, 0, sizeof b.reset);
    for (int i = 0; i < K * M; i++) {
        b.act[i] = (int)nevo_rng_below(&rng, A);
        b.rew[i] = (float)(2 * nevo_rng_uniform(&rng) - 0.5);
        b.disc[i] = 0.95f;
    }
    /* sequence 1: an episode ends at step 4 (in the trained part), the next begins at 5;
     * sequence 0: one begins inside the burn-in */
    b.disc[1 * M + 4] = 0.0f, b.reset[1 * (M + 1) + 5] = 1;
    b.disc[0 * M + 0] = 0.0f, b.reset[0 * (M + 1) + 1] = 1;
    b.weight[0] = 1.0f, b.weight[1] = 0.6f;
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    cfg.rl.n_step = 2, cfg.rl.rescale_eps = 1e-3, cfg.rl.priority_eta = 0.9, cfg.rl.burn_in = BI, cfg.rl.unroll = T;
    NevoR2D2Work *w = nevo_r2d2_work_new(p, BI, T, 3);
    float *grad = calloc(np, sizeof(float)), prio[K];
    double loss;
    CHECK(nevo_r2d2_batch(p, &cfg.rl, theta, target, K, b.obs, b.reset, b.state0, b.act, b.rew, b.disc, b.weight,
                          1.0f, w, grad, &loss, prio) == NEVO_OK);
    /* the targets and burned-in states at theta, step by step */
    float burned[K * 64], qo[(T + 1) * K * A], qt[(T + 1) * K * A], rw[T * K], ds[T * K], y[T * K];
    for (int k = 0; k < K; k++) {
        float out[(T + 1) * 8], q[(T + 1) * A];
        run_steps(p, theta, &b, k, NULL, burned + k * S, out);
        nevo_r2d2_q(p, out, T + 1, q);
        for (int t = 0; t <= T; t++) memcpy(qo + (t * K + k) * A, q + t * A, sizeof(float) * A);
        run_steps(p, target, &b, k, NULL, NULL, out);
        nevo_r2d2_q(p, out, T + 1, q);
        for (int t = 0; t <= T; t++) memcpy(qt + (t * K + k) * A, q + t * A, sizeof(float) * A);
        for (int t = 0; t < T; t++) rw[t * K + k] = b.rew[k * M + BI + t], ds[t * K + k] = b.disc[k * M + BI + t];
    }
    nevo_r2d2_targets(rw, ds, qo, qt, T, K, A, 2, 1e-3, y);
    double L0 = loss_at(p, theta, &b, burned, y);
    CHECK_MSG(fabs(L0 - loss) <= 1e-5 * (1 + fabs(L0)), "loss %.9g, step by step %.9g", loss, L0);
    for (int k = 0; k < K; k++) { /* priorities: 0.9 max |delta| + 0.1 mean |delta| */
        double mx = 0, sum = 0;
        for (int t = 0; t < T; t++) {
            double d = fabs(y[t * K + k] - qo[(t * K + k) * A + b.act[k * M + BI + t]]);
            mx = d > mx ? d : mx, sum += d;
        }
        CHECK_NEAR(prio[k], 0.9 * mx + 0.1 * sum / T, 1e-5 * (1 + mx));
    }
    int checked = 0;
    for (size_t i = 0; i < np; i++) {
        float keep = theta[i], h = 1e-2f;
        theta[i] = keep + h;
        double up = loss_at(p, theta, &b, burned, y);
        theta[i] = keep - h;
        double down = loss_at(p, theta, &b, burned, y);
        theta[i] = keep;
        double fd = (up - down) / (2.0 * h);
        CHECK_MSG(fabs(fd - grad[i]) <= 2e-3 + 2e-2 * fabs(fd), "%s: parameter %zu: backward %.6g, finite difference "
                  "%.6g", hidden, i, grad[i], fd);
        checked += fabs(fd) > 1e-3;
    }
    CHECK_MSG(checked > (int)np / 2, "only %d of %zu gradients were away from 0", checked, np);
    /* the two sequences one at a time: their losses and gradients add up */
    float *g1 = calloc(np, sizeof(float));
    double sum = 0.0;
    for (int k = 0; k < K; k++) {
        double l;
        float pk;
        CHECK(nevo_r2d2_batch(p, &cfg.rl, theta, target, 1, b.obs + k * (M + 1) * D, b.reset + k * (M + 1),
                              b.state0 + k * S, b.act + k * M, b.rew + k * M, b.disc + k * M, b.weight + k, 1.0f, w,
                              g1, &l, &pk) == NEVO_OK);
        CHECK(pk == prio[k]);
        sum += l;
    }
    CHECK_NEAR(sum, loss, 1e-9 * (1 + fabs(loss)));
    free(g1);
    nevo_r2d2_work_free(w);
    free(grad);
    free(b.state0);
    free(theta);
    free(target);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
}

TEST(r2d2_batch_gradient_matches_finite_differences) {
    check_gradient("[5]", 1); /* dense layer before the LSTM, dueling head */
    check_gradient("[]", 0);  /* the LSTM reads the observations, plain Q head */
}

/* ---- the async runtime with a recurrent network ---------------------------------------- */

/* What the learner checks of every trajectory, replaying it step by step from its
 * recorded states with the parameters the server holds (the learner never changes
 * them): each recorded state is the one the previous step left (zeroed where an episode
 * began), each action the epsilon-greedy draw on that step's Q-values from the env's
 * own stream, and each env's trajectories continue one another. */
typedef struct RecCheck {
    const NevoPolicy *p;
    const float *theta;
    const NevoRLConfig *rl;
    int T, E, trajectories, steps, wrong_state, wrong_act, wrong_start, resets;
    long long next_start[8];
} RecCheck;

static NevoStatus rec_learn(void *ctx, const NevoTrajectory *batch, int n, float *theta, NevoError *err) {
    RecCheck *c = ctx;
    const NevoPolicy *p = c->p;
    size_t S = nevo_policy_state_floats(p);
    float st[64], out[8], q[8], scratch[8192];
    int net = 0;
    for (int b = 0; b < n; b++) {
        const NevoTrajectory *tr = &batch[b];
        c->wrong_start += tr->start != c->next_start[tr->env];
        c->next_start[tr->env] = tr->start + c->T;
        for (int t = 0; t < c->T; t++) {
            if (t > 0 && !tr->reset[t])
                c->wrong_state += memcmp(st, tr->state + (size_t)t * S, sizeof(float) * S) != 0;
            memcpy(st, tr->state + (size_t)t * S, sizeof(float) * S);
            if (tr->reset[t]) memset(st, 0, sizeof(float) * S), c->resets++;
            nevo_policy_forward_state(p, c->theta, p->nparams, &net, tr->obs + (size_t)t * p->obs_dim, 1, st, out,
                                      scratch);
            nevo_r2d2_q(p, out, 1, q);
            double eps = nevo_apex_epsilon(tr->env, c->E, c->rl->epsilon, c->rl->epsilon_alpha);
            c->wrong_act += tr->act[t] != nevo_r2d2_act(q, p->n_act, eps, 5, (uint32_t)tr->env,
                                                         (uint64_t)(tr->start + t));
            c->steps++;
        }
        c->trajectories++;
    }
    (void)theta, (void)err;
    return NEVO_OK;
}

TEST(r2d2_async_runtime_keeps_each_envs_recurrent_state) {
    NevoError err;
    NevoEnv *env;
    CHECK(nevo_env_new("CartPole-v1", NULL, 0, &env, &err) == NEVO_OK);
    NevoPolicy *p = rec_policy(4, 2, "[6]", 5, 1);
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    cfg.rl.envs = 6, cfg.rl.actors = 3, cfg.rl.queue = 5, cfg.rl.epsilon = 0.5;
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new(1 << 16, pool);
    float *theta = calloc(p->nparams, sizeof(float));
    nevo_policy_init_params(p, noise, 3, 0, 0, theta);
    NevoBackend *cpu;
    CHECK(nevo_backend_new("cpu", &cpu, &err) == NEVO_OK);
    RecCheck c = {.p = p, .theta = theta, .rl = &cfg.rl, .T = 7, .E = 6};
    NevoSeedOptions so = {NEVO_SEED_EPSILON_GREEDY, 7, 1, 5};
    NevoSeed *s;
    CHECK_MSG(nevo_seed_new(env, p, cpu, &cfg.rl, 5, theta, &so, rec_learn, NULL, &c, &s, &err) == NEVO_OK, "%s",
              err.msg);
    CHECK(nevo_seed_run(s, 40, 0, &err) == NEVO_OK);
    CHECK_MSG(c.trajectories >= 40 && c.wrong_state == 0 && c.wrong_act == 0 && c.wrong_start == 0 && c.resets > 6,
              "%d trajectories, %d steps: %d states, %d actions, %d starts wrong; %d resets", c.trajectories, c.steps,
              c.wrong_state, c.wrong_act, c.wrong_start, c.resets);
    nevo_seed_free(s);
    nevo_backend_free(cpu);
    free(theta);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    nevo_env_free(env);
}

#ifndef NEVO_TSAN_ONLY
/* ---- the algorithm through the command --------------------------------------------- */

static int nevo(char *out, size_t n, const char *args) {
    return test_run(out, n, "cd %s && %s/%s %s", test_tmpdir(), getenv("PWD"), test_nevo_bin(), args);
}

TEST(r2d2_sync_bit_identical_across_threads_and_resume) {
    char args[1024];
    static const char *const envs[] = {"CartPole-v1", "minatar/breakout"};
    for (int k = 0; k < 2; k++) {
        const char *net = k ? "'policy.conv_filters=[4]' 'policy.hidden=[16]' policy.lstm=16" : "";
        /* killed after the generation that reaches 1,000 frames (the checkpoint is of
         * generation 3, the replay buffer full and wrapped) */
        snprintf(args, sizeof args,
                 "%s/configs/cartpole_r2d2.json env=%s %s generations=8 rl.envs=6 rl.unroll=6 rl.burn_in=3 "
                 "rl.period=3 rl.batch=12 rl.replay=40 rl.replay_start=12 rl.target_period=7 "
                 "rl.steps_per_generation=10 rl.validation_every=2 rl.validation_episodes=2 checkpoint_every=3 "
                 "eval_episodes=2 max_episode_steps=300 --quiet",
                 getenv("PWD"), envs[k], net);
        test_runs_same_across_threads_and_resume(args, 1000, k ? "breakout" : "cartpole");
    }
}

/* Async mode runs through the command and resumes from its checkpoint (parameters,
 * target, optimiser, replay; the envs begin new episodes); a sync run's checkpoint does
 * not resume as async. */
TEST(r2d2_async_runs_and_resumes) {
    char out[8192], args[1024];
    const char *common = "rl.mode=async rl.envs=8 rl.actors=2 rl.queue=16 rl.replay=60 rl.replay_start=10 "
                         "rl.batch=8 rl.steps_per_generation=20 checkpoint_every=1 eval_episodes=2 --quiet";
    snprintf(args, sizeof args, "train %s/configs/cartpole_r2d2.json generations=6 %s --out as --kill-after-frames 1",
             getenv("PWD"), common);
    CHECK_EQ_INT(nevo(out, sizeof out, args), 128 + 9);
    CHECK_MSG(nevo(out, sizeof out, "train --resume as --quiet") == 0, "%s", out);
    CHECK_MSG(strstr(out, "\"generations\": 6") && strstr(out, "\"eval_return_mean\""), "%s", out);
    /* updates_per_s counts updates, not learner calls: zero in a generation whose calls
     * all came before rl.replay_start (a fresh run's first: 20 calls of 8 envs' steps
     * leave fewer than 60 sequences), above zero where the count moved */
    snprintf(args, sizeof args, "train %s/configs/cartpole_r2d2.json generations=3 %s rl.replay=200 "
             "rl.replay_start=150 --out late", getenv("PWD"), common);
    CHECK_MSG(nevo(out, sizeof out, args) == 0, "%s", out);
    char path[512], line[4096];
    snprintf(path, sizeof path, "%s/late/metrics.jsonl", test_tmpdir());
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "%s", path);
    long long prev = 0;
    int lines = 0, idle = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *u = strstr(line, "\"updates\": "), *r = strstr(line, "\"updates_per_s\": ");
        CHECK_MSG(u && r, "%s", line);
        if (!u || !r) break;
        long long now = atoll(u + 11);
        double rate = atof(r + 17);
        CHECK_MSG((now == prev) == (rate == 0.0), "generation %d: updates %lld after %lld, %g a second", lines, now,
                  prev, rate);
        idle += now == prev;
        prev = now;
        lines++;
    }
    if (f) fclose(f);
    CHECK_EQ_INT(lines, 3);
    CHECK_MSG(idle >= 1 && prev > 0, "%d idle generations, %lld updates", idle, prev);
    snprintf(args, sizeof args, "train %s/configs/cartpole_r2d2.json generations=2 checkpoint_every=1 --out sy --quiet",
             getenv("PWD"));
    CHECK_MSG(nevo(out, sizeof out, args) == 0, "%s", out);
    CHECK_EQ_INT(nevo(out, sizeof out, "train --resume sy rl.mode=async generations=3 --quiet"), 2);
}

/* optim.lr_decay linear: each generation's rate is lr (1 - the fraction of the run
 * done), by generations, or by frames against max_frames (sync: 3 learner steps of 6
 * envs x 3 steps = 54 frames a generation); it carries across a resume. */
static void check_lrs(const char *dir, const double *want, int n) {
    char path[512], line[2048];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", test_tmpdir(), dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "%s", path);
    int i = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "\"lr\": ");
        CHECK_MSG(m && i < n, "%s: line %d: %s", dir, i, line);
        if (m && i < n) CHECK_MSG(fabs(atof(m + 6) - want[i]) <= 1e-12, "%s: generation %d: lr %s", dir, i, m + 6);
        i++;
    }
    if (f) fclose(f);
    CHECK_EQ_INT(i, n);
}

TEST(r2d2_lr_decay_linear_by_generations_and_by_frames) {
    char out[8192], args[1024];
    const char *common = "optim.lr=0.001 optim.lr_decay=linear rl.envs=6 rl.unroll=4 rl.burn_in=2 rl.period=3 "
                         "rl.batch=4 rl.replay=20 rl.replay_start=4 rl.steps_per_generation=3 eval_episodes=1 --quiet";
    snprintf(args, sizeof args, "train %s/configs/cartpole_r2d2.json generations=4 %s --out lr1", getenv("PWD"), common);
    CHECK_MSG(nevo(out, sizeof out, args) == 0, "%s", out);
    const double by_gen[] = {0.001, 0.00075, 0.0005, 0.00025};
    check_lrs("lr1", by_gen, 4);
    snprintf(args, sizeof args, "train %s/configs/cartpole_r2d2.json generations=100 max_frames=216 %s "
             "checkpoint_every=1 --out lr2 --kill-after-frames 100", getenv("PWD"), common);
    CHECK_EQ_INT(nevo(out, sizeof out, args), 128 + 9);
    CHECK_MSG(nevo(out, sizeof out, "train --resume lr2 --quiet") == 0, "%s", out);
    const double by_frames[] = {0.001, 0.001 * (1 - 54.0 / 216), 0.001 * (1 - 108.0 / 216), 0.001 * (1 - 162.0 / 216)};
    check_lrs("lr2", by_frames, 4);
    snprintf(args, sizeof args, "train %s/configs/cartpole_es.json optim.lr_decay=linear --out lr3 --quiet",
             getenv("PWD"));
    CHECK_EQ_INT(nevo(out, sizeof out, args), 2);
    CHECK_MSG(strstr(out, "keeps its learning rate") != NULL, "%s", out);
}

/* The parts of a run of the config doc: its env, policy, pool, noise and algorithm. */
typedef struct Parts {
    NevoConfig cfg;
    NevoEnv *env;
    NevoPolicy *p;
    NevoPool *pool;
    NevoNoise *noise;
    NevoAlgo *algo;
} Parts;

static void parts_new(Parts *r, const char *doc) {
    NevoError err;
    nevo_config_defaults(&r->cfg);
    CHECK_MSG(nevo_config_apply_json(&r->cfg, doc, "test", &err) == NEVO_OK, "%s", err.msg);
    CHECK(nevo_env_new(r->cfg.env, NULL, 0, &r->env, &err) == NEVO_OK);
    CHECK(nevo_policy_new(nevo_env_spec(r->env), &r->cfg.policy, 0, &r->p, &err) == NEVO_OK);
    r->pool = nevo_pool_new(1);
    r->noise = nevo_noise_new(nevo_algo_noise_floats(&r->cfg, r->p->nparams), r->pool);
    CHECK_MSG(nevo_algo_new(&r->cfg, r->env, r->p, r->noise, r->pool, &r->algo, &err) == NEVO_OK, "%s", err.msg);
}

static void parts_free(Parts *r) {
    nevo_algo_free(r->algo);
    nevo_noise_free(r->noise);
    nevo_pool_free(r->pool);
    nevo_policy_free(r->p);
    nevo_env_free(r->env);
}

/* A state with bytes changed at random (a crafted checkpoint whose checksum was made to
 * fit): loading it fails with a message or succeeds, and a generation after a
 * successful load runs; it never crashes (the sanitizer builds run this too). */
TEST(r2d2_crafted_state_is_refused_or_runs) {
    static const char *const doc =
        "{\"env\": \"minatar/breakout\", \"algo\": \"r2d2\", \"seed\": 3, \"policy\": {\"conv_filters\": [4], "
        "\"hidden\": [8], \"lstm\": 8, \"activation\": \"relu\", \"value_head\": true}, \"rl\": {\"envs\": 3, "
        "\"unroll\": 4, \"burn_in\": 2, \"period\": 2, \"batch\": 4, \"replay\": 10, \"replay_start\": 4, "
        "\"steps_per_generation\": 6}}";
    Parts run;
    parts_new(&run, doc);
    NevoError err;
    NevoConfig cfg = run.cfg;
    NevoEnv *env = run.env;
    NevoPolicy *p = run.p;
    NevoPool *pool = run.pool;
    NevoNoise *noise = run.noise;
    NevoAlgo *algo = run.algo;
    NevoGenStats gs;
    CHECK(nevo_algo_train(algo, &gs, &err) == NEVO_OK);
    CHECK(nevo_algo_train(algo, &gs, &err) == NEVO_OK);
    NevoBuf good = {0};
    nevo_algo_save(algo, &good);
    NevoRng rng;
    nevo_rng_init(&rng, 78, NEVO_RNG_USER, 0, 0, 0);
    int loaded = 0, refused = 0;
    uint8_t *bad = malloc(good.len);
    for (int trial = 0; trial < 60; trial++) {
        memcpy(bad, good.data, good.len);
        int flips = 1 + (int)nevo_rng_below(&rng, 8);
        for (int f = 0; f < flips; f++) {
            size_t at = nevo_rng_below(&rng, (uint32_t)good.len);
            bad[at] = (uint8_t)(trial % 3 == 0 ? 0xFF : nevo_rng_below(&rng, 256));
        }
        NevoAlgo *w;
        CHECK(nevo_algo_new(&cfg, env, p, noise, pool, &w, &err) == NEVO_OK);
        NevoReader r = nevo_reader(bad, good.len);
        if (nevo_algo_load(w, &r, &err) == NEVO_OK && nevo_reader_ok(&r, true)) {
            loaded++;
            NevoStatus st = nevo_algo_train(w, &gs, &err); /* runs, or says why not */
            CHECK_MSG(st == NEVO_OK || err.msg[0], "a generation failed without a message");
        } else {
            refused++;
            CHECK_MSG(err.msg[0] != '\0', "a state refused without a message");
        }
        nevo_algo_free(w);
    }
    free(bad);
    nevo_buf_free(&good);
    parts_free(&run);
    CHECK_MSG(loaded > 0 && refused > 0, "%d loaded, %d refused: the test exercised one side only", loaded, refused);
}

/* rl.validation_every: an algorithm made without a validator says so; made by the
 * engine (nevo_run_core_build, which sets train.c's), after each validated generation
 * the run's policy is the parameters of the best validation mean so far: evaluated
 * again on the validation's episodes (named as actor_envs.c names them), it scores that
 * best mean, and a worse validation leaves it unchanged. */
TEST(r2d2_validation_keeps_the_best_greedy_policy) {
    static const char *const doc =
        "{\"env\": \"CartPole-v1\", \"algo\": \"r2d2\", \"seed\": 4, \"policy\": {\"hidden\": [16], \"lstm\": 8,"
        " \"activation\": \"relu\", \"value_head\": true}, \"rl\": {\"envs\": 4, \"unroll\": 6, \"burn_in\": 2,"
        " \"period\": 4, \"batch\": 8, \"replay\": 64, \"replay_start\": 8, \"steps_per_generation\": 10,"
        " \"validation_every\": 1, \"validation_episodes\": 3}, \"optim\": {\"lr\": 0.01}}";
    Parts run;
    parts_new(&run, doc);
    NevoError err;
    NevoGenStats gs0;
    CHECK(nevo_algo_train(run.algo, &gs0, &err) == NEVO_ERR_INVALID); /* no validator: a message, not a crash */
    CHECK_MSG(strstr(err.msg, "nevo_algo_set_validate") != NULL, "%s", err.msg);
    NevoConfig cfg = run.cfg;
    parts_free(&run);
    NevoRunCore core;
    CHECK_MSG(nevo_run_core_build(&cfg, 1, NULL, &core, &err) == NEVO_OK, "%s", err.msg);
    NevoEnv *env = core.env;
    NevoPolicy *p = core.policy;
    NevoPool *pool = core.pool;
    NevoAlgo *algo = core.algo;
    uint64_t vseed = nevo_rng_derive(cfg.seed, NEVO_RNG_ENV_SEED, 0, NEVO_STREAM_VALIDATION, 0);
    float *best = malloc(sizeof(float) * p->nparams), *prev = malloc(sizeof(float) * p->nparams);
    double top = -INFINITY;
    int kept = 0, improved = 0;
    for (int g = 0; g < 8; g++) {
        NevoGenStats gs;
        memset(&gs, 0, sizeof gs);
        CHECK(nevo_algo_train(algo, &gs, &err) == NEVO_OK);
        nevo_algo_best(algo, best);
        if (gs.elite_mean > top) {
            top = gs.elite_mean;
            improved++;
        } else if (g > 0) {
            CHECK_MSG(memcmp(best, prev, sizeof(float) * p->nparams) == 0, "generation %d: a worse validation (%g "
                      "against %g) changed the policy", g, gs.elite_mean, top);
            kept++;
        }
        NevoEvalSummary sum;
        CHECK(nevo_eval_params(env, p, best, pool, 3, vseed, &sum, &err) == NEVO_OK);
        CHECK_MSG(sum.return_mean == top, "generation %d: the policy scores %g on the validation episodes, the best "
                  "validation was %g", g, sum.return_mean, top);
        memcpy(prev, best, sizeof(float) * p->nparams);
    }
    CHECK_MSG(improved >= 2 && kept >= 1, "%d improvements, %d kept: the test exercised one side only", improved, kept);
    free(best);
    free(prev);
    nevo_run_core_free(&core);
}

/* The committed config learns CartPole: its first 40 of 200 generations (350k frames,
 * the best of 10 validations) already reach a greedy evaluation of 400 over 100
 * episodes (a random policy: about 22; the whole run's figures are in docs/RESULTS.md). */
TEST(r2d2_learns_cartpole) {
    const char *cflags = getenv("NEVO_TEST_CFLAGS");
    if (cflags && strstr(cflags, "-fsanitize")) {
        printf("     skipped: sanitizer build (the plain build runs it; the sync test covers the same paths)\n");
        return;
    }
    char out[8192], args[1024];
    snprintf(args, sizeof args, "train %s/configs/cartpole_r2d2.json generations=40 --out cp --quiet", getenv("PWD"));
    CHECK_MSG(nevo(out, sizeof out, args) == 0, "%s", out);
    const char *m = strstr(out, "\"eval_return_mean\": ");
    CHECK_MSG(m && atof(m + 20) >= 400.0, "%s", out);
    printf("     CartPole: %.*s\n", 80, m);
}

TEST(r2d2_bad_configs_exit_2) {
    char out[8192], args[1024];
    static const char *const cases[][2] = {
        {"policy.lstm=0", "set policy.lstm"},
        {"env=Pendulum-v1", "continuous actions"},
        {"rl.epsilon=2", "rl.epsilon"},
        {"rl.replay_start=5000", "more than the buffer holds"},
        {"rl.batch=5000", "more sequences than the buffer holds"},
        {"rl.period=31", "longer than a sequence"},
        {"rl.n_step=0", "rl.n_step"},
        {"rl.priority_eta=1.5", "rl.priority_eta"},
        {"rl.replay=100000000 env=minatar/seaquest 'policy.conv_filters=[16]'", "replay buffer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "train %s/configs/cartpole_r2d2.json %s --out bad%zu --quiet", getenv("PWD"),
                 cases[i][0], i);
        CHECK_EQ_INT(nevo(out, sizeof out, args), 2);
        CHECK_MSG(strstr(out, cases[i][1]) != NULL, "%s: %s", cases[i][0], out);
    }
}
#endif
