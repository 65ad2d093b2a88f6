/* `nevo bench`: measures this machine's limits and nevo's hot paths (src/bench/) and
 * prints them as a table, or as one JSON object per line with --json. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli.h"

static const char *help =
    "usage: nevo bench [--json] [--quick] [--only NAME[,NAME...]] [--threads N]\n"
    "\n"
    "Measures, in this process:\n"
    "  peak     FP32 FMA rate of a register-resident loop (every SIMD width the CPU has),\n"
    "           one core and all cores\n"
    "  memory   read-only sum and triad bandwidth over arrays far larger than the caches\n"
    "  envs     raw steps/s of every registered environment on one core (no policy)\n"
    "  forward  nevo_policy_forward on populations of different MLPs and of the MinAtar\n"
    "           conv net (on real MinAtar observations, 1, 16 and 64 rows per network,\n"
    "           and one network a row a call over an episode, as a training worker\n"
    "           runs it; FLOPs counted dense, and again counting only the FMAs the\n"
    "           kernels compute, since zero inputs are skipped): GFLOP/s against the\n"
    "           FMA peak, weight bytes/s against the read bandwidth over the weights\n"
    "           and, at B rows, against a bare loop that streams them with B FMAs per\n"
    "           weight (what memory and FMAs allow together)\n"
    "  backward nevo_policy_backward against nevo_policy_forward on 64 rows of one\n"
    "           network (the MinAtar net, a 64-64 MLP), whole and layer by layer: GFLOP/s\n"
    "           against the FMA peak and the backward's against the forward's\n"
    "  ga       Deep GA frames/s on CartPole-v1, and GA and ES on MinAtar Breakout with the\n"
    "           MinAtar network, at 1 and all threads: scaling efficiency, and the share\n"
    "           of threads x wall time in batched inference and env steps, and with\n"
    "           the networks the evaluator builds as their episodes start added (the\n"
    "           rest: queue handling, waiting, selection, updates)\n"
    "  novelty  k-NN novelty (k = 10) of 1000 queries against archives of 1e4 and 1e5\n"
    "  mujoco   every MuJoCo env: nevo_env_step with random controls against a bare\n"
    "           mj_step loop replaying the same episodes on the same model (the env\n"
    "           layer's overhead; steps counted, resets in both, their cost in --json),\n"
    "           and the env loop on 2 threads against 1\n"
    "  gpu      the CUDA device's FP32 FMA peak and copy bandwidth, measured here, and the\n"
    "           cuda backend's forward of the MinAtar net (P = 1024, B = 1, 16, 64) and a\n"
    "           348-256-256-17 MLP (P = 4096, B = 1) against them: the kernels alone and\n"
    "           the whole call (a `make CUDA=1` build on a machine with a GPU; else skipped)\n"
    "  actor    algo vtrace on MinAtar Breakout (MinAtar net, 32 envs, unrolls of 20): the\n"
    "           actor-learner runtime alone (learner off), async and sync end to end against\n"
    "           it (and algo r2d2's, its net with an LSTM), and the learner's samples/s on\n"
    "           one thread\n"
    "\n"
    "Each number is the best of several repetitions of at least 0.2 s after warm-up (the\n"
    "median is in --json, and for each population forward case the fastest single\n"
    "call: on a shared machine, steadier than a repetition where calls are short).\n"
    "Columns: achieved, its unit, the limit it is compared with (same unit),\n"
    "achieved/limit, and what the limit is. [cpu X] marks a number whose threads got\n"
    "only X of their cores' time (other programs ran): it is a floor. The whole run\n"
    "takes about two minutes on 2 cores (the mujoco group about one).\n"
    "\n"
    "options:\n"
    "  --json         one JSON object per line: first the machine, then one per number\n"
    "  --quick        small problems and short runs (a smoke test; numbers are rough)\n"
    "  --only LIST    only these groups (comma-separated names from above); forward\n"
    "                 and backward measure the FMA peak too, for their ratios, without\n"
    "                 printing it\n"
    "  --threads N    threads for the all-core numbers (default: the CPUs this process\n"
    "                 may run on, which taskset narrows)\n"
    "\n"
    "docs/BENCHMARKS.md explains each number and records results.\n";

typedef struct Out {
    int json;
    const char *last_group;
} Out;

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static void json_number(double v) {
    if (isfinite(v)) printf("%.6g", v);
    else printf("null");
}

static void emit(void *vctx, const NevoBenchResult *r) {
    Out *o = vctx;
    if (o->json) {
        printf("{\"group\": ");
        json_string(r->group);
        printf(", \"name\": ");
        json_string(r->name);
        printf(", \"value\": ");
        json_number(r->value);
        printf(", \"median\": ");
        json_number(r->median);
        printf(", \"unit\": ");
        json_string(r->unit);
        printf(", \"limit\": ");
        json_number(r->limit);
        printf(", \"limit_name\": ");
        if (isfinite(r->limit)) json_string(r->limit_name);
        else printf("null");
        printf(", \"ratio\": ");
        json_number(r->ratio);
        printf(", \"cpu_share\": ");
        json_number(r->cpu_share);
        if (r->extra[0]) printf(", %s", r->extra);
        printf("}\n");
    } else {
        if (o->last_group && strcmp(o->last_group, r->group) != 0) putchar('\n');
        char limit[32], ratio[32];
        if (isfinite(r->limit)) snprintf(limit, sizeof limit, "%.4g", r->limit);
        else snprintf(limit, sizeof limit, "-");
        if (isfinite(r->ratio)) snprintf(ratio, sizeof ratio, "%.3f", r->ratio);
        else snprintf(ratio, sizeof ratio, "-");
        /* a measurement that did not get its cores to itself is flagged */
        char flag[32] = "";
        if (isfinite(r->cpu_share) && r->cpu_share < 0.9) snprintf(flag, sizeof flag, " [cpu %.2f]", r->cpu_share);
        printf("%-8s %-60s %10.4g %-10s %10s %7s  %s%s\n", r->group, r->name, r->value, r->unit, limit, ratio,
               isfinite(r->limit) ? r->limit_name : "", flag);
    }
    o->last_group = r->group;
    fflush(stdout);
}

