#!/usr/bin/python3
# The PyTorch side of nevo's supervised training (algo sgd): the network of a nevo config
# built in PyTorch, trained on the same data with the same optimiser, side by side with
# `nevo train` in one script. Needs PyTorch and NumPy (not nevo dependencies), e.g.
# Debian's:  apt-get install python3-torch python3-numpy dataset-fashion-mnist
#
#   /usr/bin/python3 scripts/supervised_vs_pytorch.py bench configs/fashion_mnist_sgd.json
#       one thread each: PyTorch's training samples/s over --steps mini-batches (after
#       --warmup), then nevo's for the same work; prints one JSON line with both and
#       nevo / torch. --no-nevo measures PyTorch alone.
#   /usr/bin/python3 scripts/supervised_vs_pytorch.py accuracy configs/fashion_mnist_sgd.json
#       trains generations epochs in PyTorch, one JSON line of test accuracy per epoch;
#       --linear-decay lets the learning rate fall linearly to 0 over them.
#
# key=value arguments after the config override it as `nevo train` does (value parsed as
# JSON where it parses), e.g. policy.hidden=[32] seed=2.
#
# The network, as nevo builds it: a 28x28x1 image (bytes / 255), "valid" convolutions
# (kernel k, stride s, ReLU), dense hidden layers (ReLU), 10 logits; weights
# N(0, 1) / sqrt(fan_in), biases 0; mean cross-entropy. nevo keeps images HWC and
# PyTorch NCHW: flattening the last convolution's output in another order permutes the
# first dense layer's inputs, the same network and the same work.
import argparse, gzip, json, os, subprocess, sys, tempfile, time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write("supervised_vs_pytorch: %s; install Debian's python3-torch and python3-numpy "
                     "(apt-get install python3-torch python3-numpy) and run with /usr/bin/python3\n" % e)
    sys.exit(2)

# Where Debian's dataset-fashion-mnist installs; $NEVO_DATASETS/fashion-mnist first, as nevo.
SYSTEM_DATASETS = "/usr/share/datasets"


def load_config(path, overrides):
    """The config as a dict, with key=value overrides (dotted keys; values JSON where they parse)."""
    with open(path) as f:
        cfg = json.load(f)
    for ov in overrides:
        if "=" not in ov:
            sys.exit("supervised_vs_pytorch: override %r: expected key=value" % ov)
        key, val = ov.split("=", 1)
        try:
            val = json.loads(val)
        except ValueError:
            pass
        node = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = val
    return cfg


def dataset_dir(cfg):
    spec = cfg.get("dataset", "fashion-mnist")
    if spec != "fashion-mnist":
        return spec
    env = os.environ.get("NEVO_DATASETS")
    for d in ([os.path.join(env, "fashion-mnist")] if env else []) + [os.path.join(SYSTEM_DATASETS, "fashion-mnist")]:
        if os.path.exists(os.path.join(d, "train-labels-idx1-ubyte.gz")) or \
           os.path.exists(os.path.join(d, "train-labels-idx1-ubyte")):
            return d
    sys.stderr.write("supervised_vs_pytorch: fashion-mnist not found; install Debian's dataset-fashion-mnist\n")
    sys.exit(2)


