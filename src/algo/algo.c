/* The algorithm registry, dispatch, and what the algorithms share: task-set layout,
 * per-network means, rankings. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "core/strutil.h"
#include "nevo/rng.h"

/* One line per algorithm: a new one is its own file (its ops, check and constructor)
 * plus a line here. */
typedef struct Entry {
    NevoAlgoInfo info;
    NevoStatus (*check)(const NevoConfig *cfg, int variant, NevoError *err);
    NevoStatus (*create)(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err);
    double (*state_bytes)(const NevoConfig *cfg, int variant, size_t nparams);
    const char *state; /* what state_bytes counts, for messages */
    int variant;
} Entry;

static const Entry registry[] = {
    {{"ga", "Deep GA: truncation selection, elite chosen on validation episodes", "ga", 0}, nevo_ga_check,
     nevo_ga_new, nevo_ga_state_bytes, "parents (ga.truncation)", NEVO_GA_PLAIN},
    {{"rs", "random search: every generation fresh random networks, the best kept", "ga", 0}, nevo_ga_check,
     nevo_ga_new, nevo_ga_state_bytes, "elite", NEVO_GA_RS},
    {{"ga-ns", "GA selecting parents by novelty (novelty search)", "ga ns", NEVO_ALGO_NOVELTY}, nevo_ga_check,
     nevo_ga_new, nevo_ga_state_bytes, "parents (ga.truncation)", NEVO_GA_NS},
    {{"es", "OpenAI ES: antithetic pairs, centred ranks, Adam or SGD (and ARS options)", "es",
      NEVO_ALGO_OBS_NORM},
     nevo_es_check, nevo_es_new, nevo_es_state_bytes, "mean and Adam moments", NEVO_ES_PLAIN},
    {{"ns-es", "ES agents following novelty", "es ns", NEVO_ALGO_NOVELTY}, nevo_es_check, nevo_es_new,
     nevo_es_state_bytes, "agents (ns.meta_population)", NEVO_ES_NS},
    {{"nsr-es", "ES agents following novelty and reward, half each", "es ns", NEVO_ALGO_NOVELTY}, nevo_es_check,
     nevo_es_new, nevo_es_state_bytes, "agents (ns.meta_population)", NEVO_ES_NSR},
    {{"nsra-es", "ES agents following an adaptive mix of novelty and reward", "es ns", NEVO_ALGO_NOVELTY},
     nevo_es_check, nevo_es_new, nevo_es_state_bytes, "agents (ns.meta_population)", NEVO_ES_NSRA},
    {{"sgd", "mini-batch gradient descent on a dataset's cross-entropy (optim: sgd, adam or rmsprop)", "optim data",
      NEVO_ALGO_GRADIENT | NEVO_ALGO_DATASET},
     nevo_sgd_check, nevo_sgd_algo_new, nevo_sgd_state_bytes, "parameters and optimiser moments", 0},
    {{"vtrace", "IMPALA's V-trace actor-critic on SEED RL's actors and batched inference (rl: sync or async)",
      "rl optim", NEVO_ALGO_GRADIENT | NEVO_ALGO_LR_DECAY},
     nevo_vtrace_check, nevo_vtrace_new, nevo_vtrace_state_bytes, "parameters, optimiser moments and gradients", 0},
    {{"r2d2", "R2D2: a recurrent Q-network on replayed sequences (burn-in, n-step double Q, priorities; rl: sync or async)",
      "rl optim", NEVO_ALGO_GRADIENT | NEVO_ALGO_LR_DECAY},
     nevo_r2d2_check, nevo_r2d2_new, nevo_r2d2_state_bytes, "parameters, target network, optimiser moments and "
     "replay buffer", 0},
};
#define N_ALGOS ((int)(sizeof registry / sizeof registry[0]))

int nevo_algo_count(void) { return N_ALGOS; }

const NevoAlgoInfo *nevo_algo_info(int i) { return i >= 0 && i < N_ALGOS ? &registry[i].info : NULL; }

static const Entry *find(const char *name) {
    for (int i = 0; i < N_ALGOS; i++)
        if (strcmp(registry[i].info.name, name) == 0) return &registry[i];
    return NULL;
}

const NevoAlgoInfo *nevo_algo_find(const char *name) {
    const Entry *e = find(name);
    return e ? &e->info : NULL;
}

