/* `mpirun -np N nevo train` end to end (Open MPI, --oversubscribe): GA, ES, NSRA-ES and SGD runs
 * on 1, 2, 3 and 4 ranks give the one-process run's (no mpirun) metrics, summary and
 * policy bit for bit; a run resumes on another rank count; a rank killed with SIGKILL ends the job
 * within seconds, naming it, and leaves a checkpoint that resumes bit-identically; bad
 * use gets one line and exit 2; and, where the machine lets this process make network
 * namespaces, two ranks talk through a veth pair (a real network stack). The sanitizer
 * builds skip these (Open MPI's own allocations would be reported as leaks); the
 * replica model's reduce is tested in every build by tests/test_replica.c. */
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nevo/comm.h"

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe -q"

static int skipped(void) {
    const char *cflags = getenv("NEVO_TEST_CFLAGS");
    if (cflags && strstr(cflags, "-fsanitize")) {
        printf("     skipped: sanitizer build (the MPI runs are tested in the plain build)\n");
        return 1;
    }
    CHECK_MSG(test_run(NULL, 0, "command -v mpirun") == 0,
              "no mpirun (scripts/install-deps.sh installs Debian's openmpi-bin)");
    return 0;
}

static const char *bin(void) {
    static char path[PATH_MAX];
    CHECK_MSG(realpath(test_nevo_bin(), path) != NULL, "no nevo binary at %s", test_nevo_bin());
    return path;
}

static const char *config(const char *name) {
    static char path[PATH_MAX];
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/../../configs/%s", test_data_dir(), name);
    CHECK_MSG(realpath(rel, path) != NULL, "no config %s", rel);
    return path;
}

/* metrics, summary and policy (and the novelty archive, where the run has one) */
static void same_run(const char *a, const char *b) {
    static const char *const files[] = {"metrics.jsonl", "summary.json", "policy.nevo", "behaviours.json"};
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s/behaviours.json", test_tmpdir(), a);
    test_same_run_files(a, b, files, access(path, F_OK) == 0 ? 4 : 3);
}

static int lines(const char *dir, const char *name) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s/%s", test_tmpdir(), dir, name);
    char *t = test_read_file(path, NULL);
    int n = 0;
    for (char *p = t; p && *p; p++) n += *p == '\n';
    free(t);
    return n;
}

/* nevo train in the test's directory: ranks 0 = one process without mpirun */
static int train(char *out, size_t n, int ranks, int threads, const char *args) {
    if (ranks == 0)
        return test_run(out, n, "cd %s && %s train %s --threads %d --quiet", test_tmpdir(), bin(), args, threads);
    return test_run(out, n, "cd %s && " MPIRUN " -np %d %s train %s --threads %d --quiet", test_tmpdir(), ranks,
                    bin(), args, threads);
}

