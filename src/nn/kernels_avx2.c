/* The AVX2 kernel set. Each kernel computes what the portable one in kernels.c computes:
 * the same terms (zero inputs skipped), the same operations, in the same order for each
 * output, only many outputs or rows at a time (kernels.h; docs/DESIGN.md "Floating point
 * and kernels" describes the layouts). Every loop over vectors has a constant trip count
 * once inlined and is unrolled (#pragma GCC unroll), so the accumulators live in
 * registers, not on the stack. AVX2 has 16 vector registers and no masked FMA: the
 * register blocks below are sized to the first, and the second is why a skipped term
 * is a blend (rows) or a checked result (lanes) here. */
#include "nn/kernels_x86.h"

#ifdef NEVO_KERNELS_X86

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

/* For rows (up to NEVO_NETS_MAX) of X, lists k0 + i (0 <= i < n, ascending) where any
 * row's input is nonzero (NaN counts as nonzero), each group of 8 without a branch (a
 * branch on the data mispredicts), four indices at a time from a table; returns the
 * count, and *all_rows when no row has a zero among the listed ones. Nothing is written
 * past idx[n - 1]: the count is at most i when the group at i starts, so its two writes
 * of four end by idx[i + 7]. */
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

/* One row, VB vectors of outputs (up to 8: half the 16 registers, the rest for the
 * broadcast input and the loads): y = src + the listed terms x[k] W[k, :], in list
 * order, accumulated in registers. W and src point at the tile's first output. */
INLINE256 void row256_tile(const float *W, const float *src, const float *x, const int32_t *idx, int n, int out,
                           const int VB, __m256i mt, float *y) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int v = 0; v < VB; v++) acc[v] = LOAD256(src + 8 * v, v, VB, mt);
    for (int i = 0; i < n; i++) {
        int k = idx[i];
        const float *w = W + (size_t)k * out;
        __m256 xb = _mm256_set1_ps(x[k]);
#pragma GCC unroll 8
        for (int v = 0; v < VB; v++) acc[v] = _mm256_fmadd_ps(xb, LOAD256(w + 8 * v, v, VB, mt), acc[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < VB; v++) STORE256(y + 8 * v, v, VB, mt, acc[v]);
}

/* One row of a layer wider than a tile (out > 64) in one pass over each listed weight
 * row, the sums in y (in L1: a load, an FMA and a store per vector), where row256 makes
 * a pass over every listed row per tile of 64 outputs: the same FMAs in the same order.
 * From memory, the tiles read each row in 256-byte pieces, one piece a pass, which the
 * hardware prefetcher follows poorly, while one pass streams the rows whole. It is
 * dense_streamed's (weights from memory) for the first row of a call (the rest find the
 * weights in cache) and where 3/4 or more of a chunk's inputs are listed: such rows are
 * mostly consecutive, while sparse inputs list scattered rows that no prefetcher follows,
 * and there the load-FMA-store triples keep fewer lines in flight than a tile's FMAs.
 * From cache a store per FMA caps it near half the FMA peak, which a tile can exceed.
 * docs/BENCHMARKS.md ("Kernel variants") has the figures behind each condition. */
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
                        float *y) {
    int nvec = (out + 7) / 8;
    for (int v0 = 0; v0 < nvec; v0 += 8) {
        int VB = min_int(8, nvec - v0);
        __m256i mt = mask8(out - 8 * (v0 + VB - 1));
        const float *w = W + 8 * v0, *s = src + 8 * v0;
        float *yt = y + 8 * v0;
        switch (VB) {
#define ROW_CASE(N) \
    case N: row256_tile(w, s, x, idx, n, out, N, mt, yt); break;
            ROW_CASE(1) ROW_CASE(2) ROW_CASE(3) ROW_CASE(4) ROW_CASE(5) ROW_CASE(6) ROW_CASE(7) ROW_CASE(8)
#undef ROW_CASE
        }
    }
}

/* Rows one at a time (AVX2 has no masked FMA for a register block that skips each row's
 * own zeros). streamed: the weights come from memory, and the first row goes through
 * row256_sums where its rule holds. */
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
                row256(W, k0 == 0 ? b : y, x, idx, n, out, y);
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

