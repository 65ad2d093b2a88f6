/* The LSTM layer (include/nevo/lstm.h): forward with a tape, backward through time,
 * and the inference step, all on one cell function so a step and the sequence forward
 * give the same bits.
 *
 * Every matrix product goes through the kernel set's dense kernels, so it has their
 * bits on every set (kernels.h): the gates z = b + [x, h_prev] W, the carried gradient
 * dh_prev = dz Wh^T and dx = dz Wx^T (dz against a transposed copy of the weights, a
 * dense layer with a zero bias), and the weight gradient. That one sums over the T B
 * rows, so it goes with the roles swapped: row k of dW is a "row" whose inputs are
 * column k of the inputs [x, h_prev, 1] over the rows in ascending order and whose
 * "weights" are dz, so each element is one chain of fused multiply-adds in row order
 * (the trailing 1 makes the last row db). Blocks of NEVO_LANES rows go through the lanes
 * layout where the set has it; the rest through the portable outer_rows, which adds
 * the same terms in the same order. The elementwise work is plain C, compiled for each
 * ISA (NEVO_KERNEL_CLONES), whose IEEE operations round the same on all of them. */
#include "nevo/lstm.h"

#include <math.h>
#include <string.h>

#include "nevo/status.h"
#include "nn/kernels.h"

/* The inputs of a step, one row per sequence: [x (in), h_prev (H), 1]. */
static size_t xh_stride(int in, int H) { return (size_t)in + (size_t)H + 1; }

/* Work space of the row/lanes dense helper for `in` inputs and `out` outputs. */
static size_t lanes_work(size_t in, size_t out) { return (size_t)NEVO_LANES * (in + out); }

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

size_t nevo_lstm_params(int in, int H) { return ((size_t)in + (size_t)H + 1) * 4 * (size_t)H; }

NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void scaled_copy(float *dst, const float *src, float scale, size_t n) {
    for (size_t k = 0; k < n; k++) dst[k] = src[k] * scale;
}

void nevo_lstm_init(int in, int H, const float *normals, float *params) {
    NEVO_ASSERT(in >= 1 && H >= 1);
    size_t nw = ((size_t)in + (size_t)H) * 4 * (size_t)H;
    scaled_copy(params, normals, (float)(1.0 / sqrt((double)in + (double)H)), nw);
    float *b = params + nw;
    memset(b, 0, sizeof(float) * 4 * (size_t)H);
    for (int j = H; j < 2 * H; j++) b[j] = 1.0f; /* the forget gate */
}

void nevo_lstm_init_rng(int in, int H, NevoRng *rng, float *params) {
    nevo_rng_fill_normal(rng, params, ((size_t)in + (size_t)H) * 4 * (size_t)H);
    nevo_lstm_init(in, H, params, params);
}

double nevo_lstm_forward_flops(int in, int H) { return 2.0 * ((double)in + H) * 4.0 * H; }

double nevo_lstm_backward_flops(int in, int H) {
    /* dW and db, dh_prev, dx */
    return 2.0 * ((double)in + H + 1) * 4.0 * H + 2.0 * 4.0 * H * H + 2.0 * 4.0 * H * in;
}

/* ---- the tape -------------------------------------------------------------------- */

/* The tape's parts for T steps of B sequences (row (t, b) of each at t B + b). */
typedef struct Tape {
    float *c0;    /* (B, H) the initial cell state (zeros where none was given) */
    float *keep;  /* (T, B) 0 where reset[t, b], else 1 */
    float *xh;    /* (T, B, in + H + 1) each step's input [x, h_prev, 1], h_prev 0 after a reset */
    float *gates; /* (T, B, 4H) i, f, g, o after their activations */
    float *c;     /* (T, B, H) the cell state after the step */
    float *tc;    /* (T, B, H) tanh(c) */
    float *work;  /* the forward's dense work space */
} Tape;

