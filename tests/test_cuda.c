/* The CUDA backend's kernels, checked against the CPU bit for bit.
 *
 * Without a GPU (CI): the kernels' bodies (src/nn/kernel_bodies.h) run on the CPU, the
 * grid looped over phase by phase as the device runs it, with the CUDA backend's
 * forward's own sequence of launches; every output must equal nevo_policy_forward's,
 * every built network nevo_taskset_build's (memcmp). With a CUDA=1 build and a GPU:
 * the backend itself against the CPU backend (forwards, builds, whole evaluations);
 * without one those tests print that they were skipped. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nevo/backend.h"
#include "nevo/eval.h"
#include "nevo/rng.h"
#include "nevo/tasks.h"
#include "nevo/vec.h"
#include "nevo/params.h"
#include "nn/kernels.h"

static NevoEnv *open_env(const char *name) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new(name, NULL, 0, &env, &err) == NEVO_OK, "%s: %s", name, err.msg);
    return env;
}

/* The three shapes the kernels must cover. */
enum { NET_MINATAR, NET_MLP_NORM, NET_CONV_S2, NET_CONV_BIG, N_SHAPES };

static NevoPolicy *shape_policy(int shape, NevoEnv **env_out) {
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    const char *env_name = "minatar/breakout";
    int norm = 0;
    if (shape == NET_MINATAR) { /* conv 3x3x16, dense 128, relu: the MinAtar network */
        c.n_conv = c.n_conv_kernels = c.n_conv_strides = 1;
        c.conv_filters[0] = 16, c.conv_kernels[0] = 3, c.conv_strides[0] = 1;
        c.n_hidden = 1, c.hidden[0] = 128;
        strcpy(c.activation, "relu");
    } else if (shape == NET_MLP_NORM) { /* tanh MLP, normalised observations, box actions */
        env_name = "mujoco/halfcheetah";
        c.n_hidden = 2, c.hidden[0] = 70, c.hidden[1] = 150; /* widths off the kernels' tiles */
        strcpy(c.activation, "tanh");
        norm = 1;
    } else if (shape == NET_CONV_BIG) { /* a conv layer past a block's 48 KB of shared
                                           * memory (6x6x10x40 weights): the thread-per-output kernel */
        env_name = "minatar/seaquest";
        c.n_conv = c.n_conv_kernels = c.n_conv_strides = 1;
        c.conv_filters[0] = 40, c.conv_kernels[0] = 6, c.conv_strides[0] = 1;
        c.n_hidden = 1, c.hidden[0] = 16;
        strcpy(c.activation, "relu");
    } else { /* conv 4x4 stride 2 then 2x2 with filters off the groups of 4, tanh */
        env_name = "minatar/space_invaders";
        c.n_conv = c.n_conv_kernels = c.n_conv_strides = 2;
        c.conv_filters[0] = 8, c.conv_kernels[0] = 4, c.conv_strides[0] = 2;
        c.conv_filters[1] = 18, c.conv_kernels[1] = 2, c.conv_strides[1] = 1;
        c.n_hidden = 1, c.hidden[0] = 33;
        strcpy(c.activation, "tanh");
    }
    strcpy(c.init, "scaled");
    NevoEnv *env = open_env(env_name);
    NevoPolicy *p = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_policy_new(nevo_env_spec(env), &c, norm, &p, &err) == NEVO_OK, "%s", err.msg);
    if (norm) {
        NevoRng rng;
        nevo_rng_init(&rng, 77, 0, 0, 0, 0);
        for (int k = 0; k < p->obs_dim; k++) {
            p->obs_mean[k] = 0.3f * (float)nevo_rng_normal(&rng);
            p->obs_std[k] = 0.5f + (float)nevo_rng_uniform(&rng);
        }
    }
    *env_out = env;
    return p;
}

/* rows x stride parameters: N(0, 0.3) weights and biases, some exact zeros and -0 */
static float *random_params(const NevoPolicy *p, int rows, size_t stride, uint64_t seed) {
    float *params = nevo_alloc_aligned(sizeof(float) * stride * (size_t)rows);
    NevoRng rng;
    nevo_rng_init(&rng, seed, 1, 0, 0, 0);
    for (size_t k = 0; k < stride * (size_t)rows; k++) {
        double u = nevo_rng_uniform(&rng);
        params[k] = u < 0.01 ? 0.0f : u < 0.02 ? -0.0f : 0.3f * (float)nevo_rng_normal(&rng);
    }
    return params;
}

/* n observations: image planes of 0/1 (a third set, some -0), or normals */
static float *random_obs(const NevoPolicy *p, int n, uint64_t seed) {
    float *obs = nevo_alloc(sizeof(float) * (size_t)n * (size_t)p->obs_dim);
    NevoRng rng;
    nevo_rng_init(&rng, seed, 2, 0, 0, 0);
    int image = p->layers[0].kind == NEVO_LAYER_CONV;
    for (size_t k = 0; k < (size_t)n * (size_t)p->obs_dim; k++) {
        double u = nevo_rng_uniform(&rng);
        obs[k] = image ? (u < 0.33 ? 1.0f : u < 0.4 ? -0.0f : 0.0f) : 2.0f * (float)nevo_rng_normal(&rng);
    }
    return obs;
}

/* Row -> network: runs of 1 to 37 rows (longer than a dense block's, so they split), the
 * networks in no order, one coming back after others. */
static void make_which(int n, int nets, uint64_t seed, int *which) {
    NevoRng rng;
    nevo_rng_init(&rng, seed, 3, 0, 0, 0);
    for (int i = 0; i < n;) {
        int len = 1 + (int)(nevo_rng_uniform(&rng) * 37), net = (int)(nevo_rng_uniform(&rng) * nets);
        for (int k = 0; k < len && i < n; k++) which[i++] = net;
    }
}

/* The listed-inputs dense kernel (k_dense_l) over runs 0 .. n_runs - 1 (a.runs, of at
 * most `rows` rows; a.runs NULL: one row each), its grid run on the CPU phase by phase. */
static void emulate_kd1(NevoKDense a, int n_runs, int rows) {
    int cb = (a.out + NEVO_KD_COLS - 1) / NEVO_KD_COLS;
    float acc[NEVO_KD_THREADS][NEVO_KD1_ROWS * NEVO_KD_NJ];
    float *x = nevo_alloc(sizeof(float) * NEVO_KD1_KC * (size_t)rows);
    int idx[NEVO_KD1_KC + 1];
    for (int run = 0; run < n_runs; run++)
        for (int b = 0; b < cb; b++) {
            for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd1_init(a, run, b, t, rows, acc[t]);
            for (int k0 = 0; k0 < a.in; k0 += NEVO_KD1_KC) {
                memset(x, 0xff, sizeof(float) * NEVO_KD1_KC * (size_t)rows); /* unwritten shows */
                memset(idx, 0xff, sizeof idx);
                for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd1_load(a, run, t, k0, rows, x);
                for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd1_list(t, rows, x, idx);
                for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd1_accum(a, run, b, t, k0, rows, x, idx, acc[t]);
            }
            for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd1_store(a, run, b, t, rows, acc[t]);
        }
    free(x);
}

/* The CUDA backend's forward (backend_cuda.cu: cuda_forward), its launches run on the
 * CPU: each grid block by block, each phase by every thread of the block before the
 * next phase. */
/* f: the factored forward's members (NULL: none), whose corrections follow each
 * layer's base kernel (run without its activation), as cuda_forward_factored runs them */
static void emulate_factor(NevoKFactor *f, const NevoPolicy *p, int l, const float *X, int xs, float *Y, int ys,
                           int n) {
    NevoLRBlock bl[NEVO_LOWRANK_BLOCKS];
    nevo_lowrank_blocks(p, f->rank, bl);
    const NevoLayer *L = &p->layers[l];
    const int conv[6] = {L->in_w, L->in_c, L->out_h, L->out_w, L->kernel, L->stride};
    nevo_kf_layer(f, bl[2 * l], bl[2 * l + 1], (int)L->act, conv, X, xs, Y, ys);
    float part[16 * NEVO_LOWRANK_MAX], u[NEVO_LOWRANK_MAX];
    f->n = n;
    for (int blk = 0; blk < nevo_kf_blocks(*f); blk++) {
        if (L->kind == NEVO_LAYER_CONV) {
            for (int t = 0; t < NEVO_KF_THREADS; t++) nevo_kf_conv_u(*f, blk, t);
            for (int t = 0; t < NEVO_KF_THREADS; t++) nevo_kf_conv_apply(*f, blk, t);
        } else {
            memset(part, 0xff, sizeof part);
            memset(u, 0xff, sizeof u);
            for (int t = 0; t < NEVO_KF_THREADS; t++) nevo_kf_dot(*f, blk, t, part);
            for (int t = 0; t < NEVO_KF_THREADS; t++) nevo_kf_tree(*f, blk, t, part, u);
            for (int t = 0; t < NEVO_KF_THREADS; t++) nevo_kf_apply(*f, blk, t, u);
        }
    }
}