/* Rows each with its own network's weights, side by side (dense_nets: a lone row of a
 * small layer waits on the latency of its few FMA chains, and R rows of R networks give
 * R times the independent chains): R rows x VB vectors (R x VB <= 8 accumulators) over
 * the inputs where any row is nonzero; a row whose input is zero takes its old sums
 * back (blend), as if the term were skipped. */
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
 * 64-byte pieces across passes. */
#define NETS256_MAX_OUT 16

T256 static void dense_nets256(const float *const *W, const float *const *b, const float *X, size_t xs, int rows,
                               int in, int out, float *Y, size_t ys) {
    NEVO_ASSERT(rows >= 1 && rows <= NEVO_NETS_MAX);
    if (out > NETS256_MAX_OUT) {
        /* the tiles even in a call from beyond the cache: dense_nets serves only small
         * layers (policy.c), narrower than row256_sums' one pass needs to gain */
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

/* Output-stationary convolution for inputs with many nonzeros: PB output positions along
 * a row x VB vectors of 8 filters in registers, summing each window in (ky, kx, c) order;
 * a position whose input is zero takes its old sums back (blend), as if the term were
 * skipped. */
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

/* Input-stationary convolution for sparse inputs, F filters in vectors of 8: every output
 * starts at the bias; then each nonzero input x[iy, ix, c], in ascending input order,
 * adds x W[ky, kx, c, :] to each output (oy, ox) = ((iy - ky) / S, (ix - kx) / S) whose
 * window holds it, so each output still sums its bias, then its window's terms in (ky,
 * kx, c) order. Consecutive nonzero channels of one pixel go to an output in one pass. */
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
 * output in the same order, so the bits are conv256_sparse's. The copy out uses a
 * masked store only for a partial last vector (a masked store the next layer reads at
 * once is slow). CONV3_PAD_FLOATS bounds the padded copy (a stack buffer). */
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

/* sparse or dense by conv_sparse_pays (kernels_x86.h) */
T256 static void conv256(const NevoLayer *L, const float *W, const float *b, const float *x, float *y) {
    int in_dim = L->in_h * L->in_w * L->in_c, nnz = 0, i = 0;
    for (; i + 8 <= in_dim; i += 8)
        nnz += __builtin_popcount(
            (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    for (; i < in_dim; i++) nnz += x[i] != 0.0f;
    if (conv_sparse_pays(L, nnz)) {
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

/* nevo_tanhf on 8 floats, operation for operation but on min(|x|, 9) instead of its
 * clamp branch: the formula gives exactly 1 at |x| = 9 (e^18 - 1 comes out as 65659968,
 * where floats are 4 apart, and adding 2 is a tie that rounds back to it, its
 * significand being even), so every |x| >= 9 gives +-1 as the branch does, and vminps
 * returns its second operand, |x|, where that is NaN, so a NaN goes through the
 * arithmetic and stays NaN, with the bits of a quiet NaN (a signalling NaN comes out
 * quieted, as from any arithmetic). Checked against nevo_tanhf over every float: the
 * same bits for every number and NaN for every NaN, with one vminps where the clamp and
 * the NaN would take two compares and two blends. */
INLINE256 __m256 tanh256_8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_min_ps(_mm256_set1_ps(NEVO_TANH_CLAMP), _mm256_andnot_ps(sign, x));
    __m256 z = _mm256_add_ps(ax, ax);
    __m256 t = _mm256_fmadd_ps(z, _mm256_set1_ps(NEVO_TANH_INV_LN2), _mm256_set1_ps(NEVO_TANH_SHIFTER));
    __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(NEVO_TANH_SHIFTER));
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(NEVO_TANH_LN2_HI), z);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(NEVO_TANH_LN2_LO), r);
    __m256 h = _mm256_fmadd_ps(_mm256_set1_ps(NEVO_TANH_H6), r, _mm256_set1_ps(NEVO_TANH_H5));
    h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(NEVO_TANH_H4));
    h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(NEVO_TANH_H3));
    h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(NEVO_TANH_H2));
    h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(NEVO_TANH_H1));
    h = _mm256_fmadd_ps(h, r, _mm256_set1_ps(NEVO_TANH_H0));
    __m256 p = _mm256_fmadd_ps(_mm256_mul_ps(r, r), h, r); /* e^r - 1 */
    /* 2^n from n in t's low mantissa bits, then e^z - 1 = 2^n p + (2^n - 1) */
    __m256 s = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(t), 23),
                                                    _mm256_set1_epi32(0x3F800000)));
    __m256 em1 = _mm256_fmadd_ps(s, p, _mm256_sub_ps(s, _mm256_set1_ps(1.0f)));
    return _mm256_or_ps(_mm256_div_ps(em1, _mm256_add_ps(em1, _mm256_set1_ps(2.0f))), _mm256_and_ps(sign, x));
}

