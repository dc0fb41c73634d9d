#include "engine/core/communicator.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tandem::engine {

namespace {

// A sense-reversing barrier that spins, then yields: a collective is microseconds of work between
// two waits, and a futex sleep and wake per wait (std::barrier) cost more than the work at batch-1
// decode. Ranks are threads of one process, each on its own core in service.
class SpinBarrier {
 public:
  explicit SpinBarrier(int size) : size_(size), left_(size) {}
  void arrive_and_wait() {
    const bool sense = !sense_.load(std::memory_order_relaxed);
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      left_.store(size_, std::memory_order_relaxed);
      sense_.store(sense, std::memory_order_release);
      return;
    }
    for (int spins = 0; sense_.load(std::memory_order_acquire) != sense; ++spins) {
      if (spins > 4000) std::this_thread::yield();
    }
  }

 private:
  const int size_;
  std::atomic<int> left_;
  std::atomic<bool> sense_{false};
};

}  // namespace

struct CpuRankGroup::Shared {
  explicit Shared(int size) : size(size), sync(size), in(size), out(size), n(size) {}
  int size;
  SpinBarrier sync;
  std::vector<const float*> in;  // each rank's input of the current collective
  std::vector<float*> out;       // each rank's output
  std::vector<int64_t> n;        // each rank's n (checked equal)
  std::vector<float> sum;        // AllReduceSum's result, shared
  std::vector<std::unique_ptr<RankComm>> ranks;
};

class CpuRankGroup::RankComm : public Communicator {
 public:
  RankComm(Shared* s, int rank) : s_(s), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }

  Status AllReduceSum(float* data, int64_t n) override {
    if (s_->size == 1) return Status::Ok();
    RETURN_IF_ERROR(Post(data, data, n));
    if (rank_ == 0) s_->sum.resize(static_cast<size_t>(n));
    s_->sync.arrive_and_wait();
    // Each rank sums its share of the elements over the ranks in order, into the shared result.
    const int64_t begin = n * rank_ / s_->size, end = n * (rank_ + 1) / s_->size;
    for (int64_t i = begin; i < end; ++i) {
      float acc = s_->in[0][i];
      for (int r = 1; r < s_->size; ++r) acc += s_->in[r][i];
      s_->sum[i] = acc;
    }
    s_->sync.arrive_and_wait();
    std::copy_n(s_->sum.data(), n, data);
    s_->sync.arrive_and_wait();  // nobody starts the next collective while the result is read
    return Status::Ok();
  }

  Status AllGather(const float* in, int64_t n, float* out) override {
    RETURN_IF_ERROR(Post(in, out, n));
    for (int r = 0; r < s_->size; ++r) std::copy_n(s_->in[r], n, out + r * n);
    s_->sync.arrive_and_wait();
    return Status::Ok();
  }

  Status ReduceScatterSum(const float* in, int64_t n, float* out) override {
    RETURN_IF_ERROR(Post(in, out, n));
    for (int64_t i = 0; i < n; ++i) {
      float acc = s_->in[0][rank_ * n + i];
      for (int r = 1; r < s_->size; ++r) acc += s_->in[r][rank_ * n + i];
      out[i] = acc;
    }
    s_->sync.arrive_and_wait();
    return Status::Ok();
  }

  Status AllToAll(const float* in, int64_t n, float* out) override {
    RETURN_IF_ERROR(Post(in, out, n));
    for (int r = 0; r < s_->size; ++r) std::copy_n(s_->in[r] + rank_ * n, n, out + r * n);
    s_->sync.arrive_and_wait();
    return Status::Ok();
  }

 private:
  // Publishes this rank's buffers and waits for every rank's; InvalidArgument (on every rank, after
  // a second barrier) when the ranks disagree on n.
  Status Post(const float* in, float* out, int64_t n) {
    s_->in[rank_] = in;
    s_->out[rank_] = out;
    s_->n[rank_] = n;
    s_->sync.arrive_and_wait();
    const bool same = std::all_of(s_->n.begin(), s_->n.end(), [&](int64_t m) { return m == s_->n[0]; });
    if (!same) {
      s_->sync.arrive_and_wait();  // every rank has read n before any posts again
      return Status::InvalidArgument("rank " + std::to_string(rank_) +
                                     ": the ranks called a collective with different sizes");
    }
    return Status::Ok();
  }

  Shared* s_;
  int rank_;
};

Status AgreeAcrossRanks(Communicator* comm, Status local) {
  if (comm == nullptr || comm->size() == 1) return local;
  float failed = local.ok() ? 0.0f : 1.0f;
  RETURN_IF_ERROR(comm->AllReduceSum(&failed, 1));
  if (!local.ok()) return local;
  if (failed > 0.0f) return Status::FailedPrecondition("another tensor-parallel rank failed this step");
  return Status::Ok();
}

CpuRankGroup::CpuRankGroup(int size) : shared_(std::make_unique<Shared>(std::max(size, 1))) {
  for (int r = 0; r < shared_->size; ++r)
    shared_->ranks.push_back(std::make_unique<RankComm>(shared_.get(), r));
}

CpuRankGroup::~CpuRankGroup() = default;

int CpuRankGroup::size() const { return shared_->size; }

Communicator* CpuRankGroup::Rank(int r) { return shared_->ranks[r].get(); }

}  // namespace tandem::engine
