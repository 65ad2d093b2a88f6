#!/usr/bin/python3
# The V-trace learner in PyTorch beside nevo's, in one script: the MinAtar network (a
# 10x10xC image, conv 3x3 16 "valid", dense 128, ReLU, A logits and a value), a batch
# of 32 trajectories of 20 steps (plus each one's bootstrap observation), V-trace
# targets (rho_bar = c_bar = 1) held fixed, IMPALA's loss (policy gradient, 0.5 x
# baseline, 0.01 x entropy), backward, one Adam step; one thread each. Prints one JSON
# line: PyTorch's training samples/s (steps of trajectories), nevo's (the learner row
# of `nevo bench --only actor`, the same batch and network on a MinAtar Breakout
# batch), and nevo / torch. Needs PyTorch (Debian: apt-get install python3-torch).
#
#   /usr/bin/python3 scripts/vtrace_vs_pytorch.py [--steps N] [--no-nevo]
import argparse, json, os, subprocess, sys, time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write("vtrace_vs_pytorch: %s; install Debian's python3-torch and run with /usr/bin/python3\n" % e)
    sys.exit(2)

B, T, H, W, C, A = 32, 20, 10, 10, 4, 6  # Breakout: 4 channels, 6 actions


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(C, 16, 3)
        self.fc = torch.nn.Linear(16 * 8 * 8, 128)
        self.out = torch.nn.Linear(128, A + 1)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = F.relu(self.fc(x.flatten(1)))
        return self.out(x)


def vtrace(log_rhos, discounts, rewards, values, bootstrap):
    """(T, B) tensors; returns vs, pg_adv (no gradient), the paper's recursion backwards."""
    rhos = torch.clamp(log_rhos.exp(), max=1.0)
    cs = torch.clamp(log_rhos.exp(), max=1.0)
    next_values = torch.cat([values[1:], bootstrap[None]], 0)
    deltas = rhos * (rewards + discounts * next_values - values)
    acc = torch.zeros_like(bootstrap)
    out = []
    for t in range(T - 1, -1, -1):
        acc = deltas[t] + discounts[t] * cs[t] * acc
        out.append(acc)
    vs_minus_v = torch.stack(out[::-1])
    vs = vs_minus_v + values
    next_vs = torch.cat([vs[1:], bootstrap[None]], 0)
    pg_adv = rhos * (rewards + discounts * next_vs - values)
    return vs, pg_adv


def torch_rate(steps):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=5e-4)
    obs = (torch.rand(T + 1, B, C, H, W) < 0.1).float()
    actions = torch.randint(0, A, (T, B))
    mu = torch.full((T, B), -1.7917595)
    rewards = (torch.rand(T, B) < 0.05).float()
    discounts = torch.full((T, B), 0.99)

    def step():
        out = net(obs.reshape((T + 1) * B, C, H, W)).reshape(T + 1, B, A + 1)
        logits, values = out[:T, :, :A], out[:, :, A]
        logp = F.log_softmax(logits, -1)
        logp_a = logp.gather(-1, actions[..., None])[..., 0]
        with torch.no_grad():
            vs, pg_adv = vtrace(logp_a - mu, discounts, rewards, values[:T], values[T])
        pg = -(pg_adv * logp_a).sum()
        baseline = 0.5 * 0.5 * ((vs - values[:T]) ** 2).sum()
        entropy = -(logp.exp() * logp).sum()
        loss = (pg + baseline - 0.01 * entropy) / (T * B)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 40.0)
        opt.step()

    return samples_per_s(step, 5, steps, T * B)


def samples_per_s(step, warmup, steps, samples):
    """step() timed over `steps` calls after `warmup` untimed ones: samples per second."""
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * samples / (time.perf_counter() - t0)


def nevo_rate(row, script):
    """nevo's samples/s: the learner row of `nevo bench --only actor` whose name starts with row."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    nevo = os.path.join(root, "build", "nevo")
    out = subprocess.run([nevo, "bench", "--only", "actor", "--threads", "1", "--json"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if r.get("name", "").startswith(row):
                return r["value"] * 1e3
    raise SystemExit("%s: no '%s' row in `nevo bench --only actor --json`" % (script, row))


def compare(torch_rate, row, script, default_steps):
    """The script's command line and its one JSON line (scripts/r2d2_vs_pytorch.py uses it too)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=default_steps)
    ap.add_argument("--no-nevo", action="store_true")
    a = ap.parse_args()
    t = torch_rate(a.steps)
    res = {"torch_version": torch.__version__, "torch_samples_per_s": round(t, 1)}
    if not a.no_nevo:
        n = nevo_rate(row, script)
        res.update({"nevo_samples_per_s": round(n, 1), "nevo_over_torch": round(n / t, 2)})
    print(json.dumps(res))


if __name__ == "__main__":
    compare(torch_rate, "vtrace learner", "vtrace_vs_pytorch", 30)
