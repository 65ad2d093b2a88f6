/* `nevo train`: runs or resumes a training run, with a live progress line on a
 * terminal and plain lines otherwise; the last line of stdout is a JSON summary. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "nevo/config.h"
#include "nevo/checkpoint.h"
#include "nevo/comm.h"
#include "nevo/threads.h"
#include "nevo/train.h"

static const char *help =
    "usage: nevo train CONFIG [key=value ...] [--out DIR] [--threads N] [--backend B] [--quiet]\n"
    "       nevo train [CONFIG] --resume DIR [generations=N] [max_frames=N] [max_wall_s=S] [--threads N]\n"
    "                  [--backend B]\n"
    "\n"
    "Trains a population on the config's environment and writes the run directory:\n"
    "  config.json    the resolved config (every key)\n"
    "  metrics.jsonl  one JSON object per generation\n"
    "  checkpoint.bin the latest checkpoint (--resume continues from it, bit-identically)\n"
    "  policy.nevo    the best policy so far (`nevo eval DIR/policy.nevo`)\n"
    "  summary.json   the final summary, also printed as the last line of stdout\n"
    "\n"
    "options:\n"
    "  --out DIR      run directory (default runs/<config name>, never an existing run)\n"
    "  --resume DIR   continue the run in DIR; only generations, max_frames, max_wall_s, threads\n"
    "                 and backend may change (a run's wall_s, and so max_wall_s, counts every part)\n"
    "  --threads N    worker threads (default: the config's `threads`, 0 = every CPU this\n"
    "                 process may run on); results do not depend on it\n"
    "  --backend B    cpu or cuda (the config's `backend`); results do not depend on it\n"
    "  --quiet        no progress output\n"
    "\n"
    "Across MPI ranks: `mpirun -np N nevo train CONFIG ...` (Open MPI) gives each rank a share of\n"
    "every generation's tasks (threads per rank: the node's CPUs / its ranks, unless --threads);\n"
    "the run is bit-identical to one process for any N, resumes on any N, and rank 0 writes the\n"
    "run directory, with comm.jsonl (bytes, communication and evaluation seconds per rank).\n";

typedef struct Progress {
    int tty, quiet;
    long long kill_after_frames; /* testing aid: SIGKILL itself mid-generation */
    long long frames_before;     /* total frames at the start of the current generation */
    double t0;
    int generations;
    long long max_frames; /* the frame budget, 0 = none */
    double max_wall_s;    /* the wall-time budget, 0 = none */
    int on_data;          /* a run on a dataset: its frames are samples */
    NevoGenStats last;
    int have_last;
    atomic_llong gen_frames;
    atomic_long last_draw_ms;
    pthread_mutex_t mu;
} Progress;

/* s as a JSON string (malloc'ed, with its quotes); a path that is not UTF-8 is given
 * escaped as \xNN (nevo_escape) rather than dropped. */
