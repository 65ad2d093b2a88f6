/* Policies: neural networks whose parameters are one flat float vector.
 *
 * A population is one contiguous (P, nparams) matrix; nevo_policy_forward evaluates
 * n observation rows, each through its *own* network (row i uses parameter row
 * net[i]), in one call. Layers: an optional conv stack (image observations, "valid"
 * padding, HWC layout), then dense hidden layers, then (policy.lstm > 0) one LSTM
 * layer, then a linear output layer.
 *
 * Parameter layout, layer by layer: dense W as (in, out) row-major then b (out); conv
 * W as (k, k, in_c, out_c) then b (out_c); LSTM as lstm.h lays it out (Wx, Wh, then b,
 * 4H each row, gates i, f, g, o).
 *
 * A recurrent policy (one with an LSTM layer) carries a state per row, (h, c): it runs
 * through nevo_policy_forward_state, which reads and updates that state; the caller
 * zeroes a row's state as its episode starts.
 *
 * Outputs to actions: discrete = argmax (first maximum) of the action outputs;
 * continuous = tanh scaled to the action bounds. A value head (policy.value_head) adds
 * one output after them, V(x), which acting ignores. Observation normalisation (ES): x' = clip((x - mean) / std, ±5),
 * with mean/std part of the policy. */
#ifndef NEVO_POLICY_H
#define NEVO_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/noise.h"
#include "nevo/status.h"

#define NEVO_POLICY_MAX_LAYERS (2 * NEVO_MAX_LAYERS + 2)

typedef enum NevoLayerKind { NEVO_LAYER_DENSE = 0, NEVO_LAYER_CONV = 1, NEVO_LAYER_LSTM = 2 } NevoLayerKind;
typedef enum NevoActivation { NEVO_ACT_TANH = 0, NEVO_ACT_RELU = 1, NEVO_ACT_NONE = 2 } NevoActivation;
typedef enum NevoInit { NEVO_INIT_SCALED = 0, NEVO_INIT_NORMC = 1 } NevoInit;

typedef struct NevoLayer {
    NevoLayerKind kind;
    NevoActivation act;
    int in_dim, out_dim;        /* flattened sizes */
    int in_h, in_w, in_c;       /* conv input (HWC) */
    int out_h, out_w, out_c;    /* conv output (HWC) */
    int kernel, stride;
    int fan_in;                 /* inputs per output unit (LSTM: in + H per gate unit) */
    size_t w_off, b_off;        /* offsets into the parameter vector (LSTM: Wx, and b) */
} NevoLayer;

typedef struct NevoPolicy {
    int obs_dim;
    NevoSpaceKind action_kind;
    int n_out;                  /* outputs: n_act, and V(x) after them with policy.value_head */
    int n_act;                  /* the action outputs: discrete n_actions (logits); box action_dim */
    int action_dim;
    float action_low[NEVO_ENV_MAX_ACT_DIM], action_high[NEVO_ENV_MAX_ACT_DIM];
    NevoInit init;
    int n_layers;
    NevoLayer layers[NEVO_POLICY_MAX_LAYERS];
    size_t nparams;
    int max_width;              /* widest activation, for scratch sizing */
    int obs_norm;               /* 1: normalise inputs with obs_mean/obs_std */
    float *obs_mean, *obs_std;  /* (obs_dim) each, owned; mean 0 / std 1 until set */
    /* recurrent policies (lstm_layer >= 0): the LSTM is layers[lstm_layer], of
     * lstm_units units, and the feed-forward parts around it are policies of their own
     * over the same parameter vector (their layers' offsets are the whole vector's):
     * pre, the layers before it (NULL where the LSTM reads the observations), whose
     * outputs are the LSTM's inputs; post, the output layer, whose observations are h.
     * Neither normalises: the recurrent forward normalises the observations first
     * (nevo_policy_normalise_obs). grad.h's tape and backward run on them
     * (src/algo/smg.c). */
    int lstm_layer, lstm_units;
    struct NevoPolicy *pre, *post; /* owned */
} NevoPolicy;

/* Builds the network for an env's spaces from the policy config. Fails (with a
 * message) for shapes that do not fit, e.g. a conv stack on vector observations. */
NevoStatus nevo_policy_new(const NevoEnvSpec *env, const NevoPolicyConfig *cfg, int obs_norm,
                           NevoPolicy **out, NevoError *err);
