/* algo r2d2: recurrent experience replay (Kapturowski et al. 2019) on SEED RL's split of
 * the work: the envs only step, every Q-network forward of the actors runs batched in
 * one place (the config's backend, the recurrent state kept beside it), and the learner
 * trains on replayed sequences with burn-in, n-step double Q-learning, value rescaling
 * and prioritised sampling.
 *
 * rl.mode sync is a fixed schedule. Each learner step:
 *   1. act: every env takes rl.period steps; at each, one batched forward of all envs'
 *      observations and states, then each env acts epsilon-greedily (Ape-X's per-env
 *      epsilon) from its own Philox stream and steps (over the pool's threads);
 *   2. cut: each env whose last burn_in + unroll steps begin on its period hands that
 *      sequence, with the state it held before the sequence's first step, to replay
 *      (env order), at the buffer's largest priority so far;
 *   3. learn (once replay holds rl.replay_start sequences): rl.batch sequences drawn by
 *      priority^rl.priority_exponent (stream (seed, NEVO_RNG_REPLAY, update, j)), their
 *      gradient in chunks of NEVO_R2D2_CHUNK (replica.h's fixed tree), one optimiser
 *      step, the drawn sequences' priorities replaced; every rl.target_period updates
 *      the target network becomes the online one.
 * Nothing depends on the thread count, and a checkpoint holds the envs, their histories
 * and the replay buffer, so a run resumed after a kill is the same bits. rl.mode async
 * runs the actors on SEED RL's runtime (seed.h), which keeps each env's LSTM state at
 * the inference server; the learner turns the trajectories that come into sequences
 * the same way and updates once per batch it takes (fast, not reproducible). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo/actor_envs.h"
#include "algo/algo_internal.h"
#include "nevo/backend.h"
#include "nevo/grad.h"
#include "nevo/lstm.h"
#include "nevo/optim.h"
#include "nevo/r2d2.h"
#include "nevo/replica.h"
#include "nevo/rl.h"
#include "nevo/rng.h"
#include "nevo/seed.h"

/* ---- the learner's pieces -------------------------------------------------------------- */

#define NEVO_R2D2_MAX_ACTIONS 64 /* the actors' Q-values live on the stack */

void nevo_r2d2_q(const NevoPolicy *p, const float *out, int n, float *q) {
    int A = p->n_act, O = p->n_out;
    for (int i = 0; i < n; i++) {
        const float *o = out + (size_t)i * O;
        float *qi = q + (size_t)i * A;
        if (O == A) {
            memcpy(qi, o, sizeof(float) * (size_t)A);
            continue;
        }
        double sum = 0.0;
        for (int a = 0; a < A; a++) sum += o[a];
        float mean = (float)(sum / A), v = o[A];
        for (int a = 0; a < A; a++) qi[a] = v + (o[a] - mean);
    }
}

static int argmax(const float *q, int A) {
    int best = 0;
    for (int a = 1; a < A; a++)
        if (q[a] > q[best]) best = a;
    return best;
}

int nevo_r2d2_act(const float *q, int A, double eps, uint64_t seed, uint32_t env, uint64_t step) {
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ACTOR, (uint32_t)step, env, (uint32_t)(step >> 32));
    double u = nevo_rng_uniform(&rng), v = nevo_rng_uniform(&rng);
    if (u >= eps) return argmax(q, A);
    int a = (int)(v * A);
    return a < A ? a : A - 1;
}

void nevo_r2d2_env_act(const NevoEnv *env, void *inst, const NevoPolicy *p, const float *out, double eps,
                       uint64_t seed, uint32_t env_id, uint64_t step, const NevoRLConfig *rl, float *next,
                       NevoVTraceStep *st) {
    float q[NEVO_R2D2_MAX_ACTIONS];
    nevo_r2d2_q(p, out, 1, q);
    nevo_actor_step(env, inst, nevo_r2d2_act(q, p->n_act, eps, seed, env_id, step), rl, next, st);
}

struct NevoR2D2Work {
    const NevoPolicy *p;
    int BI, T, M, cap, in, H, S;
    int *zeros;              /* ((T + 1) cap) every row the one network */
    float *x;                /* (M + 1, cap, D) the observations, time-major */
    uint8_t *mask;           /* (M + 1, cap) */
    float *st_on, *st_tg;    /* (cap, S) each network's state */
    float *h0, *c0;          /* (cap, H) the online state after the burn-in */
    float *sout, *fscratch;  /* a step's outputs (cap, O), nevo_policy_forward_state's scratch */
    float *out, *tout;       /* ((T + 1) cap, O) the online and target outputs */
    float *qo, *qt;          /* ((T + 1) cap, A) */
    float *rw, *ds, *y;      /* (T, cap) rewards, discounts, targets */
    float *dout;             /* ((T + 1) cap, O) */
    float *a, *dx;           /* ((T + 1) cap, in) the LSTM's inputs and their gradient */
    float *h, *dh;           /* ((T + 1) cap, H) */
    float *pre_tape, *post_tape, *lstm_tape, *lscratch, *gscratch;
};

NevoR2D2Work *nevo_r2d2_work_new(const NevoPolicy *p, int burn_in, int T, int n) {
    NEVO_ASSERT(p->lstm_layer >= 0 && n >= 1 && T >= 1 && burn_in >= 0);
    NevoR2D2Work *w = nevo_alloc(sizeof *w);
    const NevoLayer *R = &p->layers[p->lstm_layer];
    w->p = p;
    w->BI = burn_in, w->T = T, w->M = burn_in + T, w->cap = n;
    w->in = R->in_dim, w->H = R->out_dim, w->S = (int)nevo_policy_state_floats(p);
    size_t K = (size_t)n, rows = (size_t)(T + 1) * K, O = (size_t)p->n_out, A = (size_t)p->n_act;
    size_t steps = (size_t)(w->M + 1) * K;
    w->zeros = nevo_alloc(sizeof(int) * rows);
    w->x = nevo_alloc_aligned(sizeof(float) * steps * (size_t)p->obs_dim);
    w->mask = nevo_alloc(steps);
    w->st_on = nevo_alloc(sizeof(float) * K * (size_t)w->S);
    w->st_tg = nevo_alloc(sizeof(float) * K * (size_t)w->S);
    w->h0 = nevo_alloc(sizeof(float) * K * (size_t)w->H);
    w->c0 = nevo_alloc(sizeof(float) * K * (size_t)w->H);
    w->sout = nevo_alloc_aligned(sizeof(float) * K * O);
    w->fscratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, n));
    w->out = nevo_alloc_aligned(sizeof(float) * rows * O);
    w->tout = nevo_alloc_aligned(sizeof(float) * rows * O);
    w->qo = nevo_alloc(sizeof(float) * rows * A);
    w->qt = nevo_alloc(sizeof(float) * rows * A);
    w->rw = nevo_alloc(sizeof(float) * (size_t)T * K);
    w->ds = nevo_alloc(sizeof(float) * (size_t)T * K);
    w->y = nevo_alloc(sizeof(float) * (size_t)T * K);
    w->dout = nevo_alloc_aligned(sizeof(float) * rows * O);
    w->a = nevo_alloc_aligned(sizeof(float) * rows * (size_t)w->in);
    w->dx = nevo_alloc_aligned(sizeof(float) * rows * (size_t)w->in);
    w->h = nevo_alloc_aligned(sizeof(float) * rows * (size_t)w->H);
    w->dh = nevo_alloc_aligned(sizeof(float) * rows * (size_t)w->H);
    if (p->pre) w->pre_tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p->pre, (int)rows));
    w->post_tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p->post, (int)rows));
    w->lstm_tape = nevo_alloc_aligned(sizeof(float) * nevo_lstm_tape_floats(w->in, w->H, T + 1, n));
    w->lscratch = nevo_alloc_aligned(sizeof(float) * nevo_lstm_backward_scratch_floats(w->in, w->H, T + 1, n));
    /* the parts' scratch: the whole policy's widest layer and conv weights cover both */
    w->gscratch = nevo_alloc_aligned(sizeof(float) * nevo_grad_scratch_floats(p, (int)rows));
    return w;
}

