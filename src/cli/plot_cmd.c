/* `nevo plot`: PNG figures of training runs, drawn with cairo.
 *
 *   nevo plot curves RUN[=LABEL] ... --out FILE.png      learning curves (metrics.jsonl)
 *   nevo plot behaviours RUN[=LABEL] ... --out FILE.png  final behaviours (behaviours.json)
 *
 * Runs given the same LABEL form a group, drawn as the mean of its runs with a min-max
 * band. Every input is read and checked before anything is drawn; the picture is
 * encoded in memory and written atomically, so bad input or a failure leaves no file.
 *
 * Behaviour panels (side N pixels) have a fixed layout the tests rely on: a title strip
 * of N/14 pixels, then a square of side S = N - N/14 - 2*(N/40), centred horizontally,
 * N/40 pixels below the strip. On an enclosed scene's panel (the maze's; scenes come
 * from the env layer, nevo_env_scene) point (x, y) lands at pixel
 * (panel_x + (N - S)/2 + (x - lo_x)*S/E, panel_y + N/14 + N/40 + (y - lo_y)*S/E), E the
 * longer side of the scene's region (208 maze units from (0, 0) for the maze), where y
 * points down as in the maze paper's figures (y_down; otherwise it points up). */
#include <cairo.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/strutil.h"
#include "nevo/env.h"
#include "nevo/io.h"

static const char *help =
    "usage: nevo plot curves RUN[=LABEL] ... --out FILE.png [--x KEY] [--y KEY] [--smooth N]\n"
    "                        [--ref LABEL=VALUE ...] [--title TEXT] [--size WxH]\n"
    "       nevo plot behaviours RUN[=LABEL] ... --out FILE.png [--size N] [--no-archive]\n"
    "\n"
    "Draws PNG figures of training runs (directories written by `nevo train --out DIR`).\n"
    "LABEL names a run in the legend or panel title (default: its algorithm and seed);\n"
    "runs given the same LABEL, such as the seeds of one setting, form one group. The\n"
    "picture is written atomically: after an error no file is left.\n"
    "\n"
    "curves: learning curves from each RUN's metrics.jsonl. A group of several runs is\n"
    "drawn as the mean of its runs, interpolated linearly over the x range all of them\n"
    "cover, inside a translucent band from their minimum to their maximum.\n"
    "  --x KEY         x axis: frames (default), generation, wall_s or episodes\n"
    "  --y KEY         any numeric key of metrics.jsonl, or KEY[i] for an element of a list\n"
    "                  such as behaviour[0] (default elite_validation_mean,\n"
    "                  the elite's mean validation return; best_fitness where the first\n"
    "                  RUN's metrics lack it)\n"
    "  --smooth N      replace each point of each run by the mean of its last N points (fewer\n"
    "                  at a run's start), before runs are grouped; default 1: no smoothing\n"
    "  --ref LABEL=V   a dashed horizontal reference line at V, e.g. --ref \"DQN 5M=15.9\"\n"
    "                  (repeatable)\n"
    "  --title TEXT    a title above the plot\n"
    "  --size WxH      picture size in pixels (default 800x500)\n"
    "\n"
    "behaviours: each RUN's behaviours.json (written when a run on an env with a behaviour\n"
    "characterisation finishes), one panel per RUN, up to 3 panels a row. Maze panels show\n"
    "the hard maze (walls dark, start a blue ring, goal a green ring), the novelty archive\n"
    "(light grey) and the final population (red); other 2-D behaviours are a scatter on\n"
    "axes fitted to the points (humanoid-trap panels add the trap's walls and the start).\n"
    "  --size N        side of each square panel in pixels (default 400)\n"
    "  --archive       draw the novelty archive too (default)\n"
    "  --no-archive    draw the final population only\n";

#define LABEL_MAX 128
#define MAX_REFS 64
#define KEY_MAX 64

typedef struct Rgb {
    double r, g, b;
} Rgb;

/* Group colours, in order (the common ten-colour categorical palette). */
static const Rgb palette[10] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812},
};
static const Rgb ink = {0.10, 0.10, 0.10};
static const Rgb muted = {0.35, 0.35, 0.35};
static const Rgb grid_rgb = {0.90, 0.90, 0.90};
static const Rgb wall_rgb = {0.15, 0.15, 0.15};
static const Rgb start_rgb = {0.122, 0.467, 0.706};
static const Rgb goal_rgb = {0.173, 0.627, 0.173};
static const Rgb archive_rgb = {0.66, 0.66, 0.66};
static const Rgb population_rgb = {0.839, 0.153, 0.157};

static void set_rgb(cairo_t *cr, Rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

/* ---- runs and labels ------------------------------------------------------------ */

typedef struct RunArg {
    char *dir;
    char label[LABEL_MAX];
    int labelled;
} RunArg;

static void path_in(char *out, size_t n, const char *dir, const char *name) {
    snprintf(out, n, "%s/%s", dir, name);
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* RUN or RUN=LABEL; an argument that is itself an existing path is always a RUN. */
static NevoStatus parse_run_arg(const char *arg, RunArg *r, NevoError *err) {
    struct stat st;
    const char *eq = strchr(arg, '=');
    memset(r, 0, sizeof *r);
    if (eq && stat(arg, &st) != 0) {
        if (eq == arg)
            return nevo_error(err, NEVO_ERR_INVALID, "'%s': RUN=LABEL needs a run directory before '='", arg);
        if (eq[1] == '\0')
            return nevo_error(err, NEVO_ERR_INVALID, "'%s': RUN=LABEL needs a label after '='", arg);
        if (nevo_strlcpy(r->label, eq + 1, sizeof r->label))
            return nevo_error(err, NEVO_ERR_INVALID, "'%s': the label is longer than %d characters", arg,
                              LABEL_MAX - 1);
        r->labelled = 1;
        r->dir = strndup(arg, (size_t)(eq - arg));
    } else {
        r->dir = strdup(arg);
    }
    if (!is_dir(r->dir))
        return nevo_error(err, NEVO_ERR_IO,
                          "%s: no such run directory; give a directory written by `nevo train --out DIR`",
                          r->dir);
    return NEVO_OK;
}

/* "ALGO seed S" from the run's config.json, else the directory's last component. */
static void default_label(RunArg *r, const char *fallback_algo) {
    char path[4096];
    path_in(path, sizeof path, r->dir, "config.json");
    FILE *f = nevo_open_regular(path, NULL); /* a label is optional: no config, no error */
    json_t *cfg = f ? json_loadf(f, 0, NULL) : NULL;
    if (f) fclose(f);
    const char *algo = json_string_value(json_object_get(cfg, "algo"));
    json_t *seed = json_object_get(cfg, "seed");
    if (!algo) algo = fallback_algo;
    if (algo && json_is_integer(seed)) {
        snprintf(r->label, sizeof r->label, "%s seed %lld", algo, (long long)json_integer_value(seed));
    } else if (algo) {
        snprintf(r->label, sizeof r->label, "%s", algo);
    } else {
        size_t n = strlen(r->dir);
        while (n > 1 && r->dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && r->dir[b - 1] != '/') b--;
        snprintf(r->label, sizeof r->label, "%.*s", (int)(n - b), r->dir + b);
    }
    json_decref(cfg);
}

static void free_runs(RunArg *runs, int n) {
    for (int i = 0; i < n; i++) free(runs[i].dir);
    free(runs);
}

/* ---- output ---------------------------------------------------------------------- */

static cairo_status_t png_sink(void *closure, const unsigned char *data, unsigned int len) {
    nevo_buf_put(closure, data, len);
    return CAIRO_STATUS_SUCCESS;
}

static NevoStatus save_png(cairo_surface_t *surface, const char *path, NevoError *err) {
    NevoBuf b = {0};
    cairo_status_t cs = cairo_surface_write_to_png_stream(surface, png_sink, &b);
    if (cs != CAIRO_STATUS_SUCCESS) {
        nevo_buf_free(&b);
        return nevo_error(err, NEVO_ERR_IO, "cannot encode %s: %s", path, cairo_status_to_string(cs));
    }
    NevoStatus st = nevo_write_atomic(path, b.data, b.len, err);
    nevo_buf_free(&b);
    return st;
}

/* A white RGB canvas; NULL (with err set) if cairo cannot make one that size. */
static cairo_surface_t *new_canvas(int w, int h, NevoError *err) {
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        nevo_error(err, NEVO_ERR_IO, "cannot make a %dx%d picture: %s", w, h,
                   cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return NULL;
    }
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_destroy(cr);
    return s;
}

/* ---- text ------------------------------------------------------------------------ */

static void font(cairo_t *cr, double size, int bold) {
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *s) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

/* Draws s with its anchor at (x, y): ax 0 / 0.5 / 1 = left / centre / right edge;
 * ay 0 / 0.5 = top / middle of the capital letters (digits included). */
static void text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay) {
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    double cap = 0.72 * fe.ascent; /* close to the cap height of common sans fonts */
    cairo_move_to(cr, x - ax * text_width(cr, s), y + cap * (1.0 - ay));
    cairo_show_text(cr, s);
}

/* ---- axes ------------------------------------------------------------------------ */

typedef struct Axis {
    double lo, hi, step;
} Axis;

/* Rounds [lo, hi] out to multiples of a 1-2-5 step giving about `target` intervals. */
static Axis nice_axis(double lo, double hi, int target) {
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1.0;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / (target < 1 ? 1 : target);
    double mag = pow(10.0, floor(log10(raw)));
    double m = raw / mag;
    double step = (m < 1.5 ? 1.0 : m < 3.0 ? 2.0 : m < 7.0 ? 5.0 : 10.0) * mag;
    Axis a = {floor(lo / step + 1e-9) * step, ceil(hi / step - 1e-9) * step, step};
    if (!(a.hi > a.lo)) a.hi = a.lo + step;
    return a;
}

static int axis_ticks(const Axis *a) { return (int)floor((a->hi - a->lo) / a->step + 1e-6) + 1; }

static double axis_tick(const Axis *a, int k) {
    double v = a->lo + k * a->step;
    return fabs(v) < a->step * 1e-9 ? 0.0 : v;
}

static void strip_zeros(char *s) {
    if (!strchr(s, '.')) return;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '0') s[--n] = '\0';
    if (n > 0 && s[n - 1] == '.') s[--n] = '\0';
}

