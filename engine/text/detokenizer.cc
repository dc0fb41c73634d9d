#include "engine/text/detokenizer.h"

#include <algorithm>

#include "engine/text/unicode.h"

namespace tandem::engine::text {

std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t p = 0; p < bytes.size();) {
    const DecodedChar c = DecodeUtf8(bytes, p);
    if (c.code_point != kInvalidCodePoint) {
      out.append(bytes.substr(p, c.length));
      p += c.length;
      continue;
    }
    // One U+FFFD per maximal subpart: the longest start of a well-formed sequence, else one byte.
    const size_t bad = std::max<size_t>(1, Utf8SequenceStart(bytes.substr(p)));
    AppendUtf8(0xFFFD, &out);
    p += bad;
  }
  return out;
}

StatusOr<std::string> Detokenizer::Add(int32_t id) {
  const std::optional<std::string_view> bytes = tokenizer_->TokenBytes(id);
  if (!bytes) return Status::InvalidArgument("token id " + std::to_string(id) + " is not in the vocabulary");
  if (skip_special_ && tokenizer_->IsSpecial(id)) return std::string();
  pending_.append(*bytes);
  const size_t complete = CompleteUtf8Prefix(pending_);
  std::string out = ToValidUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string Detokenizer::Flush() {
  std::string out = ToValidUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tandem::engine::text
