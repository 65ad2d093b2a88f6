/* Backend dispatch and the list of backends built in. */
#include "nn/backend_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new backend: its ops here, its file beside backend_cpu.c. */
static const NevoBackendOps *const backends[] = {
    &nevo_backend_cpu_ops,
#ifdef NEVO_CUDA
    &nevo_backend_cuda_ops,
#endif
};
#define N_BACKENDS ((int)(sizeof backends / sizeof backends[0]))

const char *nevo_backend_names(void) {
    static char names[256];
    if (!names[0])
        for (int i = 0; i < N_BACKENDS; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", backends[i]->name);
        }
    return names;
}

NevoStatus nevo_backend_new(const char *name, NevoBackend **out, NevoError *err) {
    return nevo_backend_new_on_node(name, 0, 1, out, err);
}

NevoStatus nevo_backend_new_on_node(const char *name, int group_rank, int group_size, NevoBackend **out,
                                    NevoError *err) {
    *out = NULL;
    NEVO_ASSERT(group_size >= 1 && group_rank >= 0 && group_rank < group_size);
    for (int i = 0; i < N_BACKENDS; i++) {
        if (strcmp(backends[i]->name, name) != 0) continue;
        void *ctx = backends[i]->init(group_rank, group_size);
        if (!ctx)
            return nevo_error(err, NEVO_ERR_UNSUPPORTED, "backend %s cannot run on this machine%s%s", name,
                              backends[i]->unavailable ? ": " : "",
                              backends[i]->unavailable ? backends[i]->unavailable() : "");
        NevoBackend *b = nevo_alloc(sizeof *b);
        b->ops = backends[i];
        b->ctx = ctx;
        *out = b;
        return NEVO_OK;
    }
    return nevo_error(err, NEVO_ERR_NOTFOUND, "unknown backend '%s' (built in: %s%s)", name, nevo_backend_names(),
                      strcmp(name, "cuda") == 0 ? "; the cuda backend is built by `make CUDA=1`" : "");
}

void nevo_backend_free(NevoBackend *b) {
    if (!b) return;
    b->ops->done(b->ctx);
    free(b);
}

const char *nevo_backend_name(const NevoBackend *b) { return b->ops->name; }

void nevo_backend_describe(const NevoBackend *b, char *buf, size_t size) {
    if (b->ops->describe) b->ops->describe(b->ctx, buf, size);
    else snprintf(buf, size, "%s", b->ops->name);
}

static NevoRows *rows_make(NevoBackend *b, size_t stride, int rows, const float *host) {
    NevoRows *r = nevo_alloc(sizeof *r);
    r->backend = b;
    r->stride = stride;
    r->rows = rows;
    b->ops->rows_alloc(b->ctx, r, host);
    return r;
}

size_t nevo_rows_stride(size_t row_floats) { return (row_floats + 15) & ~(size_t)15; }

NevoRows *nevo_rows_new(NevoBackend *b, size_t row_floats, int rows) {
    return rows_make(b, nevo_rows_stride(row_floats), rows, NULL);
}

NevoRows *nevo_rows_host(NevoBackend *b, const float *host, size_t stride, int rows) {
    return rows_make(b, stride, rows, host);
}

void nevo_rows_free(NevoRows *r) {
    if (!r) return;
    r->backend->ops->rows_free(r->backend->ctx, r);
    free(r);
}

void nevo_rows_build(NevoRows *r, int row, const NevoTaskSet *ts, const NevoRows *bases, const NevoPolicy *p,
                     int net, int stream) {
    NEVO_ASSERT(row >= 0 && row < r->rows && !r->view);
    NEVO_ASSERT(!bases || (bases->backend == r->backend && bases->rows == ts->n_bases));
    r->backend->ops->build(r->backend->ctx, r, row, ts, bases, p, net, stream);
}

void nevo_rows_build_pair(NevoRows *r, int row_plus, int row_minus, const NevoTaskSet *ts, const NevoRows *bases,
                          const NevoPolicy *p, int net, int stream) {
    NEVO_ASSERT(row_plus >= 0 && row_plus < r->rows && row_minus >= 0 && row_minus < r->rows && !r->view);
    NEVO_ASSERT(nevo_taskset_is_pair(ts, net));
    NEVO_ASSERT(!bases || (bases->backend == r->backend && bases->rows == ts->n_bases));
    r->backend->ops->build_pair(r->backend->ctx, r, row_plus, row_minus, ts, bases, p, net, stream);
}

void nevo_rows_read(const NevoRows *r, int row0, int rows, size_t row_floats, float *host) {
    NEVO_ASSERT(row0 >= 0 && rows >= 0 && row0 + rows <= r->rows && row_floats <= r->stride);
    r->backend->ops->rows_read(r->backend->ctx, r, row0, rows, row_floats, host);
}

