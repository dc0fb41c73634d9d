#include "engine/runtime/engine.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/hash.h"
#include "engine/runtime/engine_internal.h"

namespace tandem::engine::runtime {

std::string_view EngineRoleName(EngineRole role) {
  switch (role) {
    case EngineRole::kUnified: return "unified";
    case EngineRole::kPrefillOnly: return "prefill-only";
    case EngineRole::kDecodeOnly: return "decode-only";
  }
  return "unknown";
}

StatusOr<EngineRole> ParseEngineRole(std::string_view name) {
  for (EngineRole r : {EngineRole::kUnified, EngineRole::kPrefillOnly, EngineRole::kDecodeOnly}) {
    if (name == EngineRoleName(r)) return r;
  }
  return Status::InvalidArgument("unknown engine role '" + std::string(name) +
                                 "' (expected unified, prefill-only or decode-only)");
}

uint64_t RequestSeed(uint64_t engine_seed, RequestId id) { return SplitMix64At(engine_seed, id); }

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config) {
  if (config.executor == nullptr || config.executor->kv_pool() == nullptr) {
    return Status::InvalidArgument("EngineConfig needs a model executor with a KV page pool");
  }
  RETURN_IF_ERROR(ValidateSchedulerConfig(config.scheduler));
  for (int32_t id : config.eos_token_ids) {
    if (id < 0 || id >= config.executor->vocab_size()) {
      return Status::InvalidArgument("eos token id " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  return std::unique_ptr<Engine>(new Engine(config));
}

Engine::Engine(const EngineConfig& config) : config_(config) {
  if (config_.clock == nullptr) config_.clock = &SteadyClock::Default();
  kv::PagePool* pool = config_.executor->kv_pool();
  if (config_.integrity) {
    tracker_ = std::make_unique<kv::TagTracker>(pool->num_pages());
  } else {
    tracker_ = std::make_unique<kv::NoopTracker>();
  }
  allocator_ = std::make_unique<kv::PageAllocator>(pool->num_pages(), tracker_.get());
  ledger_ = std::make_unique<kv::TransferLedger>(config_.clock);
  if (config_.prefix_cache) cache_ = std::make_unique<kv::PrefixCache>(allocator_.get(), pool->page_tokens());
  scheduler_ = std::make_unique<Scheduler>(config_.scheduler, pool->page_tokens(), allocator_.get(),
                                           tracker_.get(), ledger_.get(), cache_.get());
}

// The scheduler goes first: it returns its requests' pages to the allocator.
Engine::~Engine() { scheduler_.reset(); }

Status Engine::ValidateTokens(std::span<const int32_t> tokens, std::string_view what) const {
  const int64_t vocab = config_.executor->vocab_size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return Status::InvalidArgument(std::string(what) + " token " + std::to_string(i) + " is " +
                                     std::to_string(tokens[i]) + ", outside the vocabulary of " +
                                     std::to_string(vocab));
    }
  }
  return Status::Ok();
}

StatusOr<RequestId> Engine::AssignId(RequestId wanted) {
  if (wanted != 0) {
    if (scheduler_->Find(wanted) != nullptr) {
      return Status::AlreadyExists("request id " + std::to_string(wanted) + " is already live");
    }
    return wanted;
  }
  while (scheduler_->Find(next_id_) != nullptr || next_id_ == 0) ++next_id_;
  return next_id_++;
}

StatusOr<std::unique_ptr<Engine::RequestState>> Engine::MakeState(const Request& request,
                                                                  RequestId id) const {
  const uint64_t seed = RequestSeed(config_.seed, id);
  StatusOr<Sampler> sampler =
      Sampler::Create(request.params, config_.executor->vocab_size(), seed, config_.eos_token_ids);
  if (!sampler.ok()) return sampler.status();
  StatusOr<OutputProcessor> processor = OutputProcessor::Create(
      request.params, config_.tokenizer, config_.eos_token_ids, request.params.skip_special_tokens);
  if (!processor.ok()) return processor.status();
  return std::make_unique<RequestState>(std::move(sampler).value(), std::move(processor).value());
}

StatusOr<RequestId> Engine::Submit(const Request& request) {
  if (config_.role == EngineRole::kDecodeOnly) {
    return Status::FailedPrecondition(
        "a decode-only engine takes requests through ReserveImport, not Submit");
  }
  if (request.prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  RETURN_IF_ERROR(ValidateTokens(request.prompt, "prompt"));
  StatusOr<RequestId> id = AssignId(request.id);
  if (!id.ok()) return id.status();
  StatusOr<std::unique_ptr<RequestState>> state = MakeState(request, *id);
  if (!state.ok()) return state.status();
  Request queued = request;
  queued.id = *id;
  if (Status added = scheduler_->Add(queued); !added.ok()) {
    if (added.code() == StatusCode::kOutOfRange)
      ++counters_.finished[static_cast<size_t>(FinishReason::kRejected)];
    return added;
  }
  states_.emplace(*id, std::move(state).value());
  counters_.prompt_tokens += request.prompt.size();
  return *id;
}

Status Engine::Cancel(RequestId id) { return End(id, FinishReason::kCancelled, "cancelled by the client"); }

Status Engine::Abort(RequestId id, std::string_view detail) { return End(id, FinishReason::kAbort, detail); }

Status Engine::End(RequestId id, FinishReason reason, std::string_view detail) {
  const Sequence* seq = scheduler_->Find(id);
  if (seq == nullptr) return Status::NotFound("no live request " + std::to_string(id));
  const bool importing = seq->phase == SeqPhase::kImporting;
  FinishRequest(id, reason, detail, &pending_outputs_);
  if (importing) {  // its pages stay parked until the import has ended: end it now
    std::vector<uint64_t> transfers;
    {
      std::lock_guard<std::mutex> lock(imports_mu_);
      for (const auto& [transfer, import] : imports_) {
        if (import->id == id) transfers.push_back(transfer);
      }
    }
    for (uint64_t transfer : transfers) EndImport(transfer, kv::TransferState::kFailed, "");
  }
  return Status::Ok();
}

void Engine::FinishRequest(RequestId id, FinishReason reason, std::string_view detail,
                           std::vector<RequestOutput>* outputs) {
  auto it = states_.find(id);
  RequestOutput out;
  out.id = id;
  if (it != states_.end()) it->second->processor.Finish(reason, detail, &out);
  if (!out.finish) {  // no processor, or it had finished already (its output carried the finish)
    out.finish = reason;
    out.finish_detail = std::string(detail);
  }
  states_.erase(id);
  (void)scheduler_->Remove(id);
  ++counters_.finished[static_cast<size_t>(reason)];
  outputs->push_back(std::move(out));
}

std::vector<RequestOutput> Engine::Step() {
  ExpireImports();
  std::vector<RequestOutput> outputs = std::exchange(pending_outputs_, {});
  scheduler_->ReclaimDeferred();
  StepPlan plan = scheduler_->Schedule();
  for (RequestId id : plan.out_of_pages) {
    FinishRequest(id, FinishReason::kLength, "the KV cache cannot hold the request's next token", &outputs);
  }
  VerifyPlan(&plan, &outputs);
  if (plan.chunks.empty()) return outputs;
  std::vector<std::vector<float>> rows;
  RunForward(plan.chunks, &rows, &outputs);
  ++counters_.steps;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& chunk = plan.chunks[i];
    if (rows[i].empty()) continue;  // aborted
    counters_.computed_tokens += static_cast<uint64_t>(chunk.num_tokens);
    if (chunk.samples) SampleAndEmit(*chunk.seq, rows[i], &outputs);
  }
  return outputs;
}

void Engine::VerifyPlan(StepPlan* plan, std::vector<RequestOutput>* outputs) {
  if (!tracker_->enabled() || plan->chunks.empty()) return;
  // The very lists the executor hands the kernels (kv.pages), up to the pages this step reads and
  // writes: a block-table bug shows up as a page the manifest does not have there.
  std::vector<kv::RequestPages> batch;
  batch.reserve(plan->chunks.size());
  for (const ScheduledChunk& c : plan->chunks) {
    const std::span<const kv::PageId> pages(c.seq->kv.pages);
    const size_t read = scheduler_->PagesFor(static_cast<size_t>(c.seq->kv.num_tokens + c.num_tokens));
    batch.push_back({c.seq->id, pages.first(std::min(read, pages.size()))});
  }
  kv::VerifyResult result;
  tracker_->VerifyBatch(batch, &result);
  if (result.ok()) return;
  for (size_t i = 0; i < result.failed.size(); ++i) {
    const kv::IntegrityIncident& inc = result.incidents[i];
    ++counters_.integrity_aborts[static_cast<size_t>(inc.reason)];
    incident_log_.Report(inc, config_.clock->NowNanos());
    std::erase_if(plan->chunks, [&](const ScheduledChunk& c) { return c.seq->id == result.failed[i]; });
    FinishRequest(result.failed[i], FinishReason::kAbort,
                  std::string("kv integrity: ") + kv::MismatchReasonName(inc.reason) +
                      " mismatch on logical page " + std::to_string(inc.logical_page) + " (physical page " +
                      std::to_string(inc.physical_page) + ")",
                  outputs);
  }
}

void Engine::RunForward(const std::vector<ScheduledChunk>& chunks, std::vector<std::vector<float>>* rows,
                        std::vector<RequestOutput>* outputs) {
  const size_t vocab = static_cast<size_t>(config_.executor->vocab_size());
  rows->assign(chunks.size(), {});
  // Runs chunks[first, first + n); on failure restores each sequence's num_tokens (the whole KV
  // state is in the pages, and what the step wrote past num_tokens is don't-care).
  auto run = [&](size_t first, size_t n) -> Status {
    std::vector<ExecInput> inputs;
    std::vector<int64_t> saved;
    for (size_t i = first; i < first + n; ++i) {
      Sequence& seq = *chunks[i].seq;
      saved.push_back(seq.kv.num_tokens);
      inputs.push_back({&seq.kv, std::span<const int32_t>(seq.tokens)
                                     .subspan(static_cast<size_t>(seq.kv.num_tokens),
                                              static_cast<size_t>(chunks[i].num_tokens))});
    }
    std::vector<float> logits;
    Status st = config_.executor->Forward(inputs, &logits);
    if (st.ok() && logits.size() != n * vocab)
      st = Status::Internal("executor returned logits of the wrong size");
    if (!st.ok()) {
      for (size_t i = 0; i < n; ++i) chunks[first + i].seq->kv.num_tokens = saved[i];
      return st;
    }
    for (size_t i = 0; i < n; ++i) {
      (*rows)[first + i].assign(logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    }
    return Status::Ok();
  };
  const Status batch_status = run(0, chunks.size());
  if (batch_status.ok()) return;
  // Find the requests the failure concerns: one at a time, so the others still make progress.
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Status st = chunks.size() == 1 ? batch_status : run(i, 1);
    if (st.ok()) continue;
    ++counters_.forward_errors;
    FinishRequest(chunks[i].seq->id, FinishReason::kAbort, "forward pass failed: " + st.ToString(), outputs);
  }
}

void Engine::SampleAndEmit(Sequence& seq, std::span<const float> logits,
                           std::vector<RequestOutput>* outputs) {
  RequestState& state = *states_.at(seq.id);
  const std::span<const int32_t> all(seq.tokens);
  StatusOr<SampleResult> sample =
      state.sampler.Sample(logits, all.first(seq.prompt_len), all.subspan(seq.prompt_len));
  if (!sample.ok()) {
    FinishRequest(seq.id, FinishReason::kAbort, "sampling failed: " + sample.status().ToString(), outputs);
    return;
  }
  RequestOutput out;
  out.id = seq.id;
  out.new_tokens.push_back(sample->token);
  if (seq.tokens.size() == seq.prompt_len)
    out.cached_prompt_tokens = static_cast<int64_t>(seq.cached_prompt_tokens);
  if (seq.params.logprobs >= 0) {
    out.new_token_logprobs.push_back(sample->logprob);
    out.top_logprobs.push_back(std::move(sample->top_logprobs));
  }
  if (Status st = state.processor.Append(sample->token, &out); !st.ok()) {
    FinishRequest(seq.id, FinishReason::kAbort, "output processing failed: " + st.ToString(), outputs);
    return;
  }
  seq.tokens.push_back(sample->token);
  ++counters_.generation_tokens;
  const RequestId id = seq.id;
  if (out.finish) {
    ++counters_.finished[static_cast<size_t>(*out.finish)];
    states_.erase(id);
    scheduler_->PublishPrompt(id);  // its prompt was computed: the next request may reuse it
    (void)scheduler_->Remove(id);
  } else if (config_.role == EngineRole::kPrefillOnly) {
    (void)scheduler_->HoldForExport(id);
  }
  outputs->push_back(std::move(out));
}

EngineStats Engine::Stats() const {
  EngineStats s = counters_;
  const kv::PagePool& pool = *config_.executor->kv_pool();
  s.pages_total = allocator_->num_pages();
  s.pages_free = allocator_->free_pages();
  s.pages_held = allocator_->held_pages();
  s.pages_deferred = ledger_->parked_pages();
  s.kv_capacity_tokens = s.pages_total * pool.page_tokens();
  s.kv_used_tokens = s.pages_held * pool.page_tokens();
  s.running = scheduler_->num_running();
  s.waiting = scheduler_->num_waiting();
  s.prefill_tokens_waiting = scheduler_->prefill_tokens_pending();
  s.export_held = scheduler_->num_export_held();
  s.late_transfer_writes = late_writes_.load(std::memory_order_relaxed);
  s.refused_transfer_writes = refused_writes_.load(std::memory_order_relaxed);
  s.import_bytes = import_bytes_.load(std::memory_order_relaxed);
  s.export_bytes = export_bytes_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(imports_mu_);
    s.imports_in_flight = imports_.size();
  }
  const kv::IntegrityCounters ic = tracker_->counters();
  s.integrity_batches = ic.batches_verified;
  s.integrity_pages_checked = ic.pages_checked;
  s.preemptions = scheduler_->counters().preemptions;
  if (cache_ != nullptr) {
    const kv::PrefixCacheCounters& pc = cache_->counters();
    s.prefix_cache_queries = pc.queries;
    s.prefix_cache_hits = pc.hits;
    s.prefix_cache_hit_tokens = pc.hit_tokens;
    s.prefix_cache_pages = cache_->cached_pages();
  }
  return s;
}

}  // namespace tandem::engine::runtime
