/* A fixed thread pool running parallel-for loops.
 *
 * nevo_pool_run(pool, n, fn, ctx) calls fn(ctx, i, worker) for every i in [0, n),
 * spread over the pool's threads plus the calling thread, and returns when all are
 * done. `worker` (0 .. threads-1) identifies per-thread scratch memory only: results
 * must never depend on it, so work items are independent and write to slots indexed
 * by i. */
#ifndef NEVO_THREADS_H
#define NEVO_THREADS_H

typedef struct NevoPool NevoPool;
typedef void (*NevoPoolFn)(void *ctx, int item, int worker);

/* A pool of `threads` workers in total (the caller counts as one); threads >= 1. */
NevoPool *nevo_pool_new(int threads);
void nevo_pool_free(NevoPool *pool);
int nevo_pool_threads(const NevoPool *pool);
void nevo_pool_run(NevoPool *pool, int n_items, NevoPoolFn fn, void *ctx);
/* A job run many times over with small items (a step of an actor-learner's envs): run
 * on the pool or by the caller alone, whichever took less time per call in its latest
 * trial. Sharing a few microseconds of work costs more than it saves where a thread
 * waits for a core another program holds. Every NEVO_AUTO_PERIOD calls the first
 * NEVO_AUTO_TRIAL alternate the two ways; the faster on average runs the rest. Results
 * never depend on the way (items are independent). Zero-initialise one per job. */
#define NEVO_AUTO_PERIOD 1024
#define NEVO_AUTO_TRIAL 32
typedef struct NevoPoolAuto {
    long long calls;
    long long ns[2]; /* this trial's time in each way: 0 the pool, 1 the caller alone */
    int alone;       /* the way chosen by the last trial */
} NevoPoolAuto;
void nevo_pool_run_auto(NevoPool *pool, NevoPoolAuto *a, int n_items, NevoPoolFn fn, void *ctx);
/* The way of a's next call (1: the caller alone), and what it took (nevo_pool_run_auto's
 * two halves, apart for tests). */
int nevo_pool_auto_way(const NevoPoolAuto *a);
void nevo_pool_auto_took(NevoPoolAuto *a, int alone, long long ns);

/* Number of CPUs this process may run on (its affinity mask; online CPUs where that
 * cannot be read). */
int nevo_cpu_count(void);

#endif
