// Tokenizer::FromHfJson: the byte-level BPE subset of Hugging Face's tokenizer.json.

#include <string>

#include <nlohmann/json.hpp>

#include "engine/io/strict_json.h"
#include "engine/text/byte_level.h"
#include "engine/text/tokenizer.h"

namespace tandem::engine::text {
namespace {

using nlohmann::json;

// Non-throwing accessors: a field of the wrong type reads as absent.
const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}
std::string Str(const json& obj, const char* key) {
  const json* j = Find(obj, key);
  return j != nullptr && j->is_string() ? j->get<std::string>() : std::string();
}
const json& FieldOrNull(const json& obj, const char* key) {
  static const json kNull;
  const json* j = Find(obj, key);
  return j != nullptr ? *j : kNull;
}

bool IsNullOrEmpty(const json& j) {
  return j.is_null() || (j.is_string() && j.get_ref<const std::string&>().empty());
}

// True when `key` is absent, null or the boolean `want`.
bool FlagIs(const json& obj, const char* key, bool want) {
  const json* j = Find(obj, key);
  return j == nullptr || (j->is_boolean() && j->get<bool>() == want);
}

// A ByteLevel pre-tokenizer's options; `use_regex` reports whether it splits with GPT-2's pattern.
Status CheckByteLevel(const json& p, bool* use_regex) {
  if (!FlagIs(p, "add_prefix_space", false)) {
    return Status::Unimplemented("ByteLevel pre-tokenizer with add_prefix_space=true");
  }
  *use_regex = FlagIs(p, "use_regex", true);
  return Status::Ok();
}

StatusOr<Pretokenizer> ParsePreTokenizer(const json& p) {
  if (!p.is_object()) return Status::Unimplemented("a tokenizer.json without a ByteLevel pre_tokenizer");
  const std::string type = Str(p, "type");
  bool use_regex = false;
  if (type == "ByteLevel") {
    RETURN_IF_ERROR(CheckByteLevel(p, &use_regex));
    if (!use_regex) return Status::Unimplemented("ByteLevel pre-tokenizer without a splitting regex");
    return Pretokenizer::Gpt2();
  }
  const json* steps = type == "Sequence" ? Find(p, "pretokenizers") : nullptr;
  if (steps == nullptr || !steps->is_array() || steps->size() != 2 || !(*steps)[0].is_object() ||
      !(*steps)[1].is_object() || Str((*steps)[0], "type") != "Split" ||
      Str((*steps)[1], "type") != "ByteLevel") {
    return Status::Unimplemented("pre_tokenizer '" + p.dump().substr(0, 200) +
                                 "' (supported: ByteLevel, or Sequence[Split(Regex), ByteLevel])");
  }
  const json& split = (*steps)[0];
  RETURN_IF_ERROR(CheckByteLevel((*steps)[1], &use_regex));
  if (use_regex)
    return Status::Unimplemented("Split followed by a ByteLevel pre-tokenizer with use_regex=true");
  if (Str(split, "behavior") != "Isolated" || !FlagIs(split, "invert", false)) {
    return Status::Unimplemented("Split pre-tokenizer other than behavior=Isolated, invert=false");
  }
  const json* pattern = Find(split, "pattern");
  const json* regex = pattern != nullptr ? Find(*pattern, "Regex") : nullptr;
  if (regex == nullptr || !regex->is_string())
    return Status::Unimplemented("Split pre-tokenizer without a Regex pattern");
  return Pretokenizer::FromPattern(regex->get<std::string>());
}

Status CheckModelOptions(const json& model) {
  if (Find(model, "type") != nullptr && Str(model, "type") != "BPE") {
    return Status::Unimplemented("model type '" + Str(model, "type") + "' (only BPE)");
  }
  if (Find(model, "dropout") != nullptr) return Status::Unimplemented("BPE dropout");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!IsNullOrEmpty(FieldOrNull(model, key))) return Status::Unimplemented(std::string("BPE ") + key);
  }
  if (!FlagIs(model, "byte_fallback", false)) return Status::Unimplemented("BPE byte_fallback");
  return Status::Ok();
}

