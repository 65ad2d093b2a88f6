/* Tests for MinAtar Asterix, Breakout and Freeway (src/envs/minatar_{asterix,breakout,
 * freeway}.c) against the rules of spec ENVS.md §1.1-1.4 and §1.7, and against the
 * reference implementation's statistical fingerprints (tests/data/minatar/stats.json).
 *
 * Rule tests build a state with set_state (layouts documented at the top of each game's
 * file), step it with exact actions (sticky_prob 0 unless the test is about stickiness)
 * and check the consequence the spec names. Tests about random draws replay the game's
 * stream in a shadow MinatarCommon opened from the same seed, so they check which draws
 * happen, in which order, and what they decide (§1.7). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "envs/minatar.h"
#include "harness.h"
#include "nevo/env.h"
#include "nevo/rng.h"

/* ---------------------------------------------------------------------------------------
 * Fixture */

#define MAX_OBS (10 * 10 * 7)
#define MAX_STATE 64

typedef struct G {
    NevoEnv *env;
    void *inst;
    int C;
    float obs[MAX_OBS];
    double st[MAX_STATE];
} G;

static NevoEnv *make_env(const char *name, double sticky, int ramping, int minimal) {
    NevoEnvOption opts[3] = {{"sticky_prob", sticky}, {"ramping", ramping},
                             {"minimal_actions", minimal}};
    NevoEnv *env = NULL;
    NevoError err = {0};
    NevoStatus st = nevo_env_new(name, opts, 3, &env, &err);
    CHECK_MSG(st == NEVO_OK, "nevo_env_new(%s): %s", name, err.msg);
    return env;
}

static void g_open_opts(G *g, const char *name, double sticky, int ramping, int minimal,
                        uint64_t seed) {
    memset(g, 0, sizeof *g);
    g->env = make_env(name, sticky, ramping, minimal);
    g->C = nevo_env_spec(g->env)->obs_shape[2];
    CHECK(nevo_env_spec(g->env)->state_dim <= MAX_STATE);
    g->inst = nevo_alloc(nevo_env_instance_size(g->env));
    nevo_env_reset(g->env, g->inst, seed, g->obs);
}

/* sticky_prob 0 (exact actions), ramping on, full action set */
static void g_open(G *g, const char *name, uint64_t seed) { g_open_opts(g, name, 0.0, 1, 0, seed); }

static void g_close(G *g) {
    free(g->inst);
    nevo_env_free(g->env);
}

static NevoStepResult g_step(G *g, int a) {
    float act = (float)a;
    NevoStepResult r;
    nevo_env_step(g->env, g->inst, &act, g->obs, &r);
    return r;
}

static double *g_get(G *g) {
    nevo_env_get_state(g->env, g->inst, g->st);
    return g->st;
}

static void g_put(G *g) {
    NevoError err = {0};
    NevoStatus st = nevo_env_set_state(g->env, g->inst, g->st, nevo_env_steps(g->env, g->inst),
                                       g->obs, &err);
    CHECK_MSG(st == NEVO_OK, "set_state: %s", err.msg);
}

/* The class's own state inside the instance: the env layer's header comes first and the
 * state fills the rest (nevo_env_instance_size rounds it up to 16 bytes). */
static const void *g_body(const G *g) {
    const NevoEnvClass *cls = nevo_env_class(g->env);
    return (const char *)g->inst + nevo_env_instance_size(g->env) - (cls->state_size + 15) / 16 * 16;
}

static float g_cell(const G *g, int y, int x, int ch) { return g->obs[(y * 10 + x) * g->C + ch]; }

static int g_count(const G *g, int ch) {
    int n = 0;
    for (int cell = 0; cell < 100; cell++) n += g->obs[cell * g->C + ch] != 0.0f;
    return n;
}

/* Every observation value is 0 or 1 and equals the expected plane. */
static void check_obs(const G *g, const float *expected) {
    for (int i = 0; i < 100 * g->C; i++)
        CHECK_MSG(g->obs[i] == expected[i], "obs[y=%d][x=%d][ch=%d] = %g, expected %g",
                  i / g->C / 10, i / g->C % 10, i % g->C, g->obs[i], expected[i]);
}

static void expect_set(float *e, int C, int y, int x, int ch) { e[(y * 10 + x) * C + ch] = 1.0f; }

/* ---------------------------------------------------------------------------------------
 * State layouts (see the purpose block of each game file) */

enum { S_LAST = 0, S_TERM = 1 };
enum { AX_PX = 2, AX_PY, AX_SPAWN_SPEED, AX_SPAWN_TIMER, AX_MOVE_SPEED, AX_MOVE_TIMER,
       AX_RAMP_TIMER, AX_RAMP_INDEX, AX_SLOTS };
enum { BR_BX = 2, BR_BY, BR_DIR, BR_LX, BR_LY, BR_PAD, BR_STRIKE, BR_BRICKS };
enum { FW_POS = 2, FW_MT, FW_TT, FW_CARS };

#define AX_SLOT(i) (AX_SLOTS + 4 * (i)) /* present, x, dir_right, is_gold */
#define BR_BRICK(y, x) (BR_BRICKS + 10 * ((y) - 1) + (x))
#define FW_CAR(i) (FW_CARS + 3 * (i)) /* x, timer, signed speed */

enum { N_ = 0, L_ = 1, U_ = 2, R_ = 3, D_ = 4, F_ = 5 };

static void ax_entity(double *st, int slot, int x, int right, int gold) {
    st[AX_SLOT(slot)] = 1;
    st[AX_SLOT(slot) + 1] = x;
    st[AX_SLOT(slot) + 2] = right;
    st[AX_SLOT(slot) + 3] = gold;
}

static void ax_clear(double *st) {
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++) st[AX_SLOT(i) + k] = 0;
}

static int ax_n_entities(const double *st) {
    int n = 0;
    for (int i = 0; i < 8; i++) n += st[AX_SLOT(i)] != 0;
    return n;
}

static void br_bricks(double *st, int on) {
    for (int i = 0; i < 30; i++) st[BR_BRICKS + i] = on;
}

static int br_n_bricks(const double *st) {
    int n = 0;
    for (int i = 0; i < 30; i++) n += st[BR_BRICKS + i] != 0;
    return n;
}

/* A Breakout state with the ball at (x, y) heading dir, nothing else in the way. */
static void br_ball(double *st, int x, int y, int dir, int paddle) {
    st[S_TERM] = 0;
    st[BR_BX] = x;
    st[BR_BY] = y;
    st[BR_DIR] = dir;
    st[BR_LX] = x;
    st[BR_LY] = y;
    st[BR_PAD] = paddle;
    st[BR_STRIKE] = 0;
}

static void fw_car(double *st, int i, int x, int timer, int speed) {
    st[FW_CAR(i)] = x;
    st[FW_CAR(i) + 1] = timer;
    st[FW_CAR(i) + 2] = speed;
}

/* ---------------------------------------------------------------------------------------
 * Common rules (§1.1) */

TEST(minatar_abf_specs) {
    static const struct {
        const char *name;
        int C, state_dim, n_minimal;
    } games[3] = {{"minatar/asterix", 4, 42, 5}, {"minatar/breakout", 4, 39, 3},
                  {"minatar/freeway", 7, 29, 3}};
    for (int i = 0; i < 3; i++) {
        const NevoEnvClass *cls = nevo_env_find(games[i].name);
        CHECK_MSG(cls != NULL, "%s not registered", games[i].name);
        const NevoEnvSpec *sp = &cls->spec;
        CHECK(sp->obs_rank == 3);
        CHECK(sp->obs_shape[0] == 10 && sp->obs_shape[1] == 10 && sp->obs_shape[2] == games[i].C);
        CHECK_EQ_INT(sp->obs_dim, 100 * games[i].C);
        CHECK(sp->action_kind == NEVO_SPACE_DISCRETE);
        CHECK_EQ_INT(sp->n_actions, 6);
        CHECK_EQ_INT(sp->action_dim, 1);
        CHECK_EQ_INT(sp->max_steps, 0); /* MinAtar has no step cap (§1.1) */
        CHECK(!sp->has_reward_threshold);
        CHECK_EQ_INT(sp->state_dim, games[i].state_dim);
        CHECK(cls->render_w == 10 && cls->render_h == 10 && cls->render != NULL);
        NevoEnv *env = make_env(games[i].name, 0.1, 1, 0);
        CHECK_EQ_INT(nevo_env_spec(env)->n_actions, 6);
        nevo_env_free(env);
        env = make_env(games[i].name, 0.1, 1, 1);
        CHECK_EQ_INT(nevo_env_spec(env)->n_actions, games[i].n_minimal);
        nevo_env_free(env);
    }
}

/* Minimal sets (§1.1 table): breakout [n,l,r], freeway [n,u,d], asterix [n,l,u,r,d]. */
TEST(minatar_abf_minimal_action_sets) {
    G g;
    g_open_opts(&g, "minatar/breakout", 0.0, 1, 1, 1);
    br_ball(g_get(&g), 5, 5, 0, 4);
    g_put(&g);
    g_step(&g, 2); /* minimal index 2 = right */
    CHECK_EQ_INT(g_get(&g)[BR_PAD], 5);
    g_step(&g, 1); /* left */
    CHECK_EQ_INT(g_get(&g)[BR_PAD], 4);
    g_step(&g, 0);
    CHECK_EQ_INT(g_get(&g)[BR_PAD], 4);
    g_close(&g);

    g_open_opts(&g, "minatar/freeway", 0.0, 1, 1, 1);
    double *st = g_get(&g);
    st[FW_MT] = 0;
    st[FW_POS] = 9;
    for (int i = 0; i < 8; i++) fw_car(st, i, 0, 5, -5);
    g_put(&g);
    g_step(&g, 1); /* minimal index 1 = up */
    CHECK_EQ_INT(g_get(&g)[FW_POS], 8);
    g.st[FW_MT] = 0;
    g_put(&g);
    g_step(&g, 2); /* down */
    CHECK_EQ_INT(g_get(&g)[FW_POS], 9);
    g_close(&g);

    g_open_opts(&g, "minatar/asterix", 0.0, 1, 1, 1);
    g_step(&g, 4); /* down */
    CHECK_EQ_INT(g_get(&g)[AX_PY], 6);
    g_step(&g, 3); /* right */
    CHECK_EQ_INT(g_get(&g)[AX_PX], 6);
    g_close(&g);
}

