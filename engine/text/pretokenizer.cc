#include "engine/text/pretokenizer.h"

#include "engine/text/unicode.h"

namespace tandem::engine::text {
namespace {

const std::string kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const std::string kTail = R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})" + kTail;
const std::string kQwenPattern = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})" + kTail;
const std::string kKimiPattern =
    R"([\p{Han}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3})" +
    kTail;

constexpr uint16_t kLetterOrNumber = kLetter | kNumber;
constexpr uint16_t kUpperish = kUpper | kTitle | kModifier | kOtherLetter | kMark;
constexpr uint16_t kLowerish = kLower | kModifier | kOtherLetter | kMark;

struct Char {
  uint32_t cp;
  int len;
  uint16_t flags;
};

inline Char At(std::string_view t, size_t p) {
  const auto b = static_cast<unsigned char>(t[p]);
  if (b < 0x80) return {b, 1, UnicodeFlags(b)};
  const DecodedChar d = DecodeUtf8(t, p);
  return {d.code_point, d.length, UnicodeFlags(d.code_point)};
}

bool IsNewline(const Char& c) { return c.cp == '\r' || c.cp == '\n'; }
// [^\s\p{L}\p{N}]
bool IsOther(const Char& c) { return (c.flags & (kLetterOrNumber | kWhiteSpace)) == 0; }

// End of the run of characters from `p` whose flags intersect `any` and avoid `none`, at most
// `max_chars` of them (0: unbounded).
size_t RunEnd(std::string_view t, size_t p, uint16_t any, uint16_t none = 0, int max_chars = 0) {
  int count = 0;
  while (p < t.size() && (max_chars == 0 || count < max_chars)) {
    const Char c = At(t, p);
    if (!(c.flags & any) || (c.flags & none)) break;
    p += c.len;
    ++count;
  }
  return p;
}

// 's|'t|'re|'ve|'m|'ll|'d at p: the match length, or 0. Case-insensitive matching follows Unicode
// simple case folding, under which U+017F LATIN SMALL LETTER LONG S matches 's'.
size_t Contraction(std::string_view t, size_t p, bool fold_case) {
  if (p >= t.size() || t[p] != '\'') return 0;
  auto lower = [&](size_t i) -> int {
    if (i >= t.size()) return 0;
    const char c = t[i];
    if (!fold_case) return c;
    if (c >= 'A' && c <= 'Z') return c - 'A' + 'a';
    return c;
  };
  const int c1 = lower(p + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (fold_case && t.substr(p + 1, 2) == "\xC5\xBF") return 3;  // U+017F
  const int c2 = lower(p + 2);
  if ((c1 == 'r' || c1 == 'v') && c2 == 'e') return 3;
  if (c1 == 'l' && c2 == 'l') return 3;
  return 0;
}

// The whitespace alternatives shared by all families: \s*[\r\n]+ (when `newline_rule`),
// \s+(?!\S), \s+. REQUIRES: the character at p is whitespace.
size_t MatchSpaces(std::string_view t, size_t p, bool newline_rule) {
  size_t end = p, last_start = p, newline_end = 0;
  int count = 0;
  while (end < t.size()) {
    const Char c = At(t, end);
    if (!(c.flags & kWhiteSpace)) break;
    last_start = end;
    end += c.len;
    ++count;
    if (IsNewline(c)) newline_end = end;
  }
  if (newline_rule && newline_end != 0) return newline_end;
  if (end == t.size() || count == 1) return end;
  return last_start;
}

// ' ?[^\s\p{L}\p{N}]+' plus '[\r\n]*' when `newlines`; 0 when it does not match at p.
size_t MatchOther(std::string_view t, size_t p, bool newlines) {
  size_t q = p;
  if (t[q] == ' ' && q + 1 < t.size() && IsOther(At(t, q + 1))) ++q;
  if (!IsOther(At(t, q))) return 0;
  size_t end = q;
  while (end < t.size()) {
    const Char c = At(t, end);
    if (!IsOther(c)) break;
    end += c.len;
  }
  while (newlines && end < t.size() && (t[end] == '\r' || t[end] == '\n')) ++end;
  return end;
}

// Kimi's cased-word body from q: [U&&^Han]*[L&&^Han]+ (`upper_required`: [U&&^Han]+[L&&^Han]*),
// then an optional case-insensitive contraction. Returns 0 when it does not match.
size_t KimiWord(std::string_view t, size_t q, bool upper_required) {
  size_t u = q, last_lowerish_end = 0;
  while (u < t.size()) {
    const Char c = At(t, u);
    if (!(c.flags & kUpperish) || (c.flags & kHan)) break;
    u += c.len;
    if (c.flags & kLowerish) last_lowerish_end = u;
  }
  const size_t lower_end = RunEnd(t, u, kLowerish, kHan);
  size_t end;
  if (upper_required) {
    if (u == q) return 0;
    end = lower_end;
  } else if (lower_end > u) {
    end = lower_end;
  } else if (last_lowerish_end != 0) {
    end = last_lowerish_end;  // backtracking: the upper run gives its last lowerish character back
  } else {
    return 0;
  }
  return end + Contraction(t, end, /*fold_case=*/true);
}

}  // namespace

