/* Flat handles over the library for bindings (the Python package in python/): plain
 * pointers, numbers and caller-owned arrays in every call, so a foreign-function layer
 * (ctypes, cffi) needs no struct of the library but NevoError, NevoEnvOption and
 * NevoEnvSpec.
 *
 *   NevoVecEnv     N instances of one env stepped in one call into caller-owned batch
 *                  arrays (EnvPool's and Gymnasium's vector shape), optionally over a
 *                  thread pool, with Gymnasium's autoreset modes;
 *   NevoPopEval    an env, a network and the batched evaluator: episodes of rows of a
 *                  caller's (P, nparams) parameter matrix, and one network's actions;
 *   NevoStrategy   an algorithm of a config as ask/tell: what it asks for (networks
 *                  and episode seeds), its evaluation, and the results it is told;
 *   nevo_train_json  nevo_train_run of a config given as JSON text.
 *
 * Every function that can fail on input returns a NevoStatus and fills err; nothing
 * here exits or aborts on bad input. */
#ifndef NEVO_VEC_H
#define NEVO_VEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/status.h"

/* --- vectorised environments ------------------------------------------------------ */

/* What happens to an instance whose episode ended (Gymnasium's AutoresetMode):
 *   NEXT_STEP  the next step call resets it (its action ignored) and returns the
 *              first observation of the new episode with reward 0 and both flags
 *              false (Gymnasium's default, EnvPool's);
 *   SAME_STEP  the step that ends an episode resets at once: obs holds the new
 *              episode's first observation, final_obs the ended episode's last one;
 *   DISABLED   nothing: an ended instance stays ended (its steps return its last
 *              observation again, reward 0, the same flags) until nevo_vec_env_reset. */
typedef enum NevoAutoreset {
    NEVO_AUTORESET_NEXT_STEP = 0,
    NEVO_AUTORESET_SAME_STEP = 1,
    NEVO_AUTORESET_DISABLED = 2,
} NevoAutoreset;

typedef struct NevoVecEnv NevoVecEnv;

/* num_envs instances of the env `name` with options; max_episode_steps caps episodes
 * (0: the env's own limit); threads: 1 steps in the calling thread, more spread the
 * instances over a pool of that many (results never depend on it). */
NevoStatus nevo_vec_env_new(const char *name, const NevoEnvOption *opts, int n_opts, int num_envs,
                            int max_episode_steps, int autoreset, int threads, NevoVecEnv **out,
                            NevoError *err);
void nevo_vec_env_free(NevoVecEnv *v);
const NevoEnvSpec *nevo_vec_env_spec(const NevoVecEnv *v);
int nevo_vec_env_num(const NevoVecEnv *v);

/* The seed of instance i's episode k (0, 1, ...) after a reset of it with seed: a
 * stream name (seed, ENV_SEED, k, i), so the episodes of a vector are those of one env
 * reset with these seeds in turn (nevo_env_reset). */
uint64_t nevo_vec_env_episode_seed(uint64_t seed, int env_index, int episode);

/* Starts every instance's episode 0 from seed (forgetting what it carried: a fresh
 * env); obs (num_envs, obs_dim). */
void nevo_vec_env_reset(NevoVecEnv *v, uint64_t seed, float *obs);
/* The same for the instances where mask[i] is true (NULL: every one; Gymnasium's
 * reset_mask): each becomes a fresh env whose episode k starts from
 * nevo_vec_env_episode_seed(seed, i, k), as after a whole reset with seed, and a
 * pending next-step autoreset of it is dropped. Only their rows of obs are written;
 * the other instances go on as they were. Steps need every instance reset once. */
void nevo_vec_env_reset_masked(NevoVecEnv *v, uint64_t seed, const bool *mask, float *obs);
/* One step of every instance: actions (num_envs, action_dim) floats (a discrete
 * action its index); obs (num_envs, obs_dim), rewards, terminated, truncated
 * (num_envs); final_obs (num_envs, obs_dim) and has_final (num_envs): SAME_STEP only
 * (may be NULL otherwise), the last observation of the episodes this step ended (zeros
 * in the other rows). Every value of every output is written (the arrays may differ
 * from step to step, e.g. new ones each time).
 * An instance's next episode starts with its episode seed, without forgetting (one
 * env played on, as the reference protocols do). NEVO_ERR_INVALID before anything
 * steps, where an action is not a valid index or a value is not finite, or while an
 * instance has never been reset. */
