/* The replica model's all-reduce (replica.h): chunk sums over a fixed binary tree, each
 * rank's maximal owned subtrees exchanged, the rest of the tree completed everywhere. */
#include "nevo/replica.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void nevo_replicas_shard(int n_chunks, int rank, int size, int *lo, int *hi) {
    *lo = (int)((long long)n_chunks * rank / size);
    *hi = (int)((long long)n_chunks * (rank + 1) / size);
}

typedef struct Leaves {
    NevoChunkFn fn;
    void *ctx;
    size_t n;
    int lo;
    double *vals;     /* (hi - lo, n) */
    NevoStatus *st;   /* (hi - lo) */
    NevoError *errs;  /* (hi - lo) */
} Leaves;

static void leaf_item(void *c, int i, int worker) {
    Leaves *L = c;
    double *v = L->vals + (size_t)i * L->n;
    memset(v, 0, sizeof(double) * L->n);
    L->st[i] = L->fn(L->ctx, L->lo + i, worker, v, &L->errs[i]);
}

/* out = the tree sum of chunks [a, b), all of them local; tmp: one n-double buffer
 * per level below this one. */
static void sum_local(const Leaves *L, int a, int b, double *out, double *tmp) {
    if (b - a == 1) {
        memcpy(out, L->vals + (size_t)(a - L->lo) * L->n, sizeof(double) * L->n);
        return;
    }
    int m = a + (b - a) / 2;
    sum_local(L, a, m, out, tmp + L->n);
    sum_local(L, m, b, tmp, tmp + L->n);
    for (size_t i = 0; i < L->n; i++) out[i] += tmp[i];
}

/* Appends this rank's maximal subtrees inside [lo, hi), left to right. */
static void emit(const Leaves *L, int a, int b, int lo, int hi, NevoBuf *buf, double *node, double *tmp) {
    if (a >= hi || b <= lo) return;
    if (lo <= a && b <= hi) {
        sum_local(L, a, b, node, tmp);
        nevo_buf_put(buf, node, sizeof(double) * L->n);
        return;
    }
    int m = a + (b - a) / 2;
    emit(L, a, m, lo, hi, buf, node, tmp);
    emit(L, m, b, lo, hi, buf, node, tmp);
}

typedef struct Tree {
    int n_chunks, size;
    size_t n;
    const uint8_t *const *stream; /* rank r's subtree sums, in order */
    size_t *cursor;               /* the next one's byte offset */
} Tree;

static void complete(Tree *T, int a, int b, double *out, double *tmp) {
    for (int r = 0; r < T->size; r++) {
        int lo, hi;
        nevo_replicas_shard(T->n_chunks, r, T->size, &lo, &hi);
        if (lo <= a && b <= hi) {
            memcpy(out, T->stream[r] + T->cursor[r], sizeof(double) * T->n);
            T->cursor[r] += sizeof(double) * T->n;
            return;
        }
    }
    int m = a + (b - a) / 2;
    complete(T, a, m, out, tmp + T->n);
    complete(T, m, b, tmp, tmp + T->n);
    for (size_t i = 0; i < T->n; i++) out[i] += tmp[i];
}

/* How many subtrees rank r sends (to check what arrives). */
static int count_subtrees(int a, int b, int lo, int hi) {
    if (a >= hi || b <= lo) return 0;
    if (lo <= a && b <= hi) return 1;
    int m = a + (b - a) / 2;
    return count_subtrees(a, m, lo, hi) + count_subtrees(m, b, lo, hi);
}

NevoStatus nevo_replicas_reduce(NevoComm *comm, NevoPool *pool, int n_chunks, size_t n, NevoChunkFn fn, void *ctx,
                                double *out, NevoError *err) {
    if (n_chunks < 1) return nevo_error(err, NEVO_ERR_INVALID, "a reduce needs at least one chunk (got %d)", n_chunks);
    int size = comm ? nevo_comm_size(comm) : 1, rank = comm ? nevo_comm_rank(comm) : 0;
    int lo, hi, depth = 1;
    nevo_replicas_shard(n_chunks, rank, size, &lo, &hi);
    for (int w = 1; w < n_chunks; w *= 2) depth++;
    Leaves L = {fn, ctx, n, lo, NULL, NULL, NULL};
    int mine = hi - lo;
    L.vals = nevo_alloc_aligned(sizeof(double) * n * (size_t)(mine ? mine : 1));
    L.st = nevo_alloc(sizeof(NevoStatus) * (size_t)(mine ? mine : 1));
    L.errs = nevo_alloc(sizeof(NevoError) * (size_t)(mine ? mine : 1));
    if (pool)
        nevo_pool_run(pool, mine, leaf_item, &L);
    else
        for (int i = 0; i < mine; i++) leaf_item(&L, i, 0);
    NevoStatus st = NEVO_OK;
    for (int i = 0; i < mine && st == NEVO_OK; i++)
        if (L.st[i]) {
            st = L.st[i];
            *err = L.errs[i];
        }
    double *tmp = nevo_alloc_aligned(sizeof(double) * n * (size_t)(depth + 1));
    NevoBuf body = {0};
    if (st == NEVO_OK) emit(&L, 0, n_chunks, lo, hi, &body, out, tmp);
    if (size == 1) {
        if (st == NEVO_OK) memcpy(out, body.data, sizeof(double) * n);
    } else {
        NevoBuf all = {0};
        NevoReader *parts = nevo_alloc(sizeof(NevoReader) * (size_t)size);
        const uint8_t **stream = nevo_alloc(sizeof(uint8_t *) * (size_t)size);
        size_t *cursor = nevo_alloc(sizeof(size_t) * (size_t)size);
        st = nevo_comm_gather_outcomes(comm, st, body.data, body.len, &all, parts, err);
        for (int r = 0; st == NEVO_OK && r < size; r++) {
            int rlo, rhi;
            nevo_replicas_shard(n_chunks, r, size, &rlo, &rhi);
            size_t want = sizeof(double) * n * (size_t)count_subtrees(0, n_chunks, rlo, rhi);
            if (parts[r].len != want)
                st = nevo_error(err, NEVO_ERR_INVALID, "rank %d sent %zu bytes to a reduce of %d chunks of %zu values "
                                "(%zu expected): the replicas disagree on its size", r, parts[r].len, n_chunks, n,
                                want);
            stream[r] = parts[r].data;
            cursor[r] = 0;
        }
        if (st == NEVO_OK) {
            Tree T = {n_chunks, size, n, stream, cursor};
            complete(&T, 0, n_chunks, out, tmp);
        }
        free(parts);
        free(stream);
        free(cursor);
        nevo_buf_free(&all);
    }
    nevo_buf_free(&body);
    free(tmp);
    free(L.vals);
    free(L.st);
    free(L.errs);
    return st;
}
