/* Benchmarks: machine ceilings (FMA peak, memory bandwidth) and nevo's hot paths (env
 * steps, the batched heterogeneous forward, end-to-end Deep GA), each reported against
 * the ceiling it is bound by. See bench.h for the method and docs/BENCHMARKS.md for
 * what the numbers mean.
 *
 * The binary is built for baseline x86-64, so the SIMD kernels here are separate
 * functions compiled for AVX-512 / AVX2+FMA with target attributes and chosen at run
 * time with __builtin_cpu_supports; other architectures get the portable versions. */
#include "bench/bench.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nevo/algo.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/eval.h"
#include "nevo/noise.h"
#include "nevo/policy.h"
#include "nevo/rng.h"
#include "nn/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define BENCH_X86 1
#include <immintrin.h>
#else
#define BENCH_X86 0
#endif

#define MAX_REPS 32

/* Kernel constants pass through volatiles so the compiler cannot specialise the FMA
 * loop for them. */
static volatile float fma_m_one = 1.0f;
static volatile float fma_a_tiny = 1e-7f;
/* Results of timed work land here so no timed loop is dead code. */
static volatile double bench_sink;

void nevo_bench_options_default(NevoBenchOptions *o, int quick) {
    o->quick = quick;
    o->min_time_s = quick ? 0.01 : 0.2;
    o->reps = quick ? 2 : 3;
    o->threads = nevo_cpu_count();
}

unsigned nevo_bench_group_bit(const char *name) {
    static const struct {
        const char *name;
        unsigned bit;
    } groups[] = {{"peak", NEVO_BENCH_PEAK},
                  {"memory", NEVO_BENCH_MEMORY},
                  {"envs", NEVO_BENCH_ENVS},
                  {"forward", NEVO_BENCH_FORWARD},
                  {"ga", NEVO_BENCH_GA},
                  {"mujoco", NEVO_BENCH_MUJOCO},
                  {"novelty", NEVO_BENCH_NOVELTY},
                  {"backward", NEVO_BENCH_BACKWARD},
                  {"gpu", NEVO_BENCH_GPU},
                  {"actor", NEVO_BENCH_ACTOR}};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        if (strcmp(name, groups[i].name) == 0) return groups[i].bit;
    return 0;
}

/* ---- timing --------------------------------------------------------------------- */

double nevo_bench_wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef NevoBenchWorkFn WorkFn;
typedef NevoBenchTiming Timing;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* CPU time of the calling thread (threads == 1) or of the whole process. Below the
 * wall time when something else shared our cores: the number is then a floor. */
double nevo_bench_cpu_s(int threads) {
    struct timespec ts;
    if (clock_gettime(threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return NAN;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Grows iters until one run takes a quarter of min_time_s (these runs are the
 * warm-up), scales it to 1.1 min_time_s, then times reps runs of that many
 * iterations. threads: how many threads the work keeps busy, for the CPU share. */
static Timing measure(const NevoBenchOptions *o, WorkFn fn, void *ctx, int threads) {
    long iters = 1;
    for (;;) {
        double t0 = nevo_bench_wall_s();
        fn(ctx, iters);
        double dt = nevo_bench_wall_s() - t0;
        if (dt >= 0.25 * o->min_time_s) {
            if (dt < o->min_time_s) iters = (long)ceil((double)iters * 1.1 * o->min_time_s / dt);
            break;
        }
        double f = dt > 0 ? 0.4 * o->min_time_s / dt : 1000.0;
        f = f < 2.0 ? 2.0 : f > 1000.0 ? 1000.0 : f;
        iters = (long)ceil((double)iters * f);
    }
    int reps = o->reps < 1 ? 1 : o->reps > MAX_REPS ? MAX_REPS : o->reps;
    double rates[MAX_REPS];
    Timing t = {0};
    t.iters = iters;
    for (int r = 0; r < reps; r++) {
        double c0 = nevo_bench_cpu_s(threads), t0 = nevo_bench_wall_s();
        double work = fn(ctx, iters);
        double dt = nevo_bench_wall_s() - t0, dc = nevo_bench_cpu_s(threads) - c0;
        rates[r] = work / dt;
        if (r == 0 || rates[r] > t.best) {
            t.best = rates[r];
            t.cpu_share = dc / (threads * dt);
        }
    }
    t.median = median_of(rates, reps);
    return t;
}

NevoBenchTiming nevo_bench_measure(const NevoBenchOptions *o, NevoBenchWorkFn fn, void *ctx,
                                   int threads) {
    return measure(o, fn, ctx, threads);
}

void nevo_bench_result_init(NevoBenchResult *r, const char *group, const char *unit) {
    memset(r, 0, sizeof *r);
    r->group = group;
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    r->limit = NAN;
    r->ratio = NAN;
    r->cpu_share = NAN;
}

void nevo_bench_result_limit(NevoBenchResult *r, double limit, const char *limit_name) {
    r->limit = limit;
    snprintf(r->limit_name, sizeof r->limit_name, "%s", limit_name);
    r->ratio = limit > 0 ? r->value / limit : NAN;
}

static void emit_row(NevoBenchEmit emit, void *ctx, const NevoBenchResult *r) {
    if (emit) emit(ctx, r);
}

/* ---- ISA dispatch --------------------------------------------------------------- */

int nevo_bench_isa_supported(NevoBenchIsa isa) {
    if (isa == NEVO_ISA_SCALAR) return 1;
#if BENCH_X86
    __builtin_cpu_init();
    if (isa == NEVO_ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (isa == NEVO_ISA_AVX512) return __builtin_cpu_supports("avx512f") != 0;
#endif
    return 0;
}

NevoBenchIsa nevo_bench_isa_best(void) {
    if (nevo_bench_isa_supported(NEVO_ISA_AVX512)) return NEVO_ISA_AVX512;
    if (nevo_bench_isa_supported(NEVO_ISA_AVX2)) return NEVO_ISA_AVX2;
    return NEVO_ISA_SCALAR;
}

const char *nevo_bench_isa_name(NevoBenchIsa isa) {
    switch (isa) {
    case NEVO_ISA_AVX512: return "avx512f";
    case NEVO_ISA_AVX2: return "avx2+fma";
    default: return "scalar";
    }
}

/* ---- FMA kernels ---------------------------------------------------------------- */

/* Chains per kernel: enough independent accumulators to cover FMA latency (4 cycles)
 * times 2 pipes, within the register file (32 zmm; 16 ymm; 16 xmm for scalar). */
#define CHAINS_AVX512 16
#define CHAINS_AVX2 12
#define CHAINS_SCALAR 12

#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define REP16(X) REP12(X) X(12) X(13) X(14) X(15)

int nevo_bench_fma_lanes(NevoBenchIsa isa) {
    switch (isa) {
    case NEVO_ISA_AVX512: return CHAINS_AVX512 * 16;
    case NEVO_ISA_AVX2: return CHAINS_AVX2 * 8;
    default: return CHAINS_SCALAR;
    }
}

/* Chains start at distinct values (chain j at j) so the compiler cannot merge them. */
#if BENCH_X86
__attribute__((target("avx512f"), noinline)) static double fma_avx512(long iters, float m, float a) {
    __m512 vm = _mm512_set1_ps(m), va = _mm512_set1_ps(a);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
    REP16(DECL)
#undef DECL
    for (long k = 0; k < iters; k++) {
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, vm, va);
        REP16(STEP)
#undef STEP
    }
    float buf[16];
    double s = 0.0;
#define SUM(i)                                          \
    _mm512_storeu_ps(buf, c##i);                        \
    for (int l = 0; l < 16; l++) s += (double)buf[l];
    REP16(SUM)
#undef SUM
    return s;
}

__attribute__((target("avx2,fma"), noinline)) static double fma_avx2(long iters, float m, float a) {
    __m256 vm = _mm256_set1_ps(m), va = _mm256_set1_ps(a);
#define DECL(i) __m256 c##i = _mm256_set1_ps((float)(i));
    REP12(DECL)
#undef DECL
    for (long k = 0; k < iters; k++) {
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, vm, va);
        REP12(STEP)
#undef STEP
    }
    float buf[8];
    double s = 0.0;
#define SUM(i)                                          \
    _mm256_storeu_ps(buf, c##i);                        \
    for (int l = 0; l < 8; l++) s += (double)buf[l];
    REP12(SUM)
#undef SUM
    return s;
}
#endif

/* A multiply then an add per step (-ffp-contract=off keeps them apart): what a CPU
 * without FMA units, or code that is not vectorised, does. */
__attribute__((noinline)) static double fma_scalar(long iters, float m, float a) {
#define DECL(i) float c##i = (float)(i);
    REP12(DECL)
#undef DECL
    for (long k = 0; k < iters; k++) {
#define STEP(i) c##i = c##i * m + a;
        REP12(STEP)
#undef STEP
    }
    double s = 0.0;
#define SUM(i) s += (double)c##i;
    REP12(SUM)
#undef SUM
    return s;
}

double nevo_bench_fma_kernel(NevoBenchIsa isa, long iters, float m, float a) {
#if BENCH_X86
    if (isa == NEVO_ISA_AVX512 && nevo_bench_isa_supported(isa)) return fma_avx512(iters, m, a);
    if (isa == NEVO_ISA_AVX2 && nevo_bench_isa_supported(isa)) return fma_avx2(iters, m, a);
#endif
    NEVO_ASSERT(isa == NEVO_ISA_SCALAR);
    return fma_scalar(iters, m, a);
}

/* Steps per kernel call: long enough (~10^5 cycles) to hide the call and the final
 * horizontal sum, short enough for fine-grained calibration. */
#define FMA_INNER 16384

typedef struct FmaCtx {
    NevoBenchIsa isa;
    NevoPool *pool;
    int items;
    long iters; /* kernel calls per pool item (pool runs only) */
} FmaCtx;

static double fma_work(void *vctx, long iters) {
    FmaCtx *c = vctx;
    float m = fma_m_one, a = fma_a_tiny;
    double s = 0.0;
    for (long i = 0; i < iters; i++) s += nevo_bench_fma_kernel(c->isa, FMA_INNER, m, a);
    bench_sink = s;
    return 2.0 * nevo_bench_fma_lanes(c->isa) * (double)FMA_INNER * (double)iters;
}

static void fma_item(void *vctx, int item, int worker) {
    FmaCtx *c = vctx;
    float m = fma_m_one, a = fma_a_tiny;
    double s = 0.0;
    for (long i = 0; i < c->iters; i++) s += nevo_bench_fma_kernel(c->isa, FMA_INNER, m, a);
    if (s == -1.0) bench_sink = s; /* never true; keeps s live */
}

static double fma_pool_work(void *vctx, long iters) {
    FmaCtx *c = vctx;
    c->iters = iters;
    nevo_pool_run(c->pool, c->items, fma_item, c);
    return 2.0 * nevo_bench_fma_lanes(c->isa) * (double)FMA_INNER * (double)iters * c->items;
}

void nevo_bench_peak(const NevoBenchOptions *o, NevoPool *pool, NevoBenchLimits *lim,
                     NevoBenchEmit emit, void *ctx) {
    lim->isa = nevo_bench_isa_best();
    lim->threads = nevo_pool_threads(pool);
    for (int isa = NEVO_ISA_SCALAR; isa <= NEVO_ISA_AVX512; isa++) {
        if (!nevo_bench_isa_supported((NevoBenchIsa)isa)) continue;
        FmaCtx c = {.isa = (NevoBenchIsa)isa};
        Timing t = measure(o, fma_work, &c, 1);
        NevoBenchResult r;
        nevo_bench_result_init(&r, "peak", "GFLOP/s");
        snprintf(r.name, sizeof r.name, "fma %s, 1 core", nevo_bench_isa_name((NevoBenchIsa)isa));
        r.value = t.best * 1e-9;
        r.median = t.median * 1e-9;
        r.cpu_share = t.cpu_share;
        snprintf(r.extra, sizeof r.extra,
                 "\"isa\": \"%s\", \"threads\": 1, \"accumulators\": %d, \"flop_per_step\": 2",
                 nevo_bench_isa_name((NevoBenchIsa)isa), nevo_bench_fma_lanes((NevoBenchIsa)isa));
        if ((NevoBenchIsa)isa == lim->isa) lim->peak_1c = r.value;
        emit_row(emit, ctx, &r);
    }
    FmaCtx c = {.isa = lim->isa, .pool = pool, .items = 4 * lim->threads};
    Timing t = measure(o, fma_pool_work, &c, lim->threads);
    NevoBenchResult r;
    nevo_bench_result_init(&r, "peak", "GFLOP/s");
    snprintf(r.name, sizeof r.name, "fma %s, %d cores", nevo_bench_isa_name(lim->isa), lim->threads);
    r.value = t.best * 1e-9;
    r.median = t.median * 1e-9;
    r.cpu_share = t.cpu_share;
    lim->peak_all = r.value;
    char ln[64];
    snprintf(ln, sizeof ln, "%d x 1-core peak", lim->threads);
    nevo_bench_result_limit(&r, lim->threads * lim->peak_1c, ln);
    snprintf(r.extra, sizeof r.extra, "\"isa\": \"%s\", \"threads\": %d",
             nevo_bench_isa_name(lim->isa), lim->threads);
    emit_row(emit, ctx, &r);
}

/* ---- memory kernels ------------------------------------------------------------- */

#if BENCH_X86
__attribute__((target("avx512f"))) static double read_avx512(const float *x, size_t n) {
#define DECL(i) __m512 s##i = _mm512_setzero_ps();
    DECL(0) DECL(1) DECL(2) DECL(3) DECL(4) DECL(5) DECL(6) DECL(7)
#undef DECL
    for (size_t i = 0; i < n; i += 128) {
#define ADD(k) s##k = _mm512_add_ps(s##k, _mm512_load_ps(x + i + 16 * k));
        ADD(0) ADD(1) ADD(2) ADD(3) ADD(4) ADD(5) ADD(6) ADD(7)
#undef ADD
    }
    s0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)),
                       _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7)));
    float buf[16];
    _mm512_storeu_ps(buf, s0);
    double s = 0.0;
    for (int l = 0; l < 16; l++) s += (double)buf[l];
    return s;
}

