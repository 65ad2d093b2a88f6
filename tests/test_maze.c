/* Tests for the hard maze (src/envs/maze.c), its pictures (src/envs/maze_draw.c) and
 * PNG writing (src/cli/png.c).
 *
 * The main check replays the reference trajectories of spec ENVS.md §3.6, recorded
 * with Uber's maze.h on hard_maze.txt: the initial observation and four constant
 * actions, with positions after steps 1, 10 and 400, collisions and returns. The rest
 * checks the rules the constant actions barely reach, at poses whose sensor readings
 * can be worked out by hand from the wall table (§3.1): rangefinders against known
 * walls, every radar slice, a refused move that still turns, the heading wrap, the
 * reward's timing; then state round trips, the behaviour characterisation, and a PNG
 * round trip read back with libpng. */
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "envs/maze.h"
#include "harness.h"
#include "cli/png.h"
#include "nevo/env.h"
#include "nevo/rng.h"

#define OBS_DIM 11
#define STATE_DIM 7
#define EPISODE_STEPS 400

static NevoEnv *open_maze(void) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new("maze/hard", NULL, 0, &env, &err) == NEVO_OK && env, "%s", err.msg);
    return env;
}

static void *new_instance(const NevoEnv *env) {
    void *inst = calloc(1, nevo_env_instance_size(env));
    CHECK(inst);
    return inst;
}

/* Places the robot at a pose (speed, angular velocity and counters as given) and
 * returns the observation there. */
static void set_pose(const NevoEnv *env, void *inst, double x, double y, double heading,
                     double speed, double ang_vel, float *obs) {
    double v[STATE_DIM] = {x, y, heading, speed, ang_vel, 0, 0};
    NevoError err = {0};
    CHECK_MSG(nevo_env_set_state(env, inst, v, 0, obs, &err) == NEVO_OK, "%s", err.msg);
}

static void step_const(const NevoEnv *env, void *inst, float a0, float a1, float *obs,
                       NevoStepResult *r) {
    float a[2] = {a0, a1};
    nevo_env_step(env, inst, a, obs, r);
}

TEST(maze_spec) {
    NevoEnv *env = open_maze();
    const NevoEnvSpec *s = nevo_env_spec(env);
    CHECK(strcmp(s->name, "maze/hard") == 0);
    CHECK_EQ_INT(s->obs_rank, 1);
    CHECK_EQ_INT(s->obs_dim, OBS_DIM);
    CHECK_EQ_INT(s->obs_shape[0], OBS_DIM);
    CHECK(s->action_kind == NEVO_SPACE_BOX);
    CHECK_EQ_INT(s->action_dim, 2);
    for (int i = 0; i < 2; i++) {
        CHECK(s->action_low[i] == -0.5f);
        CHECK(s->action_high[i] == 0.5f);
    }
    CHECK_EQ_INT(s->max_steps, 400);
    CHECK_EQ_INT(s->state_dim, STATE_DIM);
    CHECK_EQ_INT(s->bc_dim, 2);
    const NevoEnvClass *cls = nevo_env_class(env);
    CHECK(cls->bc && cls->render && cls->get_state && cls->set_state);
    CHECK_EQ_INT(cls->render_w, MAZE_EXTENT);
    CHECK_EQ_INT(cls->render_h, MAZE_EXTENT);
    nevo_env_free(env);
}

/* §3.6: the first observation, given to 4 decimals. */
TEST(maze_reference_initial_obs) {
    static const float want[OBS_DIM] = {1, 1.0000f, 0.8156f, 0.5524f, 0.2407f, 0.1738f,
                                        0.2935f, 0, 0, 0, 1};
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    nevo_env_reset(env, inst, 7, obs);
    double max_err = 0;
    for (int i = 0; i < OBS_DIM; i++) {
        CHECK_NEAR(obs[i], want[i], 5e-5);
        max_err = fmax(max_err, fabs(obs[i] - want[i]));
    }
    /* Binary slices are exact. */
    for (int i = 7; i < OBS_DIM; i++) CHECK(obs[i] == want[i]);
    printf("    initial obs: max |err| %.2e (reference has 4 decimals)\n", max_err);
    free(inst);
    nevo_env_free(env);
}

