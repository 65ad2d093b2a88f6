/* The algorithms: fitness shaping by hand-computed numbers; learning thresholds within
 * small budgets (GA genome replay is checked by the kill-and-resume tests): GA and ES
 * solve CartPole-v1 (mean >= 475 over 100 evaluation episodes), random search beats a
 * random policy clearly, ES reaches better than -300 on Pendulum-v1; and tasks that
 * travel: generations whose evaluations run in another process from bytes alone end
 * where the in-process ones do, bit for bit. */
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo/algo_internal.h"
#include "harness.h"
#include "nevo/params.h"
#include "nevo/rng.h"
#include "nevo/train.h"
#include "nn/kernels.h"

TEST(algo_centered_ranks_by_hand) {
    /* values 3, 1, 2, 5 -> ranks 2, 0, 1, 3 -> r/(n-1) - 0.5 */
    double f[4] = {3, 1, 2, 5}, r[4];
    nevo_centered_ranks(f, 4, r);
    CHECK_NEAR(r[0], 2.0 / 3 - 0.5, 1e-15);
    CHECK_NEAR(r[1], -0.5, 1e-15);
    CHECK_NEAR(r[2], 1.0 / 3 - 0.5, 1e-15);
    CHECK_NEAR(r[3], 0.5, 1e-15);
    /* ties: a stable ascending sort gives the lower index the lower rank */
    double g[3] = {7, 7, 1}, q[3];
    nevo_centered_ranks(g, 3, q);
    CHECK_NEAR(q[2], -0.5, 1e-15);
    CHECK_NEAR(q[0], 0.0, 1e-15);
    CHECK_NEAR(q[1], 0.5, 1e-15);
    int order[4];
    nevo_rank_desc(f, 4, order);
    CHECK(order[0] == 3 && order[1] == 0 && order[2] == 2 && order[3] == 1);
    CHECK_NEAR(nevo_median(f, 4), 2.5, 1e-15);
    CHECK_NEAR(nevo_median(f, 3), 2.0, 1e-15);
}

/* Trains cfg into the test's temp dir and returns the final evaluation. */
static NevoTrainSummary train(const NevoConfig *cfg, const char *name) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", test_tmpdir(), name);
    NevoTrainSummary s;
    NevoError err = {0};
    NevoStatus st = nevo_train_run(cfg, dir, 0, 2, NULL, &s, &err);
    CHECK_MSG(st == NEVO_OK, "training failed: %s", err.msg);
    fprintf(stderr, "    %s: %d generations, %lld frames, eval %.2f +- %.2f over %d episodes\n", name,
            s.totals.generations, s.totals.frames, s.eval.return_mean, s.eval.return_std, s.eval.episodes);
    return s;
}

static void load(NevoConfig *cfg, const char *path) {
    NevoError err = {0};
    CHECK_MSG(nevo_config_load(cfg, path, &err) == NEVO_OK, "%s", err.msg);
}

/* Each kernel set's perturb (and nevo_perturb_rows, the chosen one) against the plain
 * loop, bit for bit: every row length up to 41 and 3000 (longer than the SIMD sets'
 * prefetch distance, so the loop runs both sides of its bound), every misalignment of
 * plus and of minus (the streamed middle, the scalar head and tail, minus stored
 * plainly when its alignment differs), plus or minus NULL, streamed and ordinary
 * stores, and nothing written around the rows. */
TEST(algo_perturb_rows_bit_identical) {
    enum { MAXN = 3000, PAD = 16 };
    static float theta[MAXN], eps[MAXN], plus[MAXN + 2 * PAD], minus[MAXN + 2 * PAD];
    NevoRng rng;
    nevo_rng_init(&rng, 5, NEVO_RNG_USER, 0, 0, 0);
    nevo_rng_fill_normal(&rng, theta, MAXN);
    nevo_rng_fill_normal(&rng, eps, MAXN);
    const float sigma = 0.037f;
    static const char *const sets[4] = {"generic", "avx2", "avx512", NULL}; /* NULL: nevo_perturb_rows */
    for (int set = 0; set < 4; set++) {
        const NevoKernels *K = sets[set] ? nevo_kernels_named(sets[set]) : NULL;
        if (sets[set] && !K) continue; /* not on this CPU */
        const char *name = sets[set] ? sets[set] : "nevo_perturb_rows";
        for (int n = 1; n <= MAXN; n = n < 41 ? n + 1 : MAXN) {
            for (int stream = 0; stream < 2; stream++) {
                for (int po = -1; po < 8; po++) { /* -1: no plus row */
                    for (int mo = -1; mo < 8; mo += 3) { /* -1: no minus row */
                        if (po < 0 && mo < 0) continue;
                        for (int i = 0; i < MAXN + 2 * PAD; i++) plus[i] = minus[i] = 7.0f;
                        float *p = po < 0 ? NULL : plus + PAD + po, *m = mo < 0 ? NULL : minus + PAD + mo;
                        if (K)
                            K->perturb(p, m, theta, sigma, eps, (size_t)n, stream);
                        else
                            nevo_perturb_rows(p, m, theta, sigma, eps, (size_t)n, stream);
                        for (int k = 0; k < n; k++) {
                            float d = sigma * eps[k], want_p = theta[k] + d, want_m = theta[k] - d;
                            if (p)
                                CHECK_MSG(memcmp(&p[k], &want_p, sizeof want_p) == 0,
                                          "%s n %d offsets %d/%d stream %d: plus[%d] %.9g vs %.9g", name, n, po, mo,
                                          stream, k, p[k], want_p);
                            if (m)
                                CHECK_MSG(memcmp(&m[k], &want_m, sizeof want_m) == 0,
                                          "%s n %d offsets %d/%d stream %d: minus[%d] %.9g vs %.9g", name, n, po, mo,
                                          stream, k, m[k], want_m);
                        }
                        for (int i = 0; i < MAXN + 2 * PAD; i++) {
                            int in_p = p && i >= PAD + po && i < PAD + po + n;
                            int in_m = m && i >= PAD + mo && i < PAD + mo + n;
                            if (!in_p) CHECK_MSG(plus[i] == 7.0f, "%s n %d: wrote plus outside the row", name, n);
                            if (!in_m) CHECK_MSG(minus[i] == 7.0f, "%s n %d: wrote minus outside the row", name, n);
                        }
                    }
                }
            }
            if (n == MAXN) break;
        }
    }
}

