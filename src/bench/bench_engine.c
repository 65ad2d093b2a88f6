/* Benchmarks of the engine as training uses it: whole generations of a config (with
 * where the time goes: batched inference, env stepping, and everything outside the
 * evaluator — materialising children or perturbations, selection, novelty), the
 * MinAtar network's forward pass on real MinAtar observations, and k-NN novelty over a
 * large archive. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nevo/algo.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/eval.h"
#include "nevo/io.h"
#include "nevo/noise.h"
#include "nevo/params.h"
#include "nevo/novelty.h"
#include "nevo/policy.h"
#include "nevo/rng.h"
#include "nevo/train.h"
#include "nn/kernels.h"

/* The runs share one policy, whose observation statistics (ES with obs_norm) an algo
 * sets as it runs or loads a state: each run starts from the fresh policy's (mean 0,
 * std 1), as a run of its own would. */
static void policy_forget_obs_stats(NevoPolicy *p) {
    for (int i = 0; i < p->obs_dim; i++) p->obs_mean[i] = 0.0f, p->obs_std[i] = 1.0f;
}

/* A pool per distinct thread count of the runs: pools[i] serves runs[i] (shared). */
static void train_pools(const NevoBenchTrainRun *runs, int n, NevoPool **pools) {
    for (int i = 0; i < n; i++) {
        pools[i] = NULL;
        for (int j = 0; j < i && !pools[i]; j++)
            if (runs[j].threads == runs[i].threads) pools[i] = pools[j];
        if (!pools[i]) pools[i] = nevo_pool_new(runs[i].threads);
    }
}

NevoStatus nevo_bench_train_set(const NevoBenchOptions *o, const char *config_json, const NevoBenchTrainRun *runs,
                                int n, int warm_generations, int generations, NevoBenchTrainResult *out,
                                NevoError *err) {
    NEVO_ASSERT(n >= 1 && n <= NEVO_BENCH_TRAIN_RUNS);
    memset(out, 0, sizeof *out * (size_t)n);
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    NevoStatus st = nevo_config_apply_json(&cfg, config_json, "bench config", err);
    if (st != NEVO_OK) return st;
    cfg.generations = warm_generations + generations;
    if ((st = nevo_config_check(&cfg, err)) != NEVO_OK) return st;
    NevoEnv *env = NULL;
    NevoPolicy *policy = NULL;
    NevoPool *pools[NEVO_BENCH_TRAIN_RUNS] = {NULL};
    NevoNoise *noise = NULL;
    NevoBuf warm = {0};
    if ((st = nevo_env_new(cfg.env, cfg.env_options, cfg.n_env_options, &env, err)) != NEVO_OK) return st;
    nevo_env_set_max_steps(env, cfg.max_episode_steps);
    if ((st = nevo_policy_new(nevo_env_spec(env), &cfg.policy, nevo_algo_obs_norm(&cfg), &policy, err)) != NEVO_OK)
        goto done;
    train_pools(runs, n, pools);
    int widest = 0; /* the run with the most threads builds the noise table and warms up */
    for (int i = 1; i < n; i++)
        if (runs[i].threads > runs[widest].threads) widest = i;
    /* the shared noise table, as nevo_train_run sizes it; built once, outside the timing */
    size_t table = cfg.noise_table_floats > 0 ? (size_t)cfg.noise_table_floats : nevo_noise_auto_size(policy->nparams);
    noise = nevo_noise_new(table, pools[widest]);
    if (warm_generations > 0) { /* once, untimed; each timed run starts from its state */
        NevoEvaluator *ev = nevo_evaluator_new(env, policy, pools[widest], 0);
        NevoAlgo *algo = NULL;
        cfg.threads = runs[widest].threads;
        policy_forget_obs_stats(policy);
        st = nevo_algo_new(&cfg, env, policy, noise, pools[widest], &algo, err);
        for (int g = 0; g < warm_generations && st == NEVO_OK; g++) {
            NevoGenStats gs;
            st = nevo_train_generation(algo, ev, &gs, err);
        }
        if (st == NEVO_OK) nevo_algo_save(algo, &warm);
        nevo_algo_free(algo);
        nevo_evaluator_free(ev);
        if (st != NEVO_OK) goto done;
    }
    /* the runs take turns within each repetition, so a slow phase of a shared host
     * reaches them alike rather than one run's every repetition */
    for (int i = 0; i < n; i++) {
        out[i].threads = runs[i].threads;
        out[i].pipeline = runs[i].pipeline;
        out[i].generations = generations;
        out[i].warm_generations = warm_generations;
    }
    int reps = o->quick || o->reps < 1 ? 1 : o->reps;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < n; i++) {
            NevoBenchTrainResult *res = &out[i];
            NevoEvaluator *ev = nevo_evaluator_new(env, policy, pools[i], 0);
            nevo_evaluator_set_pipeline(ev, runs[i].pipeline);
            NevoAlgo *algo = NULL;
            cfg.threads = runs[i].threads;
            policy_forget_obs_stats(policy);
            if ((st = nevo_algo_new(&cfg, env, policy, noise, pools[i], &algo, err)) != NEVO_OK) {
                nevo_evaluator_free(ev);
                goto done;
            }
            if (warm_generations > 0) {
                NevoReader rd = nevo_reader(warm.data, warm.len);
                st = nevo_algo_load(algo, &rd, err);
                NEVO_ASSERT(st != NEVO_OK || nevo_reader_ok(&rd, true)); /* this process wrote it */
            }
            nevo_evaluator_set_timing(ev, 1);
            long long frames = 0;
            double c0 = nevo_bench_cpu_s(runs[i].threads), t0 = nevo_bench_wall_s();
            for (int g = 0; g < generations && st == NEVO_OK; g++) {
                NevoGenStats gs;
                st = nevo_train_generation(algo, ev, &gs, err);
                frames += gs.frames;
            }
            double dt = nevo_bench_wall_s() - t0, dc = nevo_bench_cpu_s(runs[i].threads) - c0;
            NevoEvalTimes et;
            nevo_evaluator_times(ev, &et);
            nevo_algo_free(algo);
            nevo_evaluator_free(ev);
            if (st != NEVO_OK) goto done;
            /* every run and repetition does the same work: the same seed and state, and
             * results that do not depend on threads or pipeline depth */
            NEVO_ASSERT((r == 0 && i == 0) || frames == out[0].frames);
            res->frames = frames;
            if (r == 0 || dt < res->seconds) {
                res->seconds = dt;
                res->cpu_share = dc / (runs[i].threads * dt);
                res->eval_s = et.wall_s;
                res->forward_s = et.forward_s;
                res->env_s = et.env_s;
                res->build_s = et.build_s;
            }
        }
    }
    for (int i = 0; i < n; i++) out[i].frames_per_s = (double)out[i].frames / out[i].seconds;
