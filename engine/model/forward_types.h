#pragma once
// Types shared by the pieces of the forward pass (forward.h is the public entry point).

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/kv_types.h"

namespace tandem::engine::model {

// One sequence's attention state between steps. The caller owns it and its pages; the runner
// reads and appends. All of it is in the pages (the MLA latent and, for GLM, the DSA indexer
// keys), so pages and num_tokens are the whole state: what a step wrote past num_tokens is
// don't-care, and a page shared from the prefix cache or imported from a transfer is complete.
struct KvSequence {
  // Physical pages of the KV PagePool in logical order: token t lives in
  // pages[t / page_tokens], slot t % page_tokens. The caller appends pages before a step that
  // needs them (ModelRunner::PagesNeeded).
  std::vector<kv::PageId> pages;
  int64_t num_tokens = 0;  // tokens already in the cache (the next token's position)
};

// Which MLA form computes attention. kAuto: expanded for prefill segments (> 1 new token) while
// the context's per-head keys and values fit in 256 MiB of fp32, absorbed otherwise and for decode
// (1 new token). Both give the same result up to rounding.
enum class MlaForm : uint8_t { kAuto, kExpanded, kAbsorbed };

// One sequence's slice of a step's packed batch.
struct AttnSegment {
  KvSequence* seq = nullptr;
  int64_t first_row = 0;          // its first row in the packed [T, ...] activations
  int64_t num_new = 0;            // new tokens this step
  int64_t past = 0;               // tokens cached before this step (position of the first new token)
  MlaForm form = MlaForm::kAuto;  // resolved: kExpanded or kAbsorbed
  int64_t context() const { return past + num_new; }
};

// The position of each packed row [tokens]: row first_row + i of a segment is at past + i.
inline std::vector<int64_t> Positions(std::span<const AttnSegment> segs, int64_t tokens) {
  std::vector<int64_t> pos(tokens, 0);
  for (const AttnSegment& seg : segs) {
    for (int64_t i = 0; i < seg.num_new; ++i) pos[seg.first_row + i] = seg.past + i;
  }
  return pos;
}

// Keys each new query of a segment may attend to: [num_new, context] 0/1, or empty for plain
// causal attention (the DSA indexer fills it when the context exceeds index_topk).
using KeyMask = std::vector<uint8_t>;

}  // namespace tandem::engine::model
