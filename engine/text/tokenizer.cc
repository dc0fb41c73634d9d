#include "engine/text/tokenizer.h"

#include <algorithm>
#include <cstring>

namespace tandem::engine::text {
namespace {
constexpr uint8_t kNoToken = 0, kBpeToken = 1, kAddedToken = 2, kSpecialToken = 3;
}  // namespace

Status Tokenizer::Finish(std::vector<AddedToken> added) {
  id_bytes_ = bpe_.token_bytes();
  id_kind_.assign(id_bytes_.size(), kNoToken);
  for (size_t id = 0; id < id_bytes_.size(); ++id) {
    if (!id_bytes_[id].empty()) id_kind_[id] = kBpeToken;
  }
  for (const AddedToken& t : added) {
    if (t.content.empty()) return Status::DataLoss("added token " + std::to_string(t.id) + " is empty");
    if (t.id < 0 || t.id >= static_cast<int64_t>(bpe_.token_bytes().size() + added.size()) + kMaxIdGap) {
      return Status::DataLoss("added token '" + t.content + "' has id " + std::to_string(t.id) +
                              ", outside 0..vocabulary size + " + std::to_string(kMaxIdGap));
    }
    if (static_cast<size_t>(t.id) >= id_bytes_.size()) {
      id_bytes_.resize(t.id + 1);
      id_kind_.resize(t.id + 1, kNoToken);
    }
    // Hugging Face lists added tokens in the vocabulary too; the same text under the same id is fine.
    if (id_kind_[t.id] >= kAddedToken || (id_kind_[t.id] == kBpeToken && id_bytes_[t.id] != t.content)) {
      return Status::DataLoss("added token '" + t.content + "' reuses id " + std::to_string(t.id));
    }
    id_bytes_[t.id] = t.content;
    id_kind_[t.id] = t.special ? kSpecialToken : kAddedToken;
  }
  added_ = std::move(added);
  std::sort(added_.begin(), added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() != b.content.size() ? a.content.size() > b.content.size() : a.content < b.content;
  });
  added_by_first_byte_.assign(256, {});
  for (size_t i = 0; i < added_.size(); ++i) {
    if (i > 0 && added_[i].content == added_[i - 1].content) {
      return Status::DataLoss("added token '" + added_[i].content + "' is listed twice");
    }
    added_by_first_byte_[static_cast<unsigned char>(added_[i].content[0])].push_back(static_cast<int32_t>(i));
  }
  return Status::Ok();
}

const AddedToken* Tokenizer::MatchAdded(std::string_view text, size_t pos) const {
  for (int32_t i : added_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const std::string& c = added_[i].content;
    if (text.size() - pos >= c.size() && std::memcmp(text.data() + pos, c.data(), c.size()) == 0) {
      return &added_[i];
    }
  }
  return nullptr;
}

void Tokenizer::EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const {
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  pretokenizer_.Split(text, &pieces);
  for (std::string_view piece : pieces) bpe_.Encode(piece, ids);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  if (!parse_special || added_.empty()) {
    EncodeOrdinary(text, &ids);
    return ids;
  }
  size_t start = 0;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (added_by_first_byte_[static_cast<unsigned char>(text[pos])].empty()) continue;
    const AddedToken* t = MatchAdded(text, pos);
    if (t == nullptr) continue;
    if (pos > start) EncodeOrdinary(text.substr(start, pos - start), &ids);
    ids.push_back(t->id);
    pos += t->content.size() - 1;
    start = pos + 1;
  }
  if (start < text.size()) EncodeOrdinary(text.substr(start), &ids);
  return ids;
}

std::optional<std::string_view> Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || id_kind_[id] == kNoToken) return std::nullopt;
  return std::string_view(id_bytes_[id]);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size() && id_kind_[id] == kSpecialToken;
}

std::optional<int32_t> Tokenizer::AddedTokenId(std::string_view content) const {
  for (const AddedToken& t : added_) {
    if (t.content == content) return t.id;
  }
  return std::nullopt;
}

StatusOr<std::string> Tokenizer::DecodeBytes(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    const std::optional<std::string_view> bytes = TokenBytes(id);
    if (!bytes)
      return Status::InvalidArgument("token id " + std::to_string(id) + " is not in the vocabulary");
    if (skip_special && IsSpecial(id)) continue;
    out.append(*bytes);
  }
  return out;
}

}  // namespace tandem::engine::text
