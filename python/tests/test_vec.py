"""make_vec against the C API: every env's vectorised trajectories equal single
instances stepped through nevo_env_reset / nevo_env_step bit for bit, under each
autoreset mode and thread count; spaces; bad arguments."""
import ctypes
import threading
import time

import numpy as np
import pytest

import nevo
from nevo import _lib

ALL_ENVS = nevo.envs()


class CEnv:
    """One instance through the C API (env.h), as a program in C would step it."""

    def __init__(self, name, max_steps=0, **options):
        opts, n = nevo._options(options)
        err = _lib.NevoError()
        h = ctypes.c_void_p()
        assert _lib.nevo_env_new(name.encode(), opts, n, ctypes.byref(h), ctypes.byref(err)) == 0, err.msg
        self.h = h.value
        _lib.nevo_env_set_max_steps(self.h, max_steps)
        self.spec = _lib.nevo_env_spec(self.h).contents
        self.inst = np.zeros(_lib.nevo_env_instance_size(self.h) // 8 + 8, np.float64)  # 16-byte aligned
        self.obs = np.zeros(self.spec.obs_dim, np.float32)
        self.res = (ctypes.c_float * 2)()  # NevoStepResult: float, bool, bool

    def reset(self, seed):
        _lib.nevo_env_reset(self.h, nevo._addr(self.inst), seed, nevo._addr(self.obs))
        return self.obs.copy()

    def step(self, action):
        a = np.zeros(_lib.ENV_MAX_ACT_DIM, np.float32)
        a[:np.size(action)] = action
        _lib.nevo_env_step_raw(self.h, nevo._addr(self.inst), nevo._addr(a), nevo._addr(self.obs),
                               ctypes.addressof(self.res))
        raw = bytes(self.res)
        reward = np.frombuffer(raw[:4], np.float32)[0]
        return self.obs.copy(), reward, bool(raw[4]), bool(raw[5])

    def close(self):
        _lib.nevo_env_instance_free(self.h, nevo._addr(self.inst))
        _lib.nevo_env_free(self.h)


def actions_for(venv, steps, seed=5):
    rng = np.random.default_rng(seed)
    space = venv.single_action_space
    if isinstance(space, nevo.Discrete):
        return rng.integers(0, space.n, size=(steps, venv.num_envs))
    return rng.uniform(space.low, space.high, size=(steps, venv.num_envs) + space.shape).astype(np.float32)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes()


def reference(name, n, seed, acts, max_steps, mode, resets=None, **options):
    """What the vector must return, from single C instances stepped one by one. resets
    {t: (seed, mask)}: before step t the masked instances are replaced by new ones
    reset from that seed (a fresh env); out then holds ("reset", obs) before step t."""
    envs = [CEnv(name, max_steps, **options) for _ in range(n)]
    episode = [1] * n
    ended = [False] * n
    seeds = [seed] * n
    obs0 = np.stack([envs[i].reset(nevo.vec_episode_seed(seed, i, 0)) for i in range(n)])
    last = obs0.copy()
    out = []
    for t in range(len(acts)):
        if resets and t in resets:
            s, mask = resets[t]
            for i in np.flatnonzero(mask):
                envs[i].close()
                envs[i] = CEnv(name, max_steps, **options)
                seeds[i], episode[i], ended[i] = s, 1, False
                last[i] = envs[i].reset(nevo.vec_episode_seed(s, i, 0))
            out.append(("reset", last.copy()))
        o = np.zeros((n, envs[0].spec.obs_dim), np.float32)
        r = np.zeros(n, np.float32)
        te = np.zeros(n, bool)
        tr = np.zeros(n, bool)
        fin = np.zeros_like(o)
        has = np.zeros(n, bool)
        for i in range(n):
            if mode == "next_step" and ended[i]:
                o[i] = envs[i].reset(nevo.vec_episode_seed(seeds[i], i, episode[i]))
                episode[i] += 1
                ended[i] = False
                continue
            o[i], r[i], te[i], tr[i] = envs[i].step(acts[t][i])
            end = te[i] or tr[i]
            if mode == "same_step" and end:
                fin[i], has[i] = o[i], True
                o[i] = envs[i].reset(nevo.vec_episode_seed(seeds[i], i, episode[i]))
                episode[i] += 1
            elif mode == "next_step":
                ended[i] = end
        last = o.copy()
        out.append((o, r, te, tr, fin, has))
    for e in envs:
        e.close()
    return obs0, out


def run_vec(name, n, seed, acts, max_steps, mode, threads=1, resets=None, **options):
    venv = nevo.make_vec(name, n, seed=seed, autoreset_mode=mode, num_threads=threads,
                         max_episode_steps=max_steps, **options)
    obs0, _ = venv.reset()
    out = []
    for t, a in enumerate(acts):
        if resets and t in resets:
            s, mask = resets[t]
            o, info = venv.reset(seed=s, options={"reset_mask": mask})
            assert info == {}
            out.append(("reset", o.reshape(n, -1)))
        o, r, te, tr, info = venv.step(a)
        fin = info.get("final_obs")
        has = info.get("_final_obs")
        out.append((o.reshape(n, -1), r, te, tr, None if fin is None else fin.reshape(n, -1), has))
    venv.close()
    return obs0.reshape(n, -1), out


def steps_for(name):
    return 12 if name.startswith("mujoco/humanoid") else 30 if name.startswith("mujoco/") else 60


@pytest.mark.parametrize("name", ALL_ENVS)
def test_trajectories_equal_c_api(name):
    """Each env, next_step autoreset (short episodes: max_episode_steps so that every
    instance ends and restarts), bit for bit."""
    n, seed, steps = 3, 11, steps_for(name)
    cap = steps // 3
    venv = nevo.make_vec(name, n, max_episode_steps=cap)
    acts = actions_for(venv, steps)
    venv.close()
    v0, vout = run_vec(name, n, seed, acts, cap, "next_step")
    r0, rout = reference(name, n, seed, acts, cap, "next_step")
    assert bits(v0) == bits(r0)
    ended = 0
    for t, (v, r) in enumerate(zip(vout, rout)):
        for k in range(4):
            assert bits(v[k]) == bits(r[k]), "%s step %d field %d" % (name, t, k)
        ended += int(np.sum(v[2] | v[3]))
    assert ended >= n  # the episodes did end and restart


@pytest.mark.parametrize("name", ["CartPole-v1", "minatar/breakout", "mujoco/hopper", "Pendulum-v1"])
def test_same_step_autoreset_equals_c_api(name):
    n, seed, steps = 3, 4, 40
    venv = nevo.make_vec(name, n)
    acts = actions_for(venv, steps, seed=9)
    venv.close()
    v0, vout = run_vec(name, n, seed, acts, 9, "same_step")
    r0, rout = reference(name, n, seed, acts, 9, "same_step")
    assert bits(v0) == bits(r0)
    for v, r in zip(vout, rout):
        for k in range(6):
            assert bits(v[k]) == bits(r[k])


def test_autoreset_semantics():
    """next_step: the step after an ending returns the new episode's first observation
    with reward 0 and both flags false, ignoring its action; same_step: the ending
    step's obs is the new episode's, its last in final_obs; disabled: an ended
    instance stays ended."""
    seed, cap = 2, 5
    venvs = {m: nevo.make_vec("CartPole-v1", 2, seed=seed, autoreset_mode=m, max_episode_steps=cap)
             for m in ("next_step", "same_step", "disabled")}
    for v in venvs.values():
        v.reset()
    ones = np.ones(2, np.int64)
    for t in range(cap - 1):
        outs = {m: v.step(ones) for m, v in venvs.items()}
        assert not outs["next_step"][3].any()
    nx = venvs["next_step"].step(ones)
    ss = venvs["same_step"].step(ones)
    ds = venvs["disabled"].step(ones)
    assert nx[3].all() and ss[3].all() and ds[3].all()  # truncated at the cap
    np.testing.assert_array_equal(ss[4]["final_obs"], nx[0])
    assert ss[4]["_final_obs"].all()
    c = CEnv("CartPole-v1")
    first = np.stack([c.reset(nevo.vec_episode_seed(seed, i, 1)) for i in range(2)])
    c.close()
    assert bits(ss[0]) == bits(first)
    after = venvs["next_step"].step(np.array([0, 1]))  # actions ignored
    assert bits(after[0]) == bits(first)
    assert not after[1].any() and not after[2].any() and not after[3].any()
    assert list(venvs["next_step"].episodes()) == [2, 2]
    again = venvs["disabled"].step(ones)
    assert bits(again[0]) == bits(ds[0]) and again[3].all() and not again[1].any()
    for v in venvs.values():
        v.close()


def compare(vout, rout):
    assert len(vout) == len(rout)
    for t, (v, r) in enumerate(zip(vout, rout)):
        assert len(v) == len(r), t
        for k in range(len(v)):
            if v[k] is None:  # final_obs outside same_step
                continue
            if isinstance(v[k], str):
                assert v[k] == r[k], t
            else:
                assert bits(v[k]) == bits(r[k]), "entry %d field %d" % (t, k)


def moving_actions(n, steps):
    """Breakout actions that move the paddle (1 left, 3 right) just before each reset
    and stand still (0) after it, so sticky actions would show a carried-over action."""
    acts = np.random.default_rng(1).integers(0, 6, size=(steps, n))
    for t in (9, 24):
        acts[t - 3:t] = np.where(np.arange(n) % 2, 1, 3)
        acts[t:t + 4] = 0
    return acts


@pytest.mark.parametrize("name,mode,n,threads", [("minatar/breakout", "next_step", 6, 1),
                                                 ("CartPole-v1", "same_step", 5, 1),
                                                 ("CartPole-v1", "disabled", 5, 1),
                                                 ("CartPole-v1", "next_step", 100, 2)])
def test_partial_reset_equals_c_api(name, mode, n, threads):
    """reset(seed, options={"reset_mask": mask}): each masked instance becomes a fresh
    env from seed (a new C instance reset with vec_episode_seed(seed, i, 0), its later
    episodes from the same rule), a pending next-step autoreset of it dropped; the
    others go on, their rows of obs their last observations. Bit for bit, under each
    autoreset mode and on the thread pool."""
    steps, cap = 36, 7
    rng = np.random.default_rng(3)
    resets = {9: (70, rng.random(n) < 0.5), 24: (71, np.arange(n) % 3 == 0)}
    opts = {"sticky_prob": 0.5} if name.startswith("minatar") else {}
    acts = moving_actions(n, steps) if name.startswith("minatar") else \
        np.random.default_rng(2).integers(0, 2, size=(steps, n))
    v0, vout = run_vec(name, n, 5, acts, cap, mode, threads, resets, **opts)
    r0, rout = reference(name, n, 5, acts, cap, mode, resets, **opts)
    assert bits(v0) == bits(r0)
    compare(vout, rout)
    # a reset instance's trajectory is that of a fresh vector reset with the same seed
    t0, (s, mask) = 24, resets[24]
    f0, fout = run_vec(name, n, s, acts[t0:], cap, mode, threads, **opts)
    k = sorted(resets).index(t0) + 1 + t0  # out's index of step t0 (after its reset entry)
    assert bits(vout[k - 1][1][mask]) == bits(f0[mask])
    for t, f in enumerate(fout):
        assert bits(vout[k + t][0][mask]) == bits(f[0][mask])
        assert bits(vout[k + t][1][mask]) == bits(f[1][mask])


def test_partial_reset_restarts_ended_instances():
    """With autoreset disabled, a masked reset is how ended instances start again."""
    v = nevo.make_vec("CartPole-v1", 3, seed=1, autoreset_mode="disabled", max_episode_steps=3, copy=False)
    v.reset()
    for _ in range(3):
        o, r, te, tr, _ = v.step(np.ones(3, np.int64))
    assert tr.all()
    before = o.copy()
    o2, r, te, tr, _ = v.step(np.ones(3, np.int64))
    assert tr.all() and not r.any() and bits(o2) == bits(before)  # ended: nothing happens
    mask = np.array([False, True, False])
    o3, _ = v.reset(seed=9, options={"reset_mask": mask})
    c = CEnv("CartPole-v1")
    assert bits(o3[1]) == bits(c.reset(nevo.vec_episode_seed(9, 1, 0)))
    c.close()
    assert bits(o3[[0, 2]]) == bits(before[[0, 2]])
    assert list(v.episodes()) == [1, 1, 1]
    o4, r, te, tr, _ = v.step(np.ones(3, np.int64))
    assert list(tr) == [True, False, True] and list(r) == [0.0, 1.0, 0.0]
    v.reset(options={"reset_mask": np.zeros(3, bool)})  # nothing reset
    assert list(v.episodes()) == [1, 1, 1]
    w = nevo.make_vec("CartPole-v1", 2)
    w.reset(options={"reset_mask": np.array([True, False])})
    expect("before the first reset of env 1", w.step, np.zeros(2, np.int64))
    w.close()
    v.close()


@pytest.mark.parametrize("name", ["CartPole-v1", "minatar/breakout", "mujoco/swimmer"])
def test_threads_never_change_results(name):
    n, steps = 100, 25
    venv = nevo.make_vec(name, n)
    acts = actions_for(venv, steps)
    venv.close()
    a0, a = run_vec(name, n, 3, acts, 8, "next_step", threads=1)
    b0, b = run_vec(name, n, 3, acts, 8, "next_step", threads=2)
    assert bits(a0) == bits(b0)
    for x, y in zip(a, b):
        for k in range(4):
            assert bits(x[k]) == bits(y[k])


def test_options_reach_the_env():
    """sticky_prob=0 makes MinAtar deterministic in the action: equal to the C API
    with the same option, and different from the default sticky actions."""
    acts = np.random.default_rng(0).integers(0, 6, size=(40, 2))
    v0, vout = run_vec("minatar/breakout", 2, 1, acts, 0, "next_step", sticky_prob=0)
    r0, rout = reference("minatar/breakout", 2, 1, acts, 0, "next_step", sticky_prob=0)
    for v, r in zip(vout, rout):
        assert bits(v[0]) == bits(r[0])


def test_spaces_and_shapes():
    v = nevo.make_vec("CartPole-v1", 8, seed=0)
    assert v.single_observation_space.shape == (4,)
    assert v.single_action_space == nevo.Discrete(2)
    assert v.observation_space.shape == (8, 4)
    assert v.metadata["autoreset_mode"] == "next_step"
    obs, info = v.reset()
    assert obs.shape == (8, 4) and obs.dtype == np.float32 and info == {}
    o, r, te, tr, info = v.step(v.action_space.sample().astype(np.int64) % 2)
    assert r.dtype == np.float32 and te.dtype == np.bool_ and tr.shape == (8,)
    v.close()
    m = nevo.make_vec("minatar/breakout", 2)
    assert m.single_observation_space.shape == (10, 10, 4)
    assert m.reset()[0].shape == (2, 10, 10, 4)
    h = nevo.make_vec("mujoco/hopper", 2)
    assert h.single_action_space.shape == (3,)
    assert np.all(h.single_action_space.low == -1) and np.all(h.single_action_space.high == 1)
    o, *_ = h.reset()
    o2, *_ = h.step(np.zeros((2, 3), np.float64))  # float64 actions are converted
    assert o2.shape == (2, 11)


def test_copy_false_returns_the_buffers():
    v = nevo.make_vec("CartPole-v1", 4, copy=False)
    o, _ = v.reset(seed=1)
    o2 = v.step(np.zeros(4, np.float32))[0]
    assert o2 is o  # no copy: the vector's own buffer, overwritten in place
    w = nevo.make_vec("CartPole-v1", 4)
    w.reset(seed=1)
    assert bits(w.step(np.zeros(4, np.int32))[0]) == bits(o2)


@pytest.mark.parametrize("mode,n", [("next_step", 3), ("same_step", 3), ("disabled", 300), ("same_step", 1000)])
def test_copy_true_arrays_are_never_overwritten(mode, n):
    """copy=True: every step's arrays are new (no two steps share memory), keep their
    values through later steps, and equal copies of copy=False's buffers taken at
    each step."""
    steps = 150
    acts = np.random.default_rng(4).integers(0, 2, size=(steps, n))
    v = nevo.make_vec("CartPole-v1", n, seed=2, autoreset_mode=mode, max_episode_steps=9)
    w = nevo.make_vec("CartPole-v1", n, seed=2, autoreset_mode=mode, max_episode_steps=9, copy=False)
    v.reset()
    w.reset()
    kept, want = [], []
    for a in acts:
        o, r, te, tr, info = v.step(a)
        kept.append((o, r, te, tr) + tuple(info.values()))
        o, r, te, tr, info = w.step(a)
        want.append(tuple(x.copy() for x in (o, r, te, tr) + tuple(info.values())))
        assert o is w._obs  # copy=False: the vector's own buffer
    for k in range(len(kept[0])):
        assert not np.shares_memory(kept[10][k], kept[11][k]) and not np.shares_memory(kept[10][k], w._obs)
    for k, x in zip(kept, want):
        assert len(k) == len(x) == (6 if mode == "same_step" else 4)
        for a, b in zip(k, x):
            assert bits(a) == bits(b)
    v.close()
    w.close()


def test_reset_seeds():
    v = nevo.make_vec("CartPole-v1", 3, seed=7)
    a, _ = v.reset()
    b, _ = v.reset(seed=7)
    c, _ = v.reset()  # seed 8: the make_vec seed the first time, then one more each reset
    d, _ = v.reset(seed=8)
    assert bits(a) == bits(b) and bits(c) == bits(d) and bits(a) != bits(c)


def expect(msg, fn, *args, **kw):
    with pytest.raises(nevo.Error) as e:
        fn(*args, **kw)
    assert msg in str(e.value), str(e.value)
    assert "\n" not in str(e.value)
    return e.value


def test_bad_arguments_raise_with_nevos_message():
    e = expect("unknown environment 'CartPol'", nevo.make_vec, "CartPol", 2)
    assert e.status == "notfound"
    expect("sticky_prb", nevo.make_vec, "minatar/breakout", 2, sticky_prb=0.1)
    expect("num_envs", nevo.make_vec, "CartPole-v1", 0)
    expect("autoreset_mode", nevo.make_vec, "CartPole-v1", 2, autoreset_mode="sometimes")
    expect("must be a number", nevo.make_vec, "minatar/breakout", 2, sticky_prob="high")
    v = nevo.make_vec("CartPole-v1", 2)
    expect("step before the first reset of env 0", v.step, np.zeros(2, np.int64))
    v.reset()
    expect("shape (2,)", v.step, np.zeros(3, np.int64))
    expect("must be integers", v.step, np.array(["a", "b"]))
    expect("is not one of its 2 actions", v.step, np.array([0, 2]))
    expect("is not one of its 2 actions", v.step, np.array([0.5, 1.0], np.float32))
    expect("is not one of its 2 actions", v.step, np.array([-1, 0]))
    v.step(np.array([1, 0]))  # still usable after refused steps
    expect("reset_mask must be (2,) booleans", v.reset, options={"reset_mask": np.array([1, 0])})
    expect("reset_mask must be (2,) booleans", v.reset, options={"reset_mask": np.ones(3, bool)})
    expect("reset option 'mask' is not one nevo has", v.reset, options={"mask": np.ones(2, bool)})
    expect("reset options must be a dict", v.reset, options=[True, False])
    h = nevo.make_vec("mujoco/hopper", 1)
    h.reset()
    expect("not finite", h.step, np.array([[0, np.nan, 0]], np.float32))
    expect("must be floats", h.step, np.zeros((1, 3), np.int64))
    expect("shape (1, 3)", h.step, np.zeros((1, 2), np.float32))
    h.close()
    expect("closed", h.step, np.zeros((1, 3), np.float64))


def test_every_form_of_actions_steps_the_same():
    """The stepper takes arrays of any integer, bool or float dtype, (n,) or (n, 1),
    contiguous or not, either byte order, and lists: each steps exactly as float32
    actions do (the C cast numpy's conversion makes)."""
    base = np.array([1, 0, 1, 1, 0, 1])
    wide = np.stack([base, 1 - base], 1)
    forms = [base.astype(np.int8), base.astype(np.uint16), base.astype(np.int32), base.astype(np.uint64),
             base.astype(bool), base.astype(np.float64), base.astype(np.float16), base.reshape(6, 1),
             wide[:, 0], base.astype(">i4"), list(base), tuple(int(x) for x in base)]
    ref = nevo.make_vec("CartPole-v1", 6, seed=4)
    ref.reset()
    want = ref.step(base.astype(np.float32))
    for a in forms:
        v = nevo.make_vec("CartPole-v1", 6, seed=4)
        v.reset()
        got = v.step(a)
        for x, y in zip(got[:4], want[:4]):
            assert bits(x) == bits(y), (a if isinstance(a, (list, tuple)) else a.dtype)
        v.close()
    h = nevo.make_vec("mujoco/hopper", 2, seed=1, copy=False)
    h.reset()
    box = np.array([[0.5, -0.25, 1.0], [0.0, 0.75, -1.0]])
    first = h.step(box.astype(np.float32))[0].copy()
    for a in (box, np.asfortranarray(box), box.tolist()):
        h.reset(seed=1)
        assert bits(h.step(a)[0]) == bits(first)
    h.close()


def test_one_thread_at_a_time_and_close_inside_a_conversion():
    """While one thread is inside a step (C, without the GIL), a step, reset or close
    of the same vector from another thread raises RuntimeError, and the step finishes;
    actions whose conversion closes the vector raise "closed" instead of stepping a
    freed vector; a bool action is 0 or 1 whatever its byte holds."""
    v = nevo.make_vec("mujoco/humanoid", 500, seed=0)
    v.reset()
    a = np.zeros((500, 17), np.float32)
    started, errors, done = threading.Event(), [], []

    def long_step():
        started.set()
        done.append(v.step(a))

    t = threading.Thread(target=long_step)
    t.start()
    started.wait()
    time.sleep(0.02)  # a step of 500 humanoids takes well over 0.1 s
    for fn in (lambda: v.step(a), v.reset, v.close):
        try:
            fn()
        except RuntimeError as e:
            errors.append(str(e))
    t.join()
    assert len(errors) == 3 and all("running in another thread" in e for e in errors), errors
    assert len(done) == 1 and done[0][0].shape == (500, 348)
    v.close()

    w = nevo.make_vec("CartPole-v1", 2, seed=0)
    w.reset()

    class ClosesOnConversion:
        def __array__(self, dtype=None):
            w.close()
            return np.zeros(2, np.int64)

    expect("closed", w.step, ClosesOnConversion())
    b = nevo.make_vec("CartPole-v1", 2, seed=0)
    c = nevo.make_vec("CartPole-v1", 2, seed=0)
    b.reset()
    c.reset()
    assert bits(b.step(np.array([2, 1], np.uint8).view(bool))[0]) == bits(c.step(np.array([1, 1]))[0])
