/* Tests for MinAtar Seaquest and Space Invaders (src/envs/minatar_seaquest.c,
 * src/envs/minatar_space_invaders.c; spec ENVS.md §1.5, §1.6).
 *
 * Three kinds of test:
 * - rule scenarios: a hand-built state (through set_state, layouts documented at the top
 *   of each game file), one or a few steps with exact actions (sticky_prob 0), and the
 *   exact consequence; the spec's "Timing [verified]" lists are checked on seeded
 *   episodes;
 * - determinism: same seed, same episode; set_state(get_state(x)) loses nothing;
 * - statistics: the policies of tests/data/minatar/stats.json (500 reference episodes
 *   each) run on our games with default options, and every mean (return, length, each
 *   channel's occupancy per step) is z-tested against the reference.
 *
 * Occupancy statistic: stats.json's "channel_occupancy_per_step" is pooled, i.e. the
 * active cells of a channel summed over every step observation of every episode (terminal
 * one included, reset one not) divided by the total number of steps (the products with
 * 500 x length_mean are whole numbers; see tests/data/minatar/README.md). It is a ratio
 * estimator r = sum C_i / sum L_i over episodes i; its standard error is estimated by the
 * delta method, sd(C_i - r L_i) / (sqrt(n) mean L). The reference's own spread is not in
 * the file, so its standard error uses our per-episode spread with its episode count and
 * mean length (under the null hypothesis both games have the same distribution). */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nevo/env.h"
#include "nevo/rng.h"

enum { A_NOOP = 0, A_LEFT = 1, A_UP = 2, A_RIGHT = 3, A_DOWN = 4, A_FIRE = 5 };

/* ---------------------------------------------------------------------------------------
 * A game instance with its buffers. */

#define MAX_OBS 1000
#define MAX_STATE 2000

typedef struct G {
    NevoEnv *env;
    void *inst;
    const NevoEnvSpec *spec;
    int nch;
    float obs[MAX_OBS];
    double st[MAX_STATE];
} G;

static G *g_open_opts(const char *name, const NevoEnvOption *opts, int n) {
    G *g = calloc(1, sizeof *g);
    CHECK(g);
    NevoError err = {0};
    NevoStatus st = nevo_env_new(name, opts, n, &g->env, &err);
    CHECK_MSG(st == NEVO_OK && g->env, "nevo_env_new(%s): %s", name, err.msg);
    g->spec = nevo_env_spec(g->env);
    CHECK(g->spec->obs_dim <= MAX_OBS && g->spec->state_dim <= MAX_STATE);
    g->nch = g->spec->obs_shape[2];
    g->inst = calloc(1, nevo_env_instance_size(g->env));
    CHECK(g->inst);
    return g;
}

/* Exact actions: no sticky repeats. */
static G *g_open(const char *name) {
    NevoEnvOption o[1] = {{"sticky_prob", 0.0}};
    return g_open_opts(name, o, 1);
}

static void g_close(G *g) {
    nevo_env_free(g->env);
    free(g->inst);
    free(g);
}

static void g_reset(G *g, uint64_t seed) { nevo_env_reset(g->env, g->inst, seed, g->obs); }

static NevoStepResult g_step(G *g, int a) {
    float act = (float)a;
    NevoStepResult r;
    nevo_env_step(g->env, g->inst, &act, g->obs, &r);
    return r;
}

static void g_get(G *g) { nevo_env_get_state(g->env, g->inst, g->st); }

static void g_set(G *g) {
    NevoError err = {0};
    NevoStatus st = nevo_env_set_state(g->env, g->inst, g->st, 0, g->obs, &err);
    CHECK_MSG(st == NEVO_OK, "set_state: %s", err.msg);
}

/* The game's own state inside an instance (after the env layer's header, which takes what
 * the instance has beyond the class's 16-byte-rounded state). */
static const void *g_body(const G *g) {
    size_t state = (nevo_env_class(g->env)->state_size + 15) / 16 * 16;
    return (const char *)g->inst + (nevo_env_instance_size(g->env) - state);
}

static float ob(const G *g, int y, int x, int ch) { return g->obs[(y * 10 + x) * g->nch + ch]; }

static int ch_count(const G *g, int ch) {
    int n = 0;
    for (int c = 0; c < 100; c++) n += g->obs[c * g->nch + ch] != 0.0f;
    return n;
}

/* Every observation value is exactly 0 or 1. */
static void check_binary(const G *g) {
    for (int i = 0; i < g->spec->obs_dim; i++) CHECK(g->obs[i] == 0.0f || g->obs[i] == 1.0f);
}

/* ---------------------------------------------------------------------------------------
 * Seaquest state layout (see minatar_seaquest.c). */

enum {
    SQ_LAST = 0, SQ_TERM, SQ_OXY, SQ_DIVERS, SQ_X, SQ_Y, SQ_DIR, SQ_SURF, SQ_SHOT, SQ_ESPEED,
    SQ_ETIMER, SQ_DTIMER, SQ_MOVE, SQ_RAMP, SQ_NFB, SQ_NEB, SQ_NFISH, SQ_NSUB, SQ_NDIV,
    SQ_FB = 19,
    SQ_EB = SQ_FB + 3 * 8,
    SQ_FISH = SQ_EB + 3 * 160,
    SQ_SUB = SQ_FISH + 4 * 128,
    SQ_DIV = SQ_SUB + 5 * 128,
    SQ_DIM = SQ_DIV + 4 * 8,
};
enum { SQ_SUB_FRONT, SQ_SUB_BACK, SQ_F_BULLET, SQ_TRAIL, SQ_E_BULLET, SQ_FISH_CH, SQ_E_SUB,
       SQ_OXYGEN, SQ_DIVER_GAUGE, SQ_DIVER };

/* A Seaquest with the player at (x, y) facing dir, no entities, spawn timers far away. */
static G *sq_scene(int x, int y, int dir) {
    G *g = g_open("minatar/seaquest");
    g_reset(g, 7);
    g_get(g);
    g->st[SQ_X] = x;
    g->st[SQ_Y] = y;
    g->st[SQ_DIR] = dir;
    g->st[SQ_SURF] = y == 0;
    g_set(g);
    return g;
}

static void sq_add(G *g, int count_idx, int base, int width, const double *fields) {
    int n = (int)g->st[count_idx];
    for (int k = 0; k < width; k++) g->st[base + width * n + k] = fields[k];
    g->st[count_idx] = n + 1;
}
static void sq_fish(G *g, int x, int y, int dir, int timer) {
    sq_add(g, SQ_NFISH, SQ_FISH, 4, (double[]){x, y, dir, timer});
}
static void sq_esub(G *g, int x, int y, int dir, int timer, int shot) {
    sq_add(g, SQ_NSUB, SQ_SUB, 5, (double[]){x, y, dir, timer, shot});
}
static void sq_fb(G *g, int x, int y, int dir) { sq_add(g, SQ_NFB, SQ_FB, 3, (double[]){x, y, dir}); }
static void sq_eb(G *g, int x, int y, int dir) { sq_add(g, SQ_NEB, SQ_EB, 3, (double[]){x, y, dir}); }
static void sq_diver(G *g, int x, int y, int dir, int timer) {
    sq_add(g, SQ_NDIV, SQ_DIV, 4, (double[]){x, y, dir, timer});
}
/* Field k of entity i of a list. */
static double sq_f(const G *g, int base, int width, int i, int k) { return g->st[base + width * i + k]; }

/* ---------------------------------------------------------------------------------------
 * Space Invaders state layout (see minatar_space_invaders.c). */

enum { SI_LAST = 0, SI_TERM, SI_POS, SI_DIR, SI_INTERVAL, SI_MTIMER, SI_STIMER, SI_SHOT, SI_RAMP,
       SI_ALIEN = 9, SI_FB = 109, SI_EB = 209, SI_DIM = 309 };
enum { SI_CANNON, SI_ALIEN_CH, SI_ALIEN_LEFT, SI_ALIEN_RIGHT, SI_F_BULLET, SI_E_BULLET };

/* A Space Invaders after reset (seed 1), state read into g->st. */
static G *si_game(void) {
    G *g = g_open("minatar/space_invaders");
    g_reset(g, 1);
    g_get(g);
    return g;
}

/* Clears all three maps in g->st. */
static void si_clear(G *g) {
    for (int i = SI_ALIEN; i < SI_DIM; i++) g->st[i] = 0;
}
static double *si_cell(G *g, int map, int y, int x) { return &g->st[map + y * 10 + x]; }

/* =======================================================================================
 * Registry and spec entries. */

TEST(minatar_ss_spec) {
    G *sq = g_open_opts("minatar/seaquest", NULL, 0);
    const NevoEnvSpec *s = sq->spec;
    CHECK(strcmp(s->name, "minatar/seaquest") == 0);
    CHECK(s->summary && s->summary[0]);
    CHECK_EQ_INT(s->obs_rank, 3);
    CHECK(s->obs_shape[0] == 10 && s->obs_shape[1] == 10 && s->obs_shape[2] == 10);
    CHECK_EQ_INT(s->obs_dim, 1000);
    CHECK_EQ_INT(s->action_kind, NEVO_SPACE_DISCRETE);
    CHECK_EQ_INT(s->n_actions, 6);
    CHECK_EQ_INT(s->max_steps, 0);
    CHECK(!s->has_reward_threshold);
    CHECK_EQ_INT(s->state_dim, SQ_DIM);
    const NevoEnvClass *c = nevo_env_class(sq->env);
    CHECK(c->render_w == 10 && c->render_h == 10 && c->render);
    g_close(sq);

    G *si = g_open_opts("minatar/space_invaders", NULL, 0);
    s = si->spec;
    CHECK(strcmp(s->name, "minatar/space_invaders") == 0);
    CHECK(s->obs_shape[0] == 10 && s->obs_shape[1] == 10 && s->obs_shape[2] == 6);
    CHECK_EQ_INT(s->obs_dim, 600);
    CHECK_EQ_INT(s->n_actions, 6);
    CHECK_EQ_INT(s->max_steps, 0);
    CHECK_EQ_INT(s->state_dim, SI_DIM);
    g_close(si);

    /* Minimal action sets (spec §1.1): Seaquest keeps all 6; Space Invaders n, l, r, f. */
    NevoEnvOption m[2] = {{"minimal_actions", 1}, {"sticky_prob", 0}};
    sq = g_open_opts("minatar/seaquest", m, 2);
    CHECK_EQ_INT(sq->spec->n_actions, 6);
    g_close(sq);
    si = g_open_opts("minatar/space_invaders", m, 2);
    CHECK_EQ_INT(si->spec->n_actions, 4);
    g_reset(si, 1);
    g_step(si, 3); /* minimal index 3 = fire */
    CHECK_EQ_INT(ch_count(si, SI_F_BULLET), 1);
    g_step(si, 2); /* minimal index 2 = right */
    CHECK(ob(si, 9, 6, SI_CANNON) == 1.0f);
    g_close(si);

    /* Bad options fail. */
    NevoEnv *env = NULL;
    NevoError err = {0};
    NevoEnvOption bad[1] = {{"sticky_prob", 1.5}};
    CHECK(nevo_env_new("minatar/seaquest", bad, 1, &env, &err) != NEVO_OK);
    NevoEnvOption unknown[1] = {{"stiky_prob", 0.1}};
    CHECK(nevo_env_new("minatar/space_invaders", unknown, 1, &env, &err) != NEVO_OK);
}

