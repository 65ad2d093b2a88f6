/* Tests for policies (src/nn/policy.c, src/nn/kernels.c, include/nevo/policy.h).
 *
 * The reference is a naive double-precision forward pass written here straight from the
 * layout documented in policy.h (dense W (in, out) row-major then b; conv W (k, k, in_c,
 * out_c) then b, "valid" padding, HWC images), with its own parameter offsets, one
 * network at a time. The batched heterogeneous forward must match it to float rounding,
 * and each row must be bit-identical however it is batched. Initialisation and the
 * observation statistics are checked against their definitions (initial weights: slices
 * of the shared noise table, include/nevo/noise.h). The kernel implementations
 * (generic, AVX2, AVX-512, src/nn/kernels.h) are checked against each other bit for bit
 * and against a double-precision sum, on inputs full of exact zeros (which they skip). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "nevo/lstm.h"
#include "nevo/noise.h"
#include "nevo/policy.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

/* --- helpers ----------------------------------------------------------------------- */

static NevoEnv *open_env(const char *name) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new(name, NULL, 0, &env, &err) == NEVO_OK, "%s: %s", name, err.msg);
    return env;
}

static NevoPolicyConfig mlp_config(const char *act, int n_hidden, const int *hidden) {
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_hidden = n_hidden;
    for (int i = 0; i < n_hidden; i++) c.hidden[i] = hidden[i];
    strcpy(c.activation, act);
    strcpy(c.init, "scaled");
    return c;
}

static NevoPolicy *new_policy(const NevoEnvSpec *spec, const NevoPolicyConfig *cfg, int obs_norm) {
    NevoPolicy *p = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_policy_new(spec, cfg, obs_norm, &p, &err) == NEVO_OK, "policy: %s", err.msg);
    return p;
}

/* An image spec built by hand (rows, cols, channels). */
static NevoEnvSpec image_spec(int h, int w, int c, int n_actions) {
    NevoEnvSpec s;
    memset(&s, 0, sizeof s);
    s.name = "Image-test";
    s.obs_rank = 3;
    s.obs_shape[0] = h, s.obs_shape[1] = w, s.obs_shape[2] = c;
    s.obs_dim = h * w * c;
    s.action_kind = NEVO_SPACE_DISCRETE;
    s.n_actions = n_actions;
    s.action_dim = 1;
    return s;
}

/* A box-action vector spec built by hand. */
static NevoEnvSpec box_spec(int obs_dim, int action_dim, const float *low, const float *high) {
    NevoEnvSpec s;
    memset(&s, 0, sizeof s);
    s.name = "Box-test";
    s.obs_rank = 1;
    s.obs_shape[0] = obs_dim;
    s.obs_dim = obs_dim;
    s.action_kind = NEVO_SPACE_BOX;
    s.action_dim = action_dim;
    for (int i = 0; i < action_dim; i++) s.action_low[i] = low[i], s.action_high[i] = high[i];
    return s;
}

/* A small shared noise table (2^18 floats) for nevo_policy_init_params; freed with
 * free_noise. */
static NevoPool *noise_pool;
static NevoNoise *small_noise(void) {
    noise_pool = nevo_pool_new(1);
    return nevo_noise_new((size_t)1 << 18, noise_pool);
}
static void free_noise(NevoNoise *noise) {
    nevo_noise_free(noise);
    nevo_pool_free(noise_pool);
    noise_pool = NULL;
}

static void fill_gauss(NevoRng *rng, float *x, size_t n, float scale) {
    nevo_rng_fill_normal(rng, x, n);
    for (size_t i = 0; i < n; i++) x[i] *= scale;
}

/* --- the naive reference ------------------------------------------------------------ */

#define REF_MAX 8192

static double ref_act(int relu, double v) { return relu ? (v > 0.0 ? v : 0.0) : tanh(v); }

/* One network on one input x (already normalised), double precision; returns the number
 * of parameters the layout uses (theta may be NULL to count only). scale, if not NULL,
 * gets for each output the sum of the magnitudes of its terms, |b| + sum |x W|: the
 * float forward's rounding error grows with that, not with the output, which
 * cancellation can leave much smaller. */
static size_t ref_forward(const NevoEnvSpec *spec, const NevoPolicyConfig *cfg,
                          const float *theta, const double *x_in, double *out, double *scale) {
    static double bufa[REF_MAX], bufb[REF_MAX];
    double *x = bufa, *y = bufb;
    int relu = strcmp(cfg->activation, "relu") == 0;
    int dim = spec->obs_dim;
    if (x_in) memcpy(x, x_in, sizeof(double) * (size_t)dim);
    size_t off = 0;
    int h = spec->obs_shape[0], w = spec->obs_shape[1], c = spec->obs_shape[2];
    for (int l = 0; l < cfg->n_conv; l++) {
        int k = cfg->conv_kernels[l], s = cfg->conv_strides[l], f = cfg->conv_filters[l];
        int oh = (h - k) / s + 1, ow = (w - k) / s + 1;
        const float *W = theta ? theta + off : NULL; /* (k, k, c, f) */
        off += (size_t)k * k * c * f;
        const float *b = theta ? theta + off : NULL; /* (f) */
        off += (size_t)f;
        if (theta) {
            CHECK(oh * ow * f <= REF_MAX);
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++)
                    for (int fo = 0; fo < f; fo++) {
                        double sum = b[fo];
                        for (int ky = 0; ky < k; ky++)
                            for (int kx = 0; kx < k; kx++)
                                for (int ci = 0; ci < c; ci++) {
                                    int iy = oy * s + ky, ix = ox * s + kx;
                                    sum += x[((size_t)iy * w + ix) * c + ci] *
                                           (double)W[(((size_t)ky * k + kx) * c + ci) * f + fo];
                                }
                        y[((size_t)oy * ow + ox) * f + fo] = ref_act(relu, sum);
                    }
            double *t = x;
            x = y, y = t;
        }
        h = oh, w = ow, c = f, dim = oh * ow * f;
    }
    int n_out = spec->action_kind == NEVO_SPACE_DISCRETE ? spec->n_actions : spec->action_dim;
    for (int l = 0; l <= cfg->n_hidden; l++) {
        int last = l == cfg->n_hidden;
        int units = last ? n_out : cfg->hidden[l];
        const float *W = theta ? theta + off : NULL; /* (dim, units) */
        off += (size_t)dim * units;
        const float *b = theta ? theta + off : NULL; /* (units) */
        off += (size_t)units;
        if (theta) {
            for (int j = 0; j < units; j++) {
                double sum = b[j], mag = fabs((double)b[j]);
                for (int i = 0; i < dim; i++) {
                    sum += x[i] * (double)W[(size_t)i * units + j];
                    mag += fabs(x[i] * (double)W[(size_t)i * units + j]);
                }
                y[j] = last ? sum : ref_act(relu, sum);
                if (last && scale) scale[j] = mag;
            }
            double *t = x;
            x = y, y = t;
        }
        dim = units;
    }
    if (theta) memcpy(out, x, sizeof(double) * (size_t)n_out);
    return off;
}

/* --- forward against the reference -------------------------------------------------- */

enum { P_NETS = 7, N_SHUFFLED = 23, PAD = 5 };

/* Runs of rows sharing a network, for the lanes layout (kernels.h: blocks of NEVO_LANES
 * rows): one exact block, blocks with rows left over (among them a tail of 15 after one
 * block, whose normalised observations lie in the first scratch buffer from slot 16,
 * next to the slots its layers write), a lone row, three blocks with rows left over,
 * and four blocks. */
static const int lane_runs[] = {NEVO_LANES,         2 * NEVO_LANES + 3, 1, NEVO_LANES + 1, 2, 2 * NEVO_LANES - 1,
                                3 * NEVO_LANES + 5, 4 * NEVO_LANES};
enum { N_LANE_RUNS = sizeof lane_runs / sizeof lane_runs[0] };

/* the rows of all of lane_runs */
static int grouped_rows(void) {
    int n = 0;
    for (int r = 0; r < N_LANE_RUNS; r++) n += lane_runs[r];
    return n;
}

/* Runs the batched forward over P_NETS random networks and compares with the reference;
 * then checks rows are bit-identical alone, in the batch and in a reversed batch. The
 * rows are N_SHUFFLED in shuffled order, or with grouped the rows of lane_runs, where
 * whole blocks of rows of one network take the lanes layout if the kernel set has it
 * (and a row alone never does). obs_norm turns on observation
 * normalisation with random mean/std. */
static void check_forward_rows(const NevoEnvSpec *spec, const NevoPolicyConfig *cfg, int obs_norm,
                               uint64_t seed, const char *what, int grouped) {
    const int N_ROWS = grouped ? grouped_rows() : N_SHUFFLED;
    NevoPolicy *p = new_policy(spec, cfg, obs_norm);
    size_t np = ref_forward(spec, cfg, NULL, NULL, NULL, NULL);
    CHECK_MSG(p->nparams == np, "%s: nparams %zu, layout gives %zu", what, p->nparams, np);
    int n_out = p->n_out;
    size_t stride = np + PAD;
    float *params = malloc(sizeof(float) * stride * P_NETS);
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_USER, 0, 0, 0);
    for (int j = 0; j < P_NETS; j++) {
        fill_gauss(&rng, params + j * stride, np, 0.4f);
        /* the gap between rows is poison: reading it would show as NaN */
        for (int k = 0; k < PAD; k++) params[j * stride + np + k] = NAN;
    }
    int odim = spec->obs_dim;
    float *obs = malloc(sizeof(float) * (size_t)odim * N_ROWS);
    fill_gauss(&rng, obs, (size_t)odim * N_ROWS, 1.5f);
    if (obs_norm) {
        for (int i = 0; i < odim; i++) {
            p->obs_mean[i] = (float)(nevo_rng_uniform(&rng) - 0.5);
            p->obs_std[i] = (float)(0.1 + nevo_rng_uniform(&rng)); /* small std: some clip */
        }
    }
    int *net = malloc(sizeof(int) * (size_t)N_ROWS), *rnet = malloc(sizeof(int) * (size_t)N_ROWS);
    if (grouped) {
        for (int r = 0, i = 0; r < N_LANE_RUNS; r++)
            for (int q = 0; q < lane_runs[r]; q++) net[i++] = r % P_NETS;
    } else {
        /* every network appears, in shuffled order, most more than once */
        for (int i = 0; i < N_ROWS; i++) net[i] = i % P_NETS;
        for (int i = N_ROWS - 1; i > 0; i--) {
            int k = (int)nevo_rng_below(&rng, (uint32_t)i + 1);
            int t = net[i];
            net[i] = net[k], net[k] = t;
        }
    }

    float *out = malloc(sizeof(float) * (size_t)n_out * N_ROWS);
    size_t sfl = nevo_policy_scratch_floats(p, N_ROWS);
    float *scratch = malloc(sizeof(float) * sfl);
    for (size_t i = 0; i < sfl; i++) scratch[i] = NAN; /* no read before write */
    nevo_policy_forward(p, params, stride, net, obs, N_ROWS, out, scratch);

    double *x = malloc(sizeof(double) * (size_t)odim);
    double ref[64], mag[64];
    int clipped = 0;
    for (int i = 0; i < N_ROWS; i++) {
        for (int k = 0; k < odim; k++) {
            double v = obs[(size_t)i * odim + k];
            if (obs_norm) {
                v = (v - p->obs_mean[k]) / p->obs_std[k];
                if (v < -5.0 || v > 5.0) clipped++;
                v = v < -5.0 ? -5.0 : v > 5.0 ? 5.0 : v;
            }
            x[k] = v;
        }
        ref_forward(spec, cfg, params + (size_t)net[i] * stride, x, ref, mag);
        for (int j = 0; j < n_out; j++) {
            double got = out[(size_t)i * n_out + j];
            CHECK_MSG(fabs(got - ref[j]) <= 1e-5 * (1.0 + mag[j]),
                      "%s: row %d (net %d) output %d: %.9g vs reference %.9g", what, i, net[i], j,
                      got, ref[j]);
        }
    }
    if (obs_norm) CHECK_MSG(clipped > 0, "%s: the case never exercises the clip", what);

    /* bitwise: each row alone, and the batch reversed */
    float *one = malloc(sizeof(float) * (size_t)n_out);
    float *scratch1 = malloc(sizeof(float) * nevo_policy_scratch_floats(p, 1));
    for (int i = 0; i < N_ROWS; i++) {
        nevo_policy_forward(p, params, stride, &net[i], obs + (size_t)i * odim, 1, one, scratch1);
        CHECK_MSG(memcmp(one, out + (size_t)i * n_out, sizeof(float) * (size_t)n_out) == 0,
                  "%s: row %d differs alone and in a batch", what, i);
    }
    float *robs = malloc(sizeof(float) * (size_t)odim * N_ROWS);
    float *rout = malloc(sizeof(float) * (size_t)n_out * N_ROWS);
    for (int i = 0; i < N_ROWS; i++) {
        rnet[i] = net[N_ROWS - 1 - i];
        memcpy(robs + (size_t)i * odim, obs + (size_t)(N_ROWS - 1 - i) * odim, sizeof(float) * (size_t)odim);
    }
    nevo_policy_forward(p, params, stride, rnet, robs, N_ROWS, rout, scratch);
    for (int i = 0; i < N_ROWS; i++)
        CHECK_MSG(memcmp(rout + (size_t)i * n_out, out + (size_t)(N_ROWS - 1 - i) * n_out,
                         sizeof(float) * (size_t)n_out) == 0,
                  "%s: row %d differs in a reversed batch", what, i);
    free(robs), free(rout), free(one), free(scratch1), free(x), free(net), free(rnet);
    free(out), free(scratch), free(obs), free(params);
    nevo_policy_free(p);
}

