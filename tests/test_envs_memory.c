/* Tests for the memory envs (src/envs/memory_tmaze.c, memory_recall.c): hand-worked episodes,
 * observation by observation and reward by reward, from the rules their headers state. */
#include <string.h>

#include "harness.h"
#include "nevo/env.h"
#include "nevo/rng.h"

enum { L = 10 }; /* the corridor's length */

typedef struct Run {
    NevoEnv *env;
    void *inst;
    float obs[3];
    double ret;
    NevoStepResult r;
} Run;

static void run_open(Run *u, uint64_t seed) {
    NevoError err = {0};
    memset(u, 0, sizeof *u);
    CHECK_MSG(nevo_env_new("memory/tmaze", NULL, 0, &u->env, &err) == NEVO_OK, "%s", err.msg);
    u->inst = calloc(1, nevo_env_instance_size(u->env));
    nevo_env_reset(u->env, u->inst, seed, u->obs);
}

static void run_step(Run *u, int action) {
    float a = (float)action;
    nevo_env_step(u->env, u->inst, &a, u->obs, &u->r);
    u->ret += u->r.reward;
}

static void run_close(Run *u) {
    nevo_env_instance_free(u->env, u->inst);
    free(u->inst);
    nevo_env_free(u->env);
}

static void check_obs(const Run *u, float cl, float cr, float junction) {
    CHECK_MSG(u->obs[0] == cl && u->obs[1] == cr && u->obs[2] == junction, "obs (%g, %g, %g), want (%g, %g, %g)",
              u->obs[0], u->obs[1], u->obs[2], cl, cr, junction);
}

/* A seed of each cue: the first observation shows it, one-hot. */
static uint64_t seed_with_cue(int cue) {
    for (uint64_t seed = 1; seed < 100; seed++) {
        Run u;
        run_open(&u, seed);
        int c = u.obs[1] == 1.0f;
        CHECK(u.obs[0] + u.obs[1] == 1.0f && u.obs[2] == 0.0f);
        run_close(&u);
        if (c == cue) return seed;
    }
    CHECK_MSG(0, "no seed below 100 gives cue %d", cue);
    return 0;
}

TEST(tmaze_spec) {
    const NevoEnvClass *c = nevo_env_find("memory/tmaze");
    CHECK(c != NULL);
    CHECK(c->spec.obs_dim == 3 && c->spec.n_actions == 3 && c->spec.action_kind == NEVO_SPACE_DISCRETE);
    CHECK_EQ_INT(c->spec.max_steps, 4 * (L + 1));
}

/* Forward to the junction, then the cue's turn: 0.9; the other turn: -1.1. The cue is
 * seen once, the corridor shows nothing, the junction says so. */
TEST(tmaze_episodes_by_hand) {
    for (int cue = 0; cue < 2; cue++)
        for (int right = 0; right < 2; right++) {
            Run u;
            run_open(&u, seed_with_cue(cue));
            check_obs(&u, cue == 0, cue == 1, 0);
            for (int t = 0; t < L; t++) {
                run_step(&u, 0);
                CHECK(!u.r.terminated && !u.r.truncated && u.r.reward == -0.01f);
                check_obs(&u, 0, 0, t == L - 1);
            }
            run_step(&u, 1 + right);
            CHECK(u.r.terminated && !u.r.truncated);
            CHECK(u.r.reward == (right == cue ? 1.0f : -1.0f));
            CHECK_NEAR(u.ret, right == cue ? 0.9 : -1.1, 1e-6);
            CHECK_EQ_INT(nevo_env_steps(u.env, u.inst), L + 1);
            float bc;
            nevo_env_bc(u.env, u.inst, u.obs, &bc);
            CHECK(bc == 1.0f);
            run_close(&u);
        }
}

/* A turn in the corridor bumps the wall (it stays, and pays the step), forward at the
 * junction stays there, and an agent that never turns there is cut off at the limit. */
