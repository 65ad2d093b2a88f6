/* mujoco/humanoid (Gymnasium's Humanoid-v5) and mujoco/humanoid_trap (the humanoid
 * deceptive trap of Conti et al. 2018: gym's 2017 Humanoid-v1 rules in a U of walls),
 * on nevo's models/mujoco/humanoid.xml and humanoid_trap.xml. Both step 5 x 3 ms and
 * reset to qpos0 (torso at z 1.4) and zero velocity, each plus U(+-0.01).
 *
 * Humanoid-v5. Observation (348): qpos[2:] (22), qvel (23), then of the 13 moving
 * bodies cinert (13 x 10), cvel (13 x 6), qfrc_actuator without the free joint's 6
 * (17), cfrc_ext (13 x 6). Reward: 1.25 x velocity of the whole-body centre of mass
 * + 5 while healthy - 0.1 |a|^2 - min(5e-7 |cfrc_ext|^2, 10). Healthy: 1 < z < 2;
 * unhealthy terminates (unless terminate_when_unhealthy is off, when it only loses the 5).
 *
 * Humanoid-v1 (spec ENVS.md section 4). Observation (376): the same blocks including
 * the world body's rows and all 23 qfrc_actuator values. Reward: 0.25 dx_com / timestep
 * (v1 divides by the MuJoCo timestep, not dt; 0.25 / 0.003 = 1.25 / 0.015) - 0.1 |a|^2
 * - min(0.5e-6 |cfrc_ext|^2, 10) + 5 on every step, the last included. Done when
 * z < 1 or z > 2. gym then ran MuJoCo 1.x, which computed contact forces in every
 * forward pass; they are computed after the reset here too. Behaviour
 * characterisation: the final (x, y) of the whole-body centre of mass. */
#include <math.h>

#include "envs/mujoco_common.h"

#define NQ 24
#define NV 23
#define NU 17
#define NBODY 14

/* |cfrc_ext|^2 over all bodies (the world's row is zero) */
static double contact_sq(const mjData *d) {
    double s = 0;
    for (int i = 0; i < 6 * NBODY; i++) s += d->cfrc_ext[i] * d->cfrc_ext[i];
    return s;
}

static bool healthy(const MjParams *p, const mjData *d) {
    double z = d->qpos[2];
    return z > 1.0 && z < 2.0;
}

static void observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos + 2, NQ - 2);
    obs = nevo_mj_put(obs, d->qvel, NV);
    obs = nevo_mj_put(obs, d->cinert + 10, 10 * (NBODY - 1));
    obs = nevo_mj_put(obs, d->cvel + 6, 6 * (NBODY - 1));
    obs = nevo_mj_put(obs, d->qfrc_actuator + 6, NV - 6);
    nevo_mj_put(obs, d->cfrc_ext + 6, 6 * (NBODY - 1));
}

static double reward(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated) {
    bool ok = healthy(p, d);
    *terminated = !ok && p->terminate_when_unhealthy;
    double contact = fmin(5e-7 * contact_sq(d), 10.0);
    return 1.25 * dx / p->dt + (ok ? 5.0 : 0.0) - 0.1 * nevo_mj_action_sq(action, NU) - contact;
}

static const MjRobot humanoid = {
    .model_file = "humanoid.xml",
    .nq = NQ, .nv = NV, .nu = NU, .nbody = NBODY,
    .frame_skip = 5,
    .reset_noise = 1e-2,
    .vel_noise = MJ_VEL_UNIFORM,
    .forward = MJ_FORWARD_COM,
    .has_health = true,
    .observe = observe,
    .reward = reward,
    .healthy = healthy,
};

static bool trap_alive(const MjParams *p, const mjData *d) {
    double z = d->qpos[2];
    return !(z < 1.0 || z > 2.0);
}

static void trap_observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos + 2, NQ - 2);
    obs = nevo_mj_put(obs, d->qvel, NV);
    obs = nevo_mj_put(obs, d->cinert, 10 * NBODY);
    obs = nevo_mj_put(obs, d->cvel, 6 * NBODY);
    obs = nevo_mj_put(obs, d->qfrc_actuator, NV);
    nevo_mj_put(obs, d->cfrc_ext, 6 * NBODY);
}

