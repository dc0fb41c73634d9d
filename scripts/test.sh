#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine:  bash scripts/test.sh
#   1. installs missing dependencies (scripts/install-deps.sh);
#   2. checks formatting (clang-format) and layering;
#   3. builds build/ (CUDA compiled when nvcc exists) and runs every CTest test;
#   4. builds build-asan/ (common + engine only, ASan + UBSan, GoogleTest and nlohmann/json taken
#      the way a bare CUDA machine takes them) and runs its unit tests;
#   5. fuzzes the safetensors header, tool-call parsers, tokenizers, stop strings and OpenAI request
#      bodies, 30 s each
#      (scripts/fuzz.sh, clang + libFuzzer).
# Options: --tsan also builds build-tsan/ (ThreadSanitizer) and runs its unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
tsan=0
for arg in "$@"; do
  case "$arg" in
    --tsan) tsan=1 ;;
    *) echo "usage: scripts/test.sh [--tsan]" >&2; exit 2 ;;
  esac
done

start=$(date +%s)
logs=$(mktemp -d)
# Runs ctest in the given build tree, keeping its output for the closing count.
run_ctest() {
  local dir="$1"
  shift
  (cd "$dir" && ctest --output-on-failure --parallel "$(nproc)" --no-tests=error "$@") 2>&1 | tee "$logs/$dir.log"
  return "${PIPESTATUS[0]}"
}
bash scripts/install-deps.sh
bash scripts/lint.sh --format

echo "== build/ (full system) =="
bash scripts/build.sh build
run_ctest build

echo "== build-asan/ (common + engine, address,undefined sanitizers, bare-machine dependency path) =="
bash scripts/build.sh build-asan -DTANDEM_ENGINE_ONLY=ON -DTANDEM_SANITIZE=address,undefined \
  -DTANDEM_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
  -DTANDEM_GTEST_SOURCE_DIR=/usr/src/googletest -DTANDEM_JSON_INCLUDE_DIR=/usr/include
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan -L unit

echo "== fuzz: safetensors header, tool-call parsers, tokenizers, stop strings, OpenAI requests (libFuzzer, ASan + UBSan) =="
bash scripts/fuzz.sh 30

if [ "$tsan" -eq 1 ]; then
  echo "== build-tsan/ (ThreadSanitizer) =="
  bash scripts/build.sh build-tsan -DTANDEM_SANITIZE=thread -DTANDEM_BUILD_BENCHMARKS=OFF
  TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/scripts/tsan.supp" run_ctest build-tsan -L unit
fi
echo "test.sh: all suites passed in $(( $(date +%s) - start )) s"
# One closing count over every ctest run above (skipped = GPU tests on a machine without a GPU).
total=$(cat "$logs"/*.log | awk '/tests failed out of/ {n += $NF} END {print n + 0}')
failed=$(cat "$logs"/*.log | awk '/tests failed out of/ {for (i = 1; i < NF; i++) if ($(i + 1) == "tests" && $(i + 2) == "failed") f += $i} END {print f + 0}')
skipped=$(cat "$logs"/*.log | grep -c '(Skipped)' || true)
echo "tests: $((total - failed - skipped)) passed, ${failed} failed, ${skipped} skipped"