/* A tick label: 250k, 1.5M for large round values, else just enough decimals. */
static void tick_label(double v, double step, char *buf, size_t n) {
    static const struct {
        double unit;
        const char *suffix;
    } units[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    if (v == 0) {
        snprintf(buf, n, "0");
        return;
    }
    if (step >= 1000) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (fabs(v) < units[i].unit) continue;
            int dec = (int)ceil(-log10(step / units[i].unit) - 1e-9);
            if (dec < 0) dec = 0;
            snprintf(buf, n, "%.*f", dec, v / units[i].unit);
            strip_zeros(buf);
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s", units[i].suffix);
            return;
        }
    }
    int dec = (int)ceil(-log10(step) - 1e-9);
    if (dec < 0) dec = 0;
    if (dec > 12) dec = 12;
    snprintf(buf, n, "%.*f", dec, v);
    strip_zeros(buf);
}

/* A plot area inside a box, with its axes; f scales fonts and spacing. */
typedef struct Frame {
    double x0, y0, x1, y1; /* plot area, pixels */
    double box_x;          /* left edge of the box the frame was laid out in */
    Axis ax, ay;
    double f;
} Frame;

/* Axis ranges map to the plot area less an inset of 6*f pixels on every side, so data
 * on a range's end stays clear of the frame. */
static double frame_x(const Frame *fr, double x) {
    double in = 6 * fr->f;
    return fr->x0 + in + (x - fr->ax.lo) / (fr->ax.hi - fr->ax.lo) * (fr->x1 - fr->x0 - 2 * in);
}

static double frame_y(const Frame *fr, double y) {
    double in = 6 * fr->f;
    return fr->y1 - in - (y - fr->ay.lo) / (fr->ay.hi - fr->ay.lo) * (fr->y1 - fr->y0 - 2 * in);
}

/* Places the plot area inside the box (bx, by, bw, bh), leaving room for tick labels
 * and axis titles. */
static Frame frame_layout(cairo_t *cr, double bx, double by, double bw, double bh, Axis ax, Axis ay,
                          double f) {
    Frame fr = {.ax = ax, .ay = ay, .f = f, .box_x = bx};
    char buf[64];
    font(cr, 12 * f, 0);
    double ytick_w = 0;
    for (int k = 0; k < axis_ticks(&ay); k++) {
        tick_label(axis_tick(&ay, k), ay.step, buf, sizeof buf);
        double w = text_width(cr, buf);
        if (w > ytick_w) ytick_w = w;
    }
    tick_label(axis_tick(&ax, axis_ticks(&ax) - 1), ax.step, buf, sizeof buf);
    double last_xtick_w = text_width(cr, buf);
    double pad = 10 * f, title_h = 14 * f * 1.25, tick_len = 5 * f;
    fr.x0 = bx + pad + title_h + 6 * f + ytick_w + tick_len + 4 * f;
    fr.x1 = bx + bw - fmax(2 * pad, last_xtick_w / 2 + pad);
    fr.y0 = by + 1.5 * pad;
    fr.y1 = by + bh - (tick_len + 4 * f + 12 * f * 1.2 + 6 * f + title_h + pad);
    return fr;
}

static void frame_draw(cairo_t *cr, const Frame *fr, const char *xtitle, const char *ytitle) {
    double f = fr->f;
    char buf[64];
    cairo_save(cr);
    cairo_set_line_width(cr, 1);
    set_rgb(cr, grid_rgb);
    for (int k = 0; k < axis_ticks(&fr->ax); k++) {
        double x = round(frame_x(fr, axis_tick(&fr->ax, k))) + 0.5;
        cairo_move_to(cr, x, fr->y0);
        cairo_line_to(cr, x, fr->y1);
    }
    for (int k = 0; k < axis_ticks(&fr->ay); k++) {
        double y = round(frame_y(fr, axis_tick(&fr->ay, k))) + 0.5;
        cairo_move_to(cr, fr->x0, y);
        cairo_line_to(cr, fr->x1, y);
    }
    cairo_stroke(cr);

    set_rgb(cr, muted);
    cairo_rectangle(cr, round(fr->x0) + 0.5, round(fr->y0) + 0.5, round(fr->x1) - round(fr->x0),
                    round(fr->y1) - round(fr->y0));
    cairo_stroke(cr);
    double tick_len = 5 * f;
    font(cr, 12 * f, 0);
    for (int k = 0; k < axis_ticks(&fr->ax); k++) {
        double v = axis_tick(&fr->ax, k), x = round(frame_x(fr, v)) + 0.5;
        set_rgb(cr, muted);
        cairo_move_to(cr, x, fr->y1);
        cairo_line_to(cr, x, fr->y1 + tick_len);
        cairo_stroke(cr);
        tick_label(v, fr->ax.step, buf, sizeof buf);
        set_rgb(cr, ink);
        text_at(cr, x, fr->y1 + tick_len + 4 * f, buf, 0.5, 0);
    }
    for (int k = 0; k < axis_ticks(&fr->ay); k++) {
        double v = axis_tick(&fr->ay, k), y = round(frame_y(fr, v)) + 0.5;
        set_rgb(cr, muted);
        cairo_move_to(cr, fr->x0 - tick_len, y);
        cairo_line_to(cr, fr->x0, y);
        cairo_stroke(cr);
        tick_label(v, fr->ay.step, buf, sizeof buf);
        set_rgb(cr, ink);
        text_at(cr, fr->x0 - tick_len - 4 * f, y, buf, 1, 0.5);
    }
    font(cr, 14 * f, 0);
    set_rgb(cr, ink);
    text_at(cr, (fr->x0 + fr->x1) / 2, fr->y1 + tick_len + 4 * f + 12 * f * 1.2 + 6 * f, xtitle, 0.5, 0);
    /* the y title reads upwards, its cap tops on the box's left padding */
    cairo_translate(cr, fr->box_x + 10 * f, (fr->y0 + fr->y1) / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, ytitle, 0.5, 0);
    cairo_restore(cr);
}