void nevo_r2d2_work_free(NevoR2D2Work *w) {
    if (!w) return;
    void *q[] = {w->zeros, w->x,  w->mask, w->st_on, w->st_tg, w->h0,       w->c0,        w->sout,
                 w->fscratch, w->out, w->tout, w->qo,   w->qt,   w->rw,       w->ds,        w->y,
                 w->dout,  w->a,  w->dx,   w->h,     w->dh,    w->pre_tape, w->post_tape, w->lstm_tape,
                 w->lscratch, w->gscratch};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) free(q[i]);
    free(w);
}

/* One step of K sequences on theta: states (K, S) zeroed where the step's mask is set,
 * then nevo_policy_forward_state (the step's outputs into out (K, O)). */
static void seq_step(NevoR2D2Work *w, const float *theta, int t, int K, float *state, float *out) {
    const NevoPolicy *p = w->p;
    const uint8_t *m = w->mask + (size_t)t * K;
    for (int k = 0; k < K; k++)
        if (m[k]) memset(state + (size_t)k * w->S, 0, sizeof(float) * (size_t)w->S);
    nevo_policy_forward_state(p, theta, p->nparams, w->zeros, w->x + (size_t)t * K * p->obs_dim, K, state, out,
                              w->fscratch);
}

NevoStatus nevo_r2d2_batch(const NevoPolicy *p, const NevoRLConfig *rl, const float *theta, const float *target,
                           int n, const float *obs, const uint8_t *reset, const float *state0, const int *act,
                           const float *rew, const float *disc, const float *weight, float scale, NevoR2D2Work *w,
                           float *grad, double *loss, float *priority) {
    NEVO_ASSERT(n >= 1 && n <= w->cap);
    const NevoLayer *R = &p->layers[p->lstm_layer];
    int K = n, BI = w->BI, T = w->T, M = w->M, H = w->H, S = w->S, in = w->in, A = p->n_act, O = p->n_out;
    size_t D = (size_t)p->obs_dim, np = p->nparams, rows = (size_t)(T + 1) * K;
    /* the sequences, time-major: step t of sequence k at row t K + k */
    for (int k = 0; k < K; k++)
        for (int t = 0; t <= M; t++) {
            memcpy(w->x + ((size_t)t * K + k) * D, obs + ((size_t)k * (M + 1) + t) * D, sizeof(float) * D);
            w->mask[(size_t)t * K + k] = reset[(size_t)k * (M + 1) + t] != 0;
        }
    memcpy(w->st_on, state0, sizeof(float) * (size_t)K * S);
    memcpy(w->st_tg, state0, sizeof(float) * (size_t)K * S);
    /* 1. burn-in: both networks warm their states, no tape */
    for (int t = 0; t < BI; t++) {
        seq_step(w, theta, t, K, w->st_on, w->sout);
        seq_step(w, target, t, K, w->st_tg, w->sout);
    }
    /* 2. the target network over the last T + 1 steps, step by step */
    for (int t = BI; t <= M; t++) seq_step(w, target, t, K, w->st_tg, w->tout + (size_t)(t - BI) * K * O);
    /* 3. the online network over them with tapes: pre, the LSTM from the burned-in state
     * (held fixed: no gradient into the burn-in), post */
    for (int k = 0; k < K; k++) {
        memcpy(w->h0 + (size_t)k * H, w->st_on + (size_t)k * S, sizeof(float) * (size_t)H);
        memcpy(w->c0 + (size_t)k * H, w->st_on + (size_t)k * S + H, sizeof(float) * (size_t)H);
    }
    const float *x = w->x + (size_t)BI * K * D, *lin = x;
    if (p->pre) {
        nevo_policy_forward_tape(p->pre, theta, np, w->zeros, x, (int)rows, w->a, w->pre_tape);
        lin = w->a;
    }
    nevo_lstm_forward(theta + R->w_off, in, H, T + 1, K, lin, w->mask + (size_t)BI * K, w->h0, w->c0, w->h, NULL,
                      NULL, w->lstm_tape);
    nevo_policy_forward_tape(p->post, theta, np, w->zeros, w->h, (int)rows, w->out, w->post_tape);
    /* 4. targets and TD errors over the T steps */
    nevo_r2d2_q(p, w->out, (int)rows, w->qo);
    nevo_r2d2_q(p, w->tout, (int)rows, w->qt);
    for (int k = 0; k < K; k++)
        for (int t = 0; t < T; t++) {
            w->rw[(size_t)t * K + k] = rew[(size_t)k * M + BI + t];
            w->ds[(size_t)t * K + k] = disc[(size_t)k * M + BI + t];
        }
    nevo_r2d2_targets(w->rw, w->ds, w->qo, w->qt, T, K, A, rl->n_step, rl->rescale_eps, w->y);
    memset(w->dout, 0, sizeof(float) * rows * O); /* the bootstrap step: no gradient */
    double L = 0.0;
    for (int k = 0; k < K; k++) {
        double sq = 0.0, sum = 0.0, mx = 0.0;
        for (int t = 0; t < T; t++) {
            size_t r = (size_t)t * K + k;
            int a = act[(size_t)k * M + BI + t];
            float delta = w->y[r] - w->qo[r * A + a];
            double ad = fabs((double)delta);
            sq += (double)delta * delta;
            sum += ad;
            if (ad > mx) mx = ad;
            /* dL/dQ(x_t, a_t) = -weight delta; through the dueling head dV = g, dA_j = g ([j = a] - 1 / A) */
            float g = -weight[k] * delta * scale;
            float *d = w->dout + r * O;
            if (O == A) {
                d[a] = g;
            } else {
                float share = g / (float)A;
                for (int j = 0; j < A; j++) d[j] = -share;
                d[a] = g - share;
                d[A] = g;
            }
        }
        L += weight[k] * 0.5 * sq;
        priority[k] = (float)(rl->priority_eta * mx + (1.0 - rl->priority_eta) * sum / T);
    }
    if (!isfinite(L)) return NEVO_ERR_NUMERIC;
    /* 5. backward: post gives dL/dh, the LSTM through time dL/d(its inputs), pre the rest */
    memset(grad, 0, sizeof(float) * np);
    nevo_policy_backward(p->post, theta, np, w->zeros, w->h, (int)rows, w->post_tape, w->dout, grad, np, w->dh,
                         w->gscratch);
    nevo_lstm_backward(theta + R->w_off, in, H, T + 1, K, w->lstm_tape, w->dh, NULL, NULL, grad + R->w_off,
                       p->pre ? w->dx : NULL, NULL, NULL, w->lscratch);
    if (p->pre) {
        nevo_act_backward(p->pre->layers[p->pre->n_layers - 1].act, w->a, w->dx, (int)rows * in);
        nevo_policy_backward(p->pre, theta, np, w->zeros, x, (int)rows, w->pre_tape, w->dx, grad, np, NULL,
                             w->gscratch);
    }
    *loss = L;
    return NEVO_OK;
}

