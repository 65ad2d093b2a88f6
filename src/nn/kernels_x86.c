/* AVX2 and AVX-512 kernels. Each computes exactly what the portable kernels in
 * kernels.c compute — the same terms (zero inputs skipped), the same operations, the
 * same order per output — only many outputs at a time, vectors across outputs:
 *
 * - dense, one row: the indices of the row's nonzero inputs are listed first (a
 *   compress per 16 inputs), then the weight rows of just those inputs are streamed
 *   through up to 16 accumulator vectors (256 outputs) held in registers (AVX2: 8
 *   vectors, a pass per 64 outputs; in dense_streamed, the listed rows a few ahead
 *   prefetched, and for a call's first row in a layer wider than that with 3/4 or
 *   more of a chunk's inputs nonzero, one pass with the sums in L1);
 * - dense, several rows sharing a network: register blocks of up to 4 rows x 4 vectors
 *   over the inputs where any row of the block is nonzero; a row whose input is zero
 *   leaves its accumulators unchanged (masked fused multiply-add), exactly as if the
 *   term were skipped, so a row gives the same bits alone or in any block;
 * - dense, one row each of up to 4 networks (dense_nets): the same blocks, each row
 *   reading its own network's weights (AVX2: blends instead of masked FMAs);
 * - dense, 16 rows of one network in the lanes layout (dense_lanes): one row per lane
 *   (AVX2: two vectors of 8 lanes), each term an FMA with the weight broadcast; AVX2,
 *   without masked FMAs, runs zero inputs through plain FMAs and checks the results
 *   (the AVX2 lanes section says why that gives the same bits);
 * - convolution of a sparse image (binary planes), input-stationary: each output
 *   starts at its bias, then every nonzero input, in ascending input order, adds its
 *   terms to the outputs whose windows hold it. An output's window terms, in (ky, kx,
 *   c) order, are in ascending input order, so each output still sums its bias, then
 *   its terms in that order;
 * - convolution of a dense image, output-stationary: register blocks of up to 8
 *   positions x 2 vectors of filters, zero inputs masked off as in the dense blocks.
 *
 * Every loop over vectors has a constant trip count once inlined and is unrolled
 * (#pragma GCC unroll), so the accumulators live in registers, not on the stack.
 *
 * The binary is built for baseline x86-64; these functions carry their own target
 * attributes and are only called after __builtin_cpu_supports says the CPU has them. */
#include "nn/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Inputs are listed in chunks of at most CHUNK (a stack buffer), in ascending order;
 * an output's partial sums carry over from one chunk to the next in Y. */
#define CHUNK 1024

static int min_int(int a, int b) { return a < b ? a : b; }

/* M(1) ... M(16): the cases of a switch that gives a register block each width from 1
 * to 16 as a constant, so its accumulators stay in registers */
#define CASES_1_TO_16(M) \
    M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) M(16)

/* ---------------------------------------------------------------- AVX-512 */

#define T512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
#define INLINE512 static inline __attribute__((always_inline, target("avx512f,avx512dq,avx512vl,avx2,fma")))

INLINE512 __mmask16 mask16(int remaining) {
    return remaining >= 16 ? (__mmask16)0xFFFF : remaining <= 0 ? (__mmask16)0 : (__mmask16)((1u << remaining) - 1);
}

/* Lists k0 + i (0 <= i < n, ascending) where any of the `rows` rows of X (stride xs)
 * has x[k0 + i] != 0 — NaN counts as nonzero; returns the count. *all_rows is set when
 * every listed input is nonzero in every row (no term of any row is skipped, so the
 * block needs no masks). idx has n + 16 slots. */
INLINE512 int nonzero512(const float *X, size_t xs, int rows, int k0, int n, int32_t *idx, int *all_rows) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 zero = _mm512_setzero_ps();
    __mmask16 any[CHUNK / 16];
    int all = 1, full = 1;
    for (int i = 0; i < n; i += 16) {
        __mmask16 lm = mask16(n - i), nz = 0, every = lm;
        for (int r = 0; r < rows; r++) {
            __mmask16 m = _mm512_mask_cmp_ps_mask(lm, _mm512_maskz_loadu_ps(lm, X + (size_t)r * xs + k0 + i), zero,
                                                  _CMP_NEQ_UQ);
            nz |= m;
            every &= m;
        }
        all &= nz == every;
        full &= every == lm;
        any[i / 16] = nz;
    }
    *all_rows = all;
    if (full) { /* no zero anywhere (tanh layers): the list is every input, written without
                 * the compress-popcount chain that serialises the general case */
        for (int i = 0; i < n; i += 16)
            _mm512_storeu_si512(idx + i, _mm512_add_epi32(lane, _mm512_set1_epi32(k0 + i)));
        return n;
    }
    int cnt = 0;
    for (int i = 0; i < n; i += 16) {
        __m512i id = _mm512_add_epi32(lane, _mm512_set1_epi32(k0 + i));
        _mm512_storeu_si512(idx + cnt, _mm512_maskz_compress_epi32(any[i / 16], id));
        cnt += __builtin_popcount(any[i / 16]);
    }
    return cnt;
}

/* The sparse (input-stationary) convolution is used while nonzero inputs x
 * CONV_SPARSE_COST < C x output positions x S^2 (conv512; measured on AMD Zen 5 for
 * 3x3 and 4x4 kernels, 16 and 32 filters: the two break even at 10-20% nonzero). */
#define CONV_SPARSE_COST 5.0

/* A layer's weights of 256 KB or more are streamed from L3 or memory, once per row;
 * for them the weight rows of the inputs listed a few ahead are prefetched (skipped
 * inputs leave gaps that the hardware prefetcher does not follow). */
#define PREFETCH_MIN_WEIGHTS (64 * 1024)

/* Vector v of VB at p: the last one masked by mt. */
#define LOAD512(p, v, VB, mt) ((v) == (VB)-1 ? _mm512_maskz_loadu_ps((mt), (p)) : _mm512_loadu_ps(p))
#define STORE512(p, v, VB, mt, a) \
    ((v) == (VB)-1 ? _mm512_mask_storeu_ps((p), (mt), (a)) : _mm512_storeu_ps((p), (a)))

/* One row, VB vectors of outputs: y = src + the listed terms x[k] W[k, :], in list
 * order, accumulated in registers. W and src point at the tile's first output. */
INLINE512 void row512_tile(const float *W, const float *src, const float *x, const int32_t *idx, int n, int out,
                           const int VB, __mmask16 mt, float *y, int prefetch) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int v = 0; v < VB; v++) acc[v] = LOAD512(src + 16 * v, v, VB, mt);
    for (int i = 0; i < n; i++) {
        int k = idx[i];
        const float *w = W + (size_t)k * out;
        if (prefetch && i + NEVO_PREFETCH_ROWS < n) {
            const char *pw = (const char *)(W + (size_t)idx[i + NEVO_PREFETCH_ROWS] * out);
#pragma GCC unroll 16
            for (int v = 0; v < VB; v++) _mm_prefetch(pw + 64 * v, _MM_HINT_T0);
        }
        __m512 xb = _mm512_set1_ps(x[k]);
#pragma GCC unroll 16
        for (int v = 0; v < VB; v++) acc[v] = _mm512_fmadd_ps(xb, LOAD512(w + 16 * v, v, VB, mt), acc[v]);
    }
#pragma GCC unroll 16
    for (int v = 0; v < VB; v++) STORE512(y + 16 * v, v, VB, mt, acc[v]);
}

T512 static void row512(const float *W, const float *src, const float *x, const int32_t *idx, int n, int in,
                        int out, float *y) {
    int nvec = (out + 15) / 16;
    int prefetch = (size_t)in * (size_t)out >= PREFETCH_MIN_WEIGHTS;
    for (int v0 = 0; v0 < nvec; v0 += 16) {
        int VB = min_int(16, nvec - v0);
        __mmask16 mt = mask16(out - 16 * (v0 + VB - 1));
        const float *w = W + 16 * v0, *s = src + 16 * v0;
        float *yt = y + 16 * v0;
        switch (VB) {
#define ROW_CASE(N) \
    case N: row512_tile(w, s, x, idx, n, out, N, mt, yt, prefetch); break;
            CASES_1_TO_16(ROW_CASE)
#undef ROW_CASE
        }
    }
}

/* RB rows x VB vectors: row r of Y = the sums at src[r] (a bias, or partial sums) + the
 * listed terms with row r's weights at W[r]. shared: the rows are of one network, all
 * with W[0], so each weight vector is loaded once for every row; otherwise each row
 * reads its own network's (dense_nets). masked: each row's term is masked off where
 * its own input is zero; unmasked blocks are only used when no row has a zero among
 * the listed inputs, where the two give the same bits. W and src point at the tile's
 * first output. RB x VB <= 16 accumulators (RB up to 8 for a single vector). */
INLINE512 void block512_tile(const float *const *W, const int shared, const float *const *src, const float *X,
                             size_t xs, const int32_t *idx, int n, int out, const int RB, const int VB,
                             const int masked, __mmask16 mt, float *Y, size_t ys) {
    __m512 acc[8][4];
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int v = 0; v < VB; v++) acc[r][v] = LOAD512(src[r] + 16 * v, v, VB, mt);
    for (int i = 0; i < n; i++) {
        int k = idx[i];
        __m512 xb[8];
        __mmask16 m[8];
#pragma GCC unroll 8
        for (int r = 0; r < RB; r++) {
            xb[r] = _mm512_set1_ps(X[(size_t)r * xs + k]);
            if (masked) m[r] = _mm512_cmp_ps_mask(xb[r], zero, _CMP_NEQ_UQ);
        }
#pragma GCC unroll 4
        for (int v = 0; v < VB; v++) {
            __m512 wv = shared ? LOAD512(W[0] + (size_t)k * out + 16 * v, v, VB, mt) : zero;
#pragma GCC unroll 8
            for (int r = 0; r < RB; r++) {
                __m512 w = shared ? wv : LOAD512(W[r] + (size_t)k * out + 16 * v, v, VB, mt);
                acc[r][v] = masked ? _mm512_mask3_fmadd_ps(xb[r], w, acc[r][v], m[r])
                                   : _mm512_fmadd_ps(xb[r], w, acc[r][v]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int v = 0; v < VB; v++) STORE512(Y + r * ys + 16 * v, v, VB, mt, acc[r][v]);
}

/* block512_tile over all outputs, 4 vectors at a time (one vector for RB > 4). */
INLINE512 void block512(const float *const *W, const int shared, const float *const *src, const float *X, size_t xs,
                        const int32_t *idx, int n, int out, const int RB, const int masked, float *Y, size_t ys) {
    int nvec = (out + 15) / 16;
    const float *wt[8], *st[8];
    for (int v0 = 0; v0 < nvec; v0 += 4) {
        int VB = RB > 4 ? 1 : min_int(4, nvec - v0); /* RB > 4 only for layers of <= 16 outputs */
        __mmask16 mt = mask16(out - 16 * (v0 + VB - 1));
#pragma GCC unroll 8
        for (int r = 0; r < RB; r++) wt[r] = W[shared ? 0 : r] + 16 * v0, st[r] = src[r] + 16 * v0;
        float *yt = Y + 16 * v0;
        switch (VB) {
        case 1: block512_tile(wt, shared, st, X, xs, idx, n, out, RB, 1, masked, mt, yt, ys); break;
        case 2: block512_tile(wt, shared, st, X, xs, idx, n, out, RB, 2, masked, mt, yt, ys); break;
        case 3: block512_tile(wt, shared, st, X, xs, idx, n, out, RB, 3, masked, mt, yt, ys); break;
        default: block512_tile(wt, shared, st, X, xs, idx, n, out, RB, 4, masked, mt, yt, ys); break;
        }
    }
}

/* Rows RB (1..8) sharing one input list, row r from the sums at src[r] with weights
 * W[r] (W[0] for all when shared): unmasked when no row has a zero among the listed
 * inputs (tanh layers), else in masked blocks of at most 4 rows. The switches give
 * every block a fixed height, so its accumulators stay in registers. */
INLINE512 void rows512(const float *const *W, const int shared, const float *const *src, const float *X, size_t xs,
                       const int32_t *idx, int n, int out, int RB, int all_rows, float *Y, size_t ys) {
    if (all_rows) {
        switch (RB) {
#define UNMASKED_CASE(N) \
    case N: block512(W, shared, src, X, xs, idx, n, out, N, 0, Y, ys); return;
            UNMASKED_CASE(2) UNMASKED_CASE(3) UNMASKED_CASE(4) UNMASKED_CASE(5) UNMASKED_CASE(6)
            UNMASKED_CASE(7) UNMASKED_CASE(8)
#undef UNMASKED_CASE
        }
    }
    for (int q = 0; q < RB; q += 4) {
        int rb = min_int(4, RB - q);
        const float *const *Wq = shared ? W : W + q;
        const float *Xq = X + (size_t)q * xs;
        float *Yq = Y + (size_t)q * ys;
        switch (rb) {
        case 1: block512(Wq, shared, src + q, Xq, xs, idx, n, out, 1, 1, Yq, ys); break;
        case 2: block512(Wq, shared, src + q, Xq, xs, idx, n, out, 2, 1, Yq, ys); break;
        case 3: block512(Wq, shared, src + q, Xq, xs, idx, n, out, 3, 1, Yq, ys); break;
        default: block512(Wq, shared, src + q, Xq, xs, idx, n, out, 4, 1, Yq, ys); break;
        }
    }
}

T512 static void dense512(const float *W, const float *b, const float *X, size_t xs, int rows, int in, int out,
                          float *Y, size_t ys) {
    int32_t idx[CHUNK + 16];
    /* a single vector of outputs has one sum per row: 8 rows keep both FMA pipes busy
     * through the FMA latency where 4 would leave them half idle */
    int max_rb = out <= 16 ? 8 : 4;
    for (int r = 0; r < rows;) {
        int RB = min_int(max_rb, rows - r); /* full blocks, then one of the rows left */
        const float *Xr = X + (size_t)r * xs;
        float *Yr = Y + (size_t)r * ys;
        if (in <= 0)
            for (int q = 0; q < RB; q++) memcpy(Yr + (size_t)q * ys, b, sizeof(float) * (size_t)out);
        for (int k0 = 0; k0 < in; k0 += CHUNK) {
            int all_rows;
            int n = nonzero512(Xr, xs, RB, k0, min_int(CHUNK, in - k0), idx, &all_rows);
            /* the first chunk starts from the bias, later ones from the sums so far */
            if (RB == 1) {
                row512(W, k0 == 0 ? b : Yr, Xr, idx, n, in, out, Yr);
            } else {
                const float *src[8];
                for (int q = 0; q < RB; q++) src[q] = k0 == 0 ? b : Yr + (size_t)q * ys;
                rows512(&W, 1, src, Xr, xs, idx, n, out, RB, all_rows, Yr, ys);
            }
        }
        r += RB;
    }
}

/* nevo_tanhf on 16 floats, operation for operation. */
INLINE512 __m512 tanh512_16(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 ax = _mm512_andnot_ps(sign, x);
    __m512 z = _mm512_add_ps(ax, ax);
    __m512 t = _mm512_fmadd_ps(z, _mm512_set1_ps(NEVO_TANH_INV_LN2), _mm512_set1_ps(NEVO_TANH_SHIFTER));
    __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(NEVO_TANH_SHIFTER));
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(NEVO_TANH_LN2_HI), z);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(NEVO_TANH_LN2_LO), r);
    __m512 h = _mm512_set1_ps(NEVO_TANH_H6);
    h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(NEVO_TANH_H5));
    h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(NEVO_TANH_H4));
    h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(NEVO_TANH_H3));
    h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(NEVO_TANH_H2));
    h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(NEVO_TANH_H1));
    h = _mm512_fmadd_ps(h, r, _mm512_set1_ps(NEVO_TANH_H0));
    __m512 p = _mm512_fmadd_ps(_mm512_mul_ps(r, r), h, r);
    __m512i bits = _mm512_add_epi32(_mm512_slli_epi32(_mm512_castps_si512(t), 23), _mm512_set1_epi32(0x3F800000));
    __m512 s = _mm512_castsi512_ps(bits);
    __m512 em1 = _mm512_fmadd_ps(s, p, _mm512_sub_ps(s, _mm512_set1_ps(1.0f)));
    __m512 th = _mm512_div_ps(em1, _mm512_add_ps(em1, _mm512_set1_ps(2.0f)));
    __m512 xsign = _mm512_and_ps(sign, x);
    th = _mm512_or_ps(th, xsign);
    /* |x| >= 9 gives +-1, NaN stays NaN (as the scalar code) */
    __mmask16 big = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(NEVO_TANH_CLAMP), _CMP_NLT_UQ);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    th = _mm512_mask_mov_ps(th, big, _mm512_or_ps(_mm512_set1_ps(1.0f), xsign));
    return _mm512_mask_mov_ps(th, nan, x);
}

