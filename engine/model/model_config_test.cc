#include "engine/model/model_config.h"

#include <cmath>
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/model/presets.h"
#include "engine/model/tensor_specs.h"

namespace tandem::engine::model {
namespace {

using nlohmann::json;

// Kimi K2 (moonshotai/Kimi-K2-Instruct style): model_type kimi_k2, DeepSeek-V3 fields, FP8.
constexpr const char* kKimiK2 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"},
  "aux_loss_alpha": 0.001, "bos_token_id": 163584, "eos_token_id": 163585, "ep_size": 1,
  "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 131072,
  "model_type": "kimi_k2", "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 1,
  "n_routed_experts": 384, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 64,
  "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 64,
  "num_nextn_predict_layers": 0, "pretraining_tp": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                          "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                   "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid", "seq_aux": true,
  "tie_word_embeddings": false, "topk_group": 1, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
  "use_cache": true, "v_head_dim": 128, "vocab_size": 163840
})";

// Kimi K2.5/K2.6 style: a multimodal wrapper (kimi_k25) with the text model under text_config and
// compressed-tensors INT4 experts declared at the top level.
constexpr const char* kKimiK25 = R"({
  "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
  "vision_config": {"model_type": "kimi_k25_vision", "hidden_size": 1152},
  "text_config": {
    "model_type": "kimi_k2", "hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 163840,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_attention_heads": 64,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "n_routed_experts": 384, "num_experts_per_tok": 8, "n_shared_experts": 1,
    "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.827,
    "norm_topk_prob": true, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
    "max_position_embeddings": 262144, "rms_norm_eps": 1e-05, "rope_theta": 50000.0,
    "rope_scaling": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                     "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
    "tie_word_embeddings": false},
  "quantization_config": {
    "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
    "config_groups": {"group_0": {"targets": ["Linear"], "format": "pack-quantized",
      "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32,
                  "dynamic": false},
      "input_activations": null, "output_activations": null}},
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|down)_proj.*",
               "re:vision_tower.*", "re:mm_projector.*"]},
  "tie_word_embeddings": true
})";

// GLM-5 (zai-org/GLM-5 style, transformers 5 field names: rope_parameters).
constexpr const char* kGlm5 = R"({
  "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "attention_bias": false,
  "dtype": "bfloat16", "eos_token_id": [154820, 154827, 154829], "first_k_dense_replace": 3,
  "head_dim": 64, "hidden_act": "silu", "hidden_size": 6144, "index_head_dim": 128, "index_n_heads": 32,
  "index_topk": 2048, "intermediate_size": 12288, "kv_lora_rank": 512,
  "max_position_embeddings": 202752, "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 1,
  "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 64,
  "num_experts_per_tok": 8, "num_hidden_layers": 78, "num_key_value_heads": 64,
  "num_nextn_predict_layers": 1, "q_lora_rank": 2048, "qk_head_dim": 256, "qk_nope_head_dim": 192,
  "qk_rope_head_dim": 64, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
  "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": false,
  "topk_group": 1, "topk_method": "noaux_tc", "use_cache": true, "v_head_dim": 256, "vocab_size": 154880
})";

ModelConfig MustParse(const std::string& text) {
  StatusOr<ModelConfig> c = ParseModelConfig(text);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ModelConfigTest, ParsesKimiK2) {
  const ModelConfig c = MustParse(kKimiK2);
  EXPECT_EQ(c.architecture, Architecture::kDeepseekV3);
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.tensor_prefix, "");
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.vocab_size, 163840);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_head_dim(), 192);
  EXPECT_EQ(c.KvLatentWidth(), 576);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.827);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoAuxTc);
  EXPECT_FALSE(c.IsMoeLayer(0));
  EXPECT_TRUE(c.IsMoeLayer(1));
  EXPECT_EQ(c.NumMoeLayers(), 60);
  EXPECT_TRUE(c.rope.yarn);
  EXPECT_DOUBLE_EQ(c.rope.theta, 50000.0);
  EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope.beta_fast, 1.0);
  EXPECT_TRUE(c.rope.interleave);
  // mscale == mscale_all_dim: cos/sin unscaled, softmax scale * (0.1 ln 32 + 1)^2.
  EXPECT_DOUBLE_EQ(c.rope.AttentionFactor(), 1.0);
  const double m = 0.1 * std::log(32.0) + 1.0;
  EXPECT_NEAR(c.AttentionSoftmaxScale(), m * m / std::sqrt(192.0), 1e-12);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.quantization.method, QuantizationConfig::Method::kFp8Block128);
  EXPECT_EQ(c.quantization.FormatFor("model.layers.3.mlp.experts.7.up_proj"), WeightFormat::kFp8Block128);
  EXPECT_EQ(c.quantization.FormatFor("model.layers.3.self_attn.kv_b_proj"), WeightFormat::kFp8Block128);
  EXPECT_EQ(c.quantization.FormatFor("lm_head"), WeightFormat::kBf16);
}

