// The Engine's prefill/decode hand-off (docs/serving-engine.md, "Transfers"):
//   prefill side  ExportKv (verify, convert page by page, digest what is sent) -> FinishExport;
//   decode side   ReserveImport (pages, tags, deadline) -> WritePage x pages (any thread)
//                 -> CommitImport (tags + digest) | AbortImport | the deadline.
// Every transfer is registered in the TransferLedger, so the pages it reads or writes are freed
// only once it is terminal, and each reaches exactly one terminal state.

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "engine/runtime/engine.h"
#include "engine/runtime/engine_internal.h"

namespace tandem::engine::runtime {

Status KvExport::NextPage(std::span<uint8_t> out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) {
    return Status::FailedPrecondition("the KV export of request " + std::to_string(id_) + " has ended");
  }
  if (next_ >= pages_.size()) {
    return Status::OutOfRange("request " + std::to_string(id_) + ": all " + std::to_string(pages_.size()) +
                              " KV pages were already sent");
  }
  const size_t first = next_ * page_tokens_;
  const size_t valid = std::min(page_tokens_, static_cast<size_t>(num_tokens_) - first);
  RETURN_IF_ERROR(converter_->Convert(pages_[next_], valid, out));
  if (checksum_) digest_.Update(out);
  ++next_;
  if (bytes_out_ != nullptr) bytes_out_->fetch_add(out.size(), std::memory_order_relaxed);
  return Status::Ok();
}