static double trap_reward(const MjParams *p, const mjData *d, const float *action, double dx,
                          bool *terminated) {
    *terminated = !trap_alive(p, d);
    double impact = fmin(0.5e-6 * contact_sq(d), 10.0);
    return 0.25 * dx / p->model->opt.timestep - 0.1 * nevo_mj_action_sq(action, NU) - impact + 5.0;
}

/* The trap seen from above, for pictures of where runs end: its three walls (spec
 * ENVS.md section 4) are world boxes in models/mujoco/humanoid_trap.xml, centre (x, y)
 * and half-sizes (hx, hy) in metres; a box's footprint is the line along its longer
 * side with the shorter side as the width (tests/test_mujoco.c checks them against the
 * loaded model). The robot starts with its torso over the origin. */
#define BOX_WALL(x, y, hx, hy)                                                  \
    {(hx) >= (hy) ? (x) - (hx) : (x), (hx) >= (hy) ? (y) : (y) - (hy),          \
     (hx) >= (hy) ? (x) + (hx) : (x), (hx) >= (hy) ? (y) : (y) + (hy),          \
     2 * ((hx) >= (hy) ? (hy) : (hx))}
static const NevoSceneWall trap_walls[] = {
    BOX_WALL(5.5, 0, 0.1, 1.5),  /* frontwall */
    BOX_WALL(4, 1.5, 1.5, 0.1),  /* topwall */
    BOX_WALL(4, -1.5, 1.5, 0.1), /* bottomwall */
};

static const NevoEnvScene trap_scene = {
    .n_walls = (int)(sizeof trap_walls / sizeof trap_walls[0]),
    .walls = trap_walls,
    .has_start = true,
    .start = {0, 0},
    /* the walls' footprints, and half a metre behind the start */
    .lo = {-0.5, -1.6},
    .hi = {5.6, 1.6},
    .x_label = "final x of the centre of mass (m)",
    .y_label = "final y (m)",
};

static const MjRobot trap = {
    .model_file = "humanoid_trap.xml",
    .nq = NQ, .nv = NV, .nu = NU, .nbody = NBODY,
    .frame_skip = 5,
    .reset_noise = 1e-2,
    .vel_noise = MJ_VEL_UNIFORM,
    .forward = MJ_FORWARD_COM,
    .contact_forces_at_reset = true,
    .observe = trap_observe,
    .reward = trap_reward,
    .healthy = trap_alive,
};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                            int n_opts, NevoError *err) {
    return nevo_mj_configure(&humanoid, spec, params, opts, n_opts, err);
}

static NevoStatus configure_trap(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                                 int n_opts, NevoError *err) {
    return nevo_mj_configure(&trap, spec, params, opts, n_opts, err);
}

#define HUMANOID_ACTION_BOX                                                               \
    .action_kind = NEVO_SPACE_BOX, .action_dim = NU,                                      \
    .action_low = {-0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, \
                   -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f, -0.4f},                      \
    .action_high = {0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f,     \
                    0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f}

const NevoEnvClass nevo_env_mujoco_humanoid = {
    .spec =
        {
            .name = "mujoco/humanoid",
            .summary = "3D humanoid, walk forward without falling (Gymnasium Humanoid-v5)",
            .obs_rank = 1,
            .obs_shape = {348},
            .obs_dim = 348,
            HUMANOID_ACTION_BOX,
            .max_steps = 1000,
            .has_reward_threshold = false, /* Gymnasium registers none */
            .state_dim = NQ + 2 * NV + 2,
            .bc_dim = 2, /* final centre of mass (x, y) */
        },
    .option_names = nevo_mj_health_options,
    .configure = configure,
    NEVO_MJ_CLASS_HOOKS,
};

const NevoEnvClass nevo_env_mujoco_humanoid_trap = {
    .spec =
        {
            .name = "mujoco/humanoid_trap",
            .summary = "humanoid before a U-shaped trap, deceptive forward reward "
                       "(Conti et al. 2018, gym Humanoid-v1 rules)",
            .obs_rank = 1,
            .obs_shape = {376},
            .obs_dim = 376,
            HUMANOID_ACTION_BOX,
            .max_steps = 1000,
            .has_reward_threshold = false,
            .state_dim = NQ + 2 * NV + 2,
            .bc_dim = 2, /* final centre of mass (x, y) */
        },
    .option_names = nevo_mj_options,
    .configure = configure_trap,
    NEVO_MJ_CLASS_HOOKS,
    .scene = &trap_scene,
};
