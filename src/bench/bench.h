/* Benchmarks (internal): this machine's limits and nevo's hot paths, measured in one
 * process, so every number can be read as a ratio to a limit measured the same way.
 *
 * Groups:
 *   peak     FP32 multiply-add rate of a register-resident loop of independent FMA
 *            chains, per core and on all cores (the compute ceiling);
 *   memory   read-only sum and STREAM-style triad over arrays far larger than the last
 *            cache level, one core and all cores (the bandwidth ceiling);
 *   envs     raw steps/s of every registered env on one core (no policy);
 *   forward  nevo_policy_forward on a population of different MLPs, as GFLOP/s against
 *            the peak and as weight bytes/s against the read bandwidth measured over a
 *            buffer of the weights' own size (the roofline of that working set);
 *   ga       end-to-end Deep GA frames/s on CartPole-v1 at 1 and N threads;
 *   mujoco   for every MuJoCo env, nevo_env_step against a bare mj_step loop that
 *            replays the same episodes on the same model (the env layer's overhead),
 *            and the env loop on 2 threads against 1 (bench_mujoco.c);
 *   backward nevo_policy_backward against nevo_policy_forward on 64 rows of one network,
 *            whole and layer by layer, for the MinAtar net and a 64-64 MLP (bench_grad.c);
 *   gpu      the CUDA device's FMA peak and copy bandwidth, and the cuda backend's
 *            forward against them (bench_gpu.c; a CUDA=1 build on a machine with a GPU);
 *   actor    algo vtrace on MinAtar: the actor-learner runtime alone, async and sync
 *            end to end against it, and the learner's samples/s (bench_actor.c).
 *
 * Method: each measurement is calibrated until one repetition takes at least
 * min_time_s (the calibration runs double as warm-up), then repeated `reps` times; the
 * best repetition is the result (noise on an idle machine only ever adds time) and the
 * median is reported beside it. Nothing is allocated inside a timed loop. */
#ifndef NEVO_BENCH_H
#define NEVO_BENCH_H

#include <stddef.h>

#include "nevo/policy.h"
#include "nevo/status.h"
#include "nevo/threads.h"

typedef struct NevoBenchOptions {
    int quick;          /* smaller problems, shorter runs: a smoke test */
    double min_time_s;  /* each timed repetition runs at least this long */
    int reps;           /* timed repetitions after warm-up */
    int threads;        /* threads for the all-core measurements (nevo_cpu_count()) */
} NevoBenchOptions;

void nevo_bench_options_default(NevoBenchOptions *o, int quick);

/* Group bits for nevo_bench_run. */
enum {
    NEVO_BENCH_PEAK = 1u << 0,
    NEVO_BENCH_MEMORY = 1u << 1,
    NEVO_BENCH_ENVS = 1u << 2,
    NEVO_BENCH_FORWARD = 1u << 3,
    NEVO_BENCH_GA = 1u << 4,
    NEVO_BENCH_MUJOCO = 1u << 5,
    NEVO_BENCH_NOVELTY = 1u << 6,
    NEVO_BENCH_BACKWARD = 1u << 7,
    NEVO_BENCH_GPU = 1u << 8,
    NEVO_BENCH_ACTOR = 1u << 9,
    NEVO_BENCH_ALL = (1u << 10) - 1,
};
/* Group bit of a name ("peak", "memory", "envs", "forward", "ga", "mujoco",
 * "novelty", "backward", "gpu", "actor"); 0 if unknown. */
unsigned nevo_bench_group_bit(const char *name);

#define NEVO_BENCH_EXTRA_SIZE 640

/* One measured number, a line of the report. */
typedef struct NevoBenchResult {
    const char *group;     /* "peak", "memory", ... (static) */
    char name[128];
    char unit[16];         /* "GFLOP/s", "GB/s", "Msteps/s", "kframes/s", "Melem/s" */
    double value;          /* best repetition */
    double median;         /* median repetition */
    double limit;          /* the ceiling it is compared with, same unit; NaN if none */
    char limit_name[64];
    double ratio;          /* value / limit; NaN if none */
    double cpu_share;      /* CPU time the measurement got / (threads x wall) in its best
                              repetition; well below 1 means other work shared the cores
                              and the value is a floor. NaN if not measured */
    char extra[NEVO_BENCH_EXTRA_SIZE]; /* more JSON members, `"k": v, ...`, or "" */
} NevoBenchResult;