T256 static void tanh256(float *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tanh256_8(_mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = nevo_tanhf(y[i]);
}

/* y < 0 ? 0 : y on 8 floats: the negative lanes blended to +0, so -0 and NaN stay (the
 * portable relu's bits) */
INLINE256 __m256 relu256_8(__m256 y) {
    return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_LT_OQ));
}

/* ---------------------------------------------------------------- AVX2: the lanes layout */

/* The lanes layout (kernels.h) with vectors of 8: input k of the 16 rows is two vectors,
 * rows 0-7 at XT + 16 k and rows 8-15 at XT + 16 k + 8, and output j's sums are two
 * accumulators, so a term is W[k, j] broadcast and two FMAs. An input zero in all 16 rows
 * is skipped whole. A tile of LANES256_TW outputs holds 12 accumulators, the two input
 * vectors and the broadcast weight: 15 of the 16 registers.
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

/* The terms of the n inputs idx lists (listed), or of every input k < n, input k's
 * weights at W + k ws; pf, if not NULL, is the first of npf consecutive 64-byte lines to
 * prefetch, spread evenly over the terms (issued back to back, they would stall on the
 * line fill buffers). */
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

/* Lists in idx the inputs k < n (n <= LANES_LIST_MAX) nonzero in some of the 16 rows of
 * X (a NaN counts as nonzero), in order, and returns how many; without a branch on the
 * data (each k is written, and the count moves past it only if it is kept), since a
 * branch on a pattern that changes from call to call mispredicts. *any_zero: some lane
 * of some input is zero; *lanes: the rows with a nonzero input among those listed;
 * *partial: a listed input is zero in some row (the tile's results are then checked). */
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
 * tanh is left to the layer's end, as one pass of tanh256 over its output: its
 * temporaries beside the tile's 12 sums would not fit in the 16 registers. */
