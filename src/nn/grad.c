/* Gradients: the forward that keeps a tape, the backward of each layer and of the whole
 * network, the output heads and the losses (include/nevo/grad.h).
 *
 * The accumulation rule, as the forward's (kernels.h): every element is one chain of
 * fused multiply-adds in a fixed order, and a term whose multiplier is exactly zero
 * (+0 or -0) is skipped.
 *   dense dW[i][j]: its value, then x_i dy_j for the rows in ascending order, skipping
 *                   x_i == 0 (a layer's last outputs, fewer than 16, by a select);
 *   dense dX[b][i]: +0, then dy_j W[i][j] for j ascending, skipping dy_j == 0;
 *   conv dW[ky][kx][c][f]: its value, then the rows, then the output pixels (oy, ox)
 *                   ascending, skipping zero inputs;
 *   conv dx[iy][ix][c]: +0, then the output pixels ascending and in each the filters f
 *                   ascending, skipping dy == 0;
 *   db[j]: its value plus dy_j, rows (and pixels) ascending, plain adds.
 * The code is portable C compiled for each x86-64 level (NEVO_KERNEL_CLONES), and each
 * clone runs each element's chain as the same sequence of fmaf, so every CPU gives the
 * same bits (tests/test_grad.c checks them against the rule written out). Tiles, lists
 * and loop orders only choose which elements are computed together: a tile of TILE
 * sums stays in registers across its chain (dW: one input's row of outputs over the
 * rows where it is nonzero; dX: a row's run of inputs over its nonzero dy, from a
 * transposed block of W), and lists of the nonzero multipliers, made from bit masks,
 * replace branches. Zero skipping makes ReLU layers and binary image planes cheap, as
 * in the forward. A conv layer's dW on dense inputs is the one place that computes the
 * skipped terms: tap by tap as im2col's transposed product, the sums of a tile of taps
 * and filters in registers over the pixels, where an exact zero term provably leaves
 * the bits as the rule's but for a zero sum's sign, which is settled after (dw_tile). */
#include "nevo/grad.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn/kernels.h"

/* Sums per register tile: 8 AVX2 or 4 AVX-512 vectors, with room for the operands. A
 * block of rows is at most 64, so that a mask of 64 bits names the nonzero ones. */
#define TILE 64
/* Outputs of a dense layer's last partial tile from which dW takes a register tile over
 * a zero-padded copy of dY; narrower ones (output layers) run over the inputs instead. */
#define NARROW 16
/* Floats of a conv layer's transposed weights nevo_conv_backward keeps on the stack:
 * bigger layers take their input channels in chunks that fit, and layers with more
 * than this many filter taps (k k out_c) read W in place (the same chains, slower). */
#define CONV_WT_STACK 4096
/* Nonzero inputs a conv layer's dW scatter takes at once */
#define CONV_LIST 256
/* A conv dW term by the scatter costs about this many times one of a tile's (measured
 * with dev/kernels/ab_conv_backward on the Fashion-MNIST and MinAtar layers: 6 leaves
 * sparse Fashion images on the scatter, 8 moves Breakout's planes off it, both slower) */
#define CONV_SCATTER_COST 7
/* Floats of a conv window the dx pass cuts into chunks at once (a window of more takes
 * its channels in parts), and filters whose nonzero dy it lists at once */
#define CONV_WINDOW 1024
#define CONV_FILTERS 256

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- tiles ----------------------------------------------------------------------- */

/* TILE sums at dst: from dst (init) or +0, then for q < cnt in order
 * acc[t] = fmaf(v[q], rows[k rs + t], acc[t]) with k = list[q] (q where list is NULL).
 * The unrolled fixed-width loops keep the sums in registers (GCC promotes the array). */
static ALWAYS_INLINE void chain_full(float *restrict dst, int init, const uint8_t *list, const float *v, int cnt,
                                     const float *rows, size_t rs) {
    float acc[TILE];
    if (init) {
        _Pragma("GCC unroll 64") for (int t = 0; t < TILE; t++) acc[t] = dst[t];
    } else {
        _Pragma("GCC unroll 64") for (int t = 0; t < TILE; t++) acc[t] = 0.0f;
    }
    for (int q = 0; q < cnt; q++) {
        float s = v[q];
        const float *r = rows + (size_t)(list ? list[q] : q) * rs;
        _Pragma("GCC unroll 64") for (int t = 0; t < TILE; t++) acc[t] = fmaf(s, r[t], acc[t]);
    }
    _Pragma("GCC unroll 64") for (int t = 0; t < TILE; t++) dst[t] = acc[t];
}

/* chain_full for the n <= TILE sums at dst, through a copy where n < TILE; rows are
 * readable for TILE floats */
static ALWAYS_INLINE void chain_tile(float *restrict dst, int n, int init, const uint8_t *list, const float *v,
                                     int cnt, const float *rows, size_t rs) {
    if (n == TILE) {
        chain_full(dst, init, list, v, cnt, rows, rs);
        return;
    }
    float part[TILE];
    if (init) memcpy(part, dst, sizeof(float) * (size_t)n);
    chain_full(part, init, list, v, cnt, rows, rs);
    memcpy(dst, part, sizeof(float) * (size_t)n);
}

/* acc (W floats) += each of nrows rows (W floats, rs apart) in order, in registers */
#define ADD_ROWS_W(W)                                                                       \
    static ALWAYS_INLINE void add_rows_##W(float *restrict db, const float *r, size_t rs, int nrows) { \
        float acc[W];                                                                       \
        _Pragma("GCC unroll 64") for (int t = 0; t < W; t++) acc[t] = db[t];                \
        for (int k = 0; k < nrows; k++) {                                                   \
            _Pragma("GCC unroll 64") for (int t = 0; t < W; t++) acc[t] += r[(size_t)k * rs + t]; \
        }                                                                                   \
        _Pragma("GCC unroll 64") for (int t = 0; t < W; t++) db[t] = acc[t];                \
    }
ADD_ROWS_W(8)
ADD_ROWS_W(16)
ADD_ROWS_W(32)
ADD_ROWS_W(64)

/* db[j] += rows[k rs + j] for k < nrows in order, j < n: each sum one chain of adds, kept
 * in registers for the widths layers have (a sum in memory waits on its store at each
 * row) */
