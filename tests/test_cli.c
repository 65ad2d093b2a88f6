/* The `nevo` command end to end: bad input of every class (exit 2, one clear line,
 * nothing written), kill-and-resume bit-identity, thread-count independence, eval and
 * envs output. Runs the built binary (NEVO_BIN, default build/nevo). */
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/io.h"

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Runs `nevo ARGS` and expects exit 2, a message containing `needle`, and no output
 * directory `out` created. */
static void expect_bad(const char *args, const char *needle, const char *out) {
    char buf[8192];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s %s", test_tmpdir(), getenv("PWD"), test_nevo_bin(), args);
    CHECK_MSG(rc == 2, "`nevo %s` exited %d, expected 2; output:\n%s", args, rc, buf);
    CHECK_MSG(strstr(buf, needle) != NULL, "`nevo %s`: message lacks '%s':\n%s", args, needle, buf);
    CHECK_MSG(strstr(buf, "error") || strstr(buf, "nevo "), "no error prefix: %s", buf);
    /* one line of diagnosis */
    const char *nl = strchr(buf, '\n');
    CHECK_MSG(nl && nl[1] == '\0', "`nevo %s`: expected exactly one line, got:\n%s", args, buf);
    if (out) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", test_tmpdir(), out);
        CHECK_MSG(!exists(path), "`nevo %s` created %s", args, path);
    }
}

static void write_file(const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

static const char *small_ga =
    "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 5, \"population\": 40,\n"
    " \"generations\": 6, \"eval_episodes\": 10,\n"
    " \"policy\": {\"hidden\": [16, 16]},\n"
    " \"ga\": {\"sigma\": 0.05, \"truncation\": 8, \"validation_candidates\": 4, \"validation_episodes\": 5}}\n";

TEST(cli_bad_json_reports_line_and_column) {
    write_file("bad.json", "{\n  \"env\": \"CartPole-v1\",\n  \"population\": 10,,\n}\n");
    expect_bad("train bad.json --out run", "bad.json:3:", "run");
}

TEST(cli_unknown_key_suggests_closest) {
    write_file("c.json", "{\"env\": \"CartPole-v1\", \"populaton\": 10}");
    expect_bad("train c.json --out run", "did you mean 'population'", "run");
    write_file("c2.json", "{\"env\": \"CartPole-v1\", \"ga\": {\"sigam\": 0.1}}");
    expect_bad("train c2.json --out run", "did you mean 'ga.sigma'", "run");
    write_file("ok.json", "{\"env\": \"CartPole-v1\"}");
    expect_bad("train ok.json es.lrr=0.1 --out run", "did you mean 'es.lr'", "run");
}

TEST(cli_wrong_type_and_out_of_range) {
    write_file("ok.json", "{\"env\": \"CartPole-v1\"}");
    expect_bad("train ok.json population=ten --out run", "population must be an integer", "run");
    expect_bad("train ok.json population=0 --out run", "population", "run");
    expect_bad("train ok.json ga.sigma=-0.5 --out run", "ga.sigma", "run");
    expect_bad("train ok.json ga.elitism=1 --out run", "true or false", "run");
    expect_bad("train ok.json algo=adam --out run", "not one of", "run");
    expect_bad("train ok.json algo=sgd --out run", "algo sgd trains on a dataset", "run");
    expect_bad("train ok.json policy.hidden=[64,-1] --out run", "policy.hidden[1]", "run");
    expect_bad("train ok.json es.obs_norm_prob=2 --out run", "es.obs_norm_prob", "run");
    expect_bad("train ok.json population=10 ga.truncation=20 --out run", "truncation", "run");
    expect_bad("train ok.json algo=es population=11 --out run", "even", "run");
    expect_bad("train ok.json max_wall_s=-1 --out run", "max_wall_s = -1 is out of range: it must be >= 0", "run");
    expect_bad("train ok.json max_wall_s=nan --out run", "max_wall_s must be a number, got a string", "run");
    expect_bad("train ok.json max_wall_s=1h --out run", "max_wall_s must be a number, got a string", "run");
}

TEST(cli_unknown_env_and_paths) {
    write_file("e.json", "{\"env\": \"CartPol-v1\"}");
    expect_bad("train e.json --out run", "did you mean 'CartPole-v1'", "run");
    expect_bad("train missing.json --out run", "missing.json", "run");
    expect_bad("eval missing.nevo", "missing.nevo", NULL);
    expect_bad("eval --env Nope-v0 --policy random", "unknown environment", NULL);
    expect_bad("eval --env CartPole-v1 --policy constant:7", "discrete actions 0..1", NULL);
    expect_bad("train --bogus", "unknown option", NULL);
    expect_bad("bench --threads 0", "--threads needs a whole number", NULL);
    expect_bad("bench --only peak --threads", "--threads needs a whole number", NULL);
    expect_bad("bench --only nope", "expected names from peak", NULL);
}

/* The CPU count follows the affinity mask (taskset), and --threads overrides it for the
 * all-core numbers. */
TEST(cli_bench_threads) {
    char buf[8192];
    int rc = test_run(buf, sizeof buf, "taskset -c 0 %s bench --quick --only peak --json", test_nevo_bin());
    CHECK_MSG(rc == 0, "bench exited %d:\n%s", rc, buf);
    CHECK_MSG(strstr(buf, "\"cpus\": 1,") != NULL, "taskset -c 0 should give 1 CPU:\n%s", buf);
    CHECK_MSG(strstr(buf, "\"limit_name\": \"1 x 1-core peak\"") != NULL, "all-core row should use 1 thread:\n%s", buf);
    rc = test_run(buf, sizeof buf, "taskset -c 0 %s bench --quick --only peak --json --threads 3", test_nevo_bin());
    CHECK_MSG(rc == 0, "bench exited %d:\n%s", rc, buf);
    CHECK_MSG(strstr(buf, "\"limit_name\": \"3 x 1-core peak\"") != NULL, "--threads 3 ignored:\n%s", buf);
}

/* Trains a small run into `dir` with extra arguments; returns the exit status. */
static int train(const char *dir, const char *extra) {
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train small.json --out %s --quiet %s", test_tmpdir(),
                      getenv("PWD"), test_nevo_bin(), dir, extra);
    if (rc != 0 && rc != 137) fprintf(stderr, "%s\n", buf);
    return rc;
}

