/* Tests for the population evaluator (src/engine/eval.c, include/nevo/eval.h).
 *
 * The reference is a hand-rolled single-episode loop written here (reset with the
 * task's seed, forward one row, actions, step until terminated or truncated), run one
 * task at a time over networks built one by one with nevo_taskset_build. Every
 * evaluator result must equal it bit for bit, whatever the thread count, the number of
 * episode slots per worker, the pipeline depth and where the evaluator builds the
 * networks (read in place, built as each episode starts, built first). A backend that
 * wraps the CPU one and logs its builds shows which layout ran. Numeric faults are
 * provoked with a deliberately broken environment plugged in through
 * nevo_env_new_from_class. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/eval.h"
#include "nn/backend_impl.h"
#include "nevo/noise.h"
#include "nevo/rng.h"

enum { N_NETS = 20, N_EPS = 3, N_TASKS = N_NETS * N_EPS };

static NevoEnv *open_env(const char *name) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new(name, NULL, 0, &env, &err) == NEVO_OK, "%s: %s", name, err.msg);
    return env;
}

/* A tanh MLP with one hidden layer of 8, and an LSTM of `lstm` units after it (0: none). */
static NevoPolicy *small_policy_lstm(const NevoEnv *env, int lstm) {
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_hidden = 1;
    c.hidden[0] = 8;
    c.lstm = lstm;
    strcpy(c.activation, "tanh");
    strcpy(c.init, "scaled");
    NevoPolicy *p = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_policy_new(nevo_env_spec(env), &c, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    return p;
}

static NevoPolicy *small_policy(const NevoEnv *env) { return small_policy_lstm(env, 0); }

/* N_NETS parameter rows from the policy's own initialiser (over a small noise table),
 * at stride nparams + 3. */
static float *population(const NevoPolicy *p, size_t *stride) {
    *stride = p->nparams + 3;
    float *params = calloc(*stride * N_NETS, sizeof(float));
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new((size_t)1 << 16, pool);
    for (int j = 0; j < N_NETS; j++)
        nevo_policy_init_params(p, noise, 2024, 0, (uint32_t)j, params + *stride * j);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    return params;
}

/* Tasks in an order that is neither by network nor by episode. */
static void make_tasks(NevoTask *tasks, uint32_t flags_every) {
    for (int i = 0; i < N_TASKS; i++) {
        int net = (i * 7) % N_NETS, ep = i / N_NETS;
        tasks[i].net = net;
        tasks[i].flags = flags_every && i % (int)flags_every == 0 ? NEVO_TASK_RECORD_OBS : 0;
        tasks[i].seed = nevo_rng_derive(99, NEVO_RNG_ENV_SEED, 0, (uint32_t)net, (uint32_t)ep);
    }
}

/* The reference: one episode, one row at a time (a recurrent policy from a zero state).
 * stats and states (either may be NULL) receive the observations the policy was fed:
 * the reset observation and every non-final one. */
static void ref_episode_states(const NevoEnv *env, const NevoPolicy *p, const float *params, size_t stride,
                               const NevoTask *t, NevoEpisode *r, NevoObsStats *stats, NevoStates *states) {
    const NevoEnvSpec *spec = nevo_env_spec(env);
    void *inst = calloc(1, nevo_env_instance_size(env));
    float *obs = calloc((size_t)spec->obs_dim, sizeof(float));
    float *out = calloc((size_t)p->n_out, sizeof(float));
    float *act = calloc((size_t)spec->action_dim, sizeof(float));
    float *scratch = calloc(nevo_policy_scratch_floats(p, 1), sizeof(float));
    float *state = calloc(nevo_policy_state_floats(p) + 1, sizeof(float));
    memset(r, 0, sizeof *r);
    nevo_env_reset(env, inst, t->seed, obs);
    if (stats) nevo_obs_stats_add(stats, obs);
    if (states) nevo_states_add(states, obs);
    for (;;) {
        if (p->lstm_layer >= 0)
            nevo_policy_forward_state(p, params, stride, &t->net, obs, 1, state, out, scratch);
        else
            nevo_policy_forward(p, params, stride, &t->net, obs, 1, out, scratch);
        nevo_policy_actions(p, out, 1, act);
        NevoStepResult sr;
        nevo_env_step(env, inst, act, obs, &sr);
        r->ret += sr.reward;
        r->length++;
        if (sr.terminated || sr.truncated) {
            r->terminated = sr.terminated;
            nevo_env_bc(env, inst, obs, r->bc);
            break;
        }
        if (stats) nevo_obs_stats_add(stats, obs);
        if (states) nevo_states_add(states, obs);
    }
    free(inst), free(obs), free(out), free(act), free(scratch), free(state);
}

static void ref_episode(const NevoEnv *env, const NevoPolicy *p, const float *params, size_t stride,
                        const NevoTask *t, NevoEpisode *r, NevoObsStats *stats) {
    ref_episode_states(env, p, params, stride, t, r, stats, NULL);
}

static void check_same_episode(const NevoEpisode *got, const NevoEpisode *want, int i, const char *what) {
    CHECK_MSG(memcmp(&got->ret, &want->ret, sizeof got->ret) == 0 && got->length == want->length &&
                  got->terminated == want->terminated &&
                  memcmp(got->bc, want->bc, sizeof got->bc) == 0,
              "%s: task %d: return %.17g length %d terminated %d, reference %.17g %d %d", what, i,
              got->ret, got->length, got->terminated, want->ret, want->length, want->terminated);
}

/* --- networks as recipes, and a backend that logs its builds --------------------- */

/* N_NETS recipes over the population's rows as bases: antithetic pairs (nets 4k and
 * 4k + 1, from base 2k), fresh networks from an init stream (4k + 2) and GA children
 * (4k + 3, from base 4k + 3). */
typedef struct Recipes {
    NevoNoise *noise;
    NevoNet nets[N_NETS];
    NevoTaskSet ts;
    float *built; /* (N_NETS, nparams) each network built alone: the reference's */
} Recipes;

static void recipes_open(Recipes *r, const NevoEnv *env, const NevoPolicy *p, const float *params, size_t stride) {
    NevoPool *pool = nevo_pool_new(1);
    r->noise = nevo_noise_new((size_t)1 << 16, pool);
    nevo_pool_free(pool);
    for (int j = 0; j < N_NETS; j++) {
        NevoNet *n = &r->nets[j];
        if (j % 4 < 2)
            *n = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = j / 4 * 2, .purpose = NEVO_RNG_ES_NOISE,
                           .generation = 3, .individual = (uint32_t)(j / 4), .sigma = 0.1f, .sign = j % 4 ? -1 : 1};
        else if (j % 4 == 2)
            *n = (NevoNet){.kind = NEVO_NET_INIT, .generation = 5, .individual = (uint32_t)j};
        else
            *n = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = j, .purpose = NEVO_RNG_MUTATE, .generation = 4,
                           .individual = (uint32_t)j, .sigma = 0.05f, .sign = 1};
    }
    nevo_taskset_for_policy(&r->ts, p, env);
    r->ts.seed = 2024;
    r->ts.noise = r->noise;
    r->ts.noise_floats = r->noise->size;
    r->ts.n_bases = N_NETS;
    r->ts.bases = params;
    r->ts.base_stride = stride;
    r->ts.n_nets = N_NETS;
    r->ts.nets = r->nets;
    r->built = nevo_alloc_aligned(sizeof(float) * p->nparams * N_NETS);
    for (int j = 0; j < N_NETS; j++) nevo_taskset_build(&r->ts, p, j, r->built + (size_t)j * p->nparams, 0);
}

