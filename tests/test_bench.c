/* Tests for the benchmarks (src/bench/): the kernels compute what they claim (so the
 * FLOPs and bytes they are credited with are real work), and the counts the reports
 * are built on follow their formulas. No timing is asserted: speeds depend on the
 * machine and on what else runs on it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench/bench.h"
#include "harness.h"
#include "nevo/env.h"
#include "nn/kernels.h"

static NevoBenchOptions quick_options(void) {
    NevoBenchOptions o;
    nevo_bench_options_default(&o, 1);
    o.min_time_s = 0.002;
    o.reps = 2;
    return o;
}

/* Chain j of every width starts at j and runs x <- m x + a; all values here are small
 * dyadic rationals, so float arithmetic is exact and the closed form is too. */
static double fma_closed_form(NevoBenchIsa isa, long iters, double m, double a) {
    int lanes = nevo_bench_fma_lanes(isa);
    int width = isa == NEVO_ISA_AVX512 ? 16 : isa == NEVO_ISA_AVX2 ? 8 : 1;
    double sum = 0.0;
    for (int j = 0; j < lanes / width; j++) {
        double x = j;
        for (long k = 0; k < iters; k++) x = m * x + a;
        sum += width * x;
    }
    return sum;
}

TEST(bench_fma_kernel_closed_form) {
    CHECK(nevo_bench_isa_supported(NEVO_ISA_SCALAR));
    CHECK(nevo_bench_isa_supported(nevo_bench_isa_best()));
    for (int isa = NEVO_ISA_SCALAR; isa <= NEVO_ISA_AVX512; isa++) {
        if (!nevo_bench_isa_supported((NevoBenchIsa)isa)) continue;
        NevoBenchIsa i = (NevoBenchIsa)isa;
        /* m = 1: x = j + iters * a */
        CHECK_NEAR(nevo_bench_fma_kernel(i, 1000, 1.0f, 0.5f), fma_closed_form(i, 1000, 1.0, 0.5), 0.0);
        /* m = 1/2, a = 1: x = 2 + (j - 2) / 8 after three steps */
        CHECK_NEAR(nevo_bench_fma_kernel(i, 3, 0.5f, 1.0f), fma_closed_form(i, 3, 0.5, 1.0), 0.0);
        CHECK_NEAR(nevo_bench_fma_kernel(i, 0, 0.5f, 1.0f), fma_closed_form(i, 0, 0.5, 1.0), 0.0);
    }
}

TEST(bench_memory_kernels) {
    size_t n = 128 * 40;
    float *a = aligned_alloc(64, n * sizeof(float));
    float *b = aligned_alloc(64, n * sizeof(float));
    float *c = aligned_alloc(64, n * sizeof(float));
    CHECK(a && b && c);
    for (size_t i = 0; i < n; i++) {
        b[i] = (float)(i % 7);
        c[i] = (float)(i % 5);
    }
    nevo_bench_triad(a, b, c, 0.5f, n);
    double want = 0.0;
    for (size_t i = 0; i < n; i++) {
        CHECK_NEAR(a[i], (double)(i % 7) + 0.5 * (double)(i % 5), 0.0);
        want += a[i];
    }
    /* every value is a multiple of 1/2 below 2^10: the sum is exact in any order */
    CHECK_NEAR(nevo_bench_read_sum(a, n), want, 0.0);
    free(a);
    free(b);
    free(c);
}

/* The streaming loop does its FMAs: rows times the sum of the weights (small
 * integers: exact in float in any order), every line read, the partial last line
 * excluded by the caller (n a multiple of 16). */
TEST(bench_stream_fma_kernel_sums) {
    if (!nevo_bench_isa_supported(NEVO_ISA_AVX512)) {
        float none[16] = {0};
        CHECK(isnan(nevo_bench_stream_fma_kernel(none, 16, 16)));
        return;
    }
    size_t n = 16 * 300; /* more lines than the prefetch distance */
    float *x = aligned_alloc(64, n * sizeof(float));
    CHECK(x != NULL);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += x[i] = (float)(i % 11);
    CHECK_NEAR(nevo_bench_stream_fma_kernel(x, n, 16), 16.0 * sum, 0.0);
    CHECK_NEAR(nevo_bench_stream_fma_kernel(x, n, 48), 48.0 * sum, 0.0);
    CHECK_NEAR(nevo_bench_stream_fma_kernel(x, 32, 16), 16.0 * (2 * 55 + 45), 0.0); /* 0-10, 0-10, 0-9 */
    free(x);
}

TEST(bench_peak_and_memory_positive) {
    NevoBenchOptions o = quick_options();
    NevoPool *pool = nevo_pool_new(2);
    NevoBenchLimits lim = {0};
    nevo_bench_peak(&o, pool, &lim, NULL, NULL);
    CHECK(lim.peak_1c > 0 && isfinite(lim.peak_1c));
    CHECK(lim.peak_all > 0 && isfinite(lim.peak_all));
    nevo_bench_memory(&o, pool, &lim, NULL, NULL);
    CHECK(lim.read_1c > 0 && lim.read_all > 0 && lim.triad_1c > 0 && lim.triad_all > 0);
    CHECK(lim.mem_bytes > 0);
    nevo_pool_free(pool);
}

