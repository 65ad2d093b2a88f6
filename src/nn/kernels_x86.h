/* What the AVX2 and AVX-512 kernel files share (internal to them): the rule that picks
 * a sparse or a dense convolution, the lanes layout's chunks, and the AVX2 perturb and
 * weighted sum, which the AVX-512 set uses too. Each function in those files carries its
 * own target attribute, and a set is returned only after __builtin_cpu_supports says the
 * CPU has its instructions; the library itself is built for baseline x86-64. */
#ifndef NEVO_KERNELS_X86_H
#define NEVO_KERNELS_X86_H

#include "nn/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define NEVO_KERNELS_X86 1

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline int min_int(int a, int b) { return a < b ? a : b; }

/* M(1) ... M(16): the cases of a switch that gives a register block each width from 1
 * to 16 as a constant, so its accumulators stay in registers */
#define CASES_1_TO_16(M) \
    M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) M(16)

/* The one-row kernels list a row's nonzero inputs in chunks of at most CHUNK (a stack
 * buffer); an output's partial sums carry over from one chunk to the next in Y. */
#define CHUNK 1024

/* A convolution goes input-stationary (each nonzero input scattered to the K^2 / S^2
 * outputs whose windows hold it) rather than output-stationary (every term of every
 * window, in registers) while nonzero inputs x CONV_SPARSE_COST < C x output positions
 * x S^2: CONV_SPARSE_COST is what a scattered term costs in register FMAs. That is an
 * empirical figure, 1.4-16 by path and CPU (docs/BENCHMARKS.md); 5 lies between, and
 * MinAtar's planes (Seaquest 1%, Breakout 8% nonzero) are well on the sparse side. Both
 * give the same bits. */
#define CONV_SPARSE_COST 5.0

static inline int conv_sparse_pays(const NevoLayer *L, int nonzero) {
    return (double)nonzero * CONV_SPARSE_COST < (double)L->in_c * L->out_h * L->out_w * L->stride * L->stride;
}

/* A lanes tile reads one 64-byte line of each weight row it passes, so a dense layer
 * whose weights do not fit in L1 goes through in chunks of inputs holding this many
 * bytes of weights, every tile of a chunk before the next: a chunk is read from L2 or
 * memory once and then from L1 by its other tiles. 32 KB is the L1d of the CPUs
 * measured (32-48 KB); smaller and larger chunks are in docs/BENCHMARKS.md. */
#define LANES_CHUNK_BYTES (32 * 1024)

/* The most inputs the lanes kernels list at once (a stack buffer of uint16_t): a chunk's
 * (at most LANES_CHUNK_BYTES / 4 for one output) or a convolution window row's piece. */
#define LANES_LIST_MAX 8192

/* A convolution window row is listed in pieces of this many inputs (a stack buffer). */
#define LANES_CONV_LIST 256

/* The inputs a chunk of a dense lanes layer takes: all of them, or as many as
 * LANES_CHUNK_BYTES of weights hold, at least 16. */
static inline int lanes_chunk_inputs(int in, int out) {
    if ((size_t)in * (size_t)out * sizeof(float) <= LANES_CHUNK_BYTES) return in;
    int kc = (int)(LANES_CHUNK_BYTES / ((size_t)out * sizeof(float)));
    kc = kc < 16 ? 16 : kc;
    NEVO_ASSERT(kc <= LANES_LIST_MAX);
    return kc;
}

/* The AVX2 set's perturb and weighted_sum (kernels_avx2.c), which the AVX-512 set uses
 * too (their comments say why). */
void nevo_perturb_avx2(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                       int stream);
void nevo_weighted_sum_avx2(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1);

#endif
#endif
