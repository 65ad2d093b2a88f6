/* Novelty search (include/nevo/novelty.h, src/algo/novelty.c, GA-NS in ga.c, the NS-ES
 * family in es.c), checked against references written here rather than against what
 * the code printed:
 *  - k-NN novelty against a naive double-precision brute force (ties, duplicates,
 *    archives smaller than k, self-exclusion), and its documented order independence;
 *  - the archive insertion rules (GA-NS: ns.archive_add children named by the ARCHIVE
 *    stream; NS-ES: the M initial agents, then the updated agent's mean centre BC);
 *  - GA-NS parents = top T by novelty (recomputed here), not by reward;
 *  - NS-ES / NSR-ES / NSRA-ES generations recomputed by hand on a tiny env whose
 *    outcome is a closed-form function of the parameters: agent choice, perturbations,
 *    centred ranks, weight combination, gradient, optimiser step, archive, w;
 *  - NSRA-ES adaptation of w (API and metrics.jsonl);
 *  - kill-and-resume and thread-count independence of ga-ns and nsra-es runs.
 *
 * Agents' parameters are not part of the API (only the best agent's are), so the ES
 * and GA tests read them from nevo_algo_save's payload, whose layout is that of
 * es_save / ga_save (the checkpoint's algorithm state). */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "nevo/algo.h"
#include "harness.h"
#include "nevo/novelty.h"
#include "nevo/rng.h"
#include "nevo/train.h"

/* ---------------------------------------------------------------- references */

/* Test data from splitmix64, independent of the library's streams. */
static uint64_t mix_state;
static double unif(void) {
    uint64_t z = (mix_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double dist(const float *a, const float *b, int dim) {
    double s = 0.0;
    for (int c = 0; c < dim; c++) s += ((double)a[c] - b[c]) * ((double)a[c] - b[c]);
    return sqrt(s);
}

/* Novelty by its definition (novelty.h): mean distance from q to its k nearest points
 * among arch (n_arch) and extra (n_extra) minus extra[self]; all distances, sorted. */
static double ref_novelty(const float *arch, int n_arch, const float *extra, int n_extra, int self,
                          const float *q, int dim, int k) {
    double *d = malloc(sizeof(double) * (size_t)(n_arch + n_extra + 1));
    int m = 0;
    for (int i = 0; i < n_arch; i++) d[m++] = dist(arch + (size_t)i * dim, q, dim);
    for (int i = 0; i < n_extra; i++)
        if (i != self) d[m++] = dist(extra + (size_t)i * dim, q, dim);
    qsort(d, (size_t)m, sizeof(double), cmp_dbl);
    int kk = m < k ? m : k;
    double s = 0.0;
    for (int t = 0; t < kk; t++) s += d[t];
    free(d);
    return kk > 0 ? s / kk : 0.0;
}

/* OpenAI ES centred ranks, written independently: rank r (0 = smallest; equal values
 * ranked by index, as a stable ascending argsort) -> r / (n - 1) - 0.5. */
static void ref_centered_ranks(const double *x, int n, double *out) {
    for (int i = 0; i < n; i++) {
        int r = 0;
        for (int j = 0; j < n; j++)
            if (x[j] < x[i] || (x[j] == x[i] && j < i)) r++;
        out[i] = n > 1 ? (double)r / (n - 1) - 0.5 : 0.0;
    }
}

/* z-scores with the population sd: (x - mean) / sqrt(sum (x - mean)^2 / n), 0 when sd is
 * 0; returns |mean| / sd (0 when sd is 0), how much z magnifies the rounding of x */
static double ref_zscores(const double *x, int n, double *out) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) mean += x[i] / n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean) / n;
    for (int i = 0; i < n; i++) out[i] = var > 0.0 ? (x[i] - mean) / sqrt(var) : 0.0;
    return var > 0.0 ? fabs(mean) / sqrt(var) : 0.0;
}

static void near_rel(double got, double want, double rel, const char *what, int i) {
    double tol = rel * fabs(want) + 1e-12;
    CHECK_MSG(fabs(got - want) <= tol, "%s[%d]: library %.17g vs reference %.17g", what, i, got, want);
}

/* ---------------------------------------------------------------- k-NN novelty */

/* n points of dim coordinates: on a coarse integer grid (many equal distances and
 * duplicates) or continuous, then some rows overwritten with copies of earlier ones. */
static float *make_points(int n, int dim, int grid) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1) * dim);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < dim; c++)
            p[(size_t)i * dim + c] = grid ? (float)(int)(unif() * 4.0) : (float)(unif() * 20.0 - 10.0);
    for (int i = 1; i < n; i += 3) {
        int j = (int)(unif() * i);
        memcpy(p + (size_t)i * dim, p + (size_t)j * dim, sizeof(float) * dim);
    }
    return p;
}

static void archive_of(NevoArchive *a, const float *p, int n, int dim) {
    nevo_archive_init(a, dim);
    for (int i = 0; i < n; i++) nevo_archive_add(a, p + (size_t)i * dim);
}

TEST(novelty_knn_brute_force) {
    mix_state = 2024;
    NevoPool *pool = nevo_pool_new(2);
    const int sizes[] = {0, 1, 5, 9, 10, 11, 1000, 20000};
    const int dims[] = {1, 2, 5, 8};
    const int ks[] = {1, 10, 64};
    int cases = 0;
    for (int si = 0; si < 8; si++)
        for (int di = 0; di < 4; di++)
            for (int grid = 0; grid < 2; grid++) {
                int n = sizes[si], dim = dims[di];
                if (n == 20000 && dim != 2 && dim != 5) continue;
                float *pts = make_points(n, dim, grid);
                NevoArchive a;
                archive_of(&a, pts, n, dim);
                /* queries: copies of archive points (distance 0 to themselves) and fresh ones */
                int nq = n >= 1000 ? 24 : 40;
                float *q = make_points(nq, dim, grid);
                for (int i = 0; i < nq && n > 0; i += 2)
                    memcpy(q + (size_t)i * dim, pts + (size_t)(int)(unif() * n) * dim, sizeof(float) * dim);
                for (int ki = 0; ki < 3; ki++) {
                    int k = ks[ki];
                    double *got = malloc(sizeof(double) * nq), *got_pool = malloc(sizeof(double) * nq);
                    nevo_novelty(&a, NULL, 0, q, NULL, nq, k, NULL, got);
                    nevo_novelty(&a, NULL, 0, q, NULL, nq, k, pool, got_pool);
                    for (int i = 0; i < nq; i++) {
                        double want = ref_novelty(pts, n, NULL, 0, -1, q + (size_t)i * dim, dim, k);
                        near_rel(got[i], want, 1e-5, "novelty", i);
                        CHECK_MSG(got[i] == got_pool[i], "pool changed query %d: %.17g vs %.17g", i, got[i],
                                  got_pool[i]);
                    }
                    /* an empty archive scores 0 */
                    if (n == 0)
                        for (int i = 0; i < nq; i++) CHECK(got[i] == 0.0);
                    free(got);
                    free(got_pool);
                    cases++;
                }
                nevo_archive_free(&a);
                free(pts);
                free(q);
            }
    CHECK(cases > 150);
    nevo_pool_free(pool);
}

/* GA-NS scores a population against the archive plus the population itself, each
 * member excluding only its own row (a duplicate of it elsewhere still counts, at
 * distance 0). */