static ALWAYS_INLINE void add_rows(float *restrict db, const float *rows, size_t rs, int nrows, int n) {
    int j = 0;
    for (; n - j >= 64; j += 64) add_rows_64(db + j, rows + j, rs, nrows);
    if (n - j >= 32) add_rows_32(db + j, rows + j, rs, nrows), j += 32;
    if (n - j >= 16) add_rows_16(db + j, rows + j, rs, nrows), j += 16;
    if (n - j >= 8) add_rows_8(db + j, rows + j, rs, nrows), j += 8;
    if (j < n)
        for (int k = 0; k < nrows; k++)
            for (int t = j; t < n; t++) db[t] += rows[(size_t)k * rs + t];
}

/* bit t set where x[t] != 0, t < n <= 32: written so that GCC vectorises it (compare,
 * and with the bit, or) */
static ALWAYS_INLINE uint32_t nonzero_mask32(const float *x, int n) {
    uint32_t m = 0;
    if (n == 32) {
        for (int t = 0; t < 32; t++) m |= x[t] != 0.0f ? 1u << t : 0u;
    } else {
        for (int t = 0; t < n; t++) m |= x[t] != 0.0f ? 1u << t : 0u;
    }
    return m;
}

/* bit t set where x[t] != 0, t < n <= 64 */
static ALWAYS_INLINE uint64_t nonzero_mask(const float *x, int n) {
    uint64_t m = nonzero_mask32(x, n < 32 ? n : 32);
    if (n > 32) m |= (uint64_t)nonzero_mask32(x + 32, n - 32) << 32;
    return m;
}

/* the set bits k of m in ascending order into list and x[k] into v; returns their count.
 * Only the clearing of the lowest bit is a chain (one cycle), where a branch-free
 * counter over the inputs would chain the compare into every store's address. */
static ALWAYS_INLINE int list_bits(uint64_t m, const float *x, uint8_t *list, float *v) {
    int c = 0;
    for (; m; m &= m - 1, c++) {
        int k = __builtin_ctzll(m);
        list[c] = (uint8_t)k;
        v[c] = x[k];
    }
    return c;
}

/* dW's outputs [j0, j0 + r), r < NARROW, for the nb rows at X and dY: tiles of NI inputs
 * (across the lanes of a vector) by NJ outputs, whose sums stay in registers over the
 * rows, with dY copied in zero-padded to NJ columns. A zero input keeps its sum (the
 * skipped term) by a select, so each sum is still its chain of nonzero terms. A function
 * of its own, so that the sums get the registers. */
#define NI 8
#define NJ 8
NEVO_KERNEL_CLONES NEVO_VECTORIZE __attribute__((noinline))
static void dw_narrow(const float *X, const float *dY, int nb, int in, int out, int j0, int r, float *dW) {
    float dyp[TILE][NJ], tile[NJ][NI];
    for (int js = 0; js < r; js += NJ) {
        int nj = r - js < NJ ? r - js : NJ;
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < NJ; j++) dyp[b][j] = j < nj ? dY[(size_t)b * out + j0 + js + j] : 0.0f;
        for (int i0 = 0; i0 < in; i0 += NI) {
            int ni = in - i0 < NI ? in - i0 : NI;
            for (int j = 0; j < NJ; j++)
                for (int t = 0; t < NI; t++)
                    tile[j][t] = j < nj && t < ni ? dW[(size_t)(i0 + t) * out + j0 + js + j] : 0.0f;
            if (ni == NI) {
                float acc[NJ][NI]; /* (output, input) */
                for (int j = 0; j < NJ; j++)
                    for (int t = 0; t < NI; t++) acc[j][t] = tile[j][t];
                for (int b = 0; b < nb; b++) {
                    const float *x = X + (size_t)b * in + i0;
                    _Pragma("GCC unroll 8") for (int j = 0; j < NJ; j++) {
                        float d = dyp[b][j];
                        for (int t = 0; t < NI; t++) acc[j][t] = x[t] != 0.0f ? fmaf(x[t], d, acc[j][t]) : acc[j][t];
                    }
                }
                for (int j = 0; j < NJ; j++)
                    for (int t = 0; t < NI; t++) tile[j][t] = acc[j][t];
            } else {
                for (int b = 0; b < nb; b++) {
                    const float *x = X + (size_t)b * in + i0;
                    for (int j = 0; j < NJ; j++)
                        for (int t = 0; t < ni; t++)
                            tile[j][t] = x[t] != 0.0f ? fmaf(x[t], dyp[b][j], tile[j][t]) : tile[j][t];
                }
            }
            for (int j = 0; j < nj; j++)
                for (int t = 0; t < ni; t++) dW[(size_t)(i0 + t) * out + j0 + js + j] = tile[j][t];
        }
    }
}

/* ---- layers ---------------------------------------------------------------------- */

