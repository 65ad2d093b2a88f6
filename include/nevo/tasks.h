/* Evaluation tasks as plain data: what an algorithm asks to have evaluated, in a form
 * another thread, process or device can run.
 *
 * A task set names everything its episodes depend on:
 *   - the networks, each a recipe over the set's base vectors: a base as it is, a
 *     fresh network from its init stream, or a base plus or minus sigma times a named
 *     noise slice (a GA child, an ES perturbation);
 *   - the base vectors themselves, as floats in this process or as seed chains (GA
 *     genomes, a few bytes each), rebuilt where the set is run;
 *   - the episodes (tasks): which network, the episode's seed, flags;
 *   - the context: the run's seed (it names every stream), the noise table's size (the
 *     table is a function of it), the network's size, the env and its episode cap, and
 *     the observation normalisation.
 * An episode's outcome is a function of its task and that context alone, so a task
 * set evaluated anywhere gives the same results bit for bit (on one machine image:
 * DESIGN.md, "What bit-identity covers").
 *
 * nevo_taskset_write / nevo_taskset_read carry a set between processes (the container
 * of io.h: checked magic, version, length and CRC); nevo_results_write / _read carry
 * its results back. */
#ifndef NEVO_TASKS_H
#define NEVO_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/env.h"
#include "nevo/io.h"
#include "nevo/noise.h"
#include "nevo/params.h"
#include "nevo/policy.h"

/* How a network's parameters are built. */
typedef enum NevoNetKind {
    NEVO_NET_BASE = 0,      /* base vector `base` as it is */
    NEVO_NET_INIT = 1,      /* the init stream (generation, individual) (nevo_policy_init_params) */
    NEVO_NET_PERTURBED = 2, /* base `base` + sign * sigma * noise slice (purpose, generation, individual) */
} NevoNetKind;

typedef struct NevoNet {
    uint32_t kind;                   /* NevoNetKind */
    int32_t base;                    /* BASE, PERTURBED: index into the set's bases */
    uint32_t purpose;                /* PERTURBED: NEVO_RNG_MUTATE or NEVO_RNG_ES_NOISE */
    uint32_t generation, individual; /* INIT: the init stream; PERTURBED: the slice */
    float sigma;                     /* PERTURBED */
    int32_t sign;                    /* PERTURBED: +1 or -1 */
} NevoNet;

#define NEVO_TASK_RECORD_OBS 1u /* add this episode's observations to its NevoObsStats */

/* One episode: network `net` of its set, from this env seed. */
typedef struct NevoTask {
    int net;
    uint32_t flags;
    uint64_t seed;
} NevoTask;

typedef struct NevoEpisode {
    double ret;     /* sum of rewards */
    int length;     /* steps */
    int terminated; /* 1 if it ended by termination, 0 by time limit or cap */
    float bc[NEVO_ENV_MAX_BC];
} NevoEpisode;

typedef struct NevoTaskSet {
    uint64_t seed;          /* the run's seed */
    size_t noise_floats;    /* the noise table's size; 0: none (every network a base) */
    const NevoNoise *noise; /* that table in this process (not carried) */
    size_t nparams;         /* parameters per network */
    char env[64];           /* the env's name, and its episode cap (the spec's max_steps) */
    int max_steps;
    int obs_dim;             /* observation size; obs_mean and obs_std (obs_dim floats each): */
    const float *obs_mean;   /* normalised as the policy does; NULL: not normalised */
    const float *obs_std;
    int n_bases;
    const float *bases;      /* (n_bases, base_stride) in this process, or NULL: chains */
    size_t base_stride;
    const NevoChain *chains; /* (n_bases) the bases as seed chains, or NULL */
    int n_nets;
    const NevoNet *nets;
    int n_tasks;
    const NevoTask *tasks;
    const void *owner;       /* a set nevo_taskset_read made: its memory (not carried) */
} NevoTaskSet;

/* A set with no networks or tasks whose context is this policy's and env's: nparams,
 * env name and cap, observation size and normalisation (the policy's own arrays). */
void nevo_taskset_for_policy(NevoTaskSet *ts, const NevoPolicy *policy, const NevoEnv *env);

/* Checks a set against the policy and env it is to run on, and every index and
 * recipe in it: NEVO_ERR_INVALID naming the first problem. */
NevoStatus nevo_taskset_check(const NevoTaskSet *ts, const NevoPolicy *policy, const NevoEnv *env,
                              NevoError *err);

/* Builds network `net` of the set into theta (nparams floats; stream as in
 * nevo_perturb_rows). The set's bases must be in this process (floats). */
void nevo_taskset_build(const NevoTaskSet *ts, const NevoPolicy *policy, int net, float *theta, int stream);

/* A pair: nets j and j + 1 are the same slice from the same base with opposite signs
 * (an ES antithetic pair), built in one pass over the slice. */
int nevo_taskset_is_pair(const NevoTaskSet *ts, int j);
/* Builds the pair j, j + 1 into plus and minus in that one pass. */
void nevo_taskset_build_pair(const NevoTaskSet *ts, int net, float *plus, float *minus, int stream);

/* Serialised task sets. A read set owns its memory (nevo_taskset_free); its bases are
 * floats (chains rebuilt by nevo_taskset_materialise) and its noise pointer NULL. Only
 * a read set may be materialised or freed. */
NevoStatus nevo_taskset_write(const NevoTaskSet *ts, NevoBuf *out, NevoError *err);
NevoStatus nevo_taskset_read(const uint8_t *data, size_t len, NevoTaskSet **out, NevoError *err);
/* Makes a read set runnable here: the noise table (of ts->noise_floats; the caller
 * keeps it alive), and the bases given as chains rebuilt into floats. */
NevoStatus nevo_taskset_materialise(NevoTaskSet *ts, const NevoPolicy *policy, const NevoNoise *noise,
                                    NevoError *err);
void nevo_taskset_free(NevoTaskSet *ts);
/* Gives a policy built from the run's config the set's observation normalisation, as
 * a process receiving the set must before evaluating it. */
NevoStatus nevo_taskset_prepare_policy(const NevoTaskSet *ts, NevoPolicy *policy, NevoError *err);

/* A set's results: every episode, and the observation statistics of the tasks
 * flagged NEVO_TASK_RECORD_OBS (task_stats NULL when none is). */
NevoStatus nevo_results_write(const NevoTaskSet *ts, const NevoEpisode *results, const NevoObsStats *task_stats,
                              NevoBuf *out, NevoError *err);
/* Reads into caller arrays of ts->n_tasks; the flagged tasks' stats are initialised
 * here (free them with nevo_obs_stats_free). */
NevoStatus nevo_results_read(const NevoTaskSet *ts, const uint8_t *data, size_t len, NevoEpisode *results,
                             NevoObsStats *task_stats, NevoError *err);

#endif
