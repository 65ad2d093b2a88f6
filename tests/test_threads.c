/* Tests for the thread pool (src/core/threads.c): every item of every job runs exactly
 * once, on a worker id in range, whether the workers are spinning between jobs, asleep
 * (jobs further apart than the spin), or outnumber the cores; and the CPU count follows
 * the affinity mask. A lost wake-up hangs the test, and the alarm turns a hang into a
 * failure. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/threads.h"

#define MAX_ITEMS 64

typedef struct Job {
    atomic_int runs[MAX_ITEMS];
    atomic_int bad_worker;
    int threads;
    long item_sleep_ns; /* each item sleeps this long (0: none) */
} Job;

static void sleep_ns(long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static void count_item(void *ctx, int item, int worker) {
    Job *job = ctx;
    if (worker < 0 || worker >= job->threads) atomic_store(&job->bad_worker, 1);
    if (job->item_sleep_ns) sleep_ns(job->item_sleep_ns);
    atomic_fetch_add(&job->runs[item], 1);
}

/* Runs `jobs` jobs of 1..MAX_ITEMS items on a pool of `threads`, pausing `gap_ns`
 * between them, and checks every item ran once per job. */
static void run_jobs(int threads, int jobs, long gap_ns, long item_sleep_ns) {
    NevoPool *pool = nevo_pool_new(threads);
    CHECK_EQ_INT(nevo_pool_threads(pool), threads);
    Job job;
    for (int j = 0; j < jobs; j++) {
        int n = 1 + (j * 7) % MAX_ITEMS;
        memset(&job, 0, sizeof job);
        job.threads = threads;
        job.item_sleep_ns = item_sleep_ns;
        nevo_pool_run(pool, n, count_item, &job);
        for (int i = 0; i < MAX_ITEMS; i++)
            CHECK_MSG(atomic_load(&job.runs[i]) == (i < n), "job %d (%d items, %d threads): item %d ran %d times", j,
                      n, threads, i, atomic_load(&job.runs[i]));
        CHECK(!atomic_load(&job.bad_worker));
        if (gap_ns) sleep_ns(gap_ns);
    }
    nevo_pool_run(pool, 0, count_item, &job); /* no items: returns at once */
    nevo_pool_free(pool);
}

TEST(pool_every_item_once) {
    alarm(60);
    run_jobs(2, 3000, 0, 0);                /* back to back: the workers spin */
    run_jobs(5, 1000, 0, 0);                /* more threads than this machine's cores */
    run_jobs(3, 40, 1000000, 0);            /* 1 ms apart: the workers sleep between jobs */
    run_jobs(3, 20, 0, 500000);             /* long items: the caller sleeps waiting */
    nevo_pool_free(nevo_pool_new(4));       /* freed before any job */
    nevo_pool_free(nevo_pool_new(1));
    alarm(0);
}

TEST(pool_cpu_count_follows_affinity) {
    cpu_set_t saved, one;
    CHECK(sched_getaffinity(0, sizeof saved, &saved) == 0);
    CHECK_EQ_INT(nevo_cpu_count(), CPU_COUNT(&saved));
    int first = 0;
    while (!CPU_ISSET(first, &saved)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    int n = nevo_cpu_count();
    sched_setaffinity(0, sizeof saved, &saved);
    CHECK_EQ_INT(n, 1);
}