static unsigned parse_groups(const char *list, int *ok) {
    unsigned groups = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *ok = 1;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned bit = nevo_bench_group_bit(tok);
        if (!bit) {
            *ok = 0;
            return 0;
        }
        groups |= bit;
    }
    if (!groups) *ok = 0;
    return groups;
}

int nevo_cmd_bench(int argc, char **argv) {
    int json = 0, quick = 0;
    long long threads = 0;
    unsigned groups = NEVO_BENCH_ALL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (cli_option(argc, argv, &i, "--only", &v)) {
            int ok;
            if (!v) return cli_usage_error("bench", "--only needs a list of groups");
            groups = parse_groups(v, &ok);
            if (!ok)
                return cli_usage_error("bench", "--only '%s': expected names from peak, memory, envs, forward, backward, ga, mujoco, novelty, gpu, actor",
                                       cli_esc(v));
        } else if (cli_option(argc, argv, &i, "--threads", &v)) {
            if (cli_parse_int(v, 1, 4096, &threads))
                return cli_usage_error("bench", "--threads needs a whole number from 1 to 4096");
        } else {
            return cli_usage_error("bench", "unknown option '%s'", cli_esc(argv[i]));
        }
    }
    NevoBenchOptions opts;
    nevo_bench_options_default(&opts, quick);
    if (threads > 0) opts.threads = (int)threads;
    NevoBenchMachine m;
    nevo_bench_machine(&m);
    if (json) {
        printf("{\"group\": \"machine\", \"name\": \"machine\", \"cpu_model\": ");
        json_string(m.model);
        printf(", \"cpus\": %d, \"isa\": \"%s\", \"l1d_bytes\": %ld, \"l2_bytes\": %ld, \"l3_bytes\": %ld, "
               "\"kernels\": \"%s\", \"quick\": %s, \"reps\": %d, \"min_time_s\": %g, \"statistic\": \"best\"}\n",
               m.cpus, nevo_bench_isa_name(m.isa), m.l1d, m.l2, m.l3, nevo_bench_kernels_name(),
               quick ? "true" : "false", opts.reps, opts.min_time_s);
    } else {
        printf("nevo bench: %s, %d CPUs, widest SIMD %s; L1d %ld KiB, L2 %ld KiB, L3 %ld MiB (as reported); "
               "nevo kernels: %s\n",
               m.model, m.cpus, nevo_bench_isa_name(m.isa), m.l1d >> 10, m.l2 >> 10, m.l3 >> 20,
               nevo_bench_kernels_name());
        printf("best of %d repetitions of >= %g s each after warm-up%s\n\n", opts.reps, opts.min_time_s,
               quick ? " (--quick: rough numbers; each training row from one run)" : "");
        printf("%-8s %-60s %10s %-10s %10s %7s  %s\n", "group", "name", "achieved", "unit", "limit", "ratio",
               "limit is");
    }
    fflush(stdout);
    Out out = {json, NULL};
    NevoError err = {0};
    NevoStatus st = nevo_bench_run(&opts, groups, emit, &out, &err);
    if (st != NEVO_OK) return cli_fail(&err);
    return 0;
}
