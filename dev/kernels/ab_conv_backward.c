/* Two or more builds of libnevo.so timed on the conv backward, taking turns (as
 * ab_forward, whose head says why): nevo_conv_backward one image a call, and
 * nevo_policy_backward of a whole batch, on real inputs and the dy a backward meets
 * there. Each library's results are compared bit for bit with the first's.
 *
 *   ab_conv_backward [-r ROUNDS] [-t SECONDS] [-b ROWS] LIB.so... -- CASE...
 *
 * Cases (rates are dense-equivalent GFLOP/s as `nevo bench`'s backward group counts
 * them: 2 fan_in out_dim per row for dW, as much again for dX):
 *   fashion:L[:nodx]   layer L of the Fashion-MNIST net of configs/fashion_mnist_sgd.json
 *                      (conv 3x3 8 s1, conv 3x3 16 s2, dense 32, ReLU) on ROWS training
 *                      images: layer 0 without dX, later layers with it unless nodx
 *   fashion:net        nevo_policy_backward of that net on the ROWS images (no dobs)
 *   minatar:GAME       the MinAtar net's conv (3x3x16 on 10x10xC) on ROWS observations of
 *                      random play, without dX
 *   minatar:GAME:dx    the same with dX
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

#include "nevo/dataset.h"
#include "nevo/env.h"
#include "nevo/grad.h"
#include "nevo/policy.h"
#include "nevo/rng.h"

typedef void (*ConvBackwardFn)(const NevoLayer *, const float *, const float *, const float *, float *, float *,
                               float *);
typedef void (*PolicyBackwardFn)(const NevoPolicy *, const float *, size_t, const int *, const float *, int,
                                 const float *, const float *, float *, size_t, float *, float *);

typedef struct Lib {
    const char *path;
    ConvBackwardFn conv_backward;
    PolicyBackwardFn policy_backward;
} Lib;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A network on B rows, its tape and each layer's dy; the case times layer `layer`
 * (-1: the whole backward). Outputs go to grads and dx, zeroed before each call. */
typedef struct Case {
    char name[96];
    NevoPolicy *p;
    float *theta, *obs, *tape, *dout, *grads, *dx, *scratch;
    float *dys[NEVO_POLICY_MAX_LAYERS];
    int *net;
    int B, layer, with_dx;
} Case;

static void fail(const char *what, const NevoError *err) {
    fprintf(stderr, "%s: %s\n", what, err->msg);
    exit(1);
}

/* the parameters (normal / sqrt(fan_in), biases 0), the tape, a random dout and every
 * layer's dy as the backward meets it (through the activations) */
static void setup(Case *c) {
    NevoPolicy *p = c->p;
    int B = c->B;
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    c->theta = nevo_alloc_aligned(sizeof(float) * p->nparams);
    memset(c->theta, 0, sizeof(float) * p->nparams);
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        size_t nw = L->b_off - L->w_off;
        nevo_rng_fill_normal(&rng, c->theta + L->w_off, nw);
        float s = (float)(1.0 / sqrt((double)L->fan_in));
        for (size_t k = 0; k < nw; k++) c->theta[L->w_off + k] *= s;
    }
    c->net = nevo_alloc(sizeof(int) * (size_t)B);
    memset(c->net, 0, sizeof(int) * (size_t)B);
    c->tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p, B));
    float *out = nevo_alloc_aligned(sizeof(float) * (size_t)B * p->n_out);
    nevo_policy_forward_tape(p, c->theta, p->nparams, c->net, c->obs, B, out, c->tape);
    free(out);
    c->dout = nevo_alloc_aligned(sizeof(float) * (size_t)B * p->n_out);
    nevo_rng_fill_normal(&rng, c->dout, (size_t)B * p->n_out);
    c->grads = nevo_alloc_aligned(sizeof(float) * p->nparams);
    memset(c->grads, 0, sizeof(float) * p->nparams);
    c->dx = nevo_alloc_aligned(sizeof(float) * (size_t)B * p->max_width);
    c->scratch = nevo_alloc_aligned(sizeof(float) * nevo_grad_scratch_floats(p, B));
    for (int l = p->n_layers - 1; l >= 0; l--) {
        const NevoLayer *L = &p->layers[l];
        c->dys[l] = nevo_alloc_aligned(sizeof(float) * (size_t)B * L->out_dim);
        if (l == p->n_layers - 1) {
            memcpy(c->dys[l], c->dout, sizeof(float) * (size_t)B * L->out_dim);
            continue;
        }
        const NevoLayer *N = &p->layers[l + 1];
        const float *x = c->tape + nevo_grad_tape_offset(p, B, l);
        if (N->kind == NEVO_LAYER_CONV)
            for (int r = 0; r < B; r++)
                nevo_conv_backward(N, c->theta + N->w_off, x + (size_t)r * N->in_dim, c->dys[l + 1] + (size_t)r * N->out_dim,
                                   c->grads + N->w_off, c->grads + N->b_off, c->dys[l] + (size_t)r * N->in_dim);
        else
            nevo_dense_backward(c->theta + N->w_off, x, c->dys[l + 1], B, N->in_dim, N->out_dim, c->grads + N->w_off,
                                c->grads + N->b_off, c->dys[l]);
        nevo_act_backward(L->act, x, c->dys[l], B * L->out_dim);
    }
    memset(c->grads, 0, sizeof(float) * p->nparams);
}