NEVO_KERNEL_CLONES NEVO_VECTORIZE
void nevo_dense_backward(const float *W, const float *X, const float *dY, int B, int in, int out, float *dW,
                         float *db, float *dX) {
    uint8_t lists[TILE][TILE];
    float vals[TILE][TILE];
    int counts[TILE];
    float pad[TILE][TILE]; /* dW: rows of dY's last partial tile, zero-padded */
    float xt[TILE][TILE];  /* dW: a block of X transposed, (input, row) */
    float wt[TILE][TILE];  /* dX: a block of W transposed, (output, input), zero-padded */
    int full = out / TILE * TILE, r = out - full;
    add_rows(db, dY, (size_t)out, B, out);
    for (int b0 = 0; b0 < B; b0 += TILE) {
        int nb = B - b0 < TILE ? B - b0 : TILE;
        const float *Xb = X + (size_t)b0 * in, *dYb = dY + (size_t)b0 * out;
        /* dW: for each input of a block, the rows where it is nonzero (all of them, or a
         * list); then its row of dW by tiles of outputs over those rows */
        if (r >= NARROW)
            for (int b = 0; b < nb; b++)
                for (int t = 0; t < TILE; t++) pad[b][t] = t < r ? dYb[(size_t)b * out + full + t] : 0.0f;
        if (full > 0 || r >= NARROW) {
            for (int i0 = 0; i0 < in; i0 += TILE) {
                int ni = in - i0 < TILE ? in - i0 : TILE;
                /* the block transposed first: a column of rows a multiple of 4 KB apart
                 * would share one L1 set and miss at every load */
                for (int b = 0; b < nb; b++) {
                    const float *x = Xb + (size_t)b * in + i0;
                    for (int t = 0; t < ni; t++) xt[t][b] = x[t];
                }
                for (int t = 0; t < ni; t++) {
                    uint64_t m = nonzero_mask(xt[t], nb);
                    if (!m) continue;
                    int c = __builtin_popcountll(m);
                    const uint8_t *list = NULL;
                    const float *v = xt[t];
                    if (c < nb) {
                        list_bits(m, xt[t], lists[0], vals[0]);
                        list = lists[0], v = vals[0];
                    }
                    float *g = dW + (size_t)(i0 + t) * out;
                    for (int j0 = 0; j0 < full; j0 += TILE)
                        chain_tile(g + j0, TILE, 1, list, v, c, dYb + j0, (size_t)out);
                    if (r >= NARROW) chain_tile(g + full, r, 1, list, v, c, &pad[0][0], TILE);
                }
            }
        }
        if (r > 0 && r < NARROW) dw_narrow(Xb, dYb, nb, in, out, full, r, dW);
        if (!dX) continue;
        /* dX: for a block of outputs, each row's nonzero dy (all, or a list); then each
         * block of inputs from W's block transposed */
        for (int j0 = 0; j0 < out; j0 += TILE) {
            int nj = out - j0 < TILE ? out - j0 : TILE;
            for (int b = 0; b < nb; b++) {
                const float *d = dYb + (size_t)b * out + j0;
                uint64_t m = nonzero_mask(d, nj);
                counts[b] = __builtin_popcountll(m);
                if (counts[b] < nj) list_bits(m, d, lists[b], vals[b]);
            }
            for (int i0 = 0; i0 < in; i0 += TILE) {
                int ni = in - i0 < TILE ? in - i0 : TILE;
                for (int t = 0; t < ni; t++) {
                    const float *w = W + (size_t)(i0 + t) * out + j0;
                    for (int j = 0; j < nj; j++) wt[j][t] = w[j];
                }
                if (ni < TILE)
                    for (int j = 0; j < nj; j++)
                        for (int t = ni; t < TILE; t++) wt[j][t] = 0.0f;
                for (int b = 0; b < nb; b++) {
                    float *dx = dX + (size_t)(b0 + b) * in + i0;
                    if (counts[b] == nj)
                        chain_tile(dx, ni, j0 > 0, NULL, dYb + (size_t)b * out + j0, nj, &wt[0][0], TILE);
                    else
                        chain_tile(dx, ni, j0 > 0, lists[b], vals[b], counts[b], &wt[0][0], TILE);
                }
            }
        }
    }
}

/* ---- convolution ----------------------------------------------------------------- */

/* conv dW (exact path) for the filters [f0, f1) and a list of nonzero inputs in
 * ascending order: input q (row qy S + ry, column qx S + rx, channel ch, value val)
 * times dy of each output whose window holds it. An input's positions are different
 * rows of dW, whose chains run side by side. */
static ALWAYS_INLINE void conv_dw_list(int K, int S, int C, int F, int f0, int f1, int OH, int OW, const int *qy,
                                       const int *ry, const int *qx, const int *rx, const int *ch, const float *val,
                                       int cnt, const float *restrict dy, float *restrict dW) {
    for (int q = 0; q < cnt; q++) {
        float v = val[q];
        /* ky = ry + S a for a = 0, 1, ...: output row qy - a */
        for (int ky = ry[q], oy = qy[q]; ky < K && oy >= 0; ky += S, oy--) {
            if (oy >= OH) continue;
            for (int kx = rx[q], ox = qx[q]; kx < K && ox >= 0; kx += S, ox--) {
                if (ox >= OW) continue;
                float *g = dW + ((size_t)(ky * K + kx) * C + ch[q]) * F;
                const float *d = dy + ((size_t)oy * OW + ox) * F;
                for (int f = f0; f < f1; f++) g[f] = fmaf(v, d[f], g[f]);
            }
        }
    }
}

/* conv dW for the filters [f0, f1), the rule's chains as written: the nonzero inputs,
 * listed in ascending order a chunk at a time, each into the window positions that
 * hold it (input (iy, ix) is at (ky, kx) of output ((iy - ky) / S, (ix - kx) / S) where
 * S divides both). For each (ky, kx, c) the chunks, and the inputs in each, come in
 * ascending order, which is ascending output order. The path for a dy that is not
 * finite, and for a layer's last filters that fill no tile. */
static ALWAYS_INLINE void conv_dw_scatter(const NevoLayer *L, const float *restrict x, const float *restrict dy,
                                          float *restrict dW, int f0, int f1) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    int RW = L->in_w * C, cnt = 0;
    int qy[CONV_LIST], ry[CONV_LIST], qx[CONV_LIST], rx[CONV_LIST], ch[CONV_LIST];
    float val[CONV_LIST];
    for (int iy = 0; iy < L->in_h; iy++) {
        const float *xr = x + (size_t)iy * RW;
        for (int k0 = 0, ix = 0; k0 < RW; k0 += 64) {
            for (uint64_t m = nonzero_mask(xr + k0, RW - k0 < 64 ? RW - k0 : 64); m; m &= m - 1) {
                int k = k0 + __builtin_ctzll(m);
                while ((ix + 1) * C <= k) ix++; /* k / C, as k only grows */
                ch[cnt] = k - ix * C;
                val[cnt] = xr[k];
                qy[cnt] = S == 1 ? iy : iy / S, ry[cnt] = iy - qy[cnt] * S;
                qx[cnt] = S == 1 ? ix : ix / S, rx[cnt] = ix - qx[cnt] * S;
                if (++cnt == CONV_LIST) {
                    conv_dw_list(K, S, C, F, f0, f1, L->out_h, L->out_w, qy, ry, qx, rx, ch, val, cnt, dy, dW);
                    cnt = 0;
                }
            }
        }
    }
    if (cnt) conv_dw_list(K, S, C, F, f0, f1, L->out_h, L->out_w, qy, ry, qx, rx, ch, val, cnt, dy, dW);
}

/* The geometry a dW tile walks: input floats between output columns (cs) and rows
 * (rs), the output's size, and dy's row length (F); and whether the image's inputs, and
 * the dy of the filters at hand, hold a nonzero of magnitude under 2^-51 (tiny: 1, 0,
 * or -1 while the inputs' is not yet known); bit l of dead: filter l's dy is all zeros */
typedef struct ConvWalk {
    size_t cs, rs, F;
    int OH, OW, in_dim;
    int x_tiny, dy_tiny;
    uint32_t dead;
} ConvWalk;

/* a float's bits shifted past the sign: 0 for +-0, under TINY_BITS for a nonzero of
 * magnitude under 2^-51 (biased exponent under 76), 0xff000000 or more for an infinity
 * or a NaN */
