/* PNG writing with libpng.
 *
 * The image is encoded into memory (png_set_write_fn) and then written with
 * nevo_write_atomic, so the file appears whole or not at all and the atomic-write
 * rules live in one place. libpng reports errors by longjmp; the encoder keeps the
 * setjmp in one small function whose locals are not changed after it, so nothing
 * needs to be volatile. */
#include <png.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>

#include "cli/png.h"
#include "nevo/io.h"

/* libpng's own default cap on each dimension; checked here for a clearer message. */
#define MAX_SIDE 1000000

typedef struct Sink {
    NevoBuf buf;
    char msg[256]; /* libpng's error message, if it fails */
} Sink;

static void sink_write(png_structp png, png_bytep data, png_size_t n) {
    Sink *sink = png_get_io_ptr(png);
    nevo_buf_put(&sink->buf, data, n);
}

static void sink_flush(png_structp png) { (void)png; }

static void on_error(png_structp png, png_const_charp msg) {
    Sink *sink = png_get_error_ptr(png);
    snprintf(sink->msg, sizeof sink->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Warnings (none expected for plain RGB) are not failures and are not printed: the
 * library stays silent on stderr. */
static void on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static bool encode(const uint8_t *rgb, int w, int h, Sink *sink) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, sink, on_error, on_warning);
    if (!png) {
        snprintf(sink->msg, sizeof sink->msg, "libpng could not start (out of memory?)");
        return false;
    }
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        snprintf(sink->msg, sizeof sink->msg, "libpng could not start (out of memory?)");
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return false;
    }
    png_set_write_fn(png, sink, sink_write, sink_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) png_write_row(png, rgb + (size_t)y * (size_t)w * 3);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return true;
}

NevoStatus nevo_png_write(const char *path, const uint8_t *rgb, int w, int h, NevoError *err) {
    if (w <= 0 || h <= 0 || w > MAX_SIDE || h > MAX_SIDE)
        return nevo_error(err, NEVO_ERR_INVALID, "cannot write %s: image size %dx%d is not in 1..%d",
                          path, w, h, MAX_SIDE);
    Sink sink = {0};
    if (!encode(rgb, w, h, &sink)) {
        nevo_buf_free(&sink.buf);
        return nevo_error(err, NEVO_ERR_IO, "cannot write %s: PNG encoding failed: %s", path,
                          sink.msg);
    }
    NevoStatus st = nevo_write_atomic(path, sink.buf.data, sink.buf.len, err);
    nevo_buf_free(&sink.buf);
    return st;
}
