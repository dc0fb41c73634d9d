#!/usr/bin/env bash
# Configures and builds one build tree.  scripts/build.sh [BUILD_DIR] [extra cmake args...]
# Default: build/ (RelWithDebInfo, CUDA when nvcc is found, warnings as errors).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
mkdir -p "$dir"
log="$dir/configure.log"
cmake -S . -B "$dir" -G Ninja -DTANDEM_WERROR=ON "$@" >"$log" 2>&1 || {
  cat "$log"; echo "build: cmake configure failed ($dir)" >&2; exit 1; }
grep -E '^-- Tandem ' "$log" || true
cmake --build "$dir" --parallel "$(nproc)"