#define TINY_BITS (76u << 24)
#define NONFINITE_BITS 0xff000000u

/* One dW element's chain as the rule writes it: g, then x[window(p) + off] dy[p F] over
 * the output pixels p in order, skipping zero inputs (dy at the element's filter). */
NEVO_KERNEL_CLONES __attribute__((noinline)) static float conv_dw_exact(const float *x, int off, const ConvWalk *w,
                                                                        const float *dy, float g) {
    for (int oy = 0; oy < w->OH; oy++)
        for (int ox = 0; ox < w->OW; ox++) {
            float v = x[oy * w->rs + ox * w->cs + (size_t)off];
            if (v != 0.0f) g = fmaf(v, dy[((size_t)oy * w->OW + ox) * w->F], g);
        }
    return g;
}

/* 1 where x (n floats) holds a nonzero of magnitude under 2^-51 */
NEVO_KERNEL_CLONES NEVO_VECTORIZE __attribute__((noinline)) static int has_tiny(const float *x, int n) {
    uint32_t t = 0;
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        t |= (u << 1) - 1u < TINY_BITS - 1u;
    }
    return t != 0;
}

/* The sums of a dW tile (nt taps, fb filters; g, off, dy as dw_tile's) that ended at
 * zero, from their starts init (nt by fb). From +0, with no input nor dy under 2^-51,
 * every fused multiply-add's exact result is a multiple of 2^-149 (products of
 * multiples of 2^-74, sums with floats), so none rounds to -0, and additions of zeros
 * keep +0: both chains stay off -0 and end at +0 (so do they where the filter's dy is
 * all zeros: every term is an exact zero). Any other zero sum (a -0 start, tiny values)
 * is computed again as the rule writes it. */
__attribute__((noinline)) static void dw_fix_zeros(const float *x, const int *off, ConvWalk *w, const float *dy,
                                                   float *g, const float *init, int nt, int fb) {
    for (int j = 0; j < nt; j++)
        for (int l = 0; l < fb; l++) {
            float *e = g + j * w->F + l;
            if (*e != 0.0f) continue;
            uint32_t u;
            memcpy(&u, init + j * fb + l, sizeof u);
            if (u == 0 && (w->dead >> l & 1)) continue;
            if (u == 0 && !w->dy_tiny) {
                if (w->x_tiny < 0) w->x_tiny = has_tiny(x, w->in_dim);
                if (!w->x_tiny) continue;
            }
            *e = conv_dw_exact(x, off[j], w, dy + l, init[j * fb + l]);
        }
}

/* dW rows of NT consecutive taps for FB filters (g: the first row's first filter, rows
 * F apart; off[j]: tap j's input from the window's first, ((ky IW + kx) C + c); dy at
 * the first filter), over one image: the NT FB sums stay in registers over the output
 * pixels in order, and every term is computed, zero inputs too. With a finite dy that
 * gives the rule's bits wherever the sum ends nonzero: a zero input's term x dy is an
 * exact +-0, which leaves a nonzero sum as it is, so a chain with the terms and one
 * without stay equal or both zero (a later nonzero term rounds the same on either zero).
 * Only a zero sum's sign can differ: dw_fix_zeros settles those. */
#define DW_PIXELS(NT, FB, DB)                                                                                   \
    for (int oy = 0; oy < w->OH; oy++) {                                                                        \
        const float *xr = x + oy * w->rs, *d = dy + (size_t)oy * w->OW * F;                                     \
        for (int ox = 0; ox < w->OW; ox++) {                                                                    \
            const float *xp = xr + ox * w->cs, *dp = d + ox * F;                                                \
            _Pragma("GCC unroll 16") for (int j = 0; j < NT; j++) {                                             \
                float v = xp[off[j]];                                                                           \
                _Pragma("GCC unroll 16") for (int l = 0; l < FB; l++) acc[j][l] = fmaf(v, dp[l], acc[j][l]);    \
            }                                                                                                   \
            DB                                                                                                  \
        }                                                                                                       \
    }
#define DW_TILE(NT, FB)                                                                                         \
    NEVO_KERNEL_CLONES NEVO_VECTORIZE __attribute__((noinline)) static void dw_tile_##NT##_##FB(                \
        const float *x, const int *off, ConvWalk *w, const float *dy, float *g, float *db) {                   \
        size_t F = w->F;                                                                                        \
        float acc[NT][FB], init[NT][FB];                                                                        \
        _Pragma("GCC unroll 16") for (int j = 0; j < NT; j++)                                                   \
            _Pragma("GCC unroll 16") for (int l = 0; l < FB; l++) acc[j][l] = init[j][l] = g[j * F + l];        \
        if (db) {                                                                                               \
            float b[FB];                                                                                        \
            _Pragma("GCC unroll 16") for (int l = 0; l < FB; l++) b[l] = db[l];                                 \
            DW_PIXELS(NT, FB, _Pragma("GCC unroll 16") for (int l = 0; l < FB; l++) b[l] += dp[l];)             \
            _Pragma("GCC unroll 16") for (int l = 0; l < FB; l++) db[l] = b[l];                                 \
        } else {                                                                                                \
            DW_PIXELS(NT, FB, )                                                                                 \
        }                                                                                                       \
        int zero = 0;                                                                                           \
        _Pragma("GCC unroll 16") for (int j = 0; j < NT; j++)                                                   \
            _Pragma("GCC unroll 16") for (int l = 0; l < FB; l++) {                                             \
                zero |= acc[j][l] == 0.0f;                                                                      \
                g[j * F + l] = acc[j][l];                                                                       \
            }                                                                                                   \
        if (zero) dw_fix_zeros(x, off, w, dy, g, &init[0][0], NT, FB);                                          \
    }
/* 12 sums in registers, one or two AVX2 vectors of filters a tap; smaller tiles for the
 * taps left over */
DW_TILE(6, 16)
DW_TILE(3, 16)
DW_TILE(2, 16)
DW_TILE(1, 16)
DW_TILE(12, 8)
DW_TILE(9, 8)
DW_TILE(6, 8)
DW_TILE(3, 8)
DW_TILE(2, 8)
DW_TILE(1, 8)

/* the largest of 12, 9, 6, 3, 2, 1 (limited to max) that n reaches */
static ALWAYS_INLINE int tile_of(int n, int max) {
    int t = n >= 12 ? 12 : n >= 9 ? 9 : n >= 6 ? 6 : n >= 3 ? 3 : n;
    return t < max ? t : max;
}

