/* The library alternative for the batched forward: the same MLP population through
 * OpenBLAS's sgemm, one call per network and layer (each network's B rows times its
 * own weight matrix), with nevo's bias and tanh. OpenBLAS is loaded at run time when
 * the machine has it (Debian's libopenblas0), so nevo neither links nor needs it; the
 * benchmark reports it as absent otherwise. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "nn/kernels.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 }; /* the CBLAS ABI's values */

typedef void (*SgemmFn)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc);

static SgemmFn sgemm;
static char blas_name[64];

const char *nevo_bench_blas(void) {
    static int tried;
    if (!tried) {
        tried = 1;
        static const char *const libs[] = {"libopenblas.so.0", "libopenblas.so"};
        for (size_t i = 0; i < sizeof libs / sizeof libs[0] && !sgemm; i++) {
            void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
            if (!h) continue;
            SgemmFn f;
            *(void **)&f = dlsym(h, "cblas_sgemm"); /* ISO C has no function-pointer cast from void * */
            void (*set_threads)(int);
            *(void **)&set_threads = dlsym(h, "openblas_set_num_threads");
            char *(*config)(void);
            *(void **)&config = dlsym(h, "openblas_get_config");
            if (!f) {
                dlclose(h);
                continue;
            }
            if (set_threads) set_threads(1); /* one core, as nevo's numbers */
            sgemm = f;
            snprintf(blas_name, sizeof blas_name, "%s", config ? config() : libs[i]);
        }
    }
    return sgemm ? blas_name : NULL;
}

typedef struct BlasCtx {
    const NevoPolicy *p;
    const float *params, *obs;
    int P, B;
    float *out, *h0, *h1;
} BlasCtx;

/* Every network's B rows through its layers: Y = bias, Y += X W (sgemm), tanh. */
static void blas_forward(BlasCtx *c) {
    const NevoPolicy *p = c->p;
    for (int j = 0; j < c->P; j++) {
        const float *theta = c->params + (size_t)j * p->nparams;
        const float *x = c->obs + (size_t)j * c->B * p->obs_dim;
        for (int l = 0; l < p->n_layers; l++) {
            const NevoLayer *L = &p->layers[l];
            float *y = l == p->n_layers - 1 ? c->out + (size_t)j * c->B * L->out_dim : (l % 2 ? c->h1 : c->h0);
            for (int r = 0; r < c->B; r++) memcpy(y + (size_t)r * L->out_dim, theta + L->b_off, sizeof(float) * L->out_dim);
            sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, c->B, L->out_dim, L->in_dim, 1.0f, x, L->in_dim,
                  theta + L->w_off, L->out_dim, 1.0f, y, L->out_dim);
            if (L->act == NEVO_ACT_TANH) nevo_kernels()->tanh(y, c->B * L->out_dim);
            x = y;
        }
    }
}

static double blas_work(void *vctx, long iters) {
    BlasCtx *c = vctx;
    for (long i = 0; i < iters; i++) blas_forward(c);
    return (double)iters * c->P * c->B;
}

int nevo_bench_forward_blas(const NevoBenchOptions *o, const NevoPolicy *p, const float *params, const float *obs,
                            int P, int B, const float *want, double *rows_per_s, double *max_diff) {
    *rows_per_s = *max_diff = NAN;
    if (!nevo_bench_blas()) return 0;
    int widest = 0;
    for (int l = 0; l < p->n_layers; l++) widest = p->layers[l].out_dim > widest ? p->layers[l].out_dim : widest;
    BlasCtx c = {p, params, obs, P, B, nevo_alloc_aligned(sizeof(float) * (size_t)P * B * p->n_out),
                 nevo_alloc_aligned(sizeof(float) * (size_t)B * widest),
                 nevo_alloc_aligned(sizeof(float) * (size_t)B * widest)};
    blas_forward(&c);
    /* the same numbers up to summation order: a sanity check of the comparison */
    double diff = 0.0;
    for (size_t i = 0; i < (size_t)P * B * p->n_out; i++) diff = fmax(diff, fabs((double)c.out[i] - want[i]));
    *max_diff = diff;
    *rows_per_s = nevo_bench_measure(o, blas_work, &c, 1).best;
    free(c.out);
    free(c.h0);
    free(c.h1);
    return 1;
}