/* The tiled dense kernel (k_dense_t) over runs 0 .. n_runs - 1, likewise. */
static void emulate_kt(NevoKDense a, int n_runs) {
    int cb = (a.out + NEVO_KT_COLS - 1) / NEVO_KT_COLS;
    float(*acc)[NEVO_KT_SUMS] = nevo_alloc(sizeof(float) * NEVO_KT_SUMS * NEVO_KT_THREADS);
    float *x = nevo_alloc(sizeof(float) * NEVO_KT_KC * NEVO_KT_XS), *w = nevo_alloc(sizeof(float) * NEVO_KT_KC * NEVO_KT_COLS);
    for (int run = 0; run < n_runs; run++)
        for (int b = 0; b < cb; b++) {
            for (int t = 0; t < NEVO_KT_THREADS; t++) nevo_kt_init(a, run, b, t, acc[t]);
            for (int k0 = 0; k0 < a.in; k0 += NEVO_KT_KC) {
                memset(x, 0xff, sizeof(float) * NEVO_KT_KC * NEVO_KT_XS); /* unwritten shows (the pad stays) */
                memset(w, 0xff, sizeof(float) * NEVO_KT_KC * NEVO_KT_COLS);
                for (int t = 0; t < NEVO_KT_THREADS; t++) nevo_kt_load(a, run, b, t, k0, x, w);
                for (int t = 0; t < NEVO_KT_THREADS; t++) nevo_kt_accum(t, x, w, acc[t]);
            }
            for (int t = 0; t < NEVO_KT_THREADS; t++) nevo_kt_store(a, run, b, t, acc[t]);
        }
    free(acc), free(x), free(w);
}

static void emulate_forward(const NevoPolicy *p, const float *params, size_t stride, const int *which,
                            const float *obs, int n, float *out, size_t conv_smem_max, int dense_rows,
                            int min_runs, NevoKFactor *f) {
    int width = p->max_width > p->obs_dim ? p->max_width : p->obs_dim;
    float *A = nevo_alloc(sizeof(float) * (size_t)n * (size_t)width);
    float *B = nevo_alloc(sizeof(float) * (size_t)n * (size_t)width);
    int *runs = nevo_alloc(sizeof(int) * (size_t)(n + 1));
    int rows = 0, n_runs = dense_rows < 0   ? nevo_kd_runs(which, n, NEVO_KT_ROWS, runs)
                           : dense_rows ? nevo_kd1_runs(which, n, dense_rows, min_runs, runs, &rows)
                                        : nevo_kd_runs(which, n, NEVO_KD_ROWS, runs);
    const float *X = obs;
    int xs = p->obs_dim;
    if (p->obs_norm) {
        int blocks = (n * p->obs_dim + NEVO_KN_THREADS - 1) / NEVO_KN_THREADS;
        for (int b = 0; b < blocks; b++)
            for (int t = 0; t < NEVO_KN_THREADS; t++)
                nevo_kn_elem(obs, p->obs_mean, p->obs_std, n, p->obs_dim, A, width, b, t);
        X = A;
        xs = width;
    }
    float(*acc)[NEVO_KD_ROWS * NEVO_KD_NJ] = nevo_alloc(sizeof(float) * NEVO_KD_THREADS * NEVO_KD_ROWS * NEVO_KD_NJ);
    float tile[NEVO_KD_KC * NEVO_KD_ROWS];
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        int last = l == p->n_layers - 1;
        float *Y = last ? out : X == A ? B : A;
        int ys = last ? p->n_out : width;
        int act = f ? (int)NEVO_ACT_NONE : (int)L->act;
        if (L->kind == NEVO_LAYER_CONV) {
            NevoKConv a = {params, stride, which, X, xs, L->in_w, L->in_c, L->out_h, L->out_w, L->out_c,
                           L->kernel, L->stride, L->w_off, L->b_off, act, Y, ys, L->in_h};
            if (nevo_kc_smem_bytes(a) <= conv_smem_max) { /* the block-per-row kernel */
                float *sm = nevo_alloc_aligned(nevo_kc_smem_bytes(a));
                for (int row = 0; row < n; row++) {
                    memset(sm, 0xff, nevo_kc_smem_bytes(a));
                    for (int t = 0; t < NEVO_KC_THREADS; t++) nevo_kc_load(a, row, t, sm);
                    for (int t = 0; t < NEVO_KC_THREADS; t++) nevo_kc_items(a, row, t, sm);
                }
                free(sm);
            } else {
                int ob = (L->out_dim + NEVO_KC_THREADS - 1) / NEVO_KC_THREADS;
                for (int row = 0; row < n; row++)
                    for (int b = 0; b < ob; b++)
                        for (int t = 0; t < NEVO_KC_THREADS; t++) nevo_kc_out(a, row, b, t);
            }
        } else if (dense_rows < 0) { /* the tiled kernel */
            NevoKDense a = {params, stride, which, runs, X, xs, L->in_dim, L->out_dim,
                            L->w_off, L->b_off, act, 0, Y, ys, NULL};
            emulate_kt(a, n_runs);
        } else if (dense_rows) { /* the listed-inputs kernel, as the backend picks its rows */
            NevoKDense a = {params, stride, which, runs, X, xs, L->in_dim, L->out_dim,
                            L->w_off, L->b_off, act, 0, Y, ys, NULL};
            emulate_kd1(a, n_runs, rows);
        } else {
            NevoKDense a = {params, stride, which, runs, X, xs, L->in_dim, L->out_dim,
                            L->w_off, L->b_off, act, 0, Y, ys, NULL};
            int cb = (L->out_dim + NEVO_KD_COLS - 1) / NEVO_KD_COLS;
            for (int run = 0; run < n_runs; run++)
                for (int b = 0; b < cb; b++) {
                    for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd_init(a, run, b, t, acc[t]);
                    for (int k0 = 0; k0 < L->in_dim; k0 += NEVO_KD_KC) {
                        for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd_load(a, run, t, k0, tile);
                        for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd_accum(a, run, b, t, k0, tile, acc[t]);
                    }
                    for (int t = 0; t < NEVO_KD_THREADS; t++) nevo_kd_store(a, run, b, t, acc[t]);
                }
        }
        if (f) emulate_factor(f, p, l, X, xs, Y, ys, n);
        X = Y;
        xs = ys;
    }
    free(acc);
    free(A);
    free(B);
    free(runs);
}

/* CHECK that two output arrays hold the same bits, naming the first difference. */
static void check_same(const float *want, const float *got, size_t n, const char *what) {
    for (size_t k = 0; k < n; k++)
        CHECK_MSG(memcmp(&want[k], &got[k], sizeof(float)) == 0, "%s: element %zu: %.9g, want %.9g", what, k,
                  (double)got[k], (double)want[k]);
}

