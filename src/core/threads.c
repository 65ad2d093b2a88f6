/* Thread pool: workers take items from a shared atomic counter, so uneven items balance
 * themselves. Between jobs a worker first spins on the job counter for up to SPIN_NS,
 * then sleeps on a condition variable; the caller likewise spins, then sleeps, waiting
 * for the workers inside its job. A job published while nobody sleeps costs no system
 * call. Why: a generation runs a few jobs with short serial steps between them, and
 * waking a sleeping worker costs more than those steps.
 *
 * The caller waits only for workers that entered the job (the gate): once it has run
 * out of items it closes the gate, and a worker that comes later (asleep, or its core
 * taken by another program) stays out. Waiting for every worker to check in made each
 * short job wait for the slowest thread to be scheduled: V-trace's sync mode (two jobs
 * of a few microseconds a step) ran 4x slower on 2 threads than on 1 beside another
 * program on one of the 2 cores.
 *
 * Spinning only pays while every thread has a core to itself, so a pool with more
 * threads than nevo_cpu_count() does not spin. The spin is short because beside another
 * CPU-bound program a spinning thread holds a core they share, and it does not yield:
 * sched_yield hands such a program whole time slices (docs/BENCHMARKS.md, "Kernel
 * variants", and dev/kernels/NOT_KEPT.md have the measurements). */
#include "nevo/threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "nevo/status.h"

/* How long a thread spins before it sleeps: longer than the serial steps between a
 * generation's jobs usually take, short against a generation. -DSPIN_NS=0 turns the
 * spinning off. */
#ifndef SPIN_NS
#define SPIN_NS 50000
#endif

struct NevoPool {
    int threads;
    long long spin_ns; /* SPIN_NS, or 0 where the threads outnumber the CPUs */
    pthread_t *tids;
    /* mu and the condition variables serve only threads that sleep: a job is published
     * under mu so a worker going to sleep cannot miss it, and the last worker takes mu
     * to wake a caller that sleeps. */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int sleepers;      /* workers asleep on `wake` (under mu) */
    int caller_asleep; /* the caller asleep on `done` (under mu) */
    /* the current job: written while the gate is closed and no worker is inside, read
     * by the workers that enter it */
    NevoPoolFn fn;
    void *ctx;
    int n_items;
    atomic_int next;
    atomic_int generation; /* bumped per job; workers wait for it to move */
    atomic_int gate;       /* workers inside the current job, plus GATE_CLOSED */
    atomic_int quit;
};

#define GATE_CLOSED (1 << 30)

typedef struct WorkerArg {
    NevoPool *pool;
    int id;
} WorkerArg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spins until (*x == value) == equal (returns 1), or spin_ns have passed (returns 0). */
static int spin_until(atomic_int *x, int value, int equal, long long spin_ns) {
    if (spin_ns <= 0) return (atomic_load_explicit(x, memory_order_acquire) == value) == equal;
    long long t0 = 0;
    for (int i = 0;; i++) {
        for (int k = 0; k < 64; k++) {
            if ((atomic_load_explicit(x, memory_order_acquire) == value) == equal) return 1;
            cpu_relax();
        }
        long long t = now_ns();
        if (i == 0) t0 = t;
        else if (t - t0 > spin_ns) return 0;
    }
}

static void drain(NevoPool *p, int worker) {
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_items) break;
        p->fn(p->ctx, i, worker);
    }
}