/* Each kernel set's weighted_sum (and nevo_weighted_sum, the chosen one) against the
 * plain loop (row after row, g[k] += w_i * row_i[k] in double), bit for bit: 1-19 rows
 * (the vector loop takes 8 a pass: full passes, a partial one, both), every range start
 * 0-4 and length up to 37 and 1000 (the vector body, the scalar tail), rows and sums
 * starting anywhere, weights of both signs and of very different sizes (so the order of
 * the sums shows in the bits), and nothing written outside [k0, k1). */
TEST(algo_weighted_sum_bit_identical) {
    enum { MAXN = 1000, ROWS = 19, PAD = 8 };
    static float rows[ROWS][MAXN + PAD];
    static double g0[MAXN + 2 * PAD], want[MAXN + 2 * PAD], got[MAXN + 2 * PAD];
    double w[ROWS];
    const float *r[ROWS];
    NevoRng rng;
    nevo_rng_init(&rng, 9, NEVO_RNG_USER, 0, 0, 0);
    for (int i = 0; i < ROWS; i++) {
        nevo_rng_fill_normal(&rng, rows[i], MAXN + PAD);
        float u;
        nevo_rng_fill_normal(&rng, &u, 1);
        w[i] = (double)u * (i % 3 == 0 ? 1e6 : i % 3 == 1 ? 1.0 : 1e-6);
    }
    for (int k = 0; k < MAXN + 2 * PAD; k++) {
        float u;
        nevo_rng_fill_normal(&rng, &u, 1);
        g0[k] = u;
    }
    static const char *const sets[4] = {"generic", "avx2", "avx512", NULL}; /* NULL: nevo_weighted_sum */
    for (int set = 0; set < 4; set++) {
        const NevoKernels *K = sets[set] ? nevo_kernels_named(sets[set]) : NULL;
        if (sets[set] && !K) continue; /* not on this CPU */
        const char *name = sets[set] ? sets[set] : "nevo_weighted_sum";
        for (int m = 1; m <= ROWS; m++) {
            for (int ro = 0; ro < 3; ro++) { /* rows start ro floats in */
                for (int i = 0; i < m; i++) r[i] = rows[(i * 7 + ro) % ROWS] + ro;
                for (int n = 0; n <= MAXN; n = n < 37 ? n + 1 : MAXN) {
                    for (int k0 = 0; k0 <= 4; k0 += m % 2 ? 1 : 3) {
                        size_t a = (size_t)k0, b = (size_t)k0 + (size_t)n;
                        if (b > MAXN) b = MAXN;
                        memcpy(want, g0, sizeof want);
                        memcpy(got, g0, sizeof got);
                        for (int i = 0; i < m; i++)
                            for (size_t k = a; k < b; k++) want[PAD + k] += w[i] * (double)r[i][k];
                        if (K)
                            K->weighted_sum(got + PAD, r, w, m, a, b);
                        else
                            nevo_weighted_sum(got + PAD, r, w, m, a, b);
                        CHECK_MSG(memcmp(got, want, sizeof want) == 0, "%s: %d rows, [%zu, %zu) offset %d differ",
                                  name, m, a, b, ro);
                    }
                    if (n == MAXN) break;
                }
            }
        }
    }
}

/* An algorithm on its own environment, policy, 2-thread pool, small noise table and
 * evaluator, from a config given as JSON (checked), for tests that call it directly. */
typedef struct AlgoRig {
    NevoConfig cfg;
    NevoEnv *env;
    NevoPolicy *p;
    NevoPool *pool;
    NevoNoise *noise;
    NevoEvaluator *ev;
    NevoAlgo *algo;
} AlgoRig;

static void rig_open(AlgoRig *r, const char *json) {
    NevoError err = {0};
    nevo_config_defaults(&r->cfg);
    CHECK_MSG(nevo_config_apply_json(&r->cfg, json, "test", &err) == NEVO_OK, "%s", err.msg);
    CHECK_MSG(nevo_config_check(&r->cfg, &err) == NEVO_OK, "%s", err.msg);
    r->env = NULL;
    CHECK_MSG(nevo_env_new(r->cfg.env, NULL, 0, &r->env, &err) == NEVO_OK, "%s", err.msg);
    nevo_env_set_max_steps(r->env, r->cfg.max_episode_steps);
    r->p = NULL;
    CHECK(nevo_policy_new(nevo_env_spec(r->env), &r->cfg.policy, nevo_algo_obs_norm(&r->cfg), &r->p, &err) == NEVO_OK);
    r->pool = nevo_pool_new(2);
    r->noise = nevo_noise_new((size_t)1 << 16, r->pool);
    r->ev = nevo_evaluator_new(r->env, r->p, r->pool, 0);
    r->algo = NULL;
    CHECK_MSG(nevo_algo_new(&r->cfg, r->env, r->p, r->noise, r->pool, &r->algo, &err) == NEVO_OK, "%s", err.msg);
}

static void rig_close(AlgoRig *r) {
    nevo_algo_free(r->algo);
    nevo_evaluator_free(r->ev);
    nevo_noise_free(r->noise);
    nevo_pool_free(r->pool);
    nevo_policy_free(r->p);
    nevo_env_free(r->env);
}

/* --- tasks that travel ------------------------------------------------------------ */

/* A worker process, as an MPI rank would be: it knows the run's config only, reads task
 * sets as bytes from `in`, evaluates each with its own env, policy, noise table and
 * evaluator, and writes the results as bytes to `out`; a zero length ends it. */
static int read_full(int fd, void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k <= 0) return 0;
        got += (size_t)k;
    }
    return 1;
}

static int write_full(int fd, const void *buf, size_t n) {
    for (size_t put = 0; put < n;) {
        ssize_t k = write(fd, (const char *)buf + put, n - put);
        if (k <= 0) return 0;
        put += (size_t)k;
    }
    return 1;
}

static int send_bytes(int fd, const NevoBuf *b) {
    uint64_t n = b->len;
    return write_full(fd, &n, 8) && write_full(fd, b->data, b->len);
}

static uint8_t *recv_bytes(int fd, size_t *len) {
    uint64_t n;
    if (!read_full(fd, &n, 8) || n == 0 || n > ((uint64_t)1 << 32)) return NULL;
    uint8_t *data = nevo_alloc((size_t)n);
    if (!read_full(fd, data, (size_t)n)) {
        free(data);
        return NULL;
    }
    *len = (size_t)n;
    return data;
}

