/* MountainCarContinuous-v0 (Gymnasium classic control, snapshot 3f0476a; spec ENVS.md §2.4).
 *
 * MountainCar with one continuous force. The force is the action clipped to [-1, 1],
 * but the energy penalty 0.1 * action^2 uses the raw action, so out-of-range actions
 * cost more without pushing harder. Reaching position 0.45 (not 0.5 as in the
 * discrete version) with non-negative velocity terminates with +100. Gymnasium keeps
 * the state as float32 between steps (the arithmetic is float64); we round the same
 * way, which matters over 999-step episodes. The reset state itself is float64. */
#include <math.h>

#include "envs/env_internal.h"

#define POWER 0.0015
#define GRAVITY 0.0025
#define MIN_ACTION (-1.0)
#define MAX_ACTION 1.0
#define MIN_POSITION (-1.2)
#define MAX_POSITION 0.6
#define MAX_SPEED 0.07
#define GOAL_POSITION 0.45
#define GOAL_VELOCITY 0.0
#define GOAL_REWARD 100.0
#define RESET_LOW (-0.6)
#define RESET_HIGH (-0.4)

typedef struct MountainCarContinuous {
    double position, velocity; /* Gymnasium's state order */
} MountainCarContinuous;

static double clip(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

static void write_obs(const MountainCarContinuous *s, float *obs) {
    obs[0] = (float)s->position;
    obs[1] = (float)s->velocity;
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    MountainCarContinuous *s = state;
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    s->position = RESET_LOW + (RESET_HIGH - RESET_LOW) * nevo_rng_uniform(&rng);
    s->velocity = 0.0;
    write_obs(s, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    MountainCarContinuous *s = state;
    double raw = action[0];
    double force = clip(raw, MIN_ACTION, MAX_ACTION);
    double position = s->position, velocity = s->velocity;

    velocity += force * POWER - GRAVITY * cos(3 * position);
    velocity = clip(velocity, -MAX_SPEED, MAX_SPEED);
    position += velocity;
    position = clip(position, MIN_POSITION, MAX_POSITION);
    if (position == MIN_POSITION && velocity < 0) velocity = 0.0;

    /* Termination is decided on the float64 values, before the float32 rounding. */
    bool terminated = position >= GOAL_POSITION && velocity >= GOAL_VELOCITY;
    double reward = terminated ? GOAL_REWARD : 0.0;
    reward -= 0.1 * (raw * raw); /* raw action: clipping does not waive the penalty */

    s->position = (float)position;
    s->velocity = (float)velocity;
    out->terminated = terminated;
    out->reward = (float)reward;
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *values) {
    const MountainCarContinuous *s = state;
    values[0] = s->position;
    values[1] = s->velocity;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    for (int i = 0; i < 2; i++)
        if (!isfinite(values[i]))
            return nevo_error(err, NEVO_ERR_INVALID,
                              "MountainCarContinuous-v0: state[%d] is %g, not finite", i,
                              values[i]);
    MountainCarContinuous *s = state;
    s->position = values[0];
    s->velocity = values[1];
    write_obs(s, obs);
    return NEVO_OK;
}

const NevoEnvClass nevo_env_mountain_car_continuous = {
    .spec =
        {
            .name = "MountainCarContinuous-v0",
            .summary = "MountainCar with a continuous force in [-1, 1] and an energy penalty (Gymnasium)",
            .obs_rank = 1,
            .obs_shape = {2},
            .obs_dim = 2,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 1,
            .action_low = {-1.0f},
            .action_high = {1.0f},
            .max_steps = 999,
            .has_reward_threshold = true,
            .reward_threshold = 90.0,
            .state_dim = 2,
            .bc_dim = 2, /* final (position, velocity) */
        },
    .state_size = sizeof(MountainCarContinuous),
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
};
