#!/usr/bin/env bash
# Stages a CUDA=1 build for a GPU machine that lacks nevo's Debian packages: the binaries
# and every shared library they load that is not the C/C++ runtime, in .devrun/ (ignored
# by git), for `BIN=.devrun dev/cuda/device_run.sh` there.
set -euo pipefail
cd "$(dirname "$0")/../.."
make CUDA=1 -j"$(nproc)" build-cuda/nevo build-cuda/nevo_tests
rm -rf .devrun && mkdir -p .devrun/lib
cp build-cuda/nevo build-cuda/nevo_tests .devrun/
ldd build-cuda/nevo build-cuda/nevo_tests | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
    xargs -I{} cp -L {} .devrun/lib/
grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo '/.devrun/' >> .git/info/exclude
du -sh .devrun
