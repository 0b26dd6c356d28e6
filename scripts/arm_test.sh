#!/usr/bin/env bash
# scripts/arm_test.sh — the aarch64 (ARM64) build and its C tests under
# emulation: cross-compiles lik with Debian's gcc-aarch64-linux-gnu
# (cmake/aarch64-linux-gnu.cmake: library + C tests + fuzz replays; CUDA off;
# the `lik` command off: it needs an arm64 cJSON) and runs ctest, every test
# program through qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR): each kernel
# test on the portable, neon and sve paths, test_harness (every ARM path
# against src/ref), thread invariance; the SVE path again at vector lengths
# 128, 256 and 512 bits (QEMU_CPU=max,sve-max-vq=1|2|4: the harness and
# test_maxsim's ties and thread invariance, label "sve"), and LIK_CPU_ISA=sve
# on a CPU without SVE (tests/c/CMakeLists.txt).  scripts/test.sh runs it.
#
# Installs its Debian packages itself (gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user), as scripts/setup.sh does; where they
# cannot be installed it says so and exits 0 (skipped), so a machine without
# apt or network still runs the rest of the tests.
#
#   scripts/arm_test.sh                 # build dir: build/arm64 (override: BUILD_DIR=...)
#   LIK_TEST_SEED=123 scripts/arm_test.sh   # reproduce a seeded run
#   JOBS=4 scripts/arm_test.sh          # build / ctest jobs (default: nproc)
#   ARM_TEST_TIMEOUT=900                # seconds for the whole ctest run (default 900)
#   scripts/arm_test.sh -R harness      # extra arguments go to ctest
#   scripts/arm_test.sh -L sve          # the sve path only (every vector length)
#
# Measured on a shared 2-core x86 VM (Debian 12, GCC 12, QEMU 7.2): 44 tests,
# under a minute of build and 3.1-3.6 minutes of ctest (test_plaid_commit's
# write-point replays are the longest, 80-135 s; the SVE vector-length tests
# take 35-55 s of test time, on the other core meanwhile).  With the NEON
# backward / residual kernels and their bitwise checks against portable: 3.0
# minutes at load average 2-3 (ctest 180 s; 8.5 in an earlier run beside
# another job, load 4-5).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build/arm64}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
SYSROOT=/usr/aarch64-linux-gnu

have_tools() {
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 &&
    { command -v qemu-aarch64 >/dev/null 2>&1 || command -v qemu-aarch64-static >/dev/null 2>&1; } &&
    [ -f "$SYSROOT/include/stdio.h" ] && command -v cmake >/dev/null 2>&1
}

skip() {
  echo "arm_test: SKIPPED — $1" >&2
  echo "arm_test: needs the Debian packages gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and" \
       "qemu-user (or qemu-user-static)" >&2
  exit 0
}

if ! have_tools; then
  command -v apt-get >/dev/null 2>&1 || skip "no apt-get here to install the cross compiler and QEMU"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || skip "not root and no sudo"
    sudo="sudo -n"
  fi
  echo "arm_test: installing gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
  $sudo apt-get update -qq || skip "apt-get update failed"
  install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; }
  install gcc-aarch64-linux-gnu libc6-dev-arm64-cross cmake ||
    skip "apt-get could not install gcc-aarch64-linux-gnu / libc6-dev-arm64-cross"
  install qemu-user || install qemu-user-static || skip "apt-get could not install qemu-user"
  have_tools || skip "the packages are installed but aarch64-linux-gnu-gcc / qemu-aarch64 are not found"
fi

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
start=$SECONDS
cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release \
  -DLIK_CUDA=OFF \
  -DLIK_BUILD_PROGRAMS=OFF \
  -DLIK_BUILD_TESTS=ON
cmake --build "$BUILD_DIR" -j "$JOBS"

# No x86 code in the ARM objects (the _avx2 / _avx512 / _vnni files are not
# compiled there; the cross compiler would reject their intrinsics anyway).
if find "$BUILD_DIR" -name '*_avx*.c.o' -o -name '*_vnni.c.o' | grep -q .; then
  echo "arm_test: x86 kernel objects in the aarch64 build" >&2
  exit 1
fi
# Extension instructions only in their own file's object: SVE (z registers)
# in kernels_sve.c's, SDOT in quant_dotprod.c's; everything else runs on any
# ARMv8-A CPU, before and without the HWCAP checks.
only_in() { # instruction pattern, the one object allowed to hold it, its name
  for obj in $(find "$BUILD_DIR/CMakeFiles/lik_objects.dir" -name '*.o' ! -name "$2"); do
    if aarch64-linux-gnu-objdump -d "$obj" | grep -qE "$1"; then
      echo "arm_test: $3 instructions in $obj" >&2
      exit 1
    fi
  done
}
only_in '\sz[0-9]+\.[bhsdq]' kernels_sve.c.o SVE
only_in '\s[su]dot\s' quant_dotprod.c.o SDOT
built=$SECONDS

timeout --foreground "${ARM_TEST_TIMEOUT:-900}" \
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
echo "arm_test: passed (build $((built - start)) s, ctest under qemu-aarch64 $((SECONDS - built)) s)"
