/* The AVX-512 kernel set. Each kernel computes what the portable one in kernels.c
 * computes: the same terms (zero inputs skipped), the same operations, in the same
 * order for each output, only many outputs or rows at a time (kernels.h; docs/DESIGN.md
 * "Floating point and kernels" describes the layouts). Every loop over vectors has a
 * constant trip count once inlined and is unrolled (#pragma GCC unroll), so the
 * accumulators live in registers, not on the stack. */
#include "nn/kernels_x86.h"

#ifdef NEVO_KERNELS_X86

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

/* The one-row tile prefetches the weight rows listed NEVO_PREFETCH_ROWS ahead in layers
 * of at least this many bytes: skipped inputs leave gaps in the list that the hardware
 * prefetcher does not follow. Smaller layers (at most a quarter of the 1-2 MiB L2 of the
 * AVX-512 CPUs measured) stay in L2 from call to call, where prefetches only add work. */
#define PREFETCH_MIN_BYTES (256 * 1024)

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
    int prefetch = (size_t)in * (size_t)out * sizeof(float) >= PREFETCH_MIN_BYTES;
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
    /* a single vector of outputs has one sum per row: 8 rows' independent sums cover the
     * FMA latency (4 cycles, 2 units) where 4 rows would leave the units half idle */
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
 * if the term were skipped; an input zero in all 16 rows is skipped whole. A tile holds
 * up to 16 outputs' sums, half of the 32 vector registers. */

/* One term for JB outputs: input k at X + 16 k against the weights at W + k ws (W points
 * at the tile's first output), masked by the nonzero lanes where some row of the chunk
 * has a zero input. */
INLINE512 void lanes512_term(__m512 *acc, const int JB, const float *W, size_t ws, const float *X, int k,
                             const int masked) {
    __m512 x = _mm512_loadu_ps(X + 16 * (size_t)k);
    __mmask16 nz = 0;
    if (masked) nz = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const float *w = W + (size_t)k * ws;
#pragma GCC unroll 16
    for (int j = 0; j < JB; j++) {
        __m512 wj = _mm512_set1_ps(w[j]);
        acc[j] = masked ? _mm512_mask3_fmadd_ps(x, wj, acc[j], nz) : _mm512_fmadd_ps(x, wj, acc[j]);
    }
}

/* The terms of the n inputs idx lists (lanes512_list), masked, or with idx NULL of every
 * input k < n, unmasked (no row has a zero input). pf, if not NULL, is the first of npf
 * (> 0) consecutive 64-byte lines to prefetch, spread evenly over the terms (issued back
 * to back, they would stall on the line fill buffers). The terms that prefetch and
 * those after them are separate loops, so neither tests its range in every iteration. */
INLINE512 void lanes512_terms_from(__m512 *acc, const int JB, const float *W, size_t ws, const float *X, int n,
                                   const uint16_t *idx, const char *pf, int npf, const int listed) {
    int i = 0;
    if (pf) {
        const int per = (npf + n - 1) / n;      /* lines per term */
        const int with = (npf + per - 1) / per; /* terms that prefetch */
        if (per == 1) {
            for (; i < with; i++) {
                _mm_prefetch(pf + 64 * (size_t)i, _MM_HINT_T1);
                lanes512_term(acc, JB, W, ws, X, listed ? idx[i] : i, listed);
            }
        } else {
            for (; i < with; i++) {
                int l0 = i * per, l1 = l0 + per < npf ? l0 + per : npf;
                for (int l = l0; l < l1; l++) _mm_prefetch(pf + 64 * (size_t)l, _MM_HINT_T1);
                lanes512_term(acc, JB, W, ws, X, listed ? idx[i] : i, listed);
            }
        }
    }
    for (; i < n; i++) lanes512_term(acc, JB, W, ws, X, listed ? idx[i] : i, listed);
}

