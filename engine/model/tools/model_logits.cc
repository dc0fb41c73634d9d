// model_logits: the C++ half of the reference check (tests/reference/test_engine_vs_reference.py).
// Loads a checkpoint with the engine's loader, prefills the prompts as one varlen batch (or in
// chunks), then decodes with teacher forcing (the tokens the reference fed) and writes the logits:
//   prefill_logits F32 [Σ len, vocab] (prompts in order), decode_logits F32 [steps, prompts, vocab].
//
// usage: model_logits --checkpoint DIR --prompts FILE.json --out FILE.safetensors
//          [--decode-tokens FILE.json ([steps][prompts] token ids)] [--kv bf16|fp8]
//          [--weights checkpoint|fp8|int4] [--page-tokens N] [--chunk N] [--threads N]
//          [--form auto|expanded|absorbed]
//        model_logits --dummy PRESET ... (a dummy model instead of --checkpoint; timings on stderr)
// --weights fp8 re-quantizes every Linear but lm_head to FP8 block-128, int4 the routed experts to
// INT4 group-32 (the reference quantizers: what `tandem quantize` writes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/formats/float_codecs.h"
#include "engine/io/safetensors_writer.h"
#include "engine/model/dummy_model.h"
#include "engine/model/forward.h"
#include "engine/model/loader.h"
#include "engine/model/presets.h"
#include "engine/model/requantize.h"
#include "engine/runtime/serving_engine.h"

