/* Low-rank perturbations (EGGROLL; params.h): the compact noise's length, its full
 * vector against hand-computed products, its statistics (unit variance per weight, rank
 * r structure within a matrix), and the low-rank recipes built by a task set. */
#include <string.h>

#include "harness.h"
#include "nevo/params.h"
#include "nevo/rng.h"
#include "nevo/tasks.h"

static NevoPolicy *dense_policy(const char *env_name, int h1, int h2, NevoEnv **env) {
    NevoError err = {0};
    CHECK_MSG(nevo_env_new(env_name, NULL, 0, env, &err) == NEVO_OK, "%s", err.msg);
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_hidden = h2 ? 2 : 1;
    c.hidden[0] = h1, c.hidden[1] = h2;
    strcpy(c.activation, "tanh");
    strcpy(c.init, "normc");
    NevoPolicy *p = NULL;
    CHECK_MSG(nevo_policy_new(nevo_env_spec(*env), &c, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    return p;
}

/* CartPole (4 observations, 2 actions) through 3 hidden units: W1 (4, 3), b1 (3), W2 (3,
 * 2), b2 (2). z holds A1 (4, r), B1 (3, r), b1, A2 (3, r), B2 (2, r), b2. With small
 * integers every product and sum is exact, and 1/sqrt(r) is exact for r = 1 and 4. */
TEST(lowrank_expand_by_hand) {
    NevoEnv *env;
    NevoPolicy *p = dense_policy("CartPole-v1", 3, 0, &env);
    CHECK_EQ_INT(p->nparams, 4 * 3 + 3 + 3 * 2 + 2);
    for (int r = 1; r <= 4; r *= 4) {
        size_t L = nevo_lowrank_floats(p, r);
        CHECK_EQ_INT(L, (size_t)((4 + 3) * r + 3 + (3 + 2) * r + 2));
        float z[64], eps[32];
        for (size_t i = 0; i < L; i++) z[i] = (float)((int)(i % 7) - 3); /* -3 .. 3 */
        nevo_lowrank_expand(p, r, z, eps, 0, p->nparams);
        const float *A1 = z, *B1 = z + 4 * r, *b1 = B1 + 3 * r, *A2 = b1 + 3, *B2 = A2 + 3 * r, *b2 = B2 + 2 * r;
        float c = r == 1 ? 1.0f : 0.5f;
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 3; b++) {
                float s = 0;
                for (int q = 0; q < r; q++) s += A1[a * r + q] * B1[b * r + q];
                CHECK_MSG(eps[a * 3 + b] == s * c, "r %d W1[%d][%d]: %g, want %g", r, a, b, (double)eps[a * 3 + b],
                          (double)(s * c));
            }
        for (int b = 0; b < 3; b++) CHECK(eps[12 + b] == b1[b]);
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++) {
                float s = 0;
                for (int q = 0; q < r; q++) s += A2[a * r + q] * B2[b * r + q];
                CHECK(eps[15 + a * 2 + b] == s * c);
            }
        for (int b = 0; b < 2; b++) CHECK(eps[21 + b] == b2[b]);
        /* any sub-range gives the same values */
        float part[32];
        nevo_lowrank_expand(p, r, z, part, 5, 17);
        CHECK(memcmp(part, eps + 5, sizeof(float) * 12) == 0);
    }
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* Over many members with standard-normal compact noise, a weight's perturbation has
 * variance 1 at every rank (A B^T / sqrt(r) sums r unit-variance products), and at rank 1
 * two weights of one matrix row are perfectly correlated in magnitude: |eps[a][b]| =
 * |A[a]| |B[b]|, so eps[a][0] eps[a][1] eps[a'][0] eps[a'][1] >= 0 always (the 2x2 minor
 * of a rank-1 matrix is zero). */
TEST(lowrank_statistics) {
    NevoEnv *env;
    NevoPolicy *p = dense_policy("Pendulum-v1", 16, 16, &env);
    int r = 2, members = 4000;
    size_t L = nevo_lowrank_floats(p, r);
    float *z = nevo_alloc(sizeof(float) * L), *eps = nevo_alloc(sizeof(float) * p->nparams);
    size_t k = p->layers[1].w_off + 5 * 16 + 7; /* W2[5][7] */
    double sum = 0, sq = 0;
    NevoRng rng;
    nevo_rng_init(&rng, 3, NEVO_RNG_USER, 0, 0, 0);
    for (int m = 0; m < members; m++) {
        nevo_rng_fill_normal(&rng, z, L);
        nevo_lowrank_expand(p, r, z, eps, 0, p->nparams);
        sum += eps[k];
        sq += (double)eps[k] * eps[k];
    }
    double mean = sum / members, var = sq / members - mean * mean;
    CHECK_MSG(fabs(mean) < 0.08 && fabs(var - 1.0) < 0.1, "W2[5][7]: mean %.3f, variance %.3f", mean, var);
    for (int m = 0; m < 200; m++) {
        nevo_rng_fill_normal(&rng, z, L);
        nevo_lowrank_expand(p, 1, z, eps, 0, p->nparams);
        const float *W = eps + p->layers[1].w_off;
        float minor = W[0] * W[16 + 1] - W[1] * W[16 + 0];
        CHECK_MSG(fabsf(minor) <= 1e-5f * (1.0f + fabsf(W[0] * W[17])), "rank 1: a 2x2 minor is %g", (double)minor);
    }
    free(z), free(eps);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* A low-rank pair built in one pass equals each sign built alone, and base +- sigma eps
 * with eps expanded from the slice the recipe names. */
TEST(lowrank_recipes_build) {
    NevoEnv *env;
    NevoPolicy *p = dense_policy("Pendulum-v1", 32, 0, &env);
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new((size_t)1 << 20, pool);
    size_t n = p->nparams;
    float *base = nevo_alloc(sizeof(float) * n), *plus = nevo_alloc(sizeof(float) * n);
    float *minus = nevo_alloc(sizeof(float) * n), *one = nevo_alloc(sizeof(float) * n);
    float *eps = nevo_alloc(sizeof(float) * n);
    nevo_policy_init_params(p, noise, 4, 0, 0, base);
    NevoNet nets[2];
    for (int j = 0; j < 2; j++)
        nets[j] = (NevoNet){.kind = NEVO_NET_LOWRANK, .base = 0, .purpose = NEVO_RNG_ES_NOISE, .generation = 6,
                            .individual = 3, .sigma = 0.03f, .sign = j ? -1 : 1, .rank = 3};
    NevoTaskSet ts;
    nevo_taskset_for_policy(&ts, p, env);
    ts.seed = 4, ts.noise = noise, ts.noise_floats = noise->size;
    ts.n_bases = 1, ts.bases = base, ts.base_stride = n;
    ts.n_nets = 2, ts.nets = nets;
    NevoError err = {0};
    CHECK_MSG(nevo_taskset_check(&ts, p, env, &err) == NEVO_OK, "%s", err.msg);
    CHECK(nevo_taskset_is_pair(&ts, 0));
    nevo_taskset_build_pair(&ts, p, 0, plus, minus, 0);
    const float *z = nevo_noise_slice(noise, nevo_lowrank_floats(p, 3), 4, NEVO_RNG_ES_NOISE, 6, 3, 0);
    nevo_lowrank_expand(p, 3, z, eps, 0, n);
    for (size_t k = 0; k < n; k++) {
        float d = 0.03f * eps[k];
        CHECK(plus[k] == base[k] + d && minus[k] == base[k] - d);
    }
    for (int j = 0; j < 2; j++) {
        nevo_taskset_build(&ts, p, j, one, 0);
        CHECK(memcmp(one, j ? minus : plus, sizeof(float) * n) == 0);
    }
    /* a rank outside 1..NEVO_LOWRANK_MAX is refused, naming it */
    nets[1].rank = 0;
    CHECK(nevo_taskset_check(&ts, p, env, &err) == NEVO_ERR_INVALID && strstr(err.msg, "rank 0"));
    nets[1].rank = NEVO_LOWRANK_MAX + 1;
    CHECK(nevo_taskset_check(&ts, p, env, &err) == NEVO_ERR_INVALID);
    free(base), free(plus), free(minus), free(one), free(eps);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    nevo_env_free(env);
}
