/* The CUDA backend: parameter rows in device memory, networks built there from their
 * base and a noise slice of the device's copy of the noise table, and the batched
 * heterogeneous forward as one kernel per layer (kernel_bodies.h holds the kernels'
 * bodies, which tests/test_cuda.c also runs on the CPU).
 *
 * What crosses PCIe: each call's bases once (a GA's parents, ES's mean), the noise table
 * once per run, and per forward the observations, the row -> network map and the
 * outputs. A network built from a recipe is never uploaded: its build is queued on its
 * rows and runs, one kernel for all queued builds, on the stream of the next forward
 * that reads them, so it is ordered before that forward.
 *
 * The forward's bits are the CPU backend's (kernel_bodies.h says why), so a run gives
 * the same results on either backend. Built only with `make CUDA=1`. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>

#define _Noreturn [[noreturn]] /* C11's spelling, in nevo's C headers */
extern "C" {
#include "nn/backend_cuda.h"
#include "nn/backend_impl.h"
#include "nevo/noise.h"
#include "nevo/params.h"
#include "nn/kernels.h"
}
#include "nn/kernel_bodies.h"

#define CK(call)                                                                                       \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) nevo_fatal(__FILE__, __LINE__, "CUDA: %s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)
#define CK_LAUNCH() CK(cudaGetLastError())

/* ---- kernels ------------------------------------------------------------------------ */

__global__ void __launch_bounds__(NEVO_KD_THREADS) k_dense(NevoKDense a) { nevo_kd_block(a); }

template <int ROWS> __global__ void __launch_bounds__(NEVO_KD_THREADS) k_dense_l(NevoKDense a) {
    nevo_kd1_block<ROWS>(a);
}

__global__ void __launch_bounds__(NEVO_KT_THREADS) k_dense_t(NevoKDense a) {
    __shared__ float x[NEVO_KT_KC * NEVO_KT_XS], wt[NEVO_KT_KC * NEVO_KT_COLS];
    float acc[NEVO_KT_SUMS];
    int run = blockIdx.x, cb = blockIdx.y, t = threadIdx.x;
    nevo_kt_init(a, run, cb, t, acc);
    for (int k0 = 0; k0 < a.in; k0 += NEVO_KT_KC) {
        nevo_kt_load(a, run, cb, t, k0, x, wt);
        __syncthreads();
        nevo_kt_accum(t, x, wt, acc);
        __syncthreads();
    }
    nevo_kt_store(a, run, cb, t, acc);
}

__global__ void __launch_bounds__(NEVO_KC_THREADS) k_conv(NevoKConv a) {
    nevo_kc_out(a, blockIdx.x, blockIdx.y, threadIdx.x);
}

__global__ void __launch_bounds__(NEVO_KC_THREADS) k_conv_rows(NevoKConv a) {
    extern __shared__ __align__(16) float sm[];
    nevo_kc_load(a, blockIdx.x, threadIdx.x, sm);
    __syncthreads();
    nevo_kc_items(a, blockIdx.x, threadIdx.x, sm);
}

__global__ void k_norm(const float *obs, const float *mean, const float *std, int n, int dim, float *x, int xs) {
    nevo_kn_elem(obs, mean, std, n, dim, x, xs, blockIdx.x, threadIdx.x);
}

/* a block's part and u: rows x 16 rank and rows x rank floats, several rows only where
 * 16 rank <= NEVO_KF_THREADS / 2, so at most 16 NEVO_LOWRANK_MAX and NEVO_LOWRANK_MAX */
static_assert(NEVO_KF_THREADS <= 16 * NEVO_LOWRANK_MAX, "k_factor_dense: part's rows");

__global__ void __launch_bounds__(NEVO_KF_THREADS) k_factor_dense(NevoKFactor a) {
    __shared__ float part[16 * NEVO_LOWRANK_MAX], u[NEVO_LOWRANK_MAX];
    nevo_kf_dot(a, blockIdx.x, threadIdx.x, part);
    __syncthreads();
    nevo_kf_tree(a, blockIdx.x, threadIdx.x, part, u);
    __syncthreads();
    nevo_kf_apply(a, blockIdx.x, threadIdx.x, u);
}

__global__ void __launch_bounds__(NEVO_KF_THREADS) k_factor_conv(NevoKFactor a) {
    nevo_kf_conv_u(a, blockIdx.x, threadIdx.x);
    __syncthreads(); /* the block's u, in global memory, written */
    nevo_kf_conv_apply(a, blockIdx.x, threadIdx.x);
}

__global__ void k_lstm_xh(NevoKLstm a) { nevo_kl_xh(a, blockIdx.x, threadIdx.x); }
__global__ void k_lstm_cell(NevoKLstm a) { nevo_kl_cell(a, blockIdx.x, threadIdx.x); }

__global__ void k_build(const NevoKBuild *e, size_t n) {
    nevo_kb_elems(&e[blockIdx.x], n, blockIdx.y, gridDim.y, threadIdx.x);
}

/* ---- context, rows and queued builds ------------------------------------------------ */

/* An integer setting from the environment (the tuning knobs below), dflt where unset. */
static int env_int(const char *name, int dflt, int lo, int hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi)
        nevo_fatal(__FILE__, __LINE__, "%s=%s: expected a whole number from %d to %d", name, v, lo, hi);
    return (int)x;
}

typedef struct Pending {
    NevoKBuild e;
    float *upload; /* host floats to copy to e.plus instead (a network built on the host) */
} Pending;

typedef struct RowsPriv {
    pthread_mutex_t mu;
    Pending *q;
    int n, cap;
    size_t nparams; /* floats each queued build writes */
    cudaEvent_t built; /* the last flush's builds done (each flush waits for the one before) */
    int flushed;
    float *lo, *hi; /* the allocation, to drop queued builds that read it when it goes */
    NevoKFRec *rec; /* factor rows (nevo_rows_build_factored): each row's member, on the host
                       (the forward reads its slice from the device's noise table) */
    const float *rec_noise; /* the device table those slices are in */
    struct RowsPriv *next;
} RowsPriv;

/* a policy's low-rank blocks on the device, for one rank */
typedef struct LRTable {
    const NevoPolicy *p;
    size_t nparams;
    int rank, n;
    NevoLRBlock *d;
} LRTable;

#define LR_TABLES 8

typedef struct Cuda {
    int device, devices;          /* this rank's device, of the devices visible */
    int sharers;                  /* the ranks of this machine on the device (nevo_device_place) */
    cudaDeviceProp prop;
    LRTable lr[LR_TABLES];        /* the low-rank tables uploaded, oldest replaced first */
    int lr_next;
    pthread_mutex_t mu;           /* the noise table, the low-rank tables and the list of rows */
    const float *noise_host;      /* the host table the device copy is of */
    size_t noise_size;
    float *noise_d;
    RowsPriv *rows;               /* every live rows object */
} Cuda;

static char unavailable[256];

/* The ranks of a machine that see the same devices spread over them (rank r on device
 * r mod n; nevo_comm_device_rank: a launcher that gives each rank its own devices
 * makes each the one rank of its group). */