TEST(tmaze_bumps_and_time_limit) {
    Run u;
    run_open(&u, seed_with_cue(1));
    run_step(&u, 1);
    run_step(&u, 2);
    check_obs(&u, 0, 0, 0);
    CHECK(u.r.reward == -0.01f && !u.r.terminated);
    double pos[2];
    nevo_env_get_state(u.env, u.inst, pos);
    CHECK(pos[0] == 0 && pos[1] == 1);
    int steps = 2;
    while (!u.r.terminated && !u.r.truncated) run_step(&u, 0), steps++;
    CHECK(u.r.truncated && !u.r.terminated);
    CHECK_EQ_INT(steps, 4 * (L + 1));
    check_obs(&u, 0, 0, 1);
    nevo_env_get_state(u.env, u.inst, pos);
    CHECK(pos[0] == L);
    CHECK_NEAR(u.ret, -0.01 * 4 * (L + 1), 1e-5);
    run_close(&u);
}

TEST(tmaze_set_state) {
    Run u;
    run_open(&u, 3);
    NevoError err = {0};
    double junction_left[2] = {L, 0};
    CHECK(nevo_env_set_state(u.env, u.inst, junction_left, 5, u.obs, &err) == NEVO_OK);
    check_obs(&u, 0, 0, 1);
    run_step(&u, 1);
    CHECK(u.r.terminated && u.r.reward == 1.0f);
    double bad[2][2] = {{L + 1, 0}, {2, 0.5}};
    for (int i = 0; i < 2; i++) {
        CHECK(nevo_env_set_state(u.env, u.inst, bad[i], 0, u.obs, &err) == NEVO_ERR_INVALID);
        CHECK_MSG(strstr(err.msg, "memory/tmaze: state[") != NULL, "%s", err.msg);
    }
    run_close(&u);
}

/* env option length: the corridor's cells, and with them the time limit; bad values
 * are refused with the option named. */
TEST(tmaze_length_option) {
    NevoEnvOption o = {"length", 3};
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK(nevo_env_new("memory/tmaze", &o, 1, &env, &err) == NEVO_OK);
    CHECK_EQ_INT(nevo_env_spec(env)->max_steps, 16);
    void *inst = calloc(1, nevo_env_instance_size(env));
    float obs[3], a = 0.0f;
    NevoStepResult r;
    nevo_env_reset(env, inst, 5, obs);
    for (int t = 0; t < 3; t++) nevo_env_step(env, inst, &a, obs, &r);
    CHECK(obs[2] == 1.0f);
    nevo_env_instance_free(env, inst);
    free(inst);
    nevo_env_free(env);
    static const double bad[3] = {0, 2.5, 1e6};
    for (int i = 0; i < 3; i++) {
        o.value = bad[i];
        CHECK(nevo_env_new("memory/tmaze", &o, 1, &env, &err) == NEVO_ERR_INVALID);
        CHECK_MSG(strstr(err.msg, "length must be a whole number") != NULL, "%s", err.msg);
    }
}

/* --- memory/recall (src/envs/memory_recall.c) ------------------------------------ */

/* memory/recall with cues K, symbols M, delay D and distractors dis. */
static NevoEnv *recall_env(int K, int M, int D, int dis) {
    NevoEnvOption o[4] = {{"cues", K}, {"symbols", M}, {"delay", D}, {"distractors", dis}};
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new("memory/recall", o, 4, &env, &err) == NEVO_OK, "%s", err.msg);
    return env;
}

/* obs (M + K + 1) is one-hot symbol `sym` (-1: none), position `pos` (-1: none) and the
 * question bit q */
static void check_recall_obs(const float *obs, int M, int K, int sym, int pos, int q, int t) {
    for (int i = 0; i < M + K + 1; i++) {
        float want = i < M ? (i == sym) : i < M + K ? (i - M == pos) : (float)q;
        CHECK_MSG(obs[i] == want, "step %d: obs[%d] = %g, want %g", t, i, obs[i], want);
    }
}

