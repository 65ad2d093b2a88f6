/* Kernel variants for the CUDA backend's two MinAtar layers, each checked bit for bit
 * against the kernel in use (src/nn/backend_cuda.cu, whose bodies are
 * src/nn/kernel_bodies.h) and timed beside it, on P = 1024 networks of B = 1, 16 and 64
 * rows each. Standalone (the kernels' bodies are header-only); dev/cuda/device_run.sh
 * builds and runs it on the GPU machine:
 *   nvcc -std=c++17 -O2 -arch=sm_90 --fmad=false -prec-div=true -Isrc -Iinclude \
 *        dev/cuda/variants.cu -o variants && ./variants
 * Variants (dev/cuda/NOTES.md says why each):
 *   dense v2   the kernel in use: a warp per run of rows, 4 outputs a lane, weights by
 *              16-byte loads straight from memory
 *   dense v3   the same sums, the weights staged through shared memory by cp.async, two
 *              tiles of 32 inputs in flight per warp (16 KB each), so the loads of the next
 *              tile overlap the FMAs of this one
 *   dense r1   a row a block (the GA's and ES's shape): only the nonzero inputs'
 *              weight rows read, 8 loads a lane in flight (each row reads its network
 *              again)
 *   dense lR   the same over runs of up to R = 2, 4, 8, 16 rows of one network: the inputs
 *              nonzero in some row listed, each weight read once for the run's rows
 *   r1 recipe  dense r1 on GA children read as recipes (parent +- sigma times a slice of
 *              the noise table, each weight made as it is read) against the same
 *              children built (a section of its own, B = 1)
 *   r1 rank    dense r1 on low-rank members around one mean (ranks 1, 2, 4) against one
 *              shared network on the same rows (a section of its own, B = 1)
 *   conv v1    a thread per output, inputs and weights from L1 (the backend's fallback
 *              for a layer too large for a block's shared memory)
 *   conv v2    the kernel in use: a block per row with its image and the layer's weights
 *              in shared memory, a thread per pixel and 4 filters (one 16-byte shared read
 *              feeds 4 FMAs) */
#include <cuda_runtime.h>
#include <initializer_list>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernel_bodies.h"

#define CK(call)                                                                               \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* ---- dense ---------------------------------------------------------------------------- */

__global__ void __launch_bounds__(NEVO_KD_THREADS) dense_v2(NevoKDense a) { nevo_kd_block(a); }

/* only the listed inputs' weight rows read, runs of up to ROWS rows (kernel_bodies.h) */
template <int ROWS> __global__ void __launch_bounds__(NEVO_KD_THREADS) dense_l(NevoKDense a) {
    nevo_kd1_block<ROWS>(a);
}

#define V3_KT 32 /* inputs per staged weight tile: 32 x 128 floats, 16 KB */