/* The worker's failures: the message, and a status the test reports. */
static _Noreturn void worker_fail(const NevoError *err, int code) {
    fprintf(stderr, "    worker: %s\n", err->msg);
    _exit(code);
}

static _Noreturn void worker_main(const char *json, int in, int out) {
    NevoConfig cfg;
    NevoError err = {0};
    nevo_config_defaults(&cfg);
    NevoEnv *env = NULL;
    NevoPolicy *p = NULL;
    if (nevo_config_apply_json(&cfg, json, "worker", &err) || nevo_env_new(cfg.env, NULL, 0, &env, &err))
        worker_fail(&err, 3);
    nevo_env_set_max_steps(env, cfg.max_episode_steps);
    if (nevo_policy_new(nevo_env_spec(env), &cfg.policy, nevo_algo_obs_norm(&cfg), &p, &err))
        worker_fail(&err, 3);
    NevoPool *pool = nevo_pool_new(2);
    NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 3);
    NevoNoise *noise = NULL;
    size_t len;
    uint8_t *bytes;
    while ((bytes = recv_bytes(in, &len))) {
        NevoTaskSet *ts = NULL;
        if (nevo_taskset_read(bytes, len, &ts, &err)) worker_fail(&err, 4);
        free(bytes);
        if (!noise) noise = nevo_noise_new(ts->noise_floats, pool);
        if (nevo_taskset_materialise(ts, p, noise, &err) || nevo_taskset_prepare_policy(ts, p, &err))
            worker_fail(&err, 5);
        NevoEpisode *res = nevo_alloc(sizeof(NevoEpisode) * (size_t)(ts->n_tasks + 1));
        NevoObsStats *stats = nevo_alloc(sizeof(NevoObsStats) * (size_t)(ts->n_tasks + 1));
        NevoStates *states = nevo_alloc(sizeof(NevoStates) * (size_t)(ts->n_tasks + 1));
        for (int t = 0; t < ts->n_tasks; t++) {
            if (ts->tasks[t].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_init(&stats[t], ts->obs_dim);
            if (ts->tasks[t].flags & NEVO_TASK_RECORD_STATES) nevo_states_init(&states[t], ts->obs_dim, ts->states_cap);
        }
        NevoBuf b = {0};
        if (nevo_evaluate_tasks(ev, ts, res, stats, states, &err) || nevo_results_write(ts, res, stats, states, &b, &err))
            worker_fail(&err, 6);
        if (!send_bytes(out, &b)) worker_fail(&err, 7);
        for (int t = 0; t < ts->n_tasks; t++) {
            if (ts->tasks[t].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_free(&stats[t]);
            nevo_states_free(&states[t]);
        }
        nevo_buf_free(&b);
        free(res);
        free(stats);
        free(states);
        nevo_taskset_free(ts);
    }
    _exit(0);
}

/* What went through the bytes in the last check_tasks_travel: children built by a
 * scaled recipe, and states kept. */
static long long travelled_scaled, travelled_states;

/* `gens` generations of the config in process, and again with every evaluation in a
 * worker process: the same reports and the same state, bit for bit. */
static void check_tasks_travel(const char *json, int gens) {
    travelled_scaled = travelled_states = 0;
    int to_worker[2], from_worker[2];
    CHECK(pipe(to_worker) == 0 && pipe(from_worker) == 0);
    pid_t pid = fork(); /* before any thread: the worker starts its own */
    CHECK(pid >= 0);
    if (pid == 0) {
        close(to_worker[1]);
        close(from_worker[0]);
        worker_main(json, to_worker[0], from_worker[1]);
    }
    close(to_worker[0]);
    close(from_worker[1]);
    AlgoRig here, there;
    rig_open(&here, json);
    rig_open(&there, json);
    NevoError err = {0};
    for (int g = 0; g < gens; g++) {
        NevoGenStats want, got;
        CHECK_MSG(nevo_train_generation(here.algo, here.ev, &want, &err) == NEVO_OK, "%s", err.msg);
        int done = 0;
        while (!done) {
            const NevoTaskSet *ts = nevo_algo_ask(there.algo);
            NevoBuf b = {0};
            CHECK_MSG(nevo_taskset_write(ts, &b, &err) == NEVO_OK, "%s", err.msg);
            for (int j = 0; j < ts->n_nets; j++) travelled_scaled += ts->nets[j].kind == NEVO_NET_SCALED;
            CHECK(send_bytes(to_worker[1], &b));
            nevo_buf_free(&b);
            size_t len;
            uint8_t *bytes = recv_bytes(from_worker[0], &len);
            CHECK_MSG(bytes, "the worker died on generation %d", g);
            NevoEpisode *res = nevo_alloc(sizeof(NevoEpisode) * (size_t)(ts->n_tasks + 1));
            NevoObsStats *stats = nevo_alloc(sizeof(NevoObsStats) * (size_t)(ts->n_tasks + 1));
            NevoStates *states = nevo_alloc(sizeof(NevoStates) * (size_t)(ts->n_tasks + 1));
            CHECK_MSG(nevo_results_read(ts, bytes, len, res, stats, states, &err) == NEVO_OK, "%s", err.msg);
            int n_tasks = ts->n_tasks; /* ts is the algorithm's until tell */
            uint32_t flags[4096];
            CHECK(n_tasks <= 4096);
            for (int t = 0; t < n_tasks; t++) flags[t] = ts->tasks[t].flags;
            for (int t = 0; t < n_tasks; t++) travelled_states += (flags[t] & NEVO_TASK_RECORD_STATES) ? states[t].n : 0;
            CHECK_MSG(nevo_algo_tell(there.algo, res, stats, states, &got, &done, &err) == NEVO_OK, "%s", err.msg);
            for (int t = 0; t < n_tasks; t++) {
                if (flags[t] & NEVO_TASK_RECORD_OBS) nevo_obs_stats_free(&stats[t]);
                nevo_states_free(&states[t]);
            }
            free(res);
            free(stats);
            free(states);
            free(bytes);
        }
        CHECK_MSG(memcmp(&want, &got, sizeof want) == 0, "generation %d reports differ after travelling", g);
    }
    NevoBuf a = {0}, b = {0};
    nevo_algo_save(here.algo, &a);
    nevo_algo_save(there.algo, &b);
    CHECK_MSG(a.len == b.len && memcmp(a.data, b.data, a.len) == 0, "the states differ after %d generations", gens);
    nevo_buf_free(&a);
    nevo_buf_free(&b);
    uint64_t zero = 0;
    CHECK(write_full(to_worker[1], &zero, 8));
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the worker ended with status %d", status);
    close(to_worker[1]);
    close(from_worker[0]);
    rig_close(&here);
    rig_close(&there);
}

/* GA: bases travel as seed chains, validation rounds, elitism. */
TEST(algo_ga_tasks_travel) {
    check_tasks_travel("{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 8, \"population\": 12,"
                       " \"policy\": {\"hidden\": [8]}, \"ga\": {\"sigma\": 0.1, \"truncation\": 3,"
                       " \"validation_candidates\": 3, \"validation_episodes\": 2}}",
                       4);
}

/* GA with safe mutations: the children's states travel back; SM-G-SUM's parents travel
 * as floats with their scale rows and the children as scaled recipes, SM-G-SO's
 * children as floats, SM-R's as recipes with their own sigma. Two episodes per child
 * (states split over them), validation rounds (which keep none). */
TEST(algo_ga_safe_mutation_tasks_travel) {
    static const char *const modes[] = {"sm-g-sum", "sm-g-so", "sm-r"};
    for (int m = 0; m < 3; m++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 8, \"population\": 10, \"episodes\": 2,"
                 " \"policy\": {\"hidden\": [8, 8]}, \"ga\": {\"sigma\": 0.05, \"truncation\": 3,"
                 " \"validation_candidates\": 3, \"validation_episodes\": 2, \"mutation\": \"%s\","
                 " \"sm_states\": 15}}",
                 modes[m]);
        check_tasks_travel(json, 3);
        CHECK_MSG(travelled_states > 0, "%s: no states travelled", modes[m]);
        CHECK_MSG((travelled_scaled > 0) == (m == 0), "%s: %lld scaled recipes travelled", modes[m], travelled_scaled);
    }
}