typedef void (*NevoBenchEmit)(void *ctx, const NevoBenchResult *r);

/* A row of `group` in `unit`, with no limit, ratio or CPU share (NaN) yet. */
void nevo_bench_result_init(NevoBenchResult *r, const char *group, const char *unit);
/* Sets the row's limit (same unit) and its name; ratio = value / limit. */
void nevo_bench_result_limit(NevoBenchResult *r, double limit, const char *limit_name);

/* ---- timing (shared by the bench files) ----------------------------------------- */

/* Runs `iters` iterations of some work; returns the work units done (flops, bytes,
 * steps, rows). Must not allocate. */
typedef double (*NevoBenchWorkFn)(void *ctx, long iters);

/* Rates in work units per second. */
typedef struct NevoBenchTiming {
    double best, median;
    double cpu_share; /* CPU time this process got / (threads x wall), best repetition */
    long iters;       /* iterations of each timed repetition */
} NevoBenchTiming;

/* Monotonic wall clock, and CPU seconds of this thread (threads == 1) or of the whole
 * process (threads > 1), for CPU shares. */
double nevo_bench_wall_s(void);
double nevo_bench_cpu_s(int threads);

/* Calibrates iters until one run takes min_time_s (the warm-up), then times o->reps
 * runs; threads: how many threads the work keeps busy, for the CPU share. */
NevoBenchTiming nevo_bench_measure(const NevoBenchOptions *o, NevoBenchWorkFn fn, void *ctx,
                                   int threads);

/* ---- FMA peak ------------------------------------------------------------------- */

typedef enum NevoBenchIsa {
    NEVO_ISA_SCALAR = 0, /* scalar multiply then add (no FMA unit assumed) */
    NEVO_ISA_AVX2 = 1,   /* 256-bit AVX2 + FMA3 */
    NEVO_ISA_AVX512 = 2, /* 512-bit AVX-512F */
} NevoBenchIsa;

/* 1 if this CPU (and this build) can run isa, else 0. */
int nevo_bench_isa_supported(NevoBenchIsa isa);
/* Widest supported isa. */
NevoBenchIsa nevo_bench_isa_best(void);
const char *nevo_bench_isa_name(NevoBenchIsa isa);
/* Independent accumulators (chains x SIMD lanes) of the FMA kernel for isa. */
int nevo_bench_fma_lanes(NevoBenchIsa isa);
/* The FMA kernel: every accumulator starts at 0 and runs acc = acc * m + a for iters
 * steps (one fused multiply-add per step; a multiply then an add for scalar). Returns
 * the sum of all accumulators (in double), i.e. lanes * x_iters where
 * x_k = m * x_{k-1} + a, x_0 = 0. FLOPs done: 2 * lanes * iters. */
double nevo_bench_fma_kernel(NevoBenchIsa isa, long iters, float m, float a);

/* ---- memory --------------------------------------------------------------------- */

/* Sum of x[0..n) with the widest SIMD present; x 64-byte aligned, n a multiple of 128. */
double nevo_bench_read_sum(const float *x, size_t n);
/* a[i] = b[i] + s * c[i] for i < n; 64-byte aligned, n a multiple of 128. */
void nevo_bench_triad(float *a, const float *b, const float *c, float s, size_t n);

/* ---- measured ceilings ---------------------------------------------------------- */

typedef struct NevoBenchLimits {
    NevoBenchIsa isa;
    int threads;
    double peak_1c, peak_all;        /* GFLOP/s */
    double read_1c, read_all;        /* GB/s, read-only sum over arrays >> last cache */
    double triad_1c, triad_all;      /* GB/s, 12 bytes counted per element */
    size_t mem_bytes;                /* bytes the memory arrays span */
} NevoBenchLimits;

/* Measures the FMA peak (emits one row per supported isa on one core, and the best
 * isa on all cores) into lim. pool: opts->threads workers. emit may be NULL. */
void nevo_bench_peak(const NevoBenchOptions *o, NevoPool *pool, NevoBenchLimits *lim,
                     NevoBenchEmit emit, void *ctx);