__device__ __forceinline__ void cp16(float *smem, const float *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

/* the weight tile of inputs k0 .. k0 + V3_KT - 1, columns cb 128 .. + 127, into w_s:
 * each lane copies 16-byte pieces (needs a.vec and out a multiple of 4) */
__device__ __forceinline__ void stage(const NevoKDense &a, const float *W, int k0, int cb, float *w_s) {
    int c0 = cb * NEVO_KD_COLS, cols = a.out - c0 < NEVO_KD_COLS ? a.out - c0 : NEVO_KD_COLS;
    int pieces = cols / 4, kn = a.in - k0 < V3_KT ? a.in - k0 : V3_KT;
    for (int e = threadIdx.x; e < kn * pieces; e += 32) {
        int kk = e / pieces, p = e - kk * pieces;
        cp16(w_s + kk * NEVO_KD_COLS + 4 * p, W + (size_t)(k0 + kk) * a.out + c0 + 4 * p);
    }
    asm volatile("cp.async.commit_group;\n" ::);
}

__global__ void __launch_bounds__(32) dense_v3(NevoKDense a) {
    __shared__ __align__(16) float w_s[2][V3_KT * NEVO_KD_COLS];
    __shared__ float x_s[V3_KT * NEVO_KD_ROWS];
    float acc[NEVO_KD_ROWS * NEVO_KD_NJ];
    int run = blockIdx.x, cb = blockIdx.y, t = threadIdx.x;
    int row0 = a.runs[run], cnt = a.runs[run + 1] - row0;
    int j0 = cb * NEVO_KD_COLS + t * NEVO_KD_NJ;
    const float *W = a.params + (size_t)a.which[row0] * a.stride + a.w_off;
    nevo_kd_init(a, run, cb, t, acc);
    int tiles = (a.in + V3_KT - 1) / V3_KT;
    stage(a, W, 0, cb, w_s[0]);
    for (int i = 0; i < tiles; i++) {
        int k0 = i * V3_KT, kn = a.in - k0 < V3_KT ? a.in - k0 : V3_KT;
        if (i + 1 < tiles) {
            stage(a, W, k0 + V3_KT, cb, w_s[(i + 1) & 1]);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        for (int e = t; e < V3_KT * cnt; e += 32) { /* this tile's inputs, input-major */
            int r = e / V3_KT, kk = e - r * V3_KT;
            x_s[kk * NEVO_KD_ROWS + r] = kk < kn ? a.X[(size_t)(row0 + r) * a.xs + k0 + kk] : 0.0f;
        }
        __syncwarp();
        if (j0 < a.out) {
            const float *ws = w_s[i & 1] + t * NEVO_KD_NJ;
#pragma unroll 4
            for (int kk = 0; kk < kn; kk++) {
                float4 v = *(const float4 *)(ws + kk * NEVO_KD_COLS);
                float w[4] = {v.x, v.y, v.z, v.w};
                const float *x = x_s + kk * NEVO_KD_ROWS;
#pragma unroll
                for (int r = 0; r < NEVO_KD_ROWS; r++) {
                    if (r >= cnt) continue;
                    float xv = x[r];
                    if (xv == 0.0f) continue;
#pragma unroll
                    for (int q = 0; q < 4; q++) acc[r * 4 + q] = fmaf(xv, w[q], acc[r * 4 + q]);
                }
            }
        }
        __syncwarp(); /* the buffer and x_s are rewritten next */
    }
    nevo_kd_store(a, run, cb, t, acc);
}

/* ---- conv ----------------------------------------------------------------------------- */

__global__ void __launch_bounds__(NEVO_KC_THREADS) conv_v1(NevoKConv a) {
    nevo_kc_out(a, blockIdx.x, blockIdx.y, threadIdx.x);
}

/* the kernel in use (backend_cuda.cu: k_conv_rows) */
__global__ void __launch_bounds__(NEVO_KC_THREADS) conv_v2(NevoKConv a) {
    extern __shared__ __align__(16) float sm[];
    nevo_kc_load(a, blockIdx.x, threadIdx.x, sm);
    __syncthreads();
    nevo_kc_items(a, blockIdx.x, threadIdx.x, sm);
}

/* ---- harness -------------------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static float *upload(const float *h, size_t n) {
    float *d;
    CK(cudaMalloc((void **)&d, sizeof(float) * n));
    CK(cudaMemcpy(d, h, sizeof(float) * n, cudaMemcpyHostToDevice));
    return d;
}

typedef void (*Launch)(void *ctx);

/* median of 21 timed launches after 3 warm-ups, in ms */
static double time_ms(Launch f, void *ctx) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float t[21];
    for (int i = -3; i < 21; i++) {
        CK(cudaEventRecord(a));
        f(ctx);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        if (i >= 0) CK(cudaEventElapsedTime(&t[i], a, b));
    }
    CK(cudaGetLastError());
    for (int i = 1; i < 21; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            float s = t[j];
            t[j] = t[j - 1], t[j - 1] = s;
        }
    return t[10];
}

typedef struct DenseCtx {
    NevoKDense a;
    int n_runs, n;
    int rows; /* dense l: a.runs split by nevo_kd_runs(.., rows, ..) */
} DenseCtx;
/* d with its rows split into runs of up to `rows` (on the device; dense_runs_free) */
static DenseCtx dense_runs(const DenseCtx *d, const int *which, int rows) {
    int *h = (int *)malloc(sizeof(int) * (d->n + 1)), *dr;
    int m = nevo_kd_runs(which, d->n, rows, h);
    CK(cudaMalloc((void **)&dr, sizeof(int) * (m + 1)));
    CK(cudaMemcpy(dr, h, sizeof(int) * (m + 1), cudaMemcpyHostToDevice));
    free(h);
    DenseCtx r = *d;
    r.a.runs = dr, r.n_runs = m, r.rows = rows;
    return r;
}
static void dense_runs_free(DenseCtx *d) { CK(cudaFree((void *)d->a.runs)); }
static void launch_dense_v2(void *c) {
    DenseCtx *d = (DenseCtx *)c;
    dense_v2<<<dim3(d->n_runs, (d->a.out + NEVO_KD_COLS - 1) / NEVO_KD_COLS), NEVO_KD_THREADS>>>(d->a);
}
static void launch_dense_r1(void *c) { /* a block a row, whatever the runs */
    DenseCtx *d = (DenseCtx *)c;
    NevoKDense a = d->a;
    a.runs = NULL;
    dense_l<1><<<dim3(d->n, (a.out + NEVO_KD_COLS - 1) / NEVO_KD_COLS), NEVO_KD_THREADS>>>(a);
}
static void launch_dense_l(void *c) {
    DenseCtx *d = (DenseCtx *)c;
    dim3 g(d->n_runs, (d->a.out + NEVO_KD_COLS - 1) / NEVO_KD_COLS);
    switch (d->rows) {
    case 2: dense_l<2><<<g, NEVO_KD_THREADS>>>(d->a); break;
    case 4: dense_l<4><<<g, NEVO_KD_THREADS>>>(d->a); break;
    case 8: dense_l<8><<<g, NEVO_KD_THREADS>>>(d->a); break;
    default: dense_l<16><<<g, NEVO_KD_THREADS>>>(d->a); break;
    }
}
static void launch_dense_v3(void *c) {
    DenseCtx *d = (DenseCtx *)c;
    dense_v3<<<dim3(d->n_runs, (d->a.out + NEVO_KD_COLS - 1) / NEVO_KD_COLS), 32>>>(d->a);
}

typedef struct ConvCtx {
    NevoKConv a;
    int n;
} ConvCtx;
static void launch_conv_v1(void *c) {
    ConvCtx *d = (ConvCtx *)c;
    conv_v1<<<dim3(d->n, (d->a.out_h * d->a.out_w * d->a.out_c + NEVO_KC_THREADS - 1) / NEVO_KC_THREADS),
              NEVO_KC_THREADS>>>(d->a);
}
static void launch_conv_v2(void *c) {
    ConvCtx *d = (ConvCtx *)c;
    conv_v2<<<d->n, NEVO_KC_THREADS, nevo_kc_smem_bytes(d->a)>>>(d->a);
}

/* cudaFree of each */
static void dfree(std::initializer_list<const void *> ps) {
    for (const void *q : ps) CK(cudaFree((void *)q));
}

/* 1 if the two device arrays hold the same bits */
static int same_bits(const float *x, const float *y, size_t n) {
    float *hx = (float *)malloc(sizeof(float) * n), *hy = (float *)malloc(sizeof(float) * n);
    CK(cudaMemcpy(hx, x, sizeof(float) * n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy, y, sizeof(float) * n, cudaMemcpyDeviceToHost));
    int same = memcmp(hx, hy, sizeof(float) * n) == 0;
    free(hx), free(hy);
    return same;
}

/* The GA's shape at B = 1: P children of 20 parents, each parent + or - sigma times its
 * slice of a 34 MB noise table (the size of nevo's), through the one-row dense kernel
 * built (the children's rows materialised by the builds' rule, read from HBM) and as
 * recipes (each weight made from the parent and the table as it is read: both fit L2). */
static void ga_children(int P, int IN, int OUT) {
    const int PARENTS = 20;
    size_t np = (size_t)IN * OUT + OUT, stride = (np + 15) & ~(size_t)15, table = 8500000;
    float *hpar = (float *)malloc(sizeof(float) * stride * PARENTS), *htab = (float *)malloc(sizeof(float) * table);
    for (size_t i = 0; i < stride * PARENTS; i++) hpar[i] = (float)(uniform() - 0.5) * 0.1f;
    for (size_t i = 0; i < table; i++) htab[i] = (float)(uniform() - 0.5) * 3.4f;
    float *dpar = upload(hpar, stride * PARENTS), *dtab = upload(htab, table);
    float *hbuilt = (float *)malloc(sizeof(float) * stride * P);
    NevoKRecipe *hrec = (NevoKRecipe *)malloc(sizeof(NevoKRecipe) * P);
    for (int j = 0; j < P; j++) {
        size_t off = (size_t)(uniform() * (double)(table - np));
        NevoKRecipe h = {hpar + stride * (size_t)(j % PARENTS), htab + off, 0.02f, j % 2 ? -1 : 1, 0, NULL, 0, 0.0f};
        for (size_t k = 0; k < np; k++) hbuilt[stride * (size_t)j + k] = nevo_kr_weight(&h, k);
        hrec[j] = (NevoKRecipe){dpar + stride * (size_t)(j % PARENTS), dtab + off, 0.02f, j % 2 ? -1 : 1, 0, NULL, 0, 0.0f};
    }
    float *dbuilt = upload(hbuilt, stride * P);
    NevoKRecipe *drec;
    CK(cudaMalloc((void **)&drec, sizeof(NevoKRecipe) * P));
    CK(cudaMemcpy(drec, hrec, sizeof(NevoKRecipe) * P, cudaMemcpyHostToDevice));
    int *which = (int *)malloc(sizeof(int) * P), *dwhich;
    for (int i = 0; i < P; i++) which[i] = i;
    CK(cudaMalloc((void **)&dwhich, sizeof(int) * P));
    CK(cudaMemcpy(dwhich, which, sizeof(int) * P, cudaMemcpyHostToDevice));
    float *hx = (float *)malloc(sizeof(float) * P * IN);
    for (size_t i = 0; i < (size_t)P * IN; i++) hx[i] = uniform() < 0.5 ? 0.0f : (float)uniform();
    float *dx = upload(hx, (size_t)P * IN), *y1, *y2;
    CK(cudaMalloc((void **)&y1, sizeof(float) * P * OUT));
    CK(cudaMalloc((void **)&y2, sizeof(float) * P * OUT));
    CK(cudaMemset(y1, 0xff, sizeof(float) * P * OUT));
    CK(cudaMemset(y2, 0xff, sizeof(float) * P * OUT));
    DenseCtx d = {{dbuilt, stride, dwhich, NULL, dx, IN, IN, OUT, 0, (size_t)IN * OUT, 1, 1, y1, OUT, NULL}, P, P};
    double tb = time_ms(launch_dense_r1, &d);
    d.a.rec = drec, d.a.Y = y2;
    double tr = time_ms(launch_dense_r1, &d);
    int ok = same_bits(y1, y2, (size_t)P * OUT);
    printf("GA children, %d of %d parents, B = 1:\n", P, PARENTS);
    printf("%-10s %4d %10.4f %12.2f %s\n", "r1 built", 1, tb, P / tb * 1e-3, "-");
    printf("%-10s %4d %10.4f %12.2f %s\n", "r1 recipe", 1, tr, P / tr * 1e-3, ok ? "same" : "DIFFER");
    dfree({dpar, dtab, dbuilt, drec, dwhich, dx, y1, y2});
    free(hpar), free(htab), free(hbuilt), free(hrec), free(which), free(hx);
}

/* EGGROLL's question at B = 1: P members of rank r around one mean, each weight made
 * from the mean and the member's compact slice (r + 1 FMAs, no member's floats in HBM),
 * against one shared network on the same rows (the fastest of the runs kernel, 16 rows
 * a run, the one-row kernel and the listed kernel's longest runs); the issue's target is
 * 0.9 of the shared network. */
static void lowrank_members(int P, int IN, int OUT) {
    size_t np = (size_t)IN * OUT + OUT, stride = (np + 15) & ~(size_t)15, table = 8500000;
    float *hmean = (float *)malloc(sizeof(float) * stride), *htab = (float *)malloc(sizeof(float) * table);
    for (size_t i = 0; i < stride; i++) hmean[i] = (float)(uniform() - 0.5) * 0.1f;
    for (size_t i = 0; i < table; i++) htab[i] = (float)(uniform() - 0.5) * 3.4f;
    float *dmean = upload(hmean, stride), *dtab = upload(htab, table);
    int *which = (int *)malloc(sizeof(int) * P), *zeros = (int *)calloc((size_t)P, sizeof(int)), *dwhich, *dzeros;
    for (int i = 0; i < P; i++) which[i] = i;
    CK(cudaMalloc((void **)&dwhich, sizeof(int) * P));
    CK(cudaMalloc((void **)&dzeros, sizeof(int) * P));
    CK(cudaMemcpy(dwhich, which, sizeof(int) * P, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dzeros, zeros, sizeof(int) * P, cudaMemcpyHostToDevice));
    float *hx = (float *)malloc(sizeof(float) * P * IN);
    for (size_t i = 0; i < (size_t)P * IN; i++) hx[i] = uniform() < 0.5 ? 0.0f : (float)uniform();
    float *dx = upload(hx, (size_t)P * IN), *y;
    CK(cudaMalloc((void **)&y, sizeof(float) * P * OUT));
    DenseCtx one = {{dmean, stride, dzeros, NULL, dx, IN, IN, OUT, 0, (size_t)IN * OUT, 1, 1, y, OUT, NULL}, P, P};
    DenseCtx shared = dense_runs(&one, zeros, NEVO_KD_ROWS), shared8 = dense_runs(&one, zeros, NEVO_KD1_ROWS);
    double ts = time_ms(launch_dense_v2, &shared), ts1 = time_ms(launch_dense_r1, &one);
    double ts8 = time_ms(launch_dense_l, &shared8);
    printf("low rank around one mean, %d members, B = 1 (shared network: runs %.4f ms, one-row %.4f ms, "
           "l%d %.4f ms):\n", P, ts, ts1, NEVO_KD1_ROWS, ts8);
    double best = ts < ts1 ? ts : ts1;
    best = ts8 < best ? ts8 : best;
    dense_runs_free(&shared), dense_runs_free(&shared8);
    NevoKRecipe *hrec = (NevoKRecipe *)malloc(sizeof(NevoKRecipe) * P), *drec;
    CK(cudaMalloc((void **)&drec, sizeof(NevoKRecipe) * P));
    for (int rank = 1; rank <= 4; rank *= 2) {
        NevoLRBlock hb[2] = {{0, 0, IN, OUT}, {(size_t)IN * OUT, (size_t)(IN + OUT) * (size_t)rank, 0, OUT}}, *db;
        CK(cudaMalloc((void **)&db, sizeof hb));
        CK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
        size_t zf = (size_t)(IN + OUT) * (size_t)rank + (size_t)OUT;
        for (int j = 0; j < P; j++)
            hrec[j] = (NevoKRecipe){dmean, dtab + (size_t)(uniform() * (double)(table - zf)), 0.02f, j % 2 ? -1 : 1,
                                    rank, db, 2, (float)(1.0 / sqrt((double)rank))};
        CK(cudaMemcpy(drec, hrec, sizeof(NevoKRecipe) * P, cudaMemcpyHostToDevice));
        DenseCtx d = {{dmean, stride, dwhich, NULL, dx, IN, IN, OUT, 0, (size_t)IN * OUT, 1, 1, y, OUT, drec}, P, P};
        double t = time_ms(launch_dense_r1, &d);
        printf("%-10s %4d %10.4f %12.2f %.2f of the shared network\n", "r1 rank", rank, t, P / t * 1e-3, best / t);
        CK(cudaFree(db));
    }
    dfree({dmean, dtab, dwhich, dzeros, dx, y, drec});
    free(hmean), free(htab), free(which), free(zeros), free(hx), free(hrec);
}

int main(void) {
    const int P = 1024, Bs[3] = {1, 16, 64}, IN = 1024, OUT = 128;
    const int H = 10, Wd = 10, C = 4, K = 3, F = 16, OH = 8, OW = 8;
    size_t dstride = ((size_t)IN * OUT + OUT + 15) & ~(size_t)15, cw = (size_t)K * K * C * F;
    size_t cstride = (cw + F + 15) & ~(size_t)15;
    float *hd = (float *)malloc(sizeof(float) * dstride * P), *hc = (float *)malloc(sizeof(float) * cstride * P);
    for (size_t i = 0; i < dstride * P; i++) hd[i] = (float)(uniform() - 0.5) * 0.1f;
    for (size_t i = 0; i < cstride * P; i++) hc[i] = (float)(uniform() - 0.5) * 0.5f;
    float *dparams = upload(hd, dstride * P), *cparams = upload(hc, cstride * P);
    printf("%-10s %4s %10s %12s %s\n", "kernel", "B", "ms", "Mrows/s", "bits vs in use");
    for (int bi = 0; bi < 3; bi++) {
        int B = Bs[bi], n = P * B;
        int *which = (int *)malloc(sizeof(int) * n);
        for (int i = 0; i < n; i++) which[i] = i / B;
        float *hx = (float *)malloc(sizeof(float) * n * IN), *himg = (float *)malloc(sizeof(float) * n * H * Wd * C);
        for (size_t i = 0; i < (size_t)n * IN; i++) hx[i] = uniform() < 0.5 ? 0.0f : (float)uniform(); /* relu-like */
        for (size_t i = 0; i < (size_t)n * H * Wd * C; i++) himg[i] = uniform() < 0.1 ? 1.0f : 0.0f;
        int *dwhich;
        CK(cudaMalloc((void **)&dwhich, sizeof(int) * n));
        CK(cudaMemcpy(dwhich, which, sizeof(int) * n, cudaMemcpyHostToDevice));
        float *dx = upload(hx, (size_t)n * IN), *dimg = upload(himg, (size_t)n * H * Wd * C), *y1, *y2;
        size_t ny = (size_t)n * (OUT > OH * OW * F ? OUT : OH * OW * F);
        CK(cudaMalloc((void **)&y1, sizeof(float) * ny));
        CK(cudaMalloc((void **)&y2, sizeof(float) * ny));

        DenseCtx byrow = {{dparams, dstride, dwhich, NULL, dx, IN, IN, OUT, 0, (size_t)IN * OUT, 1, 1, y1, OUT, NULL},
                          n, n};
        DenseCtx d = dense_runs(&byrow, which, NEVO_KD_ROWS); /* the runs kernel's runs of 16 */
        CK(cudaMemset(y1, 0xff, sizeof(float) * ny));
        CK(cudaMemset(y2, 0xff, sizeof(float) * ny));
        double t2 = time_ms(launch_dense_v2, &d);
        d.a.Y = y2;
        double t3 = time_ms(launch_dense_v3, &d);
        int ok = same_bits(y1, y2, (size_t)n * OUT);
        printf("%-10s %4d %10.4f %12.2f %s\n", "dense v2", B, t2, n / t2 * 1e-3, "-");
        printf("%-10s %4d %10.4f %12.2f %s\n", "dense v3", B, t3, n / t3 * 1e-3, ok ? "same" : "DIFFER");
        CK(cudaMemset(y2, 0xff, sizeof(float) * ny));
        double t4 = time_ms(launch_dense_r1, &d);
        ok = same_bits(y1, y2, (size_t)n * OUT);
        printf("%-10s %4d %10.4f %12.2f %s\n", "dense r1", B, t4, n / t4 * 1e-3, ok ? "same" : "DIFFER");
        for (int rows = 2; B > 1 && rows <= NEVO_KD1_ROWS; rows *= 2) { /* runs of up to rows rows */
            DenseCtx dl_ = dense_runs(&d, which, rows);
            CK(cudaMemset(y2, 0xff, sizeof(float) * ny));
            double tl = time_ms(launch_dense_l, &dl_);
            ok = same_bits(y1, y2, (size_t)n * OUT);
            char name[16];
            snprintf(name, sizeof name, "dense l%d", rows);
            printf("%-10s %4d %10.4f %12.2f %s\n", name, B, tl, n / tl * 1e-3, ok ? "same" : "DIFFER");
            dense_runs_free(&dl_);
        }

        ConvCtx c = {{cparams, cstride, dwhich, dimg, H * Wd * C, Wd, C, OH, OW, F, K, 1, 0, cw, 1, y1, OH * OW * F, H}, n};
        CK(cudaMemset(y1, 0xff, sizeof(float) * ny));
        CK(cudaMemset(y2, 0xff, sizeof(float) * ny));
        double c1 = time_ms(launch_conv_v1, &c);
        c.a.Y = y2;
        double c2 = time_ms(launch_conv_v2, &c);
        ok = same_bits(y1, y2, (size_t)n * OH * OW * F);
        printf("%-10s %4d %10.4f %12.2f %s\n", "conv v1", B, c1, n / c1 * 1e-3, "-");
        printf("%-10s %4d %10.4f %12.2f %s\n", "conv v2", B, c2, n / c2 * 1e-3, ok ? "same" : "DIFFER");
        dense_runs_free(&d);
        dfree({dwhich, dx, dimg, y1, y2});
        free(which), free(hx), free(himg);
    }
    dfree({dparams, cparams});
    free(hd), free(hc);
    ga_children(P, IN, OUT);
    lowrank_members(P, IN, OUT);
    return 0;
}
