/* Supervised learning (supervised.h): scores against a hand computation, the batches a
 * task's seed names, SGD learning a synthetic problem to a threshold, bit-identical
 * training across thread counts and across a stop and --resume, evolution on a
 * dataset, `nevo eval` of a classifier, and bad or missing data refused with exit 2. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/algo.h"
#include "nevo/noise.h"
#include "nevo/rng.h"
#include "nevo/supervised.h"


/* The synthetic problem: S x S images, class c marked by a bright 3 x 3 block whose
 * position depends on c, over uniform noise in [0, 0.3). */
#define S 8
#define CLASSES 3

static void synth(uint64_t seed, int n, uint8_t *px, uint8_t *labels) {
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_USER, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        int c = (int)nevo_rng_below(&rng, CLASSES);
        labels[i] = (uint8_t)c;
        uint8_t *im = px + (size_t)i * S * S;
        for (int k = 0; k < S * S; k++) im[k] = (uint8_t)nevo_rng_below(&rng, 77);
        int r0 = 1 + 2 * c, c0 = 4 - c; /* blocks at (1,4), (3,3), (5,2) */
        for (int r = 0; r < 3; r++)
            for (int q = 0; q < 3; q++) im[(r0 + r) * S + c0 + q] = (uint8_t)(200 + nevo_rng_below(&rng, 56));
    }
}

typedef struct Data {
    float *x;
    int *y;
    NevoDataView v;
} Data;

static Data data_new(uint64_t seed, int n) {
    uint8_t *px = malloc((size_t)n * S * S), *lb = malloc((size_t)n);
    synth(seed, n, px, lb);
    Data d;
    d.x = malloc(sizeof(float) * (size_t)n * S * S);
    d.y = malloc(sizeof(int) * (size_t)n);
    for (size_t k = 0; k < (size_t)n * S * S; k++) d.x[k] = px[k] / 255.0f;
    for (int i = 0; i < n; i++) d.y[i] = lb[i];
    d.v = (NevoDataView){n, S * S, CLASSES, d.x, d.y};
    free(px);
    free(lb);
    return d;
}

static void data_free(Data *d) {
    free(d->x);
    free(d->y);
}

