/* The installed library, as a program outside the tree sees it. `make check` installs
 * into BUILD/install-test with `make install PREFIX=...` before the run and names it in
 * NEVO_TEST_PREFIX; these tests build small programs against that install through
 * `pkg-config --cflags --libs nevo` (shared and, with --static, static), run them, and
 * compare what they print with what the in-tree library gives this process. Also: the
 * version everywhere it shows, the sonames, no cairo in libnevo.so, the man page, and the
 * order in which the installed library looks for its MuJoCo models. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/nevo.h"

/* A program using only the installed headers and library: creates the env named by
 * argv[1], resets it with seed 7, steps it 5 times with action 1 (discrete) or 0.25 in
 * every dimension (box), printing the observation's floats exactly (%a), rewards and
 * flags, then its version. Any failure: the message and exit 2. */
static const char *program =
    "#include <nevo/nevo.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "int main(int argc, char **argv) {\n"
    "    NevoEnv *env = NULL;\n"
    "    NevoError err = {0};\n"
    "    if (argc != 2 || nevo_env_new(argv[1], NULL, 0, &env, &err) != NEVO_OK) {\n"
    "        fprintf(stderr, \"prog: %s\\n\", err.msg);\n"
    "        return 2;\n"
    "    }\n"
    "    const NevoEnvSpec *s = nevo_env_spec(env);\n"
    "    void *inst = calloc(1, nevo_env_instance_size(env));\n"
    "    float *obs = calloc((size_t)s->obs_dim, sizeof(float)), act[NEVO_ENV_MAX_ACT_DIM];\n"
    "    for (int i = 0; i < NEVO_ENV_MAX_ACT_DIM; i++)\n"
    "        act[i] = s->action_kind == NEVO_SPACE_DISCRETE ? 1.0f : 0.25f;\n"
    "    nevo_env_reset(env, inst, 7, obs);\n"
    "    for (int t = 0; t <= 5; t++) {\n"
    "        NevoStepResult r = {0};\n"
    "        if (t) nevo_env_step(env, inst, act, obs, &r);\n"
    "        printf(\"%d %a %d %d:\", t, r.reward, r.terminated, r.truncated);\n"
    "        for (int i = 0; i < s->obs_dim && i < 16; i++) printf(\" %a\", obs[i]);\n"
    "        printf(\"\\n\");\n"
    "    }\n"
    "    printf(\"%s %d %s\\n\", s->name, s->obs_dim, nevo_version());\n"
    "    nevo_env_instance_free(env, inst);\n"
    "    nevo_env_free(env);\n"
    "    free(inst);\n"
    "    free(obs);\n"
    "    return 0;\n"
    "}\n";

/* What the program prints, from the library linked into this process. */
static void expected_output(const char *name, char *out, size_t size) {
    NevoEnv *env = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_env_new(name, NULL, 0, &env, &err) == NEVO_OK, "%s", err.msg);
    const NevoEnvSpec *s = nevo_env_spec(env);
    void *inst = calloc(1, nevo_env_instance_size(env));
    float *obs = calloc((size_t)s->obs_dim, sizeof(float)), act[NEVO_ENV_MAX_ACT_DIM];
    for (int i = 0; i < NEVO_ENV_MAX_ACT_DIM; i++) act[i] = s->action_kind == NEVO_SPACE_DISCRETE ? 1.0f : 0.25f;
    nevo_env_reset(env, inst, 7, obs);
    size_t used = 0;
    for (int t = 0; t <= 5; t++) {
        NevoStepResult r = {0};
        if (t) nevo_env_step(env, inst, act, obs, &r);
        used += (size_t)snprintf(out + used, size - used, "%d %a %d %d:", t, r.reward, r.terminated, r.truncated);
        for (int i = 0; i < s->obs_dim && i < 16; i++)
            used += (size_t)snprintf(out + used, size - used, " %a", obs[i]);
        used += (size_t)snprintf(out + used, size - used, "\n");
    }
    snprintf(out + used, size - used, "%s %d %s\n", s->name, s->obs_dim, nevo_version());
    nevo_env_instance_free(env, inst);
    nevo_env_free(env);
    free(inst);
    free(obs);
}