/* ES with observation normalisation (the statistics travel back, the normalisation
 * out) and two episodes per perturbation (built first, in pairs). */
TEST(algo_es_tasks_travel) {
    check_tasks_travel("{\"env\": \"Pendulum-v1\", \"algo\": \"es\", \"seed\": 9, \"population\": 10, \"episodes\": 2,"
                       " \"max_episode_steps\": 60, \"policy\": {\"hidden\": [8], \"init\": \"normc\"},"
                       " \"es\": {\"obs_norm\": true, \"obs_norm_prob\": 0.5, \"center_episodes\": 2}}",
                       3);
}

/* Low-rank ES: the members travel as rank-2 recipes (their compact slices named, built
 * where they run), two episodes each (built first, in pairs). */
TEST(algo_es_lowrank_tasks_travel) {
    check_tasks_travel("{\"env\": \"Pendulum-v1\", \"algo\": \"es\", \"seed\": 9, \"population\": 10, \"episodes\": 2,"
                       " \"max_episode_steps\": 60, \"policy\": {\"hidden\": [8, 8], \"init\": \"normc\"},"
                       " \"es\": {\"rank\": 2, \"center_episodes\": 2}}",
                       3);
}

/* GA with low-rank mutations (ga.rank): the bases travel as rank-2 chains, rebuilt where
 * they run; the children as LOWRANK recipes, or factored (with the elite's copy and the
 * previous elite as factored networks of sigma 0). */
TEST(algo_ga_lowrank_tasks_travel) {
    for (int factored = 0; factored < 2; factored++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 8, \"population\": 12,"
                 " \"policy\": {\"hidden\": [8]}, \"ga\": {\"sigma\": 0.1, \"truncation\": 3, \"rank\": 2,"
                 " \"factored\": %s, \"validation_candidates\": 3, \"validation_episodes\": 2}}",
                 factored ? "true" : "false");
        check_tasks_travel(json, 4);
    }
}

/* A chain's mutation steps are checked on reading: NaN, infinity and a finite step too
 * large for the floats it builds (it passed as finite and turned the network into NaN
 * mid-run) are refused; an ordinary one reads back as written. */
TEST(algo_chain_read_checks_sigma) {
    static const float sigmas[] = {0.5f, -0.02f, 1e6f, NAN, INFINITY, 3e38f, 1.5e6f};
    for (int k = 0; k < 7; k++) {
        NevoMutation in[2] = {{4, 1, 0.1f}, {5, 2, sigmas[k]}}, out[2];
        NevoChain c = {.init_generation = 3, .init_individual = 7, .n = 2, .muts = in}, back;
        NevoBuf b = {0};
        nevo_chain_write(&b, &c);
        NevoReader r = nevo_reader(b.data, b.len);
        int ok = nevo_chain_read(&r, &back, out, 2);
        CHECK_MSG(ok == (k < 3), "sigma %g: read %d", (double)sigmas[k], ok);
        if (ok) CHECK(back.n == 2 && out[1].sigma == sigmas[k] && out[1].individual == 2 && back.init_individual == 7);
        nevo_buf_free(&b);
    }
}

/* A task set's chain rank is checked where the set is read: a crafted one past
 * NEVO_LOWRANK_MAX, in a container whose checksum is right, is refused; rank 0 in its
 * place reads, and rebuilds other bases than the rank-2 chains do. */
