/* maze/hard: the deceptive hard maze of Lehman & Stanley 2011, as Uber's
 * gym_tensorflow/maze defines it (spec ENVS.md §3; we follow §3.4, not Lehman's own
 * variants of §3.5).
 *
 * A round robot (radius 8) starts bottom-left at (36, 184), heading 0 (+x), and should
 * reach the goal (31, 20) top-left, in a chamber that the straight route runs into from
 * the wrong side: greedy distance-following ends in the dead end under wall 3, which is
 * what makes the maze the standard novelty-search benchmark.
 *
 * Observation (11 floats): 1 (bias), six rangefinders (distance to the nearest wall
 * along -90, -45, 0, 45, 90 and -180 degrees from the heading, divided by the range
 * 100; 1 when nothing is within range), four binary radar slices telling in which
 * quarter around the robot the goal lies (front, +90, rear, -90; distance is ignored).
 * Action (2 floats): a0 + 0.5 and a1 + 0.5 clipped to [0, 1] set the target angular
 * velocity and speed, (o - 0.5) * 6 in [-3, 3]; each moves toward its target by at most
 * 0.2 per step. A move that would bring the centre within 8 of a wall is refused (the
 * heading still turns) and counts a collision. An episode is exactly 400 steps (the
 * env layer's time limit); the reward is 0 except on the last step, where it is minus
 * the distance to the goal. The behaviour characterisation is the final (x, y).
 *
 * Arithmetic follows the reference C++ (maze.h) where rounding can show: state and
 * geometry are float32, the few expressions the reference evaluates in double (angle
 * conversions with pi = 3.1415926, the velocity components, the output scaling) are
 * evaluated in double and rounded to float at the same places, and the per-call
 * trigonometry of a float angle is the float version (cosf), as C++'s overloads pick.
 * This reproduces the §3.6 reference trajectories to float rounding. */
#include <math.h>
#include <string.h>

#include "envs/env_internal.h"
#include "envs/maze.h"

/* Spec §3.1 (hard_maze.txt): the 13 walls as (x1, y1) -> (x2, y2), in file order; the
 * env collides with them, and its public scene (below) shows the same numbers. */
#define HARD_WALLS(W)                                                                       \
    W(41, 5, 3, 8) W(3, 8, 4, 49) W(4, 49, 57, 53) W(4, 49, 7, 202) W(7, 202, 195, 198)    \
    W(195, 198, 186, 8) W(186, 8, 39, 5) W(56, 54, 56, 157) W(57, 106, 158, 162)           \
    W(77, 201, 108, 164) W(6, 80, 33, 121) W(192, 146, 87, 91) W(56, 55, 133, 30)
#define START_X 36
#define START_Y 184
#define GOAL_X 31
#define GOAL_Y 20

#define MAZE_WALL(x1, y1, x2, y2) {x1, y1, x2, y2},
const MazeWall maze_hard_walls[MAZE_N_WALLS] = {HARD_WALLS(MAZE_WALL)};
const float maze_hard_start[2] = {START_X, START_Y};
const float maze_hard_goal[2] = {GOAL_X, GOAL_Y};

#define SCENE_WALL(x1, y1, x2, y2) {x1, y1, x2, y2, 0},
static const NevoSceneWall scene_walls[] = {HARD_WALLS(SCENE_WALL)};
_Static_assert(sizeof scene_walls / sizeof scene_walls[0] == MAZE_N_WALLS, "MAZE_N_WALLS counts HARD_WALLS");

/* The maze as its figures show it: y down, the walls enclosing [0, MAZE_EXTENT]^2. */
static const NevoEnvScene scene = {
    .n_walls = MAZE_N_WALLS,
    .walls = scene_walls,
    .has_start = true,
    .has_goal = true,
    .start = {START_X, START_Y},
    .goal = {GOAL_X, GOAL_Y},
    .lo = {0, 0},
    .hi = {MAZE_EXTENT, MAZE_EXTENT},
    .enclosed = true,
    .y_down = true,
    .x_label = "final x (maze units)",
    .y_label = "final y (maze units)",
};

