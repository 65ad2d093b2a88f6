/* The optimisers (optim.h): each rule's first steps against values worked out here, in
 * double arithmetic written out in the test (and, where round, by hand); clipping;
 * weight decay; the state's bytes and the refusal of bad ones. ES's use of the module
 * (bit-identical to its earlier update) is covered by tests/test_algo.c's ES tests. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "nevo/optim.h"

static NevoOptimConfig config(const char *name, double lr) {
    NevoOptimConfig c = {0};
    snprintf(c.name, sizeof c.name, "%s", name);
    c.lr = lr;
    c.momentum = 0.9;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.decay = 0.9;
    c.eps = 1e-8;
    return c;
}

static NevoOptim *make(const NevoOptimConfig *c, size_t n) {
    NevoOptim *o = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_optim_new(c, n, &o, &err) == NEVO_OK, "%s", err.msg);
    return o;
}

TEST(optim_sgd_heavy_ball) {
    NevoOptimConfig c = config("sgd", 0.1);
    NevoOptim *o = make(&c, 2);
    float theta[2] = {1.0f, -2.0f};
    const double grad[2] = {0.5, -0.25};
    /* m = 0.9 m + g, theta -= 0.1 m: m = 0.5, then 0.95, then 1.355 */
    const double want0[3] = {0.95, 0.855, 0.7195};
    float th = 1.0f, th1 = -2.0f;
    double m = 0.0, m1 = 0.0;
    for (int s = 0; s < 3; s++) {
        nevo_optim_step(o, theta, grad, 1.0);
        m = 0.9 * m + (1.0 - 0.0) * (0.5 * 1.0 + 0.0 * th);
        th = (float)(th - 0.1 * m);
        m1 = 0.9 * m1 + (1.0 - 0.0) * (-0.25 * 1.0 + 0.0 * th1);
        th1 = (float)(th1 - 0.1 * m1);
        CHECK(theta[0] == th && theta[1] == th1 && o->m[0] == m && o->m[1] == m1);
        CHECK_NEAR(theta[0], want0[s], 1e-6);
        CHECK(o->v[0] == 0.0 && o->v[1] == 0.0);
    }
    CHECK_NEAR(theta[1], -2.0 + 0.1 * 0.25 * (1 + 1.9 + 2.71), 1e-6);
    CHECK_EQ_INT(o->t, 3);
    nevo_optim_free(o);
}

/* OpenAI ES's SGD: dampening = momentum, an exponential moving average of g. */
TEST(optim_sgd_moving_average) {
    NevoOptimConfig c = config("sgd", 0.1);
    NevoOptim *o = make(&c, 1);
    o->dampening = o->momentum;
    float theta[1] = {1.0f};
    const double grad[1] = {0.5};
    /* m = 0.9 m + 0.1 g: 0.05, 0.095, 0.1355; theta -= 0.1 m */
    const double want[3] = {0.995, 0.9855, 0.97195};
    float th = 1.0f;
    double m = 0.0;
    for (int s = 0; s < 3; s++) {
        nevo_optim_step(o, theta, grad, 1.0);
        m = 0.9 * m + (1.0 - 0.9) * (0.5 * 1.0 + 0.0 * th);
        th = (float)(th - 0.1 * m);
        CHECK(theta[0] == th && o->m[0] == m);
        CHECK_NEAR(theta[0], want[s], 1e-6);
    }
    nevo_optim_free(o);
}

/* With a constant gradient Adam's bias-corrected step is lr (to eps): 1 -> 0.9 -> 0.8. */
TEST(optim_adam_first_steps) {
    NevoOptimConfig c = config("adam", 0.1);
    NevoOptim *o = make(&c, 2);
    float theta[2] = {1.0f, 0.5f};
    const double grad[2] = {0.5, -2.0};
    float th[2] = {1.0f, 0.5f};
    double m[2] = {0, 0}, v[2] = {0, 0};
    for (int t = 1; t <= 3; t++) {
        nevo_optim_step(o, theta, grad, 1.0);
        double a = 0.1 * sqrt(1.0 - pow(0.999, t)) / (1.0 - pow(0.9, t));
        for (int k = 0; k < 2; k++) {
            double g = grad[k] * 1.0 + 0.0 * th[k];
            m[k] = 0.9 * m[k] + (1.0 - 0.9) * g;
            v[k] = 0.999 * v[k] + (1.0 - 0.999) * g * g;
            th[k] = (float)(th[k] - a * m[k] / (sqrt(v[k]) + 1e-8));
            CHECK(theta[k] == th[k] && o->m[k] == m[k] && o->v[k] == v[k]);
        }
        CHECK_NEAR(theta[0], 1.0 - 0.1 * t, 1e-6);
        CHECK_NEAR(theta[1], 0.5 + 0.1 * t, 1e-6);
    }
    /* the moments by hand: m = 0.05, 0.095, 0.1355; v = 0.00025 (1 + 0.999 + 0.999^2) */
    CHECK_NEAR(o->m[0], 0.1355, 1e-15);
    CHECK_NEAR(o->v[0], 0.00025 * (1 + 0.999 + 0.998001), 1e-15);
    nevo_optim_free(o);
}

