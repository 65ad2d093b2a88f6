/* The gpu group of `nevo bench`: the CUDA device's own limits measured in the same run
 * (the FP32 FMA rate, the device-memory copy bandwidth, the host link's bandwidth each
 * way and as the GA's calls use it), then the CUDA backend's batched heterogeneous
 * forward on the networks the PyTorch and JAX figures were measured on:
 *   - the MinAtar net (conv 3x3x16, dense 1024 -> 128, 6 outputs) at P = 1024 networks
 *     of B = 1, 16 and 64 rows each, as network-steps/s and dense-equivalent FLOP/s
 *     against the FMA peak;
 *   - the 348-256-256-17 tanh MLP at P = 4096, B = 1, where the weights are streamed:
 *     weight bytes read per second against the copy bandwidth;
 *   - the MinAtar net's P networks as low-rank members (ranks 1 and 4) of one network
 *     through the factored forward, against that one network on the same rows; at
 *     B = 1 also rank-1 members of 20 bases, rows gathered by base (a GA's factored
 *     children), against built children.
 * Each shape twice: the kernels alone on inputs already on the device (device events),
 * and the whole call as the evaluator makes it (observations up, outputs back). Without
 * a CUDA=1 build or a device the group says so and emits nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nevo/env.h"
#include "nevo/params.h"
#include "nevo/rng.h"
#include "nn/backend_cuda.h"

#ifdef NEVO_CUDA

typedef struct GpuCase {
    const char *label, *env;
    int conv; /* the MinAtar net, else the MLP */
    int P, B;
    double torch_msteps; /* the PyTorch figure on an H100 (low end of its range), 0: none */
} GpuCase;

static NevoStatus case_policy(const GpuCase *c, NevoEnv **env, NevoPolicy **p, NevoError *err) {
    NevoPolicyConfig pc;
    memset(&pc, 0, sizeof pc);
    if (c->conv) {
        pc.n_conv = pc.n_conv_kernels = pc.n_conv_strides = 1;
        pc.conv_filters[0] = 16, pc.conv_kernels[0] = 3, pc.conv_strides[0] = 1;
        pc.n_hidden = 1, pc.hidden[0] = 128;
        strcpy(pc.activation, "relu");
    } else {
        pc.n_hidden = 2, pc.hidden[0] = pc.hidden[1] = 256;
        strcpy(pc.activation, "tanh");
    }
    strcpy(pc.init, "scaled");
    NevoStatus st = nevo_env_new(c->env, NULL, 0, env, err);
    if (st) return st;
    return nevo_policy_new(nevo_env_spec(*env), &pc, 0, p, err);
}

#define GA_PARENTS 20 /* configs/minatar_breakout_ga_gpu.json's truncation */

/* The factored forward of n rows of P members over `bases` networks (timed by
 * nevo_cuda_time_factored): its kernels against the bases alone on the same rows (or,
 * built_rate > 0, against built children at that many rows a second), its whole call,
 * and each kind's corrections alone. */
static void emit_factored(NevoBenchEmit emit, void *ctx, const GpuCase *c, const NevoPolicy *p, const float *params,
                          int bases, size_t stride, const int *base, int rank, const float *z, int P,
                          const int *which, const float *obs, int n, int reps, double built_rate) {
    double shared_s, fact_s, fcall_s, corr_s[2];
    nevo_cuda_time_factored(p, params, bases, stride, base, rank, z, P, which, obs, n, reps, &shared_s, &fact_s,
                            &fcall_s, corr_s);
    char what[48] = "";
    if (bases > 1) snprintf(what, sizeof what, " over %d bases", bases);
    NevoBenchResult r;
    for (int whole = 0; whole < 2; whole++) {
        nevo_bench_result_init(&r, "gpu", "Msteps/s");
        r.median = NAN;
        snprintf(r.name, sizeof r.name, "gpu %s P=%d B=%d, factored rank %d%s, %s", c->label, P, c->B, rank, what,
                 whole ? "whole call (obs up, outputs back)" : "kernels");
        r.value = n / (whole ? fcall_s : fact_s) * 1e-6;
        if (!whole && built_rate > 0) nevo_bench_result_limit(&r, built_rate * 1e-6, "built children, kernels");
        else if (!whole) nevo_bench_result_limit(&r, n / shared_s * 1e-6, "one shared network, kernels");
        snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"B\": %d, \"rank\": %d, \"bases\": %d, \"seconds\": %.6g, "
                 "\"bases_alone_seconds\": %.6g", P, c->B, rank, bases, whole ? fcall_s : fact_s, shared_s);
        emit(ctx, &r);
    }
    for (int kind = 0; kind < 2; kind++) { /* the corrections alone, a kind's layers */
        nevo_bench_result_init(&r, "gpu", "ns/row");
        r.median = NAN;
        snprintf(r.name, sizeof r.name, "gpu %s P=%d B=%d, factored rank %d%s, %s corrections", c->label, P, c->B,
                 rank, what, kind ? "dense" : "conv");
        r.value = corr_s[kind] / n * 1e9;
        snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"B\": %d, \"rank\": %d, \"seconds\": %.6g", P, c->B, rank,
                 corr_s[kind]);
        emit(ctx, &r);
    }
}