done:
    nevo_buf_free(&warm);
    nevo_noise_free(noise);
    for (int i = 0; i < n; i++) {
        int shared = 0;
        for (int j = 0; j < i; j++) shared |= pools[j] == pools[i];
        if (!shared) nevo_pool_free(pools[i]);
    }
    nevo_policy_free(policy);
    nevo_env_free(env);
    return st;
}

NevoStatus nevo_bench_train(const NevoBenchOptions *o, const char *config_json, int threads, int pipeline,
                            int warm_generations, int generations, NevoBenchTrainResult *out, NevoError *err) {
    NevoBenchTrainRun run = {threads, pipeline};
    return nevo_bench_train_set(o, config_json, &run, 1, warm_generations, generations, out, err);
}

/* ---- the MinAtar network on MinAtar observations -------------------------------- */

/* The weight bytes the sparse forward reads, as segments in the order it reads them. */
typedef struct Segment {
    const float *p;
    size_t n; /* floats */
} Segment;

typedef struct RowsCtx {
    const Segment *seg;
    size_t nseg;
    double bytes; /* the floats of every segment x 4 */
} RowsCtx;

/* The same accesses and nothing else: one load per 64-byte line of each segment, with
 * the lines of the segment NEVO_PREFETCH_ROWS ahead prefetched, as the dense kernel
 * does. Its rate is what this access pattern allows. */
static double rows_work(void *vctx, long iters) {
    RowsCtx *c = vctx;
    float s = 0.0f;
    for (long it = 0; it < iters; it++) {
        for (size_t i = 0; i < c->nseg; i++) {
            if (i + NEVO_PREFETCH_ROWS < c->nseg) {
                const Segment *f = &c->seg[i + NEVO_PREFETCH_ROWS];
                const char *a = (const char *)((uintptr_t)f->p & ~(uintptr_t)63), *e = (const char *)(f->p + f->n);
                for (; a < e; a += 64) __builtin_prefetch(a, 0, 3);
            }
            const char *a = (const char *)((uintptr_t)c->seg[i].p & ~(uintptr_t)63);
            const char *e = (const char *)(c->seg[i].p + c->seg[i].n);
            for (; a < e; a += 64) s += *(const volatile float *)a;
        }
    }
    volatile float sink = s;
    (void)sink;
    return c->bytes * (double)iters;
}

