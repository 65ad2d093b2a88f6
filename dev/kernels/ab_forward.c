/* Two or more builds of libnevo.so timed on the same cases in one process, taking
 * turns: the way to compare kernel variants on a shared machine, where the host's
 * phases move a rate by up to 30% and only alternating rounds on the same buffers
 * separate a 10% difference (docs/BENCHMARKS.md, "Noise on shared VMs"). Each library
 * is dlopen'ed on its own (RTLD_LOCAL | RTLD_DEEPBIND), so each keeps its kernel set
 * and its dispatch; the networks, observations and noise are built once, by the
 * libnevo.a this program links, and every library computes on the same memory.
 * dev/kernels/README.md says how to build the libraries and run it.
 *
 *   ab_forward [-r ROUNDS] [-t SECONDS] LIB.so... -- CASE...
 *
 * Cases (every rate is per library, per round; the ranges are over the rounds):
 *   minatar:GAME:P:B   P MinAtar nets (conv 3x3x16, ReLU, dense 128, ReLU) with B of
 *                      their real observations each, one nevo_policy_forward call
 *                      over all of them (dense-equivalent GFLOP/s)
 *   episode:GAME:T     one MinAtar net, a row a call over T steps of random play, as
 *                      a training worker calls it (GFLOP/s)
 *   mlp:P:H:B[:O:A]    P nets O -> H -> H -> A (tanh; O = 64, A = 8 unless given), B
 *                      rows each, one call (CartPole's GA: mlp:14:64:1:4:2, the 14
 *                      networks a worker's slots hold)
 *   perturb:GAME:K     K GA children of the MinAtar net built one after another,
 *                      each parent + sigma x a slice at a random place of a 32 MiB
 *                      table into one of two slot rows (nevo_perturb_rows, µs a child)
 *   wsum:N:M           an ES gradient: M noise slices of N floats (random places of a
 *                      32 MiB table) weighted into N doubles (nevo_weighted_sum, µs a
 *                      call)
 *   tanh:N             the hidden-layer tanh on N floats in [-3, 3], as the bench's tanh
 *                      row (nevo_kernel_activate, the library's internal entry; GFLOP/s
 *                      reads as Gelem/s)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nevo/env.h"
#include "nevo/noise.h"
#include "nevo/params.h"
#include "nevo/policy.h"
#include "nevo/rng.h"
#include "nevo/threads.h"

typedef void (*ForwardFn)(const NevoPolicy *, const float *, size_t, const int *, const float *, int, float *,
                          float *);
typedef void (*PerturbFn)(float *, float *, const float *, float, const float *, size_t, int);
typedef void (*WeightedSumFn)(double *, const float *const *, const double *, int, size_t, size_t);
typedef void (*ActivateFn)(NevoActivation, float *, int);

typedef struct Lib {
    const char *path;
    ForwardFn forward;
    PerturbFn perturb;
    WeightedSumFn weighted_sum;
    ActivateFn activate; /* NULL where the library does not export it */
} Lib;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A case: its work for one library (returns the units done, e.g. FLOPs), and the unit. */
typedef struct Case {
    char name[96];
    const char *unit; /* "GFLOP/s", "us/child" or "us/call" */
    double (*work)(struct Case *c, const Lib *lib);
    /* forward cases */
    NevoPolicy *p;
    float *params, *obs, *out, *scratch;
    int *net;
    int rows, per_call; /* rows in all; rows a call (episode: 1) */
    size_t np;
    /* perturb, wsum */
    float *table, *rowbuf;
    size_t table_floats;
    NevoRng rng;
    double *g, *w;
    const float **slices;
} Case;

static double forward_work(Case *c, const Lib *lib) {
    int odim = c->p->obs_dim;
    for (int i = 0; i < c->rows; i += c->per_call)
        lib->forward(c->p, c->params, c->np, c->net + i, c->obs + (size_t)i * odim, c->per_call,
                     c->out + (size_t)i * c->p->n_out, c->scratch);
    return (double)c->rows * nevo_policy_flops(c->p);
}

enum { PERTURB_PARENTS = 20 };

static double perturb_work(Case *c, const Lib *lib) {
    for (int k = 0; k < c->per_call; k++) {
        const float *parent = c->params + (size_t)nevo_rng_below(&c->rng, PERTURB_PARENTS) * c->np;
        size_t off = (size_t)nevo_rng_below(&c->rng, (uint32_t)(c->table_floats - c->np));
        lib->perturb(c->rowbuf + (size_t)(k & 1) * c->np, NULL, parent, 0.005f, c->table + off, c->np, 0);
    }
    return (double)c->per_call;
}

