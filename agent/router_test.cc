#include "agent/router.h"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/prefix_blocks.h"
#include "agent/wire.h"

namespace tandem::agent {
namespace {

MemberStatus Member(std::string endpoint, uint64_t running, uint64_t used = 0, uint64_t capacity = 1000) {
  MemberStatus m;
  m.endpoint = std::move(endpoint);
  m.healthy = true;
  m.running = running;
  m.kv_used_tokens = used;
  m.kv_capacity_tokens = capacity;
  return m;
}

std::vector<int32_t> Tokens(int n, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(i * 3 + salt);
  return t;
}

TEST(PrefixBlocksTest, HashesChainWholePagesAndTheTenant) {
  const std::vector<int32_t> a = Tokens(40);
  std::vector<int32_t> b = a;
  b[20] += 1;  // differs in the second page
  const auto ha = PrefixBlockHashes("t1", a, 16), hb = PrefixBlockHashes("t1", b, 16);
  ASSERT_EQ(ha.size(), 2u);  // 40 tokens: two whole pages
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);
  EXPECT_NE(PrefixBlockHashes("t2", a, 16)[0], ha[0]);  // another tenant shares nothing
  std::vector<int32_t> c = a;
  c[0] += 1;  // a first-page change changes every later block too
  EXPECT_NE(PrefixBlockHashes("t1", c, 16)[1], ha[1]);
  EXPECT_TRUE(PrefixBlockHashes("t1", Tokens(15), 16).empty());
}

TEST(PrefixBlocksTest, RecordIsBoundedMostRecentFirst) {
  PrefixBlockRecord record(3);
  record.Add(std::vector<uint64_t>{1, 2, 3});
  record.Add(std::vector<uint64_t>{4});
  EXPECT_EQ(record.Snapshot(10), (std::vector<uint64_t>{4, 3, 2}));
  record.Add(std::vector<uint64_t>{2});
  EXPECT_EQ(record.Snapshot(2), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(record.size(), 3u);
}

TEST(RouterPickTest, PrefillPrefersTheLongestHeldPrefixUnlessFarBusier) {
  const std::vector<uint64_t> blocks = PrefixBlockHashes("t", Tokens(160), 16);  // 10 blocks
  std::vector<MemberStatus> m = {Member("a:1", 0), Member("b:1", 2)};
  m[1].prefix_blocks.insert(blocks.begin(), blocks.begin() + 6);  // b holds 6 leading blocks
  EXPECT_EQ(PickPrefill(m, blocks, {}), 1);                       // 6 blocks beat 2 queued requests
  m[1].running = 9;
  EXPECT_EQ(PickPrefill(m, blocks, {}), 0);  // but not 9
  m[1].running = 0;
  m[0].prefix_blocks.insert(blocks[1]);  // a non-leading block counts for nothing
  EXPECT_EQ(PickPrefill(m, blocks, {}), 1);
  EXPECT_EQ(PickPrefill(m, blocks, {"b:1"}), 0);
  m[0].healthy = false;
  EXPECT_EQ(PickPrefill(m, blocks, {"b:1"}), -1);
}

TEST(RouterPickTest, PrefillWithoutAffinityTakesTheLeastLoaded) {
  std::vector<MemberStatus> m = {Member("a:1", 3), Member("b:1", 1), Member("c:1", 2)};
  EXPECT_EQ(PickPrefill(m, {}, {}), 1);
  m[1].routed = 5;  // what this router already sent it counts too
  EXPECT_EQ(PickPrefill(m, {}, {}), 2);
}

TEST(RouterPickTest, DecodeByKvOccupancyAndQueue) {
  std::vector<MemberStatus> m = {Member("a:1", 0, 900), Member("b:1", 2, 100)};
  EXPECT_EQ(PickDecode(m, {}), 1);  // 0.9 * 8 + 0 > 0.1 * 8 + 2
  m[1].running = 8;
  EXPECT_EQ(PickDecode(m, {}), 0);
  m[0].healthy = false;
  EXPECT_EQ(PickDecode(m, {}), 1);
  EXPECT_EQ(PickDecode(m, {"b:1"}), -1);
}

TEST(RouterTest, ResolvesAServiceNameToEveryAddress) {
  StatusOr<std::vector<std::string>> r = ResolveService("localhost:50051");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->empty());
  for (const std::string& e : *r) EXPECT_TRUE(e == "127.0.0.1:50051" || e == "[::1]:50051") << e;
  EXPECT_EQ(ResolveService("no-port").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveService("nonexistent.invalid:1").status().code(), StatusCode::kUnavailable);
}

TEST(RouterTest, NotReadyWithoutMembersAnswering) {
  AgentConfig c;
  c.role = Role::kRouter;
  c.prefill_endpoints = {"127.0.0.1:1"};  // nothing listens there
  c.decode_endpoints = {"127.0.0.1:2"};
  metrics::AgentMetrics m("d", "router", "router");
  auto router = Router::Start(c, &m);
  ASSERT_TRUE(router.ok());
  EXPECT_EQ((*router)->Ready().code(), StatusCode::kUnavailable);
  GenerateCall call;
  call.prompt = {1, 2, 3};
  EXPECT_EQ((*router)->Start(call).status().code(), StatusCode::kUnavailable);
}

TEST(WireTest, LayoutAndSamplingRoundTrip) {
  engine::kv::KvLayout l;
  l.dtype = engine::KvCacheDtype::kFp8E4M3;
  l.page_tokens = 16;
  l.shape.num_layers = 2;
  l.shape.kv_lora_rank = 512;
  l.shape.rope_dim = 64;
  l.shape.index_head_dim = 128;
  l.shape.index_layers = {true, false};
  l.page_bytes = 4242;
  l.fp8_layer_scales = {0.5f, 0.25f};
  v1::KvLayout p;
  ToProto(l, &p);
  StatusOr<engine::kv::KvLayout> back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shape, l.shape);
  EXPECT_EQ(back->page_bytes, l.page_bytes);
  EXPECT_EQ(back->fp8_layer_scales, l.fp8_layer_scales);
  p.clear_fp8_layer_scales();
  EXPECT_FALSE(FromProto(p).ok());  // FP8 without its scales
  p.set_dtype(v1::KV_DTYPE_UNSPECIFIED);
  EXPECT_FALSE(FromProto(p).ok());

