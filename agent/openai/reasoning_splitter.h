#pragma once
// Internal to agent/openai: splits GLM output, fed piece by piece, into reasoning (the text of a
// <think>...</think> block) and content (the rest), holding back a tail that could still be part
// of a marker so no partial "<think>" or "</think>" reaches a client.
//
// The rule, the same for streaming and non-streaming responses (so both give the same split):
// - Unless the prompt opened the think block, the output is reasoning only if it begins (after
//   whitespace) with "<think>". GLM's template, with thinking on, ends the prompt with
//   "<|assistant|>" and the model writes "<think>" itself; with thinking off the prompt already
//   holds an empty "<think></think>" and the output is all content.
// - When the prompt opened the block (`prompt_opened_think`), the output starts as reasoning.
// - Reasoning ends at the first "</think>"; everything after it is content, even another <think>.
//   Newlines right after "<think>" and around "</think>" are dropped, as GLM's template strips
//   them when it renders reasoning_content back into a prompt.
// - Output that never closes its think block (max_tokens hit) stays reasoning, tail included.
// The result does not depend on how the text is split into pieces.

#include <string>
#include <string_view>

namespace tandem::agent::openai::internal {

inline constexpr std::string_view kThinkBegin = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";

class ReasoningSplitter {
 public:
  struct Output {
    std::string reasoning;
    std::string content;
  };

  explicit ReasoningSplitter(bool prompt_opened_think = false)
      : state_(prompt_opened_think ? State::kReasoning : State::kStart) {}

  Output Feed(std::string_view text);
  // End of generation: releases what was held back. Call once.
  Output Finish();

 private:
  enum class State { kStart, kReasoning, kContent };
  void Drain(Output& out);

  State state_;
  bool strip_newlines_ = true;  // at the start of reasoning or of content after </think>
  std::string buffer_;
};

}  // namespace tandem::agent::openai::internal
