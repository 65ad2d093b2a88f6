/* PNG pictures (internal to the library): RGB images written with libpng, for
 * `nevo plot`'s maze pictures and env renders. */
#ifndef NEVO_IO_PNG_H
#define NEVO_IO_PNG_H

#include <stdint.h>

#include "nevo/status.h"

/* Writes an 8-bit RGB image (w*h*3 bytes, rows top to bottom) to path as PNG. The file
 * is replaced atomically (temporary file, fsync, rename), so a reader never sees half
 * a picture. Failure messages name the path. */
NevoStatus nevo_png_write(const char *path, const uint8_t *rgb, int w, int h, NevoError *err);

#endif