/* §1.1 sticky actions: a draw every step; below sticky_prob the previous executed action
 * is repeated; last_action is what was executed; reset keeps it (as the reference
 * does) and nevo_env_forget clears it (what the evaluator does before each task). */
TEST(minatar_abf_sticky_actions) {
    G g;
    /* always sticky: the agent's actions never take effect, the start action 0 repeats */
    g_open_opts(&g, "minatar/asterix", 1.0, 1, 0, 7);
    for (int k = 0; k < 5; k++) g_step(&g, R_);
    CHECK_EQ_INT(g_get(&g)[AX_PX], 5);
    CHECK_EQ_INT(g.st[S_LAST], 0);
    /* a stored last_action is what the sticky rule repeats */
    g.st[S_LAST] = R_;
    g_put(&g);
    g_step(&g, L_);
    CHECK_EQ_INT(g_get(&g)[AX_PX], 6);
    CHECK_EQ_INT(g.st[S_LAST], R_);
    /* reset keeps last_action: a sticky first step repeats the previous episode's */
    nevo_env_reset(g.env, g.inst, 7, g.obs);
    CHECK_EQ_INT(g_get(&g)[S_LAST], R_);
    g_step(&g, L_);
    CHECK_EQ_INT(g_get(&g)[AX_PX], 6);
    /* forget starts the next episode as a fresh instance would */
    nevo_env_forget(g.env, g.inst);
    nevo_env_reset(g.env, g.inst, 7, g.obs);
    CHECK_EQ_INT(g_get(&g)[S_LAST], 0);
    g_step(&g, R_);
    CHECK_EQ_INT(g_get(&g)[AX_PX], 5);
    g_close(&g);

    /* sticky 0.5: replay the stream; each step's first draw decides */
    for (uint64_t seed = 1; seed <= 5; seed++) {
        g_open_opts(&g, "minatar/asterix", 0.5, 1, 0, seed);
        MinatarCommon sh;
        minatar_reset_common(&sh, seed);
        int last = 0, x = 5, repeats = 0;
        for (int k = 1; k <= 10; k++) { /* no spawn before step 11, so no other draws */
            int want = (k % 3 == 0) ? L_ : R_;
            int a = minatar_rand(&sh) < 0.5 ? last : want;
            repeats += a != want;
            last = a;
            if (a == L_ && x > 0) x--;
            if (a == R_ && x < 9) x++;
            g_step(&g, want);
            CHECK_EQ_INT(g_get(&g)[AX_PX], x);
            CHECK_EQ_INT(g.st[S_LAST], a);
        }
        CHECK(repeats < 10);
        g_close(&g);
    }
}

/* An ended game returns (0, terminal) and changes nothing but last_action (§1.1); the
 * env layer makes later steps no-ops too. */
TEST(minatar_abf_terminal_step_is_noop) {
    const char *names[3] = {"minatar/asterix", "minatar/breakout", "minatar/freeway"};
    for (int i = 0; i < 3; i++) {
        G g;
        g_open(&g, names[i], 3);
        g_step(&g, N_);
        double *st = g_get(&g);
        st[S_TERM] = 1;
        g_put(&g);
        double before[MAX_STATE];
        memcpy(before, g.st, sizeof before);
        float obs_before[MAX_OBS];
        memcpy(obs_before, g.obs, sizeof obs_before);
        NevoStepResult r = g_step(&g, R_);
        CHECK(r.reward == 0.0f && r.terminated);
        g_get(&g);
        CHECK_EQ_INT(g.st[S_LAST], R_);
        for (int k = 1; k < nevo_env_spec(g.env)->state_dim; k++)
            CHECK_MSG(g.st[k] == before[k], "%s state[%d] changed", names[i], k);
        CHECK(memcmp(obs_before, g.obs, sizeof(float) * 100 * (size_t)g.C) == 0);
        r = g_step(&g, L_); /* the env layer: no-op */
        CHECK(r.reward == 0.0f && r.terminated);
        g_close(&g);
    }
}

/* set_state rejects values that are not integers or out of range. */
TEST(minatar_abf_set_state_validates) {
    static const struct {
        const char *name;
        int index;
        double value;
    } bad[] = {
        {"minatar/asterix", AX_PY, 0},         {"minatar/asterix", AX_PY, 9},
        {"minatar/asterix", AX_PX, 2.5},       {"minatar/asterix", AX_SLOT(3) + 1, 10},
        {"minatar/asterix", S_LAST, 6},        {"minatar/asterix", AX_SPAWN_SPEED, 0},
        {"minatar/breakout", BR_DIR, 4},       {"minatar/breakout", BR_BX, -1},
        {"minatar/breakout", BR_BY, 9},        {"minatar/breakout", BR_BRICK(2, 3), 0.5},
        {"minatar/freeway", FW_CAR(2) + 2, 6}, {"minatar/freeway", FW_POS, NAN},
        {"minatar/freeway", FW_MT, 4},         {"minatar/freeway", FW_CAR(7), 10},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        G g;
        g_open(&g, bad[i].name, 1);
        g_get(&g);
        g.st[bad[i].index] = bad[i].value;
        NevoError err = {0};
        NevoStatus st = nevo_env_set_state(g.env, g.inst, g.st, 0, g.obs, &err);
        CHECK_MSG(st == NEVO_ERR_INVALID, "%s state[%d] = %g accepted", bad[i].name,
                  bad[i].index, bad[i].value);
        CHECK(strstr(err.msg, bad[i].name) != NULL);
        g_close(&g);
    }
    /* a ball in row 9 is fine once the game has ended */
    G g;
    g_open(&g, "minatar/breakout", 1);
    br_ball(g_get(&g), 3, 9, 2, 0);
    g.st[S_TERM] = 1;
    g_put(&g);
    g_close(&g);
}

/* ---------------------------------------------------------------------------------------
 * Asterix (§1.2) */

/* A quiet Asterix state: no entities, no spawn for a long while, move timer as given. */
static double *ax_quiet(G *g, int px, int py, int move_timer) {
    double *st = g_get(g);
    ax_clear(st);
    st[AX_PX] = px;
    st[AX_PY] = py;
    st[AX_SPAWN_TIMER] = 1000;
    st[AX_MOVE_TIMER] = move_timer;
    return st;
}

TEST(asterix_reset_state) {
    G g;
    g_open(&g, "minatar/asterix", 11);
    const double want[10] = {0, 0, 5, 5, 10, 10, 5, 5, 100, 0};
    g_get(&g);
    for (int i = 0; i < 10; i++) CHECK_EQ_INT(g.st[i], want[i]);
    CHECK_EQ_INT(ax_n_entities(g.st), 0);
    float e[MAX_OBS] = {0};
    expect_set(e, 4, 5, 5, 0);
    check_obs(&g, e);
    g_close(&g);
}

/* l/r/u/d move one cell, x clamped to 0..9 and y to 1..8; n and f do nothing. */
TEST(asterix_player_moves_and_clamps) {
    G g;
    g_open(&g, "minatar/asterix", 2);
    ax_quiet(&g, 5, 5, 3);
    g_put(&g);
    static const struct {
        int a, x, y;
    } seq[] = {{L_, 4, 5}, {R_, 5, 5}, {U_, 5, 4}, {D_, 5, 5}, {N_, 5, 5}, {F_, 5, 5}};
    for (size_t k = 0; k < sizeof seq / sizeof seq[0]; k++) {
        g_step(&g, seq[k].a);
        g_get(&g);
        CHECK_EQ_INT(g.st[AX_PX], seq[k].x);
        CHECK_EQ_INT(g.st[AX_PY], seq[k].y);
        CHECK(g_cell(&g, seq[k].y, seq[k].x, 0) == 1.0f && g_count(&g, 0) == 1);
    }
    ax_quiet(&g, 0, 1, 3);
    g_put(&g);
    g_step(&g, L_);
    g_step(&g, U_);
    CHECK(g_get(&g)[AX_PX] == 0 && g.st[AX_PY] == 1);
    ax_quiet(&g, 9, 8, 3);
    g_put(&g);
    g_step(&g, R_);
    g_step(&g, D_);
    CHECK(g_get(&g)[AX_PX] == 9 && g.st[AX_PY] == 8);
    g_close(&g);
}

/* First spawn at step 11, the next spawn_speed steps later; draws (§1.7): dir (rand <
 * 1/2 -> right, starts at x 0), gold (rand < 1/3), slot = free[randint(n_free)]. The spawned
 * entity moves in its spawn step because the first moves fall on steps 6, 11, 16, ... */
