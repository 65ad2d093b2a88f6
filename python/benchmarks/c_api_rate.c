/* The C API's rate for python/benchmarks/bench_python.py: n instances of an env stepped
 * one call at a time through nevo_env_step (env.h) with the same action table and the
 * same autoreset rule (next step, nevo_vec_env_episode_seed) as make_vec, in a plain C
 * loop. Built by the benchmark against the library it measures. */
#include <nevo/nevo.h>
#include <stdlib.h>

/* Steps `steps` times; actions (steps, n, action_dim). Returns the sum of rewards
 * (so the work cannot be skipped), or NaN when the env cannot be made. */
double c_api_run(const char *name, int n, int steps, const float *actions, unsigned long long seed) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    if (nevo_env_new(name, NULL, 0, &env, &err) != NEVO_OK) return 0.0 / 0.0;
    const NevoEnvSpec *s = nevo_env_spec(env);
    size_t isize = nevo_env_instance_size(env), ad = (size_t)s->action_dim, od = (size_t)s->obs_dim;
    unsigned char *insts = calloc((size_t)n, isize);
    float *obs = calloc((size_t)n * od, sizeof(float));
    int *episode = calloc((size_t)n, sizeof(int));
    unsigned char *ended = calloc((size_t)n, 1);
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        nevo_env_reset(env, insts + (size_t)i * isize, nevo_vec_env_episode_seed(seed, i, 0), obs + (size_t)i * od);
        episode[i] = 1;
    }
    for (int t = 0; t < steps; t++) {
        const float *a = actions + (size_t)t * (size_t)n * ad;
        for (int i = 0; i < n; i++) {
            void *inst = insts + (size_t)i * isize;
            if (ended[i]) {
                nevo_env_reset(env, inst, nevo_vec_env_episode_seed(seed, i, episode[i]++), obs + (size_t)i * od);
                ended[i] = 0;
                continue;
            }
            NevoStepResult r;
            nevo_env_step(env, inst, a + (size_t)i * ad, obs + (size_t)i * od, &r);
            total += r.reward;
            ended[i] = r.terminated || r.truncated;
        }
    }
    for (int i = 0; i < n; i++) nevo_env_instance_free(env, insts + (size_t)i * isize);
    nevo_env_free(env);
    free(insts);
    free(obs);
    free(episode);
    free(ended);
    return total;
}

/* What `nevo eval FILE --episodes E --seed S --threads T` computes, through the same
 * libnevo.so as the package: load, pool, nevo_eval_params. Returns the mean return
 * (NaN on failure). */
double c_api_eval(const char *path, int episodes, unsigned long long seed, int threads) {
    NevoLoadedPolicy lp;
    NevoError err = {0};
    if (nevo_policy_file_load(path, &lp, &err) != NEVO_OK) return 0.0 / 0.0;
    if (!nevo_env_spec(lp.env)->max_steps) nevo_env_set_max_steps(lp.env, 100000000);
    NevoPool *pool = nevo_pool_new(threads);
    NevoEvalSummary s;
    double mean = nevo_eval_params(lp.env, lp.policy, lp.theta, pool, episodes, seed, &s, &err) == NEVO_OK
                      ? s.return_mean
                      : 0.0 / 0.0;
    nevo_pool_free(pool);
    nevo_loaded_policy_free(&lp);
    return mean;
}
