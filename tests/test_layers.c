/* The source tree keeps DESIGN.md's layering (read from the checkout: tests run in the
 * repository root):
 *   - a file includes public headers of its own layer or lower ones only;
 *   - an internal header (src/DIR/x.h) is included only within DIR (src/cli and
 *     src/bench are one program, the command), except core's helpers (the base layer's
 *     toolbox) and what `nevo bench` measures white-box;
 *   - a public header includes public headers only;
 *   - each public header nevo/X.h is implemented by its module, src/DIR/X.c (and
 *     src/DIR/X_*.c): every function it declares is defined there.
 * A move that breaks a rule names the file, the line and the rule. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The layers, lowest first, and the public headers of each. */
static const struct {
    const char *dir;
    const char *headers; /* space-separated module names */
} layers[] = {
    {"core", "status rng noise threads config io version comm replica"},
    {"envs", "env"},
    {"nn", "policy params tasks backend grad optim lstm rl"},
    {"io", "policy_file dataset"},
    {"algo", "algo novelty supervised vtrace r2d2 seed"},
    {"engine", "eval train checkpoint vec"},
    {"cli", ""},
};
#define N_LAYERS ((int)(sizeof layers / sizeof layers[0]))

/* Internal headers src/bench may read: it measures the kernels, the bare simulator and
 * the CUDA device's limits. */
static const char *const bench_white_box[] = {"nn/kernels.h", "envs/mujoco_common.h", "nn/backend_cuda.h"};

static int layer_of_dir(const char *dir) {
    if (strcmp(dir, "bench") == 0) return N_LAYERS - 1; /* part of the command */
    for (int i = 0; i < N_LAYERS; i++)
        if (strcmp(layers[i].dir, dir) == 0) return i;
    return -1;
}

static int has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

/* The layer of public module `name` (nevo/name.h), or -1. */
static int layer_of_header(const char *name) {
    for (int i = 0; i < N_LAYERS; i++)
        if (has_word(layers[i].headers, name)) return i;
    return -1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    CHECK(fread(s, 1, (size_t)n, f) == (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Checks every `#include "..."` of path, a file of layer `layer` in directory `dir`
 * (NULL for a public header). Returns the number of includes seen. */
static int check_includes(const char *path, int layer, const char *dir) {
    char *text = slurp(path);
    int seen = 0, line = 1;
    for (char *p = text; *p; p++) {
        if (*p == '\n') line++;
        if ((p != text && p[-1] != '\n') || strncmp(p, "#include \"", 10) != 0) continue;
        char inc[128];
        const char *q = p + 10;
        size_t n = strcspn(q, "\"");
        CHECK_MSG(n < sizeof inc, "%s:%d: include too long", path, line);
        memcpy(inc, q, n);
        inc[n] = '\0';
        seen++;
        if (strncmp(inc, "nevo/", 5) == 0) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(strlen(inc) - 7), inc + 5);
            if (strcmp(name, "nevo") == 0) {
                CHECK_MSG(0, "%s:%d: the umbrella header is for programs using nevo, not nevo's own files", path, line);
            }
            int l = layer_of_header(name);
            CHECK_MSG(l >= 0, "%s:%d: public header %s has no layer in this test's table (DESIGN.md, Layers)", path,
                      line, inc);
            CHECK_MSG(l <= layer, "%s:%d: includes %s of layer %s from layer %s: a lower layer includes a higher one",
                      path, line, inc, layers[l].dir, layers[layer].dir);
            continue;
        }
        CHECK_MSG(dir, "%s:%d: public header includes internal %s", path, line, inc);
        char idir[64];
        snprintf(idir, sizeof idir, "%.*s", (int)strcspn(inc, "/"), inc);
        int command = (strcmp(dir, "cli") == 0 || strcmp(dir, "bench") == 0) &&
                      (strcmp(idir, "cli") == 0 || strcmp(idir, "bench") == 0); /* one program */
        int allowed = strcmp(idir, dir) == 0 || strcmp(idir, "core") == 0 || command;
        if (strcmp(dir, "bench") == 0)
            for (size_t k = 0; k < sizeof bench_white_box / sizeof *bench_white_box; k++)
                allowed |= strcmp(inc, bench_white_box[k]) == 0;
        CHECK_MSG(allowed, "%s:%d: includes %s, internal to src/%s/: use its module's public header", path, line,
                  inc, idir);
    }
    free(text);
    return seen;
}

/* Names of the functions a public header declares (nevo_..., at the start of a
 * declaration), written to names (space-separated). */
static void declared_functions(const char *path, char *names, size_t size) {
    char *text = slurp(path);
    names[0] = '\0';
    for (char *p = text; (p = strstr(p, "nevo_")); p++) {
        /* a declaration: the name follows a type at the start of a line, then '(' */
        char *ls = p;
        while (ls > text && ls[-1] != '\n') ls--;
        if (ls == p || !isalpha((unsigned char)*ls) || strncmp(ls, "typedef", 7) == 0 ||
            strncmp(ls, "#define", 7) == 0 || strncmp(ls, "return", 6) == 0)
            continue;
        if (p[-1] != ' ' && p[-1] != '*') continue;
        size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
        if (p[n] != '(') continue;
        size_t used = strlen(names);
        snprintf(names + used, size - used, "%.*s ", (int)n, p);
    }
    free(text);
}

/* Whether name is defined (a line starting with a type and then name, ending in '{'
 * before the next ';') in one of the module's sources. */
static int defined_in(const char *name, const char *const *sources, int n_sources) {
    for (int i = 0; i < n_sources; i++) {
        char *text = slurp(sources[i]);
        int found = 0;
        size_t len = strlen(name);
        for (char *p = text; !found && (p = strstr(p, name)); p += len) {
            if (p[len] != '(' || (p != text && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))) continue;
            char *ls = p;
            while (ls > text && ls[-1] != '\n') ls--;
            if (!isalpha((unsigned char)*ls) || strncmp(ls, "return", 6) == 0) continue;
            char *brace = strchr(p, '{'), *semi = strchr(p, ';');
            found = brace && (!semi || brace < semi);
        }
        free(text);
        if (found) return 1;
    }
    return 0;
}

