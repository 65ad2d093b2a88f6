/* Gradient optimisers (optim.h): each rule is one loop over the parameters, the same
 * IEEE operations per element in every build, so the kernel-set clones of a loop give
 * the same bits as the scalar one. */
#include "nevo/optim.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels.h"

static const char *const kind_names[] = {"sgd", "adam", "rmsprop"};
#define N_KINDS ((int)(sizeof kind_names / sizeof kind_names[0]))

const char *nevo_optim_name(NevoOptimKind kind) {
    return (int)kind >= 0 && (int)kind < N_KINDS ? kind_names[kind] : "unknown";
}

/* A value in [lo, hi) (hi_open) or [lo, hi], finite. */
static int in_range(double x, double lo, double hi, int hi_open) {
    return isfinite(x) && x >= lo && (hi_open ? x < hi : x <= hi);
}

NevoStatus nevo_optim_new(const NevoOptimConfig *cfg, size_t n, NevoOptim **out, NevoError *err) {
    *out = NULL;
    int kind = -1;
    for (int i = 0; i < N_KINDS; i++)
        if (strcmp(cfg->name, kind_names[i]) == 0) kind = i;
    if (kind < 0)
        return nevo_error(err, NEVO_ERR_INVALID, "optim.name '%s' is not an optimiser (sgd, adam, rmsprop)",
                          cfg->name);
    const struct {
        const char *key;
        double value, lo, hi;
        int hi_open;
    } checks[] = {
        {"optim.lr", cfg->lr, 0.0, HUGE_VAL, 0},
        {"optim.momentum", cfg->momentum, 0.0, 1.0, 1},
        {"optim.beta1", cfg->beta1, 0.0, 1.0, 1},
        {"optim.beta2", cfg->beta2, 0.0, 1.0, 1},
        {"optim.decay", cfg->decay, 0.0, 1.0, 1},
        {"optim.eps", cfg->eps, 0.0, HUGE_VAL, 0},
        {"optim.weight_decay", cfg->weight_decay, 0.0, HUGE_VAL, 0},
        {"optim.clip_norm", cfg->clip_norm, 0.0, HUGE_VAL, 0},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        if (!in_range(checks[i].value, checks[i].lo, checks[i].hi, checks[i].hi_open))
            return nevo_error(err, NEVO_ERR_INVALID, "%s = %g is out of range (expected a finite value in [%g, %g%s)",
                              checks[i].key, checks[i].value, checks[i].lo, checks[i].hi,
                              checks[i].hi_open ? "" : "]");
    if (!(cfg->lr > 0.0)) return nevo_error(err, NEVO_ERR_INVALID, "optim.lr = %g must be > 0", cfg->lr);
    if (!(cfg->eps > 0.0)) return nevo_error(err, NEVO_ERR_INVALID, "optim.eps = %g must be > 0", cfg->eps);
    if (n > (SIZE_MAX - 64) / (2 * sizeof(double)))
        return nevo_error(err, NEVO_ERR_INVALID, "optimiser for %zu parameters: too many", n);

    /* the struct, padded to a cache line, then m and v */
    size_t head = (sizeof(NevoOptim) + 63) / 64 * 64;
    NevoOptim *o = nevo_alloc_aligned(head + 2 * n * sizeof(double));
    o->kind = (NevoOptimKind)kind;
    o->lr = cfg->lr;
    o->momentum = cfg->momentum;
    o->dampening = 0.0;
    o->beta1 = cfg->beta1;
    o->beta2 = cfg->beta2;
    o->decay = cfg->decay;
    o->eps = cfg->eps;
    o->weight_decay = cfg->weight_decay;
    o->clip_norm = cfg->clip_norm;
    o->n = n;
    o->t = 0;
    o->m = (double *)((char *)o + head);
    o->v = o->m + n;
    *out = o;
    return NEVO_OK;
}

void nevo_optim_free(NevoOptim *o) { free(o); }

void nevo_optim_reset(NevoOptim *o) {
    memset(o->m, 0, sizeof(double) * o->n);
    memset(o->v, 0, sizeof(double) * o->n);
    o->t = 0;
}

/* sum_k x[k]^2 in index order (no reassociation: the same bits on every build). */
static double sum_squares(const double *x, size_t n, double scale) {
    double s = 0.0;
    for (size_t k = 0; k < n; k++) {
        double g = x[k] * scale;
        s += g * g;
    }
    return s;
}

double nevo_optim_clip(double *grad, size_t n, double max_norm) {
    double norm = sqrt(sum_squares(grad, n, 1.0));
    if (max_norm > 0.0 && norm > max_norm) {
        double f = max_norm / norm;
        for (size_t k = 0; k < n; k++) grad[k] *= f;
    }
    return norm;
}

/* The loops. g is formed as s grad[k] + wd theta[k] in every rule, with no branch on
 * wd = 0, so a state's bits never depend on whether decay is on. */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void sgd_loop(float *restrict theta, double *restrict m, const double *restrict grad, size_t n, double s,
                     double wd, double momentum, double dampening, double lr) {
    for (size_t k = 0; k < n; k++) {
        double g = grad[k] * s + wd * theta[k];
        m[k] = momentum * m[k] + (1.0 - dampening) * g;
        theta[k] = (float)(theta[k] - lr * m[k]);
    }
}

/* Vectorised (the scalar loop's sqrt and division were 1.4% of a MinAtar ES run). */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void adam_loop(float *restrict theta, double *restrict m, double *restrict v, const double *restrict grad,
                      size_t n, double s, double wd, double b1, double b2, double a, double eps) {
    for (size_t k = 0; k < n; k++) {
        double g = grad[k] * s + wd * theta[k];
        m[k] = b1 * m[k] + (1.0 - b1) * g;
        v[k] = b2 * v[k] + (1.0 - b2) * g * g;
        theta[k] = (float)(theta[k] - a * m[k] / (sqrt(v[k]) + eps));
    }
}

NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void rmsprop_loop(float *restrict theta, double *restrict m, double *restrict v, const double *restrict grad,
                         size_t n, double s, double wd, double decay, double momentum, double lr, double eps) {
    for (size_t k = 0; k < n; k++) {
        double g = grad[k] * s + wd * theta[k];
        v[k] = decay * v[k] + (1.0 - decay) * g * g;
        m[k] = momentum * m[k] + lr * g / sqrt(v[k] + eps);
        theta[k] = (float)(theta[k] - m[k]);
    }
}

double nevo_optim_step(NevoOptim *o, float *theta, const double *grad, double scale) {
    double norm = 0.0, s = scale;
    if (o->clip_norm > 0.0) {
        norm = sqrt(sum_squares(grad, o->n, scale));
        if (norm > o->clip_norm) s = scale * (o->clip_norm / norm);
    }
    o->t++;
    switch (o->kind) {
    case NEVO_OPTIM_SGD:
        sgd_loop(theta, o->m, grad, o->n, s, o->weight_decay, o->momentum, o->dampening, o->lr);
        break;
    case NEVO_OPTIM_ADAM: {
        double b1 = o->beta1, b2 = o->beta2;
        double a = o->lr * sqrt(1.0 - pow(b2, (double)o->t)) / (1.0 - pow(b1, (double)o->t));
        adam_loop(theta, o->m, o->v, grad, o->n, s, o->weight_decay, b1, b2, a, o->eps);
        break;
    }
    case NEVO_OPTIM_RMSPROP:
        rmsprop_loop(theta, o->m, o->v, grad, o->n, s, o->weight_decay, o->decay, o->momentum, o->lr, o->eps);
        break;
    }
    return norm;
}

void nevo_optim_write_state(const NevoOptim *o, NevoBuf *b) {
    nevo_buf_f64s(b, o->m, o->n);
    nevo_buf_f64s(b, o->v, o->n);
    nevo_buf_u64(b, (uint64_t)o->t);
}

/* Every value is checked: a crafted state that passed its checksum must not reach a
 * step as NaN or as the sqrt of a negative mean square. */
int nevo_optim_read_state(NevoOptim *o, NevoReader *r) {
    nevo_read_f64s(r, o->m, o->n);
    nevo_read_f64s(r, o->v, o->n);
    uint64_t t = nevo_read_u64(r);
    o->t = (long long)t;
    int ok = !r->failed && t <= (uint64_t)INT64_MAX;
    for (size_t k = 0; k < o->n && ok; k++)
        ok = isfinite(o->m[k]) && isfinite(o->v[k]) && o->v[k] >= 0.0 && (o->kind != NEVO_OPTIM_SGD || o->v[k] == 0.0);
    if (!ok) nevo_optim_reset(o);
    return ok;
}

void nevo_optim_save(const NevoOptim *o, NevoBuf *b) {
    nevo_buf_u32(b, (uint32_t)o->kind);
    nevo_buf_u64(b, (uint64_t)o->n);
    nevo_optim_write_state(o, b);
}

NevoStatus nevo_optim_load(NevoOptim *o, NevoReader *r, NevoError *err) {
    uint32_t kind = nevo_read_u32(r);
    uint64_t n = nevo_read_u64(r);
    if (r->failed) {
        nevo_optim_reset(o);
        return nevo_error(err, NEVO_ERR_CORRUPT, "optimiser state is truncated");
    }
    if (kind != (uint32_t)o->kind) {
        nevo_optim_reset(o);
        return nevo_error(err, NEVO_ERR_CORRUPT, "optimiser state is %s's, this optimiser is %s",
                          kind < (uint32_t)N_KINDS ? kind_names[kind] : "an unknown rule", nevo_optim_name(o->kind));
    }
    if (n != (uint64_t)o->n) {
        nevo_optim_reset(o);
        return nevo_error(err, NEVO_ERR_CORRUPT, "optimiser state holds %llu parameters, this optimiser has %zu",
                          (unsigned long long)n, o->n);
    }
    if (!nevo_optim_read_state(o, r))
        return nevo_error(err, NEVO_ERR_CORRUPT, "optimiser state is %s",
                          r->failed ? "truncated" : "out of range (a moment not finite or a negative mean square)");
    return NEVO_OK;
}
