"""nevo from Python: vectorised environments, population evaluation and ask/tell
strategies over libnevo.so (through ctypes; docs/PYTHON.md).

Arrays go to C where they are (numpy buffers, no copies); every call into the library
releases the GIL while C works. Bad input raises nevo.Error carrying nevo's own
one-line message; nothing here aborts the interpreter."""
import ctypes
import functools
import json
import os

import numpy as np

from . import _lib
from ._lib import NevoEnvOption, NevoError

__all__ = ["Error", "envs", "make_vec", "VecEnv", "Box", "Discrete", "Policy", "load_policy", "evaluate",
           "Evaluation", "Strategy", "Ask", "train", "version", "episode_seed", "vec_episode_seed"]

_STATUS = {0: "ok", 1: "invalid", 2: "io", 3: "corrupt", 4: "version", 5: "notfound", 6: "numeric",
           7: "unsupported"}


class Error(ValueError):
    """A request nevo refused: str(e) is nevo's one-line message, e.status its kind
    ("invalid", "notfound", "io", ...)."""

    def __init__(self, msg, status="invalid"):
        super().__init__(msg)
        self.status = status


def _check(st, err):
    if st:
        raise Error(err.msg.decode("utf-8", "replace"), _STATUS.get(st, str(st)))


def version():
    """The version of the libnevo.so in use."""
    return _lib.nevo_version().decode()


def envs():
    """Names of every environment nevo has."""
    return [_lib.nevo_env_class_at(i).contents.name.decode() for i in range(_lib.nevo_env_count())]


def backends():
    """Names of the backends this library was built with ("cpu", and "cuda" in a
    `make CUDA=1` build; whether a device is present shows when one is asked for)."""
    return _lib.nevo_backend_names().decode().split(", ")


def episode_seed(seed, episode):
    """Env seed of evaluation episode `episode` under evaluation seed `seed` (what
    `nevo eval --seed` and evaluate() run)."""
    return int(_lib.nevo_eval_episode_seed(int(seed), int(episode)))


def vec_episode_seed(seed, env_index, episode):
    """Env seed of instance env_index's episode `episode` (0 = the one reset starts)
    after VecEnv.reset(seed)."""
    return int(_lib.nevo_vec_env_episode_seed(int(seed), int(env_index), int(episode)))


def _options(options):
    items = sorted((options or {}).items())
    arr = (NevoEnvOption * max(1, len(items)))()
    for i, (k, v) in enumerate(items):
        key = str(k).encode()
        if len(key) >= 48:
            raise Error("env option name '%s' is too long" % k)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise Error("env option %s must be a number, not %r" % (k, v))
        arr[i].key = key
        arr[i].value = float(v)
    return arr, len(items)


def _addr(a):
    return a.__array_interface__["data"][0]


def _int(x, what, lo=None, hi=None):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise Error("%s must be a whole number, not %r" % (what, x))
    x = int(x)
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise Error("%s must be from %s to %s, not %d" % (what, lo, hi, x))
    return x


# --- spaces ------------------------------------------------------------------------


class Discrete:
    """Gymnasium's Discrete(n): the actions 0 .. n-1."""

    def __init__(self, n):
        self.n = int(n)
        self.shape = ()
        self.dtype = np.dtype(np.int64)

    def sample(self, rng=None):
        return int((rng or np.random.default_rng()).integers(self.n))

    def contains(self, x):
        return isinstance(x, (int, np.integer)) and 0 <= int(x) < self.n

    def __repr__(self):
        return "Discrete(%d)" % self.n

    def __eq__(self, other):
        return isinstance(other, Discrete) and other.n == self.n


class Box:
    """Gymnasium's Box: arrays of `shape` within [low, high] (float32)."""

    def __init__(self, low, high, shape, dtype=np.float32):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.low = np.broadcast_to(np.asarray(low, self.dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, self.dtype), self.shape).copy()

    def sample(self, rng=None):
        rng = rng or np.random.default_rng()
        lo = np.where(np.isfinite(self.low), self.low, -1.0)
        hi = np.where(np.isfinite(self.high), self.high, 1.0)
        return rng.uniform(lo, hi).astype(self.dtype)

    def contains(self, x):
        x = np.asarray(x)
        return x.shape == self.shape and bool(np.all(x >= self.low) & np.all(x <= self.high))

    def __repr__(self):
        return "Box(%s, %s, %s, %s)" % (self.low.min(), self.high.max(), self.shape, self.dtype)

    def __eq__(self, other):
        return (isinstance(other, Box) and other.shape == self.shape and np.array_equal(other.low, self.low)
                and np.array_equal(other.high, self.high))


