/* Datasets (dataset.h): the IDX parser over bytes in memory, zlib's gzread for the
 * files (plain or gzip), and the dataset built from four parsed files. */
#include "nevo/dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "nevo/config.h"
#include "nevo/io.h"

/* The four files of a dataset directory, in NevoIdxSet's order. */
static const char *const file_names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
#define EXPECTED_FILES                                                                                   \
    "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte " \
    "(each may end in .gz)"
#define FASHION_CLASSES 10

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

NevoStatus nevo_idx_parse(const uint8_t *data, size_t len, int rank, const char *name, NevoIdx *out,
                          NevoError *err) {
    NEVO_ASSERT(rank == 1 || rank == 3);
    memset(out, 0, sizeof *out);
    const char *what = rank == 3 ? "unsigned-byte images, N x rows x cols" : "unsigned-byte labels, N";
    size_t head = 4 + 4 * (size_t)rank;
    if (len < 4)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: %zu bytes, too short for an IDX file (%s)", name, len, what);
    uint32_t magic = be32(data), want = 0x800u | (uint32_t)rank;
    if (magic != want)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: IDX magic 0x%08x, expected 0x%08x (%s)", name, magic, want,
                          what);
    if (len < head)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: %zu bytes, too short for its IDX header (%zu bytes)", name, len,
                          head);
    for (int d = 0; d < rank; d++) {
        out->dims[d] = be32(data + 4 + 4 * d);
        if (out->dims[d] == 0) return nevo_error(err, NEVO_ERR_INVALID, "%s: dimension %d is 0", name, d);
    }
    if (out->dims[0] > INT32_MAX)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: %u items, more than nevo reads (%d)", name, out->dims[0],
                          INT32_MAX);
    uint64_t item = 1; /* bytes per item */
    if (rank == 3) {
        uint32_t rows = out->dims[1], cols = out->dims[2];
        if (rows > NEVO_IDX_MAX_PIXELS || cols > NEVO_IDX_MAX_PIXELS / rows)
            return nevo_error(err, NEVO_ERR_INVALID, "%s: images of %u x %u pixels, more than nevo reads (%d pixels)",
                              name, rows, cols, NEVO_IDX_MAX_PIXELS);
        item = (uint64_t)rows * cols;
    }
    size_t body = len - head;
    char items[96];
    if (rank == 3)
        snprintf(items, sizeof items, "%u images of %u x %u pixels", out->dims[0], out->dims[1], out->dims[2]);
    else
        snprintf(items, sizeof items, "%u labels", out->dims[0]);
    if ((uint64_t)out->dims[0] > body / item)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: the header announces %s, but only %zu bytes follow it (truncated)",
                          name, items, body);
    size_t extra = body - (size_t)((uint64_t)out->dims[0] * item);
    if (extra)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: %zu byte%s after the %s its header announces", name, extra,
                          extra == 1 ? "" : "s", items);
    out->rank = rank;
    out->data = data + head;
    return NEVO_OK;
}

/* The bytes an IDX file's header of `rank` (0: 1 or 3) announces (header and values),
 * once its first `n` bytes hold the header; 0 while they do not, or for a header the
 * parser will refuse. */
static double idx_announced(const uint8_t *buf, size_t n, int rank) {
    if (n < 4 || buf[0] != 0 || buf[1] != 0 || buf[2] != 0x08 || (buf[3] != 1 && buf[3] != 3)) return 0;
    if (rank && buf[3] != rank) return 0;
    size_t head = 4 + 4 * (size_t)buf[3];
    if (n < head) return 0;
    double total = 1; /* exact up to 2^53, and dims beyond that are refused either way */
    for (int d = 0; d < buf[3]; d++) total *= be32(buf + 4 + 4 * d);
    return total > 0 ? (double)head + total : 0; /* a zero dimension: the parser's to name */
}

/* Counts the bytes left in f, up to `most` (a gzip bomb's tail is not read to its end). */
static size_t count_rest(gzFile f, size_t most) {
    uint8_t scratch[1 << 14];
    size_t extra = 0;
    int got;
    while (extra <= most && (got = gzread(f, scratch, sizeof scratch)) > 0) extra += (size_t)got;
    return extra;
}

#define IDX_MAX_TAIL ((size_t)1 << 20)

/* nevo_idx_read_file for a file of `rank`, with `used` bytes already held by the
 * caller's other files: the memory limit is checked before the buffer grows (so a gzip
 * bomb stops at the limit), and once the header is in, the buffer holds no more than it
 * announces. */