/* Spec §3.2-3.4. */
#define PI_REF 3.1415926 /* the reference's pi, in double as its literals are */
#define RANGE 100.0f
#define EPISODE_STEPS 400
#define MAX_RATE 3.0f     /* |speed| and |angular velocity| limit */
#define MAX_DELTA 0.2     /* per-step change toward the target, a double literal there */
#define OUTPUT_SCALE 6.0  /* (o - 0.5) * 6 */
#define N_RANGEFINDERS 6
#define N_RADAR 4
#define OBS_DIM (1 + N_RANGEFINDERS + N_RADAR)
#define STATE_DIM 7

static const float rangefinder_angles[N_RANGEFINDERS] = {-90.0f, -45.0f, 0.0f,
                                                         45.0f,  90.0f,  -180.0f};
/* Slice i fires when the goal's angle (or the angle + 360) is in [lo, hi). */
static const float radar_lo[N_RADAR] = {315.0f, 45.0f, 135.0f, 225.0f};
static const float radar_hi[N_RADAR] = {405.0f, 135.0f, 225.0f, 315.0f};

typedef struct Maze {
    float x, y;      /* centre */
    float heading;   /* degrees, kept in [0, 360] by one wrap per step */
    float speed;     /* units per step, along the heading */
    float ang_vel;   /* degrees per step */
    int32_t collisions;
    int32_t steps;   /* the env class does not see the env layer's counter */
} Maze;

/* Distance between two points in float, as the reference's Point::distance. */
static float dist(float ax, float ay, float bx, float by) {
    float dx = bx - ax, dy = by - ay;
    return sqrtf(dx * dx + dy * dy);
}

/* Degrees to radians the reference's way: in double, then stored as float. */
static float radians(float deg) { return (float)((double)deg / 180.0 * PI_REF); }

/* Rotates (*px, *py) by deg degrees about (cx, cy). */
static void rotate_about(float *px, float *py, float deg, float cx, float cy) {
    float rad = radians(deg);
    float ox = *px - cx, oy = *py - cy;
    float c = cosf(rad), s = sinf(rad);
    float rx = c * ox - s * oy, ry = s * ox + c * oy;
    *px = rx + cx;
    *py = ry + cy;
}

/* Distance from point (px, py) to wall m: to the nearest endpoint when the projection
 * falls outside the segment. */
static float wall_distance(const MazeWall *m, float px, float py) {
    float utop = (px - m->x1) * (m->x2 - m->x1) + (py - m->y1) * (m->y2 - m->y1);
    float ubot = dist(m->x1, m->y1, m->x2, m->y2);
    ubot *= ubot;
    if (ubot == 0.0f) return 0.0f;
    float u = utop / ubot;
    if (u < 0.0f || u > 1.0f) {
        float d1 = dist(m->x1, m->y1, px, py), d2 = dist(m->x2, m->y2, px, py);
        return d1 < d2 ? d1 : d2;
    }
    float qx = m->x1 + u * (m->x2 - m->x1), qy = m->y1 + u * (m->y2 - m->y1);
    return dist(qx, qy, px, py);
}

static bool collides(float px, float py) {
    for (int i = 0; i < MAZE_N_WALLS; i++)
        if (wall_distance(&maze_hard_walls[i], px, py) < MAZE_ROBOT_RADIUS) return true;
    return false;
}

/* Proper intersection of wall m (A -> B) with the ray (C -> D): both parameters
 * strictly inside (0, 1); parallel lines never meet. Writes the point on the wall. */
static bool intersect(const MazeWall *m, float cx, float cy, float dx, float dy, float *ix,
                      float *iy) {
    float ax = m->x1, ay = m->y1, bx = m->x2, by = m->y2;
    float r_top = (ay - cy) * (dx - cx) - (ax - cx) * (dy - cy);
    float s_top = (ay - cy) * (bx - ax) - (ax - cx) * (by - ay);
    float bot = (bx - ax) * (dy - cy) - (by - ay) * (dx - cx);
    if (bot == 0.0f) return false;
    float r = r_top / bot, s = s_top / bot;
    if (!(r > 0.0f && r < 1.0f && s > 0.0f && s < 1.0f)) return false;
    *ix = ax + r * (bx - ax);
    *iy = ay + r * (by - ay);
    return true;
}

