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
 * evaluation fails leaves them as they were. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
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
    double *val;                /* (k) validation means */
    NevoNet *next_recipes;      /* (1 + T) what the next bases are built from */
    /* GA-NS */
    NevoArchive archive;
    float *bcs;                 /* (P, bc_dim) the children's behaviours (envs with a BC) */
    int have_bcs;               /* bcs hold a generation's behaviours */
    double *novelty;            /* (P) */
    int *self;                  /* (P) 0..P-1: each child excludes itself from its neighbours */
    int *sel_order;             /* children by novelty, best first */
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

/* The task set's bases: the elite and the parents, as vectors and as chains. */
static void set_bases(GA *ga) {
    NevoTaskSet *ts = &ga->base.ts;
    ts->n_bases = n_bases(ga);
    ts->bases = ga->rows;
    ts->base_stride = ga->np;
    for (int b = 0; b < ts->n_bases; b++) ga->chains[b] = ga->base_genomes[b].c;
    ts->chains = ts->n_bases ? ga->chains : NULL;
}

/* breed: each child's genome and recipe. */
static void ga_breed(GA *ga) {
    const NevoConfig *cfg = ga->base.cfg;
    for (int i = 0; i < ga->P; i++) {
        Genome *g = &ga->genomes[i];
        NevoNet *n = &ga->recipes[i];
        if (ga->n_parents == 0 || ga->variant == NEVO_GA_RS) {
            g->c.init_generation = ga->gen;
            g->c.init_individual = (uint32_t)i;
            g->c.n = 0;
            *n = (NevoNet){.kind = NEVO_NET_INIT, .generation = ga->gen, .individual = (uint32_t)i};
        } else if (cfg->ga.elitism && i == 0 && ga->has_elite) {
            genome_copy(g, &ga->base_genomes[0]);
            *n = (NevoNet){.kind = NEVO_NET_BASE, .base = 0};
        } else {
            NevoRng rng;
            nevo_rng_init(&rng, cfg->seed, NEVO_RNG_SELECT, ga->gen, (uint32_t)i, 0);
            int p = (int)nevo_rng_below(&rng, (uint32_t)ga->n_parents);
            NevoMutation m = {ga->gen, (uint32_t)i, (float)cfg->ga.sigma};
            genome_copy(g, &ga->base_genomes[1 + p]);
            genome_push(g, m);
            *n = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 1 + p, .purpose = NEVO_RNG_MUTATE,
                           .generation = m.generation, .individual = m.individual, .sigma = m.sigma, .sign = 1};
        }
    }
    /* the previous elite, a candidate of the validation */
    ga->recipes[ga->P] = (NevoNet){.kind = NEVO_NET_BASE, .base = 0};
}

static void ga_ask(NevoAlgo *a) {
    GA *ga = (GA *)a;
    const NevoConfig *cfg = a->cfg;
    if (ga->phase == PHASE_CHILDREN) {
        ga->gen = (uint32_t)a->generation;
        ga_breed(ga);
        NevoNet *nets = nevo_algo_tasks(a, ga->P, cfg->episodes, ga->gen, NULL);
        memcpy(nets, ga->recipes, sizeof(NevoNet) * (size_t)ga->P);
    } else {
        NevoNet *nets = nevo_algo_tasks(a, ga->k, cfg->ga.validation_episodes, ga->gen, ga->val_ids);
        for (int c = 0; c < ga->k; c++) nets[c] = ga->recipes[ga->cand[c]];
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
    if (elite != ga->P) genome_copy(&ga->base_genomes[0], &ga->genomes[elite]);
    for (int t = 0; t < T; t++) genome_copy(&ga->base_genomes[1 + t], &ga->genomes[ga->sel[t]]);
    if (elite_row < 0 && T > 0) genome_copy(&ga->base_genomes[T], &ga->base_genomes[0]);
    float *r = ga->rows;
    ga->rows = ga->rows_next;
    ga->rows_next = r;
    ga->has_elite = 1;
    ga->n_parents = T;
}

static int ga_tell(NevoAlgo *a, const NevoEpisode *results, const NevoObsStats *task_stats) {
    GA *ga = (GA *)a;
    const NevoConfig *cfg = a->cfg;
    (void)task_stats;
    if (ga->phase == PHASE_CHILDREN) {
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

static int load_genome(NevoReader *r, Genome *g) {
    uint32_t n = nevo_chain_peek_count(r);
    if (n > (r->len - r->pos) / 12) return 0; /* room only for what the bytes can hold */
    genome_reserve(g, (int)n);
    return nevo_chain_read(r, &g->c, g->muts, (size_t)g->cap);
}

/* Only genomes are saved: the elite's and parents' vectors are rebuilt on load. */
static void ga_save(const NevoAlgo *a, NevoBuf *b) {
    const GA *ga = (const GA *)a;
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
    if (ga->has_elite && !load_genome(r, &ga->base_genomes[0])) goto corrupt;
    uint32_t n = nevo_read_u32(r);
    /* parents come with an elite, and random search keeps none */
    if (n > (uint32_t)(ga->variant == NEVO_GA_RS ? 0 : ga->T) || (n > 0 && !ga->has_elite)) goto corrupt;
    ga->n_parents = (int)n;
    for (int t = 0; t < ga->n_parents; t++)
        if (!load_genome(r, &ga->base_genomes[1 + t])) goto corrupt;
    if (ga->variant == NEVO_GA_NS && !nevo_archive_load(&ga->archive, r)) goto corrupt;
    for (int b = 0; b < n_bases(ga); b++)
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
    free(ga->val);
    nevo_archive_free(&ga->archive);
    free(ga->bcs);
    free(ga->novelty);
    free(ga->self);
    free(ga->sel_order);
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

static const NevoAlgoOps ga_ops = {ga_ask,  ga_tell, ga_best,       ga_save,
                                   ga_load, ga_free, ga_behaviours, ga_archive};

NevoStatus nevo_ga_check(const NevoConfig *cfg, int variant, NevoError *err) {
    if (variant != NEVO_GA_RS && cfg->ga.truncation > cfg->population)
        return nevo_error(err, NEVO_ERR_INVALID, "ga.truncation (%d) must not exceed population (%d)",
                          cfg->ga.truncation, cfg->population);
    return NEVO_OK;
}

double nevo_ga_state_bytes(const NevoConfig *cfg, int variant, size_t nparams) {
    double T = variant == NEVO_GA_RS ? 0 : cfg->ga.truncation;
    /* this generation's bases and the next (elite and parents), and the candidates the
     * evaluator builds for the validation */
    double rows = 2 * (1 + T) + (cfg->ga.validation_episodes > 1 ? cfg->ga.validation_candidates : 0);
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
    if (base->bc_dim > 0) ga->bcs = nevo_alloc(sizeof(float) * (size_t)ga->P * (size_t)base->bc_dim);
    if (variant == NEVO_GA_NS) {
        nevo_archive_init(&ga->archive, base->bc_dim);
        ga->novelty = nevo_alloc(sizeof(double) * (size_t)ga->P);
        ga->self = nevo_alloc(sizeof(int) * (size_t)ga->P);
        ga->sel_order = nevo_alloc(sizeof(int) * (size_t)ga->P);
        for (int i = 0; i < ga->P; i++) ga->self[i] = i;
    }
    (void)err;
    *out = &ga->base;
    return NEVO_OK;
}