/* game's environment and P MinAtar networks (conv 3x3x16, ReLU, dense 128, ReLU) */
typedef struct MinatarNets {
    NevoEnv *env;
    NevoPolicy *p;
    NevoPool *pool;
    NevoNoise *noise;
    float *params; /* P x nparams, network j initialised from index j */
} MinatarNets;

static void minatar_nets_free(MinatarNets *m) {
    free(m->params);
    nevo_noise_free(m->noise);
    nevo_pool_free(m->pool);
    nevo_policy_free(m->p);
    nevo_env_free(m->env);
    memset(m, 0, sizeof *m);
}

static NevoStatus minatar_nets(const char *game, int P, MinatarNets *m, NevoError *err) {
    memset(m, 0, sizeof *m);
    NevoStatus st = nevo_env_new(game, NULL, 0, &m->env, err);
    if (st != NEVO_OK) return st;
    NevoPolicyConfig pc = {0};
    pc.n_conv = 1;
    pc.conv_filters[0] = 16;
    pc.conv_kernels[0] = 3;
    pc.conv_strides[0] = 1;
    pc.n_hidden = 1;
    pc.hidden[0] = 128;
    snprintf(pc.activation, sizeof pc.activation, "relu");
    snprintf(pc.init, sizeof pc.init, "scaled");
    if ((st = nevo_policy_new(nevo_env_spec(m->env), &pc, 0, &m->p, err)) != NEVO_OK) {
        minatar_nets_free(m);
        return st;
    }
    size_t np = m->p->nparams;
    m->params = nevo_alloc_aligned(sizeof(float) * np * (size_t)P);
    m->pool = nevo_pool_new(1);
    m->noise = nevo_noise_new(nevo_noise_auto_size(np), m->pool);
    for (int j = 0; j < P; j++) nevo_policy_init_params(m->p, m->noise, 5, 0, (uint32_t)j, m->params + (size_t)j * np);
    return NEVO_OK;
}

/* One row x through layer L of network theta and its activation, into y: the forward
 * replayed layer by layer, where a count needs the inputs each layer sees. */
static void layer_forward_row(const NevoLayer *L, const float *theta, const float *x, float *y) {
    if (L->kind == NEVO_LAYER_CONV)
        nevo_kernels()->conv(L, theta + L->w_off, theta + L->b_off, x, y);
    else
        nevo_kernels()->dense(theta + L->w_off, theta + L->b_off, x, 0, 1, L->in_dim, L->out_dim, y, 0);
    nevo_kernel_activate(L->act, y, L->out_dim);
}

/* One layer's terms for the m rows at x[r] (row stride xs): per row those whose input
 * is nonzero (*nonzero), and those of a block running the m rows side by side, which
 * skips an input only where every row has it zero (*side). */
static void layer_terms(const NevoLayer *L, const float *x, size_t xs, int m, double *nonzero, double *side) {
    if (L->kind == NEVO_LAYER_CONV) {
        for (int oy = 0; oy < L->out_h; oy++)
            for (int ox = 0; ox < L->out_w; ox++)
                for (int ky = 0; ky < L->kernel; ky++)
                    for (int kx = 0; kx < L->kernel; kx++)
                        for (int c = 0; c < L->in_c; c++) {
                            size_t k = ((size_t)(oy * L->stride + ky) * L->in_w + (size_t)(ox * L->stride + kx)) *
                                           L->in_c + c;
                            int n = 0;
                            for (int r = 0; r < m; r++) n += x[r * xs + k] != 0.0f;
                            *nonzero += (double)n * L->out_c;
                            *side += n > 0 ? (double)m * L->out_c : 0.0;
                        }
    } else {
        for (int k = 0; k < L->in_dim; k++) {
            int n = 0;
            for (int r = 0; r < m; r++) n += x[r * xs + k] != 0.0f;
            *nonzero += (double)n * L->out_dim;
            *side += n > 0 ? (double)m * L->out_dim : 0.0;
        }
    }
}