static void recipes_close(Recipes *r) {
    nevo_noise_free(r->noise);
    free(r->built);
}

/* The CPU backend with every build logged: which network, on which thread, in order. */
typedef struct BuildLog {
    atomic_int builds, pairs;
    atomic_int n;
    int net[4 * N_TASKS], thread[4 * N_TASKS];
} BuildLog;

static BuildLog build_log;
static _Thread_local int log_thread = -1;
static atomic_int log_threads;

static void log_build(int net) {
    if (log_thread < 0) log_thread = atomic_fetch_add(&log_threads, 1);
    int k = atomic_fetch_add(&build_log.n, 1);
    if (k < 4 * N_TASKS) build_log.net[k] = net, build_log.thread[k] = log_thread;
}

static void logged_build(void *ctx, NevoRows *r, int row, const NevoTaskSet *ts, const NevoRows *bases,
                         const NevoPolicy *p, int net, int stream) {
    CHECK_MSG((uintptr_t)(r->data + (size_t)row * r->stride) % 64 == 0, "row %d: not on a 64-byte line", row);
    atomic_fetch_add(&build_log.builds, 1);
    log_build(net);
    nevo_backend_cpu_ops.build(ctx, r, row, ts, bases, p, net, stream);
}

static void logged_build_pair(void *ctx, NevoRows *r, int row_plus, int row_minus, const NevoTaskSet *ts,
                              const NevoRows *bases, const NevoPolicy *p, int net, int stream) {
    atomic_fetch_add(&build_log.pairs, 1);
    log_build(net);
    log_build(net + 1);
    nevo_backend_cpu_ops.build_pair(ctx, r, row_plus, row_minus, ts, bases, p, net, stream);
}

static NevoBackendOps logged_ops;

static NevoBackend logged_backend(void) {
    logged_ops = nevo_backend_cpu_ops;
    logged_ops.name = "cpu-logged";
    logged_ops.build = logged_build;
    logged_ops.build_pair = logged_build_pair;
    memset(&build_log, 0, sizeof build_log);
    return (NevoBackend){&logged_ops, nevo_backend_cpu_ops.init(0, 1)};
}

static void log_reset(void) {
    atomic_store(&build_log.builds, 0);
    atomic_store(&build_log.pairs, 0);
    atomic_store(&build_log.n, 0);
}

/* Evaluates the tasks for threads 1..3, slots 1, 3, 16 and pipeline depths 1, 2, 4
 * against the reference: the networks given as rows (read in place), and as recipes
 * with their three episodes each (built first, once per network: a pair in one pass)
 * and with one episode each (built as each episode starts). */
static void check_env_against_reference_lstm(const char *name, int max_steps, int want_limit, int lstm) {
    NevoEnv *env = open_env(name);
    nevo_env_set_max_steps(env, max_steps);
    CHECK_EQ_INT(nevo_env_spec(env)->max_steps, want_limit);
    NevoPolicy *p = small_policy_lstm(env, lstm);
    size_t stride;
    float *params = population(p, &stride);
    Recipes rc;
    recipes_open(&rc, env, p, params, stride);
    NevoTask tasks[N_TASKS];
    make_tasks(tasks, 0);
    NevoEpisode ref[N_TASKS];
    int capped = 0, terminated = 0;
    for (int i = 0; i < N_TASKS; i++) {
        ref_episode(env, p, rc.built, p->nparams, &tasks[i], &ref[i], NULL);
        CHECK_MSG(ref[i].length >= 1 && ref[i].length <= want_limit, "%s task %d length %d", name, i,
                  ref[i].length);
        if (!ref[i].terminated) {
            CHECK_MSG(ref[i].length == want_limit, "%s task %d ended at %d neither terminated nor truncated",
                      name, i, ref[i].length);
            capped++;
        } else {
            terminated++;
        }
    }
    /* the first episode of each network, one task per network: the built layout */
    NevoTask firsts[N_NETS];
    NevoEpisode ref_firsts[N_NETS];
    for (int i = 0, n = 0; i < N_TASKS; i++)
        if (tasks[i].seed == nevo_rng_derive(99, NEVO_RNG_ENV_SEED, 0, (uint32_t)tasks[i].net, 0))
            firsts[n] = tasks[i], ref_firsts[n++] = ref[i];
    NevoTaskSet all = rc.ts, one = rc.ts;
    all.n_tasks = N_TASKS, all.tasks = tasks;
    one.n_tasks = N_NETS, one.tasks = firsts;
    NevoBackend logged = logged_backend();
    static const int threads[3] = {1, 2, 3}, slots[3] = {1, 3, 16}, depths[3] = {1, 2, 4};
    for (int a = 0; a < 3; a++) {
        NevoPool *pool = nevo_pool_new(threads[a]);
        for (int b = 0; b < 3; b++) {
            NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, slots[b]);
            nevo_evaluator_set_backend(ev, &logged);
            for (int c = 0; c < 3; c++) {
                if (depths[c] > 1 && slots[b] != 3) continue; /* pipelined: one slot count */
                nevo_evaluator_set_pipeline(ev, depths[c]);
                NevoEpisode res[N_TASKS];
                NevoError err = {0};
                char what[128];
                snprintf(what, sizeof what, "%s, %d threads, %d slots, pipeline depth %d", name, threads[a],
                         slots[b], depths[c]);
                /* twice each: the rows, buffers and queue are reused from call to call */
                for (int rep = 0; rep < 2; rep++) {
                    log_reset();
                    memset(res, 0xCD, sizeof res);
                    CHECK_MSG(nevo_evaluate(ev, rc.built, p->nparams, tasks, N_TASKS, res, NULL, &err) == NEVO_OK,
                              "%s: %s", what, err.msg);
                    for (int i = 0; i < N_TASKS; i++) check_same_episode(&res[i], &ref[i], i, what);
                    CHECK_EQ_INT(atomic_load(&build_log.n), 0); /* read in place */
                    memset(res, 0xCD, sizeof res);
                    CHECK_MSG(nevo_evaluate_tasks(ev, &all, res, NULL, NULL, &err) == NEVO_OK, "%s, recipes: %s", what,
                              err.msg);
                    for (int i = 0; i < N_TASKS; i++) check_same_episode(&res[i], &ref[i], i, what);
                    CHECK_EQ_INT(atomic_load(&build_log.n), N_NETS); /* once per network */
                    CHECK_EQ_INT(atomic_load(&build_log.pairs), N_NETS / 4);
                    log_reset();
                    memset(res, 0xCD, sizeof res);
                    CHECK_MSG(nevo_evaluate_tasks(ev, &one, res, NULL, NULL, &err) == NEVO_OK, "%s, one each: %s", what,
                              err.msg);
                    for (int i = 0; i < N_NETS; i++) check_same_episode(&res[i], &ref_firsts[i], i, what);
                    CHECK_EQ_INT(atomic_load(&build_log.builds), N_NETS); /* as each episode starts */
                    CHECK_EQ_INT(atomic_load(&build_log.pairs), 0);
                }
            }
            nevo_evaluator_free(ev);
        }
        nevo_pool_free(pool);
    }
    logged_ops.done(logged.ctx);
    /* the cases must exercise what they are meant to */
    if (strcmp(name, "Pendulum-v1") == 0) CHECK_EQ_INT(capped, N_TASKS);
    else CHECK_MSG(capped > 0 && terminated > 0, "%s (limit %d): %d capped, %d terminated", name,
                   want_limit, capped, terminated);
    recipes_close(&rc);
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}

