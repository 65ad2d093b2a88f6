/* Binary files: byte buffers, bounds-checked readers, CRC-32, atomic writes, and the
 * container every nevo file uses.
 *
 * Container layout (little-endian):
 *   magic[8] | version u32 | reserved u32 | payload_len u64 | payload | crc32 u32
 * The CRC covers everything before it. Files are written to a temporary file in the
 * same directory, fsync'ed, renamed over the target and the directory fsync'ed, so a
 * reader sees either the old file or the new one, never a half-written one. */
#ifndef NEVO_IO_H
#define NEVO_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nevo/status.h"

/* A growable byte buffer (writer side). */
typedef struct NevoBuf {
    uint8_t *data;
    size_t len, cap;
} NevoBuf;

void nevo_buf_free(NevoBuf *b);
void nevo_buf_put(NevoBuf *b, const void *src, size_t n);
void nevo_buf_u32(NevoBuf *b, uint32_t v);
void nevo_buf_u64(NevoBuf *b, uint64_t v);
void nevo_buf_f64(NevoBuf *b, double v);
void nevo_buf_f32s(NevoBuf *b, const float *v, size_t n);
void nevo_buf_f64s(NevoBuf *b, const double *v, size_t n);
/* A length-prefixed string. */
void nevo_buf_str(NevoBuf *b, const char *s);

/* A bounds-checked reader: reads past the end set `failed` and return zeros, so a
 * truncated payload is detected once, at the end, by nevo_reader_ok. */
typedef struct NevoReader {
    const uint8_t *data;
    size_t len, pos;
    bool failed;
} NevoReader;

NevoReader nevo_reader(const void *data, size_t len);
void nevo_read(NevoReader *r, void *dst, size_t n);
uint32_t nevo_read_u32(NevoReader *r);
uint64_t nevo_read_u64(NevoReader *r);
double nevo_read_f64(NevoReader *r);
void nevo_read_f32s(NevoReader *r, float *dst, size_t n);
void nevo_read_f64s(NevoReader *r, double *dst, size_t n);
/* Reads a string into a newly allocated buffer (caller frees); max_len guards
 * against corrupt lengths. */
char *nevo_read_str(NevoReader *r, size_t max_len);
/* True when every read stayed in bounds and (if exact) the payload was consumed. */
bool nevo_reader_ok(const NevoReader *r, bool exact);

/* The index of the first of v[0, n) that is NaN or infinite, or n: every load path
 * checks the floats it reads (and the evaluator what envs and networks return). */
size_t nevo_first_nonfinite(const float *v, size_t n);
size_t nevo_first_nonfinite_f64(const double *v, size_t n);
bool nevo_all_finite(const float *v, size_t n);
bool nevo_all_finite_f64(const double *v, size_t n);

uint32_t nevo_crc32(const void *data, size_t n);
/* The CRC-32 of bytes whose first part has CRC crc and which go on with data[0, n):
 * nevo_crc32 of a whole is nevo_crc32_extend of its parts in turn, from 0. */
uint32_t nevo_crc32_extend(uint32_t crc, const void *data, size_t n);

/* Writes data to path atomically (temp file + fsync + rename + directory fsync). The
 * temporary file, PATH.tmp.PID, is locked (flock) while it is written; first, temporary
 * files of the same target that killed writers left are removed
 * (nevo_remove_stale_temps). */
NevoStatus nevo_write_atomic(const char *path, const void *data, size_t n, NevoError *err);
/* The same with the file's bytes given as `parts` pieces, data[i] of len[i] bytes, one
 * after another (a container's header, payload and checksum, not copied together). */
NevoStatus nevo_write_atomic_parts(const char *path, const void *const *data, const size_t *len, int parts,
                                   NevoError *err);
/* Removes the temporary files (NAME.tmp.PID) in dir that writers killed before their
 * rename left: those of target `name` (NULL: of any name) whose PID names no live
 * process and whose lock nobody holds. Returns how many it removed. */
int nevo_remove_stale_temps(const char *dir, const char *name);
/* Opens path for reading if it is a regular file: a FIFO would block the open (and a
 * directory reads as empty), so those get an error naming them instead. */
FILE *nevo_open_regular(const char *path, NevoError *err);
/* Reads a whole file; *data is malloc'ed (caller frees). */
NevoStatus nevo_read_all(const char *path, uint8_t **data, size_t *n, NevoError *err);

/* Writes a container file atomically. */
NevoStatus nevo_container_write(const char *path, const char magic[8], uint32_t version,
                                const NevoBuf *payload, NevoError *err);
/* Reads and checks a container: magic, version, length and checksum. On success
 * *payload (malloc'ed, caller frees) holds the payload. Messages name the file. */
NevoStatus nevo_container_read(const char *path, const char magic[8], uint32_t version,
                               uint8_t **payload, size_t *len, NevoError *err);
/* The container in memory, for data that travels between processes rather than to a
 * file: encode appends header, payload and checksum to out; decode checks them (its
 * messages name `name`) and points *payload into data. */
void nevo_container_encode(const char magic[8], uint32_t version, const NevoBuf *payload, NevoBuf *out);
NevoStatus nevo_container_decode(const uint8_t *data, size_t n, const char *name, const char magic[8],
                                 uint32_t version, const uint8_t **payload, size_t *len, NevoError *err);
/* Reads the first 8 bytes of a file (to tell a policy from a checkpoint). */
NevoStatus nevo_file_magic(const char *path, char magic[8], NevoError *err);

#endif
