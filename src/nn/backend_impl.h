/* What a backend implements (internal): a small table of operations over rows it
 * owns. backend.c dispatches to it; a backend's file fills one in and adds a line to
 * backend.c's list. */
#ifndef NEVO_BACKEND_IMPL_H
#define NEVO_BACKEND_IMPL_H

#include "nevo/backend.h"

typedef struct NevoBackendOps {
    const char *name;
    /* the backend's context for rank group_rank of the group_size ranks of this machine
     * that see the same devices (nevo_backend_new_on_node), or NULL where it cannot run
     * here */
    void *(*init)(int group_rank, int group_size);
    void (*done)(void *ctx);
    /* r->data for r->rows rows of r->stride floats (64-byte aligned rows), or a view of
     * host memory (host != NULL: a device copies it) */
    void (*rows_alloc)(void *ctx, NevoRows *r, const float *host);
    void (*rows_free)(void *ctx, NevoRows *r);
    /* rows row0 .. row0 + rows - 1, their first row_floats floats each, into host (packed) */
    void (*rows_read)(void *ctx, const NevoRows *r, int row0, int rows, size_t row_floats, float *host);
    /* host (packed) into those rows, of rows that are not a view (nevo_rows_write) */
    void (*rows_write)(void *ctx, NevoRows *r, int row0, int rows, size_t row_floats, const float *host);
    /* bases: the set's bases on this backend (nevo_rows_host of ts->bases), or NULL
     * where the set has none in floats */
    void (*build)(void *ctx, NevoRows *r, int row, const NevoTaskSet *ts, const NevoRows *bases,
                  const NevoPolicy *p, int net, int stream);
    void (*build_pair)(void *ctx, NevoRows *r, int row_plus, int row_minus, const NevoTaskSet *ts,
                       const NevoRows *bases, const NevoPolicy *p, int net, int stream);
    void *(*workspace_new)(void *ctx, const NevoPolicy *p, int max_rows);
    void (*workspace_free)(void *ctx, void *ws);
    /* state: (n, nevo_policy_state_floats(p)) rows read and updated (a recurrent
     * policy), NULL for a feed-forward one */
    void (*forward)(void *ctx, const NevoPolicy *p, const NevoRows *r, const int *which, const float *obs, int n,
                    float *state, float *out, void *ws);
    /* the factored low-rank forward (nevo_backend_forward_factored) and its factor rows
     * (nevo_rows_build_factored); NULL where the backend has neither */
    void (*build_factored)(void *ctx, NevoRows *r, int row, const NevoTaskSet *ts, const NevoPolicy *p, int net);
    void (*forward_factored)(void *ctx, const NevoPolicy *p, const NevoRows *bases, const int *base,
                             const NevoRows *factors, const int *which, int rank, const float *obs, int n, float *out,
                             void *ws);
    void (*synchronize)(void *ctx);
    size_t (*cache_bytes)(void *ctx);
    size_t (*rows_room)(void *ctx); /* nevo_backend_rows_room; NULL: no bound */
    /* slots per batch, for calls of per_thread tasks a forward thread (0: unknown) over
     * `batches` batches, where the caller leaves them open (0: the evaluator's CPU
     * default), forward threads and the calls left to the host (nevo_backend_batching);
     * NULL: none of them */
    void (*batching)(void *ctx, const NevoPolicy *p, int per_thread, int batches, int *slots, int *fwd_threads,
                     int *host_tasks);
    /* why init returned NULL, for the error message; NULL: no reason given */
    const char *(*unavailable)(void);
    /* host memory the forward's observations and outputs are best in (pinned, for a
     * device's DMA); NULL: nevo_alloc_aligned and free */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    void (*describe)(void *ctx, char *buf, size_t size); /* nevo_backend_describe; NULL: the name */
} NevoBackendOps;

struct NevoBackend {
    const NevoBackendOps *ops;
    void *ctx;
};

struct NevoRows {
    NevoBackend *backend;
    float *data;    /* where the backend computes */
    size_t stride;  /* floats from one row to the next */
    int rows;
    int view;       /* data is the caller's host memory */
    void *priv;     /* the backend's own state of these rows */
};

struct NevoWorkspace {
    NevoBackend *backend;
    void *ws;
};

/* A device's slots a batch: `first`, doubled up to `most` while a call's per_thread
 * tasks a forward thread still give each thread two batches, then halved (down to 1)
 * while the batches' device memory (`batches` times slot_bytes a slot) would take more
 * than half of free_bytes. */
int nevo_device_slots(int per_thread, int batches, size_t slot_bytes, size_t free_bytes, int first, int most);

/* The device of rank group_rank of group_size ranks that see the same `devices`:
 * group_rank mod devices, so the ranks spread evenly; *sharers: how many of the
 * ranks it has (their batches share its memory). */
int nevo_device_place(int group_rank, int group_size, int devices, int *sharers);

/* The memory a rank sizes its slots by, on a device `sharers` ranks share: the free
 * memory, at most its share of the total (ranks size at about the same moment: each
 * counts its share, whichever allocated first). */
size_t nevo_device_share(size_t free_bytes, size_t total_bytes, int sharers);

extern const NevoBackendOps nevo_backend_cpu_ops;
#ifdef NEVO_CUDA
extern const NevoBackendOps nevo_backend_cuda_ops; /* backend_cuda.cu, in a CUDA=1 build */
#endif

#endif
