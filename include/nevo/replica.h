/* The replica model (TF-Replicator's shape): one step function, N replicas, each on its
 * shard of the batch, the gradients all-reduced so every replica applies the same
 * update.
 *
 * A batch is cut into n_chunks fixed chunks (a property of the batch, never of the
 * replica count). The caller's chunk function computes one chunk's contribution (its
 * gradient, and any sums such as its loss) as n doubles. nevo_replicas_reduce returns
 * on every replica the sum over all chunks, added in one fixed binary tree over the
 * chunk indices: [a, b) is [a, m) + [m, b) with m = (a + b) / 2, a single chunk its own
 * value. Replicas are the comm's ranks (comm.h); rank r owns chunks [C r / N, C (r + 1)
 * / N), computes the largest subtrees that lie inside them (its chunks over its pool's
 * threads), and the ranks exchange those subtrees' sums; every rank completes the same
 * tree. So the result is the same bits for any number of ranks and threads, and equals
 * one replica's on the whole batch: with the same step applied after it, N replicas hold
 * the same parameters as one.
 *
 * Traffic: each rank sends at most 2 log2(C) + 1 subtree sums of n doubles per reduce
 * (all of them to every other rank: an allgather, not a reduction the transport orders). */
#ifndef NEVO_REPLICA_H
#define NEVO_REPLICA_H

#include <stddef.h>

#include "nevo/comm.h"
#include "nevo/status.h"
#include "nevo/threads.h"

/* Writes chunk `chunk`'s n values into out (zeroed before the call). Called from the
 * pool's threads: chunks must be independent; `worker` names per-thread scratch only. */
typedef NevoStatus (*NevoChunkFn)(void *ctx, int chunk, int worker, double *out, NevoError *err);

/* Every replica's out (n doubles) = the tree sum over chunks [0, n_chunks) of fn. comm
 * NULL: this process is the only replica; pool NULL: chunks one after another on the
 * calling thread. A chunk's failure (the lowest chunk's, of the lowest failing rank) is
 * every rank's. Collective: every rank calls it with the same n_chunks and n. */
NevoStatus nevo_replicas_reduce(NevoComm *comm, NevoPool *pool, int n_chunks, size_t n, NevoChunkFn fn, void *ctx,
                                double *out, NevoError *err);

/* The chunks rank `rank` of `size` owns: [*lo, *hi). */
void nevo_replicas_shard(int n_chunks, int rank, int size, int *lo, int *hi);

#endif
