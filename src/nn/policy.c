/* Network construction, initialisation, the batched heterogeneous forward pass (and
 * its recurrent form, which carries each row's LSTM state) and observation statistics. */
#include "nevo/policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/lstm.h"
#include "nevo/params.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

static NevoActivation parse_activation(const char *s) {
    return strcmp(s, "relu") == 0 ? NEVO_ACT_RELU : NEVO_ACT_TANH;
}

/* A part of p: layers [l0, l1) over the same parameter vector, fed `in` inputs. */
static NevoPolicy *policy_part(const NevoPolicy *p, int l0, int l1, int in) {
    NevoPolicy *q = nevo_alloc(sizeof *q);
    *q = *p;
    q->obs_dim = in;
    q->n_layers = l1 - l0;
    memcpy(q->layers, p->layers + l0, sizeof(NevoLayer) * (size_t)q->n_layers);
    q->n_out = q->layers[q->n_layers - 1].out_dim;
    q->max_width = in;
    for (int l = 0; l < q->n_layers; l++)
        if (q->layers[l].out_dim > q->max_width) q->max_width = q->layers[l].out_dim;
    q->lstm_layer = -1;
    q->lstm_units = 0;
    q->pre = q->post = NULL;
    return q;
}

/* The feed-forward parts around the LSTM (policy.h), neither normalising: the
 * recurrent forward normalises the observations by p's flag and statistics as they are
 * at the call (a policy file sets them after nevo_policy_new). */
static void split_recurrent(NevoPolicy *p) {
    int k = p->lstm_layer;
    if (k > 0) p->pre = policy_part(p, 0, k, p->obs_dim);
    p->post = policy_part(p, k + 1, p->n_layers, p->lstm_units);
    NevoPolicy *parts[2] = {p->pre, p->post};
    for (int i = 0; i < 2; i++)
        if (parts[i]) {
            parts[i]->obs_norm = 0;
            parts[i]->obs_mean = parts[i]->obs_std = NULL;
        }
}

NevoStatus nevo_policy_new(const NevoEnvSpec *env, const NevoPolicyConfig *cfg, int obs_norm,
                           NevoPolicy **out, NevoError *err) {
    *out = NULL;
    NevoPolicy *p = nevo_alloc(sizeof *p);
    p->obs_dim = env->obs_dim;
    p->action_kind = env->action_kind;
    p->action_dim = env->action_dim;
    p->n_act = env->action_kind == NEVO_SPACE_DISCRETE ? env->n_actions : env->action_dim;
    p->n_out = p->n_act + (cfg->value_head ? 1 : 0);
    memcpy(p->action_low, env->action_low, sizeof p->action_low);
    memcpy(p->action_high, env->action_high, sizeof p->action_high);
    p->init = strcmp(cfg->init, "normc") == 0 ? NEVO_INIT_NORMC : NEVO_INIT_SCALED;
    NevoActivation act = parse_activation(cfg->activation);

    size_t off = 0;
    int width = env->obs_dim;
    p->max_width = width;
    if (cfg->n_conv > 0) {
        if (env->obs_rank != 3) {
            free(p);
            return nevo_error(err, NEVO_ERR_INVALID,
                              "policy.conv_filters needs image observations, but %s observations are "
                              "vectors of %d; remove the conv keys",
                              env->name, env->obs_dim);
        }
        int h = env->obs_shape[0], w = env->obs_shape[1], c = env->obs_shape[2];
        for (int i = 0; i < cfg->n_conv; i++) {
            int k = cfg->n_conv_kernels ? cfg->conv_kernels[i] : 3;
            int s = cfg->n_conv_strides ? cfg->conv_strides[i] : 1;
            if (k > h || k > w) {
                free(p);
                return nevo_error(err, NEVO_ERR_INVALID,
                                  "conv layer %d: kernel %d does not fit its %dx%d input", i, k, h, w);
            }
            NevoLayer *L = &p->layers[p->n_layers++];
            L->kind = NEVO_LAYER_CONV;
            L->act = act;
            L->in_h = h, L->in_w = w, L->in_c = c;
            L->kernel = k, L->stride = s;
            L->out_h = (h - k) / s + 1, L->out_w = (w - k) / s + 1, L->out_c = cfg->conv_filters[i];
            L->in_dim = h * w * c;
            L->out_dim = L->out_h * L->out_w * L->out_c;
            L->fan_in = k * k * c;
            L->w_off = off;
            off += (size_t)k * k * c * L->out_c;
            L->b_off = off;
            off += (size_t)L->out_c;
            h = L->out_h, w = L->out_w, c = L->out_c;
            width = L->out_dim;
            if (width > p->max_width) p->max_width = width;
        }
    }
    p->lstm_layer = -1;
    for (int i = 0; i <= cfg->n_hidden; i++) {
        int units = i < cfg->n_hidden ? cfg->hidden[i] : p->n_out;
        if (i == cfg->n_hidden && cfg->lstm > 0) {
            /* the LSTM: the hidden stack's outputs (or the observations) in, h out */
            int H = cfg->lstm;
            NevoLayer *R = &p->layers[p->n_layers];
            p->lstm_layer = p->n_layers++;
            p->lstm_units = H;
            R->kind = NEVO_LAYER_LSTM;
            R->act = NEVO_ACT_NONE;
            R->in_dim = width;
            R->out_dim = H;
            R->fan_in = width + H;
            R->w_off = off;
            R->b_off = off + ((size_t)width + H) * 4 * (size_t)H;
            off += nevo_lstm_params(width, H);
            width = H;
            if (4 * H > p->max_width) p->max_width = 4 * H;
        }
        NevoLayer *L = &p->layers[p->n_layers++];
        L->kind = NEVO_LAYER_DENSE;
        L->act = i < cfg->n_hidden ? act : NEVO_ACT_NONE;
        L->in_dim = width;
        L->out_dim = units;
        L->fan_in = width;
        L->w_off = off;
        off += (size_t)width * units;
        L->b_off = off;
        off += (size_t)units;
        width = units;
        if (width > p->max_width) p->max_width = width;
    }
    p->nparams = off;
    p->obs_norm = obs_norm;
    p->obs_mean = nevo_alloc(sizeof(float) * (size_t)p->obs_dim);
    p->obs_std = nevo_alloc(sizeof(float) * (size_t)p->obs_dim);
    for (int i = 0; i < p->obs_dim; i++) p->obs_std[i] = 1.0f;
    if (p->lstm_layer >= 0) split_recurrent(p);
    *out = p;
    return NEVO_OK;
}