static NevoPolicy *classifier(const char *hidden_json, int conv) {
    NevoEnvSpec spec;
    memset(&spec, 0, sizeof spec);
    spec.name = "synthetic";
    spec.obs_rank = 3;
    spec.obs_shape[0] = spec.obs_shape[1] = S;
    spec.obs_shape[2] = 1;
    spec.obs_dim = S * S;
    spec.action_kind = NEVO_SPACE_DISCRETE;
    spec.n_actions = CLASSES;
    spec.action_dim = 1;
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    NevoError err;
    char doc[256];
    snprintf(doc, sizeof doc, "{\"policy\": {\"hidden\": %s, \"activation\": \"relu\"%s}}", hidden_json,
             conv ? ", \"conv_filters\": [4], \"conv_kernels\": [3], \"conv_strides\": [2]" : "");
    CHECK_MSG(nevo_config_apply_json(&cfg, doc, "test", &err) == NEVO_OK, "%s", err.msg);
    NevoPolicy *p;
    CHECK_MSG(nevo_policy_new(&spec, &cfg.policy, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    return p;
}

TEST(supervised_eval_by_hand) {
    /* no hidden layer: logits = x W + b, W (64, 3); two samples */
    NevoPolicy *p = classifier("[]", 0);
    CHECK_EQ_INT(p->nparams, S * S * CLASSES + CLASSES);
    float *theta = calloc(p->nparams, sizeof(float));
    float x[2 * S * S] = {0};
    int y[2] = {2, 0};
    x[0] = 1.0f;              /* sample 0: pixel 0 only */
    x[S * S + 5] = 0.5f;      /* sample 1: pixel 5 at 0.5 */
    theta[0 * 3 + 1] = 2.0f;  /* pixel 0 -> class 1 */
    theta[5 * 3 + 0] = 4.0f;  /* pixel 5 -> class 0 */
    theta[S * S * 3 + 2] = 0.5f; /* bias of class 2 */
    NevoDataView d = {2, S * S, CLASSES, x, y};
    NevoPool *pool = nevo_pool_new(2);
    double loss, acc;
    NevoError err;
    CHECK(nevo_supervised_eval(p, theta, &d, NULL, 2, pool, &loss, &acc, &err) == NEVO_OK);
    /* sample 0: logits (0, 2, 0.5), label 2; sample 1: logits (2, 0, 0.5), label 0 */
    double l0 = log(exp(0.0) + exp(2.0) + exp(0.5)) - 0.5, l1 = log(exp(2.0) + exp(0.0) + exp(0.5)) - 2.0;
    CHECK_NEAR(loss, (l0 + l1) / 2, 1e-12);
    CHECK_NEAR(acc, 0.5, 0.0); /* sample 0 is called 1, sample 1 is right */
    int idx[1] = {1};
    CHECK(nevo_supervised_eval(p, theta, &d, idx, 1, pool, &loss, &acc, &err) == NEVO_OK);
    CHECK_NEAR(loss, l1, 1e-12);
    CHECK_NEAR(acc, 1.0, 0.0);
    theta[0] = NAN;
    CHECK(nevo_supervised_eval(p, theta, &d, NULL, 2, pool, &loss, &acc, &err) == NEVO_ERR_NUMERIC);
    nevo_pool_free(pool);
    free(theta);
    nevo_policy_free(p);
}

TEST(supervised_batches_named_by_seed) {
    enum { N = 1000, B = 100 };
    int a[N], b[N], c[N], seen[N] = {0};
    nevo_supervised_batch(42, N, B, a);
    nevo_supervised_batch(42, N, B, b);
    nevo_supervised_batch(43, N, B, c);
    CHECK(memcmp(a, b, sizeof(int) * B) == 0);
    CHECK(memcmp(a, c, sizeof(int) * B) != 0);
    for (int i = 0; i < B; i++) {
        CHECK(a[i] >= 0 && a[i] < N);
        CHECK_MSG(!seen[a[i]]++, "sample %d drawn twice", a[i]);
    }
    nevo_supervised_batch(42, N, 0, a); /* the whole split, in order */
    for (int i = 0; i < N; i++) CHECK_EQ_INT(a[i], i);
}

static NevoSGD *trainer(const NevoPolicy *p, const NevoDataView *d, NevoPool *pool, int batch, const char *opt,
                        double lr) {
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    cfg.data.batch = batch;
    snprintf(cfg.optim.name, sizeof cfg.optim.name, "%s", opt);
    cfg.optim.lr = lr;
    NevoNoise *noise = nevo_noise_new(1 << 20, pool);
    float *theta = calloc(p->nparams, sizeof(float));
    nevo_policy_init_params(p, noise, 7, 0, 0, theta);
    NevoSGD *s;
    NevoError err;
    CHECK_MSG(nevo_sgd_new(&cfg, p, d, pool, theta, &s, &err) == NEVO_OK, "%s", err.msg);
    free(theta);
    nevo_noise_free(noise);
    return s;
}

TEST(supervised_sgd_learns_a_synthetic_problem) {
    Data train = data_new(1, 300), test = data_new(2, 200);
    NevoPolicy *p = classifier("[16]", 1);
    NevoPool *pool = nevo_pool_new(2);
    NevoSGD *s = trainer(p, &train.v, pool, 16, "adam", 0.01);
    NevoError err;
    double loss0 = 0, acc0 = 0, loss, acc, first = 0, train_loss = 0;
    CHECK(nevo_supervised_eval(p, nevo_sgd_params(s), &test.v, NULL, test.v.n, pool, &loss0, &acc0, &err) == NEVO_OK);
    for (int e = 0; e < 15; e++) {
        CHECK_MSG(nevo_sgd_epoch(s, &train_loss, &err) == NEVO_OK, "%s", err.msg);
        if (e == 0) first = train_loss;
    }
    CHECK(nevo_supervised_eval(p, nevo_sgd_params(s), &test.v, NULL, test.v.n, pool, &loss, &acc, &err) == NEVO_OK);
    CHECK_MSG(acc >= 0.95 && acc0 < 0.6, "test accuracy %.3f after training (%.3f before)", acc, acc0);
    CHECK_MSG(loss < 0.3 * loss0 && train_loss < first, "test loss %.4f from %.4f", loss, loss0);
    CHECK_EQ_INT(nevo_sgd_epochs(s), 15);
    CHECK_EQ_INT(nevo_sgd_steps(s), 15 * ((300 + 15) / 16));
    nevo_sgd_free(s);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    data_free(&train);
    data_free(&test);
}

/* Training's bits depend on the config alone: 1 thread and 3 threads, a batch that is
 * not a whole number of shards, every optimiser; and a saved state resumes exactly. */
TEST(supervised_sgd_bit_identical_across_threads_and_resume) {
    Data train = data_new(3, 150);
    NevoPolicy *p = classifier("[12]", 1);
    const char *opts[3] = {"sgd", "adam", "rmsprop"};
    for (int o = 0; o < 3; o++) {
        NevoPool *one = nevo_pool_new(1), *three = nevo_pool_new(3);
        NevoSGD *a = trainer(p, &train.v, one, 40, opts[o], 0.01), *b = trainer(p, &train.v, three, 40, opts[o], 0.01);
        NevoError err;
        double la, lb;
        for (int e = 0; e < 2; e++) {
            CHECK(nevo_sgd_epoch(a, &la, &err) == NEVO_OK);
            CHECK(nevo_sgd_epoch(b, &lb, &err) == NEVO_OK);
            CHECK_MSG(la == lb, "%s epoch %d: loss %.17g vs %.17g", opts[o], e, la, lb);
        }
        CHECK_MSG(memcmp(nevo_sgd_params(a), nevo_sgd_params(b), sizeof(float) * p->nparams) == 0, "%s", opts[o]);
        /* save after 2 epochs, load into a fresh trainer, one more epoch each */
        NevoBuf buf = {0};
        nevo_sgd_save(a, &buf);
        NevoSGD *c = trainer(p, &train.v, three, 40, opts[o], 0.01);
        NevoReader r = nevo_reader(buf.data, buf.len);
        CHECK_MSG(nevo_sgd_load(c, &r, &err) == NEVO_OK && nevo_reader_ok(&r, true), "%s", err.msg);
        CHECK(nevo_sgd_epoch(a, &la, &err) == NEVO_OK);
        CHECK(nevo_sgd_epoch(c, &lb, &err) == NEVO_OK);
        CHECK(la == lb);
        CHECK(memcmp(nevo_sgd_params(a), nevo_sgd_params(c), sizeof(float) * p->nparams) == 0);
        /* a state cut short or of another network is refused */
        NevoReader cut = nevo_reader(buf.data, buf.len / 2);
        CHECK(nevo_sgd_load(c, &cut, &err) == NEVO_ERR_CORRUPT);
        nevo_buf_free(&buf);
        nevo_sgd_free(a);
        nevo_sgd_free(b);
        nevo_sgd_free(c);
        nevo_pool_free(one);
        nevo_pool_free(three);
    }
    nevo_policy_free(p);
    data_free(&train);
}

/* SGD as replicas (replica.h) that are threads, each with its own trainer and pool:
 * after two epochs every replica holds the parameters one trainer alone reaches, bit
 * for bit, for 2, 3 and 5 replicas (5 > a batch's 4 shards: one computes nothing). */
typedef struct SgdReplica {
    NevoSGD *s;
    double loss;
    NevoStatus st;
} SgdReplica;

static void *sgd_replica_main(void *arg) {
    SgdReplica *r = arg;
    NevoError err;
    for (int e = 0; e < 2 && r->st == NEVO_OK; e++) r->st = nevo_sgd_epoch(r->s, &r->loss, &err);
    return NULL;
}

TEST(supervised_sgd_replicas_hold_one_process_parameters) {
    Data train = data_new(3, 230);
    NevoPolicy *p = classifier("[12]", 1);
    NevoPool *pool = nevo_pool_new(2);
    NevoSGD *alone = trainer(p, &train.v, pool, 100, "adam", 0.01);
    NevoError err;
    double loss = 0;
    for (int e = 0; e < 2; e++) CHECK(nevo_sgd_epoch(alone, &loss, &err) == NEVO_OK);
    static const int counts[] = {2, 3, 5};
    for (int c = 0; c < 3; c++) {
        int n = counts[c];
        NevoComm *comms[5];
        NevoPool *pools[5];
        SgdReplica reps[5];
        pthread_t th[5];
        nevo_comm_threads(n, comms);
        for (int r = 0; r < n; r++) {
            pools[r] = nevo_pool_new(1 + r % 2);
            reps[r] = (SgdReplica){trainer(p, &train.v, pools[r], 100, "adam", 0.01), 0, NEVO_OK};
            nevo_sgd_set_comm(reps[r].s, comms[r]);
            CHECK(pthread_create(&th[r], NULL, sgd_replica_main, &reps[r]) == 0);
        }
        for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
        for (int r = 0; r < n; r++) {
            CHECK_EQ_INT(reps[r].st, NEVO_OK);
            CHECK_MSG(reps[r].loss == loss, "%d replicas: replica %d's epoch loss %.17g, alone %.17g", n, r,
                      reps[r].loss, loss);
            CHECK_MSG(memcmp(nevo_sgd_params(reps[r].s), nevo_sgd_params(alone), sizeof(float) * p->nparams) == 0,
                      "%d replicas: replica %d's parameters differ from one trainer's", n, r);
            nevo_sgd_free(reps[r].s);
            nevo_pool_free(pools[r]);
            nevo_comm_free(comms[r]);
        }
    }
    nevo_sgd_free(alone);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    data_free(&train);
}

TEST(supervised_sgd_divergence_is_an_error) {
    Data train = data_new(4, 64);
    NevoPolicy *p = classifier("[8]", 0);
    NevoPool *pool = nevo_pool_new(1);
    NevoSGD *s = trainer(p, &train.v, pool, 16, "sgd", 1e30);
    NevoError err;
    double loss;
    NevoStatus st = NEVO_OK;
    for (int e = 0; e < 5 && st == NEVO_OK; e++) st = nevo_sgd_epoch(s, &loss, &err);
    CHECK_EQ_INT(st, NEVO_ERR_NUMERIC);
    CHECK_CONTAINS(err.msg, "not finite");
    CHECK_CONTAINS(err.msg, "optim.lr");
    nevo_sgd_free(s);
    nevo_pool_free(pool);
    nevo_policy_free(p);
    data_free(&train);
}

/* ---- through the command --------------------------------------------------------- */

static void put_u32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    CHECK(fwrite(b, 1, 4, f) == 4);
}

/* dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte of the synthetic problem */
static void write_idx_dir(const char *name, int n_train, int n_test) {
    char dir[900];
    snprintf(dir, sizeof dir, "%s/%s", test_tmpdir(), name);
    mkdir(dir, 0755);
    for (int split = 0; split < 2; split++) {
        int n = split ? n_test : n_train;
        uint8_t *px = malloc((size_t)n * S * S), *lb = malloc((size_t)n);
        synth(10 + split, n, px, lb);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split ? "t10k" : "train");
        FILE *f = fopen(path, "wb");
        CHECK(f);
        put_u32(f, 0x803), put_u32(f, (uint32_t)n), put_u32(f, S), put_u32(f, S);
        CHECK(fwrite(px, 1, (size_t)n * S * S, f) == (size_t)n * S * S && fclose(f) == 0);
        snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split ? "t10k" : "train");
        f = fopen(path, "wb");
        CHECK(f);
        put_u32(f, 0x801), put_u32(f, (uint32_t)n);
        CHECK(fwrite(lb, 1, (size_t)n, f) == (size_t)n && fclose(f) == 0);
        free(px);
        free(lb);
    }
}

