#pragma once
// Incremental detokenization for streaming: token ids in, complete UTF-8 text out.
//
// A byte-level token may end in the middle of a character (an emoji spread over two tokens); the
// detokenizer holds such bytes back until the character completes, so every piece it returns is
// valid UTF-8 and the pieces concatenate to the lossy UTF-8 decoding of all the tokens' bytes
// (bytes that cannot form a character become U+FFFD, as in Hugging Face's decode).

#include <cstdint>
#include <string>

#include "common/status.h"
#include "engine/text/tokenizer.h"

namespace tandem::engine::text {

// Replaces each maximal ill-formed subsequence of `bytes` with U+FFFD (the WHATWG / Python
// "replace" convention).
std::string ToValidUtf8(std::string_view bytes);

class Detokenizer {
 public:
  // REQUIRES: `tokenizer` outlives this object.
  explicit Detokenizer(const Tokenizer* tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // The text that token `id` completes (often empty or several characters). InvalidArgument for an
  // id outside the vocabulary; the state is unchanged then.
  StatusOr<std::string> Add(int32_t id);
  // The held-back bytes of an unfinished character, as U+FFFD; resets for a new stream.
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;  // at most 3 bytes: the start of an unfinished character
};

}  // namespace tandem::engine::text