static void check_env_against_reference(const char *name, int max_steps, int want_limit) {
    check_env_against_reference_lstm(name, max_steps, want_limit, 0);
}

TEST(eval_cartpole_matches_reference) { check_env_against_reference("CartPole-v1", 0, 500); }
/* a recurrent policy: each slot's state goes with its episode through refills and
 * compaction, and starts at zero */
TEST(eval_cartpole_lstm_matches_reference) { check_env_against_reference_lstm("CartPole-v1", 25, 25, 6); }
TEST(eval_pendulum_matches_reference) { check_env_against_reference("Pendulum-v1", 0, 200); }
TEST(eval_max_steps_caps_episodes) {
    check_env_against_reference("CartPole-v1", 30, 30);
    check_env_against_reference("Pendulum-v1", 50, 50);
}

/* A backend whose room (nevo_backend_rows_room) holds `room_rows` rows of the policy. */
static size_t room_bytes;
static size_t logged_room(void *ctx) {
    (void)ctx;
    return room_bytes;
}

/* Evaluates ts's n tasks on ev with the backend's room at `room` bytes: the episodes
 * must be ref's; returns the builds made. */
static int evaluate_in_room(NevoEvaluator *ev, const NevoTaskSet *ts, const NevoEpisode *ref, size_t room,
                            const char *what) {
    room_bytes = room;
    log_reset();
    NevoEpisode res[N_TASKS];
    memset(res, 0xCD, sizeof res);
    NevoError err = {0};
    CHECK_MSG(nevo_evaluate_tasks(ev, ts, res, NULL, NULL, &err) == NEVO_OK, "%s: %s", what, err.msg);
    for (int i = 0; i < ts->n_tasks; i++) check_same_episode(&res[i], &ref[i], i, what);
    return atomic_load(&build_log.n);
}

/* Networks with several episodes each are built once into a row each where those rows
 * fit the backend's room, and where they do not (a device's memory), built in each
 * episode's slot: the same episodes either way, the reference's. The boundary is exact,
 * rows kept from the last call serve again, and they count as room for a larger call. */
TEST(eval_rows_past_the_backends_room_are_built_per_episode) {
    NevoEnv *env = open_env("CartPole-v1");
    NevoPolicy *p = small_policy(env);
    size_t stride;
    float *params = population(p, &stride);
    Recipes rc;
    recipes_open(&rc, env, p, params, stride);
    NevoTask tasks[N_TASKS], half_tasks[N_TASKS];
    make_tasks(tasks, 0);
    NevoEpisode ref[N_TASKS], half_ref[N_TASKS];
    int n_half = 0;
    for (int i = 0; i < N_TASKS; i++) {
        ref_episode(env, p, rc.built, p->nparams, &tasks[i], &ref[i], NULL);
        if (tasks[i].net < N_NETS / 2) half_tasks[n_half] = tasks[i], half_ref[n_half++] = ref[i];
    }
    NevoTaskSet all = rc.ts, half = rc.ts;
    all.n_tasks = N_TASKS, all.tasks = tasks;
    half.n_nets = N_NETS / 2, half.n_tasks = n_half, half.tasks = half_tasks;
    NevoBackend logged = logged_backend();
    logged_ops.rows_room = logged_room;
    const size_t row = sizeof(float) * ((p->nparams + 15) & ~(size_t)15), n = N_NETS;
    NevoPool *pool = nevo_pool_new(2);
    for (int k = 0; k < 2; k++) {
        NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 3);
        nevo_evaluator_set_backend(ev, &logged);
        if (k == 0) {
            CHECK_EQ_INT(evaluate_in_room(ev, &all, ref, n * row - 1, "a row short"), N_TASKS);
            CHECK_EQ_INT(evaluate_in_room(ev, &all, ref, n * row, "room exactly"), N_NETS);
            CHECK_EQ_INT(evaluate_in_room(ev, &all, ref, 0, "rows kept"), N_NETS);
        } else {
            CHECK_EQ_INT(evaluate_in_room(ev, &half, half_ref, n / 2 * row, "half"), N_NETS / 2);
            CHECK_EQ_INT(evaluate_in_room(ev, &all, ref, n / 2 * row, "kept rows as room"), N_NETS);
            CHECK_EQ_INT(evaluate_in_room(ev, &all, ref, 0, "rows kept"), N_NETS);
        }
        nevo_evaluator_free(ev);
    }
    /* the kept rows counted, and a row short of them */
    NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 3);
    nevo_evaluator_set_backend(ev, &logged);
    CHECK_EQ_INT(evaluate_in_room(ev, &half, half_ref, SIZE_MAX - 1, "half"), N_NETS / 2);
    CHECK_EQ_INT(evaluate_in_room(ev, &all, ref, n / 2 * row - 1, "kept rows and a row short"), N_TASKS);
    CHECK_EQ_INT(evaluate_in_room(ev, &all, ref, n * row, "room again"), N_NETS);
    nevo_evaluator_free(ev);
    nevo_pool_free(pool);
    logged_ops.done(logged.ctx);
    recipes_close(&rc);
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* An antithetic pair with one episode each is taken by one worker: the second is built
 * right after the first in that worker's sequence (the noise slice both read is then
 * likely still in its cache), and the results are the reference's. N_NETS networks
 * from one base, all pairs; fused layout, 1-3 threads, 1, 3 and 16 slots. */
TEST(eval_pairs_run_on_the_same_worker) {
    NevoEnv *env = open_env("CartPole-v1");
    NevoPolicy *p = small_policy(env);
    size_t stride;
    float *params = population(p, &stride);
    Recipes rc;
    recipes_open(&rc, env, p, params, stride);
    for (int j = 0; j < N_NETS; j++)
        rc.nets[j] = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 7, .purpose = NEVO_RNG_ES_NOISE, .generation = 2,
                               .individual = (uint32_t)(j / 2), .sigma = 0.1f, .sign = j % 2 ? -1 : 1};
    for (int j = 0; j < N_NETS; j++) nevo_taskset_build(&rc.ts, p, j, rc.built + (size_t)j * p->nparams, 0);
    NevoTask tasks[N_NETS];
    NevoEpisode ref[N_NETS];
    for (int i = 0; i < N_NETS; i++) {
        tasks[i].net = i;
        tasks[i].flags = 0;
        tasks[i].seed = nevo_rng_derive(5, NEVO_RNG_ENV_SEED, 0, (uint32_t)(i / 2), 0);
        ref_episode(env, p, rc.built, p->nparams, &tasks[i], &ref[i], NULL);
    }
    rc.ts.n_tasks = N_NETS, rc.ts.tasks = tasks;
    NevoBackend logged = logged_backend();
    static const int threads[3] = {1, 2, 3}, slots[3] = {1, 3, 16};
    for (int a = 0; a < 3; a++) {
        NevoPool *pool = nevo_pool_new(threads[a]);
        for (int b = 0; b < 3; b++) {
            NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, slots[b]);
            nevo_evaluator_set_backend(ev, &logged);
            log_reset();
            NevoEpisode res[N_NETS];
            memset(res, 0xCD, sizeof res);
            NevoError err = {0};
            CHECK_MSG(nevo_evaluate_tasks(ev, &rc.ts, res, NULL, NULL, &err) == NEVO_OK, "%s", err.msg);
            char what[96];
            snprintf(what, sizeof what, "pairs, %d threads, %d slots", threads[a], slots[b]);
            for (int i = 0; i < N_NETS; i++) check_same_episode(&res[i], &ref[i], i, what);
            CHECK_EQ_INT(atomic_load(&build_log.n), N_NETS);
            for (int k = 0; k < N_NETS; k++) {
                int t = build_log.net[k];
                if (t % 2 != 0) continue;
                int next = -1; /* the same thread's next build */
                for (int q = k + 1; q < N_NETS && next < 0; q++)
                    if (build_log.thread[q] == build_log.thread[k]) next = build_log.net[q];
                CHECK_MSG(next == t + 1, "%s: network %d was followed on its worker by %d, not %d", what, t, next,
                          t + 1);
            }
            nevo_evaluator_free(ev);
        }
        nevo_pool_free(pool);
    }
    logged_ops.done(logged.ctx);
    recipes_close(&rc);
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* --- progress ---------------------------------------------------------------------- */

