#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine:  bash scripts/demo.sh
# Installs dependencies, builds (ninja shows its progress), starts `tandem local` (a router, a
# prefill agent with FP8 weights + BF16 KV and a decode agent with INT4 weights + FP8 KV, as
# separate processes on loopback, page tags and the transfer checksum on) on the default model,
# the small trained tool-calling model in models/tool-tiny, sends one streaming chat request with a
# tool through the official OpenAI Python client, prints the answer and the tool call, the time to
# the first chunk and to the whole answer and the agents' key metrics, and stops the stack.
# DEMO_PORT picks the router's port (default 8000, or a free one when 8000 is taken).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build
./build/tools/tandem version
# The default model (docs/eval.md): a small deepseek_v3 (Kimi K2's architecture) trained here on a
# synthetic tool-calling corpus, committed. tandem local quantizes it for each pool
# (models/tool-tiny-fp8, models/tool-tiny-int4) the first time.
port="${DEMO_PORT:-8000}"
if ! .venv/bin/python -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])))" "$port" 2>/dev/null; then
  echo "demo: port $port is taken; using a free one"
  port=0
fi
ready="$(mktemp -u /tmp/tandem-demo.XXXXXX.json)"
start=$(date +%s)
./build/tools/tandem local --model models/tool-tiny --port "$port" --ready-file "$ready" &
stack=$!
stop_stack() {
  if kill -0 "$stack" 2>/dev/null; then
    kill -INT "$stack"
    wait "$stack"
  fi
}
trap 'stop_stack; rm -f "$ready"' EXIT
for _ in $(seq 1 1200); do
  [ -f "$ready" ] && break
  kill -0 "$stack" 2>/dev/null || { echo "demo: tandem local exited before it was ready" >&2; exit 1; }
  sleep 0.1
done
[ -f "$ready" ] || { echo "demo: tandem local was not ready within 120 s" >&2; exit 1; }
.venv/bin/python scripts/demo_client.py "$ready"
echo "demo: the stack was up and answered $(( $(date +%s) - start )) s after the build"
trap - EXIT
kill -INT "$stack"
rc=0
wait "$stack" || rc=$?
rm -f "$ready"
echo "demo: tandem local stopped (exit $rc)"
exit "$rc"