INLINE512 void lanes512_terms(__m512 *acc, const int JB, const float *W, size_t ws, const float *X, int n,
                              const uint16_t *idx, const char *pf, int npf) {
    if (idx)
        lanes512_terms_from(acc, JB, W, ws, X, n, idx, pf, npf, 1);
    else
        lanes512_terms_from(acc, JB, W, ws, X, n, NULL, pf, npf, 0);
}

/* Lists in idx the inputs k < n (n <= LANES_LIST_MAX) nonzero in some of the 16 rows of
 * X (a NaN counts as nonzero), in order; returns how many. Without a branch on the data:
 * each k is written and the count moves past it only if it is kept, since a branch on a
 * pattern that changes from call to call mispredicts, and each misprediction stalls a
 * tile's FMAs. *any_zero is set if some lane of some input is zero (the tile must mask). */
INLINE512 int lanes512_list(const float *X, int n, uint16_t *idx, int *any_zero) {
    __mmask16 every = 0xFFFF;
    int c = 0;
    for (int k = 0; k < n; k++) {
        __mmask16 nz = _mm512_cmp_ps_mask(_mm512_loadu_ps(X + 16 * (size_t)k), _mm512_setzero_ps(), _CMP_NEQ_UQ);
        every &= nz;
        idx[c] = (uint16_t)k;
        c += nz != 0;
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

/* JB outputs over inputs [0, n) of a layer with `out` outputs (those listed in idx, if
 * not NULL: lanes512_terms), starting from the bias b or (sums) from the partial sums
 * already in Y; npf lines from pf (if not NULL) prefetched. */
INLINE512 void lanes512_tile(const float *W, const float *b, int sums, const float *X, int n, const uint16_t *idx,
                             int out, const int JB, NevoActivation act, const char *pf, int npf, float *Y) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < JB; j++) acc[j] = sums ? _mm512_loadu_ps(Y + 16 * (size_t)j) : _mm512_set1_ps(b[j]);
    if (n > 0) {
        lanes512_terms(acc, JB, W, (size_t)out, X, n, idx, pf, npf);
    } else {
        for (int l = 0; l < npf; l++) _mm_prefetch(pf + 64 * (size_t)l, _MM_HINT_T1);
    }
    lanes512_store(acc, JB, act, Y);
}

/* masked convolutions only where some row has a zero input (observations may; the
 * layers after a tanh do not) */
