/* Training algorithms: Deep GA, random search and GA-NS; OpenAI ES and the NS-ES
 * family. One registry (algo.c) lists them with their config sections and checks.
 *
 * An algorithm never runs an episode itself: it asks for evaluations and is told their
 * results. A generation is one or more rounds of
 *     ts = nevo_algo_ask(a);                        what to evaluate (tasks.h: plain data)
 *     ... run ts's episodes anywhere (nevo_evaluate_tasks, another process) ...
 *     nevo_algo_tell(a, results, task_stats, task_states, &stats, &done);
 * until done (the GA evaluates its children, then its elite candidates; ES its
 * perturbations, then its updated mean; the NS family first evaluates its agents once). nevo_train_generation (train.h) is that loop
 * over an evaluator. An algorithm's whole state serialises into a checkpoint, from
 * which a resumed run continues bit-identically. */
#ifndef NEVO_ALGO_H
#define NEVO_ALGO_H

#include "nevo/comm.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/io.h"
#include "nevo/noise.h"
#include "nevo/policy.h"
#include "nevo/supervised.h"
#include "nevo/tasks.h"
#include "nevo/threads.h"

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
    int has_grad_cosine;   /* ES on a dataset with es.grad_cosine: */
    double grad_cosine;    /* the cosine between the step's direction and the true gradient */
    int has_rl;            /* an actor-learner run (algo vtrace, r2d2): its runtime's figures */
    long long rl_updates;  /* learner updates so far */
    double rl_frames_per_s, rl_updates_per_s; /* in this generation */
    double rl_batch;       /* mean rows per inference batch */
    double rl_queue;       /* mean trajectories waiting when the learner took a batch */
    double rl_lag;         /* mean updates between the parameters that acted and the learner's */
    double rl_lr;          /* the learning rate of this generation's updates (optim.lr_decay) */
    int has_replay;        /* a learner with a replay buffer (algo r2d2): */
    int rl_replay;         /* sequences in it */
    double rl_loss;        /* the last update's loss per step (mean over the batch's steps) */
    int on_data;           /* a run on a dataset: data holds its best policy's scores */
    NevoDataScores data;
} NevoGenStats;

/* --- the registry ---------------------------------------------------------------- */

#define NEVO_ALGO_NOVELTY 1u  /* scores behaviours: needs an env with a behaviour
                                 characterisation, reports archive and novelty */
#define NEVO_ALGO_OBS_NORM 2u /* honours es.obs_norm (observation normalisation) */
#define NEVO_ALGO_GRADIENT 4u /* runs its own generations (nevo_algo_train), no tasks */
#define NEVO_ALGO_DATASET 8u  /* needs a dataset (config key `dataset`) */
#define NEVO_ALGO_LR_DECAY 16u /* honours optim.lr_decay (nevo_algo_lr_scale) */

typedef struct NevoAlgoInfo {
    const char *name;     /* the config's `algo` */
    const char *summary;  /* one line, for help texts */
    const char *sections; /* the config sections it reads, e.g. "ga ns" */
    unsigned flags;       /* NEVO_ALGO_* */
} NevoAlgoInfo;

int nevo_algo_count(void);
const NevoAlgoInfo *nevo_algo_info(int i); /* 0 <= i < nevo_algo_count() */
/* The entry named `name`, or NULL. */
const NevoAlgoInfo *nevo_algo_find(const char *name);
/* Every check that depends on the algorithm: its name, its sections' cross-key rules
 * and, given the env's spec, what it needs of the env. One line naming the problem. */
NevoStatus nevo_algo_check(const NevoConfig *cfg, const NevoEnvSpec *spec, NevoError *err);
/* Bytes the largest buffers of a run of this config take for a network of nparams
 * parameters: the noise table, the evaluator's rows and population (episodes > 1), and
 * the algorithm's own state (the GA's parents and elite, the ES agents with their
 * Adam moments). An estimate, a lower bound of what the run allocates. */
double nevo_algo_memory_bytes(const NevoConfig *cfg, size_t nparams);
/* nevo_config_check_params, and nevo_config_memory_limit of nevo_algo_memory_bytes:
 * training and checkpoint loading check it before they allocate. */
NevoStatus nevo_algo_check_memory(const NevoConfig *cfg, size_t nparams, NevoError *err);
/* The noise table a run of this config uses, in floats: noise_table_floats, or where
 * that is 0, nevo_noise_auto_size's; for a gradient algorithm, which draws only its
 * initial network from it, the smallest power of two from NEVO_NOISE_MIN_FLOATS above
 * the network. */