/* ---- curves ---------------------------------------------------------------------- */

/* One run's (x, y) pairs, x non-decreasing. */
typedef struct Series {
    double *x, *y;
    int n;
} Series;

/* One group of runs: its drawn curve (mean) and band (min, max; NULL for one run). */
typedef struct Group {
    const char *label;
    int n_runs;
    double *x, *mean, *lo, *hi;
    int n;
} Group;

typedef struct Ref {
    char label[LABEL_MAX];
    double value;
} Ref;

/* "generation, frames, ..." : the numeric keys of a metrics line, for messages. */
static void numeric_keys(json_t *obj, char *out, size_t n) {
    const char *key;
    json_t *v;
    out[0] = '\0';
    json_object_foreach(obj, key, v) {
        size_t len = strlen(out);
        if (json_is_number(v)) snprintf(out + len, n - len, "%s%s", len ? ", " : "", key);
        else if (json_is_array(v) && json_array_size(v) > 0)
            snprintf(out + len, n - len, "%s%s[0..%zu]", len ? ", " : "", key, json_array_size(v) - 1);
    }
}

static NevoStatus missing_key(const char *file, int line, json_t *obj, const char *key, const char *opt,
                              NevoError *err) {
    char keys[320];
    numeric_keys(obj, keys, sizeof keys);
    const char *names[64];
    int n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        if (json_is_number(v) && n < 64) names[n++] = k;
    }
    const char *guess = nevo_closest(key, names, n);
    char hint[KEY_MAX + 32] = "";
    if (guess) snprintf(hint, sizeof hint, " (did you mean '%s'?)", guess);
    return nevo_error(err, NEVO_ERR_INVALID, "%s:%d: no numeric key '%s'%s; choose %s from: %s", file, line,
                      key, hint, opt, keys);
}

/* The number at key, or at element i of the array at name for a key "name[i]" (such
 * as behaviour[0], the x of the reported behaviour); NaN when there is none. */
static double number_or_nan(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    const char *open = strchr(key, '[');
    size_t len = strlen(key);
    if (!v && open && len > 2 && key[len - 1] == ']' && (size_t)(open - key) < KEY_MAX) {
        char name[KEY_MAX], *end;
        memcpy(name, key, (size_t)(open - key));
        name[open - key] = '\0';
        long i = strtol(open + 1, &end, 10);
        json_t *arr = json_object_get(obj, name);
        if (end == key + len - 1 && end > open + 1 && i >= 0 && json_is_array(arr)) v = json_array_get(arr, (size_t)i);
    }
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Values beyond this cannot be plotted: the axis span (hi - lo) would overflow. */
#define PLOT_MAX_ABS 1e300

/* Reads x and y of every line of DIR/metrics.jsonl. *ykey NULL picks the default
 * (elite_validation_mean, else best_fitness) from the first line. */
static NevoStatus load_series(const char *dir, const char *xkey, const char **ykey, Series *s,
                              NevoError *err) {
    char path[4096];
    path_in(path, sizeof path, dir, "metrics.jsonl");
    memset(s, 0, sizeof *s);
    NevoError why = {0};
    FILE *fp = nevo_open_regular(path, &why);
    if (!fp)
        return nevo_error(err, NEVO_ERR_IO, "%.300s; is %.150s a run directory written by `nevo train --out`?",
                          why.msg, dir);
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, alloc = 0;
    NevoStatus st = NEVO_OK;
    ssize_t got;
    while (st == NEVO_OK && (got = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        if (strlen(line) != (size_t)got) {
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s:%d: a NUL byte; the metrics file is damaged", path, lineno);
            break;
        }
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        json_error_t je;
        json_t *obj = json_loads(line, 0, &je);
        if (!obj && line[got - 1] != '\n') break; /* a live run's line still being written */
        if (!json_is_object(obj)) {
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s:%d: not a JSON object (%s); the metrics file is damaged",
                            path, lineno, obj ? "another JSON value" : je.text);
            json_decref(obj);
            break;
        }
        if (!*ykey) *ykey = json_object_get(obj, "elite_validation_mean") ? "elite_validation_mean" : "best_fitness";
        double x = number_or_nan(obj, xkey), y = number_or_nan(obj, *ykey);
        if (isnan(x)) st = missing_key(path, lineno, obj, xkey, "--x", err);
        else if (isnan(y)) st = missing_key(path, lineno, obj, *ykey, "--y", err);
        else if (fabs(x) > PLOT_MAX_ABS || fabs(y) > PLOT_MAX_ABS)
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s:%d: %s = %g or %s = %g is beyond what a plot can span (%g)",
                            path, lineno, xkey, x, *ykey, y, PLOT_MAX_ABS);
        else if (s->n > 0 && x < s->x[s->n - 1])
            st = nevo_error(err, NEVO_ERR_CORRUPT, "%s:%d: %s goes down from %g to %g; each line must not go "
                            "back (is the file one run's metrics?)", path, lineno, xkey, s->x[s->n - 1], x);
        json_decref(obj);
        if (st) break;
        if (s->n == alloc) {
            alloc = alloc ? 2 * alloc : 256;
            s->x = realloc(s->x, sizeof(double) * (size_t)alloc);
            s->y = realloc(s->y, sizeof(double) * (size_t)alloc);
            NEVO_ASSERT(s->x && s->y);
        }
        s->x[s->n] = x;
        s->y[s->n] = y;
        s->n++;
    }
    if (st == NEVO_OK && ferror(fp))
        st = nevo_error(err, NEVO_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    if (st == NEVO_OK && s->n == 0)
        st = nevo_error(err, NEVO_ERR_INVALID, "%s holds no generations yet; plot the run once it has some",
                        path);
    free(line);
    fclose(fp);
    return st;
}

/* Each y of s replaced by the mean of itself and the up to n - 1 points before it: a
 * trailing window, so a point never shows later generations. Summed afresh at each
 * point (no running sum to drift), in window order. */
static void smooth_series(Series *s, int n) {
    double *y = malloc(sizeof(double) * (size_t)s->n);
    NEVO_ASSERT(y);
    for (int i = 0; i < s->n; i++) {
        int first = i - n + 1 > 0 ? i - n + 1 : 0;
        double sum = 0;
        for (int k = first; k <= i; k++) sum += s->y[k];
        y[i] = sum / (i - first + 1);
    }
    free(s->y);
    s->y = y;
}

/* y of s at x, linear between its points, clamped to its ends. */
static double interp(const Series *s, double x) {
    if (x <= s->x[0]) return s->y[0];
    if (x >= s->x[s->n - 1]) return s->y[s->n - 1];
    int lo = 0, hi = s->n - 1; /* s->x[lo] < x <= s->x[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (s->x[mid] < x) lo = mid;
        else hi = mid;
    }
    double t = (x - s->x[lo]) / (s->x[hi] - s->x[lo]);
    return s->y[lo] + t * (s->y[hi] - s->y[lo]);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The group's curve: mean, min and max of its runs at every x any of them has inside
 * the range all of them cover (exact for piecewise-linear runs). */
static NevoStatus group_build(Group *g, Series *const *runs, const RunArg *const *args, const char *xkey,
                              NevoError *err) {
    if (g->n_runs == 1) {
        g->n = runs[0]->n;
        g->x = malloc(sizeof(double) * (size_t)g->n);
        g->mean = malloc(sizeof(double) * (size_t)g->n);
        NEVO_ASSERT(g->x && g->mean);
        memcpy(g->x, runs[0]->x, sizeof(double) * (size_t)g->n);
        memcpy(g->mean, runs[0]->y, sizeof(double) * (size_t)g->n);
        return NEVO_OK;
    }
    double lo = -INFINITY, hi = INFINITY;
    int total = 0, lo_run = 0, hi_run = 0;
    for (int r = 0; r < g->n_runs; r++) {
        if (runs[r]->x[0] > lo) lo = runs[r]->x[0], lo_run = r;
        if (runs[r]->x[runs[r]->n - 1] < hi) hi = runs[r]->x[runs[r]->n - 1], hi_run = r;
        total += runs[r]->n;
    }
    if (lo > hi)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "runs labelled '%s' share no %s range (%s starts at %g, after %s ends at %g); give "
                          "them different labels", g->label, xkey, args[lo_run]->dir, lo, args[hi_run]->dir, hi);
    double *xs = malloc(sizeof(double) * (size_t)(total + 2));
    NEVO_ASSERT(xs);
    int n = 0;
    xs[n++] = lo;
    xs[n++] = hi;
    for (int r = 0; r < g->n_runs; r++)
        for (int i = 0; i < runs[r]->n; i++)
            if (runs[r]->x[i] > lo && runs[r]->x[i] < hi) xs[n++] = runs[r]->x[i];
    qsort(xs, (size_t)n, sizeof(double), cmp_double);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || xs[i] != xs[m - 1]) xs[m++] = xs[i];
    g->n = m;
    g->x = xs;
    g->mean = malloc(sizeof(double) * (size_t)m);
    g->lo = malloc(sizeof(double) * (size_t)m);
    g->hi = malloc(sizeof(double) * (size_t)m);
    NEVO_ASSERT(g->mean && g->lo && g->hi);
    for (int i = 0; i < m; i++) {
        double sum = 0, mn = INFINITY, mx = -INFINITY;
        for (int r = 0; r < g->n_runs; r++) {
            double y = interp(runs[r], xs[i]);
            sum += y;
            mn = fmin(mn, y);
            mx = fmax(mx, y);
        }
        g->mean[i] = sum / g->n_runs;
        g->lo[i] = mn;
        g->hi[i] = mx;
    }
    return NEVO_OK;
}