TEST(asterix_spawn_timing_and_draws) {
    for (uint64_t seed = 1; seed <= 30; seed++) {
        G g;
        g_open(&g, "minatar/asterix", seed);
        MinatarCommon sh;
        minatar_reset_common(&sh, seed);
        for (int k = 1; k <= 10; k++) {
            minatar_rand(&sh);
            g_step(&g, N_);
            CHECK_EQ_INT(ax_n_entities(g_get(&g)), 0);
            CHECK_EQ_INT(g.st[AX_SPAWN_TIMER], 10 - k);
        }
        minatar_rand(&sh);
        int right1 = minatar_rand(&sh) < 0.5;
        int gold1 = minatar_rand(&sh) < 1.0 / 3.0;
        int slot1 = minatar_randint(&sh, 0, 8);
        g_step(&g, N_);
        g_get(&g);
        CHECK_EQ_INT(ax_n_entities(g.st), 1);
        CHECK_EQ_INT(g.st[AX_SLOT(slot1)], 1);
        CHECK_EQ_INT(g.st[AX_SLOT(slot1) + 1], right1 ? 1 : 8);
        CHECK_EQ_INT(g.st[AX_SLOT(slot1) + 2], right1);
        CHECK_EQ_INT(g.st[AX_SLOT(slot1) + 3], gold1);
        CHECK_EQ_INT(g.st[AX_SPAWN_TIMER], 9);
        CHECK(g_cell(&g, slot1 + 1, right1 ? 1 : 8, gold1 ? 3 : 1) == 1.0f);
        for (int k = 12; k <= 20; k++) {
            minatar_rand(&sh);
            g_step(&g, N_);
            CHECK_EQ_INT(ax_n_entities(g_get(&g)), 1);
        }
        CHECK_EQ_INT(g.st[AX_SLOT(slot1) + 1], right1 ? 2 : 7); /* moved at step 16 */
        minatar_rand(&sh);
        int right2 = minatar_rand(&sh) < 0.5;
        int gold2 = minatar_rand(&sh) < 1.0 / 3.0;
        int pick = minatar_randint(&sh, 0, 7), slot2 = -1;
        for (int i = 0, n = 0; i < 8; i++)
            if (i != slot1 && n++ == pick) slot2 = i;
        NevoStepResult r = g_step(&g, N_);
        CHECK(!r.terminated);
        g_get(&g);
        CHECK_EQ_INT(ax_n_entities(g.st), 2);
        CHECK_EQ_INT(g.st[AX_SLOT(slot1) + 1], right1 ? 3 : 6);
        CHECK_EQ_INT(g.st[AX_SLOT(slot2)], 1);
        CHECK_EQ_INT(g.st[AX_SLOT(slot2) + 1], right2 ? 1 : 8);
        CHECK_EQ_INT(g.st[AX_SLOT(slot2) + 2], right2);
        CHECK_EQ_INT(g.st[AX_SLOT(slot2) + 3], gold2);
        g_close(&g);
    }
}

/* Spawns come every spawn_speed steps after the timer runs out. */
TEST(asterix_spawn_period) {
    G g;
    g_open(&g, "minatar/asterix", 4);
    double *st = ax_quiet(&g, 5, 5, 1000);
    st[AX_SPAWN_SPEED] = 3;
    st[AX_SPAWN_TIMER] = 0;
    g_put(&g);
    for (int k = 1; k <= 12; k++) {
        int before = ax_n_entities(g_get(&g));
        g_step(&g, N_);
        int spawned = ax_n_entities(g_get(&g)) - before;
        CHECK_EQ_INT(spawned, (k - 1) % 3 == 0); /* steps 1, 4, 7, 10 */
    }
    g_close(&g);
}

/* First entity move at step 6, then every move_speed steps. */
TEST(asterix_move_timing) {
    G g;
    g_open(&g, "minatar/asterix", 3);
    double *st = g_get(&g);
    st[AX_SPAWN_TIMER] = 1000;
    ax_entity(st, 0, 0, 1, 0);
    g_put(&g);
    for (int k = 1; k <= 30; k++) {
        g_step(&g, N_);
        CHECK_EQ_INT(g_get(&g)[AX_SLOT(0) + 1], (k - 1) / 5); /* moves at 6, 11, 16, ... */
    }
    st = ax_quiet(&g, 5, 5, 0);
    st[AX_MOVE_SPEED] = 3;
    ax_entity(st, 7, 9, 0, 1);
    g_put(&g);
    for (int k = 1; k <= 9; k++) {
        g_step(&g, N_);
        CHECK_EQ_INT(g_get(&g)[AX_SLOT(7) + 1], 9 - (k + 2) / 3); /* moves at 1, 4, 7 */
    }
    g_close(&g);
}

/* Ramps at steps 102, 204, ..., 918 with (spawn, move) (9,5) (8,4) (7,4) (6,3) (5,3) (4,2)
 * (3,2) (2,1) (1,1), then no more; none with ramping off. */
