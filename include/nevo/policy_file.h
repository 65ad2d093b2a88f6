/* Standalone policy files: the resolved config (env, env options, network), the
 * parameter vector and the observation normalisation, everything `nevo eval` needs, in
 * the container of io.h (magic, version, checksum, atomic write). Payload: config JSON
 * | nparams u64 | theta f32[nparams] | obs_norm u32 | obs_dim u32 | obs_mean
 * f32[obs_dim] | obs_std f32[obs_dim]. */
#ifndef NEVO_POLICY_FILE_H
#define NEVO_POLICY_FILE_H

#include "nevo/config.h"
#include "nevo/dataset.h"
#include "nevo/env.h"
#include "nevo/policy.h"

#define NEVO_POLICY_MAGIC "NEVOPOL1"
#define NEVO_POLICY_VERSION 1u

/* A policy ready to run: its config, env (without any training cap), network and
 * parameters. */
typedef struct NevoLoadedPolicy {
    NevoConfig cfg;
    NevoEnv *env;       /* NULL for a classifier trained on a dataset: */
    NevoDataset *data;  /* its dataset's shape (one sample per split loaded) */
    NevoPolicy *policy;
    float *theta; /* (policy->nparams) */
} NevoLoadedPolicy;

NevoStatus nevo_policy_file_save(const char *path, const NevoConfig *cfg, const NevoPolicy *policy,
                                 const float *theta, NevoError *err);
/* Checks the stored config (nevo_config_check), the network's size before allocating
 * for it, and every parameter and statistic (finite, a positive std). */
NevoStatus nevo_policy_file_load(const char *path, NevoLoadedPolicy *out, NevoError *err);
void nevo_loaded_policy_free(NevoLoadedPolicy *p);
/* Builds lp's env (or, for a config with a dataset, loads the dataset's shape) and its
 * network from lp->cfg; obs_norm as nevo_policy_new takes it. */
NevoStatus nevo_loaded_policy_network(NevoLoadedPolicy *lp, int obs_norm, NevoError *err);

#endif