/* Over the P pixels of FB filters' dy (at the first filter, F floats a pixel): 1 where
 * one is an infinity or a NaN; *tiny: 1 where one is a nonzero under 2^-51; bit l of
 * *dead: filter l's dy is all zeros */
#define DY_SCAN(FB)                                                                                             \
    static ALWAYS_INLINE int dy_nonfinite_##FB(const float *dy, size_t P, size_t F, int *tiny, uint32_t *dead) { \
        uint32_t mx[FB] = {0}, t[FB] = {0};                                                                     \
        for (size_t p = 0; p < P; p++)                                                                          \
            _Pragma("GCC unroll 16") for (int l = 0; l < FB; l++) {                                             \
                uint32_t e;                                                                                     \
                memcpy(&e, dy + p * F + l, sizeof e);                                                           \
                e <<= 1;                                                                                        \
                mx[l] = mx[l] > e ? mx[l] : e;                                                                  \
                t[l] |= e - 1u < TINY_BITS - 1u ? 1u : 0u;                                                      \
            }                                                                                                   \
        uint32_t m = 0, tt = 0;                                                                                 \
        *dead = 0;                                                                                              \
        for (int l = 0; l < FB; l++) m = m > mx[l] ? m : mx[l], tt |= t[l], *dead |= (mx[l] == 0) << l;         \
        *tiny = tt != 0;                                                                                        \
        return m >= NONFINITE_BITS;                                                                             \
    }
DY_SCAN(16)
DY_SCAN(8)

/* 1 where x (n floats) has more than most nonzeros (it stops counting there) */
static ALWAYS_INLINE int more_nonzeros(const float *x, int n, long most) {
    long cnt = 0;
    for (int k0 = 0; k0 < n && cnt <= most; k0 += 64)
        cnt += __builtin_popcountll(nonzero_mask(x + k0, n - k0 < 64 ? n - k0 : 64));
    return cnt > most;
}

/* conv dW and db of one image. Where the inputs are dense enough, tiles of taps by 16
 * or 8 filters (dw_tile, the first of a block adding db's chains, which hide behind its
 * FMAs) for the filters whose dy is finite; else, and for the last filters that fill no
 * tile, add_rows and the scatter over the nonzero inputs. A tile computes T P terms, the
 * scatter about (k / stride)^2 a nonzero input at CONV_SCATTER_COST times the cost. */
static ALWAYS_INLINE void conv_dw(const NevoLayer *L, const float *restrict x, const float *restrict dy,
                                  float *restrict dW, float *restrict db) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c, T = K * K * C, f0 = 0;
    size_t P = (size_t)L->out_h * L->out_w;
    ConvWalk w = {(size_t)S * C, (size_t)S * L->in_w * C, (size_t)F, L->out_h, L->out_w, L->in_dim, -1, 0, 0};
    long windows = (long)((K + S - 1) / S) * ((K + S - 1) / S); /* windows an input is in, at most */
    if (F >= 8 && more_nonzeros(x, L->in_dim, (long)T * (long)P / (windows * CONV_SCATTER_COST))) {
        while (F - f0 >= 8) {
            int fb = F - f0 >= 16 ? 16 : 8;
            if (fb == 16 ? dy_nonfinite_16(dy + f0, P, (size_t)F, &w.dy_tiny, &w.dead)
                         : dy_nonfinite_8(dy + f0, P, (size_t)F, &w.dy_tiny, &w.dead)) {
                add_rows(db + f0, dy + f0, (size_t)F, (int)P, fb);
                conv_dw_scatter(L, x, dy, dW, f0, f0 + fb);
                f0 += fb;
                continue;
            }
            for (int t0 = 0, nt; t0 < T; t0 += nt) {
                nt = tile_of(T - t0, fb == 16 ? 6 : 12);
                int off[12];
                for (int j = 0; j < nt; j++) {
                    int t = t0 + j, c = t % C, kx = t / C % K, ky = t / C / K;
                    off[j] = (ky * L->in_w + kx) * C + c;
                }
                float *g = dW + (size_t)t0 * F + f0, *bd = t0 == 0 ? db + f0 : NULL;
                const float *d = dy + f0;
                if (fb == 16) {
                    switch (nt) {
                    case 6: dw_tile_6_16(x, off, &w, d, g, bd); break;
                    case 3: dw_tile_3_16(x, off, &w, d, g, bd); break;
                    case 2: dw_tile_2_16(x, off, &w, d, g, bd); break;
                    default: dw_tile_1_16(x, off, &w, d, g, bd); break;
                    }
                } else {
                    switch (nt) {
                    case 12: dw_tile_12_8(x, off, &w, d, g, bd); break;
                    case 9: dw_tile_9_8(x, off, &w, d, g, bd); break;
                    case 6: dw_tile_6_8(x, off, &w, d, g, bd); break;
                    case 3: dw_tile_3_8(x, off, &w, d, g, bd); break;
                    case 2: dw_tile_2_8(x, off, &w, d, g, bd); break;
                    default: dw_tile_1_8(x, off, &w, d, g, bd); break;
                    }
                }
            }
            f0 += fb;
        }
    }
    if (f0 < F) {
        add_rows(db + f0, dy + f0, (size_t)F, (int)P, F - f0);
        conv_dw_scatter(L, x, dy, dW, f0, F);
    }
}

/* dx at NV chunks of 8 floats of one output pixel's window (xw: the window's first
 * input; doff[j], woff[j]: chunk j in dx from xw and in a filter's weights of wt, fs
 * floats a filter) over the pixel's nonzero dy (cnt of them: filter fl[q], value fv[q]),
 * the sums in registers over the filters in order. */
#define DX_TILE(NV)                                                                                             \
    static ALWAYS_INLINE void dx_tile_##NV(float *xw, const int *doff, const int *woff, const float *wt,        \
                                           size_t fs, const uint16_t *fl, const float *fv, int cnt) {          \
        float acc[NV][8];                                                                                       \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                                                   \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) acc[j][l] = xw[doff[j] + l];                    \
        for (int q = 0; q < cnt; q++) {                                                                         \
            float v = fv[q];                                                                                    \
            const float *w = wt + fl[q] * fs;                                                                   \
            _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                                               \
                _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) acc[j][l] = fmaf(v, w[woff[j] + l], acc[j][l]); \
        }                                                                                                       \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++)                                                   \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) xw[doff[j] + l] = acc[j][l];                    \
    }
