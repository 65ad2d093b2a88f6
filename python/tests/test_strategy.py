"""Strategy ask/tell against `nevo train`: the same metrics bit for bit, generation for
generation, evaluating on the strategy's evaluator or outside it through
nevo.evaluate, on envs and on a dataset; nevo.train; bad configs and results."""
import json
import struct
import subprocess

import numpy as np
import pytest

import nevo

GA = {"env": "CartPole-v1", "algo": "ga", "seed": 3, "population": 24, "generations": 3, "threads": 2,
      "eval_episodes": 3, "policy": {"hidden": [8]},
      "ga": {"sigma": 0.05, "truncation": 6, "validation_candidates": 3, "validation_episodes": 2}}
ES = {"env": "Pendulum-v1", "algo": "es", "seed": 5, "population": 16, "generations": 3, "threads": 2,
      "eval_episodes": 2, "max_episode_steps": 60, "policy": {"hidden": [8], "init": "normc"},
      "es": {"sigma": 0.05, "lr": 0.02, "obs_norm": True, "obs_norm_prob": 0.5}}
NS = {"env": "maze/hard", "algo": "ga-ns", "seed": 2, "population": 16, "generations": 3, "threads": 2,
      "eval_episodes": 2, "max_episode_steps": 80, "policy": {"hidden": [8]},
      "ga": {"truncation": 4, "validation_candidates": 2, "validation_episodes": 1}, "ns": {"k": 3}}
NSRA = {"env": "maze/hard", "algo": "nsra-es", "seed": 4, "population": 8, "generations": 3, "threads": 2,
        "eval_episodes": 2, "max_episode_steps": 60, "policy": {"hidden": [8]},
        "ns": {"k": 3, "meta_population": 2, "patience": 1}}
SMG = {"env": "Pendulum-v1", "algo": "ga", "seed": 1, "population": 12, "generations": 2, "threads": 2,
       "eval_episodes": 2, "max_episode_steps": 40, "policy": {"hidden": [8]},
       "ga": {"truncation": 4, "validation_candidates": 2, "validation_episodes": 1, "mutation": "sm-g-sum"}}
CONFIGS = {"ga": GA, "es": ES, "ga-ns": NS, "nsra-es": NSRA, "sm-g": SMG}


def cli_train(nevo_bin, config, tmp_path, name):
    cfg = tmp_path / (name + ".json")
    cfg.write_text(json.dumps(config))
    out = tmp_path / name
    subprocess.run([nevo_bin, "train", str(cfg), "--out", str(out), "--quiet"], check=True, capture_output=True)
    return out


def metrics(run_dir):
    lines = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        m = json.loads(line)
        m.pop("wall_s")
        lines.append(m)
    return lines


def same(python_metrics, cli_line):
    keys = ["generation", "frames", "episodes", "best_fitness", "mean_fitness", "median_fitness",
            "elite_validation_mean", "generation_frames", "archive_size", "novelty_mean", "reward_weight",
            "behaviour", "train_loss", "test_loss", "test_accuracy"]
    for k in keys:
        if k in cli_line:
            a, b = python_metrics[k], cli_line[k]
            if k == "behaviour":
                a = [float("%.9g" % x) for x in a]  # the CLI prints behaviours with 9 digits
            assert a == b, (k, a, b)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ask_tell_reproduces_nevo_train(name, nevo_bin, tmp_path):
    config = CONFIGS[name]
    cli = metrics(cli_train(nevo_bin, config, tmp_path, name))
    s = nevo.Strategy(config)
    got = []
    while not s.done:
        ask = s.ask()
        assert ask.params.shape[1] == s.nparams and len(ask.seeds) == len(ask.rows)
        m = s.tell(s.evaluate(ask))
        if m is not None:
            got.append(m)
    assert len(got) == len(cli) == config["generations"]
    for g, c in zip(got, cli):
        same(g, c)
    # the best policy saved here is the run's policy.nevo, byte for byte
    s.save(str(tmp_path / "best.nevo"))
    assert (tmp_path / "best.nevo").read_bytes() == (tmp_path / name / "policy.nevo").read_bytes()