void nevo_policy_free(NevoPolicy *p) {
    if (!p) return;
    free(p->obs_mean);
    free(p->obs_std);
    free(p->pre); /* the parts own nothing: their statistics are p's */
    free(p->post);
    free(p);
}

/* dst = src * scale in one pass: every fresh GA child (and random search's every
 * child) starts so, and a copy scaled in place afterwards, scalar, cost twice the time
 * of reading the noise slice once. */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void scaled_copy(float *restrict dst, const float *restrict src, float scale, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i] * scale;
}

void nevo_policy_init_params(const NevoPolicy *p, const NevoNoise *noise, uint64_t seed,
                             uint32_t generation, uint32_t individual, float *theta) {
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        if (L->kind == NEVO_LAYER_LSTM) {
            /* lstm.h's init under either rule: normals / sqrt(in + H), biases 0 but the
             * forget gate's, 1 */
            size_t nw = L->b_off - L->w_off;
            const float *eps = nevo_noise_slice(noise, nw, seed, NEVO_RNG_INIT, generation, individual, (uint32_t)l);
            nevo_lstm_init(L->in_dim, L->out_dim, eps, theta + L->w_off);
            continue;
        }
        size_t nw = L->b_off - L->w_off;
        size_t n_units = L->kind == NEVO_LAYER_CONV ? (size_t)L->out_c : (size_t)L->out_dim;
        float *w = theta + L->w_off;
        const float *eps = nevo_noise_slice(noise, nw, seed, NEVO_RNG_INIT, generation, individual, (uint32_t)l);
        if (p->init == NEVO_INIT_SCALED) {
            /* Uber GA: noise slice times 1/sqrt(fan_in), biases 0. */
            scaled_copy(w, eps, (float)(1.0 / sqrt((double)L->fan_in)), nw);
        } else {
            memcpy(w, eps, sizeof(float) * nw);
            /* OpenAI normc: each output unit's incoming weights rescaled to norm 1
             * (0.01 for the output layer, so initial actions are near neutral). W is
             * (fan_in, n_units) row-major, so a unit's weights are a strided column. */
            double target = l == p->n_layers - 1 ? 0.01 : 1.0;
            size_t fan = nw / n_units;
            for (size_t u = 0; u < n_units; u++) {
                double ss = 0.0;
                for (size_t r = 0; r < fan; r++) ss += (double)w[r * n_units + u] * w[r * n_units + u];
                double s = ss > 0.0 ? target / sqrt(ss) : 0.0;
                for (size_t r = 0; r < fan; r++) w[r * n_units + u] = (float)(w[r * n_units + u] * s);
            }
        }
        memset(theta + L->b_off, 0, sizeof(float) * n_units);
    }
}

