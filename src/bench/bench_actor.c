/* The actor-learner group (bench.h, "actor"): algo vtrace on MinAtar Breakout with the
 * MinAtar network and a value head, 32 envs, unrolls of 20.
 *   - the runtime alone: actors and the inference server, the learner switched off
 *     (nevo_seed_run with no learner): the bound the whole can reach on these cores;
 *   - async and sync end to end, frames/s as a ratio to that bound; the same for algo
 *     r2d2 (its network with an LSTM of 128 after the dense layer, sequences of 10 + 20
 *     cut every 20 steps, batches of 32: one replayed step per frame in sync mode);
 *   - each learner alone, one thread: samples (trained steps) per second, the figures
 *     scripts/vtrace_vs_pytorch.py and scripts/r2d2_vs_pytorch.py compare with PyTorch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nevo/algo.h"
#include "nevo/optim.h"
#include "nevo/r2d2.h"
#include "nevo/rng.h"
#include "nevo/seed.h"
#include "nevo/vtrace.h"

static const char *const CONFIG =
    "{\"env\": \"minatar/breakout\", \"algo\": \"vtrace\", \"seed\": 1,"
    " \"policy\": {\"conv_filters\": [16], \"hidden\": [128], \"activation\": \"relu\", \"value_head\": true},"
    " \"rl\": {\"envs\": 32, \"unroll\": 20, \"steps_per_generation\": %d, \"mode\": \"%s\"},"
    " \"optim\": {\"name\": \"adam\", \"lr\": 0.0005, \"clip_norm\": 40}}";

static const char *const R2D2_CONFIG =
    "{\"env\": \"minatar/breakout\", \"algo\": \"r2d2\", \"seed\": 1,"
    " \"policy\": {\"conv_filters\": [16], \"hidden\": [128], \"lstm\": 128, \"activation\": \"relu\","
    " \"value_head\": true},"
    " \"rl\": {\"envs\": 32, \"unroll\": 20, \"burn_in\": 10, \"period\": 20, \"batch\": 32, \"replay\": 2000,"
    " \"replay_start\": 64, \"steps_per_generation\": %d, \"mode\": \"%s\"},"
    " \"optim\": {\"name\": \"adam\", \"lr\": 0.0002, \"clip_norm\": 40}}";

typedef struct LearnBench {
    const NevoPolicy *p;
    const NevoRLConfig *rl;
    NevoVTraceWork *w;
    NevoOptim *opt;
    float *theta, *grad, *obs, *mu, *rew, *disc;
    double *g;
    int *act, B, T;
} LearnBench;

/* one learner step: B trajectories' gradients added up, one Adam step */
static double learn_work(void *ctx, long iters) {
    LearnBench *L = ctx;
    size_t np = L->p->nparams, D = (size_t)L->p->obs_dim;
    for (long it = 0; it < iters; it++) {
        memset(L->g, 0, sizeof(double) * np);
        for (int b = 0; b < L->B; b += NEVO_VTRACE_CHUNK) { /* the learner's chunks */
            double loss;
            int n = L->B - b < NEVO_VTRACE_CHUNK ? L->B - b : NEVO_VTRACE_CHUNK;
            size_t o = (size_t)b * (size_t)(L->T + 1) * D, k = (size_t)b * (size_t)L->T;
            nevo_vtrace_batch(L->p, L->rl, L->theta, L->T, n, L->obs + o, L->act + k, L->mu + k, L->rew + k,
                              L->disc + k, 1.0f / (float)(L->B * L->T), L->w, L->grad, &loss);
            for (size_t i = 0; i < np; i++) L->g[i] += L->grad[i];
        }
        nevo_optim_step(L->opt, L->theta, L->g, 1.0);
    }
    return (double)iters * L->B * L->T;
}

/* observations of random play: rows rows of (obs_dim) into obs, reset[r] = 1 where an
 * episode begins (row 0 and after each end); the rng also draws what the learners read */
static void random_play(const NevoEnv *env, const NevoPolicy *p, size_t rows, float *obs, uint8_t *reset,
                        NevoRng *rng) {
    size_t D = (size_t)p->obs_dim;
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    nevo_env_instance_init(env, inst);
    nevo_env_reset(env, inst, 1, obs);
    if (reset) reset[0] = 1;
    for (size_t r = 1; r < rows; r++) {
        float a = (float)nevo_rng_below(rng, (uint32_t)p->n_act);
        NevoStepResult sr;
        nevo_env_step(env, inst, &a, obs + r * D, &sr);
        int end = sr.terminated || sr.truncated;
        if (end) nevo_env_reset(env, inst, r, obs + r * D);
        if (reset) reset[r] = (uint8_t)end;
    }
    nevo_env_instance_free(env, inst);
    free(inst);
}

