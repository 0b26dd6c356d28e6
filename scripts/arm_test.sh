#!/usr/bin/env bash
# scripts/arm_test.sh — the aarch64 (ARM64) build and its tests under
# emulation: cross-compiles lik with Debian's gcc-aarch64-linux-gnu
# (cmake/aarch64-linux-gnu.cmake: library + C tests + fuzz replays + the `lik`
# command; CUDA off) and runs ctest, every test program through qemu-aarch64
# (CMAKE_CROSSCOMPILING_EMULATOR): each kernel test on the portable, neon and
# sve paths (test_plaid_index's sve run and test_maxsim_isa_* at 128-bit
# vectors: wider ones are 20x slower under QEMU, tests/c/CMakeLists.txt says
# why), test_harness (every ARM path against src/ref), thread invariance;
# the SVE path again at vector lengths 128, 256 and 512 bits
# (QEMU_CPU=max,sve-max-vq=1|2|4: the harness and test_maxsim's ties and thread
# invariance, label "sve"), and LIK_CPU_ISA=sve on a CPU without SVE
# (tests/c/CMakeLists.txt); the `lik` command's smoke tests (label "cli",
# tests/cli/CMakeLists.txt): `lik --help`, and one exact job on the bundled
# Cranfield data on the sve and neon paths, its JSON report checked against
# the x86 result.  scripts/test.sh runs it.
#
# Installs its Debian packages itself (gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user), as scripts/setup.sh does; where they
# cannot be installed it says so and exits 0 (skipped), so a machine without
# apt or network still runs the rest of the tests.  The command's arm64
# libraries (Debian's libcjson-dev, libcjson1, libsqlite3-dev, libsqlite3-0 for
# arm64: the x86 build uses the amd64 ones) are downloaded with
# `apt-get download` (after `dpkg --add-architecture arm64` and apt-get update
# where arm64 is not yet a foreign architecture) and unpacked with `dpkg -x`
# into $DEPS_DIR (default build/arm64-deps), not installed: installing
# libc6-dev:arm64 would upgrade host packages in lockstep.  Where they cannot
# be fetched the command is left out (-DLIK_BUILD_PROGRAMS=OFF) and the rest
# still runs.
#
#   scripts/arm_test.sh                 # build dir: build/arm64 (override: BUILD_DIR=...)
#   LIK_TEST_SEED=123 scripts/arm_test.sh   # reproduce a seeded run
#   JOBS=4 scripts/arm_test.sh          # build / ctest jobs (default: nproc)
#   ARM_TEST_TIMEOUT=900                # seconds for the whole ctest run (default 900)
#   scripts/arm_test.sh -R harness      # extra arguments go to ctest
#   scripts/arm_test.sh -L sve          # the sve path only (every vector length)
#   scripts/arm_test.sh -L cli          # the `lik` command's tests only
#
# Measured on a shared 2-core x86 VM (Debian 12, GCC 12, QEMU 7.2): 44 tests,
# under a minute of build and 3.1-3.6 minutes of ctest (test_plaid_commit's
# write-point replays are the longest, 80-135 s; the SVE vector-length tests
# take 35-55 s of test time, on the other core meanwhile).  With the NEON
# backward / residual kernels and their bitwise checks against portable: 3.0
# minutes at load average 2-3 (ctest 180 s; 8.5 in an earlier run beside
# another job, load 4-5).  The command adds 6 tests (its 3 smoke tests, 8-9 s
# each for the two exact jobs; the fuzz replays of its readers, under a
# second) and about 15 s of build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build/arm64}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
DEPS_DIR="${DEPS_DIR:-$ROOT/build/arm64-deps}"
SYSROOT=/usr/aarch64-linux-gnu
ARM64_DEBS=(libcjson1 libcjson-dev libsqlite3-0 libsqlite3-dev)

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

sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo="sudo -n"
fi
can_apt() { command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; }

if ! have_tools; then
  command -v apt-get >/dev/null 2>&1 || skip "no apt-get here to install the cross compiler and QEMU"
  can_apt || skip "not root and no sudo"
  echo "arm_test: installing gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
  $sudo apt-get update -qq || skip "apt-get update failed"
  install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; }
  install gcc-aarch64-linux-gnu libc6-dev-arm64-cross cmake ||
    skip "apt-get could not install gcc-aarch64-linux-gnu / libc6-dev-arm64-cross"
  install qemu-user || install qemu-user-static || skip "apt-get could not install qemu-user"
  have_tools || skip "the packages are installed but aarch64-linux-gnu-gcc / qemu-aarch64 are not found"