/* floats rounded up to a 64-byte line, so each part of a scratch starts on one */
static size_t line_floats(size_t n) { return (n + 15) & ~(size_t)15; }

static size_t part_scratch(const NevoPolicy *p, int n) {
    size_t part = nevo_policy_scratch_floats(p->post, n);
    if (p->pre && nevo_policy_scratch_floats(p->pre, n) > part) part = nevo_policy_scratch_floats(p->pre, n);
    return part;
}

/* The factored forward's scratch: its first part (two ping-pong buffers of n rows, or
 * the lanes blocks' four of NEVO_LANES rows where n has a block), then u. */
static size_t factored_part(const NevoPolicy *p, int n) {
    size_t W = (size_t)p->max_width, rows = 2 * W * (size_t)n;
    size_t lanes = n >= NEVO_LANES ? 4 * (size_t)NEVO_LANES * W : 0;
    return rows > lanes ? rows : lanes;
}

size_t nevo_policy_scratch_floats(const NevoPolicy *p, int n) {
    if (p->lstm_layer >= 0) {
        /* the parts' scratch (one at a time), then the normalised observations (n,
         * obs_dim), the LSTM's input (n, in), h and c (n, H) each and its step's scratch */
        const NevoLayer *R = &p->layers[p->lstm_layer];
        return line_floats(part_scratch(p, n)) + line_floats((size_t)n * p->obs_dim) +
               line_floats((size_t)n * R->in_dim) + 2 * line_floats((size_t)n * R->out_dim) +
               nevo_lstm_step_scratch_floats(R->in_dim, R->out_dim, n);
    }
    /* two ping-pong activation buffers of the widest layer, per row (the factored
     * forward's lanes blocks: four of NEVO_LANES rows); then the factored forward's u:
     * (pixels, rank) of a conv layer, at most NEVO_LOWRANK_MAX a pixel */
    return factored_part(p, n) + nevo_policy_conv_pixels(p) * NEVO_LOWRANK_MAX + 64;
}

size_t nevo_policy_conv_pixels(const NevoPolicy *p) {
    size_t pixels = 1;
    for (int l = 0; l < p->n_layers; l++)
        if (p->layers[l].kind == NEVO_LAYER_CONV && (size_t)p->layers[l].out_h * p->layers[l].out_w > pixels)
            pixels = (size_t)p->layers[l].out_h * p->layers[l].out_w;
    return pixels;
}

size_t nevo_policy_state_floats(const NevoPolicy *p) { return p->lstm_layer >= 0 ? 2 * (size_t)p->lstm_units : 0; }

/* Layers under this many bytes of weights go through dense_nets, several networks' rows
 * side by side, which hides the latency of a lone row's few FMA chains: NEVO_NETS_MAX such
 * layers (256 KB) take at most half the 512 KB-2 MiB L2 of the CPUs measured. Bigger
 * ones are bound by reading their weights, which side by side does not change
 * (docs/BENCHMARKS.md), so they go one network at a time. */
#define NETS_MAX_LAYER_BYTES (64 * 1024)

/* The scratch is two ping-pong buffers of n slots of max_width floats (a row per
 * slot, or in the lanes layout a block of NEVO_LANES rows over NEVO_LANES slots). Every
 * run of rows starts again from slot 0, so a call touches only as much scratch as its
 * longest run, which stays in cache from one run to the next, instead of a fresh slot
 * per row through memory. The first layer may read its input (normalised
 * observations) from the first buffer: each layer reads all of its input before any
 * is overwritten, since the first layer writes the second buffer. */

/* ---- the factored low-rank forward (EGGROLL) ----------------------------------------
 * A layer of member i computes y = base(x) + coef t + s zb with t_c = sum_q u_q B[c][q]
 * and u = x A: the base's own dense or conv output (bias included), the rank-r
 * correction, the bias noise, then the activation. The factor row's layout (params.h)
 * puts each sum's operands side by side. Each row's bits depend on its base, its factor
 * row and its input alone. */

/* u = sum over e < len of x[e] a[e] in NEVO_FACTOR_LANES partial sums: lane l takes the
 * terms e = l mod 16 in ascending e (fused, from +0), then lanes l and l + 8 are added,
 * l and l + 4, l + 2, l + 1. A fixed order that vector units run as written; no term is
 * skipped (zeros included). */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static float factor_dot(const float *x, const float *a, int len) {
    float acc[NEVO_FACTOR_LANES] = {0};
    int e = 0;
    for (; e + NEVO_FACTOR_LANES <= len; e += NEVO_FACTOR_LANES)
        for (int l = 0; l < NEVO_FACTOR_LANES; l++) acc[l] = fmaf(x[e + l], a[e + l], acc[l]);
    for (int l = 0; e + l < len; l++) acc[l] = fmaf(x[e + l], a[e + l], acc[l]);
    for (int h = NEVO_FACTOR_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] += acc[l + h];
    return acc[0];
}