def _spaces(spec):
    obs_shape = tuple(spec.obs_shape[:spec.obs_rank])
    obs = Box(-np.inf, np.inf, obs_shape)
    if spec.action_kind == 0:
        act = Discrete(spec.n_actions)
    else:
        d = spec.action_dim
        act = Box(np.array(spec.action_low[:d], np.float32), np.array(spec.action_high[:d], np.float32), (d,))
    return obs, act


def _spec_dict(spec):
    return {"name": spec.name.decode(), "summary": spec.summary.decode(), "max_steps": spec.max_steps,
            "reward_threshold": spec.reward_threshold if spec.has_reward_threshold else None,
            "bc_dim": spec.bc_dim}


# --- vectorised environments --------------------------------------------------------

_AUTORESET = {"next_step": 0, "same_step": 1, "disabled": 2}


def _convert_actions(discrete, shape, name, a):
    """Actions the stepper's fast checks did not take, as a C-contiguous float32 array
    of `shape`; raises nevo.Error for what cannot be actions."""
    a = np.asarray(a)
    if discrete:
        if a.shape == shape + (1,):
            a = a.reshape(shape)
        if a.dtype.kind not in "iuf" and a.dtype != np.bool_:
            raise Error("actions must be integers (discrete actions), not %s" % a.dtype)
    elif a.dtype.kind != "f":
        raise Error("actions must be floats (%s has continuous actions), not %s" % (name, a.dtype))
    if a.shape != shape:
        raise Error("actions must have shape %s, not %s" % (shape, a.shape))
    return np.ascontiguousarray(a, np.float32)


def _step_error(err, status):
    """The stepper's error: status -1 after close, else the vector's message."""
    if status == -1:
        raise Error("the vector env is closed")
    _check(status, err)
    raise Error("step failed with status %d" % status)


