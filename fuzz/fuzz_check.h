/* What every fuzz target checks of a failure (internal to fuzz/): a status that says
 * why, and a message of one printable line. A violation traps, which libFuzzer reports
 * as a crash with the input that caused it. */
#ifndef NEVO_FUZZ_CHECK_H
#define NEVO_FUZZ_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nevo/io.h"
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

/* Mutated bytes would almost never pass the container's CRC: repairs its payload length
 * and CRC unless bit 0 of the reserved field (byte 12, which readers ignore) is set,
 * so the payload is what gets fuzzed, as crafted data would be; inputs with the bit
 * set go through as they are, to fuzz the container's own checks. */
static inline void fuzz_repair_container(uint8_t *bytes, size_t size) {
    if (size < 28 || (bytes[12] & 1)) return;
    uint64_t plen = size - 28;
    memcpy(bytes + 16, &plen, 8);
    uint32_t crc = nevo_crc32(bytes, size - 4);
    memcpy(bytes + size - 4, &crc, 4);
}

#endif