TEST(cuda_kernel_bodies_forward_match_cpu) {
    for (int shape = 0; shape < N_SHAPES; shape++) {
        NevoEnv *env;
        NevoPolicy *p = shape_policy(shape, &env);
        int nets = 5, n = 150;
        size_t stride = (p->nparams + 15) & ~(size_t)15;
        float *params = random_params(p, nets, stride, 10 + (uint64_t)shape);
        float *obs = random_obs(p, n, 20 + (uint64_t)shape);
        int *which = nevo_alloc(sizeof(int) * (size_t)n);
        make_which(n, nets, 30 + (uint64_t)shape, which);
        float *want = nevo_alloc(sizeof(float) * (size_t)n * (size_t)p->n_out);
        float *got = nevo_alloc(sizeof(float) * (size_t)n * (size_t)p->n_out);
        float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, n));
        nevo_policy_forward(p, params, stride, which, obs, n, want, scratch);
        if (shape == NET_CONV_BIG) { /* the shape is there for the fallback */
            const NevoLayer *L = &p->layers[0];
            NevoKConv a = {0};
            a.in_h = L->in_h, a.in_w = L->in_w, a.in_c = L->in_c, a.out_c = L->out_c, a.kernel = L->kernel;
            CHECK(L->kind == NEVO_LAYER_CONV && nevo_kc_smem_bytes(a) > NEVO_KC_SMEM_MAX);
        }
        /* the kernels in use (the conv by the backend's 48 KB rule, the dense listed with
         * the backend's default rows); the thread-per-output conv (no shared memory
         * allowed); the runs dense kernel; the listed dense with each other run length;
         * runs of 16 halved to fit a least count of runs: to 1 (n runs), and to 8 or
         * fewer (one run more than runs of 16 make). min_runs 0 (no halving) but there:
         * the backend's 2 a multiprocessor would halve these 150 rows to runs of one. Then
         * the tiled kernel (rows -1) over these runs, and over runs longer than its 32
         * rows (two networks: 100 rows, then 50). The big conv's shape runs the first two
         * alone: its conv is the same in the rest, whose dense variants the other shapes
         * cover, and emulating it is most of this test's time under the sanitizers. */
        int *runs16 = nevo_alloc(sizeof(int) * (size_t)(n + 1));
        int m16 = nevo_kd_runs(which, n, NEVO_KD1_ROWS, runs16);
        free(runs16);
        const int rows[11] = {NEVO_KD1_ROWS_DEFAULT, NEVO_KD1_ROWS_DEFAULT, 0, 1, 2, 4, 8, NEVO_KD1_ROWS,
                              NEVO_KD1_ROWS, -1, -1};
        const int least[11] = {0, 0, 0, 0, 0, 0, 0, n, m16 + 1, 0, 0};
        int *two = nevo_alloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++) two[i] = i < 100 ? 3 : 1;
        float *want_two = nevo_alloc(sizeof(float) * (size_t)n * (size_t)p->n_out);
        nevo_policy_forward(p, params, stride, two, obs, n, want_two, scratch);
        for (int k = 0; k < (shape == NET_CONV_BIG ? 2 : 11); k++) {
            memset(got, 0xff, sizeof(float) * (size_t)n * (size_t)p->n_out); /* NaN: unwritten shows */
            emulate_forward(p, params, stride, k == 10 ? two : which, obs, n, got, k == 1 ? 0 : NEVO_KC_SMEM_MAX,
                            rows[k], least[k], NULL);
            char what[64];
            const char *kind = k == 0   ? "kernels in use"
                               : k == 1 ? "thread-per-output conv"
                               : k == 9 ? "tiled"
                               : k == 10 ? "tiled, long runs"
                               : k >= 7 ? "runs halved"
                                        : "dense variant";
            snprintf(what, sizeof what, "shape %d, %s, dense rows %d", shape, kind, rows[k]);
            check_same(k == 10 ? want_two : want, got, (size_t)n * (size_t)p->n_out, what);
        }
        free(params), free(obs), free(which), free(two), free(want), free(want_two), free(got), free(scratch);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
}

/* Recurrent policies (an LSTM before the output layer): the MinAtar net's conv and
 * dense then 24 units; 20 units straight on normalised MuJoCo observations (no part
 * before it). */
static NevoPolicy *lstm_policy(int shape, NevoEnv **env_out) {
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    const char *env_name = shape == 0 ? "minatar/breakout" : "mujoco/halfcheetah";
    if (shape == 0) {
        c.n_conv = c.n_conv_kernels = c.n_conv_strides = 1;
        c.conv_filters[0] = 16, c.conv_kernels[0] = 3, c.conv_strides[0] = 1;
        c.n_hidden = 1, c.hidden[0] = 64;
        c.lstm = 24;
        strcpy(c.activation, "relu");
    } else {
        c.lstm = 20;
        strcpy(c.activation, "tanh");
    }
    strcpy(c.init, "scaled");
    NevoEnv *env = open_env(env_name);
    NevoPolicy *p = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_policy_new(nevo_env_spec(env), &c, shape == 1, &p, &err) == NEVO_OK, "%s", err.msg);
    for (int k = 0; shape == 1 && k < p->obs_dim; k++) {
        p->obs_mean[k] = 0.1f * (float)(k % 5);
        p->obs_std[k] = 0.5f + 0.1f * (float)(k % 3);
    }
    *env_out = env;
    return p;
}

/* cuda_forward's recurrent step (run_recurrent), its launches run on the CPU. */
static void emulate_recurrent(const NevoPolicy *p, const float *params, size_t stride, const int *which,
                              const float *obs, int n, float *state, float *out, int dense_rows) {
    const NevoLayer *R = &p->layers[p->lstm_layer];
    int in = R->in_dim, H = R->out_dim;
    float *xn = nevo_alloc(sizeof(float) * (size_t)n * p->obs_dim);
    float *xh = nevo_alloc(sizeof(float) * (size_t)n * (in + H));
    float *gates = nevo_alloc(sizeof(float) * (size_t)n * 4 * H), *h = nevo_alloc(sizeof(float) * (size_t)n * H);
    float *pre = nevo_alloc(sizeof(float) * (size_t)n * in);
    const float *X = obs;
    if (p->obs_norm) {
        int blocks = (n * p->obs_dim + NEVO_KN_THREADS - 1) / NEVO_KN_THREADS;
        for (int b = 0; b < blocks; b++)
            for (int t = 0; t < NEVO_KN_THREADS; t++)
                nevo_kn_elem(obs, p->obs_mean, p->obs_std, n, p->obs_dim, xn, p->obs_dim, b, t);
        X = xn;
    }
    memset(xh, 0xff, sizeof(float) * (size_t)n * (in + H));
    if (p->pre) { /* the pre part's last layer writes x into [x, h_prev] */
        emulate_forward(p->pre, params, stride, which, X, n, pre, NEVO_KC_SMEM_MAX, dense_rows, 0, NULL);
        for (int r = 0; r < n; r++) memcpy(xh + (size_t)r * (in + H), pre + (size_t)r * in, sizeof(float) * in);
    }
    NevoKLstm a = {X, p->obs_dim, !p->pre, xh, gates, state, h, n, in, H};
    for (int b = 0; b < (n * (in + H) + NEVO_KL_THREADS - 1) / NEVO_KL_THREADS; b++)
        for (int t = 0; t < NEVO_KL_THREADS; t++) nevo_kl_xh(a, b, t);
    int *runs = nevo_alloc(sizeof(int) * (size_t)(n + 1)), rows = 0;
    int n_runs = dense_rows < 0 ? nevo_kd_runs(which, n, NEVO_KT_ROWS, runs)
                                : nevo_kd1_runs(which, n, dense_rows, 0, runs, &rows);
    NevoKDense d = {params, stride, which, runs, xh, in + H, in + H, 4 * H, R->w_off, R->b_off,
                    (int)NEVO_ACT_NONE, 0, gates, 4 * H, NULL};
    if (dense_rows < 0)
        emulate_kt(d, n_runs);
    else
        emulate_kd1(d, n_runs, rows);
    for (int b = 0; b < (n * H + NEVO_KL_THREADS - 1) / NEVO_KL_THREADS; b++)
        for (int t = 0; t < NEVO_KL_THREADS; t++) nevo_kl_cell(a, b, t);
    emulate_forward(p->post, params, stride, which, h, n, out, NEVO_KC_SMEM_MAX, dense_rows, 0, NULL);
    free(xn), free(xh), free(gates), free(h), free(pre), free(runs);
}

/* Four steps of 90 rows over 4 networks, each row its own state: the recurrent step's
 * bodies give nevo_policy_forward_state's outputs and states, bit for bit, with the
 * listed dense kernel (the default rows) and with the tiled one. */
