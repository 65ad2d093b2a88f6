/* MinAtar Seaquest (Young & Tian 2019; reference kenjyoung/MinAtar 4241f24, spec ENVS.md §1.5).
 *
 * The player's submarine (front and back cell) moves on a 10x10 grid, shoots, picks up
 * divers and must surface before its oxygen runs out; enemy fish and subs cross the rows,
 * subs fire bullets. A step runs the spec's eleven phases in order: spawns, action,
 * friendly bullets, divers, enemy subs, enemy bullets, fish, timers, oxygen check,
 * oxygen/surfacing. Entity lists keep the reference's list order (it decides which
 * entity a bullet hits) and every phase iterates its list last-to-first as the reference
 * does; removing an entity deletes that very entity and keeps the others in order.
 *
 * Reference quirks kept on purpose (spec §1.5): a full-6 surface leaves diver_count at
 * -1 (and later surfaces keep decrementing it without ending the game); an enemy sub
 * removed in its phase still fires its last bullet; termination does not stop the step.
 *
 * get_state/set_state layout (doubles; directions are +1 right / -1 left):
 *   [0] last_action [1] terminal [2] oxygen [3] diver_count [4] sub_x [5] sub_y
 *   [6] sub_dir [7] surface [8] shot_timer [9] e_spawn_speed [10] e_spawn_timer
 *   [11] d_spawn_timer [12] move_speed [13] ramp_index
 *   [14..18] counts of friendly bullets, enemy bullets, fish, enemy subs, divers
 *   then fixed-capacity blocks, unused slots 0:
 *   friendly bullets FB_CAP x (x, y, dir), enemy bullets EB_CAP x (x, y, dir),
 *   fish ENEMY_CAP x (x, y, dir, move_timer), enemy subs ENEMY_CAP x (x, y, dir,
 *   move_timer, shot_timer), divers DIVER_CAP x (x, y, dir, move_timer).
 * The random stream's position is not part of the state. */
#include <string.h>

#include "envs/minatar.h"

#define N_CH 10
enum { CH_SUB_FRONT, CH_SUB_BACK, CH_F_BULLET, CH_TRAIL, CH_E_BULLET, CH_FISH, CH_E_SUB,
       CH_OXYGEN, CH_DIVER_GAUGE, CH_DIVER };

#define MAX_OXYGEN 200
#define INIT_SPAWN_SPEED 20
#define DIVER_SPAWN_SPEED 30
#define INIT_MOVE_INTERVAL 5
#define SHOT_COOL_DOWN 5
#define ENEMY_SHOT_INTERVAL 10
#define DIVER_MOVE_INTERVAL 5
#define MAX_DIVERS_CARRIED 6

/* List capacities, and the largest lists set_state accepts. Why they never overflow:
 * - Lifetimes. Every mover (fish, sub, diver) has a move timer <= 5 (timers are only ever
 *   set to move_speed <= 5 or 5, and set_state enforces it), so it moves at least every 6
 *   steps and, starting inside the grid, leaves after at most 10 moves: it stays in its
 *   list for at most 60 steps. A bullet moves every step, including the step it is fired,
 *   so it stays at most 10 steps (a dead sub's off-grid shot only one).
 * - Enemies: at most one spawn per step (the spawn timer is reset to e_spawn_speed >= 1),
 *   so at most 60 reference-made enemies exist; a set_state state adds at most
 *   ENEMY_SET_MAX = 60 more that are all gone after 60 steps: <= 120 per list <= ENEMY_CAP.
 * - Enemy bullets: a sub fires at most once in any 10 consecutive steps (interval 11), so
 *   the bullets alive were fired by the <= 120 + 10 subs present in the last 10 steps,
 *   plus up to EB_SET_MAX = 20 set ones (gone after 10 steps): <= 150 <= EB_CAP.
 * - Friendly bullets: one shot per 5 steps, so <= 2 live shots plus the one fired this
 *   step, plus up to FB_SET_MAX = 3 set ones: <= 6 <= FB_CAP.
 * - Divers: one spawn per 30 steps and at most 60 steps in the list: <= 3, plus up to
 *   DIVER_SET_MAX = 3 set ones: <= 6 <= DIVER_CAP.
 * Appends NEVO_ASSERT the capacity anyway. */
