/* Deep GA (Such et al. 2017), random search (the GA without parents) and GA-NS.
 *
 * Genomes are seed chains (params.h): (init_ref, (ref_1, sigma_1), ...), each ref a
 * (generation, individual) stream name, so theta = init(init_ref) + sum_j sigma_j *
 * eps(ref_j). The elite and the parents are kept as vectors too (the bases of the
 * children's task set), so a child is one noise slice and one vector add; a checkpoint
 * keeps only their chains, replayed on load with the same float operations.
 *
 * One generation (g >= 1), as stages:
 *   breed      child i = parent + sigma * eps(g, i), the parent drawn uniformly from the
 *              T parents by stream (SELECT, g, i); with elitism, child 0 is the elite
 *              unmodified; with no parents (g = 0, random search), a fresh network
 *   -> evaluate the children on `episodes` episodes each
 *   score      rank by fitness; GA-NS scores each child's behaviour by its novelty
 *              against the archive and the population, and selects by that
 *   candidates the top `validation_candidates` by fitness, the previous elite taking
 *              the last place unless it is among them
 *   -> evaluate the candidates on `validation_episodes` common episodes
 *   crown      the best validation mean becomes the elite
 *   commit     GA-NS: `ns.archive_add` random children join the archive; the top T by
 *              the selection score become the parents, the elite always among them
 *              (outside GA-NS), and their vectors are built for the next generation.
 * The elite, the parents and the archive change only in commit, so a generation whose
 * evaluation fails leaves them as they were.
 *
 * Safe mutations (ga.mutation other than plain; smg.h): each child's episodes keep up to
 * ga.sm_states of its observations (NEVO_TASK_RECORD_STATES, split evenly over its
 * episodes), and the children that become the elite and the parents keep theirs: the
 * states behind their output gradients. A child's step then depends on those states,
 * which a seed chain cannot name, so the elite and the parents are vectors (the task
 * set's float bases) and a checkpoint keeps them as floats, with their states. Breeding
 * gains a stage before the evaluation:
 *   scale      SM-G-SUM, SM-G-ABS: each parent's divisors, one row per parent that the
 *              task set carries (the children travel as NEVO_NET_SCALED recipes);
 *              SM-G-SO: each child's divisors along its own noise, and the child built
 *              (the task set's bases are then the elite and the children);
 *              SM-R: each child's step size by line search (a PERTURBED recipe with it)
 * With a recurrent policy the states are sequences (smg.h): each base also keeps where
 * each of its episodes' states begin, and a checkpoint keeps that with them.
 * Plain mutation needs no states: its bases travel and are saved as seed chains.
 *
 * Low-rank mutations (ga.rank = r >= 1): a child's noise is the compact slice of its name
 * at rank r (params.h; es.rank's perturbations), its recipe NEVO_NET_LOWRANK, and the
 * chains say their rank (kept beside their bytes: a checkpoint's config, a task set's
 * own field). With ga.factored the children are NEVO_NET_FACTORED, not built for their
 * episodes: each runs its parent's product plus its rank-r correction, the rows of one
 * parent sharing the parent's weights. A factored set is all FACTORED, so there the
 * elite's unmodified copy and the previous elite run as FACTORED networks of sigma 0
 * (their base plus a zero correction: the same values); their recipes stay BASE, and
 * the next bases are built from the recipes, never from what the forward ran. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "algo/smg.h"
#include "nevo/novelty.h"
#include "nevo/params.h"
#include "nevo/rng.h"

/* A chain that owns its mutations. */
typedef struct Genome {
    NevoChain c;
    NevoMutation *muts; /* c.muts */
    int cap;
} Genome;

enum { PHASE_CHILDREN, PHASE_VALIDATION };

