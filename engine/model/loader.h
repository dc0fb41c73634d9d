#pragma once
// Loading a model: config.json + a memory-mapped safetensors checkpoint (one file or shards with
// model.safetensors.index.json) -> ModelWeights.
//
// Each Linear is read in whatever format the checkpoint stores it, tensor by tensor:
//   <module>.weight BF16/F16/F32            -> bf16 PackedWeight (F16/F32 rounded to bf16)
//   <module>.weight F8_E4M3 + .weight_scale_inv F32 [ceil(N/128), ceil(K/128)] -> fp8 PackedWeight
//   <module>.weight_packed I32 [N, K/8] + .weight_scale BF16 [N, K/32] (+ .weight_shape) -> int4
// Embeddings, norms, the router and its bias (BF16/F16/F32) become fp32. Tensors the model does
// not use (MTP layers, vision tower) are ignored. Names and shapes: tensor_specs.h.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/io/safetensors_file.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

struct LoadProgress {
  int64_t bytes_done = 0;  // source bytes of the tensors packed so far
  int64_t bytes_total = 0;
  int64_t tensors_done = 0;
  int64_t tensors_total = 0;
  double seconds = 0;  // since packing started
};
// Called after each packed tensor, one call at a time, from whichever worker finished it.
using LoadProgressFn = std::function<void(const LoadProgress&)>;

// A progress bar on stderr ("\rloading  45.0%  1.23/2.70 GB  1.85 GB/s  1234/4567 tensors", MB below 1 GB),
// redrawn at most every 100 ms and on the last tensor, then a newline.
LoadProgressFn StderrProgressBar();

struct LoadOptions {
  int threads = 0;  // packing workers, the caller included; 0 = hardware threads (at most 16)
  LoadProgressFn on_progress;
  bool progress_bar = false;  // StderrProgressBar() when on_progress is empty
  // A Linear whose stored format differs from what quantization_config says: an error when true,
  // otherwise one warning with the count (the checkpoint's tensors are what gets loaded).
  bool strict_formats = false;
};

// The tensor called `name`, or nullptr. Views must outlive the call that uses them.
using TensorLookup = std::function<const io::TensorView*(std::string_view name)>;

// Builds ModelWeights for `config` from tensors found through `lookup`. Every problem is
// reported in one error listing each tensor (at most 20, then a count): NotFound for a missing
// tensor, InvalidArgument for a wrong dtype or shape, each naming the tensor and its expected
// shape, e.g. "tensor 'model.layers.1.self_attn.o_proj.weight': shape [64, 32], expected [64, 64]".
// REQUIRES: a validated config.
StatusOr<ModelWeights> AssembleModel(const ModelConfig& config, const TensorLookup& lookup,
                                     const LoadOptions& options = {});

// LoadModelConfig(dir), io::Checkpoint::Open(dir), then AssembleModel.
StatusOr<ModelWeights> LoadModel(const std::string& dir, const LoadOptions& options = {});

}  // namespace tandem::engine::model