/* =======================================================================================
 * Seaquest rules. */

/* Reset: sub at (x 5, y 0) facing left, full oxygen gauge, nothing else (§1.5 Reset). */
TEST(minatar_sq_reset) {
    G *g = g_open("minatar/seaquest");
    g_reset(g, 3);
    check_binary(g);
    CHECK(ob(g, 0, 5, SQ_SUB_FRONT) == 1.0f);
    CHECK(ob(g, 0, 6, SQ_SUB_BACK) == 1.0f); /* facing left: back at x+1 */
    for (int x = 0; x < 10; x++) CHECK(ob(g, 9, x, SQ_OXYGEN) == 1.0f);
    int total = 0;
    for (int i = 0; i < 1000; i++) total += g->obs[i] != 0.0f;
    CHECK_EQ_INT(total, 12);
    g_get(g);
    CHECK_EQ_INT(g->st[SQ_OXY], 200);
    CHECK_EQ_INT(g->st[SQ_DIVERS], 0);
    CHECK_EQ_INT(g->st[SQ_X], 5);
    CHECK_EQ_INT(g->st[SQ_Y], 0);
    CHECK_EQ_INT(g->st[SQ_DIR], -1);
    CHECK_EQ_INT(g->st[SQ_SURF], 1);
    CHECK_EQ_INT(g->st[SQ_SHOT], 0);
    CHECK_EQ_INT(g->st[SQ_ESPEED], 20);
    CHECK_EQ_INT(g->st[SQ_ETIMER], 20);
    CHECK_EQ_INT(g->st[SQ_DTIMER], 30);
    CHECK_EQ_INT(g->st[SQ_MOVE], 5);
    CHECK_EQ_INT(g->st[SQ_RAMP], 0);
    for (int k = SQ_NFB; k <= SQ_NDIV; k++) CHECK_EQ_INT(g->st[k], 0);
    g_close(g);
}

/* Timing [verified]: enemies spawn at steps 21, 41, ... and divers at 31, 61, ...; a new
 * entity is at the edge its direction starts from, in rows 1-8, with timer move_speed
 * (already decremented once when the step ends) and a sub with shot timer 10 (likewise). */
TEST(minatar_sq_spawn_timing) {
    G *g = g_open("minatar/seaquest");
    for (uint64_t seed = 1; seed <= 40; seed++) {
        g_reset(g, seed);
        int prev_enemies = 0, prev_divers = 0;
        for (int t = 1; t <= 70; t++) {
            NevoStepResult r = g_step(g, A_NOOP); /* idling at the surface: never ends */
            CHECK(!r.terminated);
            g_get(g);
            int ne = (int)(g->st[SQ_NFISH] + g->st[SQ_NSUB]), nd = (int)g->st[SQ_NDIV];
            /* e_spawn_timer counts 20 -> 0, and is reloaded with 20 on a spawn step. */
            int want_et = t < 21 ? 20 - t : 19 - (t - 21) % 20;
            CHECK_EQ_INT(g->st[SQ_ETIMER], want_et);
            int want_dt = t < 31 ? 30 - t : 29 - (t - 31) % 30;
            CHECK_EQ_INT(g->st[SQ_DTIMER], want_dt);
            if (ne > prev_enemies) {
                CHECK_MSG(t == 21 || t == 41 || t == 61, "enemy spawned at step %d", t);
                CHECK_EQ_INT(ne, prev_enemies + 1);
            }
            if (t == 21) {
                CHECK_EQ_INT(ne, 1); /* the first spawn can never be cancelled */
                int is_sub = g->st[SQ_NSUB] == 1;
                int base = is_sub ? SQ_SUB : SQ_FISH, w = is_sub ? 5 : 4;
                double x = sq_f(g, base, w, 0, 0), y = sq_f(g, base, w, 0, 1),
                       dir = sq_f(g, base, w, 0, 2);
                CHECK((x == 0 && dir == 1) || (x == 9 && dir == -1));
                CHECK(y >= 1 && y <= 8);
                CHECK_EQ_INT(sq_f(g, base, w, 0, 3), 4);
                if (is_sub) CHECK_EQ_INT(sq_f(g, base, w, 0, 4), 9);
            }
            if (nd > prev_divers) {
                CHECK_MSG(t == 31 || t == 61, "diver spawned at step %d", t);
                double x = sq_f(g, SQ_DIV, 4, nd - 1, 0), dir = sq_f(g, SQ_DIV, 4, nd - 1, 2);
                CHECK((x == 0 && dir == 1) || (x == 9 && dir == -1));
                CHECK(sq_f(g, SQ_DIV, 4, nd - 1, 1) >= 1 && sq_f(g, SQ_DIV, 4, nd - 1, 1) <= 8);
                CHECK_EQ_INT(sq_f(g, SQ_DIV, 4, nd - 1, 3), 4);
            }
            if (t == 31) CHECK_EQ_INT(nd, 1);
            if (t == 61) CHECK_EQ_INT(nd, 2); /* divers are never cancelled */
            prev_enemies = ne;
            prev_divers = nd;
        }
    }
    g_close(g);
}

/* Spawn draws (§1.5 Spawning, §1.7): direction right with probability 1/2, a sub with
 * probability 1/3, rows uniform on 1-8; divers: direction 1/2, rows 1-8. The first enemy
 * (step 21) and diver (step 31) of an episode are never cancelled, so they sample the
 * draws directly. Bounds are 4.5 standard errors. */
TEST(minatar_sq_spawn_distribution) {
    G *g = g_open("minatar/seaquest");
    const int n = 4000;
    int subs = 0, right = 0, d_right = 0, rows[9] = {0}, d_rows[9] = {0};
    for (int e = 0; e < n; e++) {
        g_reset(g, nevo_rng_derive(31337, NEVO_RNG_ENV_SEED, 0, 0, (uint32_t)e));
        for (int t = 1; t <= 31; t++) g_step(g, A_NOOP);
        g_get(g);
        /* By step 31 exactly one enemy exists (the next spawn is at step 41). */
        int is_sub = g->st[SQ_NSUB] == 1;
        int base = is_sub ? SQ_SUB : SQ_FISH, w = is_sub ? 5 : 4;
        CHECK(g->st[SQ_NSUB] + g->st[SQ_NFISH] == 1);
        subs += is_sub;
        right += sq_f(g, base, w, 0, 2) == 1;
        int y = (int)sq_f(g, base, w, 0, 1);
        CHECK(y >= 1 && y <= 8);
        rows[y]++;
        CHECK_EQ_INT(g->st[SQ_NDIV], 1);
        d_right += sq_f(g, SQ_DIV, 4, 0, 2) == 1;
        y = (int)sq_f(g, SQ_DIV, 4, 0, 1);
        CHECK(y >= 1 && y <= 8);
        d_rows[y]++;
    }
    double se2 = sqrt(0.25 / n), se3 = sqrt((1.0 / 3) * (2.0 / 3) / n), se8 = sqrt((1.0 / 8) * (7.0 / 8) / n);
    CHECK_NEAR((double)subs / n, 1.0 / 3, 4.5 * se3);
    CHECK_NEAR((double)right / n, 0.5, 4.5 * se2);
    CHECK_NEAR((double)d_right / n, 0.5, 4.5 * se2);
    for (int y = 1; y <= 8; y++) {
        CHECK_NEAR((double)rows[y] / n, 1.0 / 8, 4.5 * se8);
        CHECK_NEAR((double)d_rows[y] / n, 1.0 / 8, 4.5 * se8);
    }
    g_close(g);
}

/* The spawn interval is the current e_spawn_speed (the ramp shortens it), and new
 * entities take the current move_speed as their timer. */
TEST(minatar_sq_spawn_uses_current_speeds) {
    G *g = sq_scene(5, 0, -1);
    g->st[SQ_ESPEED] = 7;
    g->st[SQ_ETIMER] = 0;
    g->st[SQ_MOVE] = 3;
    g_set(g);
    for (int t = 1; t <= 16; t++) {
        g_step(g, A_NOOP);
        g_get(g);
        int want = 6 - (t - 1) % 7; /* spawns at steps 1, 8, 15 */
        CHECK_EQ_INT(g->st[SQ_ETIMER], want);
        if (t == 1) {
            int is_sub = g->st[SQ_NSUB] == 1;
            CHECK_EQ_INT(g->st[SQ_NSUB] + g->st[SQ_NFISH], 1);
            CHECK_EQ_INT(sq_f(g, is_sub ? SQ_SUB : SQ_FISH, is_sub ? 5 : 4, 0, 3), 2);
        }
    }
    g_close(g);
}

/* Spawn cancellation (§1.5 Spawning): a new enemy is dropped if a sub or fish in its row
 * moves the other way; a same-direction one does not block; the three draws are consumed
 * either way (the diver drawn after it in the same step is the same). */
TEST(minatar_sq_spawn_cancel) {
    for (uint64_t seed = 11; seed < 21; seed++) {
        double free_e[5], free_d[4];
        int free_is_sub;
        /* A: nothing in the way. */
        G *g = sq_scene(5, 0, -1);
        g_reset(g, seed);
        g_get(g);
        g->st[SQ_ETIMER] = 0;
        g->st[SQ_DTIMER] = 0;
        g_set(g);
        g_step(g, A_NOOP);
        g_get(g);
        CHECK_EQ_INT(g->st[SQ_NFISH] + g->st[SQ_NSUB], 1);
        free_is_sub = g->st[SQ_NSUB] == 1;
        for (int k = 0; k < (free_is_sub ? 5 : 4); k++)
            free_e[k] = sq_f(g, free_is_sub ? SQ_SUB : SQ_FISH, free_is_sub ? 5 : 4, 0, k);
        CHECK_EQ_INT(g->st[SQ_NDIV], 1);
        for (int k = 0; k < 4; k++) free_d[k] = sq_f(g, SQ_DIV, 4, 0, k);
        int row = (int)free_e[1], dir = (int)free_e[2];
        g_close(g);

        /* B-D: a blocker in that row, far from the edges, not moving this step. */
        for (int variant = 0; variant < 3; variant++) {
            g = sq_scene(5, 0, -1);
            g_reset(g, seed);
            g_get(g);
            g->st[SQ_ETIMER] = 0;
            g->st[SQ_DTIMER] = 0;
            if (variant == 0) sq_fish(g, 4, row, -dir, 3);       /* opposite fish: cancels */
            else if (variant == 1) sq_esub(g, 4, row, -dir, 3, 5); /* opposite sub: cancels */
            else sq_fish(g, 4, row, dir, 3);                        /* same direction: spawns */
            g_set(g);
            g_step(g, A_NOOP);
            g_get(g);
            int n = (int)(g->st[SQ_NFISH] + g->st[SQ_NSUB]);
            CHECK_EQ_INT(n, variant == 2 ? 2 : 1);
            if (variant == 2) {
                /* The spawned entity is the last of its list and equals A's. */
                int base = free_is_sub ? SQ_SUB : SQ_FISH, w = free_is_sub ? 5 : 4;
                int idx = free_is_sub ? 0 : 1;
                for (int k = 0; k < w; k++) CHECK(sq_f(g, base, w, idx, k) == free_e[k]);
            }
            CHECK_EQ_INT(g->st[SQ_NDIV], 1);
            for (int k = 0; k < 4; k++) CHECK(sq_f(g, SQ_DIV, 4, 0, k) == free_d[k]);
            g_close(g);
        }
    }
}

