/* Training algorithms behind one interface: Deep GA, random search (the GA with no
 * parents) and OpenAI ES. An algorithm owns its population and state; each call of
 * nevo_algo_generation runs one generation through the evaluator. Its whole state
 * serialises into a checkpoint, from which a resumed run continues bit-identically. */
#ifndef NEVO_ALGO_H
#define NEVO_ALGO_H

#include "nevo/config.h"
#include "nevo/eval.h"
#include "nevo/io.h"
#include "nevo/policy.h"

/* What one generation reports (a line of metrics.jsonl). */
typedef struct NevoGenStats {
    int generation;        /* 0-based index of the generation just run */
    long long frames;      /* env steps in this generation, validation included */
    long long episodes;
    double best, mean, median; /* fitness over the population */
    double elite_mean;     /* GA: elite's validation mean; ES: current mean's return */
    int archive_size;      /* novelty search: archive entries after this generation */
    double novelty_mean;   /* novelty search: mean novelty of the scored behaviours */
    double reward_weight;  /* NSRA-ES: current reward weight w */
    int bc_dim;            /* > 0 when bc holds the behaviour of the reported policy: */
    float bc[NEVO_ENV_MAX_BC]; /* ES the updated mean's, GA the fittest child's */
} NevoGenStats;

typedef struct NevoAlgo NevoAlgo;

/* Creates the algorithm named by cfg->algo. The policy is borrowed (ES updates its
 * observation normalisation); the evaluator must be built for env and policy. */
NevoStatus nevo_algo_new(const NevoConfig *cfg, const NevoEnv *env, NevoPolicy *policy,
                         const NevoNoise *noise, NevoEvaluator *ev, NevoAlgo **out, NevoError *err);
void nevo_algo_free(NevoAlgo *a);

/* Runs one generation. After an error (an env's NaN: NEVO_ERR_NUMERIC) the generation
 * may be partly applied (ES has updated its mean before evaluating it): free the
 * algorithm, or restore its last checkpoint, rather than going on or saving it. */
NevoStatus nevo_algo_generation(NevoAlgo *a, NevoGenStats *stats, NevoError *err);
/* Generations completed so far. */
int nevo_algo_generations_done(const NevoAlgo *a);
/* Parameters of the current best policy (GA elite, ES mean), nparams floats. Also
 * sets the policy's observation normalisation to match (ES). */
void nevo_algo_best(const NevoAlgo *a, float *theta);

/* Behaviours (bc_dim floats each) of the last generation's population and of the
 * novelty archive, for pictures; NULL with *n = 0 when there are none. */
const float *nevo_algo_behaviours(const NevoAlgo *a, int *n);
const float *nevo_algo_archive(const NevoAlgo *a, int *n);

/* Whole algorithm state, for checkpoints. */
void nevo_algo_save(const NevoAlgo *a, NevoBuf *buf);
NevoStatus nevo_algo_load(NevoAlgo *a, NevoReader *r, NevoError *err);

#endif
