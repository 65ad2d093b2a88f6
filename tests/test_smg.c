/* Safe mutations (src/algo/smg.c and the GA's use of them): the scale factors of
 * SM-G-SUM, SM-G-ABS and SM-G-SO against a network small enough to differentiate by
 * hand, SM-R's line search against its target, the task-set seam (scale rows, states)
 * checked and carried, the configs refused, and whole GA runs bit-identical across
 * thread counts and across a kill and --resume. */
#include <math.h>
#include <string.h>

#include "algo/algo_internal.h"
#include "algo/smg.h"
#include "harness.h"
#include "nevo/rng.h"
#include "nevo/train.h"

/* --- a 4-2-2 tanh network on CartPole's observations, by hand ------------------- */

/* Parameters as policy.h lays them out: W0 (4, 2) at 0, b0 at 8, W1 (2, 2) at 10, b1
 * at 14. W1's second row is tiny, so the gradients through hidden unit 1 fall under
 * the floor; the states' last two inputs are 0, so W0's rows 2 and 3 get none at all. */
enum { NP = 16, NS = 3 };
static const float THETA[NP] = {0.5f, -0.3f, 0.8f, 0.2f, -0.4f, 0.6f, 0.1f, 0.9f, 0.1f, -0.2f,
                                1.0f, -0.5f, 0.004f, 0.002f, 0.05f, 0.0f};
static const float STATES[NS][4] = {{1.0f, -0.5f, 0.0f, 0.0f}, {0.3f, 0.8f, 0.0f, 0.0f}, {-1.2f, 0.1f, 0.0f, 0.0f}};

static NevoPolicy *hand_policy(NevoEnv **env) {
    NevoError err = {0};
    CHECK(nevo_env_new("CartPole-v1", NULL, 0, env, &err) == NEVO_OK);
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_hidden = 1;
    c.hidden[0] = 2;
    strcpy(c.activation, "tanh");
    strcpy(c.init, "scaled");
    NevoPolicy *p = NULL;
    CHECK(nevo_policy_new(nevo_env_spec(*env), &c, 0, &p, &err) == NEVO_OK);
    CHECK(p->nparams == NP && p->n_out == 2);
    return p;
}

/* dy_k(x)/dtheta by hand: y_k = sum_j h_j W1[j][k] + b1[k], h_j = tanh(x W0[:, j] + b0[j]). */
static void hand_gradient(const float *x, int k, double *g) {
    memset(g, 0, sizeof(double) * NP);
    for (int j = 0; j < 2; j++) {
        double z = THETA[8 + j];
        for (int i = 0; i < 4; i++) z += (double)x[i] * THETA[i * 2 + j];
        double h = tanh(z), w1 = THETA[10 + j * 2 + k];
        g[10 + j * 2 + k] = h;
        for (int i = 0; i < 4; i++) g[i * 2 + j] = w1 * (1.0 - h * h) * x[i];
        g[8 + j] = w1 * (1.0 - h * h);
    }
    g[14 + k] = 1.0;
}

/* The divisor rule of smg.h, written again. */
static double want_divisor(double s) { return s == 0.0 ? 1.0 : s < 0.01 ? 0.01 : s; }

/* got against the rule applied to s; the example has sensitivities of 0 and (where
 * need_floor) some under the floor. */
static void check_divisors(const float *got, const double *s, int need_floor, const char *what) {
    int floored = 0, zero = 0;
    for (int i = 0; i < NP; i++) {
        double want = want_divisor(s[i]);
        CHECK_MSG(fabs(got[i] - want) <= 2e-5 * want + 1e-7, "%s: parameter %d: %.9g, by hand %.9g", what, i,
                  (double)got[i], want);
        floored += s[i] > 0.0 && s[i] < 0.01;
        zero += s[i] == 0.0;
    }
    CHECK_MSG((floored > 0 || !need_floor) && zero > 0, "%s: the example misses the floor (%d) or a zero (%d)", what, floored, zero);
}

TEST(smg_sum_and_abs_by_hand) {
    NevoEnv *env;
    NevoPolicy *p = hand_policy(&env);
    double g[NP], sum[2][NP] = {{0}}, abs_mean[2][NP] = {{0}}, s_sum[NP], s_abs[NP];
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < NS; t++) {
            hand_gradient(STATES[t], k, g);
            for (int i = 0; i < NP; i++) {
                sum[k][i] += g[i];
                abs_mean[k][i] += fabs(g[i]) / NS;
            }
        }
    for (int i = 0; i < NP; i++) {
        s_sum[i] = sqrt(sum[0][i] * sum[0][i] + sum[1][i] * sum[1][i]);
        s_abs[i] = sqrt(abs_mean[0][i] * abs_mean[0][i] + abs_mean[1][i] * abs_mean[1][i]);
    }
    NevoSmWork *w = nevo_sm_work_new(p, 5);
    float scale[NP];
    nevo_sm_scale(w, NEVO_SM_G_SUM, THETA, &STATES[0][0], NULL, NS, scale);
    check_divisors(scale, s_sum, 1, "SM-G-SUM");
    nevo_sm_scale(w, NEVO_SM_G_ABS, THETA, &STATES[0][0], NULL, NS, scale);
    check_divisors(scale, s_abs, 1, "SM-G-ABS");
    /* gradients of opposite signs cancel in SUM, not in ABS: the two must differ */
    int differ = 0;
    for (int i = 0; i < NP; i++) differ += fabs(s_sum[i] - s_abs[i] * NS) > 1e-3;
    CHECK(differ > 0);
    nevo_sm_work_free(w);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* SM-G-SO's defining property: s = sqrt(|H u|), u = eps / |eps|, with H the Hessian of
 * the mean over states of the summed squared output change, (2 / n) sum_t J_t^T J_t,
 * here with J_t by hand. */
