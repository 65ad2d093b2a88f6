/* Byte buffers, readers, CRC-32 and atomic container files. */
#include "nevo/io.h"

#include "core/simd.h"
#include "core/strutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void nevo_buf_free(NevoBuf *b) {
    free(b->data);
    *b = (NevoBuf){0};
}

void nevo_buf_put(NevoBuf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) nevo_fatal(__FILE__, __LINE__, "out of memory growing a buffer to %zu", cap);
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
}

/* The formats are little-endian; x86-64 and aarch64 are too, so values are copied as
 * they are in memory. */
void nevo_buf_u32(NevoBuf *b, uint32_t v) { nevo_buf_put(b, &v, 4); }
void nevo_buf_u64(NevoBuf *b, uint64_t v) { nevo_buf_put(b, &v, 8); }
void nevo_buf_f64(NevoBuf *b, double v) { nevo_buf_put(b, &v, 8); }
void nevo_buf_f32s(NevoBuf *b, const float *v, size_t n) { nevo_buf_put(b, v, n * 4); }
void nevo_buf_f64s(NevoBuf *b, const double *v, size_t n) { nevo_buf_put(b, v, n * 8); }

void nevo_buf_str(NevoBuf *b, const char *s) {
    size_t n = strlen(s);
    nevo_buf_u32(b, (uint32_t)n);
    nevo_buf_put(b, s, n);
}

NevoReader nevo_reader(const void *data, size_t len) {
    return (NevoReader){.data = data, .len = len};
}

void nevo_read(NevoReader *r, void *dst, size_t n) {
    if (r->failed || n > r->len - r->pos) {
        r->failed = true;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, r->data + r->pos, n);
    r->pos += n;
}

uint32_t nevo_read_u32(NevoReader *r) {
    uint32_t v;
    nevo_read(r, &v, 4);
    return v;
}

uint64_t nevo_read_u64(NevoReader *r) {
    uint64_t v;
    nevo_read(r, &v, 8);
    return v;
}

double nevo_read_f64(NevoReader *r) {
    double v;
    nevo_read(r, &v, 8);
    return v;
}

void nevo_read_f32s(NevoReader *r, float *dst, size_t n) { nevo_read(r, dst, n * 4); }

/* NaN or infinite: exponent bits all ones. One branch-free pass over all of v first (so
 * vectorised, one reduction at the end: every observation and every batch's outputs pass
 * through here), and only where it finds one, the search for the first. */
NEVO_KERNEL_CLONES NEVO_VECTORIZE size_t nevo_first_nonfinite(const float *v, size_t n) {
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, v + i, sizeof b);
        any |= (b & 0x7f800000u) == 0x7f800000u;
    }
    if (!any) return n;
    size_t i = 0;
    while (i < n && isfinite(v[i])) i++;
    return i;
}

size_t nevo_first_nonfinite_f64(const double *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return i;
    return n;
}

bool nevo_all_finite(const float *v, size_t n) { return nevo_first_nonfinite(v, n) == n; }

bool nevo_all_finite_f64(const double *v, size_t n) { return nevo_first_nonfinite_f64(v, n) == n; }
void nevo_read_f64s(NevoReader *r, double *dst, size_t n) { nevo_read(r, dst, n * 8); }

char *nevo_read_str(NevoReader *r, size_t max_len) {
    uint32_t n = nevo_read_u32(r);
    if (n > max_len || n > r->len - r->pos) {
        r->failed = true;
        n = 0;
    }
    char *s = nevo_alloc((size_t)n + 1);
    nevo_read(r, s, n);
    if (memchr(s, '\0', n)) r->failed = true; /* a C string would drop what follows the NUL */
    return s;
}

bool nevo_reader_ok(const NevoReader *r, bool exact) {
    return !r->failed && (!exact || r->pos == r->len);
}

/* CRC-32 (IEEE 802.3, reflected, as zlib), eight bytes a step ("slicing by 8"):
 * crc_table[j][b] is the CRC of byte b followed by j zero bytes, so one step folds
 * eight bytes with eight independent lookups instead of a chain of eight. A checkpoint
 * and a policy file are written every generation by default (MinAtar: 0.5-3 MB), and
 * the bytewise loop took 10% of an ES run's time.
 *
 * One such chain is bound by its own latency, so a long buffer is cut in four parts
 * whose CRCs run side by side in one loop, then joined: the CRC of A then B is the CRC
 * of A times x^(8 |B|), modulo the polynomial, plus the CRC of B (the initial and final
 * inversions cancel in that sum). Polynomials here are reflected as in the CRC: bit 31
 * is the coefficient of x^0, bit 0 that of x^31. */
