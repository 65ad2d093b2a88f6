/* Population evaluator: episode slots refilled from a shared task queue, batched
 * heterogeneous policy forward over the live slots.
 *
 * Fused mode (pipeline depth 1): each worker owns one batch of slots and alternates
 * forward and env steps on it, so every thread is busy until the queue runs dry.
 * Pipelined mode (depth D >= 2): the slots form D batches handed between roles:
 * thread 0 runs the forward of one batch while the other threads step the envs of
 * the others, as Uber's GPU engine overlaps inference on the GPU with env stepping on
 * the CPU. A batch moves FILL -> FORWARD -> STEP -> FORWARD ... -> DONE; its state is
 * an atomic whose release/acquire hands the batch's memory to the next thread. */
#include "nevo/eval.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/kernels.h"

/* A batch of episode slots and the buffers of its forward pass. */
typedef struct Batch {
    uint8_t *insts;   /* (slots, instance_size) */
    float *obs;       /* (slots, obs_dim) observations of the live slots, compacted */
    float *out;       /* (slots, n_out) */
    float *actions;   /* (slots, action_dim) */
    int *net;         /* (slots) network row of each live slot (built: its row of theta) */
    int *row;         /* (slots) built mode: the row of theta each slot owns, a
                         permutation of 0..slots-1 that compaction swaps */
    float *theta;     /* built mode: (slots, theta_stride), allocated at first use */
    int *task;        /* (slots) task index of each live slot */
    float *scratch;   /* policy scratch */
    int live;         /* live slots (pipelined mode) */
    int held;         /* a task claimed with the one before it (NEVO_TASK_WITH_NEXT),
                         to start next, or -1 */
    atomic_int state; /* pipelined mode: one of the B_ states */
} Batch;

enum { B_FILL, B_FORWARD, B_STEP, B_DONE, B_BUSY };

typedef struct Clock {
    double forward_s, env_s; /* with timing on: thread-seconds in forward and env */
    double build_s;          /* and in building parameters (built mode) */
    char pad[40];            /* one cache line per thread */
} Clock;

struct NevoEvaluator {
    const NevoEnv *env;
    const NevoPolicy *policy;
    NevoPool *pool;
    int slots, depth;
    int slots_asked; /* the caller's slot count, 0 = the default (default_slots) */
    size_t inst_size;
    Batch *batches;   /* one per worker (fused) or depth of them (pipelined) */
    int n_batches;
    Clock *clocks;    /* (threads) */
    NevoProgressFn progress;
    void *progress_ctx;
    int timing;
    double wall_s;
    long long timed_frames;
    int calls;
    /* the current call */
    const float *params;
    size_t stride;
    NevoBuildFn build; /* built mode: each episode's parameters built as it starts */
    void *build_ctx;
    const NevoTask *tasks;
    NevoEpisode *results;
    NevoObsStats *task_stats;
    int n_tasks;
    atomic_int next_task;
    atomic_llong frames;
    atomic_int failed;
    atomic_int batches_done;
    /* pipelined mode: a thread with nothing to take sleeps until a batch changes state */
    atomic_uint version;      /* incremented at every state change */
    atomic_int sleepers;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    NevoError first_error;
};

static void batch_alloc(Batch *b, const NevoEnvSpec *spec, const NevoPolicy *policy, size_t inst_size, int S) {
    memset(b, 0, sizeof *b);
    b->insts = nevo_alloc_aligned(inst_size * (size_t)S);
    b->obs = nevo_alloc_aligned(sizeof(float) * (size_t)S * spec->obs_dim);
    b->out = nevo_alloc_aligned(sizeof(float) * (size_t)S * policy->n_out);
    b->actions = nevo_alloc_aligned(sizeof(float) * (size_t)S * spec->action_dim);
    b->net = nevo_alloc(sizeof(int) * (size_t)S);
    b->task = nevo_alloc(sizeof(int) * (size_t)S);
    b->row = nevo_alloc(sizeof(int) * (size_t)S);
    for (int s = 0; s < S; s++) b->row[s] = s;
    b->scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(policy, S));
}