static void check_forward(const NevoEnvSpec *spec, const NevoPolicyConfig *cfg, int obs_norm,
                          uint64_t seed, const char *what) {
    check_forward_rows(spec, cfg, obs_norm, seed, what, 0);
}

/* The narrowest width (a multiple of 16) of two hidden layers, between obs inputs and
 * n_out outputs, at which `runs` networks outweigh nevo_cache_streamed_bytes, while one
 * network alone does not (checked): a call of runs of rows of different networks then
 * takes the streamed kernels, and each row alone the plain ones. */
static int streamed_width(int runs, int obs, int n_out) {
    size_t beyond = nevo_cache_streamed_bytes();
    for (int w = 16;; w += 16) {
        size_t bytes = sizeof(float) * ((size_t)w * w + (size_t)(obs + 2 + n_out) * w + (size_t)n_out);
        if ((size_t)runs * bytes > beyond) {
            CHECK(bytes <= beyond);
            return w;
        }
    }
}

TEST(policy_forward_mlp_discrete) {
    NevoEnv *env = open_env("CartPole-v1");
    const NevoEnvSpec *spec = nevo_env_spec(env);
    int h[2] = {16, 8};
    NevoPolicyConfig c = mlp_config("tanh", 2, h);
    check_forward(spec, &c, 0, 1, "CartPole tanh [16,8]");
    c = mlp_config("relu", 2, h);
    check_forward(spec, &c, 0, 2, "CartPole relu [16,8]");
    check_forward(spec, &c, 1, 3, "CartPole relu [16,8] obs_norm");
    /* a 130 x 130 layer (66 KB): single rows of different networks take it one at a
     * time, the small layers side by side (dense_nets) */
    int hb[2] = {130, 130};
    c = mlp_config("tanh", 2, hb);
    check_forward(spec, &c, 0, 12, "CartPole tanh [130,130]");
    /* wide enough that the batch's 23 rows of 7 networks (at least 7 runs of rows)
     * outweigh nevo_cache_streamed_bytes, so it takes the streamed kernels where the set
     * has them, while a row alone takes dense: the same bits */
    int ww = streamed_width(7, spec->obs_dim, 2);
    int hw[2] = {ww, ww};
    c = mlp_config("tanh", 2, hw);
    check_forward(spec, &c, 0, 13, "CartPole tanh, streamed width");
    nevo_env_free(env);
}

TEST(policy_forward_mlp_continuous) {
    NevoEnv *env = open_env("Pendulum-v1");
    const NevoEnvSpec *spec = nevo_env_spec(env);
    int h[3] = {12, 7, 5};
    NevoPolicyConfig c = mlp_config("tanh", 3, h);
    check_forward(spec, &c, 0, 4, "Pendulum tanh [12,7,5]");
    c = mlp_config("relu", 1, h);
    check_forward(spec, &c, 1, 5, "Pendulum relu [12] obs_norm");
    c = mlp_config("tanh", 0, h);
    check_forward(spec, &c, 0, 6, "Pendulum linear");
    /* a wider box action space */
    float lo[6] = {-1, -1, -1, -1, -1, -1}, hi[6] = {1, 1, 1, 1, 1, 1};
    NevoEnvSpec box = box_spec(11, 6, lo, hi);
    c = mlp_config("relu", 2, h);
    check_forward(&box, &c, 0, 7, "box 11->6 relu [12,7]");
    nevo_env_free(env);
}

TEST(policy_forward_conv) {
    NevoEnvSpec img = image_spec(10, 10, 4, 6);
    int h1[1] = {16};
    NevoPolicyConfig c = mlp_config("relu", 1, h1);
    c.n_conv = 2;
    c.n_conv_kernels = c.n_conv_strides = 2;
    c.conv_filters[0] = 8, c.conv_kernels[0] = 3, c.conv_strides[0] = 1;
    c.conv_filters[1] = 4, c.conv_kernels[1] = 3, c.conv_strides[1] = 2;
    check_forward(&img, &c, 0, 8, "conv 10x10x4 relu");
    strcpy(c.activation, "tanh");
    check_forward(&img, &c, 0, 9, "conv 10x10x4 tanh");
    /* rows != cols, a stride that does not divide, a 1x1 and a 2x2 kernel */
    NevoEnvSpec odd = image_spec(9, 7, 3, 4);
    int h2[2] = {8, 6};
    c = mlp_config("tanh", 2, h2);
    c.n_conv = 3;
    c.n_conv_kernels = c.n_conv_strides = 3;
    c.conv_filters[0] = 5, c.conv_kernels[0] = 3, c.conv_strides[0] = 2; /* -> 4x3x5 */
    c.conv_filters[1] = 3, c.conv_kernels[1] = 1, c.conv_strides[1] = 1; /* -> 4x3x3 */
    c.conv_filters[2] = 2, c.conv_kernels[2] = 2, c.conv_strides[2] = 1; /* -> 3x2x2 */
    check_forward(&odd, &c, 0, 10, "conv 9x7x3 three layers");
    c.n_hidden = 0;
    strcpy(c.activation, "relu");
    check_forward(&odd, &c, 1, 11, "conv 9x7x3 no hidden, obs_norm");
}

/* Blocks of rows of one network in the lanes layout (16 rows in the lanes of an AVX-512
 * vector or of two AVX2 vectors; kernels.h): the reference, and the same bits as each row alone, which takes
 * the row layout. Widths around the 16-output tile, zeros from relu (the masked
 * blocks), observations that clip, inputs of 4, 11 and 64, conv networks. */
TEST(policy_forward_runs_in_lanes) {
    NevoEnv *env = open_env("CartPole-v1");
    const NevoEnvSpec *spec = nevo_env_spec(env);
    int h[2] = {16, 8};
    NevoPolicyConfig c = mlp_config("tanh", 2, h);
    check_forward_rows(spec, &c, 0, 21, "CartPole tanh [16,8], runs", 1);
    c = mlp_config("relu", 2, h);
    check_forward_rows(spec, &c, 1, 22, "CartPole relu [16,8] obs_norm, runs", 1);
    nevo_env_free(env);
    float lo[6] = {-1, -1, -1, -1, -1, -1}, hi[6] = {1, 1, 1, 1, 1, 1};
    NevoEnvSpec box = box_spec(11, 6, lo, hi);
    int h3[3] = {17, 33, 5};
    c = mlp_config("relu", 3, h3);
    check_forward_rows(&box, &c, 0, 23, "box 11->6 relu [17,33,5], runs", 1);
    NevoEnvSpec wide = box_spec(64, 6, lo, hi);
    wide.action_kind = NEVO_SPACE_DISCRETE, wide.n_actions = 18;
    int h2[2] = {64, 64};
    c = mlp_config("tanh", 2, h2);
    check_forward_rows(&wide, &c, 1, 24, "64->18 tanh [64,64] obs_norm, runs", 1);
    /* a layer of 64 x 300 weights (75 KB) goes through in chunks of inputs */
    int h4[2] = {300, 20};
    c = mlp_config("tanh", 2, h4);
    check_forward_rows(&wide, &c, 0, 25, "64->18 tanh [300,20], runs", 1);
    /* normalised observations into a layer wider than one register block (64 outputs),
     * whose tiles read the inputs again after the first tile has stored its outputs */
    int h5[1] = {130};
    c = mlp_config("relu", 1, h5);
    check_forward_rows(&wide, &c, 1, 29, "64->18 relu [130] obs_norm, runs", 1);
    /* networks wide enough that the 8 runs outweigh nevo_cache_streamed_bytes: each
     * run's first block takes dense_lanes_streamed where the set has it, its later
     * blocks and rows left over the plain kernels */
    int hs = streamed_width(N_LANE_RUNS, wide.obs_dim, wide.n_actions);
    int h6[2] = {hs, hs};
    c = mlp_config("tanh", 2, h6);
    check_forward_rows(&wide, &c, 0, 30, "64->18 tanh, streamed width, runs", 1);
    /* conv networks: two conv layers (stride 2, 8 and 4 filters), and one of 20 filters
     * (a full and a partial tile; on a 6x6 image, so float sums stay within the
     * reference's tolerance) */
    NevoEnvSpec img = image_spec(10, 10, 4, 6);
    int h1[1] = {16};
    c = mlp_config("relu", 1, h1);
    c.n_conv = 2;
    c.n_conv_kernels = c.n_conv_strides = 2;
    c.conv_filters[0] = 8, c.conv_kernels[0] = 3, c.conv_strides[0] = 1;
    c.conv_filters[1] = 4, c.conv_kernels[1] = 3, c.conv_strides[1] = 2;
    check_forward_rows(&img, &c, 0, 26, "conv 10x10x4 relu, runs", 1);
    strcpy(c.activation, "tanh");
    check_forward_rows(&img, &c, 1, 27, "conv 10x10x4 tanh obs_norm, runs", 1);
    c = mlp_config("relu", 1, h1);
    c.n_conv = c.n_conv_kernels = c.n_conv_strides = 1;
    c.conv_filters[0] = 20, c.conv_kernels[0] = 3, c.conv_strides[0] = 1;
    NevoEnvSpec small = image_spec(6, 6, 4, 6);
    check_forward_rows(&small, &c, 0, 28, "conv 6x6x4 3x3x20 relu, runs", 1);
    /* where the CPU has AVX2 the forward runs these blocks in the lanes layout */
    if (nevo_kernels_named("avx2") && !getenv("NEVO_KERNELS"))
        CHECK(nevo_kernels()->dense_lanes != NULL && nevo_kernels()->conv_lanes != NULL);
}

/* A NaN parameter must reach the output whatever the activation, so the evaluator can
 * report it (eval.h: NEVO_ERR_NUMERIC when the policy produces NaN). tanh propagates
 * NaN; relu must too, as numpy.maximum(x, 0) and torch.relu do. A relu written as
 * `y > 0 ? y : 0` maps NaN to 0 and hides a diverged network behind finite actions. */
TEST(policy_forward_propagates_nan) {
    NevoEnv *env = open_env("CartPole-v1");
    int h[2] = {8, 8};
    static const char *const acts[2] = {"tanh", "relu"};
    NevoNoise *noise = small_noise();
    for (int a = 0; a < 2; a++) {
        NevoPolicyConfig c = mlp_config(acts[a], 2, h);
        NevoPolicy *p = new_policy(nevo_env_spec(env), &c, 0);
        float *theta = malloc(sizeof(float) * p->nparams);
        nevo_policy_init_params(p, noise, 1, 0, 0, theta);
        theta[3] = NAN; /* first layer, input 0 -> hidden unit 3 */
        const float obs[4] = {0.1f, -0.2f, 0.3f, 0.05f};
        int net = 0;
        float out[2];
        float *scratch = malloc(sizeof(float) * nevo_policy_scratch_floats(p, 1));
        nevo_policy_forward(p, theta, p->nparams, &net, obs, 1, out, scratch);
        CHECK_MSG(isnan(out[0]) && isnan(out[1]),
                  "%s: a NaN weight gave finite outputs %g %g", acts[a], out[0], out[1]);
        free(scratch);
        free(theta);
        nevo_policy_free(p);
    }
    free_noise(noise);
    nevo_env_free(env);
}

/* --- kernel implementations --------------------------------------------------------- */

