/* Safe mutations: the scale factors of SM-G-SUM, SM-G-ABS and SM-G-SO from the output
 * gradients of a parent on its states, and SM-R's line search (smg.h states the
 * definitions). Gradients come from grad.h's tape and backward; SO's Jacobian-vector
 * products from a forward-mode pass written here, in double over the tape. A recurrent
 * policy's states are one sequence (reset where an episode starts): the forward is its
 * feed-forward parts' tape forwards around nevo_lstm_forward, the backward theirs
 * around nevo_lstm_backward (seq_forward, seq_backward); SO's forward mode runs the
 * parts' tangents around the LSTM cell's, recomputed in double (lstm_tangents). */
#include "algo/smg.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/grad.h"
#include "nevo/lstm.h"
#include "nevo/params.h"
#include "nevo/tasks.h"

/* Per-state gradients of SM-G-ABS are taken this many floats at a time at most: a
 * chunk of states whose gradients fit (16 MiB), each chunk one backward per output. */
#define ABS_CHUNK_FLOATS ((size_t)1 << 22)

struct NevoSmWork {
    const NevoPolicy *p;
    int cap;            /* states */
    int chunk;          /* SM-G-ABS: states per backward */
    int *zeros;         /* (cap) every row through network 0 */
    int *rows;          /* (cap) row i through "network" i: per-row gradients */
    float *out, *out2;  /* (cap, n_out) */
    float *dout;        /* (cap, n_out) */
    float *tape;        /* nevo_grad_tape_floats(p, cap) */
    float *gscratch;    /* nevo_grad_scratch_floats(p, cap) */
    float *fscratch;    /* nevo_policy_scratch_floats(p, cap) */
    float *g;           /* (nparams) a gradient */
    float *grows;       /* (chunk, nparams) SM-G-ABS: per-state gradients */
    float *theta2;      /* (nparams) SM-R: a candidate */
    double *acc, *acc2; /* (nparams) sums */
    double *da, *db;    /* (max_width) SO's forward-mode tangents */
    double *jv;         /* (cap, n_out) SO: J_t u */
    /* recurrent policies: the sequence's forward and backward */
    float *xn;          /* (cap, obs_dim) the observations normalised */
    float *a;           /* (cap, in) the LSTM's inputs: pre's outputs */
    float *h, *dh;      /* (cap, H) the LSTM's outputs and dL/dh */
    float *dx;          /* (cap, in) dL/d(the LSTM's inputs) */
    float *pre_tape, *post_tape, *lstm_tape;
    float *lscratch;    /* nevo_lstm_backward's */
    double *ta, *th;    /* SO: (cap, in), (cap, H) tangents of the LSTM's inputs and of h */
    double *lst;        /* SO: (6 H + 8 H) the LSTM's state, its tangents and the gates' */
};