TEST(ModelConfigTest, ParsesNestedKimiK25WithInt4) {
  const ModelConfig c = MustParse(kKimiK25);
  EXPECT_EQ(c.architecture, Architecture::kDeepseekV3);
  EXPECT_EQ(c.model_type, "kimi_k2");
  EXPECT_EQ(c.tensor_prefix, "language_model.");
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_FALSE(c.tie_word_embeddings);  // the text model's own flag wins over the wrapper's
  EXPECT_DOUBLE_EQ(c.rope.factor, 64.0);
  const QuantizationConfig& q = c.quantization;
  ASSERT_EQ(q.method, QuantizationConfig::Method::kCompressedInt4);
  EXPECT_EQ(q.FormatFor("language_model.model.layers.5.mlp.experts.300.down_proj"),
            WeightFormat::kInt4Group32);
  EXPECT_EQ(q.FormatFor("language_model.model.layers.5.mlp.shared_experts.down_proj"), WeightFormat::kBf16);
  EXPECT_EQ(q.FormatFor("language_model.model.layers.0.mlp.gate_proj"), WeightFormat::kBf16);
  EXPECT_EQ(q.FormatFor("language_model.model.layers.5.self_attn.q_a_proj"), WeightFormat::kBf16);
  EXPECT_EQ(q.FormatFor("language_model.lm_head"), WeightFormat::kBf16);
  EXPECT_EQ(TensorSpecs(c).front().name, "language_model.model.embed_tokens.weight");
}

TEST(ModelConfigTest, ParsesGlm5) {
  const ModelConfig c = MustParse(kGlm5);
  EXPECT_EQ(c.architecture, Architecture::kGlmMoeDsa);
  EXPECT_EQ(c.hidden_size, 6144);
  EXPECT_EQ(c.num_hidden_layers, 78);
  EXPECT_EQ(c.qk_nope_head_dim, 192);
  EXPECT_EQ(c.v_head_dim, 256);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_FALSE(c.IsMoeLayer(2));
  EXPECT_TRUE(c.IsMoeLayer(3));
  EXPECT_FALSE(c.rope.yarn);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_TRUE(c.rope.interleave);
  EXPECT_DOUBLE_EQ(c.AttentionSoftmaxScale(), 1.0 / 16.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.indexer.n_heads, 32);
  EXPECT_EQ(c.indexer.head_dim, 128);
  EXPECT_EQ(c.indexer.topk, 2048);
  ASSERT_EQ(c.indexer.full_layers.size(), 78u);
  for (int l = 0; l < 78; ++l) EXPECT_TRUE(c.HasIndexerWeights(l)) << l;
  EXPECT_EQ(c.quantization.method, QuantizationConfig::Method::kNone);
}

