#include "controller/kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/base64.h"

namespace tandem::controller::kube {
namespace {

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("kube-config-test-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }
  std::filesystem::path dir_;
};

constexpr char kTwoContexts[] = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c-dev
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: Q0EtUEVN
    tls-server-name: api.internal
- name: c-prod
  cluster:
    server: https://prod:443
    insecure-skip-tls-verify: true
users:
- name: u-dev
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: u-prod
  user:
    token: abc.def
contexts:
- name: dev
  context: {cluster: c-dev, user: u-dev, namespace: team-a}
- name: prod
  context: {cluster: c-prod, user: u-prod}
)";

TEST_F(ConfigTest, CurrentContextWithInlineData) {
  StatusOr<KubeConfig> c = ParseKubeconfig(kTwoContexts, "/k");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().server, "https://10.0.0.1:6443");
  EXPECT_EQ(c.value().ca_pem, "CA-PEM");
  EXPECT_EQ(c.value().tls_server_name, "api.internal");
  EXPECT_EQ(c.value().client_cert_pem, "CERT");
  EXPECT_EQ(c.value().client_key_pem, "KEY");
  EXPECT_EQ(c.value().default_namespace, "team-a");
  EXPECT_FALSE(c.value().insecure_skip_tls_verify);
  EXPECT_EQ(c.value().source, "kubeconfig /k (context dev)");
}

TEST_F(ConfigTest, NamedContextWithTokenAndInsecure) {
  StatusOr<KubeConfig> c = ParseKubeconfig(kTwoContexts, "/k", "prod");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().server, "https://prod:443");
  EXPECT_TRUE(c.value().insecure_skip_tls_verify);
  EXPECT_EQ(c.value().token, "abc.def");
  EXPECT_EQ(c.value().default_namespace, "default");
  EXPECT_TRUE(c.value().client_cert_pem.empty());
}

TEST_F(ConfigTest, FilesAreReadRelativeToTheKubeconfig) {
  Write("ca.crt", "CA FROM FILE");
  Write("client.crt", "CERT FROM FILE");
  std::filesystem::create_directories(dir_ / "keys");
  Write("keys/client.key", "KEY FROM FILE");
  Write("token", "tok-1\n");
  const std::string path = Write("config", R"(current-context: x
clusters: [{name: c, cluster: {server: "http://127.0.0.1:8080", certificate-authority: ca.crt}}]
users:
- name: u
  user: {client-certificate: client.crt, client-key: keys/client.key, tokenFile: token}
contexts: [{name: x, context: {cluster: c, user: u}}]
)");
  StatusOr<KubeConfig> c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().ca_pem, "CA FROM FILE");
  EXPECT_EQ(c.value().client_cert_pem, "CERT FROM FILE");
  EXPECT_EQ(c.value().client_key_pem, "KEY FROM FILE");
  EXPECT_EQ(c.value().token_file, (dir_ / "token").string());
}

TEST_F(ConfigTest, AnonymousUserAndNoUser) {
  StatusOr<KubeConfig> c = ParseKubeconfig(R"(current-context: x
clusters: [{name: c, cluster: {server: "http://h:1"}}]
contexts: [{name: x, context: {cluster: c}}]
)",
                                           "/k");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c.value().token.empty());
}

