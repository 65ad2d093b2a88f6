/* The CUDA backend's measurements of its device (internal; `nevo bench --only gpu`).
 * Defined in backend_cuda.cu, so only in a CUDA=1 build (NEVO_CUDA). */
#ifndef NEVO_BACKEND_CUDA_H
#define NEVO_BACKEND_CUDA_H

#include <stddef.h>

#include "nevo/policy.h"

#ifdef NEVO_CUDA
/* Device 0's name, multiprocessors and L2 bytes; 0 where there is no device. */
int nevo_cuda_device(char *name, size_t size, int *sms, size_t *l2);
/* The FP32 fused multiply-add rate measured (FLOP/s, an FMA counted as 2): 8 independent
 * chains per thread, 8 blocks of 256 threads per multiprocessor, best of 5. */
double nevo_cuda_fma_peak(void);
/* Device-memory bandwidth measured by a 2 GiB copy (bytes read plus bytes written per
 * second), best of 5. */
double nevo_cuda_copy_bandwidth(void);
/* Host <-> device bandwidth (bytes per second, best of 5): `streams` copies of `bytes`
 * each, between pinned host memory and the device, queued on as many streams at once
 * (to_device: up, else down). */
double nevo_cuda_link_bandwidth(size_t bytes, int streams, int to_device);
/* Seconds per forward of n rows (row i through network which[i] of nets rows of params
 * at stride) on device 0: *call_s the whole call as the evaluator makes it (inputs up,
 * kernels, outputs back; host clock), *kernels_s the kernels alone on inputs already on
 * the device (device events); each the best of reps after a warm-up. */
void nevo_cuda_time_forward(const NevoPolicy *p, const float *params, size_t stride, int nets, const int *which,
                            const float *obs, int n, int reps, double *call_s, double *kernels_s);
/* Seconds per forward of the n rows through their bases (row i's network base[i] of
 * the `bases` at theta, stride apart; base NULL: all network 0) (*shared_s, the kernels
 * alone) and through low-rank members of them at `rank` (row i member which[i], whose
 * compact slice is at z + which[i] nevo_lowrank_floats(p, rank); sign sigma 0.02): the
 * factored forward's kernels alone (*factored_s), its whole call (*call_s), and its
 * corrections alone, the conv layers' (corr_s[0]) and the dense layers' (corr_s[1]). */
void nevo_cuda_time_factored(const NevoPolicy *p, const float *theta, int bases, size_t stride, const int *base,
                             int rank, const float *z, int members, const int *which, const float *obs, int n,
                             int reps, double *shared_s, double *factored_s, double *call_s, double corr_s[2]);
#endif

#endif
