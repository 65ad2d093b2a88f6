/* The training loop: run directory, generations, metrics, checkpoints, resume and the
 * final evaluation. */
#include "nevo/train.h"

#include "nevo/backend.h"
#include "nevo/comm.h"
#include "engine/run_core.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "nevo/dataset.h"
#include "nevo/io.h"
#include "nevo/rng.h"
#include "nevo/supervised.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void path_in(char *dst, size_t size, const char *dir, const char *name) {
    snprintf(dst, size, "%s/%s", dir, name);
}

static NevoStatus make_dirs(const char *dir, NevoError *err) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return nevo_error(err, NEVO_ERR_IO, "output directory path too long");
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return nevo_error(err, NEVO_ERR_IO, "cannot create %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return nevo_error(err, NEVO_ERR_IO, "cannot create %s: %s", buf, strerror(errno));
    return NEVO_OK;
}

/* Keeps the metrics lines of generations < keep (a killed run may have written a line
 * for a generation its checkpoint does not hold), rewriting the file atomically. */
static NevoStatus trim_metrics(const char *path, int keep, NevoError *err) {
    uint8_t *data;
    size_t n;
    if (access(path, F_OK) != 0) return NEVO_OK;
    NevoStatus st = nevo_read_all(path, &data, &n, err);
    if (st) return st;
    NevoBuf out = {0};
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (data[i] != '\n') continue;
        /* bounded parse: the buffer has no terminating NUL, so no sscanf */
        static const char pre[] = "{\"generation\": ";
        size_t at = start + sizeof pre - 1;
        long gen = -1;
        if (i - start > sizeof pre - 1 && memcmp(data + start, pre, sizeof pre - 1) == 0 && data[at] >= '0' &&
            data[at] <= '9') {
            gen = 0;
            for (; at < i && data[at] >= '0' && data[at] <= '9' && gen < keep; at++) gen = gen * 10 + (data[at] - '0');
        }
        if (gen >= 0 && gen < keep) nevo_buf_put(&out, data + start, i + 1 - start);
        start = i + 1;
    }
    st = nevo_write_atomic(path, out.data ? (const void *)out.data : "", out.len, err);
    nevo_buf_free(&out);
    free(data);
    return st;
}

static NevoStatus append_line(const char *path, const char *line, NevoError *err) {
    FILE *f = fopen(path, "a");
    if (!f) return nevo_error(err, NEVO_ERR_IO, "cannot append to %s: %s", path, strerror(errno));
    fputs(line, f);
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad) return nevo_error(err, NEVO_ERR_IO, "cannot append to %s: %s", path, strerror(errno));
    return NEVO_OK;
}

typedef struct Run {
    NevoConfig cfg;
    NevoRunCore c;              /* on a dataset: no env, evaluator or backend */
    NevoEnv *eval_env;          /* evaluation env (the env's own limits) */
    NevoRunData d;              /* a run on a dataset (no env, no evaluator): its data */
    NevoComm *comm;             /* the job's ranks (NULL: this process alone) */
    struct Ranks *ranks;        /* their shares of the work (NULL: this process alone) */
} Run;

void nevo_run_core_free(NevoRunCore *c) {
    nevo_algo_free(c->algo);
    nevo_evaluator_free(c->ev);
    nevo_backend_free(c->backend);
    nevo_noise_free(c->noise);
    nevo_pool_free(c->pool);
    nevo_policy_free(c->policy);
    nevo_env_free(c->env);
    memset(c, 0, sizeof *c);
}

static void ranks_free(struct Ranks *k);

static void run_free(Run *r) {
    ranks_free(r->ranks);
    nevo_run_core_free(&r->c);
    nevo_env_free(r->eval_env);
    nevo_run_data_free(&r->d);
}

NevoStatus nevo_run_core_pool_and_noise(const NevoConfig *cfg, int threads, NevoRunCore *c, NevoError *err) {
    size_t table = nevo_algo_noise_floats(cfg, c->policy->nparams);
    if (table <= c->policy->nparams)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "noise_table_floats (%zu) must exceed the network's %zu parameters; use 0 (automatic)",
                          table, c->policy->nparams);
    c->pool = nevo_pool_new(threads > 0 ? threads : cfg->threads > 0 ? cfg->threads : nevo_cpu_count());
    c->noise = nevo_noise_new(table, c->pool);
    return NEVO_OK;
}

/* The actor-learners' validations: the run's training env, policy and pool. */
static NevoStatus run_validate(void *ctx, const float *theta, int episodes, uint64_t seed, double *mean,
                               long long *frames, NevoError *err) {
    const NevoRunCore *c = ctx;
    NevoEvalSummary sum;
    NevoStatus st = nevo_eval_params(c->env, c->policy, theta, c->pool, episodes, seed, &sum, err);
    *mean = sum.return_mean;
    *frames = sum.frames;
    return st;
}