static char *read_in(const char *dir, const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", test_tmpdir(), dir, name);
    return test_read_file(path, len);
}

static void check_same_run(const char *a, const char *b) {
    static const char *const files[] = {"policy.nevo", "metrics.jsonl", "summary.json"};
    test_same_run_files(a, b, files, 3);
}

TEST(cli_existing_run_is_not_overwritten) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=2"), 0);
    size_t l1, l2;
    char *before = read_in("run", "checkpoint.bin", &l1);
    expect_bad("train small.json --out run", "already holds a run", NULL);
    char *after = read_in("run", "checkpoint.bin", &l2);
    CHECK(l1 == l2 && memcmp(before, after, l1) == 0);
    free(before), free(after);
}

/* Without --out, a run goes to runs/<config name>, then runs/<config name>-2, ...: a
 * second run of the same command (`make run` again) starts a new directory. */
TEST(cli_default_run_dir_is_always_new) {
    write_file("small.json", small_ga);
    char buf[8192];
    for (int k = 1; k <= 2; k++) {
        int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train small.json generations=1 eval_episodes=1 --quiet",
                          test_tmpdir(), getenv("PWD"), test_nevo_bin());
        CHECK_MSG(rc == 0, "run %d exited %d:\n%s", k, rc, buf);
        const char *want = k == 1 ? "\"run_dir\": \"runs/small\"" : "\"run_dir\": \"runs/small-2\"";
        CHECK_MSG(strstr(buf, want) != NULL, "run %d: expected %s in:\n%s", k, want, buf);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/runs/small/checkpoint.bin", test_tmpdir());
    CHECK(exists(path));
    snprintf(path, sizeof path, "%s/runs/small-2/checkpoint.bin", test_tmpdir());
    CHECK(exists(path));
}

TEST(cli_thread_count_does_not_change_results) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("t1", "--threads 1"), 0);
    CHECK_EQ_INT(train("t2", "--threads 2"), 0);
    check_same_run("t1", "t2");
}

/* Frames completed by the end of generation g, from a finished run's metrics. */
static long long frames_after(const char *dir, int g) {
    char *m = read_in(dir, "metrics.jsonl", NULL);
    CHECK(m != NULL);
    char key[64];
    snprintf(key, sizeof key, "{\"generation\": %d, \"frames\": ", g);
    char *p = strstr(m, key);
    CHECK_MSG(p, "generation %d missing from metrics", g);
    long long f = atoll(p + strlen(key));
    free(m);
    return f;
}

/* Kills a run with SIGKILL halfway through generation `gen` (after the episodes that
 * cross that many frames), resumes it with another thread count and compares it with
 * an uninterrupted run. */
static void kill_and_resume(const char *algo_overrides, int gen) {
    write_file("small.json", small_ga);
    char extra[512];
    snprintf(extra, sizeof extra, "%s --threads 2", algo_overrides);
    CHECK_EQ_INT(train("full", extra), 0);
    long long kill = (frames_after("full", gen - 1) + frames_after("full", gen)) / 2;
    snprintf(extra, sizeof extra, "%s --threads 2 --kill-after-frames %lld", algo_overrides, kill);
    CHECK_EQ_INT(train("cut", extra), 137); /* killed by SIGKILL */
    /* the run was cut mid-generation: no summary yet, the checkpoint is from before */
    char path[1024];
    snprintf(path, sizeof path, "%s/cut/summary.json", test_tmpdir());
    CHECK(!exists(path));
    CHECK(frames_after("cut", gen - 1) == frames_after("full", gen - 1));
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume cut --quiet --threads 1", test_tmpdir(),
                      getenv("PWD"), test_nevo_bin());
    CHECK_MSG(rc == 0, "resume failed (%d):\n%s", rc, buf);
    check_same_run("full", "cut");
}