static void *cuda_init(int group_rank, int group_size) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (e != cudaSuccess) /* no driver (no GPU) reads "driver version is insufficient" */
            snprintf(unavailable, sizeof unavailable, "no usable CUDA device and driver (CUDA: %s)",
                     cudaGetErrorString(e));
        else
            snprintf(unavailable, sizeof unavailable, "no CUDA device is present");
        return NULL;
    }
    Cuda *c = (Cuda *)nevo_alloc(sizeof *c);
    c->devices = n;
    c->device = nevo_device_place(group_rank, group_size, n, &c->sharers);
    CK(cudaSetDevice(c->device));
    CK(cudaGetDeviceProperties(&c->prop, c->device));
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static const char *cuda_unavailable(void) { return unavailable; }

/* The context, with the calling thread on its device: a thread's current device is its
 * own (device 0 until set), and the evaluator's threads call in. */
static Cuda *on_device(void *ctx) {
    Cuda *c = (Cuda *)ctx;
    if (c->devices > 1) CK(cudaSetDevice(c->device));
    return c;
}

static void cuda_done(void *ctx) {
    Cuda *c = on_device(ctx);
    CK(cudaDeviceSynchronize());
    if (c->noise_d) CK(cudaFree(c->noise_d));
    for (int i = 0; i < LR_TABLES; i++)
        if (c->lr[i].d) CK(cudaFree(c->lr[i].d));
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The width of a workspace's two activation buffers: the widest layer or the input. */
static size_t work_width(const NevoPolicy *p) {
    return (size_t)(p->max_width > p->obs_dim ? p->max_width : p->obs_dim);
}

static void rows_alloc(void *ctx, NevoRows *r, const float *host) {
    Cuda *c = on_device(ctx);
    /* a copy of host rows gets rows of whole 64-byte lines too (the forward's 16-byte
     * weight loads) */
    size_t hs = r->stride;
    r->stride = nevo_rows_stride(hs);
    size_t n = r->stride * (size_t)(r->rows > 0 ? r->rows : 1);
    CK(cudaMalloc((void **)&r->data, sizeof(float) * n));
    if (host && r->rows > 0) {
        CK(cudaMemcpy2D(r->data, sizeof(float) * r->stride, host, sizeof(float) * hs, sizeof(float) * hs,
                        (size_t)r->rows, cudaMemcpyHostToDevice));
        CK(cudaStreamSynchronize(0)); /* from pageable memory the copy may still be in flight */
    }
    r->view = 0; /* a device copy, never the caller's memory */
    RowsPriv *q = (RowsPriv *)nevo_alloc(sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    CK(cudaEventCreateWithFlags(&q->built, cudaEventDisableTiming));
    q->lo = r->data;
    q->hi = r->data + n;
    pthread_mutex_lock(&c->mu);
    q->next = c->rows;
    c->rows = q;
    pthread_mutex_unlock(&c->mu);
    r->priv = q;
}

static void drop(Pending *p) { free(p->upload); }

static void rows_free(void *ctx, NevoRows *r) {
    Cuda *c = on_device(ctx);
    RowsPriv *q = (RowsPriv *)r->priv;
    CK(cudaDeviceSynchronize());
    pthread_mutex_lock(&c->mu);
    for (RowsPriv **pp = &c->rows; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    /* builds queued on other rows that read these (an evaluation that stopped early) */
    for (RowsPriv *o = c->rows; o; o = o->next) {
        pthread_mutex_lock(&o->mu);
        int k = 0;
        for (int i = 0; i < o->n; i++) {
            const float *b = o->q[i].e.base;
            if (b && b >= q->lo && b < q->hi)
                drop(&o->q[i]);
            else
                o->q[k++] = o->q[i];
        }
        o->n = k;
        pthread_mutex_unlock(&o->mu);
    }
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < q->n; i++) drop(&q->q[i]);
    free(q->q);
    free(q->rec);
    CK(cudaEventDestroy(q->built));
    pthread_mutex_destroy(&q->mu);
    free(q);
    CK(cudaFree(r->data));
}

static void enqueue(NevoRows *r, Pending p, size_t nparams) {
    RowsPriv *q = (RowsPriv *)r->priv;
    pthread_mutex_lock(&q->mu);
    NEVO_ASSERT(q->n == 0 || q->nparams == nparams);
    q->nparams = nparams;
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->q = (Pending *)realloc(q->q, sizeof(Pending) * (size_t)q->cap);
        if (!q->q) nevo_fatal(__FILE__, __LINE__, "out of memory");
    }
    q->q[q->n++] = p;
    pthread_mutex_unlock(&q->mu);
}

/* The device's copy of the set's noise table (uploaded once per table). */
static const float *device_noise(Cuda *c, const NevoNoise *noise) {
    pthread_mutex_lock(&c->mu);
    if (c->noise_host != noise->table || c->noise_size != noise->size) {
        if (c->noise_d) CK(cudaFree(c->noise_d));
        CK(cudaMalloc((void **)&c->noise_d, sizeof(float) * noise->size));
        CK(cudaMemcpy(c->noise_d, noise->table, sizeof(float) * noise->size, cudaMemcpyHostToDevice));
        CK(cudaStreamSynchronize(0)); /* landed before any stream's build reads it */
        c->noise_host = noise->table;
        c->noise_size = noise->size;
    }
    const float *d = c->noise_d;
    pthread_mutex_unlock(&c->mu);
    return d;
}

/* The policy's low-rank blocks at `rank` on the device (uploaded once), and their count. */
static const NevoLRBlock *device_blocks(Cuda *c, const NevoPolicy *p, int rank, int *n) {
    pthread_mutex_lock(&c->mu);
    LRTable *t = NULL;
    for (int i = 0; i < LR_TABLES && !t; i++)
        if (c->lr[i].d && c->lr[i].p == p && c->lr[i].nparams == p->nparams && c->lr[i].rank == rank) t = &c->lr[i];
    if (!t) {
        t = &c->lr[c->lr_next];
        c->lr_next = (c->lr_next + 1) % LR_TABLES;
        if (t->d) {
            CK(cudaDeviceSynchronize()); /* no queued build reads the table it replaces */
            CK(cudaFree(t->d));
        }
        NevoLRBlock h[NEVO_LOWRANK_BLOCKS];
        t->n = nevo_lowrank_blocks(p, rank, h);
        CK(cudaMalloc((void **)&t->d, sizeof(NevoLRBlock) * (size_t)t->n));
        CK(cudaMemcpy(t->d, h, sizeof(NevoLRBlock) * (size_t)t->n, cudaMemcpyHostToDevice));
        CK(cudaStreamSynchronize(0));
        t->p = p, t->nparams = p->nparams, t->rank = rank;
    }
    const NevoLRBlock *d = t->d;
    *n = t->n;
    pthread_mutex_unlock(&c->mu);
    return d;
}

/* A BASE, PERTURBED or LOWRANK recipe as a device build; else (an init stream, a safe
 * mutation's scaled step, bases not in floats) built on the host and queued as an
 * upload. */
static void queue_build(Cuda *c, NevoRows *r, float *plus, float *minus, const NevoTaskSet *ts,
                        const NevoRows *bases, const NevoPolicy *p, int net) {
    const NevoNet *n = &ts->nets[net];
    Pending e;
    memset(&e, 0, sizeof e);
    if (bases && (n->kind == NEVO_NET_BASE || n->kind == NEVO_NET_PERTURBED || n->kind == NEVO_NET_LOWRANK)) {
        e.e.base = bases->data + (size_t)n->base * bases->stride;
        if (n->kind != NEVO_NET_BASE) {
            int low = n->kind == NEVO_NET_LOWRANK;
            e.e.eps = device_noise(c, ts->noise) + (nevo_taskset_slice(ts, p, net) - ts->noise->table);
            e.e.sigma = n->sigma;
            e.e.plus = plus;
            e.e.minus = minus;
            if (low) {
                e.e.rank = (int)n->rank;
                e.e.c = (float)(1.0 / sqrt((double)n->rank));
                e.e.blocks = device_blocks(c, p, (int)n->rank, &e.e.n_blocks);
            }
        } else {
            e.e.plus = plus;
        }
    } else {
        NEVO_ASSERT(!minus);
        e.upload = (float *)nevo_alloc(sizeof(float) * ts->nparams);
        nevo_taskset_build(ts, p, net, e.upload, 0);
        e.e.plus = plus;
    }
    enqueue(r, e, ts->nparams);
}

static void cuda_build(void *ctx, NevoRows *r, int row, const NevoTaskSet *ts, const NevoRows *bases,
                       const NevoPolicy *p, int net, int stream) {
    (void)stream;
    const NevoNet *n = &ts->nets[net];
    float *dst = r->data + (size_t)row * r->stride;
    int minus = (n->kind == NEVO_NET_PERTURBED || n->kind == NEVO_NET_LOWRANK) && n->sign < 0 && bases;
    queue_build(on_device(ctx), r, minus ? NULL : dst, minus ? dst : NULL, ts, bases, p, net);
}

static void cuda_build_pair(void *ctx, NevoRows *r, int row_plus, int row_minus, const NevoTaskSet *ts,
                            const NevoRows *bases, const NevoPolicy *p, int net, int stream) {
    if (!bases) { /* no device copy of the bases: each on the host */
        cuda_build(ctx, r, row_plus, ts, bases, p, net, stream);
        cuda_build(ctx, r, row_minus, ts, bases, p, net + 1, stream);
        return;
    }
    queue_build(on_device(ctx), r, r->data + (size_t)row_plus * r->stride, r->data + (size_t)row_minus * r->stride, ts,
                bases, p, net);
}

/* A factored member is never built: its row records where its compact slice lies in
 * the device's noise table, and its coefficients; the forward uploads the records of
 * its rows with the call. */
static void cuda_build_factored(void *ctx, NevoRows *r, int row, const NevoTaskSet *ts, const NevoPolicy *p, int net) {
    RowsPriv *q = (RowsPriv *)r->priv;
    const NevoNet *n = &ts->nets[net];
    size_t z = (size_t)(nevo_taskset_slice(ts, p, net) - ts->noise->table);
    const float *noise = device_noise(on_device(ctx), ts->noise);
    float head[NEVO_FACTOR_HEAD];
    nevo_factor_head(n->sign > 0 ? n->sigma : -n->sigma, (int)n->rank, head);
    pthread_mutex_lock(&q->mu);
    if (!q->rec) q->rec = (NevoKFRec *)nevo_alloc(sizeof(NevoKFRec) * (size_t)(r->rows > 0 ? r->rows : 1));
    q->rec_noise = noise;
    q->rec[row] = (NevoKFRec){z, head[0], head[1]};
    pthread_mutex_unlock(&q->mu);
}

/* Staging for the queued builds' entries: pinned on the host, and on the device. */
typedef struct Entries {
    NevoKBuild *h, *d;
    int cap;
} Entries;

/* Runs the rows' queued builds on stream s (uploads, then one kernel for the rest), and
 * makes s wait for every build of these rows, queued by any thread and flushed on any
 * stream (a population built by the pool's threads, then read by each worker's forward). */
static void flush(NevoRows *r, Entries *st, cudaStream_t s) {
    RowsPriv *q = (RowsPriv *)r->priv;
    pthread_mutex_lock(&q->mu);
    int n = q->n;
    if (q->flushed) CK(cudaStreamWaitEvent(s, q->built, 0));
    if (n == 0) {
        pthread_mutex_unlock(&q->mu);
        return;
    }
    size_t nparams = q->nparams;
    CK(cudaStreamSynchronize(s)); /* the staging's last use is done */
    if (n > st->cap) {
        if (st->h) CK(cudaFreeHost(st->h));
        if (st->d) CK(cudaFree(st->d));
        st->cap = n > 2 * st->cap ? n : 2 * st->cap;
        CK(cudaHostAlloc((void **)&st->h, sizeof(NevoKBuild) * (size_t)st->cap, cudaHostAllocDefault));
        CK(cudaMalloc((void **)&st->d, sizeof(NevoKBuild) * (size_t)st->cap));
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        Pending *p = &q->q[i];
        if (p->upload) {
            CK(cudaMemcpyAsync(p->e.plus, p->upload, sizeof(float) * nparams, cudaMemcpyHostToDevice, s));
            CK(cudaStreamSynchronize(s)); /* then the host buffer may go */
            free(p->upload);
        } else {
            st->h[m++] = p->e;
        }
    }
    q->n = 0;
    if (m > 0) {
        CK(cudaMemcpyAsync(st->d, st->h, sizeof(NevoKBuild) * (size_t)m, cudaMemcpyHostToDevice, s));
        size_t per = (size_t)NEVO_KB_THREADS * 8;
        int chunks = (int)((nparams + per - 1) / per);
        if (chunks > 65535) chunks = 65535;
        k_build<<<dim3((unsigned)m, (unsigned)chunks), NEVO_KB_THREADS, 0, s>>>(st->d, nparams);
        CK_LAUNCH();
    }
    CK(cudaEventRecord(q->built, s));
    q->flushed = 1;
    pthread_mutex_unlock(&q->mu);
}

static void rows_read(void *ctx, const NevoRows *r, int row0, int rows, size_t row_floats, float *host) {
    on_device(ctx);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Entries st = {NULL, NULL, 0};
    flush((NevoRows *)r, &st, s);
    CK(cudaMemcpy2DAsync(host, sizeof(float) * row_floats, r->data + (size_t)row0 * r->stride,
                         sizeof(float) * r->stride, sizeof(float) * row_floats, (size_t)rows, cudaMemcpyDeviceToHost,
                         s));
    CK(cudaStreamSynchronize(s));
    if (st.h) CK(cudaFreeHost(st.h));
    if (st.d) CK(cudaFree(st.d));
    CK(cudaStreamDestroy(s));
}

/* In place, after the builds flushed on these rows (a build still queued would land
 * after the write, so none may be), on a stream of its own that is synchronised before
 * returning: the forwards' streams do not wait for stream 0, and a copy from pageable
 * memory may still be in flight when the call returns. */
static void rows_write(void *ctx, NevoRows *r, int row0, int rows, size_t row_floats, const float *host) {
    on_device(ctx);
    RowsPriv *q = (RowsPriv *)r->priv;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    pthread_mutex_lock(&q->mu);
    NEVO_ASSERT(q->n == 0);
    if (q->flushed) CK(cudaStreamWaitEvent(s, q->built, 0));
    pthread_mutex_unlock(&q->mu);
    CK(cudaMemcpy2DAsync(r->data + (size_t)row0 * r->stride, sizeof(float) * r->stride, host,
                         sizeof(float) * row_floats, sizeof(float) * row_floats, (size_t)rows, cudaMemcpyHostToDevice,
                         s));
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamDestroy(s));
}

