#pragma once
// Writing a checkpoint directory that Checkpoint::Open reads back, sharded by size.

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "engine/io/safetensors_writer.h"

namespace tandem::engine::io {

// Writes `tensors` into `dir` (created if missing). Tensors are taken in name order and packed
// greedily into shards whose data sections stay within `max_shard_bytes` (a larger tensor gets a
// shard of its own). One shard is written as `model.safetensors` (removing a stale index); more
// become `model-00001-of-0000N.safetensors` plus `model.safetensors.index.json` with
// {"metadata": {"total_size": bytes}, "weight_map": {...}}, written last. Each file is replaced
// atomically; `metadata` goes into every shard's header. Errors: InvalidArgument (max_shard_bytes
// of 0, duplicate names, the checks of PlanSafetensors), Internal for I/O failures.
Status WriteCheckpoint(const std::string& dir, std::span<const TensorToWrite> tensors,
                       uint64_t max_shard_bytes, const SafetensorsMetadata& metadata = {});

}  // namespace tandem::engine::io
