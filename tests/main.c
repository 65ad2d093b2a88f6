/* Test runner: runs every registered test in its own child process, several at once
 * (NEVO_TEST_JOBS, default the CPUs), optionally only those whose name contains one of
 * argv[1..]; reports them in registration order, each test's output before its line.
 * The last line of output is "N passed, N failed". */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/threads.h"

#define MAX_TESTS 1024

typedef struct Test {
    const char *name, *file;
    TestFn fn;
    int alone; /* TEST_ALONE: no other test runs with it */
} Test;

static Test tests[MAX_TESTS];
static int n_tests;
static char tmpdir[512];

void test_register(const char *name, const char *file, TestFn fn, int alone) {
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        exit(2);
    }
    for (int i = 0; i < n_tests; i++)
        if (strcmp(tests[i].name, name) == 0) { /* its directory and log would be another's */
            fprintf(stderr, "two tests named %s (%s, %s)\n", name, tests[i].file, file);
            exit(2);
        }
    tests[n_tests++] = (Test){name, file, fn, alone};
}

_Noreturn void test_fail(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "    %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

const char *test_nevo_bin(void) {
    const char *b = getenv("NEVO_BIN");
    return b ? b : "build/nevo";
}

const char *test_data_dir(void) {
    const char *d = getenv("NEVO_TEST_DATA");
    return d ? d : "tests/data";
}

const char *test_tmpdir(void) { return tmpdir; }

int test_run(char *out, size_t out_size, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[8400];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t used = 0;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
        if (out && used + 1 < out_size) {
            size_t take = got < out_size - 1 - used ? got : out_size - 1 - used;
            memcpy(out + used, buf, take);
            used += take;
        }
    }
    if (out) out[used] = '\0';
    int status = pclose(p);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)n + 1);
    size_t got = fread(data, 1, (size_t)n, f);
    fclose(f);
    data[got] = '\0';
    if (len) *len = got;
    return data;
}

/* text without `"key": value` (and the ", " after it) for each clock-decided key */
static void drop_clock_fields(char *text) {
    static const char *const keys[] = {"\"wall_s\": ", "\"frames_per_s\": ", "\"updates_per_s\": "};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (char *p = strstr(text, keys[k]); p; p = strstr(p, keys[k])) {
            char *e = p + strlen(keys[k]);
            while (*e == '-' || *e == '.' || *e == '+' || *e == 'e' || (*e >= '0' && *e <= '9')) e++;
            if (e[0] == ',' && e[1] == ' ') e += 2;
            memmove(p, e, strlen(e) + 1);
        }
}

void test_same_run_files(const char *a, const char *b, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        char pa[1024], pb[1024];
        snprintf(pa, sizeof pa, "%s/%s/%s", test_tmpdir(), a, names[i]);
        snprintf(pb, sizeof pb, "%s/%s/%s", test_tmpdir(), b, names[i]);
        size_t la, lb;
        char *x = test_read_file(pa, &la), *y = test_read_file(pb, &lb);
        CHECK_MSG(x && y, "missing %s or %s", pa, pb);
        const char *dot = strrchr(names[i], '.');
        int text = dot && (strcmp(dot, ".json") == 0 || strcmp(dot, ".jsonl") == 0);
        if (text) {
            drop_clock_fields(x), drop_clock_fields(y);
            la = strlen(x), lb = strlen(y);
        }
        CHECK_MSG(la == lb && memcmp(x, y, la) == 0, "%s differs between %s and %s:\n%.2000s\n---\n%.2000s",
                  names[i], a, b, text ? x : "(binary)", text ? y : "(binary)");
        free(x);
        free(y);
    }
}

void test_runs_same_across_threads_and_resume(const char *train_args, long long kill_frames, const char *tag) {
    static const char *const files[] = {"metrics.jsonl", "policy.nevo"};
    char out[8192], cmd[2048], dir[3][64];
    const char *pwd = getenv("PWD");
    for (int j = 0; j < 3; j++) snprintf(dir[j], sizeof dir[j], "%s-%c", tag, 'a' + j);
    for (int j = 0; j < 2; j++) {
        snprintf(cmd, sizeof cmd, "cd %s && %s/%s train %s --threads %d --out %s", test_tmpdir(), pwd, test_nevo_bin(),
                 train_args, j ? 3 : 1, dir[j]);
        CHECK_MSG(test_run(out, sizeof out, "%s", cmd) == 0, "%s", out);
    }
    snprintf(cmd, sizeof cmd, "cd %s && %s/%s train %s --threads 2 --out %s --kill-after-frames %lld", test_tmpdir(),
             pwd, test_nevo_bin(), train_args, dir[2], kill_frames);
    CHECK_EQ_INT(test_run(out, sizeof out, "%s", cmd), 128 + 9);
    CHECK_MSG(test_run(out, sizeof out, "cd %s && %s/%s train --resume %s --threads 2 --quiet", test_tmpdir(), pwd,
                       test_nevo_bin(), dir[2]) == 0,
              "%s", out);
    test_same_run_files(dir[0], dir[1], files, 2);
    test_same_run_files(dir[0], dir[2], files, 2);
}

