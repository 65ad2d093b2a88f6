/* Kernel bodies shared by the CPU and the CUDA backend (internal), in C that the C
 * compiler builds for the host and nvcc for the device.
 *
 * A CUDA kernel here is a grid of blocks of threads running phases separated by
 * barriers; each phase is a function of (block, thread) and the memory it names, so
 * tests/test_cuda.c runs the same index arithmetic on the CPU by looping over the grid
 * phase by phase (every thread of a block through one phase before any starts the next),
 * and src/nn/backend_cuda.cu's kernels call these functions between __syncthreads().
 *
 * Every output is the CPU kernels' sum in their order (kernels.h): the bias, then one
 * fused multiply-add per nonzero input, ascending; then nevo's tanh or the relu. So the
 * CUDA forward gives the CPU's bits, on a device built without contraction and with
 * IEEE division (the Makefile's NVCCFLAGS: --fmad=false, -prec-div=true). */
#ifndef NEVO_KERNEL_BODIES_H
#define NEVO_KERNEL_BODIES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define NEVO_HD static inline __host__ __device__
#else
#include <math.h>
#include <stdlib.h>
#define NEVO_HD static inline
#endif
/* loops the device code unrolls, so register arrays indexed by their counters stay in
 * registers (nothing on the host) */
#ifdef __CUDA_ARCH__
#define NEVO_UNROLL _Pragma("unroll")
#define NEVO_UNROLL_4 _Pragma("unroll 4")
#else
#define NEVO_UNROLL
#define NEVO_UNROLL_4
#endif

/* nevo_tanhf's constants (kernels.h says how it is built and how close it is), shared
 * with the SIMD versions so every path computes the same operations on the same values */
#define NEVO_TANH_CLAMP 9.0f
#define NEVO_TANH_INV_LN2 1.44269504f
#define NEVO_TANH_LN2_HI 0.693145751953125f /* ln 2 to 16 bits: n LN2_HI is exact */
#define NEVO_TANH_LN2_LO 1.42860682e-06f    /* ln 2 - LN2_HI */
#define NEVO_TANH_SHIFTER 12582912.0f       /* 1.5 x 2^23: adding it rounds to an integer */
/* h(r) = (e^r - 1 - r) / r^2 = 1/2! + r/3! + ... + r^6/8!, evaluated from the top */
#define NEVO_TANH_H6 (1.0f / 40320)
#define NEVO_TANH_H5 (1.0f / 5040)
#define NEVO_TANH_H4 (1.0f / 720)
#define NEVO_TANH_H3 (1.0f / 120)
#define NEVO_TANH_H2 (1.0f / 24)
#define NEVO_TANH_H1 (1.0f / 6)
#define NEVO_TANH_H0 0.5f

/* nevo_tanhf: the CPU's portable function and the CUDA kernels both call this body */
NEVO_HD float nevo_tanh_body(float x) {
    float ax = fabsf(x);
    if (!(ax < NEVO_TANH_CLAMP)) return x != x ? x : copysignf(1.0f, x);
    float z = ax + ax;
    float t = fmaf(z, NEVO_TANH_INV_LN2, NEVO_TANH_SHIFTER);
    float n = t - NEVO_TANH_SHIFTER; /* round(z / ln2), 0..26 */
    float r = fmaf(-n, NEVO_TANH_LN2_HI, z);
    r = fmaf(-n, NEVO_TANH_LN2_LO, r);
    float h = NEVO_TANH_H6;
    h = fmaf(h, r, NEVO_TANH_H5);
    h = fmaf(h, r, NEVO_TANH_H4);
    h = fmaf(h, r, NEVO_TANH_H3);
    h = fmaf(h, r, NEVO_TANH_H2);
    h = fmaf(h, r, NEVO_TANH_H1);
    h = fmaf(h, r, NEVO_TANH_H0);
    float p = fmaf(r * r, h, r); /* e^r - 1 */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits); /* n sits in t's low mantissa bits */
    bits = (bits << 23) + 0x3F800000u;
    float s;
    memcpy(&s, &bits, sizeof s);      /* 2^n */
    float em1 = fmaf(s, p, s - 1.0f); /* e^z - 1; s - 1 is exact up to n = 24 */
    return copysignf(em1 / (em1 + 2.0f), x);
}

/* act(y): 0 tanh, 1 relu (NaN and -0 stay), 2 none (NevoActivation's values) */
NEVO_HD float nevo_k_act(int act, float y) {
    return act == 0 ? nevo_tanh_body(y) : act == 1 ? (y < 0.0f ? 0.0f : y) : y;
}

/* ---- low-rank perturbations (params.h: nevo_lowrank_expand) --------------------------
 * The parameter vector as blocks in layout order, each a matrix (rows, cols) whose
 * compact noise is A (rows, rank) then B (cols, rank) at z_off, or a bias (rows 0) whose
 * noise is its own floats at z_off. */
typedef struct NevoLRBlock {
    size_t off, z_off;
    int rows, cols;
} NevoLRBlock;

/* a matrix element's eps from its row of A and its row of B: their fused sum over q
 * ascending from 0, times c */
NEVO_HD float nevo_lr_ab(const float *a, const float *b, int rank, float c) {
    float s = 0.0f;
    for (int q = 0; q < rank; q++) s = fmaf(a[q], b[q], s);
    return s * c;
}

/* eps of parameter k, which lies in block bl: a matrix element's fused sum of A[a][q]
 * B[b][q] over q ascending from 0, times c = (float)(1 / sqrt(rank)); a bias's own float */
NEVO_HD float nevo_lr_eps(const NevoLRBlock *bl, int rank, float c, const float *z, size_t k) {
    size_t e = k - bl->off;
    if (bl->rows == 0) return z[bl->z_off + e];
    size_t cols = (size_t)bl->cols, R = (size_t)rank;
    const float *a = z + bl->z_off + (e / cols) * R, *b = z + bl->z_off + (size_t)bl->rows * R + (e % cols) * R;
    return nevo_lr_ab(a, b, rank, c);
}