TEST(cuda_kernel_bodies_recurrent_match_cpu) {
    for (int shape = 0; shape < 2; shape++) {
        NevoEnv *env;
        NevoPolicy *p = lstm_policy(shape, &env);
        enum { NETS = 4, N = 90 };
        size_t stride = (p->nparams + 15) & ~(size_t)15, sf = nevo_policy_state_floats(p);
        float *params = random_params(p, NETS, stride, 100 + (uint64_t)shape);
        int which[N];
        make_which(N, NETS, 101 + (uint64_t)shape, which);
        size_t no = (size_t)N * (size_t)p->n_out;
        float *want = nevo_alloc(sizeof(float) * no), *got = nevo_alloc(sizeof(float) * no);
        float *st_want = nevo_alloc(sizeof(float) * N * sf), *st_got = nevo_alloc(sizeof(float) * N * sf);
        float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, N));
        for (int tiled = 0; tiled < 2; tiled++) {
            memset(st_want, 0, sizeof(float) * N * sf);
            memset(st_got, 0, sizeof(float) * N * sf);
            for (int step = 0; step < 4; step++) {
                float *obs = random_obs(p, N, 102 + (uint64_t)(10 * shape + step));
                nevo_policy_forward_state(p, params, stride, which, obs, N, st_want, want, scratch);
                memset(got, 0xff, sizeof(float) * no);
                emulate_recurrent(p, params, stride, which, obs, N, st_got, got, tiled ? -1 : NEVO_KD1_ROWS_DEFAULT);
                char what[64];
                snprintf(what, sizeof what, "lstm shape %d%s, step %d: outputs", shape, tiled ? ", tiled" : "", step);
                check_same(want, got, no, what);
                snprintf(what, sizeof what, "lstm shape %d%s, step %d: states", shape, tiled ? ", tiled" : "", step);
                check_same(st_want, st_got, N * sf, what);
                free(obs);
            }
        }
        free(params), free(want), free(got), free(st_want), free(st_got), free(scratch);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
}

/* Members (P of them over 2 bases, ranks 1, 3 and 64) of every shape, from random
 * compact slices: the factored kernels' bodies read each slice where the noise table
 * holds it and give nevo_policy_forward_factored's bits, with the base kernels as the
 * backend picks them (the dense listed in runs of the default and of 1, the runs kernel,
 * the tiled kernel). */
TEST(cuda_kernel_bodies_factored_match_cpu) {
    for (int shape = 0; shape < N_SHAPES; shape++) {
        NevoEnv *env;
        NevoPolicy *p = shape_policy(shape, &env);
        enum { P = 7, N = 60 };
        size_t stride = (p->nparams + 15) & ~(size_t)15;
        float *bases = random_params(p, 2, stride, 80 + (uint64_t)shape);
        float *obs = random_obs(p, N, 81 + (uint64_t)shape);
        int base[N], member[N];
        for (int i = 0; i < N; i++) base[i] = (i / 9) % 2, member[i] = (i * 3) % P; /* runs of 9 on each base */
        static const int ranks[3] = {1, 3, NEVO_LOWRANK_MAX};
        for (int ri = 0; ri < 3; ri++) {
            int rank = ranks[ri];
            size_t len = nevo_lowrank_floats(p, rank), ff = nevo_factor_row_floats(p, rank);
            float *z = nevo_alloc(sizeof(float) * len * P), *rows = nevo_alloc_aligned(sizeof(float) * ff * P);
            NevoRng rng;
            nevo_rng_init(&rng, 82, NEVO_RNG_USER, (uint32_t)shape, (uint32_t)rank, 0);
            nevo_rng_fill_normal(&rng, z, len * P);
            NevoKFRec rec[N];
            for (int j = 0; j < P; j++) nevo_factor_row(p, rank, z + j * len, j % 2 ? -0.03f : 0.05f, rows + j * ff);
            for (int i = 0; i < N; i++) {
                const float *head = rows + (size_t)member[i] * ff;
                rec[i] = (NevoKFRec){(size_t)member[i] * len, head[0], head[1]};
            }
            size_t no = (size_t)N * (size_t)p->n_out;
            float *want = nevo_alloc(sizeof(float) * no), *got = nevo_alloc(sizeof(float) * no);
            float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, N));
            nevo_policy_forward_factored(p, bases, stride, base, rows, ff, member, rank, obs, N, want, scratch);
            size_t us = nevo_policy_conv_pixels(p) * (size_t)rank;
            float *U = nevo_alloc(sizeof(float) * us * N);
            static const int dense_rows[4] = {NEVO_KD1_ROWS_DEFAULT, 1, 0, -1};
            for (int k = 0; k < (shape == NET_CONV_BIG ? 1 : 4); k++) { /* its conv: as above */
                NevoKFactor f;
                memset(&f, 0, sizeof f);
                f.noise = z, f.rec = rec, f.U = U, f.us = us, f.rank = rank;
                memset(got, 0xff, sizeof(float) * no);
                memset(U, 0xff, sizeof(float) * us * N); /* NaN: an unwritten u shows */
                emulate_forward(p, bases, stride, base, obs, N, got, NEVO_KC_SMEM_MAX, dense_rows[k], 0, &f);
                char what[96];
                snprintf(what, sizeof what, "shape %d, rank %d, dense rows %d", shape, rank, dense_rows[k]);
                check_same(want, got, no, what);
            }
            free(z), free(rows), free(want), free(got), free(scratch), free(U);
        }
        free(bases), free(obs);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
}

/* The listed-inputs dense kernel reading its networks as recipes (base +- sigma eps, made
 * weight by weight) gives the bits it gives on the same networks built by the builds'
 * own rule (nevo_kb_elems): a layer of 300 inputs (a partial tile) and 70 outputs (a
 * partial group of 4), 3 bases, full-rank networks of either sign, a base as it is, and
 * low-rank networks of ranks 1 to 3 (the layer's W one block: the kernel's own rows of A
 * and B) and of rank 2 with W in two blocks (nevo_lr_eps element by element). */
TEST(cuda_kernel_bodies_recipe_dense_matches_built) {
    enum { IN = 300, OUT = 70, BASES = 3, FULL = 6, NETS = 11, N = 31 };
    size_t np = (size_t)IN * OUT + OUT, stride = (np + 15) & ~(size_t)15;
    NevoRng rng;
    nevo_rng_init(&rng, 5, 0, 0, 0, 0);
    float *bases = nevo_alloc(sizeof(float) * np * BASES), *eps = nevo_alloc(sizeof(float) * np * NETS);
    for (size_t k = 0; k < np * BASES; k++) bases[k] = (float)(nevo_rng_uniform(&rng) - 0.5);
    for (size_t k = 0; k < np * NETS; k++) eps[k] = (float)nevo_rng_normal(&rng);
    NevoKRecipe rec[NETS];
    NevoLRBlock blocks[3][2], split[3]; /* rank 1 .. 3: W (IN, OUT), then the bias; W's halves */
    float *built = nevo_alloc(sizeof(float) * stride * NETS);
    for (int j = 0; j < NETS; j++) {
        int rank = j >= FULL && j < FULL + 3 ? j - FULL + 1 : j == FULL + 3 ? 2 : 0; /* the last: the base */
        NevoLRBlock *bl = j == FULL + 3 ? split : rank ? blocks[rank - 1] : NULL;
        int n_bl = j == FULL + 3 ? 3 : rank ? 2 : 0;
        if (j == FULL + 3) {
            split[0] = (NevoLRBlock){0, 0, IN / 2, OUT};
            split[1] = (NevoLRBlock){(size_t)(IN / 2) * OUT, (size_t)(IN / 2 + OUT) * 2, IN / 2, OUT};
            split[2] = (NevoLRBlock){(size_t)IN * OUT, (size_t)(IN + 2 * OUT) * 2, 0, OUT};
        } else if (bl) {
            bl[0] = (NevoLRBlock){0, 0, IN, OUT};
            bl[1] = (NevoLRBlock){(size_t)IN * OUT, (size_t)(IN + OUT) * (size_t)rank, 0, OUT};
        }
        rec[j] = (NevoKRecipe){bases + np * (size_t)(j % BASES), j == NETS - 1 ? NULL : eps + np * (size_t)j,
                               0.03f + 0.01f * (float)j, j % 2 ? -1 : 1, rank, bl, n_bl,
                               rank ? (float)(1.0 / sqrt((double)rank)) : 0.0f};
        int minus = rec[j].sign < 0 && rec[j].eps; /* a base as it is is built into plus */
        NevoKBuild e = {minus ? NULL : built + stride * (size_t)j, minus ? built + stride * (size_t)j : NULL,
                        rec[j].base, rec[j].eps, rec[j].sigma, rank, bl, n_bl, rec[j].c};
        for (int t = 0; t < NEVO_KB_THREADS; t++) nevo_kb_elems(&e, np, 0, 1, t);
    }
    float *x = nevo_alloc(sizeof(float) * N * IN);
    for (int k = 0; k < N * IN; k++) x[k] = nevo_rng_uniform(&rng) < 0.5 ? 0.0f : (float)nevo_rng_uniform(&rng);
    int which[N];
    for (int i = 0; i < N; i++) which[i] = i % NETS;
    float *want = nevo_alloc(sizeof(float) * N * OUT), *got = nevo_alloc(sizeof(float) * N * OUT);
    memset(want, 0xff, sizeof(float) * N * OUT);
    memset(got, 0xff, sizeof(float) * N * OUT);
    NevoKDense a = {built, stride, which, NULL, x, IN, IN, OUT, 0, (size_t)IN * OUT, NEVO_ACT_RELU, 0, want, OUT, NULL};
    emulate_kd1(a, N, 1);
    a.rec = rec, a.Y = got;
    emulate_kd1(a, N, 1);
    check_same(want, got, (size_t)N * OUT, "recipes against built networks, a row a network");
    /* runs of up to 4 rows a network (the networks in turn, 2 or 3 rows each) */
    int runs[N + 1];
    for (int i = 0; i < N; i++) which[i] = i * NETS / N;
    int n_runs = nevo_kd_runs(which, N, 4, runs);
    a.runs = runs, a.rec = NULL, a.Y = want;
    memset(want, 0xff, sizeof(float) * N * OUT);
    emulate_kd1(a, n_runs, 4);
    a.rec = rec, a.Y = got;
    memset(got, 0xff, sizeof(float) * N * OUT);
    emulate_kd1(a, n_runs, 4);
    check_same(want, got, (size_t)N * OUT, "recipes against built networks, runs of rows");
    free(bases), free(eps), free(built), free(x), free(want), free(got);
}

