/* Deep GA (Such et al. 2017) and random search (the GA without parents).
 *
 * Genomes are compact noise-reference chains: (init_ref, (ref_1, sigma_1), ...), each
 * ref a (generation, individual) stream name, so theta = init(init_ref) + sum_j
 * sigma_j * eps(ref_j). Parents are cached as full theta, so a child costs one noise
 * draw and one vector add; after a restart each parent is replayed from its chain
 * with the same float operations in the same order, so replay is bit-exact.
 *
 * One generation (g >= 1): child i = parent + sigma * eps(g, i), the parent drawn
 * uniformly from the T parents by stream (SELECT, g, i); with elitism, child 0 is the
 * elite copied unmodified. Each child is evaluated on `episodes` episodes; the top
 * `validation_candidates` (the previous elite taking one slot) are re-evaluated on
 * `validation_episodes` common episodes and the best mean becomes the elite; the top
 * T by fitness become the next parents, the elite always among them.
 *
 * GA-NS (Such et al. 2017; Lehman & Stanley 2011) is the same loop with novelty as the
 * selection score: each child's behaviour is scored against the archive and the rest of
 * the population, the top T by novelty become parents, and `ns.archive_add` random
 * children join the archive each generation. The elite is still the best by reward (it
 * is what the run reports and saves). */
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "nevo/novelty.h"
#include "nevo/rng.h"

typedef struct Ref {
    uint32_t generation, individual;
    float sigma;
} Ref;

/* A genome: where its init came from plus its mutations, oldest first. */
typedef struct Genome {
    uint32_t init_generation, init_individual;
    int n, cap;
    Ref *refs;
} Genome;

typedef struct GA {
    NevoAlgo base;
    int P, T, rs;
    size_t np;
    float *pop;           /* (P, np) the children, only with several episodes per child;
                             with one, each is built as its episode starts
                             (nevo_evaluate_built) */
    Genome *genomes;      /* (P) the children's genomes */
    int *source;          /* (P) what each child is built from (make_children) */
    int *build_order;     /* (P) the children grouped by what they are built from */
    uint32_t gen;         /* the generation being built */
    float *parents;       /* (T, np) cached parent theta */
    float *parents_next;  /* (T, np) the next generation's, built from parents */
    Genome *parent_genomes; /* (T) */
    int n_parents;        /* 0 before the first generation */
    float *elite;         /* (np) */
    float *elite_next;    /* (np) */
    Genome elite_genome;
    int has_elite;
    float *val_rows;      /* (validation candidates, np): their thetas, side by side;
                             NULL without validation or where the candidates are
                             validated in the parents' rows (validates_in_place) */
    double *fitness;      /* (P + 1) */
    int *order;           /* children by fitness, best first */
    /* GA-NS */
    int ns;
    int bc_dim;
    NevoArchive archive;
    float *bcs;           /* (P, bc_dim) the children's behaviours (envs with a BC) */
    int have_bcs;         /* bcs hold a generation's behaviours */
    double *novelty;      /* (P) */
    int *self;            /* (P) 0..P-1: each child excludes itself from its neighbours */
    int *sel_order;       /* children by selection score (novelty), best first */
} GA;

static void genome_copy(Genome *dst, const Genome *src) {
    if (dst->cap < src->n) {
        free(dst->refs);
        dst->cap = src->n + 16;
        dst->refs = nevo_alloc(sizeof(Ref) * (size_t)dst->cap);
    }
    dst->init_generation = src->init_generation;
    dst->init_individual = src->init_individual;
    dst->n = src->n;
    if (src->n) memcpy(dst->refs, src->refs, sizeof(Ref) * (size_t)src->n);
}

static void genome_push(Genome *g, Ref r) {
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        Ref *grown = nevo_alloc(sizeof(Ref) * (size_t)cap);
        if (g->n) memcpy(grown, g->refs, sizeof(Ref) * (size_t)g->n);
        free(g->refs);
        g->refs = grown;
        g->cap = cap;
    }
    g->refs[g->n++] = r;
}

