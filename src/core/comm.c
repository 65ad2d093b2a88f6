/* Comms (comm.h): the shared part (timing, byte counts, agreement) and the
 * one-process comm. The MPI transport is comm_mpi.c. */
#include "core/comm_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --- one process --------------------------------------------------------------------- */

static NevoStatus self_allgatherv(NevoComm *c, const void *mine, const uint64_t *lens, uint8_t *all,
                                  NevoError *err) {
    if (lens[0]) memcpy(all, mine, lens[0]);
    return NEVO_OK;
}

static NevoStatus self_bcast(NevoComm *c, void *data, size_t len, int root, NevoError *err) {
    return NEVO_OK;
}

static void self_abort(NevoComm *c, int code) {
    exit(code);
}

static void self_free(NevoComm *c) {
    free(c);
}

static const NevoCommOps self_ops = {"self", self_allgatherv, self_bcast, self_abort, self_free};

NevoComm *nevo_comm_self(void) {
    NevoComm *c = nevo_alloc(sizeof *c);
    c->ops = &self_ops;
    c->rank = 0;
    c->size = 1;
    c->node_size = c->device_ranks = 1;
    return c;
}

/* --- threads of one process ----------------------------------------------------------
 * Each rank is a thread with its own comm; a call's data are exchanged through
 * pointers the ranks leave in the group between two barriers. */

typedef struct Group {
    int n, refs;
    pthread_barrier_t bar;
    pthread_mutex_t mu;
    const void **ptr; /* (n) what each rank offers in the current call */
} Group;

static NevoStatus threads_allgatherv(NevoComm *c, const void *mine, const uint64_t *lens, uint8_t *all,
                                     NevoError *err) {
    Group *g = c->impl;
    g->ptr[c->rank] = mine;
    pthread_barrier_wait(&g->bar);
    uint64_t off = 0;
    for (int r = 0; r < g->n; r++) {
        if (lens[r]) memcpy(all + off, g->ptr[r], lens[r]);
        off += lens[r];
    }
    pthread_barrier_wait(&g->bar); /* every rank has copied: the offers may go */
    return NEVO_OK;
}

static NevoStatus threads_bcast(NevoComm *c, void *data, size_t len, int root, NevoError *err) {
    Group *g = c->impl;
    if (c->rank == root) g->ptr[root] = data;
    pthread_barrier_wait(&g->bar);
    if (c->rank != root && len) memcpy(data, g->ptr[root], len);
    pthread_barrier_wait(&g->bar);
    return NEVO_OK;
}

static void threads_free(NevoComm *c) {
    Group *g = c->impl;
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) {
        pthread_barrier_destroy(&g->bar);
        pthread_mutex_destroy(&g->mu);
        free(g->ptr);
        free(g);
    }
    free(c);
}

static const NevoCommOps threads_ops = {"threads", threads_allgatherv, threads_bcast, self_abort,
                                        threads_free};

void nevo_comm_threads(int n, NevoComm **comms) {
    NEVO_ASSERT(n >= 1);
    Group *g = nevo_alloc(sizeof *g);
    g->n = g->refs = n;
    g->ptr = nevo_alloc(sizeof(void *) * (size_t)n);
    pthread_barrier_init(&g->bar, NULL, (unsigned)n);
    pthread_mutex_init(&g->mu, NULL);
    for (int r = 0; r < n; r++) {
        NevoComm *c = nevo_alloc(sizeof *c);
        c->ops = &threads_ops;
        c->rank = r;
        c->size = n;
        c->node_rank = c->device_rank = r;
        c->node_size = c->device_ranks = n;
        c->impl = g;
        comms[r] = c;
    }
}

/* --- any comm ------------------------------------------------------------------------ */

int nevo_comm_launched(int *rank, int *size) {
    /* Open MPI, then PMIx (Slurm, recent Open MPI), then PMI-1/2 (MPICH, Slurm) */
    static const char *const vars[][2] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMIX_SIZE", "PMIX_RANK"}, {"PMI_SIZE", "PMI_RANK"}};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *n = getenv(vars[i][0]), *r = getenv(vars[i][1]);
        if (n && *n) {
            *size = atoi(n) > 0 ? atoi(n) : 1;
            *rank = r && atoi(r) > 0 ? atoi(r) : 0;
            return 1;
        }
    }
    *rank = 0;
    *size = 1;
    return 0;
}

int nevo_comm_has_mpi(void) {
#ifdef NEVO_MPI
    return 1;
#else
    return 0;
#endif
}

NevoStatus nevo_comm_mpi(NevoComm **out, NevoError *err) {
    *out = NULL;
#ifdef NEVO_MPI
    return nevo_comm_mpi_new(out, err);
#else
    return nevo_error(err, NEVO_ERR_UNSUPPORTED,
                      "this nevo was built without MPI; `mpirun` needs the MPI build (make MPI=1, with Debian's "
                      "openmpi-bin and libopenmpi-dev)");
#endif
}

void nevo_comm_free(NevoComm *c) {
    if (c) c->ops->free(c);
}

int nevo_comm_rank(const NevoComm *c) {
    return c->rank;
}

int nevo_comm_size(const NevoComm *c) {
    return c->size;
}

int nevo_comm_node_rank(const NevoComm *c) {
    return c->node_rank;
}

int nevo_comm_node_size(const NevoComm *c) {
    return c->node_size;
}

