// Tokenizer encode throughput (MB/s of UTF-8 input, one thread) for the two formats on a mixed
// multilingual text: build/engine/tokenizer_bench. Numbers in docs/tokenizers.md.
//
// The vocabularies are the small test ones (engine/text/testdata, 3k merges); `--benchmark_filter`
// selects a case. Real vocabularies (150k tokens) merge fewer times per piece, so they encode faster.

#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>

#include "engine/text/detokenizer.h"
#include "engine/text/tokenizer.h"

namespace {

using tandem::engine::text::Tokenizer;

// ~1 MiB of mixed text: prose in several scripts, code, numbers, whitespace runs.
const std::string& Corpus() {
  static const std::string text = [] {
    const char* kParts[] = {
        "The quick brown fox jumps over the lazy dog. It's what they'll say, isn't it? ",
        "Tokenizers split text into pieces; byte-pair encoding merges the most frequent pairs first.\n",
        "Съешь же ещё этих мягких французских булок, да выпей чаю. ",
        "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！",
        "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ ",
        "أنا قادر على أكل الزجاج و هذا لا يؤلمني. ",
        "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];  // dot product\n}\n",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"San Francisco\", \"days\": 3}}\n",
        "Numbers: 3.14159 2026-11-29 1,234,567 0xDEADBEEF 🙂 👍🏽   \n\n",
    };
    std::string s;
    for (int i = 0; s.size() < (1 << 20); ++i) s += kParts[(i * 7) % 9];
    return s;
  }();
  return text;
}

void Encode(benchmark::State& state, const char* file) {
  auto tokenizer = Tokenizer::LoadFile(std::string(TANDEM_TOKENIZER_TESTDATA) + "/" + file);
  if (!tokenizer.ok()) {
    state.SkipWithError(tokenizer.status().ToString().c_str());
    return;
  }
  const std::string& text = Corpus();
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tokenizer->Encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(tokens);
}

void Decode(benchmark::State& state) {
  auto tokenizer = Tokenizer::LoadFile(std::string(TANDEM_TOKENIZER_TESTDATA) + "/glm_like/tokenizer.json");
  if (!tokenizer.ok()) {
    state.SkipWithError(tokenizer.status().ToString().c_str());
    return;
  }
  const std::vector<int32_t> ids = tokenizer->Encode(Corpus());
  for (auto _ : state) {
    tandem::engine::text::Detokenizer detokenizer(&*tokenizer);
    size_t bytes = 0;
    for (int32_t id : ids) bytes += detokenizer.Add(id)->size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Corpus().size()));
}

BENCHMARK_CAPTURE(Encode, hf_bpe_glm_like, "glm_like/tokenizer.json")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Encode, tiktoken_kimi_like, "kimi_like/tiktoken.model")->Unit(benchmark::kMillisecond);
BENCHMARK(Decode)->Name("StreamingDetokenize/glm_like")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