int nevo_sm_mode(const char *name) {
    static const char *const names[] = {"plain", "sm-g-sum", "sm-g-abs", "sm-g-so", "sm-r"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

NevoSmWork *nevo_sm_work_new(const NevoPolicy *p, int max_states) {
    NEVO_ASSERT(max_states >= 1);
    NevoSmWork *w = nevo_alloc(sizeof *w);
    size_t np = p->nparams, n = (size_t)max_states, O = (size_t)p->n_out;
    w->p = p;
    w->cap = max_states;
    size_t chunk = ABS_CHUNK_FLOATS / np;
    w->chunk = chunk < 1 ? 1 : chunk > n ? max_states : (int)chunk;
    w->zeros = nevo_alloc(sizeof(int) * n);
    w->rows = nevo_alloc(sizeof(int) * n);
    for (int i = 0; i < max_states; i++) w->rows[i] = i;
    w->out = nevo_alloc_aligned(sizeof(float) * n * O);
    w->out2 = nevo_alloc_aligned(sizeof(float) * n * O);
    w->dout = nevo_alloc_aligned(sizeof(float) * n * O);
    if (p->lstm_layer >= 0) {
        const NevoLayer *R = &p->layers[p->lstm_layer];
        int in = R->in_dim, H = R->out_dim;
        w->xn = nevo_alloc_aligned(sizeof(float) * n * (size_t)p->obs_dim);
        w->a = nevo_alloc_aligned(sizeof(float) * n * (size_t)in);
        w->dx = nevo_alloc_aligned(sizeof(float) * n * (size_t)in);
        w->h = nevo_alloc_aligned(sizeof(float) * n * (size_t)H);
        w->dh = nevo_alloc_aligned(sizeof(float) * n * (size_t)H);
        if (p->pre) w->pre_tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p->pre, max_states));
        w->post_tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p->post, max_states));
        w->lstm_tape = nevo_alloc_aligned(sizeof(float) * nevo_lstm_tape_floats(in, H, max_states, 1));
        w->lscratch = nevo_alloc_aligned(sizeof(float) * nevo_lstm_backward_scratch_floats(in, H, max_states, 1));
        w->ta = nevo_alloc(sizeof(double) * n * (size_t)in);
        w->th = nevo_alloc(sizeof(double) * n * (size_t)H);
        w->lst = nevo_alloc(sizeof(double) * 14 * (size_t)H);
        /* the parts' scratch: the whole policy's widest layer and conv weights cover both */
        w->gscratch = nevo_alloc_aligned(sizeof(float) * nevo_grad_scratch_floats(p, max_states));
    } else {
        w->tape = nevo_alloc_aligned(sizeof(float) * nevo_grad_tape_floats(p, max_states));
        w->gscratch = nevo_alloc_aligned(sizeof(float) * nevo_grad_scratch_floats(p, max_states));
    }
    w->fscratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, max_states));
    w->g = nevo_alloc_aligned(sizeof(float) * np);
    w->theta2 = nevo_alloc_aligned(sizeof(float) * np);
    w->acc = nevo_alloc(sizeof(double) * np);
    w->acc2 = nevo_alloc(sizeof(double) * np);
    size_t width = (size_t)p->max_width;
    w->da = nevo_alloc(sizeof(double) * width);
    w->db = nevo_alloc(sizeof(double) * width);
    w->jv = nevo_alloc(sizeof(double) * n * O);
    return w;
}

void nevo_sm_work_free(NevoSmWork *w) {
    if (!w) return;
    free(w->zeros);
    free(w->rows);
    free(w->out);
    free(w->out2);
    free(w->dout);
    free(w->tape);
    free(w->gscratch);
    free(w->fscratch);
    free(w->g);
    free(w->grows);
    free(w->theta2);
    free(w->acc);
    free(w->acc2);
    free(w->da);
    free(w->db);
    free(w->jv);
    free(w->xn);
    free(w->a);
    free(w->dx);
    free(w->h);
    free(w->dh);
    free(w->pre_tape);
    free(w->post_tape);
    free(w->lstm_tape);
    free(w->lscratch);
    free(w->ta);
    free(w->th);
    free(w->lst);
    free(w);
}

/* A sensitivity as the divisor of a step (smg.h): at least the floor, 1 where it is 0,
 * FLT_MAX (no step) where it is not finite. */
static float divisor(double s) {
    if (!isfinite(s)) return FLT_MAX;
    if (s == 0.0) return 1.0f;
    return s < NEVO_SM_SCALE_FLOOR ? (float)NEVO_SM_SCALE_FLOOR : (float)s;
}

/* dout (n, n_out) = 1 in column k of every row, 0 elsewhere. */
static void unit_column(float *dout, int n, int n_out, int k) {
    memset(dout, 0, sizeof(float) * (size_t)n * (size_t)n_out);
    for (int t = 0; t < n; t++) dout[(size_t)t * n_out + k] = 1.0f;
}

/* --- recurrent policies: one sequence ---------------------------------------------- */

/* The inputs of the first layer: X, or X normalised into w->xn. */
static const float *seq_inputs(NevoSmWork *w, const float *X, int n) {
    if (!w->p->obs_norm) return X;
    nevo_policy_normalise_obs(w->p, X, n, w->xn);
    return w->xn;
}

/* out (n, n_out): the outputs at each step of the sequence X (n, obs_dim) from a zero
 * state, the state zeroed again where starts[t]; fills the tapes seq_backward reads. */
