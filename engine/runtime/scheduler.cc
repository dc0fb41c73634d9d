#include "engine/runtime/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

namespace tandem::engine::runtime {

Status ValidateSchedulerConfig(const SchedulerConfig& config) {
  if (config.max_batch_tokens < 1) {
    return Status::InvalidArgument("max_batch_tokens must be >= 1, got " +
                                   std::to_string(config.max_batch_tokens));
  }
  if (config.max_running_requests < 1) {
    return Status::InvalidArgument("max_running_requests must be >= 1, got " +
                                   std::to_string(config.max_running_requests));
  }
  return Status::Ok();
}

Scheduler::Scheduler(const SchedulerConfig& config, size_t page_tokens, kv::PageAllocator* allocator,
                     kv::IntegrityTracker* tracker, kv::TransferLedger* ledger, kv::PrefixCache* cache)
    : config_(config),
      page_tokens_(page_tokens),
      allocator_(allocator),
      tracker_(tracker),
      ledger_(ledger),
      cache_(cache) {}

Scheduler::~Scheduler() {
  // Give every page back so the allocator (which outlives us) sees no holder that no longer exists.
  for (auto& [id, seq] : requests_) ReleasePages(*seq);
}

Status Scheduler::Add(const Request& request) {
  if (request.prompt.empty()) return Status::InvalidArgument("request has an empty prompt");
  if (requests_.count(request.id) != 0) {
    return Status::AlreadyExists("request id " + std::to_string(request.id) + " is already live");
  }
  if (!CanEverFit(request.prompt.size())) {
    return Status::OutOfRange(
        "request " + std::to_string(request.id) + " can never run: its prompt of " +
        std::to_string(request.prompt.size()) + " tokens plus one generated token needs " +
        std::to_string(PagesFor(request.prompt.size() + 1)) + " KV pages of " + std::to_string(page_tokens_) +
        " tokens, the pool holds " + std::to_string(allocator_->num_pages()));
  }
  auto seq = std::make_unique<Sequence>(request.id, page_tokens_, allocator_, tracker_);
  seq->tokens = request.prompt;
  seq->prompt_len = request.prompt.size();
  seq->params = request.params;
  seq->tenant = request.tenant;
  // No tenant, no salt: such a request neither looks up nor publishes prefix pages, so requests
  // the server could not attribute never share KV with anyone (MakeTenantSalt is never empty).
  seq->salt = request.tenant.empty() ? std::string() : kv::MakeTenantSalt({request.tenant});
  waiting_.push_back(seq.get());
  requests_.emplace(request.id, std::move(seq));
  return Status::Ok();
}

Status Scheduler::AddRunning(std::unique_ptr<Sequence> seq) {
  if (requests_.count(seq->id) != 0) {
    ReleasePages(*seq);
    return Status::AlreadyExists("request id " + std::to_string(seq->id) + " is already live");
  }
  if (static_cast<int64_t>(running_.size()) >= config_.max_running_requests) {
    ReleasePages(*seq);
    return Status::ResourceExhausted("max_running_requests (" + std::to_string(config_.max_running_requests) +
                                     ") requests are running");
  }
  seq->phase = SeqPhase::kRunning;
  seq->admit_order = next_admit_order_++;
  running_.push_back(seq.get());
  const RequestId id = seq->id;
  requests_.emplace(id, std::move(seq));
  return Status::Ok();
}

Status Scheduler::AddImporting(std::unique_ptr<Sequence> seq) {
  if (requests_.count(seq->id) != 0) {
    ReleasePages(*seq);
    return Status::AlreadyExists("request id " + std::to_string(seq->id) + " is already live");
  }
  if (static_cast<int64_t>(running_.size() + importing_) >= config_.max_running_requests) {
    ReleasePages(*seq);
    return Status::ResourceExhausted("max_running_requests (" + std::to_string(config_.max_running_requests) +
                                     ") requests are running or importing");
  }
  seq->phase = SeqPhase::kImporting;
  ++importing_;
  const RequestId id = seq->id;
  requests_.emplace(id, std::move(seq));
  return Status::Ok();
}

Status Scheduler::StartImported(RequestId id) {
  Sequence* seq = Find(id);
  if (seq == nullptr || seq->phase != SeqPhase::kImporting) {
    return Status::FailedPrecondition("request " + std::to_string(id) + " is not importing");
  }
  --importing_;
  seq->phase = SeqPhase::kRunning;
  seq->admit_order = next_admit_order_++;
  running_.push_back(seq);
  return Status::Ok();
}

Status Scheduler::Reserve(Sequence& seq, size_t n) {
  const size_t target = static_cast<size_t>(seq.kv.num_tokens) + n;
  if (seq.table.num_tokens() < target) {
    const size_t new_pages = PagesFor(target) - seq.table.num_pages();
    if (cache_ != nullptr && new_pages > allocator_->free_pages()) {
      cache_->Evict(new_pages - allocator_->free_pages());
    }
    RETURN_IF_ERROR(seq.table.AppendTokens(target - seq.table.num_tokens()));
  }
  const auto pages = seq.table.pages();
  for (size_t i = seq.kv.pages.size(); i < pages.size(); ++i) seq.kv.pages.push_back(pages[i].page);
  return Status::Ok();
}

void Scheduler::ReleasePages(Sequence& seq) {
  if (cache_ != nullptr) {
    if (seq.match_lock != nullptr) cache_->Unlock(std::exchange(seq.match_lock, nullptr));
    if (seq.publish_lock != nullptr) cache_->Unlock(std::exchange(seq.publish_lock, nullptr));
  }
  seq.published = false;
  std::vector<kv::PageRef> refs = seq.table.TakePages();
  seq.kv = model::KvSequence{};
  if (refs.empty() || ledger_->DeferRelease(seq.id, refs)) return;
  for (const kv::PageRef& ref : refs) counters_.stale_page_releases += !allocator_->Unref(ref).ok();
}

void Scheduler::EraseFromQueues(Sequence& seq) {
  if (auto it = std::find(running_.begin(), running_.end(), &seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), &seq); it != waiting_.end()) waiting_.erase(it);
}