static double tanh_work(Case *c, const Lib *lib) {
    size_t n = c->np;
    memcpy(c->rowbuf, c->table, sizeof(float) * n);
    lib->activate(NEVO_ACT_TANH, c->rowbuf, (int)n);
    return (double)n;
}

static double wsum_work(Case *c, const Lib *lib) {
    lib->weighted_sum(c->g, c->slices, c->w, c->per_call, 0, c->np);
    return 1.0;
}

static NevoPolicy *minatar_policy(const char *game, NevoEnv **env) {
    NevoError err;
    if (nevo_env_new(game, NULL, 0, env, &err) != NEVO_OK) {
        fprintf(stderr, "%s: %s\n", game, err.msg);
        exit(1);
    }
    NevoPolicyConfig pc = {0};
    pc.n_conv = 1, pc.conv_filters[0] = 16, pc.conv_kernels[0] = 3, pc.conv_strides[0] = 1;
    pc.n_hidden = 1, pc.hidden[0] = 128;
    snprintf(pc.activation, sizeof pc.activation, "relu");
    snprintf(pc.init, sizeof pc.init, "scaled");
    NevoPolicy *p = NULL;
    if (nevo_policy_new(nevo_env_spec(*env), &pc, 0, &p, &err) != NEVO_OK) {
        fprintf(stderr, "%s: %s\n", game, err.msg);
        exit(1);
    }
    return p;
}

/* P networks from the init stream, as the bench makes them */
static float *init_nets(const NevoPolicy *p, int P) {
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new(nevo_noise_auto_size(p->nparams), pool);
    float *params = nevo_alloc_aligned(sizeof(float) * p->nparams * (size_t)P);
    for (int j = 0; j < P; j++) nevo_policy_init_params(p, noise, 5, 0, (uint32_t)j, params + (size_t)j * p->nparams);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    return params;
}

/* rows observations of random play: each from a reset at a random depth (episode 0),
 * or one episode after another (episode 1) */
static float *observations(NevoEnv *env, int rows, int episode) {
    const NevoEnvSpec *spec = nevo_env_spec(env);
    int odim = spec->obs_dim;
    float *obs = nevo_alloc_aligned(sizeof(float) * (size_t)rows * odim);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    NevoRng rng;
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    if (episode) nevo_env_reset(env, inst, nevo_rng_derive(7, NEVO_RNG_ENV_SEED, 0, 0, 0), obs);
    for (int j = 0; j < rows; j++) {
        float *x = obs + (size_t)j * odim;
        NevoStepResult sr = {0};
        float a;
        if (episode) {
            if (j == 0) continue;
            a = (float)nevo_rng_below(&rng, (uint32_t)spec->n_actions);
            nevo_env_step(env, inst, &a, x, &sr);
            if (sr.terminated || sr.truncated)
                nevo_env_reset(env, inst, nevo_rng_derive(7, NEVO_RNG_ENV_SEED, 0, (uint32_t)j, 0), x);
            continue;
        }
        nevo_env_forget(env, inst);
        nevo_env_reset(env, inst, nevo_rng_derive(7, NEVO_RNG_ENV_SEED, 0, (uint32_t)j, 0), x);
        int depth = (int)nevo_rng_below(&rng, 60);
        for (int t = 0; t < depth && !sr.terminated; t++) {
            a = (float)nevo_rng_below(&rng, (uint32_t)spec->n_actions);
            nevo_env_step(env, inst, &a, x, &sr);
        }
    }
    nevo_env_instance_free(env, inst);
    free(inst);
    return obs;
}

static void forward_buffers(Case *c, int P, int B) {
    c->np = c->p->nparams;
    c->net = nevo_alloc(sizeof(int) * (size_t)c->rows);
    for (int i = 0; i < c->rows; i++) c->net[i] = P > 1 ? i / B : 0;
    c->out = nevo_alloc_aligned(sizeof(float) * (size_t)c->rows * c->p->n_out);
    c->scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(c->p, c->per_call));
    c->unit = "GFLOP/s";
    c->work = forward_work;
}