typedef struct GA {
    NevoAlgo base;
    int variant, P, T;
    size_t np;
    /* The bases the children are built from: row 0 the elite, rows 1..T the parents
     * (1 + n_parents rows once there is an elite, none before), with their genomes. */
    float *rows, *rows_next;    /* (1 + T, np) */
    Genome *base_genomes;       /* (1 + T) */
    NevoChain *chains;          /* (1 + T) views of base_genomes, for the task set */
    int n_parents, has_elite;
    int phase;
    uint32_t gen;               /* the generation in progress */
    Genome *genomes;            /* (P) the children's */
    NevoNet *recipes;           /* (P + 1) the children's, then the previous elite's */
    double *fitness;            /* (P) */
    int *order;                 /* children by fitness, best first */
    const int *sel;             /* children by selection score: order, or GA-NS's sel_order */
    int k;                      /* elite candidates */
    int *cand;                  /* (k) children's indices, P for the previous elite */
    uint32_t *val_ids;          /* (k) NEVO_STREAM_VALIDATION */
    uint32_t *child_ids;        /* (P) NEVO_STREAM_SHARED (ga.shared_episodes), else NULL: each its own */
    double *val;                /* (k) validation means */
    NevoNet *next_recipes;      /* (1 + T) what the next bases are built from */
    /* GA-NS */
    NevoArchive archive;
    float *bcs;                 /* (P, bc_dim) the children's behaviours (envs with a BC) */
    int have_bcs;               /* bcs hold a generation's behaviours */
    double *novelty;            /* (P) */
    int *self;                  /* (P) 0..P-1: each child excludes itself from its neighbours */
    int *sel_order;             /* children by novelty, best first */
    /* safe mutations (sm != NEVO_SM_PLAIN) */
    NevoSafeMutation sm;
    int obs_dim, sm_cap;           /* states kept per base: ga.sm_states */
    float *states, *states_next;   /* (1 + T, sm_cap, obs_dim) the bases' states, with rows */
    int *n_states, *n_states_next; /* (1 + T) */
    float *kid_states;             /* (P, sm_cap, obs_dim) the children's, from their episodes */
    int *n_kid_states;             /* (P) */
    uint8_t *starts, *starts_next; /* (1 + T, sm_cap) recurrent policies: 1 where an episode's
                                    * states begin (NULL for feed-forward ones) */
    uint8_t *kid_starts;           /* (P, sm_cap) */
    int *parent_of;                /* (P) each mutated child's base, else -1 */
    float *scales;                 /* (1 + T, np) SM-G-SUM/ABS: the bases' divisors (row 0 unused: 1) */
    float *kids;                   /* (1 + P, np) SM-G-SO: the elite, then the children */
    float *tmp;                    /* (threads, np) SM-G-SO: a child's divisors */
    NevoSmWork **work;             /* (threads) */
} GA;

static void genome_reserve(Genome *g, int n) {
    if (g->cap >= n) return;
    int cap = n + 16;
    NevoMutation *grown = nevo_alloc(sizeof(NevoMutation) * (size_t)cap);
    if (g->c.n) memcpy(grown, g->muts, sizeof(NevoMutation) * (size_t)g->c.n);
    free(g->muts);
    g->muts = grown;
    g->c.muts = grown;
    g->cap = cap;
}

static void genome_copy(Genome *dst, const Genome *src) {
    genome_reserve(dst, src->c.n);
    dst->c.rank = src->c.rank;
    dst->c.init_generation = src->c.init_generation;
    dst->c.init_individual = src->c.init_individual;
    dst->c.n = src->c.n;
    if (src->c.n) memcpy(dst->muts, src->muts, sizeof(NevoMutation) * (size_t)src->c.n);
}

static void genome_push(Genome *g, NevoMutation m) {
    genome_reserve(g, g->c.n + 1);
    g->muts[g->c.n++] = m;
}

static int n_bases(const GA *ga) { return ga->has_elite ? 1 + ga->n_parents : 0; }

/* The task set's bases: the elite and the parents, as vectors and as chains; with safe
 * mutations as vectors alone, with their scale rows (SM-G-SUM/ABS), or the elite and the
 * children built (SM-G-SO). */
static void set_bases(GA *ga) {
    NevoTaskSet *ts = &ga->base.ts;
    ts->n_bases = n_bases(ga);
    ts->bases = ga->rows;
    ts->base_stride = ga->np;
    ts->chains = NULL;
    ts->scales = NULL;
    if (ga->sm == NEVO_SM_PLAIN) {
        for (int b = 0; b < ts->n_bases; b++) ga->chains[b] = ga->base_genomes[b].c;
        ts->chains = ts->n_bases ? ga->chains : NULL;
    } else if (ga->sm == NEVO_SM_G_SO && ts->n_bases) {
        ts->n_bases = 1 + ga->P;
        ts->bases = ga->kids;
    } else if ((ga->sm == NEVO_SM_G_SUM || ga->sm == NEVO_SM_G_ABS) && ts->n_bases) {
        ts->scales = ga->scales;
    }
}

static float *states_of(const GA *ga, float *all, int b) {
    return all + (size_t)b * (size_t)ga->sm_cap * (size_t)ga->obs_dim;
}

/* base b's episode starts in `all`, NULL for a feed-forward policy */
static uint8_t *starts_of(const GA *ga, uint8_t *all, int b) { return all ? all + (size_t)b * ga->sm_cap : NULL; }

/* generation gen's mutation power (the schedule's, as the float a recipe carries) */
static float ga_sigma(const NevoConfig *cfg, uint32_t gen) {
    return (float)nevo_algo_sigma(cfg->ga.sigma, cfg->ga.sigma_decay, cfg->ga.sigma_min, gen);
}