/* one timed call: returns its dense-equivalent FLOPs */
static double work(Case *c, const Lib *lib) {
    const NevoPolicy *p = c->p;
    memset(c->grads, 0, sizeof(float) * p->nparams);
    if (c->layer < 0) {
        lib->policy_backward(p, c->theta, p->nparams, c->net, c->obs, c->B, c->tape, c->dout, c->grads, p->nparams,
                             NULL, c->scratch);
        double f = 0.0;
        for (int l = 0; l < p->n_layers; l++) f += (l > 0 ? 4.0 : 2.0) * p->layers[l].fan_in * p->layers[l].out_dim;
        return f * c->B;
    }
    const NevoLayer *L = &p->layers[c->layer];
    const float *x = c->layer == 0 ? c->obs : c->tape + nevo_grad_tape_offset(p, c->B, c->layer - 1);
    for (int r = 0; r < c->B; r++)
        lib->conv_backward(L, c->theta + L->w_off, x + (size_t)r * L->in_dim, c->dys[c->layer] + (size_t)r * L->out_dim,
                           c->grads + L->w_off, c->grads + L->b_off, c->with_dx ? c->dx + (size_t)r * L->in_dim : NULL);
    return (c->with_dx ? 4.0 : 2.0) * L->fan_in * L->out_dim * c->B;
}

static void fashion_case(Case *c, const char *arg, int B) {
    NevoError err;
    NevoDataset *ds = NULL;
    if (nevo_dataset_load("fashion-mnist", B, 1, &ds, &err) != NEVO_OK) fail("fashion-mnist", &err);
    NevoEnvSpec spec;
    nevo_dataset_env_spec(ds, &spec);
    NevoPolicyConfig pc = {0};
    pc.n_conv = pc.n_conv_kernels = pc.n_conv_strides = 2;
    pc.conv_filters[0] = 8, pc.conv_kernels[0] = 3, pc.conv_strides[0] = 1;
    pc.conv_filters[1] = 16, pc.conv_kernels[1] = 3, pc.conv_strides[1] = 2;
    pc.n_hidden = 1, pc.hidden[0] = 32;
    snprintf(pc.activation, sizeof pc.activation, "relu");
    snprintf(pc.init, sizeof pc.init, "scaled");
    if (nevo_policy_new(&spec, &pc, 0, &c->p, &err) != NEVO_OK) fail("fashion net", &err);
    c->obs = nevo_alloc_aligned(sizeof(float) * (size_t)B * c->p->obs_dim);
    memcpy(c->obs, ds->train.images, sizeof(float) * (size_t)B * c->p->obs_dim);
    nevo_dataset_free(ds);
    if (strcmp(arg, "net") == 0) {
        c->layer = -1;
    } else {
        c->layer = atoi(arg);
        c->with_dx = c->layer > 0 && !strstr(arg, "nodx");
        if (c->layer < 0 || c->layer > 1) {
            fprintf(stderr, "fashion:%s: layer 0 or 1\n", arg);
            exit(2);
        }
    }
}

static void minatar_case(Case *c, const char *game, int with_dx, int B) {
    NevoError err;
    NevoEnv *env = NULL;
    if (nevo_env_new(game, NULL, 0, &env, &err) != NEVO_OK) fail(game, &err);
    NevoPolicyConfig pc = {0};
    pc.n_conv = 1, pc.conv_filters[0] = 16, pc.conv_kernels[0] = 3, pc.conv_strides[0] = 1;
    pc.n_hidden = 1, pc.hidden[0] = 128;
    snprintf(pc.activation, sizeof pc.activation, "relu");
    snprintf(pc.init, sizeof pc.init, "scaled");
    if (nevo_policy_new(nevo_env_spec(env), &pc, 0, &c->p, &err) != NEVO_OK) fail(game, &err);
    /* B observations, each from random play at a random depth of its own episode */
    const NevoEnvSpec *spec = nevo_env_spec(env);
    c->obs = nevo_alloc_aligned(sizeof(float) * (size_t)B * spec->obs_dim);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    NevoRng rng;
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    for (int j = 0; j < B; j++) {
        float *x = c->obs + (size_t)j * spec->obs_dim;
        nevo_env_forget(env, inst);
        nevo_env_reset(env, inst, nevo_rng_derive(7, NEVO_RNG_ENV_SEED, 0, (uint32_t)j, 0), x);
        int depth = (int)nevo_rng_below(&rng, 60);
        NevoStepResult sr = {0};
        for (int t = 0; t < depth && !sr.terminated; t++) {
            float a = (float)nevo_rng_below(&rng, (uint32_t)spec->n_actions);
            nevo_env_step(env, inst, &a, x, &sr);
        }
    }
    nevo_env_instance_free(env, inst);
    free(inst);
    nevo_env_free(env);
    c->layer = 0, c->with_dx = with_dx;
}