void Scheduler::Preempt(Sequence& seq) {
  ReleasePages(seq);
  EraseFromQueues(seq);
  seq.phase = SeqPhase::kWaiting;
  ++seq.preemptions;
  ++counters_.preemptions;
  waiting_.push_front(&seq);
}

bool Scheduler::Admit(Sequence& seq) {
  if (cache_ != nullptr && !seq.salt.empty() && seq.tokens.size() > 1) {
    // Leave at least the last token to compute: its logits sample the next one.
    kv::PrefixCache::Match match =
        cache_->MatchAndLock(seq.salt, std::span<const int32_t>(seq.tokens).first(seq.tokens.size() - 1));
    seq.match_lock = match.lock;
    if (!match.pages.empty() && seq.table.AdoptPrefix(std::move(match.pages)).ok()) {
      for (const kv::PageRef& ref : seq.table.pages()) seq.kv.pages.push_back(ref.page);
      seq.kv.num_tokens = static_cast<int64_t>(match.tokens);
    }
    seq.cached_prompt_tokens = static_cast<size_t>(seq.kv.num_tokens);
  }
  if (Reserve(seq, seq.pending()).ok()) return true;
  ReleasePages(seq);  // gives the adopted prefix back
  return false;
}

void Scheduler::Publish(Sequence& seq) {
  if (cache_ == nullptr || seq.salt.empty() || seq.published ||
      static_cast<size_t>(seq.kv.num_tokens) < seq.prompt_len) {
    return;
  }
  seq.published = true;
  const size_t pages = seq.prompt_len / page_tokens_;
  if (pages == 0) return;
  StatusOr<kv::PrefixCache::Lock> lock =
      cache_->Insert(seq.salt, std::span<const int32_t>(seq.tokens).first(pages * page_tokens_),
                     seq.table.pages().first(pages));
  if (lock.ok()) seq.publish_lock = *lock;
}

