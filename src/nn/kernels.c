/* Portable kernels. The dense row is written in axpy form (for each input, add its
 * scaled weight row to all outputs) so the inner loop runs over contiguous outputs and
 * vectorises without reordering any output's sum. fmaf gives one rounding per term on
 * every target, with or without hardware FMA. */
#include "nn/kernels.h"

#include <math.h>
#include <string.h>

NEVO_KERNEL_CLONES
void nevo_kernel_dense_row(const float *W, const float *b, const float *x, int in, int out, float *y) {
    memcpy(y, b, sizeof(float) * (size_t)out);
    for (int k = 0; k < in; k++) {
        float xk = x[k];
        const float *w = W + (size_t)k * out;
        for (int j = 0; j < out; j++) y[j] = fmaf(xk, w[j], y[j]);
    }
}

NEVO_KERNEL_CLONES
void nevo_kernel_conv_row(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
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
                        const float *w = wp + (size_t)c * F;
                        for (int f = 0; f < F; f++) o[f] = fmaf(xv, w[f], o[f]);
                    }
                }
            }
        }
    }
}

void nevo_kernel_activate(NevoActivation act, float *y, int n) {
    if (act == NEVO_ACT_TANH)
        for (int i = 0; i < n; i++) y[i] = tanhf(y[i]);
    else if (act == NEVO_ACT_RELU)
        for (int i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}