static int selected(const Test *t, int argc, char **argv) {
    if (argc <= 1) return 1;
    for (int i = 1; i < argc; i++)
        if (strstr(t->name, argv[i]) || strstr(t->file, argv[i])) return 1;
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One test in a child process: its tmpdir made, its stdout and stderr (and those of
 * the commands it runs) in log, line-buffered so a crash keeps what came before. */
static pid_t start_test(const Test *t, const char *log) {
    mkdir(tmpdir, 0700);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL); /* not the runner's handler */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
            perror(log);
            _exit(3);
        }
        close(fd);
        setvbuf(stdout, NULL, _IOLBF, 0);
        t->fn();
        fflush(stdout);
        _exit(0);
    }
    return pid;
}

/* Tests at once: NEVO_TEST_JOBS, else the CPUs this process may run on. Each test is
 * its own process with its own directory, so they only share the cores. */
static int test_jobs(void) {
    const char *e = getenv("NEVO_TEST_JOBS");
    int j = e && *e ? atoi(e) : 0;
    if (j <= 0) j = nevo_cpu_count();
    return j < 1 ? 1 : j > 64 ? 64 : j;
}

typedef struct Run {
    int test; /* index in tests[] */
    pid_t pid;
    int status, done, err; /* err: fork's errno when it could not start */
    double t0, dt;
    char dir[512], log[560];
} Run;

static void remove_dir(const char *dir) {
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

static int passed, failed;
static char failures[8192];

/* A test's output, then its line: ended (ok / FAIL) or, when the runner was stopped
 * (CI's time limit, ^C), STOP with how long it had run. */
static void report(Run *r) {
    const Test *t = &tests[r->test];
    size_t len = 0;
    char *out = test_read_file(r->log, &len);
    if (out) fwrite(out, 1, len, stdout);
    free(out);
    unlink(r->log);
    if (!r->done) {
        printf("STOP %-44s (running %.1fs when the runner got signal %d)\n", t->name, now() - r->t0,
               (int)stop_signal);
        failed++;
    } else if (r->pid > 0 && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) {
        passed++;
        printf("ok   %-44s %7.2fs\n", t->name, r->dt);
    } else {
        failed++;
        if (r->pid < 0)
            printf("FAIL %-44s (could not start: %s)\n", t->name, strerror(r->err));
        else if (WIFSIGNALED(r->status))
            printf("FAIL %-44s (killed by signal %d)\n", t->name, WTERMSIG(r->status));
        else
            printf("FAIL %-44s\n", t->name);
        size_t used = strlen(failures);
        snprintf(failures + used, sizeof failures - used, "  %s (%s)\n", t->name, t->file);
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: waitpid returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    static Run runs[MAX_TESTS];
    int n = 0;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 0; i < n_tests; i++)
        if (selected(&tests[i], argc, argv)) {
            Run *r = &runs[n++];
            r->test = i;
            snprintf(r->dir, sizeof r->dir, "%s/nevo-test-%d-%s", tmp, (int)getpid(), tests[i].name);
            snprintf(r->log, sizeof r->log, "%s/nevo-test-%d-%s.log", tmp, (int)getpid(), tests[i].name);
        }
    /* Up to `jobs` tests run at once (a TEST_ALONE one by itself); each is reported,
     * its output first, in registration order as soon as it and every test before it
     * have ended. */
    int jobs = test_jobs(), started = 0, running = 0, reported = 0, alone = 0;
    while (reported < n && !stop_signal) {
        while (running < jobs && started < n && !(running && (alone || tests[runs[started].test].alone))) {
            Run *r = &runs[started];
            snprintf(tmpdir, sizeof tmpdir, "%s", r->dir);
            r->t0 = now();
            r->pid = start_test(&tests[r->test], r->log);
            if (r->pid < 0 && running) break; /* no process to spare: once one ends */
            started++;
            if (r->pid < 0) {
                r->err = errno, r->done = 1;
                continue;
            }
            alone = tests[r->test].alone;
            running++;
        }
        if (running) {
            int status = 0;
            pid_t pid = waitpid(-1, &status, 0);
            if (pid < 0 && errno == EINTR) continue;
            if (pid < 0) {
                perror("waitpid");
                return 2;
            }
            for (int k = 0; k < started; k++)
                if (runs[k].pid == pid && !runs[k].done) {
                    runs[k].status = status, runs[k].done = 1, runs[k].dt = now() - runs[k].t0;
                    running--;
                    remove_dir(runs[k].dir); /* now: the log waits for the tests before it */
                }
        }
        for (; reported < started && runs[reported].done; reported++) report(&runs[reported]);
    }
    if (stop_signal) { /* what ended, then what was running, stopped */
        for (int k = reported; k < started; k++)
            if (!runs[k].done) {
                kill(runs[k].pid, SIGKILL);
                waitpid(runs[k].pid, NULL, 0);
                remove_dir(runs[k].dir);
            }
        for (int k = reported; k < started; k++)
            if (runs[k].done) report(&runs[k]);
        for (int k = reported; k < started; k++)
            if (!runs[k].done) report(&runs[k]);
        printf("stopped by signal %d: %d passed, %d failed\n", (int)stop_signal, passed, failed);
        return 128 + (int)stop_signal;
    }
    if (failed) printf("failed tests:\n%s", failures);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
