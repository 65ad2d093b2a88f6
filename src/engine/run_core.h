/* The parts of a run on an env (internal to src/engine): what `nevo train` (train.c) and
 * an ask/tell strategy (vec.c) both build, in one order and with one set of checks. */
#ifndef NEVO_RUN_CORE_H
#define NEVO_RUN_CORE_H

#include "nevo/algo.h"
#include "nevo/backend.h"
#include "nevo/eval.h"

typedef struct NevoRunCore {
    NevoEnv *env;         /* training env (episode cap applied) */
    NevoPolicy *policy;
    NevoPool *pool;
    NevoNoise *noise;
    NevoEvaluator *ev;    /* NULL on a dataset */
    NevoBackend *backend; /* the evaluator's, where not the CPU's */
    NevoAlgo *algo;
} NevoRunCore;

/* Builds the parts for cfg's env (cfg checked, and kept alive as long as the parts:
 * the algorithm reads it): the env, the policy, the memory and noise-table checks, the
 * pool (threads, else cfg's, else every CPU), the noise table, the evaluator on cfg's
 * backend, the algorithm. On failure what was built stays in c for
 * nevo_run_core_free. */
NevoStatus nevo_run_core_build(const NevoConfig *cfg, int threads, NevoRunCore *c, NevoError *err);
void nevo_run_core_free(NevoRunCore *c);

/* Room for what a task set's tasks record (observation statistics, states), NULL where
 * none does; freed by nevo_task_records_free with the set's task count. */
void nevo_task_records_new(const NevoTaskSet *ts, NevoObsStats **stats, NevoStates **states);
void nevo_task_records_free(NevoObsStats *stats, NevoStates *states, int n_tasks);

#endif
