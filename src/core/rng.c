/* Philox4x32-10 and the samplers built on it. */
#include "nevo/rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void nevo_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* splitmix64 finaliser: spreads (seed, purpose) over the whole key so nearby seeds
 * and purposes give unrelated keys. */
static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void nevo_rng_init(NevoRng *rng, uint64_t seed, uint32_t purpose, uint32_t generation,
                   uint32_t individual, uint32_t episode) {
    uint64_t key = mix64(seed ^ mix64(0x6E65766Full + purpose));
    rng->key[0] = (uint32_t)key;
    rng->key[1] = (uint32_t)(key >> 32);
    rng->ctr[0] = 0;
    rng->ctr[1] = episode;
    rng->ctr[2] = individual;
    rng->ctr[3] = generation;
    rng->pos = 4;
}

uint64_t nevo_rng_derive(uint64_t seed, uint32_t purpose, uint32_t generation,
                         uint32_t individual, uint32_t episode) {
    NevoRng rng;
    nevo_rng_init(&rng, seed, purpose, generation, individual, episode);
    return nevo_rng_u64(&rng);
}

static void refill(NevoRng *rng) {
    nevo_philox4x32_10(rng->ctr, rng->key, rng->buf);
    rng->ctr[0]++;
    rng->pos = 0;
}

uint32_t nevo_rng_u32(NevoRng *rng) {
    if ((unsigned)rng->pos >= 4) refill(rng); /* any pos outside 0..3 (a restored stream) refills */
    return rng->buf[rng->pos++];
}

uint64_t nevo_rng_u64(NevoRng *rng) {
    uint64_t lo = nevo_rng_u32(rng);
    uint64_t hi = nevo_rng_u32(rng);
    return lo | (hi << 32);
}

double nevo_rng_uniform(NevoRng *rng) {
    return (double)(nevo_rng_u64(rng) >> 11) * 0x1.0p-53;
}

uint32_t nevo_rng_below(NevoRng *rng, uint32_t n) {
    /* Lemire's multiply-and-reject: unbiased for every n. */
    uint64_t m = (uint64_t)nevo_rng_u32(rng) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)nevo_rng_u32(rng) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Box-Muller on one block's four words: two normals from (u1, u2). u1 is in (0, 1] so
 * log never sees zero. Computed in double and rounded once, so every platform that
 * has correctly rounded sqrt and a faithful libm gives the same floats. */
static void box_muller(uint32_t a, uint32_t b, uint32_t c, uint32_t d, double *z0, double *z1) {
    uint64_t x = (uint64_t)a | ((uint64_t)b << 32);
    uint64_t y = (uint64_t)c | ((uint64_t)d << 32);
    double u1 = ((double)(x >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(y >> 11) * 0x1.0p-53;
    double r = sqrt(-2.0 * log(u1));
    double t = 6.283185307179586 * u2;
    *z0 = r * cos(t);
    *z1 = r * sin(t);
}

double nevo_rng_normal(NevoRng *rng) {
    uint32_t a = nevo_rng_u32(rng), b = nevo_rng_u32(rng);
    uint32_t c = nevo_rng_u32(rng), d = nevo_rng_u32(rng);
    double z0, z1;
    box_muller(a, b, c, d, &z0, &z1);
    return z0;
}

void nevo_rng_fill_normal(NevoRng *rng, float *out, size_t n) {
    size_t i = 0;
    /* Fast path: whole blocks straight from the counter, two normals per block. */
    if (rng->pos >= 4) {
        uint32_t w[4];
        for (; i + 2 <= n; i += 2) {
            nevo_philox4x32_10(rng->ctr, rng->key, w);
            rng->ctr[0]++;
            double z0, z1;
            box_muller(w[0], w[1], w[2], w[3], &z0, &z1);
            out[i] = (float)z0;
            out[i + 1] = (float)z1;
        }
    }
    for (; i < n; i++) out[i] = (float)nevo_rng_normal(rng);
}
