/* mujoco/ant: Gymnasium's Ant-v5 on nevo's models/mujoco/ant.xml.
 *
 * Walk forward (+x) on four legs. Observation (105): qpos[2:] (z, quaternion, 8 joint
 * angles: 13), qvel (14), then the external contact forces cfrc_ext of the 13 moving
 * bodies (13 x 6), each clipped to +-1. Reward per step (dt = 5 x 10 ms): x velocity of
 * the torso body + 1 while healthy - 0.5 |a|^2 - 5e-4 |clip(cfrc_ext, +-1)|^2.
 * Healthy: qpos and qvel all finite and 0.2 <= z <= 1 (closed, unlike the other
 * robots); unhealthy terminates (unless terminate_when_unhealthy is off, when it only
 * loses the +1). Reset: qpos0 (torso at z 0.75) + U(+-0.1), qvel 0.1 N(0,1).
 * Behaviour characterisation: the final centre of mass (x, y). */
#include <math.h>

#include "envs/mujoco_common.h"

#define NQ 15
#define NV 14
#define NBODY 14

static bool healthy(const MjParams *p, const mjData *d) {
    for (int i = 0; i < NQ; i++)
        if (!isfinite(d->qpos[i])) return false;
    for (int i = 0; i < NV; i++)
        if (!isfinite(d->qvel[i])) return false;
    double z = d->qpos[2];
    return z >= 0.2 && z <= 1.0;
}

static void observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos + 2, NQ - 2);
    obs = nevo_mj_put(obs, d->qvel, NV);
    nevo_mj_put_clipped(obs, d->cfrc_ext + 6, 6 * (NBODY - 1), 1.0);
}

static double reward(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated) {
    bool ok = healthy(p, d);
    *terminated = !ok && p->terminate_when_unhealthy;
    double contact = 0;
    for (int i = 0; i < 6 * NBODY; i++) {
        double f = fmin(fmax(d->cfrc_ext[i], -1.0), 1.0);
        contact += f * f;
    }
    return dx / p->dt + (ok ? 1.0 : 0.0) - 0.5 * nevo_mj_action_sq(action, 8) - 5e-4 * contact;
}

static const MjRobot robot = {
    .model_file = "ant.xml",
    .nq = NQ, .nv = NV, .nu = 8, .nbody = NBODY,
    .frame_skip = 5,
    .reset_noise = 0.1,
    .vel_noise = MJ_VEL_NORMAL,
    .forward = MJ_FORWARD_TORSO,
    .has_health = true,
    .observe = observe,
    .reward = reward,
    .healthy = healthy,
};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                            int n_opts, NevoError *err) {
    return nevo_mj_configure(&robot, spec, params, opts, n_opts, err);
}

const NevoEnvClass nevo_env_mujoco_ant = {
    .spec =
        {
            .name = "mujoco/ant",
            .summary = "four-legged ant, walk forward without flipping (Gymnasium Ant-v5)",
            .obs_rank = 1,
            .obs_shape = {105},
            .obs_dim = 105,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 8,
            .action_low = {-1, -1, -1, -1, -1, -1, -1, -1},
            .action_high = {1, 1, 1, 1, 1, 1, 1, 1},
            .max_steps = 1000,
            .has_reward_threshold = true,
            .reward_threshold = 6000.0,
            .state_dim = NQ + 2 * NV + 2,
            .bc_dim = 2, /* final centre of mass (x, y) */
        },
    .option_names = nevo_mj_health_options,
    .configure = configure,
    NEVO_MJ_CLASS_HOOKS,
};
