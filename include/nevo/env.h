/* Environments: a constant spec plus per-instance state, in the MuJoCo shape.
 *
 * A NevoEnv is the constant part (spec with options applied, class, parameters); it is
 * read-only after nevo_env_new and shared by every thread. An *instance* is a plain
 * block of nevo_env_instance_size() bytes owned by the caller; instances of one env
 * can be packed in one array and stepped together into caller-owned batch buffers
 * (PufferLib's borrowed slices), so stepping many instances allocates nothing.
 *
 * Actions are floats: a discrete action is its index (0, 1, ...) in action[0]; a
 * continuous action is action_dim values (the env clips them as its reference does).
 * The time limit is applied here, as Gymnasium's TimeLimit does: after each step,
 * truncated = (steps taken >= max_steps). Stepping an instance that has ended is a
 * no-op that returns reward 0 and the same flags. */
#ifndef NEVO_ENV_H
#define NEVO_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nevo/config.h"
#include "nevo/status.h"

#define NEVO_ENV_MAX_ACT_DIM 32
#define NEVO_ENV_MAX_BC 8

typedef enum NevoSpaceKind {
    NEVO_SPACE_DISCRETE = 0, /* n_actions choices; action[0] is the index */
    NEVO_SPACE_BOX = 1,      /* action_dim floats within [action_low, action_high] */
} NevoSpaceKind;

typedef struct NevoEnvSpec {
    const char *name;        /* registry name, e.g. "CartPole-v1", "minatar/breakout" */
    const char *summary;     /* one line for `nevo envs` */
    int obs_rank;            /* 1 for vectors, 3 for images */
    int obs_shape[3];        /* e.g. {4} or {10, 10, 4} (rows, cols, channels) */
    int obs_dim;             /* product of obs_shape */
    NevoSpaceKind action_kind;
    int n_actions;           /* discrete: number of actions */
    int action_dim;          /* 1 for discrete; box: number of values */
    float action_low[NEVO_ENV_MAX_ACT_DIM];
    float action_high[NEVO_ENV_MAX_ACT_DIM];
    int max_steps;           /* time limit; 0 = none */
    bool has_reward_threshold;
    double reward_threshold; /* "solved" mean return, when the reference registers one */
    int state_dim;           /* doubles in the full internal state (get/set_state) */
    int bc_dim;              /* behaviour characterisation size (novelty search) */
} NevoEnvSpec;

typedef struct NevoEnv NevoEnv;

/* What one step returned. */
typedef struct NevoStepResult {
    float reward;
    bool terminated;
    bool truncated;
} NevoStepResult;

/* What an environment's world looks like from above, for pictures of where episodes end
 * (`nevo plot behaviours`): walls, start and goal in the coordinates of its 2-D
 * behaviour characterisation (bc[0], bc[1]), from the tables the env itself uses.
 * Constant data. */
typedef struct NevoSceneWall {
    double x1, y1, x2, y2; /* the wall's centre line */
    double width;          /* its thickness across that line; 0 for a line (the maze's walls) */
} NevoSceneWall;

typedef struct NevoEnvScene {
    int n_walls;
    const NevoSceneWall *walls;
    bool has_start, has_goal;
    double start[2];               /* where every episode starts */
    double goal[2];                /* what the env rewards reaching, where it has one */
    double lo[2], hi[2];           /* a region [lo, hi] holding the walls, start and goal */
    bool enclosed;                 /* the walls keep every episode inside [lo, hi] */
    bool y_down;                   /* pictures put y downwards (the env's figures do) */
    const char *x_label, *y_label; /* what bc[0] and bc[1] are, with their units */
} NevoEnvScene;

/* Class table: what an environment implements. One constant instance per env. */
typedef struct NevoEnvClass {
    NevoEnvSpec spec;               /* defaults; configure may change a copy */
    size_t state_size;              /* bytes of the env's own per-instance state */
    size_t params_size;             /* bytes of constant parameters set by configure */
    const char *const *option_names; /* NULL-terminated; NULL if the env takes none */
    /* Applies options (already checked against option_names) to the spec copy and the
     * params block; NULL if the env has no options. */
    NevoStatus (*configure)(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                            int n_opts, NevoError *err);
    /* Releases what configure acquired in the params block (a loaded model); called by
     * nevo_env_free, also after a failed configure. NULL if there is nothing to release. */
    void (*release)(void *params);
    /* Releases what an instance acquired (an mjData, created on its first reset in the
     * thread that steps it; zeroed state means none yet). NULL when the state is plain
     * data. */
    void (*instance_free)(const NevoEnv *env, void *state);
    /* Starts an episode from seed; writes the first observation. */
    void (*reset)(const NevoEnv *env, void *state, uint64_t seed, float *obs);
    /* Forgets what an instance carries from one episode into the next, so that the
     * next reset starts as in a freshly made environment: MinAtar's last executed
     * action, which the reference keeps across reset() for its sticky-action rule.
     * NULL when reset alone decides the episode. */
    void (*forget)(const NevoEnv *env, void *state);
    /* Advances one step; writes the next observation and fills reward/terminated
     * (truncation by time limit is added by the env layer). */
    void (*step)(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out);
    /* Full internal state as doubles (state_dim of them); for tests and replays. */
    void (*get_state)(const NevoEnv *env, const void *state, double *values);
    /* Sets the full internal state and writes the matching observation. */
    NevoStatus (*set_state)(const NevoEnv *env, void *state, const double *values,
                            float *obs, NevoError *err);
    /* Behaviour characterisation of the current state (bc_dim floats); may be NULL,
     * then the final observation's first bc_dim values are used. */
    void (*bc)(const NevoEnv *env, const void *state, float *bc);
    /* RGB picture of the current state, w*h*3 bytes (w, h from render_size); may be NULL. */
    void (*render)(const NevoEnv *env, const void *state, uint8_t *rgb);
    int render_w, render_h;
    /* The world seen from above (maze/hard, mujoco/humanoid_trap); NULL for envs whose
     * behaviour characterisation is not a place. */
    const NevoEnvScene *scene;
} NevoEnvClass;

