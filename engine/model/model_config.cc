#include "engine/model/model_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/io/strict_json.h"
#include "engine/model/config_fields.h"

namespace tandem::engine::model {
namespace {

using nlohmann::json;

double YarnMscale(double factor, double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; }

// The text model's JSON: `text_config` for multimodal wrappers (kimi_k25), else the top level.
// Returns the effective model_type and the tensor prefix.
StatusOr<const json*> TextConfig(const json& root, std::string* model_type, std::string* prefix) {
  ASSIGN_OR_RETURN(*model_type, GetString(root, "model_type", std::nullopt));
  const auto text = root.find("text_config");
  if (text == root.end() || text->is_null()) return &root;
  if (!text->is_object()) return Status::InvalidArgument("config.json: text_config must be an object");
  if (*model_type == "kimi_k25") *prefix = "language_model.";
  ASSIGN_OR_RETURN(*model_type, GetString(*text, "model_type", "deepseek_v3"));
  return &*text;
}

StatusOr<Architecture> ArchitectureOf(const std::string& model_type) {
  if (model_type == "deepseek_v3" || model_type == "kimi_k2") return Architecture::kDeepseekV3;
  if (model_type == "glm_moe_dsa") return Architecture::kGlmMoeDsa;
  return Status::InvalidArgument(
      "config.json: model_type '" + model_type +
      "' is not supported (expected deepseek_v3, kimi_k2, kimi_k25 or glm_moe_dsa)");
}

Status ParseRouting(const json& c, ModelConfig* m) {
  ASSIGN_OR_RETURN(std::string scoring, GetString(c, "scoring_func", "sigmoid"));
  if (scoring == "sigmoid") {
    m->scoring_func = ScoringFunc::kSigmoid;
  } else if (scoring == "softmax") {
    m->scoring_func = ScoringFunc::kSoftmax;
  } else {
    return Status::InvalidArgument("config.json: scoring_func '" + scoring +
                                   "' (expected sigmoid or softmax)");
  }
  ASSIGN_OR_RETURN(std::string method, GetString(c, "topk_method", "noaux_tc"));
  if (method == "noaux_tc") {
    m->topk_method = TopkMethod::kNoAuxTc;
  } else if (method == "greedy") {
    m->topk_method = TopkMethod::kGreedy;
  } else if (method == "group_limited_greedy") {
    m->topk_method = TopkMethod::kGroupLimitedGreedy;
  } else {
    return Status::InvalidArgument("config.json: topk_method '" + method +
                                   "' (expected noaux_tc, greedy or group_limited_greedy)");
  }
  return Status::Ok();
}

// Defaults for absent fields are transformers' (DeepseekV3Config / GlmMoeDsaConfig); JSON null
// means "none" (q_lora_rank: plain q_proj; n_group / topk_group: 1; n_shared_experts: 0).
Status ParseFields(const json& c, ModelConfig* m) {
  const bool glm = m->architecture == Architecture::kGlmMoeDsa;
  ASSIGN_OR_RETURN(m->hidden_size, GetInt(c, "hidden_size", std::nullopt));
  ASSIGN_OR_RETURN(m->num_hidden_layers, GetInt(c, "num_hidden_layers", std::nullopt));
  ASSIGN_OR_RETURN(m->vocab_size, GetInt(c, "vocab_size", std::nullopt));
  ASSIGN_OR_RETURN(m->max_position_embeddings, GetInt(c, "max_position_embeddings", glm ? 202752 : 4096));
  ASSIGN_OR_RETURN(m->rms_norm_eps, GetDouble(c, "rms_norm_eps", glm ? 1e-5 : 1e-6));
  ASSIGN_OR_RETURN(m->tie_word_embeddings, GetBool(c, "tie_word_embeddings", false));
  ASSIGN_OR_RETURN(m->num_attention_heads, GetInt(c, "num_attention_heads", std::nullopt));
  ASSIGN_OR_RETURN(m->q_lora_rank, GetInt(c, "q_lora_rank", 0, /*null_value=*/0));
  ASSIGN_OR_RETURN(m->kv_lora_rank, GetInt(c, "kv_lora_rank", std::nullopt));
  ASSIGN_OR_RETURN(m->qk_rope_head_dim, GetInt(c, "qk_rope_head_dim", std::nullopt));
  ASSIGN_OR_RETURN(m->qk_nope_head_dim, GetInt(c, "qk_nope_head_dim", std::nullopt));
  ASSIGN_OR_RETURN(m->v_head_dim, GetInt(c, "v_head_dim", std::nullopt));
  ASSIGN_OR_RETURN(m->intermediate_size, GetInt(c, "intermediate_size", std::nullopt));
  ASSIGN_OR_RETURN(m->moe_intermediate_size, GetInt(c, "moe_intermediate_size", std::nullopt));
  ASSIGN_OR_RETURN(m->n_routed_experts, GetInt(c, "n_routed_experts", std::nullopt));
  ASSIGN_OR_RETURN(m->num_experts_per_tok, GetInt(c, "num_experts_per_tok", std::nullopt));
  ASSIGN_OR_RETURN(m->n_shared_experts, GetInt(c, "n_shared_experts", 0, 0));
  ASSIGN_OR_RETURN(m->first_k_dense_replace, GetInt(c, "first_k_dense_replace", 3, 0));
  ASSIGN_OR_RETURN(m->moe_layer_freq, GetInt(c, "moe_layer_freq", 1, 1));
  ASSIGN_OR_RETURN(m->n_group, GetInt(c, "n_group", glm ? 1 : 8, 1));
  ASSIGN_OR_RETURN(m->topk_group, GetInt(c, "topk_group", glm ? 1 : 4, 1));
  ASSIGN_OR_RETURN(m->routed_scaling_factor, GetDouble(c, "routed_scaling_factor", 2.5));
  ASSIGN_OR_RETURN(m->norm_topk_prob, GetBool(c, "norm_topk_prob", true));
  if (auto qk = GetInt(c, "qk_head_dim", -1); qk.ok() && *qk >= 0 && *qk != m->qk_head_dim()) {
    return Status::InvalidArgument("config.json: qk_head_dim " + std::to_string(*qk) +
                                   " != qk_nope_head_dim + qk_rope_head_dim");
  }
  RETURN_IF_ERROR(ParseRouting(c, m));
  RETURN_IF_ERROR(ParseRope(c, glm, m->max_position_embeddings, &m->rope));
  if (glm) RETURN_IF_ERROR(ParseIndexer(c, m->num_hidden_layers, &m->indexer));
  return Status::Ok();
}

Status Positive(std::string_view field, int64_t v) {
  if (v > 0) return Status::Ok();
  return Status::InvalidArgument("config.json: " + std::string(field) + " must be > 0 (got " +
                                 std::to_string(v) + ")");
}

}  // namespace

std::string_view ArchitectureName(Architecture a) {
  return a == Architecture::kDeepseekV3 ? "deepseek_v3" : "glm_moe_dsa";
}

double RopeConfig::AttentionFactor() const {
  if (!yarn) return 1.0;
  if (attention_factor.has_value()) return *attention_factor;
  if (mscale != 0.0 && mscale_all_dim != 0.0) {
    return YarnMscale(factor, mscale) / YarnMscale(factor, mscale_all_dim);
  }
  return YarnMscale(factor, 1.0);
}

double RopeConfig::SoftmaxScaleMultiplier() const {
  if (!yarn || mscale_all_dim == 0.0) return 1.0;
  const double m = YarnMscale(factor, mscale_all_dim);
  return m * m;
}

bool ModelConfig::IsMoeLayer(int64_t layer) const {
  return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

int64_t ModelConfig::NumMoeLayers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < num_hidden_layers; ++l) n += IsMoeLayer(l) ? 1 : 0;
  return n;
}