TEST(novelty_knn_population_and_self_exclusion) {
    mix_state = 77;
    NevoPool *pool = nevo_pool_new(2);
    const int sizes[] = {0, 3, 12, 500};
    for (int si = 0; si < 4; si++)
        for (int dim = 2; dim <= 5; dim += 3)
            for (int grid = 0; grid < 2; grid++) {
                int n = sizes[si], P = 25;
                float *arch = make_points(n, dim, grid);
                float *pop = make_points(P, dim, grid); /* holds duplicates by construction */
                NevoArchive a;
                archive_of(&a, arch, n, dim);
                int self[25];
                for (int i = 0; i < P; i++) self[i] = i % 7 == 3 ? -1 : i; /* some rows count themselves */
                for (int k = 1; k <= 40; k += 13) {
                    double got[25], got_pool[25], no_self[25];
                    nevo_novelty(&a, pop, P, pop, self, P, k, NULL, got);
                    nevo_novelty(&a, pop, P, pop, self, P, k, pool, got_pool);
                    nevo_novelty(&a, pop, P, pop, NULL, P, k, NULL, no_self);
                    for (int i = 0; i < P; i++) {
                        const float *qi = pop + (size_t)i * dim;
                        near_rel(got[i], ref_novelty(arch, n, pop, P, self[i], qi, dim, k), 1e-5, "self", i);
                        near_rel(no_self[i], ref_novelty(arch, n, pop, P, -1, qi, dim, k), 1e-5, "no_self", i);
                        CHECK(got[i] == got_pool[i]);
                        /* counting itself, a member's nearest neighbour is itself at 0 */
                        if (k == 1) CHECK(no_self[i] == 0.0);
                    }
                }
                nevo_archive_free(&a);
                free(arch);
                free(pop);
            }
    /* a population larger than the scan's block of candidates: self-exclusion by
     * absolute index across blocks */
    {
        int P = 2500, n = 100, dim = 2;
        float *arch = make_points(n, dim, 0), *pop = make_points(P, dim, 0);
        NevoArchive big;
        archive_of(&big, arch, n, dim);
        int *self = malloc(sizeof(int) * P);
        double *got = malloc(sizeof(double) * P);
        for (int i = 0; i < P; i++) self[i] = i;
        nevo_novelty(&big, pop, P, pop, self, P, 10, pool, got);
        for (int i = 0; i < P; i++)
            if (i % 13 == 0 || (i >= 1015 && i <= 1035) || i >= P - 5)
                near_rel(got[i], ref_novelty(arch, n, pop, P, i, pop + (size_t)i * dim, dim, 10), 1e-5, "big", i);
        nevo_archive_free(&big);
        free(arch), free(pop), free(self), free(got);
    }
    /* fewer than k candidates: the mean over those there are; none at all: 0 */
    NevoArchive a;
    float two[4] = {0, 0, 3, 4}, q[2] = {0, 0};
    archive_of(&a, two, 2, 2);
    double nv;
    nevo_novelty(&a, NULL, 0, q, NULL, 1, 10, NULL, &nv);
    CHECK_NEAR(nv, 2.5, 1e-15); /* (0 + 5) / 2 */
    NevoArchive empty;
    nevo_archive_init(&empty, 2);
    int self0 = 0;
    nevo_novelty(&empty, q, 1, q, &self0, 1, 10, NULL, &nv);
    CHECK(nv == 0.0);
    nevo_archive_free(&a);
    nevo_archive_free(&empty);
    nevo_pool_free(pool);
}

/* The sum of the k distances is formed in ascending order (novelty.c), so novelty does
 * not depend on the order of the candidates nor on whether a point sits in the archive
 * or among the extra points: bit-identical results. */
TEST(novelty_knn_order_independent) {
    mix_state = 5;
    int n = 3000, dim = 2, nq = 30;
    float *pts = make_points(n, dim, 0);
    /* near-ties: points on a circle of radius 1 around the first query */
    float *q = make_points(nq, dim, 0);
    for (int i = 0; i < 200; i++) {
        double t = 2 * 3.14159265358979 * unif();
        pts[(size_t)i * dim] = q[0] + (float)cos(t);
        pts[(size_t)i * dim + 1] = q[1] + (float)sin(t);
    }
    float *shuf = malloc(sizeof(float) * (size_t)n * dim);
    memcpy(shuf, pts, sizeof(float) * (size_t)n * dim);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(unif() * (i + 1));
        for (int c = 0; c < dim; c++) {
            float t = shuf[(size_t)i * dim + c];
            shuf[(size_t)i * dim + c] = shuf[(size_t)j * dim + c];
            shuf[(size_t)j * dim + c] = t;
        }
    }
    NevoArchive a, b, half;
    archive_of(&a, pts, n, dim);
    archive_of(&b, shuf, n, dim);
    archive_of(&half, shuf, n / 2, dim);
    for (int k = 1; k <= 64; k += 21) {
        double r1[30], r2[30], r3[30];
        nevo_novelty(&a, NULL, 0, q, NULL, nq, k, NULL, r1);
        nevo_novelty(&b, NULL, 0, q, NULL, nq, k, NULL, r2);
        nevo_novelty(&half, shuf + (size_t)(n / 2) * dim, n - n / 2, q, NULL, nq, k, NULL, r3);
        for (int i = 0; i < nq; i++) {
            CHECK_MSG(r1[i] == r2[i], "k %d query %d: %.17g vs %.17g", k, i, r1[i], r2[i]);
            CHECK_MSG(r1[i] == r3[i], "k %d query %d: %.17g vs %.17g", k, i, r1[i], r3[i]);
        }
    }
    nevo_archive_free(&a);
    nevo_archive_free(&b);
    nevo_archive_free(&half);
    free(pts);
    free(shuf);
    free(q);
}

TEST(novelty_archive_save_load) {
    mix_state = 9;
    float *pts = make_points(300, 3, 0);
    NevoArchive a, b;
    archive_of(&a, pts, 300, 3);
    CHECK_EQ_INT(a.n, 300);
    CHECK(memcmp(a.points, pts, sizeof(float) * 900) == 0);
    NevoBuf buf = {0};
    nevo_archive_save(&a, &buf);
    nevo_archive_init(&b, 3);
    nevo_archive_add(&b, pts); /* load replaces what was there */
    NevoReader r = nevo_reader(buf.data, buf.len);
    CHECK(nevo_archive_load(&b, &r));
    CHECK(nevo_reader_ok(&r, true));
    CHECK_EQ_INT(b.n, 300);
    CHECK(memcmp(b.points, pts, sizeof(float) * 900) == 0);
    NevoArchive c;
    nevo_archive_init(&c, 2); /* another BC size */
    r = nevo_reader(buf.data, buf.len);
    CHECK(!nevo_archive_load(&c, &r));
    r = nevo_reader(buf.data, buf.len - 5); /* truncated */
    CHECK(!nevo_archive_load(&b, &r));
    nevo_buf_free(&buf);
    nevo_archive_free(&a);
    nevo_archive_free(&b);
    nevo_archive_free(&c);
    free(pts);
}

/* ---------------------------------------------------------------- a tiny env */

/* One step; observation (1, -0.5); action a in [-1, 1]^2; behaviour = a; reward = a0
 * (reward_mode 0) or 0 (reward_mode 1). With a one-hidden-layer tanh policy, reward and
 * behaviour are closed-form functions of the parameters (toy_outcome). */
typedef struct ToyParams {
    int reward_mode;
} ToyParams;
typedef struct ToyState {
    float a[2];
} ToyState;

static const char *const toy_options[] = {"reward_mode", NULL};

static NevoStatus toy_configure(NevoEnvSpec *spec, void *params, const NevoEnvOption *opts, int n_opts,
                                NevoError *err) {
    ToyParams *p = params;
    for (int i = 0; i < n_opts; i++) p->reward_mode = (int)opts[i].value;
    return NEVO_OK;
}

static void toy_reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    memset(state, 0, sizeof(ToyState));
    obs[0] = 1.0f;
    obs[1] = -0.5f;
}

static void toy_step(const NevoEnv *env, void *state, const float *action, float *obs, NevoStepResult *out) {
    ToyState *s = state;
    const ToyParams *p = nevo_env_params(env);
    s->a[0] = action[0];
    s->a[1] = action[1];
    obs[0] = 1.0f;
    obs[1] = -0.5f;
    out->reward = p->reward_mode == 0 ? action[0] : 0.0f;
    out->terminated = true;
}

static void toy_bc(const NevoEnv *env, const void *state, float *bc) {
    const ToyState *s = state;
    bc[0] = s->a[0];
    bc[1] = s->a[1];
}

static const NevoEnvClass toy_class = {
    .spec =
        {
            .name = "NoveltyToy-v0",
            .summary = "one step; behaviour = action",
            .obs_rank = 1,
            .obs_shape = {2},
            .obs_dim = 2,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 2,
            .action_low = {-1, -1},
            .action_high = {1, 1},
            .max_steps = 1,
            .bc_dim = 2,
        },
    .state_size = sizeof(ToyState),
    .params_size = sizeof(ToyParams),
    .option_names = toy_options,
    .configure = toy_configure,
    .reset = toy_reset,
    .step = toy_step,
    .bc = toy_bc,
};

#define TOY_H 3 /* hidden units */
#define TOY_NP (2 * TOY_H + TOY_H + TOY_H * 2 + 2)

