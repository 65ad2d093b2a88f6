/* Flat handles for bindings: vectorised envs, population evaluation, ask/tell
 * strategies (nevo/vec.h). */
#include "nevo/vec.h"

#include "engine/run_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/algo.h"
#include "nevo/backend.h"
#include "nevo/eval.h"
#include "nevo/noise.h"
#include "nevo/policy.h"
#include "nevo/policy_file.h"
#include "nevo/rng.h"
#include "nevo/tasks.h"
#include "nevo/threads.h"
#include "nevo/train.h"

/* --- vectorised environments ------------------------------------------------------ */

/* instances stepped per pool item: enough work to amortise a hand-out */
#define VEC_CHUNK 32

struct NevoVecEnv {
    NevoEnv *env;
    const NevoEnvSpec *spec;
    int n, autoreset;
    size_t isize;
    uint8_t *insts;    /* (n, isize) */
    int *episode;      /* (n) episodes started since the instance's reset (0: never reset) */
    int never_reset;   /* instances not reset yet: no step until none is left */
    bool *ended;       /* (n) the last step ended the episode (NEXT_STEP: reset next) */
    float *held;       /* DISABLED: (n, obs_dim) each ended instance's last observation, which its
                        * later steps write again (every step writes every output) */
    uint64_t *seed;    /* (n) the seed of each instance's last reset */
    NevoPool *pool;    /* NULL: the calling thread */
    /* the current call's arrays */
    const float *actions;
    float *obs, *rewards, *final_obs;
    bool *terminated, *truncated, *has_final;
};

NevoStatus nevo_vec_env_new(const char *name, const NevoEnvOption *opts, int n_opts, int num_envs,
                            int max_episode_steps, int autoreset, int threads, NevoVecEnv **out,
                            NevoError *err) {
    *out = NULL;
    if (num_envs < 1 || num_envs > (1 << 24))
        return nevo_error(err, NEVO_ERR_INVALID, "num_envs must be from 1 to 16777216, not %d", num_envs);
    if (max_episode_steps < 0)
        return nevo_error(err, NEVO_ERR_INVALID, "max_episode_steps must be >= 0 (0: the env's own limit), not %d",
                          max_episode_steps);
    if (autoreset < NEVO_AUTORESET_NEXT_STEP || autoreset > NEVO_AUTORESET_DISABLED)
        return nevo_error(err, NEVO_ERR_INVALID, "autoreset mode must be 0 (next step), 1 (same step) or 2 "
                          "(disabled), not %d", autoreset);
    if (threads < 1 || threads > 1024)
        return nevo_error(err, NEVO_ERR_INVALID, "threads must be from 1 to 1024, not %d", threads);
    NevoEnv *env = NULL;
    NevoStatus st = nevo_env_new(name, opts, n_opts, &env, err);
    if (st) return st;
    nevo_env_set_max_steps(env, max_episode_steps);
    NevoVecEnv *v = nevo_alloc(sizeof *v);
    v->env = env;
    v->spec = nevo_env_spec(env);
    v->n = num_envs;
    v->autoreset = autoreset;
    v->isize = nevo_env_instance_size(env);
    v->insts = nevo_alloc_aligned(v->isize * (size_t)num_envs);
    v->episode = nevo_alloc(sizeof(int) * (size_t)num_envs);
    v->never_reset = num_envs;
    v->ended = nevo_alloc(sizeof(bool) * (size_t)num_envs);
    if (autoreset == NEVO_AUTORESET_DISABLED)
        v->held = nevo_alloc(sizeof(float) * (size_t)num_envs * (size_t)v->spec->obs_dim);
    v->seed = nevo_alloc(sizeof(uint64_t) * (size_t)num_envs);
    v->pool = threads > 1 && num_envs > VEC_CHUNK ? nevo_pool_new(threads) : NULL;
    *out = v;
    return NEVO_OK;
}

void nevo_vec_env_free(NevoVecEnv *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) nevo_env_instance_free(v->env, v->insts + (size_t)i * v->isize);
    nevo_pool_free(v->pool);
    free(v->insts);
    free(v->episode);
    free(v->ended);
    free(v->held);
    free(v->seed);
    nevo_env_free(v->env);
    free(v);
}

