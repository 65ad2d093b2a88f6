/* OpenAI evolution strategies (Salimans et al. 2017) and the novelty-search family
 * built on it (Conti et al. 2018): NS-ES, NSR-ES and NSRA-ES.
 *
 * State: a meta-population of M agents, each a mean theta with its own optimiser state
 * and its last measured reward and behaviour (plain ES: M = 1). Each generation:
 *  1. pick an agent: plain ES the only one; the NS family draws agent m with
 *     probability proportional to the novelty of its behaviour against the archive;
 *  2. n = population / 2 perturbations eps_i (shared noise-table slices named
 *     (ES_NOISE, g, i)); theta_m +- sigma eps_i are evaluated on the same episodes
 *     (common random numbers make each pair's difference less noisy);
 *  3. each of the 2n rollouts gets a weight w * rank(reward) + (1 - w) * rank(novelty)
 *     from centred ranks: w = 1 for ES, 0 for NS-ES, 1/2 for NSR-ES, adaptive for
 *     NSRA-ES (starts at ns.weight; +delta when the agent's reward improves, -delta
 *     after ns.patience generations without improvement);
 *  4. g = 1/(n sigma) sum_i (r+_i - r-_i) eps_i; the optimiser (Adam or SGD with
 *     momentum, OpenAI's forms) steps theta_m on -g + l2 * theta_m;
 *  5. the updated agent is evaluated on es.center_episodes common episodes: its reward
 *     is reported and, for the NS family, its mean behaviour joins the archive.
 * Observation-normalisation statistics gather a random fraction of the rollouts and are
 * applied to the (shared) policy after the update. Noise slices are read in place, and
 * with one episode per perturbation each perturbed theta is built as its episode
 * starts (nevo_evaluate_built), so no population matrix is kept; with several, the
 * population is built first, O(population x nparams). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "nevo/novelty.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

typedef struct Agent {
    float *theta;    /* (np) mean parameters */
    double *m, *v;   /* (np) optimiser moments (v unused by SGD) */
    long long t;     /* optimiser steps */
    double reward;   /* return of the last evaluation of theta */
    float bc[NEVO_ENV_MAX_BC];
} Agent;

typedef enum Mode { MODE_ES, MODE_NS, MODE_NSR, MODE_NSRA } Mode;

typedef struct ES {
    NevoAlgo base;
    Mode mode;
    int n_pairs, M, bc_dim;
    int used_pairs;     /* pairs in this generation's step (ARS top-b: b; else n_pairs) */
    int *pair_order;    /* (n_pairs) scratch for the top-b selection */
    double *shaped;     /* (2 n) returns minus es.reward_shift per step, for the update */
    double *pair_score; /* (n_pairs) */
    size_t np;
    Agent *agents;      /* (M) */
    int initialised;    /* NS family: agents evaluated and archived once */
    int best_agent;     /* highest last reward */
    NevoArchive archive;
    double w;           /* reward weight */
    double best_reward; /* NSRA-ES: best agent reward so far */
    int stagnation;     /* NSRA-ES: generations since it improved */
    NevoObsStats obs;   /* running observation statistics */
    float *pop;         /* (2 n, np), only with several episodes per perturbation; with
                           one, each is built as its episode starts (nevo_evaluate_built) */
    float *bcs;         /* (2 n, bc_dim) */
    int have_bcs;       /* bcs hold the last generation's behaviours (not part of the state) */
    double *grad;       /* (np) */
    const float **grad_rows; /* (n) the noise slices the gradient sums */
    double *grad_w;          /* (n) their weights */
    double *fitness, *ranks, *novelty, *nranks, *weights; /* (2 n) each */
} ES;

/* Perturbation i of generation gen: a slice of the shared noise table, read in place. */
static const float *noise_for(const ES *es, uint32_t gen, int i) {
    return nevo_noise_slice(es->base.noise, es->np, es->base.cfg->seed, NEVO_RNG_ES_NOISE, gen, (uint32_t)i, 0);
}

