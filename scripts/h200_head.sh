#!/usr/bin/env bash
# h200_head.sh — the fused head's check on the lent H200, run from a copy of
# the tree with a liblik.so built here (90a-real) next to it:
#   GPU pytest of the fused head, compute-sanitizer memcheck of small calls,
#   and bench/fused_head.py (fused vs unfused vs late-interaction-kernels 0.4.5).
set -uo pipefail
export LIK_LIBRARY=$PWD/liblik.so PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
WHL=${WHL:-../../.whl}
if ls "$WHL"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHL"/*.whl
  export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
step() { echo "=== $1 ($(date -u +%H:%M:%S))"; }
step "GPU pytest (fused head)"
python3 -m pytest -q -x tests/gpu/test_head_gpu.py -p no:cacheprovider 2>&1 | tail -n 25
step "memcheck (sanitize_head)"
compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/gpu/sanitize_head.py 2>&1 | tail -n 4
step "bench/fused_head.py"
python3 bench/fused_head.py --out "$OUT/fused_head_h200.json" 2>&1 | tail -n 30
step "done"
