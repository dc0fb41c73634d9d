#include "engine/model/config_fields.h"

#include <algorithm>
#include <cmath>

namespace tandem::engine::model {
namespace {

using nlohmann::json;

Status Missing(std::string_view key) {
  return Status::InvalidArgument("config.json: missing field '" + std::string(key) + "'");
}
Status WrongType(std::string_view key, std::string_view want, const json& v) {
  return Status::InvalidArgument("config.json: field '" + std::string(key) + "' must be " +
                                 std::string(want) + " (got " + v.dump() + ")");
}

// The value at `key`, or nullptr when absent or null.
const json* Find(const json& c, std::string_view key) {
  const auto it = c.find(key);
  return it == c.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

StatusOr<int64_t> GetInt(const json& c, std::string_view key, std::optional<int64_t> fallback,
                         std::optional<int64_t> null_value) {
  const auto it = c.find(key);
  if (it != c.end() && it->is_null() && null_value.has_value()) return *null_value;
  if (it == c.end() || it->is_null()) {
    if (!fallback.has_value()) return Missing(key);
    return *fallback;
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  return WrongType(key, "an integer", *it);
}

StatusOr<double> GetDouble(const json& c, std::string_view key, std::optional<double> fallback) {
  const json* v = Find(c, key);
  if (v == nullptr) {
    if (!fallback.has_value()) return Missing(key);
    return *fallback;
  }
  if (!v->is_number()) return WrongType(key, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d)) return WrongType(key, "a finite number", *v);
  return d;
}

StatusOr<bool> GetBool(const json& c, std::string_view key, std::optional<bool> fallback) {
  const json* v = Find(c, key);
  if (v == nullptr) {
    if (!fallback.has_value()) return Missing(key);
    return *fallback;
  }
  if (!v->is_boolean()) return WrongType(key, "true or false", *v);
  return v->get<bool>();
}

StatusOr<std::string> GetString(const json& c, std::string_view key, std::optional<std::string> fallback) {
  const json* v = Find(c, key);
  if (v == nullptr) {
    if (!fallback.has_value()) return Missing(key);
    return *fallback;
  }
  if (!v->is_string()) return WrongType(key, "a string", *v);
  return v->get<std::string>();
}

Status ParseRope(const json& c, bool glm, int64_t max_position_embeddings, RopeConfig* rope) {
  // transformers 5 writes rope_parameters {rope_type, rope_theta, ...}; older configs rope_theta at
  // the top level plus rope_scaling {type|rope_type, ...} or null.
  const json* params = Find(c, "rope_parameters");
  const char* where = "rope_parameters";
  if (params == nullptr) {
    params = Find(c, "rope_scaling");
    where = "rope_scaling";
  }
  if (params != nullptr && !params->is_object()) return WrongType(where, "an object or null", *params);
  const json empty = json::object();
  const json& p = params != nullptr ? *params : empty;
  ASSIGN_OR_RETURN(double top_theta, GetDouble(c, "rope_theta", 10000.0));
  ASSIGN_OR_RETURN(rope->theta, GetDouble(p, "rope_theta", top_theta));
  ASSIGN_OR_RETURN(std::string type_alias, GetString(p, "type", "default"));
  ASSIGN_OR_RETURN(std::string type, GetString(p, "rope_type", type_alias));
  if (type != "default" && type != "yarn") {
    return Status::InvalidArgument("config.json: " + std::string(where) + " type '" + type +
                                   "' is not supported (expected yarn, or none)");
  }
  rope->yarn = type == "yarn";
  if (rope->yarn) {
    ASSIGN_OR_RETURN(int64_t top_orig,
                     GetInt(c, "original_max_position_embeddings", max_position_embeddings));
    ASSIGN_OR_RETURN(rope->original_max_position_embeddings,
                     GetInt(p, "original_max_position_embeddings", top_orig));
    const double derived =
        rope->original_max_position_embeddings > 0
            ? static_cast<double>(max_position_embeddings) / rope->original_max_position_embeddings
            : 1.0;
    ASSIGN_OR_RETURN(rope->factor, GetDouble(p, "factor", derived));
    ASSIGN_OR_RETURN(rope->beta_fast, GetDouble(p, "beta_fast", 32.0));
    ASSIGN_OR_RETURN(rope->beta_slow, GetDouble(p, "beta_slow", 1.0));
    ASSIGN_OR_RETURN(rope->mscale, GetDouble(p, "mscale", 0.0));
    ASSIGN_OR_RETURN(rope->mscale_all_dim, GetDouble(p, "mscale_all_dim", 0.0));
    ASSIGN_OR_RETURN(rope->truncate, GetBool(p, "truncate", true));
    if (Find(p, "attention_factor") != nullptr) {
      ASSIGN_OR_RETURN(double f, GetDouble(p, "attention_factor", std::nullopt));
      rope->attention_factor = f;
    }
    // HF: `beta_fast or 32`, so a written 0 means the default.
    if (rope->beta_fast == 0) rope->beta_fast = 32.0;
    if (rope->beta_slow == 0) rope->beta_slow = 1.0;
  }
  ASSIGN_OR_RETURN(rope->interleave, GetBool(c, "rope_interleave", true));
  if (glm) rope->interleave = true;
  return Status::Ok();
}

Status ParseIndexer(const json& c, int64_t num_layers, DsaIndexerConfig* indexer) {
  ASSIGN_OR_RETURN(indexer->n_heads, GetInt(c, "index_n_heads", 32));
  ASSIGN_OR_RETURN(indexer->head_dim, GetInt(c, "index_head_dim", 128));
  ASSIGN_OR_RETURN(indexer->topk, GetInt(c, "index_topk", 2048));
  indexer->full_layers.clear();
  const auto mode = [](std::string_view s, bool* full) {
    if (s == "full" || s == "F")
      *full = true;
    else if (s == "shared" || s == "S")
      *full = false;
    else
      return false;
    return true;
  };
  const json* types = Find(c, "indexer_types");
  const char* field = "indexer_types";
  if (types == nullptr) {
    types = Find(c, "index_topk_pattern");
    field = "index_topk_pattern";
  }
  if (types != nullptr && types->is_string()) {
    for (char ch : types->get<std::string>()) {
      bool full = false;
      if (!mode(std::string_view(&ch, 1), &full)) return WrongType(field, "a string of F and S", *types);
      indexer->full_layers.push_back(full);
    }
  } else if (types != nullptr) {
    if (!types->is_array()) return WrongType(field, "a list of \"full\" / \"shared\"", *types);
    for (const json& t : *types) {
      bool full = false;
      if (!t.is_string() || !mode(t.get<std::string>(), &full)) {
        return WrongType(field, "a list of \"full\" / \"shared\"", *types);
      }
      indexer->full_layers.push_back(full);
    }
  } else {
    ASSIGN_OR_RETURN(int64_t freq, GetInt(c, "index_topk_freq", 1));
    ASSIGN_OR_RETURN(int64_t offset, GetInt(c, "index_skip_topk_offset", 2));
    freq = std::max<int64_t>(freq, 1);
    for (int64_t i = 0; i < num_layers; ++i) {
      indexer->full_layers.push_back(std::max<int64_t>(i - offset + 1, 0) % freq == 0);
    }
  }
  return Status::Ok();
}

}  // namespace tandem::engine::model
