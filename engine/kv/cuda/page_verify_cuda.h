#pragma once
// The batched page-tag verification on CUDA (issue 21 item 3): one small kernel per step over the
// step's flat page checks (engine/kv/page_checks.h, built by TagTracker::BuildPageChecks), against
// device copies of the page tables, leaving one flag for the host to read back; only when it is
// set does the host read the per-request flags and explain the failure (TagTracker::VerifyBatch's
// slow path). The same check as CheckPages, the CPU oracle (page_verify_cuda_test.cc, label gpu).
//
// Not yet: the tables live on the host in TagTracker; a CUDA engine would keep them in device
// memory, written by the allocator hooks and stamped by the GPU-to-GPU transfer path.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "engine/kv/page_checks.h"

namespace tandem::engine::cuda {

// Zeroes *d_any_failed, then for every failing check sets d_item_failed[check.item] = 1 and
// *d_any_failed = 1 (other flags untouched). d_checks: [n]; d_generation, d_transfer_tag:
// [num_pages]; d_item_failed: [the batch's size]; all device memory. Asynchronous on `stream`.
cudaError_t LaunchVerifyPages(const kv::PageCheck* d_checks, size_t n, const uint64_t* d_generation,
                              const uint32_t* d_transfer_tag, size_t num_pages, uint8_t* d_item_failed,
                              uint32_t* d_any_failed, cudaStream_t stream);

}  // namespace tandem::engine::cuda
