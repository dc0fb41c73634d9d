#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input (engine, agent, controller) for a bounded time:
#   scripts/fuzz.sh [seconds] [target]     (default: 60 s each, every target)
#   scripts/fuzz.sh --runs N target        a long run: N executions (10000000 for #22's figure),
#                                          log in build-fuzz/long_TARGET-<UTC time>.log
# Targets (each a libFuzzer binary built with clang++ + ASan + UBSan into build-fuzz/, outside the
# CMake build, seeded from its committed corpus):
#   safetensors_header  engine/io/fuzz/safetensors_header_fuzz.cc   safetensors file headers
#   tool_call           engine/text/fuzz/tool_call_fuzz.cc          Kimi K2 / GLM tool-call parsers
#   tokenizer           engine/text/fuzz/tokenizer_fuzz.cc          tokenizer.json / rank-file loaders, encode
#   stop_string         engine/runtime/fuzz/stop_string_fuzz.cc     stop strings across streamed tokens
#   openai_request      agent/openai/fuzz/openai_request_fuzz.cc    OpenAI request bodies, response builders
#   watch_stream        controller/kube/fuzz/watch_stream_fuzz.cc   watch bodies: line framing, JSON watch events
#   quantity            controller/reconcile/fuzz/quantity_fuzz.cc  Kubernetes resource quantities (kvCacheMemory)
#   http_wire           agent/http/fuzz/http_wire_fuzz.cc           HTTP/1.1 request reader, response/SSE writer
#   agent_config        agent/fuzz/agent_config_fuzz.cc             agent YAML config, API-key text
#   cr_spec             tests/fuzz/cr_spec_fuzz.cc                  ModelDeployment/ModelPool specs -> plans -> agent configs
#   kv_transfer         agent/fuzz/kv_transfer_fuzz.cc              KV transfer protobuf messages -> PushKv -> the engine's import
# `seconds` is per target, so the total is seconds x targets. Exits non-zero when a target finds a
# crash, a sanitizer report or a failed invariant (the reproducer is left in build-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=""
if [ "${1:-}" = --runs ]; then
  runs="${2:?--runs needs a count}"
  only="${3:?--runs needs one target}"
  seconds=0
else
  seconds="${1:-60}"
  only="${2:-all}"
fi
out=build-fuzz
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }

# fuzz_target NAME SEED_DIR EXTRA_LIBFUZZER_FLAGS SOURCES...
ran=0
fuzz_target() {
  local name="$1" seeds="$2" flags="$3"
  ran=$((ran + 1))
  shift 3
  local sources=() libs=()
  for arg in "$@"; do
    if [[ "$arg" == -l* ]]; then libs+=("$arg"); else sources+=("$arg"); fi
  done
  local binary="$out/${name}_fuzz" corpus="$out/corpus_$name"
  mkdir -p "$corpus"
  local newest
  newest=$( (ls -t "${sources[@]}" "$(dirname "${sources[0]}")"/../*.h engine/core/dtype.h common/status.h "$0" \
    2>/dev/null || true) | head -1)
  if [ ! -x "$binary" ] || [ "$newest" -nt "$binary" ]; then
    echo "fuzz: building $binary"
    clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
      -I. -I"$out" "${sources[@]}" -o "$binary" "${libs[@]}"
  fi
  # New inputs go to build-fuzz/corpus_NAME; the committed seeds are only read. Progress lines go
  # to build-fuzz/NAME.log (a long run: long_NAME-<UTC time>.log, one per run); the tail (final
  # stats, or the crash report) is printed either way.
  # A long run records no allocation stacks (malloc_context_size=0): ASan keeps every distinct
  # stack it has seen for good, and that store (most likely fed by yaml-cpp's recursion) grew an
  # agent_config run by ~1.5 MB per 1,000 executions toward -rss_limit_mb. Errors are still
  # caught; rerun the saved reproducer with default options to get the stacks.
  local limit=(-max_total_time="$seconds") log="$out/$name.log" asan=detect_leaks=1 what="${seconds}s"
  if [ -n "$runs" ]; then
    limit=(-runs="$runs") log="$out/long_$name-$(date -u +%Y%m%dT%H%M%SZ).log" asan=detect_leaks=1:malloc_context_size=0 what="$runs runs"
  fi
  echo "fuzz: running $name for $what"
  local status=0
  # shellcheck disable=SC2086
  (cd "$out" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS="$asan" \
    "./${name}_fuzz" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 $flags \
      "corpus_$name" "../$seeds") >"$log" 2>&1 || status=$?
  tail -n 25 "$log"
  if [ "$status" -ne 0 ]; then
    echo "fuzz: $name FAILED (exit $status); full log: $log, reproducer in $out/" >&2
    exit "$status"
  fi
  echo "fuzz: $name: no crash in $what"
}

mkdir -p "$out"
if [ "$only" = all ] || [ "$only" = safetensors_header ]; then
  fuzz_target safetensors_header engine/io/fuzz/corpus "" \
    engine/io/fuzz/safetensors_header_fuzz.cc engine/io/safetensors_header.cc \
    engine/io/safetensors_dtype.cc engine/io/strict_json.cc
fi
if [ "$only" = all ] || [ "$only" = tool_call ]; then
  fuzz_target tool_call engine/text/fuzz/corpus "-dict=../engine/text/fuzz/tool_call.dict -max_len=4096" \
    engine/text/fuzz/tool_call_fuzz.cc engine/text/tool_call_parser.cc engine/text/kimi_tool_parser.cc \
    engine/text/glm_tool_parser.cc engine/text/py_json.cc
fi
if [ "$only" = all ] || [ "$only" = tokenizer ]; then
  fuzz_target tokenizer engine/text/fuzz/tokenizer_corpus "-max_len=8192" \
    engine/text/fuzz/tokenizer_fuzz.cc engine/text/bpe_model.cc engine/text/byte_level.cc \
    engine/text/detokenizer.cc engine/text/hf_tokenizer_json.cc engine/text/pretokenizer.cc \
    engine/text/tiktoken_file.cc engine/text/tokenizer.cc engine/text/unicode.cc \
    engine/text/unicode_tables.cc engine/io/strict_json.cc
fi
if [ "$only" = all ] || [ "$only" = stop_string ]; then
  fuzz_target stop_string engine/runtime/fuzz/stop_string_corpus "-max_len=1024" \
    engine/runtime/fuzz/stop_string_fuzz.cc engine/runtime/output_processor.cc engine/runtime/sampler.cc \
    engine/runtime/sampler_select.cc engine/text/bpe_model.cc engine/text/byte_level.cc \
    engine/text/detokenizer.cc engine/text/hf_tokenizer_json.cc engine/text/pretokenizer.cc \
    engine/text/tiktoken_file.cc engine/text/tokenizer.cc engine/text/unicode.cc \
    engine/text/unicode_tables.cc engine/io/strict_json.cc
fi
if [ "$only" = all ] || [ "$only" = openai_request ]; then
  fuzz_target openai_request agent/openai/fuzz/corpus "-dict=../agent/openai/fuzz/openai_request.dict -max_len=4096" \
    agent/openai/fuzz/openai_request_fuzz.cc agent/openai/api.cc agent/openai/chat_fields.cc \
    agent/openai/completion_response.cc agent/openai/json_fields.cc agent/openai/reasoning_splitter.cc \
    agent/openai/response.cc agent/openai/response_json.cc engine/text/tool_call_parser.cc \
    engine/text/kimi_tool_parser.cc engine/text/glm_tool_parser.cc engine/text/py_json.cc \
    engine/text/bpe_model.cc engine/text/byte_level.cc engine/text/detokenizer.cc \
    engine/text/hf_tokenizer_json.cc engine/text/pretokenizer.cc engine/text/tiktoken_file.cc \
    engine/text/tokenizer.cc engine/text/unicode.cc engine/text/unicode_tables.cc engine/io/strict_json.cc
fi
if [ "$only" = all ] || [ "$only" = watch_stream ]; then
  fuzz_target watch_stream controller/kube/fuzz/corpus "-dict=../controller/kube/fuzz/watch_stream.dict -max_len=4096" \
    controller/kube/fuzz/watch_stream_fuzz.cc controller/kube/line_splitter.cc \
    controller/kube/watch_event.cc controller/kube/status_mapping.cc
fi
if [ "$only" = all ] || [ "$only" = quantity ]; then
  fuzz_target quantity controller/reconcile/fuzz/corpus "-dict=../controller/reconcile/fuzz/quantity.dict -max_len=8192" \
    controller/reconcile/fuzz/quantity_fuzz.cc controller/reconcile/deployment_spec.cc controller/reconcile/objects.cc \
    controller/reconcile/autoscale_policy.cc
fi
if [ "$only" = all ] || [ "$only" = http_wire ]; then
  fuzz_target http_wire agent/http/fuzz/corpus "-dict=../agent/http/fuzz/http_wire.dict -max_len=4096" \
    agent/http/fuzz/http_wire_fuzz.cc agent/http/request_reader.cc agent/http/response_writer.cc \
    agent/http/socket_io.cc
fi
if [ "$only" = all ] || [ "$only" = agent_config ]; then
  fuzz_target agent_config agent/fuzz/config_corpus "-dict=../agent/fuzz/agent_config.dict -max_len=4096" \
    agent/fuzz/agent_config_fuzz.cc agent/config.cc -lyaml-cpp -lcrypto
fi
if [ "$only" = all ] || [ "$only" = cr_spec ]; then
  fuzz_target cr_spec tests/fuzz/cr_corpus "-dict=../tests/fuzz/cr_spec.dict -max_len=8192" \
    tests/fuzz/cr_spec_fuzz.cc controller/reconcile/deployment_spec.cc controller/reconcile/objects.cc \
    controller/reconcile/autoscale_policy.cc controller/reconcile/deployment_plan.cc controller/reconcile/pool_plan.cc \
    controller/reconcile/engine_config.cc controller/reconcile/pod_template.cc agent/config.cc -lyaml-cpp -lcrypto
fi
if [ "$only" = all ] || [ "$only" = kv_transfer ]; then
  # The messages' C++ classes, generated here as CMake generates them for the agent.
  mkdir -p "$out/proto"
  if [ ! -f "$out/proto/tandem.pb.cc" ] || [ proto/tandem.proto -nt "$out/proto/tandem.pb.cc" ]; then
    protoc --cpp_out="$out" proto/tandem.proto
  fi
  fuzz_target kv_transfer agent/fuzz/kv_transfer_corpus "-max_len=4096" \
    agent/fuzz/kv_transfer_fuzz.cc agent/kv_import.cc "$out/proto/tandem.pb.cc" \
    engine/runtime/engine.cc engine/runtime/engine_transfer.cc engine/runtime/hash_executor.cc \
    engine/runtime/integrity_log.cc engine/runtime/output_processor.cc engine/runtime/sampler.cc \
    engine/runtime/sampler_select.cc engine/runtime/scheduler.cc engine/kv/block_table.cc \
    engine/kv/integrity_tracker.cc engine/kv/page_allocator.cc engine/kv/page_convert.cc engine/kv/page_pool.cc \
    engine/kv/prefix_cache.cc engine/kv/transfer_ledger.cc engine/kv/transfer_tags.cc engine/formats/convert.cc \
    engine/core/aligned_buffer.cc engine/core/cpu_features.cc engine/text/detokenizer.cc engine/text/tokenizer.cc engine/text/bpe_model.cc \
    engine/text/byte_level.cc engine/text/hf_tokenizer_json.cc engine/text/pretokenizer.cc \
    engine/text/tiktoken_file.cc engine/text/unicode.cc engine/text/unicode_tables.cc engine/io/strict_json.cc \
    -lprotobuf
fi
if [ "$ran" -eq 0 ]; then
  echo "fuzz: no target named '$only' (the names are listed at the top of $0)" >&2
  exit 2
fi
