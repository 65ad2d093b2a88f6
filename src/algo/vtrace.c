/* algo vtrace: IMPALA's actor-critic with V-trace targets (Espeholt et al. 2018) on
 * SEED RL's split of the work (Espeholt et al. 2020): actors only step environments,
 * every policy forward runs batched in one place, and the learner trains on
 * trajectories of rl.unroll steps.
 *
 * rl.mode sync is a fixed schedule. Each learner step:
 *   1. rollout: every env advances rl.unroll steps; at each step one batched forward
 *      of all envs' observations on the config's backend, then each env samples its
 *      action from its own Philox stream and steps (over the pool's threads);
 *   2. learn: the batch's gradient in chunks of NEVO_VTRACE_CHUNK envs' trajectories
 *      (one forward and backward each; replica.h: summed in a fixed tree), then one
 *      optimiser step.
 * Nothing depends on the thread count, and a checkpoint holds every env's state, so a
 * run resumed after a kill is the same bits. rl.mode async runs actors, inference and
 * learner concurrently (src/engine/seed.c); that mode is fast but not reproducible.
 *
 * The network is the config's policy with a value head: outputs (A logits, V). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/actor_envs.h"
#include "algo/algo_internal.h"
#include "nevo/grad.h"
#include "nevo/optim.h"
#include "nevo/replica.h"
#include "nevo/rl.h"
#include "nevo/rng.h"
#include "nevo/seed.h"
#include "nevo/vtrace.h"

/* A learner worker's buffers for one trajectory of T steps (T + 1 observations). */
typedef struct NevoVTraceWork Learn;
struct NevoVTraceWork {
    int n; /* trajectories it has room for */
    float *out, *tape, *scratch, *dout;
    float *logits, *logp, *dlogits, *values, *dvalues, *vs, *pg, *lrho;
    int *net;
};

/* Room for n trajectories of T steps. */
static void learn_init(Learn *w, const NevoPolicy *p, int T, int n) {
    size_t R = (size_t)n * (size_t)(T + 1), O = (size_t)p->n_out, S = (size_t)n * (size_t)T, A = (size_t)p->n_act;
    w->n = n;
    w->out = nevo_alloc_aligned(sizeof(float) * R * O);
    w->tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p, (int)R));
    w->scratch = nevo_alloc_aligned(sizeof(float) * nevo_grad_scratch_floats(p, (int)R));
    w->dout = nevo_alloc_aligned(sizeof(float) * R * O);
    w->logits = nevo_alloc(sizeof(float) * S * A);
    w->logp = nevo_alloc(sizeof(float) * S * A);
    w->dlogits = nevo_alloc(sizeof(float) * S * A);
    w->values = nevo_alloc(sizeof(float) * R);
    w->dvalues = nevo_alloc(sizeof(float) * S);
    w->vs = nevo_alloc(sizeof(float) * S);
    w->pg = nevo_alloc(sizeof(float) * S);
    w->lrho = nevo_alloc(sizeof(float) * S);
    w->net = nevo_alloc(sizeof(int) * R); /* zeros: every row the one network */
}

