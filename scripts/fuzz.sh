#!/usr/bin/env bash
# Fuzzes the safetensors header parser for a bounded time:  scripts/fuzz.sh [seconds] (default 60)
# Builds engine/io/fuzz/safetensors_header_fuzz.cc with clang++ and libFuzzer + ASan + UBSan into
# build-fuzz/ (outside the CMake build), seeds it from engine/io/fuzz/corpus/ and exits non-zero
# when it finds a crash, a sanitizer report or a failed invariant (the reproducer is left in
# build-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=build-fuzz
mkdir -p "$out/corpus"
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }

sources=(
  engine/io/fuzz/safetensors_header_fuzz.cc
  engine/io/safetensors_header.cc
  engine/io/safetensors_dtype.cc
  engine/io/strict_json.cc
)
binary="$out/safetensors_header_fuzz"
newest_source=$(ls -t "${sources[@]}" engine/io/*.h engine/core/dtype.h common/status.h "$0" | head -1)
if [ ! -x "$binary" ] || [ "$newest_source" -nt "$binary" ]; then
  echo "fuzz: building $binary"
  clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I. "${sources[@]}" -o "$binary"
fi

# New inputs go to build-fuzz/corpus; the committed seeds are only read.
echo "fuzz: running for ${seconds}s"
# The run's progress lines go to build-fuzz/fuzz.log; the tail (final stats, or the crash report)
# is printed either way.
status=0
(cd "$out" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
  ./safetensors_header_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    corpus ../engine/io/fuzz/corpus) >"$out/fuzz.log" 2>&1 || status=$?
tail -n 25 "$out/fuzz.log"
if [ "$status" -ne 0 ]; then
  echo "fuzz: FAILED (exit $status); full log: $out/fuzz.log, reproducer in $out/" >&2
  exit "$status"
fi
echo "fuzz: no crash in ${seconds}s"