/* Measures read and triad bandwidth on one core and on all cores into lim. */
void nevo_bench_memory(const NevoBenchOptions *o, NevoPool *pool, NevoBenchLimits *lim,
                       NevoBenchEmit emit, void *ctx);
/* Single-core read bandwidth (GB/s) over the n floats at x (best of reps). */
double nevo_bench_read_bandwidth(const NevoBenchOptions *o, const float *x, size_t n);
/* Single-core rate (GB/s) of a loop that streams the n floats at x (64-byte aligned, n a
 * multiple of 16) with `rows` fused multiply-adds per float (rows a multiple of 16),
 * each float broadcast against a vector of rows as a dense layer's weight at B = rows
 * in the lanes layout, the lines prefetched ahead: the rate the memory system and the
 * FMA units allow together at that many FLOPs per byte (rows / 2). NaN without
 * AVX-512 (the lanes layout is AVX-512's). */
double nevo_bench_stream_fma(const NevoBenchOptions *o, const float *x, size_t n, int rows);
/* Its loop once: returns rows x the sum of the n floats (each FMA adds its weight to
 * each of 16 rows of its accumulator, rows / 16 times; the lanes summed at the end).
 * NaN without AVX-512. */
double nevo_bench_stream_fma_kernel(const float *x, size_t n, int rows);

/* ---- environments --------------------------------------------------------------- */

typedef struct NevoBenchEnvResult {
    double steps_per_s, median_steps_per_s;
    long long steps, episodes; /* over calibration and timed repetitions */
    double cpu_share;
} NevoBenchEnvResult;

/* Steps a batch of instances of the registered env `name` (default options) with
 * pre-drawn uniform random actions, resetting ended instances, on one core. */
NevoStatus nevo_bench_env(const NevoBenchOptions *o, const char *name, NevoBenchEnvResult *out,
                          NevoError *err);

/* ---- batched heterogeneous forward ---------------------------------------------- */

typedef struct NevoBenchForwardCase {
    int P;       /* networks in the population */
    int B;       /* rows per network (rows = P * B, grouped by network) */
    int obs_dim; /* input size */
    int n_out;   /* output size */
    int hidden;  /* units of each of the two tanh hidden layers */
} NevoBenchForwardCase;

typedef struct NevoBenchForwardResult {
    size_t nparams;        /* floats per network */
    double flops_per_row;  /* nevo_policy_flops */
    long rows;             /* P * B */
    double weight_bytes;   /* P * nparams * 4 */
    double gflops, gflops_median;
    double gflops_fastest_call; /* the fastest single call of them all, warm-up included:
                                   on a shared host, the rate with no other work in the way */
    double weight_gbs;     /* weight bytes consumed per second: each network's weights
                              count once per call (its B rows share them) */
    double bw_gbs;         /* read bandwidth over a buffer of weight_bytes (the weights) */
    double tanh_share;     /* estimated share of the time spent in the tanh activation */
    double cpu_share;
    double input_density;  /* MinAtar case: fraction of nonzero observation values */
    double read_bytes;     /* MinAtar case: the weight bytes a call must read, all P networks:
                              every conv weight and bias, and of each dense layer its biases
                              and the rows of its nonzero inputs (the rest are skipped) */
    double bare_read_gbs;  /* MinAtar case: those bytes read by a loop that does nothing else */
    double stream_fma_gbs; /* MinAtar case, B a multiple of 16: the weights streamed by a loop
                              doing B FMAs per weight and nothing else (nevo_bench_stream_fma) */
    double nonzero_flops_per_row; /* MinAtar cases: the mean over the rows of
                                     nevo_bench_count_flops's nonzero (B rows a network) */
    double lanes_flops_per_row;   /* ... and of its lanes, grouped as this kernel set
                                     groups blocks (its nonzero where the set has no lanes
                                     layout): the terms the kernels compute, at B = 1 a few
                                     percent under them (nevo_bench_count_flops says why) */
    double blas_gflops;    /* the same case through OpenBLAS sgemm (NaN without OpenBLAS) */
    double blas_max_diff;  /* largest |OpenBLAS output - nevo output| */
} NevoBenchForwardResult;

/* One batched forward call repeated (a NevoBenchWorkFn): rows rows of obs, row i
 * through network net[i] of params. */
