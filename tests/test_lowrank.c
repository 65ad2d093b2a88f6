/* Low-rank perturbations (EGGROLL; params.h): the compact noise's length, its full
 * vector against hand-computed products, its statistics (unit variance per weight, rank
 * r structure within a matrix), the low-rank recipes built by a task set and replayed
 * from a GA's chains, and the factored forward against the built networks and through
 * the evaluator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nevo/backend.h"
#include "nevo/eval.h"
#include "nevo/params.h"
#include "nevo/rng.h"
#include "nevo/tasks.h"
#include "nn/backend_impl.h"

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

/* A GA genome of low-rank mutations (ga.rank): its chain, replayed, is the child built
 * from its recipe at every step (a LOWRANK recipe over the previous vector, with
 * NEVO_RNG_MUTATE slices), bit for bit; the same chain at rank 0 is another vector. */
TEST(lowrank_chain_replays_built_children) {
    NevoEnv *env;
    NevoPolicy *p = dense_policy("Pendulum-v1", 16, 8, &env);
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new((size_t)1 << 20, pool);
    size_t n = p->nparams;
    float *built = nevo_alloc(sizeof(float) * n), *next = nevo_alloc(sizeof(float) * n);
    float *replay = nevo_alloc(sizeof(float) * n);
    NevoMutation muts[3] = {{1, 5, 0.05f}, {2, 0, 0.04f}, {3, 7, 0.03f}};
    nevo_policy_init_params(p, noise, 11, 0, 9, built);
    NevoTaskSet ts;
    nevo_taskset_for_policy(&ts, p, env);
    ts.seed = 11, ts.noise = noise, ts.noise_floats = noise->size;
    ts.n_bases = 1, ts.base_stride = n, ts.n_nets = 1;
    for (int j = 0; j < 3; j++) {
        NevoNet child = {.kind = NEVO_NET_LOWRANK, .base = 0, .purpose = NEVO_RNG_MUTATE,
                         .generation = muts[j].generation, .individual = muts[j].individual, .sigma = muts[j].sigma,
                         .sign = 1, .rank = 2};
        ts.bases = built, ts.nets = &child;
        nevo_taskset_build(&ts, p, 0, next, 0);
        CHECK(memcmp(next, built, sizeof(float) * n) != 0);
        memcpy(built, next, sizeof(float) * n);
    }
    NevoChain chain = {.init_generation = 0, .init_individual = 9, .n = 3, .rank = 2, .muts = muts};
    nevo_chain_build(p, noise, 11, &chain, replay);
    CHECK(memcmp(replay, built, sizeof(float) * n) == 0);
    chain.rank = 0;
    nevo_chain_build(p, noise, 11, &chain, replay);
    CHECK(memcmp(replay, built, sizeof(float) * n) != 0);
    free(built), free(next), free(replay);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* ---- the factored forward (EGGROLL; nevo_policy_forward_factored) ------------------- */

static NevoPolicy *conv_policy(const char *env_name, NevoEnv **env) {
    NevoError err = {0};
    CHECK_MSG(nevo_env_new(env_name, NULL, 0, env, &err) == NEVO_OK, "%s", err.msg);
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_conv = 1, c.conv_filters[0] = 8;
    c.n_hidden = 1, c.hidden[0] = 32;
    strcpy(c.activation, "relu");
    strcpy(c.init, "scaled");
    NevoPolicy *p = NULL;
    CHECK_MSG(nevo_policy_new(nevo_env_spec(*env), &c, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    return p;
}

/* A factored set: `pairs` antithetic low-rank pairs at `rank` over bases 0 and 1 (pair
 * k on base k % 2), each network `episodes` episodes. */
typedef struct Factored {
    NevoPool *pool;
    NevoNoise *noise;
    float *bases;
    NevoNet nets[16];
    NevoTask tasks[64];
    NevoTaskSet ts;
} Factored;

static void factored_open(Factored *f, const NevoEnv *env, const NevoPolicy *p, int rank, int pairs, int episodes) {
    f->pool = nevo_pool_new(1);
    f->noise = nevo_noise_new((size_t)1 << 20, f->pool);
    f->bases = nevo_alloc(sizeof(float) * 2 * p->nparams);
    for (int b = 0; b < 2; b++) nevo_policy_init_params(p, f->noise, 7, 0, (uint32_t)b, f->bases + b * p->nparams);
    nevo_taskset_for_policy(&f->ts, p, env);
    f->ts.seed = 7, f->ts.noise = f->noise, f->ts.noise_floats = f->noise->size;
    f->ts.n_bases = 2, f->ts.bases = f->bases, f->ts.base_stride = p->nparams;
    for (int j = 0; j < 2 * pairs; j++)
        f->nets[j] = (NevoNet){.kind = NEVO_NET_FACTORED, .base = (j / 2) % 2, .purpose = NEVO_RNG_ES_NOISE,
                               .generation = 2, .individual = (uint32_t)(j / 2), .sigma = 0.05f,
                               .sign = j % 2 ? -1 : 1, .rank = (uint32_t)rank};
    f->ts.n_nets = 2 * pairs, f->ts.nets = f->nets;
    int t = 0;
    for (int e = 0; e < episodes; e++)
        for (int j = 0; j < 2 * pairs; j++, t++)
            f->tasks[t] = (NevoTask){.net = j,
                                     .seed = nevo_rng_derive(7, NEVO_RNG_ENV_SEED, 2, (uint32_t)j, (uint32_t)e)};
    f->ts.n_tasks = t, f->ts.tasks = f->tasks;
}

static void factored_close(Factored *f) {
    free(f->bases);
    nevo_noise_free(f->noise);
    nevo_pool_free(f->pool);
}

/* Network j's factored forward on one observation, alone: its row, its base. */
static void forward_one(const Factored *f, const NevoPolicy *p, int j, const float *obs, float *out) {
    int rank = (int)f->nets[j].rank, zero = 0, base = f->nets[j].base;
    size_t ff = nevo_factor_row_floats(p, rank);
    float *row = nevo_alloc_aligned(sizeof(float) * ff);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, 1));
    nevo_taskset_factor_row(&f->ts, p, j, row);
    nevo_policy_forward_factored(p, f->bases, p->nparams, &base, row, ff, &zero, rank, obs, 1, out, scratch);
    free(row), free(scratch);
}

/* Observations the networks see: an env's own, stepped with random actions. */
static void some_obs(const NevoEnv *env, float *obs, int n) {
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    NevoRng rng;
    nevo_rng_init(&rng, 1, NEVO_RNG_USER, 0, 0, 0);
    nevo_env_reset(env, inst, 11, obs);
    for (int i = 1; i < n; i++) {
        memcpy(obs + (size_t)i * s->obs_dim, obs + (size_t)(i - 1) * s->obs_dim, sizeof(float) * s->obs_dim);
        float a[8] = {0};
        if (s->n_actions > 0)
            a[0] = (float)nevo_rng_below(&rng, (uint32_t)s->n_actions);
        else
            for (int k = 0; k < s->action_dim; k++) a[k] = (float)nevo_rng_uniform(&rng) * 2.0f - 1.0f;
        NevoStepResult r;
        nevo_env_step(env, inst, a, obs + (size_t)i * s->obs_dim, &r);
        if (r.terminated || r.truncated) nevo_env_reset(env, inst, 11 + (uint64_t)i, obs + (size_t)i * s->obs_dim);
    }
    nevo_env_instance_free(env, inst);
    free(inst);
}

/* The factored forward computes the built network (base + sign sigma eps of the same
 * compact slice) up to rounding, for dense and conv layers at ranks 1, 2 and 5; the
 * correction is far above that rounding (it is applied, with its sign); and a row's
 * bits are its own: the same alone, in a batch of every member over both bases in any
 * order. */
TEST(factored_forward_is_the_built_network) {
    static const char *envs[2] = {"Pendulum-v1", "minatar/breakout"};
    for (int e = 0; e < 2; e++) {
        NevoEnv *env;
        NevoPolicy *p = e == 0 ? dense_policy(envs[e], 32, 16, &env) : conv_policy(envs[e], &env);
        if (e == 0) { /* Pendulum's policy normalises its observations (the forward's first step) */
            NevoPolicy *q = p;
            NevoError err = {0};
            CHECK(nevo_policy_new(nevo_env_spec(env), &(NevoPolicyConfig){.n_hidden = 2, .hidden = {32, 16},
                                  .activation = "tanh", .init = "normc"}, 1, &p, &err) == NEVO_OK);
            nevo_policy_free(q);
            for (int k = 0; k < p->obs_dim; k++)
                p->obs_mean[k] = 0.2f * (float)k, p->obs_std[k] = 0.5f + 0.3f * (float)k;
        }
        enum { N = 12, OBS = 8 };
        float *obs = nevo_alloc(sizeof(float) * OBS * p->obs_dim);
        some_obs(env, obs, OBS);
        static const int ranks[3] = {1, 2, 5};
        for (int ri = 0; ri < 3; ri++) {
            Factored f;
            factored_open(&f, env, p, ranks[ri], N / 2, 1);
            size_t ff = nevo_factor_row_floats(p, ranks[ri]), O = (size_t)p->n_out;
            float *rows = nevo_alloc_aligned(sizeof(float) * ff * N), *theta = nevo_alloc(sizeof(float) * p->nparams);
            float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, N * OBS));
            float *batch = nevo_alloc(sizeof(float) * N * OBS * O);
            float *x = nevo_alloc(sizeof(float) * N * OBS * p->obs_dim);
            int base[N * OBS], which[N * OBS];
            for (int j = 0; j < N; j++) nevo_taskset_factor_row(&f.ts, p, j, rows + j * ff);
            /* the batch: every (member, observation) in an order that interleaves members
             * and bases (row k member (k * 5) % N on observation k % OBS: runs of one or
             * two rows), then grouped by base (runs of 50 and 46: lanes blocks where the
             * kernel set has them, and rows after them) */
            double worst = 0.0, moved = 0.0;
            for (int grouped = 0; grouped < 2; grouped++) {
                for (int k = 0; k < N * OBS; k++) {
                    /* grouped: the members of base 0 (pairs 0, 2, 4) for the first 50 rows */
                    which[k] = grouped ? 4 * ((k / 2) % (N / 4)) + k % 2 + 2 * (k >= 50) : (k * 5) % N;
                    base[k] = f.nets[which[k]].base;
                    CHECK(!grouped || base[k] == (k >= 50));
                    memcpy(x + (size_t)k * p->obs_dim, obs + (size_t)(k % OBS) * p->obs_dim,
                           sizeof(float) * p->obs_dim);
                }
                nevo_policy_forward_factored(p, f.bases, p->nparams, base, rows, ff, which, ranks[ri], x, N * OBS,
                                             batch, scratch);
                for (int k = 0; k < N * OBS; k++) {
                    int j = which[k], zero = 0;
                    float one[64], built[64], plain[64];
                    forward_one(&f, p, j, x + (size_t)k * p->obs_dim, one);
                    CHECK_MSG(memcmp(one, batch + k * O, sizeof(float) * O) == 0, "%s rank %d: row %d differs alone",
                              envs[e], ranks[ri], k);
                    nevo_taskset_build(&f.ts, p, j, theta, 0); /* the LOWRANK network of the same slice */
                    nevo_policy_forward(p, theta, p->nparams, &zero, x + (size_t)k * p->obs_dim, 1, built, scratch);
                    nevo_policy_forward(p, f.bases + (size_t)base[k] * p->nparams, p->nparams, &zero,
                                        x + (size_t)k * p->obs_dim, 1, plain, scratch);
                    for (size_t o = 0; o < O; o++) {
                        double d = fabs((double)one[o] - built[o]) / (1.0 + fabs((double)built[o]));
                        worst = d > worst ? d : worst;
                        double m = fabs((double)built[o] - plain[o]);
                        moved = m > moved ? m : moved;
                    }
                }
            }
            fprintf(stderr, "    %s rank %d: factored against built %.2e, the perturbation moves outputs %.2e\n",
                    envs[e], ranks[ri], worst, moved);
            CHECK_MSG(worst < 2e-5, "%s rank %d: factored and built differ by %g", envs[e], ranks[ri], worst);
            CHECK_MSG(moved > 1e3 * worst && moved > 1e-3, "%s rank %d: the perturbation moves outputs by %g only",
                      envs[e], ranks[ri], moved);
            free(rows), free(theta), free(scratch), free(batch), free(x);
            factored_close(&f);
        }
        free(obs);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
}