int nevo_comm_node_first(const NevoComm *c) {
    return c->node_first;
}

int nevo_comm_device_rank(const NevoComm *c) {
    return c->device_rank;
}

int nevo_comm_device_ranks(const NevoComm *c) {
    return c->device_ranks;
}

const char *nevo_comm_kind(const NevoComm *c) {
    return c->ops->kind;
}

void nevo_comm_stats(const NevoComm *c, NevoCommStats *out) {
    *out = c->stats;
}

void nevo_comm_reset_stats(NevoComm *c) {
    memset(&c->stats, 0, sizeof c->stats);
}

_Noreturn void nevo_comm_abort(NevoComm *c, int code) {
    c->ops->abort(c, code);
    exit(code); /* not reached */
}

/* Bytes are counted as if each rank sent its part to every other rank directly: what a
 * ring allgather sends per rank, on average, and what a broadcast tree sends in all. */
NevoStatus nevo_comm_allgather(NevoComm *c, const void *mine, size_t len, NevoBuf *all, size_t *offsets,
                               NevoError *err) {
    double t0 = now_s();
    size_t n = (size_t)c->size;
    uint64_t *lens = nevo_alloc(sizeof(uint64_t) * n), *eight = nevo_alloc(sizeof(uint64_t) * n), my = len;
    for (size_t r = 0; r < n; r++) eight[r] = sizeof(uint64_t);
    /* the lengths first, so every rank makes room for the whole */
    NevoStatus st = c->ops->allgatherv(c, &my, eight, (uint8_t *)lens, err);
    uint64_t total = 0;
    for (size_t r = 0; st == NEVO_OK && r < n; r++) total += lens[r];
    all->len = 0;
    if (st == NEVO_OK && all->cap < total) {
        all->data = realloc(all->data, total);
        NEVO_ASSERT(all->data != NULL);
        all->cap = total;
    }
    if (st == NEVO_OK) st = c->ops->allgatherv(c, mine, lens, all->data, err);
    if (st == NEVO_OK) all->len = total;
    if (st == NEVO_OK && offsets) {
        offsets[0] = 0;
        for (size_t r = 0; r < n; r++) offsets[r + 1] = offsets[r] + lens[r];
    }
    c->stats.bytes_sent += (uint64_t)(len + sizeof my) * (uint64_t)(n - 1);
    free(lens);
    free(eight);
    c->stats.seconds += now_s() - t0;
    c->stats.calls++;
    return st;
}

NevoStatus nevo_comm_bcast(NevoComm *c, NevoBuf *buf, int root, NevoError *err) {
    if (c->size == 1) return NEVO_OK;
    double t0 = now_s();
    uint64_t len = buf->len;
    NevoStatus st = c->ops->bcast(c, &len, sizeof len, root, err); /* the length first */
    if (st == NEVO_OK && c->rank != root) {
        buf->len = 0;
        if (buf->cap < len) {
            buf->data = realloc(buf->data, len ? len : 1);
            NEVO_ASSERT(buf->data != NULL);
            buf->cap = len;
        }
        buf->len = len;
    }
    if (st == NEVO_OK && len) st = c->ops->bcast(c, buf->data, len, root, err);
    if (c->rank == root) c->stats.bytes_sent += (len + sizeof len) * (uint64_t)(c->size - 1);
    c->stats.seconds += now_s() - t0;
    c->stats.calls++;
    return st;
}

NevoStatus nevo_comm_gather_outcomes(NevoComm *c, NevoStatus st, const void *payload, size_t len, NevoBuf *all,
                                     NevoReader *parts, NevoError *err) {
    NevoBuf mine = {0};
    nevo_buf_u32(&mine, (uint32_t)st);
    nevo_buf_str(&mine, st ? err->msg : "");
    if (st == NEVO_OK && len) nevo_buf_put(&mine, payload, len);
    size_t *off = nevo_alloc(sizeof(size_t) * (size_t)(c->size + 1));
    NevoStatus out = nevo_comm_allgather(c, mine.data, mine.len, all, off, err);
    for (int r = 0; out == NEVO_OK && r < c->size; r++) { /* the lowest rank's failure, if any */
        NevoReader rd = nevo_reader(all->data + off[r], off[r + 1] - off[r]);
        uint32_t s = nevo_read_u32(&rd);
        char *msg = nevo_read_str(&rd, NEVO_ERROR_MSG_SIZE);
        if (!nevo_reader_ok(&rd, false))
            out = nevo_error(err, NEVO_ERR_CORRUPT, "rank %d sent a malformed outcome", r);
        else if (s != NEVO_OK && r == 0)
            out = nevo_error(err, (NevoStatus)s, "%s", msg);
        else if (s != NEVO_OK)
            out = nevo_error(err, (NevoStatus)s, "rank %d: %s", r, msg);
        parts[r] = nevo_reader(rd.data + rd.pos, rd.len - rd.pos);
        free(msg);
    }
    free(off);
    nevo_buf_free(&mine);
    return out;
}

NevoStatus nevo_comm_agree(NevoComm *c, NevoStatus st, NevoError *err) {
    if (c->size == 1) return st;
    NevoBuf all = {0};
    NevoReader *parts = nevo_alloc(sizeof(NevoReader) * (size_t)c->size);
    NevoStatus out = nevo_comm_gather_outcomes(c, st, NULL, 0, &all, parts, err);
    free(parts);
    nevo_buf_free(&all);
    return out;
}
