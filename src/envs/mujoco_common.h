/* What nevo's MuJoCo environments share (Gymnasium's v5 locomotion tasks and the
 * humanoid deceptive trap), on Debian's libmujoco 2.2.2.
 *
 * Shape: one mjModel per NevoEnv, loaded from models/mujoco/<robot>.xml by configure
 * into the params block and only read afterwards (mj_step takes it const), so every
 * thread's instances share it; one mjData per instance, owned by the instance: created
 * by its first reset (or set_state or step) from zeroed memory, released by
 * nevo_env_instance_free. Instance bytes may be moved (the evaluator swaps slots), never
 * copied: two live copies would step one shared mjData.
 *
 * Each robot file (mujoco_<robot>.c) gives an MjRobot (model file, sizes, frame skip,
 * reset noise, where forward progress is measured, observation and reward functions)
 * and a NevoEnvClass whose hooks are the nevo_mj_* functions below. A step is exactly
 * Gymnasium's MujocoEnv step: ctrl = action (unclipped; MuJoCo clamps to ctrlrange
 * itself, while the control costs see the raw action), frame_skip mj_step calls, then
 * mj_rnePostConstraint so cfrc_ext holds this step's contact forces (MuJoCo >= 2.0
 * computes them only on demand). Reset is mj_resetData, qpos0 + noise, qvel + noise,
 * mj_forward; noise draws come from the episode's NEVO_RNG_ENV stream, all of qpos
 * first, then all of qvel (Gymnasium's order; the numbers differ, Gymnasium uses PCG64).
 *
 * Full state (get_state/set_state, state_dim = nq + 2 nv + 2 doubles):
 *   [time, qpos (nq), qvel (nv), qacc_warmstart (nv), ref_x]
 * qacc_warmstart is the solver's starting point and ref_x the forward coordinate the next
 * step's velocity is measured from; with both, set_state(get_state()) continues a
 * trajectory bit for bit. The observation set_state writes comes from mj_forward plus
 * mj_rnePostConstraint on the given state (with zero control), so where the observation
 * holds derived quantities (Ant, Humanoid) it can differ slightly from the one the
 * original step returned: after a step MuJoCo's derived quantities lag the state by one
 * integration step, as Gymnasium also sees them.
 *
 * Instability: MuJoCo itself replaces a diverged state (NaN or |x| > 1e10 in qpos, qvel
 * or qacc) by the model's rest state and counts a warning; the observation is reported
 * as it then is. nevo installs MuJoCo's warning and error handlers (once, only where
 * none is set) so that nothing is written to MUJOCO_LOG.TXT and the default error
 * handler's wait for Enter never blocks a run: warnings go to stderr (the first few),
 * errors print and abort. */
#ifndef NEVO_MUJOCO_COMMON_H
#define NEVO_MUJOCO_COMMON_H

#include <mujoco/mujoco.h>
#include <stdbool.h>

#include "envs/env_internal.h"

/* The registry's symbols (one per env). */
extern const NevoEnvClass nevo_env_mujoco_hopper;
extern const NevoEnvClass nevo_env_mujoco_halfcheetah;
extern const NevoEnvClass nevo_env_mujoco_walker2d;
extern const NevoEnvClass nevo_env_mujoco_ant;
extern const NevoEnvClass nevo_env_mujoco_humanoid;
extern const NevoEnvClass nevo_env_mujoco_swimmer;
extern const NevoEnvClass nevo_env_mujoco_invertedpendulum;
extern const NevoEnvClass nevo_env_mujoco_humanoid_trap;

/* Where forward progress is measured. */
typedef enum MjForward {
    MJ_FORWARD_ROOT_X, /* qpos[0], the x slide of a planar robot or the swimmer */
    MJ_FORWARD_TORSO,  /* xpos of body 1, the torso (Ant's main_body) */
    MJ_FORWARD_COM,    /* x of the whole-body centre of mass, mass-weighted xipos (Humanoid) */
} MjForward;

/* How the reset perturbs qvel (qpos always gets U(-scale, scale)). */
typedef enum MjVelNoise {
    MJ_VEL_UNIFORM, /* U(-scale, scale) */
    MJ_VEL_NORMAL,  /* scale * N(0, 1) (HalfCheetah, Ant) */
} MjVelNoise;

typedef struct MjParams MjParams;

/* One robot's rules. */
typedef struct MjRobot {
    const char *model_file;  /* file name in the models directory */
    int nq, nv, nu, nbody;   /* sizes the loaded model must have (nbody with the world) */
    int frame_skip;          /* default MuJoCo steps per env step */
    double reset_noise;      /* default reset_noise_scale */
    MjVelNoise vel_noise;
    MjForward forward;
    bool has_health;         /* offers terminate_when_unhealthy */
    /* gym 2017 (MuJoCo 1.x) computed contact forces in every mj_forward: also call
     * mj_rnePostConstraint after the reset's mj_forward */
    bool contact_forces_at_reset;
    /* Observation from the simulation after a reset or step (obs_dim floats). */
    void (*observe)(const MjParams *p, const mjData *d, float *obs);
    /* Reward of a step; dx is the forward coordinate's change over it, action the raw
     * action. Sets *terminated. */
    double (*reward)(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated);
    /* Health as the reward sees it (NULL: always healthy). */
    bool (*healthy)(const MjParams *p, const mjData *d);
    /* Behaviour characterisation (NULL: final centre of mass, x then y, bc_dim values). */
    void (*bc)(const MjParams *p, const mjData *d, float *bc);
} MjRobot;