fi

# The `lik` command's arm64 cJSON and SQLite (see the top of this file).
have_deps() {
  local lib="$DEPS_DIR/usr/lib/aarch64-linux-gnu"
  [ -f "$DEPS_DIR/usr/include/cjson/cJSON.h" ] && [ -f "$DEPS_DIR/usr/include/sqlite3.h" ] &&
    [ -e "$lib/libcjson.so" ] && [ -e "$lib/libsqlite3.so" ] &&
    [ -f "$lib/pkgconfig/libcjson.pc" ] && [ -f "$lib/pkgconfig/sqlite3.pc" ]
}
fetch_deps() {
  command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1 &&
    command -v pkg-config >/dev/null 2>&1 || return 1
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    can_apt || return 1
    echo "arm_test: dpkg --add-architecture arm64 (for apt-get download of ${ARM64_DEBS[*]/%/:arm64})"
    $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq || return 1
  fi
  local dl
  dl="$(mktemp -d)" || return 1
  echo "arm_test: apt-get download ${ARM64_DEBS[*]/%/:arm64} -> $DEPS_DIR"
  download() { (cd "$dl" && apt-get download -qq "${ARM64_DEBS[@]/%/:arm64}") >/dev/null 2>&1; }
  # stale package lists (a version the mirror no longer has): update once
  if ! download; then
    can_apt && $sudo apt-get update -qq && download || { rm -rf "$dl"; return 1; }
  fi
  rm -rf "$DEPS_DIR" && mkdir -p "$DEPS_DIR" || { rm -rf "$dl"; return 1; }
  local deb
  for deb in "$dl"/*.deb; do dpkg -x "$deb" "$DEPS_DIR" || { rm -rf "$dl"; return 1; }; done
  rm -rf "$dl"
  have_deps
}
programs=(-DLIK_BUILD_PROGRAMS=OFF)
if have_deps || fetch_deps; then
  programs=(-DLIK_BUILD_PROGRAMS=ON "-DLIK_AARCH64_DEPS=$DEPS_DIR")
else
  echo "arm_test: NOTE — could not fetch the arm64 ${ARM64_DEBS[*]} (apt-get download);" \
       "building without the lik command" >&2
fi

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
start=$SECONDS
cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release \
  -DLIK_CUDA=OFF \
  "${programs[@]}" \
  -DLIK_BUILD_TESTS=ON
cmake --build "$BUILD_DIR" -j "$JOBS"

# No x86 code in the ARM objects (the _avx2 / _avx512 / _vnni files are not
# compiled there; the cross compiler would reject their intrinsics anyway).
if find "$BUILD_DIR" -name '*_avx*.c.o' -o -name '*_vnni.c.o' | grep -q .; then
  echo "arm_test: x86 kernel objects in the aarch64 build" >&2
  exit 1
fi
# Extension instructions only in their own files' objects: SVE (z registers,
# SVE's SDOT included) in the *_sve.c ones, AdvSIMD SDOT (v registers) in
# quant_dotprod.c's; everything else runs on any ARMv8-A CPU, before and
# without the HWCAP checks.
only_in() { # instruction pattern, the objects allowed to hold it (a name pattern), its name
  for obj in $(find "$BUILD_DIR/CMakeFiles/lik_objects.dir" -name '*.o' ! -name "$2"); do
    if aarch64-linux-gnu-objdump -d "$obj" | grep -qE "$1"; then
      echo "arm_test: $3 instructions in $obj" >&2
      exit 1
    fi
  done
}
only_in '\sz[0-9]+\.[bhsdq]' '*_sve.c.o' SVE
only_in '\s[su]dot\s+v' quant_dotprod.c.o SDOT
built=$SECONDS

timeout --foreground "${ARM_TEST_TIMEOUT:-900}" \
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
echo "arm_test: passed (build $((built - start)) s, ctest under qemu-aarch64 $((SECONDS - built)) s)"
