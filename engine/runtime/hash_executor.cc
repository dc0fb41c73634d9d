#include "engine/runtime/hash_executor.h"

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "common/hash.h"

namespace tandem::engine::runtime {

void HashExecutor::ContextLogits(std::span<const int32_t> context, int64_t vocab_size, float* row) {
  uint64_t h = kSplitMix64Gamma;
  for (size_t t = 0; t < context.size(); ++t) {
    h = Fmix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(context[t])) << 20) ^ t);
  }
  for (int64_t v = 0; v < vocab_size; ++v) {
    row[v] = static_cast<float>(Fmix64(h + static_cast<uint64_t>(v)) >> 40) * (1.0f / 16777216.0f);
  }
}

Status HashExecutor::Validate(std::span<const ExecInput> batch) const {
  if (batch.empty()) return Status::InvalidArgument("empty batch");
  if (kv_->geometry().row_bytes < sizeof(int32_t)) {
    return Status::FailedPrecondition("HashExecutor needs KV rows of at least 4 bytes");
  }
  std::set<const model::KvSequence*> seen;
  for (size_t b = 0; b < batch.size(); ++b) {
    const ExecInput& in = batch[b];
    const std::string where = "batch entry " + std::to_string(b);
    if (in.seq == nullptr) return Status::InvalidArgument(where + ": null sequence");
    if (!seen.insert(in.seq).second) return Status::InvalidArgument(where + ": sequence appears twice");
    if (in.tokens.empty()) return Status::InvalidArgument(where + ": no tokens");
    for (int32_t t : in.tokens) {
      if (t < 0 || t >= vocab_size_)
        return Status::InvalidArgument(where + ": token " + std::to_string(t) + " outside the vocabulary");
      if (poison_ && t == *poison_)
        return Status::InvalidArgument(where + ": poisoned token " + std::to_string(t) + " (injected fault)");
    }
    const int64_t need = PagesNeeded(*in.seq, static_cast<int64_t>(in.tokens.size()));
    if (static_cast<int64_t>(in.seq->pages.size()) < need) {
      return Status::FailedPrecondition(where + ": needs " + std::to_string(need) + " KV pages, holds " +
                                        std::to_string(in.seq->pages.size()));
    }
    for (int64_t p = 0; p < need; ++p) {
      if (in.seq->pages[p] >= kv_->num_pages())
        return Status::FailedPrecondition(where + ": page outside the pool");
    }
  }
  return Status::Ok();
}

Status HashExecutor::Forward(std::span<const ExecInput> batch, std::vector<float>* logits) {
  ++forward_calls_;
  RETURN_IF_ERROR(Validate(batch));
  const size_t page_tokens = kv_->page_tokens();
  const size_t row_bytes = kv_->geometry().row_bytes;  // layer 0 of a page comes first
  logits->assign(batch.size() * static_cast<size_t>(vocab_size_), 0.0f);
  std::vector<int32_t> context;
  for (size_t b = 0; b < batch.size(); ++b) {
    model::KvSequence& seq = *batch[b].seq;
    for (int32_t token : batch[b].tokens) {
      const size_t t = static_cast<size_t>(seq.num_tokens++);
      std::memcpy(kv_->PageBytes(seq.pages[t / page_tokens]).data() + (t % page_tokens) * row_bytes, &token,
                  sizeof(token));
    }
    context.resize(static_cast<size_t>(seq.num_tokens));
    for (size_t t = 0; t < context.size(); ++t) {
      std::memcpy(&context[t],
                  kv_->PageBytes(seq.pages[t / page_tokens]).data() + (t % page_tokens) * row_bytes,
                  sizeof(int32_t));
    }
    ContextLogits(context, vocab_size_, logits->data() + b * static_cast<size_t>(vocab_size_));
    if (read_log_ != nullptr) {
      for (size_t p = 0; p * page_tokens < context.size(); ++p) read_log_->push_back({&seq, seq.pages[p]});
    }
  }
  return Status::Ok();
}

}  // namespace tandem::engine::runtime
