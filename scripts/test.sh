#!/usr/bin/env bash
# test.sh — sets up a fresh machine and runs every test lik has:
#   1. the C tests (ctest) in a Release build, every CPU ISA path;
#   2. the same C tests under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the Python tests (pytest) against the installed package and the `lik`
#      command, torch included (pinned in tests/requirements.txt), and the
#      PyLate / colpali-engine integration tests with those packages
#      (pinned in tests/requirements-integrations.txt).
# GPU tests are marked `gpu` and skip themselves where no CUDA device exists.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/python -m pip install -q -r tests/requirements.txt
.venv/bin/python -m pip install -q -r tests/requirements-integrations.txt

jobs=$(nproc)
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release
cmake --build build/release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"

scripts/sanitize.sh

export PATH="$PWD/.venv/bin:$PATH"
python -m pytest -q tests