static int nevo(char *out, size_t n, const char *args) {
    return test_run(out, n, "cd %s && %s/%s %s", test_tmpdir(), getenv("PWD"), test_nevo_bin(), args);
}

static char *file_text(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    char *t = test_read_file(path, NULL);
    CHECK_MSG(t, "cannot read %s", path);
    return t;
}

static void same_file(const char *a, const char *b) {
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/%s", test_tmpdir(), a);
    snprintf(pb, sizeof pb, "%s/%s", test_tmpdir(), b);
    size_t na, nb;
    char *x = test_read_file(pa, &na), *y = test_read_file(pb, &nb);
    CHECK_MSG(x && y && na == nb && memcmp(x, y, na) == 0, "%s and %s differ", a, b);
    free(x);
    free(y);
}

#define SGD_ARGS                                                                                             \
    "train cfg.json dataset=idx algo=sgd data.batch=24 optim.lr=0.01 'policy.hidden=[16]' policy.activation=relu " \
    "'policy.conv_filters=[4]' 'policy.conv_strides=[2]' --quiet"

TEST(supervised_cli_sgd_threads_resume_and_eval) {
    char out[8192];
    write_idx_dir("idx", 200, 100);
    char path[1024];
    snprintf(path, sizeof path, "%s/cfg.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("{\"seed\": 5}\n", f) >= 0 && fclose(f) == 0);
    CHECK_EQ_INT(nevo(out, sizeof out, SGD_ARGS " generations=4 --threads 1 --out a"), 0);
    CHECK_CONTAINS(out, "\"test_accuracy\"");
    CHECK_EQ_INT(nevo(out, sizeof out, SGD_ARGS " generations=2 --threads 2 --out b"), 0);
    CHECK_EQ_INT(nevo(out, sizeof out, SGD_ARGS " generations=4 --threads 2 --resume b"), 0);
    same_file("a/policy.nevo", "b/policy.nevo");
    char *m = file_text("b/metrics.jsonl");
    CHECK_CONTAINS(m, "\"generation\": 3");
    CHECK_CONTAINS(m, "\"train_loss\"");
    CHECK_CONTAINS(m, "\"test_accuracy\"");
    free(m);
    /* the classifier, evaluated on its dataset's test split */
    CHECK_EQ_INT(nevo(out, sizeof out, "eval a/policy.nevo"), 0);
    CHECK_CONTAINS(out, "\"test_samples\":100");
    CHECK_CONTAINS(out, "\"test_accuracy\"");
    char *summary = file_text("a/summary.json");
    const char *acc = strstr(summary, "\"test_accuracy\": ");
    CHECK(acc);
    CHECK_MSG(atof(acc + 17) >= 0.9, "4 epochs on the synthetic problem: %s", summary);
    free(summary);
    /* an env policy takes no --dataset */
    CHECK_EQ_INT(nevo(out, sizeof out, "eval a/policy.nevo --dataset /nonexistent"), 2);
    CHECK_CONTAINS(out, "/nonexistent");
}

