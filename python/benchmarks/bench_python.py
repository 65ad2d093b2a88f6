"""Measurements of the Python package for docs/BENCHMARKS.md ("Python"), all as ratios
measured in this one process:

  1. make_vec steps/s from Python at N = 1, 64, 1024 (CartPole-v1, minatar/breakout)
     against the C API stepping the same instances with the same actions
     (c_api_rate.c, compiled here against the same library), and against a numpy
     vectorised CartPole written the way Gymnasium's own vector CartPole is;
  2. nevo.evaluate against the `nevo` CLI doing the same work (`nevo eval` of the
     same parameters, the same episodes), and against what `nevo eval` calls
     (nevo_eval_params) through the same libnevo.so, from C in this process.

Run from the repository root after `make`:
    python3 python/benchmarks/bench_python.py [--build build] [--reps 5] [--only vec|evaluate]
Each rate is the best of --reps alternating runs of the things compared; the
evaluation rows also give the median of the per-round ratios."""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


class NumpyCartPole:
    """CartPole-v1 over N envs in numpy, as Gymnasium's vectorised CartPole computes it:
    the state as a (4, N) array, one array expression per physics line, next-step
    autoreset of the envs that ended, uniform(-0.05, 0.05) resets, a 500-step limit."""

    def __init__(self, n, seed=0):
        self.n = n
        self.rng = np.random.default_rng(seed)
        self.gravity, self.masscart, self.masspole, self.length = 9.8, 1.0, 0.1, 0.5
        self.total_mass = self.masscart + self.masspole
        self.polemass_length = self.masspole * self.length
        self.force_mag, self.tau = 10.0, 0.02
        self.theta_threshold = 12 * 2 * np.pi / 360
        self.x_threshold = 2.4
        self.max_steps = 500

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=(4, self.n))
        self.steps = np.zeros(self.n, np.int32)
        self.prev_done = np.zeros(self.n, np.bool_)
        return self.state.T.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = np.sign(action - 0.5) * self.force_mag
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = np.stack((x, x_dot, theta, theta_dot))
        terminated = ((x < -self.x_threshold) | (x > self.x_threshold) | (theta < -self.theta_threshold)
                      | (theta > self.theta_threshold))
        self.steps += 1
        truncated = self.steps >= self.max_steps
        reward = np.ones(self.n, np.float32)
        k = int(self.prev_done.sum())
        if k:
            self.state[:, self.prev_done] = self.rng.uniform(-0.05, 0.05, size=(4, k))
            self.steps[self.prev_done] = 0
            reward[self.prev_done] = 0.0
            terminated[self.prev_done] = False
            truncated[self.prev_done] = False
        self.prev_done = terminated | truncated
        return self.state.T.astype(np.float32), reward, terminated, truncated, {}


def rounds(fns, reps):
    """Times of each fn in each of reps rounds, the fns alternating within a round."""
    times = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return times


def best(fns, reps):
    """Best time of each fn over reps rounds."""
    return [min(t) for t in rounds(fns, reps)]


def build_c_api(build):
    tmp = tempfile.mkdtemp()
    so = os.path.join(tmp, "c_api_rate.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I" + os.path.join(REPO, "include"),
                    os.path.join(HERE, "c_api_rate.c"), "-o", so, "-L" + build, "-lnevo",
                    "-Wl,-rpath," + os.path.abspath(build)], check=True)
    lib = ctypes.CDLL(so)
    lib.c_api_run.restype = ctypes.c_double
    lib.c_api_run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_ulonglong]
    lib.c_api_eval.restype = ctypes.c_double
    lib.c_api_eval.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_ulonglong, ctypes.c_int]
    return lib