/* breed: each child's genome and recipe. */
static void ga_breed(GA *ga) {
    const NevoConfig *cfg = ga->base.cfg;
    int plain = ga->sm == NEVO_SM_PLAIN;
    for (int i = 0; i < ga->P; i++) {
        Genome *g = &ga->genomes[i];
        NevoNet *n = &ga->recipes[i];
        if (ga->parent_of) ga->parent_of[i] = -1;
        if (ga->n_parents == 0 || ga->variant == NEVO_GA_RS) {
            g->c.init_generation = ga->gen;
            g->c.init_individual = (uint32_t)i;
            g->c.n = 0;
            g->c.rank = cfg->ga.rank;
            *n = (NevoNet){.kind = NEVO_NET_INIT, .generation = ga->gen, .individual = (uint32_t)i};
        } else if (cfg->ga.elitism && i == 0 && ga->has_elite) {
            if (plain) genome_copy(g, &ga->base_genomes[0]);
            *n = (NevoNet){.kind = NEVO_NET_BASE, .base = 0};
        } else {
            NevoRng rng;
            nevo_rng_init(&rng, cfg->seed, NEVO_RNG_SELECT, ga->gen, (uint32_t)i, 0);
            int p = (int)nevo_rng_below(&rng, (uint32_t)ga->n_parents);
            NevoMutation m = {ga->gen, (uint32_t)i, ga_sigma(cfg, ga->gen)};
            if (plain) {
                genome_copy(g, &ga->base_genomes[1 + p]);
                genome_push(g, m);
            } else {
                ga->parent_of[i] = 1 + p;
            }
            /* SM-R's sigma and SM-G-SO's child are filled in by the scale stage */
            *n = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 1 + p, .purpose = NEVO_RNG_MUTATE,
                           .generation = m.generation, .individual = m.individual, .sigma = m.sigma, .sign = 1};
            if (cfg->ga.rank > 0) {
                n->kind = cfg->ga.factored ? NEVO_NET_FACTORED : NEVO_NET_LOWRANK;
                n->rank = (uint32_t)cfg->ga.rank;
            }
            if (ga->sm == NEVO_SM_G_SUM || ga->sm == NEVO_SM_G_ABS) n->kind = NEVO_NET_SCALED;
            if (ga->sm == NEVO_SM_G_SO) *n = (NevoNet){.kind = NEVO_NET_BASE, .base = 1 + i};
        }
    }
    /* the previous elite, a candidate of the validation */
    ga->recipes[ga->P] = (NevoNet){.kind = NEVO_NET_BASE, .base = 0};
}

/* scale, one pool item a parent (SM-G-SUM/ABS) or a child (SM-G-SO, SM-R), each on
 * its worker's scratch alone: the results do not depend on the thread count. */
static void scale_parent(void *ctx, int t, int worker) {
    GA *ga = ctx;
    int b = 1 + t;
    nevo_sm_scale(ga->work[worker], ga->sm, ga->rows + (size_t)b * ga->np, states_of(ga, ga->states, b),
                  starts_of(ga, ga->starts, b), ga->n_states[b], ga->scales + (size_t)b * ga->np);
}

static void scale_child(void *ctx, int i, int worker) {
    GA *ga = ctx;
    const NevoConfig *cfg = ga->base.cfg;
    int b = ga->parent_of[i];
    if (b < 0) return;
    const float *theta = ga->rows + (size_t)b * ga->np, *X = states_of(ga, ga->states, b);
    const float *eps = nevo_noise_slice(ga->base.noise, ga->np, cfg->seed, NEVO_RNG_MUTATE, ga->gen, (uint32_t)i, 0);
    if (ga->sm == NEVO_SM_R) {
        ga->recipes[i].sigma = nevo_sm_r_sigma(ga->work[worker], theta, X, starts_of(ga, ga->starts, b),
                                               ga->n_states[b], eps, ga_sigma(cfg, ga->gen), NULL);
    } else {
        float *scale = ga->tmp + (size_t)worker * ga->np;
        nevo_sm_scale_so(ga->work[worker], theta, X, starts_of(ga, ga->starts, b), ga->n_states[b], eps, scale);
        nevo_perturb_scaled(ga->kids + (size_t)(1 + i) * ga->np, theta, ga_sigma(cfg, ga->gen), eps, scale, 1, ga->np);
    }
}

static void ga_scale(GA *ga) {
    if (ga->sm == NEVO_SM_PLAIN || !ga->has_elite || ga->n_parents == 0) return;
    NevoPool *pool = ga->base.pool;
    if (ga->sm == NEVO_SM_G_SUM || ga->sm == NEVO_SM_G_ABS) {
        nevo_pool_run(pool, ga->n_parents, scale_parent, ga);
        return;
    }
    if (ga->sm == NEVO_SM_G_SO) memcpy(ga->kids, ga->rows, sizeof(float) * ga->np); /* the elite, base 0 */
    nevo_pool_run(pool, ga->P, scale_child, ga);
}

/* ga.factored: a set's BASE networks (the elite's copy, the previous elite) as FACTORED
 * networks of sigma 0 beside the children, when the set has factored children at all */
static void factor_bases(const GA *ga, NevoNet *nets, int n) {
    const NevoConfig *cfg = ga->base.cfg;
    int factored = 0;
    for (int j = 0; j < n; j++) factored |= nets[j].kind == NEVO_NET_FACTORED;
    for (int j = 0; factored && j < n; j++)
        if (nets[j].kind == NEVO_NET_BASE)
            nets[j] = (NevoNet){.kind = NEVO_NET_FACTORED, .base = nets[j].base, .purpose = NEVO_RNG_MUTATE,
                                .generation = ga->gen, .sigma = 0.0f, .sign = 1, .rank = (uint32_t)cfg->ga.rank};
}

