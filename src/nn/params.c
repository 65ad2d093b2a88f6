/* Parameter vectors: perturbations, weighted noise sums and seed chains, through the
 * kernel set in use (every set rounds the same way). */
#include "nevo/params.h"

#include <math.h>

#include "nevo/rng.h"
#include "nn/kernels.h"

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