/* For each of n outputs (rows of u, (n, rank); of y, (n, out)): y[c] = fma(s, zb[c],
 * fma(coef, t_c, y[c])), t_c the fused sum over q ascending of u[q] Bt[q][c] (from +0) */
NEVO_KERNEL_CLONES NEVO_VECTORIZE
static void factor_apply(const float *u, const float *Bt, const float *zb, int n, int out, int rank, float coef,
                         float s, float *y) {
    float t[256];
    for (int p = 0; p < n; p++, u += rank, y += out)
        for (int c0 = 0; c0 < out; c0 += 256) {
            int w = out - c0 < 256 ? out - c0 : 256;
            for (int c = 0; c < w; c++) t[c] = 0.0f;
            for (int q = 0; q < rank; q++) {
                const float *bq = Bt + (size_t)q * out + c0;
                float uq = u[q];
                for (int c = 0; c < w; c++) t[c] = fmaf(uq, bq[c], t[c]);
            }
            for (int c = 0; c < w; c++) y[c0 + c] = fmaf(s, zb[c0 + c], fmaf(coef, t[c], y[c0 + c]));
        }
}

/* The correction of layer L (its weight block wb, bias block bb) for one row: input x,
 * output y (before the activation), factor row f; u: room for the conv's (pixels, rank). */
static void factor_layer(const NevoKernels *K, const NevoLayer *L, const NevoLRBlock *wb, const NevoLRBlock *bb,
                         int rank, const float *f, const float *x, float *y, float *u) {
    static const float zeros[NEVO_LOWRANK_MAX];
    const float *z = f + NEVO_FACTOR_HEAD, *A = z + wb->z_off, *Bt = A + (size_t)wb->rows * rank, *zb = z + bb->z_off;
    if (L->kind != NEVO_LAYER_CONV) {
        for (int q = 0; q < rank; q++) u[q] = factor_dot(x, A + (size_t)q * L->in_dim, L->in_dim);
        factor_apply(u, Bt, zb, 1, L->out_dim, rank, f[0], f[1], y);
        return;
    }
    /* u = x A: a convolution with `rank` filters, the weight block's A (k, k, in_c, rank) */
    NevoLayer U = *L;
    U.out_c = rank;
    U.out_dim = L->out_h * L->out_w * rank;
    K->conv(&U, A, zeros, x, u);
    factor_apply(u, Bt, zb, L->out_h * L->out_w, L->out_c, rank, f[0], f[1], y);
}

/* The members of a factored forward's rows (forward_rows' hook): the policy's low-rank
 * blocks (layer l: its weights bl[2 l], its bias bl[2 l + 1]), the rank, row r's factor
 * row at factors + which[r] fstride, and room for u. */
typedef struct FactorArgs {
    const NevoLRBlock *bl;
    int rank;
    const float *factors;
    size_t fstride;
    const int *which;
    float *work;
} FactorArgs;

/* Layer l's corrections of m rows (inputs at x + r xs, outputs at y + r ys, the base's
 * product there already), before their activation. */
static void factor_rows(const NevoKernels *K, const NevoLayer *L, int l, const FactorArgs *fa, int m, const float *x,
                        size_t xs, float *y, size_t ys) {
    for (int r = 0; r < m; r++)
        factor_layer(K, L, &fa->bl[2 * l], &fa->bl[2 * l + 1], fa->rank,
                     fa->factors + (size_t)fa->which[r] * fa->fstride, x + r * xs, y + r * ys, fa->work);
}

/* m rows in the row layout, layer by layer for all of them: row r's input at x0 + r
 * xs0, its outputs at out + r n_out, its activations in slot r. With nets == 1 the rows
 * share the network thetas[0]; with nets > 1 they are single rows of that many
 * all-dense networks (m = nets), row q with thetas[q], whose small layers go through
 * dense_nets: their independent sums hide the FMA latency a lone row waits on. */