/* A factored network of sigma 0 (a factored GA's elite copy and previous elite) is its
 * base: the outputs of the base's own forward, for dense and conv layers (== : the sign
 * of a zero aside). */
TEST(factored_sigma_zero_is_the_base) {
    static const char *envs[2] = {"Pendulum-v1", "minatar/breakout"};
    for (int e = 0; e < 2; e++) {
        NevoEnv *env;
        NevoPolicy *p = e == 0 ? dense_policy(envs[e], 32, 16, &env) : conv_policy(envs[e], &env);
        enum { OBS = 8 };
        float *obs = nevo_alloc(sizeof(float) * OBS * p->obs_dim);
        some_obs(env, obs, OBS);
        Factored f;
        factored_open(&f, env, p, 2, 2, 1);
        float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, 1));
        float got[64], want[64];
        CHECK(p->n_out <= 64);
        for (int j = 0; j < f.ts.n_nets; j++) {
            f.nets[j].sigma = 0.0f;
            for (int i = 0; i < OBS; i++) {
                const float *x = obs + (size_t)i * p->obs_dim;
                forward_one(&f, p, j, x, got);
                nevo_policy_forward(p, f.bases, p->nparams, &f.nets[j].base, x, 1, want, scratch);
                for (int k = 0; k < p->n_out; k++)
                    CHECK_MSG(got[k] == want[k], "%s: net %d obs %d output %d: %g, base %g", envs[e], j, i, k,
                              (double)got[k], (double)want[k]);
            }
        }
        free(scratch);
        free(obs);
        factored_close(&f);
        nevo_policy_free(p);
        nevo_env_free(env);
    }
}

