/* `nevo plot` end to end: hand-written run directories with known values, the PNG read
 * back with cairo, and pixels checked where the values must land (a constant curve on
 * its row between two reference lines, a group's mean in the middle of its band, maze
 * walls, corridors and behaviour points at their maze coordinates); bad input exits 2
 * with one line and leaves no file. Runs the built binary (NEVO_BIN, default build/nevo). */
#include <cairo.h>
#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

/* ---- helpers --------------------------------------------------------------------- */

static void bin_path(char *out, size_t n) {
    const char *b = test_nevo_bin();
    if (b[0] == '/') snprintf(out, n, "%s", b);
    else snprintf(out, n, "%s/%s", getenv("PWD"), b);
}

/* Runs `nevo ARGS` inside the test's temporary directory. */
static int nevo(char *out, size_t n, const char *args) {
    char bin[1024];
    bin_path(bin, sizeof bin);
    return test_run(out, n, "cd %s && %s %s", test_tmpdir(), bin, args);
}

static void write_file(const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void make_dir(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    CHECK(mkdir(path, 0755) == 0);
}

/* A run directory whose metrics have frames 0, 100, ..., 400 and a constant
 * elite_validation_mean y, also the behaviour's first element (other keys vary, so
 * picking the wrong key shows). */
static void constant_run(const char *dir, double y) {
    char path[256], text[4096] = "";
    make_dir(dir);
    for (int g = 0; g < 5; g++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len,
                 "{\"generation\": %d, \"frames\": %d, \"episodes\": %d, \"wall_s\": %.1f, "
                 "\"best_fitness\": %d, \"mean_fitness\": 1, \"median_fitness\": 1, "
                 "\"elite_validation_mean\": %.17g, \"generation_frames\": 100, \"behaviour\": [%.17g, %d]}\n",
                 g, 100 * g, 10 * g, 0.1 * g, 20 + g, y, y, 30 + g);
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    write_file(path, text);
}

typedef struct Image {
    cairo_surface_t *s;
    int w, h, stride;
    const uint8_t *data;
} Image;

static Image load_png(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    Image im = {.s = cairo_image_surface_create_from_png(path)};
    CHECK_MSG(cairo_surface_status(im.s) == CAIRO_STATUS_SUCCESS, "%s: %s", path,
              cairo_status_to_string(cairo_surface_status(im.s)));
    im.w = cairo_image_surface_get_width(im.s);
    im.h = cairo_image_surface_get_height(im.s);
    im.stride = cairo_image_surface_get_stride(im.s);
    im.data = cairo_image_surface_get_data(im.s);
    return im;
}

static void pixel(const Image *im, int x, int y, int rgb[3]) {
    uint32_t p = *(const uint32_t *)(im->data + (size_t)y * im->stride + 4 * (size_t)x);
    rgb[0] = (p >> 16) & 255, rgb[1] = (p >> 8) & 255, rgb[2] = p & 255;
}

static int near_rgb(const int p[3], int r, int g, int b, int tol) {
    return abs(p[0] - r) <= tol && abs(p[1] - g) <= tol && abs(p[2] - b) <= tol;
}

/* The first group's colour and the population colour, as 8-bit RGB. */
#define BLUE 31, 119, 180
#define RED 214, 39, 40

/* Darkness-weighted centre row of the dashed reference lines crossing columns
 * [x0, x1): rows where dark grey covers 25-90% of the columns (a frame line covers
 * all of them), grouped into runs of adjacent rows. Returns how many were found. */
static int dashed_rows(const Image *im, int x0, int x1, double *centres, int max) {
    int n = 0, cols = x1 - x0;
    double wsum = 0, ysum = 0;
    int in_run = 0;
    for (int y = 0; y <= im->h; y++) {
        int count = 0;
        double dark = 0;
        for (int x = x0; y < im->h && x < x1; x++) {
            int p[3];
            pixel(im, x, y, p);
            int grey = abs(p[0] - p[1]) < 12 && abs(p[1] - p[2]) < 12;
            if (grey && p[0] < 200) count++, dark += 255 - p[0];
        }
        int dashed = y < im->h && count >= cols / 4 && count <= cols * 9 / 10;
        if (dashed) {
            wsum += dark;
            ysum += dark * (y + 0.5);
            in_run = 1;
        } else if (in_run) {
            if (n < max) centres[n] = ysum / wsum;
            n++;
            wsum = ysum = 0;
            in_run = 0;
        }
    }
    return n;
}

/* True when `name` exists in the test directory, or any file starting with it (a
 * leftover temporary file). */
static int leaves_file(const char *name) {
    DIR *d = opendir(test_tmpdir());
    CHECK(d != NULL);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, name, strlen(name)) == 0) found = 1;
    closedir(d);
    return found;
}

