// The agents end to end in one process: router, prefill and decode on loopback (gRPC between them,
// the OpenAI API in front), against the standalone engine, with injected transfer faults.
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/agent/agent_test_util.h"

namespace tandem::agent::testing {
namespace {

using json = nlohmann::json;

std::string CompletionBody(const std::string& prompt, int max_tokens, bool stream = false) {
  return json{{"model", "tiny"},  {"prompt", prompt},   {"max_tokens", max_tokens},
              {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}}
      .dump();
}

std::string ChatBody(const std::string& text, int max_tokens, bool stream = false) {
  return json{{"model", "tiny"},
              {"messages", {{{"role", "user"}, {"content", text}}}},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"ignore_eos", true},
              {"stream", stream},
              {"stream_options", {{"include_usage", true}}}}
      .dump();
}

HttpResponse Post(const Agent& a, const std::string& path, const std::string& body,
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
  return HttpCall(a.http_port(), "POST", path, body, headers);
}

// The text of a completion body, or of a stream's events joined.
std::string TextOf(const HttpResponse& r) {
  if (r.body.rfind("data: ", 0) != 0) {
    json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("choices")) return "<" + r.body + ">";
    const json& c = j["choices"][0];
    return c.contains("text") ? c["text"].get<std::string>() : c["message"]["content"].get<std::string>();
  }
  std::string text;
  size_t pos = 0;
  while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", pos);
    const std::string event = r.body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (event == "[DONE]") break;
    json j = json::parse(event, nullptr, false);
    if (j.is_discarded() || j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    if (c.contains("text")) text += c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string()) {
      text += c["delta"]["content"].get<std::string>();
    }
  }
  return text;
}

struct Precision {
  std::string weights;
};

class GreedyMatchTest : public ::testing::TestWithParam<std::string> {};

// Greedy decoding through router + prefill + decode produces exactly the standalone engine's
// tokens when both pools run the same weights with a BF16 KV cache (an FP8 pool fixes its scales
// at its own calibration, so FP8 runs differ legitimately).
TEST_P(GreedyMatchTest, DisaggregatedMatchesStandalone) {
  const std::string weights = GetParam();
  AgentConfig sc = BaseConfig(Role::kStandalone, weights, "bf16");
  auto standalone = Agent::Start(sc);
  ASSERT_TRUE(standalone.ok()) << standalone.status().ToString();
  ASSERT_TRUE(WaitReady(**standalone));
  StackOptions o;
  o.prefill_weights = o.decode_weights = weights;
  Stack s = StartStack(o);
  ASSERT_TRUE(s.router);
  for (const std::string& prompt : {std::string("The quick brown fox"),
                                    std::string("Once upon a time, in a land far away, there lived a king "
                                                "who had three daughters and a very large garden.")}) {
    HttpResponse a = Post(**standalone, "/v1/completions", CompletionBody(prompt, 24));
    HttpResponse b = Post(*s.router, "/v1/completions", CompletionBody(prompt, 24));
    ASSERT_EQ(a.status, 200) << a.body;
    ASSERT_EQ(b.status, 200) << b.body;
    EXPECT_EQ(TextOf(a), TextOf(b));
    EXPECT_EQ(json::parse(a.body)["usage"], json::parse(b.body)["usage"]);
    // Streaming chat too.
    HttpResponse c = Post(**standalone, "/v1/chat/completions", ChatBody(prompt, 16, true));
    HttpResponse d = Post(*s.router, "/v1/chat/completions", ChatBody(prompt, 16, true));
    ASSERT_EQ(c.status, 200);
    ASSERT_EQ(d.status, 200) << d.body;
    EXPECT_EQ(TextOf(c), TextOf(d));
    EXPECT_NE(d.body.find("data: [DONE]\n\n"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, GreedyMatchTest, ::testing::Values("bf16", "int4"));

// Production's split: BF16 KV on the prefill side, FP8 on the decode side; the pages cross the
// wire already converted, half the bytes.
TEST(AgentE2eTest, MixedPrecisionTransferHalvesTheBytes) {
  StackOptions o;
  o.prefill_weights = "fp8";
  o.decode_weights = "int4";
  o.decode_kv = "fp8_e4m3";
  Stack s = StartStack(o);
  ASSERT_TRUE(s.router);
  HttpResponse r =
      Post(*s.router, "/v1/chat/completions", ChatBody("Hello there, how are you today?", 12, true));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"finish_reason\":\"length\""), std::string::npos) << r.body;
  const std::string pm = Metrics(*s.prefill), dm = Metrics(*s.decode);
  const double out = MetricValue(pm, "tandem_kv_transfer_bytes_total", "direction=\"out\"");
  const double in = MetricValue(dm, "tandem_kv_transfer_bytes_total", "direction=\"in\"");
  EXPECT_GT(out, 0);
  EXPECT_EQ(out, in);
  EXPECT_EQ(MetricValue(dm, "tandem_requests_finished_total", "reason=\"length\""), 1);
  // A request its first token ends needs no transfer: the prefill member answers it and the
  // reservation is released.
  HttpResponse one = Post(*s.router, "/v1/completions", CompletionBody("just one token", 1));
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body)["usage"]["completion_tokens"], 1);
  EXPECT_EQ(json::parse(one.body)["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(WaitMetricAtLeast(*s.decode, "tandem_requests_finished_total", "reason=\"cancelled\"", 1), 1);
  EXPECT_EQ(MetricValue(Metrics(*s.decode), "tandem_kv_transfer_bytes_total", "direction=\"in\""), in);
}

