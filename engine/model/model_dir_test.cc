// LoadModelTokens / LoadModelDir over the test tokenizers of engine/text/testdata (a Kimi-style
// tiktoken.model and a GLM-style tokenizer.json): family detection, eos/bos collection and the
// errors for tokenizers that do not fit the config. tools/make_model_test.cc covers a whole made
// model (weights included).
#include "engine/model/model_dir.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "engine/model/dummy_model.h"
#include "engine/model/presets.h"

namespace tandem::engine::model {
namespace {

namespace fs = std::filesystem;

const std::string kTestdata = TANDEM_TEXT_TESTDATA_DIR;

class ModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(::testing::TempDir()) / (std::string("model_dir_") + info->name())).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void CopyKimi() {
    fs::copy_file(kTestdata + "/kimi_like/tiktoken.model", dir_ + "/tiktoken.model");
    fs::copy_file(kTestdata + "/kimi_like/tokenizer_config.json", dir_ + "/tokenizer_config.json");
  }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }
  static ModelConfig Config(const char* preset, int64_t vocab) {
    ModelConfig c = Preset(preset).value();
    c.vocab_size = vocab;
    return c;
  }

  std::string dir_;
};

// kimi_like: 3256 ranks, then [BOS] 3256, [EOS] 3257, <|im_end|> 3258, ... 3267.
TEST_F(ModelDirTest, KimiTiktokenWithoutTokenIdsInTheConfigs) {
  CopyKimi();
  StatusOr<ModelTokens> t = LoadModelTokens(dir_, Config("tiny", 3268));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->chat_family, text::ChatFamily::kKimiK2);
  EXPECT_EQ(t->tokenizer_path, dir_ + "/tiktoken.model");
  EXPECT_EQ(t->tokenizer->vocab_size(), 3268);
  EXPECT_FALSE(t->bos_token_id.has_value());
  EXPECT_EQ(t->eos_token_ids, std::vector<int32_t>{3258});  // <|im_end|>, the end of an assistant turn
  // A config vocabulary larger than the tokenizer's is padding, as in real checkpoints.
  EXPECT_TRUE(LoadModelTokens(dir_, Config("tiny", 4096)).ok());
}

TEST_F(ModelDirTest, EosAndBosFromEveryConfigFile) {
  CopyKimi();
  Write("config.json", R"({"bos_token_id": 3256, "text_config": {"eos_token_id": 3257}})");
  Write("generation_config.json", R"({"eos_token_id": [3257, 3263]})");
  StatusOr<ModelTokens> t = LoadModelTokens(dir_, Config("tiny", 3268));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->bos_token_id, 3256);
  EXPECT_EQ(t->eos_token_ids, (std::vector<int32_t>{3257, 3258, 3263}));
}

TEST_F(ModelDirTest, TokenIdsThatDoNotFitAreErrors) {
  CopyKimi();
  const ModelConfig c = Config("tiny", 3268);
  Write("config.json", R"({"eos_token_id": 5000})");
  StatusOr<ModelTokens> t = LoadModelTokens(dir_, c);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("eos_token_id 5000"), std::string::npos) << t.status().message();
  Write("config.json", R"({"eos_token_id": "[EOS]"})");
  EXPECT_EQ(LoadModelTokens(dir_, c).status().code(), StatusCode::kInvalidArgument);
  Write("config.json", R"({"eos_token_id": 3257})");
  Write("generation_config.json", R"({"eos_token_id": -1})");
  EXPECT_EQ(LoadModelTokens(dir_, c).status().code(), StatusCode::kInvalidArgument);
  Write("generation_config.json", R"({"eos_token_id": 3257,})");
  EXPECT_EQ(LoadModelTokens(dir_, c).status().code(), StatusCode::kDataLoss);  // malformed JSON
}

TEST_F(ModelDirTest, TokenizerLargerThanTheConfigOrMissingTemplateTokens) {
  CopyKimi();
  StatusOr<ModelTokens> t = LoadModelTokens(dir_, Config("tiny", 3000));
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("ids up to 3267"), std::string::npos) << t.status().message();
  // Without tokenizer_config.json the tiktoken file has no special tokens: the template's are missing.
  fs::remove(dir_ + "/tokenizer_config.json");
  t = LoadModelTokens(dir_, Config("tiny", 3268));
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("'<|im_system|>'"), std::string::npos) << t.status().message();
  fs::remove(dir_ + "/tiktoken.model");
  EXPECT_EQ(LoadModelTokens(dir_, Config("tiny", 3268)).status().code(), StatusCode::kNotFound);
}

TEST_F(ModelDirTest, GlmTokenizerJsonAndItsEndOfTurnTokens) {
  fs::copy_file(kTestdata + "/glm_like/tokenizer.json", dir_ + "/tokenizer.json");
  Write("tokenizer_config.json", R"({"eos_token": "<|endoftext|>"})");
  Write("config.json", R"({"eos_token_id": [0, 7, 9]})");
  StatusOr<ModelTokens> t = LoadModelTokens(dir_, Config("tiny-glm", 3328));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->chat_family, text::ChatFamily::kGlm);
  EXPECT_EQ(t->eos_token_ids, (std::vector<int32_t>{0, 7, 9}));  // <|endoftext|>, <|user|>, <|observation|>
  // The same tokenizer under a Kimi-shaped config lacks the Kimi template's tokens.
  EXPECT_EQ(LoadModelTokens(dir_, Config("tiny", 3328)).status().code(), StatusCode::kInvalidArgument);
  // A tokenizer_config eos that config.json does not list.
  Write("config.json", R"({"eos_token_id": 7})");
  t = LoadModelTokens(dir_, Config("tiny-glm", 3328));
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("eos_token '<|endoftext|>' is id 0"), std::string::npos)
      << t.status().message();
}

TEST_F(ModelDirTest, LoadModelDirChecksTheTokenizerBeforeTheWeights) {
  CopyKimi();
  ASSERT_TRUE(WriteDummyCheckpoint(dir_, Config("tiny", 3000), WeightFormat::kBf16, 1).ok());
  StatusOr<std::unique_ptr<ModelDir>> m = LoadModelDir(dir_);
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);  // 3268 tokenizer ids, vocab_size 3000
  ASSERT_TRUE(WriteDummyCheckpoint(dir_, Config("tiny", 3328), WeightFormat::kBf16, 1).ok());
  m = LoadModelDir(dir_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->weights.config.vocab_size, 3328);
  EXPECT_EQ((*m)->path, dir_);
  EXPECT_EQ((*m)->tokens.tokenizer->vocab_size(), 3268);
}

}  // namespace
}  // namespace tandem::engine::model
