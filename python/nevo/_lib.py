"""ctypes declarations of the libnevo.so functions the package calls (nevo/vec.h and a
few of env.h, eval.h, status.h, version.h)."""
import ctypes
import os
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float, c_int,
                    c_size_t, c_uint64, c_void_p)

ENV_MAX_ACT_DIM = 32
ENV_MAX_BC = 8
STRATEGY_STATS = 14 + ENV_MAX_BC


class NevoError(Structure):
    _fields_ = [("status", c_int), ("msg", c_char * 512)]


class NevoEnvOption(Structure):
    _fields_ = [("key", c_char * 48), ("value", c_double)]


class NevoEnvSpec(Structure):
    _fields_ = [("name", c_char_p), ("summary", c_char_p), ("obs_rank", c_int), ("obs_shape", c_int * 3),
                ("obs_dim", c_int), ("action_kind", c_int), ("n_actions", c_int), ("action_dim", c_int),
                ("action_low", c_float * ENV_MAX_ACT_DIM), ("action_high", c_float * ENV_MAX_ACT_DIM),
                ("max_steps", c_int), ("has_reward_threshold", c_bool), ("reward_threshold", c_double),
                ("state_dim", c_int), ("bc_dim", c_int)]


def _candidates():
    """Where libnevo.so is looked for, in order: $NEVO_LIB; the build tree this package
    sits in (python/nevo -> ../../build); the dynamic loader's search path (an
    installed libnevo.so.0, LD_LIBRARY_PATH); PREFIX/lib of this Python's prefix."""
    if os.environ.get("NEVO_LIB"):
        yield os.environ["NEVO_LIB"]
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "..", "build", "libnevo.so")
    yield "libnevo.so.0"
    import sys
    for prefix in (sys.prefix, "/usr/local"):
        yield os.path.join(prefix, "lib", "libnevo.so.0")


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("nevo: libnevo.so not found; build it (make) or install it (make install), "
                      "or set NEVO_LIB to its path. Tried: " + "; ".join(tried))


lib, path = _load()


def _load_fast():
    """The compiled stepper: the package's own (pip install builds it), else the one
    `make` builds next to the library loaded (BUILD/python/nevo/_fast<EXT_SUFFIX>)."""
    try:
        from . import _fast
        return _fast
    except ImportError:
        pass
    import importlib.machinery
    import importlib.util
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(path)), "python", "nevo") if os.sep in path else None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES if here else ():
        f = os.path.join(here, "_fast" + suffix)
        if os.path.exists(f):
            spec = importlib.util.spec_from_file_location("nevo._fast", f)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise ImportError("nevo: its compiled part nevo._fast was not found for this Python (%d.%d, %s): `make` builds it "
                      "next to libnevo.so (%s), `pip install --no-build-isolation ./python` into the package"
                      % (sys.version_info[0], sys.version_info[1], sys.executable,
                         os.path.join(here, "_fast" + importlib.machinery.EXTENSION_SUFFIXES[0]) if here
                         else "the build tree"))


fast = _load_fast()

_P = c_void_p  # arrays: numpy addresses as integers
_E = POINTER(NevoError)


