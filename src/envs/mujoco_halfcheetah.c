/* mujoco/halfcheetah: Gymnasium's HalfCheetah-v5 on nevo's models/mujoco/halfcheetah.xml.
 *
 * Run forward. Observation (17): qpos[1:] (8) then qvel (9), unclipped. Reward per
 * step (dt = 5 x 10 ms): x velocity of the root slide - 0.1 |a|^2. Never terminates
 * (only the 1000-step limit ends an episode). Reset: qpos0 + U(+-0.1), qvel 0.1 N(0,1). */
#include "envs/mujoco_common.h"

static void observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos + 1, 8);
    nevo_mj_put(obs, d->qvel, 9);
}

static double reward(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated) {
    *terminated = false;
    return dx / p->dt - 0.1 * nevo_mj_action_sq(action, 6);
}

static const MjRobot robot = {
    .model_file = "halfcheetah.xml",
    .nq = 9, .nv = 9, .nu = 6, .nbody = 8,
    .frame_skip = 5,
    .reset_noise = 0.1,
    .vel_noise = MJ_VEL_NORMAL,
    .forward = MJ_FORWARD_ROOT_X,
    .observe = observe,
    .reward = reward,
};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                            int n_opts, NevoError *err) {
    return nevo_mj_configure(&robot, spec, params, opts, n_opts, err);
}

const NevoEnvClass nevo_env_mujoco_halfcheetah = {
    .spec =
        {
            .name = "mujoco/halfcheetah",
            .summary = "planar two-legged runner, run forward (Gymnasium HalfCheetah-v5)",
            .obs_rank = 1,
            .obs_shape = {17},
            .obs_dim = 17,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 6,
            .action_low = {-1, -1, -1, -1, -1, -1},
            .action_high = {1, 1, 1, 1, 1, 1},
            .max_steps = 1000,
            .has_reward_threshold = true,
            .reward_threshold = 4800.0,
            .state_dim = 9 + 2 * 9 + 2,
            .bc_dim = 1, /* final x of the centre of mass (a planar robot) */
        },
    .option_names = nevo_mj_options,
    .configure = configure,
    NEVO_MJ_CLASS_HOOKS,
};
