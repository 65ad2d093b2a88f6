/* Tests for gradients (src/nn/grad.c, include/nevo/grad.h).
 *
 * Three references:
 * - small double-precision forwards written here from policy.h's layout (dense, conv at
 *   strides 1 and 2, tanh, relu, the whole policy with observation normalisation,
 *   log-softmax, cross-entropy, MSE, Huber, the continuous squash), whose central
 *   differences (h = 1e-5, in double) the float analytic gradients must match to 1e-3
 *   of the gradient's largest element, and whose values (softmax's too) the heads'
 *   must match;
 * - float chains written here from grad.c's accumulation rule (each element one fmaf
 *   chain in a stated order, zero multipliers skipped), which the library must match
 *   bit for bit, so whichever clone this CPU runs computes them;
 * - the library itself: the forward that keeps a tape gives nevo_policy_forward's bits,
 *   gradients add up, a batch split in two gives the bits of the whole, each row's
 *   gradient goes to its own network, and every kernel set gives the same bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/grad.h"
#include "nevo/policy.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

#define FD_H 1e-5
#define FD_TOL 1e-3

/* --- helpers ----------------------------------------------------------------------- */

static NevoRng test_rng(uint32_t which) {
    NevoRng rng;
    nevo_rng_init(&rng, 2027, NEVO_RNG_POLICY, 0, which, 0);
    return rng;
}

static void fill_normal(NevoRng *rng, float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * nevo_rng_normal(rng));
}

/* Multipliers as the kernels meet them: a share p_zero of exact zeros, half of them -0,
 * the rest normal values. */
static void fill_sparse(NevoRng *rng, float *x, size_t n, double p_zero) {
    for (size_t i = 0; i < n; i++) {
        double u = nevo_rng_uniform(rng);
        x[i] = u < p_zero / 2 ? 0.0f : u < p_zero ? -0.0f : (float)nevo_rng_normal(rng);
    }
}

static float *floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *doubles(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* got (float analytic) against want (double finite differences), to FD_TOL of the
 * largest |want| (at least 1e-6, for gradients that are all zero); NaN in want: not
 * computed, not compared. */
static void check_grad(const char *what, const float *got, const double *want, size_t n) {
    double scale = 1e-6;
    for (size_t i = 0; i < n; i++)
        if (!isnan(want[i])) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(isnan(want[i]) || fabs((double)got[i] - want[i]) <= FD_TOL * scale,
                  "%s[%zu]: analytic %.9g, finite differences %.9g (scale %.3g)", what, i, got[i], want[i], scale);
}

/* Central differences of f at x (n doubles, restored after) into g, for every step-th
 * element (the others NaN): big layers are sampled, to keep the test quick. */
typedef double (*LossFn)(void *ctx, const double *x);
static void finite_diff_every(LossFn f, void *ctx, double *x, size_t n, size_t step, double *g) {
    for (size_t i = 0; i < n; i++) {
        g[i] = NAN;
        if (i % step) continue;
        double x0 = x[i];
        x[i] = x0 + FD_H;
        double lp = f(ctx, x);
        x[i] = x0 - FD_H;
        double lm = f(ctx, x);
        x[i] = x0;
        g[i] = (lp - lm) / (2 * FD_H);
    }
}

static void finite_diff(LossFn f, void *ctx, double *x, size_t n, double *g) { finite_diff_every(f, ctx, x, n, 1, g); }

static double *to_doubles(const float *x, size_t n) {
    double *d = doubles(n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static NevoPolicy *new_policy(const NevoEnvSpec *spec, const NevoPolicyConfig *cfg, int obs_norm) {
    NevoPolicy *p = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_policy_new(spec, cfg, obs_norm, &p, &err) == NEVO_OK, "policy: %s", err.msg);
    return p;
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

/* conv layers (filters, kernel, stride) then dense hidden layers */
static NevoPolicyConfig conv_config(const char *act, int n_conv, const int (*conv)[3], int n_hidden,
                                    const int *hidden) {
    NevoPolicyConfig c = mlp_config(act, n_hidden, hidden);
    c.n_conv = c.n_conv_kernels = c.n_conv_strides = n_conv;
    for (int i = 0; i < n_conv; i++)
        c.conv_filters[i] = conv[i][0], c.conv_kernels[i] = conv[i][1], c.conv_strides[i] = conv[i][2];
    return c;
}

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

static NevoEnvSpec box_spec(int obs_dim, int action_dim) {
    NevoEnvSpec s;
    memset(&s, 0, sizeof s);
    s.name = "Box-test";
    s.obs_rank = 1;
    s.obs_shape[0] = obs_dim;
    s.obs_dim = obs_dim;
    s.action_kind = NEVO_SPACE_BOX;
    s.action_dim = action_dim;
    for (int i = 0; i < action_dim; i++) s.action_low[i] = -1.0f - 0.5f * i, s.action_high[i] = 2.0f + i;
    return s;
}

/* Random observation statistics for a policy that normalises. */
static void random_obs_stats(NevoPolicy *p, NevoRng *rng) {
    for (int k = 0; k < p->obs_dim; k++) {
        p->obs_mean[k] = (float)(0.3 * nevo_rng_normal(rng));
        p->obs_std[k] = (float)(0.5 + nevo_rng_uniform(rng));
    }
}

/* A conv layer's shapes, as nevo_policy_new sets them (offsets unused). */
static NevoLayer conv_layer(int h, int w, int c, int k, int s, int f) {
    NevoLayer L;
    memset(&L, 0, sizeof L);
    L.kind = NEVO_LAYER_CONV;
    L.act = NEVO_ACT_NONE;
    L.in_h = h, L.in_w = w, L.in_c = c, L.kernel = k, L.stride = s;
    L.out_h = (h - k) / s + 1, L.out_w = (w - k) / s + 1, L.out_c = f;
    L.in_dim = h * w * c, L.out_dim = L.out_h * L.out_w * f, L.fan_in = k * k * c;
    return L;
}

/* --- double-precision references ---------------------------------------------------- */

/* conv of one HWC image, "valid": y (oh, ow, f) = b + windows x W (k, k, c, f) */
static void ref_conv(const NevoLayer *L, const double *W, const double *b, const double *x, double *y) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    for (int oy = 0; oy < L->out_h; oy++)
        for (int ox = 0; ox < L->out_w; ox++)
            for (int f = 0; f < F; f++) {
                double s = b[f];
                for (int ky = 0; ky < K; ky++)
                    for (int kx = 0; kx < K; kx++)
                        for (int c = 0; c < C; c++)
                            s += x[((size_t)(oy * S + ky) * L->in_w + ox * S + kx) * C + c] *
                                 W[((size_t)(ky * K + kx) * C + c) * F + f];
                y[((size_t)oy * L->out_w + ox) * F + f] = s;
            }
}

/* y (out) = b + x (in) W (in, out) */
static void ref_dense(const double *W, const double *b, const double *x, int in, int out, double *y) {
    for (int j = 0; j < out; j++) {
        double s = b[j];
        for (int i = 0; i < in; i++) s += x[i] * W[(size_t)i * out + j];
        y[j] = s;
    }
}

#define REF_MAX 4096

/* The policy's network on one raw observation, in double: normalised as policy.h says
 * where p->obs_norm (x' = clip((x - mean) / std, +-5)), then the layers from their
 * shapes, with parameter offsets counted here (W then b, layer after layer). min_pre,
 * if not NULL, is lowered to the smallest |pre-activation| of a ReLU unit, the distance
 * from its kink. Returns the parameters the layout uses. */
static size_t ref_policy(const NevoPolicy *p, const double *theta, const double *obs, double *out, double *min_pre) {
    double bufa[REF_MAX], bufb[REF_MAX];
    double *x = bufa, *y = bufb;
    CHECK(p->obs_dim <= REF_MAX && p->max_width <= REF_MAX);
    for (int k = 0; k < p->obs_dim; k++) {
        double v = obs[k];
        if (p->obs_norm) {
            v = (v - p->obs_mean[k]) / p->obs_std[k];
            v = v < -5 ? -5 : v > 5 ? 5 : v;
        }
        x[k] = v;
    }
    size_t off = 0;
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        size_t nw = L->kind == NEVO_LAYER_CONV ? (size_t)L->kernel * L->kernel * L->in_c * L->out_c
                                               : (size_t)L->in_dim * L->out_dim;
        size_t nb = L->kind == NEVO_LAYER_CONV ? (size_t)L->out_c : (size_t)L->out_dim;
        const double *W = theta + off, *b = theta + off + nw;
        off += nw + nb;
        if (L->kind == NEVO_LAYER_CONV)
            ref_conv(L, W, b, x, y);
        else
            ref_dense(W, b, x, L->in_dim, L->out_dim, y);
        for (int j = 0; j < L->out_dim; j++) {
            if (L->act == NEVO_ACT_TANH) y[j] = tanh(y[j]);
            if (L->act == NEVO_ACT_RELU) {
                if (min_pre) *min_pre = fmin(*min_pre, fabs(y[j]));
                y[j] = y[j] > 0 ? y[j] : 0;
            }
        }
        double *t = x;
        x = y, y = t;
    }
    memcpy(out, x, sizeof(double) * (size_t)p->n_out);
    return off;
}

/* --- float chains: grad.c's accumulation rule, written out -------------------------- */

static void chain_dense(const float *W, const float *X, const float *dY, int B, int in, int out, float *dW,
                        float *db, float *dX) {
    for (int b = 0; b < B; b++)
        for (int j = 0; j < out; j++) db[j] += dY[(size_t)b * out + j];
    for (int i = 0; i < in; i++)
        for (int j = 0; j < out; j++)
            for (int b = 0; b < B; b++) {
                float x = X[(size_t)b * in + i];
                if (x != 0.0f) dW[(size_t)i * out + j] = fmaf(x, dY[(size_t)b * out + j], dW[(size_t)i * out + j]);
            }
    if (!dX) return;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < in; i++) {
            float s = 0.0f;
            for (int j = 0; j < out; j++) {
                float d = dY[(size_t)b * out + j];
                if (d != 0.0f) s = fmaf(d, W[(size_t)i * out + j], s);
            }
            dX[(size_t)b * in + i] = s;
        }
}

