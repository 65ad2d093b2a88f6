/* The mujoco bench group: what nevo's env layer costs on top of MuJoCo itself.
 *
 * For one MuJoCo env:
 *   - env: instances stepped in turn through the public API (nevo_env_step, and
 *     nevo_env_reset with the next seed when an episode ends), with pre-drawn random
 *     controls: step t of an episode takes action row (t + 17 seed) mod 64, so an
 *     episode is a function of its seed alone. Each finished episode's length and
 *     final root coordinate are recorded by seed.
 *   - bare: as many mjData on the env's own mjModel (its params block, shared as in
 *     training) replay those very episodes: the same seeds in the same order, the
 *     reset done as nevo_mj_reset does it (mj_resetData, the same noise draws,
 *     mj_forward), ctrl = action, frame_skip x mj_step, plus mj_rnePostConstraint only
 *     for robots whose observation or reward reads the contact forces, and the episode
 *     cut at the length the env recorded; no observation, reward or health. The final
 *     root coordinate of each replayed episode must equal the env's bit for bit (the
 *     count of those that do not is reported: 0 means both loops simulated the same
 *     states). Episodes the env left unfinished are skipped (their end is unknown, and
 *     running them on to the time limit would replay a fallen robot's costlier contact
 *     states instead); past the last seed the replay starts over from seed 1.
 *     The two loops are measured twice in turn, each keeping its best.
 *   - env2: the env loop on 2 threads, each stepping its own instances (the
 *     evaluator's layout: per-worker slots, one shared model), for the scaling.
 * So env / bare is the env layer's per-step overhead on identical physics: observation,
 * reward, health, the time limit, and the mj_rnePostConstraint every env step makes.
 * Resets fall inside both loops equally often; their cost is also measured alone. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "envs/mujoco_common.h"
#include "nevo/rng.h"

#define ACTION_ROWS 64          /* pre-drawn actions, row per (episode step, seed) */
#define MAX_RECORDED (1 << 17)  /* finished env episodes remembered for the replay */

/* Robots whose observation or reward reads cfrc_ext (Gymnasium's contact forces and
 * contact cost): only for these is mj_rnePostConstraint part of the bare work. */
static const char *const contact_force_envs[] = {"mujoco/ant", "mujoco/humanoid",
                                                 "mujoco/humanoid_trap"};

int nevo_bench_is_mujoco(const char *name) { return strncmp(name, "mujoco/", 7) == 0; }

static bool needs_contact_forces(const char *name) {
    for (size_t i = 0; i < sizeof contact_force_envs / sizeof contact_force_envs[0]; i++)
        if (strcmp(name, contact_force_envs[i]) == 0) return true;
    return false;
}

/* What the env loop recorded of each finished episode, indexed by seed - 1. */
typedef struct Record {
    int *length;      /* (MAX_RECORDED) steps; 0 = not finished (or not recorded) */
    double *final_x;  /* (MAX_RECORDED) qpos[0] after the last step */
    uint64_t started; /* seeds 1 .. started were handed out */
} Record;

/* One thread's instances, either env instances or bare simulations. */
typedef struct Loop {
    const NevoEnv *env;
    const MjParams *p;
    int n, adim, odim, max_steps;
    const float *actions;  /* (ACTION_ROWS, adim), shared read-only */
    uint64_t next_seed;
    long long steps, episodes;
    long long episode_steps; /* steps of the finished episodes */
    Record *rec;           /* env: where to record (NULL: do not); bare: what to replay */
    uint64_t *seed;        /* (n) seed of each instance's episode */
    int *t;                /* (n) steps into it */
    /* env */
    size_t isz;
    uint8_t *insts;        /* (n, isz) */
    float *obs;            /* (n, odim) */
    /* bare */
    mjData **d;            /* (n) */
    int *len;              /* (n) the replayed episode's recorded length, fixed as it
                              starts; 0 where the env had not finished it then (cut at
                              the time limit, not compared) */
    bool rne;
    long long mismatches;  /* replayed episodes whose final qpos[0] differs */
} Loop;

