/* MinAtar Asterix (Young & Tian 2019; reference kenjyoung/MinAtar 4241f24; spec ENVS.md
 * §1.2, draws §1.7).
 *
 * The player walks on rows 1..8 of the 10x10 grid. Enemies and gold spawn at the left
 * or right edge of one of eight rows (slot i <-> row i+1) and walk across; touching
 * gold gives +1 and removes it, touching an enemy ends the episode. Spawning and
 * entity moves run on countdown timers whose periods shrink every 102 steps when
 * difficulty ramping is on. Channels: 0 player, 1 enemy, 2 trail, 3 gold.
 *
 * get_state / set_state layout (42 doubles, all integer-valued):
 *   [0] last_action  [1] terminal  [2] player_x  [3] player_y
 *   [4] spawn_speed  [5] spawn_timer  [6] move_speed  [7] move_timer
 *   [8] ramp_timer   [9] ramp_index
 *   [10 + 4*i ...] slot i: present, x, dir_right, is_gold
 * The random stream's position is not part of it (set_state keeps the current one). */
#include <string.h>

#include "envs/minatar.h"

#define N_CH 4
#define N_SLOTS 8 /* the reference's entity list has exactly one slot per row 1..8 */
#define STATE_DIM (10 + 4 * N_SLOTS)

enum { CH_PLAYER = 0, CH_ENEMY = 1, CH_TRAIL = 2, CH_GOLD = 3 };

/* Reference constants (asterix.py): ramp every 100 (+2, see step), spawn every 10,
 * move every 5. */
#define RAMP_INTERVAL 100
#define INIT_SPAWN_SPEED 10
#define INIT_MOVE_SPEED 5

typedef struct Asterix {
    MinatarCommon common;
    int8_t player_x, player_y;
    /* Entities live in fixed slots, exactly as in the reference list of 8; the slot is
     * the row, so the list can never overflow. ent_x < 0 marks an empty slot. */
    int8_t ent_x[N_SLOTS];
    uint8_t ent_right[N_SLOTS];
    uint8_t ent_gold[N_SLOTS];
    int spawn_speed, spawn_timer, move_speed, move_timer, ramp_timer, ramp_index;
} Asterix;

static void write_obs(const Asterix *s, float *obs) {
    memset(obs, 0, sizeof(float) * MINATAR_N * MINATAR_N * N_CH);
    minatar_set(obs, N_CH, s->player_y, s->player_x, CH_PLAYER);
    for (int i = 0; i < N_SLOTS; i++) {
        int x = s->ent_x[i];
        if (x < 0) continue;
        int row = i + 1;
        minatar_set(obs, N_CH, row, x, s->ent_gold[i] ? CH_GOLD : CH_ENEMY);
        /* The trail sits behind the entity and is dropped at the edge (no wrap). */
        int back = s->ent_right[i] ? x - 1 : x + 1;
        if (back >= 0 && back < MINATAR_N) minatar_set(obs, N_CH, row, back, CH_TRAIL);
    }
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    Asterix *s = state;
    minatar_reset_common(&s->common, seed);
    s->player_x = 5;
    s->player_y = 5;
    for (int i = 0; i < N_SLOTS; i++) {
        s->ent_x[i] = -1;
        s->ent_right[i] = 0;
        s->ent_gold[i] = 0;
    }
    s->spawn_speed = INIT_SPAWN_SPEED;
    s->spawn_timer = INIT_SPAWN_SPEED;
    s->move_speed = INIT_MOVE_SPEED;
    s->move_timer = INIT_MOVE_SPEED;
    s->ramp_timer = RAMP_INTERVAL;
    s->ramp_index = 0;
    write_obs(s, obs);
}

/* §1.2 Spawn: both draws happen even when every slot is full; the slot draw only when
 * at least one is free (§1.7). */
static void spawn(Asterix *s) {
    int right = minatar_rand(&s->common) < 0.5;
    int gold = minatar_rand(&s->common) < 1.0 / 3.0;
    int free_slots[N_SLOTS], n_free = 0;
    for (int i = 0; i < N_SLOTS; i++)
        if (s->ent_x[i] < 0) free_slots[n_free++] = i;
    if (n_free == 0) return;
    int slot = free_slots[minatar_randint(&s->common, 0, n_free)];
    s->ent_x[slot] = right ? 0 : MINATAR_N - 1;
    s->ent_right[slot] = (uint8_t)right;
    s->ent_gold[slot] = (uint8_t)gold;
}

/* Gold or enemy on the player's cell: gold is removed for +1, an enemy ends the
 * episode but the step goes on (the reference only sets a flag). */