@pytest.mark.parametrize("name", ["ga", "ga-ns"])
def test_outside_evaluation_reproduces_nevo_train(name, nevo_bin, tmp_path):
    """The evosax shape: networks as a (n, nparams) float32 array, evaluated outside
    the strategy (here by nevo.evaluate with the asked episode seeds), returns told."""
    config = CONFIGS[name]
    cli = metrics(cli_train(nevo_bin, config, tmp_path, name))
    s = nevo.Strategy(config)
    pol = nevo.Policy({"env": config["env"], "policy": config["policy"],
                       "max_episode_steps": config.get("max_episode_steps", 0)}, threads=1)
    got = []
    while not s.done:
        ask = s.ask()
        res = nevo.evaluate(pol, ask.params, rows=ask.rows, seeds=ask.seeds)
        m = s.tell(res.returns, lengths=res.lengths, terminated=res.terminated,
                   behaviours=res.behaviours if pol.bc_dim else None)
        if m is not None:
            got.append(m)
    for g, c in zip(got, cli):
        same(g, c)


def test_train_equals_cli(nevo_bin, tmp_path):
    cli_dir = cli_train(nevo_bin, GA, tmp_path, "cli")
    summary = nevo.train(GA, str(tmp_path / "py"))
    assert metrics(tmp_path / "py") == metrics(cli_dir)
    cli_summary = json.loads((cli_dir / "summary.json").read_text())
    for k in ("generations", "frames", "episodes", "best_fitness", "eval_return_mean"):
        assert summary[k] == cli_summary[k]
    pol = nevo.load_policy(str(tmp_path / "py" / "policy.nevo"))
    assert pol.params.shape == (pol.nparams,)
    a = pol.act(np.zeros((3, 4), np.float32))
    assert a.shape == (3,) and a.dtype == np.int64
    with pytest.raises(nevo.Error) as e:
        nevo.train(GA, str(tmp_path / "py"))
    assert "already holds a run" in str(e.value)


def test_bad_configs_and_results(tmp_path):
    with pytest.raises(nevo.Error) as e:
        nevo.Strategy(dict(GA, populaton=10))
    assert "populaton" in str(e.value) and "population" in str(e.value)
    with pytest.raises(nevo.Error) as e:
        nevo.Strategy(dict(GA, algo="gaa"))
    assert "gaa" in str(e.value)
    with pytest.raises(nevo.Error):
        nevo.Strategy("{not json")
    with pytest.raises(nevo.Error) as e:
        nevo.Strategy(dict(GA, algo="sgd"))
    s = nevo.Strategy(GA)
    n = len(s.ask())
    with pytest.raises(nevo.Error) as e:
        s.tell(np.zeros(n + 1))
    assert "shape (%d,)" % n in str(e.value)
    with pytest.raises(nevo.Error) as e:
        s.tell(np.full(n, np.nan))
    assert "\n" not in str(e.value)
    with pytest.raises(nevo.Error):
        s.tell(np.zeros(n), lengths=-np.ones(n, np.int32))
    assert s.tell(np.arange(n, dtype=np.float64), lengths=np.ones(n, np.int32)) is None  # GA: elite next
    sm = nevo.Strategy(SMG)
    with pytest.raises(nevo.Error) as e:
        sm.tell(np.zeros(len(sm.ask())))
    assert "keeps states" in str(e.value)


def test_outside_evaluation_with_observation_normalisation():
    """An ES with es.obs_norm: its asked networks, evaluated outside with the asked
    normalisation, give the strategy's own returns."""
    s = nevo.Strategy(ES)
    for _ in range(2):  # the second generation runs with statistics gathered in the first
        ask = s.ask()
        assert ask.obs_mean is not None and ask.obs_std.shape == (3,)
        own = s.evaluate(ask)
        pol = nevo.Policy({"env": ES["env"], "algo": "es", "es": {"obs_norm": True}, "policy": ES["policy"],
                           "max_episode_steps": ES["max_episode_steps"]}, threads=1)
        pol.set_obs_norm(ask.obs_mean, ask.obs_std)
        mean, std = pol.obs_norm
        assert np.array_equal(mean, ask.obs_mean) and np.array_equal(std, ask.obs_std)
        out = nevo.evaluate(pol, ask.params, rows=ask.rows, seeds=ask.seeds)
        assert np.array_equal(out.returns, own.returns) and np.array_equal(out.lengths, own.lengths)
        while s.tell(own) is None:
            own = s.evaluate(s.ask())
    assert s.generation == 2
    with pytest.raises(nevo.Error):
        nevo.Policy(env="Pendulum-v1").set_obs_norm(np.zeros(3), np.ones(3))


