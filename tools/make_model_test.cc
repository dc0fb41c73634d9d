// `tandem make-model` end to end: the directory it writes loads back through the same code as a
// real Kimi K2 checkpoint (LoadModelDir: config, weights, tokenizer, chat family), is the same
// bytes for the same arguments, and runs a forward step on a tokenized chat prompt.
#include "tools/make_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/model/forward.h"
#include "engine/model/model_dir.h"
#include "engine/runtime/serving_engine.h"
#include "engine/text/chat_template.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
namespace model = engine::model;
namespace text = engine::text;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `ids` through the model directory opened by the serving front door (one prefill step);
// the last token's logits must be finite.
void ForwardOnce(const model::ModelDir& m, const std::vector<int32_t>& ids) {
  engine::runtime::ServingConfig sc;
  sc.model_dir = m.path;
  sc.kv_tokens = ids.size();
  sc.threads = 2;
  auto serving = engine::runtime::ServingEngine::Open(sc);
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  model::ModelRunner& runner = (*serving)->runner();
  const size_t pages = (*serving)->kv_pool().num_pages();
  model::KvSequence seq;
  for (size_t p = 0; p < pages; ++p) seq.pages.push_back(static_cast<engine::kv::PageId>(p));
  const model::StepInput input{&seq, ids};
  model::ForwardOptions options;
  options.all_logits = false;
  std::vector<float> logits;
  ASSERT_TRUE(runner.Forward({&input, 1}, options, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<size_t>(m.weights.config.vocab_size));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  EXPECT_EQ(seq.num_tokens, static_cast<int64_t>(ids.size()));
}

class MakeModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: CTest runs each test case of this binary as its own process, maybe in parallel.
    root_ = new std::string(
        (fs::path(::testing::TempDir()) / ("tools_make_model_" + std::to_string(::getpid()))).string());
    fs::remove_all(*root_);
    MakeModelOptions o;
    o.out_dir = *root_ + "/tiny";
    o.seed = 5;
    StatusOr<MakeModelReport> r = MakeModel(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    report_ = new MakeModelReport(*r);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
    delete report_;
  }
  static std::string Dir() { return *root_ + "/tiny"; }

  static std::string* root_;
  static MakeModelReport* report_;
};
std::string* MakeModelTest::root_ = nullptr;
MakeModelReport* MakeModelTest::report_ = nullptr;

TEST_F(MakeModelTest, LoadsWithAConsistentVocabulary) {
  StatusOr<std::unique_ptr<model::ModelDir>> m = model::LoadModelDir(Dir());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const model::ModelConfig& c = (*m)->weights.config;
  const text::Tokenizer& tok = *(*m)->tokens.tokenizer;
  EXPECT_EQ(c.vocab_size, 4096);
  EXPECT_EQ(tok.vocab_size(), 4096);
  EXPECT_EQ(report_->ranks, 4096 - kKimiSpecialSlots);
  EXPECT_EQ((*m)->tokens.chat_family, text::ChatFamily::kKimiK2);
  // Kimi's layout: specials in the last 256 ids, [BOS] first.
  const int32_t first = 4096 - kKimiSpecialSlots;
  EXPECT_EQ(tok.AddedTokenId("[BOS]"), first);
  EXPECT_EQ(tok.AddedTokenId("[EOS]"), first + 1);
  EXPECT_EQ(tok.AddedTokenId("<|im_end|>"), first + 2);
  EXPECT_EQ(tok.AddedTokenId("<|im_middle|>"), first + 17);
  EXPECT_EQ(tok.AddedTokenId("[PAD]"), 4095);
  for (int32_t id = first; id < 4096; ++id) EXPECT_TRUE(tok.IsSpecial(id)) << id;
  for (int32_t id = 0; id < first; ++id) ASSERT_FALSE(tok.IsSpecial(id)) << id;
  EXPECT_EQ((*m)->tokens.bos_token_id, first);
  EXPECT_EQ((*m)->tokens.eos_token_ids, (std::vector<int32_t>{first + 1, first + 2}));
  // The vocabulary is real: the corpus takes several bytes per token.
  EXPECT_GT(static_cast<double>(report_->corpus_bytes) / static_cast<double>(report_->corpus_tokens), 2.5);
}

