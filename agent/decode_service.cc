#include "agent/decode_service.h"

#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "agent/grpc_util.h"
#include "agent/kv_import.h"
#include "agent/wire.h"
#include "common/logging.h"

namespace tandem::agent {

namespace runtime = engine::runtime;
using metrics::TransferFailure;

namespace {
constexpr auto kPoll = std::chrono::milliseconds(20);

struct InFlight {
  explicit InFlight(std::atomic<int64_t>* n) : n_(n) { n_->fetch_add(1); }
  ~InFlight() { n_->fetch_sub(1); }
  std::atomic<int64_t>* n_;
};
}  // namespace

DecodeService::DecodeService(EngineHost* host, metrics::AgentMetrics* metrics, const AgentConfig& config)
    : host_(host), metrics_(metrics), queue_wait_ms_(static_cast<int64_t>(config.queue_wait_ms)) {}

grpc::Status DecodeService::Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* request,
                                     grpc::ServerWriter<v1::GenerateEvent>* writer) {
  if (!admitting_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the decode agent is draining");
  InFlight guard(&in_flight_);
  runtime::Request req;
  req.prompt.assign(request->prompt_token_ids().begin(), request->prompt_token_ids().end());
  req.params = FromProto(request->sampling());
  req.tenant = request->tenant();
  auto channel = std::make_shared<OutputChannel>();
  runtime::EngineLoop& loop = host_->loop();

  // Pages may be short for a moment: wait for them (the queue of a decode member) up to the limit.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(queue_wait_ms_);
  StatusOr<runtime::ImportReservation> reservation = loop.ReserveImport(req, OutputChannel::SinkFor(channel));
  while (!reservation.ok() && reservation.status().code() == StatusCode::kResourceExhausted &&
         std::chrono::steady_clock::now() < give_up && !ctx->IsCancelled()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    reservation = loop.ReserveImport(req, OutputChannel::SinkFor(channel));
  }
  if (!reservation.ok()) return ToGrpc(reservation.status());

  v1::GenerateEvent first;
  v1::Reservation* r = first.mutable_reservation();
  r->set_transfer_id(reservation->transfer_id);
  ToProto(reservation->layout, r->mutable_layout());
  for (uint32_t tag : reservation->page_tags) r->add_page_tags(tag);
  r->set_num_tokens(static_cast<uint64_t>(reservation->num_tokens));
  bool client_gone = !writer->Write(first);
  if (client_gone) (void)loop.Cancel(reservation->id);

  // Every request ends with exactly one finish from the engine: wait for it, whatever happens.
  for (;;) {
    std::vector<runtime::RequestOutput> ready = channel->PopAll(kPoll);
    std::optional<runtime::RequestOutput> out;
    for (runtime::RequestOutput& o : ready) {
      if (!out) {
        out = std::move(o);
      } else {
        MergeOutput(*out, std::move(o));
      }
    }
    if (!out) {
      if (!client_gone && ctx->IsCancelled()) {
        client_gone = true;
        (void)loop.Cancel(reservation->id);
      }
      continue;
    }
    if (!client_gone) {
      v1::GenerateEvent event;
      ToProto(*out, event.mutable_tokens());
      if (!writer->Write(event)) {
        client_gone = true;
        (void)loop.Cancel(reservation->id);
      }
    }
    if (out->finish) break;
  }
  return client_gone ? grpc::Status(grpc::StatusCode::CANCELLED, "the router went away") : grpc::Status::OK;
}

grpc::Status DecodeService::PushKv(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushKvMessage>* reader,
                                   v1::PushKvResponse* response) {
  ImportTargetOf<runtime::EngineLoop> target(&host_->loop());
  PushKvSession session(&target);
  const auto start = std::chrono::steady_clock::now();
  v1::PushKvMessage msg;
  std::optional<Status> done;
  while (!done && reader->Read(&msg)) done = session.Apply(msg);
  const Status result = done ? *done : session.End(ctx->IsCancelled());
  response->set_pages_accepted(session.pages_accepted());
  if (std::optional<ImportFailure> failure = session.failure()) {
    switch (*failure) {
      case ImportFailure::kTagMismatch: metrics_->CountTransferFailure(TransferFailure::kTagMismatch); break;
      case ImportFailure::kDigestMismatch:
        metrics_->CountTransferFailure(TransferFailure::kDigestMismatch);
        break;
      case ImportFailure::kAborted: metrics_->CountTransferFailure(TransferFailure::kAborted); break;
      case ImportFailure::kPeerGone: metrics_->CountTransferFailure(TransferFailure::kPeerUnavailable); break;
    }
  }
  if (result.ok()) {
    metrics_->ObserveTransfer(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return ToGrpc(result);
}

}  // namespace tandem::agent
