/* Parameter vectors: perturbations, weighted noise sums and seed chains, through the
 * kernel set in use (every set rounds the same way). */
#include "nevo/params.h"

#include <math.h>
#include <string.h>

#include "nevo/rng.h"
#include "nn/kernels.h"

void nevo_perturb_rows(float *plus, float *minus, const float *theta, float sigma, const float *eps, size_t n,
                       int stream) {
    nevo_kernels()->perturb(plus, minus, theta, sigma, eps, n, stream);
}

void nevo_weighted_sum(double *g, const float *const *rows, const double *w, int m, size_t k0, size_t k1) {
    nevo_kernels()->weighted_sum(g, rows, w, m, k0, k1);
}

void nevo_lowrank_perturb(const NevoPolicy *p, int rank, const float *z, float sigma, const float *theta,
                          float *plus, float *minus) {
    float eps[1024];
    for (size_t k0 = 0; k0 < p->nparams; k0 += 1024) {
        size_t k1 = k0 + 1024 < p->nparams ? k0 + 1024 : p->nparams;
        nevo_lowrank_expand(p, rank, z, eps, k0, k1);
        nevo_perturb_rows(plus ? plus + k0 : NULL, minus ? minus + k0 : NULL, theta + k0, sigma, eps, k1 - k0, 0);
    }
}

/* The GA's mutation step in place: theta += sigma * eps(mutation), full rank or low. */
static void mutate(const NevoPolicy *p, const NevoNoise *noise, uint64_t seed, NevoMutation m, int rank,
                   float *theta) {
    size_t len = rank ? nevo_lowrank_floats(p, rank) : p->nparams;
    const float *eps = nevo_noise_slice(noise, len, seed, NEVO_RNG_MUTATE, m.generation, m.individual, 0);
    if (rank)
        nevo_lowrank_perturb(p, rank, eps, m.sigma, theta, theta, NULL);
    else
        nevo_perturb_rows(theta, NULL, theta, m.sigma, eps, p->nparams, 0);
}

void nevo_chain_build(const NevoPolicy *p, const NevoNoise *noise, uint64_t seed, const NevoChain *chain,
                      float *theta) {
    NEVO_ASSERT(chain->rank >= 0 && chain->rank <= NEVO_LOWRANK_MAX);
    nevo_policy_init_params(p, noise, seed, chain->init_generation, chain->init_individual, theta);
    for (int j = 0; j < chain->n; j++) mutate(p, noise, seed, chain->muts[j], chain->rank, theta);
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
    chain->rank = 0;
    chain->muts = muts;
    if (r->failed || n > max_muts || n > (r->len - r->pos) / 12) return 0;
    for (uint32_t j = 0; j < n; j++) {
        muts[j].generation = nevo_read_u32(r);
        muts[j].individual = nevo_read_u32(r);
        nevo_read(r, &muts[j].sigma, 4);
        if (!(fabsf(muts[j].sigma) <= 1e6f)) return 0; /* NaN too; a step beyond 1e6 overflows the floats */
    }
    chain->n = (int)n;
    return nevo_reader_ok(r, false);
}

/* ---- low-rank perturbations ----------------------------------------------------------- */

/* The parameter vector as blocks in layout order (kernel_bodies.h's NevoLRBlock, which
 * the CUDA backend's builds use too), their compact noise at z_off for `rank`. */
int nevo_lowrank_blocks(const NevoPolicy *p, int rank, NevoLRBlock *out) {
    int n = 0;
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        if (L->kind == NEVO_LAYER_LSTM) {
            int H = L->out_dim;
            out[n++] = (NevoLRBlock){L->w_off, 0, L->in_dim, 4 * H};
            out[n++] = (NevoLRBlock){L->w_off + (size_t)L->in_dim * 4 * (size_t)H, 0, H, 4 * H};
            out[n++] = (NevoLRBlock){L->b_off, 0, 0, 4 * H};
        } else {
            int rows = L->kind == NEVO_LAYER_CONV ? L->kernel * L->kernel * L->in_c : L->in_dim;
            int cols = L->kind == NEVO_LAYER_CONV ? L->out_c : L->out_dim;
            out[n++] = (NevoLRBlock){L->w_off, 0, rows, cols};
            out[n++] = (NevoLRBlock){L->b_off, 0, 0, cols};
        }
    }
    size_t z = 0;
    for (int i = 0; i < n; i++) {
        out[i].z_off = z;
        z += out[i].rows ? (size_t)(out[i].rows + out[i].cols) * (size_t)rank : (size_t)out[i].cols;
    }
    return n;
}

