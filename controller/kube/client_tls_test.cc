// TLS against kube-sim with certificates made by the openssl CLI at test time: the server is
// verified against the CA, a client certificate authenticates, a wrong CA or a missing client
// certificate fails.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "controller/kube/client.h"
#include "controller/kube/testing/kube_sim_process.h"

namespace tandem::controller::kube {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ClientTls, ClientCertificateAuthenticatesAndServerIsVerified) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.tls = true, .client_cert = true});
  const KubeConfig& config = sim->config();
  ASSERT_EQ(config.server.rfind("https://127.0.0.1:", 0), 0u) << config.server;
  ASSERT_FALSE(config.client_cert_pem.empty());
  auto client = Client::New(config).value();
  StatusOr<Json> ns = client->Get(kNamespace, "", "default");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  ASSERT_TRUE(client->Create(kConfigMap, "default", {{"metadata", {{"name", "tls"}}}}).ok());
  // Watch over TLS too.
  int added = 0;
  ASSERT_TRUE(client->Watch(kConfigMap, "default", {}, [&](const WatchEvent&) { return ++added < 1; }).ok());
  EXPECT_EQ(added, 1);
}

TEST(ClientTls, WithoutAClientCertificateTheServerRefuses) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.tls = true, .client_cert = true});
  KubeConfig config = sim->config();
  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  Status s = Client::New(config).value()->Get(kNamespace, "", "default").status();
  // The handshake fails (CERT_REQUIRED): no response at all.
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

TEST(ClientTls, ServerSignedByAnotherCaIsRejected) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.tls = true, .token = "t"});
  KubeConfig config = sim->config();
  // The server certificate itself is no CA: verification against it must fail.
  config.ca_pem = Slurp(sim->dir() + "/server.crt");
  Status s = Client::New(config).value()->Get(kNamespace, "", "default").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("TLS handshake"), std::string::npos) << s.ToString();

  config.insecure_skip_tls_verify = true;  // insecure-skip-tls-verify accepts it
  EXPECT_TRUE(Client::New(config).value()->Get(kNamespace, "", "default").ok());
}

TEST(ClientTls, NameMismatchIsRejected) {
  TANDEM_START_KUBE_SIM_OR_SKIP(sim, {.tls = true, .token = "t"});
  KubeConfig config = sim->config();
  config.tls_server_name = "not-the-server.example";
  Status s = Client::New(config).value()->Get(kNamespace, "", "default").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  config.tls_server_name = "localhost";  // in the certificate's SANs
  StatusOr<Json> ok = Client::New(config).value()->Get(kNamespace, "", "default");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(ClientTls, BadPemIsAnInvalidArgumentAtConstruction) {
  KubeConfig config;
  config.server = "https://127.0.0.1:1";
  config.ca_pem = "not a certificate";
  EXPECT_EQ(Client::New(config).status().code(), StatusCode::kInvalidArgument);
  config.ca_pem.clear();
  config.client_cert_pem = "junk";
  config.client_key_pem = "junk";
  EXPECT_EQ(Client::New(config).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::controller::kube