static void ga_ask(NevoAlgo *a) {
    GA *ga = (GA *)a;
    const NevoConfig *cfg = a->cfg;
    if (ga->phase == PHASE_CHILDREN) {
        ga->gen = (uint32_t)a->generation;
        ga_breed(ga);
        ga_scale(ga);
        NevoNet *nets = nevo_algo_tasks(a, ga->P, cfg->episodes, ga->gen, ga->child_ids);
        memcpy(nets, ga->recipes, sizeof(NevoNet) * (size_t)ga->P);
        factor_bases(ga, nets, ga->P);
        if (ga->sm != NEVO_SM_PLAIN) {
            /* each child's episodes keep its states, ga.sm_states split over them */
            a->ts.states_cap = (ga->sm_cap + cfg->episodes - 1) / cfg->episodes;
            for (int t = 0; t < a->ts.n_tasks; t++) a->tasks[t].flags |= NEVO_TASK_RECORD_STATES;
        }
    } else {
        NevoNet *nets = nevo_algo_tasks(a, ga->k, cfg->ga.validation_episodes, ga->gen, ga->val_ids);
        for (int c = 0; c < ga->k; c++) nets[c] = ga->recipes[ga->cand[c]];
        factor_bases(ga, nets, ga->k);
    }
    set_bases(ga);
}

/* score: fitness and behaviours of the children, their ranking, and the selection
 * order (GA-NS: by novelty). */
static void ga_score(GA *ga, const NevoEpisode *results) {
    NevoAlgo *a = &ga->base;
    nevo_algo_net_means(a, results, a->cfg->episodes, ga->fitness, NULL, 0.0, ga->bcs);
    ga->have_bcs = ga->bcs != NULL;
    nevo_rank_desc(ga->fitness, ga->P, ga->order);
    ga->sel = ga->order;
    if (ga->variant == NEVO_GA_NS) {
        nevo_novelty(&ga->archive, ga->bcs, ga->P, ga->bcs, ga->self, ga->P, a->cfg->ns.k, a->pool, ga->novelty);
        nevo_rank_desc(ga->novelty, ga->P, ga->sel_order);
        ga->sel = ga->sel_order;
        double ns_sum = 0.0;
        for (int i = 0; i < ga->P; i++) ns_sum += ga->novelty[i];
        a->stats.novelty_mean = ns_sum / ga->P;
    }
    nevo_algo_fitness_stats(a, ga->fitness, ga->P);
    if (ga->bcs) {
        a->stats.bc_dim = a->bc_dim;
        memcpy(a->stats.bc, ga->bcs + (size_t)ga->order[0] * a->bc_dim, sizeof(float) * (size_t)a->bc_dim);
    }
}

/* candidates: the top k children by fitness; the previous elite (P) takes the last
 * place unless it is already among them (as child 0 under elitism). With one place it
 * goes to the best child: the previous elite alone would be crowned every generation. */
static void ga_candidates(GA *ga) {
    const NevoConfig *cfg = ga->base.cfg;
    int k = ga->k;
    for (int c = 0; c < k; c++) ga->cand[c] = ga->order[c];
    int elite_in_pop = cfg->ga.elitism && ga->has_elite && ga->variant != NEVO_GA_RS && ga->n_parents > 0;
    if (k < 2) return;
    if (ga->has_elite && !elite_in_pop) {
        ga->cand[k - 1] = ga->P;
    } else if (elite_in_pop) {
        int present = 0;
        for (int c = 0; c < k; c++) present |= ga->cand[c] == 0;
        if (!present) ga->cand[k - 1] = 0;
    }
}

/* Builds next-base row r (a parallel job over the rows). */
typedef struct BuildJob {
    GA *ga;
    NevoTaskSet ts; /* the generation's bases, with next_recipes as its networks */
} BuildJob;

static void build_next_row(void *ctx, int r, int worker) {
    BuildJob *job = ctx;
    (void)worker;
    nevo_taskset_build(&job->ts, job->ga->base.policy, r, job->ga->rows_next + (size_t)r * job->ga->np, 0);
}

/* The next base b's states: entry j of `from` (the bases' or the children's), which
 * holds counts[j], with its episode starts in from_starts. */
static void commit_states(GA *ga, int b, float *from, uint8_t *from_starts, const int *counts, int j) {
    memcpy(states_of(ga, ga->states_next, b), states_of(ga, from, j),
           sizeof(float) * (size_t)counts[j] * (size_t)ga->obs_dim);
    if (ga->starts) memcpy(starts_of(ga, ga->starts_next, b), starts_of(ga, from_starts, j), (size_t)counts[j]);
    ga->n_states_next[b] = counts[j];
}

/* commit: the elite (child `elite`, or P to keep the previous one) and its score, the
 * archive (GA-NS), and the next parents. */