__attribute__((target("avx2"))) static double read_avx2(const float *x, size_t n) {
#define DECL(i) __m256 s##i = _mm256_setzero_ps();
    DECL(0) DECL(1) DECL(2) DECL(3) DECL(4) DECL(5) DECL(6) DECL(7)
#undef DECL
    for (size_t i = 0; i < n; i += 64) {
#define ADD(k) s##k = _mm256_add_ps(s##k, _mm256_load_ps(x + i + 8 * k));
        ADD(0) ADD(1) ADD(2) ADD(3) ADD(4) ADD(5) ADD(6) ADD(7)
#undef ADD
    }
    s0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
                       _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7)));
    float buf[8];
    _mm256_storeu_ps(buf, s0);
    double s = 0.0;
    for (int l = 0; l < 8; l++) s += (double)buf[l];
    return s;
}

/* SSE2 is part of baseline x86-64. */
static double read_sse2(const float *x, size_t n) {
#define DECL(i) __m128 s##i = _mm_setzero_ps();
    DECL(0) DECL(1) DECL(2) DECL(3) DECL(4) DECL(5) DECL(6) DECL(7)
#undef DECL
    for (size_t i = 0; i < n; i += 32) {
#define ADD(k) s##k = _mm_add_ps(s##k, _mm_load_ps(x + i + 4 * k));
        ADD(0) ADD(1) ADD(2) ADD(3) ADD(4) ADD(5) ADD(6) ADD(7)
#undef ADD
    }
    s0 = _mm_add_ps(_mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)),
                    _mm_add_ps(_mm_add_ps(s4, s5), _mm_add_ps(s6, s7)));
    float buf[4];
    _mm_storeu_ps(buf, s0);
    return (double)buf[0] + buf[1] + buf[2] + buf[3];
}

__attribute__((target("avx512f"))) static void triad_avx512(float *a, const float *b, const float *c,
                                                             float s, size_t n) {
    __m512 vs = _mm512_set1_ps(s);
    for (size_t i = 0; i < n; i += 32) {
        _mm512_store_ps(a + i, _mm512_add_ps(_mm512_load_ps(b + i), _mm512_mul_ps(vs, _mm512_load_ps(c + i))));
        _mm512_store_ps(a + i + 16,
                        _mm512_add_ps(_mm512_load_ps(b + i + 16), _mm512_mul_ps(vs, _mm512_load_ps(c + i + 16))));
    }
}

__attribute__((target("avx2"))) static void triad_avx2(float *a, const float *b, const float *c, float s,
                                                       size_t n) {
    __m256 vs = _mm256_set1_ps(s);
    for (size_t i = 0; i < n; i += 16) {
        _mm256_store_ps(a + i, _mm256_add_ps(_mm256_load_ps(b + i), _mm256_mul_ps(vs, _mm256_load_ps(c + i))));
        _mm256_store_ps(a + i + 8,
                        _mm256_add_ps(_mm256_load_ps(b + i + 8), _mm256_mul_ps(vs, _mm256_load_ps(c + i + 8))));
    }
}

static void triad_sse2(float *a, const float *b, const float *c, float s, size_t n) {
    __m128 vs = _mm_set1_ps(s);
    for (size_t i = 0; i < n; i += 8) {
        _mm_store_ps(a + i, _mm_add_ps(_mm_load_ps(b + i), _mm_mul_ps(vs, _mm_load_ps(c + i))));
        _mm_store_ps(a + i + 4, _mm_add_ps(_mm_load_ps(b + i + 4), _mm_mul_ps(vs, _mm_load_ps(c + i + 4))));
    }
}
#endif

#if !BENCH_X86
static double read_portable(const float *x, size_t n) {
    float s[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += x[i + k];
    double t = 0.0;
    for (int k = 0; k < 8; k++) t += (double)s[k];
    return t;
}
#endif

double nevo_bench_read_sum(const float *x, size_t n) {
    NEVO_ASSERT(n % 128 == 0 && ((uintptr_t)x & 63) == 0);
#if BENCH_X86
    if (nevo_bench_isa_supported(NEVO_ISA_AVX512)) return read_avx512(x, n);
    if (nevo_bench_isa_supported(NEVO_ISA_AVX2)) return read_avx2(x, n);
    return read_sse2(x, n);
#else
    return read_portable(x, n);
#endif
}

void nevo_bench_triad(float *a, const float *b, const float *c, float s, size_t n) {
    NEVO_ASSERT(n % 128 == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 63) == 0);
#if BENCH_X86
    if (nevo_bench_isa_supported(NEVO_ISA_AVX512)) {
        triad_avx512(a, b, c, s, n);
        return;
    }
    if (nevo_bench_isa_supported(NEVO_ISA_AVX2)) {
        triad_avx2(a, b, c, s, n);
        return;
    }
    triad_sse2(a, b, c, s, n);
#else
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
#endif
}

/* ---- memory bandwidth ----------------------------------------------------------- */