const NevoEnvSpec *nevo_vec_env_spec(const NevoVecEnv *v) { return v->spec; }
int nevo_vec_env_num(const NevoVecEnv *v) { return v->n; }
int nevo_vec_env_episode(const NevoVecEnv *v, int env_index) {
    return env_index >= 0 && env_index < v->n ? v->episode[env_index] : 0;
}

uint64_t nevo_vec_env_episode_seed(uint64_t seed, int env_index, int episode) {
    return nevo_rng_derive(seed, NEVO_RNG_ENV_SEED, (uint32_t)episode, (uint32_t)env_index, 0);
}

typedef struct {
    NevoVecEnv *v;
    int reset;
    const bool *mask; /* reset: the instances to reset (NULL: all) */
    uint64_t seed;
} VecJob;

static void vec_reset_range(NevoVecEnv *v, const VecJob *job, int lo, int hi) {
    size_t od = (size_t)v->spec->obs_dim;
    for (int i = lo; i < hi; i++) {
        if (job->mask && !job->mask[i]) continue;
        void *inst = v->insts + (size_t)i * v->isize;
        nevo_env_forget(v->env, inst);
        v->seed[i] = job->seed;
        nevo_env_reset(v->env, inst, nevo_vec_env_episode_seed(job->seed, i, 0), v->obs + (size_t)i * od);
        v->episode[i] = 1;
        v->ended[i] = false;
    }
}

/* The step's arrays and fields are read into locals first: a store through a bool
 * pointer may alias anything, and would make the compiler read them from v again
 * after each instance (a vector of small envs would pay that on every step). */
static void vec_step_range(NevoVecEnv *v, int lo, int hi) {
    const NevoEnv *env = v->env;
    uint8_t *insts = v->insts;
    size_t isize = v->isize, od = (size_t)v->spec->obs_dim, ad = (size_t)v->spec->action_dim;
    const float *actions = v->actions;
    float *obs_all = v->obs, *rewards = v->rewards, *final_obs = v->final_obs;
    bool *terminated = v->terminated, *truncated = v->truncated, *has_final = v->has_final, *ended = v->ended;
    float *held = v->held;
    int *episode = v->episode, mode = v->autoreset;
    const uint64_t *seed = v->seed;
    for (int i = lo; i < hi; i++) {
        void *inst = insts + (size_t)i * isize;
        float *obs = obs_all + (size_t)i * od;
        if (mode == NEVO_AUTORESET_NEXT_STEP && ended[i]) {
            nevo_env_reset(env, inst, nevo_vec_env_episode_seed(seed[i], i, episode[i]++), obs);
            ended[i] = false;
            rewards[i] = 0.0f;
            terminated[i] = truncated[i] = false;
            continue;
        }
        NevoStepResult r;
        nevo_env_step(env, inst, actions + (size_t)i * ad, obs, &r);
        rewards[i] = r.reward;
        terminated[i] = r.terminated;
        truncated[i] = r.truncated;
        bool end = r.terminated || r.truncated;
        if (mode == NEVO_AUTORESET_SAME_STEP) {
            if (has_final) has_final[i] = end;
            if (final_obs) {
                if (end)
                    memcpy(final_obs + (size_t)i * od, obs, sizeof(float) * od);
                else
                    memset(final_obs + (size_t)i * od, 0, sizeof(float) * od);
            }
            if (end) nevo_env_reset(env, inst, nevo_vec_env_episode_seed(seed[i], i, episode[i]++), obs);
        } else {
            if (held && (end || ended[i])) { /* DISABLED: an ended instance repeats its last obs */
                if (ended[i])
                    memcpy(obs, held + (size_t)i * od, sizeof(float) * od);
                else
                    memcpy(held + (size_t)i * od, obs, sizeof(float) * od);
            }
            ended[i] = end;
        }
    }
}

static void vec_item(void *ctx, int item, int worker) {
    (void)worker;
    VecJob *job = ctx;
    int lo = item * VEC_CHUNK, hi = lo + VEC_CHUNK < job->v->n ? lo + VEC_CHUNK : job->v->n;
    if (job->reset)
        vec_reset_range(job->v, job, lo, hi);
    else
        vec_step_range(job->v, lo, hi);
}

