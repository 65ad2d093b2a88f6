/* The parts of a run on a dataset (engine/run_core.h), which `nevo train` (train.c) and
 * the ask/tell strategy (vec.c) build. */
#include "engine/run_core.h"

#include <stdlib.h>
#include <string.h>

NevoStatus nevo_run_core_build_data(const NevoConfig *cfg, int threads, NevoRunCore *c, NevoRunData *d,
                                    NevoError *err) {
    memset(c, 0, sizeof *c);
    memset(d, 0, sizeof *d);
    NevoStatus st = nevo_algo_check(cfg, NULL, err);
    if (st) return st;
    if (strcmp(cfg->backend, "cpu") != 0)
        return nevo_error(err, NEVO_ERR_INVALID, "backend %s computes env episodes; a run on a dataset computes on "
                          "the cpu backend (backend=cpu)", cfg->backend);
    st = nevo_dataset_load(cfg->dataset, cfg->data.train_samples, cfg->data.test_samples, &d->data, err);
    if (st) return st;
    d->train = nevo_data_view(d->data, &d->data->train);
    d->test = nevo_data_view(d->data, &d->data->test);
    NevoEnvSpec spec;
    nevo_dataset_env_spec(d->data, &spec);
    st = nevo_policy_new(&spec, &cfg->policy, 0, &c->policy, err);
    if (st) return st;
    st = nevo_algo_check_memory(cfg, c->policy->nparams, err);
    if (st) return st;
    st = nevo_run_core_pool_and_noise(cfg, threads, c, err);
    if (st) return st;
    return nevo_algo_new_on_data(cfg, &d->train, c->policy, c->noise, c->pool, &c->algo, err);
}

void nevo_run_data_free(NevoRunData *d) {
    nevo_dataset_free(d->data);
    memset(d, 0, sizeof *d);
}

NevoStatus nevo_run_data_scores(const NevoRunCore *c, const NevoRunData *d, const double *epoch_loss,
                                NevoDataScores *out, NevoError *err) {
    float *theta = nevo_alloc_aligned(sizeof(float) * c->policy->nparams);
    nevo_algo_best(c->algo, theta);
    NevoStatus st = nevo_supervised_eval(c->policy, theta, &d->test, NULL, d->test.n, c->pool, &out->test_loss,
                                         &out->test_accuracy, err);
    if (st == NEVO_OK && epoch_loss)
        out->train_loss = *epoch_loss;
    else if (st == NEVO_OK)
        st = nevo_supervised_eval(c->policy, theta, &d->train, NULL, d->train.n, c->pool, &out->train_loss, NULL,
                                  err);
    free(theta);
    return st;
}