static void expect_bad(const char *args, const char *needle) {
    char buf[8192];
    int rc = nevo(buf, sizeof buf, args);
    CHECK_MSG(rc == 2, "`nevo %s` exited %d, expected 2; output:\n%s", args, rc, buf);
    CHECK_MSG(strstr(buf, needle) != NULL, "`nevo %s`: message lacks '%s':\n%s", args, needle, buf);
    const char *nl = strchr(buf, '\n');
    CHECK_MSG(nl && nl[1] == '\0', "`nevo %s`: expected exactly one line, got:\n%s", args, buf);
    CHECK_MSG(!leaves_file("out.png"), "`nevo %s` left out.png (or a temporary file)", args);
}

/* ---- curves ---------------------------------------------------------------------- */

/* The default y, and an element of a list (--y behaviour[0]) plotting the same value. */
TEST(plot_curves_constant_run_lies_on_its_value) {
    constant_run("r", 7.5);
    for (int pass = 0; pass < 2; pass++) {
        char buf[4096];
        int rc = nevo(buf, sizeof buf,
                      pass ? "plot curves r=const --ref lo=0 --ref hi=10 --out out.png --size 640x400 --y 'behaviour[0]'"
                           : "plot curves r=const --ref lo=0 --ref hi=10 --out out.png --size 640x400");
        CHECK_MSG(rc == 0, "plot curves failed (%d):\n%s", rc, buf);
        Image im = load_png("out.png");
        CHECK_EQ_INT(im.w, 640);
        CHECK_EQ_INT(im.h, 400);
        /* middle columns: clear of the axis labels, the reference labels and the legend */
        int x0 = im.w * 35 / 100, x1 = im.w * 55 / 100, top = im.h, bottom = -1;
        double wsum = 0, ysum = 0;
        for (int x = x0; x < x1; x++) {
            int hits = 0;
            for (int y = 0; y < im.h; y++) {
                int p[3];
                pixel(&im, x, y, p);
                if (!near_rgb(p, BLUE, 60)) continue;
                hits++;
                top = y < top ? y : top;
                bottom = y > bottom ? y : bottom;
                double wgt = 255 - p[0];
                wsum += wgt;
                ysum += wgt * (y + 0.5);
            }
            CHECK_MSG(hits > 0, "column %d has no curve pixel", x);
    }
    CHECK_MSG(bottom - top <= 4, "curve pixels spread over rows %d..%d", top, bottom);
    double curve = ysum / wsum, refs[4];
    int n = dashed_rows(&im, x0, x1, refs, 4);
    CHECK_MSG(n == 2, "expected 2 dashed reference lines, found %d", n);
    /* refs[0] is the upper line (hi = 10), refs[1] the lower (lo = 0): 7.5 sits a
     * quarter of the way down from hi to lo */
    CHECK_MSG(refs[0] < refs[1] - 50, "reference rows %.1f, %.1f", refs[0], refs[1]);
    CHECK_NEAR(curve, refs[1] + 0.75 * (refs[0] - refs[1]), 1.5);
    cairo_surface_destroy(im.s);
    }
}

TEST(plot_curves_group_mean_inside_band) {
    constant_run("a", 0);
    constant_run("b", 10);
    char buf[4096];
    int rc = nevo(buf, sizeof buf, "plot curves a=pair b=pair --out out.png");
    CHECK_MSG(rc == 0, "plot curves failed (%d):\n%s", rc, buf);
    Image im = load_png("out.png");
    CHECK_EQ_INT(im.w, 800);
    CHECK_EQ_INT(im.h, 500);
    for (int x = im.w * 35 / 100; x < im.w * 55 / 100; x += 7) {
        int band_top = -1, band_bottom = -1;
        double wsum = 0, ysum = 0;
        for (int y = 0; y < im.h; y++) {
            int p[3];
            pixel(&im, x, y, p);
            int solid = near_rgb(p, BLUE, 40);
            /* the band: blue at 20% over white (or over a light grid line) */
            int band = p[2] > p[0] + 15 && p[0] >= 170 && p[0] <= 235;
            if (solid || band) {
                if (band_top < 0) band_top = y;
                band_bottom = y;
            }
            if (solid) {
                wsum += 255 - p[0];
                ysum += (255 - p[0]) * (y + 0.5);
            }
        }
        CHECK_MSG(wsum > 0 && band_top >= 0, "column %d: no mean line or band", x);
        CHECK_MSG(band_bottom - band_top > 200, "column %d: band only rows %d..%d", x, band_top, band_bottom);
        CHECK_NEAR(ysum / wsum, (band_top + band_bottom + 1) / 2.0, 2.0);
    }
    cairo_surface_destroy(im.s);
}