def bench_vec(nevo, capi, reps):
    rows = []
    for env, frames in (("CartPole-v1", 2_000_000), ("minatar/breakout", 600_000)):
        for n in (1, 64, 1024):
            steps = max(200, frames // n)
            if n == 1:
                steps = frames // 20  # a Python loop of N = 1 steps is slow: fewer frames
            acts = np.random.default_rng(0).integers(0, 2 if env == "CartPole-v1" else 6, size=(steps, n))
            acts_f = acts.astype(np.float32)
            # the Python loops take each step's actions from a list of rows, as C reads
            # them from its table: iterating an array's rows would add a view per step
            rows, rows_f = list(acts), list(acts_f)
            v = nevo.make_vec(env, n, seed=1)
            vz = nevo.make_vec(env, n, seed=1, copy=False)

            def run_py():
                v.reset()
                for a in rows:
                    v.step(a)

            def run_py_zero():
                vz.reset()
                for a in rows_f:
                    vz.step(a)

            def run_c():
                capi.c_api_run(env.encode(), n, steps, acts_f.ctypes.data, 1)

            fns = [run_c, run_py, run_py_zero]
            np_env = None
            if env == "CartPole-v1":
                np_env = NumpyCartPole(n)

                def run_np():
                    np_env.reset()
                    for a in rows:
                        np_env.step(a)
                fns.append(run_np)
            t = best(fns, reps)
            rate = [n * steps / x for x in t]
            row = {"env": env, "n": n, "c_api_steps_s": rate[0], "py_steps_s": rate[1], "py_zero_copy_steps_s": rate[2],
                   "py_over_c": rate[1] / rate[0], "py_zero_copy_over_c": rate[2] / rate[0]}
            if np_env is not None:
                row["numpy_steps_s"] = rate[3]
                row["py_over_numpy"] = rate[1] / rate[3]
                row["py_zero_copy_over_numpy"] = rate[2] / rate[3]
            rows.append(row)
            print(json.dumps(row), flush=True)
            v.close()
            vz.close()
    return rows


def bench_evaluate(nevo, nevo_bin, capi, reps, threads):
    """One network's episodes: nevo.evaluate of it against `nevo eval` of its file (the
    same episodes; the CLI's time includes its process start, measured alone with one
    episode); and a population of P rows, one evaluate call against P `nevo eval`
    runs."""
    rows = []
    cases = (({"env": "Pendulum-v1", "policy": {"hidden": [64, 64]}}, 2000),
             ({"env": "minatar/breakout", "policy": {"hidden": [64, 64]}}, 40000))
    for config, episodes in cases:
        pol = nevo.Policy(config, threads=threads)
        theta = (np.random.default_rng(3).standard_normal((1, pol.nparams)) * 0.1).astype(np.float32)
        path = os.path.join(tempfile.mkdtemp(), "p.nevo")
        pol.save(path, theta[0])
        loaded = nevo.load_policy(path, threads=threads)

        def cli(n, p=path):
            subprocess.run([nevo_bin, "eval", p, "--episodes", str(n), "--seed", "5", "--threads",
                            str(threads)], check=True, capture_output=True)

        def py():
            loaded.evaluate(loaded.params, episodes=episodes, seed=5)

        def c_same_lib():
            capi.c_api_eval(path.encode(), episodes, 5, threads)

        r_cli, r_start, r_py, r_c = rounds([lambda: cli(episodes), lambda: cli(1), py, c_same_lib], reps)
        t_cli, t_start, t_py, t_c = min(r_cli), min(r_start), min(r_py), min(r_c)
        res = loaded.evaluate(loaded.params, episodes=episodes, seed=5)
        row = {"what": "one network", "env": config["env"], "episodes": episodes, "frames": int(res.lengths.sum()),
               "cli_s": t_cli, "cli_start_s": t_start, "py_s": t_py, "py_rate_over_cli": t_cli / t_py,
               "py_rate_over_cli_less_start": (t_cli - t_start) / t_py,
               "median_round_ratio_less_start": float(np.median([(c - t_start) / p for c, p in zip(r_cli, r_py)])),
               "c_api_same_lib_s": t_c, "py_rate_over_c_api_same_lib": t_c / t_py}
        rows.append(row)
        print(json.dumps(row), flush=True)
        # a population: P rows x E episodes in one call against P nevo eval runs
        P, E = 16, max(1, episodes // 16)
        params = (np.random.default_rng(4).standard_normal((P, pol.nparams)) * 0.1).astype(np.float32)
        paths = []
        for p in range(P):
            paths.append(os.path.join(os.path.dirname(path), "row%d.nevo" % p))
            pol.save(paths[-1], params[p])

        def cli_pop():
            for p in paths:
                cli(E, p)

        def py_pop():
            pol.evaluate(params, episodes=E, seed=5)

        r_cli, r_py = rounds([cli_pop, py_pop], reps)
        t_cli, t_py = min(r_cli), min(r_py)
        res = pol.evaluate(params, episodes=E, seed=5)
        row = {"what": "population", "env": config["env"], "rows": P, "episodes": E,
               "frames": int(res.lengths.sum()), "cli_s": t_cli, "cli_less_starts_s": t_cli - P * t_start,
               "py_s": t_py, "py_rate_over_cli": t_cli / t_py,
               "py_rate_over_cli_less_starts": (t_cli - P * t_start) / t_py,
               "median_round_ratio_less_starts": float(np.median([(c - P * t_start) / p
                                                                  for c, p in zip(r_cli, r_py)]))}
        rows.append(row)
        print(json.dumps(row), flush=True)
        loaded.close()
        pol.close()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=("vec", "evaluate"), help="run one of the two parts")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ.setdefault("NEVO_LIB", os.path.join(build, "libnevo.so"))
    sys.path.insert(0, os.path.join(REPO, "python"))
    import nevo
    capi = build_c_api(build)
    if args.only != "evaluate":
        print("# make_vec (one thread) vs the C API and numpy; steps/s", flush=True)
        bench_vec(nevo, capi, args.reps)
    if args.only != "vec":
        print("# nevo.evaluate vs nevo eval (threads %d)" % args.threads, flush=True)
        bench_evaluate(nevo, os.path.join(build, "nevo"), capi, args.reps, args.threads)


if __name__ == "__main__":
    main()