/* A worker leaves the gate; the last one out of a closed gate wakes a sleeping caller. */
static void leave(NevoPool *p) {
    if (atomic_fetch_sub(&p->gate, 1) == GATE_CLOSED + 1) {
        pthread_mutex_lock(&p->mu);
        if (p->caller_asleep) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *worker_main(void *arg) {
    WorkerArg *wa = arg;
    NevoPool *p = wa->pool;
    int id = wa->id;
    free(wa);
    int seen = 0;
    for (;;) {
        if (!spin_until(&p->generation, seen, 0, p->spin_ns)) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (atomic_load(&p->quit)) break;
        /* the job open now (this one, or a later one whose items are as good), unless
         * its caller has already closed it */
        if (!(atomic_fetch_add(&p->gate, 1) & GATE_CLOSED)) drain(p, id);
        leave(p);
    }
    return NULL;
}

/* Waits (spins, then sleeps) until the closed gate has no worker inside. */
static void wait_empty(NevoPool *p) {
    if (spin_until(&p->gate, GATE_CLOSED, 1, p->spin_ns)) return;
    pthread_mutex_lock(&p->mu);
    p->caller_asleep = 1;
    while (atomic_load(&p->gate) != GATE_CLOSED) pthread_cond_wait(&p->done, &p->mu);
    p->caller_asleep = 0;
    pthread_mutex_unlock(&p->mu);
}

/* Publishes the job already written into p (fn, ctx, n_items, next) and its open gate. */
static void publish(NevoPool *p) {
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    if (p->sleepers) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

NevoPool *nevo_pool_new(int threads) {
    NEVO_ASSERT(threads >= 1);
    NevoPool *p = nevo_alloc(sizeof *p);
    p->threads = threads;
    p->spin_ns = threads <= nevo_cpu_count() ? SPIN_NS : 0;
    atomic_init(&p->gate, GATE_CLOSED);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tids = nevo_alloc(sizeof(pthread_t) * (size_t)threads);
    for (int t = 1; t < threads; t++) {
        WorkerArg *wa = nevo_alloc(sizeof *wa);
        wa->pool = p;
        wa->id = t;
        if (pthread_create(&p->tids[t], NULL, worker_main, wa) != 0)
            nevo_fatal(__FILE__, __LINE__, "could not start thread %d", t);
    }
    return p;
}

void nevo_pool_free(NevoPool *p) {
    if (!p) return;
    atomic_store(&p->quit, 1);
    publish(p);
    for (int t = 1; t < p->threads; t++) pthread_join(p->tids[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->tids);
    free(p);
}

int nevo_pool_threads(const NevoPool *p) { return p->threads; }

void nevo_pool_run(NevoPool *p, int n_items, NevoPoolFn fn, void *ctx) {
    if (n_items <= 0) return;
    if (p->threads == 1 || n_items == 1) {
        for (int i = 0; i < n_items; i++) fn(ctx, i, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store(&p->next, 0);
    /* open the gate: closed and empty since the last job returned, but for a late
     * worker's moment inside it on its way out */
    for (int closed = GATE_CLOSED; !atomic_compare_exchange_weak(&p->gate, &closed, 0); closed = GATE_CLOSED)
        wait_empty(p);
    publish(p);
    drain(p, 0);
    /* the items are all taken: close the gate, then wait for the workers inside */
    if (atomic_fetch_or(&p->gate, GATE_CLOSED) != 0) wait_empty(p);
}

int nevo_pool_auto_way(const NevoPoolAuto *a) {
    long long k = a->calls % NEVO_AUTO_PERIOD;
    return k < NEVO_AUTO_TRIAL ? (int)(k & 1) : a->alone;
}

void nevo_pool_auto_took(NevoPoolAuto *a, int alone, long long ns) {
    long long k = a->calls % NEVO_AUTO_PERIOD;
    if (k == 0) a->ns[0] = a->ns[1] = 0;
    if (k < NEVO_AUTO_TRIAL) a->ns[alone] += ns;
    if (k == NEVO_AUTO_TRIAL - 1) a->alone = a->ns[1] < a->ns[0]; /* as many calls each way */
    a->calls++;
}

void nevo_pool_run_auto(NevoPool *p, NevoPoolAuto *a, int n_items, NevoPoolFn fn, void *ctx) {
    if (p->threads == 1 || n_items <= 1) {
        nevo_pool_run(p, n_items, fn, ctx);
        return;
    }
    int alone = nevo_pool_auto_way(a);
    long long t0 = now_ns();
    if (alone)
        for (int i = 0; i < n_items; i++) fn(ctx, i, 0);
    else
        nevo_pool_run(p, n_items, fn, ctx);
    nevo_pool_auto_took(a, alone, now_ns() - t0);
}

/* The CPUs this process may run on: under taskset or a cgroup's cpuset that is fewer
 * than the machine has online, and a thread per online CPU would then share cores. */
int nevo_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