TEST(cli_kill_and_resume_ga) { kill_and_resume("", 3); }
/* On CartPole the elite always ranks among the top candidates. On Pendulum, in
 * generation 7 of 10, the previous elite (child 0) is validated in the row of the
 * parent it displaces from the candidates, wins, and replaces the last parent: the
 * checkpoint after it replays those rows from genomes, which must give the cached bits. */
TEST(cli_kill_and_resume_ga_elite_outside_parents) {
    kill_and_resume("env=Pendulum-v1 generations=10", 8);
}
TEST(cli_kill_and_resume_rs) { kill_and_resume("algo=rs", 2); }
/* low-rank mutations, run factored: the checkpoint's chains replay at the config's rank */
TEST(cli_kill_and_resume_ga_factored) { kill_and_resume("ga.rank=2 ga.factored=true", 3); }
TEST(cli_kill_and_resume_es) {
    kill_and_resume("algo=es es.obs_norm=true es.obs_norm_prob=0.2 es.center_episodes=3", 4);
}

TEST(cli_resume_refuses_changed_config_and_corrupt_checkpoint) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=2"), 0);
    expect_bad("train --resume run ga.sigma=0.5",
               "only generations, max_frames, max_wall_s, threads and backend may change", NULL);
    /* the backend may change on resume (it changes no result), to one that exists */
    expect_bad("train --resume run --backend gpu", "backend = 'gpu' is not one of cpu|cuda", NULL);
    char buf[8192];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume run generations=3 --backend cpu --quiet",
                      test_tmpdir(), getenv("PWD"), test_nevo_bin());
    CHECK_MSG(rc == 0, "resume with --backend cpu exited %d:\n%s", rc, buf);
#ifndef NEVO_CUDA
    expect_bad("train small.json --backend cuda --out cu", "the cuda backend is built by `make CUDA=1`", "cu");
#endif
    /* corrupt the checkpoint: flip one byte in the middle */
    char path[1024];
    snprintf(path, sizeof path, "%s/run/checkpoint.bin", test_tmpdir());
    size_t len;
    char *data = test_read_file(path, &len);
    data[len / 2] ^= 0x40;
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
    expect_bad("train --resume run generations=4", "checksum mismatch", NULL);
    expect_bad("eval run/checkpoint.bin", "checksum mismatch", NULL);
    /* truncated */
    f = fopen(path, "wb");
    fwrite(data, 1, len / 3, f);
    fclose(f);
    expect_bad("eval run/checkpoint.bin", "truncated", NULL);
    /* wrong version (with a valid checksum, as a newer nevo would write) */
    data[len / 2] ^= 0x40;
    data[8] = 99;
    uint32_t crc = nevo_crc32(data, len - 4);
    memcpy(data + len - 4, &crc, 4);
    f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
    expect_bad("eval run/checkpoint.bin", "version 99", NULL);
    free(data);
    /* not a nevo file at all */
    write_file("junk.nevo", "hello, this is not a policy\n");
    expect_bad("eval junk.nevo", "neither a nevo policy nor a checkpoint", NULL);
}

TEST(cli_resume_can_extend_generations) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("full", ""), 0);                /* 6 generations */
    CHECK_EQ_INT(train("short", "generations=3"), 0);  /* 3, then extended to 6 */
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume short generations=6 --quiet", test_tmpdir(),
                      getenv("PWD"), test_nevo_bin());
    CHECK_MSG(rc == 0, "%s", buf);
    check_same_run("full", "short");
}

/* A wall-time budget stops the run after the first generation that reaches it (here the
 * first: no generation takes under a microsecond), with a checkpoint as usual; resumed
 * under a larger budget it ends as the uninterrupted run does, bit for bit. Resumed
 * with the budget it has already spent, it runs no generation. */