static void seq_forward(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n, float *out) {
    const NevoPolicy *p = w->p;
    const NevoLayer *R = &p->layers[p->lstm_layer];
    size_t np = p->nparams;
    const float *x = seq_inputs(w, X, n);
    if (p->pre) {
        nevo_policy_forward_tape(p->pre, theta, np, w->zeros, x, n, w->a, w->pre_tape);
        x = w->a;
    }
    nevo_lstm_forward(theta + R->w_off, R->in_dim, R->out_dim, n, 1, x, starts, NULL, NULL, w->h, NULL, NULL,
                      w->lstm_tape);
    nevo_policy_forward_tape(p->post, theta, np, w->zeros, w->h, n, out, w->post_tape);
}

/* Adds into g (nparams) dL/dtheta of the last seq_forward (same theta, X, n) for dout
 * (n, n_out) = dL/d(outputs): post's backward gives dL/dh, the LSTM's backward through
 * time dL/d(its inputs), through pre's last activation into pre's backward. */
static void seq_backward(NevoSmWork *w, const float *theta, const float *X, int n, const float *dout, float *g) {
    const NevoPolicy *p = w->p;
    const NevoLayer *R = &p->layers[p->lstm_layer];
    size_t np = p->nparams;
    int in = R->in_dim;
    nevo_policy_backward(p->post, theta, np, w->zeros, w->h, n, w->post_tape, dout, g, np, w->dh, w->gscratch);
    nevo_lstm_backward(theta + R->w_off, in, R->out_dim, n, 1, w->lstm_tape, w->dh, NULL, NULL, g + R->w_off,
                       p->pre ? w->dx : NULL, NULL, NULL, w->lscratch);
    if (!p->pre) return;
    nevo_act_backward(p->pre->layers[p->pre->n_layers - 1].act, w->a, w->dx, n * in);
    const float *x = p->obs_norm ? w->xn : X;
    nevo_policy_backward(p->pre, theta, np, w->zeros, x, n, w->pre_tape, w->dx, g, np, NULL, w->gscratch);
}

/* The outputs (n, n_out) of theta on the states: a recurrent policy's over the
 * sequence, a feed-forward one's state by state. */
static void outputs(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n, float *out) {
    if (w->p->lstm_layer >= 0)
        seq_forward(w, theta, X, starts, n, out);
    else
        nevo_policy_forward(w->p, theta, w->p->nparams, w->zeros, X, n, out, w->fscratch);
}

/* SM-G-SUM: one backward per output k over all states (their gradients add up in the
 * backward, in state order), acc += (sum_t dy_k/dtheta)^2. */
static void scale_sum(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n) {
    const NevoPolicy *p = w->p;
    size_t np = p->nparams;
    int rec = p->lstm_layer >= 0;
    if (rec)
        seq_forward(w, theta, X, starts, n, w->out);
    else
        nevo_policy_forward_tape(p, theta, np, w->zeros, X, n, w->out, w->tape);
    for (int k = 0; k < p->n_out; k++) {
        unit_column(w->dout, n, p->n_out, k);
        memset(w->g, 0, sizeof(float) * np);
        if (rec)
            seq_backward(w, theta, X, n, w->dout, w->g);
        else
            nevo_policy_backward(p, theta, np, w->zeros, X, n, w->tape, w->dout, w->g, np, NULL, w->gscratch);
        for (size_t i = 0; i < np; i++) w->acc[i] += (double)w->g[i] * w->g[i];
    }
}

/* SM-G-ABS: per-state gradients (row t through its own "network" t, every one reading
 * theta: stride 0), a chunk of states at a time; acc += (mean_t |dy_k/dtheta|)^2. */
