/* Supervised learning on a labelled dataset: a network's mean cross-entropy and
 * accuracy over samples (what `nevo eval --dataset` reports and what evolution on a
 * dataset uses as fitness, negated), and mini-batch gradient descent (algo sgd).
 *
 * Work is cut into fixed pieces (NEVO_SUP_CHUNK samples when evaluating, NEVO_SUP_SHARD
 * rows of a mini-batch when computing its gradient), each summed on its own and the
 * pieces added in order: results are bit-identical for any number of threads. */
#ifndef NEVO_SUPERVISED_H
#define NEVO_SUPERVISED_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/comm.h"
#include "nevo/config.h"
#include "nevo/dataset.h"
#include "nevo/io.h"
#include "nevo/policy.h"
#include "nevo/tasks.h"
#include "nevo/threads.h"

/* samples per evaluation piece, and rows per gradient shard */
#define NEVO_SUP_CHUNK 256
#define NEVO_SUP_SHARD 32

/* A split of a dataset as the network sees it: n inputs of dim floats (images HWC),
 * labels in [0, classes). Borrowed arrays. */
typedef struct NevoDataView {
    int n, dim, classes;
    const float *x; /* (n, dim) */
    const int *y;   /* (n) */
} NevoDataView;

/* A split of ds as its networks see it (a view: ds keeps the arrays). */
NevoDataView nevo_data_view(const NevoDataset *ds, const NevoDataSplit *split);

/* What a run on a dataset reports of a policy (metrics, summaries). */
typedef struct NevoDataScores {
    double train_loss;    /* mean cross-entropy over the training split (algo sgd: over
                           * the epoch's batches, each before its step) */
    double test_loss;     /* over the test split */
    double test_accuracy; /* fraction of the test split classified right */
} NevoDataScores;

/* Mean cross-entropy (loss) and fraction classified right (accuracy, argmax with the
 * first maximum winning, as nevo_policy_actions) of network theta over samples
 * idx[0..m) of d (idx NULL: the first m). Either output may be NULL. NEVO_ERR_NUMERIC
 * where an output is not finite. */
NevoStatus nevo_supervised_eval(const NevoPolicy *p, const float *theta, const NevoDataView *d, const int *idx,
                                int m, NevoPool *pool, double *loss, double *accuracy, NevoError *err);

/* grad (nparams, double) = the gradient of the mean cross-entropy of network theta over
 * samples idx[0..m) of d (idx NULL: the first m), *loss that mean (or NULL): in shards of
 * NEVO_SUP_SHARD rows added in order, whatever the threads. NEVO_ERR_NUMERIC where
 * either is not finite. */
NevoStatus nevo_supervised_gradient(const NevoPolicy *p, const float *theta, const NevoDataView *d, const int *idx,
                                    int m, NevoPool *pool, double *grad, double *loss, NevoError *err);

/* The batch a task on a dataset is scored on: batch samples drawn without
 * replacement by the stream (seed, NEVO_RNG_DATA, 0, 0, 0) of the task's seed, in
 * draw order (batch 0 or >= n: every sample, in order). idx: (min(batch, n)). */
void nevo_supervised_batch(uint64_t task_seed, int n, int batch, int *idx);

/* Evaluates a task set on a dataset instead of an env: each task's network scored on
 * the batch its seed names (nevo_supervised_batch): ret = -mean cross-entropy, length =
 * the batch's samples (the "frames" of supervised work), terminated = 1. The set's
 * bases must be floats in this process. */
NevoStatus nevo_supervised_tasks(const NevoTaskSet *ts, const NevoPolicy *p, const NevoDataView *d, int batch,
                                 NevoPool *pool, NevoEpisode *results, NevoError *err);

/* Mini-batch training of one network (algo sgd). */
typedef struct NevoSGD NevoSGD;

/* A trainer of theta0 (copied) on train with cfg's optim.* and data.batch; threads
 * from pool. Borrowed: p, train, pool. */
NevoStatus nevo_sgd_new(const NevoConfig *cfg, const NevoPolicy *p, const NevoDataView *train, NevoPool *pool,
                        const float *theta0, NevoSGD **out, NevoError *err);
void nevo_sgd_free(NevoSGD *s);
/* Trains as one replica of comm's ranks (replica.h: every rank calls each epoch, each
 * computes its shards of every batch; all hold the same parameters, those of one
 * process); NULL (the default): this process alone. */
void nevo_sgd_set_comm(NevoSGD *s, NevoComm *comm);
/* One epoch: the training set in the order of a permutation drawn by (seed,
 * NEVO_RNG_DATA, epoch), in mini-batches of data.batch (the last may be smaller), one
 * optimiser step each. *train_loss: the epoch's mean loss over its samples, each batch's
 * taken before its step. NEVO_ERR_NUMERIC (naming the step) where the loss or the
 * gradient is not finite; the parameters are then those before that step. */
NevoStatus nevo_sgd_epoch(NevoSGD *s, double *train_loss, NevoError *err);
/* Epochs done, optimiser steps taken, and the current parameters (nparams floats). */
int nevo_sgd_epochs(const NevoSGD *s);
long long nevo_sgd_steps(const NevoSGD *s);
const float *nevo_sgd_params(const NevoSGD *s);
/* Whole state (parameters, optimiser, counters) for checkpoints; load checks it. */
void nevo_sgd_save(const NevoSGD *s, NevoBuf *buf);
NevoStatus nevo_sgd_load(NevoSGD *s, NevoReader *r, NevoError *err);

#endif