def write_idx(path, n_train, n_test, seed=0):
    """A tiny dataset as IDX files (the MNIST format): 6x6 images of three classes,
    each class brightest in its own band of rows, with noise."""
    path.mkdir()
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 3, size=n).astype(np.uint8)
        images = rng.integers(0, 120, size=(n, 6, 6)).astype(np.uint8)
        for i, c in enumerate(labels):
            images[i, 2 * c:2 * c + 2] += 120
        (path / ("%s-images-idx3-ubyte" % split)).write_bytes(struct.pack(">IIII", 0x803, n, 6, 6) +
                                                               images.tobytes())
        (path / ("%s-labels-idx1-ubyte" % split)).write_bytes(struct.pack(">II", 0x801, n) + labels.tobytes())
    return str(path)


DATA_ES = {"algo": "es", "seed": 2, "population": 8, "generations": 3, "threads": 2, "data": {"fitness_batch": 40},
           "policy": {"hidden": [8]}, "es": {"sigma": 0.05, "lr": 0.05, "center_episodes": 1}}
DATA_GA = {"algo": "ga", "seed": 3, "population": 10, "generations": 2, "threads": 2, "data": {"fitness_batch": 0},
           "policy": {"hidden": [6]}, "ga": {"truncation": 3, "validation_candidates": 2, "validation_episodes": 2}}


@pytest.mark.parametrize("name,config", [("es", DATA_ES), ("ga", DATA_GA)])
def test_ask_tell_on_a_dataset_reproduces_nevo_train(name, config, nevo_bin, tmp_path):
    """On a dataset: ask, score on the strategy's data (fitness = -mean cross-entropy
    on each task's batch), tell the fitness alone; the metrics (with train_loss,
    test_loss, test_accuracy) are nevo train's bit for bit, and so is policy.nevo."""
    config = dict(config, dataset=write_idx(tmp_path / "idx", 90, 30))
    cli = metrics(cli_train(nevo_bin, config, tmp_path, name))
    s = nevo.Strategy(config)
    assert s.on_data
    batch = config["data"]["fitness_batch"] or 90
    got = []
    while not s.done:
        ask = s.ask()
        assert ask.params.shape[1] == s.nparams and ask.obs_mean is None
        res = s.evaluate(ask)
        assert (res.returns < 0).all() and (res.lengths == batch).all() and res.terminated.all()
        m = s.tell(res.returns)  # lengths default to the batch's samples
        if m is not None:
            assert {"train_loss", "test_loss", "test_accuracy"} <= set(m)
            got.append(m)
    assert len(got) == len(cli) == config["generations"]
    for g, c in zip(got, cli):
        assert "test_accuracy" in c
        same(g, c)
    s.save(str(tmp_path / "best.nevo"))
    assert (tmp_path / "best.nevo").read_bytes() == (tmp_path / name / "policy.nevo").read_bytes()


def test_bad_dataset_strategies(tmp_path):
    idx = write_idx(tmp_path / "idx", 20, 10)
    with pytest.raises(nevo.Error) as e:
        nevo.Strategy(dict(DATA_ES, dataset=idx, algo="sgd"))
    assert "trains by itself" in str(e.value)
    with pytest.raises(nevo.Error) as e:
        nevo.Strategy(dict(DATA_ES, dataset=str(tmp_path / "none")))
    assert e.value.status == "io" and "train-images-idx3-ubyte" in str(e.value)
    with pytest.raises(nevo.Error) as e:
        nevo.Strategy(dict(DATA_ES, dataset=idx, algo="ns-es"))
    assert "behaviour" in str(e.value)
    s = nevo.Strategy(dict(DATA_ES, dataset=idx))
    n = len(s.ask())
    with pytest.raises(nevo.Error) as e:
        s.tell(np.zeros(n - 1))
    assert "shape (%d,)" % n in str(e.value)
