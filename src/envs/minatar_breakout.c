/* MinAtar Breakout (Young & Tian 2019; reference kenjyoung/MinAtar 4241f24; spec ENVS.md
 * §1.3, draws §1.7).
 *
 * A paddle in row 9 bounces a ball that moves one diagonal cell per step; the ball
 * breaks bricks in rows 1..3 for +1 each and the episode ends when it reaches row 9
 * past the paddle. When no brick is left, the three rows are refilled as the ball
 * reaches the paddle row. The only random draw is the start side at reset; there is
 * no difficulty ramp. Channels: 0 paddle, 1 ball, 2 trail, 3 brick.
 *
 * get_state / set_state layout (39 doubles, all integer-valued):
 *   [0] last_action  [1] terminal  [2] ball_x  [3] ball_y  [4] ball_dir (0 up-left,
 *   1 up-right, 2 down-right, 3 down-left)  [5] last_x  [6] last_y  [7] paddle_x
 *   [8] strike  [9 + 10*(y-1) + x] brick at row y in 1..3, column x
 * Bricks only ever exist in rows 1..3 (the reset and the refill fill exactly those and
 * nothing else adds any), so the map is stored as those 30 cells. The random stream's
 * position is not part of the state. */
#include <string.h>

#include "envs/minatar.h"

#define N_CH 4
#define BRICK_ROWS 3 /* rows 1..3 */
#define N_BRICKS (BRICK_ROWS * MINATAR_N)
#define ALL_BRICKS ((1u << N_BRICKS) - 1u)
#define STATE_DIM (9 + N_BRICKS)

enum { CH_PADDLE = 0, CH_BALL = 1, CH_TRAIL = 2, CH_BRICK = 3 };

/* Direction d moves the ball by (DX[d], DY[d]). */
static const int DX[4] = {-1, 1, 1, -1};
static const int DY[4] = {-1, -1, 1, 1};
/* Direction changes of the reference: horizontal flip (side wall), vertical flip
 * (ceiling, brick, straight paddle bounce), both (paddle corner). */
static const uint8_t FLIP_X[4] = {1, 0, 3, 2};
static const uint8_t FLIP_Y[4] = {3, 2, 1, 0};
static const uint8_t FLIP_XY[4] = {2, 3, 0, 1};

typedef struct Breakout {
    MinatarCommon common;
    int ball_x, ball_y, ball_dir, last_x, last_y, paddle, strike;
    uint32_t bricks; /* bit 10*(y-1) + x for the brick at row y (1..3), column x */
} Breakout;

static int brick_bit(int y, int x) { return MINATAR_N * (y - 1) + x; }

static int has_brick(const Breakout *s, int y, int x) {
    return y >= 1 && y <= BRICK_ROWS && ((s->bricks >> brick_bit(y, x)) & 1u);
}