static void parse_case(const char *s, Case *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", s);
    char game[64];
    int P, B, H, T, K, O = 64, A = 8;
    NevoEnv *env = NULL;
    if (sscanf(s, "minatar:%63[^:]:%d:%d", game, &P, &B) == 3 && P > 0 && B > 0) {
        c->p = minatar_policy(game, &env);
        c->params = init_nets(c->p, P);
        c->rows = c->per_call = P * B;
        c->obs = observations(env, c->rows, 0);
        forward_buffers(c, P, B);
    } else if (sscanf(s, "episode:%63[^:]:%d", game, &T) == 2 && T > 0) {
        c->p = minatar_policy(game, &env);
        c->params = init_nets(c->p, 1);
        c->rows = T, c->per_call = 1;
        c->obs = observations(env, T, 1);
        forward_buffers(c, 1, 1);
    } else if (sscanf(s, "mlp:%d:%d:%d:%d:%d", &P, &H, &B, &O, &A) >= 3 && P > 0 && H > 0 && B > 0 && O > 0 &&
               A > 1) {
        NevoEnvSpec spec = {0};
        spec.name = "ab_forward";
        spec.obs_rank = 1;
        spec.obs_shape[0] = spec.obs_dim = O;
        spec.action_kind = NEVO_SPACE_DISCRETE;
        spec.n_actions = A;
        spec.action_dim = 1;
        NevoPolicyConfig pc = {0};
        pc.n_hidden = 2, pc.hidden[0] = pc.hidden[1] = H;
        snprintf(pc.activation, sizeof pc.activation, "tanh");
        snprintf(pc.init, sizeof pc.init, "scaled");
        NevoError err;
        if (nevo_policy_new(&spec, &pc, 0, &c->p, &err) != NEVO_OK) {
            fprintf(stderr, "%s: %s\n", s, err.msg);
            exit(1);
        }
        NevoRng rng;
        nevo_rng_init(&rng, 3, NEVO_RNG_USER, 0, 0, 0);
        c->rows = c->per_call = P * B;
        c->params = nevo_alloc_aligned(sizeof(float) * c->p->nparams * (size_t)P);
        nevo_rng_fill_normal(&rng, c->params, c->p->nparams * (size_t)P);
        for (size_t i = 0; i < c->p->nparams * (size_t)P; i++) c->params[i] *= 0.125f;
        c->obs = nevo_alloc_aligned(sizeof(float) * (size_t)c->rows * O);
        nevo_rng_fill_normal(&rng, c->obs, (size_t)c->rows * O);
        forward_buffers(c, P, B);
    } else if (sscanf(s, "perturb:%63[^:]:%d", game, &K) == 2 && K > 0) {
        c->p = minatar_policy(game, &env);
        c->np = c->p->nparams;
        c->params = init_nets(c->p, PERTURB_PARENTS);
        c->table_floats = (size_t)8 << 20; /* 32 MiB */
        c->table = nevo_alloc_aligned(sizeof(float) * c->table_floats);
        c->rowbuf = nevo_alloc_aligned(sizeof(float) * 2 * c->np);
        nevo_rng_init(&c->rng, 9, NEVO_RNG_USER, 0, 0, 0);
        nevo_rng_fill_normal(&c->rng, c->table, c->table_floats);
        memset(c->rowbuf, 0, sizeof(float) * 2 * c->np);
        c->per_call = K;
        c->unit = "us/child";
        c->work = perturb_work;
    } else if (sscanf(s, "wsum:%d:%d", &P, &K) == 2 && P > 0 && K > 0) {
        c->np = (size_t)P;
        c->table_floats = (size_t)8 << 20;
        if (c->np >= c->table_floats) {
            fprintf(stderr, "%s: N must be under %zu\n", s, c->table_floats);
            exit(2);
        }
        c->table = nevo_alloc_aligned(sizeof(float) * c->table_floats);
        nevo_rng_init(&c->rng, 9, NEVO_RNG_USER, 0, 0, 0);
        nevo_rng_fill_normal(&c->rng, c->table, c->table_floats);
        c->g = nevo_alloc_aligned(sizeof(double) * c->np);
        memset(c->g, 0, sizeof(double) * c->np);
        c->w = nevo_alloc(sizeof(double) * (size_t)K);
        c->slices = nevo_alloc(sizeof(float *) * (size_t)K);
        for (int i = 0; i < K; i++) {
            c->w[i] = 1e-3 * (double)(i % 7 - 3);
            c->slices[i] = c->table + nevo_rng_below(&c->rng, (uint32_t)(c->table_floats - c->np));
        }
        c->per_call = K;
        c->unit = "us/call";
        c->work = wsum_work;
    } else if (sscanf(s, "tanh:%d", &P) == 1 && P > 0) {
        c->np = (size_t)P;
        c->table = nevo_alloc_aligned(sizeof(float) * c->np);
        c->rowbuf = nevo_alloc_aligned(sizeof(float) * c->np);
        for (int k = 0; k < P; k++) c->table[k] = -3.0f + 6.0f * (float)k / (float)P;
        c->unit = "Gelem/s";
        c->work = tanh_work;
    } else {
        fprintf(stderr,
                "unknown case '%s' (minatar:GAME:P:B, episode:GAME:T, mlp:P:H:B[:O:A], perturb:GAME:K, wsum:N:M, tanh:N)\n", s);
        exit(2);
    }
    if (env) nevo_env_free(env);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int rounds = 8;
    double secs = 0.3;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0; i += 2) {
        if (i + 1 >= argc) break;
        if (strcmp(argv[i], "-r") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-t") == 0)
            secs = atof(argv[i + 1]);
    }
    Lib libs[8];
    int nlib = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (nlib == 8) {
            fprintf(stderr, "at most 8 libraries\n");
            return 2;
        }
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        libs[nlib].path = argv[i];
        libs[nlib].forward = (ForwardFn)dlsym(h, "nevo_policy_forward");
        libs[nlib].perturb = (PerturbFn)dlsym(h, "nevo_perturb_rows");
        libs[nlib].weighted_sum = (WeightedSumFn)dlsym(h, "nevo_weighted_sum");
        libs[nlib].activate = (ActivateFn)dlsym(h, "nevo_kernel_activate");
        if (!libs[nlib].forward || !libs[nlib].perturb || !libs[nlib].weighted_sum) {
            fprintf(stderr, "%s: no nevo_policy_forward, nevo_perturb_rows or nevo_weighted_sum\n", argv[i]);
            return 1;
        }
        nlib++;
    }
    if (nlib < 1 || i >= argc - 1 || rounds < 1 || !(secs > 0.0)) {
        fprintf(stderr,
                "usage: %s [-r ROUNDS] [-t SECONDS] LIB.so... -- CASE...\n"
                "cases: minatar:GAME:P:B episode:GAME:T mlp:P:H:B[:O:A] perturb:GAME:K wsum:N:M tanh:N (the source says more)\n",
                argv[0]);
        return 2;
    }
    for (i++; i < argc; i++) {
        Case c;
        parse_case(argv[i], &c);
        double rate[8][64], fastest[8];
        if (rounds > 64) rounds = 64;
        for (int l = 0; l < nlib; l++) {
            if (c.work == tanh_work && !libs[l].activate) {
                fprintf(stderr, "%s: no nevo_kernel_activate\n", libs[l].path);
                return 1;
            }
            fastest[l] = 0.0;
            c.work(&c, &libs[l]); /* warm up */
        }
        for (int r = 0; r < rounds; r++) {
            for (int q = 0; q < nlib; q++) {
                int l = (q + r) % nlib; /* each library first in turn */
                double units = 0.0, t0 = now_s(), best = 0.0, t;
                long calls = 0;
                while ((t = now_s()) - t0 < secs) {
                    double u = c.work(&c, &libs[l]), dt = now_s() - t;
                    units += u, calls++;
                    if (dt > 0 && u / dt > best) best = u / dt;
                }
                double el = now_s() - t0;
                int per_unit = c.work == perturb_work || c.work == wsum_work; /* time a unit: lower is faster */
                rate[l][r] = per_unit ? 1e6 * el / units : units / el * 1e-9;
                double f = per_unit ? 1e6 / best : best * 1e-9;
                if (r == 0 || (per_unit ? f < fastest[l] : f > fastest[l])) fastest[l] = f;
                (void)calls;
            }
        }
        printf("%s (%s; %d rounds of %.2f s each, taking turns)\n", c.name, c.unit, rounds, secs);
        for (int l = 0; l < nlib; l++) {
            double s[64];
            memcpy(s, rate[l], sizeof(double) * (size_t)rounds);
            qsort(s, (size_t)rounds, sizeof(double), cmp_double);
            printf("  %-40s %7.2f-%7.2f  median %7.2f  fastest call %7.2f\n", libs[l].path, s[0], s[rounds - 1],
                   s[rounds / 2], fastest[l]);
        }
        /* each round's ratio to the first library: the comparison that cancels the
         * host's slow phases */
        for (int l = 1; l < nlib; l++) {
            double q[64];
            for (int r = 0; r < rounds; r++) q[r] = rate[l][r] / rate[0][r];
            qsort(q, (size_t)rounds, sizeof(double), cmp_double);
            printf("  %s / %s per round: %.3f-%.3f, median %.3f\n", libs[l].path, libs[0].path, q[0], q[rounds - 1],
                   q[rounds / 2]);
        }
        fflush(stdout);
    }
    return 0;
}
