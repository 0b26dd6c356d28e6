#!/usr/bin/env bash
# h200_build.sh — on the lent H200 (or any machine with nvcc), from the
# repository root: builds liblik.so with the CUDA backend for sm_90a (the
# wgmma kernels need the "a"; `native` would give sm_90) and the C tests,
# and puts the library and test_harness in .gpubin/ (what h200_check.sh
# and the benchmarks load through LIK_LIBRARY).  About 90 s on 16 cores.
set -euo pipefail
log=/tmp/lik-build.log
cmake -S . -B /tmp/lik-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIK_CUDA=ON \
  -DLIK_CUDA_ARCHITECTURES=90a-real -DLIK_BUILD_PROGRAMS=OFF >"$log" 2>&1 &&
  cmake --build /tmp/lik-build -j "$(nproc)" >>"$log" 2>&1 || { tail -n 40 "$log"; exit 1; }
mkdir -p .gpubin
cp -P /tmp/lik-build/liblik.so* .gpubin/
cp /tmp/lik-build/tests/c/test_harness .gpubin/ 2>/dev/null || true