/* A task set over 6 bases with every kind of recipe: GA children, an ES pair, a lone
 * minus, a base as it is, a fresh network, a low-rank ES pair. */
typedef struct Set {
    NevoTaskSet ts;
    NevoNet nets[10];
    NevoNoise *noise;
    float *bases;
} Set;

static void make_set(Set *s, const NevoPolicy *p, const NevoEnv *env, size_t stride) {
    NevoPool *pool = nevo_pool_new(1);
    s->noise = nevo_noise_new(nevo_noise_auto_size(p->nparams), pool);
    nevo_pool_free(pool);
    s->bases = random_params(p, 6, stride, 40);
    s->nets[0] = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 0, .purpose = NEVO_RNG_MUTATE, .generation = 2,
                           .individual = 0, .sigma = 0.02f, .sign = 1};
    s->nets[1] = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 3, .purpose = NEVO_RNG_MUTATE, .generation = 2,
                           .individual = 1, .sigma = 0.02f, .sign = 1};
    s->nets[2] = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 5, .purpose = NEVO_RNG_ES_NOISE, .generation = 7,
                           .individual = 4, .sigma = 0.05f, .sign = 1};
    s->nets[3] = s->nets[2];
    s->nets[3].sign = -1;
    s->nets[4] = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 1, .purpose = NEVO_RNG_ES_NOISE, .generation = 7,
                           .individual = 9, .sigma = 0.05f, .sign = -1};
    s->nets[5] = (NevoNet){.kind = NEVO_NET_BASE, .base = 2};
    s->nets[6] = (NevoNet){.kind = NEVO_NET_INIT, .generation = 0, .individual = 3};
    s->nets[7] = (NevoNet){.kind = NEVO_NET_BASE, .base = 4};
    for (int j = 8; j < 10; j++)
        s->nets[j] = (NevoNet){.kind = NEVO_NET_LOWRANK, .base = 1, .purpose = NEVO_RNG_ES_NOISE, .generation = 7,
                               .individual = 2, .sigma = 0.05f, .sign = j == 8 ? 1 : -1, .rank = 3};
    nevo_taskset_for_policy(&s->ts, p, env);
    s->ts.seed = 5;
    s->ts.noise = s->noise;
    s->ts.noise_floats = s->noise->size;
    s->ts.n_bases = 6;
    s->ts.bases = s->bases;
    s->ts.base_stride = stride;
    s->ts.n_nets = 10;
    s->ts.nets = s->nets;
}