/* out[b - c0] = (sum over q of a[q] B[b][q], fused in q order from 0) * c for c0 <= b < c1,
 * B (cols, R): nevo_lr_eps's bits, the columns side by side in vectors */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void lowrank_row(const float *a, const float *B, size_t R, size_t c0, size_t c1, float c, float *out) {
    size_t n = c1 - c0;
    for (size_t j = 0; j < n; j++) out[j] = 0.0f;
    for (size_t q = 0; q < R; q++) {
        float aq = a[q];
        const float *bq = B + c0 * R + q;
        for (size_t j = 0; j < n; j++) out[j] = fmaf(aq, bq[j * R], out[j]);
    }
    for (size_t j = 0; j < n; j++) out[j] *= c;
}

size_t nevo_lowrank_floats(const NevoPolicy *p, int rank) {
    NEVO_ASSERT(rank >= 1 && rank <= NEVO_LOWRANK_MAX);
    NevoLRBlock b[NEVO_LOWRANK_BLOCKS];
    int n = nevo_lowrank_blocks(p, rank, b);
    return b[n - 1].z_off + (b[n - 1].rows ? (size_t)(b[n - 1].rows + b[n - 1].cols) * (size_t)rank
                                            : (size_t)b[n - 1].cols);
}

size_t nevo_factor_row_floats(const NevoPolicy *p, int rank) { return NEVO_FACTOR_HEAD + nevo_lowrank_floats(p, rank); }

void nevo_factor_head(float s, int rank, float *head) {
    memset(head, 0, sizeof(float) * NEVO_FACTOR_HEAD);
    head[0] = s * (float)(1.0 / sqrt((double)rank)); /* the c of nevo_lowrank_expand */
    head[1] = s;
}

/* dst (cols, rows) = src (rows, cols) transposed */
static void transpose(const float *src, int rows, int cols, float *dst) {
    for (int a = 0; a < rows; a++)
        for (int b = 0; b < cols; b++) dst[(size_t)b * rows + a] = src[(size_t)a * cols + b];
}

void nevo_factor_row(const NevoPolicy *p, int rank, const float *z, float s, float *row) {
    NEVO_ASSERT(p->lstm_layer < 0 && rank >= 1 && rank <= NEVO_LOWRANK_MAX);
    NevoLRBlock bl[NEVO_LOWRANK_BLOCKS];
    int nb = nevo_lowrank_blocks(p, rank, bl);
    nevo_factor_head(s, rank, row);
    float *out = row + NEVO_FACTOR_HEAD;
    for (int i = 0; i < nb; i++) {
        const NevoLRBlock *b = &bl[i];
        const float *zi = z + b->z_off;
        float *o = out + b->z_off;
        if (b->rows == 0) { /* a bias's noise as it is */
            memcpy(o, zi, sizeof(float) * (size_t)b->cols);
            continue;
        }
        size_t a_len = (size_t)b->rows * rank;
        if (p->layers[i / 2].kind == NEVO_LAYER_CONV) /* conv: A as the kernel's rank filters */
            memcpy(o, zi, sizeof(float) * a_len);
        else
            transpose(zi, b->rows, rank, o);
        transpose(zi + a_len, b->cols, rank, o + a_len);
    }
}

void nevo_lowrank_expand(const NevoPolicy *p, int rank, const float *z, float *eps, size_t k0, size_t k1) {
    NEVO_ASSERT(rank >= 1 && rank <= NEVO_LOWRANK_MAX && k0 <= k1 && k1 <= p->nparams);
    NevoLRBlock b[NEVO_LOWRANK_BLOCKS];
    int n = nevo_lowrank_blocks(p, rank, b);
    const float c = (float)(1.0 / sqrt((double)rank));
    for (int i = 0; i < n; i++) {
        size_t size = b[i].rows ? (size_t)b[i].rows * (size_t)b[i].cols : (size_t)b[i].cols;
        size_t lo = b[i].off > k0 ? b[i].off : k0, hi = b[i].off + size < k1 ? b[i].off + size : k1;
        if (lo >= hi) continue;
        if (b[i].rows == 0) {
            for (size_t k = lo; k < hi; k++) eps[k - k0] = nevo_lr_eps(&b[i], rank, c, z, k);
            continue;
        }
        /* row by row: nevo_lr_eps's operations on each element, vectorised over columns */
        size_t cols = (size_t)b[i].cols, R = (size_t)rank, e = lo - b[i].off;
        const float *A = z + b[i].z_off, *B = A + (size_t)b[i].rows * R;
        for (size_t k = lo; k < hi;) {
            size_t row = e / cols, c0 = e % cols, c1 = cols - c0 < hi - k ? cols : c0 + (hi - k);
            lowrank_row(A + row * R, B, R, c0, c1, c, eps + (k - k0));
            k += c1 - c0;
            e += c1 - c0;
        }
    }
}
