/* What every fuzz target checks of a failure (internal to fuzz/): a status that says
 * why, and a message of one printable line. A violation traps, which libFuzzer reports
 * as a crash with the input that caused it. */
#ifndef NEVO_FUZZ_CHECK_H
#define NEVO_FUZZ_CHECK_H

#include <stdio.h>
#include <string.h>

#include "nevo/status.h"

#define FUZZ_REQUIRE(cond)                                                              \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz: requirement failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                           \
        }                                                                               \
    } while (0)

/* A failed call left a status in err and a one-line message: no control byte, not
 * empty (valid UTF-8 is nevo_escape's to keep, tested in tests/test_config.c). */
static inline void fuzz_check_error(NevoStatus st, const NevoError *err) {
    if (st == NEVO_OK) return;
    FUZZ_REQUIRE(err->status == st);
    FUZZ_REQUIRE(memchr(err->msg, '\0', sizeof err->msg) != NULL);
    FUZZ_REQUIRE(err->msg[0] != '\0');
    for (const unsigned char *p = (const unsigned char *)err->msg; *p; p++) FUZZ_REQUIRE(*p >= 0x20 && *p != 0x7F);
}

#endif