/* The install under test: $NEVO_TEST_PREFIX, made by `make check`. */
static const char *prefix(void) {
    static char dir[1024];
    const char *p = getenv("NEVO_TEST_PREFIX");
    struct stat st;
    CHECK_MSG(p && *p, "NEVO_TEST_PREFIX is not set: `make check` installs into BUILD/install-test and sets it");
    CHECK_MSG(stat(p, &st) == 0 && S_ISDIR(st.st_mode), "no install at NEVO_TEST_PREFIX=%s (run `make check`)", p);
    snprintf(dir, sizeof dir, "%s", p);
    return dir;
}

/* The in-tree build directory: the one holding NEVO_BIN. */
static void build_dir(char *dir, size_t size) {
    snprintf(dir, size, "%s", test_nevo_bin());
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, size, ".");
}

/* Compiles the program against the install; static: with libnevo.a and pkg-config
 * --static's private libraries. */
static void build_program(const char *exe, int static_link) {
    char out[8192], src[1024];
    snprintf(src, sizeof src, "%s/prog.c", test_tmpdir());
    FILE *f = fopen(src, "w");
    CHECK(f);
    fputs(program, f);
    fclose(f);
    const char *cflags = getenv("NEVO_TEST_CFLAGS") ? getenv("NEVO_TEST_CFLAGS") : "";
    int rc = test_run(out, sizeof out,
                      "export PKG_CONFIG_PATH='%s/lib/pkgconfig'; cd '%s' && "
                      "cc -std=c11 -Wall -Werror %s -o %s prog.c $(pkg-config --cflags nevo) %s",
                      prefix(), test_tmpdir(), cflags, exe,
                      static_link ? "$(pkg-config --static --libs nevo | sed 's/-lnevo /-l:libnevo.a /')"
                                  : "$(pkg-config --libs nevo)");
    CHECK_MSG(rc == 0, "building %s against the install failed (%d):\n%s", exe, rc, out);
}

/* Runs a built program in the test's directory (no models/ there), without NEVO_MODELS. */
static int run_program(const char *exe, const char *env_name, char *out, size_t size) {
    return test_run(out, size, "cd '%s' && unset NEVO_MODELS && LD_LIBRARY_PATH='%s/lib' ./%s %s", test_tmpdir(),
                    prefix(), exe, env_name);
}

TEST(install_layout_and_pkg_config) {
    const char *p = prefix();
    static const char *const files[] = {
        "bin/nevo", "lib/libnevo.a", "lib/libnevo.so", "lib/pkgconfig/nevo.pc", "include/nevo/nevo.h",
        "include/nevo/env.h", "include/nevo/version.h", "share/man/man1/nevo.1",
        "share/nevo/models/mujoco/hopper.xml", "share/nevo/models/mujoco/humanoid_body.xml",
        "share/nevo/configs/cartpole_ga.json",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", p, files[i]);
        CHECK_MSG(access(path, R_OK) == 0, "the install lacks %s", files[i]);
    }
    /* the public headers, and only they: internal ones stay in the tree */
    char out[4096];
    CHECK_MSG(test_run(out, sizeof out, "ls include/nevo > '%s/tree' && ls '%s/include/nevo' | diff '%s/tree' -",
                       test_tmpdir(), p, test_tmpdir()) == 0,
              "installed headers differ from include/nevo:\n%s", out);
    /* pkg-config: the version is the library's, the flags point into the install */
    CHECK_EQ_INT(test_run(out, sizeof out, "PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --modversion nevo", p), 0);
    char want[128];
    snprintf(want, sizeof want, "%s\n", nevo_version());
    CHECK_MSG(strcmp(out, want) == 0, "nevo.pc says version %s, the library %s", out, nevo_version());
    CHECK_EQ_INT(test_run(out, sizeof out, "PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --cflags --libs nevo", p),
                 0);
    char inc[1200], lib[1200];
    snprintf(inc, sizeof inc, "-I%s/include", p);
    snprintf(lib, sizeof lib, "-L%s/lib", p);
    CHECK_MSG(strstr(out, inc) && strstr(out, lib) && strstr(out, "-lnevo"), "pkg-config --cflags --libs: %s", out);
    /* static linking needs what libnevo uses */
    CHECK_EQ_INT(test_run(out, sizeof out, "PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --static --libs nevo", p),
                 0);
    static const char *const priv[] = {"-ljansson", "-lmujoco", "-lm", "-pthread"};
    for (size_t i = 0; i < sizeof priv / sizeof priv[0]; i++)
        CHECK_MSG(strstr(out, priv[i]), "pkg-config --static --libs nevo lacks %s: %s", priv[i], out);
}