static void batches_free(NevoEvaluator *ev) {
    for (int i = 0; i < ev->n_batches; i++) {
        Batch *b = &ev->batches[i];
        for (int s = 0; s < ev->slots; s++) nevo_env_instance_free(ev->env, b->insts + (size_t)s * ev->inst_size);
        free(b->insts);
        free(b->obs);
        free(b->out);
        free(b->actions);
        free(b->net);
        free(b->task);
        free(b->row);
        free(b->theta);
        free(b->scratch);
    }
    free(ev->batches);
    ev->batches = NULL;
    ev->n_batches = 0;
}

static void batches_make(NevoEvaluator *ev, int n) {
    batches_free(ev);
    ev->batches = nevo_alloc(sizeof(Batch) * (size_t)n);
    for (int i = 0; i < n; i++)
        batch_alloc(&ev->batches[i], nevo_env_spec(ev->env), ev->policy, ev->inst_size, ev->slots);
    ev->n_batches = n;
}

/* Slots per worker when the caller leaves it open. With one episode per network (the GA
 * and ES), each step of an episode reads its network's weights again, and between two
 * steps of one episode the worker reads the other slots' networks: with as many slots
 * as fit in half the L2 cache (at least 1), most of what a step reads is still cached
 * from that network's previous step rather than in memory. In built mode
 * (nevo_evaluate_built) the slot's network is also written there as the episode
 * starts, and streaming the next child's parent and noise through the cache evicts
 * the other slots' networks. Measured with the MinAtar net (530 KB), GA on Breakout in
 * built mode on an Intel Xeon (2 MiB L2), 1 thread: from scratch 107-118k frames/s
 * with 1 slot, 102k with 2, 95-101k with 3, 87-90k with 4, 61k with 8; from generation
 * 200, 190k with 1, 165-169k with 2 and 3 (2 threads: 355-367k with 1, 324-326k with
 * 2). (Before built mode, on an AMD EPYC with 1 MiB L2: 118-149k with 16, 165-175k with
 * 4, 176-182k with 2, 172-176k with 1.) Small networks keep 16, which amortises the
 * per-call costs and lets single rows go side by side (dense_nets). Results do not
 * depend on the slot count. */
#define DEFAULT_SLOTS 16
#define MIN_DEFAULT_SLOTS 1

static int default_slots(const NevoPolicy *p) {
    size_t fit = nevo_cache_l2_bytes() / (2 * sizeof(float) * p->nparams);
    return fit >= DEFAULT_SLOTS ? DEFAULT_SLOTS : fit < MIN_DEFAULT_SLOTS ? MIN_DEFAULT_SLOTS : (int)fit;
}

NevoEvaluator *nevo_evaluator_new(const NevoEnv *env, const NevoPolicy *policy, NevoPool *pool,
                                  int slots) {
    NevoEvaluator *ev = nevo_alloc(sizeof *ev);
    ev->env = env;
    ev->policy = policy;
    ev->pool = pool;
    ev->slots_asked = slots > 0 ? slots : 0;
    ev->slots = slots > 0 ? slots : default_slots(policy);
    ev->depth = 1;
    ev->inst_size = nevo_env_instance_size(env);
    pthread_mutex_init(&ev->mu, NULL);
    pthread_cond_init(&ev->changed, NULL);
    ev->clocks = nevo_alloc_aligned(sizeof(Clock) * (size_t)nevo_pool_threads(pool));
    memset(ev->clocks, 0, sizeof(Clock) * (size_t)nevo_pool_threads(pool));
    batches_make(ev, nevo_pool_threads(pool));
    return ev;
}

void nevo_evaluator_set_pipeline(NevoEvaluator *ev, int depth) {
    NEVO_ASSERT(depth >= 1);
    if (depth == ev->depth) return;
    ev->depth = depth;
    /* pipelined batches are handed between threads, one hand-off per batch and stage:
     * the default keeps them at DEFAULT_SLOTS, which amortises that (batches of 2 ran
     * the MinAtar GA at 0.31-0.39 of the fused layout, against 0.39-0.62 with 16) */
    batches_free(ev); /* with the slot count they were made with */
    if (!ev->slots_asked) ev->slots = depth == 1 ? default_slots(ev->policy) : DEFAULT_SLOTS;
    batches_make(ev, depth == 1 ? nevo_pool_threads(ev->pool) : depth);
}

