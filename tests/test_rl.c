/* V-trace and R2D2's targets (rl.h) against their definitions computed another way: the
 * closed-form sums of the IMPALA paper (O(T^2), in long double) for V-trace, by hand for
 * small cases, and the n-step returns they reduce to on-policy. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "nevo/rl.h"
#include "nevo/rng.h"

TEST(rl_vtrace_by_hand) {
    /* T = 2, on-policy: v_1 = V_1 + delta_1 = 0.25 + (2 + 0.5 * 1 - 0.25) = 2.5, and
     * v_0 = 1 + 0.5 * 2 + 0.25 * 1 = 2.25 (the n-step return) */
    float log_rhos[2] = {0, 0}, disc[2] = {0.5f, 0.5f}, rew[2] = {1, 2}, val[2] = {0.5f, 0.25f}, boot[1] = {1};
    float vs[2], adv[2];
    nevo_vtrace(log_rhos, disc, rew, val, boot, 2, 1, 1.0f, 1.0f, vs, adv);
    CHECK(vs[0] == 2.25f && vs[1] == 2.5f);
    /* pg advantage: rho (r_s + g v_{s+1} - V_s): 1 + 0.5 * 2.5 - 0.5 = 1.75; 2 + 0.5 * 1 - 0.25 = 2.25 */
    CHECK(adv[0] == 1.75f && adv[1] == 2.25f);
    /* pi/mu = e^1 at step 1, truncated to 1; e^-1 at step 0: rho_0 = c_0 = e^-1, so
     * v_0 = V_0 + rho_0 delta_0 + g c_0 (v_1 - V_1) with delta_0 unscaled = 0.625 */
    log_rhos[0] = -1, log_rhos[1] = 1;
    nevo_vtrace(log_rhos, disc, rew, val, boot, 2, 1, 1.0f, 1.0f, vs, adv);
    double r0 = exp(-1.0);
    CHECK(vs[1] == 2.5f);
    CHECK_NEAR(vs[0], 0.5 + r0 * 0.625 + 0.5 * r0 * 2.25, 1e-6);
}

/* IMPALA's closed form: v_s = V_s + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} g_i c_i) delta_t */
static long double closed_form(const float *lr, const float *g, const float *r, const float *v, float boot, int T,
                               int B, int b, int s, float rho_bar, float c_bar) {
    long double sum = v[(size_t)s * B + b], prod = 1.0L;
    for (int t = s; t < T; t++) {
        size_t i = (size_t)t * B + b;
        long double ratio = expl((long double)lr[i]);
        long double rho = ratio < rho_bar ? ratio : rho_bar, c = ratio < c_bar ? ratio : c_bar;
        long double v_next = t + 1 < T ? (long double)v[i + B] : (long double)boot;
        sum += prod * rho * (r[i] + (long double)g[i] * v_next - v[i]);
        prod *= (long double)g[i] * c;
    }
    return sum;
}