TEST(optim_rmsprop_first_steps) {
    NevoOptimConfig c = config("rmsprop", 0.01);
    c.momentum = 0.5;
    c.eps = 1e-6;
    NevoOptim *o = make(&c, 1);
    float theta[1] = {1.0f};
    const double grad[1] = {0.5};
    float th = 1.0f;
    double ms = 0.0, mom = 0.0;
    for (int s = 0; s < 3; s++) {
        nevo_optim_step(o, theta, grad, 1.0);
        double g = 0.5 * 1.0 + 0.0 * th;
        ms = 0.9 * ms + (1.0 - 0.9) * g * g;
        mom = 0.5 * mom + 0.01 * g / sqrt(ms + 1e-6);
        th = (float)(th - mom);
        CHECK(theta[0] == th && o->v[0] == ms && o->m[0] == mom);
    }
    /* by hand, step 1: ms = 0.025, mom = 0.005 / sqrt(0.025001) = 0.0316221...;
     * step 2: ms = 0.0475, mom = mom / 2 + 0.005 / sqrt(0.047501) */
    double mom1 = 0.005 / sqrt(0.025001), mom2 = mom1 / 2 + 0.005 / sqrt(0.047501);
    double mom3 = mom2 / 2 + 0.005 / sqrt(0.9 * 0.0475 + 0.025 + 1e-6);
    CHECK_NEAR(theta[0], 1.0 - mom1 - mom2 - mom3, 1e-6);
    nevo_optim_free(o);
}

/* L2 added to the gradient: with grad 0 it alone moves theta, with the caller's scale on
 * grad only (a negative scale is an ascent direction). */
TEST(optim_weight_decay) {
    NevoOptimConfig c = config("sgd", 0.5);
    c.momentum = 0.0;
    c.weight_decay = 0.1;
    NevoOptim *o = make(&c, 2);
    float theta[2] = {2.0f, -4.0f};
    const double zero[2] = {0.0, 0.0};
    nevo_optim_step(o, theta, zero, 1.0);
    CHECK(theta[0] == 1.9f && theta[1] == -3.8f); /* theta -= 0.5 * 0.1 theta */
    const double grad[2] = {0.25, 0.25};
    nevo_optim_step(o, theta, grad, -2.0); /* g = -0.5 + 0.1 theta */
    CHECK(theta[0] == (float)(1.9f - 0.5 * (0.25 * -2.0 + 0.1 * 1.9f)));
    CHECK_NEAR(theta[0], 1.9 - 0.5 * (-0.5 + 0.19), 1e-6);
    CHECK_NEAR(theta[1], -3.8 - 0.5 * (-0.5 - 0.38), 1e-6);
    nevo_optim_free(o);
}

TEST(optim_clip) {
    double g[2] = {3.0, 4.0};
    CHECK(nevo_optim_clip(g, 2, 1.0) == 5.0);
    CHECK(g[0] == 3.0 * (1.0 / 5.0) && g[1] == 4.0 * (1.0 / 5.0));
    CHECK_NEAR(sqrt(g[0] * g[0] + g[1] * g[1]), 1.0, 1e-15);
    /* at or below the limit, or with no limit, untouched */
    double h[3] = {0.3, 0.4, 0.0};
    CHECK_NEAR(nevo_optim_clip(h, 3, 1.0), 0.5, 1e-15);
    CHECK(h[0] == 0.3 && h[1] == 0.4 && h[2] == 0.0);
    double e[2] = {3.0, 4.0};
    CHECK(nevo_optim_clip(e, 2, 5.0) == 5.0 && e[0] == 3.0 && e[1] == 4.0);
    CHECK(nevo_optim_clip(e, 2, 0.0) == 5.0 && e[0] == 3.0 && e[1] == 4.0);
    /* a large gradient: the norm after is the limit to rounding */
    double big[100];
    for (int k = 0; k < 100; k++) big[k] = 1e3 * (k % 7 - 3);
    nevo_optim_clip(big, 100, 2.5);
    double s = 0.0;
    for (int k = 0; k < 100; k++) s += big[k] * big[k];
    CHECK_NEAR(sqrt(s), 2.5, 1e-14);
}

