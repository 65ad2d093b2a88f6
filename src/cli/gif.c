/* GIF encoding through giflib into memory, then one atomic write. Frames are stored
 * as palette indices as they arrive, so a 1000-step MuJoCo episode at 320 x 240 keeps
 * 77 MB, not 230 MB of RGB. */
#include "cli/gif.h"

#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/io.h"

struct NevoGif {
    int w, h, scale, delay_cs;
    int n, cap;
    uint8_t *frames;      /* (n, h, w) palette indices: a third of the RGB size */
    GifColorType pal[256];
    int n_colors;         /* colours in pal; the exact ones until `cube` is set */
    int cube;             /* the frames used more than 256 colours: pal is the 6x7x6 cube */
    int last;             /* index of the last colour found (runs of one colour are common) */
};

NevoGif *nevo_gif_new(int w, int h, int scale, int delay_cs) {
    NevoGif *g = nevo_alloc(sizeof *g);
    g->w = w;
    g->h = h;
    int side = w > h ? w : h;
    g->scale = scale > 0 ? scale : (side >= 300 ? 1 : 300 / side);
    g->delay_cs = delay_cs;
    return g;
}

void nevo_gif_free(NevoGif *g) {
    if (!g) return;
    free(g->frames);
    free(g);
}

static int cube_index(const uint8_t *c) {
    int r = (c[0] * 6) / 256, gr = (c[1] * 7) / 256, b = (c[2] * 6) / 256;
    return (r * 7 + gr) * 6 + b;
}

/* The exact palette overflowed: every index written so far (pixels [0, upto) of the
 * store) is re-quantised into the colour cube, which becomes the palette. */
static void switch_to_cube(NevoGif *g, size_t upto) {
    uint8_t remap[256];
    for (int k = 0; k < g->n_colors; k++) {
        uint8_t c[3] = {g->pal[k].Red, g->pal[k].Green, g->pal[k].Blue};
        remap[k] = (uint8_t)cube_index(c);
    }
    for (size_t i = 0; i < upto; i++) g->frames[i] = remap[g->frames[i]];
    g->n_colors = 0;
    for (int r = 0; r < 6; r++)
        for (int gr = 0; gr < 7; gr++)
            for (int b = 0; b < 6; b++)
                g->pal[g->n_colors++] = (GifColorType){(GifByteType)(r * 51), (GifByteType)(gr * 42),
                                                       (GifByteType)(b * 51)};
    g->cube = 1;
}

/* Index of colour c in the exact palette, adding it; -1 when the palette is full. */
static int exact_index(NevoGif *g, const uint8_t *c) {
    const GifColorType *p = &g->pal[g->last];
    if (g->n_colors > 0 && p->Red == c[0] && p->Green == c[1] && p->Blue == c[2]) return g->last;
    for (int k = 0; k < g->n_colors; k++)
        if (g->pal[k].Red == c[0] && g->pal[k].Green == c[1] && g->pal[k].Blue == c[2]) return g->last = k;
    if (g->n_colors == 256) return -1;
    g->pal[g->n_colors] = (GifColorType){c[0], c[1], c[2]};
    return g->last = g->n_colors++;
}

void nevo_gif_add(NevoGif *g, const uint8_t *rgb) {
    size_t fs = (size_t)g->w * g->h;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        uint8_t *grown = realloc(g->frames, fs * (size_t)cap);
        if (!grown) nevo_fatal(__FILE__, __LINE__, "out of memory recording GIF frames");
        g->frames = grown;
        g->cap = cap;
    }
    uint8_t *out = g->frames + fs * (size_t)g->n;
    for (size_t i = 0; i < fs; i++) {
        const uint8_t *c = rgb + 3 * i;
        int k = g->cube ? -1 : exact_index(g, c);
        if (k < 0 && !g->cube) switch_to_cube(g, fs * (size_t)g->n + i);
        out[i] = (uint8_t)(g->cube ? cube_index(c) : k);
    }
    g->n++;
}

int nevo_gif_frames(const NevoGif *g) { return g->n; }

static int write_to_buf(GifFileType *gif, const GifByteType *data, int n) {
    nevo_buf_put((NevoBuf *)gif->UserData, data, (size_t)n);
    return n;
}

NevoStatus nevo_gif_write(const NevoGif *g, const char *path, NevoError *err) {
    if (g->n == 0) return nevo_error(err, NEVO_ERR_INVALID, "%s: no frames to write", path);
    int n_colors = g->n_colors;
    int map_size = 2;
    while (map_size < n_colors) map_size *= 2;
    ColorMapObject *map = GifMakeMapObject(map_size, NULL);
    if (!map) return nevo_error(err, NEVO_ERR_IO, "%s: giflib could not make a colour map", path);
    memset(map->Colors, 0, sizeof(GifColorType) * (size_t)map_size);
    memcpy(map->Colors, g->pal, sizeof(GifColorType) * (size_t)n_colors);

    NevoBuf buf = {0};
    int gerr = 0;
    GifFileType *gif = EGifOpen(&buf, write_to_buf, &gerr);
    int W = g->w * g->scale, H = g->h * g->scale;
    int ok = gif != NULL;
    if (ok) EGifSetGifVersion(gif, true); /* 89a: frame delays and looping */
    ok = ok && EGifPutScreenDesc(gif, W, H, 8, 0, map) == GIF_OK;
    /* loop forever (NETSCAPE2.0 application extension) */
    static const GifByteType app[11] = {'N', 'E', 'T', 'S', 'C', 'A', 'P', 'E', '2', '.', '0'};
    static const GifByteType loop[3] = {1, 0, 0};
    ok = ok && EGifPutExtensionLeader(gif, APPLICATION_EXT_FUNC_CODE) == GIF_OK &&
         EGifPutExtensionBlock(gif, sizeof app, app) == GIF_OK &&
         EGifPutExtensionBlock(gif, sizeof loop, loop) == GIF_OK && EGifPutExtensionTrailer(gif) == GIF_OK;
    GifPixelType *line = nevo_alloc((size_t)W);
    for (int f = 0; ok && f < g->n; f++) {
        GraphicsControlBlock gcb = {.DisposalMode = DISPOSE_DO_NOT, .UserInputFlag = false,
                                    .DelayTime = f == g->n - 1 ? 100 : g->delay_cs, .TransparentColor = NO_TRANSPARENT_COLOR};
        GifByteType ext[4];
        size_t len = EGifGCBToExtension(&gcb, ext);
        ok = EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, (int)len, ext) == GIF_OK &&
             EGifPutImageDesc(gif, 0, 0, W, H, false, NULL) == GIF_OK;
        const uint8_t *frame = g->frames + (size_t)f * g->w * g->h;
        for (int y = 0; ok && y < H; y++) {
            const uint8_t *row = frame + (size_t)(y / g->scale) * g->w;
            for (int x = 0; x < W; x++) line[x] = row[x / g->scale];
            ok = EGifPutLine(gif, line, W) == GIF_OK;
        }
    }
    free(line);
    if (gif && EGifCloseFile(gif, &gerr) != GIF_OK) ok = 0;
    GifFreeMapObject(map);
    NevoStatus st = ok ? nevo_write_atomic(path, buf.data, buf.len, err)
                       : nevo_error(err, NEVO_ERR_IO, "%s: GIF encoding failed (giflib error %d)", path, gerr);
    nevo_buf_free(&buf);
    return st;
}