/* The implementations this CPU and build have, the portable one first. */
static int kernel_sets(const NevoKernels *ks[3]) {
    static const char *const names[3] = {"generic", "avx2", "avx512"};
    int n = 0;
    for (int i = 0; i < 3; i++)
        if ((ks[n] = nevo_kernels_named(names[i]))) n++;
    CHECK(n >= 1 && strcmp(ks[0]->name, "generic") == 0);
    return n;
}

/* kernel_sets, and after each set with a dense_streamed or dense_lanes_streamed a copy
 * of it whose dense and dense_lanes are those ("avx2 streamed"), for the tests of dense
 * and dense_lanes to cover both entries. */
#define DENSE_SETS_MAX 6
static int dense_sets(const NevoKernels *ks[DENSE_SETS_MAX]) {
    static NevoKernels streamed[3];
    static char streamed_names[3][32];
    const NevoKernels *sets[3];
    int nk = kernel_sets(sets), n = 0;
    for (int i = 0; i < nk; i++) {
        ks[n++] = sets[i];
        if (sets[i]->dense_streamed || sets[i]->dense_lanes_streamed) {
            streamed[i] = *sets[i];
            snprintf(streamed_names[i], sizeof streamed_names[i], "%s streamed", sets[i]->name);
            streamed[i].name = streamed_names[i];
            if (sets[i]->dense_streamed) streamed[i].dense = sets[i]->dense_streamed;
            if (sets[i]->dense_lanes_streamed) streamed[i].dense_lanes = sets[i]->dense_lanes_streamed;
            ks[n++] = &streamed[i];
        }
    }
    return n;
}

/* Inputs as the kernels meet them: a fraction p_zero of exact zeros, half of them -0
 * (ReLU of a -0 sum), the rest ones (binary image planes) or normal values. */
static void fill_inputs(NevoRng *rng, float *x, size_t n, double p_zero, int binary) {
    for (size_t i = 0; i < n; i++) {
        double u = nevo_rng_uniform(rng);
        x[i] = u < p_zero / 2 ? 0.0f : u < p_zero ? -0.0f : binary ? 1.0f : (float)nevo_rng_normal(rng);
    }
}