/* Timing [verified]: an entity spawned at step t first moves at t+5, then every
 * move_speed+1 = 6 steps; subs fire first at t+10, then every 11 steps; the shot is
 * placed at the sub's cell and moves in the same step. */
TEST(minatar_sq_entity_timing) {
    int found_fish = 0, found_sub = 0;
    for (uint64_t seed = 1; seed < 200 && !(found_fish && found_sub); seed++) {
        G *g = g_open("minatar/seaquest");
        g_reset(g, seed);
        for (int t = 1; t <= 21; t++) g_step(g, A_NOOP);
        g_get(g);
        int is_sub = g->st[SQ_NSUB] == 1;
        if ((is_sub && found_sub) || (!is_sub && found_fish)) {
            g_close(g);
            continue;
        }
        int base = is_sub ? SQ_SUB : SQ_FISH, w = is_sub ? 5 : 4;
        double x = sq_f(g, base, w, 0, 0), dir = sq_f(g, base, w, 0, 2), y = sq_f(g, base, w, 0, 1);
        for (int t = 22; t <= 60; t++) {
            g_step(g, A_NOOP);
            g_get(g);
            double nx = sq_f(g, base, w, 0, 0);
            int moves = t >= 26 && (t - 26) % 6 == 0;
            CHECK_MSG(nx == x + (moves ? dir : 0), "seed %llu step %d: x %g -> %g",
                      (unsigned long long)seed, t, x, nx);
            x = nx;
            if (is_sub) {
                int fires = t >= 31 && (t - 31) % 11 == 0;
                CHECK_EQ_INT(sq_f(g, base, w, 0, 4) == 10, fires);
                if (fires) {
                    int ok = 0; /* its bullet, already moved once */
                    for (int i = 0; i < (int)g->st[SQ_NEB]; i++)
                        ok |= sq_f(g, SQ_EB, 3, i, 0) == x + dir && sq_f(g, SQ_EB, 3, i, 1) == y &&
                              sq_f(g, SQ_EB, 3, i, 2) == dir;
                    CHECK(ok);
                }
            }
        }
        if (is_sub) found_sub = 1;
        else found_fish = 1;
        g_close(g);
    }
    CHECK(found_fish && found_sub);
}

/* Action phase: fire (when loaded) puts a bullet on the sub's cell in its facing
 * direction, and it moves in the same step; the cannon reloads in 5 steps; fire while
 * cooling down does nothing. */
TEST(minatar_sq_fire) {
    for (int dir = -1; dir <= 1; dir += 2) {
        G *g = sq_scene(5, 3, dir);
        int shots = 0;
        for (int t = 1; t <= 11; t++) {
            g_step(g, A_FIRE);
            g_get(g);
            CHECK_EQ_INT(g->st[SQ_X], 5); /* firing never moves */
            CHECK_EQ_INT(g->st[SQ_DIR], dir);
            int fired = t == 1 || t == 6 || t == 11;
            if (fired) shots++;
            int n = (int)g->st[SQ_NFB];
            /* The newest bullet is last; after firing it is one cell ahead of the sub. */
            if (fired) {
                CHECK_EQ_INT(sq_f(g, SQ_FB, 3, n - 1, 0), 5 + dir);
                CHECK_EQ_INT(sq_f(g, SQ_FB, 3, n - 1, 1), 3);
                CHECK_EQ_INT(sq_f(g, SQ_FB, 3, n - 1, 2), dir);
                CHECK(ob(g, 3, 5 + dir, SQ_F_BULLET) == 1.0f);
            }
            CHECK_EQ_INT(g->st[SQ_SHOT], 4 - (t - 1) % 5);
        }
        CHECK_EQ_INT(shots, 3);
        g_close(g);
    }
}

/* Movement: l/r move one column (clamped to 0..9) and set the facing, u/d one row
 * (clamped to 0..8), only one branch per step. */
TEST(minatar_sq_move_clamp) {
    G *g = sq_scene(0, 4, 1);
    g_step(g, A_LEFT);
    g_get(g);
    CHECK(g->st[SQ_X] == 0 && g->st[SQ_DIR] == -1);
    CHECK(ob(g, 4, 0, SQ_SUB_FRONT) == 1.0f && ob(g, 4, 1, SQ_SUB_BACK) == 1.0f);
    g_step(g, A_RIGHT);
    g_get(g);
    CHECK(g->st[SQ_X] == 1 && g->st[SQ_DIR] == 1);
    CHECK(ob(g, 4, 1, SQ_SUB_FRONT) == 1.0f && ob(g, 4, 0, SQ_SUB_BACK) == 1.0f);
    g_close(g);

    g = sq_scene(9, 4, 1);
    g_step(g, A_RIGHT);
    g_get(g);
    CHECK(g->st[SQ_X] == 9 && g->st[SQ_DIR] == 1);
    g_step(g, A_UP);
    g_get(g);
    CHECK(g->st[SQ_Y] == 3 && g->st[SQ_DIR] == 1 && g->st[SQ_X] == 9);
    g_close(g);

    g = sq_scene(3, 8, -1);
    g_step(g, A_DOWN);
    g_get(g);
    CHECK(g->st[SQ_Y] == 8 && g->st[SQ_X] == 3 && g->st[SQ_DIR] == -1);
    g_close(g);

    g = sq_scene(3, 0, -1);
    g_step(g, A_UP);
    g_get(g);
    CHECK(g->st[SQ_Y] == 0);
    g_step(g, A_DOWN);
    g_get(g);
    CHECK(g->st[SQ_Y] == 1 && g->st[SQ_SURF] == 0 && g->st[SQ_OXY] == 199);
    g_close(g);
}

/* Friendly bullets: off-grid ones vanish; a hit removes the first fish on the cell in
 * list order, fish before subs, +1 each; bullets are processed last to first. */
TEST(minatar_sq_friendly_bullets) {
    /* Leaving the grid on either side. */
    G *g = sq_scene(5, 0, -1);
    sq_fb(g, 9, 4, 1);
    sq_fb(g, 0, 6, -1);
    sq_fb(g, 4, 2, 1);
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(g->st[SQ_NFB], 1);
    CHECK(sq_f(g, SQ_FB, 3, 0, 0) == 5 && sq_f(g, SQ_FB, 3, 0, 1) == 2);
    g_close(g);

    /* Hit a fish: +1, both gone. */
    g = sq_scene(5, 0, -1);
    sq_fb(g, 5, 4, 1);
    sq_fish(g, 6, 4, -1, 3);
    g_set(g);
    NevoStepResult r = g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(r.reward, 1);
    CHECK(g->st[SQ_NFB] == 0 && g->st[SQ_NFISH] == 0);
    g_close(g);

    /* Two fish on one cell: only the first in list order (timer 3, not 2) goes. */
    g = sq_scene(5, 0, -1);
    sq_fb(g, 5, 4, 1);
    sq_fish(g, 6, 4, 1, 3);
    sq_fish(g, 6, 4, 1, 2);
    g_set(g);
    r = g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(r.reward, 1);
    CHECK_EQ_INT(g->st[SQ_NFISH], 1);
    CHECK_EQ_INT(sq_f(g, SQ_FISH, 4, 0, 3), 1); /* the timer-2 fish, decremented */
    g_close(g);

    /* Fish before sub on the same cell. */
    g = sq_scene(5, 0, -1);
    sq_fb(g, 5, 4, 1);
    sq_esub(g, 6, 4, 1, 3, 5);
    sq_fish(g, 6, 4, 1, 3);
    g_set(g);
    r = g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(r.reward, 1);
    CHECK(g->st[SQ_NFISH] == 0 && g->st[SQ_NSUB] == 1);
    g_close(g);

    /* A sub alone is hit too (+1); a sub removed here is gone before its own phase, so it
     * does not fire even with shot timer 0. */
    g = sq_scene(5, 0, -1);
    sq_fb(g, 5, 4, 1);
    sq_esub(g, 6, 4, 1, 3, 0);
    g_set(g);
    r = g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(r.reward, 1);
    CHECK(g->st[SQ_NSUB] == 0 && g->st[SQ_NFB] == 0 && g->st[SQ_NEB] == 0);
    g_close(g);

    /* Last to first: two bullets converge on one fish; the later one in the list takes it,
     * the earlier (moving right) survives on that cell. */
    g = sq_scene(5, 0, -1);
    sq_fb(g, 5, 4, 1);
    sq_fb(g, 7, 4, -1);
    sq_fish(g, 6, 4, 1, 3);
    g_set(g);
    r = g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(r.reward, 1);
    CHECK_EQ_INT(g->st[SQ_NFB], 1);
    CHECK(sq_f(g, SQ_FB, 3, 0, 0) == 6 && sq_f(g, SQ_FB, 3, 0, 2) == 1);
    g_close(g);
}

/* Divers: picked up on the sub's cell while fewer than 6 are carried; otherwise they move
 * every 6 steps (timer reloaded with 5), are picked up when moving onto the sub, and
 * vanish off the grid. */
