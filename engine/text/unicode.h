#pragma once
// UTF-8 decoding and Unicode property lookup for the pre-tokenizer.

#include <cstdint>
#include <string_view>

#include "engine/text/unicode_tables.h"

namespace tandem::engine::text {

// One decoded character: its code point and its length in bytes. A byte that does not start a
// well-formed UTF-8 sequence (stray continuation, overlong form, surrogate, truncated sequence)
// decodes as kInvalidCodePoint with length 1, so any byte string splits into "characters".
struct DecodedChar {
  uint32_t code_point;
  int length;
};
inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFF;

// REQUIRES: pos < text.size().
DecodedChar DecodeUtf8(std::string_view text, size_t pos);

// The UnicodeFlag bits of `code_point` (0 for kInvalidCodePoint and unassigned code points).
uint16_t UnicodeFlags(uint32_t code_point);

// Appends the UTF-8 encoding of `code_point` (REQUIRES: a scalar value) to `out`.
void AppendUtf8(uint32_t code_point, std::string* out);

// How many leading bytes of `bytes` begin a well-formed UTF-8 sequence without completing it
// (0 when bytes[0] cannot start one or the sequence is complete); e.g. 2 for "\xE2\x82A".
size_t Utf8SequenceStart(std::string_view bytes);

// The length of the longest prefix of `bytes` that is complete, well-formed UTF-8 and could not
// be extended by more bytes into a different character; used by streaming detokenization.
size_t CompleteUtf8Prefix(std::string_view bytes);

}  // namespace tandem::engine::text
