/* `nevo eval`: evaluates a saved policy, a checkpoint's best policy, or a reference
 * policy (uniform random, constant action) and prints a JSON summary as the last line
 * of stdout. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/strutil.h"
#include "cli/gif.h"
#include "nevo/checkpoint.h"
#include "nevo/dataset.h"
#include "nevo/rng.h"
#include "nevo/train.h"

static const char *help =
    "usage: nevo eval FILE [--episodes N] [--seed S] [--threads N] [--max-steps N]\n"
    "       nevo eval FILE [--dataset SPEC] [--threads N]    (a classifier)\n"
    "       nevo eval --env NAME --policy random|constant:A [--env-option KEY=VALUE ...]\n"
    "                 [--episodes N] [--seed S] [--max-steps N]\n"
    "\n"
    "FILE is a policy file (policy.nevo) or a checkpoint (checkpoint.bin, its best policy).\n"
    "Episode e's seed is derived from (S, e), so the same S gives the same episodes for\n"
    "every policy. Reference policies: `random` draws uniformly from the action space;\n"
    "`constant:A` always takes action A (an index, or comma-separated values for\n"
    "continuous actions). Reference policies play their episodes one after another in\n"
    "one environment, as the reference implementations' statistics were made: what an\n"
    "env carries across reset (MinAtar's last action for sticky repeats) carries over.\n"
    "\n"
    "options:\n"
    "  --episodes N   episodes to run (default 100)\n"
    "  --seed S       evaluation seed (default 0)\n"
    "  --threads N    worker threads (default: every CPU this process may run on, which\n"
    "                 taskset narrows); results do not depend on it\n"
    "  --max-steps N  cap episodes at N steps (default: the environment's own limit)\n"
    "  --gif OUT.gif  also render the first evaluation episodes as an animated GIF\n"
    "  --gif-episodes K  episodes in the GIF (default 1)\n"
    "  --gif-delay CS    centiseconds per frame (default 8)\n"
    "\n"
    "Prints {episodes, frames, return_mean, return_std, return_min, return_max,\n"
    "length_mean, length_std, ...} as JSON.\n"
    "\n"
    "A classifier (trained with a `dataset` in its config) is evaluated on the test split\n"
    "of its dataset, or of --dataset SPEC (fashion-mnist, or a directory of IDX files with\n"
    "images of the same size and no more classes); prints {dataset, test_samples,\n"
    "test_loss, test_accuracy} as JSON.\n";

typedef enum RefKind { REF_RANDOM, REF_CONSTANT } RefKind;

static json_t *json_text(const char *s);

/* A classifier on a test split: its dataset's, or spec's when given. */
static NevoStatus eval_classifier(const NevoLoadedPolicy *lp, const char *file, const char *spec, int threads,
                                  NevoError *err) {
    if (!lp->data)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: a policy for env %s, not a classifier: --dataset does not apply",
                          file, lp->cfg.env);
    if (!spec) spec = lp->cfg.dataset;
    NevoDataset *ds;
    NevoStatus st = nevo_dataset_load(spec, 1, 0, &ds, err);
    if (st) return st;
    if (ds->height != lp->data->height || ds->width != lp->data->width || ds->classes > lp->data->classes) {
        st = nevo_error(err, NEVO_ERR_INVALID,
                        "dataset %s has %dx%d images in %d classes; %s classifies %dx%d images in %d classes", spec,
                        ds->height, ds->width, ds->classes, file, lp->data->height, lp->data->width,
                        lp->data->classes);
        nevo_dataset_free(ds);
        return st;
    }
    NevoDataView test = nevo_data_view(ds, &ds->test);
    NevoPool *pool = nevo_pool_new(threads > 0 ? threads : nevo_cpu_count());
    double loss = 0.0, acc = 0.0;
    st = nevo_supervised_eval(lp->policy, lp->theta, &test, NULL, test.n, pool, &loss, &acc, err);
    nevo_pool_free(pool);
    if (st == NEVO_OK) {
        json_t *o = json_object();
        json_object_set_new(o, "dataset", json_text(spec));
        json_object_set_new(o, "policy", json_text(file));
        json_object_set_new(o, "test_samples", json_integer(test.n));
        json_object_set_new(o, "test_loss", json_real(loss));
        json_object_set_new(o, "test_accuracy", json_real(acc));
        char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
        printf("%s\n", text);
        free(text);
        json_decref(o);
    }
    nevo_dataset_free(ds);
    return st;
}

