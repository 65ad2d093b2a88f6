/* Where the AVX2 convolution's sparse (input-stationary) and dense (output-stationary)
 * paths break even, by the share of nonzero inputs: the measurement behind
 * CONV_SPARSE_COST (src/nn/kernels_x86.h), whose rule switches at 1 / CONV_SPARSE_COST.
 * It includes src/nn/kernels_avx2.c to call both paths of conv256 directly; the inputs
 * are random binary planes (MinAtar's kind) and random normal values after a ReLU, the
 * paths take turns, and each number is the fastest call of a round. Build and run:
 * dev/kernels/README.md. */
#include "../../src/nn/kernels_avx2.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nevo/rng.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* conv256's sparse path as it picks it (3x3 at stride 1: the padded output) */
T256 static void sparse_path(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int vb = (L->out_c + 7) / 8;
    if (L->kernel == 3 && L->stride == 1 && vb <= 4 && (L->out_h + 4) * (L->out_w + 4) * 8 * vb <= CONV3_PAD_FLOATS) {
        switch (vb) {
        case 1: conv256_sparse3_padded(L, W, b, x, y, 1); break;
        case 2: conv256_sparse3_padded(L, W, b, x, y, 2); break;
        case 3: conv256_sparse3_padded(L, W, b, x, y, 3); break;
        default: conv256_sparse3_padded(L, W, b, x, y, 4); break;
        }
    } else {
        conv256_sparse(L, W, b, x, y);
    }
}

/* the fastest of `calls` calls of path on x, in ns */
static double fastest_ns(int sparse, const NevoLayer *L, const float *W, const float *b, const float *x, float *y,
                         int calls) {
    double best = 1e30;
    for (int i = 0; i < calls; i++) {
        double t0 = now_s();
        if (sparse)
            sparse_path(L, W, b, x, y);
        else
            conv256_dense(L, W, b, x, y);
        double dt = now_s() - t0;
        if (dt < best) best = dt;
    }
    return best * 1e9;
}

int main(int argc, char **argv) {
    if (!nevo_kernels_avx2()) {
        fprintf(stderr, "this CPU has no AVX2\n");
        return 1;
    }
    /* shapes: H W C K S F */
    static const int shapes[][6] = {
        {10, 10, 4, 3, 1, 16},  /* the MinAtar net, Breakout's 4 channels */
        {10, 10, 10, 3, 1, 16}, /* Seaquest's 10 */
        {8, 8, 16, 3, 1, 32},   /* a second conv layer after it */
        {20, 20, 4, 4, 2, 16},  /* a strided one (the general sparse path) */
    };
    static const double shares[] = {0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.6, 1.0};
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    NevoRng rng;
    nevo_rng_init(&rng, 1, NEVO_RNG_USER, 0, 0, 0);
    printf("shape (HxWxC kK sS fF), inputs: share nonzero -> sparse / dense time, fastest calls over %d rounds\n",
           rounds);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        NevoLayer L = {0};
        L.kind = NEVO_LAYER_CONV;
        L.in_h = shapes[s][0], L.in_w = shapes[s][1], L.in_c = shapes[s][2];
        L.kernel = shapes[s][3], L.stride = shapes[s][4], L.out_c = shapes[s][5];
        L.out_h = (L.in_h - L.kernel) / L.stride + 1, L.out_w = (L.in_w - L.kernel) / L.stride + 1;
        L.in_dim = L.in_h * L.in_w * L.in_c, L.out_dim = L.out_h * L.out_w * L.out_c;
        size_t nw = (size_t)L.kernel * L.kernel * L.in_c * L.out_c;
        float *W = malloc(sizeof(float) * nw), *b = malloc(sizeof(float) * (size_t)L.out_c);
        float *x = malloc(sizeof(float) * (size_t)L.in_dim), *y = malloc(sizeof(float) * (size_t)L.out_dim);
        nevo_rng_fill_normal(&rng, W, nw);
        nevo_rng_fill_normal(&rng, b, (size_t)L.out_c);
        for (int binary = 1; binary >= 0; binary--) {
            printf("%dx%dx%d k%d s%d f%d, %s:", L.in_h, L.in_w, L.in_c, L.kernel, L.stride, L.out_c,
                   binary ? "binary" : "normal");
            for (size_t q = 0; q < sizeof shares / sizeof shares[0]; q++) {
                for (int i = 0; i < L.in_dim; i++)
                    x[i] = nevo_rng_uniform(&rng) < shares[q] ? (binary ? 1.0f : (float)nevo_rng_normal(&rng)) : 0.0f;
                double ts = 1e30, td = 1e30;
                for (int r = 0; r < rounds; r++) {
                    double a = fastest_ns(1, &L, W, b, x, y, 200), d = fastest_ns(0, &L, W, b, x, y, 200);
                    ts = a < ts ? a : ts, td = d < td ? d : td;
                }
                printf("  %.2f %.0f/%.0f%s", shares[q], ts, td, ts < td ? "" : "*");
            }
            printf("   (* dense faster)\n");
        }
        free(W), free(b), free(x), free(y);
    }
    return 0;
}
