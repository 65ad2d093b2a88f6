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
#include "nevo/comm.h"

/* One generation of algo, its evaluations run on ev: ask, evaluate, tell until the
 * algorithm has its generation (an algorithm that trains itself, NEVO_ALGO_GRADIENT:
 * nevo_algo_train; ev may then be NULL). After an error the generation is not complete: free
 * the algorithm, or restore its last checkpoint, rather than going on or saving it. */
NevoStatus nevo_train_generation(NevoAlgo *algo, NevoEvaluator *ev, NevoGenStats *stats, NevoError *err);

/* Observers of a run (all optional). on_frames is called from worker threads with the
 * frames finished so far in the current evaluation (a generation runs one or more).
 * on_backend follows on_start where the networks are computed on a device, with its
 * nevo_backend_describe (rank 0's). */
typedef struct NevoTrainHooks {
    void (*on_start)(void *ctx, const NevoConfig *cfg, const NevoRunTotals *resumed_from);
    void (*on_generation)(void *ctx, const NevoGenStats *gen, const NevoRunTotals *totals,
                          const NevoConfig *cfg);
    void (*on_frames)(void *ctx, long long frames);
    void *ctx;
    void (*on_backend)(void *ctx, const char *where);
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

/* The same run across the ranks of comm (NULL: this process alone; comm.h), called by
 * every rank with the same arguments. Rank r evaluates a fixed shard of each
 * generation's tasks on its own threads (threads per rank); the ranks exchange the
 * results, never parameters, so every rank makes the same update and the run is
 * bit-identical to one process for any rank count and any threads. Rank 0 alone reads
 * and writes the run directory (out_dir need exist only there; a resumed checkpoint
 * reaches the others from it), runs the final evaluation, calls the hooks, and writes
 * comm.jsonl: per generation, each rank's bytes sent, seconds in collective calls,
 * seconds evaluating, tasks, seconds in the generation and node (its lowest rank).
 * Any rank's failure ends every rank with its message.
 * Algorithms that train by gradient (algo sgd) run as replicas instead (replica.h):
 * each rank computes its shards of every batch's gradient, all-reduced in a fixed
 * order, again the parameters of one process. Refused: more ranks than the population
 * (more than a batch's shards for sgd). */
NevoStatus nevo_train_run_ranks(const NevoConfig *cfg, const char *out_dir, int resume, int threads,
                                const NevoTrainHooks *hooks, NevoComm *comm, NevoTrainSummary *summary,
                                NevoError *err);

#endif