/* clip_norm in the step clips scale * grad (not the decay term) and says the norm. */
TEST(optim_step_clips) {
    NevoOptimConfig c = config("sgd", 1.0);
    c.momentum = 0.0;
    c.clip_norm = 1.0;
    NevoOptim *o = make(&c, 2);
    float theta[2] = {0.0f, 0.0f};
    const double grad[2] = {3.0, 4.0};
    CHECK(nevo_optim_step(o, theta, grad, 2.0) == 10.0); /* |2 (3, 4)| = 10 -> (0.6, 0.8) */
    CHECK(theta[0] == (float)(0.0 - 1.0 * (3.0 * (2.0 * (1.0 / 10.0)))));
    CHECK_NEAR(theta[0], -0.6, 1e-7);
    CHECK_NEAR(theta[1], -0.8, 1e-7);
    const double small[2] = {0.03, 0.04};
    CHECK_NEAR(nevo_optim_step(o, theta, small, 1.0), 0.05, 1e-15); /* below: not clipped */
    CHECK_NEAR(theta[0], -0.63, 1e-7);
    nevo_optim_free(o);
}

TEST(optim_config_refused) {
    NevoError err = {0};
    NevoOptim *o = NULL;
    NevoOptimConfig c = config("adagrad", 0.1);
    CHECK(nevo_optim_new(&c, 4, &o, &err) == NEVO_ERR_INVALID && o == NULL);
    CHECK_MSG(strstr(err.msg, "optim.name") && strstr(err.msg, "adagrad"), "%s", err.msg);
    c = config("adam", 0.0);
    CHECK(nevo_optim_new(&c, 4, &o, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "optim.lr"), "%s", err.msg);
    c = config("sgd", 0.1);
    c.momentum = 1.0;
    CHECK(nevo_optim_new(&c, 4, &o, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "optim.momentum"), "%s", err.msg);
    c = config("rmsprop", 0.1);
    c.clip_norm = NAN;
    CHECK(nevo_optim_new(&c, 4, &o, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "optim.clip_norm"), "%s", err.msg);
    c = config("adam", 0.1);
    c.eps = 0.0;
    CHECK(nevo_optim_new(&c, 4, &o, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "optim.eps"), "%s", err.msg);
    CHECK(strcmp(nevo_optim_name(NEVO_OPTIM_RMSPROP), "rmsprop") == 0);
    nevo_optim_free(NULL);
}

/* Two steps, saved; a copy loaded from the bytes then steps as the original does. */
TEST(optim_state_round_trip) {
    const char *names[] = {"sgd", "adam", "rmsprop"};
    for (int i = 0; i < 3; i++) {
        NevoOptimConfig c = config(names[i], 0.01);
        NevoOptim *a = make(&c, 3), *b = make(&c, 3);
        float ta[3] = {0.1f, -0.2f, 0.3f};
        const double grad[3] = {1.0, -0.5, 0.25};
        nevo_optim_step(a, ta, grad, 1.0);
        nevo_optim_step(a, ta, grad, 1.0);
        NevoBuf buf = {0};
        nevo_optim_save(a, &buf);
        CHECK_EQ_INT(buf.len, 4 + 8 + 3 * 16 + 8);
        NevoReader r = nevo_reader(buf.data, buf.len);
        NevoError err = {0};
        CHECK_MSG(nevo_optim_load(b, &r, &err) == NEVO_OK, "%s", err.msg);
        CHECK(nevo_reader_ok(&r, true));
        CHECK(b->t == 2 && memcmp(a->m, b->m, 24) == 0 && memcmp(a->v, b->v, 24) == 0);
        float tb[3];
        memcpy(tb, ta, sizeof tb);
        nevo_optim_step(a, ta, grad, 1.0);
        nevo_optim_step(b, tb, grad, 1.0);
        CHECK(memcmp(ta, tb, sizeof ta) == 0);
        /* the headerless state, as ES stores it */
        NevoBuf s = {0};
        nevo_optim_write_state(a, &s);
        CHECK_EQ_INT(s.len, 3 * 16 + 8);
        nevo_optim_reset(b);
        CHECK(b->t == 0 && b->m[0] == 0.0);
        r = nevo_reader(s.data, s.len);
        CHECK(nevo_optim_read_state(b, &r) == 1 && nevo_reader_ok(&r, true));
        CHECK(b->t == 3 && memcmp(a->m, b->m, 24) == 0 && memcmp(a->v, b->v, 24) == 0);
        nevo_buf_free(&s);
        nevo_buf_free(&buf);
        nevo_optim_free(a);
        nevo_optim_free(b);
    }
}