// Each broken kubeconfig fails with a message naming the file and the key.
TEST_F(ConfigTest, ErrorsNameTheFileAndTheKey) {
  struct Case {
    const char* yaml;
    const char* context;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"current-context: x\n", "", StatusCode::kNotFound, "contexts[x]: no such context"},
      {"clusters: []\n", "", StatusCode::kInvalidArgument, "current-context: not set"},
      {kTwoContexts, "staging", StatusCode::kNotFound, "contexts[staging]"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n", "", StatusCode::kNotFound,
       "clusters[c]: no such cluster"},
      {"current-context: x\ncontexts: [{name: x, context: {user: u}}]\n", "", StatusCode::kInvalidArgument,
       "contexts[x].cluster: not set"},
      {"current-context: x\nclusters: [{name: c, cluster: {}}]\ncontexts: [{name: x, context: {cluster: "
       "c}}]\n",
       "", StatusCode::kInvalidArgument, "clusters[c].server: not set"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h, certificate-authority-data: '!!'}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\n",
       "", StatusCode::kInvalidArgument, "clusters[c].certificate-authority-data: invalid base64"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h, certificate-authority: /no/ca}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\n",
       "", StatusCode::kNotFound, "clusters[c].certificate-authority: cannot read /no/ca"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h, insecure-skip-tls-verify: maybe}}]\n"
       "contexts: [{name: x, context: {cluster: c}}]\n",
       "", StatusCode::kInvalidArgument, "insecure-skip-tls-verify: not a boolean"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
       "", StatusCode::kNotFound, "users[u]: no such user"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h}}]\n"
       "users: [{name: u, user: {client-key-data: 'a*b'}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
       "", StatusCode::kInvalidArgument, "users[u].client-key-data: invalid base64"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h}}]\n"
       "users: [{name: u, user: {client-certificate-data: Q0VSVA==}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
       "", StatusCode::kInvalidArgument, "client-certificate and client-key must be given together"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h}}]\n"
       "users: [{name: u, user: {exec: {command: aws}}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
       "", StatusCode::kInvalidArgument, "users[u].exec: not supported"},
      {"current-context: x\nclusters: [{name: c, cluster: {server: h}}]\n"
       "users: [{name: u, user: {tokenFile: /no/token}}]\n"
       "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
       "", StatusCode::kNotFound, "users[u].tokenFile: cannot read /no/token"},
      {"a: [unclosed\n", "", StatusCode::kInvalidArgument, "kubeconfig /bad/config: "},
      {"- just\n- a list\n", "", StatusCode::kInvalidArgument, "not a YAML mapping"},
  };
  for (const Case& c : cases) {
    StatusOr<KubeConfig> got = ParseKubeconfig(c.yaml, "/bad/config", c.context);
    ASSERT_FALSE(got.ok()) << c.yaml;
    EXPECT_EQ(got.status().code(), c.code) << got.status().ToString();
    EXPECT_NE(got.status().message().find("kubeconfig /bad/config"), std::string::npos)
        << got.status().ToString();
    EXPECT_NE(got.status().message().find(c.needle), std::string::npos)
        << "want '" << c.needle << "' in " << got.status().ToString();
  }
  EXPECT_EQ(LoadKubeconfig((dir_ / "absent").string()).status().code(), StatusCode::kNotFound);
}

TEST_F(ConfigTest, InClusterFromAFakeServiceAccountDirectory) {
  InClusterSource source;
  source.service_host = "10.96.0.1";
  source.service_port = "443";
  source.token_file = Write("token", "sa-token\n");
  source.ca_file = Write("ca.crt", "CLUSTER CA");
  source.namespace_file = Write("namespace", "tandem-system\n");
  StatusOr<KubeConfig> c = InClusterConfig(source);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().server, "https://10.96.0.1:443");
  EXPECT_EQ(c.value().ca_pem, "CLUSTER CA");
  EXPECT_EQ(c.value().token_file, source.token_file);
  EXPECT_TRUE(c.value().token.empty());  // always read through the file: it rotates
  EXPECT_EQ(c.value().default_namespace, "tandem-system");
  EXPECT_EQ(c.value().source, "in-cluster");

  source.service_host = "fd00::1";
  source.namespace_file = (dir_ / "absent").string();
  c = InClusterConfig(source);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().server, "https://[fd00::1]:443");
  EXPECT_EQ(c.value().default_namespace, "default");
}

TEST_F(ConfigTest, InClusterErrors) {
  InClusterSource source;
  EXPECT_EQ(InClusterConfig(source).status().code(), StatusCode::kFailedPrecondition);
  source.service_host = "10.96.0.1";
  source.service_port = "443";
  source.ca_file = Write("ca.crt", "CA");
  source.token_file = (dir_ / "no-token").string();
  StatusOr<KubeConfig> c = InClusterConfig(source);
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("no-token"), std::string::npos) << c.status().ToString();
}

TEST_F(ConfigTest, LoadDefaultPrefersTheFlag) {
  const std::string path = Write("config", R"(current-context: x
clusters: [{name: c, cluster: {server: "http://flag:1"}}]
contexts: [{name: x, context: {cluster: c}}]
)");
  StatusOr<KubeConfig> c = LoadDefault(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().server, "http://flag:1");
}

// ctest runs each test in its own process, so changing the environment here stays here.
TEST_F(ConfigTest, LoadDefaultFollowsKubeconfigThenHomeThenInCluster) {
  const std::string first = Write("first", R"(current-context: x
clusters: [{name: c, cluster: {server: "http://first:1"}}]
contexts: [{name: x, context: {cluster: c}}]
)");
  ::setenv("KUBECONFIG", (first + ":" + (dir_ / "second").string()).c_str(), 1);
  StatusOr<KubeConfig> c = LoadDefault();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().server, "http://first:1");

  ::unsetenv("KUBECONFIG");
  std::filesystem::create_directories(dir_ / "home" / ".kube");
  Write("home/.kube/config", R"(current-context: x
clusters: [{name: c, cluster: {server: "http://home:1"}}]
contexts: [{name: x, context: {cluster: c}}]
)");
  ::setenv("HOME", (dir_ / "home").c_str(), 1);
  c = LoadDefault();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().server, "http://home:1");

  ::setenv("HOME", (dir_ / "nowhere").c_str(), 1);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(LoadDefault().status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem::controller::kube