  engine::runtime::SamplingParams s;
  s.temperature = 0;
  s.seed = 7;
  s.stop = {"x"};
  s.logprobs = 3;
  v1::SamplingParams sp;
  ToProto(s, &sp);
  engine::runtime::SamplingParams s2 = FromProto(sp);
  EXPECT_EQ(s2.temperature, 0);
  EXPECT_EQ(s2.seed, std::optional<uint64_t>(7));
  EXPECT_EQ(s2.stop, s.stop);
  EXPECT_EQ(s2.logprobs, 3);
  EXPECT_TRUE(s2.skip_special_tokens);  // the default, as an older peer sends it (field unset)
  s.skip_special_tokens = false;        // a chat request with tools: the markers reach the parser
  ToProto(s, &sp);
  EXPECT_FALSE(FromProto(sp).skip_special_tokens);
}

TEST(WireTest, TokenEventsAreCheckedFromTheNetwork) {
  v1::TokenEvent e;
  e.add_token_ids(5);
  e.add_logprobs(-0.5f);
  e.add_logprobs(-0.7f);  // more logprobs than tokens
  EXPECT_FALSE(FromProto(e).ok());
  e.clear_logprobs();
  e.set_finish_reason("exploded");
  EXPECT_FALSE(FromProto(e).ok());
  e.set_finish_reason("length");
  StatusOr<StreamEvent> ok = FromProto(e);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->finish, engine::runtime::FinishReason::kLength);
}

TEST(MembersFileTest, HostPortLinesWithCommentsAndBlanks) {
  auto m = ParseMembersText("# decode pool\n127.0.0.1:50051\n\n  10.0.0.7:50051  # second\n[::1]:7000\n");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (std::vector<std::string>{"127.0.0.1:50051", "10.0.0.7:50051", "[::1]:7000"}));
  auto empty = ParseMembersText("");  // a pool scaled to zero
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(MembersFileTest, BadLinesAreErrorsThatNameTheLine) {
  for (const char* bad : {"127.0.0.1\n", "a:b:c:\n", "host:99999\n", "host:12x\n", "two words:80\n", ":80\n",
                          "ok:1\nhost:123456\n"}) {
    auto m = ParseMembersText(bad);
    EXPECT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.status().message().find("line "), std::string::npos) << m.status().ToString();
  }
  auto second = ParseMembersText("ok:1\nnope\n");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("line 2"), std::string::npos) << second.status().ToString();
}

TEST(MembersFileTest, MissingAndOversizedFiles) {
  EXPECT_EQ(ReadMembersFile("/nonexistent/tandem-members").status().code(), StatusCode::kNotFound);
  const std::string path = ::testing::TempDir() + "/tandem_members_big";
  {
    std::ofstream out(path);
    for (int i = 0; i < 80'000; ++i) out << "10.0.0.1:50051\n";  // 1.2 MB
  }
  auto big = ReadMembersFile(path);
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument) << big.status().ToString();
  {
    std::ofstream out(path);
    out << "10.0.0.1:50051\n10.0.0.2:50051\n";
  }
  auto ok = ReadMembersFile(path);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 2u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::agent