typedef struct Progress {
    pthread_mutex_t mu;
    int calls;
    long long values[N_TASKS + 8];
} Progress;

static void on_progress(void *ctx, long long frames) {
    Progress *pr = ctx;
    pthread_mutex_lock(&pr->mu);
    if (pr->calls < N_TASKS + 8) pr->values[pr->calls] = frames;
    pr->calls++;
    pthread_mutex_unlock(&pr->mu);
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

TEST(eval_progress_callback) {
    NevoEnv *env = open_env("CartPole-v1");
    NevoPolicy *p = small_policy(env);
    size_t stride;
    float *params = population(p, &stride);
    NevoTask tasks[N_TASKS];
    make_tasks(tasks, 0);
    for (int threads = 1; threads <= 3; threads += 2) {
        NevoPool *pool = nevo_pool_new(threads);
        NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 3);
        Progress pr;
        memset(&pr, 0, sizeof pr);
        pthread_mutex_init(&pr.mu, NULL);
        nevo_evaluator_set_progress(ev, on_progress, &pr);
        NevoEpisode res[N_TASKS];
        NevoError err = {0};
        CHECK(nevo_evaluate(ev, params, stride, tasks, N_TASKS, res, NULL, &err) == NEVO_OK);
        long long total = 0;
        for (int i = 0; i < N_TASKS; i++) total += res[i].length;
        /* one call per finished episode */
        CHECK_EQ_INT(pr.calls, N_TASKS);
        if (threads == 1) {
            /* one worker: the counts it reports rise with every episode */
            for (int i = 1; i < N_TASKS; i++)
                CHECK_MSG(pr.values[i] > pr.values[i - 1], "call %d: %lld after %lld", i, pr.values[i],
                          pr.values[i - 1]);
        } else {
            /* several workers may report out of order, but each count is a distinct
             * running total */
            qsort(pr.values, N_TASKS, sizeof pr.values[0], cmp_ll);
            for (int i = 1; i < N_TASKS; i++) CHECK(pr.values[i] > pr.values[i - 1]);
        }
        CHECK(pr.values[0] >= 1);
        CHECK_MSG(pr.values[N_TASKS - 1] == total, "%d threads: last count %lld, frames %lld", threads,
                  pr.values[N_TASKS - 1], total);
        pthread_mutex_destroy(&pr.mu);
        nevo_evaluator_free(ev);
        nevo_pool_free(pool);
    }
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* --- numeric faults ----------------------------------------------------------------- */

/* An env that goes bad: after nan_step steps (0: at reset) its observation holds a NaN,
 * or with bad_reward its reward is infinite instead. */
typedef struct BrokenParams {
    int nan_step;
    int bad_reward;
} BrokenParams;

typedef struct BrokenState {
    int t;
    float x;
} BrokenState;

static NevoStatus broken_configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                                   int n_opts, NevoError *err) {
    BrokenParams *bp = params;
    bp->nan_step = 5;
    bp->bad_reward = 0;
    for (int i = 0; i < n_opts; i++) {
        if (strcmp(opts[i].key, "nan_step") == 0) bp->nan_step = (int)opts[i].value;
        if (strcmp(opts[i].key, "bad_reward") == 0) bp->bad_reward = opts[i].value != 0.0;
    }
    return NEVO_OK;
}

static void broken_obs(const BrokenState *s, float *obs) {
    obs[0] = s->x;
    obs[1] = (float)s->t * 0.01f;
    obs[2] = -s->x;
}

static void broken_reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    const BrokenParams *bp = nevo_env_params(env);
    BrokenState *s = state;
    s->t = 0;
    s->x = (float)(seed % 1000) * 1e-3f;
    broken_obs(s, obs);
    if (bp->nan_step == 0) obs[1] = NAN;
}

static void broken_step(const NevoEnv *env, void *state, const float *action, float *obs,
                        NevoStepResult *out) {
    const BrokenParams *bp = nevo_env_params(env);
    BrokenState *s = state;
    s->t++;
    s->x += action[0] == 0.0f ? -0.01f : 0.01f;
    broken_obs(s, obs);
    out->reward = 1.0f;
    out->terminated = false;
    out->truncated = false;
    if (s->t >= bp->nan_step) {
        if (bp->bad_reward) out->reward = INFINITY;
        else obs[1] = NAN;
    }
}

static const char *const broken_options[] = {"nan_step", "bad_reward", NULL};

static const NevoEnvClass broken_class = {
    .spec =
        {
            .name = "Broken-v0",
            .summary = "a test env that emits NaN",
            .obs_rank = 1,
            .obs_shape = {3},
            .obs_dim = 3,
            .action_kind = NEVO_SPACE_DISCRETE,
            .n_actions = 2,
            .action_dim = 1,
            .max_steps = 50,
            .bc_dim = 2,
        },
    .state_size = sizeof(BrokenState),
    .params_size = sizeof(BrokenParams),
    .option_names = broken_options,
    .configure = broken_configure,
    .reset = broken_reset,
    .step = broken_step,
};

static NevoEnv *broken_env(int nan_step, int bad_reward) {
    NevoEnvOption opts[2];
    memset(opts, 0, sizeof opts);
    strcpy(opts[0].key, "nan_step");
    opts[0].value = nan_step;
    strcpy(opts[1].key, "bad_reward");
    opts[1].value = bad_reward;
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new_from_class(&broken_class, opts, 2, &env, &err) == NEVO_OK, "%s", err.msg);
    return env;
}

/* Evaluates n tasks of networks 0.. on env (pipeline depth 1, or 2 when slots is
 * negative); returns the status, message in err. */
static NevoStatus run_tasks(NevoEnv *env, int threads, int slots, int n, NevoError *err) {
    int depth = slots < 0 ? 2 : 1;
    slots = abs(slots);
    NevoPolicy *p = small_policy(env);
    size_t stride;
    float *params = population(p, &stride);
    NevoTask tasks[N_TASKS];
    make_tasks(tasks, 0);
    tasks[0].seed = 1234; /* the task a single-task run names */
    NevoPool *pool = nevo_pool_new(threads);
    NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, slots);
    nevo_evaluator_set_pipeline(ev, depth);
    NevoEpisode res[N_TASKS];
    memset(err, 0, sizeof *err);
    NevoStatus st = nevo_evaluate(ev, params, stride, tasks, n, res, NULL, err);
    nevo_evaluator_free(ev);
    nevo_pool_free(pool);
    free(params);
    nevo_policy_free(p);
    return st;
}