TEST(minatar_sq_divers) {
    /* Pick-up by moving onto a diver. */
    G *g = sq_scene(2, 4, 1);
    g->st[SQ_SURF] = 0;
    sq_diver(g, 3, 4, 1, 2);
    g_set(g);
    g_step(g, A_RIGHT);
    g_get(g);
    CHECK(g->st[SQ_NDIV] == 0 && g->st[SQ_DIVERS] == 1);
    CHECK_EQ_INT(ch_count(g, SQ_DIVER_GAUGE), 1);
    CHECK(ob(g, 9, 8, SQ_DIVER_GAUGE) == 1.0f);
    g_close(g);

    /* Full load: the diver stays and keeps moving. */
    g = sq_scene(3, 4, 1);
    g->st[SQ_SURF] = 0;
    g->st[SQ_DIVERS] = 6;
    sq_diver(g, 3, 4, 1, 2);
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SQ_NDIV] == 1 && g->st[SQ_DIVERS] == 6 && sq_f(g, SQ_DIV, 4, 0, 3) == 1);
    for (int x = 3; x <= 8; x++) CHECK(ob(g, 9, x, SQ_DIVER_GAUGE) == 1.0f);
    CHECK_EQ_INT(ch_count(g, SQ_DIVER_GAUGE), 6);
    g_close(g);

    /* Full load: a diver moving onto the sub is not picked up either. */
    g = sq_scene(3, 4, 1);
    g->st[SQ_SURF] = 0;
    g->st[SQ_DIVERS] = 6;
    sq_diver(g, 2, 4, 1, 0);
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SQ_NDIV] == 1 && g->st[SQ_DIVERS] == 6);
    CHECK(sq_f(g, SQ_DIV, 4, 0, 0) == 3 && sq_f(g, SQ_DIV, 4, 0, 3) == 5);
    CHECK(ob(g, 4, 3, SQ_DIVER) == 1.0f && ob(g, 4, 3, SQ_SUB_FRONT) == 1.0f);
    g_close(g);

    /* A diver whose timer is 0 moves onto the sub: picked up. */
    g = sq_scene(3, 4, 1);
    g->st[SQ_SURF] = 0;
    sq_diver(g, 2, 4, 1, 0);
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SQ_NDIV] == 0 && g->st[SQ_DIVERS] == 1);
    g_close(g);

    /* Move cadence (every 6 steps), trail behind, and leaving the grid. */
    g = sq_scene(5, 0, -1);
    sq_diver(g, 6, 2, 1, 0);
    g_set(g);
    int x = 6;
    for (int t = 1; t <= 25; t++) {
        g_step(g, A_NOOP);
        g_get(g);
        if ((t - 1) % 6 == 0) x++;
        if (x > 9) {
            CHECK_EQ_INT(g->st[SQ_NDIV], 0);
            CHECK_EQ_INT(t, 19);
            break;
        }
        CHECK_EQ_INT(sq_f(g, SQ_DIV, 4, 0, 0), x);
        CHECK_EQ_INT(sq_f(g, SQ_DIV, 4, 0, 3), 5 - (t - 1) % 6);
        CHECK(ob(g, 2, x, SQ_DIVER) == 1.0f && ob(g, 2, x - 1, SQ_TRAIL) == 1.0f);
    }
    g_close(g);
}

/* Enemy subs: terminal when on the player's cell before or after moving; moving off the
 * grid removes them; moving onto a friendly bullet removes both (+1); the shot comes after
 * all that and also from a sub removed in this phase. */
TEST(minatar_sq_enemy_subs) {
    /* The player moves onto a sub. */
    G *g = sq_scene(2, 4, 1);
    g->st[SQ_SURF] = 0;
    sq_esub(g, 3, 4, 1, 3, 5);
    g_set(g);
    NevoStepResult r = g_step(g, A_RIGHT);
    CHECK(r.terminated);
    g_close(g);

    /* A sub moves onto the player. */
    g = sq_scene(3, 4, 1);
    g->st[SQ_SURF] = 0;
    sq_esub(g, 2, 4, 1, 0, 5);
    g_set(g);
    r = g_step(g, A_NOOP);
    CHECK(r.terminated);
    g_close(g);

    /* Not yet moving: no collision, timer counts down. */
    g = sq_scene(3, 4, 1);
    g->st[SQ_SURF] = 0;
    sq_esub(g, 2, 4, 1, 1, 5);
    g_set(g);
    r = g_step(g, A_NOOP);
    CHECK(!r.terminated);
    g_get(g);
    CHECK(sq_f(g, SQ_SUB, 5, 0, 3) == 0 && sq_f(g, SQ_SUB, 5, 0, 4) == 4);
    r = g_step(g, A_NOOP);
    CHECK(r.terminated);
    g_get(g);
    CHECK(sq_f(g, SQ_SUB, 5, 0, 3) == 5); /* reloaded with move_speed */
    g_close(g);

    /* Off the grid: removed, and its last shot (fired off-grid) is discarded. */
    g = sq_scene(5, 0, -1);
    sq_esub(g, 9, 6, 1, 0, 0);
    sq_esub(g, 0, 7, -1, 0, 4);
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SQ_NSUB] == 0 && g->st[SQ_NEB] == 0);
    g_close(g);

    /* Onto a friendly bullet (which moved first): both removed, +1, and the dying sub
     * still fires; its bullet moves in the same step. */
    g = sq_scene(5, 0, -1);
    sq_esub(g, 4, 6, 1, 0, 0);
    sq_fb(g, 6, 6, -1);
    g_set(g);
    r = g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(r.reward, 1);
    CHECK(g->st[SQ_NSUB] == 0 && g->st[SQ_NFB] == 0);
    CHECK_EQ_INT(g->st[SQ_NEB], 1);
    CHECK(sq_f(g, SQ_EB, 3, 0, 0) == 6 && sq_f(g, SQ_EB, 3, 0, 1) == 6 && sq_f(g, SQ_EB, 3, 0, 2) == 1);
    CHECK(ob(g, 6, 6, SQ_E_BULLET) == 1.0f);
    g_close(g);

    /* Shot timer: fires at 0 and reloads with 10, else counts down; a new bullet is last in
     * the list. */
    g = sq_scene(5, 0, -1);
    sq_esub(g, 3, 2, -1, 5, 1);
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SQ_NEB] == 0 && sq_f(g, SQ_SUB, 5, 0, 4) == 0);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SQ_NEB] == 1 && sq_f(g, SQ_SUB, 5, 0, 4) == 10);
    CHECK(sq_f(g, SQ_EB, 3, 0, 0) == 2 && sq_f(g, SQ_EB, 3, 0, 2) == -1);
    g_close(g);
}

/* Enemy bullets: terminal when on the player's cell before or after moving; they move
 * every step and vanish off the grid. */
TEST(minatar_sq_enemy_bullets) {
    G *g = sq_scene(2, 4, 1); /* the player moves onto a bullet moving away */
    g->st[SQ_SURF] = 0;
    sq_eb(g, 3, 4, 1);
    g_set(g);
    CHECK(g_step(g, A_RIGHT).terminated);
    g_close(g);

    g = sq_scene(3, 4, 1); /* a bullet moves onto the player */
    g->st[SQ_SURF] = 0;
    sq_eb(g, 2, 4, 1);
    g_set(g);
    CHECK(g_step(g, A_NOOP).terminated);
    g_close(g);

    g = sq_scene(3, 4, 1); /* passing in the next row: nothing; off the grid: gone */
    g->st[SQ_SURF] = 0;
    sq_eb(g, 8, 5, 1);
    sq_eb(g, 1, 5, -1);
    g_set(g);
    CHECK(!g_step(g, A_NOOP).terminated);
    g_get(g);
    CHECK(g->st[SQ_NEB] == 2 && sq_f(g, SQ_EB, 3, 0, 0) == 9 && sq_f(g, SQ_EB, 3, 1, 0) == 0);
    CHECK(!g_step(g, A_NOOP).terminated);
    g_get(g);
    CHECK(g->st[SQ_NEB] == 0);
    CHECK_EQ_INT(ch_count(g, SQ_E_BULLET), 0);
    g_close(g);
}

/* Fish: as subs without shooting. */
TEST(minatar_sq_fish) {
    G *g = sq_scene(2, 4, 1); /* the player moves onto a fish */
    g->st[SQ_SURF] = 0;
    sq_fish(g, 3, 4, -1, 3);
    g_set(g);
    CHECK(g_step(g, A_RIGHT).terminated);
    g_close(g);

    g = sq_scene(3, 4, 1); /* a fish moves onto the player */
    g->st[SQ_SURF] = 0;
    sq_fish(g, 4, 4, -1, 0);
    g_set(g);
    CHECK(g_step(g, A_NOOP).terminated);
    g_close(g);

    g = sq_scene(5, 0, -1); /* off the grid; onto a bullet; cadence with move_speed 3 */
    g->st[SQ_MOVE] = 3;
    sq_fish(g, 0, 3, -1, 0);
    sq_fish(g, 4, 6, 1, 0);
    sq_fish(g, 2, 7, 1, 0);
    sq_fb(g, 6, 6, -1);
    g_set(g);
    NevoStepResult r = g_step(g, A_NOOP);
    g_get(g);
    CHECK_EQ_INT(r.reward, 1);
    CHECK(g->st[SQ_NFISH] == 1 && g->st[SQ_NFB] == 0 && g->st[SQ_NEB] == 0);
    CHECK(sq_f(g, SQ_FISH, 4, 0, 0) == 3 && sq_f(g, SQ_FISH, 4, 0, 3) == 3);
    CHECK(ob(g, 7, 3, SQ_FISH_CH) == 1.0f && ob(g, 7, 2, SQ_TRAIL) == 1.0f);
    int x = 3;
    for (int t = 2; t <= 10; t++) {
        g_step(g, A_NOOP);
        g_get(g);
        if ((t - 1) % 4 == 0) x++; /* every move_speed + 1 = 4 steps */
        CHECK_EQ_INT(sq_f(g, SQ_FISH, 4, 0, 0), x);
    }
    g_close(g);
}

/* Timers e_spawn, d_spawn and shot decrement only while positive (shot covered in
 * minatar_sq_fire); oxygen: dive at step 1 and the 201st consecutive submerged step ends
 * the game; the gauge shows max(0, oxygen)*10//200 cells. */
TEST(minatar_sq_oxygen) {
    G *g = sq_scene(5, 0, -1);
    int t;
    for (t = 1; t <= 300; t++) {
        NevoStepResult r = g_step(g, t == 1 ? A_DOWN : A_NOOP);
        g_get(g);
        int oxy = 200 - t;
        CHECK_EQ_INT(g->st[SQ_OXY], oxy);
        CHECK_EQ_INT(ch_count(g, SQ_OXYGEN), (oxy > 0 ? oxy : 0) * 10 / 200);
        for (int x = 0; x < ch_count(g, SQ_OXYGEN); x++) CHECK(ob(g, 9, x, SQ_OXYGEN) == 1.0f);
        if (r.terminated) break;
        /* Keep enemies out of the way: only the oxygen rule may end this episode. */
        g->st[SQ_NFISH] = g->st[SQ_NSUB] = g->st[SQ_NEB] = 0;
        g_set(g);
    }
    CHECK_EQ_INT(t, 201);
    g_close(g);

    /* Timers stay at 0. */
    g = sq_scene(5, 0, -1);
    g->st[SQ_ETIMER] = 1;
    g->st[SQ_DTIMER] = 1;
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SQ_ETIMER] == 0 && g->st[SQ_DTIMER] == 0 && g->st[SQ_SHOT] == 0);
    g_close(g);
}

