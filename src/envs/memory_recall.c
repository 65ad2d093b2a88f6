/* memory/recall: recall a sequence of cues after a delay, in order (a copy task, after
 * the long-time-lag tasks of Hochreiter & Schmidhuber 1997 and the copy task of Graves
 * et al. 2014), for recurrent policies: K cues (env option `cues`, default RECALL_CUES,
 * at most RECALL_MAX_CUES), each one of M symbols (`symbols`, default RECALL_SYMBOLS, 2
 * to RECALL_MAX_SYMBOLS), drawn uniformly from the episode's seed, are shown one a step
 * with their position; D steps (`delay`, default RECALL_DELAY, 0 to RECALL_MAX_DELAY)
 * show nothing, or with `distractors` 1 (default 0) a random symbol each without a
 * position (to be ignored); then K steps ask for the cues back by position, one a step,
 * in the order shown.
 *
 * Observation (M + K + 1), at step t = 0 .. 2K + D - 1 (the one the action at t answers):
 *   t < K                presentation: one-hot symbol cue[t] in [0, M), one-hot position
 *                        t in [M, M + K), 0 in the last
 *   K <= t < K + D       the delay: all 0; with distractors, one-hot symbol
 *                        distractor(t) in [0, M), positions and the last 0
 *   K + D <= t           recall of k = t - K - D: symbols 0, one-hot position k, 1 in the
 *                        last (the question)
 * Actions: M, a symbol. Only the recall steps' actions count: the one at the recall of k
 * earns 1 / K where it is cue[k], 0 otherwise; every other step earns 0. The episode
 * ends (terminated) with the last recall step's action: 2K + D steps (the time limit,
 * one more, never cuts it). Returns lie in [0, 1] in steps of 1 / K; a policy without
 * memory scores 1 / M on average, the best 1.
 * The cues are the first K draws nevo_rng_below(M) of the stream (seed, NEVO_RNG_ENV, 0,
 * 0, 0); the next nevo_rng_u32 is the episode's distractor key (0 without distractors),
 * and distractor(t) = nevo_rng_below(M) of the stream (key, NEVO_RNG_ENV, t, 0, 0): a
 * function of the key and the step, so a set state needs no stream.
 * The behaviour is the fraction of the cues recalled so far; the full state is (t,
 * recalled so far, key, cue[0], ..., cue[K - 1]). */
#include <math.h>
#include <string.h>

#include "envs/env_internal.h"

#define RECALL_CUES 4
#define RECALL_SYMBOLS 2
#define RECALL_DELAY 10
#define RECALL_MAX_CUES 16
#define RECALL_MAX_SYMBOLS 16
#define RECALL_MAX_DELAY 100000

typedef struct RecallParams {
    int cues, symbols, delay, distractors;
} RecallParams;

static const char *const option_names[] = {"cues", "symbols", "delay", "distractors", NULL};

static NevoStatus configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts, int n_opts, NevoError *err) {
    RecallParams *p = params;
    p->cues = RECALL_CUES;
    p->symbols = RECALL_SYMBOLS;
    p->delay = RECALL_DELAY;
    p->distractors = 0;
    for (int i = 0; i < n_opts; i++) {
        double v = opts[i].value;
        int lo = 1, hi = RECALL_MAX_CUES, *dst = &p->cues;
        if (strcmp(opts[i].key, "symbols") == 0) lo = 2, hi = RECALL_MAX_SYMBOLS, dst = &p->symbols;
        if (strcmp(opts[i].key, "delay") == 0) lo = 0, hi = RECALL_MAX_DELAY, dst = &p->delay;
        if (strcmp(opts[i].key, "distractors") == 0) lo = 0, hi = 1, dst = &p->distractors;
        if (!(v >= lo && v <= hi && v == floor(v)))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be a whole number in [%d, %d], got %g", spec->name,
                              opts[i].key, lo, hi, v);
        *dst = (int)v;
    }
    spec->obs_dim = spec->obs_shape[0] = p->symbols + p->cues + 1;
    spec->n_actions = p->symbols;
    spec->max_steps = 2 * p->cues + p->delay + 1; /* never reached: the episode terminates first */
    spec->state_dim = 3 + p->cues;
    return NEVO_OK;
}

static const RecallParams *params_of(const NevoEnv *env) { return nevo_env_params(env); }

typedef struct Recall {
    int t;       /* the step whose observation was shown last: 0 .. 2K + D */
    int correct; /* cues recalled so far */
    uint32_t key; /* the distractors' */
    int cue[RECALL_MAX_CUES];
} Recall;

