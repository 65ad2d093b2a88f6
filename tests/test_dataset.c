/* Datasets (dataset.h): the IDX reader on small files the tests write, plain and
 * gzipped, against the values written; every kind of malformed file refused with a
 * message naming it; the env spec a classifier is built from; and, where Debian's
 * dataset-fashion-mnist is installed, the real thing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "harness.h"
#include "nevo/config.h"
#include "nevo/dataset.h"
#include "nevo/policy.h"

static const char *const files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                     "t10k-labels-idx1-ubyte"};

/* The small dataset: 3 training and 2 test images of 2 x 3 pixels. */
static const uint8_t train_px[3 * 6] = {0, 255, 1, 2, 3, 4, 10, 20, 30, 40, 50, 60, 128, 127, 200, 100, 0, 7};
static const uint8_t train_lb[3] = {0, 2, 1};
static const uint8_t test_px[2 * 6] = {9, 8, 7, 6, 5, 4, 255, 255, 0, 0, 1, 1};
static const uint8_t test_lb[2] = {1, 0};

/* An IDX file's bytes: magic 0x0000080<rank>, the dims big-endian, then the values.
 * Caller frees. */
static uint8_t *idx_bytes(uint32_t magic, int rank, const uint32_t *dims, const uint8_t *values, size_t n,
                          size_t *len) {
    *len = 4 + 4 * (size_t)rank + n;
    uint8_t *b = malloc(*len);
    for (int i = 0; i <= rank; i++) {
        uint32_t v = i == 0 ? magic : dims[i - 1];
        b[4 * i] = (uint8_t)(v >> 24), b[4 * i + 1] = (uint8_t)(v >> 16);
        b[4 * i + 2] = (uint8_t)(v >> 8), b[4 * i + 3] = (uint8_t)v;
    }
    memcpy(b + 4 + 4 * rank, values, n);
    return b;
}

/* Writes bytes to dir/name, gzip-compressed (zlib, as the files ship) when gz. */
static void write_bytes(const char *dir, const char *name, const uint8_t *b, size_t len, int gz) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
    if (gz) {
        gzFile f = gzopen(path, "wb");
        CHECK(f && gzwrite(f, b, (unsigned)len) == (int)len && gzclose(f) == Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(b, 1, len, f) == len && fclose(f) == 0);
    }
}

static void write_images(const char *dir, const char *name, uint32_t n, uint32_t rows, uint32_t cols,
                         const uint8_t *px, int gz) {
    uint32_t dims[3] = {n, rows, cols};
    size_t len;
    uint8_t *b = idx_bytes(0x803, 3, dims, px, (size_t)n * rows * cols, &len);
    write_bytes(dir, name, b, len, gz);
    free(b);
}

static void write_labels(const char *dir, const char *name, uint32_t n, const uint8_t *lb, int gz) {
    size_t len;
    uint8_t *b = idx_bytes(0x801, 1, &n, lb, n, &len);
    write_bytes(dir, name, b, len, gz);
    free(b);
}

/* The small dataset in a new directory dir/sub; gz: bit i compresses file i. */
static const char *write_set(const char *sub, int gz) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", test_tmpdir(), sub);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
    write_images(dir, files[0], 3, 2, 3, train_px, gz & 1);
    write_labels(dir, files[1], 3, train_lb, gz & 2);
    write_images(dir, files[2], 2, 2, 3, test_px, gz & 4);
    write_labels(dir, files[3], 2, test_lb, gz & 8);
    return dir;
}

/* Removes dir/name and dir/name.gz. */
static void remove_file(const char *dir, const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    remove(path);
}

static void check_small(const NevoDataset *ds) {
    CHECK(ds->height == 2 && ds->width == 3 && ds->channels == 1 && ds->classes == 3);
    CHECK(ds->train.n == 3 && ds->test.n == 2);
    for (int k = 0; k < 18; k++) CHECK(ds->train.images[k] == (float)train_px[k] / 255.0f);
    for (int k = 0; k < 12; k++) CHECK(ds->test.images[k] == (float)test_px[k] / 255.0f);
    CHECK(ds->train.images[1] == 1.0f && ds->train.images[0] == 0.0f);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(ds->train.labels[i], train_lb[i]);
    for (int i = 0; i < 2; i++) CHECK_EQ_INT(ds->test.labels[i], test_lb[i]);
}