void nevo_rows_write(NevoRows *r, int row0, int rows, size_t row_floats, const float *host) {
    NEVO_ASSERT(row0 >= 0 && rows >= 0 && row0 + rows <= r->rows && row_floats <= r->stride);
    if (r->view) { /* the rows are that memory */
        NEVO_ASSERT(host == r->data + (size_t)row0 * r->stride && (rows <= 1 || row_floats == r->stride));
        return;
    }
    r->backend->ops->rows_write(r->backend->ctx, r, row0, rows, row_floats, host);
}

NevoWorkspace *nevo_workspace_new(NevoBackend *b, const NevoPolicy *p, int max_rows) {
    NevoWorkspace *w = nevo_alloc(sizeof *w);
    w->backend = b;
    w->ws = b->ops->workspace_new(b->ctx, p, max_rows);
    return w;
}

void nevo_workspace_free(NevoWorkspace *w) {
    if (!w) return;
    w->backend->ops->workspace_free(w->backend->ctx, w->ws);
    free(w);
}

void nevo_backend_forward(NevoBackend *b, const NevoPolicy *p, const NevoRows *r, const int *which, const float *obs,
                          int n, float *state, float *out, NevoWorkspace *w) {
    NEVO_ASSERT((state != NULL) == (p->lstm_layer >= 0));
    b->ops->forward(b->ctx, p, r, which, obs, n, state, out, w->ws);
}

int nevo_backend_has_factored(const NevoBackend *b) { return b->ops->forward_factored != NULL; }

void nevo_rows_build_factored(NevoRows *r, int row, const NevoTaskSet *ts, const NevoPolicy *p, int net) {
    NEVO_ASSERT(r->backend->ops->build_factored && row >= 0 && row < r->rows && !r->view);
    NEVO_ASSERT(ts->nets[net].kind == NEVO_NET_FACTORED && r->stride >= nevo_factor_row_floats(p, (int)ts->nets[net].rank));
    r->backend->ops->build_factored(r->backend->ctx, r, row, ts, p, net);
}

void nevo_backend_forward_factored(NevoBackend *b, const NevoPolicy *p, const NevoRows *bases, const int *base,
                                   const NevoRows *factors, const int *which, int rank, const float *obs, int n,
                                   float *out, NevoWorkspace *w) {
    NEVO_ASSERT(b->ops->forward_factored && p->lstm_layer < 0 && bases->backend == b && factors->backend == b);
    b->ops->forward_factored(b->ctx, p, bases, base, factors, which, rank, obs, n, out, w->ws);
}

void nevo_backend_synchronize(NevoBackend *b) { b->ops->synchronize(b->ctx); }

size_t nevo_backend_cache_bytes(const NevoBackend *b) { return b->ops->cache_bytes(b->ctx); }

size_t nevo_backend_rows_room(const NevoBackend *b) {
    return b->ops->rows_room ? b->ops->rows_room(b->ctx) : SIZE_MAX;
}

void nevo_backend_batching(const NevoBackend *b, const NevoPolicy *p, int per_thread, int batches, int *slots,
                           int *fwd_threads, int *host_tasks) {
    *slots = *fwd_threads = *host_tasks = 0;
    if (b->ops->batching) b->ops->batching(b->ctx, p, per_thread, batches, slots, fwd_threads, host_tasks);
}

int nevo_device_slots(int per_thread, int batches, size_t slot_bytes, size_t free_bytes, int first, int most) {
    int s = first;
    while (2 * s <= most && per_thread >= 2 * 2 * s) s *= 2;
    /* a large network runs with fewer slots rather than failing to allocate them */
    while (s > 1 && (double)batches * s * (double)slot_bytes > 0.5 * (double)free_bytes) s /= 2;
    return s;
}

int nevo_device_place(int group_rank, int group_size, int devices, int *sharers) {
    int d = group_rank % devices;
    *sharers = group_size / devices + (d < group_size % devices);
    return d;
}

size_t nevo_device_share(size_t free_bytes, size_t total_bytes, int sharers) {
    size_t share = total_bytes / (size_t)(sharers > 1 ? sharers : 1);
    return free_bytes < share ? free_bytes : share;
}

void *nevo_backend_host_alloc(NevoBackend *b, size_t bytes) {
    return b->ops->host_alloc ? b->ops->host_alloc(b->ctx, bytes) : nevo_alloc_aligned(bytes ? bytes : 1);
}

void nevo_backend_host_free(NevoBackend *b, void *p) {
    if (b->ops->host_free)
        b->ops->host_free(b->ctx, p);
    else
        free(p);
}