TEST(asterix_ramp_timing) {
    static const int want_spawn[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    static const int want_move[10] = {5, 5, 4, 4, 3, 3, 2, 2, 1, 1};
    for (int ramping = 0; ramping <= 1; ramping++) {
        G g;
        g_open_opts(&g, "minatar/asterix", 0.0, ramping, 0, 8);
        for (int k = 1; k <= 1200; k++) {
            NevoStepResult r = g_step(&g, N_);
            CHECK(!r.terminated);
            double *st = g_get(&g);
            int ramps = ramping ? (k / 102 < 9 ? k / 102 : 9) : 0;
            CHECK_MSG(st[AX_SPAWN_SPEED] == want_spawn[ramps] && st[AX_MOVE_SPEED] == want_move[ramps],
                      "step %d: (spawn, move) = (%g, %g), expected (%d, %d)", k,
                      st[AX_SPAWN_SPEED], st[AX_MOVE_SPEED], want_spawn[ramps], want_move[ramps]);
            CHECK_EQ_INT(st[AX_RAMP_INDEX], ramps);
            if (ramping && k == 101) CHECK_EQ_INT(st[AX_RAMP_TIMER], -1);
            if (ramping && k == 102) CHECK_EQ_INT(st[AX_RAMP_TIMER], 100);
            if (!ramping) CHECK_EQ_INT(st[AX_RAMP_TIMER], 100);
            ax_clear(st); /* keep the player alive: only the timers matter here */
            g_put(&g);
        }
        g_close(&g);
    }
}

/* Pre-move pass: the player stepping onto gold collects it (+1, removed). */
TEST(asterix_gold_pickup_before_move) {
    G g;
    g_open(&g, "minatar/asterix", 5);
    double *st = ax_quiet(&g, 5, 5, 3);
    ax_entity(st, 4, 4, 1, 1);
    g_put(&g);
    NevoStepResult r = g_step(&g, L_);
    CHECK(r.reward == 1.0f && !r.terminated);
    CHECK_EQ_INT(g_get(&g)[AX_SLOT(4)], 0);
    CHECK_EQ_INT(g_count(&g, 3) + g_count(&g, 2), 0);
    /* gold already on the player's cell is collected even without a move */
    st = ax_quiet(&g, 2, 7, 3);
    ax_entity(st, 6, 2, 0, 1);
    g_put(&g);
    r = g_step(&g, N_);
    CHECK(r.reward == 1.0f && !r.terminated);
    CHECK_EQ_INT(ax_n_entities(g_get(&g)), 0);
    g_close(&g);
}

/* Pre-move pass: an enemy on the player's cell ends the game, but the step goes on:
 * entities still move and the timers still count. */
TEST(asterix_enemy_contact_before_move) {
    G g;
    g_open(&g, "minatar/asterix", 5);
    double *st = ax_quiet(&g, 5, 5, 0);
    st[AX_SPAWN_TIMER] = 7;
    ax_entity(st, 4, 4, 0, 0); /* enemy at (4, 5) heading left */
    ax_entity(st, 0, 3, 1, 0); /* another in row 1 heading right */
    g_put(&g);
    NevoStepResult r = g_step(&g, L_);
    CHECK(r.terminated && r.reward == 0.0f);
    g_get(&g);
    CHECK_EQ_INT(g.st[S_TERM], 1);
    CHECK_EQ_INT(g.st[AX_SLOT(4)], 1); /* an enemy is not removed */
    CHECK_EQ_INT(g.st[AX_SLOT(4) + 1], 3);
    CHECK_EQ_INT(g.st[AX_SLOT(0) + 1], 4);
    CHECK_EQ_INT(g.st[AX_SPAWN_TIMER], 6);
    CHECK_EQ_INT(g.st[AX_MOVE_TIMER], 4);
    CHECK_EQ_INT(g.st[AX_RAMP_TIMER], 99);
    CHECK(g_cell(&g, 5, 3, 1) == 1.0f && g_cell(&g, 1, 4, 1) == 1.0f);
    g_close(&g);
}

/* Move pass: an entity moving onto the player applies the same rule; a player who
 * stepped away is not hit; the check uses the player's new cell. */
TEST(asterix_contact_after_move) {
    G g;
    g_open(&g, "minatar/asterix", 6);
    double *st = ax_quiet(&g, 5, 5, 0);
    ax_entity(st, 4, 4, 1, 1); /* gold moving right onto (5, 5) */
    g_put(&g);
    NevoStepResult r = g_step(&g, N_);
    CHECK(r.reward == 1.0f && !r.terminated);
    CHECK_EQ_INT(g_get(&g)[AX_SLOT(4)], 0);

    st = ax_quiet(&g, 5, 5, 0);
    ax_entity(st, 4, 6, 0, 0); /* enemy moving left onto (5, 5) */
    g_put(&g);
    r = g_step(&g, N_);
    CHECK(r.terminated && r.reward == 0.0f);

    st = ax_quiet(&g, 5, 5, 0);
    st[S_TERM] = 0;
    ax_entity(st, 4, 4, 1, 0); /* enemy moves into the cell the player leaves */
    g_put(&g);
    r = g_step(&g, U_);
    CHECK(!r.terminated);
    CHECK_EQ_INT(g_get(&g)[AX_SLOT(4) + 1], 5);

    st = ax_quiet(&g, 4, 5, 0);
    ax_entity(st, 4, 5, 0, 0); /* the player walks into an enemy about to move away */
    g_put(&g);
    r = g_step(&g, R_);
    CHECK(r.terminated);

    st = ax_quiet(&g, 4, 5, 3);
    st[S_TERM] = 0;
    ax_entity(st, 4, 6, 0, 0); /* not moving this step: no contact */
    g_put(&g);
    r = g_step(&g, N_);
    CHECK(!r.terminated);
    g_close(&g);
}

/* An entity moving off the grid is removed. */
TEST(asterix_entities_leave_grid) {
    G g;
    g_open(&g, "minatar/asterix", 7);
    double *st = ax_quiet(&g, 5, 5, 0);
    ax_entity(st, 0, 9, 1, 0);
    ax_entity(st, 1, 0, 0, 1);
    ax_entity(st, 2, 9, 0, 0);
    ax_entity(st, 3, 0, 1, 1);
    g_put(&g);
    g_step(&g, N_);
    g_get(&g);
    CHECK_EQ_INT(g.st[AX_SLOT(0)], 0);
    CHECK_EQ_INT(g.st[AX_SLOT(1)], 0);
    CHECK(g.st[AX_SLOT(2)] == 1 && g.st[AX_SLOT(2) + 1] == 8);
    CHECK(g.st[AX_SLOT(3)] == 1 && g.st[AX_SLOT(3) + 1] == 1);
    g_close(&g);
}

/* With every slot taken a spawn does nothing but still draws dir and gold (not the
 * slot); otherwise the slot is chosen among the free ones in ascending order. */
TEST(asterix_spawn_full_and_free_slots) {
    G g;
    uint64_t seed = 9;
    g_open(&g, "minatar/asterix", seed);
    MinatarCommon sh;
    minatar_reset_common(&sh, seed);
    double *st = ax_quiet(&g, 5, 5, 1000);
    for (int i = 0; i < 8; i++) ax_entity(st, i, 2, 1, i & 1);
    st[AX_SPAWN_TIMER] = 0;
    g_put(&g);
    double before[MAX_STATE];
    memcpy(before, g.st, sizeof before);
    minatar_rand(&sh);
    minatar_rand(&sh);
    minatar_rand(&sh);
    g_step(&g, N_);
    g_get(&g);
    for (int k = AX_SLOTS; k < AX_SLOT(8); k++) CHECK(g.st[k] == before[k]);
    CHECK_EQ_INT(g.st[AX_SPAWN_TIMER], 9);

    for (int round = 0; round < 40; round++) {
        int freemask = 1 + (round * 37) % 255;
        st = ax_quiet(&g, 5, 5, 1000);
        int free_slots[8], n_free = 0;
        for (int i = 0; i < 8; i++) {
            if (freemask >> i & 1) free_slots[n_free++] = i;
            else ax_entity(st, i, 2, 1, 0);
        }
        st[AX_SPAWN_TIMER] = 0;
        g_put(&g);
        minatar_rand(&sh);
        int right = minatar_rand(&sh) < 0.5;
        int gold = minatar_rand(&sh) < 1.0 / 3.0;
        int slot = free_slots[minatar_randint(&sh, 0, n_free)];
        g_step(&g, N_);
        g_get(&g);
        CHECK_EQ_INT(ax_n_entities(g.st), 8 - n_free + 1);
        CHECK_EQ_INT(g.st[AX_SLOT(slot)], 1);
        CHECK_EQ_INT(g.st[AX_SLOT(slot) + 1], right ? 0 : 9);
        CHECK_EQ_INT(g.st[AX_SLOT(slot) + 2], right);
        CHECK_EQ_INT(g.st[AX_SLOT(slot) + 3], gold);
    }
    g_close(&g);
}

/* Step order: the spawn comes before the player's move and the pre-move pass, so an
 * entity spawned on the player's cell meets it in the same step. */
TEST(asterix_spawn_meets_player_same_step) {
    int seen[3] = {0, 0, 0}; /* gold collected, enemy contact, spawned on the far side */
    for (uint64_t seed = 1; seed <= 40; seed++) {
        G g;
        g_open(&g, "minatar/asterix", seed);
        MinatarCommon sh;
        minatar_reset_common(&sh, seed);
        double *st = ax_quiet(&g, 0, 5, 1000);
        for (int i = 0; i < 8; i++)
            if (i != 4) ax_entity(st, i, 5, 1, 0); /* only row 5's slot is free */
        st[AX_SPAWN_TIMER] = 0;
        g_put(&g);
        minatar_rand(&sh);
        int right = minatar_rand(&sh) < 0.5;
        int gold = minatar_rand(&sh) < 1.0 / 3.0;
        minatar_randint(&sh, 0, 1);
        NevoStepResult r = g_step(&g, N_);
        g_get(&g);
        if (!right) {
            seen[2]++;
            CHECK(r.reward == 0.0f && !r.terminated && g.st[AX_SLOT(4) + 1] == 9);
        } else if (gold) {
            seen[0]++;
            CHECK(r.reward == 1.0f && !r.terminated && g.st[AX_SLOT(4)] == 0);
        } else {
            seen[1]++;
            CHECK(r.reward == 0.0f && r.terminated && g.st[AX_SLOT(4)] == 1);
        }
        g_close(&g);
    }
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
}

/* Channels: 0 player, 1 enemy, 2 trail (behind the entity, dropped off-grid), 3 gold. */
TEST(asterix_observation) {
    G g;
    g_open(&g, "minatar/asterix", 1);
    double *st = ax_quiet(&g, 3, 2, 3);
    ax_entity(st, 0, 0, 1, 0); /* right-mover at the left edge: no trail */
    ax_entity(st, 1, 5, 1, 1); /* gold, trail at x 4 */
    ax_entity(st, 2, 9, 0, 0); /* left-mover at the right edge: no trail */
    ax_entity(st, 3, 9, 1, 1); /* trail at x 8 */
    ax_entity(st, 5, 0, 0, 0); /* trail at x 1 */
    ax_entity(st, 6, 4, 0, 0); /* trail at x 5 */
    g_put(&g);
    float e[MAX_OBS] = {0};
    expect_set(e, 4, 2, 3, 0);
    expect_set(e, 4, 1, 0, 1);
    expect_set(e, 4, 2, 5, 3);
    expect_set(e, 4, 2, 4, 2);
    expect_set(e, 4, 3, 9, 1);
    expect_set(e, 4, 4, 9, 3);
    expect_set(e, 4, 4, 8, 2);
    expect_set(e, 4, 6, 0, 1);
    expect_set(e, 4, 6, 1, 2);
    expect_set(e, 4, 7, 4, 1);
    expect_set(e, 4, 7, 5, 2);
    check_obs(&g, e);
    uint8_t rgb[300];
    nevo_env_class(g.env)->render(g.env, g_body(&g), rgb);
    CHECK(rgb[(2 * 10 + 3) * 3] | rgb[(2 * 10 + 3) * 3 + 1] | rgb[(2 * 10 + 3) * 3 + 2]);
    CHECK((rgb[0 * 3] | rgb[0 * 3 + 1] | rgb[0 * 3 + 2]) == 0);
    g_close(&g);
}

/* ---------------------------------------------------------------------------------------
 * Breakout (§1.3). Directions: 0 up-left, 1 up-right, 2 down-right, 3 down-left. */

/* Steps a Breakout state and checks the ball's cell and direction afterwards. */
static NevoStepResult br_expect(G *g, int a, int x, int y, int dir) {
    NevoStepResult r = g_step(g, a);
    double *st = g_get(g);
    CHECK_MSG(st[BR_BX] == x && st[BR_BY] == y && st[BR_DIR] == dir,
              "ball (x %g, y %g, dir %g), expected (%d, %d, %d)", st[BR_BX], st[BR_BY],
              st[BR_DIR], x, y, dir);
    CHECK(g_cell(g, y, x, 1) == 1.0f && g_count(g, 1) == 1);
    return r;
}

/* Reset: one randint(2) picks the left start (x 0, down-right) or the right one (x 9,
 * down-left), row 3; paddle 4; rows 1-3 full of bricks; the trail on the ball. */
TEST(breakout_reset) {
    int seen[2] = {0, 0};
    for (uint64_t seed = 0; seed < 40; seed++) {
        G g;
        g_open(&g, "minatar/breakout", seed);
        MinatarCommon sh;
        minatar_reset_common(&sh, seed);
        int side = minatar_randint(&sh, 0, 2);
        seen[side]++;
        double *st = g_get(&g);
        CHECK_EQ_INT(st[BR_BX], side ? 9 : 0);
        CHECK_EQ_INT(st[BR_BY], 3);
        CHECK_EQ_INT(st[BR_DIR], side ? 3 : 2);
        CHECK(st[BR_LX] == st[BR_BX] && st[BR_LY] == st[BR_BY]);
        CHECK_EQ_INT(st[BR_PAD], 4);
        CHECK_EQ_INT(st[BR_STRIKE], 0);
        CHECK_EQ_INT(br_n_bricks(st), 30);
        float e[MAX_OBS] = {0};
        expect_set(e, 4, 9, 4, 0);
        expect_set(e, 4, 3, side ? 9 : 0, 1);
        expect_set(e, 4, 3, side ? 9 : 0, 2);
        for (int y = 1; y <= 3; y++)
            for (int x = 0; x < 10; x++) expect_set(e, 4, y, x, 3);
        check_obs(&g, e);
        g_close(&g);
    }
    CHECK(seen[0] > 0 && seen[1] > 0);
}

/* l and r move the paddle one cell within 0..9; n, u, d, f leave it. */
TEST(breakout_paddle) {
    G g;
    g_open(&g, "minatar/breakout", 1);
    const int starts[3] = {0, 4, 9};
    for (int s = 0; s < 3; s++)
        for (int a = 0; a < 6; a++) {
            double *st = g_get(&g);
            br_ball(st, 5, 5, 0, starts[s]);
            br_bricks(st, 0);
            g_put(&g);
            g_step(&g, a);
            int p = starts[s];
            int want = a == L_ ? (p > 0 ? p - 1 : 0) : a == R_ ? (p < 9 ? p + 1 : 9) : p;
            CHECK_EQ_INT(g_get(&g)[BR_PAD], want);
            CHECK(g_cell(&g, 9, want, 0) == 1.0f && g_count(&g, 0) == 1);
        }
    g_close(&g);
}

/* The ball moves one diagonal cell; the trail marks where it was. */
TEST(breakout_ball_moves_diagonally) {
    static const int dx[4] = {-1, 1, 1, -1}, dy[4] = {-1, -1, 1, 1};
    G g;
    g_open(&g, "minatar/breakout", 1);
    for (int d = 0; d < 4; d++) {
        double *st = g_get(&g);
        br_ball(st, 5, 5, d, 0);
        br_bricks(st, 0);
        g_put(&g);
        CHECK(g_cell(&g, 5, 5, 2) == 1.0f); /* before any move the trail is on the ball */
        br_expect(&g, N_, 5 + dx[d], 5 + dy[d], d);
        CHECK(g_cell(&g, 5, 5, 2) == 1.0f && g_count(&g, 2) == 1);
        CHECK(g.st[BR_LX] == 5 && g.st[BR_LY] == 5);
    }
    g_close(&g);
}

/* Side walls clamp x and flip the horizontal direction. */
TEST(breakout_side_walls) {
    static const int cases[4][5] = {/* x, y, dir -> new dir */ {0, 5, 0, 1},
                                    {0, 5, 3, 2},
                                    {9, 5, 1, 0},
                                    {9, 5, 2, 3}};
    G g;
    g_open(&g, "minatar/breakout", 1);
    for (int c = 0; c < 4; c++) {
        double *st = g_get(&g);
        br_ball(st, cases[c][0], cases[c][1], cases[c][2], 4);
        br_bricks(st, 0);
        g_put(&g);
        int up = cases[c][2] < 2;
        br_expect(&g, N_, cases[c][0], cases[c][1] + (up ? -1 : 1), cases[c][3]);
    }
    g_close(&g);
}

/* The ceiling keeps the ball in row 0 and flips the vertical direction; in a corner
 * both flips apply. */
TEST(breakout_ceiling) {
    static const int cases[4][5] = {/* x, dir -> new x, new dir */ {4, 1, 5, 2},
                                    {4, 0, 3, 3},
                                    {0, 0, 0, 2},
                                    {9, 1, 9, 3}};
    G g;
    g_open(&g, "minatar/breakout", 1);
    for (int c = 0; c < 4; c++) {
        double *st = g_get(&g);
        br_ball(st, cases[c][0], 0, cases[c][1], 4);
        br_bricks(st, 0);
        g_put(&g);
        NevoStepResult r = br_expect(&g, N_, cases[c][2], 0, cases[c][3]);
        CHECK(r.reward == 0.0f && !r.terminated);
    }
    g_close(&g);
}

/* A brick hit without a strike in progress: +1, the brick goes, the ball keeps its
 * horizontal move but stays in its row, vertical flip, strike set; the next step
 * without brick contact clears strike. */
TEST(breakout_brick_break) {
    G g;
    g_open(&g, "minatar/breakout", 1);
    double *st = g_get(&g);
    br_ball(st, 5, 4, 0, 0);
    br_bricks(st, 1);
    g_put(&g);
    NevoStepResult r = br_expect(&g, N_, 4, 4, 3);
    CHECK(r.reward == 1.0f && !r.terminated);
    CHECK_EQ_INT(g.st[BR_BRICK(3, 4)], 0);
    CHECK_EQ_INT(br_n_bricks(g.st), 29);
    CHECK_EQ_INT(g_count(&g, 3), 29);
    CHECK(g_cell(&g, 3, 4, 3) == 0.0f);
    CHECK_EQ_INT(g.st[BR_STRIKE], 1);
    r = br_expect(&g, N_, 3, 5, 3);
    CHECK(r.reward == 0.0f);
    CHECK_EQ_INT(g_get(&g)[BR_STRIKE], 0);

    /* wall and brick in one step: clamp and flip x first, then the brick */
    st = g_get(&g);
    br_ball(st, 0, 4, 0, 5);
    br_bricks(st, 1);
    g_put(&g);
    r = br_expect(&g, N_, 0, 4, 2);
    CHECK(r.reward == 1.0f && g.st[BR_BRICK(3, 0)] == 0);

    /* from above: a downward hit keeps the ball in row 0, then the ceiling */
    st = g_get(&g);
    br_ball(st, 5, 0, 2, 5);
    br_bricks(st, 1);
    g_put(&g);
    r = br_expect(&g, N_, 6, 0, 1);
    CHECK(r.reward == 1.0f && g.st[BR_BRICK(1, 6)] == 0);
    r = br_expect(&g, N_, 7, 0, 2);
    CHECK(r.reward == 0.0f && g.st[BR_STRIKE] == 0);
    g_close(&g);
}

/* Strike semantics: while strike is set (the previous step touched a brick), a brick
 * contact breaks nothing and the ball enters the brick's cell. */
TEST(breakout_strike_passes_into_bricks) {
    G g;
    g_open(&g, "minatar/breakout", 1);
    double *st = g_get(&g);
    br_ball(st, 3, 2, 1, 0);
    br_bricks(st, 1);
    st[BR_BRICK(2, 3)] = 0; /* the ball sits in a gap of row 2 */
    g_put(&g);
    /* up-right into (4, 1): broken, ball back to row 2 at x 4 (a brick cell), down-right */
    NevoStepResult r = br_expect(&g, N_, 4, 2, 2);
    CHECK(r.reward == 1.0f);
    CHECK_EQ_INT(g.st[BR_BRICK(1, 4)], 0);
    CHECK_EQ_INT(g.st[BR_BRICK(2, 4)], 1);
    CHECK_EQ_INT(g.st[BR_STRIKE], 1);
    CHECK(g_cell(&g, 2, 4, 1) == 1.0f && g_cell(&g, 2, 4, 3) == 1.0f);
    /* down-right into brick (5, 3) with strike set: no reward, the brick stays, the ball
     * enters its cell and keeps its direction */
    r = br_expect(&g, N_, 5, 3, 2);
    CHECK(r.reward == 0.0f);
    CHECK_EQ_INT(g.st[BR_BRICK(3, 5)], 1);
    CHECK_EQ_INT(g.st[BR_STRIKE], 1);
    CHECK_EQ_INT(br_n_bricks(g.st), 28);
    /* (6, 4) has no brick: strike clears */
    r = br_expect(&g, N_, 6, 4, 2);
    CHECK(r.reward == 0.0f);
    CHECK_EQ_INT(g.st[BR_STRIKE], 0);

    /* a stored strike with a brick ahead: the ball passes into it */
    st = g_get(&g);
    br_ball(st, 5, 4, 0, 0);
    st[BR_STRIKE] = 1;
    br_bricks(st, 1);
    g_put(&g);
    r = br_expect(&g, N_, 4, 3, 0);
    CHECK(r.reward == 0.0f && br_n_bricks(g.st) == 30 && g.st[BR_STRIKE] == 1);
    g_close(&g);
}

/* Paddle row: ball coming from straight above the paddle (after this step's paddle
 * move) flips vertically; landing on the paddle from the side reverses both
 * components; otherwise the game ends with the ball in row 9. */
TEST(breakout_paddle_bounces) {
    static const struct {
        int x, dir, paddle, a; /* ball in row 8 */
        int nx, ny, ndir, term;
    } cases[] = {
        {4, 3, 4, N_, 3, 8, 0, 0}, /* straight above, heading down-left */
        {4, 2, 4, N_, 5, 8, 1, 0}, /* straight above, heading down-right */
        {4, 2, 3, R_, 5, 8, 1, 0}, /* the paddle moves under the ball this step */
        {3, 2, 4, N_, 4, 8, 0, 0}, /* lands on the paddle from the left */
        {5, 3, 4, N_, 4, 8, 1, 0}, /* lands on the paddle from the right */
        {4, 2, 4, R_, 5, 8, 0, 0}, /* the paddle moves to where it lands */
        {4, 2, 4, L_, 5, 9, 2, 1}, /* the paddle moves away: miss */
        {2, 2, 6, N_, 3, 9, 2, 1}, /* miss */
        {0, 3, 0, N_, 0, 8, 1, 0}, /* wall flip first, then straight bounce */
        {1, 3, 0, N_, 0, 8, 1, 0}, /* lands on the paddle at the wall */
    };
    G g;
    g_open(&g, "minatar/breakout", 1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double *st = g_get(&g);
        br_ball(st, cases[c].x, 8, cases[c].dir, cases[c].paddle);
        br_bricks(st, 1);
        g_put(&g);
        NevoStepResult r = br_expect(&g, cases[c].a, cases[c].nx, cases[c].ny, cases[c].ndir);
        CHECK_MSG(r.terminated == cases[c].term, "case %zu: terminated %d", c, r.terminated);
        CHECK(r.reward == 0.0f);
        CHECK_EQ_INT(g.st[S_TERM], cases[c].term);
    }
    /* after a miss the episode is over: further steps are no-ops */
    double *st = g_get(&g);
    br_ball(st, 2, 8, 2, 6);
    g_put(&g);
    NevoStepResult r = g_step(&g, N_);
    CHECK(r.terminated);
    r = g_step(&g, R_);
    CHECK(r.terminated && r.reward == 0.0f);
    CHECK(g_get(&g)[BR_BY] == 9 && g.st[BR_PAD] == 6);
    g_close(&g);
}

/* With no brick left, rows 1-3 refill when the ball reaches the paddle row, whether it
 * bounces or not, and not earlier. */
TEST(breakout_refill) {
    G g;
    g_open(&g, "minatar/breakout", 1);
    double *st = g_get(&g);
    br_ball(st, 5, 6, 2, 0);
    br_bricks(st, 0);
    g_put(&g);
    br_expect(&g, N_, 6, 7, 2);
    CHECK_EQ_INT(br_n_bricks(g.st), 0);
    br_expect(&g, N_, 7, 8, 2);
    CHECK_EQ_INT(br_n_bricks(g.st), 0);
    NevoStepResult r = br_expect(&g, N_, 8, 9, 2);
    CHECK(r.terminated && r.reward == 0.0f);
    CHECK_EQ_INT(br_n_bricks(g.st), 30);
    CHECK_EQ_INT(g_count(&g, 3), 30);

    st = g_get(&g);
    br_ball(st, 4, 8, 2, 4);
    br_bricks(st, 0);
    g_put(&g);
    r = br_expect(&g, N_, 5, 8, 1);
    CHECK(!r.terminated && r.reward == 0.0f);
    CHECK_EQ_INT(br_n_bricks(g.st), 30);

    st = g_get(&g);
    br_ball(st, 4, 8, 2, 4);
    br_bricks(st, 0);
    st[BR_BRICK(1, 0)] = 1; /* one brick left: no refill */
    g_put(&g);
    br_expect(&g, N_, 5, 8, 1);
    CHECK_EQ_INT(br_n_bricks(g.st), 1);
    g_close(&g);
}

/* The spec's note: a random policy never ends an episode in fewer than 6 steps. */
TEST(breakout_min_episode_length) {
    NevoEnv *env = make_env("minatar/breakout", 0.1, 1, 0);
    void *inst = nevo_alloc(nevo_env_instance_size(env));
    float obs[400];
    int shortest = 1 << 30;
    for (uint32_t ep = 0; ep < 2000; ep++) {
        NevoRng pol;
        nevo_rng_init(&pol, 5, NEVO_RNG_POLICY, 0, 0, ep);
        nevo_env_reset(env, inst, nevo_rng_derive(5, NEVO_RNG_ENV_SEED, 0, 0, ep), obs);
        NevoStepResult r = {0};
        while (!r.terminated) {
            float a = (float)nevo_rng_below(&pol, 6);
            nevo_env_step(env, inst, &a, obs, &r);
        }
        int len = nevo_env_steps(env, inst);
        if (len < shortest) shortest = len;
    }
    CHECK_EQ_INT(shortest, 6);
    free(inst);
    nevo_env_free(env);
}

/* ---------------------------------------------------------------------------------------
 * Freeway (§1.4) */

/* Draws randint(1, 6) eight times, then eight uniforms for the signs (§1.7). */
static void fw_predict_speeds(MinatarCommon *sh, int speed[8]) {
    for (int i = 0; i < 8; i++) speed[i] = minatar_randint(sh, 1, 6);
    for (int i = 0; i < 8; i++) {
        double u = minatar_rand(sh);
        speed[i] *= u > 0.5 ? 1 : (u < 0.5 ? -1 : 0);
    }
}

/* Cars that stay out of column 4 for at least 30 steps. */
static void fw_far_cars(double *st) {
    for (int i = 0; i < 8; i++) fw_car(st, i, 0, 5, -5);
}

/* Reset: cars at x 0 with speeds from the draws and timer |speed|; chicken at row 9;
 * the trail wraps (a right-mover at x 0 leaves it at x 9), in channel 1 + |speed|. */
TEST(freeway_reset) {
    for (uint64_t seed = 0; seed < 20; seed++) {
        G g;
        g_open(&g, "minatar/freeway", seed);
        MinatarCommon sh;
        minatar_reset_common(&sh, seed);
        int speed[8];
        fw_predict_speeds(&sh, speed);
        double *st = g_get(&g);
        CHECK_EQ_INT(st[FW_POS], 9);
        CHECK_EQ_INT(st[FW_MT], 3);
        CHECK_EQ_INT(st[FW_TT], 2500);
        float e[MAX_OBS] = {0};
        expect_set(e, 7, 9, 4, 0);
        for (int i = 0; i < 8; i++) {
            CHECK_EQ_INT(st[FW_CAR(i)], 0);
            CHECK_EQ_INT(st[FW_CAR(i) + 1], abs(speed[i]));
            CHECK_EQ_INT(st[FW_CAR(i) + 2], speed[i]);
            expect_set(e, 7, i + 1, 0, 1);
            expect_set(e, 7, i + 1, speed[i] > 0 ? 9 : 1, 1 + abs(speed[i]));
        }
        check_obs(&g, e);
        g_close(&g);
    }
}

/* The chicken moves only when move_timer is 0: first at step 4, then every 3 steps;
 * reaching row 0 scores +1 and puts it back at row 9. l, r, n, f never move it. */
TEST(freeway_chicken_timing_and_score) {
    G g;
    g_open(&g, "minatar/freeway", 2);
    fw_far_cars(g_get(&g));
    g_put(&g);
    int pos = 9;
    for (int k = 1; k <= 30; k++) {
        NevoStepResult r = g_step(&g, U_);
        int moved = k >= 4 && (k - 4) % 3 == 0;
        if (moved) pos--;
        int scored = pos == 0;
        if (scored) pos = 9;
        CHECK_MSG(r.reward == (float)scored, "step %d reward %g", k, r.reward);
        CHECK_EQ_INT(g_get(&g)[FW_POS], pos);
        CHECK(g_cell(&g, pos, 4, 0) == 1.0f && g_count(&g, 0) == 1);
        CHECK(!r.terminated);
    }
    CHECK_EQ_INT(pos, 9); /* scored at step 28 */

    /* other actions never move it, even with the timer at 0 */
    for (int a = 0; a < 6; a++) {
        if (a == U_ || a == D_) continue;
        double *st = g_get(&g);
        st[FW_POS] = 5;
        st[FW_MT] = 0;
        fw_far_cars(st);
        g_put(&g);
        g_step(&g, a);
        CHECK(g_get(&g)[FW_POS] == 5 && g.st[FW_MT] == 0);
    }
    /* down at row 9 does not move but still restarts the timer */
    double *st = g_get(&g);
    st[FW_POS] = 9;
    st[FW_MT] = 0;
    fw_far_cars(st);
    g_put(&g);
    g_step(&g, D_);
    CHECK(g_get(&g)[FW_POS] == 9 && g.st[FW_MT] == 2);
    g_step(&g, U_);
    g_step(&g, U_);
    CHECK_EQ_INT(g_get(&g)[FW_POS], 9);
    g_step(&g, U_);
    CHECK_EQ_INT(g_get(&g)[FW_POS], 8);
    g_step(&g, D_);
    g_step(&g, D_);
    g_step(&g, D_);
    CHECK_EQ_INT(g_get(&g)[FW_POS], 9);
    g_close(&g);
}

/* Scoring re-draws every car's speed and direction (eight randint, then eight rand),
 * keeps the positions and sets timer = |speed| (this same step then counts it down). */
TEST(freeway_score_rerandomises_cars) {
    uint64_t seed = 12;
    G g;
    g_open(&g, "minatar/freeway", seed);
    MinatarCommon sh;
    minatar_reset_common(&sh, seed);
    int speed[8];
    fw_predict_speeds(&sh, speed); /* the reset's draws */
    double *st = g_get(&g);
    st[FW_POS] = 1;
    st[FW_MT] = 0;
    const int xs[8] = {0, 1, 2, 3, 5, 6, 7, 8};
    for (int i = 0; i < 8; i++) fw_car(st, i, xs[i], 3, i % 2 ? 2 : -4);
    g_put(&g);
    minatar_rand(&sh); /* sticky */
    fw_predict_speeds(&sh, speed);
    NevoStepResult r = g_step(&g, U_);
    CHECK(r.reward == 1.0f && !r.terminated);
    g_get(&g);
    CHECK_EQ_INT(g.st[FW_POS], 9);
    CHECK_EQ_INT(g.st[FW_MT], 2);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ_INT(g.st[FW_CAR(i)], xs[i]);
        CHECK_EQ_INT(g.st[FW_CAR(i) + 2], speed[i]);
        CHECK_EQ_INT(g.st[FW_CAR(i) + 1], abs(speed[i]) - 1);
    }
    g_close(&g);
}

