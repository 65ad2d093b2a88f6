/* Portable kernels, nevo's tanh, and the run-time choice of implementation. These are
 * the reference the SIMD kernels reproduce bit for bit (kernels.h): the dense kernel
 * is written in axpy form (for each nonzero input, add its scaled weight row to all
 * outputs) so each output's sum runs in ascending input order, and the convolution
 * sums each output's window in (ky, kx, c) order; fma gives one rounding per term on
 * every target, with or without hardware FMA. Zero inputs are skipped (kernels.h). */
#include "nn/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

NEVO_KERNEL_CLONES
static void dense_generic(const float *W, const float *b, const float *X, size_t xs, int rows, int in,
                          int out, float *Y, size_t ys) {
    for (int r = 0; r < rows; r++) {
        const float *x = X + (size_t)r * xs;
        float *y = Y + (size_t)r * ys;
        memcpy(y, b, sizeof(float) * (size_t)out);
        for (int k = 0; k < in; k++) {
            float xk = x[k];
            if (xk == 0.0f) continue; /* +0 and -0: the term is skipped */
            const float *w = W + (size_t)k * out;
            for (int j = 0; j < out; j++) y[j] = fmaf(xk, w[j], y[j]);
        }
    }
}

NEVO_KERNEL_CLONES
static void conv_generic(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    for (int oy = 0; oy < L->out_h; oy++) {
        for (int ox = 0; ox < L->out_w; ox++) {
            float *o = y + ((size_t)oy * L->out_w + ox) * F;
            memcpy(o, b, sizeof(float) * (size_t)F);
            for (int ky = 0; ky < K; ky++) {
                for (int kx = 0; kx < K; kx++) {
                    const float *xp = x + ((size_t)(oy * S + ky) * L->in_w + (ox * S + kx)) * C;
                    const float *wp = W + ((size_t)(ky * K + kx) * C) * F;
                    for (int c = 0; c < C; c++) {
                        float xv = xp[c];
                        if (xv == 0.0f) continue;
                        const float *w = wp + (size_t)c * F;
                        for (int f = 0; f < F; f++) o[f] = fmaf(xv, w[f], o[f]);
                    }
                }
            }
        }
    }
}

/* exp(y) for 0 <= y <= 18 in double: y = n ln2 + r, |r| <= ln2/2, exp(r) by its
 * Taylor polynomial to degree 11 (relative error < 1e-16 there), times 2^n. The
 * constants and the operation order are mirrored exactly by the SIMD versions. */
#define TANH_CLAMP 9.0f
#define INV_LN2 1.4426950408889634
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define SHIFTER 6755399441055744.0 /* 1.5 * 2^52: adding it rounds to an integer */

static const double exp_poly[12] = {
    1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
    1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
};

NEVO_KERNEL_CLONES
float nevo_tanhf(float x) {
    float ax = fabsf(x);
    if (!(ax < TANH_CLAMP)) return isnan(x) ? x : copysignf(1.0f, x);
    double y = 2.0 * (double)ax;
    double t = y * INV_LN2 + SHIFTER;
    double n = t - SHIFTER;
    double r = (y - n * LN2_HI) - n * LN2_LO;
    double p = exp_poly[11];
    for (int i = 10; i >= 0; i--) p = fma(p, r, exp_poly[i]);
    int64_t bits = ((int64_t)n + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    double e = p * scale;
    float th = (float)((e - 1.0) / (e + 1.0));
    return copysignf(th, x);
}

static void tanh_generic(float *y, int n) {
    for (int i = 0; i < n; i++) y[i] = nevo_tanhf(y[i]);
}

static const NevoKernels generic = {"generic", dense_generic, conv_generic, tanh_generic};

const NevoKernels *nevo_kernels_named(const char *name) {
    if (strcmp(name, "generic") == 0) return &generic;
    if (strcmp(name, "avx2") == 0) return nevo_kernels_avx2();
    if (strcmp(name, "avx512") == 0) return nevo_kernels_avx512();
    return NULL;
}

static const NevoKernels *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    const char *force = getenv("NEVO_KERNELS");
    if (force && *force) {
        chosen = nevo_kernels_named(force);
        if (!chosen) nevo_fatal(__FILE__, __LINE__, "NEVO_KERNELS=%s: not available on this CPU/build "
                                "(use generic, avx2 or avx512)", force);
        return;
    }
    chosen = nevo_kernels_avx512();
    if (!chosen) chosen = nevo_kernels_avx2();
    if (!chosen) chosen = &generic;
}

const NevoKernels *nevo_kernels(void) {
    pthread_once(&chosen_once, choose);
    return chosen;
}

NEVO_KERNEL_CLONES
static void relu(float *y, int n) {
    for (int i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i]; /* NaN stays NaN */
}

void nevo_kernel_activate(NevoActivation act, float *y, int n) {
    if (act == NEVO_ACT_TANH)
        nevo_kernels()->tanh(y, n);
    else if (act == NEVO_ACT_RELU)
        relu(y, n);
}
