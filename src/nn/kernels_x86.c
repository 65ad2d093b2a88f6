/* AVX2 and AVX-512 kernels. Each computes exactly what the portable kernels in
 * kernels.c compute (same operations, same order per output), only several outputs and
 * rows at a time: vectors run across outputs (filters), register blocks across rows
 * (conv positions), so weights are loaded once per block instead of once per row. The
 * binary is built for baseline x86-64; these functions carry their own target
 * attributes and are only called after __builtin_cpu_supports says the CPU has them. */
#include "nn/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TANH_CLAMP 9.0f
#define INV_LN2 1.4426950408889634
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define SHIFTER 6755399441055744.0

static const double exp_poly[12] = {
    1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
    1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
};

/* ---------------------------------------------------------------- AVX-512 */

#define T512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
#define INLINE512 static inline __attribute__((always_inline, target("avx512f,avx512dq,avx512vl,avx2,fma")))

T512 static __mmask16 mask16(int remaining) {
    return remaining >= 16 ? (__mmask16)0xFFFF : remaining <= 0 ? (__mmask16)0 : (__mmask16)((1u << remaining) - 1);
}

/* RB rows x VB vectors of 16 outputs, accumulators in registers. */
INLINE512 void dense512_block(const float *W, const float *b, const float *X, size_t xs, int RB, int VB, int in,
                              int out, float *Y, size_t ys) {
    for (int j0 = 0; j0 < out; j0 += 16 * VB) {
        __mmask16 m[8];
        __m512 acc[4][8];
        for (int v = 0; v < VB; v++) {
            m[v] = mask16(out - j0 - 16 * v);
            __m512 bv = _mm512_maskz_loadu_ps(m[v], b + j0 + 16 * v);
            for (int r = 0; r < RB; r++) acc[r][v] = bv;
        }
        for (int k = 0; k < in; k++) {
            const float *w = W + (size_t)k * out + j0;
            __m512 xr[4];
            for (int r = 0; r < RB; r++) xr[r] = _mm512_set1_ps(X[(size_t)r * xs + k]);
            for (int v = 0; v < VB; v++) {
                __m512 wv = _mm512_maskz_loadu_ps(m[v], w + 16 * v);
                for (int r = 0; r < RB; r++) acc[r][v] = _mm512_fmadd_ps(xr[r], wv, acc[r][v]);
            }
        }
        for (int r = 0; r < RB; r++)
            for (int v = 0; v < VB; v++) _mm512_mask_storeu_ps(Y + (size_t)r * ys + j0 + 16 * v, m[v], acc[r][v]);
    }
}

T512 static void dense512(const float *W, const float *b, const float *X, size_t xs, int rows, int in, int out,
                          float *Y, size_t ys) {
    int r = 0;
    /* 4 rows x 4 vectors = 16 independent FMA chains; a lone row gets 8 vectors */
    for (; r + 4 <= rows; r += 4)
        dense512_block(W, b, X + (size_t)r * xs, xs, 4, 4, in, out, Y + (size_t)r * ys, ys);
    for (; r + 2 <= rows; r += 2)
        dense512_block(W, b, X + (size_t)r * xs, xs, 2, 4, in, out, Y + (size_t)r * ys, ys);
    for (; r < rows; r++) dense512_block(W, b, X + (size_t)r * xs, xs, 1, 8, in, out, Y + (size_t)r * ys, ys);
}

/* PB output positions along a row, one vector of 16 filters. */
INLINE512 void conv512_block(const NevoLayer *L, const float *W, const float *b, const float *x, float *y, int oy,
                             int ox0, int PB, int f0) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    __mmask16 m = mask16(F - f0);
    __m512 acc[8];
    __m512 bv = _mm512_maskz_loadu_ps(m, b + f0);
    for (int p = 0; p < PB; p++) acc[p] = bv;
    for (int ky = 0; ky < K; ky++) {
        for (int kx = 0; kx < K; kx++) {
            const float *xrow = x + ((size_t)(oy * S + ky) * L->in_w + (size_t)(ox0 * S + kx)) * C;
            const float *wp = W + ((size_t)(ky * K + kx) * C) * F + f0;
            for (int c = 0; c < C; c++) {
                __m512 wv = _mm512_maskz_loadu_ps(m, wp + (size_t)c * F);
                for (int p = 0; p < PB; p++)
                    acc[p] = _mm512_fmadd_ps(_mm512_set1_ps(xrow[(size_t)p * S * C + c]), wv, acc[p]);
            }
        }
    }
    for (int p = 0; p < PB; p++) _mm512_mask_storeu_ps(y + ((size_t)oy * L->out_w + ox0 + p) * F + f0, m, acc[p]);
}

