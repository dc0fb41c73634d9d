#pragma once
// gRPC glue: Status <-> grpc::Status (the codes are the same numbers), channels cached per peer,
// deadlines, and the transport: plaintext, or mutual TLS from PEM files (AgentConfig::tls_*)
// watched for rotation by gRPC's FileWatcherCertificateProvider.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <grpcpp/grpcpp.h>

#include "agent/config.h"
#include "common/status.h"

namespace tandem::agent {

grpc::Status ToGrpc(const Status& status);
Status FromGrpc(const grpc::Status& status, std::string_view what);

// Sets ctx's deadline to now + timeout_ms.
void SetDeadline(grpc::ClientContext* ctx, int64_t timeout_ms);

// The transport between agents. Default: plaintext.
struct GrpcTransport {
  std::string cert_file, key_file, ca_file;  // all three, or none
  std::string server_name;                   // checked against the server's SAN instead of the dialed host
  unsigned refresh_s = 60;                   // the files are re-read this often
  bool tls() const { return !cert_file.empty(); }
};
GrpcTransport TransportOf(const AgentConfig& config);

// FailedPrecondition naming the file when a TLS file cannot be read or holds no PEM block, so a
// misconfigured agent fails at start instead of refusing every handshake.
Status CheckTransportFiles(const GrpcTransport& transport);

// Server credentials: mutual TLS (a client certificate that chains to ca_file is required), or
// plaintext.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const GrpcTransport& transport);
// Channel credentials: mutual TLS (the server's certificate must chain to ca_file and name the
// dialed host, or server_name), or plaintext.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const GrpcTransport& transport);

// One channel per peer address ("host:port"), created on first use; thread-safe. Messages up to
// 256 MiB (a KV page of a large model is several MiB).
class ChannelCache {
 public:
  explicit ChannelCache(GrpcTransport transport = {}) : transport_(std::move(transport)) {}
  std::shared_ptr<grpc::Channel> Get(const std::string& endpoint);

 private:
  GrpcTransport transport_;
  std::mutex mu_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;  // made on first use, shared by every channel
  std::unordered_map<std::string, std::shared_ptr<grpc::Channel>> channels_;
};

// Server builder options every agent's gRPC server uses (message size).
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

}  // namespace tandem::agent