TEST(eval_nan_observation_is_numeric_error) {
    NevoError err;
    /* healthy until step 60 > the time limit of 50: fine */
    NevoEnv *env = broken_env(60, 0);
    CHECK_MSG(run_tasks(env, 1, 4, N_TASKS, &err) == NEVO_OK, "%s", err.msg);
    nevo_env_free(env);

    env = broken_env(5, 0);
    CHECK(run_tasks(env, 1, 1, 1, &err) == NEVO_ERR_NUMERIC);
    CHECK(err.status == NEVO_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "Broken-v0");
    CHECK_CONTAINS(err.msg, "non-finite");
    CHECK_CONTAINS(err.msg, "network 0");
    CHECK_CONTAINS(err.msg, "seed 1234");
    CHECK_CONTAINS(err.msg, "step 5");
    /* many tasks on several threads: still one clean error */
    for (int threads = 1; threads <= 3; threads++)
        for (int slots = 3; slots >= -3; slots -= 6) { /* fused and pipelined */
            CHECK(run_tasks(env, threads, slots, N_TASKS, &err) == NEVO_ERR_NUMERIC);
            CHECK_CONTAINS(err.msg, "Broken-v0");
            CHECK_CONTAINS(err.msg, "step 5");
        }
    nevo_env_free(env);

    /* at reset */
    env = broken_env(0, 0);
    CHECK(run_tasks(env, 1, 1, 1, &err) == NEVO_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "Broken-v0");
    CHECK_CONTAINS(err.msg, "reset");
    CHECK(run_tasks(env, 3, 16, N_TASKS, &err) == NEVO_ERR_NUMERIC);
    CHECK(run_tasks(env, 2, -4, N_TASKS, &err) == NEVO_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "reset");
    nevo_env_free(env);

    /* an infinite reward */
    env = broken_env(3, 1);
    CHECK(run_tasks(env, 1, 2, 1, &err) == NEVO_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "Broken-v0");
    CHECK_CONTAINS(err.msg, "step 3");
    nevo_env_free(env);
}

/* A NaN in a network's parameters is a policy fault; the evaluator stays usable. */
TEST(eval_nan_policy_output) {
    NevoEnv *env = open_env("CartPole-v1");
    NevoPolicy *p = small_policy(env);
    size_t stride;
    float *params = population(p, &stride);
    NevoTask tasks[N_TASKS];
    make_tasks(tasks, 0);
    NevoEpisode ref[N_TASKS];
    for (int i = 0; i < N_TASKS; i++) ref_episode(env, p, params, stride, &tasks[i], &ref[i], NULL);
    NevoPool *pool = nevo_pool_new(2);
    for (int depth = 1; depth <= 2; depth++) {
        NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 3);
        nevo_evaluator_set_pipeline(ev, depth);
        /* the output layer's first bias of network 13 */
        size_t bias = p->layers[p->n_layers - 1].b_off;
        float saved = params[13 * stride + bias];
        params[13 * stride + bias] = NAN;
        NevoEpisode res[N_TASKS];
        NevoError err = {0};
        CHECK(nevo_evaluate(ev, params, stride, tasks, N_TASKS, res, NULL, &err) == NEVO_ERR_NUMERIC);
        CHECK_CONTAINS(err.msg, "policy");
        CHECK_CONTAINS(err.msg, "CartPole-v1");
        CHECK_CONTAINS(err.msg, "network 13");
        params[13 * stride + bias] = saved;
        memset(&err, 0, sizeof err);
        CHECK_MSG(nevo_evaluate(ev, params, stride, tasks, N_TASKS, res, NULL, &err) == NEVO_OK, "%s", err.msg);
        for (int i = 0; i < N_TASKS; i++) check_same_episode(&res[i], &ref[i], i, "after a failed call");
        nevo_evaluator_free(ev);
    }
    nevo_pool_free(pool);
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* --- observation recording ---------------------------------------------------------- */

/* Flagged tasks record the observations their policy was fed: the reset observation and
 * every non-final one, so count = length (as OpenAI ES's rollout saves `ob` before each
 * step); the final observation, never acted on, is not recorded. Unflagged tasks'
 * stats stay untouched. */
TEST(eval_record_obs) {
    NevoEnv *env = open_env("CartPole-v1");
    NevoPolicy *p = small_policy(env);
    int D = nevo_env_spec(env)->obs_dim;
    size_t stride;
    float *params = population(p, &stride);
    NevoTask tasks[N_TASKS];
    make_tasks(tasks, 3);
    NevoEpisode ref[N_TASKS];
    NevoObsStats ref_stats[N_TASKS];
    for (int i = 0; i < N_TASKS; i++) {
        nevo_obs_stats_init(&ref_stats[i], D);
        ref_episode(env, p, params, stride, &tasks[i], &ref[i],
                    tasks[i].flags & NEVO_TASK_RECORD_OBS ? &ref_stats[i] : NULL);
    }
    static const int threads[2] = {1, 3}, slots[2] = {1, 5};
    for (int a = 0; a < 2; a++) {
        NevoPool *pool = nevo_pool_new(threads[a]);
        NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, slots[a]);
        NevoObsStats stats[N_TASKS];
        for (int i = 0; i < N_TASKS; i++) nevo_obs_stats_init(&stats[i], D);
        NevoEpisode res[N_TASKS];
        NevoError err = {0};
        CHECK(nevo_evaluate(ev, params, stride, tasks, N_TASKS, res, stats, &err) == NEVO_OK);
        for (int i = 0; i < N_TASKS; i++) {
            check_same_episode(&res[i], &ref[i], i, "record_obs");
            if (tasks[i].flags & NEVO_TASK_RECORD_OBS) {
                CHECK_MSG(stats[i].count == res[i].length, "task %d: %g observations for length %d", i,
                          stats[i].count, res[i].length);
                CHECK(memcmp(stats[i].sum, ref_stats[i].sum, sizeof(double) * D) == 0);
                CHECK(memcmp(stats[i].sumsq, ref_stats[i].sumsq, sizeof(double) * D) == 0);
            } else {
                CHECK(stats[i].count == 0.0);
                for (int k = 0; k < D; k++) CHECK(stats[i].sum[k] == 0.0 && stats[i].sumsq[k] == 0.0);
            }
        }
        for (int i = 0; i < N_TASKS; i++) nevo_obs_stats_free(&stats[i]);
        nevo_evaluator_free(ev);
        nevo_pool_free(pool);
    }
    for (int i = 0; i < N_TASKS; i++) nevo_obs_stats_free(&ref_stats[i]);
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* Tasks flagged NEVO_TASK_RECORD_STATES keep the observations the reference fed its
 * policy, thinned as nevo_states_add does (by hand: 11 offered to a cap of 4 keep steps
 * 0, 4 and 8), whatever the threads and slots, a slot's earlier episode forgotten. */