/* One §3.6 row. NAN marks a value the table does not give. */
typedef struct RefCase {
    float a0, a1;
    double x1, y1, h1;     /* after step 1 (h1: heading) */
    double x10, y10;       /* after step 10 */
    double x400, y400, h400;
    int collisions;
    double ret;
    double pos_tol;        /* the table's rounding of the positions */
} RefCase;

static const RefCase ref_cases[] = {
    {0.0f, 0.0f, 36, 184, NAN, 36, 184, 36, 184, NAN, 0, -164.07620, 1e-4},
    {0.0f, 0.5f, 36.2, 184, NAN, 47, 184, 78, 184, NAN, 379, -170.60188, 1e-4},
    {0.1f, 0.5f, 36.2, 184, 0.2, 46.98132, 184.57904, 14.85255, 188.43275, 239.40, 359,
     -169.20500, 1e-5},
    {0.0f, -0.5f, 35.8, 184, NAN, 25, 184, 15, 184, NAN, 386, -164.77864, 1e-4},
};

static void track(double *max_err, double got, double want, double tol, const char *what,
                  int c) {
    double e = fabs(got - want);
    CHECK_MSG(e <= tol, "case %d %s: %.7f vs reference %.7f (tol %g)", c, what, got, want, tol);
    if (e > *max_err) *max_err = e;
}

TEST(maze_reference_trajectories) {
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    double st[STATE_DIM];
    for (int c = 0; c < (int)(sizeof ref_cases / sizeof ref_cases[0]); c++) {
        const RefCase *rc = &ref_cases[c];
        nevo_env_reset(env, inst, (uint64_t)c, obs);
        double ret = 0, max_pos = 0, max_ret = 0, max_head = 0;
        for (int t = 1; t <= 400; t++) {
            NevoStepResult r;
            step_const(env, inst, rc->a0, rc->a1, obs, &r);
            ret += r.reward;
            CHECK(!r.terminated);
            CHECK_MSG(r.truncated == (t == 400), "case %d step %d: truncated %d", c, t, r.truncated);
            if (t < 400) CHECK_MSG(r.reward == 0.0f, "case %d step %d: reward %g", c, t, r.reward);
            nevo_env_get_state(env, inst, st);
            if (t == 1) {
                track(&max_pos, st[0], rc->x1, rc->pos_tol, "x after step 1", c);
                track(&max_pos, st[1], rc->y1, rc->pos_tol, "y after step 1", c);
                if (!isnan(rc->h1)) track(&max_head, st[2], rc->h1, 1e-5, "heading after step 1", c);
            } else if (t == 10) {
                track(&max_pos, st[0], rc->x10, rc->pos_tol, "x after step 10", c);
                track(&max_pos, st[1], rc->y10, rc->pos_tol, "y after step 10", c);
            }
        }
        track(&max_pos, st[0], rc->x400, rc->pos_tol, "final x", c);
        track(&max_pos, st[1], rc->y400, rc->pos_tol, "final y", c);
        if (!isnan(rc->h400)) track(&max_head, st[2], rc->h400, 0.005, "final heading", c);
        CHECK_EQ_INT((int)st[5], rc->collisions);
        CHECK_EQ_INT((int)st[6], 400);
        track(&max_ret, ret, rc->ret, 1e-5, "return", c);
        /* The behaviour characterisation is the final position. */
        float bc[2];
        nevo_env_bc(env, inst, obs, bc);
        CHECK(bc[0] == (float)st[0] && bc[1] == (float)st[1]);
        /* Stepping past the end is the env layer's no-op. */
        NevoStepResult r;
        step_const(env, inst, rc->a0, rc->a1, obs, &r);
        CHECK(r.reward == 0.0f && r.truncated);
        printf("    case (%g, %g): final (%.5f, %.5f) heading %.3f, %d collisions, return %.5f; "
               "max |err| position %.1e, heading %.1e, return %.1e\n",
               rc->a0, rc->a1, st[0], st[1], st[2], (int)st[5], ret, max_pos, max_head, max_ret);
    }
    free(inst);
    nevo_env_free(env);
}