typedef struct MemCtx {
    float *a, *b, *c; /* (n) each, contiguous: a is the start of the whole span */
    size_t n;         /* floats per array */
    int triad;        /* 0: read-only sum over all 3n floats; 1: a = b + s c */
    NevoPool *pool;
    int items;        /* chunks per pool run */
    double sums[256];
} MemCtx;

/* Chunk [lo, hi) of `total` floats for item i of k, on 128-float boundaries. */
static void chunk(size_t total, int i, int k, size_t *lo, size_t *hi) {
    size_t blocks = total / 128;
    *lo = blocks * (size_t)i / (size_t)k * 128;
    *hi = blocks * (size_t)(i + 1) / (size_t)k * 128;
}

/* Bytes counted per pass: 3n floats either way (read: a, b, c; triad: b, c read and a
 * written, STREAM's count, which leaves out the write-allocate read of a). */
static double mem_bytes(const MemCtx *c) { return 12.0 * (double)c->n; }

static double mem_work(void *vctx, long iters) {
    MemCtx *c = vctx;
    double s = 0.0;
    for (long i = 0; i < iters; i++) {
        if (c->triad) nevo_bench_triad(c->a, c->b, c->c, 0.5f, c->n);
        else s += nevo_bench_read_sum(c->a, 3 * c->n);
    }
    bench_sink = s;
    return mem_bytes(c) * (double)iters;
}

static void mem_item(void *vctx, int item, int worker) {
    MemCtx *c = vctx;
    size_t lo, hi;
    if (c->triad) {
        chunk(c->n, item, c->items, &lo, &hi);
        nevo_bench_triad(c->a + lo, c->b + lo, c->c + lo, 0.5f, hi - lo);
    } else {
        chunk(3 * c->n, item, c->items, &lo, &hi);
        c->sums[item] += nevo_bench_read_sum(c->a + lo, hi - lo);
    }
}

static double mem_pool_work(void *vctx, long iters) {
    MemCtx *c = vctx;
    for (long i = 0; i < iters; i++) nevo_pool_run(c->pool, c->items, mem_item, c);
    return mem_bytes(c) * (double)iters;
}

/* Bytes of each of the three arrays: the three together at least twice the reported
 * last-level cache and 768 MiB (the cache a VM reports may be a whole socket's), at
 * most an eighth of RAM. */
static size_t mem_array_bytes(const NevoBenchOptions *o) {
    if (o->quick) return (size_t)16 << 20;
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t want = (size_t)256 << 20;
    if (l3 > 0 && (size_t)l3 * 2 / 3 > want) want = (size_t)l3 * 2 / 3;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) {
        size_t cap = (size_t)pages * (size_t)psz / 8 / 3;
        if (want > cap) want = cap;
    }
    return want / 4096 * 4096;
}

/* The bandwidth arrays, on transparent huge pages where the kernel offers them (as
 * STREAM usually runs): fewer TLB misses and far fewer page faults when first touched,
 * which in a VM costs seconds for a gigabyte of 4 KiB pages. */
static float *alloc_span(size_t bytes) {
    size_t align = (size_t)2 << 20;
    size_t size = (bytes + align - 1) / align * align;
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0 || !p)
        nevo_fatal(__FILE__, __LINE__, "out of memory allocating %zu bytes", size);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE); /* a hint; failure only costs speed */
#endif
    return p;
}

void nevo_bench_memory(const NevoBenchOptions *o, NevoPool *pool, NevoBenchLimits *lim,
                       NevoBenchEmit emit, void *ctx) {
    size_t bytes = mem_array_bytes(o);
    size_t n = bytes / sizeof(float);
    float *span = alloc_span(3 * bytes);
    MemCtx c = {.a = span, .b = span + n, .c = span + 2 * n, .n = n, .pool = pool};
    c.items = 4 * nevo_pool_threads(pool);
    if (c.items > 256) c.items = 256;
    for (size_t i = 0; i < 3 * n; i++) span[i] = 1.0f;
    lim->threads = nevo_pool_threads(pool);
    lim->mem_bytes = 3 * bytes;
    for (int triad = 0; triad <= 1; triad++) {
        c.triad = triad;
        for (int all = 0; all <= 1; all++) {
            Timing t = measure(o, all ? mem_pool_work : mem_work, &c, all ? lim->threads : 1);
            NevoBenchResult r;
            nevo_bench_result_init(&r, "memory", "GB/s");
            snprintf(r.name, sizeof r.name, "%s, %d core%s", triad ? "triad a=b+s*c" : "read sum",
                     all ? lim->threads : 1, all ? "s" : "");
            r.value = t.best * 1e-9;
            r.median = t.median * 1e-9;
            r.cpu_share = t.cpu_share;
            double *slot = triad ? (all ? &lim->triad_all : &lim->triad_1c) : (all ? &lim->read_all : &lim->read_1c);
            *slot = r.value;
            if (all) {
                char ln[64];
                snprintf(ln, sizeof ln, "%d x 1-core", lim->threads);
                nevo_bench_result_limit(&r, lim->threads * (triad ? lim->triad_1c : lim->read_1c), ln);
            }
            snprintf(r.extra, sizeof r.extra,
                     "\"threads\": %d, \"span_bytes\": %zu, \"bytes_counted_per_float\": %d, \"simd\": \"%s\"",
                     all ? lim->threads : 1, 3 * bytes, 4,
                     BENCH_X86 ? nevo_bench_isa_name(nevo_bench_isa_best()) : "portable");
            emit_row(emit, ctx, &r);
        }
    }
    free(span);
}

typedef struct ReadCtx {
    const float *x;
    size_t n;
} ReadCtx;

static double read_work(void *vctx, long iters) {
    ReadCtx *c = vctx;
    double s = 0.0;
    for (long i = 0; i < iters; i++) s += nevo_bench_read_sum(c->x, c->n);
    bench_sink = s;
    return 4.0 * (double)c->n * (double)iters;
}

double nevo_bench_read_bandwidth(const NevoBenchOptions *o, const float *x, size_t n) {
    ReadCtx c = {x, n / 128 * 128};
    if (c.n == 0) return NAN;
    return measure(o, read_work, &c, 1).best * 1e-9;
}

/* The weights of a dense layer at B = 16 x rounds rows in the lanes layout, and nothing
 * else: each 64-byte line's 16 floats broadcast, one FMA each into one of 16 vectors of
 * rows, `rounds` times; lines STREAM_PREFETCH_LINES ahead prefetched (to L1: on an
 * Intel Xeon 15.6 GB/s at 16 FMAs a line, against 14.1-14.6 to L2 at 16-2048 lines
 * ahead, and 9.7-10 prefetching 4-8 lines at a time). */
#define STREAM_PREFETCH_LINES 256
#if BENCH_X86
__attribute__((target("avx512f"), noinline)) static double stream_fma_avx512(const float *x, size_t n, int rounds) {
    __m512 acc[16], v = _mm512_set1_ps(1.0f);
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    size_t lines = n / 16;
    for (size_t l = 0; l < lines; l++) {
        if (l + STREAM_PREFETCH_LINES < lines)
            _mm_prefetch((const char *)(x + 16 * (l + STREAM_PREFETCH_LINES)), _MM_HINT_T0);
        const float *w = x + 16 * l;
        for (int r = 0; r < rounds; r++)
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) acc[j] = _mm512_fmadd_ps(v, _mm512_set1_ps(w[j]), acc[j]);
    }
    double s = 0.0;
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) s += _mm512_reduce_add_ps(acc[j]);
    return s;
}
#endif

typedef struct StreamCtx {
    const float *x;
    size_t n;
    int rounds;
} StreamCtx;

static double stream_work(void *vctx, long iters) {
    double s = 0.0;
#if BENCH_X86
    StreamCtx *c = vctx;
    for (long i = 0; i < iters; i++) {
        /* the weights' address read anew each call: the function has no side effect, so
         * with a constant argument the compiler would call it once */
        const float *volatile x = c->x;
        s += stream_fma_avx512(x, c->n, c->rounds);
    }
    bench_sink = s;
    return 4.0 * (double)c->n * (double)iters;
#else
    (void)vctx, (void)iters, (void)s;
    return 0.0;
#endif
}

double nevo_bench_stream_fma_kernel(const float *x, size_t n, int rows) {
    NEVO_ASSERT(rows >= 16 && rows % 16 == 0 && n % 16 == 0);
#if BENCH_X86
    if (nevo_bench_isa_supported(NEVO_ISA_AVX512)) return stream_fma_avx512(x, n, rows / 16);
#endif
    return NAN;
}

double nevo_bench_stream_fma(const NevoBenchOptions *o, const float *x, size_t n, int rows) {
    NEVO_ASSERT(rows >= 16 && rows % 16 == 0 && n % 16 == 0);
    if (!nevo_bench_isa_supported(NEVO_ISA_AVX512)) return NAN;
    StreamCtx c = {x, n, rows / 16};
    return measure(o, stream_work, &c, 1).best * 1e-9;
}

/* ---- environments --------------------------------------------------------------- */

#define ENV_ACTION_SETS 64 /* pre-drawn action batches, used in turn */

typedef struct EnvCtx {
    const NevoEnv *env;
    int n, odim, adim;
    size_t isz;
    uint8_t *insts;        /* (n, isz) */
    float *obs, *rewards;  /* (n, odim), (n) */
    bool *term, *trunc;    /* (n) each */
    float *actions;        /* (ENV_ACTION_SETS, n, adim) */
    long step_no;
    uint64_t next_seed;
    long long steps, episodes;
} EnvCtx;

