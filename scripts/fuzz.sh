#!/usr/bin/env bash
# scripts/fuzz.sh — the fuzz targets of tests/fuzz (docs/fuzzing.md) under
# AddressSanitizer + UndefinedBehaviorSanitizer: builds them with clang's
# libFuzzer, replays every target's seed corpus and past crashes
# (tests/fuzz/corpus/<target>, tests/fuzz/crashes/<target>), then fuzzes each
# target for FUZZ_SECONDS.  Exits non-zero on any finding (crash, sanitizer
# report, leak, timeout, out-of-memory); the input is left under
# $BUILD_DIR/findings/ — copy it into tests/fuzz/crashes/<target>/ with the fix.
#
#   scripts/fuzz.sh                          # CI: 60 s per target (6 targets)
#   FUZZ_SECONDS=3600 scripts/fuzz.sh        # longer runs
#   FUZZ_TARGETS="fuzz_api" scripts/fuzz.sh  # some targets only
#   FUZZ_SECONDS=0 scripts/fuzz.sh           # replay only
#   FUZZ_KEEP=dir scripts/fuzz.sh            # keep each target's grown corpus in dir/<target>
#
# Where clang's libFuzzer cannot be had (no clang and no apt-get), the targets
# are built with the default compiler and the replay driver (tests/fuzz/replay.c)
# and only the corpus and crashes are replayed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-fuzz}"
SECS="${FUZZ_SECONDS:-60}"
TARGETS="${FUZZ_TARGETS:-fuzz_api fuzz_plaid_index fuzz_plaid_commit fuzz_npy fuzz_safetensors fuzz_qrels}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
FUZZ="$ROOT/tests/fuzz"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

have_libfuzzer() {
  command -v clang >/dev/null &&
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
      clang -x c - -fsanitize=fuzzer,address,undefined -o /dev/null 2>/dev/null
}

if ! have_libfuzzer && command -v apt-get >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq || true
  for pkg in clang libclang-rt-dev; do # (the runtime's package name varies: one at a time)
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" || true
  done
fi

if ! have_libfuzzer; then
  echo "fuzz.sh: clang's libFuzzer is not available: replaying the corpus and crashes only" >&2
  cmake -S "$ROOT" -B "$BUILD_DIR-replay" -DLIK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
    -DLIK_BUILD_TESTS=ON -DLIK_CUDA=OFF >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR-replay" -j "$JOBS" --target $TARGETS
  exec ctest --test-dir "$BUILD_DIR-replay" --output-on-failure -L fuzz
fi

cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLIK_SANITIZE=ON -DLIK_FUZZ=ON -DLIK_BUILD_TESTS=ON -DLIK_CUDA=OFF >/dev/null
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "$JOBS" --target $TARGETS

findings="$BUILD_DIR/findings"
mkdir -p "$findings"
total=0
for t in $TARGETS; do
  bin="$BUILD_DIR/tests/fuzz/$t"
  dict=()
  [ -f "$FUZZ/dict/$t.dict" ] && dict=("-dict=$FUZZ/dict/$t.dict")
  opts=(-timeout=10 -rss_limit_mb=2048 -max_len=8192 "-artifact_prefix=$findings/$t-" "${dict[@]}")
  mkdir -p "$FUZZ/crashes/$t"
  log="$findings/$t.log"
  "$bin" "${opts[@]}" -runs=0 "$FUZZ/corpus/$t" "$FUZZ/crashes/$t" >"$log" 2>&1 ||
    { tail -n 60 "$log"; echo "fuzz.sh: $t: a corpus or crash input fails" >&2; exit 1; }
  echo "$t: replayed $(find "$FUZZ/corpus/$t" "$FUZZ/crashes/$t" -type f | wc -l) inputs"
  [ "$SECS" -gt 0 ] || continue
  echo "== $t: fuzz for $SECS s"
  work="${FUZZ_KEEP:+$FUZZ_KEEP/$t}"
  work="${work:-$(mktemp -d)}"
  mkdir -p "$work"
  "$bin" "${opts[@]}" -max_total_time="$SECS" -print_final_stats=1 "$work" "$FUZZ/corpus/$t" \
    >"$log" 2>&1 || { tail -n 60 "$log"; echo "fuzz.sh: $t: a finding, see $findings" >&2; exit 1; }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  echo "$t: $runs executions in $SECS s, no finding"
  total=$((total + runs))
  [ -n "${FUZZ_KEEP:-}" ] || rm -rf "$work"
done
echo "fuzz.sh: $total executions over: $TARGETS"