static void ga_commit(GA *ga, int elite, double elite_score) {
    NevoAlgo *a = &ga->base;
    const NevoConfig *cfg = a->cfg;
    int T = ga->variant == NEVO_GA_RS ? 0 : ga->T;
    a->stats.elite_mean = elite_score;
    if (ga->variant == NEVO_GA_NS) {
        for (int j = 0; j < cfg->ns.archive_add; j++) {
            NevoRng rng;
            nevo_rng_init(&rng, cfg->seed, NEVO_RNG_ARCHIVE, ga->gen, (uint32_t)j, 0);
            int i = (int)nevo_rng_below(&rng, (uint32_t)ga->P);
            nevo_archive_add(&ga->archive, ga->bcs + (size_t)i * a->bc_dim);
        }
        a->stats.archive_size = ga->archive.n;
    }
    /* The elite's parent place, or -1: then (outside GA-NS, which selects by novelty
     * alone and so leaves the parents as they are: T) it takes the last parent's place,
     * so that the best policy found is always among the parents. */
    int elite_row = ga->variant == NEVO_GA_NS ? T : -1;
    for (int t = 0; t < T; t++)
        if (ga->sel[t] == elite) elite_row = t;
    /* the next bases' recipes over this generation's, then their genomes */
    ga->next_recipes[0] = ga->recipes[elite];
    for (int t = 0; t < T; t++) ga->next_recipes[1 + t] = ga->recipes[ga->sel[t]];
    if (elite_row < 0 && T > 0) ga->next_recipes[T] = ga->next_recipes[0];
    BuildJob job;
    job.ga = ga;
    set_bases(ga);
    job.ts = a->ts;
    job.ts.n_nets = 1 + T;
    job.ts.nets = ga->next_recipes;
    nevo_pool_run(a->pool, 1 + T, build_next_row, &job);
    if (ga->sm == NEVO_SM_PLAIN) {
        if (elite != ga->P) genome_copy(&ga->base_genomes[0], &ga->genomes[elite]);
        for (int t = 0; t < T; t++) genome_copy(&ga->base_genomes[1 + t], &ga->genomes[ga->sel[t]]);
        if (elite_row < 0 && T > 0) genome_copy(&ga->base_genomes[T], &ga->base_genomes[0]);
    } else {
        if (elite == ga->P)
            commit_states(ga, 0, ga->states, ga->starts, ga->n_states, 0);
        else
            commit_states(ga, 0, ga->kid_states, ga->kid_starts, ga->n_kid_states, elite);
        for (int t = 0; t < T; t++)
            commit_states(ga, 1 + t, ga->kid_states, ga->kid_starts, ga->n_kid_states, ga->sel[t]);
        if (elite_row < 0 && T > 0) commit_states(ga, T, ga->states_next, ga->starts_next, ga->n_states_next, 0);
        float *s = ga->states;
        ga->states = ga->states_next;
        ga->states_next = s;
        uint8_t *st = ga->starts;
        ga->starts = ga->starts_next;
        ga->starts_next = st;
        int *n = ga->n_states;
        ga->n_states = ga->n_states_next;
        ga->n_states_next = n;
    }
    float *r = ga->rows;
    ga->rows = ga->rows_next;
    ga->rows_next = r;
    ga->has_elite = 1;
    ga->n_parents = T;
}

/* Each child's states: its episodes' in episode order, up to ga.sm_states. */
static void ga_keep_states(GA *ga, const NevoStates *task_states) {
    int E = ga->base.cfg->episodes;
    size_t d = (size_t)ga->obs_dim;
    for (int i = 0; i < ga->P; i++) {
        float *dst = states_of(ga, ga->kid_states, i);
        int n = 0;
        for (int e = 0; e < E; e++) {
            const NevoStates *s = &task_states[i * E + e];
            int m = s->n < ga->sm_cap - n ? s->n : ga->sm_cap - n;
            memcpy(dst + (size_t)n * d, s->obs, sizeof(float) * (size_t)m * d);
            if (ga->kid_starts && m > 0) {
                uint8_t *st = starts_of(ga, ga->kid_starts, i) + n;
                memset(st, 0, (size_t)m);
                st[0] = 1;
            }
            n += m;
        }
        ga->n_kid_states[i] = n;
    }
}

static int ga_tell(NevoAlgo *a, const NevoEpisode *results, const NevoObsStats *task_stats,
                   const NevoStates *task_states) {
    GA *ga = (GA *)a;
    const NevoConfig *cfg = a->cfg;
    (void)task_stats;
    if (ga->phase == PHASE_CHILDREN) {
        if (ga->sm != NEVO_SM_PLAIN) ga_keep_states(ga, task_states);
        ga_score(ga, results);
        ga_candidates(ga);
        if (cfg->ga.validation_episodes > 0) {
            ga->phase = PHASE_VALIDATION;
            return 0;
        }
        ga_commit(ga, ga->cand[0], ga->fitness[ga->cand[0]]);
        return 1;
    }
    /* crown: the best validation mean (the first of equals) */
    nevo_algo_net_means(a, results, cfg->ga.validation_episodes, ga->val, NULL, 0.0, NULL);
    int best = 0;
    for (int c = 1; c < ga->k; c++)
        if (ga->val[c] > ga->val[best]) best = c;
    ga->phase = PHASE_CHILDREN;
    ga_commit(ga, ga->cand[best], ga->val[best]);
    return 1;
}

