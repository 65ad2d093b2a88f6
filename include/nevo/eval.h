/* The population evaluator: runs a task set's episodes (tasks.h), each with its own
 * network and seed, over the thread pool, the networks computed on a backend
 * (backend.h); and the evaluation of one policy.
 *
 * Each worker keeps a fixed number of episode slots; all live slots go through the
 * policy in one batched forward call (each row its own network), then each env steps;
 * a slot whose episode ended takes the next task from the shared queue at once, so only
 * running episodes are computed and no batch waits for its slowest episode. A
 * recurrent policy's state (policy.h) is kept per slot and zeroed as each episode
 * starts, so an episode never sees another's.
 *
 * An episode's outcome is a function of its task alone (network parameters, seed), so
 * results are bit-identical whatever the thread count, slot count, pipeline depth,
 * scheduling, or where the networks were built. */
#ifndef NEVO_EVAL_H
#define NEVO_EVAL_H

#include <stdint.h>

#include "nevo/backend.h"
#include "nevo/env.h"
#include "nevo/policy.h"
#include "nevo/tasks.h"
#include "nevo/threads.h"

typedef struct NevoEvaluator NevoEvaluator;

/* slots: live episodes per worker. 0 = a default suited to a population of different
 * networks: 16, or fewer where 16 such networks would not fit in half the L2 cache
 * (as many as fit, at least 1), so that most of the weights a step reads are still
 * cached from the same network's previous step; in the pipelined layout (below), 16
 * per batch. */
NevoEvaluator *nevo_evaluator_new(const NevoEnv *env, const NevoPolicy *policy, NevoPool *pool,
                                  int slots);
void nevo_evaluator_free(NevoEvaluator *ev);
/* The backend the networks are computed on: the CPU's unless set (borrowed; it must
 * outlive the evaluator). */
void nevo_evaluator_set_backend(NevoEvaluator *ev, NevoBackend *backend);
/* Calls of at most max_tasks tasks run on the CPU backend, on the same threads (0:
 * none). Otherwise the backend's figure applies (nevo_backend_batching; the cuda
 * backend's is its batch slots, 256 until the first call on the device sizes them,
 * whatever slots the evaluator was given); nevo_evaluator_set_backend resets it, so
 * call this after it. The results are the same bits either way. */
void nevo_evaluator_set_host_tasks(NevoEvaluator *ev, int max_tasks);
/* Live episodes per worker (the slots given, or the default chosen). */
int nevo_evaluator_slots(const NevoEvaluator *ev);

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

/* Where evaluation time goes, summed over every nevo_evaluate_tasks call since timing was
 * switched on: wall seconds of the calls, and thread-seconds inside the batched policy
 * forward (with action selection) and inside env stepping and resets; the rest of
 * threads x wall is queue handling, bookkeeping and waiting for the slowest worker.
 * Timing reads the clock twice per batch step, so it is off unless asked for
 * (benchmarks); it never changes results. */
typedef struct NevoEvalTimes {
    double wall_s, forward_s, env_s;
    double build_s; /* thread-seconds building networks */
    long long frames;
    int threads, calls;
} NevoEvalTimes;
void nevo_evaluator_set_timing(NevoEvaluator *ev, int on); /* also zeroes the sums */
void nevo_evaluator_times(const NevoEvaluator *ev, NevoEvalTimes *out);

/* Runs the set's tasks and writes results[i] for task i. task_stats: NULL, or an array
 * of n_tasks stats of which those of tasks flagged NEVO_TASK_RECORD_OBS, initialised by
 * the caller, gain their episode's observations. task_states: NULL, or an array of
 * n_tasks of which those of tasks flagged NEVO_TASK_RECORD_STATES, initialised by the
 * caller (nevo_states_init(obs_dim, ts->states_cap)), keep some of their episode's
 * observations (cleared as it starts). Fails with NEVO_ERR_INVALID where the
 * set does not fit the policy and env (nevo_taskset_check), and with NEVO_ERR_NUMERIC
 * (naming env, network, seed and step) if an env or the policy produces NaN or infinity.
 * Every network is read where it is (the set's bases), built as its one episode starts
 * in the row its slot keeps (into the cache the episode's steps read it from), or, with
 * several episodes, built once first: the evaluator chooses, no result depends on it. */
NevoStatus nevo_evaluate_tasks(NevoEvaluator *ev, const NevoTaskSet *ts, NevoEpisode *results,
                               NevoObsStats *task_stats, NevoStates *task_states, NevoError *err);

/* nevo_evaluate_tasks over a parameter matrix: task i runs network row tasks[i].net,
 * at params + net * stride. */
NevoStatus nevo_evaluate(NevoEvaluator *ev, const float *params, size_t stride, const NevoTask *tasks, int n,
                         NevoEpisode *results, NevoObsStats *task_stats, NevoError *err);

/* --- one policy ------------------------------------------------------------------- */

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

#endif