TEST(recall_spec) {
    const NevoEnvClass *c = nevo_env_find("memory/recall");
    CHECK(c != NULL);
    CHECK(c->spec.obs_dim == 2 + 4 + 1 && c->spec.n_actions == 2 && c->spec.action_kind == NEVO_SPACE_DISCRETE);
    CHECK_EQ_INT(c->spec.max_steps, 2 * 4 + 10 + 1);
    NevoEnv *env = recall_env(5, 3, 7, 0);
    const NevoEnvSpec *s = nevo_env_spec(env);
    CHECK(s->obs_dim == 3 + 5 + 1 && s->obs_shape[0] == s->obs_dim && s->n_actions == 3);
    CHECK_EQ_INT(s->max_steps, 18); /* 2K + D and one: the episode always ends first */
    CHECK_EQ_INT(s->state_dim, 3 + 5);
    nevo_env_free(env);
}

/* K = 3 cues of M = 3 symbols, D = 2: the cues are the first K draws below M of the
 * episode's stream, shown with their positions; the delay shows nothing; the recall
 * asks by position; answering cues 0 and 2 right and 1 wrong earns 1/3 at steps 5 and 7,
 * 2/3 in all, and the episode ends with step 8's action. */
TEST(recall_episode_by_hand) {
    enum { K = 3, M = 3, D = 2 };
    NevoEnv *env = recall_env(K, M, D, 0);
    void *inst = calloc(1, nevo_env_instance_size(env));
    for (uint64_t seed = 1; seed <= 4; seed++) {
        NevoRng rng;
        nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
        int cue[K];
        for (int k = 0; k < K; k++) cue[k] = (int)nevo_rng_below(&rng, M);
        float obs[M + K + 1];
        nevo_env_reset(env, inst, seed, obs);
        double ret = 0.0;
        NevoStepResult r = {0};
        for (int t = 0; t < 2 * K + D; t++) {
            if (t < K)
                check_recall_obs(obs, M, K, cue[t], t, 0, t);
            else if (t < K + D)
                check_recall_obs(obs, M, K, -1, -1, 0, t);
            else
                check_recall_obs(obs, M, K, -1, t - K - D, 1, t);
            int k = t - K - D;
            /* before the recall any action; at it the cue, but cue 1 answered wrong */
            float a = (float)(k < 0 ? (t % M) : k == 1 ? (cue[1] + 1) % M : cue[k]);
            CHECK(!r.terminated);
            nevo_env_step(env, inst, &a, obs, &r);
            ret += r.reward;
            float want = k >= 0 && k != 1 ? 1.0f / K : 0.0f;
            CHECK_MSG(r.reward == want, "seed %llu step %d: reward %g, want %g", (unsigned long long)seed, t,
                      r.reward, want);
            CHECK(r.terminated == (t == 2 * K + D - 1) && !r.truncated);
        }
        CHECK_NEAR(ret, 2.0 / 3.0, 1e-6);
        double st[3 + K];
        nevo_env_get_state(env, inst, st);
        CHECK(st[0] == 2 * K + D && st[1] == 2 && st[2] == 0);
        for (int k = 0; k < K; k++) CHECK(st[3 + k] == cue[k]);
        float bc;
        nevo_env_bc(env, inst, obs, &bc);
        CHECK(bc == 2.0f / 3.0f);
    }
    nevo_env_instance_free(env, inst);
    free(inst);
    nevo_env_free(env);
}

/* distractors: the delay's symbols are the draws below M of the stream (key, ENV, t),
 * the key the draw after the cues; positions and the question stay 0; the rest of the
 * episode is as without them. */