static void chain_conv(const NevoLayer *L, const float *W, const float *x, const float *dy, float *dW, float *db,
                       float *dx) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c, OH = L->out_h, OW = L->out_w;
    for (int o = 0; o < OH * OW; o++)
        for (int f = 0; f < F; f++) db[f] += dy[(size_t)o * F + f];
    for (int ky = 0; ky < K; ky++)
        for (int kx = 0; kx < K; kx++)
            for (int c = 0; c < C; c++)
                for (int f = 0; f < F; f++) {
                    float *g = dW + ((size_t)(ky * K + kx) * C + c) * F + f;
                    for (int oy = 0; oy < OH; oy++)
                        for (int ox = 0; ox < OW; ox++) {
                            float v = x[((size_t)(oy * S + ky) * L->in_w + ox * S + kx) * C + c];
                            if (v != 0.0f) *g = fmaf(v, dy[((size_t)oy * OW + ox) * F + f], *g);
                        }
                }
    if (!dx) return;
    for (int iy = 0; iy < L->in_h; iy++)
        for (int ix = 0; ix < L->in_w; ix++)
            for (int c = 0; c < C; c++) {
                float s = 0.0f;
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        int ky = iy - oy * S, kx = ix - ox * S;
                        if (ky < 0 || ky >= K || kx < 0 || kx >= K) continue;
                        for (int f = 0; f < F; f++) {
                            float d = dy[((size_t)oy * OW + ox) * F + f];
                            if (d != 0.0f) s = fmaf(d, W[((size_t)(ky * K + kx) * C + c) * F + f], s);
                        }
                    }
                dx[((size_t)iy * L->in_w + ix) * C + c] = s;
            }
}

/* --- layers: finite differences ----------------------------------------------------- */

typedef struct DenseCase {
    int B, in, out;
    double *W, *b, *X, *r; /* r: the loss's weights, L = sum r . Y */
} DenseCase;

static double dense_loss(void *ctx, const double *unused) {
    (void)unused;
    DenseCase *c = ctx;
    double L = 0.0, y[256];
    for (int b = 0; b < c->B; b++) {
        ref_dense(c->W, c->b, c->X + (size_t)b * c->in, c->in, c->out, y);
        for (int j = 0; j < c->out; j++) L += c->r[(size_t)b * c->out + j] * y[j];
    }
    return L;
}

