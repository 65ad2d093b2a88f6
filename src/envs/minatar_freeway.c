/* MinAtar Freeway (Young & Tian 2019; reference kenjyoung/MinAtar 4241f24; spec ENVS.md
 * §1.4, draws §1.7).
 *
 * A chicken in column 4 crosses eight lanes of traffic (car i in row i+1) from row 9 to
 * row 0 for +1, then starts again from row 9 with new car speeds. A car hitting it
 * sends it back to row 9. The chicken may move once every 3 steps; a car of speed s
 * moves one cell every s+1 steps and wraps around. Every episode lasts exactly 2501
 * steps. There is no difficulty ramp. Channels: 0 chicken, 1 car, 2..6 the trail of a
 * car of speed 1..5 (the trail's side gives the direction).
 *
 * get_state / set_state layout (29 doubles, all integer-valued):
 *   [0] last_action  [1] terminal  [2] chicken row  [3] move_timer  [4] terminate_timer
 *   [5 + 3*i ...] car i: x, timer, signed speed
 * The random stream's position is not part of the state. */
#include <string.h>

#include "envs/minatar.h"

#define N_CH 7
#define N_CARS 8
#define STATE_DIM (5 + 3 * N_CARS)
#define CHICKEN_X 4
#define PLAYER_SPEED 3  /* steps between chicken moves */
#define TIME_LIMIT 2500 /* the terminate timer; episodes last TIME_LIMIT + 1 steps */

enum { CH_CHICKEN = 0, CH_CAR = 1, CH_SPEED1 = 2 };

typedef struct Freeway {
    MinatarCommon common;
    int pos, move_timer, terminate_timer;
    int8_t car_x[N_CARS], car_timer[N_CARS], car_speed[N_CARS]; /* speed signed: + is right */
} Freeway;

static int sign(int v) { return (v > 0) - (v < 0); }

static void write_obs(const Freeway *s, float *obs) {
    memset(obs, 0, sizeof(float) * MINATAR_N * MINATAR_N * N_CH);
    minatar_set(obs, N_CH, s->pos, CHICKEN_X, CH_CHICKEN);
    for (int i = 0; i < N_CARS; i++) {
        int row = i + 1, x = s->car_x[i], v = s->car_speed[i];
        minatar_set(obs, N_CH, row, x, CH_CAR);
        /* the trail is behind the car, wrapping around the edges, in its speed's channel */
        int back = v > 0 ? x - 1 : x + 1;
        if (back < 0) back = MINATAR_N - 1;
        else if (back > MINATAR_N - 1) back = 0;
        /* speed 0 needs rand() == 0.5 exactly (probability 2^-53 per car); the reference's
         * speed -> channel chain has no case for it (it would fail or reuse the previous
         * car's channel), so nevo draws no trail */
        if (v != 0) minatar_set(obs, N_CH, row, back, CH_SPEED1 - 1 + (v < 0 ? -v : v));
    }
}

/* speeds = randint(1, 6, size=8), then directions = sign(rand(8) - 0.5): eight integer
 * draws first, then eight uniforms (§1.7). At reset the cars also go to x = 0; a later
 * randomisation keeps their positions. Either way timer = |speed|. */