/* A run directory whose metrics have frames 0, 100, ... and elite_validation_mean y[g]. */
static void series_run(const char *dir, const double *y, int n) {
    char path[256], text[4096] = "";
    make_dir(dir);
    for (int g = 0; g < n; g++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len,
                 "{\"generation\": %d, \"frames\": %d, \"episodes\": %d, \"wall_s\": %.1f, "
                 "\"best_fitness\": 20, \"elite_validation_mean\": %.17g}\n", g, 100 * g, 10 * g, 0.1 * g, y[g]);
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    write_file(path, text);
}

/* Pixels that differ between two pictures of the same size, in columns >= x0 (left of
 * that lies the y axis's title, which names the smoothing). */
static int differing_pixels(const char *a, const char *b, int x0) {
    Image ia = load_png(a), ib = load_png(b);
    CHECK(ia.w == ib.w && ia.h == ib.h);
    int n = 0, pa[3], pb[3];
    for (int y = 0; y < ia.h; y++)
        for (int x = x0; x < ia.w; x++) {
            pixel(&ia, x, y, pa);
            pixel(&ib, x, y, pb);
            n += !near_rgb(pa, pb[0], pb[1], pb[2], 0);
        }
    cairo_surface_destroy(ia.s);
    cairo_surface_destroy(ib.s);
    return n;
}

static void plot_ok(const char *args) {
    char buf[4096];
    int rc = nevo(buf, sizeof buf, args);
    CHECK_MSG(rc == 0, "`nevo %s` failed (%d):\n%s", args, rc, buf);
}

/* --smooth N draws each run's trailing N-point moving average (over the points there
 * are at its start): the picture of the raw runs smoothed is, pixel for pixel right of
 * the y title, the picture of runs holding the hand-computed averages. The pair's
 * averages are taken before grouping: each run alone is flat from its second point on,
 * so their band closes there, where averaging the band's edges would keep it 10 wide. */
TEST(plot_curves_smooth_is_a_trailing_moving_average) {
    static const double raw[8] = {0, 8, 4, 0, 12, 4, 8, 0};
    /* window 4: 0/1, (0+8)/2, (0+8+4)/3, (0+8+4+0)/4, (8+4+0+12)/4, (4+0+12+4)/4, ... */
    static const double avg4[8] = {0, 4, 4, 3, 6, 5, 6, 6};
    series_run("raw", raw, 8);
    series_run("avg4", avg4, 8);
    plot_ok("plot curves raw=run --smooth 4 --ref lo=0 --ref hi=12 --out smoothed.png");
    plot_ok("plot curves avg4=run --ref lo=0 --ref hi=12 --out expected.png");
    plot_ok("plot curves raw=run --ref lo=0 --ref hi=12 --out unsmoothed.png");
    plot_ok("plot curves raw=run --smooth 1 --ref lo=0 --ref hi=12 --out smooth1.png");
    CHECK_EQ_INT(differing_pixels("smoothed.png", "expected.png", 40), 0);
    CHECK_MSG(differing_pixels("unsmoothed.png", "expected.png", 40) > 500, "smoothing changed too little");
    CHECK_EQ_INT(differing_pixels("smooth1.png", "unsmoothed.png", 0), 0); /* N = 1: none, same title */
    CHECK_MSG(differing_pixels("smoothed.png", "expected.png", 0) > 0, "the y title should name the smoothing");

    static const double up[6] = {0, 10, 0, 10, 0, 10}, down[6] = {10, 0, 10, 0, 10, 0};
    static const double up2[6] = {0, 5, 5, 5, 5, 5}, down2[6] = {10, 5, 5, 5, 5, 5};
    series_run("up", up, 6);
    series_run("down", down, 6);
    series_run("up2", up2, 6);
    series_run("down2", down2, 6);
    plot_ok("plot curves up=pair down=pair --smooth 2 --ref lo=0 --ref hi=10 --out pair.png");
    plot_ok("plot curves up2=pair down2=pair --ref lo=0 --ref hi=10 --out pair_expected.png");
    CHECK_EQ_INT(differing_pixels("pair.png", "pair_expected.png", 40), 0);
}