DX_TILE(12)
DX_TILE(9)
DX_TILE(6)
DX_TILE(3)
DX_TILE(2)
DX_TILE(1)

/* One image's conv backward (nevo_conv_backward); wt: room for cap floats of the
 * layer's weights transposed. */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void conv_backward(const NevoLayer *L, const float *restrict W, const float *restrict x,
                          const float *restrict dy, float *restrict dW, float *restrict db, float *restrict dx,
                          float *restrict wt, size_t cap) {
    int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
    int OH = L->out_h, OW = L->out_w, IW = L->in_w;
    int KC = K * C;
    conv_dw(L, x, dy, dW, db);
    if (!dx) return;
    /* dx: each output pixel's nonzero dy over its window, the window cut into chunks of 8
     * floats (dx_tile, sums in registers over the filters) and single floats, from the
     * weights transposed to (out_c, k, k, in_c) in wt: in chunks of channels where wt (or
     * the chunk lists) hold fewer than all of them (each dx element lies in one chunk, so
     * its chain is the same), from W in place where they hold not one channel */
    memset(dx, 0, sizeof(float) * (size_t)L->in_dim);
    size_t taps = (size_t)F * K * K, fit = cap / taps, win = CONV_WINDOW / ((size_t)K * K);
    if (win < fit) fit = win;
    int CC = fit >= (size_t)C ? C : (int)fit; /* channels per chunk; 0: W in place */
    int doff[CONV_WINDOW / 8], woff[CONV_WINDOW / 8], sdoff[CONV_WINDOW], swoff[CONV_WINDOW];
    uint16_t fl[CONV_FILTERS];
    float fv[CONV_FILTERS];
    for (int c0 = 0; c0 < C; c0 += CC > 0 ? CC : C) {
        int cc = CC > 0 ? (C - c0 < CC ? C - c0 : CC) : C;
        if (CC == 0) {
            for (int oy = 0; oy < OH; oy++) {
                for (int ox = 0; ox < OW; ox++) {
                    const float *d = dy + ((size_t)oy * OW + ox) * F;
                    for (int f0 = 0; f0 < F; f0 += 64) {
                        int nf = F - f0 < 64 ? F - f0 : 64;
                        for (uint64_t m = nonzero_mask(d + f0, nf); m; m &= m - 1) {
                            int f = f0 + __builtin_ctzll(m);
                            float v = d[f];
                            for (int ky = 0; ky < K; ky++) {
                                float *xr = dx + ((size_t)(oy * S + ky) * IW + (size_t)ox * S) * C;
                                const float *w = W + (size_t)ky * KC * F + f;
                                for (int t = 0; t < KC; t++) xr[t] = fmaf(v, w[(size_t)t * F], xr[t]);
                            }
                        }
                    }
                }
            }
            break;
        }
        for (int f = 0; f < F; f++)
            for (int k = 0; k < K * K; k++)
                for (int c = 0; c < cc; c++) wt[((size_t)f * K * K + k) * cc + c] = W[((size_t)k * C + c0 + c) * F + f];
        /* the window's runs of contiguous floats (a row of K cc where cc == C, else one
         * (ky, kx)'s cc channels), cut into chunks of 8 and the floats left over */
        int nch = 0, ns = 0, seg = cc == C ? K : K * K, len = cc == C ? KC : cc;
        for (int s = 0; s < seg; s++) {
            int d0 = cc == C ? s * IW * C : ((s / K) * IW + s % K) * C + c0, w0 = s * len, t = 0;
            for (; len - t >= 8; t += 8) doff[nch] = d0 + t, woff[nch] = w0 + t, nch++;
            for (; t < len; t++) sdoff[ns] = d0 + t, swoff[ns] = w0 + t, ns++;
        }
        size_t fs = (size_t)K * K * cc;
        for (int oy = 0; oy < OH; oy++) {
            for (int ox = 0; ox < OW; ox++) {
                const float *d = dy + ((size_t)oy * OW + ox) * F;
                float *xw = dx + ((size_t)oy * S * IW + (size_t)ox * S) * C;
                for (int fb = 0; fb < F; fb += CONV_FILTERS) {
                    int nfb = F - fb < CONV_FILTERS ? F - fb : CONV_FILTERS, cnt = 0;
                    for (int f0 = 0; f0 < nfb; f0 += 64) {
                        uint64_t m = nonzero_mask(d + fb + f0, nfb - f0 < 64 ? nfb - f0 : 64);
                        for (; m; m &= m - 1, cnt++) {
                            int f = fb + f0 + __builtin_ctzll(m);
                            fl[cnt] = (uint16_t)f;
                            fv[cnt] = d[f];
                        }
                    }
                    if (cnt == 0) continue;
                    for (int j0 = 0, nv; j0 < nch; j0 += nv) {
                        nv = tile_of(nch - j0, 12);
                        const int *dj = doff + j0, *wj = woff + j0;
                        switch (nv) {
                        case 12: dx_tile_12(xw, dj, wj, wt, fs, fl, fv, cnt); break;
                        case 9: dx_tile_9(xw, dj, wj, wt, fs, fl, fv, cnt); break;
                        case 6: dx_tile_6(xw, dj, wj, wt, fs, fl, fv, cnt); break;
                        case 3: dx_tile_3(xw, dj, wj, wt, fs, fl, fv, cnt); break;
                        case 2: dx_tile_2(xw, dj, wj, wt, fs, fl, fv, cnt); break;
                        default: dx_tile_1(xw, dj, wj, wt, fs, fl, fv, cnt); break;
                        }
                    }
                    for (int e = 0; e < ns; e++) {
                        float a = xw[sdoff[e]];
                        for (int q = 0; q < cnt; q++) a = fmaf(fv[q], wt[fl[q] * fs + swoff[e]], a);
                        xw[sdoff[e]] = a;
                    }
                }
            }
        }
    }
}

void nevo_conv_backward(const NevoLayer *L, const float *W, const float *x, const float *dy, float *dW, float *db,
                        float *dx) {
    float wt[CONV_WT_STACK];
    conv_backward(L, W, x, dy, dW, db, dx, wt, CONV_WT_STACK);
}

