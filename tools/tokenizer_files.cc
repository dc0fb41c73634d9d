#include "tools/tokenizer_files.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/text/byte_level.h"
#include "engine/text/pretokenizer.h"

namespace tandem::tools {
namespace {

namespace text = engine::text;
using ordered_json = nlohmann::ordered_json;

// Kimi K2's named special slots (offsets from its first special id, 163584).
constexpr struct {
  int32_t slot;
  const char* content;
} kKimiNamedSlots[] = {
    {0, "[BOS]"},
    {1, "[EOS]"},
    {2, "<|im_end|>"},
    {3, "<|im_user|>"},
    {4, "<|im_assistant|>"},
    {6, "<|start_header_id|>"},
    {7, "<|end_header_id|>"},
    {9, "[EOT]"},
    {10, "<|im_system|>"},
    {11, "<|tool_calls_section_begin|>"},
    {12, "<|tool_calls_section_end|>"},
    {13, "<|tool_call_begin|>"},
    {14, "<|tool_call_argument_begin|>"},
    {15, "<|tool_call_end|>"},
    {17, "<|im_middle|>"},
    {254, "[UNK]"},
    {255, "[PAD]"},
};

// GLM 4.5's added tokens (151329..). From "/nothink" on they are not special: the thinking and
// tool-call tags stay in decoded text.
constexpr const char* kGlmAdded[] = {"<|endoftext|>",
                                     "[MASK]",
                                     "[gMASK]",
                                     "[sMASK]",
                                     "<sop>",
                                     "<eop>",
                                     "<|system|>",
                                     "<|user|>",
                                     "<|assistant|>",
                                     "<|observation|>",
                                     "<|begin_of_image|>",
                                     "<|end_of_image|>",
                                     "<|begin_of_video|>",
                                     "<|end_of_video|>",
                                     "<|begin_of_audio|>",
                                     "<|end_of_audio|>",
                                     "<|begin_of_transcription|>",
                                     "<|end_of_transcription|>",
                                     "<|code_prefix|>",
                                     "<|code_middle|>",
                                     "<|code_suffix|>",
                                     "/nothink",
                                     "<think>",
                                     "</think>",
                                     "<tool_call>",
                                     "</tool_call>",
                                     "<tool_response>",
                                     "</tool_response>",
                                     "<arg_key>",
                                     "</arg_key>",
                                     "<arg_value>",
                                     "</arg_value>"};
constexpr size_t kGlmFirstNonSpecial = 21;

ordered_json AddedTokenJson(const text::AddedToken& t) {
  return {{"content", t.content}, {"lstrip", false},      {"normalized", false},
          {"rstrip", false},      {"single_word", false}, {"special", t.special}};
}

ordered_json AddedTokensDecoder(const std::vector<text::AddedToken>& tokens) {
  ordered_json decoder = ordered_json::object();
  for (const text::AddedToken& t : tokens) decoder[std::to_string(t.id)] = AddedTokenJson(t);
  return decoder;
}

StatusOr<int32_t> IdOf(const text::Tokenizer& t, const char* content) {
  std::optional<int32_t> id = t.AddedTokenId(content);
  if (!id) return Status::Internal(std::string("the trained vocabulary lacks ") + content);
  return *id;
}

}  // namespace

std::vector<std::string> KimiSpecialTokens(int32_t first_id) {
  std::vector<std::string> out(kKimiSpecialSlots);
  for (int32_t slot = 0; slot < kKimiSpecialSlots; ++slot) {
    out[slot] = "<|reserved_token_" + std::to_string(first_id + slot) + "|>";
  }
  for (const auto& named : kKimiNamedSlots) out[named.slot] = named.content;
  return out;
}

std::vector<std::string> GlmSpecialTokens() { return {std::begin(kGlmAdded), std::end(kGlmAdded)}; }

StatusOr<TokenizerFiles> KimiTokenizerFiles(const text::BpeVocabulary& vocab, int64_t max_length) {
  TokenizerFiles out;
  const std::string ranks = text::TiktokenRankFile(vocab);
  ASSIGN_OR_RETURN(
      text::Tokenizer tokenizer,
      text::Tokenizer::FromTiktoken(ranks, text::Pretokenizer::KimiPattern(), vocab.special_tokens));
  const ordered_json config = {{"added_tokens_decoder", AddedTokensDecoder(vocab.special_tokens)},
                               {"bos_token", "[BOS]"},
                               {"eos_token", "[EOS]"},
                               {"pad_token", "[PAD]"},
                               {"unk_token", "[UNK]"},
                               {"model_max_length", max_length},
                               {"tokenizer_class", "TikTokenTokenizer"}};
  out.files = {{"tiktoken.model", ranks}, {"tokenizer_config.json", config.dump(2) + "\n"}};
  ASSIGN_OR_RETURN(const int32_t bos, IdOf(tokenizer, "[BOS]"));
  ASSIGN_OR_RETURN(const int32_t eos, IdOf(tokenizer, "[EOS]"));
  ASSIGN_OR_RETURN(const int32_t im_end, IdOf(tokenizer, "<|im_end|>"));
  out.bos_token_id = bos;
  out.eos_token_ids = {eos};
  out.generation_eos_token_ids = {eos, im_end};
  out.tokenizer = std::make_unique<text::Tokenizer>(std::move(tokenizer));
  return out;
}

StatusOr<TokenizerFiles> GlmTokenizerFiles(const text::BpeVocabulary& vocab, int64_t max_length) {
  std::vector<text::AddedToken> added = vocab.special_tokens;
  for (size_t i = kGlmFirstNonSpecial; i < added.size(); ++i) added[i].special = false;
  ordered_json added_json = ordered_json::array();
  for (const text::AddedToken& t : added) {
    ordered_json j = {{"id", t.id}};
    j.update(AddedTokenJson(t));
    added_json.push_back(std::move(j));
  }
  ordered_json vocab_json = ordered_json::object();
  for (size_t rank = 0; rank < vocab.ranks.size(); ++rank) {
    vocab_json[text::BytesToByteLevel(vocab.ranks[rank])] = rank;
  }
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : vocab.merges) {
    merges.push_back(ordered_json::array(
        {text::BytesToByteLevel(vocab.ranks[left]), text::BytesToByteLevel(vocab.ranks[right])}));
  }
  const ordered_json tokenizer_json = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_json},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", text::Pretokenizer::Cl100kPattern()}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", true},
           {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab_json},
        {"merges", merges}}}};
  // Byte-level spellings are valid UTF-8 and the added tokens are ASCII, so dump cannot throw.
  const std::string tokenizer_text = tokenizer_json.dump();
  ASSIGN_OR_RETURN(text::Tokenizer tokenizer, text::Tokenizer::FromHfJson(tokenizer_text));
  const ordered_json config = {{"added_tokens_decoder", AddedTokensDecoder(added)},
                               {"eos_token", "<|endoftext|>"},
                               {"pad_token", "<|endoftext|>"},
                               {"model_max_length", max_length},
                               {"tokenizer_class", "PreTrainedTokenizer"}};
  TokenizerFiles out;
  out.files = {{"tokenizer.json", tokenizer_text}, {"tokenizer_config.json", config.dump(2) + "\n"}};
  ASSIGN_OR_RETURN(const int32_t end, IdOf(tokenizer, "<|endoftext|>"));
  ASSIGN_OR_RETURN(const int32_t user, IdOf(tokenizer, "<|user|>"));
  ASSIGN_OR_RETURN(const int32_t observation, IdOf(tokenizer, "<|observation|>"));
  out.eos_token_ids = {end, user, observation};
  out.generation_eos_token_ids = out.eos_token_ids;
  out.tokenizer = std::make_unique<text::Tokenizer>(std::move(tokenizer));
  return out;
}

}  // namespace tandem::tools
