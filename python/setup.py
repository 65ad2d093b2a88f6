"""The nevo Python package: `pip install --no-build-isolation ./python` (Debian's
python3-setuptools builds it, with python3-dev's headers for its one compiled module,
nevo._fast; no package index is needed). It drives libnevo.so, which `make install`
installs (or set NEVO_LIB to a built one). `make` builds nevo._fast for the build tree
with this file too (setup.py build_ext)."""
import os
import re

from setuptools import Extension, setup


def version():
    """The Makefile's VERSION, the library's (one place for it)."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Makefile")) as f:
            return re.search(r"^VERSION := (\S+)", f.read(), re.M).group(1)
    except (OSError, AttributeError):
        return "0"


def numpy_include():
    import numpy
    return numpy.get_include()


setup(
    name="nevo",
    version=version(),
    description="nevo from Python: vectorised environments, population evaluation and ask/tell strategies",
    packages=["nevo"],
    # VecEnv.step's hot path (nevo/_fast.c): CPython and numpy's C API, no libnevo link
    ext_modules=[Extension("nevo._fast", ["nevo/_fast.c"], include_dirs=[numpy_include()])],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