/* ---- the forward ---------------------------------------------------------------------- */

typedef struct Work {
    cudaStream_t s;
    int max_rows, obs_dim, width, n_out;
    float *h_obs, *d_obs; /* (max_rows, obs_dim), then mean and std (obs_dim each); the
                             host side holds only the statistics */
    int *h_idx, *d_idx;   /* which (max_rows), then the runs (max_rows + 1) */
    float *d_out;         /* (max_rows, n_out) */
    float *d_a, *d_b;     /* (max_rows, width) activations, layer to layer */
    Entries builds;
    int dense_rows;       /* the listed-inputs dense kernel's most rows a run (1, 2, 4, 8
                             or 16; a call of one row a network runs 1); 0: the runs kernel */
    int min_runs;         /* runs halved while fewer (nevo_kd1_runs): 2 a multiprocessor */
    int tiled_rows;       /* a call whose runs of up to NEVO_KT_ROWS rows of one network
                             average this many rows runs the tiled kernel; 0: none does */
    int call_rows;        /* this call's most rows a run (nevo_kd1_runs); 0: the runs
                             kernel; -1: the tiled kernel */
    float *d_state, *d_xh, *d_gates, *d_h; /* a recurrent policy's: the rows' states (h, c),
                             [x, h_prev], the gate sums and h (max_rows of each); NULL else */
    NevoKFRec *h_rec, *d_rec; /* the factored forward's members, a row each (max_rows) */
    float *d_u;           /* and its conv layers' u, (max_rows, u_floats) */
    size_t u_floats;
} Work;

