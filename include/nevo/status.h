/* Status codes and error messages.
 *
 * Two error channels, as in MuJoCo: bad *input* (a config, a file, a value) makes a
 * function return a NevoStatus and write a one-line message into a caller-owned
 * NevoError; a broken *invariant* (a bug) stops the program with file:line through
 * NEVO_ASSERT. Only the CLI calls exit(). */
#ifndef NEVO_STATUS_H
#define NEVO_STATUS_H

#include <stddef.h>

typedef enum NevoStatus {
    NEVO_OK = 0,
    NEVO_ERR_INVALID,     /* bad argument, config key or value */
    NEVO_ERR_IO,          /* a file could not be read or written */
    NEVO_ERR_CORRUPT,     /* a file failed its checksum or is truncated */
    NEVO_ERR_VERSION,     /* a file of an unsupported format version */
    NEVO_ERR_NOTFOUND,    /* an unknown name (env, algorithm, ...) */
    NEVO_ERR_NUMERIC,     /* NaN or infinity from an environment or a policy */
    NEVO_ERR_UNSUPPORTED, /* valid request this build cannot do */
} NevoStatus;

#define NEVO_ERROR_MSG_SIZE 512

/* A caller-owned error record; functions fill it when they fail. */
typedef struct NevoError {
    NevoStatus status;
    char msg[NEVO_ERROR_MSG_SIZE];
} NevoError;

/* Short constant name of a status ("invalid", "io", ...). */
const char *nevo_status_name(NevoStatus status);

/* Records status and a printf-style message in err (err may be NULL); returns status,
 * so a failing function can `return nevo_error(err, NEVO_ERR_IO, "...", ...);`. */
NevoStatus nevo_error(NevoError *err, NevoStatus status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends context ("file.json: ") to an existing message. */
void nevo_error_prefix(NevoError *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Broken-invariant exit: prints file:line and the failed condition, then aborts. */
_Noreturn void nevo_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define NEVO_ASSERT(cond)                                                             \
    do {                                                                              \
        if (!(cond)) nevo_fatal(__FILE__, __LINE__, "assertion failed: %s", #cond); \
    } while (0)

/* Allocation that never returns NULL: running out of memory aborts with the size and
 * the call site. Memory is zeroed. */
void *nevo_alloc_at(size_t size, const char *file, int line);
#define nevo_alloc(size) nevo_alloc_at((size), __FILE__, __LINE__)
/* Aligned (64 bytes, a cache line) zeroed allocation; free with free(). From 4 MiB up
 * the block is 2 MiB-aligned and offered for transparent huge pages (unless the
 * environment has NEVO_HUGEPAGES=0). */
void *nevo_alloc_aligned_at(size_t size, const char *file, int line);
#define nevo_alloc_aligned(size) nevo_alloc_aligned_at((size), __FILE__, __LINE__)

#endif