/* R2D2's learner alone: B sequences of burn_in + T steps a step, in the learner's
 * chunks, the gradients added up, one Adam step */
typedef struct R2Bench {
    const NevoPolicy *p;
    const NevoRLConfig *rl;
    NevoR2D2Work *w;
    NevoOptim *opt;
    float *theta, *target, *grad, *obs, *state0, *rew, *disc, *weight, *prio;
    uint8_t *reset;
    double *g;
    int *act, B, M;
} R2Bench;

static double r2_learn_work(void *ctx, long iters) {
    R2Bench *L = ctx;
    size_t np = L->p->nparams, D = (size_t)L->p->obs_dim, S = (size_t)L->M + 1, H2 = 2 * (size_t)L->p->lstm_units;
    for (long it = 0; it < iters; it++) {
        memset(L->g, 0, sizeof(double) * np);
        for (int b = 0; b < L->B; b += NEVO_R2D2_CHUNK) {
            double loss;
            int n = L->B - b < NEVO_R2D2_CHUNK ? L->B - b : NEVO_R2D2_CHUNK;
            size_t k = (size_t)b * (size_t)L->M;
            nevo_r2d2_batch(L->p, L->rl, L->theta, L->target, n, L->obs + (size_t)b * S * D, L->reset + (size_t)b * S,
                            L->state0 + (size_t)b * H2, L->act + k, L->rew + k, L->disc + k, L->weight + b,
                            1.0f / (float)(L->B * L->rl->unroll), L->w, L->grad, &loss, L->prio + b);
            for (size_t i = 0; i < np; i++) L->g[i] += L->grad[i];
        }
        nevo_optim_step(L->opt, L->theta, L->g, 1.0);
    }
    return (double)iters * L->B * L->rl->unroll;
}

/* a learner's row: its samples/s over one thread */
static void learner_row(const NevoBenchOptions *o, NevoBenchWorkFn work, void *L, const char *name,
                        NevoBenchEmit emit, void *ctx) {
    NevoBenchTiming t = nevo_bench_measure(o, work, L, 1);
    NevoBenchResult r;
    nevo_bench_result_init(&r, "actor", "ksamples/s");
    snprintf(r.name, sizeof r.name, "%s", name);
    r.value = t.best / 1e3;
    r.median = t.median / 1e3;
    r.cpu_share = t.cpu_share;
    emit(ctx, &r);
}

static NevoStatus algo_for(const char *config, const char *mode, int steps, NevoConfig *cfg, NevoEnv **env,
                           NevoPolicy **p, NevoPool **pool, NevoNoise **noise, NevoAlgo **algo, int threads,
                           NevoError *err) {
    char doc[1024];
    snprintf(doc, sizeof doc, config, steps, mode);
    nevo_config_defaults(cfg);
    NevoStatus st = nevo_config_apply_json(cfg, doc, "bench", err);
    if (st == NEVO_OK) st = nevo_env_new(cfg->env, NULL, 0, env, err);
    if (st == NEVO_OK) st = nevo_policy_new(nevo_env_spec(*env), &cfg->policy, 0, p, err);
    if (st) return st;
    *pool = nevo_pool_new(threads);
    *noise = nevo_noise_new(nevo_algo_noise_floats(cfg, (*p)->nparams), *pool);
    return nevo_algo_new(cfg, *env, *p, *noise, *pool, algo, err);
}

/* The runtime alone (actors and inference, no learner) on config's network, as many
 * frames as an async run of `steps` V-trace updates trains on: one row, its frames/s
 * into *bound. */
static NevoStatus runtime_alone(const char *config, const char *what, int steps, int threads, NevoBenchEmit emit,
                                void *ctx, double *bound, NevoError *err) {
    NevoConfig cfg;
    NevoEnv *env = NULL;
    NevoPolicy *p = NULL;
    NevoPool *pool = NULL;
    NevoNoise *noise = NULL;
    NevoAlgo *algo = NULL;
    NevoStatus st = algo_for(config, "async", steps, &cfg, &env, &p, &pool, &noise, &algo, threads, err);
    if (st == NEVO_OK) {
        float *theta = nevo_alloc_aligned(sizeof(float) * p->nparams);
        nevo_algo_best(algo, theta);
        NevoSeed *s = NULL;
        NevoBackend *cpu = NULL;
        st = nevo_backend_new(cfg.backend, &cpu, err);
        if (st == NEVO_OK) st = nevo_seed_new(env, p, cpu, &cfg.rl, cfg.seed, theta, NULL, NULL, NULL, NULL, &s, err);
        if (st == NEVO_OK) st = nevo_seed_run(s, 0, (long long)steps * 32 * 20 * 4, err);
        if (st == NEVO_OK) {
            NevoSeedStats ss;
            nevo_seed_stats(s, &ss);
            *bound = ss.frames_per_s;
            NevoBenchResult r;
            nevo_bench_result_init(&r, "actor", "kframes/s");
            snprintf(r.name, sizeof r.name, "runtime alone (actors + inference, learner off), %s, 32 envs", what);
            r.value = r.median = *bound / 1e3;
            snprintf(r.extra, sizeof r.extra, "\"inference_batch\": %.2f, \"threads\": %d", ss.mean_batch, threads);
            emit(ctx, &r);
        }
        nevo_seed_free(s);
        nevo_backend_free(cpu);
        free(theta);
    }
    nevo_algo_free(algo);
    nevo_noise_free(noise), nevo_pool_free(pool), nevo_policy_free(p), nevo_env_free(env);
    return st;
}