void nevo_policy_free(NevoPolicy *p);

/* Initial parameters of individual `individual` of generation `generation` (the GA's
 * init_ref): layer l's weights are the noise-table slice named (seed, NEVO_RNG_INIT,
 * generation, individual, l), scaled (or column-normalised), biases 0. */
void nevo_policy_init_params(const NevoPolicy *p, const NevoNoise *noise, uint64_t seed,
                             uint32_t generation, uint32_t individual, float *theta);

/* Floats of scratch memory nevo_policy_forward (or nevo_policy_forward_state) needs
 * for n rows. */
size_t nevo_policy_scratch_floats(const NevoPolicy *p, int n);

/* out (n, n_out) = network_{net[i]}(obs[i]) for each row i. params: row j of the
 * population at params + j * stride. scratch: nevo_policy_scratch_floats(p, n) floats.
 * Row i's result depends only on net[i]'s parameters and obs[i]: never on n, on the
 * other rows or on the thread. Feed-forward policies only (asserted): a recurrent one
 * goes through nevo_policy_forward_state. */
void nevo_policy_forward(const NevoPolicy *p, const float *params, size_t stride, const int *net,
                         const float *obs, int n, float *out, float *scratch);

/* The factored low-rank forward (EGGROLL): row i runs base base[i] (at bases + base[i]
 * bstride) perturbed by the factor row which[i] (at factors + which[i] fstride; params.h)
 * at `rank`, each layer as x W + b of the base, plus coef (x A) B^T, plus s times the bias
 * noise, then its activation: the network base + sign sigma (A B^T / sqrt(rank), bias
 * noise) of NEVO_NET_LOWRANK, summed in this other order (so close to, not bitwise, the
 * built network's result). A row's bits depend on its base, factor row and observation
 * alone. Rows sharing a base in a run read its weights once for the run. Feed-forward
 * policies only (asserted). scratch: nevo_policy_scratch_floats(p, n) floats. */
void nevo_policy_forward_factored(const NevoPolicy *p, const float *bases, size_t bstride, const int *base,
                                  const float *factors, size_t fstride, const int *which, int rank,
                                  const float *obs, int n, float *out, float *scratch);

/* Floats of one row's recurrent state: 2 lstm_units (h, then c), 0 for a feed-forward
 * policy. A zeroed state is the state an episode starts from. */
size_t nevo_policy_state_floats(const NevoPolicy *p);

/* nevo_policy_forward of a recurrent policy: one step of each row, state (n,
 * nevo_policy_state_floats(p)) read and overwritten with the row's next state. Row i's
 * output and next state depend only on net[i]'s parameters, obs[i] and its state row:
 * never on n, on the other rows or on the thread. A feed-forward policy (state may be
 * NULL then) gives nevo_policy_forward's result. */
void nevo_policy_forward_state(const NevoPolicy *p, const float *params, size_t stride, const int *net,
                               const float *obs, int n, float *state, float *out, float *scratch);

/* x (n, obs_dim) = obs (n, obs_dim) normalised by the policy's statistics, as the
 * forward does where p->obs_norm: clip((obs - mean) / std, +-5). */
void nevo_policy_normalise_obs(const NevoPolicy *p, const float *obs, int n, float *x);

/* Actions (n, action_dim) from network outputs (n, n_out). */
void nevo_policy_actions(const NevoPolicy *p, const float *out, int n, float *actions);

/* FLOPs (multiply-adds counted as 2) of one forward row, for benchmarks. */
double nevo_policy_flops(const NevoPolicy *p);

/* Running observation statistics (ES observation normalisation). */
typedef struct NevoObsStats {
    int dim;
    double count;
    double *sum, *sumsq; /* (dim) each */
} NevoObsStats;

void nevo_obs_stats_init(NevoObsStats *s, int dim);
void nevo_obs_stats_free(NevoObsStats *s);
void nevo_obs_stats_add(NevoObsStats *s, const float *obs);
void nevo_obs_stats_merge(NevoObsStats *into, const NevoObsStats *from);
/* Sets the policy's mean/std from the statistics (std floored at 1e-2, as OpenAI ES). */
void nevo_obs_stats_apply(const NevoObsStats *s, NevoPolicy *p);

#endif
