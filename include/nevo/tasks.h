/* Evaluation tasks as plain data: what an algorithm asks to have evaluated, in a form
 * another thread, process or device can run.
 *
 * A task set names everything its episodes depend on:
 *   - the networks, each a recipe over the set's base vectors: a base as it is, a
 *     fresh network from its init stream, a base plus or minus sigma times a named
 *     noise slice (a GA child, an ES perturbation), or a base plus that slice divided
 *     by a per-parameter scale row of the base (a GA child of a safe mutation);
 *   - the base vectors themselves, as floats in this process or as seed chains (GA
 *     genomes, a few bytes each), rebuilt where the set is run;
 *   - the episodes (tasks): which network, the episode's seed, flags (whether its
 *     observations feed statistics, whether some are kept as states);
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
    NEVO_NET_SCALED = 3,    /* base `base` + sign * clip(sigma * slice / scale row `base`, +-NEVO_SCALED_CLIP)
                             * (nevo_perturb_scaled): a safe mutation's child (Lehman et al. 2018) */
    NEVO_NET_LOWRANK = 4,   /* base `base` + sign * sigma * eps, eps the full vector of the compact slice
                             * (purpose, generation, individual) of nevo_lowrank_floats floats at `rank`
                             * (params.h): an ES member's low-rank perturbation, a GA child's (ga.rank) */
    NEVO_NET_FACTORED = 5,  /* the LOWRANK network computed by the factored forward (EGGROLL's: the
                             * base's product plus a rank-r correction, nevo_policy_forward_factored),
                             * which the evaluator always uses for it: its bits are that forward's.
                             * A set's networks are all FACTORED (one rank) or none; built (another
                             * path's nevo_taskset_build), it is its LOWRANK network */
} NevoNetKind;

/* A NEVO_NET_SCALED change of one parameter is clipped to +-this (the safe mutations'
 * bound on any weight's step). */
#define NEVO_SCALED_CLIP 10.0f

/* out[k] = theta[k] + sign * clip(d, +-NEVO_SCALED_CLIP) with d = (sigma * eps[k]) / scale[k],
 * each operation rounded to float in that order (plain IEEE operations: every CPU and
 * vector width gives the same bits). out may be theta. The NEVO_NET_SCALED recipe. */
void nevo_perturb_scaled(float *out, const float *theta, float sigma, const float *eps, const float *scale,
                         int sign, size_t n);

typedef struct NevoNet {
    uint32_t kind;                   /* NevoNetKind */
    int32_t base;                    /* BASE, PERTURBED: index into the set's bases */
    uint32_t purpose;                /* PERTURBED: NEVO_RNG_MUTATE or NEVO_RNG_ES_NOISE */
    uint32_t generation, individual; /* INIT: the init stream; PERTURBED: the slice */
    float sigma;                     /* PERTURBED, SCALED, LOWRANK, FACTORED */
    int32_t sign;                    /* PERTURBED, SCALED, LOWRANK, FACTORED: +1 or -1 */
    uint32_t rank;                   /* LOWRANK, FACTORED: 1 .. NEVO_LOWRANK_MAX */
} NevoNet;

#define NEVO_TASK_RECORD_OBS 1u    /* add this episode's observations to its NevoObsStats */
#define NEVO_TASK_RECORD_STATES 2u /* keep some of this episode's observations (NevoStates) */

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
    const float *scales;     /* (n_bases, base_stride) the divisors of NEVO_NET_SCALED recipes, each
                              * finite and > 0, or NULL (no such recipe); always floats */
    int n_nets;
    const NevoNet *nets;
    int n_tasks;
    const NevoTask *tasks;
    int states_cap;          /* observations each NEVO_TASK_RECORD_STATES task keeps (>= 1 where any
                              * task is so flagged) */
    const void *owner;       /* a set nevo_taskset_read made: its memory (not carried) */
} NevoTaskSet;

/* A set with no networks or tasks whose context is this policy's and env's: nparams,
 * env name and cap, observation size and normalisation (the policy's own arrays). env
 * NULL: a set on a dataset (supervised.h), which names no env and caps nothing; its
 * evaluator holds the data. */