T512 static void conv512(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    for (int oy = 0; oy < L->out_h; oy++) {
        for (int f0 = 0; f0 < L->out_c; f0 += 16) {
            int ox = 0;
            for (; ox + 8 <= L->out_w; ox += 8) conv512_block(L, W, b, x, y, oy, ox, 8, f0);
            for (; ox + 4 <= L->out_w; ox += 4) conv512_block(L, W, b, x, y, oy, ox, 4, f0);
            for (; ox < L->out_w; ox++) conv512_block(L, W, b, x, y, oy, ox, 1, f0);
        }
    }
}

/* nevo_tanhf on 8 floats, operation for operation. */
T512 static __m256 tanh512_8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x);
    __m512d y = _mm512_mul_pd(_mm512_set1_pd(2.0), _mm512_cvtps_pd(ax));
    __m512d t = _mm512_add_pd(_mm512_mul_pd(y, _mm512_set1_pd(INV_LN2)), _mm512_set1_pd(SHIFTER));
    __m512d n = _mm512_sub_pd(t, _mm512_set1_pd(SHIFTER));
    __m512d r = _mm512_sub_pd(_mm512_sub_pd(y, _mm512_mul_pd(n, _mm512_set1_pd(LN2_HI))),
                              _mm512_mul_pd(n, _mm512_set1_pd(LN2_LO)));
    __m512d p = _mm512_set1_pd(exp_poly[11]);
    for (int i = 10; i >= 0; i--) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(exp_poly[i]));
    __m512i bits = _mm512_sub_epi64(_mm512_castpd_si512(t), _mm512_castpd_si512(_mm512_set1_pd(SHIFTER)));
    bits = _mm512_slli_epi64(_mm512_add_epi64(bits, _mm512_set1_epi64(1023)), 52);
    __m512d e = _mm512_mul_pd(p, _mm512_castsi512_pd(bits));
    __m512d one = _mm512_set1_pd(1.0);
    __m256 th = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_sub_pd(e, one), _mm512_add_pd(e, one)));
    th = _mm256_or_ps(th, _mm256_and_ps(sign, x));
    /* |x| >= 9 gives +-1, NaN stays NaN (as the scalar code) */
    __m256 big = _mm256_cmp_ps(ax, _mm256_set1_ps(TANH_CLAMP), _CMP_NLT_UQ);
    __m256 unit = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(sign, x));
    __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    unit = _mm256_blendv_ps(unit, x, isnan);
    return _mm256_blendv_ps(th, unit, big);
}

T512 static void tanh512(float *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tanh512_8(_mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = nevo_tanhf(y[i]);
}

static const NevoKernels k512 = {"avx512", dense512, conv512, tanh512};

const NevoKernels *nevo_kernels_avx512(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
        return &k512;
    return NULL;
}

/* ---------------------------------------------------------------- AVX2 */

#define T256 __attribute__((target("avx2,fma")))
#define INLINE256 static inline __attribute__((always_inline, target("avx2,fma")))

T256 static __m256i mask8(int remaining) {
    int32_t m[8];
    for (int i = 0; i < 8; i++) m[i] = i < remaining ? -1 : 0;
    return _mm256_loadu_si256((const __m256i *)m);
}

INLINE256 void dense256_block(const float *W, const float *b, const float *X, size_t xs, int RB, int VB, int in,
                              int out, float *Y, size_t ys) {
    for (int j0 = 0; j0 < out; j0 += 8 * VB) {
        __m256i m[4];
        __m256 acc[3][4];
        for (int v = 0; v < VB; v++) {
            m[v] = mask8(out - j0 - 8 * v);
            __m256 bv = _mm256_maskload_ps(b + j0 + 8 * v, m[v]);
            for (int r = 0; r < RB; r++) acc[r][v] = bv;
        }
        for (int k = 0; k < in; k++) {
            const float *w = W + (size_t)k * out + j0;
            __m256 xr[3];
            for (int r = 0; r < RB; r++) xr[r] = _mm256_set1_ps(X[(size_t)r * xs + k]);
            for (int v = 0; v < VB; v++) {
                __m256 wv = _mm256_maskload_ps(w + 8 * v, m[v]);
                for (int r = 0; r < RB; r++) acc[r][v] = _mm256_fmadd_ps(xr[r], wv, acc[r][v]);
            }
        }
        for (int r = 0; r < RB; r++)
            for (int v = 0; v < VB; v++) _mm256_maskstore_ps(Y + (size_t)r * ys + j0 + 8 * v, m[v], acc[r][v]);
    }
}

T256 static void dense256(const float *W, const float *b, const float *X, size_t xs, int rows, int in, int out,
                          float *Y, size_t ys) {
    int r = 0;
    for (; r + 3 <= rows; r += 3)
        dense256_block(W, b, X + (size_t)r * xs, xs, 3, 4, in, out, Y + (size_t)r * ys, ys);
    for (; r < rows; r++) dense256_block(W, b, X + (size_t)r * xs, xs, 1, 4, in, out, Y + (size_t)r * ys, ys);
}

INLINE256 void conv256_block(const NevoLayer *L, const float *W, const float *b, const float *x, float *y, int oy,
                             int ox0, int PB, int f0) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    __m256i m = mask8(F - f0);
    __m256 acc[8];
    __m256 bv = _mm256_maskload_ps(b + f0, m);
    for (int p = 0; p < PB; p++) acc[p] = bv;
    for (int ky = 0; ky < K; ky++) {
        for (int kx = 0; kx < K; kx++) {
            const float *xrow = x + ((size_t)(oy * S + ky) * L->in_w + (size_t)(ox0 * S + kx)) * C;
            const float *wp = W + ((size_t)(ky * K + kx) * C) * F + f0;
            for (int c = 0; c < C; c++) {
                __m256 wv = _mm256_maskload_ps(wp + (size_t)c * F, m);
                for (int p = 0; p < PB; p++)
                    acc[p] = _mm256_fmadd_ps(_mm256_set1_ps(xrow[(size_t)p * S * C + c]), wv, acc[p]);
            }
        }
    }
    for (int p = 0; p < PB; p++) _mm256_maskstore_ps(y + ((size_t)oy * L->out_w + ox0 + p) * F + f0, m, acc[p]);
}