void nevo_bench_count_flops(const NevoPolicy *p, const float *theta, const float *obs, int rows, double *nonzero,
                            double *lanes) {
    NEVO_ASSERT(!p->obs_norm); /* the first layer sees the observations as they are */
    size_t W = (size_t)p->max_width, odim = (size_t)p->obs_dim;
    float *a = nevo_alloc(sizeof(float) * W * NEVO_LANES), *b = nevo_alloc(sizeof(float) * W * NEVO_LANES);
    double nz = 0.0, ln = 0.0;
    for (int r0 = 0; r0 < rows;) {
        /* as nevo_policy_forward takes them: blocks of NEVO_LANES rows while whole
         * blocks are left, then the rest as rows */
        int left = rows - r0, blocks = left >= NEVO_LANES;
        int m = blocks ? NEVO_LANES : left;
        const float *x = obs + (size_t)r0 * odim;
        size_t xs = odim;
        double bnz = 0.0, side = 0.0;
        for (int l = 0; l < p->n_layers; l++) {
            const NevoLayer *L = &p->layers[l];
            layer_terms(L, x, xs, m, &bnz, &side);
            for (int r = 0; r < m; r++) layer_forward_row(L, theta, x + r * xs, b + r * W);
            float *t = a;
            a = b, b = t;
            x = a, xs = W;
        }
        nz += bnz;
        /* rows short of a whole block go through the row kernels */
        ln += blocks ? side : bnz;
        r0 += m;
    }
    free(a), free(b);
    *nonzero = 2.0 * nz;
    *lanes = 2.0 * ln;
}

/* rows observations, each from random play at a random depth of its own episode (the
 * planes' real sparsity, what the kernels see in training); returns the nonzeros */
static long long minatar_obs(const NevoEnv *env, int rows, float *obs) {
    const NevoEnvSpec *spec = nevo_env_spec(env);
    int odim = spec->obs_dim;
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    NevoRng rng;
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    long long nonzero = 0;
    for (int j = 0; j < rows; j++) {
        float *x = obs + (size_t)j * odim;
        nevo_env_forget(env, inst);
        nevo_env_reset(env, inst, nevo_rng_derive(7, NEVO_RNG_ENV_SEED, 0, (uint32_t)j, 0), x);
        int depth = (int)nevo_rng_below(&rng, 60);
        NevoStepResult sr = {0};
        for (int t = 0; t < depth && !sr.terminated; t++) {
            float a = (float)nevo_rng_below(&rng, (uint32_t)spec->n_actions);
            nevo_env_step(env, inst, &a, x, &sr);
        }
        for (int k = 0; k < odim; k++) nonzero += x[k] != 0.0f;
    }
    nevo_env_instance_free(env, inst);
    free(inst);
    return nonzero;
}

