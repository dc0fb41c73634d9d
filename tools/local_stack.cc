#include "tools/local_stack.h"

#include <climits>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

StatusOr<std::string> TandemBinary() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return Status::NotFound("cannot find this tandem binary (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

// The last `lines` lines of a log file (empty when it cannot be read).
std::string LogTail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const std::string& line : tail) out += line + "\n";
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<LocalStack>> LocalStack::Start(const LocalStackOptions& o) {
  ASSIGN_OR_RETURN(const std::string tandem, TandemBinary());
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  std::unique_ptr<LocalStack> stack(new LocalStack());
  stack->ready_file_ = o.out_dir + "/" + o.label + ".ready.json";
  stack->log_ = o.out_dir + "/" + o.label + ".log";
  fs::remove(stack->ready_file_, ec);
  std::vector<std::string> args = {tandem,         "local",
                                   "--model",      o.model_dir,
                                   "--prefill",    std::to_string(o.prefill),
                                   "--decode",     std::to_string(o.decode),
                                   "--port",       "0",
                                   "--ready-file", stack->ready_file_,
                                   "--threads",    std::to_string(o.threads > 0 ? o.threads : 1)};
  args.insert(args.end(), o.extra.begin(), o.extra.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::Unavailable("fork failed");
  if (pid == 0) {
    const int fd = open(stack->log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  stack->pid_ = pid;
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(300);
  while (!fs::exists(stack->ready_file_)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      stack->pid_ = -1;
      return Status::Unavailable("tandem local (" + o.label + ") exited before it was ready: see " +
                                 stack->log_ + "; it ends:\n" + LogTail(stack->log_, 20));
    }
    if (Clock::now() > give_up)
      return Status::DeadlineExceeded("tandem local (" + o.label + ") not ready in 300 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::ifstream in(stack->ready_file_);
  const nlohmann::json ready = nlohmann::json::parse(in, nullptr, false);
  if (ready.is_discarded() || !ready.contains("base_url") || !ready["base_url"].is_string()) {
    return Status::Internal("tandem local (" + o.label + "): unreadable ready file " + stack->ready_file_);
  }
  ASSIGN_OR_RETURN(stack->endpoint_, ParseEndpoint(ready["base_url"].get<std::string>(),
                                                   ready.value("api_key", std::string())));
  stack->model_ = ready.value("model", std::string());
  return stack;
}

LocalStack::~LocalStack() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(20);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > give_up) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace tandem::tools