INLINE256 void lanes256_store(__m256 *acc, const int JB, NevoActivation act, float *YT) {
    if (act == NEVO_ACT_RELU) {
#pragma GCC unroll 16
        for (int i = 0; i < 2 * JB; i++) acc[i] = relu256_8(acc[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 2 * JB; i++) _mm256_storeu_ps(YT + 8 * (size_t)i, acc[i]);
}

/* JB outputs over the n terms (those idx lists, if not NULL), from the bias b or (sums)
 * the partial sums in Y; npf lines from pf (if not NULL) prefetched. check: some term's input is
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

/* A dense layer in lanes goes through in chunks of LANES_CHUNK_BYTES of weights
 * (kernels_x86.h). With prefetch (dense_lanes_streamed, for weights from memory) each
 * tile prefetches its share of the next chunk's lines, as consecutive lines, and the
 * last chunk what follows the layer in memory, as much as itself and at least
 * LANES256_PAST_BYTES: the bias and the next layer, or after the last layer the next
 * network where the population lies in one block (a prefetch past the end of a buffer
 * does not fault). 16 KB is a 64 x 64 layer, so a network of small layers has its next
 * layer on the way. From cache the prefetches only take load slots and L1 lines from the
 * tiles, hence the two entries (docs/BENCHMARKS.md has both sides' figures). */
#define LANES256_PAST_BYTES (16 * 1024)

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

/* A convolution in the lanes layout: input (iy, ix, c) of the 16 rows at XT + 16 ((iy
 * in_w + ix) in_c + c), output (oy, ox, f) at YT + 16 ((oy out_w + ox) out_c + f), the
 * activation applied, tiles of LANES256_TW filters. Each output is its bias and then its
 * window's terms in (ky, kx, c) order, as in every other convolution kernel: a window row
 * (kx, c) is K C consecutive inputs against K C consecutive weight rows, so the window is
 * K runs of the dense tile's terms. Binary planes leave most inputs zero in all 16 rows
 * at once, and those are skipped whole. */

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

/* Where some row has a zero input (binary planes), the nonzero inputs of each input row
 * (in any of the 16 rows) are listed once per layer rather than once per window that
 * reads them (9 times for a 3x3 window at stride 1), and a window's terms are checked
 * rather than blended (the section's first comment): the inputs of row iy, (ix, c) at
 * ix C + c, nonzero in some lane, in order, at list + iy in_w C, and the list entries of
 * columns before ix at start[iy (in_w + 1) + ix]. A window row (kx, c) then is the run of
 * its input row's entries from column ox S to ox S + K - 1, in (kx, c) order as ever.
 * For layers of at most CONV_ROWS_LIST_MAX inputs in at most CONV_ROWS_MAX_H rows (stack
 * buffers). */
#define CONV_ROWS_LIST_MAX 8192
_Static_assert(CONV_ROWS_LIST_MAX <= LANES_LIST_MAX, "an input row is listed by lanes256_list");
#define CONV_ROWS_MAX_H 256

/* An input row's column starts: sr[ix] = the entries of its list lr (c of them, input
 * (ix, ch) at ix C + ch) before column ix, for ix = 0 .. in_w. */
static inline void conv_rows_column_starts(const uint16_t *lr, int c, int in_w, int C, uint16_t *sr) {
    for (int ix = 0, e = 0; ix <= in_w; ix++) {
        while (e < c && lr[e] < ix * C) e++;
        sr[ix] = (uint16_t)e;
    }
}

/* The terms of output (oy, ox)'s window from those lists (list, start), JB filters from
 * W (the tile's first), or with `lanes` not NULL, only the rows with a nonzero input
 * among them, into *lanes. */
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

/* One output's window from the input rows' lists, the results settled as dense_lanes256's
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

/* The perturbation in vectors of 8 (the AVX-512 set's too: it is bound by reading a
 * child's parent from L2 or L3 and its noise slice from memory, and 16-wide vectors add
 * nothing). Streamed rows are stored 32-byte aligned from the first boundary of the
 * first row written; the other row, where its alignment differs, with ordinary stores.
 *
 * For each line it passes it asks for the line PERTURB_AHEAD_* floats ahead, into L1,
 * of: the noise slice, read once from memory, where the hardware prefetchers stop at
 * every 4 KB page; the row it adds to (a GA child's parent), which the previous child's
 * noise has pushed out of L2 as much as it pushed out its own; and, without streaming,
 * the rows it writes, which are read for ownership first. Each distance covers the
 * latency of where its line comes from, at about 3 floats a nanosecond: the slice's
 * (memory) 0.3 us ahead, the parent's (L2 or L3) 0.15 us, the destination's 0.08 us.
 * docs/BENCHMARKS.md has what they gain and the distances tried. */
#define PERTURB_AHEAD_EPS 1024
#define PERTURB_AHEAD_DST 256
#define PERTURB_AHEAD_THETA 512

T256 void nevo_perturb_avx2(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
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

/* The weighted sum of rows, 4 doubles a vector, WS_ROWS rows a pass (the AVX-512 set's
 * too): it is bound by reading the rows (noise slices, from memory), and a pass over the
 * sums (in L1) is paid once per WS_ROWS rows; 8 rows' weights, the sums and a loaded row
 * fit in 10 of the 16 registers. Per element the rows are added in the order given, as
 * in the portable loop, so the bits are the same. */
#define WS_ROWS 8
T256 void nevo_weighted_sum_avx2(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1) {
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

static const NevoKernels k256 = {
    .name = "avx2",
    .dense = dense256,
    .conv = conv256,
    .tanh = tanh256,
    .dense_lanes = dense_lanes256,
    .conv_lanes = conv_lanes256,
    .to_lanes = to_lanes256,
    .from_lanes = from_lanes256,
    .dense_nets = dense_nets256,
    .perturb = nevo_perturb_avx2,
    .weighted_sum = nevo_weighted_sum_avx2,
    .dense_streamed = dense256_streamed,
    .dense_lanes_streamed = dense_lanes256_streamed,
};

const NevoKernels *nevo_kernels_avx2(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &k256;
    return NULL;
}

#else

const NevoKernels *nevo_kernels_avx2(void) { return NULL; }

#endif
