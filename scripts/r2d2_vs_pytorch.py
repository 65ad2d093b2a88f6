#!/usr/bin/python3
# The R2D2 learner in PyTorch beside nevo's, in one script: the MinAtar network (a
# 10x10xC image, conv 3x3 16 "valid", dense 128, ReLU) then an LSTM of 128 and a dueling
# head (Q = V + A - mean A); a batch of 32 sequences of 10 burn-in + 20 trained steps
# with episode starts inside them (the state zeroed there); both networks burn in
# without gradients from the stored (zero) state, then run the trained steps; 5-step
# double-Q targets with value rescaling (h and its inverse, eps 1e-3) held fixed; the
# loss 0.5 x sum of w (y - Q)^2, backward through the LSTM, gradient clipping at 40, one
# Adam step; one thread each. Prints one JSON line: PyTorch's training samples/s
# (trained steps), nevo's (the r2d2 learner row of `nevo bench --only actor`, the same
# batch and network on MinAtar Breakout play), and nevo / torch. Needs PyTorch (Debian:
# apt-get install python3-torch).
#
#   /usr/bin/python3 scripts/r2d2_vs_pytorch.py [--steps N] [--no-nevo]   (beside vtrace_vs_pytorch.py, which it imports)
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write("r2d2_vs_pytorch: %s; install Debian's python3-torch and run with /usr/bin/python3\n" % e)
    sys.exit(2)
from vtrace_vs_pytorch import compare, samples_per_s  # the timing, command line and nevo side, shared

B, BURN, T, N_STEP, GAMMA, EPS = 32, 10, 20, 5, 0.99, 1e-3
M = BURN + T
H, W, C, A, UNITS = 10, 10, 4, 6, 128  # Breakout: 4 channels, 6 actions


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(C, 16, 3)
        self.fc = torch.nn.Linear(16 * 8 * 8, 128)
        self.lstm = torch.nn.LSTMCell(128, UNITS)
        self.out = torch.nn.Linear(UNITS, A + 1)

    def features(self, x):  # (S, B, C, H, W) -> (S, B, 128), every step at once
        S = x.shape[0]
        y = F.relu(self.conv(x.reshape(S * B, C, H, W)))
        return F.relu(self.fc(y.flatten(1))).reshape(S, B, 128)

    def unroll(self, feats, keep, state):  # keep (S, B): 0 where an episode starts
        h, c = state
        qs = []
        for t in range(feats.shape[0]):
            h, c = self.lstm(feats[t], (h * keep[t, :, None], c * keep[t, :, None]))
            o = self.out(h)
            adv = o[:, :A]
            qs.append(o[:, A:] + adv - adv.mean(1, keepdim=True))
        return torch.stack(qs), (h, c)


def h_fn(x):
    return torch.sign(x) * (torch.sqrt(x.abs() + 1) - 1) + EPS * x


def h_inv(x):
    return torch.sign(x) * (((torch.sqrt(1 + 4 * EPS * (x.abs() + 1 + EPS)) - 1) / (2 * EPS)) ** 2 - 1)


def targets(q_online, q_target, rew, disc):
    """y_t for the T trained steps: n-step sums of rewards with the discounts (0 past an
    episode end), bootstrapped by the target network's value of the online network's
    greedy action, through h and its inverse; shorter where the sequence ends."""
    a_star = q_online.argmax(-1, keepdim=True)
    boot = h_inv(q_target.gather(-1, a_star)[..., 0])  # (T + 1, B), steps BURN..M
    ys = []
    for t in range(T):
        acc, g = torch.zeros(B), torch.ones(B)
        n = min(N_STEP, T - t)
        for k in range(n):
            acc = acc + g * rew[BURN + t + k]
            g = g * disc[BURN + t + k]
        ys.append(h_fn(acc + g * boot[t + n]))
    return torch.stack(ys)


def torch_rate(steps):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    net, tgt = Net(), Net()
    tgt.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=2e-4)
    obs = (torch.rand(M + 1, B, C, H, W) < 0.1).float()
    keep = (torch.rand(M + 1, B) > 0.02).float()
    act = torch.randint(0, A, (M, B))
    rew = (torch.rand(M, B) < 0.05).float()
    disc = GAMMA * keep[1:]
    weight = torch.ones(B)
    zero = (torch.zeros(B, UNITS), torch.zeros(B, UNITS))

    def step():
        with torch.no_grad():  # burn-in: no loss, no gradient into the state after it
            _, s_on = net.unroll(net.features(obs[:BURN]), keep[:BURN], zero)
            _, s_tg = tgt.unroll(tgt.features(obs[:BURN]), keep[:BURN], zero)
            q_tg, _ = tgt.unroll(tgt.features(obs[BURN:]), keep[BURN:], s_tg)
        q, _ = net.unroll(net.features(obs[BURN:]), keep[BURN:], s_on)  # (T + 1, B, A)
        with torch.no_grad():
            y = targets(q, q_tg, rew, disc)
        q_a = q[:T].gather(-1, act[BURN:, :, None])[..., 0]
        loss = 0.5 * (weight * ((y - q_a) ** 2).sum(0)).sum() / (T * B)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 40.0)
        opt.step()

    return samples_per_s(step, 3, steps, T * B)


if __name__ == "__main__":
    compare(torch_rate, "r2d2 learner", "r2d2_vs_pytorch", 20)
