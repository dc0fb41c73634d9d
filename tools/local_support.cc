#include "tools/local_support.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/dtype.h"
#include "engine/model/model_config.h"
#include "tools/commands.h"

namespace tandem::tools {

namespace fs = std::filesystem;

namespace {

engine::WeightFormat StoredFormat(const engine::model::ModelConfig& c) {
  using Method = engine::model::QuantizationConfig::Method;
  switch (c.quantization.method) {
    case Method::kFp8Block128: return engine::WeightFormat::kFp8Block128;
    case Method::kCompressedInt4: return engine::WeightFormat::kInt4Group32;
    case Method::kNone: break;
  }
  return engine::WeightFormat::kBf16;
}

// Identifies a model directory's contents: each file's name, size and modification time.
std::string SourceStamp(const std::string& dir) {
  std::vector<std::string> entries;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    entries.push_back(e.path().filename().string() + ":" + std::to_string(e.file_size()) + ":" +
                      std::to_string(e.last_write_time().time_since_epoch().count()));
  }
  std::sort(entries.begin(), entries.end());
  std::string out;
  for (const std::string& e : entries) out += e + ";";
  return out;
}

}  // namespace

namespace {

// A loopback TCP socket (close-on-exec) bound to `port` (0: any), SO_REUSEADDR when `reuse`; -1
// when the bind failed. *bound: the port bound.
int BindLoopback(uint16_t port, bool reuse, uint16_t* bound) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *bound = ntohs(addr.sin_port);
  return fd;
}

// The first port of the kernel's ephemeral range (32768 when it cannot be read).
int EphemeralRangeStart() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  return in >> lo >> hi && lo > 0 ? lo : 32768;
}

}  // namespace

StatusOr<uint16_t> PortReservations::Reserve() {
  constexpr int kLow = 10000;
  const int high = EphemeralRangeStart();
  thread_local std::mt19937 rng(std::random_device{}() ^ static_cast<uint32_t>(getpid()));
  for (int attempt = 0; attempt < 64; ++attempt) {
    // Below the ephemeral range when there is room (no bind(0) or outgoing connection lands
    // there), else the kernel's pick.
    const uint16_t want = high - kLow >= 1000
                              ? static_cast<uint16_t>(std::uniform_int_distribution<int>(kLow, high - 1)(rng))
                              : 0;
    uint16_t port = 0;
    const int probe = BindLoopback(want, /*reuse=*/false, &port);  // fails if anyone holds it
    if (probe < 0) continue;
    close(probe);
    uint16_t held = 0;
    const int fd = BindLoopback(port, /*reuse=*/true, &held);
    if (fd < 0) continue;
    fds_.push_back(fd);
    return held;
  }
  return Status::Unavailable("no free loopback port found in 64 tries");
}

void PortReservations::ReleaseAll() {
  for (int fd : fds_) close(fd);
  fds_.clear();
}

StatusOr<std::string> CheckpointIn(const std::string& model_dir, const std::string& weights) {
  ASSIGN_OR_RETURN(engine::WeightFormat want, engine::ParseWeightFormat(weights));
  ASSIGN_OR_RETURN(engine::model::ModelConfig config, engine::model::LoadModelConfig(model_dir));
  const engine::WeightFormat stored = StoredFormat(config);
  if (stored == want) return model_dir;
  if (stored != engine::WeightFormat::kBf16) {
    return Status::InvalidArgument(model_dir + " holds " + std::string(engine::WeightFormatName(stored)) +
                                   " weights; tandem local makes other formats from a bf16 model directory");
  }
  std::string dir = model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  dir += "-" + weights;
  // Our own conversions carry a stamp of their source; a stale one is redone, anything else in
  // the way is the user's and left alone.
  const std::string stamp_path = dir + "/.tandem-local-source";
  const std::string stamp = SourceStamp(model_dir);
  if (fs::exists(dir)) {
    std::ifstream in(stamp_path);
    std::string have;
    std::getline(in, have);
    if (!in) {
      return Status::FailedPrecondition(
          dir +
          " exists and was not made by tandem local: remove it, or pass a model "
          "directory that holds " +
          weights + " weights");
    }
    if (have == stamp) return dir;
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) return Status::Internal("removing the stale " + dir + ": " + ec.message());
  }
  std::fprintf(stderr, "tandem local: quantizing %s to %s into %s\n", model_dir.c_str(), weights.c_str(),
               dir.c_str());
  if (RunQuantize({"--input", model_dir, "--output", dir, "--to", weights}) != 0) {
    return Status::Internal("tandem quantize to " + weights + " failed");
  }
  std::ofstream(stamp_path) << stamp << "\n";
  return dir;
}

StatusOr<std::string> FindAgentBinary() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& p :
         {self.parent_path().parent_path() / "agent" / "tandem-agent", self.parent_path() / "tandem-agent"}) {
      if (fs::exists(p)) return p.string();
    }
  }
  if (const char* path = std::getenv("PATH")) {
    std::string all = path;
    for (size_t start = 0; start <= all.size();) {
      const size_t end = all.find(':', start);
      const fs::path p = fs::path(all.substr(start, end - start)) / "tandem-agent";
      if (fs::exists(p)) return p.string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return Status::NotFound("tandem-agent not found beside tandem or on PATH (pass --agent PATH)");
}

int HttpGetStatus(uint16_t port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int code = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[64] = {};
      const ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
      if (n > 12 && std::strncmp(buf, "HTTP/1.", 7) == 0) code = std::atoi(buf + 9);
    }
  }
  close(fd);
  return code;
}