/* the block holding parameter k (blocks ascending by off, covering 0 .. nparams - 1) */
NEVO_HD const NevoLRBlock *nevo_lr_block(const NevoLRBlock *bl, int n, size_t k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (bl[mid].off <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &bl[lo];
}

/* ---- recipes: networks read as they are made, never built ---------------------------
 * A network as its recipe, each weight made as nevo_kb_elems builds it: base[k] + d or
 * base[k] - d by sign, d = sigma eps_k, eps_k the noise slice's float k or (rank > 0)
 * nevo_lr_eps of the compact slice; eps NULL: the base as it is. The listed-inputs
 * dense kernel can read a run's network this way. */
typedef struct NevoKRecipe {
    const float *base, *eps;
    float sigma;
    int sign;
    int rank;                  /* low rank: its rank, the policy's blocks and */
    const NevoLRBlock *blocks;
    int n_blocks;
    float c;                   /* (float)(1 / sqrt(rank)) */
} NevoKRecipe;

/* weight k of the recipe, its eps given */
NEVO_HD float nevo_kr_made(const NevoKRecipe *r, size_t k, float ek) {
    float th = r->base[k], d = r->sigma * ek;
    return r->sign > 0 ? th + d : th - d;
}

/* weight k of the recipe */
NEVO_HD float nevo_kr_weight(const NevoKRecipe *r, size_t k) {
    if (!r->eps) return r->base[k];
    return nevo_kr_made(r, k, r->rank ? nevo_lr_eps(nevo_lr_block(r->blocks, r->n_blocks, k), r->rank, r->c,
                                                    r->eps, k)
                                      : r->eps[k]);
}

/* weight k of a low-rank recipe whose factor rows are known: a (the row's A) and b (the
 * column's B), nevo_lr_eps without its index arithmetic */
NEVO_HD float nevo_kr_weight_ab(const NevoKRecipe *r, size_t k, const float *a, const float *b) {
    return nevo_kr_made(r, k, nevo_lr_ab(a, b, r->rank, r->c));
}

/* ---- dense: Y = act(b + X W) for runs of rows that share a network -------------------
 * Grid (n_runs, ceil(out / NEVO_KD_COLS)); a block is one warp and one run: up to
 * NEVO_KD_ROWS consecutive rows with one network (the host splits the call's rows into
 * runs), so each weight is read once for all of them. Lane t owns outputs j0 .. j0 + 3,
 * j0 = blockIdx.y NEVO_KD_COLS + NEVO_KD_NJ t (one 16-byte load of weights where their
 * rows are 16-byte aligned, a.vec), for every row of the run: NEVO_KD_ROWS x NEVO_KD_NJ
 * sums in registers, so each input read from the shared tile feeds 4 FMAs, and each
 * weight loaded feeds one FMA per row. Inputs come through a shared tile of NEVO_KD_KC
 * inputs x NEVO_KD_ROWS rows, input-major (the rows of one input side by side). The
 * phases take the arguments by value (a kernel's parameters, never copied to memory once
 * inlined). dev/cuda/NOTES.md has the variants measured. */
#define NEVO_KD_ROWS 16
#define NEVO_KD_NJ 4
#define NEVO_KD_THREADS 32
#define NEVO_KD_COLS (NEVO_KD_THREADS * NEVO_KD_NJ)
#define NEVO_KD_KC 64

typedef struct NevoKDense {
    const float *params; /* row q's network at params + q stride */
    size_t stride;
    const int *which;    /* (n) each row's network */
    const int *runs;     /* (n_runs + 1) the first row of each run, then n */
    const float *X;      /* (n, xs) */
    int xs, in, out;
    size_t w_off, b_off; /* W (in, out) row-major, b (out) within a network */
    int act;
    int vec;             /* every weight row starts on 16 bytes (out, w_off, stride and
                          * params all multiples of 4 floats) */
    float *Y;            /* (n, ys) */
    int ys;
    const NevoKRecipe *rec; /* the listed kernel: NULL, network which[i] is at params +
                             * which[i] stride; else it is the recipe rec[which[i]] */
} NevoKDense;

/* The call's rows as runs of at most max_rows consecutive rows with one network:
 * runs[u] is run u's first row, runs[n_runs] = n (room for n + 1); returns n_runs. */
NEVO_HD int nevo_kd_runs(const int *which, int n, int max_rows, int *runs) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || which[i] != which[i - 1] || i - runs[m - 1] == max_rows) runs[m++] = i;
    runs[m] = n;
    return m;
}

/* phase 1: acc[r NJ + q] = the bias of output j0 + q */
NEVO_HD void nevo_kd_init(NevoKDense a, int run, int cblock, int t, float *acc) {
    int j0 = cblock * NEVO_KD_COLS + t * NEVO_KD_NJ;
    if (j0 >= a.out) return;
    const float *b = a.params + (size_t)a.which[a.runs[run]] * a.stride + a.b_off + (size_t)j0;
    NEVO_UNROLL
    for (int q = 0; q < NEVO_KD_NJ; q++) {
        float bq = j0 + q < a.out ? b[q] : 0.0f;
        NEVO_UNROLL
        for (int r = 0; r < NEVO_KD_ROWS; r++) acc[r * NEVO_KD_NJ + q] = bq;
    }
}

/* phase 2 (per tile k0): the tile of inputs k0 .. k0 + NEVO_KD_KC - 1 of the run's rows */
NEVO_HD void nevo_kd_load(NevoKDense a, int run, int t, int k0, float *tile) {
    int row0 = a.runs[run], cnt = a.runs[run + 1] - row0;
    for (int e = t; e < NEVO_KD_KC * cnt; e += NEVO_KD_THREADS) {
        int r = e / NEVO_KD_KC, kk = e - r * NEVO_KD_KC, k = k0 + kk;
        tile[kk * NEVO_KD_ROWS + r] = k < a.in ? a.X[(size_t)(row0 + r) * a.xs + k] : 0.0f;
    }
}

/* NEVO_KD_NJ weights of one input row from w (those past the layer's outputs 0): one
 * 16-byte read where w is on 16 bytes (vec) */
NEVO_HD void nevo_kd_weights(const float *w, int vec, int valid, float *out) {
#ifdef __CUDA_ARCH__
    if (vec) {
        float4 v = *(const float4 *)w;
        out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
        return;
    }
#else
    if (vec && ((uintptr_t)w & 15) != 0) abort(); /* the device's 16-byte read would fault */
#endif
    for (int q = 0; q < NEVO_KD_NJ; q++) out[q] = q < valid ? w[q] : 0.0f;
}

/* phase 3 (per tile k0): each row's sums over the tile's nonzero inputs, ascending */
NEVO_HD void nevo_kd_accum(NevoKDense a, int run, int cblock, int t, int k0, const float *tile,
                           float *acc) {
    int j0 = cblock * NEVO_KD_COLS + t * NEVO_KD_NJ;
    if (j0 >= a.out) return;
    int row0 = a.runs[run], cnt = a.runs[run + 1] - row0, valid = a.out - j0;
    int kn = a.in - k0 < NEVO_KD_KC ? a.in - k0 : NEVO_KD_KC;
    const float *W = a.params + (size_t)a.which[row0] * a.stride + a.w_off + (size_t)k0 * a.out + j0;
    NEVO_UNROLL_4
    for (int kk = 0; kk < kn; kk++) {
        float w[NEVO_KD_NJ];
        nevo_kd_weights(W + (size_t)kk * a.out, a.vec, valid, w);
        const float *x = tile + kk * NEVO_KD_ROWS;
        NEVO_UNROLL
        for (int r = 0; r < NEVO_KD_ROWS; r++) {
            if (r >= cnt) continue;
            float xv = x[r];
            if (xv == 0.0f) continue; /* zero inputs skipped */
            for (int q = 0; q < NEVO_KD_NJ; q++) acc[r * NEVO_KD_NJ + q] = fmaf(xv, w[q], acc[r * NEVO_KD_NJ + q]);
        }
    }
}