static double env_work(void *vctx, long iters) {
    EnvCtx *c = vctx;
    for (long it = 0; it < iters; it++) {
        const float *act = c->actions + (size_t)(c->step_no++ % ENV_ACTION_SETS) * c->n * c->adim;
        nevo_env_step_batch(c->env, c->n, c->insts, act, c->obs, c->rewards, c->term, c->trunc);
        for (int i = 0; i < c->n; i++) {
            if (!c->term[i] && !c->trunc[i]) continue;
            nevo_env_reset(c->env, c->insts + (size_t)i * c->isz, c->next_seed++, c->obs + (size_t)i * c->odim);
            c->episodes++;
        }
    }
    c->steps += (long long)c->n * iters;
    return (double)c->n * (double)iters;
}

NevoStatus nevo_bench_env(const NevoBenchOptions *o, const char *name, NevoBenchEnvResult *out,
                          NevoError *err) {
    memset(out, 0, sizeof *out);
    NevoEnv *env = NULL;
    NevoStatus st = nevo_env_new(name, NULL, 0, &env, err);
    if (st != NEVO_OK) return st;
    const NevoEnvSpec *s = nevo_env_spec(env);
    EnvCtx c = {.env = env, .n = o->quick ? 16 : 64, .odim = s->obs_dim, .adim = s->action_dim};
    c.isz = nevo_env_instance_size(env);
    c.insts = nevo_alloc_aligned(c.isz * (size_t)c.n);
    c.obs = nevo_alloc_aligned(sizeof(float) * (size_t)c.n * c.odim);
    c.rewards = nevo_alloc(sizeof(float) * (size_t)c.n);
    c.term = nevo_alloc(sizeof(bool) * (size_t)c.n);
    c.trunc = nevo_alloc(sizeof(bool) * (size_t)c.n);
    size_t na = (size_t)ENV_ACTION_SETS * c.n * c.adim;
    c.actions = nevo_alloc(sizeof(float) * na);
    NevoRng rng;
    nevo_rng_init(&rng, 1, NEVO_RNG_USER, 0, 0, 0);
    for (size_t i = 0; i < na; i++) {
        if (s->action_kind == NEVO_SPACE_DISCRETE) {
            c.actions[i] = (float)nevo_rng_below(&rng, (uint32_t)s->n_actions);
        } else {
            int d = (int)(i % (size_t)c.adim);
            double u = nevo_rng_uniform(&rng);
            c.actions[i] = (float)(s->action_low[d] + u * (s->action_high[d] - s->action_low[d]));
        }
    }
    c.next_seed = 1;
    for (int i = 0; i < c.n; i++)
        nevo_env_reset(env, c.insts + (size_t)i * c.isz, c.next_seed++, c.obs + (size_t)i * c.odim);
    Timing t = measure(o, env_work, &c, 1);
    out->steps_per_s = t.best;
    out->median_steps_per_s = t.median;
    out->cpu_share = t.cpu_share;
    out->steps = c.steps;
    out->episodes = c.episodes;
    for (int i = 0; i < c.n; i++) nevo_env_instance_free(env, c.insts + (size_t)i * c.isz); /* MuJoCo's mjData */
    free(c.insts);
    free(c.obs);
    free(c.rewards);
    free(c.term);
    free(c.trunc);
    free(c.actions);
    nevo_env_free(env);
    return NEVO_OK;
}

/* ---- forward -------------------------------------------------------------------- */

double nevo_bench_forward_work(void *vctx, long iters) {
    NevoBenchForwardCtx *c = vctx;
    for (long i = 0; i < iters; i++) {
        double t0 = nevo_bench_wall_s(); /* ~25 ns against calls of microseconds */
        nevo_policy_forward(c->p, c->params, c->p->nparams, c->net, c->obs, c->rows, c->out, c->scratch);
        double dt = nevo_bench_wall_s() - t0;
        if (c->fastest_s == 0.0 || dt < c->fastest_s) c->fastest_s = dt;
    }
    bench_sink = c->out[0];
    return (double)c->rows * (double)iters;
}

/* Distinct random networks; the rest of the population repeats them in fresh memory
 * (values do not change the speed, and drawing 10^8 normals would dominate the
 * benchmark's time). */
#define FWD_DISTINCT 16

NevoStatus nevo_bench_forward(const NevoBenchOptions *o, const NevoBenchForwardCase *fc,
                              double tanh_melems, NevoBenchForwardResult *out, NevoError *err) {
    memset(out, 0, sizeof *out);
    NevoEnvSpec spec = {0};
    spec.name = "bench";
    spec.obs_rank = 1;
    spec.obs_shape[0] = spec.obs_dim = fc->obs_dim;
    spec.action_kind = NEVO_SPACE_DISCRETE;
    spec.n_actions = fc->n_out;
    spec.action_dim = 1;
    NevoPolicyConfig pc = {0};
    pc.n_hidden = 2;
    pc.hidden[0] = pc.hidden[1] = fc->hidden;
    snprintf(pc.activation, sizeof pc.activation, "tanh");
    snprintf(pc.init, sizeof pc.init, "scaled");
    NevoPolicy *p = NULL;
    NevoStatus st = nevo_policy_new(&spec, &pc, 0, &p, err);
    if (st != NEVO_OK) return st;
    size_t np = p->nparams;
    int rows = fc->P * fc->B;
    float *params = nevo_alloc_aligned(sizeof(float) * np * (size_t)fc->P);
    for (int j = 0; j < fc->P; j++) {
        float *theta = params + (size_t)j * np;
        if (j >= FWD_DISTINCT) {
            memcpy(theta, params + (size_t)(j % FWD_DISTINCT) * np, sizeof(float) * np);
            continue;
        }
        /* the GA's "scaled" init: N(0, 1) / sqrt(fan_in) weights, zero biases */
        NevoRng init;
        nevo_rng_init(&init, 3, NEVO_RNG_USER, 0, (uint32_t)j, 0);
        for (int l = 0; l < p->n_layers; l++) {
            const NevoLayer *L = &p->layers[l];
            size_t nw = L->b_off - L->w_off;
            nevo_rng_fill_normal(&init, theta + L->w_off, nw);
            float scale = (float)(1.0 / sqrt((double)L->fan_in));
            for (size_t k = 0; k < nw; k++) theta[L->w_off + k] *= scale;
        }
    }
    int *net = nevo_alloc(sizeof(int) * (size_t)rows);
    for (int i = 0; i < rows; i++) net[i] = i / fc->B; /* each network's B rows together */
    float *obs = nevo_alloc_aligned(sizeof(float) * (size_t)rows * fc->obs_dim);
    NevoRng rng;
    nevo_rng_init(&rng, 2, NEVO_RNG_USER, 0, 0, 0);
    nevo_rng_fill_normal(&rng, obs, (size_t)rows * fc->obs_dim);
    float *outb = nevo_alloc_aligned(sizeof(float) * (size_t)rows * fc->n_out);
    float *scratch = nevo_alloc_aligned(sizeof(float) * nevo_policy_scratch_floats(p, rows));
    NevoBenchForwardCtx c = {p, params, net, obs, rows, outb, scratch, 0.0};
    Timing t = measure(o, nevo_bench_forward_work, &c, 1);
    out->nparams = np;
    out->flops_per_row = nevo_policy_flops(p);
    out->rows = rows;
    out->weight_bytes = 4.0 * (double)np * fc->P;
    out->gflops = t.best * out->flops_per_row * 1e-9;
    out->gflops_median = t.median * out->flops_per_row * 1e-9;
    out->gflops_fastest_call = (double)rows * out->flops_per_row / c.fastest_s * 1e-9;
    out->cpu_share = t.cpu_share;
    out->weight_gbs = t.best / fc->B * 4.0 * (double)np * 1e-9;
    out->bw_gbs = nevo_bench_read_bandwidth(o, params, np * (size_t)fc->P);
    out->tanh_share = tanh_melems > 0 ? t.best * 2.0 * fc->hidden / (tanh_melems * 1e6) : NAN;
    double blas_rows;
    nevo_bench_forward_blas(o, p, params, obs, fc->P, fc->B, outb, &blas_rows, &out->blas_max_diff);
    out->blas_gflops = blas_rows * out->flops_per_row * 1e-9;
    free(params);
    free(net);
    free(obs);
    free(outb);
    free(scratch);
    nevo_policy_free(p);
    return NEVO_OK;
}

#define TANH_N 4096

typedef struct TanhCtx {
    float x[TANH_N], y[TANH_N];
} TanhCtx;

/* The activation exactly as nevo_policy_forward applies it (the kernel set's tanh). */
static double tanh_work(void *vctx, long iters) {
    TanhCtx *c = vctx;
    for (long i = 0; i < iters; i++) {
        memcpy(c->y, c->x, sizeof c->y);
        nevo_kernel_activate(NEVO_ACT_TANH, c->y, TANH_N);
    }
    bench_sink = c->y[7];
    return (double)TANH_N * (double)iters;
}

double nevo_bench_tanh(const NevoBenchOptions *o) {
    TanhCtx *c = nevo_alloc_aligned(sizeof *c);
    for (int k = 0; k < TANH_N; k++) c->x[k] = -3.0f + 6.0f * (float)k / TANH_N;
    double r = measure(o, tanh_work, c, 1).best * 1e-6;
    free(c);
    return r;
}

const char *nevo_bench_kernels_name(void) { return nevo_kernels()->name; }

/* ---- end-to-end GA -------------------------------------------------------------- */