/* Evaluates agent m's theta on the common center episodes: its reward and behaviour. */
static NevoStatus evaluate_agent(ES *es, int m, uint32_t gen, NevoGenStats *stats, NevoError *err) {
    uint32_t id = NEVO_STREAM_CENTER;
    Agent *ag = &es->agents[m];
    return nevo_algo_rollouts(&es->base, ag->theta, 1, es->base.cfg->es.center_episodes, gen, &id, &ag->reward,
                              es->bc_dim > 0 ? ag->bc : NULL, stats, NULL, 0.0, err);
}

static int pick_agent(ES *es, uint32_t gen) {
    if (es->M == 1) return 0;
    double nov[1000], total = 0.0;
    float bcs[1000 * NEVO_ENV_MAX_BC];
    for (int m = 0; m < es->M; m++) memcpy(bcs + m * es->bc_dim, es->agents[m].bc, sizeof(float) * (size_t)es->bc_dim);
    nevo_novelty(&es->archive, NULL, 0, bcs, NULL, es->M, es->base.cfg->ns.k, NULL, nov);
    for (int m = 0; m < es->M; m++) total += nov[m];
    NevoRng rng;
    nevo_rng_init(&rng, es->base.cfg->seed, NEVO_RNG_SELECT, gen, 0, 0);
    double u = nevo_rng_uniform(&rng) * total;
    if (!(total > 0.0)) return (int)nevo_rng_below(&rng, (uint32_t)es->M);
    for (int m = 0; m < es->M; m++) {
        if (u < nov[m]) return m;
        u -= nov[m];
    }
    return es->M - 1;
}

/* One Adam step over every parameter, in double. Its sqrt and division, one element at
 * a time in the compiler's scalar loop, were 1.4% of a MinAtar ES run; vectorised, each
 * element goes through the same IEEE operations, so the bits are the same. */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void adam_step(float *restrict theta, double *restrict m, double *restrict v, const double *restrict grad,
                      size_t n, double scale, double l2, double b1, double b2, double step) {
    for (size_t k = 0; k < n; k++) {
        double g = -grad[k] * scale + l2 * theta[k];
        m[k] = b1 * m[k] + (1.0 - b1) * g;
        v[k] = b2 * v[k] + (1.0 - b2) * g * g;
        theta[k] = (float)(theta[k] - step * m[k] / (sqrt(v[k]) + 1e-8));
    }
}

static void optimiser_step(ES *es, Agent *ag) {
    const NevoConfig *cfg = es->base.cfg;
    double scale = 1.0 / (es->used_pairs * cfg->es.sigma);
    ag->t++;
    if (strcmp(cfg->es.optimizer, "adam") == 0) {
        double b1 = cfg->es.beta1, b2 = cfg->es.beta2;
        double step = cfg->es.lr * sqrt(1.0 - pow(b2, (double)ag->t)) / (1.0 - pow(b1, (double)ag->t));
        adam_step(ag->theta, ag->m, ag->v, es->grad, es->np, scale, cfg->es.l2, b1, b2, step);
    } else {
        double mom = cfg->es.momentum;
        for (size_t k = 0; k < es->np; k++) {
            double g = -es->grad[k] * scale + cfg->es.l2 * ag->theta[k];
            ag->m[k] = mom * ag->m[k] + (1.0 - mom) * g;
            ag->theta[k] = (float)(ag->theta[k] - cfg->es.lr * ag->m[k]);
        }
    }
}

static void update_best(ES *es) {
    for (int m = 0; m < es->M; m++)
        if (es->agents[m].reward > es->agents[es->best_agent].reward) es->best_agent = m;
}

/* Perturbation pair i: theta +- sigma * eps_i, rows 2i and 2i + 1. */
typedef struct PairJob {
    const ES *es;
    const Agent *ag;
    uint32_t gen;
    float sigma;
} PairJob;

/* Both rows of pair i into pop (pairs in parallel), streamed: the forward reads them
 * back from memory. */
static void build_pair(void *vctx, int i, int worker) {
    const PairJob *job = vctx;
    const ES *es = job->es;
    size_t np = es->np;
    const float *eps = noise_for(es, job->gen, i);
    float *plus = es->pop + (size_t)(2 * i) * np;
    nevo_perturb_rows(plus, plus + np, job->ag->theta, job->sigma, eps, np, 1);
}