#define FB_CAP 8
#define EB_CAP 160
#define ENEMY_CAP 128
#define DIVER_CAP 8
#define FB_SET_MAX 3
#define EB_SET_MAX 20
#define ENEMY_SET_MAX 60
#define DIVER_SET_MAX 3

typedef struct Bullet {
    int8_t x, y, dir;
} Bullet;

/* A fish, a diver, or an enemy sub (shot used by subs only). */
typedef struct Mover {
    int8_t x, y, dir, timer, shot;
} Mover;

typedef struct Seaquest {
    MinatarCommon common;
    int oxygen, diver_count, ramp_index;
    int8_t sub_x, sub_y, sub_dir, surface, shot_timer;
    int8_t e_spawn_speed, e_spawn_timer, d_spawn_timer, move_speed;
    uint8_t n_fb, n_eb, n_fish, n_subs, n_divers;
    Bullet fb[FB_CAP];
    Bullet eb[EB_CAP];
    Mover fish[ENEMY_CAP];
    Mover subs[ENEMY_CAP];
    Mover divers[DIVER_CAP];
} Seaquest;

#define HEADER_DIM 19
#define STATE_DIM (HEADER_DIM + 3 * FB_CAP + 3 * EB_CAP + 4 * ENEMY_CAP + 5 * ENEMY_CAP + 4 * DIVER_CAP)

static const int minimal_set[6] = {0, 1, 2, 3, 4, 5};

/* Python's floor division for the (never negative in play) oxygen reward. */
static int floordiv(int a, int b) {
    int q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Removal keeps the remaining entities in list order (the order decides hits). */
static void remove_bullet(Bullet *list, uint8_t *n, int i) {
    memmove(list + i, list + i + 1, sizeof *list * (size_t)(*n - i - 1));
    (*n)--;
}

static void remove_mover(Mover *list, uint8_t *n, int i) {
    memmove(list + i, list + i + 1, sizeof *list * (size_t)(*n - i - 1));
    (*n)--;
}

/* First entity in list order on cell (x, y), or -1. */
static int find_mover(const Mover *list, int n, int x, int y) {
    for (int i = 0; i < n; i++)
        if (list[i].x == x && list[i].y == y) return i;
    return -1;
}

static int find_bullet(const Bullet *list, int n, int x, int y) {
    for (int i = 0; i < n; i++)
        if (list[i].x == x && list[i].y == y) return i;
    return -1;
}

static void write_obs(const Seaquest *s, float *obs) {
    memset(obs, 0, sizeof(float) * MINATAR_N * MINATAR_N * N_CH);
    minatar_set(obs, N_CH, s->sub_y, s->sub_x, CH_SUB_FRONT);
    int back = s->sub_x - s->sub_dir; /* behind the front: x-1 facing right, x+1 facing left */
    if (back >= 0 && back < MINATAR_N) minatar_set(obs, N_CH, s->sub_y, back, CH_SUB_BACK);
    /* Oxygen gauge: row 9, columns 0 .. max(0, oxygen)*10//200 - 1. */
    int n_oxy = (s->oxygen > 0 ? s->oxygen : 0) * 10 / MAX_OXYGEN;
    if (n_oxy > MINATAR_N) n_oxy = MINATAR_N;
    for (int x = 0; x < n_oxy; x++) minatar_set(obs, N_CH, 9, x, CH_OXYGEN);
    /* Diver gauge: row 9, columns 9 - diver_count .. 8 (empty when the count <= 0). */
    for (int x = 9 - s->diver_count; x < 9; x++)
        if (x >= 0) minatar_set(obs, N_CH, 9, x, CH_DIVER_GAUGE);
    for (int i = 0; i < s->n_fb; i++) minatar_set(obs, N_CH, s->fb[i].y, s->fb[i].x, CH_F_BULLET);
    for (int i = 0; i < s->n_eb; i++) minatar_set(obs, N_CH, s->eb[i].y, s->eb[i].x, CH_E_BULLET);
    /* Fish, subs and divers mark a trail cell behind them, inside the grid only. */
    const struct {
        const Mover *list;
        int n, ch;
    } groups[3] = {{s->fish, s->n_fish, CH_FISH}, {s->subs, s->n_subs, CH_E_SUB},
                   {s->divers, s->n_divers, CH_DIVER}};
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < groups[g].n; i++) {
            const Mover *m = &groups[g].list[i];
            minatar_set(obs, N_CH, m->y, m->x, groups[g].ch);
            int tx = m->x - m->dir;
            if (tx >= 0 && tx < MINATAR_N) minatar_set(obs, N_CH, m->y, tx, CH_TRAIL);
        }
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    Seaquest *s = state;
    minatar_reset_common(&s->common, seed);
    s->oxygen = MAX_OXYGEN;
    s->diver_count = 0;
    s->ramp_index = 0;
    s->sub_x = 5;
    s->sub_y = 0;
    s->sub_dir = -1; /* facing left */
    s->surface = 1;
    s->shot_timer = 0;
    s->e_spawn_speed = INIT_SPAWN_SPEED;
    s->e_spawn_timer = INIT_SPAWN_SPEED;
    s->d_spawn_timer = DIVER_SPAWN_SPEED;
    s->move_speed = INIT_MOVE_INTERVAL;
    s->n_fb = s->n_eb = s->n_fish = s->n_subs = s->n_divers = 0;
    write_obs(s, obs);
}