/* Distance to the nearest wall along heading + rel degrees, capped at RANGE. The far
 * end is built as the reference does it: project at the relative angle, then rotate
 * by the heading about the centre (not one cos/sin of the summed angle). */
static float rangefinder(const Maze *s, float rel) {
    float rad = radians(rel);
    float ex = s->x + cosf(rad) * RANGE, ey = s->y + sinf(rad) * RANGE;
    rotate_about(&ex, &ey, s->heading, s->x, s->y);
    float range = RANGE;
    for (int j = 0; j < MAZE_N_WALLS; j++) {
        float ix, iy;
        if (intersect(&maze_hard_walls[j], s->x, s->y, ex, ey, &ix, &iy)) {
            float d = dist(ix, iy, s->x, s->y);
            if (d < range) range = d;
        }
    }
    return range;
}

/* Angle in degrees of the vector (x, y), in (-90, 270]. */
static float vector_angle(float x, float y) {
    if (x == 0.0f) return y > 0.0f ? 90.0f : 270.0f;
    float ang = (float)((double)atanf(y / x) / PI_REF * 180.0);
    return x > 0.0f ? ang : (float)((double)ang + 180.0);
}

static void write_obs(const Maze *s, float *obs) {
    obs[0] = 1.0f;
    for (int i = 0; i < N_RANGEFINDERS; i++) obs[1 + i] = rangefinder(s, rangefinder_angles[i]) / RANGE;
    /* The goal in the robot's frame: rotate by -heading about the robot, then translate. */
    float gx = maze_hard_goal[0], gy = maze_hard_goal[1];
    rotate_about(&gx, &gy, -s->heading, s->x, s->y);
    double angle = vector_angle(gx - s->x, gy - s->y);
    for (int i = 0; i < N_RADAR; i++) {
        bool in = (angle >= radar_lo[i] && angle < radar_hi[i]) ||
                  (angle + 360.0 >= radar_lo[i] && angle + 360.0 < radar_hi[i]);
        obs[1 + N_RANGEFINDERS + i] = in ? 1.0f : 0.0f;
    }
}

static void reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    Maze *s = state;
    *s = (Maze){.x = maze_hard_start[0], .y = maze_hard_start[1]};
    write_obs(s, obs);
}

/* Moves *v toward target by at most MAX_DELTA (compared in double, as the literal is). */
static void approach(float *v, float target) {
    float d = target - *v;
    if (d >= MAX_DELTA) d = (float)MAX_DELTA;
    if (d <= -MAX_DELTA) d = (float)-MAX_DELTA;
    *v += d;
}

static float clamp_rate(float v) { return v > MAX_RATE ? MAX_RATE : v < -MAX_RATE ? -MAX_RATE : v; }

static void step(const NevoEnv *env, void *state, const float *action, float *obs,
                 NevoStepResult *out) {
    Maze *s = state;
    /* Outputs: the action shifted by 0.5 (in double, stored as float) and clipped. */
    float o[2];
    for (int i = 0; i < 2; i++) {
        o[i] = (float)((double)action[i] + 0.5);
        if (o[i] > 1.0f) o[i] = 1.0f;
        if (o[i] < 0.0f) o[i] = 0.0f;
    }
    approach(&s->ang_vel, (float)(((double)o[0] - 0.5) * OUTPUT_SCALE));
    approach(&s->speed, (float)(((double)o[1] - 0.5) * OUTPUT_SCALE));
    s->speed = clamp_rate(s->speed);
    s->ang_vel = clamp_rate(s->ang_vel);

    /* Update(): velocity from the old heading, then turn (wrapping once), then move
     * unless the new centre would be within the radius of a wall. */
    float vx = (float)(cos((double)s->heading / 180.0 * PI_REF) * (double)s->speed);
    float vy = (float)(sin((double)s->heading / 180.0 * PI_REF) * (double)s->speed);
    s->heading += s->ang_vel;
    if (s->heading > 360.0f) s->heading -= 360.0f;
    if (s->heading < 0.0f) s->heading += 360.0f;
    float nx = vx + s->x, ny = vy + s->y;
    if (!collides(nx, ny)) {
        s->x = nx;
        s->y = ny;
    } else {
        s->collisions++;
    }
    s->steps++;

    /* The reward comes on the episode's last step. That is step 400 unless a caller
     * changed the env's time limit, which then also moves the reward. */
    int last = nevo_env_spec(env)->max_steps > 0 ? nevo_env_spec(env)->max_steps : EPISODE_STEPS;
    out->reward = s->steps >= last
                      ? -dist(s->x, s->y, maze_hard_goal[0], maze_hard_goal[1])
                      : 0.0f;
    out->terminated = false; /* the time limit ends the episode (truncated) */
    write_obs(s, obs);
}