const std::string& Pretokenizer::KimiPattern() { return kKimiPattern; }
const std::string& Pretokenizer::Cl100kPattern() { return kCl100kPattern; }

Pretokenizer Pretokenizer::Gpt2() { return Pretokenizer(PatternFamily::kGpt2, 0); }

StatusOr<Pretokenizer> Pretokenizer::FromPattern(std::string_view pattern) {
  if (pattern == kGpt2Pattern) return Gpt2();
  if (pattern == kCl100kPattern) return Pretokenizer(PatternFamily::kCl100k, 3);
  if (pattern == kQwenPattern) return Pretokenizer(PatternFamily::kCl100k, 1);
  if (pattern == kKimiPattern) return Pretokenizer(PatternFamily::kKimi, 3);
  return Status::Unimplemented("unsupported pre-tokenization pattern '" + std::string(pattern) +
                               "' (supported: the GPT-2, cl100k/GLM, Qwen2 and Kimi K2 patterns; "
                               "see docs/tokenizers.md)");
}

size_t Pretokenizer::MatchGpt2(std::string_view t, size_t p) const {
  if (size_t n = Contraction(t, p, /*fold_case=*/false)) return p + n;
  const Char c = At(t, p);
  const bool space = c.cp == ' ' && p + 1 < t.size();
  const uint16_t next = space ? At(t, p + 1).flags : 0;
  if (c.flags & kLetter) return RunEnd(t, p, kLetter);
  if (space && (next & kLetter)) return RunEnd(t, p + 1, kLetter);
  if (c.flags & kNumber) return RunEnd(t, p, kNumber);
  if (space && (next & kNumber)) return RunEnd(t, p + 1, kNumber);
  if (size_t end = MatchOther(t, p, /*newlines=*/false)) return end;
  return MatchSpaces(t, p, /*newline_rule=*/false);
}

size_t Pretokenizer::MatchCl100k(std::string_view t, size_t p) const {
  if (size_t n = Contraction(t, p, /*fold_case=*/true)) return p + n;
  const Char c = At(t, p);
  if (c.flags & kLetter) return RunEnd(t, p, kLetter);
  if (!(c.flags & kLetterOrNumber) && !IsNewline(c) && p + c.len < t.size() &&
      (At(t, p + c.len).flags & kLetter)) {
    return RunEnd(t, p + c.len, kLetter);
  }
  if (c.flags & kNumber) return RunEnd(t, p, kNumber, 0, max_digits_);
  if (size_t end = MatchOther(t, p, /*newlines=*/true)) return end;
  return MatchSpaces(t, p, /*newline_rule=*/true);
}

size_t Pretokenizer::MatchKimi(std::string_view t, size_t p) const {
  const Char c = At(t, p);
  if (c.flags & kHan) return RunEnd(t, p, kHan);
  const bool prefix = !(c.flags & kLetterOrNumber) && !IsNewline(c) && p + c.len < t.size();
  for (bool upper_required : {false, true}) {
    if (prefix) {
      if (size_t end = KimiWord(t, p + c.len, upper_required)) return end;
    }
    if (size_t end = KimiWord(t, p, upper_required)) return end;
  }
  if (c.flags & kNumber) return RunEnd(t, p, kNumber, 0, max_digits_);
  if (size_t end = MatchOther(t, p, /*newlines=*/true)) return end;
  return MatchSpaces(t, p, /*newline_rule=*/true);
}

void Pretokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  size_t p = 0;
  while (p < text.size()) {
    size_t end = family_ == PatternFamily::kGpt2     ? MatchGpt2(text, p)
                 : family_ == PatternFamily::kCl100k ? MatchCl100k(text, p)
                                                     : MatchKimi(text, p);
    if (end <= p) end = p + At(text, p).len;  // unreachable for these families; never loop forever
    pieces->push_back(text.substr(p, end - p));
    p = end;
  }
}

}  // namespace tandem::engine::text