NEVO_KERNEL_CLONES NEVO_VECTORIZE
void nevo_act_backward(NevoActivation act, const float *y, float *dy, int n) {
    if (act == NEVO_ACT_TANH) {
        for (int i = 0; i < n; i++) dy[i] *= fmaf(-y[i], y[i], 1.0f);
    } else if (act == NEVO_ACT_RELU) {
        for (int i = 0; i < n; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

/* ---- the whole network ----------------------------------------------------------- */

size_t nevo_grad_tape_offset(const NevoPolicy *p, int n, int l) {
    size_t off = 0;
    for (int k = 0; k < l; k++) off += (size_t)p->layers[k].out_dim;
    return off * (size_t)n;
}

/* The tape ends with a work area for the lanes layout (two buffers of NEVO_LANES rows of
 * the widest layer), used where n >= NEVO_LANES. */
static size_t lanes_floats(const NevoPolicy *p, int n) {
    return n >= NEVO_LANES ? 2 * (size_t)NEVO_LANES * (size_t)p->max_width : 0;
}

size_t nevo_grad_tape_floats(const NevoPolicy *p, int n) {
    return nevo_grad_tape_offset(p, n, p->n_layers) + (p->obs_norm ? (size_t)p->obs_dim * (size_t)n : 0) +
           lanes_floats(p, n);
}

/* the largest conv layer's weights (their transposed copy in the scratch) */
static size_t max_conv_weights(const NevoPolicy *p) {
    size_t m = 0;
    for (int l = 0; l < p->n_layers; l++)
        if (p->layers[l].kind == NEVO_LAYER_CONV && p->layers[l].b_off - p->layers[l].w_off > m)
            m = p->layers[l].b_off - p->layers[l].w_off;
    return m;
}

size_t nevo_grad_scratch_floats(const NevoPolicy *p, int n) {
    return 2 * (size_t)p->max_width * (size_t)n + max_conv_weights(p);
}

/* obs (m, obs_dim) normalised as nevo_policy_forward does, into x */
static void normalise_obs(const NevoPolicy *p, const float *obs, int m, float *x) {
    for (int r = 0; r < m; r++) {
        const float *o = obs + (size_t)r * p->obs_dim;
        float *dst = x + (size_t)r * p->obs_dim;
        for (int k = 0; k < p->obs_dim; k++) {
            float v = (o[k] - p->obs_mean[k]) / p->obs_std[k];
            dst[k] = v < -5.0f ? -5.0f : v > 5.0f ? 5.0f : v;
        }
    }
}

/* Layers [0, n_layers) of one network for m rows (inputs x, row stride xs, the rows' first
 * at row i of the tape of n rows): each layer's outputs after its activation into its
 * slab. Blocks of NEVO_LANES rows go through the lanes layout where the kernel set has
 * it, as nevo_policy_forward takes them, each layer's outputs copied out of it into the
 * slab (the same bits, kernels.h); the rest through the row kernels. */
static void forward_rows_tape(const NevoPolicy *p, const NevoKernels *K, const float *theta, const float *x, size_t xs,
                              int i, int m, int n, float *tape) {
    int r = 0;
    if (K->dense_lanes) {
        float *a = tape + nevo_grad_tape_floats(p, n) - lanes_floats(p, n);
        float *b = a + (size_t)NEVO_LANES * p->max_width;
        for (; m - r >= NEVO_LANES; r += NEVO_LANES) {
            float *src = a, *dst = b;
            K->to_lanes(x + (size_t)r * xs, xs, p->obs_dim, src);
            for (int l = 0; l < p->n_layers; l++) {
                const NevoLayer *L = &p->layers[l];
                if (L->kind == NEVO_LAYER_CONV)
                    K->conv_lanes(L, theta + L->w_off, theta + L->b_off, src, L->act, dst);
                else
                    K->dense_lanes(theta + L->w_off, theta + L->b_off, src, L->in_dim, L->out_dim, L->act, dst);
                K->from_lanes(dst, L->out_dim, tape + nevo_grad_tape_offset(p, n, l) + (size_t)(i + r) * L->out_dim,
                              (size_t)L->out_dim);
                float *t = src;
                src = dst, dst = t;
            }
        }
    }
    if (r == m) return;
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        const float *src = l == 0 ? x + (size_t)r * xs
                                  : tape + nevo_grad_tape_offset(p, n, l - 1) + (size_t)(i + r) * L->in_dim;
        size_t ss = l == 0 ? xs : (size_t)L->in_dim;
        float *dst = tape + nevo_grad_tape_offset(p, n, l) + (size_t)(i + r) * L->out_dim;
        if (L->kind == NEVO_LAYER_CONV) {
            for (int k = 0; k < m - r; k++)
                K->conv(L, theta + L->w_off, theta + L->b_off, src + (size_t)k * ss, dst + (size_t)k * L->out_dim);
        } else {
            K->dense(theta + L->w_off, theta + L->b_off, src, ss, m - r, L->in_dim, L->out_dim, dst,
                     (size_t)L->out_dim);
        }
        nevo_kernel_activate(L->act, dst, (m - r) * L->out_dim);
    }
}

void nevo_policy_forward_tape(const NevoPolicy *p, const float *params, size_t stride, const int *net,
                              const float *obs, int n, float *out, float *tape) {
    /* a recurrent policy's tape is its feed-forward parts' (p->pre, p->post) and the LSTM's */
    NEVO_ASSERT(p->lstm_layer < 0);
    const NevoKernels *K = nevo_kernels();
    float *xn = tape + nevo_grad_tape_offset(p, n, p->n_layers);
    const float *last = tape + nevo_grad_tape_offset(p, n, p->n_layers - 1);
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && net[j] == net[i]) j++;
        const float *x = obs + (size_t)i * p->obs_dim;
        if (p->obs_norm) {
            normalise_obs(p, x, j - i, xn + (size_t)i * p->obs_dim);
            x = xn + (size_t)i * p->obs_dim;
        }
        forward_rows_tape(p, K, params + (size_t)net[i] * stride, x, (size_t)p->obs_dim, i, j - i, n, tape);
        i = j;
    }
    memcpy(out, last, sizeof(float) * (size_t)n * p->n_out);
}

