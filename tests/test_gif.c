/* GIF recording: the file decodes (with giflib's reader) to exactly the frames the env
 * rendered, scaled up, with one frame per step plus the reset frame; `nevo eval --gif`
 * writes one for a reference policy and for a trained policy file. */
#include <gif_lib.h>
#include <string.h>

#include "harness.h"
#include "cli/gif.h"
#include "nevo/env.h"
#include "nevo/rng.h"

TEST(gif_round_trip_matches_rendered_frames) {
    NevoEnv *env;
    NevoError err;
    CHECK(nevo_env_new("minatar/asterix", NULL, 0, &env, &err) == NEVO_OK);
    int w, h;
    nevo_env_render_size(env, &w, &h);
    CHECK(w == 10 && h == 10);
    void *inst = nevo_alloc_aligned(nevo_env_instance_size(env));
    float obs[1000];
    nevo_env_reset(env, inst, 42, obs);
    enum { FRAMES = 12 };
    uint8_t frames[FRAMES][300];
    NevoGif *gif = nevo_gif_new(w, h, 3, 7);
    NevoRng rng;
    nevo_rng_init(&rng, 1, NEVO_RNG_POLICY, 0, 0, 0);
    int n = 0;
    CHECK(nevo_env_render(env, inst, frames[n]));
    nevo_gif_add(gif, frames[n++]);
    NevoStepResult r = {0};
    while (n < FRAMES && !r.terminated) {
        float a = (float)nevo_rng_below(&rng, 6);
        nevo_env_step(env, inst, &a, obs, &r);
        nevo_env_render(env, inst, frames[n]);
        nevo_gif_add(gif, frames[n++]);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/x.gif", test_tmpdir());
    CHECK(nevo_gif_write(gif, path, &err) == NEVO_OK);
    nevo_gif_free(gif);

    int gerr;
    GifFileType *g = DGifOpenFileName(path, &gerr);
    CHECK(g != NULL);
    CHECK(DGifSlurp(g) == GIF_OK);
    CHECK_EQ_INT(g->SWidth, 30);
    CHECK_EQ_INT(g->SHeight, 30);
    CHECK_EQ_INT(g->ImageCount, n);
    for (int f = 0; f < n; f++) {
        SavedImage *im = &g->SavedImages[f];
        ColorMapObject *map = im->ImageDesc.ColorMap ? im->ImageDesc.ColorMap : g->SColorMap;
        GraphicsControlBlock gcb;
        CHECK(DGifSavedExtensionToGCB(g, f, &gcb) == GIF_OK);
        CHECK_EQ_INT(gcb.DelayTime, f == n - 1 ? 100 : 7);
        for (int y = 0; y < 30; y++)
            for (int x = 0; x < 30; x++) {
                GifColorType c = map->Colors[im->RasterBits[y * 30 + x]];
                const uint8_t *want = frames[f] + ((y / 3) * 10 + x / 3) * 3;
                CHECK_MSG(c.Red == want[0] && c.Green == want[1] && c.Blue == want[2],
                          "frame %d pixel (%d,%d) differs", f, x, y);
            }
    }
    DGifCloseFile(g, &gerr);
    free(inst);
    nevo_env_free(env);
}

/* Frames that together use more than 256 colours: the ones recorded before the palette
 * overflowed are re-quantised, so every frame decodes to the 6x7x6 cube's colour of its
 * pixel, as if the cube had been chosen from the start. */
TEST(gif_palette_overflow_quantises_every_frame) {
    enum { W = 16, H = 16, FRAMES = 3 };
    static uint8_t frames[FRAMES][W * H * 3];
    for (int f = 0; f < FRAMES; f++)
        for (int i = 0; i < W * H; i++) { /* 200 colours in frame 0, 256 new ones after */
            int k = f == 0 ? i % 200 : 200 + (f - 1) * 256 + i;
            frames[f][3 * i] = (uint8_t)(k * 37);
            frames[f][3 * i + 1] = (uint8_t)(k * 11 + f);
            frames[f][3 * i + 2] = (uint8_t)(k / 3);
        }
    NevoGif *gif = nevo_gif_new(W, H, 1, 5);
    for (int f = 0; f < FRAMES; f++) nevo_gif_add(gif, frames[f]);
    CHECK_EQ_INT(nevo_gif_frames(gif), FRAMES);
    char path[600];
    NevoError err;
    snprintf(path, sizeof path, "%s/cube.gif", test_tmpdir());
    CHECK(nevo_gif_write(gif, path, &err) == NEVO_OK);
    nevo_gif_free(gif);
    int gerr;
    GifFileType *g = DGifOpenFileName(path, &gerr);
    CHECK(g != NULL && DGifSlurp(g) == GIF_OK);
    CHECK_EQ_INT(g->ImageCount, FRAMES);
    for (int f = 0; f < FRAMES; f++)
        for (int i = 0; i < W * H; i++) {
            SavedImage *im = &g->SavedImages[f];
            ColorMapObject *map = im->ImageDesc.ColorMap ? im->ImageDesc.ColorMap : g->SColorMap;
            GifColorType c = map->Colors[im->RasterBits[i]];
            const uint8_t *want = frames[f] + 3 * i;
            CHECK_MSG(c.Red == (want[0] * 6 / 256) * 51 && c.Green == (want[1] * 7 / 256) * 42 &&
                          c.Blue == (want[2] * 6 / 256) * 51,
                      "frame %d pixel %d is not its cube colour", f, i);
        }
    DGifCloseFile(g, &gerr);
}

TEST(gif_from_eval_command) {
    char out[4096];
    int rc = test_run(out, sizeof out, "%s eval --env minatar/breakout --policy random --episodes 4 --gif %s/r.gif --gif-episodes 2",
                      test_nevo_bin(), test_tmpdir());
    CHECK_MSG(rc == 0, "%s", out);
    char path[600];
    snprintf(path, sizeof path, "%s/r.gif", test_tmpdir());
    int gerr;
    GifFileType *g = DGifOpenFileName(path, &gerr);
    CHECK(g != NULL && DGifSlurp(g) == GIF_OK);
    CHECK(g->ImageCount >= 2 * 7); /* two Breakout episodes of >= 6 steps, plus reset frames */
    DGifCloseFile(g, &gerr);
    /* an env without a renderer is refused before anything is written */
    rc = test_run(out, sizeof out, "%s eval --env CartPole-v1 --policy random --gif %s/c.gif", test_nevo_bin(), test_tmpdir());
    CHECK(rc != 0 && strstr(out, "cannot draw"));
    snprintf(path, sizeof path, "%s/c.gif", test_tmpdir());
    CHECK(test_read_file(path, NULL) == NULL);
}
