/* mujoco/invertedpendulum: Gymnasium's InvertedPendulum-v5 on nevo's
 * models/mujoco/invertedpendulum.xml.
 *
 * Keep a pole upright by pushing its cart. Observation (4): qpos (cart x, pole angle)
 * then qvel. A step is 2 x 20 ms. Terminates when the observation is not finite or
 * |angle| > 0.2; the reward is 1 for a step that does not terminate and 0 for the one
 * that does (v5; earlier versions paid 1 on that step too), so a full episode returns
 * 1000. Reset: qpos0 and zero velocity, each plus U(+-0.01). Behaviour
 * characterisation: the final (cart x, pole angle). */
#include <math.h>

#include "envs/mujoco_common.h"

static void observe(const MjParams *p, const mjData *d, float *obs) {
    obs = nevo_mj_put(obs, d->qpos, 2);
    nevo_mj_put(obs, d->qvel, 2);
}

static bool healthy(const MjParams *p, const mjData *d) {
    for (int i = 0; i < 2; i++)
        if (!isfinite(d->qpos[i]) || !isfinite(d->qvel[i])) return false;
    return fabs(d->qpos[1]) <= 0.2;
}

static double reward(const MjParams *p, const mjData *d, const float *action, double dx,
                     bool *terminated) {
    *terminated = !healthy(p, d);
    return *terminated ? 0.0 : 1.0;
}

static void bc(const MjParams *p, const mjData *d, float *out) {
    out[0] = (float)d->qpos[0];
    out[1] = (float)d->qpos[1];
}

static const MjRobot robot = {
    .model_file = "invertedpendulum.xml",
    .nq = 2, .nv = 2, .nu = 1, .nbody = 3,
    .frame_skip = 2,
    .reset_noise = 0.01,
    .vel_noise = MJ_VEL_UNIFORM,
    .forward = MJ_FORWARD_ROOT_X, /* unused by the reward */
    .observe = observe,
    .reward = reward,
    .healthy = healthy,
    .bc = bc,
};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                            int n_opts, NevoError *err) {
    return nevo_mj_configure(&robot, spec, params, opts, n_opts, err);
}

const NevoEnvClass nevo_env_mujoco_invertedpendulum = {
    .spec =
        {
            .name = "mujoco/invertedpendulum",
            .summary = "balance a pole on a cart (Gymnasium InvertedPendulum-v5)",
            .obs_rank = 1,
            .obs_shape = {4},
            .obs_dim = 4,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 1,
            .action_low = {-3},
            .action_high = {3},
            .max_steps = 1000,
            .has_reward_threshold = true,
            .reward_threshold = 950.0,
            .state_dim = 2 + 2 * 2 + 2,
            .bc_dim = 2,
        },
    .option_names = nevo_mj_options,
    .configure = configure,
    NEVO_MJ_CLASS_HOOKS,
};