/* Enemy spawn: three draws, always all consumed (direction, kind, row), then cancelled if
 * any sub or fish in that row moves the opposite way. */
static void spawn_enemy(Seaquest *s) {
    int lr = minatar_rand(&s->common) < 0.5;
    int is_sub = minatar_rand(&s->common) < 1.0 / 3.0;
    int y = minatar_randint(&s->common, 1, 9);
    int dir = lr ? 1 : -1;
    for (int i = 0; i < s->n_subs; i++)
        if (s->subs[i].y == y && s->subs[i].dir != dir) return;
    for (int i = 0; i < s->n_fish; i++)
        if (s->fish[i].y == y && s->fish[i].dir != dir) return;
    Mover m = {(int8_t)(lr ? 0 : 9), (int8_t)y, (int8_t)dir, s->move_speed, 0};
    if (is_sub) {
        NEVO_ASSERT(s->n_subs < ENEMY_CAP);
        m.shot = ENEMY_SHOT_INTERVAL;
        s->subs[s->n_subs++] = m;
    } else {
        NEVO_ASSERT(s->n_fish < ENEMY_CAP);
        s->fish[s->n_fish++] = m;
    }
}

static void spawn_diver(Seaquest *s) {
    int lr = minatar_rand(&s->common) < 0.5;
    int y = minatar_randint(&s->common, 1, 9);
    NEVO_ASSERT(s->n_divers < DIVER_CAP);
    s->divers[s->n_divers++] = (Mover){(int8_t)(lr ? 0 : 9), (int8_t)y, (int8_t)(lr ? 1 : -1),
                                       DIVER_MOVE_INTERVAL, 0};
}

/* surface(): reward for a full load, refill oxygen, drop one diver (always: a full load
 * leaves -1), then one ramp step. */