TEST(grad_dense_finite_differences) {
    NevoRng rng = test_rng(1);
    enum { B = 5, IN = 70, OUT = 67 }; /* past one tile of 64 both ways */
    float *W = floats(IN * OUT), *b = floats(OUT), *X = floats(B * IN), *dY = floats(B * OUT);
    fill_normal(&rng, W, IN * OUT, 0.3);
    fill_normal(&rng, b, OUT, 0.5);
    fill_sparse(&rng, X, B * IN, 0.3);
    fill_sparse(&rng, dY, B * OUT, 0.3);
    float *dW = floats(IN * OUT), *db = floats(OUT), *dX = floats(B * IN);
    nevo_dense_backward(W, X, dY, B, IN, OUT, dW, db, dX);
    DenseCase c = {B, IN, OUT, to_doubles(W, IN * OUT), to_doubles(b, OUT), to_doubles(X, B * IN),
                   to_doubles(dY, B * OUT)};
    double *g = doubles(B * IN > IN * OUT ? B * IN : IN * OUT);
    finite_diff_every(dense_loss, &c, c.W, IN * OUT, 7, g);
    check_grad("dense dW", dW, g, IN * OUT);
    finite_diff(dense_loss, &c, c.b, OUT, g);
    check_grad("dense db", db, g, OUT);
    finite_diff(dense_loss, &c, c.X, B * IN, g);
    check_grad("dense dX", dX, g, B * IN);
    free(W), free(b), free(X), free(dY), free(dW), free(db), free(dX), free(g);
    free(c.W), free(c.b), free(c.X), free(c.r);
}

typedef struct ConvCase {
    const NevoLayer *L;
    double *W, *b, *x, *r;
} ConvCase;

static double conv_loss(void *ctx, const double *unused) {
    (void)unused;
    ConvCase *c = ctx;
    static double y[REF_MAX];
    ref_conv(c->L, c->W, c->b, c->x, y);
    double L = 0.0;
    for (int i = 0; i < c->L->out_dim; i++) L += c->r[i] * y[i];
    return L;
}

TEST(grad_conv_finite_differences) {
    /* stride 1, stride 2, a layer whose transposed weights the stack holds a few
     * channels at a time, and one whose filter taps it cannot hold (read in place) */
    const NevoLayer layers[4] = {conv_layer(7, 6, 3, 3, 1, 5), conv_layer(9, 9, 4, 3, 2, 6),
                                 conv_layer(5, 5, 16, 3, 1, 32), conv_layer(3, 4, 2, 3, 1, 480)};
    for (int k = 0; k < 4; k++) {
        const NevoLayer *L = &layers[k];
        NevoRng rng = test_rng(10 + (uint32_t)k);
        size_t nw = (size_t)L->fan_in * L->out_c;
        float *W = floats(nw), *b = floats(L->out_c), *x = floats(L->in_dim), *dy = floats(L->out_dim);
        fill_normal(&rng, W, nw, 0.3);
        fill_normal(&rng, b, L->out_c, 0.5);
        fill_sparse(&rng, x, L->in_dim, 0.4);
        fill_sparse(&rng, dy, L->out_dim, 0.3);
        float *dW = floats(nw), *db = floats(L->out_c), *dx = floats(L->in_dim);
        nevo_conv_backward(L, W, x, dy, dW, db, dx);
        ConvCase c = {L, to_doubles(W, nw), to_doubles(b, L->out_c), to_doubles(x, L->in_dim),
                      to_doubles(dy, L->out_dim)};
        double *g = doubles(nw > (size_t)L->in_dim ? nw : (size_t)L->in_dim);
        char what[64];
        finite_diff_every(conv_loss, &c, c.W, nw, nw > 1000 ? 11 : 1, g);
        snprintf(what, sizeof what, "conv %d dW", k);
        check_grad(what, dW, g, nw);
        finite_diff_every(conv_loss, &c, c.b, L->out_c, L->out_c > 100 ? 7 : 1, g);
        snprintf(what, sizeof what, "conv %d db", k);
        check_grad(what, db, g, L->out_c);
        finite_diff_every(conv_loss, &c, c.x, L->in_dim, L->in_dim > 200 ? 3 : 1, g);
        snprintf(what, sizeof what, "conv %d dx", k);
        check_grad(what, dx, g, L->in_dim);
        free(W), free(b), free(x), free(dy), free(dW), free(db), free(dx), free(g);
        free(c.W), free(c.b), free(c.x), free(c.r);
    }
}

typedef struct ActCase {
    NevoActivation act;
    int n;
    const double *r;
} ActCase;

static double act_loss(void *ctx, const double *z) {
    ActCase *c = ctx;
    double L = 0.0;
    for (int i = 0; i < c->n; i++) L += c->r[i] * (c->act == NEVO_ACT_TANH ? tanh(z[i]) : z[i] > 0 ? z[i] : 0.0);
    return L;
}

TEST(grad_activations_finite_differences) {
    enum { N = 40 };
    NevoRng rng = test_rng(20);
    float z[N], y[N], dz[N];
    double r[N], zd[N], g[N];
    for (int i = 0; i < N; i++) {
        /* away from relu's kink; tanh out to where 1 - y^2 is small */
        double u = 0.05 + 3.0 * nevo_rng_uniform(&rng);
        z[i] = (float)(i % 2 ? u : -u);
        zd[i] = z[i];
        r[i] = nevo_rng_normal(&rng);
    }
    for (int a = 0; a < 2; a++) {
        NevoActivation act = a ? NEVO_ACT_RELU : NEVO_ACT_TANH;
        for (int i = 0; i < N; i++) {
            y[i] = act == NEVO_ACT_TANH ? nevo_tanhf(z[i]) : z[i] > 0 ? z[i] : 0.0f;
            dz[i] = (float)r[i];
        }
        nevo_act_backward(act, y, dz, N);
        ActCase c = {act, N, r};
        finite_diff(act_loss, &c, zd, N, g);
        check_grad(a ? "relu" : "tanh", dz, g, N);
    }
    /* NONE leaves the gradient as it is */
    for (int i = 0; i < N; i++) dz[i] = (float)r[i];
    nevo_act_backward(NEVO_ACT_NONE, y, dz, N);
    for (int i = 0; i < N; i++) CHECK(dz[i] == (float)r[i]);
}

/* --- layers: the accumulation rule, bit for bit ------------------------------------ */