NevoStatus nevo_bench_forward_minatar(const NevoBenchOptions *o, const char *game, int P, int B,
                                      NevoBenchForwardResult *out, NevoError *err) {
    memset(out, 0, sizeof *out);
    NEVO_ASSERT(P >= 1 && B >= 1);
    MinatarNets m;
    NevoStatus st = minatar_nets(game, P, &m, err);
    if (st != NEVO_OK) return st;
    NevoEnv *env = m.env;
    const NevoPolicy *p = m.p;
    const float *params = m.params;
    const NevoEnvSpec *spec = nevo_env_spec(env);
    size_t np = p->nparams;
    /* B observations per network, each from random play at a random depth of its own
     * episode: the planes' real sparsity is what the kernels see in training */
    int odim = spec->obs_dim, rows = P * B;
    float *obs = nevo_alloc_aligned(sizeof(float) * (size_t)rows * odim);
    long long nonzero = minatar_obs(env, rows, obs);
    /* the FMAs behind the dense-equivalent count: those of nonzero inputs, and those
     * the kernels compute (in the lanes layout's blocks of 16 rows of one network,
     * where the kernel set has that layout) */
    double nonzero_flops = 0.0, lanes_flops = 0.0;
    for (int j = 0; j < P; j++) {
        double nz, ln;
        nevo_bench_count_flops(p, params + (size_t)j * np, obs + (size_t)j * B * odim, B, &nz, &ln);
        nonzero_flops += nz;
        lanes_flops += nevo_kernels()->dense_lanes ? ln : nz;
    }
    /* at one row per network (the GA's case), the weight bytes the sparse kernels must
     * read: each layer run one network at a time through the kernels, counting the rows
     * of the nonzero inputs of each dense layer (the roofline of this path is these
     * bytes at the memory bandwidth) */
    double read_bytes = 0.0;
    if (B == 1) {
        size_t nseg = 0, per_net = 0; /* at most a segment per input and one for the biases */
        for (int l = 0; l < p->n_layers; l++) per_net += (size_t)p->layers[l].in_dim + 1;
        Segment *seg = nevo_alloc(sizeof(Segment) * per_net * (size_t)P);
        float *a = nevo_alloc(sizeof(float) * (size_t)p->max_width), *b = nevo_alloc(sizeof(float) * (size_t)p->max_width);
        for (int j = 0; j < P; j++) {
            const float *theta = params + (size_t)j * np, *x = obs + (size_t)j * odim;
            for (int l = 0; l < p->n_layers; l++) {
                const NevoLayer *L = &p->layers[l];
                if (L->kind == NEVO_LAYER_CONV) {
                    seg[nseg++] = (Segment){theta + L->w_off, L->b_off - L->w_off + (size_t)L->out_c};
                } else {
                    seg[nseg++] = (Segment){theta + L->b_off, (size_t)L->out_dim};
                    for (int k = 0; k < L->in_dim; k++)
                        if (x[k] != 0.0f) seg[nseg++] = (Segment){theta + L->w_off + (size_t)k * L->out_dim, (size_t)L->out_dim};
                }
                layer_forward_row(L, theta, x, b);
                float *t = a;
                a = b, b = t;
                x = a;
            }
        }
        free(a), free(b);
        for (size_t i = 0; i < nseg; i++) read_bytes += 4.0 * (double)seg[i].n;
        RowsCtx rc = {seg, nseg, read_bytes};
        out->bare_read_gbs = nevo_bench_measure(o, rows_work, &rc, 1).best * 1e-9;
        free(seg);
    }
    int *net = nevo_alloc(sizeof(int) * (size_t)rows);
    for (int i = 0; i < rows; i++) net[i] = i / B;
    float *outb = nevo_alloc_aligned(sizeof(float) * (size_t)rows * p->n_out);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, rows));
    NevoBenchForwardCtx c = {p, params, net, obs, rows, outb, scratch, 0.0};
    NevoBenchTiming t = nevo_bench_measure(o, nevo_bench_forward_work, &c, 1);
    out->nparams = np;
    out->flops_per_row = nevo_policy_flops(p);
    out->rows = rows;
    out->weight_bytes = 4.0 * (double)np * P;
    out->gflops = t.best * out->flops_per_row * 1e-9;
    out->gflops_median = t.median * out->flops_per_row * 1e-9;
    out->gflops_fastest_call = (double)rows * out->flops_per_row / c.fastest_s * 1e-9;
    out->cpu_share = t.cpu_share;
    out->weight_gbs = t.best / B * 4.0 * (double)np * 1e-9; /* once per network */
    out->bw_gbs = nevo_bench_read_bandwidth(o, params, np * (size_t)P);
    out->stream_fma_gbs = B % 16 == 0 ? nevo_bench_stream_fma(o, params, np * (size_t)P / 16 * 16, B) : NAN;
    out->tanh_share = NAN;
    out->input_density = (double)nonzero / ((double)rows * odim);
    out->read_bytes = read_bytes;
    out->nonzero_flops_per_row = nonzero_flops / rows;
    out->lanes_flops_per_row = lanes_flops / rows;
    free(net);
    free(obs);
    free(outb);
    free(scratch);
    minatar_nets_free(&m);
    return NEVO_OK;
}

typedef struct EpisodeCtx {
    const NevoPolicy *p;
    const float *params, *obs;
    int steps;
    float *out, *scratch;
} EpisodeCtx;

/* One network, one row a call, the episode's observations in order. */
static double episode_work(void *vctx, long iters) {
    EpisodeCtx *c = vctx;
    const int net = 0;
    for (long i = 0; i < iters; i++)
        for (int t = 0; t < c->steps; t++)
            nevo_policy_forward(c->p, c->params, c->p->nparams, &net, c->obs + (size_t)t * c->p->obs_dim, 1, c->out,
                                c->scratch);
    return (double)c->steps * (double)iters;
}