static void *cuda_workspace_new(void *ctx, const NevoPolicy *p, int max_rows) {
    Cuda *c = on_device(ctx);
    Work *w = (Work *)nevo_alloc(sizeof *w);
    w->max_rows = max_rows > 0 ? max_rows : 1;
    w->obs_dim = p->obs_dim;
    w->width = (int)work_width(p);
    w->n_out = p->n_out;
    w->dense_rows = env_int("NEVO_CUDA_DENSE_ROWS", NEVO_KD1_ROWS_DEFAULT, 0, NEVO_KD1_ROWS);
    w->min_runs = env_int("NEVO_CUDA_MIN_RUNS", 2 * c->prop.multiProcessorCount, 0, 1 << 30);
    w->tiled_rows = env_int("NEVO_CUDA_TILED_ROWS", 0, 0, NEVO_KT_ROWS); /* off until measured */
    if (w->dense_rows & (w->dense_rows - 1))
        nevo_fatal(__FILE__, __LINE__, "NEVO_CUDA_DENSE_ROWS must be 0, 1, 2, 4, 8 or 16, not %d", w->dense_rows);
    size_t R = (size_t)w->max_rows;
    size_t obs_f = R * (size_t)w->obs_dim + 2 * (size_t)w->obs_dim, idx_n = 2 * R + 1;
    CK(cudaStreamCreateWithFlags(&w->s, cudaStreamNonBlocking));
    CK(cudaHostAlloc((void **)&w->h_obs, sizeof(float) * obs_f, cudaHostAllocDefault));
    CK(cudaHostAlloc((void **)&w->h_idx, sizeof(int) * idx_n, cudaHostAllocDefault));
    CK(cudaMalloc((void **)&w->d_obs, sizeof(float) * obs_f));
    CK(cudaMalloc((void **)&w->d_idx, sizeof(int) * idx_n));
    CK(cudaMalloc((void **)&w->d_out, sizeof(float) * R * (size_t)w->n_out));
    CK(cudaMalloc((void **)&w->d_a, sizeof(float) * R * (size_t)w->width));
    CK(cudaMalloc((void **)&w->d_b, sizeof(float) * R * (size_t)w->width));
    if (p->lstm_layer >= 0) {
        size_t in = (size_t)p->layers[p->lstm_layer].in_dim, H = (size_t)p->lstm_units;
        CK(cudaMalloc((void **)&w->d_state, sizeof(float) * R * 2 * H));
        CK(cudaMalloc((void **)&w->d_xh, sizeof(float) * R * (in + H)));
        CK(cudaMalloc((void **)&w->d_gates, sizeof(float) * R * 4 * H));
        CK(cudaMalloc((void **)&w->d_h, sizeof(float) * R * H));
    }
    return w;
}

static void cuda_workspace_free(void *ctx, void *ws) {
    on_device(ctx);
    Work *w = (Work *)ws;
    if (!w) return;
    CK(cudaStreamSynchronize(w->s));
    CK(cudaFreeHost(w->h_obs));
    CK(cudaFreeHost(w->h_idx));
    CK(cudaFree(w->d_obs));
    CK(cudaFree(w->d_idx));
    CK(cudaFree(w->d_out));
    CK(cudaFree(w->d_a));
    CK(cudaFree(w->d_b));
    if (w->d_state) CK(cudaFree(w->d_state));
    if (w->d_xh) CK(cudaFree(w->d_xh));
    if (w->d_gates) CK(cudaFree(w->d_gates));
    if (w->d_h) CK(cudaFree(w->d_h));
    if (w->h_rec) CK(cudaFreeHost(w->h_rec));
    if (w->d_rec) CK(cudaFree(w->d_rec));
    if (w->d_u) CK(cudaFree(w->d_u));
    if (w->builds.h) CK(cudaFreeHost(w->builds.h));
    if (w->builds.d) CK(cudaFree(w->builds.d));
    CK(cudaStreamDestroy(w->s));
    free(w);
}

/* The forward's stages: the inputs to the device (observations, statistics, the row ->
 * network map and its runs), the layers' kernels, the outputs back. */
