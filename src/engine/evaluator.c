/* Population evaluator: per-worker episode slots refilled from a shared task queue,
 * batched heterogeneous policy forward over the live slots. */
#include "nevo/eval.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Worker {
    uint8_t *insts;   /* (slots, instance_size) */
    float *obs;       /* (slots, obs_dim) observations of the live slots, compacted */
    float *out;       /* (slots, n_out) */
    float *actions;   /* (slots, action_dim) */
    int *net;         /* (slots) network row of each live slot */
    int *task;        /* (slots) task index of each live slot */
    float *scratch;   /* policy scratch */
    double forward_s, env_s; /* with timing on: thread-seconds in forward and env */
} Worker;

struct NevoEvaluator {
    const NevoEnv *env;
    const NevoPolicy *policy;
    NevoPool *pool;
    int slots;
    size_t inst_size;
    Worker *workers;
    NevoProgressFn progress;
    void *progress_ctx;
    int timing;
    double wall_s;
    long long timed_frames;
    int calls;
    /* the current call */
    const float *params;
    size_t stride;
    const NevoTask *tasks;
    NevoEpisode *results;
    NevoObsStats *task_stats;
    int n_tasks;
    atomic_int next_task;
    atomic_llong frames;
    atomic_int failed;
    NevoError first_error;
};

NevoEvaluator *nevo_evaluator_new(const NevoEnv *env, const NevoPolicy *policy, NevoPool *pool,
                                  int slots) {
    NevoEvaluator *ev = nevo_alloc(sizeof *ev);
    const NevoEnvSpec *spec = nevo_env_spec(env);
    ev->env = env;
    ev->policy = policy;
    ev->pool = pool;
    ev->slots = slots > 0 ? slots : 16;
    ev->inst_size = nevo_env_instance_size(env);
    int nw = nevo_pool_threads(pool);
    ev->workers = nevo_alloc(sizeof(Worker) * (size_t)nw);
    for (int w = 0; w < nw; w++) {
        Worker *wk = &ev->workers[w];
        int S = ev->slots;
        wk->insts = nevo_alloc_aligned(ev->inst_size * (size_t)S);
        wk->obs = nevo_alloc_aligned(sizeof(float) * (size_t)S * spec->obs_dim);
        wk->out = nevo_alloc_aligned(sizeof(float) * (size_t)S * policy->n_out);
        wk->actions = nevo_alloc_aligned(sizeof(float) * (size_t)S * spec->action_dim);
        wk->net = nevo_alloc(sizeof(int) * (size_t)S);
        wk->task = nevo_alloc(sizeof(int) * (size_t)S);
        wk->scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(policy, S));
    }
    return ev;
}

void nevo_evaluator_free(NevoEvaluator *ev) {
    if (!ev) return;
    int nw = nevo_pool_threads(ev->pool);
    for (int w = 0; w < nw; w++) {
        Worker *wk = &ev->workers[w];
        for (int s = 0; s < ev->slots; s++)
            nevo_env_instance_free(ev->env, wk->insts + (size_t)s * ev->inst_size);
        free(wk->insts);
        free(wk->obs);
        free(wk->out);
        free(wk->actions);
        free(wk->net);
        free(wk->task);
        free(wk->scratch);
    }
    free(ev->workers);
    free(ev);
}

NevoPool *nevo_evaluator_pool(const NevoEvaluator *ev) { return ev->pool; }

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
    for (int w = 0; w < nevo_pool_threads(ev->pool); w++) ev->workers[w].forward_s = ev->workers[w].env_s = 0.0;
}

