/* The MPI transport of comm.h (built with MPI=1: -DNEVO_MPI and Open MPI's flags).
 *
 * Collectives are started non-blocking and waited for by polling with short sleeps:
 * a rank that waits for slower ranks then leaves the CPUs to them (and to the other
 * ranks of its node) instead of spinning in the MPI library, which matters when ranks
 * share cores. Only the thread that made the comm calls MPI (MPI_THREAD_FUNNELED). */
#ifdef NEVO_MPI
#include "core/comm_impl.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Waits for req, sleeping 20 us at first and up to 1 ms between tests. */
static NevoStatus wait_req(MPI_Request *req, const char *what, NevoError *err) {
    long ns = 20000;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return nevo_error(err, NEVO_ERR_IO, "MPI %s failed (error %d)", what, rc);
        if (done) return NEVO_OK;
        struct timespec t = {0, ns};
        nanosleep(&t, NULL);
        if (ns < 1000000) ns *= 2;
    }
}

static NevoStatus mpi_allgatherv(NevoComm *c, const void *mine, const uint64_t *lens, uint8_t *all,
                                 NevoError *err) {
    int *counts = malloc(sizeof(int) * (size_t)c->size), *displs = malloc(sizeof(int) * (size_t)c->size);
    NEVO_ASSERT(counts && displs);
    uint64_t off = 0;
    NevoStatus st = NEVO_OK;
    for (int r = 0; r < c->size; r++) {
        if (lens[r] > INT_MAX || off > INT_MAX)
            st = nevo_error(err, NEVO_ERR_INVALID, "an exchange across ranks exceeds 2 GiB (rank %d sends %llu bytes)",
                            r, (unsigned long long)lens[r]);
        counts[r] = (int)lens[r];
        displs[r] = (int)off;
        off += lens[r];
    }
    if (st == NEVO_OK) {
        MPI_Request req;
        int rc = MPI_Iallgatherv(mine, counts[c->rank], MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD, &req);
        st = rc == MPI_SUCCESS ? wait_req(&req, "allgather", err)
                               : nevo_error(err, NEVO_ERR_IO, "MPI allgather failed (error %d)", rc);
    }
    free(counts);
    free(displs);
    return st;
}

static NevoStatus mpi_bcast(NevoComm *c, void *data, size_t len, int root, NevoError *err) {
    for (size_t done = 0; done < len;) { /* in pieces an int counts */
        size_t part = len - done < (size_t)1 << 30 ? len - done : (size_t)1 << 30;
        MPI_Request req;
        int rc = MPI_Ibcast((uint8_t *)data + done, (int)part, MPI_BYTE, root, MPI_COMM_WORLD, &req);
        if (rc != MPI_SUCCESS) return nevo_error(err, NEVO_ERR_IO, "MPI broadcast failed (error %d)", rc);
        NevoStatus st = wait_req(&req, "broadcast", err);
        if (st) return st;
        done += part;
    }
    return NEVO_OK;
}

static void mpi_abort(NevoComm *c, int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void mpi_free(NevoComm *c) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    free(c);
}

static const NevoCommOps mpi_ops = {"mpi", mpi_allgatherv, mpi_bcast, mpi_abort, mpi_free};

NevoStatus nevo_comm_mpi_new(NevoComm **out, NevoError *err) {
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return nevo_error(err, NEVO_ERR_IO, "MPI could not start (MPI_Init_thread failed)");
    NevoComm *c = nevo_alloc(sizeof *c);
    c->ops = &mpi_ops;
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    /* errors come back as codes, turned into messages above, not as MPI's own abort */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* the ranks that share this rank's machine (its memory, its devices), and those of
     * them that see the same devices (a launcher may give each rank its own) */
    MPI_Comm node;
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->node_rank);
        MPI_Comm_size(node, &c->node_size);
        c->node_first = c->rank;
        rc = MPI_Allreduce(MPI_IN_PLACE, &c->node_first, 1, MPI_INT, MPI_MIN, node);
        enum { SEEN = 1024 }; /* eight GPU UUIDs and more; a longer list is compared cut */
        char mine[SEEN] = {0};
        const char *seen = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(mine, sizeof mine, "%s%s", seen ? "=" : "", seen ? seen : ""); /* unset: "" */
        char *all = nevo_alloc((size_t)SEEN * (size_t)c->node_size);
        if (rc == MPI_SUCCESS) rc = MPI_Allgather(mine, SEEN, MPI_CHAR, all, SEEN, MPI_CHAR, node);
        for (int r = 0; rc == MPI_SUCCESS && r < c->node_size; r++)
            if (strcmp(all + (size_t)SEEN * (size_t)r, mine) == 0) {
                c->device_rank += r < c->node_rank;
                c->device_ranks++;
            }
        free(all);
        MPI_Comm_free(&node);
    }
    if (rc != MPI_SUCCESS) {
        free(c);
        return nevo_error(err, NEVO_ERR_IO, "MPI could not group the ranks by machine (error %d)", rc);
    }
    *out = c;
    return NEVO_OK;
}
#else
typedef int nevo_comm_mpi_unused; /* ISO C: a translation unit is not empty */
#endif
