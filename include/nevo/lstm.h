/* An LSTM layer: the forward over a batch of sequences that keeps a tape, its backward
 * through time, and a single step for inference.
 *
 * Parameters, one flat block of nevo_lstm_params(in, H) floats:
 *   Wx (in, 4H) row-major, then Wh (H, 4H), then b (4H),
 * each 4H row in gate order i, f, g, o (input, forget, cell candidate, output). Wx and Wh
 * together are one (in + H, 4H) matrix, so the block is a dense layer's (W then b, as
 * policy.h lays them out) over the input [x, h_prev]. One step, for each sequence:
 *   z = b + [x, h_prev] (Wx; Wh)          the sum in that order: b, then x's terms in
 *                                          ascending index, then h_prev's
 *   i = sigmoid(z_i), f = sigmoid(z_f), g = tanh(z_g), o = sigmoid(z_o)
 *   c = fmaf(f, c_prev, i g)               (i g rounded, then one fused multiply-add)
 *   h = o tanh(c)
 * with tanh = nevo_tanhf (src/nn/kernels.h: nevo's float tanh, the same bits on every
 * CPU) and sigmoid(z) = fmaf(0.5, tanh(z / 2), 0.5), so no libm exp enters. That
 * sigmoid's error is absolute, under 1e-7 (in the far negative tail the values are
 * multiples of 3e-8, and 0 from z <= -18 on), which is what a gate needs: it multiplies
 * values of order 1.
 *
 * The gate sums go through the forward dense kernels, and the backward's matrix
 * products are dense sums too (a term whose input is exactly zero is skipped, as
 * kernels.h states), so every result is bit-identical across kernel sets, and a
 * sequence's outputs and input gradients do not depend on B or on its place in the batch.
 *
 * Shapes: T steps, B sequences; x (T, B, in), h (T, B, H), the state (B, H) each for h
 * and c. A reset mask (T, B) (uint8, nonzero: the state is zeroed before step t for that
 * sequence, i.e. an episode starts there) carries one state across episode boundaries
 * in a batch; the backward cuts the gradient there (nothing flows from step t into step
 * t - 1 or the initial state where reset[t]).
 *
 * Gradients follow grad.h: the backward ADDS dL/dtheta into grad, and overwrites the
 * input gradients (dx, dh0, dc0). The call's dL/dtheta is summed from +0 (each element
 * one chain of fused multiply-adds over the T B rows in ascending (t, b) order, zero
 * inputs skipped) and then added to grad, one rounding per element. */
#ifndef NEVO_LSTM_H
#define NEVO_LSTM_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/rng.h"

/* Floats of one layer's parameters: (in + H) 4H + 4H. */
size_t nevo_lstm_params(int in, int H);

/* Fills params (nevo_lstm_params(in, H)) from (in + H) 4H standard normals: the weights
 * are normals / sqrt(in + H) (each gate unit's fan-in, as the policies' "scaled" init),
 * the biases 0 but the forget gate's, 1 (so the cell keeps its state at first: Jozefowicz
 * et al. 2015). normals may be a noise-table slice (nevo_noise_slice with NEVO_RNG_INIT)
 * or params itself (scaled in place). */
void nevo_lstm_init(int in, int H, const float *normals, float *params);
/* The same from the stream rng: its next (in + H) 4H normals (nevo_rng_fill_normal). */
void nevo_lstm_init_rng(int in, int H, NevoRng *rng, float *params);

/* Floats of tape for T steps of B sequences: what the backward needs (the initial cell
 * state, the reset mask, each step's input [x, h_prev], gates, c and tanh(c)) and the
 * forward's work space. It holds the inputs, hence `in`. */
size_t nevo_lstm_tape_floats(int in, int H, int T, int B);

/* The forward over T steps of B sequences, one network (params). x (T, B, in); reset
 * (T, B) or NULL (no resets); h0, c0 (B, H) the initial state, either NULL for zeros.
 * Writes h (T, B, H), the final state hT, cT (B, H) each (either may be NULL) and the
 * tape (nevo_lstm_tape_floats(in, H, T, B)), which the backward reads. T, B, in, H >= 1. */
void nevo_lstm_forward(const float *params, int in, int H, int T, int B, const float *x, const uint8_t *reset,
                       const float *h0, const float *c0, float *h, float *hT, float *cT, float *tape);

/* Floats of scratch nevo_lstm_backward needs. */
size_t nevo_lstm_backward_scratch_floats(int in, int H, int T, int B);

/* Backward through time of the forward that filled tape (the same params and shapes).
 * dh (T, B, H): dL/dh of each output, or NULL for zeros; dhT, dcT (B, H): dL/d of the
 * final state, either NULL for zeros. ADDS dL/dtheta into grad (nevo_lstm_params(in, H),
 * the parameters' layout). Writes dx (T, B, in) and dh0, dc0 (B, H) = dL/d(the initial
 * state), each NULL to skip it (where reset[0], that sequence's are 0). scratch:
 * nevo_lstm_backward_scratch_floats(in, H, T, B). */
void nevo_lstm_backward(const float *params, int in, int H, int T, int B, const float *tape, const float *dh,
                        const float *dhT, const float *dcT, float *grad, float *dx, float *dh0, float *dc0,
                        float *scratch);

/* Floats of scratch nevo_lstm_step needs for B sequences. */
size_t nevo_lstm_step_scratch_floats(int in, int H, int B);

/* One step for inference, no tape: x (B, in); reset (B) or NULL, as one step of the
 * forward's mask; the state h, c (B, H) each, read and overwritten. Row b runs network
 * net[b], whose parameters are at params + net[b] stride (net NULL: every row runs
 * params), as nevo_policy_forward's rows. Row b's new state has the bits of step t of
 * nevo_lstm_forward for the same network, input and state, whatever B, the other rows
 * or their networks. scratch: nevo_lstm_step_scratch_floats(in, H, B). */
void nevo_lstm_step(const float *params, size_t stride, const int *net, int in, int H, int B, const float *x,
                    const uint8_t *reset, float *h, float *c, float *scratch);

/* FLOPs (multiply-adds as 2) of the forward's and the backward's matrix products for
 * one step of one sequence, for throughput figures (the gates' elementwise work aside). */
double nevo_lstm_forward_flops(int in, int H);
double nevo_lstm_backward_flops(int in, int H);

#endif