TEST(dataset_idx_parse_by_hand) {
    uint32_t dims[3] = {3, 2, 3};
    size_t len;
    uint8_t *b = idx_bytes(0x803, 3, dims, train_px, 18, &len);
    CHECK_EQ_INT(len, 16 + 18);
    NevoIdx idx;
    NevoError err = {0};
    CHECK_MSG(nevo_idx_parse(b, len, 3, "x", &idx, &err) == NEVO_OK, "%s", err.msg);
    CHECK(idx.rank == 3 && idx.dims[0] == 3 && idx.dims[1] == 2 && idx.dims[2] == 3 && idx.data == b + 16);
    /* the same bytes are not labels */
    CHECK(nevo_idx_parse(b, len, 1, "x", &idx, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "x: IDX magic 0x00000803, expected 0x00000801"), "%s", err.msg);
    free(b);
}

/* Plain, gzipped and mixed files give the same dataset. */
TEST(dataset_load_plain_and_gzip) {
    for (int gz = 0; gz < 16; gz += 5) {
        char sub[32];
        snprintf(sub, sizeof sub, "set%d/", gz);
        const char *dir = write_set(sub, gz);
        NevoDataset *ds = NULL;
        NevoError err = {0};
        CHECK_MSG(nevo_dataset_load(dir, 0, 0, &ds, &err) == NEVO_OK, "%s", err.msg);
        check_small(ds);
        char want[32];
        snprintf(want, sizeof want, "set%d", gz);
        CHECK_MSG(strcmp(ds->name, want) == 0, "name %s", ds->name);
        nevo_dataset_free(ds);
    }
    /* limits keep the first samples */
    const char *dir = write_set("lim", 15);
    NevoDataset *ds = NULL;
    NevoError err = {0};
    CHECK(nevo_dataset_load(dir, 2, 1, &ds, &err) == NEVO_OK);
    CHECK(ds->train.n == 2 && ds->test.n == 1 && ds->train.labels[1] == 2 && ds->test.labels[0] == 1);
    CHECK(ds->test.images[0] == 9.0f / 255.0f);
    nevo_dataset_free(ds);
    CHECK(nevo_dataset_load(dir, 100, 100, &ds, &err) == NEVO_OK && ds->train.n == 3 && ds->test.n == 2);
    nevo_dataset_free(ds);
    CHECK(nevo_dataset_load(dir, -1, 0, &ds, &err) == NEVO_ERR_INVALID && ds == NULL);
    nevo_dataset_free(NULL);
}

/* Replaces file i of a good set with bytes, loads, expects status and the words. */
static void expect_refused(int i, const uint8_t *b, size_t len, int gz, NevoStatus want, const char *words) {
    static int round;
    char sub[32];
    snprintf(sub, sizeof sub, "bad%d", round++);
    const char *dir = write_set(sub, 0);
    remove_file(dir, files[i]);
    write_bytes(dir, files[i], b, len, gz);
    NevoDataset *ds = NULL;
    NevoError err = {0};
    NevoStatus st = nevo_dataset_load(dir, 0, 0, &ds, &err);
    CHECK_MSG(st == want && ds == NULL, "%s: status %d, wanted %d: %s", words, st, want, err.msg);
    CHECK_MSG(strstr(err.msg, files[i]) && strstr(err.msg, words) && !strchr(err.msg, '\n'), "wanted '%s' about %s: %s",
              words, files[i], err.msg);
}

