#include "agent/grpc_util.h"

namespace tandem::agent {
namespace {
constexpr int kMaxMessageBytes = 256 << 20;
}

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

Status FromGrpc(const grpc::Status& status, std::string_view what) {
  if (status.ok()) return Status::Ok();
  const int code = static_cast<int>(status.error_code());
  const StatusCode mapped = code >= 1 && code <= 16 ? static_cast<StatusCode>(code) : StatusCode::kUnknown;
  return Status(mapped, std::string(what) + ": " + status.error_message());
}

void SetDeadline(grpc::ClientContext* ctx, int64_t timeout_ms) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
}

std::shared_ptr<grpc::Channel> ChannelCache::Get(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = channels_.find(endpoint);
  if (it != channels_.end()) return it->second;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A dead peer is noticed within seconds, not after TCP's minutes.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);
  auto channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
  channels_.emplace(endpoint, channel);
  return channel;
}

void ConfigureServerBuilder(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder->SetMaxSendMessageSize(kMaxMessageBytes);
  // Generate and PushKv handlers hold their thread for a whole request: keep pollers free for new
  // calls so an arriving RPC does not wait for a poller thread to be made.
  builder->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 4);
  builder->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 16);
}

}  // namespace tandem::agent