static void vec_run(NevoVecEnv *v, const VecJob *job) {
    if (v->pool)
        nevo_pool_run(v->pool, (v->n + VEC_CHUNK - 1) / VEC_CHUNK, vec_item, (void *)job);
    else if (job->reset)
        vec_reset_range(v, job, 0, v->n);
    else
        vec_step_range(v, 0, v->n);
}

void nevo_vec_env_reset_masked(NevoVecEnv *v, uint64_t seed, const bool *mask, float *obs) {
    for (int i = 0; i < v->n; i++) v->never_reset -= (!mask || mask[i]) && v->episode[i] == 0;
    v->obs = obs;
    VecJob job = {v, 1, mask, seed};
    vec_run(v, &job);
}

void nevo_vec_env_reset(NevoVecEnv *v, uint64_t seed, float *obs) { nevo_vec_env_reset_masked(v, seed, NULL, obs); }

NevoStatus nevo_vec_env_step(NevoVecEnv *v, const float *actions, float *obs, float *rewards, bool *terminated,
                             bool *truncated, float *final_obs, bool *has_final, NevoError *err) {
    const NevoEnvSpec *s = v->spec;
    size_t ad = (size_t)s->action_dim;
    if (v->never_reset) {
        int i = 0;
        while (v->episode[i]) i++;
        return nevo_error(err, NEVO_ERR_INVALID, "%s: step before the first reset of env %d", s->name, i);
    }
    /* every action is checked before anything steps: a refused step changes nothing.
     * NEXT_STEP ignores the actions of instances that ended (they reset): their flag is
     * read only where an action fails the test, so the common pass is one compare loop. */
    bool skip_ended = v->autoreset == NEVO_AUTORESET_NEXT_STEP;
    const bool *ended = v->ended;
    size_t n = (size_t)v->n;
    if (s->action_kind == NEVO_SPACE_DISCRETE) {
        float n_actions = (float)s->n_actions;
        for (size_t i = 0; i < n; i++) {
            float x = actions[i * ad]; /* in range before the cast (a whole number: it converts back the same) */
            if (!(x >= 0.0f && x < n_actions && x == (float)(int)x) && !(skip_ended && ended[i]))
                return nevo_error(err, NEVO_ERR_INVALID, "%s: action %g of env %zu is not one of its %d actions "
                                  "(0 to %d)", s->name, (double)x, i, s->n_actions, s->n_actions - 1);
        }
    } else {
        for (size_t k = 0; k < n * ad; k++)
            if (!isfinite(actions[k]) && !(skip_ended && ended[k / ad]))
                return nevo_error(err, NEVO_ERR_INVALID, "%s: action value %zu of env %zu is not finite (%g)", s->name,
                                  k % ad, k / ad, (double)actions[k]);
    }
    v->actions = actions;
    v->obs = obs;
    v->rewards = rewards;
    v->terminated = terminated;
    v->truncated = truncated;
    v->final_obs = final_obs;
    v->has_final = has_final;
    VecJob job = {v, 0, NULL, 0};
    vec_run(v, &job);
    return NEVO_OK;
}

/* --- population evaluation -------------------------------------------------------- */

static void copy_episodes(const NevoEpisode *eps, int n, int bd, double *ret, int *len, bool *terminated, float *bc) {
    for (int t = 0; t < n; t++) {
        ret[t] = eps[t].ret;
        len[t] = eps[t].length;
        terminated[t] = eps[t].terminated != 0;
        if (bc && bd) memcpy(bc + (size_t)t * (size_t)bd, eps[t].bc, sizeof(float) * (size_t)bd);
    }
}

struct NevoPopEval {
    NevoConfig cfg;
    NevoLoadedPolicy lp; /* env, policy and (loaded) theta */
    int loaded;
    int cap;             /* the episode cap of the config (0: none) */
    int own;             /* the env's own limit (0: none) */
    NevoPool *pool;
    NevoBackend *backend; /* where the networks are computed; NULL: the CPU */
    char backend_name[32];
    NevoEvaluator *ev;   /* a population: the default slots */
    NevoEvaluator *ev1;  /* one network: 16 slots, as nevo_eval_params (nevo eval) */
    char *json;
    float *scratch;
    size_t scratch_rows;
    uint64_t seed;       /* the evaluation seed of runs without episode seeds */
};

