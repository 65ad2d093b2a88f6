/* OpenAI evolution strategies (Salimans et al. 2017).
 *
 * Each generation: n = population / 2 noise vectors eps_i from the streams
 * (ES_NOISE, g, i); theta + sigma eps_i and theta - sigma eps_i are evaluated on the
 * same episodes (common random numbers make the pair's difference less noisy); all 2n
 * fitnesses become centred ranks; g = 1/(n sigma) sum_i (r+_i - r-_i) eps_i; the
 * optimiser (Adam or SGD with momentum, OpenAI's forms) steps on -g + l2 * theta.
 * Observation normalisation statistics gather a random fraction of the rollouts and
 * are applied to the policy after the update. Noise is regenerated for the gradient
 * rather than stored, so memory stays O(population x nparams) for the population only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "nevo/rng.h"

typedef struct ES {
    NevoAlgo base;
    int n_pairs;
    size_t np;
    float *theta;       /* (np) current mean */
    double *m, *v;      /* (np) optimiser moments (v unused by SGD) */
    long long t;        /* optimiser steps */
    NevoObsStats obs;   /* running observation statistics */
    float *pop;         /* (2 n, np) */
    double *grad;       /* (np) */
    double *fitness;    /* (2 n) */
    double *ranks;      /* (2 n) */
} ES;

/* Perturbation i of generation gen: a slice of the shared noise table, read in place. */
static const float *noise_for(const ES *es, uint32_t gen, int i) {
    return nevo_noise_slice(es->base.noise, es->np, es->base.cfg->seed, NEVO_RNG_ES_NOISE, gen, (uint32_t)i, 0);
}

static NevoStatus es_generation(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    ES *es = (ES *)a;
    const NevoConfig *cfg = a->cfg;
    uint32_t gen = (uint32_t)a->generation;
    int n = es->n_pairs;
    float sigma = (float)cfg->es.sigma;
    size_t np = es->np;

    for (int i = 0; i < n; i++) {
        const float *eps = noise_for(es, gen, i);
        float *plus = es->pop + (size_t)(2 * i) * np;
        float *minus = plus + np;
        for (size_t k = 0; k < np; k++) {
            float d = sigma * eps[k];
            plus[k] = es->theta[k] + d;
            minus[k] = es->theta[k] - d;
        }
    }
    uint32_t *ids = nevo_alloc(sizeof(uint32_t) * (size_t)(2 * n));
    for (int i = 0; i < 2 * n; i++) ids[i] = (uint32_t)(i / 2);
    NevoObsStats gathered;
    if (cfg->es.obs_norm) nevo_obs_stats_init(&gathered, es->obs.dim);
    NevoStatus st = nevo_algo_rollouts(a, es->pop, 2 * n, cfg->episodes, gen, ids, es->fitness, stats,
                                       cfg->es.obs_norm ? &gathered : NULL, cfg->es.obs_norm_prob, err);
    free(ids);
    if (st) {
        if (cfg->es.obs_norm) nevo_obs_stats_free(&gathered);
        return st;
    }

    double best = es->fitness[0], sum = 0.0;
    for (int i = 0; i < 2 * n; i++) {
        if (es->fitness[i] > best) best = es->fitness[i];
        sum += es->fitness[i];
    }
    stats->best = best;
    stats->mean = sum / (2 * n);
    stats->median = nevo_median(es->fitness, 2 * n);

    /* gradient estimate from centred ranks */
    nevo_centered_ranks(es->fitness, 2 * n, es->ranks);
    memset(es->grad, 0, sizeof(double) * np);
    for (int i = 0; i < n; i++) {
        double w = es->ranks[2 * i] - es->ranks[2 * i + 1];
        if (w == 0.0) continue;
        const float *eps = noise_for(es, gen, i);
        for (size_t k = 0; k < np; k++) es->grad[k] += w * eps[k];
    }
    double scale = 1.0 / (n * cfg->es.sigma);
    es->t++;
    if (strcmp(cfg->es.optimizer, "adam") == 0) {
        double b1 = cfg->es.beta1, b2 = cfg->es.beta2;
        double step = cfg->es.lr * sqrt(1.0 - pow(b2, (double)es->t)) / (1.0 - pow(b1, (double)es->t));
        for (size_t k = 0; k < np; k++) {
            double g = -es->grad[k] * scale + cfg->es.l2 * es->theta[k];
            es->m[k] = b1 * es->m[k] + (1.0 - b1) * g;
            es->v[k] = b2 * es->v[k] + (1.0 - b2) * g * g;
            es->theta[k] = (float)(es->theta[k] - step * es->m[k] / (sqrt(es->v[k]) + 1e-8));
        }
    } else {
        double mom = cfg->es.momentum;
        for (size_t k = 0; k < np; k++) {
            double g = -es->grad[k] * scale + cfg->es.l2 * es->theta[k];
            es->m[k] = mom * es->m[k] + (1.0 - mom) * g;
            es->theta[k] = (float)(es->theta[k] - cfg->es.lr * es->m[k]);
        }
    }
    if (cfg->es.obs_norm) {
        nevo_obs_stats_merge(&es->obs, &gathered);
        nevo_obs_stats_free(&gathered);
        nevo_obs_stats_apply(&es->obs, a->policy);
    }

    /* report the new mean on common episodes */
    if (cfg->es.center_episodes > 0) {
        uint32_t id = NEVO_STREAM_CENTER;
        double center;
        st = nevo_algo_rollouts(a, es->theta, 1, cfg->es.center_episodes, gen, &id, &center, stats,
                                NULL, 0.0, err);
        if (st) return st;
        stats->elite_mean = center;
    } else {
        stats->elite_mean = stats->mean;
    }
    return NEVO_OK;
}