static void write_obs(const Breakout *s, float *obs) {
    memset(obs, 0, sizeof(float) * MINATAR_N * MINATAR_N * N_CH);
    minatar_set(obs, N_CH, s->ball_y, s->ball_x, CH_BALL);
    minatar_set(obs, N_CH, MINATAR_N - 1, s->paddle, CH_PADDLE);
    minatar_set(obs, N_CH, s->last_y, s->last_x, CH_TRAIL);
    for (uint32_t b = s->bricks; b; b &= b - 1) {
        int bit = __builtin_ctz(b);
        int y = 1 + bit / MINATAR_N; /* a constant divisor: compiled to a multiply */
        minatar_set(obs, N_CH, y, bit - MINATAR_N * (y - 1), CH_BRICK);
    }
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    Breakout *s = state;
    minatar_reset_common(&s->common, seed);
    /* one randint(2): 0 starts at the left edge heading down-right, 1 at the right
     * edge heading down-left, both in row 3 */
    int side = minatar_randint(&s->common, 0, 2);
    s->ball_x = side ? MINATAR_N - 1 : 0;
    s->ball_dir = side ? 3 : 2;
    s->ball_y = 3;
    s->paddle = 4;
    s->bricks = ALL_BRICKS;
    s->strike = 0;
    s->last_x = s->ball_x; /* the first frame's trail coincides with the ball */
    s->last_y = s->ball_y;
    write_obs(s, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    const MinatarParams *p = nevo_env_params(env);
    Breakout *s = state;
    int a = minatar_action(p, &s->common, action); /* the sticky draw comes first */
    int reward = 0;
    if (s->common.terminal) { /* an ended game does nothing (the draw above still ran) */
        out->reward = 0.0f;
        out->terminated = true;
        write_obs(s, obs);
        return;
    }

    /* 1. paddle */
    if (a == MINATAR_LEFT && s->paddle > 0) s->paddle--;
    else if (a == MINATAR_RIGHT && s->paddle < MINATAR_N - 1) s->paddle++;

    /* 2. tentative move */
    s->last_x = s->ball_x;
    s->last_y = s->ball_y;
    int nx = s->ball_x + DX[s->ball_dir];
    int ny = s->ball_y + DY[s->ball_dir];
    NEVO_ASSERT(ny >= -1 && ny <= MINATAR_N - 1); /* set_state keeps the ball off row 9 */

    /* 3. side walls: clamp and flip horizontally */
    if (nx < 0 || nx > MINATAR_N - 1) {
        nx = nx < 0 ? 0 : MINATAR_N - 1;
        s->ball_dir = FLIP_X[s->ball_dir];
    }

    /* 4. the first matching case of ceiling / brick / paddle row */
    int strike_now = 0;
    if (ny < 0) {
        ny = 0;
        s->ball_dir = FLIP_Y[s->ball_dir];
    } else if (has_brick(s, ny, nx)) {
        /* Any brick contact is a strike, but only the first of a run breaks the brick;
         * while strike is still set the ball passes into the brick cell untouched. */
        strike_now = 1;
        if (!s->strike) {
            reward = 1;
            s->strike = 1;
            s->bricks &= ~(1u << brick_bit(ny, nx));
            ny = s->last_y;
            s->ball_dir = FLIP_Y[s->ball_dir];
        }
    } else if (ny == MINATAR_N - 1) {
        if (s->bricks == 0) s->bricks = ALL_BRICKS; /* refill, whatever happens next */
        if (s->ball_x == s->paddle) { /* the ball came from straight above the paddle */
            s->ball_dir = FLIP_Y[s->ball_dir];
            ny = s->last_y;
        } else if (nx == s->paddle) { /* it lands on the paddle: sent back the way it came */
            s->ball_dir = FLIP_XY[s->ball_dir];
            ny = s->last_y;
        } else {
            s->common.terminal = 1;
        }
    }

    /* 5. a step without brick contact ends a strike run */
    if (!strike_now) s->strike = 0;

    /* 6. the ball takes its (possibly row-corrected) new cell */
    s->ball_x = nx;
    s->ball_y = ny;

    out->reward = (float)reward;
    out->terminated = s->common.terminal != 0;
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *v) {
    const Breakout *s = state;
    v[0] = s->common.last_action;
    v[1] = s->common.terminal;
    v[2] = s->ball_x;
    v[3] = s->ball_y;
    v[4] = s->ball_dir;
    v[5] = s->last_x;
    v[6] = s->last_y;
    v[7] = s->paddle;
    v[8] = s->strike;
    for (int i = 0; i < N_BRICKS; i++) v[9 + i] = (s->bricks >> i) & 1u;
}

/* values[i] as an integer in [lo, hi]; false (with a message naming the field) if not. */
static bool read_int(const double *values, int i, const char *field, int lo, int hi, int *out,
                     NevoError *err) {
    double v = values[i];
    if (!(v >= lo && v <= hi) || v != (double)(int)v) {
        nevo_error(err, NEVO_ERR_INVALID,
                   "minatar/breakout: state[%d] (%s) is %g, expected an integer in [%d, %d]",
                   i, field, v, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    static const struct {
        const char *name;
        int lo, hi;
    } fields[9] = {
        {"last_action", 0, 5}, {"terminal", 0, 1}, {"ball_x", 0, 9},
        {"ball_y", 0, 9},      {"ball_dir", 0, 3}, {"last_x", 0, 9},
        {"last_y", 0, 9},      {"paddle_x", 0, 9}, {"strike", 0, 1},
    };
    int f[9];
    for (int i = 0; i < 9; i++)
        if (!read_int(values, i, fields[i].name, fields[i].lo, fields[i].hi, &f[i], err))
            return NEVO_ERR_INVALID;
    /* The ball reaches row 9 only in the step that ends the game; stepping a live game
     * from there would take it off the grid. */
    if (f[3] == MINATAR_N - 1 && !f[1])
        return nevo_error(err, NEVO_ERR_INVALID,
                          "minatar/breakout: the ball is in row 9 (state[3]) but the game is "
                          "not terminal; only a terminal state has the ball there");
    uint32_t bricks = 0;
    for (int i = 0; i < N_BRICKS; i++) {
        int b;
        if (!read_int(values, 9 + i, "brick", 0, 1, &b, err)) return NEVO_ERR_INVALID;
        bricks |= (uint32_t)b << i;
    }
    Breakout *s = state;
    s->common.last_action = f[0];
    s->common.terminal = f[1];
    s->ball_x = f[2];
    s->ball_y = f[3];
    s->ball_dir = f[4];
    s->last_x = f[5];
    s->last_y = f[6];
    s->paddle = f[7];
    s->strike = f[8];
    s->bricks = bricks;
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
    static const int minimal[] = {MINATAR_NOOP, MINATAR_LEFT, MINATAR_RIGHT};
    return minatar_configure(spec, params, opts, n_opts, err, minimal, 3);
}

const NevoEnvClass nevo_env_minatar_breakout =
    MINATAR_CLASS("minatar/breakout",
                  "MinAtar Breakout: bounce the ball off the paddle to break bricks",
                  Breakout);