StatusOr<std::shared_ptr<KvExport>> Engine::ExportKv(RequestId id, const kv::KvLayout& target) {
  const Sequence* seq = scheduler_->Find(id);
  if (seq == nullptr || seq->phase != SeqPhase::kExportHeld) {
    return Status::FailedPrecondition("request " + std::to_string(id) + " is not held for export");
  }
  if (exports_.count(id) != 0) {
    return Status::FailedPrecondition("request " + std::to_string(id) + " is already being exported");
  }
  if (tracker_->enabled()) {
    kv::VerifyResult result;
    const std::span<const kv::PageId> list(seq->kv.pages);  // the pages the export reads
    const size_t read = std::min(list.size(), scheduler_->PagesFor(static_cast<size_t>(seq->kv.num_tokens)));
    const kv::RequestPages batch[] = {{id, list.first(read)}};
    tracker_->VerifyBatch(batch, &result);
    if (!result.ok()) {
      return Status::DataLoss("request " + std::to_string(id) +
                              " failed KV integrity verification before export (" +
                              kv::MismatchReasonName(result.incidents[0].reason) + ")");
    }
  }
  const kv::PagePool& pool = *config_.executor->kv_pool();
  ASSIGN_OR_RETURN(std::unique_ptr<kv::PageConverter> converter, kv::PageConverter::Create(pool, target));
  std::shared_ptr<KvExport> out(new KvExport());
  out->id_ = id;
  out->num_tokens_ = seq->kv.num_tokens;
  out->first_token_ = seq->tokens.back();
  out->layout_ = target;
  out->page_tokens_ = pool.page_tokens();
  const size_t pages = scheduler_->PagesFor(static_cast<size_t>(seq->kv.num_tokens));
  out->pages_.assign(seq->kv.pages.begin(), seq->kv.pages.begin() + static_cast<std::ptrdiff_t>(pages));
  out->converter_ = std::move(converter);
  out->checksum_ = config_.transfer_checksum;
  out->bytes_out_ = &export_bytes_;
  out->deadline_nanos_ = config_.clock->NowNanos() + config_.import_timeout_ms * 1'000'000;
  const uint64_t transfer = NextTransferId();
  // The ledger's deadline is a backstop after ours: ExpireImports closes the export first, so no
  // NextPage reads a page after it may have been reused.
  RETURN_IF_ERROR(ledger_->Begin(transfer, id, config_.import_timeout_ms + 60'000));
  exports_.emplace(id, std::make_pair(transfer, out));
  return out;
}

Status Engine::FinishExport(RequestId id, kv::TransferState terminal) {
  auto it = exports_.find(id);
  if (it == exports_.end())
    return Status::FailedPrecondition("no export of request " + std::to_string(id) + " is open");
  const uint64_t transfer = it->second.first;
  {
    std::lock_guard<std::mutex> lock(it->second.second->mu_);  // waits for a read in progress
    it->second.second->open_ = false;
  }
  exports_.erase(it);
  (void)ledger_->Finish(transfer, terminal);
  const Sequence* seq = scheduler_->Find(id);
  if (seq == nullptr || seq->phase != SeqPhase::kExportHeld) return Status::Ok();  // cancelled meanwhile
  if (terminal != kv::TransferState::kDone) {
    ++counters_.export_failures;
    FinishRequest(id, FinishReason::kAbort,
                  std::string("KV transfer to the decode pool ") + kv::TransferStateName(terminal),
                  &pending_outputs_);
    return Status::Ok();
  }
  states_.erase(id);
  StatusOr<std::unique_ptr<Sequence>> removed = scheduler_->Remove(id);
  if (!removed.ok()) return removed.status();
  ++counters_.exported;
  RequestOutput out;
  out.id = id;
  out.exported = true;
  pending_outputs_.push_back(std::move(out));
  return Status::Ok();
}

StatusOr<ImportReservation> Engine::ReserveImport(const Request& request) {
  if (config_.role != EngineRole::kDecodeOnly) {
    return Status::FailedPrecondition("ReserveImport needs a decode-only engine, this one is " +
                                      std::string(EngineRoleName(config_.role)));
  }
  kv::PagePool& pool = *config_.executor->kv_pool();
  ASSIGN_OR_RETURN(kv::KvLayout layout, kv::LayoutOf(pool));
  if (request.prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  RETURN_IF_ERROR(ValidateTokens(request.prompt, "prompt"));
  if (!scheduler_->CanEverFit(request.prompt.size())) {
    return Status::OutOfRange("the request's prompt plus one token can never fit in this KV pool");
  }
  StatusOr<RequestId> id = AssignId(request.id);
  if (!id.ok()) return id.status();
  StatusOr<std::unique_ptr<RequestState>> state = MakeState(request, *id);
  if (!state.ok()) return state.status();

  auto seq = std::make_unique<Sequence>(*id, pool.page_tokens(), allocator_.get(), tracker_.get());
  seq->tokens = request.prompt;
  seq->prompt_len = request.prompt.size();
  seq->params = request.params;
  seq->tenant = request.tenant;
  const size_t num_pages = scheduler_->PagesFor(request.prompt.size());
  if (Status st = seq->table.AppendTokens(request.prompt.size()); !st.ok()) {
    return Status::ResourceExhausted("importing request " + std::to_string(*id) + " needs " +
                                     std::to_string(num_pages) + " free KV pages, " +
                                     std::to_string(allocator_->free_pages()) + " are free");
  }
  auto import = std::make_shared<Import>();
  import->id = *id;
  import->page_bytes = layout.page_bytes;
  import->deadline_nanos = config_.clock->NowNanos() + config_.import_timeout_ms * 1'000'000;
  for (size_t p = 0; p < num_pages; ++p) {
    const kv::PageId page = seq->table.pages()[p].page;
    seq->kv.pages.push_back(page);
    import->pages.push_back(page);
    const uint32_t tag = tags_.Next();
    import->tags.push_back(tag);
    tracker_->ExpectTransferTag(*id, static_cast<uint32_t>(p), tag);
  }
  import->landed_tag.assign(num_pages, 0);
  seq->kv.num_tokens = static_cast<int64_t>(request.prompt.size());
  RETURN_IF_ERROR(scheduler_->AddImporting(std::move(seq)));  // releases the pages when it refuses
  const uint64_t transfer = NextTransferId();
  // The ledger's deadline is a backstop after ours: ExpireImports ends the import first.
  if (Status st = ledger_->Begin(transfer, *id, config_.import_timeout_ms + 60'000); !st.ok()) {
    (void)scheduler_->Remove(*id);
    return st;
  }
  states_.emplace(*id, std::move(state).value());
  counters_.prompt_tokens += request.prompt.size();
  ++counters_.imports_reserved;

  ImportReservation r;
  r.transfer_id = transfer;
  r.id = *id;
  r.layout = std::move(layout);
  r.num_tokens = static_cast<int64_t>(request.prompt.size());
  r.page_tags = import->tags;
  r.deadline_nanos = import->deadline_nanos;
  std::lock_guard<std::mutex> lock(imports_mu_);
  imports_.emplace(transfer, std::move(import));
  return r;
}

Status Engine::WritePage(uint64_t transfer_id, uint32_t logical_page, std::span<const uint8_t> bytes,
                         uint32_t tag) {
  std::shared_ptr<Import> import;
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    auto it = imports_.find(transfer_id);
    if (it != imports_.end()) import = it->second;
  }
  auto late = [&] {
    late_writes_.fetch_add(1, std::memory_order_relaxed);
    return Status::FailedPrecondition("KV transfer " + std::to_string(transfer_id) +
                                      " is not open (ended or unknown): page " +
                                      std::to_string(logical_page) + " refused");
  };
  if (import == nullptr) return late();
  std::lock_guard<std::mutex> lock(import->mu);
  if (!import->open) return late();
  auto refuse = [&](const std::string& why) {
    refused_writes_.fetch_add(1, std::memory_order_relaxed);
    return Status::InvalidArgument("KV transfer " + std::to_string(transfer_id) + ": " + why);
  };
  if (logical_page >= import->pages.size()) {
    return refuse("page " + std::to_string(logical_page) + " is outside its " +
                  std::to_string(import->pages.size()) + " pages");
  }
  if (bytes.size() != import->page_bytes) {
    return refuse("page " + std::to_string(logical_page) + " has " + std::to_string(bytes.size()) +
                  " bytes, the layout's pages have " + std::to_string(import->page_bytes));
  }
  if (tag == 0 || tag != import->tags[logical_page]) {
    return refuse("page " + std::to_string(logical_page) + " carries a tag that was not issued for it");
  }
  const kv::PageId page = import->pages[logical_page];
  std::memcpy(config_.executor->kv_pool()->PageBytes(page).data(), bytes.data(), bytes.size());
  tracker_->StampTransferTag(page, tag);  // after the data, as a device writes the tag last
  import->landed_tag[logical_page] = tag;
  import_bytes_.fetch_add(bytes.size(), std::memory_order_relaxed);
  return Status::Ok();
}

void Engine::EndImport(uint64_t transfer_id, kv::TransferState terminal, std::string_view reason) {
  std::shared_ptr<Import> import;
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    auto it = imports_.find(transfer_id);
    if (it == imports_.end()) return;
    import = std::move(it->second);
    imports_.erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(import->mu);  // waits for a copy in progress
    import->open = false;
  }
  (void)ledger_->Finish(transfer_id, terminal);
  if (terminal == kv::TransferState::kDone) return;
  if (terminal == kv::TransferState::kTimedOut) ++counters_.imports_timed_out;
  if (scheduler_->Find(import->id) != nullptr) {
    FinishRequest(import->id, FinishReason::kAbort, std::string(reason), &pending_outputs_);
  }
}

Status Engine::CommitImport(uint64_t transfer_id, int32_t first_token, uint64_t digest) {
  std::shared_ptr<Import> import;
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    auto it = imports_.find(transfer_id);
    if (it != imports_.end()) import = it->second;
  }
  if (import == nullptr) {
    return Status::FailedPrecondition("KV transfer " + std::to_string(transfer_id) + " is not open");
  }
  const RequestId id = import->id;
  auto fail = [&](Status st) {
    ++counters_.imports_failed;
    EndImport(transfer_id, kv::TransferState::kFailed, "KV transfer failed: " + st.message());
    return st;
  };
  if (scheduler_->Find(id) == nullptr) {  // cancelled while its pages were arriving
    EndImport(transfer_id, kv::TransferState::kFailed, "");
    return Status::FailedPrecondition("request " + std::to_string(id) +
                                      " was cancelled during its KV transfer");
  }
  kv::KvDigest landed;
  Status pages_ok = Status::Ok();
  {
    std::lock_guard<std::mutex> lock(import->mu);  // no write lands while the pages are checked
    for (size_t p = 0; p < import->pages.size() && pages_ok.ok(); ++p) {
      if (import->landed_tag[p] == 0) {
        pages_ok =
            Status::InvalidArgument("request " + std::to_string(id) + ": KV page " + std::to_string(p) +
                                    " of " + std::to_string(import->pages.size()) + " never arrived");
      } else if (import->landed_tag[p] != import->tags[p]) {
        pages_ok = Status::DataLoss("request " + std::to_string(id) + ": KV page " + std::to_string(p) +
                                    " carries another transfer's tag");
      } else if (config_.transfer_checksum) {
        landed.Update(config_.executor->kv_pool()->PageBytes(import->pages[p]));
      }
    }
  }
  if (!pages_ok.ok()) return fail(pages_ok);
  if (config_.transfer_checksum) {
    if (digest == 0) {
      return fail(Status::DataLoss("request " + std::to_string(id) +
                                   ": the sender computed no transfer checksum (the transfer checksum is off "
                                   "on the sending side and on here)"));
    }
    if (landed.Finish() != digest) {
      return fail(
          Status::DataLoss("request " + std::to_string(id) +
                           ": the landed KV does not match the sender's digest (corrupted in transit)"));
    }
  }
  if (Status st = ValidateTokens(std::span<const int32_t>(&first_token, 1), "first"); !st.ok())
    return fail(st);
  EndImport(transfer_id, kv::TransferState::kDone, "");
  ++counters_.imports_committed;
  Sequence* seq = scheduler_->Find(id);
  RequestState& state = *states_.at(id);
  // The first token counts toward max_tokens and stop checks; its text was the prefill side's.
  RequestOutput first;
  first.id = id;
  if (Status st = state.processor.Append(first_token, &first); !st.ok()) {
    FinishRequest(id, FinishReason::kAbort, "output processing failed: " + st.ToString(), &pending_outputs_);
    return Status::Ok();
  }
  seq->tokens.push_back(first_token);
  if (first.finish) {
    first.new_tokens.clear();  // emitted by the prefill side
    first.text_delta.clear();
    ++counters_.finished[static_cast<size_t>(*first.finish)];
    states_.erase(id);
    (void)scheduler_->Remove(id);
    pending_outputs_.push_back(std::move(first));
    return Status::Ok();
  }
  return scheduler_->StartImported(id);
}

Status Engine::AbortImport(uint64_t transfer_id, std::string_view reason) {
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    if (imports_.count(transfer_id) == 0) {
      return Status::FailedPrecondition("KV transfer " + std::to_string(transfer_id) + " is not open");
    }
  }
  ++counters_.imports_aborted;
  EndImport(transfer_id, kv::TransferState::kFailed, "KV transfer aborted: " + std::string(reason));
  return Status::Ok();
}

