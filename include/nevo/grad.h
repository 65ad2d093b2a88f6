/* Gradients of nevo's networks: a forward that keeps what the backward needs (the
 * "tape"), the backward of each layer, the output heads and the losses.
 *
 * Layout as nevo_policy_forward's: rows of observations, each row through its own
 * network where a population is batched (net[i] names row i's parameter row), weights
 * as policy.h lays them out (dense W (in, out) row-major then b; conv W (k, k, in_c,
 * out_c) then b, HWC images). Shapes in the comments are (rows, features).
 *
 * Every backward ADDS into its gradient outputs (dW, db, grad), so gradients of several
 * batches or outputs accumulate; dX outputs are overwritten. Sums over rows run in
 * ascending row order and every kernel set gives the same bits (as kernels.h's rule for
 * the forward), so a gradient does not depend on the CPU or on the thread count of the
 * caller that splits a batch into fixed shards. */
#ifndef NEVO_GRAD_H
#define NEVO_GRAD_H

#include <stddef.h>

#include "nevo/policy.h"

/* ---- layers ---------------------------------------------------------------------- */

/* Dense Y (B, out) = X (B, in) W (in, out) + b. Backward:
 * dW (in, out) += X^T dY, db (out) += sum over rows of dY, dX (B, in) = dY W^T (dX may be
 * NULL: the first layer needs no input gradient). */
void nevo_dense_backward(const float *W, const float *X, const float *dY, int B, int in, int out, float *dW,
                         float *db, float *dX);

/* "Valid" convolution of one HWC image (layer L's shapes, stride L->stride) backward:
 * dW (k, k, in_c, out_c) += each window times dy, db (out_c) += dy summed over pixels,
 * dx (in_h, in_w, in_c) = the windows' weights times dy, added up (dx may be NULL). */
void nevo_conv_backward(const NevoLayer *L, const float *W, const float *x, const float *dy, float *dW, float *db,
                        float *dx);

/* dy (n) *= act'(at y), from the activation's OUTPUT y: tanh 1 - y^2, relu y > 0. */
void nevo_act_backward(NevoActivation act, const float *y, float *dy, int n);

/* ---- the whole network ----------------------------------------------------------- */

/* Floats of tape for n rows: every layer's output after its activation. */
size_t nevo_grad_tape_floats(const NevoPolicy *p, int n);
/* Floats of scratch nevo_policy_backward needs for n rows. */
size_t nevo_grad_scratch_floats(const NevoPolicy *p, int n);

/* nevo_policy_forward (same arguments, the same bits in out) that also fills tape
 * (nevo_grad_tape_floats(p, n)). Observations are normalised as there. */
void nevo_policy_forward_tape(const NevoPolicy *p, const float *params, size_t stride, const int *net,
                              const float *obs, int n, float *out, float *tape);

/* Backward of the forward that filled tape: dout (n, n_out) = dL/d(outputs). Adds row
 * i's dL/dtheta into grads + net[i] * gstride (nparams floats per network; rows of one
 * network add up in row order). dobs (n, obs_dim): dL/d(observations) as given (through
 * the normalisation), or NULL. scratch: nevo_grad_scratch_floats(p, n). */
void nevo_policy_backward(const NevoPolicy *p, const float *params, size_t stride, const int *net, const float *obs,
                          int n, const float *tape, const float *dout, float *grads, size_t gstride, float *dobs,
                          float *scratch);

/* ---- output heads and losses ----------------------------------------------------- */

/* Row-wise softmax and log-softmax of x (B, C) into y (max subtracted first). */
void nevo_softmax(const float *x, int B, int C, float *y);
void nevo_log_softmax(const float *x, int B, int C, float *y);
/* Backward of y = log_softmax(x): dx = dy - softmax(x) * sum(dy), row-wise (dx may be dy). */
void nevo_log_softmax_backward(const float *y, const float *dy, int B, int C, float *dx);

/* Cross-entropy of logits (B, C) against labels (B) in [0, C): returns the mean over
 * rows of -log softmax(logits)[label] (in double), and writes dlogits (B, C) = the
 * gradient of that mean, (softmax - onehot) / B, when dlogits is not NULL. */
double nevo_cross_entropy(const float *logits, const int *labels, int B, int C, float *dlogits);

/* Mean over the n elements of 0.5 (y - t)^2; dy (n) = its gradient (y - t) / n (or NULL). */
double nevo_mse_loss(const float *y, const float *t, size_t n, float *dy);
/* Mean over n elements of Huber(y - t; delta): 0.5 d^2 where |d| <= delta, else
 * delta (|d| - 0.5 delta); dy = its gradient (clip(d, +-delta) / n) or NULL. */
double nevo_huber_loss(const float *y, const float *t, size_t n, float delta, float *dy);

/* The continuous head: a = low + (tanh(o) + 1) (high - low) / 2, as nevo_policy_actions
 * squashes outputs; its backward do (n, action_dim) = da * (1 - tanh(o)^2) (high - low) / 2
 * from the outputs o (n, n_out). */
void nevo_squash_backward(const NevoPolicy *p, const float *out, const float *dact, int n, float *dout);

#endif