static void record_frame(void *ctx, const NevoEnv *env, const void *inst) {
    NevoGif *gif = ctx;
    int w, h;
    nevo_env_render_size(env, &w, &h);
    uint8_t *rgb = nevo_alloc((size_t)w * h * 3);
    nevo_env_render(env, inst, rgb);
    nevo_gif_add(gif, rgb);
    free(rgb);
}

/* Runs a reference policy episode by episode in one instance (no network involved),
 * without nevo_env_forget between episodes: the reference protocol. */
static NevoStatus eval_reference(const NevoEnv *env, RefKind kind, const float *constant, int episodes,
                                 uint64_t seed, NevoGif *gif, int gif_episodes, NevoEvalSummary *out,
                                 NevoError *err) {
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    float *obs = nevo_alloc(sizeof(float) * (size_t)s->obs_dim);
    float action[NEVO_ENV_MAX_ACT_DIM];
    NevoEpisode *eps = nevo_alloc(sizeof(NevoEpisode) * (size_t)episodes);
    for (int e = 0; e < episodes; e++) {
        uint64_t es = nevo_eval_episode_seed(seed, e);
        int record = gif && e < gif_episodes;
        NevoRng rng;
        nevo_rng_init(&rng, seed, NEVO_RNG_POLICY, 0, (uint32_t)e, 0);
        nevo_env_reset(env, inst, es, obs);
        if (record) record_frame(gif, env, inst);
        NevoStepResult r = {0};
        while (!r.terminated && !r.truncated) {
            if (kind == REF_CONSTANT) {
                memcpy(action, constant, sizeof(float) * (size_t)s->action_dim);
            } else if (s->action_kind == NEVO_SPACE_DISCRETE) {
                action[0] = (float)nevo_rng_below(&rng, (uint32_t)s->n_actions);
            } else {
                for (int j = 0; j < s->action_dim; j++)
                    action[j] = s->action_low[j] +
                                (float)nevo_rng_uniform(&rng) * (s->action_high[j] - s->action_low[j]);
            }
            nevo_env_step(env, inst, action, obs, &r);
            if (record) record_frame(gif, env, inst);
            eps[e].ret += r.reward;
            eps[e].length++;
            if (!isfinite(r.reward)) {
                int step = eps[e].length;
                nevo_env_instance_free(env, inst);
                free(inst), free(obs), free(eps);
                return nevo_error(err, NEVO_ERR_NUMERIC, "%s returned a non-finite reward at step %d of episode %d",
                                  s->name, step, e);
            }
            if (s->max_steps == 0 && eps[e].length >= 100000000) {
                nevo_env_instance_free(env, inst);
                free(inst), free(obs), free(eps);
                return nevo_error(err, NEVO_ERR_INVALID,
                                  "%s: an episode ran 1e8 steps without ending; pass --max-steps", s->name);
            }
        }
    }
    nevo_eval_summarise(eps, episodes, out);
    nevo_env_instance_free(env, inst);
    free(inst);
    free(obs);
    free(eps);
    return NEVO_OK;
}

static NevoStatus parse_constant(const NevoEnvSpec *s, const char *text, float *action, NevoError *err) {
    char buf[512];
    nevo_strlcpy(buf, text, sizeof buf);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        double v = strtod(tok, &end);
        if (*end != '\0' || end == tok || n >= NEVO_ENV_MAX_ACT_DIM)
            return nevo_error(err, NEVO_ERR_INVALID, "--policy constant:%s: '%s' is not a number", text, tok);
        /* nan, inf, 1e999: no action is that */
        if (!isfinite(v) || !isfinite((float)v))
            return nevo_error(err, NEVO_ERR_INVALID, "--policy constant:%s: '%s' is not a finite number", text, tok);
        action[n++] = (float)v;
    }
    if (s->action_kind == NEVO_SPACE_DISCRETE) {
        if (n != 1 || action[0] != (float)(int)action[0] || action[0] < 0 || action[0] >= s->n_actions)
            return nevo_error(err, NEVO_ERR_INVALID,
                              "--policy constant:%s: %s has discrete actions 0..%d; give one index", text,
                              s->name, s->n_actions - 1);
    } else if (n != s->action_dim) {
        return nevo_error(err, NEVO_ERR_INVALID,
                          "--policy constant:%s: %s actions have %d values; give %d comma-separated numbers",
                          text, s->name, s->action_dim, s->action_dim);
    }
    return NEVO_OK;
}

/* A GIF recorder for env when a path was given; fails if the env cannot draw. */
static NevoStatus open_gif(const NevoEnv *env, const char *path, int delay, NevoGif **gif, NevoError *err) {
    *gif = NULL;
    if (!path) return NEVO_OK;
    int w, h;
    nevo_env_render_size(env, &w, &h);
    if (w == 0)
        return nevo_error(err, NEVO_ERR_UNSUPPORTED, "--gif: %s cannot draw itself (no renderer)",
                          nevo_env_spec(env)->name);
    *gif = nevo_gif_new(w, h, 0, delay);
    return NEVO_OK;
}

