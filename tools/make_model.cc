// `tandem make-model`: trains the vocabulary, writes the tokenizer files and the dummy checkpoint
// (tools/make_model.h), and prints what it made.
#include "tools/make_model.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>

#include <nlohmann/json.hpp>

#include "engine/io/atomic_file.h"
#include "engine/model/dummy_model.h"
#include "engine/model/model_stats.h"
#include "engine/model/presets.h"
#include "engine/text/bpe_trainer.h"
#include "engine/text/pretokenizer.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
namespace model = engine::model;
namespace text = engine::text;
using ordered_json = nlohmann::ordered_json;

constexpr int64_t kMaxCheckpointBytes = int64_t{4} << 30;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Status WriteText(const fs::path& path, const std::string& text) {
  const std::span<const std::byte> bytes = std::as_bytes(std::span<const char>(text));
  const std::span<const std::byte> pieces[] = {bytes};
  return engine::io::WriteFileAtomically(path.string(), pieces);
}

// config.json as WriteDummyCheckpoint wrote it, plus the bos/eos ids (ModelConfig has no field
// for them: the forward pass does not use them).
Status AddTokenIdsToConfig(const fs::path& dir, const TokenizerFiles& files) {
  const fs::path path = dir / "config.json";
  std::FILE* f = std::fopen(path.string().c_str(), "rb");
  if (f == nullptr) return Status::Internal(path.string() + ": cannot open");
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) text.append(buffer, n);
  std::fclose(f);
  ordered_json config = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return Status::Internal(path.string() + ": not a JSON object");
  if (files.bos_token_id) config["bos_token_id"] = *files.bos_token_id;
  const std::vector<int32_t>& eos = files.eos_token_ids;
  config["eos_token_id"] = eos.size() == 1 ? ordered_json(eos[0]) : ordered_json(eos);
  return WriteText(path, config.dump(2) + "\n");
}

Status CheckOptions(const MakeModelOptions& o, const model::ModelConfig& config) {
  if (o.out_dir.empty()) return Status::InvalidArgument("no output directory");
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

StatusOr<MakeModelReport> MakeModel(const MakeModelOptions& options) {
  ASSIGN_OR_RETURN(model::ModelConfig config, model::Preset(options.preset));
  RETURN_IF_ERROR(CheckOptions(options, config));
  const bool glm = config.architecture == model::Architecture::kGlmMoeDsa;
  MakeModelReport report;
  const auto train_start = std::chrono::steady_clock::now();
  text::BpeTrainerOptions trainer;
  trainer.vocab_size = options.vocab_size;
  if (glm) {
    trainer.pattern = text::Pretokenizer::Cl100kPattern();
    trainer.special_tokens = GlmSpecialTokens();
  } else {
    trainer.special_tokens = KimiSpecialTokens(static_cast<int32_t>(options.vocab_size - kKimiSpecialSlots));
  }
  std::string corpus_file;
  if (!options.corpus_path.empty()) {
    std::ifstream in(options.corpus_path, std::ios::binary);
    if (!in) return Status::NotFound("corpus " + options.corpus_path + ": cannot open");
    corpus_file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (corpus_file.empty()) return Status::InvalidArgument("corpus " + options.corpus_path + " is empty");
  }
  const std::string_view corpus = options.corpus_path.empty() ? TinyCorpus() : std::string_view(corpus_file);
  ASSIGN_OR_RETURN(text::BpeVocabulary vocab, text::TrainBpe(corpus, trainer));
  report.train_seconds = SecondsSince(train_start);
  ASSIGN_OR_RETURN(TokenizerFiles files, glm ? GlmTokenizerFiles(vocab, config.max_position_embeddings)
                                             : KimiTokenizerFiles(vocab, config.max_position_embeddings));
  report.vocab_size = vocab.total_size();
  report.ranks = static_cast<int64_t>(vocab.ranks.size());
  report.merges = static_cast<int64_t>(vocab.merges.size());
  report.corpus_bytes = static_cast<int64_t>(corpus.size());
  report.corpus_tokens = static_cast<int64_t>(files.tokenizer->Encode(corpus).size());

  const auto write_start = std::chrono::steady_clock::now();
  config.vocab_size = vocab.total_size();
  const fs::path dir(options.out_dir);
  RETURN_IF_ERROR(model::WriteDummyCheckpoint(dir.string(), config, options.weights, options.seed,
                                              /*max_shard_bytes=*/5'000'000'000, options.threads));
  RETURN_IF_ERROR(AddTokenIdsToConfig(dir, files));
  for (const auto& [name, contents] : files.files) RETURN_IF_ERROR(WriteText(dir / name, contents));
  ordered_json generation = ordered_json::object();
  if (files.bos_token_id) generation["bos_token_id"] = *files.bos_token_id;
  generation["eos_token_id"] = files.generation_eos_token_ids;
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
    "                         [--vocab-size N (default 4096)] [--corpus FILE (the vocabulary's text)]\n"
    "                         [--threads N]\n";

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
    } else if (flag == "--corpus") {
      o->corpus_path = value;
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
  std::printf("vocabulary: %lld tokens (%lld BPE ranks, %lld special), trained in %.2f s on %lld bytes\n",
              static_cast<long long>(report->vocab_size), static_cast<long long>(report->ranks),
              static_cast<long long>(report->vocab_size - report->ranks), report->train_seconds,
              static_cast<long long>(report->corpus_bytes));
  std::printf("corpus: %.2f bytes per token; checkpoint %.1f MB written in %.2f s\n",
              static_cast<double>(report->corpus_bytes) / static_cast<double>(report->corpus_tokens),
              static_cast<double>(report->checkpoint_bytes) / 1e6, report->write_seconds);
  return 0;
}

}  // namespace tandem::tools