TEST(eval_record_states) {
    NevoStates h;
    nevo_states_init(&h, 1, 4);
    for (int t = 0; t < 11; t++) {
        float x = (float)t;
        nevo_states_add(&h, &x);
    }
    CHECK(h.n == 3 && h.obs[0] == 0.0f && h.obs[1] == 4.0f && h.obs[2] == 8.0f && h.stride == 4);
    nevo_states_free(&h);
    NevoEnv *env = open_env("CartPole-v1");
    NevoPolicy *p = small_policy(env);
    int D = nevo_env_spec(env)->obs_dim, cap = 7;
    size_t stride;
    float *params = population(p, &stride);
    NevoTask tasks[N_TASKS];
    make_tasks(tasks, 0);
    for (int i = 0; i < N_TASKS; i++) tasks[i].flags = i % 2 ? NEVO_TASK_RECORD_STATES : 0;
    NevoEpisode ref[N_TASKS];
    NevoStates ref_states[N_TASKS];
    for (int i = 0; i < N_TASKS; i++) {
        nevo_states_init(&ref_states[i], D, cap);
        ref_episode_states(env, p, params, stride, &tasks[i], &ref[i], NULL, &ref_states[i]);
    }
    NevoNet nets[N_NETS];
    for (int j = 0; j < N_NETS; j++) nets[j] = (NevoNet){.kind = NEVO_NET_BASE, .base = j};
    NevoTaskSet ts;
    nevo_taskset_for_policy(&ts, p, env);
    ts.n_bases = ts.n_nets = N_NETS;
    ts.bases = params;
    ts.base_stride = stride;
    ts.nets = nets;
    ts.n_tasks = N_TASKS;
    ts.tasks = tasks;
    ts.states_cap = cap;
    static const int threads[2] = {1, 3}, slots[2] = {1, 5};
    for (int a = 0; a < 2; a++) {
        NevoPool *pool = nevo_pool_new(threads[a]);
        NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, slots[a]);
        NevoStates states[N_TASKS];
        memset(states, 0, sizeof states);
        NevoEpisode res[N_TASKS];
        NevoError err = {0};
        CHECK(nevo_evaluate_tasks(ev, &ts, res, NULL, states, &err) == NEVO_ERR_INVALID); /* no room */
        CHECK_CONTAINS(err.msg, "keeps states");
        for (int i = 0; i < N_TASKS; i++)
            if (tasks[i].flags) nevo_states_init(&states[i], D, cap);
        for (int round = 0; round < 2; round++) /* the second over states the first filled */
            CHECK_MSG(nevo_evaluate_tasks(ev, &ts, res, NULL, states, &err) == NEVO_OK, "%s", err.msg);
        for (int i = 0; i < N_TASKS; i++) {
            check_same_episode(&res[i], &ref[i], i, "record_states");
            if (!tasks[i].flags) continue;
            CHECK(states[i].n == ref_states[i].n && states[i].n >= (cap + 1) / 2 && states[i].n <= cap);
            CHECK_MSG(memcmp(states[i].obs, ref_states[i].obs, sizeof(float) * (size_t)(states[i].n * D)) == 0,
                      "task %d: the states kept are not the reference's", i);
        }
        for (int i = 0; i < N_TASKS; i++) nevo_states_free(&states[i]);
        nevo_evaluator_free(ev);
        nevo_pool_free(pool);
    }
    for (int i = 0; i < N_TASKS; i++) nevo_states_free(&ref_states[i]);
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* MinAtar keeps the last action across reset (sticky repeats, as the reference does);
 * the evaluator forgets it before every task, so a slot that ran another episode
 * before gives the same episode as a fresh instance. */
TEST(eval_minatar_matches_reference) { check_env_against_reference("minatar/space_invaders", 60, 60); }

/* The default slot count: 16 for a small network, fewer for the MinAtar net (530 KB),
 * so the live networks of a worker fit in half the L2 cache, and never below 2; 16 in
 * the pipelined layout; a count given is kept. */
TEST(eval_default_slots_fit_the_cache) {
    NevoEnv *env = open_env("minatar/breakout");
    NevoPool *pool = nevo_pool_new(1);
    NevoPolicy *small = small_policy(env);
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_conv = 1, c.conv_filters[0] = 16;
    c.n_hidden = 1, c.hidden[0] = 128;
    strcpy(c.activation, "relu");
    strcpy(c.init, "scaled");
    NevoPolicy *big = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_policy_new(nevo_env_spec(env), &c, 0, &big, &err) == NEVO_OK, "%s", err.msg);
    NevoEvaluator *ev = nevo_evaluator_new(env, small, pool, 0);
    CHECK_EQ_INT(nevo_evaluator_slots(ev), 16);
    nevo_evaluator_free(ev);
    ev = nevo_evaluator_new(env, big, pool, 0);
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    int s = nevo_evaluator_slots(ev);
    CHECK_MSG(s >= 1 && s < 16 && (s == 1 || (l2 > 0 && (double)s * 8.0 * (double)big->nparams <= (double)l2)),
              "%d slots for %zu parameters, L2 %ld", s, big->nparams, l2);
    /* pipelined batches keep 16 (hand-offs per batch), and back */
    nevo_evaluator_set_pipeline(ev, 2);
    CHECK_EQ_INT(nevo_evaluator_slots(ev), 16);
    nevo_evaluator_set_pipeline(ev, 1);
    CHECK_EQ_INT(nevo_evaluator_slots(ev), s);
    nevo_evaluator_free(ev);
    ev = nevo_evaluator_new(env, big, pool, 5);
    CHECK_EQ_INT(nevo_evaluator_slots(ev), 5);
    nevo_evaluator_free(ev);
    nevo_policy_free(small), nevo_policy_free(big);
    nevo_pool_free(pool);
    nevo_env_free(env);
}

/* CartPole (60 steps), N_NETS recipe networks with one episode each (seeds from seed)
 * and each episode's reference: the tests of a device's batching. Stays where it was
 * opened (rc.ts points into it). */
typedef struct Firsts {
    NevoEnv *env;
    NevoPolicy *p;
    float *params;
    Recipes rc;
    NevoTask tasks[N_NETS];
    NevoEpisode ref[N_NETS];
    long long frames; /* the references' */
} Firsts;

static void firsts_open(Firsts *f, uint64_t seed) {
    f->env = open_env("CartPole-v1");
    nevo_env_set_max_steps(f->env, 60);
    f->p = small_policy(f->env);
    size_t stride;
    f->params = population(f->p, &stride);
    recipes_open(&f->rc, f->env, f->p, f->params, stride);
    f->frames = 0;
    for (int j = 0; j < N_NETS; j++) {
        f->tasks[j] = (NevoTask){j, 0, nevo_rng_derive(seed, NEVO_RNG_ENV_SEED, 0, (uint32_t)j, 0)};
        ref_episode(f->env, f->p, f->rc.built, f->p->nparams, &f->tasks[j], &f->ref[j], NULL);
        f->frames += f->ref[j].length;
    }
    f->rc.ts.n_tasks = N_NETS, f->rc.ts.tasks = f->tasks;
}

static void firsts_close(Firsts *f) {
    recipes_close(&f->rc);
    free(f->params);
    nevo_policy_free(f->p);
    nevo_env_free(f->env);
}

/* A device backend's small calls run on the CPU backend (nevo_evaluator_set_host_tasks),
 * the logged backend standing for the device: a call of at most max_tasks tasks builds
 * nothing through it, one task more builds each network there; both give the
 * reference's episodes, and the host's calls count in the progress and timing, also
 * where these are set after the host's evaluator was made. */