typedef struct NevoBenchForwardCtx {
    const NevoPolicy *p;
    const float *params;
    const int *net;
    const float *obs;
    int rows;
    float *out, *scratch;
    double fastest_s; /* the shortest call so far (0: none yet), set by the work function */
} NevoBenchForwardCtx;
double nevo_bench_forward_work(void *ctx, long iters);

/* The factored low-rank forward (nevo_policy_forward_factored) of the MinAtar net on
 * `game`'s observations: P members of one base at `rank`, a row each, in calls of 16
 * rows (an evaluator's batch of slots), against the same rows through one shared
 * network and through the P members built; rows/s, one core. */
typedef struct NevoBenchFactoredResult {
    double shared_rows_s, factored_rows_s, built_rows_s;
    double factor_bytes, net_bytes; /* a factor row's, a network's */
} NevoBenchFactoredResult;
NevoStatus nevo_bench_forward_factored(const NevoBenchOptions *o, const char *game, int P, int rank,
                                       NevoBenchFactoredResult *out, NevoError *err);

/* Times nevo_policy_forward for one case on one core. tanh_melems: the tanh rate
 * from nevo_bench_tanh (Melem/s), for tanh_share; 0 skips it. */
NevoStatus nevo_bench_forward(const NevoBenchOptions *o, const NevoBenchForwardCase *c,
                              double tanh_melems, NevoBenchForwardResult *out, NevoError *err);
/* OpenBLAS, loaded at run time: its configuration string, or NULL when the machine
 * has no libopenblas. */
const char *nevo_bench_blas(void);
/* The MLP population (P networks, B rows each, grouped by network) through OpenBLAS
 * sgemm per network and layer, one core: rows/s, and the largest difference from
 * want (nevo's outputs). Returns 0, both NaN, without OpenBLAS. */
int nevo_bench_forward_blas(const NevoBenchOptions *o, const NevoPolicy *p, const float *params, const float *obs,
                            int P, int B, const float *want, double *rows_per_s, double *max_diff);
/* Throughput of the tanh activation as nevo_policy_forward applies it, one core,
 * Melem/s (best of reps). */
double nevo_bench_tanh(const NevoBenchOptions *o);
/* Name of the kernel set nevo_policy_forward uses ("generic", "avx2", "avx512"; the
 * environment variable NEVO_KERNELS forces one). */
const char *nevo_bench_kernels_name(void);

/* ---- end-to-end GA -------------------------------------------------------------- */

typedef struct NevoBenchGAResult {
    int threads, generations;
    long long frames;        /* env steps of the timed run (validation included) */
    double seconds;          /* wall time of the generations (best repetition) */
    double frames_per_s;
    double cpu_share;        /* process CPU time / (threads x wall) */
} NevoBenchGAResult;

/* Runs `generations` generations of Deep GA on CartPole-v1 (configs/cartpole_ga.json's
 * settings) over a pool of `threads` threads; the algorithm is rebuilt for each
 * repetition, so every repetition does the same work. */
NevoStatus nevo_bench_ga(const NevoBenchOptions *o, int threads, int generations,
                         NevoBenchGAResult *out, NevoError *err);

/* ---- engine (bench_engine.c) ---------------------------------------------------- */

typedef struct NevoBenchTrainResult {
    int threads, pipeline, generations;
    int warm_generations;    /* run untimed first (0: timed from generation 0) */
    long long frames;        /* env steps of the timed run (validation included) */
    double seconds;          /* wall time of the generations (best repetition) */
    double frames_per_s;
    double cpu_share;        /* process CPU time / (threads x wall) */
    double eval_s;           /* wall time inside nevo_evaluate; the rest of `seconds` is
                                materialisation (where not built inside the evaluator),
                                selection, updates, novelty */
    double forward_s, env_s; /* thread-seconds in batched inference and in env steps */
    double build_s;          /* thread-seconds building parameters inside the evaluator
                                (GA children, ES perturbations: built as their episodes
                                start) */
} NevoBenchTrainResult;

/* One timed configuration of nevo_bench_train_set: threads and pipeline depth. */
typedef struct NevoBenchTrainRun {
    int threads, pipeline;
} NevoBenchTrainRun;
#define NEVO_BENCH_TRAIN_RUNS 8

