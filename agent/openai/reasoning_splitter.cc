#include "agent/openai/reasoning_splitter.h"

#include "engine/text/tool_call_parser.h"

namespace tandem::agent::openai::internal {
namespace {

size_t LeadingNewlines(std::string_view text) {
  size_t n = text.find_first_not_of('\n');
  return n == std::string_view::npos ? text.size() : n;
}

}  // namespace

ReasoningSplitter::Output ReasoningSplitter::Feed(std::string_view text) {
  buffer_ += text;
  Output out;
  Drain(out);
  return out;
}

void ReasoningSplitter::Drain(Output& out) {
  while (!buffer_.empty()) {
    switch (state_) {
      case State::kStart: {
        std::string_view rest =
            std::string_view(buffer_).substr(engine::text::internal::LeadingSpaces(buffer_));
        if (rest.starts_with(kThinkBegin)) {
          buffer_.erase(0, buffer_.size() - rest.size() + kThinkBegin.size());
          state_ = State::kReasoning;
          continue;
        }
        // Whitespace, or a proper prefix of "<think>": wait for more.
        if (rest.size() < kThinkBegin.size() && kThinkBegin.starts_with(rest)) return;
        state_ = State::kContent;
        strip_newlines_ = false;  // content from the start is passed on as it is
        continue;
      }
      case State::kReasoning: {
        if (strip_newlines_) {
          buffer_.erase(0, LeadingNewlines(buffer_));
          if (buffer_.empty()) return;
          strip_newlines_ = false;
        }
        const size_t safe = engine::text::internal::SafeContentLength(buffer_, kThinkEnd);
        const bool closed = safe + kThinkEnd.size() <= buffer_.size() &&
                            std::string_view(buffer_).substr(safe).starts_with(kThinkEnd);
        // Newlines before a possible "</think>" are held: they are dropped if it comes.
        size_t emit = safe;
        while (emit > 0 && buffer_[emit - 1] == '\n') --emit;
        if (closed) {
          out.reasoning.append(buffer_, 0, emit);
          buffer_.erase(0, safe + kThinkEnd.size());
          state_ = State::kContent;
          strip_newlines_ = true;
          continue;
        }
        out.reasoning.append(buffer_, 0, emit);
        buffer_.erase(0, emit);
        return;
      }
      case State::kContent: {
        if (strip_newlines_) {
          buffer_.erase(0, LeadingNewlines(buffer_));
          if (buffer_.empty()) return;
          strip_newlines_ = false;
        }
        out.content += buffer_;
        buffer_.clear();
        return;
      }
    }
  }
}

ReasoningSplitter::Output ReasoningSplitter::Finish() {
  Output out;
  Drain(out);
  if (state_ == State::kReasoning) {
    out.reasoning += buffer_;
  } else {
    out.content += buffer_;
  }
  buffer_.clear();
  return out;
}

}  // namespace tandem::agent::openai::internal