TEST(supervised_cli_es_on_a_dataset) {
    char out[8192];
    write_idx_dir("idx", 120, 60);
    char path[1024];
    snprintf(path, sizeof path, "%s/cfg.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("{\"seed\": 6}\n", f) >= 0 && fclose(f) == 0);
    const char *args = "train cfg.json dataset=idx algo=es population=8 es.center_episodes=1 "
                       "data.fitness_batch=50 'policy.hidden=[8]' --quiet generations=3";
    char a[512], b[512];
    snprintf(a, sizeof a, "%s --threads 1 --out es1", args);
    snprintf(b, sizeof b, "%s --threads 2 --out es2", args);
    CHECK_EQ_INT(nevo(out, sizeof out, a), 0);
    CHECK_CONTAINS(out, "\"test_accuracy\"");
    CHECK_EQ_INT(nevo(out, sizeof out, b), 0);
    same_file("es1/policy.nevo", "es2/policy.nevo");
    /* novelty needs behaviours a dataset does not have */
    CHECK_EQ_INT(nevo(out, sizeof out, "train cfg.json dataset=idx algo=ns-es --quiet --out ns"), 2);
    CHECK_CONTAINS(out, "behaviours");
    /* sgd without a dataset */
    CHECK_EQ_INT(nevo(out, sizeof out, "train cfg.json algo=sgd --quiet --out x"), 2);
    CHECK_CONTAINS(out, "dataset");
}