NevoStatus nevo_vec_env_step(NevoVecEnv *v, const float *actions, float *obs, float *rewards, bool *terminated,
                             bool *truncated, float *final_obs, bool *has_final, NevoError *err);
/* Episodes instance env_index has started since its last reset (0: never reset). */
int nevo_vec_env_episode(const NevoVecEnv *v, int env_index);

/* --- population evaluation -------------------------------------------------------- */

typedef struct NevoPopEval NevoPopEval;

/* From a config's JSON text (nevo train's keys: env, env_options, policy, es.obs_norm,
 * max_episode_steps, backend; others are checked and ignored); threads 0: the config's,
 * else every CPU. Its network starts with mean-0 / std-1 normalisation where it has one.
 * The config's backend computes the networks (NEVO_ERR_UNSUPPORTED where it cannot
 * run here, NEVO_ERR_NOTFOUND where this build has none of that name). */
NevoStatus nevo_pop_eval_new(const char *config_json, int threads, NevoPopEval **out, NevoError *err);
/* From a policy file (policy.nevo): its env (without a training cap), network,
 * parameters (nevo_pop_eval_theta) and observation normalisation; on the CPU backend
 * whatever backend it was trained on. */
NevoStatus nevo_pop_eval_load(const char *path, int threads, NevoPopEval **out, NevoError *err);
/* The backend ("cpu", "cuda") nevo_pop_eval_run computes the networks on from now on;
 * results do not depend on it, and the config (nevo_pop_eval_config, what
 * nevo_pop_eval_save writes) keeps its own. On failure (as nevo_pop_eval_new's) the
 * backend in use stays. */
NevoStatus nevo_pop_eval_set_backend(NevoPopEval *pe, const char *name, NevoError *err);
/* The backend in use. */
const char *nevo_pop_eval_backend(const NevoPopEval *pe);
void nevo_pop_eval_free(NevoPopEval *pe);
const NevoEnvSpec *nevo_pop_eval_spec(const NevoPopEval *pe);
size_t nevo_pop_eval_nparams(const NevoPopEval *pe);
/* The resolved config as JSON (owned by pe). */
const char *nevo_pop_eval_config(const NevoPopEval *pe);
/* The loaded policy's parameters (nparams floats), NULL for one made from a config. */
const float *nevo_pop_eval_theta(const NevoPopEval *pe);
/* Whether the network normalises observations; its mean and std (obs_dim floats each,
 * writable: set them before evaluating, e.g. from a strategy). */
int nevo_pop_eval_obs_norm(const NevoPopEval *pe);
float *nevo_pop_eval_obs_mean(NevoPopEval *pe);
float *nevo_pop_eval_obs_std(NevoPopEval *pe);
/* Overrides the episode cap (0: the config's, else the env's own limit). */
void nevo_pop_eval_set_max_steps(NevoPopEval *pe, int max_steps);

/* Runs n episodes: episode t plays network row net[t] (0 <= net[t] < n_rows) of
 * params (n_rows rows, stride floats apart, stride >= nparams) from env seed seeds[t],
 * over the evaluator and its threads. ret, len, terminated (n); bc (n, bc_dim) or NULL.
 * net or seeds NULL: n / n_rows episodes a row, row-major, episode e of each row from
 * nevo_eval_episode_seed(seed, e) with the seed of nevo_pop_eval_set_seed (nevo eval's
 * episodes). Each result is a function of its row and seed alone. */
NevoStatus nevo_pop_eval_run(NevoPopEval *pe, const float *params, size_t stride, int n_rows, const int *net,
                             const uint64_t *seeds, int n, double *ret, int *len, bool *terminated, float *bc,
                             NevoError *err);
void nevo_pop_eval_set_seed(NevoPopEval *pe, uint64_t seed);
/* Actions (n, action_dim) of network theta for observations obs (n, obs_dim), as the
 * evaluator chooses them; state: (n, nevo_pop_eval_state_floats) for a recurrent
 * network (read and updated; zeroed as an episode starts; NULL: a zero state, not
 * kept), else NULL. */
