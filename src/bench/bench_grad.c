/* The backward group of `nevo bench`: nevo_policy_backward against nevo_policy_forward
 * on a batch of rows of one network, whole and layer by layer, for the MinAtar net (on
 * observations of Breakout from random play), the Fashion-MNIST conv net of
 * configs/fashion_mnist_sgd.json (on training images, where the dataset is installed)
 * and a 64-64 tanh MLP on 17 inputs (a MuJoCo-sized policy). Rates are dense-equivalent GFLOP/s, as the forward group counts
 * them: a forward row is 2 fan_in out_dim FLOPs per layer, and a backward row twice that
 * (dW and dX) for every layer but the first, which computes no dX. Each rate is
 * compared with the FMA peak, and the backward's with the forward's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nevo/dataset.h"
#include "nevo/env.h"
#include "nevo/grad.h"
#include "nevo/policy.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

#define GRAD_ROWS 64

/* A batch of B rows of one network, the buffers its forward and backward use, and
 * each layer's input gradient dY as the backward meets it. */
typedef struct GradBench {
    const char *name; /* "MinAtar net", "Fashion net", "64-64 MLP" */
    NevoPolicy *p;
    float *theta, *obs, *out, *fscratch, *tape, *dout, *grads, *bscratch;
    float *dys[NEVO_POLICY_MAX_LAYERS]; /* (B, out_dim) of layer l */
    float *lanes_in[NEVO_POLICY_MAX_LAYERS], *lanes_out; /* a layer's inputs in the lanes layout */
    float *dx;        /* (B, max_width) a layer's input gradient */
    int *net;         /* B zeros */
    int B, layer;     /* the layer a per-layer measurement times */
} GradBench;

static void grad_bench_free(GradBench *g) {
    nevo_policy_free(g->p);
    free(g->theta), free(g->obs), free(g->out), free(g->fscratch), free(g->tape), free(g->dout), free(g->grads);
    free(g->bscratch), free(g->dx), free(g->net), free(g->lanes_out);
    for (int l = 0; l < NEVO_POLICY_MAX_LAYERS; l++) free(g->dys[l]), free(g->lanes_in[l]);
    memset(g, 0, sizeof *g);
}

/* The buffers for B rows of g->p on g->obs: the parameters (normal, scaled by
 * 1/sqrt(fan_in) as the GA's init, biases 0), a random dout, and one backward's dY of
 * every layer. */
static void grad_bench_setup(GradBench *g, int B) {
    NevoPolicy *p = g->p;
    const NevoKernels *K = nevo_kernels();
    size_t W = (size_t)p->max_width;
    g->B = B;
    g->theta = nevo_alloc_aligned(sizeof(float) * p->nparams);
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        size_t nw = L->b_off - L->w_off;
        nevo_rng_fill_normal(&rng, g->theta + L->w_off, nw);
        float s = (float)(1.0 / sqrt((double)L->fan_in));
        for (size_t k = 0; k < nw; k++) g->theta[L->w_off + k] *= s;
    }
    g->out = nevo_alloc_aligned(sizeof(float) * (size_t)B * p->n_out);
    g->fscratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, B));
    g->tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p, B));
    g->dout = nevo_alloc_aligned(sizeof(float) * (size_t)B * p->n_out);
    nevo_rng_fill_normal(&rng, g->dout, (size_t)B * p->n_out);
    g->grads = nevo_alloc_aligned(sizeof(float) * p->nparams);
    g->bscratch = nevo_alloc_aligned(sizeof(float) * nevo_grad_scratch_floats(p, B));
    g->dx = nevo_alloc_aligned(sizeof(float) * W * B);
    g->net = nevo_alloc(sizeof(int) * (size_t)B);
    g->lanes_out = nevo_alloc_aligned(sizeof(float) * W * NEVO_LANES);
    nevo_policy_forward_tape(p, g->theta, p->nparams, g->net, g->obs, B, g->out, g->tape);
    /* each layer's dY, and its inputs in the lanes layout (B / NEVO_LANES blocks) */
    for (int l = p->n_layers - 1; l >= 0; l--) {
        const NevoLayer *L = &p->layers[l];
        g->dys[l] = nevo_alloc_aligned(sizeof(float) * (size_t)B * L->out_dim);
        if (l == p->n_layers - 1) {
            memcpy(g->dys[l], g->dout, sizeof(float) * (size_t)B * L->out_dim);
        } else {
            const NevoLayer *N = &p->layers[l + 1];
            float *scratch_grads = g->grads; /* zeroed again below */
            const float *xn = g->tape + nevo_grad_tape_offset(p, B, l);
            if (N->kind == NEVO_LAYER_CONV)
                for (int r = 0; r < B; r++)
                    nevo_conv_backward(N, g->theta + N->w_off, xn + (size_t)r * N->in_dim,
                                       g->dys[l + 1] + (size_t)r * N->out_dim, scratch_grads + N->w_off,
                                       scratch_grads + N->b_off, g->dys[l] + (size_t)r * N->in_dim);
            else
                nevo_dense_backward(g->theta + N->w_off, xn, g->dys[l + 1], B, N->in_dim, N->out_dim,
                                    scratch_grads + N->w_off, scratch_grads + N->b_off, g->dys[l]);
            nevo_act_backward(L->act, g->tape + nevo_grad_tape_offset(p, B, l), g->dys[l], B * L->out_dim);
        }
        const float *x = l == 0 ? g->obs : g->tape + nevo_grad_tape_offset(p, B, l - 1);
        if (K->to_lanes) {
            g->lanes_in[l] = nevo_alloc_aligned(sizeof(float) * (size_t)B * L->in_dim);
            for (int r = 0; r + NEVO_LANES <= B; r += NEVO_LANES)
                K->to_lanes(x + (size_t)r * L->in_dim, (size_t)L->in_dim, L->in_dim,
                            g->lanes_in[l] + (size_t)r * L->in_dim);
        }
    }
    memset(g->grads, 0, sizeof(float) * p->nparams);
}