/* phase 4: the activation, written out */
NEVO_HD void nevo_kd_store(NevoKDense a, int run, int cblock, int t, const float *acc) {
    int j0 = cblock * NEVO_KD_COLS + t * NEVO_KD_NJ;
    if (j0 >= a.out) return;
    int row0 = a.runs[run], cnt = a.runs[run + 1] - row0;
    NEVO_UNROLL
    for (int r = 0; r < NEVO_KD_ROWS; r++)
        NEVO_UNROLL
        for (int q = 0; q < NEVO_KD_NJ; q++)
            if (r < cnt && j0 + q < a.out)
                a.Y[(size_t)(row0 + r) * a.ys + (size_t)(j0 + q)] = nevo_k_act(a.act, acc[r * NEVO_KD_NJ + q]);
}

#ifdef __CUDACC__
/* A dense block (one warp, grid (n_runs, ceil(out / NEVO_KD_COLS))): the phases above
 * between barriers, as the CPU test runs them. */
static __device__ __forceinline__ void nevo_kd_block(NevoKDense a) {
    __shared__ float tile[NEVO_KD_KC * NEVO_KD_ROWS];
    float acc[NEVO_KD_ROWS * NEVO_KD_NJ];
    int run = blockIdx.x, cb = blockIdx.y, t = threadIdx.x;
    nevo_kd_init(a, run, cb, t, acc);
    for (int k0 = 0; k0 < a.in; k0 += NEVO_KD_KC) {
        nevo_kd_load(a, run, t, k0, tile);
        __syncthreads();
        nevo_kd_accum(a, run, cb, t, k0, tile, acc);
        __syncthreads();
    }
    nevo_kd_store(a, run, cb, t, acc);
}
#endif

/* ---- dense, inputs listed: runs of up to NEVO_KD1_ROWS rows -------------------------
 * Grid (n_runs, ceil(out / NEVO_KD_COLS)); a block is one warp and one run of up to
 * `rows` consecutive rows with one network (a.runs, split by nevo_kd1_runs below;
 * a.runs NULL: run u is row u alone); lane t owns outputs j0 .. j0 + 3 as above. Per tile
 * of NEVO_KD1_KC inputs: phase 1 loads the run's inputs, phase 2 lists the inputs that
 * are nonzero in some row, ascending, phase 3 reads only their weight rows,
 * NEVO_KD1_FLIGHT 16-byte loads a lane in flight, and each weight feeds an FMA in every
 * row whose input is nonzero. So an input zero in all rows costs no weight bytes (ReLU
 * layers' inputs are about half zeros), a weight read serves the run's rows, and the sums
 * are nevo_kd_accum's: the bias, then one FMA per nonzero input, ascending. `rows` is a
 * constant of each kernel (1 for calls of one row a network, the GA's and ES's shape). */
#define NEVO_KD1_KC 256
#define NEVO_KD1_FLIGHT 8
#define NEVO_KD1_ROWS 16 /* the most rows a run: a lane's sums are rows x NEVO_KD_NJ */
#define NEVO_KD1_ROWS_DEFAULT 8 /* the backend's (NEVO_CUDA_DENSE_ROWS to change) */

/* The call's runs for the listed kernel: of up to max_rows rows, halved while they make
 * fewer than min_runs blocks (few rows of one network then get more warps reading its
 * weights, each warp's loads in flight being what bounds such a call; the sums do not
 * depend on the runs). *rows: the kernel's most rows a run, 1 where every run is one. */
NEVO_HD int nevo_kd1_runs(const int *which, int n, int max_rows, int min_runs, int *runs, int *rows) {
    int r = max_rows, m = nevo_kd_runs(which, n, r, runs);
    while (r > 1 && m < min_runs) {
        r /= 2;
        m = nevo_kd_runs(which, n, r, runs);
    }
    *rows = m == n ? 1 : r;
    return m;
}

/* The shared tile: x (rows, NEVO_KD1_KC) inputs row-major; idx[0 .. cnt - 1] the listed
 * inputs' places in a row, ascending, and idx[NEVO_KD1_KC] = cnt. */

/* run's first row in *row0; returns its count of rows */
NEVO_HD int nevo_kd1_run(NevoKDense a, int run, int *row0) {
    if (!a.runs) {
        *row0 = run;
        return 1;
    }
    *row0 = a.runs[run];
    return a.runs[run + 1] - *row0;
}

/* phase 0: acc[r NJ + q] = the bias of output j0 + q, every row r < rows */
NEVO_HD void nevo_kd1_init(NevoKDense a, int run, int cblock, int t, int rows, float *acc) {
    int j0 = cblock * NEVO_KD_COLS + t * NEVO_KD_NJ, row0;
    if (j0 >= a.out) return;
    nevo_kd1_run(a, run, &row0);
    float b[NEVO_KD_NJ];
    if (a.rec) {
        const NevoKRecipe *r = &a.rec[a.which[row0]];
        NEVO_UNROLL
        for (int q = 0; q < NEVO_KD_NJ; q++)
            b[q] = j0 + q < a.out ? nevo_kr_weight(r, a.b_off + (size_t)(j0 + q)) : 0.0f;
    } else {
        const float *bp = a.params + (size_t)a.which[row0] * a.stride + a.b_off + (size_t)j0;
        NEVO_UNROLL
        for (int q = 0; q < NEVO_KD_NJ; q++) b[q] = j0 + q < a.out ? bp[q] : 0.0f;
    }
    NEVO_UNROLL
    for (int r = 0; r < NEVO_KD1_ROWS; r++) {
        if (r >= rows) break;
        NEVO_UNROLL
        for (int q = 0; q < NEVO_KD_NJ; q++) acc[r * NEVO_KD_NJ + q] = b[q];
    }
}

/* phase 1 (per tile k0): the rows past the run's count load zeros */
NEVO_HD void nevo_kd1_load(NevoKDense a, int run, int t, int k0, int rows, float *x) {
    int row0, cnt = nevo_kd1_run(a, run, &row0);
    for (int e = t; e < NEVO_KD1_KC * rows; e += NEVO_KD_THREADS) {
        int r = e / NEVO_KD1_KC, k = k0 + e - r * NEVO_KD1_KC;
        x[e] = r < cnt && k < a.in ? a.X[(size_t)(row0 + r) * a.xs + (size_t)k] : 0.0f;
    }
}