NevoStatus nevo_algo_check(const NevoConfig *cfg, const NevoEnvSpec *spec, NevoError *err) {
    /* a generation's tasks are counted in int: the population's episodes must fit */
    if ((double)cfg->population * cfg->episodes > (double)INT32_MAX / 2)
        return nevo_error(err, NEVO_ERR_INVALID, "population x episodes (%d x %d) is more episodes than a generation "
                          "can hold (2^30)", cfg->population, cfg->episodes);
    const Entry *e = find(cfg->algo);
    if (!e) {
        char names[256] = "";
        const char *list[N_ALGOS];
        for (int i = 0; i < N_ALGOS; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", registry[i].info.name);
            list[i] = registry[i].info.name;
        }
        const char *close = nevo_closest(cfg->algo, list, N_ALGOS);
        if (close)
            return nevo_error(err, NEVO_ERR_NOTFOUND, "algo = '%s' is not one of %s (did you mean %s?)", cfg->algo,
                              names, close);
        return nevo_error(err, NEVO_ERR_NOTFOUND, "algo = '%s' is not one of %s", cfg->algo, names);
    }
    NevoStatus st = e->check(cfg, e->variant, err);
    if (st) return st;
    if (strcmp(cfg->optim.lr_decay, "none") != 0 && !(e->info.flags & NEVO_ALGO_LR_DECAY))
        return nevo_error(err, NEVO_ERR_INVALID, "optim.lr_decay = %s: algo %s keeps its learning rate (the "
                          "actor-learners vtrace and r2d2 decay it)", cfg->optim.lr_decay, cfg->algo);
    if ((e->info.flags & NEVO_ALGO_DATASET) && !cfg->dataset[0])
        return nevo_error(err, NEVO_ERR_INVALID, "algo %s trains on a dataset: set dataset (e.g. fashion-mnist)",
                          cfg->algo);
    if (cfg->dataset[0] && (e->info.flags & NEVO_ALGO_NOVELTY))
        return nevo_error(err, NEVO_ERR_INVALID, "algo %s scores behaviours, which a dataset (%s) has none of",
                          cfg->algo, cfg->dataset);
    if (spec && (e->info.flags & NEVO_ALGO_NOVELTY) && (spec->bc_dim < 1 || spec->bc_dim > NEVO_ENV_MAX_BC))
        return nevo_error(err, NEVO_ERR_INVALID, "%s needs a behaviour characterisation, but %s declares none",
                          cfg->algo, spec->name);
    return NEVO_OK;
}

double nevo_algo_memory_bytes(const NevoConfig *cfg, size_t nparams) {
    const Entry *e = find(cfg->algo);
    double row = 4.0 * (double)nparams, P = cfg->population;
    size_t table = nevo_algo_noise_floats(cfg, nparams);
    double threads = cfg->threads > 0 ? cfg->threads : nevo_cpu_count();
    double bytes = 4.0 * (double)table;
    bytes += threads * 16 * row;             /* the evaluator: a built row per episode slot */
    bytes += 64 * P;                         /* fitness, order, genomes, ... per individual */
    if (cfg->episodes > 1) bytes += P * row; /* the evaluator's networks built first */
    bytes += P * cfg->episodes * (double)(sizeof(NevoTask) + sizeof(NevoEpisode)); /* tasks, results */
    return bytes + (e ? e->state_bytes(cfg, e->variant, nparams) : 0.0);
}

NevoStatus nevo_algo_check_memory(const NevoConfig *cfg, size_t nparams, NevoError *err) {
    NevoStatus st = nevo_config_check_params(nparams, err);
    if (st) return st;
    const Entry *e = find(cfg->algo);
    char what[160];
    snprintf(what, sizeof what, "noise table, population %d, %s of a network of %zu parameters", cfg->population,
             e ? e->state : "state", nparams);
    return nevo_config_memory_limit(nevo_algo_memory_bytes(cfg, nparams), what, err);
}

size_t nevo_algo_noise_floats(const NevoConfig *cfg, size_t nparams) {
    if (cfg->noise_table_floats > 0) return (size_t)cfg->noise_table_floats;
    const Entry *e = find(cfg->algo);
    if (!e || !(e->info.flags & NEVO_ALGO_GRADIENT)) return nevo_noise_auto_size(nparams);
    size_t size = NEVO_NOISE_MIN_FLOATS;
    while (size <= nparams && size < NEVO_NOISE_MAX_FLOATS) size *= 2;
    return size;
}