TEST(smg_so_by_hand) {
    NevoEnv *env;
    NevoPolicy *p = hand_policy(&env);
    float eps[NP];
    double norm = 0.0;
    for (int i = 0; i < NP; i++) {
        eps[i] = (float)sin(1.0 + 1.7 * i);
        norm += (double)eps[i] * eps[i];
    }
    double J[2][NP], hu[NP] = {0}, s[NP];
    for (int t = 0; t < NS; t++) {
        double ju[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            hand_gradient(STATES[t], k, J[k]);
            for (int i = 0; i < NP; i++) ju[k] += J[k][i] * eps[i] / sqrt(norm);
        }
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < NP; i++) hu[i] += 2.0 / NS * J[k][i] * ju[k];
    }
    for (int i = 0; i < NP; i++) s[i] = sqrt(fabs(hu[i]));
    NevoSmWork *w = nevo_sm_work_new(p, NS);
    float scale[NP];
    nevo_sm_scale_so(w, THETA, &STATES[0][0], NULL, NS, eps, scale);
    check_divisors(scale, s, 0, "SM-G-SO");
    nevo_sm_work_free(w);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* SM-R: the output divergence of the child it picks, computed here from two forwards,
 * hits the target within the bisection's resolution; a target beyond reach gives the
 * largest step, at which the largest |eps| moves its weight by the clip. */