static int surface(Seaquest *s, const MinatarParams *p) {
    int r = 0;
    s->surface = 1;
    if (s->diver_count == MAX_DIVERS_CARRIED) {
        s->diver_count = 0;
        r = floordiv(s->oxygen * 10, MAX_OXYGEN);
    }
    s->oxygen = MAX_OXYGEN;
    s->diver_count -= 1;
    if (p->ramping && (s->e_spawn_speed > 1 || s->move_speed > 2)) {
        if (s->move_speed > 2 && (s->ramp_index & 1)) s->move_speed--;
        if (s->e_spawn_speed > 1) s->e_spawn_speed--;
        s->ramp_index++;
    }
    return r;
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    Seaquest *s = state;
    const MinatarParams *p = nevo_env_params(env);
    int a = minatar_action(p, &s->common, action); /* the sticky draw comes first */
    int r = 0;
    if (s->common.terminal) { /* a finished game only consumes the sticky draw */
        out->reward = 0.0f;
        out->terminated = true;
        write_obs(s, obs);
        return;
    }
    int term = 0;

    /* 1-2. Spawns. */
    if (s->e_spawn_timer == 0) {
        spawn_enemy(s);
        s->e_spawn_timer = s->e_spawn_speed;
    }
    if (s->d_spawn_timer == 0) {
        spawn_diver(s);
        s->d_spawn_timer = DIVER_SPAWN_SPEED;
    }

    /* 3. Action: only the first matching branch (fire while cooling down does nothing). */
    if (a == MINATAR_FIRE && s->shot_timer == 0) {
        NEVO_ASSERT(s->n_fb < FB_CAP);
        s->fb[s->n_fb++] = (Bullet){s->sub_x, s->sub_y, s->sub_dir};
        s->shot_timer = SHOT_COOL_DOWN;
    } else if (a == MINATAR_LEFT) {
        if (s->sub_x > 0) s->sub_x--;
        s->sub_dir = -1;
    } else if (a == MINATAR_RIGHT) {
        if (s->sub_x < 9) s->sub_x++;
        s->sub_dir = 1;
    } else if (a == MINATAR_UP) {
        if (s->sub_y > 0) s->sub_y--;
    } else if (a == MINATAR_DOWN) {
        if (s->sub_y < 8) s->sub_y++;
    }
    const int px = s->sub_x, py = s->sub_y;

    /* 4. Friendly bullets, last to first: move; off-grid ones vanish; otherwise the first
     * fish on the cell, else the first sub, is destroyed with the bullet (+1). */
    for (int i = s->n_fb - 1; i >= 0; i--) {
        Bullet *b = &s->fb[i];
        b->x += b->dir;
        if (b->x < 0 || b->x > 9) {
            remove_bullet(s->fb, &s->n_fb, i);
            continue;
        }
        int j = find_mover(s->fish, s->n_fish, b->x, b->y);
        if (j >= 0) {
            remove_mover(s->fish, &s->n_fish, j);
        } else {
            j = find_mover(s->subs, s->n_subs, b->x, b->y);
            if (j < 0) continue;
            remove_mover(s->subs, &s->n_subs, j);
        }
        remove_bullet(s->fb, &s->n_fb, i);
        r++;
    }

    /* 5. Divers, last to first: picked up on the sub's cell while fewer than 6 are
     * carried; else move when the timer is 0 (then off-grid removal or pick-up). */
    for (int i = s->n_divers - 1; i >= 0; i--) {
        Mover *d = &s->divers[i];
        if (d->x == px && d->y == py && s->diver_count < MAX_DIVERS_CARRIED) {
            remove_mover(s->divers, &s->n_divers, i);
            s->diver_count++;
        } else if (d->timer == 0) {
            d->timer = DIVER_MOVE_INTERVAL;
            d->x += d->dir;
            if (d->x < 0 || d->x > 9) {
                remove_mover(s->divers, &s->n_divers, i);
            } else if (d->x == px && d->y == py && s->diver_count < MAX_DIVERS_CARRIED) {
                remove_mover(s->divers, &s->n_divers, i);
                s->diver_count++;
            }
        } else {
            d->timer--;
        }
    }

    /* 6. Enemy subs, last to first. The shot comes after the move and runs even for a sub
     * removed just now (off-grid or shot): the reference keeps using the removed entry. */
    for (int i = s->n_subs - 1; i >= 0; i--) {
        Mover m = s->subs[i];
        int removed = 0;
        if (m.x == px && m.y == py) term = 1;
        if (m.timer == 0) {
            m.timer = s->move_speed;
            m.x += m.dir;
            if (m.x < 0 || m.x > 9) {
                removed = 1;
            } else if (m.x == px && m.y == py) {
                term = 1;
            } else {
                int j = find_bullet(s->fb, s->n_fb, m.x, m.y);
                if (j >= 0) {
                    remove_bullet(s->fb, &s->n_fb, j);
                    removed = 1;
                    r++;
                }
            }
        } else {
            m.timer--;
        }
        if (m.shot == 0) {
            m.shot = ENEMY_SHOT_INTERVAL;
            NEVO_ASSERT(s->n_eb < EB_CAP);
            s->eb[s->n_eb++] = (Bullet){m.x, m.y, m.dir};
        } else {
            m.shot--;
        }
        if (removed) remove_mover(s->subs, &s->n_subs, i);
        else s->subs[i] = m;
    }

    /* 7. Enemy bullets, last to first (this step's shots included): hit before and after
     * the move; off-grid ones vanish. */
    for (int i = s->n_eb - 1; i >= 0; i--) {
        Bullet *b = &s->eb[i];
        if (b->x == px && b->y == py) term = 1;
        b->x += b->dir;
        if (b->x < 0 || b->x > 9) remove_bullet(s->eb, &s->n_eb, i);
        else if (b->x == px && b->y == py) term = 1;
    }

    /* 8. Fish, last to first: as subs, without shooting. */
    for (int i = s->n_fish - 1; i >= 0; i--) {
        Mover *m = &s->fish[i];
        if (m->x == px && m->y == py) term = 1;
        if (m->timer == 0) {
            m->timer = s->move_speed;
            m->x += m->dir;
            if (m->x < 0 || m->x > 9) {
                remove_mover(s->fish, &s->n_fish, i);
            } else if (m->x == px && m->y == py) {
                term = 1;
            } else {
                int j = find_bullet(s->fb, s->n_fb, m->x, m->y);
                if (j >= 0) {
                    remove_bullet(s->fb, &s->n_fb, j);
                    remove_mover(s->fish, &s->n_fish, i);
                    r++;
                }
            }
        } else {
            m->timer--;
        }
    }

    /* 9. Timers, each only while positive. */
    s->e_spawn_timer -= s->e_spawn_timer > 0;
    s->d_spawn_timer -= s->d_spawn_timer > 0;
    s->shot_timer -= s->shot_timer > 0;

    /* 10-11. Oxygen check (before this step's use), then oxygen use or surfacing. */
    if (s->oxygen <= 0) term = 1;
    if (s->sub_y > 0) {
        s->oxygen--;
        s->surface = 0;
    } else if (!s->surface) {
        if (s->diver_count == 0) term = 1;
        else r += surface(s, p);
    }

    if (term) s->common.terminal = 1;
    out->reward = (float)r;
    out->terminated = s->common.terminal != 0;
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *v) {
    const Seaquest *s = state;
    memset(v, 0, sizeof(double) * STATE_DIM);
    v[0] = s->common.last_action;
    v[1] = s->common.terminal;
    v[2] = s->oxygen;
    v[3] = s->diver_count;
    v[4] = s->sub_x;
    v[5] = s->sub_y;
    v[6] = s->sub_dir;
    v[7] = s->surface;
    v[8] = s->shot_timer;
    v[9] = s->e_spawn_speed;
    v[10] = s->e_spawn_timer;
    v[11] = s->d_spawn_timer;
    v[12] = s->move_speed;
    v[13] = s->ramp_index;
    v[14] = s->n_fb;
    v[15] = s->n_eb;
    v[16] = s->n_fish;
    v[17] = s->n_subs;
    v[18] = s->n_divers;
    double *o = v + HEADER_DIM;
    for (int i = 0; i < s->n_fb; i++) {
        o[3 * i] = s->fb[i].x;
        o[3 * i + 1] = s->fb[i].y;
        o[3 * i + 2] = s->fb[i].dir;
    }
    o += 3 * FB_CAP;
    for (int i = 0; i < s->n_eb; i++) {
        o[3 * i] = s->eb[i].x;
        o[3 * i + 1] = s->eb[i].y;
        o[3 * i + 2] = s->eb[i].dir;
    }
    o += 3 * EB_CAP;
    for (int i = 0; i < s->n_fish; i++) {
        o[4 * i] = s->fish[i].x;
        o[4 * i + 1] = s->fish[i].y;
        o[4 * i + 2] = s->fish[i].dir;
        o[4 * i + 3] = s->fish[i].timer;
    }
    o += 4 * ENEMY_CAP;
    for (int i = 0; i < s->n_subs; i++) {
        o[5 * i] = s->subs[i].x;
        o[5 * i + 1] = s->subs[i].y;
        o[5 * i + 2] = s->subs[i].dir;
        o[5 * i + 3] = s->subs[i].timer;
        o[5 * i + 4] = s->subs[i].shot;
    }
    o += 5 * ENEMY_CAP;
    for (int i = 0; i < s->n_divers; i++) {
        o[4 * i] = s->divers[i].x;
        o[4 * i + 1] = s->divers[i].y;
        o[4 * i + 2] = s->divers[i].dir;
        o[4 * i + 3] = s->divers[i].timer;
    }
}