TEST(ModelConfigTest, IndexerSharingSchedules) {
  json j = json::parse(kGlm5);
  j["num_hidden_layers"] = 4;
  j["first_k_dense_replace"] = 1;
  j["indexer_types"] = {"full", "shared", "full", "shared"};
  ModelConfig c = MustParse(j.dump());
  EXPECT_EQ(c.indexer.full_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_FALSE(c.HasIndexerWeights(1));
  j.erase("indexer_types");
  j["index_topk_pattern"] = "FSSF";
  c = MustParse(j.dump());
  EXPECT_EQ(c.indexer.full_layers, (std::vector<bool>{true, false, false, true}));
  j.erase("index_topk_pattern");
  j["index_topk_freq"] = 2;  // HF: full iff max(i - offset + 1, 0) % freq == 0, offset 2
  c = MustParse(j.dump());
  EXPECT_EQ(c.indexer.full_layers, (std::vector<bool>{true, true, false, true}));
}

TEST(ModelConfigTest, AbsentFieldsTakeTransformersDefaults) {
  json j = json::parse(kKimiK2);
  for (const char* key :
       {"n_group", "topk_group", "first_k_dense_replace", "routed_scaling_factor", "rms_norm_eps",
        "max_position_embeddings", "rope_scaling", "rope_theta", "scoring_func", "topk_method",
        "norm_topk_prob", "moe_layer_freq", "tie_word_embeddings", "quantization_config"}) {
    j.erase(key);
  }
  ModelConfig c = MustParse(j.dump());
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_FALSE(c.rope.yarn);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoAuxTc);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.moe_layer_freq, 1);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.quantization.method, QuantizationConfig::Method::kNone);
  j["n_group"] = nullptr;  // null: no grouping
  j["topk_group"] = nullptr;
  c = MustParse(j.dump());
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.topk_group, 1);

  json g = json::parse(kGlm5);
  for (const char* key : {"n_group", "topk_group", "rms_norm_eps", "max_position_embeddings", "index_n_heads",
                          "index_head_dim", "index_topk", "first_k_dense_replace"}) {
    g.erase(key);
  }
  c = MustParse(g.dump());
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 202752);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_EQ(c.indexer.n_heads, 32);
  EXPECT_EQ(c.indexer.head_dim, 128);
  EXPECT_EQ(c.indexer.topk, 2048);
}

TEST(ModelConfigTest, NullQLoraMeansPlainQProj) {
  json j = json::parse(kKimiK2);
  j["q_lora_rank"] = nullptr;
  j["num_hidden_layers"] = 2;
  const ModelConfig c = MustParse(j.dump());
  EXPECT_FALSE(c.has_q_lora());
  bool q_proj = false, q_a = false;
  for (const TensorSpec& s : TensorSpecs(c)) {
    q_proj = q_proj || s.name == "model.layers.0.self_attn.q_proj.weight";
    q_a = q_a || s.name.find("q_a_proj") != std::string::npos;
  }
  EXPECT_TRUE(q_proj);
  EXPECT_FALSE(q_a);
}

TEST(ModelConfigTest, LegacyAndNewRopeFormsAgree) {
  json j = json::parse(kKimiK2);
  json p = j["rope_scaling"];
  p.erase("type");
  p["rope_type"] = "yarn";
  p["rope_theta"] = 50000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = p;
  const ModelConfig a = MustParse(kKimiK2), b = MustParse(j.dump());
  EXPECT_EQ(ModelConfigToJson(a), ModelConfigToJson(b));
}

struct BadCase {
  std::string name;
  const char* base;
  std::function<void(json&)> edit;
  std::string expected;  // a substring of the message
};