/* dst = src + sigma * eps(ref), eps the noise-table slice named by ref: the one
 * mutation step, shared by live runs (a child from its cached parent) and replay
 * (in place, dst == src), so both round the same way. stream: nevo_perturb_rows's. */
static void apply_mutation(const GA *ga, float *dst, const float *src, Ref r, int stream) {
    const float *eps = nevo_noise_slice(ga->base.noise, ga->np, ga->base.cfg->seed, NEVO_RNG_MUTATE,
                                        r.generation, r.individual, 0);
    nevo_perturb_rows(dst, NULL, src, r.sigma, eps, ga->np, stream);
}

static void replay(const GA *ga, const Genome *g, float *theta) {
    nevo_policy_init_params(ga->base.policy, ga->base.noise, ga->base.cfg->seed, g->init_generation,
                            g->init_individual, theta);
    for (int j = 0; j < g->n; j++) apply_mutation(ga, theta, theta, g->refs[j], 1);
}

/* What child i's parameters are built from (make_children decides, serially). */
enum { FROM_INIT = -2, FROM_ELITE = -1 }; /* else: the index of a parent */

/* Child i's parameters built into theta: a fresh init, the elite, or parent + sigma *
 * noise slice; i = P is the previous elite. Reads the current parents and elite, so it
 * must run before either is replaced. stream: nevo_perturb_rows's (a row of pop, which
 * the forward reads back from memory, against a row built as its episode starts,
 * which stays in the cache for the episode's steps). */
static void make_child(const GA *ga, int i, float *theta, int stream) {
    if (i == ga->P || ga->source[i] == FROM_ELITE) {
        memcpy(theta, ga->elite, sizeof(float) * ga->np);
    } else if (ga->source[i] == FROM_INIT) {
        nevo_policy_init_params(ga->base.policy, ga->base.noise, ga->base.cfg->seed, ga->gen, (uint32_t)i, theta);
    } else {
        apply_mutation(ga, theta, ga->parents + (size_t)ga->source[i] * ga->np,
                       ga->genomes[i].refs[ga->genomes[i].n - 1], stream);
    }
}

/* Child i's parameters: its pop row where the children were built into pop, else built
 * again (the same bits). */
static void child_theta(const GA *ga, int i, float *theta) {
    if (ga->pop && i < ga->P)
        memcpy(theta, ga->pop + (size_t)i * ga->np, sizeof(float) * ga->np);
    else
        make_child(ga, i, theta, 0);
}

/* Rows of children (child_theta), one row per task over the pool: the parents (and,
 * where they are built apart, the validation candidates), 31 MinAtar networks a
 * generation then, took 8% of a 2-thread generation from scratch built one after
 * another. */
typedef struct ThetaJob {
    const GA *ga;
    const int *which; /* (n) the children */
    float *rows;      /* (n, np) */
} ThetaJob;

static void theta_row(void *vctx, int t, int worker) {
    const ThetaJob *job = vctx;
    (void)worker;
    child_theta(job->ga, job->which[t], job->rows + (size_t)t * job->ga->np);
}

static void child_thetas(const GA *ga, const int *which, int n, float *rows) {
    ThetaJob job = {ga, which, rows};
    nevo_pool_run(nevo_evaluator_pool(ga->base.ev), n, theta_row, &job);
}

/* nevo_evaluate_built's builder: the child as its episode starts */
static void build_child(void *ctx, int net, float *theta) { make_child(ctx, net, theta, 0); }

typedef struct ChildJob {
    GA *ga;
    const int *order; /* children in build order: grouped by parent */
} ChildJob;

/* Builds child order[t] into its pop row (several episodes per child). The children are
 * independent, so they are built in parallel, one vector add each over nparams floats
 * (at MinAtar's 132k parameters and P = 256, a generation's largest memory traffic
 * outside the forward pass). */
static void build_pop_row(void *vctx, int t, int worker) {
    const ChildJob *job = vctx;
    int i = job->order[t];
    (void)worker;
    make_child(job->ga, i, job->ga->pop + (size_t)i * job->ga->np, 1);
}