/* Reads values[i] as an integer in [lo, hi]; false (with a message) otherwise. */
static bool get_int(const double *v, int i, int lo, int hi, int *out, NevoError *err) {
    double x = v[i];
    if (!(x >= lo && x <= hi) || x != (double)(int)x) {
        nevo_error(err, NEVO_ERR_INVALID, "minatar/seaquest: state[%d] = %g, expected an integer in [%d, %d]",
                   i, x, lo, hi);
        return false;
    }
    *out = (int)x;
    return true;
}

static bool get_dir(const double *v, int i, int8_t *out, NevoError *err) {
    if (v[i] != 1.0 && v[i] != -1.0) {
        nevo_error(err, NEVO_ERR_INVALID, "minatar/seaquest: state[%d] = %g, expected a direction (+1 or -1)",
                   i, v[i]);
        return false;
    }
    *out = (int8_t)v[i];
    return true;
}

/* Reads a bullet/mover block entry: x, y in the grid, a direction, then n_extra timers in
 * [0, extra_max[k]]. */
static bool get_entity(const double *v, int base, int n_extra, const int *extra_max,
                       int8_t *fields, NevoError *err) {
    int x, y, t;
    if (!get_int(v, base, 0, 9, &x, err) || !get_int(v, base + 1, 0, 9, &y, err) ||
        !get_dir(v, base + 2, &fields[2], err))
        return false;
    fields[0] = (int8_t)x;
    fields[1] = (int8_t)y;
    for (int k = 0; k < n_extra; k++) {
        if (!get_int(v, base + 3 + k, 0, extra_max[k], &t, err)) return false;
        fields[3 + k] = (int8_t)t;
    }
    return true;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *v, float *obs,
                            NevoError *err) {
    Seaquest t;
    memset(&t, 0, sizeof t);
    int x[19];
    /* Ranges: what play can reach (timers never exceed their reload values); the list
     * limits keep the capacity argument above valid. */
    static const int lo[19] = {0, 0, -1, -1000000000, 0, 0, -1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    static const int hi[19] = {5, 1, MAX_OXYGEN, MAX_DIVERS_CARRIED, 9, 8, 1, 1, SHOT_COOL_DOWN,
                               INIT_SPAWN_SPEED, INIT_SPAWN_SPEED, DIVER_SPAWN_SPEED,
                               INIT_MOVE_INTERVAL, 1000000000, FB_SET_MAX, EB_SET_MAX,
                               ENEMY_SET_MAX, ENEMY_SET_MAX, DIVER_SET_MAX};
    for (int i = 0; i < HEADER_DIM; i++) {
        if (i == 6) continue;
        if (!get_int(v, i, lo[i], hi[i], &x[i], err)) return NEVO_ERR_INVALID;
    }
    int8_t dir;
    if (!get_dir(v, 6, &dir, err)) return NEVO_ERR_INVALID;
    if (x[16] + x[17] > ENEMY_SET_MAX)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "minatar/seaquest: %d fish + %d subs, at most %d enemies", x[16], x[17],
                          ENEMY_SET_MAX);
    t.common = ((const Seaquest *)state)->common; /* keeps the random stream */
    t.common.last_action = x[0];
    t.common.terminal = x[1];
    t.oxygen = x[2];
    t.diver_count = x[3];
    t.sub_x = (int8_t)x[4];
    t.sub_y = (int8_t)x[5];
    t.sub_dir = dir;
    t.surface = (int8_t)x[7];
    t.shot_timer = (int8_t)x[8];
    t.e_spawn_speed = (int8_t)x[9];
    t.e_spawn_timer = (int8_t)x[10];
    t.d_spawn_timer = (int8_t)x[11];
    t.move_speed = (int8_t)x[12];
    t.ramp_index = x[13];
    t.n_fb = (uint8_t)x[14];
    t.n_eb = (uint8_t)x[15];
    t.n_fish = (uint8_t)x[16];
    t.n_subs = (uint8_t)x[17];
    t.n_divers = (uint8_t)x[18];
    static const int mover_max[2] = {INIT_MOVE_INTERVAL, ENEMY_SHOT_INTERVAL};
    static const int diver_max[1] = {DIVER_MOVE_INTERVAL};
    int8_t f[5];
    int base = HEADER_DIM;
    for (int i = 0; i < t.n_fb; i++) {
        if (!get_entity(v, base + 3 * i, 0, NULL, f, err)) return NEVO_ERR_INVALID;
        t.fb[i] = (Bullet){f[0], f[1], f[2]};
    }
    base += 3 * FB_CAP;
    for (int i = 0; i < t.n_eb; i++) {
        if (!get_entity(v, base + 3 * i, 0, NULL, f, err)) return NEVO_ERR_INVALID;
        t.eb[i] = (Bullet){f[0], f[1], f[2]};
    }
    base += 3 * EB_CAP;
    for (int i = 0; i < t.n_fish; i++) {
        if (!get_entity(v, base + 4 * i, 1, mover_max, f, err)) return NEVO_ERR_INVALID;
        t.fish[i] = (Mover){f[0], f[1], f[2], f[3], 0};
    }
    base += 4 * ENEMY_CAP;
    for (int i = 0; i < t.n_subs; i++) {
        if (!get_entity(v, base + 5 * i, 2, mover_max, f, err)) return NEVO_ERR_INVALID;
        t.subs[i] = (Mover){f[0], f[1], f[2], f[3], f[4]};
    }
    base += 5 * ENEMY_CAP;
    for (int i = 0; i < t.n_divers; i++) {
        if (!get_entity(v, base + 4 * i, 1, diver_max, f, err)) return NEVO_ERR_INVALID;
        t.divers[i] = (Mover){f[0], f[1], f[2], f[3], 0};
    }
    t.common.rng = ((const Seaquest *)state)->common.rng; /* the random stream is not part of the state */
    *(Seaquest *)state = t;
    write_obs(state, obs);
    return NEVO_OK;
}

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts, int n,
                            NevoError *err) {
    return minatar_configure(spec, params, opts, n, err, minimal_set, 6);
}

static void render(const NevoEnv *env, const void *state, uint8_t *rgb) {
    float obs[MINATAR_N * MINATAR_N * N_CH];
    write_obs(state, obs);
    minatar_render_obs(obs, N_CH, rgb);
}

const NevoEnvClass nevo_env_minatar_seaquest =
    MINATAR_CLASS("minatar/seaquest",
                  "MinAtar Seaquest: shoot fish and subs, rescue divers, surface for oxygen",
                  Seaquest);
