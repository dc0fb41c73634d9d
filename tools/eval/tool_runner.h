#pragma once
// Runs a tool-calling suite through the OpenAI chat completions API of one endpoint: each case as
// one request (its messages and tools, tool_choice auto, temperature 0), `concurrency` in flight.

#include <string>
#include <vector>

#include "tools/eval/tool_suite.h"
#include "tools/http_client.h"

namespace tandem::tools::eval {

struct RunOptions {
  std::string model;  // the request's "model"
  int max_tokens = 256;
  int concurrency = 4;
  double timeout_s = 600;  // per request
};

// One answer per case, in the suite's order. A failed request (transport, HTTP status, a body that
// is not a chat completion) is an answer with `error` set; nothing here stops the run.
std::vector<CaseAnswer> RunToolSuite(const Endpoint& endpoint, const std::vector<ToolCase>& cases,
                                     const RunOptions& options);

}  // namespace tandem::tools::eval