/* ---- the algorithm ------------------------------------------------------------------- */

/* The replay buffer: cap sequences, each M + 1 observations, flags, the start state and
 * M transitions; filled in a ring (the oldest overwritten). */
typedef struct Replay {
    int cap, count, pos;
    float *obs;       /* (cap, M + 1, D) */
    uint8_t *reset;   /* (cap, M + 1) */
    float *state;     /* (cap, S) */
    int *act;         /* (cap, M) */
    float *rew, *disc;/* (cap, M) */
    double *prio;     /* (cap) */
    double max_prio;  /* the largest priority so far: new sequences enter with it */
} Replay;

/* NEVO_R2D2_CHUNK sequences as nevo_r2d2_batch reads them (sequence-major). */
typedef struct Stage {
    float *obs, *state, *rew, *disc;
    uint8_t *reset;
    int *act;
} Stage;

typedef struct R2 {
    NevoAlgo base;
    const NevoRLConfig *rl;
    const NevoEnv *env;
    int E, T, BI, M, P, A, O, D, S, B;
    size_t np;
    float *theta, *target;
    NevoOptim *opt;
    double *grad;            /* (np + 1): the batch's gradient, then its summed loss */
    int workers;
    int fwd_rows;            /* rows an acting forward call takes: 16 on the CPU (spread over the
                                pool), all E on a device, whose cost is per call */
    NevoPoolAuto fwd_way, step_way; /* sync mode: each step's two jobs, on the pool or alone */
    NevoR2D2Work **work;     /* per worker */
    float **fgrad;           /* per worker: a chunk's float gradient */
    /* the envs and their histories (async mode: the runtime's actors own the envs, and
       only tau, h_len and the histories are allocated) */
    NevoActorEnvs envs;
    float *obs;              /* (E, D) the observations to act on */
    float *state;            /* (E, S) each env's recurrent state (before acting on obs) */
    uint8_t *fresh;          /* (E) obs begins an episode */
    long long *tau;          /* (E) steps taken */
    int *h_len;              /* (E) steps the history holds in a row (at most M) */
    /* each env's last M steps, a ring indexed by step mod M */
    float *h_obs;            /* (E, M, D) */
    float *h_state;          /* (E, M, S) the state before the step */
    uint8_t *h_reset;        /* (E, M) */
    int *h_act;              /* (E, M) */
    float *h_rew, *h_disc;   /* (E, M) */
    Stage *stage;            /* per worker: a chunk's sequences */
    double *done_ret;        /* (E) a return finished at the current step, */
    int *done;               /* (E) ... where done[e] */
    float *out;              /* (E, O) the acting forward */
    int *nets0;              /* (E) zeros: every row runs network 0 */
    float *sin;              /* (E, S) the states the acting forward read */
    double *epsilon;         /* (E) each env's exploration */
    NevoBackend *backend;
    NevoRows *rows;
    NevoWorkspace **ws;
    Replay rp;
    /* an update's batch */
    int *slot;               /* (B) drawn sequences */
    float *weight;           /* (B) their IS weights */
    float *prio;             /* (B) their new priorities */
    double *cum;             /* (replay) prefix sums of priority^alpha */
    /* async mode */
    NevoSeed *seed;
    /* the generation in progress */
    NevoRLGen gen;
    double last_loss;
    long long updates;
    NevoRLBest best;         /* rl.validation_every: the best validated parameters */
} R2;

/* the acting forward of envs [fwd_rows k, fwd_rows (k + 1)) */
static void forward_item(void *ctx, int k, int worker) {
    R2 *v = ctx;
    int lo = v->fwd_rows * k, n = v->E - lo < v->fwd_rows ? v->E - lo : v->fwd_rows;
    nevo_backend_forward(v->backend, v->base.policy, v->rows, v->nets0, v->obs + (size_t)lo * v->D, n,
                         v->state + (size_t)lo * v->S, v->out + (size_t)lo * v->O, v->ws[worker]);
}

/* Env e's history: the step it is about to take (its observation, the state the
 * network read, whether an episode begins there), then what the step did. */
static void hist_begin(R2 *v, int e, const float *obs, const float *state, int fresh) {
    size_t D = (size_t)v->D, S = (size_t)v->S, h = (size_t)e * v->M + (size_t)(v->tau[e] % v->M);
    memcpy(v->h_obs + h * D, obs, sizeof(float) * D);
    memcpy(v->h_state + h * S, state, sizeof(float) * S);
    v->h_reset[h] = (uint8_t)fresh;
}

static void hist_end(R2 *v, int e, int act, float rew, float disc) {
    size_t h = (size_t)e * v->M + (size_t)(v->tau[e] % v->M);
    v->h_act[h] = act, v->h_rew[h] = rew, v->h_disc[h] = disc;
    v->tau[e]++;
    if (v->h_len[e] < v->M) v->h_len[e]++;
}