static void group_free(Group *g) {
    free(g->x);
    free(g->mean);
    free(g->lo);
    free(g->hi);
}

/* How many of the curves' sample points (segments sampled 8 times) and reference
 * lines fall inside the rectangle: the legend goes where this is smallest. */
static int covered(const Frame *fr, const Group *groups, int n_groups, const Ref *refs, int n_refs,
                   double rx, double ry, double rw, double rh) {
    int count = 0;
#define INSIDE(px, py) ((px) >= rx && (px) <= rx + rw && (py) >= ry && (py) <= ry + rh)
    for (int gi = 0; gi < n_groups; gi++) {
        const Group *g = &groups[gi];
        const double *ys[3] = {g->mean, g->lo, g->hi};
        for (int c = 0; c < 3; c++) {
            if (!ys[c]) continue;
            for (int i = 0; i < g->n; i++) {
                int steps = i + 1 < g->n ? 8 : 1;
                for (int k = 0; k < steps; k++) {
                    double t = k / 8.0;
                    double x = i + 1 < g->n ? g->x[i] + t * (g->x[i + 1] - g->x[i]) : g->x[i];
                    double y = i + 1 < g->n ? ys[c][i] + t * (ys[c][i + 1] - ys[c][i]) : ys[c][i];
                    count += INSIDE(frame_x(fr, x), frame_y(fr, y));
                }
            }
        }
    }
    for (int r = 0; r < n_refs; r++) {
        for (int k = 0; k <= 64; k++)
            count += INSIDE(fr->x0 + (fr->x1 - fr->x0) * k / 64.0, frame_y(fr, refs[r].value));
        /* the reference's label (drawn at the left end, above the line; its width
         * estimated at 7 px a character) must never be hidden */
        double f = fr->f, y = frame_y(fr, refs[r].value);
        double lx = fr->x0 + 4 * f, lw = 7 * f * (double)strlen(refs[r].label) + 4 * f;
        double ly = y - 3 * f - 12 * f * 0.72 - 2 * f, lh = 12 * f * 0.72 + 4 * f;
        if (ly < fr->y0 + 2 * f) ly = y + 2 * f;
        if (lx < rx + rw && rx < lx + lw && ly < ry + rh && ry < ly + lh) count += 100000;
    }
#undef INSIDE
    return count;
}

static void legend_text(const Group *g, char *out, size_t n) {
    if (g->n_runs > 1) snprintf(out, n, "%s (mean of %d runs)", g->label, g->n_runs);
    else snprintf(out, n, "%s", g->label);
}

static void draw_legend(cairo_t *cr, const Frame *fr, const Group *groups, int n_groups, const Ref *refs,
                        int n_refs) {
    double f = fr->f, pad = 8 * f, line_h = 18 * f, swatch = 22 * f;
    char text[LABEL_MAX + 32];
    font(cr, 12 * f, 0);
    double tw = 0;
    for (int g = 0; g < n_groups; g++) {
        legend_text(&groups[g], text, sizeof text);
        tw = fmax(tw, text_width(cr, text));
    }
    double w = pad + swatch + 6 * f + tw + pad, h = pad + n_groups * line_h + pad - 4 * f;
    double inset = 8 * f;
    double xs[2] = {fr->x1 - inset - w, fr->x0 + inset}, ys[2] = {fr->y1 - inset - h, fr->y0 + inset};
    /* bottom right, top left, top right, bottom left: the first least covered wins */
    const int order[4][2] = {{0, 0}, {1, 1}, {0, 1}, {1, 0}};
    int best = 0, best_count = -1;
    for (int c = 0; c < 4; c++) {
        int n = covered(fr, groups, n_groups, refs, n_refs, xs[order[c][0]], ys[order[c][1]], w, h);
        if (best_count < 0 || n < best_count) best = c, best_count = n;
    }
    double lx = xs[order[best][0]], ly = ys[order[best][1]];
    cairo_save(cr);
    cairo_rectangle(cr, round(lx) + 0.5, round(ly) + 0.5, round(w), round(h));
    cairo_set_source_rgba(cr, 1, 1, 1, 0.88);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    for (int g = 0; g < n_groups; g++) {
        double cy = ly + pad + g * line_h + (line_h - 4 * f) / 2;
        set_rgb(cr, palette[g % 10]);
        cairo_set_line_width(cr, 2.5 * f);
        cairo_move_to(cr, lx + pad, cy);
        cairo_line_to(cr, lx + pad + swatch, cy);
        cairo_stroke(cr);
        legend_text(&groups[g], text, sizeof text);
        set_rgb(cr, ink);
        text_at(cr, lx + pad + swatch + 6 * f, cy, text, 0, 0.5);
    }
    cairo_restore(cr);
}