static void make_children(GA *ga, uint32_t gen) {
    const NevoConfig *cfg = ga->base.cfg;
    int *source = ga->source;
    ga->gen = gen;
    for (int i = 0; i < ga->P; i++) {
        Genome *g = &ga->genomes[i];
        if (ga->n_parents == 0 || ga->rs) {
            g->init_generation = gen;
            g->init_individual = (uint32_t)i;
            g->n = 0;
            source[i] = FROM_INIT;
            continue;
        }
        if (cfg->ga.elitism && i == 0 && ga->has_elite) {
            genome_copy(g, &ga->elite_genome);
            source[i] = FROM_ELITE;
            continue;
        }
        NevoRng rng;
        nevo_rng_init(&rng, cfg->seed, NEVO_RNG_SELECT, gen, (uint32_t)i, 0);
        int p = (int)nevo_rng_below(&rng, (uint32_t)ga->n_parents);
        genome_copy(g, &ga->parent_genomes[p]);
        Ref r = {gen, (uint32_t)i, (float)cfg->ga.sigma};
        genome_push(g, r);
        source[i] = p;
    }
    /* the children of one parent are built one after another, so each parent is read
     * from memory about once and then from the cache (the build order changes no
     * result: each child has its own row): into pop here, or as their episodes start,
     * queued in this order */
    int *order = ga->build_order, n = 0;
    for (int i = 0; i < ga->P; i++)
        if (source[i] < 0) order[n++] = i;
    for (int p = 0; p < ga->n_parents; p++)
        for (int i = 0; i < ga->P; i++)
            if (source[i] == p) order[n++] = i;
    NEVO_ASSERT(n == ga->P); /* every child once: a queue order must be a permutation */
    if (!ga->pop) return;
    ChildJob job = {ga, order};
    nevo_pool_run(nevo_evaluator_pool(ga->base.ev), ga->P, build_pop_row, &job);
}

/* How many candidates the validation re-evaluates */
static int n_candidates(const GA *ga) {
    int k = ga->base.cfg->ga.validation_candidates;
    return k < ga->P ? k : ga->P;
}

/* Whether the validation runs on the parents' rows (ga_generation) */
static int validates_in_place(const GA *ga) { return !ga->rs && !ga->ns && n_candidates(ga) <= ga->T; }

