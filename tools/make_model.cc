// `tandem make-model`: trains the vocabulary, writes the tokenizer files and the dummy checkpoint
// (tools/make_model.h), and prints what it made.
#include "tools/make_model.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>

#include <nlohmann/json.hpp>

#include "engine/io/atomic_file.h"
#include "engine/model/dummy_model.h"
#include "engine/model/model_stats.h"
#include "engine/model/presets.h"
#include "engine/text/bpe_trainer.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
namespace model = engine::model;
namespace text = engine::text;
using ordered_json = nlohmann::ordered_json;

constexpr int64_t kMaxCheckpointBytes = int64_t{4} << 30;

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

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Status WriteText(const fs::path& path, const std::string& text) {
  const std::span<const std::byte> bytes = std::as_bytes(std::span<const char>(text));
  const std::span<const std::byte> pieces[] = {bytes};
  return engine::io::WriteFileAtomically(path.string(), pieces);
}

ordered_json TokenizerConfig(const text::BpeVocabulary& vocab, int64_t max_length) {
  ordered_json decoder = ordered_json::object();
  for (const text::AddedToken& t : vocab.special_tokens) {
    decoder[std::to_string(t.id)] = {{"content", t.content}, {"lstrip", false},      {"normalized", false},
                                     {"rstrip", false},      {"single_word", false}, {"special", true}};
  }
  return {{"added_tokens_decoder", decoder},
          {"bos_token", "[BOS]"},
          {"eos_token", "[EOS]"},
          {"pad_token", "[PAD]"},
          {"unk_token", "[UNK]"},
          {"model_max_length", max_length},
          {"tokenizer_class", "TikTokenTokenizer"}};
}

// config.json as WriteDummyCheckpoint wrote it, plus the bos/eos ids (ModelConfig has no field
// for them: the forward pass does not use them).
Status AddTokenIdsToConfig(const fs::path& dir, int32_t bos, int32_t eos) {
  const fs::path path = dir / "config.json";
  std::FILE* f = std::fopen(path.string().c_str(), "rb");
  if (f == nullptr) return Status::Internal(path.string() + ": cannot open");
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) text.append(buffer, n);
  std::fclose(f);
  ordered_json config = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return Status::Internal(path.string() + ": not a JSON object");
  config["bos_token_id"] = bos;
  config["eos_token_id"] = eos;
  return WriteText(path, config.dump(2) + "\n");
}

