/* MinAtar shared rules: options, sticky actions, action sets, rendering. */
#include "envs/minatar.h"

#include <string.h>

const char *const minatar_option_names[] = {"sticky_prob", "ramping", "minimal_actions", NULL};

NevoStatus minatar_configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts,
                             int n_opts, NevoError *err, const int *minimal_set, int n_minimal) {
    MinatarParams *p = params;
    p->sticky_prob = 0.1;
    p->ramping = 1;
    p->minimal = 0;
    for (int i = 0; i < n_opts; i++) {
        double v = opts[i].value;
        if (strcmp(opts[i].key, "sticky_prob") == 0) {
            if (!(v >= 0.0 && v <= 1.0))
                return nevo_error(err, NEVO_ERR_INVALID,
                                  "%s: sticky_prob must be in [0, 1], got %g", spec->name, v);
            p->sticky_prob = v;
        } else if (strcmp(opts[i].key, "ramping") == 0 ||
                   strcmp(opts[i].key, "minimal_actions") == 0) {
            if (v != 0.0 && v != 1.0)
                return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be 0 or 1 (or false/true), got %g",
                                  spec->name, opts[i].key, v);
            if (opts[i].key[0] == 'r') p->ramping = (int)v;
            else p->minimal = (int)v;
        }
    }
    p->n_minimal = n_minimal;
    memcpy(p->minimal_set, minimal_set, sizeof(int) * (size_t)n_minimal);
    spec->n_actions = p->minimal ? n_minimal : 6;
    return NEVO_OK;
}

void minatar_reset_common(MinatarCommon *c, uint64_t seed) {
    nevo_rng_init(&c->rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    c->terminal = 0; /* last_action carries over, as in the reference */
}

void minatar_forget(const NevoEnv *env, void *state) {
    ((MinatarCommon *)state)->last_action = 0;
}

int minatar_action(const MinatarParams *p, MinatarCommon *c, const float *action) {
    int a = (int)action[0];
    if (p->minimal) a = p->minimal_set[a];
    if (minatar_rand(c) < p->sticky_prob) a = c->last_action;
    c->last_action = a;
    return a;
}

double minatar_rand(MinatarCommon *c) { return nevo_rng_uniform(&c->rng); }

int minatar_randint(MinatarCommon *c, int lo, int hi) {
    return lo + (int)nevo_rng_below(&c->rng, (uint32_t)(hi - lo));
}

/* One colour per channel index; chosen to stay distinguishable when scaled up. */
static const uint8_t palette[MINATAR_MAX_CHANNELS][3] = {
    {255, 235, 59},  {244, 67, 54},   {96, 125, 139}, {76, 175, 80},  {33, 150, 243},
    {255, 152, 0},   {156, 39, 176},  {0, 188, 212},  {233, 30, 99}, {205, 220, 57},
};

void minatar_render_obs(const float *obs, int n_channels, uint8_t *rgb) {
    memset(rgb, 0, MINATAR_N * MINATAR_N * 3);
    for (int cell = 0; cell < MINATAR_N * MINATAR_N; cell++)
        for (int ch = 0; ch < n_channels; ch++)
            if (obs[cell * n_channels + ch] != 0.0f) memcpy(rgb + cell * 3, palette[ch], 3);
}
