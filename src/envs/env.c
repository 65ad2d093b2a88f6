/* The env layer (include/nevo/env.h): the environment registry and what every env
 * shares: options, time limit, batch stepping. Each env lives in its own file and
 * exports one NevoEnvClass. */
#include <stdlib.h>
#include <string.h>

#include "envs/env_internal.h"
#include "envs/mujoco_common.h" /* the MuJoCo classes */
#include "core/strutil.h"

/* One line per environment: the list `nevo envs` prints, in this order. */
static const NevoEnvClass *const registry[] = {
    &nevo_env_cartpole,
    &nevo_env_acrobot,
    &nevo_env_mountain_car,
    &nevo_env_mountain_car_continuous,
    &nevo_env_pendulum,
    &nevo_env_minatar_asterix,
    &nevo_env_minatar_breakout,
    &nevo_env_minatar_freeway,
    &nevo_env_minatar_seaquest,
    &nevo_env_minatar_space_invaders,
    &nevo_env_maze_hard,
    &nevo_env_memory_tmaze,
    &nevo_env_memory_recall,
    &nevo_env_mujoco_hopper,
    &nevo_env_mujoco_halfcheetah,
    &nevo_env_mujoco_walker2d,
    &nevo_env_mujoco_ant,
    &nevo_env_mujoco_humanoid,
    &nevo_env_mujoco_swimmer,
    &nevo_env_mujoco_invertedpendulum,
    &nevo_env_mujoco_humanoid_trap,
};

#define N_ENVS ((int)(sizeof registry / sizeof registry[0]))

struct NevoEnv {
    const NevoEnvClass *cls;
    NevoEnvSpec spec;
    void *params;
};

/* Per-instance header in front of the class state. */
typedef struct InstanceHeader {
    int32_t steps;
    uint8_t terminated, truncated;
    uint8_t pad[10];
} InstanceHeader;

_Static_assert(sizeof(InstanceHeader) == 16, "instance header keeps 16-byte alignment");

int nevo_env_count(void) { return N_ENVS; }

const NevoEnvClass *nevo_env_class_at(int i) {
    return i >= 0 && i < N_ENVS ? registry[i] : NULL;
}

const NevoEnvClass *nevo_env_find(const char *name) {
    for (int i = 0; i < N_ENVS; i++)
        if (strcmp(registry[i]->spec.name, name) == 0) return registry[i];
    return NULL;
}

const NevoEnvScene *nevo_env_scene(const char *name) {
    const NevoEnvClass *cls = nevo_env_find(name);
    return cls ? cls->scene : NULL;
}