TEST(rl_vtrace_matches_the_closed_form) {
    enum { T = 20, B = 3 };
    float lr[T * B], g[T * B], r[T * B], v[T * B], boot[B], vs[T * B], adv[T * B];
    NevoRng rng;
    nevo_rng_init(&rng, 5, NEVO_RNG_USER, 0, 0, 0);
    for (int i = 0; i < T * B; i++) {
        lr[i] = (float)(0.8 * nevo_rng_normal(&rng)); /* ratios on both sides of the truncations */
        g[i] = nevo_rng_uniform(&rng) < 0.1 ? 0.0f : 0.99f; /* some episodes end inside the unroll */
        r[i] = (float)nevo_rng_normal(&rng);
        v[i] = (float)nevo_rng_normal(&rng);
    }
    for (int b = 0; b < B; b++) boot[b] = (float)nevo_rng_normal(&rng);
    const float bars[3][2] = {{1.0f, 1.0f}, {2.0f, 0.5f}, {1e9f, 1e9f}};
    for (int k = 0; k < 3; k++) {
        nevo_vtrace(lr, g, r, v, boot, T, B, bars[k][0], bars[k][1], vs, adv);
        for (int b = 0; b < B; b++)
            for (int s = 0; s < T; s++) {
                long double want = closed_form(lr, g, r, v, boot[b], T, B, b, s, bars[k][0], bars[k][1]);
                size_t i = (size_t)s * B + b;
                CHECK_MSG(fabsl(vs[i] - want) <= 1e-5L * (1.0L + fabsl(want)), "bars %d (%d, %d): %g, want %Lg", k, s,
                          b, (double)vs[i], want);
                long double ratio = expl((long double)lr[i]), rho = ratio < bars[k][0] ? ratio : bars[k][0];
                long double vn = s + 1 < T ? (long double)vs[i + B] : (long double)boot[b];
                long double a = rho * (r[i] + g[i] * vn - v[i]);
                CHECK_MSG(fabsl(adv[i] - a) <= 1e-5L * (1.0L + fabsl(a)), "adv (%d, %d)", s, b);
            }
    }
    /* each trajectory alone gives the same bits as in the batch */
    for (int b = 0; b < B; b++) {
        float lr1[T], g1[T], r1[T], v1[T], vs1[T];
        for (int t = 0; t < T; t++) lr1[t] = lr[t * B + b], g1[t] = g[t * B + b], r1[t] = r[t * B + b], v1[t] = v[t * B + b];
        nevo_vtrace(lr1, g1, r1, v1, &boot[b], T, 1, 1.0f, 1.0f, vs1, NULL);
        nevo_vtrace(lr, g, r, v, boot, T, B, 1.0f, 1.0f, vs, NULL);
        for (int t = 0; t < T; t++) CHECK(memcmp(&vs1[t], &vs[t * B + b], sizeof(float)) == 0);
    }
}

TEST(rl_r2d2_rescaling) {
    double eps = 1e-3;
    CHECK(nevo_r2d2_h(0.0, eps) == 0.0 && nevo_r2d2_h_inv(0.0, eps) == 0.0);
    CHECK_NEAR(nevo_r2d2_h(3.0, eps), 1.0 + 3e-3, 1e-12);  /* sqrt(4) - 1 + eps 3 */
    CHECK_NEAR(nevo_r2d2_h(-8.0, eps), -2.0 - 8e-3, 1e-12); /* -(sqrt(9) - 1) + eps (-8) */
    for (double x = -1e4; x <= 1e4; x += 77.7) {
        CHECK_NEAR(nevo_r2d2_h_inv(nevo_r2d2_h(x, eps), eps), x, 1e-7 * (1 + fabs(x)));
        CHECK_NEAR(nevo_r2d2_h(nevo_r2d2_h_inv(x / 100, eps), eps), x / 100, 1e-9 * (1 + fabs(x)));
    }
}

/* T = 3, B = 1, A = 2, n = 2. The online network prefers action 1 everywhere, the target
 * network values action 0 higher: double Q takes the target's value of action 1. */
TEST(rl_r2d2_targets_by_hand) {
    double eps = 1e-3;
    float rew[3] = {1, 2, 3}, disc[3] = {0.5f, 0.5f, 0.5f};
    float qo[4 * 2] = {0, 1, 0, 1, 0, 1, 0, 1}, qt[4 * 2] = {10, 4, 10, 6, 10, 8, 10, 12};
    float y[3];
    nevo_r2d2_targets(rew, disc, qo, qt, 3, 1, 2, 2, eps, y);
    /* y_0 = h(1 + 0.5 * 2 + 0.25 h^-1(Q_t(x_2, 1) = 8)); y_1 = h(2 + 0.5 * 3 + 0.25 h^-1(12));
     * y_2 = h(3 + 0.5 h^-1(12)) (one step left before the sequence's end) */
    CHECK_NEAR(y[0], nevo_r2d2_h(2.0 + 0.25 * nevo_r2d2_h_inv(8, eps), eps), 1e-6);
    CHECK_NEAR(y[1], nevo_r2d2_h(3.5 + 0.25 * nevo_r2d2_h_inv(12, eps), eps), 1e-6);
    CHECK_NEAR(y[2], nevo_r2d2_h(3.0 + 0.5 * nevo_r2d2_h_inv(12, eps), eps), 1e-6);
    /* the episode ends at step 0: its target is its reward alone, and step 1's does not
     * reach back into it */
    disc[0] = 0.0f;
    nevo_r2d2_targets(rew, disc, qo, qt, 3, 1, 2, 2, eps, y);
    CHECK_NEAR(y[0], nevo_r2d2_h(1.0, eps), 1e-7);
    CHECK_NEAR(y[1], nevo_r2d2_h(3.5 + 0.25 * nevo_r2d2_h_inv(12, eps), eps), 1e-6);
}