// GLM (glm_moe_dsa, its DSA indexer keys in the pages) through the same wire: the dummy tiny-glm
// preset (no tokenizer, so token-id prompts and token ids back through logprobs).
TEST(AgentE2eTest, GlmTransfersWithItsIndexerRows) {
  auto glm = [](Role role, const std::string& kv) {
    AgentConfig c = BaseConfig(role);
    c.model_path.clear();
    if (role != Role::kRouter) c.dummy_preset = "tiny-glm";
    c.kv_cache = *engine::ParseKvCacheDtype(kv);
    return c;
  };
  const std::string body = json{
      {"model", "tiny"},
      {"prompt", {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28}},
      {"max_tokens", 12},
      {"temperature", 0},
      {"ignore_eos", true},
      {"logprobs", 0}}.dump();
  auto tokens_of = [](const HttpResponse& r) {
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json() : j["choices"][0]["logprobs"]["tokens"];
  };
  auto standalone = Agent::Start(glm(Role::kStandalone, "bf16"));
  ASSERT_TRUE(standalone.ok()) << standalone.status().ToString();
  ASSERT_TRUE(WaitReady(**standalone));
  HttpResponse expected = Post(**standalone, "/v1/completions", body);
  ASSERT_EQ(expected.status, 200) << expected.body;
  for (const std::string decode_kv : {"bf16", "fp8_e4m3"}) {
    auto p = Agent::Start(glm(Role::kPrefill, "bf16"));
    auto d = Agent::Start(glm(Role::kDecode, decode_kv));
    ASSERT_TRUE(p.ok() && d.ok());
    AgentConfig rc = glm(Role::kRouter, "bf16");
    rc.prefill_endpoints = {"127.0.0.1:" + std::to_string((*p)->grpc_port())};
    rc.decode_endpoints = {"127.0.0.1:" + std::to_string((*d)->grpc_port())};
    auto r = Agent::Start(rc);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(WaitReady(**p) && WaitReady(**d) && WaitReady(**r));
    HttpResponse got = Post(**r, "/v1/completions", body);
    ASSERT_EQ(got.status, 200) << got.body;
    ASSERT_EQ(tokens_of(got).size(), 12u) << got.body;
    // BF16 on both sides is exact; an FP8 decode pool reads its own rounding of the pages.
    if (decode_kv == "bf16") {
      EXPECT_EQ(tokens_of(got), tokens_of(expected));
    }
    EXPECT_GT(MetricValue(Metrics(**d), "tandem_kv_transfer_bytes_total", "direction=\"in\""), 0);
  }
}