/* Surfacing (§1.5 step 11, surface()). */
TEST(minatar_sq_surface) {
    /* No divers: terminal. */
    G *g = sq_scene(4, 1, -1);
    g_step(g, A_DOWN); /* now submerged */
    g_step(g, A_UP);
    NevoStepResult r = g_step(g, A_UP);
    CHECK(r.terminated && r.reward == 0);
    g_close(g);

    /* 1..5 divers: one is dropped, oxygen refilled, no reward, not terminal; staying at the
     * surface does nothing more. */
    g = sq_scene(4, 1, -1);
    g->st[SQ_SURF] = 0;
    g->st[SQ_DIVERS] = 3;
    g->st[SQ_OXY] = 57;
    g_set(g);
    r = g_step(g, A_UP);
    g_get(g);
    CHECK(!r.terminated && r.reward == 0);
    CHECK(g->st[SQ_DIVERS] == 2 && g->st[SQ_OXY] == 200 && g->st[SQ_SURF] == 1);
    r = g_step(g, A_NOOP);
    g_get(g);
    CHECK(!r.terminated && g->st[SQ_DIVERS] == 2 && g->st[SQ_OXY] == 200);
    g_close(g);

    /* 6 divers: reward oxygen*10//200 and the count ends at -1 (quirk [verified]). */
    g = sq_scene(4, 1, -1);
    g->st[SQ_SURF] = 0;
    g->st[SQ_DIVERS] = 6;
    g->st[SQ_OXY] = 137;
    g_set(g);
    r = g_step(g, A_UP);
    g_get(g);
    CHECK(!r.terminated);
    CHECK_EQ_INT(r.reward, 6);
    CHECK_EQ_INT(g->st[SQ_DIVERS], -1);
    CHECK_EQ_INT(ch_count(g, SQ_DIVER_GAUGE), 0);
    CHECK_EQ_INT(g->st[SQ_OXY], 200);

    /* -1 divers: the next surface does not end the game; the count goes to -2. */
    g_step(g, A_DOWN);
    r = g_step(g, A_UP);
    g_get(g);
    CHECK(!r.terminated && r.reward == 0);
    CHECK_EQ_INT(g->st[SQ_DIVERS], -2);
    CHECK_EQ_INT(ch_count(g, SQ_DIVER_GAUGE), 0);
    g_close(g);

    /* Surfacing is judged after the oxygen check: out of oxygen on the way up still ends
     * the game (terminal and the surfacing both happen). */
    g = sq_scene(4, 1, -1);
    g->st[SQ_SURF] = 0;
    g->st[SQ_DIVERS] = 6;
    g->st[SQ_OXY] = 0;
    g_set(g);
    r = g_step(g, A_UP);
    g_get(g);
    CHECK(r.terminated && r.reward == 0 && g->st[SQ_DIVERS] == -1);
    g_close(g);

    /* 199 oxygen pays 1990 // 200 = 9. */
    g = sq_scene(4, 1, -1);
    g->st[SQ_SURF] = 0;
    g->st[SQ_DIVERS] = 6;
    g->st[SQ_OXY] = 199;
    g_set(g);
    CHECK_EQ_INT(g_step(g, A_UP).reward, 9);
    g_close(g);
}

/* Difficulty ramp at each surface: e_spawn_speed -1 down to 1; move_speed -1 when
 * ramp_index is odd, down to 2; ramp_index +1 while either can still change; nothing
 * without ramping. */
TEST(minatar_sq_ramp) {
    for (int ramping = 0; ramping <= 1; ramping++) {
        NevoEnvOption o[2] = {{"sticky_prob", 0}, {"ramping", ramping}};
        G *g = g_open_opts("minatar/seaquest", o, 2);
        g_reset(g, 5);
        for (int n = 1; n <= 25; n++) {
            g_get(g);
            g->st[SQ_Y] = 1;
            g->st[SQ_SURF] = 0;
            g->st[SQ_DIVERS] = 2;
            g->st[SQ_NFISH] = g->st[SQ_NSUB] = g->st[SQ_NEB] = 0;
            g_set(g);
            CHECK(!g_step(g, A_UP).terminated);
            g_get(g);
            int want_spawn = ramping ? (20 - n > 1 ? 20 - n : 1) : 20;
            int want_move = 5;
            if (ramping) want_move = n >= 6 ? 2 : n >= 4 ? 3 : n >= 2 ? 4 : 5;
            int want_ramp = ramping ? (n < 19 ? n : 19) : 0;
            CHECK_EQ_INT(g->st[SQ_ESPEED], want_spawn);
            CHECK_EQ_INT(g->st[SQ_MOVE], want_move);
            CHECK_EQ_INT(g->st[SQ_RAMP], want_ramp);
        }
        g_close(g);
    }
}

/* Observation details: sub back cell by facing, trails (inside the grid only) for fish,
 * subs and divers, no trail for bullets, gauges. */
TEST(minatar_sq_observation) {
    G *g = sq_scene(4, 5, 1);
    g->st[SQ_SURF] = 0;
    g->st[SQ_DIVERS] = 4;
    g->st[SQ_OXY] = 99;
    sq_fish(g, 0, 2, 1, 3);  /* trail would be at x = -1 */
    sq_esub(g, 6, 3, -1, 3, 5);
    sq_diver(g, 9, 7, -1, 3); /* trail would be at x = 10 */
    sq_fb(g, 7, 5, 1);
    sq_eb(g, 2, 8, -1);
    g_set(g);
    check_binary(g);
    CHECK(ob(g, 5, 4, SQ_SUB_FRONT) == 1.0f && ob(g, 5, 3, SQ_SUB_BACK) == 1.0f);
    CHECK_EQ_INT(ch_count(g, SQ_SUB_FRONT), 1);
    CHECK_EQ_INT(ch_count(g, SQ_SUB_BACK), 1);
    CHECK(ob(g, 2, 0, SQ_FISH_CH) == 1.0f);
    CHECK(ob(g, 3, 6, SQ_E_SUB) == 1.0f && ob(g, 3, 7, SQ_TRAIL) == 1.0f);
    CHECK(ob(g, 7, 9, SQ_DIVER) == 1.0f);
    CHECK_EQ_INT(ch_count(g, SQ_TRAIL), 1);
    CHECK(ob(g, 5, 7, SQ_F_BULLET) == 1.0f && ob(g, 8, 2, SQ_E_BULLET) == 1.0f);
    CHECK_EQ_INT(ch_count(g, SQ_OXYGEN), 4); /* 99*10//200 */
    CHECK_EQ_INT(ch_count(g, SQ_DIVER_GAUGE), 4);
    for (int x = 5; x <= 8; x++) CHECK(ob(g, 9, x, SQ_DIVER_GAUGE) == 1.0f);
    /* Render shares the observation. */
    uint8_t rgb[300];
    nevo_env_class(g->env)->render(g->env, g_body(g), rgb);
    int lit = 0;
    for (int i = 0; i < 100; i++) lit += rgb[3 * i] || rgb[3 * i + 1] || rgb[3 * i + 2];
    int cells = 0;
    for (int c = 0; c < 100; c++) {
        int any = 0;
        for (int ch = 0; ch < 10; ch++) any |= g->obs[c * 10 + ch] != 0.0f;
        cells += any;
    }
    CHECK_EQ_INT(lit, cells);
    g_close(g);
}

/* =======================================================================================
 * Space Invaders rules. */

TEST(minatar_si_reset) {
    G *g = g_open("minatar/space_invaders");
    g_reset(g, 1);
    check_binary(g);
    CHECK(ob(g, 9, 5, SI_CANNON) == 1.0f && ch_count(g, SI_CANNON) == 1);
    CHECK_EQ_INT(ch_count(g, SI_ALIEN_CH), 24);
    CHECK_EQ_INT(ch_count(g, SI_ALIEN_LEFT), 24); /* dir -1 */
    CHECK_EQ_INT(ch_count(g, SI_ALIEN_RIGHT), 0);
    for (int y = 0; y < 4; y++)
        for (int x = 2; x < 8; x++) CHECK(ob(g, y, x, SI_ALIEN_CH) == 1.0f && ob(g, y, x, SI_ALIEN_LEFT) == 1.0f);
    CHECK(ch_count(g, SI_F_BULLET) == 0 && ch_count(g, SI_E_BULLET) == 0);
    g_get(g);
    CHECK(g->st[SI_POS] == 5 && g->st[SI_DIR] == -1 && g->st[SI_INTERVAL] == 12 &&
          g->st[SI_MTIMER] == 12 && g->st[SI_STIMER] == 10 && g->st[SI_SHOT] == 0 &&
          g->st[SI_RAMP] == 0);
    g_close(g);
}

/* Known answers (deterministic: the game draws no random numbers). Idle: the step-11
 * shot from (3,5) reaches the cannon at step 17; always fire: 3 kills, hit at step 18;
 * always right: 96 steps, no reward (stats.json, zero spread). Also Timing [verified]:
 * aliens first move at step 13, shots at steps 11, 21, ... */
TEST(minatar_si_known_episodes) {
    const int want_len[3] = {17, 18, 96}, want_ret[3] = {0, 3, 0}, acts[3] = {A_NOOP, A_FIRE, A_RIGHT};
    for (int k = 0; k < 3; k++) {
        G *g = g_open("minatar/space_invaders");
        g_reset(g, 1);
        int len = 0, ret = 0;
        NevoStepResult r = {0};
        while (!r.terminated && len < 1000) {
            r = g_step(g, acts[k]);
            len++;
            ret += (int)r.reward;
            if (k == 0) {
                /* The idle episode, cell by cell. */
                if (len >= 11) CHECK(ob(g, 3 + (len - 11), 5, SI_E_BULLET) == 1.0f);
                else CHECK_EQ_INT(ch_count(g, SI_E_BULLET), 0);
                if (len < 13) CHECK(ob(g, 0, 2, SI_ALIEN_CH) == 1.0f && ob(g, 0, 1, SI_ALIEN_CH) == 0.0f);
                else CHECK(ob(g, 0, 1, SI_ALIEN_CH) == 1.0f && ob(g, 0, 7, SI_ALIEN_CH) == 0.0f);
            }
        }
        CHECK_EQ_INT(len, want_len[k]);
        CHECK_EQ_INT(ret, want_ret[k]);
        g_close(g);
    }

    /* Shot and move timing over a longer run (enemy bullets cleared as they come). */
    G *g = g_open("minatar/space_invaders");
    g_reset(g, 1);
    double prev_map[100];
    g_get(g);
    memcpy(prev_map, &g->st[SI_ALIEN], sizeof prev_map);
    for (int t = 1; t <= 60; t++) {
        g_get(g);
        for (int i = SI_EB; i < SI_DIM; i++) g->st[i] = 0;
        g_set(g);
        g_step(g, A_NOOP);
        g_get(g);
        int shot = 0;
        for (int x = 0; x < 10; x++)
            for (int y = 0; y < 10; y++) shot |= *si_cell(g, SI_EB, y, x) != 0;
        CHECK_EQ_INT(shot, t >= 11 && (t - 11) % 10 == 0);
        int moved = memcmp(prev_map, &g->st[SI_ALIEN], sizeof prev_map) != 0;
        CHECK_EQ_INT(moved, t == 13 || t == 25 || t == 37 || t == 49);
        memcpy(prev_map, &g->st[SI_ALIEN], sizeof prev_map);
        /* Steps 13 and 25 go left (to columns 0-5); at 37 column 0 is reached: reverse and
         * step down; 49 goes right. */
        CHECK_EQ_INT(g->st[SI_DIR], t < 37 ? -1 : 1);
        if (t == 37) CHECK(*si_cell(g, SI_ALIEN, 4, 0) == 1 && *si_cell(g, SI_ALIEN, 0, 0) == 0);
        if (t == 49) CHECK(*si_cell(g, SI_ALIEN, 1, 1) == 1 && *si_cell(g, SI_ALIEN, 1, 0) == 0);
    }
    g_close(g);
}

/* The game draws no random numbers (§1.6): with exact actions, every seed plays the same
 * episode for the same action sequence. */