static int stage_inputs(Work *w, const NevoPolicy *p, const int *which, const float *obs, int n) {
    cudaStream_t s = w->s;
    size_t R = (size_t)w->max_rows, D = (size_t)p->obs_dim;
    float *h_mean = w->h_obs + R * D;
    if (p->obs_norm) {
        memcpy(h_mean, p->obs_mean, sizeof(float) * D);
        memcpy(h_mean + D, p->obs_std, sizeof(float) * D);
    }
    memcpy(w->h_idx, which, sizeof(int) * (size_t)n);
    w->call_rows = 0;
    int n_runs = w->tiled_rows ? nevo_kd_runs(which, n, NEVO_KT_ROWS, w->h_idx + R) : 0;
    if (w->tiled_rows && (long)n_runs * w->tiled_rows <= (long)n)
        w->call_rows = -1;
    else
        n_runs = w->dense_rows ? nevo_kd1_runs(which, n, w->dense_rows, w->min_runs, w->h_idx + R, &w->call_rows)
                               : nevo_kd_runs(which, n, NEVO_KD_ROWS, w->h_idx + R);
    /* straight from the caller's memory: pinned where the evaluator took its batches'
     * buffers from nevo_backend_host_alloc, so the copy is one DMA */
    CK(cudaMemcpyAsync(w->d_obs, obs, sizeof(float) * (size_t)n * D, cudaMemcpyHostToDevice, s));
    if (p->obs_norm) CK(cudaMemcpyAsync(w->d_obs + R * D, h_mean, sizeof(float) * 2 * D, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(w->d_idx, w->h_idx, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(w->d_idx + R, w->h_idx + R, sizeof(int) * (size_t)(n_runs + 1), cudaMemcpyHostToDevice, s));
    return n_runs;
}

/* The correction of layer l (bl: the policy's blocks at a->rank) over the layer's input
 * and output. */
static void factor_layer(NevoKFactor *a, const NevoPolicy *p, const NevoLRBlock *bl, int l, const float *X, int xs,
                         float *Y, int ys) {
    const NevoLayer *L = &p->layers[l];
    const int conv[6] = {L->in_w, L->in_c, L->out_h, L->out_w, L->kernel, L->stride};
    nevo_kf_layer(a, bl[2 * l], bl[2 * l + 1], (int)L->act, conv, X, xs, Y, ys);
}

/* Layer l's corrections (f: the call's members) over its input and base output. */
static void launch_factor(Work *w, const NevoPolicy *p, const NevoLRBlock *bl, int l, NevoKFactor f, const float *X,
                          int xs, float *Y, int ys) {
    factor_layer(&f, p, bl, l, X, xs, Y, ys);
    if (p->layers[l].kind == NEVO_LAYER_CONV)
        k_factor_conv<<<(unsigned)nevo_kf_blocks(f), NEVO_KF_THREADS, 0, w->s>>>(f);
    else
        k_factor_dense<<<(unsigned)nevo_kf_blocks(f), NEVO_KF_THREADS, 0, w->s>>>(f);
    CK_LAUNCH();
}

/* The dense kernel the call's runs were split for, over rows of the networks in r. */
static void launch_dense(Work *w, const NevoRows *r, int n_runs, const float *X, int xs, int in, int out,
                         size_t w_off, size_t b_off, int act, float *Y, int ys) {
    int vec = out % 4 == 0 && w_off % 4 == 0 && r->stride % 4 == 0 && (uintptr_t)r->data % 16 == 0;
    NevoKDense a = {r->data, r->stride, w->d_idx, w->d_idx + w->max_rows, X, xs, in, out,
                    w_off, b_off, act, vec, Y, ys, NULL};
    dim3 grid((unsigned)n_runs, (unsigned)((out + NEVO_KD_COLS - 1) / NEVO_KD_COLS));
    cudaStream_t s = w->s;
    switch (w->call_rows) {
    case -1:
        grid.y = (unsigned)((out + NEVO_KT_COLS - 1) / NEVO_KT_COLS);
        k_dense_t<<<grid, NEVO_KT_THREADS, 0, s>>>(a);
        break;
    case 0: k_dense<<<grid, NEVO_KD_THREADS, 0, s>>>(a); break;
    case 1: k_dense_l<1><<<grid, NEVO_KD_THREADS, 0, s>>>(a); break;
    case 2: k_dense_l<2><<<grid, NEVO_KD_THREADS, 0, s>>>(a); break;
    case 4: k_dense_l<4><<<grid, NEVO_KD_THREADS, 0, s>>>(a); break;
    case 8: k_dense_l<8><<<grid, NEVO_KD_THREADS, 0, s>>>(a); break;
    default: k_dense_l<16><<<grid, NEVO_KD_THREADS, 0, s>>>(a); break;
    }
    CK_LAUNCH();
}

/* The staged observations, normalised where p normalises them (into d_a). */
static const float *inputs(Work *w, const NevoPolicy *p, int n, int *xs) {
    size_t R = (size_t)w->max_rows, D = (size_t)p->obs_dim;
    *xs = (int)D;
    if (!p->obs_norm) return w->d_obs;
    const float *d_mean = w->d_obs + R * D;
    unsigned blocks = (unsigned)(((size_t)n * D + NEVO_KN_THREADS - 1) / NEVO_KN_THREADS);
    k_norm<<<blocks, NEVO_KN_THREADS, 0, w->s>>>(w->d_obs, d_mean, d_mean + D, n, (int)D, w->d_a, w->width);
    CK_LAUNCH();
    *xs = w->width;
    return w->d_a;
}

/* Layer l's output after input X: the last layer's into out (os a row), the others into
 * whichever of d_a and d_b X is not (the workspace's width a row). */
static float *layer_out(Work *w, const NevoPolicy *p, int l, const float *X, float *out, int os, int *ys) {
    int last = l == p->n_layers - 1;
    *ys = last ? os : w->width;
    return last ? out : X == w->d_a ? w->d_b : w->d_a;
}

/* p's layers over X (n, xs), the last into out (n, os), the others through d_a and
 * d_b. f: the factored forward's members (NULL: none), their corrections after each
 * layer's base kernel, which then applies no activation. */
static void run_part(Work *w, const NevoPolicy *p, const NevoRows *r, int n, int n_runs, const NevoKFactor *f,
                     const float *X, int xs, float *out, int os) {
    cudaStream_t s = w->s;
    NevoLRBlock bl[NEVO_LOWRANK_BLOCKS];
    if (f) nevo_lowrank_blocks(p, f->rank, bl);
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        int ys;
        float *Y = layer_out(w, p, l, X, out, os, &ys);
        int act = f ? (int)NEVO_ACT_NONE : (int)L->act;
        if (L->kind == NEVO_LAYER_CONV) {
            NevoKConv a = {r->data, r->stride, w->d_idx, X, xs, L->in_w, L->in_c, L->out_h, L->out_w, L->out_c,
                           L->kernel, L->stride, L->w_off, L->b_off, act, Y, ys, L->in_h};
            size_t smem = nevo_kc_smem_bytes(a);
            if (smem <= NEVO_KC_SMEM_MAX) {
                k_conv_rows<<<(unsigned)n, NEVO_KC_THREADS, smem, s>>>(a);
            } else {
                unsigned ob = (unsigned)((L->out_dim + NEVO_KC_THREADS - 1) / NEVO_KC_THREADS);
                k_conv<<<dim3((unsigned)n, ob), NEVO_KC_THREADS, 0, s>>>(a);
            }
            CK_LAUNCH();
        } else {
            NEVO_ASSERT(L->kind == NEVO_LAYER_DENSE);
            launch_dense(w, r, n_runs, X, xs, L->in_dim, L->out_dim, L->w_off, L->b_off, act, Y, ys);
        }
        if (f) launch_factor(w, p, bl, l, *f, X, xs, Y, ys);
        X = Y;
        xs = ys;
    }
}

/* A feed-forward policy's layers over the staged inputs, into d_out. */
static void run_layers(Work *w, const NevoPolicy *p, const NevoRows *r, int n, int n_runs, const NevoKFactor *f) {
    int xs;
    const float *X = inputs(w, p, n, &xs);
    run_part(w, p, r, n, n_runs, f, X, xs, w->d_out, p->n_out);
}

/* A recurrent policy's step (nevo_policy_forward_state): the pre part (or the
 * normalised observations) into [x, h_prev], the gate sums through the dense kernel,
 * the cell into the device's state rows and h, the post part over h into d_out. */
static void run_recurrent(Work *w, const NevoPolicy *p, const NevoRows *r, int n, int n_runs) {
    const NevoLayer *R = &p->layers[p->lstm_layer];
    int in = R->in_dim, H = R->out_dim, xs;
    const float *X = inputs(w, p, n, &xs);
    NevoKLstm a = {X, xs, !p->pre, w->d_xh, w->d_gates, w->d_state, w->d_h, n, in, H};
    if (p->pre) run_part(w, p->pre, r, n, n_runs, NULL, X, xs, w->d_xh, in + H);
    unsigned blocks = (unsigned)(((size_t)n * (size_t)(in + H) + NEVO_KL_THREADS - 1) / NEVO_KL_THREADS);
    k_lstm_xh<<<blocks, NEVO_KL_THREADS, 0, w->s>>>(a);
    CK_LAUNCH();
    launch_dense(w, r, n_runs, w->d_xh, in + H, in + H, 4 * H, R->w_off, R->b_off, (int)NEVO_ACT_NONE, w->d_gates,
                 4 * H);
    blocks = (unsigned)(((size_t)n * (size_t)H + NEVO_KL_THREADS - 1) / NEVO_KL_THREADS);
    k_lstm_cell<<<blocks, NEVO_KL_THREADS, 0, w->s>>>(a);
    CK_LAUNCH();
    run_part(w, p->post, r, n, n_runs, NULL, w->d_h, H, w->d_out, p->n_out);
}

static void fetch_outputs(Work *w, const NevoPolicy *p, int n, float *out) {
    size_t no = (size_t)n * (size_t)p->n_out;
    CK(cudaMemcpyAsync(out, w->d_out, sizeof(float) * no, cudaMemcpyDeviceToHost, w->s));
    CK(cudaStreamSynchronize(w->s));
}

static void cuda_forward(void *ctx, const NevoPolicy *p, const NevoRows *r, const int *which, const float *obs, int n,
                         float *state, float *out, void *ws) {
    on_device(ctx);
    Work *w = (Work *)ws;
    NEVO_ASSERT(n <= w->max_rows && p->obs_dim == w->obs_dim && (state != NULL) == (w->d_state != NULL));
    if (n <= 0) return;
    flush((NevoRows *)r, &w->builds, w->s);
    int n_runs = stage_inputs(w, p, which, obs, n);
    if (!state) {
        run_layers(w, p, r, n, n_runs, NULL);
        fetch_outputs(w, p, n, out);
        return;
    }
    /* the rows' states up, the step, the new states back with the outputs */
    size_t sf = nevo_policy_state_floats(p);
    CK(cudaMemcpyAsync(w->d_state, state, sizeof(float) * (size_t)n * sf, cudaMemcpyHostToDevice, w->s));
    run_recurrent(w, p, r, n, n_runs);
    CK(cudaMemcpyAsync(state, w->d_state, sizeof(float) * (size_t)n * sf, cudaMemcpyDeviceToHost, w->s));
    fetch_outputs(w, p, n, out);
}

/* The host staging of a factored call's members (max_rows of them), and the device's
 * room for them and for its conv layers' u, allocated at first use. */
static NevoKFRec *factor_staging(Work *w, const NevoPolicy *p, int rank) {
    size_t R = (size_t)w->max_rows, u_floats = nevo_policy_conv_pixels(p) * (size_t)rank;
    if (!w->h_rec) {
        CK(cudaHostAlloc((void **)&w->h_rec, sizeof(NevoKFRec) * R, cudaHostAllocDefault));
        CK(cudaMalloc((void **)&w->d_rec, sizeof(NevoKFRec) * R));
    }
    if (u_floats > w->u_floats) {
        if (w->d_u) CK(cudaFree(w->d_u));
        CK(cudaMalloc((void **)&w->d_u, sizeof(float) * R * u_floats));
        w->u_floats = u_floats;
    }
    return w->h_rec;
}

/* The n staged members to the device, and the corrections' arguments over them. */
static NevoKFactor stage_factors(Work *w, const float *noise, int rank, int n) {
    CK(cudaMemcpyAsync(w->d_rec, w->h_rec, sizeof(NevoKFRec) * (size_t)n, cudaMemcpyHostToDevice, w->s));
    NevoKFactor f;
    memset(&f, 0, sizeof f);
    f.noise = noise, f.rec = w->d_rec, f.U = w->d_u, f.us = w->u_floats, f.rank = rank, f.n = n;
    return f;
}

/* The factored forward: the layers' kernels over runs of rows on one base, each
 * followed by its members' corrections (k_factor_dense, k_factor_conv). */
static void cuda_forward_factored(void *ctx, const NevoPolicy *p, const NevoRows *bases, const int *base,
                                  const NevoRows *factors, const int *which, int rank, const float *obs, int n,
                                  float *out, void *ws) {
    on_device(ctx);
    Work *w = (Work *)ws;
    NEVO_ASSERT(n <= w->max_rows && p->obs_dim == w->obs_dim);
    if (n <= 0) return;
    RowsPriv *q = (RowsPriv *)factors->priv;
    NEVO_ASSERT(q->rec);
    NevoKFRec *rec = factor_staging(w, p, rank);
    for (int i = 0; i < n; i++) rec[i] = q->rec[which[i]]; /* the last call's copies are done */
    flush((NevoRows *)bases, &w->builds, w->s);
    int n_runs = stage_inputs(w, p, base, obs, n);
    NevoKFactor f = stage_factors(w, q->rec_noise, rank, n);
    run_layers(w, p, bases, n, n_runs, &f);
    fetch_outputs(w, p, n, out);
}

/* Pinned host memory: the batches' observations and outputs, copied by DMA. */
static void *cuda_host_alloc(void *ctx, size_t bytes) {
    on_device(ctx);
    void *p;
    CK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    return p;
}

static void cuda_host_free(void *ctx, void *p) {
    on_device(ctx);
    if (p) CK(cudaFreeHost(p));
}

static void cuda_synchronize(void *ctx) {
    on_device(ctx);
    CK(cudaDeviceSynchronize());
}

static size_t cuda_cache_bytes(void *ctx) { return (size_t)((Cuda *)ctx)->prop.l2CacheSize; }

static void cuda_describe(void *ctx, char *buf, size_t size) {
    Cuda *c = (Cuda *)ctx;
    char more[64] = "";
    if (c->sharers > 1) snprintf(more, sizeof more, ", %d ranks on it", c->sharers);
    snprintf(buf, size, "cuda device %d of %d (%s)%s", c->device, c->devices, c->prop.name, more);
}

/* The device memory this rank sizes its rows by: the free memory, at most its share
 * (nevo_device_share). */
static size_t memory_share(Cuda *c) {
    size_t free_b, total_b;
    CK(cudaMemGetInfo(&free_b, &total_b));
    return nevo_device_share(free_b, total_b, c->sharers);
}

static size_t cuda_rows_room(void *ctx) { return memory_share(on_device(ctx)) / 2; }

/* Batches pipelined with up to 8 forward threads (the evaluator gives them at most half
 * its threads): each thread's forward is synchronous (inputs up, kernels, outputs back),
 * so the device overlaps as many batches as there are forward threads. Slots: 256,
 * doubled up to 1024 while a call's tasks still give each forward thread two batches.
 * Short episodes want large batches (each step of a batch is a round trip), long ones
 * every forward thread busy. On the H200 with 8 forward threads (dev/cuda/NOTES.md,
 * Slots) that picks the GA's best measured count on Breakout at 32768 and 65536 tasks
 * and on Freeway at 4096, and 512 at Breakout's 8192 (2.08M frames/s; 256 slots 1.73M,
 * 1024 2.23-2.46M). A call of no more tasks than a batch's slots (a GA's validation, an
 * ES centre's episodes) runs on the host: on the device it would fill one batch, and
 * each of its steps would wait for a round trip. The slots are halved while the batches'
 * device rows would take more than half the free memory (nevo_device_slots; of a device
 * that several ranks share, their share), so a large network runs with fewer of them.
 * NEVO_CUDA_SLOTS (a fixed count), NEVO_CUDA_FORWARD_THREADS and NEVO_CUDA_HOST_TASKS
 * override them. */
#define CUDA_SLOTS 256
#define CUDA_SLOTS_MAX 1024
static void cuda_batching(void *ctx, const NevoPolicy *p, int per_thread, int batches, int *slots,
                          int *fwd_threads, int *host_tasks) {
    Cuda *c = on_device(ctx);
    *fwd_threads = env_int("NEVO_CUDA_FORWARD_THREADS", 8, 1, 64);
    int s = env_int("NEVO_CUDA_SLOTS", 0, 1, 1 << 20);
    if (!s) {
        /* a slot's device floats: its network's row (built children), its observation,
         * two activations of the widest layer, its outputs and a recurrent state's */
        size_t f = nevo_rows_stride(p->nparams) + (size_t)p->obs_dim + 2 * work_width(p) + (size_t)p->n_out;
        if (p->lstm_layer >= 0) f += (size_t)p->layers[p->lstm_layer].in_dim + 8 * (size_t)p->lstm_units;
        s = nevo_device_slots(per_thread, batches, sizeof(float) * f, memory_share(c), CUDA_SLOTS, CUDA_SLOTS_MAX);
    }
    *slots = s;
    *host_tasks = env_int("NEVO_CUDA_HOST_TASKS", s, 0, 1 << 30);
}

extern "C" const NevoBackendOps nevo_backend_cuda_ops = {
    "cuda",
    cuda_init,
    cuda_done,
    rows_alloc,
    rows_free,
    rows_read,
    rows_write,
    cuda_build,
    cuda_build_pair,
    cuda_workspace_new,
    cuda_workspace_free,
    cuda_forward,
    cuda_build_factored,
    cuda_forward_factored,
    cuda_synchronize,
    cuda_cache_bytes,
    cuda_rows_room,
    cuda_batching,
    cuda_unavailable,
    cuda_host_alloc,
    cuda_host_free,
    cuda_describe,
};

/* ---- the device's own limits, for `nevo bench --only gpu` ----------------------------- */

__global__ void k_fma_peak(float *out, int iters, float a, float b) {
    float x[8];
#pragma unroll
    for (int i = 0; i < 8; i++) x[i] = (float)(threadIdx.x + i);
    for (int it = 0; it < iters; it++)
#pragma unroll
        for (int i = 0; i < 8; i++) x[i] = fmaf(x[i], a, b);
    float s = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) s += x[i];
    if (s == 12345.678f) out[0] = s; /* keeps the chains live */
}

