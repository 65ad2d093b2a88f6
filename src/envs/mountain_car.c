/* MountainCar-v0 (Gymnasium classic control, snapshot 3f0476a; spec ENVS.md §2.3).
 *
 * An underpowered car in a valley must rock back and forth to reach the flag at
 * position 0.5. Actions 0, 1, 2 accelerate left, not at all, right. Semi-implicit
 * Euler: the velocity is updated from the old position, then the position from the
 * new velocity. A car that hits the left wall stops. Every step costs -1, the last
 * one included. State is float64, observations float32. */
#include <math.h>

#include "envs/env_internal.h"

#define FORCE 0.001
#define GRAVITY 0.0025
#define MIN_POSITION (-1.2)
#define MAX_POSITION 0.6
#define MAX_SPEED 0.07
#define GOAL_POSITION 0.5
#define GOAL_VELOCITY 0.0
#define RESET_LOW (-0.6)
#define RESET_HIGH (-0.4)

typedef struct MountainCar {
    double position, velocity; /* Gymnasium's state order */
} MountainCar;

static double clip(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

static void write_obs(const MountainCar *s, float *obs) {
    obs[0] = (float)s->position;
    obs[1] = (float)s->velocity;
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    MountainCar *s = state;
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    s->position = RESET_LOW + (RESET_HIGH - RESET_LOW) * nevo_rng_uniform(&rng);
    s->velocity = 0.0;
    write_obs(s, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    MountainCar *s = state;
    int a = (int)action[0];
    double position = s->position, velocity = s->velocity;

    velocity += (a - 1) * FORCE - GRAVITY * cos(3 * position);
    velocity = clip(velocity, -MAX_SPEED, MAX_SPEED);
    position += velocity;
    position = clip(position, MIN_POSITION, MAX_POSITION);
    /* Inelastic left wall: the car stops instead of pressing into it. */
    if (position == MIN_POSITION && velocity < 0) velocity = 0.0;

    s->position = position;
    s->velocity = velocity;
    out->terminated = position >= GOAL_POSITION && velocity >= GOAL_VELOCITY;
    out->reward = -1.0f; /* the step that reaches the goal costs -1 too */
    write_obs(s, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *values) {
    const MountainCar *s = state;
    values[0] = s->position;
    values[1] = s->velocity;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    for (int i = 0; i < 2; i++)
        if (!isfinite(values[i]))
            return nevo_error(err, NEVO_ERR_INVALID, "MountainCar-v0: state[%d] is %g, not finite",
                              i, values[i]);
    MountainCar *s = state;
    s->position = values[0];
    s->velocity = values[1];
    write_obs(s, obs);
    return NEVO_OK;
}

const NevoEnvClass nevo_env_mountain_car = {
    .spec =
        {
            .name = "MountainCar-v0",
            .summary = "rock an underpowered car out of a valley; push left, none or right (Gymnasium)",
            .obs_rank = 1,
            .obs_shape = {2},
            .obs_dim = 2,
            .action_kind = NEVO_SPACE_DISCRETE,
            .n_actions = 3,
            .action_dim = 1,
            .max_steps = 200,
            .has_reward_threshold = true,
            .reward_threshold = -110.0,
            .state_dim = 2,
            .bc_dim = 2, /* final (position, velocity) */
        },
    .state_size = sizeof(MountainCar),
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
};