def read_idx(path):
    """An IDX file of unsigned bytes (gzip or plain) as a numpy array of its dims."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic >> 8 != 0x08:
        sys.exit("supervised_vs_pytorch: %s: not an IDX file of unsigned bytes (magic 0x%08x)" % (path, magic))
    rank = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load_split(d, prefix, limit):
    """(images (n, 1, rows, cols) float32 in [0, 1], labels (n) int64) of split prefix."""
    def find(name):
        p = os.path.join(d, name)
        return p + ".gz" if os.path.exists(p + ".gz") else p
    x = read_idx(find(prefix + "-images-idx3-ubyte"))
    y = read_idx(find(prefix + "-labels-idx1-ubyte"))
    if limit:
        x, y = x[:limit], y[:limit]
    x = torch.from_numpy(x.astype(np.float32) / np.float32(255.0)).unsqueeze(1).contiguous()
    return x, torch.from_numpy(y.astype(np.int64))


class Net(torch.nn.Module):
    """nevo's image network: valid convolutions, dense hidden layers, linear logits."""

    def __init__(self, pol, shape, classes):
        super().__init__()
        filters = pol.get("conv_filters", [])
        kernels = pol.get("conv_kernels", [])
        strides = pol.get("conv_strides", [1] * len(filters))
        if not (len(filters) == len(kernels) == len(strides)):
            sys.exit("supervised_vs_pytorch: policy.conv_filters, conv_kernels, conv_strides differ in length")
        act = pol.get("activation", "relu")
        if act not in ("relu", "tanh"):
            sys.exit("supervised_vs_pytorch: policy.activation %r: this script knows relu and tanh" % act)
        self.act = torch.relu if act == "relu" else torch.tanh
        c, h, w = shape
        self.convs = torch.nn.ModuleList()
        self.macs = 0
        for f, k, s in zip(filters, kernels, strides):
            oh, ow = (h - k) // s + 1, (w - k) // s + 1
            if oh < 1 or ow < 1:
                sys.exit("supervised_vs_pytorch: convolution %dx%d stride %d does not fit a %dx%d input" % (k, k, s, h, w))
            self.convs.append(torch.nn.Conv2d(c, f, k, stride=s))
            self.macs += oh * ow * f * k * k * c
            c, h, w = f, oh, ow
        n = c * h * w
        self.dense = torch.nn.ModuleList()
        for m in list(pol.get("hidden", [])) + [classes]:
            self.dense.append(torch.nn.Linear(n, m))
            self.macs += n * m
            n = m
        # nevo's "scaled" init: N(0, 1) / sqrt(fan_in), biases 0
        with torch.no_grad():
            for layer in list(self.convs) + list(self.dense):
                fan_in = layer.weight[0].numel()
                layer.weight.normal_(0.0, 1.0).div_(fan_in ** 0.5)
                layer.bias.zero_()

    def forward(self, x):
        for conv in self.convs:
            x = self.act(conv(x))
        x = x.flatten(1)
        for i, layer in enumerate(self.dense):
            x = layer(x)
            if i + 1 < len(self.dense):
                x = self.act(x)
        return x


def make_optimizer(cfg, params):
    """torch's counterpart of nevo's optim.* (nevo's RMSProp puts eps inside the sqrt,
    torch's outside; its Adam adds eps to sqrt(v) before the bias correction, torch's after:
    the same work per step)."""
    o = cfg.get("optim", {})
    name = o.get("name", "adam")
    lr = o.get("lr", 1e-3)
    wd = o.get("weight_decay", 0.0)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)),
                                eps=o.get("eps", 1e-8), weight_decay=wd)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=o.get("momentum", 0.9), weight_decay=wd)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=o.get("decay", 0.99), eps=o.get("eps", 1e-8),
                                   momentum=o.get("momentum", 0.9), weight_decay=wd)
    sys.exit("supervised_vs_pytorch: optim.name %r: expected sgd, adam or rmsprop" % name)


class Trainer:
    """A network of cfg and its optimiser over the training set, in mini-batches of
    data.batch drawn in a fresh random permutation each epoch (the last batch smaller)."""

    def __init__(self, cfg, x, y, classes=10):
        torch.manual_seed(int(cfg.get("seed", 1)))
        self.net = Net(cfg.get("policy", {}), tuple(x.shape[1:]), classes)
        self.opt = make_optimizer(cfg, self.net.parameters())
        self.clip = cfg.get("optim", {}).get("clip_norm", 0.0)
        self.batch = int(cfg.get("data", {}).get("batch", 64))
        self.x, self.y = x, y
        self.perm, self.pos = None, 0
        self.lr0, self.decay_steps, self.steps = self.opt.param_groups[0]["lr"], 0, 0

    def params(self):
        return sum(p.numel() for p in self.net.parameters())

    def step(self):
        """One optimiser step; returns its batch's size."""
        n = self.x.shape[0]
        if self.perm is None or self.pos >= n:
            self.perm, self.pos = torch.randperm(n), 0
        idx = self.perm[self.pos:self.pos + self.batch]
        self.pos += self.batch
        loss = F.cross_entropy(self.net(self.x[idx]), self.y[idx])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.decay_steps:
            for g in self.opt.param_groups:
                g["lr"] = self.lr0 * max(0.0, 1.0 - self.steps / self.decay_steps)
        self.steps += 1
        if self.clip:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.clip)
        self.opt.step()
        return idx.numel()

    def epoch(self):
        """The rest of the current epoch, or a whole new one."""
        self.step()
        while self.pos < self.x.shape[0]:
            self.step()

    @torch.no_grad()
    def accuracy(self, x, y):
        right = 0
        for i in range(0, x.shape[0], 1000):
            right += (self.net(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
        return right / x.shape[0]


def torch_rate(cfg, x, y, steps, warmup, repeats):
    """PyTorch's training samples/s (best of repeats runs of steps after warmup) on one thread."""
    torch.set_num_threads(1)
    tr = Trainer(cfg, x, y)
    for _ in range(warmup):
        tr.step()
    best = 0.0
    for _ in range(repeats):
        samples, t0 = 0, time.perf_counter()
        for _ in range(steps):
            samples += tr.step()
        best = max(best, samples / (time.perf_counter() - t0))
    return best, tr


def run_nevo(config_path, steps, nevo="build/nevo", overrides=(), batch=64):
    """nevo's training samples/s over steps mini-batches on one thread: one epoch of
    `nevo train` on the first steps * batch training samples, its time read from the run's
    metrics.jsonl (fields wall_s and samples per generation). Returns (samples/s, record).
    ADAPT when nevo's side lands: the command (or `nevo bench --only supervised --config`),
    and whether wall_s holds the test evaluation (data.test_samples keeps that small)."""
    with tempfile.TemporaryDirectory(prefix="nevo_sup_") as tmp:
        out = os.path.join(tmp, "run")
        cmd = [nevo, "train", config_path, *overrides, "threads=1", "generations=1",
               "data.train_samples=%d" % (steps * batch), "data.test_samples=%d" % batch, "--out", out]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[-500:]))
        with open(os.path.join(out, "metrics.jsonl")) as f:
            recs = [json.loads(line) for line in f if line.strip()]
    if not recs:
        raise RuntimeError("%s: metrics.jsonl is empty" % " ".join(cmd))
    last = recs[-1]
    wall = float(last["wall_s"])  # since the run began, as nevo writes it
    samples = float(last.get("samples", last.get("frames", steps * batch)))
    return samples / wall, last