__global__ void k_copy(const float4 *src, float4 *dst, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

static float time_ms(cudaEvent_t a, cudaEvent_t b) {
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

extern "C" int nevo_cuda_device(char *name, size_t size, int *sms, size_t *l2) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return 0;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    snprintf(name, size, "%s", prop.name);
    *sms = prop.multiProcessorCount;
    *l2 = (size_t)prop.l2CacheSize;
    return 1;
}

extern "C" double nevo_cuda_fma_peak(void) {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    float *out;
    CK(cudaMalloc((void **)&out, sizeof(float)));
    int blocks = prop.multiProcessorCount * 8, threads = 256, iters = 1 << 14;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    k_fma_peak<<<blocks, threads>>>(out, iters, 0.999f, 0.001f); /* warm-up */
    CK_LAUNCH();
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        CK(cudaEventRecord(a));
        k_fma_peak<<<blocks, threads>>>(out, iters, 0.999f, 0.001f);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        double flops = 2.0 * 8 * iters * (double)blocks * threads / (time_ms(a, b) * 1e-3);
        if (flops > best) best = flops;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaFree(out));
    return best;
}

extern "C" double nevo_cuda_copy_bandwidth(void) {
    size_t bytes = (size_t)1 << 31, n = bytes / sizeof(float4);
    float4 *src, *dst;
    CK(cudaMalloc((void **)&src, bytes));
    CK(cudaMalloc((void **)&dst, bytes));
    CK(cudaMemset(src, 1, bytes));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int blocks = prop.multiProcessorCount * 8;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    k_copy<<<blocks, 512>>>(src, dst, n);
    CK_LAUNCH();
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        CK(cudaEventRecord(a));
        k_copy<<<blocks, 512>>>(src, dst, n);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        double bw = 2.0 * (double)bytes / (time_ms(a, b) * 1e-3);
        if (bw > best) best = bw;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaFree(src));
    CK(cudaFree(dst));
    return best;
}

