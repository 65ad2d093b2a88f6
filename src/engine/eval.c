/* Population evaluator: episode slots refilled from a shared task queue, batched
 * heterogeneous policy forward over the live slots on a backend; and the evaluation of
 * one policy (nevo_eval_params, nevo_rollout_episode).
 *
 * Where a task set's networks are built is a memory-traffic question, decided here
 * (choose_layout) and never by the algorithm that asked: networks already in memory
 * (bases) are read in place; a network with one episode is built in its slot's row as
 * the episode starts, into the cache its steps read it from; networks with several
 * episodes are built once, in parallel, before any episode runs. Factored low-rank
 * members are never built: each slot holds its member's factor row, made as the episode
 * starts, and the forward runs the base with the rows' corrections.
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nevo/backend.h"
#include "nevo/io.h"
#include "nevo/rng.h"

/* A batch of episode slots and the buffers of its forward pass. */
typedef struct Batch {
    uint8_t *insts;   /* (slots, instance_size) */
    float *obs;       /* (slots, obs_dim) observations of the live slots, compacted */
    float *out;       /* (slots, n_out) */
    float *actions;   /* (slots, action_dim) */
    int *net;         /* (slots) the row each live slot's forward reads (in the layout's rows) */
    int *row;         /* (slots) built layout: the row of `rows` each slot owns, a
                         permutation of 0..slots-1 that compaction swaps */
    NevoRows *rows;   /* built layout: (slots) rows, allocated at first use */
    NevoRows *frows;  /* factored layout: (slots) factor rows of frow_floats, at first use */
    size_t frow_floats;
    int *base;        /* factored layout: (slots) the base each live slot's member perturbs */
    float *sobs, *sout; /* factored layout: (slots, obs_dim), (slots, n_out) a call's rows in
                           base order (forward_factored), at first use */
    int *perm, *sbase, *snet; /* (slots) each sorted row's slot, its base and factor row */
    int *first;       /* (first_cap) counting sort of the bases */
    int first_cap;
    int *task;        /* (slots) task index of each live slot */
    float *rstate;    /* (slots, state floats) each live slot's recurrent state, zeroed as
                         its episode starts; NULL for a feed-forward policy */
    NevoWorkspace *ws; /* the forward's scratch */
    int live;         /* live slots (pipelined mode) */
    int held;         /* the queue position taken with the one before it (a pair), to
                         start next, or -1 */
    atomic_int state; /* pipelined mode: one of the B_ states */
} Batch;

enum { B_FILL, B_FORWARD, B_STEP, B_DONE, B_BUSY };

typedef struct Clock {
    double forward_s, env_s; /* with timing on: thread-seconds in forward and env */
    double build_s;          /* and in building networks */
    char pad[40];            /* one cache line per thread */
} Clock;

/* Where the current call's networks are read from (choose_layout). */
enum { LAYOUT_BASES, LAYOUT_BUILT, LAYOUT_PREBUILT, LAYOUT_FACTORED };

