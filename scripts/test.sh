#!/usr/bin/env bash
# test.sh — sets up a fresh machine and runs every test lik has:
#   1. the C tests (ctest) in a Release build, every CPU ISA path, and the
#      fuzz targets' corpus and past crashes replayed;
#   2. the same C tests under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the fuzz targets under libFuzzer + ASan + UBSan, 60 s each
#      (scripts/fuzz.sh; FUZZ_SECONDS changes it);
#   4. the Python tests (pytest) against the installed package and the `lik`
#      command, torch included (pinned in tests/requirements.txt), and the
#      PyLate / colpali-engine integration tests with those packages
#      (pinned in tests/requirements-integrations.txt).
#   5. late-interaction-kernels 0.4.5's own test suite against lik.compat
#      (tests/seed, LIK_SEED_SUITE=1: its sdist is downloaded from PyPI once,
#      into build/seed-suite/).
# GPU tests are marked `gpu` and skip themselves where no CUDA device exists.
# The CUDA backend is compiled once: by the Release build of step 1 (where
# nvcc exists).  On a machine without a GPU the Python package is installed
# without it (nothing could run it); with a GPU it is built with it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  export SKBUILD_CMAKE_DEFINE="LIK_CUDA=OFF"
fi
scripts/setup.sh test
.venv/bin/python -m pip install -q -r tests/requirements.txt
.venv/bin/python -m pip install -q -r tests/requirements-integrations.txt

jobs=$(nproc)
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release
cmake --build build/release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"

scripts/sanitize.sh
scripts/fuzz.sh

export PATH="$PWD/.venv/bin:$PATH"
LIK_SEED_SUITE=1 python -m pytest -q tests
