/* `nevo envs`: the registered environments and their spaces. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "nevo/env.h"

static void space_text(const NevoEnvSpec *s, char *buf, size_t n) {
    if (s->action_kind == NEVO_SPACE_DISCRETE) {
        snprintf(buf, n, "Discrete(%d)", s->n_actions);
        return;
    }
    snprintf(buf, n, "Box(%d, [%g, %g])", s->action_dim, s->action_low[0], s->action_high[0]);
}

static void shape_text(const NevoEnvSpec *s, char *buf, size_t n) {
    if (s->obs_rank == 3)
        snprintf(buf, n, "(%d, %d, %d)", s->obs_shape[0], s->obs_shape[1], s->obs_shape[2]);
    else
        snprintf(buf, n, "(%d)", s->obs_dim);
}

int nevo_cmd_envs(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("usage: nevo envs [--json]\n\nLists every environment: name, observation shape, "
                   "action space, time limit (0 = none) and the registered reward threshold.\n");
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) json = 1;
        else return cli_usage_error("envs", "unknown option '%s'", cli_esc(argv[i]));
    }
    if (!json) printf("%-26s %-14s %-22s %9s %10s  %s\n", "name", "observation", "actions", "max_steps", "threshold", "summary");
    for (int i = 0; i < nevo_env_count(); i++) {
        const NevoEnvSpec *s = &nevo_env_class_at(i)->spec;
        char space[64], shape[32], thr[32];
        space_text(s, space, sizeof space);
        shape_text(s, shape, sizeof shape);
        if (s->has_reward_threshold) snprintf(thr, sizeof thr, "%g", s->reward_threshold);
        else snprintf(thr, sizeof thr, "-");
        if (json)
            printf("{\"name\": \"%s\", \"obs_shape\": \"%s\", \"actions\": \"%s\", \"max_steps\": %d, "
                   "\"reward_threshold\": %s}\n",
                   s->name, shape, space, s->max_steps, s->has_reward_threshold ? thr : "null");
        else
            printf("%-26s %-14s %-22s %9d %10s  %s\n", s->name, shape, space, s->max_steps, thr,
                   s->summary ? s->summary : "");
    }
    return 0;
}