static void forward_rows(const NevoPolicy *p, const NevoKernels *K, NevoDenseFn dense, const float *const *thetas,
                         int nets, const float *x0, size_t xs0, int m, float *out, float *scratch, int n,
                         const FactorArgs *fa) {
    size_t W = (size_t)p->max_width;
    float *a = scratch, *b = scratch + W * n;
    const float *ws[NEVO_NETS_MAX], *bs[NEVO_NETS_MAX];
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        int last = l == p->n_layers - 1;
        const float *src = l == 0 ? x0 : a;
        size_t ss = l == 0 ? xs0 : W;
        float *dst = last ? out : b;
        size_t ds = last ? (size_t)p->n_out : W;
        if (L->kind == NEVO_LAYER_CONV) {
            for (int r = 0; r < m; r++) {
                const float *theta = thetas[nets == 1 ? 0 : r];
                K->conv(L, theta + L->w_off, theta + L->b_off, src + r * ss, dst + r * ds);
            }
        } else if (nets == 1) {
            dense(thetas[0] + L->w_off, thetas[0] + L->b_off, src, ss, m, L->in_dim, L->out_dim, dst, ds);
        } else if ((size_t)L->in_dim * (size_t)L->out_dim * sizeof(float) < NETS_MAX_LAYER_BYTES) {
            for (int q = 0; q < nets; q++) ws[q] = thetas[q] + L->w_off, bs[q] = thetas[q] + L->b_off;
            K->dense_nets(ws, bs, src, ss, nets, L->in_dim, L->out_dim, dst, ds);
        } else {
            for (int q = 0; q < nets; q++)
                dense(thetas[q] + L->w_off, thetas[q] + L->b_off, src + q * ss, ss, 1, L->in_dim, L->out_dim,
                      dst + q * ds, ds);
        }
        if (fa) factor_rows(K, L, l, fa, m, src, ss, dst, ds); /* each row's member's correction */
        if (L->act != NEVO_ACT_NONE && ds == (size_t)L->out_dim) /* the rows are contiguous */
            nevo_kernel_activate(L->act, dst, m * L->out_dim);
        else if (L->act != NEVO_ACT_NONE)
            for (int r = 0; r < m; r++) nevo_kernel_activate(L->act, dst + r * ds, L->out_dim);
        float *t = a;
        a = b;
        b = t;
    }
}

/* NEVO_LANES rows sharing a network (inputs at x0 + r xs0, outputs at out + r n_out), in
 * the lanes layout (kernels.h): the observations are transposed in, every layer reads
 * and writes that layout, and the outputs are transposed back. The transposed input goes
 * to the second buffer, so the first layer reads all of it before anything writes the
 * first. dense_lanes and conv_lanes apply each layer's activation before they store. */
static void forward_lanes(const NevoPolicy *p, const NevoKernels *K, const float *theta, const float *x0,
                          size_t xs0, float *out, float *scratch, int n, int streamed) {
    NevoDenseLanesFn dense_lanes = streamed && K->dense_lanes_streamed ? K->dense_lanes_streamed : K->dense_lanes;
    float *a = scratch + (size_t)p->max_width * n, *b = scratch;
    K->to_lanes(x0, xs0, p->obs_dim, a);
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        const float *w = theta + L->w_off, *bias = theta + L->b_off;
        if (L->kind == NEVO_LAYER_CONV)
            K->conv_lanes(L, w, bias, a, L->act, b);
        else
            dense_lanes(w, bias, a, L->in_dim, L->out_dim, L->act, b);
        float *t = a;
        a = b;
        b = t;
    }
    K->from_lanes(a, p->n_out, out, (size_t)p->n_out);
}

/* clip((obs - mean) / std, +-5) of n packed observation rows into rows ds floats apart */
static void normalise_rows(const NevoPolicy *p, const float *obs, int n, float *dst, size_t ds) {
    for (int r = 0; r < n; r++) {
        const float *o = obs + (size_t)r * p->obs_dim;
        float *d = dst + (size_t)r * ds;
        for (int k = 0; k < p->obs_dim; k++) {
            float v = (o[k] - p->obs_mean[k]) / p->obs_std[k];
            d[k] = v < -5.0f ? -5.0f : v > 5.0f ? 5.0f : v;
        }
    }
}