void nevo_evaluator_free(NevoEvaluator *ev) {
    if (!ev) return;
    batches_free(ev);
    free(ev->clocks);
    pthread_mutex_destroy(&ev->mu);
    pthread_cond_destroy(&ev->changed);
    free(ev);
}

NevoPool *nevo_evaluator_pool(const NevoEvaluator *ev) { return ev->pool; }

int nevo_evaluator_slots(const NevoEvaluator *ev) { return ev->slots; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void nevo_evaluator_set_timing(NevoEvaluator *ev, int on) {
    ev->timing = on;
    ev->wall_s = 0.0;
    ev->timed_frames = 0;
    ev->calls = 0;
    for (int w = 0; w < nevo_pool_threads(ev->pool); w++)
        ev->clocks[w].forward_s = ev->clocks[w].env_s = ev->clocks[w].build_s = 0.0;
}

void nevo_evaluator_times(const NevoEvaluator *ev, NevoEvalTimes *out) {
    memset(out, 0, sizeof *out);
    out->threads = nevo_pool_threads(ev->pool);
    out->wall_s = ev->wall_s;
    out->frames = ev->timed_frames;
    out->calls = ev->calls;
    for (int w = 0; w < out->threads; w++) {
        out->forward_s += ev->clocks[w].forward_s;
        out->env_s += ev->clocks[w].env_s;
        out->build_s += ev->clocks[w].build_s;
    }
}

void nevo_evaluator_set_progress(NevoEvaluator *ev, NevoProgressFn fn, void *ctx) {
    ev->progress = fn;
    ev->progress_ctx = ctx;
}

/* Swaps two instances: moving the last live slot into a finished one must keep each
 * instance's resources (an mjData) owned by exactly one slot, so the finished
 * instance goes to the tail rather than being overwritten and leaked. */
static void swap_bytes(uint8_t *a, uint8_t *b, size_t n) {
    uint8_t tmp[256];
    for (size_t off = 0; off < n; off += sizeof tmp) {
        size_t k = n - off < sizeof tmp ? n - off : sizeof tmp;
        memcpy(tmp, a + off, k);
        memcpy(a + off, b + off, k);
        memcpy(b + off, tmp, k);
    }
}

static int all_finite(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void fail(NevoEvaluator *ev, const char *fmt, int task, int step) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&ev->failed, &expected, 1)) {
        const NevoTask *t = &ev->tasks[task];
        nevo_error(&ev->first_error, NEVO_ERR_NUMERIC, fmt, nevo_env_spec(ev->env)->name, t->net,
                   (unsigned long long)t->seed, step);
    }
}

/* Floats from one row of a batch's theta to the next (built mode): nparams rounded up to
 * a 64-byte line, so every row starts on a line, as NevoBuildFn promises. */
static size_t theta_stride(const NevoPolicy *p) { return (p->nparams + 15) & ~(size_t)15; }

/* Starts task t in slot s (in built mode, first building its parameters into the
 * slot's row of theta); returns 0 if the first observation is not finite. */