TEST(grad_dense_matches_the_chain_rule_bits) {
    /* rows past one block of 64, inputs and outputs past one tile, narrow layers, last
     * tiles of 16 to 63 outputs */
    static const int shapes[][3] = {{70, 131, 70}, {3, 17, 64}, {64, 64, 6}, {1, 1024, 128},
                                    {9, 5, 3},     {5, 40, 100}, {3, 70, 32}, {66, 9, 15}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        NevoRng rng = test_rng(30 + (uint32_t)s);
        size_t nw = (size_t)in * out;
        float *W = floats(nw), *X = floats((size_t)B * in), *dY = floats((size_t)B * out);
        fill_normal(&rng, W, nw, 0.3);
        fill_sparse(&rng, X, (size_t)B * in, 0.4);
        fill_sparse(&rng, dY, (size_t)B * out, 0.4);
        float *dW = floats(nw), *db = floats(out), *dX = floats((size_t)B * in);
        float *rW = floats(nw), *rb = floats(out), *rX = floats((size_t)B * in);
        fill_normal(&rng, dW, nw, 1.0); /* gradients add to what is there */
        fill_normal(&rng, db, out, 1.0);
        for (size_t k = 0; k < nw; k += 7) dW[k] = -0.0f; /* stays -0 while its terms are skipped */
        memcpy(rW, dW, sizeof(float) * nw);
        memcpy(rb, db, sizeof(float) * out);
        for (size_t i = 0; i < (size_t)B * in; i++) dX[i] = rX[i] = NAN; /* dX is overwritten */
        nevo_dense_backward(W, X, dY, B, in, out, dW, db, dX);
        chain_dense(W, X, dY, B, in, out, rW, rb, rX);
        CHECK_MSG(same_bits(dW, rW, nw), "dense %dx%dx%d: dW", B, in, out);
        CHECK_MSG(same_bits(db, rb, out), "dense %dx%dx%d: db", B, in, out);
        CHECK_MSG(same_bits(dX, rX, (size_t)B * in), "dense %dx%dx%d: dX", B, in, out);
        /* dX may be NULL, and changes nothing else */
        memcpy(rW, dW, sizeof(float) * nw);
        nevo_dense_backward(W, X, dY, B, in, out, dW, db, NULL);
        chain_dense(W, X, dY, B, in, out, rW, rb, NULL);
        CHECK(same_bits(dW, rW, nw));
        free(W), free(X), free(dY), free(dW), free(db), free(dX), free(rW), free(rb), free(rX);
    }
}

TEST(grad_conv_matches_the_chain_rule_bits) {
    /* the MinAtar layer on sparse planes, strides 2 and 3, channels in chunks, W in place */
    const NevoLayer layers[6] = {conv_layer(10, 10, 4, 3, 1, 16), conv_layer(9, 9, 4, 3, 2, 6),
                                 conv_layer(6, 6, 16, 3, 1, 32), conv_layer(11, 10, 2, 4, 3, 5),
                                 conv_layer(8, 8, 16, 3, 1, 32), conv_layer(4, 5, 2, 3, 1, 480)};
    for (int k = 0; k < 6; k++) {
        const NevoLayer *L = &layers[k];
        NevoRng rng = test_rng(40 + (uint32_t)k);
        size_t nw = (size_t)L->fan_in * L->out_c;
        float *W = floats(nw), *x = floats(L->in_dim), *dy = floats(L->out_dim);
        fill_normal(&rng, W, nw, 0.3);
        fill_sparse(&rng, x, L->in_dim, k == 0 ? 0.9 : 0.4);
        fill_sparse(&rng, dy, L->out_dim, 0.4);
        float *dW = floats(nw), *db = floats(L->out_c), *dx = floats(L->in_dim);
        float *rW = floats(nw), *rb = floats(L->out_c), *rx = floats(L->in_dim);
        fill_normal(&rng, dW, nw, 1.0);
        fill_normal(&rng, db, L->out_c, 1.0);
        for (size_t i = 0; i < nw; i += 7) dW[i] = -0.0f;
        memcpy(rW, dW, sizeof(float) * nw);
        memcpy(rb, db, sizeof(float) * L->out_c);
        nevo_conv_backward(L, W, x, dy, dW, db, dx);
        chain_conv(L, W, x, dy, rW, rb, rx);
        CHECK_MSG(same_bits(dW, rW, nw), "conv %d: dW", k);
        CHECK_MSG(same_bits(db, rb, L->out_c), "conv %d: db", k);
        CHECK_MSG(same_bits(dx, rx, L->in_dim), "conv %d: dx", k);
        free(W), free(x), free(dy), free(dW), free(db), free(dx), free(rW), free(rb), free(rx);
    }
}

/* a and b (n floats) hold the same bits, or NaN in the same places (kernels.h: a NaN's
 * payload is not part of the rule) */
static int same_bits_or_nan(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isnan(a[i]) ? !isnan(b[i]) : memcmp(a + i, b + i, sizeof(float)) != 0) return 0;
    return 1;
}

TEST(grad_conv_tiles_match_the_chain_rule_bits) {
    /* dense inputs, where dW runs in register tiles with every term and settles the zero
     * sums after: the Fashion-MNIST net's two layers (tiles of 9 taps by 8 filters, 6
     * by 16), 24 filters (16 then 8) and 11 (8, then the scatter for 3); three images
     * a call each, adding up. Variants: 0 plain; 1 an infinite dy (that block by the
     * scatter); 2 a filter whose dy is all zeros and an input channel of zeros, from
     * starts of +0 and -0; 3 inputs and dy under 2^-51, whose products underflow, from
     * +0 starts. */
    const NevoLayer layers[4] = {conv_layer(28, 28, 1, 3, 1, 8), conv_layer(26, 26, 8, 3, 2, 16),
                                 conv_layer(9, 9, 3, 3, 1, 24), conv_layer(8, 7, 5, 2, 1, 11)};
    enum { IMAGES = 3 };
    for (int k = 0; k < 4; k++)
        for (int v = 0; v < 5; v++) {
            const NevoLayer *L = &layers[k];
            NevoRng rng = test_rng(80 + (uint32_t)(5 * k + v));
            size_t nw = (size_t)L->fan_in * L->out_c, nx = (size_t)IMAGES * L->in_dim,
                   ny = (size_t)IMAGES * L->out_dim;
            float *W = floats(nw), *x = floats(nx), *dy = floats(ny);
            fill_normal(&rng, W, nw, 0.3);
            fill_sparse(&rng, x, nx, 0.3);
            fill_sparse(&rng, dy, ny, 0.4);
            float *dW = floats(nw), *db = floats(L->out_c), *dx = floats(nx);
            float *rW = floats(nw), *rb = floats(L->out_c), *rx = floats(nx);
            fill_normal(&rng, dW, nw, 1.0);
            fill_normal(&rng, db, L->out_c, 1.0);
            for (size_t i = 0; i < nw; i += 7) dW[i] = -0.0f;
            if (v == 1) dy[ny / 3] = (k & 1) ? -INFINITY : INFINITY;
            if (v == 2) { /* negative inputs: the dead filter's sums from -0 stay -0 without the zero inputs */
                for (size_t i = 0; i < nx; i++) x[i] = x[i] != 0.0f ? -fabsf(x[i]) : x[i];
                for (size_t i = 1; i < ny; i += L->out_c) dy[i] = 0.0f;
                for (size_t i = 0; i < nx; i += L->in_c) x[i] = -0.0f;
                for (size_t i = 0; i < nw; i++) dW[i] = i % 3 ? 0.0f : -0.0f;
            }
            if (v >= 3) { /* dy or inputs the smallest subnormal: most products round to +-0 */
                float *t = v == 3 ? dy : x, *o = v == 3 ? x : dy;
                size_t nt = v == 3 ? ny : nx, no = v == 3 ? nx : ny;
                for (size_t i = 0; i < nt; i++) t[i] = t[i] != 0.0f ? copysignf(0x1p-149f, t[i]) : t[i];
                for (size_t i = 0; i < no; i++) o[i] *= 0.3f;
                memset(dW, 0, sizeof(float) * nw);
            }
            memcpy(rW, dW, sizeof(float) * nw);
            memcpy(rb, db, sizeof(float) * L->out_c);
            for (int r = 0; r < IMAGES; r++) {
                size_t xo = (size_t)r * L->in_dim, yo = (size_t)r * L->out_dim;
                nevo_conv_backward(L, W, x + xo, dy + yo, dW, db, dx + xo);
                chain_conv(L, W, x + xo, dy + yo, rW, rb, rx + xo);
            }
            CHECK_MSG(same_bits_or_nan(dW, rW, nw), "conv %d variant %d: dW", k, v);
            CHECK_MSG(same_bits_or_nan(db, rb, L->out_c), "conv %d variant %d: db", k, v);
            CHECK_MSG(same_bits_or_nan(dx, rx, nx), "conv %d variant %d: dx", k, v);
            free(W), free(x), free(dy), free(dW), free(db), free(dx), free(rW), free(rb), free(rx);
        }
}

