// Mutual TLS between agents (AgentConfig::tls_*): a router + prefill + decode stack whose every
// gRPC hop is mTLS serves a request end to end; an agent with TLS refuses plaintext callers and
// callers whose certificate another CA signed; rotated certificate files take effect without a
// restart. Certificates are made with the openssl command (two CAs, leaf certificates carrying
// the shared server name "tandem-agent"), as cert-manager would issue them.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/grpc_util.h"
#include "proto/tandem.grpc.pb.h"
#include "tests/agent/agent_test_util.h"

namespace tandem::agent::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A CA and one leaf certificate it signed, as PEM files in `dir`.
struct Pki {
  std::string ca, cert, key;
};

int Run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

// Makes CA `name` and a leaf for "tandem-agent" (and 127.0.0.1) it signed, usable as server and
// client. Empty paths when openssl fails.
Pki MakePki(const fs::path& dir, const std::string& name) {
  fs::create_directories(dir);
  const std::string d = dir.string() + "/" + name;
  const std::string ext = d + ".ext";
  std::ofstream(ext) << "subjectAltName=DNS:tandem-agent,IP:127.0.0.1\n"
                        "extendedKeyUsage=serverAuth,clientAuth\n";
  const bool ok = Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + d +
                      "-ca.key -out " + d + "-ca.crt -subj /CN=" + name + "-ca -days 2") == 0 &&
                  Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + d +
                      ".key -out " + d + ".csr -subj /CN=tandem-agent") == 0 &&
                  Run("openssl x509 -req -in " + d + ".csr -CA " + d + "-ca.crt -CAkey " + d +
                      "-ca.key -CAcreateserial -out " + d + ".crt -days 2 -extfile " + ext) == 0;
  if (!ok) return {};
  return {d + "-ca.crt", d + ".crt", d + ".key"};
}

fs::path TestDir() { return fs::temp_directory_path() / ("tandem_tls_test_" + std::to_string(::getpid())); }

void UseTls(AgentConfig& c, const Pki& pki, unsigned refresh_s = 60) {
  c.tls_cert_file = pki.cert;
  c.tls_key_file = pki.key;
  c.tls_ca_file = pki.ca;
  c.tls_server_name = "tandem-agent";
  c.tls_refresh_s = refresh_s;
}

// GetStatus on `port` through a channel made with `transport`.
grpc::Status Probe(uint16_t port, const GrpcTransport& transport) {
  ChannelCache channels(transport);
  auto stub = v1::AgentStatus::NewStub(channels.Get("127.0.0.1:" + std::to_string(port)));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 3'000);
  v1::StatusResponse response;
  return stub->GetStatus(&ctx, v1::StatusRequest(), &response);
}

GrpcTransport TransportFor(const Pki& pki) {
  GrpcTransport t;
  t.cert_file = pki.cert;
  t.key_file = pki.key;
  t.ca_file = pki.ca;
  t.server_name = "tandem-agent";
  return t;
}

class AgentTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = MakePki(TestDir(), "a");
    b_ = MakePki(TestDir(), "b");
    if (a_.ca.empty() || b_.ca.empty()) GTEST_FAIL() << "openssl could not make the test certificates";
  }
  static void TearDownTestSuite() { fs::remove_all(TestDir()); }
  Pki a_, b_;
};

