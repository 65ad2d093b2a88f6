/* CartPole-v1 (Gymnasium classic control, snapshot 3f0476a; spec ENVS.md §2.1).
 *
 * A pole hinged on a cart; actions push the cart left (0) or right (1) with 10 N.
 * Explicit Euler with tau = 0.02, every update using the old values. The episode
 * terminates when |x| > 2.4 or |theta| > 12 degrees; every step, the terminating one
 * included, earns +1. State is float64 as in Gymnasium, observations float32. */
#include <math.h>

#include "envs/env_internal.h"

#define GRAVITY 9.8
#define MASS_CART 1.0
#define MASS_POLE 0.1
#define HALF_LENGTH 0.5 /* Gymnasium's `length` is half the pole */
#define FORCE_MAG 10.0
#define TAU 0.02
#define X_LIMIT 2.4
#define RESET_BOUND 0.05

/* Derived exactly as the reference computes them, so the rounding matches. */
#define TOTAL_MASS (MASS_POLE + MASS_CART)
#define POLEMASS_LENGTH (MASS_POLE * HALF_LENGTH)
#define THETA_LIMIT (12 * 2 * M_PI / 360)

typedef struct CartPole {
    double x, x_dot, theta, theta_dot; /* Gymnasium's state order */
} CartPole;

static void write_obs(const CartPole *s, float *obs) {
    obs[0] = (float)s->x;
    obs[1] = (float)s->x_dot;
    obs[2] = (float)s->theta;
    obs[3] = (float)s->theta_dot;
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    CartPole *s = state;
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    double v[4];
    for (int i = 0; i < 4; i++) v[i] = -RESET_BOUND + 2 * RESET_BOUND * nevo_rng_uniform(&rng);
    *s = (CartPole){v[0], v[1], v[2], v[3]};
    write_obs(s, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    CartPole *s = state;
    double force = (int)action[0] == 1 ? FORCE_MAG : -FORCE_MAG;
    double costheta = cos(s->theta), sintheta = sin(s->theta);

    double temp = (force + POLEMASS_LENGTH * (s->theta_dot * s->theta_dot) * sintheta) / TOTAL_MASS;
    double thetaacc = (GRAVITY * sintheta - costheta * temp) /
                      (HALF_LENGTH * (4.0 / 3.0 - MASS_POLE * (costheta * costheta) / TOTAL_MASS));
    double xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;

    /* Explicit Euler: positions advance with the old velocities. */
    s->x = s->x + TAU * s->x_dot;
    s->x_dot = s->x_dot + TAU * xacc;
    s->theta = s->theta + TAU * s->theta_dot;
    s->theta_dot = s->theta_dot + TAU * thetaacc;

    out->terminated = s->x < -X_LIMIT || s->x > X_LIMIT || s->theta < -THETA_LIMIT ||
                      s->theta > THETA_LIMIT;
    out->reward = 1.0f; /* the terminating step is rewarded too */
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *values) {
    const CartPole *s = state;
    values[0] = s->x;
    values[1] = s->x_dot;
    values[2] = s->theta;
    values[3] = s->theta_dot;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    for (int i = 0; i < 4; i++)
        if (!isfinite(values[i]))
            return nevo_error(err, NEVO_ERR_INVALID, "CartPole-v1: state[%d] is %g, not finite",
                              i, values[i]);
    CartPole *s = state;
    *s = (CartPole){values[0], values[1], values[2], values[3]};
    write_obs(s, obs);
    return NEVO_OK;
}

const NevoEnvClass nevo_env_cartpole = {
    .spec =
        {
            .name = "CartPole-v1",
            .summary = "balance a pole on a cart by pushing it left or right (Gymnasium)",
            .obs_rank = 1,
            .obs_shape = {4},
            .obs_dim = 4,
            .action_kind = NEVO_SPACE_DISCRETE,
            .n_actions = 2,
            .action_dim = 1,
            .max_steps = 500,
            .has_reward_threshold = true,
            .reward_threshold = 475.0,
            .state_dim = 4,
            .bc_dim = 4, /* final (x, x_dot, theta, theta_dot) */
        },
    .state_size = sizeof(CartPole),
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
};