void nevo_policy_forward(const NevoPolicy *p, const float *params, size_t stride, const int *net,
                         const float *obs, int n, float *out, float *scratch) {
    NEVO_ASSERT(p->lstm_layer < 0); /* a recurrent policy needs its state: nevo_policy_forward_state */
    size_t W = (size_t)p->max_width, O = (size_t)p->n_out;
    const NevoKernels *K = nevo_kernels();
    /* blocks of NEVO_LANES rows of one network go through the lanes layout where the
     * kernel set has it; rows of several networks side by side serve all-dense networks
     * (conv layers come first) */
    int all_dense = p->layers[0].kind == NEVO_LAYER_DENSE;
    int lanes = K->dense_lanes != NULL;
    /* Where the call's networks together outweigh nevo_cache_streamed_bytes (about a
     * core's share of L3), each one's weights come from memory, call after call: those
     * go through the streamed kernels (dense_streamed, dense_lanes_streamed), whose
     * access order and prefetches suit memory and only slow reads from cache. Each run
     * of rows counts as a network (one that comes back after others counts again; the
     * evaluator's slots and a population's rows hold each network in one run). */
    NevoDenseFn dense = K->dense;
    size_t runs = 0, beyond = nevo_cache_streamed_bytes(), net_bytes = p->nparams * sizeof(float);
    for (int i = 0; i < n; i++) runs += i == 0 || net[i] != net[i - 1];
    int streamed = runs * net_bytes > beyond;
    if (streamed && K->dense_streamed) dense = K->dense_streamed;
    /* The lanes layout's blocks of a run after its first find the network in cache
     * unless it alone is that large: only the first streams it (and prefetches the next
     * network). */
    int lanes_streamed_after_first = net_bytes > beyond;
    /* A run of rows that share a network goes through all its layers together, so its
     * weights are read once per run rather than once per row, in the order they lie in
     * memory, and its activations stay in cache from one layer to the next. */
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && net[j] == net[i]) j++;
        /* single rows of different all-dense networks in a row: up to NEVO_NETS_MAX
         * together (a conv net's time goes to its big dense layer's weight traffic, which
         * this does not change: docs/BENCHMARKS.md) */
        int g = 1;
        if (K->dense_nets && all_dense && j == i + 1)
            while (g < NEVO_NETS_MAX && i + g < n && (i + g + 1 == n || net[i + g + 1] != net[i + g])) g++;
        if (g > 1) j = i + g;
        /* the first layer reads the observations where they are unless they are
         * normalised first (into the first buffer, from slot 0) */
        int m = j - i;
        const float *x = obs + (size_t)i * p->obs_dim;
        size_t xs = (size_t)p->obs_dim;
        if (p->obs_norm) {
            normalise_rows(p, x, m, scratch, W);
            x = scratch;
            xs = W;
        }
        float *y = out + (size_t)i * O;
        if (g > 1) {
            const float *thetas[NEVO_NETS_MAX];
            for (int q = 0; q < g; q++) thetas[q] = params + (size_t)net[i + q] * stride;
            forward_rows(p, K, dense, thetas, g, x, xs, m, y, scratch, n, NULL);
            i = j;
            continue;
        }
        const float *theta = params + (size_t)net[i] * stride;
        int r = 0;
        if (lanes) {
            for (; m - r >= NEVO_LANES; r += NEVO_LANES)
                forward_lanes(p, K, theta, x + r * xs, xs, y + r * O, scratch, n,
                              r == 0 ? streamed : lanes_streamed_after_first);
        }
        /* rows left over after lanes blocks find the network in cache as those did */
        NevoDenseFn rest = r > 0 && !lanes_streamed_after_first ? K->dense : dense;
        if (r < m) forward_rows(p, K, rest, &theta, 1, x + r * xs, xs, m - r, y + r * O, scratch, n, NULL);
        i = j;
    }
}

/* m rows of one base theta (inputs at x0 + r xs0, row r member which[r]), layer by layer
 * in the row layout: the base's product for all m, then each row's correction and
 * activation. s: two buffers of n rows of W. */
static void factored_rows(const NevoPolicy *p, const NevoKernels *K, const float *theta, const FactorArgs *fa,
                          const float *x0, size_t xs0, int m, float *out, float *s, int n) {
    if (p->obs_norm) {
        normalise_rows(p, x0, m, s, (size_t)p->max_width);
        x0 = s;
        xs0 = (size_t)p->max_width;
    }
    forward_rows(p, K, K->dense, &theta, 1, x0, xs0, m, out, s, n, fa);
}

/* NEVO_LANES rows of one base, as factored_rows, but each layer's base product in the
 * lanes layout (the kernel set's fastest for rows of one network; the same bits), its
 * outputs brought back to rows for the corrections and the activation, then the next
 * layer's inputs into the lanes layout again. s: four blocks of NEVO_LANES W floats. */
