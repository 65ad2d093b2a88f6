/* What the actor-learners share (actor_envs.h): the sync envs, the validation. */
#include "algo/actor_envs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nevo/rng.h"

void *nevo_actor_env(const NevoActorEnvs *s, int e) { return s->insts + (size_t)e * s->isz; }

void nevo_actor_envs_start(NevoActorEnvs *s, int e, float *obs) {
    uint64_t seed = nevo_rng_derive(s->seed, NEVO_RNG_ACTOR_ENV, s->ep[e]++, (uint32_t)e, 0);
    nevo_env_forget(s->env, nevo_actor_env(s, e));
    nevo_env_reset(s->env, nevo_actor_env(s, e), seed, obs);
    s->ret[e] = 0.0;
    s->len[e] = 0;
}

void nevo_actor_envs_init(NevoActorEnvs *s, const NevoEnv *env, int E, uint64_t seed, float *obs) {
    s->env = env;
    s->seed = seed;
    s->E = E;
    s->D = nevo_env_spec(env)->obs_dim;
    s->isz = nevo_env_instance_size(env);
    s->insts = nevo_alloc_aligned((size_t)E * s->isz);
    s->ret = nevo_alloc(sizeof(double) * (size_t)E);
    s->len = nevo_alloc(sizeof(int) * (size_t)E);
    s->ep = nevo_alloc(sizeof(uint32_t) * (size_t)E);
    s->steps = nevo_alloc(sizeof(uint64_t) * (size_t)E);
    for (int e = 0; e < E; e++) {
        nevo_env_instance_init(env, nevo_actor_env(s, e));
        nevo_actor_envs_start(s, e, obs + (size_t)e * s->D);
    }
}

void nevo_actor_envs_free(NevoActorEnvs *s) {
    for (int e = 0; s->insts && e < s->E; e++) nevo_env_instance_free(s->env, nevo_actor_env(s, e));
    free(s->insts);
    free(s->ret);
    free(s->len);
    free(s->ep);
    free(s->steps);
    s->insts = NULL;
}

/* Envs whose instances are plain data (no resources to free: classic control, MinAtar,
 * the maze) also save their bytes first, for what the state leaves out (MinAtar's
 * random stream); the state's fields are then set again from the checked values over
 * them. MuJoCo's state leaves out the simulator's warm start. */
static int plain_instances(const NevoEnv *env) { return nevo_env_class(env)->instance_free == NULL; }

void nevo_actor_envs_save(const NevoActorEnvs *s, const float *obs, NevoBuf *b) {
    const NevoEnvSpec *spec = nevo_env_spec(s->env);
    int raw = plain_instances(s->env);
    nevo_buf_u32(b, (uint32_t)raw);
    nevo_buf_u64(b, raw ? (uint64_t)s->isz : 0);
    double *state = nevo_alloc(sizeof(double) * (size_t)(spec->state_dim ? spec->state_dim : 1));
    for (int e = 0; e < s->E; e++) {
        const void *in = nevo_actor_env(s, e);
        if (raw) nevo_buf_put(b, in, s->isz);
        nevo_env_get_state(s->env, in, state);
        nevo_buf_u32(b, (uint32_t)nevo_env_steps(s->env, in));
        nevo_buf_f64s(b, state, (size_t)spec->state_dim);
        nevo_buf_f32s(b, obs + (size_t)e * s->D, (size_t)s->D);
        nevo_buf_f64(b, s->ret[e]);
        nevo_buf_u32(b, (uint32_t)s->len[e]);
        nevo_buf_u32(b, s->ep[e]);
        nevo_buf_u64(b, s->steps[e]);
    }
    free(state);
}