TEST(eval_small_calls_run_on_the_host) {
    Firsts f;
    firsts_open(&f, 99);
    NevoEnv *env = f.env;
    NevoPolicy *p = f.p;
    Recipes *rc = &f.rc;
    const NevoEpisode *ref = f.ref;
    long long frames = f.frames;
    NevoBackend logged = logged_backend();
    NevoPool *pool = nevo_pool_new(2);
    NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 3);
    nevo_evaluator_set_backend(ev, &logged);
    Progress pr;
    memset(&pr, 0, sizeof pr);
    pthread_mutex_init(&pr.mu, NULL);
    nevo_evaluator_set_progress(ev, on_progress, &pr);
    nevo_evaluator_set_timing(ev, 1);
    for (int k = 0; k < 2; k++) { /* N_NETS tasks: on the host, then on the backend */
        nevo_evaluator_set_host_tasks(ev, N_NETS - k);
        log_reset();
        NevoEpisode res[N_NETS];
        memset(res, 0xCD, sizeof res);
        NevoError err = {0};
        CHECK_MSG(nevo_evaluate_tasks(ev, &rc->ts, res, NULL, NULL, &err) == NEVO_OK, "%s", err.msg);
        for (int j = 0; j < N_NETS; j++) check_same_episode(&res[j], &ref[j], j, k ? "on the backend" : "on the host");
        CHECK_EQ_INT(atomic_load(&build_log.builds), k ? N_NETS : 0);
    }
    NevoEvalTimes t;
    nevo_evaluator_times(ev, &t);
    CHECK_EQ_INT(t.calls, 2);
    CHECK_MSG(t.frames == 2 * frames, "frames %lld, episodes' lengths twice %lld", t.frames, 2 * frames);
    CHECK(t.forward_s > 0.0 && t.env_s > 0.0 && t.build_s > 0.0);
    CHECK_EQ_INT(pr.calls, 2 * N_NETS);
    Progress pr2; /* set again: the host's evaluator takes them too */
    memset(&pr2, 0, sizeof pr2);
    pthread_mutex_init(&pr2.mu, NULL);
    nevo_evaluator_set_progress(ev, on_progress, &pr2);
    nevo_evaluator_set_timing(ev, 1); /* zeroes */
    nevo_evaluator_set_host_tasks(ev, N_NETS);
    NevoEpisode res[N_NETS];
    NevoError err = {0};
    CHECK_MSG(nevo_evaluate_tasks(ev, &rc->ts, res, NULL, NULL, &err) == NEVO_OK, "%s", err.msg);
    nevo_evaluator_times(ev, &t);
    CHECK_EQ_INT(t.calls, 1);
    CHECK_MSG(t.frames == frames, "frames %lld, episodes' lengths %lld", t.frames, frames);
    CHECK_EQ_INT(pr2.calls, N_NETS);
    CHECK_EQ_INT(pr.calls, 2 * N_NETS);
    pthread_mutex_destroy(&pr.mu);
    pthread_mutex_destroy(&pr2.mu);
    nevo_evaluator_free(ev);
    nevo_pool_free(pool);
    logged_ops.done(logged.ctx);
    firsts_close(&f);
}

/* A device's batching sized by a call's tasks a forward thread: the logged backend
 * with 3 slots for up to 10 tasks a thread and 7 for more, one forward thread, and
 * calls of no more tasks than a batch's slots on the host. It keeps the batch count it
 * was given. */
static int sized_batches = -1;
static void sized_batching(void *ctx, const NevoPolicy *p, int per_thread, int batches, int *slots, int *fwd,
                           int *host) {
    (void)ctx, (void)p;
    sized_batches = batches;
    *slots = per_thread > 10 ? 7 : 3;
    *fwd = 1;
    *host = *slots;
}

/* The slots follow the first call that runs on the device: 3 before it (a call of 3
 * tasks goes to the host and sizes nothing), 7 for its 20 tasks, and they stay for a
 * later call of 10; a caller's own count is kept. The sizing is told the batches (2
 * threads and a forward thread: 3; before any call, 0). Every call gives the
 * reference's episodes, the host's call building nothing through the backend. */
TEST(eval_device_slots_sized_by_the_first_call) {
    Firsts f;
    firsts_open(&f, 98);
    NevoBackend logged = logged_backend();
    logged_ops.batching = sized_batching;
    NevoPool *pool = nevo_pool_new(2);
    for (int asked = 0; asked <= 5; asked += 5) {
        NevoEvaluator *ev = nevo_evaluator_new(f.env, f.p, pool, asked);
        nevo_evaluator_set_backend(ev, &logged);
        CHECK_EQ_INT(sized_batches, 0);
        CHECK_EQ_INT(nevo_evaluator_slots(ev), asked ? 5 : 3);
        static const int counts[3] = {3, N_NETS, 10}, slots[3] = {3, 7, 7};
        for (int k = 0; k < 3; k++) {
            f.rc.ts.n_tasks = counts[k];
            log_reset();
            NevoEpisode res[N_NETS];
            memset(res, 0xCD, sizeof res);
            NevoError err = {0};
            CHECK_MSG(nevo_evaluate_tasks(ev, &f.rc.ts, res, NULL, NULL, &err) == NEVO_OK, "%s", err.msg);
            for (int j = 0; j < counts[k]; j++) check_same_episode(&res[j], &f.ref[j], j, "slots sized");
            CHECK_EQ_INT(nevo_evaluator_slots(ev), asked ? 5 : slots[k]);
            CHECK_EQ_INT(sized_batches, k ? 3 : 0);
            CHECK_MSG((atomic_load(&build_log.builds) > 0) == (k > 0), "call %d: %d builds through the backend", k,
                      atomic_load(&build_log.builds)); /* the host's call: none */
        }
        nevo_evaluator_free(ev);
    }
    nevo_pool_free(pool);
    logged_ops.done(logged.ctx);
    firsts_close(&f);
}

/* A device's slots (nevo_device_slots), on the cuda backend's figures (256 to 1024) and
 * a MinAtar net's slot (about 0.53 MB) over 24 batches (16 threads and 8 forward
 * threads): by tasks a forward thread on an H200's 140 GB, then by memory. */
TEST(device_slots_follow_tasks_then_memory) {
    const size_t slot = 530000, big = 140000000000u;
    static const int per_thread[5] = {0, 512, 1024, 4096, 8192}, want[5] = {256, 256, 512, 1024, 1024};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(nevo_device_slots(per_thread[i], 24, slot, big, 256, 1024), want[i]);
    /* 8 GB free: 512 slots would take 6.5 GB, more than half; 256 take 3.3 */
    CHECK_EQ_INT(nevo_device_slots(1024, 24, slot, 8000000000u, 256, 1024), 256);
    /* half the free memory exactly is allowed, a byte less is not */
    CHECK_EQ_INT(nevo_device_slots(8192, 2, 100, 4 * 1024 * 100, 256, 1024), 1024);
    CHECK_EQ_INT(nevo_device_slots(8192, 2, 100, 4 * 1024 * 100 - 1, 256, 1024), 512);
    /* a network over half the free memory gets one slot; no batch count, no bound; no
     * overflow where the product passes 2^64 */
    CHECK_EQ_INT(nevo_device_slots(8192, 24, (size_t)1 << 33, 8000000000u, 256, 1024), 1);
    CHECK_EQ_INT(nevo_device_slots(8192, 0, slot, 0, 256, 1024), 1024);
    CHECK_EQ_INT(nevo_device_slots(8192, 1 << 20, (size_t)1 << 50, big, 256, 1024), 1);
}