static void ga_best(const NevoAlgo *a, float *theta) {
    const GA *ga = (const GA *)a;
    memcpy(theta, ga->rows, sizeof(float) * ga->np);
}

static void save_genome(NevoBuf *b, const Genome *g) { nevo_chain_write(b, &g->c); }

static int load_genome(NevoReader *r, Genome *g, int rank) {
    uint32_t n = nevo_chain_peek_count(r);
    if (n > (r->len - r->pos) / 12) return 0; /* room only for what the bytes can hold */
    genome_reserve(g, (int)n);
    int ok = nevo_chain_read(r, &g->c, g->muts, (size_t)g->cap);
    g->c.rank = rank; /* the config's: a checkpoint keeps the config beside the chains */
    return ok;
}

/* A base with safe mutations: its vector and its states. */
static void save_base(const GA *ga, NevoBuf *b, int j) {
    nevo_buf_f32s(b, ga->rows + (size_t)j * ga->np, ga->np);
    nevo_buf_u32(b, (uint32_t)ga->n_states[j]);
    nevo_buf_f32s(b, states_of(ga, ga->states, j), (size_t)ga->n_states[j] * (size_t)ga->obs_dim);
    if (ga->starts) nevo_buf_put(b, starts_of(ga, ga->starts, j), (size_t)ga->n_states[j]);
}

static int load_base(GA *ga, NevoReader *r, int j) {
    float *row = ga->rows + (size_t)j * ga->np;
    nevo_read_f32s(r, row, ga->np);
    if (!nevo_all_finite(row, ga->np)) return 0;
    uint32_t n = nevo_read_u32(r);
    /* a base kept at least its first observation, and at most ga.sm_states */
    if (r->failed || n < 1 || n > (uint32_t)ga->sm_cap) return 0;
    size_t m = (size_t)n * (size_t)ga->obs_dim;
    if (m > (r->len - r->pos) / 4) return 0;
    float *x = states_of(ga, ga->states, j);
    nevo_read_f32s(r, x, m);
    if (!nevo_all_finite(x, m)) return 0;
    if (ga->starts) {
        /* the first state begins an episode; each flag is 0 or 1 */
        uint8_t *st = starts_of(ga, ga->starts, j);
        nevo_read(r, st, n);
        if (r->failed || st[0] != 1) return 0;
        for (uint32_t i = 0; i < n; i++)
            if (st[i] > 1) return 0;
    }
    ga->n_states[j] = (int)n;
    return !r->failed;
}

/* Only genomes are saved: the elite's and parents' vectors are rebuilt on load. With
 * safe mutations, the vectors and their states. */
static void ga_save(const NevoAlgo *a, NevoBuf *b) {
    const GA *ga = (const GA *)a;
    if (ga->sm != NEVO_SM_PLAIN) {
        nevo_buf_u32(b, (uint32_t)ga->has_elite);
        if (ga->has_elite) save_base(ga, b, 0);
        nevo_buf_u32(b, (uint32_t)ga->n_parents);
        for (int t = 0; t < ga->n_parents; t++) save_base(ga, b, 1 + t);
        if (ga->variant == NEVO_GA_NS) nevo_archive_save(&ga->archive, b);
        return;
    }
    nevo_buf_u32(b, (uint32_t)ga->has_elite);
    if (ga->has_elite) save_genome(b, &ga->base_genomes[0]);
    nevo_buf_u32(b, (uint32_t)ga->n_parents);
    for (int t = 0; t < ga->n_parents; t++) save_genome(b, &ga->base_genomes[1 + t]);
    if (ga->variant == NEVO_GA_NS) nevo_archive_save(&ga->archive, b);
}

static NevoStatus ga_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    GA *ga = (GA *)a;
    ga->phase = PHASE_CHILDREN;
    uint32_t has_elite = nevo_read_u32(r);
    if (has_elite > 1) goto corrupt;
    ga->has_elite = (int)has_elite;
    int plain = ga->sm == NEVO_SM_PLAIN, rank = a->cfg->ga.rank;
    if (ga->has_elite && !(plain ? load_genome(r, &ga->base_genomes[0], rank) : load_base(ga, r, 0))) goto corrupt;
    uint32_t n = nevo_read_u32(r);
    /* parents come with an elite, and random search keeps none */
    if (n > (uint32_t)(ga->variant == NEVO_GA_RS ? 0 : ga->T) || (n > 0 && !ga->has_elite)) goto corrupt;
    ga->n_parents = (int)n;
    for (int t = 0; t < ga->n_parents; t++)
        if (!(plain ? load_genome(r, &ga->base_genomes[1 + t], rank) : load_base(ga, r, 1 + t))) goto corrupt;
    if (ga->variant == NEVO_GA_NS && !nevo_archive_load(&ga->archive, r)) goto corrupt;
    for (int b = 0; plain && b < n_bases(ga); b++)
        nevo_chain_build(a->policy, a->noise, a->cfg->seed, &ga->base_genomes[b].c, ga->rows + (size_t)b * ga->np);
    return NEVO_OK;