TEST(mpi_ga_es_and_novelty_match_one_process) {
    if (skipped()) return;
    char out[16384], args[2048];
    const char *runs[3][2] = {
        {"cartpole_ga.json", "population=60 generations=3 eval_episodes=20 ga.truncation=10 ga.validation_candidates=4"},
        {"minatar_breakout_es.json", "population=24 generations=2 eval_episodes=5"},
        {"maze_nsra_es.json", "generations=3 eval_episodes=2"}}; /* the novelty family: archive, behaviours */
    for (int k = 0; k < 3; k++) {
        static const int ranks[] = {0, 1, 2, 3, 4}; /* 0: one process without mpirun */
        for (int i = 0; i < 5; i++) {
            snprintf(args, sizeof args, "%s %s --out r%d_%d", config(runs[k][0]), runs[k][1], k, ranks[i]);
            CHECK_MSG(train(out, sizeof out, ranks[i], ranks[i] ? 1 : 2, args) == 0, "%d ranks: %s", ranks[i], out);
            if (!ranks[i]) continue;
            char a[32], b[32];
            snprintf(a, sizeof a, "r%d_0", k);
            snprintf(b, sizeof b, "r%d_%d", k, ranks[i]);
            same_run(a, b);
            if (ranks[i] == 1) continue; /* one rank exchanges nothing: no comm.jsonl */
            /* comm.jsonl: a line per generation, every rank's figures */
            CHECK_EQ_INT(lines(b, "comm.jsonl"), lines(a, "metrics.jsonl"));
            char path[PATH_MAX + 64], want[64];
            snprintf(path, sizeof path, "%s/%s/comm.jsonl", test_tmpdir(), b);
            char *t = test_read_file(path, NULL);
            snprintf(want, sizeof want, "\"ranks\": %d, \"bytes_sent\": [", ranks[i]);
            CHECK_MSG(t && strstr(t, want), "%s: %s", path, t ? t : "(none)");
            /* every rank on this machine, whose lowest rank is 0 (MPI's shared-memory split) */
            snprintf(want, sizeof want, "\"node\": [0%s]}\n",
                     ranks[i] == 2 ? ", 0" : ranks[i] == 3 ? ", 0, 0" : ", 0, 0, 0");
            CHECK_MSG(t && strstr(t, want), "%s: %s", path, t ? t : "(none)");
            free(t);
        }
    }
}

TEST(mpi_resume_on_another_rank_count) {
    if (skipped()) return;
    char out[16384], args[2048];
    const char *es = config("minatar_breakout_es.json");
    snprintf(args, sizeof args, "%s population=24 generations=2 eval_episodes=5 --out a", es);
    CHECK_MSG(train(out, sizeof out, 2, 1, args) == 0, "%s", out);
    CHECK_MSG(train(out, sizeof out, 3, 1, "--resume a generations=4") == 0, "%s", out);
    snprintf(args, sizeof args, "%s population=24 generations=4 eval_episodes=5 --out b", es);
    CHECK_MSG(train(out, sizeof out, 0, 2, args) == 0, "%s", out);
    same_run("a", "b");
    /* and from a multi-rank checkpoint back to one process */
    CHECK_MSG(train(out, sizeof out, 0, 1, "--resume a generations=5") == 0, "%s", out);
    snprintf(args, sizeof args, "%s population=24 generations=5 eval_episodes=5 --out c", es);
    CHECK_MSG(train(out, sizeof out, 4, 1, args) == 0, "%s", out);
    same_run("a", "c");
}

/* a /proc file whole (their sizes read as 0, so read to the end) */
static char *proc_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    *n = len;
    return buf;
}

/* the PID of rank `rank` of the job writing into dir (its environment and command line) */
static int find_rank(int rank, const char *dir) {
    DIR *d = opendir("/proc");
    CHECK(d != NULL);
    char want[64];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        int pid = atoi(e->d_name);
        if (pid <= 0) continue;
        char path[64];
        size_t n;
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        char *cmd = proc_file(path, &n);
        int ours = 0;
        for (size_t i = 0; cmd && i < n; i += strlen(cmd + i) + 1) ours |= strstr(cmd + i, dir) != NULL;
        if (ours && cmd && strstr(cmd, "nevo")) {
            snprintf(path, sizeof path, "/proc/%d/environ", pid);
            char *env = proc_file(path, &n);
            for (size_t i = 0; env && i < n; i += strlen(env + i) + 1)
                if (strcmp(env + i, want) == 0) found = pid;
            free(env);
        }
        free(cmd);
    }
    closedir(d);
    return found;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