/* A program built against the installed library (shared, then static) creates
 * CartPole-v1 and mujoco/hopper and steps them exactly as the in-tree library does;
 * the hopper's model comes from the installed data directory. */
TEST(install_program_matches_the_tree) {
    static const char *const envs[] = {"CartPole-v1", "mujoco/hopper"};
    char got[16384], want[16384], out[4096];
    build_program("prog", 0);
    build_program("prog_static", 1);
    CHECK_EQ_INT(test_run(out, sizeof out, "cd '%s' && readelf -d prog | grep NEEDED", test_tmpdir()), 0);
    CHECK_MSG(strstr(out, "[libnevo.so.0]"), "prog does not load libnevo.so.0:\n%s", out);
    CHECK_EQ_INT(test_run(out, sizeof out, "cd '%s' && readelf -d prog_static | grep NEEDED", test_tmpdir()), 0);
    CHECK_MSG(!strstr(out, "libnevo"), "prog_static loads libnevo:\n%s", out);
    for (int e = 0; e < 2; e++) {
        expected_output(envs[e], want, sizeof want);
        for (int s = 0; s < 2; s++) {
            const char *exe = s ? "prog_static" : "prog";
            int rc = run_program(exe, envs[e], got, sizeof got);
            CHECK_MSG(rc == 0 && strcmp(got, want) == 0, "%s %s exited %d and printed:\n%s\nthe tree's library:\n%s",
                      exe, envs[e], rc, got, want);
        }
    }
}

/* Models: $NEVO_MODELS, then ./models/mujoco, then the installed data directory, then
 * the checkout. A broken hopper.xml in the install shows which one the installed
 * library loads (then is put back; meanwhile no other test runs). */
TEST_ALONE(install_finds_models_in_order) {
    const char *p = prefix();
    char installed[1200], saved[1300], out[8192];
    snprintf(installed, sizeof installed, "%s/share/nevo/models/mujoco/hopper.xml", p);
    snprintf(saved, sizeof saved, "%s.saved", installed);
    build_program("prog", 0);
    CHECK(rename(installed, saved) == 0);
    FILE *f = fopen(installed, "w");
    if (!f) rename(saved, installed); /* the install intact for the tests after this one */
    CHECK(f);
    fputs("<mujoco><worldbody><broken></mujoco>\n", f);
    fclose(f);
    int rc = run_program("prog", "mujoco/hopper", out, sizeof out);
    int rc_cwd = test_run(NULL, 0,
                          "cd '%s' && mkdir -p models/mujoco && cp '%s' models/mujoco/hopper.xml && "
                          "unset NEVO_MODELS && LD_LIBRARY_PATH='%s/lib' ./prog mujoco/hopper",
                          test_tmpdir(), saved, p);
    char env_out[4096];
    int rc_env = test_run(env_out, sizeof env_out, "cd '%s' && NEVO_MODELS='%s/models/mujoco' "
                          "LD_LIBRARY_PATH='%s/lib' ./prog mujoco/hopper", test_tmpdir(), test_tmpdir(), p);
    CHECK(rename(saved, installed) == 0);
    CHECK_MSG(rc == 2 && strstr(out, installed), "with a broken installed hopper.xml: exit %d, output:\n%s", rc,
              out);
    CHECK_MSG(rc_cwd == 0, "./models/mujoco does not come before the installed models (exit %d)", rc_cwd);
    CHECK_MSG(rc_env == 0, "NEVO_MODELS does not come first (exit %d): %s", rc_env, env_out);
    /* intact again: loads */
    CHECK_EQ_INT(run_program("prog", "mujoco/hopper", out, sizeof out), 0);
}

/* `nevo --version` and `nevo version` print the library's version, in the tree and
 * installed; it is X.Y.Z. */