static Tape tape_parts(float *tape, int in, int H, int T, int B) {
    size_t R = (size_t)T * B, BH = (size_t)B * H;
    Tape tp;
    tp.c0 = tape;
    tp.keep = tp.c0 + BH;
    tp.xh = tp.keep + R;
    tp.gates = tp.xh + R * xh_stride(in, H);
    tp.c = tp.gates + R * 4 * H;
    tp.tc = tp.c + R * H;
    tp.work = tp.tc + R * H;
    return tp;
}

size_t nevo_lstm_tape_floats(int in, int H, int T, int B) {
    size_t R = (size_t)T * B;
    return (size_t)B * H + R * (1 + xh_stride(in, H) + 6 * (size_t)H) +
           lanes_work((size_t)in + H, 4 * (size_t)H);
}

/* ---- products -------------------------------------------------------------------- */

/* Y (rows, out; row stride ys) = b + X (rows, in; row stride xs) W, the kernel set's
 * dense bits: blocks of NEVO_LANES rows through the lanes layout where the set has it
 * (the weights read once per block rather than once per row), the rest as rows.
 * work: lanes_work(in, out) floats. */
static void dense_rows(const NevoKernels *K, const float *W, const float *b, const float *X, size_t xs, int rows,
                       int in, int out, float *Y, size_t ys, float *work) {
    int r = 0;
    if (K->dense_lanes) {
        float *XT = work, *YT = work + (size_t)NEVO_LANES * in;
        for (; rows - r >= NEVO_LANES; r += NEVO_LANES) {
            K->to_lanes(X + (size_t)r * xs, xs, in, XT);
            K->dense_lanes(W, b, XT, in, out, NEVO_ACT_NONE, YT);
            K->from_lanes(YT, out, Y + (size_t)r * ys, ys);
        }
    }
    if (r < rows) K->dense(W, b, X + (size_t)r * xs, xs, rows - r, in, out, Y + (size_t)r * ys, ys);
}

/* G rows k0..k1 of (n, N): G[k, :] = sum over r < R, ascending, of X[r, k] D[r, :] (X
 * row stride xs, D (R, N)), each a chain of fmaf from +0 that skips a zero X[r, k]:
 * dense's sums for a row whose inputs are column k of X. Blocks of rows of G that fit
 * in L1 take a pass over D each. */
#define OUTER_BLOCK_FLOATS 8192

NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void outer_rows(const float *X, size_t xs, int k0, int k1, const float *D, int R, int N, float *G) {
    int kc = OUTER_BLOCK_FLOATS / N > 1 ? OUTER_BLOCK_FLOATS / N : 1;
    memset(G + (size_t)k0 * N, 0, sizeof(float) * (size_t)(k1 - k0) * N);
    for (int a = k0; a < k1; a += kc) {
        int e = a + kc < k1 ? a + kc : k1;
        for (int r = 0; r < R; r++) {
            const float *d = D + (size_t)r * N, *x = X + (size_t)r * xs;
            for (int k = a; k < e; k++) {
                float xv = x[k];
                if (xv == 0.0f) continue; /* +0 and -0: the term is skipped, as in the kernels */
                float *g = G + (size_t)k * N;
                for (int j = 0; j < N; j++) g[j] = fmaf(xv, d[j], g[j]);
            }
        }
    }
}

/* G (n, N) = X^T D over R rows (outer_rows' sums for every k < n): blocks of NEVO_LANES
 * columns of X through the lanes kernel, the columns as its rows and D as its weights.
 * zeros: N zeros; work: lanes_work(R, N). */
static void outer_sums(const NevoKernels *K, const float *X, size_t xs, int n, const float *D, int R, int N,
                       const float *zeros, float *G, float *work) {
    int k = 0;
    if (K->dense_lanes) {
        float *XT = work, *YT = work + (size_t)NEVO_LANES * R;
        for (; n - k >= NEVO_LANES; k += NEVO_LANES) {
            for (int r = 0; r < R; r++)
                memcpy(XT + (size_t)NEVO_LANES * r, X + (size_t)r * xs + k, sizeof(float) * NEVO_LANES);
            K->dense_lanes(D, zeros, XT, R, N, NEVO_ACT_NONE, YT);
            K->from_lanes(YT, N, G + (size_t)k * N, (size_t)N);
        }
    }
    if (k < n) outer_rows(X, xs, k, n, D, R, N, G);
}