TEST(cli_max_wall_s_stops_and_resumes) {
    write_file("small.json", small_ga);
    /* the resumed run's config, which policy.nevo records */
    CHECK_EQ_INT(train("full", "generations=3 max_wall_s=1000"), 0);
    CHECK_EQ_INT(train("wall", "max_wall_s=1e-6"), 0);
    char *m = read_in("wall", "metrics.jsonl", NULL), *s = read_in("wall", "summary.json", NULL);
    CHECK_MSG(m && strstr(m, "{\"generation\": 0,") && !strstr(m, "{\"generation\": 1,"),
              "expected exactly generation 0:\n%s", m);
    CHECK_MSG(strstr(s, "\"generations\": 1,") && strstr(s, "\"stopped\": \"max_wall_s\""), "summary: %s", s);
    free(m), free(s);
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume wall --quiet", test_tmpdir(), getenv("PWD"),
                      test_nevo_bin());
    CHECK_MSG(rc == 0 && strstr(buf, "\"generations\": 1,") && strstr(buf, "\"stopped\": \"max_wall_s\""),
              "resume within the spent budget (%d):\n%s", rc, buf);
    rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume wall max_wall_s=1000 generations=3 --quiet",
                  test_tmpdir(), getenv("PWD"), test_nevo_bin());
    CHECK_MSG(rc == 0 && strstr(buf, "\"stopped\": \"generations\""), "resume (%d):\n%s", rc, buf);
    check_same_run("full", "wall");
}

TEST(cli_eval_and_envs_output) {
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "%s eval --env CartPole-v1 --policy random --episodes 50 --seed 3 2>/dev/null",
                      test_nevo_bin());
    CHECK_EQ_INT(rc, 0);
    const char *keys[] = {"\"episodes\": 50", "\"frames\"", "\"return_mean\"", "\"return_std\"",
                          "\"length_mean\"", "\"length_std\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK_MSG(strstr(buf, keys[i]), "missing %s in %s", keys[i], buf);
    rc = test_run(buf, sizeof buf, "%s eval --env Pendulum-v1 --policy constant:0 --episodes 3", test_nevo_bin());
    CHECK_EQ_INT(rc, 0);
    CHECK(strstr(buf, "\"length_mean\": 200.0"));
    rc = test_run(buf, sizeof buf, "%s envs", test_nevo_bin());
    CHECK_EQ_INT(rc, 0);
    const char *envs[] = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"};
    for (size_t i = 0; i < 5; i++) CHECK_MSG(strstr(buf, envs[i]), "envs lacks %s", envs[i]);
    CHECK(strstr(buf, "Discrete(2)") && strstr(buf, "Box(1, [-2, 2])"));
    rc = test_run(buf, sizeof buf, "%s train --help", test_nevo_bin());
    CHECK_EQ_INT(rc, 0);
    CHECK(strstr(buf, "ga.sigma") && strstr(buf, "es.optimizer") && strstr(buf, "policy.hidden"));
}

TEST(cli_eval_is_seeded_and_thread_independent) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=2"), 0);
    char a[4096], b[4096], c[4096];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s eval %s/run/policy.nevo --episodes 40 --seed 11", test_nevo_bin(), test_tmpdir());
    CHECK_EQ_INT(test_run(a, sizeof a, "%s --threads 1", cmd), 0);
    CHECK_EQ_INT(test_run(b, sizeof b, "%s --threads 2", cmd), 0);
    CHECK_EQ_INT(test_run(c, sizeof c, "%s eval %s/run/checkpoint.bin --episodes 40 --seed 11", test_nevo_bin(), test_tmpdir()), 0);
    CHECK_MSG(strcmp(a, b) == 0, "%s\nvs\n%s", a, b);
    /* the checkpoint's best policy is the policy file's: same returns */
    char *ra = strstr(a, "\"return_mean\""), *rc_ = strstr(c, "\"return_mean\"");
    CHECK(ra && rc_);
    CHECK(strncmp(ra, rc_, 40) == 0);
}

/* ---- bad input found by fuzzing the command and crafting checksum-valid files ---- */

static int path_exists(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", test_tmpdir(), dir, name);
    return exists(path);
}

/* Writes the nevo file `src` (relative to the test directory) to `dst` with its stored
 * config changed (the JSON object `patch`, NULL for none, merged in recursively) and,
 * when off >= 0, the 32-bit little-endian word `off` bytes after the config XORed with
 * `xor` (op 'x') or replaced by it (op 's'). The header's length and the CRC are made
 * valid again: what a crafted file looks like to a reader. */
