/* Supervised learning: evaluating networks on a dataset, scoring a task set's networks
 * on batches (evolution's fitness on a dataset) and mini-batch SGD.
 *
 * One SGD step, as stages:
 *   gather    the batch's samples in the epoch's permuted order
 *   shards    each NEVO_SUP_SHARD rows: forward with a tape, cross-entropy, backward into
 *             the shard's own gradient (the loss is the batch's mean, so each row's
 *             output gradient is divided by the batch's size)
 *   reduce    the shards' gradients added in shard order, in double
 *   step      the optimiser (clipping, weight decay) moves the parameters */
#include "nevo/supervised.h"
#include "nevo/replica.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "nevo/grad.h"
#include "nevo/optim.h"
#include "nevo/rng.h"

NevoDataView nevo_data_view(const NevoDataset *ds, const NevoDataSplit *split) {
    NevoDataView v = {split->n, ds->height * ds->width * ds->channels, ds->classes, split->images, split->labels};
    return v;
}

/* ---- evaluation -------------------------------------------------------------------- */

/* What one worker needs to run a piece: inputs gathered, outputs, forward scratch. */
typedef struct Bufs {
    float *x, *out, *scratch, *classes;
    int *y;
} Bufs;

static void bufs_init(Bufs *b, const NevoPolicy *p, int rows) {
    b->x = nevo_alloc_aligned(sizeof(float) * (size_t)rows * (size_t)p->obs_dim);
    b->out = nevo_alloc_aligned(sizeof(float) * (size_t)rows * (size_t)p->n_out);
    b->scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, rows));
    b->classes = nevo_alloc(sizeof(float) * (size_t)rows);
    b->y = nevo_alloc(sizeof(int) * (size_t)rows);
}

static void bufs_free(Bufs *b) {
    free(b->x);
    free(b->out);
    free(b->scratch);
    free(b->classes);
    free(b->y);
}

static void gather(const NevoDataView *d, const int *idx, int lo, int hi, float *x, int *y) {
    for (int i = lo; i < hi; i++) {
        int s = idx ? idx[i] : i;
        memcpy(x + (size_t)(i - lo) * d->dim, d->x + (size_t)s * d->dim, sizeof(float) * (size_t)d->dim);
        if (y) y[i - lo] = d->y[s];
    }
}

/* Samples [lo, hi) of idx through theta: the sum of their cross-entropies (in double,
 * in sample order) and the number classified right. */
static void score_piece(const NevoPolicy *p, const float *theta, const NevoDataView *d, const int *idx, int lo,
                        int hi, Bufs *b, double *loss_sum, int *correct) {
    int n = hi - lo, C = p->n_out;
    int net[NEVO_SUP_CHUNK];
    memset(net, 0, sizeof(int) * (size_t)n);
    gather(d, idx, lo, hi, b->x, b->y);
    nevo_policy_forward(p, theta, 0, net, b->x, n, b->out, b->scratch);
    /* the class is the policy's discrete action: the first maximum */
    nevo_policy_actions(p, b->out, n, b->classes);
    int right = 0;
    for (int r = 0; r < n; r++) right += (int)b->classes[r] == b->y[r];
    *loss_sum = nevo_cross_entropy_sum(b->out, b->y, n, C);
    *correct = right;
}

typedef struct EvalJob {
    const NevoPolicy *p;
    const float *theta;
    const NevoDataView *d;
    const int *idx;
    int m;
    Bufs *bufs;      /* (threads) */
    double *sums;    /* (pieces) */
    int *correct;    /* (pieces) */
} EvalJob;

static void eval_piece(void *ctx, int item, int worker) {
    EvalJob *j = ctx;
    int lo = item * NEVO_SUP_CHUNK, hi = lo + NEVO_SUP_CHUNK < j->m ? lo + NEVO_SUP_CHUNK : j->m;
    score_piece(j->p, j->theta, j->d, j->idx, lo, hi, &j->bufs[worker], &j->sums[item], &j->correct[item]);
}