size_t nevo_pop_eval_state_floats(const NevoPopEval *pe);
void nevo_pop_eval_act(NevoPopEval *pe, const float *theta, const float *obs, int n, float *state, float *actions);
/* Saves theta as a policy file that `nevo eval` reads. */
NevoStatus nevo_pop_eval_save(const NevoPopEval *pe, const char *path, const float *theta, NevoError *err);

/* --- ask/tell --------------------------------------------------------------------- */

typedef struct NevoStrategy NevoStrategy;

/* Everything a run of the config needs (as nevo_train_run builds it: training env with
 * the episode cap, or the dataset; network, pool, noise table, evaluator, algorithm),
 * nothing written. threads 0: the config's, else every CPU. Algorithms that are asked
 * and told only (not algo sgd, which trains by itself). */
NevoStatus nevo_strategy_new(const char *config_json, int threads, NevoStrategy **out, NevoError *err);
void nevo_strategy_free(NevoStrategy *s);
const char *nevo_strategy_config(const NevoStrategy *s);
/* What the networks see: the env's spec, or on a dataset its images' (one image an
 * observation, a discrete action a class, no behaviour). */
const NevoEnvSpec *nevo_strategy_spec(const NevoStrategy *s);
size_t nevo_strategy_nparams(const NevoStrategy *s);
int nevo_strategy_generations_done(const NevoStrategy *s);

/* Asks for the current evaluation: its numbers of networks and episodes. */
void nevo_strategy_ask(NevoStrategy *s, int *n_nets, int *n_tasks);
/* The asked set's networks built into params (n_nets rows, stride floats apart). */
void nevo_strategy_ask_params(NevoStrategy *s, float *params, size_t stride);
/* Its episodes: network, env seed and flags (NEVO_TASK_RECORD_*) of each. */
void nevo_strategy_ask_tasks(NevoStrategy *s, int *net, uint64_t *seeds, uint32_t *flags);
/* The observation normalisation the asked networks run with (obs_dim floats each);
 * false where the network has none. */
bool nevo_strategy_obs_norm(const NevoStrategy *s, float *mean, float *std);
/* Evaluates the asked set on the strategy's own evaluator, as nevo train does,
 * keeping what its tasks record for the tell; ret, len, terminated (n_tasks), bc
 * (n_tasks, bc_dim) or NULL. On a dataset a task is its network scored on the batch
 * its seed draws (nevo_supervised_tasks: ret = -mean cross-entropy over
 * data.fitness_batch samples, len = the samples, terminated). */
NevoStatus nevo_strategy_evaluate(NevoStrategy *s, double *ret, int *len, bool *terminated, float *bc,
                                  NevoError *err);
/* Tells the results of the asked set: per episode return, length (NULL: 0; on a
 * dataset the batch's samples), terminated (NULL: false; on a dataset true) and
 * behaviour (NULL: zeros). Episodes evaluated elsewhere record no observations
 * (NEVO_TASK_RECORD_OBS gets empty statistics); a set whose tasks keep states (safe
 * mutations) must be evaluated by nevo_strategy_evaluate. When the generation is
 * complete sets *done and writes NEVO_STRATEGY_STATS doubles: generation, frames,
 * episodes, best, mean, median, elite_mean, archive_size, novelty_mean, reward_weight,
 * train_loss, test_loss, test_accuracy (on a dataset, of the best policy as nevo
 * train's metrics; else NaN), bc_dim, bc[NEVO_ENV_MAX_BC]; an error in those scores
 * comes after the generation was told. */
#define NEVO_STRATEGY_STATS (14 + NEVO_ENV_MAX_BC)
NevoStatus nevo_strategy_tell(NevoStrategy *s, const double *ret, const int *len, const bool *terminated,
                              const float *bc, double *stats, int *done, NevoError *err);
/* The current best parameters (nparams floats). */
void nevo_strategy_best(const NevoStrategy *s, float *theta);
/* Saves the current best as a policy file (with the run's normalisation). */
NevoStatus nevo_strategy_save(const NevoStrategy *s, const char *path, NevoError *err);

/* --- runs ------------------------------------------------------------------------- */

/* nevo_train_run of the config in config_json (defaults, then the JSON object) into
 * out_dir; threads 0: the config's. What it writes is nevo_train_run's (summary.json). */
NevoStatus nevo_train_json(const char *config_json, const char *out_dir, int resume, int threads,
                           NevoError *err);

#endif
