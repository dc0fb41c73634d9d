#include "agent/prefill_service.h"

#include <chrono>
#include <thread>
#include <vector>

#include "agent/wire.h"
#include "common/logging.h"

namespace tandem::agent {

namespace runtime = engine::runtime;
using metrics::TransferFailure;

namespace {
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr size_t kRecordedBlocks = 1 << 16;

struct InFlight {
  explicit InFlight(std::atomic<int64_t>* n) : n_(n) { n_->fetch_add(1); }
  ~InFlight() { n_->fetch_sub(1); }
  std::atomic<int64_t>* n_;
};
}  // namespace

PrefillService::PrefillService(EngineHost* host, metrics::AgentMetrics* metrics, const AgentConfig& config)
    : host_(host),
      metrics_(metrics),
      transfer_timeout_ms_(static_cast<int64_t>(config.transfer_timeout_ms)),
      fault_injection_(config.fault_injection),
      channels_(TransportOf(config)),
      blocks_(kRecordedBlocks) {}

StatusOr<runtime::RequestOutput> PrefillService::WaitFirstToken(grpc::ServerContext* ctx,
                                                                OutputChannel& channel,
                                                                runtime::RequestId id) {
  for (;;) {
    std::optional<runtime::RequestOutput> out = channel.Pop(kPoll);
    if (!out) {
      if (ctx->IsCancelled()) {
        (void)host_->loop().Cancel(id);
        return Status::Cancelled("the router cancelled the prefill");
      }
      continue;
    }
    if (out->finish && !out->new_tokens.empty()) return std::move(*out);  // the first token ended it
    if (out->finish) {
      return Status::Aborted("prefill ended with " + std::string(runtime::FinishReasonName(*out->finish)) +
                             (out->finish_detail.empty() ? "" : ": " + out->finish_detail));
    }
    if (!out->new_tokens.empty()) return std::move(*out);
  }
}

grpc::Status PrefillService::Prefill(grpc::ServerContext* ctx, const v1::PrefillRequest* request,
                                     v1::PrefillResponse* response) {
  if (!admitting_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the prefill agent is draining");
  InFlight guard(&in_flight_);
  runtime::EngineLoop& loop = host_->loop();
  StatusOr<engine::kv::KvLayout> target = FromProto(request->target_layout());
  if (!target.ok()) return ToGrpc(target.status());

  runtime::Request req;
  req.prompt.assign(request->prompt_token_ids().begin(), request->prompt_token_ids().end());
  req.params = FromProto(request->sampling());
  req.tenant = request->tenant();
  auto channel = std::make_shared<OutputChannel>();
  StatusOr<runtime::RequestId> id = loop.Submit(req, OutputChannel::SinkFor(channel));
  if (!id.ok()) return ToGrpc(id.status());
  StatusOr<runtime::RequestOutput> first = WaitFirstToken(ctx, *channel, *id);
  if (!first.ok()) return ToGrpc(first.status());

  if (first->finish) {
    // The first token ended the request (max_tokens 1, an end-of-sequence token): nothing to
    // transfer; the router answers with this token and releases the reservation.
    blocks_.Add(PrefixBlockHashes(req.tenant, req.prompt, host_->page_tokens()));  // published too
    ToProto(*first, response->mutable_first());
    response->set_prompt_tokens(static_cast<uint32_t>(req.prompt.size()));
    response->set_cached_tokens(static_cast<uint32_t>(first->cached_prompt_tokens));
    return grpc::Status::OK;
  }
  StatusOr<std::shared_ptr<runtime::KvExport>> kv = loop.ExportKv(*id, *target);
  if (!kv.ok()) {
    (void)loop.Cancel(*id);
    return ToGrpc(kv.status());
  }
  const auto start = std::chrono::steady_clock::now();
  Status pushed = Push(ctx, *request, **kv, response);
  // One terminal state for the export, whatever happened to the push.
  (void)loop.FinishExport(
      *id, pushed.ok() ? engine::kv::TransferState::kDone : engine::kv::TransferState::kFailed);
  if (!pushed.ok()) {
    TANDEM_LOG(Warning) << "request " << request->request_id() << ": KV push failed: " << pushed.ToString();
    return ToGrpc(pushed);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_->ObserveTransfer(seconds);
  blocks_.Add(PrefixBlockHashes(req.tenant, req.prompt, host_->page_tokens()));
  ToProto(*first, response->mutable_first());
  response->set_prompt_tokens(static_cast<uint32_t>(req.prompt.size()));
  response->set_cached_tokens(static_cast<uint32_t>(first->cached_prompt_tokens));
  response->set_transfer_seconds(seconds);
  return grpc::Status::OK;
}

Status PrefillService::Push(grpc::ServerContext* ctx, const v1::PrefillRequest& request,
                            runtime::KvExport& kv, v1::PrefillResponse* response) {
  if (static_cast<size_t>(request.page_tags_size()) != kv.num_pages()) {
    return Status::InvalidArgument("the reservation has " + std::to_string(request.page_tags_size()) +
                                   " page tags for " + std::to_string(kv.num_pages()) + " pages");
  }
  const std::string fault = fault_injection_ ? request.fault() : std::string();
  auto stub = v1::DecodeAgent::NewStub(channels_.Get(request.decode_endpoint()));
  grpc::ClientContext push_ctx;
  SetDeadline(&push_ctx, transfer_timeout_ms_);
  v1::PushKvResponse push_response;
  std::unique_ptr<grpc::ClientWriter<v1::PushKvMessage>> writer = stub->PushKv(&push_ctx, &push_response);
  std::vector<uint8_t> page(kv.layout().page_bytes);
  v1::PushKvMessage msg;
  msg.set_transfer_id(request.transfer_id());
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < kv.num_pages(); ++i) {
    if (ctx->IsCancelled()) {
      push_ctx.TryCancel();
      return Status::Cancelled("the router cancelled the prefill");
    }
    RETURN_IF_ERROR(kv.NextPage(page));
    v1::KvPage* p = msg.mutable_page();
    p->set_logical_page(i);
    p->set_data(page.data(), page.size());
    uint32_t tag = request.page_tags(static_cast<int>(i));
    if (fault == "tag" && i == 0) tag ^= 0x5a5a5a5au;
    p->set_transfer_tag(tag);
    if (!writer->Write(msg)) break;  // Finish says why
    bytes += page.size();
    if (fault == "slow_push") std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if ((fault == "late_write" || fault == "hang") && i == 0) break;
  }
  if (fault == "hang") {
    // Neither the trailer nor an end: both sides' transfer deadlines must end it.
    while (!ctx->IsCancelled() && std::chrono::system_clock::now() < push_ctx.deadline()) {
      std::this_thread::sleep_for(kPoll);
    }
    push_ctx.TryCancel();
    (void)writer->Finish();
    return Status::DeadlineExceeded("the KV transfer hung (fault injection) and timed out");
  }
  if (fault == "late_write") {
    // Abandon the transfer (end the stream without a trailer: the decode member aborts it before
    // Finish returns), then write one more page into it.
    writer->WritesDone();
    (void)writer->Finish();
    grpc::ClientContext late_ctx;
    SetDeadline(&late_ctx, transfer_timeout_ms_);
    v1::PushKvResponse late_response;
    auto late = stub->PushKv(&late_ctx, &late_response);
    (void)late->Write(msg);
    late->WritesDone();
    (void)late->Finish();
    return Status::Aborted("the KV transfer was abandoned and written late (fault injection)");
  }
  v1::KvTrailer* trailer = msg.mutable_trailer();
  trailer->set_num_pages(static_cast<uint32_t>(kv.num_pages()));
  trailer->set_digest(fault == "digest" ? kv.digest() ^ 1 : kv.digest());
  trailer->set_first_token_id(kv.first_token());
  (void)writer->Write(msg);
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      metrics_->CountTransferFailure(TransferFailure::kPeerUnavailable);
    }
    return FromGrpc(st, "decode member " + request.decode_endpoint());
  }
  response->set_pages_sent(static_cast<uint32_t>(kv.num_pages()));
  response->set_kv_bytes_sent(bytes);
  return Status::Ok();
}

}  // namespace tandem::agent
