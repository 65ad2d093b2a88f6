/* MinAtar Space Invaders (Young & Tian 2019; reference kenjyoung/MinAtar 4241f24, spec
 * ENVS.md §1.6).
 *
 * A cannon on row 9 shoots up at a block of aliens that sweeps sideways, steps down and
 * reverses at the edges, and fires back from the alien nearest the cannon. A cleared wave
 * is refilled, faster when ramping is on. The game draws no random numbers; only the
 * sticky action is random.
 *
 * The three maps (aliens, friendly bullets, enemy bullets) are kept as ten 10-bit row
 * masks (bit x = column x), so the reference's whole-map operations (np.roll, the kill
 * mask) are a few word operations. The reference's wrap-arounds are kept where they can
 * be seen: aliens stepping down from row 9 (a terminal step) reappear in row 0.
 *
 * get_state/set_state layout (doubles):
 *   [0] last_action [1] terminal [2] pos [3] alien_dir (+1/-1) [4] enemy_move_interval
 *   [5] alien_move_timer [6] alien_shot_timer [7] shot_timer [8] ramp_index
 *   [9..108] alien map, [109..208] friendly bullet map, [209..308] enemy bullet map
 *   (each row-major [y][x], 0 or 1). The random stream's position is not part of it. */
#include <string.h>

#include "envs/minatar.h"

#define N_CH 6
enum { CH_CANNON, CH_ALIEN, CH_ALIEN_LEFT, CH_ALIEN_RIGHT, CH_F_BULLET, CH_E_BULLET };

#define SHOT_COOL_DOWN 5
#define ENEMY_MOVE_INTERVAL 12
#define ENEMY_SHOT_INTERVAL 10
#define MIN_MOVE_INTERVAL 6 /* the ramp stops at 6 */
#define HEADER_DIM 9
#define STATE_DIM (HEADER_DIM + 3 * MINATAR_N * MINATAR_N)
#define COL0 0x001u
#define COL9 0x200u
#define WAVE_ROW 0x0FCu /* columns 2..7 */

typedef struct SpaceInvaders {
    MinatarCommon common;
    uint16_t alien[MINATAR_N], fb[MINATAR_N], eb[MINATAR_N]; /* row masks */
    int n_aliens;
    int pos, dir, move_interval, move_timer, alien_shot_timer, shot_timer, ramp_index;
} SpaceInvaders;

static const int minimal_set[4] = {0, 1, 3, 5};

static void fill_wave(SpaceInvaders *s) {
    for (int y = 0; y < 4; y++) s->alien[y] |= WAVE_ROW;
    s->n_aliens = 24; /* called only when no alien is left */
}