/* ---- behaviours ------------------------------------------------------------------ */

static void maze_run(const char *dir, const char *behaviours) {
    char path[256];
    make_dir(dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_file(path, "{\"env\": \"maze/hard\", \"algo\": \"ga-ns\", \"seed\": 3}\n");
    snprintf(path, sizeof path, "%s/behaviours.json", dir);
    write_file(path, behaviours);
}

/* The panel layout documented in src/cli/plot_cmd.c: maze point -> pixel. */
static void maze_pixel(int n, double mx, double my, int *px, int *py) {
    int strip = n / 14, margin = n / 40;
    double side = n - strip - 2 * margin;
    *px = (int)((n - side) / 2 + mx * side / 208);
    *py = (int)(strip + margin + my * side / 208);
}

static const char *maze_points =
    "{\"env\": \"maze/hard\", \"algo\": \"ga-ns\", \"generations\": 5, \"bc_dim\": 2,\n"
    " \"population\": [[120, 60], [40, 190]], \"archive\": [[160, 60]]}\n";

TEST(plot_behaviours_maze_pixels) {
    maze_run("m", maze_points);
    char buf[4096];
    int rc = nevo(buf, sizeof buf, "plot behaviours m --out out.png --size 300");
    CHECK_MSG(rc == 0, "plot behaviours failed (%d):\n%s", rc, buf);
    Image im = load_png("out.png");
    CHECK_EQ_INT(im.w, 300);
    CHECK_EQ_INT(im.h, 300);
    int x, y, p[3];
    maze_pixel(300, 120, 60, &x, &y); /* a population point */
    pixel(&im, x, y, p);
    CHECK_MSG(near_rgb(p, RED, 30), "population point at (%d, %d) is (%d, %d, %d)", x, y, p[0], p[1], p[2]);
    maze_pixel(300, 160, 60, &x, &y); /* an archive point: light grey */
    pixel(&im, x, y, p);
    CHECK_MSG(near_rgb(p, 168, 168, 168, 40), "archive point at (%d, %d) is (%d, %d, %d)", x, y, p[0], p[1], p[2]);
    maze_pixel(300, 56, 100, &x, &y); /* on the wall (56, 54)-(56, 157) */
    pixel(&im, x, y, p);
    CHECK_MSG(p[0] < 90 && p[1] < 90 && p[2] < 90, "wall pixel (%d, %d) is (%d, %d, %d)", x, y, p[0], p[1], p[2]);
    maze_pixel(300, 100, 80, &x, &y); /* an empty corridor */
    pixel(&im, x, y, p);
    CHECK_MSG(near_rgb(p, 255, 255, 255, 3), "corridor pixel (%d, %d) is (%d, %d, %d)", x, y, p[0], p[1], p[2]);
    cairo_surface_destroy(im.s);

    /* --no-archive leaves the archive point's place empty */
    rc = nevo(buf, sizeof buf, "plot behaviours m --out out2.png --size 300 --no-archive");
    CHECK_MSG(rc == 0, "plot behaviours --no-archive failed (%d):\n%s", rc, buf);
    im = load_png("out2.png");
    maze_pixel(300, 160, 60, &x, &y);
    pixel(&im, x, y, p);
    CHECK_MSG(near_rgb(p, 255, 255, 255, 3), "--no-archive: (%d, %d) is (%d, %d, %d)", x, y, p[0], p[1], p[2]);
    cairo_surface_destroy(im.s);
}

/* Pixels of image im near colour (r, g, b). */
static int count_near(const Image *im, int r, int g, int b, int tol) {
    int n = 0, p[3];
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++) {
            pixel(im, x, y, p);
            n += near_rgb(p, r, g, b, tol);
        }
    return n;
}