static NevoStatus ga_generation(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    GA *ga = (GA *)a;
    const NevoConfig *cfg = a->cfg;
    uint32_t gen = (uint32_t)a->generation;
    make_children(ga, gen);
    NevoStatus st = nevo_algo_rollouts_built(a, ga->pop, ga->pop ? NULL : build_child, ga, ga->P,
                                             ga->pop ? NULL : ga->build_order, cfg->episodes, gen, NULL, ga->fitness,
                                             ga->bcs, stats, NULL, 0.0, err);
    if (st) return st;
    ga->have_bcs = ga->bcs != NULL;
    nevo_rank_desc(ga->fitness, ga->P, ga->order);
    const int *sel = ga->order;
    if (ga->ns) {
        nevo_novelty(&ga->archive, ga->bcs, ga->P, ga->bcs, ga->self, ga->P, cfg->ns.k,
                     nevo_evaluator_pool(a->ev), ga->novelty);
        nevo_rank_desc(ga->novelty, ga->P, ga->sel_order);
        sel = ga->sel_order;
        double ns_sum = 0.0;
        for (int i = 0; i < ga->P; i++) ns_sum += ga->novelty[i];
        stats->novelty_mean = ns_sum / ga->P;
    }
    stats->best = ga->fitness[ga->order[0]];
    if (ga->bcs) {
        stats->bc_dim = ga->bc_dim;
        memcpy(stats->bc, ga->bcs + (size_t)ga->order[0] * ga->bc_dim, sizeof(float) * (size_t)ga->bc_dim);
    }
    double sum = 0.0;
    for (int i = 0; i < ga->P; i++) sum += ga->fitness[i];
    stats->mean = sum / ga->P;
    stats->median = nevo_median(ga->fitness, ga->P);

    /* Elite candidates: the top k children; the previous elite takes the last slot
     * unless it is already among them (as child 0 under elitism). Its index is P. */
    int k = n_candidates(ga);
    int cand[1000]; /* validation_candidates <= 1000 (config schema) */
    for (int c = 0; c < k; c++) cand[c] = ga->order[c];
    int elite_in_pop = cfg->ga.elitism && ga->has_elite && !ga->rs && ga->n_parents > 0;
    if (ga->has_elite && !elite_in_pop) {
        cand[k - 1] = ga->P;
    } else if (elite_in_pop) {
        int present = 0;
        for (int c = 0; c < k; c++) present |= cand[c] == 0;
        if (!present) cand[k - 1] = 0;
    }
    /* Parents: top T by the selection score, built into parents_next from the current
     * parents and elite, which are replaced (with the parents' genomes) only once the
     * validation has succeeded. They are built before it because outside GA-NS and
     * random search the candidates are the first parents (both ranked by fitness) but
     * for the last, which may be the previous elite: the validation then runs on the
     * parents' rows (in_place) instead of building the candidates again (k builds a
     * generation, 10 of the 30 outside the children in the MinAtar configs). Elsewhere
     * they are built first too, so that there is one order of steps. */
    if (!ga->rs) child_thetas(ga, sel, ga->T, ga->parents_next);
    int in_place = validates_in_place(ga);
    int elite = cand[0], elite_val_row = -1;
    double elite_score = ga->fitness[elite];
    if (cfg->ga.validation_episodes > 0) {
        /* The candidates, in consecutive rows, all face the same episodes. In place, a
         * last candidate that is not the parent of its row is the previous elite (P) or
         * its copy (child 0 under elitism): its row holds the elite while they run. */
        float *rows = in_place ? ga->parents_next : ga->val_rows;
        float *last = rows + (size_t)(k - 1) * ga->np;
        int swapped = in_place && cand[k - 1] != sel[k - 1];
        if (in_place)
            for (int c = 0; c < k - 1; c++) NEVO_ASSERT(cand[c] == sel[c]);
        else
            child_thetas(ga, cand, k, rows);
        if (swapped) {
            memcpy(ga->elite_next, last, sizeof(float) * ga->np);
            memcpy(last, ga->elite, sizeof(float) * ga->np);
        }
        uint32_t *ids = nevo_alloc(sizeof(uint32_t) * (size_t)k);
        double *val = nevo_alloc(sizeof(double) * (size_t)k);
        for (int c = 0; c < k; c++) ids[c] = NEVO_STREAM_VALIDATION;
        st = nevo_algo_rollouts(a, rows, k, cfg->ga.validation_episodes, gen, ids, val, NULL, stats,
                                NULL, 0.0, err);
        if (swapped) memcpy(last, ga->elite_next, sizeof(float) * ga->np);
        if (st == NEVO_OK) {
            int best = 0;
            for (int c = 1; c < k; c++)
                if (val[c] > val[best]) best = c;
            elite = cand[best];
            if (!in_place) elite_val_row = best;
            elite_score = val[best];
        }
        free(ids);
        free(val);
        if (st) return st;
    }
    stats->elite_mean = elite_score;

    /* From here on the generation commits: the archive grows, the elite and the parents
     * are replaced. A failed validation above leaves all of them as they were. */
    if (ga->ns) {
        for (int j = 0; j < cfg->ns.archive_add; j++) {
            NevoRng rng;
            nevo_rng_init(&rng, cfg->seed, NEVO_RNG_ARCHIVE, gen, (uint32_t)j, 0);
            int i = (int)nevo_rng_below(&rng, (uint32_t)ga->P);
            nevo_archive_add(&ga->archive, ga->bcs + (size_t)i * ga->bc_dim);
        }
        stats->archive_size = ga->archive.n;
    }

    /* The elite's parent row, or -1: then (outside GA-NS, which selects by novelty
     * alone and so leaves the parents as they are: T) it takes the last parent's place,
     * so that the best policy found is always among the parents. */
    int elite_row = ga->ns ? ga->T : -1;
    for (int t = 0; t < ga->T; t++)
        if (sel[t] == elite) elite_row = t;
    if (elite != ga->P) {
        /* its row as a parent or from the validation, else built again */
        if (elite_row >= 0 && elite_row < ga->T)
            memcpy(ga->elite_next, ga->parents_next + (size_t)elite_row * ga->np, sizeof(float) * ga->np);
        else if (elite_val_row >= 0)
            memcpy(ga->elite_next, ga->val_rows + (size_t)elite_val_row * ga->np, sizeof(float) * ga->np);
        else
            child_theta(ga, elite, ga->elite_next);
        float *e = ga->elite;
        ga->elite = ga->elite_next;
        ga->elite_next = e;
        genome_copy(&ga->elite_genome, &ga->genomes[elite]);
    }
    ga->has_elite = 1;
    if (!ga->rs) {
        int T = ga->T;
        for (int t = 0; t < T; t++) genome_copy(&ga->parent_genomes[t], &ga->genomes[sel[t]]);
        if (elite_row < 0) {
            /* row T - 1 was built above, before the validation named the elite: one build
             * wasted in such generations, against another pool phase for it after */
            memcpy(ga->parents_next + (size_t)(T - 1) * ga->np, ga->elite, sizeof(float) * ga->np);
            genome_copy(&ga->parent_genomes[T - 1], &ga->elite_genome);
        }
        float *p = ga->parents;
        ga->parents = ga->parents_next;
        ga->parents_next = p;
        ga->n_parents = T;
    }
    return NEVO_OK;
}