/* Rangefinders at (80, 70) facing -x (heading 180), readings worked out from the wall
 * table: ahead, wall 8 (x = 56) at 24; at -90 (the robot's -90 is +y here, since the
 * heading is 180), wall 9 from (57, 106) to (158, 162) crosses x = 80 at
 * y = 106 + 56 * 23/101; at +90 (-y), wall 13 from (56, 55) to (133, 30) crosses x = 80
 * at y = 55 - 25 * 24/77; behind (+x), the outer wall 6 is 108.9 away, beyond the range. */
TEST(maze_rangefinders_hand_pose) {
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    set_pose(env, inst, 80, 70, 180, 0, 0, obs);
    double below = (106.0 + 56.0 * 23.0 / 101.0) - 70.0;
    double above = 70.0 - (55.0 - 25.0 * 24.0 / 77.0);
    CHECK_NEAR(obs[0], 1.0, 0);
    CHECK_NEAR(obs[1], below / 100.0, 2e-6); /* -90 */
    CHECK_NEAR(obs[3], 24.0 / 100.0, 2e-6);  /* ahead */
    CHECK_NEAR(obs[5], above / 100.0, 2e-6); /* +90 */
    CHECK(obs[6] == 1.0f);                   /* behind: nothing within 100 */
    /* -45 (toward +y, -x): the ray from (80, 70) along (-1, 1) meets wall 8 (x = 56) at
     * 24 * sqrt(2) = 33.9, before wall 9. +45 (toward -x, -y) meets wall 13 where
     * 80 - t = 56 + 77 u and 70 - t = 55 - 25 u: u = (24 - 15) / 102 = 9/102. */
    CHECK_NEAR(obs[2], 24.0 * sqrt(2.0) / 100.0, 2e-6);
    double u = 9.0 / 102.0, t = 24.0 - 77.0 * u;
    CHECK_NEAR(obs[4], t * sqrt(2.0) / 100.0, 2e-6);
    /* Turning the robot turns the rays: heading 0 swaps ahead and behind. */
    set_pose(env, inst, 80, 70, 0, 0, 0, obs);
    CHECK(obs[3] == 1.0f);
    CHECK_NEAR(obs[6], 0.24, 2e-6);
    CHECK_NEAR(obs[1], above / 100.0, 2e-6); /* -90 is now -y */
    CHECK_NEAR(obs[5], below / 100.0, 2e-6);
    free(inst);
    nevo_env_free(env);
}

/* Radar at (100, 100): the goal (31, 20) lies at atan2(-80, -69) = 229.2 degrees, so
 * heading h puts it at 229.2 - h relative: front for h = 230, +90 for 140, rear for
 * 50, -90 (270) for 320. Each pose fires exactly one slice. */
TEST(maze_radar_slices) {
    static const struct {
        double heading;
        int slice;
    } cases[] = {{230, 0}, {140, 1}, {50, 2}, {320, 3}, {229.2 + 44, 0}, {229.2 - 46, 1}};
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        set_pose(env, inst, 100, 100, cases[c].heading, 0, 0, obs);
        for (int i = 0; i < 4; i++)
            CHECK_MSG(obs[7 + i] == (i == cases[c].slice ? 1.0f : 0.0f),
                      "heading %g: slice %d is %g, want only slice %d", cases[c].heading, i,
                      obs[7 + i], cases[c].slice);
    }
    /* The radar ignores distance: next to the goal it still fires exactly one slice. */
    set_pose(env, inst, 31, 35, 270, 0, 0, obs); /* goal straight ahead (-y) */
    CHECK(obs[7] == 1.0f && obs[8] == 0.0f && obs[9] == 0.0f && obs[10] == 0.0f);
    free(inst);
    nevo_env_free(env);
}

/* A move that would bring the centre within 8 of a wall is refused; the heading still
 * turns; the speed is kept; the next move in a free direction goes through. Wall 4
 * runs from (4, 49) to (7, 202); from (17.5, 184) facing -x at speed 3 the candidate
 * (14.5, 184) is 7.85 from it. */
