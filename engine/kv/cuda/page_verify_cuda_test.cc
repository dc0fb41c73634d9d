// GPU test (label `gpu`): the batched page verification kernel fails exactly the requests the CPU
// check (CheckPages, itself held to TagTracker::VerifyBatch in integrity_tracker_test.cc) fails,
// and what one step's verification costs at batch 64 × 8K context. Skips without a device.
#include "engine/kv/cuda/page_verify_cuda.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/cuda/cuda_test_support.h"
#include "engine/kv/integrity_tracker.h"
#include "engine/kv/page_allocator.h"

namespace tandem::engine::cuda {
namespace {

using PageVerifyCudaTest = CudaDeviceTest;

// A tracker and the page lists of one step: each request added gets fresh pages, mapped and listed.
struct Step {
  explicit Step(size_t num_pages) : tags(num_pages), alloc(num_pages, &tags) {}
  void Add(kv::RequestId id, size_t pages) {
    std::vector<kv::PageRef> refs;
    ASSERT_TRUE(alloc.Allocate(pages, &refs).ok());
    std::vector<kv::PageId> ids;
    for (const kv::PageRef& r : refs) ids.push_back(r.page);
    tags.MapPages(id, 0, ids);
    lists.push_back({id, ids});
  }
  std::vector<kv::RequestPages> Batch() const {
    std::vector<kv::RequestPages> batch;
    for (const auto& [id, pages] : lists) batch.push_back({id, pages});
    return batch;
  }
  kv::TagTracker tags;
  kv::PageAllocator alloc;
  std::vector<std::pair<kv::RequestId, std::vector<kv::PageId>>> lists;
};

// The device's verdict on a step: per-request flags and the one flag.
struct DeviceVerdict {
  std::vector<uint8_t> item_failed;
  uint32_t any = 0;
};

DeviceVerdict VerifyOnDevice(const kv::PageChecks& checks, const std::vector<uint64_t>& generation,
                             const std::vector<uint32_t>& transfer_tag) {
  kv::PageCheck* d_checks = DeviceCopy(checks.checks);
  uint64_t* d_generation = DeviceCopy(generation);
  uint32_t* d_transfer_tag = DeviceCopy(transfer_tag);
  uint8_t* d_item_failed = DeviceCopy(checks.item_failed);
  const uint32_t stale = 7;  // the launch must clear it
  uint32_t* d_any = DeviceCopy(&stale, 1);
  EXPECT_EQ(LaunchVerifyPages(d_checks, checks.checks.size(), d_generation, d_transfer_tag, generation.size(),
                              d_item_failed, d_any, nullptr),
            cudaSuccess);
  DeviceVerdict v;
  v.item_failed.resize(checks.item_failed.size());
  EXPECT_EQ(cudaMemcpy(&v.any, d_any, sizeof(uint32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(v.item_failed.data(), d_item_failed, v.item_failed.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (void* p :
       {static_cast<void*>(d_checks), static_cast<void*>(d_generation), static_cast<void*>(d_transfer_tag),
        static_cast<void*>(d_item_failed), static_cast<void*>(d_any)})
    cudaFree(p);
  return v;
}

TEST_F(PageVerifyCudaTest, FailsTheRequestsTheCpuCheckFails) {
  const uint32_t seed = std::random_device{}();
  std::printf("[page-verify] seed %u\n", seed);
  std::mt19937 rng(seed);
  int failing = 0;
  for (int round = 0; round < 200; ++round) {
    const size_t num_pages = 97;
    Step step(num_pages);
    for (kv::RequestId id = 1; id <= 7; ++id) step.Add(id, 1 + rng() % 8);
    for (int f = 0, faults = static_cast<int>(rng() % 4); f < faults; ++f) {
      auto& pages = step.lists[rng() % step.lists.size()].second;
      switch (rng() % 4) {
        case 0: step.tags.InjectBumpGeneration(pages[rng() % pages.size()]); break;
        case 1: step.tags.StampTransferTag(pages[rng() % pages.size()], 0x5000 + f); break;
        case 2: pages[rng() % pages.size()] = static_cast<kv::PageId>(rng() % num_pages); break;
        default:
          pages[rng() % pages.size()] = static_cast<kv::PageId>(num_pages + rng() % 5);
          break;  // off the pool
      }
    }
    kv::PageChecks checks;
    step.tags.BuildPageChecks(step.Batch(), &checks);
    std::vector<uint64_t> generation;
    std::vector<uint32_t> transfer_tag;
    step.tags.CopyTables(&generation, &transfer_tag);
    const DeviceVerdict device = VerifyOnDevice(checks, generation, transfer_tag);
    std::vector<uint8_t> host = checks.item_failed;
    const bool any = kv::CheckPages(checks.checks.data(), checks.checks.size(), generation.data(),
                                    transfer_tag.data(), num_pages, host.data());
    ASSERT_EQ(device.item_failed, host) << "round " << round;
    ASSERT_EQ(device.any, any ? 1u : 0u) << "round " << round;
    failing += any ? 1 : 0;
  }
  EXPECT_GT(failing, 50);
}

TEST_F(PageVerifyCudaTest, AnEmptyStepClearsTheFlag) {
  const kv::PageChecks none;
  const DeviceVerdict v = VerifyOnDevice(none, {0}, {0});
  EXPECT_EQ(v.any, 0u);
}

// One decode step's verification at batch 64 × 8K context in 64-token pages (8,192 checks): the
// kernel alone (CUDA events over 200 launches) and what the step thread waits for (launch plus
// the one flag read back, median of 200). The target, ≤ 0.3% of a batch-64 decode step,
// needs a CUDA decode step to compare with; the line gives the numerator.
TEST_F(PageVerifyCudaTest, CostOfOneStepAtBatch64By8K) {
  const size_t requests = 64, pages_each = 128, num_pages = requests * pages_each + 64;
  Step step(num_pages);
  for (kv::RequestId id = 1; id <= requests; ++id) step.Add(id, pages_each);
  kv::PageChecks checks;
  step.tags.BuildPageChecks(step.Batch(), &checks);
  ASSERT_EQ(checks.checks.size(), requests * pages_each);
  std::vector<uint64_t> generation;
  std::vector<uint32_t> transfer_tag;
  step.tags.CopyTables(&generation, &transfer_tag);
  kv::PageCheck* d_checks = DeviceCopy(checks.checks);
  uint64_t* d_generation = DeviceCopy(generation);
  uint32_t* d_transfer_tag = DeviceCopy(transfer_tag);
  uint8_t* d_item_failed = DeviceCopy(checks.item_failed);
  const uint32_t zero = 0;
  uint32_t* d_any = DeviceCopy(&zero, 1);
  uint32_t* h_any = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&h_any), sizeof(uint32_t)), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  auto launch = [&] {
    return LaunchVerifyPages(d_checks, checks.checks.size(), d_generation, d_transfer_tag, num_pages,
                             d_item_failed, d_any, stream);
  };
  ASSERT_EQ(launch(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, stream);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(launch(), cudaSuccess);
  cudaEventRecord(e1, stream);
  ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  std::vector<double> waits;
  for (int i = 0; i < 200; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(launch(), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(h_any, d_any, sizeof(uint32_t), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    waits.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_EQ(*h_any, 0u) << "a clean step failed";
  }
  std::nth_element(waits.begin(), waits.begin() + waits.size() / 2, waits.end());
  std::printf(
      "[gpu-bench] page_verify 64 requests x 128 pages (8192 checks): kernel %.1f us, step waits %.1f us "
      "(launch + one flag read back, median of 200)\n",
      ms * 1e3 / 200, waits[waits.size() / 2]);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
  cudaFreeHost(h_any);
  for (void* p :
       {static_cast<void*>(d_checks), static_cast<void*>(d_generation), static_cast<void*>(d_transfer_tag),
        static_cast<void*>(d_item_failed), static_cast<void*>(d_any)})
    cudaFree(p);
}

}  // namespace
}  // namespace tandem::engine::cuda
