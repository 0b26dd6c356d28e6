#!/usr/bin/env bash
# h200_check.sh — the lead's one-shot check on the lent H200, run from the
# repository root there with a liblik.so built here (90a-real) in .gpubin/:
#   GPU pytest (forward parity over every kernel family through lik.Context,
#   training, compressed scoring), compute-sanitizer memcheck of the small
#   forward and training cases, the host cost per call, and
#   the forward table's lik column (CUDA-graph timing, no peers).
# Peer wheels (late-interaction-kernels, flash-maxsim) come from .whl/.
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
step "GPU pytest"
python3 -m pytest -q -x tests/gpu -p no:cacheprovider 2>&1 | tail -n 40
for script in sanitize_small sanitize_train; do
  step "memcheck ($script)"
  compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/gpu/$script.py 2>&1 | tail -n 4
done
step "host cost per call"
python3 bench/host_cost.py --out "$OUT/host_cost.json"
step "forward table, lik column"
python3 bench/gpu_forward.py --peers "" --no-first-call --out "$OUT/forward.json" 2>&1 | tail -n 25
step "done"