TEST(maze_collision_rule) {
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    double st[STATE_DIM];
    set_pose(env, inst, 17.5, 184, 180, 3, 2, obs);
    NevoStepResult r;
    /* Targets: angular velocity 2 (a0 = 2/6), speed 3 (a1 = 0.5): both already there. */
    step_const(env, inst, 2.0f / 6.0f, 0.5f, obs, &r);
    nevo_env_get_state(env, inst, st);
    CHECK(st[0] == 17.5 && st[1] == 184.0);
    CHECK_NEAR(st[2], 182.0, 1e-5);
    CHECK_NEAR(st[3], 3.0, 0);
    CHECK_NEAR(st[4], 2.0, 1e-6);
    CHECK_EQ_INT((int)st[5], 1);
    /* The same pose facing +x moves 3 units. */
    set_pose(env, inst, 17.5, 184, 0, 3, 0, obs);
    step_const(env, inst, 0.0f, 0.5f, obs, &r);
    nevo_env_get_state(env, inst, st);
    CHECK_NEAR(st[0], 20.5, 1e-6);
    CHECK_NEAR(st[1], 184.0, 1e-6);
    CHECK_EQ_INT((int)st[5], 0);
    /* The rule is "less than 8": a candidate exactly 8 from a vertical wall is allowed.
     * Wall 8 is x = 56 for y in [54, 157]; from (67, 100) at speed 3 facing -x the
     * candidate is (64, 100), exactly 8 away; one more step would be refused. */
    set_pose(env, inst, 67, 100, 180, 3, 0, obs);
    step_const(env, inst, 0.0f, 0.5f, obs, &r);
    nevo_env_get_state(env, inst, st);
    CHECK_NEAR(st[0], 64.0, 1e-5);
    CHECK_EQ_INT((int)st[5], 0);
    step_const(env, inst, 0.0f, 0.5f, obs, &r);
    nevo_env_get_state(env, inst, st);
    CHECK_NEAR(st[0], 64.0, 1e-5);
    CHECK_EQ_INT((int)st[5], 1);
    free(inst);
    nevo_env_free(env);
}

/* Heading wraps once per step: above 360 subtract 360, below 0 add 360; exactly 360
 * stays 360 (the rule is "> 360"). */
TEST(maze_heading_wrap) {
    static const struct {
        double heading, ang_vel, want;
    } cases[] = {{359, 3, 2}, {1, -3, 358}, {357, 3, 360}, {0, -0.5, 359.5}, {180, 3, 183}};
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    double st[STATE_DIM];
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        /* At rest in the open middle of the maze; the action keeps the angular velocity. */
        set_pose(env, inst, 100, 120, cases[c].heading, 0, cases[c].ang_vel, obs);
        NevoStepResult r;
        step_const(env, inst, (float)(cases[c].ang_vel / 6.0), 0.0f, obs, &r);
        nevo_env_get_state(env, inst, st);
        CHECK_NEAR(st[2], cases[c].want, 2e-5);
        CHECK(st[0] == 100 && st[1] == 120);
    }
    free(inst);
    nevo_env_free(env);
}

/* The action sets targets, reached at 0.2 per step; actions outside [-0.5, 0.5] clip. */
TEST(maze_action_rate_limit_and_clip) {
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    double st[STATE_DIM];
    NevoStepResult r;
    nevo_env_reset(env, inst, 0, obs);
    step_const(env, inst, 5.0f, -7.0f, obs, &r); /* clipped to (0.5, -0.5): targets (3, -3) */
    nevo_env_get_state(env, inst, st);
    CHECK_NEAR(st[4], 0.2, 1e-7);
    CHECK_NEAR(st[3], -0.2, 1e-7);
    for (int i = 0; i < 30; i++) step_const(env, inst, 5.0f, -7.0f, obs, &r);
    nevo_env_get_state(env, inst, st);
    CHECK_NEAR(st[4], 3.0, 1e-5); /* capped at 3 */
    CHECK_NEAR(st[3], -3.0, 1e-5);
    /* A target within 0.2 is reached exactly. */
    step_const(env, inst, 0.45f, -0.45f, obs, &r); /* targets 2.7, -2.7 */
    nevo_env_get_state(env, inst, st);
    CHECK_NEAR(st[4], 2.8, 1e-5);
    step_const(env, inst, 0.45f, -0.45f, obs, &r);
    nevo_env_get_state(env, inst, st);
    CHECK_NEAR(st[4], 2.7, 1e-5);
    CHECK_NEAR(st[3], -2.7, 1e-5);
    free(inst);
    nevo_env_free(env);
}

