#include "engine/text/byte_level.h"

#include <array>

#include "engine/text/unicode.h"

namespace tandem::engine::text {
namespace {

bool PrintsAsItself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

struct Tables {
  std::array<uint32_t, 256> to_code_point;
  std::array<int16_t, 0x144> to_byte;  // indexed by code point; -1: not in the alphabet
};

const Tables& ByteTables() {
  static const Tables tables = [] {
    Tables t;
    t.to_byte.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      t.to_code_point[b] = PrintsAsItself(b) ? static_cast<uint32_t>(b) : next++;
      t.to_byte[t.to_code_point[b]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

uint32_t ByteToCodePoint(uint8_t byte) { return ByteTables().to_code_point[byte]; }

std::optional<std::string> ByteLevelToBytes(std::string_view token) {
  const Tables& t = ByteTables();
  std::string out;
  out.reserve(token.size());
  for (size_t p = 0; p < token.size();) {
    const DecodedChar c = DecodeUtf8(token, p);
    if (c.code_point >= t.to_byte.size() || t.to_byte[c.code_point] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.to_byte[c.code_point]));
    p += c.length;
  }
  return out;
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) AppendUtf8(ByteToCodePoint(b), &out);
  return out;
}

}  // namespace tandem::engine::text