/* configs/cartpole_ga.json without the generation count. */
static const char *ga_config_json =
    "{\"env\": \"CartPole-v1\", \"algo\": \"ga\", \"seed\": 1, \"population\": 200, \"episodes\": 1,"
    " \"policy\": {\"hidden\": [64, 64], \"activation\": \"tanh\", \"init\": \"scaled\"},"
    " \"ga\": {\"sigma\": 0.05, \"truncation\": 20, \"elitism\": true,"
    " \"validation_candidates\": 10, \"validation_episodes\": 30}}";

NevoStatus nevo_bench_ga(const NevoBenchOptions *o, int threads, int generations,
                         NevoBenchGAResult *out, NevoError *err) {
    NevoBenchTrainResult tr;
    NevoStatus st = nevo_bench_train(o, ga_config_json, threads, 1, 0, generations, &tr, err);
    memset(out, 0, sizeof *out);
    out->threads = tr.threads;
    out->generations = tr.generations;
    out->frames = tr.frames;
    out->seconds = tr.seconds;
    out->frames_per_s = tr.frames_per_s;
    out->cpu_share = tr.cpu_share;
    return st;
}

/* A MinAtar forward row's GFLOP/s against the FMA peak (the caller names it), its
 * FLOPs counted as `share` of the dense-equivalent ones (1: dense-equivalent) */
static void minatar_gflops_row(NevoBenchResult *r, const NevoBenchLimits *lim, const NevoBenchForwardResult *fr,
                               double share) {
    nevo_bench_result_init(r, "forward", "GFLOP/s");
    r->value = fr->gflops * share;
    r->median = fr->gflops_median * share;
    r->cpu_share = fr->cpu_share;
    char ln[64];
    snprintf(ln, sizeof ln, "fma peak, 1 core (%s)", nevo_bench_isa_name(lim->isa));
    nevo_bench_result_limit(r, lim->peak_1c, ln);
}

/* The row above (named `name`) counted by the FMAs computed rather than
 * dense-equivalent: zero inputs' terms are skipped, so the dense count can pass the
 * peak. `what` says which terms: the kernels' (the lanes blocks') or the nonzero ones. */
static void emit_minatar_terms_row(const NevoBenchLimits *lim, const char *name, const char *what,
                                   double flops_per_row, const NevoBenchForwardResult *fr, NevoBenchEmit emit,
                                   void *ctx) {
    NevoBenchResult r;
    double f = flops_per_row / fr->flops_per_row;
    minatar_gflops_row(&r, lim, fr, f);
    snprintf(r.name, sizeof r.name, "%s, %s", name, what);
    snprintf(r.extra, sizeof r.extra,
             "\"flops_per_row\": %.0f, \"share_of_dense_equivalent\": %.4g, \"nonzero_flops_per_row\": %.0f, "
             "\"lanes_flops_per_row\": %.0f",
             flops_per_row, f, fr->nonzero_flops_per_row, fr->lanes_flops_per_row);
    emit_row(emit, ctx, &r);
}

/* The MinAtar net as a worker's one slot runs it (nevo_bench_forward_minatar_episode) */
static void emit_forward_minatar_episode(const NevoBenchLimits *lim, const char *game, int steps,
                                         const NevoBenchForwardResult *fr, NevoBenchEmit emit, void *ctx) {
    NevoBenchResult r;
    minatar_gflops_row(&r, lim, fr, 1.0);
    snprintf(r.name, sizeof r.name, "forward P=1 MinAtar net, %s obs, an episode a row a call",
             game + strlen("minatar/"));
    double rows_per_s = fr->gflops * 1e9 / fr->flops_per_row;
    snprintf(r.extra, sizeof r.extra,
             "\"kernels\": \"%s\", \"env\": \"%s\", \"P\": 1, \"B\": 1, \"steps\": %d, \"nparams\": %zu, "
             "\"dense_equivalent_flops_per_row\": %.0f, \"rows_per_s\": %.6g, \"us_per_call\": %.4g, "
             "\"input_density\": %.4g, \"weight_bytes\": %.0f",
             nevo_bench_kernels_name(), game, steps, fr->nparams, fr->flops_per_row, rows_per_s, 1e6 / rows_per_s,
             fr->input_density, fr->weight_bytes);
    emit_row(emit, ctx, &r);
    char name[sizeof r.name];
    snprintf(name, sizeof name, "forward P=1 MinAtar net, %s obs, an episode", game + strlen("minatar/"));
    emit_minatar_terms_row(lim, name, "nonzero terms", fr->nonzero_flops_per_row, fr, emit, ctx);
}

static void emit_forward_minatar(const NevoBenchLimits *lim, const char *game, int P, int B,
                                 const NevoBenchForwardResult *fr, NevoBenchEmit emit, void *ctx) {
    NevoBenchResult r;
    const char *g = game + strlen("minatar/");
    char bn[16] = "";
    if (B > 1) snprintf(bn, sizeof bn, " B=%d", B);
    minatar_gflops_row(&r, lim, fr, 1.0);
    snprintf(r.name, sizeof r.name, "forward P=%d%s MinAtar net, %s obs", P, bn, g);
    char ln[64];
    snprintf(r.extra, sizeof r.extra,
             "\"kernels\": \"%s\", \"env\": \"%s\", \"P\": %d, \"B\": %d, \"nparams\": %zu, "
             "\"dense_equivalent_flops_per_row\": %.0f, \"rows_per_s\": %.6g, \"input_density\": %.4g, "
             "\"weight_bytes\": %.0f, \"fastest_call_gflops\": %.6g",
             nevo_bench_kernels_name(), game, P, B, fr->nparams, fr->flops_per_row, fr->gflops * 1e9 / fr->flops_per_row,
             fr->input_density, fr->weight_bytes, fr->gflops_fastest_call);
    emit_row(emit, ctx, &r);
    /* at one row per network every term computed has a nonzero input; with B rows a
     * network the lanes blocks also compute the zero terms of inputs nonzero in another
     * row of the block */
    char name[sizeof r.name];
    snprintf(name, sizeof name, "forward P=%d%s MinAtar net, %s obs", P, bn, g);
    if (B > 1) emit_minatar_terms_row(lim, name, "FMAs computed", fr->lanes_flops_per_row, fr, emit, ctx);
    else emit_minatar_terms_row(lim, name, "nonzero terms", fr->nonzero_flops_per_row, fr, emit, ctx);
    nevo_bench_result_init(&r, "forward", "GB/s");
    snprintf(r.name, sizeof r.name, "forward P=%d%s MinAtar net, %s obs, weights", P, bn, g);
    r.value = fr->weight_gbs;
    r.median = fr->weight_gbs * fr->gflops_median / fr->gflops;
    r.cpu_share = fr->cpu_share;
    snprintf(ln, sizeof ln, "read bw over the %.3g MiB weights", fr->weight_bytes / (1024.0 * 1024.0));
    nevo_bench_result_limit(&r, fr->bw_gbs, ln);
    snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"B\": %d, \"weight_bytes\": %.0f", P, B, fr->weight_bytes);
    emit_row(emit, ctx, &r);
    if (B > 1) {
        /* B FMAs per weight streamed from memory: the path's own roofline is the rate a
         * loop doing only that reaches (below both the FMA peak and the bandwidth where
         * the two do not overlap) */
        if (isnan(fr->stream_fma_gbs)) return;
        nevo_bench_result_init(&r, "forward", "GB/s");
        snprintf(r.name, sizeof r.name, "forward P=%d%s MinAtar net, %s obs, weights against streaming", P, bn, g);
        r.value = fr->weight_gbs;
        r.median = fr->weight_gbs * fr->gflops_median / fr->gflops;
        r.cpu_share = fr->cpu_share;
        snprintf(ln, sizeof ln, "a bare loop streaming them, %d FMAs/weight", B);
        nevo_bench_result_limit(&r, fr->stream_fma_gbs, ln);
        snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"B\": %d", P, B);
        emit_row(emit, ctx, &r);
        nevo_bench_result_init(&r, "forward", "GFLOP/s");
        snprintf(r.name, sizeof r.name, "forward P=%d%s MinAtar net, %s obs, streamed by a bare loop", P, bn, g);
        r.value = r.median = fr->stream_fma_gbs * B / 2.0; /* 2 B FLOPs per 4-byte weight */
        snprintf(ln, sizeof ln, "fma peak, 1 core (%s)", nevo_bench_isa_name(lim->isa));
        nevo_bench_result_limit(&r, lim->peak_1c, ln);
        snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"B\": %d, \"stream_gbs\": %.4g, \"flops_per_byte\": %g", P, B,
                 fr->stream_fma_gbs, B / 2.0);
        emit_row(emit, ctx, &r);
        return;
    }
    /* the path's own roofline: the bytes it must read (zero inputs' rows skipped), at
     * the rate a bare loop reads those same rows in the same order */
    nevo_bench_result_init(&r, "forward", "GB/s");
    snprintf(r.name, sizeof r.name, "forward P=%d MinAtar net, %s obs, rows read", P, g);
    r.value = fr->weight_gbs * fr->read_bytes / fr->weight_bytes;
    r.median = r.value * fr->gflops_median / fr->gflops;
    r.cpu_share = fr->cpu_share;
    nevo_bench_result_limit(&r, fr->bare_read_gbs, "a bare loop reading the same rows");
    snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"read_bytes\": %.0f, \"read_share\": %.4g", P, fr->read_bytes,
             fr->read_bytes / fr->weight_bytes);
    emit_row(emit, ctx, &r);
    nevo_bench_result_init(&r, "forward", "GB/s");
    snprintf(r.name, sizeof r.name, "forward P=%d MinAtar net, %s obs, rows read by a bare loop", P, g);
    r.value = r.median = fr->bare_read_gbs;
    snprintf(ln, sizeof ln, "read bw (%.2f of the weights, scattered)", fr->read_bytes / fr->weight_bytes);
    nevo_bench_result_limit(&r, fr->bw_gbs, ln);
    snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"read_bytes\": %.0f", P, fr->read_bytes);
    emit_row(emit, ctx, &r);
}

