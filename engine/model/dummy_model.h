#pragma once
// Deterministic random models (`--load-format dummy`): the same config, format and seed give
// identical bytes, whatever the thread count. Each tensor draws from its own generator seeded by
// (seed, tensor name), uniformly with the standard deviation below, rounded to bf16 (the "source
// checkpoint"), then quantized with the reference quantizers:
//   Linear [N, K]: std 1/sqrt(K), so y = W x keeps O(1) activations;
//   embed_tokens: std 1; RMSNorm / LayerNorm weights: 1 + U(-0.1, 0.1); LayerNorm bias, router
//   bias (e_score_correction_bias, F32): U(-0.1, 0.1); router: std 1/sqrt(hidden).
// Formats (as `tandem quantize` produces them): bf16: every Linear bf16; fp8: every Linear but
// lm_head FP8 block-128; int4: routed experts INT4 group-32 (K % 32 == 0 needed), the rest bf16.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"
#include "engine/io/safetensors_writer.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

// `config` with the quantization_config a `format` checkpoint declares (fp8: quant_method fp8;
// int4: compressed-tensors pack-quantized, ignoring lm_head, self_attn, shared experts and dense
// MLPs by regex).
ModelConfig WithQuantization(const ModelConfig& config, WeightFormat format);

// One tensor in checkpoint layout, owning its bytes.
struct OwnedTensor {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

// Every tensor of the dummy checkpoint, in TensorSpecs order (int4 Linears expand to
// weight_packed/weight_scale/weight_shape, fp8 to weight/weight_scale_inv).
// InvalidArgument for an int4 expert whose K is not a multiple of 32. threads: 0 = hardware.
StatusOr<std::vector<OwnedTensor>> MakeDummyTensors(const ModelConfig& config, WeightFormat format,
                                                    uint64_t seed, int threads = 0);

// The dummy model in memory: MakeDummyTensors packed by the loader's own code (AssembleModel),
// so it is byte-identical to writing the checkpoint and loading it back.
StatusOr<ModelWeights> MakeDummyModel(const ModelConfig& config, WeightFormat format, uint64_t seed,
                                      int threads = 0);

// Writes a dummy checkpoint directory: config.json (ModelConfigToJson of WithQuantization) and
// safetensors via io::WriteCheckpoint (shards of at most max_shard_bytes, with an index when
// more than one). The directory is created if missing.
Status WriteDummyCheckpoint(const std::string& dir, const ModelConfig& config, WeightFormat format,
                            uint64_t seed, uint64_t max_shard_bytes = 5'000'000'000, int threads = 0);

}  // namespace tandem::engine::model