/* y < 0 ? 0 : y on 16 floats: the lanes below zero set to +0, so -0 and NaN stay (the
 * portable relu's bits). */
INLINE512 __m512 relu512_16(__m512 y) {
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
}

/* Sixteen rows in the lanes of a vector ("lanes" layout, kernels.h): input k of the
 * 16 rows is one vector, XT + 16 k, and output j of the 16 rows one accumulator, so a
 * term is one fused multiply-add of that vector with W[k, j] broadcast from memory:
 * no listing, no lane left idle however few outputs the layer has (the row layout
 * uses half of each vector on an 8-output layer), and the outputs come out in the
 * same layout for the next layer. A row whose input is zero keeps its sum (masked), as
 * if the term were skipped; an input zero in all 16 rows is skipped whole.
 *
 * With NB = 2 or 3, that many blocks of 16 rows of the same network go together
 * (dense_lanes_blocks): each weight is broadcast once for NB FMAs, one per block, block
 * q's sums in acc[8 q + j] (JB <= 8). In a bare loop over a 256x256 layer with its
 * weights in L2 (an Intel Xeon), one broadcast per FMA ran at 0.6-0.65 of the FMA
 * peak, one per two 0.77-0.8, one per three 0.77-0.86; four blocks, with only 4
 * outputs a tile to stay within the 32 vector registers, fell back to 0.66. Each row
 * still sums the same terms in the same order, so the bits are the same as one block
 * at a time. */
#define LANES_TW(NB) ((NB) == 1 ? 16 : 8) /* outputs a tile, so NB x TW sums fit in registers */

/* One term for JB outputs: input k of block q at X[q] + 16 k against the weights at
 * W + k ws (W points at the tile's first output), masked by each block's nonzero lanes
 * where some row of the chunk has a zero input. */
INLINE512 void lanes512_term(__m512 *acc, const int NB, const int JB, const float *W, size_t ws,
                             const float *const *X, int k, const int masked) {
    __m512 x[NEVO_LANES_BLOCKS];
    __mmask16 nz[NEVO_LANES_BLOCKS];
#pragma GCC unroll 4
    for (int q = 0; q < NB; q++) {
        x[q] = _mm512_loadu_ps(X[q] + 16 * (size_t)k);
        if (masked) nz[q] = _mm512_cmp_ps_mask(x[q], _mm512_setzero_ps(), _CMP_NEQ_UQ);
    }
    const float *w = W + (size_t)k * ws;
#pragma GCC unroll 16
    for (int j = 0; j < JB; j++) {
        __m512 wj = _mm512_set1_ps(w[j]);
#pragma GCC unroll 4
        for (int q = 0; q < NB; q++) {
            __m512 *s = &acc[LANES_TW(NB) * q + j];
            *s = masked ? _mm512_mask3_fmadd_ps(x[q], wj, *s, nz[q]) : _mm512_fmadd_ps(x[q], wj, *s);
        }
    }
}

/* The terms of the n inputs idx lists (lanes512_list), masked, or with idx NULL of every
 * input k < n, unmasked (no row has a zero input). pf, if not NULL, is the first of npf
 * (> 0) consecutive 64-byte lines to prefetch, spread evenly over the terms: issued
 * back to back after the last term instead (as they were when listing left fewer terms
 * than lines), the prefetches stalled on the line fill buffers, 15% of the dense
 * layer's time. Separate loops for the listed and the unlisted case and for the terms
 * that prefetch and the ones after: with the prefetch range and the idx test worked out
 * in every iteration, the loop ran at 0.75-0.9 of one without them (64x64 and 256x256
 * layers, weights in L1 and L2, an Intel Xeon). */
INLINE512 void lanes512_terms_from(__m512 *acc, const int NB, const int JB, const float *W, size_t ws,
                                   const float *const *X, int n, const uint16_t *idx, const char *pf, int npf,
                                   const int listed) {
    int i = 0;
    if (pf) {
        const int per = (npf + n - 1) / n;      /* lines per term */
        const int with = (npf + per - 1) / per; /* terms that prefetch */
        if (per == 1) {
            for (; i < with; i++) {
                _mm_prefetch(pf + 64 * (size_t)i, _MM_HINT_T1);
                lanes512_term(acc, NB, JB, W, ws, X, listed ? idx[i] : i, listed);
            }
        } else {
            for (; i < with; i++) {
                int l0 = i * per, l1 = l0 + per < npf ? l0 + per : npf;
                for (int l = l0; l < l1; l++) _mm_prefetch(pf + 64 * (size_t)l, _MM_HINT_T1);
                lanes512_term(acc, NB, JB, W, ws, X, listed ? idx[i] : i, listed);
            }
        }
    }
    for (; i < n; i++) lanes512_term(acc, NB, JB, W, ws, X, listed ? idx[i] : i, listed);
}

INLINE512 void lanes512_terms(__m512 *acc, const int NB, const int JB, const float *W, size_t ws,
                              const float *const *X, int n, const uint16_t *idx, const char *pf, int npf) {
    if (idx)
        lanes512_terms_from(acc, NB, JB, W, ws, X, n, idx, pf, npf, 1);
    else
        lanes512_terms_from(acc, NB, JB, W, ws, X, n, NULL, pf, npf, 0);
}

/* The most inputs lanes512_list lists at once: a chunk of a dense layer has at most
 * LANES_CHUNK_BYTES / 4 inputs (or, unchunked, in * out * 4 <= LANES_CHUNK_BYTES), and
 * a convolution window row is listed in pieces of this size. */
#define LANES_LIST_MAX 8192

/* Lists in idx the inputs k < n (n <= LANES_LIST_MAX) nonzero in some of the 16 rows of
 * some of the NB blocks X[q] (a NaN counts as nonzero), in order; returns how many.
 * Without a branch on the data: each k is written and the count moves past it only if
 * it is kept. Skipping zero inputs by a branch in the tile's loop instead cost twice
 * the time once the pattern changed from call to call (1.4 against 0.7 us for a
 * 256-input, 16-output tile, half its inputs zero, on an Intel Xeon with AVX-512): the
 * pattern cannot be predicted, and every misprediction stalls 16 FMAs' worth of work.
 * *any_zero is set if some lane of some input is zero (the tile must mask). */
INLINE512 int lanes512_list(const int NB, const float *const *X, int n, uint16_t *idx, int *any_zero) {
    __mmask16 every = 0xFFFF;
    int c = 0;
    for (int k = 0; k < n; k++) {
        __mmask16 some = 0;
#pragma GCC unroll 4
        for (int q = 0; q < NB; q++) {
            __mmask16 nz =
                _mm512_cmp_ps_mask(_mm512_loadu_ps(X[q] + 16 * (size_t)k), _mm512_setzero_ps(), _CMP_NEQ_UQ);
            every &= nz;
            some |= nz;
        }
        idx[c] = (uint16_t)k;
        c += some != 0;
    }
    *any_zero = every != 0xFFFF;
    return c;
}

/* The activation on the sums still in registers (nevo_kernel_activate's bits), then the
 * JB outputs of the 16 rows stored at YT. */
INLINE512 void lanes512_store(__m512 *acc, const int JB, NevoActivation act, float *YT) {
    if (act == NEVO_ACT_TANH) {
#pragma GCC unroll 16
        for (int j = 0; j < JB; j++) acc[j] = tanh512_16(acc[j]);
    } else if (act == NEVO_ACT_RELU) {
#pragma GCC unroll 16
        for (int j = 0; j < JB; j++) acc[j] = relu512_16(acc[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < JB; j++) _mm512_storeu_ps(YT + 16 * (size_t)j, acc[j]);
}

/* JB outputs over inputs [0, n) of a layer with `out` outputs (those listed in idx,
 * if not NULL: lanes512_terms), for NB blocks (X[q] -> Y[q]), starting from the bias b
 * or (sums) from the partial sums already in Y[q]; npf lines from pf (if not NULL)
 * prefetched. */
INLINE512 void lanes512_tile(const float *W, const float *b, int sums, const int NB, const float *const *X, int n,
                             const uint16_t *idx, int out, const int JB, NevoActivation act, const char *pf, int npf,
                             float *const *Y) {
    __m512 acc[NEVO_LANES_BLOCKS * 8 > 16 ? NEVO_LANES_BLOCKS * 8 : 16];
#pragma GCC unroll 4
    for (int q = 0; q < NB; q++) {
#pragma GCC unroll 16
        for (int j = 0; j < JB; j++)
            acc[LANES_TW(NB) * q + j] = sums ? _mm512_loadu_ps(Y[q] + 16 * (size_t)j) : _mm512_set1_ps(b[j]);
    }
    if (n > 0) {
        lanes512_terms(acc, NB, JB, W, (size_t)out, X, n, idx, pf, npf);
    } else {
        for (int l = 0; l < npf; l++) _mm_prefetch(pf + 64 * (size_t)l, _MM_HINT_T1);
    }
#pragma GCC unroll 4
    for (int q = 0; q < NB; q++) lanes512_store(acc + LANES_TW(NB) * q, JB, act, Y[q]);
}

/* masked convolutions only where some row has a zero input (observations may; the
 * layers after a tanh do not) */
INLINE512 int lanes512_any_zero(const float *XT, int in) {
    __mmask16 every = 0xFFFF;
    for (int k = 0; k < in; k++)
        every &= _mm512_cmp_ps_mask(_mm512_loadu_ps(XT + 16 * (size_t)k), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    return every != 0xFFFF;
}

/* A tile reads one 64-byte line of each weight row it passes, so a layer too big for L1
 * is gone through in chunks of inputs of LANES_CHUNK_BYTES of weights: every tile of a
 * chunk, then the next chunk (the sums carry over in YT), while the tiles prefetch the
 * next chunk, one line per input. Without chunks, weights streamed from memory
 * (256-wide layers, B = 16) were fetched line by line across 16 passes of a 1 KB
 * stride: 70-82 GFLOP/s there, 99-110 with 32 KB chunks (which stay in L1 between
 * tiles; 64 KB: 5% slower there, 128 KB: 20% slower). Each tile prefetches its share
 * of the next chunk as consecutive lines, not its own column of lines (one per 1 KB
 * or 512 B row): a bare loop with this access pattern and no arithmetic read 20-30
 * GB/s that way, against 12-20 with a column per tile (sequential reads: 18-27 GB/s
 * in the same runs). Two or three blocks take tiles of 8 outputs, half a line of each
 * row, the other half read by the next tile from L1. */
#define LANES_CHUNK_BYTES (32 * 1024)

/* The inputs a chunk of a dense lanes layer takes: all of them, or as many as
 * LANES_CHUNK_BYTES of weights hold, at least 16 (AVX2's lanes use it too). */
static inline int lanes_chunk_inputs(int in, int out) {
    if ((size_t)in * (size_t)out * sizeof(float) <= LANES_CHUNK_BYTES) return in;
    int kc = (int)(LANES_CHUNK_BYTES / ((size_t)out * sizeof(float)));
    kc = kc < 16 ? 16 : kc;
    NEVO_ASSERT(kc <= LANES_LIST_MAX);
    return kc;
}

INLINE512 void dense_lanes512_blocks(const float *W, const float *b, const int NB, const float *const *XT, int in,
                                     int out, NevoActivation act, float *const *YT) {
    const int TW = LANES_TW(NB);
    int kc = lanes_chunk_inputs(in, out);
    uint16_t idx[LANES_LIST_MAX];
    int tiles = (out + TW - 1) / TW;
    for (int k0 = 0; k0 < in; k0 += kc) {
        int n = min_int(kc, in - k0);
        int sums = k0 > 0;
        NevoActivation a = k0 + n >= in ? act : NEVO_ACT_NONE;
        const float *wk = W + (size_t)k0 * out;
        const float *xk[NEVO_LANES_BLOCKS];
        for (int q = 0; q < NB; q++) xk[q] = XT[q] + 16 * (size_t)k0;
        /* the chunk's inputs nonzero in some row, if any row has a zero: those terms
         * only, masked; else every term, unmasked (the same sums either way) */
        int masked;
        int listed = lanes512_list(NB, xk, n, idx, &masked);
        const uint16_t *ix = masked ? idx : NULL;
        int terms = masked ? listed : n;
        /* the next chunk's lines, from the line holding its first weight, in even shares
         * of consecutive lines, one share per tile */
        const char *next = (const char *)((uintptr_t)(wk + (size_t)n * out) & ~(uintptr_t)63);
        size_t lines = 0;
        if (k0 + n < in)
            lines = (size_t)((const char *)(wk + (size_t)min_int(2 * kc, in - k0) * out) - next + 63) / 64;
        for (int j0 = 0, t = 0; j0 < out; j0 += TW, t++) {
            int JB = min_int(TW, out - j0);
            const float *w = wk + j0, *bj = b + j0;
            size_t l0 = lines * t / tiles, l1 = lines * (t + 1) / tiles;
            const char *pf = l1 > l0 ? next + 64 * l0 : NULL;
            int npf = (int)(l1 - l0);
            float *y[NEVO_LANES_BLOCKS];
            for (int q = 0; q < NB; q++) y[q] = YT[q] + 16 * (size_t)j0;
            /* JB <= TW always; N <= TW drops the cases of 9 to 16 outputs from the
             * versions with several blocks, where block q's sums would run into block
             * q + 1's in acc */
            switch (JB) {
#define LANES_CASE(N)                                                                       \
    case N:                                                                                 \
        if (N <= TW) lanes512_tile(w, bj, sums, NB, xk, terms, ix, out, N, a, pf, npf, y); \
        break;
                CASES_1_TO_16(LANES_CASE)
#undef LANES_CASE
            }
        }
    }
}

T512 static void dense_lanes512(const float *W, const float *b, const float *XT, int in, int out,
                                NevoActivation act, float *YT) {
    dense_lanes512_blocks(W, b, 1, &XT, in, out, act, &YT);
}

/* LANES_TW's tiles of 8 and the dispatch below stop at three blocks: a fourth would
 * need tiles of 4 outputs to keep its sums in the 32 vector registers (slower, above) */
_Static_assert(NEVO_LANES_BLOCKS == 3, "dense_lanes_blocks512 dispatches 2 or 3 blocks");

T512 static void dense_lanes_blocks512(const float *W, const float *b, int nb, const float *const *XT, int in,
                                       int out, NevoActivation act, float *const *YT) {
    NEVO_ASSERT(nb == 2 || nb == 3);
    if (nb == 2)
        dense_lanes512_blocks(W, b, 2, XT, in, out, act, YT);
    else
        dense_lanes512_blocks(W, b, 3, XT, in, out, act, YT);
}

/* Transposes the 16 x 16 block v (vector r = row r) in place: four stages, each swapping
 * bit b of the row and column index (b = 1, 2, 4, 8) by exchanging the off-diagonal
 * b x b sub-blocks of each pair of vectors (r, r + b). */
INLINE512 void transpose16_512(__m512 v[16]) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 4
    for (int b = 1; b < 16; b <<= 1) {
        /* low (bit b of the lane clear): from the first vector; high: from the second */
        __mmask16 hi = _mm512_test_epi32_mask(lane, _mm512_set1_epi32(b));
        __m512i bv = _mm512_set1_epi32(b), sixteen = _mm512_set1_epi32(16);
        /* first: low lanes keep theirs, high lanes take the second's lane - b;
         * second: low lanes take the first's lane + b, high lanes keep theirs */
        __m512i idx_first = _mm512_mask_add_epi32(lane, hi, lane, _mm512_sub_epi32(sixteen, bv));
        __m512i idx_second = _mm512_mask_add_epi32(_mm512_add_epi32(lane, bv), hi, lane, sixteen);
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) {
            if (r & b) continue;
            __m512 f = _mm512_permutex2var_ps(v[r], idx_first, v[r + b]);
            __m512 g = _mm512_permutex2var_ps(v[r], idx_second, v[r + b]);
            v[r] = f, v[r + b] = g;
        }
    }
}

/* Rows -> lanes: XT[16 k + r] = X[r xs + k] for the 16 rows, k < in. */
T512 static void to_lanes512(const float *X, size_t xs, int in, float *XT) {
    for (int k0 = 0; k0 < in; k0 += 16) {
        __mmask16 m = mask16(in - k0);
        __m512 v[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) v[r] = _mm512_maskz_loadu_ps(m, X + (size_t)r * xs + k0);
        transpose16_512(v);
        for (int c = 0; c < 16 && k0 + c < in; c++) _mm512_storeu_ps(XT + 16 * (size_t)(k0 + c), v[c]);
    }
}

/* Lanes -> rows: Y[r ys + o] = YT[16 o + r] for the 16 rows, o < out. */
T512 static void from_lanes512(const float *YT, int out, float *Y, size_t ys) {
    for (int o0 = 0; o0 < out; o0 += 16) {
        __mmask16 m = mask16(out - o0);
        __m512 v[16];
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++)
            v[c] = o0 + c < out ? _mm512_loadu_ps(YT + 16 * (size_t)(o0 + c)) : _mm512_setzero_ps();
        transpose16_512(v);
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) _mm512_mask_storeu_ps(Y + (size_t)r * ys + o0, m, v[r]);
    }
}