/* nevo_evaluate_built's builder: perturbation net (pair net / 2, + for even, - for odd)
 * as its episode starts, into the cache its steps read it from. */
static void build_perturbation(void *vctx, int net, float *theta) {
    const PairJob *job = vctx;
    const float *eps = noise_for(job->es, job->gen, net / 2);
    nevo_perturb_rows(net % 2 ? NULL : theta, net % 2 ? theta : NULL, job->ag->theta, job->sigma, eps, job->es->np,
                      0);
}

/* grad[k] = sum_i (w+_i - w-_i) eps_i[k] over the pairs whose weight is not zero, over
 * parameter chunks in parallel; each element still sums over i in ascending order, so
 * the result does not depend on the thread count. */
#define GRAD_CHUNK 4096
typedef struct GradJob {
    ES *es;
    const float **rows; /* the noise slices of the pairs used, ascending */
    double *w;          /* their weights */
    int m;
} GradJob;

static void grad_chunk(void *vctx, int c, int worker) {
    const GradJob *job = vctx;
    size_t np = job->es->np, k0 = (size_t)c * GRAD_CHUNK, k1 = k0 + GRAD_CHUNK < np ? k0 + GRAD_CHUNK : np;
    double *g = job->es->grad;
    for (size_t k = k0; k < k1; k++) g[k] = 0.0;
    nevo_weighted_sum(g, job->rows, job->w, job->m, k0, k1);
}

/* ARS's refinements on the rollout weights (Mania et al. 2018): with top_directions b,
 * only the b pairs whose better rollout scores highest step (the others' weights are
 * zeroed); with raw rewards, the weights are divided by the standard deviation of the
 * rewards of the pairs used. Returns the number of pairs used. */
static int select_directions(ES *es, int raw) {
    const NevoConfig *cfg = es->base.cfg;
    int n = es->n_pairs, b = cfg->es.top_directions > 0 ? cfg->es.top_directions : n;
    if (b < n) {
        for (int i = 0; i < n; i++)
            es->pair_score[i] = fmax(es->weights[2 * i], es->weights[2 * i + 1]);
        nevo_rank_desc(es->pair_score, n, es->pair_order);
        for (int j = b; j < n; j++) es->weights[2 * es->pair_order[j]] = es->weights[2 * es->pair_order[j] + 1] = 0.0;
    }
    if (raw) {
        double sum = 0.0, sq = 0.0;
        for (int j = 0; j < b; j++) {
            int i = b < n ? es->pair_order[j] : j;
            sum += es->weights[2 * i] + es->weights[2 * i + 1];
        }
        double mean = sum / (2 * b);
        for (int j = 0; j < b; j++) {
            int i = b < n ? es->pair_order[j] : j;
            double d0 = es->weights[2 * i] - mean, d1 = es->weights[2 * i + 1] - mean;
            sq += d0 * d0 + d1 * d1;
        }
        double sd = sqrt(sq / (2 * b));
        if (sd > 0.0)
            for (int i = 0; i < 2 * n; i++) es->weights[i] /= sd;
    }
    return b;
}