static const char *axis_title(const char *key) {
    if (strcmp(key, "frames") == 0) return "frames";
    if (strcmp(key, "generation") == 0) return "generation";
    if (strcmp(key, "wall_s") == 0) return "wall-clock seconds";
    if (strcmp(key, "episodes") == 0) return "episodes";
    if (strcmp(key, "elite_validation_mean") == 0) return "elite validation mean return";
    if (strcmp(key, "best_fitness") == 0) return "best fitness";
    if (strcmp(key, "mean_fitness") == 0) return "mean fitness";
    if (strcmp(key, "median_fitness") == 0) return "median fitness";
    return key;
}

/* smooth > 1: the y axis's title says the curves are moving averages, and of how many points. */
static void render_curves(cairo_t *cr, int w, int h, const Group *groups, int n_groups, const Ref *refs,
                          int n_refs, const char *xkey, const char *ykey, const char *title, int smooth) {
    double f = fmin(w / 800.0, h / 500.0);
    f = fmax(0.7, fmin(f, 4.0));
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int g = 0; g < n_groups; g++) {
        for (int i = 0; i < groups[g].n; i++) {
            xmin = fmin(xmin, groups[g].x[i]);
            xmax = fmax(xmax, groups[g].x[i]);
            double lo = groups[g].lo ? groups[g].lo[i] : groups[g].mean[i];
            double hi = groups[g].hi ? groups[g].hi[i] : groups[g].mean[i];
            ymin = fmin(ymin, lo);
            ymax = fmax(ymax, hi);
        }
    }
    for (int r = 0; r < n_refs; r++) {
        ymin = fmin(ymin, refs[r].value);
        ymax = fmax(ymax, refs[r].value);
    }
    /* counts start at zero: frames, generations and episodes axes begin there */
    if (strcmp(xkey, "wall_s") != 0 && xmin > 0) xmin = 0;
    Axis ax = nice_axis(xmin, xmax, (int)fmax(3, fmin(10, w / (140 * f))));
    Axis ay = nice_axis(ymin, ymax, (int)fmax(3, fmin(10, h / (90 * f))));
    double top = 0;
    if (title) top = 16 * f * 1.25 + 6 * f;
    Frame fr = frame_layout(cr, 0, top, w, h - top, ax, ay, f);
    char ytitle[KEY_MAX + 96];
    if (smooth > 1) snprintf(ytitle, sizeof ytitle, "%s (mean of the last %d points)", axis_title(ykey), smooth);
    else snprintf(ytitle, sizeof ytitle, "%s", axis_title(ykey));
    frame_draw(cr, &fr, axis_title(xkey), ytitle);

    cairo_save(cr);
    cairo_rectangle(cr, fr.x0 - 3 * f, fr.y0 - 3 * f, fr.x1 - fr.x0 + 6 * f, fr.y1 - fr.y0 + 6 * f);
    cairo_clip(cr);
    for (int g = 0; g < n_groups; g++) {
        const Group *gr = &groups[g];
        if (!gr->lo || gr->n < 2) continue;
        Rgb c = palette[g % 10];
        for (int i = 0; i < gr->n; i++) cairo_line_to(cr, frame_x(&fr, gr->x[i]), frame_y(&fr, gr->hi[i]));
        for (int i = gr->n - 1; i >= 0; i--) cairo_line_to(cr, frame_x(&fr, gr->x[i]), frame_y(&fr, gr->lo[i]));
        cairo_close_path(cr);
        cairo_set_source_rgba(cr, c.r, c.g, c.b, 0.2);
        cairo_fill(cr);
    }
    font(cr, 12 * f, 0);
    for (int r = 0; r < n_refs; r++) {
        double y = frame_y(&fr, refs[r].value), dash[2] = {6 * f, 4 * f};
        set_rgb(cr, muted);
        cairo_set_line_width(cr, 1.5 * f);
        cairo_set_dash(cr, dash, 2, 0);
        cairo_move_to(cr, fr.x0, y);
        cairo_line_to(cr, fr.x1, y);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    for (int g = 0; g < n_groups; g++) {
        const Group *gr = &groups[g];
        set_rgb(cr, palette[g % 10]);
        cairo_set_line_width(cr, 2 * f);
        if (gr->n == 1) {
            cairo_arc(cr, frame_x(&fr, gr->x[0]), frame_y(&fr, gr->mean[0]), 3 * f, 0, 2 * M_PI);
            cairo_fill(cr);
            continue;
        }
        for (int i = 0; i < gr->n; i++) cairo_line_to(cr, frame_x(&fr, gr->x[i]), frame_y(&fr, gr->mean[i]));
        cairo_stroke(cr);
    }
    /* reference labels over the curves, on a light backing so they stay legible */
    for (int r = 0; r < n_refs; r++) {
        double y = frame_y(&fr, refs[r].value), tw = text_width(cr, refs[r].label);
        double tx = fr.x0 + 6 * f, ty = y - 3 * f - 12 * f * 0.72;
        if (ty < fr.y0 + 2 * f) ty = y + 4 * f; /* no room above: below the line */
        cairo_rectangle(cr, tx - 2 * f, ty - 2 * f, tw + 4 * f, 12 * f * 0.72 + 4 * f);
        cairo_set_source_rgba(cr, 1, 1, 1, 0.8);
        cairo_fill(cr);
        set_rgb(cr, muted);
        text_at(cr, tx, ty, refs[r].label, 0, 0);
    }
    cairo_restore(cr);
    draw_legend(cr, &fr, groups, n_groups, refs, n_refs);
    if (title) {
        font(cr, 16 * f, 1);
        set_rgb(cr, ink);
        text_at(cr, (fr.x0 + fr.x1) / 2, 10 * f, title, 0.5, 0);
    }
}

static int parse_size(const char *s, int *w, int *h) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X')) return -1;
    const char *p = end + 1;
    long b = strtol(p, &end, 10);
    if (end == p || *end) return -1;
    if (a < 200 || a > 10000 || b < 150 || b > 10000) return -1;
    *w = (int)a;
    *h = (int)b;
    return 0;
}