static void emit_forward_factored(int P, int rank, const NevoBenchFactoredResult *fa, NevoBenchEmit emit,
                                  void *ctx) {
    NevoBenchResult r;
    nevo_bench_result_init(&r, "forward", "rows/s");
    snprintf(r.name, sizeof r.name, "forward P=%d MinAtar net, breakout obs, factored rank %d, 16-row calls", P, rank);
    r.value = r.median = fa->factored_rows_s;
    nevo_bench_result_limit(&r, fa->shared_rows_s, "one shared network, the same rows");
    snprintf(r.extra, sizeof r.extra,
             "\"kernels\": \"%s\", \"P\": %d, \"rank\": %d, \"built_rows_s\": %.6g, \"factored_over_built\": %.4g, "
             "\"factor_row_bytes\": %.0f, \"network_bytes\": %.0f",
             nevo_bench_kernels_name(), P, rank, fa->built_rows_s, fa->factored_rows_s / fa->built_rows_s,
             fa->factor_bytes, fa->net_bytes);
    emit_row(emit, ctx, &r);
    nevo_bench_result_init(&r, "forward", "rows/s");
    snprintf(r.name, sizeof r.name, "forward P=%d MinAtar net, breakout obs, rank-%d members built, 16-row calls", P,
             rank);
    r.value = r.median = fa->built_rows_s;
    nevo_bench_result_limit(&r, fa->shared_rows_s, "one shared network, the same rows");
    snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"rank\": %d", P, rank);
    emit_row(emit, ctx, &r);
}

/* A training benchmark's rows: frames/s (against threads x the 1-thread rate, or, for a
 * pipelined run (fused_k > 0), against the fused run's kframes/s on the same threads),
 * the share of threads x wall spent in inference and env steps, and, where the
 * evaluator built the networks, that share with the building added. */
static void emit_train(const char *algo, const char *env, const NevoBenchTrainResult *tr, double fps1_k,
                       double fused_k, NevoBenchEmit emit, void *ctx) {
    NevoBenchResult r;
    nevo_bench_result_init(&r, "ga", "kframes/s");
    char layout[64] = "";
    if (tr->pipeline > 1) snprintf(layout, sizeof layout, ", pipeline %d", tr->pipeline);
    if (tr->warm_generations > 0)
        snprintf(layout + strlen(layout), sizeof layout - strlen(layout), ", from generation %d", tr->warm_generations);
    snprintf(r.name, sizeof r.name, "%s %s, %d thread%s%s", algo, env, tr->threads, tr->threads > 1 ? "s" : "",
             layout);
    r.value = tr->frames_per_s * 1e-3;
    r.median = NAN;
    if (tr->threads == 1) r.cpu_share = tr->cpu_share;
    if (fused_k > 0) {
        nevo_bench_result_limit(&r, fused_k, "fused layout, same threads");
    } else if (tr->threads > 1) {
        char ln[64];
        snprintf(ln, sizeof ln, "%d x 1-thread frames/s", tr->threads);
        nevo_bench_result_limit(&r, tr->threads * fps1_k, ln);
    }
    double tw = tr->threads * tr->seconds;
    /* shares of threads x wall: inside the evaluator but none of its stages (queue
     * handling, waiting), and of wall time outside the evaluator */
    double other = (tr->threads * tr->eval_s - tr->forward_s - tr->env_s - tr->build_s) / tw;
    double outside = (tr->seconds - tr->eval_s) / tr->seconds;
    snprintf(r.extra, sizeof r.extra,
             "\"algo\": \"%s\", \"env\": \"%s\", \"threads\": %d, \"pipeline\": %d, \"warm_generations\": %d, "
             "\"generations\": %d, \"frames\": %lld, "
             "\"seconds\": %.4g, \"frames_per_s\": %.6g, \"cores_busy\": %.3g, \"forward_share\": %.4g, "
             "\"env_share\": %.4g, \"build_share\": %.4g, \"evaluator_other_share\": %.4g, "
             "\"outside_evaluator_share\": %.4g",
             algo, env, tr->threads, tr->pipeline, tr->warm_generations, tr->generations, tr->frames, tr->seconds,
             tr->frames_per_s,
             tr->cpu_share * tr->threads, tr->forward_s / tw, tr->env_s / tw, tr->build_s / tw, other, outside);
    emit_row(emit, ctx, &r);
    nevo_bench_result_init(&r, "ga", "% busy");
    snprintf(r.name, sizeof r.name, "%s %s, %d thread%s%s: inference + env", algo, env, tr->threads,
             tr->threads > 1 ? "s" : "", layout);
    r.value = 100.0 * (tr->forward_s + tr->env_s) / tw;
    r.median = NAN;
    nevo_bench_result_limit(&r, 100.0, "threads x wall time");
    snprintf(r.extra, sizeof r.extra,
             "\"forward_pct\": %.3g, \"env_pct\": %.3g, \"materialise_select_update_pct\": %.3g",
             100.0 * tr->forward_s / tw, 100.0 * tr->env_s / tw, 100.0 * outside);
    emit_row(emit, ctx, &r);
    if (tr->build_s <= 0.0) return;
    /* networks built inside the evaluator (as their episodes start): that is evaluation work
     * too, and what is left of threads x wall is queue handling, waiting and the
     * algorithm's own steps */
    nevo_bench_result_init(&r, "ga", "% busy");
    snprintf(r.name, sizeof r.name, "%s %s, %d thread%s%s: + building networks", algo, env, tr->threads,
             tr->threads > 1 ? "s" : "", layout);
    r.value = 100.0 * (tr->forward_s + tr->env_s + tr->build_s) / tw;
    r.median = NAN;
    nevo_bench_result_limit(&r, 100.0, "threads x wall time");
    snprintf(r.extra, sizeof r.extra,
             "\"build_pct\": %.3g, \"evaluator_other_pct\": %.3g, \"outside_evaluator_pct\": %.3g",
             100.0 * tr->build_s / tw, 100.0 * other, 100.0 * outside);
    emit_row(emit, ctx, &r);
}

/* ---- machine and the whole run -------------------------------------------------- */

void nevo_bench_machine(NevoBenchMachine *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->model, sizeof m->model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0) continue;
            char *v = strchr(line, ':');
            if (!v) continue;
            v++;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = '\0';
            snprintf(m->model, sizeof m->model, "%s", v);
            break;
        }
        fclose(f);
    }
    m->cpus = nevo_cpu_count();
#ifdef _SC_LEVEL1_DCACHE_SIZE
    m->l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    m->l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    m->l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (m->l1d < 0) m->l1d = 0;
    if (m->l2 < 0) m->l2 = 0;
    if (m->l3 < 0) m->l3 = 0;
    m->isa = nevo_bench_isa_best();
}

static void shape_name(char *buf, size_t n, const NevoBenchForwardCase *fc) {
    snprintf(buf, n, "P=%d %d-%d obs=%d out=%d B=%d", fc->P, fc->hidden, fc->hidden, fc->obs_dim, fc->n_out,
             fc->B);
}

static void emit_forward(const NevoBenchLimits *lim, const NevoBenchForwardCase *fc,
                         const NevoBenchForwardResult *fr, NevoBenchEmit emit, void *ctx) {
    char shape[80];
    shape_name(shape, sizeof shape, fc);
    /* roofline: weights stream from wherever they live at bw_gbs, once per network per
     * call; everything else (activations, one network's layer) stays in L1/L2 */
    double intensity = fr->flops_per_row * fc->B / (4.0 * (double)fr->nparams); /* FLOP per weight byte */
    double bw_roof = fr->bw_gbs * intensity;
    double roof = bw_roof < lim->peak_1c ? bw_roof : lim->peak_1c;
    NevoBenchResult r;
    nevo_bench_result_init(&r, "forward", "GFLOP/s");
    snprintf(r.name, sizeof r.name, "forward %s", shape);
    r.value = fr->gflops;
    r.median = fr->gflops_median;
    r.cpu_share = fr->cpu_share;
    char ln[64];
    snprintf(ln, sizeof ln, "fma peak, 1 core (%s)", nevo_bench_isa_name(lim->isa));
    nevo_bench_result_limit(&r, lim->peak_1c, ln);
    snprintf(r.extra, sizeof r.extra,
             "\"kernels\": \"%s\", \"P\": %d, \"B\": %d, \"obs_dim\": %d, \"n_out\": %d, \"hidden\": [%d, %d], \"activation\": \"tanh\", "
             "\"rows\": %ld, \"nparams\": %zu, \"flops_per_row\": %.0f, \"rows_per_s\": %.6g, "
             "\"weight_bytes\": %.0f, \"flop_per_weight_byte\": %.4g, \"weights_bw_gbs\": %.6g, "
             "\"roofline_gflops\": %.6g, \"ratio_roofline\": %.4g, \"bound\": \"%s\", \"tanh_share_est\": %.3g, "
             "\"fastest_call_gflops\": %.6g",
             nevo_bench_kernels_name(), fc->P, fc->B, fc->obs_dim, fc->n_out, fc->hidden, fc->hidden, fr->rows, fr->nparams, fr->flops_per_row,
             fr->gflops * 1e9 / fr->flops_per_row, fr->weight_bytes, intensity, fr->bw_gbs, roof,
             fr->gflops / roof, bw_roof < lim->peak_1c ? "bandwidth" : "compute", fr->tanh_share,
             fr->gflops_fastest_call);
    emit_row(emit, ctx, &r);

    nevo_bench_result_init(&r, "forward", "GB/s");
    snprintf(r.name, sizeof r.name, "forward %s weights", shape);
    r.value = fr->weight_gbs;
    r.median = fr->weight_gbs * fr->gflops_median / fr->gflops;
    r.cpu_share = fr->cpu_share;
    double mib = fr->weight_bytes / (1024.0 * 1024.0);
    snprintf(ln, sizeof ln, "read bw over the %.3g MiB weights", mib);
    nevo_bench_result_limit(&r, fr->bw_gbs, ln);
    snprintf(r.extra, sizeof r.extra, "\"P\": %d, \"B\": %d, \"weight_bytes\": %.0f",
             fc->P, fc->B, fr->weight_bytes);
    emit_row(emit, ctx, &r);

    if (isnan(fr->blas_gflops)) return; /* no OpenBLAS on this machine */
    nevo_bench_result_init(&r, "forward", "GFLOP/s");
    snprintf(r.name, sizeof r.name, "forward %.60s, OpenBLAS sgemm", shape);
    r.value = fr->blas_gflops;
    r.median = NAN;
    nevo_bench_result_limit(&r, fr->gflops, "nevo's kernels, same case");
    snprintf(r.extra, sizeof r.extra,
             "\"blas\": \"%s\", \"P\": %d, \"B\": %d, \"nevo_gflops\": %.6g, \"nevo_over_blas\": %.4g, "
             "\"max_abs_diff\": %.3g",
             nevo_bench_blas(), fc->P, fc->B, fr->gflops, fr->gflops / fr->blas_gflops, fr->blas_max_diff);
    emit_row(emit, ctx, &r);
}