/* Random actions, for the determinism and round-trip tests. */
static void random_action(NevoRng *rng, float a[2]) {
    for (int i = 0; i < 2; i++) a[i] = (float)(nevo_rng_uniform(rng) * 1.4 - 0.7);
}

TEST(maze_deterministic) {
    NevoEnv *env = open_maze();
    void *a = new_instance(env), *b = new_instance(env);
    float oa[OBS_DIM], ob[OBS_DIM];
    nevo_env_reset(env, a, 1, oa);
    nevo_env_reset(env, b, 99, ob); /* the seed plays no part: the maze has no randomness */
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    NevoRng rng;
    nevo_rng_init(&rng, 5, NEVO_RNG_USER, 0, 0, 0);
    float ret = 0;
    for (int t = 0; t < 400; t++) {
        float act[2];
        random_action(&rng, act);
        NevoStepResult ra, rb;
        nevo_env_step(env, a, act, oa, &ra);
        nevo_env_step(env, b, act, ob, &rb);
        CHECK(memcmp(oa, ob, sizeof oa) == 0);
        CHECK(ra.reward == rb.reward && ra.truncated == rb.truncated);
        ret += ra.reward;
    }
    CHECK(ret < 0.0f);
    free(a);
    free(b);
    nevo_env_free(env);
}

/* get_state / set_state: a copy made mid-episode continues bit-identically, and the
 * observation set_state writes is the one the original last produced. */
TEST(maze_state_round_trip) {
    NevoEnv *env = open_maze();
    void *a = new_instance(env), *b = new_instance(env);
    float oa[OBS_DIM], ob[OBS_DIM];
    double st[STATE_DIM], back[STATE_DIM];
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    nevo_env_reset(env, a, 0, oa);
    float act[2];
    NevoStepResult ra, rb;
    for (int t = 0; t < 137; t++) {
        random_action(&rng, act);
        nevo_env_step(env, a, act, oa, &ra);
    }
    nevo_env_get_state(env, a, st);
    CHECK_EQ_INT((int)st[6], 137);
    NevoError err = {0};
    CHECK_MSG(nevo_env_set_state(env, b, st, 137, ob, &err) == NEVO_OK, "%s", err.msg);
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    nevo_env_get_state(env, b, back);
    for (int i = 0; i < STATE_DIM; i++) CHECK(back[i] == st[i]);
    for (int t = 137; t < 400; t++) {
        random_action(&rng, act);
        nevo_env_step(env, a, act, oa, &ra);
        nevo_env_step(env, b, act, ob, &rb);
        CHECK(memcmp(oa, ob, sizeof oa) == 0);
        CHECK(ra.reward == rb.reward && ra.truncated == rb.truncated);
    }
    CHECK(rb.truncated && rb.reward < 0.0f);
    /* Bad states are refused with the field named. */
    double bad[STATE_DIM];
    memcpy(bad, st, sizeof bad);
    bad[1] = NAN;
    CHECK(nevo_env_set_state(env, b, bad, 0, ob, &err) == NEVO_ERR_INVALID);
    CHECK(strstr(err.msg, "maze/hard") && strstr(err.msg, "(y)"));
    memcpy(bad, st, sizeof bad);
    bad[5] = -1;
    CHECK(nevo_env_set_state(env, b, bad, 0, ob, &err) == NEVO_ERR_INVALID);
    CHECK(strstr(err.msg, "collisions"));
    bad[5] = 2.5;
    CHECK(nevo_env_set_state(env, b, bad, 0, ob, &err) == NEVO_ERR_INVALID);
    free(a);
    free(b);
    nevo_env_free(env);
}

/* Distance along the ray from (px, py) at angle deg (degrees) to the nearest scene wall
 * it properly crosses within range 100 (100 when none), in double; walls are taken
 * slightly longer (grow > 0) or shorter (grow < 0) than they are, so a ray passing
 * within a hair of an endpoint can be told apart (the two answers then differ). */