TEST_F(MakeModelTest, SameArgumentsSameBytes) {
  MakeModelOptions o;
  o.out_dir = *root_ + "/again";
  o.seed = 5;
  ASSERT_TRUE(MakeModel(o).ok());
  o.out_dir = *root_ + "/seed6";
  o.seed = 6;
  ASSERT_TRUE(MakeModel(o).ok());
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(Dir()))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                             "tiktoken.model", "tokenizer_config.json"}));
  for (const std::string& name : names) {
    EXPECT_EQ(ReadFile(*root_ + "/again/" + name), ReadFile(Dir() + "/" + name)) << name;
    // Another seed changes the weights only.
    if (name == "model.safetensors") {
      EXPECT_NE(ReadFile(*root_ + "/seed6/" + name), ReadFile(Dir() + "/" + name));
    } else {
      EXPECT_EQ(ReadFile(*root_ + "/seed6/" + name), ReadFile(Dir() + "/" + name)) << name;
    }
  }
}

TEST_F(MakeModelTest, ChatPromptTokenizesAndRunsAForwardStep) {
  StatusOr<std::unique_ptr<model::ModelDir>> m = model::LoadModelDir(Dir());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const text::Tokenizer& tok = *(*m)->tokens.tokenizer;
  text::ChatRequest chat;
  chat.tools_json = {
      R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}})"};
  chat.messages = {{.role = text::ChatRole::kUser, .content = "What's the weather in Paris? 今天天气很好"}};
  text::ChatMessage call{.role = text::ChatRole::kAssistant};
  call.tool_calls = {{"functions.get_weather:0", "get_weather", R"({"city": "Paris"})"}};
  chat.messages.push_back(call);
  chat.messages.push_back({.role = text::ChatRole::kTool,
                           .content = R"({"sky": "clear"})",
                           .tool_call_id = "functions.get_weather:0"});
  StatusOr<std::string> prompt = text::RenderChat((*m)->tokens.chat_family, chat);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  const std::vector<int32_t> ids = tok.Encode(*prompt);
  // Each special token of the template is one id, and the ids decode back to the prompt.
  for (const char* special :
       {"<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>",
        "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
        "<|tool_call_end|>", "<|tool_calls_section_end|>"}) {
    const int32_t id = *tok.AddedTokenId(special);
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << special;
  }
  EXPECT_EQ(ids.back(), *tok.AddedTokenId("<|im_middle|>"));  // the generation prompt's end
  EXPECT_EQ(*tok.DecodeBytes(ids), *prompt);
  EXPECT_LT(ids.size(), prompt->size() / 2);

  ForwardOnce(**m, ids);
}

TEST_F(MakeModelTest, QuantizedWeightsLoadToo) {
  for (engine::WeightFormat format :
       {engine::WeightFormat::kFp8Block128, engine::WeightFormat::kInt4Group32}) {
    MakeModelOptions o;
    o.out_dir = *root_ + "/" + std::string(engine::WeightFormatName(format));
    o.weights = format;
    o.vocab_size = 1024;
    ASSERT_TRUE(MakeModel(o).ok()) << o.out_dir;
    StatusOr<std::unique_ptr<model::ModelDir>> m = model::LoadModelDir(o.out_dir);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ((*m)->tokens.tokenizer->vocab_size(), 1024);
    EXPECT_GT((*m)->weights.LinearFormatCounts()[format == engine::WeightFormat::kFp8Block128 ? 1 : 2], 0);
  }
}

TEST_F(MakeModelTest, MismatchedTokenizersAreClearErrors) {
  const std::string dir = *root_ + "/broken";
  fs::copy(Dir(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  StatusOr<model::ModelConfig> config = model::LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  model::ModelConfig small = *config;
  small.vocab_size = 2048;
  StatusOr<model::ModelTokens> t = model::LoadModelTokens(dir, small);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("vocab_size is 2048"), std::string::npos) << t.status().message();

  std::string tc = ReadFile(dir + "/tokenizer_config.json");
  const size_t eos = tc.find(R"("eos_token": "[EOS]")");
  ASSERT_NE(eos, std::string::npos);
  std::ofstream(dir + "/tokenizer_config.json")
      << tc.substr(0, eos) + R"("eos_token": "[PAD]")" + tc.substr(eos + 20);
  t = model::LoadModelTokens(dir, *config);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("eos_token '[PAD]'"), std::string::npos) << t.status().message();

  fs::remove(dir + "/tiktoken.model");
  EXPECT_EQ(model::LoadModelTokens(dir, *config).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(model::LoadModelDir(dir).status().code(), StatusCode::kNotFound);
}

// `tandem generate` on the made model: greedy is reproducible, a seeded sample too, and the chat
// prompt goes through the Kimi template (an unknown model or bad flags fail).
TEST_F(MakeModelTest, GenerateStreamsReproducibleText) {
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--model",      Dir(), "--prompt", "The weather today is",
                                     "--max-tokens", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    ::testing::internal::CaptureStdout();
    const int rc = RunGenerate(args);
    std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0) << out;
    return out;
  };
  const std::string greedy = run({});
  EXPECT_GT(greedy.size(), 1u);  // ten tokens of text and a newline (no eos is likely at random)
  EXPECT_EQ(run({}), greedy);
  EXPECT_EQ(run({"--temperature", "1", "--seed", "9"}), run({"--temperature", "1", "--seed", "9"}));
  EXPECT_EQ(run({"--chat", "--kv", "fp8_e4m3"}), run({"--chat", "--kv", "fp8_e4m3"}));
  EXPECT_EQ(RunGenerate({"--model", Dir()}), 2);
  EXPECT_EQ(RunGenerate({"--model", Dir(), "--prompt", "x", "--max-tokens", "0"}), 2);
  EXPECT_EQ(RunGenerate({"--model", *root_ + "/none", "--prompt", "x"}), 1);
  EXPECT_EQ(RunGenerate({"--model", Dir(), "--prompt", "x", "--max-tokens", "5000"}), 1);  // past the context
}