/* WT (cols, rows) = W (rows, cols) transposed */
static void transpose(const float *W, int rows, int cols, float *WT) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) WT[(size_t)c * rows + r] = W[(size_t)r * cols + c];
}

NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void add_into(float *restrict g, const float *restrict d, size_t n) {
    for (size_t k = 0; k < n; k++) g[k] += d[k];
}

/* ---- the cell -------------------------------------------------------------------- */

NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void halve(float *z, int n) {
    for (int j = 0; j < n; j++) z[j] *= 0.5f;
}

/* sigmoid(z) from t = tanh(z / 2) */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void sigmoid_from_tanh(float *t, int n) {
    for (int j = 0; j < n; j++) t[j] = fmaf(0.5f, t[j], 0.5f);
}

/* c = fmaf(f, c_prev, i g) from gates (i, f, g, o) of one row, c_prev NULL for zeros;
 * tc = c (its tanh taken after). c may be c_prev (each element read before written). */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void cell_state(const float *gt, const float *cp, int H, float *c, float *tc) {
    const float *i = gt, *f = gt + H, *g = gt + 2 * H;
    if (cp) {
        for (int j = 0; j < H; j++) c[j] = tc[j] = fmaf(f[j], cp[j], i[j] * g[j]);
    } else {
        for (int j = 0; j < H; j++) c[j] = tc[j] = fmaf(f[j], 0.0f, i[j] * g[j]);
    }
}

NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void output_gate(const float *o, const float *tc, int H, float *h) {
    for (int j = 0; j < H; j++) h[j] = o[j] * tc[j];
}

/* One step of `rows` sequences of one network. x (rows, in); reset (rows) or NULL;
 * h_prev, c_prev (rows, H), either NULL for zeros. Writes xh (rows, in + H + 1), gates
 * (rows, 4H), c, tc, h (rows, H). c may be c_prev and h may be h_prev (the step's state
 * updated in place): h_prev is read into xh before h is written. */
static void cell(const NevoKernels *K, const float *params, int in, int H, int rows, const float *x,
                 const uint8_t *reset, const float *h_prev, const float *c_prev, float *xh, float *gates, float *c,
                 float *tc, float *h, float *work) {
    size_t xs = xh_stride(in, H), G = 4 * (size_t)H;
    for (int r = 0; r < rows; r++) {
        float *row = xh + r * xs;
        memcpy(row, x + (size_t)r * in, sizeof(float) * (size_t)in);
        if (h_prev && !(reset && reset[r]))
            memcpy(row + in, h_prev + (size_t)r * H, sizeof(float) * (size_t)H);
        else
            memset(row + in, 0, sizeof(float) * (size_t)H);
        row[in + H] = 1.0f;
    }
    dense_rows(K, params, params + ((size_t)in + H) * G, xh, xs, rows, in + H, (int)G, gates, G, work);
    /* sigmoid(z) = 0.5 tanh(z / 2) + 0.5 for i, f and o; one tanh pass over all four */
    for (int r = 0; r < rows; r++) {
        halve(gates + r * G, 2 * H);
        halve(gates + r * G + 3 * H, H);
    }
    K->tanh(gates, (int)(rows * G));
    for (int r = 0; r < rows; r++) {
        sigmoid_from_tanh(gates + r * G, 2 * H);
        sigmoid_from_tanh(gates + r * G + 3 * H, H);
    }
    for (int r = 0; r < rows; r++) {
        const float *cp = c_prev && !(reset && reset[r]) ? c_prev + (size_t)r * H : NULL;
        cell_state(gates + r * G, cp, H, c + (size_t)r * H, tc + (size_t)r * H);
    }
    K->tanh(tc, rows * H);
    for (int r = 0; r < rows; r++)
        output_gate(gates + r * G + 3 * H, tc + (size_t)r * H, H, h + (size_t)r * H);
}