/* Runs `generations` generations of the config (JSON text; any algo) once per run (n of
 * them, each its threads and evaluator pipeline depth, 1 = fused), o->reps times (once
 * with --quick) with the runs taking turns, keeping each run's fastest repetition in
 * out[i]; the evaluator's timing is on. warm_generations > 0: that many generations
 * run first, once, untimed, on the run with the most threads, and every timed run
 * starts from that state (loaded back as a checkpoint is), so the timed ones see a
 * trained population's longer episodes. The policy normalises observations where
 * training's would (nevo_algo_obs_norm), each run from a fresh policy's statistics.
 * Every run does the same work as the same generations of `nevo train` (asserted
 * between the runs). */
NevoStatus nevo_bench_train_set(const NevoBenchOptions *o, const char *config_json, const NevoBenchTrainRun *runs,
                                int n, int warm_generations, int generations, NevoBenchTrainResult *out,
                                NevoError *err);

/* nevo_bench_train_set for one run. */
NevoStatus nevo_bench_train(const NevoBenchOptions *o, const char *config_json, int threads, int pipeline,
                            int warm_generations, int generations, NevoBenchTrainResult *out, NevoError *err);
/* The fused multiply-adds of one network on `rows` observations (row r at obs + r
 * obs_dim), as FLOPs (2 per FMA), counted two ways from the inputs each layer sees:
 * nonzero: each row's terms whose input is nonzero (a conv output window's nonzero
 *   inputs times its filters; a dense layer's nonzero inputs times its outputs): the
 *   arithmetic left once zero inputs are skipped;
 * lanes: what the lanes layout computes, a block of NEVO_LANES rows at a time while
 *   whole blocks are left. An input (of a conv output window, or of a dense layer) is
 *   skipped where it is zero in every row of the block; otherwise every row of the
 *   block gets the term, zero or not. Rows after the last whole block count as in
 *   `nonzero`.
 * With fewer than NEVO_LANES rows the two are equal. nevo_policy_flops counts every
 * term (dense-equivalent). What the kernels compute lies between these counts and
 * that one: outside the lanes blocks they may compute a few terms more than the
 * nonzero ones (the AVX2 3x3 convolution also computes the border terms a padded
 * output throws away, a narrow output layer fills a whole vector, the AVX-512 rows
 * left after the blocks share one list per few rows). The policy must not normalise
 * its observations (the first layer sees obs as they are). */
void nevo_bench_count_flops(const NevoPolicy *p, const float *theta, const float *obs, int rows, double *nonzero,
                            double *lanes);
/* The MinAtar network (conv 3x3x16, ReLU, dense 128, ReLU) of P different networks, B
 * rows each (B episodes of each network), on observations of `game` from random play:
 * one core. The roofline counts (read_bytes, bare_read_gbs) only at B = 1 (0 else). */
NevoStatus nevo_bench_forward_minatar(const NevoBenchOptions *o, const char *game, int P, int B,
                                      NevoBenchForwardResult *out, NevoError *err);
/* The MinAtar network as a GA or ES worker's one slot runs it: one network, one row a
 * call, over `steps` observations of random play in order (a new episode where one
 * ends), its weights in cache from call to call; one core. rows = steps, and no
 * fastest call (each observation is its own work) or roofline counts. */
NevoStatus nevo_bench_forward_minatar_episode(const NevoBenchOptions *o, const char *game, int steps,
                                              NevoBenchForwardResult *out, NevoError *err);

typedef struct NevoBenchNoveltyResult {
    double seconds_per_call; /* novelty of all queries against the archive, k = 10 */
    double distances_per_s;
    double cpu_share;
} NevoBenchNoveltyResult;
/* k-NN novelty of `queries` points against an archive of `archive` uniform points in
 * [0, 200]^dim, one core. */
NevoStatus nevo_bench_novelty(const NevoBenchOptions *o, int archive, int queries, int dim,
                              NevoBenchNoveltyResult *out, NevoError *err);

/* ---- MuJoCo: the env layer against a bare simulation loop ---------------------- */

