#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine:  bash scripts/test.sh
#   1. installs missing dependencies (scripts/install-deps.sh);
#   2. checks formatting (clang-format) and layering;
#   3. builds build/ (CUDA compiled when nvcc exists) and runs every CTest test;
#   4. builds build-asan/ (common + engine only, ASan + UBSan, GoogleTest and nlohmann/json taken
#      the way a bare CUDA machine takes them) and runs its unit tests;
#   5. fuzzes the safetensors header parser for 60 s (scripts/fuzz.sh, clang + libFuzzer).
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
bash scripts/install-deps.sh
bash scripts/lint.sh --format

echo "== build/ (full system) =="
bash scripts/build.sh build
(cd build && ctest --output-on-failure --parallel "$(nproc)" --no-tests=error)

echo "== build-asan/ (common + engine, address,undefined sanitizers, bare-machine dependency path) =="
bash scripts/build.sh build-asan -DTANDEM_ENGINE_ONLY=ON -DTANDEM_SANITIZE=address,undefined \
  -DTANDEM_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
  -DTANDEM_GTEST_SOURCE_DIR=/usr/src/googletest -DTANDEM_JSON_INCLUDE_DIR=/usr/include
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure --parallel "$(nproc)" -L unit --no-tests=error)

echo "== fuzz: safetensors header parser (libFuzzer, ASan + UBSan) =="
bash scripts/fuzz.sh 60

if [ "$tsan" -eq 1 ]; then
  echo "== build-tsan/ (ThreadSanitizer) =="
  bash scripts/build.sh build-tsan -DTANDEM_SANITIZE=thread -DTANDEM_BUILD_BENCHMARKS=OFF
  (cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure --parallel "$(nproc)" -L unit)
fi
echo "test.sh: all suites passed in $(( $(date +%s) - start )) s"