TEST(dataset_malformed_files_refused) {
    uint32_t dims[3] = {3, 2, 3};
    size_t len;
    uint8_t *good = idx_bytes(0x803, 3, dims, train_px, 18, &len);
    /* bad magic: labels' magic on images, a type other than unsigned bytes */
    uint8_t *b = idx_bytes(0x801, 3, dims, train_px, 18, &len);
    expect_refused(0, b, len, 0, NEVO_ERR_INVALID, "IDX magic 0x00000801, expected 0x00000803");
    free(b);
    b = idx_bytes(0xD03, 3, dims, train_px, 18, &len);
    expect_refused(0, b, len, 1, NEVO_ERR_INVALID, "IDX magic 0x00000d03");
    free(b);
    /* truncated: the values, and the header itself */
    expect_refused(0, good, 16 + 17, 0, NEVO_ERR_INVALID, "the header announces 3 images of 2 x 3 pixels, but only 17 bytes follow");
    expect_refused(0, good, 10, 1, NEVO_ERR_INVALID, "too short for its IDX header");
    expect_refused(0, good, 2, 0, NEVO_ERR_INVALID, "too short for an IDX file");
    /* bytes after the values */
    uint8_t longer[16 + 19];
    memcpy(longer, good, 16 + 18);
    longer[34] = 0;
    expect_refused(0, longer, sizeof longer, 0, NEVO_ERR_INVALID, "1 byte after the values its header announces (34 bytes)");
    NevoIdx parsed;
    NevoError perr = {0};
    CHECK(nevo_idx_parse(longer, sizeof longer, 3, "x", &parsed, &perr) == NEVO_ERR_INVALID);
    CHECK_CONTAINS(perr.msg, "1 byte after the 3 images of 2 x 3 pixels");
    /* a gzip bomb (3 MB of zero labels in a few KB): reading stops at the memory limit,
     * where it read the whole file first */
    uint32_t big = 3000000;
    uint8_t *zeros = calloc(big, 1);
    b = idx_bytes(0x801, 1, &big, zeros, big, &len);
    setenv("NEVO_MAX_MEMORY_MB", "1", 1);
    expect_refused(1, b, len, 1, NEVO_ERR_INVALID, "GiB limit (NEVO_MAX_MEMORY_MB)");
    unsetenv("NEVO_MAX_MEMORY_MB");
    free(b);
    free(zeros);
    /* a zero dimension */
    uint32_t zero[3] = {3, 0, 3};
    b = idx_bytes(0x803, 3, zero, train_px, 0, &len);
    expect_refused(0, b, len, 0, NEVO_ERR_INVALID, "dimension 1 is 0");
    free(b);
    /* huge dimensions in a tiny file: more pixels than nevo reads, more images than
     * the bytes hold, more items than an int counts */
    uint32_t huge[3] = {60000, 100000, 100000};
    b = idx_bytes(0x803, 3, huge, train_px, 18, &len);
    expect_refused(0, b, len, 1, NEVO_ERR_INVALID, "images of 100000 x 100000 pixels");
    free(b);
    uint32_t many[3] = {4000000, 28, 28};
    b = idx_bytes(0x803, 3, many, train_px, 18, &len);
    expect_refused(0, b, len, 0, NEVO_ERR_INVALID, "4000000 images of 28 x 28 pixels, but only 18 bytes");
    free(b);
    uint32_t n_huge = 0xFFFFFFF0u;
    b = idx_bytes(0x801, 1, &n_huge, train_lb, 3, &len);
    expect_refused(1, b, len, 0, NEVO_ERR_INVALID, "more than nevo reads");
    free(b);
    /* counts that disagree: 2 labels for 3 images */
    uint32_t two = 2;
    b = idx_bytes(0x801, 1, &two, train_lb, 2, &len);
    expect_refused(1, b, len, 0, NEVO_ERR_INVALID, "holds 2 labels");
    free(b);
    /* test images of another size */
    uint32_t other[3] = {2, 3, 2};
    b = idx_bytes(0x803, 3, other, test_px, 12, &len);
    expect_refused(2, b, len, 0, NEVO_ERR_INVALID, "images of 3 x 2 pixels");
    free(b);
    /* a test label beyond the training labels' classes */
    uint8_t high[2] = {1, 3};
    b = idx_bytes(0x801, 1, &two, high, 2, &len);
    expect_refused(3, b, len, 0, NEVO_ERR_INVALID, "label 3 of sample 1 is not below 3 classes");
    free(b);
    /* gzip garbage: a gzip magic then noise; a gzip stream cut short */
    uint8_t noise[64] = {0x1f, 0x8b, 8, 0};
    for (int i = 4; i < 64; i++) noise[i] = (uint8_t)(i * 37 + 11);
    expect_refused(0, noise, sizeof noise, 0, NEVO_ERR_INVALID, "damaged gzip data");
    char path[1100];
    const char *dir = write_set("cut", 1);
    snprintf(path, sizeof path, "%s/%s.gz", dir, files[0]);
    size_t glen;
    char *gz = test_read_file(path, &glen);
    CHECK(gz && glen > 20);
    expect_refused(0, (const uint8_t *)gz, glen - 8, 0, NEVO_ERR_INVALID, "damaged gzip data (zlib: unexpected end of file)");
    expect_refused(0, (const uint8_t *)gz, glen / 2, 0, NEVO_ERR_INVALID, "damaged gzip data");
    free(gz);
    free(good);
}