NevoStatus nevo_bench_forward_minatar_episode(const NevoBenchOptions *o, const char *game, int steps,
                                              NevoBenchForwardResult *out, NevoError *err) {
    memset(out, 0, sizeof *out);
    NEVO_ASSERT(steps >= 1);
    MinatarNets m;
    NevoStatus st = minatar_nets(game, 1, &m, err);
    if (st != NEVO_OK) return st;
    NevoEnv *env = m.env;
    const NevoPolicy *p = m.p;
    const NevoEnvSpec *spec = nevo_env_spec(env);
    size_t np = p->nparams;
    /* random play from a reset, a new episode where one ends */
    int odim = spec->obs_dim;
    float *obs = nevo_alloc_aligned(sizeof(float) * (size_t)steps * odim);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    nevo_env_reset(env, inst, nevo_rng_derive(11, NEVO_RNG_ENV_SEED, 0, 0, 0), obs);
    long long nonzero = 0;
    for (int t = 0; t < steps; t++) {
        float *x = obs + (size_t)t * odim;
        if (t > 0) {
            float a = (float)nevo_rng_below(&rng, (uint32_t)spec->n_actions);
            NevoStepResult sr = {0};
            nevo_env_step(env, inst, &a, x, &sr);
            if (sr.terminated || sr.truncated)
                nevo_env_reset(env, inst, nevo_rng_derive(11, NEVO_RNG_ENV_SEED, 0, (uint32_t)t, 0), x);
        }
        for (int k = 0; k < odim; k++) nonzero += x[k] != 0.0f;
    }
    nevo_env_instance_free(env, inst);
    free(inst);
    /* one row a call: every row through the row kernels, none in a lanes block */
    double nonzero_flops = 0.0;
    for (int t = 0; t < steps; t++) {
        double nz, ln;
        nevo_bench_count_flops(p, m.params, obs + (size_t)t * odim, 1, &nz, &ln);
        nonzero_flops += nz;
    }
    float *outb = nevo_alloc_aligned(sizeof(float) * (size_t)p->n_out);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, 1));
    EpisodeCtx c = {p, m.params, obs, steps, outb, scratch};
    NevoBenchTiming t = nevo_bench_measure(o, episode_work, &c, 1);
    out->nparams = np;
    out->flops_per_row = nevo_policy_flops(p);
    out->rows = steps;
    out->weight_bytes = 4.0 * (double)np;
    out->gflops = t.best * out->flops_per_row * 1e-9;
    out->gflops_median = t.median * out->flops_per_row * 1e-9;
    out->gflops_fastest_call = NAN; /* the calls differ: each observation is its own work */
    out->cpu_share = t.cpu_share;
    out->weight_gbs = t.best * 4.0 * (double)np * 1e-9;
    out->bw_gbs = NAN;
    out->stream_fma_gbs = NAN;
    out->tanh_share = NAN;
    out->input_density = (double)nonzero / ((double)steps * odim);
    out->nonzero_flops_per_row = out->lanes_flops_per_row = nonzero_flops / steps;
    free(obs);
    free(outb);
    free(scratch);
    minatar_nets_free(&m);
    return NEVO_OK;
}

/* ---- k-NN novelty ---------------------------------------------------------------- */

typedef struct KnnCtx {
    const NevoArchive *a;
    const float *q;
    int n_q, k;
    double *nov;
} KnnCtx;

static double knn_work(void *vctx, long iters) {
    KnnCtx *c = vctx;
    for (long i = 0; i < iters; i++) nevo_novelty(c->a, NULL, 0, c->q, NULL, c->n_q, c->k, NULL, c->nov);
    return (double)iters;
}

NevoStatus nevo_bench_novelty(const NevoBenchOptions *o, int archive, int queries, int dim,
                              NevoBenchNoveltyResult *out, NevoError *err) {
    memset(out, 0, sizeof *out);
    NevoArchive a;
    nevo_archive_init(&a, dim);
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    float bc[NEVO_ENV_MAX_BC];
    for (int i = 0; i < archive; i++) {
        for (int d = 0; d < dim; d++) bc[d] = (float)(200.0 * nevo_rng_uniform(&rng));
        nevo_archive_add(&a, bc);
    }
    float *q = nevo_alloc(sizeof(float) * (size_t)queries * dim);
    for (int i = 0; i < queries * dim; i++) q[i] = (float)(200.0 * nevo_rng_uniform(&rng));
    double *nov = nevo_alloc(sizeof(double) * (size_t)queries);
    KnnCtx c = {&a, q, queries, 10, nov};
    NevoBenchTiming t = nevo_bench_measure(o, knn_work, &c, 1);
    out->seconds_per_call = 1.0 / t.best;
    out->distances_per_s = t.best * (double)archive * queries;
    out->cpu_share = t.cpu_share;
    free(q);
    free(nov);
    nevo_archive_free(&a);
    (void)err;
    return NEVO_OK;
}