/* Outcome of parameters th (double) by the documented layout (policy.h: dense W as
 * (in, out) row-major, then b): h = tanh(x W1 + b1), a = tanh(h W2 + b2) (the action
 * bounds are [-1, 1]). reward as the env's reward_mode says. */
static void toy_outcome(const double *th, int reward_mode, double *reward, double bc[2]) {
    const double x[2] = {1.0, -0.5};
    const double *W1 = th, *b1 = th + 2 * TOY_H, *W2 = th + 3 * TOY_H, *b2 = th + 5 * TOY_H;
    double h[TOY_H];
    for (int u = 0; u < TOY_H; u++) h[u] = tanh(b1[u] + x[0] * W1[u] + x[1] * W1[TOY_H + u]);
    for (int o = 0; o < 2; o++) {
        double s = b2[o];
        for (int u = 0; u < TOY_H; u++) s += h[u] * W2[u * 2 + o];
        bc[o] = tanh(s);
    }
    *reward = reward_mode == 0 ? bc[0] : 0.0;
}

static void toy_outcome_f(const float *th, int reward_mode, double *reward, double bc[2]) {
    double d[TOY_NP];
    for (int i = 0; i < TOY_NP; i++) d[i] = th[i];
    toy_outcome(d, reward_mode, reward, bc);
}

/* ---------------------------------------------------------------- an algorithm stack */

typedef struct Stack {
    NevoConfig cfg;
    NevoEnv *env;
    NevoPolicy *policy;
    NevoPool *pool;
    NevoNoise *noise;
    NevoEvaluator *ev;
    NevoAlgo *algo;
} Stack;

/* Builds what nevo_train_run builds (policy without observation normalisation, as for
 * every algorithm but plain ES) around env (owned from here on). */
static void stack_open(Stack *s, const NevoConfig *cfg, NevoEnv *env, int threads) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->env = env;
    NevoError err = {0};
    if (cfg->max_episode_steps > 0) nevo_env_set_max_steps(env, cfg->max_episode_steps);
    CHECK_MSG(nevo_policy_new(nevo_env_spec(env), &s->cfg.policy, 0, &s->policy, &err) == NEVO_OK, "%s", err.msg);
    s->pool = nevo_pool_new(threads);
    s->ev = nevo_evaluator_new(env, s->policy, s->pool, 0);
    s->noise = nevo_noise_new(nevo_noise_auto_size(s->policy->nparams), s->pool);
    CHECK_MSG(nevo_algo_new(&s->cfg, env, s->policy, s->noise, s->pool, &s->algo, &err) == NEVO_OK, "%s", err.msg);
}

static void stack_close(Stack *s) {
    nevo_algo_free(s->algo);
    nevo_evaluator_free(s->ev);
    nevo_noise_free(s->noise);
    nevo_pool_free(s->pool);
    nevo_policy_free(s->policy);
    nevo_env_free(s->env);
}

static NevoEnv *toy_env(int reward_mode) {
    NevoEnvOption opt;
    memset(&opt, 0, sizeof opt);
    strcpy(opt.key, "reward_mode");
    opt.value = reward_mode;
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new_from_class(&toy_class, &opt, 1, &env, &err) == NEVO_OK, "%s", err.msg);
    return env;
}

static NevoEnv *maze_env(void) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new("maze/hard", NULL, 0, &env, &err) == NEVO_OK, "%s", err.msg);
    return env;
}

static void toy_config(NevoConfig *cfg, const char *algo) {
    nevo_config_defaults(cfg);
    strcpy(cfg->env, "NoveltyToy-v0");
    strcpy(cfg->algo, algo);
    cfg->seed = 31;
    cfg->population = 10;
    cfg->episodes = 2;
    cfg->policy.n_hidden = 1;
    cfg->policy.hidden[0] = TOY_H;
    strcpy(cfg->policy.init, "normc");
    cfg->es.sigma = 0.5;
    cfg->es.obs_norm = 0;
    cfg->es.center_episodes = 2;
    cfg->ns.k = 3;
    cfg->ns.meta_population = 3;
}

static void maze_config(NevoConfig *cfg, const char *algo) {
    nevo_config_defaults(cfg);
    strcpy(cfg->env, "maze/hard");
    strcpy(cfg->algo, algo);
    cfg->seed = 3;
    cfg->episodes = 1;
    cfg->policy.n_hidden = 1;
    cfg->policy.hidden[0] = 8;
    cfg->ga.sigma = 0.1;
    cfg->es.sigma = 0.1;
    cfg->es.lr = 0.05;
    cfg->es.l2 = 0.0;
    cfg->es.obs_norm = 0;
    cfg->es.center_episodes = 2;
}

static void generation(Stack *s, NevoGenStats *gs) {
    NevoError err = {0};
    CHECK_MSG(nevo_train_generation(s->algo, s->ev, gs, &err) == NEVO_OK, "%s", err.msg);
}

/* One episode of theta run here, step by step, on the stack's env: return and BC. */
static void rollout(const Stack *s, const float *theta, uint64_t seed, double *ret, float *bc) {
    const NevoEnvSpec *spec = nevo_env_spec(s->env);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(s->env));
    nevo_env_instance_init(s->env, inst);
    float obs[64], out[NEVO_ENV_MAX_ACT_DIM], act[NEVO_ENV_MAX_ACT_DIM];
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(s->policy, 1));
    int net = 0;
    CHECK(spec->obs_dim <= 64);
    nevo_env_forget(s->env, inst);
    nevo_env_reset(s->env, inst, seed, obs);
    NevoStepResult r = {0};
    *ret = 0.0;
    while (!r.terminated && !r.truncated) {
        nevo_policy_forward(s->policy, theta, s->policy->nparams, &net, obs, 1, out, scratch);
        nevo_policy_actions(s->policy, out, 1, act);
        nevo_env_step(s->env, inst, act, obs, &r);
        *ret += r.reward;
    }
    nevo_env_bc(s->env, inst, obs, bc);
    nevo_env_instance_free(s->env, inst);
    free(inst);
    free(scratch);
}

/* Mean return and mean BC over the centre episodes of generation gen (es.c: stream
 * (ENV_SEED, gen, NEVO_STREAM_CENTER, e)), as an NS-ES agent is measured. */
static void centre_outcome(const Stack *s, const float *theta, uint32_t gen, double *ret, float *bc) {
    int dim = nevo_env_spec(s->env)->bc_dim;
    double sum_bc[NEVO_ENV_MAX_BC] = {0}, sum = 0.0;
    int E = s->cfg.es.center_episodes;
    for (int e = 0; e < E; e++) {
        double r;
        float b[NEVO_ENV_MAX_BC];
        rollout(s, theta, nevo_rng_derive(s->cfg.seed, NEVO_RNG_ENV_SEED, gen, NEVO_STREAM_CENTER, (uint32_t)e), &r, b);
        sum += r;
        for (int c = 0; c < dim; c++) sum_bc[c] += b[c];
    }
    *ret = sum / E;
    for (int c = 0; c < dim; c++) bc[c] = (float)(sum_bc[c] / E);
}

/* ---------------------------------------------------------------- saved states */

typedef struct EsAgent {
    float *theta;
    double *m, *v;
    long long t;
    double reward;
    float bc[NEVO_ENV_MAX_BC];
} EsAgent;

typedef struct EsState {
    int generation, M, initialised, best_agent, stagnation, arch_dim, arch_n;
    size_t np;
    EsAgent ag[8];
    double w, best_reward;
    float *arch;
} EsState;