bool Scheduler::PlanDecode(Sequence& seq, StepPlan* plan) {
  if (PagesFor(static_cast<size_t>(seq.kv.num_tokens) + 1) > allocator_->num_pages()) {
    plan->out_of_pages.push_back(seq.id);
    return false;
  }
  while (!Reserve(seq, 1).ok()) {
    // Not a page free: the most recently admitted running request gives its pages back.
    Sequence* victim = running_.back();
    Preempt(*victim);
    plan->preempted.push_back(victim->id);
    if (victim == &seq) return false;
  }
  plan->chunks.push_back({&seq, 1, seq.pending() == 1});
  plan->num_tokens += 1;
  return true;
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  for (Sequence* seq : running_) Publish(*seq);
  int64_t budget = config_.max_batch_tokens;
  // 1. Decode tokens (and one-token prefill remainders), in admission order. A preemption removes
  //    running_.back(), which is this request or one after it, so indices before i stay valid.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    if (running_[i]->pending() == 1 && PlanDecode(*running_[i], &plan)) --budget;
  }
  // 2. Prefill chunks of admitted requests (their pages were reserved at admission).
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& seq = *running_[i];
    if (seq.pending() <= 1) continue;
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(seq.pending()), budget);
    if (!Reserve(seq, static_cast<size_t>(n)).ok()) continue;  // reserved already; cannot fail
    plan.chunks.push_back({&seq, n, static_cast<size_t>(n) == seq.pending()});
    plan.num_tokens += n;
    budget -= n;
  }
  // 3. Admission, FCFS. Not in a step that preempted: the pages just freed went to running requests
  //    about to need more, and readmitting the victim at once would thrash.
  while (plan.preempted.empty() && budget > 0 && !waiting_.empty() &&
         static_cast<int64_t>(running_.size() + importing_) < config_.max_running_requests) {
    Sequence& seq = *waiting_.front();
    if (!Admit(seq)) break;  // the head does not fit yet: nobody overtakes it
    waiting_.pop_front();
    seq.phase = SeqPhase::kRunning;
    seq.admit_order = next_admit_order_++;
    running_.push_back(&seq);
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(seq.pending()), budget);
    plan.chunks.push_back({&seq, n, static_cast<size_t>(n) == seq.pending()});
    plan.num_tokens += n;
    budget -= n;
  }
  return plan;
}

void Scheduler::PublishPrompt(RequestId id) {
  if (Sequence* seq = Find(id); seq != nullptr && seq->phase == SeqPhase::kRunning) Publish(*seq);
}

Status Scheduler::HoldForExport(RequestId id) {
  Sequence* seq = Find(id);
  if (seq == nullptr || seq->phase != SeqPhase::kRunning) {
    return Status::FailedPrecondition("request " + std::to_string(id) + " is not running");
  }
  Publish(*seq);
  EraseFromQueues(*seq);
  seq->phase = SeqPhase::kExportHeld;
  return Status::Ok();
}

StatusOr<std::unique_ptr<Sequence>> Scheduler::Remove(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return Status::NotFound("no live request " + std::to_string(id));
  std::unique_ptr<Sequence> seq = std::move(it->second);
  requests_.erase(it);
  if (seq->phase == SeqPhase::kImporting) --importing_;
  EraseFromQueues(*seq);
  ReleasePages(*seq);
  return seq;
}

size_t Scheduler::ReclaimDeferred() {
  ledger_->ExpireOverdue();
  size_t freed = 0;
  for (const kv::PageRef& ref : ledger_->TakeReleasable()) {
    if (allocator_->Unref(ref).ok()) {
      ++freed;
    } else {
      ++counters_.stale_page_releases;
    }
  }
  return freed;
}

Sequence* Scheduler::Find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

size_t Scheduler::prefill_tokens_pending() const {
  size_t tokens = 0;
  for (const Sequence* seq : waiting_) {
    const size_t computed = static_cast<size_t>(seq->kv.num_tokens);
    if (seq->tokens.size() > computed) tokens += seq->tokens.size() - computed;
  }
  for (const Sequence* seq : running_) {
    const size_t computed = static_cast<size_t>(seq->kv.num_tokens);
    if (seq->prompt_len > computed) tokens += seq->prompt_len - computed;
  }
  return tokens;
}

size_t Scheduler::pages_held_by_requests() const {
  size_t pages = 0;
  for (const auto& [id, seq] : requests_) pages += seq->table.num_pages();
  return pages;
}

}  // namespace tandem::engine::runtime
