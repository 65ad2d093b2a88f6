"""The nevo Python package: `pip install --no-build-isolation ./python` (Debian's
python3-setuptools builds it; no package index is needed). It drives libnevo.so,
which `make install` installs (or set NEVO_LIB to a built one)."""
import os
import re

from setuptools import setup


def version():
    """The Makefile's VERSION, the library's (one place for it)."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Makefile")) as f:
            return re.search(r"^VERSION := (\S+)", f.read(), re.M).group(1)
    except (OSError, AttributeError):
        return "0"


setup(
    name="nevo",
    version=version(),
    description="nevo from Python: vectorised environments, population evaluation and ask/tell strategies",
    packages=["nevo"],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