/* The params block (NevoEnvClass.params_size): constant after configure. */
struct MjParams {
    const MjRobot *robot;
    mjModel *model;          /* owned; freed by nevo_mj_release */
    int frame_skip;
    double dt;               /* seconds per env step: timestep * frame_skip */
    double reset_noise;
    bool terminate_when_unhealthy;
    double total_mass;       /* sum of body masses, for the centre of mass */
    char path[1024];         /* the model file loaded */
};

/* The per-instance state (NevoEnvClass.state_size). */
typedef struct MjState {
    mjData *d;    /* owned by this instance; NULL until its first reset/set_state/step */
    double ref_x; /* forward coordinate at the end of the last reset/step/set_state */
} MjState;

/* Option names: every robot / robots with a health rule. */
extern const char *const nevo_mj_options[];        /* frame_skip, reset_noise_scale */
extern const char *const nevo_mj_health_options[]; /* ... and terminate_when_unhealthy */

/* Loads robot's model into params and applies the options; each robot file's configure
 * hook calls it with its MjRobot. A missing or unloadable model file fails with a
 * message that names the file and how to point nevo at its models directory. */
NevoStatus nevo_mj_configure(const MjRobot *robot, NevoEnvSpec *spec, void *params,
                             const NevoEnvOption *opts, int n_opts, NevoError *err);

/* The class hooks every robot shares. */
void nevo_mj_release(void *params);
void nevo_mj_instance_free(const NevoEnv *env, void *state);
void nevo_mj_reset(const NevoEnv *env, void *state, uint64_t seed, float *obs);
/* The simulation part of a reset (mj_resetData, qpos0 + noise, qvel noise from the
 * episode's stream, mj_forward), without the observation; the benchmarks' bare loop
 * replays resets with it. */
void nevo_mj_reset_sim(const MjParams *p, mjData *d, uint64_t seed);
void nevo_mj_step(const NevoEnv *env, void *state, const float *action, float *obs,
                  NevoStepResult *out);
void nevo_mj_get_state(const NevoEnv *env, const void *state, double *values);
NevoStatus nevo_mj_set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                             NevoError *err);
void nevo_mj_bc(const NevoEnv *env, const void *state, float *bc);

/* Pictures (mujoco_render.c): MuJoCo's renderer in an offscreen OpenGL context from
 * EGL (Mesa's software llvmpipe where there is no GPU), a camera following the torso.
 * Where no context can be made, the picture is black and one message goes to stderr. */
#define NEVO_MJ_RENDER_W 320
#define NEVO_MJ_RENDER_H 240
void nevo_mj_render(const NevoEnv *env, const void *state, uint8_t *rgb);
/* Whether pictures can be drawn in this process (makes the context on first call);
 * writes the GL renderer's name, or why not, into why. */
bool nevo_mj_render_available(char *why, size_t why_size);

/* The hook fields of a robot's NevoEnvClass (the robot adds spec, option_names and its
 * configure wrapper). */
#define NEVO_MJ_CLASS_HOOKS                                                                \
    .state_size = sizeof(MjState), .params_size = sizeof(MjParams),                       \
    .release = nevo_mj_release, .instance_free = nevo_mj_instance_free,                   \
    .reset = nevo_mj_reset, .step = nevo_mj_step,                                         \
    .get_state = nevo_mj_get_state, .set_state = nevo_mj_set_state, .bc = nevo_mj_bc,     \
    .render = nevo_mj_render, .render_w = NEVO_MJ_RENDER_W, .render_h = NEVO_MJ_RENDER_H

/* Observation helpers: write n values as floats and return the position after them. */
float *nevo_mj_put(float *obs, const mjtNum *x, int n);
/* ... each clipped to [-limit, limit] first. */
float *nevo_mj_put_clipped(float *obs, const mjtNum *x, int n, double limit);

/* Sum of squares of the raw action (Gymnasium's control costs). */
double nevo_mj_action_sq(const float *action, int n);
/* x and y of the whole-body centre of mass (mass-weighted body xipos). */
void nevo_mj_com(const MjParams *p, const mjData *d, double xy[2]);

/* The files model file `model` names, which MuJoCo opens itself: each that exists where
 * MuJoCo could look must be a regular file (a FIFO would block it), and includes nest at
 * most 8 deep; NEVO_OK or an error naming the file (env `name` in the message). */
NevoStatus nevo_mj_check_named_files(const char *name, const char *model, NevoError *err);

/* For tests: an env's model, the simulation of one instance (an instance pointer as
 * nevo_env_* take it; NULL before its first reset), and the robot's health right now. */
const mjModel *nevo_mj_model(const NevoEnv *env);

const mjData *nevo_mj_data(const NevoEnv *env, const void *inst);
bool nevo_mj_healthy(const NevoEnv *env, const void *inst);

#endif
