/* What the algorithms share (internal): the dispatch table, ranking helpers and the
 * reserved stream names of evaluation episodes. */
#ifndef NEVO_ALGO_INTERNAL_H
#define NEVO_ALGO_INTERNAL_H

#include "nevo/algo.h"

/* Individual ids used in episode-seed stream names for episodes that are not a
 * population member's own: validation episodes (common to every elite candidate) and
 * the final evaluation. */
#define NEVO_STREAM_VALIDATION 0xFFFFFFF0u
#define NEVO_STREAM_FINAL_EVAL 0xFFFFFFF1u
#define NEVO_STREAM_CENTER 0xFFFFFFF2u

typedef struct NevoAlgoOps {
    NevoStatus (*generation)(NevoAlgo *a, NevoGenStats *stats, NevoError *err);
    void (*best)(const NevoAlgo *a, float *theta);
    void (*save)(const NevoAlgo *a, NevoBuf *buf);
    NevoStatus (*load)(NevoAlgo *a, NevoReader *r, NevoError *err);
    void (*free)(NevoAlgo *a);
    const float *(*behaviours)(const NevoAlgo *a, int *n);
    const float *(*archive)(const NevoAlgo *a, int *n);
} NevoAlgoOps;

/* Every algorithm struct begins with this header. */
struct NevoAlgo {
    const NevoAlgoOps *ops;
    const NevoConfig *cfg;
    const NevoEnv *env;
    NevoPolicy *policy;
    const NevoNoise *noise;
    NevoEvaluator *ev;
    int generation; /* generations completed */
    /* ARS's removal of the alive bonus (es.reward_shift): while `shaped` is set,
     * nevo_algo_rollouts also writes there each individual's mean of (return - shift x
     * length), for the update alone; `fitness` and every report keep true returns. */
    double reward_shift;
    double *shaped;
    /* ES: while set, networks 2i and 2i + 1 are built from the same noise slice, and
     * with one episode each nevo_algo_rollouts_built has one worker take both, one
     * after the other (NEVO_TASK_WITH_NEXT) */
    int pairs;
};

/* Each fills the NevoAlgo header from `base` (which nevo_algo_new prepares). */
NevoStatus nevo_ga_new(const NevoAlgo *base, NevoAlgo **out, NevoError *err);
NevoStatus nevo_es_new(const NevoAlgo *base, NevoAlgo **out, NevoError *err);

/* Indices 0..n-1 ordered by fitness, best first; ties keep the lower index first. */
void nevo_rank_desc(const double *fitness, int n, int *order);
/* OpenAI ES centred ranks: rank 0 (worst) .. n-1 (best) mapped linearly onto
 * [-0.5, 0.5]; ties broken by index, as a stable argsort would. */
void nevo_centered_ranks(const double *fitness, int n, double *out);
double nevo_median(const double *x, int n);

/* plus = theta + sigma * eps and minus = theta - sigma * eps, elementwise (d = sigma *
 * eps[k] rounded, then added or subtracted), either row NULL to skip it; plus may be
 * theta (in place, as GA replay does). One pass, in the kernel set's widest useful
 * vectors (the same bits in every set). stream: on x86 the rows are written
 * with non-temporal stores, for a population the forward streams back from memory
 * (beyond the caches): that saves the read for ownership of every line written and
 * keeps theta in L2 for the next row built from it. Without it, ordinary stores, for a
 * row that is read next from the cache (nevo_evaluate_built). */
void nevo_perturb_rows(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                       int stream);

/* g[k] += w[0] rows[0][k] + ... + w[m-1] rows[m-1][k] for k0 <= k < k1, in double, the
 * rows added one after another in the order given (each product and each sum rounded
 * once), so the bits do not depend on the kernel set or on how [0, np) is split. */
void nevo_weighted_sum(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1);

/* (bc: NULL, or (n, bc_dim) floats that receive each network's mean behaviour over its
 * episodes.) Runs each of n networks (rows of params) for `episodes` episodes; network i's
 * episode e gets the seed named (seed, ENV_SEED, generation, stream_ids[i] (or i if
 * stream_ids is NULL), e), so networks given the same stream id face the same
 * episodes. Writes each network's mean return to fitness[i]; adds frames and episodes
 * to stats. obs: NULL, or running statistics that gain the observations of a random
 * fraction obs_prob of the episodes, merged in task order. */
NevoStatus nevo_algo_rollouts(NevoAlgo *a, const float *params, int n, int episodes,
                              uint32_t generation, const uint32_t *stream_ids, double *fitness,
                              float *bc, NevoGenStats *stats, NevoObsStats *obs, double obs_prob,
                              NevoError *err);
/* The same with network i's parameters built by build(build_ctx, i, theta) as each of
 * its episodes starts (nevo_evaluate_built) instead of read from params (NULL then),
 * and the networks' episodes queued in the order `queue` (n network indices) lists, or
 * ascending if NULL: no result depends on it, only which builds follow which. */
NevoStatus nevo_algo_rollouts_built(NevoAlgo *a, const float *params, NevoBuildFn build, void *build_ctx, int n,
                                    const int *queue, int episodes, uint32_t generation, const uint32_t *stream_ids,
                                    double *fitness, float *bc, NevoGenStats *stats, NevoObsStats *obs,
                                    double obs_prob, NevoError *err);

#endif
