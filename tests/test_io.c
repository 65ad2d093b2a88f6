/* Tests for byte buffers, bounds-checked readers, CRC-32, atomic writes and the
 * container file format (src/core/io.c, include/nevo/io.h).
 *
 * References: the CRC-32 (IEEE 802.3, reflected 0xEDB88320) check value
 * crc32("123456789") = 0xCBF43926 and a bit-at-a-time implementation written here; the
 * container layout documented in io.h, parsed independently from the raw bytes. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/io.h"
#include "nevo/status.h"

#define MAGIC "NEVOTST1"

static const char *tmp_path(const char *name) {
    static char path[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", test_tmpdir(), name);
    return path[k];
}

static void write_raw(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f, "cannot create %s", path);
    if (n) CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* Bit-at-a-time CRC-32, no table. */
static uint32_t crc32_ref(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* nevo_alloc_aligned: zeroed, 64-byte aligned, and from 4 MiB up on a 2 MiB boundary
 * (for huge pages) unless NEVO_HUGEPAGES=0. */
TEST(io_alloc_aligned_placement) {
    static const size_t sizes[] = {1, 63, 4096, ((size_t)4 << 20) - 4, (size_t)4 << 20, ((size_t)9 << 20) + 12};
    const char *saved = getenv("NEVO_HUGEPAGES");
    char keep[16] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    for (int off = 0; off < 2; off++) {
        if (off)
            setenv("NEVO_HUGEPAGES", "0", 1);
        else
            unsetenv("NEVO_HUGEPAGES");
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            unsigned char *p = nevo_alloc_aligned(sizes[i]);
            uintptr_t a = (uintptr_t)p;
            CHECK_MSG(a % 64 == 0, "%zu bytes at %p: not 64-byte aligned", sizes[i], (void *)p);
            if (!off && sizes[i] >= ((size_t)4 << 20))
                CHECK_MSG(a % ((size_t)2 << 20) == 0, "%zu bytes at %p: not on a 2 MiB boundary", sizes[i], (void *)p);
            size_t nonzero = 0;
            for (size_t k = 0; k < sizes[i]; k += 4093) nonzero += p[k] != 0;
            CHECK(nonzero == 0 && p[sizes[i] - 1] == 0);
            p[sizes[i] - 1] = 1; /* the whole size is writable */
            free(p);
        }
    }
    if (saved)
        setenv("NEVO_HUGEPAGES", keep, 1);
    else
        unsetenv("NEVO_HUGEPAGES");
}

TEST(io_crc32_known_answers) {
    CHECK(nevo_crc32("123456789", 9) == 0xCBF43926u);
    CHECK(nevo_crc32("", 0) == 0x00000000u);
    CHECK(nevo_crc32("a", 1) == 0xE8B7BE43u);
    const char *fox = "The quick brown fox jumps over the lazy dog";
    CHECK(nevo_crc32(fox, strlen(fox)) == 0x414FA339u);
    /* against the bitwise reference on every length up to 300 of a pseudo-random text */
    uint8_t buf[300];
    uint32_t x = 12345;
    for (int i = 0; i < 300; i++) {
        x = x * 1664525u + 1013904223u;
        buf[i] = (uint8_t)(x >> 24);
    }
    /* every length and start offset (the 8-byte steps, the byte tail, unaligned reads) */
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n++)
            CHECK_MSG(nevo_crc32(buf + off, n) == crc32_ref(buf + off, n), "offset %zu length %zu", off, n);
    /* long buffers, which are cut in four parts whose CRCs are joined: lengths around
     * that threshold and around multiples of 32, up to 1 MB, from odd start offsets,
     * whole and continued from a CRC of what came before */
    {
        size_t big = ((size_t)1 << 20) + 64;
        uint8_t *m = malloc(big);
        CHECK(m != NULL);
        for (size_t i = 0; i < big; i++) {
            x = x * 1664525u + 1013904223u;
            m[i] = (uint8_t)(x >> 24);
        }
        static const size_t lens[] = {4095, 4096, 4097, 4103, 4127, 4128, 4129, 65541, (size_t)1 << 20};
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (size_t off = 0; off < 3; off++) {
                uint32_t want = crc32_ref(m + off, lens[l]);
                CHECK_MSG(nevo_crc32(m + off, lens[l]) == want, "length %zu offset %zu", lens[l], off);
                for (size_t cut = 0; cut <= lens[l]; cut += lens[l] / 3 + 1)
                    CHECK_MSG(nevo_crc32_extend(nevo_crc32(m + off, cut), m + off + cut, lens[l] - cut) == want,
                              "length %zu offset %zu split at %zu", lens[l], off, cut);
            }
        free(m);
    }
    /* in two parts, split anywhere (a container's header, then its payload) */
    for (size_t cut = 0; cut <= sizeof buf; cut++)
        CHECK_MSG(nevo_crc32_extend(nevo_crc32(buf, cut), buf + cut, sizeof buf - cut) == crc32_ref(buf, sizeof buf),
                  "split at %zu", cut);
}

