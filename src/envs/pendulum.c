/* Pendulum-v1 (Gymnasium classic control, snapshot 3f0476a; spec ENVS.md §2.5).
 *
 * Swing a pendulum up and hold it upright with a torque clipped to [-2, 2]. The cost
 * of a step is computed from the state *before* it: angle^2 (angle normalised into
 * [-pi, pi)) + 0.1 * speed^2 + 0.001 * torque^2, with the clipped torque. Semi-implicit
 * Euler with dt = 0.05; the speed is clipped to +-8 and the angle is left unwrapped.
 * It never terminates, only truncates at 200 steps. State is float64, observations
 * (cos theta, sin theta, theta_dot) float32. */
#include <math.h>

#include "envs/env_internal.h"

#define GRAVITY 10.0
#define MASS 1.0
#define LENGTH 1.0
#define DT 0.05
#define MAX_SPEED 8.0
#define MAX_TORQUE 2.0
#define RESET_THETA M_PI
#define RESET_THETA_DOT 1.0

typedef struct Pendulum {
    double theta, theta_dot; /* Gymnasium's state order; theta = 0 is upright */
} Pendulum;

static double clip(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* ((x + pi) mod 2pi) - pi with a floored (Python) modulo: the result of the mod has
 * the sign of 2pi, unlike C's fmod. */
static double angle_normalize(double x) {
    const double two_pi = 2 * M_PI;
    double r = fmod(x + M_PI, two_pi);
    if (r < 0) r += two_pi;
    return r - M_PI;
}

static void write_obs(const Pendulum *s, float *obs) {
    obs[0] = (float)cos(s->theta);
    obs[1] = (float)sin(s->theta);
    obs[2] = (float)s->theta_dot;
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    Pendulum *s = state;
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    s->theta = -RESET_THETA + 2 * RESET_THETA * nevo_rng_uniform(&rng);
    s->theta_dot = -RESET_THETA_DOT + 2 * RESET_THETA_DOT * nevo_rng_uniform(&rng);
    write_obs(s, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    Pendulum *s = state;
    const double g = GRAVITY, m = MASS, l = LENGTH;
    double th = s->theta, thdot = s->theta_dot;
    double u = clip(action[0], -MAX_TORQUE, MAX_TORQUE);

    double th_norm = angle_normalize(th);
    double cost = th_norm * th_norm + 0.1 * (thdot * thdot) + 0.001 * (u * u);

    double new_thdot = thdot + (3 * g / (2 * l) * sin(th) + 3.0 / (m * l * l) * u) * DT;
    new_thdot = clip(new_thdot, -MAX_SPEED, MAX_SPEED);
    /* Semi-implicit: the angle moves with the new speed. */
    s->theta = th + new_thdot * DT;
    s->theta_dot = new_thdot;

    out->terminated = false;
    out->reward = (float)-cost;
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *values) {
    const Pendulum *s = state;
    values[0] = s->theta;
    values[1] = s->theta_dot;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    for (int i = 0; i < 2; i++)
        if (!isfinite(values[i]))
            return nevo_error(err, NEVO_ERR_INVALID, "Pendulum-v1: state[%d] is %g, not finite",
                              i, values[i]);
    Pendulum *s = state;
    s->theta = values[0];
    s->theta_dot = values[1];
    write_obs(s, obs);
    return NEVO_OK;
}

const NevoEnvClass nevo_env_pendulum = {
    .spec =
        {
            .name = "Pendulum-v1",
            .summary = "swing a pendulum upright and hold it with a bounded torque (Gymnasium)",
            .obs_rank = 1,
            .obs_shape = {3},
            .obs_dim = 3,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 1,
            .action_low = {-2.0f},
            .action_high = {2.0f},
            .max_steps = 200,
            .has_reward_threshold = false, /* Gymnasium registers none */
            .state_dim = 2,
            .bc_dim = 3, /* final observation */
        },
    .state_size = sizeof(Pendulum),
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
};