static double scene_range(const NevoEnvScene *sc, double px, double py, double deg, double grow) {
    double a = deg / 180.0 * 3.14159265358979323846, dx = cos(a) * 100, dy = sin(a) * 100, best = 100;
    for (int i = 0; i < sc->n_walls; i++) {
        const NevoSceneWall *w = &sc->walls[i];
        double ex = w->x2 - w->x1, ey = w->y2 - w->y1;
        double den = dx * ey - dy * ex;
        if (den == 0) continue;
        /* p + t d = w1 + u e */
        double t = ((w->x1 - px) * ey - (w->y1 - py) * ex) / den;
        double u = ((w->x1 - px) * dy - (w->y1 - py) * dx) / den;
        if (t > 0 && t < 1 && u > -grow && u < 1 + grow && t * 100 < best) best = t * 100;
    }
    return best;
}

/* The public scene (nevo_env_scene, what `nevo plot` draws) is the env's own geometry.
 * Walls: from a grid of poses the six rangefinders read what a ray cast against the
 * scene's walls gives, and each scene wall, seen square-on from 5 units on one side or
 * the other, is the one its ray meets. Start: where reset puts the robot (its behaviour
 * there). Goal: the point the last step's reward measures the distance to, from three
 * places. Region: the walls enclose it. */
TEST(maze_scene_matches_the_env) {
    const NevoEnvScene *sc = nevo_env_scene("maze/hard");
    CHECK(sc && sc == nevo_env_find("maze/hard")->scene);
    CHECK(sc->enclosed && sc->y_down && sc->has_start && sc->has_goal);
    CHECK_EQ_INT(sc->n_walls, MAZE_N_WALLS);
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM], bc[2];
    static const double rel[6] = {-90, -45, 0, 45, 90, -180};
    int rays = 0;
    for (double x = 3.3; x < 208; x += 12.7)
        for (double y = 2.1; y < 208; y += 11.3)
            for (double h = 7.5; h < 360; h += 97.25) {
                set_pose(env, inst, x, y, h, 0, 0, obs);
                for (int r = 0; r < 6; r++) {
                    double want = scene_range(sc, x, y, h + rel[r], 0);
                    if (want != scene_range(sc, x, y, h + rel[r], 1e-4) ||
                        want != scene_range(sc, x, y, h + rel[r], -1e-4) || fabs(want - 100) < 0.01)
                        continue; /* grazes an endpoint or ends at the range */
                    rays++;
                    CHECK_MSG(fabs(obs[1 + r] * 100.0 - want) < 0.01,
                              "at (%g, %g) heading %g, rangefinder %d reads %.4f, the scene's walls %.4f", x,
                              y, h, r, obs[1 + r] * 100.0, want);
                }
            }
    CHECK_MSG(rays > 3000, "only %d rays checked", rays);
    for (int i = 0; i < sc->n_walls; i++) {
        const NevoSceneWall *w = &sc->walls[i];
        CHECK(fmin(w->x1, w->x2) >= sc->lo[0] && fmax(w->x1, w->x2) <= sc->hi[0]);
        CHECK(fmin(w->y1, w->y2) >= sc->lo[1] && fmax(w->y1, w->y2) <= sc->hi[1]);
        double len = hypot(w->x2 - w->x1, w->y2 - w->y1), nx = -(w->y2 - w->y1) / len, ny = (w->x2 - w->x1) / len;
        double mx = (w->x1 + w->x2) / 2, my = (w->y1 + w->y2) / 2;
        int seen = 0;
        for (int side = -1; side <= 1; side += 2) {
            double px = mx + side * 5 * nx, py = my + side * 5 * ny;
            double h = atan2(-side * ny, -side * nx) * 180 / 3.14159265358979323846;
            if (h < 0) h += 360;
            set_pose(env, inst, px, py, h, 0, 0, obs);
            /* the wall is the nearest along the ray unless another crosses it first */
            if (fabs(scene_range(sc, px, py, h, 0) - 5) < 1e-9 && fabs(obs[3] * 100.0 - 5) < 0.01) seen++;
        }
        CHECK_MSG(seen > 0, "scene wall %d (%g, %g)-(%g, %g) is not where the env's rangefinders meet a wall", i,
                  w->x1, w->y1, w->x2, w->y2);
    }
    /* start */
    double st[STATE_DIM];
    nevo_env_reset(env, inst, 5, obs);
    nevo_env_get_state(env, inst, st);
    nevo_env_bc(env, inst, obs, bc);
    CHECK(st[0] == sc->start[0] && st[1] == sc->start[1] && bc[0] == sc->start[0] && bc[1] == sc->start[1]);
    /* goal: standing still over the last step, the reward is minus the distance to it */
    static const double at[3][2] = {{100.5, 120.25}, {30.5, 60.5}, {170.25, 20.5}};
    for (int i = 0; i < 3; i++) {
        double v[STATE_DIM] = {at[i][0], at[i][1], 0, 0, 0, 0, EPISODE_STEPS - 1};
        NevoError err = {0};
        CHECK(nevo_env_set_state(env, inst, v, EPISODE_STEPS - 1, obs, &err) == NEVO_OK);
        NevoStepResult res;
        step_const(env, inst, 0, 0, obs, &res);
        double want = -hypot(at[i][0] - sc->goal[0], at[i][1] - sc->goal[1]);
        CHECK_MSG(fabs(res.reward - want) < 1e-3, "last reward at (%g, %g) is %g, minus the distance to the "
                  "scene's goal %g", at[i][0], at[i][1], res.reward, want);
    }
    free(inst);
    nevo_env_free(env);
}

