/* Status names, error messages, fatal aborts and the allocation wrappers. */
#include "nevo/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strutil.h"
#if defined(__linux__)
#include <sys/mman.h>
#endif

const char *nevo_status_name(NevoStatus status) {
    switch (status) {
    case NEVO_OK: return "ok";
    case NEVO_ERR_INVALID: return "invalid";
    case NEVO_ERR_IO: return "io";
    case NEVO_ERR_CORRUPT: return "corrupt";
    case NEVO_ERR_VERSION: return "version";
    case NEVO_ERR_NOTFOUND: return "not-found";
    case NEVO_ERR_NUMERIC: return "numeric";
    case NEVO_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown";
}

/* Messages are one line: whatever a message echoes (a key, an env name, a path given
 * by the user or read from a file) is escaped by nevo_escape. */
NevoStatus nevo_error(NevoError *err, NevoStatus status, const char *fmt, ...) {
    if (!err) return status;
    err->status = status;
    char raw[4 * NEVO_ERROR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    nevo_escape(err->msg, sizeof err->msg, raw);
    return status;
}

void nevo_error_prefix(NevoError *err, const char *fmt, ...) {
    if (!err) return;
    char raw[NEVO_ERROR_MSG_SIZE], prefix[NEVO_ERROR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    nevo_escape(prefix, sizeof prefix, raw);
    size_t np = strlen(prefix), nm = strlen(err->msg);
    if (np + nm >= sizeof err->msg) nm = sizeof err->msg - 1 - (np < sizeof err->msg ? np : sizeof err->msg - 1);
    if (np >= sizeof err->msg) np = sizeof err->msg - 1;
    while (nm > 0 && ((unsigned char)err->msg[nm] & 0xC0) == 0x80) nm--; /* no half character */
    memmove(err->msg + np, err->msg, nm);
    memcpy(err->msg, prefix, np);
    err->msg[np + nm] = '\0';
}

_Noreturn void nevo_fatal(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "nevo: internal error at %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void *nevo_alloc_at(size_t size, const char *file, int line) {
    void *p = calloc(1, size ? size : 1);
    if (!p) nevo_fatal(file, line, "out of memory allocating %zu bytes", size);
    return p;
}

/* Buffers of at least this size (populations, the noise table) are placed on 2 MiB
 * boundaries and offered to the kernel for transparent huge pages: streamed through
 * the forward or read at random slices, 4 KiB pages cost a TLB miss every 4 KiB.
 * NEVO_HUGEPAGES=0 turns this off (to measure what it gains). */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)

static int huge_pages_wanted(void) {
    const char *v = getenv("NEVO_HUGEPAGES");
    return !(v && strcmp(v, "0") == 0);
}

void *nevo_alloc_aligned_at(size_t size, const char *file, int line) {
    size_t align = size >= HUGE_MIN && huge_pages_wanted() ? HUGE_ALIGN : 64;
    size_t rounded = (size + align - 1) / align * align;
    void *p = aligned_alloc(align, rounded ? rounded : 64);
    if (!p) nevo_fatal(file, line, "out of memory allocating %zu bytes", size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == HUGE_ALIGN) (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice: refusal is harmless */
#endif
    memset(p, 0, rounded ? rounded : 64);
    return p;
}