/* es_save's layout, after nevo_algo_save's generation count. */
static void es_state(const NevoAlgo *algo, EsState *s) {
    NevoBuf b = {0};
    nevo_algo_save(algo, &b);
    NevoReader r = nevo_reader(b.data, b.len);
    memset(s, 0, sizeof *s);
    s->generation = (int)nevo_read_u32(&r);
    s->np = (size_t)nevo_read_u64(&r);
    s->M = (int)nevo_read_u32(&r);
    CHECK(s->M >= 1 && s->M <= 8);
    for (int m = 0; m < s->M; m++) {
        EsAgent *a = &s->ag[m];
        a->theta = malloc(sizeof(float) * s->np);
        a->m = malloc(sizeof(double) * s->np);
        a->v = malloc(sizeof(double) * s->np);
        nevo_read_f32s(&r, a->theta, s->np);
        nevo_read_f64s(&r, a->m, s->np);
        nevo_read_f64s(&r, a->v, s->np);
        a->t = (long long)nevo_read_u64(&r);
        a->reward = nevo_read_f64(&r);
        nevo_read_f32s(&r, a->bc, NEVO_ENV_MAX_BC);
    }
    s->initialised = (int)nevo_read_u32(&r);
    s->best_agent = (int)nevo_read_u32(&r);
    s->w = nevo_read_f64(&r);
    s->best_reward = nevo_read_f64(&r);
    s->stagnation = (int)nevo_read_u32(&r);
    int obs_dim = (int)nevo_read_u32(&r);
    nevo_read_f64(&r);
    for (int i = 0; i < 2 * obs_dim; i++) nevo_read_f64(&r);
    s->arch_dim = (int)nevo_read_u32(&r);
    s->arch_n = (int)nevo_read_u32(&r);
    s->arch = malloc(sizeof(float) * (size_t)(s->arch_n + 1) * (size_t)s->arch_dim);
    nevo_read_f32s(&r, s->arch, (size_t)s->arch_n * s->arch_dim);
    CHECK_MSG(nevo_reader_ok(&r, true), "ES state layout not as expected");
    nevo_buf_free(&b);
}

static void es_state_free(EsState *s) {
    for (int m = 0; m < s->M; m++) free(s->ag[m].theta), free(s->ag[m].m), free(s->ag[m].v);
    free(s->arch);
}

typedef struct GaGenome {
    uint32_t init_gen, init_ind;
    int n;
    uint32_t last_gen, last_ind; /* newest mutation */
} GaGenome;

typedef struct GaState {
    int has_elite, n_parents;
    GaGenome elite, parents[64];
} GaState;

static GaGenome ga_genome(NevoReader *r) {
    GaGenome g = {0};
    g.init_gen = nevo_read_u32(r);
    g.init_ind = nevo_read_u32(r);
    g.n = (int)nevo_read_u32(r);
    for (int j = 0; j < g.n; j++) {
        g.last_gen = nevo_read_u32(r);
        g.last_ind = nevo_read_u32(r);
        float sigma;
        nevo_read(r, &sigma, 4);
    }
    return g;
}

/* ga_save's layout: elite genome, parent genomes (the archive follows). */
static void ga_state(const NevoAlgo *algo, GaState *s) {
    NevoBuf b = {0};
    nevo_algo_save(algo, &b);
    NevoReader r = nevo_reader(b.data, b.len);
    memset(s, 0, sizeof *s);
    nevo_read_u32(&r);
    s->has_elite = (int)nevo_read_u32(&r);
    if (s->has_elite) s->elite = ga_genome(&r);
    s->n_parents = (int)nevo_read_u32(&r);
    CHECK(s->n_parents <= 64);
    for (int t = 0; t < s->n_parents; t++) s->parents[t] = ga_genome(&r);
    CHECK(nevo_reader_ok(&r, false));
    nevo_buf_free(&b);
}

/* The child of generation gen a genome belongs to (GA without elitism: generation 0
 * children are fresh inits (gen, i); later ones end with the mutation (gen, i)). */
static int child_of(const GaGenome *g, uint32_t gen) {
    if (gen == 0) {
        CHECK(g->n == 0 && g->init_gen == 0);
        return (int)g->init_ind;
    }
    CHECK(g->n > 0 && g->last_gen == gen);
    return (int)g->last_ind;
}

/* ---------------------------------------------------------------- insertion rules */

TEST(novelty_archive_insertion) {
    /* GA-NS: after each generation the archive grew by ns.archive_add, the new rows
     * being the behaviours of the children drawn by (ARCHIVE, g, j) */
    NevoConfig cfg;
    maze_config(&cfg, "ga-ns");
    cfg.population = 16;
    cfg.ga.truncation = 4;
    cfg.ga.validation_candidates = 3;
    cfg.ga.validation_episodes = 1;
    cfg.ns.archive_add = 3;
    cfg.episodes = 2;
    Stack s;
    stack_open(&s, &cfg, maze_env(), 2);
    int dim = 2, n;
    float *prev = NULL;
    int n_prev = 0;
    CHECK(nevo_algo_archive(s.algo, &n) == NULL && n == 0);
    for (uint32_t g = 0; g < 4; g++) {
        NevoGenStats gs;
        generation(&s, &gs);
        int P;
        const float *bcs = nevo_algo_behaviours(s.algo, &P);
        const float *arch = nevo_algo_archive(s.algo, &n);
        CHECK_EQ_INT(P, 16);
        CHECK_EQ_INT(n, 3 * (int)(g + 1));
        CHECK_EQ_INT(gs.archive_size, n);
        int fittest = -1; /* the reported behaviour is one child's: the fittest's */
        for (int i = 0; i < P && fittest < 0; i++)
            if (memcmp(gs.bc, bcs + (size_t)i * dim, sizeof(float) * dim) == 0) fittest = i;
        CHECK(gs.bc_dim == dim && fittest >= 0);
        CHECK(n_prev == 0 || memcmp(arch, prev, sizeof(float) * (size_t)n_prev * dim) == 0); /* only appended */
        for (int j = 0; j < 3; j++) {
            NevoRng rng;
            nevo_rng_init(&rng, cfg.seed, NEVO_RNG_ARCHIVE, g, (uint32_t)j, 0);
            int i = (int)nevo_rng_below(&rng, (uint32_t)P);
            const float *row = arch + (size_t)(n_prev + j) * dim;
            CHECK_MSG(memcmp(row, bcs + (size_t)i * dim, sizeof(float) * dim) == 0,
                      "generation %u: archive row %d is (%g, %g), child %d's behaviour is (%g, %g)", g, n_prev + j,
                      row[0], row[1], i, bcs[i * dim], bcs[i * dim + 1]);
        }
        if (g == 0) {
            /* generation 0's children are the inits (0, i): their behaviours, rerun here */
            float *theta = malloc(sizeof(float) * s.policy->nparams);
            for (int i = 0; i < P; i++) {
                nevo_policy_init_params(s.policy, s.noise, cfg.seed, 0, (uint32_t)i, theta);
                double ret;
                float b0[2], b1[2];
                rollout(&s, theta, nevo_rng_derive(cfg.seed, NEVO_RNG_ENV_SEED, 0, (uint32_t)i, 0), &ret, b0);
                rollout(&s, theta, nevo_rng_derive(cfg.seed, NEVO_RNG_ENV_SEED, 0, (uint32_t)i, 1), &ret, b1);
                for (int c = 0; c < dim; c++)
                    CHECK_NEAR(bcs[i * dim + c], ((double)b0[c] + b1[c]) / 2, 1e-4);
            }
            free(theta);
        }
        free(prev);
        prev = malloc(sizeof(float) * (size_t)n * dim);
        memcpy(prev, arch, sizeof(float) * (size_t)n * dim);
        n_prev = n;
    }
    free(prev);
    stack_close(&s);

    /* ns.archive_add = 0: the archive stays empty */
    cfg.ns.archive_add = 0;
    cfg.population = 8;
    stack_open(&s, &cfg, maze_env(), 1);
    for (int g = 0; g < 2; g++) {
        NevoGenStats gs;
        generation(&s, &gs);
        CHECK(nevo_algo_archive(s.algo, &n) == NULL || n == 0);
        CHECK_EQ_INT(gs.archive_size, 0);
    }
    stack_close(&s);

    /* NS-ES: the M initial agents' centre behaviours, then after every generation the
     * updated agent's mean behaviour over its centre episodes (Conti et al.) */
    maze_config(&cfg, "ns-es");
    cfg.population = 8;
    cfg.ns.meta_population = 3;
    stack_open(&s, &cfg, maze_env(), 2);
    EsState before, after;
    es_state(s.algo, &before);
    CHECK(!before.initialised && before.arch_n == 0);
    for (uint32_t g = 0; g < 4; g++) {
        NevoGenStats gs;
        generation(&s, &gs);
        es_state(s.algo, &after);
        CHECK_EQ_INT(after.arch_n, 3 + 1 + (int)g);
        CHECK_EQ_INT(gs.archive_size, after.arch_n);
        const float *arch = nevo_algo_archive(s.algo, &n);
        CHECK(n == after.arch_n && memcmp(arch, after.arch, sizeof(float) * (size_t)n * 2) == 0);
        /* the reported behaviour is the updated agent's, the one just archived */
        CHECK(gs.bc_dim == 2 && memcmp(gs.bc, arch + (size_t)(n - 1) * 2, sizeof gs.bc[0] * 2) == 0);
        if (g == 0) {
            for (int m = 0; m < 3; m++) {
                /* the initial agents are the inits (0, m), measured on generation 0's centre episodes */
                float *theta = malloc(sizeof(float) * s.policy->nparams), bc[2];
                nevo_policy_init_params(s.policy, s.noise, cfg.seed, 0, (uint32_t)m, theta);
                CHECK(memcmp(theta, before.ag[m].theta, sizeof(float) * s.policy->nparams) == 0);
                double ret;
                centre_outcome(&s, theta, 0, &ret, bc);
                CHECK_NEAR(after.arch[m * 2], bc[0], 1e-4);
                CHECK_NEAR(after.arch[m * 2 + 1], bc[1], 1e-4);
                free(theta);
            }
        } else {
            CHECK(memcmp(after.arch, before.arch, sizeof(float) * (size_t)before.arch_n * 2) == 0);
        }
        int changed = -1, n_changed = 0;
        for (int m = 0; m < 3; m++)
            if (memcmp(after.ag[m].theta, before.ag[m].theta, sizeof(float) * before.np) != 0) changed = m, n_changed++;
        CHECK_EQ_INT(n_changed, 1);
        double ret;
        float bc[2];
        centre_outcome(&s, after.ag[changed].theta, g, &ret, bc);
        const float *last = after.arch + (size_t)(after.arch_n - 1) * 2;
        CHECK_MSG(fabs(last[0] - bc[0]) < 1e-4 && fabs(last[1] - bc[1]) < 1e-4,
                  "generation %u: archived (%g, %g), updated agent %d measured (%g, %g)", g, last[0], last[1], changed,
                  bc[0], bc[1]);
        CHECK(memcmp(last, after.ag[changed].bc, sizeof(float) * 2) == 0);
        CHECK_NEAR(after.ag[changed].reward, ret, 1e-4);
        CHECK_NEAR(gs.elite_mean, ret, 1e-4);
        es_state_free(&before);
        before = after;
    }
    es_state_free(&before);
    stack_close(&s);
}