/* env e: its history records the step, an epsilon-greedy action, one env step */
static void step_item(void *ctx, int e, int worker) {
    R2 *v = ctx;
    NevoActorEnvs *s = &v->envs;
    size_t D = (size_t)v->D, S = (size_t)v->S;
    hist_begin(v, e, v->obs + (size_t)e * D, v->sin + (size_t)e * S, v->fresh[e]);
    NevoVTraceStep st;
    nevo_r2d2_env_act(v->env, nevo_actor_env(s, e), v->base.policy, v->out + (size_t)e * v->O, v->epsilon[e],
                      v->base.cfg->seed, (uint32_t)e, s->steps[e]++, v->rl, v->obs + (size_t)e * D, &st);
    hist_end(v, e, st.act, st.rew, st.disc);
    s->ret[e] += st.reward;
    s->len[e]++;
    v->done[e] = st.end;
    v->fresh[e] = (uint8_t)st.end;
    if (st.end) { /* the next observation is the next episode's first; its state starts at zero */
        v->done_ret[e] = s->ret[e];
        nevo_actor_envs_start(s, e, v->obs + (size_t)e * D);
        memset(v->state + (size_t)e * S, 0, sizeof(float) * S);
    }
    (void)worker;
}

/* Env e's last M steps and the observation after them (next, an episode's first where
 * next_fresh) into replay, where they are a whole sequence that begins on the period:
 * at the ring's next slot, with the largest priority so far. */
static void maybe_cut(R2 *v, int e, const float *next, int next_fresh) {
    Replay *rp = &v->rp;
    int M = v->M, i = rp->pos;
    if (v->h_len[e] < M || (v->tau[e] - M) % v->P != 0) return;
    size_t D = (size_t)v->D, S = (size_t)v->S;
    long long start = v->tau[e] - M;
    for (int t = 0; t < M; t++) {
        size_t h = (size_t)e * M + (size_t)((start + t) % M), j = (size_t)i * M + (size_t)t;
        memcpy(rp->obs + ((size_t)i * (M + 1) + t) * D, v->h_obs + h * D, sizeof(float) * D);
        rp->reset[(size_t)i * (M + 1) + t] = v->h_reset[h];
        rp->act[j] = v->h_act[h], rp->rew[j] = v->h_rew[h], rp->disc[j] = v->h_disc[h];
        if (t == 0) memcpy(rp->state + (size_t)i * S, v->h_state + h * S, sizeof(float) * S);
    }
    memcpy(rp->obs + ((size_t)i * (M + 1) + M) * D, next, sizeof(float) * D);
    rp->reset[(size_t)i * (M + 1) + M] = (uint8_t)next_fresh;
    rp->prio[i] = rp->max_prio;
    rp->pos = (i + 1) % rp->cap;
    if (rp->count < rp->cap) rp->count++;
}

/* One actor step of every env: the forward (the states it reads kept for the
 * histories), then the envs. */
static void act_step(R2 *v) {
    memcpy(v->sin, v->state, sizeof(float) * (size_t)v->E * (size_t)v->S);
    if (v->fwd_rows >= v->E) /* one call: a device's */
        forward_item(v, 0, 0);
    else
        nevo_pool_run_auto(v->base.pool, &v->fwd_way, (v->E + v->fwd_rows - 1) / v->fwd_rows, forward_item, v);
    nevo_pool_run_auto(v->base.pool, &v->step_way, v->E, step_item, v);
    for (int e = 0; e < v->E; e++) /* in env order: the generation's returns are ordered */
        if (v->done[e]) nevo_rl_gen_episode(&v->gen, v->done_ret[e]);
}

/* Chunk k of the update: drawn sequences [K k, K k + K), one forward and backward. */
static NevoStatus learn_chunk(void *ctx, int k, int worker, double *out, NevoError *err) {
    R2 *v = ctx;
    Replay *rp = &v->rp;
    int j0 = k * NEVO_R2D2_CHUNK, n = v->B - j0 < NEVO_R2D2_CHUNK ? v->B - j0 : NEVO_R2D2_CHUNK, M = v->M;
    size_t D = (size_t)v->D, S = (size_t)v->S;
    Stage *sg = &v->stage[worker]; /* the chunk's sequences side by side, as nevo_r2d2_batch reads them */
    for (int j = 0; j < n; j++) {
        int i = v->slot[j0 + j];
        memcpy(sg->obs + (size_t)j * (M + 1) * D, rp->obs + (size_t)i * (M + 1) * D, sizeof(float) * (M + 1) * D);
        memcpy(sg->state + (size_t)j * S, rp->state + (size_t)i * S, sizeof(float) * S);
        memcpy(sg->rew + (size_t)j * M, rp->rew + (size_t)i * M, sizeof(float) * M);
        memcpy(sg->disc + (size_t)j * M, rp->disc + (size_t)i * M, sizeof(float) * M);
        memcpy(sg->reset + (size_t)j * (M + 1), rp->reset + (size_t)i * (M + 1), (size_t)M + 1);
        memcpy(sg->act + (size_t)j * M, rp->act + (size_t)i * M, sizeof(int) * M);
    }
    double loss;
    float *g = v->fgrad[worker];
    NevoStatus st = nevo_r2d2_batch(v->base.policy, v->rl, v->theta, v->target, n, sg->obs, sg->reset, sg->state,
                                    sg->act, sg->rew, sg->disc, v->weight + j0,
                                    1.0f / (float)((size_t)v->T * (size_t)v->B), v->work[worker], g, &loss,
                                    v->prio + j0);
    if (st)
        return nevo_error(err, st, "algo r2d2: the loss is not finite at update %lld; lower optim.lr or set "
                          "optim.clip_norm", v->updates);
    for (size_t i = 0; i < v->np; i++) out[i] = g[i];
    out[v->np] = loss;
    return NEVO_OK;
}

/* The batch: B sequences drawn with probability p_i^alpha / sum_j p_j^alpha (prefix
 * sums in slot order, in double), their IS weights (N P(i))^-beta over the batch's
 * largest. */
static void draw_batch(R2 *v) {
    Replay *rp = &v->rp;
    double alpha = v->rl->priority_exponent, sum = 0.0;
    for (int i = 0; i < rp->count; i++) {
        double pr = rp->prio[i] > 1e-6 ? rp->prio[i] : 1e-6;
        sum += alpha == 0.0 ? 1.0 : pow(pr, alpha);
        v->cum[i] = sum;
    }
    double wmax = 0.0;
    for (int j = 0; j < v->B; j++) {
        NevoRng rng;
        nevo_rng_init(&rng, v->base.cfg->seed, NEVO_RNG_REPLAY, (uint32_t)v->updates, (uint32_t)j,
                      (uint32_t)((uint64_t)v->updates >> 32));
        double u = nevo_rng_uniform(&rng) * sum;
        int lo = 0, hi = rp->count - 1; /* the first i with cum[i] > u */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (v->cum[mid] > u) hi = mid;
            else lo = mid + 1;
        }
        v->slot[j] = lo;
        double prob = (v->cum[lo] - (lo ? v->cum[lo - 1] : 0.0)) / sum;
        double wt = pow((double)rp->count * prob, -v->rl->is_exponent);
        v->weight[j] = (float)wt;
        if (wt > wmax) wmax = wt;
    }
    for (int j = 0; j < v->B; j++) v->weight[j] = (float)(v->weight[j] / wmax);
}

