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
#include <unistd.h>

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

NEVO_KERNEL_CLONES
float nevo_tanhf(float x) { return nevo_tanh_body(x); }

static void tanh_generic(float *y, int n) {
    for (int i = 0; i < n; i++) y[i] = nevo_tanhf(y[i]);
}

/* One relu for every set, vectorised for each clone (GCC 12 at -O2 vectorises it only
 * when asked): a set's own gained less than 10% (docs/BENCHMARKS.md). */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void relu_portable(float *y, int n) {
    for (int i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i]; /* NaN stays NaN */
}

void nevo_perturb_portable(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t k0,
                           size_t k1) {
    for (size_t k = k0; k < k1; k++) {
        float d = sigma * eps[k];
        if (plus) plus[k] = theta[k] + d;
        if (minus) minus[k] = theta[k] - d;
    }
}

static void perturb_generic(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                            int stream) {
    (void)stream;
    nevo_perturb_portable(plus, minus, theta, sigma, eps, 0, n);
}

void nevo_weighted_sum_portable(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1) {
    for (int i = 0; i < m; i++) {
        const float *r = rows[i];
        double wi = w[i];
        for (size_t k = k0; k < k1; k++) g[k] += wi * (double)r[k];
    }
}

static const NevoKernels generic = {
    .name = "generic",
    .dense = dense_generic,
    .conv = conv_generic,
    .tanh = tanh_generic,
    .perturb = perturb_generic,
    .weighted_sum = nevo_weighted_sum_portable,
};

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

static size_t l2_bytes;
static pthread_once_t l2_once = PTHREAD_ONCE_INIT;

static void read_l2(void) {
    long l2 = 0;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    l2_bytes = l2 > 0 ? (size_t)l2 : (size_t)1 << 20;
}

size_t nevo_cache_l2_bytes(void) {
    pthread_once(&l2_once, read_l2);
    return l2_bytes;
}

/* The streamed kernels suit weights from memory, the plain ones weights from L3, so the
 * line is a core's share of L3, which on the AVX2 CPUs (the ones with streamed kernels)
 * is about 8 L2s: 4 MB against 512 KB on AMD's Zen 2 and 3, 1.5-2 MB against 256 KB on
 * Intel's. The system's L3 figure does not do: a virtual machine reports the host's,
 * which other tenants share. docs/BENCHMARKS.md has the figures. */
#define STREAMED_L2S 8

size_t nevo_cache_streamed_bytes(void) { return STREAMED_L2S * nevo_cache_l2_bytes(); }

void nevo_kernel_activate(NevoActivation act, float *y, int n) {
    if (act == NEVO_ACT_TANH)
        nevo_kernels()->tanh(y, n);
    else if (act == NEVO_ACT_RELU)
        relu_portable(y, n);
}