static int touch(Asterix *s, int slot) {
    if (s->ent_gold[slot]) {
        s->ent_x[slot] = -1;
        return 1;
    }
    s->common.terminal = 1;
    return 0;
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    const MinatarParams *p = nevo_env_params(env);
    Asterix *s = state;
    int a = minatar_action(p, &s->common, action); /* the sticky draw comes first */
    int reward = 0;
    if (s->common.terminal) { /* an ended game does nothing (the draw above still ran) */
        out->reward = 0.0f;
        out->terminated = true;
        write_obs(s, obs);
        return;
    }

    /* 1. spawn when the timer has run out */
    if (s->spawn_timer == 0) {
        spawn(s);
        s->spawn_timer = s->spawn_speed;
    }

    /* 2. player move, clamped to x 0..9 and y 1..8; n and f do nothing */
    switch (a) {
    case MINATAR_LEFT: if (s->player_x > 0) s->player_x--; break;
    case MINATAR_RIGHT: if (s->player_x < MINATAR_N - 1) s->player_x++; break;
    case MINATAR_UP: if (s->player_y > 1) s->player_y--; break;
    case MINATAR_DOWN: if (s->player_y < N_SLOTS) s->player_y++; break;
    default: break;
    }

    /* 3. pre-move collision pass. Slot i is row i+1, so only the player's row's slot
     * can share the player's cell; checking it alone equals the reference's scan. */
    int pslot = s->player_y - 1;
    NEVO_ASSERT(pslot >= 0 && pslot < N_SLOTS);
    if (s->ent_x[pslot] == s->player_x) reward += touch(s, pslot);

    /* 4. entity moves, slots in order; leaving the grid removes the entity, landing on
     * the player applies the same gold / enemy rule */
    if (s->move_timer == 0) {
        s->move_timer = s->move_speed;
        for (int i = 0; i < N_SLOTS; i++) {
            int x = s->ent_x[i];
            if (x < 0) continue;
            x += s->ent_right[i] ? 1 : -1;
            if (x < 0 || x >= MINATAR_N) {
                s->ent_x[i] = -1;
                continue;
            }
            s->ent_x[i] = (int8_t)x;
            if (i == pslot && x == s->player_x) reward += touch(s, i);
        }
    }

    /* 5. timers */
    s->spawn_timer--;
    s->move_timer--;

    /* 6. ramp: the timer runs 100 -> -1 and ramps on the following step, so every 102
     * steps; the move period shrinks on odd ramp indices only. */
    if (p->ramping && (s->spawn_speed > 1 || s->move_speed > 1)) {
        if (s->ramp_timer >= 0) {
            s->ramp_timer--;
        } else {
            if (s->move_speed > 1 && (s->ramp_index & 1)) s->move_speed--;
            if (s->spawn_speed > 1) s->spawn_speed--;
            s->ramp_index++;
            s->ramp_timer = RAMP_INTERVAL;
        }
    }

    out->reward = (float)reward;
    out->terminated = s->common.terminal != 0;
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *v) {
    const Asterix *s = state;
    v[0] = s->common.last_action;
    v[1] = s->common.terminal;
    v[2] = s->player_x;
    v[3] = s->player_y;
    v[4] = s->spawn_speed;
    v[5] = s->spawn_timer;
    v[6] = s->move_speed;
    v[7] = s->move_timer;
    v[8] = s->ramp_timer;
    v[9] = s->ramp_index;
    for (int i = 0; i < N_SLOTS; i++) {
        double *e = v + 10 + 4 * i;
        e[0] = s->ent_x[i] >= 0;
        e[1] = s->ent_x[i] >= 0 ? s->ent_x[i] : 0;
        e[2] = s->ent_right[i];
        e[3] = s->ent_gold[i];
    }
}

/* values[i] as an integer in [lo, hi]; false (with a message naming the field) if not. */
static bool read_int(const double *values, int i, const char *field, int lo, int hi, int *out,
                     NevoError *err) {
    double v = values[i];
    if (!(v >= lo && v <= hi) || v != (double)(int)v) {
        nevo_error(err, NEVO_ERR_INVALID,
                   "minatar/asterix: state[%d] (%s) is %g, expected an integer in [%d, %d]",
                   i, field, v, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    /* Timers accept any value reachable by the rules plus some slack; what matters is
     * that no value can break an invariant (player row 1..8, x 0..9). */
    static const struct {
        const char *name;
        int lo, hi;
    } fields[10] = {
        {"last_action", 0, 5}, {"terminal", 0, 1},   {"player_x", 0, 9},
        {"player_y", 1, 8},    {"spawn_speed", 1, INIT_SPAWN_SPEED},
        {"spawn_timer", 0, 1000}, {"move_speed", 1, INIT_MOVE_SPEED},
        {"move_timer", 0, 1000},  {"ramp_timer", -1, RAMP_INTERVAL},
        {"ramp_index", 0, 1000},
    };
    int f[10];
    for (int i = 0; i < 10; i++)
        if (!read_int(values, i, fields[i].name, fields[i].lo, fields[i].hi, &f[i], err))
            return NEVO_ERR_INVALID;
    int present[N_SLOTS], ex[N_SLOTS], right[N_SLOTS], gold[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++) {
        int b = 10 + 4 * i;
        if (!read_int(values, b, "slot present", 0, 1, &present[i], err) ||
            !read_int(values, b + 1, "slot x", 0, 9, &ex[i], err) ||
            !read_int(values, b + 2, "slot dir_right", 0, 1, &right[i], err) ||
            !read_int(values, b + 3, "slot is_gold", 0, 1, &gold[i], err))
            return NEVO_ERR_INVALID;
    }
    Asterix *s = state;
    s->common.last_action = f[0];
    s->common.terminal = f[1];
    s->player_x = (int8_t)f[2];
    s->player_y = (int8_t)f[3];
    s->spawn_speed = f[4];
    s->spawn_timer = f[5];
    s->move_speed = f[6];
    s->move_timer = f[7];
    s->ramp_timer = f[8];
    s->ramp_index = f[9];
    for (int i = 0; i < N_SLOTS; i++) {
        s->ent_x[i] = (int8_t)(present[i] ? ex[i] : -1);
        s->ent_right[i] = (uint8_t)right[i];
        s->ent_gold[i] = (uint8_t)gold[i];
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
    static const int minimal[] = {MINATAR_NOOP, MINATAR_LEFT, MINATAR_UP, MINATAR_RIGHT,
                                  MINATAR_DOWN};
    return minatar_configure(spec, params, opts, n_opts, err, minimal, 5);
}

const NevoEnvClass nevo_env_minatar_asterix =
    MINATAR_CLASS("minatar/asterix",
                  "MinAtar Asterix: collect gold, dodge enemies crossing the rows",
                  Asterix);
