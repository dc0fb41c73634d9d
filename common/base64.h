#pragma once
// Standard base64 (RFC 4648 alphabet, '=' padding): tiktoken rank files, kubeconfig *-data fields,
// test fixtures. Header-only and allocation-light; used by the engine and the controller alike.

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

// Encodes `data` with padding.
inline std::string Base64Encode(std::string_view data) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  for (size_t i = 0; i < data.size(); i += 3) {
    const size_t n = data.size() - i < 3 ? data.size() - i : 3;
    uint32_t bits = 0;
    for (size_t k = 0; k < 3; ++k) bits = bits << 8 | (k < n ? static_cast<uint8_t>(data[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out.push_back(k <= n ? kAlphabet[bits >> (18 - 6 * k) & 63] : '=');
  }
  return out;
}

enum class Base64Mode : uint8_t {
  kStrict,   // length a multiple of 4, padding required, no whitespace (tiktoken rank files)
  kLenient,  // ASCII whitespace ignored, padding optional (kubeconfig, PEM-like data)
};

// Decodes `text` into `out`. Returns false for a character outside the alphabet, data after
// padding, a truncated final group, non-zero leftover bits (a non-canonical encoding) or, in
// kStrict mode, whitespace or missing padding; `out` is unspecified then.
inline bool Base64Decode(std::string_view text, std::string* out, Base64Mode mode = Base64Mode::kLenient) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  const bool strict = mode == Base64Mode::kStrict;
  if (strict && (text.empty() || text.size() % 4 != 0)) return false;
  out->clear();
  out->reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int num_bits = 0;
  int padding = 0;
  int symbols = 0;
  for (char c : text) {
    if (!strict && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding > 0) return false;  // data after padding
    const int v = value(c);
    if (v < 0) return false;
    ++symbols;
    bits = (bits << 6 | static_cast<uint32_t>(v)) & 0xFFFFFF;
    num_bits += 6;
    if (num_bits >= 8) {
      num_bits -= 8;
      out->push_back(static_cast<char>(bits >> num_bits & 0xFF));
    }
  }
  if (symbols % 4 == 1 || padding > 2) return false;
  if (padding > 0 && (symbols + padding) % 4 != 0) return false;
  if (strict && (symbols + padding) % 4 != 0) return false;
  return (bits & ((1u << num_bits) - 1)) == 0;
}

}  // namespace tandem