static int same_bits(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

/* A random layer (in, out) for the kernel tests: N(0, 0.3^2) weights, N(0, 0.5^2)
 * biases with every 5th from zero_from set to -0 (a -0 bias stays -0 while terms are
 * skipped). Freed by the caller. */
static void random_layer(NevoRng *rng, int in, int out, int zero_from, float **W, float **b) {
    *W = malloc(sizeof(float) * (size_t)in * out), *b = malloc(sizeof(float) * (size_t)out);
    fill_gauss(rng, *W, (size_t)in * out, 0.3f);
    fill_gauss(rng, *b, (size_t)out, 0.5f);
    for (int j = zero_from; j < out; j += 5) (*b)[j] = -0.0f;
}

/* The skip-zero fixture: a layer of SKIP_IN inputs whose weight rows are +inf, NaN,
 * finite and -inf, biases alternating 0.25 and -0, and five input rows against it. */
enum { SKIP_IN = 4, SKIP_OUT = 20 };
static const float skip_cases[5][SKIP_IN] = {
    {0.0f, -0.0f, 1.5f, 0.0f}, /* only the finite weights count */
    {1.0f, 0.0f, 0.0f, 0.0f},  /* inf */
    {0.0f, 0.0f, 0.0f, 0.0f},  /* the bias, -0 included */
    {NAN, 0.0f, 2.0f, 0.0f},   /* NaN input: NaN */
    {0.0f, 0.0f, 0.0f, -1.0f}, /* +inf */
};

/* The fixture's weights and biases; shift varies the finite row and the biases (so
 * rows of different networks differ). */
static void skip_layer(float *W, float *b, int shift) {
    for (int j = 0; j < SKIP_OUT; j++) {
        W[0 * SKIP_OUT + j] = INFINITY;
        W[1 * SKIP_OUT + j] = NAN;
        W[2 * SKIP_OUT + j] = 0.5f + (float)(j + shift);
        W[3 * SKIP_OUT + j] = -INFINITY;
        b[j] = (j + shift) % 2 ? -0.0f : 0.25f;
    }
}

/* y, the outputs of skip_cases[c] through that layer (then relu if asked), against
 * what skipping zeros gives: a NaN for the NaN input, else exactly these bits. */
static void check_skip_row(const char *what, int c, const float *y, const float *W, const float *b, int relu) {
    for (int j = 0; j < SKIP_OUT; j++) {
        float want = c == 0 ? fmaf(1.5f, W[2 * SKIP_OUT + j], b[j]) : c == 1 || c == 4 ? INFINITY : b[j];
        if (relu && want < 0.0f) want = 0.0f;
        if (c == 3)
            CHECK_MSG(isnan(y[j]), "%s: a NaN input gave %g (relu %d)", what, y[j], relu);
        else
            CHECK_MSG(same_bits(&y[j], &want, 1), "%s: case %d output %d is %g, want %g (relu %d)", what, c, j, y[j],
                      want, relu);
    }
}

/* Y (rows, out) through each implementation on rows whose zeros fall differently: every
 * one bit-identical to the portable kernel, every row the same alone as in the batch,
 * nothing written between the rows, and the portable sums within float rounding of a
 * double-precision sum. Rows have gaps (xs > in, ys > out) filled with NaN. */
TEST(kernels_dense_implementations_bit_identical) {
    const NevoKernels *ks[DENSE_SETS_MAX];
    int nk = dense_sets(ks);
    static const int shapes[][2] = {{1, 1},   {3, 2},    {4, 64},    {17, 15},   {64, 64},  {64, 2},
                                    {100, 17}, {128, 6}, {33, 48},   {1024, 128}, {1100, 257}, {2100, 40}};
    static const int row_counts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const double p_zeros[] = {0.0, 0.5, 0.97};
    NevoRng rng;
    nevo_rng_init(&rng, 41, NEVO_RNG_USER, 0, 0, 0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int in = shapes[s][0], out = shapes[s][1];
        size_t xs = (size_t)in + 3, ys = (size_t)out + 2;
        float *W, *b;
        random_layer(&rng, in, out, 0, &W, &b);
        float *X = malloc(sizeof(float) * xs * 9), *Y = malloc(sizeof(float) * ys * 9);
        float *ref = malloc(sizeof(float) * ys * 9), *one = malloc(sizeof(float) * (size_t)out);
        for (size_t z = 0; z < sizeof p_zeros / sizeof p_zeros[0]; z++) {
            for (size_t i = 0; i < xs * 9; i++) X[i] = NAN;
            for (int r = 0; r < 9; r++) fill_inputs(&rng, X + r * xs, (size_t)in, p_zeros[z], 0);
            for (size_t rc = 0; rc < sizeof row_counts / sizeof row_counts[0]; rc++) {
                int rows = row_counts[rc];
                for (int k = 0; k < nk; k++) {
                    for (size_t i = 0; i < ys * 9; i++) Y[i] = NAN;
                    ks[k]->dense(W, b, X, xs, rows, in, out, Y, ys);
                    for (int r = 0; r < rows; r++) {
                        for (int j = out; j < (int)ys; j++)
                            CHECK_MSG(isnan(Y[r * ys + j]), "%s %d->%d: wrote past row %d", ks[k]->name, in, out, r);
                        if (k == 0) {
                            memcpy(ref + r * ys, Y + r * ys, sizeof(float) * (size_t)out);
                            for (int j = 0; j < out; j++) {
                                double sum = b[j], mag = fabs(b[j]);
                                for (int i = 0; i < in; i++) {
                                    sum += (double)X[r * xs + i] * W[(size_t)i * out + j];
                                    mag += fabs((double)X[r * xs + i] * W[(size_t)i * out + j]);
                                }
                                /* a float sum of n terms: error within a few ulps of the magnitudes */
                                CHECK_MSG(fabs(Y[r * ys + j] - sum) <= 2e-6 * mag + 1e-7,
                                          "generic %d->%d row %d output %d: %.9g vs %.9g", in, out, r, j,
                                          Y[r * ys + j], sum);
                            }
                        }
                        CHECK_MSG(same_bits(Y + r * ys, ref + r * ys, out),
                                  "%s %d->%d, %d rows, p_zero %.2f: row %d differs from generic", ks[k]->name, in,
                                  out, rows, p_zeros[z], r);
                        ks[k]->dense(W, b, X + r * xs, xs, 1, in, out, one, (size_t)out);
                        CHECK_MSG(same_bits(one, ref + r * ys, out), "%s %d->%d: row %d alone differs from %d rows",
                                  ks[k]->name, in, out, r, rows);
                    }
                }
            }
        }
        free(W), free(b), free(X), free(Y), free(ref), free(one);
    }
}

/* The one semantic difference from a plain chain of fmas (kernels.h): a zero input
 * contributes nothing, even against an infinite or NaN weight, and a -0 sum is left
 * alone by it; a NaN input is not zero and reaches every output it feeds. In blocks of
 * rows, each row skips its own zeros. */
TEST(kernels_dense_skip_zero_inputs) {
    const NevoKernels *ks[DENSE_SETS_MAX];
    int nk = dense_sets(ks);
    float W[SKIP_IN * SKIP_OUT], b[SKIP_OUT];
    skip_layer(W, b, 0);
    for (int k = 0; k < nk; k++) {
        for (int rows = 1; rows <= 5; rows++) {
            float Y[5][SKIP_OUT];
            char what[64];
            snprintf(what, sizeof what, "%s, %d rows", ks[k]->name, rows);
            /* rows 0..rows-1 together, so each one also sits in a block with the others */
            ks[k]->dense(W, b, &skip_cases[0][0], SKIP_IN, rows, SKIP_IN, SKIP_OUT, &Y[0][0], SKIP_OUT);
            for (int r = 0; r < rows; r++) check_skip_row(what, r, Y[r], W, b, 0);
        }
    }
}

/* The AVX2 one-row path for wide layers (row256_sums in kernels_avx2.c: dense_streamed's
 * first row of a call, out > 64, 3/4 or more of a chunk's inputs nonzero) skips zero
 * inputs as every path does. A 1032 -> 71 layer (a 7-lane masked tail; a second chunk of 8 inputs):
 * the weight rows of the zero inputs are +inf, NaN or -inf, and every third bias is -0
 * and meets only -0 weights (so it must stay -0: a stray +0 would make it +0). Each
 * chunk has exactly 3/4 of its inputs nonzero (the rule's edge) or one fewer, in all
 * four combinations, so both paths and a mix of them across chunks are taken. Every
 * kernel set against the portable one, the row alone (in "avx2 streamed", the one-pass
 * path) and as both rows of a call (the second takes the tiles), nothing written past
 * a row. */
TEST(kernels_dense_wide_skip_zero_inputs) {
    const NevoKernels *ks[DENSE_SETS_MAX];
    int nk = dense_sets(ks);
    enum { IN = 1032, OUT = 71, YS = OUT + 1 };
    static const float poison[3] = {INFINITY, NAN, -INFINITY};
    float *W = malloc(sizeof(float) * IN * OUT), b[OUT], X[2][IN], Y[2 * YS], ref[OUT];
    NevoRng rng;
    nevo_rng_init(&rng, 53, NEVO_RNG_USER, 0, 0, 0);
    for (int j = 0; j < OUT; j++) b[j] = j % 3 == 0 ? -0.0f : (float)nevo_rng_normal(&rng);
    for (int v = 0; v < 4; v++) {
        for (int k = 0; k < IN; k++) {
            /* 1 in 4 zero (768 of 1024 nonzero, 6 of 8), and one more where v says */
            int zero = k % 4 == 3 || (k == 0 && (v & 1)) || (k == 1024 && (v & 2));
            X[0][k] = X[1][k] = zero ? (k % 8 == 3 ? -0.0f : 0.0f) : (float)(0.5 + nevo_rng_uniform(&rng));
            for (int j = 0; j < OUT; j++)
                W[(size_t)k * OUT + j] =
                    zero ? poison[k % 3] : j % 3 == 0 ? -0.0f : 0.3f * (float)nevo_rng_normal(&rng);
        }
        ks[0]->dense(W, b, X[0], IN, 1, IN, OUT, ref, OUT);
        for (int j = 0; j < OUT; j++)
            CHECK_MSG(j % 3 ? isfinite(ref[j]) : ref[j] == 0.0f && signbit(ref[j]),
                      "generic, case %d: output %d is %g", v, j, ref[j]);
        for (int k = 1; k < nk; k++) {
            for (int rows = 1; rows <= 2; rows++) {
                for (int i = 0; i < 2 * YS; i++) Y[i] = NAN;
                ks[k]->dense(W, b, &X[0][0], IN, rows, IN, OUT, Y, YS);
                for (int r = 0; r < rows; r++) {
                    CHECK_MSG(same_bits(Y + r * YS, ref, OUT), "%s wide skip-zero, case %d, %d rows: row %d differs",
                              ks[k]->name, v, rows, r);
                    CHECK_MSG(isnan(Y[r * YS + OUT]), "%s wide skip-zero: wrote past row %d", ks[k]->name, r);
                }
            }
        }
    }
    free(W);
}

/* The lanes layout (kernels.h), where a kernel set has it: to_lanes and from_lanes move
 * exactly the values they name and write nothing else, and NEVO_LANES rows through
 * to_lanes, dense_lanes and from_lanes give the portable kernel's bits, with each
 * activation (applied by dense_lanes in registers), on shapes and zero patterns as in
 * kernels_dense_implementations_bit_identical (-0 biases included), on the skip-zero
 * cases of kernels_dense_skip_zero_inputs, and with one zero input late in one row
 * (the only masked term of a layer) against infinite weights. */
TEST(kernels_dense_lanes_bit_identical) {
    const NevoKernels *ks[DENSE_SETS_MAX];
    int nk = dense_sets(ks), checked = 0;
    const NevoKernels *generic = ks[0];
    CHECK(generic->dense_lanes == NULL); /* the portable set keeps the row layout */
    enum { R = NEVO_LANES };
    /* the shapes of kernels_dense_implementations_bit_identical, and more that go
     * through in chunks of inputs (over 32 KB of weights): even chunks, a partial last
     * chunk and tile, the floor of 16 inputs per chunk (out > 512) */
    static const int shapes[][2] = {{1, 1},     {3, 2},      {4, 64},    {17, 15},  {64, 64},   {64, 2},
                                    {100, 17},  {128, 6},    {33, 48},   {64, 8},   {257, 31},  {1024, 128},
                                    {1100, 257}, {2100, 40}, {1000, 33}, {40, 600}};
    static const double p_zeros[] = {0.0, 0.5, 0.97};
    NevoRng rng;
    nevo_rng_init(&rng, 43, NEVO_RNG_USER, 0, 0, 0);
    for (int k = 1; k < nk; k++) {
        if (!ks[k]->dense_lanes) continue;
        CHECK(ks[k]->to_lanes && ks[k]->from_lanes);
        checked++;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int in = shapes[s][0], out = shapes[s][1];
            size_t xs = (size_t)in + 3, ys = (size_t)out + 2;
            float *W, *b;
            random_layer(&rng, in, out, 0, &W, &b);
            float *X = malloc(sizeof(float) * xs * R), *Y = malloc(sizeof(float) * ys * R);
            float *ref = malloc(sizeof(float) * ys * R);
            /* XT with a NaN guard of a whole vector after it */
            float *XT = malloc(sizeof(float) * ((size_t)in + 1) * R), *YT = malloc(sizeof(float) * (size_t)out * R);
            for (size_t z = 0; z < sizeof p_zeros / sizeof p_zeros[0]; z++) {
                for (size_t i = 0; i < xs * R; i++) X[i] = NAN;
                for (int r = 0; r < R; r++) fill_inputs(&rng, X + r * xs, (size_t)in, p_zeros[z], 0);
                for (int i = 0; i < R; i++) XT[(size_t)in * R + i] = NAN;
                ks[k]->to_lanes(X, xs, in, XT);
                for (int r = 0; r < R; r++)
                    for (int i = 0; i < in; i++)
                        CHECK_MSG(same_bits(&XT[R * i + r], &X[r * xs + i], 1),
                                  "%s to_lanes %d: row %d input %d moved wrong", ks[k]->name, in, r, i);
                for (int i = 0; i < R; i++)
                    CHECK_MSG(isnan(XT[(size_t)in * R + i]), "%s to_lanes %d: wrote past the block", ks[k]->name, in);
                static const NevoActivation acts[3] = {NEVO_ACT_NONE, NEVO_ACT_TANH, NEVO_ACT_RELU};
                for (int a = 0; a < 3; a++) {
                    generic->dense(W, b, X, xs, R, in, out, ref, ys);
                    for (int r = 0; r < R; r++)
                        if (acts[a] == NEVO_ACT_TANH)
                            generic->tanh(ref + r * ys, out);
                        else if (acts[a] == NEVO_ACT_RELU)
                            for (int j = 0; j < out; j++) ref[r * ys + j] = ref[r * ys + j] < 0.0f ? 0.0f : ref[r * ys + j];
                    ks[k]->dense_lanes(W, b, XT, in, out, acts[a], YT);
                    for (size_t i = 0; i < ys * R; i++) Y[i] = NAN;
                    ks[k]->from_lanes(YT, out, Y, ys);
                    for (int r = 0; r < R; r++) {
                        CHECK_MSG(same_bits(Y + r * ys, ref + r * ys, out),
                                  "%s lanes %d->%d, activation %d, p_zero %.2f: row %d differs from generic",
                                  ks[k]->name, in, out, (int)acts[a], p_zeros[z], r);
                        for (int j = out; j < (int)ys; j++)
                            CHECK_MSG(isnan(Y[r * ys + j]), "%s from_lanes %d: wrote past row %d", ks[k]->name, out,
                                      r);
                    }
                }
            }
            free(W), free(b), free(X), free(Y), free(ref), free(XT), free(YT);
        }

        /* one zero, at input 27 of row 5, against infinite weights, every other input
         * nonzero: that row stays finite, the others are infinite */
        {
            enum { IN2 = 40, OUT2 = 24 };
            float W2[IN2 * OUT2], b2[OUT2], X2[R * IN2], XT2[IN2 * R], YT2[OUT2 * R], Y2[R * OUT2], ref2[R * OUT2];
            fill_gauss(&rng, W2, IN2 * OUT2, 0.3f);
            fill_gauss(&rng, b2, OUT2, 0.5f);
            for (int j = 0; j < OUT2; j++) W2[27 * OUT2 + j] = INFINITY;
            for (int i = 0; i < R * IN2; i++) X2[i] = 1.0f + 0.01f * (float)(i % 7);
            X2[5 * IN2 + 27] = 0.0f;
            generic->dense(W2, b2, X2, IN2, R, IN2, OUT2, ref2, OUT2);
            ks[k]->to_lanes(X2, IN2, IN2, XT2);
            ks[k]->dense_lanes(W2, b2, XT2, IN2, OUT2, NEVO_ACT_NONE, YT2);
            ks[k]->from_lanes(YT2, OUT2, Y2, OUT2);
            CHECK_MSG(same_bits(Y2, ref2, R * OUT2), "%s lanes: a lone zero input late in a row was not skipped",
                      ks[k]->name);
            CHECK(isfinite(Y2[5 * OUT2]) && isinf(Y2[4 * OUT2]));
        }

        /* a -0 sum, a zero input, then a zero weight: skipping gives -0 (-0 + 1 x -0),
         * a plain chain of fmas +0 (-0 + 0 x 0.5 = +0, then +0 + 1 x -0 = +0), and the
         * row has a nonzero input, so a kernel that runs zero inputs through plain fmas
         * must find and redo it; a row with every input zero keeps its -0 bias; the other
         * rows have ordinary sums */
        {
            enum { IN3 = 3, OUT3 = 7 };
            float W3[IN3 * OUT3], b3[OUT3], X3[R * IN3], XT3[IN3 * R], YT3[OUT3 * R], Y3[R * OUT3], ref3[R * OUT3];
            for (int j = 0; j < OUT3; j++) {
                W3[j] = 0.5f + (float)j, W3[OUT3 + j] = -0.0f, W3[2 * OUT3 + j] = 0.25f - (float)j;
                b3[j] = -0.0f;
            }
            for (int r = 0; r < R; r++) {
                float *x = X3 + r * IN3;
                x[0] = r % 3 == 0 ? 1.0f : 0.0f, x[1] = r % 3 == 2 ? 0.0f : 1.0f, x[2] = r % 3 == 0 ? 2.0f : 0.0f;
            }
            for (int a = 0; a < 2; a++) {
                generic->dense(W3, b3, X3, IN3, R, IN3, OUT3, ref3, OUT3);
                if (a) nevo_kernel_activate(NEVO_ACT_RELU, ref3, R * OUT3);
                ks[k]->to_lanes(X3, IN3, IN3, XT3);
                ks[k]->dense_lanes(W3, b3, XT3, IN3, OUT3, a ? NEVO_ACT_RELU : NEVO_ACT_NONE, YT3);
                ks[k]->from_lanes(YT3, OUT3, Y3, OUT3);
                CHECK_MSG(same_bits(Y3, ref3, R * OUT3), "%s lanes: a -0 sum met a zero input (relu %d)", ks[k]->name,
                          a);
            }
            CHECK(signbit(ref3[1 * OUT3]) && ref3[1 * OUT3] == 0.0f && signbit(ref3[2 * OUT3]));
        }

        /* a zero input skips its term even against inf and NaN weights, and leaves a -0
         * bias alone; a NaN input reaches its outputs; each row (lane) on its own */
        float W[SKIP_IN * SKIP_OUT], b[SKIP_OUT], X[R][SKIP_IN], XT[SKIP_IN * R], YT[SKIP_OUT * R], Y[R][SKIP_OUT];
        skip_layer(W, b, 0);
        for (int r = 0; r < R; r++) memcpy(X[r], skip_cases[(r * 3) % 5], sizeof X[r]);
        ks[k]->to_lanes(&X[0][0], SKIP_IN, SKIP_IN, XT);
        /* relu as well: -0 stays -0, NaN stays NaN (as nevo_kernel_activate) */
        for (int relu = 0; relu < 2; relu++) {
            ks[k]->dense_lanes(W, b, XT, SKIP_IN, SKIP_OUT, relu ? NEVO_ACT_RELU : NEVO_ACT_NONE, YT);
            ks[k]->from_lanes(YT, SKIP_OUT, &Y[0][0], SKIP_OUT);
            char what[64];
            snprintf(what, sizeof what, "%s lanes", ks[k]->name);
            for (int r = 0; r < R; r++) check_skip_row(what, (r * 3) % 5, Y[r], W, b, relu);
        }
    }
    /* the lanes path is checked wherever the CPU has AVX2 (both its entries) and AVX-512 */
    if (nevo_kernels_named("avx2")) {
        CHECK(nevo_kernels_named("avx2")->dense_lanes_streamed != NULL);
        CHECK(checked == (nevo_kernels_named("avx512") ? 3 : 2));
    }
}

/* Rows of different networks side by side (dense_nets, kernels.h), where a kernel set
 * has it: each row the portable kernel's bits for its own network alone, with 1 to
 * NEVO_NETS_MAX rows, on the shapes and zero patterns of the other dense tests (-0
 * biases, several chunks of inputs), nothing written between rows; and the skip-zero
 * cases, each row against its own infinite and NaN weights. */
