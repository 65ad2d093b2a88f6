/* Training checkpoints: the resolved config, the run's counters and the algorithm's
 * whole state, in the container of io.h. Payload: config JSON | generations u32 |
 * frames u64 | episodes u64 | wall_s f64 | best_fitness f64 | algorithm state (the
 * rest). Also the one loader of either file. */
#ifndef NEVO_CHECKPOINT_H
#define NEVO_CHECKPOINT_H

#include "nevo/algo.h"
#include "nevo/config.h"
#include "nevo/policy_file.h"

#define NEVO_CHECKPOINT_MAGIC "NEVOCKP1"
#define NEVO_CHECKPOINT_VERSION 1u

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
 * algorithm state, to be passed to nevo_checkpoint_restore once the algorithm exists.
 * The config is checked (nevo_config_check) and the counters against it (1 <=
 * generations <= the config's, non-negative frames and episodes, a finite wall time). */
NevoStatus nevo_checkpoint_read(const char *path, NevoConfig *cfg, NevoRunTotals *totals,
                                uint8_t **state, size_t *state_len, NevoError *err);
/* The same from the file's bytes (as one process read them for the ranks of a job);
 * messages name path. */
NevoStatus nevo_checkpoint_parse(const uint8_t *data, size_t n, const char *path, NevoConfig *cfg,
                                 NevoRunTotals *totals, uint8_t **state, size_t *state_len, NevoError *err);
NevoStatus nevo_checkpoint_restore(const char *path, NevoAlgo *algo, const uint8_t *state,
                                   size_t state_len, NevoError *err);
/* After nevo_checkpoint_restore: the restored algorithm against the checkpoint's
 * counters (its generations done must equal totals->generations) and its best policy
 * (finite parameters). A NEVO_ERR_CORRUPT error naming path otherwise. */
NevoStatus nevo_checkpoint_verify(const char *path, const NevoRunTotals *totals, const NevoAlgo *algo,
                                  const NevoPolicy *policy, NevoError *err);

/* Loads a policy file or, for a checkpoint, rebuilds its best policy (GA elite replayed
 * from its genome, ES mean). */
NevoStatus nevo_load_any_policy(const char *path, NevoLoadedPolicy *out, NevoError *err);

#endif