INLINE512 int lanes512_any_zero(const float *XT, int in) {
    __mmask16 every = 0xFFFF;
    for (int k = 0; k < in; k++)
        every &= _mm512_cmp_ps_mask(_mm512_loadu_ps(XT + 16 * (size_t)k), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    return every != 0xFFFF;
}

/* The layer in chunks of LANES_CHUNK_BYTES of weights (kernels_x86.h), the sums carried
 * over in YT, while the tiles prefetch the next chunk: weights from L2 or memory would
 * otherwise arrive a line per input per tile (docs/BENCHMARKS.md has the figures). Each
 * tile prefetches its share of the next chunk as consecutive lines rather than its own
 * column of lines, which the hardware prefetchers follow better. */
T512 static void dense_lanes512(const float *W, const float *b, const float *XT, int in, int out,
                                NevoActivation act, float *YT) {
    int kc = lanes_chunk_inputs(in, out);
    uint16_t idx[LANES_LIST_MAX];
    int tiles = (out + 15) / 16;
    for (int k0 = 0; k0 < in; k0 += kc) {
        int n = min_int(kc, in - k0);
        int sums = k0 > 0;
        NevoActivation a = k0 + n >= in ? act : NEVO_ACT_NONE;
        const float *wk = W + (size_t)k0 * out, *xk = XT + 16 * (size_t)k0;
        /* the chunk's inputs nonzero in some row, if any row has a zero: those terms
         * only, masked; else every term, unmasked (the same sums either way) */
        int masked;
        int listed = lanes512_list(xk, n, idx, &masked);
        const uint16_t *ix = masked ? idx : NULL;
        int terms = masked ? listed : n;
        /* the next chunk's lines, from the line holding its first weight, in even shares
         * of consecutive lines, one share per tile */
        const char *next = (const char *)((uintptr_t)(wk + (size_t)n * out) & ~(uintptr_t)63);
        size_t lines = 0;
        if (k0 + n < in)
            lines = (size_t)((const char *)(wk + (size_t)min_int(2 * kc, in - k0) * out) - next + 63) / 64;
        for (int j0 = 0, t = 0; j0 < out; j0 += 16, t++) {
            int JB = min_int(16, out - j0);
            size_t l0 = lines * t / tiles, l1 = lines * (t + 1) / tiles;
            const char *pf = l1 > l0 ? next + 64 * l0 : NULL;
            int npf = (int)(l1 - l0);
            const float *w = wk + j0, *bj = b + j0;
            float *y = YT + 16 * (size_t)j0;
            switch (JB) {
#define LANES_CASE(N) \
    case N: lanes512_tile(w, bj, sums, xk, terms, ix, out, N, a, pf, npf, y); break;
                CASES_1_TO_16(LANES_CASE)
#undef LANES_CASE
            }
        }
    }
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
 * in all 16 rows at once, and those are skipped whole: each window row's nonzero inputs
 * are listed (lanes512_list, in pieces of LANES_CONV_LIST inputs). */
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
            lanes512_terms(acc, JB, wr, (size_t)F, xr, KC, NULL, NULL, 0);
            continue;
        }
        uint16_t idx[LANES_CONV_LIST];
        for (int t0 = 0; t0 < KC; t0 += LANES_CONV_LIST) {
            int any_zero;
            const float *xt = xr + 16 * (size_t)t0;
            int n = lanes512_list(xt, min_int(LANES_CONV_LIST, KC - t0), idx, &any_zero);
            lanes512_terms(acc, JB, wr + (size_t)t0 * F, (size_t)F, xt, n, idx, NULL, 0);
        }
    }
    lanes512_store(acc, JB, act, y);
}

T512 static void conv_lanes512(const NevoLayer *L, const float *W, const float *b, const float *XT,
                               NevoActivation act, float *YT) {
    int S = L->stride, C = L->in_c, F = L->out_c;
    int masked = lanes512_any_zero(XT, L->in_h * L->in_w * C);
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
 * is bound by the latency of its FMA chains (one chain per output, at 4 cycles a term),
 * not by the FMA units; R rows of R networks side by side in one register block
 * (rows512, each row reading its own weights) give R times the independent chains. The
 * inputs listed are those where any of the rows is nonzero, as for a block of rows of
 * one network. */
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
 * case: the accumulators stay in registers, where the input-stationary loop adds each term
 * to its output in memory inside loops of varying trip count. */
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

/* sparse or dense by conv_sparse_pays (kernels_x86.h) */
T512 static void conv512(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int in_dim = L->in_h * L->in_w * L->in_c, nnz = 0;
    for (int i = 0; i < in_dim; i += 16) {
        __mmask16 lm = mask16(in_dim - i);
        nnz += __builtin_popcount(
            _mm512_mask_cmp_ps_mask(lm, _mm512_maskz_loadu_ps(lm, x + i), _mm512_setzero_ps(), _CMP_NEQ_UQ));
    }
    if (conv_sparse_pays(L, nnz)) {
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

/* perturb and weighted_sum are the AVX2 set's: both are bound by reading memory, where
 * 16-wide vectors add nothing over 8-wide ones. */
static const NevoKernels k512 = {
    .name = "avx512",
    .dense = dense512,
    .conv = conv512,
    .tanh = tanh512,
    .dense_lanes = dense_lanes512,
    .conv_lanes = conv_lanes512,
    .to_lanes = to_lanes512,
    .from_lanes = from_lanes512,
    .dense_nets = dense_nets512,
    .perturb = nevo_perturb_avx2,
    .weighted_sum = nevo_weighted_sum_avx2,
};

const NevoKernels *nevo_kernels_avx512(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
        return &k512;
    return NULL;
}

#else

const NevoKernels *nevo_kernels_avx512(void) { return NULL; }

#endif
