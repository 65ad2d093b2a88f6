/* Tests for the thread pool (src/core/threads.c): every item of every job runs exactly
 * once, on a worker id in range, whether the workers are spinning between jobs, asleep
 * (jobs further apart than the spin), or outnumber the cores; a job does not wait for a
 * worker that does not come; and the CPU count follows the affinity mask. A lost
 * wake-up hangs the test, and the alarm turns a hang into a failure. */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/threads.h"

#define MAX_ITEMS 64

/* A job's items write plain (non-atomic) ints, so results the caller reads are only
 * right if the pool orders them before its return; two item functions and two
 * contexts alternate, so a worker running an item with the last job's function or
 * context leaves a wrong mark. */
typedef struct Job {
    int mark;             /* what this job's items write */
    int runs[MAX_ITEMS];  /* mark per item run (plain ints: one writer per item) */
    int worker[MAX_ITEMS];
    long item_sleep_ns;   /* each item sleeps this long (0: none) */
} Job;

static void sleep_ns(long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static void item_a(void *ctx, int item, int worker) {
    Job *job = ctx;
    if (job->item_sleep_ns) sleep_ns(job->item_sleep_ns);
    job->runs[item] += job->mark;
    job->worker[item] = worker;
}

static void item_b(void *ctx, int item, int worker) {
    Job *job = ctx;
    if (job->item_sleep_ns) sleep_ns(job->item_sleep_ns);
    job->runs[item] += 1000 * job->mark;
    job->worker[item] = worker;
}

/* Runs `jobs` jobs of 1..MAX_ITEMS items on a pool of `threads`, pausing between them
 * (gap_ns, or when gap_ns < 0 a pause cycling through 0..120 us, across the spin's
 * length), and checks every item ran once, with its own job's function and context, on
 * a worker id in range. */
static void run_jobs(int threads, int jobs, long gap_ns, long item_sleep_ns) {
    NevoPool *pool = nevo_pool_new(threads);
    CHECK_EQ_INT(nevo_pool_threads(pool), threads);
    Job two[2];
    for (int j = 0; j < jobs; j++) {
        Job *job = &two[j % 2];
        int n = 1 + (j * 7) % MAX_ITEMS;
        memset(job, 0, sizeof *job);
        job->mark = j + 1;
        job->item_sleep_ns = item_sleep_ns;
        int use_b = (j / 2) % 2;
        nevo_pool_run(pool, n, use_b ? item_b : item_a, job);
        int want = use_b ? 1000 * job->mark : job->mark;
        for (int i = 0; i < MAX_ITEMS; i++) {
            CHECK_MSG(job->runs[i] == (i < n ? want : 0), "job %d (%d items, %d threads): item %d has %d, expected %d",
                      j, n, threads, i, job->runs[i], i < n ? want : 0);
            CHECK_MSG(job->worker[i] >= 0 && job->worker[i] < threads, "job %d: item %d on worker %d of %d", j, i,
                      job->worker[i], threads);
        }
        long gap = gap_ns >= 0 ? gap_ns : (long)(j * 7919 % 121) * 1000;
        if (gap) sleep_ns(gap);
    }
    nevo_pool_run(pool, 0, item_a, &two[0]); /* no items: returns at once */
    nevo_pool_free(pool);
}

TEST(pool_every_item_once) {
    alarm(60);
    run_jobs(2, 3000, 0, 0);        /* back to back: the workers spin */
    run_jobs(2, 600, -1, 0);        /* pauses across the spin's length */
    run_jobs(5, 1000, 0, 0);        /* more threads than this machine's cores */
    run_jobs(3, 40, 1000000, 0);    /* 1 ms apart: the workers sleep between jobs */
    run_jobs(3, 20, 0, 500000);     /* long items: the caller sleeps waiting */
    nevo_pool_free(nevo_pool_new(4)); /* freed before any job */
    nevo_pool_free(nevo_pool_new(1));
    alarm(0);
}

/* A job run over and over (nevo_pool_run_auto): each trial alternates the two ways,
 * the one with less time in the trial runs the rest of its period, and a later trial
 * can choose the other; every call runs every item once, either way, with times the
 * pool's clock gives. */
TEST(pool_auto_runs_the_faster_way) {
    NevoPoolAuto a;
    memset(&a, 0, sizeof a);
    for (int period = 0; period < 3; period++) {
        /* period 0: alone faster; 1: the pool faster; 2: an exact tie keeps the pool */
        const long long ns[3][2] = {{900, 400}, {300, 800}, {500, 500}};
        for (int k = 0; k < NEVO_AUTO_PERIOD; k++) {
            int way = nevo_pool_auto_way(&a);
            if (k < NEVO_AUTO_TRIAL) CHECK_EQ_INT(way, k % 2);
            else CHECK_EQ_INT(way, period == 0);
            nevo_pool_auto_took(&a, way, ns[period][way] + (period < 2 ? k % 3 : 0)); /* a little noise */
        }
    }
    NevoPool *pool = nevo_pool_new(3);
    memset(&a, 0, sizeof a);
    Job job;
    memset(&job, 0, sizeof job);
    job.mark = 1;
    int calls = NEVO_AUTO_PERIOD + NEVO_AUTO_TRIAL, n = 40;
    for (int c = 0; c < calls; c++) nevo_pool_run_auto(pool, &a, n, item_a, &job);
    for (int i = 0; i < MAX_ITEMS; i++) CHECK_EQ_INT(job.runs[i], i < n ? calls : 0);
    CHECK(a.calls == calls && a.ns[0] > 0 && a.ns[1] > 0);
    nevo_pool_free(pool);
}

static atomic_int held; /* the signalled worker stays in its handler while set */
static atomic_int worker_tid; /* the thread of worker 1, as an item on it saw */
static void note_tid(void *ctx, int item, int worker) {
    (void)ctx, (void)item;
    if (worker == 1) atomic_store(&worker_tid, (int)syscall(SYS_gettid));
    sleep_ns(50000);
}
static void hold(int sig) {
    (void)sig;
    struct timespec ts = {0, 100000};
    while (atomic_load(&held)) nanosleep(&ts, NULL);
}

/* The state letter of thread tid of this process (/proc), or 0. */
static char thread_state(int tid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *e = strrchr(buf, ')'); /* after the name, which may hold spaces */
    return e && e[1] == ' ' ? e[2] : 0;
}

/* A worker that does not come holds no job up: stopped in a signal handler while it
 * sleeps between jobs, it takes no item, and the caller runs each job's items itself
 * (worker 0) and returns. Released, it takes items again. A caller that waited for every
 * worker to check in would hang at the first job. */
TEST(pool_does_not_wait_for_an_absent_worker) {
    alarm(60);
    NevoPool *pool = nevo_pool_new(2);
    Job job;
    for (int j = 0; j < 2000 && !atomic_load(&worker_tid); j++) nevo_pool_run(pool, 8, note_tid, NULL);
    int worker = atomic_load(&worker_tid);
    CHECK_MSG(worker > 0, "worker 1 took no item in 2000 jobs");
    while (thread_state(worker) != 'S') sleep_ns(1000000); /* its spin over, asleep */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hold;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
    atomic_store(&held, 1);
    CHECK(syscall(SYS_tgkill, getpid(), worker, SIGUSR2) == 0);
    for (int j = 0; j < 200; j++) {
        memset(&job, 0, sizeof job);
        job.mark = j + 2;
        int n = 1 + j % MAX_ITEMS;
        nevo_pool_run(pool, n, item_a, &job);
        for (int i = 0; i < n; i++)
            CHECK_MSG(job.runs[i] == j + 2 && job.worker[i] == 0, "job %d item %d: %d on worker %d", j, i,
                      job.runs[i], job.worker[i]);
    }
    atomic_store(&held, 0);
    int took = 0; /* released: it takes items again (items of 50 us leave it time) */
    for (int j = 0; j < 2000 && !took; j++) {
        memset(&job, 0, sizeof job);
        job.mark = 1;
        job.item_sleep_ns = 50000;
        nevo_pool_run(pool, 8, item_a, &job);
        for (int i = 0; i < 8; i++) {
            CHECK(job.runs[i] == 1);
            took |= job.worker[i] == 1;
        }
    }
    CHECK_MSG(took, "the released worker took no item in 2000 jobs");
    nevo_pool_free(pool);
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
