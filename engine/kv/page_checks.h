#pragma once
// A step's page-tag verification as flat data (issue 21 item 3): every page a step lists, with
// what its request's manifest expects at that logical position, in one array that a device
// kernel reads as is (engine/kv/cuda/page_verify_cuda.h), and the same check on the CPU
// (CheckPages, the oracle). TagTracker::BuildPageChecks makes the array; TagTracker::VerifyBatch
// reaches the same verdicts in one pass without it (integrity_tracker_test.cc checks both agree).
// Light and C++17 (nvcc compiles .cu files as C++17), so .cu files include it.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/hash.h"
#include "engine/kv/kv_types.h"

namespace tandem::engine::kv {

// The tag a manifest entry expects. Never 0 for a valid entry. constexpr so that device code
// (nvcc --expt-relaxed-constexpr) computes exactly the host's value.
constexpr uint64_t PageTag(RequestId request, uint32_t logical_page, PageId page, uint64_t generation) {
  uint64_t h = SplitMix64Mix(request ^ kSplitMix64Gamma);
  h = SplitMix64Mix(h ^ ((static_cast<uint64_t>(logical_page) << 32) | page));
  h = SplitMix64Mix(h ^ generation);
  return h == 0 ? 1 : h;
}

// One listed page of a step and the manifest entry at its logical position. 48 bytes, no padding
// the compilers could disagree on (host and device read the same array).
struct PageCheck {
  RequestId request = 0;
  uint64_t expected_generation = 0;
  uint64_t expected_tag = 0;
  PageId page = kInvalidPage;           // what the step's list names
  PageId expected_page = kInvalidPage;  // what the manifest has there
  uint32_t logical = 0;
  uint32_t expected_transfer_tag = 0;
  uint32_t item = 0;  // the request's index in the batch
  uint32_t reserved = 0;
};
static_assert(sizeof(PageCheck) == 48);

struct PageChecks {
  std::vector<PageCheck> checks;
  // [batch size]: 1 where the host already failed the request (no manifest, or a list longer than
  // its manifest), else 0; CheckPages and the device kernel set the others that fail.
  std::vector<uint8_t> item_failed;
};

// The check of one listed page against the page tables (generation [num_pages], the last
// transfer tag stamped [num_pages]): the listed page is the manifest's, and its generation, tag
// and transfer tag are the ones the entry expects. A page id outside the table never indexes it.
constexpr bool PageCheckFails(const PageCheck& c, const uint64_t* generation, const uint32_t* transfer_tag,
                              size_t num_pages) {
  const PageId q = c.page < num_pages ? c.page : 0;
  const uint64_t gen = generation[q];
  return c.page != c.expected_page || gen != c.expected_generation ||
         PageTag(c.request, c.logical, c.page, gen) != c.expected_tag ||
         transfer_tag[q] != c.expected_transfer_tag;
}

// The CPU oracle of the batched check: item_failed[c.item] = 1 for every failing check (others
// untouched). Returns whether any check failed (the one flag a device reads back).
bool CheckPages(const PageCheck* checks, size_t n, const uint64_t* generation, const uint32_t* transfer_tag,
                size_t num_pages, uint8_t* item_failed);

}  // namespace tandem::engine::kv