NevoStatus nevo_run_core_build(const NevoConfig *cfg, int threads, const NevoComm *comm, NevoRunCore *c,
                               NevoError *err) {
    memset(c, 0, sizeof *c);
    NevoStatus st = nevo_env_new(cfg->env, cfg->env_options, cfg->n_env_options, &c->env, err);
    if (st) return st;
    nevo_env_set_max_steps(c->env, cfg->max_episode_steps);
    st = nevo_algo_check(cfg, nevo_env_spec(c->env), err);
    if (st) return st;
    st = nevo_policy_new(nevo_env_spec(c->env), &cfg->policy, nevo_algo_obs_norm(cfg), &c->policy, err);
    if (st) return st;
    st = nevo_algo_check_memory(cfg, c->policy->nparams, err);
    if (st) return st;
    st = nevo_run_core_pool_and_noise(cfg, threads, c, err);
    if (st) return st;
    c->ev = nevo_evaluator_new(c->env, c->policy, c->pool, 0);
    if (strcmp(cfg->backend, "cpu") != 0) {
        st = nevo_backend_new_on_node(cfg->backend, comm ? nevo_comm_device_rank(comm) : 0,
                                      comm ? nevo_comm_device_ranks(comm) : 1, &c->backend, err);
        if (st) return st;
        nevo_evaluator_set_backend(c->ev, c->backend);
    }
    st = nevo_algo_new(cfg, c->env, c->policy, c->noise, c->pool, &c->algo, err);
    if (st == NEVO_OK) nevo_algo_set_validate(c->algo, run_validate, c);
    return st;
}

/* Builds everything a run needs from the config; writes nothing. */
static NevoStatus run_build(Run *r, const NevoConfig *cfg, int threads, const NevoComm *comm, NevoError *err) {
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    NevoStatus st = nevo_config_check(cfg, err);
    if (st) return st;
    if (cfg->dataset[0]) return nevo_run_core_build_data(&r->cfg, threads, &r->c, &r->d, err);
    st = nevo_env_new(cfg->env, cfg->env_options, cfg->n_env_options, &r->eval_env, err);
    if (st) return st;
    return nevo_run_core_build(&r->cfg, threads, comm, &r->c, err);
}

void nevo_task_records_new(const NevoTaskSet *ts, NevoObsStats **stats, NevoStates **states) {
    *stats = NULL;
    *states = NULL;
    for (int t = 0; t < ts->n_tasks; t++) {
        if (ts->tasks[t].flags & NEVO_TASK_RECORD_OBS) {
            if (!*stats) *stats = nevo_alloc(sizeof(NevoObsStats) * (size_t)ts->n_tasks);
            nevo_obs_stats_init(&(*stats)[t], ts->obs_dim);
        }
        if (ts->tasks[t].flags & NEVO_TASK_RECORD_STATES) {
            if (!*states) *states = nevo_alloc(sizeof(NevoStates) * (size_t)ts->n_tasks);
            nevo_states_init(&(*states)[t], ts->obs_dim, ts->states_cap);
        }
    }
}

void nevo_task_records_free(NevoObsStats *stats, NevoStates *states, int n_tasks) {
    for (int t = 0; stats && t < n_tasks; t++) nevo_obs_stats_free(&stats[t]); /* zeroed: none kept */
    for (int t = 0; states && t < n_tasks; t++) nevo_states_free(&states[t]);
    free(stats);
    free(states);
}

/* --- ranks -----------------------------------------------------------------------------
 * A run across ranks: every rank builds the same algorithm and asks the same task sets;
 * rank r evaluates tasks [n r / N, n (r + 1) / N) of each and the ranks exchange their
 * results (with the tasks' observation statistics and kept states: nevo_results_write),
 * so every rank tells its algorithm the same results and makes the same update from the
 * shared noise. An episode's outcome depends on its task alone, so the results, and the
 * run, are those of one process whatever N. */

/* Evaluates a shard: a set's tasks [0, shard->n_tasks), results and records from 0. */
typedef NevoStatus (*ShardFn)(void *ctx, const NevoTaskSet *shard, NevoEpisode *results, NevoObsStats *stats,
                              NevoStates *states, NevoError *err);

static NevoStatus shard_env(void *ctx, const NevoTaskSet *shard, NevoEpisode *results, NevoObsStats *stats,
                            NevoStates *states, NevoError *err) {
    return nevo_evaluate_tasks(ctx, shard, results, stats, states, err);
}

typedef struct DataCtx {
    const Run *r;
} DataCtx;

static NevoStatus shard_data(void *ctx, const NevoTaskSet *shard, NevoEpisode *results, NevoObsStats *stats,
                             NevoStates *states, NevoError *err) {
    const Run *r = ((const DataCtx *)ctx)->r;
    NevoStatus st = nevo_taskset_check(shard, r->c.policy, NULL, err);
    if (st) return st;
    return nevo_supervised_tasks(shard, r->c.policy, &r->d.train, r->cfg.data.fitness_batch, r->c.pool, results, err);
}