struct NevoEvaluator {
    const NevoEnv *env;
    const NevoPolicy *policy;
    NevoPool *pool;
    NevoBackend *backend;
    int own_backend;
    int slots, depth;
    int slots_asked; /* the caller's slot count, 0 = the default (default_slots) */
    int fwd_threads; /* pipelined mode: threads 0 .. fwd_threads - 1 run forwards (a device's
                        calls overlap each other), the rest step envs */
    size_t inst_size;
    Batch *batches;   /* one per worker (fused) or depth of them (pipelined) */
    int n_batches;
    int batch_slots;  /* the slots the batches were made with (ev->slots may move first) */
    Clock *clocks;    /* (threads) */
    NevoProgressFn progress;
    void *progress_ctx;
    int timing;
    double wall_s;
    long long timed_frames;
    int calls;
    NevoEvaluator *host; /* a device backend's small calls: an evaluator on the CPU backend
                            (made at the first; nevo_backend_batching) */
    int host_tasks;   /* calls of at most this many tasks go to host (0: none) */
    int host_asked;   /* host_tasks set by the caller (nevo_evaluator_set_host_tasks) */
    int sized;        /* a device's batching: 0 until the first call on it has sized the
                         slots by its task count (once: under MPI a rank's share moves) */
    NevoRows *pop;    /* prebuilt layout: a row per network, kept from call to call */
    int pop_rows;
    /* the current call */
    const NevoTaskSet *ts;
    int layout;
    NevoRows *bases;  /* the set's bases where the backend reads them */
    const NevoTask *tasks;
    int *order;       /* (n_tasks) the queue: task indices grouped by their network's base */
    uint8_t *paired;  /* (n_tasks) built layout: queue positions q and q + 1 are a pair */
    int *units;       /* prebuilt layout: what to build, 2 j + 1 for the pair j, j + 1, else 2 j */
    int n_units;
    NevoEpisode *results;
    NevoObsStats *task_stats;
    NevoStates *task_states;
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

static void batch_alloc(Batch *b, NevoBackend *be, const NevoEnvSpec *spec, const NevoPolicy *policy,
                        size_t inst_size, int S) {
    memset(b, 0, sizeof *b);
    b->insts = nevo_alloc_aligned(inst_size * (size_t)S);
    /* the forward's inputs and outputs where the backend moves them fastest */
    b->obs = nevo_backend_host_alloc(be, sizeof(float) * (size_t)S * spec->obs_dim);
    b->out = nevo_backend_host_alloc(be, sizeof(float) * (size_t)S * policy->n_out);
    b->actions = nevo_alloc_aligned(sizeof(float) * (size_t)S * spec->action_dim);
    b->net = nevo_alloc(sizeof(int) * (size_t)S);
    b->task = nevo_alloc(sizeof(int) * (size_t)S);
    b->row = nevo_alloc(sizeof(int) * (size_t)S);
    b->base = nevo_alloc(sizeof(int) * (size_t)S);
    for (int s = 0; s < S; s++) b->row[s] = s;
    size_t sf = nevo_policy_state_floats(policy);
    if (sf) b->rstate = nevo_alloc_aligned(sizeof(float) * (size_t)S * sf);
}

static void batches_free(NevoEvaluator *ev) {
    for (int i = 0; i < ev->n_batches; i++) {
        Batch *b = &ev->batches[i];
        for (int s = 0; s < ev->batch_slots; s++)
            nevo_env_instance_free(ev->env, b->insts + (size_t)s * ev->inst_size);
        free(b->insts);
        nevo_backend_host_free(ev->backend, b->obs);
        nevo_backend_host_free(ev->backend, b->out);
        free(b->actions);
        free(b->net);
        free(b->task);
        free(b->row);
        free(b->base);
        nevo_backend_host_free(ev->backend, b->sobs);
        nevo_backend_host_free(ev->backend, b->sout);
        free(b->perm);
        free(b->sbase);
        free(b->snet);
        free(b->first);
        free(b->rstate);
        nevo_rows_free(b->rows);
        nevo_rows_free(b->frows);
        nevo_workspace_free(b->ws);
    }
    free(ev->batches);
    ev->batches = NULL;
    ev->n_batches = 0;
}

static void batches_make(NevoEvaluator *ev, int n) {
    batches_free(ev);
    ev->batches = nevo_alloc(sizeof(Batch) * (size_t)n);
    for (int i = 0; i < n; i++) {
        batch_alloc(&ev->batches[i], ev->backend, nevo_env_spec(ev->env), ev->policy, ev->inst_size, ev->slots);
        ev->batches[i].ws = nevo_workspace_new(ev->backend, ev->policy, ev->slots);
    }
    ev->n_batches = n;
    ev->batch_slots = ev->slots;
}

/* Slots per worker when the caller leaves it open. With one episode per network (the GA
 * and ES), each step of an episode reads its network's weights again, and in between
 * the worker reads the other slots' networks: as many slots as fit in half the L2 cache
 * (at least 1) keep most of what a step reads cached from that network's previous
 * step. Small networks keep 16, which amortises the per-call costs and lets single
 * rows go side by side (dense_nets). docs/BENCHMARKS.md has the measurements behind
 * it. Results do not depend on the slot count. */
#define DEFAULT_SLOTS 16
#define MIN_DEFAULT_SLOTS 1

static int default_slots(const NevoEvaluator *ev) {
    size_t fit = nevo_backend_cache_bytes(ev->backend) / (2 * sizeof(float) * ev->policy->nparams);
    return fit >= DEFAULT_SLOTS ? DEFAULT_SLOTS : fit < MIN_DEFAULT_SLOTS ? MIN_DEFAULT_SLOTS : (int)fit;
}

NevoEvaluator *nevo_evaluator_new(const NevoEnv *env, const NevoPolicy *policy, NevoPool *pool,
                                  int slots) {
    NevoEvaluator *ev = nevo_alloc(sizeof *ev);
    ev->env = env;
    ev->policy = policy;
    ev->pool = pool;
    NevoError err;
    NEVO_ASSERT(nevo_backend_new("cpu", &ev->backend, &err) == NEVO_OK);
    ev->own_backend = 1;
    ev->slots_asked = slots > 0 ? slots : 0;
    ev->slots = slots > 0 ? slots : default_slots(ev);
    ev->depth = 1;
    ev->fwd_threads = 1;
    ev->sized = 1; /* the CPU backend's slots: the cache rule */
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
    if (!ev->slots_asked) ev->slots = depth == 1 ? default_slots(ev) : DEFAULT_SLOTS;
    ev->sized = 1; /* the layout's own slots, not a device's */
    batches_make(ev, depth == 1 ? nevo_pool_threads(ev->pool) : depth);
}

void nevo_evaluator_set_backend(NevoEvaluator *ev, NevoBackend *backend) {
    if (backend == ev->backend) return;
    batches_free(ev); /* their rows and workspaces belong to the old backend */
    nevo_rows_free(ev->pop);
    ev->pop = NULL;
    ev->pop_rows = 0;
    if (ev->own_backend) nevo_backend_free(ev->backend);
    ev->backend = backend;
    ev->own_backend = 0;
    /* a device's batching: large batches, pipelined with a batch per thread (its
     * figures, where the caller asked for none) */
    int slots, fwd;
    nevo_backend_batching(backend, ev->policy, 0, 0, &slots, &fwd, &ev->host_tasks);
    ev->host_asked = 0;
    ev->sized = fwd > 0 ? 0 : 1;
    int nt = nevo_pool_threads(ev->pool);
    int half = nt / 2 > 1 ? nt / 2 : 1; /* the rest step envs */
    ev->fwd_threads = fwd < 1 ? 1 : fwd < half ? fwd : half;
    if (fwd > 0) ev->depth = nt + ev->fwd_threads;
    if (!ev->slots_asked) ev->slots = slots > 0 ? slots : ev->depth == 1 ? default_slots(ev) : DEFAULT_SLOTS;
    batches_make(ev, ev->depth == 1 ? nevo_pool_threads(ev->pool) : ev->depth);
}

void nevo_evaluator_set_host_tasks(NevoEvaluator *ev, int max_tasks) {
    NEVO_ASSERT(max_tasks >= 0);
    ev->host_tasks = max_tasks;
    ev->host_asked = 1;
}

void nevo_evaluator_free(NevoEvaluator *ev) {
    if (!ev) return;
    nevo_evaluator_free(ev->host);
    batches_free(ev);
    nevo_rows_free(ev->pop);
    if (ev->own_backend) nevo_backend_free(ev->backend);
    free(ev->order);
    free(ev->paired);
    free(ev->units);
    free(ev->clocks);
    pthread_mutex_destroy(&ev->mu);
    pthread_cond_destroy(&ev->changed);
    free(ev);
}

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
    if (ev->host) nevo_evaluator_set_timing(ev->host, on);
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
    if (ev->host) { /* the calls it ran count as this evaluator's */
        NevoEvalTimes h;
        nevo_evaluator_times(ev->host, &h);
        out->wall_s += h.wall_s, out->forward_s += h.forward_s, out->env_s += h.env_s, out->build_s += h.build_s;
        out->frames += h.frames, out->calls += h.calls;
    }
}