static void ga_best(const NevoAlgo *a, float *theta) {
    const GA *ga = (const GA *)a;
    memcpy(theta, ga->elite, sizeof(float) * ga->np);
}

static void save_genome(NevoBuf *b, const Genome *g) {
    nevo_buf_u32(b, g->init_generation);
    nevo_buf_u32(b, g->init_individual);
    nevo_buf_u32(b, (uint32_t)g->n);
    for (int j = 0; j < g->n; j++) {
        nevo_buf_u32(b, g->refs[j].generation);
        nevo_buf_u32(b, g->refs[j].individual);
        nevo_buf_put(b, &g->refs[j].sigma, 4);
    }
}

static int load_genome(NevoReader *r, Genome *g) {
    g->init_generation = nevo_read_u32(r);
    g->init_individual = nevo_read_u32(r);
    uint32_t n = nevo_read_u32(r);
    if (n > (r->len - r->pos) / 12) return 0;
    g->n = 0;
    for (uint32_t j = 0; j < n; j++) {
        Ref ref;
        ref.generation = nevo_read_u32(r);
        ref.individual = nevo_read_u32(r);
        nevo_read(r, &ref.sigma, 4);
        genome_push(g, ref);
    }
    return nevo_reader_ok(r, false);
}

/* Only genomes are saved: the cached theta are rebuilt by replay on load. */
static void ga_save(const NevoAlgo *a, NevoBuf *b) {
    const GA *ga = (const GA *)a;
    nevo_buf_u32(b, (uint32_t)ga->has_elite);
    if (ga->has_elite) save_genome(b, &ga->elite_genome);
    nevo_buf_u32(b, (uint32_t)ga->n_parents);
    for (int t = 0; t < ga->n_parents; t++) save_genome(b, &ga->parent_genomes[t]);
    if (ga->ns) nevo_archive_save(&ga->archive, b);
}

static NevoStatus ga_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    GA *ga = (GA *)a;
    ga->has_elite = (int)nevo_read_u32(r);
    if (ga->has_elite) {
        if (!load_genome(r, &ga->elite_genome)) goto corrupt;
        replay(ga, &ga->elite_genome, ga->elite);
    }
    uint32_t n = nevo_read_u32(r);
    if (n > (uint32_t)ga->T) goto corrupt;
    ga->n_parents = (int)n;
    for (int t = 0; t < ga->n_parents; t++) {
        if (!load_genome(r, &ga->parent_genomes[t])) goto corrupt;
        replay(ga, &ga->parent_genomes[t], ga->parents + (size_t)t * ga->np);
    }
    if (ga->ns && !nevo_archive_load(&ga->archive, r)) goto corrupt;
    return NEVO_OK;
