"""Test set-up: the package from this checkout (python/), the library and the nevo
command of the build under test: $NEVO_LIB and $NEVO_BIN (tests/test_python.c sets
both), else the in-tree build/."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
if not os.environ.get("NEVO_BIN"):
    os.environ["NEVO_BIN"] = os.path.join(REPO, "build", "nevo")
os.environ.setdefault("NEVO_LIB", os.path.join(os.path.dirname(os.path.abspath(os.environ["NEVO_BIN"])),
                                               "libnevo.so"))
os.environ.setdefault("NEVO_MODELS", os.path.join(REPO, "models", "mujoco"))


@pytest.fixture
def nevo_bin():
    return os.path.abspath(os.environ["NEVO_BIN"])


@pytest.fixture
def repo():
    return REPO