void nevo_evaluator_set_progress(NevoEvaluator *ev, NevoProgressFn fn, void *ctx) {
    ev->progress = fn;
    ev->progress_ctx = ctx;
    if (ev->host) nevo_evaluator_set_progress(ev->host, fn, ctx);
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


static void fail(NevoEvaluator *ev, const char *fmt, int task, int step) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&ev->failed, &expected, 1)) {
        const NevoTask *t = &ev->tasks[task];
        nevo_error(&ev->first_error, NEVO_ERR_NUMERIC, fmt, nevo_env_spec(ev->env)->name, t->net,
                   (unsigned long long)t->seed, step);
    }
}

/* Starts the task at queue position q in slot s (in the built layout, first building
 * its network into the slot's row); returns 0 if the first observation is not finite. */
static int start(NevoEvaluator *ev, Batch *bt, Clock *clk, int s, int q) {
    const NevoEnvSpec *spec = nevo_env_spec(ev->env);
    int t = ev->order[q];
    const NevoTask *task = &ev->tasks[t];
    float *obs = bt->obs + (size_t)s * spec->obs_dim;
    void *inst = bt->insts + (size_t)s * ev->inst_size;
    nevo_env_forget(ev->env, inst); /* the episode depends on its seed alone */
    nevo_env_reset(ev->env, inst, task->seed, obs);
    if (ev->layout == LAYOUT_BUILT || ev->layout == LAYOUT_FACTORED) {
        double t0 = ev->timing ? now_s() : 0.0;
        if (ev->layout == LAYOUT_BUILT)
            nevo_rows_build(bt->rows, bt->row[s], ev->ts, ev->bases, ev->policy, task->net, 0);
        else
            nevo_rows_build_factored(bt->frows, bt->row[s], ev->ts, ev->policy, task->net);
        if (ev->timing) clk->build_s += now_s() - t0;
        bt->net[s] = bt->row[s];
        bt->base[s] = ev->ts->nets[task->net].base;
    } else {
        bt->net[s] = ev->layout == LAYOUT_BASES ? ev->ts->nets[task->net].base : task->net;
    }
    bt->task[s] = t;
    size_t sf = nevo_policy_state_floats(ev->policy);
    if (sf) memset(bt->rstate + (size_t)s * sf, 0, sizeof(float) * sf); /* the episode starts from a zero state */
    NevoEpisode *r = &ev->results[t];
    memset(r, 0, sizeof *r);
    if (!nevo_all_finite(obs, (size_t)spec->obs_dim)) {
        fail(ev, "%s returned a non-finite observation at reset (network %d, seed %llu, step %d)", t, 0);
        return 0;
    }
    if (task->flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_add(&ev->task_stats[t], obs);
    if (task->flags & NEVO_TASK_RECORD_STATES) {
        nevo_states_clear(&ev->task_states[t]); /* what the task keeps depends on its episode alone */
        nevo_states_add(&ev->task_states[t], obs);
    }
    return 1;
}

/* The batch's next queue position: the one it holds, else the queue's next, taken
 * together with the one after it where the two are an antithetic pair (the second is
 * held, and starts next in the same batch, so the noise slice both read is likely
 * still in this core's cache; with one slot, once the first episode ends); n_tasks
 * when the queue is empty. */
static int take_task(NevoEvaluator *ev, Batch *bt) {
    if (bt->held >= 0) {
        int t = bt->held;
        bt->held = -1;
        return t;
    }
    int t = atomic_load_explicit(&ev->next_task, memory_order_relaxed);
    for (;;) {
        if (t >= ev->n_tasks) return ev->n_tasks;
        int k = ev->paired[t] ? 2 : 1;
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

/* The factored forward of the live slots. A base's product reads its weights once for
 * each run of rows on it, and compaction mixes the slots of several bases (a GA's
 * children of its parents), so where a base is in more than one run the rows go to the
 * backend gathered by base (a stable counting sort) and their outputs come back to
 * their slots. A row's result does not depend on its place. */
static void forward_factored(NevoEvaluator *ev, Batch *bt, int live) {
    const NevoPolicy *pol = ev->policy;
    int rank = (int)ev->ts->nets[0].rank, nb = ev->ts->n_bases, runs = 1, distinct = 0;
    if (bt->first_cap < nb + 1) {
        free(bt->first);
        bt->first = nevo_alloc(sizeof(int) * (size_t)(nb + 1));
        bt->first_cap = nb + 1;
    }
    int *first = bt->first;
    memset(first, 0, sizeof(int) * (size_t)(nb + 1));
    for (int s = 0; s < live; s++) {
        runs += s > 0 && bt->base[s] != bt->base[s - 1];
        distinct += first[bt->base[s] + 1]++ == 0;
    }
    if (runs == distinct) {
        nevo_backend_forward_factored(ev->backend, pol, ev->bases, bt->base, bt->frows, bt->net, rank, bt->obs, live,
                                      bt->out, bt->ws);
        return;
    }
    size_t D = (size_t)pol->obs_dim, O = (size_t)pol->n_out;
    for (int b = 0; b < nb; b++) first[b + 1] += first[b];
    for (int s = 0; s < live; s++) {
        int i = first[bt->base[s]]++;
        bt->perm[i] = s, bt->sbase[i] = bt->base[s], bt->snet[i] = bt->net[s];
        memcpy(bt->sobs + (size_t)i * D, bt->obs + (size_t)s * D, sizeof(float) * D);
    }
    nevo_backend_forward_factored(ev->backend, pol, ev->bases, bt->sbase, bt->frows, bt->snet, rank, bt->sobs, live,
                                  bt->sout, bt->ws);
    for (int i = 0; i < live; i++)
        memcpy(bt->out + (size_t)bt->perm[i] * O, bt->sout + (size_t)i * O, sizeof(float) * O);
}

/* The batched forward of the live slots and their actions; returns 0 on failure. */
static int infer(NevoEvaluator *ev, Batch *bt, int live) {
    const NevoPolicy *pol = ev->policy;
    if (ev->layout == LAYOUT_FACTORED) {
        forward_factored(ev, bt, live);
    } else {
        const NevoRows *rows = ev->layout == LAYOUT_BUILT ? bt->rows : ev->layout == LAYOUT_BASES ? ev->bases : ev->pop;
        nevo_backend_forward(ev->backend, pol, rows, bt->net, bt->obs, live, bt->rstate, bt->out, bt->ws);
    }
    if (!nevo_all_finite(bt->out, (size_t)live * (size_t)pol->n_out)) {
        for (int s = 0; s < live; s++)
            if (!nevo_all_finite(bt->out + (size_t)s * pol->n_out, (size_t)pol->n_out)) {
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
        if (!isfinite(sr.reward) || !nevo_all_finite(obs, (size_t)odim)) {
            fail(ev, "%s returned a non-finite observation or reward (network %d, seed %llu, step %d)", t,
                 r->length);
            return -1;
        }
        if (!sr.terminated && !sr.truncated) {
            if (ev->tasks[t].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_add(&ev->task_stats[t], obs);
            if (ev->tasks[t].flags & NEVO_TASK_RECORD_STATES) nevo_states_add(&ev->task_states[t], obs);
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
                bt->base[s] = bt->base[live];
                bt->task[s] = bt->task[live];
                size_t sf = nevo_policy_state_floats(ev->policy);
                if (sf) memcpy(bt->rstate + (size_t)s * sf, bt->rstate + (size_t)live * sf, sizeof(float) * sf);
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
    int does_forward = worker < ev->fwd_threads, does_env = worker >= ev->fwd_threads || threads == 1;
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

/* The layout of a call: every network a base read in place; factored members (all or
 * none of a set's), each one's factor row made as its episode starts (a few KB); one
 * episode per network, each built as its episode starts; else every network built first. */
static int choose_layout(const NevoTaskSet *ts, int *episodes_of) {
    if (ts->n_nets > 0 && ts->nets[0].kind == NEVO_NET_FACTORED) return LAYOUT_FACTORED;
    int all_bases = 1, one_each = ts->n_tasks == ts->n_nets;
    for (int j = 0; j < ts->n_nets; j++) {
        all_bases &= ts->nets[j].kind == NEVO_NET_BASE;
        one_each &= episodes_of[j] == 1;
    }
    return all_bases ? LAYOUT_BASES : one_each ? LAYOUT_BUILT : LAYOUT_PREBUILT;
}

/* Whether a row for each of n networks fits the backend's room (nevo_backend_rows_room,
 * the rows kept from the last call counted as free). Where it does not (a large
 * population of a large network on a device), each episode builds its network in its
 * slot's row instead: the same bits, a build per episode. */
static int pop_fits(const NevoEvaluator *ev, int n) {
    size_t room = nevo_backend_rows_room(ev->backend);
    if (room == SIZE_MAX || (ev->pop && ev->pop_rows >= n)) return 1;
    double row = (double)(sizeof(float) * nevo_rows_stride(ev->policy->nparams));
    return (double)n * row <= (double)room + (ev->pop ? (double)ev->pop_rows * row : 0.0);
}

/* Where a network is built from: -1 for none (an init stream), else its base. */
static int build_key(const NevoTaskSet *ts, int net) {
    const NevoNet *n = &ts->nets[net];
    return n->kind == NEVO_NET_INIT ? -1 : n->base;
}

/* Networks (with an episode) ascending within groups of one base, the networks built
 * from nothing first: consecutive builds share a base, mostly still in L2 (a GA's
 * children of one parent). The order changes no result, only which build follows
 * which. */
static int grouped_nets(const NevoTaskSet *ts, const int *episodes_of, int *out) {
    int *count = nevo_alloc(sizeof(int) * (size_t)(ts->n_bases + 2));
    for (int j = 0; j < ts->n_nets; j++)
        if (episodes_of[j] > 0) count[build_key(ts, j) + 2]++;
    for (int b = 1; b < ts->n_bases + 2; b++) count[b] += count[b - 1];
    for (int j = 0; j < ts->n_nets; j++)
        if (episodes_of[j] > 0) out[count[build_key(ts, j) + 1]++] = j;
    int n = count[ts->n_bases];
    free(count);
    return n;
}

/* The queue (tasks grouped by their network's base, in task order within a group),
 * and in the built layout the pairs taken together; in the prebuilt layout, the build
 * units: a pair as its first network, else one network. */
static void make_queue(NevoEvaluator *ev, const int *episodes_of) {
    const NevoTaskSet *ts = ev->ts;
    int n = ts->n_tasks;
    free(ev->order);
    free(ev->paired);
    free(ev->units);
    ev->order = nevo_alloc(sizeof(int) * (size_t)(n ? n : 1));
    ev->paired = nevo_alloc((size_t)(n ? n : 1));
    ev->units = NULL;
    ev->n_units = 0;
    if (ev->layout == LAYOUT_BASES) {
        for (int t = 0; t < n; t++) ev->order[t] = t;
        return;
    }
    int *nets = nevo_alloc(sizeof(int) * (size_t)(ts->n_nets ? ts->n_nets : 1));
    int n_nets = grouped_nets(ts, episodes_of, nets);
    /* each network's tasks, in task order */
    int *first = nevo_alloc(sizeof(int) * (size_t)(ts->n_nets + 1));
    for (int t = 0; t < n; t++) first[ts->tasks[t].net + 1]++;
    for (int j = 0; j < ts->n_nets; j++) first[j + 1] += first[j];
    int *by_net = nevo_alloc(sizeof(int) * (size_t)(n ? n : 1));
    int *fill_at = nevo_alloc(sizeof(int) * (size_t)(ts->n_nets + 1));
    memcpy(fill_at, first, sizeof(int) * (size_t)(ts->n_nets + 1));
    for (int t = 0; t < n; t++) by_net[fill_at[ts->tasks[t].net]++] = t;
    int q = 0;
    for (int k = 0; k < n_nets; k++)
        for (int i = first[nets[k]]; i < first[nets[k] + 1]; i++) ev->order[q++] = by_net[i];
    NEVO_ASSERT(q == n);
    if (ev->layout == LAYOUT_BUILT || ev->layout == LAYOUT_FACTORED) {
        for (int p = 0; p + 1 < n; p++) {
            int j = ts->tasks[ev->order[p]].net;
            if (ts->tasks[ev->order[p + 1]].net == j + 1 && nevo_taskset_is_pair(ts, j)) ev->paired[p++] = 1;
        }
    } else {
        ev->units = nevo_alloc(sizeof(int) * (size_t)(n_nets ? n_nets : 1));
        for (int k = 0; k < n_nets; k++) {
            int j = nets[k], pair = k + 1 < n_nets && nets[k + 1] == j + 1 && nevo_taskset_is_pair(ts, j);
            ev->units[ev->n_units++] = 2 * j + pair;
            k += pair;
        }
    }
    free(nets);
    free(first);
    free(by_net);
    free(fill_at);
}

/* Prebuilt layout: build unit u (a network, or a pair in one pass over its noise slice)
 * into its rows of pop, with non-temporal stores: the population is read back from
 * memory by the forward. */
static void build_unit(void *ctx, int u, int worker) {
    NevoEvaluator *ev = ctx;
    Clock *clk = &ev->clocks[worker];
    double t0 = ev->timing ? now_s() : 0.0;
    int j = ev->units[u] / 2;
    if (ev->units[u] % 2)
        nevo_rows_build_pair(ev->pop, j, j + 1, ev->ts, ev->bases, ev->policy, j, 1);
    else
        nevo_rows_build(ev->pop, j, ev->ts, ev->bases, ev->policy, j, 1);
    if (ev->timing) clk->build_s += now_s() - t0;
}

NevoStatus nevo_evaluate_tasks(NevoEvaluator *ev, const NevoTaskSet *ts, NevoEpisode *results,
                               NevoObsStats *task_stats, NevoStates *task_states, NevoError *err) {
    if (ev->host_tasks > 0 && ts->n_tasks <= ev->host_tasks) { /* a small call: the host's threads */
        if (!ev->host) {
            ev->host = nevo_evaluator_new(ev->env, ev->policy, ev->pool, 0);
            nevo_evaluator_set_progress(ev->host, ev->progress, ev->progress_ctx);
            if (ev->timing) nevo_evaluator_set_timing(ev->host, 1);
        }
        return nevo_evaluate_tasks(ev->host, ts, results, task_stats, task_states, err);
    }
    NevoStatus st = nevo_taskset_check(ts, ev->policy, ev->env, err);
    if (st) return st;
    for (int i = 0; i < ts->n_tasks; i++) {
        if ((ts->tasks[i].flags & NEVO_TASK_RECORD_OBS) && !task_stats)
            return nevo_error(err, NEVO_ERR_INVALID, "task %d records observations, but no statistics were given", i);
        if ((ts->tasks[i].flags & NEVO_TASK_RECORD_STATES) &&
            (!task_states || task_states[i].dim != ts->obs_dim || task_states[i].cap < 1 || !task_states[i].obs))
            return nevo_error(err, NEVO_ERR_INVALID, "task %d keeps states, but no room for them was given", i);
    }
    double t0 = ev->timing ? now_s() : 0.0;
    int *episodes_of = nevo_alloc(sizeof(int) * (size_t)(ts->n_nets ? ts->n_nets : 1));
    for (int t = 0; t < ts->n_tasks; t++) episodes_of[ts->tasks[t].net]++;
    ev->ts = ts;
    ev->tasks = ts->tasks;
    ev->layout = choose_layout(ts, episodes_of);
    if (ev->layout == LAYOUT_PREBUILT && !pop_fits(ev, ts->n_nets)) {
        ev->layout = LAYOUT_BUILT;
        nevo_rows_free(ev->pop); /* its memory to the slots' rows */
        ev->pop = NULL;
        ev->pop_rows = 0;
    }
    if (ev->layout == LAYOUT_FACTORED && !nevo_backend_has_factored(ev->backend)) {
        free(episodes_of);
        return nevo_error(err, NEVO_ERR_INVALID,
                          "backend %s has no factored low-rank forward (es.factored, ga.factored)",
                          nevo_backend_name(ev->backend));
    }
    if (!ev->sized) { /* a device's slots for this call's tasks a forward thread */
        ev->sized = 1;
        int slots, fwd, host;
        nevo_backend_batching(ev->backend, ev->policy, ts->n_tasks / ev->fwd_threads, ev->n_batches, &slots, &fwd,
                              &host);
        if (!ev->host_asked) ev->host_tasks = host;
        if (!ev->slots_asked && slots > 0 && slots != ev->slots) {
            ev->slots = slots;
            batches_make(ev, ev->n_batches);
        }
    }
    make_queue(ev, episodes_of);
    free(episodes_of);
    int nw = nevo_pool_threads(ev->pool);
    /* the bases where the backend reads them: in place on the CPU, copied to a device
     * once per call (the forward reads them, or the builds) */
    if (ts->bases && ts->n_bases > 0) ev->bases = nevo_rows_host(ev->backend, ts->bases, ts->base_stride, ts->n_bases);
    if (ev->layout == LAYOUT_BUILT) {
        for (int i = 0; i < ev->n_batches; i++)
            if (!ev->batches[i].rows) ev->batches[i].rows = nevo_rows_new(ev->backend, ev->policy->nparams, ev->slots);
    } else if (ev->layout == LAYOUT_FACTORED) {
        size_t ff = nevo_factor_row_floats(ev->policy, (int)ts->nets[0].rank);
        for (int i = 0; i < ev->n_batches; i++) {
            Batch *b = &ev->batches[i];
            if (!b->sobs) {
                size_t S = (size_t)ev->slots;
                b->sobs = nevo_backend_host_alloc(ev->backend, sizeof(float) * S * ev->policy->obs_dim);
                b->sout = nevo_backend_host_alloc(ev->backend, sizeof(float) * S * ev->policy->n_out);
                b->perm = nevo_alloc(sizeof(int) * (size_t)ev->slots);
                b->sbase = nevo_alloc(sizeof(int) * (size_t)ev->slots);
                b->snet = nevo_alloc(sizeof(int) * (size_t)ev->slots);
            }
            if (b->frows && b->frow_floats == ff) continue;
            nevo_rows_free(b->frows);
            b->frows = nevo_rows_new(ev->backend, ff, ev->slots);
            b->frow_floats = ff;
        }
    } else if (ev->layout == LAYOUT_PREBUILT) {
        if (!ev->pop || ev->pop_rows < ts->n_nets) {
            nevo_rows_free(ev->pop);
            ev->pop = nevo_rows_new(ev->backend, ev->policy->nparams, ts->n_nets);
            ev->pop_rows = ts->n_nets;
        }
        nevo_pool_run(ev->pool, ev->n_units, build_unit, ev);
    }
    ev->results = results;
    ev->task_stats = task_stats;
    ev->task_states = task_states;
    ev->n_tasks = ts->n_tasks;
    atomic_store(&ev->next_task, 0);
    atomic_store(&ev->frames, 0);
    atomic_store(&ev->failed, 0);
    atomic_store(&ev->batches_done, 0);
    for (int i = 0; i < ev->n_batches; i++) {
        atomic_store(&ev->batches[i].state, B_FILL);
        ev->batches[i].held = -1;
    }
    nevo_pool_run(ev->pool, nw, ev->depth == 1 ? run_fused : run_pipelined, ev);
    nevo_backend_synchronize(ev->backend);
    nevo_rows_free(ev->bases);
    ev->bases = NULL;
    ev->ts = NULL;
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
    int n_nets = 0;
    for (int i = 0; i < n; i++)
        if (tasks[i].net >= n_nets) n_nets = tasks[i].net + 1;
    NevoNet *nets = nevo_alloc(sizeof(NevoNet) * (size_t)(n_nets ? n_nets : 1));
    for (int j = 0; j < n_nets; j++) nets[j] = (NevoNet){.kind = NEVO_NET_BASE, .base = j};
    NevoTaskSet ts;
    nevo_taskset_for_policy(&ts, ev->policy, ev->env);
    ts.n_bases = ts.n_nets = n_nets;
    ts.bases = params;
    ts.base_stride = stride;
    ts.nets = nets;
    ts.n_tasks = n;
    ts.tasks = tasks;
    NevoStatus st = nevo_evaluate_tasks(ev, &ts, results, task_stats, NULL, err);
    free(nets);
    return st;
}

/* --- one policy ------------------------------------------------------------------- */

void nevo_eval_summarise(const NevoEpisode *eps, int n, NevoEvalSummary *out) {
    memset(out, 0, sizeof *out);
    out->episodes = n;
    if (n <= 0) return;
    double sr = 0, sl = 0;
    out->return_min = out->return_max = eps[0].ret;
    for (int i = 0; i < n; i++) {
        sr += eps[i].ret;
        sl += eps[i].length;
        out->frames += eps[i].length;
        if (eps[i].ret < out->return_min) out->return_min = eps[i].ret;
        if (eps[i].ret > out->return_max) out->return_max = eps[i].ret;
    }
    out->return_mean = sr / n;
    out->length_mean = sl / n;
    double vr = 0, vl = 0;
    for (int i = 0; i < n; i++) {
        vr += (eps[i].ret - out->return_mean) * (eps[i].ret - out->return_mean);
        vl += (eps[i].length - out->length_mean) * (eps[i].length - out->length_mean);
    }
    out->return_std = sqrt(vr / n);
    out->length_std = sqrt(vl / n);
}

uint64_t nevo_eval_episode_seed(uint64_t seed, int episode) {
    return nevo_rng_derive(seed, NEVO_RNG_ENV_SEED, 0, NEVO_STREAM_FINAL_EVAL, (uint32_t)episode);
}

NevoStatus nevo_rollout_episode(const NevoEnv *env, const NevoPolicy *policy, const float *theta,
                                uint64_t env_seed, NevoFrameFn frame, void *ctx, NevoEpisode *out,
                                NevoError *err) {
    const NevoEnvSpec *spec = nevo_env_spec(env);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    float *obs = nevo_alloc(sizeof(float) * (size_t)spec->obs_dim);
    float *o = nevo_alloc(sizeof(float) * (size_t)policy->n_out);
    float action[NEVO_ENV_MAX_ACT_DIM];
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(policy, 1));
    size_t sf = nevo_policy_state_floats(policy);
    float *state = sf ? nevo_alloc(sizeof(float) * sf) : NULL; /* zeroed: the episode's start */
    int net = 0;
    memset(out, 0, sizeof *out);
    nevo_env_reset(env, inst, env_seed, obs); /* a fresh instance: nothing to forget */
    if (frame) frame(ctx, env, inst);
    NevoStepResult r = {0};
    NevoStatus st = NEVO_OK;
    while (!r.terminated && !r.truncated) {
        nevo_policy_forward_state(policy, theta, policy->nparams, &net, obs, 1, state, o, scratch);
        nevo_policy_actions(policy, o, 1, action);
        nevo_env_step(env, inst, action, obs, &r);
        out->ret += r.reward;
        out->length++;
        if (frame) frame(ctx, env, inst);
        if (!isfinite(r.reward)) {
            st = nevo_error(err, NEVO_ERR_NUMERIC, "%s returned a non-finite reward at step %d", spec->name, out->length);
            break;
        }
    }
    out->terminated = r.terminated;
    nevo_env_instance_free(env, inst);
    free(inst);
    free(obs);
    free(o);
    free(scratch);
    free(state);
    return st;
}

NevoStatus nevo_eval_params(const NevoEnv *env, const NevoPolicy *policy, const float *theta,
                            NevoPool *pool, int episodes, uint64_t seed, NevoEvalSummary *out,
                            NevoError *err) {
    NevoTask *tasks = nevo_alloc(sizeof(NevoTask) * (size_t)episodes);
    NevoEpisode *eps = nevo_alloc(sizeof(NevoEpisode) * (size_t)episodes);
    for (int e = 0; e < episodes; e++) {
        tasks[e].net = 0;
        tasks[e].seed = nevo_eval_episode_seed(seed, e);
    }
    /* one network for every episode: as many slots as a lanes block (kernels.h), so the
     * forward runs them 16 rows at a time against one read of the weights */
    NevoEvaluator *ev = nevo_evaluator_new(env, policy, pool, 16);
    NevoStatus st = nevo_evaluate(ev, theta, policy->nparams, tasks, episodes, eps, NULL, err);
    if (st == NEVO_OK) nevo_eval_summarise(eps, episodes, out);
    nevo_evaluator_free(ev);
    free(tasks);
    free(eps);
    return st;
}