NevoStatus nevo_bench_run(const NevoBenchOptions *o, unsigned groups, NevoBenchEmit emit, void *ctx,
                          NevoError *err) {
    NevoStatus st = NEVO_OK;
    NevoPool *pool = nevo_pool_new(o->threads > 0 ? o->threads : 1);
    NevoBenchLimits lim = {0};
    lim.isa = nevo_bench_isa_best();
    lim.threads = nevo_pool_threads(pool);
    if (groups & (NEVO_BENCH_PEAK | NEVO_BENCH_FORWARD | NEVO_BENCH_BACKWARD))
        nevo_bench_peak(o, pool, &lim, groups & NEVO_BENCH_PEAK ? emit : NULL, ctx);
    if (groups & NEVO_BENCH_MEMORY) nevo_bench_memory(o, pool, &lim, emit, ctx);

    if (groups & NEVO_BENCH_ENVS) {
        for (int i = 0; i < nevo_env_count(); i++) {
            const char *name = nevo_env_class_at(i)->spec.name;
            NevoBenchEnvResult er;
            NevoError env_err = {0};
            NevoBenchResult r;
            nevo_bench_result_init(&r, "envs", "Msteps/s");
            snprintf(r.name, sizeof r.name, "env %s, 1 core", name);
            if (nevo_bench_env(o, name, &er, &env_err) != NEVO_OK) {
                /* an env that cannot be built here (a missing model file) is reported, not fatal */
                r.value = r.median = NAN;
                char msg[400];
                size_t len = strnlen(env_err.msg, sizeof msg - 1);
                memcpy(msg, env_err.msg, len);
                msg[len] = '\0';
                for (char *q = msg; *q; q++) /* keep the JSON member valid */
                    if (*q == '"' || *q == '\\' || (unsigned char)*q < 0x20) *q = '\'';
                snprintf(r.extra, sizeof r.extra, "\"env\": \"%s\", \"error\": \"%s\"", name, msg);
                emit_row(emit, ctx, &r);
                continue;
            }
            r.value = er.steps_per_s * 1e-6;
            r.median = er.median_steps_per_s * 1e-6;
            r.cpu_share = er.cpu_share;
            char mean_len[32] = "null"; /* no episode ended */
            if (er.episodes > 0) snprintf(mean_len, sizeof mean_len, "%.4g", (double)er.steps / (double)er.episodes);
            snprintf(r.extra, sizeof r.extra,
                     "\"env\": \"%s\", \"steps_per_s\": %.6g, \"ns_per_step\": %.4g, \"instances\": %d, "
                     "\"mean_episode_length\": %s",
                     name, er.steps_per_s, 1e9 / er.steps_per_s, o->quick ? 16 : 64, mean_len);
            emit_row(emit, ctx, &r);
        }
    }

    if (groups & NEVO_BENCH_FORWARD) {
        double tanh_rate = nevo_bench_tanh(o);
        NevoBenchResult r;
        nevo_bench_result_init(&r, "forward", "Melem/s");
        snprintf(r.name, sizeof r.name, "tanh (%s kernels), 1 core", nevo_bench_kernels_name());
        r.value = tanh_rate;
        r.median = NAN;
        snprintf(r.extra, sizeof r.extra, "\"kernels\": \"%s\", \"ns_per_elem\": %.4g",
                 nevo_bench_kernels_name(), 1e3 / tanh_rate);
        emit_row(emit, ctx, &r);
        int big_p = o->quick ? 64 : 1024;
        const NevoBenchForwardCase cases[] = {
            {256, 1, 4, 2, 64},   {256, 16, 4, 2, 64},    {64, 1, 64, 8, 64},     {256, 1, 64, 8, 64},
            {256, 16, 64, 8, 64}, {big_p, 1, 64, 8, 64},  {64, 1, 64, 8, 256},    {big_p, 1, 64, 8, 256},
            {big_p, 16, 64, 8, 256},
            /* the population's weights within L2 (16 x 34 KB): the compute-bound case where
             * no network's weights come from beyond L2 */
            {16, 16, 64, 8, 64},
            /* one network's row, its weights in L2 from call to call: an evaluator worker's
             * call with one slot (networks too big for more in half its L2) */
            {1, 1, 64, 8, 256},
            /* large per-network batches (one network over many episodes), where a BLAS
             * library's blocking may pay: compared with OpenBLAS when it is present */
            {16, 64, 64, 8, 256},   {16, 256, 64, 8, 256},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            NevoBenchForwardResult fr;
            if ((st = nevo_bench_forward(o, &cases[k], tanh_rate, &fr, err)) != NEVO_OK) goto done;
            emit_forward(&lim, &cases[k], &fr, emit, ctx);
        }
        /* the MinAtar net at one row per network (the GA's case: bound by reading the
         * weights), at 16 rows per network (episodes of one network side by side: 16
         * times the FLOPs per weight byte, and at that intensity bound by memory and
         * FMAs together) and at 64 (enough FLOPs per byte for the FMAs to bound it, where
         * reading the weights overlaps them: on an AMD EPYC it does not, and the FMAs
         * computed come to 0.35-0.48 of the peak, docs/BENCHMARKS.md) */
        static const char *const minatar_games[] = {"minatar/breakout", "minatar/seaquest"};
        /* first as training runs it: one network, its weights in cache, a row a call */
        for (size_t k = 0; k < sizeof minatar_games / sizeof minatar_games[0]; k++) {
            NevoBenchForwardResult fr;
            int steps = o->quick ? 50 : 200;
            if ((st = nevo_bench_forward_minatar_episode(o, minatar_games[k], steps, &fr, err)) != NEVO_OK)
                goto done;
            emit_forward_minatar_episode(&lim, minatar_games[k], steps, &fr, emit, ctx);
        }
        static const int minatar_B[] = {1, 16, 64};
        for (size_t b = 0; b < sizeof minatar_B / sizeof minatar_B[0]; b++) {
            for (size_t k = 0; k < sizeof minatar_games / sizeof minatar_games[0]; k++) {
                NevoBenchForwardResult fr;
                int P = o->quick ? 32 : 256;
                if ((st = nevo_bench_forward_minatar(o, minatar_games[k], P, minatar_B[b], &fr, err)) != NEVO_OK)
                    goto done;
                emit_forward_minatar(&lim, minatar_games[k], P, minatar_B[b], &fr, emit, ctx);
            }
        }
        /* ES's members at low rank through the factored forward, against one shared
         * network on the same rows (EGGROLL's 0.91 on an H100) and built */
        static const int ranks[] = {1, 4};
        for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++) {
            NevoBenchFactoredResult fa;
            int P = o->quick ? 64 : 256;
            if ((st = nevo_bench_forward_factored(o, "minatar/breakout", P, ranks[k], &fa, err)) != NEVO_OK) goto done;
            emit_forward_factored(P, ranks[k], &fa, emit, ctx);
        }
    }

    if ((groups & NEVO_BENCH_BACKWARD) && (st = nevo_bench_backward(o, &lim, emit, ctx, err)) != NEVO_OK) goto done;
    if ((groups & NEVO_BENCH_GPU) && (st = nevo_bench_gpu(o, emit, ctx, err)) != NEVO_OK) goto done;
    if ((groups & NEVO_BENCH_ACTOR) && (st = nevo_bench_actor(o, emit, ctx, err)) != NEVO_OK) goto done;

    if (groups & NEVO_BENCH_GA) {
        int gens = o->quick ? 2 : 8;
        int tcounts[2] = {1, o->threads > 1 ? o->threads : 0};
        double fps1 = 0.0;
        for (int k = 0; k < 2 && tcounts[k] > 0; k++) {
            NevoBenchGAResult gr;
            if ((st = nevo_bench_ga(o, tcounts[k], gens, &gr, err)) != NEVO_OK) goto done;
            NevoBenchResult r;
            nevo_bench_result_init(&r, "ga", "kframes/s");
            snprintf(r.name, sizeof r.name, "ga CartPole-v1, %d thread%s", gr.threads, gr.threads > 1 ? "s" : "");
            r.value = gr.frames_per_s * 1e-3;
            r.median = NAN;
            /* with more threads a CPU share below 1 is also the run's serial part */
            if (gr.threads == 1) r.cpu_share = gr.cpu_share;
            if (k == 0) {
                fps1 = r.value;
            } else {
                char ln[64];
                snprintf(ln, sizeof ln, "%d x 1-thread frames/s", gr.threads);
                nevo_bench_result_limit(&r, gr.threads * fps1, ln);
            }
            snprintf(r.extra, sizeof r.extra,
                     "\"threads\": %d, \"generations\": %d, \"population\": 200, \"frames\": %lld, "
                     "\"seconds\": %.4g, \"frames_per_s\": %.6g, \"cores_busy\": %.3g%s",
                     gr.threads, gr.generations, gr.frames, gr.seconds, gr.frames_per_s, gr.cpu_share * gr.threads,
                     k > 0 ? ", \"scaling_efficiency\": " : "");
            if (k > 0) {
                size_t used = strlen(r.extra);
                snprintf(r.extra + used, sizeof r.extra - used, "%.4g", r.ratio);
            }
            emit_row(emit, ctx, &r);
        }
    }
    if (groups & NEVO_BENCH_GA) {
        /* the MinAtar training configs, end to end, with where the time goes */
        static const char *const train_cfgs[2][2] = {
            {"ga", "{\"env\": \"minatar/breakout\", \"algo\": \"ga\", \"seed\": 1, \"population\": 256,"
                   " \"episodes\": 1, \"max_episode_steps\": 2000,"
                   " \"policy\": {\"conv_filters\": [16], \"hidden\": [128], \"activation\": \"relu\", \"init\": \"scaled\"},"
                   " \"ga\": {\"sigma\": 0.02, \"truncation\": 20, \"validation_candidates\": 10, \"validation_episodes\": 5}}"},
            {"es", "{\"env\": \"minatar/breakout\", \"algo\": \"es\", \"seed\": 1, \"population\": 256,"
                   " \"episodes\": 1, \"max_episode_steps\": 2000,"
                   " \"policy\": {\"conv_filters\": [16], \"hidden\": [128], \"activation\": \"relu\", \"init\": \"normc\"},"
                   " \"es\": {\"sigma\": 0.02, \"lr\": 0.01, \"obs_norm\": false, \"center_episodes\": 5}}"},
        };
        /* the GA and ES from scratch, then the GA later in training: from generation 200
         * (of the ~490 of a 5M-frame run) Breakout generations take ~12k frames instead
         * of ~3k, while materialising the population costs the same */
        static const int run_cfg[3] = {0, 1, 0};
        const int run_warm[3] = {0, 0, o->quick ? 2 : 200};
        for (int a = 0; a < 3; a++) {
            const char *algo = train_cfgs[run_cfg[a]][0], *json = train_cfgs[run_cfg[a]][1];
            int gens = o->quick ? 1 : 12;
            /* 1 thread, then all of them, and from scratch the GA's pipelined layout
             * (thread 0 inference, the rest env steps) on as many: taking turns, so the
             * ratios between them see the same host */
            NevoBenchTrainRun runs[4] = {{1, 1}};
            int n = 1;
            if (o->threads > 1) {
                runs[n++] = (NevoBenchTrainRun){o->threads, 1};
                for (int depth = 2; a == 0 && depth <= 4; depth *= 2)
                    runs[n++] = (NevoBenchTrainRun){o->threads, depth};
            }
            NevoBenchTrainResult tr[4];
            if ((st = nevo_bench_train_set(o, json, runs, n, run_warm[a], gens, tr, err)) != NEVO_OK) goto done;
            double fps1 = tr[0].frames_per_s * 1e-3;
            emit_train(algo, "minatar/breakout", &tr[0], fps1, 0.0, emit, ctx);
            if (n > 1) emit_train(algo, "minatar/breakout", &tr[1], fps1, 0.0, emit, ctx);
            for (int k = 2; k < n; k++) /* pipelined: against the fused layout on as many threads */
                emit_train(algo, "minatar/breakout", &tr[k], fps1, tr[1].frames_per_s * 1e-3, emit, ctx);
        }
    }

    if (groups & NEVO_BENCH_NOVELTY) {
        int sizes[2] = {o->quick ? 1000 : 10000, o->quick ? 10000 : 100000};
        for (int k = 0; k < 2; k++) {
            NevoBenchNoveltyResult nr;
            if ((st = nevo_bench_novelty(o, sizes[k], 1000, 2, &nr, err)) != NEVO_OK) goto done;
            NevoBenchResult r;
            nevo_bench_result_init(&r, "novelty", "Mdist/s");
            snprintf(r.name, sizeof r.name, "k-NN k=10, archive %d x 2-D, 1000 queries, 1 core", sizes[k]);
            r.value = nr.distances_per_s * 1e-6;
            r.median = NAN;
            r.cpu_share = nr.cpu_share;
            snprintf(r.extra, sizeof r.extra,
                     "\"archive\": %d, \"queries\": 1000, \"dim\": 2, \"k\": 10, \"seconds_per_generation\": %.4g",
                     sizes[k], nr.seconds_per_call);
            emit_row(emit, ctx, &r);
        }
    }

    if (groups & NEVO_BENCH_MUJOCO) {
        for (int i = 0; i < nevo_env_count(); i++) {
            const char *name = nevo_env_class_at(i)->spec.name;
            if (!nevo_bench_is_mujoco(name)) continue;
            NevoBenchMujocoResult mr;
            if ((st = nevo_bench_mujoco(o, name, &mr, err)) != NEVO_OK) goto done;
            NevoBenchResult r;
            nevo_bench_result_init(&r, "mujoco", "ksteps/s");
            const char *robot = name + strlen("mujoco/"); /* the group column says mujoco */
            snprintf(r.name, sizeof r.name, "%s bare mj_step x%d%s, 1 core", robot, mr.frame_skip,
                     mr.rne_post ? "+rnePost" : "");
            r.value = mr.bare_steps_per_s * 1e-3;
            r.median = mr.bare_median * 1e-3;
            r.cpu_share = mr.bare_cpu_share;
            snprintf(r.extra, sizeof r.extra,
                     "\"env\": \"%s\", \"loop\": \"bare\", \"threads\": 1, \"steps_per_s\": %.6g, "
                     "\"frame_skip\": %d, \"rne_post\": %s, \"instances\": %d, \"episodes\": %lld, "
                     "\"replay_mismatches\": %lld, \"reset_us\": %.4g",
                     name, mr.bare_steps_per_s, mr.frame_skip, mr.rne_post ? "true" : "false", mr.instances,
                     mr.bare_episodes, mr.replay_mismatches, mr.bare_reset_us);
            emit_row(emit, ctx, &r);

            double env1 = mr.env_steps_per_s * 1e-3;
            char ep_len[32] = "null"; /* no episode ended */
            if (isfinite(mr.episode_length)) snprintf(ep_len, sizeof ep_len, "%.4g", mr.episode_length);
            nevo_bench_result_init(&r, "mujoco", "ksteps/s");
            snprintf(r.name, sizeof r.name, "%s nevo_env_step, 1 core", robot);
            r.value = env1;
            r.median = mr.env_median * 1e-3;
            r.cpu_share = mr.env_cpu_share;
            nevo_bench_result_limit(&r, mr.bare_steps_per_s * 1e-3, "bare mj_step loop, 1 core");
            snprintf(r.extra, sizeof r.extra,
                     "\"env\": \"%s\", \"loop\": \"env\", \"threads\": 1, \"steps_per_s\": %.6g, "
                     "\"bare_steps_per_s\": %.6g, \"env_over_bare\": %.4g, \"instances\": %d, "
                     "\"episodes\": %lld, \"episode_length\": %s, \"reset_us\": %.4g, "
                     "\"bare_reset_us\": %.4g, \"rne_post_us\": %.4g, \"rne_post_needed\": %s",
                     name, mr.env_steps_per_s, mr.bare_steps_per_s, r.ratio, mr.instances, mr.env_episodes,
                     ep_len, mr.env_reset_us, mr.bare_reset_us, mr.rne_us,
                     mr.rne_post ? "true" : "false");
            emit_row(emit, ctx, &r);

            if (mr.threads2 == 2) {
                nevo_bench_result_init(&r, "mujoco", "ksteps/s");
                snprintf(r.name, sizeof r.name, "%s nevo_env_step, 2 threads", robot);
                r.value = mr.env2_steps_per_s * 1e-3;
                r.median = mr.env2_median * 1e-3;
                r.cpu_share = mr.env2_cpu_share;
                nevo_bench_result_limit(&r, 2 * env1, "2 x 1-thread env steps/s");
                snprintf(r.extra, sizeof r.extra,
                         "\"env\": \"%s\", \"loop\": \"env\", \"threads\": 2, \"steps_per_s\": %.6g, "
                         "\"instances_per_thread\": %d, \"scaling_efficiency\": %.4g",
                         name, mr.env2_steps_per_s, mr.instances, r.ratio);
                emit_row(emit, ctx, &r);
            }
        }
    }
done:
    nevo_pool_free(pool);
    return st;
}
