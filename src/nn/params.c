/* Parameter vectors: perturbations, weighted noise sums and seed chains, through the
 * kernel set in use (every set rounds the same way). */
#include "nevo/params.h"

#include <math.h>

#include "nevo/rng.h"
#include "nn/kernels.h"

#include <math.h>

void nevo_perturb_rows(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                       int stream) {
    nevo_kernels()->perturb(plus, minus, theta, sigma, eps, n, stream);
}

void nevo_weighted_sum(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1) {
    nevo_kernels()->weighted_sum(g, rows, w, m, k0, k1);
}

/* The GA's mutation step: dst = src + sigma * eps(mutation), dst may be src. */
static void mutate(const NevoPolicy *p, const NevoNoise *noise, uint64_t seed, NevoMutation m, float *dst,
                 const float *src, int stream) {
    const float *eps = nevo_noise_slice(noise, p->nparams, seed, NEVO_RNG_MUTATE, m.generation, m.individual, 0);
    nevo_perturb_rows(dst, NULL, src, m.sigma, eps, p->nparams, stream);
}

void nevo_chain_build(const NevoPolicy *p, const NevoNoise *noise, uint64_t seed, const NevoChain *chain,
                      float *theta) {
    nevo_policy_init_params(p, noise, seed, chain->init_generation, chain->init_individual, theta);
    for (int j = 0; j < chain->n; j++) mutate(p, noise, seed, chain->muts[j], theta, theta, 0);
}

void nevo_chain_write(NevoBuf *b, const NevoChain *chain) {
    nevo_buf_u32(b, chain->init_generation);
    nevo_buf_u32(b, chain->init_individual);
    nevo_buf_u32(b, (uint32_t)chain->n);
    for (int j = 0; j < chain->n; j++) {
        nevo_buf_u32(b, chain->muts[j].generation);
        nevo_buf_u32(b, chain->muts[j].individual);
        nevo_buf_put(b, &chain->muts[j].sigma, 4);
    }
}

uint32_t nevo_chain_peek_count(const NevoReader *r) {
    NevoReader peek = *r;
    nevo_read_u32(&peek);
    nevo_read_u32(&peek);
    uint32_t n = nevo_read_u32(&peek);
    return peek.failed ? 0 : n;
}

int nevo_chain_read(NevoReader *r, NevoChain *chain, NevoMutation *muts, size_t max_muts) {
    chain->init_generation = nevo_read_u32(r);
    chain->init_individual = nevo_read_u32(r);
    uint32_t n = nevo_read_u32(r);
    chain->n = 0;
    chain->muts = muts;
    if (r->failed || n > max_muts || n > (r->len - r->pos) / 12) return 0;
    for (uint32_t j = 0; j < n; j++) {
        muts[j].generation = nevo_read_u32(r);
        muts[j].individual = nevo_read_u32(r);
        nevo_read(r, &muts[j].sigma, 4);
        if (!isfinite(muts[j].sigma)) return 0;
    }
    chain->n = (int)n;
    return nevo_reader_ok(r, false);
}

/* ---- low-rank perturbations ----------------------------------------------------------- */

/* The parameter vector as blocks, in layout order: a matrix (rows, cols) or a bias
 * (rows 0, cols = its length). */
typedef struct Block {
    size_t off;
    int rows, cols;
} Block;

static int blocks_of(const NevoPolicy *p, Block *out) {
    int n = 0;
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        if (L->kind == NEVO_LAYER_LSTM) {
            int H = L->out_dim;
            out[n++] = (Block){L->w_off, L->in_dim, 4 * H};
            out[n++] = (Block){L->w_off + (size_t)L->in_dim * 4 * (size_t)H, H, 4 * H};
            out[n++] = (Block){L->b_off, 0, 4 * H};
        } else {
            int rows = L->kind == NEVO_LAYER_CONV ? L->kernel * L->kernel * L->in_c : L->in_dim;
            int cols = L->kind == NEVO_LAYER_CONV ? L->out_c : L->out_dim;
            out[n++] = (Block){L->w_off, rows, cols};
            out[n++] = (Block){L->b_off, 0, cols};
        }
    }
    return n;
}

size_t nevo_lowrank_floats(const NevoPolicy *p, int rank) {
    NEVO_ASSERT(rank >= 1 && rank <= NEVO_LOWRANK_MAX);
    Block b[3 * NEVO_POLICY_MAX_LAYERS];
    int n = blocks_of(p, b);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += b[i].rows ? (size_t)(b[i].rows + b[i].cols) * (size_t)rank : (size_t)b[i].cols;
    return total;
}

void nevo_lowrank_expand(const NevoPolicy *p, int rank, const float *z, float *eps, size_t k0, size_t k1) {
    NEVO_ASSERT(rank >= 1 && rank <= NEVO_LOWRANK_MAX && k0 <= k1 && k1 <= p->nparams);
    Block b[3 * NEVO_POLICY_MAX_LAYERS];
    int n = blocks_of(p, b);
    const float c = (float)(1.0 / sqrt((double)rank));
    const size_t R = (size_t)rank;
    for (int i = 0; i < n; i++) {
        size_t size = b[i].rows ? (size_t)b[i].rows * (size_t)b[i].cols : (size_t)b[i].cols;
        size_t lo = b[i].off > k0 ? b[i].off : k0, hi = b[i].off + size < k1 ? b[i].off + size : k1;
        if (b[i].rows == 0) {
            for (size_t k = lo; k < hi; k++) eps[k - k0] = z[k - b[i].off];
        } else {
            const float *A = z, *B = z + (size_t)b[i].rows * R;
            size_t cols = (size_t)b[i].cols;
            for (size_t k = lo; k < hi; k++) {
                size_t e = k - b[i].off;
                const float *a = A + (e / cols) * R, *bb = B + (e % cols) * R;
                float sum = 0.0f;
                for (size_t q = 0; q < R; q++) sum = fmaf(a[q], bb[q], sum);
                eps[k - k0] = sum * c;
            }
        }
        z += b[i].rows ? (size_t)(b[i].rows + b[i].cols) * R : (size_t)b[i].cols;
    }
}