TEST(io_buf_reader_roundtrip) {
    NevoBuf b = {0};
    const float fs[3] = {1.5f, -0.0f, 3.0e-38f};
    const double ds[2] = {-1e300, 0.1};
    nevo_buf_u32(&b, 0xDEADBEEFu);
    nevo_buf_u64(&b, 0x0123456789ABCDEFull);
    nevo_buf_f64(&b, 3.141592653589793);
    nevo_buf_f32s(&b, fs, 3);
    nevo_buf_f64s(&b, ds, 2);
    nevo_buf_str(&b, "hello, nevo");
    nevo_buf_str(&b, "");
    /* a large put grows the buffer past its initial capacity */
    static uint8_t big[5000];
    for (int i = 0; i < 5000; i++) big[i] = (uint8_t)(i * 7);
    nevo_buf_put(&b, big, sizeof big);
    CHECK_EQ_INT(b.len, 4 + 8 + 8 + 12 + 16 + (4 + 11) + 4 + 5000);
    CHECK(b.cap >= b.len);
    /* little-endian on disk */
    CHECK(b.data[0] == 0xEF && b.data[1] == 0xBE && b.data[2] == 0xAD && b.data[3] == 0xDE);
    CHECK(b.data[4] == 0xEF && b.data[11] == 0x01);

    NevoReader r = nevo_reader(b.data, b.len);
    CHECK(nevo_read_u32(&r) == 0xDEADBEEFu);
    CHECK(nevo_read_u64(&r) == 0x0123456789ABCDEFull);
    CHECK(nevo_read_f64(&r) == 3.141592653589793);
    float fs2[3];
    nevo_read_f32s(&r, fs2, 3);
    CHECK(memcmp(fs, fs2, sizeof fs) == 0);
    double ds2[2];
    nevo_read_f64s(&r, ds2, 2);
    CHECK(memcmp(ds, ds2, sizeof ds) == 0);
    char *s = nevo_read_str(&r, 100);
    CHECK(strcmp(s, "hello, nevo") == 0);
    free(s);
    s = nevo_read_str(&r, 100);
    CHECK(strcmp(s, "") == 0);
    free(s);
    CHECK(!nevo_reader_ok(&r, true)); /* big payload not consumed yet */
    CHECK(nevo_reader_ok(&r, false));
    uint8_t big2[5000];
    nevo_read(&r, big2, sizeof big2);
    CHECK(memcmp(big, big2, sizeof big) == 0);
    CHECK(nevo_reader_ok(&r, true));
    nevo_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
}

/* Reading past the end fails once and for all, returns zeros, never touches memory past
 * the end (the data sits in an exact-size heap block, so ASan would see an overread). */
