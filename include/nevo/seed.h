/* Actor-learner RL in SEED RL's shape (Espeholt et al. 2020): the runtime under algo
 * vtrace's async mode (vtrace.h has the learner).
 *
 * Actor threads own environment instances and only step them. One inference server
 * gathers the observations of all actors into batches (dynamic batching: a batch runs
 * when every actor's request is in, or rl.batch_wait_us after the oldest one) and runs
 * the policy forward once per batch through the backend interface (backend.h: the
 * CPU's kernels or the GPU); each actor gets its own rows back and chooses its actions
 * from them. Trajectories of T steps go to the learner through a bounded queue (actors
 * wait when it is full). The learner, on the calling thread, takes B trajectories at a
 * time, updates the parameters and publishes them; the server switches to them at its
 * next batch, so actors never stop. Nothing here is reproducible run to run (thread
 * timing decides which parameters act); rl.mode sync is the reproducible schedule.
 * algo r2d2's async mode runs on it too: epsilon-greedy actors, trajectories of
 * rl.period steps with the recurrent states, a learner that takes what has come. */
#ifndef NEVO_SEED_H
#define NEVO_SEED_H

#include <stdint.h>

#include "nevo/backend.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/policy.h"
#include "nevo/status.h"
#include "nevo/threads.h"

/* A trajectory as the actors hand it over. */
typedef struct NevoTrajectory {
    float *obs;       /* (T + 1, obs_dim) */
    int *act;         /* (T) */
    float *mu;        /* (T) behaviour log-probabilities (sampled actions; 0 for epsilon-greedy) */
    float *rew, *disc;/* (T) */
    uint8_t *reset;   /* (T + 1) the observation begins an episode (its recurrent state zeroed first) */
    float *state;     /* (T, S) a recurrent policy's state each step read (S = nevo_policy_state_floats),
                       * NULL for a feed-forward policy */
    int env;          /* the env's index in 0 .. rl.envs - 1 */
    long long start;  /* the env's steps before the first one: consecutive trajectories of an env
                       * continue each other where start = the last one's start + T */
    long long version;/* the parameters' version that acted at its first step */
} NevoTrajectory;

/* How the actors act on their rows of the forward. */
typedef enum NevoSeedAct {
    NEVO_SEED_SAMPLE = 0,         /* draw from softmax(the action outputs) (nevo_vtrace_act) */
    NEVO_SEED_EPSILON_GREEDY = 1, /* epsilon-greedy on the Q-values (nevo_r2d2_q, nevo_r2d2_act), env
                                   * i of N with Ape-X's epsilon (rl.epsilon, rl.epsilon_alpha) */
} NevoSeedAct;

typedef struct NevoSeedOptions {
    NevoSeedAct act;
    int T;                   /* steps per trajectory */
    int take_min, take_max;  /* trajectories the learner takes per call: it waits for take_min,
                              * then takes what the queue holds, up to take_max */
} NevoSeedOptions;

/* The learner: trains on n trajectories (all of the same T), writes the new parameters
 * into theta (the runtime's learner copy); returns its status. */
typedef NevoStatus (*NevoLearnFn)(void *ctx, const NevoTrajectory *batch, int n, float *theta, NevoError *err);
/* Called (from an actor thread) with each finished episode's return and length. */
typedef void (*NevoEpisodeFn)(void *ctx, double ret, int length);

/* Live statistics since the runtime started. */
typedef struct NevoSeedStats {
    double wall_s;
    long long frames, episodes, updates, trajectories;
    double frames_per_s, updates_per_s;
    double mean_batch;      /* rows per inference batch */
    double mean_queue;      /* trajectories waiting when the learner took a batch */
    double mean_lag, max_lag; /* updates between a trajectory's parameters and the learner's */
    double learner_s;       /* seconds the learner spent training */
} NevoSeedStats;

typedef struct NevoSeed NevoSeed;

/* The runtime over envs instances of env (borrowed; the episode cap applied), policy p
 * (a recurrent one's state stays with the server, a row per env), the inference
 * server's forward on backend (borrowed: the cpu backend, or cuda, used by the server's
 * thread alone), parameters theta0 (copied), rl's sizes (envs, actors, batch, queue,
 * batch_wait_us), episode seeds and action draws named by seed. opt NULL: V-trace's
 * (sampled actions, trajectories of rl.unroll steps, rl.batch of them per learner call).
 * Threads start at nevo_seed_run. */
NevoStatus nevo_seed_new(const NevoEnv *env, const NevoPolicy *p, NevoBackend *backend, const NevoRLConfig *rl,
                         uint64_t seed, const float *theta0, const NevoSeedOptions *opt, NevoLearnFn learn,
                         NevoEpisodeFn on_episode, void *ctx, NevoSeed **out, NevoError *err);
void nevo_seed_free(NevoSeed *s);
/* Runs until the learner has made `updates` more updates (learn NULL: until `frames`
 * more frames, the actors and server alone, for measuring the runtime's own bound),
 * then stops the actors and returns with the trajectories in flight dropped. */
NevoStatus nevo_seed_run(NevoSeed *s, long long updates, long long frames, NevoError *err);
void nevo_seed_stats(const NevoSeed *s, NevoSeedStats *out);
/* The learner's parameters (nparams floats). */
const float *nevo_seed_params(const NevoSeed *s);
void nevo_seed_set_params(NevoSeed *s, const float *theta);

#endif