static int pool_threads(const NevoConfig *cfg, int threads) {
    return threads > 0 ? threads : cfg->threads > 0 ? cfg->threads : nevo_cpu_count();
}

static NevoStatus config_from_json(const char *json, NevoConfig *cfg, NevoError *err) {
    nevo_config_defaults(cfg);
    if (!json) return nevo_error(err, NEVO_ERR_INVALID, "no config given");
    NevoStatus st = nevo_config_apply_json(cfg, json, "config", err);
    if (st == NEVO_OK) st = nevo_config_check(cfg, err);
    return st;
}

static NevoStatus pop_eval_finish(NevoPopEval *pe, int threads, NevoPopEval **out, NevoError *err) {
    if (!pe->lp.env) {
        nevo_pop_eval_free(pe);
        return nevo_error(err, NEVO_ERR_INVALID, "a policy on a dataset has no env to evaluate in");
    }
    if (threads < 0 || threads > 1024) {
        nevo_pop_eval_free(pe);
        return nevo_error(err, NEVO_ERR_INVALID, "threads must be from 0 to 1024, not %d", threads);
    }
    pe->pool = nevo_pool_new(pool_threads(&pe->cfg, threads));
    pe->own = nevo_env_spec(pe->lp.env)->max_steps;
    nevo_pop_eval_set_max_steps(pe, 0);
    pe->json = nevo_config_to_json(&pe->cfg);
    /* a config's backend; a policy file's (where it was trained) is not this machine's */
    NevoStatus st = nevo_pop_eval_set_backend(pe, pe->loaded ? "cpu" : pe->cfg.backend, err);
    if (st) {
        nevo_pop_eval_free(pe);
        return st;
    }
    *out = pe;
    return NEVO_OK;
}

NevoStatus nevo_pop_eval_set_backend(NevoPopEval *pe, const char *name, NevoError *err) {
    NevoBackend *b = NULL;
    if (strcmp(name, "cpu") != 0) {
        NevoStatus st = nevo_backend_new(name, &b, err);
        if (st) return st;
    }
    nevo_evaluator_free(pe->ev);
    nevo_evaluator_free(pe->ev1);
    nevo_backend_free(pe->backend);
    pe->backend = b;
    pe->ev = nevo_evaluator_new(pe->lp.env, pe->lp.policy, pe->pool, 0);
    pe->ev1 = nevo_evaluator_new(pe->lp.env, pe->lp.policy, pe->pool, 16);
    if (b) {
        nevo_evaluator_set_backend(pe->ev, b);
        nevo_evaluator_set_backend(pe->ev1, b);
    }
    snprintf(pe->backend_name, sizeof pe->backend_name, "%s", name);
    return NEVO_OK;
}

const char *nevo_pop_eval_backend(const NevoPopEval *pe) { return pe->backend_name; }

NevoStatus nevo_pop_eval_new(const char *config_json, int threads, NevoPopEval **out, NevoError *err) {
    *out = NULL;
    NevoPopEval *pe = nevo_alloc(sizeof *pe);
    NevoStatus st = config_from_json(config_json, &pe->cfg, err);
    if (st == NEVO_OK && pe->cfg.dataset[0])
        st = nevo_error(err, NEVO_ERR_INVALID, "config names a dataset: evaluation here runs env episodes");
    if (st == NEVO_OK) {
        pe->lp.cfg = pe->cfg;
        st = nevo_loaded_policy_network(&pe->lp, nevo_algo_obs_norm(&pe->cfg), err);
    }
    if (st) {
        nevo_pop_eval_free(pe);
        return st;
    }
    pe->cap = pe->cfg.max_episode_steps;
    return pop_eval_finish(pe, threads, out, err);
}

NevoStatus nevo_pop_eval_load(const char *path, int threads, NevoPopEval **out, NevoError *err) {
    *out = NULL;
    NevoPopEval *pe = nevo_alloc(sizeof *pe);
    NevoStatus st = nevo_policy_file_load(path, &pe->lp, err);
    if (st) {
        free(pe);
        return st;
    }
    pe->loaded = 1;
    pe->cfg = pe->lp.cfg;
    return pop_eval_finish(pe, threads, out, err);
}