/* Loads state bytes into o; the status, and o reset on failure. */
static NevoStatus load_bytes(NevoOptim *o, const NevoBuf *buf, size_t len, NevoError *err) {
    NevoReader r = nevo_reader(buf->data, len);
    NevoStatus st = nevo_optim_load(o, &r, err);
    if (st != NEVO_OK) CHECK(o->t == 0 && o->m[0] == 0.0 && o->v[0] == 0.0);
    return st;
}

TEST(optim_state_refused) {
    NevoOptimConfig ca = config("adam", 0.01), cs = config("sgd", 0.01);
    NevoOptim *a = make(&ca, 2), *a3 = make(&ca, 3), *s = make(&cs, 2);
    float th[2] = {0.5f, 0.5f};
    const double grad[2] = {1.0, 2.0};
    nevo_optim_step(a, th, grad, 1.0);
    NevoBuf buf = {0};
    nevo_optim_save(a, &buf);
    NevoError err = {0};
    NevoOptim *dst = make(&ca, 2);
    /* truncated, at every length */
    for (size_t len = 0; len < buf.len; len++) {
        nevo_optim_step(dst, th, grad, 1.0);
        CHECK(load_bytes(dst, &buf, len, &err) == NEVO_ERR_CORRUPT);
        CHECK_MSG(strstr(err.msg, "truncated"), "%zu: %s", len, err.msg);
    }
    /* another rule, another size */
    CHECK(load_bytes(s, &buf, buf.len, &err) == NEVO_ERR_CORRUPT);
    CHECK_MSG(strstr(err.msg, "adam") && strstr(err.msg, "sgd"), "%s", err.msg);
    CHECK(load_bytes(a3, &buf, buf.len, &err) == NEVO_ERR_CORRUPT);
    CHECK_MSG(strstr(err.msg, "2 parameters") && strstr(err.msg, "has 3"), "%s", err.msg);
    /* values out of range: a NaN moment, a negative mean square, t beyond int64 */
    const size_t m0 = 12, v0 = 12 + 16, t0 = 12 + 32;
    double bad_values[2] = {NAN, -1.0};
    size_t where[2] = {m0, v0};
    for (int i = 0; i < 2; i++) {
        NevoBuf c = {0};
        nevo_buf_put(&c, buf.data, buf.len);
        memcpy(c.data + where[i], &bad_values[i], 8);
        CHECK(load_bytes(dst, &c, c.len, &err) == NEVO_ERR_CORRUPT);
        CHECK_MSG(strstr(err.msg, "out of range"), "%s", err.msg);
        nevo_buf_free(&c);
    }
    NevoBuf c = {0};
    nevo_buf_put(&c, buf.data, buf.len);
    c.data[t0 + 7] = 0x80;
    CHECK(load_bytes(dst, &c, c.len, &err) == NEVO_ERR_CORRUPT);
    nevo_buf_free(&c);
    /* SGD keeps no second moment: a state with one is not SGD's */
    NevoBuf sb = {0};
    nevo_optim_save(s, &sb);
    double one = 1.0;
    memcpy(sb.data + v0, &one, 8);
    CHECK(load_bytes(s, &sb, sb.len, &err) == NEVO_ERR_CORRUPT);
    nevo_buf_free(&sb);
    /* the original still loads */
    CHECK(load_bytes(dst, &buf, buf.len, &err) == NEVO_OK && dst->t == 1);
    nevo_buf_free(&buf);
    nevo_optim_free(a);
    nevo_optim_free(a3);
    nevo_optim_free(s);
    nevo_optim_free(dst);
}