static void learn_free(Learn *w) {
    void *p[] = {w->out, w->tape, w->scratch, w->dout, w->logits, w->logp, w->dlogits, w->values,
                 w->dvalues, w->vs, w->pg, w->lrho, w->net};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

NevoStatus nevo_vtrace_batch(const NevoPolicy *p, const NevoRLConfig *rl, const float *theta, int T, int n,
                             const float *obs, const int *act, const float *mu, const float *rew, const float *disc,
                             float scale, NevoVTraceWork *work, float *grad, double *loss) {
    Learn *w = work;
    NEVO_ASSERT(n >= 1 && n <= w->n);
    int A = p->n_act, O = p->n_out, R = T + 1;
    /* one forward of every trajectory's T + 1 rows */
    nevo_policy_forward_tape(p, theta, 0, w->net, obs, n * R, w->out, w->tape);
    double L = 0.0;
    memset(w->dout, 0, sizeof(float) * (size_t)n * (size_t)R * (size_t)O); /* bootstrap rows: no gradient */
    for (int j = 0; j < n; j++) { /* V-trace and the loss per trajectory */
        const float *out = w->out + (size_t)j * R * O;
        size_t s0 = (size_t)j * T;
        float *logits = w->logits + s0 * A, *logp = w->logp + s0 * A, *values = w->values + (size_t)j * R;
        for (int t = 0; t < R; t++) {
            if (t < T) memcpy(logits + (size_t)t * A, out + (size_t)t * O, sizeof(float) * (size_t)A);
            values[t] = out[(size_t)t * O + A];
        }
        nevo_log_softmax(logits, T, A, logp);
        for (int t = 0; t < T; t++) w->lrho[s0 + t] = logp[(size_t)t * A + act[s0 + t]] - mu[s0 + t];
        nevo_vtrace(w->lrho + s0, disc + s0, rew + s0, values, values + T, T, 1, (float)rl->rho_bar,
                    (float)rl->c_bar, w->vs + s0, w->pg + s0);
        L += nevo_impala_loss(logits, values, act + s0, w->vs + s0, w->pg + s0, T, A, (float)rl->baseline_cost,
                              (float)rl->entropy_cost, w->dlogits + s0 * A, w->dvalues + s0);
        float *dout = w->dout + (size_t)j * R * O;
        for (int t = 0; t < T; t++) {
            for (int a = 0; a < A; a++) dout[(size_t)t * O + a] = w->dlogits[(s0 + t) * A + a] * scale;
            dout[(size_t)t * O + A] = w->dvalues[s0 + t] * scale;
        }
    }
    if (!isfinite(L)) return NEVO_ERR_NUMERIC;
    memset(grad, 0, sizeof(float) * p->nparams);
    nevo_policy_backward(p, theta, 0, w->net, obs, n * R, w->tape, w->dout, grad, 0, NULL, w->scratch);
    *loss = L;
    return NEVO_OK;
}

NevoVTraceWork *nevo_vtrace_work_new(const NevoPolicy *p, int T, int n) {
    Learn *w = nevo_alloc(sizeof *w);
    learn_init(w, p, T, n);
    return w;
}

void nevo_vtrace_work_free(NevoVTraceWork *work) {
    if (!work) return;
    learn_free(work);
    free(work);
}

int nevo_vtrace_sample(const float *logits, int A, uint64_t seed, uint32_t env, uint64_t step, float *logp) {
    float lp[NEVO_VTRACE_MAX_ACTIONS];
    nevo_log_softmax(logits, 1, A, lp);
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ACTOR, (uint32_t)step, env, (uint32_t)(step >> 32));
    double u = nevo_rng_uniform(&rng), cum = 0.0;
    int a = A - 1; /* where rounding leaves the sum of probabilities below u */
    for (int j = 0; j < A; j++) {
        cum += exp((double)lp[j]);
        if (u < cum) {
            a = j;
            break;
        }
    }
    *logp = lp[a];
    return a;
}

/* ---- the algorithm ------------------------------------------------------------------- */