static NevoStatus update(R2 *v, NevoError *err) {
    draw_batch(v);
    int chunks = (v->B + NEVO_R2D2_CHUNK - 1) / NEVO_R2D2_CHUNK;
    NevoStatus st = nevo_replicas_reduce(NULL, v->base.pool, chunks, v->np + 1, learn_chunk, v, v->grad, err);
    if (st) return st;
    double norm = 0.0;
    for (size_t i = 0; i < v->np; i++) norm += v->grad[i] * v->grad[i];
    if (!isfinite(norm))
        return nevo_error(err, NEVO_ERR_NUMERIC, "algo r2d2: the gradient is not finite at update %lld; lower "
                          "optim.lr or set optim.clip_norm", v->updates);
    nevo_optim_step(v->opt, v->theta, v->grad, 1.0);
    v->last_loss = v->grad[v->np] / ((double)v->B * v->T);
    for (int j = 0; j < v->B; j++) { /* in batch order: a sequence drawn twice keeps its last */
        v->rp.prio[v->slot[j]] = v->prio[j];
        if (v->prio[j] > v->rp.max_prio) v->rp.max_prio = v->prio[j];
    }
    v->updates++;
    if (v->updates % v->rl->target_period == 0) memcpy(v->target, v->theta, sizeof(float) * v->np);
    return NEVO_OK;
}

/* One learner step: rl.period actor steps of every env, their sequences into replay,
 * one update once replay holds rl.replay_start. */
static NevoStatus learner_step(R2 *v, NevoError *err) {
    /* this step's parameters: on the CPU a view of theta, on a device written in place */
    if (v->rows)
        nevo_rows_write(v->rows, 0, 1, v->np, v->theta);
    else
        v->rows = nevo_rows_host(v->backend, v->theta, v->np, 1);
    for (int k = 0; k < v->P; k++) {
        act_step(v);
        for (int e = 0; e < v->E; e++)
            maybe_cut(v, e, v->obs + (size_t)e * v->D, v->fresh[e]);
    }
    v->gen.frames += (long long)v->P * v->E;
    if (v->rp.count < v->rl->replay_start) return NEVO_OK;
    return update(v, err);
}

/* ---- async mode: the runtime's learner ----------------------------------------------- */

/* The trajectories that have come (each of rl.period steps of one env) extend their
 * envs' histories, which hand whole sequences to replay as sync mode's do; then one
 * update once replay holds rl.replay_start. A trajectory that does not continue its
 * env's last one (the runtime dropped those in flight when a generation ended) starts
 * the history afresh. */
static NevoStatus async_learn(void *ctx, const NevoTrajectory *batch, int n, float *theta, NevoError *err) {
    R2 *v = ctx;
    size_t D = (size_t)v->D, S = (size_t)v->S;
    for (int j = 0; j < n; j++) {
        const NevoTrajectory *tr = &batch[j];
        int e = tr->env;
        if (tr->start != v->tau[e]) v->tau[e] = tr->start, v->h_len[e] = 0;
        for (int t = 0; t < v->P; t++) {
            hist_begin(v, e, tr->obs + (size_t)t * D, tr->state + (size_t)t * S, tr->reset[t]);
            hist_end(v, e, tr->act[t], tr->rew[t], tr->disc[t]);
            maybe_cut(v, e, tr->obs + (size_t)(t + 1) * D, tr->reset[t + 1]);
        }
    }
    NevoStatus st = v->rp.count >= v->rl->replay_start ? update(v, err) : NEVO_OK;
    memcpy(theta, v->theta, sizeof(float) * v->np);
    return st;
}

static void async_episode(void *ctx, double ret, int length) {
    (void)length;
    nevo_rl_gen_episode(&((R2 *)ctx)->gen, ret); /* called with the runtime's episode lock held */
}

/* ---- generations, state ----------------------------------------------------------------- */

static NevoStatus r2_train(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    R2 *v = (R2 *)a;
    nevo_rl_gen_begin(&v->gen, v->seed);
    long long updates0 = v->updates;
    /* the schedule's rate (async: as if its generations ran sync's frames) */
    v->opt->lr = a->cfg->optim.lr * nevo_algo_lr_scale(a, (double)v->rl->steps_per_generation * v->P * v->E);
    NevoStatus st = NEVO_OK;
    if (v->seed)
        st = nevo_seed_run(v->seed, v->rl->steps_per_generation, 0, err);
    else
        for (int k = 0; k < v->rl->steps_per_generation && st == NEVO_OK; k++) st = learner_step(v, err);
    if (st) return st;
    nevo_rl_gen_stats(&v->gen, v->seed, v->updates, v->updates - updates0, v->E, v->opt->lr, stats);
    stats->has_replay = 1;
    stats->rl_replay = v->rp.count;
    stats->rl_loss = v->last_loss;
    return nevo_rl_best_after(&v->best, a, v->theta, stats, err);
}

static void r2_best(const NevoAlgo *a, float *theta) {
    const R2 *v = (const R2 *)a;
    memcpy(theta, nevo_rl_best_params(&v->best, v->theta), sizeof(float) * v->np);
}

#define R2_STATE_MAGIC 0x52324431u /* "R2D1" */

/* The whole state, so a resumed run is the same bits: counters, both networks, the
 * optimiser's moments, every env (actor_envs.h) with its recurrent state and its last M
 * steps, and the replay buffer. */