/* The ranks of a run and their shares of each evaluation. Rank r's share is
 * proportional to weight[r], the tasks per second it evaluated in the generation
 * before (equal at first): a rank that is persistently slower (a loaded node, slower
 * cores) gets fewer tasks, so the others do not wait for it each generation. Every rank
 * computes the same shares from the same gathered figures, and which rank runs a task
 * never changes its result: the run stays bit-identical. NEVO_STATIC_SHARDS=1 keeps
 * the shares equal (to measure what balancing gains). */
typedef struct Ranks {
    NevoComm *comm;
    int size, rank, balance;
    double *weight;   /* (size) */
    double eval_s;    /* this rank's seconds evaluating its shards this generation */
    long long tasks;  /* and the tasks it evaluated */
} Ranks;

/* Collective: rank 0's environment decides NEVO_STATIC_SHARDS for every rank (a
 * launcher need not pass it on to other nodes). */
static Ranks *ranks_new(NevoComm *comm, NevoError *err, NevoStatus *st) {
    Ranks *k = nevo_alloc(sizeof *k);
    k->comm = comm;
    k->size = nevo_comm_size(comm);
    k->rank = nevo_comm_rank(comm);
    const char *fixed = getenv("NEVO_STATIC_SHARDS");
    NevoBuf flag = {0};
    nevo_buf_u32(&flag, fixed && strcmp(fixed, "1") == 0 ? 0u : 1u);
    NevoStatus bst = nevo_comm_bcast(comm, &flag, 0, err);
    if (bst && *st == NEVO_OK) *st = bst;
    k->balance = bst == NEVO_OK && flag.len == 4 && flag.data[0] == 1;
    nevo_buf_free(&flag);
    k->weight = nevo_alloc(sizeof(double) * (size_t)k->size);
    for (int r = 0; r < k->size; r++) k->weight[r] = 1.0;
    return k;
}

static void ranks_free(Ranks *k) {
    if (k) free(k->weight);
    free(k);
}

/* Rank r's tasks of n: [lo, hi) by the weights' running sums, so shards tile [0, n). */
static void share(const Ranks *k, int r, int n, int *lo, int *hi) {
    double total = 0.0, before = 0.0;
    for (int q = 0; q < k->size; q++) {
        total += k->weight[q];
        if (q < r) before += k->weight[q];
    }
    *lo = r == 0 ? 0 : (int)((double)n * (before / total) + 0.5);
    *hi = r == k->size - 1 ? n : (int)((double)n * ((before + k->weight[r]) / total) + 0.5);
    if (*hi < *lo) *hi = *lo;
}

static void shard_of(const Ranks *k, const NevoTaskSet *ts, int rank, NevoTaskSet *sub, int *lo) {
    int hi;
    share(k, rank, ts->n_tasks, lo, &hi);
    *sub = *ts;
    sub->tasks = ts->tasks + *lo;
    sub->n_tasks = hi - *lo;
}

/* All of ts evaluated, each rank its shard, every rank left with every result. */
static NevoStatus evaluate_shared(Ranks *k, const NevoTaskSet *ts, ShardFn fn, void *ctx,
                                  NevoEpisode *results, NevoObsStats *stats, NevoStates *states, NevoError *err) {
    if (!k || k->size == 1) return fn(ctx, ts, results, stats, states, err);
    NevoComm *comm = k->comm;
    int size = k->size, me = k->rank;
    NevoTaskSet sub;
    int lo;
    shard_of(k, ts, me, &sub, &lo);
    double t0 = now_s();
    NevoStatus st = sub.n_tasks ? fn(ctx, &sub, results + lo, stats ? stats + lo : NULL,
                                     states ? states + lo : NULL, err)
                                : NEVO_OK;
    k->eval_s += now_s() - t0;
    k->tasks += sub.n_tasks;
    NevoBuf body = {0}, all = {0};
    if (st == NEVO_OK)
        st = nevo_results_write(&sub, results + lo, stats ? stats + lo : NULL, states ? states + lo : NULL, &body,
                                err);
    NevoReader *parts = nevo_alloc(sizeof(NevoReader) * (size_t)size);
    NevoStatus out = nevo_comm_gather_outcomes(comm, st, body.data, body.len, &all, parts, err);
    for (int r = 0; out == NEVO_OK && r < size; r++) {
        if (r == me) continue;
        NevoTaskSet other;
        int olo;
        shard_of(k, ts, r, &other, &olo);
        /* the other shard's records as that rank's results hold them */
        for (int t = 0; stats && t < other.n_tasks; t++) nevo_obs_stats_free(&stats[olo + t]);
        for (int t = 0; states && t < other.n_tasks; t++) nevo_states_free(&states[olo + t]);
        out = nevo_results_read(&other, parts[r].data, parts[r].len, results + olo, stats ? stats + olo : NULL,
                                states ? states + olo : NULL, err);
        if (out) nevo_error_prefix(err, "results of rank %d: ", r);
    }
    /* a rank that could not read another's results must not go on alone */
    out = nevo_comm_agree(comm, out, err);
    free(parts);
    nevo_buf_free(&body);
    nevo_buf_free(&all);
    return out;
}

