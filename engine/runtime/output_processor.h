#pragma once
// Per-request output processing: sampled token ids in, text deltas safe to stream and the finish
// decision out.
//
// Text comes from text::Detokenizer, so a delta never ends in half a UTF-8 character. Stop strings
// are matched in that text across token boundaries: the tail of the text that could still become
// a stop string is held back; on a match the text is cut before the stop string (no part of it is
// ever emitted) and the request finishes kStop with the string as finish_detail. When several stop
// strings match, the one whose match ends first in the text wins, the longest among those.
//
// Finishing, checked per token in this order:
//   1. a stop token id, or an end-of-sequence id unless ignore_eos: kStop; the token's text is not
//      emitted; finish_detail is the id in decimal for a stop token id, empty for end-of-sequence;
//   2. a stop string completed in the text: kStop, detail = the stop string;
//   3. the max_tokens-th token: kLength.
// Checks 1 and 2 apply only from token number min_tokens + 1 on (the first min_tokens tokens cannot
// stop the request; their text is emitted as usual). Stop wins over length on the same token.
// The final delta flushes any held-back text (and an unfinished character, as U+FFFD) unless a stop
// string cut it.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/runtime/request_types.h"
#include "engine/text/detokenizer.h"

namespace tandem::engine::runtime {

class OutputProcessor {
 public:
  // `tokenizer` may be nullptr only when params.stop is empty; text_delta then stays empty.
  // `eos_token_ids`: the tokenizer's / model's end-of-sequence ids. `skip_special_tokens` drops
  // special tokens from the text (vLLM's default). InvalidArgument when params fail
  // ValidateSamplingParams (against the tokenizer's vocabulary; without one, stop_token_ids are
  // only checked to be non-negative) or when stop strings are requested without a tokenizer.
  // REQUIRES: `tokenizer` outlives the processor.
  static StatusOr<OutputProcessor> Create(const SamplingParams& params, const text::Tokenizer* tokenizer,
                                          std::span<const int32_t> eos_token_ids,
                                          bool skip_special_tokens = true);

  // Accounts one sampled token: appends the text it makes safe to stream to out->text_delta and,
  // when it ends the request, sets out->finish and out->finish_detail. Does not touch
  // out->new_tokens or logprobs (the caller fills those). An id the tokenizer does not know (a
  // padded model vocabulary) adds no text. InvalidArgument for a negative id, FailedPrecondition
  // when called after the request finished; the state is unchanged then.
  Status Append(int32_t token, RequestOutput* out);

  // Ends the request for a reason decided outside (cancelled, aborted, the context limit): appends
  // the held-back text to out->text_delta and sets out->finish = reason, finish_detail = detail.
  // Does nothing when the request already finished.
  void Finish(FinishReason reason, std::string_view detail, RequestOutput* out);

  bool finished() const { return finished_; }
  // Tokens accounted so far (including a final stop token).
  int32_t num_tokens() const { return num_tokens_; }

 private:
  OutputProcessor(const SamplingParams& params, const text::Tokenizer* tokenizer,
                  std::vector<int32_t> eos_token_ids, bool skip_special_tokens);
  // Feeds `piece` through the stop-string matchers. Returns the index of the stop string that
  // completed (and sets *cut to the text position where it starts), or -1.
  int FeedStopMatchers(std::string_view piece, bool may_stop, size_t* cut);
  // Length of the tail of held_ that could still start a stop string.
  size_t HoldBackBytes() const;
  void SetFinish(FinishReason reason, std::string detail, RequestOutput* out);

  SamplingParams params_;
  const text::Tokenizer* tokenizer_;
  std::vector<int32_t> eos_token_ids_;  // sorted
  text::Detokenizer detokenizer_;
  // Per stop string: KMP failure table and the current match length (the longest suffix of the text
  // so far that is a proper prefix of the stop string).
  std::vector<std::vector<uint32_t>> failure_;
  std::vector<uint32_t> match_len_;
  std::string held_;  // text not emitted yet (a possible stop-string start)
  int32_t num_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace tandem::engine::runtime
