/* The actor-learner runtime (seed.h): actor threads, one inference server thread, a
 * bounded queue of trajectories, and the learner on the caller's thread.
 *
 * Actor a owns envs [E a / N, E (a + 1) / N). Each step it posts one request (its envs'
 * observations) and waits; the server runs a batch when every live actor has a request
 * in, or batch_wait_us after the oldest one arrived, with the parameters published
 * last; the actor draws its actions from its own rows and steps its envs. Every T
 * steps it copies its trajectories into free queue slots (waiting while none is free).
 * The learner takes B at a time, trains, and publishes the new parameters under the
 * lock; the server copies them before its next batch. */
#include "nevo/seed.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nevo/r2d2.h"
#include "nevo/rl.h"
#include "nevo/rng.h"
#include "nevo/vtrace.h"

typedef struct Actor {
    struct NevoSeed *s;
    int e0, n;                /* envs [e0, e0 + n) */
    uint8_t *insts;
    float *cur;               /* (n, D) the observations to act on */
    NevoTrajectory *traj;     /* (n) being filled */
    double *ret;              /* (n) running returns */
    int *len;
    uint32_t *ep;             /* (n) episodes begun */
    uint64_t *steps;          /* (n) actions taken */
    uint8_t *fresh;           /* (n) cur begins an episode: the server zeroes the env's state first */
    float *sin;               /* (n, S) recurrent policies: the state each env's row read */
    /* the request */
    int posted, answered;
    float *out;               /* (n, O) */
    long long version;        /* of the parameters that answered */
    pthread_cond_t cv;
    pthread_t thread;
} Actor;

