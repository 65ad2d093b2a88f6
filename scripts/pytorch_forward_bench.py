#!/usr/bin/python3
# The PyTorch side of docs/BENCHMARKS.md ("Versus PyTorch"): the same population shapes as
# `nevo bench --only forward`, P different networks evaluated with batched matmul (baddbmm)
# and, for the MinAtar net, a grouped convolution; one thread. Needs PyTorch, e.g. Debian's
# python3-torch (not a nevo dependency):  apt-get install python3-torch && /usr/bin/python3 scripts/pytorch_forward_bench.py
import time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
# Which PyTorch, and what it computes with: the same shapes run at very different rates
# on the reference BLAS, OpenBLAS and MKL / oneDNN.
print("torch %s, %d thread, mkl %s, mkldnn %s" % (torch.__version__, torch.get_num_threads(),
      torch.backends.mkl.is_available(), torch.backends.mkldnn.is_available()))
def timeit(fn, flops):
    fn()
    best = 1e9
    for _ in range(5):
        n = 0; t0 = time.perf_counter()
        while True:
            fn(); n += 1
            dt = time.perf_counter() - t0
            if dt > 0.2: break
        best = min(best, dt / n)
    return flops / best / 1e9
def mlp(P, B, obs, h, out):
    x = torch.randn(P, B, obs)
    Ws = [torch.randn(P, obs, h) / obs**.5, torch.randn(P, h, h) / h**.5, torch.randn(P, h, out) / h**.5]
    bs = [torch.zeros(P, 1, h), torch.zeros(P, 1, h), torch.zeros(P, 1, out)]
    def f():
        with torch.no_grad():
            y = torch.tanh(torch.baddbmm(bs[0], x, Ws[0]))
            y = torch.tanh(torch.baddbmm(bs[1], y, Ws[1]))
            return torch.baddbmm(bs[2], y, Ws[2])
    flops = 2.0 * P * B * (obs * h + h * h + h * out)
    return timeit(f, flops)
def minatar(P, C, density, B):
    x = (torch.rand(B, P * C, 10, 10) < density).float()
    conv = torch.nn.Conv2d(P * C, P * 16, 3, groups=P)
    W1 = torch.randn(P, 1024, 128) / 32; b1 = torch.zeros(P, 1, 128)
    W2 = torch.randn(P, 128, 6) / 11; b2 = torch.zeros(P, 1, 6)
    def f():
        with torch.no_grad():
            y = torch.relu(conv(x)).view(B, P, 16, 64).permute(1, 0, 3, 2).reshape(P, B, 1024)
            y = torch.relu(torch.baddbmm(b1, y, W1))
            return torch.baddbmm(b2, y, W2)
    flops = 2.0 * P * B * (8 * 8 * 16 * 9 * C + 1024 * 128 + 128 * 6)
    return timeit(f, flops)
for (P, B, obs, h, out) in [(256, 1, 64, 64, 8), (256, 16, 64, 64, 8), (1024, 1, 64, 256, 8), (1024, 16, 64, 256, 8),
                           (16, 16, 64, 64, 8), (16, 64, 64, 256, 8), (16, 256, 64, 256, 8)]:
    print("torch mlp P=%d %d-%d obs=%d out=%d B=%d: %.2f GFLOP/s" % (P, h, h, obs, out, B, mlp(P, B, obs, h, out)))
for B in (1, 16, 64):
    for (C, d, name) in [(4, 0.05, "breakout-like"), (10, 0.05, "seaquest-like")]:
        print("torch minatar P=256 C=%d (%s) B=%d: %.2f GFLOP/s dense-equivalent" % (C, name, B, minatar(256, C, d, B)))