/* A JSON string of s, escaped (nevo_escape) where it is not UTF-8. */
static json_t *json_text(const char *s) {
    json_t *j = json_string(s);
    char esc[1024];
    return j ? j : json_string(nevo_escape(esc, sizeof esc, s));
}

/* Prints the summary as JSON; every statistic must be finite (JSON has no NaN, and a
 * key left out would read as a success without a result). */
static NevoStatus print_summary(const NevoEvalSummary *s, const char *env, const char *policy, NevoError *err) {
    const double stats[] = {s->return_mean, s->return_std, s->return_min, s->return_max, s->length_mean, s->length_std};
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++)
        if (!isfinite(stats[i]))
            return nevo_error(err, NEVO_ERR_NUMERIC,
                              "the evaluation's returns are not finite (mean %g, min %g, max %g): the environment or "
                              "the policy produced NaN or infinity",
                              s->return_mean, s->return_min, s->return_max);
    json_t *o = json_object();
    json_object_set_new(o, "episodes", json_integer(s->episodes));
    json_object_set_new(o, "frames", json_integer(s->frames));
    json_object_set_new(o, "return_mean", json_real(s->return_mean));
    json_object_set_new(o, "return_std", json_real(s->return_std));
    json_object_set_new(o, "return_min", json_real(s->return_min));
    json_object_set_new(o, "return_max", json_real(s->return_max));
    json_object_set_new(o, "length_mean", json_real(s->length_mean));
    json_object_set_new(o, "length_std", json_real(s->length_std));
    json_object_set_new(o, "env", json_text(env));
    json_object_set_new(o, "policy", json_text(policy));
    char *text = json_dumps(o, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    printf("%s\n", text);
    free(text);
    json_decref(o);
    return NEVO_OK;
}

