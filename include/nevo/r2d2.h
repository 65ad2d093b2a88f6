/* The R2D2 learner's pieces (algo r2d2: Kapturowski et al. 2019, "Recurrent Experience
 * Replay in Distributed Reinforcement Learning"): Q-values from a recurrent network's
 * outputs, the actors' epsilon-greedy draw, and the loss and gradient of a batch of
 * replayed sequences; the algorithm itself is in the registry (algo.h).
 *
 * A replayed sequence holds M = burn_in + T steps: M + 1 observations (the last one is
 * the bootstrap), M actions, rewards and discounts (0 where the episode ended at that
 * step), a reset flag per observation (an episode begins there: the LSTM state is zeroed
 * before it) and the recurrent state (h, c) the actor held before its first step. The
 * network is the config's policy with an LSTM: outputs A Q-values, or with
 * policy.value_head a dueling head, A advantages and V, Q_a = V + A_a - mean_b A_b. */
#ifndef NEVO_R2D2_H
#define NEVO_R2D2_H

#include <stdint.h>

#include "nevo/config.h"
#include "nevo/policy.h"
#include "nevo/status.h"
#include "nevo/vtrace.h"

/* Q-values q (n, A) from network outputs out (n, p->n_out): the outputs themselves, or
 * with a value head the dueling combination (mean_b A_b summed in double, rounded once). */
void nevo_r2d2_q(const NevoPolicy *p, const float *out, int n, float *q);

/* Epsilon-greedy on q (A): with probability eps a uniform action, else the first
 * maximum; the draws from the stream (seed, NEVO_RNG_ACTOR, step, env). */
int nevo_r2d2_act(const float *q, int A, double eps, uint64_t seed, uint32_t env, uint64_t step);

/* One actor step of env instance inst on its network outputs out (p->n_out): the
 * epsilon-greedy action on its Q-values (nevo_r2d2_act's stream (seed, env_id, step)),
 * one env step (the next observation into next), recorded as nevo_vtrace_act records
 * (mu 0; the reward clipped to +-rl->reward_clip where > 0; disc 0 where the episode
 * ended). */
void nevo_r2d2_env_act(const NevoEnv *env, void *inst, const NevoPolicy *p, const float *out, double eps,
                       uint64_t seed, uint32_t env_id, uint64_t step, const NevoRLConfig *rl, float *next,
                       NevoVTraceStep *st);

/* Sequences per chunk of the learner's reduce (a property of the batch, never of the
 * threads): a batch of n is cut into ceil(n / NEVO_R2D2_CHUNK) chunks, each one burn-in,
 * one forward and one backward, the chunks added in replica.h's fixed tree. */
#define NEVO_R2D2_CHUNK 8

/* Buffers for up to n sequences of burn_in + T steps. */
typedef struct NevoR2D2Work NevoR2D2Work;
NevoR2D2Work *nevo_r2d2_work_new(const NevoPolicy *p, int burn_in, int T, int n);
void nevo_r2d2_work_free(NevoR2D2Work *w);

/* The loss of n sequences (n <= the work's) and its gradient with respect to theta,
 * times scale, into grad (nparams floats, overwritten).
 *   obs (n, M + 1, D), reset (n, M + 1), state0 (n, 2H): as above, sequence by sequence
 *   act, rew, disc (n, M); weight (n): each sequence's importance-sampling weight
 * Both networks (theta, the online one; target) start from state0 and run the burn-in
 * steps without a loss (and no gradient flows into them: the state after them is held
 * fixed, as R2D2 does). Over the last T steps, targets y_t from nevo_r2d2_targets (n
 * steps rl->n_step, h's epsilon rl->rescale_eps; the online network chooses the
 * bootstrap action, the target network values it), held fixed;
 *   loss = sum_i weight_i sum_t 0.5 (y_t - Q(x_t, a_t))^2.
 * *loss: that sum; priority (n): rl->priority_eta max_t |delta| + (1 - eta) mean_t |delta|
 * of each sequence. NEVO_ERR_NUMERIC when the loss is not finite. */
NevoStatus nevo_r2d2_batch(const NevoPolicy *p, const NevoRLConfig *rl, const float *theta, const float *target,
                           int n, const float *obs, const uint8_t *reset, const float *state0, const int *act,
                           const float *rew, const float *disc, const float *weight, float scale, NevoR2D2Work *w,
                           float *grad, double *loss, float *priority);

#endif