/* phase 2: the list, by the warp's votes on the device and by lane 0 here (the same
 * list: a listed input's place is the count of listed inputs before it) */
NEVO_HD void nevo_kd1_list(int t, int rows, const float *x, int *idx) {
#ifdef __CUDA_ARCH__
    int m = 0;
    for (int base = 0; base < NEVO_KD1_KC; base += NEVO_KD_THREADS) {
        int e = base + t, nz = 0;
        for (int r = 0; r < rows; r++) nz |= x[r * NEVO_KD1_KC + e] != 0.0f;
        unsigned vote = __ballot_sync(0xffffffffu, nz);
        if (nz) idx[m + __popc(vote & ((1u << t) - 1u))] = e;
        m += __popc(vote);
    }
    if (t == 0) idx[NEVO_KD1_KC] = m;
#else
    if (t != 0) return;
    int m = 0;
    for (int e = 0; e < NEVO_KD1_KC; e++) {
        int nz = 0;
        for (int r = 0; r < rows; r++) nz |= x[r * NEVO_KD1_KC + e] != 0.0f;
        if (nz) idx[m++] = e;
    }
    idx[NEVO_KD1_KC] = m;
#endif
}

/* phase 3 (per tile k0) */
NEVO_HD void nevo_kd1_accum(NevoKDense a, int run, int cblock, int t, int k0, int rows, const float *x,
                            const int *idx, float *acc) {
    int j0 = cblock * NEVO_KD_COLS + t * NEVO_KD_NJ, row0;
    if (j0 >= a.out) return;
    nevo_kd1_run(a, run, &row0);
    int valid = a.out - j0, cnt = idx[NEVO_KD1_KC];
    const float *W = a.rec ? NULL : a.params + (size_t)a.which[row0] * a.stride + a.w_off + (size_t)k0 * a.out + j0;
    const NevoKRecipe *r = a.rec ? &a.rec[a.which[row0]] : NULL;
    const NevoLRBlock *bw = r && r->rank ? nevo_lr_block(r->blocks, r->n_blocks, a.w_off) : NULL; /* W's first */
    const float *ab = NULL, *bb = NULL; /* W one block: A's first row and this lane's first row of B */
    if (bw && r->eps && bw->off == a.w_off && bw->rows == a.in && bw->cols == a.out) {
        ab = r->eps + bw->z_off;
        bb = ab + (size_t)bw->rows * (size_t)r->rank + (size_t)j0 * (size_t)r->rank;
    }
    size_t r0 = a.w_off + (size_t)k0 * (size_t)a.out + (size_t)j0; /* the recipe's index of W's tile */
    for (int u = 0; u < cnt; u += NEVO_KD1_FLIGHT) {
        float w[NEVO_KD1_FLIGHT][NEVO_KD_NJ];
        NEVO_UNROLL
        for (int f = 0; f < NEVO_KD1_FLIGHT; f++) {
            if (u + f >= cnt) continue;
            if (!r) {
                nevo_kd_weights(W + (size_t)idx[u + f] * a.out, a.vec, valid, w[f]);
                continue;
            }
            size_t k = r0 + (size_t)idx[u + f] * (size_t)a.out;
            if (ab) { /* W's block is this layer's (in, out): A's row is the input, B's the output */
                const float *ar = ab + (size_t)(k0 + idx[u + f]) * (size_t)r->rank;
                NEVO_UNROLL
                for (int q = 0; q < NEVO_KD_NJ; q++)
                    w[f][q] = q < valid ? nevo_kr_weight_ab(r, k + (size_t)q, ar, bb + (size_t)q * (size_t)r->rank)
                                        : 0.0f;
                continue;
            }
            NEVO_UNROLL /* full rank, or W in several blocks: each weight's own block */
            for (int q = 0; q < NEVO_KD_NJ; q++) w[f][q] = q < valid ? nevo_kr_weight(r, k + (size_t)q) : 0.0f;
        }
        NEVO_UNROLL
        for (int f = 0; f < NEVO_KD1_FLIGHT; f++) {
            if (u + f >= cnt) break;
            NEVO_UNROLL
            for (int rr = 0; rr < NEVO_KD1_ROWS; rr++) {
                if (rr >= rows) break;
                float xv = x[rr * NEVO_KD1_KC + idx[u + f]];
                if (rows > 1 && xv == 0.0f) continue; /* zero inputs skipped, row by row (a
                                                         run of one lists only nonzero ones) */
                NEVO_UNROLL
                for (int q = 0; q < NEVO_KD_NJ; q++)
                    acc[rr * NEVO_KD_NJ + q] = fmaf(xv, w[f][q], acc[rr * NEVO_KD_NJ + q]);
            }
        }
    }
}

/* phase 4 */
NEVO_HD void nevo_kd1_store(NevoKDense a, int run, int cblock, int t, int rows, const float *acc) {
    int j0 = cblock * NEVO_KD_COLS + t * NEVO_KD_NJ, row0;
    if (j0 >= a.out) return;
    int cnt = nevo_kd1_run(a, run, &row0);
    NEVO_UNROLL
    for (int r = 0; r < NEVO_KD1_ROWS; r++) {
        if (r >= rows || r >= cnt) break;
        NEVO_UNROLL
        for (int q = 0; q < NEVO_KD_NJ; q++)
            if (j0 + q < a.out)
                a.Y[(size_t)(row0 + r) * a.ys + (size_t)(j0 + q)] = nevo_k_act(a.act, acc[r * NEVO_KD_NJ + q]);
    }
}

#ifdef __CUDACC__
extern "C++" { /* the header may be included inside extern "C" */
template <int ROWS> static __device__ __forceinline__ void nevo_kd1_block(NevoKDense a) {
    static_assert(ROWS >= 1 && ROWS <= NEVO_KD1_ROWS, "a run's rows");
    __shared__ float x[ROWS * NEVO_KD1_KC];
    __shared__ int idx[NEVO_KD1_KC + 1];
    float acc[ROWS * NEVO_KD_NJ];
    int run = blockIdx.x, cb = blockIdx.y, t = threadIdx.x;
    nevo_kd1_init(a, run, cb, t, ROWS, acc);
    for (int k0 = 0; k0 < a.in; k0 += NEVO_KD1_KC) {
        nevo_kd1_load(a, run, t, k0, ROWS, x);
        __syncthreads();
        nevo_kd1_list(t, ROWS, x, idx);
        __syncthreads();
        nevo_kd1_accum(a, run, cb, t, k0, ROWS, x, idx, acc);
        __syncthreads();
    }
    nevo_kd1_store(a, run, cb, t, ROWS, acc);
}
}
#endif

