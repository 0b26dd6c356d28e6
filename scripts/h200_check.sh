#!/usr/bin/env bash
# h200_check.sh — the lead's one-shot check on the lent H200, run from the
# repository root there with a liblik.so in .gpubin/ (built here with
# 90a-real and carried, or, where .gpubin/ has none, built there first by
# scripts/h200_build.sh):
#   the C harness against src/ref on the CUDA backend (.gpubin/test_harness,
#   built here with -DLIK_BUILD_TESTS=ON, when present), GPU pytest (forward
#   parity over every kernel family through lik.Context, training, compressed
#   scoring, low-bit, fused head, lik.compat), compute-sanitizer memcheck of
#   every tests/gpu/sanitize_*.py, and (unless CHECK_ONLY=1) the host cost per
#   call and the forward table's lik column (CUDA-graph timing, no peers).
# Peer wheels (late-interaction-kernels, flash-maxsim) come from .whl/.
# The command's GPU tests (tests/gpu/test_cli_gpu.py) run when LIK_CLI names
# a `lik` built with CUDA (the lent machine has no libcjson: carry the
# command with its libcjson.so.1 and set LD_LIBRARY_PATH); else they skip.
set -uo pipefail
export LIK_LIBRARY=$PWD/.gpubin/liblik.so PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step() { echo "=== $1 ($(date -u +%H:%M:%S))"; }
if [ ! -f .gpubin/liblik.so ]; then
  step "build (scripts/h200_build.sh)"
  scripts/h200_build.sh || exit 1
fi
if [ -x .gpubin/test_harness ]; then
  step "C harness (CUDA + CPU paths vs src/ref)"
  .gpubin/test_harness 2>&1 | tail -n 12
fi
step "GPU pytest"
python3 -m pytest -q tests/gpu -p no:cacheprovider 2>&1 | tail -n 40
for script in tests/gpu/sanitize_*.py; do
  step "memcheck ($script)"
  compute-sanitizer --tool memcheck --error-exitcode 9 python3 "$script" 2>&1 | tail -n 4
done
[ "${CHECK_ONLY:-0}" = 1 ] && { step "done"; exit 0; }
step "host cost per call"
python3 bench/host_cost.py --out "$OUT/host_cost.json"
step "forward table, lik column"
python3 bench/gpu_forward.py --peers "" --no-first-call --out "$OUT/forward.json" 2>&1 | tail -n 25
step "done"