/* ---------------------------------------------------------------- GA-NS selection */

static double maze_reward(const float *bc) {
    const double goal[2] = {31.0, 20.0}; /* maze.c: reward = -final distance to the goal */
    return -sqrt(((double)bc[0] - goal[0]) * (bc[0] - goal[0]) + ((double)bc[1] - goal[1]) * (bc[1] - goal[1]));
}

TEST(novelty_ga_ns_selects_by_novelty) {
    NevoConfig cfg;
    maze_config(&cfg, "ga-ns");
    cfg.population = 30;
    cfg.ga.truncation = 6;
    cfg.ga.elitism = 0;
    cfg.ga.validation_candidates = 3;
    cfg.ga.validation_episodes = 0; /* the elite is then the best child by reward */
    cfg.ns.archive_add = 4;
    cfg.seed = 5; /* an example where the best child by reward is not among the most novel */
    Stack s;
    stack_open(&s, &cfg, maze_env(), 2);
    enum { P = 30, T = 6 };
    float arch_before[4096];
    int n_arch = 0, disagreements = 0, elite_outside = 0;
    for (uint32_t g = 0; g < 3; g++) {
        NevoGenStats gs;
        generation(&s, &gs);
        int n;
        const float *bcs = nevo_algo_behaviours(s.algo, &n);
        CHECK_EQ_INT(n, P);
        double nov[P], rew[P], nsum = 0.0;
        for (int i = 0; i < P; i++) {
            nov[i] = ref_novelty(arch_before, n_arch, bcs, P, i, bcs + i * 2, 2, cfg.ns.k);
            rew[i] = maze_reward(bcs + i * 2);
            nsum += nov[i];
        }
        near_rel(gs.novelty_mean, nsum / P, 1e-6, "novelty_mean", (int)g);
        GaState st;
        ga_state(s.algo, &st);
        CHECK_EQ_INT(st.n_parents, T);
        int is_parent[P] = {0};
        for (int t = 0; t < T; t++) {
            int i = child_of(&st.parents[t], g);
            CHECK(i >= 0 && i < P && !is_parent[i]);
            is_parent[i] = 1;
            /* parents in descending novelty */
            if (t > 0) {
                int prev = child_of(&st.parents[t - 1], g);
                CHECK_MSG(nov[prev] >= nov[i] - 1e-9, "generation %u: parent %d (novelty %g) before %d (%g)", g, prev,
                          nov[prev], i, nov[i]);
            }
        }
        /* the top T by novelty: no other child is more novel than any parent */
        double min_par = INFINITY, max_other = -INFINITY, tth_reward;
        for (int i = 0; i < P; i++) {
            if (is_parent[i] && nov[i] < min_par) min_par = nov[i];
            if (!is_parent[i] && nov[i] > max_other) max_other = nov[i];
        }
        CHECK_MSG(min_par >= max_other - 1e-9, "generation %u: a non-parent (novelty %g) beats a parent (%g)", g,
                  max_other, min_par);
        /* and not the top T by reward: some parent is clearly outside it */
        double sorted[P];
        memcpy(sorted, rew, sizeof sorted);
        qsort(sorted, P, sizeof(double), cmp_dbl);
        tth_reward = sorted[P - T];
        for (int i = 0; i < P; i++) disagreements += is_parent[i] && rew[i] < tth_reward - 1.0;
        /* the elite (what the run reports) is still the best by reward */
        CHECK(st.has_elite);
        int e = child_of(&st.elite, g);
        CHECK_MSG(rew[e] >= sorted[P - 1] - 1e-4, "elite %d reward %g, best %g", e, rew[e], sorted[P - 1]);
        elite_outside += !is_parent[e]; /* the elite is not made a parent (plain GA would) */
        CHECK_NEAR(gs.best, sorted[P - 1], 1e-3);
        const float *arch = nevo_algo_archive(s.algo, &n_arch);
        CHECK(n_arch * 2 <= 4096);
        memcpy(arch_before, arch, sizeof(float) * (size_t)n_arch * 2);
    }
    CHECK_MSG(elite_outside >= 1, "the best child by reward was a parent in every generation: the example does "
                                  "not show that GA-NS leaves it out");
    CHECK_MSG(disagreements >= 3, "only %d parents outside the reward top-T: the example does not separate the rules",
              disagreements);
    stack_close(&s);
}

/* ---------------------------------------------------------------- ES family by hand */

/* One generation of the NS-ES family recomputed from the saved state `b` (before) and
 * compared with the library's state `a` (after) and stats. */