typedef struct VT {
    NevoAlgo base;
    const NevoRLConfig *rl;
    const NevoEnv *env;
    int E, T, A, O, D;
    size_t np;
    float *theta;
    NevoOptim *opt;
    double *grad;            /* (np + 1): the batch's gradient, then its summed loss */
    int workers;
    NevoVTraceWork **work;   /* per worker */
    float **fgrad;           /* per worker: a chunk's float gradient */
    float **sobs, **smu, **srew, **sdisc; /* per worker: a chunk's trajectories, staged */
    int **sact;
    /* sync mode */
    NevoActorEnvs envs;      /* (E) */
    float *obs;              /* (T + 1, E, D) the unroll's observations, time-major */
    float *rew, *disc, *mu;  /* (T, E) rewards, discounts, behaviour log-probabilities */
    int *act;                /* (T, E) */
    double *done_ret;        /* (E) a return finished at the current step, */
    int *done;               /* (E) ... where done[e] */
    float *out;              /* (E, O) the rollout's forward */
    NevoBackend *backend;    /* where the acting forward runs (config key backend) */
    NevoRows *rows;          /* theta on it */
    NevoWorkspace **ws;      /* per worker */
    int fwd_rows;            /* rows a forward call takes: 16 on the CPU (spread over the pool), all E on
                                a device, whose cost is per call */
    int *nets0;              /* (E) zeros: every row runs network 0 */
    NevoPoolAuto fwd_way, step_way; /* sync mode: each step's two jobs, on the pool or alone */
    int t;                   /* the rollout's step within the unroll */
    /* async mode */
    NevoSeed *seed;
    /* the generation in progress */
    NevoRLGen gen;
    long long updates;
    NevoRLBest best;         /* rl.validation_every: the best validated parameters */
} VT;

/* the forward of rows [fwd_rows k, fwd_rows (k + 1)) of step t's observations */
static void forward_item(void *ctx, int k, int worker) {
    VT *v = ctx;
    int lo = v->fwd_rows * k, n = v->E - lo < v->fwd_rows ? v->E - lo : v->fwd_rows;
    const float *x = v->obs + ((size_t)v->t * v->E + (size_t)lo) * v->D;
    nevo_backend_forward(v->backend, v->base.policy, v->rows, v->nets0, x, n, NULL, v->out + (size_t)lo * v->O,
                         v->ws[worker]);
}

void nevo_vtrace_act(const NevoEnv *env, void *inst, const float *logits, int A, uint64_t seed, uint32_t env_id,
                     uint64_t step, const NevoRLConfig *rl, float *next, NevoVTraceStep *out) {
    float mu;
    int a = nevo_vtrace_sample(logits, A, seed, env_id, step, &mu);
    nevo_actor_step(env, inst, a, rl, next, out);
    out->mu = mu;
}

void nevo_actor_step(const NevoEnv *env, void *inst, int act, const NevoRLConfig *rl, float *next,
                     NevoVTraceStep *out) {
    out->act = act;
    out->mu = 0.0f;
    float action = (float)act;
    NevoStepResult r;
    nevo_env_step(env, inst, &action, next, &r);
    float rw = r.reward, clip = (float)rl->reward_clip;
    if (clip > 0) rw = rw > clip ? clip : rw < -clip ? -clip : rw;
    out->reward = r.reward;
    out->rew = rw;
    out->end = r.terminated || r.truncated;
    out->disc = out->end ? 0.0f : (float)rl->discount;
}

/* env e at step t: its action drawn from the forward's logits, one step, the record */
static void step_item(void *ctx, int e, int worker) {
    VT *v = ctx;
    size_t te = (size_t)v->t * v->E + (size_t)e;
    float *next = v->obs + (te + (size_t)v->E) * v->D;
    NevoVTraceStep st;
    NevoActorEnvs *s = &v->envs;
    nevo_vtrace_act(v->env, nevo_actor_env(s, e), v->out + (size_t)e * v->O, v->A, v->base.cfg->seed, (uint32_t)e,
                    s->steps[e]++, v->rl, next, &st);
    s->ret[e] += st.reward;
    s->len[e]++;
    v->act[te] = st.act, v->mu[te] = st.mu, v->rew[te] = st.rew, v->disc[te] = st.disc;
    v->done[e] = st.end;
    if (st.end) { /* the next observation is the next episode's first */
        v->done_ret[e] = s->ret[e];
        nevo_actor_envs_start(s, e, next);
    }
}

/* Chunk k of the learner's reduce: trajectories [K k, K k + K) of the batch
 * (K = NEVO_VTRACE_CHUNK), staged in the worker's buffers, one forward and backward. */