def cmd_bench(args, cfg):
    x, y = load_split(dataset_dir(cfg), "train", 0)
    rate, tr = torch_rate(cfg, x, y, args.steps, args.warmup, args.repeats)
    res = {"config": args.config, "overrides": args.overrides, "batch": tr.batch, "steps": args.steps,
           "params": tr.params(), "flops_per_sample": 2 * tr.net.macs,
           "torch": {"version": torch.__version__, "threads": torch.get_num_threads(),
                     "mkldnn": torch.backends.mkldnn.is_available(), "samples_per_s": round(rate, 1)}}
    status = 0
    if not args.no_nevo:
        ovs = [o for o in args.overrides if not o.startswith(("threads=", "generations="))]
        try:
            best = 0.0
            for _ in range(args.repeats):
                r, _ = run_nevo(args.config, args.steps, args.nevo, ovs, tr.batch)
                best = max(best, r)
            res["nevo"] = {"samples_per_s": round(best, 1)}
            res["ratio"] = round(best / rate, 3)
        except (OSError, RuntimeError, KeyError, ValueError) as e:
            res["nevo"] = {"error": str(e)}
            status = 1
    print(json.dumps(res))
    return status


def cmd_accuracy(args, cfg):
    torch.set_num_threads(args.threads)
    d = dataset_dir(cfg)
    data = cfg.get("data", {})
    x, y = load_split(d, "train", data.get("train_samples", 0))
    tx, ty = load_split(d, "t10k", data.get("test_samples", 0))
    tr = Trainer(cfg, x, y)
    epochs = args.epochs or int(cfg.get("generations", 10))
    if args.linear_decay:
        tr.decay_steps = epochs * -(-x.shape[0] // tr.batch)
    t0 = time.perf_counter()
    for e in range(1, epochs + 1):
        tr.epoch()
        print(json.dumps({"epoch": e, "test_accuracy": round(tr.accuracy(tx, ty), 4),
                          "train_accuracy": round(tr.accuracy(x[:10000], y[:10000]), 4),
                          "params": tr.params(), "flops_per_sample": 2 * tr.net.macs,
                          "wall_s": round(time.perf_counter() - t0, 1)}), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description="nevo supervised training vs PyTorch: throughput (bench) or test accuracy per epoch (accuracy)")
    ap.add_argument("mode", choices=["bench", "accuracy"])
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*", help="key=value, as nevo train takes them")
    ap.add_argument("--steps", type=int, default=300, help="bench: timed mini-batches")
    ap.add_argument("--warmup", type=int, default=20, help="bench: untimed mini-batches first")
    ap.add_argument("--repeats", type=int, default=3, help="bench: the best of this many timed runs")
    ap.add_argument("--nevo", default=os.environ.get("NEVO", "build/nevo"), help="nevo binary ($NEVO)")
    ap.add_argument("--no-nevo", action="store_true", help="bench: PyTorch alone")
    ap.add_argument("--epochs", type=int, default=0, help="accuracy: epochs (default: generations)")
    ap.add_argument("--threads", type=int, default=1, help="accuracy: PyTorch threads")
    ap.add_argument("--linear-decay", action="store_true",
                    help="accuracy: lr falls linearly to 0 over the epochs (an experiment; no nevo key yet)")
    args = ap.parse_args()
    cfg = load_config(args.config, args.overrides)
    sys.exit(cmd_bench(args, cfg) if args.mode == "bench" else cmd_accuracy(args, cfg))


if __name__ == "__main__":
    main()