static void parse_case(const char *s, Case *c, int B) {
    memset(c, 0, sizeof *c);
    c->B = B;
    char arg[64];
    if (sscanf(s, "fashion:%63s", arg) == 1) {
        fashion_case(c, arg, B);
    } else if (sscanf(s, "minatar:%63[^:]", arg) == 1) {
        minatar_case(c, arg, strstr(s + 8 + strlen(arg), ":dx") != NULL, B);
    } else {
        fprintf(stderr, "unknown case '%s' (fashion:L[:nodx], fashion:net, minatar:GAME[:dx])\n", s);
        exit(2);
    }
    setup(c);
    const NevoLayer *L = c->layer >= 0 ? &c->p->layers[c->layer] : NULL;
    if (L)
        snprintf(c->name, sizeof c->name, "%s: conv %dx%dx%d k%d s%d f%d%s, B=%d", s, L->in_h, L->in_w, L->in_c, L->kernel,
                 L->stride, L->out_c, c->with_dx ? " with dX" : " (no dX)", B);
    else
        snprintf(c->name, sizeof c->name, "%s: nevo_policy_backward, B=%d", s, B);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int rounds = 8, B = 64;
    double secs = 0.3;
    int i = 1;
    for (; i + 1 < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0; i += 2) {
        if (strcmp(argv[i], "-r") == 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-t") == 0)
            secs = atof(argv[i + 1]);
        else if (strcmp(argv[i], "-b") == 0)
            B = atoi(argv[i + 1]);
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
        libs[nlib].conv_backward = (ConvBackwardFn)dlsym(h, "nevo_conv_backward");
        libs[nlib].policy_backward = (PolicyBackwardFn)dlsym(h, "nevo_policy_backward");
        if (!libs[nlib].conv_backward || !libs[nlib].policy_backward) {
            fprintf(stderr, "%s: no nevo_conv_backward or nevo_policy_backward\n", argv[i]);
            return 1;
        }
        nlib++;
    }
    if (nlib < 1 || i >= argc - 1 || rounds < 1 || rounds > 64 || !(secs > 0.0) || B < 1) {
        fprintf(stderr,
                "usage: %s [-r ROUNDS] [-t SECONDS] [-b ROWS] LIB.so... -- CASE...\n"
                "cases: fashion:L[:nodx] fashion:net minatar:GAME[:dx] (the source says more)\n",
                argv[0]);
        return 2;
    }
    for (i++; i < argc; i++) {
        Case c;
        parse_case(argv[i], &c, B);
        size_t ng = c.p->nparams, nx = (size_t)c.B * c.p->max_width;
        float *ref_g = malloc(sizeof(float) * ng), *ref_x = malloc(sizeof(float) * nx);
        double rate[8][64], fastest[8];
        int same[8];
        for (int l = 0; l < nlib; l++) {
            memset(c.dx, 0, sizeof(float) * nx);
            work(&c, &libs[l]); /* warm up, and the bits */
            if (l == 0) memcpy(ref_g, c.grads, sizeof(float) * ng), memcpy(ref_x, c.dx, sizeof(float) * nx);
            same[l] = memcmp(ref_g, c.grads, sizeof(float) * ng) == 0 && memcmp(ref_x, c.dx, sizeof(float) * nx) == 0;
            fastest[l] = 0.0;
        }
        for (int r = 0; r < rounds; r++) {
            for (int q = 0; q < nlib; q++) {
                int l = (q + r) % nlib; /* each library first in turn */
                double flops = 0.0, t0 = now_s(), t;
                while ((t = now_s()) - t0 < secs) {
                    double u = work(&c, &libs[l]), dt = now_s() - t;
                    flops += u;
                    if (dt > 0 && u / dt * 1e-9 > fastest[l]) fastest[l] = u / dt * 1e-9;
                }
                rate[l][r] = flops / (now_s() - t0) * 1e-9;
            }
        }
        printf("%s (GFLOP/s; %d rounds of %.2f s each, taking turns)\n", c.name, rounds, secs);
        for (int l = 0; l < nlib; l++) {
            double s[64];
            memcpy(s, rate[l], sizeof(double) * (size_t)rounds);
            qsort(s, (size_t)rounds, sizeof(double), cmp_double);
            printf("  %-40s %7.2f-%7.2f  median %7.2f  fastest call %7.2f%s\n", libs[l].path, s[0], s[rounds - 1],
                   s[rounds / 2], fastest[l], same[l] ? "" : "  DIFFERENT BITS");
        }
        for (int l = 1; l < nlib; l++) {
            double q[64];
            for (int r = 0; r < rounds; r++) q[r] = rate[l][r] / rate[0][r];
            qsort(q, (size_t)rounds, sizeof(double), cmp_double);
            printf("  %s / %s per round: %.3f-%.3f, median %.3f\n", libs[l].path, libs[0].path, q[0], q[rounds - 1],
                   q[rounds / 2]);
        }
        fflush(stdout);
        free(ref_g), free(ref_x);
    }
    return 0;
}
