#!/usr/bin/env bash
# test.sh — sets up a fresh machine and runs every test lik has:
#   1. the C tests (ctest) in a Release build, every CPU ISA path, and the
#      fuzz targets' corpus and past crashes replayed;
#   2. the same C tests under AddressSanitizer + UndefinedBehaviorSanitizer,
#      and cross-compiled for aarch64 and run under qemu-aarch64 (portable,
#      neon and sve paths, SVE at 128 / 256 / 512 bits; scripts/arm_test.sh,
#      about 6 minutes on 2 cores; skipped with a message where its Debian
#      packages cannot be installed);
#   3. the fuzz targets under libFuzzer + ASan + UBSan, 60 s each
#      (scripts/fuzz.sh; FUZZ_SECONDS changes it);
#   4. the Python tests (pytest) against the installed package and the `lik`
#      command, torch included (pinned in tests/requirements.txt), and the
#      PyLate / colpali-engine integration tests with those packages
#      (pinned in tests/requirements-integrations.txt).
#   5. late-interaction-kernels 0.4.5's own test suite against lik.compat
#      (tests/seed, LIK_SEED_SUITE=1: its sdist is downloaded from PyPI once,
#      into build/seed-suite/; on the GPU, unmodified, where one is visible).
# GPU tests are marked `gpu` and skip themselves where no CUDA device exists.
# The Python package is built by scripts/cuda_args.sh's rule (setup.sh): with
# the CUDA backend for the local GPU, without it where no GPU is visible
# (nothing could run it).  The CUDA backend is still compiled once without a
# GPU: by the Release build of step 1, for sm_90a only (every kernel body
# compiles there; sm_80's own code is __trap() stubs), where CMake finds nvcc
# (so compile errors are caught).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/python -m pip install -q -r tests/requirements.txt
.venv/bin/python -m pip install -q -r tests/requirements-integrations.txt

jobs=$(nproc)
source scripts/cuda_args.sh
if [ -z "$(lik_gpu_archs)" ]; then
  mapfile -t rule < <(LIK_CUDA=${LIK_CUDA:-auto} LIK_CUDA_ARCHITECTURES=${LIK_CUDA_ARCHITECTURES:-90a-real} lik_cmake_args)
else
  mapfile -t rule < <(lik_cmake_args)
fi
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release "${rule[@]}"
cmake --build build/release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"

scripts/sanitize.sh
JOBS="$jobs" scripts/arm_test.sh
scripts/fuzz.sh

export PATH="$PWD/.venv/bin:$PATH"
LIK_SEED_SUITE=1 python -m pytest -q tests