TEST(recall_distractors) {
    enum { K = 2, M = 4, D = 30 };
    NevoEnv *env = recall_env(K, M, D, 1);
    void *inst = calloc(1, nevo_env_instance_size(env));
    NevoRng rng;
    nevo_rng_init(&rng, 9, NEVO_RNG_ENV, 0, 0, 0);
    int cue[K];
    for (int k = 0; k < K; k++) cue[k] = (int)nevo_rng_below(&rng, M);
    uint32_t key = nevo_rng_u32(&rng);
    float obs[M + K + 1], a = 0.0f;
    NevoStepResult r;
    nevo_env_reset(env, inst, 9, obs);
    int seen[M] = {0};
    for (int t = 0; t < 2 * K + D; t++) {
        if (t < K) {
            check_recall_obs(obs, M, K, cue[t], t, 0, t);
        } else if (t < K + D) {
            NevoRng d;
            nevo_rng_init(&d, key, NEVO_RNG_ENV, (uint32_t)t, 0, 0);
            int sym = (int)nevo_rng_below(&d, M);
            check_recall_obs(obs, M, K, sym, -1, 0, t);
            seen[sym]++;
        } else {
            check_recall_obs(obs, M, K, -1, t - K - D, 1, t);
        }
        nevo_env_step(env, inst, &a, obs, &r);
    }
    CHECK(r.terminated);
    for (int m = 0; m < M; m++) CHECK_MSG(seen[m] > 0, "symbol %d never shown in %d distractors", m, D);
    double st[3 + K];
    nevo_env_get_state(env, inst, st);
    CHECK(st[2] == key);
    nevo_env_instance_free(env, inst);
    free(inst);
    nevo_env_free(env);
}

/* set_state: a state mid-delay (with distractors) and at the recall shows what the
 * episode shows there and goes on from it; states out of range are refused, named. */
TEST(recall_set_state) {
    enum { K = 2, M = 3, D = 4 };
    NevoEnv *env = recall_env(K, M, D, 1);
    void *inst = calloc(1, nevo_env_instance_size(env)), *ref = calloc(1, nevo_env_instance_size(env));
    float obs[M + K + 1], robs[M + K + 1], a = 0.0f;
    NevoStepResult r;
    nevo_env_reset(env, ref, 5, robs);
    for (int t = 0; t < K + 1; t++) nevo_env_step(env, ref, &a, robs, &r);
    double st[3 + K];
    nevo_env_get_state(env, ref, st);
    NevoError err = {0};
    CHECK_MSG(nevo_env_set_state(env, inst, st, K + 1, obs, &err) == NEVO_OK, "%s", err.msg);
    for (int t = K + 1; t < 2 * K + D; t++) {
        CHECK(memcmp(obs, robs, sizeof obs) == 0);
        a = (float)(t % M);
        NevoStepResult r2;
        nevo_env_step(env, ref, &a, robs, &r);
        nevo_env_step(env, inst, &a, obs, &r2);
        CHECK(r.reward == r2.reward && r.terminated == r2.terminated);
    }
    CHECK(r.terminated);
    double bad[5][3 + K] = {{2 * K + D, 0, 1, 0, 0},  /* past the last step */
                            {K + D + 1, 2, 1, 0, 0},  /* 2 recalled of 1 asked */
                            {0, 0, -1, 0, 0},         /* a key below 0 */
                            {0, 0, 0, 0, 3},          /* a cue past the symbols */
                            {0.5, 0, 0, 0, 0}};
    static const char *const what[5] = {"state[0] (step)", "state[1] (cues recalled)", "state[2] (distractor key)",
                                        "state[4] (cue 1)", "state[0] (step)"};
    for (int i = 0; i < 5; i++) {
        CHECK(nevo_env_set_state(env, inst, bad[i], 0, obs, &err) == NEVO_ERR_INVALID);
        CHECK_MSG(strstr(err.msg, what[i]) != NULL, "%d: %s", i, err.msg);
    }
    nevo_env_instance_free(env, inst);
    nevo_env_instance_free(env, ref);
    free(inst);
    free(ref);
    nevo_env_free(env);
}

/* env options out of range are refused with the option named */
TEST(recall_options_refused) {
    static const NevoEnvOption bad[6] = {{"cues", 0},    {"cues", 17},    {"symbols", 1},
                                         {"delay", -1}, {"delay", 2.5}, {"distractors", 2}};
    for (int i = 0; i < 6; i++) {
        NevoEnv *env = NULL;
        NevoError err = {0};
        CHECK(nevo_env_new("memory/recall", &bad[i], 1, &env, &err) == NEVO_ERR_INVALID);
        CHECK_MSG(strstr(err.msg, bad[i].key) && strstr(err.msg, "must be a whole number"), "%s", err.msg);
    }
}