static NevoStatus chunk_grad(VT *v, int k, int n, int n_batch, int worker, double *out, NevoError *err) {
    double loss;
    float *g = v->fgrad[worker];
    NevoStatus st = nevo_vtrace_batch(v->base.policy, v->rl, v->theta, v->T, n, v->sobs[worker], v->sact[worker],
                                      v->smu[worker], v->srew[worker], v->sdisc[worker],
                                      1.0f / (float)((size_t)v->T * (size_t)n_batch), v->work[worker], g, &loss);
    if (st)
        return nevo_error(err, st, "algo vtrace: the loss is not finite at update %lld (trajectories %d..%d); lower "
                          "optim.lr or set optim.clip_norm", v->updates, k * NEVO_VTRACE_CHUNK,
                          k * NEVO_VTRACE_CHUNK + n - 1);
    for (size_t i = 0; i < v->np; i++) out[i] = g[i];
    out[v->np] = loss;
    return NEVO_OK;
}

/* sync mode: envs [K k, K k + K) from the unroll's time-major buffers */
static NevoStatus learn_chunk(void *ctx, int k, int worker, double *out, NevoError *err) {
    VT *v = ctx;
    int T = v->T, E = v->E, e0 = k * NEVO_VTRACE_CHUNK, n = E - e0 < NEVO_VTRACE_CHUNK ? E - e0 : NEVO_VTRACE_CHUNK;
    size_t D = (size_t)v->D;
    for (int j = 0; j < n; j++) {
        int e = e0 + j;
        float *x = v->sobs[worker] + (size_t)j * (size_t)(T + 1) * D;
        for (int t = 0; t <= T; t++) memcpy(x + (size_t)t * D, v->obs + ((size_t)t * E + (size_t)e) * D, sizeof(float) * D);
        for (int t = 0; t < T; t++) {
            size_t te = (size_t)t * E + (size_t)e, jt = (size_t)j * T + (size_t)t;
            v->sact[worker][jt] = v->act[te], v->smu[worker][jt] = v->mu[te];
            v->srew[worker][jt] = v->rew[te], v->sdisc[worker][jt] = v->disc[te];
        }
    }
    return chunk_grad(v, k, n, E, worker, out, err);
}

static NevoStatus apply_update(VT *v, NevoError *err) {
    double norm = 0.0;
    for (size_t i = 0; i < v->np; i++) norm += v->grad[i] * v->grad[i];
    if (!isfinite(norm))
        return nevo_error(err, NEVO_ERR_NUMERIC, "algo vtrace: the gradient is not finite at update %lld; lower "
                          "optim.lr or set optim.clip_norm", v->updates);
    nevo_optim_step(v->opt, v->theta, v->grad, 1.0);
    v->updates++;
    return NEVO_OK;
}

/* One learner step of sync mode: T rollout steps of every env, then the update. */
static NevoStatus sync_step(VT *v, NevoError *err) {
    NevoPool *pool = v->base.pool;
    /* this update's parameters: on the CPU a view of theta, on a device written in place */
    if (v->rows)
        nevo_rows_write(v->rows, 0, 1, v->np, v->theta);
    else
        v->rows = nevo_rows_host(v->backend, v->theta, v->np, 1);
    for (v->t = 0; v->t < v->T; v->t++) {
        if (v->fwd_rows >= v->E) /* one call: a device's */
            forward_item(v, 0, 0);
        else
            nevo_pool_run_auto(pool, &v->fwd_way, (v->E + v->fwd_rows - 1) / v->fwd_rows, forward_item, v);
        nevo_pool_run_auto(pool, &v->step_way, v->E, step_item, v);
        for (int e = 0; e < v->E; e++) /* in env order: the generation's returns are ordered */
            if (v->done[e]) nevo_rl_gen_episode(&v->gen, v->done_ret[e]);
    }
    v->gen.frames += (long long)v->T * v->E;
    int chunks = (v->E + NEVO_VTRACE_CHUNK - 1) / NEVO_VTRACE_CHUNK;
    NevoStatus st = nevo_replicas_reduce(NULL, pool, chunks, v->np + 1, learn_chunk, v, v->grad, err);
    if (st == NEVO_OK) st = apply_update(v, err);
    /* the last observations begin the next unroll */
    memcpy(v->obs, v->obs + (size_t)v->T * v->E * v->D, sizeof(float) * (size_t)v->E * v->D);
    return st;
}