TEST(ModelConfigTest, RejectsInconsistentConfigsNamingTheField) {
  const std::vector<BadCase> cases = {
      {"unknown model_type", kKimiK2, [](json& j) { j["model_type"] = "llama"; }, "model_type 'llama'"},
      {"topk > experts", kKimiK2, [](json& j) { j["num_experts_per_tok"] = 385; },
       "num_experts_per_tok (385)"},
      {"topk_group > n_group", kKimiK2, [](json& j) { j["topk_group"] = 2; }, "topk_group (2) > n_group (1)"},
      {"experts % groups", kKimiK2, [](json& j) { j["n_group"] = 5; }, "not a multiple of n_group (5)"},
      {"kv_lora_rank 0", kKimiK2, [](json& j) { j["kv_lora_rank"] = 0; }, "kv_lora_rank must be > 0"},
      {"heads 0", kKimiK2, [](json& j) { j["num_attention_heads"] = 0; }, "num_attention_heads must be > 0"},
      {"negative heads", kGlm5, [](json& j) { j["num_attention_heads"] = -64; }, "num_attention_heads"},
      {"dense > layers", kKimiK2, [](json& j) { j["first_k_dense_replace"] = 62; },
       "first_k_dense_replace (62)"},
      {"missing hidden", kKimiK2, [](json& j) { j.erase("hidden_size"); }, "missing field 'hidden_size'"},
      {"wrong type", kKimiK2, [](json& j) { j["vocab_size"] = "big"; }, "'vocab_size' must be an integer"},
      {"fractional int", kKimiK2, [](json& j) { j["v_head_dim"] = 127.5; },
       "'v_head_dim' must be an integer"},
      {"scoring", kKimiK2, [](json& j) { j["scoring_func"] = "relu"; }, "scoring_func 'relu'"},
      {"topk_method", kKimiK2, [](json& j) { j["topk_method"] = "magic"; }, "topk_method 'magic'"},
      {"rope type", kKimiK2, [](json& j) { j["rope_scaling"]["type"] = "dynamic"; }, "type 'dynamic'"},
      {"yarn factor", kKimiK2, [](json& j) { j["rope_scaling"]["factor"] = 0.5; }, "rope_scaling.factor"},
      {"quant method", kKimiK2, [](json& j) { j["quantization_config"]["quant_method"] = "gptq"; }, "'gptq'"},
      {"fp8 block", kKimiK2,
       [](json& j) {
         j["quantization_config"]["weight_block_size"] = {64, 64};
       },
       "weight_block_size [64,64]"},
      {"int4 bits", kKimiK25,
       [](json& j) { j["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 8; },
       "num_bits 4"},
      {"bad regex", kKimiK25, [](json& j) { j["quantization_config"]["ignore"] = {"re:(("}; },
       "invalid regex"},
      {"qk_head_dim", kGlm5, [](json& j) { j["qk_head_dim"] = 128; }, "qk_head_dim 128"},
      {"index_head_dim", kGlm5, [](json& j) { j["index_head_dim"] = 32; },
       "index_head_dim must be >= qk_rope"},
      {"index_n_heads", kGlm5, [](json& j) { j["index_n_heads"] = 0; }, "index_n_heads must be > 0"},
      {"glm without q_lora", kGlm5, [](json& j) { j["q_lora_rank"] = nullptr; }, "needs q_lora_rank"},
      {"indexer_types length", kGlm5, [](json& j) { j["indexer_types"] = {"full"}; }, "indexer_types"},
      {"indexer_types value", kGlm5, [](json& j) { j["indexer_types"] = {"dense"}; }, "indexer_types"},
      {"text_config type", kKimiK25, [](json& j) { j["text_config"] = 3; }, "text_config must be an object"},
  };
  for (const BadCase& bad : cases) {
    json j = json::parse(bad.base);
    bad.edit(j);
    StatusOr<ModelConfig> c = ParseModelConfig(j.dump());
    ASSERT_FALSE(c.ok()) << bad.name;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << bad.name;
    EXPECT_NE(c.status().message().find(bad.expected), std::string::npos)
        << bad.name << ": " << c.status().message();
  }
}

TEST(ModelConfigTest, MalformedJsonIsDataLoss) {
  EXPECT_EQ(ParseModelConfig("{").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ParseModelConfig("[1]").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ParseModelConfig(R"({"model_type": "kimi_k2", "model_type": "x"})").status().code(),
            StatusCode::kDataLoss);
}

TEST(ModelConfigTest, LoadModelConfigNotFound) {
  StatusOr<ModelConfig> c = LoadModelConfig(::testing::TempDir() + "/no_such_model_dir");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

TEST(ModelConfigTest, EveryPresetRoundTripsThroughConfigJson) {
  for (const std::string& name : PresetNames()) {
    StatusOr<ModelConfig> p = Preset(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    const std::string text = ModelConfigToJson(*p);
    const ModelConfig back = MustParse(text);
    EXPECT_EQ(ModelConfigToJson(back), text) << name;
    EXPECT_EQ(back.architecture, p->architecture) << name;
    EXPECT_EQ(back.indexer.full_layers, p->indexer.full_layers) << name;
    EXPECT_DOUBLE_EQ(back.AttentionSoftmaxScale(), p->AttentionSoftmaxScale()) << name;
    EXPECT_DOUBLE_EQ(back.rope.AttentionFactor(), p->rope.AttentionFactor()) << name;
  }
}

}  // namespace
}  // namespace tandem::engine::model