static void check_es_generation(const Stack *s, const EsState *b, const EsState *a, const NevoGenStats *gs,
                                uint32_t gen, int mode, int reward_mode) {
    const NevoConfig *cfg = &s->cfg;
    int M = b->M, np = (int)b->np, n = cfg->population / 2, k = cfg->ns.k;
    CHECK_EQ_INT(np, TOY_NP);
    double R[8], B[8][2];
    float arch[256 * 2];
    int n_arch = b->arch_n;
    memcpy(arch, b->arch, sizeof(float) * (size_t)n_arch * 2);
    double best_reward = b->best_reward;
    if (!b->initialised) {
        /* first generation: each agent measured, its behaviour archived */
        CHECK(n_arch == 0);
        for (int m = 0; m < M; m++) {
            toy_outcome_f(b->ag[m].theta, reward_mode, &R[m], B[m]);
            arch[n_arch * 2] = (float)B[m][0];
            arch[n_arch * 2 + 1] = (float)B[m][1];
            n_arch++;
            if (m == 0 || R[m] > best_reward) best_reward = R[m];
        }
    } else {
        for (int m = 0; m < M; m++) {
            R[m] = b->ag[m].reward;
            B[m][0] = b->ag[m].bc[0];
            B[m][1] = b->ag[m].bc[1];
        }
    }
    /* 1. the agent: probability proportional to its novelty against the archive */
    double nov_ag[8], total = 0.0;
    for (int m = 0; m < M; m++) {
        float q[2] = {(float)B[m][0], (float)B[m][1]};
        nov_ag[m] = ref_novelty(arch, n_arch, NULL, 0, -1, q, 2, k);
        total += nov_ag[m];
    }
    NevoRng rng;
    nevo_rng_init(&rng, cfg->seed, NEVO_RNG_SELECT, gen, 0, 0);
    double u = nevo_rng_uniform(&rng) * total;
    int c = M - 1;
    for (int m = 0; m < M; m++) {
        if (u < nov_ag[m]) {
            c = m;
            break;
        }
        u -= nov_ag[m];
    }
    CHECK(total > 0.0);
    /* 2. perturbations theta_c +- sigma eps_i, eps_i the noise-table slice (ES_NOISE, gen, i) */
    double theta[TOY_NP], r[64], nv[64], bcs[64][2];
    for (int j = 0; j < np; j++) theta[j] = b->ag[c].theta[j];
    const float *eps[32];
    for (int i = 0; i < n; i++) {
        eps[i] = nevo_noise_slice(s->noise, (size_t)np, cfg->seed, NEVO_RNG_ES_NOISE, gen, (uint32_t)i, 0);
        for (int sign = 0; sign < 2; sign++) {
            double p[TOY_NP];
            for (int j = 0; j < np; j++) p[j] = theta[j] + (sign ? -1.0 : 1.0) * cfg->es.sigma * eps[i][j];
            toy_outcome(p, reward_mode, &r[2 * i + sign], bcs[2 * i + sign]);
        }
    }
    for (int i = 0; i < 2 * n; i++) {
        float q[2] = {(float)bcs[i][0], (float)bcs[i][1]};
        nv[i] = ref_novelty(arch, n_arch, NULL, 0, -1, q, 2, k);
    }
    /* 3. weights w rank(reward) + (1 - w) rank(novelty), or with es.shaping = reward_std
     * their z-scores (x - mean) / sd over the 2n rollouts */
    double rr[64], nr[64], wt[64], tol = 1.0;
    if (strcmp(cfg->es.shaping, "reward_std") == 0) {
        /* a z-score magnifies the float rounding of its input by |mean| / sd (the toy's
         * rewards crowd towards 1 as it learns), so the tolerances scale by that */
        double cr = ref_zscores(r, 2 * n, rr), cn = ref_zscores(nv, 2 * n, nr);
        tol = fmax(1.0, fmax(cr, cn));
        CHECK_MSG(tol < 1e3, "gen %u: |mean| / sd %.0f would loosen the check too far", gen, tol);
    } else {
        ref_centered_ranks(r, 2 * n, rr);
        ref_centered_ranks(nv, 2 * n, nr);
    }
    double w = mode == 0 ? 0.0 : mode == 1 ? 0.5 : b->w;
    for (int i = 0; i < 2 * n; i++) wt[i] = w * rr[i] + (1.0 - w) * nr[i];
    /* 4. g = 1/(n sigma) sum (w+ - w-) eps; optimiser on -g + l2 theta */
    const EsAgent *ob = &b->ag[c], *oa = &a->ag[c];
    CHECK_EQ_INT(oa->t, ob->t + 1);
    double t = (double)oa->t;
    for (int j = 0; j < np; j++) {
        double g = 0.0;
        for (int i = 0; i < n; i++) g += (wt[2 * i] - wt[2 * i + 1]) * eps[i][j];
        g /= n * cfg->es.sigma;
        double grad = -g + cfg->es.l2 * theta[j], m1, v1 = 0.0, th1;
        if (strcmp(cfg->es.optimizer, "sgd") == 0) {
            m1 = cfg->es.momentum * ob->m[j] + (1 - cfg->es.momentum) * grad;
            th1 = theta[j] - cfg->es.lr * m1;
        } else {
            double b1 = cfg->es.beta1, b2 = cfg->es.beta2;
            m1 = b1 * ob->m[j] + (1 - b1) * grad;
            v1 = b2 * ob->v[j] + (1 - b2) * grad * grad;
            double step = cfg->es.lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
            th1 = theta[j] - step * m1 / (sqrt(v1) + 1e-8);
            near_rel(oa->v[j], v1, 1e-5 * tol, "adam v", j);
        }
        near_rel(oa->m[j], m1, 1e-5 * tol, "first moment", j);
        CHECK_MSG(fabs(oa->theta[j] - th1) <= 1e-6 * tol, "gen %u mode %d agent %d theta[%d]: library %.9g, by hand %.9g",
                  gen, mode, c, j, oa->theta[j], th1);
    }
    /* the other agents are untouched */
    for (int m = 0; m < M; m++) {
        if (m == c) continue;
        CHECK(memcmp(a->ag[m].theta, b->ag[m].theta, sizeof(float) * (size_t)np) == 0);
        CHECK(a->ag[m].t == b->ag[m].t);
    }
    /* 5. the updated agent measured and archived */
    double r1, bc1[2];
    toy_outcome_f(oa->theta, reward_mode, &r1, bc1);
    CHECK_NEAR(oa->reward, r1, 1e-6);
    CHECK_NEAR(oa->bc[0], bc1[0], 1e-6);
    CHECK_NEAR(oa->bc[1], bc1[1], 1e-6);
    CHECK_EQ_INT(a->arch_n, n_arch + 1);
    CHECK(memcmp(a->arch, b->arch, sizeof(float) * (size_t)b->arch_n * 2) == 0); /* appended only */
    for (int i = b->arch_n; i < n_arch; i++) /* the initial agents, measured by hand above */
        for (int d = 0; d < 2; d++) CHECK_NEAR(a->arch[i * 2 + d], arch[i * 2 + d], 1e-6);
    CHECK(memcmp(a->arch + (size_t)n_arch * 2, oa->bc, sizeof(float) * 2) == 0);
    if (!b->initialised)
        for (int m = 0; m < M; m++) {
            if (m == c) continue;
            CHECK_NEAR(a->ag[m].reward, R[m], 1e-6);
            CHECK_NEAR(a->ag[m].bc[0], B[m][0], 1e-6);
            CHECK_NEAR(a->ag[m].bc[1], B[m][1], 1e-6);
        }
    /* stats */
    double sum = 0.0, best = -INFINITY, nsum = 0.0, sorted[64];
    for (int i = 0; i < 2 * n; i++) sum += r[i], nsum += nv[i], best = fmax(best, r[i]), sorted[i] = r[i];
    qsort(sorted, (size_t)(2 * n), sizeof(double), cmp_dbl);
    CHECK_NEAR(gs->best, best, 1e-6);
    CHECK_NEAR(gs->mean, sum / (2 * n), 1e-6);
    CHECK_NEAR(gs->median, 0.5 * (sorted[n - 1] + sorted[n]), 1e-6);
    near_rel(gs->novelty_mean, nsum / (2 * n), 1e-5, "novelty_mean", (int)gen);
    CHECK_EQ_INT(gs->archive_size, a->arch_n);
    CHECK_NEAR(gs->elite_mean, oa->reward, 0);
    /* NSRA-ES: w up by delta (at most 1) on a new best reward, down by delta (at least
     * 0) after `patience` generations without one */
    double w_after = w;
    if (mode == 2) {
        int stag = b->stagnation;
        if (oa->reward > best_reward) {
            w_after = fmin(1.0, w + cfg->ns.weight_delta);
            stag = 0;
            best_reward = oa->reward;
        } else if (++stag >= cfg->ns.patience) {
            w_after = fmax(0.0, w - cfg->ns.weight_delta);
            stag = 0;
        }
        CHECK_NEAR(a->w, w_after, 1e-12);
        CHECK_EQ_INT(a->stagnation, stag);
        CHECK_NEAR(a->best_reward, best_reward, 1e-6);
    }
    CHECK_NEAR(gs->reward_weight, w_after, 1e-12);
    /* the best agent is the one with the best last reward */
    for (int m = 0; m < M; m++) CHECK(a->ag[m].reward <= a->ag[a->best_agent].reward);
}