static void r2_save(const NevoAlgo *a, NevoBuf *b) {
    const R2 *v = (const R2 *)a;
    size_t E = (size_t)v->E, M = (size_t)v->M, D = (size_t)v->D, S = (size_t)v->S;
    const Replay *rp = &v->rp;
    nevo_buf_u32(b, R2_STATE_MAGIC);
    nevo_buf_u32(b, (uint32_t)a->generation);
    nevo_buf_u64(b, (uint64_t)v->updates);
    nevo_buf_u64(b, (uint64_t)v->np);
    nevo_buf_u32(b, (uint32_t)v->E);
    nevo_buf_u32(b, (uint32_t)v->M);
    nevo_buf_u32(b, (uint32_t)rp->cap);
    nevo_buf_f64(b, v->gen.last_mean);
    nevo_buf_f64(b, v->last_loss);
    nevo_buf_f32s(b, v->theta, v->np);
    nevo_buf_f32s(b, v->target, v->np);
    nevo_optim_save(v->opt, b);
    nevo_rl_best_save(&v->best, b);
    nevo_buf_u32(b, v->seed ? 0u : 1u); /* the envs and their histories follow (sync) */
    if (!v->seed) {
        nevo_actor_envs_save(&v->envs, v->obs, b);
        nevo_buf_f32s(b, v->state, E * S);
        nevo_buf_put(b, v->fresh, E);
        for (size_t e = 0; e < E; e++) nevo_buf_u64(b, (uint64_t)v->tau[e]);
        nevo_buf_f32s(b, v->h_obs, E * M * D);
        nevo_buf_f32s(b, v->h_state, E * M * S);
        nevo_buf_put(b, v->h_reset, E * M);
        for (size_t i = 0; i < E * M; i++) nevo_buf_u32(b, (uint32_t)v->h_act[i]);
        nevo_buf_f32s(b, v->h_rew, E * M);
        nevo_buf_f32s(b, v->h_disc, E * M);
    }
    /* the replay buffer: its filled slots */
    size_t n = (size_t)rp->count;
    nevo_buf_u32(b, (uint32_t)rp->count);
    nevo_buf_u32(b, (uint32_t)rp->pos);
    nevo_buf_f64(b, rp->max_prio);
    nevo_buf_f32s(b, rp->obs, n * (M + 1) * D);
    nevo_buf_put(b, rp->reset, n * (M + 1));
    nevo_buf_f32s(b, rp->state, n * S);
    for (size_t i = 0; i < n * M; i++) nevo_buf_u32(b, (uint32_t)rp->act[i]);
    nevo_buf_f32s(b, rp->rew, n * M);
    nevo_buf_f32s(b, rp->disc, n * M);
    nevo_buf_f64s(b, rp->prio, n);
}

/* Every value a later step indexes or computes with is checked: actions in [0, A),
 * flags 0 or 1, floats finite, discounts in [0, 1], priorities finite and >= 0. */
static NevoStatus r2_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    R2 *v = (R2 *)a;
    size_t E = (size_t)v->E, M = (size_t)v->M, D = (size_t)v->D, S = (size_t)v->S;
    Replay *rp = &v->rp;
    if (nevo_read_u32(r) != R2_STATE_MAGIC) return nevo_error(err, NEVO_ERR_CORRUPT, "not an r2d2 state");
    uint32_t gen = nevo_read_u32(r);
    uint64_t updates = nevo_read_u64(r), np = nevo_read_u64(r);
    uint32_t Er = nevo_read_u32(r), Mr = nevo_read_u32(r), cap = nevo_read_u32(r);
    double last = nevo_read_f64(r), loss = nevo_read_f64(r);
    if (!nevo_reader_ok(r, false) || np != v->np || Er != E || Mr != M || cap != (uint32_t)rp->cap ||
        gen > INT32_MAX || updates > INT64_MAX || !isfinite(last) || !isfinite(loss))
        return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state of %llu parameters, %u envs, sequences of %u steps and "
                          "a buffer of %u, %u generations (this run: %zu, %zu, %zu and %d)", (unsigned long long)np,
                          Er, Mr, cap, gen, v->np, E, M, rp->cap);
    nevo_read_f32s(r, v->theta, v->np);
    nevo_read_f32s(r, v->target, v->np);
    NevoStatus st = nevo_optim_load(v->opt, r, err);
    if (st == NEVO_OK) st = nevo_rl_best_load(&v->best, r, err);
    if (st) return st;
    uint32_t envs = nevo_read_u32(r);
    if (envs && v->seed)
        return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state holds a sync run's envs, but this run is async");
    if (!envs && !v->seed)
        return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state is an async run's (no envs), but this run is sync");
    if (envs) {
        st = nevo_actor_envs_load(&v->envs, r, v->obs, "r2d2 state", err);
        if (st) return st;
        nevo_read_f32s(r, v->state, E * S);
        nevo_read(r, v->fresh, E);
        for (size_t e = 0; e < E; e++) {
            v->tau[e] = (long long)nevo_read_u64(r);
            /* a sync run's histories have no gaps */
            v->h_len[e] = v->tau[e] < v->M && v->tau[e] >= 0 ? (int)v->tau[e] : v->M;
        }
        nevo_read_f32s(r, v->h_obs, E * M * D);
        nevo_read_f32s(r, v->h_state, E * M * S);
        nevo_read(r, v->h_reset, E * M);
        for (size_t i = 0; i < E * M; i++) v->h_act[i] = (int)nevo_read_u32(r);
        nevo_read_f32s(r, v->h_rew, E * M);
        nevo_read_f32s(r, v->h_disc, E * M);
    }
    uint32_t count = nevo_read_u32(r), pos = nevo_read_u32(r);
    double max_prio = nevo_read_f64(r);
    if (!nevo_reader_ok(r, false) || count > cap || pos >= cap || (count < cap && pos != count) ||
        !isfinite(max_prio) || max_prio <= 0)
        return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state: its replay counters are out of range or truncated");
    size_t n = count;
    nevo_read_f32s(r, rp->obs, n * (M + 1) * D);
    nevo_read(r, rp->reset, n * (M + 1));
    nevo_read_f32s(r, rp->state, n * S);
    for (size_t i = 0; i < n * M; i++) rp->act[i] = (int)nevo_read_u32(r);
    nevo_read_f32s(r, rp->rew, n * M);
    nevo_read_f32s(r, rp->disc, n * M);
    nevo_read_f64s(r, rp->prio, n);
    if (!nevo_reader_ok(r, false)) return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state is truncated");
    const struct {
        const char *what;
        const float *x;
        size_t n;
    } fl[] = {{"parameter", v->theta, v->np},       {"target parameter", v->target, v->np},
              {"recurrent state", v->state, envs ? E * S : 0}, {"history observation", v->h_obs, E * M * D},
              {"history state", v->h_state, E * M * S}, {"history reward", v->h_rew, E * M},
              {"replay observation", rp->obs, n * (M + 1) * D}, {"replay state", rp->state, n * S},
              {"replay reward", rp->rew, n * M}};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        size_t bad = nevo_first_nonfinite(fl[i].x, fl[i].n);
        if (bad < fl[i].n) return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state: %s %zu is not finite", fl[i].what, bad);
    }
    for (size_t e = 0; envs && e < E; e++)
        if (v->fresh[e] > 1 || v->tau[e] < 0 || v->tau[e] > (long long)INT64_MAX / 2 ||
            (long long)v->envs.steps[e] != v->tau[e])
            return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state: env %zu's step counters disagree", e);
    for (size_t i = 0; i < E * M; i++)
        if (v->h_reset[i] > 1 || v->h_act[i] < 0 || v->h_act[i] >= v->A || !(v->h_disc[i] >= 0 && v->h_disc[i] <= 1))
            return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state: history step %zu is out of range", i);
    for (size_t i = 0; i < n * (M + 1); i++)
        if (rp->reset[i] > 1) return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state: replay flag %zu is not 0 or 1", i);
    for (size_t i = 0; i < n * M; i++)
        if (rp->act[i] < 0 || rp->act[i] >= v->A || !(rp->disc[i] >= 0 && rp->disc[i] <= 1))
            return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state: replay step %zu is out of range", i);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(rp->prio[i]) || rp->prio[i] < 0)
            return nevo_error(err, NEVO_ERR_CORRUPT, "r2d2 state: replay priority %zu is out of range", i);
    rp->count = (int)count;
    rp->pos = (int)pos;
    rp->max_prio = max_prio;
    a->generation = (int)gen;
    v->updates = (long long)updates;
    v->gen.last_mean = last;
    v->last_loss = loss;
    if (v->seed) nevo_seed_set_params(v->seed, v->theta); /* its envs begin new episodes */
    return NEVO_OK;
}

