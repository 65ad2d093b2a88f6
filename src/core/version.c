/* The library's version, from the Makefile's VERSION (its only home). */
#include "nevo/version.h"

#ifndef NEVO_VERSION
#error "NEVO_VERSION comes from the Makefile's VERSION (-DNEVO_VERSION='\"X.Y.Z\"')"
#endif

const char *nevo_version(void) { return NEVO_VERSION; }