TEST(mpi_killed_rank_ends_the_job_and_the_checkpoint_resumes) {
    if (skipped()) return;
    char out[16384], args[2048], dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/killed", test_tmpdir());
    const char *es = config("minatar_breakout_es.json");
    CHECK(test_run(out, sizeof out,
                   "cd %s && (timeout 300 " MPIRUN " -np 3 %s train %s population=24 generations=100000 checkpoint_every=1 "
                   "--threads 1 --quiet --out %s > job.out 2> job.err; echo $? > job.rc) > /dev/null 2>&1 &",
                   test_tmpdir(), bin(), es, dir) == 0);
    double t0 = now_s();
    while (lines("killed", "metrics.jsonl") < 3 && now_s() - t0 < 60) usleep(20000);
    CHECK_MSG(lines("killed", "metrics.jsonl") >= 3, "the job wrote no metrics in 60 s");
    int pid = find_rank(1, dir);
    CHECK_MSG(pid > 0, "no process of rank 1");
    CHECK(kill(pid, SIGKILL) == 0);
    double t_kill = now_s();
    char rc_path[PATH_MAX + 16];
    snprintf(rc_path, sizeof rc_path, "%s/job.rc", test_tmpdir());
    while (access(rc_path, F_OK) != 0 && now_s() - t_kill < 30) usleep(10000);
    double took = now_s() - t_kill;
    usleep(100000); /* the rc file's write */
    char *rc = test_read_file(rc_path, NULL), *err = NULL;
    CHECK_MSG(rc != NULL, "the job still ran %.0f s after rank 1 was killed", took);
    CHECK_MSG(atoi(rc) != 0, "the job exited 0 after a rank was killed");
    CHECK_MSG(took < 10.0, "the job took %.1f s to end after rank 1 was killed", took);
    /* mpirun's own report (without -q it names the rank; with -q the exit status says it) */
    snprintf(rc_path, sizeof rc_path, "%s/job.err", test_tmpdir());
    err = test_read_file(rc_path, NULL);
    printf("     the job ended %.2f s after rank 1's SIGKILL, exit %d\n", took, atoi(rc));
    free(rc);
    free(err);
    /* the checkpoint resumes on one process to the run a single process makes */
    int done = lines("killed", "metrics.jsonl");
    snprintf(args, sizeof args, "--resume killed generations=%d", done + 1);
    CHECK_MSG(train(out, sizeof out, 0, 2, args) == 0, "%s", out);
    snprintf(args, sizeof args, "%s population=24 checkpoint_every=1 generations=%d --out straight", es, done + 1);
    CHECK_MSG(train(out, sizeof out, 0, 2, args) == 0, "%s", out);
    same_run("killed", "straight");
}

/* The rank named: plain mpirun (no -q) reports which rank died. */
TEST(mpi_killed_rank_is_named) {
    if (skipped()) return;
    char out[16384];
    CHECK(test_run(out, sizeof out,
                   "cd %s && (timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 %s train %s population=24 "
                   "generations=100000 --threads 1 --quiet --out %s/named > job.out 2> job.err; echo $? > job.rc) "
                   "> /dev/null 2>&1 &", test_tmpdir(), bin(), config("minatar_breakout_es.json"), test_tmpdir()) == 0);
    double t0 = now_s();
    while (lines("named", "metrics.jsonl") < 1 && now_s() - t0 < 60) usleep(20000);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/named", test_tmpdir());
    int pid = find_rank(1, dir);
    CHECK_MSG(pid > 0, "no process of rank 1");
    CHECK(kill(pid, SIGKILL) == 0);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/job.rc", test_tmpdir());
    t0 = now_s();
    while (access(path, F_OK) != 0 && now_s() - t0 < 30) usleep(10000);
    usleep(100000);
    snprintf(path, sizeof path, "%s/job.err", test_tmpdir());
    char *err = test_read_file(path, NULL);
    CHECK_MSG(err && strstr(err, "rank 1") && strstr(err, "signal 9"), "mpirun's report: %s", err ? err : "(none)");
    free(err);
}

/* What each rank of mpi_ranks_know_their_machine_and_devices' job checks: rank r of
 * the 5 on this machine; ranks 0-1 see devices "0,1", rank 2 device "2", ranks 3-4
 * whatever the machine has (no CUDA_VISIBLE_DEVICES), so their device ranks count
 * within those three groups. Outside mpirun it has nothing to check. */