/* Collisions send the chicken back to row 9: a car already at (4, row) before it moves,
 * a car moving into column 4, and the chicken stepping into a car. */
TEST(freeway_collisions) {
    static const struct {
        int pos, mt, a, car_x, car_timer, car_speed;
        int want_pos, want_car_x;
    } cases[] = {
        {5, 1, N_, 4, 2, 3, 9, 4},  /* car parked on the chicken */
        {5, 1, N_, 4, 0, 1, 9, 5},  /* hit before the car moves away */
        {5, 1, N_, 3, 0, 1, 9, 4},  /* right-mover moves in */
        {5, 1, N_, 5, 0, -2, 9, 4}, /* left-mover moves in */
        {5, 1, N_, 3, 1, 1, 5, 3},  /* not moving this step: no hit */
        {5, 1, N_, 5, 0, 3, 5, 6},  /* moving away: no hit */
        {6, 0, U_, 4, 3, 3, 9, 4},  /* the chicken steps into the car's row */
    };
    G g;
    g_open(&g, "minatar/freeway", 3);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double *st = g_get(&g);
        fw_far_cars(st);
        st[FW_POS] = cases[c].pos;
        st[FW_MT] = cases[c].mt;
        fw_car(st, 4, cases[c].car_x, cases[c].car_timer, cases[c].car_speed); /* row 5 */
        g_put(&g);
        NevoStepResult r = g_step(&g, cases[c].a);
        CHECK(r.reward == 0.0f && !r.terminated);
        g_get(&g);
        CHECK_MSG(g.st[FW_POS] == cases[c].want_pos, "case %zu: chicken row %g, expected %d", c,
                  g.st[FW_POS], cases[c].want_pos);
        CHECK_EQ_INT(g.st[FW_CAR(4)], cases[c].want_car_x);
    }
    g_close(&g);
}