Status CheckOptions(const MakeModelOptions& o, const model::ModelConfig& config) {
  if (o.out_dir.empty()) return Status::InvalidArgument("no output directory");
  if (config.architecture != model::Architecture::kDeepseekV3) {
    return Status::InvalidArgument("preset '" + o.preset +
                                   "' is not deepseek_v3: make-model writes Kimi-style tokenizers only");
  }
  if (o.vocab_size < 1024 || o.vocab_size > 65536) {
    return Status::InvalidArgument("vocab size " + std::to_string(o.vocab_size) +
                                   " is outside [1024, 65536]");
  }
  model::ModelConfig sized = config;
  sized.vocab_size = o.vocab_size;
  if (const int64_t bytes = model::CheckpointBytes(sized, model::WeightScheme::kBf16);
      bytes > kMaxCheckpointBytes) {
    return Status::InvalidArgument("preset '" + o.preset + "' needs " + std::to_string(bytes >> 20) +
                                   " MiB in bf16; make-model writes models up to 4 GiB");
  }
  return Status::Ok();
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

StatusOr<MakeModelReport> MakeModel(const MakeModelOptions& options) {
  ASSIGN_OR_RETURN(model::ModelConfig config, model::Preset(options.preset));
  RETURN_IF_ERROR(CheckOptions(options, config));
  MakeModelReport report;
  const auto train_start = std::chrono::steady_clock::now();
  text::BpeTrainerOptions trainer;
  trainer.vocab_size = options.vocab_size;
  const auto first_special = static_cast<int32_t>(options.vocab_size - kKimiSpecialSlots);
  trainer.special_tokens = KimiSpecialTokens(first_special);
  const std::string_view corpus = TinyCorpus();
  ASSIGN_OR_RETURN(text::BpeVocabulary vocab, text::TrainBpe(corpus, trainer));
  report.train_seconds = SecondsSince(train_start);
  ASSIGN_OR_RETURN(text::Tokenizer tokenizer, text::TokenizerFromVocabulary(vocab, trainer.pattern));
  report.vocab_size = vocab.total_size();
  report.ranks = static_cast<int64_t>(vocab.ranks.size());
  report.merges = static_cast<int64_t>(vocab.merges.size());
  report.corpus_bytes = static_cast<int64_t>(corpus.size());
  report.corpus_tokens = static_cast<int64_t>(tokenizer.Encode(corpus).size());

  const auto write_start = std::chrono::steady_clock::now();
  config.vocab_size = vocab.total_size();
  const fs::path dir(options.out_dir);
  RETURN_IF_ERROR(model::WriteDummyCheckpoint(dir.string(), config, options.weights, options.seed,
                                              /*max_shard_bytes=*/5'000'000'000, options.threads));
  const int32_t bos = *tokenizer.AddedTokenId("[BOS]");
  const int32_t eos = *tokenizer.AddedTokenId("[EOS]");
  const int32_t im_end = *tokenizer.AddedTokenId("<|im_end|>");
  RETURN_IF_ERROR(AddTokenIdsToConfig(dir, bos, eos));
  RETURN_IF_ERROR(WriteText(dir / "tiktoken.model", text::TiktokenRankFile(vocab)));
  RETURN_IF_ERROR(WriteText(dir / "tokenizer_config.json",
                            TokenizerConfig(vocab, config.max_position_embeddings).dump(2) + "\n"));
  const ordered_json generation = {{"bos_token_id", bos}, {"eos_token_id", {eos, im_end}}};
  RETURN_IF_ERROR(WriteText(dir / "generation_config.json", generation.dump(2) + "\n"));
  report.write_seconds = SecondsSince(write_start);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors")
      report.checkpoint_bytes += static_cast<int64_t>(e.file_size(ec));
  }
  return report;
}

namespace {

constexpr char kUsage[] =
    "usage: tandem make-model --out DIR [--preset tiny] [--weights bf16|fp8|int4] [--seed N]\n"
    "                         [--vocab-size N (default 4096)] [--threads N]\n";

bool ParseInt(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseArgs(const std::vector<std::string>& args, MakeModelOptions* o) {
  if (args.size() % 2 != 0) return false;
  for (size_t i = 0; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    const std::string& value = args[i + 1];
    int64_t n = 0;
    if (flag == "--out") {
      o->out_dir = value;
    } else if (flag == "--preset") {
      o->preset = value;
    } else if (flag == "--weights") {
      StatusOr<engine::WeightFormat> f = engine::ParseWeightFormat(value);
      if (!f.ok()) return false;
      o->weights = *f;
    } else if (flag == "--seed" && ParseInt(value, 0, INT64_MAX, &n)) {
      o->seed = static_cast<uint64_t>(n);
    } else if (flag == "--vocab-size" && ParseInt(value, 1, INT32_MAX, &n)) {
      o->vocab_size = n;
    } else if (flag == "--threads" && ParseInt(value, 1, 256, &n)) {
      o->threads = static_cast<int>(n);
    } else {
      return false;
    }
  }
  return !o->out_dir.empty();
}

}  // namespace

int RunMakeModel(const std::vector<std::string>& args) {
  MakeModelOptions options;
  if (!ParseArgs(args, &options)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  StatusOr<MakeModelReport> report = MakeModel(options);
  if (!report.ok()) {
    std::fprintf(stderr, "tandem make-model: %s\n", report.status().ToString().c_str());
    return 1;
  }
  std::printf("wrote %s: preset %s, %s weights, seed %llu\n", options.out_dir.c_str(), options.preset.c_str(),
              std::string(engine::WeightFormatName(options.weights)).c_str(),
              static_cast<unsigned long long>(options.seed));
  std::printf("vocabulary: %lld tokens (%lld BPE ranks, %d special slots), trained in %.2f s on %lld bytes\n",
              static_cast<long long>(report->vocab_size), static_cast<long long>(report->ranks),
              kKimiSpecialSlots, report->train_seconds, static_cast<long long>(report->corpus_bytes));
  std::printf("corpus: %.2f bytes per token; checkpoint %.1f MB written in %.2f s\n",
              static_cast<double>(report->corpus_bytes) / static_cast<double>(report->corpus_tokens),
              static_cast<double>(report->checkpoint_bytes) / 1e6, report->write_seconds);
  return 0;
}

}  // namespace tandem::tools