/* --- the whole network ------------------------------------------------------------- */

/* P networks' parameters (P, nparams) and n rows of observations, row i through net[i] */
typedef struct NetCase {
    NevoPolicy *p;
    int P, n;
    const int *net;
    float *params, *obs, *dout;
    double *theta, *obsd; /* double copies the finite differences perturb */
    int q;                /* the network whose parameters are perturbed (-1: all) */
    int row;              /* the only row the loss sums (-1: all) */
    double min_pre;
} NetCase;

/* L = sum over rows of dout . out: the rows of network q (all where q < 0), or row `row` */
static double net_loss(void *ctx, const double *unused) {
    (void)unused;
    NetCase *c = ctx;
    double out[64], L = 0.0;
    size_t np = c->p->nparams;
    for (int i = 0; i < c->n; i++) {
        if ((c->q >= 0 && c->net[i] != c->q) || (c->row >= 0 && i != c->row)) continue;
        ref_policy(c->p, c->theta + (size_t)c->net[i] * np, c->obsd + (size_t)i * c->p->obs_dim, out, &c->min_pre);
        for (int k = 0; k < c->p->n_out; k++) L += (double)c->dout[(size_t)i * c->p->n_out + k] * out[k];
    }
    return L;
}

/* A policy case: random networks (N(0, 0.5^2)), observations (image ones sparse), random
 * statistics with a few observations past the clip, random dout. */
static NetCase net_case(const NevoEnvSpec *spec, const NevoPolicyConfig *cfg, int P, int n, const int *net,
                        uint32_t seed) {
    NetCase c = {0};
    c.p = new_policy(spec, cfg, 1);
    c.P = P, c.n = n, c.net = net, c.q = -1, c.row = -1;
    NevoRng rng = test_rng(seed);
    random_obs_stats(c.p, &rng);
    size_t np = c.p->nparams, od = (size_t)c.p->obs_dim;
    c.params = floats(np * P);
    c.obs = floats(od * n);
    c.dout = floats((size_t)c.p->n_out * n);
    fill_normal(&rng, c.params, np * P, 0.5);
    for (size_t k = 0; k < od * n; k++) {
        double u = nevo_rng_uniform(&rng);
        /* normalised values away from the clip's edges: inside +-4.5, or past +-5.5 */
        double v = u < 0.08 ? 6.0 + u : u < 0.16 ? -6.0 - u : spec->obs_rank == 3 && u < 0.6 ? 0.0 : 4.0 * (u - 0.6);
        c.obs[k] = (float)(c.p->obs_mean[k % od] + v * c.p->obs_std[k % od]);
    }
    fill_normal(&rng, c.dout, (size_t)c.p->n_out * n, 1.0);
    c.theta = to_doubles(c.params, np * P);
    c.obsd = to_doubles(c.obs, od * n);
    return c;
}

static void net_case_free(NetCase *c) {
    nevo_policy_free(c->p);
    free(c->params), free(c->obs), free(c->dout), free(c->theta), free(c->obsd);
}

/* forward with a tape, backward; grads (P, nparams + 3: the gap must stay 0) and dobs */
static void net_backward(NetCase *c, float *out, float *grads, size_t gstride, float *dobs) {
    NevoPolicy *p = c->p;
    float *tape = floats(nevo_grad_tape_floats(p, c->n));
    float *scratch = floats(nevo_grad_scratch_floats(p, c->n));
    nevo_policy_forward_tape(p, c->params, p->nparams, c->net, c->obs, c->n, out, tape);
    nevo_policy_backward(p, c->params, p->nparams, c->net, c->obs, c->n, tape, c->dout, grads, gstride, dobs,
                         scratch);
    free(tape), free(scratch);
}

/* The policy's gradients against central differences of the double reference: every
 * parameter of each network (rows of one network add up), every observation (zero where
 * the clip holds it). */
