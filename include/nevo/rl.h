/* The learners' targets for actor-learner RL (SEED RL's two): V-trace (Espeholt et al.
 * 2018, IMPALA) for actor-critic, and R2D2's value rescaling and n-step double-Q
 * targets (Kapturowski et al. 2019). ../shared/spec/ALGORITHMS.md has the formulas.
 *
 * Layout: an unroll of T steps of B independent trajectories, time-major: element
 * (t, b) at t B + b. discounts[t, b] is gamma at step t, 0 where the episode ended at
 * step t (so nothing after it is bootstrapped into it). All sums run backwards over t
 * in double and are rounded to float once, so the results do not depend on B or on
 * how the batch is split. */
#ifndef NEVO_RL_H
#define NEVO_RL_H

#include <stddef.h>

/* V-trace targets and policy-gradient advantages.
 *   log_rhos (T, B): log pi(a_t|x_t) - log mu(a_t|x_t) of the actions taken
 *   discounts, rewards, values (T, B); bootstrap (B): V(x_T)
 *   rho_bar, c_bar: the truncation levels (IMPALA: 1 and 1)
 * Writes vs (T, B): the targets v_s, from
 *   v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),
 *   delta_s = rho_s (r_s + gamma_s V(x_{s+1}) - V(x_s)),
 *   rho_s = min(rho_bar, pi/mu), c_s = min(c_bar, pi/mu), with V(x_T) = bootstrap;
 * and pg_adv (T, B): rho_s (r_s + gamma_s v_{s+1} - V(x_s)) with v_T = bootstrap, the
 * advantage the policy loss -pg_adv log pi(a_s|x_s) holds fixed. Either output may be
 * NULL. */
void nevo_vtrace(const float *log_rhos, const float *discounts, const float *rewards, const float *values,
                 const float *bootstrap, int T, int B, float rho_bar, float c_bar, float *vs, float *pg_adv);

/* IMPALA's loss on n rows (an unroll's T B steps, flattened), summed over the rows in
 * row order (in double):
 *   L = sum_i [ -pg_adv_i log pi(a_i|x_i) + baseline_cost 0.5 (vs_i - V_i)^2
 *               - entropy_cost H(pi(.|x_i)) ]
 * logits (n, A) give pi = softmax(logits); values (n); actions (n) in 0 .. A - 1; vs and
 * pg_adv (n) from nevo_vtrace, held fixed. Writes dlogits (n, A) and dvalues (n), the
 * gradient of L (either may be NULL); returns L. */
double nevo_impala_loss(const float *logits, const float *values, const int *actions, const float *vs,
                        const float *pg_adv, int n, int A, float baseline_cost, float entropy_cost, float *dlogits,
                        float *dvalues);

/* R2D2's value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x and its inverse
 * h^-1(x) = sign(x)((((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1), in double
 * (R2D2: eps = 1e-3; at eps = 0 the inverse is the formula's limit, sign(x)((|x| + 1)^2 - 1)). */
double nevo_r2d2_h(double x, double eps);
double nevo_r2d2_h_inv(double x, double eps);

/* R2D2's n-step double-Q targets over a sequence of T steps of B trajectories:
 *   y_t = h( sum_{k<m} (prod_{j<k} g_{t+j}) r_{t+k} + (prod_{j<m} g_{t+j}) h^-1(Q_target(x_{t+m}, a*)) )
 * with a* = argmax_a Q_online(x_{t+m}, a) (the first maximum), m = min(n, T - t) steps
 * (the sequence's end bootstraps from step T: q_online and q_target hold T + 1 steps),
 * g_t the discount at step t (0 where the episode ended there, which also zeroes every
 * later term). q_online, q_target: (T + 1, B, A). Writes targets (T, B). */
void nevo_r2d2_targets(const float *rewards, const float *discounts, const float *q_online, const float *q_target,
                       int T, int B, int A, int n, double eps, float *targets);

/* Ape-X's per-actor exploration: epsilon_i = base^(1 + alpha i / (N - 1)) for actor i of
 * N (R2D2 and SEED RL: base 0.4, alpha 7); N = 1 gives base. */
double nevo_apex_epsilon(int i, int N, double base, double alpha);

#endif