size_t nevo_algo_noise_floats(const NevoConfig *cfg, size_t nparams);
/* Whether the config's policy normalises its observations (the flag nevo_policy_new
 * takes): es.obs_norm under an algorithm that honours it. */
int nevo_algo_obs_norm(const NevoConfig *cfg);

/* --- an algorithm ------------------------------------------------------------------ */

typedef struct NevoAlgo NevoAlgo;

/* Creates the algorithm cfg->algo names (after nevo_algo_check). Borrowed: the policy
 * (ES updates its observation normalisation), the noise table, and the pool its own
 * parallel work runs on (building parents, novelty, the ES gradient). */
NevoStatus nevo_algo_new(const NevoConfig *cfg, const NevoEnv *env, NevoPolicy *policy, const NevoNoise *noise,
                         NevoPool *pool, NevoAlgo **out, NevoError *err);
/* The same on a dataset (cfg->dataset names it; train is its training split, borrowed):
 * an ask/tell algorithm's tasks are then scored by nevo_supervised_tasks, and a
 * gradient algorithm trains on train. */
NevoStatus nevo_algo_new_on_data(const NevoConfig *cfg, const NevoDataView *train, NevoPolicy *policy,
                                 const NevoNoise *noise, NevoPool *pool, NevoAlgo **out, NevoError *err);
void nevo_algo_free(NevoAlgo *a);

/* Whether the algorithm runs its generations itself (NEVO_ALGO_GRADIENT): then a
 * generation is nevo_algo_train, which fills stats like a completed tell. */
int nevo_algo_trains_itself(const NevoAlgo *a);
/* An algorithm that trains itself as replicas (replica.h): each rank of comm computes
 * its shard of every batch's gradient, all-reduced in the fixed order, so every rank,
 * whatever their number, holds the parameters one process would. NULL: this process
 * alone. Whether it can: nevo_algo_replicates. */
int nevo_algo_replicates(const NevoAlgo *a);
void nevo_algo_set_comm(NevoAlgo *a, NevoComm *comm);

/* How an actor-learner's validation (rl.validation_every) plays its greedy policy: theta
 * for `episodes` episodes named by seed (nevo_eval_params' naming), their mean return and
 * frames out. The engine sets it (its evaluator lives above the algorithms); without it
 * a validation fails with a message. */
typedef NevoStatus (*NevoValidateFn)(void *ctx, const float *theta, int episodes, uint64_t seed, double *mean,
                                     long long *frames, NevoError *err);
void nevo_algo_set_validate(NevoAlgo *a, NevoValidateFn fn, void *ctx);
NevoStatus nevo_algo_train(NevoAlgo *a, NevoGenStats *stats, NevoError *err);

/* The evaluation the current generation needs next. The set and what it points to
 * stay valid, unchanged, until the nevo_algo_tell that answers it; asking again
 * before that gives the same set. */
const NevoTaskSet *nevo_algo_ask(NevoAlgo *a);
/* The results of the last set asked for (results[i] for task i; task_stats: those of
 * tasks flagged NEVO_TASK_RECORD_OBS, else NULL; task_states: those of tasks flagged
 * NEVO_TASK_RECORD_STATES, else NULL). Sets *done when the generation is
 * complete, and then fills stats. NEVO_ERR_INVALID where the results cannot be this
 * set's (a negative length, a non-finite return). */
NevoStatus nevo_algo_tell(NevoAlgo *a, const NevoEpisode *results, const NevoObsStats *task_stats,
                          const NevoStates *task_states, NevoGenStats *stats, int *done, NevoError *err);

/* Generations completed so far. */
int nevo_algo_generations_done(const NevoAlgo *a);
/* Parameters of the current best policy, nparams floats: the GA's elite, ES's mean (the
 * NS family's: the mean of the agent with the best last reward). With observation
 * normalisation the policy holds the run's statistics already. */
void nevo_algo_best(const NevoAlgo *a, float *theta);

/* Behaviours (bc_dim floats each) of the last generation's population and of the
 * novelty archive, for pictures; NULL with *n = 0 when there are none. */
const float *nevo_algo_behaviours(const NevoAlgo *a, int *n);
const float *nevo_algo_archive(const NevoAlgo *a, int *n);

/* Whole algorithm state, for checkpoints: taken between generations. */
void nevo_algo_save(const NevoAlgo *a, NevoBuf *buf);
NevoStatus nevo_algo_load(NevoAlgo *a, NevoReader *r, NevoError *err);

#endif