NevoStatus nevo_supervised_eval(const NevoPolicy *p, const float *theta, const NevoDataView *d, const int *idx,
                                int m, NevoPool *pool, double *loss, double *accuracy, NevoError *err) {
    int pieces = (m + NEVO_SUP_CHUNK - 1) / NEVO_SUP_CHUNK, threads = nevo_pool_threads(pool);
    EvalJob j = {p, theta, d, idx, m, nevo_alloc(sizeof(Bufs) * (size_t)threads),
                 nevo_alloc(sizeof(double) * (size_t)(pieces + 1)), nevo_alloc(sizeof(int) * (size_t)(pieces + 1))};
    for (int t = 0; t < threads; t++) bufs_init(&j.bufs[t], p, NEVO_SUP_CHUNK);
    nevo_pool_run(pool, pieces, eval_piece, &j);
    double sum = 0.0;
    long long right = 0;
    for (int i = 0; i < pieces; i++) sum += j.sums[i], right += j.correct[i];
    for (int t = 0; t < threads; t++) bufs_free(&j.bufs[t]);
    free(j.bufs);
    free(j.sums);
    free(j.correct);
    if (!isfinite(sum))
        return nevo_error(err, NEVO_ERR_NUMERIC, "the network's outputs are not finite on the data (loss %g)", sum);
    if (loss) *loss = m > 0 ? sum / m : 0.0;
    if (accuracy) *accuracy = m > 0 ? (double)right / m : 0.0;
    return NEVO_OK;
}

void nevo_supervised_batch(uint64_t task_seed, int n, int batch, int *idx) {
    if (batch <= 0 || batch >= n) {
        for (int i = 0; i < n; i++) idx[i] = i;
        return;
    }
    /* a partial Fisher-Yates shuffle: the first `batch` draws of a random permutation */
    int *perm = nevo_alloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) perm[i] = i;
    NevoRng rng;
    nevo_rng_init(&rng, task_seed, NEVO_RNG_DATA, 0, 0, 0);
    for (int i = 0; i < batch; i++) {
        int j = i + (int)nevo_rng_below(&rng, (uint32_t)(n - i));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        idx[i] = perm[i];
    }
    free(perm);
}

/* ---- a task set on a dataset --------------------------------------------------------- */

typedef struct TasksJob {
    const NevoTaskSet *ts;
    const NevoPolicy *p;
    const NevoDataView *d;
    const int *const *batches; /* (n_tasks) the batch of each task (shared by tasks of one seed) */
    int m;
    Bufs *bufs;
    float **thetas;            /* (threads) */
    NevoEpisode *results;
} TasksJob;

static void task_item(void *ctx, int t, int worker) {
    TasksJob *j = ctx;
    float *theta = j->thetas[worker];
    nevo_taskset_build(j->ts, j->p, j->ts->tasks[t].net, theta, 0);
    double sum = 0.0;
    for (int lo = 0; lo < j->m; lo += NEVO_SUP_CHUNK) {
        int hi = lo + NEVO_SUP_CHUNK < j->m ? lo + NEVO_SUP_CHUNK : j->m, right;
        double s;
        score_piece(j->p, theta, j->d, j->batches[t], lo, hi, &j->bufs[worker], &s, &right);
        sum += s;
    }
    NevoEpisode *e = &j->results[t];
    memset(e, 0, sizeof *e);
    e->ret = -(sum / j->m);
    e->length = j->m;
    e->terminated = 1;
}

NevoStatus nevo_supervised_tasks(const NevoTaskSet *ts, const NevoPolicy *p, const NevoDataView *d, int batch,
                                 NevoPool *pool, NevoEpisode *results, NevoError *err) {
    if (ts->n_tasks == 0) return NEVO_OK;
    int m = batch <= 0 || batch >= d->n ? d->n : batch, threads = nevo_pool_threads(pool);
    /* tasks of one seed share a batch: drawn once, in task order */
    int **own = nevo_alloc(sizeof(int *) * (size_t)ts->n_tasks);
    const int **batches = nevo_alloc(sizeof(int *) * (size_t)ts->n_tasks);
    for (int t = 0; t < ts->n_tasks; t++) {
        for (int u = 0; u < t && !batches[t]; u++)
            if (ts->tasks[u].seed == ts->tasks[t].seed) batches[t] = batches[u];
        if (batches[t]) continue;
        own[t] = nevo_alloc(sizeof(int) * (size_t)d->n);
        nevo_supervised_batch(ts->tasks[t].seed, d->n, batch, own[t]);
        batches[t] = own[t];
    }
    TasksJob j = {ts, p, d, batches, m, nevo_alloc(sizeof(Bufs) * (size_t)threads),
                  nevo_alloc(sizeof(float *) * (size_t)threads), results};
    for (int w = 0; w < threads; w++) {
        bufs_init(&j.bufs[w], p, NEVO_SUP_CHUNK);
        j.thetas[w] = nevo_alloc_aligned(sizeof(float) * ts->nparams);
    }
    nevo_pool_run(pool, ts->n_tasks, task_item, &j);
    for (int w = 0; w < threads; w++) {
        bufs_free(&j.bufs[w]);
        free(j.thetas[w]);
    }
    free(j.bufs);
    free(j.thetas);
    for (int t = 0; t < ts->n_tasks; t++) free(own[t]);
    free(own);
    free(batches);
    for (int t = 0; t < ts->n_tasks; t++)
        if (!isfinite(results[t].ret))
            return nevo_error(err, NEVO_ERR_NUMERIC, "task %d: the network's outputs are not finite on the data", t);
    return NEVO_OK;
}