static void craft(const char *src, const char *dst, const char *patch, long off, char op, uint32_t word) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), src);
    size_t n;
    uint8_t *data = (uint8_t *)test_read_file(path, &n);
    CHECK_MSG(data && n >= 32, "cannot read %s", path);
    const uint8_t *payload = data + 24;
    size_t plen = n - 28;
    uint32_t jlen;
    memcpy(&jlen, payload, 4);
    CHECK(4 + (size_t)jlen <= plen);
    char *json = strndup((const char *)payload + 4, jlen);
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    CHECK_MSG(root, "stored config of %s does not parse: %s", src, je.text);
    if (patch) {
        json_t *p = json_loads(patch, 0, &je);
        CHECK_MSG(p, "bad patch %s: %s", patch, je.text);
        CHECK(json_object_update_recursive(root, p) == 0);
        json_decref(p);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    size_t tlen = strlen(text), rest = plen - 4 - jlen, nplen = 4 + tlen + rest;
    uint8_t *out = malloc(24 + nplen + 4);
    memcpy(out, data, 16); /* magic, version, reserved */
    uint64_t pl = nplen;
    memcpy(out + 16, &pl, 8);
    uint32_t tl = (uint32_t)tlen;
    memcpy(out + 24, &tl, 4);
    memcpy(out + 28, text, tlen);
    memcpy(out + 28 + tlen, payload + 4 + jlen, rest);
    if (off >= 0) {
        CHECK((size_t)off + 4 <= rest);
        uint8_t *w = out + 28 + tlen + off;
        uint32_t v;
        memcpy(&v, w, 4);
        v = op == 'x' ? v ^ word : word;
        memcpy(w, &v, 4);
    }
    uint32_t crc = nevo_crc32(out, 24 + nplen);
    memcpy(out + 24 + nplen, &crc, 4);
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), dst);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f, "cannot create %s", path);
    CHECK(fwrite(out, 1, 24 + nplen + 4, f) == 24 + nplen + 4);
    fclose(f);
    free(out), free(text), free(json), free(data);
    json_decref(root);
}

/* Defect 1: an override whose value is not UTF-8 (`env=` then byte 0xFF) segfaulted,
 * on a fresh run and on --resume. */
TEST(cli_override_not_utf8) {
    write_file("small.json", small_ga);
    expect_bad("train small.json \"$(printf 'env=\\377')\" --out run", "not valid UTF-8", "run");
    CHECK_EQ_INT(train("done", "generations=1"), 0);
    expect_bad("train --resume done \"$(printf 'generations=\\377')\"", "not valid UTF-8", NULL);
    expect_bad("train --resume done \"$(printf 'env=\\303')\"", "not valid UTF-8", NULL);
}

/* Defect 2: a policy file or checkpoint with a valid checksum whose stored config has
 * more conv layers than strides (or kernels) reached network construction with a zero
 * stride: SIGFPE. Loads now check the stored config as a config file is checked. */
TEST(cli_crafted_conv_config_refused) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=1"), 0);
    const char *strides = "{\"env\": \"minatar/breakout\", \"policy\": {\"conv_filters\": [4, 4], \"conv_strides\": [1]}}";
    const char *kernels = "{\"env\": \"minatar/breakout\", \"policy\": {\"conv_filters\": [4, 4], \"conv_kernels\": [3]}}";
    craft("run/policy.nevo", "strides.nevo", strides, -1, 0, 0);
    expect_bad("eval strides.nevo", "policy.conv_strides", NULL);
    expect_bad("eval strides.nevo", "strides.nevo: ", NULL);
    craft("run/policy.nevo", "kernels.nevo", kernels, -1, 0, 0);
    expect_bad("eval kernels.nevo", "policy.conv_kernels", NULL);
    craft("run/checkpoint.bin", "strides.bin", strides, -1, 0, 0);
    expect_bad("eval strides.bin", "policy.conv_strides", NULL);
    craft("run/checkpoint.bin", "kernels.bin", kernels, -1, 0, 0);
    expect_bad("eval kernels.bin", "policy.conv_kernels", NULL);
    /* a value outside its range, which only a crafted file can hold */
    craft("run/policy.nevo", "sigma.nevo", "{\"es\": {\"sigma\": 0.0}}", -1, 0, 0);
    expect_bad("eval sigma.nevo", "es.sigma", NULL);
}

/* Defect 4: policy.nevo was written after the checkpoint of its generation, so a run
 * stopped between the two (killed, out of disk space) resumed as finished and never
 * rewrote it: the old policy stayed while summary.json described the new one. */
TEST(cli_policy_never_lags_the_checkpoint) {
    write_file("small.json", small_ga);
    /* a finished run resumed writes its policy again from the checkpoint */
    CHECK_EQ_INT(train("short", "generations=2"), 0);
    CHECK_EQ_INT(train("run", "generations=3"), 0);
    size_t la, lb;
    char *good = read_in("run", "policy.nevo", &la);
    char *stale = read_in("short", "policy.nevo", &lb);
    CHECK(good && stale && (la != lb || memcmp(good, stale, la) != 0));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp %s/short/policy.nevo %s/run/policy.nevo", test_tmpdir(), test_tmpdir());
    CHECK_EQ_INT(test_run(NULL, 0, "%s", cmd), 0);
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume run --quiet", test_tmpdir(), getenv("PWD"),
                      test_nevo_bin());
    CHECK_MSG(rc == 0, "resume of a finished run exited %d:\n%s", rc, buf);
    char *now = read_in("run", "policy.nevo", &lb);
    CHECK_MSG(now && la == lb && memcmp(good, now, la) == 0, "policy.nevo was not rewritten on resume");
    free(good), free(stale), free(now);

    /* the policy goes first: when its write fails, no checkpoint is ahead of it */
    snprintf(cmd, sizeof cmd, "mkdir -p %s/blocked/policy.nevo/x", test_tmpdir());
    CHECK_EQ_INT(test_run(NULL, 0, "%s", cmd), 0);
    rc = test_run(buf, sizeof buf, "cd %s && %s/%s train small.json --out blocked --quiet", test_tmpdir(), getenv("PWD"),
                  test_nevo_bin());
    CHECK_MSG(rc == 2 && strstr(buf, "policy.nevo"), "exit %d:\n%s", rc, buf);
    CHECK_MSG(!path_exists("blocked", "checkpoint.bin"), "a checkpoint was written although its policy was not");
}