TEST_F(AgentTlsTest, EveryHopIsMutualTlsAndOutsidersAreRefused) {
  AgentConfig p = BaseConfig(Role::kPrefill), d = BaseConfig(Role::kDecode);
  UseTls(p, a_);
  UseTls(d, a_);
  auto prefill = Agent::Start(p);
  auto decode = Agent::Start(d);
  ASSERT_TRUE(prefill.ok()) << prefill.status().ToString();
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  AgentConfig r = BaseConfig(Role::kRouter);
  UseTls(r, a_);
  r.prefill_endpoints = {"127.0.0.1:" + std::to_string((*prefill)->grpc_port())};
  r.decode_endpoints = {"127.0.0.1:" + std::to_string((*decode)->grpc_port())};
  auto router = Agent::Start(r);
  ASSERT_TRUE(router.ok()) << router.status().ToString();
  ASSERT_TRUE(WaitReady(**prefill) && WaitReady(**decode) && WaitReady(**router));

  // Router -> prefill -> decode (the KV pages) and router -> decode (the tokens), all over mTLS.
  const std::string body = json{
      {"model", "tiny"},
      {"messages", {{{"role", "user"}, {"content", "Hello over TLS"}}}},
      {"max_tokens", 6},
      {"temperature", 0},
      {"ignore_eos", true}}.dump();
  HttpResponse answer = HttpCall((*router)->http_port(), "POST", "/v1/chat/completions", body);
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(json::parse(answer.body)["usage"]["completion_tokens"], 6);
  EXPECT_GT(MetricValue(Metrics(**decode), "tandem_kv_transfer_bytes_total", "direction=\"in\""), 0);

  // A caller with the deployment's CA gets in; plaintext and another CA's certificate do not.
  for (uint16_t port : {(*prefill)->grpc_port(), (*decode)->grpc_port()}) {
    EXPECT_TRUE(Probe(port, TransportFor(a_)).ok());
    const grpc::Status plain = Probe(port, GrpcTransport{});
    EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
    const grpc::Status outsider = Probe(port, TransportFor(b_));
    EXPECT_EQ(outsider.error_code(), grpc::StatusCode::UNAVAILABLE) << outsider.error_message();
  }
  // A server whose certificate does not name the expected server name is refused by callers.
  GrpcTransport wrong_name = TransportFor(a_);
  wrong_name.server_name = "someone-else";
  EXPECT_FALSE(Probe((*decode)->grpc_port(), wrong_name).ok());
}

// cert-manager renews the Secret; the kubelet swaps the mounted files. The agent reads them again
// (tls.refreshSeconds) and new handshakes use them, without a restart.
TEST_F(AgentTlsTest, RotatedCertificatesTakeEffectWithoutARestart) {
  const fs::path live = TestDir() / "live";
  fs::create_directories(live);
  Pki mounted{(live / "ca.crt").string(), (live / "tls.crt").string(), (live / "tls.key").string()};
  auto mount = [&](const Pki& from) {
    fs::copy_file(from.ca, mounted.ca + ".new", fs::copy_options::overwrite_existing);
    fs::copy_file(from.cert, mounted.cert + ".new", fs::copy_options::overwrite_existing);
    fs::copy_file(from.key, mounted.key + ".new", fs::copy_options::overwrite_existing);
    fs::rename(mounted.ca + ".new", mounted.ca);
    fs::rename(mounted.cert + ".new", mounted.cert);
    fs::rename(mounted.key + ".new", mounted.key);
  };
  mount(a_);
  AgentConfig d = BaseConfig(Role::kDecode);
  UseTls(d, mounted, /*refresh_s=*/1);
  auto decode = Agent::Start(d);
  ASSERT_TRUE(decode.ok()) << decode.status().ToString();
  ASSERT_TRUE(WaitReady(**decode));
  const uint16_t port = (*decode)->grpc_port();
  EXPECT_TRUE(Probe(port, TransportFor(a_)).ok());
  EXPECT_FALSE(Probe(port, TransportFor(b_)).ok());

  mount(b_);  // the CA and the agent's own certificate both rotate
  bool rotated = false;
  for (int i = 0; i < 50 && !rotated; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    rotated = Probe(port, TransportFor(b_)).ok();
  }
  EXPECT_TRUE(rotated) << "the rotated certificates were not picked up within 10 s";
  EXPECT_FALSE(Probe(port, TransportFor(a_)).ok());
}

TEST_F(AgentTlsTest, MissingOrIncompleteTlsFilesFailAtStart) {
  AgentConfig d = BaseConfig(Role::kDecode);
  UseTls(d, a_);
  d.tls_key_file = (TestDir() / "no-such.key").string();
  auto missing = Agent::Start(d);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tls.keyFile"), std::string::npos) << missing.status().ToString();
  d.tls_key_file.clear();
  auto partial = Agent::Start(d);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("go together"), std::string::npos) << partial.status().ToString();
}

}  // namespace
}  // namespace tandem::agent::testing
