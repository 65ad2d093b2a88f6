"""The package installs with pip into a venv (--no-build-isolation, no package index)
and works from there; after `make install` (the prefix tests/test_install.c's run
installs into, $NEVO_TEST_PREFIX) it finds the installed library and its MuJoCo models
by itself. Also: the GIL is released while C works."""
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import nevo
from conftest import REPO

PROGRAM = r"""
import os, numpy as np, nevo
v = nevo.make_vec("mujoco/swimmer", 2, seed=1)
o, _ = v.reset()
o, r, te, tr, _ = v.step(np.zeros((2, 2), np.float32))
maps = open("/proc/self/maps").read()
lib = [l.split()[-1] for l in maps.splitlines() if "libnevo.so" in l][0]
print(nevo.__file__)
print(os.path.realpath(lib))
print(nevo.version(), o.shape)
"""


def pip_install(tmp_path):
    """The README's route: a venv over the system's packages (Debian's numpy; Debian 12's
    own pip refuses to install outside one), the package pip-installed into it; returns
    the venv's python."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(REPO, "python"), str(src / "python"),
                    ignore=shutil.ignore_patterns("__pycache__", "tests", "benchmarks"))
    shutil.copy(os.path.join(REPO, "Makefile"), str(src / "Makefile"))  # setup.py reads VERSION there
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], capture_output=True,
                       text=True)
    assert r.returncode == 0, "python3 -m venv (Debian: python3-venv): " + r.stdout + r.stderr
    py = venv / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                        "--disable-pip-version-check", "-q", str(src / "python")],
                       capture_output=True, text=True, env=dict(os.environ, PIP_NO_INPUT="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    return py


def run(py, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("NEVO_LIB", "PYTHONPATH", "NEVO_MODELS")}
    env.update(env_extra, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([str(py), "-c", PROGRAM], cwd=str(cwd), env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.splitlines()


def test_pip_install_with_the_built_library(tmp_path):
    py = pip_install(tmp_path)
    out = run(py, {"NEVO_LIB": os.environ["NEVO_LIB"]}, tmp_path)
    assert out[0].startswith(str(tmp_path / "venv" / "lib")), out
    assert out[1] == os.path.realpath(os.environ["NEVO_LIB"])
    assert out[2] == "%s (2, 8)" % nevo.version()


def test_after_make_install(tmp_path):
    prefix = os.environ.get("NEVO_TEST_PREFIX")
    if not prefix or not os.path.exists(os.path.join(prefix, "lib", "libnevo.so.0")):
        pytest.skip("no installed prefix (tests/test_python.c's run under make check names one)")
    py = pip_install(tmp_path)
    # the installed library through the loader's path; its models from PREFIX/share/nevo
    out = run(py, {"LD_LIBRARY_PATH": os.path.join(prefix, "lib")}, tmp_path)
    assert out[1].startswith(os.path.realpath(os.path.join(prefix, "lib"))), out


def counted_during(call):
    """(ticks a Python thread counted while call() ran in this one, call's seconds)."""
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.01)
    before = ticks[0]
    t0 = time.perf_counter()
    call()
    c_time = time.perf_counter() - t0
    during = ticks[0] - before
    stop.set()
    t.join()
    return during, c_time


@pytest.mark.parametrize("what", ["evaluate", "step"])
def test_gil_is_released_while_c_works(what):
    """A Python thread counts on while another thread is inside one long C call: an
    evaluation, or a vector step (the compiled stepper's)."""
    if what == "evaluate":
        pol = nevo.Policy(env="Pendulum-v1", hidden=[64, 64], threads=1)
        params = np.zeros((1, pol.nparams), np.float32)
        during, c_time = counted_during(lambda: pol.evaluate(params, episodes=1000, seed=0))  # 200,000 steps
    else:
        v = nevo.make_vec("mujoco/humanoid", 500, seed=0)
        v.reset()
        a = np.zeros((500, 17), np.float32)
        during, c_time = counted_during(lambda: v.step(a))  # 500 humanoid steps in one call
        v.close()
    assert c_time > 0.02
    assert during > 1000, "the counting thread was stopped for the whole call (%d ticks)" % during