/* ---- async mode: the runtime's learner ----------------------------------------------- */

typedef struct AsyncBatch {
    VT *v;
    const NevoTrajectory *batch;
    int n;
} AsyncBatch;

static NevoStatus async_chunk(void *ctx, int k, int worker, double *out, NevoError *err) {
    const AsyncBatch *b = ctx;
    VT *v = b->v;
    int T = v->T, j0 = k * NEVO_VTRACE_CHUNK, n = b->n - j0 < NEVO_VTRACE_CHUNK ? b->n - j0 : NEVO_VTRACE_CHUNK;
    size_t D = (size_t)v->D, TT = (size_t)T;
    for (int j = 0; j < n; j++) {
        const NevoTrajectory *tr = &b->batch[j0 + j];
        memcpy(v->sobs[worker] + (size_t)j * (TT + 1) * D, tr->obs, sizeof(float) * (TT + 1) * D);
        memcpy(v->sact[worker] + (size_t)j * TT, tr->act, sizeof(int) * TT);
        memcpy(v->smu[worker] + (size_t)j * TT, tr->mu, sizeof(float) * TT);
        memcpy(v->srew[worker] + (size_t)j * TT, tr->rew, sizeof(float) * TT);
        memcpy(v->sdisc[worker] + (size_t)j * TT, tr->disc, sizeof(float) * TT);
    }
    return chunk_grad(v, k, n, b->n, worker, out, err);
}

static NevoStatus async_learn(void *ctx, const NevoTrajectory *batch, int n, float *theta, NevoError *err) {
    VT *v = ctx;
    AsyncBatch b = {v, batch, n};
    NevoStatus st = nevo_replicas_reduce(NULL, v->base.pool, (n + NEVO_VTRACE_CHUNK - 1) / NEVO_VTRACE_CHUNK,
                                         v->np + 1, async_chunk, &b, v->grad, err);
    if (st == NEVO_OK) st = apply_update(v, err);
    memcpy(theta, v->theta, sizeof(float) * v->np);
    return st;
}

static void async_episode(void *ctx, double ret, int length) {
    VT *v = ctx; /* called with the runtime's episode lock held */
    nevo_rl_gen_episode(&v->gen, ret);
}

/* ---- generations, state ----------------------------------------------------------------- */

static NevoStatus vt_train(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    VT *v = (VT *)a;
    nevo_rl_gen_begin(&v->gen, v->seed);
    /* the schedule's rate (async: as if its generations ran sync's frames) */
    v->opt->lr = a->cfg->optim.lr * nevo_algo_lr_scale(a, (double)v->rl->steps_per_generation * v->T * v->E);
    NevoStatus st = NEVO_OK;
    if (v->seed)
        st = nevo_seed_run(v->seed, v->rl->steps_per_generation, 0, err);
    else
        for (int k = 0; k < v->rl->steps_per_generation && st == NEVO_OK; k++) st = sync_step(v, err);
    if (st) return st;
    nevo_rl_gen_stats(&v->gen, v->seed, v->updates, v->rl->steps_per_generation, v->E, v->opt->lr, stats);
    return nevo_rl_best_after(&v->best, a, v->theta, stats, err);
}