NevoStatus nevo_bench_actor(const NevoBenchOptions *o, NevoBenchEmit emit, void *ctx, NevoError *err) {
    int steps = o->quick ? 4 : 40, threads = o->threads;
    NevoConfig cfg;
    NevoEnv *env = NULL;
    NevoPolicy *p = NULL;
    NevoPool *pool = NULL;
    NevoNoise *noise = NULL;
    NevoAlgo *algo = NULL;
    double bound[2] = {0, 0}; /* vtrace's network, r2d2's */
    NevoStatus st = runtime_alone(CONFIG, "MinAtar net", steps, threads, emit, ctx, &bound[0], err);
    if (st == NEVO_OK)
        st = runtime_alone(R2D2_CONFIG, "MinAtar net + LSTM 128", steps, threads, emit, ctx, &bound[1], err);
    for (int k = 0; k < 4 && st == NEVO_OK; k++) {
        /* a fresh run of each algorithm and mode: r2d2's, then vtrace's (whose parts the
         * learner below uses) */
        int r2 = k < 2;
        const char *mode = k % 2 ? "sync" : "async";
        nevo_noise_free(noise), nevo_pool_free(pool), nevo_policy_free(p), nevo_env_free(env);
        noise = NULL, pool = NULL, p = NULL, env = NULL;
        st = algo_for(r2 ? R2D2_CONFIG : CONFIG, mode, steps, &cfg, &env, &p, &pool, &noise, &algo, threads, err);
        NevoGenStats gs;
        if (st == NEVO_OK) st = nevo_algo_train(algo, &gs, err);
        if (st == NEVO_OK) {
            NevoBenchResult r;
            nevo_bench_result_init(&r, "actor", "kframes/s");
            if (!r2)
                snprintf(r.name, sizeof r.name, "vtrace %s end to end (%d updates of 32 x 20), MinAtar net", mode, steps);
            else
                snprintf(r.name, sizeof r.name, "r2d2 %s end to end (%d learner steps, batches of 32 x (10 + 20)), "
                         "MinAtar net + LSTM 128", mode, steps);
            r.value = r.median = gs.rl_frames_per_s / 1e3;
            if (bound[r2] > 0) nevo_bench_result_limit(&r, bound[r2] / 1e3, "runtime alone");
            snprintf(r.extra, sizeof r.extra,
                     "\"updates_per_s\": %.2f, \"inference_batch\": %.2f, \"queue\": %.2f, \"policy_lag\": %.3f",
                     gs.rl_updates_per_s, gs.rl_batch, gs.rl_queue, gs.rl_lag);
            emit(ctx, &r);
        }
        nevo_algo_free(algo);
        algo = NULL;
    }
    /* the learner alone, one thread, on trajectories of observations from the env */
    if (st == NEVO_OK) {
        LearnBench L = {0};
        L.p = p, L.rl = &cfg.rl, L.B = 32, L.T = 20;
        size_t np = p->nparams, D = (size_t)p->obs_dim, R = (size_t)L.B * (size_t)(L.T + 1);
        L.w = nevo_vtrace_work_new(p, L.T, NEVO_VTRACE_CHUNK);
        st = nevo_optim_new(&cfg.optim, np, &L.opt, err);
        L.theta = nevo_alloc_aligned(sizeof(float) * np);
        nevo_policy_init_params(p, noise, 1, 0, 0, L.theta);
        L.grad = nevo_alloc_aligned(sizeof(float) * np);
        L.g = nevo_alloc_aligned(sizeof(double) * np);
        L.obs = nevo_alloc_aligned(sizeof(float) * R * D);
        size_t n = (size_t)L.B * (size_t)L.T;
        L.act = nevo_alloc(sizeof(int) * n);
        L.mu = nevo_alloc(sizeof(float) * n), L.rew = nevo_alloc(sizeof(float) * n);
        L.disc = nevo_alloc(sizeof(float) * n);
        /* observations of random play, random actions and rewards */
        NevoRng rng;
        nevo_rng_init(&rng, 1, NEVO_RNG_USER, 0, 0, 0);
        random_play(env, p, R, L.obs, NULL, &rng);
        for (size_t k = 0; k < n; k++) {
            L.act[k] = (int)nevo_rng_below(&rng, (uint32_t)p->n_act);
            L.mu[k] = -1.7917595f; /* log 1/6 */
            L.rew[k] = nevo_rng_uniform(&rng) < 0.05 ? 1.0f : 0.0f;
            L.disc[k] = 0.99f;
        }
        if (st == NEVO_OK)
            learner_row(o, learn_work, &L, "vtrace learner, 1 thread, batch 32 x 20, MinAtar net (forward, V-trace, "
                        "backward, Adam)", emit, ctx);
        nevo_vtrace_work_free(L.w);
        nevo_optim_free(L.opt);
        void *f[] = {L.theta, L.grad, L.g, L.obs, L.act, L.mu, L.rew, L.disc};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    }
    /* R2D2's learner alone, one thread: 32 sequences of 10 + 20 steps of random play
     * (resets where its episodes ended), random actions, sparse rewards, zero start
     * states, the target network a copy of the online one */
    if (st == NEVO_OK) {
        NevoConfig rc;
        NevoPolicy *rp = NULL;
        char doc[1024];
        snprintf(doc, sizeof doc, R2D2_CONFIG, steps, "sync");
        nevo_config_defaults(&rc);
        st = nevo_config_apply_json(&rc, doc, "bench", err);
        if (st == NEVO_OK) st = nevo_policy_new(nevo_env_spec(env), &rc.policy, 0, &rp, err);
        R2Bench L = {0};
        if (st == NEVO_OK) {
            L.p = rp, L.rl = &rc.rl, L.B = 32, L.M = rc.rl.burn_in + rc.rl.unroll;
            size_t np = rp->nparams, D = (size_t)rp->obs_dim, S = (size_t)L.M + 1, n = (size_t)L.B * (size_t)L.M;
            L.w = nevo_r2d2_work_new(rp, rc.rl.burn_in, rc.rl.unroll, NEVO_R2D2_CHUNK);
            st = nevo_optim_new(&rc.optim, np, &L.opt, err);
            L.theta = nevo_alloc_aligned(sizeof(float) * np);
            nevo_policy_init_params(rp, noise, 1, 0, 0, L.theta);
            L.target = nevo_alloc_aligned(sizeof(float) * np);
            memcpy(L.target, L.theta, sizeof(float) * np);
            L.grad = nevo_alloc_aligned(sizeof(float) * np);
            L.g = nevo_alloc_aligned(sizeof(double) * np);
            L.obs = nevo_alloc_aligned(sizeof(float) * (size_t)L.B * S * D);
            L.reset = nevo_alloc((size_t)L.B * S);
            L.state0 = nevo_alloc(sizeof(float) * (size_t)L.B * 2 * (size_t)rp->lstm_units);
            L.act = nevo_alloc(sizeof(int) * n);
            L.rew = nevo_alloc(sizeof(float) * n), L.disc = nevo_alloc(sizeof(float) * n);
            L.weight = nevo_alloc(sizeof(float) * (size_t)L.B), L.prio = nevo_alloc(sizeof(float) * (size_t)L.B);
            NevoRng rng;
            nevo_rng_init(&rng, 2, NEVO_RNG_USER, 0, 0, 0);
            random_play(env, rp, (size_t)L.B * S, L.obs, L.reset, &rng);
            for (int b = 0; b < L.B; b++) {
                L.weight[b] = 1.0f;
                for (int t = 0; t < L.M; t++) {
                    size_t k = (size_t)b * (size_t)L.M + (size_t)t;
                    L.act[k] = (int)nevo_rng_below(&rng, (uint32_t)rp->n_act);
                    L.rew[k] = nevo_rng_uniform(&rng) < 0.05 ? 1.0f : 0.0f;
                    L.disc[k] = L.reset[(size_t)b * S + (size_t)t + 1] ? 0.0f : 0.99f; /* the episode ended */
                }
            }
        }
        if (st == NEVO_OK)
            learner_row(o, r2_learn_work, &L, "r2d2 learner, 1 thread, batch 32 x (10 + 20), MinAtar net + LSTM 128 "
                        "(burn-in, both networks, double-Q targets, backward, Adam)", emit, ctx);
        if (L.w) nevo_r2d2_work_free(L.w);
        nevo_optim_free(L.opt);
        void *f[] = {L.theta, L.target, L.grad, L.g, L.obs, L.reset, L.state0, L.act, L.rew, L.disc, L.weight, L.prio};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
        nevo_policy_free(rp);
    }
    nevo_algo_free(algo);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    nevo_env_free(env);
    return st;
}