TEST(cuda_kernel_bodies_build_match_cpu) {
    NevoEnv *env;
    NevoPolicy *p = shape_policy(NET_MLP_NORM, &env);
    size_t stride = (p->nparams + 15) & ~(size_t)15, n = p->nparams;
    Set s;
    make_set(&s, p, env, stride);
    float *want = nevo_alloc(sizeof(float) * n), *plus = nevo_alloc(sizeof(float) * n);
    float *minus = nevo_alloc(sizeof(float) * n);
    NevoLRBlock blocks[NEVO_LOWRANK_BLOCKS];
    for (int j = 0; j < 10; j++) {
        const NevoNet *nt = &s.nets[j];
        if (nt->kind == NEVO_NET_INIT) continue; /* built on the host by the backend */
        NevoKBuild e = {0};
        e.base = s.bases + (size_t)nt->base * stride;
        e.plus = plus;
        if (nt->kind == NEVO_NET_PERTURBED) {
            e.eps = nevo_noise_slice(s.noise, n, s.ts.seed, nt->purpose, nt->generation, nt->individual, 0);
            e.sigma = nt->sigma;
            e.minus = minus;
        } else if (nt->kind == NEVO_NET_LOWRANK) { /* the compact slice, expanded element by element */
            e.eps = nevo_noise_slice(s.noise, nevo_lowrank_floats(p, (int)nt->rank), s.ts.seed, nt->purpose,
                                     nt->generation, nt->individual, 0);
            e.sigma = nt->sigma;
            e.minus = minus;
            e.rank = (int)nt->rank;
            e.c = (float)(1.0 / sqrt((double)nt->rank));
            e.n_blocks = nevo_lowrank_blocks(p, e.rank, blocks);
            e.blocks = blocks;
        }
        memset(plus, 0xff, sizeof(float) * n);
        memset(minus, 0xff, sizeof(float) * n);
        int per = NEVO_KB_THREADS * 8, chunks = (int)((n + (size_t)per - 1) / (size_t)per);
        for (int c = 0; c < chunks; c++)
            for (int t = 0; t < NEVO_KB_THREADS; t++) nevo_kb_elems(&e, n, c, chunks, t);
        nevo_taskset_build(&s.ts, p, j, want, 0);
        check_same(want, nt->kind != NEVO_NET_BASE && nt->sign < 0 ? minus : plus, n, "build");
    }
    free(want), free(plus), free(minus), free(s.bases);
    nevo_noise_free(s.noise);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* ---- on a GPU ------------------------------------------------------------------------- */

static NevoBackend *cuda_or_skip(void) {
    NevoBackend *b = NULL;
    NevoError err = {0};
    if (nevo_backend_new("cuda", &b, &err) != NEVO_OK) {
        printf("     skipped: %s\n", err.msg);
        return NULL;
    }
    return b;
}

/* Sets the environment variable name to v (NULL: unsets it) and returns what it was,
 * for env_restore (the backend's workspaces read their settings when made). */
static char *env_set(const char *name, const char *v) {
    char *old = getenv(name) ? strdup(getenv(name)) : NULL;
    if (v) setenv(name, v, 1);
    else unsetenv(name);
    return old;
}

static void env_restore(const char *name, char *old) {
    if (old) setenv(name, old, 1);
    else unsetenv(name);
    free(old);
}

TEST(cuda_forward_matches_cpu_backend) {
    NevoBackend *gpu = cuda_or_skip();
    if (!gpu) return;
    NevoBackend *cpu = NULL;
    NevoError err = {0};
    CHECK(nevo_backend_new("cpu", &cpu, &err) == NEVO_OK);
    for (int shape = 0; shape < N_SHAPES; shape++) {
        NevoEnv *env;
        NevoPolicy *p = shape_policy(shape, &env);
        int nets = 40, n = 3000;
        size_t stride = (p->nparams + 15) & ~(size_t)15;
        float *params = random_params(p, nets, stride, 50 + (uint64_t)shape);
        float *obs = random_obs(p, n, 60 + (uint64_t)shape);
        int *which = nevo_alloc(sizeof(int) * (size_t)n);
        make_which(n, nets, 70 + (uint64_t)shape, which);
        size_t no = (size_t)n * (size_t)p->n_out;
        float *want = nevo_alloc(sizeof(float) * no), *got = nevo_alloc(sizeof(float) * no);
        int *apart = nevo_alloc(sizeof(int) * (size_t)n); /* no two rows in a row share one */
        for (int i = 0; i < n; i++) apart[i] = i % nets;
        float *want1 = nevo_alloc(sizeof(float) * no);
        NevoRows *rc = nevo_rows_host(cpu, params, stride, nets), *rg = nevo_rows_host(gpu, params, stride, nets);
        NevoWorkspace *wc = nevo_workspace_new(cpu, p, n);
        nevo_backend_forward(cpu, p, rc, which, obs, n, NULL, want, wc);
        nevo_backend_forward(cpu, p, rc, apart, obs, n, NULL, want1, wc);
        /* every dense kernel the backend can pick (NEVO_CUDA_DENSE_ROWS, with no halving
         * of runs, then runs of 16 halved as far as they go: NEVO_CUDA_MIN_RUNS; read by a
         * new workspace; the caller's settings restored after) */
        const char *names[3] = {"NEVO_CUDA_DENSE_ROWS", "NEVO_CUDA_MIN_RUNS", "NEVO_CUDA_TILED_ROWS"};
        char *saved[3];
        for (int e = 0; e < 3; e++) saved[e] = env_set(names[e], NULL);
        /* the last: every call through the tiled kernel */
        const int rows_set[8] = {0, 1, 2, 4, 8, 16, 16, 8}, least_set[8] = {0, 0, 0, 0, 0, 0, 1 << 30, 0};
        for (int c = 0; c < 8; c++) {
            int rows = rows_set[c];
            char v[16];
            snprintf(v, sizeof v, "%d", rows);
            setenv("NEVO_CUDA_DENSE_ROWS", v, 1);
            snprintf(v, sizeof v, "%d", least_set[c]);
            setenv("NEVO_CUDA_MIN_RUNS", v, 1);
            setenv("NEVO_CUDA_TILED_ROWS", c == 7 ? "1" : "0", 1);
            NevoWorkspace *wg = nevo_workspace_new(gpu, p, n);
            for (int rep = 0; rep < 3; rep++) { /* the same bits every time, at every row count */
                int m = rep == 1 ? 1 + n / 3 : n;
                memset(got, 0xff, sizeof(float) * no);
                nevo_backend_forward(gpu, p, rg, rep == 2 ? apart : which, obs, m, NULL, got, wg);
                char what[128];
                snprintf(what, sizeof what, "shape %d, dense rows %d, least runs %d%s, %d rows%s", shape, rows,
                         least_set[c], c == 7 ? ", tiled" : "", m, rep == 2 ? ", a network each" : "");
                check_same(rep == 2 ? want1 : want, got, (size_t)m * (size_t)p->n_out, what);
            }
            nevo_workspace_free(wg);
        }
        for (int e = 0; e < 3; e++) env_restore(names[e], saved[e]);
        nevo_workspace_free(wc);
        nevo_rows_free(rc), nevo_rows_free(rg);
        free(params), free(obs), free(which), free(apart), free(want), free(want1), free(got);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
    nevo_backend_free(cpu);
    nevo_backend_free(gpu);
}

/* nevo_rows_write on each backend there is: new parameters into the same rows, in place,
 * seen by the next forward (on the CPU both a view, which is its host memory, and rows
 * of its own; on a GPU, copies). */
TEST(backend_rows_write_in_place) {
    NevoEnv *env;
    NevoPolicy *p = shape_policy(NET_MINATAR, &env);
    int nets = 3, n = 40;
    size_t stride = (p->nparams + 15) & ~(size_t)15, no = (size_t)n * (size_t)p->n_out;
    float *a = random_params(p, nets, stride, 91), *b = random_params(p, nets, stride, 92);
    float *host = nevo_alloc(sizeof(float) * stride * (size_t)nets);
    float *mixed = nevo_alloc(sizeof(float) * stride * (size_t)nets), *back = nevo_alloc(sizeof(float) * stride);
    memcpy(mixed, a, sizeof(float) * stride);
    memcpy(mixed + stride, b + stride, sizeof(float) * stride * (size_t)(nets - 1));
    float *obs = random_obs(p, n, 93), *want = nevo_alloc(sizeof(float) * no), *got = nevo_alloc(sizeof(float) * no);
    int *which = nevo_alloc(sizeof(int) * (size_t)n);
    make_which(n, nets, 94, which);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, n));
    for (int k = 0; k < 2; k++) {
        NevoBackend *be = NULL;
        NevoError err = {0};
        if (k == 0) CHECK(nevo_backend_new("cpu", &be, &err) == NEVO_OK);
        if (k == 1 && !(be = cuda_or_skip())) break;
        NevoWorkspace *w = nevo_workspace_new(be, p, n);
        /* rows from host memory, the memory rewritten, then written to the rows */
        memcpy(host, a, sizeof(float) * stride * (size_t)nets);
        NevoRows *r = nevo_rows_host(be, host, stride, nets);
        memcpy(host, b, sizeof(float) * stride * (size_t)nets);
        nevo_rows_write(r, 0, nets, stride, host);
        nevo_policy_forward(p, b, stride, which, obs, n, want, scratch);
        memset(got, 0xff, sizeof(float) * no);
        nevo_backend_forward(be, p, r, which, obs, n, NULL, got, w);
        check_same(want, got, no, k ? "cuda, rows from host memory" : "cpu, a view");
        nevo_rows_free(r);
        /* rows of the backend's own: all of them, then rows 1 .. nets - 1 again */
        r = nevo_rows_new(be, stride, nets);
        nevo_rows_write(r, 0, nets, stride, a);
        nevo_rows_write(r, 1, nets - 1, stride, b + stride);
        for (int i = 0; i < nets; i++) {
            nevo_rows_read(r, i, 1, stride, back);
            CHECK(memcmp(back, mixed + (size_t)i * stride, sizeof(float) * stride) == 0);
        }
        nevo_policy_forward(p, mixed, stride, which, obs, n, want, scratch);
        memset(got, 0xff, sizeof(float) * no);
        nevo_backend_forward(be, p, r, which, obs, n, NULL, got, w);
        check_same(want, got, no, k ? "cuda, its own rows" : "cpu, its own rows");
        nevo_rows_free(r);
        nevo_workspace_free(w);
        nevo_backend_free(be);
    }
    free(a), free(b), free(host), free(mixed), free(back), free(obs), free(want), free(got), free(which), free(scratch);
    nevo_policy_free(p);
    nevo_env_free(env);
}

TEST(cuda_builds_match_cpu) {
    NevoBackend *gpu = cuda_or_skip();
    if (!gpu) return;
    NevoEnv *env;
    NevoPolicy *p = shape_policy(NET_MINATAR, &env);
    size_t stride = (p->nparams + 15) & ~(size_t)15, n = p->nparams;
    Set s;
    make_set(&s, p, env, stride);
    NevoRows *bases = nevo_rows_host(gpu, s.bases, stride, 6), *rows = nevo_rows_new(gpu, n, 11);
    for (int j = 0; j < 10; j++)
        if (j == 2)
            nevo_rows_build_pair(rows, 10, 2, &s.ts, bases, p, 2, 0); /* rows out of order */
        else if (j == 8)
            nevo_rows_build_pair(rows, 8, 9, &s.ts, bases, p, 8, 0); /* the low-rank pair */
        else if (j != 3 && j != 9)
            nevo_rows_build(rows, j, &s.ts, bases, p, j, 0);
    float *got = nevo_alloc(sizeof(float) * n * 11), *want = nevo_alloc(sizeof(float) * n);
    nevo_rows_read(rows, 0, 10, n, got);
    nevo_rows_read(rows, 10, 1, n, got + 3 * n); /* the pair's plus, as network 2 */
    for (int j = 0; j < 10; j++) {
        nevo_taskset_build(&s.ts, p, j, want, 0);
        char what[32];
        snprintf(what, sizeof what, "network %d", j);
        check_same(want, got + (size_t)(j == 2 ? 3 : j == 3 ? 2 : j) * n, n, what);
    }
    /* a low-rank member alone, minus sign */
    nevo_rows_build(rows, 0, &s.ts, bases, p, 9, 0);
    nevo_rows_read(rows, 0, 1, n, got);
    nevo_taskset_build(&s.ts, p, 9, want, 0);
    check_same(want, got, n, "low-rank minus alone");
    nevo_rows_free(rows), nevo_rows_free(bases);
    free(got), free(want), free(s.bases);
    nevo_noise_free(s.noise);
    nevo_policy_free(p);
    nevo_env_free(env);
    nevo_backend_free(gpu);
}

/* A recurrent policy's steps on the cuda backend: its outputs and each row's new state
 * are the CPU backend's bits, step after step, at every dense kernel. */
