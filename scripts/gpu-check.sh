#!/usr/bin/env bash
# The prepared GPU check, for a machine that has only the CUDA toolkit, CMake and a compiler.
#   Here (once):   bash scripts/gpu-check.sh --prepare   # copies GoogleTest source + nlohmann/json into third_party/
#   There:         bash scripts/gpu-check.sh [OUT_DIR]   # builds engine-only with CUDA, runs the `gpu` tests
# Prints a short table (test, result, seconds) and leaves the CTest log in OUT_DIR (default build-gpu/).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--prepare" ]; then
  mkdir -p third_party/nlohmann_json/include
  rm -rf third_party/googletest && cp -r /usr/src/googletest third_party/googletest
  rm -rf third_party/nlohmann_json/include/nlohmann && cp -r /usr/include/nlohmann third_party/nlohmann_json/include/
  echo "gpu-check: third_party/ ready (carry it: run's carry=[\"third_party\"])"
  exit 0
fi

out="${1:-build-gpu}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
cmake -S . -B build-gpu -DTANDEM_ENGINE_ONLY=ON -DTANDEM_CUDA=ON -DTANDEM_BUILD_BENCHMARKS=OFF \
  -DCMAKE_BUILD_TYPE=Release >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
cmake --build build-gpu --parallel "$(nproc)" >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
build-gpu/engine/engine_cuda_test --gtest_brief=0 >"$out/gpu-tests.log" 2>&1 && status=0 || status=$?
printf '%-70s %s\n' "test" "result"
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$out/gpu-tests.log" | sed -E 's/^\[ +([A-Z]+) +\] ([^ ]+).*\(([0-9]+ ms)\).*/\2 \1 \3/' |
  awk '{printf "%-70s %s %s %s\n", $1, $2, $3, $4}'
# The benchmarks' figures (bandwidth, FP8 / BF16), last.
grep -h '^\[gpu-bench\]\|^\[mla-decode\]\|^\[int4-matmul\]\|^\[page-verify\]\|^\[mla-prefill\]\|^\[cuda-forward\]' "$out/gpu-tests.log" || true
exit "$status"