// A client that goes away mid-stream cancels its request on the decode member too.
TEST(AgentE2eTest, ClientDisconnectCancelsEverywhere) {
  Stack s = StartStack({});
  ASSERT_TRUE(s.router);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(s.router->http_port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string body = CompletionBody("a very long story, please", 900, true);
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  char buf[4096];
  ASSERT_GT(recv(fd, buf, sizeof(buf), 0), 0);  // the stream has started
  close(fd);
  EXPECT_EQ(WaitMetricAtLeast(*s.decode, "tandem_requests_finished_total", "reason=\"cancelled\"", 1), 1);
  EXPECT_EQ(MetricValue(Metrics(*s.decode), "tandem_requests_finished_total", "reason=\"length\""), 0);
}

class FaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    StackOptions o;
    o.decode_kv = "fp8_e4m3";
    o.transfer_timeout_ms = 1'500;
    stack_ = new Stack(StartStack(o));
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }

  // Runs `victim_fault` on one request while three others run; the others must match their
  // fault-free answers.
  void RunWithVictim(const std::string& fault) {
    ASSERT_TRUE(stack_->router);
    const Agent& router = *stack_->router;
    std::vector<std::string> prompts = {"alpha beta gamma", "one two three four five", "red green blue"};
    std::vector<std::string> expected;
    for (const std::string& p : prompts)
      expected.push_back(TextOf(Post(router, "/v1/completions", CompletionBody(p, 16))));
    std::vector<std::future<HttpResponse>> others;
    for (const std::string& p : prompts) {
      others.push_back(std::async(std::launch::async, [&router, p] {
        return Post(router, "/v1/completions", CompletionBody(p, 16));
      }));
    }
    HttpResponse victim =
        Post(router, "/v1/completions", CompletionBody("the victim prompt", 16), {{"x-tandem-fault", fault}});
    EXPECT_GE(victim.status, 500) << victim.body;
    EXPECT_NE(victim.body.find("\"error\""), std::string::npos) << victim.body;
    for (size_t i = 0; i < others.size(); ++i) {
      HttpResponse r = others[i].get();
      EXPECT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(TextOf(r), expected[i]);
    }
  }

  static Stack* stack_;
};

Stack* FaultTest::stack_ = nullptr;

TEST_F(FaultTest, DigestMismatchAbortsOnlyTheVictim) {
  RunWithVictim("digest");
  EXPECT_EQ(MetricValue(Metrics(*stack_->decode), "tandem_kv_transfer_failures_total",
                        "reason=\"digest_mismatch\""),
            1);
}

TEST_F(FaultTest, PageTagFaultAbortsOnlyTheVictim) {
  RunWithVictim("tag");
  EXPECT_EQ(
      MetricValue(Metrics(*stack_->decode), "tandem_kv_transfer_failures_total", "reason=\"tag_mismatch\""),
      1);
}

TEST_F(FaultTest, LateWriteIsRefusedAndOnlyTheVictimAborts) {
  RunWithVictim("late_write");
  EXPECT_GE(
      WaitMetricAtLeast(*stack_->decode, "tandem_kv_transfer_failures_total", "reason=\"late_write\"", 1), 1);
  // The abandoned transfer itself ended once, aborted (its stream ended without a trailer).
  EXPECT_EQ(MetricValue(Metrics(*stack_->decode), "tandem_kv_transfer_failures_total", "reason=\"aborted\""),
            1);
}

