#pragma once
// GPT-2's byte-level alphabet: every byte maps to one printable code point, so a vocabulary of
// byte strings can be written as JSON text (Hugging Face `tokenizer.json`, "Ġthe" for " the").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::engine::text {

// The code point that stands for `byte`: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// stand for themselves, the other 68 bytes for U+0100.. in byte order.
uint32_t ByteToCodePoint(uint8_t byte);

// The bytes a byte-level token string stands for; nullopt when it holds a character outside the
// alphabet (or is not valid UTF-8), as added tokens such as "<|endoftext|>" in a vocabulary may.
std::optional<std::string> ByteLevelToBytes(std::string_view token);

// The byte-level spelling of `bytes`.
std::string BytesToByteLevel(std::string_view bytes);

}  // namespace tandem::engine::text
