#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine:  bash scripts/demo.sh
# Installs dependencies, builds, and runs the engine's end-to-end demo (`tandem demo`). As the
# roadmap lands, this becomes the local disaggregated stack answering a request.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build
./build/tools/tandem version
./build/tools/tandem demo "$@"