/* ---- gradients of a batch's mean loss ------------------------------------------------ */

/* What computing a gradient over up to max_rows gathered rows needs: the rows, and per
 * shard of NEVO_SUP_SHARD rows its own float gradient and forward/backward buffers. */
typedef struct GradWork {
    const NevoPolicy *p;
    int max_rows, n_shards;
    float *x;          /* (max_rows, dim) the gathered inputs */
    int *y;            /* (max_rows) their labels */
    float *grads;      /* (n_shards, np) */
    float **tape, **out, **dout, **scratch;
    double *loss;      /* (n_shards) each shard's summed loss */
    /* the current call */
    const float *theta;
    int rows, total;
} GradWork;

static GradWork *grad_work_new(const NevoPolicy *p, int max_rows) {
    GradWork *w = nevo_alloc(sizeof *w);
    w->p = p;
    w->max_rows = max_rows;
    w->n_shards = (max_rows + NEVO_SUP_SHARD - 1) / NEVO_SUP_SHARD;
    w->x = nevo_alloc_aligned(sizeof(float) * (size_t)max_rows * (size_t)p->obs_dim);
    w->y = nevo_alloc(sizeof(int) * (size_t)max_rows);
    w->grads = nevo_alloc_aligned(sizeof(float) * p->nparams * (size_t)w->n_shards);
    w->tape = nevo_alloc(sizeof(float *) * (size_t)w->n_shards);
    w->out = nevo_alloc(sizeof(float *) * (size_t)w->n_shards);
    w->dout = nevo_alloc(sizeof(float *) * (size_t)w->n_shards);
    w->scratch = nevo_alloc(sizeof(float *) * (size_t)w->n_shards);
    for (int k = 0; k < w->n_shards; k++) {
        w->tape[k] = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p, NEVO_SUP_SHARD));
        w->out[k] = nevo_alloc_aligned(sizeof(float) * NEVO_SUP_SHARD * (size_t)p->n_out);
        w->dout[k] = nevo_alloc_aligned(sizeof(float) * NEVO_SUP_SHARD * (size_t)p->n_out);
        w->scratch[k] = nevo_alloc_aligned(sizeof(float) * nevo_grad_scratch_floats(p, NEVO_SUP_SHARD));
    }
    w->loss = nevo_alloc(sizeof(double) * (size_t)w->n_shards);
    return w;
}

static void grad_work_free(GradWork *w) {
    if (!w) return;
    for (int k = 0; k < w->n_shards; k++) {
        free(w->tape[k]);
        free(w->out[k]);
        free(w->dout[k]);
        free(w->scratch[k]);
    }
    free(w->tape);
    free(w->out);
    free(w->dout);
    free(w->scratch);
    free(w->grads);
    free(w->loss);
    free(w->x);
    free(w->y);
    free(w);
}

/* shards: one shard's rows forward, loss and backward into its own gradient */
static void shard_item(void *ctx, int k, int worker) {
    GradWork *w = ctx;
    const NevoPolicy *p = w->p;
    int lo = k * NEVO_SUP_SHARD, hi = lo + NEVO_SUP_SHARD < w->rows ? lo + NEVO_SUP_SHARD : w->rows, n = hi - lo;
    int net[NEVO_SUP_SHARD];
    memset(net, 0, sizeof net);
    const float *x = w->x + (size_t)lo * p->obs_dim;
    float *g = w->grads + (size_t)k * p->nparams;
    memset(g, 0, sizeof(float) * p->nparams);
    nevo_policy_forward_tape(p, w->theta, 0, net, x, n, w->out[k], w->tape[k]);
    /* the shard's mean loss and its gradient, rescaled to the mean over all rows */
    double loss = nevo_cross_entropy(w->out[k], w->y + lo, n, p->n_out, w->dout[k]);
    float scale = (float)n / (float)w->total;
    for (int i = 0; i < n * p->n_out; i++) w->dout[k][i] *= scale;
    nevo_policy_backward(p, w->theta, 0, net, x, n, w->tape[k], w->dout[k], g, 0, NULL, w->scratch[k]);
    w->loss[k] = loss * n;
}