static void scale_abs(NevoSmWork *w, const float *theta, const float *X, int n) {
    const NevoPolicy *p = w->p;
    size_t np = p->nparams;
    if (!w->grows) w->grows = nevo_alloc_aligned(sizeof(float) * np * (size_t)w->chunk);
    int one_chunk = n <= w->chunk;
    /* the tape holds each row's activations whatever network names it: the forward
     * takes the rows as one network's (one pass over the weights), the backward each as
     * its own */
    if (one_chunk) nevo_policy_forward_tape(p, theta, np, w->zeros, X, n, w->out, w->tape);
    for (int k = 0; k < p->n_out; k++) {
        memset(w->acc2, 0, sizeof(double) * np);
        for (int t0 = 0; t0 < n; t0 += w->chunk) {
            int m = n - t0 < w->chunk ? n - t0 : w->chunk;
            const float *x = X + (size_t)t0 * p->obs_dim;
            if (!one_chunk) nevo_policy_forward_tape(p, theta, np, w->zeros, x, m, w->out, w->tape);
            unit_column(w->dout, m, p->n_out, k);
            memset(w->grows, 0, sizeof(float) * np * (size_t)m);
            nevo_policy_backward(p, theta, 0, w->rows, x, m, w->tape, w->dout, w->grows, np, NULL, w->gscratch);
            for (int t = 0; t < m; t++) {
                const float *gt = w->grows + (size_t)t * np;
                for (size_t i = 0; i < np; i++) w->acc2[i] += fabs((double)gt[i]);
            }
        }
        for (size_t i = 0; i < np; i++) {
            double mean = w->acc2[i] / n;
            w->acc[i] += mean * mean;
        }
    }
}

/* SM-G-ABS on a recurrent policy: the output at step t of an episode depends on its
 * steps from the episode's start to t, so its gradient is one backward through time
 * over that prefix (the prefix's forward again first, from a zero state: the tapes hold
 * one sequence). Per output k, acc2 += |dy_k(t)/dtheta| over every t, then acc +=
 * (acc2 / n)^2. An episode of T steps costs T (T + 1) / 2 steps of forward and as many
 * of backward per output. */
static void scale_abs_seq(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n) {
    const NevoPolicy *p = w->p;
    size_t np = p->nparams;
    int O = p->n_out;
    for (int k = 0; k < O; k++) {
        memset(w->acc2, 0, sizeof(double) * np);
        for (int s0 = 0; s0 < n;) {
            int s1 = s0 + 1;
            while (s1 < n && !(starts && starts[s1])) s1++;
            const float *x = X + (size_t)s0 * p->obs_dim;
            for (int t = s0; t < s1; t++) {
                int m = t - s0 + 1; /* the prefix's steps */
                seq_forward(w, theta, x, NULL, m, w->out);
                memset(w->dout, 0, sizeof(float) * (size_t)m * O);
                w->dout[(size_t)(m - 1) * O + k] = 1.0f;
                memset(w->g, 0, sizeof(float) * np);
                seq_backward(w, theta, x, m, w->dout, w->g);
                for (size_t i = 0; i < np; i++) w->acc2[i] += fabs((double)w->g[i]);
            }
            s0 = s1;
        }
        for (size_t i = 0; i < np; i++) {
            double mean = w->acc2[i] / n;
            w->acc[i] += mean * mean;
        }
    }
}

void nevo_sm_scale(NevoSmWork *w, NevoSafeMutation mode, const float *theta, const float *X, const uint8_t *starts,
                   int n, float *scale) {
    NEVO_ASSERT(n >= 1 && n <= w->cap && (mode == NEVO_SM_G_SUM || mode == NEVO_SM_G_ABS));
    size_t np = w->p->nparams;
    memset(w->acc, 0, sizeof(double) * np);
    if (mode == NEVO_SM_G_SUM)
        scale_sum(w, theta, X, starts, n);
    else if (w->p->lstm_layer >= 0)
        scale_abs_seq(w, theta, X, starts, n);
    else
        scale_abs(w, theta, X, n);
    for (size_t i = 0; i < np; i++) scale[i] = divisor(sqrt(w->acc[i]));
}

/* --- SM-G-SO ------------------------------------------------------------------------ */

/* J u at every row t of a feed-forward part q (the whole policy, or a recurrent one's
 * pre or post) into jv (n, q->n_out): the derivative of each layer's outputs along the
 * unit direction u = eps * inv_norm, carried forward in double through the activations
 * the part's tape holds (forward mode: d(x W + b) = dx W + x dW + db, then times the
 * activation's slope at its output), from xin (n, q->obs_dim), the part's inputs, whose
 * own tangents are dxin (n, q->obs_dim), NULL for 0 (observations do not depend on theta).
 * It only shapes the step: no result needs its bits to match anything else. */
