/* Animated GIFs of episodes (internal), encoded with giflib.
 *
 * Frames are kept at the env's own resolution, one palette index a pixel, and scaled
 * up (nearest neighbour) when the file is written, so long episodes cost little
 * memory. The palette holds every colour the frames use while there are at most 256
 * (MinAtar, the maze); past that, every frame is quantised to a fixed 6x7x6 colour
 * cube (MuJoCo's shaded pictures). The file is written atomically. */
#ifndef NEVO_GIF_H
#define NEVO_GIF_H

#include <stdint.h>

#include "nevo/status.h"

typedef struct NevoGif NevoGif;

/* A recorder for w x h RGB frames; scale 0 picks one that makes the image ~300 px. */
NevoGif *nevo_gif_new(int w, int h, int scale, int delay_cs);
void nevo_gif_free(NevoGif *g);
void nevo_gif_add(NevoGif *g, const uint8_t *rgb);
int nevo_gif_frames(const NevoGif *g);
NevoStatus nevo_gif_write(const NevoGif *g, const char *path, NevoError *err);

#endif
