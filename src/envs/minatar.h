/* What the five MinAtar games (Young & Tian 2019) share: options, the sticky-action
 * rule, the action-set mapping, observation planes and rendering.
 *
 * Each game file (minatar_<game>.c) keeps a MinatarCommon as the first member of its
 * state and calls minatar_action() once at the top of its step: that maps the agent's
 * index into the full 6-action set (n l u r d f), draws the sticky-action uniform (the
 * first draw of every step, as in the reference) and returns the action to execute.
 *
 * As in the reference, reset() keeps `last_action`, so the first step of an episode can
 * repeat the previous episode's last action (a fresh instance starts from 0). The
 * class's forget hook (minatar_forget) clears it: the evaluator calls it before every
 * task so that an episode's outcome is a function of its own seed alone, whichever
 * episode ran before it in the same slot (bit-identical results at any thread or slot
 * count); `nevo eval --policy random|constant:A` plays its episodes one after another
 * in one instance without it, the reference's protocol. */
#ifndef NEVO_MINATAR_H
#define NEVO_MINATAR_H

#include "envs/env_internal.h"

#define MINATAR_N 10
#define MINATAR_MAX_CHANNELS 10

/* Full action set indices. */
enum { MINATAR_NOOP = 0, MINATAR_LEFT = 1, MINATAR_UP = 2, MINATAR_RIGHT = 3, MINATAR_DOWN = 4,
       MINATAR_FIRE = 5 };

typedef struct MinatarParams {
    double sticky_prob; /* probability of repeating the previous action (0.1) */
    int ramping;        /* difficulty ramping on (1) or off (0) */
    int minimal;        /* 1: the game's minimal action set; 0: all 6 actions */
    int n_minimal;
    int minimal_set[6]; /* full-set index of each minimal action */
} MinatarParams;

typedef struct MinatarCommon {
    NevoRng rng;     /* the game's one random stream: sticky draw first, then the game's */
    int last_action; /* the action executed on the previous step (full-set index) */
    int terminal;
} MinatarCommon;

extern const char *const minatar_option_names[]; /* sticky_prob, ramping, minimal_actions */

/* Shared configure: applies the options to params and sets spec->n_actions. The game's
 * minimal set is given by full-set indices. */
NevoStatus minatar_configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                             int n_opts, NevoError *err, const int *minimal_set, int n_minimal);

/* Starts the common part of a new episode from its seed. */
void minatar_reset_common(MinatarCommon *c, uint64_t seed);
/* The class's forget hook: the next episode starts with last_action 0. */
void minatar_forget(const NevoEnv *env, void *state);

/* The class table of a game: every game file defines N_CH, STATE_DIM and the static
 * hooks configure, reset, step, get_state, set_state and render; the rest (the
 * [10, 10, N_CH] observation, the 6 discrete actions, no time limit, the options, the
 * forget hook that clears the sticky action) is the same for all five. */
#define MINATAR_CLASS(NAME, SUMMARY, STATE_TYPE)                                           \
    {                                                                                      \
        .spec = {.name = NAME,                                                             \
                 .summary = SUMMARY,                                                       \
                 .obs_rank = 3,                                                            \
                 .obs_shape = {MINATAR_N, MINATAR_N, N_CH},                                \
                 .obs_dim = MINATAR_N * MINATAR_N * N_CH,                                  \
                 .action_kind = NEVO_SPACE_DISCRETE,                                       \
                 .n_actions = 6,                                                           \
                 .action_dim = 1,                                                          \
                 .max_steps = 0,                                                           \
                 .state_dim = STATE_DIM},                                                  \
        .state_size = sizeof(STATE_TYPE), .params_size = sizeof(MinatarParams),            \
        .option_names = minatar_option_names, .configure = configure,                      \
        .forget = minatar_forget, .reset = reset, .step = step, .get_state = get_state,    \
        .set_state = set_state, .render = render, .render_w = MINATAR_N,                   \
        .render_h = MINATAR_N,                                                             \
    }


/* Maps the agent's action (an index into the configured set) to the full set and
 * applies the sticky rule; returns the full-set action to execute. */
int minatar_action(const MinatarParams *p, MinatarCommon *c, const float *action);

/* Uniform [0, 1) and integer [lo, hi) draws from the game's stream, named after the
 * numpy calls they stand for (rand, randint). */
double minatar_rand(MinatarCommon *c);
int minatar_randint(MinatarCommon *c, int lo, int hi);

/* obs is (10, 10, C) row-major [y][x][channel]. */
static inline void minatar_set(float *obs, int n_channels, int y, int x, int ch) {
    obs[(y * MINATAR_N + x) * n_channels + ch] = 1.0f;
}

/* Renders observation planes as a 10x10 RGB image, one colour per channel (later
 * channels drawn over earlier ones), black background. */
void minatar_render_obs(const float *obs, int n_channels, uint8_t *rgb);

#endif