/* A car of speed s moves once every |s|+1 steps, wrapping 9 -> 0 and 0 -> 9. */
TEST(freeway_car_period_and_wrap) {
    static const int speed[8] = {1, 2, 3, 4, 5, -1, -3, -5};
    static const int x0[8] = {8, 9, 0, 4, 2, 1, 0, 9};
    G g;
    g_open(&g, "minatar/freeway", 4);
    double *st = g_get(&g);
    for (int i = 0; i < 8; i++) fw_car(st, i, x0[i], abs(speed[i]), speed[i]);
    g_put(&g);
    for (int k = 1; k <= 60; k++) {
        g_step(&g, N_); /* the chicken stays in row 9, where no car drives */
        g_get(&g);
        for (int i = 0; i < 8; i++) {
            int period = abs(speed[i]) + 1;
            int moves = k / period;
            int x = ((x0[i] + (speed[i] > 0 ? moves : -moves)) % 10 + 10) % 10;
            CHECK_MSG(g.st[FW_CAR(i)] == x, "step %d car %d x %g, expected %d", k, i,
                      g.st[FW_CAR(i)], x);
            CHECK_EQ_INT(g.st[FW_CAR(i) + 1], abs(speed[i]) - k % period);
            int back = speed[i] > 0 ? (x + 9) % 10 : (x + 1) % 10;
            CHECK(g_cell(&g, i + 1, x, 1) == 1.0f && g_cell(&g, i + 1, back, 1 + abs(speed[i])) == 1.0f);
        }
        CHECK_EQ_INT(g_count(&g, 1), 8);
    }
    g_close(&g);
}

