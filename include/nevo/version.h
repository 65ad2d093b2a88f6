/* The library's version. */
#ifndef NEVO_VERSION_H
#define NEVO_VERSION_H

/* "X.Y.Z": the version of the libnevo a program runs with (the Makefile's VERSION, which
 * nevo.pc's Version and `nevo --version` also show). */
const char *nevo_version(void);

#endif