NevoStatus nevo_env_new(const char *name, const NevoEnvOption *opts, int n_opts, NevoEnv **out,
                        NevoError *err) {
    *out = NULL;
    const NevoEnvClass *cls = nevo_env_find(name);
    if (!cls) {
        const char *names[N_ENVS];
        for (int i = 0; i < N_ENVS; i++) names[i] = registry[i]->spec.name;
        const char *best = nevo_closest(name, names, N_ENVS);
        return nevo_error(err, NEVO_ERR_NOTFOUND,
                          "unknown environment '%s'%s%s%s (`nevo envs` lists them)", name,
                          best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
    }
    return nevo_env_new_from_class(cls, opts, n_opts, out, err);
}

NevoStatus nevo_env_new_from_class(const NevoEnvClass *cls, const NevoEnvOption *opts, int n_opts,
                                   NevoEnv **out, NevoError *err) {
    *out = NULL;
    const char *name = cls->spec.name;
    for (int i = 0; i < n_opts; i++) {
        bool known = false;
        int n_names = 0;
        for (const char *const *o = cls->option_names; o && *o; o++, n_names++)
            if (strcmp(*o, opts[i].key) == 0) known = true;
        if (!known) {
            const char *best = cls->option_names
                                   ? nevo_closest(opts[i].key, (const char **)cls->option_names, n_names)
                                   : NULL;
            if (best)
                return nevo_error(err, NEVO_ERR_INVALID,
                                  "environment %s has no option '%s'; did you mean '%s'?",
                                  name, opts[i].key, best);
            return nevo_error(err, NEVO_ERR_INVALID, "environment %s takes no option '%s'%s",
                              name, opts[i].key, n_names ? "" : " (it has no options)");
        }
    }
    NevoEnv *env = nevo_alloc(sizeof *env);
    env->cls = cls;
    env->spec = cls->spec;
    env->params = nevo_alloc(cls->params_size ? cls->params_size : 1);
    if (cls->configure) {
        NevoStatus st = cls->configure(&env->spec, env->params, opts, n_opts, err);
        if (st != NEVO_OK) {
            nevo_env_free(env);
            return st;
        }
    }
    *out = env;
    return NEVO_OK;
}

void nevo_env_free(NevoEnv *env) {
    if (!env) return;
    if (env->cls->release) env->cls->release(env->params);
    free(env->params);
    free(env);
}

const NevoEnvSpec *nevo_env_spec(const NevoEnv *env) { return &env->spec; }
const NevoEnvClass *nevo_env_class(const NevoEnv *env) { return env->cls; }
const void *nevo_env_params(const NevoEnv *env) { return env->params; }

void nevo_env_set_max_steps(NevoEnv *env, int max_steps) {
    if (max_steps > 0) env->spec.max_steps = max_steps;
}

size_t nevo_env_instance_size(const NevoEnv *env) {
    return sizeof(InstanceHeader) + (env->cls->state_size + 15) / 16 * 16;
}

static InstanceHeader *header(void *inst) { return (InstanceHeader *)inst; }
static void *body(void *inst) { return (char *)inst + sizeof(InstanceHeader); }
static const void *cbody(const void *inst) { return (const char *)inst + sizeof(InstanceHeader); }

void nevo_env_instance_init(const NevoEnv *env, void *inst) {
    memset(inst, 0, nevo_env_instance_size(env));
}

void nevo_env_instance_free(const NevoEnv *env, void *inst) {
    if (env->cls->instance_free) env->cls->instance_free(env, body(inst));
    memset(inst, 0, nevo_env_instance_size(env));
}

void nevo_env_forget(const NevoEnv *env, void *inst) {
    if (env->cls->forget) env->cls->forget(env, body(inst));
}

void nevo_env_reset(const NevoEnv *env, void *inst, uint64_t seed, float *obs) {
    InstanceHeader *h = header(inst);
    h->steps = 0;
    h->terminated = h->truncated = 0;
    env->cls->reset(env, body(inst), seed, obs);
}

void nevo_env_step(const NevoEnv *env, void *inst, const float *action, float *obs,
                   NevoStepResult *out) {
    InstanceHeader *h = header(inst);
    if (h->terminated || h->truncated) {
        out->reward = 0.0f;
        out->terminated = h->terminated;
        out->truncated = h->truncated;
        return;
    }
    env->cls->step(env, body(inst), action, obs, out);
    h->steps++;
    out->truncated = env->spec.max_steps > 0 && h->steps >= env->spec.max_steps;
    h->terminated = out->terminated;
    h->truncated = out->truncated;
}

void nevo_env_step_batch(const NevoEnv *env, int n, void *insts, const float *actions,
                         float *obs, float *rewards, bool *terminated, bool *truncated) {
    size_t isz = nevo_env_instance_size(env);
    int adim = env->spec.action_dim, odim = env->spec.obs_dim;
    for (int i = 0; i < n; i++) {
        NevoStepResult r;
        nevo_env_step(env, (char *)insts + (size_t)i * isz, actions + (size_t)i * adim,
                      obs + (size_t)i * odim, &r);
        rewards[i] = r.reward;
        terminated[i] = r.terminated;
        truncated[i] = r.truncated;
    }
}

int nevo_env_steps(const NevoEnv *env, const void *inst) {
    (void)env;
    return ((const InstanceHeader *)inst)->steps;
}

bool nevo_env_done(const NevoEnv *env, const void *inst) {
    (void)env;
    const InstanceHeader *h = inst;
    return h->terminated || h->truncated;
}

void nevo_env_get_state(const NevoEnv *env, const void *inst, double *values) {
    env->cls->get_state(env, cbody(inst), values);
}

NevoStatus nevo_env_set_state(const NevoEnv *env, void *inst, const double *values, int steps,
                              float *obs, NevoError *err) {
    InstanceHeader *h = header(inst);
    h->steps = steps;
    h->terminated = h->truncated = 0;
    return env->cls->set_state(env, body(inst), values, obs, err);
}

void nevo_env_render_size(const NevoEnv *env, int *w, int *h) {
    *w = env->cls->render ? env->cls->render_w : 0;
    *h = env->cls->render ? env->cls->render_h : 0;
}

bool nevo_env_render(const NevoEnv *env, const void *inst, uint8_t *rgb) {
    if (!env->cls->render) return false;
    env->cls->render(env, cbody(inst), rgb);
    return true;
}

void nevo_env_bc(const NevoEnv *env, const void *inst, const float *last_obs, float *bc) {
    if (env->cls->bc) {
        env->cls->bc(env, cbody(inst), bc);
        return;
    }
    int n = env->spec.bc_dim < env->spec.obs_dim ? env->spec.bc_dim : env->spec.obs_dim;
    for (int i = 0; i < n; i++) bc[i] = last_obs[i];
}
