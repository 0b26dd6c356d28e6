#!/usr/bin/env bash
# scripts/sanitize.sh — build lik and its C tests with AddressSanitizer +
# UndefinedBehaviorSanitizer (LIK_SANITIZE=ON, Debug) in a separate build
# directory and run ctest.  Exits non-zero on any build or test failure.
#
#   scripts/sanitize.sh                 # build dir: build-sanitize (override: BUILD_DIR=...)
#   LIK_TEST_SEED=123 scripts/sanitize.sh   # reproduce a seeded run
#   JOBS=4 scripts/sanitize.sh          # parallel build / ctest jobs (default: nproc)
#   LIK_CUDA=ON scripts/sanitize.sh     # include the CUDA backend (default OFF:
#                                       # the static CUDA runtime and ASan do not mix)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-sanitize}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

cmake -S "$ROOT" -B "$BUILD_DIR" \
  -DLIK_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug \
  -DLIK_BUILD_TESTS=ON \
  -DLIK_CUDA="${LIK_CUDA:-OFF}"
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