TEST(layers_includes_follow_the_layers) {
    int files = 0, includes = 0;
    for (int l = 0; l < N_LAYERS + 1; l++) {
        const char *dir = l < N_LAYERS ? layers[l].dir : "bench";
        char path[400];
        snprintf(path, sizeof path, "src/%s", dir);
        DIR *d = opendir(path);
        CHECK_MSG(d, "cannot list %s (tests run in the repository root)", path);
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n < 3 || (strcmp(e->d_name + n - 2, ".c") != 0 && strcmp(e->d_name + n - 2, ".h") != 0)) continue;
            snprintf(path, sizeof path, "src/%s/%s", dir, e->d_name);
            includes += check_includes(path, layer_of_dir(dir), dir);
            files++;
        }
        closedir(d);
    }
    CHECK_MSG(files > 50 && includes > 100, "only %d files, %d includes seen", files, includes);
}

TEST(layers_public_headers_are_their_modules) {
    DIR *d = opendir("include/nevo");
    CHECK(d);
    struct dirent *e;
    int headers = 0, functions = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".h") != 0 || strcmp(e->d_name, "nevo.h") == 0) continue;
        char name[64], path[320];
        snprintf(name, sizeof name, "%.*s", (int)(n - 2), e->d_name);
        snprintf(path, sizeof path, "include/nevo/%s", e->d_name);
        int l = layer_of_header(name);
        CHECK_MSG(l >= 0, "%s: a public header with no layer (DESIGN.md, Layers; this test's table)", path);
        check_includes(path, l, NULL);
        /* its module: src/DIR/name.c and src/DIR/name_*.c */
        const char *sources[16];
        int n_sources = 0;
        char dirpath[128];
        snprintf(dirpath, sizeof dirpath, "src/%s", layers[l].dir);
        DIR *sd = opendir(dirpath);
        CHECK(sd);
        struct dirent *f;
        while ((f = readdir(sd)) && n_sources < 16) {
            size_t m = strlen(f->d_name), k = strlen(name);
            if (m < 3 || strcmp(f->d_name + m - 2, ".c") != 0 || strncmp(f->d_name, name, k) != 0) continue;
            if (f->d_name[k] != '.' && f->d_name[k] != '_') continue;
            char *src = malloc(400);
            snprintf(src, 400, "%s/%s", dirpath, f->d_name);
            sources[n_sources++] = src;
        }
        closedir(sd);
        CHECK_MSG(n_sources > 0, "%s: no src/%s/%s.c implements it", path, layers[l].dir, name);
        char names[8192];
        declared_functions(path, names, sizeof names);
        for (char *tok = strtok(names, " "); tok; tok = strtok(NULL, " ")) {
            CHECK_MSG(defined_in(tok, sources, n_sources), "%s declares %s, which src/%s/%s*.c does not define", path,
                      tok, layers[l].dir, name);
            functions++;
        }
        for (int i = 0; i < n_sources; i++) free((void *)sources[i]);
        headers++;
    }
    closedir(d);
    CHECK_MSG(headers >= 15 && functions > 150, "only %d headers, %d functions seen", headers, functions);
}
