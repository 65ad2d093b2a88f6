/* The parts of a run on an env (internal to src/engine): what `nevo train` (train.c) and
 * an ask/tell strategy (vec.c) both build, in one order and with one set of checks. */
#ifndef NEVO_RUN_CORE_H
#define NEVO_RUN_CORE_H

#include "nevo/algo.h"
#include "nevo/backend.h"
#include "nevo/comm.h"
#include "nevo/dataset.h"
#include "nevo/eval.h"
#include "nevo/supervised.h"

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
 * backend (placed by comm's device rank, NULL: this process alone), the algorithm. On
 * failure what was built stays in c for nevo_run_core_free. */
NevoStatus nevo_run_core_build(const NevoConfig *cfg, int threads, const NevoComm *comm, NevoRunCore *c,
                               NevoError *err);
/* The pool (threads, else the config's, else every CPU) and noise table for c's built
 * policy (the table checked to exceed the parameters). */
NevoStatus nevo_run_core_pool_and_noise(const NevoConfig *cfg, int threads, NevoRunCore *c, NevoError *err);
void nevo_run_core_free(NevoRunCore *c);

/* A run on a dataset: the data, and its splits as the networks see them (the
 * algorithm borrows train). */
typedef struct NevoRunData {
    NevoDataset *data;
    NevoDataView train, test;
} NevoRunData;

/* The parts of a run on cfg's dataset instead of an env (run_data.c): the algorithm
 * check, the data, the policy for its images, the memory and noise-table checks, the
 * pool (as nevo_run_core_build), the algorithm on d->train; c has no env, evaluator
 * or backend. On failure what was built stays in c and d for the frees. */
NevoStatus nevo_run_core_build_data(const NevoConfig *cfg, int threads, NevoRunCore *c, NevoRunData *d,
                                    NevoError *err);
void nevo_run_data_free(NevoRunData *d);
/* What a generation on a dataset reports of the algorithm's best policy: the test
 * split's loss and accuracy, and the training loss: epoch_loss where given (an SGD
 * epoch's own mean), else over the training split. */
NevoStatus nevo_run_data_scores(const NevoRunCore *c, const NevoRunData *d, const double *epoch_loss,
                                NevoDataScores *out, NevoError *err);

/* Room for what a task set's tasks record (observation statistics, states), NULL where
 * none does; freed by nevo_task_records_free with the set's task count. */
void nevo_task_records_new(const NevoTaskSet *ts, NevoObsStats **stats, NevoStates **states);
void nevo_task_records_free(NevoObsStats *stats, NevoStates *states, int n_tasks);

#endif