TEST(mpi_probe_of_a_ranks_place) {
    int rank, size;
    if (!nevo_comm_launched(&rank, &size)) {
        printf("     skipped: the ranks' side of mpi_ranks_know_their_machine_and_devices\n");
        return;
    }
    NevoComm *c = NULL;
    NevoError err = {0};
    CHECK_MSG(nevo_comm_mpi(&c, &err) == NEVO_OK, "%s", err.msg);
    rank = nevo_comm_rank(c);
    static const int want_rank[5] = {0, 1, 0, 0, 1}, want_ranks[5] = {2, 2, 1, 2, 2};
    CHECK_EQ_INT(nevo_comm_size(c), 5);
    CHECK_EQ_INT(nevo_comm_node_rank(c), rank);
    CHECK_EQ_INT(nevo_comm_node_size(c), 5);
    CHECK_EQ_INT(nevo_comm_node_first(c), 0);
    CHECK_MSG(nevo_comm_device_rank(c) == want_rank[rank] && nevo_comm_device_ranks(c) == want_ranks[rank],
              "rank %d: device rank %d of %d, expected %d of %d", rank, nevo_comm_device_rank(c),
              nevo_comm_device_ranks(c), want_rank[rank], want_ranks[rank]);
    nevo_comm_free(c);
}

/* Ranks know their place on their machine, and among the ranks that see the same
 * devices: a launcher that gives ranks devices of their own (CUDA_VISIBLE_DEVICES per
 * rank) puts them in groups of their own, so a device backend neither stacks them on
 * one device nor counts them as sharing it. */
TEST(mpi_ranks_know_their_machine_and_devices) {
    if (skipped()) return;
    char out[16384], self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = '\0';
    int rc = test_run(out, sizeof out,
                      "cd %s && env -u CUDA_VISIBLE_DEVICES NEVO_TEST_JOBS=1 " MPIRUN
                      " -np 2 env CUDA_VISIBLE_DEVICES=0,1 %s mpi_probe_of_a_ranks_place"
                      " : -np 1 env CUDA_VISIBLE_DEVICES=2 %s mpi_probe_of_a_ranks_place"
                      " : -np 2 %s mpi_probe_of_a_ranks_place",
                      test_tmpdir(), self, self, self);
    CHECK_MSG(rc == 0, "%s", out);
    /* each rank ran the probe and passed it */
    int passed = 0;
    for (const char *at = out; (at = strstr(at, "1 passed, 0 failed")) != NULL; at++) passed++;
    CHECK_MSG(passed == 5, "%d of 5 ranks passed: %s", passed, out);
}

TEST(mpi_bad_use_is_one_line_and_exit_2) {
    if (skipped()) return;
    char out[16384], args[2048];
    /* more ranks than the population */
    snprintf(args, sizeof args, "%s population=3 ga.truncation=2 ga.validation_candidates=2 --out p",
             config("cartpole_ga.json"));
    CHECK_EQ_INT(train(out, sizeof out, 4, 1, args), 2);
    CHECK_MSG(strstr(out, "nevo: error: 4 ranks exceed the population (3)") != NULL, "%s", out);
    /* a bad key: said once, by rank 0, not by every rank */
    snprintf(args, sizeof args, "%s bogus=1 --out q", config("cartpole_ga.json"));
    CHECK_EQ_INT(train(out, sizeof out, 3, 1, args), 2);
    char *first = strstr(out, "unknown key 'bogus'");
    CHECK_MSG(first && !strstr(first + 1, "unknown key 'bogus'"), "%s", out);
    /* SGD with more ranks than a batch's shards */
    snprintf(args, sizeof args, "%s data.batch=64 data.train_samples=500 data.test_samples=100 --out s",
             config("fashion_mnist_sgd.json"));
    CHECK_EQ_INT(train(out, sizeof out, 3, 1, args), 2);
    CHECK_MSG(strstr(out, "3 ranks exceed the 2 shards") != NULL, "%s", out);
    /* nothing was written for any of them */
    char path[PATH_MAX + 8];
    static const char *const dirs[] = {"p", "q", "s"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", test_tmpdir(), dirs[i]);
        CHECK_MSG(access(path, F_OK) != 0, "%s was created", path);
    }
}

