#include "engine/formats/quantization_json.h"

#include "engine/formats/weights.h"

namespace tandem::engine {

nlohmann::json Fp8BlockQuantizationJson() {
  return {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"weight_block_size", {kFp8BlockSize, kFp8BlockSize}},
          {"activation_scheme", "dynamic"}};
}

nlohmann::json Int4PackQuantizedJson(const std::vector<std::string>& targets,
                                     const std::vector<std::string>& ignore) {
  const nlohmann::json weights = {{"num_bits", 4},       {"type", "int"},
                                  {"symmetric", true},   {"group_size", kInt4GroupSize},
                                  {"strategy", "group"}, {"dynamic", false}};
  const nlohmann::json group = {{"targets", targets},
                                {"weights", weights},
                                {"input_activations", nullptr},
                                {"output_activations", nullptr},
                                {"format", "pack-quantized"}};
  return {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"},
          {"quantization_status", "compressed"},  {"config_groups", {{"group_0", group}}},
          {"kv_cache_scheme", nullptr},           {"ignore", ignore}};
}

}  // namespace tandem::engine