static void vt_best(const NevoAlgo *a, float *theta) {
    const VT *v = (const VT *)a;
    memcpy(theta, nevo_rl_best_params(&v->best, v->theta), sizeof(float) * v->np);
}

#define VT_STATE_MAGIC 0x56545231u /* "VTR1" */

/* The whole state: counters, parameters, the optimiser's moments, and in sync mode
 * every env (its instance, observation, episode counters), so a resumed run is the same
 * bits. Async mode keeps the first three; its envs start new episodes on resume. */
static void vt_save(const NevoAlgo *a, NevoBuf *b) {
    const VT *v = (const VT *)a;
    nevo_buf_u32(b, VT_STATE_MAGIC);
    nevo_buf_u32(b, (uint32_t)a->generation);
    nevo_buf_u64(b, (uint64_t)v->updates);
    nevo_buf_u64(b, (uint64_t)v->np);
    nevo_buf_u32(b, (uint32_t)v->E);
    nevo_buf_f64(b, v->gen.last_mean);
    nevo_buf_f32s(b, v->theta, v->np);
    nevo_optim_save(v->opt, b);
    nevo_rl_best_save(&v->best, b);
    nevo_buf_u32(b, v->seed ? 0u : 1u); /* envs follow */
    if (!v->seed) nevo_actor_envs_save(&v->envs, v->obs, b);
}

static NevoStatus vt_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    VT *v = (VT *)a;
    if (nevo_read_u32(r) != VT_STATE_MAGIC) return nevo_error(err, NEVO_ERR_CORRUPT, "not a vtrace state");
    uint32_t gen = nevo_read_u32(r);
    uint64_t updates = nevo_read_u64(r), np = nevo_read_u64(r);
    uint32_t E = nevo_read_u32(r);
    double last = nevo_read_f64(r);
    if (!nevo_reader_ok(r, false) || np != v->np || E != (uint32_t)v->E || gen > INT32_MAX || updates > INT64_MAX ||
        !isfinite(last))
        return nevo_error(err, NEVO_ERR_CORRUPT, "vtrace state of %llu parameters and %u envs, %u generations (this "
                          "run: %zu and %d)", (unsigned long long)np, E, gen, v->np, v->E);
    nevo_read_f32s(r, v->theta, v->np);
    NevoStatus st = nevo_optim_load(v->opt, r, err);
    if (st == NEVO_OK) st = nevo_rl_best_load(&v->best, r, err);
    if (st) return st;
    uint32_t envs = nevo_read_u32(r);
    if (envs && !v->seed) {
        st = nevo_actor_envs_load(&v->envs, r, v->obs, "vtrace state", err);
    } else if (envs) {
        st = nevo_error(err, NEVO_ERR_CORRUPT, "vtrace state holds a sync run's envs, but this run is async");
    }
    if (st == NEVO_OK && !nevo_reader_ok(r, false)) st = nevo_error(err, NEVO_ERR_CORRUPT, "vtrace state is truncated");
    if (st) return st;
    size_t bad = nevo_first_nonfinite(v->theta, v->np);
    if (bad < v->np) return nevo_error(err, NEVO_ERR_CORRUPT, "vtrace state: parameter %zu is not finite", bad);
    a->generation = (int)gen;
    v->updates = (long long)updates;
    v->gen.last_mean = last;
    if (v->seed) nevo_seed_set_params(v->seed, v->theta);
    return NEVO_OK;
}

