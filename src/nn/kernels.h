/* Compute kernels behind nevo_policy_forward (internal).
 *
 * Every kernel accumulates each output in one fixed order — the bias first, then one
 * fused multiply-add per input in ascending index (for a convolution: the window's
 * (ky, kx, c) terms in that order, which is ascending input index) — and the tanh is
 * nevo's own (nevo_tanhf, built from IEEE float operations only). So the portable C kernels
 * and the AVX2 and AVX-512 ones give bit-identical results, whatever the batch
 * composition, the SIMD width or the CPU, and the fast paths can be checked against
 * the portable one by memcmp. The ISA is chosen once at run time
 * (NEVO_KERNELS=generic|avx2|avx512 forces one, for tests and benchmarks). One file per
 * set: kernels.c (portable), kernels_avx2.c, kernels_avx512.c.
 *
 * An entry beyond the general kernels (a second path with the same bits for a case they
 * already compute) is kept only where `nevo bench` or dev/kernels/ab_forward shows it at
 * least 10% faster on a shape that training or `nevo eval` runs, on the CPUs measured:
 * each costs code and a test, and the shared VMs' noise hides smaller gains.
 * docs/BENCHMARKS.md ("Kernel variants") lists each with its figure.
 *
 * Zero inputs are skipped: a term whose input is exactly zero (+0 or -0) is not added
 * at all, in every kernel, so they all skip the same terms and stay bit-identical.
 * This is what makes ReLU activations and binary image planes (MinAtar observations
 * are mostly zeros) cheap: the dense kernel reads only the weight rows of nonzero
 * inputs, the convolution visits only nonzero pixels. It is the one difference from
 * a plain chain of fused multiply-adds: (a) a zero input contributes nothing even
 * against an infinite or NaN weight (a plain fma would give NaN), and (b) signed-zero
 * results may differ: with a -0 bias, fma(0, w > 0, -0) would give +0 where the
 * skipped term leaves -0. Every other result is unchanged, since x * w is then an
 * exact zero and adding it returns the sum as it was. A NaN or infinite *input* is not
 * zero and is never skipped, so it still reaches the outputs.
 *
 * "Bit-identical" covers every number, infinity and the NaN-ness of a result, not the
 * payload of a NaN: when an input and its weight are both NaN, which payload a fused
 * multiply-add passes on depends on the operand order the compiler picks (IEEE 754
 * leaves it open; the AVX-512 blocks, whose broadcast input is folded into the FMA's
 * memory operand, pass on the weight's). A NaN output stops an evaluation anyway
 * (NEVO_ERR_NUMERIC). */
#ifndef NEVO_KERNELS_H
#define NEVO_KERNELS_H

#include <stddef.h>

#include "core/simd.h"
#include "nevo/policy.h"
#include "nn/kernel_bodies.h"

/* How many listed inputs ahead the AVX-512 one-row dense kernel prefetches weight rows
 * (also the bench's bare loop over the same rows, which measures what that pattern
 * allows): 8 rows of 0.5-1 KB keep 4-8 KB in flight, more than memory delivers in its
 * latency (2-4 KB: ~100 ns at 20-40 GB/s); docs/BENCHMARKS.md has the distances tried. */
#define NEVO_PREFETCH_ROWS 8
/* rows per block in the lanes layout (one AVX-512 vector of floats, two AVX2 vectors) */
#define NEVO_LANES 16
/* rows (each its own network) dense_nets takes at once: 4 rows x 4 vectors of sums are
 * half the AVX-512 registers, 4 x 2 half the AVX2 ones */
#define NEVO_NETS_MAX 4

/* Y (rows, out; row stride ys) = b + X (rows, in; row stride xs) @ W (in, out) */
typedef void (*NevoDenseFn)(const float *W, const float *b, const float *X, size_t xs, int rows, int in, int out,
                            float *Y, size_t ys);

/* each of NEVO_LANES rows in the lanes layout (XT -> YT): act(b + x W) (NevoKernels'
 * dense_lanes says more) */
typedef void (*NevoDenseLanesFn)(const float *W, const float *b, const float *XT, int in, int out,
                                 NevoActivation act, float *YT);