static void tangents(NevoSmWork *w, const NevoPolicy *q, const float *tape, const float *theta, const float *eps,
                     double inv_norm, const float *xin, const double *dxin, int n, double *jv) {
    for (int t = 0; t < n; t++) {
        double *da = w->da, *db = w->db;
        for (int i = 0; i < q->obs_dim; i++) da[i] = dxin ? dxin[(size_t)t * q->obs_dim + i] : 0.0;
        for (int l = 0; l < q->n_layers; l++) {
            const NevoLayer *L = &q->layers[l];
            const float *x = l == 0 ? xin + (size_t)t * q->obs_dim
                                    : tape + nevo_grad_tape_offset(q, n, l - 1) + (size_t)t * L->in_dim;
            const float *y = tape + nevo_grad_tape_offset(q, n, l) + (size_t)t * L->out_dim;
            const float *W = theta + L->w_off, *uW = eps + L->w_off, *ub = eps + L->b_off;
            if (L->kind == NEVO_LAYER_DENSE) {
                int in = L->in_dim, out = L->out_dim;
                for (int o = 0; o < out; o++) db[o] = inv_norm * ub[o];
                for (int i = 0; i < in; i++) {
                    double dxi = da[i], xu = x[i] * inv_norm;
                    const float *wr = W + (size_t)i * out, *ur = uW + (size_t)i * out;
                    for (int o = 0; o < out; o++) db[o] += dxi * wr[o] + xu * ur[o];
                }
            } else {
                int K = L->kernel, S = L->stride, C = L->in_c, F = L->out_c;
                for (int oy = 0; oy < L->out_h; oy++)
                    for (int ox = 0; ox < L->out_w; ox++) {
                        double *d = db + ((size_t)oy * L->out_w + ox) * F;
                        for (int f = 0; f < F; f++) d[f] = inv_norm * ub[f];
                        for (int ky = 0; ky < K; ky++)
                            for (int kx = 0; kx < K; kx++) {
                                size_t xi = ((size_t)(oy * S + ky) * L->in_w + (size_t)(ox * S + kx)) * C;
                                size_t wi = ((size_t)(ky * K + kx) * C) * F;
                                for (int c = 0; c < C; c++) {
                                    double dxv = da[xi + c], xu = x[xi + c] * inv_norm;
                                    const float *wr = W + wi + (size_t)c * F, *ur = uW + wi + (size_t)c * F;
                                    for (int f = 0; f < F; f++) d[f] += dxv * wr[f] + xu * ur[f];
                                }
                            }
                    }
            }
            for (int o = 0; o < L->out_dim; o++) {
                if (L->act == NEVO_ACT_TANH)
                    db[o] *= 1.0 - (double)y[o] * y[o];
                else if (L->act == NEVO_ACT_RELU && !(y[o] > 0.0f))
                    db[o] = 0.0;
            }
            double *tmp = da;
            da = db;
            db = tmp;
        }
        for (int k = 0; k < q->n_out; k++) jv[(size_t)t * q->n_out + k] = da[k];
    }
}

/* The LSTM's part of J u on a recurrent policy's sequence (seq_forward's, just run):
 * from the tangents of its inputs w->ta (NULL where there is no pre: the observations'
 * are 0) those of h into w->th, through the cell in double (lstm.h's step, recomputed
 * from w->a or the inputs, the state zeroed where an episode starts, its tangents too):
 *   dz = db + [dx, dh_prev] (Wx; Wh) + [x, h_prev] (dWx; dWh)
 *   dc = df c_prev + f dc_prev + di g + i dg,  dh = do tanh(c) + o (1 - tanh(c)^2) dc
 * with each gate's tangent its slope times dz. */
