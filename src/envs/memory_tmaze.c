/* memory/tmaze: a T-maze that takes memory (after Bakker 2002, "Reinforcement Learning
 * with Long Short-Term Memory"), for recurrent policies.
 *
 * The agent starts at the foot of a corridor of L cells (env option `length`, default
 * TMAZE_LENGTH, at most TMAZE_MAX_LENGTH) that ends in a T junction. The first observation carries a cue, left or right (from the episode's
 * seed); afterwards the corridor shows nothing, and the junction only that it is one.
 * Observation (3): [cue left, cue right, at the junction], the cue bits 0 after the
 * first step. Actions: 0 forward, 1 turn left, 2 turn right. Forward moves one cell up
 * the corridor (at the junction it stays); a turn in the corridor bumps the wall and
 * stays; a turn at the junction ends the episode with +1 where it matches the cue and -1
 * where it does not. Every other step costs STEP_COST. The best return is 1 - STEP_COST
 * L (0.9 for L = 10); a policy without memory can at best guess, 0.5 (1) + 0.5 (-1) -
 * STEP_COST L on average. The time limit is 4 (L + 1) steps. */
#include <math.h>
#include <string.h>

#include "envs/env_internal.h"

#define TMAZE_LENGTH 10 /* forward steps from the start to the junction, by default */
#define TMAZE_MAX_LENGTH 100000
#define STEP_COST 0.01f

typedef struct TMazeParams {
    int length;
} TMazeParams;

static const char *const option_names[] = {"length", NULL};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts, int n_opts, NevoError *err) {
    TMazeParams *p = params;
    p->length = TMAZE_LENGTH;
    for (int i = 0; i < n_opts; i++) {
        double v = opts[i].value;
        if (strcmp(opts[i].key, "length") != 0) continue;
        if (!(v >= 1 && v <= TMAZE_MAX_LENGTH && v == floor(v)))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: length must be a whole number in [1, %d], got %g",
                              spec->name, TMAZE_MAX_LENGTH, v);
        p->length = (int)v;
    }
    spec->max_steps = 4 * (p->length + 1);
    return NEVO_OK;
}

static int length_of(const NevoEnv *env) { return ((const TMazeParams *)nevo_env_params(env))->length; }

typedef struct TMaze {
    int pos;   /* 0 (start) .. TMAZE_LENGTH (junction) */
    int cue;   /* 0 left, 1 right */
} TMaze;

static void write_obs(const TMaze *s, int L, int first, float *obs) {
    obs[0] = first && s->cue == 0 ? 1.0f : 0.0f;
    obs[1] = first && s->cue == 1 ? 1.0f : 0.0f;
    obs[2] = s->pos == L ? 1.0f : 0.0f;
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    TMaze *s = state;
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    s->pos = 0;
    s->cue = (int)nevo_rng_below(&rng, 2);
    write_obs(s, length_of(env), 1, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs, NevoStepResult *out) {
    TMaze *s = state;
    int a = (int)action[0], L = length_of(env);
    out->terminated = false;
    out->reward = -STEP_COST;
    if (a == 0) {
        if (s->pos < L) s->pos++;
    } else if ((a == 1 || a == 2) && s->pos == L) {
        out->terminated = true;
        out->reward = a - 1 == s->cue ? 1.0f : -1.0f;
    }
    write_obs(s, L, 0, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *values) {
    (void)env;
    const TMaze *s = state;
    values[0] = s->pos;
    values[1] = s->cue;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs, NevoError *err) {
    int L = length_of(env);
    if (!(values[0] >= 0 && values[0] <= L && values[0] == floor(values[0])))
        return nevo_error(err, NEVO_ERR_INVALID, "memory/tmaze: state[0] (position) is %g, not a whole number in "
                          "[0, %d]", values[0], L);
    if (!(values[1] == 0 || values[1] == 1))
        return nevo_error(err, NEVO_ERR_INVALID, "memory/tmaze: state[1] (cue) is %g, not 0 or 1", values[1]);
    TMaze *s = state;
    s->pos = (int)values[0];
    s->cue = (int)values[1];
    write_obs(s, L, 0, obs); /* a set state is past the first step: no cue */
    return NEVO_OK;
}

/* where the episode ended: the position along the corridor, 0 to 1 */
static void bc(const NevoEnv *env, const void *state, float *out) {
    const TMaze *s = state;
    out[0] = (float)s->pos / (float)length_of(env);
}

const NevoEnvClass nevo_env_memory_tmaze = {
    .spec =
        {
            .name = "memory/tmaze",
            .summary = "T-maze: recall a cue seen at the first step to turn the right way at the junction (Bakker 2002)",
            .obs_rank = 1,
            .obs_shape = {3},
            .obs_dim = 3,
            .action_kind = NEVO_SPACE_DISCRETE,
            .n_actions = 3,
            .action_dim = 1,
            .max_steps = 4 * (TMAZE_LENGTH + 1),
            .state_dim = 2,
            .bc_dim = 1,
        },
    .state_size = sizeof(TMaze),
    .params_size = sizeof(TMazeParams),
    .option_names = option_names,
    .configure = configure,
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
    .bc = bc,
};
