#include <regex>
#include <string>
#include <unordered_map>

#include "engine/formats/quantization_json.h"
#include "engine/formats/weights.h"
#include "engine/model/config_fields.h"

namespace tandem::engine::model {
namespace {

using nlohmann::json;

Status Bad(const std::string& msg) {
  return Status::InvalidArgument("config.json: quantization_config: " + msg);
}

// compressed-tensors' rule: "re:<pattern>" matches from the start of the name (Python re.match);
// anything else names a module, here also as a dotted suffix ("lm_head" matches
// "language_model.lm_head").
bool Matches(const std::string& entry, std::string_view module) {
  if (entry.starts_with("re:")) {
    // Compiling a std::regex costs tens of microseconds; a checkpoint asks for ~70K modules.
    thread_local std::unordered_map<std::string, std::regex> compiled;
    auto it = compiled.find(entry);
    if (it == compiled.end()) {
      try {
        it = compiled.emplace(entry, std::regex(entry.substr(3))).first;
      } catch (const std::regex_error&) {
        return false;  // rejected at parse time; unreachable for parsed configs
      }
    }
    return std::regex_search(module.begin(), module.end(), it->second,
                             std::regex_constants::match_continuous);
  }
  return module == entry || (module.size() > entry.size() && module.ends_with(entry) &&
                             module[module.size() - entry.size() - 1] == '.');
}

bool AnyMatches(const std::vector<std::string>& entries, std::string_view module) {
  for (const std::string& e : entries) {
    if (Matches(e, module)) return true;
  }
  return false;
}

Status ReadNames(const json& q, std::string_view key, std::vector<std::string>* out) {
  const auto it = q.find(key);
  if (it == q.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return Bad(std::string(key) + " must be a list of strings");
  for (const json& e : *it) {
    if (!e.is_string()) return Bad(std::string(key) + " must be a list of strings");
    std::string s = e.get<std::string>();
    if (s.starts_with("re:")) {
      try {
        std::regex check(s.substr(3));
      } catch (const std::regex_error&) {
        return Bad(std::string(key) + ": invalid regex '" + s + "'");
      }
    }
    out->push_back(std::move(s));
  }
  return Status::Ok();
}

Status ParseFp8(const json& q, QuantizationConfig* out) {
  ASSIGN_OR_RETURN(std::string fmt, GetString(q, "fmt", "e4m3"));
  if (fmt != "e4m3") return Bad("fp8 fmt '" + fmt + "' is not supported (expected e4m3)");
  const auto block = q.find("weight_block_size");
  if (block != q.end() && *block != json::array({kFp8BlockSize, kFp8BlockSize})) {
    return Bad("fp8 weight_block_size " + block->dump() + " is not [128, 128]");
  }
  ASSIGN_OR_RETURN(std::string act, GetString(q, "activation_scheme", "dynamic"));
  if (act != "dynamic") return Bad("fp8 activation_scheme '" + act + "' is not supported (expected dynamic)");
  out->method = QuantizationConfig::Method::kFp8Block128;
  return ReadNames(q, "modules_to_not_convert", &out->excluded);
}

Status ParseCompressedTensors(const json& q, QuantizationConfig* out) {
  const auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty()) return Bad("config_groups missing");
  ASSIGN_OR_RETURN(std::string top_format, GetString(q, "format", "pack-quantized"));
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object()) return Bad("config_groups." + name + " must be an object");
    ASSIGN_OR_RETURN(std::string format, GetString(g, "format", top_format));
    const auto w = g.find("weights");
    if (format != "pack-quantized" || w == g.end() || !w->is_object()) {
      return Bad("config_groups." + name + ": only pack-quantized int4 weights are supported");
    }
    ASSIGN_OR_RETURN(int64_t bits, GetInt(*w, "num_bits", std::nullopt));
    ASSIGN_OR_RETURN(std::string type, GetString(*w, "type", "int"));
    ASSIGN_OR_RETURN(bool symmetric, GetBool(*w, "symmetric", true));
    ASSIGN_OR_RETURN(std::string strategy, GetString(*w, "strategy", std::nullopt));
    ASSIGN_OR_RETURN(int64_t group_size, GetInt(*w, "group_size", std::nullopt));
    if (bits != 4 || type != "int" || !symmetric || strategy != "group" || group_size != kInt4GroupSize) {
      return Bad("config_groups." + name +
                 ".weights must be num_bits 4, type int, symmetric, strategy group, group_size 32 (got " +
                 w->dump() + ")");
    }
    const auto act = g.find("input_activations");
    if (act != g.end() && !act->is_null())
      return Bad("config_groups." + name + ": activation quantization is not supported");
    RETURN_IF_ERROR(ReadNames(g, "targets", &out->targets));
  }
  out->method = QuantizationConfig::Method::kCompressedInt4;
  return ReadNames(q, "ignore", &out->excluded);
}

}  // namespace

Status ParseQuantization(const json& c, QuantizationConfig* q) {
  *q = QuantizationConfig{};
  const auto it = c.find("quantization_config");
  if (it == c.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return Bad("must be an object");
  ASSIGN_OR_RETURN(std::string method, GetString(*it, "quant_method", std::nullopt));
  if (method == "fp8") return ParseFp8(*it, q);
  if (method == "compressed-tensors") return ParseCompressedTensors(*it, q);
  return Bad("quant_method '" + method + "' is not supported (expected fp8 or compressed-tensors)");
}

WeightFormat QuantizationConfig::FormatFor(std::string_view module) const {
  switch (method) {
    case Method::kNone: return WeightFormat::kBf16;
    case Method::kFp8Block128:
      if (Matches("lm_head", module) || AnyMatches(excluded, module)) return WeightFormat::kBf16;
      return WeightFormat::kFp8Block128;
    case Method::kCompressedInt4: {
      bool targeted = false;
      for (const std::string& t : targets) targeted = targeted || t == "Linear" || Matches(t, module);
      if (!targeted || AnyMatches(excluded, module)) return WeightFormat::kBf16;
      return WeightFormat::kInt4Group32;
    }
  }
  return WeightFormat::kBf16;
}

json QuantizationToJson(const QuantizationConfig& q) {
  switch (q.method) {
    case QuantizationConfig::Method::kNone: return nullptr;
    case QuantizationConfig::Method::kFp8Block128: {
      json out = Fp8BlockQuantizationJson();
      if (!q.excluded.empty()) out["modules_to_not_convert"] = q.excluded;
      return out;
    }
    case QuantizationConfig::Method::kCompressedInt4:
      return Int4PackQuantizedJson(q.targets.empty() ? std::vector<std::string>{"Linear"} : q.targets,
                                   q.excluded);
  }
  return nullptr;
}

}  // namespace tandem::engine::model