/* The backward's dense-equivalent FLOPs of layer l for one row */
static double backward_flops(const NevoLayer *L, int l) { return (l > 0 ? 4.0 : 2.0) * L->fan_in * L->out_dim; }

static double work_forward(void *ctx, long iters) {
    GradBench *g = ctx;
    for (long it = 0; it < iters; it++)
        nevo_policy_forward(g->p, g->theta, g->p->nparams, g->net, g->obs, g->B, g->out, g->fscratch);
    return (double)iters * g->B * nevo_policy_flops(g->p);
}

static double work_forward_tape(void *ctx, long iters) {
    GradBench *g = ctx;
    for (long it = 0; it < iters; it++)
        nevo_policy_forward_tape(g->p, g->theta, g->p->nparams, g->net, g->obs, g->B, g->out, g->tape);
    return (double)iters * g->B * nevo_policy_flops(g->p);
}

static double work_backward(void *ctx, long iters) {
    GradBench *g = ctx;
    const NevoPolicy *p = g->p;
    for (long it = 0; it < iters; it++)
        nevo_policy_backward(p, g->theta, p->nparams, g->net, g->obs, g->B, g->tape, g->dout, g->grads, p->nparams,
                             NULL, g->bscratch);
    double f = 0.0;
    for (int l = 0; l < p->n_layers; l++) f += backward_flops(&p->layers[l], l);
    return (double)iters * g->B * f;
}

/* layer g->layer as nevo_policy_forward runs it on B rows of one network: whole blocks
 * of NEVO_LANES rows in the lanes layout where the set has it, else the row kernels */
static double work_layer_forward(void *ctx, long iters) {
    GradBench *g = ctx;
    const NevoPolicy *p = g->p;
    const NevoKernels *K = nevo_kernels();
    int l = g->layer;
    const NevoLayer *L = &p->layers[l];
    const float *w = g->theta + L->w_off, *b = g->theta + L->b_off;
    const float *x = l == 0 ? g->obs : g->tape + nevo_grad_tape_offset(p, g->B, l - 1);
    float *y = g->dx;
    for (long it = 0; it < iters; it++) {
        if (K->dense_lanes) {
            for (int r = 0; r + NEVO_LANES <= g->B; r += NEVO_LANES) {
                const float *xt = g->lanes_in[l] + (size_t)r * L->in_dim;
                if (L->kind == NEVO_LAYER_CONV) K->conv_lanes(L, w, b, xt, L->act, g->lanes_out);
                else K->dense_lanes(w, b, xt, L->in_dim, L->out_dim, L->act, g->lanes_out);
            }
        } else {
            if (L->kind == NEVO_LAYER_CONV)
                for (int r = 0; r < g->B; r++)
                    K->conv(L, w, b, x + (size_t)r * L->in_dim, y + (size_t)r * L->out_dim);
            else
                K->dense(w, b, x, (size_t)L->in_dim, g->B, L->in_dim, L->out_dim, y, (size_t)L->out_dim);
            nevo_kernel_activate(L->act, y, g->B * L->out_dim);
        }
    }
    return (double)iters * g->B * 2.0 * L->fan_in * L->out_dim;
}

/* layer g->layer as nevo_policy_backward runs it: dW and db, and for a layer after the
 * first dX through the previous layer's activation */