static void vt_free(NevoAlgo *a) {
    VT *v = (VT *)a;
    nevo_seed_free(v->seed);
    if (!v->seed) nevo_actor_envs_free(&v->envs);
    for (int w = 0; w < v->workers; w++) {
        nevo_vtrace_work_free(v->work[w]);
        void *q[] = {v->fgrad[w], v->sobs[w], v->sact[w], v->smu[w], v->srew[w], v->sdisc[w]};
        for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) free(q[i]);
        if (v->ws) nevo_workspace_free(v->ws[w]);
    }
    void *p[] = {v->work, v->fgrad, v->sobs, v->sact, v->smu, v->srew, v->sdisc, v->ws, v->theta, v->grad, v->rew, v->disc, v->mu, v->act,
                 v->done_ret, v->done, v->nets0, v->gen.ret};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    nevo_optim_free(v->opt);
    nevo_rl_best_free(&v->best);
    nevo_rows_free(v->rows);
    if (v->obs) nevo_backend_host_free(v->backend, v->obs);
    if (v->out) nevo_backend_host_free(v->backend, v->out);
    nevo_backend_free(v->backend);
    free(v);
}

static const NevoAlgoOps vt_ops = {
    .best = vt_best,
    .save = vt_save,
    .load = vt_load,
    .free = vt_free,
    .train = vt_train,
};

NevoStatus nevo_vtrace_check(const NevoConfig *cfg, int variant, NevoError *err) {
    if (!cfg->policy.value_head)
        return nevo_error(err, NEVO_ERR_INVALID, "algo vtrace learns a value baseline: set policy.value_head=true "
                          "(an output for V(x) after the action logits)");
    if (cfg->policy.lstm > 0)
        return nevo_error(err, NEVO_ERR_INVALID, "algo vtrace trains feed-forward policies; remove policy.lstm");
    if (strcmp(cfg->rl.mode, "sync") == 0 && cfg->rl.batch != 0 && cfg->rl.batch != cfg->rl.envs)
        return nevo_error(err, NEVO_ERR_INVALID, "rl.batch (%d): sync mode trains on every env's trajectory each step "
                          "(rl.batch = 0 or rl.envs = %d)", cfg->rl.batch, cfg->rl.envs);
    if (cfg->dataset[0]) return nevo_error(err, NEVO_ERR_INVALID, "algo vtrace learns on an env, not a dataset");
    return NEVO_OK;
}

double nevo_vtrace_state_bytes(const NevoConfig *cfg, int variant, size_t nparams) {
    double threads = cfg->threads > 0 ? cfg->threads : nevo_cpu_count();
    double B = cfg->rl.batch > 0 ? cfg->rl.batch : cfg->rl.envs;
    /* parameters, two optimiser moments, the double gradient; per thread a float gradient;
     * the reduce's doubles per chunk */
    return (double)nparams * (4.0 + 16.0 + 8.0 + 4.0 * threads + 8.0 * (B / NEVO_VTRACE_CHUNK + 1));
}