static int start(NevoEvaluator *ev, Batch *bt, Clock *clk, int s, int t) {
    const NevoEnvSpec *spec = nevo_env_spec(ev->env);
    const NevoTask *task = &ev->tasks[t];
    float *obs = bt->obs + (size_t)s * spec->obs_dim;
    void *inst = bt->insts + (size_t)s * ev->inst_size;
    nevo_env_forget(ev->env, inst); /* the episode depends on its seed alone */
    nevo_env_reset(ev->env, inst, task->seed, obs);
    if (ev->build) {
        double t0 = ev->timing ? now_s() : 0.0;
        ev->build(ev->build_ctx, task->net, bt->theta + (size_t)bt->row[s] * theta_stride(ev->policy));
        if (ev->timing) clk->build_s += now_s() - t0;
        bt->net[s] = bt->row[s];
    } else {
        bt->net[s] = task->net;
    }
    bt->task[s] = t;
    NevoEpisode *r = &ev->results[t];
    memset(r, 0, sizeof *r);
    if (!all_finite(obs, spec->obs_dim)) {
        fail(ev, "%s returned a non-finite observation at reset (network %d, seed %llu, step %d)", t, 0);
        return 0;
    }
    if (task->flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_add(&ev->task_stats[t], obs);
    return 1;
}

/* The batch's next task: the one it holds, else the queue's next, taken together with
 * the one after it where that is flagged NEVO_TASK_WITH_NEXT (the second is held);
 * n_tasks when the queue is empty. */
static int take_task(NevoEvaluator *ev, Batch *bt) {
    if (bt->held >= 0) {
        int t = bt->held;
        bt->held = -1;
        return t;
    }
    int t = atomic_load_explicit(&ev->next_task, memory_order_relaxed);
    for (;;) {
        if (t >= ev->n_tasks) return ev->n_tasks;
        int k = (ev->tasks[t].flags & NEVO_TASK_WITH_NEXT) && t + 1 < ev->n_tasks ? 2 : 1;
        if (atomic_compare_exchange_weak(&ev->next_task, &t, t + k)) {
            if (k == 2) bt->held = t + 1;
            return t;
        }
    }
}

/* Fills the batch's slots from the queue; returns the live count, or -1 on failure. */
static int fill(NevoEvaluator *ev, Batch *bt, Clock *clk) {
    int live = 0;
    while (live < ev->slots) {
        int t = take_task(ev, bt);
        if (t >= ev->n_tasks) break;
        if (!start(ev, bt, clk, live, t)) return -1;
        live++;
    }
    return live;
}

/* The batched forward of the live slots and their actions; returns 0 on failure. */
static int infer(NevoEvaluator *ev, Batch *bt, int live) {
    const NevoPolicy *pol = ev->policy;
    if (ev->build)
        nevo_policy_forward(pol, bt->theta, theta_stride(pol), bt->net, bt->obs, live, bt->out, bt->scratch);
    else
        nevo_policy_forward(pol, ev->params, ev->stride, bt->net, bt->obs, live, bt->out, bt->scratch);
    if (!all_finite(bt->out, live * pol->n_out)) {
        for (int s = 0; s < live; s++)
            if (!all_finite(bt->out + (size_t)s * pol->n_out, pol->n_out)) {
                fail(ev, "the policy produced a non-finite output on %s (network %d, seed %llu, step %d); "
                     "lower the step size or mutation power",
                     bt->task[s], ev->results[bt->task[s]].length);
                return 0;
            }
    }
    nevo_policy_actions(pol, bt->out, live, bt->actions);
    return 1;
}

/* Steps every live slot once; a finished episode's slot takes the next task or the
 * last live slot. Returns the new live count, or -1 on failure. */
static int step_all(NevoEvaluator *ev, Batch *bt, Clock *clk, int live) {
    const NevoEnvSpec *spec = nevo_env_spec(ev->env);
    int odim = spec->obs_dim, adim = spec->action_dim;
    long long local_frames = 0;
    for (int s = 0; s < live;) {
        int t = bt->task[s];
        NevoEpisode *r = &ev->results[t];
        uint8_t *inst = bt->insts + (size_t)s * ev->inst_size;
        float *obs = bt->obs + (size_t)s * odim;
        NevoStepResult sr;
        nevo_env_step(ev->env, inst, bt->actions + (size_t)s * adim, obs, &sr);
        r->ret += sr.reward;
        r->length++;
        local_frames++;
        if (!isfinite(sr.reward) || !all_finite(obs, odim)) {
            fail(ev, "%s returned a non-finite observation or reward (network %d, seed %llu, step %d)", t,
                 r->length);
            return -1;
        }
        if (!sr.terminated && !sr.truncated) {
            if (ev->tasks[t].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_add(&ev->task_stats[t], obs);
            s++;
            continue;
        }
        r->terminated = sr.terminated;
        nevo_env_bc(ev->env, inst, obs, r->bc);
        long long done = atomic_fetch_add(&ev->frames, local_frames) + local_frames;
        local_frames = 0;
        if (ev->progress) ev->progress(ev->progress_ctx, done);
        /* refill this slot from the queue, or move the last live slot into it */
        int next = take_task(ev, bt);
        if (next < ev->n_tasks) {
            if (!start(ev, bt, clk, s, next)) return -1;
            s++;
        } else {
            live--;
            if (s != live) {
                swap_bytes(inst, bt->insts + (size_t)live * ev->inst_size, ev->inst_size);
                memcpy(obs, bt->obs + (size_t)live * odim, sizeof(float) * (size_t)odim);
                memcpy(bt->actions + (size_t)s * adim, bt->actions + (size_t)live * adim, sizeof(float) * (size_t)adim);
                bt->net[s] = bt->net[live];
                bt->task[s] = bt->task[live];
                int freed = bt->row[s]; /* the finished slot's row goes to the tail */
                bt->row[s] = bt->row[live];
                bt->row[live] = freed;
            }
        }
    }
    atomic_fetch_add(&ev->frames, local_frames);
    return live;
}

static int failed(NevoEvaluator *ev) { return atomic_load_explicit(&ev->failed, memory_order_relaxed); }

/* Fused mode: worker w alternates forward and env steps on its own batch. */
static void run_fused(void *ctx, int item, int worker) {
    NevoEvaluator *ev = ctx;
    Batch *bt = &ev->batches[worker];
    Clock *clk = &ev->clocks[worker];
    (void)item;
    int live = fill(ev, bt, clk);
    const int timing = ev->timing;
    double t0 = timing ? now_s() : 0.0, t1 = 0.0;
    while (live > 0 && !failed(ev)) {
        if (!infer(ev, bt, live)) return;
        if (timing) {
            t1 = now_s();
            clk->forward_s += t1 - t0;
        }
        double built = clk->build_s;
        live = step_all(ev, bt, clk, live);
        if (timing) { /* resets of refilled slots count as env time, their builds not */
            t0 = now_s();
            clk->env_s += t0 - t1 - (clk->build_s - built);
        }
    }
}

/* Hands batch bt on in state `next` and wakes the threads waiting for a change. The
 * version is bumped before sleepers is read, and a sleeper counts itself before it
 * re-reads the version (both sequentially consistent), so no wake-up is lost. */
static void publish(NevoEvaluator *ev, Batch *bt, int next) {
    if (next == B_DONE) atomic_fetch_add(&ev->batches_done, 1);
    atomic_store_explicit(&bt->state, next, memory_order_release);
    atomic_fetch_add(&ev->version, 1);
    if (atomic_load(&ev->sleepers) > 0) {
        pthread_mutex_lock(&ev->mu);
        pthread_cond_broadcast(&ev->changed);
        pthread_mutex_unlock(&ev->mu);
    }
}

/* Waits until some batch changed state after the version `seen`: a short spin (a
 * hand-off usually comes within microseconds), then sleep, so waiting threads do not
 * take the CPU from the ones working when the machine has fewer cores than threads. */
static void wait_change(NevoEvaluator *ev, unsigned seen) {
    for (int i = 0; i < 2000; i++)
        if (atomic_load(&ev->version) != seen) return;
    pthread_mutex_lock(&ev->mu);
    atomic_fetch_add(&ev->sleepers, 1);
    while (atomic_load(&ev->version) == seen) pthread_cond_wait(&ev->changed, &ev->mu);
    atomic_fetch_sub(&ev->sleepers, 1);
    pthread_mutex_unlock(&ev->mu);
}

/* Pipelined mode: thread 0 takes batches waiting for their forward, the others take
 * batches waiting to be filled or stepped (with one thread, it does both); the call
 * ends when every batch is done or one failed. */
static void run_pipelined(void *ctx, int item, int worker) {
    NevoEvaluator *ev = ctx;
    Clock *clk = &ev->clocks[worker];
    (void)item;
    int threads = nevo_pool_threads(ev->pool);
    int does_forward = worker == 0, does_env = worker > 0 || threads == 1;
    const int timing = ev->timing;
    int i = 0;
    while (atomic_load(&ev->batches_done) < ev->n_batches && !failed(ev)) {
        unsigned seen = atomic_load(&ev->version);
        int claimed = 0;
        for (int k = 0; k < ev->n_batches && !claimed; k++, i = (i + 1) % ev->n_batches) {
            Batch *bt = &ev->batches[i];
            int st = atomic_load_explicit(&bt->state, memory_order_acquire);
            int mine = (does_forward && st == B_FORWARD) || (does_env && (st == B_FILL || st == B_STEP));
            if (!mine || !atomic_compare_exchange_strong(&bt->state, &st, B_BUSY)) continue;
            claimed = 1;
            double t0 = timing ? now_s() : 0.0, built = clk->build_s;
            int next;
            if (st == B_FORWARD) {
                next = infer(ev, bt, bt->live) ? B_STEP : B_DONE;
                if (timing) clk->forward_s += now_s() - t0;
            } else {
                bt->live = st == B_FILL ? fill(ev, bt, clk) : step_all(ev, bt, clk, bt->live);
                next = bt->live > 0 ? B_FORWARD : B_DONE;
                if (timing) clk->env_s += now_s() - t0 - (clk->build_s - built);
            }
            publish(ev, bt, next);
        }
        if (!claimed && atomic_load(&ev->batches_done) < ev->n_batches && !failed(ev)) wait_change(ev, seen);
    }
}

static NevoStatus evaluate(NevoEvaluator *ev, const NevoTask *tasks, int n, NevoEpisode *results,
                           NevoObsStats *task_stats, NevoError *err) {
    ev->tasks = tasks;
    ev->results = results;
    ev->task_stats = task_stats;
    ev->n_tasks = n;
    for (int i = 0; i < n && !task_stats; i++) NEVO_ASSERT(!(tasks[i].flags & NEVO_TASK_RECORD_OBS));
    atomic_store(&ev->next_task, 0);
    atomic_store(&ev->frames, 0);
    atomic_store(&ev->failed, 0);
    atomic_store(&ev->batches_done, 0);
    for (int i = 0; i < ev->n_batches; i++) {
        atomic_store(&ev->batches[i].state, B_FILL);
        ev->batches[i].held = -1;
    }
    int nw = nevo_pool_threads(ev->pool);
    double t0 = ev->timing ? now_s() : 0.0;
    nevo_pool_run(ev->pool, nw, ev->depth == 1 ? run_fused : run_pipelined, ev);
    if (ev->timing) {
        ev->wall_s += now_s() - t0;
        ev->timed_frames += atomic_load(&ev->frames);
        ev->calls++;
    }
    if (atomic_load(&ev->failed)) {
        if (err) *err = ev->first_error;
        return ev->first_error.status;
    }
    return NEVO_OK;
}

NevoStatus nevo_evaluate(NevoEvaluator *ev, const float *params, size_t stride, const NevoTask *tasks, int n,
                         NevoEpisode *results, NevoObsStats *task_stats, NevoError *err) {
    ev->params = params;
    ev->stride = stride;
    ev->build = NULL;
    return evaluate(ev, tasks, n, results, task_stats, err);
}

NevoStatus nevo_evaluate_built(NevoEvaluator *ev, NevoBuildFn build, void *ctx, const NevoTask *tasks, int n,
                               NevoEpisode *results, NevoObsStats *task_stats, NevoError *err) {
    NEVO_ASSERT(build);
    for (int i = 0; i < ev->n_batches; i++)
        if (!ev->batches[i].theta)
            ev->batches[i].theta = nevo_alloc_aligned(sizeof(float) * (size_t)ev->slots * theta_stride(ev->policy));
    ev->params = NULL;
    ev->stride = 0;
    ev->build = build;
    ev->build_ctx = ctx;
    return evaluate(ev, tasks, n, results, task_stats, err);
}