double nevo_algo_lr_scale(const NevoAlgo *a, double frames_per_generation) {
    const NevoConfig *cfg = a->cfg;
    if (strcmp(cfg->optim.lr_decay, "linear") != 0) return 1.0;
    double done = cfg->max_frames > 0 ? a->generation * frames_per_generation / (double)cfg->max_frames
                                      : (double)a->generation / cfg->generations;
    return done < 1.0 ? 1.0 - done : 0.0;
}

double nevo_algo_sigma(double sigma, double decay, double floor, uint32_t gen) {
    double s = decay == 1.0 ? sigma : sigma * pow(decay, (double)gen);
    return s > floor ? s : floor;
}

NevoStatus nevo_algo_factored_check(const NevoConfig *cfg, const char *prefix, const char *who, int factored,
                                    int rank, NevoError *err) {
    if (factored && rank < 1)
        return nevo_error(err, NEVO_ERR_INVALID, "%s.factored runs low-rank %s: set %s.rank (1 to %d) too", prefix,
                          who, prefix, NEVO_LOWRANK_MAX);
    if (factored && (cfg->dataset[0] || cfg->policy.lstm > 0))
        return nevo_error(err, NEVO_ERR_INVALID, "%s.factored needs an env (not a dataset) and a feed-forward "
                          "policy (policy.lstm 0)", prefix);
    return NEVO_OK;
}

int nevo_algo_obs_norm(const NevoConfig *cfg) {
    const Entry *e = find(cfg->algo);
    /* a dataset's inputs are fixed pixel values, scaled to [0, 1] already */
    return e && (e->info.flags & NEVO_ALGO_OBS_NORM) && cfg->es.obs_norm && !cfg->dataset[0];
}

static NevoStatus algo_new(const NevoConfig *cfg, const NevoEnv *env, const NevoDataView *data, NevoPolicy *policy,
                           const NevoNoise *noise, NevoPool *pool, NevoAlgo **out, NevoError *err) {
    *out = NULL;
    const NevoEnvSpec *spec = env ? nevo_env_spec(env) : NULL;
    NevoStatus st = nevo_algo_check(cfg, spec, err);
    if (st) return st;
    if (noise->size <= policy->nparams)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "noise_table_floats (%zu) must exceed the network's %zu parameters", noise->size,
                          policy->nparams);
    const Entry *e = find(cfg->algo);
    NevoAlgo base;
    memset(&base, 0, sizeof base);
    base.info = &e->info;
    base.cfg = cfg;
    base.env = env;
    base.data = data;
    base.bc_dim = spec ? spec->bc_dim : 0;
    base.policy = policy;
    base.noise = noise;
    base.pool = pool;
    return e->create(&base, e->variant, out, err);
}

NevoStatus nevo_algo_new(const NevoConfig *cfg, const NevoEnv *env, NevoPolicy *policy, const NevoNoise *noise,
                         NevoPool *pool, NevoAlgo **out, NevoError *err) {
    if (cfg->dataset[0] || (find(cfg->algo) && (find(cfg->algo)->info.flags & NEVO_ALGO_DATASET)))
        return nevo_error(err, NEVO_ERR_INVALID, "algo %s on dataset '%s': a run on a dataset is made with "
                          "nevo_algo_new_on_data", cfg->algo, cfg->dataset);
    return algo_new(cfg, env, NULL, policy, noise, pool, out, err);
}

NevoStatus nevo_algo_new_on_data(const NevoConfig *cfg, const NevoDataView *train, NevoPolicy *policy,
                                 const NevoNoise *noise, NevoPool *pool, NevoAlgo **out, NevoError *err) {
    *out = NULL;
    if (!cfg->dataset[0]) return nevo_error(err, NEVO_ERR_INVALID, "nevo_algo_new_on_data: the config names no dataset");
    return algo_new(cfg, NULL, train, policy, noise, pool, out, err);
}

int nevo_algo_trains_itself(const NevoAlgo *a) { return a->ops->train != NULL; }
int nevo_algo_replicates(const NevoAlgo *a) { return a->ops->set_comm != NULL; }

void nevo_algo_set_validate(NevoAlgo *a, NevoValidateFn fn, void *ctx) {
    a->validate = fn;
    a->validate_ctx = ctx;
}

void nevo_algo_set_comm(NevoAlgo *a, NevoComm *comm) {
    NEVO_ASSERT(a->ops->set_comm != NULL);
    a->ops->set_comm(a, comm);
}

