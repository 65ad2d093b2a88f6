/* The fastest single nevo_policy_forward call of an MLP population case, as GFLOP/s:
 * P different networks (obs 64 -> H -> H -> 8, tanh, the bench's shapes), B rows each,
 * each call timed alone and the minimum kept over a few seconds of calls.
 *
 * `nevo bench` reports the best of 3 repetitions of >= 0.2 s, which on a 2-core virtual
 * machine shared with other work still averages in the other tenants (its ratios moved
 * by +-20% between runs on an AMD EPYC in docs/BENCHMARKS.md). The fastest call is what
 * the code does when nothing interferes, repeatable to about 1% there, so it is what
 * tuning compared. Build and run: dev/kernels/README.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nevo/policy.h"
#include "nevo/rng.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s P H B [seconds]  (P networks of 64 -> H -> H -> 8, B rows each)\n", argv[0]);
        return 2;
    }
    int P = atoi(argv[1]), H = atoi(argv[2]), B = atoi(argv[3]);
    double secs = argc == 5 ? atof(argv[4]) : 2.0;
    if (P < 1 || H < 1 || B < 1 || !(secs > 0.0)) {
        fprintf(stderr, "%s: P, H and B must be positive integers, seconds positive\n", argv[0]);
        return 2;
    }
    NevoEnvSpec spec = {0};
    spec.name = "forward_min_calls";
    spec.obs_rank = 1;
    spec.obs_shape[0] = spec.obs_dim = 64;
    spec.action_kind = NEVO_SPACE_DISCRETE;
    spec.n_actions = 8;
    spec.action_dim = 1;
    NevoPolicyConfig pc = {0};
    pc.n_hidden = 2;
    pc.hidden[0] = pc.hidden[1] = H;
    snprintf(pc.activation, sizeof pc.activation, "tanh");
    snprintf(pc.init, sizeof pc.init, "scaled");
    NevoPolicy *p = NULL;
    NevoError err;
    if (nevo_policy_new(&spec, &pc, 0, &p, &err) != NEVO_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], err.msg);
        return 1;
    }
    size_t np = p->nparams, rows = (size_t)P * (size_t)B;
    float *params = nevo_alloc_aligned(sizeof(float) * np * (size_t)P);
    float *obs = nevo_alloc_aligned(sizeof(float) * rows * 64);
    float *out = nevo_alloc_aligned(sizeof(float) * rows * 8);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, (int)rows));
    int *net = nevo_alloc(sizeof(int) * rows);
    NevoRng rng;
    nevo_rng_init(&rng, 3, NEVO_RNG_USER, 0, 0, 0);
    nevo_rng_fill_normal(&rng, params, np * (size_t)P);
    for (size_t i = 0; i < np * (size_t)P; i++) params[i] *= 0.125f;
    nevo_rng_fill_normal(&rng, obs, rows * 64);
    for (size_t i = 0; i < rows; i++) net[i] = (int)(i / (size_t)B);
    double best = 1e30, t0 = now_s();
    long calls = 0;
    while (now_s() - t0 < secs) {
        double t1 = now_s();
        nevo_policy_forward(p, params, np, net, obs, (int)rows, out, scratch);
        double dt = now_s() - t1;
        if (dt < best) best = dt;
        calls++;
    }
    printf("P=%d %d-%d B=%d: %.1f GFLOP/s (fastest of %ld calls)\n", P, H, H, B,
           (double)rows * nevo_policy_flops(p) / best * 1e-9, calls);
    free(params), free(obs), free(out), free(scratch), free(net);
    nevo_policy_free(p);
    return 0;
}