corrupt:
    return nevo_error(err, NEVO_ERR_CORRUPT, "GA state is truncated or inconsistent");
}

static void ga_free(NevoAlgo *a) {
    GA *ga = (GA *)a;
    for (int i = 0; i < ga->P; i++) free(ga->genomes[i].muts);
    for (int t = 0; t <= ga->T; t++) free(ga->base_genomes[t].muts);
    free(ga->genomes);
    free(ga->base_genomes);
    free(ga->chains);
    free(ga->rows);
    free(ga->rows_next);
    free(ga->recipes);
    free(ga->next_recipes);
    free(ga->fitness);
    free(ga->order);
    free(ga->cand);
    free(ga->val_ids);
    free(ga->child_ids);
    free(ga->val);
    nevo_archive_free(&ga->archive);
    free(ga->bcs);
    free(ga->novelty);
    free(ga->self);
    free(ga->sel_order);
    free(ga->states);
    free(ga->states_next);
    free(ga->n_states);
    free(ga->n_states_next);
    free(ga->kid_states);
    free(ga->n_kid_states);
    free(ga->starts);
    free(ga->starts_next);
    free(ga->kid_starts);
    free(ga->parent_of);
    free(ga->scales);
    free(ga->kids);
    free(ga->tmp);
    for (int w = 0; ga->work && w < nevo_pool_threads(ga->base.pool); w++) nevo_sm_work_free(ga->work[w]);
    free(ga->work);
    free(ga);
}

static const float *ga_behaviours(const NevoAlgo *a, int *n) {
    const GA *ga = (const GA *)a;
    *n = ga->have_bcs ? ga->P : 0;
    return ga->have_bcs ? ga->bcs : NULL;
}

static const float *ga_archive(const NevoAlgo *a, int *n) {
    const GA *ga = (const GA *)a;
    int ns = ga->variant == NEVO_GA_NS;
    *n = ns ? ga->archive.n : 0;
    return ns ? ga->archive.points : NULL;
}

static const NevoAlgoOps ga_ops = {
    .ask = ga_ask,
    .tell = ga_tell,
    .best = ga_best,
    .save = ga_save,
    .load = ga_load,
    .free = ga_free,
    .behaviours = ga_behaviours,
    .archive = ga_archive,
};

NevoStatus nevo_ga_check(const NevoConfig *cfg, int variant, NevoError *err) {
    if (variant != NEVO_GA_RS && cfg->ga.truncation > cfg->population)
        return nevo_error(err, NEVO_ERR_INVALID, "ga.truncation (%d) must not exceed population (%d)",
                          cfg->ga.truncation, cfg->population);
    int sm = nevo_sm_mode(cfg->ga.mutation);
    if (sm < 0)
        return nevo_error(err, NEVO_ERR_INVALID, "ga.mutation = '%s' is not one of plain, sm-g-sum, sm-g-abs, "
                          "sm-g-so, sm-r", cfg->ga.mutation);
    /* a safe mutation shapes a child's step from its parent's states: random search
     * draws every network fresh, with no parent and no step */
    if (sm != NEVO_SM_PLAIN && variant == NEVO_GA_RS)
        return nevo_error(err, NEVO_ERR_INVALID, "ga.mutation = %s needs parents: algo %s draws every network fresh "
                          "(use plain)", cfg->ga.mutation, cfg->algo);
    if (cfg->ga.rank > 0 && (variant == NEVO_GA_RS || sm != NEVO_SM_PLAIN))
        return nevo_error(err, NEVO_ERR_INVALID, "ga.rank is for plain mutations of parents: %s", variant == NEVO_GA_RS
                          ? "random search draws every network fresh" : "a safe mutation scales full-rank noise");
    return nevo_algo_factored_check(cfg, "ga", "children", cfg->ga.factored, cfg->ga.rank, err);
}

double nevo_ga_state_bytes(const NevoConfig *cfg, int variant, size_t nparams) {
    double T = variant == NEVO_GA_RS ? 0 : cfg->ga.truncation;
    /* this generation's bases and the next (elite and parents), and the candidates the
     * evaluator builds for the validation (factored ones are not built) */
    double rows = 2 * (1 + T) + (cfg->ga.validation_episodes > 1 && !cfg->ga.factored ? cfg->ga.validation_candidates
                                                                                         : 0);
    /* safe mutations: the parents' scale rows (SM-G-SUM/ABS), the children built (SM-G-SO) */
    int sm = nevo_sm_mode(cfg->ga.mutation);
    if (sm == NEVO_SM_G_SUM || sm == NEVO_SM_G_ABS) rows += 1 + T;
    if (sm == NEVO_SM_G_SO) rows += 1 + cfg->population;
    return rows * 4.0 * (double)nparams;
}