struct NevoSeed {
    const NevoEnv *env;
    const NevoPolicy *p;
    const NevoRLConfig *rl;
    uint64_t seed;
    int E, T, D, O, A, N, Q, S;
    NevoSeedOptions opt;
    double *epsilon;          /* (E) epsilon-greedy actors: each env's */
    size_t np, isz;
    NevoLearnFn learn;
    NevoEpisodeFn on_episode;
    void *ctx;
    float *theta;             /* the learner's */
    float *pub;               /* published, under mu */
    long long pub_version;
    float *inf;               /* the server's copy */
    long long inf_version;
    Actor *actors;
    pthread_mutex_t mu;       /* requests, queue, published parameters, stats, episodes */
    pthread_cond_t server_cv, queue_cv, free_cv;
    int stop, live, posted;
    double first_post;        /* when the oldest waiting request was posted */
    pthread_t server;
    NevoBackend *backend;     /* where the server's forward runs (borrowed) */
    NevoRows *rows;           /* the server's parameters on it */
    NevoWorkspace *ws;
    int *which;               /* (E) zeros: every row the one network */
    float *x, *y;             /* the server's batch: (E, D), (E, O), the backend's host memory */
    float *state, *bstate;    /* recurrent policies: (E, S) each env's state, the server's alone;
                               * (E, S) the batch's */
    /* the queue: Q slots, each a trajectory's memory */
    NevoTrajectory *slots;
    int *full, n_full, *empty, n_empty; /* FIFO of full slot indices, stack of empty ones */
    int full_head;
    /* frames-only mode */
    long long frame_target;
    /* stats */
    double wall_s, learner_s;
    long long frames, episodes, updates, trajectories, batches, batch_rows, takes, taken;
    double queue_sum, lag_sum, lag_max;
    int running;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void traj_alloc(NevoTrajectory *t, int T, int D, int S) {
    t->obs = nevo_alloc_aligned(sizeof(float) * (size_t)(T + 1) * (size_t)D);
    t->act = nevo_alloc(sizeof(int) * (size_t)T);
    t->mu = nevo_alloc(sizeof(float) * (size_t)T);
    t->rew = nevo_alloc(sizeof(float) * (size_t)T);
    t->disc = nevo_alloc(sizeof(float) * (size_t)T);
    t->reset = nevo_alloc((size_t)T + 1);
    t->state = S ? nevo_alloc(sizeof(float) * (size_t)T * (size_t)S) : NULL;
}

static void traj_free(NevoTrajectory *t) {
    free(t->obs);
    free(t->act);
    free(t->mu);
    free(t->rew);
    free(t->disc);
    free(t->reset);
    free(t->state);
}

/* src's whole content into dst (both of the runtime's T, D and S) */
static void traj_copy(const NevoSeed *s, NevoTrajectory *dst, const NevoTrajectory *src) {
    size_t T = (size_t)s->T, D = (size_t)s->D;
    memcpy(dst->obs, src->obs, sizeof(float) * (T + 1) * D);
    memcpy(dst->act, src->act, sizeof(int) * T);
    memcpy(dst->mu, src->mu, sizeof(float) * T);
    memcpy(dst->rew, src->rew, sizeof(float) * T);
    memcpy(dst->disc, src->disc, sizeof(float) * T);
    memcpy(dst->reset, src->reset, T + 1);
    if (s->S) memcpy(dst->state, src->state, sizeof(float) * T * (size_t)s->S);
    dst->env = src->env;
    dst->start = src->start;
    dst->version = src->version;
}

static void *actor_inst(const Actor *a, int i) { return a->insts + (size_t)i * a->s->isz; }

static void actor_episode(Actor *a, int i, float *obs) {
    NevoSeed *s = a->s;
    uint64_t seed = nevo_rng_derive(s->seed, NEVO_RNG_ACTOR_ENV, a->ep[i]++, (uint32_t)(a->e0 + i), 0);
    nevo_env_forget(s->env, actor_inst(a, i));
    nevo_env_reset(s->env, actor_inst(a, i), seed, obs);
    a->ret[i] = 0.0;
    a->len[i] = 0;
    a->fresh[i] = 1;
}

/* ---- the server -------------------------------------------------------------------- */

static void *server_main(void *arg) {
    NevoSeed *s = arg;
    int D = s->D, O = s->O;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->posted && !(s->stop && s->live == 0)) pthread_cond_wait(&s->server_cv, &s->mu);
        if (s->stop && s->live == 0) break;
        /* a batch of every live actor, or what has come within the wait */
        while (s->posted < s->live && !s->stop) {
            double left = s->first_post + 1e-6 * s->rl->batch_wait_us - now_s();
            if (left <= 0) break;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            long ns = (long)(left * 1e9) + until.tv_nsec;
            until.tv_sec += ns / 1000000000L;
            until.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&s->server_cv, &s->mu, &until);
        }
        if (s->pub_version != s->inf_version || !s->rows) { /* the new parameters onto the backend */
            memcpy(s->inf, s->pub, sizeof(float) * s->np);
            s->inf_version = s->pub_version;
            if (s->rows) /* in place: on the CPU a view of inf, on a device a copy */
                nevo_rows_write(s->rows, 0, 1, s->np, s->inf);
            else
                s->rows = nevo_rows_host(s->backend, s->inf, s->np, 1);
        }
        int take[4096], n_take = 0, rows = 0;
        for (int k = 0; k < s->N; k++) {
            Actor *a = &s->actors[k];
            if (!a->posted || a->answered) continue;
            memcpy(s->x + (size_t)rows * D, a->cur, sizeof(float) * (size_t)a->n * D);
            for (int i = 0; i < a->n && s->S; i++) { /* the envs' states into the batch */
                float *st = s->state + (size_t)(a->e0 + i) * s->S;
                if (a->fresh[i]) memset(st, 0, sizeof(float) * (size_t)s->S);
                memcpy(s->bstate + (size_t)(rows + i) * s->S, st, sizeof(float) * (size_t)s->S);
                memcpy(a->sin + (size_t)i * s->S, st, sizeof(float) * (size_t)s->S);
            }
            rows += a->n;
            take[n_take++] = k;
            a->posted = 0;
            s->posted--;
        }
        long long version = s->inf_version;
        pthread_mutex_unlock(&s->mu);
        nevo_backend_forward(s->backend, s->p, s->rows, s->which, s->x, rows, s->S ? s->bstate : NULL, s->y, s->ws);
        pthread_mutex_lock(&s->mu);
        s->batches++;
        s->batch_rows += rows;
        int r = 0;
        for (int j = 0; j < n_take; j++) {
            Actor *a = &s->actors[take[j]];
            memcpy(a->out, s->y + (size_t)r * O, sizeof(float) * (size_t)a->n * O);
            if (s->S) /* the envs' next states */
                memcpy(s->state + (size_t)a->e0 * s->S, s->bstate + (size_t)r * s->S,
                       sizeof(float) * (size_t)a->n * s->S);
            r += a->n;
            a->version = version;
            a->answered = 1;
            pthread_cond_signal(&a->cv);
        }
        if (s->posted) s->first_post = now_s();
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the actors --------------------------------------------------------------------- */