TEST(bench_every_env_steps) {
    NevoBenchOptions o = quick_options();
    for (int i = 0; i < nevo_env_count(); i++) {
        const char *name = nevo_env_class_at(i)->spec.name;
        NevoBenchEnvResult r;
        NevoError err = {0};
        /* envs that cannot be built here (their own tests say why) are not this test's */
        NevoEnv *env = NULL;
        if (nevo_env_new(name, NULL, 0, &env, &err) != NEVO_OK) continue;
        nevo_env_free(env);
        CHECK_MSG(nevo_bench_env(&o, name, &r, &err) == NEVO_OK, "%s: %s", name, err.msg);
        CHECK_MSG(r.steps_per_s > 0 && r.steps > 0, "%s", name);
        CHECK_MSG(r.episodes >= 0, "%s", name);
    }
    NevoBenchEnvResult r;
    NevoError err = {0};
    CHECK(nevo_bench_env(&o, "NoSuchEnv-v0", &r, &err) == NEVO_ERR_NOTFOUND);
}

/* FLOPs per row of an MLP obs -> H -> H -> out, multiply-adds counted as 2. */
static double mlp_flops(int obs, int h, int out) { return 2.0 * (obs * h + h * h + h * out); }
static size_t mlp_params(int obs, int h, int out) {
    return (size_t)(obs * h + h) + (size_t)(h * h + h) + (size_t)(h * out + out);
}

TEST(bench_forward_counts) {
    NevoBenchOptions o = quick_options();
    const NevoBenchForwardCase cases[] = {{8, 1, 4, 2, 64}, {8, 4, 64, 8, 64}, {4, 2, 64, 8, 256}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const NevoBenchForwardCase *c = &cases[k];
        NevoBenchForwardResult r;
        NevoError err = {0};
        CHECK_MSG(nevo_bench_forward(&o, c, 100.0, &r, &err) == NEVO_OK, "%s", err.msg);
        CHECK_NEAR(r.flops_per_row, mlp_flops(c->obs_dim, c->hidden, c->n_out), 0.0);
        CHECK_EQ_INT(r.nparams, mlp_params(c->obs_dim, c->hidden, c->n_out));
        CHECK_EQ_INT(r.rows, c->P * c->B);
        CHECK_NEAR(r.weight_bytes, 4.0 * (double)r.nparams * c->P, 0.0);
        CHECK(r.gflops > 0 && isfinite(r.gflops));
        /* a repetition's rate averages its calls and the time between them, so the
         * fastest single call is at least as fast as the best repetition */
        CHECK_MSG(isfinite(r.gflops_fastest_call) && r.gflops_fastest_call >= r.gflops,
                  "fastest call %g GFLOP/s, best repetition %g", r.gflops_fastest_call, r.gflops);
        CHECK(r.bw_gbs > 0 && isfinite(r.bw_gbs));
        /* weights are consumed once per network per call: bytes/s = rows/s / B * bytes */
        CHECK_NEAR(r.weight_gbs, r.gflops / r.flops_per_row / c->B * 4.0 * (double)r.nparams, 1e-9 * r.weight_gbs);
        /* the OpenBLAS comparison, where the machine has it, computes the same outputs
         * (up to summation order); without it, it reports nothing */
        if (nevo_bench_blas()) {
            CHECK(r.blas_gflops > 0 && isfinite(r.blas_gflops));
            CHECK_MSG(r.blas_max_diff < 1e-5, "OpenBLAS outputs differ from nevo's by %g", r.blas_max_diff);
        } else {
            CHECK(isnan(r.blas_gflops) && isnan(r.blas_max_diff));
        }
    }
}

/* The MinAtar case's roofline counts: every conv weight and bias and every dense bias
 * is read, of the dense rows only some (the observations and ReLU outputs are mostly
 * zeros), so the bytes read lie strictly between those two bounds. With B rows per
 * network, the weights count once per network. */