static void write_obs(const Recall *s, const RecallParams *p, float *obs) {
    int K = p->cues, M = p->symbols, D = p->delay;
    memset(obs, 0, sizeof(float) * (size_t)(M + K + 1));
    if (s->t < K) {
        obs[s->cue[s->t]] = 1.0f;
        obs[M + s->t] = 1.0f;
    } else if (s->t < K + D) {
        if (p->distractors) {
            NevoRng rng;
            nevo_rng_init(&rng, s->key, NEVO_RNG_ENV, (uint32_t)s->t, 0, 0);
            obs[nevo_rng_below(&rng, (uint32_t)M)] = 1.0f;
        }
    } else if (s->t < 2 * K + D) {
        obs[M + s->t - K - D] = 1.0f;
        obs[M + K] = 1.0f;
    }
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    const RecallParams *p = params_of(env);
    Recall *s = state;
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    memset(s, 0, sizeof *s);
    for (int k = 0; k < p->cues; k++) s->cue[k] = (int)nevo_rng_below(&rng, (uint32_t)p->symbols);
    s->key = p->distractors ? nevo_rng_u32(&rng) : 0;
    write_obs(s, p, obs);
}

static void step(const NevoEnv *env, void *state, const float *action, float *obs, NevoStepResult *out) {
    const RecallParams *p = params_of(env);
    Recall *s = state;
    int K = p->cues, D = p->delay, k = s->t - K - D;
    out->reward = 0.0f;
    if (k >= 0 && (int)action[0] == s->cue[k]) {
        out->reward = 1.0f / (float)K;
        s->correct++;
    }
    s->t++;
    out->terminated = s->t == 2 * K + D;
    write_obs(s, p, obs);
}

static void get_state(const NevoEnv *env, const void *state, double *values) {
    const Recall *s = state;
    values[0] = s->t;
    values[1] = s->correct;
    values[2] = s->key;
    for (int k = 0; k < params_of(env)->cues; k++) values[3 + k] = s->cue[k];
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs, NevoError *err) {
    const RecallParams *p = params_of(env);
    int K = p->cues, last = 2 * K + p->delay - 1;
    if (!(values[0] >= 0 && values[0] <= last && values[0] == floor(values[0])))
        return nevo_error(err, NEVO_ERR_INVALID, "memory/recall: state[0] (step) is %g, not a whole number in "
                          "[0, %d]", values[0], last);
    /* the recalls so far: at most the recall steps before t */
    int asked = (int)values[0] - K - p->delay;
    asked = asked < 0 ? 0 : asked;
    if (!(values[1] >= 0 && values[1] <= asked && values[1] == floor(values[1])))
        return nevo_error(err, NEVO_ERR_INVALID, "memory/recall: state[1] (cues recalled) is %g, not a whole number "
                          "in [0, %d]", values[1], asked);
    if (!(values[2] >= 0 && values[2] <= (p->distractors ? 4294967295.0 : 0) && values[2] == floor(values[2])))
        return nevo_error(err, NEVO_ERR_INVALID, "memory/recall: state[2] (distractor key) is %g, not a whole number "
                          "in [0, %.0f]", values[2], p->distractors ? 4294967295.0 : 0.0);
    for (int k = 0; k < K; k++)
        if (!(values[3 + k] >= 0 && values[3 + k] < p->symbols && values[3 + k] == floor(values[3 + k])))
            return nevo_error(err, NEVO_ERR_INVALID, "memory/recall: state[%d] (cue %d) is %g, not a symbol in "
                              "[0, %d)", 3 + k, k, values[3 + k], p->symbols);
    Recall *s = state;
    memset(s, 0, sizeof *s);
    s->t = (int)values[0];
    s->correct = (int)values[1];
    s->key = (uint32_t)values[2];
    for (int k = 0; k < K; k++) s->cue[k] = (int)values[3 + k];
    write_obs(s, p, obs);
    return NEVO_OK;
}

static void bc(const NevoEnv *env, const void *state, float *out) {
    out[0] = (float)((const Recall *)state)->correct / (float)params_of(env)->cues;
}

const NevoEnvClass nevo_env_memory_recall = {
    .spec =
        {
            .name = "memory/recall",
            .summary = "recall a sequence of cues, in order, after a delay (a copy task: Hochreiter & Schmidhuber 1997)",
            .obs_rank = 1,
            .obs_shape = {RECALL_SYMBOLS + RECALL_CUES + 1},
            .obs_dim = RECALL_SYMBOLS + RECALL_CUES + 1,
            .action_kind = NEVO_SPACE_DISCRETE,
            .n_actions = RECALL_SYMBOLS,
            .action_dim = 1,
            .max_steps = 2 * RECALL_CUES + RECALL_DELAY + 1,
            .state_dim = 3 + RECALL_CUES,
            .bc_dim = 1,
        },
    .state_size = sizeof(Recall),
    .params_size = sizeof(RecallParams),
    .option_names = option_names,
    .configure = configure,
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
    .bc = bc,
};