static int cmd_curves(int argc, char **argv) {
    const char *out = NULL, *xkey = "frames", *ykey = NULL, *title = NULL;
    int w = 800, h = 500, n_refs = 0, n_runs = 0;
    long long smooth = 1;
    Ref refs[MAX_REFS];
    const char **run_args = calloc((size_t)argc, sizeof(char *));
    NEVO_ASSERT(run_args);
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            rc = 0;
        } else if (cli_option(argc, argv, &i, "--out", &v)) {
            if (!v) rc = cli_usage_error("plot curves", "--out needs a file name (FILE.png)");
            out = v;
        } else if (cli_option(argc, argv, &i, "--x", &v)) {
            if (!v || (strcmp(v, "frames") && strcmp(v, "generation") && strcmp(v, "wall_s") && strcmp(v, "episodes")))
                rc = cli_usage_error("plot curves", "--x must be frames, generation, wall_s or episodes, got '%s'",
                                     cli_esc(v));
            xkey = v;
        } else if (cli_option(argc, argv, &i, "--y", &v)) {
            if (!v || !*v || strlen(v) >= KEY_MAX) rc = cli_usage_error("plot curves", "--y needs a metrics key");
            ykey = v;
        } else if (cli_option(argc, argv, &i, "--smooth", &v)) {
            if (!v || cli_parse_int(v, 1, 1000000, &smooth))
                rc = cli_usage_error("plot curves", "--smooth needs a whole number of points from 1 to 1000000, got '%s'",
                                     v ? cli_esc(v) : "nothing");
        } else if (cli_option(argc, argv, &i, "--title", &v)) {
            if (!v) rc = cli_usage_error("plot curves", "--title needs a text");
            title = v;
        } else if (cli_option(argc, argv, &i, "--size", &v)) {
            if (!v || parse_size(v, &w, &h))
                rc = cli_usage_error("plot curves", "--size needs WxH, from 200x150 to 10000x10000, got '%s'",
                                     cli_esc(v));
        } else if (cli_option(argc, argv, &i, "--ref", &v)) {
            const char *eq = v ? strrchr(v, '=') : NULL;
            char *end = NULL;
            double value = eq ? strtod(eq + 1, &end) : NAN;
            if (!eq || eq == v || end == eq + 1 || *end || !(fabs(value) <= PLOT_MAX_ABS) || eq - v >= LABEL_MAX)
                rc = cli_usage_error("plot curves", "--ref needs LABEL=NUMBER, e.g. --ref \"DQN 5M=15.9\", got '%s'",
                                     cli_esc(v));
            else if (n_refs == MAX_REFS)
                rc = cli_usage_error("plot curves", "at most %d --ref lines", MAX_REFS);
            else {
                snprintf(refs[n_refs].label, LABEL_MAX, "%.*s", (int)(eq - v), v);
                refs[n_refs++].value = value;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = cli_usage_error("plot curves", "unknown option '%s'", cli_esc(argv[i]));
        } else {
            run_args[n_runs++] = argv[i];
        }
    }
    if (rc < 0 && n_runs == 0) rc = cli_usage_error("plot curves", "give at least one RUN directory");
    if (rc < 0 && !out) rc = cli_usage_error("plot curves", "--out FILE.png is required");
    if (rc >= 0) {
        free(run_args);
        return rc;
    }

    NevoError err = {0};
    NevoStatus st = NEVO_OK;
    RunArg *runs = calloc((size_t)n_runs, sizeof(RunArg));
    Series *series = calloc((size_t)n_runs, sizeof(Series));
    Group *groups = calloc((size_t)n_runs, sizeof(Group));
    int *group_of = calloc((size_t)n_runs, sizeof(int));
    Series **members = calloc((size_t)n_runs, sizeof(Series *));
    const RunArg **member_args = calloc((size_t)n_runs, sizeof(RunArg *));
    NEVO_ASSERT(runs && series && groups && group_of && members && member_args);
    int n_groups = 0, loaded = 0;
    for (int r = 0; r < n_runs && st == NEVO_OK; r++) {
        st = parse_run_arg(run_args[r], &runs[r], &err);
        loaded = r + 1;
        if (st == NEVO_OK) st = load_series(runs[r].dir, xkey, &ykey, &series[r], &err);
        if (st) break;
        if (smooth > 1) smooth_series(&series[r], (int)smooth);
        if (!runs[r].labelled) default_label(&runs[r], NULL);
        /* labelled runs sharing a label form one group; an unlabelled run is its own */
        int g = -1;
        for (int k = 0; runs[r].labelled && k < r; k++)
            if (runs[k].labelled && strcmp(runs[k].label, runs[r].label) == 0) g = group_of[k];
        if (g < 0) {
            g = n_groups++;
            groups[g].label = runs[r].label;
        }
        group_of[r] = g;
        groups[g].n_runs++;
    }
    for (int g = 0; g < n_groups && st == NEVO_OK; g++) {
        int m = 0;
        for (int r = 0; r < n_runs; r++)
            if (group_of[r] == g) members[m] = &series[r], member_args[m++] = &runs[r];
        st = group_build(&groups[g], members, member_args, xkey, &err);
    }
    if (st == NEVO_OK) {
        cairo_surface_t *surface = new_canvas(w, h, &err);
        if (!surface) st = err.status;
        if (surface) {
            cairo_t *cr = cairo_create(surface);
            render_curves(cr, w, h, groups, n_groups, refs, n_refs, xkey, ykey, title, (int)smooth);
            cairo_destroy(cr);
            st = save_png(surface, out, &err);
            cairo_surface_destroy(surface);
        }
    }
    for (int g = 0; g < n_groups; g++) group_free(&groups[g]);
    for (int r = 0; r < n_runs; r++) {
        free(series[r].x);
        free(series[r].y);
    }
    free_runs(runs, loaded);
    free(series);
    free(groups);
    free(group_of);
    free(members);
    free(member_args);
    free(run_args);
    return st ? cli_fail(&err) : 0;
}

/* ---- behaviours ------------------------------------------------------------------ */

typedef struct Behaviours {
    char env[128], algo[64];
    int generations;
    double *pop, *arch; /* (n_pop, 2), (n_arch, 2) */
    int n_pop, n_arch;
} Behaviours;

static NevoStatus read_points(const char *path, json_t *root, const char *key, int required, double **pts,
                              int *n, NevoError *err) {
    json_t *arr = json_object_get(root, key);
    *pts = NULL;
    *n = 0;
    if (!arr && !required) return NEVO_OK;
    if (!json_is_array(arr))
        return nevo_error(err, NEVO_ERR_CORRUPT, "%s: '%s' is missing or not a list of points", path, key);
    int count = (int)json_array_size(arr);
    *pts = malloc(sizeof(double) * 2 * (size_t)(count > 0 ? count : 1));
    NEVO_ASSERT(*pts);
    for (int i = 0; i < count; i++) {
        json_t *p = json_array_get(arr, (size_t)i);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_number(json_array_get(p, 0)) ||
            !json_is_number(json_array_get(p, 1)))
            return nevo_error(err, NEVO_ERR_CORRUPT, "%s: %s[%d] is not a pair of numbers", path, key, i);
        (*pts)[2 * i] = json_number_value(json_array_get(p, 0));
        (*pts)[2 * i + 1] = json_number_value(json_array_get(p, 1));
        if (fabs((*pts)[2 * i]) > PLOT_MAX_ABS || fabs((*pts)[2 * i + 1]) > PLOT_MAX_ABS)
            return nevo_error(err, NEVO_ERR_CORRUPT, "%s: %s[%d] is beyond what a plot can span (%g)", path, key, i,
                              PLOT_MAX_ABS);
    }
    *n = count;
    return NEVO_OK;
}