/* A convolution in the lanes layout: input (iy, ix, c) of the 16 rows at XT + 16 ((iy
 * in_w + ix) in_c + c), output (oy, ox, f) at YT + 16 ((oy out_w + ox) out_c + f), the
 * activation applied. Each output is its bias and then its window's terms in (ky, kx,
 * c) order, a zero input masking its lane, as in every other convolution kernel: a
 * window row (kx, c) is K C consecutive inputs against K C consecutive weight rows, so
 * the window is K runs of the dense tile's terms. Binary planes leave most inputs zero
 * in all 16 rows at once, and those are skipped whole: listed once per layer by input
 * row (conv_lanes512_rows), or, for layers too big for that, each window row's listed
 * here (lanes512_list, in pieces of LANES_CONV_LIST inputs). */
#define LANES_CONV_LIST 256
INLINE512 void conv_lanes512_pos(const NevoLayer *L, const float *W, const float *b, const float *x, const int JB,
                                 const int masked, NevoActivation act, float *y) {
    int K = L->kernel, F = L->out_c, KC = L->kernel * L->in_c;
    size_t row = 16 * (size_t)L->in_w * L->in_c;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < JB; j++) acc[j] = _mm512_set1_ps(b[j]);
    for (int ky = 0; ky < K; ky++) {
        const float *wr = W + (size_t)ky * KC * F, *xr = x + ky * row;
        if (!masked) {
            lanes512_terms(acc, 1, JB, wr, (size_t)F, &xr, KC, NULL, NULL, 0);
            continue;
        }
        uint16_t idx[LANES_CONV_LIST];
        for (int t0 = 0; t0 < KC; t0 += LANES_CONV_LIST) {
            int any_zero;
            const float *xt = xr + 16 * (size_t)t0;
            int n = lanes512_list(1, &xt, min_int(LANES_CONV_LIST, KC - t0), idx, &any_zero);
            lanes512_terms(acc, 1, JB, wr + (size_t)t0 * F, (size_t)F, &xt, n, idx, NULL, 0);
        }
    }
    lanes512_store(acc, JB, act, y);
}

/* Where some row has a zero input (binary planes), the nonzero inputs of each input row
 * (in any of the 16 rows) listed once per layer rather than once per window that reads
 * them (9 times for a 3x3 window at stride 1): the inputs of row iy, (ix, c) at
 * ix C + c, nonzero in some lane, in order, at list + iy in_w C, and the list entries
 * of columns before ix at start[iy (in_w + 1) + ix]. A window row (kx, c) then is the
 * run of its input row's entries from column ox S to ox S + K - 1, in (kx, c) order as
 * ever. On the MinAtar net (Breakout, Seaquest planes) listing per window was about
 * as much work as the terms. For layers of at most CONV_ROWS_LIST_MAX inputs in at
 * most CONV_ROWS_MAX_H rows (stack buffers). */
#define CONV_ROWS_LIST_MAX 8192
_Static_assert(CONV_ROWS_LIST_MAX <= LANES_LIST_MAX, "an input row is listed by lanes512_list");
#define CONV_ROWS_MAX_H 256 /* and at most this many input rows (start has in_h (in_w + 1) entries) */

/* An input row's column starts: sr[ix] = the entries of its list lr (c of them, input
 * (ix, ch) at ix C + ch) before column ix, for ix = 0 .. in_w (AVX-512 and AVX2 rows). */
static inline void conv_rows_column_starts(const uint16_t *lr, int c, int in_w, int C, uint16_t *sr) {
    for (int ix = 0, e = 0; ix <= in_w; ix++) {
        while (e < c && lr[e] < ix * C) e++;
        sr[ix] = (uint16_t)e;
    }
}

INLINE512 void conv_lanes512_rows(const NevoLayer *L, const float *W, const float *b, const float *XT,
                                  NevoActivation act, float *YT) {
    int S = L->stride, K = L->kernel, C = L->in_c, F = L->out_c, KC = K * C;
    int rowlen = L->in_w * C;
    uint16_t list[CONV_ROWS_LIST_MAX], start[CONV_ROWS_LIST_MAX + CONV_ROWS_MAX_H];
    for (int iy = 0; iy < L->in_h; iy++) {
        const float *xr = XT + 16 * (size_t)iy * rowlen;
        uint16_t *lr = list + (size_t)iy * rowlen, *sr = start + (size_t)iy * (L->in_w + 1);
        int any_zero;
        int c = lanes512_list(1, &xr, rowlen, lr, &any_zero);
        conv_rows_column_starts(lr, c, L->in_w, C, sr);
    }
    for (int oy = 0; oy < L->out_h; oy++) {
        for (int ox = 0; ox < L->out_w; ox++) {
            int koff = ox * S * C; /* the window's first input in its rows */
            float *y = YT + 16 * ((size_t)(oy * L->out_w + ox) * F);
            for (int f0 = 0; f0 < F; f0 += 16) {
                int JB = min_int(16, F - f0);
                __m512 acc[16];
                for (int j = 0; j < JB; j++) acc[j] = _mm512_set1_ps(b[f0 + j]);
                for (int ky = 0; ky < K; ky++) {
                    int iy = oy * S + ky;
                    const uint16_t *lr = list + (size_t)iy * rowlen, *sr = start + (size_t)iy * (L->in_w + 1);
                    const float *xw = XT + 16 * ((size_t)iy * rowlen + koff); /* input (iy, ox S, 0) */
                    const float *wr = W + (size_t)ky * KC * F + f0;
                    int e1 = sr[ox * S + K];
                    switch (JB) {
#define CONV_ROWS_CASE(N)                                                               \
    case N:                                                                             \
        for (int e = sr[ox * S]; e < e1; e++)                                           \
            lanes512_term(acc, 1, N, wr, (size_t)F, &xw, lr[e] - koff, 1);              \
        break;
                        CASES_1_TO_16(CONV_ROWS_CASE)
#undef CONV_ROWS_CASE
                    }
                }
                lanes512_store(acc, JB, act, y + 16 * (size_t)f0);
            }
        }
    }
}

T512 static void conv_lanes512(const NevoLayer *L, const float *W, const float *b, const float *XT,
                               NevoActivation act, float *YT) {
    int S = L->stride, C = L->in_c, F = L->out_c;
    int masked = lanes512_any_zero(XT, L->in_h * L->in_w * C);
    if (masked && L->in_h * L->in_w * C <= CONV_ROWS_LIST_MAX && L->in_h <= CONV_ROWS_MAX_H) {
        conv_lanes512_rows(L, W, b, XT, act, YT);
        return;
    }
    for (int oy = 0; oy < L->out_h; oy++) {
        for (int ox = 0; ox < L->out_w; ox++) {
            const float *x = XT + 16 * ((size_t)(oy * S * L->in_w + ox * S) * C);
            float *y = YT + 16 * ((size_t)(oy * L->out_w + ox) * F);
            for (int f0 = 0; f0 < F; f0 += 16) {
                int JB = min_int(16, F - f0);
                switch (JB) {
#define CONV_LANES_CASE(N)                                                             \
    case N:                                                                            \
        if (masked)                                                                    \
            conv_lanes512_pos(L, W + f0, b + f0, x, N, 1, act, y + 16 * (size_t)f0);   \
        else                                                                           \
            conv_lanes512_pos(L, W + f0, b + f0, x, N, 0, act, y + 16 * (size_t)f0);   \
        break;
                    CASES_1_TO_16(CONV_LANES_CASE)
#undef CONV_LANES_CASE
                }
            }
        }
    }
}

/* Rows each with its own network's weights (the GA's and ES's case: one episode per
 * network; neighbouring rows are of different networks). A lone row of a small layer
 * is bound by the latency of its FMA chains (one chain per output, 64 terms long for a
 * 64-wide layer, at 4 cycles a term), not by the FMA units; R rows of R networks side
 * by side in one register block (rows512, each row reading its own weights) give R
 * times the independent chains. The inputs listed are those where any of the rows is
 * nonzero, as for a block of rows of one network. */
T512 static void dense_nets512(const float *const *W, const float *const *b, const float *X, size_t xs, int rows,
                               int in, int out, float *Y, size_t ys) {
    NEVO_ASSERT(rows >= 1 && rows <= NEVO_NETS_MAX);
    int32_t idx[CHUNK + 16];
    const float *sums[NEVO_NETS_MAX];
    for (int q = 0; q < rows; q++) sums[q] = Y + (size_t)q * ys;
    if (in <= 0)
        for (int q = 0; q < rows; q++) memcpy(Y + (size_t)q * ys, b[q], sizeof(float) * (size_t)out);
    for (int k0 = 0; k0 < in; k0 += CHUNK) {
        int all_rows;
        int n = nonzero512(X, xs, rows, k0, min_int(CHUNK, in - k0), idx, &all_rows);
        /* the first chunk starts from the biases, later ones from the sums so far */
        rows512(W, 0, k0 == 0 ? b : sums, X, xs, idx, n, out, rows, all_rows, Y, ys);
    }
}

/* Output-stationary convolution for inputs with many nonzeros: PB output positions
 * along a row x VB vectors of 16 filters in registers, summing each window in (ky, kx,
 * c) order; a position whose input is zero keeps its sums (masked fused multiply-add),
 * exactly as if the term were skipped. */
INLINE512 void conv512_block(const NevoLayer *L, const float *W, const float *b, const float *x, float *y, int oy,
                             int ox0, const int PB, const int VB, int f0) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    const __m512 zero = _mm512_setzero_ps();
    __mmask16 mt = mask16(F - f0 - 16 * (VB - 1));
    __m512 acc[8][2];
