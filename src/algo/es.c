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
 *     from centred ranks (or z-scores with es.shaping = reward_std): w = 1 for ES, 0 for
 *     NS-ES, 1/2 for NSR-ES, adaptive for NSRA-ES (starts at ns.weight; +delta when the
 *     agent's reward improves, -delta after ns.patience generations without
 *     improvement);
 *  4. g = 1/(n sigma) sum_i (r+_i - r-_i) eps_i; the optimiser (Adam or SGD with
 *     momentum, OpenAI's forms) steps theta_m on -g + l2 * theta_m;
 *  5. the updated agent is evaluated on es.center_episodes common episodes: its reward
 *     is reported and, for the NS family, its mean behaviour joins the archive.
 * Observation-normalisation statistics gather a random fraction of the rollouts and are
 * applied to the (shared) policy after the update. The perturbations travel as recipes
 * (the mean, the slice's name, the sign): where they are built is the evaluator's
 * business; the gradient reads the noise slices in place.
 *
 * As stages: seed (NS family, once: evaluate the M agents, archive their behaviours),
 * pick, -> evaluate the perturbations, weigh (ranks, novelty, ARS's choices), step
 * (gradient, optimiser, observation statistics), -> evaluate the updated mean on the
 * center episodes, adapt (archive, NSRA-ES's weight, the best agent). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "nevo/novelty.h"
#include "nevo/optim.h"
#include "nevo/params.h"
#include "nevo/rng.h"

typedef struct Agent {
    float *theta;    /* (np) mean parameters: row m of the agents' matrix */
    NevoOptim *opt;  /* its optimiser and moments */
    double reward;   /* return of the last evaluation of theta */
    float bc[NEVO_ENV_MAX_BC];
} Agent;

enum { PHASE_SEED, PHASE_PERTURB, PHASE_CENTER };

typedef struct ES {
    NevoAlgo base;
    int mode;           /* NEVO_ES_PLAIN, _NS, _NSR, _NSRA */
    int obs_norm;       /* the policy normalises its observations (nevo_algo_obs_norm) */
    int n_pairs, M, bc_dim;
    int phase;
    uint32_t gen;       /* the generation in progress */
    int chosen;         /* its agent */
    double w_used;      /* the reward weight its update used */
    float *thetas;      /* (M, np) the agents' means */
    uint32_t *pair_ids; /* (2 n) i / 2: a pair's rollouts face the same episodes */
    uint32_t *center_ids; /* (M) NEVO_STREAM_CENTER */
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
    float *bcs;         /* (2 n, bc_dim) */
    int have_bcs;       /* bcs hold the last generation's behaviours (not part of the state) */
    double *grad;       /* (np) */
    float *grad_eps;    /* low rank: (threads, GRAD_CHUNK) the pairs' vectors over a chunk */
    const float **grad_rows; /* (n) the noise slices the gradient sums */
    double *grad_w;          /* (n) their weights */
    double *fitness, *ranks, *novelty, *nranks, *weights; /* (2 n) each */
} ES;

/* Perturbation i of generation gen: a slice of the shared noise table, read in place
 * (low rank: its compact slice, which the gradient expands). */
static const float *noise_for(const ES *es, uint32_t gen, int i) {
    int rank = es->base.cfg->es.rank;
    size_t n = rank > 0 ? nevo_lowrank_floats(es->base.policy, rank) : es->np;
    return nevo_noise_slice(es->base.noise, n, es->base.cfg->seed, NEVO_RNG_ES_NOISE, gen, (uint32_t)i, 0);
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

/* generation gen's perturbation std (the schedule's) */
static double es_sigma(const NevoConfig *cfg, uint32_t gen) {
    return nevo_algo_sigma(cfg->es.sigma, cfg->es.sigma_decay, cfg->es.sigma_min, gen);
}

/* es->grad is an ascent direction: the optimiser descends along it times -scale
 * ((-a) b and a (-b) round alike, so this is OpenAI's -grad scale to the bit), sigma the
 * generation's. */
static void optimiser_step(ES *es, Agent *ag) {
    double scale = 1.0 / (es->used_pairs * es_sigma(es->base.cfg, es->gen));
    nevo_optim_step(ag->opt, ag->theta, es->grad, -scale);
}

/* An agent's optimiser: es.optimizer with es.l2 as weight decay; SGD's momentum is
 * OpenAI's moving average (dampening = momentum), Adam's eps OpenAI's 1e-8. */
static NevoStatus new_optimiser(const NevoConfig *cfg, size_t np, NevoOptim **out, NevoError *err) {
    NevoOptimConfig oc = {0};
    snprintf(oc.name, sizeof oc.name, "%s", cfg->es.optimizer);
    oc.lr = cfg->es.lr;
    oc.momentum = cfg->es.momentum;
    oc.beta1 = cfg->es.beta1;
    oc.beta2 = cfg->es.beta2;
    oc.eps = 1e-8;
    oc.weight_decay = cfg->es.l2;
    NevoStatus st = nevo_optim_new(&oc, np, out, err);
    if (st != NEVO_OK) return st;
    (*out)->dampening = (*out)->momentum;
    return NEVO_OK;
}

static void update_best(ES *es) {
    for (int m = 0; m < es->M; m++)
        if (es->agents[m].reward > es->agents[es->best_agent].reward) es->best_agent = m;
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
    const ES *es = job->es;
    size_t np = es->np, k0 = (size_t)c * GRAD_CHUNK, k1 = k0 + GRAD_CHUNK < np ? k0 + GRAD_CHUNK : np;
    double *g = es->grad;
    for (size_t k = k0; k < k1; k++) g[k] = 0.0;
    int rank = es->base.cfg->es.rank;
    if (rank == 0) {
        nevo_weighted_sum(g, job->rows, job->w, job->m, k0, k1);
        return;
    }
    /* low rank: each pair's full vector over the chunk, expanded from its compact slice,
     * added in pair order as the full-rank sum adds its slices */
    float *eps = es->grad_eps + (size_t)worker * GRAD_CHUNK;
    for (int i = 0; i < job->m; i++) {
        nevo_lowrank_expand(es->base.policy, rank, job->rows[i], eps, k0, k1);
        const float *row = eps;
        nevo_weighted_sum(g + k0, &row, &job->w[i], 1, 0, k1 - k0);
    }
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

static void es_ask(NevoAlgo *a) {
    ES *es = (ES *)a;
    const NevoConfig *cfg = a->cfg;
    NevoTaskSet *ts = &a->ts;
    if (es->phase == PHASE_PERTURB) {
        /* pick, then agent theta +- sigma eps_i as networks 2i and 2i + 1 */
        es->gen = (uint32_t)a->generation;
        es->chosen = pick_agent(es, es->gen);
        NevoNet *nets = nevo_algo_tasks(a, 2 * es->n_pairs, cfg->episodes, es->gen, es->pair_ids);
        for (int j = 0; j < 2 * es->n_pairs; j++)
            nets[j] = (NevoNet){.kind = cfg->es.rank == 0 ? NEVO_NET_PERTURBED
                                        : cfg->es.factored ? NEVO_NET_FACTORED : NEVO_NET_LOWRANK, .base = 0,
                                .purpose = NEVO_RNG_ES_NOISE, .generation = es->gen, .individual = (uint32_t)(j / 2),
                                .sigma = (float)es_sigma(cfg, es->gen), .sign = j % 2 ? -1 : 1,
                                .rank = (uint32_t)cfg->es.rank};
        if (es->obs_norm) nevo_algo_record_obs(a, es->gen, cfg->es.obs_norm_prob);
    } else {
        /* the M agents (seed) or the updated one (center) on the common episodes */
        es->gen = (uint32_t)a->generation;
        int n = es->phase == PHASE_SEED ? es->M : 1;
        NevoNet *nets = nevo_algo_tasks(a, n, cfg->es.center_episodes, es->gen, es->center_ids);
        for (int m = 0; m < n; m++) nets[m] = (NevoNet){.kind = NEVO_NET_BASE, .base = m};
    }
    /* the bases: every agent to seed, else only the chosen one (what travels is its mean) */
    ts->n_bases = es->phase == PHASE_SEED ? es->M : 1;
    ts->bases = es->phase == PHASE_SEED ? es->thetas : es->agents[es->chosen].theta;
    ts->base_stride = es->np;
}

/* seed (NS family, once): the archive starts with the behaviours of the M agents */
static void es_seed(ES *es, const NevoEpisode *results) {
    NevoAlgo *a = &es->base;
    double *reward = es->fitness; /* (M <= 2 n) scratch */
    nevo_algo_net_means(a, results, a->cfg->es.center_episodes, reward, NULL, 0.0, es->bcs);
    for (int m = 0; m < es->M; m++) {
        es->agents[m].reward = reward[m];
        memcpy(es->agents[m].bc, es->bcs + (size_t)m * es->bc_dim, sizeof(float) * (size_t)es->bc_dim);
        nevo_archive_add(&es->archive, es->agents[m].bc);
    }
    es->best_reward = es->agents[0].reward;
    for (int m = 1; m < es->M; m++)
        if (es->agents[m].reward > es->best_reward) es->best_reward = es->agents[m].reward;
    update_best(es);
    es->initialised = 1;
}

/* z[i] = (x[i] - mean) / sd over n values (sd 0: every z is 0) */
static void zscores(const double *x, int n, double *z) {
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < n; i++) sum += x[i];
    double mean = sum / n;
    for (int i = 0; i < n; i++) sq += (x[i] - mean) * (x[i] - mean);
    double sd = sqrt(sq / n);
    for (int i = 0; i < n; i++) z[i] = sd > 0.0 ? (x[i] - mean) / sd : 0.0;
}

/* weigh: each rollout's weight from reward and (NS family) novelty, as centred ranks or,
 * with reward_std, raw rewards (ES) or z-scores (NS family), then ARS's choice of
 * directions; returns the reward weight used */
static double es_weigh(ES *es, const double *train) {
    NevoAlgo *a = &es->base;
    const NevoConfig *cfg = a->cfg;
    int n2 = 2 * es->n_pairs;
    /* reward_std: ARS's raw rewards for plain ES; in the NS family reward and novelty each
     * as z-scores over the generation's rollouts, comparable the way ranks make them */
    int raw = strcmp(cfg->es.shaping, "reward_std") == 0, ars = raw && es->mode == NEVO_ES_PLAIN;
    void (*shape)(const double *, int, double *) = raw ? zscores : nevo_centered_ranks;
    if (!ars) shape(train, n2, es->ranks);
    double w = es->mode == NEVO_ES_PLAIN ? 1.0 : es->mode == NEVO_ES_NS ? 0.0 : es->mode == NEVO_ES_NSR ? 0.5 : es->w;
    if (es->mode != NEVO_ES_PLAIN) {
        nevo_novelty(&es->archive, NULL, 0, es->bcs, NULL, n2, cfg->ns.k, a->pool, es->novelty);
        shape(es->novelty, n2, es->nranks);
        double ns_sum = 0.0;
        for (int i = 0; i < n2; i++) ns_sum += es->novelty[i];
        a->stats.novelty_mean = ns_sum / n2;
    }
    for (int i = 0; i < n2; i++) {
        double r = ars ? train[i] : es->ranks[i];
        es->weights[i] = es->mode == NEVO_ES_PLAIN ? r : w * r + (1.0 - w) * es->nranks[i];
    }
    es->used_pairs = select_directions(es, ars);
    return w;
}

/* The cosine between the step's direction (es->grad, an ascent direction) and the true
 * gradient of the fitness (minus the mean loss) at theta over the batches the
 * perturbations were scored on (their episodes' batches, averaged), as Zhang et al.
 * measured ES against SGD. */
static void measure_cosine(ES *es, const float *theta) {
    NevoAlgo *a = &es->base;
    const NevoDataView *d = a->data;
    int episodes = a->cfg->episodes, m = a->cfg->data.fitness_batch;
    if (m <= 0 || m > d->n) m = d->n;
    double *g = nevo_alloc(sizeof(double) * es->np), *sum = nevo_alloc(sizeof(double) * es->np);
    int *idx = nevo_alloc(sizeof(int) * (size_t)d->n);
    NevoError err;
    int ok = 1;
    for (int e = 0; e < episodes && ok; e++) { /* network 0's episodes: every network faces the same batches */
        nevo_supervised_batch(a->ts.tasks[e].seed, d->n, a->cfg->data.fitness_batch, idx);
        ok = nevo_supervised_gradient(a->policy, theta, d, idx, m, a->pool, g, NULL, &err) == NEVO_OK;
        for (size_t k = 0; k < es->np; k++) sum[k] += g[k];
    }
    double dot = 0.0, n1 = 0.0, n2 = 0.0;
    for (size_t k = 0; ok && k < es->np; k++) {
        dot += es->grad[k] * -sum[k];
        n1 += es->grad[k] * es->grad[k];
        n2 += sum[k] * sum[k];
    }
    a->stats.has_grad_cosine = 1;
    a->stats.grad_cosine = ok && n1 > 0.0 && n2 > 0.0 ? dot / sqrt(n1 * n2) : NAN;
    free(g);
    free(sum);
    free(idx);
}

/* step: the gradient over the pairs that step, the optimiser, and the observation
 * statistics gathered by the rollouts (merged in task order) applied to the policy */
static void es_step(ES *es, const NevoObsStats *task_stats) {
    NevoAlgo *a = &es->base;
    GradJob gj = {es, es->grad_rows, es->grad_w, 0};
    for (int i = 0; i < es->n_pairs; i++) {
        double wi = es->weights[2 * i] - es->weights[2 * i + 1];
        if (wi == 0.0) continue; /* a pair that does not step (ARS top directions, ties) */
        gj.rows[gj.m] = noise_for(es, es->gen, i);
        gj.w[gj.m++] = wi;
    }
    nevo_pool_run(a->pool, (int)((es->np + GRAD_CHUNK - 1) / GRAD_CHUNK), grad_chunk, &gj);
    if (a->data && a->cfg->es.grad_cosine) measure_cosine(es, es->agents[es->chosen].theta);
    optimiser_step(es, &es->agents[es->chosen]);
    if (es->obs_norm) {
        NevoObsStats gathered;
        nevo_obs_stats_init(&gathered, es->obs.dim);
        for (int k = 0; k < a->ts.n_tasks; k++)
            if (a->ts.tasks[k].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_merge(&gathered, &task_stats[k]);
        nevo_obs_stats_merge(&es->obs, &gathered);
        nevo_obs_stats_free(&gathered);
        nevo_obs_stats_apply(&es->obs, a->policy);
    }
}

/* adapt: the updated agent's reward and behaviour into the archive, NSRA-ES's reward
 * weight, the best agent */
static void es_adapt(ES *es) {
    NevoAlgo *a = &es->base;
    const NevoConfig *cfg = a->cfg;
    Agent *ag = &es->agents[es->chosen];
    if (es->mode != NEVO_ES_PLAIN) {
        nevo_archive_add(&es->archive, ag->bc);
        a->stats.archive_size = es->archive.n;
    }
    if (es->mode == NEVO_ES_NSRA) {
        if (ag->reward > es->best_reward) {
            es->best_reward = ag->reward;
            es->stagnation = 0;
            es->w = fmin(1.0, es->w + cfg->ns.weight_delta);
        } else if (++es->stagnation >= cfg->ns.patience) {
            es->w = fmax(0.0, es->w - cfg->ns.weight_delta);
            es->stagnation = 0;
        }
    }
    a->stats.reward_weight = es->mode == NEVO_ES_NSRA ? es->w : es->w_used;
    update_best(es);
}

static int es_tell(NevoAlgo *a, const NevoEpisode *results, const NevoObsStats *task_stats,
                   const NevoStates *task_states) {
    ES *es = (ES *)a;
    (void)task_states; /* ES keeps no states */
    const NevoConfig *cfg = a->cfg;
    if (es->phase == PHASE_SEED) {
        es_seed(es, results);
        es->phase = PHASE_PERTURB;
        return 0;
    }
    if (es->phase == PHASE_PERTURB) {
        int shift = cfg->es.reward_shift != 0.0;
        nevo_algo_net_means(a, results, cfg->episodes, es->fitness, shift ? es->shaped : NULL, cfg->es.reward_shift,
                            es->bc_dim > 0 ? es->bcs : NULL);
        es->have_bcs = es->bc_dim > 0;
        nevo_algo_fitness_stats(a, es->fitness, 2 * es->n_pairs);
        es->w_used = es_weigh(es, shift ? es->shaped : es->fitness); /* what the update sees */
        es_step(es, task_stats);
        if (cfg->es.center_episodes > 0) {
            es->phase = PHASE_CENTER;
            return 0;
        }
        es->agents[es->chosen].reward = a->stats.mean;
        a->stats.elite_mean = a->stats.mean;
    } else {
        Agent *ag = &es->agents[es->chosen];
        float bc[NEVO_ENV_MAX_BC];
        nevo_algo_net_means(a, results, cfg->es.center_episodes, &ag->reward, NULL, 0.0,
                            es->bc_dim > 0 ? bc : NULL);
        if (es->bc_dim > 0) memcpy(ag->bc, bc, sizeof(float) * (size_t)es->bc_dim);
        a->stats.elite_mean = ag->reward;
        a->stats.bc_dim = es->bc_dim;
        if (es->bc_dim > 0) memcpy(a->stats.bc, ag->bc, sizeof(float) * (size_t)es->bc_dim);
    }
    es_adapt(es);
    es->phase = es->mode != NEVO_ES_PLAIN && !es->initialised ? PHASE_SEED : PHASE_PERTURB;
    return 1;
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
        nevo_optim_write_state(ag->opt, b); /* m, v (np f64 each), t u64 */
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
    if (es->mode != NEVO_ES_PLAIN) nevo_archive_save(&es->archive, b);
}


/* Every value is checked: a crafted state that passed its checksum must not reach the
 * update as an index out of range or as NaN. */
static NevoStatus es_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    ES *es = (ES *)a;
    if (nevo_read_u64(r) != es->np)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state has a different parameter count than the policy");
    if (nevo_read_u32(r) != (uint32_t)es->M)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state has a different number of agents");
    int bad = 0;
    for (int m = 0; m < es->M; m++) {
        Agent *ag = &es->agents[m];
        nevo_read_f32s(r, ag->theta, es->np);
        bad |= !nevo_optim_read_state(ag->opt, r) && !r->failed; /* truncation: reported below */
        ag->reward = nevo_read_f64(r);
        nevo_read_f32s(r, ag->bc, NEVO_ENV_MAX_BC);
        bad |= !nevo_all_finite(ag->theta, es->np) || !isfinite(ag->reward) || !nevo_all_finite(ag->bc, NEVO_ENV_MAX_BC);
    }
    uint32_t initialised = nevo_read_u32(r), best_agent = nevo_read_u32(r);
    es->w = nevo_read_f64(r);
    es->best_reward = nevo_read_f64(r);
    uint32_t stagnation = nevo_read_u32(r);
    if (bad || initialised > 1 || best_agent >= (uint32_t)es->M || !(es->w >= 0.0 && es->w <= 1.0) ||
        isnan(es->best_reward) || stagnation > (uint32_t)INT32_MAX)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state holds values out of range");
    es->initialised = (int)initialised;
    es->best_agent = (int)best_agent;
    es->stagnation = (int)stagnation;
    if (nevo_read_u32(r) != (uint32_t)es->obs.dim)
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES state is inconsistent with the config");
    es->obs.count = nevo_read_f64(r);
    nevo_read_f64s(r, es->obs.sum, (size_t)es->obs.dim);
    nevo_read_f64s(r, es->obs.sumsq, (size_t)es->obs.dim);
    /* count is a number of observations: 0 or a whole number from 1 (a tiny count
     * would blow the means up to infinity) */
    double count = es->obs.count;
    if (!(count == 0.0 || (count >= 1.0 && count <= 0x1p53 && count == floor(count))) ||
        !nevo_all_finite_f64(es->obs.sum, (size_t)es->obs.dim) || !nevo_all_finite_f64(es->obs.sumsq, (size_t)es->obs.dim))
        return nevo_error(err, NEVO_ERR_CORRUPT, "ES observation statistics hold values out of range");
    for (int i = 0; count > 0.0 && i < es->obs.dim; i++) /* the policy keeps mean and sd as floats */
        if (!(fabs(es->obs.sum[i] / count) <= 1e30 && es->obs.sumsq[i] / count <= 1e60))
            return nevo_error(err, NEVO_ERR_CORRUPT, "ES observation statistics give a mean or sd beyond 1e30");
    if (es->mode != NEVO_ES_PLAIN && !nevo_archive_load(&es->archive, r))
        return nevo_error(err, NEVO_ERR_CORRUPT, "novelty archive is truncated or holds non-finite points");
    if (!nevo_reader_ok(r, false)) return nevo_error(err, NEVO_ERR_CORRUPT, "ES state is truncated");
    if (es->obs_norm) nevo_obs_stats_apply(&es->obs, a->policy);
    es->phase = es->mode != NEVO_ES_PLAIN && !es->initialised ? PHASE_SEED : PHASE_PERTURB;
    return NEVO_OK;
}

static void es_free(NevoAlgo *a) {
    ES *es = (ES *)a;
    for (int m = 0; m < es->M; m++) nevo_optim_free(es->agents[m].opt);
    free(es->agents);
    free(es->thetas);
    free(es->pair_ids);
    free(es->center_ids);
    free(es->bcs);
    free(es->grad);
    free(es->grad_eps);
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
    *n = es->mode != NEVO_ES_PLAIN ? es->archive.n : 0;
    return *n ? es->archive.points : NULL;
}

static const NevoAlgoOps es_ops = {
    .ask = es_ask,
    .tell = es_tell,
    .best = es_best,
    .save = es_save,
    .load = es_load,
    .free = es_free,
    .behaviours = es_behaviours,
    .archive = es_archive,
};

NevoStatus nevo_es_check(const NevoConfig *cfg, int variant, NevoError *err) {
    if (variant != NEVO_ES_PLAIN && cfg->es.center_episodes < 1)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "%s needs es.center_episodes >= 1: the agent's behaviour is measured on those episodes",
                          cfg->algo);
    if (cfg->population < 2 || cfg->population % 2 != 0)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "es evaluates antithetic pairs, so population must be even and >= 2 (got %d)",
                          cfg->population);
    NevoStatus st = nevo_algo_factored_check(cfg, "es", "members", cfg->es.factored, cfg->es.rank, err);
    if (st) return st;
    if (cfg->es.top_directions > cfg->population / 2)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "es.top_directions (%d) must not exceed the number of perturbation pairs, population / 2 (%d)",
                          cfg->es.top_directions, cfg->population / 2);
    return NEVO_OK;
}

double nevo_es_state_bytes(const NevoConfig *cfg, int variant, size_t nparams) {
    double M = variant == NEVO_ES_PLAIN ? 1 : cfg->ns.meta_population, np = (double)nparams;
    return M * (4.0 * np + 16.0 * np) + 8.0 * np; /* agents' theta and Adam moments, the gradient */
}

NevoStatus nevo_es_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err) {
    const NevoConfig *cfg = base->cfg;
    NevoPolicy *policy = base->policy;
    ES *es = nevo_alloc(sizeof *es);
    es->base = *base;
    es->base.ops = &es_ops;
    es->mode = variant;
    es->obs_norm = nevo_algo_obs_norm(cfg);
    es->M = es->mode == NEVO_ES_PLAIN ? 1 : cfg->ns.meta_population;
    es->bc_dim = base->bc_dim;
    es->n_pairs = cfg->population / 2;
    es->np = policy->nparams;
    es->phase = es->mode == NEVO_ES_PLAIN ? PHASE_PERTURB : PHASE_SEED;
    es->agents = nevo_alloc(sizeof(Agent) * (size_t)es->M);
    es->thetas = nevo_alloc_aligned(sizeof(float) * es->np * (size_t)es->M);
    for (int m = 0; m < es->M; m++) {
        Agent *ag = &es->agents[m];
        ag->theta = es->thetas + (size_t)m * es->np;
        nevo_policy_init_params(policy, base->noise, cfg->seed, 0, (uint32_t)m, ag->theta);
        NevoStatus st = new_optimiser(cfg, es->np, &ag->opt, err);
        if (st != NEVO_OK) {
            es_free(&es->base);
            return st;
        }
    }
    es->w = cfg->ns.weight;
    int n2 = 2 * es->n_pairs, rows = n2 > es->M ? n2 : es->M; /* rollouts, or the agents (seed) */
    es->pair_ids = nevo_alloc(sizeof(uint32_t) * (size_t)n2);
    for (int j = 0; j < n2; j++) es->pair_ids[j] = (uint32_t)(j / 2);
    es->center_ids = nevo_alloc(sizeof(uint32_t) * (size_t)es->M);
    for (int m = 0; m < es->M; m++) es->center_ids[m] = NEVO_STREAM_CENTER;
    es->bcs = nevo_alloc(sizeof(float) * (size_t)rows * (size_t)(es->bc_dim > 0 ? es->bc_dim : 1));
    es->grad = nevo_alloc(sizeof(double) * es->np);
    if (cfg->es.rank > 0) es->grad_eps = nevo_alloc(sizeof(float) * GRAD_CHUNK * (size_t)nevo_pool_threads(base->pool));
    es->grad_rows = nevo_alloc(sizeof(const float *) * (size_t)es->n_pairs);
    es->grad_w = nevo_alloc(sizeof(double) * (size_t)es->n_pairs);
    es->fitness = nevo_alloc(sizeof(double) * (size_t)rows);
    es->ranks = nevo_alloc(sizeof(double) * (size_t)n2);
    es->novelty = nevo_alloc(sizeof(double) * (size_t)n2);
    es->nranks = nevo_alloc(sizeof(double) * (size_t)n2);
    es->weights = nevo_alloc(sizeof(double) * (size_t)n2);
    es->pair_order = nevo_alloc(sizeof(int) * (size_t)es->n_pairs);
    es->shaped = nevo_alloc(sizeof(double) * (size_t)n2);
    es->pair_score = nevo_alloc(sizeof(double) * (size_t)es->n_pairs);
    es->used_pairs = es->n_pairs;
    nevo_archive_init(&es->archive, es->bc_dim);
    nevo_obs_stats_init(&es->obs, policy->obs_dim);
    *out = &es->base;
    return NEVO_OK;
}