static void r2_free(NevoAlgo *a) {
    R2 *v = (R2 *)a;
    nevo_seed_free(v->seed);
    nevo_actor_envs_free(&v->envs);
    for (int w = 0; v->work && w < v->workers; w++) {
        nevo_r2d2_work_free(v->work[w]);
        free(v->fgrad[w]);
        Stage *sg = &v->stage[w];
        void *q[] = {sg->obs, sg->state, sg->rew, sg->disc, sg->reset, sg->act};
        for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) free(q[i]);
        if (v->ws) nevo_workspace_free(v->ws[w]);
    }
    Replay *rp = &v->rp;
    void *p[] = {v->work, v->fgrad, v->stage, v->ws, v->theta, v->target, v->grad, v->obs, v->state, v->fresh,
                 v->tau, v->h_len, v->sin, v->epsilon, v->h_obs, v->h_state, v->h_reset, v->h_act, v->h_rew, v->h_disc, v->done_ret, v->done,
                 v->out, v->nets0, v->slot, v->weight, v->prio, v->cum, v->gen.ret, rp->obs, rp->reset, rp->state, rp->act,
                 rp->rew, rp->disc, rp->prio};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    nevo_optim_free(v->opt);
    nevo_rl_best_free(&v->best);
    nevo_rows_free(v->rows);
    nevo_backend_free(v->backend);
    free(v);
}

static const NevoAlgoOps r2_ops = {
    .best = r2_best,
    .save = r2_save,
    .load = r2_load,
    .free = r2_free,
    .train = r2_train,
};

static int period_of(const NevoRLConfig *rl) { return rl->period > 0 ? rl->period : (rl->unroll + 1) / 2; }

NevoStatus nevo_r2d2_check(const NevoConfig *cfg, int variant, NevoError *err) {
    (void)variant;
    const NevoRLConfig *rl = &cfg->rl;
    if (cfg->policy.lstm <= 0)
        return nevo_error(err, NEVO_ERR_INVALID, "algo r2d2 trains a recurrent Q-network: set policy.lstm (units of "
                          "the LSTM layer, e.g. 64)");
    if (cfg->dataset[0]) return nevo_error(err, NEVO_ERR_INVALID, "algo r2d2 learns on an env, not a dataset");
    if ((double)rl->burn_in + rl->unroll > 4096)
        return nevo_error(err, NEVO_ERR_INVALID, "rl.burn_in + rl.unroll (%d + %d) must be at most 4096",
                          rl->burn_in, rl->unroll);
    int B = rl->batch > 0 ? rl->batch : rl->envs;
    if (rl->replay_start > rl->replay)
        return nevo_error(err, NEVO_ERR_INVALID, "rl.replay_start (%d) is more than the buffer holds (rl.replay = %d)",
                          rl->replay_start, rl->replay);
    if (B > rl->replay)
        return nevo_error(err, NEVO_ERR_INVALID, "rl.batch (%d) is more sequences than the buffer holds (rl.replay = "
                          "%d)", B, rl->replay);
    if (period_of(rl) > rl->burn_in + rl->unroll)
        return nevo_error(err, NEVO_ERR_INVALID, "rl.period (%d) is longer than a sequence (rl.burn_in + rl.unroll "
                          "= %d): steps between sequences would never be replayed", period_of(rl),
                          rl->burn_in + rl->unroll);
    return NEVO_OK;
}

/* Bytes of the replay buffer and the envs' histories of a config (obs_dim D, state S
 * floats): the largest part of a run's memory. */
static double replay_bytes(const NevoConfig *cfg, double D, double S) {
    double M = (double)cfg->rl.burn_in + cfg->rl.unroll;
    double seq = 4.0 * (M + 1) * D + (M + 1) + 4.0 * S + 12.0 * M + 8.0;
    return cfg->rl.replay * seq + cfg->rl.envs * (M * (4.0 * D + 4.0 * S + 13.0) + 4.0 * (D + S));
}

double nevo_r2d2_state_bytes(const NevoConfig *cfg, int variant, size_t nparams) {
    (void)variant;
    double threads = cfg->threads > 0 ? cfg->threads : nevo_cpu_count();
    double B = cfg->rl.batch > 0 ? cfg->rl.batch : cfg->rl.envs;
    /* parameters twice, two optimiser moments, the double gradient; per thread a float
     * gradient; the reduce's doubles per chunk; the replay buffer without its
     * observations (nevo_r2d2_new checks the whole buffer once it knows the env's size) */
    return (double)nparams * (8.0 + 16.0 + 8.0 + 4.0 * threads + 8.0 * (B / NEVO_R2D2_CHUNK + 1)) +
           replay_bytes(cfg, 0, 2.0 * cfg->policy.lstm);
}