#pragma GCC unroll 2
    for (int v = 0; v < VB; v++) {
        __m512 bv = LOAD512(b + f0 + 16 * v, v, VB, mt);
#pragma GCC unroll 8
        for (int p = 0; p < PB; p++) acc[p][v] = bv;
    }
    for (int ky = 0; ky < K; ky++) {
        for (int kx = 0; kx < K; kx++) {
            const float *xrow = x + ((size_t)(oy * S + ky) * L->in_w + (size_t)(ox0 * S + kx)) * C;
            const float *wp = W + ((size_t)(ky * K + kx) * C) * F + f0;
            for (int c = 0; c < C; c++) {
                __m512 wv[2];
#pragma GCC unroll 2
                for (int v = 0; v < VB; v++) wv[v] = LOAD512(wp + (size_t)c * F + 16 * v, v, VB, mt);
#pragma GCC unroll 8
                for (int p = 0; p < PB; p++) {
                    __m512 xb = _mm512_set1_ps(xrow[(size_t)p * S * C + c]);
                    __mmask16 nz = _mm512_cmp_ps_mask(xb, zero, _CMP_NEQ_UQ);
#pragma GCC unroll 2
                    for (int v = 0; v < VB; v++) acc[p][v] = _mm512_mask3_fmadd_ps(xb, wv[v], acc[p][v], nz);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < PB; p++)
#pragma GCC unroll 2
        for (int v = 0; v < VB; v++)
            STORE512(y + ((size_t)oy * L->out_w + ox0 + p) * F + f0 + 16 * v, v, VB, mt, acc[p][v]);
}

INLINE512 void conv512_row(const NevoLayer *L, const float *W, const float *b, const float *x, float *y, int oy,
                           const int VB, int f0) {
    int ox = 0;
    for (; ox + 8 <= L->out_w; ox += 8) conv512_block(L, W, b, x, y, oy, ox, 8, VB, f0);
    if (ox + 4 <= L->out_w) conv512_block(L, W, b, x, y, oy, ox, 4, VB, f0), ox += 4;
    if (ox + 2 <= L->out_w) conv512_block(L, W, b, x, y, oy, ox, 2, VB, f0), ox += 2;
    if (ox < L->out_w) conv512_block(L, W, b, x, y, oy, ox, 1, VB, f0);
}

T512 static void conv512_dense(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    for (int oy = 0; oy < L->out_h; oy++) {
        /* filters two vectors at a time, then one */
        int f0 = 0;
        for (; f0 + 16 < L->out_c; f0 += 32) conv512_row(L, W, b, x, y, oy, 2, f0);
        if (f0 < L->out_c) conv512_row(L, W, b, x, y, oy, 1, f0);
    }
}

/* Input-stationary convolution for sparse inputs, F filters in vectors of 16: every
 * output starts at the bias; then each nonzero input x[iy, ix, c], in ascending input
 * order, adds x W[ky, kx, c, :] to each output (oy, ox) = ((iy - ky) / S, (ix - kx) / S)
 * whose window holds it. Consecutive nonzero channels of one pixel go to an output in
 * one pass (one load and store per output vector). */
T512 static void conv512_sparse(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c, OH = L->out_h, OW = L->out_w, IW = L->in_w;
    /* full vectors of 16 filters, then a masked one for the rest (plain loads and stores
     * where possible: a load forwards from a plain store of the same vector) */
    int nfull = F / 16;
    __mmask16 mt = mask16(F - 16 * nfull);
    for (int p = 0; p < OH * OW; p++) {
        float *o = y + (size_t)p * F;
        for (int v = 0; v < nfull; v++) _mm512_storeu_ps(o + 16 * v, _mm512_loadu_ps(b + 16 * v));
        if (mt) _mm512_mask_storeu_ps(o + 16 * nfull, mt, _mm512_maskz_loadu_ps(mt, b + 16 * nfull));
    }
    /* input rows and columns past the last window add to nothing */
    int used_h = (OH - 1) * S + K, used_w = (OW - 1) * S + K;
    int in_dim = L->in_h * IW * C;
    int32_t idx[CHUNK + 16];
    for (int k0 = 0; k0 < in_dim; k0 += CHUNK) {
        int all_rows;
        int n = nonzero512(x, 0, 1, k0, min_int(CHUNK, in_dim - k0), idx, &all_rows);
        for (int i = 0; i < n;) {
            /* the run idx[i, j) of one pixel's nonzero channels */
            int pix = idx[i] / C, base = pix * C;
            int j = i + 1;
            while (j < n && idx[j] < base + C) j++;
            int iy = pix / IW, ix = pix - iy * IW;
            if (iy < used_h && ix < used_w) {
                /* the outputs whose windows hold it: ky = iy - S oy in [0, K), oy in [0, OH) */
                int oy0, oy1, ox0, ox1;
                if (S == 1) { /* the common case, without divisions */
                    oy0 = iy >= K ? iy - K + 1 : 0, oy1 = min_int(iy, OH - 1);
                    ox0 = ix >= K ? ix - K + 1 : 0, ox1 = min_int(ix, OW - 1);
                } else {
                    oy0 = iy >= K ? (iy - K + S) / S : 0, oy1 = min_int(iy / S, OH - 1);
                    ox0 = ix >= K ? (ix - K + S) / S : 0, ox1 = min_int(ix / S, OW - 1);
                }
                for (int oy = oy0; oy <= oy1; oy++) {
                    for (int ox = ox0; ox <= ox1; ox++) {
                        float *o = y + ((size_t)oy * OW + ox) * F;
                        const float *wp = W + ((size_t)(iy - S * oy) * K + (ix - S * ox)) * C * F;
                        for (int v = 0; v < nfull; v++) {
                            __m512 acc = _mm512_loadu_ps(o + 16 * v);
                            for (int q = i; q < j; q++)
                                acc = _mm512_fmadd_ps(_mm512_set1_ps(x[idx[q]]),
                                                      _mm512_loadu_ps(wp + (size_t)(idx[q] - base) * F + 16 * v), acc);
                            _mm512_storeu_ps(o + 16 * v, acc);
                        }
                        if (mt) {
                            __m512 acc = _mm512_maskz_loadu_ps(mt, o + 16 * nfull);
                            for (int q = i; q < j; q++)
                                acc = _mm512_fmadd_ps(
                                    _mm512_set1_ps(x[idx[q]]),
                                    _mm512_maskz_loadu_ps(mt, wp + (size_t)(idx[q] - base) * F + 16 * nfull), acc);
                            _mm512_mask_storeu_ps(o + 16 * nfull, mt, acc);
                        }
                    }
                }
            }
            i = j;
        }
    }
}

/* The sparse convolution for the commonest shape, 3x3 windows at stride 1 over rows of
 * at most 16 outputs (the MinAtar net: 8), output-row-stationary: the OWB output
 * positions of one output row (and 16 filters) in registers, and for each of the row's
 * K input rows its nonzero inputs in ascending order, each added to the (at most 3)
 * positions whose windows hold it. An output still sums its bias, then its window's
 * terms in (ky, kx, c) order, so the bits are conv512_sparse's. Which positions an
 * input reaches depends on its column, so a switch on the column picks the unrolled
 * case: the accumulators stay in registers (the input-stationary loop added each term to
 * its output in memory, with loops of varying trip count around it: 1.1 us for a
 * MinAtar Breakout observation on an Intel Xeon, a third of the network's forward). */
#define SPARSE3_MAX_IN 4096
INLINE512 void conv512_sparse3_rows(const NevoLayer *L, const float *W, const float *b, const float *x, float *y,
                                    const int OWB) {
    const int K = 3, C = L->in_c, F = L->out_c, OH = L->out_h, OW = L->out_w, IW = L->in_w, IH = L->in_h;
    int in_dim = IH * IW * C;
    int32_t idx[SPARSE3_MAX_IN + 16];
    uint8_t col[SPARSE3_MAX_IN];  /* each listed input's column */
    uint16_t chan[SPARSE3_MAX_IN]; /* and channel (one division each, not one per visit) */
    int rows[SPARSE3_MAX_IN + 1]; /* the list's entries of input row iy: [rows[iy], rows[iy + 1]) */
    int all_rows, n = 0;
    for (int k0 = 0; k0 < in_dim; k0 += CHUNK)
        n += nonzero512(x, 0, 1, k0, min_int(CHUNK, in_dim - k0), idx + n, &all_rows);
    for (int q = 0, iy = 0; iy <= IH; iy++) {
        while (q < n && idx[q] < iy * IW * C) q++;
        rows[iy] = q;
    }
    for (int q = 0; q < n; q++) {
        int pix = idx[q] / C;
        chan[q] = (uint16_t)(idx[q] - pix * C);
        col[q] = (uint8_t)(pix % IW);
    }
    int nvec = (F + 15) / 16;
    for (int oy = 0; oy < OH; oy++) {
        for (int v = 0; v < nvec; v++) {
            __mmask16 mt = mask16(F - 16 * v);
            __m512 bias = _mm512_maskz_loadu_ps(mt, b + 16 * v), acc[16];
#pragma GCC unroll 16
            for (int ox = 0; ox < OWB; ox++) acc[ox] = bias;
            for (int ky = 0; ky < K; ky++) {
                int iy = oy + ky;
                for (int q = rows[iy]; q < rows[iy + 1]; q++) {
                    int c = chan[q];
                    __m512 xb = _mm512_set1_ps(x[idx[q]]);
                    /* the weights W[ky][kx][c][16 v ...], kx = 0, 1, 2 */
                    const float *w0 = W + ((size_t)(ky * K) * C + c) * F + 16 * v;
                    const float *w1 = w0 + (size_t)C * F, *w2 = w1 + (size_t)C * F;
                    /* column ix feeds positions ix (kx 0), ix - 1 (kx 1), ix - 2 (kx 2) */
                    switch (col[q]) {
/* position OX of the row gets x W[WP] if it exists (OX and OWB are constants here; the
 * clamped index only keeps the dead branches' subscripts in bounds for the compiler) */
#define SPARSE3_ADD(OX, WP)                                                                          \
    if ((OX) >= 0 && (OX) < OWB)                                                                    \
        acc[(OX) < 0 ? 0 : (OX) >= OWB ? 0 : (OX)] =                                                \
            _mm512_fmadd_ps(xb, _mm512_maskz_loadu_ps(mt, (WP)), acc[(OX) < 0 ? 0 : (OX) >= OWB ? 0 : (OX)]);
#define SPARSE3_CASE(IX)              \
    case IX:                          \
        SPARSE3_ADD((IX) - 2, w2)     \
        SPARSE3_ADD((IX) - 1, w1)     \
        SPARSE3_ADD(IX, w0)           \
        break;
                        SPARSE3_CASE(0) SPARSE3_CASE(1) SPARSE3_CASE(2) SPARSE3_CASE(3) SPARSE3_CASE(4)
                        SPARSE3_CASE(5) SPARSE3_CASE(6) SPARSE3_CASE(7) SPARSE3_CASE(8) SPARSE3_CASE(9)
                        SPARSE3_CASE(10) SPARSE3_CASE(11) SPARSE3_CASE(12) SPARSE3_CASE(13) SPARSE3_CASE(14)
                        SPARSE3_CASE(15) SPARSE3_CASE(16) SPARSE3_CASE(17)
#undef SPARSE3_CASE
#undef SPARSE3_ADD
                    }
                }
            }
            float *o = y + (size_t)oy * OW * F + 16 * v;
            for (int ox = 0; ox < OW; ox++) _mm512_mask_storeu_ps(o + (size_t)ox * F, mt, acc[ox]);
        }
    }
}

/* The nonzero inputs decide: each costs the input-stationary loop about a window's
 * worth of loads, FMAs and stores (K^2 / S^2 outputs); the output-stationary one pays
 * for every term, zero or not, at a higher rate. Both compute the same bits. */
T512 static void conv512(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int in_dim = L->in_h * L->in_w * L->in_c, nnz = 0;
    for (int i = 0; i < in_dim; i += 16) {
        __mmask16 lm = mask16(in_dim - i);
        nnz += __builtin_popcount(
            _mm512_mask_cmp_ps_mask(lm, _mm512_maskz_loadu_ps(lm, x + i), _mm512_setzero_ps(), _CMP_NEQ_UQ));
    }
    if ((double)nnz * CONV_SPARSE_COST < (double)L->in_c * L->out_h * L->out_w * L->stride * L->stride) {
        /* its switch covers columns 0-17: rows of up to 18 inputs, 16 outputs */
        if (L->kernel == 3 && L->stride == 1 && L->in_w <= 18 && in_dim <= SPARSE3_MAX_IN)
            L->out_w <= 8 ? conv512_sparse3_rows(L, W, b, x, y, 8) : conv512_sparse3_rows(L, W, b, x, y, 16);
        else
            conv512_sparse(L, W, b, x, y);
    } else {
        conv512_dense(L, W, b, x, y);
    }
}

T512 static void tanh512(float *y, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, tanh512_16(_mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, tanh512_16(_mm512_maskz_loadu_ps(m, y + i)));
    }
}

/* relu512_16 over y (GCC 12 at -O2 leaves the portable loop scalar: 5% of a MinAtar GA
 * run) */
T512 static void relu512(float *y, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, relu512_16(_mm512_maskz_loadu_ps(m, y + i)));
    }
}

/* the AVX2 ones serve this set too (their comments say why) */
static void perturb256(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                       int stream);
static void weighted_sum256(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1);

static const NevoKernels k512 = {"avx512",      dense512,    conv512,       tanh512,      relu512,
                                 dense_lanes512, conv_lanes512, to_lanes512, from_lanes512, dense_nets512,
                                 perturb256,     weighted_sum256, dense_lanes_blocks512,
                                 NULL,           NULL};

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

/* all-ones in the first `remaining` of 8 lanes */
INLINE256 __m256i mask8(int remaining) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The set bits of each 4-bit mask, in ascending order, one per byte. */
static const uint32_t lanes_of_nibble[16] = {
    0,          0x00,       0x01,       0x0100,     0x02,       0x0200,     0x0201,     0x020100,
    0x03,       0x0300,     0x0301,     0x030100,   0x0302,     0x030200,   0x030201,   0x03020100,
};

/* Appends k + the set bits of the 4-bit mask m to idx at *cnt: four indices are
 * written at idx + *cnt, and the count advances by the set ones. */
INLINE256 void list_nibble256(int32_t *idx, int *cnt, int k, unsigned m) {
    __m128i v = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)lanes_of_nibble[m]));
    _mm_storeu_si128((__m128i *)(idx + *cnt), _mm_add_epi32(v, _mm_set1_epi32(k)));
    *cnt += __builtin_popcount(m);
}

/* nonzero512 without a compress instruction, for rows (up to NEVO_NETS_MAX) of X: the
 * indices where any row's input is nonzero, in ascending order, each group of 8 listed
 * without a branch, four at a time from a table; *all_rows when no row has a zero among
 * the listed ones. Nothing is written past idx[n - 1]: the count is at most i when the
 * group at i starts, so its two writes of four end by idx[i + 7]. (The loop it
 * replaces wrote each of the 8 indices and advanced the count by its bit, after a
 * branch on an empty group: 9% of a MinAtar Breakout GA run on an AMD EPYC (Zen 3) was
 * that loop, listing the big layer's 1024 inputs, 20-28% nonzero, every step.) */
INLINE256 int nonzero256_rows(const float *X, size_t xs, int rows, int k0, int n, int32_t *idx, int *all_rows) {
    int cnt = 0, i = 0, all = 1;
    for (; i + 8 <= n; i += 8) {
        unsigned any = 0, every = 0xFFu;
        for (int r = 0; r < rows; r++) {
            unsigned m = (unsigned)_mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_loadu_ps(X + (size_t)r * xs + k0 + i), _mm256_setzero_ps(), _CMP_NEQ_UQ));
            any |= m, every &= m;
        }
        all &= any == every;
        list_nibble256(idx, &cnt, k0 + i, any & 15u);
        list_nibble256(idx, &cnt, k0 + i + 4, any >> 4);
    }
    for (; i < n; i++) {
        int any = 0, every = 1;
        for (int r = 0; r < rows; r++) {
            int nz = X[(size_t)r * xs + k0 + i] != 0.0f; /* NaN != 0 */
            any |= nz, every &= nz;
        }
        all &= any == every;
        idx[cnt] = k0 + i;
        cnt += any;
    }
    *all_rows = all;
    return cnt;
}