NevoStatus nevo_ga_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err) {
    GA *ga = nevo_alloc(sizeof *ga);
    ga->base = *base;
    ga->base.ops = &ga_ops;
    const NevoConfig *cfg = base->cfg;
    ga->variant = variant;
    ga->P = cfg->population;
    ga->T = variant == NEVO_GA_RS ? 0 : cfg->ga.truncation;
    ga->np = base->policy->nparams;
    int B = 1 + ga->T;
    ga->rows = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)B);
    ga->rows_next = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)B);
    ga->base_genomes = nevo_alloc(sizeof(Genome) * (size_t)B);
    ga->chains = nevo_alloc(sizeof(NevoChain) * (size_t)B);
    ga->next_recipes = nevo_alloc(sizeof(NevoNet) * (size_t)B);
    ga->genomes = nevo_alloc(sizeof(Genome) * (size_t)ga->P);
    ga->recipes = nevo_alloc(sizeof(NevoNet) * (size_t)(ga->P + 1));
    ga->fitness = nevo_alloc(sizeof(double) * (size_t)ga->P);
    ga->order = nevo_alloc(sizeof(int) * (size_t)ga->P);
    ga->k = cfg->ga.validation_candidates < ga->P ? cfg->ga.validation_candidates : ga->P;
    ga->cand = nevo_alloc(sizeof(int) * (size_t)ga->k);
    ga->val = nevo_alloc(sizeof(double) * (size_t)ga->k);
    ga->val_ids = nevo_alloc(sizeof(uint32_t) * (size_t)ga->k);
    for (int c = 0; c < ga->k; c++) ga->val_ids[c] = NEVO_STREAM_VALIDATION;
    if (cfg->ga.shared_episodes) {
        ga->child_ids = nevo_alloc(sizeof(uint32_t) * (size_t)ga->P);
        for (int i = 0; i < ga->P; i++) ga->child_ids[i] = NEVO_STREAM_SHARED;
    }
    if (base->bc_dim > 0) ga->bcs = nevo_alloc(sizeof(float) * (size_t)ga->P * (size_t)base->bc_dim);
    if (variant == NEVO_GA_NS) {
        nevo_archive_init(&ga->archive, base->bc_dim);
        ga->novelty = nevo_alloc(sizeof(double) * (size_t)ga->P);
        ga->self = nevo_alloc(sizeof(int) * (size_t)ga->P);
        ga->sel_order = nevo_alloc(sizeof(int) * (size_t)ga->P);
        for (int i = 0; i < ga->P; i++) ga->self[i] = i;
    }
    ga->sm = (NevoSafeMutation)nevo_sm_mode(cfg->ga.mutation);
    if (ga->sm != NEVO_SM_PLAIN) {
        NEVO_ASSERT((int)ga->sm > 0); /* nevo_ga_check ran */
        ga->obs_dim = base->policy->obs_dim;
        ga->sm_cap = cfg->ga.sm_states;
        size_t per = (size_t)ga->sm_cap * (size_t)ga->obs_dim;
        ga->states = nevo_alloc(sizeof(float) * per * (size_t)B);
        ga->states_next = nevo_alloc(sizeof(float) * per * (size_t)B);
        ga->n_states = nevo_alloc(sizeof(int) * (size_t)B);
        ga->n_states_next = nevo_alloc(sizeof(int) * (size_t)B);
        ga->kid_states = nevo_alloc(sizeof(float) * per * (size_t)ga->P);
        ga->n_kid_states = nevo_alloc(sizeof(int) * (size_t)ga->P);
        if (base->policy->lstm_layer >= 0) {
            ga->starts = nevo_alloc((size_t)ga->sm_cap * (size_t)B);
            ga->starts_next = nevo_alloc((size_t)ga->sm_cap * (size_t)B);
            ga->kid_starts = nevo_alloc((size_t)ga->sm_cap * (size_t)ga->P);
        }
        ga->parent_of = nevo_alloc(sizeof(int) * (size_t)ga->P);
        int threads = nevo_pool_threads(base->pool);
        ga->work = nevo_alloc(sizeof(NevoSmWork *) * (size_t)threads);
        for (int w = 0; w < threads; w++) ga->work[w] = nevo_sm_work_new(base->policy, ga->sm_cap);
        if (ga->sm == NEVO_SM_G_SUM || ga->sm == NEVO_SM_G_ABS) {
            ga->scales = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)B);
            for (size_t k = 0; k < ga->np; k++) ga->scales[k] = 1.0f; /* row 0, the elite's: no child of it */
        }
        if (ga->sm == NEVO_SM_G_SO) {
            ga->kids = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)(1 + ga->P));
            ga->tmp = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)threads);
        }
    }
    (void)err;
    *out = &ga->base;
    return NEVO_OK;
}