void nevo_taskset_for_policy(NevoTaskSet *ts, const NevoPolicy *policy, const NevoEnv *env);

/* Checks a set against the policy and env it is to run on (NULL: a dataset), and every
 * index and recipe in it: NEVO_ERR_INVALID naming the first problem. */
NevoStatus nevo_taskset_check(const NevoTaskSet *ts, const NevoPolicy *policy, const NevoEnv *env,
                              NevoError *err);

/* Builds network `net` of the set into theta (nparams floats; stream as in
 * nevo_perturb_rows). The set's bases must be in this process (floats). */
void nevo_taskset_build(const NevoTaskSet *ts, const NevoPolicy *policy, int net, float *theta, int stream);

/* Network `net`'s noise slice in this process (the set's table): nparams floats for a
 * PERTURBED or SCALED recipe, the compact slice at its rank for a LOWRANK or FACTORED one. */
const float *nevo_taskset_slice(const NevoTaskSet *ts, const NevoPolicy *policy, int net);
/* The factor row (params.h) of network `net`, a NEVO_NET_FACTORED one, into row
 * (nevo_factor_row_floats(policy, rank) floats). */
void nevo_taskset_factor_row(const NevoTaskSet *ts, const NevoPolicy *policy, int net, float *row);

/* A pair: nets j and j + 1 are the same slice from the same base with opposite signs
 * (an ES antithetic pair, full or low rank), built in one pass over the slice. */
int nevo_taskset_is_pair(const NevoTaskSet *ts, int j);
/* Builds the pair j, j + 1 into plus and minus in that one pass. */
void nevo_taskset_build_pair(const NevoTaskSet *ts, const NevoPolicy *policy, int net, float *plus, float *minus,
                             int stream);

/* Serialised task sets. A read set owns its memory (nevo_taskset_free); its bases are
 * floats (chains rebuilt by nevo_taskset_materialise) and its noise pointer NULL. Only
 * a read set may be materialised or freed. The scale rows travel (as floats) only where
 * a recipe is NEVO_NET_SCALED, and the states' cap only where a task keeps states: a
 * set that uses neither carries neither. */
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

/* The observations a task flagged NEVO_TASK_RECORD_STATES keeps of its episode (the
 * states behind a safe mutation's output gradients): at most cap of those the policy
 * saw, spread evenly over the episode without randomness. Every one is kept until cap
 * are; then every second kept one is dropped and from there on only every second step
 * is offered, and so on (strides 1, 2, 4, ...): the kept ones are the steps at
 * multiples of the final stride, between cap / 2 and cap of them. */
typedef struct NevoStates {
    int dim, cap;
    int n;       /* kept */
    int stride;  /* steps between kept observations */
    int seen;    /* observations offered since the episode started */
    float *obs;  /* (cap, dim), the first n in step order */
} NevoStates;

/* Room for cap observations of dim floats; nothing kept. */
void nevo_states_init(NevoStates *s, int dim, int cap);
void nevo_states_free(NevoStates *s); /* of one initialised, or zeroed */
/* Forgets what was kept (a new episode). */
void nevo_states_clear(NevoStates *s);
/* Offers the episode's next observation (dim floats). */
void nevo_states_add(NevoStates *s, const float *obs);

/* A set's results: every episode, the observation statistics of the tasks flagged
 * NEVO_TASK_RECORD_OBS (task_stats NULL when none is), and the states of those flagged
 * NEVO_TASK_RECORD_STATES (task_states NULL when none is). */
NevoStatus nevo_results_write(const NevoTaskSet *ts, const NevoEpisode *results, const NevoObsStats *task_stats,
                              const NevoStates *task_states, NevoBuf *out, NevoError *err);
/* Reads into caller arrays of ts->n_tasks; the flagged tasks' stats and states are
 * initialised here (free them with nevo_obs_stats_free and nevo_states_free; states read
 * hold exactly what was kept: cap = n, at most ts->states_cap). */
NevoStatus nevo_results_read(const NevoTaskSet *ts, const uint8_t *data, size_t len, NevoEpisode *results,
                             NevoObsStats *task_stats, NevoStates *task_states, NevoError *err);

#endif