TEST(supervised_cli_bad_data_exit_2_and_write_nothing) {
    char out[8192], path[1024];
    snprintf(path, sizeof path, "%s/cfg.json", test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("{\"algo\": \"sgd\"}\n", f) >= 0 && fclose(f) == 0);
    /* a directory without the files */
    CHECK_EQ_INT(nevo(out, sizeof out, "train cfg.json dataset=empty --quiet --out r1"), 2);
    CHECK_CONTAINS(out, "train-images-idx3-ubyte");
    /* a test label beyond the training labels' classes */
    write_idx_dir("bad", 20, 10);
    snprintf(path, sizeof path, "%s/bad/t10k-labels-idx1-ubyte", test_tmpdir());
    f = fopen(path, "r+b");
    CHECK(f && fseek(f, 8, SEEK_SET) == 0 && fputc(250, f) == 250 && fclose(f) == 0); /* label 250 */
    CHECK_EQ_INT(nevo(out, sizeof out, "train cfg.json dataset=bad data.test_samples=5 --quiet --out r2"), 2);
    CHECK_CONTAINS(out, "t10k-labels-idx1-ubyte");
    snprintf(path, sizeof path, "%s/r2", test_tmpdir());
    struct stat st;
    CHECK_MSG(stat(path, &st) != 0, "a refused run left %s behind", path);
    /* a truncated image file */
    write_idx_dir("cut", 20, 10);
    snprintf(path, sizeof path, "%s/cut/t10k-images-idx3-ubyte", test_tmpdir());
    CHECK(truncate(path, 100) == 0);
    CHECK_EQ_INT(nevo(out, sizeof out, "train cfg.json dataset=cut --quiet --out r3"), 2);
    CHECK_CONTAINS(out, "t10k-images-idx3-ubyte");
}
