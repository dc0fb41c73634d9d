// The Engine's prefill/decode hand-off: ExportKv, ReleaseExported, ImportKv and the transfers whose
// terminal state gates the release of a request's pages.

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "engine/kv/transfer_tags.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/engine_internal.h"

namespace tandem::engine::runtime {
namespace {

std::string Describe(const kv::KvShape& s) {
  return std::to_string(s.num_layers) + " layers x (" + std::to_string(s.kv_lora_rank) + " + " +
         std::to_string(s.rope_dim) + ")";
}

}  // namespace

StatusOr<KvPayload> Engine::ExportKv(RequestId id) {
  const Sequence* seq = scheduler_->Find(id);
  if (seq == nullptr || seq->phase != SeqPhase::kExportHeld) {
    return Status::FailedPrecondition("request " + std::to_string(id) + " is not held for export");
  }
  if (config_.executor->has_state_outside_pages()) {
    return Status::Unimplemented("KV export of a model with state outside the page pool (DSA indexer keys)");
  }
  if (tracker_->enabled()) {
    kv::VerifyResult result;
    const RequestId ids[] = {id};
    tracker_->VerifyBatch(ids, &result);
    if (!result.ok()) {
      return Status::DataLoss("request " + std::to_string(id) +
                              " failed KV integrity verification before export (" +
                              kv::MismatchReasonName(result.incidents[0].reason) + ")");
    }
  }
  const kv::PagePool& pool = *config_.executor->kv_pool();
  KvPayload payload;
  payload.dtype = pool.dtype();
  payload.shape = pool.config().shape;
  payload.page_tokens = pool.page_tokens();
  payload.page_bytes = pool.geometry().page_bytes;
  payload.num_tokens = seq->kv.num_tokens;
  payload.first_token = seq->tokens.back();
  if (pool.dtype() == KvCacheDtype::kFp8E4M3) {
    for (size_t l = 0; l < payload.shape.num_layers; ++l)
      payload.fp8_layer_scales.push_back(pool.layer_scale(l));
  }
  const size_t pages = scheduler_->PagesFor(static_cast<size_t>(seq->kv.num_tokens));
  for (size_t p = 0; p < pages; ++p) {
    const std::span<const uint8_t> bytes = pool.PageBytes(seq->kv.pages[p]);
    payload.pages.emplace_back(bytes.begin(), bytes.end());
  }
  StatusOr<uint64_t> digest = kv::DigestKv(pool, std::span<const kv::PageId>(seq->kv.pages).first(pages),
                                           static_cast<size_t>(payload.num_tokens));
  if (!digest.ok()) return digest.status();
  payload.digest = *digest;
  return payload;
}

Status Engine::ReleaseExported(RequestId id) {
  const Sequence* seq = scheduler_->Find(id);
  if (seq == nullptr || seq->phase != SeqPhase::kExportHeld) {
    return Status::FailedPrecondition("request " + std::to_string(id) + " is not held for export");
  }
  states_.erase(id);
  StatusOr<std::unique_ptr<Sequence>> removed = scheduler_->Remove(id);
  if (!removed.ok()) return removed.status();
  ++counters_.exported;
  return Status::Ok();
}

StatusOr<RequestId> Engine::ImportKv(const Request& request, const KvPayload& payload) {
  if (config_.role != EngineRole::kDecodeOnly) {
    return Status::FailedPrecondition("ImportKv needs a decode-only engine, this one is " +
                                      std::string(EngineRoleName(config_.role)));
  }
  if (config_.executor->has_state_outside_pages()) {
    return Status::Unimplemented("KV import for a model with state outside the page pool (DSA indexer keys)");
  }
  kv::PagePool& pool = *config_.executor->kv_pool();
  if (payload.dtype != pool.dtype()) {
    return Status::InvalidArgument(
        "KV dtype mismatch: the payload is " + std::string(KvCacheDtypeName(payload.dtype)) +
        ", this pool is " + std::string(KvCacheDtypeName(pool.dtype())) + " (convert during the transfer)");
  }
  const kv::KvShape& shape = pool.config().shape;
  if (payload.shape.num_layers != shape.num_layers || payload.shape.kv_lora_rank != shape.kv_lora_rank ||
      payload.shape.rope_dim != shape.rope_dim) {
    return Status::InvalidArgument("KV shape mismatch: the payload is " + Describe(payload.shape) +
                                   ", this pool is " + Describe(shape));
  }
  if (payload.page_tokens != pool.page_tokens() || payload.page_bytes != pool.geometry().page_bytes) {
    return Status::InvalidArgument(
        "KV page geometry mismatch: the payload has pages of " + std::to_string(payload.page_tokens) +
        " tokens / " + std::to_string(payload.page_bytes) + " bytes, this pool " +
        std::to_string(pool.page_tokens()) + " / " + std::to_string(pool.geometry().page_bytes));
  }
  if (pool.dtype() == KvCacheDtype::kFp8E4M3) {
    if (payload.fp8_layer_scales.size() != shape.num_layers) {
      return Status::InvalidArgument("an FP8 KV payload needs one scale per layer");
    }
    for (size_t l = 0; l < shape.num_layers; ++l) {
      if (!pool.layer_scale_fixed(l) || pool.layer_scale(l) != payload.fp8_layer_scales[l]) {
        return Status::InvalidArgument("FP8 KV scale mismatch on layer " + std::to_string(l) +
                                       " (configure both pools with the checkpoint's scales, or convert)");
      }
    }
  }
  if (request.prompt.empty() || payload.num_tokens != static_cast<int64_t>(request.prompt.size())) {
    return Status::InvalidArgument("the payload holds " + std::to_string(payload.num_tokens) +
                                   " tokens, the prompt has " + std::to_string(request.prompt.size()));
  }
  const size_t num_pages = scheduler_->PagesFor(request.prompt.size());
  if (payload.pages.size() != num_pages) {
    return Status::InvalidArgument("the payload has " + std::to_string(payload.pages.size()) + " pages, " +
                                   std::to_string(payload.num_tokens) + " tokens need " +
                                   std::to_string(num_pages));
  }
  for (size_t p = 0; p < num_pages; ++p) {
    if (payload.pages[p].size() != payload.page_bytes) {
      return Status::InvalidArgument("payload page " + std::to_string(p) + " has " +
                                     std::to_string(payload.pages[p].size()) + " bytes, expected " +
                                     std::to_string(payload.page_bytes));
    }
  }
  RETURN_IF_ERROR(ValidateTokens(request.prompt, "prompt"));
  RETURN_IF_ERROR(ValidateTokens(std::span<const int32_t>(&payload.first_token, 1), "first"));
  if (!scheduler_->CanEverFit(request.prompt.size())) {
    return Status::OutOfRange("the request's prompt plus one token can never fit in this KV pool");
  }
  if (static_cast<int64_t>(scheduler_->num_running()) >= config_.scheduler.max_running_requests) {
    return Status::ResourceExhausted("max_running_requests requests are running");
  }
  StatusOr<RequestId> id = AssignId(request.id);
  if (!id.ok()) return id.status();
  StatusOr<std::unique_ptr<RequestState>> state = MakeState(request, *id);
  if (!state.ok()) return state.status();
  // The first token counts toward max_tokens and stop checks; its text was the prefill side's.
  RequestOutput scratch;
  RETURN_IF_ERROR((*state)->processor.Append(payload.first_token, &scratch));
  if (scratch.finish) {
    return Status::FailedPrecondition("the first token already ends the request (" +
                                      std::string(FinishReasonName(*scratch.finish)) +
                                      "); nothing to decode");
  }

  auto seq = std::make_unique<Sequence>(*id, pool.page_tokens(), allocator_.get(), tracker_.get());
  seq->tokens = request.prompt;
  seq->tokens.push_back(payload.first_token);
  seq->prompt_len = request.prompt.size();
  seq->params = request.params;
  seq->tenant = request.tenant;
  if (Status st = seq->table.AppendTokens(request.prompt.size()); !st.ok()) {
    return Status::ResourceExhausted("importing request " + std::to_string(*id) + " needs " +
                                     std::to_string(num_pages) + " free KV pages, " +
                                     std::to_string(allocator_->free_pages()) + " are free");
  }
  for (size_t p = 0; p < num_pages; ++p) {
    const kv::PageId page = seq->table.pages()[p].page;
    std::memcpy(pool.PageBytes(page).data(), payload.pages[p].data(), payload.page_bytes);
    seq->kv.pages.push_back(page);
  }
  seq->kv.num_tokens = payload.num_tokens;
  StatusOr<uint64_t> digest = kv::DigestKv(pool, seq->kv.pages, static_cast<size_t>(payload.num_tokens));
  if (!digest.ok() || *digest != payload.digest) {
    seq->table.Release();
    return Status::DataLoss("request " + std::to_string(*id) +
                            ": the imported KV does not match the payload's digest (corrupted in transit)");
  }
  // Checked above (id free, a running slot); AddRunning returns the pages when it refuses.
  if (Status st = scheduler_->AddRunning(std::move(seq)); !st.ok()) return st;
  states_.emplace(*id, std::move(state).value());
  counters_.prompt_tokens += request.prompt.size();
  return *id;
}

Status Engine::BeginTransfer(uint64_t transfer_id, RequestId id, int64_t timeout_ms) {
  if (scheduler_->Find(id) == nullptr) return Status::NotFound("no live request " + std::to_string(id));
  return ledger_->Begin(transfer_id, id, timeout_ms);
}

Status Engine::FinishTransfer(uint64_t transfer_id, kv::TransferState terminal) {
  return ledger_->Finish(transfer_id, terminal);
}

}  // namespace tandem::engine::runtime
