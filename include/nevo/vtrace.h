/* The V-trace learner's pieces (algo vtrace, IMPALA: Espeholt et al. 2018): the actors'
 * action draw and one trajectory's loss and gradient, which both of the algorithm's
 * modes (rl.mode sync and async) use; the algorithm itself is in the registry
 * (algo.h). */
#ifndef NEVO_VTRACE_H
#define NEVO_VTRACE_H

#include <stdint.h>

#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/policy.h"
#include "nevo/status.h"

#define NEVO_VTRACE_MAX_ACTIONS 64

/* An action drawn from softmax(logits[0, A)) with the uniform of the stream (seed,
 * NEVO_RNG_ACTOR, step, env); *logp = its log-probability (nevo_log_softmax's float). */
int nevo_vtrace_sample(const float *logits, int A, uint64_t seed, uint32_t env, uint64_t step, float *logp);

/* One actor step, as both modes record it. */
typedef struct NevoVTraceStep {
    int act;      /* the action drawn */
    float mu;     /* its log-probability under the acting parameters */
    float reward; /* the env's reward */
    float rew;    /* the reward the learner sees: clipped to +-rl->reward_clip (where > 0) */
    float disc;   /* rl->discount, or 0 where the episode ended (by termination or its time
                   * limit: nothing after it is bootstrapped into it) */
    int end;      /* the episode ended: the caller starts the next one into `next` */
} NevoVTraceStep;

/* Env instance inst takes action act: one step (the next observation into next),
 * recorded (mu 0). */
void nevo_actor_step(const NevoEnv *env, void *inst, int act, const NevoRLConfig *rl, float *next,
                     NevoVTraceStep *out);

/* Env instance inst acts on logits (A of them): the action from nevo_vtrace_sample's
 * stream (seed, env_id, step), one step (the next observation into next). */
void nevo_vtrace_act(const NevoEnv *env, void *inst, const float *logits, int A, uint64_t seed, uint32_t env_id,
                     uint64_t step, const NevoRLConfig *rl, float *next, NevoVTraceStep *out);

/* Trajectories per chunk of the learner's reduce: a batch of n trajectories is cut into
 * ceil(n / NEVO_VTRACE_CHUNK) chunks (a property of the batch, never of the threads), each
 * one forward and one backward, the chunks added in replica.h's fixed tree. */
#define NEVO_VTRACE_CHUNK 8

/* Buffers for up to n trajectories of T steps (per thread). */
typedef struct NevoVTraceWork NevoVTraceWork;
NevoVTraceWork *nevo_vtrace_work_new(const NevoPolicy *p, int T, int n);
void nevo_vtrace_work_free(NevoVTraceWork *w);

/* IMPALA's loss of n trajectories (n <= the work's) and its gradient, times scale, into
 * grad (nparams floats, overwritten). obs (n, T + 1, obs_dim): each trajectory's T
 * observations acted on and the one after (the bootstrap); act, mu (the behaviour
 * log-probabilities), rew, disc (n, T). V-trace targets per trajectory (nevo_vtrace),
 * held fixed; the loss nevo_impala_loss's. p has a value head (outputs: A logits, V).
 * *loss: the loss summed over the n T steps. NEVO_ERR_NUMERIC when it is not finite. */
NevoStatus nevo_vtrace_batch(const NevoPolicy *p, const NevoRLConfig *rl, const float *theta, int T, int n,
                             const float *obs, const int *act, const float *mu, const float *rew, const float *disc,
                             float scale, NevoVTraceWork *w, float *grad, double *loss);

#endif