/* Every episode lasts exactly 2501 steps whatever the policy (§1.4 Timing). */
TEST(freeway_episode_length) {
    for (int policy = 0; policy < 3; policy++) {
        G g;
        g_open_opts(&g, "minatar/freeway", 0.1, 1, 0, 20 + (uint64_t)policy);
        NevoRng pol;
        nevo_rng_init(&pol, 1, NEVO_RNG_POLICY, 0, 0, (uint32_t)policy);
        for (int k = 1; k <= 2501; k++) {
            int a = policy == 0 ? (int)nevo_rng_below(&pol, 6) : policy == 1 ? U_ : N_;
            NevoStepResult r = g_step(&g, a);
            CHECK_MSG(r.terminated == (k == 2501), "step %d terminated %d", k, r.terminated);
            CHECK_EQ_INT(g_get(&g)[FW_TT], 2500 - k);
        }
        CHECK_EQ_INT(nevo_env_steps(g.env, g.inst), 2501);
        g_close(&g);
    }
}

/* Channels: 0 chicken at (pos, 4), 1 cars, 2..6 trails by |speed|, wrapping. */
TEST(freeway_observation) {
    static const int cars[8][2] = {{0, 2}, {9, -4}, {5, 5}, {5, -1}, {4, 3}, {9, 1}, {0, -2}, {3, -5}};
    G g;
    g_open(&g, "minatar/freeway", 5);
    double *st = g_get(&g);
    st[FW_POS] = 3;
    for (int i = 0; i < 8; i++) fw_car(st, i, cars[i][0], 1, cars[i][1]);
    g_put(&g);
    float e[MAX_OBS] = {0};
    static const int back[8] = {9, 0, 4, 6, 3, 8, 1, 4};
    expect_set(e, 7, 3, 4, 0);
    for (int i = 0; i < 8; i++) {
        expect_set(e, 7, i + 1, cars[i][0], 1);
        expect_set(e, 7, i + 1, back[i], 1 + abs(cars[i][1]));
    }
    check_obs(&g, e);
    g_close(&g);
}

/* ---------------------------------------------------------------------------------------
 * Determinism and get/set_state */

static const char *const GAMES[3] = {"minatar/asterix", "minatar/breakout", "minatar/freeway"};

/* Runs one episode (at most max_steps) with random actions, hashing every observation
 * and reward (FNV-1a over the bytes). */
static uint64_t episode_hash(NevoEnv *env, void *inst, uint64_t seed, int max_steps) {
    float obs[MAX_OBS];
    int odim = nevo_env_spec(env)->obs_dim;
    NevoRng pol;
    nevo_rng_init(&pol, seed, NEVO_RNG_POLICY, 0, 0, 0);
    nevo_env_reset(env, inst, seed, obs);
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < max_steps; k++) {
        float a = (float)nevo_rng_below(&pol, 6);
        NevoStepResult r;
        nevo_env_step(env, inst, &a, obs, &r);
        for (int i = 0; i < odim; i++) CHECK(obs[i] == 0.0f || obs[i] == 1.0f);
        const unsigned char *b = (const unsigned char *)obs;
        for (size_t i = 0; i < sizeof(float) * (size_t)odim; i++) h = (h ^ b[i]) * 1099511628211ull;
        const unsigned char *rb = (const unsigned char *)&r.reward;
        for (size_t i = 0; i < sizeof r.reward; i++) h = (h ^ rb[i]) * 1099511628211ull;
        if (r.terminated) break;
    }
    return h;
}

TEST(minatar_abf_determinism) {
    for (int gi = 0; gi < 3; gi++) {
        NevoEnv *env = make_env(GAMES[gi], 0.1, 1, 0);
        void *a = nevo_alloc(nevo_env_instance_size(env));
        void *b = nevo_alloc(nevo_env_instance_size(env));
        int distinct = 0;
        uint64_t first = 0;
        for (uint64_t seed = 1; seed <= 10; seed++) {
            uint64_t ha = episode_hash(env, a, seed, 3000);
            episode_hash(env, b, seed + 100, 3000); /* leave b in a different episode */
            uint64_t hb = episode_hash(env, b, seed, 3000);
            CHECK_MSG(ha == hb, "%s seed %llu: two runs differ", GAMES[gi], (unsigned long long)seed);
            if (seed == 1) first = ha;
            else distinct += ha != first;
        }
        CHECK_MSG(distinct >= 8, "%s: seeds give the same episodes", GAMES[gi]);
        free(a);
        free(b);
        nevo_env_free(env);
    }
}

/* Breakout and Freeway ignore the ramping flag (§1.1): identical episodes either way. */
TEST(minatar_abf_ramping_ignored_by_breakout_freeway) {
    for (int gi = 1; gi < 3; gi++) {
        NevoEnv *on = make_env(GAMES[gi], 0.1, 1, 0), *off = make_env(GAMES[gi], 0.1, 0, 0);
        void *a = nevo_alloc(nevo_env_instance_size(on));
        void *b = nevo_alloc(nevo_env_instance_size(off));
        for (uint64_t seed = 1; seed <= 10; seed++)
            CHECK(episode_hash(on, a, seed, 3000) == episode_hash(off, b, seed, 3000));
        free(a);
        free(b);
        nevo_env_free(on);
        nevo_env_free(off);
    }
}

/* get_state -> set_state restores everything but the random stream: a copy of an
 * instance (same stream) whose game state was scrambled and then set back plays on
 * exactly like the original. */
TEST(minatar_abf_state_round_trip) {
    for (int gi = 0; gi < 3; gi++) {
        NevoEnv *env = make_env(GAMES[gi], 0.1, 1, 0);
        size_t isz = nevo_env_instance_size(env);
        int odim = nevo_env_spec(env)->obs_dim, sdim = nevo_env_spec(env)->state_dim;
        void *a = nevo_alloc(isz), *b = nevo_alloc(isz), *other = nevo_alloc(isz);
        float oa[MAX_OBS], ob[MAX_OBS];
        double sa[MAX_STATE], sb[MAX_STATE], so[MAX_STATE];
        int checked = 0;
        for (uint32_t ep = 0; ep < 20; ep++) {
            NevoRng pol;
            nevo_rng_init(&pol, 3, NEVO_RNG_POLICY, 0, 0, ep);
            nevo_env_reset(env, a, 1000 + ep, oa);
            nevo_env_reset(env, other, 2000 + ep, ob);
            NevoStepResult r = {0};
            int cut = 1 + (int)(ep * 7) % 40;
            for (int k = 0; k < cut && !r.terminated; k++) {
                float act = (float)nevo_rng_below(&pol, 6);
                nevo_env_step(env, a, &act, oa, &r);
                nevo_env_step(env, other, &act, ob, &r);
                r.terminated = nevo_env_done(env, a);
            }
            if (nevo_env_done(env, a)) continue;
            nevo_env_get_state(env, a, sa);
            memcpy(b, a, isz);
            nevo_env_get_state(env, other, so);
            NevoError err = {0};
            CHECK(nevo_env_set_state(env, b, so, 0, ob, &err) == NEVO_OK);
            CHECK(nevo_env_set_state(env, b, sa, nevo_env_steps(env, a), ob, &err) == NEVO_OK);
            nevo_env_get_state(env, b, sb);
            CHECK(memcmp(sa, sb, sizeof(double) * (size_t)sdim) == 0);
            CHECK(memcmp(oa, ob, sizeof(float) * (size_t)odim) == 0);
            for (int k = 0; k < 3000; k++) {
                float act = (float)nevo_rng_below(&pol, 6);
                NevoStepResult ra, rb;
                nevo_env_step(env, a, &act, oa, &ra);
                nevo_env_step(env, b, &act, ob, &rb);
                CHECK(ra.reward == rb.reward && ra.terminated == rb.terminated);
                CHECK(memcmp(oa, ob, sizeof(float) * (size_t)odim) == 0);
                if (ra.terminated) break;
            }
            checked++;
        }
        CHECK(checked >= 5);
        free(a);
        free(b);
        free(other);
        nevo_env_free(env);
    }
}

/* ---------------------------------------------------------------------------------------
 * Statistical agreement with the reference (tests/data/minatar/stats.json, §1.8)
 *
 * For each policy of the file (random: uniform over the 6 actions from a NEVO_RNG_POLICY
 * stream; actionK: always K) nevo's game runs with the reference's defaults (sticky 0.1,
 * ramping on), and each mean is z-tested against the reference, |z| < 4:
 *   - return and length: z = (m - m_ref) / sqrt(s^2/n + s_ref^2/(n_ref - 1)), where
 *     s_ref is the file's population std (numpy's default ddof 0);
 *   - channel occupancy: the file's figure is the pooled ratio (active cells summed over
 *     every step observation of every episode, the terminal one included and the reset
 *     one not) / (total steps) -- see tests/data/minatar/README.md for how the numbers
 *     show this. Its standard error comes from the delta method on the per-episode
 *     (cells, steps) pairs, var = sum (S_i - R L_i)^2 / (n (n-1) Lbar^2); the reference's
 *     unknown spread is taken to be ours (equal under the null hypothesis), scaled to its
 *     episode count, so z = (R - R_ref) / (se sqrt(1 + n / n_ref)).
 * Statistics with zero spread (the reference's std, or our occupancy spread) must agree to
 * rounding. Policies whose reference entries are identical (fire is a no-op in all three
 * games, and right in Freeway) must give identical episodes here too (same seeds). */

#define STATS_MAX_EPISODES 2000

typedef struct Sample {
    int n, C;
    double ret[STATS_MAX_EPISODES], len[STATS_MAX_EPISODES];
    double cells[STATS_MAX_EPISODES][7];
} Sample;

/* acc += obs over whole in-bounds buffers. Left uninstrumented: under the sanitizers
 * this one loop (700 loads a step for Freeway) otherwise costs 6x the whole game. */
__attribute__((no_sanitize("address", "undefined"))) static void accumulate(float *acc,
                                                                           const float *obs,
                                                                           int n) {
    for (int i = 0; i < n; i++) acc[i] += obs[i];
}