void nevo_policy_backward(const NevoPolicy *p, const float *params, size_t stride, const int *net, const float *obs,
                          int n, const float *tape, const float *dout, float *grads, size_t gstride, float *dobs,
                          float *scratch) {
    NEVO_ASSERT(p->lstm_layer < 0); /* as for the forward with a tape */
    size_t Wd = (size_t)p->max_width * (size_t)n;
    float *wt = scratch + 2 * Wd;
    size_t nwt = max_conv_weights(p);
    const float *xn = tape + nevo_grad_tape_offset(p, n, p->n_layers);
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && net[j] == net[i]) j++;
        int m = j - i;
        const float *theta = params + (size_t)net[i] * stride;
        float *g = grads + (size_t)net[i] * gstride;
        float *a = scratch, *b = scratch + Wd; /* dY of this layer, dX into the next */
        const float *dy = dout + (size_t)i * p->n_out;
        for (int l = p->n_layers - 1; l >= 0; l--) {
            const NevoLayer *L = &p->layers[l];
            const float *x;
            if (l > 0)
                x = tape + nevo_grad_tape_offset(p, n, l - 1) + (size_t)i * L->in_dim;
            else
                x = (p->obs_norm ? xn : obs) + (size_t)i * p->obs_dim;
            float *dx = l > 0 ? b : dobs ? dobs + (size_t)i * p->obs_dim : NULL;
            if (L->kind == NEVO_LAYER_CONV) {
                for (int r = 0; r < m; r++)
                    conv_backward(L, theta + L->w_off, x + (size_t)r * L->in_dim, dy + (size_t)r * L->out_dim,
                                  g + L->w_off, g + L->b_off, dx ? dx + (size_t)r * L->in_dim : NULL, wt, nwt);
            } else {
                nevo_dense_backward(theta + L->w_off, x, dy, m, L->in_dim, L->out_dim, g + L->w_off, g + L->b_off,
                                    dx);
            }
            if (l > 0) {
                nevo_act_backward(p->layers[l - 1].act, x, dx, m * L->in_dim);
                dy = dx;
                float *t = a;
                a = b;
                b = t;
            }
        }
        /* through the normalisation: x' = clip((x - mean) / std, +-5) */
        if (dobs && p->obs_norm) {
            for (int r = 0; r < m; r++) {
                const float *o = obs + (size_t)(i + r) * p->obs_dim;
                float *d = dobs + (size_t)(i + r) * p->obs_dim;
                for (int k = 0; k < p->obs_dim; k++) {
                    float v = (o[k] - p->obs_mean[k]) / p->obs_std[k];
                    d[k] = v < -5.0f || v > 5.0f ? 0.0f : d[k] / p->obs_std[k];
                }
            }
        }
        i = j;
    }
}

/* ---- output heads and losses ----------------------------------------------------- */

/* a row's max and sum of exp(x - max), in double */
static double row_logsumexp(const float *x, int C, double *mx) {
    float m = x[0];
    for (int c = 1; c < C; c++)
        if (x[c] > m) m = x[c];
    double s = 0.0;
    for (int c = 0; c < C; c++) s += exp((double)x[c] - (double)m);
    *mx = m;
    return log(s);
}

void nevo_softmax(const float *x, int B, int C, float *y) {
    for (int b = 0; b < B; b++) {
        const float *xr = x + (size_t)b * C;
        float *yr = y + (size_t)b * C;
        double m, lse = row_logsumexp(xr, C, &m);
        for (int c = 0; c < C; c++) yr[c] = (float)exp((double)xr[c] - m - lse);
    }
}

void nevo_log_softmax(const float *x, int B, int C, float *y) {
    for (int b = 0; b < B; b++) {
        const float *xr = x + (size_t)b * C;
        float *yr = y + (size_t)b * C;
        double m, lse = row_logsumexp(xr, C, &m);
        for (int c = 0; c < C; c++) yr[c] = (float)(((double)xr[c] - m) - lse);
    }
}

void nevo_log_softmax_backward(const float *y, const float *dy, int B, int C, float *dx) {
    for (int b = 0; b < B; b++) {
        const float *yr = y + (size_t)b * C, *dr = dy + (size_t)b * C;
        float *xr = dx + (size_t)b * C;
        double s = 0.0;
        for (int c = 0; c < C; c++) s += dr[c];
        for (int c = 0; c < C; c++) xr[c] = (float)((double)dr[c] - exp((double)yr[c]) * s);
    }
}

/* -log softmax(x)[label] of one row of C logits, in double; m and lse for its gradient */
static double row_cross_entropy(const float *x, int label, int C, double *m, double *lse) {
    NEVO_ASSERT(label >= 0 && label < C);
    *lse = row_logsumexp(x, C, m);
    return *lse - ((double)x[label] - *m);
}

double nevo_cross_entropy_sum(const float *logits, const int *labels, int B, int C) {
    double loss = 0.0, m, lse;
    for (int b = 0; b < B; b++) loss += row_cross_entropy(logits + (size_t)b * C, labels[b], C, &m, &lse);
    return loss;
}

double nevo_cross_entropy(const float *logits, const int *labels, int B, int C, float *dlogits) {
    double loss = 0.0;
    for (int b = 0; b < B; b++) {
        const float *xr = logits + (size_t)b * C;
        double m, lse;
        loss += row_cross_entropy(xr, labels[b], C, &m, &lse);
        if (dlogits) {
            float *d = dlogits + (size_t)b * C;
            for (int c = 0; c < C; c++)
                d[c] = (float)((exp((double)xr[c] - m - lse) - (c == labels[b])) / B);
        }
    }
    return B > 0 ? loss / B : 0.0;
}

double nevo_mse_loss(const float *y, const float *t, size_t n, float *dy) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - (double)t[i];
        s += 0.5 * d * d;
        if (dy) dy[i] = (float)(d / (double)n);
    }
    return n ? s / (double)n : 0.0;
}

double nevo_huber_loss(const float *y, const float *t, size_t n, float delta, float *dy) {
    double s = 0.0, dl = delta;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - (double)t[i];
        double ad = fabs(d);
        s += ad <= dl ? 0.5 * d * d : dl * (ad - 0.5 * dl);
        if (dy) dy[i] = (float)((d < -dl ? -dl : d > dl ? dl : d) / (double)n);
    }
    return n ? s / (double)n : 0.0;
}

void nevo_squash_backward(const NevoPolicy *p, const float *out, const float *dact, int n, float *dout) {
    NEVO_ASSERT(p->action_kind != NEVO_SPACE_DISCRETE);
    for (int i = 0; i < n; i++) {
        const float *o = out + (size_t)i * p->n_out;
        const float *da = dact + (size_t)i * p->action_dim;
        float *d = dout + (size_t)i * p->n_out;
        for (int j = 0; j < p->action_dim; j++) {
            double th = tanh((double)o[j]);
            double half = 0.5 * ((double)p->action_high[j] - (double)p->action_low[j]);
            d[j] = (float)((double)da[j] * (1.0 - th * th) * half);
        }
    }
}