TEST(kernels_dense_nets_bit_identical) {
    const NevoKernels *ks[3];
    int nk = kernel_sets(ks), checked = 0;
    const NevoKernels *generic = ks[0];
    CHECK(generic->dense_nets == NULL);
    enum { R = NEVO_NETS_MAX };
    static const int shapes[][2] = {{1, 1},   {3, 2},    {4, 64},   {17, 15},   {64, 64},   {64, 2},  {100, 17},
                                    {128, 6}, {33, 48},  {64, 8},   {257, 31},  {2100, 5},  {1030, 9}, {16, 130}};
    static const double p_zeros[] = {0.0, 0.5, 0.97};
    NevoRng rng;
    nevo_rng_init(&rng, 47, NEVO_RNG_USER, 0, 0, 0);
    for (int k = 1; k < nk; k++) {
        if (!ks[k]->dense_nets) continue;
        checked++;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int in = shapes[s][0], out = shapes[s][1];
            size_t xs = (size_t)in + 3, ys = (size_t)out + 2;
            float *Wm[R], *bm[R];
            for (int q = 0; q < R; q++) random_layer(&rng, in, out, q, &Wm[q], &bm[q]);
            float *X = malloc(sizeof(float) * xs * R), *Y = malloc(sizeof(float) * ys * R);
            float *ref = malloc(sizeof(float) * (size_t)out);
            for (size_t z = 0; z < sizeof p_zeros / sizeof p_zeros[0]; z++) {
                for (size_t i = 0; i < xs * R; i++) X[i] = NAN;
                for (int r = 0; r < R; r++) fill_inputs(&rng, X + r * xs, (size_t)in, p_zeros[z], 0);
                for (int rows = 1; rows <= R; rows++) {
                    for (size_t i = 0; i < ys * R; i++) Y[i] = NAN;
                    ks[k]->dense_nets((const float *const *)Wm, (const float *const *)bm, X, xs, rows, in, out, Y, ys);
                    for (size_t i = (size_t)rows * ys; i < ys * R; i++)
                        CHECK_MSG(isnan(Y[i]), "%s nets %d->%d: %d rows wrote past the last", ks[k]->name, in, out, rows);
                    for (int r = 0; r < rows; r++) {
                        generic->dense(Wm[r], bm[r], X + r * xs, xs, 1, in, out, ref, (size_t)out);
                        CHECK_MSG(same_bits(Y + r * ys, ref, out),
                                  "%s nets %d->%d, %d rows, p_zero %.2f: row %d differs from generic", ks[k]->name, in,
                                  out, rows, p_zeros[z], r);
                        for (int j = out; j < (int)ys; j++)
                            CHECK_MSG(isnan(Y[r * ys + j]), "%s nets %d->%d: wrote past row %d", ks[k]->name, in, out,
                                      r);
                    }
                }
            }
            for (int q = 0; q < R; q++) free(Wm[q]), free(bm[q]);
            free(X), free(Y), free(ref);
        }

        /* each row its own infinite and NaN weights, zero inputs skipped per row */
        float Wq[R][SKIP_IN * SKIP_OUT], bq[R][SKIP_OUT], X2[R][SKIP_IN], Y[R][SKIP_OUT];
        const float *wp[R], *bp[R];
        for (int q = 0; q < R; q++) skip_layer(Wq[q], bq[q], q), wp[q] = Wq[q], bp[q] = bq[q];
        for (int shift = 0; shift < 5; shift++) {
            for (int q = 0; q < R; q++) memcpy(X2[q], skip_cases[(q + shift) % 5], sizeof X2[q]);
            ks[k]->dense_nets(wp, bp, &X2[0][0], SKIP_IN, R, SKIP_IN, SKIP_OUT, &Y[0][0], SKIP_OUT);
            char what[64];
            snprintf(what, sizeof what, "%s nets", ks[k]->name);
            for (int q = 0; q < R; q++) check_skip_row(what, (q + shift) % 5, Y[q], Wq[q], bq[q], 0);
        }
    }
    if (nevo_kernels_named("avx512")) CHECK(checked == 2); /* AVX2 and AVX-512 */
}

/* A conv layer's shape, as nevo_policy_new sets it. */
static NevoLayer conv_layer(int h, int w, int c, int k, int s, int f) {
    NevoLayer L;
    memset(&L, 0, sizeof L);
    L.kind = NEVO_LAYER_CONV;
    L.in_h = h, L.in_w = w, L.in_c = c, L.kernel = k, L.stride = s;
    L.out_h = (h - k) / s + 1, L.out_w = (w - k) / s + 1, L.out_c = f;
    L.in_dim = h * w * c, L.out_dim = L.out_h * L.out_w * f;
    return L;
}

/* Convolution shapes for the kernel tests, h, w, c, kernel, stride, filters: the MinAtar
 * net's (4 and 10 channels), strides that do and do not divide, 1x1 to 4x4 kernels,
 * filters around the 16-wide vector, over 1000 channels. */
static const int conv_shapes[][6] = {
    {10, 10, 4, 3, 1, 16}, {10, 10, 10, 3, 1, 16}, {9, 7, 3, 3, 2, 5}, {8, 8, 16, 3, 2, 32},
    {5, 6, 1, 1, 1, 3},    {6, 6, 2, 2, 3, 17},    {12, 11, 3, 4, 2, 33}, {4, 3, 1100, 2, 1, 3},
    /* 3x3 at stride 1, the AVX-512 sparse path's own: rows of 16 and of 10 outputs (two
     * filter vectors, the second partial), and an input too big for it */
    {18, 18, 2, 3, 1, 16}, {12, 12, 5, 3, 1, 20},  {14, 14, 30, 3, 1, 4},
    /* and the AVX2 one's (a padded output of up to 4096 floats; the first two shapes
     * above are MinAtar's), sparse at p_zero 0.95: a partial second vector of filters,
     * rows of 4 outputs, three and four vectors */
    {9, 10, 3, 3, 1, 13},  {7, 6, 4, 3, 1, 5},     {8, 8, 3, 3, 1, 20},   {6, 6, 2, 3, 1, 29},
};
enum { N_CONV_SHAPES = sizeof conv_shapes / sizeof conv_shapes[0] };

/* 16 rows through conv_lanes (where a kernel set has it) against the portable conv and
 * activation of each row alone, bit for bit: conv_shapes, rows of dense, half-zero and
 * binary-sparse inputs side by side with some inputs zero in every row, -0 biases, each
 * activation; then channel 0 against infinite weights, zero in the even rows only
 * (everywhere, and only late in the image), and nothing written past the output. */
TEST(kernels_conv_lanes_bit_identical) {
    const NevoKernels *ks[3];
    int nk = kernel_sets(ks), checked = 0;
    const NevoKernels *generic = ks[0];
    CHECK(generic->conv_lanes == NULL);
    enum { R = NEVO_LANES };
    static const NevoActivation acts[3] = {NEVO_ACT_NONE, NEVO_ACT_TANH, NEVO_ACT_RELU};
    NevoRng rng;
    nevo_rng_init(&rng, 47, NEVO_RNG_USER, 0, 0, 0);
    for (int k = 1; k < nk; k++) {
        if (!ks[k]->conv_lanes) continue;
        checked++;
        for (size_t s = 0; s < N_CONV_SHAPES; s++) {
            const int *sh = conv_shapes[s];
            NevoLayer L = conv_layer(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]);
            int in = L.in_dim, out = L.out_dim, C = L.in_c;
            size_t nw = (size_t)L.kernel * L.kernel * C * L.out_c;
            float *W, *b;
            random_layer(&rng, (int)(nw / (size_t)L.out_c), L.out_c, 1, &W, &b);
            float *X = malloc(sizeof(float) * (size_t)in * R), *ref = malloc(sizeof(float) * (size_t)out * R);
            float *XT = malloc(sizeof(float) * (size_t)in * R), *YT = malloc(sizeof(float) * ((size_t)out + 1) * R);
            float *Y = malloc(sizeof(float) * (size_t)out * R);
            /* pass 0: random rows, and every 7th input zero in all 16 rows (skipped whole);
             * pass 1: channel 0 has +inf weights and is zero in the even rows, 1 in the odd;
             * pass 2: the same weights, every input nonzero but channel 0 of the last third
             * of the pixels, zero in the even rows (a zero scan that stops early misses it) */
            for (int inf = 0; inf < 3; inf++) {
                for (int r = 0; r < R; r++) {
                    float *x = X + (size_t)r * in;
                    if (inf < 2)
                        fill_inputs(&rng, x, (size_t)in, r % 3 == 0 ? 0.0 : r % 3 == 1 ? 0.5 : 0.95, r % 3 == 2);
                    else
                        for (int i = 0; i < in; i++) x[i] = 1.0f + 0.125f * (float)(i % 5);
                    if (inf == 0)
                        for (int i = 0; i < in; i += 7) x[i] = 0.0f;
                }
                if (inf == 1)
                    for (size_t t = 0; t < nw; t += (size_t)C * L.out_c)
                        for (int f = 0; f < L.out_c; f++) W[t + (size_t)f] = INFINITY;
                if (inf > 0)
                    for (int r = 0; r < R; r++)
                        for (int i = inf == 1 ? 0 : in / C * 2 / 3 * C; i < in; i += C)
                            X[(size_t)r * in + i] = r % 2 ? 1.0f : (r % 4 ? -0.0f : 0.0f);
                ks[k]->to_lanes(X, (size_t)in, in, XT);
                for (int a = 0; a < 3; a++) {
                    for (int r = 0; r < R; r++) {
                        generic->conv(&L, W, b, X + (size_t)r * in, ref + (size_t)r * out);
                        if (acts[a] == NEVO_ACT_TANH)
                            generic->tanh(ref + (size_t)r * out, out);
                        else if (acts[a] == NEVO_ACT_RELU)
                            for (int j = 0; j < out; j++) {
                                float *v = &ref[(size_t)r * out + j];
                                *v = *v < 0.0f ? 0.0f : *v;
                            }
                    }
                    for (size_t i = 0; i < ((size_t)out + 1) * R; i++) YT[i] = NAN;
                    ks[k]->conv_lanes(&L, W, b, XT, acts[a], YT);
                    for (int i = 0; i < R; i++)
                        CHECK_MSG(isnan(YT[(size_t)out * R + i]), "%s conv_lanes: wrote past the output", ks[k]->name);
                    ks[k]->from_lanes(YT, out, Y, (size_t)out);
                    for (int r = 0; r < R; r++)
                        CHECK_MSG(same_bits(Y + (size_t)r * out, ref + (size_t)r * out, out),
                                  "%s conv_lanes %dx%dx%d k%d s%d f%d, activation %d, inf %d: row %d differs from "
                                  "generic",
                                  ks[k]->name, sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], (int)acts[a], inf, r);
                    if (inf == 1 && acts[a] == NEVO_ACT_NONE) /* the odd rows met the infinite weights */
                        CHECK(isinf(Y[(size_t)1 * out]) && !isinf(Y[0]));
                }
            }
            free(W), free(b), free(X), free(ref), free(XT), free(YT), free(Y);
        }
    }
    if (nevo_kernels_named("avx2")) CHECK(checked == (nevo_kernels_named("avx512") ? 2 : 1));
}

/* The signed-zero case of kernels_dense_lanes_bit_identical through conv_lanes: a 1x1
 * convolution with a -0 bias, channel 0's weights positive and channel 1's -0; pixels
 * (0, 1) sum to -0 when the zero is skipped and +0 in a plain chain of fmas, pixels
 * (0, 0) keep the bias, pixels (1, 0) are ordinary. Every row has zeros, so the
 * convolution takes its path for sparse planes. */
TEST(kernels_conv_lanes_signed_zero) {
    const NevoKernels *ks[3];
    int nk = kernel_sets(ks), checked = 0;
    const NevoKernels *generic = ks[0];
    enum { R = NEVO_LANES, H = 3, WD = 4, C = 2, F = 9 };
    NevoLayer L = conv_layer(H, WD, C, 1, 1, F);
    float W[C * F], b[F], X[R * H * WD * C], XT[H * WD * C * R], YT[H * WD * F * R], Y[R * H * WD * F];
    float ref[R * H * WD * F];
    for (int f = 0; f < F; f++) W[f] = 0.5f + (float)f, W[F + f] = -0.0f, b[f] = -0.0f;
    for (int r = 0; r < R; r++)
        for (int p = 0; p < H * WD; p++) {
            int kind = (r + p) % 3; /* 0: (0, 1), 1: (0, 0), 2: (1, 0) */
            X[(r * H * WD + p) * C] = kind == 2 ? 1.5f : 0.0f;
            X[(r * H * WD + p) * C + 1] = kind == 0 ? 1.0f : 0.0f;
        }
    for (int r = 0; r < R; r++) generic->conv(&L, W, b, X + r * H * WD * C, ref + r * H * WD * F);
    CHECK(ref[0] == 0.0f && signbit(ref[0])); /* row 0, pixel 0: (0, 1) */
    for (int k = 1; k < nk; k++) {
        if (!ks[k]->conv_lanes) continue;
        checked++;
        ks[k]->to_lanes(X, H * WD * C, H * WD * C, XT);
        for (int a = 0; a < 2; a++) {
            ks[k]->conv_lanes(&L, W, b, XT, a ? NEVO_ACT_RELU : NEVO_ACT_NONE, YT);
            ks[k]->from_lanes(YT, H * WD * F, Y, H * WD * F);
            CHECK_MSG(same_bits(Y, ref, R * H * WD * F), "%s conv_lanes: a -0 sum met a zero input (relu %d)",
                      ks[k]->name, a);
        }
    }
    if (nevo_kernels_named("avx2")) CHECK(checked == (nevo_kernels_named("avx512") ? 2 : 1));
}

/* The relu (one for every kernel set, vectorised for this CPU's clone): y < 0 ? 0 : y
 * bit for bit (negatives, -inf and negative subnormals to +0; -0, +0, NaN, positives
 * and +inf kept), every length up to 40 (the vector tails), nothing written past n. The
 * lanes kernels' own relu is checked in their tests. */
