#pragma once
// Re-quantizing a Hugging Face checkpoint directory (what `tandem quantize` runs):
//   - kInt4: routed experts (`model.layers.<L>.mlp.experts.<E>.(gate|up|down)_proj.weight`)
//     become compressed-tensors pack-quantized INT4, group 32 (QuantizeInt4Group32Ref);
//   - kFp8: every 2-D Linear weight except embeddings, lm_head and the MoE router gate becomes
//     FP8 e4m3 with 128x128 block scales (QuantizeFp8Block128Ref).
// The input's Linear weights are BF16, F16 or F32, or FP8 block-128 (`weight` + `weight_scale_inv`),
// which is dequantized with the reference rule first. Everything else is copied byte for byte.
// Layouts and the exact rules: docs/weight-formats.md.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tandem::engine::io {

enum class QuantizeTarget : uint8_t { kInt4, kFp8 };

// "int4" or "fp8"; InvalidArgument otherwise.
StatusOr<QuantizeTarget> ParseQuantizeTarget(std::string_view name);

// Called after each quantized tensor, from whichever worker finished it, one call at a time.
// bytes_done counts the source bytes of the finished tensors.
using QuantizeProgressFn =
    std::function<void(size_t tensors_done, size_t tensors_total, uint64_t bytes_done)>;

struct QuantizeOptions {
  std::string input_dir;
  std::string output_dir;  // created if missing; must be empty and differ from input_dir
  QuantizeTarget target = QuantizeTarget::kInt4;
  uint64_t max_shard_bytes = 5'000'000'000;  // per output shard's data section
  int threads = 4;                           // >= 1, the caller included
  QuantizeProgressFn on_progress;            // optional
};

// One quantized tensor's round-trip error: ||W - deq(Q(W))||_F / ||W||_F (0 for an all-zero W),
// W being the source weight in fp32 (after dequantizing an FP8 source).
struct TensorError {
  std::string name;  // the source tensor, e.g. "model.layers.1.mlp.experts.0.up_proj.weight"
  double relative_error = 0;
};

struct QuantizeReport {
  uint64_t input_bytes = 0;         // sum of the input's .safetensors file sizes
  uint64_t output_bytes = 0;        // the same for the output
  size_t tensors_kept = 0;          // copied unchanged (scale_inv of a kept FP8 weight included)
  std::vector<TensorError> errors;  // one per quantized tensor, in name order

  double Ratio() const;      // output_bytes / input_bytes (0 for an empty input)
  double MeanError() const;  // 0 when nothing was quantized
  // The n largest errors, largest first (ties by name).
  std::vector<TensorError> Worst(size_t n) const;
};

// Writes the quantized checkpoint to options.output_dir: other files of the input directory
// (tokenizer, generation_config.json, ...) copied, then the tensors with WriteCheckpoint, then
// config.json with the new `quantization_config`, last and atomically, so a failed run never
// leaves a config.json behind. Errors, each naming the file or tensor:
//   NotFound: input_dir, its config.json or its safetensors missing;
//   InvalidArgument: output_dir equal to input_dir, bad options, a weight to quantize whose
//     dtype is not BF16/F16/F32/F8_E4M3 or that is not 2-D, INT4 with K % 32 != 0, an FP8 weight
//     whose weight_scale_inv is missing or not F32 [ceil(N/128), ceil(K/128)];
//   DataLoss: malformed config.json (and the errors of Checkpoint::Open);
//   FailedPrecondition: output_dir not empty, an FP8 input with --to fp8 ("already fp8"), an
//     input already in compressed-tensors format;
//   Internal: I/O failures.
StatusOr<QuantizeReport> QuantizeCheckpoint(const QuantizeOptions& options);

}  // namespace tandem::engine::io