TEST(dataset_missing_files_named) {
    NevoDataset *ds = NULL;
    NevoError err = {0};
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/nowhere", test_tmpdir());
    CHECK(nevo_dataset_load(dir, 0, 0, &ds, &err) == NEVO_ERR_IO && ds == NULL);
    for (int i = 0; i < 4; i++) CHECK_MSG(strstr(err.msg, files[i]), "%s", err.msg);
    CHECK_MSG(strstr(err.msg, "no such directory") && strstr(err.msg, dir), "%s", err.msg);
    const char *set = write_set("three", 0);
    remove_file(set, files[3]);
    CHECK(nevo_dataset_load(set, 0, 0, &ds, &err) == NEVO_ERR_IO);
    CHECK_MSG(strstr(err.msg, "t10k-labels-idx1-ubyte not found (nor t10k-labels-idx1-ubyte.gz)"), "%s", err.msg);
    /* unreadable: a directory where a file should be */
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/%s", set, files[3]);
    CHECK(mkdir(sub, 0700) == 0);
    CHECK(nevo_dataset_load(set, 0, 0, &ds, &err) == NEVO_ERR_IO);
    CHECK(nevo_dataset_load("", 0, 0, &ds, &err) == NEVO_ERR_INVALID);
}

/* "fashion-mnist" is looked for under $NEVO_DATASETS first, with 10 classes. */
TEST(dataset_fashion_mnist_from_env) {
    char root[1100];
    snprintf(root, sizeof root, "%s/data", test_tmpdir());
    write_set("data/fashion-mnist", 0xA);
    setenv("NEVO_DATASETS", root, 1);
    NevoDataset *ds = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_dataset_load("fashion-mnist", 0, 0, &ds, &err) == NEVO_OK, "%s", err.msg);
    CHECK(strcmp(ds->name, "fashion-mnist") == 0 && ds->classes == 10 && ds->train.n == 3);
    CHECK(strstr(ds->source, root) == ds->source);
    nevo_dataset_free(ds);
    /* a label of 10 is beyond Fashion-MNIST's classes */
    const uint8_t ten[3] = {0, 10, 1};
    write_labels(root, "fashion-mnist/train-labels-idx1-ubyte", 3, ten, 1);
    CHECK(nevo_dataset_load("fashion-mnist", 0, 0, &ds, &err) == NEVO_ERR_INVALID);
    CHECK_MSG(strstr(err.msg, "label 10 of sample 1 is not below 10 classes"), "%s", err.msg);
    /* neither there nor installed: the message says how to get it */
    struct stat st;
    char sys[256];
    snprintf(sys, sizeof sys, "%s/fashion-mnist", NEVO_DATASETS_SYSTEM_DIR);
    if (stat(sys, &st) != 0) {
        setenv("NEVO_DATASETS", test_tmpdir(), 1);
        CHECK(nevo_dataset_load("fashion-mnist", 0, 0, &ds, &err) == NEVO_ERR_IO);
        CHECK_MSG(strstr(err.msg, "apt-get install dataset-fashion-mnist") && strstr(err.msg, "NEVO_DATASETS"), "%s",
                  err.msg);
    }
}

