#pragma once
// A `tandem local` stack as a child process of a tool (`bench serve`, `bench integrity`, `eval
// tools`): started with a ready file, its output in OUT/<label>.log, stopped (SIGTERM, then SIGKILL
// after 20 s) when the LocalStack goes away.

#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/status.h"
#include "tools/http_client.h"

namespace tandem::tools {

struct LocalStackOptions {
  std::string model_dir;  // what the stack serves
  std::string out_dir;    // OUT: the ready file and the log go here (created when missing)
  std::string label;      // file names: OUT/<label>.ready.json, OUT/<label>.log
  int prefill = 1, decode = 1;
  int threads = 1;                 // per agent
  std::vector<std::string> extra;  // more `tandem local` flags (--decode-kv fp8_e4m3, ...)
};

class LocalStack {
 public:
  // Starts the stack from this very binary (/proc/self/exe) and waits up to 300 s for its ready
  // file. Errors: Unavailable when it exits first (the log says why), DeadlineExceeded.
  static StatusOr<std::unique_ptr<LocalStack>> Start(const LocalStackOptions& options);
  ~LocalStack();
  LocalStack(const LocalStack&) = delete;
  LocalStack& operator=(const LocalStack&) = delete;

  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& model() const { return model_; }  // the served model's name
  const std::string& log() const { return log_; }

 private:
  LocalStack() = default;
  pid_t pid_ = -1;
  std::string ready_file_, log_;
  Endpoint endpoint_;
  std::string model_;
};

}  // namespace tandem::tools