/* nonzero256_rows for one row */
INLINE256 int nonzero256(const float *x, int k0, int n, int32_t *idx) {
    int all_rows;
    return nonzero256_rows(x, 0, 1, k0, n, idx, &all_rows);
}

#define LOAD256(p, v, VB, mt) ((v) == (VB)-1 ? _mm256_maskload_ps((p), (mt)) : _mm256_loadu_ps(p))
#define STORE256(p, v, VB, mt, a) \
    ((v) == (VB)-1 ? _mm256_maskstore_ps((p), (mt), (a)) : _mm256_storeu_ps((p), (a)))

/* row512_tile with vectors of 8, up to 8 of them (16 registers). prefetch: the weights
 * come from beyond the cache (dense_streamed), so the lines of the tile's piece of the
 * row listed NEVO_PREFETCH_ROWS ahead are asked for, as the AVX-512 tile does: the
 * gaps that zero inputs leave in the list are what the hardware prefetcher does not
 * follow. On an AMD EPYC (Zen 3), builds with and without it alternately: the
 * MinAtar net's forward at P = 256, B = 1 (every network from memory) faster in 15 of
 * 19 pairs over four games (Breakout's best 12.0-18.3 -> 14.2-19.5 GFLOP/s); a lone
 * network read from cache call after call level; MinAtar GA training, where each
 * worker reads one 530 KB network from L2 and L3 step after step, level within this
 * host's noise (faster in 17 of 28 pairs of runs; that case has since left
 * dense_streamed, nevo_cache_streamed_bytes in kernels.c says why). */
INLINE256 void row256_tile(const float *W, const float *src, const float *x, const int32_t *idx, int n, int out,
                           const int VB, __m256i mt, float *y, int prefetch) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int v = 0; v < VB; v++) acc[v] = LOAD256(src + 8 * v, v, VB, mt);
    for (int i = 0; i < n; i++) {
        int k = idx[i];
        const float *w = W + (size_t)k * out;
        if (prefetch && i + NEVO_PREFETCH_ROWS < n) {
            const float *pw = W + (size_t)idx[i + NEVO_PREFETCH_ROWS] * out;
            const char *line = (const char *)((uintptr_t)pw & ~(uintptr_t)63), *end = (const char *)(pw + 8 * VB);
            for (; line < end; line += 64) _mm_prefetch(line, _MM_HINT_T0);
        }
        __m256 xb = _mm256_set1_ps(x[k]);
#pragma GCC unroll 8
        for (int v = 0; v < VB; v++) acc[v] = _mm256_fmadd_ps(xb, LOAD256(w + 8 * v, v, VB, mt), acc[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < VB; v++) STORE256(y + 8 * v, v, VB, mt, acc[v]);
}

/* One row of a layer wider than a tile (out > 64) in one pass over each listed weight
 * row, the sums in y (in L1: a load, an FMA and a store per vector), where row256
 * makes a pass over every listed row per tile of 64 outputs. The same FMAs in the same
 * order. From memory, the tiles read each row in 256-byte pieces, one piece a pass,
 * which the hardware prefetcher follows poorly; one pass streams the rows whole. On an
 * AMD EPYC (Zen 3), P = 1024 256-256 at B = 1 (330 MB of weights): fastest calls 5.7-6.6
 * -> 8.8-10.1 GFLOP/s, `nevo bench` 0.53-0.66 -> 0.78-0.90 of the read bandwidth; in a
 * bare loop over 256 x 256 layers the tiles read at 0.55 of a plain read, one pass at
 * 0.90.
 *
 * It is taken where it gains:
 * - for weights from memory only (dense_streamed, which nevo_policy_forward calls
 *   where the call's networks outweigh nevo_cache_streamed_bytes): from cache a store
 *   per vector FMA caps one pass near half the FMA peak and a tile can reach it. A lone network whose
 *   weights stay in L2 from call to call (an evaluator worker's one slot) ran 35-38 ->
 *   27-29 GFLOP/s here (P = 1 256-256 at B = 1) when every call took it;
 * - for mostly nonzero inputs (3/4 or more of a chunk's inputs listed), whose rows are
 *   mostly consecutive. Sparse
 *   inputs list scattered rows that no prefetcher follows, and there the load-FMA-store
 *   triples, twice a tile's instructions per line, keep fewer lines in flight: with it
 *   the MinAtar net at B = 1, whose dense layer has 20-28% nonzero inputs, went from
 *   14.7-16.8 to 11.6-15.3 GFLOP/s, and a ReLU MLP (half nonzero) ran level;
 * - for the first row of a call only: the rest find the weights in cache.
 * Asking for rows ahead (1-8 KB, into L1 or L2, or non-temporally) was slower than the
 * hardware prefetcher alone: 7.2-9.4 GFLOP/s against 9.3-9.9 in the same rounds. */
INLINE256 void row256_sums(const float *W, const float *src, const float *x, const int32_t *idx, int n, int out,
                           float *y) {
    int nfull = out / 8;
    __m256i mt = mask8(out - 8 * nfull);
    if (src != y) memcpy(y, src, sizeof(float) * (size_t)out);
    for (int i = 0; i < n; i++) {
        const float *w = W + (size_t)idx[i] * out;
        __m256 xb = _mm256_set1_ps(x[idx[i]]);
#pragma GCC unroll 4
        for (int v = 0; v < nfull; v++)
            _mm256_storeu_ps(y + 8 * v, _mm256_fmadd_ps(xb, _mm256_loadu_ps(w + 8 * v), _mm256_loadu_ps(y + 8 * v)));
        if (out > 8 * nfull)
            _mm256_maskstore_ps(y + 8 * nfull, mt,
                                _mm256_fmadd_ps(xb, _mm256_maskload_ps(w + 8 * nfull, mt),
                                                _mm256_maskload_ps(y + 8 * nfull, mt)));
    }
}

T256 static void row256(const float *W, const float *src, const float *x, const int32_t *idx, int n, int out,
                        float *y, int prefetch) {
    int nvec = (out + 7) / 8;
    for (int v0 = 0; v0 < nvec; v0 += 8) {
        int VB = min_int(8, nvec - v0);
        __m256i mt = mask8(out - 8 * (v0 + VB - 1));
        const float *w = W + 8 * v0, *s = src + 8 * v0;
        float *yt = y + 8 * v0;
        switch (VB) {
#define ROW_CASE(N) \
    case N: row256_tile(w, s, x, idx, n, out, N, mt, yt, prefetch); break;
            ROW_CASE(1) ROW_CASE(2) ROW_CASE(3) ROW_CASE(4) ROW_CASE(5) ROW_CASE(6) ROW_CASE(7) ROW_CASE(8)
#undef ROW_CASE
        }
    }
}

/* Rows one at a time (AVX2 has no masked FMA for a register block that skips each
 * row's own zeros). streamed: the weights come from memory; the first row
 * goes through row256_sums where its rule holds, or else through tiles that prefetch
 * the listed rows (the rows after it find the weights in cache). */
INLINE256 void dense256_rows(const float *W, const float *b, const float *X, size_t xs, int rows, int in, int out,
                             float *Y, size_t ys, const int streamed) {
    int32_t idx[CHUNK + 16];
    for (int r = 0; r < rows; r++) {
        const float *x = X + (size_t)r * xs;
        float *y = Y + (size_t)r * ys;
        if (in <= 0) memcpy(y, b, sizeof(float) * (size_t)out);
        for (int k0 = 0; k0 < in; k0 += CHUNK) {
            int len = min_int(CHUNK, in - k0);
            int n = nonzero256(x, k0, len, idx);
            if (streamed && r == 0 && out > 64 && 4 * n >= 3 * len)
                row256_sums(W, k0 == 0 ? b : y, x, idx, n, out, y);
            else
                row256(W, k0 == 0 ? b : y, x, idx, n, out, y, streamed && r == 0);
        }
    }
}

T256 static void dense256(const float *W, const float *b, const float *X, size_t xs, int rows, int in, int out,
                          float *Y, size_t ys) {
    dense256_rows(W, b, X, xs, rows, in, out, Y, ys, 0);
}

T256 static void dense256_streamed(const float *W, const float *b, const float *X, size_t xs, int rows, int in,
                                   int out, float *Y, size_t ys) {
    dense256_rows(W, b, X, xs, rows, in, out, Y, ys, 1);
}


/* block512_tile's rows of different networks with vectors of 8: R rows x VB vectors
 * (R x VB <= 8 accumulators); no masked FMA, so a row whose input is zero takes its
 * old sums back (blend). */
INLINE256 void nets256_tile(const float *const *W, const float *const *b, int j0, int sums, const float *X,
                            size_t xs, const int32_t *idx, int n, int out, const int R, const int VB,
                            const int masked, __m256i mt, float *Y, size_t ys) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int q = 0; q < R; q++)
#pragma GCC unroll 2
        for (int v = 0; v < VB; v++)
            acc[q][v] = LOAD256((sums ? Y + (size_t)q * ys : b[q]) + j0 + 8 * v, v, VB, mt);
    for (int i = 0; i < n; i++) {
        int k = idx[i];
#pragma GCC unroll 4
        for (int q = 0; q < R; q++) {
            __m256 xb = _mm256_set1_ps(X[(size_t)q * xs + k]);
            const float *w = W[q] + (size_t)k * out + j0;
            __m256 zero = masked ? _mm256_cmp_ps(xb, _mm256_setzero_ps(), _CMP_EQ_OQ) : _mm256_setzero_ps();
#pragma GCC unroll 2
            for (int v = 0; v < VB; v++) {
                __m256 f = _mm256_fmadd_ps(xb, LOAD256(w + 8 * v, v, VB, mt), acc[q][v]);
                acc[q][v] = masked ? _mm256_blendv_ps(f, acc[q][v], zero) : f;
            }
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < R; q++)
#pragma GCC unroll 2
        for (int v = 0; v < VB; v++) STORE256(Y + (size_t)q * ys + j0 + 8 * v, v, VB, mt, acc[q][v]);
}

INLINE256 void nets256_r(const float *const *W, const float *const *b, int sums, const float *X, size_t xs,
                         const int32_t *idx, int n, int out, const int R, int all_rows, float *Y, size_t ys) {
    int nvec = (out + 7) / 8;
    for (int v0 = 0; v0 < nvec; v0 += 2) {
        int VB = min_int(2, nvec - v0), j0 = 8 * v0;
        __m256i mt = mask8(out - 8 * (v0 + VB - 1));
        switch (VB + 2 * !all_rows) {
#define NETS_CASE(V, M) \
    case V + 2 * M: nets256_tile(W, b, j0, sums, X, xs, idx, n, out, R, V, M, mt, Y, ys); break;
            NETS_CASE(1, 0) NETS_CASE(2, 0) NETS_CASE(1, 1) NETS_CASE(2, 1)
#undef NETS_CASE
        }
    }
}

/* Side by side only where a tile of 2 vectors covers whole rows (out <= 16: a lone row
 * has 1-2 sums in flight); wider layers go a row at a time, since a row alone already
 * has up to 8 sums in flight and side-by-side tiles would read each weight row in
 * 64-byte pieces across passes (measured 20% slower from memory at P = 1024 64-64). */
#define NETS256_MAX_OUT 16

T256 static void dense_nets256(const float *const *W, const float *const *b, const float *X, size_t xs, int rows,
                               int in, int out, float *Y, size_t ys) {
    NEVO_ASSERT(rows >= 1 && rows <= NEVO_NETS_MAX);
    if (out > NETS256_MAX_OUT) {
        /* the tiles even in a call from beyond the cache: dense_nets serves layers under
         * 64 KB (policy.c), which dense_streamed's one pass was not measured on */
        for (int q = 0; q < rows; q++) dense256(W[q], b[q], X + (size_t)q * xs, xs, 1, in, out, Y + (size_t)q * ys, ys);
        return;
    }
    int32_t idx[CHUNK + 16];
    if (in <= 0)
        for (int q = 0; q < rows; q++) memcpy(Y + (size_t)q * ys, b[q], sizeof(float) * (size_t)out);
    for (int k0 = 0; k0 < in; k0 += CHUNK) {
        int all_rows;
        int n = nonzero256_rows(X, xs, rows, k0, min_int(CHUNK, in - k0), idx, &all_rows);
        int sums = k0 > 0;
        switch (rows) {
        case 1: nets256_r(W, b, sums, X, xs, idx, n, out, 1, all_rows, Y, ys); break;
        case 2: nets256_r(W, b, sums, X, xs, idx, n, out, 2, all_rows, Y, ys); break;
        case 3: nets256_r(W, b, sums, X, xs, idx, n, out, 3, all_rows, Y, ys); break;
        case 4: nets256_r(W, b, sums, X, xs, idx, n, out, 4, all_rows, Y, ys); break;
        }
    }
}

/* conv512_block with vectors of 8, PB positions x VB vectors; AVX2 has no masked FMA,
 * so a position whose input is zero takes its old sums back (blend). */
INLINE256 void conv256_block(const NevoLayer *L, const float *W, const float *b, const float *x, float *y, int oy,
                             int ox0, const int PB, const int VB, int f0) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    const __m256 zero = _mm256_setzero_ps();
    __m256i mt = mask8(F - f0 - 8 * (VB - 1));
    __m256 acc[4][2];