static void randomize_cars(Freeway *s, int initialize) {
    int speed[N_CARS];
    for (int i = 0; i < N_CARS; i++) speed[i] = minatar_randint(&s->common, 1, 6);
    for (int i = 0; i < N_CARS; i++) {
        double u = minatar_rand(&s->common);
        speed[i] *= u > 0.5 ? 1 : (u < 0.5 ? -1 : 0); /* numpy sign(): 0 at exactly 0.5 */
    }
    for (int i = 0; i < N_CARS; i++) {
        if (initialize) s->car_x[i] = 0;
        s->car_speed[i] = (int8_t)speed[i];
        s->car_timer[i] = (int8_t)(speed[i] < 0 ? -speed[i] : speed[i]);
    }
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    Freeway *s = state;
    minatar_reset_common(&s->common, seed);
    randomize_cars(s, 1);
    s->pos = MINATAR_N - 1;
    s->move_timer = PLAYER_SPEED;
    s->terminate_timer = TIME_LIMIT;
    write_obs(s, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    const MinatarParams *p = nevo_env_params(env);
    Freeway *s = state;
    int a = minatar_action(p, &s->common, action); /* the sticky draw comes first */
    int reward = 0;
    if (s->common.terminal) { /* an ended game does nothing (the draw above still ran) */
        out->reward = 0.0f;
        out->terminated = true;
        write_obs(s, obs);
        return;
    }

    /* 1. the chicken moves only when its timer is at 0 */
    if (a == MINATAR_UP && s->move_timer == 0) {
        s->move_timer = PLAYER_SPEED;
        if (s->pos > 0) s->pos--;
    } else if (a == MINATAR_DOWN && s->move_timer == 0) {
        s->move_timer = PLAYER_SPEED;
        if (s->pos < MINATAR_N - 1) s->pos++;
    }

    /* 2. reaching the top scores, re-draws the cars and starts again at the bottom */
    if (s->pos == 0) {
        reward = 1;
        randomize_cars(s, 0);
        s->pos = MINATAR_N - 1;
    }

    /* 3. cars in order: a hit before or after the car's move sends the chicken back;
     * a car of speed s moves when its timer is 0, so once every |s|+1 steps */
    for (int i = 0; i < N_CARS; i++) {
        int row = i + 1;
        if (s->car_x[i] == CHICKEN_X && row == s->pos) s->pos = MINATAR_N - 1;
        if (s->car_timer[i] == 0) {
            int v = s->car_speed[i];
            s->car_timer[i] = (int8_t)(v < 0 ? -v : v);
            int x = s->car_x[i] + sign(v);
            if (x < 0) x = MINATAR_N - 1;
            else if (x > MINATAR_N - 1) x = 0;
            s->car_x[i] = (int8_t)x;
            if (x == CHICKEN_X && row == s->pos) s->pos = MINATAR_N - 1;
        } else {
            s->car_timer[i]--;
        }
    }

    /* 4-5. timers; the game ends when the terminate timer goes below 0 (step 2501) */
    if (s->move_timer > 0) s->move_timer--;
    if (--s->terminate_timer < 0) s->common.terminal = 1;

    out->reward = (float)reward;
    out->terminated = s->common.terminal != 0;
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *v) {
    const Freeway *s = state;
    v[0] = s->common.last_action;
    v[1] = s->common.terminal;
    v[2] = s->pos;
    v[3] = s->move_timer;
    v[4] = s->terminate_timer;
    for (int i = 0; i < N_CARS; i++) {
        v[5 + 3 * i] = s->car_x[i];
        v[6 + 3 * i] = s->car_timer[i];
        v[7 + 3 * i] = s->car_speed[i];
    }
}

/* values[i] as an integer in [lo, hi]; false (with a message naming the field) if not. */
static bool read_int(const double *values, int i, const char *field, int lo, int hi, int *out,
                     NevoError *err) {
    double v = values[i];
    if (!(v >= lo && v <= hi) || v != (double)(int)v) {
        nevo_error(err, NEVO_ERR_INVALID,
                   "minatar/freeway: state[%d] (%s) is %g, expected an integer in [%d, %d]",
                   i, field, v, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    int last_action, terminal, pos, move_timer, terminate_timer;
    int cx[N_CARS], ct[N_CARS], cv[N_CARS];
    if (!read_int(values, 0, "last_action", 0, 5, &last_action, err) ||
        !read_int(values, 1, "terminal", 0, 1, &terminal, err) ||
        !read_int(values, 2, "chicken row", 0, 9, &pos, err) ||
        !read_int(values, 3, "move_timer", 0, PLAYER_SPEED, &move_timer, err) ||
        !read_int(values, 4, "terminate_timer", -1, TIME_LIMIT, &terminate_timer, err))
        return NEVO_ERR_INVALID;
    for (int i = 0; i < N_CARS; i++)
        if (!read_int(values, 5 + 3 * i, "car x", 0, 9, &cx[i], err) ||
            !read_int(values, 6 + 3 * i, "car timer", 0, 5, &ct[i], err) ||
            !read_int(values, 7 + 3 * i, "car speed", -5, 5, &cv[i], err))
            return NEVO_ERR_INVALID;
    Freeway *s = state;
    s->common.last_action = last_action;
    s->common.terminal = terminal;
    s->pos = pos;
    s->move_timer = move_timer;
    s->terminate_timer = terminate_timer;
    for (int i = 0; i < N_CARS; i++) {
        s->car_x[i] = (int8_t)cx[i];
        s->car_timer[i] = (int8_t)ct[i];
        s->car_speed[i] = (int8_t)cv[i];
    }
    write_obs(s, obs);
    return NEVO_OK;
}

static void render(const NevoEnv *env, const void *state, uint8_t *rgb) {
    float obs[MINATAR_N * MINATAR_N * N_CH];
    write_obs(state, obs);
    minatar_render_obs(obs, N_CH, rgb);
}

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts, int n_opts,
                            NevoError *err) {
    static const int minimal[] = {MINATAR_NOOP, MINATAR_UP, MINATAR_DOWN};
    return minatar_configure(spec, params, opts, n_opts, err, minimal, 3);
}

const NevoEnvClass nevo_env_minatar_freeway =
    MINATAR_CLASS("minatar/freeway",
                  "MinAtar Freeway: get the chicken across eight lanes of traffic",
                  Freeway);