static NevoStatus es_generation(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    ES *es = (ES *)a;
    const NevoConfig *cfg = a->cfg;
    uint32_t gen = (uint32_t)a->generation;
    int n = es->n_pairs;
    float sigma = (float)cfg->es.sigma;
    size_t np = es->np;
    NevoStatus st;

    if (es->mode != MODE_ES && !es->initialised) {
        /* the archive starts with the behaviours of the M initial agents */
        for (int m = 0; m < es->M; m++) {
            if ((st = evaluate_agent(es, m, gen, stats, err))) return st;
            nevo_archive_add(&es->archive, es->agents[m].bc);
        }
        es->best_reward = es->agents[0].reward;
        for (int m = 1; m < es->M; m++)
            if (es->agents[m].reward > es->best_reward) es->best_reward = es->agents[m].reward;
        update_best(es);
        es->initialised = 1;
    }
    int chosen = pick_agent(es, gen);
    Agent *ag = &es->agents[chosen];

    PairJob pj = {es, ag, gen, sigma};
    if (es->pop) nevo_pool_run(nevo_evaluator_pool(a->ev), n, build_pair, &pj);
    uint32_t *ids = nevo_alloc(sizeof(uint32_t) * (size_t)(2 * n));
    for (int i = 0; i < 2 * n; i++) ids[i] = (uint32_t)(i / 2);
    NevoObsStats gathered;
    if (cfg->es.obs_norm) nevo_obs_stats_init(&gathered, es->obs.dim);
    int shift = cfg->es.reward_shift != 0.0;
    a->reward_shift = cfg->es.reward_shift;
    a->shaped = shift ? es->shaped : NULL;
    a->pairs = es->pop == NULL; /* built as their episodes start */
    st = nevo_algo_rollouts_built(a, es->pop, es->pop ? NULL : build_perturbation, &pj, 2 * n, NULL, cfg->episodes,
                                  gen, ids, es->fitness, es->bc_dim > 0 ? es->bcs : NULL, stats,
                                  cfg->es.obs_norm ? &gathered : NULL, cfg->es.obs_norm_prob, err);
    a->reward_shift = 0.0;
    a->shaped = NULL;
    a->pairs = 0;
    free(ids);
    if (st) {
        if (cfg->es.obs_norm) nevo_obs_stats_free(&gathered);
        return st;
    }
    es->have_bcs = es->bc_dim > 0;

    double best = es->fitness[0], sum = 0.0;
    for (int i = 0; i < 2 * n; i++) {
        if (es->fitness[i] > best) best = es->fitness[i];
        sum += es->fitness[i];
    }
    stats->best = best;
    stats->mean = sum / (2 * n);
    stats->median = nevo_median(es->fitness, 2 * n);

    /* weights from centred ranks of reward and (NS family) novelty */
    const double *train = shift ? es->shaped : es->fitness; /* what the update sees */
    nevo_centered_ranks(train, 2 * n, es->ranks);
    double w = es->mode == MODE_ES ? 1.0 : es->mode == MODE_NS ? 0.0 : es->mode == MODE_NSR ? 0.5 : es->w;
    if (es->mode != MODE_ES) {
        nevo_novelty(&es->archive, NULL, 0, es->bcs, NULL, 2 * n, cfg->ns.k, nevo_evaluator_pool(a->ev), es->novelty);
        nevo_centered_ranks(es->novelty, 2 * n, es->nranks);
        double ns_sum = 0.0;
        for (int i = 0; i < 2 * n; i++) ns_sum += es->novelty[i];
        stats->novelty_mean = ns_sum / (2 * n);
    }
    int raw = strcmp(cfg->es.shaping, "reward_std") == 0;
    for (int i = 0; i < 2 * n; i++) {
        double r = raw ? train[i] : es->ranks[i];
        es->weights[i] = es->mode == MODE_ES ? r : w * r + (1.0 - w) * es->nranks[i];
    }
    es->used_pairs = select_directions(es, raw);
    GradJob gj = {es, es->grad_rows, es->grad_w, 0};
    for (int i = 0; i < n; i++) {
        double wi = es->weights[2 * i] - es->weights[2 * i + 1];
        if (wi == 0.0) continue; /* a pair that does not step (ARS top directions, ties) */
        gj.rows[gj.m] = noise_for(es, gen, i);
        gj.w[gj.m++] = wi;
    }
    nevo_pool_run(nevo_evaluator_pool(a->ev), (int)((np + GRAD_CHUNK - 1) / GRAD_CHUNK), grad_chunk, &gj);
    optimiser_step(es, ag);
    if (cfg->es.obs_norm) {
        nevo_obs_stats_merge(&es->obs, &gathered);
        nevo_obs_stats_free(&gathered);
        nevo_obs_stats_apply(&es->obs, a->policy);
    }

    /* the updated agent's reward (and behaviour, archived) on the common episodes */
    if (cfg->es.center_episodes > 0) {
        if ((st = evaluate_agent(es, chosen, gen, stats, err))) return st;
        stats->elite_mean = ag->reward;
        stats->bc_dim = es->bc_dim;
        if (es->bc_dim > 0) memcpy(stats->bc, ag->bc, sizeof(float) * (size_t)es->bc_dim);
    } else {
        ag->reward = stats->mean;
        stats->elite_mean = stats->mean;
    }
    if (es->mode != MODE_ES) {
        nevo_archive_add(&es->archive, ag->bc);
        stats->archive_size = es->archive.n;
    }
    if (es->mode == MODE_NSRA) {
        if (ag->reward > es->best_reward) {
            es->best_reward = ag->reward;
            es->stagnation = 0;
            es->w = fmin(1.0, es->w + cfg->ns.weight_delta);
        } else if (++es->stagnation >= cfg->ns.patience) {
            es->w = fmax(0.0, es->w - cfg->ns.weight_delta);
            es->stagnation = 0;
        }
    }
    stats->reward_weight = es->mode == MODE_NSRA ? es->w : w;
    update_best(es);
    return NEVO_OK;
}