#define CRC_POLY 0xEDB88320u
#define CRC_PARTS_MIN 4096 /* below this, one chain */
static uint32_t crc_table[8][256];
static uint32_t crc_x2n[64]; /* x^(2^k) mod P */
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* a b mod P: b times x for each step down a's coefficients, added where a has one */
static uint32_t crc_multmodp(uint32_t a, uint32_t b) {
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
        if (a & m) p ^= b;
        b = b & 1 ? (b >> 1) ^ CRC_POLY : b >> 1;
    }
    return p;
}

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? CRC_POLY ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (int j = 1; j < 8; j++)
        for (uint32_t i = 0; i < 256; i++)
            crc_table[j][i] = crc_table[0][crc_table[j - 1][i] & 0xFF] ^ (crc_table[j - 1][i] >> 8);
    crc_x2n[0] = 1u << 30; /* x */
    for (int k = 1; k < 64; k++) crc_x2n[k] = crc_multmodp(crc_x2n[k - 1], crc_x2n[k - 1]);
}

/* x^(8 n) mod P */
static uint32_t crc_x8n(uint64_t n) {
    uint32_t p = 1u << 31; /* 1 */
    for (int k = 3; n; n >>= 1, k++)
        if (n & 1) p = crc_multmodp(crc_x2n[k], p);
    return p;
}

/* The CRC of A then B from the CRC of each and B's length in bytes. */
static uint32_t crc_join(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    return crc_multmodp(crc_x8n(len_b), crc_a) ^ crc_b;
}

/* Eight bytes into the (inverted) register c. */
static inline uint32_t crc_step8(uint32_t c, const uint8_t *p) {
    const uint32_t(*t)[256] = crc_table;
    /* little-endian byte order of the reflected CRC, read byte by byte (any host) */
    uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    return t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][p[4]] ^
           t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
}

/* The register c (inverted) carried over bytes [p, p + n). */
static uint32_t crc_run(uint32_t c, const uint8_t *p, size_t n) {
    for (; n >= 8; n -= 8, p += 8) c = crc_step8(c, p);
    for (; n; n--, p++) c = crc_table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
    return c;
}

uint32_t nevo_crc32(const void *data, size_t n) { return nevo_crc32_extend(0, data, n); }

uint32_t nevo_crc32_extend(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    if (n < CRC_PARTS_MIN) return crc_run(crc ^ 0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
    /* four parts of q bytes (q a multiple of 8), the last one with the rest */
    size_t q = n / 4 / 8 * 8;
    const uint8_t *p1 = p + q, *p2 = p1 + q, *p3 = p2 + q;
    uint32_t c0 = crc ^ 0xFFFFFFFFu, c1 = 0xFFFFFFFFu, c2 = 0xFFFFFFFFu, c3 = 0xFFFFFFFFu;
    for (size_t i = 0; i < q; i += 8) {
        c0 = crc_step8(c0, p + i);
        c1 = crc_step8(c1, p1 + i);
        c2 = crc_step8(c2, p2 + i);
        c3 = crc_step8(c3, p3 + i);
    }
    c3 = crc_run(c3, p3 + q, n - 4 * q);
    uint32_t r = crc_join(c0 ^ 0xFFFFFFFFu, c1 ^ 0xFFFFFFFFu, q);
    r = crc_join(r, c2 ^ 0xFFFFFFFFu, q);
    return crc_join(r, c3 ^ 0xFFFFFFFFu, n - 3 * q);
}

/* Temporary files are TARGET.tmp.PID. A writer holds an exclusive flock on its
 * temporary file from creation to rename; one killed before the rename leaves the file
 * behind, unlocked, under the PID of a process that is gone. Such files are removed by
 * the next write of the same target and by nevo_remove_stale_temps, so they do not pile
 * up. A file counts as stale only when all three hold: its PID names no live process
 * (kill(pid, 0) fails with ESRCH), nobody holds its lock (a writer in another PID
 * namespace sharing the directory does), and it is still the same file once locked. */

/* The writer's PID in NAME.tmp.PID when `name` is a temporary file of target `base`
 * (NULL: of any target), else 0. */
static long temp_pid(const char *name, const char *base) {
    const char *digits;
    if (base) {
        size_t n = strlen(base);
        if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0) return 0;
        digits = name + n + 5;
    } else {
        const char *t = NULL;
        for (const char *q = strstr(name, ".tmp."); q; q = strstr(q + 1, ".tmp.")) t = q;
        if (!t || t == name) return 0;
        digits = t + 5;
    }
    long pid = 0;
    int nd = 0;
    for (const char *q = digits; *q; q++, nd++) {
        if (*q < '0' || *q > '9' || nd >= 10) return 0;
        pid = pid * 10 + (*q - '0');
    }
    return nd > 0 && pid > 0 && pid <= INT_MAX ? pid : 0;
}

