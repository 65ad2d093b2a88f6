/* Algorithm dispatch and what the algorithms share: rollouts of a set of networks,
 * ranking, centred ranks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

NevoStatus nevo_algo_new(const NevoConfig *cfg, const NevoEnv *env, NevoPolicy *policy,
                         const NevoNoise *noise, NevoEvaluator *ev, NevoAlgo **out, NevoError *err) {
    *out = NULL;
    NevoAlgo base = {NULL, cfg, env, policy, noise, ev, 0, 0.0, NULL, 0};
    if (noise->size <= policy->nparams)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "noise_table_floats (%zu) must exceed the network's %zu parameters", noise->size,
                          policy->nparams);
    int novelty = strstr(cfg->algo, "ns") != NULL;
    int bc_dim = nevo_env_spec(env)->bc_dim;
    if (novelty && (bc_dim < 1 || bc_dim > NEVO_ENV_MAX_BC))
        return nevo_error(err, NEVO_ERR_INVALID, "%s needs a behaviour characterisation, but %s declares none",
                          cfg->algo, nevo_env_spec(env)->name);
    if (strcmp(cfg->algo, "ga") == 0 || strcmp(cfg->algo, "rs") == 0 || strcmp(cfg->algo, "ga-ns") == 0)
        return nevo_ga_new(&base, out, err);
    if (strstr(cfg->algo, "es")) return nevo_es_new(&base, out, err);
    return nevo_error(err, NEVO_ERR_NOTFOUND, "unknown algorithm '%s' (use ga, es or rs)", cfg->algo);
}

void nevo_algo_free(NevoAlgo *a) {
    if (a) a->ops->free(a);
}

NevoStatus nevo_algo_generation(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    memset(stats, 0, sizeof *stats);
    stats->generation = a->generation;
    NevoStatus st = a->ops->generation(a, stats, err);
    if (st == NEVO_OK) a->generation++;
    return st;
}

int nevo_algo_generations_done(const NevoAlgo *a) { return a->generation; }
void nevo_algo_best(const NevoAlgo *a, float *theta) { a->ops->best(a, theta); }

const float *nevo_algo_behaviours(const NevoAlgo *a, int *n) { return a->ops->behaviours(a, n); }
const float *nevo_algo_archive(const NevoAlgo *a, int *n) { return a->ops->archive(a, n); }

void nevo_algo_save(const NevoAlgo *a, NevoBuf *buf) {
    nevo_buf_u32(buf, (uint32_t)a->generation);
    a->ops->save(a, buf);
}

NevoStatus nevo_algo_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    a->generation = (int)nevo_read_u32(r);
    return a->ops->load(a, r, err);
}

NevoStatus nevo_algo_rollouts_built(NevoAlgo *a, const float *params, NevoBuildFn build, void *build_ctx, int n,
                                    const int *queue, int episodes, uint32_t generation, const uint32_t *stream_ids,
                                    double *fitness, float *bc, NevoGenStats *stats, NevoObsStats *obs,
                                    double obs_prob, NevoError *err) {
    int n_tasks = n * episodes;
    /* pairs are networks 2i and 2i + 1 next to each other in the queue: ascending only */
    NEVO_ASSERT(!(queue && a->pairs));
    NevoTask *tasks = nevo_alloc(sizeof(NevoTask) * (size_t)n_tasks);
    NevoEpisode *results = nevo_alloc(sizeof(NevoEpisode) * (size_t)n_tasks);
    NevoObsStats *task_stats = NULL;
    for (int i = 0; i < n; i++) {
        uint32_t id = stream_ids ? stream_ids[i] : (uint32_t)i;
        for (int e = 0; e < episodes; e++) {
            NevoTask *t = &tasks[i * episodes + e];
            t->net = i;
            t->seed = nevo_rng_derive(a->cfg->seed, NEVO_RNG_ENV_SEED, generation, id, (uint32_t)e);
            t->flags = a->pairs && episodes == 1 && i % 2 == 0 ? NEVO_TASK_WITH_NEXT : 0;
        }
    }
    if (obs) {
        task_stats = nevo_alloc(sizeof(NevoObsStats) * (size_t)n_tasks);
        for (int k = 0; k < n_tasks; k++) {
            NevoRng rng;
            nevo_rng_init(&rng, a->cfg->seed, NEVO_RNG_OBS_NORM, generation, (uint32_t)k, 0);
            if (nevo_rng_uniform(&rng) < obs_prob) {
                tasks[k].flags |= NEVO_TASK_RECORD_OBS;
                nevo_obs_stats_init(&task_stats[k], obs->dim);
            }
        }
    }
    /* the evaluator takes tasks in array order: with a queue order, the tasks (and their
     * statistics) go in permuted and the results come back to their networks */
    NevoTask *q_tasks = tasks;
    NevoEpisode *q_results = results;
    NevoObsStats *q_stats = task_stats;
    if (queue) {
        /* a permutation of the networks, or some would not run and others twice */
        unsigned char *seen = nevo_alloc((size_t)n);
        for (int j = 0; j < n; j++) {
            NEVO_ASSERT(queue[j] >= 0 && queue[j] < n && !seen[queue[j]]);
            seen[queue[j]] = 1;
        }
        free(seen);
        q_tasks = nevo_alloc(sizeof(NevoTask) * (size_t)n_tasks);
        q_results = nevo_alloc(sizeof(NevoEpisode) * (size_t)n_tasks);
        if (task_stats) q_stats = nevo_alloc(sizeof(NevoObsStats) * (size_t)n_tasks);
        for (int j = 0; j < n; j++)
            for (int e = 0; e < episodes; e++) {
                q_tasks[j * episodes + e] = tasks[queue[j] * episodes + e];
                if (task_stats) q_stats[j * episodes + e] = task_stats[queue[j] * episodes + e];
            }
    }
    NevoStatus st = build ? nevo_evaluate_built(a->ev, build, build_ctx, q_tasks, n_tasks, q_results, q_stats, err)
                          : nevo_evaluate(a->ev, params, a->policy->nparams, q_tasks, n_tasks, q_results, q_stats,
                                          err);
    if (queue) {
        for (int j = 0; j < n; j++)
            for (int e = 0; e < episodes; e++) {
                results[queue[j] * episodes + e] = q_results[j * episodes + e];
                if (task_stats) task_stats[queue[j] * episodes + e] = q_stats[j * episodes + e];
            }
        free(q_tasks);
        free(q_results);
        if (task_stats) free(q_stats);
    }
    if (st == NEVO_OK) {
        for (int i = 0; i < n; i++) {
            double sum = 0.0, steps = 0.0;
            for (int e = 0; e < episodes; e++) {
                const NevoEpisode *r = &results[i * episodes + e];
                sum += r->ret;
                steps += r->length;
                stats->frames += r->length;
            }
            fitness[i] = sum / episodes;
            if (a->shaped) a->shaped[i] = (sum - a->reward_shift * steps) / episodes;
            if (bc) {
                int d = nevo_env_spec(a->env)->bc_dim;
                for (int c = 0; c < d; c++) {
                    double s = 0.0;
                    for (int e = 0; e < episodes; e++) s += results[i * episodes + e].bc[c];
                    bc[(size_t)i * d + c] = (float)(s / episodes);
                }
            }
        }
        stats->episodes += n_tasks;
    }
    if (task_stats) {
        for (int k = 0; k < n_tasks; k++) {
            if (!(tasks[k].flags & NEVO_TASK_RECORD_OBS)) continue;
            if (st == NEVO_OK) nevo_obs_stats_merge(obs, &task_stats[k]);
            nevo_obs_stats_free(&task_stats[k]);
        }
        free(task_stats);
    }
    free(tasks);
    free(results);
    return st;
}

NevoStatus nevo_algo_rollouts(NevoAlgo *a, const float *params, int n, int episodes, uint32_t generation,
                              const uint32_t *stream_ids, double *fitness, float *bc, NevoGenStats *stats,
                              NevoObsStats *obs, double obs_prob, NevoError *err) {
    return nevo_algo_rollouts_built(a, params, NULL, NULL, n, NULL, episodes, generation, stream_ids, fitness, bc,
                                    stats, obs, obs_prob, err);
}

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

void nevo_perturb_rows(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                       int stream) {
    nevo_kernels()->perturb(plus, minus, theta, sigma, eps, n, stream);
}

void nevo_weighted_sum(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1) {
    nevo_kernels()->weighted_sum(g, rows, w, m, k0, k1);
}