/* ---- the factored low-rank forward (EGGROLL) against one shared network ------------ */

enum { FACTORED_SLOTS = 16 };

typedef struct FactoredCtx {
    const NevoPolicy *p;
    const float *params; /* the P members built, or the base (row 0) */
    const float *factors;
    size_t fstride;
    int mode;            /* 0: one shared network; 1: factored members; 2: built members */
    int rank, P;
    const float *obs;
    float *out, *scratch;
} FactoredCtx;

/* The P rows (row j member j's) in calls of FACTORED_SLOTS, as an evaluator's batch of
 * slots runs them: each call one network (shared), or its members (factored, built). */
static double factored_work(void *vctx, long iters) {
    FactoredCtx *c = vctx;
    int which[FACTORED_SLOTS], base[FACTORED_SLOTS] = {0}, zero[FACTORED_SLOTS] = {0};
    size_t np = c->p->nparams, odim = (size_t)c->p->obs_dim;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < c->P; i += FACTORED_SLOTS) {
            int n = c->P - i < FACTORED_SLOTS ? c->P - i : FACTORED_SLOTS;
            for (int r = 0; r < n; r++) which[r] = i + r;
            const float *x = c->obs + (size_t)i * odim;
            float *y = c->out + (size_t)i * c->p->n_out;
            if (c->mode == 1)
                nevo_policy_forward_factored(c->p, c->params, np, base, c->factors, c->fstride, which, c->rank, x, n, y,
                                             c->scratch);
            else
                nevo_policy_forward(c->p, c->params, np, c->mode == 0 ? zero : which, x, n, y, c->scratch);
        }
    return (double)c->P * (double)iters;
}

NevoStatus nevo_bench_forward_factored(const NevoBenchOptions *o, const char *game, int P, int rank,
                                       NevoBenchFactoredResult *out, NevoError *err) {
    memset(out, 0, sizeof *out);
    MinatarNets m;
    NevoStatus st = minatar_nets(game, P, &m, err);
    if (st != NEVO_OK) return st;
    const NevoPolicy *p = m.p;
    size_t np = p->nparams, len = nevo_lowrank_floats(p, rank), ff = nevo_factor_row_floats(p, rank);
    float *obs = nevo_alloc_aligned(sizeof(float) * (size_t)P * p->obs_dim);
    minatar_obs(m.env, P, obs);
    /* member j: network 0 perturbed by compact noise j at sigma 0.02 (ES's MinAtar
     * config), factored and built (the same networks) */
    float *factors = nevo_alloc_aligned(sizeof(float) * ff * (size_t)P), *z = nevo_alloc(sizeof(float) * len);
    float *built = nevo_alloc_aligned(sizeof(float) * np * (size_t)P), *eps = nevo_alloc(sizeof(float) * np);
    NevoRng rng;
    nevo_rng_init(&rng, 9, NEVO_RNG_USER, 0, 0, 0);
    for (int j = 0; j < P; j++) {
        nevo_rng_fill_normal(&rng, z, len);
        nevo_factor_row(p, rank, z, 0.02f, factors + (size_t)j * ff);
        nevo_lowrank_expand(p, rank, z, eps, 0, np);
        nevo_perturb_rows(built + (size_t)j * np, NULL, m.params, 0.02f, eps, np, 0);
    }
    float *outb = nevo_alloc_aligned(sizeof(float) * (size_t)P * p->n_out);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, FACTORED_SLOTS));
    FactoredCtx c = {p, m.params, factors, ff, 0, rank, P, obs, outb, scratch};
    out->shared_rows_s = nevo_bench_measure(o, factored_work, &c, 1).best;
    c.mode = 1;
    out->factored_rows_s = nevo_bench_measure(o, factored_work, &c, 1).best;
    c.mode = 2;
    c.params = built;
    out->built_rows_s = nevo_bench_measure(o, factored_work, &c, 1).best;
    out->factor_bytes = 4.0 * (double)ff;
    out->net_bytes = 4.0 * (double)np;
    free(obs), free(factors), free(z), free(built), free(eps), free(outb), free(scratch);
    minatar_nets_free(&m);
    return NEVO_OK;
}