namespace tandem::engine::model {
namespace {

using TokenLists = std::vector<std::vector<int32_t>>;

StatusOr<TokenLists> ReadTokenLists(const std::string& path, const char* key) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot open " + path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(path + ": not JSON");
  if (j.is_object() && j.contains(key)) j = j[key];
  TokenLists out;
  if (!j.is_array()) return Status::InvalidArgument(path + ": expected a list of token-id lists");
  for (const auto& list : j) {
    if (!list.is_array()) return Status::InvalidArgument(path + ": expected a list of token-id lists");
    std::vector<int32_t> ids;
    for (const auto& t : list) {
      if (!t.is_number_integer()) return Status::InvalidArgument(path + ": token ids must be integers");
      ids.push_back(t.get<int32_t>());
    }
    out.push_back(std::move(ids));
  }
  return out;
}

struct Args {
  std::map<std::string, std::string> v = {{"--kv", "bf16"},       {"--weights", "checkpoint"},
                                          {"--page-tokens", "4"}, {"--chunk", "0"},
                                          {"--threads", "2"},     {"--form", "auto"}};
  std::string Get(const std::string& k) const { return v.count(k) ? v.at(k) : ""; }
};

Status Run(const Args& args) {
  ASSIGN_OR_RETURN(TokenLists prompts, ReadTokenLists(args.Get("--prompts"), "prompts"));
  TokenLists steps;
  if (!args.Get("--decode-tokens").empty()) {
    ASSIGN_OR_RETURN(steps, ReadTokenLists(args.Get("--decode-tokens"), "decode_tokens"));
  }
  ThreadPool pool(std::max(1, std::atoi(args.Get("--threads").c_str())));
  StatusOr<ModelWeights> loaded = Status::InvalidArgument("no model");
  if (!args.Get("--dummy").empty()) {
    ASSIGN_OR_RETURN(ModelConfig preset, Preset(args.Get("--dummy")));
    loaded = MakeDummyModel(preset, WeightFormat::kBf16, 1);
  } else {
    loaded = LoadModel(args.Get("--checkpoint"));
  }
  RETURN_IF_ERROR(loaded);
  ModelWeights weights = std::move(loaded).value();
  const std::string to = args.Get("--weights");
  if (to != "checkpoint" && to != "int4" && to != "fp8")
    return Status::InvalidArgument("--weights: checkpoint, fp8 or int4");
  RETURN_IF_ERROR(RequantizeModel(&weights,
                                  to == "int4"  ? WeightFormat::kInt4Group32
                                  : to == "fp8" ? WeightFormat::kFp8Block128
                                                : WeightFormat::kBf16,
                                  &pool));
  const ModelConfig& c = weights.config;

  const size_t page_tokens = static_cast<size_t>(std::max(1, std::atoi(args.Get("--page-tokens").c_str())));
  std::vector<KvSequence> seqs(prompts.size());
  size_t total_pages = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const size_t pages = runtime::KvPagesForTokens(prompts[i].size() + steps.size(), page_tokens);
    // Pages handed out back to front, so logical order differs from physical order.
    for (size_t p = 0; p < pages; ++p)
      seqs[i].pages.push_back(static_cast<kv::PageId>(total_pages + pages - 1 - p));
    total_pages += pages;
  }
  runtime::ServingConfig sc;
  sc.model_weights = &weights;
  sc.kv_dtype = args.Get("--kv") == "fp8" ? KvCacheDtype::kFp8E4M3 : KvCacheDtype::kBf16;
  sc.page_tokens = page_tokens;
  sc.kv_tokens = total_pages * page_tokens;
  sc.threads = pool.num_threads();
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::ServingEngine> serving, runtime::ServingEngine::Open(sc));
  ModelRunner* runner = &serving->runner();

  ForwardOptions options;
  const std::string form = args.Get("--form");
  options.form = form == "expanded"   ? MlaForm::kExpanded
                 : form == "absorbed" ? MlaForm::kAbsorbed
                                      : MlaForm::kAuto;
  const int64_t vocab = c.vocab_size;
  std::vector<std::vector<float>> prefill(prompts.size());  // per prompt [len, vocab]
  const size_t chunk = static_cast<size_t>(std::max(0, std::atoi(args.Get("--chunk").c_str())));
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (size_t done = 0;; done += chunk) {  // chunked prefill: every prompt advances `chunk` tokens a step
    std::vector<StepInput> batch;
    std::vector<size_t> who;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (done >= prompts[i].size()) continue;
      const size_t n = chunk == 0 ? prompts[i].size() : std::min(chunk, prompts[i].size() - done);
      batch.push_back({&seqs[i], std::span<const int32_t>(prompts[i]).subspan(done, n)});
      who.push_back(i);
    }
    if (batch.empty()) break;
    std::vector<float> logits;
    RETURN_IF_ERROR(runner->Forward(batch, options, &logits));
    size_t row = 0;
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t n = batch[b].tokens.size();
      prefill[who[b]].insert(prefill[who[b]].end(), logits.begin() + row * vocab,
                             logits.begin() + (row + n) * vocab);
      row += n;
    }
    if (chunk == 0) break;
  }
  std::vector<float> prefill_all, decode_all;
  for (const auto& p : prefill) prefill_all.insert(prefill_all.end(), p.begin(), p.end());
  std::fprintf(stderr, "model_logits: prefill %zu tokens in %.3f s\n", prefill_all.size() / vocab, seconds());
  start = std::chrono::steady_clock::now();
  for (const auto& step : steps) {
    if (step.size() != prompts.size())
      return Status::InvalidArgument("a decode step must name one token per prompt");
    std::vector<StepInput> batch;
    for (size_t i = 0; i < prompts.size(); ++i)
      batch.push_back({&seqs[i], std::span<const int32_t>(&step[i], 1)});
    std::vector<float> logits;
    RETURN_IF_ERROR(runner->Forward(batch, options, &logits));
    decode_all.insert(decode_all.end(), logits.begin(), logits.end());
  }
  if (!steps.empty()) {
    std::fprintf(stderr, "model_logits: %zu decode steps of %zu sequences in %.3f s\n", steps.size(),
                 prompts.size(), seconds());
  }
  auto bytes = [](const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); };
  std::vector<io::TensorToWrite> out = {
      {"prefill_logits",
       DType::kF32,
       {static_cast<int64_t>(prefill_all.size()) / vocab, vocab},
       bytes(prefill_all)},
      {"decode_logits",
       DType::kF32,
       {static_cast<int64_t>(steps.size()), static_cast<int64_t>(prompts.size()), vocab},
       bytes(decode_all)}};
  return io::WriteSafetensors(args.Get("--out"), out);
}

}  // namespace
}  // namespace tandem::engine::model

int main(int argc, char** argv) {
  tandem::engine::model::Args args;
  for (int i = 1; i + 1 < argc; i += 2) args.v[argv[i]] = argv[i + 1];
  if ((args.Get("--checkpoint").empty() && args.Get("--dummy").empty()) || args.Get("--prompts").empty() ||
      args.Get("--out").empty() || argc % 2 == 0) {
    std::fprintf(
        stderr,
        "usage: model_logits --checkpoint DIR|--dummy PRESET --prompts FILE.json --out FILE.safetensors\n"
        "  [--decode-tokens FILE.json] [--kv bf16|fp8] [--weights checkpoint|fp8|int4]\n"
        "  [--page-tokens N] [--chunk N] [--threads N] [--form auto|expanded|absorbed]\n");
    return 2;
  }
  const tandem::Status s = tandem::engine::model::Run(args);
  if (!s.ok()) {
    std::fprintf(stderr, "model_logits: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