NevoStatus nevo_vtrace_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err) {
    *out = NULL;
    const NevoConfig *cfg = base->cfg;
    const NevoEnvSpec *spec = nevo_env_spec(base->env);
    if (spec->action_kind != NEVO_SPACE_DISCRETE)
        return nevo_error(err, NEVO_ERR_INVALID, "algo vtrace samples from a softmax over discrete actions; %s has "
                          "continuous actions", spec->name);
    if (spec->n_actions > NEVO_VTRACE_MAX_ACTIONS)
        return nevo_error(err, NEVO_ERR_INVALID, "algo vtrace: %s has %d actions, more than %d", spec->name,
                          spec->n_actions, NEVO_VTRACE_MAX_ACTIONS);
    if (cfg->rl.unroll > 4096)
        return nevo_error(err, NEVO_ERR_INVALID, "rl.unroll (%d) must be at most 4096", cfg->rl.unroll);
    VT *v = nevo_alloc(sizeof *v);
    v->base = *base;
    v->base.ops = &vt_ops;
    v->rl = &cfg->rl;
    v->env = base->env;
    const NevoPolicy *p = base->policy;
    v->E = cfg->rl.envs, v->T = cfg->rl.unroll, v->A = p->n_act, v->O = p->n_out, v->D = p->obs_dim;
    v->np = p->nparams;
    NevoStatus st = nevo_optim_new(&cfg->optim, v->np, &v->opt, err);
    if (st) {
        free(v);
        return st;
    }
    v->theta = nevo_alloc_aligned(sizeof(float) * v->np);
    nevo_rl_best_init(&v->best, cfg, v->np);
    nevo_policy_init_params(p, base->noise, cfg->seed, 0, 0, v->theta);
    v->grad = nevo_alloc_aligned(sizeof(double) * (v->np + 1));
    v->workers = nevo_pool_threads(base->pool);
    v->work = nevo_alloc(sizeof(NevoVTraceWork *) * (size_t)v->workers);
    v->fgrad = nevo_alloc(sizeof(float *) * (size_t)v->workers);
    v->sobs = nevo_alloc(sizeof(float *) * (size_t)v->workers);
    v->sact = nevo_alloc(sizeof(int *) * (size_t)v->workers);
    v->smu = nevo_alloc(sizeof(float *) * (size_t)v->workers);
    v->srew = nevo_alloc(sizeof(float *) * (size_t)v->workers);
    v->sdisc = nevo_alloc(sizeof(float *) * (size_t)v->workers);
    size_t K = NEVO_VTRACE_CHUNK, KT = K * (size_t)v->T;
    for (int w = 0; w < v->workers; w++) {
        v->work[w] = nevo_vtrace_work_new(p, v->T, NEVO_VTRACE_CHUNK);
        v->fgrad[w] = nevo_alloc_aligned(sizeof(float) * v->np);
        v->sobs[w] = nevo_alloc_aligned(sizeof(float) * K * (size_t)(v->T + 1) * (size_t)v->D);
        v->sact[w] = nevo_alloc(sizeof(int) * KT);
        v->smu[w] = nevo_alloc(sizeof(float) * KT);
        v->srew[w] = nevo_alloc(sizeof(float) * KT);
        v->sdisc[w] = nevo_alloc(sizeof(float) * KT);
    }
    st = nevo_backend_new(cfg->backend, &v->backend, err);
    if (st) {
        vt_free(&v->base);
        return st;
    }
    if (strcmp(cfg->rl.mode, "async") == 0) {
        st = nevo_seed_new(v->env, p, v->backend, &cfg->rl, cfg->seed, v->theta, NULL, async_learn, async_episode, v,
                           &v->seed, err);
        if (st) {
            vt_free(&v->base);
            return st;
        }
        *out = &v->base;
        return NEVO_OK;
    }
    size_t E = (size_t)v->E, T = (size_t)v->T, D = (size_t)v->D;
    /* the forward's inputs and outputs in the backend's host memory (pinned for a device) */
    v->obs = nevo_backend_host_alloc(v->backend, sizeof(float) * (T + 1) * E * D);
    memset(v->obs, 0, sizeof(float) * (T + 1) * E * D);
    v->rew = nevo_alloc(sizeof(float) * T * E);
    v->disc = nevo_alloc(sizeof(float) * T * E);
    v->mu = nevo_alloc(sizeof(float) * T * E);
    v->act = nevo_alloc(sizeof(int) * T * E);
    v->done_ret = nevo_alloc(sizeof(double) * E);
    v->done = nevo_alloc(sizeof(int) * E);
    v->out = nevo_backend_host_alloc(v->backend, sizeof(float) * E * (size_t)v->O);
    v->nets0 = nevo_alloc(sizeof(int) * E);
    v->fwd_rows = strcmp(nevo_backend_name(v->backend), "cpu") == 0 ? 16 : v->E;
    v->ws = nevo_alloc(sizeof(NevoWorkspace *) * (size_t)v->workers);
    for (int w = 0; w < (v->fwd_rows >= v->E ? 1 : v->workers); w++) /* one a worker that forwards */
        v->ws[w] = nevo_workspace_new(v->backend, p, v->fwd_rows);
    nevo_actor_envs_init(&v->envs, v->env, v->E, cfg->seed, v->obs);
    *out = &v->base;
    return NEVO_OK;
}