TEST(algo_ga_chain_rank_checked) {
    AlgoRig rig;
    rig_open(&rig, "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 8, \"population\": 6,"
                   " \"policy\": {\"hidden\": [4]}, \"ga\": {\"truncation\": 2, \"validation_candidates\": 2,"
                   " \"rank\": 2}}");
    NevoError err = {0};
    NevoGenStats gs;
    CHECK(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK);
    CHECK(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK); /* parents of rank-2 mutations */
    const NevoTaskSet *ts = nevo_algo_ask(rig.algo);
    CHECK(ts->chains && ts->n_bases == 3);
    int mutated = -1; /* a base with a mutation (the elite may be a first generation's network) */
    for (int b = 0; b < 3; b++) {
        CHECK(ts->chains[b].rank == 2);
        if (ts->chains[b].n > 0) mutated = b;
    }
    CHECK(mutated >= 0);
    /* the rank's bytes: where a set whose chains say rank 3 differs */
    NevoChain chains[3];
    memcpy(chains, ts->chains, sizeof chains);
    for (int b = 0; b < 3; b++) chains[b].rank = 3;
    NevoTaskSet other = *ts;
    other.chains = chains;
    NevoBuf a = {0}, b3 = {0};
    CHECK(nevo_taskset_write(ts, &a, &err) == NEVO_OK && nevo_taskset_write(&other, &b3, &err) == NEVO_OK);
    const uint8_t *pa, *pb;
    size_t la, lb;
    CHECK(nevo_container_decode(a.data, a.len, "a", "NEVOTSK1", 2, &pa, &la, &err) == NEVO_OK);
    CHECK(nevo_container_decode(b3.data, b3.len, "b", "NEVOTSK1", 2, &pb, &lb, &err) == NEVO_OK && la == lb);
    NevoBuf crafted = {0};
    for (size_t i = 0; i < la; i++) nevo_buf_put(&crafted, &pa[i], 1);
    int at[3], n_at = 0;
    for (size_t i = 0; i < la; i++)
        if (pa[i] != pb[i]) {
            CHECK(n_at < 3 && pa[i] == 2 && pb[i] == 3);
            at[n_at++] = (int)i;
        }
    CHECK(n_at == 3);
    for (int v = 0; v < 2; v++) {
        for (int k = 0; k < 3; k++) crafted.data[at[k]] = v ? 0 : NEVO_LOWRANK_MAX + 1;
        NevoBuf enc = {0};
        nevo_container_encode("NEVOTSK1", 2, &crafted, &enc);
        NevoTaskSet *back = NULL;
        NevoStatus st = nevo_taskset_read(enc.data, enc.len, &back, &err);
        if (v == 0) {
            CHECK(st == NEVO_ERR_CORRUPT && !back && !strchr(err.msg, '\n'));
        } else {
            CHECK_MSG(st == NEVO_OK && back->chains[mutated].rank == 0, "%s", err.msg);
            CHECK(nevo_taskset_materialise(back, rig.p, rig.noise, &err) == NEVO_OK);
            size_t m = (size_t)mutated;
            CHECK(memcmp(back->bases + m * back->base_stride, ts->bases + m * ts->base_stride,
                         sizeof(float) * rig.p->nparams) != 0);
            nevo_taskset_free(back);
        }
        nevo_buf_free(&enc);
    }
    nevo_buf_free(&a), nevo_buf_free(&b3), nevo_buf_free(&crafted);
    rig_close(&rig);
}

/* NSRA-ES: the agents' first evaluation, novelty, behaviours. */
TEST(algo_nsra_es_tasks_travel) {
    check_tasks_travel("{\"env\": \"maze/hard\", \"algo\": \"nsra-es\", \"seed\": 10, \"population\": 8,"
                       " \"max_episode_steps\": 100, \"policy\": {\"hidden\": [8], \"init\": \"normc\"},"
                       " \"es\": {\"center_episodes\": 1}, \"ns\": {\"meta_population\": 3, \"k\": 3}}",
                       3);
}

/* A crafted or damaged task set or result is refused with one line, before anything
 * is evaluated: every byte flipped in turn, and truncations. */
TEST(algo_task_bytes_checked) {
    AlgoRig rig;
    rig_open(&rig, "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 8, \"population\": 6,"
                   " \"policy\": {\"hidden\": [4]}, \"ga\": {\"truncation\": 2, \"validation_candidates\": 2}}");
    NevoError err = {0};
    NevoGenStats gs;
    CHECK(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK); /* parents: chains */
    const NevoTaskSet *ts = nevo_algo_ask(rig.algo);
    NevoBuf b = {0};
    CHECK(nevo_taskset_write(ts, &b, &err) == NEVO_OK);
    NevoTaskSet *back = NULL;
    CHECK(nevo_taskset_read(b.data, b.len, &back, &err) == NEVO_OK);
    CHECK(back->n_bases == ts->n_bases && back->n_nets == ts->n_nets && back->n_tasks == ts->n_tasks && back->chains);
    CHECK(memcmp(back->nets, ts->nets, sizeof(NevoNet) * (size_t)ts->n_nets) == 0);
    CHECK(memcmp(back->tasks, ts->tasks, sizeof(NevoTask) * (size_t)ts->n_tasks) == 0);
    CHECK(nevo_taskset_materialise(back, rig.p, rig.noise, &err) == NEVO_OK);
    for (int j = 0; j < ts->n_bases; j++) /* the chains rebuild the bases bit for bit */
        CHECK(memcmp(back->bases + (size_t)j * back->base_stride, ts->bases + (size_t)j * ts->base_stride,
                     sizeof(float) * rig.p->nparams) == 0);
    nevo_taskset_free(back);
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x40;
        back = NULL;
        CHECK_MSG(nevo_taskset_read(b.data, b.len, &back, &err) != NEVO_OK && !back, "byte %zu flipped was read", i);
        CHECK_MSG(!strchr(err.msg, '\n'), "%s", err.msg);
        b.data[i] ^= 0x40;
    }
    for (size_t n = 0; n < b.len; n += 7) CHECK(nevo_taskset_read(b.data, n, &back, &err) != NEVO_OK);
    /* results of another set are refused */
    NevoEpisode res[64];
    memset(res, 0, sizeof res);
    CHECK(ts->n_tasks <= 64);
    NevoBuf r = {0};
    CHECK(nevo_results_write(ts, res, NULL, NULL, &r, &err) == NEVO_OK);
    NevoTaskSet other = *ts;
    other.n_tasks = ts->n_tasks - 1;
    CHECK(nevo_results_read(&other, r.data, r.len, res, NULL, NULL, &err) == NEVO_ERR_CORRUPT);
    r.data[30] ^= 1;
    CHECK(nevo_results_read(ts, r.data, r.len, res, NULL, NULL, &err) == NEVO_ERR_CORRUPT);
    nevo_buf_free(&r);
    nevo_buf_free(&b);
    rig_close(&rig);
}

/* One elite candidate: it is the best child (the previous elite alone would be crowned
 * every generation), so without validation the elite's score is the best fitness. */