TEST(cuda_recurrent_forward_matches_cpu_backend) {
    NevoBackend *gpu = cuda_or_skip();
    if (!gpu) return;
    NevoBackend *cpu = NULL;
    NevoError err = {0};
    CHECK(nevo_backend_new("cpu", &cpu, &err) == NEVO_OK);
    for (int pass = 0; pass < 4; pass++) { /* each shape with the listed dense kernel, then tiled */
        int shape = pass / 2, tiled = pass % 2;
        NevoEnv *env;
        NevoPolicy *p = lstm_policy(shape, &env);
        enum { NETS = 12, N = 600 };
        size_t stride = (p->nparams + 15) & ~(size_t)15, sf = nevo_policy_state_floats(p);
        float *params = random_params(p, NETS, stride, 110 + (uint64_t)shape);
        int *which = nevo_alloc(sizeof(int) * N);
        make_which(N, NETS, 111 + (uint64_t)shape, which);
        size_t no = (size_t)N * (size_t)p->n_out;
        float *out[2] = {nevo_alloc(sizeof(float) * no), nevo_alloc(sizeof(float) * no)};
        float *st[2] = {nevo_alloc(sizeof(float) * N * sf), nevo_alloc(sizeof(float) * N * sf)};
        NevoBackend *be[2] = {cpu, gpu};
        NevoRows *rows[2];
        NevoWorkspace *ws[2];
        char *saved = env_set("NEVO_CUDA_TILED_ROWS", tiled ? "1" : "0");
        for (int b = 0; b < 2; b++) {
            rows[b] = nevo_rows_host(be[b], params, stride, NETS);
            ws[b] = nevo_workspace_new(be[b], p, N);
            memset(st[b], 0, sizeof(float) * N * sf);
        }
        env_restore("NEVO_CUDA_TILED_ROWS", saved);
        for (int step = 0; step < 5; step++) {
            float *obs = random_obs(p, N, 112 + (uint64_t)(10 * shape + step));
            int m = step == 3 ? N / 3 : N; /* fewer rows: their states go on alone */
            for (int b = 0; b < 2; b++) {
                memset(out[b], 0xff, sizeof(float) * no);
                nevo_backend_forward(be[b], p, rows[b], which, obs, m, st[b], out[b], ws[b]);
            }
            char what[64];
            snprintf(what, sizeof what, "lstm shape %d%s, step %d: outputs", shape, tiled ? ", tiled" : "", step);
            check_same(out[0], out[1], (size_t)m * (size_t)p->n_out, what);
            snprintf(what, sizeof what, "lstm shape %d%s, step %d: states", shape, tiled ? ", tiled" : "", step);
            check_same(st[0], st[1], N * sf, what);
            free(obs);
        }
        for (int b = 0; b < 2; b++) {
            nevo_workspace_free(ws[b]);
            nevo_rows_free(rows[b]);
            free(out[b]), free(st[b]);
        }
        free(params), free(which);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
    nevo_backend_free(cpu);
    nevo_backend_free(gpu);
}

/* Factored members (ranks 1, 3 and 64, over two bases) of every shape: the cuda
 * backend's factored forward gives the CPU backend's bits, at every row count. */
TEST(cuda_factored_forward_matches_cpu_backend) {
    NevoBackend *gpu = cuda_or_skip();
    if (!gpu) return;
    NevoBackend *cpu = NULL;
    NevoError err = {0};
    CHECK(nevo_backend_new("cpu", &cpu, &err) == NEVO_OK);
    NevoBackend *be[2] = {cpu, gpu};
    for (int shape = 0; shape < N_SHAPES; shape++) {
        NevoEnv *env;
        NevoPolicy *p = shape_policy(shape, &env);
        size_t stride = (p->nparams + 15) & ~(size_t)15;
        Set s;
        make_set(&s, p, env, stride);
        enum { M = 10, N = 700 };
        float *obs = random_obs(p, N, 90 + (uint64_t)shape);
        int base[N], which[N];
        for (int i = 0; i < N; i++) base[i] = (i / 50) % 2, which[i] = (i * 7) % M;
        static const int ranks[3] = {1, 3, NEVO_LOWRANK_MAX};
        for (int ri = 0; ri < 3; ri++) {
            for (int j = 0; j < M; j++)
                s.nets[j] = (NevoNet){.kind = NEVO_NET_FACTORED, .base = j % 2, .purpose = NEVO_RNG_ES_NOISE,
                                      .generation = 3, .individual = (uint32_t)(j / 2), .sigma = 0.05f,
                                      .sign = j % 2 ? -1 : 1, .rank = (uint32_t)ranks[ri]};
            size_t no = (size_t)N * (size_t)p->n_out;
            float *out[2] = {nevo_alloc(sizeof(float) * no), nevo_alloc(sizeof(float) * no)};
            NevoRows *bases[2], *rows[2];
            NevoWorkspace *ws[2];
            char *saved = env_set("NEVO_CUDA_TILED_ROWS", "0"); /* the first pass: the listed kernel */
            for (int b = 0; b < 2; b++) {
                bases[b] = nevo_rows_host(be[b], s.bases, stride, 6);
                rows[b] = nevo_rows_new(be[b], nevo_factor_row_floats(p, ranks[ri]), M);
                for (int j = 0; j < M; j++) nevo_rows_build_factored(rows[b], j, &s.ts, p, j);
                ws[b] = nevo_workspace_new(be[b], p, N);
            }
            env_restore("NEVO_CUDA_TILED_ROWS", saved);
            /* each call on both backends; fewer rows after more: the same bits; then a
             * device workspace whose calls all take the tiled kernel */
            for (int tiled = 0; tiled < 2; tiled++) {
                if (tiled) {
                    saved = env_set("NEVO_CUDA_TILED_ROWS", "1");
                    nevo_workspace_free(ws[1]);
                    ws[1] = nevo_workspace_new(gpu, p, N);
                    env_restore("NEVO_CUDA_TILED_ROWS", saved);
                }
                for (int m = N; m >= N / 3; m -= N / 3 + 1) {
                    for (int b = 0; b < 2; b++) {
                        memset(out[b], 0xff, sizeof(float) * no);
                        nevo_backend_forward_factored(be[b], p, bases[b], base, rows[b], which, ranks[ri], obs, m,
                                                      out[b], ws[b]);
                    }
                    char what[96];
                    snprintf(what, sizeof what, "shape %d, rank %d%s, %d rows", shape, ranks[ri],
                             tiled ? ", tiled" : "", m);
                    check_same(out[0], out[1], (size_t)m * (size_t)p->n_out, what);
                }
            }
            for (int b = 0; b < 2; b++) {
                nevo_workspace_free(ws[b]);
                nevo_rows_free(rows[b]), nevo_rows_free(bases[b]);
            }
            free(out[0]), free(out[1]);
        }
        free(obs), free(s.bases);
        nevo_noise_free(s.noise);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
    nevo_backend_free(cpu);
    nevo_backend_free(gpu);
}

/* Layouts 0 .. layouts - 1 of 40 tasks evaluated on gpu and on the CPU, on 3 threads:
 * the same returns and lengths. */
static void evaluation_matches_cpu(NevoBackend *gpu, int layouts) {
    NevoEnv *env;
    NevoPolicy *p = shape_policy(NET_MINATAR, &env);
    nevo_env_set_max_steps(env, 300);
    size_t stride = (p->nparams + 15) & ~(size_t)15;
    Set s;
    make_set(&s, p, env, stride);
    enum { T = 40 };
    NevoNet nets[T];
    NevoTask tasks[T];
    for (int layout = 0; layout < layouts; layout++) { /* 4: 3 with every device call tiled */
        int n_nets = layout == 1 || layout >= 3 ? T / 2 : T;
        for (int j = 0; j < n_nets; j++) {
            if (layout >= 3) /* factored low-rank members over two bases */
                nets[j] = (NevoNet){.kind = NEVO_NET_FACTORED, .base = (j / 2) % 2, .purpose = NEVO_RNG_ES_NOISE,
                                    .generation = 1, .individual = (uint32_t)(j / 2), .sigma = 0.05f,
                                    .sign = j % 2 ? -1 : 1, .rank = 2};
            else if (layout == 0)
                nets[j] = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = j % 6, .purpose = NEVO_RNG_MUTATE,
                                    .generation = 1, .individual = (uint32_t)j, .sigma = 0.05f, .sign = 1};
            else if (layout == 1)
                nets[j] = (NevoNet){.kind = NEVO_NET_PERTURBED, .base = 0, .purpose = NEVO_RNG_ES_NOISE,
                                    .generation = 1, .individual = (uint32_t)(j / 2), .sigma = 0.05f,
                                    .sign = j % 2 ? -1 : 1};
            else
                nets[j] = (NevoNet){.kind = NEVO_NET_BASE, .base = j % 6};
        }
        for (int t = 0; t < T; t++)
            tasks[t] = (NevoTask){.net = layout == 1 || layout >= 3 ? t % n_nets : t,
                                  .seed = nevo_rng_derive(8, NEVO_RNG_ENV_SEED, 0, (uint32_t)layout, (uint32_t)t)};
        NevoTaskSet ts = s.ts;
        ts.nets = nets;
        ts.n_nets = n_nets;
        ts.tasks = tasks;
        ts.n_tasks = T;
        NevoEpisode want[T], got[T];
        NevoPool *pool = nevo_pool_new(3);
        NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 0);
        NevoError err = {0};
        CHECK_MSG(nevo_evaluate_tasks(ev, &ts, want, NULL, NULL, &err) == NEVO_OK, "%s", err.msg);
        char *saved = env_set("NEVO_CUDA_TILED_ROWS", layout == 4 ? "1" : "0");
        nevo_evaluator_set_backend(ev, gpu);
        nevo_evaluator_set_host_tasks(ev, 0); /* 40 tasks: on the device, not the host */
        CHECK_MSG(nevo_evaluate_tasks(ev, &ts, got, NULL, NULL, &err) == NEVO_OK, "%s", err.msg);
        env_restore("NEVO_CUDA_TILED_ROWS", saved);
        for (int t = 0; t < T; t++)
            CHECK_MSG(want[t].ret == got[t].ret && want[t].length == got[t].length,
                      "layout %d task %d: %g over %d steps on the GPU, %g over %d on the CPU", layout, t, got[t].ret,
                      got[t].length, want[t].ret, want[t].length);
        nevo_evaluator_free(ev);
        nevo_pool_free(pool);
    }
    free(s.bases);
    nevo_noise_free(s.noise);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* Whole evaluations: a GA generation's children built as their episodes start (the
 * built layout), ES pairs with two episodes each (built first), bases read in place,
 * and factored low-rank members (again with every device call through the tiled
 * kernel), on the GPU and on the CPU: every episode the same. */