TEST(io_reader_bounds) {
    uint8_t *data = malloc(6);
    memcpy(data, "\x01\x02\x03\x04\x05\x06", 6);
    NevoReader r = nevo_reader(data, 6);
    CHECK(nevo_read_u32(&r) == 0x04030201u);
    CHECK_EQ_INT(r.pos, 4);
    uint32_t v = nevo_read_u32(&r); /* 2 bytes left */
    CHECK(v == 0);
    CHECK(r.failed);
    CHECK_EQ_INT(r.pos, 4);
    CHECK(!nevo_reader_ok(&r, false));
    /* sticky: a read that would fit still fails */
    uint8_t one = 0xFF;
    nevo_read(&r, &one, 1);
    CHECK(one == 0);
    CHECK(!nevo_reader_ok(&r, false));

    /* a multi-byte read that does not fit reads nothing (zeros only its own bytes) */
    r = nevo_reader(data, 6);
    r.pos = 2;
    float dummy[4] = {1, 2, 3, 4};
    nevo_read_f32s(&r, dummy, 2); /* 8 bytes > 4 left */
    CHECK(r.failed && dummy[0] == 0.0f && dummy[1] == 0.0f && dummy[2] == 3.0f);

    /* strings: a length beyond max_len or beyond the data fails and gives "" */
    uint8_t sbuf[8] = {5, 0, 0, 0, 'a', 'b', 'c', 'd'};
    uint8_t *sdata = malloc(8);
    memcpy(sdata, sbuf, 8);
    r = nevo_reader(sdata, 8); /* says 5 bytes, holds 4 */
    char *s = nevo_read_str(&r, 100);
    CHECK(r.failed && strcmp(s, "") == 0);
    free(s);
    sdata[0] = 3;
    r = nevo_reader(sdata, 8); /* fits, but max_len 2 */
    s = nevo_read_str(&r, 2);
    CHECK(r.failed && strcmp(s, "") == 0);
    free(s);
    r = nevo_reader(sdata, 8);
    s = nevo_read_str(&r, 3);
    CHECK(!r.failed && strcmp(s, "abc") == 0);
    CHECK(!nevo_reader_ok(&r, true) && nevo_reader_ok(&r, false));
    free(s);
    sdata[5] = '\0'; /* "a\0c": as a C string it would read "a" and hide the rest */
    r = nevo_reader(sdata, 8);
    s = nevo_read_str(&r, 3);
    CHECK(r.failed);
    free(s);
    sdata[5] = 'b';
    sdata[0] = 0xFF, sdata[1] = 0xFF, sdata[2] = 0xFF, sdata[3] = 0xFF; /* 4 GiB - 1 */
    r = nevo_reader(sdata, 8);
    s = nevo_read_str(&r, (size_t)-1);
    CHECK(r.failed && strcmp(s, "") == 0);
    free(s);
    /* an empty reader */
    r = nevo_reader(sdata, 0);
    CHECK(nevo_reader_ok(&r, true));
    CHECK(nevo_read_u64(&r) == 0 && r.failed);
    free(sdata);
    free(data);
}

/* A payload of n bytes with a recognisable pattern. */
static NevoBuf pattern_payload(size_t n) {
    NevoBuf b = {0};
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)(i * 31 + 7);
        nevo_buf_put(&b, &c, 1);
    }
    return b;
}

/* The first value that is NaN or infinite, or n: -0, the smallest subnormal and the
 * largest finite float count as finite; doubles likewise past float's range. */
