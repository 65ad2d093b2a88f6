/* Comms and the replica model (comm.h, replica.h) in one process: ranks that are
 * threads. The all-reduce against a direct evaluation of its tree, the same bits for
 * 1 to 8 replicas and any threads (and not those of a plain left-to-right sum: the
 * order matters for these values), failures reported by every rank, and the comm's
 * collectives. Runs under ThreadSanitizer too. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "nevo/comm.h"
#include "nevo/replica.h"

#define NVAL 37

/* chunk k's values: magnitudes from 1e-9 to 1e9, so the order of additions shows */
static double value(int chunk, int i) {
    uint64_t h = (uint64_t)(chunk + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(i + 7) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    double u = (double)(h >> 11) / 9007199254740992.0 - 0.5;
    static const double scale[6] = {1e-9, 1e-3, 1.0, 1e3, 1e6, 1e9};
    return u * scale[(chunk * 7 + i) % 6];
}

typedef struct ChunkCtx {
    int fail_chunk; /* -1: none */
} ChunkCtx;

static NevoStatus chunk_fn(void *ctx, int chunk, int worker, double *out, NevoError *err) {
    const ChunkCtx *c = ctx;
    if (chunk == c->fail_chunk) return nevo_error(err, NEVO_ERR_NUMERIC, "chunk %d is not finite", chunk);
    for (int i = 0; i < NVAL; i++) out[i] = value(chunk, i);
    return NEVO_OK;
}

/* the tree, written out directly: [a, b) = [a, m) + [m, b), m = (a + b) / 2 */
static double tree(int a, int b, int i) {
    if (b - a == 1) return value(a, i);
    int m = a + (b - a) / 2;
    return tree(a, m, i) + tree(m, b, i);
}

typedef struct Replica {
    NevoComm *comm;
    NevoPool *pool;
    int n_chunks;
    size_t n;
    ChunkCtx ctx;
    double out[NVAL];
    NevoStatus st;
    NevoError err;
} Replica;

static void *replica_main(void *arg) {
    Replica *r = arg;
    r->st = nevo_replicas_reduce(r->comm, r->pool, r->n_chunks, r->n, chunk_fn, &r->ctx, r->out, &r->err);
    return NULL;
}

/* n replicas as threads, each with a pool of `threads` (0: none); results in reps */
static void run_replicas(int n, int threads, int n_chunks, int fail_chunk, Replica *reps) {
    NevoComm *comms[8];
    nevo_comm_threads(n, comms);
    pthread_t th[8];
    for (int r = 0; r < n; r++) {
        memset(&reps[r], 0, sizeof reps[r]);
        reps[r].comm = comms[r];
        reps[r].pool = threads ? nevo_pool_new(threads) : NULL;
        reps[r].n_chunks = n_chunks;
        reps[r].n = NVAL;
        reps[r].ctx.fail_chunk = fail_chunk;
        CHECK(pthread_create(&th[r], NULL, replica_main, &reps[r]) == 0);
    }
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        if (reps[r].pool) nevo_pool_free(reps[r].pool);
        nevo_comm_free(comms[r]);
    }
}

TEST(replica_reduce_is_the_tree_for_any_replicas_and_threads) {
    static const int chunks[] = {1, 2, 3, 5, 8, 13, 31};
    int order_mattered = 0;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        int C = chunks[c];
        double want[NVAL];
        for (int i = 0; i < NVAL; i++) want[i] = tree(0, C, i);
        for (int i = 0; i < NVAL; i++) { /* a plain left-to-right sum differs somewhere */
            double seq = 0.0;
            for (int k = 0; k < C; k++) seq += value(k, i);
            order_mattered |= seq != want[i];
        }
        /* this process alone, no comm */
        ChunkCtx ctx = {-1};
        double one[NVAL];
        NevoError err;
        CHECK(nevo_replicas_reduce(NULL, NULL, C, NVAL, chunk_fn, &ctx, one, &err) == NEVO_OK);
        CHECK_MSG(memcmp(one, want, sizeof want) == 0, "%d chunks, one replica: not the tree's sum", C);
        for (int n = 1; n <= 8; n++)
            for (int threads = 0; threads <= 3; threads += 3) {
                Replica reps[8];
                run_replicas(n, threads, C, -1, reps);
                for (int r = 0; r < n; r++) {
                    CHECK_MSG(reps[r].st == NEVO_OK, "%s", reps[r].err.msg);
                    CHECK_MSG(memcmp(reps[r].out, want, sizeof want) == 0,
                              "%d chunks over %d replicas (%d threads each): replica %d differs from the tree", C, n,
                              threads, r);
                }
            }
    }
    CHECK_MSG(order_mattered, "the values never depended on the order of addition: the test could not fail");
}

