/* Acrobot-v1 (Gymnasium classic control, snapshot 3f0476a; spec ENVS.md §2.2).
 *
 * Two links hang from a fixed pivot; the only actuator is the joint between them
 * (torque -1, 0, +1 for actions 0, 1, 2). The "book" dynamics (Sutton & Barto) are
 * integrated with one classical RK4 step of 0.2 s; the angles are then wrapped into
 * [-pi, pi] and the velocities clipped. The episode terminates when the tip rises
 * more than one link length above the pivot; each step costs -1 except the
 * terminating one (0). State is float64, except that a reset state is rounded to
 * float32 as Gymnasium's reset does. Observations are float32. */
#include <math.h>

#include "envs/env_internal.h"

#define DT 0.2
#define LINK_LENGTH_1 1.0
#define LINK_MASS_1 1.0
#define LINK_MASS_2 1.0
#define LINK_COM_1 0.5 /* distance from a joint to its link's centre of mass */
#define LINK_COM_2 0.5
#define LINK_MOI 1.0 /* moment of inertia of both links */
#define GRAVITY 9.8
#define MAX_VEL_1 (4 * M_PI)
#define MAX_VEL_2 (9 * M_PI)
#define RESET_BOUND 0.1

static const double torques[3] = {-1.0, 0.0, 1.0};

typedef struct Acrobot {
    double s[4]; /* theta1, theta2, dtheta1, dtheta2 (Gymnasium's order) */
} Acrobot;

/* Time derivative of (theta1, theta2, dtheta1, dtheta2) under torque a; the torque
 * itself is constant over the step, so it is passed rather than integrated. */
static void derivs(const double y[4], double a, double dy[4]) {
    const double m1 = LINK_MASS_1, m2 = LINK_MASS_2, l1 = LINK_LENGTH_1;
    const double lc1 = LINK_COM_1, lc2 = LINK_COM_2, I1 = LINK_MOI, I2 = LINK_MOI;
    const double g = GRAVITY;
    double theta1 = y[0], theta2 = y[1], dtheta1 = y[2], dtheta2 = y[3];

    double d1 = m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * cos(theta2)) + I1 + I2;
    double d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos(theta2)) + I2;
    double phi2 = m2 * lc2 * g * cos(theta1 + theta2 - M_PI / 2.0);
    double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin(theta2) -
                  2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin(theta2) +
                  (m1 * lc1 + m2 * l1) * g * cos(theta1 - M_PI / 2) + phi2;
    /* Book dynamics: keeps the dtheta1^2 term the NIPS variant drops. */
    double ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin(theta2) - phi2) /
                      (m2 * lc2 * lc2 + I2 - d2 * d2 / d1);
    double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;

    dy[0] = dtheta1;
    dy[1] = dtheta2;
    dy[2] = ddtheta1;
    dy[3] = ddtheta2;
}

/* Wraps an angle into [-pi, pi] by subtracting or adding whole turns one at a time, as
 * the reference does, so the rounding matches it (fmod would not). Finite input is
 * guaranteed by set_state and the clipped velocities. */
static double wrap(double x) {
    const double lo = -M_PI, hi = M_PI, span = hi - lo;
    while (x > hi) x -= span;
    while (x < lo) x += span;
    return x;
}

static double clip(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

static void write_obs(const Acrobot *st, float *obs) {
    const double *s = st->s;
    obs[0] = (float)cos(s[0]);
    obs[1] = (float)sin(s[0]);
    obs[2] = (float)cos(s[1]);
    obs[3] = (float)sin(s[1]);
    obs[4] = (float)s[2];
    obs[5] = (float)s[3];
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    Acrobot *st = state;
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    /* Gymnasium casts the reset state to float32; the first step promotes it back. */
    for (int i = 0; i < 4; i++)
        st->s[i] = (float)(-RESET_BOUND + 2 * RESET_BOUND * nevo_rng_uniform(&rng));
    write_obs(st, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    Acrobot *st = state;
    double a = torques[(int)action[0]];

    /* One classical RK4 step of length DT. */
    double *y = st->s, k1[4], k2[4], k3[4], k4[4], tmp[4];
    derivs(y, a, k1);
    for (int i = 0; i < 4; i++) tmp[i] = y[i] + DT / 2.0 * k1[i];
    derivs(tmp, a, k2);
    for (int i = 0; i < 4; i++) tmp[i] = y[i] + DT / 2.0 * k2[i];
    derivs(tmp, a, k3);
    for (int i = 0; i < 4; i++) tmp[i] = y[i] + DT * k3[i];
    derivs(tmp, a, k4);
    for (int i = 0; i < 4; i++)
        y[i] = y[i] + DT / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);

    y[0] = wrap(y[0]);
    y[1] = wrap(y[1]);
    y[2] = clip(y[2], -MAX_VEL_1, MAX_VEL_1);
    y[3] = clip(y[3], -MAX_VEL_2, MAX_VEL_2);

    /* Tip height above the pivot, in link lengths. */
    out->terminated = -cos(y[0]) - cos(y[1] + y[0]) > 1.0;
    out->reward = out->terminated ? 0.0f : -1.0f;
    write_obs(st, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *values) {
    const Acrobot *st = state;
    for (int i = 0; i < 4; i++) values[i] = st->s[i];
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    /* Non-finite angles would also hang wrap(). */
    for (int i = 0; i < 4; i++)
        if (!isfinite(values[i]))
            return nevo_error(err, NEVO_ERR_INVALID, "Acrobot-v1: state[%d] is %g, not finite",
                              i, values[i]);
    Acrobot *st = state;
    for (int i = 0; i < 4; i++) st->s[i] = values[i];
    write_obs(st, obs);
    return NEVO_OK;
}

const NevoEnvClass nevo_env_acrobot = {
    .spec =
        {
            .name = "Acrobot-v1",
            .summary = "swing a two-link arm's tip above a line by torquing its elbow (Gymnasium)",
            .obs_rank = 1,
            .obs_shape = {6},
            .obs_dim = 6,
            .action_kind = NEVO_SPACE_DISCRETE,
            .n_actions = 3,
            .action_dim = 1,
            .max_steps = 500,
            .has_reward_threshold = true,
            .reward_threshold = -100.0,
            .state_dim = 4,
            .bc_dim = 6, /* final observation */
        },
    .state_size = sizeof(Acrobot),
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
};