void Engine::ExpireImports() {
  const int64_t now = config_.clock->NowNanos();
  std::vector<uint64_t> overdue;
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    for (const auto& [transfer, import] : imports_) {
      if (import->deadline_nanos <= now) overdue.push_back(transfer);
    }
  }
  std::sort(overdue.begin(), overdue.end());
  for (uint64_t transfer : overdue) {
    EndImport(transfer, kv::TransferState::kTimedOut, "KV transfer timed out before it was committed");
  }
  std::vector<RequestId> stale;
  for (const auto& [id, open] : exports_) {
    if (open.second->deadline_nanos() <= now) stale.push_back(id);
  }
  std::sort(stale.begin(), stale.end());
  for (RequestId id : stale) (void)FinishExport(id, kv::TransferState::kTimedOut);
}

std::optional<int64_t> Engine::NextDeadlineNanos() const {
  std::lock_guard<std::mutex> lock(imports_mu_);
  std::optional<int64_t> next;
  for (const auto& [transfer, import] : imports_) {
    if (!next || import->deadline_nanos < *next) next = import->deadline_nanos;
  }
  for (const auto& [id, open] : exports_) {
    if (!next || open.second->deadline_nanos() < *next) next = open.second->deadline_nanos();
  }
  return next;
}

Status Engine::BeginTransfer(uint64_t transfer_id, RequestId id, int64_t timeout_ms) {
  if (scheduler_->Find(id) == nullptr) return Status::NotFound("no live request " + std::to_string(id));
  return ledger_->Begin(transfer_id, id, timeout_ms);
}

Status Engine::FinishTransfer(uint64_t transfer_id, kv::TransferState terminal) {
  return ledger_->Finish(transfer_id, terminal);
}

}  // namespace tandem::engine::runtime