/* ---- forward, step ----------------------------------------------------------------- */

void nevo_lstm_forward(const float *params, int in, int H, int T, int B, const float *x, const uint8_t *reset,
                       const float *h0, const float *c0, float *h, float *hT, float *cT, float *tape) {
    NEVO_ASSERT(in >= 1 && H >= 1 && T >= 1 && B >= 1);
    const NevoKernels *K = nevo_kernels();
    Tape tp = tape_parts(tape, in, H, T, B);
    size_t BH = (size_t)B * H, xs = xh_stride(in, H);
    if (c0)
        memcpy(tp.c0, c0, sizeof(float) * BH);
    else
        memset(tp.c0, 0, sizeof(float) * BH);
    for (int t = 0; t < T; t++) {
        const uint8_t *rs = reset ? reset + (size_t)t * B : NULL;
        for (int b = 0; b < B; b++) tp.keep[(size_t)t * B + b] = rs && rs[b] ? 0.0f : 1.0f;
        const float *hp = t == 0 ? h0 : h + (t - 1) * BH;
        const float *cp = t == 0 ? tp.c0 : tp.c + (t - 1) * BH;
        size_t row = (size_t)t * B;
        cell(K, params, in, H, B, x + row * in, rs, hp, cp, tp.xh + row * xs, tp.gates + row * 4 * H,
             tp.c + row * H, tp.tc + row * H, h + row * H, tp.work);
    }
    if (hT) memcpy(hT, h + (T - 1) * BH, sizeof(float) * BH);
    if (cT) memcpy(cT, tp.c + (T - 1) * BH, sizeof(float) * BH);
}

size_t nevo_lstm_step_scratch_floats(int in, int H, int B) {
    return (size_t)B * (xh_stride(in, H) + 5 * (size_t)H) + lanes_work((size_t)in + H, 4 * (size_t)H);
}

void nevo_lstm_step(const float *params, size_t stride, const int *net, int in, int H, int B, const float *x,
                    const uint8_t *reset, float *h, float *c, float *scratch) {
    NEVO_ASSERT(in >= 1 && H >= 1 && B >= 1);
    const NevoKernels *K = nevo_kernels();
    size_t xs = xh_stride(in, H), G = 4 * (size_t)H;
    float *xh = scratch, *gates = xh + (size_t)B * xs, *tc = gates + (size_t)B * G, *work = tc + (size_t)B * H;
    /* each run of rows that share a network in one call, the weights read once per run */
    for (int i = 0; i < B;) {
        int j = i + 1;
        while (j < B && (!net || net[j] == net[i])) j++;
        const float *p = params + (net ? (size_t)net[i] * stride : 0);
        cell(K, p, in, H, j - i, x + (size_t)i * in, reset ? reset + i : NULL, h + (size_t)i * H,
             c + (size_t)i * H, xh + i * xs, gates + i * G, c + (size_t)i * H, tc + (size_t)i * H,
             h + (size_t)i * H, work);
        i = j;
    }
}

/* ---- backward ---------------------------------------------------------------------- */

/* One row of a step's backward: from the gates (i, f, g, o), tanh(c), c_prev (zeros
 * where reset), dh (this step's dL/dh, the output's plus the carried one) and dcc (the
 * carried dL/dc), dz (4H) = dL/d(the gate sums), and dcc becomes dL/dc_prev. */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void cell_backward(const float *gt, const float *tc, const float *cp, const float *dh_out,
                          const float *dh_carry, int H, float *dcc, float *dz) {
    const float *gi = gt, *gf = gt + H, *gg = gt + 2 * H, *go = gt + 3 * H;
    for (int j = 0; j < H; j++) {
        float i = gi[j], f = gf[j], g = gg[j], o = go[j], t = tc[j];
        float dh = dh_out[j] + dh_carry[j];
        float dc = dcc[j] + (dh * o) * (1.0f - t * t);
        dz[j] = (dc * g) * (i * (1.0f - i));
        dz[H + j] = (dc * cp[j]) * (f * (1.0f - f));
        dz[2 * H + j] = (dc * i) * (1.0f - g * g);
        dz[3 * H + j] = (dh * t) * (o * (1.0f - o));
        dcc[j] = dc * f;
    }
}