TEST(install_version) {
    const char *v = nevo_version();
    int a, b, c, n = 0;
    CHECK_MSG(sscanf(v, "%d.%d.%d%n", &a, &b, &c, &n) == 3 && v[n] == '\0', "version '%s' is not X.Y.Z", v);
    char want[128], out[4096], bin[1200];
    snprintf(want, sizeof want, "nevo %s\n", v);
    snprintf(bin, sizeof bin, "%s/bin/nevo", prefix());
    const char *const bins[] = {test_nevo_bin(), bin};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(test_run(out, sizeof out, "%s --version", bins[i]), 0);
        CHECK_MSG(strcmp(out, want) == 0, "%s --version: %s", bins[i], out);
        CHECK_EQ_INT(test_run(out, sizeof out, "%s version", bins[i]), 0);
        CHECK_MSG(strcmp(out, want) == 0, "%s version: %s", bins[i], out);
    }
    CHECK_EQ_INT(test_run(out, sizeof out, "%s --version extra", test_nevo_bin()), 2);
    CHECK_MSG(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
}

/* libnevo.so (in the tree and installed) carries its soname and links no cairo (the
 * plot command's); the installed command and the library are the same version. */
TEST(install_shared_library_soname_without_cairo) {
    char dir[1024], out[8192];
    build_dir(dir, sizeof dir);
    char paths[2][1200];
    snprintf(paths[0], sizeof paths[0], "%s/libnevo.so", dir);
    snprintf(paths[1], sizeof paths[1], "%s/lib/libnevo.so", prefix());
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(test_run(out, sizeof out, "readelf -d '%s'", paths[i]), 0);
        CHECK_MSG(strstr(out, "Library soname: [libnevo.so.0]"), "%s has no soname libnevo.so.0:\n%s", paths[i], out);
        CHECK_MSG(strstr(out, "[libmujoco.so"), "%s: readelf shows no NEEDED libmujoco:\n%s", paths[i], out);
        CHECK_MSG(!strstr(out, "cairo"), "%s links cairo:\n%s", paths[i], out);
    }
}

/* The man page: installed, this version, every command the usage lists, the exit
 * statuses and environment variables; groff (where installed) formats it without a
 * warning. */
TEST(install_man_page) {
    char path[1200], out[8192];
    snprintf(path, sizeof path, "%s/share/man/man1/nevo.1", prefix());
    char *man = test_read_file(path, NULL);
    CHECK_MSG(man, "cannot read %s", path);
    char th[160];
    snprintf(th, sizeof th, "\"nevo %s\"", nevo_version());
    CHECK_MSG(strstr(man, ".TH NEVO 1") && strstr(man, th), "man page header lacks %s", th);
    CHECK_MSG(!strstr(man, "@"), "an unfilled @...@ field is left in the man page");
    static const char *const needles[] = {
        ".B train\n", ".B eval\n", ".B envs\n", ".B bench\n", ".B plot curves\n", ".B plot behaviours\n",
        "\\-\\-resume", "\\-\\-episodes", "\\-\\-out", ".SH EXIT STATUS", ".B NEVO_MODELS", ".B NEVO_KERNELS",
        ".B NEVO_HUGEPAGES", ".SH EXAMPLES", ".SH FILES", "metrics.jsonl", "checkpoint.bin", "policy.nevo",
    };
    for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
        CHECK_MSG(strstr(man, needles[i]), "the man page lacks %s", needles[i]);
    /* every command `nevo --help` lists */
    CHECK_EQ_INT(test_run(out, sizeof out, "%s --help", test_nevo_bin()), 0);
    for (const char *cmd = strstr(out, "commands:\n"); cmd && (cmd = strstr(cmd, "\n  ")) != NULL;) {
        cmd += 3;
        if (*cmd == ' ') continue;
        char word[32] = "";
        sscanf(cmd, "%31[a-z]", word);
        if (!*word) break;
        char want[64];
        snprintf(want, sizeof want, ".B %s", word);
        CHECK_MSG(strstr(man, want) || !strcmp(word, "version"), "the man page lacks the command %s", word);
    }
    free(man);
    if (test_run(NULL, 0, "command -v groff") == 0) {
        int rc = test_run(out, sizeof out, "groff -man -Tutf8 -ww -z '%s'", path);
        CHECK_MSG(rc == 0 && !*out, "groff warns about the man page:\n%s", out);
    }
}
