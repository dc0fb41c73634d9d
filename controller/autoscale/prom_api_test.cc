// The pure half of the Prometheus signal source: selector templates and their escaping, the PromQL
// of each signal, durations, URLs, and instant-query answers as untrusted input.
#include "controller/autoscale/prom_api.h"

#include <limits>

#include <gtest/gtest.h>

namespace tandem::controller::autoscale {
namespace {

const PoolLabelValues kLabels{"ml", "llama", "decode"};

TEST(PromSelector, DefaultTemplatesExpandToTheAgentsLabels) {
  ASSERT_TRUE(CheckSelectorTemplate(kDefaultPromSelector).ok());
  ASSERT_TRUE(CheckSelectorTemplate(kDefaultPromLatencySelector).ok());
  EXPECT_EQ(ExpandSelector(kDefaultPromSelector, kLabels),
            R"(namespace="ml",deployment="llama",pool="decode")");
  EXPECT_EQ(ExpandSelector(kDefaultPromLatencySelector, kLabels),
            R"(namespace="ml",deployment="llama",pool="router")");
  // Placeholders may repeat, sit in regexes, or be left out.
  EXPECT_EQ(ExpandSelector(R"(kubernetes_namespace="{namespace}",app=~"{deployment}-{pool}|{deployment}")",
                           kLabels),
            R"(kubernetes_namespace="ml",app=~"llama-decode|llama")");
  EXPECT_EQ(ExpandSelector(R"(job="tandem")", kLabels), R"(job="tandem")");
}

TEST(PromSelector, LabelValuesAreEscapedAsPromQLStrings) {
  EXPECT_EQ(EscapePromQLString("plain-name.1"), "plain-name.1");
  EXPECT_EQ(EscapePromQLString(R"(a"b\c)"), R"(a\"b\\c)");
  EXPECT_EQ(EscapePromQLString("l1\nl2\r\t"), R"(l1\nl2\r\t)");
  EXPECT_EQ(EscapePromQLString(std::string("\x01\x7f", 2)), R"(\x01\x7f)");
  EXPECT_EQ(EscapePromQLString("naïve"), "naïve");  // UTF-8 passes through
  // A value cannot close the string and add a matcher of its own.
  const PoolLabelValues evil{R"(ml",pool!="x)", "d", "decode"};
  EXPECT_EQ(ExpandSelector(R"(namespace="{namespace}")", evil), R"(namespace="ml\",pool!=\"x")");
  // Nor does a value that looks like a placeholder get expanded again.
  const PoolLabelValues nested{"{pool}", "d", "decode"};
  EXPECT_EQ(ExpandSelector(R"(namespace="{namespace}",pool="{pool}")", nested),
            R"(namespace="{pool}",pool="decode")");
}

TEST(PromSelector, MalformedTemplatesAreRefused) {
  for (const char* bad : {"", R"(namespace="{ns}")", R"(pool="{pool")", R"(a="b"})", R"(a=~"x{2}")",
                          R"(namespace="{namespace}"{)"}) {
    const Status s = CheckSelectorTemplate(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(CheckSelectorTemplate(std::string(kMaxSelectorTemplateBytes + 1, 'a')).ok());
  EXPECT_NE(CheckSelectorTemplate(R"(namespace="{ns}")").message().find("byte 11"), std::string::npos);
}

TEST(PromQuery, EachSignalsPromQL) {
  const std::string sel = R"(namespace="ml",deployment="llama",pool="decode")";
  EXPECT_EQ(
      SignalQuery(PoolSignal::kKvCacheUsage, sel, "2m"),
      R"(avg((tandem_kv_cache_usage_ratio{namespace="ml",deployment="llama",pool="decode"} >= 0) < +Inf))");
  EXPECT_EQ(SignalQuery(PoolSignal::kWaitingRequests, sel, "2m"),
            R"(sum((tandem_requests_waiting{namespace="ml",deployment="llama",pool="decode"} >= 0) < +Inf))");
  EXPECT_EQ(SignalQuery(PoolSignal::kWaitingPrefillTokens, "a=\"b\"", "2m"),
            R"(sum((tandem_prefill_tokens_waiting{a="b"} >= 0) < +Inf))");
  EXPECT_EQ(
      SignalQuery(PoolSignal::kItlP95, "a=\"b\"", "5m"),
      "histogram_quantile(0.95, sum by (le) (rate(tandem_inter_token_latency_seconds_bucket{a=\"b\"}[5m])))");
  EXPECT_EQ(SignalQuery(PoolSignal::kTtftP95, "a=\"b\"", "90s"),
            "histogram_quantile(0.95, sum by (le) "
            "(rate(tandem_time_to_first_token_seconds_bucket{a=\"b\"}[90s])))");
}

TEST(PromQuery, SignalsFollowTheRole) {
  EXPECT_EQ(SignalsForRole("decode"),
            (std::vector<PoolSignal>{PoolSignal::kKvCacheUsage, PoolSignal::kWaitingRequests,
                                     PoolSignal::kItlP95}));
  EXPECT_EQ(SignalsForRole("prefill"),
            (std::vector<PoolSignal>{PoolSignal::kTtftP95, PoolSignal::kWaitingPrefillTokens}));
  EXPECT_TRUE(SignalsForRole("router").empty());
  EXPECT_TRUE(SignalsForRole("").empty());
  EXPECT_TRUE(IsLatencySignal(PoolSignal::kItlP95));
  EXPECT_TRUE(IsLatencySignal(PoolSignal::kTtftP95));
  EXPECT_FALSE(IsLatencySignal(PoolSignal::kKvCacheUsage));
  EXPECT_EQ(PoolSignalName(PoolSignal::kWaitingPrefillTokens), "waiting_prefill_tokens");
}

TEST(PromQuery, UrlQueryEscaping) {
  EXPECT_EQ(UrlQueryEscape("sum(x{a=\"b c\"}) < +Inf&y"),
            "sum%28x%7Ba%3D%22b%20c%22%7D%29%20%3C%20%2BInf%26y");
  EXPECT_EQ(UrlQueryEscape("A-z_0.9~"), "A-z_0.9~");
  EXPECT_EQ(UrlQueryEscape("\xc3\xa9"), "%C3%A9");
}

TEST(PromDuration, AcceptsPrometheusDurations) {
  EXPECT_EQ(ParsePromDurationMs("2m").value_or(-1), 120'000);
  EXPECT_EQ(ParsePromDurationMs("30s").value_or(-1), 30'000);
  EXPECT_EQ(ParsePromDurationMs("500ms").value_or(-1), 500);
  EXPECT_EQ(ParsePromDurationMs("1h30m").value_or(-1), 5'400'000);
  EXPECT_EQ(ParsePromDurationMs("1m30s500ms").value_or(-1), 90'500);
  EXPECT_EQ(ParsePromDurationMs("1d").value_or(-1), 86'400'000);
  EXPECT_EQ(ParsePromDurationMs("1w").value_or(-1), 604'800'000);
  EXPECT_EQ(ParsePromDurationMs("1y").value_or(-1), 31'536'000'000);
}

TEST(PromDuration, RefusesAnythingElse) {
  for (const char* bad : {"", "2", "m", "0s", "0m0s", "-1m", "1.5m", "2 m", "2M", "30s2m", "1m1m", "2mm",
                          "1h]", "1m30", "11y", "99999999999999999999s", "2m)[5m"}) {
    const StatusOr<int64_t> d = ParsePromDurationMs(bad);
    EXPECT_FALSE(d.ok()) << bad << " -> " << d.value_or(0);
  }
}

TEST(PromServerUrl, SplitsServerAndPathPrefix) {
  StatusOr<PromServerUrl> u = ParsePromServerUrl("http://prometheus.monitoring:9090");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->server, "http://prometheus.monitoring:9090");
  EXPECT_EQ(u->path_prefix, "");
  u = ParsePromServerUrl("https://thanos.example.com/prometheus/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->server, "https://thanos.example.com");
  EXPECT_EQ(u->path_prefix, "/prometheus");
  u = ParsePromServerUrl("http://[::1]:9090/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->server, "http://[::1]:9090");
  EXPECT_EQ(u->path_prefix, "");
  for (const char* bad : {"", "prometheus:9090", "ftp://h", "http://", "http:///x", "http://user:pw@h:9090",
                          "http://h:0", "http://h:99999", "http://h:x", "http://h/a?b=c", "http://h/#f",
                          "http://h/a b", "http://h\r\nX: y"}) {
    EXPECT_FALSE(ParsePromServerUrl(bad).ok()) << bad;
  }
}

std::optional<double> Value(std::string_view body, int http_status = 200) {
  StatusOr<std::optional<double>> v = ParseInstantAnswer(http_status, body, 1 << 20);
  EXPECT_TRUE(v.ok()) << v.status().ToString() << " for " << body;
  return v.ok() ? *v : std::nullopt;
}

Status Error(std::string_view body, int http_status = 200, size_t max_bytes = 1 << 20) {
  StatusOr<std::optional<double>> v = ParseInstantAnswer(http_status, body, max_bytes);
  EXPECT_FALSE(v.ok()) << body;
  return v.status();
}

std::string Answer(std::string_view value) {
  return R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.5,")" +
         std::string(value) + R"("]}]}})";
}

TEST(PromAnswer, AValue) {
  EXPECT_EQ(Value(Answer("0.75")), 0.75);
  EXPECT_EQ(Value(Answer("0")), 0.0);
  EXPECT_EQ(Value(Answer("1e3")), 1000.0);
  EXPECT_EQ(Value(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"le":"x"},)"
                  R"("value":[1,"12"]}]},"warnings":["w"],"infos":[]})"),
            12.0);  // extra fields are ignored
}

TEST(PromAnswer, NoValueIsAnAbsentSignalNotZero) {
  EXPECT_EQ(Value(R"({"status":"success","data":{"resultType":"vector","result":[]}})"), std::nullopt);
  for (const char* v : {"NaN", "+Inf", "-Inf", "Inf", "-0.5"}) EXPECT_EQ(Value(Answer(v)), std::nullopt) << v;
}

TEST(PromAnswer, ErrorAnswersAndMalformedBodiesAreErrors) {
  const Status bad_query =
      Error(R"({"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected \"}\""})", 400);
  EXPECT_EQ(bad_query.code(), StatusCode::kUnavailable);
  EXPECT_NE(bad_query.message().find("HTTP 400"), std::string::npos);
  EXPECT_NE(bad_query.message().find("bad_data: 1:5: parse error"), std::string::npos) << bad_query.message();
  EXPECT_EQ(Error(Answer("1"), 503).code(), StatusCode::kUnavailable);  // a good body, a bad status
  EXPECT_EQ(Error("<html>Bad Gateway</html>", 502).code(), StatusCode::kUnavailable);
  EXPECT_EQ(Error(R"({"status":"error","errorType":"timeout","error":"query timed out"})").code(),
            StatusCode::kUnavailable);  // status error, even with a 200
  EXPECT_EQ(Error(R"({"data":{"resultType":"vector","result":[]}})").code(), StatusCode::kUnavailable);

  const char* malformed[] = {
      "",
      "not json",
      "[]",
      "null",
      R"({"status":"success"})",
      R"({"status":"success","data":[]})",
      R"({"status":"success","data":{"resultType":"scalar","result":[1,"2"]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
      R"({"status":"success","data":{"resultType":"vector"}})",
      R"({"status":"success","data":{"resultType":"vector","result":{}}})",
      R"({"status":"success","data":{"resultType":"vector","result":[1]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,2]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2","3"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"two"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2 "]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]},{"value":[1,"2"]}]}})",
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"0.5"]}]})",  // truncated
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"0.5"]}]}} trailing)",
  };
  for (const char* body : malformed) EXPECT_EQ(Error(body).code(), StatusCode::kInvalidArgument) << body;
}

TEST(PromAnswer, HugeAndDeepBodiesAreRefusedBeforeParsing) {
  std::string huge = Answer("1");
  huge.insert(huge.size() - 1, ",\"pad\":\"" + std::string(2 << 20, 'x') + "\"");
  EXPECT_EQ(Error(huge).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Error(Answer("1"), 200, 16).code(), StatusCode::kResourceExhausted);
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_EQ(Error(deep, 200, 1 << 20).code(), StatusCode::kInvalidArgument);
  std::string deep_inside = Answer("1");
  deep_inside.insert(deep_inside.size() - 1, ",\"x\":" + std::string(50, '[') + std::string(50, ']'));
  EXPECT_EQ(Error(deep_inside).code(), StatusCode::kInvalidArgument);
  // Binary garbage and invalid UTF-8 never throw out of the parser.
  EXPECT_FALSE(ParseInstantAnswer(200, std::string("\xff\xfe\x00{\"", 5), 1 << 20).ok());
  EXPECT_FALSE(ParseInstantAnswer(200, "{\"status\":\"\xff\"}", 1 << 20).ok());
}

}  // namespace
}  // namespace tandem::controller::autoscale
