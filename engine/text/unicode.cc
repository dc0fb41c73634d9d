#include "engine/text/unicode.h"

#include <algorithm>
#include <array>
#include <memory>

namespace tandem::engine::text {
namespace {

// Flags of every BMP code point, expanded once from the range table (128 KiB): the pre-tokenizer
// looks up every character, and a binary search per character would dominate encoding time.
const std::array<uint16_t, 0x10000>& BmpFlags() {
  static const auto* table = [] {
    auto* t = new std::array<uint16_t, 0x10000>();
    t->fill(0);
    for (int i = 0; i < kUnicodeRangeCount; ++i) {
      const UnicodeRange& r = kUnicodeRanges[i];
      for (uint32_t cp = r.first; cp <= r.last && cp < 0x10000; ++cp) (*t)[cp] = r.flags;
    }
    return t;
  }();
  return *table;
}

}  // namespace

DecodedChar DecodeUtf8(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t left = text.size() - pos;
  const unsigned char b0 = s[0];
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](size_t i) { return i < left && (s[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (cont(1)) return {(uint32_t{b0} & 0x1F) << 6 | (s[1] & 0x3F), 2};
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (cont(1) && cont(2)) {
      const uint32_t cp = (uint32_t{b0} & 0x0F) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3F);
      if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (cont(1) && cont(2) && cont(3)) {
      const uint32_t cp =
          (uint32_t{b0} & 0x07) << 18 | (s[1] & 0x3Fu) << 12 | (s[2] & 0x3Fu) << 6 | (s[3] & 0x3F);
      if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
    }
  }
  return {kInvalidCodePoint, 1};
}

uint16_t UnicodeFlags(uint32_t code_point) {
  if (code_point < 0x10000) return BmpFlags()[code_point];
  if (code_point > 0x10FFFF) return 0;
  const UnicodeRange* end = kUnicodeRanges + kUnicodeRangeCount;
  const UnicodeRange* it = std::upper_bound(kUnicodeRanges, end, code_point,
                                            [](uint32_t cp, const UnicodeRange& r) { return cp < r.first; });
  if (it == kUnicodeRanges) return 0;
  --it;
  return code_point <= it->last ? it->flags : 0;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t Utf8SequenceStart(std::string_view bytes) {
  if (bytes.empty()) return 0;
  const auto b = static_cast<unsigned char>(bytes[0]);
  const size_t need = b >= 0xF0 && b <= 0xF4   ? 4
                      : b >= 0xE0 && b <= 0xEF ? 3
                      : b >= 0xC2 && b <= 0xDF ? 2
                                               : 0;
  if (need == 0) return 0;
  size_t k = 1;
  for (; k < need && k < bytes.size(); ++k) {
    const auto c = static_cast<unsigned char>(bytes[k]);
    bool ok = (c & 0xC0) == 0x80;
    if (k == 1) {
      if (b == 0xE0) ok = ok && c >= 0xA0;
      if (b == 0xED) ok = ok && c < 0xA0;
      if (b == 0xF0) ok = ok && c >= 0x90;
      if (b == 0xF4) ok = ok && c < 0x90;
    }
    if (!ok) break;
  }
  return k == need ? 0 : k;
}

size_t CompleteUtf8Prefix(std::string_view bytes) {
  // Only the last 3 bytes can begin an unfinished character; hold back the one that runs into the
  // end of `bytes` (a sequence broken by a bad byte is final: it decodes to U+FFFD either way).
  const size_t n = bytes.size();
  for (size_t start = n > 3 ? n - 3 : 0; start < n; ++start) {
    if (Utf8SequenceStart(bytes.substr(start)) == n - start) return start;
  }
  return n;
}

}  // namespace tandem::engine::text