static void loop_init(Loop *l, const NevoEnv *env, const float *actions, int n, bool bare,
                      uint64_t first_seed, Record *rec) {
    memset(l, 0, sizeof *l);
    const NevoEnvSpec *s = nevo_env_spec(env);
    l->env = env;
    l->p = nevo_env_params(env);
    l->n = n;
    l->adim = s->action_dim;
    l->odim = s->obs_dim;
    l->max_steps = s->max_steps > 0 ? s->max_steps : 1000;
    l->actions = actions;
    l->next_seed = first_seed;
    l->rec = rec;
    l->seed = nevo_alloc(sizeof(uint64_t) * (size_t)n);
    l->t = nevo_alloc(sizeof(int) * (size_t)n);
    if (bare) {
        l->d = nevo_alloc(sizeof(mjData *) * (size_t)n);
        l->len = nevo_alloc(sizeof(int) * (size_t)n);
    } else {
        l->isz = nevo_env_instance_size(env);
        l->insts = nevo_alloc_aligned(l->isz * (size_t)n);
        l->obs = nevo_alloc_aligned(sizeof(float) * (size_t)n * (size_t)l->odim);
    }
}

static void loop_free(Loop *l) {
    if (l->d) {
        for (int i = 0; i < l->n; i++)
            if (l->d[i]) mj_deleteData(l->d[i]);
        free(l->d);
    }
    if (l->insts) {
        for (int i = 0; i < l->n; i++) nevo_env_instance_free(l->env, l->insts + (size_t)i * l->isz);
        free(l->insts);
        free(l->obs);
    }
    free(l->seed);
    free(l->t);
    free(l->len);
    memset(l, 0, sizeof *l);
}

/* The bare replay's next seed: the next one whose env episode finished (episodes the
 * env loop left unfinished have no known end), wrapping to seed 1 after the last seed
 * the env loop handed out. When no episode finished at all, the first episodes again,
 * cut at the time limit. */
static uint64_t replay_seed(Loop *l) {
    const Record *rec = l->rec;
    for (uint64_t tries = 0; tries < rec->started; tries++) {
        if (l->next_seed > rec->started) l->next_seed = 1;
        uint64_t s = l->next_seed++;
        if (s - 1 < MAX_RECORDED && rec->length[s - 1] > 0) return s;
    }
    if (l->next_seed > rec->started) l->next_seed = 1;
    return l->next_seed++;
}

/* Starts instance i's next episode. */
static void start_episode(Loop *l, int i) {
    uint64_t seed = l->d ? replay_seed(l) : l->next_seed++;
    l->seed[i] = seed;
    l->t[i] = 0;
    if (l->d) {
        nevo_mj_reset_sim(l->p, l->d[i], seed);
        /* the length as recorded now: the env loop may finish this seed later, and an
         * episode must not change its end while it runs */
        l->len[i] = seed - 1 < MAX_RECORDED ? l->rec->length[seed - 1] : 0;
    } else {
        nevo_env_reset(l->env, l->insts + (size_t)i * l->isz, seed, l->obs + (size_t)i * l->odim);
        if (l->rec && seed > l->rec->started) l->rec->started = seed;
    }
}

/* First episodes, in the thread that will step the instances (as the evaluator does). */
static void loop_start(Loop *l) {
    for (int i = 0; i < l->n; i++) {
        if (l->d) l->d[i] = mj_makeData(l->p->model);
        start_episode(l, i);
    }
}

static const float *action_for(const Loop *l, int i) {
    size_t row = ((uint64_t)l->t[i] + 17 * l->seed[i]) % ACTION_ROWS;
    return l->actions + row * (size_t)l->adim;
}