void nevo_pop_eval_free(NevoPopEval *pe) {
    if (!pe) return;
    nevo_evaluator_free(pe->ev);
    nevo_evaluator_free(pe->ev1);
    nevo_backend_free(pe->backend);
    nevo_pool_free(pe->pool);
    nevo_loaded_policy_free(&pe->lp);
    free(pe->json);
    free(pe->scratch);
    free(pe);
}

const NevoEnvSpec *nevo_pop_eval_spec(const NevoPopEval *pe) { return nevo_env_spec(pe->lp.env); }
size_t nevo_pop_eval_nparams(const NevoPopEval *pe) { return pe->lp.policy->nparams; }
const char *nevo_pop_eval_config(const NevoPopEval *pe) { return pe->json; }
const float *nevo_pop_eval_theta(const NevoPopEval *pe) { return pe->loaded ? pe->lp.theta : NULL; }
int nevo_pop_eval_obs_norm(const NevoPopEval *pe) { return pe->lp.policy->obs_norm; }
float *nevo_pop_eval_obs_mean(NevoPopEval *pe) { return pe->lp.policy->obs_mean; }
float *nevo_pop_eval_obs_std(NevoPopEval *pe) { return pe->lp.policy->obs_std; }

void nevo_pop_eval_set_max_steps(NevoPopEval *pe, int max_steps) {
    /* an env without a limit gets nevo eval's, so that episodes end */
    int cap = max_steps > 0 ? max_steps : pe->cap > 0 ? pe->cap : pe->own > 0 ? pe->own : 100000000;
    nevo_env_set_max_steps(pe->lp.env, cap);
}

NevoStatus nevo_pop_eval_run(NevoPopEval *pe, const float *params, size_t stride, int n_rows, const int *net,
                             const uint64_t *seeds, int n, double *ret, int *len, bool *terminated, float *bc,
                             NevoError *err) {
    size_t np = pe->lp.policy->nparams;
    if (n < 0 || n_rows < 0) return nevo_error(err, NEVO_ERR_INVALID, "negative numbers of episodes or rows");
    if (n > 0 && n_rows == 0) return nevo_error(err, NEVO_ERR_INVALID, "%d episodes, no parameter rows", n);
    if (n_rows > 0 && stride < np)
        return nevo_error(err, NEVO_ERR_INVALID, "parameter rows are %zu floats apart, fewer than the network's %zu",
                          stride, np);
    for (int t = 0; net && t < n; t++)
        if (net[t] < 0 || net[t] >= n_rows)
            return nevo_error(err, NEVO_ERR_INVALID, "episode %d plays row %d of %d", t, net[t], n_rows);
    if ((!net || !seeds) && n_rows > 0 && n % n_rows != 0)
        return nevo_error(err, NEVO_ERR_INVALID, "%d episodes are not the same number for each of %d rows", n,
                          n_rows);
    NevoTask *tasks = nevo_alloc(sizeof(NevoTask) * (size_t)(n ? n : 1));
    NevoEpisode *eps = nevo_alloc(sizeof(NevoEpisode) * (size_t)(n ? n : 1));
    int per_row = n_rows > 0 ? n / n_rows : 0;
    for (int t = 0; t < n; t++)
        tasks[t] = (NevoTask){.net = net ? net[t] : t / per_row,
                              .seed = seeds ? seeds[t] : nevo_eval_episode_seed(pe->seed, t % per_row)};
    /* A row with 16 episodes or more runs alone, its episodes 16 at a time against one
     * read of its weights, as nevo eval runs one network; fewer a row, the rows share
     * the slots. Slots and grouping never change results. */
    NevoStatus st = NEVO_OK;
    if (n && !net && !seeds && per_row >= 16) {
        for (int r = 0; r < n_rows && st == NEVO_OK; r++) {
            NevoTask *rt = tasks + (size_t)r * (size_t)per_row;
            for (int e = 0; e < per_row; e++) rt[e].net = 0;
            st = nevo_evaluate(pe->ev1, params + (size_t)r * stride, stride, rt, per_row,
                               eps + (size_t)r * (size_t)per_row, NULL, err);
        }
    } else if (n) {
        st = nevo_evaluate(n_rows == 1 ? pe->ev1 : pe->ev, params, stride, tasks, n, eps, NULL, err);
    }
    int bd = nevo_env_spec(pe->lp.env)->bc_dim;
    if (st == NEVO_OK) copy_episodes(eps, n, bd, ret, len, terminated, bc);
    free(tasks);
    free(eps);
    return st;
}