/* Defect 5: two `nevo train` into the same new --out both ran, interleaving metrics,
 * config and checkpoint. The run directory is locked for the whole run, resumed or
 * not; the second gets exit 2 and one line, and writes nothing. */
TEST(cli_run_dir_is_locked) {
    write_file("small.json", small_ga);
    char path[1024];
    snprintf(path, sizeof path, "%s/busy", test_tmpdir());
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/busy/.nevo.lock", test_tmpdir());
    int fd = open(path, O_RDWR | O_CREAT, 0644); /* as a running nevo train holds it */
    CHECK(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    expect_bad("train small.json --out busy", "in use by another nevo train", NULL);
    CHECK(!path_exists("busy", "config.json") && !path_exists("busy", "metrics.jsonl"));
    close(fd);
    CHECK_EQ_INT(train("busy", "generations=1"), 0); /* the lock released, it runs */

    /* resume too; the run's files stay as they were */
    snprintf(path, sizeof path, "%s/busy/.nevo.lock", test_tmpdir());
    fd = open(path, O_RDWR);
    CHECK(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    size_t l1, l2, m1, m2;
    char *before = read_in("busy", "checkpoint.bin", &l1), *mb = read_in("busy", "metrics.jsonl", &m1);
    expect_bad("train --resume busy generations=2", "in use by another nevo train", NULL);
    char *after = read_in("busy", "checkpoint.bin", &l2), *ma = read_in("busy", "metrics.jsonl", &m2);
    CHECK(l1 == l2 && memcmp(before, after, l1) == 0 && m1 == m2 && memcmp(mb, ma, m1) == 0);
    close(fd);
    free(before), free(after), free(mb), free(ma);

    /* two real runs at once: while the first runs (100000 generations; it is killed
     * once its first checkpoint is there), a second one into its directory is refused,
     * fresh or resumed */
    char buf[8192];
    int rc = test_run(buf, sizeof buf,
                      "cd %s && { %s/%s train small.json --out both generations=100000 --quiet >first.log 2>&1 & } && "
                      "for i in $(seq 3000); do [ -e both/checkpoint.bin ] && break; sleep 0.01; done; "
                      "%s/%s train small.json --out both --quiet; echo \"rc=$?\"; "
                      "%s/%s train --resume both --quiet; echo \"rc=$?\"; kill -KILL $(cat both/.nevo.lock)",
                      test_tmpdir(), getenv("PWD"), test_nevo_bin(), getenv("PWD"), test_nevo_bin(), getenv("PWD"),
                      test_nevo_bin());
    const char *second = strstr(buf, "in use by another nevo train (pid ");
    CHECK_MSG(rc == 0 && second && strstr(second, "rc=2") && strstr(strstr(second, "rc=2") + 4, "in use by another") &&
                  strstr(strstr(strstr(second, "rc=2") + 4, "in use by another"), "rc=2"),
              "%d:\n%s", rc, buf);
}

/* Defect 6: es.sigma=0 (or -0, or a subnormal) passed the schema, then produced NaN,
 * exit 1 and files. Zero step sizes are refused before anything is written. */
TEST(cli_zero_step_sizes_refused) {
    write_file("small.json", small_ga);
    expect_bad("train small.json algo=es es.sigma=0 --out run", "es.sigma = 0 is out of range", "run");
    expect_bad("train small.json algo=es es.sigma=-0.0 --out run", "es.sigma", "run");
    expect_bad("train small.json algo=es es.sigma=1e-310 --out run", "es.sigma", "run");
    expect_bad("train small.json algo=es es.lr=0 --out run", "es.lr = 0 is out of range", "run");
    expect_bad("train small.json ga.sigma=0 --out run", "ga.sigma = 0 is out of range", "run");
    expect_bad("train small.json algo=es es.l2=1e-310 --out run", "subnormal", "run");
}

/* Defect 7: `--policy constant:nan` exited 0 with the return keys missing from the
 * JSON. A non-finite constant is bad input; a policy file holding non-finite
 * parameters is a corrupt file. */
TEST(cli_eval_non_finite_refused) {
    const char *specs[] = {"constant:nan", "constant:inf", "constant:-inf", "constant:1e999", "constant:1e39"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "eval --env Pendulum-v1 --policy %s --episodes 2", specs[i]);
        expect_bad(args, "not a finite number", NULL);
    }
    expect_bad("eval --env Pendulum-v1 --policy random --env-option g=nan", "finite number", NULL);
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=1"), 0);
    /* the policy payload after the config: nparams u64, then theta; theta[0] = NaN */
    craft("run/policy.nevo", "nan.nevo", NULL, 8, 's', 0x7FC00000u);
    expect_bad("eval nan.nevo", "parameter 0 is not a finite number", NULL);
}

/* Defect 8: a 1.2 KB checkpoint whose config asks for a huge truncation, or a policy
 * file asking for 65536-wide layers, allocated gigabytes (or aborted). Loads check the
 * parameter count and the memory the config needs first, and a policy file's payload
 * against its network before allocating its parameters. */
TEST(cli_crafted_huge_configs_refused) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=1"), 0);
    setenv("NEVO_MAX_MEMORY_MB", "2048", 1);
    craft("run/checkpoint.bin", "huge.bin", "{\"population\": 10000000, \"ga\": {\"truncation\": 10000000}}", -1, 0, 0);
    expect_bad("eval huge.bin", "GiB", NULL);
    craft("run/checkpoint.bin", "noise.bin", "{\"noise_table_floats\": 268435456}", -1, 0, 0);
    setenv("NEVO_MAX_MEMORY_MB", "512", 1);
    expect_bad("eval noise.bin", "more than the 0.5 GiB limit", NULL);
    setenv("NEVO_MAX_MEMORY_MB", "2048", 1);
    const char *wide = "{\"policy\": {\"hidden\": [65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536]}}";
    craft("run/policy.nevo", "wide.nevo", wide, -1, 0, 0);
    expect_bad("eval wide.nevo", "parameters", NULL);
    craft("run/checkpoint.bin", "wide.bin", wide, -1, 0, 0);
    expect_bad("eval wide.bin", "parameters", NULL);
    craft("run/policy.nevo", "mid.nevo", "{\"policy\": {\"hidden\": [4096, 4096]}}", -1, 0, 0);
    expect_bad("eval mid.nevo", "parameters but its network needs", NULL);
    /* and training refuses such a config before creating anything */
    expect_bad("train small.json population=10000000 ga.truncation=10000000 --out big", "GiB", "big");
    unsetenv("NEVO_MAX_MEMORY_MB");
}

