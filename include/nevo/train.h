/* Training runs and policy evaluation: what `nevo train` and `nevo eval` do, as
 * library calls.
 *
 * A run directory holds: config.json (the resolved config), metrics.jsonl (one JSON
 * object per generation), checkpoint.bin (the latest checkpoint), policy.nevo (the
 * best policy so far, a standalone file) and, at the end, summary.json and (envs with
 * a behaviour characterisation) behaviours.json: the last generation's behaviours and
 * the novelty archive. */
#ifndef NEVO_TRAIN_H
#define NEVO_TRAIN_H

#include "nevo/algo.h"
#include "nevo/files.h"

typedef struct NevoEvalSummary {
    int episodes;
    long long frames;
    double return_mean, return_std, return_min, return_max;
    double length_mean, length_std;
} NevoEvalSummary;

/* Evaluates parameters theta for `episodes` episodes whose seeds are named by
 * (seed, FINAL_EVAL, episode); threads from the pool never change the result. */
NevoStatus nevo_eval_params(const NevoEnv *env, const NevoPolicy *policy, const float *theta,
                            NevoPool *pool, int episodes, uint64_t seed, NevoEvalSummary *out,
                            NevoError *err);
/* Mean/std summary of finished episodes. */
void nevo_eval_summarise(const NevoEpisode *eps, int n, NevoEvalSummary *out);

/* Called after reset and after every step of a recorded episode (GIF rendering). */
typedef void (*NevoFrameFn)(void *ctx, const NevoEnv *env, const void *inst);

/* Runs one episode of theta from env_seed on a fresh instance, single-threaded,
 * calling frame (if not NULL) after reset and after each step. */
NevoStatus nevo_rollout_episode(const NevoEnv *env, const NevoPolicy *policy, const float *theta,
                                uint64_t env_seed, NevoFrameFn frame, void *ctx, NevoEpisode *out,
                                NevoError *err);
/* The seed of evaluation episode e under evaluation seed `seed`: the episodes
 * nevo_eval_params runs, so a recorded episode is one of those evaluated. */
uint64_t nevo_eval_episode_seed(uint64_t seed, int episode);

/* Observers of a run (all optional). on_frames is called from worker threads with the
 * frames finished so far in the current generation. */
typedef struct NevoTrainHooks {
    void (*on_start)(void *ctx, const NevoConfig *cfg, const NevoRunTotals *resumed_from);
    void (*on_generation)(void *ctx, const NevoGenStats *gen, const NevoRunTotals *totals,
                          const NevoConfig *cfg);
    void (*on_frames)(void *ctx, long long frames);
    void *ctx;
} NevoTrainHooks;

typedef struct NevoTrainSummary {
    NevoRunTotals totals;
    NevoEvalSummary eval;  /* final evaluation of the best policy */
    char policy_path[4096];
} NevoTrainSummary;

/* Runs (or, with resume, continues) the training run in out_dir. Without resume,
 * out_dir must not hold a run already. threads: 0 = cfg->threads. Everything about the
 * config is checked before anything is written. */
NevoStatus nevo_train_run(const NevoConfig *cfg, const char *out_dir, int resume, int threads,
                          const NevoTrainHooks *hooks, NevoTrainSummary *summary, NevoError *err);

#endif