static NevoStatus load_behaviours(const char *dir, Behaviours *b, NevoError *err) {
    char path[4096];
    path_in(path, sizeof path, dir, "behaviours.json");
    memset(b, 0, sizeof *b);
    struct stat st;
    if (stat(path, &st) != 0)
        return nevo_error(err, NEVO_ERR_IO,
                          "%s not found: the run's env has no behaviour characterisation, or the run has not "
                          "finished (behaviours.json is written after the last generation)", path);
    if (!S_ISREG(st.st_mode)) return nevo_error(err, NEVO_ERR_IO, "cannot read %s: not a regular file", path);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return nevo_error(err, NEVO_ERR_CORRUPT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    NevoStatus s = NEVO_OK;
    json_t *dim = json_object_get(root, "bc_dim");
    if (!json_is_object(root) || !json_is_integer(dim))
        s = nevo_error(err, NEVO_ERR_CORRUPT, "%s: no integer 'bc_dim'; is it a behaviours.json written by nevo?",
                       path);
    else if (json_integer_value(dim) != 2)
        s = nevo_error(err, NEVO_ERR_INVALID,
                       "%s: bc_dim is %lld; `nevo plot behaviours` draws 2-D behaviours only", path,
                       (long long)json_integer_value(dim));
    if (s == NEVO_OK) {
        const char *env = json_string_value(json_object_get(root, "env"));
        const char *algo = json_string_value(json_object_get(root, "algo"));
        nevo_strlcpy(b->env, env ? env : "", sizeof b->env);
        nevo_strlcpy(b->algo, algo ? algo : "", sizeof b->algo);
        b->generations = (int)json_integer_value(json_object_get(root, "generations"));
        s = read_points(path, root, "population", 1, &b->pop, &b->n_pop, err);
        if (s == NEVO_OK) s = read_points(path, root, "archive", 0, &b->arch, &b->n_arch, err);
    }
    json_decref(root);
    return s;
}

static void behaviours_free(Behaviours *b) {
    free(b->pop);
    free(b->arch);
}

static void dot(cairo_t *cr, double x, double y, double r) {
    cairo_new_sub_path(cr);
    cairo_arc(cr, x, y, r, 0, 2 * M_PI);
}

/* One entry of a panel's colour key: a dot (or a ring) and its text. */
typedef struct KeyItem {
    const char *text;
    Rgb c;
    int ring;
} KeyItem;

/* The title strip: the label at the left, a key of the point colours at the right
 * (shortened, then dropped, when the panel is too narrow). */
static void draw_panel_title(cairo_t *cr, double px, double py, int n, const char *label, const Behaviours *b,
                             int show_archive, const NevoEnvScene *scene) {
    double f = n / 400.0, strip = n / 14, m = n / 40, cy = py + strip * 0.55;
    font(cr, fmax(14 * f, 10), 1);
    set_rgb(cr, ink);
    text_at(cr, px + m, cy, label, 0, 0.5);
    double label_end = px + m + text_width(cr, label) + 12 * f;
    font(cr, fmax(11 * f, 9), 0);
    char pop_text[64], arch_text[64];
    snprintf(pop_text, sizeof pop_text, "population %d", b->n_pop);
    snprintf(arch_text, sizeof arch_text, "archive %d", b->n_arch);
    KeyItem items[4];
    for (int level = 0; level < 3; level++) {
        int k = 0;
        items[k++] = (KeyItem){pop_text, population_rgb, 0};
        if (show_archive && b->n_arch > 0 && level < 2) items[k++] = (KeyItem){arch_text, archive_rgb, 0};
        if (scene && level < 1) {
            if (scene->has_start) items[k++] = (KeyItem){"start", start_rgb, 1};
            if (scene->has_goal) items[k++] = (KeyItem){"goal", goal_rgb, 1};
        }
        double r = 4 * f, gap = 10 * f, total = 0;
        for (int i = 0; i < k; i++) total += 2 * r + 4 * f + text_width(cr, items[i].text) + (i ? gap : 0);
        if (px + n - m - total < label_end) continue;
        double x = px + n - m - total;
        for (int i = 0; i < k; i++) {
            if (i) x += gap;
            set_rgb(cr, items[i].c);
            cairo_new_path(cr);
            if (items[i].ring) {
                cairo_set_line_width(cr, 1.5 * f);
                cairo_arc(cr, x + r, cy, r - 0.75 * f, 0, 2 * M_PI);
                cairo_stroke(cr);
            } else {
                cairo_arc(cr, x + r, cy, r, 0, 2 * M_PI);
                cairo_fill(cr);
            }
            x += 2 * r + 4 * f;
            set_rgb(cr, muted);
            text_at(cr, x, cy, items[i].text, 0, 0.5);
            x += text_width(cr, items[i].text);
        }
        break;
    }
}

/* A scene wall: a line of at least `min_px` pixels' width from (x1, y1) to (x2, y2)
 * in pixels, `w_px` wide where the wall has a thickness (butt ends: its footprint). */
static void draw_wall(cairo_t *cr, double x1, double y1, double x2, double y2, double w_px, double min_px) {
    cairo_set_line_cap(cr, w_px > 0 ? CAIRO_LINE_CAP_BUTT : CAIRO_LINE_CAP_ROUND);
    cairo_set_line_width(cr, fmax(w_px, min_px));
    cairo_move_to(cr, x1, y1);
    cairo_line_to(cr, x2, y2);
    cairo_stroke(cr);
}

/* An enclosed scene (the maze): the square of the scene's region, its walls, the
 * behaviours, then start and goal rings. */
static void draw_scene_panel(cairo_t *cr, double px, double py, int n, const Behaviours *b, int show_archive,
                             const NevoEnvScene *sc) {
    double strip = n / 14, m = n / 40, side = n - strip - 2 * m;
    double extent = fmax(sc->hi[0] - sc->lo[0], sc->hi[1] - sc->lo[1]);
    double s = side / extent, ox = px + (n - side) / 2 - sc->lo[0] * s;
    /* y down: pixel oy + y*s; y up: the region's top edge lo_y + extent at the top */
    double oy = py + strip + m + (sc->y_down ? -sc->lo[1] * s : (sc->lo[1] + extent) * s), sy = sc->y_down ? s : -s;
    cairo_save(cr);
    set_rgb(cr, wall_rgb);
    for (int i = 0; i < sc->n_walls; i++) {
        const NevoSceneWall *wl = &sc->walls[i];
        draw_wall(cr, ox + wl->x1 * s, oy + wl->y1 * sy, ox + wl->x2 * s, oy + wl->y2 * sy, wl->width * s,
                  fmax(1.5 * s, 2.0));
    }
    if (show_archive) {
        set_rgb(cr, archive_rgb);
        for (int i = 0; i < b->n_arch; i++)
            if (isfinite(b->arch[2 * i]) && isfinite(b->arch[2 * i + 1]))
                dot(cr, ox + b->arch[2 * i] * s, oy + b->arch[2 * i + 1] * sy, fmax(1.1 * s, 1.5));
        cairo_fill(cr);
    }
    set_rgb(cr, population_rgb);
    for (int i = 0; i < b->n_pop; i++)
        if (isfinite(b->pop[2 * i]) && isfinite(b->pop[2 * i + 1]))
            dot(cr, ox + b->pop[2 * i] * s, oy + b->pop[2 * i + 1] * sy, fmax(1.4 * s, 2.0));
    cairo_fill(cr);
    /* rings, so points under them stay visible */
    cairo_set_line_width(cr, fmax(1.2 * s, 1.5));
    if (sc->has_start) {
        set_rgb(cr, start_rgb);
        cairo_arc(cr, ox + sc->start[0] * s, oy + sc->start[1] * sy, 5 * s, 0, 2 * M_PI);
        cairo_stroke(cr);
    }
    if (sc->has_goal) {
        set_rgb(cr, goal_rgb);
        cairo_arc(cr, ox + sc->goal[0] * s, oy + sc->goal[1] * sy, 5 * s, 0, 2 * M_PI);
        cairo_stroke(cr);
    }
    cairo_restore(cr);
}

/* Other 2-D behaviours on fitted axes; where the env has an open scene (the humanoid
 * trap's) the axes also hold its region, and the panel shows its walls (dark, seen from
 * above), its start (a blue ring) and goal (a green ring). */
static void draw_scatter_panel(cairo_t *cr, double px, double py, int n, const Behaviours *b, int show_archive,
                               const NevoEnvScene *sc) {
    double f = n / 400.0, strip = n / 14;
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    if (sc) xmin = sc->lo[0], xmax = sc->hi[0], ymin = sc->lo[1], ymax = sc->hi[1];
    for (int set = 0; set < 2; set++) {
        const double *p = set ? b->arch : b->pop;
        int count = set ? (show_archive ? b->n_arch : 0) : b->n_pop;
        for (int i = 0; i < count; i++) {
            if (!isfinite(p[2 * i]) || !isfinite(p[2 * i + 1])) continue;
            xmin = fmin(xmin, p[2 * i]), xmax = fmax(xmax, p[2 * i]);
            ymin = fmin(ymin, p[2 * i + 1]), ymax = fmax(ymax, p[2 * i + 1]);
        }
    }
    if (!(xmax >= xmin)) xmin = xmax = ymin = ymax = 0; /* no finite points */
    Axis ax = nice_axis(xmin, xmax, 5), ay = nice_axis(ymin, ymax, 5);
    Frame fr = frame_layout(cr, px, py + strip, n, n - strip, ax, ay, fmax(0.75, f * 0.85));
    frame_draw(cr, &fr, sc && sc->x_label ? sc->x_label : "behaviour[0]",
               sc && sc->y_label ? sc->y_label : "behaviour[1]");
    cairo_save(cr);
    cairo_rectangle(cr, fr.x0, fr.y0, fr.x1 - fr.x0, fr.y1 - fr.y0);
    cairo_clip(cr);
    set_rgb(cr, wall_rgb);
    for (int w = 0; sc && w < sc->n_walls; w++) {
        const NevoSceneWall *wl = &sc->walls[w];
        /* the width in pixels across the wall's line, on axes that may be scaled apart */
        double len = hypot(wl->x2 - wl->x1, wl->y2 - wl->y1), w_px = 0;
        if (len > 0) {
            double nx = -(wl->y2 - wl->y1) / len * wl->width, ny = (wl->x2 - wl->x1) / len * wl->width;
            w_px = hypot(frame_x(&fr, nx) - frame_x(&fr, 0), frame_y(&fr, ny) - frame_y(&fr, 0));
        }
        draw_wall(cr, frame_x(&fr, wl->x1), frame_y(&fr, wl->y1), frame_x(&fr, wl->x2), frame_y(&fr, wl->y2), w_px,
                  1.5);
    }
    if (show_archive) {
        set_rgb(cr, archive_rgb);
        for (int i = 0; i < b->n_arch; i++)
            if (isfinite(b->arch[2 * i]) && isfinite(b->arch[2 * i + 1]))
                dot(cr, frame_x(&fr, b->arch[2 * i]), frame_y(&fr, b->arch[2 * i + 1]), fmax(2 * f, 1.5));
        cairo_fill(cr);
    }
    set_rgb(cr, population_rgb);
    for (int i = 0; i < b->n_pop; i++)
        if (isfinite(b->pop[2 * i]) && isfinite(b->pop[2 * i + 1]))
            dot(cr, frame_x(&fr, b->pop[2 * i]), frame_y(&fr, b->pop[2 * i + 1]), fmax(2.5 * f, 2.0));
    cairo_fill(cr);
    cairo_set_line_width(cr, fmax(1.5 * f, 1.2));
    for (int k = 0; sc && k < 2; k++) {
        if (!(k ? sc->has_goal : sc->has_start)) continue;
        const double *at = k ? sc->goal : sc->start;
        set_rgb(cr, k ? goal_rgb : start_rgb);
        cairo_new_path(cr);
        cairo_arc(cr, frame_x(&fr, at[0]), frame_y(&fr, at[1]), fmax(6 * f, 4.0), 0, 2 * M_PI);
        cairo_stroke(cr);
    }
    cairo_restore(cr);
}

static int cmd_behaviours(int argc, char **argv) {
    const char *out = NULL;
    long long size = 400;
    int show_archive = 1, n_runs = 0;
    const char **run_args = calloc((size_t)argc, sizeof(char *));
    NEVO_ASSERT(run_args);
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            rc = 0;
        } else if (cli_option(argc, argv, &i, "--out", &v)) {
            if (!v) rc = cli_usage_error("plot behaviours", "--out needs a file name (FILE.png)");
            out = v;
        } else if (cli_option(argc, argv, &i, "--size", &v)) {
            if (cli_parse_int(v, 100, 4000, &size))
                rc = cli_usage_error("plot behaviours", "--size needs a panel side in pixels from 100 to 4000");
        } else if (strcmp(argv[i], "--archive") == 0) {
            show_archive = 1;
        } else if (strcmp(argv[i], "--no-archive") == 0) {
            show_archive = 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = cli_usage_error("plot behaviours", "unknown option '%s'", cli_esc(argv[i]));
        } else {
            run_args[n_runs++] = argv[i];
        }
    }
    if (rc < 0 && n_runs == 0) rc = cli_usage_error("plot behaviours", "give at least one RUN directory");
    if (rc < 0 && !out) rc = cli_usage_error("plot behaviours", "--out FILE.png is required");
    int n = (int)size, cols = n_runs < 3 ? n_runs : 3, rows = (n_runs + 2) / 3;
    if (rc < 0 && (long long)rows * n > 16000)
        rc = cli_usage_error("plot behaviours", "%d panels of %d pixels make a picture over 16000 pixels tall; "
                             "use a smaller --size", n_runs, n);
    if (rc >= 0) {
        free(run_args);
        return rc;
    }

    NevoError err = {0};
    NevoStatus st = NEVO_OK;
    RunArg *runs = calloc((size_t)n_runs, sizeof(RunArg));
    Behaviours *bs = calloc((size_t)n_runs, sizeof(Behaviours));
    NEVO_ASSERT(runs && bs);
    for (int r = 0; r < n_runs && st == NEVO_OK; r++) {
        st = parse_run_arg(run_args[r], &runs[r], &err);
        if (st == NEVO_OK) st = load_behaviours(runs[r].dir, &bs[r], &err);
        if (st == NEVO_OK && !runs[r].labelled) default_label(&runs[r], bs[r].algo[0] ? bs[r].algo : NULL);
    }
    if (st == NEVO_OK) {
        cairo_surface_t *surface = new_canvas(cols * n, rows * n, &err);
        if (!surface) st = err.status;
        if (surface) {
            cairo_t *cr = cairo_create(surface);
            for (int r = 0; r < n_runs; r++) {
                double px = (r % cols) * n, py = (r / cols) * n;
                const NevoEnvScene *scene = nevo_env_scene(bs[r].env);
                int enclosed = scene && scene->enclosed;
                cairo_save(cr);
                cairo_rectangle(cr, px, py, n, n);
                cairo_clip(cr);
                draw_panel_title(cr, px, py, n, runs[r].label, &bs[r], show_archive, enclosed ? scene : NULL);
                if (enclosed) draw_scene_panel(cr, px, py, n, &bs[r], show_archive, scene);
                else draw_scatter_panel(cr, px, py, n, &bs[r], show_archive, scene);
                cairo_restore(cr);
            }
            /* thin separators between panels */
            cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
            cairo_set_line_width(cr, 1);
            for (int c = 1; c < cols; c++) {
                cairo_move_to(cr, c * n + 0.5, 0);
                cairo_line_to(cr, c * n + 0.5, rows * n);
            }
            for (int r = 1; r < rows; r++) {
                cairo_move_to(cr, 0, r * n + 0.5);
                cairo_line_to(cr, cols * n, r * n + 0.5);
            }
            cairo_stroke(cr);
            cairo_destroy(cr);
            st = save_png(surface, out, &err);
            cairo_surface_destroy(surface);
        }
    }
    for (int r = 0; r < n_runs; r++) behaviours_free(&bs[r]);
    free(bs);
    free_runs(runs, n_runs);
    free(run_args);
    return st ? cli_fail(&err) : 0;
}

#ifdef __SANITIZE_ADDRESS__
/* fontconfig, which cairo loads for text, leaks a few hundred bytes while parsing its
 * configuration (before nevo sees any of it): not ours to fix, so LeakSanitizer is told
 * to ignore allocations made inside it. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }
#endif

int nevo_cmd_plot(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "curves") == 0) return cmd_curves(argc - 1, argv + 1);
    if (strcmp(argv[1], "behaviours") == 0 || strcmp(argv[1], "behaviors") == 0)
        return cmd_behaviours(argc - 1, argv + 1);
    return cli_usage_error("plot", "unknown plot '%s'; choose curves or behaviours", cli_esc(argv[1]));
}
