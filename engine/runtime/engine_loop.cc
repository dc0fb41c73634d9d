#include "engine/runtime/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <utility>

namespace tandem::engine::runtime {

EngineLoop::EngineLoop(Engine* engine) : engine_(engine), stats_(engine->Stats()) {
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() { Stop(); }

template <typename T>
T EngineLoop::Call(std::function<T()> fn, T stopped) {
  if (OnStepThread()) return fn();
  auto task = std::make_shared<std::packaged_task<T()>>(std::move(fn));
  std::future<T> result = task->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return stopped;
    calls_.push_back([task] { (*task)(); });
  }
  cv_.notify_one();
  return result.get();
}

namespace {
Status Stopping() { return Status::Unavailable("the engine is stopping"); }
}  // namespace

StatusOr<RequestId> EngineLoop::Submit(const Request& request, Sink sink) {
  return Call<StatusOr<RequestId>>(
      [&]() -> StatusOr<RequestId> {
        StatusOr<RequestId> id = engine_->Submit(request);
        if (id.ok()) sinks_[*id] = std::move(sink);
        return id;
      },
      Stopping());
}

Status EngineLoop::Cancel(RequestId id) {
  return Call<Status>([&] { return engine_->Cancel(id); }, Stopping());
}

StatusOr<ImportReservation> EngineLoop::ReserveImport(const Request& request, Sink sink) {
  return Call<StatusOr<ImportReservation>>(
      [&]() -> StatusOr<ImportReservation> {
        StatusOr<ImportReservation> r = engine_->ReserveImport(request);
        if (r.ok()) sinks_[r->id] = std::move(sink);
        return r;
      },
      Stopping());
}

Status EngineLoop::WritePage(uint64_t transfer_id, uint32_t logical_page, std::span<const uint8_t> bytes,
                             uint32_t tag) {
  return engine_->WritePage(transfer_id, logical_page, bytes, tag);
}

Status EngineLoop::CommitImport(uint64_t transfer_id, int32_t first_token, uint64_t digest) {
  return Call<Status>([&] { return engine_->CommitImport(transfer_id, first_token, digest); }, Stopping());
}

Status EngineLoop::AbortImport(uint64_t transfer_id, std::string_view reason) {
  return Call<Status>([&] { return engine_->AbortImport(transfer_id, reason); }, Stopping());
}

StatusOr<std::shared_ptr<KvExport>> EngineLoop::ExportKv(RequestId id, const kv::KvLayout& target) {
  return Call<StatusOr<std::shared_ptr<KvExport>>>([&] { return engine_->ExportKv(id, target); }, Stopping());
}

Status EngineLoop::FinishExport(RequestId id, kv::TransferState terminal) {
  return Call<Status>([&] { return engine_->FinishExport(id, terminal); }, Stopping());
}

EngineStats EngineLoop::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EngineLoop::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void EngineLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (OnStepThread()) return;  // from a sink: the thread ends after this call; the destructor joins
  std::lock_guard<std::mutex> lock(join_mu_);  // two threads stopping at once join once
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::Dispatch(std::vector<RequestOutput> outputs) {
  for (RequestOutput& out : outputs) {
    auto it = sinks_.find(out.id);
    if (it == sinks_.end()) continue;
    const bool last = out.finish.has_value() || out.exported;
    if (!last) {
      it->second(std::move(out));
      continue;
    }
    Sink sink = std::move(it->second);
    sinks_.erase(it);
    sink(std::move(out));
  }
}

void EngineLoop::Run() {
  const Clock& clock = engine_->clock();
  uint64_t last_steps = 0;
  bool busy = false;  // schedulable work that made progress on the last step
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto ready = [&] { return !calls_.empty() || stopping_ || woken_; };
    if (!busy && !ready()) {
      const std::optional<int64_t> deadline = engine_->NextDeadlineNanos();
      if (deadline) {
        const int64_t wait = std::max<int64_t>(0, *deadline - clock.NowNanos());
        cv_.wait_for(lock, std::chrono::nanoseconds(wait), ready);
      } else {
        cv_.wait(lock, ready);
      }
    }
    woken_ = false;
    std::deque<std::function<void()>> calls = std::exchange(calls_, {});
    const bool stop = stopping_;
    lock.unlock();
    for (std::function<void()>& call : calls) call();
    if (stop) {
      std::vector<RequestId> live;
      for (const auto& [id, sink] : sinks_) live.push_back(id);
      std::sort(live.begin(), live.end());
      for (RequestId id : live) (void)engine_->Abort(id, "the engine is stopping");
    }
    std::vector<RequestOutput> outputs = engine_->Step();
    const EngineStats stats = engine_->Stats();
    busy = stats.running + stats.waiting > 0 && (stats.steps != last_steps || !outputs.empty());
    last_steps = stats.steps;
    Dispatch(std::move(outputs));
    lock.lock();
    stats_ = stats;
    if (stop) return;
  }
}

}  // namespace tandem::engine::runtime
