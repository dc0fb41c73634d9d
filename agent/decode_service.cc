#include "agent/decode_service.h"

#include <chrono>
#include <thread>
#include <vector>

#include "agent/grpc_util.h"
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
  runtime::EngineLoop& loop = host_->loop();
  v1::PushKvMessage msg;
  uint64_t transfer = 0;
  bool have_transfer = false, refused_tag = false;
  uint32_t accepted = 0;
  const auto start = std::chrono::steady_clock::now();
  while (reader->Read(&msg)) {
    if (!have_transfer) {
      transfer = msg.transfer_id();
      have_transfer = true;
    } else if (msg.transfer_id() != transfer) {
      (void)loop.AbortImport(transfer, "a push stream switched transfers");
      metrics_->CountTransferFailure(TransferFailure::kAborted);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "one PushKv stream carries one transfer");
    }
    if (msg.has_page()) {
      const std::string& data = msg.page().data();
      Status st =
          loop.WritePage(transfer, msg.page().logical_page(),
                         std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
                         msg.page().transfer_tag());
      if (st.ok()) {
        ++accepted;
      } else if (st.code() == StatusCode::kFailedPrecondition) {
        // The transfer has ended (a late write): refused and counted by the engine; nothing to commit.
        return ToGrpc(st);
      } else {
        refused_tag = true;  // a wrong tag, index or size: the commit will refuse the transfer
        TANDEM_LOG(Warning) << "transfer " << transfer << ": page " << msg.page().logical_page()
                            << " refused: " << st.ToString();
      }
      continue;
    }
    if (msg.has_trailer()) {
      response->set_pages_accepted(accepted);
      Status st = loop.CommitImport(transfer, msg.trailer().first_token_id(), msg.trailer().digest());
      if (!st.ok() && refused_tag) {
        // A page refused for its tag never landed: the commit says "missing", the cause is the tag.
        st = Status::DataLoss("transfer " + std::to_string(transfer) +
                              ": a page carried a transfer tag not issued for it (" + st.message() + ")");
      }
      if (!st.ok()) {
        metrics_->CountTransferFailure(refused_tag                          ? TransferFailure::kTagMismatch
                                       : st.code() == StatusCode::kDataLoss ? TransferFailure::kDigestMismatch
                                                                            : TransferFailure::kAborted);
        TANDEM_LOG(Warning) << "transfer " << transfer << " refused at commit: " << st.ToString();
        return ToGrpc(st);
      }
      metrics_->ObserveTransfer(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return grpc::Status::OK;
    }
  }
  if (have_transfer) {
    const std::string why = ctx->IsCancelled() ? "the prefill agent cancelled the transfer"
                                               : "the push stream ended before its trailer";
    if (loop.AbortImport(transfer, why).ok()) {
      metrics_->CountTransferFailure(ctx->IsCancelled() ? TransferFailure::kPeerUnavailable
                                                        : TransferFailure::kAborted);
    }
  }
  return grpc::Status(grpc::StatusCode::ABORTED, "the push stream ended before its trailer");
}

}  // namespace tandem::agent