static void lstm_tangents(NevoSmWork *w, const float *theta, const float *eps, double inv_norm, const float *x,
                          const double *dx, const uint8_t *starts, int n) {
    const NevoLayer *R = &w->p->layers[w->p->lstm_layer];
    int in = R->in_dim, H = R->out_dim, G = 4 * H;
    const float *Wx = theta + R->w_off, *Wh = Wx + (size_t)in * G, *b = theta + R->b_off;
    const float *uWx = eps + R->w_off, *uWh = uWx + (size_t)in * G, *ub = eps + R->b_off;
    double *h = w->lst, *c = h + H, *dh = c + H, *dc = dh + H, *nh = dc + H, *ndh = nh + H, *z = ndh + H, *dz = z + G;
    for (int t = 0; t < n; t++) {
        if (t == 0 || (starts && starts[t]))
            for (int j = 0; j < 4 * H; j++) h[j] = 0.0; /* h, c, dh, dc */
        const float *xt = x + (size_t)t * in;
        const double *dxt = dx ? dx + (size_t)t * in : NULL;
        for (int j = 0; j < G; j++) z[j] = b[j], dz[j] = inv_norm * ub[j];
        for (int i = 0; i < in + H; i++) {
            double v = i < in ? xt[i] : h[i - in], dv = i < in ? (dxt ? dxt[i] : 0.0) : dh[i - in];
            const float *wr = i < in ? Wx + (size_t)i * G : Wh + (size_t)(i - in) * G;
            const float *ur = i < in ? uWx + (size_t)i * G : uWh + (size_t)(i - in) * G;
            double vu = v * inv_norm;
            for (int j = 0; j < G; j++) {
                z[j] += v * wr[j];
                dz[j] += dv * wr[j] + vu * ur[j];
            }
        }
        for (int j = 0; j < H; j++) {
            double ig = 0.5 + 0.5 * tanh(0.5 * z[j]), fg = 0.5 + 0.5 * tanh(0.5 * z[H + j]), gg = tanh(z[2 * H + j]),
                   og = 0.5 + 0.5 * tanh(0.5 * z[3 * H + j]);
            double di = ig * (1 - ig) * dz[j], df = fg * (1 - fg) * dz[H + j], dg = (1 - gg * gg) * dz[2 * H + j],
                   dog = og * (1 - og) * dz[3 * H + j];
            double cn = fg * c[j] + ig * gg, dcn = df * c[j] + fg * dc[j] + di * gg + ig * dg, tc = tanh(cn);
            nh[j] = og * tc;
            ndh[j] = dog * tc + og * (1 - tc * tc) * dcn;
            c[j] = cn;
            dc[j] = dcn;
        }
        for (int j = 0; j < H; j++) {
            h[j] = nh[j];
            dh[j] = ndh[j];
            w->th[(size_t)t * H + j] = ndh[j];
        }
    }
}

void nevo_sm_scale_so(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n,
                      const float *eps, float *scale) {
    const NevoPolicy *p = w->p;
    NEVO_ASSERT(n >= 1 && n <= w->cap);
    size_t np = p->nparams;
    int O = p->n_out;
    double norm = 0.0;
    for (size_t i = 0; i < np; i++) norm += (double)eps[i] * eps[i];
    double inv_norm = norm > 0.0 ? 1.0 / sqrt(norm) : 0.0;
    if (p->lstm_layer >= 0) {
        /* the sequence's forward, then J u part by part: pre's, the LSTM's through
         * time, post's (from h and its tangents) */
        seq_forward(w, theta, X, starts, n, w->out);
        const float *x = p->obs_norm ? w->xn : X;
        if (p->pre) tangents(w, p->pre, w->pre_tape, theta, eps, inv_norm, x, NULL, n, w->ta);
        lstm_tangents(w, theta, eps, inv_norm, p->pre ? w->a : x, p->pre ? w->ta : NULL, starts, n);
        tangents(w, p->post, w->post_tape, theta, eps, inv_norm, w->h, w->th, n, w->jv);
    } else {
        nevo_policy_forward_tape(p, theta, np, w->zeros, X, n, w->out, w->tape);
        const float *xn = p->obs_norm ? w->tape + nevo_grad_tape_offset(p, n, p->n_layers) : X;
        tangents(w, p, w->tape, theta, eps, inv_norm, xn, NULL, n, w->jv);
    }
    /* dL/dy_t = 2 / n (y_t' - y_t), so H u = J^T (2 / n J u): one backward of dout = 2 / n J_t u */
    for (size_t i = 0; i < (size_t)n * O; i++) w->dout[i] = (float)(2.0 / n * w->jv[i]);
    memset(w->g, 0, sizeof(float) * np);
    if (p->lstm_layer >= 0)
        seq_backward(w, theta, X, n, w->dout, w->g);
    else
        nevo_policy_backward(p, theta, np, w->zeros, X, n, w->tape, w->dout, w->g, np, NULL, w->gscratch);
    for (size_t i = 0; i < np; i++) scale[i] = divisor(sqrt(fabs((double)w->g[i])));
}