extern "C" double nevo_cuda_link_bandwidth(size_t bytes, int streams, int to_device) {
    enum { MAX_STREAMS = 16 };
    NEVO_ASSERT(streams >= 1 && streams <= MAX_STREAMS);
    void *h[MAX_STREAMS], *d[MAX_STREAMS];
    cudaStream_t s[MAX_STREAMS];
    for (int i = 0; i < streams; i++) {
        CK(cudaMallocHost(&h[i], bytes));
        CK(cudaMalloc(&d[i], bytes));
        memset(h[i], 1, bytes);
        CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    }
    /* a pass: each stream's copy queued at once, as the evaluator's forward threads queue
     * theirs; a warm-up pass, then the best of 5, host clock */
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < streams; i++)
            CK(to_device ? cudaMemcpyAsync(d[i], h[i], bytes, cudaMemcpyHostToDevice, s[i])
                         : cudaMemcpyAsync(h[i], d[i], bytes, cudaMemcpyDeviceToHost, s[i]));
        for (int i = 0; i < streams; i++) CK(cudaStreamSynchronize(s[i]));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double bw = (double)bytes * streams / ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        if (rep > 0 && bw > best) best = bw;
    }
    for (int i = 0; i < streams; i++) {
        CK(cudaStreamDestroy(s[i]));
        CK(cudaFree(d[i]));
        CK(cudaFreeHost(h[i]));
    }
    return best;
}