/* ---- the tiled dense kernel (k_dense_t): long runs of one network --------------------
 * For calls with many rows a network (a shared θ's members, a GA's children gathered by
 * parent, an actor's envs), where the listed kernel's warp a run of 8 leaves most of the
 * device idle. A matrix product tiled as usual: grid (runs of up to NEVO_KT_ROWS rows,
 * ceil(out / NEVO_KT_COLS)), block NEVO_KT_THREADS as 16 x 16, thread t the NEVO_KT_TR
 * rows from NEVO_KT_TR (t / 16) and the NEVO_KT_TC outputs from NEVO_KT_TC (t % 16) of
 * its block's tile. Per tile of NEVO_KT_KC inputs, phase 1 (nevo_kt_load) stages the
 * run's inputs (input-major, rows side by side, NEVO_KT_XS floats an input so the stores
 * miss each other's banks) and the weights in shared memory; phase 2 (nevo_kt_accum)
 * runs the thread's sums over them. No split of the inputs: each sum is the bias, then
 * one FMA per nonzero input, ascending (a zero input leaves it as it is, by a select),
 * so nevo_kd_accum's bits. Small tiles (32 x 32) for the calls it is for: 1,024 rows of
 * a few networks make 128 blocks or more. Networks are rows of a.params (a.rec unread:
 * recipes go through the listed kernel only). */
#define NEVO_KT_ROWS 32
#define NEVO_KT_COLS 32
#define NEVO_KT_TR (NEVO_KT_ROWS / 16)
#define NEVO_KT_TC (NEVO_KT_COLS / 16)
#define NEVO_KT_KC 32
#define NEVO_KT_XS (NEVO_KT_ROWS + 1)
#define NEVO_KT_THREADS 256
#define NEVO_KT_SUMS (NEVO_KT_TR * NEVO_KT_TC)
/* the phases below index threads as 16 x 16 over whole rows and outputs of the tile */
#ifdef __cplusplus
static_assert(NEVO_KT_THREADS == 256 && NEVO_KT_ROWS % 16 == 0 && NEVO_KT_COLS % 16 == 0, "tile layout");
#else
_Static_assert(NEVO_KT_THREADS == 256 && NEVO_KT_ROWS % 16 == 0 && NEVO_KT_COLS % 16 == 0, "tile layout");
#endif

/* phase 0: acc[r TC + q] = the bias of the thread's output q */
NEVO_HD void nevo_kt_init(NevoKDense a, int run, int cblock, int t, float *acc) {
    int j0 = cblock * NEVO_KT_COLS + NEVO_KT_TC * (t % 16);
    const float *b = a.params + (size_t)a.which[a.runs[run]] * a.stride + a.b_off;
    NEVO_UNROLL
    for (int q = 0; q < NEVO_KT_TC; q++) {
        float bq = j0 + q < a.out ? b[j0 + q] : 0.0f;
        NEVO_UNROLL
        for (int r = 0; r < NEVO_KT_TR; r++) acc[r * NEVO_KT_TC + q] = bq;
    }
}

/* phase 1 (per tile k0): x[kk XS + r] the run's row r's input k0 + kk (0 past the run or
 * the inputs), w[kk COLS + jj] the weight of input k0 + kk to output j0 + jj (0 past) */
NEVO_HD void nevo_kt_load(NevoKDense a, int run, int cblock, int t, int k0, float *x, float *w) {
    int row0 = a.runs[run], cnt = a.runs[run + 1] - row0, j0 = cblock * NEVO_KT_COLS;
    for (int e = t; e < NEVO_KT_ROWS * NEVO_KT_KC; e += NEVO_KT_THREADS) {
        int r = e / NEVO_KT_KC, kk = e % NEVO_KT_KC, k = k0 + kk;
        x[kk * NEVO_KT_XS + r] = r < cnt && k < a.in ? a.X[(size_t)(row0 + r) * a.xs + (size_t)k] : 0.0f;
    }
    const float *W = a.params + (size_t)a.which[row0] * a.stride + a.w_off;
    for (int e = t; e < NEVO_KT_KC * NEVO_KT_COLS; e += NEVO_KT_THREADS) {
        int kk = e / NEVO_KT_COLS, jj = e % NEVO_KT_COLS, k = k0 + kk, j = j0 + jj;
        w[e] = k < a.in && j < a.out ? W[(size_t)k * (size_t)a.out + (size_t)j] : 0.0f;
    }
}

/* phase 2 (per tile) */
NEVO_HD void nevo_kt_accum(int t, const float *x, const float *w, float *acc) {
    int r0 = NEVO_KT_TR * (t / 16), j0 = NEVO_KT_TC * (t % 16);
    for (int kk = 0; kk < NEVO_KT_KC; kk++) {
        float xv[NEVO_KT_TR], wv[NEVO_KT_TC];
        NEVO_UNROLL
        for (int r = 0; r < NEVO_KT_TR; r++) xv[r] = x[kk * NEVO_KT_XS + r0 + r];
        NEVO_UNROLL
        for (int q = 0; q < NEVO_KT_TC; q++) wv[q] = w[kk * NEVO_KT_COLS + j0 + q];
        NEVO_UNROLL
        for (int r = 0; r < NEVO_KT_TR; r++) {
            int nz = xv[r] != 0.0f;
            NEVO_UNROLL
            for (int q = 0; q < NEVO_KT_TC; q++) {
                float s = fmaf(xv[r], wv[q], acc[r * NEVO_KT_TC + q]);
                acc[r * NEVO_KT_TC + q] = nz ? s : acc[r * NEVO_KT_TC + q];
            }
        }
    }
}

/* phase 3 */
NEVO_HD void nevo_kt_store(NevoKDense a, int run, int cblock, int t, const float *acc) {
    int row0 = a.runs[run], cnt = a.runs[run + 1] - row0, r0 = NEVO_KT_TR * (t / 16);
    int j0 = cblock * NEVO_KT_COLS + NEVO_KT_TC * (t % 16);
    NEVO_UNROLL
    for (int r = 0; r < NEVO_KT_TR; r++) {
        NEVO_UNROLL
        for (int q = 0; q < NEVO_KT_TC; q++)
            if (r0 + r < cnt && j0 + q < a.out)
                a.Y[(size_t)(row0 + r0 + r) * a.ys + (size_t)(j0 + q)] = nevo_k_act(a.act, acc[r * NEVO_KT_TC + q]);
    }
}

