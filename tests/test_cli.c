/* The `nevo` command end to end: bad input of every class (exit 2, one clear line,
 * nothing written), kill-and-resume bit-identity, thread-count independence, eval and
 * envs output. Runs the built binary (NEVO_BIN, default build/nevo). */
#include <string.h>
#include <sys/stat.h>

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
    expect_bad("train ok.json algo=sgd --out run", "not one of", "run");
    expect_bad("train ok.json policy.hidden=[64,-1] --out run", "policy.hidden[1]", "run");
    expect_bad("train ok.json es.obs_norm_prob=2 --out run", "es.obs_norm_prob", "run");
    expect_bad("train ok.json population=10 ga.truncation=20 --out run", "truncation", "run");
    expect_bad("train ok.json algo=es population=11 --out run", "even", "run");
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

/* metrics.jsonl without the wall-clock field, which legitimately differs. */
static void strip_wall(char *s) {
    char *p;
    while ((p = strstr(s, "\"wall_s\": ")) != NULL) {
        char *end = strchr(p, ',');
        memmove(p, end + 2, strlen(end + 2) + 1);
    }
}

static void check_same_run(const char *a, const char *b) {
    size_t la, lb;
    char *pa = read_in(a, "policy.nevo", &la), *pb = read_in(b, "policy.nevo", &lb);
    CHECK_MSG(pa && pb, "missing policy.nevo in %s or %s", a, b);
    CHECK_MSG(la == lb && memcmp(pa, pb, la) == 0, "policy.nevo differs between %s and %s", a, b);
    char *ma = read_in(a, "metrics.jsonl", NULL), *mb = read_in(b, "metrics.jsonl", NULL);
    strip_wall(ma);
    strip_wall(mb);
    CHECK_MSG(strcmp(ma, mb) == 0, "metrics differ:\n%s\nvs\n%s", ma, mb);
    char *sa = read_in(a, "summary.json", NULL), *sb = read_in(b, "summary.json", NULL);
    strip_wall(sa);
    strip_wall(sb);
    CHECK_MSG(strcmp(sa, sb) == 0, "summaries differ:\n%s\nvs\n%s", sa, sb);
    free(pa), free(pb), free(ma), free(mb), free(sa), free(sb);
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
TEST(cli_kill_and_resume_es) {
    kill_and_resume("algo=es es.obs_norm=true es.obs_norm_prob=0.2 es.center_episodes=3", 4);
}

TEST(cli_resume_refuses_changed_config_and_corrupt_checkpoint) {
    write_file("small.json", small_ga);
    CHECK_EQ_INT(train("run", "generations=2"), 0);
    expect_bad("train --resume run ga.sigma=0.5", "only generations and threads may change", NULL);
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
