/* nevo's own files: standalone policies and training checkpoints.
 *
 * A policy file holds the resolved config (env, env options, network), the parameter
 * vector and the observation normalisation: everything `nevo eval` needs. A checkpoint
 * holds the resolved config, counters and the algorithm's whole state. Both use the
 * container of io.h (magic, version, checksum, atomic write). */
#ifndef NEVO_FILES_H
#define NEVO_FILES_H

#include "nevo/algo.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/policy.h"

#define NEVO_POLICY_MAGIC "NEVOPOL1"
#define NEVO_POLICY_VERSION 1u
#define NEVO_CHECKPOINT_MAGIC "NEVOCKP1"
#define NEVO_CHECKPOINT_VERSION 1u

/* A policy ready to run: its config, env (without any training cap), network and
 * parameters. */
typedef struct NevoLoadedPolicy {
    NevoConfig cfg;
    NevoEnv *env;
    NevoPolicy *policy;
    float *theta; /* (policy->nparams) */
} NevoLoadedPolicy;

NevoStatus nevo_policy_file_save(const char *path, const NevoConfig *cfg, const NevoPolicy *policy,
                                 const float *theta, NevoError *err);
NevoStatus nevo_policy_file_load(const char *path, NevoLoadedPolicy *out, NevoError *err);
void nevo_loaded_policy_free(NevoLoadedPolicy *p);

/* Counters that travel with a checkpoint. */
typedef struct NevoRunTotals {
    int generations;     /* completed */
    long long frames;
    long long episodes;
    double wall_s;
    double best_fitness; /* highest fitness any individual reached */
} NevoRunTotals;

NevoStatus nevo_checkpoint_save(const char *path, const NevoConfig *cfg, const NevoRunTotals *totals,
                                const NevoAlgo *algo, NevoError *err);
/* Reads a checkpoint's config and totals; *state (malloc'ed) and *state_len are the
 * algorithm state, to be passed to nevo_checkpoint_restore once the algorithm exists. */
NevoStatus nevo_checkpoint_read(const char *path, NevoConfig *cfg, NevoRunTotals *totals,
                                uint8_t **state, size_t *state_len, NevoError *err);
NevoStatus nevo_checkpoint_restore(const char *path, NevoAlgo *algo, const uint8_t *state,
                                   size_t state_len, NevoError *err);

/* Loads a policy file or, for a checkpoint, rebuilds its best policy (GA elite replayed
 * from its genome, ES mean). */
NevoStatus nevo_load_any_policy(const char *path, NevoLoadedPolicy *out, NevoError *err);

#endif
