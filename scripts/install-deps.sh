#!/usr/bin/env bash
# Installs what Tandem needs on Debian 12, idempotently: only missing packages are fetched.
#   scripts/install-deps.sh            build + test dependencies
# Python test packages (scripts/requirements-test.txt, pinned) go into a virtual environment at
# .venv/ in the repo root, rebuilt only when that file changes (PEP 668 keeps pip out of Debian's
# python).
# Runs as root (or through sudo). CUDA is optional and not installed here: when nvcc is on the
# machine (/usr/local/cuda), the build compiles the CUDA backend too.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git python3 python3-venv clang-format
  # scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
  # agent, controller, tools (ARCHITECTURE.md dependency table)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libboost-dev prometheus-cpp-dev libssl-dev
  # engine (header-only)
  nlohmann-json3-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # promtool: controller_metrics_test lints the controller's /metrics with `promtool check metrics`
  prometheus
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} Debian packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: run as root (missing: ${missing[*]})" >&2; exit 1; }
    SUDO=sudo
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
requirements="$root/scripts/requirements-test.txt"
constraints="$root/scripts/constraints-test.txt"  # transitive dependencies pinned too
stamp="$venv/.requirements.sha256"
want="$(cat "$requirements" "$constraints" | sha256sum | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "install-deps: Python test packages present (.venv/)"
else
  python=/usr/bin/python3  # Debian's, which python3-venv equips
  [ -x "$python" ] || python=python3
  echo "install-deps: installing Python test packages into .venv/"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" -c "$constraints"
  echo "$want" >"$stamp"
fi