TEST(kernels_relu_bits) {
    static const float cases[] = {-1.5f, -0.0f, 0.0f, 2.25f, NAN, -INFINITY, INFINITY, -1e-45f, 1e-45f, -NAN};
    enum { NC = sizeof cases / sizeof cases[0] };
    float y[41], want[41];
    for (int n = 0; n <= 40; n++) {
        for (int i = 0; i <= 40; i++) y[i] = cases[(i * 7 + n) % NC];
        for (int i = 0; i <= 40; i++) want[i] = i < n && y[i] < 0.0f ? 0.0f : y[i];
        nevo_kernel_activate(NEVO_ACT_RELU, y, n);
        CHECK_MSG(same_bits(y, want, 41), "relu, n = %d: differs from y < 0 ? 0 : y", n);
    }
}

/* Error of got against the true tanh (libm's, in double) in units of the float spacing
 * at the true value. */
static double tanh_ulps(float x, float got) {
    double want = tanh((double)x);
    float w = fabsf((float)want);
    double ulp = (double)nextafterf(w, INFINITY) - (double)w;
    return fabs((double)got - want) / ulp;
}

/* nevo_tanhf and every kernel set's tanh: the same bits (vector bodies and tails), odd
 * symmetry, the edges (+-0, subnormals, the clamp at 9, infinities, NaN), and within
 * 2.5 ulp of the true tanh over a sample of floats with every exponent (the largest
 * error over all 1.09e9 floats in [0, 10), checked once exhaustively, is 2.42 ulp). */
TEST(kernels_tanh_accuracy_and_bit_identical) {
    const NevoKernels *ks[3];
    int nk = kernel_sets(ks);
    enum { N = 4099 + 32 }; /* sample blocks of 4099, not a multiple of any vector width */
    static float x[N], ref[N], y[N];
    double worst = 0.0;
    /* every 9973rd float from 0 to 10 (all exponents), then the edges */
    uint32_t bits = 0;
    for (int pass = 0; bits < 0x41200000u; pass++) {
        int n = 0;
        for (; n < N - 32 && bits < 0x41200000u; n++, bits += 9973u) memcpy(&x[n], &bits, sizeof bits);
        if (pass == 0) {
            static const float edges[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, 1e-20f, 1e-8f, 0.1733f,
                                          0.5f, 0.6931472f, 1.0f, 8.999999f, 9.0f, 9.000001f, 12.0f, -9.0f,
                                          1e30f, INFINITY, -INFINITY, NAN, -NAN, -3.5f, -1e-8f};
            for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) x[n++] = edges[e];
        }
        for (int i = 0; i < n; i++) ref[i] = nevo_tanhf(x[i]);
        for (int k = 0; k < nk; k++) {
            memcpy(y, x, sizeof(float) * (size_t)n);
            ks[k]->tanh(y, n);
            CHECK_MSG(same_bits(y, ref, n), "%s tanh differs from nevo_tanhf", ks[k]->name);
            for (int len = 1; len <= 37; len += 3) { /* short arrays: all tail */
                memcpy(y, x, sizeof(float) * (size_t)len);
                ks[k]->tanh(y, len);
                CHECK_MSG(same_bits(y, ref, len), "%s tanh of %d elements differs", ks[k]->name, len);
            }
        }
        for (int i = 0; i < n; i++) {
            float v = x[i], t = ref[i];
            if (isnan(v)) {
                CHECK_MSG(isnan(t), "tanh(NaN) = %g", t);
                continue;
            }
            float neg = nevo_tanhf(-v);
            CHECK_MSG(memcmp(&neg, &t, sizeof t) != 0 || v == 0.0f, "tanh(-x) has the sign of tanh(x) at %g", v);
            CHECK_MSG(-neg == t, "tanh(-%.9g) = %.9g, not -tanh(x) = %.9g", v, neg, -t);
            CHECK_MSG(signbit(t) == signbit(v), "tanh(%g) = %g has the wrong sign", v, t);
            if (fabsf(v) >= 9.0f) {
                CHECK_MSG(fabsf(t) == 1.0f, "tanh(%g) = %.9g, want +-1 beyond the clamp", v, t);
                continue;
            }
            double e = tanh_ulps(v, t);
            if (e > worst) worst = e;
            CHECK_MSG(e <= 2.5, "tanh(%.9g) = %.9g: %.2f ulp from %.9g", v, t, e, tanh((double)v));
        }
    }
    CHECK(worst > 0.5); /* the sample reaches the rounding errors */
}


/* Convolutions (the MinAtar one, strides that do not divide, filters beyond one vector,
 * channels beyond a listing chunk) on sparse binary and dense inputs: every
 * implementation bit-identical to the portable one, which is within float rounding of
 * a double-precision sum; a NaN pixel reaches exactly the outputs whose windows hold it
 * and a zero one adds nothing to an infinite weight. */
TEST(kernels_conv_implementations_bit_identical) {
    const NevoKernels *ks[3];
    int nk = kernel_sets(ks);
    static const double p_zeros[] = {0.0, 0.6, 0.95};
    NevoRng rng;
    nevo_rng_init(&rng, 43, NEVO_RNG_USER, 0, 0, 0);
    for (size_t s = 0; s < N_CONV_SHAPES; s++) {
        const int *sh = conv_shapes[s];
        NevoLayer L = conv_layer(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]);
        int K = L.kernel, C = L.in_c, F = L.out_c;
        size_t nw = (size_t)K * K * C * F;
        float *W = malloc(sizeof(float) * nw), *b = malloc(sizeof(float) * (size_t)F);
        fill_gauss(&rng, W, nw, 0.3f);
        fill_gauss(&rng, b, (size_t)F, 0.5f);
        b[0] = -0.0f;
        float *x = malloc(sizeof(float) * (size_t)L.in_dim);
        float *ref = malloc(sizeof(float) * (size_t)L.out_dim), *y = malloc(sizeof(float) * (size_t)L.out_dim);
        for (size_t z = 0; z < sizeof p_zeros / sizeof p_zeros[0]; z++) {
            fill_inputs(&rng, x, (size_t)L.in_dim, p_zeros[z], z > 0);
            for (int k = 0; k < nk; k++) {
                for (int i = 0; i < L.out_dim; i++) y[i] = NAN;
                ks[k]->conv(&L, W, b, x, y);
                if (k == 0) {
                    memcpy(ref, y, sizeof(float) * (size_t)L.out_dim);
                    for (int oy = 0; oy < L.out_h; oy++)
                        for (int ox = 0; ox < L.out_w; ox++)
                            for (int f = 0; f < F; f++) {
                                double sum = b[f], mag = fabs(b[f]);
                                for (int ky = 0; ky < K; ky++)
                                    for (int kx = 0; kx < K; kx++)
                                        for (int c = 0; c < C; c++) {
                                            double t = (double)x[((size_t)(oy * L.stride + ky) * L.in_w +
                                                                  (ox * L.stride + kx)) * C + c] *
                                                       W[(((size_t)ky * K + kx) * C + c) * F + f];
                                            sum += t, mag += fabs(t);
                                        }
                                float got = y[((size_t)oy * L.out_w + ox) * F + f];
                                CHECK_MSG(fabs(got - sum) <= 2e-6 * mag + 1e-7,
                                          "generic conv %zu at (%d, %d, %d): %.9g vs %.9g", s, oy, ox, f, got, sum);
                            }
                }
                CHECK_MSG(same_bits(y, ref, L.out_dim),
                          "%s conv %dx%dx%d k%d s%d f%d, p_zero %.2f: differs from generic", ks[k]->name, sh[0],
                          sh[1], sh[2], sh[3], sh[4], sh[5], p_zeros[z]);
            }
        }
        free(W), free(b), free(x), free(ref), free(y);
    }

    /* 6x6x2, kernel 3, stride 1, 3 filters. Channel 0 is all zeros against infinite
     * weights, channel 1 all nonzero (so the kernels take their dense path): each output
     * is its bias, then one fma per window pixel of channel 1, in (ky, kx) order. */
    {
        NevoLayer L = conv_layer(6, 6, 2, 3, 1, 3);
        float W[3 * 3 * 2 * 3], b[3] = {0.5f, -0.0f, -2.0f}, x[6 * 6 * 2], y[4 * 4 * 3];
        for (int t = 0; t < 9; t++)
            for (int f = 0; f < 3; f++) {
                W[(t * 2 + 0) * 3 + f] = f == 1 ? -INFINITY : INFINITY;
                W[(t * 2 + 1) * 3 + f] = 0.25f * (float)(t - 4) + 0.125f * (float)f;
            }
        for (int i = 0; i < 36; i++) x[2 * i] = i % 2 ? 0.0f : -0.0f, x[2 * i + 1] = 1.0f + 0.0625f * (float)i;
        for (int k = 0; k < nk; k++) {
            ks[k]->conv(&L, W, b, x, y);
            for (int oy = 0; oy < 4; oy++)
                for (int ox = 0; ox < 4; ox++)
                    for (int f = 0; f < 3; f++) {
                        float want = b[f];
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++)
                                want = fmaf(x[((oy + ky) * 6 + ox + kx) * 2 + 1], W[((ky * 3 + kx) * 2 + 1) * 3 + f],
                                            want);
                        float v = y[(oy * 4 + ox) * 3 + f];
                        CHECK_MSG(same_bits(&v, &want, 1), "%s: output (%d, %d, %d) is %.9g, want %.9g", ks[k]->name,
                                  oy, ox, f, v, want);
                    }
        }
    }

    /* the same shape; infinite weights, zero inputs but one NaN pixel at (2, 4) */
    NevoLayer L = conv_layer(6, 6, 2, 3, 1, 3);
    float W[3 * 3 * 2 * 3], b[3] = {0.5f, -0.0f, -2.0f}, x[6 * 6 * 2], y[4 * 4 * 3];
    for (int i = 0; i < 3 * 3 * 2 * 3; i++) W[i] = i % 2 ? INFINITY : -INFINITY;
    for (int i = 0; i < 6 * 6 * 2; i++) x[i] = i % 3 ? 0.0f : -0.0f;
    x[(2 * 6 + 4) * 2 + 1] = NAN;
    for (int k = 0; k < nk; k++) {
        ks[k]->conv(&L, W, b, x, y);
        for (int oy = 0; oy < 4; oy++)
            for (int ox = 0; ox < 4; ox++)
                for (int f = 0; f < 3; f++) {
                    float v = y[(oy * 4 + ox) * 3 + f];
                    int holds = oy <= 2 && 2 <= oy + 2 && ox <= 4 && 4 <= ox + 2;
                    if (holds)
                        CHECK_MSG(isnan(v), "%s: output (%d, %d, %d) is %g, the NaN pixel is in its window",
                                  ks[k]->name, oy, ox, f, v);
                    else
                        CHECK_MSG(same_bits(&v, &b[f], 1), "%s: output (%d, %d, %d) is %g, want the bias %g",
                                  ks[k]->name, oy, ox, f, v, b[f]);
                }
    }
}

TEST(policy_nparams_and_flops) {
    NevoEnv *env = open_env("CartPole-v1");
    int h[2] = {64, 64};
    NevoPolicyConfig c = mlp_config("tanh", 2, h);
    NevoPolicy *p = new_policy(nevo_env_spec(env), &c, 0);
    /* 4->64->64->2: (4*64+64) + (64*64+64) + (64*2+2) */
    CHECK_EQ_INT(p->nparams, 4610);
    CHECK_EQ_INT(p->n_out, 2);
    CHECK_NEAR(nevo_policy_flops(p), 2.0 * (4 * 64 + 64 * 64 + 64 * 2), 0);
    nevo_policy_free(p);
    nevo_env_free(env);

    NevoEnvSpec img = image_spec(10, 10, 4, 6);
    int h1[1] = {16};
    c = mlp_config("relu", 1, h1);
    c.n_conv = 2;
    c.n_conv_kernels = c.n_conv_strides = 2;
    c.conv_filters[0] = 8, c.conv_kernels[0] = 3, c.conv_strides[0] = 1; /* -> 8x8x8 */
    c.conv_filters[1] = 4, c.conv_kernels[1] = 3, c.conv_strides[1] = 2; /* -> 3x3x4 */
    p = new_policy(&img, &c, 0);
    /* (3*3*4*8+8) + (3*3*8*4+4) + (36*16+16) + (16*6+6) */
    CHECK_EQ_INT(p->nparams, 296 + 292 + 592 + 102);
    CHECK_NEAR(nevo_policy_flops(p), 2.0 * (36 * 512 + 72 * 36 + 36 * 16 + 16 * 6), 0);
    nevo_policy_free(p);
}