static void run_policy(const char *game, int policy, int n, Sample *out) {
    NevoEnv *env = make_env(game, 0.1, 1, 0);
    void *inst = nevo_alloc(nevo_env_instance_size(env));
    float obs[MAX_OBS];
    int C = nevo_env_spec(env)->obs_shape[2];
    out->n = n;
    out->C = C;
    for (int ep = 0; ep < n; ep++) {
        NevoRng pol;
        nevo_rng_init(&pol, 2024, NEVO_RNG_POLICY, 0, 0, (uint32_t)ep);
        nevo_env_reset(env, inst, nevo_rng_derive(2024, NEVO_RNG_ENV_SEED, 0, 0, (uint32_t)ep), obs);
        double ret = 0;
        /* per-cell sums of the 0/1 observations (exact in float below 2^24 steps) */
        float acc[MAX_OBS] = {0};
        NevoStepResult r = {0};
        while (!r.terminated) {
            float a = (float)(policy < 0 ? (int)nevo_rng_below(&pol, 6) : policy);
            nevo_env_step(env, inst, &a, obs, &r);
            ret += r.reward;
            accumulate(acc, obs, 100 * C);
            CHECK(nevo_env_steps(env, inst) < 100000);
        }
        out->ret[ep] = ret;
        out->len[ep] = nevo_env_steps(env, inst);
        for (int c = 0; c < C; c++) {
            double t = 0;
            for (int cell = 0; cell < 100; cell++) t += acc[cell * C + c];
            out->cells[ep][c] = t;
        }
    }
    free(inst);
    nevo_env_free(env);
}

static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double m = 0, ss = 0;
    for (int i = 0; i < n; i++) m += v[i];
    m /= n;
    for (int i = 0; i < n; i++) ss += (v[i] - m) * (v[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
}

static double num(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    CHECK_MSG(json_is_number(v), "stats.json: no number '%s'", key);
    return json_number_value(v);
}

#define Z_LIMIT 4.0

/* Compares a mean with zero or nonzero spread; returns |z| (0 for an exact match). */
static double compare_mean(const char *what, double m, double se, double m_ref, double se_ref,
                           int zero_spread) {
    if (zero_spread) {
        CHECK_MSG(se == 0.0 && fabs(m - m_ref) <= 1e-9 * fmax(1.0, fabs(m_ref)),
                  "%s: %.9g (se %.3g), reference %.9g with zero spread", what, m, se, m_ref);
        return 0.0;
    }
    double z = (m - m_ref) / sqrt(se * se + se_ref * se_ref);
    CHECK_MSG(fabs(z) < Z_LIMIT, "%s: %.6g vs reference %.6g, z = %.2f", what, m, m_ref, z);
    return fabs(z);
}

/* The spec's larger random-policy runs (§1.8, 20000 episodes; Freeway 2000): mean return
 * +- s.e., mean length (rounded to 0.1; its spread is taken as ours) and the shortest
 * episode. Rounding of the quoted figures is allowed for before the z-test. */
static double check_large_sample(const char *key, const Sample *s) {
    static const struct {
        const char *key;
        int episodes;
        double ret, ret_se, len;
        int len_min;
    } table[] = {{"breakout", 20000, 0.513, 0.005, 11.2, 6},
                 {"asterix", 20000, 0.503, 0.006, 70.3, 11},
                 {"freeway", 2000, 0.131, 0.008, 2501, 2501}};
    for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
        if (strcmp(table[t].key, key) != 0) continue;
        double m, sd, lm, lsd;
        mean_sd(s->ret, s->n, &m, &sd);
        mean_sd(s->len, s->n, &lm, &lsd);
        double z_ret = fmax(0.0, fabs(m - table[t].ret) - 0.0005) /
                       sqrt(sd * sd / s->n + table[t].ret_se * table[t].ret_se);
        double z_len = lsd == 0.0 ? 0.0
                                  : fmax(0.0, fabs(lm - table[t].len) - 0.05) /
                                        (lsd * sqrt(1.0 / s->n + 1.0 / table[t].episodes));
        CHECK_MSG(z_ret < Z_LIMIT, "%s random: return %.4f vs the spec's %.3f, |z| = %.2f", key, m,
                  table[t].ret, z_ret);
        CHECK_MSG(z_len < Z_LIMIT, "%s random: length %.3f vs the spec's %.1f, |z| = %.2f", key,
                  lm, table[t].len, z_len);
        if (lsd == 0.0) CHECK(lm == table[t].len);
        double shortest = s->len[0];
        for (int i = 1; i < s->n; i++) shortest = fmin(shortest, s->len[i]);
        CHECK_MSG(shortest >= table[t].len_min, "%s random: an episode of %g steps", key, shortest);
        printf("  %s/random vs spec 1.8: return |z|=%.2f, length |z|=%.2f, shortest %g\n", key,
               z_ret, z_len, shortest);
        return fmax(z_ret, z_len);
    }
    return 0.0;
}

static void stats_game(const char *game, const char *key, const int *episodes) {
    char path[1024];
    snprintf(path, sizeof path, "%s/minatar/stats.json", test_data_dir());
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    CHECK_MSG(root != NULL, "%s: %s", path, jerr.text);
    json_t *pols = json_object_get(json_object_get(root, "games"), key);
    CHECK_MSG(json_is_object(pols), "stats.json has no game %s", key);
    static Sample samples[6];
    static json_t *refs[6];
    const char *policy;
    json_t *ref;
    int np = 0;
    double worst = 0;
    json_object_foreach(pols, policy, ref) {
        int k = strcmp(policy, "random") == 0 ? -1 : atoi(policy + 6);
        CHECK(k >= -1 && k < 6 && np < 6);
        int n = episodes[k + 1];
        Sample *s = &samples[np];
        refs[np] = ref;
        run_policy(game, k, n, s);
        int n_ref = (int)num(ref, "episodes");
        char what[128];
        double m, sd, z[9] = {0};
        mean_sd(s->ret, n, &m, &sd);
        double ref_sd = num(ref, "return_std");
        snprintf(what, sizeof what, "%s/%s return", key, policy);
        z[0] = compare_mean(what, m, sd / sqrt(n), num(ref, "return_mean"),
                            ref_sd / sqrt(n_ref - 1), ref_sd == 0.0);
        printf("  %s/%s n=%d return %.4f (ref %.4f) z=%+.2f", key, policy, n, m,
               num(ref, "return_mean"), (m - num(ref, "return_mean")) /
                   fmax(1e-300, sqrt(sd * sd / n + ref_sd * ref_sd / (n_ref - 1))));
        mean_sd(s->len, n, &m, &sd);
        ref_sd = num(ref, "length_std");
        snprintf(what, sizeof what, "%s/%s length", key, policy);
        z[1] = compare_mean(what, m, sd / sqrt(n), num(ref, "length_mean"),
                            ref_sd / sqrt(n_ref - 1), ref_sd == 0.0);
        printf("; length %.3f (ref %.3f) z=%+.2f", m, num(ref, "length_mean"),
               ref_sd == 0.0 ? 0.0 : (m - num(ref, "length_mean")) /
                                         sqrt(sd * sd / n + ref_sd * ref_sd / (n_ref - 1)));
        json_t *occ = json_object_get(ref, "channel_occupancy_per_step");
        CHECK((int)json_array_size(occ) == s->C);
        double total_len = 0;
        for (int i = 0; i < n; i++) total_len += s->len[i];
        printf("; occupancy ours/ref(z):");
        for (int c = 0; c < s->C; c++) {
            double total = 0;
            for (int i = 0; i < n; i++) total += s->cells[i][c];
            double R = total / total_len, lbar = total_len / n, ss = 0;
            for (int i = 0; i < n; i++) {
                double d = s->cells[i][c] - R * s->len[i];
                ss += d * d;
            }
            double se = sqrt(ss / ((double)n * (n - 1))) / lbar;
            if (se < 1e-12 * fmax(1.0, R)) se = 0.0; /* constant per step: rounding only */
            double r_ref = json_number_value(json_array_get(occ, (size_t)c));
            snprintf(what, sizeof what, "%s/%s occupancy of channel %d", key, policy, c);
            z[2 + c] = compare_mean(what, R, se, r_ref, se * sqrt((double)n / n_ref), se == 0.0);
            printf(" %.3f/%.3f(%+.2f)", R, r_ref,
                   se == 0.0 ? 0.0 : (R - r_ref) / (se * sqrt(1.0 + (double)n / n_ref)));
        }
        printf("\n");
        for (int i = 0; i < 2 + s->C; i++) worst = fmax(worst, z[i]);
        if (k < 0) worst = fmax(worst, check_large_sample(key, s));
        np++;
    }
    /* identical reference entries <=> the actions are no-ops: ours must match exactly */
    for (int i = 0; i < np; i++)
        for (int j = i + 1; j < np; j++) {
            if (!json_equal(json_object_get(refs[i], "return_q10_50_90"),
                            json_object_get(refs[j], "return_q10_50_90")) ||
                num(refs[i], "return_mean") != num(refs[j], "return_mean") ||
                num(refs[i], "length_mean") != num(refs[j], "length_mean") ||
                !json_equal(json_object_get(refs[i], "channel_occupancy_per_step"),
                            json_object_get(refs[j], "channel_occupancy_per_step")))
                continue;
            int n = samples[i].n < samples[j].n ? samples[i].n : samples[j].n;
            CHECK(memcmp(samples[i].ret, samples[j].ret, sizeof(double) * (size_t)n) == 0);
            CHECK(memcmp(samples[i].len, samples[j].len, sizeof(double) * (size_t)n) == 0);
            CHECK(memcmp(samples[i].cells, samples[j].cells, sizeof(samples[i].cells[0]) * (size_t)n) == 0);
        }
    printf("  %s: worst |z| = %.2f\n", key, worst);
    json_decref(root);
}

/* episodes per policy: random, action0 .. action5 */
TEST(asterix_matches_reference_statistics) {
    static const int episodes[7] = {2000, 2000, 2000, 2000, 2000, 2000, 2000};
    stats_game("minatar/asterix", "asterix", episodes);
}

TEST(breakout_matches_reference_statistics) {
    static const int episodes[7] = {2000, 2000, 2000, 2000, 2000, 2000, 2000};
    stats_game("minatar/breakout", "breakout", episodes);
}

TEST(freeway_matches_reference_statistics) {
    static const int episodes[7] = {1000, 1000, 1000, 1000, 1000, 1000, 1000};
    stats_game("minatar/freeway", "freeway", episodes);
}