static void factored_lanes(const NevoPolicy *p, const NevoKernels *K, const float *theta, const FactorArgs *fa,
                           const float *x0, size_t xs0, float *out, float *s) {
    size_t W = (size_t)p->max_width, block = (size_t)NEVO_LANES * W;
    float *A = s, *B = s + block, *XT = s + 2 * block, *YT = s + 3 * block;
    const float *X = x0;
    size_t xs = xs0;
    if (p->obs_norm) {
        normalise_rows(p, x0, NEVO_LANES, A, W);
        X = A;
        xs = W;
    }
    K->to_lanes(X, xs, p->obs_dim, XT);
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        int last = l == p->n_layers - 1;
        float *Y = last ? out : X == A ? B : A;
        size_t ys = last ? (size_t)p->n_out : W;
        if (L->kind == NEVO_LAYER_CONV)
            K->conv_lanes(L, theta + L->w_off, theta + L->b_off, XT, NEVO_ACT_NONE, YT);
        else
            K->dense_lanes(theta + L->w_off, theta + L->b_off, XT, L->in_dim, L->out_dim, NEVO_ACT_NONE, YT);
        K->from_lanes(YT, L->out_dim, Y, ys);
        factor_rows(K, L, l, fa, NEVO_LANES, X, xs, Y, ys);
        if (L->act != NEVO_ACT_NONE)
            for (int r = 0; r < NEVO_LANES; r++) nevo_kernel_activate(L->act, Y + r * ys, L->out_dim);
        if (!last) K->to_lanes(Y, ys, L->out_dim, XT);
        X = Y;
        xs = ys;
    }
}

void nevo_policy_forward_factored(const NevoPolicy *p, const float *bases, size_t bstride, const int *base,
                                  const float *factors, size_t fstride, const int *which, int rank,
                                  const float *obs, int n, float *out, float *scratch) {
    NEVO_ASSERT(p->lstm_layer < 0 && rank >= 1 && rank <= NEVO_LOWRANK_MAX);
    size_t D = (size_t)p->obs_dim, O = (size_t)p->n_out;
    const NevoKernels *K = nevo_kernels();
    NevoLRBlock bl[NEVO_LOWRANK_BLOCKS];
    nevo_lowrank_blocks(p, rank, bl); /* layer l: its weights bl[2 l], its bias bl[2 l + 1] */
    FactorArgs fa = {bl, rank, factors, fstride, which, scratch + factored_part(p, n)};
    /* a run of rows on one base goes through each layer's base product together (its
     * weights read once for the run), blocks of NEVO_LANES rows in the lanes layout
     * where the kernel set has it, then each row's correction */
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && base[j] == base[i]) j++;
        const float *theta = bases + (size_t)base[i] * bstride;
        if (K->dense_lanes)
            for (; j - i >= NEVO_LANES; i += NEVO_LANES) {
                fa.which = which + i;
                factored_lanes(p, K, theta, &fa, obs + (size_t)i * D, D, out + (size_t)i * O, scratch);
            }
        if (i < j) {
            fa.which = which + i;
            factored_rows(p, K, theta, &fa, obs + (size_t)i * D, D, j - i, out + (size_t)i * O, scratch, n);
        }
        i = j;
    }
}

void nevo_policy_normalise_obs(const NevoPolicy *p, const float *obs, int n, float *x) {
    normalise_rows(p, obs, n, x, (size_t)p->obs_dim);
}

/* The recurrent step: pre's forward (or the observations, normalised), the LSTM's step
 * on each row's state (lstm.h: a row's bits do not depend on the others), post's
 * forward of h. The state rows (h, c) are gathered into the step's (n, H) arrays and
 * scattered back. */
void nevo_policy_forward_state(const NevoPolicy *p, const float *params, size_t stride, const int *net,
                               const float *obs, int n, float *state, float *out, float *scratch) {
    if (p->lstm_layer < 0) {
        nevo_policy_forward(p, params, stride, net, obs, n, out, scratch);
        return;
    }
    const NevoLayer *R = &p->layers[p->lstm_layer];
    int in = R->in_dim, H = R->out_dim;
    float *xn = scratch + line_floats(part_scratch(p, n));
    float *x = xn + line_floats((size_t)n * p->obs_dim);
    float *h = x + line_floats((size_t)n * in), *c = h + line_floats((size_t)n * H);
    float *work = c + line_floats((size_t)n * H);
    if (p->obs_norm) {
        nevo_policy_normalise_obs(p, obs, n, xn);
        obs = xn;
    }
    if (p->pre)
        nevo_policy_forward(p->pre, params, stride, net, obs, n, x, scratch);
    else
        memcpy(x, obs, sizeof(float) * (size_t)n * in);
    for (int r = 0; r < n; r++) {
        memcpy(h + (size_t)r * H, state + (size_t)r * 2 * H, sizeof(float) * (size_t)H);
        memcpy(c + (size_t)r * H, state + (size_t)r * 2 * H + H, sizeof(float) * (size_t)H);
    }
    nevo_lstm_step(params + R->w_off, stride, net, in, H, n, x, NULL, h, c, work);
    for (int r = 0; r < n; r++) {
        memcpy(state + (size_t)r * 2 * H, h + (size_t)r * H, sizeof(float) * (size_t)H);
        memcpy(state + (size_t)r * 2 * H + H, c + (size_t)r * H, sizeof(float) * (size_t)H);
    }
    nevo_policy_forward(p->post, params, stride, net, h, n, out, scratch);
}