/* The agent with the best last reward (plain ES: the mean). */
static void es_best(const NevoAlgo *a, float *theta) {
    const ES *es = (const ES *)a;
    memcpy(theta, es->agents[es->best_agent].theta, sizeof(float) * es->np);
}

static void es_save(const NevoAlgo *a, NevoBuf *b) {
    const ES *es = (const ES *)a;
    nevo_buf_u64(b, (uint64_t)es->np);
    nevo_buf_u32(b, (uint32_t)es->M);
    for (int m = 0; m < es->M; m++) {
        const Agent *ag = &es->agents[m];
        nevo_buf_f32s(b, ag->theta, es->np);
        nevo_buf_f64s(b, ag->m, es->np);
        nevo_buf_f64s(b, ag->v, es->np);
        nevo_buf_u64(b, (uint64_t)ag->t);
        nevo_buf_f64(b, ag->reward);
        nevo_buf_f32s(b, ag->bc, NEVO_ENV_MAX_BC);
    }
    nevo_buf_u32(b, (uint32_t)es->initialised);
    nevo_buf_u32(b, (uint32_t)es->best_agent);
    nevo_buf_f64(b, es->w);
    nevo_buf_f64(b, es->best_reward);
    nevo_buf_u32(b, (uint32_t)es->stagnation);
    nevo_buf_u32(b, (uint32_t)es->obs.dim);
    nevo_buf_f64(b, es->obs.count);
    nevo_buf_f64s(b, es->obs.sum, (size_t)es->obs.dim);
    nevo_buf_f64s(b, es->obs.sumsq, (size_t)es->obs.dim);
    if (es->mode != MODE_ES) nevo_archive_save(&es->archive, b);
}

static NevoStatus es_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    ES *es = (ES *)a;
    if (nevo_read_u64(r) != es->np)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state has a different parameter count than the policy");
    if ((int)nevo_read_u32(r) != es->M)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state has a different number of agents");
    for (int m = 0; m < es->M; m++) {
        Agent *ag = &es->agents[m];
        nevo_read_f32s(r, ag->theta, es->np);
        nevo_read_f64s(r, ag->m, es->np);
        nevo_read_f64s(r, ag->v, es->np);
        ag->t = (long long)nevo_read_u64(r);
        ag->reward = nevo_read_f64(r);
        nevo_read_f32s(r, ag->bc, NEVO_ENV_MAX_BC);
    }
    es->initialised = (int)nevo_read_u32(r);
    es->best_agent = (int)nevo_read_u32(r);
    es->w = nevo_read_f64(r);
    es->best_reward = nevo_read_f64(r);
    es->stagnation = (int)nevo_read_u32(r);
    if ((int)nevo_read_u32(r) != es->obs.dim || es->best_agent >= es->M)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state is inconsistent with the config");
    es->obs.count = nevo_read_f64(r);
    nevo_read_f64s(r, es->obs.sum, (size_t)es->obs.dim);
    nevo_read_f64s(r, es->obs.sumsq, (size_t)es->obs.dim);
    if (es->mode != MODE_ES && !nevo_archive_load(&es->archive, r))
        return nevo_error(err, NEVO_ERR_CORRUPT, "novelty archive is truncated");
    if (!nevo_reader_ok(r, false)) return nevo_error(err, NEVO_ERR_CORRUPT, "ES state is truncated");
    if (a->cfg->es.obs_norm) nevo_obs_stats_apply(&es->obs, a->policy);
    return NEVO_OK;
}

