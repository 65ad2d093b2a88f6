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
/* Number of CPUs this process may run on (its affinity mask; online CPUs where that
 * cannot be read). */
int nevo_cpu_count(void);

#endif
