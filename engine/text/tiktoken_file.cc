// Tokenizer::FromTiktoken and Tokenizer::LoadFile.

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "engine/io/strict_json.h"
#include "engine/text/tokenizer.h"

namespace tandem::engine::text {
namespace {

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::DataLoss("cannot read " + path);
  return buffer.str();
}

// Kimi's tokenizer_config.json: {"added_tokens_decoder": {"163584": {"content": "[BOS]", "special": true},
// ...}}
StatusOr<std::vector<AddedToken>> AddedTokensFromConfig(std::string_view text) {
  ASSIGN_OR_RETURN(nlohmann::json root, io::ParseStrictJson(text));
  std::vector<AddedToken> out;
  if (!root.is_object() || !root.contains("added_tokens_decoder")) return out;
  const nlohmann::json& decoder = root["added_tokens_decoder"];
  if (!decoder.is_object()) return Status::DataLoss("added_tokens_decoder is not an object");
  for (auto it = decoder.begin(); it != decoder.end(); ++it) {
    const std::string& key = it.key();
    if (key.empty() || key.size() > 8 || key.find_first_not_of("0123456789") != std::string::npos) {
      return Status::DataLoss("added_tokens_decoder key '" + key + "' is not an id");
    }
    auto content = it->is_object() ? it->find("content") : it->end();
    if (!it->is_object() || content == it->end() || !content->is_string()) {
      return Status::DataLoss("added token " + key + " has no string content");
    }
    auto special = it->find("special");
    out.push_back({content->get<std::string>(), std::stoi(key),
                   special == it->end() || !special->is_boolean() || special->get<bool>()});
  }
  return out;
}

}  // namespace

StatusOr<Tokenizer> Tokenizer::FromTiktoken(std::string_view text, std::string_view pattern,
                                            std::vector<AddedToken> special_tokens) {
  ASSIGN_OR_RETURN(Pretokenizer pretokenizer, Pretokenizer::FromPattern(pattern));
  std::vector<std::string> token_bytes;
  const auto max_rank = static_cast<size_t>(std::count(text.begin(), text.end(), '\n') + 1 + kMaxIdGap);
  size_t line_number = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = "rank file line " + std::to_string(line_number);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) return Status::DataLoss(where + ": expected '<base64> <rank>'");
    std::string bytes;
    if (!Base64Decode(line.substr(0, space), &bytes, Base64Mode::kStrict)) {
      return Status::DataLoss(where + ": bad base64");
    }
    const std::string_view rank_text = line.substr(space + 1);
    if (rank_text.empty() || rank_text.size() > 8 ||
        rank_text.find_first_not_of("0123456789") != std::string_view::npos) {
      return Status::DataLoss(where + ": rank '" + std::string(rank_text) + "' is not an integer below 10^8");
    }
    const auto rank = static_cast<size_t>(std::stoul(std::string(rank_text)));
    if (rank >= max_rank)
      return Status::DataLoss(where + ": rank " + std::string(rank_text) + " leaves too large a gap");
    if (rank >= token_bytes.size()) token_bytes.resize(rank + 1);
    if (!token_bytes[rank].empty())
      return Status::DataLoss(where + ": rank " + std::to_string(rank) + " is used twice");
    token_bytes[rank] = std::move(bytes);
  }
  for (const AddedToken& t : special_tokens) {
    if (t.id >= 0 && static_cast<size_t>(t.id) < token_bytes.size() && !token_bytes[t.id].empty()) {
      return Status::DataLoss("special token '" + t.content + "' has id " + std::to_string(t.id) +
                              ", a rank");
    }
  }
  ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::FromRanks(std::move(token_bytes)));
  Tokenizer tokenizer(pretokenizer, std::move(bpe));
  RETURN_IF_ERROR(tokenizer.Finish(std::move(special_tokens)));
  return tokenizer;
}

StatusOr<Tokenizer> Tokenizer::LoadFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    StatusOr<Tokenizer> t = FromHfJson(text);
    if (!t.ok()) return t.status().WithContext(path);
    return t;
  }
  std::vector<AddedToken> specials;
  const size_t slash = path.find_last_of('/');
  const std::string config =
      (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "tokenizer_config.json";
  if (StatusOr<std::string> config_text = ReadFile(config); config_text.ok()) {
    StatusOr<std::vector<AddedToken>> added = AddedTokensFromConfig(*config_text);
    if (!added.ok()) return added.status().WithContext(config);
    specials = *std::move(added);
  }
  StatusOr<Tokenizer> t = FromTiktoken(text, Pretokenizer::KimiPattern(), std::move(specials));
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

}  // namespace tandem::engine::text