void nevo_pop_eval_set_seed(NevoPopEval *pe, uint64_t seed) { pe->seed = seed; }

size_t nevo_pop_eval_state_floats(const NevoPopEval *pe) { return nevo_policy_state_floats(pe->lp.policy); }

void nevo_pop_eval_act(NevoPopEval *pe, const float *theta, const float *obs, int n, float *state, float *actions) {
    const NevoPolicy *p = pe->lp.policy;
    if (n <= 0) return;
    if ((size_t)n > pe->scratch_rows) {
        free(pe->scratch);
        pe->scratch = nevo_alloc_aligned(sizeof(float) * (nevo_policy_scratch_floats(p, n) + (size_t)n * p->n_out));
        pe->scratch_rows = (size_t)n;
    }
    float *out = pe->scratch, *scratch = pe->scratch + (size_t)n * p->n_out;
    int *net = nevo_alloc(sizeof(int) * (size_t)n); /* every row network 0 */
    size_t sf = nevo_policy_state_floats(p);
    float *fresh = sf && !state ? nevo_alloc(sizeof(float) * sf * (size_t)n) : NULL; /* zeroed: a first step */
    nevo_policy_forward_state(p, theta, p->nparams, net, obs, n, fresh ? fresh : state, out, scratch);
    nevo_policy_actions(p, out, n, actions);
    free(fresh);
    free(net);
}

NevoStatus nevo_pop_eval_save(const NevoPopEval *pe, const char *path, const float *theta, NevoError *err) {
    return nevo_policy_file_save(path, &pe->cfg, pe->lp.policy, theta, err);
}

/* --- ask/tell --------------------------------------------------------------------- */

struct NevoStrategy {
    NevoConfig cfg;
    NevoRunCore c; /* built as `nevo train` builds a run */
    NevoRunData d; /* on a dataset: its data (c has no env or evaluator) */
    NevoEnvSpec spec; /* what the networks see: the env's, or the dataset's */
    char *json;
    const NevoTaskSet *ts; /* asked, not yet told */
    int evaluated;         /* ts's episodes ran here: stats and states below are theirs */
    NevoObsStats *stats;
    NevoStates *states;
    int n_kept;            /* tasks the arrays above are for */
};

static void strategy_drop_records(NevoStrategy *s) {
    nevo_task_records_free(s->stats, s->states, s->n_kept);
    s->stats = NULL;
    s->states = NULL;
    s->n_kept = 0;
    s->evaluated = 0;
}

/* Room for what the asked set's tasks record (empty statistics, states); nothing on
 * a dataset, where nevo train records nothing either. */
static void strategy_records(NevoStrategy *s) {
    strategy_drop_records(s);
    s->n_kept = s->ts->n_tasks;
    if (!s->d.data) nevo_task_records_new(s->ts, &s->stats, &s->states);
}