static void write_obs(const SpaceInvaders *s, float *obs) {
    memset(obs, 0, sizeof(float) * MINATAR_N * MINATAR_N * N_CH);
    minatar_set(obs, N_CH, 9, s->pos, CH_CANNON);
    /* The alien map goes to channel 1 and to the channel of the current direction. */
    int dir_ch = s->dir < 0 ? CH_ALIEN_LEFT : CH_ALIEN_RIGHT;
    for (int y = 0; y < MINATAR_N; y++) {
        float *row = obs + y * MINATAR_N * N_CH;
        for (unsigned m = s->alien[y]; m; m &= m - 1) {
            int x = __builtin_ctz(m);
            row[x * N_CH + CH_ALIEN] = 1.0f;
            row[x * N_CH + dir_ch] = 1.0f;
        }
        for (unsigned m = s->fb[y]; m; m &= m - 1) row[__builtin_ctz(m) * N_CH + CH_F_BULLET] = 1.0f;
        for (unsigned m = s->eb[y]; m; m &= m - 1) row[__builtin_ctz(m) * N_CH + CH_E_BULLET] = 1.0f;
    }
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    SpaceInvaders *s = state;
    minatar_reset_common(&s->common, seed);
    memset(s->alien, 0, sizeof s->alien);
    memset(s->fb, 0, sizeof s->fb);
    memset(s->eb, 0, sizeof s->eb);
    fill_wave(s);
    s->pos = 5;
    s->dir = -1;
    s->move_interval = ENEMY_MOVE_INTERVAL;
    s->move_timer = ENEMY_MOVE_INTERVAL;
    s->alien_shot_timer = ENEMY_SHOT_INTERVAL;
    s->shot_timer = 0;
    s->ramp_index = 0;
    write_obs(s, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    SpaceInvaders *s = state;
    const MinatarParams *p = nevo_env_params(env);
    int a = minatar_action(p, &s->common, action); /* the sticky draw comes first */
    if (s->common.terminal) { /* a finished game only consumes the sticky draw */
        out->reward = 0.0f;
        out->terminated = true;
        write_obs(s, obs);
        return;
    }
    int term = 0, r = 0;

    /* 1. Action: fire when the cannon is loaded, else left/right (clamped). */
    if (a == MINATAR_FIRE && s->shot_timer == 0) {
        s->fb[9] |= (uint16_t)(1u << s->pos);
        s->shot_timer = SHOT_COOL_DOWN;
    } else if (a == MINATAR_LEFT) {
        if (s->pos > 0) s->pos--;
    } else if (a == MINATAR_RIGHT) {
        if (s->pos < 9) s->pos++;
    }
    const unsigned pbit = 1u << s->pos;

    /* 2. Friendly bullets up one row; one leaving the top wraps into row 9, which is
     * cleared, so it is simply gone (a new shot is already in row 8). */
    memmove(s->fb, s->fb + 1, sizeof(uint16_t) * 9);
    s->fb[9] = 0;

    /* 3. Enemy bullets down one row (row 9 wraps to row 0, cleared); then a hit. */
    memmove(s->eb + 1, s->eb, sizeof(uint16_t) * 9);
    s->eb[0] = 0;
    if (s->eb[9] & pbit) term = 1;

    /* 4. An alien on the cannon. */
    if (s->alien[9] & pbit) term = 1;

    /* 5. Alien move. */
    if (s->move_timer == 0) {
        s->move_timer = s->n_aliens < s->move_interval ? s->n_aliens : s->move_interval;
        unsigned cols = 0;
        for (int y = 0; y < MINATAR_N; y++) cols |= s->alien[y];
        if (((cols & COL0) && s->dir < 0) || ((cols & COL9) && s->dir > 0)) {
            s->dir = -s->dir;
            if (s->alien[9]) term = 1;
            /* np.roll by one row: row 9 comes back as row 0. */
            uint16_t last = s->alien[9];
            memmove(s->alien + 1, s->alien, sizeof(uint16_t) * 9);
            s->alien[0] = last;
        } else if (s->dir < 0) {
            for (int y = 0; y < MINATAR_N; y++) s->alien[y] >>= 1; /* column x -> x-1 */
        } else {
            for (int y = 0; y < MINATAR_N; y++) s->alien[y] = (uint16_t)(s->alien[y] << 1);
        }
        if (s->alien[9] & pbit) term = 1;
    }

    /* 6. Alien shot: columns by distance to the cannon, ties to the lower column; the
     * lowest alien of the first occupied column gets an enemy bullet on its cell. */
    if (s->alien_shot_timer == 0) {
        s->alien_shot_timer = ENEMY_SHOT_INTERVAL;
        unsigned cols = 0;
        for (int y = 0; y < MINATAR_N; y++) cols |= s->alien[y];
        int col = -1;
        for (int d = 0; d < MINATAR_N && col < 0; d++) {
            if (s->pos - d >= 0 && (cols >> (s->pos - d) & 1u)) col = s->pos - d;
            else if (s->pos + d < MINATAR_N && (cols >> (s->pos + d) & 1u)) col = s->pos + d;
        }
        NEVO_ASSERT(col >= 0); /* a wave is refilled the step it is cleared */
        int y = MINATAR_N - 1;
        while (!(s->alien[y] >> col & 1u)) y--;
        s->eb[y] |= (uint16_t)(1u << col);
    }

    /* 7. Every cell holding an alien and a friendly bullet loses both, +1 each. */
    for (int y = 0; y < MINATAR_N; y++) {
        unsigned k = s->alien[y] & s->fb[y];
        if (k) {
            int n = __builtin_popcount(k);
            r += n;
            s->n_aliens -= n;
            s->alien[y] &= (uint16_t)~k;
            s->fb[y] &= (uint16_t)~k;
        }
    }

    /* 8. Timers. */
    s->shot_timer -= s->shot_timer > 0;
    s->move_timer--;
    s->alien_shot_timer--;

    /* 9. A cleared wave: ramp, then refill; direction and timers carry over. */
    if (s->n_aliens == 0) {
        if (s->move_interval > MIN_MOVE_INTERVAL && p->ramping) {
            s->move_interval--;
            s->ramp_index++;
        }
        fill_wave(s);
    }

    if (term) s->common.terminal = 1;
    out->reward = (float)r;
    out->terminated = s->common.terminal != 0;
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *v) {
    const SpaceInvaders *s = state;
    v[0] = s->common.last_action;
    v[1] = s->common.terminal;
    v[2] = s->pos;
    v[3] = s->dir;
    v[4] = s->move_interval;
    v[5] = s->move_timer;
    v[6] = s->alien_shot_timer;
    v[7] = s->shot_timer;
    v[8] = s->ramp_index;
    const uint16_t *maps[3] = {s->alien, s->fb, s->eb};
    for (int k = 0; k < 3; k++)
        for (int y = 0; y < MINATAR_N; y++)
            for (int x = 0; x < MINATAR_N; x++)
                v[HEADER_DIM + k * 100 + y * MINATAR_N + x] = (maps[k][y] >> x) & 1u;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *v, float *obs,
                            NevoError *err) {
    /* Ranges: what play can reach (timers never exceed their reload values). */
    static const int lo[HEADER_DIM] = {0, 0, 0, -1, 1, 0, 0, 0, 0};
    static const int hi[HEADER_DIM] = {5, 1, 9, 1, ENEMY_MOVE_INTERVAL, ENEMY_MOVE_INTERVAL,
                                       ENEMY_SHOT_INTERVAL, SHOT_COOL_DOWN, 1000000000};
    int h[HEADER_DIM];
    for (int i = 0; i < HEADER_DIM; i++) {
        double x = v[i];
        if (!(x >= lo[i] && x <= hi[i]) || x != (double)(int)x || (i == 3 && x == 0))
            return nevo_error(err, NEVO_ERR_INVALID,
                              "minatar/space_invaders: state[%d] = %g, expected an integer in "
                              "[%d, %d]%s",
                              i, x, lo[i], hi[i], i == 3 ? " other than 0" : "");
        h[i] = (int)x;
    }
    SpaceInvaders t;
    memset(&t, 0, sizeof t);
    uint16_t *maps[3] = {t.alien, t.fb, t.eb};
    for (int k = 0; k < 3; k++)
        for (int y = 0; y < MINATAR_N; y++)
            for (int x = 0; x < MINATAR_N; x++) {
                double c = v[HEADER_DIM + k * 100 + y * MINATAR_N + x];
                if (c != 0.0 && c != 1.0)
                    return nevo_error(err, NEVO_ERR_INVALID,
                                      "minatar/space_invaders: state[%d] = %g, expected 0 or 1",
                                      HEADER_DIM + k * 100 + y * MINATAR_N + x, c);
                if (c != 0.0) maps[k][y] |= (uint16_t)(1u << x);
            }
    for (int y = 0; y < MINATAR_N; y++) t.n_aliens += __builtin_popcount(t.alien[y]);
    /* The reference refills a cleared wave within the step, so play never shows an empty
     * alien map (its shot-column search would fail on one). */
    if (t.n_aliens == 0)
        return nevo_error(err, NEVO_ERR_INVALID, "minatar/space_invaders: the alien map is empty");
    t.common = ((const SpaceInvaders *)state)->common; /* keeps the random stream */
    t.common.last_action = h[0];
    t.common.terminal = h[1];
    t.pos = h[2];
    t.dir = h[3];
    t.move_interval = h[4];
    t.move_timer = h[5];
    t.alien_shot_timer = h[6];
    t.shot_timer = h[7];
    t.ramp_index = h[8];
    t.common.rng = ((const SpaceInvaders *)state)->common.rng; /* the random stream is not part of the state */
    *(SpaceInvaders *)state = t;
    write_obs(state, obs);
    return NEVO_OK;
}

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts, int n,
                            NevoError *err) {
    return minatar_configure(spec, params, opts, n, err, minimal_set, 4);
}

static void render(const NevoEnv *env, const void *state, uint8_t *rgb) {
    float obs[MINATAR_N * MINATAR_N * N_CH];
    write_obs(state, obs);
    minatar_render_obs(obs, N_CH, rgb);
}

const NevoEnvClass nevo_env_minatar_space_invaders =
    MINATAR_CLASS("minatar/space_invaders",
                  "MinAtar Space Invaders: shoot the descending aliens, dodge their fire",
                  SpaceInvaders);