static void es_free(NevoAlgo *a) {
    ES *es = (ES *)a;
    for (int m = 0; m < es->M; m++) {
        free(es->agents[m].theta);
        free(es->agents[m].m);
        free(es->agents[m].v);
    }
    free(es->agents);
    free(es->pop);
    free(es->bcs);
    free(es->grad);
    free(es->grad_rows);
    free(es->grad_w);
    free(es->fitness);
    free(es->ranks);
    free(es->novelty);
    free(es->nranks);
    free(es->weights);
    free(es->pair_order);
    free(es->shaped);
    free(es->pair_score);
    nevo_archive_free(&es->archive);
    nevo_obs_stats_free(&es->obs);
    free(es);
}

static const float *es_behaviours(const NevoAlgo *a, int *n) {
    const ES *es = (const ES *)a;
    *n = es->have_bcs ? 2 * es->n_pairs : 0;
    return *n ? es->bcs : NULL;
}

static const float *es_archive(const NevoAlgo *a, int *n) {
    const ES *es = (const ES *)a;
    *n = es->mode != MODE_ES ? es->archive.n : 0;
    return *n ? es->archive.points : NULL;
}

static const NevoAlgoOps es_ops = {es_generation, es_best, es_save, es_load, es_free, es_behaviours, es_archive};

NevoStatus nevo_es_new(const NevoAlgo *base, NevoAlgo **out, NevoError *err) {
    const NevoConfig *cfg = base->cfg;
    NevoPolicy *policy = base->policy;
    ES *es = nevo_alloc(sizeof *es);
    es->base = *base;
    es->base.ops = &es_ops;
    es->mode = strcmp(cfg->algo, "ns-es") == 0    ? MODE_NS
               : strcmp(cfg->algo, "nsr-es") == 0 ? MODE_NSR
               : strcmp(cfg->algo, "nsra-es") == 0 ? MODE_NSRA
                                                   : MODE_ES;
    es->M = es->mode == MODE_ES ? 1 : cfg->ns.meta_population;
    es->bc_dim = nevo_env_spec(base->env)->bc_dim;
    es->n_pairs = cfg->population / 2;
    es->np = policy->nparams;
    es->agents = nevo_alloc(sizeof(Agent) * (size_t)es->M);
    for (int m = 0; m < es->M; m++) {
        Agent *ag = &es->agents[m];
        ag->theta = nevo_alloc_aligned(sizeof(float) * es->np);
        nevo_policy_init_params(policy, base->noise, cfg->seed, 0, (uint32_t)m, ag->theta);
        ag->m = nevo_alloc(sizeof(double) * es->np);
        ag->v = nevo_alloc(sizeof(double) * es->np);
    }
    es->w = cfg->ns.weight;
    if (cfg->episodes > 1) es->pop = nevo_alloc_aligned(sizeof(float) * es->np * (size_t)(2 * es->n_pairs));
    es->bcs = nevo_alloc(sizeof(float) * (size_t)(2 * es->n_pairs) * (size_t)(es->bc_dim > 0 ? es->bc_dim : 1));
    es->grad = nevo_alloc(sizeof(double) * es->np);
    es->grad_rows = nevo_alloc(sizeof(const float *) * (size_t)es->n_pairs);
    es->grad_w = nevo_alloc(sizeof(double) * (size_t)es->n_pairs);
    size_t n2 = sizeof(double) * (size_t)(2 * es->n_pairs);
    es->fitness = nevo_alloc(n2);
    es->ranks = nevo_alloc(n2);
    es->novelty = nevo_alloc(n2);
    es->nranks = nevo_alloc(n2);
    es->weights = nevo_alloc(n2);
    es->pair_order = nevo_alloc(sizeof(int) * (size_t)es->n_pairs);
    es->shaped = nevo_alloc(n2);
    es->pair_score = nevo_alloc(sizeof(double) * (size_t)es->n_pairs);
    es->used_pairs = es->n_pairs;
    nevo_archive_init(&es->archive, es->bc_dim);
    nevo_obs_stats_init(&es->obs, policy->obs_dim);
    (void)err;
    *out = &es->base;
    return NEVO_OK;
}
