/* Novelty search support: an archive of behaviour characterisations (BCs) and exact
 * k-nearest-neighbour novelty (Lehman & Stanley 2011; Conti et al. 2018).
 *
 * novelty(b) = mean Euclidean distance from b to its k nearest points in the archive
 * plus, optionally, a set of extra points (GA-NS scores against archive + population),
 * excluding the point itself when it is one of the extra points. Computed exactly by
 * blocked brute force: for the 2-D BCs of the maze an archive of 10^5 points answers
 * a population of 1000 queries in well under a second (see docs/BENCHMARKS.md). */
#ifndef NEVO_NOVELTY_H
#define NEVO_NOVELTY_H

#include "nevo/io.h"
#include "nevo/threads.h"

typedef struct NevoArchive {
    int dim;
    int n, cap;
    float *points; /* (n, dim) */
} NevoArchive;

void nevo_archive_init(NevoArchive *a, int dim);
void nevo_archive_free(NevoArchive *a);
void nevo_archive_add(NevoArchive *a, const float *bc);

/* novelty[i] for each of n query points q (n, dim): mean distance to the k nearest
 * among the archive and the `extra` points (n_extra, dim; may be NULL); a query that is
 * itself extra point i (self_index[i] >= 0) does not count itself. Fewer than k
 * neighbours available: the mean over those there are (0 if none). Queries are spread
 * over the pool; each query's result is independent of the others. */
void nevo_novelty(const NevoArchive *a, const float *extra, int n_extra, const float *q,
                  const int *self_index, int n, int k, NevoPool *pool, double *novelty);

void nevo_archive_save(const NevoArchive *a, NevoBuf *b);
/* Returns 0 if the serialised archive is inconsistent. */
int nevo_archive_load(NevoArchive *a, NevoReader *r);

#endif
