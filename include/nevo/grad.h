/* Gradients of nevo's networks: a forward that keeps what the backward needs (the
 * "tape"), the backward of each layer, the output heads and the losses.
 *
 * Layout as nevo_policy_forward's: rows of observations, each row through its own
 * network where a population is batched (net[i] names row i's parameter row), weights
 * as policy.h lays them out (dense W (in, out) row-major then b; conv W (k, k, in_c,
 * out_c) then b, HWC images). Shapes in the comments are (rows, features).
 *
 * Every backward ADDS into its gradient outputs (dW, db, grad), so gradients of several
 * batches or outputs accumulate; dX outputs are overwritten. Each element is one chain
 * of fused multiply-adds in a fixed order (src/nn/grad.c states it): over rows in
 * ascending order, so a batch run in two calls gives the bits of one call, and a term
 * whose multiplier is exactly zero is skipped, as the forward skips zero inputs. Every
 * CPU and kernel set gives the same bits (as kernels.h's rule for the forward), so a
 * gradient does not depend on the CPU or on the thread count of the caller that splits
 * a batch into fixed shards. Gradient outputs must not overlap the inputs. */
#ifndef NEVO_GRAD_H
#define NEVO_GRAD_H

#include <stddef.h>

#include "nevo/policy.h"

/* ---- layers ---------------------------------------------------------------------- */

/* Dense Y (B, out) = X (B, in) W (in, out) + b, rows contiguous. Backward:
 * dW (in, out) += X^T dY, db (out) += sum over rows of dY, dX (B, in) = dY W^T (dX may be
 * NULL: the first layer needs no input gradient). Allocates nothing (about 70 KB of
 * stack). */
void nevo_dense_backward(const float *W, const float *X, const float *dY, int B, int in, int out, float *dW,
                         float *db, float *dX);

/* "Valid" convolution of one HWC image (layer L's shapes, stride L->stride) backward,
 * dy (out_h, out_w, out_c): dW (k, k, in_c, out_c) += each window times dy, db (out_c)
 * += dy summed over pixels, dx (in_h, in_w, in_c) = the windows' weights times dy, added
 * up (dx may be NULL). Rows of a batch: one call per row, in row order. */
void nevo_conv_backward(const NevoLayer *L, const float *W, const float *x, const float *dy, float *dW, float *db,
                        float *dx);

/* dy (n) *= act'(at y), from the activation's OUTPUT y: tanh 1 - y^2, relu 1 where
 * y > 0 else 0 (dy set to 0), none 1. */
void nevo_act_backward(NevoActivation act, const float *y, float *dy, int n);

/* ---- the whole network ----------------------------------------------------------- */

/* The tape of n rows: layer l's outputs after its activation (n, out_dim) at
 * nevo_grad_tape_offset(p, n, l), layer after layer (the last one's are the outputs),
 * then, where the policy normalises observations, the normalised ones (n, obs_dim) at
 * nevo_grad_tape_offset(p, n, p->n_layers), then a work area of the forward's. Floats
 * of tape for n rows: */
size_t nevo_grad_tape_floats(const NevoPolicy *p, int n);
/* Offset in floats of layer l's slab (0 <= l <= p->n_layers) in the tape of n rows. */
size_t nevo_grad_tape_offset(const NevoPolicy *p, int n, int l);
/* Floats of scratch nevo_policy_backward needs for n rows. */
size_t nevo_grad_scratch_floats(const NevoPolicy *p, int n);

/* nevo_policy_forward (same arguments, the same bits in out) that also fills tape
 * (nevo_grad_tape_floats(p, n)). Observations are normalised as there. Feed-forward
 * policies only (a recurrent one's parts, p->pre and p->post, are: lstm.h does the
 * LSTM between them). */
void nevo_policy_forward_tape(const NevoPolicy *p, const float *params, size_t stride, const int *net,
                              const float *obs, int n, float *out, float *tape);

/* Backward of the forward that filled tape (the same p, params, net, obs and n): dout
 * (n, n_out) = dL/d(outputs). Adds row i's dL/dtheta into grads + net[i] * gstride
 * (nparams floats per network; rows of one network add up in row order, the runs of
 * rows that share a network one after another). dobs (n, obs_dim), overwritten:
 * dL/d(observations) as given, through the normalisation (0 where the clip at +-5
 * holds the normalised value), or NULL. scratch: nevo_grad_scratch_floats(p, n).
 * Allocates nothing. */
void nevo_policy_backward(const NevoPolicy *p, const float *params, size_t stride, const int *net, const float *obs,
                          int n, const float *tape, const float *dout, float *grads, size_t gstride, float *dobs,
                          float *scratch);

/* ---- output heads and losses ----------------------------------------------------- */

/* Row-wise softmax and log-softmax of x (B, C) into y (max subtracted first). */
void nevo_softmax(const float *x, int B, int C, float *y);
void nevo_log_softmax(const float *x, int B, int C, float *y);
/* Backward of y = log_softmax(x): dx = dy - softmax(x) * sum(dy), row-wise (dx may be dy). */
void nevo_log_softmax_backward(const float *y, const float *dy, int B, int C, float *dx);

/* Cross-entropy of logits (B, C) against labels (B) in [0, C) (asserted): returns the
 * mean over rows of -log softmax(logits)[label] (in double), and writes dlogits (B, C) =
 * the gradient of that mean, (softmax - onehot) / B, when dlogits is not NULL (it may
 * be logits). The heads and losses compute in double and round once; large logits
 * (1e4) give no inf or NaN. */
double nevo_cross_entropy(const float *logits, const int *labels, int B, int C, float *dlogits);

/* The sum over rows (in row order, from 0) of the same -log softmax(logits)[label]. */
double nevo_cross_entropy_sum(const float *logits, const int *labels, int B, int C);

/* Mean over the n elements of 0.5 (y - t)^2; dy (n) = its gradient (y - t) / n (or NULL). */
double nevo_mse_loss(const float *y, const float *t, size_t n, float *dy);
/* Mean over n elements of Huber(y - t; delta): 0.5 d^2 where |d| <= delta, else
 * delta (|d| - 0.5 delta); dy = its gradient (clip(d, +-delta) / n) or NULL. */
double nevo_huber_loss(const float *y, const float *t, size_t n, float delta, float *dy);

/* The continuous head: a = low + (tanh(o) + 1) (high - low) / 2, as nevo_policy_actions
 * squashes outputs; its backward do (n, action_dim) = da * (1 - tanh(o)^2) (high - low) / 2
 * from the outputs o (n, n_out), da (n, action_dim). Continuous policies only (asserted). */
void nevo_squash_backward(const NevoPolicy *p, const float *out, const float *dact, int n, float *dout);

#endif