TEST(policy_new_rejects_bad_shapes) {
    NevoEnv *env = open_env("CartPole-v1");
    int h[1] = {8};
    NevoPolicyConfig c = mlp_config("tanh", 1, h);
    c.n_conv = 1;
    c.n_conv_kernels = c.n_conv_strides = 1;
    c.conv_filters[0] = 4, c.conv_kernels[0] = 3, c.conv_strides[0] = 1;
    NevoPolicy *p = (NevoPolicy *)1;
    NevoError err = {0};
    CHECK(nevo_policy_new(nevo_env_spec(env), &c, 0, &p, &err) == NEVO_ERR_INVALID);
    CHECK(p == NULL);
    CHECK_MSG(strstr(err.msg, "CartPole-v1") && strstr(err.msg, "conv"), "message: %s", err.msg);
    nevo_env_free(env);

    NevoEnvSpec img = image_spec(5, 6, 1, 3);
    c.conv_kernels[0] = 6; /* wider than the 5 rows */
    memset(&err, 0, sizeof err);
    CHECK(nevo_policy_new(&img, &c, 0, &p, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "kernel 6"), "message: %s", err.msg);
}

/* --- outputs to actions ------------------------------------------------------------- */

TEST(policy_actions_argmax_first_maximum) {
    NevoEnvSpec img = image_spec(3, 3, 1, 5);
    NevoPolicyConfig c = mlp_config("tanh", 0, NULL);
    NevoPolicy *p = new_policy(&img, &c, 0);
    const float out[6][5] = {
        {1, 3, 3, 0, 2},          /* tie: the first one */
        {5, 5, 5, 5, 5},          /* all equal: 0 */
        {-1, -2, -3, -4, -0.5f},  /* last */
        {0, 0, 0, 7, 7},          /* tie at the end */
        {-INFINITY, -1e30f, -1e30f, -INFINITY, -2e30f},
        {0.1f, 0.2f, 0.30000001f, 0.3f, 0.29f},
    };
    const float want[6] = {1, 0, 4, 3, 1, 2};
    float act[6];
    nevo_policy_actions(p, &out[0][0], 6, act);
    for (int i = 0; i < 6; i++) CHECK_MSG(act[i] == want[i], "row %d: %g, want %g", i, act[i], want[i]);
    nevo_policy_free(p);
}

TEST(policy_actions_continuous_bounds) {
    NevoEnv *env = open_env("Pendulum-v1");
    NevoPolicyConfig c = mlp_config("tanh", 0, NULL);
    NevoPolicy *p = new_policy(nevo_env_spec(env), &c, 0);
    const float out[5] = {100.0f, -100.0f, 0.0f, 0.5f, -1e30f};
    float a[5];
    nevo_policy_actions(p, out, 5, a);
    CHECK(a[0] == 2.0f && a[1] == -2.0f && a[2] == 0.0f && a[4] == -2.0f);
    CHECK_NEAR(a[3], 2.0 * tanh(0.5), 1e-6);
    nevo_policy_free(p);
    nevo_env_free(env);

    /* asymmetric bounds, per dimension */
    float lo[3] = {-1.0f, 0.0f, -3.0f}, hi[3] = {3.0f, 1.0f, -2.0f};
    NevoEnvSpec box = box_spec(2, 3, lo, hi);
    p = new_policy(&box, &c, 0);
    const float big[2][3] = {{50, 50, 50}, {-50, -50, -50}};
    float ab[2][3];
    nevo_policy_actions(p, &big[0][0], 2, &ab[0][0]);
    for (int j = 0; j < 3; j++) {
        CHECK_MSG(ab[0][j] == hi[j], "dim %d: %.9g, want high %g", j, ab[0][j], hi[j]);
        CHECK_MSG(ab[1][j] == lo[j], "dim %d: %.9g, want low %g", j, ab[1][j], lo[j]);
    }
    NevoRng rng;
    nevo_rng_init(&rng, 17, NEVO_RNG_USER, 0, 0, 0);
    float o[300], av[300];
    fill_gauss(&rng, o, 300, 2.0f);
    nevo_policy_actions(p, o, 100, av);
    for (int i = 0; i < 100; i++)
        for (int j = 0; j < 3; j++) {
            double want = lo[j] + 0.5 * (tanh(o[i * 3 + j]) + 1.0) * (hi[j] - lo[j]);
            CHECK_NEAR(av[i * 3 + j], want, 1e-6 * (hi[j] - lo[j]) + 1e-6);
            CHECK(av[i * 3 + j] >= lo[j] && av[i * 3 + j] <= hi[j]);
        }
    nevo_policy_free(p);
}

/* Observation normalisation through an identity network: out = clip((x - mean)/std, ±5). */
TEST(policy_obs_norm_clips) {
    float lo[4] = {-1, -1, -1, -1}, hi[4] = {1, 1, 1, 1};
    NevoEnvSpec box = box_spec(4, 4, lo, hi);
    NevoPolicyConfig c = mlp_config("tanh", 0, NULL);
    NevoPolicy *p = new_policy(&box, &c, 1);
    CHECK_EQ_INT(p->nparams, 4 * 4 + 4);
    /* fresh policy: mean 0, std 1 */
    for (int i = 0; i < 4; i++) CHECK(p->obs_mean[i] == 0.0f && p->obs_std[i] == 1.0f);
    float theta[20] = {0};
    for (int i = 0; i < 4; i++) theta[i * 4 + i] = 1.0f;
    const float mean[4] = {1.0f, -2.0f, 0.0f, 10.0f}, std[4] = {2.0f, 0.5f, 1.0f, 0.125f};
    memcpy(p->obs_mean, mean, sizeof mean);
    memcpy(p->obs_std, std, sizeof std);
    const float obs[2][4] = {{7.0f, -5.5f, 0.25f, 10.6875f},   /* 3, -7, 0.25, 5.5 */
                             {-9.0f, -4.5f, -6.0f, 9.375f}};   /* -5, -5, -6, -5 */
    const float want[2][4] = {{3.0f, -5.0f, 0.25f, 5.0f}, {-5.0f, -5.0f, -5.0f, -5.0f}};
    int net[2] = {0, 0};
    float out[8];
    float *scratch = malloc(sizeof(float) * nevo_policy_scratch_floats(p, 2));
    nevo_policy_forward(p, theta, 20, net, &obs[0][0], 2, out, scratch);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            CHECK_MSG(out[i * 4 + j] == want[i][j], "row %d dim %d: %.9g, want %g", i, j,
                      out[i * 4 + j], want[i][j]);
    /* off: the raw observation */
    p->obs_norm = 0;
    nevo_policy_forward(p, theta, 20, net, &obs[0][0], 2, out, scratch);
    CHECK(memcmp(out, obs, sizeof out) == 0);
    free(scratch);
    nevo_policy_free(p);
}

/* --- initialisation ----------------------------------------------------------------- */

/* Sample mean and std of n floats at stride. */
static void moments(const float *x, size_t n, size_t stride, double *mean, double *std) {
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++) s += x[i * stride];
    *mean = s / n;
    for (size_t i = 0; i < n; i++) ss += (x[i * stride] - *mean) * (x[i * stride] - *mean);
    *std = sqrt(ss / n);
}

TEST(policy_init_scaled) {
    NevoNoise *noise = small_noise();
    float lo[20], hi[20];
    for (int i = 0; i < 20; i++) lo[i] = -1, hi[i] = 1;
    NevoEnvSpec box = box_spec(300, 20, lo, hi);
    int h[1] = {203}; /* layers of 60900 and 4060 weights: vector loops end with a tail */
    NevoPolicyConfig c = mlp_config("tanh", 1, h);
    NevoPolicy *p = new_policy(&box, &c, 0);
    float *theta = malloc(sizeof(float) * p->nparams);
    for (size_t i = 0; i < p->nparams; i++) theta[i] = NAN; /* init must write everything */
    nevo_policy_init_params(p, noise, 7, 2, 5, theta);
    const int fan[2] = {300, 203}, units[2] = {203, 20};
    size_t off = 0;
    for (int l = 0; l < 2; l++) {
        size_t nw = (size_t)fan[l] * units[l];
        double mean, sd, want = 1.0 / sqrt(fan[l]);
        moments(theta + off, nw, 1, &mean, &sd);
        /* 4.5 standard errors: mean sd/sqrt(n), std sd/sqrt(2n) */
        CHECK_MSG(fabs(mean) < 4.5 * want / sqrt((double)nw), "layer %d mean %g", l, mean);
        CHECK_MSG(fabs(sd / want - 1.0) < 4.5 / sqrt(2.0 * nw), "layer %d std %g, want %g", l, sd, want);
        /* layer l's weights are the noise slice named (seed, INIT, generation,
         * individual, l), each times the float 1/sqrt(fan_in): one rounding, so the
         * bits are known whatever loop computes them */
        const float *z = nevo_noise_slice(noise, nw, 7, NEVO_RNG_INIT, 2, 5, (uint32_t)l);
        const float scale = (float)want;
        for (size_t i = 0; i < nw; i++)
            CHECK_MSG(theta[off + i] == z[i] * scale, "layer %d weight %zu: %.9g vs slice %.9g x %.9g", l, i,
                      theta[off + i], z[i], scale);
        off += nw;
        for (int j = 0; j < units[l]; j++) CHECK_MSG(theta[off + j] == 0.0f, "layer %d bias %d", l, j);
        off += (size_t)units[l];
    }
    CHECK_EQ_INT(off, p->nparams);

    /* a pure function of (seed, generation, individual) */
    float *again = malloc(sizeof(float) * p->nparams);
    nevo_policy_init_params(p, noise, 7, 2, 5, again);
    CHECK(memcmp(theta, again, sizeof(float) * p->nparams) == 0);
    nevo_policy_init_params(p, noise, 7, 2, 6, again);
    CHECK(memcmp(theta, again, sizeof(float) * 100) != 0);
    nevo_policy_init_params(p, noise, 7, 3, 5, again);
    CHECK(memcmp(theta, again, sizeof(float) * 100) != 0);
    nevo_policy_init_params(p, noise, 8, 2, 5, again);
    CHECK(memcmp(theta, again, sizeof(float) * 100) != 0);
    free(again);
    free(theta);
    nevo_policy_free(p);

    /* conv: fan_in = k*k*in_c */
    NevoEnvSpec img = image_spec(10, 10, 4, 3);
    c = mlp_config("relu", 0, NULL);
    c.n_conv = 1;
    c.n_conv_kernels = c.n_conv_strides = 1;
    c.conv_filters[0] = 64, c.conv_kernels[0] = 5, c.conv_strides[0] = 1;
    p = new_policy(&img, &c, 0);
    theta = malloc(sizeof(float) * p->nparams);
    nevo_policy_init_params(p, noise, 1, 0, 0, theta);
    size_t nw = 5 * 5 * 4 * 64;
    double mean, sd, want = 1.0 / sqrt(100.0);
    moments(theta, nw, 1, &mean, &sd);
    CHECK_MSG(fabs(sd / want - 1.0) < 4.5 / sqrt(2.0 * nw), "conv std %g, want %g", sd, want);
    for (int j = 0; j < 64; j++) CHECK(theta[nw + j] == 0.0f);
    free(theta);
    nevo_policy_free(p);
    free_noise(noise);
}

/* normc: each output unit's incoming weight vector (a strided column of W) has norm 1,
 * 0.01 on the output layer; biases zero. */
TEST(policy_init_normc) {
    NevoEnvSpec img = image_spec(8, 8, 3, 5);
    int h[2] = {32, 16};
    NevoPolicyConfig c = mlp_config("tanh", 2, h);
    strcpy(c.init, "normc");
    c.n_conv = 1;
    c.n_conv_kernels = c.n_conv_strides = 1;
    c.conv_filters[0] = 6, c.conv_kernels[0] = 3, c.conv_strides[0] = 2; /* -> 3x3x6 = 54 */
    NevoPolicy *p = new_policy(&img, &c, 0);
    float *theta = malloc(sizeof(float) * p->nparams);
    NevoNoise *noise = small_noise();
    nevo_policy_init_params(p, noise, 3, 0, 1, theta);
    free_noise(noise);
    const int fan[4] = {27, 54, 32, 16}, units[4] = {6, 32, 16, 5};
    size_t off = 0;
    for (int l = 0; l < 4; l++) {
        double target = l == 3 ? 0.01 : 1.0;
        for (int u = 0; u < units[l]; u++) {
            double ss = 0;
            for (int r = 0; r < fan[l]; r++) {
                double w = theta[off + (size_t)r * units[l] + u];
                ss += w * w;
            }
            CHECK_MSG(fabs(sqrt(ss) - target) < 1e-5 * target, "layer %d unit %d norm %.8g, want %g",
                      l, u, sqrt(ss), target);
        }
        off += (size_t)fan[l] * units[l];
        for (int u = 0; u < units[l]; u++) CHECK(theta[off + u] == 0.0f);
        off += (size_t)units[l];
    }
    CHECK_EQ_INT(off, p->nparams);
    free(theta);
    nevo_policy_free(p);
}