void nevo_evaluator_times(const NevoEvaluator *ev, NevoEvalTimes *out) {
    memset(out, 0, sizeof *out);
    out->threads = nevo_pool_threads(ev->pool);
    out->wall_s = ev->wall_s;
    out->frames = ev->timed_frames;
    out->calls = ev->calls;
    for (int w = 0; w < out->threads; w++) {
        out->forward_s += ev->workers[w].forward_s;
        out->env_s += ev->workers[w].env_s;
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

/* Starts task t in slot s; returns 0 if the first observation is not finite. */
static int start(NevoEvaluator *ev, Worker *wk, int s, int t) {
    const NevoEnvSpec *spec = nevo_env_spec(ev->env);
    const NevoTask *task = &ev->tasks[t];
    float *obs = wk->obs + (size_t)s * spec->obs_dim;
    void *inst = wk->insts + (size_t)s * ev->inst_size;
    nevo_env_forget(ev->env, inst); /* the episode depends on its seed alone */
    nevo_env_reset(ev->env, inst, task->seed, obs);
    wk->net[s] = task->net;
    wk->task[s] = t;
    NevoEpisode *r = &ev->results[t];
    memset(r, 0, sizeof *r);
    if (!all_finite(obs, spec->obs_dim)) {
        fail(ev, "%s returned a non-finite observation at reset (network %d, seed %llu, step %d)", t, 0);
        return 0;
    }
    if (task->flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_add(&ev->task_stats[t], obs);
    return 1;
}

static void run_worker(void *ctx, int item, int worker) {
    NevoEvaluator *ev = ctx;
    Worker *wk = &ev->workers[worker];
    const NevoEnvSpec *spec = nevo_env_spec(ev->env);
    const NevoPolicy *pol = ev->policy;
    int odim = spec->obs_dim, adim = spec->action_dim;
    int live = 0;
    (void)item;
    /* fill the slots */
    while (live < ev->slots) {
        int t = atomic_fetch_add(&ev->next_task, 1);
        if (t >= ev->n_tasks) break;
        if (!start(ev, wk, live, t)) return;
        live++;
    }
    long long local_frames = 0;
    const int timing = ev->timing;
    double t0 = timing ? now_s() : 0.0, t1 = 0.0;
    while (live > 0 && !atomic_load_explicit(&ev->failed, memory_order_relaxed)) {
        nevo_policy_forward(pol, ev->params, ev->stride, wk->net, wk->obs, live, wk->out, wk->scratch);
        if (!all_finite(wk->out, live * pol->n_out)) {
            for (int s = 0; s < live; s++)
                if (!all_finite(wk->out + (size_t)s * pol->n_out, pol->n_out)) {
                    fail(ev, "the policy produced a non-finite output on %s (network %d, seed %llu, step %d); "
                         "lower the step size or mutation power",
                         wk->task[s], ev->results[wk->task[s]].length);
                    return;
                }
        }
        nevo_policy_actions(pol, wk->out, live, wk->actions);
        if (timing) {
            t1 = now_s();
            wk->forward_s += t1 - t0;
        }
        for (int s = 0; s < live;) {
            int t = wk->task[s];
            NevoEpisode *r = &ev->results[t];
            uint8_t *inst = wk->insts + (size_t)s * ev->inst_size;
            float *obs = wk->obs + (size_t)s * odim;
            NevoStepResult sr;
            nevo_env_step(ev->env, inst, wk->actions + (size_t)s * adim, obs, &sr);
            r->ret += sr.reward;
            r->length++;
            local_frames++;
            if (!isfinite(sr.reward) || !all_finite(obs, odim)) {
                fail(ev, "%s returned a non-finite observation or reward (network %d, seed %llu, step %d)",
                     t, r->length);
                return;
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
            int next = atomic_fetch_add(&ev->next_task, 1);
            if (next < ev->n_tasks) {
                if (!start(ev, wk, s, next)) return;
                s++;
            } else {
                live--;
                if (s != live) {
                    swap_bytes(inst, wk->insts + (size_t)live * ev->inst_size, ev->inst_size);
                    memcpy(obs, wk->obs + (size_t)live * odim, sizeof(float) * (size_t)odim);
                    memcpy(wk->actions + (size_t)s * adim, wk->actions + (size_t)live * adim,
                           sizeof(float) * (size_t)adim);
                    wk->net[s] = wk->net[live];
                    wk->task[s] = wk->task[live];
                }
            }
        }
        if (timing) { /* resets of refilled slots count as env time */
            t0 = now_s();
            wk->env_s += t0 - t1;
        }
    }
    atomic_fetch_add(&ev->frames, local_frames);
}

NevoStatus nevo_evaluate(NevoEvaluator *ev, const float *params, size_t stride,
                         const NevoTask *tasks, int n, NevoEpisode *results,
                         NevoObsStats *task_stats, NevoError *err) {
    ev->params = params;
    ev->stride = stride;
    ev->tasks = tasks;
    ev->results = results;
    ev->task_stats = task_stats;
    ev->n_tasks = n;
    for (int i = 0; i < n && !task_stats; i++) NEVO_ASSERT(!(tasks[i].flags & NEVO_TASK_RECORD_OBS));
    atomic_store(&ev->next_task, 0);
    atomic_store(&ev->frames, 0);
    atomic_store(&ev->failed, 0);
    int nw = nevo_pool_threads(ev->pool);
    double t0 = ev->timing ? now_s() : 0.0;
    nevo_pool_run(ev->pool, nw, run_worker, ev);
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