TEST(cuda_evaluation_matches_cpu) {
    NevoBackend *gpu = cuda_or_skip();
    if (!gpu) return;
    evaluation_matches_cpu(gpu, 5);
    nevo_backend_free(gpu);
}

/* Each rank of a machine's four on its device (rank r on device r mod devices; on one
 * device, all four there as sharers), the pool's threads calling in: children built on
 * the device and evaluated, as on the CPU. */
TEST(cuda_ranks_of_a_machine_match_cpu) {
    NevoBackend *first = cuda_or_skip();
    if (!first) return;
    nevo_backend_free(first);
    for (int r = 0; r < 4; r++) {
        NevoBackend *gpu = NULL;
        NevoError err = {0};
        CHECK_MSG(nevo_backend_new_on_node("cuda", r, 4, &gpu, &err) == NEVO_OK, "%s", err.msg);
        evaluation_matches_cpu(gpu, 1);
        nevo_backend_free(gpu);
    }
}

/* The backend says which device it computes on, and `nevo train` on the device says so
 * (rank 0 of 1: device 0, no ranks beside it). */
TEST(cuda_run_says_which_device) {
    NevoBackend *gpu = cuda_or_skip();
    if (!gpu) return;
    char where[256];
    nevo_backend_describe(gpu, where, sizeof where);
    nevo_backend_free(gpu);
    const char *open = strchr(where, '(');
    CHECK_MSG(strncmp(where, "cuda device 0 of ", 17) == 0 && open && open[1] != ')' && strstr(where, "ranks on") == NULL,
              "%s", where);
    char bin[PATH_MAX], cfg[PATH_MAX], out[8192], want[300];
    CHECK(realpath(test_nevo_bin(), bin) != NULL && realpath("configs/cartpole_ga.json", cfg) != NULL);
    CHECK_MSG(test_run(out, sizeof out,
                       "cd %s && %s train %s backend=cuda generations=1 population=64 ga.truncation=4 "
                       "ga.validation_candidates=2 ga.validation_episodes=1 eval_episodes=2 --threads 4 --out r",
                       test_tmpdir(), bin, cfg) == 0,
              "%s", out);
    snprintf(want, sizeof want, "nevo: networks on %s\n", where);
    CHECK_CONTAINS(out, want);
}

/* Population evaluation (nevo_pop_eval_*, Python's nevo.evaluate) on the device: a
 * config's backend, and one set afterwards, give the CPU's episodes. */
TEST(cuda_population_evaluation_matches_cpu) {
    NevoBackend *probe = cuda_or_skip();
    if (!probe) return;
    nevo_backend_free(probe);
    NevoError err = {0};
    NevoPopEval *cpu = NULL, *gpu = NULL, *later = NULL;
    const char *cfg = "{\"env\": \"minatar/breakout\", \"policy\": {\"hidden\": [32]}";
    char text[256];
    snprintf(text, sizeof text, "%s}", cfg);
    CHECK_MSG(nevo_pop_eval_new(text, 3, &cpu, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_pop_eval_new(text, 3, &later, &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_pop_eval_set_backend(later, "cuda", &err) == NEVO_OK, "%s", err.msg);
    snprintf(text, sizeof text, "%s, \"backend\": \"cuda\"}", cfg);
    CHECK_MSG(nevo_pop_eval_new(text, 3, &gpu, &err) == NEVO_OK, "%s", err.msg);
    CHECK(strstr(nevo_pop_eval_config(gpu), "\"cuda\"") && strstr(nevo_pop_eval_config(later), "\"cuda\""));
    enum { ROWS = 300, EPS = 2, N = ROWS * EPS };
    size_t np = nevo_pop_eval_nparams(cpu);
    float *params = nevo_alloc(sizeof(float) * np * ROWS);
    for (size_t k = 0; k < np * ROWS; k++) params[k] = 0.3f * (float)sin((double)k * 0.37);
    double want[N], got[N];
    int wlen[N], glen[N];
    bool term[N];
    NevoPopEval *on[2] = {gpu, later};
    CHECK_MSG(nevo_pop_eval_run(cpu, params, np, ROWS, NULL, NULL, N, want, wlen, term, NULL, &err) == NEVO_OK,
              "%s", err.msg);
    for (int k = 0; k < 2; k++) {
        CHECK_MSG(nevo_pop_eval_run(on[k], params, np, ROWS, NULL, NULL, N, got, glen, term, NULL, &err) == NEVO_OK,
                  "%s", err.msg);
        for (int t = 0; t < N; t++)
            CHECK_MSG(got[t] == want[t] && glen[t] == wlen[t], "%s: episode %d: %g over %d steps, CPU %g over %d",
                      k ? "set later" : "config", t, got[t], glen[t], want[t], wlen[t]);
    }
    free(params);
    nevo_pop_eval_free(cpu);
    nevo_pop_eval_free(gpu);
    nevo_pop_eval_free(later);
}

/* The CUDA code compiles where nvcc is installed, in whatever build (CI has no GPU, and
 * no other test builds it): src/nn/backend_cuda.cu by nvcc with the Makefile's flags
 * (NEVO_TEST_NVCC), the C files' NEVO_CUDA parts by the C compiler (NEVO_TEST_CC), both
 * without a line of output (no warning). The plain suite runs it; elsewhere, skipped. */
TEST(cuda_code_compiles) {
    const char *nvcc = getenv("NEVO_TEST_NVCC"), *cc = getenv("NEVO_TEST_CC");
    if (!nvcc || !*nvcc || !cc || !*cc) {
        printf("     skipped: no nvcc, or not the plain suite (NEVO_TEST_NVCC)\n");
        return;
    }
    char rel[PATH_MAX], src[PATH_MAX], out[16384];
    snprintf(rel, sizeof rel, "%s/../..", test_data_dir());
    CHECK_MSG(realpath(rel, src) != NULL, "no source tree at %s", rel);
    int rc = test_run(out, sizeof out, "cd '%s' && %s -c src/nn/backend_cuda.cu -o '%s/backend_cuda.o'", src, nvcc,
                      test_tmpdir());
    CHECK_MSG(rc == 0 && out[0] == '\0', "nvcc: exit %d\n%s", rc, out);
    rc = test_run(out, sizeof out, "cd '%s' && %s -fsyntax-only src/nn/backend.c src/bench/bench_gpu.c", src, cc);
    CHECK_MSG(rc == 0 && out[0] == '\0', "the C files with NEVO_CUDA: exit %d\n%s", rc, out);
}