/* grad (np, double) += the gradient of (sum of the gathered rows' losses) / total, the
 * shards added in order; returns the rows' summed loss. */
static double grad_work_run(GradWork *w, const float *theta, int rows, int total, NevoPool *pool, double *grad) {
    size_t np = w->p->nparams;
    int shards = (rows + NEVO_SUP_SHARD - 1) / NEVO_SUP_SHARD;
    w->theta = theta, w->rows = rows, w->total = total;
    nevo_pool_run(pool, shards, shard_item, w);
    double sum = 0.0;
    for (int k = 0; k < shards; k++) {
        const float *g = w->grads + (size_t)k * np;
        for (size_t i = 0; i < np; i++) grad[i] += g[i];
        sum += w->loss[k];
    }
    return sum;
}

/* rows gathered per call when a gradient spans more samples than a mini-batch */
#define GRAD_ROWS 1024

NevoStatus nevo_supervised_gradient(const NevoPolicy *p, const float *theta, const NevoDataView *d, const int *idx,
                                    int m, NevoPool *pool, double *grad, double *loss, NevoError *err) {
    memset(grad, 0, sizeof(double) * p->nparams);
    GradWork *w = grad_work_new(p, m < GRAD_ROWS ? m : GRAD_ROWS);
    double sum = 0.0;
    for (int lo = 0; lo < m; lo += GRAD_ROWS) {
        int hi = lo + GRAD_ROWS < m ? lo + GRAD_ROWS : m;
        gather(d, idx, lo, hi, w->x, w->y);
        sum += grad_work_run(w, theta, hi - lo, m, pool, grad);
    }
    grad_work_free(w);
    double norm = 0.0;
    for (size_t i = 0; i < p->nparams; i++) norm += grad[i] * grad[i];
    if (!isfinite(sum) || !isfinite(norm))
        return nevo_error(err, NEVO_ERR_NUMERIC, "the network's loss or gradient is not finite on the data");
    if (loss) *loss = m > 0 ? sum / m : 0.0;
    return NEVO_OK;
}

/* ---- SGD --------------------------------------------------------------------------- */

struct NevoSGD {
    const NevoPolicy *p;
    const NevoDataView *train;
    NevoPool *pool;
    uint64_t seed;
    int batch;
    int epochs;
    long long steps;
    float *theta;      /* (np) */
    NevoOptim *opt;
    int *perm;         /* (n) this epoch's order */
    GradWork *work;    /* a batch's rows and shards */
    double *grad;      /* (np + 1) the batch's, then its summed loss */
    NevoComm *comm;    /* the replicas (replica.h); NULL: this process alone */
};

static size_t sgd_np(const NevoSGD *s) { return s->p->nparams; }

NevoStatus nevo_sgd_new(const NevoConfig *cfg, const NevoPolicy *p, const NevoDataView *train, NevoPool *pool,
                        const float *theta0, NevoSGD **out, NevoError *err) {
    *out = NULL;
    if (train->n < 1) return nevo_error(err, NEVO_ERR_INVALID, "algo sgd: the training set is empty");
    if (train->dim != p->obs_dim)
        return nevo_error(err, NEVO_ERR_INVALID, "algo sgd: samples of %d values for a network of %d inputs",
                          train->dim, p->obs_dim);
    NevoSGD *s = nevo_alloc(sizeof *s);
    s->p = p, s->train = train, s->pool = pool, s->seed = cfg->seed;
    s->batch = cfg->data.batch < train->n ? cfg->data.batch : train->n;
    size_t np = p->nparams;
    NevoStatus st = nevo_optim_new(&cfg->optim, np, &s->opt, err);
    if (st) {
        free(s);
        return st;
    }
    s->theta = nevo_alloc_aligned(sizeof(float) * np);
    memcpy(s->theta, theta0, sizeof(float) * np);
    s->perm = nevo_alloc(sizeof(int) * (size_t)train->n);
    s->work = grad_work_new(p, s->batch);
    s->grad = nevo_alloc_aligned(sizeof(double) * (np + 1));
    *out = s;
    return NEVO_OK;
}

