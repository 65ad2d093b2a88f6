/* The CPU backend: rows in host memory, nevo's kernels (nevo_policy_forward and the
 * kernel set's perturbation) on the calling thread, nothing asynchronous. */
#include <stdlib.h>
#include <string.h>

#include "nn/backend_impl.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

static int cpu_context; /* the CPU backend keeps no state: a non-NULL context */

static void *cpu_init(int group_rank, int group_size) {
    (void)group_rank, (void)group_size;
    return &cpu_context;
}
static void cpu_done(void *ctx) { (void)ctx; }

static void cpu_rows_alloc(void *ctx, NevoRows *r, const float *host) {
    (void)ctx;
    if (host) {
        r->data = (float *)host; /* a view: never written (nevo_rows_build asserts it) */
        r->view = 1;
    } else {
        r->data = nevo_alloc_aligned(sizeof(float) * r->stride * (size_t)(r->rows > 0 ? r->rows : 1));
    }
}

static void cpu_rows_free(void *ctx, NevoRows *r) {
    (void)ctx;
    if (!r->view) free(r->data);
}

static void cpu_rows_read(void *ctx, const NevoRows *r, int row0, int rows, size_t row_floats, float *host) {
    (void)ctx;
    for (int i = 0; i < rows; i++)
        memcpy(host + (size_t)i * row_floats, r->data + (size_t)(row0 + i) * r->stride, sizeof(float) * row_floats);
}

static void cpu_rows_write(void *ctx, NevoRows *r, int row0, int rows, size_t row_floats, const float *host) {
    (void)ctx;
    for (int i = 0; i < rows; i++)
        memcpy(r->data + (size_t)(row0 + i) * r->stride, host + (size_t)i * row_floats, sizeof(float) * row_floats);
}

/* builds read the set's own floats: the bases' rows here are views of them */
static void cpu_build(void *ctx, NevoRows *r, int row, const NevoTaskSet *ts, const NevoRows *bases,
                      const NevoPolicy *p, int net, int stream) {
    (void)ctx;
    (void)bases;
    nevo_taskset_build(ts, p, net, r->data + (size_t)row * r->stride, stream);
}

static void cpu_build_pair(void *ctx, NevoRows *r, int row_plus, int row_minus, const NevoTaskSet *ts,
                           const NevoRows *bases, const NevoPolicy *p, int net, int stream) {
    (void)ctx;
    (void)bases;
    nevo_taskset_build_pair(ts, p, net, r->data + (size_t)row_plus * r->stride, r->data + (size_t)row_minus * r->stride,
                            stream);
}

static void *cpu_workspace_new(void *ctx, const NevoPolicy *p, int max_rows) {
    (void)ctx;
    return nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, max_rows));
}

static void cpu_workspace_free(void *ctx, void *ws) {
    (void)ctx;
    free(ws);
}

static void cpu_forward(void *ctx, const NevoPolicy *p, const NevoRows *r, const int *which, const float *obs, int n,
                        float *state, float *out, void *ws) {
    (void)ctx;
    if (state)
        nevo_policy_forward_state(p, r->data, r->stride, which, obs, n, state, out, ws);
    else
        nevo_policy_forward(p, r->data, r->stride, which, obs, n, out, ws);
}

static void cpu_build_factored(void *ctx, NevoRows *r, int row, const NevoTaskSet *ts, const NevoPolicy *p, int net) {
    (void)ctx;
    nevo_taskset_factor_row(ts, p, net, r->data + (size_t)row * r->stride);
}

static void cpu_forward_factored(void *ctx, const NevoPolicy *p, const NevoRows *bases, const int *base,
                                 const NevoRows *factors, const int *which, int rank, const float *obs, int n,
                                 float *out, void *ws) {
    (void)ctx;
    nevo_policy_forward_factored(p, bases->data, bases->stride, base, factors->data, factors->stride, which, rank,
                                 obs, n, out, ws);
}

static void cpu_synchronize(void *ctx) { (void)ctx; }

static size_t cpu_cache_bytes(void *ctx) {
    (void)ctx;
    return nevo_cache_l2_bytes();
}

const NevoBackendOps nevo_backend_cpu_ops = {
    .name = "cpu",
    .init = cpu_init,
    .done = cpu_done,
    .rows_alloc = cpu_rows_alloc,
    .rows_free = cpu_rows_free,
    .rows_read = cpu_rows_read,
    .rows_write = cpu_rows_write,
    .build = cpu_build,
    .build_pair = cpu_build_pair,
    .workspace_new = cpu_workspace_new,
    .workspace_free = cpu_workspace_free,
    .forward = cpu_forward,
    .build_factored = cpu_build_factored,
    .forward_factored = cpu_forward_factored,
    .synchronize = cpu_synchronize,
    .cache_bytes = cpu_cache_bytes,
};