def _fn(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


nevo_version = _fn("nevo_version", c_char_p)
nevo_env_count = _fn("nevo_env_count", c_int)
nevo_backend_names = _fn("nevo_backend_names", c_char_p)
nevo_env_class_at = _fn("nevo_env_class_at", POINTER(NevoEnvSpec), c_int)  # spec is the class's first member
nevo_eval_episode_seed = _fn("nevo_eval_episode_seed", c_uint64, c_uint64, c_int)

# the single-env C API (tests compare the vector with it)
nevo_env_new = _fn("nevo_env_new", c_int, c_char_p, POINTER(NevoEnvOption), c_int, POINTER(c_void_p), _E)
nevo_env_free = _fn("nevo_env_free", None, c_void_p)
nevo_env_spec = _fn("nevo_env_spec", POINTER(NevoEnvSpec), c_void_p)
nevo_env_set_max_steps = _fn("nevo_env_set_max_steps", None, c_void_p, c_int)
nevo_env_instance_size = _fn("nevo_env_instance_size", c_size_t, c_void_p)
nevo_env_instance_free = _fn("nevo_env_instance_free", None, c_void_p, _P)
nevo_env_reset = _fn("nevo_env_reset", None, c_void_p, _P, c_uint64, _P)
nevo_env_step_raw = _fn("nevo_env_step", None, c_void_p, _P, _P, _P, _P)

nevo_vec_env_new = _fn("nevo_vec_env_new", c_int, c_char_p, POINTER(NevoEnvOption), c_int, c_int, c_int, c_int,
                       c_int, POINTER(c_void_p), _E)
nevo_vec_env_free = _fn("nevo_vec_env_free", None, c_void_p)
nevo_vec_env_spec = _fn("nevo_vec_env_spec", POINTER(NevoEnvSpec), c_void_p)
nevo_vec_env_episode_seed = _fn("nevo_vec_env_episode_seed", c_uint64, c_uint64, c_int, c_int)
nevo_vec_env_reset = _fn("nevo_vec_env_reset", None, c_void_p, c_uint64, _P)
nevo_vec_env_reset_masked = _fn("nevo_vec_env_reset_masked", None, c_void_p, c_uint64, _P, _P)
# VecEnv.step calls nevo_vec_env_step from the compiled stepper (nevo/_fast.c) at this address
vec_step_addr = ctypes.cast(lib.nevo_vec_env_step, c_void_p).value
nevo_vec_env_episode = _fn("nevo_vec_env_episode", c_int, c_void_p, c_int)

nevo_pop_eval_new = _fn("nevo_pop_eval_new", c_int, c_char_p, c_int, POINTER(c_void_p), _E)
nevo_pop_eval_load = _fn("nevo_pop_eval_load", c_int, c_char_p, c_int, POINTER(c_void_p), _E)
nevo_pop_eval_free = _fn("nevo_pop_eval_free", None, c_void_p)
nevo_pop_eval_spec = _fn("nevo_pop_eval_spec", POINTER(NevoEnvSpec), c_void_p)
nevo_pop_eval_nparams = _fn("nevo_pop_eval_nparams", c_size_t, c_void_p)
nevo_pop_eval_config = _fn("nevo_pop_eval_config", c_char_p, c_void_p)
nevo_pop_eval_theta = _fn("nevo_pop_eval_theta", c_void_p, c_void_p)
nevo_pop_eval_obs_norm = _fn("nevo_pop_eval_obs_norm", c_int, c_void_p)
nevo_pop_eval_obs_mean = _fn("nevo_pop_eval_obs_mean", c_void_p, c_void_p)
nevo_pop_eval_obs_std = _fn("nevo_pop_eval_obs_std", c_void_p, c_void_p)
nevo_pop_eval_set_max_steps = _fn("nevo_pop_eval_set_max_steps", None, c_void_p, c_int)
nevo_pop_eval_run = _fn("nevo_pop_eval_run", c_int, c_void_p, _P, c_size_t, c_int, _P, _P, c_int, _P, _P, _P, _P,
                        _E)
nevo_pop_eval_set_backend = _fn("nevo_pop_eval_set_backend", c_int, c_void_p, c_char_p, _E)
nevo_pop_eval_backend = _fn("nevo_pop_eval_backend", c_char_p, c_void_p)
nevo_pop_eval_set_seed = _fn("nevo_pop_eval_set_seed", None, c_void_p, c_uint64)
nevo_pop_eval_state_floats = _fn("nevo_pop_eval_state_floats", c_size_t, c_void_p)
nevo_pop_eval_act = _fn("nevo_pop_eval_act", None, c_void_p, _P, _P, c_int, _P, _P)
nevo_pop_eval_save = _fn("nevo_pop_eval_save", c_int, c_void_p, c_char_p, _P, _E)

nevo_strategy_new = _fn("nevo_strategy_new", c_int, c_char_p, c_int, POINTER(c_void_p), _E)
nevo_strategy_free = _fn("nevo_strategy_free", None, c_void_p)
nevo_strategy_config = _fn("nevo_strategy_config", c_char_p, c_void_p)
nevo_strategy_spec = _fn("nevo_strategy_spec", POINTER(NevoEnvSpec), c_void_p)
nevo_strategy_nparams = _fn("nevo_strategy_nparams", c_size_t, c_void_p)
nevo_strategy_generations_done = _fn("nevo_strategy_generations_done", c_int, c_void_p)
nevo_strategy_ask = _fn("nevo_strategy_ask", None, c_void_p, POINTER(c_int), POINTER(c_int))
nevo_strategy_ask_params = _fn("nevo_strategy_ask_params", None, c_void_p, _P, c_size_t)
nevo_strategy_ask_tasks = _fn("nevo_strategy_ask_tasks", None, c_void_p, _P, _P, _P)
nevo_strategy_obs_norm = _fn("nevo_strategy_obs_norm", c_bool, c_void_p, _P, _P)
nevo_strategy_evaluate = _fn("nevo_strategy_evaluate", c_int, c_void_p, _P, _P, _P, _P, _E)
nevo_strategy_tell = _fn("nevo_strategy_tell", c_int, c_void_p, _P, _P, _P, _P, _P, POINTER(c_int), _E)
nevo_strategy_best = _fn("nevo_strategy_best", None, c_void_p, _P)
nevo_strategy_save = _fn("nevo_strategy_save", c_int, c_void_p, c_char_p, _E)

nevo_train_json = _fn("nevo_train_json", c_int, c_char_p, c_char_p, c_int, c_int, _E)