#pragma GCC unroll 2
    for (int v = 0; v < VB; v++) {
        __m256 bv = LOAD256(b + f0 + 8 * v, v, VB, mt);
#pragma GCC unroll 4
        for (int p = 0; p < PB; p++) acc[p][v] = bv;
    }
    for (int ky = 0; ky < K; ky++) {
        for (int kx = 0; kx < K; kx++) {
            const float *xrow = x + ((size_t)(oy * S + ky) * L->in_w + (size_t)(ox0 * S + kx)) * C;
            const float *wp = W + ((size_t)(ky * K + kx) * C) * F + f0;
            for (int c = 0; c < C; c++) {
                __m256 wv[2];
#pragma GCC unroll 2
                for (int v = 0; v < VB; v++) wv[v] = LOAD256(wp + (size_t)c * F + 8 * v, v, VB, mt);
#pragma GCC unroll 4
                for (int p = 0; p < PB; p++) {
                    __m256 xb = _mm256_set1_ps(xrow[(size_t)p * S * C + c]);
                    __m256 nz = _mm256_cmp_ps(xb, zero, _CMP_NEQ_UQ);
#pragma GCC unroll 2
                    for (int v = 0; v < VB; v++)
                        acc[p][v] = _mm256_blendv_ps(acc[p][v], _mm256_fmadd_ps(xb, wv[v], acc[p][v]), nz);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < PB; p++)
#pragma GCC unroll 2
        for (int v = 0; v < VB; v++)
            STORE256(y + ((size_t)oy * L->out_w + ox0 + p) * F + f0 + 8 * v, v, VB, mt, acc[p][v]);
}

INLINE256 void conv256_row(const NevoLayer *L, const float *W, const float *b, const float *x, float *y, int oy,
                           const int VB, int f0) {
    int ox = 0;
    for (; ox + 4 <= L->out_w; ox += 4) conv256_block(L, W, b, x, y, oy, ox, 4, VB, f0);
    if (ox + 2 <= L->out_w) conv256_block(L, W, b, x, y, oy, ox, 2, VB, f0), ox += 2;
    if (ox < L->out_w) conv256_block(L, W, b, x, y, oy, ox, 1, VB, f0);
}

T256 static void conv256_dense(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    for (int oy = 0; oy < L->out_h; oy++) {
        int f0 = 0;
        for (; f0 + 8 < L->out_c; f0 += 16) conv256_row(L, W, b, x, y, oy, 2, f0);
        if (f0 < L->out_c) conv256_row(L, W, b, x, y, oy, 1, f0);
    }
}

/* conv512_sparse with vectors of 8 */
T256 static void conv256_sparse(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c, OH = L->out_h, OW = L->out_w, IW = L->in_w;
    int nfull = F / 8;
    const __m256i mt = mask8(F - 8 * nfull);
    for (int p = 0; p < OH * OW; p++) {
        float *o = y + (size_t)p * F;
        for (int v = 0; v < nfull; v++) _mm256_storeu_ps(o + 8 * v, _mm256_loadu_ps(b + 8 * v));
        if (F > 8 * nfull) _mm256_maskstore_ps(o + 8 * nfull, mt, _mm256_maskload_ps(b + 8 * nfull, mt));
    }
    int used_h = (OH - 1) * S + K, used_w = (OW - 1) * S + K;
    int in_dim = L->in_h * IW * C;
    int32_t idx[CHUNK + 16];
    for (int k0 = 0; k0 < in_dim; k0 += CHUNK) {
        int n = nonzero256(x, k0, min_int(CHUNK, in_dim - k0), idx);
        for (int i = 0; i < n;) {
            /* the run idx[i, j) of one pixel's nonzero channels */
            int pix = idx[i] / C, base = pix * C;
            int j = i + 1;
            while (j < n && idx[j] < base + C) j++;
            int iy = pix / IW, ix = pix - iy * IW;
            if (iy < used_h && ix < used_w) {
                /* the outputs whose windows hold it: ky = iy - S oy in [0, K), oy in [0, OH) */
                int oy0, oy1, ox0, ox1;
                if (S == 1) { /* the common case, without divisions */
                    oy0 = iy >= K ? iy - K + 1 : 0, oy1 = min_int(iy, OH - 1);
                    ox0 = ix >= K ? ix - K + 1 : 0, ox1 = min_int(ix, OW - 1);
                } else {
                    oy0 = iy >= K ? (iy - K + S) / S : 0, oy1 = min_int(iy / S, OH - 1);
                    ox0 = ix >= K ? (ix - K + S) / S : 0, ox1 = min_int(ix / S, OW - 1);
                }
                for (int oy = oy0; oy <= oy1; oy++) {
                    for (int ox = ox0; ox <= ox1; ox++) {
                        float *o = y + ((size_t)oy * OW + ox) * F;
                        const float *wp = W + ((size_t)(iy - S * oy) * K + (ix - S * ox)) * C * F;
                        for (int v = 0; v < nfull; v++) {
                            __m256 acc = _mm256_loadu_ps(o + 8 * v);
                            for (int q = i; q < j; q++)
                                acc = _mm256_fmadd_ps(_mm256_set1_ps(x[idx[q]]),
                                                      _mm256_loadu_ps(wp + (size_t)(idx[q] - base) * F + 8 * v), acc);
                            _mm256_storeu_ps(o + 8 * v, acc);
                        }
                        if (F > 8 * nfull) {
                            __m256 acc = _mm256_maskload_ps(o + 8 * nfull, mt);
                            for (int q = i; q < j; q++)
                                acc = _mm256_fmadd_ps(
                                    _mm256_set1_ps(x[idx[q]]),
                                    _mm256_maskload_ps(wp + (size_t)(idx[q] - base) * F + 8 * nfull, mt), acc);
                            _mm256_maskstore_ps(o + 8 * nfull, mt, acc);
                        }
                    }
                }
            }
            i = j;
        }
    }
}

/* conv256_sparse for 3x3 windows at stride 1 and up to 4 vectors of filters (VB, a
 * constant here): the sums in a padded copy of the output, each position VB whole
 * vectors, with a border of two positions on each side that takes the terms falling
 * outside (and is dropped), so each nonzero input's 9 positions are straight-line code
 * instead of loops of varying trip count around every term. The terms reach each
 * output in the same order, so the bits are conv256_sparse's. On an AMD EPYC (Zen 3),
 * the MinAtar net's convolution over 200 observations of an episode, fastest call of
 * each: Breakout 1.39 -> 0.89 us, Space Invaders 1.53 -> 1.26-1.28, Freeway 1.00 ->
 * 0.72-0.74, Asterix 0.51-0.69 -> 0.44-0.61, Seaquest 0.86-1.09 -> 0.73-0.95 (ten
 * channels: listing its 1000 inputs weighs more than its 12 nonzero ones). A first
 * version that copied out with a masked store for the last vector, full or not, lost
 * 0.2 us to it (about 10 cycles a store, the next layer reading them at once). */
#define CONV3_PAD_FLOATS 4096
INLINE256 void conv256_sparse3_padded(const NevoLayer *L, const float *W, const float *b, const float *x, float *y,
                                      const int VB) {
    const int C = L->in_c, F = L->out_c, OH = L->out_h, OW = L->out_w, IW = L->in_w;
    const int PW = OW + 4, PH = OH + 4, FP = 8 * VB; /* floats a padded position */
    float P[CONV3_PAD_FLOATS] __attribute__((aligned(32)));
    const __m256i mt = mask8(F - 8 * (VB - 1));
    const int part = F < FP;
    __m256 bias[4];
#pragma GCC unroll 4
    for (int v = 0; v < VB; v++) bias[v] = LOAD256(b + 8 * v, v, VB, mt);
    /* the border too: its sums are dropped, but uninitialised floats could be subnormal */
    for (int p = 0; p < PH * PW * FP; p += 8) _mm256_store_ps(P + p, _mm256_setzero_ps());
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++)
#pragma GCC unroll 4
            for (int v = 0; v < VB; v++) _mm256_store_ps(P + ((size_t)(oy + 2) * PW + ox + 2) * FP + 8 * v, bias[v]);
    /* at stride 1, every input row and column lies in some window (in_h = OH + 2) */
    int in_dim = L->in_h * IW * C;
    int32_t idx[CHUNK + 16];
    for (int k0 = 0; k0 < in_dim; k0 += CHUNK) {
        int n = nonzero256(x, k0, min_int(CHUNK, in_dim - k0), idx);
        for (int i = 0; i < n; i++) {
            int pix = idx[i] / C, c = idx[i] - pix * C;
            int iy = pix / IW, ix = pix - iy * IW;
            __m256 xb = _mm256_set1_ps(x[idx[i]]);
            /* output (iy - ky, ix - kx) gets the term of window position (ky, kx) */
            float *o0 = P + ((size_t)(iy + 2) * PW + (ix + 2)) * FP;
            const float *w0 = W + (size_t)c * F;
#pragma GCC unroll 3
            for (int ky = 0; ky < 3; ky++)
#pragma GCC unroll 3
                for (int kx = 0; kx < 3; kx++) {
                    float *o = o0 - ((size_t)ky * PW + kx) * FP;
                    const float *w = w0 + (size_t)(ky * 3 + kx) * C * F;
#pragma GCC unroll 4
                    for (int v = 0; v < VB; v++)
                        _mm256_store_ps(o + 8 * v,
                                        _mm256_fmadd_ps(xb, LOAD256(w + 8 * v, v, VB, mt), _mm256_load_ps(o + 8 * v)));
                }
        }
    }
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
            const float *o = P + ((size_t)(oy + 2) * PW + ox + 2) * FP;
            float *d = y + ((size_t)oy * OW + ox) * F;
#pragma GCC unroll 4
            for (int v = 0; v < VB; v++) {
                if (v == VB - 1 && part)
                    _mm256_maskstore_ps(d + 8 * v, mt, _mm256_load_ps(o + 8 * v));
                else
                    _mm256_storeu_ps(d + 8 * v, _mm256_load_ps(o + 8 * v));
            }
        }
}

/* conv512's choice, counted without a mask register */
T256 static void conv256(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int in_dim = L->in_h * L->in_w * L->in_c, nnz = 0, i = 0;
    for (; i + 8 <= in_dim; i += 8)
        nnz += __builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    for (; i < in_dim; i++) nnz += x[i] != 0.0f;
    if ((double)nnz * CONV_SPARSE_COST < (double)L->in_c * L->out_h * L->out_w * L->stride * L->stride) {
        int vb = (L->out_c + 7) / 8;
        int padded = (L->out_h + 4) * (L->out_w + 4) * 8 * vb;
        if (L->kernel == 3 && L->stride == 1 && vb <= 4 && padded <= CONV3_PAD_FLOATS) {
            switch (vb) {
            case 1: conv256_sparse3_padded(L, W, b, x, y, 1); break;
            case 2: conv256_sparse3_padded(L, W, b, x, y, 2); break;
            case 3: conv256_sparse3_padded(L, W, b, x, y, 3); break;
            default: conv256_sparse3_padded(L, W, b, x, y, 4); break;
            }
        } else {
            conv256_sparse(L, W, b, x, y);
        }
    } else {
        conv256_dense(L, W, b, x, y);
    }
}

/* nevo_tanhf on U vectors of 8 floats in place, operation for operation but on
 * min(|x|, 9) instead of its clamp branch: the formula gives exactly 1 at |x| = 9
 * (e^18 - 1 comes out as 65659968, where floats are 4 apart, and adding 2 is a tie
 * that rounds back to it, its significand being even), so every |x| >= 9 gives +-1 as
 * the branch does, and vminps returns its second operand, |x|, where that
 * is NaN, so a NaN goes through the arithmetic and stays NaN, with the bits of a quiet
 * NaN (a signalling NaN comes out quieted, as from any arithmetic). Checked against
 * nevo_tanhf over every float: the same bits for every number and NaN for every NaN.
 * The compare-and-blend clamp this replaces made the function 1.15-1.25x slower on an
 * AMD EPYC (Zen 3).
 *
 * The U vectors go step by step side by side: one tanh is a chain of about 25
 * dependent operations, ~70 cycles, and with one vector at a time the out-of-order
 * window held about 4 of them (15-19 cycles a vector; the operations alone need 7). */
#define TANH256_STEP(expr) _Pragma("GCC unroll 4") for (int u = 0; u < U; u++) { expr; }
INLINE256 void tanh256_n(__m256 *x, const int U) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax[4], z[4], t[4], n[4], r[4], h[4], p[4], em1[4];
    TANH256_STEP(ax[u] = _mm256_min_ps(_mm256_set1_ps(NEVO_TANH_CLAMP), _mm256_andnot_ps(sign, x[u])))
    TANH256_STEP(z[u] = _mm256_add_ps(ax[u], ax[u]))
    TANH256_STEP(t[u] = _mm256_fmadd_ps(z[u], _mm256_set1_ps(NEVO_TANH_INV_LN2), _mm256_set1_ps(NEVO_TANH_SHIFTER)))
    TANH256_STEP(n[u] = _mm256_sub_ps(t[u], _mm256_set1_ps(NEVO_TANH_SHIFTER)))
    TANH256_STEP(r[u] = _mm256_fnmadd_ps(n[u], _mm256_set1_ps(NEVO_TANH_LN2_HI), z[u]))
    TANH256_STEP(r[u] = _mm256_fnmadd_ps(n[u], _mm256_set1_ps(NEVO_TANH_LN2_LO), r[u]))
    TANH256_STEP(h[u] = _mm256_fmadd_ps(_mm256_set1_ps(NEVO_TANH_H6), r[u], _mm256_set1_ps(NEVO_TANH_H5)))
    TANH256_STEP(h[u] = _mm256_fmadd_ps(h[u], r[u], _mm256_set1_ps(NEVO_TANH_H4)))
    TANH256_STEP(h[u] = _mm256_fmadd_ps(h[u], r[u], _mm256_set1_ps(NEVO_TANH_H3)))
    TANH256_STEP(h[u] = _mm256_fmadd_ps(h[u], r[u], _mm256_set1_ps(NEVO_TANH_H2)))
    TANH256_STEP(h[u] = _mm256_fmadd_ps(h[u], r[u], _mm256_set1_ps(NEVO_TANH_H1)))
    TANH256_STEP(h[u] = _mm256_fmadd_ps(h[u], r[u], _mm256_set1_ps(NEVO_TANH_H0)))
    TANH256_STEP(p[u] = _mm256_fmadd_ps(_mm256_mul_ps(r[u], r[u]), h[u], r[u])) /* e^r - 1 */
    /* 2^n from n in t's low mantissa bits, then e^z - 1 = 2^n p + (2^n - 1) */
    TANH256_STEP(__m256 s = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(t[u]), 23),
                                                                 _mm256_set1_epi32(0x3F800000)));
                 em1[u] = _mm256_fmadd_ps(s, p[u], _mm256_sub_ps(s, _mm256_set1_ps(1.0f))))
    TANH256_STEP(x[u] = _mm256_or_ps(_mm256_div_ps(em1[u], _mm256_add_ps(em1[u], _mm256_set1_ps(2.0f))),
                                     _mm256_and_ps(sign, x[u])))
}
#undef TANH256_STEP

T256 static void tanh256(float *y, int n) {
    int i = 0;
    for (; i + 32 <= n; i += 32) { /* 4 side by side: 2.0-2.3 Gelem/s, against 1.6-1.9 for 2 and 1.8-2.2 for 3 */
        __m256 v[4];
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) v[u] = _mm256_loadu_ps(y + i + 8 * u);
        tanh256_n(v, 4);
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) _mm256_storeu_ps(y + i + 8 * u, v[u]);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(y + i);
        tanh256_n(&v, 1);
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) y[i] = nevo_tanhf(y[i]);
}

/* relu512_16 with vectors of 8: the negative lanes blended to +0 (-0 and NaN stay) */
INLINE256 __m256 relu256_8(__m256 y) {
    return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_LT_OQ));
}

T256 static void relu256(float *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, relu256_8(_mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i];
}

/* ---------------------------------------------------------------- AVX2: the lanes layout */

