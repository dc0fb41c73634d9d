#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine:  bash scripts/demo.sh
# Installs dependencies, builds, runs the engine's end-to-end demo (`tandem demo`), then makes the
# tiny model (models/tiny, git-ignored) and generates from it (`tandem generate`). As the roadmap
# lands, this becomes the local disaggregated stack answering a request.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build
./build/tools/tandem version
./build/tools/tandem demo "$@"
# The tiny default model (docs/tiny-model.md): a deterministic random checkpoint with a BPE
# vocabulary trained here from our own corpus (no downloads), then one chat prompt through the
# serving engine. The weights are random, so the text is too; the point is the whole path.
./build/tools/tandem make-model --out models/tiny
./build/tools/tandem generate --model models/tiny --chat --prompt "What is the capital of France?" \
  --max-tokens 32 --temperature 0.7 --seed 1