TEST(minatar_si_no_randomness) {
    G *a = g_open("minatar/space_invaders"), *b = g_open("minatar/space_invaders");
    for (uint64_t seed = 1; seed <= 20; seed++) {
        g_reset(a, seed);
        g_reset(b, seed * 7919 + 13);
        NevoRng pol;
        nevo_rng_init(&pol, seed, NEVO_RNG_POLICY, 0, 0, 0);
        NevoStepResult ra = {0}, rb;
        for (int t = 0; t < 2000 && !ra.terminated; t++) {
            int act = (int)nevo_rng_below(&pol, 6);
            ra = g_step(a, act);
            rb = g_step(b, act);
            CHECK(ra.reward == rb.reward && ra.terminated == rb.terminated);
            CHECK(memcmp(a->obs, b->obs, sizeof(float) * 600) == 0);
        }
    }
    g_close(a);
    g_close(b);
}

/* Aliens move every min(number of aliens, interval) steps; the last one every step. */
TEST(minatar_si_move_interval) {
    for (int n_al = 1; n_al <= 14; n_al += 13) {
        G *g = si_game();
        si_clear(g);
        for (int i = 0; i < n_al; i++) *si_cell(g, SI_ALIEN, i / 7, 1 + i % 7) = 1;
        g->st[SI_MTIMER] = 0;
        g->st[SI_DIR] = 1;
        g->st[SI_STIMER] = 10;
        g->st[SI_POS] = 0;
        g_set(g);
        int period = n_al < 12 ? n_al : 12;
        for (int t = 1; t <= 12; t++) {
            g_step(g, A_NOOP);
            g_get(g);
            CHECK_EQ_INT(g->st[SI_MTIMER], (period - 1) - (t - 1) % period);
        }
        g_close(g);
    }
}

/* At an edge (an alien in column 0 moving left, or in column 9 moving right) the block
 * reverses and steps down instead; otherwise it shifts sideways; the direction channel
 * follows. */
TEST(minatar_si_edges) {
    G *g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 2, 0) = 1;
    *si_cell(g, SI_ALIEN, 3, 4) = 1;
    g->st[SI_MTIMER] = 0;
    g->st[SI_POS] = 8;
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SI_DIR] == 1);
    CHECK(*si_cell(g, SI_ALIEN, 3, 0) == 1 && *si_cell(g, SI_ALIEN, 4, 4) == 1);
    CHECK(ob(g, 3, 0, SI_ALIEN_RIGHT) == 1.0f && ch_count(g, SI_ALIEN_LEFT) == 0);
    CHECK_EQ_INT(g->st[SI_MTIMER], 1); /* min(2, 12), then decremented */
    g_close(g);

    /* Column 0 while moving right: a plain shift right. */
    g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 2, 0) = 1;
    g->st[SI_MTIMER] = 0;
    g->st[SI_DIR] = 1;
    g->st[SI_POS] = 8;
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SI_DIR] == 1 && *si_cell(g, SI_ALIEN, 2, 1) == 1);
    g_close(g);

    /* Column 9 while moving right. */
    g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 5, 9) = 1;
    *si_cell(g, SI_ALIEN, 5, 3) = 1;
    g->st[SI_MTIMER] = 0;
    g->st[SI_DIR] = 1;
    g->st[SI_POS] = 0;
    g_set(g);
    g_step(g, A_NOOP);
    g_get(g);
    CHECK(g->st[SI_DIR] == -1 && *si_cell(g, SI_ALIEN, 6, 9) == 1 && *si_cell(g, SI_ALIEN, 6, 3) == 1);
    CHECK(ch_count(g, SI_ALIEN_LEFT) == 2 && ch_count(g, SI_ALIEN_RIGHT) == 0);
    g_close(g);

    /* Reversing with an alien in row 9 ends the game (anywhere in the row), and the
     * reference's roll brings that row back at the top. */
    g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 9, 0) = 1;
    *si_cell(g, SI_ALIEN, 4, 3) = 1;
    g->st[SI_MTIMER] = 0;
    g->st[SI_POS] = 7;
    g_set(g);
    NevoStepResult r = g_step(g, A_NOOP);
    g_get(g);
    CHECK(r.terminated);
    CHECK(*si_cell(g, SI_ALIEN, 0, 0) == 1 && *si_cell(g, SI_ALIEN, 5, 3) == 1);
    CHECK_EQ_INT(ch_count(g, SI_ALIEN_CH), 2);
    g_close(g);
}

/* Alien on the cannon: before the move (the cannon walks into it), and after the move
 * (stepping down or sideways onto it). */
TEST(minatar_si_alien_reaches_cannon) {
    G *g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 9, 3) = 1;
    g->st[SI_POS] = 4;
    g->st[SI_MTIMER] = 5;
    g_set(g);
    CHECK(g_step(g, A_LEFT).terminated);
    g_close(g);

    g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 9, 5) = 1;
    g->st[SI_POS] = 4;
    g->st[SI_MTIMER] = 0;
    g_set(g);
    CHECK(g_step(g, A_NOOP).terminated); /* sideways onto it */
    g_close(g);

    g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 8, 0) = 1;
    g->st[SI_POS] = 0;
    g->st[SI_MTIMER] = 0;
    g_set(g);
    CHECK(g_step(g, A_NOOP).terminated); /* down onto it */
    g_close(g);

    g = si_game(); /* an alien in row 9 elsewhere is harmless while not reversing */
    si_clear(g);
    *si_cell(g, SI_ALIEN, 9, 5) = 1;
    g->st[SI_POS] = 1;
    g->st[SI_MTIMER] = 3;
    g_set(g);
    CHECK(!g_step(g, A_NOOP).terminated);
    g_close(g);
}

/* The alien shot: columns ordered by distance to the cannon, ties to the lower column;
 * the bullet is put on the lowest alien of the first occupied column. */
TEST(minatar_si_alien_shot) {
    struct {
        int pos, cols[3], want_col;
    } cases[] = {{5, {3, 7, -1}, 3}, {5, {6, 3, -1}, 6}, {0, {9, 4, -1}, 4}, {9, {0, 8, 2}, 8},
                 {4, {4, 0, 9}, 4}, {2, {1, 3, -1}, 1}};
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        G *g = si_game();
        si_clear(g);
        for (int k = 0; k < 3; k++)
            if (cases[c].cols[k] >= 0) {
                *si_cell(g, SI_ALIEN, 0, cases[c].cols[k]) = 1;
                *si_cell(g, SI_ALIEN, 2 + k, cases[c].cols[k]) = 1;
            }
        g->st[SI_POS] = cases[c].pos;
        g->st[SI_STIMER] = 0;
        g->st[SI_MTIMER] = 5;
        g_set(g);
        g_step(g, A_NOOP);
        g_get(g);
        int k_want = -1;
        for (int k = 0; k < 3; k++)
            if (cases[c].cols[k] == cases[c].want_col) k_want = k;
        CHECK_EQ_INT(ch_count(g, SI_E_BULLET), 1);
        CHECK_MSG(ob(g, 2 + k_want, cases[c].want_col, SI_E_BULLET) == 1.0f, "case %d", c);
        CHECK_EQ_INT(g->st[SI_STIMER], 9);
        g_close(g);
    }
}

/* Friendly bullets: fire puts one on row 9, already in row 8 after the step; reload 5;
 * they climb one row a step and vanish above row 0. The cannon moves with l/r only,
 * clamped; fire does not move it. */
TEST(minatar_si_cannon_and_bullets) {
    G *g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 0, 9) = 1; /* out of the way */
    g->st[SI_STIMER] = 10;
    g->st[SI_MTIMER] = 12;
    g->st[SI_POS] = 3;
    g_set(g);
    for (int t = 1; t <= 12; t++) {
        g_step(g, A_FIRE);
        g_get(g);
        CHECK_EQ_INT(g->st[SI_POS], 3);
        CHECK_EQ_INT(g->st[SI_SHOT], 4 - (t - 1) % 5);
        for (int y = 0; y < 10; y++) {
            /* Shots at steps 1, 6, 11: the one from step s is in row 8 - (t - s). */
            int want = 0;
            for (int s = 1; s <= t; s += 5) want |= 8 - (t - s) == y;
            CHECK_EQ_INT(*si_cell(g, SI_FB, y, 3), want);
        }
    }
    g_close(g);

    g = si_game();
    g->st[SI_POS] = 0;
    g_set(g);
    g_step(g, A_LEFT);
    CHECK(ob(g, 9, 0, SI_CANNON) == 1.0f);
    g_step(g, A_UP);
    g_step(g, A_DOWN);
    CHECK(ob(g, 9, 0, SI_CANNON) == 1.0f);
    g_get(g);
    g->st[SI_POS] = 9;
    g_set(g);
    g_step(g, A_RIGHT);
    CHECK(ob(g, 9, 9, SI_CANNON) == 1.0f && ch_count(g, SI_CANNON) == 1);
    g_close(g);
}

/* Enemy bullets fall one row a step; one reaching (9, pos) ends the game; one on row 9
 * leaves without hitting (the check comes after the shift). */
TEST(minatar_si_enemy_bullets) {
    G *g = si_game();
    *si_cell(g, SI_EB, 8, 4) = 1;
    g->st[SI_POS] = 5;
    g_set(g);
    CHECK(g_step(g, A_LEFT).terminated);
    g_close(g);

    g = si_game();
    *si_cell(g, SI_EB, 9, 4) = 1;
    *si_cell(g, SI_EB, 6, 7) = 1;
    g->st[SI_POS] = 5;
    g_set(g);
    CHECK(!g_step(g, A_LEFT).terminated);
    CHECK_EQ_INT(ch_count(g, SI_E_BULLET), 1);
    CHECK(ob(g, 7, 7, SI_E_BULLET) == 1.0f);
    g_close(g);
}

/* Kills: every cell with an alien and a friendly bullet after both moved loses both,
 * +1 each (several per step possible); a bullet and an alien that swap cells miss. */
TEST(minatar_si_kills) {
    G *g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 4, 2) = 1;
    *si_cell(g, SI_ALIEN, 4, 6) = 1;
    *si_cell(g, SI_ALIEN, 0, 8) = 1;
    *si_cell(g, SI_FB, 5, 2) = 1;
    *si_cell(g, SI_FB, 5, 6) = 1;
    g->st[SI_MTIMER] = 4;
    g_set(g);
    NevoStepResult r = g_step(g, A_NOOP);
    CHECK_EQ_INT(r.reward, 2);
    CHECK(ch_count(g, SI_ALIEN_CH) == 1 && ch_count(g, SI_F_BULLET) == 0);
    g_close(g);

    /* Sideways onto a bullet: a kill. */
    g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 4, 3) = 1;
    *si_cell(g, SI_ALIEN, 0, 8) = 1;
    *si_cell(g, SI_FB, 5, 2) = 1;
    g->st[SI_MTIMER] = 0;
    g_set(g);
    CHECK_EQ_INT(g_step(g, A_NOOP).reward, 1);
    g_close(g);

    /* Swap: the alien steps down from row 4 to 5 while the bullet climbs from 5 to 4. */
    g = si_game();
    si_clear(g);
    *si_cell(g, SI_ALIEN, 4, 0) = 1;
    *si_cell(g, SI_FB, 5, 0) = 1;
    g->st[SI_MTIMER] = 0;
    g->st[SI_POS] = 5;
    g_set(g);
    r = g_step(g, A_NOOP);
    CHECK_EQ_INT(r.reward, 0);
    CHECK(ob(g, 5, 0, SI_ALIEN_CH) == 1.0f && ob(g, 4, 0, SI_F_BULLET) == 1.0f);
    g_close(g);
}