/* Seconds per forward of n rows over `nets` networks: the whole call (inputs up,
 * kernels, outputs back; best of reps, host clock) and the kernels alone on inputs
 * already on the device (best of reps, device events). */
extern "C" void nevo_cuda_time_forward(const NevoPolicy *p, const float *params, size_t stride, int nets,
                                       const int *which, const float *obs, int n, int reps, double *call_s,
                                       double *kernels_s) {
    void *ctx = cuda_init(0, 1);
    if (!ctx) nevo_fatal(__FILE__, __LINE__, "no CUDA device: %s", unavailable);
    NevoRows r;
    memset(&r, 0, sizeof r);
    r.stride = stride;
    r.rows = nets;
    rows_alloc(ctx, &r, params);
    Work *w = (Work *)cuda_workspace_new(ctx, p, n);
    /* the observations and outputs in pinned memory, as the evaluator's batches are */
    float *out = (float *)cuda_host_alloc(ctx, sizeof(float) * (size_t)n * (size_t)p->n_out);
    float *pobs = (float *)cuda_host_alloc(ctx, sizeof(float) * (size_t)n * (size_t)p->obs_dim);
    memcpy(pobs, obs, sizeof(float) * (size_t)n * (size_t)p->obs_dim);
    obs = pobs;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    *call_s = *kernels_s = 1e30;
    for (int rep = -1; rep < reps; rep++) { /* -1: the warm-up */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cuda_forward(ctx, p, &r, which, obs, n, NULL, out, w);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double t = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (rep >= 0 && t < *call_s) *call_s = t;
    }
    int n_runs = stage_inputs(w, p, which, obs, n);
    for (int rep = -1; rep < reps; rep++) {
        CK(cudaEventRecord(a, w->s));
        run_layers(w, p, &r, n, n_runs, NULL);
        CK(cudaEventRecord(b, w->s));
        CK(cudaEventSynchronize(b));
        double t = time_ms(a, b) * 1e-3;
        if (rep >= 0 && t < *kernels_s) *kernels_s = t;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    cuda_host_free(ctx, out);
    cuda_host_free(ctx, pobs);
    cuda_workspace_free(ctx, w);
    rows_free(ctx, &r);
    cuda_done(ctx);
}

/* Seconds per forward of the n rows through one network theta (the kernels alone, as
 * nevo_cuda_time_forward's), and through members of it at `rank` (row i member which[i],
 * its compact slice at z + which[i] nevo_lowrank_floats(p, rank), sign sigma 0.02): the
 * factored forward's kernels, and its whole call. */
extern "C" void nevo_cuda_time_factored(const NevoPolicy *p, const float *theta, int bases, size_t stride,
                                        const int *base, int rank, const float *z, int members, const int *which,
                                        const float *obs, int n, int reps, double *shared_s, double *factored_s,
                                        double *call_s, double corr_s[2]) {
    void *ctx = cuda_init(0, 1);
    if (!ctx) nevo_fatal(__FILE__, __LINE__, "no CUDA device: %s", unavailable);
    NevoRows r;
    memset(&r, 0, sizeof r);
    r.stride = stride;
    r.rows = bases;
    rows_alloc(ctx, &r, theta);
    size_t len = nevo_lowrank_floats(p, rank);
    float *d_z;
    CK(cudaMalloc((void **)&d_z, sizeof(float) * len * (size_t)members));
    CK(cudaMemcpy(d_z, z, sizeof(float) * len * (size_t)members, cudaMemcpyHostToDevice));
    CK(cudaStreamSynchronize(0)); /* from pageable memory the copy may still be in flight */
    Work *w = (Work *)cuda_workspace_new(ctx, p, n);
    float *out = (float *)cuda_host_alloc(ctx, sizeof(float) * (size_t)n * (size_t)p->n_out);
    float *pobs = (float *)cuda_host_alloc(ctx, sizeof(float) * (size_t)n * (size_t)p->obs_dim);
    memcpy(pobs, obs, sizeof(float) * (size_t)n * (size_t)p->obs_dim);
    int *rb = (int *)nevo_alloc(sizeof(int) * (size_t)n); /* each row's base */
    for (int i = 0; i < n; i++) rb[i] = base ? base[i] : 0;
    float head[NEVO_FACTOR_HEAD];
    nevo_factor_head(0.02f, rank, head);
    NevoKFRec *rec = factor_staging(w, p, rank);
    for (int i = 0; i < n; i++) rec[i] = (NevoKFRec){(size_t)which[i] * len, head[0], head[1]};
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    *shared_s = *factored_s = *call_s = 1e30;
    for (int rep = -1; rep < reps; rep++) { /* the whole call: members and inputs up, outputs back */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int n_runs = stage_inputs(w, p, rb, pobs, n);
        NevoKFactor f = stage_factors(w, d_z, rank, n);
        run_layers(w, p, &r, n, n_runs, &f);
        fetch_outputs(w, p, n, out);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double t = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (rep >= 0 && t < *call_s) *call_s = t;
    }
    int n_runs = stage_inputs(w, p, rb, pobs, n);
    NevoKFactor f = stage_factors(w, d_z, rank, n);
    for (int k = 0; k < 2; k++)
        for (int rep = -1; rep < reps; rep++) {
            CK(cudaEventRecord(a, w->s));
            run_layers(w, p, &r, n, n_runs, k ? &f : NULL);
            CK(cudaEventRecord(b, w->s));
            CK(cudaEventSynchronize(b));
            double t = time_ms(a, b) * 1e-3, *best = k ? factored_s : shared_s;
            if (rep >= 0 && t < *best) *best = t;
        }
    NevoLRBlock bl[NEVO_LOWRANK_BLOCKS]; /* each kind's corrections alone, on run_part's buffers */
    nevo_lowrank_blocks(p, rank, bl);
    for (int k = 0; k < 2; k++) { /* k 0: the conv layers', 1: the dense layers' */
        corr_s[k] = 1e30;
        for (int rep = -1; rep < reps; rep++) {
            int xs;
            const float *X = inputs(w, p, n, &xs);
            CK(cudaEventRecord(a, w->s));
            for (int l = 0; l < p->n_layers; l++) {
                int ys;
                float *Y = layer_out(w, p, l, X, w->d_out, p->n_out, &ys);
                if ((p->layers[l].kind == NEVO_LAYER_CONV) == (k == 0)) launch_factor(w, p, bl, l, f, X, xs, Y, ys);
                X = Y, xs = ys;
            }
            CK(cudaEventRecord(b, w->s));
            CK(cudaEventSynchronize(b));
            double t = time_ms(a, b) * 1e-3;
            if (rep >= 0 && t < corr_s[k]) corr_s[k] = t;
        }
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    free(rb);
    cuda_host_free(ctx, out);
    cuda_host_free(ctx, pobs);
    cuda_workspace_free(ctx, w);
    CK(cudaFree(d_z));
    rows_free(ctx, &r);
    cuda_done(ctx);
}
