// `tandem generate`: one prompt through the serving Engine (unified role) on a model directory,
// the text streamed to stdout as it is detokenized; the finish reason and speeds go to stderr.
//
//   tandem generate --model DIR --prompt TEXT [--max-tokens N] [--temperature T] [--seed N]
//                   [--chat] [--kv bf16|fp8_e4m3] [--threads N]
// --chat renders the prompt as one user turn with the model's chat template (LoadModelDir picks
// the family); without it the text is encoded as is (special tokens in it are parsed).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/runtime/serving_engine.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"
#include "tools/commands.h"

namespace tandem::tools {
namespace {

namespace model = engine::model;
namespace runtime = engine::runtime;
namespace text = engine::text;
using engine::KvCacheDtype;

constexpr char kUsage[] =
    "usage: tandem generate --model DIR --prompt TEXT [--max-tokens N (default 32)] [--temperature T "
    "(default 0)]\n"
    "                       [--seed N] [--chat] [--kv bf16|fp8_e4m3] [--threads N]\n";

constexpr size_t kPageTokens = 16;

struct GenerateArgs {
  std::string model_dir;
  std::string prompt;
  bool have_prompt = false;
  bool chat = false;
  runtime::SamplingParams params;
  KvCacheDtype kv = KvCacheDtype::kBf16;
  int threads = 0;
};

bool ParseArgs(const std::vector<std::string>& args, GenerateArgs* out) {
  out->params.max_tokens = 32;
  out->params.temperature = 0.0f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--chat") {
      out->chat = true;
      continue;
    }
    if (i + 1 >= args.size()) return false;
    const std::string& value = args[++i];
    char* end = nullptr;
    if (flag == "--model") {
      out->model_dir = value;
    } else if (flag == "--prompt") {
      out->prompt = value;
      out->have_prompt = true;
    } else if (flag == "--max-tokens") {
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > 1'000'000) return false;
      out->params.max_tokens = static_cast<int32_t>(n);
    } else if (flag == "--temperature") {
      const float t = std::strtof(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(t >= 0.0f && t <= 100.0f)) return false;
      out->params.temperature = t;
    } else if (flag == "--seed") {
      const unsigned long long s = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || value[0] == '-' || *end != '\0') return false;
      out->params.seed = s;
    } else if (flag == "--kv" && (value == "bf16" || value == "fp8_e4m3")) {
      out->kv = value == "bf16" ? KvCacheDtype::kBf16 : KvCacheDtype::kFp8E4M3;
    } else if (flag == "--threads") {
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > 256) return false;
      out->threads = static_cast<int>(n);
    } else {
      return false;
    }
  }
  return !out->model_dir.empty() && out->have_prompt;
}

StatusOr<std::vector<int32_t>> PromptTokens(const GenerateArgs& args, const runtime::ServingEngine& serving) {
  std::string prompt = args.prompt;
  if (args.chat) {
    text::ChatRequest chat;
    chat.messages.push_back({.role = text::ChatRole::kUser, .content = args.prompt});
    ASSIGN_OR_RETURN(prompt, text::RenderChat(serving.chat_family(), chat));
  }
  std::vector<int32_t> ids = serving.tokenizer()->Encode(prompt);
  if (ids.empty()) return Status::InvalidArgument("the prompt is empty");
  return ids;
}

// The text of each step goes to stdout as it comes; returns the request's final output.
StatusOr<runtime::RequestOutput> Run(runtime::Engine& engine, const runtime::Request& request,
                                     int64_t* tokens, double* first_token_s, double* total_s) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(runtime::RequestId id, engine.Submit(request));
  for (;;) {
    std::vector<runtime::RequestOutput> outputs = engine.Step();
    if (outputs.empty() && engine.Stats().running + engine.Stats().waiting == 0) {
      return Status::Internal("the engine holds no request but never finished it");
    }
    for (runtime::RequestOutput& out : outputs) {
      if (out.id != id) continue;
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (*tokens == 0 && !out.new_tokens.empty()) *first_token_s = now;
      *tokens += static_cast<int64_t>(out.new_tokens.size());
      std::fwrite(out.text_delta.data(), 1, out.text_delta.size(), stdout);
      std::fflush(stdout);
      if (out.finish) {
        *total_s = now;
        return out;
      }
    }
  }
}

Status Generate(const GenerateArgs& args) {
  runtime::ServingConfig sc;
  sc.model_dir = args.model_dir;
  sc.kv_dtype = args.kv;
  sc.page_tokens = kPageTokens;
  sc.threads = args.threads;
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::ServingEngine> serving, runtime::ServingEngine::Open(sc));
  const model::ModelConfig& c = serving->model_config();
  runtime::Request request;
  ASSIGN_OR_RETURN(request.prompt, PromptTokens(args, *serving));
  request.params = args.params;
  const int64_t context = static_cast<int64_t>(request.prompt.size()) + args.params.max_tokens;
  if (context > c.max_position_embeddings) {
    return Status::InvalidArgument("prompt (" + std::to_string(request.prompt.size()) +
                                   " tokens) + max tokens (" + std::to_string(args.params.max_tokens) +
                                   ") exceed the model's context of " +
                                   std::to_string(c.max_position_embeddings));
  }
  runtime::Engine& engine = serving->engine();
  const int threads = serving->threads();
  int64_t tokens = 0;
  double first_token_s = 0, total_s = 0;
  ASSIGN_OR_RETURN(runtime::RequestOutput last, Run(engine, request, &tokens, &first_token_s, &total_s));
  std::printf("\n");
  std::fflush(stdout);  // the text's line ends before the report on stderr
  const double decode_s = total_s - first_token_s;
  std::fprintf(stderr, "finish: %s%s%s; prompt %zu tokens, generated %lld tokens\n",
               std::string(runtime::FinishReasonName(*last.finish)).c_str(),
               last.finish_detail.empty() ? "" : " ", last.finish_detail.c_str(), request.prompt.size(),
               static_cast<long long>(tokens));
  std::fprintf(stderr, "prefill + first token %.1f ms (%.0f tok/s), decode %.1f tok/s, %d threads\n",
               first_token_s * 1e3,
               static_cast<double>(request.prompt.size()) / std::max(first_token_s, 1e-9),
               tokens > 1 ? static_cast<double>(tokens - 1) / std::max(decode_s, 1e-9) : 0.0, threads);
  return Status::Ok();
}

}  // namespace

int RunGenerate(const std::vector<std::string>& args) {
  GenerateArgs parsed;
  if (!ParseArgs(args, &parsed)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (Status s = Generate(parsed); !s.ok()) {
    std::fprintf(stderr, "tandem generate: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace tandem::tools