static NevoStatus read_idx(const char *path, int rank, double used, uint8_t **data, size_t *len, NevoError *err) {
    *data = NULL;
    *len = 0;
    FILE *fp = nevo_open_regular(path, err); /* a FIFO would block gzopen */
    if (!fp) return NEVO_ERR_IO;
    errno = 0;
    int fd = fcntl(fileno(fp), F_DUPFD_CLOEXEC, 0);
    fclose(fp);
    gzFile f = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return nevo_error(err, NEVO_ERR_IO, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory");
    }
    gzbuffer(f, 1 << 17);
    /* the buffer doubles as the stream yields bytes: never more than twice what the file
     * actually holds, whatever its header claims */
    size_t cap = 1 << 16, n = 0;
    double announced = 0;
    uint8_t *buf = malloc(cap);
    NevoStatus st = buf ? NEVO_OK : nevo_error(err, NEVO_ERR_IO, "%s: out of memory", path);
    while (st == NEVO_OK) {
        if (!announced) announced = idx_announced(buf, n, rank);
        if (announced && (double)n > announced) {
            size_t extra = n - (size_t)announced + count_rest(f, IDX_MAX_TAIL);
            st = nevo_error(err, NEVO_ERR_INVALID, "%s: %s%zu byte%s after the values its header announces (%.0f bytes)",
                            path, extra > IDX_MAX_TAIL ? "more than " : "", extra > IDX_MAX_TAIL ? IDX_MAX_TAIL : extra,
                            extra == 1 ? "" : "s", announced);
            break;
        }
        if (n == cap) {
            if (cap >= NEVO_IDX_MAX_BYTES) {
                st = nevo_error(err, NEVO_ERR_INVALID, "%s: more than %zu bytes (uncompressed), larger than nevo reads",
                                path, (size_t)NEVO_IDX_MAX_BYTES);
                break;
            }
            cap = cap * 2 < NEVO_IDX_MAX_BYTES ? cap * 2 : NEVO_IDX_MAX_BYTES;
            if (announced && (double)cap > announced + 1) cap = (size_t)announced + 1; /* room for one byte too many */
            char what[4200];
            snprintf(what, sizeof what, "reading %s", path);
            st = nevo_config_memory_limit(used + (double)cap, what, err);
            if (st != NEVO_OK) break;
            uint8_t *grown = realloc(buf, cap);
            if (!grown) {
                st = nevo_error(err, NEVO_ERR_IO, "%s: out of memory reading %zu bytes", path, cap);
                break;
            }
            buf = grown;
        }
        size_t want = cap - n < (1u << 30) ? cap - n : (1u << 30);
        int got = gzread(f, buf + n, (unsigned)want);
        if (got > 0) {
            n += (size_t)got;
            continue;
        }
        /* the end, or an error: a damaged or cut gzip stream (Z_DATA_ERROR, Z_BUF_ERROR) or
         * a failed read (Z_ERRNO) */
        int zerr = Z_OK;
        const char *zmsg = gzerror(f, &zerr);
        /* zlib's message starts with what it was opened on: "<fd:N>: " (gzdopen) */
        const char *colon = zmsg && strncmp(zmsg, "<fd:", 4) == 0 ? strstr(zmsg, ">: ") : NULL;
        if (colon) zmsg = colon + 3;
        if (zerr == Z_ERRNO)
            st = nevo_error(err, NEVO_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        else if (got < 0 || zerr != Z_OK)
            st = nevo_error(err, NEVO_ERR_INVALID, "%s: damaged gzip data (zlib: %s)", path,
                            zmsg && *zmsg ? zmsg : "error");
        break;
    }
    int close_rc = gzclose_r(f);
    if (st == NEVO_OK && close_rc != Z_OK)
        st = nevo_error(err, NEVO_ERR_INVALID, "%s: damaged gzip data (zlib error %d at its end)", path, close_rc);
    if (st != NEVO_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *len = n;
    return NEVO_OK;
}

NevoStatus nevo_idx_read_file(const char *path, uint8_t **data, size_t *len, NevoError *err) {
    return read_idx(path, 0, 0.0, data, len, err);
}

/* Checks a split's images and labels against each other and against classes. */
static NevoStatus check_split(const NevoIdx *images, const NevoIdx *labels, const char *iname, const char *lname,
                              int classes, int derived, NevoError *err) {
    NEVO_ASSERT(images->rank == 3 && labels->rank == 1);
    if (images->dims[0] != labels->dims[0])
        return nevo_error(err, NEVO_ERR_INVALID, "%s holds %u labels, but %s holds %u images", lname, labels->dims[0],
                          iname, images->dims[0]);
    for (uint32_t i = 0; i < labels->dims[0]; i++)
        if (labels->data[i] >= classes)
            return nevo_error(err, NEVO_ERR_INVALID, "%s: label %d of sample %u is not below %d classes%s", lname,
                              labels->data[i], i, classes, derived ? " (one more than the largest training label)" : "");
    return NEVO_OK;
}

/* Fills a split with the first n images and labels. */
static void fill_split(NevoDataSplit *s, const NevoIdx *images, const NevoIdx *labels, size_t pixels) {
    for (size_t k = 0; k < (size_t)s->n * pixels; k++) s->images[k] = (float)images->data[k] / 255.0f;
    for (int i = 0; i < s->n; i++) s->labels[i] = labels->data[i];
}

NevoStatus nevo_dataset_from_idx(const NevoIdxSet *files, const char *name, const char *source, int classes,
                                 int train_limit, int test_limit, NevoDataset **out, NevoError *err) {
    *out = NULL;
    NEVO_ASSERT(files->train_images.rank == 3 && files->train_labels.rank == 1 && files->test_images.rank == 3 &&
                files->test_labels.rank == 1);
    const NevoIdx *tri = &files->train_images, *trl = &files->train_labels;
    const NevoIdx *tei = &files->test_images, *tel = &files->test_labels;
    if (train_limit < 0 || test_limit < 0)
        return nevo_error(err, NEVO_ERR_INVALID, "dataset %s: sample limits %d (train) and %d (test) must be >= 0",
                          name, train_limit, test_limit);
    if (classes < 0 || classes > 256)
        return nevo_error(err, NEVO_ERR_INVALID, "dataset %s: %d classes (expected 1 to 256, or 0 for the labels' own)",
                          name, classes);
    if (tei->dims[1] != tri->dims[1] || tei->dims[2] != tri->dims[2])
        return nevo_error(err, NEVO_ERR_INVALID, "%s: images of %u x %u pixels, but %s's are %u x %u", files->names[2],
                          tei->dims[1], tei->dims[2], files->names[0], tri->dims[1], tri->dims[2]);
    int derived = classes == 0;
    if (derived)
        for (uint32_t i = 0; i < trl->dims[0]; i++)
            if (trl->data[i] + 1 > classes) classes = trl->data[i] + 1;
    NevoStatus st = check_split(tri, trl, files->names[0], files->names[1], classes, 0, err);
    if (st == NEVO_OK) st = check_split(tei, tel, files->names[2], files->names[3], classes, derived, err);
    if (st != NEVO_OK) return st;

    int ntr = train_limit == 0 || (uint32_t)train_limit > tri->dims[0] ? (int)tri->dims[0] : train_limit;
    int nte = test_limit == 0 || (uint32_t)test_limit > tei->dims[0] ? (int)tei->dims[0] : test_limit;
    size_t pixels = (size_t)tri->dims[1] * tri->dims[2];
    size_t n = (size_t)ntr + (size_t)nte;
    size_t head = (sizeof(NevoDataset) + 63) / 64 * 64;
    double need = (double)head + (double)n * ((double)pixels * sizeof(float) + sizeof(int));
    char what[128];
    snprintf(what, sizeof what, "the %zu images of %zu pixels of dataset %.64s", n, pixels, name);
    st = nevo_config_memory_limit(need, what, err);
    if (st != NEVO_OK) return st;

    NevoDataset *ds = nevo_alloc_aligned(head + n * (pixels * sizeof(float) + sizeof(int)));
    snprintf(ds->name, sizeof ds->name, "%s", name);
    snprintf(ds->source, sizeof ds->source, "%s", source ? source : "");
    ds->height = (int)tri->dims[1];
    ds->width = (int)tri->dims[2];
    ds->channels = 1;
    ds->classes = classes;
    ds->train.n = ntr;
    ds->test.n = nte;
    ds->train.images = (float *)((char *)ds + head);           /* (ntr, h, w, 1) */
    ds->test.images = ds->train.images + (size_t)ntr * pixels; /* (nte, h, w, 1) */
    ds->train.labels = (int *)(ds->test.images + (size_t)nte * pixels);
    ds->test.labels = ds->train.labels + ntr;
    fill_split(&ds->train, tri, trl, pixels);
    fill_split(&ds->test, tei, tel, pixels);
    *out = ds;
    return NEVO_OK;
}

void nevo_dataset_free(NevoDataset *ds) { free(ds); }

static int is_dir(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISDIR(s.st_mode);
}

static int is_file(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && !S_ISDIR(s.st_mode);
}

/* The path of dataset file `base` in dir: base itself, else base.gz; 0 if neither. */
static int find_file(const char *dir, const char *base, char *path, size_t size) {
    /* a path that does not fit is a file not found */
    if ((size_t)snprintf(path, size, "%s/%s", dir, base) >= size) return 0;
    if (is_file(path)) return 1;
    if ((size_t)snprintf(path, size, "%s/%s.gz", dir, base) >= size) return 0;
    return is_file(path);
}

static int has_all_files(const char *dir) {
    char path[4200];
    for (int i = 0; i < 4; i++)
        if (!find_file(dir, file_names[i], path, sizeof path)) return 0;
    return 1;
}

/* Reads, parses and combines the four files of dir. */
static NevoStatus load_dir(const char *dir, const char *name, int classes, int train_limit, int test_limit,
                           NevoDataset **out, NevoError *err) {
    if (!is_dir(dir))
        return nevo_error(err, NEVO_ERR_IO,
                          "dataset %s: %s; expected fashion-mnist or a directory holding " EXPECTED_FILES, dir,
                          is_file(dir) ? "not a directory" : "no such directory");
    char paths[4][4200];
    uint8_t *bytes[4] = {NULL, NULL, NULL, NULL};
    size_t lens[4] = {0, 0, 0, 0};
    NevoIdx *idx[4];
    NevoIdxSet set = {0};
    idx[0] = &set.train_images, idx[1] = &set.train_labels, idx[2] = &set.test_images, idx[3] = &set.test_labels;
    NevoStatus st = NEVO_OK;
    double used = 0; /* bytes the files read so far hold */
    for (int i = 0; i < 4 && st == NEVO_OK; i++) {
        if (!find_file(dir, file_names[i], paths[i], sizeof paths[i])) {
            st = nevo_error(err, NEVO_ERR_IO, "dataset %s: %s not found (nor %s.gz); expected " EXPECTED_FILES, dir,
                            file_names[i], file_names[i]);
            break;
        }
        set.names[i] = paths[i];
        int rank = i % 2 == 0 ? 3 : 1; /* images, labels */
        st = read_idx(paths[i], rank, used, &bytes[i], &lens[i], err);
        used += (double)lens[i];
        if (st == NEVO_OK) st = nevo_idx_parse(bytes[i], lens[i], rank, paths[i], idx[i], err);
    }
    if (st == NEVO_OK) st = nevo_dataset_from_idx(&set, name, dir, classes, train_limit, test_limit, out, err);
    for (int i = 0; i < 4; i++) free(bytes[i]);
    return st;
}

NevoStatus nevo_dataset_load(const char *spec, int train_limit, int test_limit, NevoDataset **out, NevoError *err) {
    *out = NULL;
    if (!spec || !*spec)
        return nevo_error(err, NEVO_ERR_INVALID, "dataset: empty name; expected fashion-mnist or a directory holding "
                          EXPECTED_FILES);
    if (strcmp(spec, "fashion-mnist") == 0) {
        char dirs[2][4200];
        int n = 0;
        const char *env = getenv("NEVO_DATASETS");
        if (env && *env) snprintf(dirs[n++], sizeof dirs[0], "%s/fashion-mnist", env);
        snprintf(dirs[n++], sizeof dirs[0], "%s/fashion-mnist", NEVO_DATASETS_SYSTEM_DIR);
        for (int i = 0; i < n; i++)
            if (has_all_files(dirs[i]))
                return load_dir(dirs[i], spec, FASHION_CLASSES, train_limit, test_limit, out, err);
        return nevo_error(err, NEVO_ERR_IO,
                          "fashion-mnist: IDX files not found in %s%s%s; install Debian's dataset-fashion-mnist "
                          "(apt-get install dataset-fashion-mnist) or point dataset at a directory of IDX files",
                          n == 2 ? dirs[0] : "", n == 2 ? " (NEVO_DATASETS) or " : "", dirs[n - 1]);
    }
    /* a directory: named by its last component */
    size_t len = strlen(spec);
    while (len > 1 && spec[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && spec[start - 1] != '/') start--;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(len - start < 63 ? len - start : 63), spec + start);
    if (!name[0]) snprintf(name, sizeof name, "%s", "/");
    return load_dir(spec, name, 0, train_limit, test_limit, out, err);
}

void nevo_dataset_env_spec(const NevoDataset *ds, NevoEnvSpec *spec) {
    memset(spec, 0, sizeof *spec);
    spec->name = ds->name;
    spec->summary = "image classification: one step per image, an action per class";
    spec->obs_rank = 3;
    spec->obs_shape[0] = ds->height;
    spec->obs_shape[1] = ds->width;
    spec->obs_shape[2] = ds->channels;
    spec->obs_dim = ds->height * ds->width * ds->channels;
    spec->action_kind = NEVO_SPACE_DISCRETE;
    spec->n_actions = ds->classes;
    spec->action_dim = 1;
}
