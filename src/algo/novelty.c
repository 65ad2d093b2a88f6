/* Behaviour archive and exact k-nearest-neighbour novelty by blocked brute force.
 *
 * For each query, distances to all candidate points are computed in blocks (a tight
 * loop the compiler vectorises) and the k smallest squared distances are kept in a
 * small sorted array; square roots are taken only for the final k. The sum of the k
 * distances is formed in ascending order, so the result does not depend on the order
 * in which candidates are visited. */
#include "nevo/novelty.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/status.h"

void nevo_archive_init(NevoArchive *a, int dim) {
    memset(a, 0, sizeof *a);
    a->dim = dim;
}

void nevo_archive_free(NevoArchive *a) {
    free(a->points);
    a->points = NULL;
    a->n = a->cap = 0;
}

void nevo_archive_add(NevoArchive *a, const float *bc) {
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 256;
        float *grown = realloc(a->points, sizeof(float) * (size_t)cap * a->dim);
        if (!grown) nevo_fatal(__FILE__, __LINE__, "out of memory growing the novelty archive");
        a->points = grown;
        a->cap = cap;
    }
    memcpy(a->points + (size_t)a->n * a->dim, bc, sizeof(float) * (size_t)a->dim);
    a->n++;
}

#define MAX_K 64
#define BLOCK 1024

/* Inserts d into the ascending array best[0..*m) capped at k entries. */
static void keep_smallest(double *best, int *m, int k, double d) {
    if (*m == k && d >= best[k - 1]) return;
    int i = *m < k ? (*m)++ : k - 1;
    while (i > 0 && best[i - 1] > d) {
        best[i] = best[i - 1];
        i--;
    }
    best[i] = d;
}

static void scan(const float *pts, int n, int dim, const float *q, int skip, double *best, int *m, int k) {
    double d2[BLOCK];
    for (int s = 0; s < n; s += BLOCK) {
        int len = n - s < BLOCK ? n - s : BLOCK;
        const float *p = pts + (size_t)s * dim;
        for (int j = 0; j < len; j++) {
            double acc = 0.0;
            for (int c = 0; c < dim; c++) {
                double diff = (double)p[(size_t)j * dim + c] - (double)q[c];
                acc += diff * diff;
            }
            d2[j] = acc;
        }
        for (int j = 0; j < len; j++)
            if (s + j != skip) keep_smallest(best, m, k, d2[j]);
    }
}

typedef struct Job {
    const NevoArchive *a;
    const float *extra, *q;
    const int *self_index;
    int n_extra, k;
    double *novelty;
} Job;

static void one_query(void *ctx, int i, int worker) {
    (void)worker;
    const Job *j = ctx;
    int dim = j->a->dim;
    double best[MAX_K];
    int m = 0;
    const float *q = j->q + (size_t)i * dim;
    scan(j->a->points, j->a->n, dim, q, -1, best, &m, j->k);
    if (j->extra) scan(j->extra, j->n_extra, dim, q, j->self_index ? j->self_index[i] : -1, best, &m, j->k);
    double sum = 0.0;
    for (int t = 0; t < m; t++) sum += sqrt(best[t]);
    j->novelty[i] = m > 0 ? sum / m : 0.0;
}

void nevo_novelty(const NevoArchive *a, const float *extra, int n_extra, const float *q,
                  const int *self_index, int n, int k, NevoPool *pool, double *novelty) {
    NEVO_ASSERT(k >= 1 && k <= MAX_K);
    Job job = {a, extra, q, self_index, n_extra, k, novelty};
    if (pool) nevo_pool_run(pool, n, one_query, &job);
    else
        for (int i = 0; i < n; i++) one_query(&job, i, 0);
}

void nevo_archive_save(const NevoArchive *a, NevoBuf *b) {
    nevo_buf_u32(b, (uint32_t)a->dim);
    nevo_buf_u32(b, (uint32_t)a->n);
    nevo_buf_f32s(b, a->points, (size_t)a->n * a->dim);
}

int nevo_archive_load(NevoArchive *a, NevoReader *r) {
    int dim = (int)nevo_read_u32(r);
    uint32_t n = nevo_read_u32(r);
    if (dim != a->dim || (size_t)n * dim * 4 > r->len - r->pos) return 0;
    a->n = 0;
    float bc[64];
    if (dim > 64) return 0;
    for (uint32_t i = 0; i < n; i++) {
        nevo_read_f32s(r, bc, (size_t)dim);
        if (!nevo_all_finite(bc, (size_t)dim)) return 0;
        nevo_archive_add(a, bc);
    }
    return nevo_reader_ok(r, false);
}