typedef struct NevoKernels {
    const char *name; /* "generic", "avx2" or "avx512" */
    NevoDenseFn dense; /* for weights in cache (or where one kernel serves both) */
    /* "valid" convolution of one HWC image x into HWC y, weights (k, k, in_c, out_c) */
    void (*conv)(const NevoLayer *L, const float *W, const float *b, const float *x, float *y);
    /* y = tanh(y) elementwise, nevo_tanhf's results bit for bit */
    void (*tanh)(float *y, int n);
    /* dense and then act for a block of NEVO_LANES rows held in the "lanes" layout,
     * input k of every row at XT + NEVO_LANES k (the rows are the lanes of a vector):
     * each row's act(b + x W), output o of every row at YT + NEVO_LANES o, every output
     * the same terms in the same order as dense and the same activation, so the same
     * bits. NULL in the portable set. */
    NevoDenseLanesFn dense_lanes;
    /* conv and then act for a block of NEVO_LANES rows in the lanes layout, input
     * (iy, ix, c) of every row at XT + NEVO_LANES ((iy in_w + ix) in_c + c), output
     * (oy, ox, f) at YT + NEVO_LANES ((oy out_w + ox) out_c + f): conv's bits, then
     * act's. Set with dense_lanes. */
    void (*conv_lanes)(const NevoLayer *L, const float *W, const float *b, const float *XT, NevoActivation act,
                       float *YT);
    /* into and out of the lanes layout: XT[NEVO_LANES k + r] = X[r xs + k] for k < in, and
     * Y[r ys + o] = YT[NEVO_LANES o + r] for o < out (r < NEVO_LANES); set with dense_lanes */
    void (*to_lanes)(const float *X, size_t xs, int in, float *XT);
    void (*from_lanes)(const float *YT, int out, float *Y, size_t ys);
    /* dense for rows (1..NEVO_NETS_MAX) each with its own network, row r with weights
     * W[r] and bias b[r]: row r of Y = b[r] + (row r of X) W[r], the same bits as dense
     * on each row alone. NULL in the portable set. */
    void (*dense_nets)(const float *const *W, const float *const *b, const float *X, size_t xs, int rows, int in,
                       int out, float *Y, size_t ys);
    /* plus[k] = theta[k] + d and minus[k] = theta[k] - d, d = sigma * eps[k] rounded, for
     * k < n, either row NULL to skip it (materialising a GA child or an ES pair,
     * nevo_perturb_rows); stream: non-temporal stores where the set has them */
    void (*perturb)(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                    int stream);
    /* g[k] = (((g[k] + w[0] rows[0][k]) + w[1] rows[1][k]) + ...) + w[m-1] rows[m-1][k]
     * for k0 <= k < k1, in double: each float widened (exactly), each product and each
     * sum rounded once, the rows in the order given (the ES gradient over noise slices,
     * nevo_weighted_sum) */
    void (*weighted_sum)(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1);
    /* dense for weights read from memory (a call whose networks together exceed
     * nevo_cache_streamed_bytes, so each network's weights are gone from cache by its
     * next call): the same bits, by an access order that streams from memory better and
     * runs slower from cache. NULL where dense serves both (the portable and AVX-512
     * sets). */
    NevoDenseFn dense_streamed;
    /* dense_lanes for weights read from memory, the same bits: it prefetches each
     * chunk's successor and what follows the layer (the next network), which from cache
     * only slows it. NULL where dense_lanes serves both (the portable and AVX-512 sets). */
    NevoDenseLanesFn dense_lanes_streamed;
} NevoKernels;

/* The kernels in use (chosen on first call). */
const NevoKernels *nevo_kernels(void);
/* The size of this CPU's L2 cache in bytes (sysconf, read once; 1 MiB where it does
 * not say; one core's share where cores share it is less): what the kernels' callers
 * size their working sets by. */
size_t nevo_cache_l2_bytes(void);
/* The weights a call may read from cache (a multiple of the L2: kernels.c says why):
 * nevo_policy_forward sends a call whose networks outweigh it to the streamed kernels. */
size_t nevo_cache_streamed_bytes(void);
/* A specific implementation, or NULL if this CPU/build lacks it. */
const NevoKernels *nevo_kernels_named(const char *name);

/* The hidden-layer tanh for one float, the reference every kernel reproduces bit for
 * bit: float arithmetic only, tanh|x| = (e^z - 1) / (e^z + 1) with z = 2|x|, where
 * e^z - 1 = 2^n (1 + p) - 1 after z = n ln2 + r, |r| <= ln2/2, and p = e^r - 1 =
 * r + r^2 h(r) by its Taylor polynomial (no cancellation near 0, so the relative error
 * stays small for tiny x), computed as (e^z - 1) / ((e^z - 1) + 2). At most 2.42 ulp
 * from the true tanh over every float (97% within 1 ulp; checked exhaustively once,
 * sampled in tests/test_policy.c); |x| >= 9 gives +-1, NaN stays NaN. */
float nevo_tanhf(float x);

/* Its constants (NEVO_TANH_*) and body are in kernel_bodies.h, which the CUDA kernels
 * share. */

/* y = act(y) elementwise: the set's tanh, or the portable relu (y < 0 ? 0 : y; -0 and
 * NaN stay as they are), which the compiler vectorises for each clone. */
void nevo_kernel_activate(NevoActivation act, float *y, int n);

/* The portable perturb over elements [k0, k1) (plus and minus as in NevoKernels.perturb,
 * indexed from 0): the generic set's whole loop, and the SIMD sets' head and tail. */
void nevo_perturb_portable(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t k0,
                           size_t k1);

/* The portable weighted_sum: the generic set's, and the SIMD sets' tail. */
void nevo_weighted_sum_portable(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1);

/* A policy's parameter blocks for low-rank noise at `rank` (params.c; kernel_bodies.h's
 * NevoLRBlock): at most NEVO_LOWRANK_BLOCKS of them, the count returned. */
#define NEVO_LOWRANK_BLOCKS (3 * NEVO_POLICY_MAX_LAYERS)
int nevo_lowrank_blocks(const NevoPolicy *p, int rank, NevoLRBlock *out);
/* The most output pixels (out_h out_w) of p's conv layers, 1 without any: a factored
 * forward's u for a conv layer is (pixels, rank) a row (policy.c). */
size_t nevo_policy_conv_pixels(const NevoPolicy *p);

/* x86 implementations (kernels_avx2.c, kernels_avx512.c); NULL elsewhere. */
const NevoKernels *nevo_kernels_avx2(void);
const NevoKernels *nevo_kernels_avx512(void);

#endif
