/* Thread pool: workers sleep on a condition variable between jobs and take items from
 * a shared atomic counter, so uneven items balance themselves. */
#include "nevo/threads.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "nevo/status.h"

struct NevoPool {
    int threads;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* the current job */
    NevoPoolFn fn;
    void *ctx;
    int n_items;
    atomic_int next;
    int generation; /* bumped per job so sleeping workers see a new one */
    int busy;       /* workers still inside the current job */
    int quit;
};

typedef struct WorkerArg {
    NevoPool *pool;
    int id;
} WorkerArg;

static void drain(NevoPool *p, int worker) {
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n_items) break;
        p->fn(p->ctx, i, worker);
    }
}

static void *worker_main(void *arg) {
    WorkerArg *wa = arg;
    NevoPool *p = wa->pool;
    int id = wa->id;
    free(wa);
    int seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        drain(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

NevoPool *nevo_pool_new(int threads) {
    NEVO_ASSERT(threads >= 1);
    NevoPool *p = nevo_alloc(sizeof *p);
    p->threads = threads;
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
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    atomic_store(&p->next, 0);
    p->busy = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* The CPUs this process may run on: under taskset or a cgroup's cpuset that is fewer
 * than the machine has online, and a thread per online CPU would then share cores. */
int nevo_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