T256 static void conv256(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    for (int oy = 0; oy < L->out_h; oy++) {
        for (int f0 = 0; f0 < L->out_c; f0 += 8) {
            int ox = 0;
            for (; ox + 8 <= L->out_w; ox += 8) conv256_block(L, W, b, x, y, oy, ox, 8, f0);
            for (; ox < L->out_w; ox++) conv256_block(L, W, b, x, y, oy, ox, 1, f0);
        }
    }
}

T256 static __m128 tanh256_4(__m128 x) {
    const __m128 sign = _mm_set1_ps(-0.0f);
    __m128 ax = _mm_andnot_ps(sign, x);
    __m256d y = _mm256_mul_pd(_mm256_set1_pd(2.0), _mm256_cvtps_pd(ax));
    __m256d t = _mm256_add_pd(_mm256_mul_pd(y, _mm256_set1_pd(INV_LN2)), _mm256_set1_pd(SHIFTER));
    __m256d n = _mm256_sub_pd(t, _mm256_set1_pd(SHIFTER));
    __m256d r = _mm256_sub_pd(_mm256_sub_pd(y, _mm256_mul_pd(n, _mm256_set1_pd(LN2_HI))),
                              _mm256_mul_pd(n, _mm256_set1_pd(LN2_LO)));
    __m256d p = _mm256_set1_pd(exp_poly[11]);
    for (int i = 10; i >= 0; i--) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(exp_poly[i]));
    __m256i bits = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_castpd_si256(_mm256_set1_pd(SHIFTER)));
    bits = _mm256_slli_epi64(_mm256_add_epi64(bits, _mm256_set1_epi64x(1023)), 52);
    __m256d e = _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
    __m256d one = _mm256_set1_pd(1.0);
    __m128 th = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_sub_pd(e, one), _mm256_add_pd(e, one)));
    th = _mm_or_ps(th, _mm_and_ps(sign, x));
    __m128 big = _mm_cmp_ps(ax, _mm_set1_ps(TANH_CLAMP), _CMP_NLT_UQ);
    __m128 unit = _mm_or_ps(_mm_set1_ps(1.0f), _mm_and_ps(sign, x));
    unit = _mm_blendv_ps(unit, x, _mm_cmp_ps(x, x, _CMP_UNORD_Q));
    return _mm_blendv_ps(th, unit, big);
}

T256 static void tanh256(float *y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, tanh256_4(_mm_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = nevo_tanhf(y[i]);
}

static const NevoKernels k256 = {"avx2", dense256, conv256, tanh256};

const NevoKernels *nevo_kernels_avx2(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &k256;
    return NULL;
}

#else

const NevoKernels *nevo_kernels_avx512(void) { return NULL; }
const NevoKernels *nevo_kernels_avx2(void) { return NULL; }

#endif
