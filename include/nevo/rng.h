/* Counter-based random streams (Philox4x32-10, Salmon et al. 2011).
 *
 * Every random number nevo draws belongs to a stream named by
 * (seed, purpose, generation, individual, episode) and is a pure function of that name
 * and its position in the stream. No stream is ever keyed by a thread or process id,
 * so results do not depend on how many threads or ranks computed them, and any
 * stream can be regenerated anywhere (a GA genome is a list of stream names).
 *
 * Layout: the 64-bit Philox key is a mix of (seed, purpose); the 128-bit counter is
 * (block, episode, individual, generation), block counting 4-word outputs. */
#ifndef NEVO_RNG_H
#define NEVO_RNG_H

#include <stddef.h>
#include <stdint.h>

/* What a stream is for; part of its name so purposes never share numbers. */
typedef enum NevoRngPurpose {
    NEVO_RNG_INIT = 1,       /* initial network parameters */
    NEVO_RNG_MUTATE = 2,     /* GA mutation noise */
    NEVO_RNG_ES_NOISE = 3,   /* ES perturbations */
    NEVO_RNG_ENV_SEED = 4,   /* per-episode environment seeds */
    NEVO_RNG_ENV = 5,        /* an environment instance's own draws */
    NEVO_RNG_SELECT = 6,     /* parent selection */
    NEVO_RNG_OBS_NORM = 7,   /* which rollouts feed observation statistics */
    NEVO_RNG_POLICY = 8,     /* stochastic policies (random policy, action noise) */
    NEVO_RNG_ARCHIVE = 9,    /* novelty-archive sampling */
    NEVO_RNG_NOISE_TABLE = 10, /* the shared noise table's blocks */
    NEVO_RNG_DATA = 11,      /* supervised data: epoch orders, fitness batches */
    NEVO_RNG_ACTOR = 12,     /* actor-learner: the actors' action draws */
    NEVO_RNG_ACTOR_ENV = 13, /* actor-learner: the actors' episode seeds */
    NEVO_RNG_REPLAY = 14,    /* actor-learner: replay sampling (algo r2d2) */
    NEVO_RNG_USER = 64,      /* first value free for other modules */
} NevoRngPurpose;

/* Individual ids of episode-seed streams (NEVO_RNG_ENV_SEED) for episodes that are not
 * a population member's own: the GA's validation (common to every elite candidate),
 * the final and `nevo eval` evaluation, ES's evaluation of its current mean, and the
 * GA's children under ga.shared_episodes (common to all of a generation). */
#define NEVO_STREAM_VALIDATION 0xFFFFFFF0u
#define NEVO_STREAM_FINAL_EVAL 0xFFFFFFF1u
#define NEVO_STREAM_CENTER 0xFFFFFFF2u
#define NEVO_STREAM_SHARED 0xFFFFFFF3u

typedef struct NevoRng {
    uint32_t key[2];
    uint32_t ctr[4]; /* ctr[0] = next block */
    uint32_t buf[4];
    int pos;         /* next unread word of buf; 4 = empty */
} NevoRng;

/* The bare Philox4x32-10 bijection: out = philox(ctr, key). */
void nevo_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Opens the stream named (seed, purpose, generation, individual, episode) at its start. */
void nevo_rng_init(NevoRng *rng, uint64_t seed, uint32_t purpose, uint32_t generation,
                   uint32_t individual, uint32_t episode);

/* A 64-bit seed derived from a stream name (its first two words): how episode seeds
 * are made from (seed, generation, individual, episode). */
uint64_t nevo_rng_derive(uint64_t seed, uint32_t purpose, uint32_t generation,
                         uint32_t individual, uint32_t episode);

uint32_t nevo_rng_u32(NevoRng *rng);
uint64_t nevo_rng_u64(NevoRng *rng);
/* Uniform double in [0, 1) with 53 random bits. */
double nevo_rng_uniform(NevoRng *rng);
/* Uniform integer in [0, n), unbiased; n >= 1. */
uint32_t nevo_rng_below(NevoRng *rng, uint32_t n);
/* Standard normal (Box-Muller on two uniforms; both outputs used in pairs by fill). */
double nevo_rng_normal(NevoRng *rng);
/* n standard-normal floats: the noise slices of GA mutations and ES perturbations. */
void nevo_rng_fill_normal(NevoRng *rng, float *out, size_t n);

#endif
