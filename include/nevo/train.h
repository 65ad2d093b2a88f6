/* Training runs and policy evaluation: what `nevo train` and `nevo eval` do, as
 * library calls.
 *
 * A run directory holds: config.json (the resolved config), metrics.jsonl (one JSON
 * object per generation), checkpoint.bin (the latest checkpoint), policy.nevo (the
 * best policy so far, a standalone file) and, at the end, summary.json and (envs with
 * a behaviour characterisation) behaviours.json: the last generation's behaviours and
 * the novelty archive. A run on a dataset (config key `dataset`) reports its policy's
 * train_loss, test_loss and test_accuracy in each metrics line and in the summary. */
#ifndef NEVO_TRAIN_H
#define NEVO_TRAIN_H

#include "nevo/algo.h"
#include "nevo/eval.h"
#include "nevo/checkpoint.h"

/* One generation of algo, its evaluations run on ev: ask, evaluate, tell until the
 * algorithm has its generation (an algorithm that trains itself, NEVO_ALGO_GRADIENT:
 * nevo_algo_train; ev may then be NULL). After an error the generation is not complete: free
 * the algorithm, or restore its last checkpoint, rather than going on or saving it. */
NevoStatus nevo_train_generation(NevoAlgo *algo, NevoEvaluator *ev, NevoGenStats *stats, NevoError *err);

/* Observers of a run (all optional). on_frames is called from worker threads with the
 * frames finished so far in the current evaluation (a generation runs one or more). */
typedef struct NevoTrainHooks {
    void (*on_start)(void *ctx, const NevoConfig *cfg, const NevoRunTotals *resumed_from);
    void (*on_generation)(void *ctx, const NevoGenStats *gen, const NevoRunTotals *totals,
                          const NevoConfig *cfg);
    void (*on_frames)(void *ctx, long long frames);
    void *ctx;
} NevoTrainHooks;

typedef struct NevoTrainSummary {
    NevoRunTotals totals;
    NevoEvalSummary eval;  /* final evaluation of the best policy (a run on an env) */
    int on_data;           /* a run on a dataset: its final policy's figures instead */
    NevoDataScores data;
    char policy_path[4096];
    char stopped[16];      /* why the run ended: "generations", "max_frames" or "max_wall_s" */
} NevoTrainSummary;

/* Runs (or, with resume, continues) the training run in out_dir. Without resume,
 * out_dir must not hold a run already. threads: 0 = cfg->threads. Everything about the
 * config is checked before anything is written. */
NevoStatus nevo_train_run(const NevoConfig *cfg, const char *out_dir, int resume, int threads,
                          const NevoTrainHooks *hooks, NevoTrainSummary *summary, NevoError *err);

#endif
