/* Tests for the LSTM layer (src/nn/lstm.c, include/nevo/lstm.h).
 *
 * The reference is a double-precision LSTM written here from the header's definition
 * (gates i, f, g, o; sigmoid 1 / (1 + e^-z), libm tanh), with a loss that weighs every
 * output and the final state: the float backward is checked against its central finite
 * differences for every parameter, input and initial state, the float forward against
 * its values, and one step against values worked out by hand. The bit-level rules are
 * checked by memcmp: a step equals the sequence forward, a row does not depend on the
 * batch, the backward adds into grad, and every kernel set gives the same bits (each
 * set in a child process that forces it with NEVO_KERNELS, as the library chooses the
 * set once per process). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/lstm.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

/* --- helpers ------------------------------------------------------------------------ */

static void fill_gauss(NevoRng *rng, float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * nevo_rng_normal(rng));
}

static float *falloc(size_t n) { return malloc(sizeof(float) * (n ? n : 1)); }

/* n floats of NaN: a buffer read before it is written shows as NaN in the results */
static float *poisoned(size_t n) {
    float *p = falloc(n);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* --- the double-precision reference ------------------------------------------------- */

#define REF_MAX 256 /* B H of the reference's cases */

typedef struct Case {
    int in, H, T, B;
    const uint8_t *reset;          /* (T, B) or NULL */
    const double *wh, *whT, *wcT;  /* the loss's weights: (T, B, H), (B, H), (B, H) */
} Case;

static double sigm(double z) { return 1.0 / (1.0 + exp(-z)); }

/* The loss sum wh h + sum whT hT + sum wcT cT of the forward from params p (the
 * header's layout), inputs x (T, B, in) and initial state h0, c0 (B, H); the outputs
 * into h (T, B, H) when not NULL. */
static double ref_loss(const Case *cs, const double *p, const double *x, const double *h0, const double *c0,
                       double *hout) {
    int in = cs->in, H = cs->H, B = cs->B, G = 4 * H;
    CHECK(B * H <= REF_MAX);
    double h[REF_MAX], c[REF_MAX];
    memcpy(h, h0, sizeof(double) * (size_t)(B * H));
    memcpy(c, c0, sizeof(double) * (size_t)(B * H));
    const double *Wx = p, *Wh = p + (size_t)in * G, *bias = p + (size_t)(in + H) * G;
    double loss = 0.0;
    for (int t = 0; t < cs->T; t++) {
        for (int b = 0; b < B; b++) {
            double *hb = h + b * H, *cb = c + b * H;
            if (cs->reset && cs->reset[t * B + b])
                for (int j = 0; j < H; j++) hb[j] = cb[j] = 0.0;
            const double *xb = x + ((size_t)t * B + b) * in;
            double z[4 * 64];
            for (int q = 0; q < G; q++) {
                double s = bias[q];
                for (int k = 0; k < in; k++) s += xb[k] * Wx[(size_t)k * G + q];
                for (int k = 0; k < H; k++) s += hb[k] * Wh[(size_t)k * G + q];
                z[q] = s;
            }
            for (int j = 0; j < H; j++) {
                double i = sigm(z[j]), f = sigm(z[H + j]), g = tanh(z[2 * H + j]), o = sigm(z[3 * H + j]);
                cb[j] = f * cb[j] + i * g;
                hb[j] = o * tanh(cb[j]);
            }
            for (int j = 0; j < H; j++) {
                size_t k = ((size_t)t * B + b) * H + j;
                if (hout) hout[k] = hb[j];
                loss += cs->wh[k] * hb[j];
            }
        }
    }
    for (int k = 0; k < B * H; k++) loss += cs->whT[k] * h[k] + cs->wcT[k] * c[k];
    return loss;
}

/* Central difference of the loss in v[k] (one of p, x, h0, c0), step 1e-5. */
static double fd(const Case *cs, double *p, double *x, double *h0, double *c0, double *v, size_t k) {
    const double e = 1e-5;
    double old = v[k];
    v[k] = old + e;
    double lp = ref_loss(cs, p, x, h0, c0, NULL);
    v[k] = old - e;
    double lm = ref_loss(cs, p, x, h0, c0, NULL);
    v[k] = old;
    return (lp - lm) / (2 * e);
}

/* Checks got (n) against the finite differences of v's entries, within tol times the
 * largest of them; returns that scale. */
static double check_fd(const Case *cs, double *p, double *x, double *h0, double *c0, double *v, const float *got,
                       size_t n, double tol, const char *what) {
    double *want = malloc(sizeof(double) * n), scale = 0.0;
    for (size_t k = 0; k < n; k++) {
        want[k] = fd(cs, p, x, h0, c0, v, k);
        scale = fmax(scale, fabs(want[k]));
    }
    CHECK_MSG(scale > 1e-3, "%s: the gradient is all but zero (%g)", what, scale);
    for (size_t k = 0; k < n; k++)
        CHECK_MSG(fabs(got[k] - want[k]) <= tol * scale, "%s[%zu]: backward %.9g, finite differences %.9g (scale %g)",
                  what, k, got[k], want[k], scale);
    free(want);
    return scale;
}

static double *to_double(const float *v, size_t n) {
    double *d = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

/* --- the layout, init ----------------------------------------------------------------- */

TEST(lstm_init_layout) {
    int in = 3, H = 5;
    size_t np = nevo_lstm_params(in, H), nw = (size_t)(in + H) * 4 * H;
    CHECK_EQ_INT(np, (in + H) * 4 * H + 4 * H);
    NevoRng rng;
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    float *normals = falloc(nw), *p = poisoned(np), *q = poisoned(np);
    nevo_rng_fill_normal(&rng, normals, nw);
    nevo_lstm_init(in, H, normals, p);
    float s = (float)(1.0 / sqrt(8.0));
    for (size_t k = 0; k < nw; k++) CHECK(p[k] == normals[k] * s);
    for (int j = 0; j < 4 * H; j++) CHECK(p[nw + j] == (j >= H && j < 2 * H ? 1.0f : 0.0f));
    /* from a stream: the stream's next normals, the same init */
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    nevo_lstm_init_rng(in, H, &rng, q);
    CHECK(same_bits(p, q, np));
    /* in place */
    memcpy(q, normals, sizeof(float) * nw);
    nevo_lstm_init(in, H, q, q);
    CHECK(same_bits(p, q, np));
    CHECK(nevo_lstm_forward_flops(in, H) == 2.0 * 8 * 20);
    free(normals), free(p), free(q);
}

/* --- one step by hand --------------------------------------------------------------- */

/* in = 1, H = 1: the weights picked so each gate sum is worked out by hand. */
TEST(lstm_one_step_by_hand) {
    /* Wx (1, 4), Wh (1, 4), b (4), gates i, f, g, o */
    const float p[12] = {1.0f, -0.5f, 2.0f, 0.25f, 0.5f, 1.5f, -1.0f, 2.0f, 0.1f, 1.0f, -0.2f, 0.0f};
    const float x = 0.5f, h0 = -0.25f, c0 = 0.8f;
    /* z = b + x Wx + h0 Wh:
     *   i: 0.1 + 0.5 - 0.125 = 0.475     f: 1.0 - 0.25 - 0.375 = 0.375
     *   g: -0.2 + 1.0 + 0.25 = 1.05      o: 0.0 + 0.125 - 0.5 = -0.375 */
    double i = 1.0 / (1.0 + exp(-0.475)), f = 1.0 / (1.0 + exp(-0.375)), g = tanh(1.05),
           o = 1.0 / (1.0 + exp(0.375));
    double c = f * 0.8 + i * g, h = o * tanh(c);
    /* i = 0.61657, f = 0.59267, g = 0.78181, o = 0.40733: c = 0.95617, h = 0.30247 */
    CHECK_NEAR(c, 0.95617, 1e-5);
    CHECK_NEAR(h, 0.30247, 1e-5);
    float hs, hT, cT;
    float *tape = poisoned(nevo_lstm_tape_floats(1, 1, 1, 1));
    nevo_lstm_forward(p, 1, 1, 1, 1, &x, NULL, &h0, &c0, &hs, &hT, &cT, tape);
    CHECK_NEAR(hs, h, 2e-7);
    CHECK(hT == hs);
    CHECK_NEAR(cT, c, 2e-7);
    /* the same step from a zero state, by a reset and by NULL state */
    double i0 = 1.0 / (1.0 + exp(-0.6)), g0 = tanh(0.8), o0 = 1.0 / (1.0 + exp(-0.125));
    double c_0 = i0 * g0, h_0 = o0 * tanh(c_0);
    uint8_t reset = 1;
    float h1, h2;
    nevo_lstm_forward(p, 1, 1, 1, 1, &x, &reset, &h0, &c0, &h1, NULL, NULL, tape);
    nevo_lstm_forward(p, 1, 1, 1, 1, &x, NULL, NULL, NULL, &h2, NULL, NULL, tape);
    CHECK_NEAR(h1, h_0, 2e-7);
    CHECK(h1 == h2);
    free(tape);
}

/* --- gradients against finite differences ------------------------------------------- */

/* in = 3, H = 4, T = 5, B = 2; sequence 1 starts a new episode at step 2; a nonzero
 * initial state; a loss on every output and on the final state. */
typedef struct Small {
    Case cs;
    float p[(3 + 4 + 1) * 16], x[5 * 2 * 3], h0[8], c0[8];
    float dh[5 * 2 * 4], dhT[8], dcT[8];
    uint8_t reset[10];
    double wh[40], whT[8], wcT[8];
} Small;

static void small_case(Small *s) {
    memset(s, 0, sizeof *s);
    s->cs = (Case){.in = 3, .H = 4, .T = 5, .B = 2, .reset = s->reset, .wh = s->wh, .whT = s->whT, .wcT = s->wcT};
    NevoRng rng;
    nevo_rng_init(&rng, 11, NEVO_RNG_USER, 0, 0, 0);
    fill_gauss(&rng, s->p, sizeof s->p / sizeof(float), 0.6);
    fill_gauss(&rng, s->x, 30, 1.0);
    fill_gauss(&rng, s->h0, 8, 0.5);
    fill_gauss(&rng, s->c0, 8, 1.0);
    fill_gauss(&rng, s->dh, 40, 1.0);
    fill_gauss(&rng, s->dhT, 8, 1.0);
    fill_gauss(&rng, s->dcT, 8, 1.0);
    s->reset[2 * 2 + 1] = 1;
    for (int k = 0; k < 40; k++) s->wh[k] = s->dh[k];
    for (int k = 0; k < 8; k++) s->whT[k] = s->dhT[k], s->wcT[k] = s->dcT[k];
}

typedef struct Grads {
    float *grad, *dx, *dh0, *dc0, *h, *hT, *cT;
} Grads;

/* The float forward and backward of case s with dL/dh = dh (or NULL); grad from zeros. */
static Grads run_small(const Small *s, const float *dh, const float *dhT, const float *dcT) {
    int in = s->cs.in, H = s->cs.H, T = s->cs.T, B = s->cs.B;
    Grads g;
    size_t np = nevo_lstm_params(in, H);
    g.grad = falloc(np);
    memset(g.grad, 0, sizeof(float) * np);
    g.dx = poisoned((size_t)T * B * in), g.dh0 = poisoned((size_t)B * H), g.dc0 = poisoned((size_t)B * H);
    g.h = poisoned((size_t)T * B * H), g.hT = poisoned((size_t)B * H), g.cT = poisoned((size_t)B * H);
    float *tape = poisoned(nevo_lstm_tape_floats(in, H, T, B));
    float *scratch = poisoned(nevo_lstm_backward_scratch_floats(in, H, T, B));
    nevo_lstm_forward(s->p, in, H, T, B, s->x, s->reset, s->h0, s->c0, g.h, g.hT, g.cT, tape);
    nevo_lstm_backward(s->p, in, H, T, B, tape, dh, dhT, dcT, g.grad, g.dx, g.dh0, g.dc0, scratch);
    free(tape), free(scratch);
    return g;
}

static void free_grads(Grads *g) { free(g->grad), free(g->dx), free(g->dh0), free(g->dc0), free(g->h), free(g->hT), free(g->cT); }

TEST(lstm_backward_finite_differences) {
    Small s;
    small_case(&s);
    const Case *cs = &s.cs;
    size_t np = nevo_lstm_params(3, 4);
    Grads g = run_small(&s, s.dh, s.dhT, s.dcT);
    double *p = to_double(s.p, np), *x = to_double(s.x, 30), *h0 = to_double(s.h0, 8), *c0 = to_double(s.c0, 8);
    /* the forward against the reference's outputs */
    double href[40];
    ref_loss(cs, p, x, h0, c0, href);
    for (int k = 0; k < 40; k++) CHECK_MSG(fabs(g.h[k] - href[k]) <= 1e-6, "h[%d]: %.9g vs %.9g", k, g.h[k], href[k]);
    for (int k = 0; k < 8; k++) CHECK(g.hT[k] == g.h[32 + k]);
    /* every parameter, input and initial state */
    check_fd(cs, p, x, h0, c0, p, g.grad, np, 1e-5, "dtheta");
    check_fd(cs, p, x, h0, c0, x, g.dx, 30, 1e-5, "dx");
    check_fd(cs, p, x, h0, c0, h0, g.dh0, 8, 1e-5, "dh0");
    check_fd(cs, p, x, h0, c0, c0, g.dc0, 8, 1e-5, "dc0");
    free_grads(&g);
    free(p), free(x), free(h0), free(c0);
}

/* A loss only on sequence 1's outputs from its reset on: its steps before the reset,
 * its initial state and everything of sequence 0 get exactly zero gradient. */
TEST(lstm_reset_cuts_gradient) {
    Small s;
    small_case(&s);
    float dh[40], dhT[8], dcT[8];
    memcpy(dh, s.dh, sizeof dh), memcpy(dhT, s.dhT, sizeof dhT), memcpy(dcT, s.dcT, sizeof dcT);
    for (int t = 0; t < 5; t++)
        for (int b = 0; b < 2; b++)
            if (b == 0 || t < 2) memset(dh + (t * 2 + b) * 4, 0, sizeof(float) * 4);
    memset(dhT, 0, sizeof(float) * 4), memset(dcT, 0, sizeof(float) * 4);
    Grads g = run_small(&s, dh, dhT, dcT);
    for (int j = 0; j < 8; j++) CHECK(g.dh0[j] == 0.0f && g.dc0[j] == 0.0f);
    for (int t = 0; t < 5; t++)
        for (int b = 0; b < 2; b++)
            for (int k = 0; k < 3; k++) {
                float v = g.dx[(t * 2 + b) * 3 + k];
                if (b == 0 || t < 2)
                    CHECK_MSG(v == 0.0f, "dx[t %d, b %d, %d] = %g across the reset", t, b, k, v);
                else if (t == 2)
                    CHECK(v != 0.0f);
            }
    /* the weights still get the gradient of the steps after the reset */
    double gs = 0.0;
    for (size_t k = 0; k < nevo_lstm_params(3, 4); k++) gs += fabs(g.grad[k]);
    CHECK(gs > 0.0);
    free_grads(&g);
}

/* The backward adds into grad what it computes from zero (one float add each), the same
 * whatever grad held; dh NULL is dh of zeros; input gradients are overwritten. */
TEST(lstm_backward_adds_into_grad) {
    Small s;
    small_case(&s);
    int in = 3, H = 4, T = 5, B = 2;
    size_t np = nevo_lstm_params(in, H);
    Grads g = run_small(&s, s.dh, s.dhT, s.dcT);
    float *tape = poisoned(nevo_lstm_tape_floats(in, H, T, B));
    float *scratch = poisoned(nevo_lstm_backward_scratch_floats(in, H, T, B));
    nevo_lstm_forward(s.p, in, H, T, B, s.x, s.reset, s.h0, s.c0, g.h, NULL, NULL, tape);
    float *acc = falloc(np), *want = falloc(np), *dx = poisoned(30);
    NevoRng rng;
    nevo_rng_init(&rng, 3, NEVO_RNG_USER, 0, 0, 0);
    fill_gauss(&rng, acc, np, 1.0);
    for (size_t k = 0; k < np; k++) want[k] = acc[k] + g.grad[k];
    nevo_lstm_backward(s.p, in, H, T, B, tape, s.dh, s.dhT, s.dcT, acc, dx, NULL, NULL, scratch);
    CHECK(same_bits(acc, want, np));
    CHECK(same_bits(dx, g.dx, 30));
    /* dh NULL against zeros, the other outputs skipped */
    float zeros[40] = {0}, *g1 = falloc(np), *g2 = falloc(np);
    memset(g1, 0, sizeof(float) * np), memset(g2, 0, sizeof(float) * np);
    float dh0a[8], dh0b[8];
    nevo_lstm_backward(s.p, in, H, T, B, tape, NULL, s.dhT, NULL, g1, NULL, dh0a, NULL, scratch);
    nevo_lstm_backward(s.p, in, H, T, B, tape, zeros, s.dhT, zeros, g2, NULL, dh0b, NULL, scratch);
    CHECK(same_bits(g1, g2, np));
    CHECK(same_bits(dh0a, dh0b, 8));
    free(tape), free(scratch), free(acc), free(want), free(dx), free(g1), free(g2);
    free_grads(&g);
}

/* --- bits: step against sequence, batch, kernel sets -------------------------------- */

/* A random case with resets (some at step 0) and inputs with exact zeros (+0 and -0,
 * which the kernels skip). */
static void random_inputs(NevoRng *rng, float *x, size_t n, uint8_t *reset, size_t nr) {
    for (size_t i = 0; i < n; i++) {
        double u = nevo_rng_uniform(rng);
        x[i] = u < 0.15 ? 0.0f : u < 0.3 ? -0.0f : (float)nevo_rng_normal(rng);
    }
    for (size_t i = 0; i < nr; i++) reset[i] = nevo_rng_uniform(rng) < 0.2;
}

/* Step by step equals the sequence forward, bit for bit; B = 19 sends a block of 16
 * rows through the lanes layout where the set has one and 3 through rows. */
TEST(lstm_step_equals_forward) {
    enum { IN = 5, H = 12, T = 6, B = 19 };
    NevoRng rng;
    nevo_rng_init(&rng, 21, NEVO_RNG_USER, 0, 0, 0);
    size_t np = nevo_lstm_params(IN, H);
    float *p = falloc(np), *x = falloc(T * B * IN), h0[B * H], c0[B * H];
    uint8_t reset[T * B];
    nevo_lstm_init_rng(IN, H, &rng, p);
    fill_gauss(&rng, p + np - 4 * H, 4 * H, 0.5);
    random_inputs(&rng, x, T * B * IN, reset, T * B);
    fill_gauss(&rng, h0, B * H, 0.5);
    fill_gauss(&rng, c0, B * H, 1.0);
    float *h = poisoned(T * B * H), hT[B * H], cT[B * H];
    float *tape = poisoned(nevo_lstm_tape_floats(IN, H, T, B));
    nevo_lstm_forward(p, IN, H, T, B, x, reset, h0, c0, h, hT, cT, tape);
    float hs[B * H], cs[B * H];
    memcpy(hs, h0, sizeof hs), memcpy(cs, c0, sizeof cs);
    float *scratch = poisoned(nevo_lstm_step_scratch_floats(IN, H, B));
    for (int t = 0; t < T; t++) {
        nevo_lstm_step(p, 0, NULL, IN, H, B, x + t * B * IN, reset + t * B, hs, cs, scratch);
        CHECK_MSG(same_bits(hs, h + t * B * H, B * H), "step %d differs from the sequence forward", t);
    }
    CHECK(same_bits(hs, hT, B * H) && same_bits(cs, cT, B * H));

    /* rows of three networks, in runs, against each row's network on that row alone */
    enum { P = 3 };
    size_t stride = np + 5;
    float *ps = poisoned(stride * P);
    for (int q = 0; q < P; q++) nevo_lstm_init_rng(IN, H, &rng, ps + q * stride);
    int net[B];
    for (int b = 0; b < B; b++) net[b] = b < 17 ? 1 : (b * 7) % P; /* a run of 17, then single rows */
    memcpy(hs, h0, sizeof hs), memcpy(cs, c0, sizeof cs);
    for (int t = 0; t < 2; t++) nevo_lstm_step(ps, stride, net, IN, H, B, x + t * B * IN, reset + t * B, hs, cs, scratch);
    for (int b = 0; b < B; b++) {
        float h1[2 * H], c1[H], xb[2 * IN];
        uint8_t rb[2] = {reset[b], reset[B + b]};
        memcpy(xb, x + b * IN, sizeof(float) * IN), memcpy(xb + IN, x + (B + b) * IN, sizeof(float) * IN);
        nevo_lstm_forward(ps + net[b] * stride, IN, H, 2, 1, xb, rb, h0 + b * H, c0 + b * H, h1, NULL, c1, tape);
        CHECK_MSG(same_bits(h1 + H, hs + b * H, H) && same_bits(c1, cs + b * H, H), "row %d (network %d)", b,
                  net[b]);
    }
    free(p), free(x), free(h), free(tape), free(scratch), free(ps);
}

/* Every kernel set gives the same bits: the forward, the step and the backward run in a
 * child process per set (NEVO_KERNELS), which writes its results to shared memory. The
 * shapes give the product kernels blocks of NEVO_LANES rows and leftover rows (B = 18,
 * in + H + 1 = 20 or 89), and weights over the lanes kernels' 32 KB chunks (88 x 192
 * gates, and the weight gradient's 54 rows x 192). */

/* The results of a run, one after another: h, hT, cT, the step's h and c, dtheta, dx,
 * dh0, dc0 (their names, for a message). */
#define KS_PARTS 9
static const char *const ks_part[KS_PARTS] = {"h", "hT", "cT", "step h", "step c", "dtheta", "dx", "dh0", "dc0"};

static void ks_sizes(int in, int H, int T, int B, size_t n[KS_PARTS]) {
    size_t BH = (size_t)B * H;
    size_t v[KS_PARTS] = {(size_t)T * BH, BH, BH, BH, BH, nevo_lstm_params(in, H), (size_t)T * B * in, BH, BH};
    memcpy(n, v, sizeof v);
}

static size_t ks_total(int in, int H, int T, int B) {
    size_t n[KS_PARTS], t = 0;
    ks_sizes(in, H, T, B, n);
    for (int i = 0; i < KS_PARTS; i++) t += n[i];
    return t;
}

static void kernel_set_run(int in, int H, int T, int B, float *out) {
    size_t n[KS_PARTS], BH = (size_t)B * H, np = nevo_lstm_params(in, H);
    ks_sizes(in, H, T, B, n);
    float *o[KS_PARTS];
    o[0] = out;
    for (int i = 1; i < KS_PARTS; i++) o[i] = o[i - 1] + n[i - 1];
    NevoRng rng;
    nevo_rng_init(&rng, 5, NEVO_RNG_USER, 0, 0, 0);
    float *p = falloc(np), *x = falloc((size_t)T * B * in), *dh = falloc((size_t)T * BH);
    float *h0 = falloc(BH), *c0 = falloc(BH), *dhT = falloc(BH), *dcT = falloc(BH);
    uint8_t *reset = malloc((size_t)T * B);
    nevo_lstm_init_rng(in, H, &rng, p);
    fill_gauss(&rng, p + np - 4 * H, 4 * (size_t)H, 0.5);
    random_inputs(&rng, x, (size_t)T * B * in, reset, (size_t)T * B);
    fill_gauss(&rng, h0, BH, 0.5), fill_gauss(&rng, c0, BH, 1.0);
    fill_gauss(&rng, dh, (size_t)T * BH, 1.0), fill_gauss(&rng, dhT, BH, 1.0), fill_gauss(&rng, dcT, BH, 1.0);
    float *tape = poisoned(nevo_lstm_tape_floats(in, H, T, B));
    float *scratch = poisoned(nevo_lstm_backward_scratch_floats(in, H, T, B));
    float *sscratch = poisoned(nevo_lstm_step_scratch_floats(in, H, B));
    nevo_lstm_forward(p, in, H, T, B, x, reset, h0, c0, o[0], o[1], o[2], tape);
    memcpy(o[3], h0, sizeof(float) * BH), memcpy(o[4], c0, sizeof(float) * BH);
    nevo_lstm_step(p, 0, NULL, in, H, B, x, reset, o[3], o[4], sscratch);
    memset(o[5], 0, sizeof(float) * np);
    nevo_lstm_backward(p, in, H, T, B, tape, dh, dhT, dcT, o[5], o[6], o[7], o[8], scratch);
    free(p), free(x), free(dh), free(h0), free(c0), free(dhT), free(dcT), free(reset);
    free(tape), free(scratch), free(sscratch);
}

TEST(lstm_kernel_sets_same_bits) {
    static const char *const names[3] = {"generic", "avx2", "avx512"};
    static const int shapes[2][4] = {{9, 10, 3, 18}, {40, 48, 3, 18}};
    size_t len[2], all = 0;
    for (int c = 0; c < 2; c++) all += len[c] = ks_total(shapes[c][0], shapes[c][1], shapes[c][2], shapes[c][3]);
    /* per set: the results of both shapes, then the name of the set that ran */
    size_t per = all + 4;
    float *out = mmap(NULL, sizeof(float) * per * 3, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(out != MAP_FAILED);
    int ran = 0;
    for (int s = 0; s < 3; s++) {
        if (!nevo_kernels_named(names[s])) continue; /* not on this CPU or build */
        float *mine = out + per * s;
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            setenv("NEVO_KERNELS", names[s], 1); /* read on the first kernel call, next */
            kernel_set_run(shapes[0][0], shapes[0][1], shapes[0][2], shapes[0][3], mine);
            kernel_set_run(shapes[1][0], shapes[1][1], shapes[1][2], shapes[1][3], mine + len[0]);
            snprintf((char *)(mine + all), 16, "%s", nevo_kernels()->name);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the %s run failed", names[s]);
        CHECK_MSG(strcmp((char *)(mine + all), names[s]) == 0, "asked for %s, ran %s", names[s],
                  (char *)(mine + all));
        ran++;
        for (int c = 0, at = 0; c < 2 && s > 0; at += (int)len[c], c++) {
            size_t n[KS_PARTS], off = (size_t)at;
            ks_sizes(shapes[c][0], shapes[c][1], shapes[c][2], shapes[c][3], n);
            for (int i = 0; i < KS_PARTS; off += n[i], i++)
                CHECK_MSG(same_bits(out + off, mine + off, n[i]), "shape %d: %s differs between generic and %s", c,
                          ks_part[i], names[s]);
        }
    }
    printf("  lstm: %d kernel sets agree\n", ran);
    munmap(out, sizeof(float) * per * 3);
}