corrupt:
    return nevo_error(err, NEVO_ERR_CORRUPT, "GA state is truncated or inconsistent");
}

static void ga_free(NevoAlgo *a) {
    GA *ga = (GA *)a;
    for (int i = 0; i < ga->P; i++) free(ga->genomes[i].refs);
    for (int t = 0; t < ga->T; t++) free(ga->parent_genomes[t].refs);
    free(ga->elite_genome.refs);
    free(ga->genomes);
    free(ga->parent_genomes);
    free(ga->pop);
    free(ga->source);
    free(ga->build_order);
    free(ga->parents_next);
    free(ga->elite_next);
    free(ga->parents);
    free(ga->elite);
    free(ga->val_rows);
    free(ga->fitness);
    free(ga->order);
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
    *n = ga->ns ? ga->archive.n : 0;
    return ga->ns ? ga->archive.points : NULL;
}

static const NevoAlgoOps ga_ops = {ga_generation, ga_best, ga_save, ga_load, ga_free, ga_behaviours, ga_archive};

NevoStatus nevo_ga_new(const NevoAlgo *base, NevoAlgo **out, NevoError *err) {
    GA *ga = nevo_alloc(sizeof *ga);
    ga->base = *base;
    ga->base.ops = &ga_ops;
    const NevoConfig *cfg = base->cfg;
    const NevoPolicy *policy = base->policy;
    ga->P = cfg->population;
    ga->rs = strcmp(cfg->algo, "rs") == 0;
    ga->T = ga->rs ? 0 : cfg->ga.truncation;
    ga->np = policy->nparams;
    if (cfg->episodes > 1) ga->pop = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)ga->P);
    ga->source = nevo_alloc(sizeof(int) * (size_t)ga->P);
    ga->build_order = nevo_alloc(sizeof(int) * (size_t)ga->P);
    ga->genomes = nevo_alloc(sizeof(Genome) * (size_t)ga->P);
    ga->parents = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)(ga->T > 0 ? ga->T : 1));
    ga->parents_next = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)(ga->T > 0 ? ga->T : 1));
    ga->parent_genomes = nevo_alloc(sizeof(Genome) * (size_t)(ga->T > 0 ? ga->T : 1));
    ga->elite = nevo_alloc_aligned(sizeof(float) * ga->np);
    ga->elite_next = nevo_alloc_aligned(sizeof(float) * ga->np);
    ga->fitness = nevo_alloc(sizeof(double) * (size_t)(ga->P + 1));
    ga->order = nevo_alloc(sizeof(int) * (size_t)(ga->P + 1));
    ga->ns = strcmp(cfg->algo, "ga-ns") == 0;
    /* kept from one generation to the next: a fresh 5 MB buffer (MinAtar) was zeroed page
     * by page every generation, 2% of a run */
    if (cfg->ga.validation_episodes > 0 && !validates_in_place(ga))
        ga->val_rows = nevo_alloc_aligned(sizeof(float) * ga->np * (size_t)n_candidates(ga));
    ga->bc_dim = nevo_env_spec(base->env)->bc_dim;
    if (ga->bc_dim > 0) ga->bcs = nevo_alloc(sizeof(float) * (size_t)ga->P * ga->bc_dim);
    if (ga->ns) {
        nevo_archive_init(&ga->archive, ga->bc_dim);
        ga->novelty = nevo_alloc(sizeof(double) * (size_t)ga->P);
        ga->self = nevo_alloc(sizeof(int) * (size_t)ga->P);
        ga->sel_order = nevo_alloc(sizeof(int) * (size_t)ga->P);
        for (int i = 0; i < ga->P; i++) ga->self[i] = i;
    }
    (void)err;
    *out = &ga->base;
    return NEVO_OK;
}
