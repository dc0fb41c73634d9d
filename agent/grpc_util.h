#pragma once
// gRPC glue: Status <-> grpc::Status (the codes are the same numbers), channels cached per peer,
// and deadlines.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <grpcpp/grpcpp.h>

#include "common/status.h"

namespace tandem::agent {

grpc::Status ToGrpc(const Status& status);
Status FromGrpc(const grpc::Status& status, std::string_view what);

// Sets ctx's deadline to now + timeout_ms.
void SetDeadline(grpc::ClientContext* ctx, int64_t timeout_ms);

// One channel per peer address ("host:port"), created on first use; thread-safe. Messages up to
// 256 MiB (a KV page of a large model is several MiB).
class ChannelCache {
 public:
  std::shared_ptr<grpc::Channel> Get(const std::string& endpoint);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<grpc::Channel>> channels_;
};

// Server builder options every agent's gRPC server uses (message size).
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

}  // namespace tandem::agent