static NevoStatus generation_on(NevoAlgo *algo, Ranks *k, ShardFn fn, void *ctx, int records,
                                NevoGenStats *stats, NevoError *err) {
    if (nevo_algo_trains_itself(algo)) return nevo_algo_train(algo, stats, err);
    for (int done = 0; !done;) {
        const NevoTaskSet *ts = nevo_algo_ask(algo);
        NevoEpisode *results = nevo_alloc(sizeof(NevoEpisode) * (size_t)(ts->n_tasks ? ts->n_tasks : 1));
        NevoObsStats *task_stats = NULL;
        NevoStates *task_states = NULL;
        if (records) nevo_task_records_new(ts, &task_stats, &task_states);
        int n_tasks = ts->n_tasks; /* ts is the algorithm's until tell */
        NevoStatus st = evaluate_shared(k, ts, fn, ctx, results, task_stats, task_states, err);
        if (st == NEVO_OK) st = nevo_algo_tell(algo, results, task_stats, task_states, stats, &done, err);
        nevo_task_records_free(task_stats, task_states, n_tasks);
        free(results);
        if (st) return st;
    }
    return NEVO_OK;
}

NevoStatus nevo_train_generation(NevoAlgo *algo, NevoEvaluator *ev, NevoGenStats *stats, NevoError *err) {
    return generation_on(algo, NULL, shard_env, ev, 1, stats, err);
}

/* A generation on a dataset: the tasks' networks scored on their batches
 * (data.fitness_batch samples, 0 = the whole training split), or the algorithm's own. */
static NevoStatus data_generation(Run *r, NevoGenStats *stats, NevoError *err) {
    DataCtx ctx = {r};
    return generation_on(r->c.algo, r->ranks, shard_data, &ctx, 0, stats, err);
}

/* Why a run with these totals stops, NULL while it goes on: its generations, else its
 * frame budget, else its wall-time budget (each checked after a whole generation, so
 * the generations that run are those of any other run of the config). */
static const char *stop_reason(const NevoConfig *cfg, const NevoRunTotals *t) {
    if (t->generations >= cfg->generations) return "generations";
    if (cfg->max_frames > 0 && t->frames >= cfg->max_frames) return "max_frames";
    if (cfg->max_wall_s > 0 && t->wall_s >= cfg->max_wall_s) return "max_wall_s";
    return NULL;
}

static void relay_frames(void *ctx, long long frames) {
    const NevoTrainHooks *h = ctx;
    h->on_frames(h->ctx, frames);
}

static json_t *points_json(const float *p, int n, int dim) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *pt = json_array();
        for (int c = 0; c < dim; c++) json_array_append_new(pt, json_real(p[(size_t)i * dim + c]));
        json_array_append_new(arr, pt);
    }
    return arr;
}

/* behaviours.json: the last generation's behaviours and the novelty archive, for
 * `nevo plot behaviours`. */
static NevoStatus write_behaviours(const Run *r, const char *path, NevoError *err) {
    int dim = r->c.env ? nevo_env_spec(r->c.env)->bc_dim : 0, n_pop, n_arch;
    const float *pop = nevo_algo_behaviours(r->c.algo, &n_pop);
    const float *arch = nevo_algo_archive(r->c.algo, &n_arch);
    json_t *o = json_object();
    json_object_set_new(o, "env", json_string(r->cfg.env));
    json_object_set_new(o, "algo", json_string(r->cfg.algo));
    json_object_set_new(o, "generations", json_integer(nevo_algo_generations_done(r->c.algo)));
    json_object_set_new(o, "bc_dim", json_integer(dim));
    json_object_set_new(o, "population", points_json(pop, n_pop, dim));
    json_object_set_new(o, "archive", points_json(arch, n_arch, dim));
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    NevoStatus st = nevo_write_atomic(path, text, strlen(text), err);
    free(text);
    json_decref(o);
    return st;
}

static NevoStatus write_policy(const Run *r, const char *path, NevoError *err) {
    float *theta = nevo_alloc_aligned(sizeof(float) * r->c.policy->nparams);
    nevo_algo_best(r->c.algo, theta);
    NevoStatus st = nevo_policy_file_save(path, &r->cfg, r->c.policy, theta, err);
    free(theta);
    return st;
}

/* The run directory's lock: an exclusive flock on DIR/.nevo.lock, held by the process
 * that trains in it for the whole run (released when it exits, however it ends), so
 * a second `nevo train` into the same directory, resumed or not, is refused instead of
 * interleaving its files. The file stays (empty but for the holder's PID): removing
 * a lock file races with the next process opening it. */
#define RUN_LOCK_NAME ".nevo.lock"

/* create = 0 only asks whether a process holds the lock (OK when the file is missing);
 * the lock is not kept then. */