TEST(smg_r_hits_its_target) {
    NevoError err = {0};
    NevoEnv *env = NULL;
    CHECK(nevo_env_new("CartPole-v1", NULL, 0, &env, &err) == NEVO_OK);
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_hidden = 3;
    c.hidden[0] = c.hidden[1] = c.hidden[2] = 16;
    strcpy(c.activation, "tanh");
    strcpy(c.init, "scaled");
    NevoPolicy *p = NULL;
    CHECK(nevo_policy_new(nevo_env_spec(env), &c, 0, &p, &err) == NEVO_OK);
    size_t np = p->nparams;
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new((size_t)1 << 16, pool);
    float *theta = nevo_alloc(sizeof(float) * np), *child = nevo_alloc(sizeof(float) * np);
    nevo_policy_init_params(p, noise, 7, 0, 0, theta);
    enum { N = 40 };
    float X[N * 4], y0[N * 2], y1[N * 2];
    NevoRng rng;
    nevo_rng_init(&rng, 7, NEVO_RNG_USER, 0, 0, 0);
    nevo_rng_fill_normal(&rng, X, N * 4);
    const float *eps = nevo_noise_slice(noise, np, 7, NEVO_RNG_MUTATE, 1, 2, 0);
    float *scratch = nevo_alloc(sizeof(float) * nevo_policy_scratch_floats(p, N));
    int zeros[N] = {0};
    NevoSmWork *w = nevo_sm_work_new(p, N);
    static const double targets[] = {1e-6, 1e-3, 0.1};
    for (int i = 0; i < 3; i++) {
        double reported;
        float sigma = nevo_sm_r_sigma(w, theta, X, NULL, N, eps, targets[i], &reported);
        CHECK(sigma > 0.0f);
        for (size_t k = 0; k < np; k++) child[k] = theta[k] + sigma * eps[k];
        nevo_policy_forward(p, theta, np, zeros, X, N, y0, scratch);
        nevo_policy_forward(p, child, np, zeros, X, N, y1, scratch);
        double d = 0.0;
        for (int k = 0; k < N * 2; k++) d += ((double)y1[k] - y0[k]) * ((double)y1[k] - y0[k]);
        d /= N * 2;
        CHECK_MSG(fabs(d - targets[i]) <= 1e-3 * targets[i], "target %g: divergence %.9g (sigma %g)", targets[i], d,
                  (double)sigma);
        CHECK(reported == d);
        CHECK(nevo_sm_divergence(w, theta, child, X, NULL, N) == d);
    }
    float top = 0.0f;
    for (size_t k = 0; k < np; k++) top = fabsf(eps[k]) > top ? fabsf(eps[k]) : top;
    CHECK(nevo_sm_r_sigma(w, theta, X, NULL, N, eps, 1e9, NULL) == NEVO_SCALED_CLIP / top);
    nevo_sm_work_free(w);
    free(scratch), free(theta), free(child);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* --- a recurrent network: 4 -> tanh 3 -> LSTM 2 -> 2 ------------------------------- */

/* Layout (policy.h, lstm.h): W0 (4, 3) at 0, b0 at 12; the LSTM's Wx (3, 8) at 15, Wh
 * (2, 8) at 39, b (8) at 55 (gates i, f, g, o of 2 units each); Wout (2, 2) at 63, bout
 * at 67. */
enum { RNP = 69, RT = 7 };

static NevoPolicy *rec_policy(NevoEnv **env) {
    NevoError err = {0};
    CHECK(nevo_env_new("CartPole-v1", NULL, 0, env, &err) == NEVO_OK);
    NevoPolicyConfig c;
    memset(&c, 0, sizeof c);
    c.n_hidden = 1;
    c.hidden[0] = 3;
    c.lstm = 2;
    strcpy(c.activation, "tanh");
    strcpy(c.init, "scaled");
    NevoPolicy *p = NULL;
    CHECK(nevo_policy_new(nevo_env_spec(*env), &c, 0, &p, &err) == NEVO_OK);
    CHECK(p->nparams == RNP && p->layers[1].w_off == 15 && p->layers[2].w_off == 63);
    return p;
}

/* sum over the steps of output k, in double, of the sequence X (RT, 4) with the state
 * zeroed where starts[t] */
static double rec_sum_output(const double *th, const float X[RT][4], const uint8_t *starts, int k) {
    double h[2] = {0, 0}, c[2] = {0, 0}, total = 0.0;
    for (int t = 0; t < RT; t++) {
        if (starts && starts[t]) h[0] = h[1] = c[0] = c[1] = 0.0;
        double a[3], z[8];
        for (int j = 0; j < 3; j++) {
            double v = th[12 + j];
            for (int i = 0; i < 4; i++) v += X[t][i] * th[i * 3 + j];
            a[j] = tanh(v);
        }
        for (int g = 0; g < 8; g++) {
            double v = th[55 + g];
            for (int i = 0; i < 3; i++) v += a[i] * th[15 + i * 8 + g];
            for (int i = 0; i < 2; i++) v += h[i] * th[39 + i * 8 + g];
            z[g] = v;
        }
        for (int j = 0; j < 2; j++) {
            double ig = 1 / (1 + exp(-z[j])), fg = 1 / (1 + exp(-z[2 + j])), gg = tanh(z[4 + j]),
                   og = 1 / (1 + exp(-z[6 + j]));
            c[j] = fg * c[j] + ig * gg;
            h[j] = og * tanh(c[j]);
        }
        total += th[67 + k] + h[0] * th[63 + k] + h[1] * th[65 + k];
    }
    return total;
}

static void rec_theta(float *theta) {
    for (int i = 0; i < RNP; i++) theta[i] = (float)(0.8 * sin(0.7 + 1.3 * i));
}

static const float REC_X[RT][4] = {{1.0f, -0.5f, 0.2f, 0.0f}, {0.3f, 0.8f, -0.1f, 0.0f}, {-1.2f, 0.1f, 0.4f, 0.0f},
                                   {0.5f, 0.5f, 0.5f, 0.0f},  {0.0f, -0.9f, 0.3f, 0.0f}, {0.7f, 0.2f, -0.6f, 0.0f},
                                   {-0.4f, 0.3f, 0.9f, 0.0f}};
static const uint8_t REC_STARTS[RT] = {1, 0, 0, 0, 1, 0, 0};

/* SM-G-SUM on a recurrent policy: s_i = sqrt(sum_k (d/dtheta_i sum_t y_k(t))^2) through
 * time, against central differences of the double-precision sequence forward written
 * above; the episode starts cut the sequence (with none, other divisors). */
TEST(smg_sum_recurrent_by_finite_differences) {
    NevoEnv *env;
    NevoPolicy *p = rec_policy(&env);
    float theta[RNP], scale[RNP], scale_one[RNP];
    rec_theta(theta);
    double th[RNP], s[RNP];
    for (int i = 0; i < RNP; i++) th[i] = theta[i];
    for (int i = 0; i < RNP; i++) {
        double ss = 0.0, e = 1e-6;
        for (int k = 0; k < 2; k++) {
            double keep = th[i];
            th[i] = keep + e;
            double up = rec_sum_output(th, REC_X, REC_STARTS, k);
            th[i] = keep - e;
            double down = rec_sum_output(th, REC_X, REC_STARTS, k);
            th[i] = keep;
            double g = (up - down) / (2 * e);
            ss += g * g;
        }
        s[i] = sqrt(ss);
    }
    NevoSmWork *w = nevo_sm_work_new(p, 9);
    nevo_sm_scale(w, NEVO_SM_G_SUM, theta, &REC_X[0][0], REC_STARTS, RT, scale);
    int zero = 0;
    for (int i = 0; i < RNP; i++) {
        double want = want_divisor(s[i] < 1e-9 ? 0.0 : s[i]);
        CHECK_MSG(fabs(scale[i] - want) <= 1e-4 * want + 1e-6, "parameter %d: %.9g, by differences %.9g", i,
                  (double)scale[i], want);
        zero += s[i] < 1e-9;
    }
    CHECK_EQ_INT(zero, 3); /* W0's last row: the states' last input is 0 */
    /* the whole as one sequence: the state carries from step 3 into 4 */
    nevo_sm_scale(w, NEVO_SM_G_SUM, theta, &REC_X[0][0], NULL, RT, scale_one);
    CHECK(memcmp(scale, scale_one, sizeof scale) != 0);
    nevo_sm_work_free(w);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* output k at step t of the sequence X (RT, 4), in double, the state zeroed where
 * starts[t] (rec_sum_output's forward, one output of it) */
static double rec_output(const double *th, const float X[RT][4], const uint8_t *starts, int t_out, int k) {
    double h[2] = {0, 0}, c[2] = {0, 0};
    for (int t = 0; t <= t_out; t++) {
        if (starts && starts[t]) h[0] = h[1] = c[0] = c[1] = 0.0;
        double a[3], z[8];
        for (int j = 0; j < 3; j++) {
            double v = th[12 + j];
            for (int i = 0; i < 4; i++) v += X[t][i] * th[i * 3 + j];
            a[j] = tanh(v);
        }
        for (int g = 0; g < 8; g++) {
            double v = th[55 + g];
            for (int i = 0; i < 3; i++) v += a[i] * th[15 + i * 8 + g];
            for (int i = 0; i < 2; i++) v += h[i] * th[39 + i * 8 + g];
            z[g] = v;
        }
        for (int j = 0; j < 2; j++) {
            double ig = 1 / (1 + exp(-z[j])), fg = 1 / (1 + exp(-z[2 + j])), gg = tanh(z[4 + j]),
                   og = 1 / (1 + exp(-z[6 + j]));
            c[j] = fg * c[j] + ig * gg;
            h[j] = og * tanh(c[j]);
        }
    }
    return th[67 + k] + h[0] * th[63 + k] + h[1] * th[65 + k];
}

/* SM-G-ABS on a recurrent policy: s_i = sqrt(sum_k (mean_t |dy_k(t)/dtheta_i|)^2), each
 * y_k(t) differentiated through time back to its episode's start, against central
 * differences of the double-precision forward above, one output at a time; it differs
 * from SM-G-SUM (whose sums over t cancel where ABS's do not) and, with no starts, from
 * itself with them. */
TEST(smg_abs_recurrent_by_finite_differences) {
    NevoEnv *env;
    NevoPolicy *p = rec_policy(&env);
    float theta[RNP], scale[RNP], scale_sum[RNP], scale_one[RNP];
    rec_theta(theta);
    double th[RNP], s[RNP];
    for (int i = 0; i < RNP; i++) th[i] = theta[i];
    for (int i = 0; i < RNP; i++) {
        double ss = 0.0, e = 1e-6;
        for (int k = 0; k < 2; k++) {
            double mean = 0.0;
            for (int t = 0; t < RT; t++) {
                double keep = th[i];
                th[i] = keep + e;
                double up = rec_output(th, REC_X, REC_STARTS, t, k);
                th[i] = keep - e;
                double down = rec_output(th, REC_X, REC_STARTS, t, k);
                th[i] = keep;
                mean += fabs((up - down) / (2 * e));
            }
            mean /= RT;
            ss += mean * mean;
        }
        s[i] = sqrt(ss);
    }
    NevoSmWork *w = nevo_sm_work_new(p, 9);
    nevo_sm_scale(w, NEVO_SM_G_ABS, theta, &REC_X[0][0], REC_STARTS, RT, scale);
    int zero = 0;
    for (int i = 0; i < RNP; i++) {
        double want = want_divisor(s[i] < 1e-9 ? 0.0 : s[i]);
        CHECK_MSG(fabs(scale[i] - want) <= 1e-4 * want + 1e-6, "parameter %d: %.9g, by differences %.9g", i,
                  (double)scale[i], want);
        zero += s[i] < 1e-9;
    }
    CHECK_EQ_INT(zero, 3); /* W0's last row: the states' last input is 0 */
    nevo_sm_scale(w, NEVO_SM_G_SUM, theta, &REC_X[0][0], REC_STARTS, RT, scale_sum);
    CHECK(memcmp(scale, scale_sum, sizeof scale) != 0);
    nevo_sm_scale(w, NEVO_SM_G_ABS, theta, &REC_X[0][0], NULL, RT, scale_one);
    CHECK(memcmp(scale, scale_one, sizeof scale) != 0);
    nevo_sm_work_free(w);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* SM-G-SO on a recurrent policy: s = sqrt(|H u|), H = (2 / n) sum_t J_t^T J_t, each
 * J_t = dy(t)/dtheta by central differences of the double-precision forward through
 * time (rec_output); with no starts the sequence is one and the divisors differ. */
TEST(smg_so_recurrent_by_finite_differences) {
    NevoEnv *env;
    NevoPolicy *p = rec_policy(&env);
    float theta[RNP], eps[RNP], scale[RNP], scale_one[RNP];
    rec_theta(theta);
    double th[RNP], norm = 0.0, hu[RNP] = {0}, s[RNP];
    for (int i = 0; i < RNP; i++) {
        th[i] = theta[i];
        eps[i] = (float)sin(1.0 + 1.7 * i);
        norm += (double)eps[i] * eps[i];
    }
    static double J[RT][2][RNP];
    for (int t = 0; t < RT; t++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < RNP; i++) {
                double keep = th[i], e = 1e-6;
                th[i] = keep + e;
                double up = rec_output(th, REC_X, REC_STARTS, t, k);
                th[i] = keep - e;
                double down = rec_output(th, REC_X, REC_STARTS, t, k);
                th[i] = keep;
                J[t][k][i] = (up - down) / (2 * e);
            }
    for (int t = 0; t < RT; t++)
        for (int k = 0; k < 2; k++) {
            double ju = 0.0;
            for (int i = 0; i < RNP; i++) ju += J[t][k][i] * eps[i] / sqrt(norm);
            for (int i = 0; i < RNP; i++) hu[i] += 2.0 / RT * J[t][k][i] * ju;
        }
    for (int i = 0; i < RNP; i++) s[i] = sqrt(fabs(hu[i]));
    NevoSmWork *w = nevo_sm_work_new(p, 9);
    nevo_sm_scale_so(w, theta, &REC_X[0][0], REC_STARTS, RT, eps, scale);
    int zero = 0;
    for (int i = 0; i < RNP; i++) {
        double want = want_divisor(s[i] < 1e-7 ? 0.0 : s[i]);
        CHECK_MSG(fabs(scale[i] - want) <= 1e-4 * want + 1e-6, "parameter %d: %.9g, by differences %.9g", i,
                  (double)scale[i], want);
        zero += s[i] < 1e-7;
    }
    CHECK_EQ_INT(zero, 3); /* W0's last row: the states' last input is 0 */
    nevo_sm_scale_so(w, theta, &REC_X[0][0], NULL, RT, eps, scale_one);
    CHECK(memcmp(scale, scale_one, sizeof scale) != 0);
    nevo_sm_work_free(w);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* SM-R's divergence on a recurrent policy: the outputs of the episodes as the evaluator
 * runs them (nevo_policy_forward_state, a zero state at each start), bit for bit; and
 * the line search hits its target. */
TEST(smg_r_recurrent_divergence) {
    NevoEnv *env;
    NevoPolicy *p = rec_policy(&env);
    float theta[RNP], eps[RNP], child[RNP];
    rec_theta(theta);
    for (int i = 0; i < RNP; i++) eps[i] = (float)cos(0.3 + 2.1 * i);
    NevoSmWork *w = nevo_sm_work_new(p, RT);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, 1));
    static const double targets[] = {1e-5, 1e-2};
    for (int r = 0; r < 2; r++) {
        double reported;
        float sigma = nevo_sm_r_sigma(w, theta, &REC_X[0][0], REC_STARTS, RT, eps, targets[r], &reported);
        for (int i = 0; i < RNP; i++) child[i] = theta[i] + sigma * eps[i];
        float st0[4], st1[4], y0[2], y1[2];
        int net = 0;
        double d = 0.0;
        for (int t = 0; t < RT; t++) {
            if (REC_STARTS[t]) memset(st0, 0, sizeof st0), memset(st1, 0, sizeof st1);
            nevo_policy_forward_state(p, theta, RNP, &net, REC_X[t], 1, st0, y0, scratch);
            nevo_policy_forward_state(p, child, RNP, &net, REC_X[t], 1, st1, y1, scratch);
            for (int k = 0; k < 2; k++) d += ((double)y1[k] - y0[k]) * ((double)y1[k] - y0[k]);
        }
        d /= RT * 2;
        CHECK(reported == d);
        CHECK(nevo_sm_divergence(w, theta, child, &REC_X[0][0], REC_STARTS, RT) == d);
        CHECK_MSG(fabs(d - targets[r]) <= 1e-3 * targets[r], "target %g: divergence %.9g", targets[r], d);
    }
    free(scratch);
    nevo_sm_work_free(w);
    nevo_policy_free(p);
    nevo_env_free(env);
}

/* --- the GA ------------------------------------------------------------------------ */

/* The GA on CartPole with the policy section `policy` (JSON) and `episodes` episodes a child. */
static const char *small_json_policy(const char *mutation, const char *policy, int episodes, char *buf, size_t size) {
    snprintf(buf, size,
             "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 4, \"population\": 16, \"generations\": 4,"
             " \"eval_episodes\": 5, \"episodes\": %d, \"policy\": %s, \"ga\": {\"sigma\": 0.05, \"truncation\": 4,"
             " \"validation_candidates\": 3, \"validation_episodes\": 3, \"mutation\": \"%s\", \"sm_states\": 25}}",
             episodes, policy, mutation);
    return buf;
}

static const char *small_json(const char *mutation, char *buf, size_t size) {
    return small_json_policy(mutation, "{\"hidden\": [8, 8]}", 1, buf, size);
}

#define REC_POLICY "{\"hidden\": [8], \"lstm\": 4}"

/* A config's env, policy, pool, noise, evaluator and algorithm, opened and closed
 * together. */
typedef struct Rig {
    NevoConfig cfg;
    NevoEnv *env;
    NevoPolicy *p;
    NevoPool *pool;
    NevoNoise *noise;
    NevoEvaluator *ev;
    NevoAlgo *a;
} Rig;

static void rig_open(Rig *r, const char *json, int threads) {
    NevoError err = {0};
    nevo_config_defaults(&r->cfg);
    CHECK_MSG(nevo_config_apply_json(&r->cfg, json, "test", &err) == NEVO_OK, "%s", err.msg);
    r->env = NULL;
    CHECK(nevo_env_new(r->cfg.env, NULL, 0, &r->env, &err) == NEVO_OK);
    r->p = NULL;
    CHECK(nevo_policy_new(nevo_env_spec(r->env), &r->cfg.policy, 0, &r->p, &err) == NEVO_OK);
    r->pool = nevo_pool_new(threads);
    r->noise = nevo_noise_new((size_t)1 << 16, r->pool);
    r->ev = nevo_evaluator_new(r->env, r->p, r->pool, 0);
    r->a = NULL;
    CHECK_MSG(nevo_algo_new(&r->cfg, r->env, r->p, r->noise, r->pool, &r->a, &err) == NEVO_OK, "%s", err.msg);
}

static void rig_close(Rig *r) {
    nevo_algo_free(r->a);
    nevo_evaluator_free(r->ev);
    nevo_noise_free(r->noise);
    nevo_pool_free(r->pool);
    nevo_policy_free(r->p);
    nevo_env_free(r->env);
}

/* `gens` generations of the config on a pool of `threads`; returns the algorithm's
 * whole state (caller frees). */
static NevoBuf run_state(const char *json, int threads, int gens) {
    Rig r;
    rig_open(&r, json, threads);
    NevoError err = {0};
    for (int g = 0; g < gens; g++) {
        NevoGenStats gs;
        CHECK_MSG(nevo_train_generation(r.a, r.ev, &gs, &err) == NEVO_OK, "%s", err.msg);
    }
    NevoBuf b = {0};
    nevo_algo_save(r.a, &b);
    rig_close(&r);
    return b;
}

/* A safe-mutation GA keeps its bases as vectors: a non-finite one in a saved state is
 * refused on load (it was taken, and the run failed later with NaN, exit 1). The state:
 * generation u32, has_elite u32, then the elite's floats. */
TEST(smg_ga_state_refuses_nonfinite_base) {
    char json[1024];
    small_json("sm-r", json, sizeof json);
    NevoBuf saved = run_state(json, 1, 2);
    uint32_t has_elite;
    memcpy(&has_elite, saved.data + 4, 4);
    CHECK(has_elite == 1);
    Rig rig;
    rig_open(&rig, json, 1);
    NevoError err = {0};
    static const float bad[] = {NAN, INFINITY};
    for (int k = 0; k < 3; k++) {
        NevoBuf copy = {0};
        nevo_buf_put(&copy, saved.data, saved.len);
        if (k < 2) memcpy(copy.data + 8 + 4 * (size_t)k, &bad[k], 4);
        NevoReader r = nevo_reader(copy.data, copy.len);
        NevoStatus st = nevo_algo_load(rig.a, &r, &err);
        if (k < 2) {
            CHECK_MSG(st == NEVO_ERR_CORRUPT, "case %d loaded", k);
            CHECK_CONTAINS(err.msg, "GA state is truncated or inconsistent");
        } else {
            CHECK_MSG(st == NEVO_OK, "%s", err.msg); /* the state as saved loads */
        }
        nevo_buf_free(&copy);
    }
    rig_close(&rig);
    nevo_buf_free(&saved);
}

/* Every mode ends in the same state, states and all, on 1 and on 2 threads; and the
 * modes do differ from plain mutation and from each other. */
TEST(smg_ga_threads_bit_identical) {
    static const char *const modes[] = {"plain", "sm-g-sum", "sm-g-abs", "sm-g-so", "sm-r"};
    NevoBuf states[5];
    for (int m = 0; m < 5; m++) {
        char json[1024];
        small_json(modes[m], json, sizeof json);
        NevoBuf one = run_state(json, 1, 3);
        states[m] = run_state(json, 2, 3);
        CHECK_MSG(one.len == states[m].len && memcmp(one.data, states[m].data, one.len) == 0,
                  "%s: 1 and 2 threads end in different states", modes[m]);
        nevo_buf_free(&one);
    }
    for (int m = 1; m < 5; m++)
        for (int q = 0; q < m; q++)
            CHECK_MSG(states[m].len != states[q].len || memcmp(states[m].data, states[q].data, states[m].len) != 0,
                      "%s and %s end in the same state", modes[m], modes[q]);
    for (int m = 0; m < 5; m++) nevo_buf_free(&states[m]);
}

/* The checkpoint of a safe-mutation GA holds its parents and their states: a run
 * killed mid-generation and resumed (on another thread count) ends as one that was
 * not, policy, metrics and summary. */
static char *read_run_file(const char *dir, const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", test_tmpdir(), dir, name);
    return test_read_file(path, len);
}

static long long frames_after(const char *dir, int g) {
    char *m = read_run_file(dir, "metrics.jsonl", NULL);
    CHECK(m != NULL);
    char key[64];
    snprintf(key, sizeof key, "{\"generation\": %d, \"frames\": ", g);
    char *at = strstr(m, key);
    CHECK_MSG(at, "generation %d missing from %s's metrics", g, dir);
    long long f = atoll(at + strlen(key));
    free(m);
    return f;
}

static int nevo_cmd(const char *args) {
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s %s", test_tmpdir(), getenv("PWD"), test_nevo_bin(), args);
    if (rc != 0 && rc != 137) fprintf(stderr, "%s\n", buf);
    return rc;
}

/* (the recurrent policy's bases keep their episode starts too: "sm-g-sum-lstm") */
TEST(smg_ga_kill_and_resume) {
    static const char *const modes[] = {"sm-g-sum", "sm-g-so", "sm-g-sum-lstm"};
    for (int m = 0; m < 3; m++) {
        char json[1024], path[1024], args[1024];
        if (m == 2)
            small_json_policy("sm-g-sum", REC_POLICY, 2, json, sizeof json);
        else
            small_json(modes[m], json, sizeof json);
        snprintf(path, sizeof path, "%s/%s.json", test_tmpdir(), modes[m]);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        fputs(json, f);
        fclose(f);
        char full[64], cut[64];
        snprintf(full, sizeof full, "full-%s", modes[m]);
        snprintf(cut, sizeof cut, "cut-%s", modes[m]);
        snprintf(args, sizeof args, "train %s.json --out %s --quiet --threads 2", modes[m], full);
        CHECK_EQ_INT(nevo_cmd(args), 0);
        long long kill = (frames_after(full, 1) + frames_after(full, 2)) / 2; /* in generation 2 */
        snprintf(args, sizeof args, "train %s.json --out %s --quiet --threads 2 --kill-after-frames %lld", modes[m],
                 cut, kill);
        CHECK_EQ_INT(nevo_cmd(args), 137);
        snprintf(args, sizeof args, "train --resume %s --quiet --threads 1", cut);
        CHECK_EQ_INT(nevo_cmd(args), 0);
        static const char *const files[] = {"policy.nevo", "metrics.jsonl", "summary.json"};
        test_same_run_files(full, cut, files, 3);
    }
}

/* A GA with a recurrent policy: every mode ends in the same state on 1 and 2 threads,
 * different from plain mutation's and from each other's. */
TEST(smg_ga_recurrent_threads_bit_identical) {
    static const char *const modes[] = {"plain", "sm-g-sum", "sm-g-abs", "sm-g-so", "sm-r"};
    NevoBuf states[5];
    for (int m = 0; m < 5; m++) {
        char json[1024];
        small_json_policy(modes[m], REC_POLICY, 2, json, sizeof json);
        NevoBuf one = run_state(json, 1, 3);
        states[m] = run_state(json, 2, 3);
        CHECK_MSG(one.len == states[m].len && memcmp(one.data, states[m].data, one.len) == 0,
                  "%s: 1 and 2 threads end in different states", modes[m]);
        nevo_buf_free(&one);
    }
    for (int m = 1; m < 5; m++)
        for (int q = 0; q < m; q++)
            CHECK_MSG(states[m].len != states[q].len || memcmp(states[m].data, states[q].data, states[m].len) != 0,
                      "%s and %s end in the same state", modes[m], modes[q]);
    for (int m = 0; m < 5; m++) nevo_buf_free(&states[m]);
}

/* Safe mutations need parents: random search is refused; GA-NS, which has them, is not;
 * an unknown mutation is refused by the schema and by the GA's own check; every mode
 * takes a recurrent policy. */
TEST(smg_configs_refused) {
    NevoConfig cfg;
    NevoError err = {0};
    nevo_config_defaults(&cfg);
    CHECK(nevo_config_override(&cfg, "ga.mutation=sm-g-sum", &err) == NEVO_OK);
    strcpy(cfg.algo, "rs");
    CHECK(nevo_algo_check(&cfg, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "ga.mutation = sm-g-sum needs parents") && !strchr(err.msg, '\n'), "%s", err.msg);
    strcpy(cfg.algo, "ga-ns");
    CHECK_MSG(nevo_algo_check(&cfg, NULL, &err) == NEVO_OK, "%s", err.msg);
    strcpy(cfg.algo, "ga");
    CHECK(nevo_config_override(&cfg, "ga.mutation=sm-g", &err) == NEVO_ERR_INVALID);
    strcpy(cfg.ga.mutation, "sm-x");
    CHECK(nevo_algo_check(&cfg, NULL, &err) != NEVO_OK);
    cfg.policy.lstm = 8;
    static const char *const with_lstm[] = {"sm-g-sum", "sm-g-abs", "sm-g-so", "sm-r"};
    for (int i = 0; i < 4; i++) {
        strcpy(cfg.ga.mutation, with_lstm[i]);
        CHECK_MSG(nevo_algo_check(&cfg, NULL, &err) == NEVO_OK, "%s: %s", with_lstm[i], err.msg);
    }
}

/* The seam: a safe-mutation generation's task set carries its scale rows and the
 * states' cap through the bytes; a set with a scale that is not a positive number, a
 * scaled recipe without scale rows, or tasks keeping states with no cap is refused;
 * results keeping more states than the cap are refused on reading. */
TEST(smg_task_set_checked) {
    char json[1024];
    NevoConfig cfg;
    NevoError err = {0};
    nevo_config_defaults(&cfg);
    CHECK(nevo_config_apply_json(&cfg, small_json("sm-g-sum", json, sizeof json), "test", &err) == NEVO_OK);
    NevoEnv *env = NULL;
    CHECK(nevo_env_new(cfg.env, NULL, 0, &env, &err) == NEVO_OK);
    NevoPolicy *p = NULL;
    CHECK(nevo_policy_new(nevo_env_spec(env), &cfg.policy, 0, &p, &err) == NEVO_OK);
    NevoPool *pool = nevo_pool_new(1);
    NevoNoise *noise = nevo_noise_new((size_t)1 << 16, pool);
    NevoEvaluator *ev = nevo_evaluator_new(env, p, pool, 0);
    NevoAlgo *a = NULL;
    CHECK(nevo_algo_new(&cfg, env, p, noise, pool, &a, &err) == NEVO_OK);
    NevoGenStats gs;
    CHECK(nevo_train_generation(a, ev, &gs, &err) == NEVO_OK);
    const NevoTaskSet *ts = nevo_algo_ask(a);
    CHECK(ts->scales && !ts->chains && ts->states_cap == 25 && ts->nets[1].kind == NEVO_NET_SCALED);
    CHECK(ts->tasks[0].flags & NEVO_TASK_RECORD_STATES);
    NevoBuf b = {0};
    CHECK(nevo_taskset_write(ts, &b, &err) == NEVO_OK);
    NevoTaskSet *back = NULL;
    CHECK_MSG(nevo_taskset_read(b.data, b.len, &back, &err) == NEVO_OK, "%s", err.msg);
    CHECK(back->states_cap == ts->states_cap && back->scales);
    for (int j = 0; j < ts->n_bases; j++) {
        CHECK(memcmp(back->scales + (size_t)j * back->base_stride, ts->scales + (size_t)j * ts->base_stride,
                     sizeof(float) * p->nparams) == 0);
        CHECK(memcmp(back->bases + (size_t)j * back->base_stride, ts->bases + (size_t)j * ts->base_stride,
                     sizeof(float) * p->nparams) == 0);
    }
    nevo_taskset_free(back);
    for (size_t n = 0; n < b.len; n += 11) CHECK(nevo_taskset_read(b.data, n, &back, &err) != NEVO_OK);
    nevo_buf_free(&b);
    /* crafted sets */
    NevoTaskSet bad = *ts;
    float *scales = nevo_alloc(sizeof(float) * p->nparams * (size_t)ts->n_bases);
    memcpy(scales, ts->scales, sizeof(float) * p->nparams * (size_t)ts->n_bases);
    bad.scales = scales;
    bad.base_stride = p->nparams;
    float *rows = nevo_alloc(sizeof(float) * p->nparams * (size_t)ts->n_bases);
    for (int j = 0; j < ts->n_bases; j++)
        memcpy(rows + (size_t)j * p->nparams, ts->bases + (size_t)j * ts->base_stride, sizeof(float) * p->nparams);
    bad.bases = rows;
    CHECK(nevo_taskset_write(&bad, &b, &err) == NEVO_OK);
    nevo_buf_free(&b);
    static const float wrong[3] = {0.0f, -1.0f, NAN};
    for (int i = 0; i < 3; i++) {
        scales[p->nparams + 5] = wrong[i];
        CHECK(nevo_taskset_write(&bad, &b, &err) == NEVO_ERR_INVALID);
        CHECK_MSG(strstr(err.msg, "scale 5 of base 1"), "%s", err.msg);
    }
    bad.scales = NULL;
    CHECK(nevo_taskset_write(&bad, &b, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "no scale rows"), "%s", err.msg);
    bad.scales = ts->scales;
    bad.base_stride = ts->base_stride;
    bad.bases = ts->bases;
    bad.states_cap = 0;
    CHECK(nevo_evaluate_tasks(ev, &bad, NULL, NULL, NULL, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "keep 0 states"), "%s", err.msg);
    /* results: states beyond the cap */
    NevoEpisode *res = nevo_alloc(sizeof(NevoEpisode) * (size_t)ts->n_tasks);
    NevoStates *st = nevo_alloc(sizeof(NevoStates) * (size_t)ts->n_tasks);
    for (int t = 0; t < ts->n_tasks; t++) {
        nevo_states_init(&st[t], ts->obs_dim, 30);
        st[t].n = t == 3 ? 26 : 2;
    }
    CHECK(nevo_results_write(ts, res, NULL, st, &b, &err) == NEVO_ERR_INVALID);
    NevoTaskSet wide = *ts;
    wide.states_cap = 30;
    CHECK(nevo_results_write(&wide, res, NULL, st, &b, &err) == NEVO_OK);
    NevoStates *got = nevo_alloc(sizeof(NevoStates) * (size_t)ts->n_tasks);
    CHECK(nevo_results_read(&wide, b.data, b.len, res, NULL, got, &err) == NEVO_OK);
    CHECK(got[3].n == 26 && got[0].n == 2 && memcmp(got[3].obs, st[3].obs, sizeof(float) * 26 * 4) == 0);
    for (int t = 0; t < ts->n_tasks; t++) nevo_states_free(&got[t]);
    CHECK(nevo_results_read(ts, b.data, b.len, res, NULL, got, &err) == NEVO_ERR_CORRUPT);
    nevo_buf_free(&b);
    for (int t = 0; t < ts->n_tasks; t++) nevo_states_free(&st[t]);
    free(got), free(st), free(res), free(scales), free(rows);
    nevo_algo_free(a);
    nevo_evaluator_free(ev);
    nevo_noise_free(noise);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    nevo_env_free(env);
}