static void check_net_fd(const NevoEnvSpec *spec, const NevoPolicyConfig *cfg, uint32_t seed, const char *what) {
    static const int net[5] = {1, 0, 1, 1, 0};
    NetCase c = net_case(spec, cfg, 2, 5, net, seed);
    NevoPolicy *p = c.p;
    size_t np = p->nparams, gs = np + 3;
    CHECK_EQ_INT(ref_policy(p, c.theta, c.obsd, (double[64]){0}, NULL), np);
    float *out = floats((size_t)p->n_out * c.n), *grads = floats(gs * 2), *dobs = floats((size_t)p->obs_dim * c.n);
    net_backward(&c, out, grads, gs, dobs);
    double *g = doubles(np > (size_t)p->obs_dim * c.n ? np : (size_t)p->obs_dim * c.n);
    char name[128];
    c.min_pre = INFINITY;
    for (int q = 0; q < 2; q++) {
        c.q = q;
        finite_diff(net_loss, &c, c.theta + (size_t)q * np, np, g);
        snprintf(name, sizeof name, "%s: network %d's parameters", what, q);
        check_grad(name, grads + (size_t)q * gs, g, np);
        for (int k = 0; k < 3; k++) CHECK(grads[(size_t)q * gs + np + k] == 0.0f);
    }
    c.q = -1;
    for (int i = 0; i < c.n; i++) { /* an observation moves its own row's loss only */
        c.row = i;
        finite_diff(net_loss, &c, c.obsd + (size_t)i * p->obs_dim, (size_t)p->obs_dim, g + (size_t)i * p->obs_dim);
    }
    c.row = -1;
    snprintf(name, sizeof name, "%s: observations", what);
    check_grad(name, dobs, g, (size_t)p->obs_dim * c.n);
    /* the clipped observations' gradients are exactly zero */
    int clipped = 0;
    for (size_t k = 0; k < (size_t)p->obs_dim * c.n; k++) {
        double v = (c.obs[k] - p->obs_mean[k % p->obs_dim]) / p->obs_std[k % p->obs_dim];
        if (fabs(v) > 5) {
            CHECK(dobs[k] == 0.0f);
            clipped++;
        }
    }
    CHECK(clipped > 0);
    /* no relu unit came within reach of its kink */
    CHECK_MSG(c.min_pre > 1e-3, "%s: a pre-activation at %g", what, c.min_pre);
    free(out), free(grads), free(dobs), free(g);
    net_case_free(&c);
}

TEST(grad_policy_mlp_finite_differences) {
    NevoEnvSpec spec = box_spec(5, 3);
    int h[2] = {7, 6};
    NevoPolicyConfig cfg = mlp_config("tanh", 2, h);
    check_net_fd(&spec, &cfg, 50, "mlp tanh");
    cfg = mlp_config("relu", 2, h);
    check_net_fd(&spec, &cfg, 51, "mlp relu");
}

TEST(grad_policy_conv_finite_differences) {
    NevoEnvSpec spec = image_spec(7, 7, 3, 3);
    static const int conv[2][3] = {{4, 3, 1}, {5, 3, 2}};
    int h[1] = {6};
    NevoPolicyConfig cfg = conv_config("tanh", 2, conv, 1, h);
    check_net_fd(&spec, &cfg, 60, "conv tanh");
    cfg = conv_config("relu", 2, conv, 1, h);
    check_net_fd(&spec, &cfg, 62, "conv relu");
}

/* Rows of several networks, runs of one network long enough for the lanes layout, with
 * obs_norm: for a MinAtar-like net, a relu and a tanh MLP. */
static const int mixed_net[] = {2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 2, 2, 1, 0};
enum { MIXED_N = sizeof mixed_net / sizeof mixed_net[0] };

static NetCase mixed_case(int which) {
    static const int conv[1][3] = {{16, 3, 1}};
    int h1[1] = {128}, h2[2] = {64, 64};
    if (which == 0) {
        NevoEnvSpec spec = image_spec(10, 10, 4, 6);
        NevoPolicyConfig cfg = conv_config("relu", 1, conv, 1, h1);
        return net_case(&spec, &cfg, 3, MIXED_N, mixed_net, 70);
    }
    NevoEnvSpec spec = box_spec(17, 6);
    NevoPolicyConfig cfg = mlp_config(which == 1 ? "relu" : "tanh", 2, h2);
    return net_case(&spec, &cfg, 3, MIXED_N, mixed_net, 70 + (uint32_t)which);
}

TEST(grad_forward_tape_bits_equal_forward) {
    for (int which = 0; which < 3; which++) {
        NetCase c = mixed_case(which);
        NevoPolicy *p = c.p;
        size_t no = (size_t)p->n_out * c.n;
        float *want = floats(no), *out = floats(no), *tape = floats(nevo_grad_tape_floats(p, c.n));
        float *scratch = floats(nevo_policy_scratch_floats(p, c.n));
        nevo_policy_forward(p, c.params, p->nparams, c.net, c.obs, c.n, want, scratch);
        nevo_policy_forward_tape(p, c.params, p->nparams, c.net, c.obs, c.n, out, tape);
        CHECK_MSG(same_bits(out, want, no), "net %d: forward with tape differs from nevo_policy_forward", which);
        /* the last slab is the outputs; the normalised observations are as the forward's */
        CHECK(same_bits(tape + nevo_grad_tape_offset(p, c.n, p->n_layers - 1), want, no));
        const float *xn = tape + nevo_grad_tape_offset(p, c.n, p->n_layers);
        for (int k = 0; k < p->obs_dim * c.n; k++) {
            float v = (c.obs[k] - p->obs_mean[k % p->obs_dim]) / p->obs_std[k % p->obs_dim];
            CHECK(xn[k] == (v < -5.0f ? -5.0f : v > 5.0f ? 5.0f : v));
        }
        CHECK(nevo_grad_tape_floats(p, c.n) >= nevo_grad_tape_offset(p, c.n, p->n_layers) + (size_t)p->obs_dim * c.n);
        free(want), free(out), free(tape), free(scratch);
        net_case_free(&c);
    }
}

/* Gradients add: a batch in one call gives the bits of its two halves in two calls
 * (each element's chain runs on), each row's terms go to its own network (the rows of
 * one network alone give that network's bits), and gradients already there are added to. */