/* A chunk that fails on one replica fails the reduce on every replica, with its rank. */
TEST(replica_failure_reaches_every_replica) {
    Replica reps[4];
    run_replicas(4, 2, 12, 7, reps); /* chunks 6..8 are rank 2's */
    for (int r = 0; r < 4; r++) {
        CHECK_EQ_INT(reps[r].st, NEVO_ERR_NUMERIC);
        CHECK_MSG(strstr(reps[r].err.msg, "rank 2: chunk 7 is not finite") != NULL, "replica %d: %s", r,
                  reps[r].err.msg);
    }
    ChunkCtx ctx = {-1};
    double out[NVAL];
    NevoError err;
    CHECK_EQ_INT(nevo_replicas_reduce(NULL, NULL, 0, NVAL, chunk_fn, &ctx, out, &err), NEVO_ERR_INVALID);
}

/* Replicas that disagree on a reduce's size get an error, not a mixed result. */
TEST(replica_sizes_must_agree) {
    NevoComm *comms[2];
    nevo_comm_threads(2, comms);
    Replica reps[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        memset(&reps[r], 0, sizeof reps[r]);
        reps[r].comm = comms[r];
        reps[r].n_chunks = 6;
        reps[r].n = r ? NVAL : NVAL - 1;
        reps[r].ctx.fail_chunk = -1;
        CHECK(pthread_create(&th[r], NULL, replica_main, &reps[r]) == 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ_INT(reps[r].st, NEVO_ERR_INVALID);
        CHECK_MSG(strstr(reps[r].err.msg, "disagree") != NULL, "%s", reps[r].err.msg);
        nevo_comm_free(comms[r]);
    }
}

/* --- the collectives ------------------------------------------------------------------ */

typedef struct CommRun {
    NevoComm *comm;
    NevoBuf all, b;
    size_t off[6];
    NevoStatus agreed;
    NevoError err;
    NevoCommStats stats;
} CommRun;

static void *comm_main(void *arg) {
    CommRun *c = arg;
    int r = nevo_comm_rank(c->comm);
    char mine[64];
    int len = snprintf(mine, sizeof mine, "rank %d says %.*s", r, r * 3, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    CHECK(nevo_comm_allgather(c->comm, mine, r == 2 ? 0 : (size_t)len, &c->all, c->off, &c->err) == NEVO_OK);
    if (r == 3) nevo_buf_put(&c->b, "from three", 10);
    CHECK(nevo_comm_bcast(c->comm, &c->b, 3, &c->err) == NEVO_OK);
    NevoError e = {0};
    NevoStatus st = NEVO_OK;
    if (r == 1 || r == 4) st = nevo_error(&e, NEVO_ERR_IO, "disk %d full", r);
    c->agreed = nevo_comm_agree(c->comm, st, &e);
    c->err = e;
    nevo_comm_stats(c->comm, &c->stats);
    return NULL;
}

TEST(comm_threads_collectives) {
    enum { N = 5 };
    NevoComm *comms[N];
    nevo_comm_threads(N, comms);
    CommRun runs[N];
    pthread_t th[N];
    for (int r = 0; r < N; r++) {
        memset(&runs[r], 0, sizeof runs[r]);
        runs[r].comm = comms[r];
        CHECK(pthread_create(&th[r], NULL, comm_main, &runs[r]) == 0);
    }
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < N; r++) {
        CommRun *c = &runs[r];
        CHECK_EQ_INT(c->off[0], 0);
        for (int q = 0; q < N; q++) {
            char want[64];
            int len = q == 2 ? 0 : snprintf(want, sizeof want, "rank %d says %.*s", q, q * 3,
                                            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
            CHECK_EQ_INT(c->off[q + 1] - c->off[q], len);
            CHECK(memcmp(c->all.data + c->off[q], want, (size_t)len) == 0);
        }
        CHECK(c->b.len == 10 && memcmp(c->b.data, "from three", 10) == 0);
        CHECK_EQ_INT(c->agreed, NEVO_ERR_IO);
        CHECK_MSG(strcmp(c->err.msg, "rank 1: disk 1 full") == 0, "rank %d agreed on '%s'", r, c->err.msg);
        CHECK_EQ_INT(c->stats.calls, 3);
        CHECK(c->stats.bytes_sent > 0);
        /* threads of one process: one machine, the rank its own place on it */
        CHECK_EQ_INT(nevo_comm_node_rank(comms[r]), r);
        CHECK_EQ_INT(nevo_comm_node_size(comms[r]), N);
        CHECK_EQ_INT(nevo_comm_node_first(comms[r]), 0);
        nevo_buf_free(&c->all);
        nevo_buf_free(&c->b);
        nevo_comm_free(comms[r]);
    }
    /* one process: the same calls are copies, agreement is its own status */
    NevoComm *self = nevo_comm_self();
    NevoBuf all = {0};
    size_t off[2];
    NevoError err = {0};
    CHECK(nevo_comm_allgather(self, "abc", 3, &all, off, &err) == NEVO_OK);
    CHECK(all.len == 3 && off[1] == 3 && memcmp(all.data, "abc", 3) == 0);
    CHECK_EQ_INT(nevo_comm_agree(self, NEVO_OK, &err), NEVO_OK);
    CHECK(strcmp(nevo_comm_kind(self), "self") == 0 && nevo_comm_size(self) == 1);
    CHECK(nevo_comm_node_rank(self) == 0 && nevo_comm_node_size(self) == 1 && nevo_comm_node_first(self) == 0);
    nevo_buf_free(&all);
    nevo_comm_free(self);
}