static int remove_if_stale(int dfd, const char *name, long pid) {
    if (pid == (long)getpid()) return 0;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) return 0; /* alive, or not ours to ask about */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat a, b;
    int removed = 0;
    if (fstat(fd, &a) == 0 && S_ISREG(a.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        removed = unlinkat(dfd, name, 0) == 0;
    close(fd); /* releases the lock */
    return removed;
}

int nevo_remove_stale_temps(const char *dir, const char *target) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = temp_pid(e->d_name, target);
        if (pid) removed += remove_if_stale(dirfd(d), e->d_name, pid);
    }
    closedir(d);
    return removed;
}

NevoStatus nevo_write_atomic(const char *path, const void *data, size_t n, NevoError *err) {
    return nevo_write_atomic_parts(path, &data, &n, 1, err);
}

NevoStatus nevo_write_atomic_parts(const char *path, const void *const *data, const size_t *len, int parts,
                                   NevoError *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return nevo_error(err, NEVO_ERR_IO, "%s: path too long", path);
    char dir[4096];
    nevo_path_dir(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    nevo_remove_stale_temps(dir, slash ? slash + 1 : path); /* what killed writers of this file left */
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 3; attempt++) {
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            return nevo_error(err, NEVO_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        /* held until the rename: marks the file as being written. A sweep that locked it
         * first (between the open and here) has unlinked it: start again. */
        struct stat st;
        if (flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 && st.st_nlink == 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) return nevo_error(err, NEVO_ERR_IO, "cannot write %s: its temporary file kept vanishing", path);
    for (int i = 0; i < parts; i++) {
        const uint8_t *p = data[i];
        size_t left = len[i];
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0) {
                if (errno == EINTR) continue;
                int e = errno;
                unlink(tmp);
                close(fd);
                return nevo_error(err, NEVO_ERR_IO, "cannot write %s: %s", path, strerror(e));
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (fsync(fd) != 0) {
        int e = errno;
        unlink(tmp);
        close(fd);
        return nevo_error(err, NEVO_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        close(fd);
        return nevo_error(err, NEVO_ERR_IO, "cannot replace %s: %s", path, strerror(e));
    }
    if (close(fd) != 0) /* after the rename: the lock covers the temporary file's whole life */
        return nevo_error(err, NEVO_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* best effort: some filesystems refuse fsync on directories */
        close(dfd);
    }
    return NEVO_OK;
}

FILE *nevo_open_regular(const char *path, NevoError *err) {
    /* O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        nevo_error(err, NEVO_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        nevo_error(err, NEVO_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        nevo_error(err, NEVO_ERR_IO, "cannot read %s: not a regular file", path);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        nevo_error(err, NEVO_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

NevoStatus nevo_read_all(const char *path, uint8_t **data, size_t *n, NevoError *err) {
    *data = NULL;
    *n = 0;
    FILE *f = nevo_open_regular(path, err);
    if (!f) return NEVO_ERR_IO;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return nevo_error(err, NEVO_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return nevo_error(err, NEVO_ERR_IO, "cannot read %s: out of memory for %zu bytes", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != size) {
        free(buf);
        return nevo_error(err, NEVO_ERR_IO, "cannot read %s: read error", path);
    }
    *data = buf;
    *n = size;
    return NEVO_OK;
}

#define HEADER_SIZE 24

NevoStatus nevo_container_write(const char *path, const char magic[8], uint32_t version,
                                const NevoBuf *payload, NevoError *err) {
    /* header, payload and checksum written as they are (a checkpoint is MBs: copying
     * it behind a header was a tenth of its cost) */
    NevoBuf head = {0};
    nevo_buf_put(&head, magic, 8);
    nevo_buf_u32(&head, version);
    nevo_buf_u32(&head, 0); /* reserved */
    nevo_buf_u64(&head, payload->len);
    const void *body = payload->data ? (const void *)payload->data : "";
    uint32_t crc = nevo_crc32_extend(nevo_crc32(head.data, head.len), body, payload->len);
    const void *data[3] = {head.data, body, &crc};
    const size_t len[3] = {head.len, payload->len, sizeof crc};
    NevoStatus st = nevo_write_atomic_parts(path, data, len, 3, err);
    nevo_buf_free(&head);
    return st;
}

static void printable_magic(const char magic[8], char out[9]) {
    for (int i = 0; i < 8; i++) out[i] = magic[i] >= 32 && magic[i] < 127 ? magic[i] : '.';
    out[8] = '\0';
}

NevoStatus nevo_container_read(const char *path, const char magic[8], uint32_t version,
                               uint8_t **payload, size_t *len, NevoError *err) {
    *payload = NULL;
    *len = 0;
    uint8_t *data;
    size_t n;
    NevoStatus st = nevo_read_all(path, &data, &n, err);
    if (st != NEVO_OK) return st;
    const uint8_t *body;
    size_t plen;
    st = nevo_container_decode(data, n, path, magic, version, &body, &plen, err);
    if (st == NEVO_OK) {
        *payload = nevo_alloc(plen ? plen : 1);
        memcpy(*payload, body, plen);
        *len = plen;
    }
    free(data);
    return st;
}

NevoStatus nevo_file_magic(const char *path, char magic[8], NevoError *err) {
    FILE *f = nevo_open_regular(path, err);
    if (!f) return NEVO_ERR_IO;
    size_t got = fread(magic, 1, 8, f);
    fclose(f);
    if (got != 8) return nevo_error(err, NEVO_ERR_CORRUPT, "%s: truncated (%zu bytes): not a nevo file", path, got);
    return NEVO_OK;
}

void nevo_container_encode(const char magic[8], uint32_t version, const NevoBuf *payload, NevoBuf *out) {
    size_t start = out->len;
    nevo_buf_put(out, magic, 8);
    nevo_buf_u32(out, version);
    nevo_buf_u32(out, 0); /* reserved */
    nevo_buf_u64(out, payload->len);
    if (payload->len) nevo_buf_put(out, payload->data, payload->len);
    nevo_buf_u32(out, nevo_crc32(out->data + start, out->len - start));
}

NevoStatus nevo_container_decode(const uint8_t *data, size_t n, const char *name, const char magic[8],
                                 uint32_t version, const uint8_t **payload, size_t *len, NevoError *err) {
    char want[9], got[9];
    printable_magic(magic, want);
    *payload = NULL;
    *len = 0;
    if (n < 8) return nevo_error(err, NEVO_ERR_CORRUPT, "%s: truncated (%zu bytes), not a %s file", name, n, want);
    if (memcmp(data, magic, 8) != 0) {
        printable_magic((const char *)data, got);
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: not a %s file (its magic is '%s')", name, want, got);
    }
    if (n < HEADER_SIZE + 4)
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: truncated: %zu bytes, shorter than the header", name, n);
    NevoReader r = nevo_reader(data, n);
    r.pos = 8;
    uint32_t file_version = nevo_read_u32(&r);
    nevo_read_u32(&r);
    uint64_t plen = nevo_read_u64(&r);
    if (plen != n - HEADER_SIZE - 4)
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: truncated or padded: header says %llu payload bytes, holds %zu",
                          name, (unsigned long long)plen, n - HEADER_SIZE - 4);
    /* the checksum first: a damaged version field is corruption, not a new format */
    uint32_t stored;
    memcpy(&stored, data + n - 4, 4);
    if (stored != nevo_crc32(data, n - 4))
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: checksum mismatch: corrupt", name);
    if (file_version != version)
        return nevo_error(err, NEVO_ERR_VERSION, "%s: format version %u, but this nevo reads version %u of %s",
                          name, file_version, version, want);
    *payload = data + HEADER_SIZE;
    *len = (size_t)plen;
    return NEVO_OK;
}
