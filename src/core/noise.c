/* Shared noise table: parallel, thread-count independent generation; named slices. */
#include "nevo/noise.h"

#include <stdlib.h>

#include "nevo/rng.h"
#include "nevo/status.h"

#define BLOCK ((size_t)1 << 16)

size_t nevo_noise_auto_size(size_t nparams) {
    size_t want = 64 * nparams, size = NEVO_NOISE_MIN_FLOATS;
    while (size < want && size < NEVO_NOISE_MAX_FLOATS) size *= 2;
    return size;
}

typedef struct FillJob {
    NevoNoise *noise;
} FillJob;

static void fill_block(void *ctx, int b, int worker) {
    (void)worker;
    NevoNoise *noise = ((FillJob *)ctx)->noise;
    size_t start = (size_t)b * BLOCK;
    size_t n = noise->size - start < BLOCK ? noise->size - start : BLOCK;
    NevoRng rng;
    nevo_rng_init(&rng, NEVO_NOISE_TABLE_SEED, NEVO_RNG_NOISE_TABLE, 0, (uint32_t)b, 0);
    nevo_rng_fill_normal(&rng, noise->table + start, n);
}

NevoNoise *nevo_noise_new(size_t floats, NevoPool *pool) {
    NevoNoise *noise = nevo_alloc(sizeof *noise);
    noise->size = floats;
    noise->table = nevo_alloc_aligned(sizeof(float) * floats);
    FillJob job = {noise};
    nevo_pool_run(pool, (int)((floats + BLOCK - 1) / BLOCK), fill_block, &job);
    return noise;
}

void nevo_noise_free(NevoNoise *noise) {
    if (!noise) return;
    free(noise->table);
    free(noise);
}

const float *nevo_noise_slice(const NevoNoise *noise, size_t n, uint64_t seed, uint32_t purpose,
                              uint32_t generation, uint32_t individual, uint32_t episode) {
    NEVO_ASSERT(n < noise->size);
    uint64_t r = nevo_rng_derive(seed, purpose, generation, individual, episode);
    return noise->table + (size_t)(r % (uint64_t)(noise->size - n + 1));
}
