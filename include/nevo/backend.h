/* Backends: where a population's networks are computed.
 *
 * A backend holds parameter rows where it computes (NevoRows: uploaded, viewed in
 * host memory where the backend can read it, or built there from a task set's
 * recipes), runs the batched forward of rows that are each their own network, and
 * synchronises. The evaluator owns one and calls nothing else of it, so a device
 * backend plugs in beside the CPU one (src/nn/backend_impl.h has the table of
 * operations a backend fills in, and backend.c the list of backends).
 *
 * The CPU backend is nevo's kernels (nn/kernels.h) on host memory; it gives the
 * results DESIGN.md's determinism rules describe. Another backend gives the same
 * results only where it computes the same operations in the same order. */
#ifndef NEVO_BACKEND_H
#define NEVO_BACKEND_H

#include <stddef.h>

#include "nevo/policy.h"
#include "nevo/status.h"
#include "nevo/tasks.h"

typedef struct NevoBackend NevoBackend;
typedef struct NevoRows NevoRows;           /* parameter rows on a backend */
typedef struct NevoWorkspace NevoWorkspace; /* a forward call's scratch, one per thread */

/* The backend named `name` ("cpu"; nevo_backend_names lists those built in). */
NevoStatus nevo_backend_new(const char *name, NevoBackend **out, NevoError *err);
/* The same for rank group_rank of the group_size ranks of this machine that see the
 * same devices (nevo_comm_device_rank): a device backend spreads them over those devices,
 * rank r on device r mod devices, and counts a device's memory as shared by the ranks on
 * it. nevo_backend_new is rank 0 of 1. */
NevoStatus nevo_backend_new_on_node(const char *name, int group_rank, int group_size, NevoBackend **out,
                                    NevoError *err);
void nevo_backend_free(NevoBackend *b);
const char *nevo_backend_name(const NevoBackend *b);
/* Where b computes, in words for a person: "cpu", or the device ("cuda device 1 of 8
 * (NVIDIA H200), 2 ranks on it"). */
void nevo_backend_describe(const NevoBackend *b, char *buf, size_t size);
/* The built-in backends' names, comma-separated ("cpu"). */
const char *nevo_backend_names(void);

/* `rows` rows of row_floats floats each, every row on a 64-byte line. */
NevoRows *nevo_rows_new(NevoBackend *b, size_t row_floats, int rows);
/* The floats from one such row to the next: row_floats in whole 64-byte lines. */
size_t nevo_rows_stride(size_t row_floats);
/* Rows in host memory at host + r * stride (valid while the rows are): on the CPU a
 * view, no copy; a device backend copies them. */
NevoRows *nevo_rows_host(NevoBackend *b, const float *host, size_t stride, int rows);
void nevo_rows_free(NevoRows *r);
/* Network `net` of the set into row `row` (stream: nevo_perturb_rows's hint). bases:
 * the set's bases on this backend (nevo_rows_host of ts->bases), or NULL where the set
 * has none in floats. A device backend may defer the build to the next forward that
 * reads the rows (ordered before it). */
void nevo_rows_build(NevoRows *r, int row, const NevoTaskSet *ts, const NevoRows *bases, const NevoPolicy *p,
                     int net, int stream);
/* Networks net and net + 1, an antithetic pair (nevo_taskset_is_pair), into rows
 * row_plus and row_minus in one pass over their noise slice. */
void nevo_rows_build_pair(NevoRows *r, int row_plus, int row_minus, const NevoTaskSet *ts, const NevoRows *bases,
                          const NevoPolicy *p, int net, int stream);
/* The rows' floats copied to host memory (rows x row_floats, packed): for tests and
 * checks; waits for the builds and forwards issued before. */
void nevo_rows_read(const NevoRows *r, int row0, int rows, size_t row_floats, float *host);
/* Host floats (rows x row_floats, packed) into rows row0 .. row0 + rows - 1, in place:
 * new parameters for the same rows without a new allocation (an actor-learner's each
 * update). A view is its host memory already, so the only write it takes is from that
 * memory, and there is nothing to copy. No build or forward of these rows may be in
 * flight (a forward is done when nevo_backend_forward returns). */
void nevo_rows_write(NevoRows *r, int row0, int rows, size_t row_floats, const float *host);

NevoWorkspace *nevo_workspace_new(NevoBackend *b, const NevoPolicy *p, int max_rows);
void nevo_workspace_free(NevoWorkspace *w);

/* out (n, n_out) = network in row which[i] of r applied to obs[i], for each i < n;
 * returns with out written. Row i's result depends on its network and obs[i] alone, and
 * for a recurrent policy on its state row: state (n, nevo_policy_state_floats(p)) is
 * read and updated (nevo_policy_forward_state); NULL for a feed-forward policy. */
void nevo_backend_forward(NevoBackend *b, const NevoPolicy *p, const NevoRows *r, const int *which, const float *obs,
                          int n, float *state, float *out, NevoWorkspace *w);
/* The factored low-rank forward (EGGROLL; nevo_policy_forward_factored's bits): row i
 * runs base row base[i] of bases perturbed by factor row which[i] of factors, a
 * NEVO_NET_FACTORED member's (nevo_rows_build_factored into rows of
 * nevo_factor_row_floats(p, rank) floats). Feed-forward policies. Where the backend has
 * no factored forward (nevo_backend_has_factored 0) neither may be called. */
int nevo_backend_has_factored(const NevoBackend *b);
void nevo_rows_build_factored(NevoRows *r, int row, const NevoTaskSet *ts, const NevoPolicy *p, int net);
void nevo_backend_forward_factored(NevoBackend *b, const NevoPolicy *p, const NevoRows *bases, const int *base,
                                   const NevoRows *factors, const int *which, int rank, const float *obs, int n,
                                   float *out, NevoWorkspace *w);
/* How the evaluator batches for this backend, for calls of `per_thread` tasks a forward
 * thread over `batches` batches (0: not known yet): slots per batch where its caller
 * leaves them open (0: the CPU's rule, by nevo_backend_cache_bytes; a device's fit its
 * memory), and forward threads: 0, not pipelined; F >=
 * 1, at most F threads run the forwards of batches while the others step envs, with a
 * batch per thread (a device's forwards then overlap the simulation and each other).
 * host_tasks: the evaluator runs calls of at most that many tasks on the CPU backend
 * instead (0: none), since a call that fills one batch cannot overlap its forwards and
 * would pay a device round trip at every step. Results never depend on any of them. */
void nevo_backend_batching(const NevoBackend *b, const NevoPolicy *p, int per_thread, int batches, int *slots,
                           int *fwd_threads, int *host_tasks);
/* The fast memory a worker's networks should fit in to be read again from it (the
 * CPU's L2 cache): what the evaluator sizes its episode slots by. */
size_t nevo_backend_cache_bytes(const NevoBackend *b);
/* The bytes of rows a call may add: a device's half of this rank's share of its free
 * memory (nevo_backend_new_on_node); SIZE_MAX on the host, whose memory the run checks
 * at its start. The evaluator builds a network per episode rather than a row per
 * network where those rows would not fit. */
size_t nevo_backend_rows_room(const NevoBackend *b);

/* Host memory (64-byte aligned) for a forward's observations and outputs, where the
 * backend reads and writes them fastest (pinned for a device's DMA); freed by
 * nevo_backend_host_free of the same backend. */
void *nevo_backend_host_alloc(NevoBackend *b, size_t bytes);
void nevo_backend_host_free(NevoBackend *b, void *p);

/* Waits for every operation issued so far. */
void nevo_backend_synchronize(NevoBackend *b);

#endif
