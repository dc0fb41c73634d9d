#pragma once
// What `tandem local` (local.cc) needs around it: free loopback ports, checkpoints in each pool's
// weight format, the tandem-agent binary, and a Stack of child agent processes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <signal.h>
#include <sys/types.h>

#include "common/status.h"

namespace tandem::tools {

// Loopback TCP ports for child processes to listen on, held from Reserve() until ReleaseAll() or
// destruction: each is bound here (SO_REUSEADDR, not listening, close-on-exec), so no other
// process's reservation, bind(0) or outgoing connection can take it before the child binds it; the
// child's listener (SO_REUSEADDR: the agent's HTTP servers and gRPC set it) binds it alongside, as
// Linux allows while no socket listens there. Ports are picked at random below the kernel's
// ephemeral range where that leaves room (the kernel's pick for port 0 otherwise), and a port is
// reserved only after a plain bind (no SO_REUSEADDR) shows that nobody holds it.
// (Picking a free port and closing it, as before, let two stacks starting at once, or an outgoing
// connection, take the same port: an agent then failed with "Address already in use".)
class PortReservations {
 public:
  PortReservations() = default;
  ~PortReservations() { ReleaseAll(); }
  PortReservations(const PortReservations&) = delete;
  PortReservations& operator=(const PortReservations&) = delete;

  StatusOr<uint16_t> Reserve();
  // Closes every reservation (the children that listen on them keep their ports).
  void ReleaseAll();
  size_t held() const { return fds_.size(); }

 private:
  std::vector<int> fds_;
};

// A checkpoint of `model_dir` holding `weights` (bf16|fp8|int4): the directory itself when it
// does, else MODEL_DIR-WEIGHTS, made once with `tandem quantize` (routed experts to int4, or
// Linears to fp8) from a bf16 model directory.
StatusOr<std::string> CheckpointIn(const std::string& model_dir, const std::string& weights);

// tandem-agent beside this binary's build tree (../agent/tandem-agent), in the same directory, or
// on PATH.
StatusOr<std::string> FindAgentBinary();

// GET http://127.0.0.1:port/path: the status code (0 when nothing answered).
int HttpGetStatus(uint16_t port, const std::string& path);

class Stack {
 public:
  ~Stack();
  // Starts `binary args...` as a child (its output goes to ours, prefixed by nothing).
  Status Spawn(const std::string& label, const std::string& binary, const std::vector<std::string>& args,
               uint16_t metrics_port);
  // Waits until every child's /readyz says 200. Unavailable when a child exits, DeadlineExceeded
  // at the timeout, Cancelled on SIGINT / SIGTERM (blocked in `signals`).
  Status WaitReady(std::chrono::seconds timeout, const sigset_t& signals);
  // Blocks until SIGINT / SIGTERM (0) or the router exits on its own (1). A pool member that
  // exits is reported and the rest keep serving; with `restart`, it is started again with its
  // own arguments (the same ports) after a back-off that doubles from 1 s to 30 s while it keeps
  // exiting within 60 s of its start, as a kubelet restarts a pod's container, and `restarted`
  // is called with its label.
  int WaitForSignalOrExit(const sigset_t& signals, bool restart = false,
                          const std::function<void(const std::string&)>& restarted = nullptr);
  // SIGTERM to the router first, then the pools; SIGKILL whatever is left after `grace`. True when
  // every child exited 0 within the grace.
  bool StopAll(std::chrono::seconds grace);
  std::string MetricsUrls() const;  // " router=http://127.0.0.1:N/metrics ..."
  // Sets "metrics" ({"router": "http://127.0.0.1:N/metrics", ...}), "pids" ({"router": 1234, ...})
  // and "restarts" ({"prefill-0": 2, ...}) in `out`, each over every child in start order.
  void DescribeChildren(nlohmann::ordered_json* out) const;

 private:
  struct Child {
    std::string label;
    pid_t pid = -1;
    uint16_t metrics_port = 0;
    bool exited = false;
    int status = 0;
    std::string binary;
    std::vector<std::string> args;
    std::chrono::steady_clock::time_point started, restart_at;
    std::chrono::seconds backoff{1};
    int restarts = 0;
  };
  // fork + exec; the child's pid, or -1.
  static pid_t Launch(const std::string& binary, const std::vector<std::string>& args);
  // Reaps exited children; returns the label of one that exited, or empty.
  std::string Reap();
  std::vector<Child> children_;
};

}  // namespace tandem::tools