/* ---- convolution: one "valid" conv layer, HWC ---------------------------------------
 * Every output (oy, ox, f) sums its window in (ky, kx, c) order. Two kernels:
 *   block per row (in use): grid n, block NEVO_KC_THREADS; phase 1 (nevo_kc_load) copies
 *     the row's image and the layer's weights and biases to shared memory, phase 2
 *     (nevo_kc_items) gives a thread a (pixel, 4 filters) item, one 16-byte weight read
 *     per 4 FMAs: 3-5x the other on an H100 (dev/cuda/NOTES.md);
 *   thread per output (nevo_kc_out), for a layer whose image and weights pass the
 *     48 KB of shared memory a block gets: grid (n, ceil(out_h out_w out_c /
 *     NEVO_KC_THREADS)), inputs and weights from L1. */
#define NEVO_KC_THREADS 128
#define NEVO_KC_SMEM_MAX (48 * 1024)

typedef struct NevoKConv {
    const float *params;
    size_t stride;
    const int *which;
    const float *X; /* (n, xs): HWC images */
    int xs;
    int in_w, in_c, out_h, out_w, out_c, kernel, step;
    size_t w_off, b_off; /* W (k, k, in_c, out_c), b (out_c) */
    int act;
    float *Y;
    int ys;
    int in_h;
} NevoKConv;

NEVO_HD void nevo_kc_out(NevoKConv a, int row, int oblock, int t) {
    int o = oblock * NEVO_KC_THREADS + t, F = a.out_c, C = a.in_c, K = a.kernel;
    if (o >= a.out_h * a.out_w * F) return;
    int f = o % F, px = o / F, ox = px % a.out_w, oy = px / a.out_w;
    const float *theta = a.params + (size_t)a.which[row] * a.stride;
    const float *W = theta + a.w_off + f, *x = a.X + (size_t)row * a.xs;
    float acc = theta[a.b_off + (size_t)f];
    for (int ky = 0; ky < K; ky++)
        for (int kx = 0; kx < K; kx++) {
            const float *xp = x + ((size_t)(oy * a.step + ky) * a.in_w + (size_t)(ox * a.step + kx)) * C;
            const float *wp = W + (size_t)(ky * K + kx) * C * F;
            for (int c = 0; c < C; c++) {
                float xv = xp[c];
                if (xv != 0.0f) acc = fmaf(xv, wp[(size_t)c * F], acc);
            }
        }
    a.Y[(size_t)row * a.ys + (size_t)o] = nevo_k_act(a.act, acc);
}

/* shared memory of the block-per-row kernel: the image (padded to 16 bytes, so the
 * weights' 16-byte reads are aligned), W (k, k, in_c, out_c), b */
NEVO_HD size_t nevo_kc_img_floats(NevoKConv a) {
    return ((size_t)a.in_h * (size_t)a.in_w * (size_t)a.in_c + 3) & ~(size_t)3;
}
NEVO_HD size_t nevo_kc_w_floats(NevoKConv a) {
    return (size_t)a.kernel * (size_t)a.kernel * (size_t)a.in_c * (size_t)a.out_c;
}
NEVO_HD size_t nevo_kc_smem_bytes(NevoKConv a) {
    return sizeof(float) * (nevo_kc_img_floats(a) + nevo_kc_w_floats(a) + (size_t)a.out_c);
}

NEVO_HD void nevo_kc_load(NevoKConv a, int row, int t, float *sm) {
    size_t img = (size_t)a.in_h * (size_t)a.in_w * (size_t)a.in_c, wf = nevo_kc_w_floats(a);
    float *Ws = sm + nevo_kc_img_floats(a), *bs = Ws + wf;
    const float *theta = a.params + (size_t)a.which[row] * a.stride, *x = a.X + (size_t)row * a.xs;
    for (size_t e = (size_t)t; e < img; e += NEVO_KC_THREADS) sm[e] = x[e];
    for (size_t e = (size_t)t; e < wf; e += NEVO_KC_THREADS) Ws[e] = theta[a.w_off + e];
    for (int e = t; e < a.out_c; e += NEVO_KC_THREADS) bs[e] = theta[a.b_off + (size_t)e];
}

NEVO_HD void nevo_kc_items(NevoKConv a, int row, int t, const float *sm) {
    int F = a.out_c, C = a.in_c, K = a.kernel, quads = (F + 3) / 4, items = a.out_h * a.out_w * quads;
    int vec = (F & 3) == 0;
    const float *Ws = sm + nevo_kc_img_floats(a), *bs = Ws + nevo_kc_w_floats(a);
    for (int it = t; it < items; it += NEVO_KC_THREADS) {
        int f0 = (it % quads) * 4, px = it / quads, ox = px % a.out_w, oy = px / a.out_w;
        int nf = F - f0 < 4 ? F - f0 : 4;
        float acc[4], w[4];
        NEVO_UNROLL for (int q = 0; q < 4; q++) acc[q] = q < nf ? bs[f0 + q] : 0.0f;
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
                const float *xp = sm + ((oy * a.step + ky) * a.in_w + (ox * a.step + kx)) * C;
                const float *wp = Ws + (size_t)(ky * K + kx) * (size_t)C * (size_t)F + (size_t)f0;
                for (int c = 0; c < C; c++) {
                    float xv = xp[c];
                    if (xv == 0.0f) continue;
                    nevo_kd_weights(wp + (size_t)c * (size_t)F, vec, nf, w);
                    NEVO_UNROLL for (int q = 0; q < 4; q++) acc[q] = fmaf(xv, w[q], acc[q]);
                }
            }
        float *y = a.Y + (size_t)row * a.ys + (size_t)px * (size_t)F + (size_t)f0;
        NEVO_UNROLL for (int q = 0; q < 4; q++)
            if (q < nf) y[q] = nevo_k_act(a.act, acc[q]);
    }
}

/* ---- observation normalisation: clip((x - mean) / std, +-5), as the policy does ------
 * Grid ceil(n dim / NEVO_KN_THREADS), one element per thread. */
#define NEVO_KN_THREADS 256

NEVO_HD void nevo_kn_elem(const float *obs, const float *mean, const float *std, int n, int dim, float *x,
                          int xs, int block, int t) {
    int e = block * NEVO_KN_THREADS + t;
    if (e >= n * dim) return;
    int i = e / dim, k = e - i * dim;
    float v = (obs[e] - mean[k]) / std[k];
    x[(size_t)i * xs + k] = v < -5.0f ? -5.0f : v > 5.0f ? 5.0f : v;
}