// tiny-glm: a GLM-layout directory (tokenizer.json with GLM 4.5's added tokens) that loads as the
// GLM family, renders and tokenizes a GLM chat with a tool call, and runs a forward step.
TEST_F(MakeModelTest, GlmPresetWritesAGlmTokenizer) {
  MakeModelOptions o;
  o.out_dir = *root_ + "/glm";
  o.preset = "tiny-glm";
  StatusOr<MakeModelReport> r = MakeModel(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(fs::exists(o.out_dir + "/tokenizer.json"));
  EXPECT_FALSE(fs::exists(o.out_dir + "/tiktoken.model"));
  StatusOr<std::unique_ptr<model::ModelDir>> m = model::LoadModelDir(o.out_dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const text::Tokenizer& tok = *(*m)->tokens.tokenizer;
  EXPECT_EQ((*m)->tokens.chat_family, text::ChatFamily::kGlm);
  EXPECT_EQ(tok.vocab_size(), 4096);
  EXPECT_EQ((*m)->weights.config.vocab_size, 4096);
  const int32_t first = static_cast<int32_t>(r->ranks);
  EXPECT_EQ(tok.AddedTokenId("<|endoftext|>"), first);
  EXPECT_TRUE(tok.IsSpecial(*tok.AddedTokenId("<|user|>")));
  EXPECT_FALSE(tok.IsSpecial(*tok.AddedTokenId("<tool_call>")));  // kept in decoded text
  EXPECT_FALSE((*m)->tokens.bos_token_id.has_value());
  EXPECT_EQ((*m)->tokens.eos_token_ids, (std::vector<int32_t>{first, *tok.AddedTokenId("<|user|>"),
                                                              *tok.AddedTokenId("<|observation|>")}));

  text::ChatRequest chat;
  chat.messages = {{.role = text::ChatRole::kUser, .content = "Weather in Paris?"}};
  text::ChatMessage call{.role = text::ChatRole::kAssistant};
  call.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris"})"}};
  chat.messages.push_back(call);
  StatusOr<std::string> prompt = text::RenderChat(text::ChatFamily::kGlm, chat);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  const std::vector<int32_t> ids = tok.Encode(*prompt);
  for (const char* added : {"[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<tool_call>", "<arg_key>",
                            "</arg_value>", "</tool_call>"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), *tok.AddedTokenId(added)), ids.end()) << added;
  }
  EXPECT_EQ(*tok.DecodeBytes(ids), *prompt);
  ForwardOnce(**m, ids);
}

TEST(MakeModelCliTest, ArgumentsAndErrors) {
  const std::string out =
      (fs::path(::testing::TempDir()) / ("tools_make_model_cli_" + std::to_string(::getpid()))).string();
  EXPECT_EQ(RunMakeModel({}), 2);
  EXPECT_EQ(RunMakeModel({"--out"}), 2);
  EXPECT_EQ(RunMakeModel({"--out", out, "--weights", "int8"}), 2);
  EXPECT_EQ(RunMakeModel({"--out", out, "--seed", "-1"}), 2);
  EXPECT_EQ(RunMakeModel({"--out", out, "--vocab-size", "100"}), 1);
  EXPECT_EQ(RunMakeModel({"--out", out, "--preset", "kimi-k2.6"}), 1);
  EXPECT_EQ(RunMakeModel({"--out", out, "--preset", "nope"}), 1);
  EXPECT_EQ(RunMakeModel({"--out", out, "--vocab-size", "1024", "--seed", "3"}), 0);
  EXPECT_TRUE(fs::exists(out + "/tiktoken.model"));
  fs::remove_all(out);
}

}  // namespace
}  // namespace tandem::tools
