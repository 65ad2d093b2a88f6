/* mujoco/hopper: Gymnasium's Hopper-v5 on nevo's models/mujoco/hopper.xml.
 *
 * Hop forward on one leg. Observation (11): qpos[1:] (height, torso pitch, three
 * joint angles) then qvel (6) clipped to +-10. Reward per step (dt = 4 x 2 ms):
 * x velocity of the root slide + 1 while healthy - 0.001 |a|^2. Healthy: z > 0.7,
 * |pitch| < 0.2 and every one of qpos[2:], qvel strictly inside +-100; unhealthy
 * terminates (unless terminate_when_unhealthy is off, when it only loses the +1).
 * Reset: qpos0 (x 0, z 1.25) and zero velocity, each plus U(+-0.005). */
#include "envs/mujoco_common.h"

static bool healthy(const MjParams *p, const mjData *d) {
    double z = d->qpos[1], angle = d->qpos[2];
    /* Gymnasium's state_vector()[2:]: qpos[2:] then qvel; NaN fails every test */
    for (int i = 2; i < 6; i++)
        if (!(d->qpos[i] > -100 && d->qpos[i] < 100)) return false;
    for (int i = 0; i < 6; i++)
        if (!(d->qvel[i] > -100 && d->qvel[i] < 100)) return false;
    return z > 0.7 && angle > -0.2 && angle < 0.2;
}

static void observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos + 1, 5);
    nevo_mj_put_clipped(obs, d->qvel, 6, 10);
}

static double reward(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated) {
    bool ok = healthy(p, d);
    *terminated = !ok && p->terminate_when_unhealthy;
    return dx / p->dt + (ok ? 1.0 : 0.0) - 1e-3 * nevo_mj_action_sq(action, 3);
}

static const MjRobot robot = {
    .model_file = "hopper.xml",
    .nq = 6, .nv = 6, .nu = 3, .nbody = 5,
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

const NevoEnvClass nevo_env_mujoco_hopper = {
    .spec =
        {
            .name = "mujoco/hopper",
            .summary = "one-legged planar hopper, hop forward without falling (Gymnasium Hopper-v5)",
            .obs_rank = 1,
            .obs_shape = {11},
            .obs_dim = 11,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 3,
            .action_low = {-1, -1, -1},
            .action_high = {1, 1, 1},
            .max_steps = 1000,
            .has_reward_threshold = true,
            .reward_threshold = 3800.0,
            .state_dim = 6 + 2 * 6 + 2,
            .bc_dim = 1, /* final x of the centre of mass (a planar robot) */
        },
    .option_names = nevo_mj_health_options,
    .configure = configure,
    NEVO_MJ_CLASS_HOOKS,
};
