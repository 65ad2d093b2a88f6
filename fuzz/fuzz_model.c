/* libFuzzer target: MuJoCo model files as NEVO_MODELS may hold them, through the check
 * of the files a model names (nevo_mj_check_named_files: includes, meshes, textures;
 * MuJoCo opens those itself, and would wait on a FIFO). An input is a model file's
 * text. It is written to model.xml in a directory made at start that also holds an
 * include (part.xml, naming a mesh), a FIFO beside it (fifo.xml) and one in a mesh
 * directory (meshes/m.stl), so inputs that name them reach those paths.
 *
 * The check must return NEVO_OK or fail cleanly (a status and one line), without a
 * sanitizer's report; it opens model files only as regular files and stats the rest,
 * so a FIFO never blocks it. The directory goes when the fuzzer exits (a crash, which
 * libFuzzer ends with _Exit, leaves it beside its artifact).
 *
 * NEVO_FUZZ_WRITE_CORPUS=DIR writes the seed corpus instead and exits:
 * fuzz/make_corpus.sh runs it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envs/mujoco_common.h"
#include "fuzz_check.h"

static char dir[64], model[128];

/* the directory and what is in it go when the fuzzer exits */
static void remove_dir(void) {
    static const char *const names[] = {"model.xml", "part.xml", "fifo.xml", "meshes/m.stl", "meshes", ""};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        remove(path);
    }
}

static void write_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static const char *const seeds[] = {
    "<mujoco><include file=\"part.xml\"/><worldbody/></mujoco>\n",
    "<mujoco><compiler meshdir='meshes' texturedir = \"meshes\"/><asset><mesh name='m' file='m.stl'/>"
    "<texture type='skybox' fileright='m.stl'/></asset></mujoco>\n",
    "<mujoco><include file='fifo.xml'/><include file='model.xml'/></mujoco>\n",
    "<mujoco><compiler assetdir=\"/\"/><asset><hfield file=\"part.xml\"/></asset><worldbody><body><geom "
    "size='0.1'/></body></worldbody></mujoco>\n",
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *out = getenv("NEVO_FUZZ_WRITE_CORPUS");
    if (out) {
        for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/seed%zu.xml", out, i);
            write_text(path, seeds[i], strlen(seeds[i]));
        }
        exit(0);
    }
    snprintf(dir, sizeof dir, "/tmp/nevo-fuzz-model-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    atexit(remove_dir);
    char path[256];
    snprintf(path, sizeof path, "%s/part.xml", dir);
    static const char part[] = "<mujoco><asset><mesh file='m.stl'/></asset><include file='fifo.xml'/></mujoco>\n";
    write_text(path, part, sizeof part - 1);
    snprintf(path, sizeof path, "%s/fifo.xml", dir);
    FUZZ_REQUIRE(mkfifo(path, 0600) == 0);
    snprintf(path, sizeof path, "%s/meshes", dir);
    FUZZ_REQUIRE(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/meshes/m.stl", dir);
    FUZZ_REQUIRE(mkfifo(path, 0600) == 0);
    snprintf(model, sizeof model, "%s/model.xml", dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_text(model, (const char *)data, size);
    NevoError err = {0};
    NevoStatus st = nevo_mj_check_named_files("mujoco/fuzz", model, &err);
    fuzz_check_error(st, &err);
    return 0;
}