static NevoStatus lock_run_dir(const char *dir, int create, int *fd_out, NevoError *err) {
    char path[4096];
    path_in(path, sizeof path, dir, RUN_LOCK_NAME);
    *fd_out = -1;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0644);
    if (fd < 0 && !create && errno == ENOENT) return NEVO_OK;
    if (fd < 0) return nevo_error(err, NEVO_ERR_IO, "cannot lock the run directory %s: %s", dir, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char holder[32] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(fd, holder, sizeof holder - 1, 0) : -1;
        holder[n > 0 ? n : 0] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return nevo_error(err, NEVO_ERR_INVALID,
                              "%s is in use by another nevo train (pid %s); wait for it to end or choose another --out",
                              dir, holder[0] ? holder : "unknown");
        return nevo_error(err, NEVO_ERR_IO, "cannot lock the run directory %s: %s", dir, strerror(e));
    }
    if (!create) {
        close(fd);
        return NEVO_OK;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
    ssize_t w = ftruncate(fd, 0) == 0 ? pwrite(fd, pid, (size_t)n, 0) : -1;
    (void)w; /* the PID only informs the message of a process refused */
    *fd_out = fd;
    return NEVO_OK;
}

NevoStatus nevo_train_run(const NevoConfig *cfg, const char *out_dir, int resume, int threads,
                          const NevoTrainHooks *hooks, NevoTrainSummary *summary, NevoError *err) {
    return nevo_train_run_ranks(cfg, out_dir, resume, threads, hooks, NULL, summary, err);
}

/* After a generation across ranks: every rank's figures gathered, the next
 * generation's shares set from them, and comm.jsonl's line (rank 0 writes it): each
 * rank's bytes sent, seconds in collective calls, seconds evaluating, tasks evaluated,
 * seconds in the generation and node (the lowest rank on its machine; a resume may place
 * the ranks otherwise). */
static NevoStatus ranks_after_generation(Ranks *k, const char *path, int generation, double gen_s, NevoError *err) {
    NevoCommStats cs;
    nevo_comm_stats(k->comm, &cs);
    enum { F = 6 };
    double mine[F] = {(double)cs.bytes_sent, cs.seconds, k->eval_s, (double)k->tasks, gen_s,
                      (double)nevo_comm_node_first(k->comm)};
    NevoBuf all = {0};
    NevoStatus st = nevo_comm_allgather(k->comm, mine, sizeof mine, &all, NULL, err);
    int n = k->size;
    double *v = nevo_alloc(sizeof mine * (size_t)n);
    if (st == NEVO_OK) memcpy(v, all.data, sizeof mine * (size_t)n);
    for (int r = 0; st == NEVO_OK && k->balance && r < n; r++) /* tasks per second, where measured */
        if (v[r * F + 3] > 0 && v[r * F + 2] > 0) k->weight[r] = v[r * F + 3] / v[r * F + 2];
    /* no rank's share falls below a tenth of the mean: one slow generation (a rank
     * descheduled once) must not leave it without tasks, and so unmeasured, for good */
    double mean = 0.0;
    for (int r = 0; r < n; r++) mean += k->weight[r] / n;
    for (int r = 0; r < n; r++)
        if (k->weight[r] < 0.1 * mean) k->weight[r] = 0.1 * mean;
    k->eval_s = 0;
    k->tasks = 0;
    if (st == NEVO_OK && k->rank == 0) {
        NevoBuf line = {0};
        char part[160];
        static const char *const keys[F] = {"bytes_sent", "comm_s", "eval_s", "tasks", "generation_s", "node"};
        snprintf(part, sizeof part, "{\"generation\": %d, \"ranks\": %d", generation, n);
        nevo_buf_put(&line, part, strlen(part));
        for (int f = 0; f < F; f++) {
            snprintf(part, sizeof part, ", \"%s\": [", keys[f]);
            nevo_buf_put(&line, part, strlen(part));
            for (int r = 0; r < n; r++) {
                int whole = f == 0 || f == 3 || f == 5; /* bytes, tasks, node */
                snprintf(part, sizeof part, whole ? "%s%.0f" : "%s%.6f", r ? ", " : "", v[r * F + f]);
                nevo_buf_put(&line, part, strlen(part));
            }
            nevo_buf_put(&line, "]", 1);
        }
        nevo_buf_put(&line, "}\n", 3);
        st = append_line(path, (const char *)line.data, err);
        nevo_buf_free(&line);
    }
    free(v);
    nevo_buf_free(&all);
    return st;
}