NevoStatus nevo_strategy_new(const char *config_json, int threads, NevoStrategy **out, NevoError *err) {
    *out = NULL;
    NevoStrategy *s = nevo_alloc(sizeof *s);
    NevoConfig *cfg = &s->cfg;
    NevoStatus st = config_from_json(config_json, cfg, err);
    if (st == NEVO_OK && (threads < 0 || threads > 1024))
        st = nevo_error(err, NEVO_ERR_INVALID, "threads must be from 0 to 1024, not %d", threads);
    if (st == NEVO_OK && cfg->dataset[0]) {
        st = nevo_run_core_build_data(cfg, pool_threads(cfg, threads), &s->c, &s->d, err);
        /* a gradient algorithm runs its epochs itself: nothing to ask or tell */
        if (st == NEVO_OK && nevo_algo_trains_itself(s->c.algo))
            st = nevo_error(err, NEVO_ERR_INVALID, "algo %s trains by itself, without ask and tell (run it with "
                            "nevo train)", cfg->algo);
        if (st == NEVO_OK) nevo_dataset_env_spec(s->d.data, &s->spec);
    } else if (st == NEVO_OK) {
        /* a gradient algorithm without a dataset: the core's algorithm check names it */
        st = nevo_run_core_build(cfg, pool_threads(cfg, threads), NULL, &s->c, err);
        if (st == NEVO_OK) s->spec = *nevo_env_spec(s->c.env);
    }
    if (st) {
        nevo_strategy_free(s);
        return st;
    }
    s->json = nevo_config_to_json(cfg);
    *out = s;
    return NEVO_OK;
}

void nevo_strategy_free(NevoStrategy *s) {
    if (!s) return;
    strategy_drop_records(s);
    nevo_run_core_free(&s->c);
    nevo_run_data_free(&s->d);
    free(s->json);
    free(s);
}

const char *nevo_strategy_config(const NevoStrategy *s) { return s->json; }
const NevoEnvSpec *nevo_strategy_spec(const NevoStrategy *s) { return &s->spec; }
size_t nevo_strategy_nparams(const NevoStrategy *s) { return s->c.policy->nparams; }
int nevo_strategy_generations_done(const NevoStrategy *s) { return nevo_algo_generations_done(s->c.algo); }

void nevo_strategy_ask(NevoStrategy *s, int *n_nets, int *n_tasks) {
    const NevoTaskSet *ts = nevo_algo_ask(s->c.algo);
    if (ts != s->ts || !s->n_kept) { /* a new set (asking again gives the same one) */
        s->ts = ts;
        strategy_records(s);
    }
    *n_nets = ts->n_nets;
    *n_tasks = ts->n_tasks;
}

typedef struct {
    const NevoTaskSet *ts;
    const NevoPolicy *policy;
    float *params;
    size_t stride;
} BuildJob;

static void build_item(void *ctx, int j, int worker) {
    (void)worker;
    BuildJob *b = ctx;
    nevo_taskset_build(b->ts, b->policy, j, b->params + (size_t)j * b->stride, 0);
}

void nevo_strategy_ask_params(NevoStrategy *s, float *params, size_t stride) {
    int nn, nt;
    nevo_strategy_ask(s, &nn, &nt);
    BuildJob b = {s->ts, s->c.policy, params, stride};
    nevo_pool_run(s->c.pool, nn, build_item, &b);
}

void nevo_strategy_ask_tasks(NevoStrategy *s, int *net, uint64_t *seeds, uint32_t *flags) {
    int nn, nt;
    nevo_strategy_ask(s, &nn, &nt);
    for (int t = 0; t < nt; t++) {
        net[t] = s->ts->tasks[t].net;
        seeds[t] = s->ts->tasks[t].seed;
        flags[t] = s->ts->tasks[t].flags;
    }
}

bool nevo_strategy_obs_norm(const NevoStrategy *s, float *mean, float *std) {
    if (!s->c.policy->obs_norm) return false;
    size_t d = (size_t)s->c.policy->obs_dim;
    memcpy(mean, s->c.policy->obs_mean, sizeof(float) * d);
    memcpy(std, s->c.policy->obs_std, sizeof(float) * d);
    return true;
}

NevoStatus nevo_strategy_evaluate(NevoStrategy *s, double *ret, int *len, bool *terminated, float *bc,
                                  NevoError *err) {
    int nn, nt;
    nevo_strategy_ask(s, &nn, &nt);
    strategy_records(s); /* fresh: a second evaluation must not add to the first */
    NevoEpisode *eps = nevo_alloc(sizeof(NevoEpisode) * (size_t)(nt ? nt : 1));
    NevoStatus st;
    if (s->d.data) { /* as nevo train scores a set on a dataset */
        st = nevo_taskset_check(s->ts, s->c.policy, NULL, err);
        if (st == NEVO_OK)
            st = nevo_supervised_tasks(s->ts, s->c.policy, &s->d.train, s->cfg.data.fitness_batch, s->c.pool, eps,
                                       err);
    } else {
        st = nevo_evaluate_tasks(s->c.ev, s->ts, eps, s->stats, s->states, err);
    }
    if (st == NEVO_OK) {
        copy_episodes(eps, nt, s->spec.bc_dim, ret, len, terminated, bc);
        s->evaluated = 1;
    }
    free(eps);
    return st;
}

