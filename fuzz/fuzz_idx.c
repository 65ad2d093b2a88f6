/* libFuzzer target: IDX dataset files (seed corpus fuzz/corpus/idx) through the
 * dataset reader (dataset.h). An input is
 *   split u32 (little-endian) | an images file (split bytes) | a labels file (the rest)
 * The images file goes through nevo_idx_read_file, so through zlib when it is gzipped
 * (it lives in a memfd, /proc/self/fd/N: no file is left behind), and is parsed as rank
 * 3; the labels are parsed from memory as rank 1. Both parsed, they make a dataset
 * (the same pair as train and test split), once with the labels' own classes and once
 * with 10.
 *
 * Each step must fail cleanly (a status and one line) or give what it promises: a plain
 * file reads back byte for byte, a parse's values lie inside the bytes, a dataset's
 * pixels lie in [0, 1] and its labels below its classes.
 *
 * NEVO_FUZZ_WRITE_CORPUS=DIR writes the seed corpus instead and exits:
 * fuzz/make_corpus.sh runs it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz_check.h"
#include "nevo/dataset.h"

static int fuzz_fd = -1;
static char fuzz_path[64];

/* An IDX file of `rank` (1 or 3) with dims, its values value(k) = k * mul + add. */
static size_t idx_file(uint8_t *out, int rank, const uint32_t *dims, int mul, int add) {
    size_t n = 1;
    uint32_t head[4] = {0x800u | (uint32_t)rank, dims[0], rank == 3 ? dims[1] : 0, rank == 3 ? dims[2] : 0};
    for (int i = 0; i <= rank; i++) {
        for (int b = 0; b < 4; b++) out[4 * i + b] = (uint8_t)(head[i] >> (24 - 8 * b));
        if (i > 0) n *= head[i];
    }
    uint8_t *v = out + 4 + 4 * rank;
    for (size_t k = 0; k < n; k++) v[k] = (uint8_t)(k * (size_t)mul + (size_t)add);
    return 4 + 4 * (size_t)rank + n;
}

/* One seed: the images (gzipped when gz) and labels of n images of rows x cols. */
static void write_seed(const char *dir, const char *name, uint32_t n, uint32_t rows, uint32_t cols, int classes,
                       int gz) {
    static uint8_t images[16 + 8 * 28 * 28], labels[8 + 8], packed[sizeof images + 64], seed[4 + sizeof packed + 16];
    uint32_t dims[3] = {n, rows, cols};
    size_t ilen = idx_file(images, 3, dims, 37, 5), llen = idx_file(labels, 1, dims, 3, 0);
    for (uint32_t i = 0; i < n; i++) labels[8 + i] %= (uint8_t)classes;
    uLongf plen = sizeof packed;
    const uint8_t *part = images;
    if (gz) {
        /* a gzip stream: deflate with zlib's gzip wrapper (windowBits 16 + 15) */
        z_stream z = {0};
        if (deflateInit2(&z, 9, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) exit(1);
        z.next_in = images, z.avail_in = (uInt)ilen, z.next_out = packed, z.avail_out = (uInt)plen;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) exit(1);
        plen = z.total_out;
        deflateEnd(&z);
        part = packed, ilen = plen;
    }
    uint32_t split = (uint32_t)ilen;
    memcpy(seed, &split, 4);
    memcpy(seed + 4, part, ilen);
    memcpy(seed + 4 + ilen, labels, llen);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(seed, 1, 4 + ilen + llen, f) != 4 + ilen + llen || fclose(f)) exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("NEVO_FUZZ_WRITE_CORPUS");
    if (dir && *dir) {
        write_seed(dir, "small.idx", 3, 2, 3, 3, 0);
        write_seed(dir, "small_gz.idx", 3, 2, 3, 3, 1);
        write_seed(dir, "mnist_shape_gz.idx", 8, 28, 28, 10, 1);
        exit(0);
    }
    setenv("NEVO_MAX_MEMORY_MB", "256", 0);
    fuzz_fd = memfd_create("nevo-fuzz-idx", MFD_CLOEXEC);
    if (fuzz_fd < 0) {
        perror("memfd_create");
        exit(1);
    }
    snprintf(fuzz_path, sizeof fuzz_path, "/proc/self/fd/%d", fuzz_fd);
    return 0;
}

static void check_dataset(const NevoIdxSet *set, int classes) {
    NevoDataset *ds = NULL;
    NevoError err = {0};
    NevoStatus st = nevo_dataset_from_idx(set, "fuzz", "memory", classes, 0, 0, &ds, &err);
    fuzz_check_error(st, &err);
    if (st != NEVO_OK) return;
    FUZZ_REQUIRE(ds->train.n == (int)set->train_images.dims[0] && ds->test.n == ds->train.n);
    FUZZ_REQUIRE(ds->classes >= 1 && (classes == 0 || ds->classes == classes));
    size_t pixels = (size_t)ds->height * ds->width;
    for (size_t k = 0; k < (size_t)ds->train.n * pixels; k++)
        FUZZ_REQUIRE(ds->train.images[k] >= 0.0f && ds->train.images[k] <= 1.0f);
    for (int i = 0; i < ds->train.n; i++) FUZZ_REQUIRE(ds->train.labels[i] >= 0 && ds->train.labels[i] < ds->classes);
    NevoEnvSpec spec;
    nevo_dataset_env_spec(ds, &spec);
    FUZZ_REQUIRE(spec.obs_dim == (int)pixels && spec.n_actions == ds->classes);
    nevo_dataset_free(ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    uint32_t split;
    memcpy(&split, data, 4);
    size_t ilen = split <= size - 4 ? split : size - 4;
    const uint8_t *images = data + 4, *labels = data + 4 + ilen;
    size_t llen = size - 4 - ilen;

    FUZZ_REQUIRE(ftruncate(fuzz_fd, 0) == 0);
    FUZZ_REQUIRE(pwrite(fuzz_fd, images, ilen, 0) == (ssize_t)ilen);
    uint8_t *bytes = NULL;
    size_t n = 0;
    NevoError err = {0};
    NevoStatus st = nevo_idx_read_file(fuzz_path, &bytes, &n, &err);
    fuzz_check_error(st, &err);
    if (st != NEVO_OK) return 0;
    if (ilen < 2 || images[0] != 0x1f || images[1] != 0x8b) FUZZ_REQUIRE(n == ilen && !memcmp(bytes, images, n));

    NevoIdxSet set = {0};
    set.names[0] = set.names[2] = "images", set.names[1] = set.names[3] = "labels";
    st = nevo_idx_parse(bytes, n, 3, "images", &set.train_images, &err);
    fuzz_check_error(st, &err);
    if (st == NEVO_OK) {
        const NevoIdx *x = &set.train_images;
        FUZZ_REQUIRE(x->data >= bytes && x->data + (size_t)x->dims[0] * x->dims[1] * x->dims[2] == bytes + n);
    }
    NevoStatus sl = nevo_idx_parse(labels, llen, 1, "labels", &set.train_labels, &err);
    fuzz_check_error(sl, &err);
    if (sl == NEVO_OK) FUZZ_REQUIRE(set.train_labels.data + set.train_labels.dims[0] == labels + llen);
    if (st == NEVO_OK && sl == NEVO_OK) {
        set.test_images = set.train_images;
        set.test_labels = set.train_labels;
        check_dataset(&set, 0);
        check_dataset(&set, 10);
    }
    free(bytes);
    return 0;
}