TEST(algo_ga_one_candidate_is_the_best_child) {
    for (int elitism = 0; elitism <= 1; elitism++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 5, \"population\": 10,"
                 " \"policy\": {\"hidden\": [4]}, \"ga\": {\"truncation\": 3, \"elitism\": %s,"
                 " \"validation_candidates\": 1, \"validation_episodes\": 0}}",
                 elitism ? "true" : "false");
        AlgoRig rig;
        rig_open(&rig, json);
        NevoError err = {0};
        for (int g = 0; g < 4; g++) {
            NevoGenStats gs;
            CHECK_MSG(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK, "%s", err.msg);
            CHECK_MSG(gs.elite_mean == gs.best, "elitism %d, generation %d: elite %g, best child %g", elitism, g,
                      gs.elite_mean, gs.best);
        }
        rig_close(&rig);
    }
}

/* ga.sigma_decay and ga.sigma_min: generation g's children mutate with
 * max(sigma_min, sigma decay^g); ga.shared_episodes: every child of a generation plays
 * the same episode seeds (new ones each generation), where otherwise no two share one. */
TEST(algo_ga_sigma_schedule_and_shared_episodes) {
    for (int shared = 0; shared <= 1; shared++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 3, \"population\": 6, \"episodes\": 2,"
                 " \"policy\": {\"hidden\": [4]}, \"ga\": {\"sigma\": 0.1, \"sigma_decay\": 0.5, \"sigma_min\": 0.02,"
                 " \"truncation\": 3, \"validation_candidates\": 2, \"validation_episodes\": 1,"
                 " \"shared_episodes\": %s}}",
                 shared ? "true" : "false");
        AlgoRig rig;
        rig_open(&rig, json);
        NevoError err = {0};
        uint64_t last = 0;
        for (int g = 0; g < 5; g++) {
            const NevoTaskSet *ts = nevo_algo_ask(rig.algo);
            double want = 0.1 * pow(0.5, g) > 0.02 ? 0.1 * pow(0.5, g) : 0.02;
            int perturbed = 0;
            for (int i = 0; i < ts->n_nets; i++) {
                if (ts->nets[i].kind != NEVO_NET_PERTURBED) continue;
                perturbed++;
                CHECK_MSG(ts->nets[i].sigma == (float)want, "generation %d: child %d sigma %g, want %g", g, i,
                          (double)ts->nets[i].sigma, want);
            }
            CHECK_MSG(g == 0 ? perturbed == 0 : perturbed >= 5, "generation %d: %d mutated children", g, perturbed);
            CHECK(ts->n_tasks == 12);
            for (int t = 0; t < ts->n_tasks; t++)
                for (int u = 0; u < t; u++) {
                    int same_episode = t % 2 == u % 2;
                    CHECK_MSG((ts->tasks[t].seed == ts->tasks[u].seed) == (shared && same_episode),
                              "shared %d, generation %d: tasks %d and %d", shared, g, u, t);
                }
            CHECK(ts->tasks[0].seed != last);
            last = ts->tasks[0].seed;
            NevoGenStats gs;
            CHECK_MSG(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK, "%s", err.msg);
        }
        rig_close(&rig);
    }
}

/* es.sigma_decay and es.sigma_min: generation g's perturbations carry
 * max(sigma_min, sigma decay^g); with decay 1 the run is the constant sigma's, bit for
 * bit (the default). */
TEST(algo_es_sigma_schedule) {
    AlgoRig rig;
    rig_open(&rig, "{\"env\": \"CartPole-v1\", \"algo\": \"es\", \"seed\": 3, \"population\": 6,"
                   " \"policy\": {\"hidden\": [4], \"init\": \"normc\"},"
                   " \"es\": {\"sigma\": 0.1, \"sigma_decay\": 0.5, \"sigma_min\": 0.02}}");
    NevoError err = {0};
    for (int g = 0; g < 5; g++) {
        const NevoTaskSet *ts = nevo_algo_ask(rig.algo);
        double want = 0.1 * pow(0.5, g) > 0.02 ? 0.1 * pow(0.5, g) : 0.02;
        CHECK(ts->n_nets == 6);
        for (int i = 0; i < ts->n_nets; i++)
            CHECK_MSG(ts->nets[i].kind == NEVO_NET_PERTURBED && ts->nets[i].sigma == (float)want,
                      "generation %d: net %d sigma %g, want %g", g, i, (double)ts->nets[i].sigma, want);
        NevoGenStats gs;
        CHECK_MSG(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK, "%s", err.msg);
    }
    rig_close(&rig);
    /* decay 1 (with any floor below sigma) is the constant run */
    NevoBuf st[2] = {{0}, {0}};
    for (int k = 0; k < 2; k++) {
        rig_open(&rig, k ? "{\"env\": \"CartPole-v1\", \"algo\": \"es\", \"seed\": 3, \"population\": 6,"
                           " \"policy\": {\"hidden\": [4], \"init\": \"normc\"}, \"es\": {\"sigma\": 0.1,"
                           " \"sigma_decay\": 1, \"sigma_min\": 0.01}}"
                         : "{\"env\": \"CartPole-v1\", \"algo\": \"es\", \"seed\": 3, \"population\": 6,"
                           " \"policy\": {\"hidden\": [4], \"init\": \"normc\"}, \"es\": {\"sigma\": 0.1}}");
        for (int g = 0; g < 3; g++) {
            NevoGenStats gs;
            CHECK_MSG(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK, "%s", err.msg);
        }
        nevo_algo_save(rig.algo, &st[k]);
        rig_close(&rig);
    }
    CHECK(st[0].len == st[1].len && memcmp(st[0].data, st[1].data, st[0].len) == 0);
    nevo_buf_free(&st[0]);
    nevo_buf_free(&st[1]);
}

/* tell refuses results that cannot answer the set: statistics missing for a task that
 * records observations, an episode of negative length. */