/* Posts the actor's observations and waits for its outputs; 0 when stopping. */
static int infer(Actor *a) {
    NevoSeed *s = a->s;
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (!s->posted) s->first_post = now_s();
    a->posted = 1;
    a->answered = 0;
    s->posted++;
    pthread_cond_signal(&s->server_cv);
    while (!a->answered) pthread_cond_wait(&a->cv, &s->mu);
    a->answered = 0;
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* Copies the actor's n trajectories into free queue slots; 0 when stopping. */
static int hand_over(Actor *a) {
    NevoSeed *s = a->s;
    size_t T = (size_t)s->T;
    pthread_mutex_lock(&s->mu);
    s->frames += (long long)T * a->n;
    if (!s->learn) { /* frames-only mode: nothing trains, nothing is kept */
        if (s->frame_target > 0 && s->frames >= s->frame_target) {
            s->stop = 1;
            pthread_cond_broadcast(&s->queue_cv);
            pthread_cond_broadcast(&s->server_cv);
        }
        int go = !s->stop;
        pthread_mutex_unlock(&s->mu);
        return go;
    }
    for (int i = 0; i < a->n; i++) {
        while (!s->n_empty && !s->stop) pthread_cond_wait(&s->free_cv, &s->mu);
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
        NevoTrajectory *dst = &s->slots[s->empty[--s->n_empty]];
        traj_copy(s, dst, &a->traj[i]);
        s->full[(s->full_head + s->n_full++) % s->Q] = (int)(dst - s->slots);
        s->trajectories++;
        pthread_cond_signal(&s->queue_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return 1;
}

static void *actor_main(void *arg) {
    Actor *a = arg;
    NevoSeed *s = a->s;
    int T = s->T, D = s->D, O = s->O, S = s->S;
    for (int go = 1; go;) {
        for (int i = 0; i < a->n; i++) {
            memcpy(a->traj[i].obs, a->cur + (size_t)i * D, sizeof(float) * (size_t)D);
            a->traj[i].env = a->e0 + i;
            a->traj[i].start = (long long)a->steps[i];
        }
        for (int t = 0; t < T && go; t++) {
            if (!(go = infer(a))) break;
            for (int i = 0; i < a->n; i++) {
                NevoTrajectory *tr = &a->traj[i];
                if (t == 0) tr->version = a->version;
                tr->reset[t] = a->fresh[i];
                a->fresh[i] = 0;
                if (S) memcpy(tr->state + (size_t)t * S, a->sin + (size_t)i * S, sizeof(float) * (size_t)S);
                float *next = tr->obs + (size_t)(t + 1) * D;
                NevoVTraceStep st;
                uint32_t e = (uint32_t)(a->e0 + i);
                if (s->opt.act == NEVO_SEED_SAMPLE)
                    nevo_vtrace_act(s->env, actor_inst(a, i), a->out + (size_t)i * O, s->A, s->seed, e, a->steps[i]++,
                                    s->rl, next, &st);
                else
                    nevo_r2d2_env_act(s->env, actor_inst(a, i), s->p, a->out + (size_t)i * O, s->epsilon[i + a->e0],
                                      s->seed, e, a->steps[i]++, s->rl, next, &st);
                a->ret[i] += st.reward;
                a->len[i]++;
                tr->act[t] = st.act, tr->mu[t] = st.mu, tr->rew[t] = st.rew, tr->disc[t] = st.disc;
                if (st.end) {
                    pthread_mutex_lock(&s->mu);
                    s->episodes++;
                    if (s->on_episode) s->on_episode(s->ctx, a->ret[i], a->len[i]);
                    pthread_mutex_unlock(&s->mu);
                    actor_episode(a, i, next);
                }
                memcpy(a->cur + (size_t)i * D, next, sizeof(float) * (size_t)D);
                if (t == T - 1) tr->reset[T] = a->fresh[i];
            }
        }
        if (go) go = hand_over(a);
    }
    pthread_mutex_lock(&s->mu);
    s->live--;
    pthread_cond_signal(&s->server_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the runtime --------------------------------------------------------------------- */

NevoStatus nevo_seed_new(const NevoEnv *env, const NevoPolicy *p, NevoBackend *backend, const NevoRLConfig *rl,
                         uint64_t seed, const float *theta0, const NevoSeedOptions *opt, NevoLearnFn learn,
                         NevoEpisodeFn on_episode, void *ctx, NevoSeed **out, NevoError *err) {
    *out = NULL;
    int quarter = nevo_cpu_count() / 4;
    int N = rl->actors > 0 ? rl->actors : quarter > 1 ? quarter : 1; /* the learner's pool takes the rest */
    if (N > rl->envs) N = rl->envs;
    if (N > 4096) N = 4096;
    int B = rl->batch > 0 ? rl->batch : rl->envs;
    NevoSeedOptions o = {NEVO_SEED_SAMPLE, rl->unroll, B, B};
    if (opt) o = *opt;
    NEVO_ASSERT(o.T >= 1 && o.take_min >= 1 && o.take_max >= o.take_min);
    if (o.take_min > rl->queue)
        return nevo_error(err, NEVO_ERR_INVALID, "rl.batch (%d) exceeds rl.queue (%d): the learner waits for more "
                          "trajectories than the queue holds", o.take_min, rl->queue);
    NevoSeed *s = nevo_alloc(sizeof *s);
    s->env = env, s->p = p, s->rl = rl, s->seed = seed;
    s->opt = o;
    s->E = rl->envs, s->T = o.T, s->D = p->obs_dim, s->O = p->n_out, s->A = p->n_act;
    s->S = (int)nevo_policy_state_floats(p);
    s->N = N, s->Q = rl->queue;
    if (s->opt.take_max > s->Q) s->opt.take_max = s->Q;
    s->np = p->nparams;
    s->isz = nevo_env_instance_size(env);
    s->learn = learn, s->on_episode = on_episode, s->ctx = ctx;
    s->theta = nevo_alloc_aligned(sizeof(float) * s->np);
    s->pub = nevo_alloc_aligned(sizeof(float) * s->np);
    s->inf = nevo_alloc_aligned(sizeof(float) * s->np);
    memcpy(s->theta, theta0, sizeof(float) * s->np);
    memcpy(s->pub, theta0, sizeof(float) * s->np);
    memcpy(s->inf, theta0, sizeof(float) * s->np);
    s->backend = backend;
    s->ws = nevo_workspace_new(backend, p, s->E);
    s->which = nevo_alloc(sizeof(int) * (size_t)s->E);
    s->x = nevo_backend_host_alloc(backend, sizeof(float) * (size_t)s->E * s->D);
    s->y = nevo_backend_host_alloc(backend, sizeof(float) * (size_t)s->E * s->O);
    s->state = nevo_alloc(sizeof(float) * (size_t)s->E * (size_t)(s->S ? s->S : 1));
    s->bstate = nevo_alloc(sizeof(float) * (size_t)s->E * (size_t)(s->S ? s->S : 1));
    s->epsilon = nevo_alloc(sizeof(double) * (size_t)s->E);
    for (int e = 0; e < s->E; e++) s->epsilon[e] = nevo_apex_epsilon(e, s->E, rl->epsilon, rl->epsilon_alpha);
    s->slots = nevo_alloc(sizeof(NevoTrajectory) * (size_t)s->Q);
    s->full = nevo_alloc(sizeof(int) * (size_t)s->Q);
    s->empty = nevo_alloc(sizeof(int) * (size_t)s->Q);
    for (int q = 0; q < s->Q; q++) {
        traj_alloc(&s->slots[q], s->T, s->D, s->S);
        s->empty[s->n_empty++] = q;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->server_cv, NULL);
    pthread_cond_init(&s->queue_cv, NULL);
    pthread_cond_init(&s->free_cv, NULL);
    s->actors = nevo_alloc(sizeof(Actor) * (size_t)N);
    for (int k = 0; k < N; k++) {
        Actor *a = &s->actors[k];
        a->s = s;
        a->e0 = (int)((long long)s->E * k / N);
        a->n = (int)((long long)s->E * (k + 1) / N) - a->e0;
        a->insts = nevo_alloc_aligned(s->isz * (size_t)a->n);
        a->cur = nevo_alloc_aligned(sizeof(float) * (size_t)a->n * s->D);
        a->out = nevo_alloc_aligned(sizeof(float) * (size_t)a->n * s->O);
        a->traj = nevo_alloc(sizeof(NevoTrajectory) * (size_t)a->n);
        a->ret = nevo_alloc(sizeof(double) * (size_t)a->n);
        a->len = nevo_alloc(sizeof(int) * (size_t)a->n);
        a->ep = nevo_alloc(sizeof(uint32_t) * (size_t)a->n);
        a->steps = nevo_alloc(sizeof(uint64_t) * (size_t)a->n);
        a->fresh = nevo_alloc((size_t)a->n);
        a->sin = nevo_alloc(sizeof(float) * (size_t)a->n * (size_t)(s->S ? s->S : 1));
        pthread_cond_init(&a->cv, NULL);
        for (int i = 0; i < a->n; i++) {
            traj_alloc(&a->traj[i], s->T, s->D, s->S);
            nevo_env_instance_init(env, actor_inst(a, i));
            actor_episode(a, i, a->cur + (size_t)i * s->D);
        }
    }
    *out = s;
    return NEVO_OK;
}

void nevo_seed_free(NevoSeed *s) {
    if (!s) return;
    for (int k = 0; k < s->N; k++) {
        Actor *a = &s->actors[k];
        for (int i = 0; i < a->n; i++) {
            traj_free(&a->traj[i]);
            nevo_env_instance_free(s->env, actor_inst(a, i));
        }
        pthread_cond_destroy(&a->cv);
        void *p[] = {a->insts, a->cur, a->out, a->traj, a->ret, a->len, a->ep, a->steps, a->fresh, a->sin};
        for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    }
    for (int q = 0; q < s->Q; q++) traj_free(&s->slots[q]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->server_cv);
    pthread_cond_destroy(&s->queue_cv);
    pthread_cond_destroy(&s->free_cv);
    nevo_rows_free(s->rows);
    nevo_workspace_free(s->ws);
    nevo_backend_host_free(s->backend, s->x);
    nevo_backend_host_free(s->backend, s->y);
    void *p[] = {s->actors, s->theta, s->pub, s->inf, s->which, s->slots, s->full, s->empty, s->state, s->bstate,
                 s->epsilon};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    free(s);
}

static void start(NevoSeed *s) {
    s->stop = 0;
    s->live = s->N;
    s->posted = 0;
    for (int k = 0; k < s->N; k++) s->actors[k].posted = s->actors[k].answered = 0;
    /* a thread that cannot start is a broken machine, not bad input */
    NEVO_ASSERT(pthread_create(&s->server, NULL, server_main, s) == 0);
    for (int k = 0; k < s->N; k++) NEVO_ASSERT(pthread_create(&s->actors[k].thread, NULL, actor_main, &s->actors[k]) == 0);
}

static void stop(NevoSeed *s) {
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->free_cv);
    pthread_cond_broadcast(&s->server_cv);
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; k < s->N; k++) pthread_join(s->actors[k].thread, NULL);
    pthread_join(s->server, NULL);
}

NevoStatus nevo_seed_run(NevoSeed *s, long long updates, long long frames, NevoError *err) {
    if (s->learn ? updates < 1 : frames < 1) return NEVO_OK;
    double t0 = now_s();
    s->frame_target = s->learn ? 0 : s->frames + frames;
    start(s);
    NevoStatus st = NEVO_OK;
    int most = s->opt.take_max;
    NevoTrajectory *batch = nevo_alloc(sizeof(NevoTrajectory) * (size_t)most);
    int *idx = nevo_alloc(sizeof(int) * (size_t)most);
    if (!s->learn) { /* the actors and the server alone, to a frame count */
        pthread_mutex_lock(&s->mu);
        while (!s->stop) pthread_cond_wait(&s->queue_cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    for (long long u = 0; s->learn && u < updates && st == NEVO_OK; u++) {
        pthread_mutex_lock(&s->mu);
        while (s->n_full < s->opt.take_min) pthread_cond_wait(&s->queue_cv, &s->mu);
        s->queue_sum += s->n_full;
        s->takes++;
        int n = s->n_full < most ? s->n_full : most;
        s->taken += n;
        for (int b = 0; b < n; b++) {
            idx[b] = s->full[s->full_head];
            s->full_head = (s->full_head + 1) % s->Q;
            s->n_full--;
            batch[b] = s->slots[idx[b]];
            double lag = (double)(s->pub_version - batch[b].version);
            s->lag_sum += lag;
            if (lag > s->lag_max) s->lag_max = lag;
        }
        pthread_mutex_unlock(&s->mu);
        double l0 = now_s();
        st = s->learn(s->ctx, batch, n, s->theta, err);
        s->learner_s += now_s() - l0;
        pthread_mutex_lock(&s->mu);
        for (int b = 0; b < n; b++) s->empty[s->n_empty++] = idx[b];
        pthread_cond_broadcast(&s->free_cv);
        if (st == NEVO_OK) {
            memcpy(s->pub, s->theta, sizeof(float) * s->np);
            s->pub_version++;
            s->updates++;
        }
        pthread_mutex_unlock(&s->mu);
    }
    stop(s);
    free(batch);
    free(idx);
    s->wall_s += now_s() - t0;
    return st;
}

void nevo_seed_stats(const NevoSeed *s, NevoSeedStats *out) {
    memset(out, 0, sizeof *out);
    out->wall_s = s->wall_s;
    out->frames = s->frames;
    out->episodes = s->episodes;
    out->updates = s->updates;
    out->trajectories = s->trajectories;
    out->frames_per_s = s->wall_s > 0 ? s->frames / s->wall_s : 0;
    out->updates_per_s = s->wall_s > 0 ? s->updates / s->wall_s : 0;
    out->mean_batch = s->batches ? (double)s->batch_rows / s->batches : 0;
    out->mean_queue = s->takes ? s->queue_sum / s->takes : 0;
    out->mean_lag = s->taken ? s->lag_sum / s->taken : 0;
    out->max_lag = s->lag_max;
    out->learner_s = s->learner_s;
}

const float *nevo_seed_params(const NevoSeed *s) { return s->theta; }

void nevo_seed_set_params(NevoSeed *s, const float *theta) {
    memcpy(s->theta, theta, sizeof(float) * s->np);
    memcpy(s->pub, theta, sizeof(float) * s->np);
    s->pub_version++; /* the server takes them before its next batch */
}