NevoStatus nevo_strategy_tell(NevoStrategy *s, const double *ret, const int *len, const bool *terminated,
                              const float *bc, double *stats, int *done, NevoError *err) {
    int nn, nt;
    *done = 0;
    nevo_strategy_ask(s, &nn, &nt);
    if (s->states && !s->evaluated)
        return nevo_error(err, NEVO_ERR_INVALID, "this evaluation keeps states of its episodes (ga.mutation %s): "
                          "evaluate it with the strategy's own evaluate", s->cfg.ga.mutation);
    int bd = s->spec.bc_dim;
    /* on a dataset a task's length is its batch's samples, as nevo_supervised_tasks gives */
    int batch = s->cfg.data.fitness_batch, n_train = s->d.train.n;
    int data_len = s->d.data ? (batch <= 0 || batch >= n_train ? n_train : batch) : 0;
    NevoEpisode *eps = nevo_alloc(sizeof(NevoEpisode) * (size_t)(nt ? nt : 1));
    for (int t = 0; t < nt; t++) {
        eps[t].ret = ret[t];
        eps[t].length = len ? len[t] : data_len;
        eps[t].terminated = terminated ? terminated[t] : s->d.data != NULL;
        if (bc && bd) memcpy(eps[t].bc, bc + (size_t)t * (size_t)bd, sizeof(float) * (size_t)bd);
    }
    NevoGenStats gs;
    memset(&gs, 0, sizeof gs);
    NevoStatus st = nevo_algo_tell(s->c.algo, eps, s->stats, s->states, &gs, done, err);
    free(eps);
    if (st) return st;
    strategy_drop_records(s);
    s->ts = NULL;
    if (!*done) return NEVO_OK;
    NevoDataScores ds = {NAN, NAN, NAN};
    /* told: a failure here leaves the generation done, as nevo train's would end the run */
    if (s->d.data) st = nevo_run_data_scores(&s->c, &s->d, NULL, &ds, err);
    double v[NEVO_STRATEGY_STATS] = {gs.generation, (double)gs.frames, (double)gs.episodes, gs.best, gs.mean,
                                     gs.median, gs.elite_mean, gs.archive_size, gs.novelty_mean, gs.reward_weight,
                                     ds.train_loss, ds.test_loss, ds.test_accuracy, gs.bc_dim};
    for (int d = 0; d < gs.bc_dim && d < NEVO_ENV_MAX_BC; d++) v[14 + d] = gs.bc[d];
    if (stats) memcpy(stats, v, sizeof v);
    return st;
}

void nevo_strategy_best(const NevoStrategy *s, float *theta) { nevo_algo_best(s->c.algo, theta); }

NevoStatus nevo_strategy_save(const NevoStrategy *s, const char *path, NevoError *err) {
    float *theta = nevo_alloc_aligned(sizeof(float) * s->c.policy->nparams);
    nevo_algo_best(s->c.algo, theta);
    NevoStatus st = nevo_policy_file_save(path, &s->cfg, s->c.policy, theta, err);
    free(theta);
    return st;
}

/* --- runs ------------------------------------------------------------------------- */

NevoStatus nevo_train_json(const char *config_json, const char *out_dir, int resume, int threads,
                           NevoError *err) {
    NevoConfig cfg;
    NevoStatus st = config_from_json(config_json, &cfg, err);
    if (st) return st;
    if (!out_dir || !out_dir[0]) return nevo_error(err, NEVO_ERR_INVALID, "no run directory given");
    if (threads < 0 || threads > 1024)
        return nevo_error(err, NEVO_ERR_INVALID, "threads must be from 0 to 1024, not %d", threads);
    NevoTrainSummary summary;
    return nevo_train_run(&cfg, out_dir, resume, threads, NULL, &summary, err);
}