static double work_layer_backward(void *ctx, long iters) {
    GradBench *g = ctx;
    const NevoPolicy *p = g->p;
    int l = g->layer;
    const NevoLayer *L = &p->layers[l];
    const float *w = g->theta + L->w_off;
    const float *x = l == 0 ? g->obs : g->tape + nevo_grad_tape_offset(p, g->B, l - 1);
    float *dx = l > 0 ? g->dx : NULL;
    for (long it = 0; it < iters; it++) {
        if (L->kind == NEVO_LAYER_CONV) {
            for (int r = 0; r < g->B; r++)
                nevo_conv_backward(L, w, x + (size_t)r * L->in_dim, g->dys[l] + (size_t)r * L->out_dim,
                                   g->grads + L->w_off, g->grads + L->b_off, dx ? dx + (size_t)r * L->in_dim : NULL);
        } else {
            nevo_dense_backward(w, x, g->dys[l], g->B, L->in_dim, L->out_dim, g->grads + L->w_off,
                                g->grads + L->b_off, dx);
        }
        if (dx) nevo_act_backward(p->layers[l - 1].act, x, dx, g->B * L->in_dim);
    }
    return (double)iters * g->B * backward_flops(L, l);
}

/* a GFLOP/s row named "<case> B=<B>, <what>" against the peak, or against `against`
 * (GFLOP/s, named against_name) with the peak's ratio in the JSON */
static void emit_rate(const NevoBenchLimits *lim, const GradBench *g, const char *what, NevoBenchTiming t,
                      double against, const char *against_name, NevoBenchEmit emit, void *ctx) {
    NevoBenchResult r;
    nevo_bench_result_init(&r, "backward", "GFLOP/s");
    snprintf(r.name, sizeof r.name, "%s B=%d, %s", g->name, g->B, what);
    r.value = t.best * 1e-9;
    r.median = t.median * 1e-9;
    r.cpu_share = t.cpu_share;
    char ln[64];
    if (against > 0) {
        nevo_bench_result_limit(&r, against, against_name);
    } else {
        snprintf(ln, sizeof ln, "fma peak, 1 core (%s)", nevo_bench_isa_name(lim->isa));
        nevo_bench_result_limit(&r, lim->peak_1c, ln);
    }
    snprintf(r.extra, sizeof r.extra, "\"kernels\": \"%s\", \"B\": %d, \"nparams\": %zu, \"peak_ratio\": %.4g",
             nevo_bench_kernels_name(), g->B, g->p->nparams, r.value / lim->peak_1c);
    if (emit) emit(ctx, &r);
}

static void bench_case(const NevoBenchOptions *o, const NevoBenchLimits *lim, GradBench *g, NevoBenchEmit emit,
                       void *ctx) {
    NevoBenchTiming fwd = nevo_bench_measure(o, work_forward, g, 1);
    emit_rate(lim, g, "forward", fwd, 0, NULL, emit, ctx);
    NevoBenchTiming tape = nevo_bench_measure(o, work_forward_tape, g, 1);
    emit_rate(lim, g, "forward with tape", tape, 0, NULL, emit, ctx);
    NevoBenchTiming bwd = nevo_bench_measure(o, work_backward, g, 1);
    emit_rate(lim, g, "backward", bwd, 0, NULL, emit, ctx);
    emit_rate(lim, g, "backward against forward", bwd, fwd.best * 1e-9, "forward, same rows", emit, ctx);
    for (int l = 0; l < g->p->n_layers; l++) {
        const NevoLayer *L = &g->p->layers[l];
        char desc[64], what[128];
        if (L->kind == NEVO_LAYER_CONV && L->stride > 1)
            snprintf(desc, sizeof desc, "conv %dx%dx%d k%d s%d f%d", L->in_h, L->in_w, L->in_c, L->kernel, L->stride,
                     L->out_c);
        else if (L->kind == NEVO_LAYER_CONV)
            snprintf(desc, sizeof desc, "conv %dx%dx%d k%d f%d", L->in_h, L->in_w, L->in_c, L->kernel, L->out_c);
        else
            snprintf(desc, sizeof desc, "dense %dx%d", L->in_dim, L->out_dim);
        g->layer = l;
        NevoBenchTiming lf = nevo_bench_measure(o, work_layer_forward, g, 1);
        snprintf(what, sizeof what, "%s, forward", desc);
        emit_rate(lim, g, what, lf, 0, NULL, emit, ctx);
        NevoBenchTiming lb = nevo_bench_measure(o, work_layer_backward, g, 1);
        snprintf(what, sizeof what, "%s, backward%s against forward", desc, l == 0 ? " (no dX)" : "");
        emit_rate(lim, g, what, lb, lf.best * 1e-9, "forward of the layer", emit, ctx);
    }
}

/* B observations of Breakout, each from random play at a random depth of its own
 * episode, as the forward group draws them (the planes' real sparsity) */
