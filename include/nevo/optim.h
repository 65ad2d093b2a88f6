/* Gradient optimisers: SGD with momentum, Adam and RMSProp over a parameter vector,
 * with L2 weight decay and global-norm gradient clipping. One module for every learner:
 * ES steps its means with it, and the gradient learners their networks.
 *
 * A step descends: it moves theta against g, where for every element k
 *   g[k] = s grad[k] + weight_decay theta[k]
 * (weight decay is L2 added to the gradient, as OpenAI ES's l2 is, not AdamW's decoupled
 * decay), s is the caller's scale, reduced by clipping where clip_norm > 0. The rules,
 * in double, each element's operations in this order (so vectorising them, or running
 * them on another kernel set, changes no bit):
 *   SGD      m = momentum m + (1 - dampening) g;  theta -= lr m
 *            dampening 0 is heavy-ball momentum (PyTorch's SGD, whose first step sets
 *            m = g, the same as from m = 0); dampening = momentum is OpenAI ES's
 *            exponential moving average of the gradient.
 *   Adam     t += 1;  a = lr sqrt(1 - beta2^t) / (1 - beta1^t)
 *            m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
 *            theta -= a m / (sqrt(v) + eps)
 *            (Kingma and Ba's efficient form, as TensorFlow and OpenAI ES write it: the
 *            bias correction is folded into the rate, eps added after the sqrt.)
 *   RMSProp  v = decay v + (1 - decay) g g;  m = momentum m + lr g / sqrt(v + eps)
 *            theta -= m
 *            (TensorFlow's form, which IMPALA trains with: eps inside the sqrt; v starts
 *            at 0 as in Keras and PyTorch, not at 1 as in TensorFlow 1.)
 * t counts steps for every rule. */
#ifndef NEVO_OPTIM_H
#define NEVO_OPTIM_H

#include <stddef.h>

#include "nevo/config.h"
#include "nevo/io.h"
#include "nevo/status.h"

typedef enum NevoOptimKind { NEVO_OPTIM_SGD = 0, NEVO_OPTIM_ADAM = 1, NEVO_OPTIM_RMSPROP = 2 } NevoOptimKind;

/* An optimiser and its state: one allocation (the struct, then m and v). The
 * hyperparameters may be changed between steps (a schedule sets lr). */
typedef struct NevoOptim {
    NevoOptimKind kind;
    double lr;           /* learning rate */
    double momentum;     /* SGD, RMSProp */
    double dampening;    /* SGD: 0 heavy ball, = momentum OpenAI ES's moving average */
    double beta1, beta2; /* Adam */
    double decay;        /* RMSProp: decay of the mean square */
    double eps;          /* Adam (after the sqrt), RMSProp (inside it) */
    double weight_decay; /* L2 coefficient added to the gradient */
    double clip_norm;    /* clip s grad to this global L2 norm; 0 = no clipping */
    size_t n;            /* parameters */
    long long t;         /* steps taken */
    double *m;           /* (n) SGD: velocity; Adam: first moment; RMSProp: momentum */
    double *v;           /* (n) Adam: second moment; RMSProp: mean square; SGD: unused, 0 */
} NevoOptim;

/* A new optimiser for n parameters from cfg (optim.* keys: name "sgd", "adam" or
 * "rmsprop"; dampening 0), its state zero. Refuses (NEVO_ERR_INVALID, naming the key)
 * an unknown name or a value out of range: lr and eps not > 0, momentum, beta1, beta2
 * or decay outside [0, 1), weight_decay or clip_norm < 0, or any not finite. */
NevoStatus nevo_optim_new(const NevoOptimConfig *cfg, size_t n, NevoOptim **out, NevoError *err);
/* Frees o (NULL is a no-op). */
void nevo_optim_free(NevoOptim *o);
/* Zeroes the state (m, v, t); the hyperparameters stay. */
void nevo_optim_reset(NevoOptim *o);
/* The rule's name: "sgd", "adam" or "rmsprop". */
const char *nevo_optim_name(NevoOptimKind kind);

/* Scales grad (n values) so that its global L2 norm is at most max_norm: when the norm
 * exceeds it, every element is multiplied by max_norm / norm; otherwise (or when
 * max_norm <= 0) grad is untouched. Returns the norm before, summed in double in index
 * order. */
double nevo_optim_clip(double *grad, size_t n, double max_norm);

/* One step of o's rule on theta (o->n floats) against grad (o->n, a descent gradient:
 * theta moves against it) times scale. A caller holding an ascent direction passes a
 * negative scale. With clip_norm > 0, s grad is first clipped to that global norm (the
 * scale shrinks; grad itself is not written). Returns the global L2 norm of scale * grad
 * before clipping where clip_norm > 0, else 0 (not computed). */
double nevo_optim_step(NevoOptim *o, float *theta, const double *grad, double scale);

/* The state as bytes: m (n f64), v (n f64), t (u64), little-endian; no header, for a
 * container that already names the rule and n (ES's checkpoints store it so). */
void nevo_optim_write_state(const NevoOptim *o, NevoBuf *b);
/* Reads that state into o. Returns 1 when every read stayed in bounds and the values
 * are a state o's rule can have (m and v finite, v >= 0, v = 0 for SGD, t >= 0);
 * otherwise 0 with o reset. */
int nevo_optim_read_state(NevoOptim *o, NevoReader *r);

/* The self-describing form: kind u32, n u64, then the state as above. */
void nevo_optim_save(const NevoOptim *o, NevoBuf *b);
/* Reads a saved state into o. Refuses (NEVO_ERR_CORRUPT, o reset) a state of another
 * rule or another parameter count, a truncated one, or values out of range. */
NevoStatus nevo_optim_load(NevoOptim *o, NevoReader *r, NevoError *err);

#endif
