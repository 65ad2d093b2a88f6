/* mujoco/walker2d: Gymnasium's Walker2d-v5 on nevo's models/mujoco/walker2d.xml.
 *
 * Walk forward on two legs. Observation (17): qpos[1:] (8) then qvel (9) clipped to
 * +-10. Reward per step (dt = 4 x 2 ms): x velocity of the root slide + 1 while healthy
 * - 0.001 |a|^2. Healthy: 0.8 < z < 2 and -1 < pitch < 1; unhealthy terminates (unless
 * terminate_when_unhealthy is off, when it only loses the +1). Reset: qpos0 (x 0,
 * z 1.25) and zero velocity, each plus U(+-0.005). */
#include "envs/mujoco_common.h"

static bool healthy(const MjParams *p, const mjData *d) {
    double z = d->qpos[1], angle = d->qpos[2];
    return z > 0.8 && z < 2.0 && angle > -1.0 && angle < 1.0;
}

static void observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos + 1, 8);
    nevo_mj_put_clipped(obs, d->qvel, 9, 10);
}

static double reward(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated) {
    bool ok = healthy(p, d);
    *terminated = !ok && p->terminate_when_unhealthy;
    return dx / p->dt + (ok ? 1.0 : 0.0) - 1e-3 * nevo_mj_action_sq(action, 6);
}

static const MjRobot robot = {
    .model_file = "walker2d.xml",
    .nq = 9, .nv = 9, .nu = 6, .nbody = 8,
    .frame_skip = 4,
    .reset_noise = 5e-3,
    .vel_noise = MJ_VEL_UNIFORM,
    .forward = MJ_FORWARD_ROOT_X,
    .has_health = true,
    .observe = observe,
    .reward = reward,
    .healthy = healthy,
};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                            int n_opts, NevoError *err) {
    return nevo_mj_configure(&robot, spec, params, opts, n_opts, err);
}

const NevoEnvClass nevo_env_mujoco_walker2d = {
    .spec =
        {
            .name = "mujoco/walker2d",
            .summary = "planar biped, walk forward without falling (Gymnasium Walker2d-v5)",
            .obs_rank = 1,
            .obs_shape = {17},
            .obs_dim = 17,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 6,
            .action_low = {-1, -1, -1, -1, -1, -1},
            .action_high = {1, 1, 1, 1, 1, 1},
            .max_steps = 1000,
            .has_reward_threshold = false, /* Gymnasium registers none */
            .state_dim = 9 + 2 * 9 + 2,
            .bc_dim = 1, /* final x of the centre of mass (a planar robot) */
        },
    .option_names = nevo_mj_health_options,
    .configure = configure,
    NEVO_MJ_CLASS_HOOKS,
};