static void minatar_obs(NevoEnv *env, int B, float *obs) {
    const NevoEnvSpec *spec = nevo_env_spec(env);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    NevoRng rng;
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    for (int j = 0; j < B; j++) {
        float *x = obs + (size_t)j * spec->obs_dim;
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
}

NevoStatus nevo_bench_backward(const NevoBenchOptions *o, const NevoBenchLimits *lim, NevoBenchEmit emit, void *ctx,
                               NevoError *err) {
    int B = GRAD_ROWS;
    /* the MinAtar net (bench_engine.c's): conv 3x3x16, dense 128, ReLU */
    NevoEnv *env = NULL;
    NevoStatus st = nevo_env_new("minatar/breakout", NULL, 0, &env, err);
    if (st != NEVO_OK) return st;
    NevoPolicyConfig pc = {0};
    pc.n_conv = 1, pc.conv_filters[0] = 16, pc.conv_kernels[0] = 3, pc.conv_strides[0] = 1;
    pc.n_hidden = 1, pc.hidden[0] = 128;
    snprintf(pc.activation, sizeof pc.activation, "relu");
    snprintf(pc.init, sizeof pc.init, "scaled");
    GradBench g = {0};
    g.name = "MinAtar net";
    if ((st = nevo_policy_new(nevo_env_spec(env), &pc, 0, &g.p, err)) != NEVO_OK) {
        nevo_env_free(env);
        return st;
    }
    g.obs = nevo_alloc_aligned(sizeof(float) * (size_t)B * g.p->obs_dim);
    minatar_obs(env, B, g.obs);
    nevo_env_free(env);
    grad_bench_setup(&g, B);
    bench_case(o, lim, &g, emit, ctx);
    grad_bench_free(&g);

    /* the Fashion-MNIST net (configs/fashion_mnist_sgd.json: conv 3x3 8, conv 3x3 16
     * stride 2, dense 32, ReLU) on B training images; skipped where the dataset is not
     * installed */
    NevoDataset *ds = NULL;
    NevoError derr;
    if (nevo_dataset_load("fashion-mnist", B, 1, &ds, &derr) == NEVO_OK && ds->train.n < B) nevo_dataset_free(ds), ds = NULL;
    if (ds) {
        NevoEnvSpec fspec;
        nevo_dataset_env_spec(ds, &fspec);
        NevoPolicyConfig fc = {0};
        fc.n_conv = fc.n_conv_kernels = fc.n_conv_strides = 2;
        fc.conv_filters[0] = 8, fc.conv_kernels[0] = 3, fc.conv_strides[0] = 1;
        fc.conv_filters[1] = 16, fc.conv_kernels[1] = 3, fc.conv_strides[1] = 2;
        fc.n_hidden = 1, fc.hidden[0] = 32;
        snprintf(fc.activation, sizeof fc.activation, "relu");
        snprintf(fc.init, sizeof fc.init, "scaled");
        g = (GradBench){0};
        g.name = "Fashion net";
        st = nevo_policy_new(&fspec, &fc, 0, &g.p, err);
        if (st != NEVO_OK) {
            nevo_dataset_free(ds);
            return st;
        }
        g.obs = nevo_alloc_aligned(sizeof(float) * (size_t)B * g.p->obs_dim);
        memcpy(g.obs, ds->train.images, sizeof(float) * (size_t)B * g.p->obs_dim);
        nevo_dataset_free(ds);
        grad_bench_setup(&g, B);
        bench_case(o, lim, &g, emit, ctx);
        grad_bench_free(&g);
    }

    /* a 64-64 tanh MLP on 17 inputs and 6 outputs (HalfCheetah's sizes) */
    NevoEnvSpec spec = {0};
    spec.name = "mlp";
    spec.obs_rank = 1, spec.obs_shape[0] = spec.obs_dim = 17;
    spec.action_kind = NEVO_SPACE_BOX, spec.action_dim = 6;
    for (int j = 0; j < 6; j++) spec.action_low[j] = -1.0f, spec.action_high[j] = 1.0f;
    NevoPolicyConfig mc = {0};
    mc.n_hidden = 2, mc.hidden[0] = mc.hidden[1] = 64;
    snprintf(mc.activation, sizeof mc.activation, "tanh");
    snprintf(mc.init, sizeof mc.init, "scaled");
    g = (GradBench){0};
    g.name = "64-64 MLP";
    if ((st = nevo_policy_new(&spec, &mc, 0, &g.p, err)) != NEVO_OK) return st;
    g.obs = nevo_alloc_aligned(sizeof(float) * (size_t)B * 17);
    NevoRng rng;
    nevo_rng_init(&rng, 13, NEVO_RNG_USER, 0, 0, 0);
    nevo_rng_fill_normal(&rng, g.obs, (size_t)B * 17);
    grad_bench_setup(&g, B);
    bench_case(o, lim, &g, emit, ctx);
    grad_bench_free(&g);
    return NEVO_OK;
}