/* tanh for squashing a continuous action: computed in double as (e - 1) / (e + 1),
 * e = exp(2|x|) by range reduction and a degree-11 Taylor polynomial (relative error
 * < 1e-16), then rounded once to float, so it is the correctly rounded tanh in all but
 * the rarest cases. One call per action dimension per step costs nothing next to the
 * simulator, so actions keep this precision (and the continuous-control results
 * recorded with it), while hidden layers use the kernels' faster float tanh. */
#define SQUASH_CLAMP 9.0f
#define SQUASH_INV_LN2 1.4426950408889634
#define SQUASH_LN2_HI 6.93147180369123816490e-01
#define SQUASH_LN2_LO 1.90821492927058770002e-10
#define SQUASH_SHIFTER 6755399441055744.0 /* 1.5 * 2^52: adding it rounds to an integer */

static const double squash_exp_poly[12] = {
    1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
    1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
};

NEVO_KERNEL_CLONES
static float squash_tanh(float x) {
    float ax = fabsf(x);
    if (!(ax < SQUASH_CLAMP)) return isnan(x) ? x : copysignf(1.0f, x);
    double y = 2.0 * (double)ax;
    double t = y * SQUASH_INV_LN2 + SQUASH_SHIFTER;
    double n = t - SQUASH_SHIFTER;
    double r = (y - n * SQUASH_LN2_HI) - n * SQUASH_LN2_LO;
    double p = squash_exp_poly[11];
    for (int i = 10; i >= 0; i--) p = fma(p, r, squash_exp_poly[i]);
    int64_t bits = ((int64_t)n + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    double e = p * scale;
    float th = (float)((e - 1.0) / (e + 1.0));
    return copysignf(th, x);
}

void nevo_policy_actions(const NevoPolicy *p, const float *out, int n, float *actions) {
    for (int i = 0; i < n; i++) {
        const float *o = out + (size_t)i * p->n_out;
        if (p->action_kind == NEVO_SPACE_DISCRETE) {
            int best = 0;
            for (int j = 1; j < p->n_act; j++)
                if (o[j] > o[best]) best = j;
            actions[i] = (float)best;
        } else {
            float *a = actions + (size_t)i * p->action_dim;
            for (int j = 0; j < p->action_dim; j++) {
                float t = squash_tanh(o[j]);
                a[j] = p->action_low[j] + 0.5f * (t + 1.0f) * (p->action_high[j] - p->action_low[j]);
            }
        }
    }
}

double nevo_policy_flops(const NevoPolicy *p) {
    double f = 0.0;
    for (int l = 0; l < p->n_layers; l++) {
        const NevoLayer *L = &p->layers[l];
        if (L->kind == NEVO_LAYER_LSTM)
            f += nevo_lstm_forward_flops(L->in_dim, L->out_dim);
        else
            f += 2.0 * (double)L->fan_in * (double)L->out_dim;
    }
    return f;
}

void nevo_obs_stats_init(NevoObsStats *s, int dim) {
    s->dim = dim;
    s->count = 0.0;
    s->sum = nevo_alloc(sizeof(double) * (size_t)dim);
    s->sumsq = nevo_alloc(sizeof(double) * (size_t)dim);
}

void nevo_obs_stats_free(NevoObsStats *s) {
    free(s->sum);
    free(s->sumsq);
    s->sum = s->sumsq = NULL;
}

void nevo_obs_stats_add(NevoObsStats *s, const float *obs) {
    for (int i = 0; i < s->dim; i++) {
        s->sum[i] += obs[i];
        s->sumsq[i] += (double)obs[i] * obs[i];
    }
    s->count += 1.0;
}

void nevo_obs_stats_merge(NevoObsStats *into, const NevoObsStats *from) {
    for (int i = 0; i < into->dim; i++) {
        into->sum[i] += from->sum[i];
        into->sumsq[i] += from->sumsq[i];
    }
    into->count += from->count;
}

void nevo_obs_stats_apply(const NevoObsStats *s, NevoPolicy *p) {
    if (s->count <= 0.0) return;
    for (int i = 0; i < s->dim; i++) {
        double mean = s->sum[i] / s->count;
        double var = s->sumsq[i] / s->count - mean * mean;
        p->obs_mean[i] = (float)mean;
        p->obs_std[i] = (float)sqrt(var > 1e-2 ? var : 1e-2);
    }
}
