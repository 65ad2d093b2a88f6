/* mujoco/swimmer: Gymnasium's Swimmer-v5 on nevo's models/mujoco/swimmer.xml.
 *
 * Swim forward through a viscous medium. Observation (8): qpos[2:] (heading and two
 * joint angles) then qvel (5). Reward per step (dt = 4 x 10 ms): x velocity of the head
 * link's slide - 1e-4 |a|^2. Never terminates. Reset: qpos0 and zero velocity, each
 * plus U(+-0.1). The behaviour characterisation is the final centre of mass (x, y):
 * the swimmer moves in the plane. */
#include "envs/mujoco_common.h"

static void observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos + 2, 3);
    nevo_mj_put(obs, d->qvel, 5);
}

static double reward(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated) {
    *terminated = false;
    return dx / p->dt - 1e-4 * nevo_mj_action_sq(action, 2);
}

static const MjRobot robot = {
    .model_file = "swimmer.xml",
    .nq = 5, .nv = 5, .nu = 2, .nbody = 4,
    .frame_skip = 4,
    .reset_noise = 0.1,
    .vel_noise = MJ_VEL_UNIFORM,
    .forward = MJ_FORWARD_ROOT_X,
    .observe = observe,
    .reward = reward,
};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                            int n_opts, NevoError *err) {
    return nevo_mj_configure(&robot, spec, params, opts, n_opts, err);
}

const NevoEnvClass nevo_env_mujoco_swimmer = {
    .spec =
        {
            .name = "mujoco/swimmer",
            .summary = "three-link swimmer in a viscous fluid, swim forward (Gymnasium Swimmer-v5)",
            .obs_rank = 1,
            .obs_shape = {8},
            .obs_dim = 8,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 2,
            .action_low = {-1, -1},
            .action_high = {1, 1},
            .max_steps = 1000,
            .has_reward_threshold = true,
            .reward_threshold = 360.0,
            .state_dim = 5 + 2 * 5 + 2,
            .bc_dim = 2, /* final centre of mass (x, y) */
        },
    .option_names = nevo_mj_options,
    .configure = configure,
    NEVO_MJ_CLASS_HOOKS,
};