bool ModelConfig::HasIndexerWeights(int64_t layer) const {
  if (!has_indexer() || layer < 0 || layer >= num_hidden_layers) return false;
  return static_cast<size_t>(layer) >= indexer.full_layers.size() || indexer.full_layers[layer];
}

double ModelConfig::AttentionSoftmaxScale() const {
  return rope.SoftmaxScaleMultiplier() / std::sqrt(static_cast<double>(qk_head_dim()));
}

Status ValidateModelConfig(const ModelConfig& m) {
  RETURN_IF_ERROR(Positive("hidden_size", m.hidden_size));
  RETURN_IF_ERROR(Positive("num_hidden_layers", m.num_hidden_layers));
  RETURN_IF_ERROR(Positive("vocab_size", m.vocab_size));
  RETURN_IF_ERROR(Positive("num_attention_heads", m.num_attention_heads));
  RETURN_IF_ERROR(Positive("kv_lora_rank", m.kv_lora_rank));
  RETURN_IF_ERROR(Positive("qk_rope_head_dim", m.qk_rope_head_dim));
  RETURN_IF_ERROR(Positive("qk_nope_head_dim", m.qk_nope_head_dim));
  RETURN_IF_ERROR(Positive("v_head_dim", m.v_head_dim));
  RETURN_IF_ERROR(Positive("intermediate_size", m.intermediate_size));
  RETURN_IF_ERROR(Positive("moe_intermediate_size", m.moe_intermediate_size));
  RETURN_IF_ERROR(Positive("n_routed_experts", m.n_routed_experts));
  RETURN_IF_ERROR(Positive("num_experts_per_tok", m.num_experts_per_tok));
  RETURN_IF_ERROR(Positive("n_group", m.n_group));
  RETURN_IF_ERROR(Positive("topk_group", m.topk_group));
  RETURN_IF_ERROR(Positive("moe_layer_freq", m.moe_layer_freq));
  const auto bad = [](std::string msg) { return Status::InvalidArgument("config.json: " + msg); };
  if (m.q_lora_rank < 0) return bad("q_lora_rank must be > 0 or null");
  if (m.qk_rope_head_dim % 2 != 0) return bad("qk_rope_head_dim must be even");
  if (m.n_shared_experts < 0) return bad("n_shared_experts must be >= 0");
  if (m.num_experts_per_tok > m.n_routed_experts) {
    return bad("num_experts_per_tok (" + std::to_string(m.num_experts_per_tok) + ") > n_routed_experts (" +
               std::to_string(m.n_routed_experts) + ")");
  }
  if (m.topk_group > m.n_group) {
    return bad("topk_group (" + std::to_string(m.topk_group) + ") > n_group (" + std::to_string(m.n_group) +
               ")");
  }
  if (m.n_routed_experts % m.n_group != 0) {
    return bad("n_routed_experts (" + std::to_string(m.n_routed_experts) +
               ") is not a multiple of n_group (" + std::to_string(m.n_group) + ")");
  }
  if (m.topk_method == TopkMethod::kNoAuxTc && m.n_group > 1 && m.n_routed_experts / m.n_group < 2) {
    return bad("noaux_tc needs at least 2 experts per group (n_routed_experts / n_group)");
  }
  if (m.first_k_dense_replace < 0 || m.first_k_dense_replace > m.num_hidden_layers) {
    return bad("first_k_dense_replace (" + std::to_string(m.first_k_dense_replace) +
               ") must be in [0, num_hidden_layers = " + std::to_string(m.num_hidden_layers) + "]");
  }
  if (!(m.rms_norm_eps > 0)) return bad("rms_norm_eps must be > 0");
  if (!(m.routed_scaling_factor > 0)) return bad("routed_scaling_factor must be > 0");
  if (!(m.rope.theta > 0)) return bad("rope_theta must be > 0");
  if (m.rope.yarn) {
    if (!(m.rope.factor >= 1.0)) return bad("rope_scaling.factor must be >= 1");
    if (m.rope.original_max_position_embeddings <= 0) {
      return bad("rope_scaling.original_max_position_embeddings must be > 0");
    }
  }
  if (m.has_indexer()) {
    RETURN_IF_ERROR(Positive("index_n_heads", m.indexer.n_heads));
    RETURN_IF_ERROR(Positive("index_head_dim", m.indexer.head_dim));
    RETURN_IF_ERROR(Positive("index_topk", m.indexer.topk));
    if (m.indexer.head_dim < m.qk_rope_head_dim) return bad("index_head_dim must be >= qk_rope_head_dim");
    if (!m.has_q_lora()) return bad("glm_moe_dsa needs q_lora_rank (the indexer reads the q latent)");
    if (static_cast<int64_t>(m.indexer.full_layers.size()) != m.num_hidden_layers) {
      return bad("indexer_types must have num_hidden_layers entries");
    }
    if (!m.indexer.full_layers.empty() && !m.indexer.full_layers[0]) {
      return bad("indexer_types[0] must be \"full\" (a shared layer reuses an earlier full layer)");
    }
  }
  return Status::Ok();
}

StatusOr<ModelConfig> ParseModelConfig(std::string_view config_json) {
  ASSIGN_OR_RETURN(json root, io::ParseStrictJson(config_json));
  if (!root.is_object()) return Status::DataLoss("config.json: not a JSON object");
  ModelConfig m;
  ASSIGN_OR_RETURN(const json* text, TextConfig(root, &m.model_type, &m.tensor_prefix));
  ASSIGN_OR_RETURN(m.architecture, ArchitectureOf(m.model_type));
  RETURN_IF_ERROR(ParseFields(*text, &m));
  // Multimodal wrappers keep quantization_config at the top level.
  const json& qroot = text->contains("quantization_config") ? *text : root;
  RETURN_IF_ERROR(ParseQuantization(qroot, &m.quantization));
  RETURN_IF_ERROR(ValidateModelConfig(m));
  return m;
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::NotFound(path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Internal(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<ModelConfig> config = ParseModelConfig(text.str());
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

}  // namespace tandem::engine::model