TEST(grad_policy_accumulates_by_network) {
    NetCase c = mixed_case(0);
    NevoPolicy *p = c.p;
    size_t np = p->nparams, gs = np + 1, n = (size_t)c.n, od = (size_t)p->obs_dim, no = (size_t)p->n_out;
    float *out = floats(no * n), *whole = floats(gs * 3), *halves = floats(gs * 3);
    float *dobs = floats(od * n), *dobs2 = floats(od * n);
    net_backward(&c, out, whole, gs, dobs);
    NetCase h = c;
    int cut = 13;
    h.n = cut;
    net_backward(&h, out, halves, gs, dobs2);
    h.net = c.net + cut, h.obs = c.obs + cut * od, h.dout = c.dout + cut * no, h.n = c.n - cut;
    net_backward(&h, out, halves, gs, dobs2 + cut * od);
    CHECK(same_bits(whole, halves, gs * 3));
    CHECK(same_bits(dobs, dobs2, od * n));
    /* network 2's rows alone, gathered */
    int idx[MIXED_N], m = 0;
    for (int i = 0; i < c.n; i++)
        if (c.net[i] == 2) idx[m++] = i;
    float *obs2 = floats(od * m), *dout2 = floats(no * m), *alone = floats(gs * 3);
    int net2[MIXED_N];
    for (int r = 0; r < m; r++) {
        memcpy(obs2 + r * od, c.obs + idx[r] * od, sizeof(float) * od);
        memcpy(dout2 + r * no, c.dout + idx[r] * no, sizeof(float) * no);
        net2[r] = 2;
    }
    h = c;
    h.n = m, h.net = net2, h.obs = obs2, h.dout = dout2;
    net_backward(&h, out, alone, gs, dobs2);
    CHECK(same_bits(alone + 2 * gs, whole + 2 * gs, gs));
    for (size_t k = 0; k < 2 * gs; k++) CHECK(alone[k] == 0.0f);
    /* a second pass adds the same terms again: close to twice the first */
    net_backward(&c, out, whole, gs, dobs);
    double worst = 0.0, scale = 0.0;
    for (size_t k = 0; k < gs * 3; k++) {
        worst = fmax(worst, fabs(whole[k] - 2.0 * halves[k]));
        scale = fmax(scale, fabs(halves[k]));
    }
    CHECK_MSG(worst <= 1e-5 * scale, "twice the gradient off by %g (scale %g)", worst, scale);
    free(out), free(whole), free(halves), free(dobs), free(dobs2), free(obs2), free(dout2), free(alone);
    net_case_free(&c);
}

/* Every kernel set gives the same tape, outputs, gradients and observation gradients:
 * each set runs in a child process of its own (NEVO_KERNELS picks it before the first
 * nevo_kernels call there) and writes its results to shared memory. */
TEST(grad_same_bits_for_every_kernel_set) {
    static const char *const names[3] = {"generic", "avx2", "avx512"};
    for (int which = 0; which < 3; which++) {
        NetCase c = mixed_case(which);
        NevoPolicy *p = c.p;
        size_t n = (size_t)c.n, no = (size_t)p->n_out * n, gs = p->nparams, od = (size_t)p->obs_dim * n;
        size_t nt = nevo_grad_tape_offset(p, c.n, p->n_layers) + od; /* the tape but its work area */
        size_t each = no + nt + 3 * gs + od;
        float *shared = mmap(NULL, sizeof(float) * each * 3, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(shared != MAP_FAILED);
        int ran[3] = {0};
        for (int s = 0; s < 3; s++) {
            if (!nevo_kernels_named(names[s])) continue;
            pid_t pid = fork();
            CHECK(pid >= 0);
            if (pid == 0) {
                setenv("NEVO_KERNELS", names[s], 1);
                if (strcmp(nevo_kernels()->name, names[s]) != 0) _exit(3);
                float *r = shared + each * s;
                float *tape = floats(nevo_grad_tape_floats(p, c.n));
                float *scratch = floats(nevo_grad_scratch_floats(p, c.n));
                float *want = floats(no), *fs = floats(nevo_policy_scratch_floats(p, c.n));
                nevo_policy_forward_tape(p, c.params, p->nparams, c.net, c.obs, c.n, r, tape);
                memcpy(r + no, tape, sizeof(float) * nt);
                nevo_policy_backward(p, c.params, p->nparams, c.net, c.obs, c.n, tape, c.dout, r + no + nt, gs,
                                     r + no + nt + 3 * gs, scratch);
                nevo_policy_forward(p, c.params, p->nparams, c.net, c.obs, c.n, want, fs);
                _exit(same_bits(want, r, no) ? 0 : 4);
            }
            int status = 0;
            CHECK(waitpid(pid, &status, 0) == pid);
            CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "net %d, %s kernels: child status %d", which,
                      names[s], status);
            ran[s] = 1;
        }
        CHECK(ran[0]);
        for (int s = 1; s < 3; s++)
            if (ran[s])
                CHECK_MSG(same_bits(shared, shared + each * s, each), "net %d: %s differs from generic", which,
                          names[s]);
        munmap(shared, sizeof(float) * each * 3);
        net_case_free(&c);
    }
}

/* --- heads and losses ---------------------------------------------------------------- */

typedef struct HeadCase {
    int B, C;
    const double *r; /* loss weights */
    const int *labels;
    int kind; /* 0: sum r . log_softmax; 1: mean cross-entropy */
} HeadCase;

static void ref_log_softmax(const double *x, int C, double *y) {
    double m = x[0], s = 0.0;
    for (int c = 1; c < C; c++) m = fmax(m, x[c]);
    for (int c = 0; c < C; c++) s += exp(x[c] - m);
    for (int c = 0; c < C; c++) y[c] = x[c] - m - log(s);
}

static double head_loss(void *ctx, const double *x) {
    HeadCase *h = ctx;
    double y[32], L = 0.0;
    for (int b = 0; b < h->B; b++) {
        ref_log_softmax(x + (size_t)b * h->C, h->C, y);
        if (h->kind == 0)
            for (int c = 0; c < h->C; c++) L += h->r[(size_t)b * h->C + c] * y[c];
        else
            L -= y[h->labels[b]] / h->B;
    }
    return L;
}

TEST(grad_softmax_log_softmax_cross_entropy) {
    enum { B = 4, C = 7 };
    NevoRng rng = test_rng(80);
    float x[B * C], y[B * C], dx[B * C], rf[B * C];
    double xd[B * C], r[B * C], g[B * C], want[C];
    int labels[B] = {0, 6, 3, 3};
    for (int i = 0; i < B * C; i++) {
        x[i] = (float)(2.0 * nevo_rng_normal(&rng));
        xd[i] = x[i];
        r[i] = nevo_rng_normal(&rng);
        rf[i] = (float)r[i];
    }
    /* values against the reference */
    nevo_softmax(x, B, C, y);
    for (int b = 0; b < B; b++) {
        ref_log_softmax(xd + b * C, C, want);
        for (int c = 0; c < C; c++) CHECK_NEAR(y[b * C + c], exp(want[c]), 1e-6);
    }
    nevo_log_softmax(x, B, C, y);
    for (int b = 0; b < B; b++) {
        ref_log_softmax(xd + b * C, C, want);
        for (int c = 0; c < C; c++) CHECK_NEAR(y[b * C + c], want[c], 1e-5 * fmax(1.0, fabs(want[c])));
    }
    /* log-softmax backward, also in place */
    nevo_log_softmax_backward(y, rf, B, C, dx);
    HeadCase h = {B, C, r, labels, 0};
    finite_diff(head_loss, &h, xd, B * C, g);
    check_grad("log_softmax", dx, g, B * C);
    memcpy(dx, rf, sizeof dx);
    nevo_log_softmax_backward(y, dx, B, C, dx);
    check_grad("log_softmax in place", dx, g, B * C);
    /* cross-entropy: the mean and its gradient */
    h.kind = 1;
    double loss = nevo_cross_entropy(x, labels, B, C, dx);
    CHECK_NEAR(loss, head_loss(&h, xd), 1e-9);
    finite_diff(head_loss, &h, xd, B * C, g);
    check_grad("cross_entropy", dx, g, B * C);
    CHECK_NEAR(nevo_cross_entropy(x, labels, B, C, NULL), loss, 0.0);
}