NevoStatus nevo_algo_train(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    if (!a->ops->train) return nevo_error(err, NEVO_ERR_INVALID, "algo %s is run by ask and tell", a->info->name);
    memset(&a->stats, 0, sizeof a->stats);
    a->stats.generation = a->generation;
    NevoStatus st = a->ops->train(a, &a->stats, err);
    if (st) return st;
    *stats = a->stats;
    a->generation++;
    memset(&a->stats, 0, sizeof a->stats);
    return NEVO_OK;
}

void nevo_algo_free(NevoAlgo *a) {
    if (!a) return;
    free(a->nets);
    free(a->tasks);
    a->ops->free(a);
}

const NevoTaskSet *nevo_algo_ask(NevoAlgo *a) {
    if (!a->asked) {
        a->ops->ask(a);
        a->asked = 1;
    }
    return &a->ts;
}

NevoStatus nevo_algo_tell(NevoAlgo *a, const NevoEpisode *results, const NevoObsStats *task_stats,
                          const NevoStates *task_states, NevoGenStats *stats, int *done, NevoError *err) {
    *done = 0;
    if (!a->asked) return nevo_error(err, NEVO_ERR_INVALID, "nevo_algo_tell without an evaluation asked for");
    for (int t = 0; t < a->ts.n_tasks; t++) {
        if (results[t].length < 0 || !isfinite(results[t].ret))
            return nevo_error(err, NEVO_ERR_INVALID, "result of task %d is not an episode's (length %d, return %g)",
                              t, results[t].length, results[t].ret);
        if ((a->ts.tasks[t].flags & NEVO_TASK_RECORD_OBS) && (!task_stats || task_stats[t].dim != a->ts.obs_dim))
            return nevo_error(err, NEVO_ERR_INVALID, "task %d records observations: its statistics are missing", t);
        if ((a->ts.tasks[t].flags & NEVO_TASK_RECORD_STATES) &&
            (!task_states || task_states[t].dim != a->ts.obs_dim || task_states[t].n < 0 ||
             task_states[t].n > a->ts.states_cap || task_states[t].n > task_states[t].cap))
            return nevo_error(err, NEVO_ERR_INVALID, "task %d keeps states: they are missing", t);
    }
    a->asked = 0;
    if (!a->ops->tell(a, results, task_stats, task_states)) return NEVO_OK;
    *stats = a->stats;
    a->generation++;
    memset(&a->stats, 0, sizeof a->stats);
    a->stats.generation = a->generation;
    *done = 1;
    return NEVO_OK;
}

int nevo_algo_generations_done(const NevoAlgo *a) { return a->generation; }
void nevo_algo_best(const NevoAlgo *a, float *theta) { a->ops->best(a, theta); }

/* an algorithm without behaviours or an archive leaves the op NULL: none */
const float *nevo_algo_behaviours(const NevoAlgo *a, int *n) {
    if (a->ops->behaviours) return a->ops->behaviours(a, n);
    *n = 0;
    return NULL;
}

const float *nevo_algo_archive(const NevoAlgo *a, int *n) {
    if (a->ops->archive) return a->ops->archive(a, n);
    *n = 0;
    return NULL;
}

void nevo_algo_save(const NevoAlgo *a, NevoBuf *buf) {
    nevo_buf_u32(buf, (uint32_t)a->generation);
    a->ops->save(a, buf);
}

NevoStatus nevo_algo_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    uint32_t g = nevo_read_u32(r);
    if (g > (uint32_t)INT32_MAX)
        return nevo_error(err, NEVO_ERR_CORRUPT, "algorithm state: generation counter %u is out of range", g);
    a->generation = (int)g;
    a->asked = 0;
    memset(&a->stats, 0, sizeof a->stats);
    a->stats.generation = a->generation;
    return a->ops->load(a, r, err);
}

/* --- task sets --------------------------------------------------------------------- */

