/* Tests for the memory envs (src/envs/memory_tmaze.c): hand-worked T-maze episodes,
 * observation by observation and reward by reward, from the rules its header states. */
#include <string.h>

#include "harness.h"
#include "nevo/env.h"

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
