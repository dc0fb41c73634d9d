#include "tools/eval/tool_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "common/json_depth.h"

namespace tandem::tools::eval {
namespace {

using Json = nlohmann::json;

CaseAnswer AskOne(const Endpoint& endpoint, const ToolCase& c, const RunOptions& o) {
  CaseAnswer failed;
  failed.id = c.id;
  Json body = {{"model", o.model},
               {"messages", c.messages},
               {"temperature", 0},
               {"max_tokens", o.max_tokens},
               {"stream", false}};
  if (!c.tools.empty()) {
    body["tools"] = c.tools;
    body["tool_choice"] = "auto";
  }
  const StatusOr<HttpAnswer> answer =
      HttpCall(endpoint, "POST", endpoint.ApiPath("chat/completions"), body.dump(),
               std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
  if (!answer.ok()) {
    failed.error = answer.status().ToString();
    return failed;
  }
  if (answer->status != 200) {
    failed.error = "HTTP " + std::to_string(answer->status) + ": " + answer->body.substr(0, 512);
    return failed;
  }
  const Json response = JsonDepthWithin(answer->body, 64) ? Json::parse(answer->body, nullptr, false)
                                                          : Json(Json::value_t::discarded);
  if (response.is_discarded()) {
    failed.error = "the answer is not JSON: " + answer->body.substr(0, 256);
    return failed;
  }
  StatusOr<CaseAnswer> parsed = AnswerFromChatCompletion(c.id, response);
  if (!parsed.ok()) {
    failed.error = parsed.status().ToString();
    return failed;
  }
  return std::move(*parsed);
}

}  // namespace

std::vector<CaseAnswer> RunToolSuite(const Endpoint& endpoint, const std::vector<ToolCase>& cases,
                                     const RunOptions& options) {
  std::vector<CaseAnswer> answers(cases.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex print_mu;
  const bool tty = isatty(fileno(stderr)) != 0;
  auto worker = [&] {
    for (size_t i = next++; i < cases.size(); i = next++) {
      answers[i] = AskOne(endpoint, cases[i], options);
      const size_t n = ++done;
      std::lock_guard<std::mutex> lock(print_mu);
      if (tty || n == cases.size() || n % 25 == 0) {
        std::fprintf(stderr, "%s  %zu/%zu cases%s", tty ? "\r" : "", n, cases.size(),
                     tty && n < cases.size() ? "" : "\n");
      }
    }
  };
  std::vector<std::thread> threads;
  const int workers = std::max(1, std::min<int>(options.concurrency, static_cast<int>(cases.size())));
  for (int w = 0; w < workers; ++w) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  return answers;
}

}  // namespace tandem::tools::eval