/* Defect 9: a flipped bit in the algorithm's generation counter (checksum recomputed)
 * resumed from generation -2^31. The restored algorithm must agree with the
 * checkpoint's counters, which must be in range. Checkpoint payload after the config:
 * generations u32 @0, frames u64 @4, episodes u64 @12, wall_s @20, best @28, then the
 * algorithm's state, its generation counter first (@36). */
TEST(cli_crafted_counters_refused) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=2"), 0);
    craft("run/checkpoint.bin", "g1.bin", NULL, 36, 'x', 1u); /* the algorithm says 3 generations */
    expect_bad("eval g1.bin", "generations", NULL);
    craft("run/checkpoint.bin", "g31.bin", NULL, 36, 'x', 0x80000000u); /* -2^31 + 2 */
    expect_bad("eval g31.bin", "g31.bin", NULL);
    craft("run/checkpoint.bin", "t31.bin", NULL, 0, 'x', 0x80000000u);
    expect_bad("eval t31.bin", "generations", NULL);
    craft("run/checkpoint.bin", "t0.bin", NULL, 0, 's', 0);
    expect_bad("eval t0.bin", "generations", NULL);
    craft("run/checkpoint.bin", "frames.bin", NULL, 8, 'x', 0x80000000u); /* frames' sign bit */
    expect_bad("eval frames.bin", "counters", NULL);
    craft("run/checkpoint.bin", "wall.bin", NULL, 24, 's', 0x7FF80000u); /* wall_s NaN */
    expect_bad("eval wall.bin", "wall time", NULL);
    /* resumed: refused before anything in the run is written */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/cut", test_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    craft("run/checkpoint.bin", "cut/checkpoint.bin", NULL, 36, 'x', 1u);
    expect_bad("train --resume cut generations=4", "cut/checkpoint.bin", NULL);
    CHECK(!path_exists("cut", "config.json") && !path_exists("cut", "metrics.jsonl"));
}

/* Defect 10: a newline (or other control byte) in a key, an env name, an option or a
 * path made a message of two lines. Every message escapes them as \xNN. */