/* Creates the env registered under name with options applied. Unknown names and
 * options fail with a message that suggests the closest valid one. */
NevoStatus nevo_env_new(const char *name, const NevoEnvOption *opts, int n_opts, NevoEnv **out,
                        NevoError *err);
/* Creates an env from a class that is not in the registry: how a program plugs in its
 * own environment (and how tests build deliberately broken ones). */
NevoStatus nevo_env_new_from_class(const NevoEnvClass *cls, const NevoEnvOption *opts, int n_opts,
                                   NevoEnv **out, NevoError *err);
void nevo_env_free(NevoEnv *env);

const NevoEnvSpec *nevo_env_spec(const NevoEnv *env);
const NevoEnvClass *nevo_env_class(const NevoEnv *env);
/* The class's parameter block (for the env's own code). */
const void *nevo_env_params(const NevoEnv *env);
/* Overrides the time limit (an episode cap for training); 0 keeps the env's own. */
void nevo_env_set_max_steps(NevoEnv *env, int max_steps);

/* Bytes of one instance (the env layer's header plus the class's state), a multiple
 * of 16 so instances pack in arrays. */
size_t nevo_env_instance_size(const NevoEnv *env);

/* Instance lifetime. A fresh instance is zeroed memory (nevo_env_instance_init, or
 * nevo_alloc / calloc); envs whose instances own resources (MuJoCo's mjData) acquire
 * them on the first reset. nevo_env_instance_free releases them and leaves zeroed
 * bytes, so freeing twice is harmless; free every instance before nevo_env_free, or
 * its resources leak. Instance bytes may be moved (memcpy, the old copy no longer
 * used) or swapped, never duplicated: two live copies would share one simulation. */
void nevo_env_instance_init(const NevoEnv *env, void *inst);
void nevo_env_instance_free(const NevoEnv *env, void *inst);

/* Starts an episode. Like the reference implementations, an env may carry something
 * over from the instance's previous episode (MinAtar's sticky action); call
 * nevo_env_forget first to make the episode a function of its seed alone, as the
 * evaluator does for every task (results must not depend on which episode ran before
 * in the same slot). Running episodes one after another without it reproduces the
 * reference protocol of one environment played repeatedly. */
void nevo_env_forget(const NevoEnv *env, void *inst);
void nevo_env_reset(const NevoEnv *env, void *inst, uint64_t seed, float *obs);
void nevo_env_step(const NevoEnv *env, void *inst, const float *action, float *obs,
                   NevoStepResult *out);
/* Steps n packed instances: insts is n * instance_size bytes; actions (n, action_dim);
 * obs (n, obs_dim); rewards (n); terminated, truncated (n). */
void nevo_env_step_batch(const NevoEnv *env, int n, void *insts, const float *actions,
                         float *obs, float *rewards, bool *terminated, bool *truncated);
/* Steps taken in the current episode. */
int nevo_env_steps(const NevoEnv *env, const void *inst);
bool nevo_env_done(const NevoEnv *env, const void *inst);

void nevo_env_get_state(const NevoEnv *env, const void *inst, double *values);
/* Sets the full internal state (state_dim values), resets the step count to steps,
 * and writes the observation. */
NevoStatus nevo_env_set_state(const NevoEnv *env, void *inst, const double *values, int steps,
                              float *obs, NevoError *err);
/* Behaviour characterisation after an episode (bc_dim floats). */
void nevo_env_bc(const NevoEnv *env, const void *inst, const float *last_obs, float *bc);

/* Size of the pictures nevo_env_render draws; 0 x 0 when the env cannot draw. */
void nevo_env_render_size(const NevoEnv *env, int *w, int *h);
/* Draws the instance's current state as w*h*3 RGB bytes; false if the env cannot. */
bool nevo_env_render(const NevoEnv *env, const void *inst, uint8_t *rgb);

/* Registry. */
int nevo_env_count(void);
const NevoEnvClass *nevo_env_class_at(int i);
const NevoEnvClass *nevo_env_find(const char *name);
/* The scene of the env registered under name (its class's scene); NULL when the name is
 * unknown or the env has none. Needs no env to be made (no model file is loaded). */
const NevoEnvScene *nevo_env_scene(const char *name);

#endif