TEST(algo_tell_checks_the_results) {
    AlgoRig rig;
    rig_open(&rig, "{\"env\": \"Pendulum-v1\", \"algo\": \"es\", \"seed\": 2, \"population\": 6,"
                   " \"max_episode_steps\": 20, \"policy\": {\"hidden\": [4], \"init\": \"normc\"},"
                   " \"es\": {\"obs_norm\": true, \"obs_norm_prob\": 1.0}}");
    NevoError err = {0};
    const NevoTaskSet *ts = nevo_algo_ask(rig.algo);
    CHECK(ts->n_tasks == 6 && (ts->tasks[0].flags & NEVO_TASK_RECORD_OBS));
    NevoEpisode res[6];
    memset(res, 0, sizeof res);
    NevoGenStats gs;
    int done = 7;
    CHECK(nevo_algo_tell(rig.algo, res, NULL, NULL, &gs, &done, &err) == NEVO_ERR_INVALID && done == 0);
    CHECK_MSG(strstr(err.msg, "statistics are missing"), "%s", err.msg);
    res[3].length = -1;
    NevoObsStats stats[6];
    for (int t = 0; t < 6; t++) nevo_obs_stats_init(&stats[t], ts->obs_dim);
    CHECK(nevo_algo_tell(rig.algo, res, stats, NULL, &gs, &done, &err) == NEVO_ERR_INVALID);
    CHECK(nevo_algo_ask(rig.algo) == ts); /* still asking for the same set */
    /* results whose statistics are not what an evaluation gives are refused on reading */
    res[3].length = 5;
    stats[2].count = NAN;
    NevoBuf b = {0};
    CHECK(nevo_results_write(ts, res, stats, NULL, &b, &err) == NEVO_OK);
    NevoObsStats back[6];
    memset(back, 0, sizeof back);
    CHECK(nevo_results_read(ts, b.data, b.len, res, back, NULL, &err) == NEVO_ERR_CORRUPT);
    nevo_buf_free(&b);
    for (int t = 0; t < 6; t++) nevo_obs_stats_free(&stats[t]), nevo_obs_stats_free(&back[t]);
    rig_close(&rig);
}

/* ES's saved observation statistics are checked on load: a count that is not a whole
 * number of observations (a tiny one made every mean infinite in float), a mean beyond
 * what the policy's floats hold. The plain ES state ends with them: dim, count, sum,
 * sumsq. */
TEST(algo_es_refuses_crafted_obs_statistics) {
    const char *json = "{\"env\": \"Pendulum-v1\", \"algo\": \"es\", \"seed\": 2, \"population\": 6,"
                       " \"max_episode_steps\": 20, \"policy\": {\"hidden\": [4], \"init\": \"normc\"},"
                       " \"es\": {\"obs_norm\": true, \"obs_norm_prob\": 1.0}}";
    AlgoRig rig;
    rig_open(&rig, json);
    NevoError err = {0};
    NevoGenStats gs;
    CHECK_MSG(nevo_train_generation(rig.algo, rig.ev, &gs, &err) == NEVO_OK, "%s", err.msg);
    NevoBuf b = {0};
    nevo_algo_save(rig.algo, &b);
    const int dim = 3;
    size_t at = b.len - 16 * (size_t)dim - 8;
    uint32_t d;
    double count;
    memcpy(&d, b.data + at - 4, 4);
    memcpy(&count, b.data + at, 8);
    CHECK_MSG(d == (uint32_t)dim && count >= 1 && count == floor(count), "dim %u count %g", d, count);
    static const struct {
        double count, sum0;
        const char *msg;
    } bad[] = {{1e-300, 1, "out of range"}, {2.5, 1, "out of range"}, {-1, 1, "out of range"},
               {1, 1e300, "beyond 1e30"}};
    for (int k = 0; k < 5; k++) {
        uint8_t *copy = malloc(b.len);
        memcpy(copy, b.data, b.len);
        if (k < 4) {
            memcpy(copy + at, &bad[k].count, 8);
            memcpy(copy + at + 8, &bad[k].sum0, 8);
        }
        NevoReader r = nevo_reader(copy, b.len);
        NevoStatus st = nevo_algo_load(rig.algo, &r, &err);
        if (k < 4) {
            CHECK_MSG(st == NEVO_ERR_CORRUPT, "case %d loaded", k);
            CHECK_CONTAINS(err.msg, bad[k].msg);
        } else {
            CHECK_MSG(st == NEVO_OK, "%s", err.msg); /* the unchanged state loads */
        }
        free(copy);
    }
    nevo_buf_free(&b);
    rig_close(&rig);
}

TEST(algo_ga_solves_cartpole) {
    NevoConfig cfg;
    load(&cfg, "configs/cartpole_ga.json");
    cfg.generations = 10;
    NevoTrainSummary s = train(&cfg, "ga");
    CHECK(s.eval.episodes == 100);
    CHECK_MSG(s.eval.return_mean >= 475.0, "GA mean return %.2f < 475", s.eval.return_mean);
}

TEST(algo_es_solves_cartpole) {
    NevoConfig cfg;
    load(&cfg, "configs/cartpole_es.json");
    NevoTrainSummary s = train(&cfg, "es");
    CHECK(s.eval.episodes == 100);
    CHECK_MSG(s.eval.return_mean >= 475.0, "ES mean return %.2f < 475", s.eval.return_mean);
}

/* Rank-1 perturbations (EGGROLL) solve CartPole with the full-rank config's settings. */
TEST(algo_es_lowrank_solves_cartpole) {
    NevoConfig cfg;
    load(&cfg, "configs/cartpole_es.json");
    cfg.es.rank = 1;
    NevoTrainSummary s = train(&cfg, "es-rank1");
    CHECK_MSG(s.eval.return_mean >= 475.0, "rank-1 ES mean return %.2f < 475", s.eval.return_mean);
}

/* The same members through EGGROLL's factored forward solve it too (the same networks,
 * summed in another order: a run of its own, not the built one's bits). */
TEST(algo_es_factored_solves_cartpole) {
    NevoConfig cfg;
    load(&cfg, "configs/cartpole_es.json");
    cfg.es.rank = 1;
    cfg.es.factored = 1;
    NevoTrainSummary s = train(&cfg, "es-factored");
    CHECK_MSG(s.eval.return_mean >= 475.0, "factored rank-1 ES mean return %.2f < 475", s.eval.return_mean);
}

/* Rank-1 mutations run factored (each child its parent's product plus its correction)
 * solve it with the full-rank config's settings. */
TEST(algo_ga_factored_solves_cartpole) {
    NevoConfig cfg;
    load(&cfg, "configs/cartpole_ga.json");
    cfg.generations = 10;
    cfg.ga.rank = 1;
    cfg.ga.factored = 1;
    NevoTrainSummary s = train(&cfg, "ga-factored");
    CHECK_MSG(s.eval.return_mean >= 475.0, "factored rank-1 GA mean return %.2f < 475", s.eval.return_mean);
}

