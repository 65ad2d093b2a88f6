/* V-trace and R2D2's targets (rl.h): backward recursions over each trajectory of an
 * unroll, in double, each output rounded to float once. */
#include "nevo/rl.h"

#include <math.h>

#include "nevo/status.h"

void nevo_vtrace(const float *log_rhos, const float *discounts, const float *rewards, const float *values,
                 const float *bootstrap, int T, int B, float rho_bar, float c_bar, float *vs, float *pg_adv) {
    NEVO_ASSERT(T >= 1 && B >= 1);
    for (int b = 0; b < B; b++) {
        double acc = 0.0;                /* v_{s+1} - V(x_{s+1}), 0 past the unroll */
        double v_next = bootstrap[b];    /* V(x_{s+1}) */
        double vs_next = bootstrap[b];   /* v_{s+1} */
        for (int t = T - 1; t >= 0; t--) {
            size_t i = (size_t)t * (size_t)B + (size_t)b;
            double ratio = exp((double)log_rhos[i]);
            double rho = fmin((double)rho_bar, ratio), c = fmin((double)c_bar, ratio);
            double g = discounts[i], r = rewards[i], v = values[i];
            double delta = rho * (r + g * v_next - v);
            acc = delta + g * c * acc;
            double vs_t = v + acc;
            if (vs) vs[i] = (float)vs_t;
            if (pg_adv) pg_adv[i] = (float)(rho * (r + g * vs_next - v));
            v_next = v;
            vs_next = vs_t;
        }
    }
}

/* Per row, in double: lp = log softmax(z), p = e^lp, H = -sum p lp;
 * d(-adv lp[a])/dz_j = -adv (1[j = a] - p_j), d(-c H)/dz_j = c p_j (lp_j + H),
 * d(0.5 bc (vs - V)^2)/dV = -bc (vs - V). */
double nevo_impala_loss(const float *logits, const float *values, const int *actions, const float *vs,
                        const float *pg_adv, int n, int A, float baseline_cost, float entropy_cost, float *dlogits,
                        float *dvalues) {
    NEVO_ASSERT(n >= 0 && A >= 1);
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * (size_t)A;
        int a = actions[i];
        NEVO_ASSERT(a >= 0 && a < A);
        double zmax = z[0];
        for (int j = 1; j < A; j++) zmax = fmax(zmax, (double)z[j]);
        double sum = 0.0;
        for (int j = 0; j < A; j++) sum += exp((double)z[j] - zmax);
        double lse = zmax + log(sum), H = 0.0;
        for (int j = 0; j < A; j++) {
            double lp = (double)z[j] - lse;
            H -= exp(lp) * lp;
        }
        double adv = pg_adv[i], err = (double)vs[i] - (double)values[i];
        total += -adv * ((double)z[a] - lse) + baseline_cost * 0.5 * err * err - entropy_cost * H;
        if (dlogits)
            for (int j = 0; j < A; j++) {
                double lp = (double)z[j] - lse, p = exp(lp);
                dlogits[(size_t)i * (size_t)A + (size_t)j] =
                    (float)(-adv * ((j == a ? 1.0 : 0.0) - p) + entropy_cost * p * (lp + H));
            }
        if (dvalues) dvalues[i] = (float)(-baseline_cost * err);
    }
    return total;
}

double nevo_r2d2_h(double x, double eps) {
    double s = x < 0 ? -1.0 : x > 0 ? 1.0 : 0.0;
    return s * (sqrt(fabs(x) + 1.0) - 1.0) + eps * x;
}

double nevo_r2d2_h_inv(double x, double eps) {
    double s = x < 0 ? -1.0 : x > 0 ? 1.0 : 0.0;
    double u = eps > 0 ? (sqrt(1.0 + 4.0 * eps * (fabs(x) + 1.0 + eps)) - 1.0) / (2.0 * eps)
                       : fabs(x) + 1.0; /* the formula's limit at eps = 0 */
    return s * (u * u - 1.0);
}

void nevo_r2d2_targets(const float *rewards, const float *discounts, const float *q_online, const float *q_target,
                       int T, int B, int A, int n, double eps, float *targets) {
    NEVO_ASSERT(T >= 1 && B >= 1 && A >= 1 && n >= 1);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int m = n < T - t ? n : T - t;
            double ret = 0.0, g = 1.0; /* the discounted rewards so far, and the product of discounts */
            for (int k = 0; k < m; k++) {
                size_t i = (size_t)(t + k) * (size_t)B + (size_t)b;
                ret += g * rewards[i];
                g *= discounts[i];
            }
            /* bootstrap at step t + m: the online network chooses, the target network values */
            size_t row = ((size_t)(t + m) * (size_t)B + (size_t)b) * (size_t)A;
            int best = 0;
            for (int a = 1; a < A; a++)
                if (q_online[row + (size_t)a] > q_online[row + (size_t)best]) best = a;
            double boot = g == 0.0 ? 0.0 : g * nevo_r2d2_h_inv(q_target[row + (size_t)best], eps);
            targets[(size_t)t * (size_t)B + (size_t)b] = (float)nevo_r2d2_h(ret + boot, eps);
        }
}

double nevo_apex_epsilon(int i, int N, double base, double alpha) {
    NEVO_ASSERT(N >= 1 && i >= 0 && i < N);
    return N == 1 ? base : pow(base, 1.0 + alpha * (double)i / (double)(N - 1));
}
