/* Hard maze geometry and pictures of it (internal to the library).
 *
 * The geometry of Lehman & Stanley's hard maze (spec ENVS.md §3.1) is shared by the
 * env (src/envs/maze.c, which defines the tables) and the drawing helpers
 * (src/envs/maze_draw.c) that `nevo plot` uses to put novelty-search behaviours on a
 * picture of the maze. Pictures use the maze's own axes, y pointing down: one maze
 * unit is `scale` pixels and pixel (0, 0) is the maze origin, so the start lands
 * bottom-left and the goal top-left, as in the paper's figures. */
#ifndef NEVO_ENVS_MAZE_H
#define NEVO_ENVS_MAZE_H

#include <stdint.h>

/* A wall segment from (x1, y1) to (x2, y2), in maze units. */
typedef struct MazeWall {
    float x1, y1, x2, y2;
} MazeWall;

#define MAZE_N_WALLS 13
extern const MazeWall maze_hard_walls[MAZE_N_WALLS];
extern const float maze_hard_start[2]; /* (36, 184), heading 0 */
extern const float maze_hard_goal[2];  /* (31, 20) */
#define MAZE_ROBOT_RADIUS 8.0f

/* Maze units a picture covers on each axis: the walls reach x = 195 and y = 202, so
 * 208 leaves a small margin. A picture at `scale` is MAZE_EXTENT * scale pixels square. */
#define MAZE_EXTENT 208

/* Clears rgb (w*h*3 bytes) to white and draws the walls (dark lines about `scale`
 * pixels wide), the start (blue ring) and the goal (green disc). Anything outside
 * the w x h picture is clipped, so any size works. */
void maze_draw_background(uint8_t *rgb, int w, int h, int scale);
/* Draws one behaviour point: a filled dot about 1.5 maze units across (at least 3
 * pixels), centred on maze point (x, y). Non-finite points are skipped. */
void maze_draw_point(uint8_t *rgb, int w, int h, int scale, float x, float y, uint8_t r,
                     uint8_t g, uint8_t b);
/* Fills the disc of the given radius (maze units) centred on (x, y). */
void maze_draw_disc(uint8_t *rgb, int w, int h, int scale, float x, float y, float radius,
                    uint8_t r, uint8_t g, uint8_t b);
/* Draws the segment (x1, y1)-(x2, y2), width in maze units. */
void maze_draw_segment(uint8_t *rgb, int w, int h, int scale, float x1, float y1, float x2,
                       float y2, float width, uint8_t r, uint8_t g, uint8_t b);

#endif