/* The reward is minus the final distance, on the last step only; the BC is the final
 * (x, y). With a shorter time limit the reward comes at that limit. */
TEST(maze_reward_and_bc) {
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    double st[STATE_DIM];
    NevoStepResult r;
    /* Resume at step 398 at a known pose: two more steps, the second rewarded. */
    double v[STATE_DIM] = {100, 120, 90, 0, 0, 4, 398};
    NevoError err = {0};
    CHECK(nevo_env_set_state(env, inst, v, 398, obs, &err) == NEVO_OK);
    step_const(env, inst, 0.0f, 0.0f, obs, &r);
    CHECK(r.reward == 0.0f && !r.truncated);
    step_const(env, inst, 0.0f, 0.0f, obs, &r);
    CHECK(r.truncated && !r.terminated);
    CHECK_NEAR(r.reward, -sqrt(69.0 * 69.0 + 100.0 * 100.0), 1e-4);
    nevo_env_get_state(env, inst, st);
    CHECK_EQ_INT((int)st[5], 4); /* collisions carried over */
    float bc[2];
    nevo_env_bc(env, inst, obs, bc);
    CHECK(bc[0] == 100.0f && bc[1] == 120.0f);

    nevo_env_set_max_steps(env, 50);
    nevo_env_reset(env, inst, 0, obs);
    float ret = 0;
    int rewarded = 0;
    for (int t = 1; t <= 50; t++) {
        step_const(env, inst, 0.0f, 0.0f, obs, &r);
        ret += r.reward;
        rewarded += r.reward != 0.0f;
    }
    CHECK(r.truncated);
    CHECK_EQ_INT(rewarded, 1);
    CHECK_NEAR(ret, -164.07620, 1e-4);
    free(inst);
    nevo_env_free(env);
}

static const uint8_t *pixel(const uint8_t *rgb, int w, int x, int y) {
    return rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
}

static bool is_rgb(const uint8_t *p, int r, int g, int b) { return p[0] == r && p[1] == g && p[2] == b; }

