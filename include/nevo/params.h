/* Parameter vectors: the operations that make and combine them, in one rounding order
 * on every CPU and kernel set.
 *
 * A network's parameters come from named noise (noise.h): a fresh network from its
 * init stream (nevo_policy_init_params), a GA child from its parent plus sigma times a
 * noise slice, an ES perturbation from the mean plus or minus sigma times one. A seed
 * chain names a vector by that history alone (a Deep GA genome), so it can be rebuilt
 * anywhere with the same noise table: d = sigma eps[k] rounded, then theta[k] + d. */
#ifndef NEVO_PARAMS_H
#define NEVO_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/io.h"
#include "nevo/noise.h"
#include "nevo/policy.h"

/* One mutation of a seed chain: theta += sigma * eps, eps the slice named (seed,
 * NEVO_RNG_MUTATE, generation, individual, 0), or at a chain's rank r >= 1 the full vector
 * of that name's compact slice at r (nevo_lowrank_expand, below). 12 bytes in checkpoints
 * and task files. */
typedef struct NevoMutation {
    uint32_t generation, individual;
    float sigma;
} NevoMutation;

/* A vector as its history: the init stream (init_generation, init_individual), then the
 * mutations, oldest first, all full-rank (rank 0) or all low-rank at `rank` (a GA with
 * ga.rank). The rank is not in a chain's bytes: its owner keeps it beside them. */
typedef struct NevoChain {
    uint32_t init_generation, init_individual;
    int n;
    int rank;
    const NevoMutation *muts; /* (n) */
} NevoChain;

/* plus = theta + sigma * eps and minus = theta - sigma * eps, elementwise (d = sigma *
 * eps[k] rounded, then added or subtracted), either row NULL to skip it; plus may be
 * theta (in place, as a chain's replay does). One pass, in the kernel set's widest
 * vectors. stream: non-temporal stores on x86, for rows the forward reads back from
 * memory (a population beyond the caches); 0 for a row read next from the cache. */
void nevo_perturb_rows(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                       int stream);

/* g[k] += w[0] rows[0][k] + ... + w[m-1] rows[m-1][k] for k0 <= k < k1, in double, the
 * rows added one after another in the order given (each product and each sum rounded
 * once), so the bits do not depend on the kernel set or on how [0, n) is split. */
void nevo_weighted_sum(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1);

/* Low-rank perturbations (EGGROLL: Sarkar et al. 2025). A member's noise is a compact
 * vector z of nevo_lowrank_floats(p, rank) floats (a noise-table slice), standing for
 * the full vector eps of p->nparams: every weight matrix (a dense layer's W (in, out), a
 * conv layer's (k k in_c, out_c), an LSTM's Wx (in, 4H) and Wh (H, 4H)) gets
 * A B^T / sqrt(rank), A (rows, rank) and B (cols, rank) taken from z in that order;
 * every bias gets z's next floats as they are. The blocks follow the parameter layout,
 * and eps[k] of a matrix element (a, b) is s c with s the fused sum of A[a][q] B[b][q]
 * over q ascending from 0 and c = (float)(1 / sqrt(rank)): one rounding order
 * everywhere. The population's perturbations then span rank-r directions per matrix,
 * and a forward could apply one as a shared product plus a rank-r correction. */
#define NEVO_LOWRANK_MAX 64
size_t nevo_lowrank_floats(const NevoPolicy *p, int rank);
/* eps[k - k0] for k0 <= k < k1: the full vector of z at `rank`, over that range. */
void nevo_lowrank_expand(const NevoPolicy *p, int rank, const float *z, float *eps, size_t k0, size_t k1);
/* plus = theta + sigma eps and minus = theta - sigma eps (nevo_perturb_rows's operations),
 * eps the full vector of z at `rank`, expanded a chunk at a time; either row NULL, and
 * plus may be theta when minus is NULL (in place). */
void nevo_lowrank_perturb(const NevoPolicy *p, int rank, const float *z, float sigma, const float *theta,
                          float *plus, float *minus);

/* A member's factor row, what the factored forward (nevo_policy_forward_factored) reads
 * in place of its built network: coef = (sign sigma) c and s = sign sigma (floats 0 and
 * 1), zeros up to NEVO_FACTOR_HEAD, then the compact slice z at `rank` laid out for the
 * forward's sums: every block where z has it, a dense layer's A as A^T (rank, rows),
 * every B as B^T (rank, cols), a conv layer's A and the biases as they are.
 * nevo_factor_row_floats(p, rank) floats in all. The forward sums a dense layer's
 * u = x A in NEVO_FACTOR_LANES partial sums. Feed-forward policies. */
#define NEVO_FACTOR_HEAD 16
#define NEVO_FACTOR_LANES 16
size_t nevo_factor_row_floats(const NevoPolicy *p, int rank);
/* A factor row's head for s = sign sigma at `rank` (NEVO_FACTOR_HEAD floats). */
void nevo_factor_head(float s, int rank, float *head);
/* The factor row of compact slice z with s = sign sigma, into row. */
void nevo_factor_row(const NevoPolicy *p, int rank, const float *z, float s, float *row);

/* Rebuilds a chain's vector into theta (p->nparams floats): init, then each mutation in
 * place, the same operations as the live run that made it (a low-rank mutation: those of
 * building its NEVO_NET_LOWRANK recipe, tasks.h). */
void nevo_chain_build(const NevoPolicy *p, const NevoNoise *noise, uint64_t seed, const NevoChain *chain,
                      float *theta);

/* A chain as bytes (checkpoints and task sets): init_generation u32, init_individual
 * u32, n u32, then n x (generation u32, individual u32, sigma f32). */
void nevo_chain_write(NevoBuf *b, const NevoChain *chain);
/* Reads one into the caller's muts (room for max_muts), refusing (0) a count beyond
 * max_muts or beyond the bytes left, a sigma that is NaN or beyond +-1e6, or a truncated
 * read. The chain's rank is left 0: the caller sets the one it kept. */
int nevo_chain_read(NevoReader *r, NevoChain *chain, NevoMutation *muts, size_t max_muts);
/* The count a chain at r's position says it holds (r unmoved; 0 where unreadable). */
uint32_t nevo_chain_peek_count(const NevoReader *r);

#endif
