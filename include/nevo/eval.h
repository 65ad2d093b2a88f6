/* The population evaluator: runs a list of episodes, each with its own network and
 * seed, over the thread pool.
 *
 * Each worker keeps a fixed number of episode slots; all live slots go through the
 * policy in one batched forward call (each row its own network), then each env steps;
 * a slot whose episode ended takes the next task from the shared queue at once, so only
 * running episodes are computed and no batch waits for its slowest episode.
 *
 * An episode's outcome is a function of its task alone (network parameters, seed), so
 * results are bit-identical whatever the thread count, slot count, pipeline depth or
 * scheduling. */
#ifndef NEVO_EVAL_H
#define NEVO_EVAL_H

#include <stdint.h>

#include "nevo/env.h"
#include "nevo/policy.h"
#include "nevo/threads.h"

#define NEVO_TASK_RECORD_OBS 1u /* add this episode's observations to its NevoObsStats */
/* The next task is built from the same sources (an ES pair: theta + sigma eps, then
 * theta - sigma eps): whoever takes this task takes that one too, and starts it next in
 * the same batch (with one slot, once this task's episode ends), so the sources are
 * likely still in that core's cache rather than read again from memory. At the end of
 * a queue the pair cannot be split between workers. Changes no result. */
#define NEVO_TASK_WITH_NEXT 2u

/* One episode to run: which network (a row of the parameter matrix) and its seed. */
typedef struct NevoTask {
    int net;
    uint32_t flags;
    uint64_t seed;
} NevoTask;

typedef struct NevoEpisode {
    double ret;       /* sum of rewards */
    int length;       /* steps */
    int terminated;   /* 1 if it ended by termination, 0 by time limit or cap */
    float bc[NEVO_ENV_MAX_BC];
} NevoEpisode;

typedef struct NevoEvaluator NevoEvaluator;

/* slots: live episodes per worker. 0 = a default suited to a population of different
 * networks: 16, or fewer where 16 such networks would not fit in half the L2 cache
 * (as many as fit, at least 1), so that most of the weights a step reads are still
 * cached from the same network's previous step; in the pipelined layout (below), 16
 * per batch. */
NevoEvaluator *nevo_evaluator_new(const NevoEnv *env, const NevoPolicy *policy, NevoPool *pool,
                                  int slots);
void nevo_evaluator_free(NevoEvaluator *ev);
/* Live episodes per worker (the slots given, or the default chosen). */
int nevo_evaluator_slots(const NevoEvaluator *ev);
/* The pool the evaluator runs on (for other parallel work of the same run). */
NevoPool *nevo_evaluator_pool(const NevoEvaluator *ev);

/* Pipeline depth: 1 (default) = fused, each worker runs forward and env steps on its
 * own slots; D >= 2 = D batches of slots alternate between thread 0, which runs every
 * forward, and the other threads, which step the envs (Uber's GPU-engine layout, for
 * measuring; on CPUs alone fused is faster, see docs/BENCHMARKS.md). Never changes
 * results. */
void nevo_evaluator_set_pipeline(NevoEvaluator *ev, int depth);

/* Called after each finished episode with the frames finished so far in this call,
 * from whichever worker finished it (so it must be thread-safe). */
typedef void (*NevoProgressFn)(void *ctx, long long frames_done);
void nevo_evaluator_set_progress(NevoEvaluator *ev, NevoProgressFn fn, void *ctx);

/* Where evaluation time goes, summed over every nevo_evaluate call since timing was
 * switched on: wall seconds of the calls, and thread-seconds inside the batched policy
 * forward (with action selection) and inside env stepping and resets; the rest of
 * threads x wall is queue handling, bookkeeping and waiting for the slowest worker.
 * Timing reads the clock twice per batch step, so it is off unless asked for
 * (benchmarks); it never changes results. */
typedef struct NevoEvalTimes {
    double wall_s, forward_s, env_s;
    double build_s; /* thread-seconds building parameters (nevo_evaluate_built) */
    long long frames;
    int threads, calls;
} NevoEvalTimes;
void nevo_evaluator_set_timing(NevoEvaluator *ev, int on); /* also zeroes the sums */
void nevo_evaluator_times(const NevoEvaluator *ev, NevoEvalTimes *out);

/* Runs tasks[0..n) and writes results[i] for task i. params: the population matrix,
 * row j at params + j * stride. task_stats: NULL, or an array of n stats of which those
 * of tasks flagged NEVO_TASK_RECORD_OBS are filled (caller merges them in task order).
 * Fails with NEVO_ERR_NUMERIC (naming env, task and step) if an env or the policy
 * produces NaN or infinity. */
NevoStatus nevo_evaluate(NevoEvaluator *ev, const float *params, size_t stride,
                         const NevoTask *tasks, int n, NevoEpisode *results,
                         NevoObsStats *task_stats, NevoError *err);

/* Builds network `net`'s parameters (nparams floats, 64-byte aligned) into theta; called
 * from any worker, so it must be thread-safe, and its result must depend on net alone. */
typedef void (*NevoBuildFn)(void *ctx, int net, float *theta);

/* nevo_evaluate with no parameter matrix: each episode's parameters are built as the
 * episode starts, by the worker that runs it, into a row the slot keeps for the
 * episode (the same results as building every row first and calling nevo_evaluate).
 * For one episode per network (the GA's children): the row is written into the cache
 * and read from there by the episode's steps, where a population built first is
 * written to memory and read back (at MinAtar's 530 KB networks, 256 children are
 * 135 MB each way), and nothing waits for the whole population to be built. Each task
 * builds its own row, so networks with several episodes are built that many times. */
NevoStatus nevo_evaluate_built(NevoEvaluator *ev, NevoBuildFn build, void *ctx, const NevoTask *tasks, int n,
                               NevoEpisode *results, NevoObsStats *task_stats, NevoError *err);

#endif