// merges: ["a b", ...] or [["a", "b"], ...], as byte-level token strings.
StatusOr<std::vector<std::pair<int32_t, int32_t>>> ParseMerges(const json& merges, const json& vocab) {
  if (merges.is_null()) return std::vector<std::pair<int32_t, int32_t>>();
  if (!merges.is_array()) return Status::DataLoss("model.merges is not an array");
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return Status::DataLoss("merge " + std::to_string(i) + " '" + s + "' is not two tokens");
      }
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return Status::DataLoss("merge " + std::to_string(i) + " is neither \"a b\" nor [a, b]");
    }
    auto ia = vocab.find(a), ib = vocab.find(b);
    if (ia == vocab.end() || ib == vocab.end()) {
      return Status::DataLoss("merge " + std::to_string(i) + " names a token not in the vocabulary");
    }
    out.emplace_back(ia->get<int32_t>(), ib->get<int32_t>());
  }
  return out;
}

StatusOr<std::vector<AddedToken>> ParseAddedTokens(const json& j) {
  std::vector<AddedToken> out;
  if (j.is_null()) return out;
  if (!j.is_array()) return Status::DataLoss("added_tokens is not an array");
  for (const json& t : j) {
    const json& id = FieldOrNull(t, "id");
    const json& content = FieldOrNull(t, "content");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24) ||
        !content.is_string()) {
      return Status::DataLoss("an added token lacks an id in 0..2^24 or a string content");
    }
    AddedToken a{content.get<std::string>(), id.get<int32_t>(), !FlagIs(t, "special", false)};
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      if (!FlagIs(t, flag, false))
        return Status::Unimplemented("added token '" + a.content + "' with " + flag);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

StatusOr<Tokenizer> Tokenizer::FromHfJson(std::string_view json_text) {
  ASSIGN_OR_RETURN(json root, io::ParseStrictJson(json_text));
  const json& model = FieldOrNull(root, "model");
  if (!model.is_object()) return Status::DataLoss("tokenizer.json has no model object");
  if (const json* normalizer = Find(root, "normalizer")) {
    return Status::Unimplemented("normalizer '" + Str(*normalizer, "type") +
                                 "' (tokenizers with a normalizer are not supported)");
  }
  const json& decoder = FieldOrNull(root, "decoder");
  if (!decoder.is_null() && Str(decoder, "type") != "ByteLevel") {
    return Status::Unimplemented("decoder '" + Str(decoder, "type") + "' (only ByteLevel)");
  }
  ASSIGN_OR_RETURN(Pretokenizer pretokenizer, ParsePreTokenizer(FieldOrNull(root, "pre_tokenizer")));
  RETURN_IF_ERROR(CheckModelOptions(model));
  const json& vocab = FieldOrNull(model, "vocab");
  if (!vocab.is_object()) return Status::DataLoss("model.vocab is not an object");
  std::vector<std::string> token_bytes;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const auto max_id = static_cast<int64_t>(vocab.size()) + kMaxIdGap;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() >= max_id) {
      return Status::DataLoss("vocab entry '" + it.key() + "' has no id in 0.." + std::to_string(max_id - 1) +
                              " (vocabulary size + " + std::to_string(kMaxIdGap) + ")");
    }
    const auto id = it->get<size_t>();
    if (id >= token_bytes.size()) token_bytes.resize(id + 1);
    if (!token_bytes[id].empty())
      return Status::DataLoss("vocab id " + std::to_string(id) + " is used twice");
    // Tokens outside the byte-level alphabet (added tokens listed in the vocabulary) keep their
    // UTF-8 text, as Hugging Face's ByteLevel decoder does.
    std::optional<std::string> bytes = ByteLevelToBytes(it.key());
    token_bytes[id] = bytes ? *std::move(bytes) : it.key();
    if (token_bytes[id].empty()) return Status::DataLoss("vocab has an empty token");
  }
  ASSIGN_OR_RETURN(auto merges, ParseMerges(FieldOrNull(model, "merges"), vocab));
  const bool ignore_merges = !FlagIs(model, "ignore_merges", false);
  ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::FromMerges(std::move(token_bytes), merges, ignore_merges));
  ASSIGN_OR_RETURN(std::vector<AddedToken> added, ParseAddedTokens(FieldOrNull(root, "added_tokens")));
  Tokenizer tokenizer(pretokenizer, std::move(bpe));
  RETURN_IF_ERROR(tokenizer.Finish(std::move(added)));
  return tokenizer;
}

}  // namespace tandem::engine::text