/* lanes512's layout with vectors of 8: input k of the 16 rows is two vectors, rows 0-7 at
 * XT + 16 k and rows 8-15 at XT + 16 k + 8, and output j's sums are two accumulators, so
 * a term is W[k, j] broadcast and two FMAs. A tile of LANES256_TW outputs holds 12
 * accumulators, the two input vectors and the broadcast weight: 15 of the 16 registers.
 *
 * AVX2 has no masked FMA. A blend after each FMA (what the row layout's blocks do)
 * would cost as much again as the FMA, so a row whose input is zero gets the plain FMA,
 * its sum plus x w = +-0, and the tile's results are checked instead:
 * - adding +-0 leaves a sum as it was unless the sum is -0 (it may become +0) or the
 *   weight is infinite or NaN (NaN);
 * - once the plain chain and the skipping chain differ only in the sign of a zero sum,
 *   the next term with a nonzero product rounds the same exact value in both, and they
 *   agree again; a NaN stays NaN;
 * so a result that is neither zero nor NaN is the skipping chain's, bit for bit. A row
 * with no nonzero input among the tile's terms skips them all: its result is its
 * starting value. If any other row ends at a zero or a NaN, the tile runs again with a
 * blend after each FMA (lanes256_term's masked form), which is the skipping chain. */
#define LANES256_TW 6

/* the 16 rows (bit r) of input x (two vectors) that are nonzero; NaN counts as nonzero */
INLINE256 unsigned lanes256_nonzero(const float *x) {
    const __m256 zero = _mm256_setzero_ps();
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x), zero, _CMP_NEQ_UQ)) |
           (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + 8), zero, _CMP_NEQ_UQ)) << 8;
}

/* One term for JB outputs: input x (16 rows) against the weights at w (the tile's first
 * output). masked: a row whose input is zero keeps its sums (blend). */
INLINE256 void lanes256_term(__m256 *acc, const int JB, const float *w, const float *x, const int masked) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
    __m256 nz0 = zero, nz1 = zero;
    if (masked) nz0 = _mm256_cmp_ps(x0, zero, _CMP_NEQ_UQ), nz1 = _mm256_cmp_ps(x1, zero, _CMP_NEQ_UQ);
#pragma GCC unroll 8
    for (int j = 0; j < JB; j++) {
        __m256 wj = _mm256_broadcast_ss(w + j);
        __m256 f0 = _mm256_fmadd_ps(x0, wj, acc[2 * j]), f1 = _mm256_fmadd_ps(x1, wj, acc[2 * j + 1]);
        acc[2 * j] = masked ? _mm256_blendv_ps(acc[2 * j], f0, nz0) : f0;
        acc[2 * j + 1] = masked ? _mm256_blendv_ps(acc[2 * j + 1], f1, nz1) : f1;
    }
}

/* lanes512_terms_from with vectors of 8: the n inputs idx lists (listed), or every input
 * k < n, input k's weights at W + k ws, and npf lines from pf prefetched over them. */
INLINE256 void lanes256_terms_from(__m256 *acc, const int JB, const float *W, size_t ws, const float *X, int n,
                                   const uint16_t *idx, const char *pf, int npf, const int listed, const int masked) {
#define LANES256_TERM(i)                                                                   \
    do {                                                                                   \
        size_t k_ = listed ? idx[i] : (size_t)(i);                                         \
        lanes256_term(acc, JB, W + k_ * ws, X + 16 * k_, masked);                          \
    } while (0)
    int i = 0;
    if (pf) {
        const int per = (npf + n - 1) / n;      /* lines per term */
        const int with = (npf + per - 1) / per; /* terms that prefetch */
        for (; i < with; i++) {
            int l0 = i * per, l1 = l0 + per < npf ? l0 + per : npf;
            for (int l = l0; l < l1; l++) _mm_prefetch(pf + 64 * (size_t)l, _MM_HINT_T1);
            LANES256_TERM(i);
        }
    }
    for (; i < n; i++) LANES256_TERM(i);
#undef LANES256_TERM
}

INLINE256 void lanes256_terms(__m256 *acc, const int JB, const float *W, size_t ws, const float *X, int n,
                              const uint16_t *idx, const char *pf, int npf, const int masked) {
    if (idx)
        lanes256_terms_from(acc, JB, W, ws, X, n, idx, pf, npf, 1, masked);
    else
        lanes256_terms_from(acc, JB, W, ws, X, n, NULL, pf, npf, 0, masked);
}

/* lanes512_list for inputs of two vectors, without a branch on the data. Also *lanes,
 * the rows with a nonzero input among those listed, and *partial, whether a listed
 * input is zero in some row (the tile's results are then checked). */
INLINE256 int lanes256_list(const float *X, int n, uint16_t *idx, int *any_zero, int *partial, unsigned *lanes) {
    unsigned every = 0xFFFFu, some = 0, part = 0;
    int c = 0;
    for (int k = 0; k < n; k++) {
        unsigned m = lanes256_nonzero(X + 16 * (size_t)k);
        every &= m;
        some |= m;
        part |= (m != 0) & (m != 0xFFFFu);
        idx[c] = (uint16_t)k;
        c += m != 0;
    }
    *any_zero = every != 0xFFFFu;
    *partial = (int)part;
    *lanes = some;
    return c;
}

/* Each output's starting sums: its bias, or (sums) the partial sums at Y. */
INLINE256 void lanes256_start(__m256 *acc, const int JB, const float *b, int sums, const float *Y) {
#pragma GCC unroll 8
    for (int j = 0; j < JB; j++) {
        acc[2 * j] = sums ? _mm256_loadu_ps(Y + 16 * (size_t)j) : _mm256_broadcast_ss(b + j);
        acc[2 * j + 1] = sums ? _mm256_loadu_ps(Y + 16 * (size_t)j + 8) : _mm256_broadcast_ss(b + j);
    }
}

/* the rows (bit r) with a zero or NaN result in some output */
INLINE256 unsigned lanes256_zero_or_nan(const __m256 *acc, const int JB) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 lo = zero, hi = zero;
#pragma GCC unroll 8
    for (int j = 0; j < JB; j++) {
        lo = _mm256_or_ps(lo, _mm256_cmp_ps(acc[2 * j], zero, _CMP_EQ_UQ));
        hi = _mm256_or_ps(hi, _mm256_cmp_ps(acc[2 * j + 1], zero, _CMP_EQ_UQ));
    }
    return (unsigned)_mm256_movemask_ps(lo) | (unsigned)_mm256_movemask_ps(hi) << 8;
}

/* The rows not in `lanes` (none of their terms counted) take their starting sums. */
INLINE256 void lanes256_keep_start(__m256 *acc, const int JB, const float *b, int sums, const float *Y,
                                   unsigned lanes) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256 live0 = _mm256_castsi256_ps(
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)(lanes & 0xFFu)), bit), bit));
    __m256 live1 = _mm256_castsi256_ps(
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)(lanes >> 8)), bit), bit));
    __m256 start[2 * LANES256_TW];
    lanes256_start(start, JB, b, sums, Y);
#pragma GCC unroll 8
    for (int j = 0; j < JB; j++) {
        acc[2 * j] = _mm256_blendv_ps(start[2 * j], acc[2 * j], live0);
        acc[2 * j + 1] = _mm256_blendv_ps(start[2 * j + 1], acc[2 * j + 1], live1);
    }
}

/* The JB outputs of the 16 rows at YT, the relu applied to the sums in registers. A
 * tanh is left to the layer's end, as one pass of tanh256 over its output: applied
 * here, its temporaries beside the tile's 12 sums overflowed the 16 registers (the
 * 64-wide MLP at B = 16 ran 1.08x faster with the pass, the 256-wide 1.035x). */
INLINE256 void lanes256_store(__m256 *acc, const int JB, NevoActivation act, float *YT) {
    if (act == NEVO_ACT_RELU) {
#pragma GCC unroll 16
        for (int i = 0; i < 2 * JB; i++) acc[i] = relu256_8(acc[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 2 * JB; i++) _mm256_storeu_ps(YT + 8 * (size_t)i, acc[i]);
}

/* lanes512_tile for one block: JB outputs over the n terms (those idx lists, if not
 * NULL), from the bias b or (sums) the partial sums in Y. check: some term's input is
 * zero in some row, whose lanes (rows with a nonzero input among the terms) are in
 * `lanes`; the results are then settled as the section's comment says. */
INLINE256 void lanes256_tile(const float *W, const float *b, int sums, const float *X, int n, const uint16_t *idx,
                             int out, const int JB, int check, unsigned lanes, NevoActivation act, const char *pf,
                             int npf, float *Y) {
    __m256 acc[2 * LANES256_TW];
    lanes256_start(acc, JB, b, sums, Y);
    if (n > 0) {
        lanes256_terms(acc, JB, W, (size_t)out, X, n, idx, pf, npf, 0);
    } else {
        for (int l = 0; l < npf; l++) _mm_prefetch(pf + 64 * (size_t)l, _MM_HINT_T1);
    }
    if (check) { /* (some listed input is zero in some row: n > 0) */
        unsigned bad = lanes256_zero_or_nan(acc, JB);
        if (bad & lanes) {
            lanes256_start(acc, JB, b, sums, Y);
            lanes256_terms(acc, JB, W, (size_t)out, X, n, idx, NULL, 0, 1);
        } else if (bad) {
            lanes256_keep_start(acc, JB, b, sums, Y, lanes);
        }
    }
    lanes256_store(acc, JB, act, Y);
}

/* dense_lanes512_blocks for one block: chunks of LANES_CHUNK_BYTES of weights (16 KB
 * and 8 KB were no faster here, with this CPU's 32 KB of L1), and in
 * dense_lanes256_streamed (weights from memory) each tile prefetching its share of the
 * next chunk's lines. There the last chunk prefetches what
 * follows the layer in memory, as much as itself and at least LANES256_PAST_BYTES: the
 * bias and the next layer, or after the last layer the next network where the
 * population lies in one block (a prefetch past the end of a buffer does not fault).
 * On an AMD EPYC (Zen 3, 512 KB of L2), B = 16, minimum times of many calls: P = 1024
 * 64-64 (34.5 MB) 35 -> 44-48 GFLOP/s, P = 256 64-64 (8.6 MB) 34-43 -> 40-53, P = 16
 * 64-64 (0.5 MB, which no longer streams) 60.5 -> 58.4; 16 KB past every layer, or only
 * as much as each last chunk, did no better over the 64- and 256-wide cases together. */
#define LANES256_PAST_BYTES (16 * 1024)

/* prefetch: the prefetches above, for weights from memory (dense_lanes_streamed).
 * From L2 they only take load slots and L1 lines from the tiles: 16 rows through one
 * 256 x 256 layer in L2, on an AMD EPYC (Zen 3), 78-80 GFLOP/s with them against 86-88
 * without (fastest calls; median calls 52-54 against 63), and a layer from memory 76
 * with them against 54 without. */
INLINE256 void dense_lanes256_with(const float *W, const float *b, const float *XT, int in, int out,
                                   NevoActivation act, float *YT, const int prefetch) {
    int kc = lanes_chunk_inputs(in, out);
    uint16_t idx[LANES_LIST_MAX];
    int tiles = (out + LANES256_TW - 1) / LANES256_TW;
    for (int k0 = 0; k0 < in; k0 += kc) {
        int n = min_int(kc, in - k0);
        int sums = k0 > 0;
        NevoActivation a = k0 + n >= in ? act : NEVO_ACT_NONE;
        const float *wk = W + (size_t)k0 * out, *xk = XT + 16 * (size_t)k0;
        /* the chunk's inputs nonzero in some row, if any row has a zero (inputs zero in
         * every row are skipped whole), else every input */
        int any_zero, partial;
        unsigned lanes;
        int listed = lanes256_list(xk, n, idx, &any_zero, &partial, &lanes);
        const uint16_t *ix = any_zero ? idx : NULL;
        int terms = any_zero ? listed : n;
        const char *next = (const char *)((uintptr_t)(wk + (size_t)n * out) & ~(uintptr_t)63);
        size_t lines = ((size_t)n * out * sizeof(float) > LANES256_PAST_BYTES ? (size_t)n * out * sizeof(float)
                                                                             : LANES256_PAST_BYTES) / 64;
        if (k0 + n < in)
            lines = (size_t)((const char *)(wk + (size_t)min_int(2 * kc, in - k0) * out) - next + 63) / 64;
        if (!prefetch) lines = 0;
        for (int j0 = 0, t = 0; j0 < out; j0 += LANES256_TW, t++) {
            int JB = min_int(LANES256_TW, out - j0);
            size_t l0 = lines * t / tiles, l1 = lines * (t + 1) / tiles;
            const char *pf = l1 > l0 ? next + 64 * l0 : NULL;
            int npf = (int)(l1 - l0);
            const float *w = wk + j0, *bj = b + j0;
            float *y = YT + 16 * (size_t)j0;
            switch (JB) {
#define LANES256_CASE(N) \
    case N: lanes256_tile(w, bj, sums, xk, terms, ix, out, N, partial, lanes, a, pf, npf, y); break;
                LANES256_CASE(1) LANES256_CASE(2) LANES256_CASE(3) LANES256_CASE(4) LANES256_CASE(5) LANES256_CASE(6)
#undef LANES256_CASE
            }
        }
    }
    if (act == NEVO_ACT_TANH) tanh256(YT, 16 * out);
}

T256 static void dense_lanes256(const float *W, const float *b, const float *XT, int in, int out,
                                NevoActivation act, float *YT) {
    dense_lanes256_with(W, b, XT, in, out, act, YT, 0);
}

T256 static void dense_lanes256_streamed(const float *W, const float *b, const float *XT, int in, int out,
                                         NevoActivation act, float *YT) {
    dense_lanes256_with(W, b, XT, in, out, act, YT, 1);
}

/* Transposes the 8 x 8 block v (vector r = row r) in place. */
INLINE256 void transpose8_256(__m256 v[8]) {
    __m256 t[8], s[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 */
        t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]); /* a2 b2 a3 b3 | a6 b6 a7 b7 */
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) { /* rows 4i .. 4i + 3 */
        s[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));     /* col 0 | 4 */
        s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));     /* col 1 | 5 */
        s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0)); /* col 2 | 6 */
        s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2)); /* col 3 | 7 */
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        v[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
        v[c + 4] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
    }
}

/* Rows -> lanes: XT[16 k + r] = X[r xs + k] for the 16 rows, k < in; 8 x 8 blocks. */
T256 static void to_lanes256(const float *X, size_t xs, int in, float *XT) {
    for (int k0 = 0; k0 < in; k0 += 8) {
        __m256i m = mask8(in - k0);
        for (int h = 0; h < 2; h++) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++)
                v[r] = k0 + 8 <= in ? _mm256_loadu_ps(X + (size_t)(8 * h + r) * xs + k0)
                                    : _mm256_maskload_ps(X + (size_t)(8 * h + r) * xs + k0, m);
            transpose8_256(v);
            for (int c = 0; c < 8 && k0 + c < in; c++) _mm256_storeu_ps(XT + 16 * (size_t)(k0 + c) + 8 * h, v[c]);
        }
    }
}

