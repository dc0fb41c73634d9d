#include "agent/grpc_util.h"

#include <fstream>
#include <sstream>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

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

GrpcTransport TransportOf(const AgentConfig& config) {
  GrpcTransport t;
  t.cert_file = config.tls_cert_file;
  t.key_file = config.tls_key_file;
  t.ca_file = config.tls_ca_file;
  t.server_name = config.tls_server_name;
  t.refresh_s = static_cast<unsigned>(config.tls_refresh_s);
  return t;
}

Status CheckTransportFiles(const GrpcTransport& transport) {
  if (!transport.tls()) return Status::Ok();
  for (const auto& [what, path] :
       {std::pair<const char*, const std::string&>{"tls.certFile", transport.cert_file},
        {"tls.keyFile", transport.key_file},
        {"tls.caFile", transport.ca_file}}) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return Status::FailedPrecondition(std::string(what) + " " + path + ": cannot be read");
    if (text.str().find("-----BEGIN ") == std::string::npos) {
      return Status::FailedPrecondition(std::string(what) + " " + path + ": no PEM block");
    }
  }
  return Status::Ok();
}

namespace {
std::shared_ptr<grpc::experimental::CertificateProviderInterface> Provider(const GrpcTransport& t) {
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(t.key_file, t.cert_file,
                                                                              t.ca_file, t.refresh_s);
}
}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const GrpcTransport& transport) {
  if (!transport.tls()) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(transport));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const GrpcTransport& transport) {
  if (!transport.tls()) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(transport));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::Channel> ChannelCache::Get(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = channels_.find(endpoint);
  if (it != channels_.end()) return it->second;
  if (!credentials_) credentials_ = ChannelCredentialsFor(transport_);
  grpc::ChannelArguments args;
  if (transport_.tls() && !transport_.server_name.empty()) {
    args.SetSslTargetNameOverride(transport_.server_name);
  }
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A dead peer is noticed within seconds, not after TCP's minutes.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);
  auto channel = grpc::CreateCustomChannel(endpoint, credentials_, args);
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
