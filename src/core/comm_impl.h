/* A comm's table of operations (comm.h): what a transport provides. The shared code
 * (comm.c) times the calls, counts the bytes and builds agreement on top. */
#ifndef NEVO_COMM_IMPL_H
#define NEVO_COMM_IMPL_H

#include "nevo/comm.h"

typedef struct NevoCommOps {
    const char *kind;
    /* every rank's bytes, lens[r] of rank r (known to all: gathered first, as 8 bytes
     * each), concatenated in rank order into all (room made by the caller) */
    NevoStatus (*allgatherv)(NevoComm *c, const void *mine, const uint64_t *lens, uint8_t *all, NevoError *err);
    /* len bytes from root (len known to all: broadcast first) */
    NevoStatus (*bcast)(NevoComm *c, void *data, size_t len, int root, NevoError *err);
    void (*abort)(NevoComm *c, int code); /* never returns */
    void (*free)(NevoComm *c);
} NevoCommOps;

struct NevoComm {
    const NevoCommOps *ops;
    int rank, size;
    int node_rank, node_size, node_first; /* on this rank's machine (nevo_comm_node_rank) */
    int device_rank, device_ranks;        /* among its ranks that see the same devices */
    NevoCommStats stats;
    void *impl;
};

#ifdef NEVO_MPI
NevoStatus nevo_comm_mpi_new(NevoComm **out, NevoError *err);
#endif

#endif
