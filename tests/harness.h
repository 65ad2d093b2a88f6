/* A whole test harness in one header.
 *
 *   TEST(cartpole_golden) { CHECK(x == 1); CHECK_NEAR(a, b, 1e-5); }
 *
 * Tests register themselves at load time; tests/main.c runs each one in a child
 * process (a crash is a failure, not the end of the run), several at once, and ends
 * with the line "N passed, N failed". A failed CHECK prints file:line and the values
 * and stops that test. */
#ifndef NEVO_TEST_HARNESS_H
#define NEVO_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*TestFn)(void);
void test_register(const char *name, const char *file, TestFn fn, int alone);
_Noreturn void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Path of the built `nevo` binary, and of the repository's tests/data directory. */
const char *test_nevo_bin(void);
const char *test_data_dir(void);
/* A fresh empty temporary directory for this test (removed after the run). */
const char *test_tmpdir(void);
/* Runs a shell command, returns its exit status (or 128+signal), captures stdout+stderr
 * (truncated to out_size) when out is non-NULL. */
int test_run(char *out, size_t out_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Reads a whole file (NUL-terminated); NULL if unreadable. Caller frees. */
char *test_read_file(const char *path, size_t *len);
/* Fails the test unless run directories a and b (in this test's tmpdir) both hold each
 * of the n files `names` with the same bytes, but for the values of the fields a clock
 * decides ("wall_s", "frames_per_s", "updates_per_s"), which are left out of both: two
 * runs that must be the same bits (threads, resume, ranks). */
void test_same_run_files(const char *a, const char *b, const char *const *names, int n);
/* `nevo train TRAIN_ARGS` on 1 and on 3 threads, and on 2 threads killed after the
 * generation that reaches kill_frames then resumed: the three runs' metrics and policy
 * the same bits (run directories TAG-a, TAG-b, TAG-c in this test's tmpdir). */
void test_runs_same_across_threads_and_resume(const char *train_args, long long kill_frames, const char *tag);

#define TEST_REGISTER(name, alone)                                        \
    static void test_##name(void);                                        \
    __attribute__((constructor)) static void register_##name(void) {      \
        test_register(#name, __FILE__, test_##name, alone);               \
    }                                                                     \
    static void test_##name(void)
#define TEST(name) TEST_REGISTER(name, 0)
/* A test that changes for a while what other tests read (the shared install under
 * test): the runner runs it with no other test at the same time. */
#define TEST_ALONE(name) TEST_REGISTER(name, 1)

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);   \
    } while (0)

#define CHECK_MSG(cond, ...)                                              \
    do {                                                                  \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);          \
    } while (0)

/* an error message holds the text that names the problem */
#define CHECK_CONTAINS(msg, sub) \
    CHECK_MSG(strstr((msg), (sub)) != NULL, "message \"%s\" lacks \"%s\"", (msg), (sub))

#define CHECK_NEAR(a, b, tol)                                                              \
    do {                                                                                   \
        double a_ = (double)(a), b_ = (double)(b), tol_ = (double)(tol);                   \
        if (!(fabs(a_ - b_) <= tol_))                                                      \
            test_fail(__FILE__, __LINE__, "CHECK_NEAR(%s, %s): %.9g vs %.9g (tol %g)", #a, \
                      #b, a_, b_, tol_);                                                   \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                   \
    do {                                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                                  \
        if (a_ != b_)                                                                        \
            test_fail(__FILE__, __LINE__, "CHECK_EQ_INT(%s, %s): %lld vs %lld", #a, #b, a_, \
                      b_);                                                                   \
    } while (0)

#endif