/* --- SM-R --------------------------------------------------------------------------- */

/* Mean over states and outputs of (out2 - out)^2. */
static double mean_sq_change(const float *out, const float *out2, size_t m) {
    double s = 0.0;
    for (size_t i = 0; i < m; i++) {
        double d = (double)out2[i] - out[i];
        s += d * d;
    }
    return s / (double)m;
}

double nevo_sm_divergence(NevoSmWork *w, const float *theta, const float *theta2, const float *X,
                          const uint8_t *starts, int n) {
    const NevoPolicy *p = w->p;
    NEVO_ASSERT(n >= 1 && n <= w->cap);
    outputs(w, theta, X, starts, n, w->out);
    outputs(w, theta2, X, starts, n, w->out2);
    return mean_sq_change(w->out, w->out2, (size_t)n * (size_t)p->n_out);
}

/* The divergence of theta + sigma eps from theta, whose outputs are in w->out. */
static double divergence_at(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n,
                            const float *eps, float sigma) {
    const NevoPolicy *p = w->p;
    nevo_perturb_rows(w->theta2, NULL, theta, sigma, eps, p->nparams, 0);
    outputs(w, w->theta2, X, starts, n, w->out2);
    double d = mean_sq_change(w->out, w->out2, (size_t)n * (size_t)p->n_out);
    return isnan(d) ? INFINITY : d; /* an output that overflowed changed too much */
}

float nevo_sm_r_sigma(NevoSmWork *w, const float *theta, const float *X, const uint8_t *starts, int n,
                      const float *eps, double target, double *divergence) {
    const NevoPolicy *p = w->p;
    NEVO_ASSERT(n >= 1 && n <= w->cap && target > 0.0);
    outputs(w, theta, X, starts, n, w->out);
    float top = 0.0f;
    for (size_t i = 0; i < p->nparams; i++)
        if (fabsf(eps[i]) > top) top = fabsf(eps[i]);
    /* the largest step: no weight moves by more than the clip of the scaled recipes */
    float hi = top > 0.0f ? NEVO_SCALED_CLIP / top : 1.0f;
    double d_hi = divergence_at(w, theta, X, starts, n, eps, hi);
    if (d_hi < target) {
        if (divergence) *divergence = d_hi;
        return hi;
    }
    /* bracket: halve until the divergence falls below the target (D(0) = 0 < target) */
    float lo = hi * 0.5f;
    double d_lo = divergence_at(w, theta, X, starts, n, eps, lo);
    for (int i = 0; i < 126 && !(d_lo < target); i++) {
        hi = lo;
        d_hi = d_lo;
        lo = hi * 0.5f;
        d_lo = divergence_at(w, theta, X, starts, n, eps, lo);
    }
    /* bisect: D(lo) < target <= D(hi) */
    for (int i = 0; i < NEVO_SM_R_STEPS; i++) {
        float mid = lo + (hi - lo) * 0.5f;
        if (!(mid > lo && mid < hi)) break; /* adjacent floats */
        double d_mid = divergence_at(w, theta, X, starts, n, eps, mid);
        if (d_mid < target) {
            lo = mid;
            d_lo = d_mid;
        } else {
            hi = mid;
            d_hi = d_mid;
        }
    }
    int take_lo = fabs(d_lo - target) <= fabs(d_hi - target) && lo > 0.0f;
    if (divergence) *divergence = take_lo ? d_lo : d_hi;
    return take_lo ? lo : hi;
}