/* A cleared wave: refilled in the same step (rows 0-3, columns 2-7); interval -1 down to
 * 6 with ramping (ramp_index +1), unchanged without; direction and timers carry over. */
TEST(minatar_si_wave_refill) {
    for (int ramping = 0; ramping <= 1; ramping++) {
        static const int intervals[3] = {12, 7, 6};
        for (int ii = 0; ii < 3; ii++) {
            int interval = intervals[ii];
            NevoEnvOption o[2] = {{"sticky_prob", 0}, {"ramping", ramping}};
            G *g = g_open_opts("minatar/space_invaders", o, 2);
            g_reset(g, 1);
            g_get(g);
            si_clear(g);
            *si_cell(g, SI_ALIEN, 6, 8) = 1;
            *si_cell(g, SI_FB, 7, 8) = 1;
            g->st[SI_INTERVAL] = interval;
            g->st[SI_DIR] = 1;
            g->st[SI_MTIMER] = 7;
            g->st[SI_STIMER] = 4;
            g->st[SI_POS] = 0;
            g_set(g);
            NevoStepResult r = g_step(g, A_NOOP);
            g_get(g);
            CHECK_EQ_INT(r.reward, 1);
            CHECK_EQ_INT(ch_count(g, SI_ALIEN_CH), 24);
            for (int y = 0; y < 4; y++)
                for (int x = 2; x < 8; x++) CHECK(ob(g, y, x, SI_ALIEN_RIGHT) == 1.0f);
            int ramped = ramping && interval > 6;
            CHECK_EQ_INT(g->st[SI_INTERVAL], interval - ramped);
            CHECK_EQ_INT(g->st[SI_RAMP], ramped);
            CHECK(g->st[SI_DIR] == 1 && g->st[SI_MTIMER] == 6 && g->st[SI_STIMER] == 3);
            g_close(g);
        }
    }
}

/* =======================================================================================
 * Both games: terminal no-op, sticky actions, determinism, state round trip. */

static const char *const games[2] = {"minatar/seaquest", "minatar/space_invaders"};

/* After the end, the game's own step only consumes the sticky draw (and records the
 * executed action as last_action); reward 0, terminated. */
TEST(minatar_ss_terminal_noop) {
    for (int k = 0; k < 2; k++) {
        G *g = g_open(games[k]);
        g_reset(g, 9);
        NevoStepResult r = {0};
        for (int t = 0; t < 5000 && !r.terminated; t++) r = g_step(g, k == 0 ? A_DOWN : A_NOOP);
        CHECK(r.terminated);
        g_get(g);
        CHECK_EQ_INT(g->st[1], 1);
        double before[MAX_STATE];
        memcpy(before, g->st, sizeof before);
        float obs_before[MAX_OBS];
        memcpy(obs_before, g->obs, sizeof obs_before);
        g_set(g); /* clears the env layer's flags so the game's own step runs */
        r = g_step(g, A_FIRE);
        CHECK(r.terminated && r.reward == 0);
        g_get(g);
        CHECK_EQ_INT(g->st[0], A_FIRE);
        for (int i = 1; i < g->spec->state_dim; i++) CHECK(g->st[i] == before[i]);
        CHECK(memcmp(obs_before, g->obs, sizeof(float) * (size_t)g->spec->obs_dim) == 0);
        g_close(g);
    }
}

/* Sticky actions: with probability 1 the previous executed action repeats (0 at reset,
 * or the one set through the state). */
TEST(minatar_ss_sticky) {
    NevoEnvOption o[1] = {{"sticky_prob", 1.0}};
    G *g = g_open_opts("minatar/seaquest", o, 1);
    g_reset(g, 2);
    for (int t = 0; t < 5; t++) g_step(g, A_DOWN);
    g_get(g);
    CHECK(g->st[SQ_Y] == 0 && g->st[SQ_LAST] == 0);
    g->st[SQ_LAST] = A_DOWN;
    g_set(g);
    for (int t = 0; t < 3; t++) g_step(g, A_UP);
    g_get(g);
    CHECK(g->st[SQ_Y] == 3 && g->st[SQ_LAST] == A_DOWN);
    g_close(g);

    g = g_open_opts("minatar/space_invaders", o, 1);
    g_reset(g, 2);
    g_get(g);
    g->st[SI_LAST] = A_LEFT;
    g_set(g);
    for (int t = 0; t < 3; t++) g_step(g, A_RIGHT);
    CHECK(ob(g, 9, 2, SI_CANNON) == 1.0f);
    g_close(g);

    /* sticky 0.5: some repeats, some not (the draw happens every step). */
    NevoEnvOption h[1] = {{"sticky_prob", 0.5}};
    g = g_open_opts("minatar/space_invaders", h, 1);
    g_reset(g, 4);
    int repeats = 0;
    for (int t = 0; t < 200; t++) {
        g_get(g);
        g->st[SI_LAST] = A_LEFT;
        g->st[SI_POS] = 5;
        g->st[SI_TERM] = 0;
        g_set(g);
        g_step(g, A_RIGHT);
        g_get(g);
        repeats += g->st[SI_POS] == 4;
        CHECK(g->st[SI_POS] == 4 || g->st[SI_POS] == 6);
    }
    CHECK(repeats > 60 && repeats < 140);
    g_close(g);
}

/* Same seed, same episode; other seed, other episode (random policy, default options). */
TEST(minatar_ss_determinism) {
    for (int k = 0; k < 2; k++) {
        G *a = g_open_opts(games[k], NULL, 0), *b = g_open_opts(games[k], NULL, 0);
        size_t odim = sizeof(float) * (size_t)a->spec->obs_dim;
        int differs = 0;
        for (uint64_t seed = 100; seed < 110; seed++) {
            /* the last block left different last actions behind: forget them */
            nevo_env_forget(a->env, a->inst);
            nevo_env_forget(b->env, b->inst);
            g_reset(a, seed);
            g_reset(b, seed);
            CHECK(memcmp(a->obs, b->obs, odim) == 0);
            NevoRng pol;
            nevo_rng_init(&pol, seed, NEVO_RNG_POLICY, 0, 0, 0);
            NevoStepResult ra = {0}, rb = {0};
            for (int t = 0; t < 3000 && !ra.terminated; t++) {
                int act = (int)nevo_rng_below(&pol, 6);
                ra = g_step(a, act);
                rb = g_step(b, act);
                CHECK(ra.reward == rb.reward && ra.terminated == rb.terminated);
                CHECK(memcmp(a->obs, b->obs, odim) == 0);
            }
            /* Another seed with the same actions: the sticky draws (and Seaquest's spawns)
             * differ. */
            g_reset(a, seed);
            g_reset(b, seed + 1000);
            nevo_rng_init(&pol, seed, NEVO_RNG_POLICY, 0, 0, 0);
            ra.terminated = rb.terminated = false;
            for (int t = 0; t < 60 && !ra.terminated && !rb.terminated; t++) {
                int act = (int)nevo_rng_below(&pol, 6);
                ra = g_step(a, act);
                rb = g_step(b, act);
                differs |= memcmp(a->obs, b->obs, odim) != 0;
            }
        }
        CHECK(differs);
        g_close(a);
        g_close(b);
    }
}

/* set_state(get_state(x)) keeps everything: the values round-trip exactly, the
 * observation is rewritten identically, and a game rebuilt from the values alone in an
 * instance that played another episode plays on exactly like x. Exact actions (sticky
 * 0) make that independent of the random stream, except for Seaquest's spawn draws, so
 * Seaquest is compared until its next spawn. Bad states are refused. */
TEST(minatar_ss_state_roundtrip) {
    for (int k = 0; k < 2; k++) {
        G *a = g_open(games[k]), *b = g_open(games[k]);
        int dim = a->spec->state_dim;
        size_t odim = sizeof(float) * (size_t)a->spec->obs_dim;
        int compared = 0;
        for (uint64_t seed = 1; seed <= 40; seed++) {
            g_reset(a, seed);
            NevoRng pol;
            nevo_rng_init(&pol, seed, NEVO_RNG_POLICY, 0, 0, 1);
            int t0 = 5 + (int)(seed * 7 % 60);
            NevoStepResult r = {0};
            for (int t = 0; t < t0 && !r.terminated; t++) r = g_step(a, (int)nevo_rng_below(&pol, 6));
            if (r.terminated) continue;
            g_get(a);
            /* b: another episode, then a's values. */
            g_reset(b, seed + 500);
            for (int t = 0; t < 25; t++) g_step(b, A_FIRE);
            memcpy(b->st, a->st, sizeof(double) * (size_t)dim);
            memset(b->obs, 0x7F, sizeof b->obs);
            g_set(b);
            CHECK(memcmp(a->obs, b->obs, odim) == 0);
            g_get(b);
            CHECK(memcmp(a->st, b->st, sizeof(double) * (size_t)dim) == 0);
            /* Seaquest draws at the step where a spawn timer is 0. */
            int horizon = 40;
            if (k == 0) {
                int et = (int)a->st[SQ_ETIMER], dt = (int)a->st[SQ_DTIMER];
                horizon = et < dt ? et : dt;
            }
            for (int u = 0; u < horizon; u++) {
                int act = (int)nevo_rng_below(&pol, 6);
                NevoStepResult ra = g_step(a, act), rb = g_step(b, act);
                CHECK(ra.reward == rb.reward && ra.terminated == rb.terminated);
                CHECK(memcmp(a->obs, b->obs, odim) == 0);
                g_get(a);
                g_get(b);
                CHECK(memcmp(a->st, b->st, sizeof(double) * (size_t)dim) == 0);
                if (ra.terminated) break;
            }
            compared += horizon > 0;
        }
        CHECK(compared >= 15);

        /* Invalid states are refused with a message. */
        g_reset(a, 1);
        g_get(a);
        NevoError err = {0};
        a->st[2] = 1e9;
        CHECK(nevo_env_set_state(a->env, a->inst, a->st, 0, a->obs, &err) == NEVO_ERR_INVALID);
        CHECK(err.msg[0]);
        g_get(a);
        a->st[0] = 6; /* no such action */
        CHECK(nevo_env_set_state(a->env, a->inst, a->st, 0, a->obs, &err) == NEVO_ERR_INVALID);
        g_get(a);
        a->st[3] = 0.5; /* not an integer */
        CHECK(nevo_env_set_state(a->env, a->inst, a->st, 0, a->obs, &err) == NEVO_ERR_INVALID);
        g_close(a);
        g_close(b);
    }
    /* Seaquest: lists beyond what play can reach, or entities off the grid, are refused. */
    G *g = sq_scene(5, 0, -1);
    NevoError err = {0};
    g->st[SQ_NFISH] = 61;
    CHECK(nevo_env_set_state(g->env, g->inst, g->st, 0, g->obs, &err) == NEVO_ERR_INVALID);
    g_get(g);
    sq_fish(g, 10, 3, 1, 2);
    CHECK(nevo_env_set_state(g->env, g->inst, g->st, 0, g->obs, &err) == NEVO_ERR_INVALID);
    g_get(g);
    sq_fish(g, 4, 3, 1, 6); /* timer above move_speed's maximum */
    CHECK(nevo_env_set_state(g->env, g->inst, g->st, 0, g->obs, &err) == NEVO_ERR_INVALID);
    g_close(g);
    /* Space Invaders: an empty alien map cannot occur in play. */
    g = si_game();
    si_clear(g);
    CHECK(nevo_env_set_state(g->env, g->inst, g->st, 0, g->obs, &err) == NEVO_ERR_INVALID);
    g_close(g);
}