NevoStatus nevo_r2d2_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err) {
    (void)variant;
    *out = NULL;
    const NevoConfig *cfg = base->cfg;
    const NevoEnvSpec *spec = nevo_env_spec(base->env);
    const NevoPolicy *p = base->policy;
    if (spec->action_kind != NEVO_SPACE_DISCRETE)
        return nevo_error(err, NEVO_ERR_INVALID, "algo r2d2 learns Q-values of discrete actions; %s has continuous "
                          "actions", spec->name);
    if (spec->n_actions > NEVO_R2D2_MAX_ACTIONS)
        return nevo_error(err, NEVO_ERR_INVALID, "algo r2d2: %s has %d actions, more than %d", spec->name,
                          spec->n_actions, NEVO_R2D2_MAX_ACTIONS);
    NevoStatus st = nevo_config_memory_limit(replay_bytes(cfg, spec->obs_dim, (double)nevo_policy_state_floats(p)),
                                             "the r2d2 replay buffer (rl.replay sequences) and the envs' histories",
                                             err);
    if (st) return st;
    R2 *v = nevo_alloc(sizeof *v);
    v->base = *base;
    v->base.ops = &r2_ops;
    v->rl = &cfg->rl;
    v->env = base->env;
    v->E = cfg->rl.envs, v->T = cfg->rl.unroll, v->BI = cfg->rl.burn_in, v->M = v->BI + v->T;
    v->P = period_of(&cfg->rl);
    v->A = p->n_act, v->O = p->n_out, v->D = p->obs_dim, v->S = (int)nevo_policy_state_floats(p);
    v->B = cfg->rl.batch > 0 ? cfg->rl.batch : cfg->rl.envs;
    v->np = p->nparams;
    st = nevo_optim_new(&cfg->optim, v->np, &v->opt, err);
    if (st) {
        free(v);
        return st;
    }
    v->theta = nevo_alloc_aligned(sizeof(float) * v->np);
    nevo_rl_best_init(&v->best, cfg, v->np);
    v->target = nevo_alloc_aligned(sizeof(float) * v->np);
    nevo_policy_init_params(p, base->noise, cfg->seed, 0, 0, v->theta);
    memcpy(v->target, v->theta, sizeof(float) * v->np);
    v->grad = nevo_alloc_aligned(sizeof(double) * (v->np + 1));
    v->workers = nevo_pool_threads(base->pool);
    v->work = nevo_alloc(sizeof(NevoR2D2Work *) * (size_t)v->workers);
    v->fgrad = nevo_alloc(sizeof(float *) * (size_t)v->workers);
    v->stage = nevo_alloc(sizeof(Stage) * (size_t)v->workers);
    size_t K = NEVO_R2D2_CHUNK, M = (size_t)v->M, D = (size_t)v->D, S = (size_t)v->S, E = (size_t)v->E;
    for (int w = 0; w < v->workers; w++) {
        v->work[w] = nevo_r2d2_work_new(p, v->BI, v->T, NEVO_R2D2_CHUNK);
        v->fgrad[w] = nevo_alloc_aligned(sizeof(float) * v->np);
        Stage *sg = &v->stage[w];
        sg->obs = nevo_alloc_aligned(sizeof(float) * K * (M + 1) * D);
        sg->state = nevo_alloc(sizeof(float) * K * S);
        sg->rew = nevo_alloc(sizeof(float) * K * M);
        sg->disc = nevo_alloc(sizeof(float) * K * M);
        sg->reset = nevo_alloc(K * (M + 1));
        sg->act = nevo_alloc(sizeof(int) * K * M);
    }
    st = nevo_backend_new(cfg->backend, &v->backend, err);
    if (st) {
        r2_free(&v->base);
        return st;
    }
    v->tau = nevo_alloc(sizeof(long long) * E);
    v->h_len = nevo_alloc(sizeof(int) * E);
    v->h_obs = nevo_alloc(sizeof(float) * E * M * D);
    v->h_state = nevo_alloc(sizeof(float) * E * M * S);
    v->h_reset = nevo_alloc(E * M);
    v->h_act = nevo_alloc(sizeof(int) * E * M);
    v->h_rew = nevo_alloc(sizeof(float) * E * M);
    v->h_disc = nevo_alloc(sizeof(float) * E * M);
    Replay *rp = &v->rp;
    size_t C = (size_t)cfg->rl.replay;
    rp->cap = cfg->rl.replay;
    rp->max_prio = 1.0;
    rp->obs = nevo_alloc(sizeof(float) * C * (M + 1) * D);
    rp->reset = nevo_alloc(C * (M + 1));
    rp->state = nevo_alloc(sizeof(float) * C * S);
    rp->act = nevo_alloc(sizeof(int) * C * M);
    rp->rew = nevo_alloc(sizeof(float) * C * M);
    rp->disc = nevo_alloc(sizeof(float) * C * M);
    rp->prio = nevo_alloc(sizeof(double) * C);
    v->slot = nevo_alloc(sizeof(int) * (size_t)v->B);
    v->weight = nevo_alloc(sizeof(float) * (size_t)v->B);
    v->prio = nevo_alloc(sizeof(float) * (size_t)v->B);
    v->cum = nevo_alloc(sizeof(double) * C);
    if (strcmp(cfg->rl.mode, "async") == 0) { /* the runtime's actors own the envs */
        NevoSeedOptions so = {NEVO_SEED_EPSILON_GREEDY, v->P, 1, cfg->rl.queue};
        st = nevo_seed_new(v->env, p, v->backend, &cfg->rl, cfg->seed, v->theta, &so, async_learn, async_episode, v,
                           &v->seed, err);
        if (st) {
            r2_free(&v->base);
            return st;
        }
        *out = &v->base;
        return NEVO_OK;
    }
    /* sync mode: its envs, their recurrent states and the acting forward's workspaces */
    v->obs = nevo_alloc_aligned(sizeof(float) * E * D);
    v->state = nevo_alloc_aligned(sizeof(float) * E * S);
    v->fresh = nevo_alloc(E);
    v->sin = nevo_alloc_aligned(sizeof(float) * E * S);
    v->epsilon = nevo_alloc(sizeof(double) * E);
    for (int e = 0; e < v->E; e++) v->epsilon[e] = nevo_apex_epsilon(e, v->E, cfg->rl.epsilon, cfg->rl.epsilon_alpha);
    v->done_ret = nevo_alloc(sizeof(double) * E);
    v->done = nevo_alloc(sizeof(int) * E);
    v->out = nevo_alloc_aligned(sizeof(float) * E * (size_t)v->O);
    v->nets0 = nevo_alloc(sizeof(int) * E);
    v->fwd_rows = strcmp(nevo_backend_name(v->backend), "cpu") == 0 ? 16 : v->E;
    v->ws = nevo_alloc(sizeof(NevoWorkspace *) * (size_t)v->workers);
    for (int w = 0; w < (v->fwd_rows >= v->E ? 1 : v->workers); w++) /* one a worker that forwards */
        v->ws[w] = nevo_workspace_new(v->backend, p, v->fwd_rows);
    nevo_actor_envs_init(&v->envs, v->env, v->E, cfg->seed, v->obs);
    memset(v->fresh, 1, E); /* every env's first observation begins an episode */
    *out = &v->base;
    return NEVO_OK;
}