static void es_by_hand(const char *algo, int mode, const char *optimizer, const char *shaping, int generations,
                       int need_spread, double *w_seen) {
    NevoConfig cfg;
    toy_config(&cfg, algo);
    strcpy(cfg.es.optimizer, optimizer);
    strcpy(cfg.es.shaping, shaping);
    cfg.es.lr = strcmp(optimizer, "sgd") == 0 ? 0.2 : 0.05;
    cfg.es.momentum = 0.6;
    cfg.es.l2 = 0.01;
    cfg.ns.weight = 0.7;
    cfg.ns.weight_delta = 0.15;
    cfg.ns.patience = 2;
    Stack s;
    stack_open(&s, &cfg, toy_env(0), 1);
    EsState b, a;
    es_state(s.algo, &b);
    int chosen_count[3] = {0};
    for (uint32_t g = 0; g < (uint32_t)generations; g++) {
        NevoGenStats gs;
        generation(&s, &gs);
        es_state(s.algo, &a);
        check_es_generation(&s, &b, &a, &gs, g, mode, 0);
        for (int m = 0; m < 3; m++) chosen_count[m] += a.ag[m].t != b.ag[m].t;
        if (w_seen) w_seen[g] = a.w;
        es_state_free(&b);
        b = a;
    }
    /* the meta-population was actually sampled, not one agent always */
    int used = (chosen_count[0] > 0) + (chosen_count[1] > 0) + (chosen_count[2] > 0);
    CHECK_MSG(!need_spread || used >= 2, "%s: only one agent chosen in %d generations", algo, generations);
    es_state_free(&b);
    stack_close(&s);
}

TEST(novelty_es_update_by_hand) {
    es_by_hand("ns-es", 0, "sgd", "ranks", 8, 1, NULL);
    es_by_hand("nsr-es", 1, "sgd", "ranks", 8, 1, NULL);
    es_by_hand("nsr-es", 1, "adam", "ranks", 6, 0, NULL);
    double w[12];
    es_by_hand("nsra-es", 2, "sgd", "ranks", 12, 1, w);
    /* w moved during the run, so the by-hand weights covered more than the start value */
    int moved = 0;
    for (int g = 0; g < 12; g++) moved += fabs(w[g] - 0.7) > 1e-9;
    CHECK_MSG(moved > 0, "NSRA-ES weight never left 0.7");
    es_by_hand("nsra-es", 2, "adam", "ranks", 8, 0, NULL);
}

/* es.shaping = reward_std in the NS family: reward and novelty as z-scores, mixed (the
 * choice of agent does not depend on the shaping; the ranks cases check its spread) */
TEST(novelty_es_reward_std_update_by_hand) {
    es_by_hand("nsr-es", 1, "sgd", "reward_std", 8, 0, NULL);
    es_by_hand("nsra-es", 2, "adam", "reward_std", 8, 0, NULL);
}

/* ---------------------------------------------------------------- NSRA-ES weight */

/* The expected w sequence from the rule, given the initial best reward and the updated
 * agents' rewards. */
static void nsra_rule(double w0, double delta, int patience, double best, const double *reward, int n, double *w) {
    int stag = 0;
    for (int g = 0; g < n; g++) {
        if (reward[g] > best) {
            best = reward[g];
            stag = 0;
            w0 = fmin(1.0, w0 + delta);
        } else if (++stag >= patience) {
            w0 = fmax(0.0, w0 - delta);
            stag = 0;
        }
        w[g] = w0;
    }
}

static double field(const char *line, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(line, k);
    CHECK_MSG(p != NULL, "no %s in %s", key, line);
    return strtod(p + strlen(k), NULL);
}

static const char *bin_path(char *buf, size_t n) {
    const char *b = test_nevo_bin();
    if (b[0] == '/') snprintf(buf, n, "%s", b);
    else snprintf(buf, n, "%s/%s", getenv("PWD"), b);
    return buf;
}

