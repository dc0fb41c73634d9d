#pragma once
// Collectives between the ranks of a tensor- / expert-parallel model (issue 21): the model calls
// them through this interface, on CPU ranks (threads of one process, below) or GPUs (NCCL, under
// cuda/). Every rank calls the same collectives in the same order, each with the same n; a call
// returns once every rank's part is done.
//
// Sums run in rank order (rank 0 + rank 1 + ...), so every rank gets the same bits, and one rank
// gets its input back unchanged.

#include <cstdint>
#include <memory>

#include "common/status.h"

namespace tandem::engine {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[0, n) on every rank becomes the sum of every rank's data.
  virtual Status AllReduceSum(float* data, int64_t n) = 0;
  // out[r·n, (r+1)·n) = rank r's in[0, n), on every rank.
  virtual Status AllGather(const float* in, int64_t n, float* out) = 0;
  // in: [size·n] on every rank; out[0, n) of rank r = the sum over ranks of their in[r·n, (r+1)·n).
  virtual Status ReduceScatterSum(const float* in, int64_t n, float* out) = 0;
  // in: [size·n], block k for rank k; out: [size·n], block k from rank k.
  virtual Status AllToAll(const float* in, int64_t n, float* out) = 0;
};

// Every rank's `local` outcome joined (a collective: every rank calls it): Ok when every rank's was
// ok, else this rank's error, or FailedPrecondition naming the failure elsewhere. Ranks that
// share state (one page pool written by rank 0) agree before going on, so that none waits forever
// in a later collective for a rank that returned. comm null: `local`.
Status AgreeAcrossRanks(Communicator* comm, Status local);

// `size` ranks as threads of one process: Rank(r) is what the thread running rank r calls. The
// group outlives its ranks' calls. InvalidArgument from a collective whose n differs between
// ranks (every rank gets it).
class CpuRankGroup {
 public:
  explicit CpuRankGroup(int size);
  ~CpuRankGroup();
  CpuRankGroup(const CpuRankGroup&) = delete;
  CpuRankGroup& operator=(const CpuRankGroup&) = delete;

  int size() const;
  Communicator* Rank(int r);

 private:
  struct Shared;
  class RankComm;
  std::unique_ptr<Shared> shared_;
};

}  // namespace tandem::engine