TEST(maze_render_and_draw) {
    NevoEnv *env = open_maze();
    void *inst = new_instance(env);
    float obs[OBS_DIM];
    const NevoEnvClass *cls = nevo_env_class(env);
    int w = cls->render_w, h = cls->render_h;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    CHECK(rgb);
    nevo_env_reset(env, inst, 0, obs);
    nevo_env_render(env, inst, rgb);
    /* Robot (red) over the start, walls dark, open floor white, goal green. */
    CHECK(is_rgb(pixel(rgb, w, 36 - 5, 184), 220, 50, 40));
    CHECK(pixel(rgb, w, 56, 100)[0] < 100);  /* wall 8, x = 56 */
    CHECK(pixel(rgb, w, 100, 180)[0] == 255); /* open floor */
    CHECK(is_rgb(pixel(rgb, w, 31, 20), 0, 170, 0));

    /* Points land where asked at every scale; off-picture and NaN points are skipped. */
    for (int scale = 1; scale <= 3; scale++) {
        int n = MAZE_EXTENT * scale;
        uint8_t *img = malloc((size_t)n * n * 3);
        CHECK(img);
        maze_draw_background(img, n, n, scale);
        CHECK(pixel(img, n, 5, 5)[0] == 255);
        CHECK(pixel(img, n, 56 * scale, 120 * scale)[1] < 100);
        maze_draw_point(img, n, n, scale, 150.25f, 60.5f, 10, 20, 30);
        CHECK(is_rgb(pixel(img, n, (int)(150.25f * scale), (int)(60.5f * scale)), 10, 20, 30));
        maze_draw_point(img, n, n, scale, -50, 1e9f, 1, 2, 3);
        maze_draw_point(img, n, n, scale, NAN, 10, 1, 2, 3);
        maze_draw_point(img, n, n, scale, 1e30f, -1e30f, 1, 2, 3);
        free(img);
    }
    free(rgb);
    free(inst);
    nevo_env_free(env);
}

/* Reads a PNG back as 8-bit RGB with libpng's simplified API. */
static uint8_t *read_png(const char *path, int *w, int *h) {
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    CHECK_MSG(png_image_begin_read_from_file(&img, path), "%s: %s", path, img.message);
    img.format = PNG_FORMAT_RGB;
    uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
    CHECK(buf);
    CHECK_MSG(png_image_finish_read(&img, NULL, buf, 0, NULL), "%s: %s", path, img.message);
    *w = (int)img.width;
    *h = (int)img.height;
    return buf;
}

TEST(maze_png_round_trip) {
    const int w = 13, h = 7;
    uint8_t src[13 * 7 * 3];
    for (int i = 0; i < w * h * 3; i++) src[i] = (uint8_t)(i * 37 + i / 3);
    char path[1024];
    snprintf(path, sizeof path, "%s/small.png", test_tmpdir());
    NevoError err = {0};
    CHECK_MSG(nevo_png_write(path, src, w, h, &err) == NEVO_OK, "%s", err.msg);
    int rw, rh;
    uint8_t *back = read_png(path, &rw, &rh);
    CHECK_EQ_INT(rw, w);
    CHECK_EQ_INT(rh, h);
    CHECK(memcmp(back, src, sizeof src) == 0);
    free(back);
    /* Replacing an existing file leaves no temporary behind. */
    src[0] ^= 0xFF;
    CHECK(nevo_png_write(path, src, w, h, &err) == NEVO_OK);
    back = read_png(path, &rw, &rh);
    CHECK(back[0] == src[0]);
    free(back);
    char out[4096];
    CHECK_EQ_INT(test_run(out, sizeof out, "ls -A '%s'", test_tmpdir()), 0);
    CHECK_MSG(strcmp(out, "small.png\n") == 0, "directory holds: %s", out);

    /* A whole maze picture survives the round trip too. */
    int n = MAZE_EXTENT;
    uint8_t *maze = malloc((size_t)n * n * 3);
    CHECK(maze);
    maze_draw_background(maze, n, n, 1);
    snprintf(path, sizeof path, "%s/maze.png", test_tmpdir());
    CHECK(nevo_png_write(path, maze, n, n, &err) == NEVO_OK);
    back = read_png(path, &rw, &rh);
    CHECK(rw == n && rh == n && memcmp(back, maze, (size_t)n * n * 3) == 0);
    free(back);
    free(maze);

    /* Failures name the path. */
    const char *bad = "/nonexistent-nevo-dir/sub/pic.png";
    CHECK(nevo_png_write(bad, src, w, h, &err) == NEVO_ERR_IO);
    CHECK_MSG(strstr(err.msg, bad), "message does not name the path: %s", err.msg);
    CHECK(nevo_png_write(path, src, 0, h, &err) == NEVO_ERR_INVALID);
    CHECK(strstr(err.msg, path));
}
