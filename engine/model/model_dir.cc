#include "engine/model/model_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/io/strict_json.h"
#include "engine/text/chat_template.h"

namespace tandem::engine::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Special tokens each family's chat template (engine/text/*_chat_template.cc) writes.
constexpr std::string_view kKimiTemplateTokens[] = {"<|im_system|>",       "<|im_user|>",
                                                    "<|im_assistant|>",    "<|im_middle|>",
                                                    "<|im_end|>",          "<|tool_calls_section_begin|>",
                                                    "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                                                    "<|tool_call_end|>",   "<|tool_calls_section_end|>"};
constexpr std::string_view kGlmTemplateTokens[] = {"[gMASK]",  "<sop>",         "<|system|>",
                                                   "<|user|>", "<|assistant|>", "<|observation|>"};
// Tokens after which the model's turn is over, as the families' generation configs list them.
constexpr std::string_view kKimiEndOfTurn[] = {"<|im_end|>"};
constexpr std::string_view kGlmEndOfTurn[] = {"<|user|>", "<|observation|>", "<|endoftext|>"};

// The JSON of `dir`/`name`; nullopt when the file does not exist.
StatusOr<std::optional<json>> ReadJsonFile(const fs::path& dir, const std::string& name) {
  const fs::path path = dir / name;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::optional<json>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Internal(path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<json> parsed = io::ParseStrictJson(text.str());
  if (!parsed.ok()) return parsed.status().WithContext(path.string());
  return std::optional<json>(*std::move(parsed));
}

// `field` of `root` (or of root.text_config) as a list of ids: an integer, a list of integers, or
// absent / null (empty list).
StatusOr<std::vector<int32_t>> IdList(const std::optional<json>& root, const char* field,
                                      const std::string& file) {
  std::vector<int32_t> ids;
  if (!root || !root->is_object()) return ids;
  const json* value = nullptr;
  if (root->contains(field)) {
    value = &(*root)[field];
  } else if (root->contains("text_config") && (*root)["text_config"].is_object() &&
             (*root)["text_config"].contains(field)) {
    value = &(*root)["text_config"][field];
  }
  if (value == nullptr || value->is_null()) return ids;
  const json list = value->is_array() ? *value : json::array({*value});
  for (const json& v : list) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return Status::InvalidArgument(file + ": " + field +
                                     " must be a non-negative integer or a list of them");
    }
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

// tokenizer_config.json's bos_token / eos_token: a string, {"content": string}, or absent.
std::optional<std::string> TokenName(const std::optional<json>& root, const char* field) {
  if (!root || !root->is_object() || !root->contains(field)) return std::nullopt;
  const json& v = (*root)[field];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

// Checks that the configs agree on one role (bos or eos) and returns the ids, the named token's
// first. `config_ids` come from config.json; `name` from tokenizer_config.json.
StatusOr<std::vector<int32_t>> Reconcile(const char* role, std::vector<int32_t> config_ids,
                                         const std::optional<std::string>& name,
                                         const text::Tokenizer& tokenizer) {
  for (int32_t id : config_ids) {
    if (!tokenizer.TokenBytes(id)) {
      return Status::InvalidArgument("config.json " + std::string(role) + "_token_id " + std::to_string(id) +
                                     " is not a token of the tokenizer (" +
                                     std::to_string(tokenizer.vocab_size()) + " ids)");
    }
  }
  if (!name) return config_ids;
  std::optional<int32_t> named = tokenizer.AddedTokenId(*name);
  if (!named) {
    return Status::InvalidArgument("tokenizer_config.json " + std::string(role) + "_token '" + *name +
                                   "' is not a special token of the tokenizer");
  }
  if (!config_ids.empty() && std::find(config_ids.begin(), config_ids.end(), *named) == config_ids.end()) {
    return Status::InvalidArgument("tokenizer_config.json " + std::string(role) + "_token '" + *name +
                                   "' is id " + std::to_string(*named) + ", but config.json " + role +
                                   "_token_id is " + std::to_string(config_ids.front()));
  }
  config_ids.insert(config_ids.begin(), *named);
  return config_ids;
}

StatusOr<std::unique_ptr<text::Tokenizer>> ReadTokenizer(const fs::path& dir, std::string* path) {
  std::error_code ec;
  for (const char* name : {"tiktoken.model", "tokenizer.json"}) {
    if (!fs::is_regular_file(dir / name, ec)) continue;
    *path = (dir / name).string();
    ASSIGN_OR_RETURN(text::Tokenizer tokenizer, text::Tokenizer::LoadFile(*path));
    return std::make_unique<text::Tokenizer>(std::move(tokenizer));
  }
  return Status::NotFound(dir.string() + ": no tokenizer (expected tiktoken.model or tokenizer.json)");
}

}  // namespace

StatusOr<ModelTokens> LoadModelTokens(const std::string& dir, const ModelConfig& config) {
  ModelTokens out;
  ASSIGN_OR_RETURN(out.tokenizer, ReadTokenizer(dir, &out.tokenizer_path));
  const text::Tokenizer& tok = *out.tokenizer;
  const std::string where = out.tokenizer_path;
  if (tok.vocab_size() > config.vocab_size) {
    return Status::InvalidArgument(where + ": the tokenizer has ids up to " +
                                   std::to_string(tok.vocab_size() - 1) + ", but config.json vocab_size is " +
                                   std::to_string(config.vocab_size));
  }
  const bool glm = config.architecture == Architecture::kGlmMoeDsa;
  out.chat_family = glm ? text::ChatFamily::kGlm : text::ChatFamily::kKimiK2;
  using Names = std::span<const std::string_view>;
  const Names needed = glm ? Names(kGlmTemplateTokens) : Names(kKimiTemplateTokens);
  for (std::string_view token : needed) {
    if (!tok.AddedTokenId(token)) {
      return Status::InvalidArgument(where + ": no special token '" + std::string(token) + "', which the " +
                                     std::string(text::ChatFamilyName(out.chat_family)) +
                                     " chat template writes");
    }
  }

  ASSIGN_OR_RETURN(std::optional<json> config_json, ReadJsonFile(dir, "config.json"));
  ASSIGN_OR_RETURN(std::optional<json> generation, ReadJsonFile(dir, "generation_config.json"));
  ASSIGN_OR_RETURN(std::optional<json> tokenizer_config, ReadJsonFile(dir, "tokenizer_config.json"));
  ASSIGN_OR_RETURN(std::vector<int32_t> config_bos, IdList(config_json, "bos_token_id", "config.json"));
  ASSIGN_OR_RETURN(std::vector<int32_t> config_eos, IdList(config_json, "eos_token_id", "config.json"));
  ASSIGN_OR_RETURN(std::vector<int32_t> generation_eos,
                   IdList(generation, "eos_token_id", "generation_config.json"));
  ASSIGN_OR_RETURN(std::vector<int32_t> bos,
                   Reconcile("bos", config_bos, TokenName(tokenizer_config, "bos_token"), tok));
  ASSIGN_OR_RETURN(std::vector<int32_t> eos,
                   Reconcile("eos", config_eos, TokenName(tokenizer_config, "eos_token"), tok));
  for (int32_t id : generation_eos) {
    if (!tok.TokenBytes(id)) {
      return Status::InvalidArgument("generation_config.json eos_token_id " + std::to_string(id) +
                                     " is not a token of the tokenizer");
    }
    eos.push_back(id);
  }
  for (std::string_view token : glm ? Names(kGlmEndOfTurn) : Names(kKimiEndOfTurn)) {
    if (std::optional<int32_t> id = tok.AddedTokenId(token)) eos.push_back(*id);
  }
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  out.eos_token_ids = std::move(eos);
  if (!bos.empty()) out.bos_token_id = bos.front();
  return out;
}

StatusOr<std::unique_ptr<ModelDir>> LoadModelDir(const std::string& dir, const LoadOptions& options) {
  auto out = std::make_unique<ModelDir>();
  out->path = dir;
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  ASSIGN_OR_RETURN(out->tokens, LoadModelTokens(dir, config));
  ASSIGN_OR_RETURN(out->weights, LoadModel(dir, options));
  return out;
}

}  // namespace tandem::engine::model