TEST(mpi_sgd_replicas_match_one_process) {
    if (skipped()) return;
    char out[16384], args[2048];
    static const int ranks[] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "%s generations=2 data.batch=100 data.train_samples=1000 data.test_samples=200 "
                 "--out s%d", config("fashion_mnist_sgd.json"), ranks[i]);
        CHECK_MSG(train(out, sizeof out, ranks[i], ranks[i] ? 1 : 2, args) == 0, "%s", out);
    }
    same_run("s0", "s2");
    same_run("s0", "s3");
}

/* Two ranks in two network namespaces joined by a veth pair: Open MPI's TCP transport
 * and PMIx's connections cross a real network stack (checked on the interface's byte
 * counters), and the run is the one-process run. Needs CAP_NET_ADMIN (root, not in
 * an unprivileged container): skipped, saying so, where `ip netns add` is refused. */
TEST(mpi_across_a_veth_pair) {
    if (skipped()) return;
    char out[16384], args[2048], ns[32], va[16], vb[16];
    int id = (int)getpid() % 100000;
    snprintf(ns, sizeof ns, "nevo_t%d", id);
    snprintf(va, sizeof va, "nva%d", id);
    snprintf(vb, sizeof vb, "nvb%d", id);
    if (test_run(out, sizeof out, "command -v ip && ip netns add %s", ns) != 0) {
        printf("     skipped: this machine does not let the test make a network namespace (%s)\n", out);
        return;
    }
    int a = 10 + id % 200, b = id / 200 % 250;
    int rc = test_run(out, sizeof out,
                      "ip link add %s type veth peer name %s && ip addr add 10.%d.%d.1/24 dev %s && ip link set %s up "
                      "&& ip link set %s netns %s && ip netns exec %s ip addr add 10.%d.%d.2/24 dev %s && "
                      "ip netns exec %s ip link set %s up && ip netns exec %s ip link set lo up",
                      va, vb, a, b, va, va, vb, ns, ns, a, b, vb, ns, vb, ns);
    if (rc == 0) {
        char path[128];
        snprintf(path, sizeof path, "/sys/class/net/%s/statistics/tx_bytes", va);
        char *t = test_read_file(path, NULL);
        long long before = t ? atoll(t) : -1;
        free(t);
        const char *es = config("cartpole_es.json");
        rc = test_run(out, sizeof out,
                      "cd %s && PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=10.%d.%d.0/24 "
                      MPIRUN " -x PMIX_MCA_ptl_tcp_remote_connections -x PMIX_MCA_ptl_tcp_if_include "
                      "--mca btl tcp,self --mca btl_tcp_if_include 10.%d.%d.0/24 "
                      "-np 1 %s train %s generations=3 --threads 1 --quiet --out veth : "
                      "-np 1 ip netns exec %s %s train %s generations=3 --threads 1 --quiet --out veth",
                      test_tmpdir(), a, b, a, b, bin(), es, ns, bin(), es);
        t = test_read_file(path, NULL);
        long long after = t ? atoll(t) : -1;
        free(t);
        if (rc == 0) {
            snprintf(args, sizeof args, "%s generations=3 --out one", es);
            CHECK_MSG(train(out, sizeof out, 0, 2, args) == 0, "%s", out);
            same_run("one", "veth");
            printf("     %lld bytes left through the veth pair\n", after - before);
            CHECK_MSG(after - before > 2000, "only %lld bytes crossed the veth pair", after - before);
        }
    }
    test_run(NULL, 0, "ip link del %s 2>/dev/null; ip netns del %s", va, ns);
    CHECK_MSG(rc == 0, "%s", out);
}
