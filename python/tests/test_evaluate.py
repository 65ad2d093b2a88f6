"""nevo.evaluate against `nevo eval` of the same parameters; policies saved and loaded;
policy.act against the evaluator's own episodes; bad arguments."""
import json
import os
import subprocess

import numpy as np
import pytest

import nevo


def cli_eval(nevo_bin, path, episodes, seed, extra=()):
    out = subprocess.run([nevo_bin, "eval", path, "--episodes", str(episodes), "--seed", str(seed)] + list(extra),
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def summary(returns, lengths):
    """nevo_eval_summarise's sums, in its order."""
    n = len(returns)
    sr = 0.0
    for r in returns:
        sr += float(r)
    mean = sr / n
    vr = 0.0
    for r in returns:
        vr += (float(r) - mean) * (float(r) - mean)
    return {"return_mean": mean, "return_std": (vr / n) ** 0.5, "return_min": float(min(returns)),
            "return_max": float(max(returns)), "frames": int(sum(int(x) for x in lengths))}


def same_printed(a, b):
    """The CLI prints reals with 10 significant digits."""
    return float("%.10g" % a) == float(b)


CASES = [
    ({"env": "CartPole-v1", "policy": {"hidden": [8]}}, 4),
    ({"env": "minatar/breakout", "policy": {"hidden": [16]}}, 2),
    ({"env": "mujoco/hopper", "policy": {"hidden": [8]}}, 2),
    ({"env": "maze/hard", "policy": {"hidden": [8]}}, 2),
]


@pytest.mark.parametrize("config,episodes", CASES, ids=[c[0]["env"] for c in CASES])
def test_evaluate_equals_cli(config, episodes, nevo_bin, tmp_path):
    policy = nevo.Policy(config, threads=2)
    rng = np.random.default_rng(1)
    params = (rng.standard_normal((3, policy.nparams)) * 0.5).astype(np.float32)
    res = nevo.evaluate(policy, params, episodes=episodes, seed=7)
    assert res.returns.shape == (3, episodes) and res.lengths.dtype == np.int32
    assert res.behaviours.shape == (3, episodes, policy.bc_dim)
    for p in range(3):
        path = str(tmp_path / ("p%d.nevo" % p))
        policy.save(path, params[p])
        cli = cli_eval(nevo_bin, path, episodes, 7)
        mine = summary(res.returns[p], res.lengths[p])
        assert cli["frames"] == mine["frames"]
        for k in ("return_mean", "return_std", "return_min", "return_max"):
            assert same_printed(mine[k], cli[k]), (k, mine[k], cli[k])
        # the saved file, loaded, evaluates to the same bits
        loaded = nevo.load_policy(path, threads=1)
        assert np.array_equal(loaded.params, params[p])
        again = nevo.evaluate(path, loaded.params, episodes=episodes, seed=7)
        assert np.array_equal(again.returns[0], res.returns[p])
        assert np.array_equal(again.lengths[0], res.lengths[p])


def test_threads_rows_and_views_never_change_results():
    config = {"env": "Acrobot-v1", "policy": {"hidden": [8]}}
    p1, p2 = nevo.Policy(config, threads=1), nevo.Policy(config, threads=2)
    big = np.random.default_rng(2).standard_normal((6, p1.nparams + 3)).astype(np.float32)
    params = big[:, :p1.nparams]  # a view: rows farther apart than a network, read in place
    a = p1.evaluate(params, episodes=3, seed=3, max_steps=60)
    b = p2.evaluate(np.ascontiguousarray(params), episodes=3, seed=3, max_steps=60)
    assert np.array_equal(a.returns, b.returns) and np.array_equal(a.lengths, b.lengths)
    assert a.lengths.max() <= 60
    rows = np.array([5, 0, 2])
    seeds = np.array([nevo.episode_seed(3, 1), nevo.episode_seed(3, 0), nevo.episode_seed(3, 2)], np.uint64)
    c = p2.evaluate(params, rows=rows, seeds=seeds, max_steps=60)
    assert c.returns.tolist() == [a.returns[5, 1], a.returns[0, 0], a.returns[2, 2]]
    # 16 episodes a row or more run row by row; the same episodes as given one by one
    many = p2.evaluate(params[:3], episodes=17, seed=4, max_steps=30)
    rows = np.repeat(np.arange(3), 17)
    seeds = np.tile(np.array([nevo.episode_seed(4, e) for e in range(17)], np.uint64), 3)
    alt = p1.evaluate(params[:3], rows=rows, seeds=seeds, max_steps=30)
    assert np.array_equal(many.returns.ravel(), alt.returns) and np.array_equal(many.lengths.ravel(), alt.lengths)
    assert many.returns.shape == (3, 17)


def test_backend_chooses_where_and_never_what(tmp_path):
    """backend= on a Policy, a loaded policy and evaluate: the same episodes on every
    backend that runs here; a backend that does not says why, and changes nothing."""
    config = {"env": "minatar/breakout", "policy": {"hidden": [16]}}
    cpu = nevo.Policy(config, threads=2)
    assert cpu.backend == "cpu" and nevo.Policy(config, backend="cpu").config["backend"] == "cpu"
    params = (np.random.default_rng(5).standard_normal((40, cpu.nparams)) * 0.3).astype(np.float32)
    want = cpu.evaluate(params, episodes=2, seed=11)
    assert nevo.backends()[0] == "cpu" and set(nevo.backends()) <= {"cpu", "cuda"}
    path = str(tmp_path / "p.nevo")
    cpu.save(path, params[3])
    for name in ("cpu", "cuda"):
        try:
            pol = nevo.Policy(config, threads=2, backend=name)
        except nevo.Error as e:  # a build without it, or no device here
            assert name == "cuda" and e.status == ("unsupported" if name in nevo.backends() else "notfound"), \
                (e.status, str(e))
            assert "backend" in str(e) and "cuda" in str(e), str(e)
            expect("cuda", nevo.load_policy, path, backend=name)
            expect("cuda", nevo.evaluate, config, params, backend=name)
            continue
        assert pol.backend == name
        got = pol.evaluate(params, episodes=2, seed=11)
        assert np.array_equal(got.returns, want.returns) and np.array_equal(got.lengths, want.lengths), name
        loaded = nevo.load_policy(path, backend=name)
        assert loaded.backend == name
        one = loaded.evaluate(loaded.params, episodes=2, seed=11)
        assert np.array_equal(one.returns[0], want.returns[3]), name
        again = nevo.evaluate(path, loaded.params, episodes=2, seed=11, backend=name)
        assert np.array_equal(again.returns, one.returns), name
    # a policy file is evaluated on the CPU unless asked, whatever it trained on
    assert nevo.load_policy(path).backend == "cpu"
    expect("this policy evaluates on cpu", nevo.evaluate, cpu, params, backend="cuda")
    expect("is not one of", nevo.Policy, config, backend="tpu")
    expect("backend must be a name", nevo.load_policy, path, backend=3)


def test_act_plays_the_evaluators_episodes():
    """An episode played in Python with make_vec and policy.act equals the evaluator's
    episode of the same network and seed."""
    for env in ("CartPole-v1", "minatar/breakout", "Pendulum-v1"):
        pol = nevo.Policy(env=env, hidden=[16])
        theta = np.random.default_rng(4).standard_normal(pol.nparams).astype(np.float32)
        v = nevo.make_vec(env, 1, seed=9, autoreset_mode="disabled", max_episode_steps=150)
        obs, _ = v.reset()
        total, steps, done = 0.0, 0, False
        while not done:
            obs, r, te, tr, _ = v.step(pol.act(obs, theta))
            total += float(r[0])
            steps += 1
            done = bool(te[0] or tr[0])
        res = pol.evaluate(theta, rows=[0], seeds=[nevo.vec_episode_seed(9, 0, 0)], max_steps=150)
        assert res.lengths[0] == steps and res.returns[0] == total, env
        single = pol.act(obs[0], theta)
        assert np.shape(single) == np.shape(pol.act(obs, theta)[0])


def test_recurrent_policy_evaluates_and_acts():
    pol = nevo.Policy(env="memory/tmaze", hidden=[8], lstm=4)
    theta = np.random.default_rng(0).standard_normal(pol.nparams).astype(np.float32)
    v = nevo.make_vec("memory/tmaze", 1, seed=1, autoreset_mode="disabled")
    obs, _ = v.reset()
    pol.reset()
    total, steps, done = 0.0, 0, False
    while not done:
        obs, r, te, tr, _ = v.step(pol.act(obs, theta))
        total += float(r[0])
        steps += 1
        done = bool(te[0] or tr[0])
    res = pol.evaluate(theta, rows=[0], seeds=[nevo.vec_episode_seed(1, 0, 0)])
    assert res.lengths[0] == steps and res.returns[0] == total


def expect(msg, fn, *args, **kw):
    with pytest.raises(nevo.Error) as e:
        fn(*args, **kw)
    assert msg in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_bad_arguments_raise_with_nevos_message(tmp_path):
    pol = nevo.Policy(env="CartPole-v1", hidden=[4])
    good = np.zeros((2, pol.nparams), np.float32)
    expect("float32", nevo.evaluate, pol, good.astype(np.float64))
    expect("shape (P, %d)" % pol.nparams, nevo.evaluate, pol, np.zeros((2, 5), np.float32))
    expect("numpy float32 array", nevo.evaluate, pol, [[0.0] * pol.nparams])
    bad = good.copy()
    bad[1, 3] = np.nan
    expect("NaN", nevo.evaluate, pol, bad)
    expect("not MountainCar-v0", nevo.evaluate, pol, good, env="MountainCar-v0")
    expect("episodes", nevo.evaluate, pol, good, episodes=0)
    expect("plays row 2 of 2", pol.evaluate, good, rows=[2], seeds=[1])
    expect("unknown environment", nevo.Policy, env="CartPol")
    expect("policy.hiden", nevo.Policy, {"env": "CartPole-v1", "policy": {"hiden": [4]}})
    expect("activation", nevo.Policy, env="CartPole-v1", activation="sigmoid")
    expect("conv", nevo.Policy, env="CartPole-v1", conv_filters=[4])
    expect("nope.nevo", nevo.load_policy, str(tmp_path / "nope.nevo"))
    (tmp_path / "junk.nevo").write_bytes(b"NEVOPOL1 not really a policy file")
    with pytest.raises(nevo.Error):
        nevo.load_policy(str(tmp_path / "junk.nevo"))
    expect("observations must have shape", pol.act, np.zeros(3), good[0])
    expect("no parameters", pol.act, np.zeros(4))
    expect("policy must be", nevo.evaluate, 42, good)
    assert nevo.evaluate({"env": "CartPole-v1", "policy": {"hidden": [4]}}, good).returns.shape == (2, 1)
    assert os.path.exists(nevo.__file__)