NevoStatus nevo_train_run_ranks(const NevoConfig *cfg, const char *out_dir, int resume, int threads,
                                const NevoTrainHooks *hooks, NevoComm *comm, NevoTrainSummary *summary,
                                NevoError *err) {
    memset(summary, 0, sizeof *summary);
    NevoComm *self = comm ? NULL : nevo_comm_self();
    if (!comm) comm = self;
    int root = nevo_comm_rank(comm) == 0, ranks = nevo_comm_size(comm);
    if (!root) hooks = NULL; /* progress is rank 0's to show */
    char ckpt_path[4096], metrics_path[4096], config_path[4096], policy_path[4096], summary_path[4096];
    char bc_path[4096], comm_path[4096];
    path_in(comm_path, sizeof comm_path, out_dir, "comm.jsonl");
    path_in(bc_path, sizeof bc_path, out_dir, "behaviours.json");
    path_in(ckpt_path, sizeof ckpt_path, out_dir, "checkpoint.bin");
    path_in(metrics_path, sizeof metrics_path, out_dir, "metrics.jsonl");
    path_in(config_path, sizeof config_path, out_dir, "config.json");
    path_in(policy_path, sizeof policy_path, out_dir, "policy.nevo");
    path_in(summary_path, sizeof summary_path, out_dir, "summary.json");

    Run run;
    NevoStatus st = run_build(&run, cfg, threads, comm, err);
    run.comm = comm;
    run.ranks = ranks > 1 ? ranks_new(comm, err, &st) : NULL;
    int gradient = st == NEVO_OK && nevo_algo_trains_itself(run.c.algo);
    if (st == NEVO_OK && ranks > 1 && gradient && !nevo_algo_replicates(run.c.algo))
        st = nevo_error(err, NEVO_ERR_INVALID, "algo %s trains in one process only; run it on one rank", cfg->algo);
    int shards = (cfg->data.batch + NEVO_SUP_SHARD - 1) / NEVO_SUP_SHARD;
    if (st == NEVO_OK && gradient && ranks > shards)
        st = nevo_error(err, NEVO_ERR_INVALID, "%d ranks exceed the %d shards of %d samples a batch of data.batch=%d "
                        "is cut into (each rank computes some of them); run at most %d ranks", ranks, shards,
                        NEVO_SUP_SHARD, cfg->data.batch, shards);
    if (st == NEVO_OK && gradient && ranks > 1) nevo_algo_set_comm(run.c.algo, comm);
    if (st == NEVO_OK && !gradient && ranks > cfg->population)
        st = nevo_error(err, NEVO_ERR_INVALID, "%d ranks exceed the population (%d): each rank evaluates a shard of "
                        "a generation; run at most %d ranks", ranks, cfg->population, cfg->population);
    st = nevo_comm_agree(comm, st, err);
    NevoRunTotals totals = {0};
    totals.best_fitness = -INFINITY;
    int lock_fd = -1;
    /* Nothing has been written up to here: bad input leaves no trace. A run directory
     * is locked before anything in it is read for the run or written. A fresh run
     * refuses a directory that holds a run (checkpoint.bin): before creating anything,
     * saying whether a process still runs there, and again under the lock (a run that
     * held it may have finished meanwhile). */
    for (int pass = 0; pass < 2 && st == NEVO_OK && !resume && root; pass++) {
        if (access(ckpt_path, F_OK) == 0) {
            int probe;
            if (pass == 0) st = lock_run_dir(out_dir, 0, &probe, err);
            if (st == NEVO_OK)
                st = nevo_error(err, NEVO_ERR_INVALID,
                                "%s already holds a run (checkpoint.bin); continue it with --resume %s or "
                                "choose another --out", out_dir, out_dir);
        } else if (pass == 0 && (st = make_dirs(out_dir, err)) == NEVO_OK) {
            st = lock_run_dir(out_dir, 1, &lock_fd, err);
        }
    }
    if (st == NEVO_OK && resume && root && access(ckpt_path, F_OK) == 0)
        st = lock_run_dir(out_dir, 1, &lock_fd, err);
    if (ranks > 1) st = nevo_comm_agree(comm, st, err);
    if (st == NEVO_OK && resume) {
        /* rank 0 reads the checkpoint, every rank restores it from those bytes */
        NevoBuf file = {0};
        uint8_t *data = NULL;
        size_t n = 0;
        if (root) st = nevo_read_all(ckpt_path, &data, &n, err);
        if (root && st == NEVO_OK) nevo_buf_put(&file, data, n);
        free(data);
        if (ranks > 1) st = nevo_comm_agree(comm, st, err);
        if (st == NEVO_OK) st = nevo_comm_bcast(comm, &file, 0, err);
        NevoConfig stored;
        uint8_t *state = NULL;
        size_t state_len;
        if (st == NEVO_OK)
            st = nevo_checkpoint_parse(file.data, file.len, ckpt_path, &stored, &totals, &state, &state_len, err);
        nevo_buf_free(&file);
        if (st == NEVO_OK) {
            st = nevo_checkpoint_restore(ckpt_path, run.c.algo, state, state_len, err);
            free(state);
        }
        if (st == NEVO_OK) st = nevo_checkpoint_verify(ckpt_path, &totals, run.c.algo, run.c.policy, err);
        if (ranks > 1) st = nevo_comm_agree(comm, st, err);
    }
    /* what killed runs left: temporary files of the run's files whose writes were cut
     * before their rename (other files in the directory are not the run's to judge) */
    static const char *const run_files[] = {"checkpoint.bin", "policy.nevo",     "metrics.jsonl", "config.json",
                                            "summary.json",   "behaviours.json", "comm.jsonl"};
    for (size_t i = 0; st == NEVO_OK && root && i < sizeof run_files / sizeof run_files[0]; i++)
        nevo_remove_stale_temps(out_dir, run_files[i]);
    if (st == NEVO_OK && root) {
        char *json = nevo_config_to_json(&run.cfg);
        size_t len = strlen(json);
        json[len] = '\0';
        NevoBuf b = {0};
        nevo_buf_put(&b, json, len);
        nevo_buf_put(&b, "\n", 1);
        st = nevo_write_atomic(config_path, b.data, b.len, err);
        nevo_buf_free(&b);
        free(json);
    }
    if (st == NEVO_OK && root && resume) st = trim_metrics(metrics_path, totals.generations, err);
    if (st == NEVO_OK && root && resume) st = trim_metrics(comm_path, totals.generations, err); /* any rank count */
    if (st == NEVO_OK && root && !resume) st = nevo_write_atomic(metrics_path, "", 0, err);
    if (st == NEVO_OK && root && !resume && ranks > 1) st = nevo_write_atomic(comm_path, "", 0, err);
    if (ranks > 1) st = nevo_comm_agree(comm, st, err);
    if (st) {
        run_free(&run);
        if (lock_fd >= 0) close(lock_fd);
        nevo_comm_free(self);
        return st;
    }
    if (hooks && hooks->on_start) hooks->on_start(hooks->ctx, &run.cfg, resume ? &totals : NULL);
    if (hooks && hooks->on_backend && run.c.backend) {
        char where[256];
        nevo_backend_describe(run.c.backend, where, sizeof where);
        hooks->on_backend(hooks->ctx, where);
    }
    if (hooks && hooks->on_frames && run.c.ev) nevo_evaluator_set_progress(run.c.ev, relay_frames, (void *)hooks);

    /* wall_s goes on from the checkpoint's total: a wall-time budget covers the run's
     * every part, not each resume */
    double t_start = now_s() - totals.wall_s;
    totals.generations = nevo_algo_generations_done(run.c.algo);
    /* a finished run resumed runs no generation: its policy is written again from the
     * checkpoint, so policy.nevo matches it and the summary whatever came before */
    const char *stopped = stop_reason(&run.cfg, &totals);
    if (resume && stopped && root) st = write_policy(&run, policy_path, err);
    if (ranks > 1) st = nevo_comm_agree(comm, st, err);
    while (st == NEVO_OK && !stopped) {
        NevoGenStats gs;
        double g0 = now_s();
        nevo_comm_reset_stats(comm);
        st = run.d.data ? data_generation(&run, &gs, err)
                      : generation_on(run.c.algo, run.ranks, shard_env, run.c.ev, 1, &gs, err);
        if (st == NEVO_OK && run.d.data) {
            double epoch_loss = -gs.mean;
            gs.on_data = 1;
            st = nevo_run_data_scores(&run.c, &run.d, nevo_algo_trains_itself(run.c.algo) ? &epoch_loss : NULL,
                                      &gs.data, err);
        }
        if (st) break;
        totals.generations = nevo_algo_generations_done(run.c.algo);
        totals.frames += gs.frames;
        totals.episodes += gs.episodes;
        totals.wall_s = now_s() - t_start;
        if (ranks > 1) { /* rank 0's clock: every rank stops after the same generation */
            NevoBuf w = {0};
            nevo_buf_f64(&w, totals.wall_s);
            st = nevo_comm_bcast(comm, &w, 0, err);
            if (st == NEVO_OK) memcpy(&totals.wall_s, w.data, sizeof totals.wall_s);
            nevo_buf_free(&w);
            if (st) break;
        }
        if (gs.best > totals.best_fitness) totals.best_fitness = gs.best;
        char line[1024], extra[512] = "";
        size_t used = 0;
        if (nevo_algo_find(run.cfg.algo)->flags & NEVO_ALGO_NOVELTY)
            used += (size_t)snprintf(extra, sizeof extra,
                                     ", \"archive_size\": %d, \"novelty_mean\": %.17g, \"reward_weight\": %.17g",
                                     gs.archive_size, gs.novelty_mean, gs.reward_weight);
        if (gs.has_grad_cosine)
            used += isfinite(gs.grad_cosine)
                        ? (size_t)snprintf(extra + used, sizeof extra - used, ", \"grad_cosine\": %.17g", gs.grad_cosine)
                        : (size_t)snprintf(extra + used, sizeof extra - used, ", \"grad_cosine\": null");
        if (gs.has_rl)
            used += (size_t)snprintf(extra + used, sizeof extra - used,
                                     ", \"updates\": %lld, \"frames_per_s\": %.1f, \"updates_per_s\": %.3f, "
                                     "\"inference_batch\": %.2f, \"queue\": %.2f, \"policy_lag\": %.3f, \"lr\": %.9g",
                                     gs.rl_updates, gs.rl_frames_per_s, gs.rl_updates_per_s, gs.rl_batch, gs.rl_queue,
                                     gs.rl_lag, gs.rl_lr);
        if (gs.has_replay)
            used += (size_t)snprintf(extra + used, sizeof extra - used, ", \"replay\": %d, \"td_loss\": %.9g",
                                     gs.rl_replay, gs.rl_loss);
        if (gs.on_data)
            used += (size_t)snprintf(extra + used, sizeof extra - used,
                                     ", \"train_loss\": %.17g, \"test_loss\": %.17g, \"test_accuracy\": %.17g",
                                     gs.data.train_loss, gs.data.test_loss, gs.data.test_accuracy);
        for (int d = 0; d < gs.bc_dim && used < sizeof extra; d++) /* at most 8 x 18 characters */
            used += (size_t)snprintf(extra + used, sizeof extra - used, "%s%.9g%s", d ? ", " : ", \"behaviour\": [",
                                     (double)gs.bc[d], d == gs.bc_dim - 1 ? "]" : "");
        snprintf(line, sizeof line,
                 "{\"generation\": %d, \"frames\": %lld, \"episodes\": %lld, \"wall_s\": %.3f, "
                 "\"best_fitness\": %.17g, \"mean_fitness\": %.17g, \"median_fitness\": %.17g, "
                 "\"elite_validation_mean\": %.17g, \"generation_frames\": %lld%s}\n",
                 gs.generation, totals.frames, totals.episodes, totals.wall_s, gs.best, gs.mean,
                 gs.median, gs.elite_mean, gs.frames, extra);
        if (root) st = append_line(metrics_path, line, err);
        stopped = stop_reason(&run.cfg, &totals);
        int last = stopped != NULL;
        /* behaviours.json before the last checkpoint: a run killed in between redoes
         * the last generation on resume and writes the same file again */
        if (st == NEVO_OK && root && last && run.c.env && nevo_env_spec(run.c.env)->bc_dim > 0)
            st = write_behaviours(&run, bc_path, err);
        /* the policy before the checkpoint of its generation: a run stopped between the
         * two (killed, out of disk space) resumes from the checkpoint before, redoes the
         * generation and writes the same policy again, so policy.nevo never lags the
         * checkpoint */
        if (st == NEVO_OK && root && (last || totals.generations % run.cfg.checkpoint_every == 0)) {
            st = write_policy(&run, policy_path, err);
            if (st == NEVO_OK) st = nevo_checkpoint_save(ckpt_path, &run.cfg, &totals, run.c.algo, err);
        }
        if (ranks > 1) st = nevo_comm_agree(comm, st, err);
        if (st == NEVO_OK && ranks > 1) st = ranks_after_generation(run.ranks, comm_path, gs.generation, now_s() - g0, err);
        if (ranks > 1) st = nevo_comm_agree(comm, st, err);
        if (st) break;
        if (hooks && hooks->on_generation) hooks->on_generation(hooks->ctx, &gs, &totals, &run.cfg);
    }
    if (st == NEVO_OK && run.d.data) {
        summary->on_data = 1; /* the final policy's scores, its training loss over the split */
        st = nevo_run_data_scores(&run.c, &run.d, NULL, &summary->data, err);
    } else if (st == NEVO_OK && root) { /* rank 0 alone: the others wait at the agreement below */
        float *theta = nevo_alloc_aligned(sizeof(float) * run.c.policy->nparams);
        nevo_algo_best(run.c.algo, theta);
        st = nevo_eval_params(run.eval_env, run.c.policy, theta, run.c.pool, run.cfg.eval_episodes,
                              run.cfg.seed, &summary->eval, err);
        free(theta);
    }
    if (ranks > 1) st = nevo_comm_agree(comm, st, err);
    if (st == NEVO_OK) {
        summary->totals = totals;
        snprintf(summary->stopped, sizeof summary->stopped, "%s", stopped ? stopped : "");
        snprintf(summary->policy_path, sizeof summary->policy_path, "%s", policy_path);
        char text[2048];
        int n = run.d.data ? snprintf(text, sizeof text,
                                    "{\"generations\": %d, \"samples\": %lld, \"wall_s\": %.3f, "
                                    "\"best_fitness\": %.17g, \"train_loss\": %.17g, \"test_loss\": %.17g, "
                                    "\"test_accuracy\": %.17g, \"stopped\": \"%s\"}\n",
                                    totals.generations, totals.frames, totals.wall_s, totals.best_fitness,
                                    summary->data.train_loss, summary->data.test_loss, summary->data.test_accuracy,
                                    summary->stopped)
                         : snprintf(text, sizeof text,
                         "{\"generations\": %d, \"frames\": %lld, \"episodes\": %lld, \"wall_s\": %.3f, "
                         "\"best_fitness\": %.17g, \"eval_episodes\": %d, \"eval_return_mean\": %.17g, "
                         "\"eval_return_std\": %.17g, \"eval_length_mean\": %.17g, \"stopped\": \"%s\"}\n",
                         totals.generations, totals.frames, totals.episodes, totals.wall_s,
                         totals.best_fitness, summary->eval.episodes, summary->eval.return_mean,
                         summary->eval.return_std, summary->eval.length_mean, summary->stopped);
        if (root) st = nevo_write_atomic(summary_path, text, (size_t)n, err);
    }
    if (ranks > 1) st = nevo_comm_agree(comm, st, err);
    run_free(&run);
    if (lock_fd >= 0) close(lock_fd); /* the run directory's lock */
    nevo_comm_free(self);
    return st;
}