TEST(grad_softmax_stable_for_large_logits) {
    const float x[2 * 4] = {1e4f, -1e4f, 0.0f, 1e4f - 1.0f, -3e4f, -3e4f, -3e4f + 2.0f, 3e4f};
    float y[8], ls[8], d[8];
    int labels[2] = {1, 0};
    nevo_softmax(x, 2, 4, y);
    nevo_log_softmax(x, 2, 4, ls);
    double loss = nevo_cross_entropy(x, labels, 2, 4, d);
    for (int i = 0; i < 8; i++) CHECK(isfinite(y[i]) && isfinite(ls[i]) && isfinite(d[i]));
    CHECK(isfinite(loss));
    CHECK_NEAR(y[0] + y[1] + y[2] + y[3], 1.0, 1e-6);
    CHECK_NEAR(y[0], 1.0 / (1.0 + exp(-1.0)), 1e-6);
    CHECK_NEAR(ls[1], -2e4 - log(1.0 + exp(-1.0)), 1e-2);
    CHECK(y[7] == 1.0f && y[4] == 0.0f);
    /* row 0's label 1 sits 2e4 below the top; row 1's label 0 6e4 below */
    CHECK_NEAR(loss, 0.5 * ((2e4 + log(1.0 + exp(-1.0))) + 6e4), 1e-2);
    nevo_log_softmax_backward(ls, d, 2, 4, d);
    for (int i = 0; i < 8; i++) CHECK(isfinite(d[i]));
}

typedef struct RegCase {
    int n;
    const double *t;
    double delta; /* 0: MSE */
} RegCase;

static double reg_loss(void *ctx, const double *y) {
    RegCase *c = ctx;
    double L = 0.0;
    for (int i = 0; i < c->n; i++) {
        double d = y[i] - c->t[i], ad = fabs(d);
        L += c->delta == 0 || ad <= c->delta ? 0.5 * d * d : c->delta * (ad - 0.5 * c->delta);
    }
    return L / c->n;
}

TEST(grad_mse_and_huber) {
    enum { N = 12 };
    NevoRng rng = test_rng(90);
    float y[N], t[N], dy[N];
    double yd[N], td[N], g[N];
    for (int i = 0; i < N; i++) {
        t[i] = (float)nevo_rng_normal(&rng);
        /* differences on both sides of delta = 1 (and of -1), none near it */
        double u = nevo_rng_uniform(&rng);
        double d = (i % 4 < 2 ? 0.1 + 0.7 * u : 1.3 + u) * (i % 2 ? -1.0 : 1.0);
        y[i] = (float)(t[i] + d);
        yd[i] = y[i], td[i] = t[i];
    }
    RegCase c = {N, td, 0.0};
    double loss = nevo_mse_loss(y, t, N, dy);
    CHECK_NEAR(loss, reg_loss(&c, yd), 1e-12);
    finite_diff(reg_loss, &c, yd, N, g);
    check_grad("mse", dy, g, N);
    c.delta = 1.0;
    loss = nevo_huber_loss(y, t, N, 1.0f, dy);
    CHECK_NEAR(loss, reg_loss(&c, yd), 1e-12);
    finite_diff(reg_loss, &c, yd, N, g);
    check_grad("huber", dy, g, N);
    int inside = 0, outside = 0;
    for (int i = 0; i < N; i++) {
        double d = fabs(yd[i] - td[i]);
        inside += d < 1.0, outside += d > 1.0;
        if (d > 1.0) CHECK_NEAR(fabs(dy[i]), 1.0 / N, 1e-7);
    }
    CHECK(inside > 0 && outside > 0);
    CHECK_NEAR(nevo_huber_loss(y, t, N, 1.0f, NULL), loss, 0.0);
}

typedef struct SquashCase {
    const NevoPolicy *p;
    int n;
    const double *r;
} SquashCase;

static double squash_loss(void *ctx, const double *o) {
    SquashCase *c = ctx;
    const NevoPolicy *p = c->p;
    double L = 0.0;
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < p->action_dim; j++) {
            double lo = p->action_low[j], hi = p->action_high[j];
            double a = lo + (tanh(o[i * p->n_out + j]) + 1.0) * (hi - lo) / 2;
            L += c->r[i * p->action_dim + j] * a;
        }
    return L;
}

TEST(grad_squash_finite_differences) {
    NevoEnvSpec spec = box_spec(5, 3);
    int h[1] = {4};
    NevoPolicyConfig cfg = mlp_config("tanh", 1, h);
    NevoPolicy *p = new_policy(&spec, &cfg, 0);
    enum { N = 4, A = 3 };
    NevoRng rng = test_rng(100);
    float o[N * A], r[N * A], d[N * A], act[N * A];
    double od[N * A], rd[N * A], g[N * A];
    for (int i = 0; i < N * A; i++) {
        o[i] = (float)(1.5 * nevo_rng_normal(&rng));
        od[i] = o[i];
        rd[i] = nevo_rng_normal(&rng);
        r[i] = (float)rd[i];
    }
    nevo_squash_backward(p, o, r, N, d);
    SquashCase c = {p, N, rd};
    finite_diff(squash_loss, &c, od, N * A, g);
    check_grad("squash", d, g, N * A);
    /* the head it differentiates is the one nevo_policy_actions applies */
    nevo_policy_actions(p, o, N, act);
    for (int i = 0; i < N * A; i++) {
        double lo = p->action_low[i % A], hi = p->action_high[i % A];
        CHECK_NEAR(act[i], lo + (tanh(od[i]) + 1.0) * (hi - lo) / 2, 1e-5);
    }
    nevo_policy_free(p);
}