/* A humanoid-trap panel draws the three walls (3.1 m x 0.2 m twice and 0.2 m x 3 m,
 * filled dark) and the start ring; the same points for another env draw neither. */
TEST(plot_behaviours_trap_walls) {
    const char *points = "\"bc_dim\": 2, \"population\": [[0.5, 0.2], [4.5, 0.1]], \"archive\": []}";
    char text[512], buf[4096];
    make_dir("trap");
    snprintf(text, sizeof text, "{\"env\": \"mujoco/humanoid_trap\", \"algo\": \"es\", %s", points);
    write_file("trap/behaviours.json", text);
    make_dir("other");
    snprintf(text, sizeof text, "{\"env\": \"mujoco/humanoid\", \"algo\": \"es\", %s", points);
    write_file("other/behaviours.json", text);
    int rc = nevo(buf, sizeof buf, "plot behaviours trap --out trap.png --size 400");
    CHECK_MSG(rc == 0, "plot behaviours failed (%d):\n%s", rc, buf);
    rc = nevo(buf, sizeof buf, "plot behaviours other --out other.png --size 400");
    CHECK_MSG(rc == 0, "plot behaviours failed (%d):\n%s", rc, buf);
    Image a = load_png("trap.png"), b = load_png("other.png");
    int dark_a = count_near(&a, 38, 38, 38, 20), dark_b = count_near(&b, 38, 38, 38, 20);
    int blue_a = count_near(&a, BLUE, 40), blue_b = count_near(&b, BLUE, 40);
    /* the walls span ~7 m of a ~330-pixel axis: ~3500 pixels of wall */
    CHECK_MSG(dark_a - dark_b > 2000, "trap panel has %d dark pixels, the other %d", dark_a, dark_b);
    CHECK_MSG(blue_a > 20 && blue_b == 0, "start ring: %d blue pixels (other panel %d)", blue_a, blue_b);
    CHECK_MSG(count_near(&a, RED, 40) > 10 && count_near(&b, RED, 40) > 10, "population points missing");
    cairo_surface_destroy(a.s);
    cairo_surface_destroy(b.s);
}

TEST(plot_behaviours_grid_of_panels) {
    maze_run("m", maze_points);
    make_dir("s");
    write_file("s/behaviours.json", "{\"env\": \"mujoco/humanoid_trap\", \"algo\": \"ns-es\", \"bc_dim\": 2,"
                                    " \"population\": [[0, 0], [1.5, -2]], \"archive\": []}");
    char buf[4096];
    int rc = nevo(buf, sizeof buf, "plot behaviours m=GA-NS s s=scatter m=again --out out.png --size 150");
    CHECK_MSG(rc == 0, "plot behaviours failed (%d):\n%s", rc, buf);
    Image im = load_png("out.png");
    CHECK_EQ_INT(im.w, 450); /* 3 columns */
    CHECK_EQ_INT(im.h, 300); /* 2 rows */
    /* the fourth panel (row 1, column 0) is the maze again: its population point */
    int x, y, p[3];
    maze_pixel(150, 120, 60, &x, &y);
    pixel(&im, x, 150 + y, p);
    CHECK_MSG(near_rgb(p, RED, 40), "panel 4 population point is (%d, %d, %d)", p[0], p[1], p[2]);
    cairo_surface_destroy(im.s);
}

/* ---- bad input ------------------------------------------------------------------- */

