#include "agent/config.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::agent {
namespace {

TEST(AgentConfigTest, FullDecodeConfig) {
  StatusOr<AgentConfig> c = ParseAgentConfig(R"(
role: decode
deployment: kimi-k2
listen: {host: 127.0.0.1, httpPort: 8001, grpcPort: 50061, metricsPort: 9401}
model:
  path: /models/kimi-k2.6
  weights: int4
kvCache: {dtype: fp8_e4m3, bytes: 68719476736}
integrity: {pageTags: true, transferChecksum: false}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->role, Role::kDecode);
  EXPECT_EQ(c->deployment, "kimi-k2");
  EXPECT_EQ(c->pool, "decode");  // defaults to the role
  EXPECT_EQ(c->listen_host, "127.0.0.1");
  EXPECT_EQ(c->http_port, 8001);
  EXPECT_EQ(c->grpc_port, 50061);
  EXPECT_EQ(c->metrics_port, 9401);
  EXPECT_EQ(c->model_path, "/models/kimi-k2.6");
  EXPECT_EQ(c->weights, engine::WeightFormat::kInt4Group32);
  EXPECT_EQ(c->kv_cache, engine::KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(c->kv_cache_bytes, 68719476736ull);
  EXPECT_TRUE(c->page_tags);
  EXPECT_FALSE(c->transfer_checksum);
}

TEST(AgentConfigTest, DummyModelAndDefaults) {
  StatusOr<AgentConfig> c = ParseAgentConfig("model: {dummy: {preset: tiny, seed: 7}}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->role, Role::kStandalone);
  EXPECT_EQ(c->dummy_preset, "tiny");
  EXPECT_EQ(c->dummy_seed, 7u);
  EXPECT_EQ(c->weights, engine::WeightFormat::kBf16);
  EXPECT_EQ(c->kv_cache, engine::KvCacheDtype::kBf16);
  EXPECT_EQ(c->http_port, 8000);
}

TEST(AgentConfigTest, RouterNeedsNoModel) {
  StatusOr<AgentConfig> c =
      ParseAgentConfig("role: router\nrouter: {prefill: [\"a:1\"], decode: [\"b:2\"]}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->role, Role::kRouter);
}

TEST(AgentConfigTest, RouterMembersFiles) {
  StatusOr<AgentConfig> c = ParseAgentConfig(
      "role: router\nrouter: {prefillMembersFile: /run/p, decodeMembersFile: /run/d, refreshMs: 250}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->prefill_members_file, "/run/p");
  EXPECT_EQ(c->decode_members_file, "/run/d");
  EXPECT_EQ(c->refresh_ms, 250u);
  StatusOr<AgentConfig> none = ParseAgentConfig("role: router\nrouter: {prefillMembersFile: /run/p}\n");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("router.decode"), std::string::npos) << none.status().ToString();
}

// Each bad input gives InvalidArgument naming the key, never a crash or an exception.
TEST(AgentConfigTest, BadInputsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* expect_in_message;
  };
  const Case cases[] = {
      {"role: sideways\n", "role: unknown role 'sideways'"},
      {"rol: decode\n", "rol: unknown key"},
      {"listen: {grpcPort: 70000}\nmodel: {path: /m}\n", "listen.grpcPort: must be an integer in 1..65535"},
      {"listen: {grpcPort: -1}\nmodel: {path: /m}\n", "listen.grpcPort"},
      {"listen: {grpcPort: [1]}\nmodel: {path: /m}\n", "listen.grpcPort"},
      {"listen: {httpPort: 9400}\nmodel: {path: /m}\n", "must differ"},
      {"listen: 5\n", "listen: must be a mapping"},
      {"model: {path: /m, weights: int3}\n", "model.weights: unknown weight format 'int3'"},
      {"model: {path: /m}\nkvCache: {dtype: fp8_e5m2}\n", "kvCache.dtype: unknown KV cache dtype"},
      {"model: {path: /m}\nkvCache: {bytes: 0}\n", "kvCache.bytes"},
      {"model: {path: /m}\nkvCache: {bytes: 99999999999999999999999}\n", "kvCache.bytes"},
      {"model: {path: /m}\nintegrity: {pageTags: maybe}\n", "integrity.pageTags: must be true or false"},
      {"model: {path: /m, dummy: {preset: tiny}}\n", "exactly one of model.path and model.dummy"},
      {"role: decode\n", "exactly one of model.path and model.dummy"},
      {"model: {dummy: {seed: 1}}\n", "model.dummy.preset: required"},
      {"role: [decode\n", "malformed YAML"},
      {"- a\n- b\n", "must be a mapping"},
  };
  for (const Case& c : cases) {
    StatusOr<AgentConfig> got = ParseAgentConfig(c.yaml);
    ASSERT_FALSE(got.ok()) << c.yaml;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(got.status().message().find(c.expect_in_message), std::string::npos)
        << "yaml: " << c.yaml << "message: " << got.status().message();
  }
}

TEST(AgentConfigTest, LoadFromFile) {
  std::string path = ::testing::TempDir() + "agent_config_test.yaml";
  {
    std::ofstream out(path);
    out << "role: prefill\nmodel: {path: /m, weights: fp8}\n";
  }
  StatusOr<AgentConfig> c = LoadAgentConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->role, Role::kPrefill);
  EXPECT_EQ(c->weights, engine::WeightFormat::kFp8Block128);
  std::remove(path.c_str());

  StatusOr<AgentConfig> missing = LoadAgentConfig(path);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

}  // namespace
}  // namespace tandem::agent

namespace tandem::agent {
namespace {

TEST(AgentConfigTest, ServingSections) {
  StatusOr<AgentConfig> c = ParseAgentConfig(R"(
role: router
model: {path: /models/tiny, name: tiny-chat}
engine: {threads: 4, tensorParallel: 2, prefixCache: false, transferTimeoutMs: 5000, queueWaitMs: 100,
         probePeriodMs: 200, probeTimeoutMs: 900}
api: {defaultMaxTokens: 64, maxBodyBytes: 65536, maxBufferedBodyBytes: 1048576, headerTimeoutMs: 2000,
      maxInflight: 8, unknownToolCalls: forward}
auth: {apiKeys: [{key: k1, tenant: bank}]}
router: {prefill: ["10.0.0.1:50051"], decodeService: "kimi-decode.ns.svc:50051", refreshMs: 100}
shutdownGraceMs: 1000
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->served_model_name, "tiny-chat");
  EXPECT_EQ(c->threads, 4);
  EXPECT_EQ(c->tensor_parallel, 2);
  EXPECT_FALSE(c->prefix_cache);
  EXPECT_EQ(c->transfer_timeout_ms, 5000u);
  EXPECT_EQ(c->queue_wait_ms, 100u);
  EXPECT_EQ(c->probe_period_ms, 200u);
  EXPECT_EQ(c->probe_timeout_ms, 900u);
  EXPECT_EQ(c->default_max_tokens, 64);
  EXPECT_EQ(c->max_body_bytes, 65536u);
  EXPECT_EQ(c->max_buffered_body_bytes, 1048576u);
  EXPECT_EQ(c->max_inflight, 8u);
  EXPECT_TRUE(c->forward_unknown_tool_calls);
  ASSERT_EQ(c->api_keys.size(), 1u);
  EXPECT_EQ(c->api_keys[0].tenant, "bank");
  EXPECT_EQ(c->prefill_endpoints, std::vector<std::string>{"10.0.0.1:50051"});
  EXPECT_EQ(c->decode_service, "kimi-decode.ns.svc:50051");
  EXPECT_EQ(c->shutdown_grace_ms, 1000u);
}

TEST(AgentConfigTest, ServingErrorsNameTheField) {
  struct Case {
    const char* yaml;
    const char* expect;
  };
  for (const Case& t : std::vector<Case>{
           {"role: router\n", "router.prefill"},
           {"role: router\nrouter: {prefill: [a:1]}\n", "router.decode"},
           {"engine: {threads: -1}\nmodel: {path: x}\n", "engine.threads"},
           {"engine: {tensorParallel: 3}\nmodel: {path: x}\n", "engine.tensorParallel"},
           {"engine: {tensorParallel: 0}\nmodel: {path: x}\n", "engine.tensorParallel"},
           {"api: {maxBodyBytes: 10}\nmodel: {path: x}\n", "api.maxBodyBytes"},
           {"api: {maxBodyBytes: 4096, maxBufferedBodyBytes: 2048}\nmodel: {path: x}\n",
            "api.maxBufferedBodyBytes"},
           {"auth: {apiKeys: [{key: k}]}\nmodel: {path: x}\n", "auth.apiKeys[0]"},
           {"router: {prefill: [\"\"]}\nmodel: {path: x}\n", "router.prefill[0]"},
           {"engine: {bogus: 1}\nmodel: {path: x}\n", "engine.bogus"},
           {"api: {unknownToolCalls: keep}\nmodel: {path: x}\n", "api.unknownToolCalls"},
           {"api: {unknownToolCalls: [drop]}\nmodel: {path: x}\n", "api.unknownToolCalls"},
       }) {
    StatusOr<AgentConfig> c = ParseAgentConfig(t.yaml);
    ASSERT_FALSE(c.ok()) << t.yaml;
    EXPECT_NE(c.status().message().find(t.expect), std::string::npos) << c.status().ToString();
  }
}

TEST(AgentConfigTest, TenantAdmissionSettings) {
  StatusOr<AgentConfig> c = ParseAgentConfig(
      "model: {path: x}\napi: {maxInflight: 8, tenantMaxInflight: 4, maxQueuedPerTenant: 2, queueTimeoutMs: "
      "500, "
      "tenantWeights: {bank-a: 3, clinic: 1}}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tenant_max_inflight, 4u);
  EXPECT_EQ(c->max_queued_per_tenant, 2u);
  EXPECT_EQ(c->queue_timeout_ms, 500u);
  EXPECT_EQ(c->tenant_weights.at("bank-a"), 3);
  EXPECT_EQ(c->tenant_weights.at("clinic"), 1);
  EXPECT_FALSE(c->forward_unknown_tool_calls);  // api.unknownToolCalls: drop by default
  for (const char* bad :
       {"model: {path: x}\napi: {tenantWeights: [a]}\n", "model: {path: x}\napi: {tenantWeights: {a: 0}}\n",
        "model: {path: x}\napi: {tenantWeights: {a: x}}\n",
        "model: {path: x}\napi: {queueTimeoutMs: -1}\n"}) {
    StatusOr<AgentConfig> r = ParseAgentConfig(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("api.", 0), 0u) << r.status().ToString();
  }
}

TEST(AgentConfigTest, TlsFilesGoTogether) {
  StatusOr<AgentConfig> c = ParseAgentConfig(
      "model: {path: x}\ntls: {certFile: /t/tls.crt, keyFile: /t/tls.key, caFile: /t/ca.crt, serverName: "
      "tandem-agent, "
      "refreshSeconds: 5}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tls_cert_file, "/t/tls.crt");
  EXPECT_EQ(c->tls_key_file, "/t/tls.key");
  EXPECT_EQ(c->tls_ca_file, "/t/ca.crt");
  EXPECT_EQ(c->tls_server_name, "tandem-agent");
  EXPECT_EQ(c->tls_refresh_s, 5u);
  for (const char* bad :
       {"model: {path: x}\ntls: {certFile: a, keyFile: b}\n", "model: {path: x}\ntls: {serverName: n}\n",
        "model: {path: x}\ntls: {certFile: a, keyFile: b, caFile: c, refreshSeconds: 0}\n",
        "model: {path: x}\ntls: {certFile: a, keyFile: b, caFile: c, ca: d}\n"}) {
    StatusOr<AgentConfig> r = ParseAgentConfig(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("tls", 0), 0u) << r.status().ToString();
  }
}

TEST(AgentConfigTest, ApiKeyText) {
  StatusOr<std::vector<ApiKey>> keys = ParseApiKeyText("# keys\nk1 bank\n\nk2\n");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].sha256, HashApiKey("k1"));
  EXPECT_EQ((*keys)[0].tenant, "bank");
  EXPECT_EQ((*keys)[1].tenant, "default");
  EXPECT_FALSE(ParseApiKeyText("k1 bank extra\n").ok());
  EXPECT_FALSE(ParseApiKeyText("sha256:abc bank\n").ok());
  EXPECT_FALSE(
      ParseApiKeyText("sha256:6ee3bd95e36c194e9064eeb06823008f748e0e90839ca24682c5f8b0a35d2767Z bank\n")
          .ok());
}

// Keys are kept as digests: a "sha256:HEX" line (what `printf %s KEY | sha256sum` prints)
// authenticates the key whose digest it is, exactly as the key itself would; nothing else matches.
TEST(AgentConfigTest, ApiKeysAreKeptAsDigests) {
  StatusOr<std::vector<ApiKey>> keys = ParseApiKeyText(
      "k1 bank\nsha256:6ee3bd95e36c194e9064eeb06823008f748e0e90839ca24682c5f8b0a35d2767 clinic\n");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  const ApiKey* found = FindApiKey(*keys, "secret-k3");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->tenant, "clinic");
  ASSERT_NE(FindApiKey(*keys, "k1"), nullptr);
  EXPECT_EQ(FindApiKey(*keys, "k1")->tenant, "bank");
  EXPECT_EQ(FindApiKey(*keys, "k2"), nullptr);
  EXPECT_EQ(FindApiKey(*keys, ""), nullptr);
  EXPECT_EQ(FindApiKey(*keys, "sha256:6ee3bd95e36c194e9064eeb06823008f748e0e90839ca24682c5f8b0a35d2767"),
            nullptr);  // the digest is not a key
  StatusOr<AgentConfig> c = ParseAgentConfig(
      "model: {path: x}\nauth: {apiKeys: [{sha256: "
      "6ee3bd95e36c194e9064eeb06823008f748e0e90839ca24682c5f8b0a35d2767, tenant: t}, {key: k9, tenant: "
      "u}]}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(FindApiKey(c->api_keys, "secret-k3")->tenant, "t");
  EXPECT_EQ(FindApiKey(c->api_keys, "k9")->tenant, "u");
  EXPECT_FALSE(
      ParseAgentConfig("model: {path: x}\nauth: {apiKeys: [{key: a, sha256: "
                       "6ee3bd95e36c194e9064eeb06823008f748e0e90839ca24682c5f8b0a35d2767, tenant: t}]}\n")
          .ok());
}

}  // namespace
}  // namespace tandem::agent
