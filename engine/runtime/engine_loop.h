#pragma once
// EngineLoop: one step thread per Engine, and the thread-safe face of it that HTTP and gRPC
// threads use. Every Engine call runs on the step thread (callers block until it has run, at most
// one forward step), except WritePage, which lands a page directly from the caller's thread.
// Each request's outputs go to its Sink, called on the step thread in order; the last call carries
// `finish` (or `exported`), exactly once per request, Stop included.
//
// The thread steps while the engine has schedulable work and otherwise blocks on a condition
// variable until a call arrives or the earliest import deadline passes: no spinning, no sleeps.
//
// Thread safety: every method may be called from any thread, including from inside a Sink.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/status.h"
#include "engine/runtime/engine.h"

namespace tandem::engine::runtime {

class EngineLoop {
 public:
  // Receives one request's outputs on the step thread. Keep it short (hand the output to a queue
  // or a socket write): the next step waits for it.
  using Sink = std::function<void(RequestOutput)>;

  // Starts the step thread over `engine`. REQUIRES: engine outlives the loop, and nothing else
  // calls it while the loop runs.
  explicit EngineLoop(Engine* engine);
  ~EngineLoop();  // Stop()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Engine::Submit; the request's outputs go to `sink`. Unavailable once Stop has begun.
  StatusOr<RequestId> Submit(const Request& request, Sink sink);
  // Engine::Cancel: the sink gets the `cancelled` finish.
  Status Cancel(RequestId id);

  // Decode side: Engine::ReserveImport (outputs after CommitImport go to `sink`), WritePage (on the
  // caller's thread), CommitImport, AbortImport.
  StatusOr<ImportReservation> ReserveImport(const Request& request, Sink sink);
  Status WritePage(uint64_t transfer_id, uint32_t logical_page, std::span<const uint8_t> bytes, uint32_t tag);
  Status CommitImport(uint64_t transfer_id, int32_t first_token, uint64_t digest);
  Status AbortImport(uint64_t transfer_id, std::string_view reason);

  // Prefill side: Engine::ExportKv (the export's NextPage runs on the caller's thread) and
  // FinishExport (the sink then gets `exported`, or an abort).
  StatusOr<std::shared_ptr<KvExport>> ExportKv(RequestId id, const kv::KvLayout& target);
  Status FinishExport(RequestId id, kv::TransferState terminal);

  // The latest snapshot (refreshed after every step and call): never waits for a step.
  EngineStats Stats() const;

  // Re-reads the clock for import deadlines (tests that move an injected clock).
  void Wake();

  // Stops admitting (later calls return Unavailable), aborts every live request (its sink gets
  // one `abort` finish, "the engine is stopping"), and joins the step thread. Idempotent.
  void Stop();

 private:
  // Runs fn on the step thread and returns its result; runs it inline when called from there.
  template <typename T>
  T Call(std::function<T()> fn, T stopped);
  void Run();
  void Dispatch(std::vector<RequestOutput> outputs);
  bool OnStepThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  Engine* engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> calls_;    // guarded by mu_
  bool stopping_ = false;                      // guarded by mu_
  bool woken_ = false;                         // guarded by mu_
  EngineStats stats_;                          // guarded by mu_
  std::unordered_map<RequestId, Sink> sinks_;  // step thread only
  std::mutex join_mu_;
  std::thread thread_;
};

}  // namespace tandem::engine::runtime