TEST(io_first_nonfinite) {
    float v[6] = {-0.0f, 1e-45f, 3.4028235e38f, 2.0f, 2.0f, 2.0f};
    CHECK(nevo_first_nonfinite(v, 6) == 6 && nevo_all_finite(v, 6));
    CHECK(nevo_first_nonfinite(v, 0) == 0 && nevo_all_finite(v, 0));
    v[4] = NAN;
    CHECK(nevo_first_nonfinite(v, 6) == 4 && !nevo_all_finite(v, 6));
    CHECK(nevo_first_nonfinite(v, 4) == 4 && nevo_all_finite(v, 4)); /* only the first n read */
    v[1] = -INFINITY;
    CHECK(nevo_first_nonfinite(v, 6) == 1);
    /* in the vector pass and its tail: every position, each kind of non-finite (NaNs of
     * either sign and another payload), a second one after it, and n cutting it off */
    float w[200];
    uint32_t nan_bits[3] = {0x7fc00000u, 0xffc00001u, 0x7f800001u};
    for (int k = 0; k < 200; k++)
        for (int kind = 0; kind < 5; kind++) {
            for (int i = 0; i < 200; i++) w[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 3.4028235e38f : -1e-45f;
            if (kind < 3) memcpy(&w[k], &nan_bits[kind], sizeof w[k]);
            else w[k] = kind == 3 ? INFINITY : -INFINITY;
            if (k + 70 < 200) w[k + 70] = NAN;
            CHECK_MSG(nevo_first_nonfinite(w, 200) == (size_t)k, "kind %d at %d: %zu", kind, k,
                      nevo_first_nonfinite(w, 200));
            CHECK(nevo_first_nonfinite(w, (size_t)k) == (size_t)k && nevo_all_finite(w, (size_t)k));
        }
    double d[3] = {1e300, -1e-320, 0.0};
    CHECK(nevo_first_nonfinite_f64(d, 3) == 3 && nevo_all_finite_f64(d, 3));
    d[2] = INFINITY;
    CHECK(nevo_first_nonfinite_f64(d, 3) == 2 && !nevo_all_finite_f64(d, 3));
}

TEST(io_container_roundtrip) {
    const char *path = tmp_path("c.bin");
    static const size_t sizes[] = {0, 1, 100, 70000};
    for (int k = 0; k < 4; k++) {
        NevoBuf p = pattern_payload(sizes[k]);
        NevoError err = {0};
        CHECK_MSG(nevo_container_write(path, MAGIC, 3, &p, &err) == NEVO_OK, "write: %s", err.msg);

        /* the documented layout, parsed from the raw bytes */
        size_t n;
        char *raw = test_read_file(path, &n);
        CHECK(raw);
        const uint8_t *u = (const uint8_t *)raw;
        CHECK_EQ_INT(n, 24 + sizes[k] + 4);
        CHECK(memcmp(u, MAGIC, 8) == 0);
        CHECK(u[8] == 3 && u[9] == 0 && u[10] == 0 && u[11] == 0);   /* version */
        CHECK(u[12] == 0 && u[13] == 0 && u[14] == 0 && u[15] == 0); /* reserved */
        uint64_t plen = 0;
        for (int i = 7; i >= 0; i--) plen = plen << 8 | u[16 + i];
        CHECK(plen == sizes[k]);
        CHECK(sizes[k] == 0 || memcmp(u + 24, p.data, sizes[k]) == 0);
        uint32_t crc = (uint32_t)u[n - 4] | (uint32_t)u[n - 3] << 8 | (uint32_t)u[n - 2] << 16 |
                       (uint32_t)u[n - 1] << 24;
        CHECK(crc == crc32_ref(u, n - 4));
        free(raw);

        uint8_t *back;
        size_t len;
        CHECK_MSG(nevo_container_read(path, MAGIC, 3, &back, &len, &err) == NEVO_OK, "read: %s",
                  err.msg);
        CHECK_EQ_INT(len, sizes[k]);
        CHECK(sizes[k] == 0 || memcmp(back, p.data, len) == 0);
        free(back);

        char m[8];
        CHECK(nevo_file_magic(path, m, &err) == NEVO_OK);
        CHECK(memcmp(m, MAGIC, 8) == 0);
        nevo_buf_free(&p);
    }
}

/* Reads path expecting status want; checks the message names the file and contains
 * `sub`; payload and len are cleared. */
static void read_refused(const char *path, NevoStatus want, const char *sub) {
    uint8_t *payload = (uint8_t *)"not null";
    size_t len = 99;
    NevoError err = {0};
    NevoStatus st = nevo_container_read(path, MAGIC, 1, &payload, &len, &err);
    CHECK_MSG(st == want, "%s: status %d (%s), want %d", path, (int)st, err.msg, (int)want);
    CHECK(err.status == want);
    CHECK(payload == NULL && len == 0);
    CHECK_CONTAINS(err.msg, path);
    if (sub) CHECK_CONTAINS(err.msg, sub);
}

/* A valid container file as bytes (caller frees). */
static uint8_t *valid_file(size_t payload_len, size_t *n) {
    const char *path = tmp_path("valid.bin");
    NevoBuf p = pattern_payload(payload_len);
    NevoError err = {0};
    CHECK(nevo_container_write(path, MAGIC, 1, &p, &err) == NEVO_OK);
    nevo_buf_free(&p);
    uint8_t *data = (uint8_t *)test_read_file(path, n);
    CHECK(data);
    return data;
}

TEST(io_container_wrong_magic) {
    size_t n;
    uint8_t *data = valid_file(40, &n);
    const char *path = tmp_path("magic.bin");
    data[0] = 'X';
    write_raw(path, data, n);
    read_refused(path, NEVO_ERR_CORRUPT, "not a NEVOTST1 file");
    /* a policy read as a checkpoint: the message names both magics */
    memcpy(data, "NEVOPOL1", 8);
    write_raw(path, data, n);
    read_refused(path, NEVO_ERR_CORRUPT, "NEVOPOL1");
    /* binary garbage in the magic is printed safely */
    data[0] = 0, data[1] = 0xFF;
    write_raw(path, data, n);
    read_refused(path, NEVO_ERR_CORRUPT, "not a NEVOTST1 file");
    free(data);
}

TEST(io_container_truncated) {
    size_t n;
    uint8_t *data = valid_file(100, &n);
    CHECK_EQ_INT(n, 128);
    const char *path = tmp_path("trunc.bin");
    /* inside the magic, inside the header, at the header's end, inside the payload,
     * just before and inside the checksum */
    static const size_t cuts[] = {0, 3, 7, 8, 12, 20, 23, 24, 27, 60, 123, 124, 126, 127};
    for (int i = 0; i < (int)(sizeof cuts / sizeof cuts[0]); i++) {
        write_raw(path, data, cuts[i]);
        read_refused(path, NEVO_ERR_CORRUPT, "truncated");
    }
    /* one byte too many */
    uint8_t *longer = malloc(n + 1);
    memcpy(longer, data, n);
    longer[n] = 0;
    write_raw(path, longer, n + 1);
    read_refused(path, NEVO_ERR_CORRUPT, NULL);
    free(longer);
    free(data);
}

TEST(io_container_checksum) {
    size_t n;
    uint8_t *data = valid_file(64, &n);
    const char *path = tmp_path("flip.bin");
    /* every payload byte, each bit of one byte, the reserved word and the checksum */
    for (size_t off = 12; off < n; off++) {
        if (off >= 16 && off < 24) continue; /* the length field: reported as truncation */
        for (int bit = 0; bit < 8; bit += (off == 40 ? 1 : 8)) {
            data[off] ^= (uint8_t)(1u << bit);
            write_raw(path, data, n);
            read_refused(path, NEVO_ERR_CORRUPT, "checksum");
            data[off] ^= (uint8_t)(1u << bit);
        }
    }
    /* a changed length is refused too, whichever message */
    data[16] ^= 1;
    write_raw(path, data, n);
    read_refused(path, NEVO_ERR_CORRUPT, NULL);
    data[16] ^= 1;
    data[23] ^= 0x80;
    write_raw(path, data, n);
    read_refused(path, NEVO_ERR_CORRUPT, NULL);
    data[23] ^= 0x80;
    /* restored: reads again */
    write_raw(path, data, n);
    uint8_t *payload;
    size_t len;
    NevoError err = {0};
    CHECK(nevo_container_read(path, MAGIC, 1, &payload, &len, &err) == NEVO_OK);
    free(payload);
    free(data);
}

TEST(io_container_wrong_version) {
    const char *path = tmp_path("v2.bin");
    NevoBuf p = pattern_payload(10);
    NevoError err = {0};
    CHECK(nevo_container_write(path, MAGIC, 2, &p, &err) == NEVO_OK);
    nevo_buf_free(&p);
    read_refused(path, NEVO_ERR_VERSION, "version 2");
    read_refused(path, NEVO_ERR_VERSION, "version 1");
}

TEST(io_container_missing_or_not_a_file) {
    const char *path = tmp_path("missing.bin");
    read_refused(path, NEVO_ERR_IO, NULL);
    read_refused(test_tmpdir(), NEVO_ERR_IO, NULL);
    NevoError err = {0};
    char m[8];
    CHECK(nevo_file_magic(path, m, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, path);
    const char *shortf = tmp_path("short.bin");
    write_raw(shortf, "NEVO", 4);
    CHECK(nevo_file_magic(shortf, m, &err) == NEVO_ERR_CORRUPT);
    CHECK_CONTAINS(err.msg, shortf);
    uint8_t *data;
    size_t n;
    CHECK(nevo_read_all(path, &data, &n, &err) == NEVO_ERR_IO);
    CHECK(data == NULL && n == 0);
    CHECK_CONTAINS(err.msg, path);
    /* a FIFO with no writer: refused at once (a plain open would wait for a writer) */
    const char *fifo = tmp_path("fifo.bin");
    CHECK(mkfifo(fifo, 0644) == 0);
    CHECK(nevo_read_all(fifo, &data, &n, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "not a regular file");
    CHECK(nevo_file_magic(fifo, m, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, "not a regular file");
    CHECK(nevo_file_magic(test_tmpdir(), m, &err) == NEVO_ERR_IO); /* was "truncated (0 bytes)" */
    CHECK_CONTAINS(err.msg, "not a regular file");
}

/* Names in dir other than . and .., joined by spaces. */
static int list_dir(const char *dir, char *names, size_t size) {
    DIR *d = opendir(dir);
    CHECK(d);
    int count = 0;
    names[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        count++;
        size_t used = strlen(names);
        snprintf(names + used, size - used, "%s ", e->d_name);
    }
    closedir(d);
    return count;
}

TEST(io_write_atomic) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/atomic", test_tmpdir());
    CHECK(mkdir(dir, 0700) == 0);
    char path[1100];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    NevoError err = {0};
    const char *first = "a longer first version of the file";
    CHECK(nevo_write_atomic(path, first, strlen(first), &err) == NEVO_OK);
    size_t n;
    char *got = test_read_file(path, &n);
    CHECK(got && n == strlen(first) && memcmp(got, first, n) == 0);
    free(got);
    /* replaced by a shorter one: no stale tail */
    CHECK(nevo_write_atomic(path, "short", 5, &err) == NEVO_OK);
    got = test_read_file(path, &n);
    CHECK(got && n == 5 && memcmp(got, "short", 5) == 0);
    free(got);
    /* empty content */
    CHECK(nevo_write_atomic(path, "", 0, &err) == NEVO_OK);
    got = test_read_file(path, &n);
    CHECK(got && n == 0);
    free(got);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode));
    /* nothing else is left in the directory */
    char names[2048];
    int count = list_dir(dir, names, sizeof names);
    CHECK_MSG(count == 1 && strcmp(names, "out.bin ") == 0, "directory holds: %s", names);

    /* a directory that does not exist: an I/O error naming the file, nothing created */
    char bad[1200];
    snprintf(bad, sizeof bad, "%s/no-such-dir/out.bin", dir);
    memset(&err, 0, sizeof err);
    CHECK(nevo_write_atomic(bad, "x", 1, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, bad);
    /* the target is a directory: rename fails, the temp file is removed */
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    CHECK(mkdir(sub, 0700) == 0);
    char inner[1300];
    snprintf(inner, sizeof inner, "%s/keep", sub);
    write_raw(inner, "k", 1);
    memset(&err, 0, sizeof err);
    CHECK(nevo_write_atomic(sub, "x", 1, &err) == NEVO_ERR_IO);
    CHECK_CONTAINS(err.msg, sub);
    count = list_dir(dir, names, sizeof names);
    CHECK_MSG(count == 2, "directory holds: %s", names);

    /* a relative path (no slash) works in the current directory */
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd));
    CHECK(chdir(dir) == 0);
    CHECK(nevo_write_atomic("rel.bin", "rel", 3, &err) == NEVO_OK);
    CHECK(chdir(cwd) == 0);
    char rel[1200];
    snprintf(rel, sizeof rel, "%s/rel.bin", dir);
    got = test_read_file(rel, &n);
    CHECK(got && n == 3 && memcmp(got, "rel", 3) == 0);
    free(got);
    count = list_dir(dir, names, sizeof names);
    CHECK_MSG(count == 3, "directory holds: %s", names);
}