/* A machine's ranks over its devices (nevo_device_place): each device's sharers are the
 * ranks a count of the placements finds on it, the devices' counts differ by at most
 * one, and a device's memory share (nevo_device_share) is the free memory or, where
 * other ranks share the device, at most their share of the total. */
TEST(device_place_spreads_a_machines_ranks) {
    int sharers;
    CHECK_EQ_INT(nevo_device_place(0, 1, 1, &sharers), 0);
    CHECK_EQ_INT(sharers, 1);
    CHECK_EQ_INT(nevo_device_place(5, 8, 8, &sharers), 5); /* a rank a device */
    CHECK_EQ_INT(sharers, 1);
    CHECK_EQ_INT(nevo_device_place(13, 16, 8, &sharers), 5); /* two a device */
    CHECK_EQ_INT(sharers, 2);
    CHECK_EQ_INT(nevo_device_place(4, 5, 2, &sharers), 0); /* 0, 2, 4 on device 0; 1, 3 on 1 */
    CHECK_EQ_INT(sharers, 3);
    CHECK_EQ_INT(nevo_device_place(3, 5, 2, &sharers), 1);
    CHECK_EQ_INT(sharers, 2);
    CHECK_EQ_INT(nevo_device_place(2, 3, 8, &sharers), 2); /* fewer ranks than devices */
    CHECK_EQ_INT(sharers, 1);
    for (int size = 1; size <= 12; size++)
        for (int devices = 1; devices <= 9; devices++) {
            int count[9] = {0}, claimed[9] = {0};
            for (int r = 0; r < size; r++) {
                int d = nevo_device_place(r, size, devices, &sharers);
                CHECK(d >= 0 && d < devices);
                count[d]++;
                claimed[d] = sharers;
            }
            int lo = size, hi = 0;
            for (int d = 0; d < devices; d++) {
                if (count[d]) CHECK_EQ_INT(claimed[d], count[d]);
                lo = count[d] < lo ? count[d] : lo;
                hi = count[d] > hi ? count[d] : hi;
            }
            CHECK(hi - lo <= 1);
        }
    NevoBackend *cpu = NULL;
    NevoError err = {0};
    char where[16];
    CHECK(nevo_backend_new_on_node("cpu", 2, 3, &cpu, &err) == NEVO_OK);
    nevo_backend_describe(cpu, where, sizeof where);
    CHECK(strcmp(where, "cpu") == 0);
    nevo_backend_free(cpu);
    const size_t gb = 1000000000u;
    CHECK(nevo_device_share(139 * gb, 140 * gb, 1) == 139 * gb);
    CHECK(nevo_device_share(139 * gb, 140 * gb, 2) == 70 * gb);  /* the first of two to size */
    CHECK(nevo_device_share(69 * gb, 140 * gb, 2) == 69 * gb);   /* the second, after the first's 70 */
    CHECK(nevo_device_share(139 * gb, 140 * gb, 0) == 139 * gb); /* no count: one */
}

/* Timing (for benchmarks) adds up and never changes results. */
TEST(eval_timing_sums_and_changes_nothing) {
    NevoEnv *env = open_env("CartPole-v1");
    NevoPolicy *p = small_policy(env);
    size_t stride;
    float *params = population(p, &stride);
    NevoTask tasks[N_TASKS];
    make_tasks(tasks, 0);
    NevoPool *pool = nevo_pool_new(2);
    for (int depth = 1; depth <= 2; depth++) { /* fused, then pipelined */
        NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 4);
        nevo_evaluator_set_pipeline(ev, depth);
        NevoEpisode plain[N_TASKS], timed[N_TASKS];
        NevoError err = {0};
        CHECK(nevo_evaluate(ev, params, stride, tasks, N_TASKS, plain, NULL, &err) == NEVO_OK);
        NevoEvalTimes t;
        nevo_evaluator_times(ev, &t);
        CHECK(t.calls == 0 && t.frames == 0 && t.wall_s == 0.0); /* off by default */
        nevo_evaluator_set_timing(ev, 1);
        long long want = 0;
        for (int k = 0; k < 2; k++) {
            CHECK(nevo_evaluate(ev, params, stride, tasks, N_TASKS, timed, NULL, &err) == NEVO_OK);
            for (int i = 0; i < N_TASKS; i++) {
                check_same_episode(&timed[i], &plain[i], i, "timing on");
                want += timed[i].length;
            }
        }
        nevo_evaluator_times(ev, &t);
        CHECK_EQ_INT(t.calls, 2);
        CHECK_EQ_INT(t.threads, 2);
        CHECK_MSG(t.frames == want, "frames %lld, episodes' lengths %lld", t.frames, want);
        CHECK(t.wall_s > 0.0 && t.forward_s > 0.0 && t.env_s > 0.0 && t.build_s == 0.0);
        CHECK_MSG(t.forward_s + t.env_s <= t.threads * t.wall_s * 1.0001, "forward %g + env %g > %d x wall %g",
                  t.forward_s, t.env_s, t.threads, t.wall_s);
        if (depth > 1) /* thread 0 runs every forward, thread 1 every env step */
            CHECK(t.forward_s <= t.wall_s * 1.0001 && t.env_s <= t.wall_s * 1.0001);
        /* built as each episode starts: the builds are timed apart from the env steps */
        Recipes rc;
        recipes_open(&rc, env, p, params, stride);
        NevoTask firsts[N_NETS];
        for (int j = 0; j < N_NETS; j++)
            firsts[j] = (NevoTask){j, 0, nevo_rng_derive(99, NEVO_RNG_ENV_SEED, 0, (uint32_t)j, 0)};
        rc.ts.n_tasks = N_NETS, rc.ts.tasks = firsts;
        CHECK(nevo_evaluate(ev, rc.built, p->nparams, firsts, N_NETS, plain, NULL, &err) == NEVO_OK);
        nevo_evaluator_set_timing(ev, 1); /* zeroes */
        CHECK(nevo_evaluate_tasks(ev, &rc.ts, timed, NULL, NULL, &err) == NEVO_OK);
        for (int i = 0; i < N_NETS; i++) check_same_episode(&timed[i], &plain[i], i, "built, timing on");
        recipes_close(&rc);
        nevo_evaluator_times(ev, &t);
        CHECK(t.calls == 1 && t.forward_s > 0.0 && t.env_s > 0.0 && t.build_s > 0.0);
        CHECK_MSG(t.forward_s + t.env_s + t.build_s <= t.threads * t.wall_s * 1.0001,
                  "forward %g + env %g + build %g > %d x wall %g", t.forward_s, t.env_s, t.build_s, t.threads,
                  t.wall_s);
        nevo_evaluator_set_timing(ev, 1); /* zeroes */
        nevo_evaluator_times(ev, &t);
        CHECK(t.calls == 0 && t.frames == 0 && t.forward_s == 0.0 && t.build_s == 0.0);
        nevo_evaluator_free(ev);
    }
    nevo_pool_free(pool);
    free(params);
    nevo_policy_free(p);
    nevo_env_free(env);
}