class VecEnv(_lib.fast.VecStep):
    """num_envs instances of one nevo env stepped by one C call (Gymnasium's vector API:
    reset() -> (obs, infos), step(actions) -> (obs, rewards, terminated, truncated,
    infos)). Make it with nevo.make_vec. step is its compiled base's (nevo/_fast.c)."""

    def __init__(self, env_id, num_envs=1, seed=0, autoreset_mode="next_step", num_threads=1, max_episode_steps=0,
                 copy=True, **options):
        if getattr(self, "_h", None):
            raise Error("a VecEnv is made once")
        if not isinstance(env_id, str):
            raise Error("env id must be a string, not %r" % (env_id,))
        num_envs = _int(num_envs, "num_envs", 1, 1 << 24)
        num_threads = _int(num_threads, "num_threads", 1, 1024)
        max_episode_steps = _int(max_episode_steps if max_episode_steps is not None else 0, "max_episode_steps", 0)
        self._seed = _int(seed if seed is not None else 0, "seed", 0, (1 << 64) - 1)
        if autoreset_mode not in _AUTORESET:
            raise Error("autoreset_mode must be one of %s, not %r" % (", ".join(_AUTORESET), autoreset_mode))
        opts, n_opts = _options(options)
        err = NevoError()
        h = ctypes.c_void_p()
        _check(_lib.nevo_vec_env_new(env_id.encode(), opts, n_opts, num_envs, max_episode_steps,
                                     _AUTORESET[autoreset_mode], num_threads, ctypes.byref(h), ctypes.byref(err)),
               err)
        self._h = h.value
        self._err = err
        spec = _lib.nevo_vec_env_spec(self._h).contents
        self.spec = _spec_dict(spec)
        self.num_envs = num_envs
        self.autoreset_mode = autoreset_mode
        self.metadata = {"autoreset_mode": autoreset_mode}
        self._copy = bool(copy)
        self.single_observation_space, self.single_action_space = _spaces(spec)
        obs_shape = self.single_observation_space.shape
        self.observation_space = Box(-np.inf, np.inf, (num_envs,) + obs_shape)
        if isinstance(self.single_action_space, Discrete):
            self.action_space = Box(0, spec.n_actions - 1, (num_envs,), np.int64)
            self._act_shape = (num_envs,)
        else:
            a = self.single_action_space
            self.action_space = Box(np.broadcast_to(a.low, (num_envs,) + a.shape),
                                    np.broadcast_to(a.high, (num_envs,) + a.shape), (num_envs,) + a.shape)
            self._act_shape = (num_envs, spec.action_dim)
        self._discrete = isinstance(self.single_action_space, Discrete)
        self._obs = np.zeros((num_envs,) + obs_shape, np.float32)
        self._rew = np.zeros(num_envs, np.float32)
        self._term = np.zeros(num_envs, np.bool_)
        self._trunc = np.zeros(num_envs, np.bool_)
        same = autoreset_mode == "same_step"
        self._final = np.zeros((num_envs,) + obs_shape, np.float32) if same else None
        self._has_final = np.zeros(num_envs, np.bool_) if same else None
        # step (the compiled base's) converts the actions into _act, steps with the GIL
        # released, obs always into _obs (each instance's last observation, which a
        # partial reset keeps), and returns these arrays (copy=False) or new ones
        # (copy=True: obs copied, the rest stepped into). Neither callable it keeps
        # refers to self, so a dropped VecEnv is freed at once (no reference cycle).
        self._act = np.zeros((num_envs, spec.action_dim), np.float32)
        self._set_step(
            _lib.vec_step_addr, self._h, ctypes.addressof(err), num_envs, spec.action_dim, self._discrete, obs_shape,
            same, self._copy, self._act, (self._obs, self._rew, self._term, self._trunc, self._final, self._has_final),
            functools.partial(_convert_actions, self._discrete, self._act_shape, self.spec["name"]),
            functools.partial(_step_error, err))

    def reset(self, seed=None, options=None):
        """Starts every instance's episode 0: instance i from vec_episode_seed(seed, i,
        0), a fresh env. seed None: the make_vec seed the first time, then one more
        each reset. options={"reset_mask": mask} ((num_envs,) booleans) resets only
        the instances where mask is True, the same way; the others go on, their rows
        of obs being their last observations. Returns (obs, infos)."""
        self._alive()
        self._step_idle()
        mask = None
        if options is not None:
            if not isinstance(options, dict):
                raise Error("reset options must be a dict, not %s" % type(options).__name__)
            for k in options:
                if k != "reset_mask":
                    raise Error("reset option %r is not one nevo has (reset_mask)" % (k,))
            if "reset_mask" in options:
                mask = np.asarray(options["reset_mask"])
                if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
                    raise Error("reset_mask must be (%d,) booleans, not %s %s" % (self.num_envs, mask.shape,
                                                                                 mask.dtype))
                mask = np.ascontiguousarray(mask)
        if seed is None:
            seed = self._seed
        seed = _int(seed, "seed", 0, (1 << 64) - 1)
        self._seed = (seed + 1) % (1 << 64)
        _lib.nevo_vec_env_reset_masked(self._h, seed, None if mask is None else _addr(mask), _addr(self._obs))
        return (self._obs.copy() if self._copy else self._obs), {}

    @property
    def copy(self):
        """Whether each call returns new arrays (make_vec's copy; fixed when made)."""
        return self._copy

    def _alive(self):
        if self._h is None:
            raise Error("the vector env is closed")

    def episodes(self):
        """Episodes each instance has started since its last reset (0: never reset)."""
        self._alive()
        return np.array([_lib.nevo_vec_env_episode(self._h, i) for i in range(self.num_envs)])

    def close(self):
        if getattr(self, "_h", None):
            self._close_step()
            _lib.nevo_vec_env_free(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "VecEnv(%s, num_envs=%d)" % (self.spec["name"], self.num_envs)


def make_vec(env_id, num_envs=1, seed=0, *, autoreset_mode="next_step", num_threads=1, max_episode_steps=0,
             copy=True, **options):
    """num_envs instances of the env env_id (`nevo envs`), options being the env's own
    (e.g. sticky_prob=0 for MinAtar). autoreset_mode: "next_step" (Gymnasium's
    default), "same_step" or "disabled"; num_threads > 1 steps over a thread pool;
    copy=False returns the vector's own buffers (overwritten by the next step)."""
    return VecEnv(env_id, num_envs, seed, autoreset_mode, num_threads, max_episode_steps, copy, **options)


# --- policies and population evaluation ----------------------------------------------


def _config_text(config):
    if isinstance(config, str):
        return config
    if not isinstance(config, dict):
        raise Error("a config is a dict (nevo train's keys) or JSON text, not %s" % type(config).__name__)
    return json.dumps(config)


class Policy:
    """A network for an env, with the batched evaluator over a thread pool. Made from
    a config (nevo train's keys: env, env_options, policy, es.obs_norm, backend; or
    keywords: Policy(env="CartPole-v1", hidden=[16])), or by load_policy(path), which
    also gives its parameters (policy.params). backend= ("cpu", "cuda") is where
    evaluate computes the networks (policy.backend; the same results)."""

    def __init__(self, config=None, threads=0, *, env=None, env_options=None, backend=None, **policy_keys):
        threads = _int(threads, "threads", 0, 1024)
        self._h = None
        if config is None:
            config = {}
        elif not isinstance(config, (dict, str)):
            raise Error("a config is a dict (nevo train's keys) or JSON text, not %s" % type(config).__name__)
        if isinstance(config, str):
            try:
                config = json.loads(config)
            except ValueError as e:
                raise Error("config: %s" % e)
        config = dict(config)
        if env is not None:
            config["env"] = env
        if env_options:
            config["env_options"] = dict(env_options)
        if policy_keys:
            config["policy"] = dict(config.get("policy", {}), **policy_keys)
        if backend is not None:
            config["backend"] = backend
        self._make(_lib.nevo_pop_eval_new, _config_text(config).encode(), threads)

    @classmethod
    def _load(cls, path, threads=0, backend=None):
        self = cls.__new__(cls)
        self._h = None
        self._make(_lib.nevo_pop_eval_load, os.fsencode(path), _int(threads, "threads", 0, 1024))
        if backend is not None:
            try:
                self._set_backend(backend)
            except Error:
                self.close()
                raise
        return self

    def _set_backend(self, name):
        if not isinstance(name, str):
            raise Error("backend must be a name (cpu or cuda), not %s" % type(name).__name__)
        err = NevoError()
        _check(_lib.nevo_pop_eval_set_backend(self._h, name.encode(), ctypes.byref(err)), err)

    @property
    def backend(self):
        """Where evaluate computes the networks: "cpu" or "cuda" (a loaded policy's
        config keeps the backend it was trained on)."""
        return _lib.nevo_pop_eval_backend(self._h).decode()

    def _make(self, fn, arg, threads):
        err = NevoError()
        h = ctypes.c_void_p()
        _check(fn(arg, threads, ctypes.byref(h), ctypes.byref(err)), err)
        self._h = h.value
        spec = _lib.nevo_pop_eval_spec(self._h).contents
        self.spec = _spec_dict(spec)
        self.env = self.spec["name"]
        self.bc_dim = spec.bc_dim
        self.observation_space, self.action_space = _spaces(spec)
        self._obs_dim = spec.obs_dim
        self._act_dim = spec.action_dim
        self._discrete = spec.action_kind == 0
        self.nparams = int(_lib.nevo_pop_eval_nparams(self._h))
        self.config = json.loads(_lib.nevo_pop_eval_config(self._h).decode())
        theta = _lib.nevo_pop_eval_theta(self._h)
        self.params = None
        if theta:
            self.params = np.ctypeslib.as_array((ctypes.c_float * self.nparams).from_address(theta)).copy()
        self._state_floats = int(_lib.nevo_pop_eval_state_floats(self._h))
        self._state = None

    @property
    def obs_norm(self):
        """(mean, std) of the observation normalisation (copies), None without one."""
        if not _lib.nevo_pop_eval_obs_norm(self._h):
            return None
        d = self._obs_dim
        mean = np.ctypeslib.as_array((ctypes.c_float * d).from_address(_lib.nevo_pop_eval_obs_mean(self._h)))
        std = np.ctypeslib.as_array((ctypes.c_float * d).from_address(_lib.nevo_pop_eval_obs_std(self._h)))
        return mean.copy(), std.copy()

    def set_obs_norm(self, mean, std):
        """Sets the normalisation the network runs with (e.g. a strategy's ask.obs_mean,
        ask.obs_std): obs_dim floats each, std > 0."""
        if not _lib.nevo_pop_eval_obs_norm(self._h):
            raise Error("this network does not normalise observations (es.obs_norm is off)")
        d = self._obs_dim
        mean = np.asarray(mean, np.float64)
        std = np.asarray(std, np.float64)
        if mean.shape != (d,) or std.shape != (d,):
            raise Error("mean and std must have shape (%d,), not %s and %s" % (d, mean.shape, std.shape))
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)):
            raise Error("mean and std must be finite, std > 0")
        np.ctypeslib.as_array((ctypes.c_float * d).from_address(_lib.nevo_pop_eval_obs_mean(self._h)))[:] = mean
        np.ctypeslib.as_array((ctypes.c_float * d).from_address(_lib.nevo_pop_eval_obs_std(self._h)))[:] = std

    def _params_matrix(self, params, what="params"):
        if not isinstance(params, np.ndarray):
            raise Error("%s must be a numpy float32 array of shape (P, %d), not %s" %
                        (what, self.nparams, type(params).__name__))
        if params.dtype != np.float32:
            raise Error("%s must be float32 (nevo reads them in place), not %s" % (what, params.dtype))
        if params.ndim == 1:
            params = params.reshape(1, -1)
        if params.ndim != 2 or params.shape[1] != self.nparams:
            raise Error("%s must have shape (P, %d) for this network of %d parameters, not %s" %
                        (what, self.nparams, self.nparams, params.shape))
        if params.strides[1] != 4 or params.strides[0] % 4 or params.strides[0] < 4 * self.nparams:
            params = np.ascontiguousarray(params)  # rows must be whole float runs
        if not np.all(np.isfinite(params)):
            raise Error("%s hold NaN or infinity" % what)
        return params

    def act(self, obs, params=None):
        """Actions for observations obs ((obs_dim,) or (n, ...)) of the network with
        params (default: the loaded ones). A recurrent network keeps a state per row
        between calls (reset() zeroes it). Discrete actions come back as int64."""
        params = self.params if params is None else params
        if params is None:
            raise Error("no parameters: give params (this policy was not loaded from a file)")
        theta = self._params_matrix(params)
        if theta.shape[0] != 1:
            raise Error("act runs one network: params must be (%d,), not %s" % (self.nparams, params.shape))
        obs = np.asarray(obs)
        if obs.dtype.kind not in "fiub":
            raise Error("observations must be numbers, not %s" % obs.dtype)
        single = obs.shape == self.observation_space.shape
        x = np.ascontiguousarray(obs.reshape(-1, self._obs_dim) if obs.size % self._obs_dim == 0 and obs.size
                                 else obs, np.float32)
        if x.ndim != 2 or x.shape[1] != self._obs_dim or (not single and obs.shape[1:] not in
                                                          (self.observation_space.shape, (self._obs_dim,))):
            raise Error("observations must have shape %s or (n, %s), not %s" %
                        (self.observation_space.shape, ", ".join(map(str, self.observation_space.shape)), obs.shape))
        n = x.shape[0]
        state = None
        if self._state_floats:
            if self._state is None or self._state.shape[0] != n:
                self._state = np.zeros((n, self._state_floats), np.float32)
            state = _addr(self._state)
        out = np.empty((n, self._act_dim), np.float32)
        _lib.nevo_pop_eval_act(self._h, _addr(theta), _addr(x), n, state, _addr(out))
        if self._discrete:
            out = out[:, 0].astype(np.int64)
        return out[0] if single else out

    def reset(self):
        """Zeroes a recurrent network's state (a new episode)."""
        self._state = None

    def save(self, path, params=None):
        """Writes params (default: the loaded ones) as a policy file `nevo eval` reads."""
        params = self.params if params is None else params
        theta = self._params_matrix(params)
        if theta.shape[0] != 1:
            raise Error("save writes one network: params must be (%d,)" % self.nparams)
        err = NevoError()
        _check(_lib.nevo_pop_eval_save(self._h, os.fsencode(path), _addr(theta), ctypes.byref(err)), err)

    def evaluate(self, params, episodes=1, seed=0, max_steps=None, rows=None, seeds=None):
        """evaluate(self, params, ...): see nevo.evaluate."""
        params = self._params_matrix(params)
        P = params.shape[0]
        if rows is None and seeds is None:
            episodes = _int(episodes, "episodes", 1, 100000000)
            seed = _int(seed, "seed", 0, (1 << 64) - 1)
            _lib.nevo_pop_eval_set_seed(self._h, seed)
            rows_a = seeds_a = None  # C numbers the episodes: row-major, nevo eval's seeds
            n = P * episodes
            shape = (P, episodes)
        else:
            if rows is None or seeds is None:
                raise Error("give both rows and seeds (one episode each), or neither")
            rows_a = np.asarray(rows)
            seeds_a = np.asarray(seeds)
            if rows_a.ndim != 1 or seeds_a.shape != rows_a.shape:
                raise Error("rows and seeds must be 1-D arrays of one length, not %s and %s" %
                            (rows_a.shape, seeds_a.shape))
            if rows_a.dtype.kind not in "iu" or seeds_a.dtype.kind not in "iu":
                raise Error("rows and seeds must be integers, not %s and %s" % (rows_a.dtype, seeds_a.dtype))
            if seeds_a.dtype.kind == "i" and seeds_a.size and seeds_a.min() < 0:
                raise Error("seeds must be non-negative")
            rows_a = np.ascontiguousarray(rows_a, np.int32)
            seeds_a = np.ascontiguousarray(seeds_a, np.uint64)
            shape = rows_a.shape
            n = rows_a.size
        if max_steps is not None:
            _lib.nevo_pop_eval_set_max_steps(self._h, _int(max_steps, "max_steps", 1))
        ret = np.empty(n, np.float64)
        length = np.empty(n, np.int32)
        term = np.empty(n, np.bool_)
        bc = np.zeros((n, max(self.bc_dim, 1)), np.float32)
        err = NevoError()
        try:
            st = _lib.nevo_pop_eval_run(self._h, _addr(params), params.strides[0] // 4, P,
                                        None if rows_a is None else _addr(rows_a),
                                        None if seeds_a is None else _addr(seeds_a), n, _addr(ret), _addr(length), _addr(term), _addr(bc),
                                        ctypes.byref(err))
        finally:
            if max_steps is not None:
                _lib.nevo_pop_eval_set_max_steps(self._h, 0)
        _check(st, err)
        return Evaluation(ret.reshape(shape), length.reshape(shape), term.reshape(shape),
                          bc[:, :self.bc_dim].reshape(shape + (self.bc_dim,)))

    def close(self):
        if getattr(self, "_h", None):
            _lib.nevo_pop_eval_free(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __repr__(self):
        return "Policy(%s, nparams=%d)" % (self.env, self.nparams)


def load_policy(path, threads=0, backend=None):
    """A saved policy (policy.nevo of a run, or Policy.save): its env, network,
    parameters (policy.params) and observation normalisation, evaluated on backend
    (default "cpu", whatever it was trained on)."""
    return Policy._load(path, threads, backend)


class Evaluation:
    """What evaluate() returns: returns (float64), lengths (int32), terminated (bool),
    each (P, episodes), and behaviours (P, episodes, bc_dim) float32."""

    def __init__(self, returns, lengths, terminated, behaviours):
        self.returns = returns
        self.lengths = lengths
        self.terminated = terminated
        self.behaviours = behaviours

    def __repr__(self):
        return "Evaluation(returns=%r, lengths=%r)" % (self.returns, self.lengths)


def evaluate(policy, params, env=None, episodes=1, seed=0, max_steps=None, threads=0, rows=None, seeds=None,
             backend=None):
    """Episodes of every row of params ((P, nparams) float32, read in place) through
    the batched evaluator and its threads. policy: a Policy, a config dict (nevo
    train's keys; env= names the env), or a policy file's path. Row p's episode e
    starts from episode_seed(seed, e), the seeds `nevo eval --seed` uses, so every row
    meets the same episodes. Or give rows and seeds (1-D, one episode each) to choose
    every episode. max_steps caps episodes (default: the config's max_episode_steps,
    else the env's own limit). backend: where the networks are computed ("cpu",
    "cuda"; a Policy's own). Returns an Evaluation."""
    own = False
    if isinstance(policy, (str, bytes, os.PathLike)):
        if env is not None:
            raise Error("a policy file names its env; env= is for configs")
        policy, own = load_policy(policy, threads, backend), True
    elif isinstance(policy, dict):
        policy, own = Policy(policy, threads, env=env, backend=backend), True
    elif isinstance(policy, Policy):
        if env is not None and env != policy.env:
            raise Error("this policy is a network for %s, not %s" % (policy.env, env))
        if backend is not None and backend != policy.backend:
            raise Error("this policy evaluates on %s; make it with backend=%r" % (policy.backend, backend))
    else:
        raise Error("policy must be a nevo.Policy, a config dict or a policy file's path, not %s" %
                    type(policy).__name__)
    try:
        return policy.evaluate(params, episodes, seed, max_steps, rows, seeds)
    finally:
        if own:
            policy.close()


# --- ask/tell ------------------------------------------------------------------------

_STAT_KEYS = ("generation", "generation_frames", "generation_episodes", "best_fitness", "mean_fitness",
              "median_fitness", "elite_validation_mean", "archive_size", "novelty_mean", "reward_weight")


class Ask:
    """One evaluation a strategy asks for: networks params (n_nets, nparams) float32,
    and episodes: rows (n_tasks,) int32 (which network), seeds (n_tasks,) uint64 (its
    env seed; on a dataset, the seed its batch is drawn from), flags (n_tasks,) uint32;
    obs_mean / obs_std: the normalisation the networks run with (None without)."""

    def __init__(self, params, rows, seeds, flags, obs_mean, obs_std):
        self.params, self.rows, self.seeds, self.flags = params, rows, seeds, flags
        self.obs_mean, self.obs_std = obs_mean, obs_std

    def __len__(self):
        return len(self.rows)


class Strategy:
    """An evolution algorithm of a config (nevo train's keys: algo ga, rs, es, ga-ns,
    ns-es, nsr-es, nsra-es) as ask/tell, on an env or on a dataset:

        s = nevo.Strategy(config)
        while not s.done:
            ask = s.ask()                  # ask.params, ask.rows, ask.seeds
            fitness = s.evaluate(ask)      # or your own: one return per episode
            metrics = s.tell(fitness)      # a dict when the generation is complete

    With s.evaluate, tell reproduces `nevo train` generation for generation. On a
    dataset an "episode" is its network scored on the batch its seed draws: fitness
    -mean cross-entropy over data.fitness_batch training samples."""

    def __init__(self, config, threads=0):
        threads = _int(threads, "threads", 0, 1024)
        self._h = None
        err = NevoError()
        h = ctypes.c_void_p()
        _check(_lib.nevo_strategy_new(_config_text(config).encode(), threads, ctypes.byref(h), ctypes.byref(err)),
               err)
        self._h = h.value
        self.config = json.loads(_lib.nevo_strategy_config(self._h).decode())
        self.nparams = int(_lib.nevo_strategy_nparams(self._h))
        spec = _lib.nevo_strategy_spec(self._h).contents
        self._od, self._bc_dim = spec.obs_dim, spec.bc_dim
        self.on_data = bool(self.config.get("dataset"))
        self.frames = 0
        self.episodes = 0
        self._ask = None

    @property
    def generation(self):
        """Generations completed."""
        return int(_lib.nevo_strategy_generations_done(self._h))

    @property
    def done(self):
        """Whether the config's generations (or max_frames) are reached."""
        budget = self.config.get("max_frames", 0)
        return self.generation >= self.config["generations"] or (budget > 0 and self.frames >= budget)

    def ask(self):
        """The evaluation the algorithm needs next (an Ask); asking again before tell
        gives the same one."""
        if self._ask is not None:
            return self._ask
        nn, nt = ctypes.c_int(), ctypes.c_int()
        _lib.nevo_strategy_ask(self._h, ctypes.byref(nn), ctypes.byref(nt))
        params = np.empty((nn.value, self.nparams), np.float32)
        rows = np.empty(nt.value, np.int32)
        seeds = np.empty(nt.value, np.uint64)
        flags = np.empty(nt.value, np.uint32)
        if nn.value:
            _lib.nevo_strategy_ask_params(self._h, _addr(params), self.nparams)
        if nt.value:
            _lib.nevo_strategy_ask_tasks(self._h, _addr(rows), _addr(seeds), _addr(flags))
        mean, std = np.empty(self._od, np.float32), np.empty(self._od, np.float32)
        has = _lib.nevo_strategy_obs_norm(self._h, _addr(mean), _addr(std))
        self._ask = Ask(params, rows, seeds, flags, mean if has else None, std if has else None)
        return self._ask

    def evaluate(self, ask=None):
        """Runs the asked episodes on the strategy's evaluator (as nevo train does,
        recording what the algorithm asks to record; on a dataset, each network's
        -mean cross-entropy on its batch: returns, and the batch's samples as
        lengths). Returns an Evaluation of (n_tasks,) arrays, which tell() takes."""
        ask = self.ask() if ask is None else ask
        if ask is not self._ask:
            raise Error("this is not the evaluation the strategy asked for last")
        n = len(ask)
        ret, length = np.empty(n, np.float64), np.empty(n, np.int32)
        term = np.empty(n, np.bool_)
        bc = np.zeros((n, max(self._bc_dim, 1)), np.float32)
        err = NevoError()
        _check(_lib.nevo_strategy_evaluate(self._h, _addr(ret), _addr(length), _addr(term), _addr(bc),
                                           ctypes.byref(err)), err)
        return Evaluation(ret, length, term, bc[:, :self._bc_dim])

    def tell(self, fitness, lengths=None, terminated=None, behaviours=None):
        """The results of the asked episodes: an Evaluation (from evaluate() or
        nevo.evaluate(..., rows=ask.rows, seeds=ask.seeds)), or returns (n_tasks,)
        with optional lengths, terminated and behaviours (n_tasks, bc_dim). Returns
        the generation's metrics (metrics.jsonl's keys) when it is complete, else None
        (the algorithm asks again: the GA's elite candidates). On a dataset lengths
        default to the batch's samples, and the metrics add train_loss, test_loss and
        test_accuracy of the best policy."""
        ask = self.ask()
        n = len(ask)
        if isinstance(fitness, Evaluation):
            fitness, lengths, terminated, behaviours = (fitness.returns, fitness.lengths, fitness.terminated,
                                                        fitness.behaviours)

        def arr(x, dtype, shape, what):
            if x is None:
                return None
            x = np.asarray(x)
            if x.shape != shape:
                raise Error("%s must have shape %s (one per asked episode), not %s" % (what, shape, x.shape))
            if dtype == np.bool_:
                if x.dtype != np.bool_:
                    raise Error("%s must be booleans, not %s" % (what, x.dtype))
            elif np.dtype(dtype).kind == "i" and x.dtype.kind not in "iu":
                raise Error("%s must be integers, not %s" % (what, x.dtype))
            elif np.dtype(dtype).kind == "f" and x.dtype.kind not in "fiu":
                raise Error("%s must be numbers, not %s" % (what, x.dtype))
            return np.ascontiguousarray(x, dtype)

        ret = arr(fitness, np.float64, (n,), "fitness")
        if ret is None:
            raise Error("fitness must be given")
        length = arr(lengths, np.int32, (n,), "lengths")
        term = arr(terminated, np.bool_, (n,), "terminated")
        bc = arr(behaviours, np.float32, (n, self._bc_dim), "behaviours") if self._bc_dim else None
        stats = np.zeros(_lib.STRATEGY_STATS, np.float64)
        done = ctypes.c_int()
        err = NevoError()
        p = lambda a: None if a is None else _addr(a)  # noqa: E731
        st = _lib.nevo_strategy_tell(self._h, _addr(ret), p(length), p(term), p(bc), _addr(stats),
                                     ctypes.byref(done), ctypes.byref(err))
        self._ask = None  # refused, the algorithm asks the same again; told, a new one
        _check(st, err)
        if not done.value:
            return None
        m = dict(zip(_STAT_KEYS, stats[:10].tolist()))
        for k in ("generation", "generation_frames", "generation_episodes", "archive_size"):
            m[k] = int(m[k])
        self.frames += m["generation_frames"]
        self.episodes += m["generation_episodes"]
        m["frames"], m["episodes"] = self.frames, self.episodes
        if self.on_data:
            m.update(zip(("train_loss", "test_loss", "test_accuracy"), stats[10:13].tolist()))
        bd = int(stats[13])
        if bd:
            m["behaviour"] = stats[14:14 + bd].astype(np.float32).tolist()
        return m

    def step(self):
        """One whole generation: ask, evaluate, tell until complete; its metrics."""
        while True:
            m = self.tell(self.evaluate(self.ask()))
            if m is not None:
                return m

    def best(self):
        """The current best parameters (nparams float32)."""
        theta = np.empty(self.nparams, np.float32)
        _lib.nevo_strategy_best(self._h, _addr(theta))
        return theta

    def save(self, path):
        """Saves the current best as a policy file (nevo eval, load_policy)."""
        err = NevoError()
        _check(_lib.nevo_strategy_save(self._h, os.fsencode(path), ctypes.byref(err)), err)

    def close(self):
        if getattr(self, "_h", None):
            _lib.nevo_strategy_free(self._h)
            self._h = None

    def __del__(self):
        self.close()


# --- runs ----------------------------------------------------------------------------


def train(config, out_dir, threads=0, resume=False):
    """A whole training run (what `nevo train` does) into out_dir: config.json,
    metrics.jsonl, checkpoint.bin, policy.nevo, summary.json. Returns the summary as a
    dict."""
    threads = _int(threads, "threads", 0, 1024)
    err = NevoError()
    _check(_lib.nevo_train_json(_config_text(config).encode(), os.fsencode(out_dir), int(bool(resume)), threads,
                                ctypes.byref(err)), err)
    with open(os.path.join(out_dir, "summary.json")) as f:
        return json.load(f)
