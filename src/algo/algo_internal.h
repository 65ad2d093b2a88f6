/* What the algorithms share (internal): the operations an algorithm fills in, the state
 * every algorithm begins with, and helpers for task sets and rankings. */
#ifndef NEVO_ALGO_INTERNAL_H
#define NEVO_ALGO_INTERNAL_H

#include "nevo/algo.h"
#include "nevo/supervised.h"

typedef struct NevoAlgoOps {
    /* fills a->ts (nevo_algo_tasks and the nets) for the evaluation the generation
     * needs next */
    void (*ask)(NevoAlgo *a);
    /* takes the results of a->ts; returns 1 once the generation is complete */
    int (*tell)(NevoAlgo *a, const NevoEpisode *results, const NevoObsStats *task_stats,
                const NevoStates *task_states);
    void (*best)(const NevoAlgo *a, float *theta);
    void (*save)(const NevoAlgo *a, NevoBuf *buf);
    NevoStatus (*load)(NevoAlgo *a, NevoReader *r, NevoError *err);
    void (*free)(NevoAlgo *a);
    /* the behaviours and archive it reports (NULL: none) */
    const float *(*behaviours)(const NevoAlgo *a, int *n);
    const float *(*archive)(const NevoAlgo *a, int *n);
    /* a whole generation by the algorithm itself, no tasks (gradient algorithms, flag
     * NEVO_ALGO_GRADIENT; ask and tell are then NULL): fills stats, returns its status */
    NevoStatus (*train)(NevoAlgo *a, NevoGenStats *stats, NevoError *err);
    /* the replicas train runs across (gradient algorithms; NULL: this process alone) */
    void (*set_comm)(NevoAlgo *a, NevoComm *comm);
} NevoAlgoOps;

/* Every algorithm struct begins with this. */
struct NevoAlgo {
    const NevoAlgoOps *ops;
    const NevoAlgoInfo *info;
    const NevoConfig *cfg;
    const NevoEnv *env;   /* NULL on a dataset */
    const NevoDataView *data; /* the training split on a dataset, else NULL */
    int bc_dim;           /* the env's behaviour size (0: none) */
    NevoPolicy *policy;
    const NevoNoise *noise;
    NevoPool *pool;
    int generation;       /* generations completed */
    NevoGenStats stats;   /* the generation in progress */
    int asked;            /* ts holds the current evaluation */
    NevoTaskSet ts;       /* the current evaluation, over nets and tasks below */
    NevoNet *nets;
    NevoTask *tasks;
    int nets_cap, tasks_cap;
    NevoValidateFn validate; /* nevo_algo_set_validate's */
    void *validate_ctx;
};

/* optim.lr_decay's factor on optim.lr for the generation about to run: 1 for "none";
 * for "linear" 1 - the fraction of the run done, from the generations completed (times
 * frames_per_generation against max_frames where the run has one, else against
 * generations), never below 0. */
double nevo_algo_lr_scale(const NevoAlgo *a, double frames_per_generation);

/* ga.sigma_decay's and es.sigma_decay's schedule: generation gen's noise std,
 * max(floor, sigma decay^gen) (sigma itself while decay is 1), a function of the
 * generation alone, so a resumed run recomputes it. */
double nevo_algo_sigma(double sigma, double decay, double floor, uint32_t gen);

/* Each registry entry's constructor fills a struct beginning with a copy of `base`
 * (which nevo_algo_new prepares) and sets its ops; variant is the entry's. */
NevoStatus nevo_ga_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err);
NevoStatus nevo_es_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err);
NevoStatus nevo_ga_check(const NevoConfig *cfg, int variant, NevoError *err);
NevoStatus nevo_es_check(const NevoConfig *cfg, int variant, NevoError *err);
/* es.factored's and ga.factored's needs (prefix "es" or "ga"; `who` names what runs
 * factored): a rank, an env and a feed-forward policy, as the factored forward has. */
NevoStatus nevo_algo_factored_check(const NevoConfig *cfg, const char *prefix, const char *who, int factored,
                                    int rank, NevoError *err);
/* The bytes of the algorithm's own state for a network of nparams parameters. */
double nevo_ga_state_bytes(const NevoConfig *cfg, int variant, size_t nparams);
double nevo_es_state_bytes(const NevoConfig *cfg, int variant, size_t nparams);
NevoStatus nevo_sgd_algo_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err);
NevoStatus nevo_sgd_check(const NevoConfig *cfg, int variant, NevoError *err);
double nevo_sgd_state_bytes(const NevoConfig *cfg, int variant, size_t nparams);
NevoStatus nevo_vtrace_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err);
NevoStatus nevo_vtrace_check(const NevoConfig *cfg, int variant, NevoError *err);
double nevo_vtrace_state_bytes(const NevoConfig *cfg, int variant, size_t nparams);
NevoStatus nevo_r2d2_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err);
NevoStatus nevo_r2d2_check(const NevoConfig *cfg, int variant, NevoError *err);
double nevo_r2d2_state_bytes(const NevoConfig *cfg, int variant, size_t nparams);
enum { NEVO_GA_PLAIN, NEVO_GA_RS, NEVO_GA_NS };
enum { NEVO_ES_PLAIN, NEVO_ES_NS, NEVO_ES_NSR, NEVO_ES_NSRA };

/* --- task sets --------------------------------------------------------------------- */

/* Starts a->ts over n_nets networks (returned, to be filled in; the caller sets the
 * set's bases), with the policy's and env's context and `episodes` tasks per
 * network: network i's episode e at task i * episodes + e, its seed named (seed,
 * ENV_SEED, generation, ids[i] (i where ids is NULL), e), so networks given one id
 * face the same episodes. On a dataset every network of the call takes the first's id
 * (ids[0], or 0): all face the same batches, as no-mini-batch ES scores its members. */
NevoNet *nevo_algo_tasks(NevoAlgo *a, int n_nets, int episodes, uint32_t generation, const uint32_t *ids);
/* Flags the tasks whose observations feed the statistics: each with probability prob,
 * by the stream (seed, OBS_NORM, generation, task). */
void nevo_algo_record_obs(NevoAlgo *a, uint32_t generation, double prob);

/* Per network of a->ts (`episodes` tasks each, as nevo_algo_tasks lays them out): the
 * mean return into fitness; where shaped is not NULL, the mean of (return - shift x
 * length) (ARS's removal of the alive bonus); where bc is not NULL, the mean behaviour
 * (bc_dim floats each). Adds the episodes and frames to a->stats. */
void nevo_algo_net_means(NevoAlgo *a, const NevoEpisode *results, int episodes, double *fitness, double *shaped,
                         double shift, float *bc);

/* --- rankings ---------------------------------------------------------------------- */

/* Indices 0..n-1 ordered by fitness, best first; ties keep the lower index first. */
void nevo_rank_desc(const double *fitness, int n, int *order);
/* OpenAI ES centred ranks: rank 0 (worst) .. n-1 (best) mapped linearly onto
 * [-0.5, 0.5]; ties broken by index, as a stable argsort would. */
void nevo_centered_ranks(const double *fitness, int n, double *out);
double nevo_median(const double *x, int n);
/* best, mean and median of n fitness values into a->stats */
void nevo_algo_fitness_stats(NevoAlgo *a, const double *fitness, int n);

#endif