/* Lanes -> rows: Y[r ys + o] = YT[16 o + r] for the 16 rows, o < out. */
T256 static void from_lanes256(const float *YT, int out, float *Y, size_t ys) {
    for (int o0 = 0; o0 < out; o0 += 8) {
        __m256i m = mask8(out - o0);
        for (int h = 0; h < 2; h++) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++)
                v[c] = o0 + c < out ? _mm256_loadu_ps(YT + 16 * (size_t)(o0 + c) + 8 * h) : _mm256_setzero_ps();
            transpose8_256(v);
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) _mm256_maskstore_ps(Y + (size_t)(8 * h + r) * ys + o0, m, v[r]);
        }
    }
}

/* conv_lanes512's convolution with vectors of 8, tiles of LANES256_TW filters. */

/* whether some row has a zero input */
INLINE256 int lanes256_any_zero(const float *XT, int in) {
    unsigned every = 0xFFFFu;
    for (int k = 0; k < in; k++) every &= lanes256_nonzero(XT + 16 * (size_t)k);
    return every != 0xFFFFu;
}

/* One output position, JB filters, every input of its window (no row has a zero), or,
 * masked, each window row's inputs nonzero in some row, listed here in pieces of
 * LANES_CONV_LIST, with blends (layers too big for conv_lanes256_rows' lists). */
INLINE256 void conv_lanes256_pos(const NevoLayer *L, const float *W, const float *b, const float *x, const int JB,
                                 const int masked, NevoActivation act, float *y) {
    int K = L->kernel, F = L->out_c, KC = L->kernel * L->in_c;
    size_t row = 16 * (size_t)L->in_w * L->in_c;
    __m256 acc[2 * LANES256_TW];
    lanes256_start(acc, JB, b, 0, NULL);
    for (int ky = 0; ky < K; ky++) {
        const float *wr = W + (size_t)ky * KC * F, *xr = x + ky * row;
        if (!masked) {
            lanes256_terms(acc, JB, wr, (size_t)F, xr, KC, NULL, NULL, 0, 0);
            continue;
        }
        uint16_t idx[LANES_CONV_LIST];
        for (int t0 = 0; t0 < KC; t0 += LANES_CONV_LIST) {
            int any_zero, partial;
            unsigned lanes;
            const float *xt = xr + 16 * (size_t)t0;
            int n = lanes256_list(xt, min_int(LANES_CONV_LIST, KC - t0), idx, &any_zero, &partial, &lanes);
            lanes256_terms(acc, JB, wr + (size_t)t0 * F, (size_t)F, xt, n, idx, NULL, 0, 1);
        }
    }
    lanes256_store(acc, JB, act, y);
}

/* The terms of output (oy, ox)'s window from conv_lanes512_rows' lists (list, start), JB
 * filters from W (the tile's first), or with `lanes` not NULL, only the rows with a
 * nonzero input among them, into *lanes. */
INLINE256 void conv_lanes256_window(__m256 *acc, const NevoLayer *L, const float *W, const float *XT,
                                    const uint16_t *list, const uint16_t *start, int oy, int ox, const int JB,
                                    const int masked, unsigned *lanes) {
    int S = L->stride, K = L->kernel, C = L->in_c, F = L->out_c, KC = K * C, rowlen = L->in_w * C;
    int koff = ox * S * C; /* the window's first input in its rows */
    unsigned some = 0;
    for (int ky = 0; ky < K; ky++) {
        int iy = oy * S + ky;
        const uint16_t *lr = list + (size_t)iy * rowlen, *sr = start + (size_t)iy * (L->in_w + 1);
        const float *xw = XT + 16 * ((size_t)iy * rowlen + koff); /* input (iy, ox S, 0) */
        const float *wr = W + (size_t)ky * KC * F;
        int e1 = sr[ox * S + K];
        for (int e = sr[ox * S]; e < e1; e++) {
            size_t t = (size_t)(lr[e] - koff);
            if (lanes)
                some |= lanes256_nonzero(xw + 16 * t);
            else
                lanes256_term(acc, JB, wr + t * F, xw + 16 * t, masked);
        }
    }
    if (lanes) *lanes = some;
}

/* conv_lanes512_rows: the nonzero inputs of each input row listed once per layer, each
 * output's window the runs of its rows' lists; the results settled as dense_lanes256's
 * (a row whose window is all zero keeps the bias; a zero or NaN result elsewhere runs
 * the window again with blends). */
INLINE256 void conv_lanes256_out(const NevoLayer *L, const float *W, const float *b, const float *XT,
                                 const uint16_t *list, const uint16_t *start, int oy, int ox, const int JB,
                                 NevoActivation act, float *y) {
    __m256 acc[2 * LANES256_TW];
    lanes256_start(acc, JB, b, 0, NULL);
    conv_lanes256_window(acc, L, W, XT, list, start, oy, ox, JB, 0, NULL);
    unsigned bad = lanes256_zero_or_nan(acc, JB);
    if (bad) {
        unsigned lanes;
        conv_lanes256_window(acc, L, W, XT, list, start, oy, ox, JB, 0, &lanes);
        if (bad & lanes) {
            lanes256_start(acc, JB, b, 0, NULL);
            conv_lanes256_window(acc, L, W, XT, list, start, oy, ox, JB, 1, NULL);
        } else {
            lanes256_keep_start(acc, JB, b, 0, NULL, lanes);
        }
    }
    lanes256_store(acc, JB, act, y);
}

INLINE256 void conv_lanes256_rows(const NevoLayer *L, const float *W, const float *b, const float *XT,
                                  NevoActivation act, float *YT) {
    int C = L->in_c, F = L->out_c, rowlen = L->in_w * C;
    uint16_t list[CONV_ROWS_LIST_MAX], start[CONV_ROWS_LIST_MAX + CONV_ROWS_MAX_H];
    for (int iy = 0; iy < L->in_h; iy++) {
        const float *xr = XT + 16 * (size_t)iy * rowlen;
        uint16_t *lr = list + (size_t)iy * rowlen, *sr = start + (size_t)iy * (L->in_w + 1);
        int any_zero, partial;
        unsigned lanes;
        int c = lanes256_list(xr, rowlen, lr, &any_zero, &partial, &lanes);
        conv_rows_column_starts(lr, c, L->in_w, C, sr);
    }
    for (int oy = 0; oy < L->out_h; oy++) {
        for (int ox = 0; ox < L->out_w; ox++) {
            float *y = YT + 16 * ((size_t)(oy * L->out_w + ox) * F);
            for (int f0 = 0; f0 < F; f0 += LANES256_TW) {
                int JB = min_int(LANES256_TW, F - f0);
                switch (JB) {
#define CONV256_ROWS_CASE(N) \
    case N: conv_lanes256_out(L, W + f0, b + f0, XT, list, start, oy, ox, N, act, y + 16 * (size_t)f0); break;
                    CONV256_ROWS_CASE(1) CONV256_ROWS_CASE(2) CONV256_ROWS_CASE(3) CONV256_ROWS_CASE(4)
                    CONV256_ROWS_CASE(5) CONV256_ROWS_CASE(6)
#undef CONV256_ROWS_CASE
                }
            }
        }
    }
}

T256 static void conv_lanes256(const NevoLayer *L, const float *W, const float *b, const float *XT,
                               NevoActivation act, float *YT) {
    int S = L->stride, C = L->in_c, F = L->out_c;
    int masked = lanes256_any_zero(XT, L->in_h * L->in_w * C);
    if (masked && L->in_h * L->in_w * C <= CONV_ROWS_LIST_MAX && L->in_h <= CONV_ROWS_MAX_H) {
        conv_lanes256_rows(L, W, b, XT, act, YT);
    } else {
        for (int oy = 0; oy < L->out_h; oy++) {
            for (int ox = 0; ox < L->out_w; ox++) {
                const float *x = XT + 16 * ((size_t)(oy * S * L->in_w + ox * S) * C);
                float *y = YT + 16 * ((size_t)(oy * L->out_w + ox) * F);
                for (int f0 = 0; f0 < F; f0 += LANES256_TW) {
                    int JB = min_int(LANES256_TW, F - f0);
                    switch (JB) {
#define CONV256_POS_CASE(N)                                                              \
    case N:                                                                              \
        if (masked)                                                                      \
            conv_lanes256_pos(L, W + f0, b + f0, x, N, 1, act, y + 16 * (size_t)f0);     \
        else                                                                             \
            conv_lanes256_pos(L, W + f0, b + f0, x, N, 0, act, y + 16 * (size_t)f0);     \
        break;
                        CONV256_POS_CASE(1) CONV256_POS_CASE(2) CONV256_POS_CASE(3) CONV256_POS_CASE(4)
                        CONV256_POS_CASE(5) CONV256_POS_CASE(6)
#undef CONV256_POS_CASE
                    }
                }
            }
        }
    }
    if (act == NEVO_ACT_TANH) tanh256(YT, 16 * L->out_dim); /* (lanes256_store leaves it) */
}

/* The perturbation in vectors of 8 (AVX-512 too: a child's parameters come from L3
 * and memory, and 16-wide measured no faster than 8-wide, both 1.3x the 4-wide SSE
 * loop, on an Intel Xeon). Streamed rows are stored 32-byte aligned from the first
 * boundary of the first row written; the other row, where its alignment differs, with
 * ordinary stores.
 *
 * It reads each noise slice once, from memory, and the hardware prefetchers stop at
 * every 4 KB page: one line of the slice PERTURB_AHEAD_EPS floats ahead is asked for
 * each line it passes, into L1. Without streaming, the rows it writes (a slot's row, left
 * in L2 or beyond by the previous episode) are read for ownership first, so they are
 * asked for too, PERTURB_AHEAD_DST floats ahead. MinAtar GA on Breakout, 1M frames, 1
 * thread, an Intel Xeon: 6.4-6.6 s without, 5.9-6.1 with the slice's, 5.5-5.6 with
 * both (2, 8 and 16 KB ahead for the slice: slower; to L2 or non-temporally: slower).
 * The row it adds to (a GA child's parent) is asked for PERTURB_AHEAD_THETA floats
 * ahead too: consecutive children share a parent, but the previous child's noise slice,
 * as old in L2 as the parent's lines, makes the next slice evict about as much of the
 * parent as of itself. A MinAtar child's build then took 48-51.5 us in the GA's first
 * 12 generations, against 36-38 for a fresh one (noise only), and 44-49 with it
 * (frames/s there 1.03-1.05x on 1 thread, 1.02-1.03x on 2; 1 KB ahead about the same,
 * 4 KB less; demoting each used noise line with cldemote: 71 us). */
#define PERTURB_AHEAD_EPS 1024
#define PERTURB_AHEAD_DST 256
#define PERTURB_AHEAD_THETA 512

T256 static void perturb256(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                            int stream) {
    size_t k = 0;
    const float *first = plus ? plus : minus;
    if (stream) {
        while (k < n && ((uintptr_t)(first + k) & 31) != 0) k++;
        nevo_perturb_portable(plus, minus, theta, sigma, eps, 0, k);
    }
    int stream_plus = stream && plus, stream_minus = stream && minus && ((uintptr_t)(minus + k) & 31) == 0;
    __m256 s = _mm256_set1_ps(sigma);
    const size_t kv = k; /* where the vectors start (after a streamed row's aligning head) */
    for (; k + 8 <= n; k += 8) {
        if (((k - kv) & 15) == 0) { /* once per 16 floats: a line */
            if (k + PERTURB_AHEAD_EPS < n) _mm_prefetch((const char *)(eps + k + PERTURB_AHEAD_EPS), _MM_HINT_T0);
            if (k + PERTURB_AHEAD_THETA < n) _mm_prefetch((const char *)(theta + k + PERTURB_AHEAD_THETA), _MM_HINT_T0);
            if (!stream && k + PERTURB_AHEAD_DST < n) {
                if (plus) _mm_prefetch((const char *)(plus + k + PERTURB_AHEAD_DST), _MM_HINT_T0);
                if (minus) _mm_prefetch((const char *)(minus + k + PERTURB_AHEAD_DST), _MM_HINT_T0);
            }
        }
        __m256 d = _mm256_mul_ps(s, _mm256_loadu_ps(eps + k)), t = _mm256_loadu_ps(theta + k);
        if (stream_plus)
            _mm256_stream_ps(plus + k, _mm256_add_ps(t, d));
        else if (plus)
            _mm256_storeu_ps(plus + k, _mm256_add_ps(t, d));
        if (stream_minus)
            _mm256_stream_ps(minus + k, _mm256_sub_ps(t, d));
        else if (minus)
            _mm256_storeu_ps(minus + k, _mm256_sub_ps(t, d));
    }
    if (stream) _mm_sfence(); /* streamed stores are visible before the pool reports the task done */
    nevo_perturb_portable(plus, minus, theta, sigma, eps, k, n);
}

/* The weighted sum of rows, 4 doubles a vector, WS_ROWS rows a pass (AVX-512 too: it is
 * bound by reading the rows, noise slices in memory, and passes over the sums, which
 * stay in L1, cost little once several rows share each: 2.6x the compiler's SSE2 loop
 * over one row at a time on an Intel Xeon). Per element the rows are added in the
 * order given, as in the portable loop, so the bits are the same. */
#define WS_ROWS 8
T256 static void weighted_sum256(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1) {
    size_t n = k1 - k0, k4 = k0 + n / 4 * 4;
    for (int i0 = 0; i0 < m; i0 += WS_ROWS) {
        int r = min_int(WS_ROWS, m - i0);
        __m256d wv[WS_ROWS];
        for (int i = 0; i < r; i++) wv[i] = _mm256_set1_pd(w[i0 + i]);
        for (size_t k = k0; k < k4; k += 4) {
            __m256d acc = _mm256_loadu_pd(g + k);
            for (int i = 0; i < r; i++)
                acc = _mm256_add_pd(acc, _mm256_mul_pd(wv[i], _mm256_cvtps_pd(_mm_loadu_ps(rows[i0 + i] + k))));
            _mm256_storeu_pd(g + k, acc);
        }
        nevo_weighted_sum_portable(g, rows + i0, w + i0, r, k4, k1);
    }
}

static const NevoKernels k256 = {"avx2",        dense256,      conv256,     tanh256,       relu256,
                                 dense_lanes256, conv_lanes256, to_lanes256, from_lanes256, dense_nets256,
                                 perturb256,     weighted_sum256, NULL,
                                 dense256_streamed, dense_lanes256_streamed};

const NevoKernels *nevo_kernels_avx2(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &k256;
    return NULL;
}

#else

const NevoKernels *nevo_kernels_avx512(void) { return NULL; }
const NevoKernels *nevo_kernels_avx2(void) { return NULL; }

#endif
