#!/usr/bin/env bash
# Installs the Debian packages nevo needs to build and test, only those missing.
# Called by the Makefile before every build (it is a no-op once all are present).
#   build-essential  gcc, make, libc headers
#   pkg-config       library flags
#   libjansson-dev   JSON configs (parser with line/column errors)
#   libpng-dev       PNG pictures (maze plots, renders)
#   libgif-dev       animated GIFs of episodes (giflib)
#   libmujoco-dev    MuJoCo 2.2 physics (the mujoco/* locomotion envs)
#   libqhull-dev     qhull, MuJoCo's convex hulls for mesh geoms (headers; the runtime
#                    library already comes with libmujoco)
#   libcairo2-dev    cairo 2-D graphics (`nevo plot` figures: curves, behaviours)
#   libegl-dev       EGL headers (and libEGL, libegl-mesa0): MuJoCo pictures for
#                    `nevo eval --gif` come from an offscreen OpenGL context that nevo
#                    makes with EGL (libEGL.so.1 is opened at run time, not linked)
#   libgl1-mesa-dri  Mesa's drivers, llvmpipe among them: OpenGL in software where
#                    there is no display and no GPU
#   clang            the libFuzzer targets in fuzz/ (fuzz/fuzz.mk; the test suite runs
#                    each briefly)
#   libclang-rt-14-dev  clang's libFuzzer, ASan and UBSan runtimes for them
#   zlib1g-dev       zlib: reads gzip-compressed IDX dataset files (src/io/dataset.c)
#   dataset-fashion-mnist  the Fashion-MNIST images and labels (IDX files in
#                    /usr/share/datasets/fashion-mnist): `dataset=fashion-mnist`
#   python3-numpy python3-pytest  the Python package (python/nevo: numpy arrays over
#                    libnevo.so through ctypes) and its tests, which `make check` runs
#   python3-setuptools python3-pip python3-venv  `pip install --no-build-isolation
#                    ./python` in a venv over the system's packages (no package index
#                    needed; tests/test_python.c checks it)
#   python3-dev      Python's headers for the package's one compiled module (its step,
#                    python/nevo/_fast.c), which make and pip build
#   openmpi-bin libopenmpi-dev  Open MPI: `mpirun -np N nevo train` across ranks
#                    (src/core/comm_mpi.c) and its tests (tests/test_mpi.c)
set -eu
PKGS="build-essential pkg-config libjansson-dev libpng-dev libgif-dev libmujoco-dev libqhull-dev libcairo2-dev libegl-dev libgl1-mesa-dri clang libclang-rt-14-dev zlib1g-dev dataset-fashion-mnist python3-numpy python3-pytest python3-setuptools python3-pip python3-venv python3-dev openmpi-bin libopenmpi-dev"
[ -n "${NEVO_EXTRA_PKGS:-}" ] && PKGS="$PKGS $NEVO_EXTRA_PKGS"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "nevo: installing missing Debian packages:$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