/* =======================================================================================
 * Statistical agreement with the reference (tests/data/minatar/stats.json). */

#define EPISODE_CAP 100000 /* far beyond any terminating episode; reaching it fails */
#define Z_MAX 4.0

typedef struct EpisodeStats {
    int n, capped;
    double *ret, *len, *occ; /* per episode; occ is n x n_ch active-cell totals */
} EpisodeStats;

/* Runs n episodes of the policy (-1 = uniform random over the 6 actions from its own
 * stream, else a constant action) with default options; with_occ sums the observations.
 *
 * Like the reference's statistics, the episodes are played one after another in one
 * environment, whose last_action (the action a sticky draw repeats) carries over from
 * one episode to the next: for constant policies a sticky repeat then never changes
 * the action (with a fresh last_action of 0, two leading no-ops would cost Space
 * Invaders action5 one kill). */
static EpisodeStats run_policy(const char *game, int policy, int n, bool with_occ) {
    G *g = g_open_opts(game, NULL, 0);
    int nch = g->nch;
    EpisodeStats s = {n, 0, calloc((size_t)n, sizeof(double)), calloc((size_t)n, sizeof(double)),
                      calloc((size_t)n * (size_t)nch, sizeof(double))};
    CHECK(s.ret && s.len && s.occ);
    const uint64_t base = 0x5EA5u + (uint64_t)(policy + 1) * 1000003u;
    double last_action = 0;
    for (int e = 0; e < n; e++) {
        g_reset(g, nevo_rng_derive(base, NEVO_RNG_ENV_SEED, 0, 0, (uint32_t)e));
        if (e > 0) { /* reset kept it */
            g_get(g);
            CHECK_EQ_INT((int)g->st[0], (int)last_action);
        }
        NevoRng pol;
        nevo_rng_init(&pol, base, NEVO_RNG_POLICY, 0, 0, (uint32_t)e);
        NevoStepResult r = {0};
        int len = 0;
        double ret = 0, *occ = s.occ + (size_t)e * (size_t)nch;
        while (!r.terminated && len < EPISODE_CAP) {
            int a = policy < 0 ? (int)nevo_rng_below(&pol, 6) : policy;
            r = g_step(g, a);
            len++;
            ret += r.reward;
            if (with_occ)
                for (int c = 0; c < 100; c++)
                    for (int ch = 0; ch < nch; ch++) occ[ch] += g->obs[c * nch + ch];
        }
        if (!r.terminated) s.capped++;
        g_get(g);
        last_action = g->st[0];
        s.ret[e] = ret;
        s.len[e] = len;
    }
    g_close(g);
    return s;
}

static void free_stats(EpisodeStats *s) {
    free(s->ret);
    free(s->len);
    free(s->occ);
}

static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double m = 0, v = 0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(v / (n - 1)) : 0;
}

static double json_num(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    CHECK_MSG(json_is_number(v), "stats.json: %s missing", key);
    return json_number_value(v);
}

/* z of a mean against the reference's (mean, population sd, n); zero spread on both sides
 * must match to rounding (z reported as 0 then, or a failure). */
static double z_mean(double m, double sd, int n, double ref_m, double ref_sd, int ref_n,
                     const char *what) {
    if (ref_sd == 0.0 || sd == 0.0) {
        CHECK_MSG(sd == 0.0 && ref_sd == 0.0 && fabs(m - ref_m) <= 1e-9 * (1 + fabs(ref_m)),
                  "%s: ours %.6g (sd %.3g) vs reference %.6g (sd %.3g); zero spread must match exactly",
                  what, m, sd, ref_m, ref_sd);
        return 0.0;
    }
    double ref_sd_s = ref_sd * sqrt((double)ref_n / (ref_n - 1)); /* ddof 0 -> 1 */
    return (m - ref_m) / sqrt(sd * sd / n + ref_sd_s * ref_sd_s / ref_n);
}

/* Runs every policy listed for the game and z-tests every mean; returns the worst |z|. */
static double check_game_stats(const char *game, const char *key, int n_random, int n_const) {
    char path[1024];
    snprintf(path, sizeof path, "%s/minatar/stats.json", test_data_dir());
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    CHECK_MSG(root, "%s:%d: %s", path, jerr.line, jerr.text);
    json_t *pols = json_object_get(json_object_get(root, "games"), key);
    CHECK_MSG(json_is_object(pols) && json_object_size(pols) > 0, "stats.json has no %s", key);
    double worst = 0;
    int n_policies = 0;
    const char *pname;
    json_t *ref;
    json_object_foreach(pols, pname, ref) {
        int policy = -2;
        if (strcmp(pname, "random") == 0) policy = -1;
        else CHECK_MSG(sscanf(pname, "action%d", &policy) == 1 && policy >= 0 && policy < 6,
                       "unknown policy %s", pname);
        n_policies++;
        int n = policy < 0 ? n_random : n_const;
        EpisodeStats s = run_policy(game, policy, n, true);
        CHECK_MSG(s.capped == 0, "%s %s: %d episodes reached %d steps without ending", key, pname,
                  s.capped, EPISODE_CAP);
        int ref_n = (int)json_num(ref, "episodes");
        double m, sd, z[2 + 10];
        int nz = 0;
        char what[128];
        mean_sd(s.ret, n, &m, &sd);
        snprintf(what, sizeof what, "%s %s return", key, pname);
        z[nz++] = z_mean(m, sd, n, json_num(ref, "return_mean"), json_num(ref, "return_std"), ref_n, what);
        double lmean, lsd;
        mean_sd(s.len, n, &lmean, &lsd);
        snprintf(what, sizeof what, "%s %s length", key, pname);
        z[nz++] = z_mean(lmean, lsd, n, json_num(ref, "length_mean"), json_num(ref, "length_std"),
                         ref_n, what);
        printf("    %s %-8s n=%d  return %.4f (ref %.4f, z %+.2f)  length %.3f (ref %.3f, z %+.2f)\n",
               key, pname, n, m, json_num(ref, "return_mean"), z[0], lmean,
               json_num(ref, "length_mean"), z[1]);

        /* Pooled occupancy r = sum C / sum L; delta-method standard errors. */
        json_t *occ_ref = json_object_get(ref, "channel_occupancy_per_step");
        int nch = (int)json_array_size(occ_ref);
        CHECK(nch == 10 || nch == 6);
        double total_len = lmean * n, ref_len = json_num(ref, "length_mean");
        printf("      occupancy z:");
        for (int ch = 0; ch < nch; ch++) {
            double sum_c = 0;
            for (int e = 0; e < n; e++) sum_c += s.occ[(size_t)e * (size_t)nch + (size_t)ch];
            double rr = sum_c / total_len, rref = json_number_value(json_array_get(occ_ref, (size_t)ch));
            double v = 0;
            for (int e = 0; e < n; e++) {
                double d = s.occ[(size_t)e * (size_t)nch + (size_t)ch] - rr * s.len[e];
                v += d * d;
            }
            v /= n - 1;
            double se_ours = sqrt(v / n) / lmean, se_ref = sqrt(v / ref_n) / ref_len;
            double zz;
            if (se_ours <= 1e-12 * (1 + rr)) {
                CHECK_MSG(fabs(rr - rref) <= 1e-9 * (1 + rref),
                          "%s %s channel %d occupancy %.9g vs reference %.9g (no spread: must match)",
                          key, pname, ch, rr, rref);
                zz = 0;
            } else {
                zz = (rr - rref) / sqrt(se_ours * se_ours + se_ref * se_ref);
            }
            z[nz++] = zz;
            printf(" %+.2f", zz);
        }
        printf("\n");
        for (int i = 0; i < nz; i++) {
            CHECK_MSG(fabs(z[i]) < Z_MAX, "%s %s statistic %d: |z| = %.2f >= %.1f", key, pname, i,
                      fabs(z[i]), Z_MAX);
            if (fabs(z[i]) > worst) worst = fabs(z[i]);
        }
        free_stats(&s);
    }
    /* Every listed policy ran; the non-terminating pairs are the only ones skipped. */
    json_t *nonterm = json_object_get(root, "non_terminating");
    for (size_t i = 0; i < json_array_size(nonterm); i++) {
        const char *pair = json_string_value(json_array_get(nonterm, i));
        size_t kl = strlen(key);
        if (pair && strncmp(pair, key, kl) == 0 && pair[kl] == '/')
            CHECK_MSG(!json_object_get(pols, pair + kl + 1), "%s listed twice", pair);
    }
    printf("    %s: %d policies, worst |z| %.2f\n", key, n_policies, worst);
    json_decref(root);
    return worst;
}

TEST(minatar_sq_statistics) { check_game_stats("minatar/seaquest", "seaquest", 5000, 500); }

TEST(minatar_si_statistics) {
    check_game_stats("minatar/space_invaders", "space_invaders", 5000, 500);
}

/* The spec's larger random-policy runs (§1.8, 20000 reference episodes): mean return
 * (given with its standard error) and mean length (given to 0.1). */
TEST(minatar_ss_random_20000) {
    struct {
        const char *game;
        double ret, ret_se, len;
    } ref[2] = {{"minatar/seaquest", 0.101, 0.003, 30.7}, {"minatar/space_invaders", 2.821, 0.016, 51.0}};
    for (int k = 0; k < 2; k++) {
        int n = 20000;
        EpisodeStats s = run_policy(ref[k].game, -1, n, false);
        CHECK(s.capped == 0);
        double m, sd, lm, lsd;
        mean_sd(s.ret, n, &m, &sd);
        mean_sd(s.len, n, &lm, &lsd);
        double zr = (m - ref[k].ret) / sqrt(sd * sd / n + ref[k].ret_se * ref[k].ret_se);
        /* Length: reference s.e. from our spread at n = 20000, plus the rounding to 0.1. */
        double dl = fabs(lm - ref[k].len) - 0.05;
        double zl = (dl > 0 ? dl : 0) / sqrt(2 * lsd * lsd / n);
        printf("    %s random x%d: return %.4f vs %.3f (z %+.2f), length %.3f vs %.1f (z %.2f)\n",
               ref[k].game, n, m, ref[k].ret, zr, lm, ref[k].len, zl);
        CHECK(fabs(zr) < Z_MAX && zl < Z_MAX);
        free_stats(&s);
    }
}
