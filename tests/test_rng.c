/* Tests for the counter-based random streams (src/core/rng.c, include/nevo/rng.h).
 *
 * References: Random123's published Philox4x32-10 known-answer vectors (kat_vectors);
 * the stream layout documented in rng.h (key = f(seed, purpose), counter = (block,
 * episode, individual, generation)); and the sampling distributions, checked by z-tests
 * and chi-square tests on fixed streams with critical values at p ~ 1e-4..1e-5, so a
 * correct sampler passes (deterministically, the streams are fixed) and a biased one
 * fails by a wide margin. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "nevo/rng.h"

/* --- Philox4x32-10 known answers (Random123 kat_vectors) ------------------------ */

TEST(rng_philox_known_answers) {
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
         {0x00000000u, 0x00000000u},
         {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (int v = 0; v < 3; v++) {
        uint32_t out[4];
        nevo_philox4x32_10(kat[v].ctr, kat[v].key, out);
        for (int i = 0; i < 4; i++)
            CHECK_MSG(out[i] == kat[v].out[i], "vector %d word %d: got %08x, want %08x", v, i,
                      out[i], kat[v].out[i]);
    }
}

/* --- stream layout and naming ---------------------------------------------------- */

/* The documented layout: counter (block, episode, individual, generation), key fixed by
 * (seed, purpose); words come out block by block in order. */
TEST(rng_stream_layout_matches_philox) {
    NevoRng rng;
    nevo_rng_init(&rng, 12345, NEVO_RNG_MUTATE, 7, 3, 2);
    CHECK(rng.ctr[0] == 0 && rng.ctr[1] == 2 && rng.ctr[2] == 3 && rng.ctr[3] == 7);
    uint32_t key[2] = {rng.key[0], rng.key[1]};
    for (uint32_t block = 0; block < 5; block++) {
        uint32_t ctr[4] = {block, 2, 3, 7}, want[4];
        nevo_philox4x32_10(ctr, key, want);
        for (int i = 0; i < 4; i++) {
            uint32_t got = nevo_rng_u32(&rng);
            CHECK_MSG(got == want[i], "block %u word %d: %08x vs %08x", block, i, got, want[i]);
        }
    }
    /* the key depends on the seed and the purpose only */
    NevoRng other;
    nevo_rng_init(&other, 12345, NEVO_RNG_MUTATE, 99, 98, 97);
    CHECK(other.key[0] == key[0] && other.key[1] == key[1]);
}

static void first_words(uint64_t seed, uint32_t purpose, uint32_t gen, uint32_t ind, uint32_t ep,
                        uint32_t out[8]) {
    NevoRng rng;
    nevo_rng_init(&rng, seed, purpose, gen, ind, ep);
    for (int i = 0; i < 8; i++) out[i] = nevo_rng_u32(&rng);
}

TEST(rng_stream_is_pure_function_of_name) {
    uint32_t a[8], b[8];
    first_words(42, NEVO_RNG_ES_NOISE, 5, 6, 7, a);
    /* re-opened, and opened after unrelated streams were used: same numbers */
    NevoRng noise;
    nevo_rng_init(&noise, 1, NEVO_RNG_ENV, 0, 0, 0);
    for (int i = 0; i < 1000; i++) (void)nevo_rng_u32(&noise);
    first_words(42, NEVO_RNG_ES_NOISE, 5, 6, 7, b);
    CHECK(memcmp(a, b, sizeof a) == 0);

    /* every field of the name matters */
    static const struct {
        uint64_t seed;
        uint32_t purpose, gen, ind, ep;
    } variants[] = {
        {43, NEVO_RNG_ES_NOISE, 5, 6, 7},
        {42 ^ (1ull << 63), NEVO_RNG_ES_NOISE, 5, 6, 7}, /* high seed bit */
        {42 + (1ull << 32), NEVO_RNG_ES_NOISE, 5, 6, 7}, /* high seed word */
        {42, NEVO_RNG_MUTATE, 5, 6, 7},
        {42, NEVO_RNG_ES_NOISE, 4, 6, 7},
        {42, NEVO_RNG_ES_NOISE, 5, 5, 7},
        {42, NEVO_RNG_ES_NOISE, 5, 6, 6},
        /* fields swapped: the counter is positional */
        {42, NEVO_RNG_ES_NOISE, 6, 5, 7},
        {42, NEVO_RNG_ES_NOISE, 5, 7, 6},
        {42, NEVO_RNG_ES_NOISE, 7, 6, 5},
    };
    int nv = (int)(sizeof variants / sizeof variants[0]);
    for (int v = 0; v < nv; v++) {
        first_words(variants[v].seed, variants[v].purpose, variants[v].gen, variants[v].ind,
                    variants[v].ep, b);
        int same = 0;
        for (int i = 0; i < 8; i++) same += a[i] == b[i];
        /* unrelated streams share a given word with probability 2^-32 */
        CHECK_MSG(same == 0, "variant %d shares %d of 8 words with the base stream", v, same);
    }
    /* seeds 0 and 1, purposes 1 and 2 (nearby names) are unrelated too */
    first_words(0, 1, 0, 0, 0, a);
    first_words(1, 1, 0, 0, 0, b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    first_words(0, 2, 0, 0, 0, b);
    CHECK(memcmp(a, b, sizeof a) != 0);
}

TEST(rng_derive_is_first_u64) {
    static const uint64_t seeds[] = {0, 1, 42, 0xFFFFFFFFFFFFFFFFull, 0x123456789ABCDEFull};
    for (int s = 0; s < 5; s++) {
        for (uint32_t ep = 0; ep < 4; ep++) {
            NevoRng rng;
            nevo_rng_init(&rng, seeds[s], NEVO_RNG_ENV_SEED, 3, 11, ep);
            uint32_t lo = nevo_rng_u32(&rng), hi = nevo_rng_u32(&rng);
            uint64_t want = (uint64_t)lo | ((uint64_t)hi << 32);
            CHECK(nevo_rng_derive(seeds[s], NEVO_RNG_ENV_SEED, 3, 11, ep) == want);
            nevo_rng_init(&rng, seeds[s], NEVO_RNG_ENV_SEED, 3, 11, ep);
            CHECK(nevo_rng_u64(&rng) == want);
        }
    }
}

/* --- samplers -------------------------------------------------------------------- */

TEST(rng_uniform_moments) {
    NevoRng rng;
    nevo_rng_init(&rng, 2024, NEVO_RNG_USER, 0, 0, 0);
    const int N = 200000;
    double sum = 0.0, sumsq = 0.0, lo = 1.0, hi = 0.0;
    for (int i = 0; i < N; i++) {
        double u = nevo_rng_uniform(&rng);
        CHECK_MSG(u >= 0.0 && u < 1.0, "uniform draw %d = %.17g outside [0,1)", i, u);
        /* 53 random bits: u * 2^53 is an integer */
        CHECK(u * 0x1.0p53 == floor(u * 0x1.0p53));
        sum += u;
        sumsq += u * u;
        if (u < lo) lo = u;
        if (u > hi) hi = u;
    }
    double mean = sum / N, var = sumsq / N - mean * mean;
    /* mean: sd sqrt(1/12/N); variance: sd of (U-1/2)^2 is sqrt(1/80 - 1/144) = sqrt(1/180) */
    double z_mean = (mean - 0.5) / sqrt(1.0 / 12.0 / N);
    double z_var = (var - 1.0 / 12.0) / sqrt(1.0 / 180.0 / N);
    CHECK_MSG(fabs(z_mean) < 4.5, "uniform mean %.6f, z = %.2f", mean, z_mean);
    CHECK_MSG(fabs(z_var) < 4.5, "uniform variance %.6f, z = %.2f", var, z_var);
    CHECK(lo < 1e-4 && hi > 1.0 - 1e-4);
}

/* Pearson chi-square of counts against equal expectation. */
static double chi_square(const long *counts, int k, long n) {
    double e = (double)n / k, x = 0.0;
    for (int i = 0; i < k; i++) x += (counts[i] - e) * (counts[i] - e) / e;
    return x;
}

TEST(rng_below_small_n_chi_square) {
    /* critical values of chi-square at p = 1e-4 for df = n - 1 */
    static const struct {
        uint32_t n;
        double crit;
    } cases[] = {{2, 15.14}, {3, 18.42}, {7, 27.86}, {10, 33.72}};
    for (int c = 0; c < 4; c++) {
        uint32_t n = cases[c].n;
        NevoRng rng;
        nevo_rng_init(&rng, 77, NEVO_RNG_SELECT, 0, n, 0);
        long counts[16] = {0};
        const long N = 60000;
        for (long i = 0; i < N; i++) {
            uint32_t x = nevo_rng_below(&rng, n);
            CHECK_MSG(x < n, "below(%u) returned %u", n, x);
            counts[x]++;
        }
        double x2 = chi_square(counts, (int)n, N);
        CHECK_MSG(x2 < cases[c].crit, "below(%u): chi-square %.2f >= %.2f", n, x2, cases[c].crit);
    }
    /* n = 1 has one answer */
    NevoRng rng;
    nevo_rng_init(&rng, 1, NEVO_RNG_SELECT, 0, 0, 0);
    for (int i = 0; i < 100; i++) CHECK(nevo_rng_below(&rng, 1) == 0);
}

/* For n = 3 * 2^30 the classic shortcuts are visibly biased: x % n puts half the mass on
 * [0, 2^30) instead of a third, and multiply-shift without rejection gives values = 0
 * mod 3 probability 1/2 instead of 1/3. An unbiased sampler makes both bucketings
 * uniform over 3 buckets. */
TEST(rng_below_large_n_unbiased) {
    const uint32_t n = 3u << 30;
    NevoRng rng;
    nevo_rng_init(&rng, 5, NEVO_RNG_SELECT, 1, 2, 3);
    long by_third[3] = {0}, by_mod3[3] = {0};
    const long N = 30000;
    for (long i = 0; i < N; i++) {
        uint32_t x = nevo_rng_below(&rng, n);
        CHECK(x < n);
        by_third[x >> 30]++;
        by_mod3[x % 3]++;
    }
    /* df = 2, p = 1e-4 */
    double a = chi_square(by_third, 3, N), b = chi_square(by_mod3, 3, N);
    CHECK_MSG(a < 18.42, "below(3*2^30) by third: chi-square %.1f (%ld %ld %ld)", a, by_third[0],
              by_third[1], by_third[2]);
    CHECK_MSG(b < 18.42, "below(3*2^30) mod 3: chi-square %.1f (%ld %ld %ld)", b, by_mod3[0],
              by_mod3[1], by_mod3[2]);
    /* and the largest n never reaches n */
    for (int i = 0; i < 10000; i++) CHECK(nevo_rng_below(&rng, 0xFFFFFFFFu) < 0xFFFFFFFFu);
}

/* Moments of a standard normal sample: mean 0 (sd 1), variance 1 (sd sqrt 2), third
 * moment 0 (sd sqrt 15), fourth moment 3 (sd sqrt 96), each per draw. */
static void check_normal_moments(const double *z, int N, const char *what) {
    double m1 = 0, m2 = 0, m3 = 0, m4 = 0;
    for (int i = 0; i < N; i++) {
        CHECK_MSG(isfinite(z[i]), "%s draw %d is not finite", what, i);
        m1 += z[i];
        m2 += z[i] * z[i];
        m3 += z[i] * z[i] * z[i];
        m4 += z[i] * z[i] * z[i] * z[i];
    }
    m1 /= N, m2 /= N, m3 /= N, m4 /= N;
    double s = sqrt((double)N);
    CHECK_MSG(fabs(m1) * s < 4.5, "%s mean %.5f", what, m1);
    CHECK_MSG(fabs(m2 - 1.0) * s / sqrt(2.0) < 4.5, "%s second moment %.5f", what, m2);
    CHECK_MSG(fabs(m3) * s / sqrt(15.0) < 4.5, "%s third moment %.5f", what, m3);
    CHECK_MSG(fabs(m4 - 3.0) * s / sqrt(96.0) < 4.5, "%s fourth moment (kurtosis) %.5f", what, m4);
}

TEST(rng_normal_moments) {
    const int N = 200000;
    double *z = malloc(sizeof(double) * N);
    float *f = malloc(sizeof(float) * N);
    NevoRng rng;
    nevo_rng_init(&rng, 99, NEVO_RNG_USER, 0, 0, 0);
    for (int i = 0; i < N; i++) z[i] = nevo_rng_normal(&rng);
    check_normal_moments(z, N, "nevo_rng_normal");
    /* fill uses both Box-Muller outputs; check them (and the pairs' independence via
     * the correlation of consecutive values) */
    nevo_rng_init(&rng, 99, NEVO_RNG_USER, 0, 0, 1);
    nevo_rng_fill_normal(&rng, f, (size_t)N);
    double corr = 0.0;
    for (int i = 0; i < N; i++) z[i] = f[i];
    for (int i = 0; i + 1 < N; i += 2) corr += z[i] * z[i + 1];
    check_normal_moments(z, N, "nevo_rng_fill_normal");
    corr /= N / 2;
    CHECK_MSG(fabs(corr) * sqrt(N / 2.0) < 4.5, "fill pairs correlate: %.5f", corr);
    free(z);
    free(f);
}

/* What fill guarantees: from a block boundary, fill(n) is a prefix of fill(n + 1) for
 * odd and even n; fill(1)[0] is the float of nevo_rng_normal; after fill(n) the stream
 * stands at block ceil(n/2) (an odd tail spends a whole block); two fills of which the
 * first has even length equal one fill of the total length. */
TEST(rng_fill_normal_odd_even) {
    enum { MAXN = 13 };
    float prev[MAXN + 1], cur[MAXN + 1];
    uint32_t key[2];
    for (size_t n = 1; n <= MAXN; n++) {
        NevoRng rng;
        nevo_rng_init(&rng, 3, NEVO_RNG_MUTATE, 1, 2, 0);
        key[0] = rng.key[0], key[1] = rng.key[1];
        nevo_rng_fill_normal(&rng, cur, n);
        if (n > 1) CHECK_MSG(memcmp(prev, cur, sizeof(float) * (n - 1)) == 0, "fill(%zu) is not a prefix of fill(%zu)", n - 1, n);
        memcpy(prev, cur, sizeof(float) * n);
        /* the next word is word 0 of block ceil(n/2) */
        uint32_t ctr[4] = {(uint32_t)((n + 1) / 2), 0, 2, 1}, want[4];
        nevo_philox4x32_10(ctr, key, want);
        CHECK_MSG(nevo_rng_u32(&rng) == want[0], "after fill(%zu) the stream is not at block %zu", n,
                  (n + 1) / 2);
    }
    NevoRng rng;
    nevo_rng_init(&rng, 3, NEVO_RNG_MUTATE, 1, 2, 0);
    float one;
    nevo_rng_fill_normal(&rng, &one, 1);
    nevo_rng_init(&rng, 3, NEVO_RNG_MUTATE, 1, 2, 0);
    CHECK(one == (float)nevo_rng_normal(&rng));

    /* split fills: even first part */
    float whole[10], split[10];
    nevo_rng_init(&rng, 8, NEVO_RNG_MUTATE, 0, 0, 0);
    nevo_rng_fill_normal(&rng, whole, 10);
    nevo_rng_init(&rng, 8, NEVO_RNG_MUTATE, 0, 0, 0);
    nevo_rng_fill_normal(&rng, split, 4);
    nevo_rng_fill_normal(&rng, split + 4, 6);
    CHECK(memcmp(whole, split, sizeof whole) == 0);

    /* off a block boundary (one word consumed) fill is n successive normals */
    float slow[5];
    nevo_rng_init(&rng, 8, NEVO_RNG_MUTATE, 0, 0, 0);
    (void)nevo_rng_u32(&rng);
    nevo_rng_fill_normal(&rng, slow, 5);
    nevo_rng_init(&rng, 8, NEVO_RNG_MUTATE, 0, 0, 0);
    (void)nevo_rng_u32(&rng);
    for (int i = 0; i < 5; i++) CHECK(slow[i] == (float)nevo_rng_normal(&rng));

    /* n = 0 draws nothing */
    nevo_rng_init(&rng, 8, NEVO_RNG_MUTATE, 0, 0, 0);
    nevo_rng_fill_normal(&rng, slow, 0);
    CHECK(rng.ctr[0] == 0 && rng.pos == 4);
}