/* ---- networks built on the device ----------------------------------------------------
 * One entry per network (or antithetic pair): plus = base + d and minus = base - d with
 * d = sigma eps[k] rounded (nevo_perturb_rows's operations), either NULL to skip it, or a
 * copy of the base (eps NULL). eps is a full noise slice, or (blocks set) a low-rank
 * member's compact slice expanded element by element (nevo_lr_eps). Grid (n_entries,
 * chunks); NEVO_KB_THREADS threads, each element k = (chunk NEVO_KB_THREADS + t) + i
 * chunks NEVO_KB_THREADS for i = 0, 1, ... */
#define NEVO_KB_THREADS 256

typedef struct NevoKBuild {
    float *plus, *minus;
    const float *base, *eps;
    float sigma;
    int rank;                   /* low rank: its rank, and */
    const NevoLRBlock *blocks;  /* the policy's blocks (NULL: eps is a full slice) */
    int n_blocks;
    float c;                    /* (float)(1 / sqrt(rank)) */
} NevoKBuild;

NEVO_HD void nevo_kb_elems(const NevoKBuild *e, size_t n, int chunk, int chunks, int t) {
    for (size_t k = (size_t)chunk * NEVO_KB_THREADS + (size_t)t; k < n; k += (size_t)chunks * NEVO_KB_THREADS) {
        float th = e->base[k];
        if (!e->eps) {
            e->plus[k] = th;
            continue;
        }
        float ek = e->blocks ? nevo_lr_eps(nevo_lr_block(e->blocks, e->n_blocks, k), e->rank, e->c, e->eps, k)
                             : e->eps[k];
        float d = e->sigma * ek;
        if (e->plus) e->plus[k] = th + d;
        if (e->minus) e->minus[k] = th - d;
    }
}

/* ---- the factored low-rank correction (EGGROLL; nevo_policy_forward_factored) ---------
 * After a layer's base kernel (its act none) over rows of one base, each row's member
 * adds its rank-r correction and bias noise and applies the activation, in place: the
 * CPU's sums in the CPU's order (policy.c). A row reads its compact slice where the
 * noise table holds it, A (rows, rank) and B (cols, rank) as nevo_lowrank_blocks lays
 * them out (the CPU's factor row holds the same floats transposed for its vectors).
 * Block NEVO_KF_THREADS over nevo_kf_rows consecutive rows (as many as its threads
 * cover at a row's phase-1 items, at least one), grid nevo_kf_blocks:
 *   dense: phase 1 (nevo_kf_dot) the 16 partial sums of each u_q, lane l the inputs
 *     e = l mod 16 ascending from +0; phase 2 (nevo_kf_tree) u_q from them; phase 3
 *     (nevo_kf_apply) each output;
 *   conv: phase 1 (nevo_kf_conv_u) u (pixels, rank), each the window's nonzero terms
 *     in (ky, kx, c) order from +0, as the CPU's conv with the rank filters A; phase 2
 *     (nevo_kf_conv_apply) each output.
 * A block of one row would leave most threads idle in phase 1 (16 of 128 at rank 1) and
 * take a resident block's place: rows share a block, and a member's rows (B > 1) its
 * slice's reads. */
#define NEVO_KF_THREADS 128

/* a row's member: its compact slice at noise + z, coef = sign sigma / sqrt(rank) and
 * s = sign sigma (the factor row's head) */
typedef struct NevoKFRec {
    size_t z;
    float coef, s;
} NevoKFRec;

typedef struct NevoKFactor {
    const float *noise;
    const NevoKFRec *rec; /* (n) each row's member */
    const float *X;       /* (n, xs): the layer's input */
    int xs;
    float *Y; /* (n, ys): the base's output, corrected in place */
    int ys;
    float *U; /* conv: (n, us) room for each row's u */
    size_t us;
    int n;                    /* rows */
    int in, out, rank, act;   /* in: a dense layer's inputs, a conv's window (k k in_c) */
    size_t a_off, zb_off;     /* the weight block's and the bias block's z_off */
    int in_w, in_c, out_h, out_w, kernel, step; /* conv: out is out_c */
} NevoKFactor;

/* a's layer fields for a layer with weight block w and bias block b (rank already set),
 * its activation and conv shape (kernel 0 for a dense layer), input X and output Y */
NEVO_HD void nevo_kf_layer(NevoKFactor *a, NevoLRBlock w, NevoLRBlock b, int act, const int conv[6], const float *X,
                           int xs, float *Y, int ys) {
    a->X = X, a->xs = xs, a->Y = Y, a->ys = ys;
    a->in = w.rows, a->out = w.cols, a->act = act;
    a->a_off = w.z_off, a->zb_off = b.z_off;
    a->in_w = conv[0], a->in_c = conv[1], a->out_h = conv[2], a->out_w = conv[3], a->kernel = conv[4];
    a->step = conv[5];
}

/* a row's phase-1 items: 16 a u_q (dense), a pixel's u_q (conv) */
NEVO_HD int nevo_kf_items(NevoKFactor a) {
    return a.kernel ? a.out_h * a.out_w * a.rank : 16 * a.rank;
}

/* rows a block, and the blocks over a.n rows */
NEVO_HD int nevo_kf_rows(NevoKFactor a) {
    int r = NEVO_KF_THREADS / nevo_kf_items(a);
    return r < 1 ? 1 : r;
}

NEVO_HD int nevo_kf_blocks(NevoKFactor a) {
    int r = nevo_kf_rows(a);
    return (a.n + r - 1) / r;
}

/* part (rows, rank, 16): lane l of u_q of the block's row rr, for the items t, t +
 * NEVO_KF_THREADS, ... The terms are loaded NEVO_KF_AHEAD at a time before their FMAs,
 * in the same order: a lane's loads are then in flight together, not one latency each
 * (each lane's chain is its block's phase 1). */
#define NEVO_KF_AHEAD 8
NEVO_HD void nevo_kf_dot(NevoKFactor a, int blk, int t, float *part) {
    int per = 16 * a.rank, R = nevo_kf_rows(a), row0 = blk * R;
    for (int item = t; item < R * per; item += NEVO_KF_THREADS) {
        int rr = item / per, k = item - rr * per, q = k / 16, e = k % 16, row = row0 + rr;
        if (row >= a.n) break;
        const float *x = a.X + (size_t)row * a.xs, *A = a.noise + a.rec[row].z + a.a_off;
        float acc = 0.0f, xv[NEVO_KF_AHEAD], av[NEVO_KF_AHEAD];
        for (; e + 16 * (NEVO_KF_AHEAD - 1) < a.in; e += 16 * NEVO_KF_AHEAD) {
            NEVO_UNROLL
            for (int j = 0; j < NEVO_KF_AHEAD; j++)
                xv[j] = x[e + 16 * j], av[j] = A[(size_t)(e + 16 * j) * a.rank + q];
            NEVO_UNROLL
            for (int j = 0; j < NEVO_KF_AHEAD; j++) acc = fmaf(xv[j], av[j], acc);
        }
        for (; e < a.in; e += 16) acc = fmaf(x[e], A[(size_t)e * a.rank + q], acc);
        part[item] = acc;
    }
}