static int file_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A PID that names no process: a child's, once it has exited and been reaped. */
static int dead_pid(void) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) _exit(0);
    CHECK(waitpid(pid, NULL, 0) == pid);
    return (int)pid;
}

/* Every write killed before its rename left TARGET.tmp.PID behind (up to MBs each, and
 * nothing removed them). The next write of the same target removes those whose writer
 * is gone; what a live process may still be writing stays: a live PID, or a file
 * someone holds the lock on (a writer in another PID namespace). */
TEST(io_stale_temps_do_not_pile_up) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tmps", test_tmpdir());
    CHECK(mkdir(dir, 0700) == 0);
    int dead = dead_pid(), dead2 = dead_pid(), dead3 = dead_pid();
    char path[1200], stale[1200], stale2[1200], live[1200], locked[1200], other[1200], odd[1200], link[1200];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    snprintf(stale, sizeof stale, "%s/out.bin.tmp.%d", dir, dead);
    snprintf(stale2, sizeof stale2, "%s/out.bin.tmp.%d", dir, dead2);
    snprintf(live, sizeof live, "%s/out.bin.tmp.%d", dir, (int)getppid());
    snprintf(locked, sizeof locked, "%s/out.bin.tmp.%d", dir, dead3);
    snprintf(other, sizeof other, "%s/other.json.tmp.%d", dir, dead);
    snprintf(odd, sizeof odd, "%s/out.bin.tmp.%dx", dir, dead);
    snprintf(link, sizeof link, "%s/out.bin.tmp.%d0", dir, dead);
    const char *files[] = {stale, stale2, live, locked, other, odd};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) write_raw(files[i], "partial", 7);
    CHECK(symlink(other, link) == 0);
    int fd = open(locked, O_RDONLY);
    CHECK(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);

    NevoError err = {0};
    CHECK(nevo_write_atomic(path, "new", 3, &err) == NEVO_OK);
    CHECK_MSG(!file_exists(stale) && !file_exists(stale2), "stale temporary files of out.bin remain");
    CHECK_MSG(file_exists(live), "removed a temporary file whose writer is alive");
    CHECK_MSG(file_exists(locked), "removed a temporary file someone holds the lock on");
    CHECK_MSG(file_exists(other), "a write of out.bin removed another target's temporary file");
    CHECK(file_exists(odd) && file_exists(link)); /* not NAME.tmp.PID / not a regular file */
    size_t n;
    char *got = test_read_file(path, &n);
    CHECK(got && n == 3 && memcmp(got, "new", 3) == 0);
    free(got);

    /* the lock released (its holder gone), the next write takes it too */
    close(fd);
    CHECK(nevo_write_atomic(path, "newer", 5, &err) == NEVO_OK);
    CHECK(!file_exists(locked));
    /* the sweep of a whole directory (what a run does when it starts or resumes) */
    CHECK_EQ_INT(nevo_remove_stale_temps(dir, NULL), 1);
    CHECK(!file_exists(other) && file_exists(live) && file_exists(odd) && file_exists(link));
    CHECK_EQ_INT(nevo_remove_stale_temps(dir, NULL), 0);
    /* and a write leaves no temporary file of its own */
    char names[4096];
    int count = list_dir(dir, names, sizeof names);
    CHECK_MSG(count == 4, "directory holds: %s", names); /* out.bin, live, odd, link */
}