TEST(bench_minatar_read_bytes) {
    NevoBenchOptions o = quick_options();
    NevoBenchForwardResult r;
    NevoError err = {0};
    enum { P = 4 };
    CHECK_MSG(nevo_bench_forward_minatar(&o, "minatar/breakout", P, 1, &r, &err) == NEVO_OK, "%s", err.msg);
    /* 10x10x4 -> conv 3x3, 16 filters -> 8x8x16 = 1024 -> 128 -> 6 actions */
    double conv = 3 * 3 * 4 * 16 + 16, dense_w = 1024 * 128 + 128 * 6, biases = 128 + 6;
    CHECK_NEAR(r.weight_bytes, 4.0 * P * (conv + dense_w + biases), 0.0);
    double floor = 4.0 * P * (conv + biases);
    CHECK_MSG(r.read_bytes > floor && r.read_bytes < r.weight_bytes, "read %g bytes, outside (%g, %g)", r.read_bytes,
              floor, r.weight_bytes);
    CHECK(r.input_density > 0.0 && r.input_density < 0.5);
    CHECK(r.bare_read_gbs > 0 && isfinite(r.bare_read_gbs));
    /* one row per network: the kernels compute the nonzero terms, a fraction of all */
    CHECK(r.nonzero_flops_per_row > 0.0 && r.nonzero_flops_per_row < r.flops_per_row);
    CHECK_NEAR(r.lanes_flops_per_row, r.nonzero_flops_per_row, 0.0);
    /* B rows per network: the same weights, B times the rows and the FLOPs per weight
     * byte; the roofline counts are for B = 1 only */
    NevoBenchForwardResult r16;
    CHECK_MSG(nevo_bench_forward_minatar(&o, "minatar/breakout", P, 16, &r16, &err) == NEVO_OK, "%s", err.msg);
    CHECK(r16.rows == 16 * P && r16.weight_bytes == r.weight_bytes && r16.flops_per_row == r.flops_per_row);
    CHECK(r16.read_bytes == 0.0 && r16.gflops > 0.0 && isfinite(r16.gflops));
    CHECK(isfinite(r16.gflops_fastest_call) && r16.gflops_fastest_call >= r16.gflops);
    /* 16 rows of a network: the lanes blocks compute a zero row's term wherever another
     * row of the block has that input nonzero (the portable set has no lanes) */
    CHECK(r16.nonzero_flops_per_row > 0.0 && r16.lanes_flops_per_row < r16.flops_per_row);
    if (nevo_kernels()->dense_lanes)
        CHECK_MSG(r16.lanes_flops_per_row > r16.nonzero_flops_per_row, "lanes %g, nonzero %g",
                  r16.lanes_flops_per_row, r16.nonzero_flops_per_row);
    else
        CHECK_NEAR(r16.lanes_flops_per_row, r16.nonzero_flops_per_row, 0.0);
    /* the streaming loop's rate is measured at 16 rows where the CPU has AVX-512 */
    CHECK(isnan(r.stream_fma_gbs));
    if (nevo_bench_isa_supported(NEVO_ISA_AVX512))
        CHECK(r16.stream_fma_gbs > 0.0 && isfinite(r16.stream_fma_gbs));
    else
        CHECK(isnan(r16.stream_fma_gbs));
    CHECK_NEAR(r16.weight_gbs, r16.gflops * 1e9 / 16 / r16.flops_per_row * r16.weight_bytes / P * 1e-9, 1e-9 * r16.weight_gbs);
}

/* The FMA counts behind the MinAtar rows, on a known answer. Filter 0 of the conv has
 * every weight 1, filter 1 every weight -1 (the ReLU zeroes it) and the others 0, with
 * zero biases, so after the ReLU the big dense layer's nonzero inputs are filter 0 at
 * the windows that hold a set pixel. That layer's weights are 0 and its biases 1, so
 * the 128 hidden units are 1 in every row. A row's only pixel at (0, 9) lies in 1
 * output window, one at (5, 8) in 3 x 2 of them; the conv computes each window's
 * nonzero input for its 16 filters, the big layer each nonzero input for its 128
 * outputs. */