/* u (rows, rank), u_q of row rr: lanes l and l + 8 added, then l and l + 4, l + 2, l + 1 */
NEVO_HD void nevo_kf_tree(NevoKFactor a, int blk, int t, float *part, float *u) {
    int R = nevo_kf_rows(a);
    for (int k = t; k < R * a.rank; k += NEVO_KF_THREADS) {
        if (blk * R + k / a.rank >= a.n) break;
        float *p = part + 16 * k;
        for (int h = 8; h >= 1; h /= 2)
            for (int l = 0; l < h; l++) p[l] += p[l + h];
        u[k] = p[0];
    }
}

/* act(fma(s, zb_c, fma(coef, t_c, y))), t_c the fused sum over q ascending of u_q B[c][q]
 * from +0; `rows` the weight block's (B follows A) */
NEVO_HD float nevo_kf_out(NevoKFactor a, int row, const float *u, int rows, int c, float y) {
    NevoKFRec r = a.rec[row];
    const float *z = a.noise + r.z, *B = z + a.a_off + (size_t)rows * a.rank + (size_t)c * a.rank;
    float t = 0.0f;
    for (int q = 0; q < a.rank; q++) t = fmaf(u[q], B[q], t);
    return nevo_k_act(a.act, fmaf(r.s, z[a.zb_off + (size_t)c], fmaf(r.coef, t, y)));
}

NEVO_HD void nevo_kf_apply(NevoKFactor a, int blk, int t, const float *u) {
    int R = nevo_kf_rows(a), row0 = blk * R;
    for (int item = t; item < R * a.out; item += NEVO_KF_THREADS) {
        int rr = item / a.out, c = item - rr * a.out, row = row0 + rr;
        if (row >= a.n) break;
        float *y = a.Y + (size_t)row * a.ys + c;
        *y = nevo_kf_out(a, row, u + (size_t)rr * a.rank, a.in, c, *y);
    }
}

NEVO_HD void nevo_kf_conv_u(NevoKFactor a, int blk, int t) {
    int K = a.kernel, C = a.in_c, R = a.rank, per = nevo_kf_items(a), rows = nevo_kf_rows(a), row0 = blk * rows;
    for (int it = t; it < rows * per; it += NEVO_KF_THREADS) {
        int rr = it / per, item = it - rr * per, row = row0 + rr;
        if (row >= a.n) break;
        const float *x = a.X + (size_t)row * a.xs, *A = a.noise + a.rec[row].z + a.a_off;
        int q = item % R, px = item / R, ox = px % a.out_w, oy = px / a.out_w;
        float acc = 0.0f;
        for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
                const float *xp = x + ((size_t)(oy * a.step + ky) * a.in_w + (size_t)(ox * a.step + kx)) * C;
                const float *ap = A + (size_t)(ky * K + kx) * C * R + q;
                for (int c = 0; c < C; c++) {
                    float xv = xp[c];
                    if (xv != 0.0f) acc = fmaf(xv, ap[(size_t)c * R], acc);
                }
            }
        a.U[(size_t)row * a.us + (size_t)item] = acc;
    }
}

NEVO_HD void nevo_kf_conv_apply(NevoKFactor a, int blk, int t) {
    int per = a.out_h * a.out_w * a.out, rows = nevo_kf_rows(a), row0 = blk * rows;
    for (int it = t; it < rows * per; it += NEVO_KF_THREADS) {
        int rr = it / per, item = it - rr * per, row = row0 + rr;
        if (row >= a.n) break;
        const float *u = a.U + (size_t)row * a.us;
        float *y = a.Y + (size_t)row * a.ys;
        int c = item % a.out, px = item / a.out;
        y[item] = nevo_kf_out(a, row, u + (size_t)px * a.rank, a.in, c, y[item]);
    }
}

/* ---- the LSTM's step (lstm.h: nevo_lstm_step; a recurrent policy's forward) ----------
 * The gate sums are a dense layer over [x, h_prev] (the dense kernels, act none); around
 * them, an element a thread (grid ceil(n w / NEVO_KL_THREADS)):
 *   nevo_kl_xh: row r's [x, h_prev] (in + H), x from X (copy_x; else the pre part's
 *     last layer wrote it there already), h_prev from the state row (h, then c);
 *   nevo_kl_cell: unit j of row r from its four gate sums, as lstm.c's cell: i, f, o =
 *     fma(0.5, tanh(z / 2), 0.5), g = tanh(z), c = fma(f, c_prev, i g), h = o tanh(c);
 *     c and h into the state row, h also into H_out (the next part's input). */
#define NEVO_KL_THREADS 256

typedef struct NevoKLstm {
    const float *X; /* (n, xs) the step's input, where copy_x */
    int xs, copy_x;
    float *xh;      /* (n, in + H) */
    const float *gates; /* (n, 4H): i, f, g, o sums */
    float *state;   /* (n, 2H): h, then c */
    float *h_out;   /* (n, H) */
    int n, in, H;
} NevoKLstm;

NEVO_HD void nevo_kl_xh(NevoKLstm a, int block, int t) {
    size_t k = (size_t)block * NEVO_KL_THREADS + (size_t)t, w = (size_t)a.in + (size_t)a.H;
    if (k >= (size_t)a.n * w) return;
    size_t r = k / w, e = k % w;
    if (e >= (size_t)a.in)
        a.xh[k] = a.state[r * 2 * (size_t)a.H + (e - (size_t)a.in)];
    else if (a.copy_x)
        a.xh[k] = a.X[r * (size_t)a.xs + e];
}

NEVO_HD void nevo_kl_cell(NevoKLstm a, int block, int t) {
    size_t k = (size_t)block * NEVO_KL_THREADS + (size_t)t, H = (size_t)a.H;
    if (k >= (size_t)a.n * H) return;
    size_t r = k / H, j = k % H;
    const float *z = a.gates + r * 4 * H;
    float i = fmaf(0.5f, nevo_tanh_body(z[j] * 0.5f), 0.5f);
    float f = fmaf(0.5f, nevo_tanh_body(z[H + j] * 0.5f), 0.5f);
    float g = nevo_tanh_body(z[2 * H + j]);
    float o = fmaf(0.5f, nevo_tanh_body(z[3 * H + j] * 0.5f), 0.5f);
    float *st = a.state + r * 2 * H;
    float c = fmaf(f, st[H + j], i * g);
    float h = o * nevo_tanh_body(c);
    st[j] = h;
    st[H + j] = c;
    a.h_out[r * H + j] = h;
}

#endif
