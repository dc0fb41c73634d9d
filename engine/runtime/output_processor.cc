#include "engine/runtime/output_processor.h"

#include <algorithm>
#include <limits>

#include "engine/runtime/sampler.h"

namespace tandem::engine::runtime {
namespace {

// KMP prefix function: pi[i] = length of the longest proper prefix of s[0, i] that is also its suffix.
std::vector<uint32_t> PrefixFunction(std::string_view s) {
  std::vector<uint32_t> pi(s.size(), 0);
  for (size_t i = 1; i < s.size(); ++i) {
    uint32_t q = pi[i - 1];
    while (q > 0 && s[i] != s[q]) q = pi[q - 1];
    if (s[i] == s[q]) ++q;
    pi[i] = q;
  }
  return pi;
}

}  // namespace

StatusOr<OutputProcessor> OutputProcessor::Create(const SamplingParams& params,
                                                  const text::Tokenizer* tokenizer,
                                                  std::span<const int32_t> eos_token_ids,
                                                  bool skip_special_tokens) {
  const int64_t vocab = tokenizer ? tokenizer->vocab_size() : std::numeric_limits<int32_t>::max();
  RETURN_IF_ERROR(ValidateSamplingParams(params, vocab));
  if (!tokenizer && !params.stop.empty())
    return Status::InvalidArgument("stop strings need a tokenizer (the engine has none loaded)");
  std::vector<int32_t> eos(eos_token_ids.begin(), eos_token_ids.end());
  std::sort(eos.begin(), eos.end());
  return OutputProcessor(params, tokenizer, std::move(eos), skip_special_tokens);
}

OutputProcessor::OutputProcessor(const SamplingParams& params, const text::Tokenizer* tokenizer,
                                 std::vector<int32_t> eos_token_ids, bool skip_special_tokens)
    : params_(params),
      tokenizer_(tokenizer),
      eos_token_ids_(std::move(eos_token_ids)),
      detokenizer_(tokenizer, skip_special_tokens),
      match_len_(params.stop.size(), 0) {
  std::sort(params_.stop_token_ids.begin(), params_.stop_token_ids.end());
  for (const std::string& s : params_.stop) failure_.push_back(PrefixFunction(s));
}

int OutputProcessor::FeedStopMatchers(std::string_view piece, bool may_stop, size_t* cut) {
  const size_t base = held_.size() - piece.size();  // piece is already appended to held_
  for (size_t j = 0; j < piece.size(); ++j) {
    const char c = piece[j];
    int best = -1;
    for (size_t k = 0; k < params_.stop.size(); ++k) {
      const std::string& s = params_.stop[k];
      uint32_t q = match_len_[k];
      while (q > 0 && s[q] != c) q = failure_[k][q - 1];
      if (s[q] == c) ++q;
      if (q == s.size()) {
        // Of the stop strings that end at this byte, the longest starts first and wins.
        if (may_stop && (best < 0 || s.size() > params_.stop[best].size())) best = static_cast<int>(k);
        q = failure_[k][q - 1];
      }
      match_len_[k] = q;
    }
    if (best >= 0) {
      *cut = base + j + 1 - params_.stop[best].size();
      return best;
    }
  }
  return -1;
}

size_t OutputProcessor::HoldBackBytes() const {
  uint32_t hold = 0;
  for (uint32_t q : match_len_) hold = std::max(hold, q);
  return std::min<size_t>(hold, held_.size());
}

Status OutputProcessor::Append(int32_t token, RequestOutput* out) {
  if (finished_) return Status::FailedPrecondition("the request already finished");
  if (token < 0) return Status::InvalidArgument("negative token id " + std::to_string(token));
  ++num_tokens_;
  const bool may_stop = num_tokens_ > params_.min_tokens;
  const bool last = num_tokens_ >= params_.max_tokens;
  if (may_stop && std::binary_search(params_.stop_token_ids.begin(), params_.stop_token_ids.end(), token)) {
    SetFinish(FinishReason::kStop, std::to_string(token), out);
    return Status::Ok();
  }
  if (may_stop && !params_.ignore_eos &&
      std::binary_search(eos_token_ids_.begin(), eos_token_ids_.end(), token)) {
    SetFinish(FinishReason::kStop, "", out);
    return Status::Ok();
  }
  std::string piece;
  if (tokenizer_ && tokenizer_->TokenBytes(token).has_value()) {
    StatusOr<std::string> text = detokenizer_.Add(token);
    if (text.ok()) piece = *std::move(text);
  }
  if (last && tokenizer_) piece += detokenizer_.Flush();
  held_ += piece;
  size_t cut = 0;
  if (const int k = FeedStopMatchers(piece, may_stop, &cut); k >= 0) {
    out->text_delta.append(held_, 0, cut);
    held_.clear();
    finished_ = true;
    out->finish = FinishReason::kStop;
    out->finish_detail = params_.stop[k];
    return Status::Ok();
  }
  if (last) {
    SetFinish(FinishReason::kLength, "", out);
    return Status::Ok();
  }
  const size_t emit = held_.size() - HoldBackBytes();
  out->text_delta.append(held_, 0, emit);
  held_.erase(0, emit);
  return Status::Ok();
}

void OutputProcessor::Finish(FinishReason reason, std::string_view detail, RequestOutput* out) {
  if (finished_) return;
  SetFinish(reason, std::string(detail), out);
}

void OutputProcessor::SetFinish(FinishReason reason, std::string detail, RequestOutput* out) {
  // An unfinished character becomes U+FFFD; it could still complete a stop string, which is cut.
  const std::string piece = tokenizer_ ? detokenizer_.Flush() : std::string();
  held_ += piece;
  size_t cut = held_.size();
  FeedStopMatchers(piece, /*may_stop=*/true, &cut);
  out->text_delta.append(held_, 0, cut);
  held_.clear();
  finished_ = true;
  out->finish = reason;
  out->finish_detail = std::move(detail);
}

}  // namespace tandem::engine::runtime