size_t nevo_lstm_backward_scratch_floats(int in, int H, int T, int B) {
    size_t R = (size_t)T * B, G = 4 * (size_t)H;
    size_t zeros = max_size(G, (size_t)in);
    size_t work = (size_t)NEVO_LANES * (max_size(R, G) + max_size(G, (size_t)in));
    return G * H + G * in + R * G + 2 * (size_t)B * H + zeros + xh_stride(in, H) * G + work;
}

void nevo_lstm_backward(const float *params, int in, int H, int T, int B, const float *tape, const float *dh,
                        const float *dhT, const float *dcT, float *grad, float *dx, float *dh0, float *dc0,
                        float *scratch) {
    NEVO_ASSERT(in >= 1 && H >= 1 && T >= 1 && B >= 1);
    const NevoKernels *K = nevo_kernels();
    Tape tp = tape_parts((float *)tape, in, H, T, B); /* read only */
    size_t R = (size_t)T * B, G = 4 * (size_t)H, BH = (size_t)B * H, xs = xh_stride(in, H);
    size_t nzeros = max_size(G, (size_t)in);
    float *WhT = scratch, *WxT = WhT + G * H, *dz = WxT + G * in, *dhc = dz + R * G, *dcc = dhc + BH;
    float *zeros = dcc + BH, *gsum = zeros + nzeros, *work = gsum + xs * G;
    memset(zeros, 0, sizeof(float) * nzeros);
    transpose(params + (size_t)in * G, H, (int)G, WhT);
    if (dx) transpose(params, in, (int)G, WxT);

    /* the carried gradients: into the final state, then into each step's input state */
    if (dhT)
        memcpy(dhc, dhT, sizeof(float) * BH);
    else
        memset(dhc, 0, sizeof(float) * BH);
    if (dcT)
        memcpy(dcc, dcT, sizeof(float) * BH);
    else
        memset(dcc, 0, sizeof(float) * BH);
    for (int t = T - 1; t >= 0; t--) {
        size_t row = (size_t)t * B;
        for (int b = 0; b < B; b++) {
            size_t rb = row + b;
            const float *cp = tp.keep[rb] == 0.0f ? zeros : t == 0 ? tp.c0 + (size_t)b * H : tp.c + (rb - B) * H;
            cell_backward(tp.gates + rb * G, tp.tc + rb * H, cp, dh ? dh + rb * H : zeros, dhc + (size_t)b * H, H,
                          dcc + (size_t)b * H, dz + rb * G);
        }
        /* dL/dh_prev = dz Wh^T; nothing crosses a reset */
        if (t > 0 || dh0) dense_rows(K, WhT, zeros, dz + row * G, G, B, (int)G, H, dhc, (size_t)H, work);
        for (int b = 0; b < B; b++) {
            if (tp.keep[row + b] != 0.0f) continue;
            memset(dhc + (size_t)b * H, 0, sizeof(float) * (size_t)H);
            memset(dcc + (size_t)b * H, 0, sizeof(float) * (size_t)H);
        }
    }
    if (dh0) memcpy(dh0, dhc, sizeof(float) * BH);
    if (dc0) memcpy(dc0, dcc, sizeof(float) * BH);

    /* (dW; db) = [x, h_prev, 1]^T dz over every row, then added to grad */
    outer_sums(K, tp.xh, xs, (int)xs, dz, (int)R, (int)G, zeros, gsum, work);
    add_into(grad, gsum, xs * G);
    if (dx) dense_rows(K, WxT, zeros, dz, G, (int)R, (int)G, in, dx, (size_t)in, work);
}
