// libFuzzer target for the tokenizers (scripts/fuzz.sh tokenizer). The first input byte picks:
//   0: the bytes as a tokenizer.json, 1: as a tiktoken rank file (Kimi pattern) — loading must
//      return a Status, never crash; a loaded tokenizer must round-trip a fixed text;
//   2+: the rest as text for a fixed small tokenizer: DecodeBytes(Encode(x)) == x, and the streaming
//      Detokenizer's output equals the lossy UTF-8 decoding of the bytes.

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/text/byte_level.h"
#include "engine/text/detokenizer.h"
#include "engine/text/fuzz/fixed_tokenizer.h"
#include "engine/text/tokenizer.h"

namespace {

using tandem::engine::text::Detokenizer;
using tandem::engine::text::Pretokenizer;
using tandem::engine::text::Tokenizer;

void Require(bool condition) {
  if (!condition) std::abort();
}

void CheckRoundTrip(const Tokenizer& t, std::string_view text) {
  const auto ids = t.Encode(text);
  auto bytes = t.DecodeBytes(ids);
  Require(bytes.ok() && *bytes == text);
  Detokenizer d(&t);
  std::string streamed;
  for (int32_t id : ids) streamed += *d.Add(id);
  streamed += d.Flush();
  Require(streamed == tandem::engine::text::ToValidUtf8(*bytes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] == 0 || data[0] == 1) {
    auto t = data[0] == 0 ? Tokenizer::FromHfJson(rest)
                          : Tokenizer::FromTiktoken(rest, Pretokenizer::KimiPattern(), {});
    if (t.ok()) CheckRoundTrip(*t, "Hello, world! 我能吞下玻璃 ภาษาไทย 123 \xF0\x9F\x99\x82 <|im_end|>\xFF");
    return 0;
  }
  CheckRoundTrip(tandem::engine::text::FixedFuzzTokenizer(), rest);
  return 0;
}