TEST(novelty_nsra_weight_adaptation) {
    /* a reward that never improves (constant 0): w falls by delta every `patience`
     * generations, and stops at 0 */
    NevoConfig cfg;
    toy_config(&cfg, "nsra-es");
    strcpy(cfg.es.optimizer, "sgd");
    cfg.es.lr = 0.1;
    cfg.ns.weight = 0.35;
    cfg.ns.weight_delta = 0.1;
    cfg.ns.patience = 3;
    Stack s;
    stack_open(&s, &cfg, toy_env(1), 1);
    double w = 0.35;
    for (int g = 0; g < 16; g++) {
        NevoGenStats gs;
        generation(&s, &gs);
        if ((g + 1) % 3 == 0) w = fmax(0.0, w - 0.1);
        CHECK_MSG(fabs(gs.reward_weight - w) < 1e-12, "generation %d: w %.17g, expected %.17g", g, gs.reward_weight,
                  w);
    }
    CHECK(w == 0.0);
    stack_close(&s);

    /* reward = a0: w rises by delta on each new best (up to 1) and falls after a
     * generation without one; the expected sequence follows from the agents' rewards */
    cfg.ns.weight = 0.2;
    cfg.ns.weight_delta = 0.1;
    cfg.ns.patience = 1;
    cfg.es.lr = 0.3;
    stack_open(&s, &cfg, toy_env(0), 1);
    double init_best = -INFINITY, rewards[20], got[20], want[20];
    for (int m = 0; m < 3; m++) {
        float theta[TOY_NP];
        double rw, bc[2];
        nevo_policy_init_params(s.policy, s.noise, cfg.seed, 0, (uint32_t)m, theta);
        toy_outcome_f(theta, 0, &rw, bc);
        init_best = fmax(init_best, rw);
    }
    for (int g = 0; g < 20; g++) {
        NevoGenStats gs;
        generation(&s, &gs);
        rewards[g] = gs.elite_mean;
        got[g] = gs.reward_weight;
    }
    stack_close(&s);
    nsra_rule(0.2, 0.1, 1, init_best, rewards, 20, want);
    int ups = 0, downs = 0, capped = 0;
    for (int g = 0; g < 20; g++) {
        CHECK_MSG(fabs(got[g] - want[g]) < 1e-12, "generation %d: w %.17g, expected %.17g", g, got[g], want[g]);
        double prev = g ? want[g - 1] : 0.2;
        ups += want[g] > prev + 1e-12;
        downs += want[g] < prev - 1e-12;
        capped += want[g] == 1.0 && prev == 1.0 && rewards[g] > rewards[g - 1];
    }
    CHECK_MSG(ups >= 2 && downs >= 1 && capped >= 1, "the run exercised %d increases, %d decreases, %d at the cap",
              ups, downs, capped);

    /* the same through `nevo train` on maze/hard: reward_weight in metrics.jsonl
     * against the rule, with the initial agents' best reward measured here */
    char path[1024], bin[1024], out[16384];
    snprintf(path, sizeof path, "%s/nsra.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("{\"env\": \"maze/hard\", \"algo\": \"nsra-es\", \"seed\": 4, \"population\": 12, \"generations\": 14,\n"
          " \"episodes\": 1, \"eval_episodes\": 1, \"policy\": {\"hidden\": [8], \"init\": \"normc\"},\n"
          " \"es\": {\"sigma\": 0.1, \"lr\": 0.05, \"l2\": 0, \"obs_norm\": false, \"center_episodes\": 1},\n"
          " \"ns\": {\"k\": 10, \"meta_population\": 3, \"weight\": 0.5, \"weight_delta\": 0.125, \"patience\": 2}}\n",
          f);
    fclose(f);
    int rc = test_run(out, sizeof out, "cd %s && %s train nsra.json --out run --quiet --threads 2", test_tmpdir(),
                      bin_path(bin, sizeof bin));
    CHECK_MSG(rc == 0, "nevo train failed (%d):\n%s", rc, out);
    NevoConfig mcfg;
    NevoError err = {0};
    CHECK_MSG(nevo_config_load(&mcfg, path, &err) == NEVO_OK, "%s", err.msg);
    stack_open(&s, &mcfg, maze_env(), 1);
    init_best = -INFINITY;
    for (int m = 0; m < 3; m++) {
        float *theta = malloc(sizeof(float) * s.policy->nparams), bc[2];
        double rw;
        nevo_policy_init_params(s.policy, s.noise, mcfg.seed, 0, (uint32_t)m, theta);
        centre_outcome(&s, theta, 0, &rw, bc);
        init_best = fmax(init_best, rw);
        free(theta);
    }
    stack_close(&s);
    snprintf(path, sizeof path, "%s/run/metrics.jsonl", test_tmpdir());
    char *metrics = test_read_file(path, NULL);
    CHECK(metrics != NULL);
    int n = 0;
    for (char *line = metrics; *line && n < 20; n++) {
        char *nl = strchr(line, '\n');
        CHECK(nl != NULL);
        *nl = '\0';
        CHECK_EQ_INT((int)field(line, "generation"), n);
        rewards[n] = field(line, "elite_validation_mean");
        got[n] = field(line, "reward_weight");
        CHECK_MSG(strstr(line, "\"behaviour\": [") != NULL, "no behaviour in %s", line);
        line = nl + 1;
    }
    free(metrics);
    CHECK_EQ_INT(n, 14);
    nsra_rule(0.5, 0.125, 2, init_best, rewards, n, want);
    downs = 0;
    for (int g = 0; g < n; g++) {
        CHECK_MSG(got[g] == want[g], "metrics generation %d: reward_weight %.17g, expected %.17g", g, got[g], want[g]);
        downs += want[g] < (g ? want[g - 1] : 0.5);
    }
    CHECK_MSG(downs >= 1, "the maze run never lowered w");
}

/* ---------------------------------------------------------------- state round trip */

/* An algorithm restored from nevo_algo_save has the same archive and continues exactly
 * as the original; it reports no behaviours until it has run a generation of its own
 * (the population's behaviours are not part of the state, so there are none to show;
 * the ES family used to report 2n zero behaviours here). */
static void round_trip(const NevoConfig *cfg, NevoEnv *(*make_env)(void)) {
    Stack a, b;
    stack_open(&a, cfg, make_env(), 1);
    stack_open(&b, cfg, make_env(), 2);
    NevoGenStats ga, gb;
    for (int g = 0; g < 3; g++) generation(&a, &ga);
    NevoBuf buf = {0};
    nevo_algo_save(a.algo, &buf);
    NevoReader r = nevo_reader(buf.data, buf.len);
    NevoError err = {0};
    CHECK_MSG(nevo_algo_load(b.algo, &r, &err) == NEVO_OK, "%s", err.msg);
    CHECK(nevo_reader_ok(&r, true));
    int na, nb;
    const float *pa = nevo_algo_archive(a.algo, &na), *pb = nevo_algo_archive(b.algo, &nb);
    CHECK(na > 0 && na == nb && memcmp(pa, pb, sizeof(float) * (size_t)na * 2) == 0);
    CHECK_MSG(nevo_algo_behaviours(b.algo, &nb) == NULL && nb == 0, "%s: a restored algorithm reports %d behaviours "
              "it never evaluated", cfg->algo, nb);
    for (int g = 0; g < 2; g++) {
        generation(&a, &ga);
        generation(&b, &gb);
        CHECK(ga.best == gb.best && ga.mean == gb.mean && ga.novelty_mean == gb.novelty_mean &&
              ga.reward_weight == gb.reward_weight && ga.archive_size == gb.archive_size);
        pa = nevo_algo_behaviours(a.algo, &na);
        pb = nevo_algo_behaviours(b.algo, &nb);
        CHECK(na > 0 && na == nb && memcmp(pa, pb, sizeof(float) * (size_t)na * 2) == 0);
    }
    nevo_buf_free(&buf);
    stack_close(&a);
    stack_close(&b);
}

static NevoEnv *toy_env_default(void) { return toy_env(0); }

TEST(novelty_state_round_trip) {
    NevoConfig cfg;
    toy_config(&cfg, "nsra-es");
    cfg.ns.patience = 1;
    round_trip(&cfg, toy_env_default);
    toy_config(&cfg, "ns-es");
    round_trip(&cfg, toy_env_default);
    maze_config(&cfg, "ga-ns");
    cfg.population = 12;
    cfg.ga.truncation = 3;
    cfg.ga.validation_candidates = 2;
    cfg.ga.validation_episodes = 1;
    cfg.ns.archive_add = 2;
    round_trip(&cfg, maze_env);
}

/* ---------------------------------------------------------------- resume */

static char *read_run(const char *dir, const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", test_tmpdir(), dir, name);
    char *s = test_read_file(path, len);
    CHECK_MSG(s != NULL, "missing %s/%s", dir, name);
    return s;
}

static void same_run(const char *a, const char *b) {
    static const char *const files[] = {"policy.nevo", "behaviours.json", "metrics.jsonl", "summary.json"};
    test_same_run_files(a, b, files, 4);
}

static int nevo_train(const char *args) {
    char bin[1024], out[16384];
    int rc = test_run(out, sizeof out, "cd %s && %s train %s --quiet", test_tmpdir(), bin_path(bin, sizeof bin), args);
    if (rc != 0 && rc != 137) fprintf(stderr, "nevo train %s: exit %d\n%s\n", args, rc, out);
    return rc;
}

static long long frames_after(const char *dir, int g) {
    char *m = read_run(dir, "metrics.jsonl", NULL);
    char key[64];
    snprintf(key, sizeof key, "{\"generation\": %d, \"frames\": ", g);
    char *p = strstr(m, key);
    CHECK_MSG(p != NULL, "generation %d missing from %s/metrics.jsonl", g, dir);
    long long f = atoll(p + strlen(key));
    free(m);
    return f;
}

/* Full run (2 threads), the same with 1 thread, and a run killed halfway through
 * generation `gen` then resumed (1 thread): all byte-identical. */
static void resume_case(const char *name, const char *config, int gen) {
    char path[1024], args[512], d_full[64], d_t1[64], d_cut[64];
    snprintf(path, sizeof path, "%s/%s.json", test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(config, f);
    fclose(f);
    snprintf(d_full, sizeof d_full, "%s_full", name);
    snprintf(d_t1, sizeof d_t1, "%s_t1", name);
    snprintf(d_cut, sizeof d_cut, "%s_cut", name);
    snprintf(args, sizeof args, "%s.json --out %s --threads 2", name, d_full);
    CHECK_EQ_INT(nevo_train(args), 0);
    snprintf(args, sizeof args, "%s.json --out %s --threads 1", name, d_t1);
    CHECK_EQ_INT(nevo_train(args), 0);
    same_run(d_full, d_t1);
    long long kill = (frames_after(d_full, gen - 1) + frames_after(d_full, gen)) / 2;
    snprintf(args, sizeof args, "%s.json --out %s --threads 2 --kill-after-frames %lld", name, d_cut, kill);
    CHECK_EQ_INT(nevo_train(args), 137);
    snprintf(path, sizeof path, "%s/%s/summary.json", test_tmpdir(), d_cut);
    CHECK_MSG(access(path, F_OK) != 0, "the killed run finished");
    CHECK(frames_after(d_cut, gen - 1) == frames_after(d_full, gen - 1));
    snprintf(args, sizeof args, "--resume %s --threads 1", d_cut);
    CHECK_EQ_INT(nevo_train(args), 0);
    same_run(d_full, d_cut);
}

TEST(novelty_resume_bit_identical) {
    resume_case("gans",
                "{\"env\": \"maze/hard\", \"algo\": \"ga-ns\", \"seed\": 8, \"population\": 24, \"generations\": 6,\n"
                " \"episodes\": 1, \"eval_episodes\": 2, \"policy\": {\"hidden\": [8]},\n"
                " \"ga\": {\"sigma\": 0.1, \"truncation\": 5, \"validation_candidates\": 3, \"validation_episodes\": 1},\n"
                " \"ns\": {\"k\": 10, \"archive_add\": 3}}\n",
                3);
    resume_case("nsra",
                "{\"env\": \"maze/hard\", \"algo\": \"nsra-es\", \"seed\": 8, \"population\": 12, \"generations\": 8,\n"
                " \"episodes\": 1, \"eval_episodes\": 2, \"policy\": {\"hidden\": [8], \"init\": \"normc\"},\n"
                " \"es\": {\"sigma\": 0.1, \"lr\": 0.05, \"center_episodes\": 2},\n"
                " \"ns\": {\"k\": 10, \"meta_population\": 3, \"weight\": 0.5, \"weight_delta\": 0.2, \"patience\": 3}}\n",
                6);
    /* the cut fell where the NSRA state matters: w had left its start value (and, by
     * this seed, the stagnation count stood at 1: w falls at generation 7) */
    char *m = read_run("nsra_full", "metrics.jsonl", NULL);
    char *g5 = strstr(m, "{\"generation\": 5,"), *g7 = strstr(m, "{\"generation\": 7,");
    CHECK(g5 && g7);
    CHECK(field(g5, "reward_weight") != 0.5);
    CHECK(field(g7, "reward_weight") < field(g5, "reward_weight"));
    free(m);
}
