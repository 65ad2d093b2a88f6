/* Supervised image data: IDX files (the MNIST format) and a dataset of train and test
 * images with their class labels, shaped like nevo's image observations.
 *
 * An IDX file is a big-endian header, then the values:
 *   magic u32 = 0x00000800 | rank (0x08: unsigned bytes) | dims u32 x rank | values
 * images are rank 3 (0x00000803: N, rows, cols), labels rank 1 (0x00000801: N). Files
 * may be gzip-compressed (.gz). Every field is checked against the bytes present before
 * anything is allocated from it; a bad file is refused with one line naming it and the
 * problem. The parser reads from memory; the file functions are thin wrappers. */
#ifndef NEVO_DATASET_H
#define NEVO_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "nevo/env.h"
#include "nevo/status.h"

/* Where "fashion-mnist" is looked for: $NEVO_DATASETS/fashion-mnist, then this
 * directory's fashion-mnist (Debian's dataset-fashion-mnist package installs there). */
#define NEVO_DATASETS_SYSTEM_DIR "/usr/share/datasets"

/* The largest IDX file read (decompressed), and the largest image (rows x cols). */
#define NEVO_IDX_MAX_BYTES ((size_t)1 << 31)
#define NEVO_IDX_MAX_PIXELS (1 << 24)

/* A parsed IDX file: a view into the bytes it was parsed from. */
typedef struct NevoIdx {
    int rank;            /* 1 (labels) or 3 (images) */
    uint32_t dims[3];    /* (N) or (N, rows, cols), each > 0 */
    const uint8_t *data; /* prod(dims) values, row-major */
} NevoIdx;

/* Parses an IDX file of unsigned bytes of the given rank (1 or 3) from data[0, len).
 * name names it in messages. Refuses (NEVO_ERR_INVALID) a wrong magic, a zero
 * dimension, values more or fewer than the bytes present, more than INT32_MAX items or
 * an image of more than NEVO_IDX_MAX_PIXELS. */
NevoStatus nevo_idx_parse(const uint8_t *data, size_t len, int rank, const char *name, NevoIdx *out,
                          NevoError *err);

/* Reads a whole file, gzip-compressed or plain (zlib reads both), into *data
 * (malloc'ed, caller frees). The buffer grows with what the file actually yields, up to
 * NEVO_IDX_MAX_BYTES, the memory limit (nevo_config_memory_limit) checked before each
 * growth; once an IDX header is in, more bytes than it announces are refused.
 * NEVO_ERR_IO when it cannot be opened or read, NEVO_ERR_INVALID for a damaged gzip
 * stream, one beyond a limit or longer than its header says. */
NevoStatus nevo_idx_read_file(const char *path, uint8_t **data, size_t *len, NevoError *err);

/* One split: n images (n, height, width, 1), values in [0, 1] (byte / 255), and their
 * labels in [0, classes). */
typedef struct NevoDataSplit {
    int n;
    float *images; /* (n, height, width, 1) */
    int *labels;   /* (n) */
} NevoDataSplit;

/* A dataset: one allocation (the struct, then the splits' arrays). */
typedef struct NevoDataset {
    char name[64];          /* "fashion-mnist", or the directory's last component */
    char source[4096];      /* the directory the files were read from */
    int height, width;      /* image rows and columns */
    int channels;           /* 1 */
    int classes;            /* labels are 0 .. classes - 1 */
    NevoDataSplit train, test;
} NevoDataset;

/* The four IDX files of a dataset, as parsed. */
typedef struct NevoIdxSet {
    NevoIdx train_images, train_labels, test_images, test_labels;
    const char *names[4]; /* each file's name for messages, in the order above */
} NevoIdxSet;

/* Builds a dataset from parsed files: images and labels of a split must count the same,
 * the two splits' images have the same size, every label is below classes (classes 0:
 * one more than the largest training label, and the test labels must be below it).
 * The first train_limit / test_limit samples are kept (0 = all; more than there are =
 * all). Refuses (NEVO_ERR_INVALID) what does not fit, naming the file; a dataset whose
 * floats pass the memory limit (nevo_config_memory_limit) likewise. */
NevoStatus nevo_dataset_from_idx(const NevoIdxSet *files, const char *name, const char *source, int classes,
                                 int train_limit, int test_limit, NevoDataset **out, NevoError *err);

/* Loads a dataset. spec "fashion-mnist": Debian's dataset-fashion-mnist files, looked
 * for in $NEVO_DATASETS/fashion-mnist then NEVO_DATASETS_SYSTEM_DIR/fashion-mnist, 10
 * classes. Any other spec: a directory holding train-images-idx3-ubyte,
 * train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each
 * possibly with .gz (classes from the labels, as in nevo_dataset_from_idx). A missing
 * directory or file is NEVO_ERR_IO, with a message naming what was expected. */
NevoStatus nevo_dataset_load(const char *spec, int train_limit, int test_limit, NevoDataset **out, NevoError *err);
/* Frees ds (NULL is a no-op). */
void nevo_dataset_free(NevoDataset *ds);

/* The task as an environment spec, so nevo_policy_new builds a classifier for it:
 * observations one image (rank 3, shape {height, width, 1}), a discrete action per
 * class; name points into ds. No time limit, reward threshold or behaviour. */
void nevo_dataset_env_spec(const NevoDataset *ds, NevoEnvSpec *spec);

#endif
