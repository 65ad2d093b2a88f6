/* The shared noise table (Salimans et al. 2017; Such et al. 2017): one large block of
 * standard-normal floats, the same in every process, so a perturbation is an offset
 * into it rather than fresh samples. A GA child is then one vector add over a slice and
 * an ES perturbation is read in place — drawing 10^5..10^6 Box-Muller normals per child
 * would cost more than evaluating it.
 *
 * The table is generated from counter-based streams in fixed blocks (block b from the
 * stream (NEVO_NOISE_TABLE_SEED, NOISE_TABLE, 0, b, 0)), so it is identical whatever
 * the thread count. A slice is named like any stream, (seed, purpose, generation,
 * individual, episode): its offset is derived from that name. */
#ifndef NEVO_NOISE_H
#define NEVO_NOISE_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/threads.h"

#define NEVO_NOISE_TABLE_SEED 123u
#define NEVO_NOISE_MIN_FLOATS ((size_t)1 << 20)
#define NEVO_NOISE_MAX_FLOATS ((size_t)1 << 28)

typedef struct NevoNoise {
    float *table;  /* (size) standard normals */
    size_t size;
} NevoNoise;

/* The table size nevo picks for a network of nparams when the config leaves it at 0:
 * 64 * nparams rounded up to a power of two, within [2^20, 2^28] floats. */
size_t nevo_noise_auto_size(size_t nparams);

/* Generates a table of `floats` normals (at least nparams + 1) using the pool. */
NevoNoise *nevo_noise_new(size_t floats, NevoPool *pool);
void nevo_noise_free(NevoNoise *noise);

/* n consecutive table values starting at the offset named by the stream name. */
const float *nevo_noise_slice(const NevoNoise *noise, size_t n, uint64_t seed, uint32_t purpose,
                              uint32_t generation, uint32_t individual, uint32_t episode);

#endif
