/* Pictures of the hard maze: walls, start, goal, robots and behaviour points.
 *
 * Used by the env's render (src/envs/maze.c) and by `nevo plot` for novelty-search
 * pictures, where thousands of final positions are dotted over the maze. Shapes are
 * rasterised by testing each pixel centre in the shape's bounding box against the
 * exact shape (distance to a segment, to a centre), which needs no line-drawing
 * special cases, clips for free and gives the same picture at every scale. */
#include <math.h>
#include <stddef.h>

#include "envs/maze.h"

#define WALL_RGB 40, 40, 40
#define GOAL_RGB 0, 170, 0
#define START_RGB 30, 80, 220

static float fmin2(float a, float b) { return a < b ? a : b; }
static float fmax2(float a, float b) { return a > b ? a : b; }

static void put(uint8_t *rgb, int w, int px, int py, uint8_t r, uint8_t g, uint8_t b) {
    uint8_t *p = rgb + ((size_t)py * (size_t)w + (size_t)px) * 3;
    p[0] = r;
    p[1] = g;
    p[2] = b;
}

/* Pixel range [*lo, *hi] whose centres can fall in [a, b] (pixel units), clipped to
 * [0, n); empty when *lo > *hi. Done in float and clamped before converting, so huge
 * or infinite coordinates cannot overflow an int. */
static void pixel_span(float a, float b, int n, int *lo, int *hi) {
    float l = floorf(a - 0.5f), h = ceilf(b - 0.5f);
    l = fmax2(l, 0.0f);
    h = fmin2(h, (float)(n - 1));
    if (!(l <= h)) { /* also catches NaN */
        *lo = 1;
        *hi = 0;
        return;
    }
    *lo = (int)l;
    *hi = (int)h;
}

/* Squared distance from (px, py) to the segment (ax, ay)-(bx, by). */
static float seg_dist2(float px, float py, float ax, float ay, float bx, float by) {
    float dx = bx - ax, dy = by - ay;
    float len2 = dx * dx + dy * dy;
    float t = len2 > 0.0f ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0.0f;
    t = fmin2(fmax2(t, 0.0f), 1.0f);
    float ex = ax + t * dx - px, ey = ay + t * dy - py;
    return ex * ex + ey * ey;
}

void maze_draw_segment(uint8_t *rgb, int w, int h, int scale, float x1, float y1, float x2,
                       float y2, float width, uint8_t r, uint8_t g, uint8_t b) {
    if (w <= 0 || h <= 0 || scale <= 0) return;
    float s = (float)scale, half = 0.5f * width * s;
    float ax = x1 * s, ay = y1 * s, bx = x2 * s, by = y2 * s; /* pixel units */
    int x0, xn, y0, yn;
    pixel_span(fmin2(ax, bx) - half, fmax2(ax, bx) + half, w, &x0, &xn);
    pixel_span(fmin2(ay, by) - half, fmax2(ay, by) + half, h, &y0, &yn);
    for (int py = y0; py <= yn; py++)
        for (int px = x0; px <= xn; px++)
            if (seg_dist2((float)px + 0.5f, (float)py + 0.5f, ax, ay, bx, by) <= half * half)
                put(rgb, w, px, py, r, g, b);
}

void maze_draw_disc(uint8_t *rgb, int w, int h, int scale, float x, float y, float radius,
                    uint8_t r, uint8_t g, uint8_t b) {
    maze_draw_segment(rgb, w, h, scale, x, y, x, y, 2.0f * radius, r, g, b);
}

/* A ring: the disc minus its inside, drawn pixel by pixel so what lies under the
 * hole stays visible. */
static void draw_ring(uint8_t *rgb, int w, int h, int scale, float x, float y, float radius,
                      float thickness, uint8_t r, uint8_t g, uint8_t b) {
    float s = (float)scale, cx = x * s, cy = y * s;
    float ro = radius * s, ri = fmax2(0.0f, radius - thickness) * s;
    int x0, xn, y0, yn;
    pixel_span(cx - ro, cx + ro, w, &x0, &xn);
    pixel_span(cy - ro, cy + ro, h, &y0, &yn);
    for (int py = y0; py <= yn; py++)
        for (int px = x0; px <= xn; px++) {
            float dx = (float)px + 0.5f - cx, dy = (float)py + 0.5f - cy;
            float d2 = dx * dx + dy * dy;
            if (d2 <= ro * ro && d2 >= ri * ri) put(rgb, w, px, py, r, g, b);
        }
}

void maze_draw_background(uint8_t *rgb, int w, int h, int scale) {
    if (w <= 0 || h <= 0 || scale <= 0) return;
    for (size_t i = 0; i < (size_t)w * (size_t)h * 3; i++) rgb[i] = 255;
    /* About 1.5 pixels at scale 1 and thicker (but thinner in maze units) as the
     * scale grows, so walls stay visible without hiding points near them. */
    float wall_w = (1.5f + 0.5f * (float)scale) / (float)scale;
    for (int i = 0; i < MAZE_N_WALLS; i++) {
        const MazeWall *m = &maze_hard_walls[i];
        maze_draw_segment(rgb, w, h, scale, m->x1, m->y1, m->x2, m->y2, wall_w, WALL_RGB);
    }
    maze_draw_disc(rgb, w, h, scale, maze_hard_goal[0], maze_hard_goal[1], 4.0f, GOAL_RGB);
    draw_ring(rgb, w, h, scale, maze_hard_start[0], maze_hard_start[1], 4.0f, 1.5f, START_RGB);
}

void maze_draw_point(uint8_t *rgb, int w, int h, int scale, float x, float y, uint8_t r,
                     uint8_t g, uint8_t b) {
    if (!isfinite(x) || !isfinite(y) || scale <= 0) return;
    /* 1.5 pixels of radius at least: a 3x3 dot, visible at scale 1. */
    float radius = fmax2(0.75f, 1.5f / (float)scale);
    maze_draw_disc(rgb, w, h, scale, x, y, radius, r, g, b);
}