TEST_F(FaultTest, HungTransferTimesOutIntoOneTerminalState) {
  const auto start = std::chrono::steady_clock::now();
  RunWithVictim("hang");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // Both sides' deadlines end it; nothing stays held.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  double running = -1;
  while (std::chrono::steady_clock::now() < until) {
    running = MetricValue(Metrics(*stack_->decode), "tandem_requests_running");
    if (running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
  EXPECT_GE(WaitMetricAtLeast(*stack_->decode, "tandem_kv_transfer_failures_total", "reason=\"timeout\"", 1),
            1);
}

TEST(AgentE2eTest, UnknownModelAuthAndBadBodies) {
  AgentConfig sc = BaseConfig(Role::kStandalone);
  sc.api_keys = {MakeApiKey("k1", "tenant-a")};
  sc.max_body_bytes = 4096;
  auto a = Agent::Start(sc);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const Agent& agent = **a;
  const std::vector<std::pair<std::string, std::string>> auth = {{"Authorization", "Bearer k1"}};
  EXPECT_EQ(Post(agent, "/v1/completions", CompletionBody("hi", 2)).status, 401);
  EXPECT_EQ(
      Post(agent, "/v1/completions", CompletionBody("hi", 2), {{"Authorization", "Bearer nope"}}).status,
      401);
  EXPECT_EQ(Post(agent, "/v1/completions", CompletionBody("hi", 2), auth).status, 200);
  json wrong = json::parse(CompletionBody("hi", 2));
  wrong["model"] = "gpt-9";
  HttpResponse nf = Post(agent, "/v1/completions", wrong.dump(), auth);
  EXPECT_EQ(nf.status, 404);
  EXPECT_NE(nf.body.find("model_not_found"), std::string::npos);
  EXPECT_EQ(Post(agent, "/v1/completions", "{not json", auth).status, 400);
  EXPECT_EQ(Post(agent, "/v1/completions", std::string(5000, ' '), auth).status, 413);
  std::string deep =
      "{\"model\":\"tiny\",\"prompt\":\"x\",\"extra\":" + std::string(65, '[') + std::string(65, ']') + "}";
  EXPECT_EQ(Post(agent, "/v1/completions", deep, auth).status, 400);
  HttpResponse models = HttpCall(agent.http_port(), "GET", "/v1/models", "", auth);
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "tiny");
  // The context limit is checked before any work.
  HttpResponse too_long = Post(agent, "/v1/completions", CompletionBody("hi", 1 << 20), auth);
  EXPECT_EQ(too_long.status, 400) << too_long.body;
}

// A wedged engine (its step thread stalled: fault injection) turns /readyz 503, and 200 again
// once it moves.
TEST(AgentE2eTest, WedgedEngineTurnsNotReady) {
  AgentConfig sc = BaseConfig(Role::kStandalone);
  sc.probe_period_ms = 50;
  sc.probe_timeout_ms = 500;
  auto a = Agent::Start(sc);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(WaitReady(**a));
  Agent* agent = a->get();
  EXPECT_EQ(HttpCall(agent->metrics_port(), "GET", "/readyz").status, 200);
  auto wedged = std::async(std::launch::async, [agent] {
    return Post(*agent, "/v1/completions", CompletionBody("stall here", 2), {{"x-tandem-fault", "wedge"}});
  });
  int status = 200;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (status == 200 && std::chrono::steady_clock::now() < until) {
    status = HttpCall(agent->metrics_port(), "GET", "/readyz").status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 503);
  EXPECT_EQ(wedged.get().status, 200);  // the stalled request itself completes once the engine moves
  EXPECT_TRUE(WaitReady(*agent, std::chrono::seconds(10)));
}

// Per-tenant admission through the API: with tenant a at its cap (one slot, no queue), a's next
// request is shed at once with 429 + Retry-After while tenant b is still admitted.
TEST(AgentE2eTest, ATenantAtItsCapIsShedWhileAnotherIsAdmitted) {
  AgentConfig sc = BaseConfig(Role::kStandalone);
  sc.api_keys = {MakeApiKey("ka", "a"), MakeApiKey("kb", "b")};
  sc.max_inflight = 2;
  sc.tenant_max_inflight = 1;
  sc.max_queued_per_tenant = 0;
  auto started = Agent::Start(sc);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  Agent* agent = started->get();
  ASSERT_TRUE(WaitReady(*agent));
  const std::pair<std::string, std::string> key_a{"Authorization", "Bearer ka"},
      key_b{"Authorization", "Bearer kb"};
  // a's first request holds its slot for ~3 s (the engine stalls in its first output).
  auto held = std::async(std::launch::async, [&] {
    return Post(*agent, "/v1/completions", CompletionBody("hold the slot", 2),
                {key_a, {"x-tandem-fault", "wedge"}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  HttpResponse shed = Post(*agent, "/v1/completions", CompletionBody("one more", 2), {key_a});
  EXPECT_EQ(shed.status, 429) << shed.body;
  EXPECT_NE(shed.headers.find("Retry-After: 1"), std::string::npos) << shed.headers;
  EXPECT_NE(shed.body.find("rate_limit_error"), std::string::npos) << shed.body;
  HttpResponse other = Post(*agent, "/v1/completions", CompletionBody("another tenant", 2), {key_b});
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(held.get().status, 200);
  // The slot came back: a is admitted again.
  EXPECT_EQ(Post(*agent, "/v1/completions", CompletionBody("again", 2), {key_a}).status, 200);
}

TEST(AgentE2eTest, DrainLetsInFlightRequestsFinish) {
  AgentConfig sc = BaseConfig(Role::kStandalone);
  auto a = Agent::Start(sc);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(WaitReady(**a));
  Agent* agent = a->get();
  auto in_flight = std::async(std::launch::async, [agent] {
    return Post(*agent, "/v1/completions", CompletionBody("a long answer please", 64));
  });
  // Wait until it runs, then drain with a generous grace: it completes.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (MetricValue(Metrics(*agent), "tandem_requests_running") < 1 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::thread drain([agent] { agent->Shutdown(30'000); });
  HttpResponse r = in_flight.get();
  drain.join();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 64);
}

// A decode member that starts draining while a router still counts it ready (its next poll is
// far away): the requests the router sends it are refused before any token and go to the other
// member, so none fails; the draining member's preStop answer (GET /drain) comes once it is idle.
TEST(AgentE2eTest, DrainingMemberHandsRequestsBack) {
  auto prefill = Agent::Start(BaseConfig(Role::kPrefill));
  auto leaving = Agent::Start(BaseConfig(Role::kDecode));
  auto staying = Agent::Start(BaseConfig(Role::kDecode));
  ASSERT_TRUE(prefill.ok() && leaving.ok() && staying.ok());
  ASSERT_TRUE(WaitReady(**prefill) && WaitReady(**leaving) && WaitReady(**staying));
  AgentConfig rc = BaseConfig(Role::kRouter);
  rc.refresh_ms = 600'000;  // the router's only poll is at its start
  rc.prefill_endpoints = {"127.0.0.1:" + std::to_string((*prefill)->grpc_port())};
  rc.decode_endpoints = {"127.0.0.1:" + std::to_string((*leaving)->grpc_port()),
                         "127.0.0.1:" + std::to_string((*staying)->grpc_port())};
  auto router = Agent::Start(rc);
  ASSERT_TRUE(router.ok());
  ASSERT_TRUE(WaitReady(**router));

  (*leaving)->BeginDrain();
  EXPECT_EQ(HttpCall((*leaving)->metrics_port(), "GET", "/readyz", "").status, 503);
  // Four at once: the router spreads them over both members it believes ready, so the leaving
  // one is tried by at least one of them.
  std::vector<std::future<HttpResponse>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::async(std::launch::async, [&router, i] {
      return Post(**router, "/v1/completions", CompletionBody("handed back " + std::to_string(i), 8));
    }));
  }
  for (auto& c : calls) {
    HttpResponse r = c.get();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 8) << r.body;
  }
  EXPECT_EQ(MetricValue(Metrics(**leaving), "tandem_kv_transfer_bytes_total", "direction=\"in\""), 0);
  EXPECT_GT(MetricValue(Metrics(**staying), "tandem_kv_transfer_bytes_total", "direction=\"in\""), 0);
  HttpResponse drained = HttpCall((*leaving)->metrics_port(), "GET", "/drain", "");
  EXPECT_EQ(drained.status, 200);
  EXPECT_EQ(drained.body, "drained\n");
  const auto start = std::chrono::steady_clock::now();
  (*leaving)->Shutdown(30'000);  // idle: no second grace period
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace tandem::agent::testing