TEST(bench_count_flops_known_answer) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new("minatar/breakout", NULL, 0, &env, &err) == NEVO_OK, "%s", err.msg);
    NevoPolicyConfig pc = {0};
    pc.n_conv = 1, pc.conv_filters[0] = 16, pc.conv_kernels[0] = 3, pc.conv_strides[0] = 1;
    pc.n_hidden = 1, pc.hidden[0] = 128;
    snprintf(pc.activation, sizeof pc.activation, "relu");
    snprintf(pc.init, sizeof pc.init, "scaled");
    NevoPolicy *p = NULL;
    CHECK_MSG(nevo_policy_new(nevo_env_spec(env), &pc, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    const NevoLayer *conv = &p->layers[0], *big = &p->layers[1];
    CHECK(conv->kind == NEVO_LAYER_CONV && conv->out_c == 16 && big->in_dim == 1024 && big->out_dim == 128);
    float *theta = calloc(p->nparams, sizeof(float));
    for (int k = 0; k < 3 * 3 * 4; k++) { /* weight (ky, kx, c, f) at k 16 + f */
        theta[conv->w_off + (size_t)k * 16 + 0] = 1.0f;
        theta[conv->w_off + (size_t)k * 16 + 1] = -1.0f;
    }
    for (int j = 0; j < 128; j++) theta[big->b_off + j] = 1.0f;
    enum { ROWS = 3 * NEVO_LANES, ODIM = 10 * 10 * 4 };
    CHECK_EQ_INT(p->obs_dim, ODIM);
    float *obs = calloc((size_t)ROWS * ODIM, sizeof(float));
    const size_t A = (0 * 10 + 9) * 4 + 3, B = (5 * 10 + 8) * 4 + 2; /* pixel, channel */
    obs[0 * ODIM + A] = 1.0f;
    obs[1 * ODIM + B] = 1.0f;
    obs[(size_t)NEVO_LANES * ODIM + A] = 1.0f; /* the second block's first row */
    /* the other rows: no pixel set */
    const double out = 128.0 * p->n_out; /* the output layer's terms, every row */
    double nonzero, lanes;
    /* fewer rows than a block: every row through the row kernels */
    nevo_bench_count_flops(p, theta, obs, 3, &nonzero, &lanes);
    CHECK_NEAR(nonzero, 2.0 * ((1 + 6) * 16 + (1 + 6) * 128 + 3 * out), 0.0);
    CHECK_NEAR(lanes, nonzero, 0.0);
    /* one block: its 7 window terms and its 7 big-layer inputs for all 16 rows */
    nevo_bench_count_flops(p, theta, obs, NEVO_LANES, &nonzero, &lanes);
    CHECK_NEAR(nonzero, 2.0 * ((1 + 6) * 16 + (1 + 6) * 128 + NEVO_LANES * out), 0.0);
    CHECK_NEAR(lanes, 2.0 * NEVO_LANES * (7 * 16 + 7 * 128 + out), 0.0);
    /* a block and a row after it (pixel A), which goes through the row kernels */
    nevo_bench_count_flops(p, theta, obs, NEVO_LANES + 1, &nonzero, &lanes);
    CHECK_NEAR(nonzero, 2.0 * ((1 + 6 + 1) * 16 + (1 + 6 + 1) * 128 + (NEVO_LANES + 1) * out), 0.0);
    CHECK_NEAR(lanes, 2.0 * (NEVO_LANES * (7 * 16 + 7 * 128 + out) + (16 + 128 + out)), 0.0);
    /* three blocks: the second block has 1 window term and 1 input, the third none */
    double nz1;
    nevo_bench_count_flops(p, theta, obs, ROWS, &nz1, &lanes);
    CHECK_NEAR(nz1, 2.0 * ((1 + 6 + 1) * 16 + (1 + 6 + 1) * 128 + ROWS * out), 0.0);
    CHECK_NEAR(lanes, 2.0 * (NEVO_LANES * (7 + 1) * (16 + 128) + ROWS * out), 0.0);
    /* the dense-equivalent count holds every term: conv 8 x 8 windows of 3 x 3 x 4 */
    CHECK_NEAR(nevo_policy_flops(p), 2.0 * (64 * 36 * 16 + 1024 * 128 + out), 0.0);
    free(obs);
    free(theta);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* The MinAtar net as a worker's slot runs it: one network, the steps' rows one call
 * each, the same network (and FLOP count per row) as the population case. */
TEST(bench_minatar_episode) {
    NevoBenchOptions o = quick_options();
    NevoBenchForwardResult e, r;
    NevoError err = {0};
    CHECK_MSG(nevo_bench_forward_minatar_episode(&o, "minatar/breakout", 30, &e, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_bench_forward_minatar(&o, "minatar/breakout", 1, 1, &r, &err) == NEVO_OK, "%s", err.msg);
    double conv = 3 * 3 * 4 * 16 + 16, dense_w = 1024 * 128 + 128 * 6, biases = 128 + 6;
    CHECK_NEAR(e.weight_bytes, 4.0 * (conv + dense_w + biases), 0.0);
    CHECK(e.rows == 30 && e.nparams == r.nparams && e.flops_per_row == r.flops_per_row);
    CHECK(e.gflops > 0.0 && isfinite(e.gflops) && e.gflops_median > 0.0 && e.gflops_median <= e.gflops);
    CHECK(isnan(e.gflops_fastest_call) && isnan(e.bw_gbs));
    CHECK(e.input_density > 0.0 && e.input_density < 0.5);
    CHECK(e.nonzero_flops_per_row > 0.0 && e.nonzero_flops_per_row < e.flops_per_row &&
          e.lanes_flops_per_row == e.nonzero_flops_per_row);
    CHECK_NEAR(e.weight_gbs, e.gflops / e.flops_per_row * e.weight_bytes, 1e-9 * e.weight_gbs);
    CHECK(nevo_bench_forward_minatar_episode(&o, "minatar/nope", 30, &e, &err) != NEVO_OK);
}

TEST(bench_ga_same_work_any_threads) {
    NevoBenchOptions o = quick_options();
    NevoBenchGAResult g1, g2;
    NevoError err = {0};
    CHECK_MSG(nevo_bench_ga(&o, 1, 2, &g1, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_bench_ga(&o, 2, 2, &g2, &err) == NEVO_OK, "%s", err.msg);
    CHECK(g1.frames > 0);
    /* results (and so frames) do not depend on the thread count */
    CHECK_EQ_INT(g1.frames, g2.frames);
    CHECK(g1.frames_per_s > 0 && g2.frames_per_s > 0);
}

/* nevo_bench_train_set: runs on 1 and 2 threads and a pipelined one do the same work,
 * and after warm_generations they time the generations that follow them: a warmed-up
 * run's frames are those of generations [warm, warm + gens) of a run from scratch. */
TEST(bench_train_set_times_the_generations_after_the_warm_up) {
    NevoBenchOptions o = quick_options();
    static const char *json = "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 3, \"population\": 24,"
                              " \"policy\": {\"hidden\": [8]}, \"ga\": {\"truncation\": 5}}";
    const NevoBenchTrainRun runs[3] = {{1, 1}, {2, 1}, {2, 2}};
    NevoBenchTrainResult warm[3], first3, first5, first2;
    NevoError err = {0};
    CHECK_MSG(nevo_bench_train_set(&o, json, runs, 3, 3, 2, warm, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_bench_train(&o, json, 1, 1, 0, 3, &first3, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_bench_train(&o, json, 2, 1, 0, 5, &first5, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_bench_train(&o, json, 1, 1, 0, 2, &first2, &err) == NEVO_OK, "%s", err.msg);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(warm[i].threads, runs[i].threads);
        CHECK_EQ_INT(warm[i].pipeline, runs[i].pipeline);
        CHECK_EQ_INT(warm[i].warm_generations, 3);
        CHECK_EQ_INT(warm[i].generations, 2);
        CHECK(warm[i].frames_per_s > 0.0 && warm[i].seconds > 0.0);
        CHECK_EQ_INT(warm[i].frames, first5.frames - first3.frames);
    }
    /* the check can tell: the first two generations play a different number of frames */
    CHECK(first2.frames != warm[0].frames);
}

/* The same with ES normalising its observations (the policy's statistics come from the
 * algorithm's state, so each run must start from a fresh policy's and a warmed-up one
 * from the saved state's), over repetitions that take turns: every run and repetition
 * plays the frames `nevo train` plays in the same generations. */
TEST(bench_train_set_es_with_obs_norm_and_repetitions) {
    NevoBenchOptions o;
    nevo_bench_options_default(&o, 0);
    o.reps = 2;
    static const char *json = "{\"env\": \"CartPole-v1\", \"algo\": \"es\", \"seed\": 2, \"population\": 20,"
                              " \"policy\": {\"hidden\": [8], \"init\": \"normc\"},"
                              " \"es\": {\"sigma\": 0.05, \"lr\": 0.03, \"obs_norm\": true, \"obs_norm_prob\": 0.5,"
                              " \"center_episodes\": 2}}";
    const NevoBenchTrainRun runs[2] = {{1, 1}, {2, 1}};
    NevoBenchTrainResult scratch[2], warm[2];
    NevoError err = {0};
    CHECK_MSG(nevo_bench_train_set(&o, json, runs, 2, 0, 2, scratch, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_bench_train_set(&o, json, runs, 2, 2, 2, warm, &err) == NEVO_OK, "%s", err.msg);
    /* the frames `nevo train` plays in its first 2 and 4 generations */
    char path[1024], out[4096];
    snprintf(path, sizeof path, "%s/es.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(json, f);
    fclose(f);
    int rc = test_run(out, sizeof out, "%s train %s generations=4 eval_episodes=1 --out %s/run --quiet",
                      test_nevo_bin(), path, test_tmpdir());
    CHECK_MSG(rc == 0, "nevo train exited %d:\n%s", rc, out);
    snprintf(path, sizeof path, "%s/run/metrics.jsonl", test_tmpdir());
    char *metrics = test_read_file(path, NULL);
    CHECK(metrics != NULL);
    long long first2 = -1, first4 = -1;
    const char *g1 = strstr(metrics, "{\"generation\": 1, \"frames\": "), *g3 = strstr(metrics, "{\"generation\": 3, \"frames\": ");
    CHECK(g1 && sscanf(g1, "{\"generation\": 1, \"frames\": %lld", &first2) == 1);
    CHECK(g3 && sscanf(g3, "{\"generation\": 3, \"frames\": %lld", &first4) == 1);
    free(metrics);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(scratch[i].frames, first2);
        CHECK_EQ_INT(warm[i].frames, first4 - first2);
        CHECK(scratch[i].seconds > 0.0 && warm[i].seconds > 0.0);
    }
    CHECK(first2 != warm[0].frames);
}

TEST(bench_groups_and_cli) {
    CHECK(nevo_bench_group_bit("peak") == NEVO_BENCH_PEAK);
    CHECK(nevo_bench_group_bit("ga") == NEVO_BENCH_GA);
    CHECK(nevo_bench_group_bit("gpu") == NEVO_BENCH_GPU);
    CHECK(nevo_bench_group_bit("tpu") == 0);
    char out[8192];
    int rc = test_run(out, sizeof out, "%s bench --quick --json --only peak", test_nevo_bin());
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    /* the machine line, one line per SIMD width this CPU has, one for all cores */
    int lines = 0, isas = 0;
    for (char *p = out; *p; p++) lines += *p == '\n';
    for (int isa = NEVO_ISA_SCALAR; isa <= NEVO_ISA_AVX512; isa++) isas += nevo_bench_isa_supported((NevoBenchIsa)isa);
    CHECK_EQ_INT(lines, 1 + isas + 1);
    CHECK(strstr(out, "\"group\": \"machine\"") != NULL);
    CHECK(strstr(out, "\"group\": \"peak\"") != NULL);
    CHECK(strstr(out, "nan") == NULL && strstr(out, "inf") == NULL);
    rc = test_run(out, sizeof out, "%s bench --only nope", test_nevo_bin());
    CHECK_EQ_INT(rc, 2);
}

/* The ga group's training rows as `nevo bench --json` prints them on 2 threads: for
 * each Breakout config the 1- and 2-thread rows (and the GA's pipelined ones) played
 * the same frames, each 2-thread row is compared with twice the 1-thread rate and each
 * pipelined one with the fused 2-thread rate, and the busy shares are percentages. */
static json_t *ga_row(json_t *const *rows, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(json_string_value(json_object_get(rows[i], "name")), name) == 0) return rows[i];
    test_fail(__FILE__, __LINE__, "no row named '%s'", name);
}

static double num(json_t *row, const char *key) { return json_number_value(json_object_get(row, key)); }

TEST(bench_ga_group_rows) {
    static char out[1 << 16];
    int rc = test_run(out, sizeof out, "%s bench --quick --json --only ga --threads 2", test_nevo_bin());
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    json_t *rows[64]; /* one object per line (JSON has no nan or inf: a line with one fails) */
    int n = 0;
    for (char *line = strtok(out, "\n"); line && n < 64; line = strtok(NULL, "\n")) {
        json_error_t je;
        rows[n] = json_loads(line, 0, &je);
        CHECK_MSG(rows[n] != NULL, "not JSON (%s): %s", je.text, line);
        n++;
    }
    static const char *const configs[3] = {"ga minatar/breakout", "es minatar/breakout", "ga minatar/breakout"};
    static const char *const suffix[3] = {"", "", ", from generation 2"};
    char name[256];
    for (int c = 0; c < 3; c++) {
        snprintf(name, sizeof name, "%s, 1 thread%s", configs[c], suffix[c]);
        json_t *one = ga_row(rows, n, name);
        snprintf(name, sizeof name, "%s, 2 threads%s", configs[c], suffix[c]);
        json_t *two = ga_row(rows, n, name);
        CHECK(num(one, "frames") > 0 && num(one, "frames") == num(two, "frames"));
        CHECK_NEAR(num(two, "limit"), 2.0 * num(one, "value"), 1e-4 * num(two, "limit"));
        CHECK_NEAR(num(two, "ratio"), num(two, "value") / num(two, "limit"), 1e-3);
        for (int d = 2; c == 0 && d <= 4; d *= 2) {
            snprintf(name, sizeof name, "%s, 2 threads, pipeline %d", configs[c], d);
            json_t *pipe = ga_row(rows, n, name);
            CHECK(num(pipe, "frames") == num(two, "frames"));
            CHECK_NEAR(num(pipe, "limit"), num(two, "value"), 1e-4 * num(pipe, "limit"));
        }
        for (int t = 1; t <= 2; t++) {
            snprintf(name, sizeof name, "%s, %d thread%s%s: inference + env", configs[c], t, t > 1 ? "s" : "",
                     suffix[c]);
            double busy = num(ga_row(rows, n, name), "value");
            snprintf(name, sizeof name, "%s, %d thread%s%s: + building networks", configs[c], t, t > 1 ? "s" : "",
                     suffix[c]);
            double built = num(ga_row(rows, n, name), "value");
            CHECK_MSG(busy > 0.0 && busy <= built && built <= 100.0, "%s: %g then %g", name, busy, built);
        }
    }
    for (int i = 0; i < n; i++) json_decref(rows[i]);
}

/* The mujoco group: for every MuJoCo env a bare-loop row, an env row compared with it
 * and a 2-thread row compared with twice the 1-thread rate, all positive and finite;
 * the bare loop adds mj_rnePostConstraint exactly for the robots that read contact
 * forces, and it simulates the very states the env did (every replayed episode ends
 * where the env's did, bit for bit). */
typedef struct MjRows {
    int bare, env, env2, rne;
    double last_bare, last_env;
    char bad[256];
} MjRows;

static void collect_mujoco(void *vctx, const NevoBenchResult *r) {
    MjRows *c = vctx;
    if (c->bad[0]) return;
    if (strcmp(r->group, "mujoco") != 0 || !(r->value > 0 && isfinite(r->value)) ||
        strcmp(r->unit, "ksteps/s") != 0 || !strstr(r->extra, "\"env\": \"mujoco/")) {
        snprintf(c->bad, sizeof c->bad, "row '%s' (%s): %g %s", r->name, r->group, r->value, r->unit);
        return;
    }
    if (strstr(r->extra, "\"loop\": \"bare\"")) {
        c->bare++;
        c->last_bare = r->value;
        int rne = strstr(r->extra, "\"rne_post\": true") != NULL;
        int wants = strstr(r->extra, "mujoco/ant\"") || strstr(r->extra, "mujoco/humanoid\"") ||
                    strstr(r->extra, "mujoco/humanoid_trap\"");
        c->rne += rne;
        if (rne != wants) snprintf(c->bad, sizeof c->bad, "%s: rne_post %d", r->name, rne);
        if (!strstr(r->extra, "\"replay_mismatches\": 0,"))
            snprintf(c->bad, sizeof c->bad, "%s: the bare loop did not replay the env's episodes", r->name);
    } else if (strstr(r->extra, "\"threads\": 2")) {
        c->env2++;
        if (!strstr(r->extra, "\"scaling_efficiency\"") || fabs(r->limit - 2 * c->last_env) > 1e-9 * r->limit ||
            fabs(r->ratio - r->value / r->limit) > 1e-12)
            snprintf(c->bad, sizeof c->bad, "%s: limit %g ratio %g", r->name, r->limit, r->ratio);
    } else {
        c->env++;
        c->last_env = r->value;
        if (!strstr(r->extra, "\"env_over_bare\"") || !strstr(r->extra, "\"reset_us\"") ||
            r->limit != c->last_bare || fabs(r->ratio - r->value / r->limit) > 1e-12)
            snprintf(c->bad, sizeof c->bad, "%s: limit %g (bare %g) ratio %g", r->name, r->limit, c->last_bare,
                     r->ratio);
    }
}

TEST(bench_mujoco_group) {
    CHECK(nevo_bench_group_bit("mujoco") == NEVO_BENCH_MUJOCO);
    CHECK(NEVO_BENCH_ALL & NEVO_BENCH_MUJOCO);
    NevoBenchOptions o = quick_options();
    o.min_time_s = 0.001;
    o.reps = 1;
    o.threads = 2;
    int n_mujoco = 0;
    for (int i = 0; i < nevo_env_count(); i++) n_mujoco += nevo_bench_is_mujoco(nevo_env_class_at(i)->spec.name);
    CHECK(n_mujoco >= 8);
    MjRows rows = {0};
    NevoError err = {0};
    CHECK_MSG(nevo_bench_run(&o, NEVO_BENCH_MUJOCO, collect_mujoco, &rows, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(!rows.bad[0], "%s", rows.bad);
    CHECK_EQ_INT(rows.bare, n_mujoco);
    CHECK_EQ_INT(rows.env, n_mujoco);
    CHECK_EQ_INT(rows.env2, n_mujoco);
    CHECK_EQ_INT(rows.rne, 3);

    /* one env directly, long enough for many episodes: the counts behind the rows */
    o.min_time_s = 0.01;
    o.threads = 1;
    NevoBenchMujocoResult r;
    CHECK_MSG(nevo_bench_mujoco(&o, "mujoco/hopper", &r, &err) == NEVO_OK, "%s", err.msg);
    CHECK_EQ_INT(r.frame_skip, 4);
    CHECK(r.rne_post == 0);
    CHECK(r.episode_length >= 1 && r.episode_length < 1000); /* random hoppers fall */
    CHECK(r.env_reset_us > 0 && r.bare_reset_us > 0 && r.rne_us > 0);
    CHECK(r.threads2 == 0); /* one thread asked for: no scaling row */
    /* the bare loop replayed the env's episodes state for state (hopper's random-action
     * episodes last ~20 steps, so both loops finish many) */
    CHECK(r.env_episodes > 0 && r.bare_episodes > 0);
    CHECK_EQ_INT(r.replay_mismatches, 0);
    CHECK(nevo_bench_mujoco(&o, "CartPole-v1", &r, &err) == NEVO_ERR_INVALID);
}

/* The backward group's rows: for each case the forward, the forward with a tape and the
 * backward against the peak, the backward against the forward, and per layer its
 * forward against the peak and its backward against that forward. */
typedef struct GradRows {
    int n;
    char names[48][128];
    double value[48], limit[48];
    int bad;
} GradRows;

static void collect_grad(void *ctx, const NevoBenchResult *r) {
    GradRows *g = ctx;
    if (g->n == 48 || strcmp(r->group, "backward") != 0 || !(r->value > 0) || !isfinite(r->limit)) {
        g->bad = 1;
        return;
    }
    snprintf(g->names[g->n], sizeof g->names[0], "%s", r->name);
    g->value[g->n] = r->value, g->limit[g->n] = r->limit;
    g->n++;
}

static int grad_row(const GradRows *g, const char *name) {
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->names[i], name) == 0) return i;
    test_fail(__FILE__, __LINE__, "no row named '%s'", name);
}

TEST(bench_backward_group_rows) {
    CHECK(nevo_bench_group_bit("backward") == NEVO_BENCH_BACKWARD);
    NevoBenchOptions o = quick_options();
    NevoBenchLimits lim = {0};
    lim.isa = nevo_bench_isa_best();
    lim.peak_1c = 1000.0; /* a stand-in: the rows only divide by it */
    GradRows g = {0};
    NevoError err = {0};
    CHECK_MSG(nevo_bench_backward(&o, &lim, collect_grad, &g, &err) == NEVO_OK, "%s", err.msg);
    CHECK(!g.bad);
    /* two nets of three layers each, and the Fashion-MNIST net (four) where its dataset is installed */
    int fashion = g.n == 2 * (4 + 2 * 3) + 4 + 2 * 4;
    CHECK_MSG(g.n == 2 * (4 + 2 * 3) || fashion, "%d rows", g.n);
    if (fashion) {
        int fwd = grad_row(&g, "Fashion net B=64, forward");
        CHECK(g.limit[grad_row(&g, "Fashion net B=64, backward against forward")] == g.value[fwd]);
        int lf = grad_row(&g, "Fashion net B=64, conv 26x26x8 k3 s2 f16, forward");
        CHECK(g.limit[grad_row(&g, "Fashion net B=64, conv 26x26x8 k3 s2 f16, backward against forward")] ==
              g.value[lf]);
    }
    static const char *const nets[2] = {"MinAtar net B=64", "64-64 MLP B=64"};
    static const char *const layers[2][3] = {{"conv 10x10x4 k3 f16", "dense 1024x128", "dense 128x6"},
                                             {"dense 17x64", "dense 64x64", "dense 64x6"}};
    char name[160];
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "%s, forward", nets[k]);
        int fwd = grad_row(&g, name);
        CHECK(g.limit[fwd] == lim.peak_1c);
        snprintf(name, sizeof name, "%s, backward against forward", nets[k]);
        CHECK(g.limit[grad_row(&g, name)] == g.value[fwd]);
        for (int l = 0; l < 3; l++) {
            snprintf(name, sizeof name, "%s, %s, forward", nets[k], layers[k][l]);
            int lf = grad_row(&g, name);
            snprintf(name, sizeof name, "%s, %s, backward%s against forward", nets[k], layers[k][l],
                     l == 0 ? " (no dX)" : "");
            CHECK(g.limit[grad_row(&g, name)] == g.value[lf]);
        }
    }
}

/* The actor-learner group: both runtimes alone, both algorithms' async and sync end to
 * end (each a ratio to its own runtime alone, which it cannot pass by much), and both
 * learners alone; every rate positive. */
typedef struct ActorRows {
    int runtime, e2e, learner;
    char bad[512];
} ActorRows;

static void collect_actor(void *vctx, const NevoBenchResult *r) {
    ActorRows *c = vctx;
    if (c->bad[0]) return;
    if (strcmp(r->group, "actor") != 0 || !(r->value > 0 && isfinite(r->value))) {
        snprintf(c->bad, sizeof c->bad, "row '%s' (%s): %g %s", r->name, r->group, r->value, r->unit);
        return;
    }
    if (strstr(r->name, "runtime alone")) {
        c->runtime++;
    } else if (strstr(r->name, "end to end")) {
        c->e2e++;
        if (!(r->limit > 0 && r->ratio > 0 && r->ratio < 1.5))
            snprintf(c->bad, sizeof c->bad, "%s: ratio %g to %g", r->name, r->ratio, r->limit);
    } else if (strstr(r->name, "learner, 1 thread") && strcmp(r->unit, "ksamples/s") == 0) {
        c->learner++;
    } else {
        snprintf(c->bad, sizeof c->bad, "an unexpected row '%s'", r->name);
    }
}

TEST(bench_actor_group_rows) {
    CHECK(nevo_bench_group_bit("actor") == NEVO_BENCH_ACTOR);
    NevoBenchOptions o = quick_options();
    o.min_time_s = 0.001;
    o.reps = 1;
    o.threads = 2;
    ActorRows rows = {0};
    NevoError err = {0};
    CHECK_MSG(nevo_bench_run(&o, NEVO_BENCH_ACTOR, collect_actor, &rows, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(!rows.bad[0], "%s", rows.bad);
    CHECK_EQ_INT(rows.runtime, 2);
    CHECK_EQ_INT(rows.e2e, 4);
    CHECK_EQ_INT(rows.learner, 2);
}
