/* The processes of one job: rank r of n, and the few collective operations nevo needs
 * across them (ggml's shape: a small table of operations behind an opaque handle).
 *
 * Three kinds: one process (nevo_comm_self: rank 0 of 1), threads of one process
 * (nevo_comm_threads: a rank per thread) and MPI ranks (nevo_comm_mpi, Open MPI, in a
 * build with MPI=1). nevo never sends floats it
 * must add up in an order the transport chooses: ranks exchange bytes (allgather,
 * broadcast) and every rank reduces what it received in one fixed order, so results do
 * not depend on the number of ranks (replica.h, the sharded evaluation in train.c).
 *
 * Every operation is collective: all ranks call it, in the same order, from the thread
 * that made the comm. A rank that fails locally still takes part, with its error
 * (nevo_comm_agree), so a failure ends every rank with the same message and no rank
 * waits forever. A rank that dies ends the job: mpirun stops the others and names it. */
#ifndef NEVO_COMM_H
#define NEVO_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/io.h"
#include "nevo/status.h"

typedef struct NevoComm NevoComm;

/* Time and traffic of this rank's collective calls since the comm was made (or the
 * counters were reset): bytes this rank sent, seconds inside the calls (waiting for
 * slower ranks included), calls made. */
typedef struct NevoCommStats {
    uint64_t bytes_sent;
    double seconds;
    long long calls;
} NevoCommStats;

/* One process: rank 0 of 1. */
NevoComm *nevo_comm_self(void);

/* n ranks that are threads of this process (replicas in one process, replica.h):
 * comms[r] is rank r's, to be used by one thread each and freed by it. */
void nevo_comm_threads(int n, NevoComm **comms);

/* Whether this process was started by an MPI launcher (mpirun, srun) as one of a job's
 * ranks: 1 with its rank and the job's rank count (as the launcher's environment says),
 * 0 (rank 0 of 1) when started on its own. Needs no MPI library. */
int nevo_comm_launched(int *rank, int *size);

/* The MPI world (MPI_Init on the first call; MPI_Finalize in nevo_comm_free).
 * NEVO_ERR_UNSUPPORTED in a build without MPI, saying how to get one. */
NevoStatus nevo_comm_mpi(NevoComm **out, NevoError *err);

/* Whether this build has MPI (MPI=1 in the Makefile). */
int nevo_comm_has_mpi(void);

void nevo_comm_free(NevoComm *c);
int nevo_comm_rank(const NevoComm *c);
int nevo_comm_size(const NevoComm *c);
/* This rank's place on its machine (MPI's shared-memory split): node rank r of the
 * node's n ranks, and the job's lowest rank on that machine (its name in comm.jsonl).
 * One process: 0 of 1, itself; threads of one process: one machine. */
int nevo_comm_node_rank(const NevoComm *c);
int nevo_comm_node_size(const NevoComm *c);
int nevo_comm_node_first(const NevoComm *c);
/* Its place among the ranks of its machine that see the same devices (the same
 * CUDA_VISIBLE_DEVICES text, or all without it): rank r of n. A device backend spreads
 * them over those devices (nevo_backend_new_on_node); a launcher that gives each rank
 * devices of its own makes each the one rank of its group. Lists that overlap, or name
 * the same devices otherwise, make groups apart. Elsewhere as the node's. */
int nevo_comm_device_rank(const NevoComm *c);
int nevo_comm_device_ranks(const NevoComm *c);
/* "mpi", "threads" or "self". */
const char *nevo_comm_kind(const NevoComm *c);

/* Every rank's `len` bytes at `mine`, concatenated in rank order, into all (reset
 * first); offsets (size + 1 entries, caller-owned) say where rank r's bytes start,
 * offsets[size] = all->len. */
NevoStatus nevo_comm_allgather(NevoComm *c, const void *mine, size_t len, NevoBuf *all, size_t *offsets,
                               NevoError *err);

/* Root's buffer to every rank: on root `buf` is read; elsewhere it is reset and filled. */
NevoStatus nevo_comm_bcast(NevoComm *c, NevoBuf *buf, int root, NevoError *err);

/* Agreement on an outcome: every rank passes its own status and error; all return the
 * status of the lowest rank that failed, with its message (prefixed "rank R: " where R
 * is not 0), in err, or NEVO_OK on every rank when none failed. */
NevoStatus nevo_comm_agree(NevoComm *c, NevoStatus st, NevoError *err);

/* nevo_comm_agree carrying data: every rank's outcome (st, and err's message where it
 * failed) and, where it succeeded, its len bytes at payload, to every rank. Returns on
 * every rank what nevo_comm_agree would; where that is NEVO_OK, parts[r] (size readers,
 * caller-owned) reads rank r's payload, which lives in all (reset first). */
NevoStatus nevo_comm_gather_outcomes(NevoComm *c, NevoStatus st, const void *payload, size_t len, NevoBuf *all,
                                     NevoReader *parts, NevoError *err);

/* Ends every rank of the job at once with this exit code (exit() for one process). */
_Noreturn void nevo_comm_abort(NevoComm *c, int code);

void nevo_comm_stats(const NevoComm *c, NevoCommStats *out);
void nevo_comm_reset_stats(NevoComm *c);

#endif