NevoStatus nevo_bench_gpu(const NevoBenchOptions *o, NevoBenchEmit emit, void *ctx, NevoError *err) {
    char name[96];
    int sms;
    size_t l2;
    if (!nevo_cuda_device(name, sizeof name, &sms, &l2)) {
        fprintf(stderr, "gpu: skipped (no CUDA device)\n");
        return NEVO_OK;
    }
    NevoBenchResult r;
    double peak = nevo_cuda_fma_peak(), bw = nevo_cuda_copy_bandwidth();
    nevo_bench_result_init(&r, "gpu", "GFLOP/s");
    r.median = NAN;
    snprintf(r.name, sizeof r.name, "gpu FP32 FMA peak, %s", name);
    r.value = peak * 1e-9;
    snprintf(r.extra, sizeof r.extra, "\"device\": \"%s\", \"multiprocessors\": %d, \"l2_bytes\": %zu", name, sms, l2);
    emit(ctx, &r);
    nevo_bench_result_init(&r, "gpu", "GB/s");
    r.median = NAN;
    snprintf(r.name, sizeof r.name, "gpu device-memory copy, 2 GiB, read + write");
    r.value = bw * 1e-9;
    emit(ctx, &r);
    /* the link: one large copy each way, then what the GA's calls queue (8 forward
     * threads, each a call's MinAtar observations: 1,024 rows of 400 floats); its
     * frames/s is the most observations of 1,600 bytes it carries */
    static const struct { size_t bytes; int streams, up; const char *what; } links[] = {
        {(size_t)256 << 20, 1, 1, "host-to-device copy, pinned, 256 MiB"},
        {(size_t)256 << 20, 1, 0, "device-to-host copy, pinned, 256 MiB"},
        {(size_t)1024 * 400 * sizeof(float), 8, 1, "host-to-device copies, pinned, 8 streams of 1.6 MB"},
    };
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) {
        double link = nevo_cuda_link_bandwidth(links[k].bytes, links[k].streams, links[k].up);
        nevo_bench_result_init(&r, "gpu", "GB/s");
        r.median = NAN;
        snprintf(r.name, sizeof r.name, "gpu %s", links[k].what);
        r.value = link * 1e-9;
        snprintf(r.extra, sizeof r.extra, "\"bytes\": %zu, \"streams\": %d, \"minatar_frames_per_s\": %.4g",
                 links[k].bytes, links[k].streams, link / (400 * sizeof(float)));
        emit(ctx, &r);
    }

    static const GpuCase cases[] = {
        {"MinAtar net", "minatar/breakout", 1, 1024, 1, 3.6},
        {"MinAtar net", "minatar/breakout", 1, 1024, 16, 5.1},
        {"MinAtar net", "minatar/breakout", 1, 1024, 64, 7.7},
        {"MLP 348-256-256-17", "mujoco/humanoid", 0, 4096, 1, 4.6},
    };
    int reps = o->quick ? 2 : 10;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const GpuCase *c = &cases[k];
        NevoEnv *env = NULL;
        NevoPolicy *p = NULL;
        NevoStatus st = case_policy(c, &env, &p, err);
        if (st) {
            nevo_env_free(env);
            return st;
        }
        int P = o->quick ? c->P / 8 : c->P, n = P * c->B;
        size_t stride = (p->nparams + 15) & ~(size_t)15;
        float *params = nevo_alloc_aligned(sizeof(float) * stride * (size_t)P);
        float *obs = nevo_alloc(sizeof(float) * (size_t)n * (size_t)p->obs_dim);
        int *which = nevo_alloc(sizeof(int) * (size_t)n);
        NevoRng rng;
        nevo_rng_init(&rng, 3, NEVO_RNG_USER, 0, 0, 0);
        nevo_rng_fill_normal(&rng, params, stride * (size_t)P);
        for (size_t i = 0; i < stride * (size_t)P; i++) params[i] *= 0.05f;
        /* MinAtar-like planes: 10% of cells set; else normals */
        for (size_t i = 0; i < (size_t)n * (size_t)p->obs_dim; i++)
            obs[i] = c->conv ? (nevo_rng_uniform(&rng) < 0.1 ? 1.0f : 0.0f) : (float)nevo_rng_normal(&rng);
        for (int i = 0; i < n; i++) which[i] = i / c->B; /* each network's rows together */
        double call_s, kern_s;
        nevo_cuda_time_forward(p, params, stride, P, which, obs, n, reps, &call_s, &kern_s);
        double flops = nevo_policy_flops(p), wbytes = (double)P * (double)p->nparams * sizeof(float);
        for (int whole = 0; whole < 2; whole++) {
            double t = whole ? call_s : kern_s;
            nevo_bench_result_init(&r, "gpu", "Msteps/s");
            r.median = NAN;
            snprintf(r.name, sizeof r.name, "gpu %s P=%d B=%d, %s", c->label, P, c->B,
                     whole ? "whole call (obs up, outputs back)" : "kernels");
            r.value = n / t * 1e-6;
            if (c->torch_msteps > 0 && !whole) nevo_bench_result_limit(&r, 5 * c->torch_msteps, "5x PyTorch (H100)");
            snprintf(r.extra, sizeof r.extra,
                     "\"P\": %d, \"B\": %d, \"seconds\": %.6g, \"gflops\": %.6g, \"fraction_of_fma_peak\": %.4g, "
                     "\"weight_gb_per_s\": %.6g, \"fraction_of_copy_bandwidth\": %.4g, \"pytorch_msteps\": %.3g",
                     P, c->B, t, n * flops / t * 1e-9, n * flops / t / peak, wbytes / t * 1e-9, wbytes / t / bw,
                     c->torch_msteps);
            emit(ctx, &r);
        }
        /* the MinAtar net's P networks as low-rank members of network 0 through the
         * factored forward, against network 0 alone on the same rows (EGGROLL's 0.91);
         * at B = 1 also rank-1 members of GA_PARENTS bases with the rows gathered by
         * base (ga.factored's calls), against built children: the B = 1 kernels above */
        if (c->conv)
            for (int rank = 1; rank <= 4; rank *= 4) {
                size_t len = nevo_lowrank_floats(p, rank);
                float *z = nevo_alloc(sizeof(float) * len * (size_t)P);
                nevo_rng_fill_normal(&rng, z, len * (size_t)P);
                emit_factored(emit, ctx, c, p, params, 1, stride, NULL, rank, z, P, which, obs, n, reps, 0);
                if (c->B == 1 && rank == 1 && P >= GA_PARENTS) {
                    int *base = nevo_alloc(sizeof(int) * (size_t)n);
                    for (int i = 0; i < n; i++) base[i] = (int)((long)i * GA_PARENTS / n);
                    emit_factored(emit, ctx, c, p, params, GA_PARENTS, stride, base, rank, z, P, which, obs, n, reps,
                                  n / kern_s);
                    free(base);
                }
                free(z);
            }
        free(params), free(obs), free(which);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
    return NEVO_OK;
}

#else

NevoStatus nevo_bench_gpu(const NevoBenchOptions *o, NevoBenchEmit emit, void *ctx, NevoError *err) {
    (void)o, (void)emit, (void)ctx, (void)err;
    fprintf(stderr, "gpu: skipped (built without CUDA; `make CUDA=1` builds the cuda backend)\n");
    return NEVO_OK;
}

#endif