void nevo_sgd_free(NevoSGD *s) {
    if (!s) return;
    grad_work_free(s->work);
    free(s->grad);
    free(s->perm);
    free(s->theta);
    nevo_optim_free(s->opt);
    free(s);
}

/* A batch's chunk of the replica reduce: shard k's float gradient as doubles, then its
 * summed loss. */
static NevoStatus sgd_chunk(void *ctx, int k, int worker, double *out, NevoError *err) {
    GradWork *w = ctx;
    size_t np = w->p->nparams;
    shard_item(w, k, worker);
    const float *g = w->grads + (size_t)k * np;
    for (size_t i = 0; i < np; i++) out[i] = g[i];
    out[np] = w->loss[k];
    return NEVO_OK;
}

void nevo_sgd_set_comm(NevoSGD *s, NevoComm *comm) { s->comm = comm; }

/* One optimiser step on samples perm[lo, hi): returns the batch's summed loss. The
 * batch's shards of NEVO_SUP_SHARD rows are the replica reduce's chunks: their
 * gradients add up in its fixed tree, on one process or across ranks alike. */
static NevoStatus sgd_step(NevoSGD *s, int lo, int hi, double *loss_sum, NevoError *err) {
    size_t np = sgd_np(s);
    int rows = hi - lo;
    gather(s->train, s->perm, lo, hi, s->work->x, s->work->y);
    s->work->theta = s->theta, s->work->rows = rows, s->work->total = rows;
    NevoStatus st = nevo_replicas_reduce(s->comm, s->pool, (rows + NEVO_SUP_SHARD - 1) / NEVO_SUP_SHARD, np + 1,
                                         sgd_chunk, s->work, s->grad, err);
    if (st) return st;
    double sum = s->grad[np];
    double norm = 0.0;
    for (size_t i = 0; i < np; i++) norm += s->grad[i] * s->grad[i];
    if (!isfinite(sum) || !isfinite(norm))
        return nevo_error(err, NEVO_ERR_NUMERIC,
                          "algo sgd: the %s is not finite at epoch %d, step %lld; lower optim.lr or set optim.clip_norm",
                          isfinite(sum) ? "gradient" : "loss", s->epochs, s->steps);
    nevo_optim_step(s->opt, s->theta, s->grad, 1.0);
    s->steps++;
    *loss_sum = sum;
    return NEVO_OK;
}

NevoStatus nevo_sgd_epoch(NevoSGD *s, double *train_loss, NevoError *err) {
    int n = s->train->n;
    for (int i = 0; i < n; i++) s->perm[i] = i;
    NevoRng rng;
    nevo_rng_init(&rng, s->seed, NEVO_RNG_DATA, (uint32_t)s->epochs, 0, 0);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)nevo_rng_below(&rng, (uint32_t)(i + 1)), t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    double total = 0.0;
    for (int lo = 0; lo < n; lo += s->batch) {
        int hi = lo + s->batch < n ? lo + s->batch : n;
        double sum = 0.0;
        NevoStatus st = sgd_step(s, lo, hi, &sum, err);
        if (st) return st;
        total += sum;
    }
    s->epochs++;
    *train_loss = total / n;
    return NEVO_OK;
}

int nevo_sgd_epochs(const NevoSGD *s) { return s->epochs; }
long long nevo_sgd_steps(const NevoSGD *s) { return s->steps; }
const float *nevo_sgd_params(const NevoSGD *s) { return s->theta; }

void nevo_sgd_save(const NevoSGD *s, NevoBuf *buf) {
    nevo_buf_u32(buf, (uint32_t)s->epochs);
    nevo_buf_u64(buf, (uint64_t)s->steps);
    nevo_buf_u64(buf, (uint64_t)sgd_np(s));
    nevo_buf_f32s(buf, s->theta, sgd_np(s));
    nevo_optim_save(s->opt, buf);
}