Stack::~Stack() { StopAll(std::chrono::seconds(5)); }

pid_t Stack::Launch(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    setpgid(0, 0);  // Ctrl-C reaches tandem local, which stops the agents in order
    execv(binary.c_str(), argv.data());
    std::fprintf(stderr, "tandem local: exec %s: %s\n", binary.c_str(), std::strerror(errno));
    _exit(127);
  }
  return pid;
}

Status Stack::Spawn(const std::string& label, const std::string& binary, const std::vector<std::string>& args,
                    uint16_t metrics_port) {
  const pid_t pid = Launch(binary, args);
  if (pid < 0) return Status::Unavailable("fork: " + std::string(std::strerror(errno)));
  Child c{label, pid, metrics_port};
  c.binary = binary;
  c.args = args;
  c.started = std::chrono::steady_clock::now();
  children_.push_back(std::move(c));
  return Status::Ok();
}

std::string Stack::Reap() {
  std::string label;
  for (Child& c : children_) {
    if (c.exited) continue;
    int status = 0;
    if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
      c.exited = true;
      c.status = status;
      label = c.label;
    }
  }
  return label;
}

Status Stack::WaitReady(std::chrono::seconds timeout, const sigset_t& signals) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (std::string gone = Reap(); !gone.empty())
      return Status::Unavailable(gone + " exited during start-up");
    bool all = true;
    for (const Child& c : children_) all = all && HttpGetStatus(c.metrics_port, "/readyz") == 200;
    if (all) return Status::Ok();
    if (std::chrono::steady_clock::now() > give_up) {
      return Status::DeadlineExceeded("the agents were not ready within " + std::to_string(timeout.count()) +
                                      " s");
    }
    timespec wait{0, 100'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) return Status::Cancelled("interrupted during start-up");
  }
}

int Stack::WaitForSignalOrExit(const sigset_t& signals, bool restart,
                               const std::function<void(const std::string&)>& restarted) {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    timespec wait{0, 200'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) return 0;
    const Clock::time_point now = Clock::now();
    for (std::string gone = Reap(); !gone.empty(); gone = Reap()) {
      // A pool member that dies leaves the rest serving (the router routes around it); the stack
      // ends when its router does.
      std::fprintf(stderr, "tandem local: %s exited unexpectedly\n", gone.c_str());
      if (gone == "router") return 1;
      for (Child& c : children_) {
        if (c.label != gone || !restart) continue;
        // Back-off as a kubelet's: doubled while the member keeps dying young, reset once it ran
        // a minute.
        if (now - c.started > std::chrono::seconds(60)) c.backoff = std::chrono::seconds(1);
        c.restart_at = now + c.backoff;
        c.backoff = std::min(c.backoff * 2, std::chrono::seconds(30));
      }
    }
    if (!restart) continue;
    for (Child& c : children_) {
      if (!c.exited || c.label == "router" || now < c.restart_at) continue;
      const pid_t pid = Launch(c.binary, c.args);
      if (pid < 0) {
        c.restart_at = now + c.backoff;
        continue;
      }
      c.pid = pid;
      c.exited = false;
      c.status = 0;
      c.started = now;
      ++c.restarts;
      std::fprintf(stderr, "tandem local: restarted %s (restart %d, pid %d)\n", c.label.c_str(), c.restarts,
                   static_cast<int>(pid));
      if (restarted) restarted(c.label);
    }
  }
}

bool Stack::StopAll(std::chrono::seconds grace) {
  bool clean = true;
  // The router last in the list: stop it first, so no new work reaches the pools.
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    if (!it->exited) kill(it->pid, SIGTERM);
    if (it->label == "router") {
      const auto until = std::chrono::steady_clock::now() + grace;
      while (!it->exited && std::chrono::steady_clock::now() < until) {
        Reap();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  const auto until = std::chrono::steady_clock::now() + grace;
  for (;;) {
    Reap();
    bool all = true;
    for (const Child& c : children_) all = all && c.exited;
    if (all || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (Child& c : children_) {
    if (!c.exited) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &c.status, 0);
      c.exited = true;
      clean = false;
      std::fprintf(stderr, "tandem local: %s did not stop within the grace period (killed)\n",
                   c.label.c_str());
    } else if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0) {
      clean = false;
    }
  }
  children_.clear();
  return clean;
}

std::string Stack::MetricsUrls() const {
  std::string out;
  for (const Child& c : children_) {
    out += " " + c.label + "=http://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics";
  }
  return out;
}

void Stack::DescribeChildren(nlohmann::ordered_json* out) const {
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  nlohmann::ordered_json pids = nlohmann::ordered_json::object();
  nlohmann::ordered_json restarts = nlohmann::ordered_json::object();
  for (const Child& c : children_) {
    metrics[c.label] = "http://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics";
    pids[c.label] = c.pid;
    restarts[c.label] = c.restarts;
  }
  (*out)["metrics"] = std::move(metrics);
  (*out)["pids"] = std::move(pids);
  (*out)["restarts"] = std::move(restarts);
}

}  // namespace tandem::tools