TEST(cli_messages_stay_one_line) {
    write_file("small.json", small_ga);
    expect_bad("train small.json \"$(printf 'gen\\nerations=3')\" --out run", "gen\\x0Aerations", "run");
    write_file("nl.json", "{\"env\": \"Cart\\nPole\"}");
    expect_bad("train nl.json --out run", "Cart\\x0APole", "run");
    expect_bad("train small.json \"$(printf 'env_options.a\\tb=1')\" --out run", "a\\x09b", "run");
    expect_bad("train \"$(printf '%s\\001%s' --bo gus)\"", "--bo\\x01gus", NULL);
    expect_bad("train small.json extra \"$(printf 'x\\ry')\"", "unexpected argument", NULL);
    expect_bad("eval \"$(printf 'no\\nfile.nevo')\"", "no\\x0Afile.nevo", NULL);
    expect_bad("eval --env \"$(printf 'Cart\\nPole')\" --policy random", "Cart\\x0APole", NULL);
    expect_bad("eval --env CartPole-v1 --policy \"$(printf 'rand\\nom')\"", "rand\\x0Aom", NULL);
    expect_bad("train \"$(printf 'miss\\ning.json')\" --out run", "miss\\x0Aing.json", "run");
}

/* Every kill left a *.tmp.PID file (MBs for a checkpoint) that nothing removed. A run
 * removes those of writers that are gone when it starts or resumes. */
TEST(cli_resume_removes_stale_temps) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=2"), 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) _exit(0);
    CHECK(waitpid(child, NULL, 0) == child); /* a PID that names no process any more */
    char stale[3][1024], live[1024];
    const char *names[3] = {"checkpoint.bin", "summary.json", "metrics.jsonl"};
    for (int i = 0; i < 3; i++) {
        snprintf(stale[i], sizeof stale[i], "%s/run/%s.tmp.%d", test_tmpdir(), names[i], (int)child);
        FILE *f = fopen(stale[i], "wb");
        CHECK(f);
        for (int k = 0; k < 1000; k++) fputs("a partial write of a killed run ", f);
        fclose(f);
    }
    snprintf(live, sizeof live, "%s/run/policy.nevo.tmp.%d", test_tmpdir(), (int)getpid());
    write_file("run/policy.nevo.tmp.keep", "");
    FILE *f = fopen(live, "wb"); /* this process is alive: not stale */
    CHECK(f);
    fclose(f);
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume run generations=3 --quiet", test_tmpdir(),
                      getenv("PWD"), test_nevo_bin());
    CHECK_MSG(rc == 0, "%s", buf);
    for (int i = 0; i < 3; i++) CHECK_MSG(!exists(stale[i]), "%s is still there", stale[i]);
    CHECK(exists(live));
    CHECK(path_exists("run", "policy.nevo.tmp.keep"));
}

/* A FIFO where a config or a policy file should be hung the process waiting for a
 * writer; text after a NUL byte in a config was never parsed (an unknown key behind it
 * went unseen). */
TEST(cli_refuses_fifo_and_nul_in_config) {
    char path[1024];
    snprintf(path, sizeof path, "%s/pipe.json", test_tmpdir());
    CHECK(mkfifo(path, 0644) == 0);
    expect_bad("train pipe.json --out run", "pipe.json: not a regular file", "run");
    expect_bad("eval pipe.json", "pipe.json: not a regular file", NULL);
    snprintf(path, sizeof path, "%s/nul.json", test_tmpdir());
    static const char text[] = "{\"env\": \"CartPole-v1\"}\0{\"bogus\": 1}";
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK(fwrite(text, 1, sizeof text - 1, f) == sizeof text - 1);
    fclose(f);
    expect_bad("train nul.json --out run", "nul.json: a NUL byte at offset 22", "run");
}

/* A killed run may leave metrics lines its checkpoint does not hold, or damaged ones:
 * resume keeps the lines of the checkpoint's generations only, so the file ends
 * as an uninterrupted run's does. */
TEST(cli_resume_drops_metrics_past_the_checkpoint) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("full", "generations=3"), 0);
    CHECK_EQ_INT(train("part", "generations=2"), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/part/metrics.jsonl", test_tmpdir());
    FILE *f = fopen(path, "ab");
    CHECK(f);
    /* the last: a number-less line at the very end, where sscanf read on past the
     * buffer (it has no NUL) */
    fputs("{\"generation\": 2, \"frames\": 1}\n{\"generation\": 99999999999999999999, \"frames\": 1}\n"
          "{\"generation\": -1}\n{\"generation\": \n",
          f);
    fclose(f);
    char buf[16384];
    int rc = test_run(buf, sizeof buf, "cd %s && %s/%s train --resume part generations=3 --quiet", test_tmpdir(),
                      getenv("PWD"), test_nevo_bin());
    CHECK_MSG(rc == 0, "%s", buf);
    check_same_run("full", "part");
}