static char *json_string_text(const char *s) {
    char escaped[4096];
    json_t *j = json_string(s);
    if (!j) j = json_string(nevo_escape(escaped, sizeof escaped, s));
    char *text = json_dumps(j, JSON_ENCODE_ANY);
    json_decref(j);
    return text;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fmt_time(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

/* Human-readable frame counts: 950, 12.3k, 4.5M. */
static void fmt_count(double x, char *buf, size_t n) {
    if (x >= 1e9) snprintf(buf, n, "%.3gG", x / 1e9);
    else if (x >= 1e6) snprintf(buf, n, "%.3gM", x / 1e6);
    else if (x >= 1e3) snprintf(buf, n, "%.3gk", x / 1e3);
    else snprintf(buf, n, "%.0f", x);
}

static void draw(Progress *p, int gen_done, long long frames, int final_line) {
    double el = now_s() - p->t0;
    char elapsed[32], eta[32], budget[64] = "";
    fmt_time(el, elapsed, sizeof elapsed);
    /* the run ends at whichever comes first: its generations or its frame budget */
    double left = gen_done > 0 ? el / gen_done * (p->generations - gen_done) : NAN;
    if (p->max_frames > 0 && frames > 0) {
        double by_frames = el / (double)frames * (double)(p->max_frames - frames);
        if (!(left <= by_frames)) left = by_frames > 0 ? by_frames : 0;
        char done_s[16], total_s[16];
        fmt_count((double)frames, done_s, sizeof done_s);
        fmt_count((double)p->max_frames, total_s, sizeof total_s);
        snprintf(budget, sizeof budget, " | %s/%s frames", done_s, total_s);
    }
    if (p->max_wall_s > 0 && !(left <= p->max_wall_s - el)) left = p->max_wall_s > el ? p->max_wall_s - el : 0;
    fmt_time(left, eta, sizeof eta);
    double fps = el > 0 ? (double)frames / el : 0.0;
    char fit[96] = "", gens[48];
    if (p->have_last && p->last.on_data)
        snprintf(fit, sizeof fit, " | train loss %.4f | test loss %.4f | test accuracy %.4f",
                 p->last.data.train_loss, p->last.data.test_loss, p->last.data.test_accuracy);
    else if (p->have_last)
        snprintf(fit, sizeof fit, " | best %.4g | mean %.4g | elite %.4g", p->last.best, p->last.mean,
                 p->last.elite_mean);
    if (p->max_frames > 0) snprintf(gens, sizeof gens, "gen %d", gen_done);
    else snprintf(gens, sizeof gens, "gen %d/%d", gen_done, p->generations);
    char rate[16];
    fmt_count(fps, rate, sizeof rate);
    fprintf(stderr, "%s%s%s | %s %s/s%s | %s elapsed | ETA %s%s", p->tty ? "\r\033[K" : "", gens, budget,
            rate, p->on_data ? "samples" : "frames", fit, elapsed, eta, p->tty && !final_line ? "" : "\n");
    fflush(stderr);
}

static void on_backend(void *ctx, const char *where) {
    const Progress *p = ctx;
    if (!p->quiet) fprintf(stderr, "nevo: networks on %s\n", where);
}

static void on_frames(void *ctx, long long frames) {
    Progress *p = ctx;
    atomic_store(&p->gen_frames, frames);
    if (p->kill_after_frames > 0 && p->frames_before + frames >= p->kill_after_frames) raise(SIGKILL);
    if (!p->tty || p->quiet) return;
    long ms = (long)(now_s() * 1000.0);
    long last = atomic_load(&p->last_draw_ms);
    if (ms - last < 250 || !atomic_compare_exchange_strong(&p->last_draw_ms, &last, ms)) return;
    if (pthread_mutex_trylock(&p->mu) != 0) return;
    int done = p->have_last ? p->last.generation + 1 : 0;
    draw(p, done, p->frames_before + frames, 0);
    pthread_mutex_unlock(&p->mu);
}

static void on_start(void *ctx, const NevoConfig *cfg, const NevoRunTotals *resumed) {
    Progress *p = ctx;
    p->generations = cfg->generations;
    p->max_frames = cfg->max_frames;
    p->max_wall_s = cfg->max_wall_s;
    p->on_data = cfg->dataset[0] != 0;
    p->t0 = now_s() - (resumed ? resumed->wall_s : 0.0);
    p->frames_before = resumed ? resumed->frames : 0;
    char wall[64] = "", t[32];
    if (cfg->max_wall_s > 0) {
        fmt_time(cfg->max_wall_s, t, sizeof t);
        snprintf(wall, sizeof wall, ", for at most %s of wall time", t);
    }
    int learner = (nevo_algo_find(cfg->algo)->flags & NEVO_ALGO_GRADIENT) != 0;
    char until[64] = "";
    if (cfg->max_frames > 0) snprintf(until, sizeof until, ", until %lld frames", cfg->max_frames);
    if (!p->quiet && learner && !cfg->dataset[0]) /* an actor-learner */
        fprintf(stderr, "nevo: %s %s on %s, %d envs, %d generations of %d learner steps%s%s\n",
                resumed ? "resuming" : "training", cfg->algo, cfg->env, cfg->rl.envs, cfg->generations,
                cfg->rl.steps_per_generation, until, wall);
    else if (!p->quiet && cfg->max_frames > 0)
        fprintf(stderr, "nevo: %s %s on %s, population %d, until %lld frames (at most %d generations)%s\n",
                resumed ? "resuming" : "training", cfg->algo, cfg->dataset[0] ? cfg->dataset : cfg->env,
                cfg->population, cfg->max_frames, cfg->generations, wall);
    else if (!p->quiet && learner)
        fprintf(stderr, "nevo: %s %s on %s, batch %d, %d epochs%s\n", resumed ? "resuming" : "training", cfg->algo,
                cfg->dataset, cfg->data.batch, cfg->generations, wall);
    else if (!p->quiet)
        fprintf(stderr, "nevo: %s %s on %s, population %d, %d generations%s\n",
                resumed ? "resuming" : "training", cfg->algo, cfg->dataset[0] ? cfg->dataset : cfg->env,
                cfg->population, cfg->generations, wall);
}

static void on_generation(void *ctx, const NevoGenStats *g, const NevoRunTotals *t, const NevoConfig *cfg) {
    Progress *p = ctx;
    /* algorithms that report no frames mid-generation (the learners) die at its end */
    if (p->kill_after_frames > 0 && t->frames >= p->kill_after_frames) raise(SIGKILL);
    pthread_mutex_lock(&p->mu);
    p->last = *g;
    p->have_last = 1;
    p->frames_before = t->frames;
    atomic_store(&p->gen_frames, 0);
    int last = t->generations == cfg->generations || (cfg->max_frames > 0 && t->frames >= cfg->max_frames) ||
               (cfg->max_wall_s > 0 && t->wall_s >= cfg->max_wall_s);
    if (!p->quiet) draw(p, t->generations, t->frames, last);
    pthread_mutex_unlock(&p->mu);
}

/* First key whose value differs between two resolved configs, ignoring keys that may
 * change on resume; NULL if none. */
static int configs_match(const NevoConfig *a, const NevoConfig *b) {
    NevoConfig x = *a, y = *b;
    x.generations = y.generations = 0;
    x.max_frames = y.max_frames = 0;
    x.max_wall_s = y.max_wall_s = 0;
    x.threads = y.threads = 0;
    memset(x.backend, 0, sizeof x.backend);
    memset(y.backend, 0, sizeof y.backend);
    char *ja = nevo_config_to_json(&x), *jb = nevo_config_to_json(&y);
    int same = strcmp(ja, jb) == 0;
    free(ja);
    free(jb);
    return same;
}

static void default_out_dir(const char *config_path, char *out, size_t n) {
    const char *base = strrchr(config_path, '/');
    base = base ? base + 1 : config_path;
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    char *dot = strrchr(name, '.');
    if (dot && dot != name) *dot = '\0';
    snprintf(out, n, "runs/%s", name);
    struct stat st;
    for (int k = 2; stat(out, &st) == 0 && k < 100000; k++) snprintf(out, n, "runs/%s-%d", name, k);
}

/* The run's config (the file, the overrides, and on resume the checkpoint's, checked
 * against each other) and its directory (--out, --resume's, or the next free
 * runs/NAME); 0, or the exit status after printing the error. */
static int resolve_config(const char *config_path, const char *resume_dir, const char *out_dir,
                          const char *const *overrides, int n_over, NevoConfig *cfg_out, char *dir, size_t dir_size) {
    NevoError err = {0};
    NevoConfig cfg;
    if (resume_dir) {
        char ckpt[4096];
        snprintf(ckpt, sizeof ckpt, "%s/checkpoint.bin", resume_dir);
        NevoRunTotals totals;
        uint8_t *state;
        size_t len;
        NevoConfig stored;
        if (nevo_checkpoint_read(ckpt, &stored, &totals, &state, &len, &err)) return cli_fail(&err);
        free(state);
        if (config_path) {
            if (nevo_config_load(&cfg, config_path, &err)) return cli_fail(&err);
        } else {
            cfg = stored;
        }
        for (int i = 0; i < n_over; i++)
            if (nevo_config_override(&cfg, overrides[i], &err)) return cli_fail(&err);
        if (!configs_match(&cfg, &stored)) {
            nevo_error(&err, NEVO_ERR_INVALID,
                       "the config differs from the one %s was started with; on resume only "
                       "generations, max_frames, max_wall_s, threads and backend may change",
                       resume_dir);
            return cli_fail(&err);
        }
        if (cfg.generations < totals.generations) {
            nevo_error(&err, NEVO_ERR_INVALID, "%s has already run %d generations; generations=%d is fewer",
                       resume_dir, totals.generations, cfg.generations);
            return cli_fail(&err);
        }
        out_dir = resume_dir;
    } else {
        if (nevo_config_load(&cfg, config_path, &err)) return cli_fail(&err);
        for (int i = 0; i < n_over; i++)
            if (nevo_config_override(&cfg, overrides[i], &err)) return cli_fail(&err);
    }
    if (out_dir)
        snprintf(dir, dir_size, "%s", out_dir);
    else
        default_out_dir(config_path, dir, dir_size);
    *cfg_out = cfg;
    return 0;

}

static int train_main(int argc, char **argv, NevoComm *comm) {
    const char *config_path = NULL, *out_dir = NULL, *resume_dir = NULL;
    const char *overrides[256];
    int n_over = 0;
    long long threads = 0, kill_after = 0;
    int quiet = 0;
    char backend_over[64];
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            printf("\nalgorithms (algo; the config sections each reads):\n");
            for (int k = 0; k < nevo_algo_count(); k++) {
                const NevoAlgoInfo *a = nevo_algo_info(k);
                printf("  %-9s %-6s %s\n", a->name, a->sections, a->summary);
            }
            printf("\nconfig keys (JSON file, or key=value on the command line; dotted keys for nested):\n");
            nevo_config_print_schema(stdout);
            return 0;
        } else if (cli_option(argc, argv, &i, "--out", &v)) {
            if (!v) return cli_usage_error("train", "--out needs a directory");
            out_dir = v;
        } else if (cli_option(argc, argv, &i, "--resume", &v)) {
            if (!v) return cli_usage_error("train", "--resume needs a run directory");
            resume_dir = v;
        } else if (cli_option(argc, argv, &i, "--threads", &v)) {
            if (cli_parse_int(v, 1, 4096, &threads))
                return cli_usage_error("train", "--threads needs a whole number from 1 to 4096");
        } else if (cli_option(argc, argv, &i, "--backend", &v)) {
            if (!v) return cli_usage_error("train", "--backend needs a name (cpu or cuda)");
            if (n_over == 256) return cli_usage_error("train", "too many overrides");
            snprintf(backend_over, sizeof backend_over, "backend=%s", v);
            overrides[n_over++] = backend_over;
        } else if (cli_option(argc, argv, &i, "--kill-after-frames", &v)) {
            if (cli_parse_int(v, 1, (long long)1 << 62, &kill_after))
                return cli_usage_error("train", "--kill-after-frames needs a positive number");
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("train", "unknown option '%s'", cli_esc(argv[i]));
        } else if (strchr(argv[i], '=')) {
            if (n_over == 256) return cli_usage_error("train", "too many overrides");
            overrides[n_over++] = argv[i];
        } else if (!config_path) {
            config_path = argv[i];
        } else {
            return cli_usage_error("train", "unexpected argument '%s'", cli_esc(argv[i]));
        }
    }
    if (!config_path && !resume_dir) return cli_usage_error("train", "missing CONFIG");
    if (resume_dir && out_dir && strcmp(resume_dir, out_dir) != 0)
        return cli_usage_error("train", "--resume continues in its own directory; drop --out");

    NevoError err = {0};
    NevoConfig cfg;
    char default_dir[4096];
    int rc = 0, root = !comm || nevo_comm_rank(comm) == 0;
    if (root) rc = resolve_config(config_path, resume_dir, out_dir, overrides, n_over, &cfg, default_dir,
                                  sizeof default_dir);
    if (comm && nevo_comm_size(comm) > 1) {
        /* rank 0 reads the files and decides the directory; the others take its word */
        NevoBuf b = {0};
        if (root) {
            char *json = rc ? NULL : nevo_config_to_json(&cfg);
            nevo_buf_u32(&b, (uint32_t)rc);
            nevo_buf_str(&b, json ? json : "");
            nevo_buf_str(&b, default_dir);
            free(json);
        }
        NevoStatus st = nevo_comm_bcast(comm, &b, 0, &err);
        if (st) {
            nevo_buf_free(&b);
            return cli_fail(&err);
        }
        NevoReader r = nevo_reader(b.data, b.len);
        rc = (int)nevo_read_u32(&r);
        char *json = nevo_read_str(&r, b.len), *dir = nevo_read_str(&r, sizeof default_dir - 1);
        if (!root && rc == 0) {
            nevo_config_defaults(&cfg);
            snprintf(default_dir, sizeof default_dir, "%s", dir ? dir : "");
            if (!nevo_reader_ok(&r, true) || nevo_config_apply_json(&cfg, json, "rank 0's config", &err) != NEVO_OK)
                rc = 2; /* cannot happen: rank 0 wrote both */
        }
        free(json);
        free(dir);
        nevo_buf_free(&b);
    }
    if (rc) return rc;
    out_dir = default_dir;
    if (comm && threads == 0 && cfg.threads == 0) {
        /* the node's CPUs shared among its ranks (threads never change results) */
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int per_node = local && atoi(local) > 0 ? atoi(local) : 1;
        threads = nevo_cpu_count() / per_node > 0 ? nevo_cpu_count() / per_node : 1;
    }

    Progress p = {0};    p.tty = isatty(STDERR_FILENO);
    p.quiet = quiet;
    p.kill_after_frames = kill_after;
    pthread_mutex_init(&p.mu, NULL);
    NevoTrainHooks hooks = {on_start, on_generation, on_frames, &p, on_backend};
    NevoTrainSummary s;
    NevoStatus st = nevo_train_run_ranks(&cfg, out_dir, resume_dir != NULL, (int)threads, &hooks, comm, &s, &err);
    pthread_mutex_destroy(&p.mu);
    if (st) return cli_fail(&err);
    if (!root) return 0; /* rank 0 reports the run */
    /* paths as JSON strings (quotes, backslashes and control bytes escaped) */
    char *dir_json = json_string_text(out_dir), *policy_json = json_string_text(s.policy_path);
    if (s.on_data)
        printf("{\"generations\": %d, \"samples\": %lld, \"wall_s\": %.3f, \"train_loss\": %.10g, "
               "\"test_loss\": %.10g, \"test_accuracy\": %.10g, \"stopped\": \"%s\", \"run_dir\": %s, "
               "\"policy\": %s}\n",
               s.totals.generations, s.totals.frames, s.totals.wall_s, s.data.train_loss, s.data.test_loss,
               s.data.test_accuracy, s.stopped, dir_json, policy_json);
    else
    printf("{\"generations\": %d, \"frames\": %lld, \"episodes\": %lld, \"wall_s\": %.3f, "
           "\"best_fitness\": %.10g, \"eval_episodes\": %d, \"eval_return_mean\": %.10g, "
           "\"eval_return_std\": %.10g, \"eval_length_mean\": %.10g, \"stopped\": \"%s\", \"run_dir\": %s, "
           "\"policy\": %s}\n",
           s.totals.generations, s.totals.frames, s.totals.episodes, s.totals.wall_s, s.totals.best_fitness,
           s.eval.episodes, s.eval.return_mean, s.eval.return_std, s.eval.length_mean, s.stopped, dir_json,
           policy_json);
    free(dir_json);
    free(policy_json);
    return 0;
}

int nevo_cmd_train(int argc, char **argv) {
    int rank, size;
    /* one process (a launcher's single rank in a build without MPI is one too) */
    if (!nevo_comm_launched(&rank, &size) || (size == 1 && !nevo_comm_has_mpi()))
        return train_main(argc, argv, NULL);
    NevoError err = {0};
    NevoComm *comm;
    if (nevo_comm_mpi(&comm, &err)) { /* a build without MPI: every rank fails, rank 0 says why */
        if (rank == 0) cli_fail(&err);
        return 2;
    }
    cli_errors_quiet = nevo_comm_rank(comm) != 0;
    int rc = train_main(argc, argv, comm);
    nevo_comm_free(comm);
    return rc;
}