/* The set's checks: all networks factored or none, one rank, a feed-forward policy; and
 * a factored set crosses processes as it is. */
TEST(factored_sets_checked_and_carried) {
    NevoEnv *env;
    NevoPolicy *p = dense_policy("CartPole-v1", 8, 0, &env);
    Factored f;
    factored_open(&f, env, p, 2, 3, 2);
    NevoError err = {0};
    CHECK_MSG(nevo_taskset_check(&f.ts, p, env, &err) == NEVO_OK, "%s", err.msg);
    CHECK(nevo_taskset_is_pair(&f.ts, 0) && !nevo_taskset_is_pair(&f.ts, 1));
    NevoBuf b = {0};
    CHECK(nevo_taskset_write(&f.ts, &b, &err) == NEVO_OK);
    NevoTaskSet *back = NULL;
    CHECK_MSG(nevo_taskset_read(b.data, b.len, &back, &err) == NEVO_OK, "%s", err.msg);
    CHECK_EQ_INT(back->n_nets, 6);
    for (int j = 0; j < 6; j++) CHECK(memcmp(&back->nets[j], &f.nets[j], sizeof(NevoNet)) == 0);
    nevo_taskset_free(back);
    nevo_buf_free(&b);
    f.nets[3].kind = NEVO_NET_LOWRANK;
    CHECK(nevo_taskset_check(&f.ts, p, env, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "all factored or none");
    f.nets[3].kind = NEVO_NET_FACTORED;
    f.nets[4].rank = 3;
    CHECK(nevo_taskset_check(&f.ts, p, env, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "one rank a set");
    f.nets[4].rank = 2;
    f.nets[5].kind = NEVO_NET_FACTORED + 1;
    CHECK(nevo_taskset_check(&f.ts, p, env, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "unknown kind");
    factored_close(&f);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* One episode by hand: network j's factored forward alone at every step. */
static NevoEpisode episode_by_hand(const Factored *f, const NevoEnv *env, const NevoPolicy *p, const NevoTask *t) {
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    float obs[512], out[64], act[16];
    CHECK((size_t)s->obs_dim <= 512 && p->n_out <= 64);
    NevoEpisode ep = {0};
    nevo_env_reset(env, inst, t->seed, obs);
    NevoStepResult r = {0};
    while (!r.terminated && !r.truncated) {
        forward_one(f, p, t->net, obs, out);
        nevo_policy_actions(p, out, 1, act);
        nevo_env_step(env, inst, act, obs, &r);
        ep.ret += r.reward;
        ep.length++;
    }
    nevo_env_instance_free(env, inst);
    free(inst);
    return ep;
}

/* The evaluator runs a factored set as each network's forward alone would, episode for
 * episode, whatever its threads, slots and pipeline depth; a backend without the
 * factored forward refuses the set by name. */
TEST(factored_evaluation_matches_by_hand) {
    NevoEnv *env;
    NevoPolicy *p = conv_policy("minatar/breakout", &env);
    nevo_env_set_max_steps(env, 200);
    Factored f;
    factored_open(&f, env, p, 1, 4, 2);
    NevoEpisode ref[64];
    for (int t = 0; t < f.ts.n_tasks; t++) ref[t] = episode_by_hand(&f, env, p, &f.tasks[t]);
    static const int threads[2] = {1, 2}, slots[3] = {1, 3, 16}, depths[2] = {1, 2};
    for (int a = 0; a < 2; a++) {
        NevoPool *pool = nevo_pool_new(threads[a]);
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++) {
                NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, slots[b]);
                nevo_evaluator_set_pipeline(ev, depths[c]);
                NevoEpisode res[64];
                NevoError err = {0};
                for (int rep = 0; rep < 2; rep++) { /* rows and queue reused */
                    memset(res, 0xCD, sizeof res);
                    CHECK_MSG(nevo_evaluate_tasks(ev, &f.ts, res, NULL, NULL, &err) == NEVO_OK, "%s", err.msg);
                    for (int t = 0; t < f.ts.n_tasks; t++)
                        CHECK_MSG(res[t].ret == ref[t].ret && res[t].length == ref[t].length,
                                  "%d threads, %d slots, depth %d: task %d %g/%d, by hand %g/%d", threads[a], slots[b],
                                  depths[c], t, res[t].ret, res[t].length, ref[t].ret, ref[t].length);
                }
                nevo_evaluator_free(ev);
            }
        nevo_pool_free(pool);
    }
    /* a backend that has no factored forward */
    static NevoBackendOps bare;
    bare = nevo_backend_cpu_ops;
    bare.name = "bare";
    bare.build_factored = NULL;
    bare.forward_factored = NULL;
    NevoBackend be = {&bare, nevo_backend_cpu_ops.init(0, 1)};
    NevoPool *pool = nevo_pool_new(1);
    NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 4);
    nevo_evaluator_set_backend(ev, &be);
    NevoEpisode res[64];
    NevoError err = {0};
    CHECK(nevo_evaluate_tasks(ev, &f.ts, res, NULL, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "backend bare has no factored low-rank forward");
    nevo_evaluator_free(ev);
    nevo_pool_free(pool);
    factored_close(&f);
    nevo_policy_free(p);
    nevo_env_free(env);
}