static double env_sweeps(void *vctx, long iters) {
    Loop *l = vctx;
    for (long it = 0; it < iters; it++) {
        for (int i = 0; i < l->n; i++) {
            uint8_t *inst = l->insts + (size_t)i * l->isz;
            NevoStepResult r;
            nevo_env_step(l->env, inst, action_for(l, i), l->obs + (size_t)i * l->odim, &r);
            l->t[i]++;
            if (r.terminated || r.truncated) {
                uint64_t k = l->seed[i] - 1;
                if (l->rec && k < MAX_RECORDED) {
                    l->rec->length[k] = l->t[i];
                    l->rec->final_x[k] = nevo_mj_data(l->env, inst)->qpos[0];
                }
                l->episodes++;
                l->episode_steps += l->t[i];
                start_episode(l, i);
            }
        }
    }
    l->steps += (long long)l->n * iters;
    return (double)l->n * (double)iters;
}

static double bare_sweeps(void *vctx, long iters) {
    Loop *l = vctx;
    const mjModel *m = l->p->model;
    const Record *rec = l->rec;
    int fs = l->p->frame_skip, nu = m->nu;
    for (long it = 0; it < iters; it++) {
        for (int i = 0; i < l->n; i++) {
            mjData *d = l->d[i];
            const float *a = action_for(l, i);
            for (int j = 0; j < nu; j++) d->ctrl[j] = a[j];
            for (int k = 0; k < fs; k++) mj_step(m, d);
            if (l->rne) mj_rnePostConstraint(m, d);
            uint64_t k = l->seed[i] - 1;
            int len = l->len[i] > 0 ? l->len[i] : l->max_steps;
            if (++l->t[i] >= len) {
                if (l->len[i] > 0 && d->qpos[0] != rec->final_x[k]) l->mismatches++;
                l->episodes++;
                start_episode(l, i);
            }
        }
    }
    l->steps += (long long)l->n * iters;
    return (double)l->n * (double)iters;
}

/* Resets only, each instance in turn (seeds past the replayed ones). */
static double env_resets(void *vctx, long iters) {
    Loop *l = vctx;
    for (long it = 0; it < iters; it++) {
        int i = (int)(it % l->n);
        nevo_env_reset(l->env, l->insts + (size_t)i * l->isz, l->next_seed++, l->obs + (size_t)i * l->odim);
    }
    return (double)iters;
}

static double bare_resets(void *vctx, long iters) {
    Loop *l = vctx;
    for (long it = 0; it < iters; it++) nevo_mj_reset_sim(l->p, l->d[it % l->n], (uint64_t)it + 1);
    return (double)iters;
}

/* mj_rnePostConstraint alone, on a simulation mid-episode. */
static double rne_calls(void *vctx, long iters) {
    Loop *l = vctx;
    for (long it = 0; it < iters; it++) mj_rnePostConstraint(l->p->model, l->d[0]);
    return (double)iters;
}

/* Two env loops on a pool of two threads, one loop per thread. */
typedef struct Pair {
    NevoPool *pool;
    Loop loops[2];
    long iters;
} Pair;

static void pair_start(void *vctx, int item, int worker) {
    Pair *c = vctx;
    loop_start(&c->loops[item]);
}

static void pair_item(void *vctx, int item, int worker) {
    Pair *c = vctx;
    env_sweeps(&c->loops[item], c->iters);
}

static double pair_sweeps(void *vctx, long iters) {
    Pair *c = vctx;
    c->iters = iters;
    nevo_pool_run(c->pool, 2, pair_item, c);
    return 2.0 * (double)c->loops[0].n * (double)iters;
}

