# cuda_args.sh — sourced by setup.sh and test.sh: the one rule for building
# lik's CUDA backend, as CMake arguments.
#
#   - LIK_CUDA=ON / OFF in the environment decides; LIK_CUDA=auto: CMake's
#     default (ON where it finds nvcc); unset: `auto` where a GPU is visible
#     (`nvidia-smi -L` lists one), OFF otherwise (a GPU-less machine never
#     compiles it, nvcc or not);
#   - architectures: LIK_CUDA_ARCHITECTURES (a CMake list) if set, "all" for
#     cmake/cuda.cmake's full list (80-real;90a-real;90-virtual: wheels);
#     otherwise the visible GPUs' own (a 9.0 GPU as 90a-real: src/cuda's
#     wgmma kernels need sm_90a, which CMake's `native` does not give), and
#     with no GPU visible the full list;
#   - ccache, where installed, as the compiler launcher.

# The visible GPUs' architectures as a CMake list ("90a-real", "80-real;90a-real"); empty when none is visible.
lik_gpu_archs() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || return 0
  local caps cap out=()
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u) || caps=""
  if [ -z "$caps" ]; then
    echo native # a driver too old to report compute_cap: CMake asks the GPU itself
    return 0
  fi
  for cap in $caps; do
    cap=${cap/./}
    if [ "$cap" = 90 ]; then out+=(90a-real); else out+=("$cap-real"); fi
  done
  (IFS=';' && echo "${out[*]}")
}

# The CMake arguments of the rule, one per line.
lik_cmake_args() {
  local archs cuda=${LIK_CUDA:-}
  archs=$(lik_gpu_archs)
  if [ -z "$cuda" ]; then
    if [ -n "$archs" ]; then cuda=auto; else cuda=OFF; fi
  fi
  [ "$cuda" != auto ] && echo "-DLIK_CUDA=$cuda"
  if [ "$cuda" != OFF ]; then
    local want=${LIK_CUDA_ARCHITECTURES:-$archs}
    [ "$want" = all ] && want=""
    [ -n "$want" ] && echo "-DLIK_CUDA_ARCHITECTURES=$want"
  fi
  if command -v ccache >/dev/null 2>&1; then
    echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache"
    [ "$cuda" != OFF ] && echo "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
  fi
  return 0
}