int nevo_cmd_eval(int argc, char **argv) {
    const char *file = NULL, *env_name = NULL, *policy_kind = NULL, *gif_path = NULL, *dataset = NULL;
    long long episodes = 100, seed = 0, threads = 0, max_steps = 0, gif_episodes = 1, gif_delay = 8;
    NevoEnvOption opts[NEVO_ENV_MAX_OPTIONS];
    int n_opts = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return 0;
        } else if (cli_option(argc, argv, &i, "--episodes", &v)) {
            if (cli_parse_int(v, 1, 100000000, &episodes))
                return cli_usage_error("eval", "--episodes needs a whole number from 1 to 1e8");
        } else if (cli_option(argc, argv, &i, "--seed", &v)) {
            if (cli_parse_int(v, 0, (long long)1 << 62, &seed))
                return cli_usage_error("eval", "--seed needs a non-negative whole number");
        } else if (cli_option(argc, argv, &i, "--threads", &v)) {
            if (cli_parse_int(v, 1, 4096, &threads))
                return cli_usage_error("eval", "--threads needs a whole number from 1 to 4096");
        } else if (cli_option(argc, argv, &i, "--max-steps", &v)) {
            if (cli_parse_int(v, 1, 1000000000, &max_steps))
                return cli_usage_error("eval", "--max-steps needs a positive whole number");
        } else if (cli_option(argc, argv, &i, "--gif", &v)) {
            if (!v) return cli_usage_error("eval", "--gif needs an output file");
            gif_path = v;
        } else if (cli_option(argc, argv, &i, "--gif-episodes", &v)) {
            if (cli_parse_int(v, 1, 1000, &gif_episodes))
                return cli_usage_error("eval", "--gif-episodes needs a whole number from 1 to 1000");
        } else if (cli_option(argc, argv, &i, "--gif-delay", &v)) {
            if (cli_parse_int(v, 1, 1000, &gif_delay))
                return cli_usage_error("eval", "--gif-delay needs centiseconds from 1 to 1000");
        } else if (cli_option(argc, argv, &i, "--dataset", &v)) {
            if (!v) return cli_usage_error("eval", "--dataset needs fashion-mnist or a directory of IDX files");
            dataset = v;
        } else if (cli_option(argc, argv, &i, "--env", &v)) {
            if (!v) return cli_usage_error("eval", "--env needs an environment name");
            env_name = v;
        } else if (cli_option(argc, argv, &i, "--policy", &v)) {
            if (!v) return cli_usage_error("eval", "--policy needs random or constant:A");
            policy_kind = v;
        } else if (cli_option(argc, argv, &i, "--env-option", &v)) {
            const char *eq = v ? strchr(v, '=') : NULL;
            char *end;
            if (!eq || n_opts == NEVO_ENV_MAX_OPTIONS || eq - v >= (long)sizeof opts[0].key)
                return cli_usage_error("eval", "--env-option needs KEY=VALUE");
            memset(opts[n_opts].key, 0, sizeof opts[n_opts].key);
            memcpy(opts[n_opts].key, v, (size_t)(eq - v));
            opts[n_opts].value = strtod(eq + 1, &end);
            if (*end || end == eq + 1 || !isfinite(opts[n_opts].value))
                return cli_usage_error("eval", "--env-option %s: the value must be a finite number", cli_esc(v));
            n_opts++;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("eval", "unknown option '%s'", cli_esc(argv[i]));
        } else if (!file) {
            file = argv[i];
        } else {
            return cli_usage_error("eval", "unexpected argument '%s'", cli_esc(argv[i]));
        }
    }
    NevoError err = {0};
    NevoEvalSummary s;
    if (dataset && !file) return cli_usage_error("eval", "--dataset evaluates a classifier FILE");
    if (file) {
        if (env_name || policy_kind)
            return cli_usage_error("eval", "give either FILE or --env/--policy, not both");
        NevoLoadedPolicy lp;
        if (nevo_load_any_policy(file, &lp, &err)) return cli_fail(&err);
        if (lp.data || dataset) {
            NevoStatus st = eval_classifier(&lp, file, dataset, (int)threads, &err);
            nevo_loaded_policy_free(&lp);
            return st ? cli_fail(&err) : 0;
        }
        nevo_env_set_max_steps(lp.env, (int)max_steps);
        NevoGif *gif = NULL;
        NevoStatus st = open_gif(lp.env, gif_path, (int)gif_delay, &gif, &err);
        if (st == NEVO_OK && !nevo_env_spec(lp.env)->max_steps && !max_steps)
            nevo_env_set_max_steps(lp.env, 100000000);
        if (st == NEVO_OK) {
            NevoPool *pool = nevo_pool_new(threads > 0 ? (int)threads : nevo_cpu_count());
            st = nevo_eval_params(lp.env, lp.policy, lp.theta, pool, (int)episodes, (uint64_t)seed, &s, &err);
            nevo_pool_free(pool);
        }
        for (int e = 0; st == NEVO_OK && gif && e < gif_episodes && e < episodes; e++) {
            NevoEpisode ep;
            st = nevo_rollout_episode(lp.env, lp.policy, lp.theta, nevo_eval_episode_seed((uint64_t)seed, e),
                                      record_frame, gif, &ep, &err);
        }
        if (st == NEVO_OK && gif) st = nevo_gif_write(gif, gif_path, &err);
        if (st == NEVO_OK) st = print_summary(&s, lp.cfg.env, file, &err);
        nevo_gif_free(gif);
        nevo_loaded_policy_free(&lp);
        return st ? cli_fail(&err) : 0;
    }
    if (!env_name || !policy_kind)
        return cli_usage_error("eval", "give a policy FILE, or --env NAME with --policy random|constant:A");
    NevoEnv *env;
    if (nevo_env_new(env_name, opts, n_opts, &env, &err)) return cli_fail(&err);
    nevo_env_set_max_steps(env, (int)max_steps);
    float constant[NEVO_ENV_MAX_ACT_DIM] = {0};
    RefKind kind;
    NevoStatus st = NEVO_OK;
    if (strcmp(policy_kind, "random") == 0) {
        kind = REF_RANDOM;
    } else if (strncmp(policy_kind, "constant:", 9) == 0) {
        kind = REF_CONSTANT;
        st = parse_constant(nevo_env_spec(env), policy_kind + 9, constant, &err);
    } else {
        nevo_env_free(env);
        return cli_usage_error("eval", "--policy must be random or constant:A, got '%s'", cli_esc(policy_kind));
    }
    NevoGif *gif = NULL;
    if (st == NEVO_OK) st = open_gif(env, gif_path, (int)gif_delay, &gif, &err);
    if (st == NEVO_OK)
        st = eval_reference(env, kind, constant, (int)episodes, (uint64_t)seed, gif, (int)gif_episodes, &s, &err);
    if (st == NEVO_OK && gif) st = nevo_gif_write(gif, gif_path, &err);
    if (st == NEVO_OK) st = print_summary(&s, env_name, policy_kind, &err);
    nevo_gif_free(gif);
    nevo_env_free(env);
    return st ? cli_fail(&err) : 0;
}