typedef struct NevoBenchMujocoResult {
    int frame_skip;          /* mj_step calls per env step */
    int instances;           /* simulations stepped in turn by each loop (per thread) */
    int rne_post;            /* 1 if the bare loop calls mj_rnePostConstraint after each
                                step: the robot reads contact forces (cfrc_ext) */
    double episode_length;   /* mean length of the env loop's finished episodes under
                                the random actions; NaN if none finished */
    long long env_episodes;  /* episodes the 1-thread env loop finished */
    long long bare_episodes; /* episodes the bare loop replayed to their end */
    long long replay_mismatches; /* replayed episodes whose final qpos[0] differs from
                                    the env's (0: both loops simulated the same states) */
    double env_steps_per_s, env_median, env_cpu_share;    /* nevo_env_step, 1 thread */
    double bare_steps_per_s, bare_median, bare_cpu_share; /* bare loop, 1 thread */
    int threads2;            /* 2, or 0 when the machine has one CPU (not measured) */
    double env2_steps_per_s, env2_median, env2_cpu_share; /* nevo_env_step, 2 threads */
    double env_reset_us;     /* one nevo_env_reset */
    double bare_reset_us;    /* one bare reset: mj_resetData, noise, mj_forward */
    double rne_us;           /* one mj_rnePostConstraint (every env step calls it) */
} NevoBenchMujocoResult;

/* 1 if `name` is a MuJoCo env (the mujoco group's envs). */
int nevo_bench_is_mujoco(const char *name);

/* Measures the MuJoCo env `name` (default options) three ways, on one core unless
 * said (bench_mujoco.c has the details):
 *   env   `instances` instances stepped in turn with nevo_env_step, pre-drawn uniform
 *         random controls in the control range (step t of the episode with seed s
 *         takes row (t + 17 s) mod 64: an episode is a function of its seed), the next
 *         seed's nevo_env_reset when an episode ends; each finished episode's length
 *         and final qpos[0] are recorded;
 *   bare  as many mjData on the env's own mjModel replay the same episodes, seed by
 *         seed: nevo_mj_reset's draws, ctrl = action, frame_skip x mj_step,
 *         mj_rnePostConstraint only if the robot needs contact forces, each episode
 *         cut at its recorded length; no observation, reward or health;
 *   env2  the env loop on 2 threads, each with its own instances (when the machine
 *         has 2 CPUs or more).
 * Rates count env steps only; resets fall inside the env and bare loops equally
 * often, and their cost is measured on its own too. */
NevoStatus nevo_bench_mujoco(const NevoBenchOptions *o, const char *name, NevoBenchMujocoResult *out,
                             NevoError *err);

/* ---- gradients (bench_grad.c) --------------------------------------------------- */

/* The backward group: for the MinAtar net (Breakout observations from random play) and
 * a 64-64 tanh MLP on 17 inputs, 64 rows of one network, one core: the forward, the
 * forward with a tape and the backward, whole and per layer, in dense-equivalent
 * GFLOP/s (a backward row counts 2 fan_in out_dim FLOPs per layer for dW and as many
 * again for dX, which the first layer does not compute), against lim's FMA peak and,
 * for the backward, against the forward's rate. */
/* The gpu group (bench_gpu.c): says it was skipped where there is no CUDA device. */
NevoStatus nevo_bench_gpu(const NevoBenchOptions *o, NevoBenchEmit emit, void *ctx, NevoError *err);
NevoStatus nevo_bench_actor(const NevoBenchOptions *o, NevoBenchEmit emit, void *ctx, NevoError *err);
NevoStatus nevo_bench_backward(const NevoBenchOptions *o, const NevoBenchLimits *lim, NevoBenchEmit emit, void *ctx,
                               NevoError *err);

/* ---- everything ----------------------------------------------------------------- */

/* Machine description: CPU model (from /proc/cpuinfo), the CPUs this process may run
 * on (nevo_cpu_count), cache sizes. */
typedef struct NevoBenchMachine {
    char model[128];
    int cpus;
    long l1d, l2, l3;  /* bytes, from sysconf; 0 if unknown */
    NevoBenchIsa isa;
} NevoBenchMachine;
void nevo_bench_machine(NevoBenchMachine *m);

/* Runs the groups in `groups` (NEVO_BENCH_* bits), emitting rows as they are
 * measured. Ceilings the selected groups need (the peak for forward) are measured
 * even when their own group is not selected, without being emitted. */
NevoStatus nevo_bench_run(const NevoBenchOptions *o, unsigned groups, NevoBenchEmit emit, void *ctx,
                          NevoError *err);

#endif
