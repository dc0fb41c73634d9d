#pragma once
// The `quantization_config` objects of config.json for the weight formats Tandem writes, built
// once for every writer (`tandem quantize`, dummy checkpoints).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::engine {

// DeepSeek/GLM FP8: {quant_method: fp8, fmt: e4m3, weight_block_size: [128, 128],
// activation_scheme: dynamic}.
nlohmann::json Fp8BlockQuantizationJson();

// compressed-tensors pack-quantized INT4 (symmetric, group 32) for the modules matched by
// `targets`, except those in `ignore`.
nlohmann::json Int4PackQuantizedJson(const std::vector<std::string>& targets,
                                     const std::vector<std::string>& ignore);

}  // namespace tandem::engine
