/* Per-row compute kernels behind nevo_policy_forward (internal). Each output is
 * accumulated in a fixed order (inputs in ascending index, one fused multiply-add per
 * term), so results are identical whatever SIMD width the compiler or the CPU uses. */
#ifndef NEVO_KERNELS_H
#define NEVO_KERNELS_H

#include "nevo/policy.h"

/* x86-64: one binary carries AVX-512, AVX2+FMA and baseline versions of each kernel and
 * picks one at load time (ifunc), so it runs on any x86-64 CPU and uses the widest
 * units present. The baseline computes fmaf in software: slow, same results. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NEVO_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NEVO_KERNEL_CLONES
#endif

/* y (out) = b + x (in) @ W (in, out) */
void nevo_kernel_dense_row(const float *W, const float *b, const float *x, int in, int out, float *y);
/* "valid" convolution of one HWC image x into HWC y */
void nevo_kernel_conv_row(const NevoLayer *L, const float *W, const float *b, const float *x, float *y);
void nevo_kernel_activate(NevoActivation act, float *y, int n);

#endif