/* The env spec builds a classifier: an image in, one output per class. */
TEST(dataset_env_spec_builds_a_classifier) {
    const char *dir = write_set("spec", 0);
    NevoDataset *ds = NULL;
    NevoError err = {0};
    CHECK(nevo_dataset_load(dir, 0, 0, &ds, &err) == NEVO_OK);
    NevoEnvSpec spec;
    nevo_dataset_env_spec(ds, &spec);
    CHECK(strcmp(spec.name, "spec") == 0 && spec.obs_rank == 3 && spec.obs_dim == 6);
    CHECK(spec.obs_shape[0] == 2 && spec.obs_shape[1] == 3 && spec.obs_shape[2] == 1);
    CHECK(spec.action_kind == NEVO_SPACE_DISCRETE && spec.n_actions == 3 && spec.action_dim == 1);
    NevoConfig cfg;
    nevo_config_defaults(&cfg);
    cfg.policy.n_hidden = 1;
    cfg.policy.hidden[0] = 4;
    NevoPolicy *p = NULL;
    CHECK_MSG(nevo_policy_new(&spec, &cfg.policy, 0, &p, &err) == NEVO_OK, "%s", err.msg);
    CHECK(p->obs_dim == 6 && p->n_out == 3 && p->nparams == 6 * 4 + 4 + 4 * 3 + 3);
    nevo_policy_free(p);
    nevo_dataset_free(ds);
}

/* Debian's dataset-fashion-mnist, where installed: 28 x 28 images, 10 classes, pixel
 * means near the dataset's (0.286 for the training set). */
TEST(dataset_fashion_mnist_installed) {
    char sys[256];
    struct stat st;
    snprintf(sys, sizeof sys, "%s/fashion-mnist", NEVO_DATASETS_SYSTEM_DIR);
    unsetenv("NEVO_DATASETS");
    if (stat(sys, &st) != 0) {
        printf("     skipped: %s is missing (Debian's dataset-fashion-mnist)\n", sys);
        return;
    }
    NevoDataset *ds = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_dataset_load("fashion-mnist", 1000, 500, &ds, &err) == NEVO_OK, "%s", err.msg);
    CHECK(ds->height == 28 && ds->width == 28 && ds->classes == 10 && ds->train.n == 1000 && ds->test.n == 500);
    const NevoDataSplit *splits[2] = {&ds->train, &ds->test};
    for (int s = 0; s < 2; s++) {
        const NevoDataSplit *sp = splits[s];
        int count[10] = {0};
        for (int i = 0; i < sp->n; i++) {
            CHECK(sp->labels[i] >= 0 && sp->labels[i] < 10);
            count[sp->labels[i]]++;
        }
        for (int c = 0; c < 10; c++) CHECK_MSG(count[c] > sp->n / 20, "class %d: %d of %d", c, count[c], sp->n);
        double sum = 0.0;
        float lo = 1.0f, hi = 0.0f;
        for (size_t k = 0; k < (size_t)sp->n * 784; k++) {
            sum += sp->images[k];
            lo = sp->images[k] < lo ? sp->images[k] : lo;
            hi = sp->images[k] > hi ? sp->images[k] : hi;
        }
        double mean = sum / ((double)sp->n * 784);
        printf("    fashion-mnist %s: %d images, pixel mean %.4f\n", s ? "test" : "train", sp->n, mean);
        CHECK_MSG(mean > 0.25 && mean < 0.32, "pixel mean %g", mean);
        CHECK(lo == 0.0f && hi == 1.0f);
    }
    nevo_dataset_free(ds);
}