NevoStatus nevo_bench_mujoco(const NevoBenchOptions *o, const char *name, NevoBenchMujocoResult *out,
                             NevoError *err) {
    memset(out, 0, sizeof *out);
    if (!nevo_bench_is_mujoco(name))
        return nevo_error(err, NEVO_ERR_INVALID, "bench mujoco: '%s' is not a MuJoCo env (mujoco/...)", name);
    NevoEnv *env = NULL;
    NevoStatus st = nevo_env_new(name, NULL, 0, &env, err);
    if (st != NEVO_OK) return st;
    const NevoEnvSpec *s = nevo_env_spec(env);
    const MjParams *p = nevo_env_params(env);
    int n = o->quick ? 4 : 16; /* the evaluator's default slots per worker */
    out->frame_skip = p->frame_skip;
    out->instances = n;
    out->rne_post = needs_contact_forces(name);

    /* uniform random controls in the control range (the action box) */
    float *actions = nevo_alloc(sizeof(float) * ACTION_ROWS * (size_t)s->action_dim);
    NevoRng rng;
    nevo_rng_init(&rng, 1, NEVO_RNG_USER, 0, 0, 0);
    for (int r = 0; r < ACTION_ROWS; r++)
        for (int j = 0; j < s->action_dim; j++) {
            double u = nevo_rng_uniform(&rng);
            actions[(size_t)r * s->action_dim + j] = (float)(s->action_low[j] + u * (s->action_high[j] - s->action_low[j]));
        }
    Record rec = {.length = nevo_alloc(sizeof(int) * MAX_RECORDED),
                  .final_x = nevo_alloc(sizeof(double) * MAX_RECORDED)};

    /* the env on one thread, recording its episodes, then the bare replay; twice in
     * turn, each keeping its best, so that a slow spell of the machine (another
     * program on the core's sibling) does not fall on one loop only */
    Loop env1, bare;
    loop_init(&env1, env, actions, n, false, 1, &rec);
    loop_start(&env1);
    loop_init(&bare, env, actions, n, true, 1, &rec);
    bare.rne = out->rne_post;
    NevoBenchTiming t;
    for (int round = 0; round < 2; round++) {
        t = nevo_bench_measure(o, env_sweeps, &env1, 1);
        if (t.best > out->env_steps_per_s) {
            out->env_steps_per_s = t.best;
            out->env_median = t.median;
            out->env_cpu_share = t.cpu_share;
        }
        if (round == 0) loop_start(&bare); /* after the env has handed out its first seeds */
        t = nevo_bench_measure(o, bare_sweeps, &bare, 1);
        if (t.best > out->bare_steps_per_s) {
            out->bare_steps_per_s = t.best;
            out->bare_median = t.median;
            out->bare_cpu_share = t.cpu_share;
        }
    }
    /* an episode each at least, untimed: the length and the replay check need one
     * however slow the machine (a sanitizer build sharing its cores) */
    while (env1.episodes == 0) env_sweeps(&env1, 1);
    while (bare.episodes == 0) bare_sweeps(&bare, 1);
    out->env_episodes = env1.episodes;
    out->episode_length = env1.episodes > 0 ? (double)env1.episode_steps / (double)env1.episodes : NAN;
    out->bare_episodes = bare.episodes;
    out->replay_mismatches = bare.mismatches;
    env1.rec = NULL; /* the resets below start no recorded episode */
    t = nevo_bench_measure(o, env_resets, &env1, 1);
    out->env_reset_us = 1e6 / t.best;
    t = nevo_bench_measure(o, bare_resets, &bare, 1);
    out->bare_reset_us = 1e6 / t.best;
    /* a simulation mid-episode (the resets left them at rest: take a few steps) */
    for (int k = 0; k < 8; k++) mj_step(p->model, bare.d[0]);
    t = nevo_bench_measure(o, rne_calls, &bare, 1);
    out->rne_us = 1e6 / t.best;
    loop_free(&bare);
    loop_free(&env1);
    free(rec.length);
    free(rec.final_x);

    if (o->threads >= 2) {
        Pair c = {.pool = nevo_pool_new(2)};
        for (int k = 0; k < 2; k++) loop_init(&c.loops[k], env, actions, n, false, 1 + ((uint64_t)k << 40), NULL);
        nevo_pool_run(c.pool, 2, pair_start, &c);
        t = nevo_bench_measure(o, pair_sweeps, &c, 2);
        out->threads2 = 2;
        out->env2_steps_per_s = t.best;
        out->env2_median = t.median;
        out->env2_cpu_share = t.cpu_share;
        for (int k = 0; k < 2; k++) loop_free(&c.loops[k]);
        nevo_pool_free(c.pool);
    }
    free(actions);
    nevo_env_free(env);
    return NEVO_OK;
}