/* State layout: x, y, heading, speed, ang_vel, collisions, steps. */
static void get_state(const NevoEnv *env, const void *state, double *values) {
    const Maze *s = state;
    values[0] = s->x;
    values[1] = s->y;
    values[2] = s->heading;
    values[3] = s->speed;
    values[4] = s->ang_vel;
    values[5] = s->collisions;
    values[6] = s->steps;
}

static NevoStatus set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                            NevoError *err) {
    static const char *const names[STATE_DIM] = {"x",       "y",          "heading", "speed",
                                                  "ang_vel", "collisions", "steps"};
    for (int i = 0; i < STATE_DIM; i++) {
        bool ok = isfinite(values[i]) && fabs(values[i]) <= 1e9;
        if (ok && i >= 5) ok = values[i] >= 0 && values[i] == floor(values[i]);
        if (!ok)
            return nevo_error(err, NEVO_ERR_INVALID,
                              "maze/hard: state[%d] (%s) is %g, not a finite%s value", i,
                              names[i], values[i], i >= 5 ? " non-negative integer" : "");
    }
    Maze *s = state;
    s->x = (float)values[0];
    s->y = (float)values[1];
    s->heading = (float)values[2];
    s->speed = (float)values[3];
    s->ang_vel = (float)values[4];
    s->collisions = (int32_t)values[5];
    s->steps = (int32_t)values[6];
    write_obs(s, obs);
    return NEVO_OK;
}

static void bc(const NevoEnv *env, const void *state, float *out) {
    const Maze *s = state;
    out[0] = s->x;
    out[1] = s->y;
}

#define RENDER_SCALE 1

static void render(const NevoEnv *env, const void *state, uint8_t *rgb) {
    const Maze *s = state;
    int n = MAZE_EXTENT * RENDER_SCALE;
    maze_draw_background(rgb, n, n, RENDER_SCALE);
    maze_draw_disc(rgb, n, n, RENDER_SCALE, s->x, s->y, MAZE_ROBOT_RADIUS, 220, 50, 40);
    /* A heading tick from the centre to the rim. */
    float rad = radians(s->heading);
    maze_draw_segment(rgb, n, n, RENDER_SCALE, s->x, s->y,
                      s->x + cosf(rad) * MAZE_ROBOT_RADIUS, s->y + sinf(rad) * MAZE_ROBOT_RADIUS,
                      1.5f, 255, 255, 255);
}

const NevoEnvClass nevo_env_maze_hard = {
    .spec =
        {
            .name = "maze/hard",
            .summary = "deceptive hard maze: steer to the goal, scored by final distance (Lehman & "
                       "Stanley 2011)",
            .obs_rank = 1,
            .obs_shape = {OBS_DIM},
            .obs_dim = OBS_DIM,
            .action_kind = NEVO_SPACE_BOX,
            .action_dim = 2,
            /* a + 0.5 is clipped to [0, 1], so only [-0.5, 0.5] changes anything */
            .action_low = {-0.5f, -0.5f},
            .action_high = {0.5f, 0.5f},
            .max_steps = EPISODE_STEPS,
            .state_dim = STATE_DIM,
            .bc_dim = 2, /* final (x, y) */
        },
    .state_size = sizeof(Maze),
    .reset = reset,
    .step = step,
    .get_state = get_state,
    .set_state = set_state,
    .bc = bc,
    .render = render,
    .render_w = MAZE_EXTENT * RENDER_SCALE,
    .render_h = MAZE_EXTENT * RENDER_SCALE,
    .scene = &scene,
};
