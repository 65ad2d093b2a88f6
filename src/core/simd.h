/* Compiler attributes for the loops that run per weight or per observation float
 * (internal). */
#ifndef NEVO_SIMD_H
#define NEVO_SIMD_H

/* The function is also compiled for x86-64-v3/v4 (target_clones, picked at load time):
 * wider vectors, and the hardware FMA in place of libm's software fma where the CPU has
 * one. Not under ThreadSanitizer, whose instrumentation GCC's target_clones cannot
 * build. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define NEVO_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NEVO_KERNEL_CLONES
#endif

/* Lets the compiler vectorise a function's loops at -O2, where GCC 12's cost model
 * leaves even a plain scaled copy scalar (the same IEEE operations, so the same bits). */
#if defined(__GNUC__) && !defined(__clang__)
#define NEVO_VECTORIZE __attribute__((optimize("tree-vectorize")))
#else
#define NEVO_VECTORIZE
#endif

#endif
