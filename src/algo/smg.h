/* Safe mutations (Lehman et al. 2018, "Safe Mutations for Deep and Recurrent Neural
 * Networks through Output Gradients"), internal to the GA: a child's step is shaped by
 * how strongly its parent's raw outputs y (logits, pre-squash actions) depend on each
 * parameter, on a batch of states from the parent's own episodes X (n, obs_dim).
 *
 * With eps the child's noise slice and sigma = ga.sigma:
 *   SM-G-SUM  s_i = sqrt(sum_k (sum_t dy_k(x_t)/dtheta_i)^2)   (one backward per output k)
 *   SM-G-ABS  s_i = sqrt(sum_k (mean_t |dy_k(x_t)/dtheta_i|)^2) (per-state gradients)
 *   SM-G-SO   s_i = sqrt(|(H u)_i|), u = eps / |eps|, H the Hessian at theta of the
 *             output divergence L(theta') = mean_t sum_k (y_k(x_t; theta') - y_k(x_t; theta))^2,
 *             which there is H = (2 / n) sum_t J_t^T J_t (J_t = dy(x_t)/dtheta; the term
 *             with the second derivatives of y is multiplied by y' - y = 0): J_t u by
 *             forward-mode differentiation (in double), then J^T of it by one backward
 *   and the child is theta + clip(sigma eps_i / d_i, +-NEVO_SCALED_CLIP) with the divisor
 *   d_i = max(s_i, 0.01), except that s_i = 0 (a weight no recorded state reaches: an
 *   input that stays 0, a dead ReLU) gives d_i = 1, a plain step, as the paper's code
 *   does (100 sigma would throw such a weight about until its input first turns on); a
 *   non-finite s_i gives FLT_MAX, no step. s is not normalised otherwise (neither is it
 *   in the paper's code).
 *   SM-R      no scale: the child is theta + sigma' eps with sigma' found by a line search
 *             so that the mean over states and outputs of (y(theta + sigma' eps) - y(theta))^2
 *             is ga.sigma (the target); bisection, a fixed number of steps, never past the
 *             sigma' at which a weight would move by NEVO_SCALED_CLIP.
 *
 * Recurrent policies (policy.lstm): the states are sequences, each episode's kept
 * observations in step order (NevoStates keeps the reset observation and then evenly
 * spaced steps: the whole episode while it fits in its share of ga.sm_states; a sequence
 * with steps left out is not one the policy ran, so a recurrent run wants ga.sm_states
 * of at least episodes x the episode's length), and
 * starts (n) marks where each episode's begin (nonzero: the LSTM's state is zeroed
 * there, as at an episode's start; starts NULL: one sequence). y(x_t) is the output at
 * step t of that sequence, so dy/dtheta runs back through time (nevo_lstm_backward
 * between the feed-forward parts' backwards). Every mode takes them: SM-G-ABS's
 * gradient of y(x_t) is a backward through time over its episode's steps up to t (the
 * prefix's forward again first), so an episode of T kept states costs T (T + 1) / 2
 * steps each way per output, against SUM's T; SM-G-SO's J_t u is a forward-mode pass
 * through the LSTM too (in double, the cell's step recomputed). For a feed-forward
 * policy starts is ignored.
 *
 * Every function here runs on the calling thread alone with its own NevoSmWork, and its
 * result depends only on its arguments: the GA runs one parent or child per pool item. */
#ifndef NEVO_SMG_H
#define NEVO_SMG_H

#include <stdint.h>

#include "nevo/policy.h"

typedef enum NevoSafeMutation {
    NEVO_SM_PLAIN = 0,
    NEVO_SM_G_SUM,
    NEVO_SM_G_ABS,
    NEVO_SM_G_SO,
    NEVO_SM_R,
} NevoSafeMutation;

/* ga.mutation's value ("plain", "sm-g-sum", ...), or -1 for none of them. */
int nevo_sm_mode(const char *name);

#define NEVO_SM_SCALE_FLOOR 0.01 /* the least divisor of a step */
#define NEVO_SM_R_STEPS 16       /* SM-R's bisection steps, after bracketing */

/* Scratch of one thread for a policy and batches of up to max_states states. */
typedef struct NevoSmWork NevoSmWork;
NevoSmWork *nevo_sm_work_new(const NevoPolicy *p, int max_states);
void nevo_sm_work_free(NevoSmWork *w);

/* SM-G-SUM or SM-G-ABS (mode): the divisors (nparams floats) of theta's steps, from
 * states X (n, obs_dim), 1 <= n <= max_states; starts (n) or NULL, the episodes'
 * beginnings (recurrent policies, above). */
void nevo_sm_scale(NevoSmWork *w, NevoSafeMutation mode, const float *theta, const float *X, const uint8_t *starts,
                   int n, float *scale);

/* SM-G-SO: the divisors (nparams floats) of the step along eps (nparams, not all 0),
 * from states X (n, obs_dim) and starts as nevo_sm_scale's. */
void nevo_sm_scale_so(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n,
                      const float *eps, float *scale);

/* SM-R: sigma' (> 0) for the step theta + sigma' eps (nevo_perturb_rows), and in
 * *divergence (if not NULL) the divergence it gives. */
float nevo_sm_r_sigma(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n,
                      const float *eps, double target, double *divergence);

/* The output divergence of theta2 from theta on X: the mean over the n states and the
 * outputs of (y(theta2) - y(theta))^2. */
double nevo_sm_divergence(NevoSmWork *w, const float *theta, const float *theta2, const float *X,
                          const uint8_t *starts, int n);

#endif