TEST(rl_apex_epsilons) {
    CHECK_NEAR(nevo_apex_epsilon(0, 8, 0.4, 7), 0.4, 1e-15);
    CHECK_NEAR(nevo_apex_epsilon(7, 8, 0.4, 7), pow(0.4, 8), 1e-15);
    CHECK_NEAR(nevo_apex_epsilon(0, 1, 0.4, 7), 0.4, 1e-15);
    for (int i = 1; i < 8; i++) CHECK(nevo_apex_epsilon(i, 8, 0.4, 7) < nevo_apex_epsilon(i - 1, 8, 0.4, 7));
}

typedef struct Loss {
    float *z, *v;
    const int *act;
    const float *vs, *adv;
    int n, A;
} Loss;

/* dL/dx for x one of the loss's inputs: (L(x + h) - L(x - h)) over the step the floats took */
static double central_difference(const Loss *L, float *x) {
    const float h = 1e-2f, keep = *x;
    double f[2];
    for (int k = 0; k < 2; k++) {
        *x = k ? keep - h : keep + h;
        f[k] = nevo_impala_loss(L->z, L->v, L->act, L->vs, L->adv, L->n, L->A, 0.5f, 0.01f, NULL, NULL);
    }
    *x = keep;
    return (f[0] - f[1]) / ((double)(keep + h) - (double)(keep - h));
}

/* The IMPALA loss's gradient against central differences of the loss itself (each input
 * moved by +-h, the loss in double), and its value against a hand-computed row. */
TEST(rl_impala_loss_gradient) {
    /* one row, A = 2, logits 0 and 0: pi = (1/2, 1/2), H = ln 2; action 1, adv 2, vs 3, V 1:
     * L = -2 ln(1/2) + 0.5 * 0.5 * 4 - 0.01 ln 2 */
    float z1[2] = {0, 0}, v1 = 1, vs1 = 3, adv1 = 2;
    int a1 = 1;
    double L = nevo_impala_loss(z1, &v1, &a1, &vs1, &adv1, 1, 2, 0.5f, 0.01f, NULL, NULL);
    CHECK_NEAR(L, 2 * log(2.0) + 1.0 - (double)0.01f * log(2.0), 1e-12); /* the cost as the float given */
    enum { N = 5, A = 4 };
    float z[N * A], v[N], vs[N], adv[N], dz[N * A], dv[N];
    int act[N];
    NevoRng rng;
    nevo_rng_init(&rng, 9, NEVO_RNG_USER, 0, 0, 0);
    for (int i = 0; i < N * A; i++) z[i] = (float)(2 * nevo_rng_normal(&rng));
    for (int i = 0; i < N; i++) {
        v[i] = (float)nevo_rng_normal(&rng), vs[i] = (float)nevo_rng_normal(&rng);
        adv[i] = (float)nevo_rng_normal(&rng), act[i] = (int)nevo_rng_below(&rng, A);
    }
    nevo_impala_loss(z, v, act, vs, adv, N, A, 0.5f, 0.01f, dz, dv);
    Loss L5 = {z, v, act, vs, adv, N, A};
    for (int i = 0; i < N * A; i++) {
        double fd = central_difference(&L5, &z[i]);
        CHECK_MSG(fabs(fd - dz[i]) <= 1e-3 * (1 + fabs(fd)), "dlogits[%d]: %g, differences %g", i, (double)dz[i], fd);
    }
    for (int i = 0; i < N; i++) {
        double fd = central_difference(&L5, &v[i]);
        CHECK_MSG(fabs(fd - dv[i]) <= 1e-3 * (1 + fabs(fd)), "dvalues[%d]: %g, differences %g", i, (double)dv[i], fd);
    }
}