NevoStatus nevo_actor_envs_load(NevoActorEnvs *s, NevoReader *r, float *obs, const char *what, NevoError *err) {
    const NevoEnvSpec *spec = nevo_env_spec(s->env);
    int raw = (int)nevo_read_u32(r);
    uint64_t isz = nevo_read_u64(r);
    if (!nevo_reader_ok(r, false)) return nevo_error(err, NEVO_ERR_CORRUPT, "%s is truncated", what);
    if (raw != plain_instances(s->env) || (raw && isz != s->isz))
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: its envs are stored %s (%llu bytes each), %s's are %s (%zu)",
                          what, raw ? "as bytes" : "as states", (unsigned long long)isz, spec->name,
                          plain_instances(s->env) ? "bytes" : "states", s->isz);
    double *state = nevo_alloc(sizeof(double) * (size_t)(spec->state_dim ? spec->state_dim : 1));
    float *scratch = nevo_alloc(sizeof(float) * (size_t)s->D);
    NevoStatus st = NEVO_OK;
    for (int e = 0; e < s->E && st == NEVO_OK; e++) {
        void *in = nevo_actor_env(s, e);
        float *o = obs + (size_t)e * s->D;
        /* the bytes carry what the state leaves out (a random stream's position); every
         * field the state holds is then set again from checked values */
        if (raw) nevo_read(r, in, s->isz); /* plain data: nothing to release first */
        uint32_t steps = nevo_read_u32(r);
        nevo_read_f64s(r, state, (size_t)spec->state_dim);
        nevo_read_f32s(r, o, (size_t)s->D);
        s->ret[e] = nevo_read_f64(r);
        s->len[e] = (int)nevo_read_u32(r);
        s->ep[e] = nevo_read_u32(r);
        s->steps[e] = nevo_read_u64(r);
        if (!nevo_reader_ok(r, false)) {
            if (raw) nevo_env_instance_init(s->env, in); /* nothing half-read is kept */
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s is truncated", what);
            break;
        }
        if (steps > INT32_MAX || s->len[e] < 0 || !isfinite(s->ret[e]))
            st = nevo_error(err, NEVO_ERR_CORRUPT, "env %d's counters are out of range", e);
        for (int k = 0; st == NEVO_OK && k < s->D; k++)
            if (!isfinite(o[k])) st = nevo_error(err, NEVO_ERR_CORRUPT, "env %d's observation is not finite", e);
        if (st == NEVO_OK) st = nevo_env_set_state(s->env, in, state, (int)steps, scratch, err);
        if (st && raw) nevo_env_instance_init(s->env, in);
        if (st) nevo_error_prefix(err, "%s: ", what);
    }
    free(state);
    free(scratch);
    return st;
}

/* ---- validation ----------------------------------------------------------------------- */

void nevo_rl_best_init(NevoRLBest *b, const NevoConfig *cfg, size_t np) {
    memset(b, 0, sizeof *b);
    b->every = cfg->rl.validation_every;
    b->episodes = cfg->rl.validation_episodes;
    /* episodes apart from the final evaluation's, which nevo_eval_params names by the run's seed */
    b->seed = nevo_rng_derive(cfg->seed, NEVO_RNG_ENV_SEED, 0, NEVO_STREAM_VALIDATION, 0);
    b->np = np;
    b->score = b->last = -INFINITY;
    if (b->every > 0) b->theta = nevo_alloc_aligned(sizeof(float) * np);
}

void nevo_rl_best_free(NevoRLBest *b) {
    free(b->theta);
    b->theta = NULL;
}

NevoStatus nevo_rl_best_after(NevoRLBest *b, const NevoAlgo *a, const float *theta, NevoGenStats *stats,
                              NevoError *err) {
    if (b->every <= 0) return NEVO_OK;
    if ((a->generation + 1) % b->every == 0) {
        if (!a->validate)
            return nevo_error(err, NEVO_ERR_INVALID, "rl.validation_every: nothing evaluates this run's validations "
                              "(nevo_algo_set_validate)");
        double mean;
        long long frames;
        NevoStatus st = a->validate(a->validate_ctx, theta, b->episodes, b->seed, &mean, &frames, err);
        if (st) return st;
        stats->frames += frames;
        stats->episodes += b->episodes;
        b->last = mean;
        if (mean > b->score) {
            b->score = mean;
            memcpy(b->theta, theta, sizeof(float) * b->np);
        }
    }
    if (isfinite(b->last)) stats->elite_mean = b->last;
    return NEVO_OK;
}