NevoNet *nevo_algo_tasks(NevoAlgo *a, int n_nets, int episodes, uint32_t generation, const uint32_t *ids) {
    int n_tasks = n_nets * episodes;
    if (n_nets > a->nets_cap) {
        free(a->nets);
        a->nets = nevo_alloc(sizeof(NevoNet) * (size_t)n_nets);
        a->nets_cap = n_nets;
    }
    if (n_tasks > a->tasks_cap) {
        free(a->tasks);
        a->tasks = nevo_alloc(sizeof(NevoTask) * (size_t)n_tasks);
        a->tasks_cap = n_tasks;
    }
    memset(a->nets, 0, sizeof(NevoNet) * (size_t)n_nets);
    for (int i = 0; i < n_nets; i++) {
        uint32_t id = a->data ? (ids ? ids[0] : 0) : ids ? ids[i] : (uint32_t)i;
        for (int e = 0; e < episodes; e++) {
            NevoTask *t = &a->tasks[i * episodes + e];
            t->net = i;
            t->flags = 0;
            t->seed = nevo_rng_derive(a->cfg->seed, NEVO_RNG_ENV_SEED, generation, id, (uint32_t)e);
        }
    }
    NevoTaskSet *ts = &a->ts;
    nevo_taskset_for_policy(ts, a->policy, a->env);
    ts->seed = a->cfg->seed;
    ts->noise = a->noise;
    ts->noise_floats = a->noise->size;
    ts->n_nets = n_nets;
    ts->nets = a->nets;
    ts->n_tasks = n_tasks;
    ts->tasks = a->tasks;
    return a->nets;
}

void nevo_algo_record_obs(NevoAlgo *a, uint32_t generation, double prob) {
    for (int k = 0; k < a->ts.n_tasks; k++) {
        NevoRng rng;
        nevo_rng_init(&rng, a->cfg->seed, NEVO_RNG_OBS_NORM, generation, (uint32_t)k, 0);
        if (nevo_rng_uniform(&rng) < prob) a->tasks[k].flags |= NEVO_TASK_RECORD_OBS;
    }
}

void nevo_algo_net_means(NevoAlgo *a, const NevoEpisode *results, int episodes, double *fitness, double *shaped,
                         double shift, float *bc) {
    int n = a->ts.n_nets, d = a->bc_dim;
    for (int i = 0; i < n; i++) {
        double sum = 0.0, steps = 0.0;
        for (int e = 0; e < episodes; e++) {
            const NevoEpisode *r = &results[i * episodes + e];
            sum += r->ret;
            steps += r->length;
            a->stats.frames += r->length;
        }
        fitness[i] = sum / episodes;
        if (shaped) shaped[i] = (sum - shift * steps) / episodes;
        if (bc)
            for (int c = 0; c < d; c++) {
                double s = 0.0;
                for (int e = 0; e < episodes; e++) s += results[i * episodes + e].bc[c];
                bc[(size_t)i * d + c] = (float)(s / episodes);
            }
    }
    a->stats.episodes += a->ts.n_tasks;
}

/* --- rankings ---------------------------------------------------------------------- */

static const double *sort_keys;

static int by_fitness_desc(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    if (sort_keys[a] > sort_keys[b]) return -1;
    if (sort_keys[a] < sort_keys[b]) return 1;
    return a < b ? -1 : a > b;
}

/* qsort with a comparator that breaks ties by index is a total order, so the result is
 * unique whatever qsort's algorithm. The static key pointer is only used by the
 * training thread. */
void nevo_rank_desc(const double *fitness, int n, int *order) {
    for (int i = 0; i < n; i++) order[i] = i;
    sort_keys = fitness;
    qsort(order, (size_t)n, sizeof(int), by_fitness_desc);
    sort_keys = NULL;
}

void nevo_centered_ranks(const double *fitness, int n, double *out) {
    int *order = nevo_alloc(sizeof(int) * (size_t)n);
    nevo_rank_desc(fitness, n, order);
    /* order[0] is the best: rank n-1. Among equal values the lower index sorts first
     * in `order` and so gets the higher rank; argsort would give it the lower one.
     * Reverse runs of ties to match a stable ascending argsort. */
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && fitness[order[j + 1]] == fitness[order[i]]) j++;
        for (int lo = i, hi = j; lo < hi; lo++, hi--) {
            int t = order[lo];
            order[lo] = order[hi];
            order[hi] = t;
        }
        i = j + 1;
    }
    for (int k = 0; k < n; k++) {
        int rank = n - 1 - k;
        out[order[k]] = n > 1 ? (double)rank / (n - 1) - 0.5 : 0.0;
    }
    free(order);
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

double nevo_median(const double *x, int n) {
    if (n <= 0) return 0.0;
    double *c = nevo_alloc(sizeof(double) * (size_t)n);
    memcpy(c, x, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

void nevo_algo_fitness_stats(NevoAlgo *a, const double *fitness, int n) {
    double best = fitness[0], sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (fitness[i] > best) best = fitness[i];
        sum += fitness[i];
    }
    a->stats.best = best;
    a->stats.mean = sum / n;
    a->stats.median = nevo_median(fitness, n);
}