/* --- observation statistics --------------------------------------------------------- */

TEST(policy_obs_stats) {
    enum { N = 1000, D = 5 };
    static float obs[N][D];
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        obs[i][0] = (float)(3.0 + 2.0 * nevo_rng_normal(&rng));
        obs[i][1] = 7.0f;                                          /* variance 0 */
        obs[i][2] = (float)(0.01 * nevo_rng_normal(&rng));          /* variance 1e-4 */
        obs[i][3] = (float)(1000.0 + nevo_rng_normal(&rng));        /* large mean */
        obs[i][4] = (float)nevo_rng_uniform(&rng);
    }
    NevoObsStats all, a, b;
    nevo_obs_stats_init(&all, D);
    nevo_obs_stats_init(&a, D);
    nevo_obs_stats_init(&b, D);
    for (int i = 0; i < N; i++) {
        nevo_obs_stats_add(&all, obs[i]);
        nevo_obs_stats_add(i < 400 ? &a : &b, obs[i]);
    }
    CHECK(all.count == N);
    nevo_obs_stats_merge(&a, &b);
    CHECK(a.count == N);
    for (int k = 0; k < D; k++) {
        CHECK_NEAR(a.sum[k], all.sum[k], 1e-12 * fabs(all.sum[k]) + 1e-12);
        CHECK_NEAR(a.sumsq[k], all.sumsq[k], 1e-12 * fabs(all.sumsq[k]) + 1e-12);
    }

    float lo[1] = {-1}, hi[1] = {1};
    NevoEnvSpec box = box_spec(D, 1, lo, hi);
    NevoPolicyConfig c = mlp_config("tanh", 0, NULL);
    NevoPolicy *p = new_policy(&box, &c, 1);
    /* no data: unchanged */
    NevoObsStats empty;
    nevo_obs_stats_init(&empty, D);
    nevo_obs_stats_apply(&empty, p);
    for (int k = 0; k < D; k++) CHECK(p->obs_mean[k] == 0.0f && p->obs_std[k] == 1.0f);

    nevo_obs_stats_apply(&all, p);
    for (int k = 0; k < D; k++) {
        /* two-pass mean and population variance in double */
        double m = 0, v = 0;
        for (int i = 0; i < N; i++) m += obs[i][k];
        m /= N;
        for (int i = 0; i < N; i++) v += (obs[i][k] - m) * (obs[i][k] - m);
        v /= N;
        double sd = sqrt(v > 1e-2 ? v : 1e-2);
        CHECK_MSG(fabs(p->obs_mean[k] - m) <= 1e-6 * fabs(m) + 1e-9, "dim %d mean %.9g vs %.9g", k,
                  p->obs_mean[k], m);
        CHECK_MSG(fabs(p->obs_std[k] - sd) <= 2e-6 * sd, "dim %d std %.9g vs %.9g", k, p->obs_std[k], sd);
    }
    CHECK(p->obs_std[1] == (float)0.1 && p->obs_std[2] == (float)0.1); /* floored */
    CHECK(p->obs_std[0] > 1.8f && p->obs_std[0] < 2.2f);
    nevo_obs_stats_free(&all);
    nevo_obs_stats_free(&a);
    nevo_obs_stats_free(&b);
    nevo_obs_stats_free(&empty);
    CHECK(all.sum == NULL && all.sumsq == NULL);
    nevo_policy_free(p);
    nevo_policy_free(NULL);
}

/* --- recurrent policies ---------------------------------------------------------- */

/* A naive double-precision recurrent forward, from the layout policy.h documents: a
 * tanh dense layer (in, D), the LSTM (lstm.h: Wx (D, 4H), Wh (H, 4H), b (4H), gates i,
 * f, g, o), the output layer (H, O); one row, state (h, c) in double. */
static void ref_recurrent_step(const float *th, const float *x, int in, int D, int H, int O, double *h, double *c,
                               double *y) {
    double a[64], z[256], hn[64];
    for (int j = 0; j < D; j++) {
        double s = th[in * D + j];
        for (int i = 0; i < in; i++) s += (double)x[i] * th[i * D + j];
        a[j] = tanh(s);
    }
    size_t wx = (size_t)in * D + D, G = 4 * (size_t)H, wh = wx + (size_t)D * G, b = wh + (size_t)H * G;
    for (size_t g = 0; g < G; g++) {
        double s = th[b + g];
        for (int i = 0; i < D; i++) s += a[i] * th[wx + (size_t)i * G + g];
        for (int i = 0; i < H; i++) s += h[i] * th[wh + (size_t)i * G + g];
        z[g] = s;
    }
    for (int j = 0; j < H; j++) {
        double ig = 1 / (1 + exp(-z[j])), fg = 1 / (1 + exp(-z[H + j])), gg = tanh(z[2 * H + j]),
               og = 1 / (1 + exp(-z[3 * H + j]));
        c[j] = fg * c[j] + ig * gg;
        hn[j] = og * tanh(c[j]);
    }
    memcpy(h, hn, sizeof(double) * (size_t)H);
    size_t wo = b + G;
    for (int k = 0; k < O; k++) {
        double s = th[wo + (size_t)H * O + k];
        for (int j = 0; j < H; j++) s += h[j] * th[wo + (size_t)j * O + k];
        y[k] = s;
    }
}

/* policy.lstm puts an LSTM between the hidden layers and the output layer: its
 * parameters where lstm.h lays them, its init lstm.h's from the layer's noise slice;
 * the recurrent forward follows the double-precision reference over an episode, and
 * each row's outputs and states are bit-identical however rows of different networks
 * are batched. */
TEST(policy_lstm_forward_state) {
    NevoEnv *env = open_env("CartPole-v1");
    const NevoEnvSpec *spec = nevo_env_spec(env);
    int hidden[1] = {6};
    NevoPolicyConfig cfg = mlp_config("tanh", 1, hidden);
    cfg.lstm = 5;
    NevoPolicy *p = new_policy(spec, &cfg, 0);
    enum { IN = 4, D = 6, H = 5, O = 2, NETS = 3, T = 12, ROWS = 7 };
    CHECK_EQ_INT(p->n_layers, 3);
    CHECK_EQ_INT(p->lstm_layer, 1);
    CHECK(p->layers[1].kind == NEVO_LAYER_LSTM);
    CHECK_EQ_INT(p->nparams, IN * D + D + (D + H + 1) * 4 * H + H * O + O);
    CHECK_EQ_INT(nevo_policy_state_floats(p), 2 * H);
    CHECK_NEAR(nevo_policy_flops(p), 2.0 * IN * D + 2.0 * (D + H) * 4 * H + 2.0 * H * O, 0);
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new((size_t)1 << 16, pool);
    size_t np = p->nparams, stride = np + 5;
    float *params = calloc(stride * NETS, sizeof(float));
    for (int j = 0; j < NETS; j++) nevo_policy_init_params(p, noise, 7, 1, (uint32_t)j, params + stride * j);
    /* the LSTM block: lstm.h's init from the slice (seed, INIT, generation, individual, layer 1) */
    float want[(D + H + 1) * 4 * H];
    nevo_lstm_init(D, H, nevo_noise_slice(noise, (D + H) * 4 * H, 7, NEVO_RNG_INIT, 1, 2, 1), want);
    CHECK(memcmp(params + stride * 2 + p->layers[1].w_off, want, sizeof want) == 0);
    for (int j = 0; j < NETS; j++) /* perturbed so that the biases matter too */
        for (size_t i = 0; i < np; i++) params[stride * j + i] += 0.05f * (float)sin(1.0 + i * 0.37 + j);

    /* ROWS rows over T steps: row r runs network r % NETS on its own observations */
    float obs[T][ROWS][IN], out[ROWS * O], state[ROWS * 2 * H], one_out[O], one_state[ROWS][2 * H];
    for (int t = 0; t < T; t++)
        for (int r = 0; r < ROWS; r++)
            for (int i = 0; i < IN; i++) obs[t][r][i] = (float)sin(0.3 * t + 1.1 * r + 0.7 * i) * (i == 1 && t % 3 ? 0.0f : 1.5f);
    int net[ROWS];
    for (int r = 0; r < ROWS; r++) net[r] = r % NETS == 1 && r > 3 ? 1 : r % NETS; /* runs and single rows */
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, ROWS));
    float *scratch1 = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, 1));
    double rh[ROWS][H], rc[ROWS][H], ry[O];
    memset(state, 0, sizeof state);
    memset(one_state, 0, sizeof one_state);
    memset(rh, 0, sizeof rh);
    memset(rc, 0, sizeof rc);
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        nevo_policy_forward_state(p, params, stride, net, &obs[t][0][0], ROWS, state, out, scratch);
        for (int r = 0; r < ROWS; r++) {
            /* the same row alone, with its own copy of the state */
            nevo_policy_forward_state(p, params, stride, &net[r], obs[t][r], 1, one_state[r], one_out, scratch1);
            CHECK_MSG(memcmp(one_out, out + r * O, sizeof one_out) == 0, "step %d row %d: alone differs", t, r);
            CHECK_MSG(memcmp(one_state[r], state + r * 2 * H, sizeof one_state[r]) == 0, "step %d row %d: state", t, r);
            ref_recurrent_step(params + stride * net[r], obs[t][r], IN, D, H, O, rh[r], rc[r], ry);
            for (int k = 0; k < O; k++) {
                double e = fabs(out[r * O + k] - ry[k]);
                worst = e > worst ? e : worst;
            }
            for (int j = 0; j < H; j++) {
                CHECK_NEAR(state[r * 2 * H + j], rh[r][j], 1e-5);
                CHECK_NEAR(state[r * 2 * H + H + j], rc[r][j], 1e-5);
            }
        }
    }
    CHECK_MSG(worst < 1e-5, "outputs off the reference by %g", worst);
    /* the state carries: a fresh state at the last step gives other outputs */
    float fresh[2 * H] = {0}, fresh_out[O];
    nevo_policy_forward_state(p, params, stride, &net[0], obs[T - 1][0], 1, fresh, fresh_out, scratch1);
    CHECK(memcmp(fresh_out, out, sizeof fresh_out) != 0);
    free(scratch);
    free(scratch1);
    free(params);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* An LSTM straight on the observations (no hidden layers), with normalisation: the
 * same as a policy fed the normalised observations without it. */
TEST(policy_lstm_on_observations_normalised) {
    NevoEnv *env = open_env("CartPole-v1");
    const NevoEnvSpec *spec = nevo_env_spec(env);
    NevoPolicyConfig cfg = mlp_config("tanh", 0, NULL);
    cfg.lstm = 3;
    NevoPolicy *p = new_policy(spec, &cfg, 1), *q = new_policy(spec, &cfg, 0);
    CHECK(p->pre == NULL && p->lstm_layer == 0 && p->n_layers == 2);
    for (int i = 0; i < 4; i++) p->obs_mean[i] = 0.1f * i, p->obs_std[i] = 0.5f + i;
    float theta[512];
    CHECK(p->nparams <= 512);
    for (size_t i = 0; i < p->nparams; i++) theta[i] = (float)sin(0.9 * i);
    float s1[6] = {0}, s2[6] = {0}, o1[2], o2[2], xn[4];
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, 1));
    int net = 0;
    for (int t = 0; t < 5; t++) {
        float obs[4] = {(float)t, -1.0f, 30.0f * t, 0.25f};
        nevo_policy_forward_state(p, theta, p->nparams, &net, obs, 1, s1, o1, scratch);
        nevo_policy_normalise_obs(p, obs, 1, xn);
        CHECK(xn[2] <= 5.0f);
        nevo_policy_forward_state(q, theta, q->nparams, &net, xn, 1, s2, o2, scratch);
        CHECK(memcmp(o1, o2, sizeof o1) == 0 && memcmp(s1, s2, sizeof s1) == 0);
    }
    free(scratch);
    nevo_policy_free(p);
    nevo_policy_free(q);
    nevo_env_free(env);
}