/* Mean return of a uniform-random policy over the same evaluation episodes. */
static double random_policy_mean(const char *env_name, int episodes, uint64_t seed) {
    NevoEnv *env;
    NevoError err;
    CHECK(nevo_env_new(env_name, NULL, 0, &env, &err) == NEVO_OK);
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    float obs[64], action[1];
    double total = 0.0;
    for (int e = 0; e < episodes; e++) {
        NevoRng rng;
        nevo_rng_init(&rng, seed, NEVO_RNG_POLICY, 0, (uint32_t)e, 0);
        nevo_env_reset(env, inst, nevo_rng_derive(seed, NEVO_RNG_ENV_SEED, 0, NEVO_STREAM_FINAL_EVAL, (uint32_t)e), obs);
        NevoStepResult r = {0};
        while (!r.terminated && !r.truncated) {
            action[0] = (float)nevo_rng_below(&rng, (uint32_t)s->n_actions);
            nevo_env_step(env, inst, action, obs, &r);
            total += r.reward;
        }
    }
    free(inst);
    nevo_env_free(env);
    return total / episodes;
}

TEST(algo_random_search_beats_random_policy) {
    NevoConfig cfg;
    load(&cfg, "configs/cartpole_rs.json");
    NevoTrainSummary s = train(&cfg, "rs");
    double random_mean = random_policy_mean("CartPole-v1", 100, cfg.seed);
    fprintf(stderr, "    random policy: %.2f\n", random_mean);
    CHECK(random_mean > 10.0 && random_mean < 40.0);
    CHECK_MSG(s.eval.return_mean >= 5.0 * random_mean, "random search %.2f vs random policy %.2f",
              s.eval.return_mean, random_mean);
}

TEST(algo_es_pendulum_better_than_minus_300) {
    NevoConfig cfg;
    load(&cfg, "configs/pendulum_es.json");
    cfg.generations = 120;
    NevoTrainSummary s = train(&cfg, "pendulum");
    CHECK_MSG(s.eval.return_mean > -300.0, "ES on Pendulum: %.2f", s.eval.return_mean);
}

/* ARS's top-b selection with reward-std shaping (es.top_directions = 1,
 * es.shaping = reward_std): one generation moves theta along exactly one perturbation,
 * and by a known amount. With b = 1 the rewards used are the chosen pair's r+ and r-,
 * whose std is |r+ - r-| / 2, so the pair's weight difference is +-2 whatever the
 * rewards, and plain SGD (no momentum, no L2) steps lr / (1 * sigma) * 2 * eps_j. */
TEST(algo_es_top_directions_step_by_hand) {
    AlgoRig rig;
    rig_open(&rig, "{\"env\": \"CartPole-v1\", \"algo\": \"es\", \"seed\": 3, \"population\": 8,"
                   " \"policy\": {\"hidden\": [], \"init\": \"normc\"},"
                   " \"es\": {\"sigma\": 0.1, \"optimizer\": \"sgd\", \"lr\": 0.01, \"momentum\": 0.0,"
                   " \"l2\": 0.0, \"obs_norm\": false, \"center_episodes\": 1,"
                   " \"shaping\": \"reward_std\", \"top_directions\": 1}}");
    NevoConfig cfg = rig.cfg;
    NevoError err = {0};
    NevoNoise *noise = rig.noise;
    NevoAlgo *algo = rig.algo;
    size_t np = rig.p->nparams;
    float theta0[64], theta1[64];
    CHECK(np <= 64);
    nevo_algo_best(algo, theta0);
    NevoGenStats gs;
    CHECK(nevo_train_generation(algo, rig.ev, &gs, &err) == NEVO_OK);
    nevo_algo_best(algo, theta1);
    int matched = 0;
    for (int j = 0; j < cfg.population / 2; j++) {
        const float *eps = nevo_noise_slice(noise, np, cfg.seed, NEVO_RNG_ES_NOISE, 0, (uint32_t)j, 0);
        for (int sign = -1; sign <= 1; sign += 2) {
            double worst = 0.0;
            for (size_t k = 0; k < np; k++) {
                double want = (double)theta0[k] + sign * cfg.es.lr / cfg.es.sigma * 2.0 * eps[k];
                double d = fabs((double)theta1[k] - (float)want);
                if (d > worst) worst = d;
            }
            if (worst < 1e-6) matched++;
        }
    }
    CHECK_MSG(matched == 1, "theta moved along %d of the perturbations by 2 lr / sigma (want exactly 1)", matched);
    /* top_directions above the number of pairs is refused */
    cfg.es.top_directions = 5;
    CHECK(nevo_algo_check(&cfg, NULL, &err) == NEVO_ERR_INVALID);
    rig_close(&rig);
}

/* es.reward_shift: CartPole pays exactly 1 per step, so with a shift of 1 every shaped
 * return is 0: with reward-std shaping the weights are all 0 and theta must not move,
 * while the reported fitness stays the true returns (episode lengths). */
TEST(algo_es_reward_shift_shapes_only_the_update) {
    AlgoRig rig;
    rig_open(&rig, "{\"env\": \"CartPole-v1\", \"algo\": \"es\", \"seed\": 4, \"population\": 8,"
                   " \"policy\": {\"hidden\": [], \"init\": \"normc\"},"
                   " \"es\": {\"sigma\": 0.1, \"optimizer\": \"sgd\", \"lr\": 0.01, \"momentum\": 0.0,"
                   " \"l2\": 0.0, \"obs_norm\": false, \"center_episodes\": 1,"
                   " \"shaping\": \"reward_std\", \"reward_shift\": 1.0}}");
    NevoError err = {0};
    NevoAlgo *algo = rig.algo;
    const NevoPolicy *p = rig.p;
    float theta0[64], theta1[64];
    CHECK(p->nparams <= 64);
    nevo_algo_best(algo, theta0);
    NevoGenStats gs = {0};
    CHECK(nevo_train_generation(algo, rig.ev, &gs, &err) == NEVO_OK);
    nevo_algo_best(algo, theta1);
    CHECK_MSG(memcmp(theta0, theta1, sizeof(float) * p->nparams) == 0, "theta moved on all-zero shaped returns");
    /* true returns: 8 episodes of 8+ steps each, best = longest, frames = their sum plus the centre's */
    CHECK_MSG(gs.best >= 8.0 && gs.mean >= 8.0 && gs.best <= 500.0, "best %g mean %g", gs.best, gs.mean);
    rig_close(&rig);
}