static void es_best(const NevoAlgo *a, float *theta) {
    const ES *es = (const ES *)a;
    memcpy(theta, es->theta, sizeof(float) * es->np);
}

static void es_save(const NevoAlgo *a, NevoBuf *b) {
    const ES *es = (const ES *)a;
    nevo_buf_u64(b, (uint64_t)es->np);
    nevo_buf_f32s(b, es->theta, es->np);
    nevo_buf_f64s(b, es->m, es->np);
    nevo_buf_f64s(b, es->v, es->np);
    nevo_buf_u64(b, (uint64_t)es->t);
    nevo_buf_u32(b, (uint32_t)es->obs.dim);
    nevo_buf_f64(b, es->obs.count);
    nevo_buf_f64s(b, es->obs.sum, (size_t)es->obs.dim);
    nevo_buf_f64s(b, es->obs.sumsq, (size_t)es->obs.dim);
}

static NevoStatus es_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    ES *es = (ES *)a;
    if (nevo_read_u64(r) != es->np)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state has a different parameter count than the policy");
    nevo_read_f32s(r, es->theta, es->np);
    nevo_read_f64s(r, es->m, es->np);
    nevo_read_f64s(r, es->v, es->np);
    es->t = (long long)nevo_read_u64(r);
    if ((int)nevo_read_u32(r) != es->obs.dim)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state has a different observation size");
    es->obs.count = nevo_read_f64(r);
    nevo_read_f64s(r, es->obs.sum, (size_t)es->obs.dim);
    nevo_read_f64s(r, es->obs.sumsq, (size_t)es->obs.dim);
    if (!nevo_reader_ok(r, false)) return nevo_error(err, NEVO_ERR_CORRUPT, "ES state is truncated");
    if (a->cfg->es.obs_norm) nevo_obs_stats_apply(&es->obs, a->policy);
    return NEVO_OK;
}

static void es_free(NevoAlgo *a) {
    ES *es = (ES *)a;
    free(es->theta);
    free(es->m);
    free(es->v);
    free(es->pop);
    free(es->grad);
    free(es->fitness);
    free(es->ranks);
    nevo_obs_stats_free(&es->obs);
    free(es);
}

static const NevoAlgoOps es_ops = {es_generation, es_best, es_save, es_load, es_free};

NevoStatus nevo_es_new(const NevoAlgo *base, NevoAlgo **out, NevoError *err) {
    ES *es = nevo_alloc(sizeof *es);
    es->base = *base;
    es->base.ops = &es_ops;
    const NevoConfig *cfg = base->cfg;
    NevoPolicy *policy = base->policy;
    es->n_pairs = cfg->population / 2;
    es->np = policy->nparams;
    es->theta = nevo_alloc_aligned(sizeof(float) * es->np);
    nevo_policy_init_params(policy, base->noise, cfg->seed, 0, 0, es->theta);
    es->m = nevo_alloc(sizeof(double) * es->np);
    es->v = nevo_alloc(sizeof(double) * es->np);
    es->pop = nevo_alloc_aligned(sizeof(float) * es->np * (size_t)(2 * es->n_pairs));
    es->grad = nevo_alloc(sizeof(double) * es->np);
    es->fitness = nevo_alloc(sizeof(double) * (size_t)(2 * es->n_pairs));
    es->ranks = nevo_alloc(sizeof(double) * (size_t)(2 * es->n_pairs));
    nevo_obs_stats_init(&es->obs, policy->obs_dim);
    (void)err;
    *out = &es->base;
    return NEVO_OK;
}