TEST(plot_bad_input_exits_2_and_writes_nothing) {
    constant_run("r", 1);
    expect_bad("plot curves r --y elite_mean --out out.png", "--y from: generation, frames");
    expect_bad("plot curves r --y 'behaviour[2]' --out out.png", "behaviour[0..1]");
    expect_bad("plot curves r --y 'behaviour[x]' --out out.png", "no numeric key 'behaviour[x]'");
    expect_bad("plot curves nowhere --out out.png", "nowhere");
    expect_bad("plot curves r", "--out");
    expect_bad("plot curves --out out.png", "RUN");
    expect_bad("plot curves r --x steps --out out.png", "--x");
    expect_bad("plot curves r --ref base --out out.png", "--ref");
    expect_bad("plot curves r --smooth 0 --out out.png", "--smooth needs a whole number of points from 1");
    expect_bad("plot curves r --smooth -3 --out out.png", "got '-3'");
    expect_bad("plot curves r --smooth 2.5 --out out.png", "got '2.5'");
    expect_bad("plot curves r --smooth five --out out.png", "got 'five'");
    expect_bad("plot curves r --out out.png --smooth", "--smooth needs");
    make_dir("broken");
    write_file("broken/metrics.jsonl", "{\"frames\": 1, \"elite_validation_mean\": 2}\n{\"frames\": 2,\n");
    expect_bad("plot curves r broken --out out.png", "broken/metrics.jsonl:2");
    /* a last line without its newline is a live run's line being written: left out, where
     * the same text ended by a newline above is damage */
    make_dir("torn");
    write_file("torn/metrics.jsonl", "{\"frames\": 1, \"elite_validation_mean\": 2}\n"
                                     "{\"frames\": 2, \"elite_validation_mean\": 3}\n{\"frames\": 3,");
    char out[4096];
    int rc = nevo(out, sizeof out, "plot curves torn --out torn.png");
    CHECK_MSG(rc == 0 && leaves_file("torn.png"), "exit %d: %s", rc, out);
    /* values whose span overflows a double drew an empty picture and exited 0 */
    make_dir("huge");
    write_file("huge/metrics.jsonl", "{\"frames\": 1, \"elite_validation_mean\": -1e308}\n"
                                     "{\"frames\": 2, \"elite_validation_mean\": 1e308}\n");
    expect_bad("plot curves huge --out out.png", "huge/metrics.jsonl:1: frames = 1 or elite_validation_mean = -1e+308");
    expect_bad("plot curves r --ref 'far=1e308' --out out.png", "--ref");
    /* a FIFO in a run's place: refused at once instead of waiting for a writer */
    make_dir("fifo");
    char fifo[1024];
    snprintf(fifo, sizeof fifo, "%s/fifo/metrics.jsonl", test_tmpdir());
    CHECK(mkfifo(fifo, 0644) == 0);
    expect_bad("plot curves fifo --out out.png", "fifo/metrics.jsonl: not a regular file");
    /* a FIFO as config.json (read for the label only): the directory's name instead */
    make_dir("fifocfg");
    write_file("fifocfg/metrics.jsonl", "{\"frames\": 1, \"elite_validation_mean\": 2}\n"
                                        "{\"frames\": 2, \"elite_validation_mean\": 3}\n");
    snprintf(fifo, sizeof fifo, "%s/fifocfg/config.json", test_tmpdir());
    CHECK(mkfifo(fifo, 0644) == 0);
    char bin[1024];
    bin_path(bin, sizeof bin);
    rc = test_run(out, sizeof out, "cd %s && timeout 20 %s plot curves fifocfg --out fc.png", test_tmpdir(), bin);
    CHECK_MSG(rc == 0 && leaves_file("fc.png"), "exit %d: %s", rc, out);
    /* a NUL byte hid the rest of its line from the JSON parser (and a line starting with
     * one counted as blank) */
    make_dir("nul");
    char nul_path[1024];
    snprintf(nul_path, sizeof nul_path, "%s/nul/metrics.jsonl", test_tmpdir());
    static const char nul_text[] = "{\"frames\": 1, \"elite_validation_mean\": 2}\n\0{\"frames\": 0}\n";
    FILE *nf = fopen(nul_path, "wb");
    CHECK(nf && fwrite(nul_text, 1, sizeof nul_text - 1, nf) == sizeof nul_text - 1);
    fclose(nf);
    expect_bad("plot curves nul --out out.png", "nul/metrics.jsonl:2: a NUL byte");

    maze_run("three", "{\"env\": \"x\", \"algo\": \"ga\", \"bc_dim\": 3, \"population\": [[1, 2, 3]]}");
    expect_bad("plot behaviours three --out out.png", "bc_dim is 3");
    expect_bad("plot behaviours r --out out.png", "behaviour characterisation");
    expect_bad("plot behaviours nowhere --out out.png", "nowhere");
    maze_run("m", maze_points);
    expect_bad("plot behaviours m", "--out");
    expect_bad("plot behaviours m m three --out out.png", "bc_dim is 3");
    maze_run("far", "{\"env\": \"x\", \"algo\": \"ga\", \"bc_dim\": 2, \"population\": [[1, 2], [-1e308, 1e308]]}");
    expect_bad("plot behaviours far --out out.png", "population[1] is beyond what a plot can span");
}