NevoStatus nevo_sgd_load(NevoSGD *s, NevoReader *r, NevoError *err) {
    uint32_t epochs = nevo_read_u32(r);
    uint64_t steps = nevo_read_u64(r), np = nevo_read_u64(r);
    if (!nevo_reader_ok(r, false) || np != sgd_np(s) || epochs > (uint32_t)INT32_MAX || steps > (uint64_t)INT64_MAX)
        return nevo_error(err, NEVO_ERR_CORRUPT, "sgd state: counters or a parameter count (%llu) that is not the "
                          "network's %zu", (unsigned long long)np, sgd_np(s));
    float *theta = nevo_alloc_aligned(sizeof(float) * np);
    nevo_read_f32s(r, theta, np);
    if (!nevo_reader_ok(r, false)) {
        free(theta);
        return nevo_error(err, NEVO_ERR_CORRUPT, "sgd state: truncated");
    }
    size_t bad = nevo_first_nonfinite(theta, np);
    if (bad < np) {
        free(theta);
        return nevo_error(err, NEVO_ERR_CORRUPT, "sgd state: parameter %zu is not finite", bad);
    }
    NevoStatus st = nevo_optim_load(s->opt, r, err);
    if (st) {
        free(theta);
        return st;
    }
    memcpy(s->theta, theta, sizeof(float) * np);
    free(theta);
    s->epochs = (int)epochs;
    s->steps = (long long)steps;
    return NEVO_OK;
}

/* ---- algo sgd: the trainer behind the algorithm registry --------------------------- */

typedef struct SGDAlgo {
    NevoAlgo base;
    NevoSGD *sgd;
} SGDAlgo;

static NevoStatus sgd_train(NevoAlgo *a, NevoGenStats *stats, NevoError *err) {
    SGDAlgo *s = (SGDAlgo *)a;
    double loss;
    NevoStatus st = nevo_sgd_epoch(s->sgd, &loss, err);
    if (st) return st;
    stats->frames = a->data->n; /* samples seen */
    stats->episodes = (a->data->n + s->sgd->batch - 1) / s->sgd->batch; /* an SGD step is its episode */
    stats->best = stats->mean = stats->median = stats->elite_mean = -loss;
    return NEVO_OK;
}

static void sgd_best(const NevoAlgo *a, float *theta) {
    const SGDAlgo *s = (const SGDAlgo *)a;
    memcpy(theta, nevo_sgd_params(s->sgd), sizeof(float) * a->policy->nparams);
}

static void sgd_algo_save(const NevoAlgo *a, NevoBuf *buf) { nevo_sgd_save(((const SGDAlgo *)a)->sgd, buf); }

static NevoStatus sgd_algo_load(NevoAlgo *a, NevoReader *r, NevoError *err) {
    SGDAlgo *s = (SGDAlgo *)a;
    NevoStatus st = nevo_sgd_load(s->sgd, r, err);
    if (st == NEVO_OK) a->generation = nevo_sgd_epochs(s->sgd);
    return st;
}

static void sgd_algo_free(NevoAlgo *a) {
    nevo_sgd_free(((SGDAlgo *)a)->sgd);
    free(a);
}

static void sgd_set_comm(NevoAlgo *a, NevoComm *comm) { nevo_sgd_set_comm(((SGDAlgo *)a)->sgd, comm); }

static const NevoAlgoOps sgd_ops = {
    .best = sgd_best,
    .save = sgd_algo_save,
    .load = sgd_algo_load,
    .free = sgd_algo_free,
    .train = sgd_train,
    .set_comm = sgd_set_comm,
};

NevoStatus nevo_sgd_check(const NevoConfig *cfg, int variant, NevoError *err) { return NEVO_OK; }

double nevo_sgd_state_bytes(const NevoConfig *cfg, int variant, size_t nparams) {
    /* parameters, two double moments, the double gradient and a float gradient per shard */
    double shards = ((double)cfg->data.batch + NEVO_SUP_SHARD - 1) / NEVO_SUP_SHARD;
    return (double)nparams * (4.0 + 16.0 + 8.0 + 4.0 * shards);
}

NevoStatus nevo_sgd_algo_new(const NevoAlgo *base, int variant, NevoAlgo **out, NevoError *err) {
    *out = NULL;
    if (!base->data) return nevo_error(err, NEVO_ERR_INVALID, "algo sgd needs a dataset");
    SGDAlgo *s = nevo_alloc(sizeof *s);
    s->base = *base;
    s->base.ops = &sgd_ops;
    /* the network starts as the GA's individual 0 of generation 0 would */
    float *theta0 = nevo_alloc_aligned(sizeof(float) * base->policy->nparams);
    nevo_policy_init_params(base->policy, base->noise, base->cfg->seed, 0, 0, theta0);
    NevoStatus st = nevo_sgd_new(base->cfg, base->policy, base->data, base->pool, theta0, &s->sgd, err);
    free(theta0);
    if (st) {
        free(s);
        return st;
    }
    *out = &s->base;
    return NEVO_OK;
}