const float *nevo_rl_best_params(const NevoRLBest *b, const float *theta) {
    return b->every > 0 && isfinite(b->score) ? b->theta : theta;
}

void nevo_rl_best_save(const NevoRLBest *b, NevoBuf *buf) {
    if (b->every <= 0) return;
    nevo_buf_f64(buf, b->score);
    nevo_buf_f64(buf, b->last);
    nevo_buf_f32s(buf, b->theta, b->np);
}

NevoStatus nevo_rl_best_load(NevoRLBest *b, NevoReader *r, NevoError *err) {
    if (b->every <= 0) return NEVO_OK;
    double score = nevo_read_f64(r), last = nevo_read_f64(r);
    nevo_read_f32s(r, b->theta, b->np);
    if (!nevo_reader_ok(r, false)) return nevo_error(err, NEVO_ERR_CORRUPT, "the validated policy is truncated");
    if (isnan(score) || score == INFINITY || isnan(last) || last == INFINITY || last > score)
        return nevo_error(err, NEVO_ERR_CORRUPT, "the validated policy's scores are out of range");
    for (size_t i = 0; isfinite(score) && i < b->np; i++)
        if (!isfinite(b->theta[i]))
            return nevo_error(err, NEVO_ERR_CORRUPT, "the validated policy's parameter %zu is not finite", i);
    b->score = score;
    b->last = last;
    return NEVO_OK;
}

/* ---- a generation's figures --------------------------------------------------------------- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void nevo_rl_gen_begin(NevoRLGen *g, const NevoSeed *seed) {
    g->n = 0;
    g->frames = 0;
    g->t0 = now_s();
    if (seed) nevo_seed_stats(seed, &g->before);
}

void nevo_rl_gen_episode(NevoRLGen *g, double ret) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->ret = realloc(g->ret, sizeof(double) * (size_t)g->cap);
        NEVO_ASSERT(g->ret != NULL);
    }
    g->ret[g->n++] = ret;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void nevo_rl_gen_stats(NevoRLGen *g, const NevoSeed *seed, long long updates, long long gen_updates, int E, double lr,
                       NevoGenStats *stats) {
    stats->has_rl = 1;
    stats->rl_lr = lr;
    stats->rl_updates = updates;
    if (seed) {
        NevoSeedStats ss;
        nevo_seed_stats(seed, &ss);
        double s = ss.wall_s - g->before.wall_s;
        g->frames = ss.frames - g->before.frames;
        stats->rl_frames_per_s = s > 0 ? g->frames / s : 0;
        /* the algorithm's own updates (R2D2's learner calls before rl.replay_start make none) */
        stats->rl_updates_per_s = s > 0 ? gen_updates / s : 0;
        stats->rl_batch = ss.mean_batch;
        stats->rl_queue = ss.mean_queue;
        stats->rl_lag = ss.mean_lag;
    } else {
        double s = now_s() - g->t0;
        stats->rl_frames_per_s = s > 0 ? g->frames / s : 0;
        stats->rl_updates_per_s = s > 0 ? gen_updates / s : 0;
        stats->rl_batch = E; /* one forward of every env per step */
        stats->rl_queue = 0;
        stats->rl_lag = 0;   /* the envs act with the parameters the learner trains */
    }
    stats->frames = g->frames;
    stats->episodes = g->n;
    if (g->n > 0) {
        qsort(g->ret, (size_t)g->n, sizeof(double), cmp_double);
        double sum = 0.0;
        for (int i = 0; i < g->n; i++) sum += g->ret[i];
        g->last_mean = sum / g->n;
        stats->best = g->ret[g->n - 1];
        stats->median = g->n % 2 ? g->ret[g->n / 2] : 0.5 * (g->ret[g->n / 2 - 1] + g->ret[g->n / 2]);
    } else { /* no episode ended in this generation: the last generation's mean stands */
        stats->best = stats->median = g->last_mean;
    }
    stats->mean = stats->elite_mean = g->last_mean;
}

void nevo_rl_gen_free(NevoRLGen *g) {
    free(g->ret);
    g->ret = NULL;
}
