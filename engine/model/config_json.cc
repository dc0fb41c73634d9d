#include <nlohmann/json.hpp>

#include "engine/model/config_fields.h"
#include "engine/model/model_config.h"

namespace tandem::engine::model {

std::string ModelConfigToJson(const ModelConfig& m) {
  using nlohmann::json;
  const bool glm = m.architecture == Architecture::kGlmMoeDsa;
  json c = {
      {"architectures", {glm ? "GlmMoeDsaForCausalLM" : "DeepseekV3ForCausalLM"}},
      {"model_type", m.model_type == "kimi_k2" ? "kimi_k2" : std::string(ArchitectureName(m.architecture))},
      {"hidden_size", m.hidden_size},
      {"num_hidden_layers", m.num_hidden_layers},
      {"vocab_size", m.vocab_size},
      {"max_position_embeddings", m.max_position_embeddings},
      {"rms_norm_eps", m.rms_norm_eps},
      {"tie_word_embeddings", m.tie_word_embeddings},
      {"num_attention_heads", m.num_attention_heads},
      {"num_key_value_heads", m.num_attention_heads},
      {"q_lora_rank", m.has_q_lora() ? json(m.q_lora_rank) : json(nullptr)},
      {"kv_lora_rank", m.kv_lora_rank},
      {"qk_rope_head_dim", m.qk_rope_head_dim},
      {"qk_nope_head_dim", m.qk_nope_head_dim},
      {"v_head_dim", m.v_head_dim},
      {"intermediate_size", m.intermediate_size},
      {"moe_intermediate_size", m.moe_intermediate_size},
      {"n_routed_experts", m.n_routed_experts},
      {"num_experts_per_tok", m.num_experts_per_tok},
      {"n_shared_experts", m.n_shared_experts},
      {"first_k_dense_replace", m.first_k_dense_replace},
      {"moe_layer_freq", m.moe_layer_freq},
      {"n_group", m.n_group},
      {"topk_group", m.topk_group},
      {"routed_scaling_factor", m.routed_scaling_factor},
      {"norm_topk_prob", m.norm_topk_prob},
      {"scoring_func", m.scoring_func == ScoringFunc::kSigmoid ? "sigmoid" : "softmax"},
      {"topk_method", m.topk_method == TopkMethod::kNoAuxTc  ? "noaux_tc"
                      : m.topk_method == TopkMethod::kGreedy ? "greedy"
                                                             : "group_limited_greedy"},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"num_nextn_predict_layers", 0},
      {"torch_dtype", "bfloat16"},
      {"rope_theta", m.rope.theta},
      {"rope_interleave", m.rope.interleave},
  };
  if (m.rope.yarn) {
    json s = {{"type", "yarn"},
              {"factor", m.rope.factor},
              {"original_max_position_embeddings", m.rope.original_max_position_embeddings},
              {"beta_fast", m.rope.beta_fast},
              {"beta_slow", m.rope.beta_slow},
              {"mscale", m.rope.mscale},
              {"mscale_all_dim", m.rope.mscale_all_dim}};
    if (m.rope.attention_factor.has_value()) s["attention_factor"] = *m.rope.attention_factor;
    if (!m.rope.truncate) s["truncate"] = false;
    c["rope_scaling"] = s;
  } else {
    c["rope_scaling"] = nullptr;
  }
  if (glm) {
    c["index_n_heads"] = m.indexer.n_heads;
    c["index_head_dim"] = m.indexer.head_dim;
    c["index_topk"] = m.indexer.topk;
    json types = json::array();
    for (bool full : m.indexer.full_layers) types.push_back(full ? "full" : "shared");
    c["indexer_types"] = types;
  }
  if (m.quantization.method != QuantizationConfig::Method::kNone) {
    c["quantization_config"] = QuantizationToJson(m.quantization);
  }
  return c.dump(2) + "\n";
}

}  // namespace tandem::engine::model
